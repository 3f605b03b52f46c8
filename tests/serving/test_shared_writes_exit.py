"""A process leaving right after a request (a restart, a deploy) first writes what its writer thread still holds
for the shared cache: the score blocks and verdicts another process would otherwise compute again (at 100M ranked
entries the restarted workers' first leaderboard took 13.5-14.9 s instead of 0.2-0.3 s)."""

from __future__ import annotations

EXIT_AFTER_QUEUEING = """
import json, time
from judging.scoring import cache as scores
real = scores.shared_write

def slow(blocks):  # a large campaign's blocks take a while to write
    time.sleep(1.0)
    real(blocks)

scores.shared_write = slow
scores.shared_write_later({"reljudge:test:at-exit": 42})
print(json.dumps("queued"))
"""


def test_a_process_writes_its_pending_shared_entries_before_it_exits(site):
    site.sql("DELETE FROM reljudge_cache WHERE cache_key LIKE %s RETURNING NULL", ("%reljudge:test:at-exit%",))
    assert site.python(EXIT_AFTER_QUEUEING) == "queued"  # the process ends at once after queueing the write
    assert site.count("reljudge_cache", "cache_key LIKE %s", ("%reljudge:test:at-exit%",)) == 1
