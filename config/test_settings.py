"""Settings for the test suite: the production settings with TESTING on and a fast password hasher."""

import os

os.environ.setdefault("RELJUDGE_TESTING", "1")
# The suite's threads and servers on SQLite keep waiting for each other's writes as they did (a loaded CI machine
# is slow); tests/security/test_database_busy.py checks the production default.
os.environ.setdefault("RELJUDGE_SQLITE_BUSY_SECONDS", "20")

from config.settings import *  # noqa: F403

# Tests create hundreds of users; PBKDF2's deliberate slowness would dominate the suite's run time.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# WhiteNoise looks a static file up when it is asked for, instead of listing STATIC_ROOT whenever a test client
# builds its middleware (each APIClient does): a test of the other suite running scripts/serve.sh's collectstatic
# in the same checkout replaced files while one was listed, and the listing raised FileNotFoundError in a request
# (CI, PostgreSQL suite, tests/security/test_members.py and tests/judging/test_next_concurrency.py). The servers the
# tests start keep the production settings.
WHITENOISE_AUTOREFRESH = True
