"""Test-wide setup: a local secret and plain static storage, before Django's settings are read."""
import os

os.environ.setdefault("RELJUDGE_ALLOW_DEV_SECRET", "1")
os.environ.setdefault("RELJUDGE_TESTING", "1")
