#!/usr/bin/env bash
# Create .venv with Python 3.11 and install the locked requirements (runtime, or runtime + test tools with --dev).
# The lock files pin every package with its hashes, so pip checks each download (--require-hashes is implied).
# They are compiled from requirements*.in by scripts/lock.sh. When .venv already holds every pinned version,
# pip is not run at all (no network, a second instead of a resolver run).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi
lock=requirements.txt
[ "${1:-}" = "--dev" ] && lock=requirements-dev.txt
if ! .venv/bin/python - "$lock" <<'PY'
"""Exit 0 when every `name==version` pin of the lock file is the installed version, else 1."""
import re
import sys
from importlib.metadata import PackageNotFoundError, version

for line in open(sys.argv[1], encoding="utf-8"):
    pin = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==([^\s\\;]+)", line)
    if pin:
        try:
            installed = version(pin.group(1))
        except PackageNotFoundError:
            sys.exit(1)
        if installed != pin.group(2):
            sys.exit(1)
PY
then
  # PyICU (TR39 confusable usernames) builds against the system's ICU: Debian's libicu-dev, pkg-config and g++.
  if ! pkg-config --exists icu-i18n 2>/dev/null || ! command -v g++ >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      DEBIAN_FRONTEND=noninteractive apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libicu-dev pkg-config g++ >/dev/null
    else
      echo "setup: PyICU needs ICU's headers and a C++ compiler: apt-get install libicu-dev pkg-config g++" >&2
      exit 1
    fi
  fi
  .venv/bin/python -m pip install -q -r "$lock"
fi
# The translations (locale/*/LC_MESSAGES/*.po) are compiled here, not committed: pure Python (Babel), so
# a machine without GNU gettext can do it.
.venv/bin/python scripts/compile_messages.py
