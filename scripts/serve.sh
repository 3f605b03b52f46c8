#!/usr/bin/env bash
# Serve RelJudge for a team: check migrations, collect static files, start the task worker(s) and gunicorn.
#
# Environment (docs/settings.md): HOST (127.0.0.1), PORT (8000), WEB_CONCURRENCY (gunicorn worker
# processes, default: the number of CPUs), GUNICORN_THREADS (threads per process, 4), RELJUDGE_TASK_WORKERS
# (db_worker processes started beside gunicorn for imports, policy switches and significance tests, 1; 0 on
# an app server whose jobs run elsewhere), RELJUDGE_MODEL_WORKERS (db_worker processes for model judges' runs,
# queue "models", 1; 0 likewise),
# RELJUDGE_MIGRATE=1 to apply migrations here instead of refusing to start when some are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || command -v python3 )}

export DJANGO_DEBUG=0  # never serve a team with DEBUG on (tracebacks, no static file caching)
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}
export WEB_CONCURRENCY=${WEB_CONCURRENCY:-$(nproc 2>/dev/null || echo 2)}
export GUNICORN_THREADS=${GUNICORN_THREADS:-4}
# glibc's allocator gives each thread that allocates an arena of its own (up to 8 per CPU); what a worker's
# requests freed in one arena is not reused by the others. Two arenas per process held the workers' memory
# beyond idle at 78-165 MB against 96-208 MB (bench/scale_bench.py at 100M entries, 4 x 4, two runs each).
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
TASK_WORKERS=${RELJUDGE_TASK_WORKERS:-1}
MODEL_WORKERS=${RELJUDGE_MODEL_WORKERS:-1}

# Migrations are a deploy step, not a start step: several app servers starting at once must not race
# to alter the schema, and a server must not run code against a schema it does not match. So by
# default a missing migration stops the start with the command to run once; RELJUDGE_MIGRATE=1
# (the single-machine quickstart) applies them here.
if [ "${RELJUDGE_MIGRATE:-0}" = "1" ]; then
  "$PY" manage.py migrate --noinput
elif ! "$PY" manage.py migrate --check >/dev/null; then
  echo "serve.sh: the database lacks migrations; run 'python manage.py migrate' once (or set RELJUDGE_MIGRATE=1)" >&2
  exit 1
fi
"$PY" manage.py collectstatic --noinput -v 0
# The translations as the .po files are now (setup compiled them; a pull since may have changed one).
"$PY" scripts/compile_messages.py

pids=()
stop() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait || true
}
trap stop EXIT
trap 'exit 0' INT TERM

# A worker runs one job at a time on one connection (plus its heartbeat's): a pool of 2 is enough.
# A model judge's run can call its endpoint for hours: it has a queue and workers of its own, so that the
# imports and tests queued behind it start at once.
for i in $(seq 1 "$TASK_WORKERS"); do
  DATABASE_POOL_MAX=${RELJUDGE_WORKER_POOL_MAX:-2} "$PY" manage.py db_worker --no-reload --interval 1 \
    --queue-name default --worker-id "$(hostname)-$$-$i" &
  pids+=($!)
done
for i in $(seq 1 "$MODEL_WORKERS"); do
  DATABASE_POOL_MAX=${RELJUDGE_WORKER_POOL_MAX:-2} "$PY" manage.py db_worker --no-reload --interval 1 \
    --queue-name models --worker-id "$(hostname)-$$-models-$i" &
  pids+=($!)
done

echo "Serving RelJudge at http://$HOST:$PORT with $WEB_CONCURRENCY x $GUNICORN_THREADS threads, $TASK_WORKERS task worker(s) and $MODEL_WORKERS model-run worker(s)"
"$PY" -m gunicorn config.wsgi:application \
  --bind "$HOST:$PORT" \
  --workers "$WEB_CONCURRENCY" \
  --worker-class gthread \
  --threads "$GUNICORN_THREADS" \
  --timeout "${GUNICORN_TIMEOUT:-120}" \
  --graceful-timeout 20 \
  --no-control-socket \
  --forwarded-allow-ips "${FORWARDED_ALLOW_IPS:-127.0.0.1}" \
  --access-logfile "${GUNICORN_ACCESS_LOG:--}" \
  --logger-class config.log_redaction.GunicornLogger \
  --access-logformat '%(t)s %(h)s "%(r)s" %(s)s %(b)s %(M)sms' &
pids+=($!)
# Whichever stops first (gunicorn or a worker), stop the rest: a half-running server hides its failure.
wait -n
