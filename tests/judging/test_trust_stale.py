"""A server process with no trust parts of its own answers a large campaign's new labels state at once, with the
latest published bounds and verdicts marked ``verdicts_behind``, and builds the current ones in the background."""

from __future__ import annotations

import pytest

from judging import runtime
from judging.api.leaderboard_text import text_caches_clear
from judging.models import Pair
from judging.scoring import leaderboard_data
from judging.scoring.cache import scores_clear
from judging.scoring.cube import cubes_clear
from judging.scoring.trust import caches_clear, shapes
from judging.services import judgment_record

pytestmark = pytest.mark.django_db

TRUST = ("settled", "pairs_left", "verdict_queries", "queries_without_labels")


@pytest.fixture
def background(monkeypatch, settings):
    """The names of the background work started (run in the test's thread and transaction, as every test's is)."""
    settings.RELJUDGE_TRUST_WARMUP = True
    settings.RELJUDGE_BACKGROUND_INLINE = True
    monkeypatch.setattr(shapes, "STALE_CELLS", 0)  # the test campaign counts as large
    started: list[str] = []
    real = runtime.later

    def later(fn, *args, name=None):
        started.append(name or fn.__name__)
        real(fn, *args, name=name)

    monkeypatch.setattr(runtime, "later", later)
    return started


def _restart():
    cubes_clear()
    scores_clear()
    caches_clear()
    text_caches_clear()


def _judge_next(campaign, annotator, grade):
    pair = Pair.objects.filter(campaign=campaign, pooled=True, judgment_count=0).order_by("id").first()
    judgment_record(pair=pair, annotator=annotator, grade=grade)


def test_a_new_state_in_a_process_without_parts_gets_the_published_verdicts_then_its_own(
    pooled, annotator, as_lead, background
):
    url = f"/api/campaigns/{pooled.slug}/leaderboard/"
    _judge_next(pooled, annotator, 2)
    first = as_lead.get(url).json()  # computed here and published
    assert "verdicts_behind" not in first

    _restart()  # another worker, or this one restarted
    _judge_next(pooled, annotator, 0)
    _judge_next(pooled, annotator, 2)
    stale = as_lead.get(url).json()
    assert stale["verdicts_behind"] == 2  # both judged queries moved since the published state
    assert {k: stale[k] for k in TRUST} == {k: first[k] for k in TRUST}
    assert stale["queries"] == 2 and stale["queries"] != first["queries"]  # the scores are current
    assert any(name.startswith("trust-state-") for name in background)  # this state was built meanwhile

    current = as_lead.get(url).json()
    assert "verdicts_behind" not in current
    _restart()
    fresh = leaderboard_data(campaign=pooled)  # what a process computing it from nothing gets
    assert {k: current[k] for k in TRUST} == {k: fresh[k] for k in TRUST}
    assert current["pairs_left"] < first["pairs_left"]


def test_the_command_and_small_campaigns_never_answer_with_older_verdicts(
    pooled, annotator, as_lead, background, monkeypatch
):
    url = f"/api/campaigns/{pooled.slug}/leaderboard/"
    _judge_next(pooled, annotator, 2)
    as_lead.get(url)
    _restart()
    _judge_next(pooled, annotator, 1)
    assert "verdicts_behind" not in leaderboard_data(campaign=pooled)  # scores --json: always current

    monkeypatch.setattr(shapes, "STALE_CELLS", 10**9)
    _restart()
    _judge_next(pooled, annotator, 0)
    assert "verdicts_behind" not in as_lead.get(url).json()
