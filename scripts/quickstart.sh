#!/usr/bin/env bash
# One command from a fresh clone to a running RelJudge with a realistic demo campaign:
#   PORT=8080 bash scripts/quickstart.sh
#   DEMO_LANG=ko bash scripts/quickstart.sh     # the Korean demo campaign (shopping-ko) instead
# It serves through scripts/serve.sh (gunicorn, a task worker and a model-run worker), as a team's deployment does.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RELJUDGE_ALLOW_DEV_SECRET=${RELJUDGE_ALLOW_DEV_SECRET:-1}
.venv/bin/python manage.py migrate --noinput
.venv/bin/python manage.py load_demo --lang "${DEMO_LANG:-en}"
export PORT=${PORT:-8000} HOST=${HOST:-127.0.0.1}
# Where this quickstart serves, for scripts/manage in another shell: the links it prints (add_member --create)
# must lead here, not to the default port.
served_on=$HOST
case "$served_on" in 0.0.0.0 | "::" | "") served_on=127.0.0.1 ;; esac
case "$served_on" in *:*) served_on="[$served_on]" ;; esac  # an IPv6 address, bracketed in a URL
base_file=${RELJUDGE_QUICKSTART_ENV:-.quickstart.env}
printf '# written by scripts/quickstart.sh; read by scripts/manage\nRELJUDGE_BASE_URL=%s\n' "http://$served_on:$PORT" >"$base_file"
exec bash scripts/serve.sh
