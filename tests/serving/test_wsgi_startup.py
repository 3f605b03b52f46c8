"""A server process imports its views as it starts, not in its first request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wsgi_module_loads_the_views_and_the_scoring_before_any_request():
    code = (
        "import sys, config.wsgi; "
        "print(all(m in sys.modules for m in "
        "('judging.api.views.leaderboard', 'judging.views.leaderboard', 'judging.scoring.trust.shapes')))"
    )
    env = {**os.environ, "DJANGO_DEBUG": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "True"
