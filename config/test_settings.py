"""Settings for the test suite: the production settings with TESTING on and a fast password hasher."""

import os

os.environ.setdefault("RELJUDGE_TESTING", "1")

from config.settings import *  # noqa: E402, F403

# Tests create hundreds of users; PBKDF2's deliberate slowness would dominate the suite's run time.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
