"""Memory the scores' temporaries freed goes back to the system after the request, at most every few seconds."""

from __future__ import annotations

import pytest

from judging.scoring import memory
from judging.scoring.cache import scores_clear
from judging.scoring.trust import caches_clear

pytestmark = pytest.mark.django_db


@pytest.fixture
def trims(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(memory, "_trim", lambda: calls.append(1))
    monkeypatch.setitem(memory._state, "built", False)
    monkeypatch.setitem(memory._state, "last", -1e9)
    monkeypatch.setitem(memory._state, "timer", None)
    return calls


def test_a_leaderboard_that_built_arrays_trims_once_its_response_is_done(pooled, as_lead, trims, monkeypatch):
    scores_clear()
    caches_clear()
    url = f"/api/campaigns/{pooled.slug}/leaderboard/"
    assert as_lead.get(url).status_code == 200
    assert trims == [1]
    # built again (a new parameter set), but the last trim is too recent: a timer waits for the rest of the time
    assert as_lead.get(url + "?k=5").status_code == 200
    assert trims == [1]
    timer = memory._state["timer"]
    assert timer is not None and timer.is_alive()
    timer.cancel()
    monkeypatch.setitem(memory._state, "timer", None)
    # later, the next finished request trims what is pending
    monkeypatch.setitem(memory._state, "last", -1e9)
    assert as_lead.get("/accounts/login/").status_code in (200, 302)
    assert trims == [1, 1]
    # a request that built nothing does not trim
    monkeypatch.setitem(memory._state, "last", -1e9)
    assert as_lead.get("/accounts/login/").status_code in (200, 302)
    assert trims == [1, 1]


def test_the_trim_calls_the_c_library_here():
    assert memory._MALLOC_TRIM is not None  # glibc (Linux): the app servers' platform
    memory._trim()


def test_a_worker_that_goes_quiet_trims_when_the_time_is_up(trims, monkeypatch):
    """The last request of a burst, too soon after a trim, has a timer give its memory back a little later,
    once: a second request meanwhile does not start another timer."""
    import time

    monkeypatch.setattr(memory, "TRIM_EVERY", 0.3)
    memory.built_large()
    assert memory.request_finished_trim() is True and trims == [1]
    memory.built_large()
    assert memory.request_finished_trim() is False
    memory.built_large()
    assert memory.request_finished_trim() is False
    assert trims == [1]
    deadline = time.monotonic() + 5
    while len(trims) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.4)
    assert trims == [1, 1] and memory._state["timer"] is None and not memory._state["built"]
