#!/usr/bin/env bash
# Create .venv with Python 3.11 and install the locked requirements (runtime, or runtime + test tools with --dev).
# The lock files pin every package with its hashes, so pip checks each download (--require-hashes is implied).
# They are compiled from requirements*.in by scripts/lock.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
if [ "${1:-}" = "--dev" ]; then
  .venv/bin/python -m pip install -q -r requirements-dev.txt
else
  .venv/bin/python -m pip install -q -r requirements.txt
fi
# The translations (locale/*/LC_MESSAGES/*.po) are compiled here, not committed: pure Python (Babel), so
# a machine without GNU gettext can do it.
.venv/bin/python scripts/compile_messages.py
