#!/usr/bin/env bash
# One command from a fresh clone to a running RelJudge with a realistic demo campaign:
#   PORT=8080 bash scripts/quickstart.sh
# It serves through scripts/serve.sh (gunicorn and a task worker), as a team's deployment does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RELJUDGE_ALLOW_DEV_SECRET=${RELJUDGE_ALLOW_DEV_SECRET:-1}
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py load_demo
export PORT=${PORT:-8000} HOST=${HOST:-127.0.0.1}
exec bash scripts/serve.sh
