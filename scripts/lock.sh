#!/usr/bin/env bash
# Regenerate the lock files from the *.in files: requirements.in -> requirements.txt (runtime) and
# requirements-dev.in -> requirements-dev.txt (runtime + test tools), every package pinned with its hashes.
#
#   bash scripts/lock.sh                      # after editing a *.in file: adds and removes, keeps other pins
#   bash scripts/lock.sh --upgrade-package X  # move one package (and what it needs) to its newest release
#   bash scripts/lock.sh --upgrade            # move everything the *.in files leave free
#
# Uses pip-compile from .venv (bash scripts/setup.sh --dev installs it), or from the active virtualenv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-${VIRTUAL_ENV:+$VIRTUAL_ENV/bin/python}}
PY=${PY:-.venv/bin/python}

# The header of each lock file names this script as the way to update it.
export CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh"
# --allow-unsafe pins pip and setuptools too (pip-tools needs them): with hashes, pip installs nothing unpinned.
# --strip-extras writes psycopg and psycopg-binary as plain pins, so requirements.txt works as a constraints file.
options=(--quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links --resolver=backtracking)

# Runtime first: requirements-dev.in constrains itself to the runtime lock (-c requirements.txt).
"$PY" -m piptools compile "${options[@]}" "$@" --output-file requirements.txt requirements.in
"$PY" -m piptools compile "${options[@]}" "$@" --output-file requirements-dev.txt requirements-dev.in
echo "requirements.txt and requirements-dev.txt regenerated; review with: git diff --stat requirements*.txt"
