#!/usr/bin/env bash
# One command from a fresh clone to a running RelJudge with a realistic demo campaign.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export DJANGO_DEBUG=${DJANGO_DEBUG:-0} RELJUDGE_ALLOW_DEV_SECRET=${RELJUDGE_ALLOW_DEV_SECRET:-1}
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py collectstatic --noinput -v 0
.venv/bin/python manage.py load_demo
echo "Serving RelJudge at http://127.0.0.1:8000  (Ctrl-C to stop)"
exec .venv/bin/python manage.py runserver 127.0.0.1:8000 --insecure
