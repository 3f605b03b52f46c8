#!/usr/bin/env bash
# Bring the Korean catalogs up to date with the code, for maintainers (needs GNU gettext: apt-get install gettext).
#
#   bash scripts/i18n.sh
#
# 1. makemessages extracts every marked string of the templates and Python (domain "django") and of
#    static/judging/*.js (domain "djangojs") into locale/ko/LC_MESSAGES/{django,djangojs}.po: new strings come
#    in untranslated, strings no longer in the code go (--no-obsolete); .venv, tests, bench and node_modules
#    are not read.
# 2. If translation parts exist (locale/ko/parts/*.po: each area's translations, written beside its code),
#    they fill the catalogs: every string that a part translates takes the part's translation; the others
#    keep what the catalog had. Nothing else is deleted.
# Then scripts/compile_messages.py compiles them, and tests/i18n/test_catalog.py names anything left
# untranslated or fuzzy.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}}
PY=${PY:-.venv/bin/python}
for tool in xgettext msgmerge msgcat; do
  command -v "$tool" >/dev/null || { echo "scripts/i18n.sh needs GNU gettext ($tool): apt-get install gettext" >&2; exit 1; }
done

export RELJUDGE_ALLOW_DEV_SECRET=1
ignore=(-i ".venv/*" -i "tests/*" -i "bench/*" -i "node_modules/*" -i "staticfiles/*" -i "static/vendor/*")
"$PY" manage.py makemessages -l ko -d django --no-location --no-obsolete "${ignore[@]}"
"$PY" manage.py makemessages -l ko -d djangojs --no-location --no-obsolete "${ignore[@]}"

shopt -s nullglob
parts=(locale/ko/parts/*.po)
if [ ${#parts[@]} -gt 0 ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  # One compendium of every part (the first part that translates a string wins), put in front of each
  # catalog, then merged against the catalog's own list of strings: the parts' translations come first,
  # strings no part knows keep the catalog's, and no string the code lacks is added.
  msgcat --use-first --no-location -o "$tmp/compendium.po" "${parts[@]}"
  # The catalogs' own header, ahead of the parts' headers.
  cat > "$tmp/header.po" <<'PO'
# The Korean catalog of RelJudge. Do not edit by hand: translate in locale/ko/parts/*.po, then run
# scripts/i18n.sh, which extracts the strings of the code and fills this file from the parts.
msgid ""
msgstr ""
"Project-Id-Version: RelJudge\n"
"Language: ko\n"
"MIME-Version: 1.0\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Content-Transfer-Encoding: 8bit\n"
"Plural-Forms: nplurals=1; plural=0;\n"
PO
  for domain in django djangojs; do
    po=locale/ko/LC_MESSAGES/$domain.po
    [ -f "$po" ] || continue
    msgcat --use-first --no-location -o "$tmp/$domain-all.po" "$tmp/header.po" "$tmp/compendium.po" "$po"
    msgmerge --quiet --no-fuzzy-matching --no-location --no-wrap -o "$tmp/$domain.po" "$tmp/$domain-all.po" "$po"
    # msgmerge keeps entries of the compendium the catalog lacks as obsolete (#~): drop them.
    msgattrib --no-obsolete --no-location --no-wrap -o "$po" "$tmp/$domain.po"
  done
fi
"$PY" scripts/compile_messages.py
