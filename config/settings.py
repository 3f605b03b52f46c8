"""RelJudge settings: one module, every deployment-specific value read from the environment."""

import os
import sys
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DEBUG = env_bool("DJANGO_DEBUG", False)
# Set by config/test_settings.py (the test suite) and the benchmarks: development secret, plain static storage.
TESTING = env_bool("RELJUDGE_TESTING", False)

_DEV_SECRET = "dev-only-insecure-secret-key-do-not-use-in-production"
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", _DEV_SECRET)
# The development default is allowed only on a developer's machine: a deployment (DEBUG off and not
# explicitly marked as a local/dev run) must bring its own secret.
if SECRET_KEY == _DEV_SECRET and not (DEBUG or TESTING or env_bool("RELJUDGE_ALLOW_DEV_SECRET", False)):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is not set. Set it in the environment (or set DJANGO_DEBUG=1 / "
        "RELJUDGE_ALLOW_DEV_SECRET=1 for a local run)."
    )

ALLOWED_HOSTS = [h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]

INSTALLED_APPS = [
    # The admin site for superusers only (config/admin.py): leads work in the app, not in the admin.
    "config.admin.AdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "axes",
    "csp",
    # Background jobs (large uploads): Django 6's tasks framework, backported, with its database backend,
    # so a worker needs no service beyond the database (`manage.py db_worker`).
    "django_tasks",
    "django_tasks_db",
    "judging",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # The judging requests in one transaction on PostgreSQL, from the session's read to its save: one commit a
    # request (judging.request_transaction). Before the session's layer, so that its save is inside.
    "judging.request_transaction.RequestTransaction",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The language of each request: the language cookie (the header's switcher), else the browser's
    # Accept-Language, else LANGUAGE_CODE. After sessions, before CommonMiddleware (Django's documented place).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A signed-in user's own choice of language (kept on their account) wins over the cookie and the browser.
    "judging.languages.UserLanguageMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last but one, so that it sees the response of a login that axes refused and answers the lockout page instead.
    "axes.middleware.AxesMiddleware",
    # A body over the upload limit is answered 413 before anything reads it (after the language and the user
    # are known; CsrfViewMiddleware reads forms only in process_view, after every middleware's request phase).
    "judging.uploads.UploadLimitMiddleware",
    # A NUL in the address, the query string or a page's form: 400 naming where (PostgreSQL cannot store one).
    # After CsrfViewMiddleware, whose process_view reads a page's form first; after the upload limit.
    "judging.nul_bytes.NulBytesMiddleware",
    # Innermost: an exception from a view (a broken invariant of the scoring: judging.errors) is logged with its
    # campaign, parameters and stack before Django answers 500.
    "judging.middleware.InternalErrorLog",
]

ROOT_URLCONF = "config.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

DATABASES = {"default": dj_database_url.config(default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
# SQLite's busy timeout: how long a connection waits for another's write lock before "database is locked". A
# request waits a few seconds and then answers 503 with Retry-After (judging.db_busy): a long import holds the lock
# for its whole transaction, and a login waiting 20 s for it helped nobody. The task worker waits longer: a job
# must not fail because another job writes.
RELJUDGE_SQLITE_BUSY_SECONDS = float(os.environ.get("RELJUDGE_SQLITE_BUSY_SECONDS", "5"))
RELJUDGE_SQLITE_WORKER_BUSY_SECONDS = float(os.environ.get("RELJUDGE_SQLITE_WORKER_BUSY_SECONDS", "600"))
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Annotators write concurrently: wait for the lock instead of failing at once, and let readers
    # proceed while a write is in progress.
    _worker = len(sys.argv) > 1 and sys.argv[1] == "db_worker"
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": RELJUDGE_SQLITE_WORKER_BUSY_SECONDS if _worker else RELJUDGE_SQLITE_BUSY_SECONDS,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL;",
        }
    )
    DATABASES["default"]["CONN_MAX_AGE"] = 0
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A persistent connection per server thread (CONN_MAX_AGE) made the server's connection count grow
    # with threads x processes until PostgreSQL refused clients (issue 10). Instead every process keeps
    # a bounded psycopg pool: a request borrows a connection and returns it when it ends, and a request
    # that finds the pool exhausted waits up to DATABASE_POOL_TIMEOUT seconds instead of failing.
    # Size: workers x DATABASE_POOL_MAX <= max_connections minus headroom (docs/deployment.md, "Database connections").
    _threads = int(os.environ.get("GUNICORN_THREADS", "4"))
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool, not Django, keeps connections open
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": int(os.environ.get("DATABASE_POOL_MIN", "1")),
        # A process serves at most GUNICORN_THREADS requests at once, each needing one connection.
        "max_size": int(os.environ.get("DATABASE_POOL_MAX", str(_threads))),
        "timeout": float(os.environ.get("DATABASE_POOL_TIMEOUT", "30")),
        # Connections idle this long are closed, so a quiet server gives its slots back.
        "max_idle": float(os.environ.get("DATABASE_POOL_MAX_IDLE", "300")),
    }
    # No JIT compilation: the judging page's queries run in a millisecond or two, but the planner's cost
    # for the queue's never-executed fallback subqueries passes jit_above_cost, and compiling them took
    # 250 ms a request. RelJudge's heavy lifting is numpy's, not the database's.
    # cursor_tuple_fraction=1: the app's server-side cursors (exports, score arrays, imports' reads) always
    # read every row, so the planner should plan them for the whole result, not for a fast first row (a
    # million-row judgments export: 5.3 s -> 4.2 s in the database).
    DATABASES["default"]["OPTIONS"].setdefault("options", "-c jit=off -c cursor_tuple_fraction=1")
    if not env_bool("DATABASE_POOL", True):
        del DATABASES["default"]["OPTIONS"]["pool"]
        DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("DATABASE_CONN_MAX_AGE", "0"))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

CACHES = {
    "default": {
        # The leaderboard's per-query score cache must be shared by every server process: the database
        # cache works everywhere without another service; REDIS_URL switches to Redis where there is one.
        "BACKEND": "judging.cache_db.BatchedDatabaseCache",  # Django's, with set_many in one statement
        "LOCATION": "reljudge_cache",
        # Django's default of 300 entries would cull a third of the table at every write once a few campaigns
        # and parameter sets are cached (5,000 queries are 79 blocks a parameter set): other processes would
        # then score those queries again.
        "OPTIONS": {"MAX_ENTRIES": 20_000},
    }
}
if os.environ.get("REDIS_URL"):
    CACHES["default"] = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": os.environ["REDIS_URL"]}

# Background jobs. The database backend stores queued tasks in the database the app already uses, so
# `manage.py db_worker` on any machine that reaches it runs them (no broker to operate).
# A model judge's run goes to the "models" queue, which its own worker serves (scripts/serve.sh): a run can
# call the endpoint for hours and must not hold up the imports and tests waiting on "default".
TASKS = {
    "default": {
        "BACKEND": os.environ.get("RELJUDGE_TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
        "QUEUES": ["default", "models"],
    }
}
# Jobs waiting for a worker, at most, per user and per campaign: past either, starting one more is refused.
RELJUDGE_JOBS_QUEUED_PER_USER = int(os.environ.get("RELJUDGE_JOBS_QUEUED_PER_USER", "5"))
RELJUDGE_JOBS_QUEUED_PER_CAMPAIGN = int(os.environ.get("RELJUDGE_JOBS_QUEUED_PER_CAMPAIGN", "20"))
# Uploads larger than this are imported by a background job instead of inside the web request.
RELJUDGE_JOB_THRESHOLD_BYTES = int(os.environ.get("RELJUDGE_JOB_THRESHOLD_BYTES", str(5 * 1024 * 1024)))
# A running job whose worker has not reported for this long is taken as dead and marked failed.
RELJUDGE_JOB_STALE_SECONDS = float(os.environ.get("RELJUDGE_JOB_STALE_SECONDS", "60"))
# Switching the aggregation policy of a campaign with more judged pairs than this runs as a background job.
RELJUDGE_POLICY_JOB_PAIRS = int(os.environ.get("RELJUDGE_POLICY_JOB_PAIRS", "50000"))
# Significance tests costing more than this many systems x queries x permutations run as a background job.
RELJUDGE_STATS_JOB_CELLS = int(os.environ.get("RELJUDGE_STATS_JOB_CELLS", "100000000"))

# A model endpoint at a link-local address (169.254.0.0/16, fe80::/10: cloud metadata services) is refused unless
# this is on (a model served on a link-local network on purpose).
RELJUDGE_MODEL_ALLOW_LINK_LOCAL = env_bool("RELJUDGE_MODEL_ALLOW_LINK_LOCAL", False)

# The folder of the shared run-cube files (judging.scoring.cube_file): every worker of this machine maps one copy
# of a campaign's runs. A local disk of each app server; empty keeps the cube in each process's memory.
RELJUDGE_CUBE_DIR = os.environ.get("RELJUDGE_CUBE_DIR", str(BASE_DIR / "var" / "cubes"))
# A RELJUDGE_CUBE_DIR that is itself a symlink is refused (the cubes stay in memory) unless this is on: a link
# someone else can change would send the score files elsewhere.
RELJUDGE_CUBE_DIR_ALLOW_SYMLINK = env_bool("RELJUDGE_CUBE_DIR_ALLOW_SYMLINK", False)
# A process that answers a leaderboard's bounds and verdicts from the shared cache (another process computed
# them) builds its own per-query parts of that state in a thread of its own, so that its first request after
# the next judgment patches one query instead of building every query's (judging.scoring.trust.shapes).
RELJUDGE_TRUST_WARMUP = env_bool("RELJUDGE_TRUST_WARMUP", True)
# Work a request leaves for after its answer (shared-cache writes, queue lists, trust parts, score files) runs in
# threads of its own (judging.runtime.later); on, it runs in the request instead: tests turn it on, to see the
# effect at once and leave no thread behind that outlives a test's database.
RELJUDGE_BACKGROUND_INLINE = env_bool("RELJUDGE_BACKGROUND_INLINE", False)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
    # Not a check: its password_changed() hook runs on every password change (web form, reset link, admin,
    # changepassword) and revokes the API token, which otherwise outlives the old password.
    {"NAME": "judging.auth_backends.RevokeTokenOnPasswordChange"},
]

# Client addresses: REMOTE_ADDR, unless the server sits behind this many reverse proxies that each append
# the address they saw to X-Forwarded-For (the client can write anything into the rest of that header).
TRUSTED_PROXIES = int(os.environ.get("RELJUDGE_TRUSTED_PROXIES", "0"))
if TRUSTED_PROXIES < 0:
    raise ImproperlyConfigured("RELJUDGE_TRUSTED_PROXIES must be 0 or a positive number of proxies.")

# Failed logins are counted per username and per client address (django-axes), on the web login and on
# POST /api/auth/token/ alike. The AxesBackend refuses a locked-out login before the password is checked.
AUTHENTICATION_BACKENDS = [
    "judging.auth_backends.LoginAttemptsBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_HANDLER = "judging.auth_backends.LoginAttemptsHandler"
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# One account: 5 wrong passwords. One address: 50, because a room of annotators shares one address
# behind a NAT and each may mistype once or twice (LoginAttemptsHandler applies both limits).
AXES_FAILURE_LIMIT = 5
RELJUDGE_ADDRESS_FAILURE_LIMIT = 50
AXES_COOLOFF_TIME = timedelta(minutes=15)
# A retry while locked out does not push the end of the lockout further, so the time the page names holds.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "judging.auth_backends.client_address"
AXES_LOCKOUT_CALLABLE = "judging.auth_backends.lockout_response"
# Only failures are recorded: a row per successful login would grow without bound and tell nothing new.
AXES_DISABLE_ACCESS_LOG = True

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# The interface speaks English and Korean (issue 16). The catalogs are compiled at setup (scripts/setup.sh,
# .po -> .mo), not committed; file formats, measure names and API keys stay the same in both languages.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("ko", "한국어")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# Dates in the reader's language (config/formats/<lang>/formats.py over Django's own); measure values are
# formatted by the scoring presenters, with a dot and fixed digits in every language.
FORMAT_MODULE_PATH = ["config.formats"]
# The header's switcher writes this cookie for everyone (and a signed-in user's choice is also kept on the
# account): a year, like Django's default, readable by the server only.
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
LANGUAGE_COOKIE_HTTPONLY = True
LANGUAGE_COOKIE_SAMESITE = "Lax"
LANGUAGE_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", False)
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
if DEBUG or TESTING:
    STORAGES["staticfiles"] = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}

# The largest request body (an upload with its form) accepted, in MB: a larger one is answered 413 before it is
# read (judging.uploads). A 1M-line TREC run is about 40 MB, 1M qrels labels 18 MB.
RELJUDGE_MAX_UPLOAD_BYTES = int(float(os.environ.get("RELJUDGE_MAX_UPLOAD_MB", "64")) * 1024 * 1024)
# Uploaded files stream to a temporary file on disk as they arrive, never whole into memory; the first handler
# counts their bytes against the limit above.
FILE_UPLOAD_HANDLERS = [
    "judging.uploads.UploadLimitHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
# Form fields other than files (the upload forms' few small fields).
DATA_UPLOAD_MAX_MEMORY_SIZE = 50 * 1024 * 1024

# Django's database sessions and its AuthenticationMiddleware: a request reads its session, then its user (two
# indexed reads). The checks of the session's password hash and of the account are Django's, upgraded with it.
SESSION_ENGINE = "django.contrib.sessions.backends.db"
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", False)
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", False)
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# HTTPS is terminated by a proxy in front of gunicorn: it tells Django the original scheme in a header
# (e.g. DJANGO_SECURE_PROXY_SSL_HEADER=X-Forwarded-Proto). Only set it behind a proxy that overwrites
# that header, or clients could claim HTTPS.
if os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER"):
    _header = "HTTP_" + os.environ["DJANGO_SECURE_PROXY_SSL_HEADER"].upper().replace("-", "_")
    SECURE_PROXY_SSL_HEADER = (_header, "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
# /healthz answers the load balancer over plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "0"))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)

# Password reset mails a link, so it exists only where mail can be sent: EMAIL_HOST (and the usual
# EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS) turn it on; without it the link and the
# /accounts/password_reset/ routes are absent.
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
PASSWORD_RESET_ENABLED = bool(EMAIL_HOST)
if PASSWORD_RESET_ENABLED:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = int(os.environ.get("EMAIL_PORT", "587"))
    EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
    DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", f"reljudge@{EMAIL_HOST}")
# Reset requests per client address and per e-mail address per hour: each one sends a mail.
PASSWORD_RESET_RATE = 5
# Set-password links e-mailed by leads: at most this many per recipient address and per lead (the operator's
# add_member is not limited per sender) per SET_PASSWORD_MAIL_WINDOW seconds; beyond, the lead is told when
# to try again and can pass the link on from the page.
SET_PASSWORD_MAIL_RATE = (
    int(os.environ.get("RELJUDGE_SET_PASSWORD_MAILS_PER_RECIPIENT", "3")),
    int(os.environ.get("RELJUDGE_SET_PASSWORD_MAILS_PER_LEAD", "200")),
)
SET_PASSWORD_MAIL_WINDOW = 3600
# One-time links (a lead's set-password link for a new member, a password reset) work once, for this long.
PASSWORD_RESET_TIMEOUT = 3 * 24 * 3600

# Content Security Policy (django-csp): scripts, styles, images and fetches from this origin only. The
# templates carry no inline script, style or event handler; SVG charts are inline markup coloured by the classes
# of app.css. Only /api/docs/ (Swagger UI) adds inline styles and data: images (config/urls.py), and a chart
# downloaded as a file its embedded <style> (judging/views/leaderboard.py).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    }
}

# Every API view takes these; a view that differs says why where it overrides one.
REST_FRAMEWORK = {
    # Token first: DRF answers a request without credentials with the first class's challenge, so a
    # script that forgot its token gets 401 + WWW-Authenticate: Token rather than a bare 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "judging.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # JSON and form bodies are refused over a size before parsing (413); uploads name MultiPartParser.
    "DEFAULT_PARSER_CLASSES": [
        "judging.api.parsers.BoundedJSONParser",
        "judging.api.parsers.BoundedFormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    # "login" only damps floods of POST /api/auth/token/: wrong passwords are counted by axes, and a room of
    # annotators behind one address must be able to fetch their tokens at once.
    "DEFAULT_THROTTLE_RATES": {"anon": "60/minute", "login": "60/minute"},
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "judging.api.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "judging.api.pagination.PagePagination",
    "PAGE_SIZE": 100,
    "DEFAULT_SCHEMA_CLASS": "judging.api.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "judging.api.views.base.api_exception_handler",
    # Throttles key on the client address: X-Forwarded-For is read only behind this many trusted proxies.
    "NUM_PROXIES": TRUSTED_PROXIES,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "RelJudge API",
    "DESCRIPTION": "Relevance judgments, qrels exports and live trec_eval-exact leaderboards.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(process)d] %(message)s"},
    },
    # A set-password link's token never reaches a log (config/log_redaction.py; gunicorn's access log too).
    "filters": {"secret_paths": {"()": "config.log_redaction.SecretPathFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["secret_paths"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("DJANGO_LOG_LEVEL", "WARNING")},
    "loggers": {
        # Imports and jobs say what they did and how long it took (row counts, durations).
        "judging": {"level": os.environ.get("RELJUDGE_LOG_LEVEL", "INFO")},
        "django_tasks": {"level": os.environ.get("RELJUDGE_LOG_LEVEL", "INFO")},
        "django_tasks_db": {"level": os.environ.get("RELJUDGE_LOG_LEVEL", "INFO")},
        # Both log each request's whole URL below WARNING: the model endpoint's query string may hold a key.
        "httpx": {"level": "WARNING"},
        "httpcore": {"level": "WARNING"},
    },
}
