#!/usr/bin/env bash
# Bring the Korean catalogs up to date with the code (needs GNU gettext: apt-get install gettext).
#
#   bash scripts/i18n.sh
#
# The catalogs are locale/ko/LC_MESSAGES/django.po (templates and Python) and djangojs.po (static/judging/*.js),
# one file per domain, translated in place. makemessages extracts every marked string: new strings come in
# untranslated, strings no longer in the code go (--no-obsolete), translations already there stay; .venv, tests,
# bench and node_modules are not read. No locations, no line wrapping and no creation date are written, so
# an entry is a few lines that change only when its string does, and two branches that each add a string
# touch different lines. Then scripts/compile_messages.py compiles the catalogs, and
# tests/i18n/test_catalog.py names anything left untranslated or fuzzy.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}}
PY=${PY:-.venv/bin/python}
for tool in xgettext msgmerge; do
  command -v "$tool" >/dev/null || { echo "scripts/i18n.sh needs GNU gettext ($tool): apt-get install gettext" >&2; exit 1; }
done

export RELJUDGE_ALLOW_DEV_SECRET=1
ignore=(-i ".venv/*" -i "tests/*" -i "bench/*" -i "node_modules/*" -i "staticfiles/*" -i "static/vendor/*")
for domain in django djangojs; do
  "$PY" manage.py makemessages -l ko -d "$domain" --no-location --no-obsolete --no-wrap "${ignore[@]}"
  # The extraction time would change on every run and make two branches' catalogs conflict on that line.
  sed -i '/^"POT-Creation-Date: /d' "locale/ko/LC_MESSAGES/$domain.po"
done
"$PY" scripts/compile_messages.py
