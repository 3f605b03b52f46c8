#!/usr/bin/env bash
# Type-check the project with mypy, as CI does (.ci/run). The configuration is in pyproject.toml: django-stubs'
# and djangorestframework-stubs' plugins reading config.test_settings; metrics/, judging/services/,
# judging/selectors/, judging/scoring/ and judging/access.py strict, the rest of judging/ and config/ at mypy's
# default level; migrations, tests and bench left out.
#
#   bash scripts/typecheck.sh                                  # the whole project
#   bash scripts/typecheck.sh judging/selectors/online.py      # some files (with what they import)
#
# The cache (.mypy_cache/) makes a second run take seconds instead of a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}}
PY=${PY:-.venv/bin/python}
exec "$PY" -m mypy "$@"
