"""The judging requests in one transaction on PostgreSQL (judging.request_transaction): one commit a request, a
5xx writes nothing; a pair another transaction keeps locked is passed over by one that holds a pair already, and
waited for by one that holds none."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from django.db import connection, connections, transaction
from django.test import Client
from django.urls import reverse

from judging.models import Campaign, Judgment, Pair
from judging.request_transaction import ONE_TRANSACTION, one_transaction
from judging.services import campaign_create, campaign_settings_update, judgment_record, membership_add, run_import
from judging.services.judgments import LOCK_TRIES, pair_lock, pair_lock_bounded
from tests.data import client_for

pytestmark = pytest.mark.postgres

PAIR_ID = re.compile(r'data-pair-id="(\d+)"')
VERSION = re.compile(r'name="version" value="([^"]*)"')


def _campaign(make_user, mode: str) -> tuple[Campaign, list]:
    campaign = campaign_create(slug=f"tx-{mode}", pool_depth=5)
    run = "".join(f"q{q} Q0 {n}{q}_{d} {d + 1} {10 - d} {n}\n" for n in "ab" for q in range(6) for d in range(5))
    run_import(campaign=campaign, data=run.encode(), filename="r.run")
    campaign_settings_update(campaign=campaign, queue_mode=mode)
    users = [make_user(f"tx{i}") for i in range(2)]
    for user in users:
        membership_add(campaign=campaign, user=user, role="annotator")
    return Campaign.objects.get(pk=campaign.pk), users


@contextlib.contextmanager
def _elsewhere(lock: Callable[[], object], hold: Callable[[], object]) -> Iterator[list[float]]:
    """Another connection's transaction, in a thread: ``lock()`` takes its rows, then ``hold()`` keeps it open; the
    block runs once the rows are locked and gets a list that holds the time the transaction ended (once it has)."""
    locked, ended = threading.Event(), []

    def run() -> None:
        try:
            with transaction.atomic():
                lock()
                locked.set()
                hold()
            ended.append(time.monotonic())
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert locked.wait(10)
        yield ended
    finally:
        thread.join(30)


class _Transactions:
    """Counts the transactions a block of requests commits: each statement outside a transaction is one, and so
    is each outermost atomic block that commits."""

    def __init__(self) -> None:
        self.autocommitted: list[str] = []
        self.commits = 0

    def __enter__(self) -> _Transactions:
        self._commit = connection._commit

        def counting() -> None:
            self.commits += 1
            self._commit()

        connection._commit = counting
        self._wrapper = connection.execute_wrapper(self._record)
        self._wrapper.__enter__()
        return self

    def _record(self, execute, sql, params, many, context):
        if not connection.in_atomic_block:
            self.autocommitted.append(sql[:80])
        return execute(sql, params, many, context)

    def __exit__(self, *exc) -> None:
        self._wrapper.__exit__(*exc)
        connection._commit = self._commit


@pytest.mark.parametrize("mode", ["shuffled", "mtc"])
def test_record_and_next_commits_once_a_request(pg_only, make_user, mode):
    """A "record + next" on the judging page, in the default queue and in shuffled: every statement (the session's
    and the user's reads, the queue's) in one transaction, one commit, where it made 4 and 17."""
    campaign, (user, _other) = _campaign(make_user, mode)
    client = Client()
    client.force_login(user)
    judge = f"/campaigns/{campaign.slug}/judge/"
    body = client.get(judge).content.decode()
    for _ in range(4):
        pair, version = PAIR_ID.search(body).group(1), VERSION.search(body).group(1)
        with _Transactions() as seen:
            response = client.post(
                f"{judge}{pair}/", {"grade": "1", "version": version, "seconds": "3"}, HTTP_HX_REQUEST="true"
            )
        assert response.status_code == 200
        assert seen.autocommitted == [] and seen.commits == 1
        body = response.content.decode()
    assert Judgment.objects.filter(annotator=user).count() == 4


def test_api_next_and_judgment_commit_once_each(pg_only, make_user):
    campaign, (user, _other) = _campaign(make_user, "mtc")
    client = client_for(user)
    with _Transactions() as seen:
        got = client.get(f"/api/campaigns/{campaign.slug}/next/")
    assert got.status_code == 200 and seen.autocommitted == [] and seen.commits == 1
    with _Transactions() as seen:
        posted = client.post("/api/judgments/", {"pair": got.json()["pair"], "grade": 2}, format="json")
    assert posted.status_code == 201 and seen.autocommitted == [] and seen.commits == 1


def test_a_request_that_fails_writes_nothing(pg_only, make_user, monkeypatch):
    """A record + next whose page cannot be drawn (a bug after the judgment was written) answers 500 and the
    judgment is not kept: the request's transaction is rolled back whole, not left half-written."""
    campaign, (user, _other) = _campaign(make_user, "shuffled")
    client = Client(raise_request_exception=False)
    client.force_login(user)
    judge = f"/campaigns/{campaign.slug}/judge/"
    body = client.get(judge).content.decode()
    pair = PAIR_ID.search(body).group(1)

    def broken(*args, **kwargs):
        raise RuntimeError("the page broke after the judgment was written")

    monkeypatch.setattr("judging.views.judging._render_workspace", broken)
    response = client.post(f"{judge}{pair}/", {"grade": "2", "seconds": "3"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 500
    assert not Judgment.objects.filter(annotator=user).exists()
    assert Pair.objects.get(public_id=pair).judgment_count == 0


def test_a_pair_kept_locked_is_passed_over_not_waited_for(pg_only, make_user):
    """Inside a transaction that holds rows, another pair's lock is asked for without waiting: while another
    connection keeps it locked the answer is False (after LOCK_TRIES tries), once it lets go True."""
    campaign, _users = _campaign(make_user, "shuffled")
    pairs = list(Pair.objects.filter(campaign=campaign, pooled=True).order_by("id").values_list("id", flat=True))
    release = threading.Event()
    lock = lambda: Pair.objects.select_for_update().filter(id=pairs[0]).get()  # noqa: E731
    with _elsewhere(lock, lambda: release.wait(30)):
        try:
            with transaction.atomic():
                assert pair_lock_bounded(pair_id=pairs[0]) is False
                assert pair_lock_bounded(pair_id=pairs[1]) is True
            assert LOCK_TRIES >= 2
        finally:
            release.set()
    with transaction.atomic():
        assert pair_lock_bounded(pair_id=pairs[0]) is True
    with pytest.raises(Pair.DoesNotExist), transaction.atomic():
        pair_lock_bounded(pair_id=max(pairs) + 1000)


def test_only_the_judging_requests_run_in_one_transaction():
    assert one_transaction("/campaigns/shop/judge/") and one_transaction("/campaigns/shop/judge/12/")
    assert one_transaction("/api/judgments/") and one_transaction("/api/campaigns/shop/next/")
    assert not one_transaction("/campaigns/shop/leaderboard/") and not one_transaction("/api/campaigns/shop/")
    assert not one_transaction("/no/such/page/")
    assert len(ONE_TRANSACTION) == 6


def test_a_hold_that_comes_while_its_pair_is_being_judged_waits_for_that_judgment(pg_only, make_user):
    """The page's background hold of the pair it shows can arrive while the annotator's own grade of that pair is
    being saved (a quick key on a slow line): the hold waits for that save (it holds no other pair's lock) and
    answers 204, never "someone took this pair" with another pair swapped in."""
    campaign, (user, _other) = _campaign(make_user, "shuffled")
    pair = Pair.objects.filter(campaign=campaign, pooled=True).order_by("id").first()

    def save() -> None:
        pair_lock(pair_id=pair.id)
        judgment_record(pair=pair, annotator=user, grade=2, locked=True)

    with _elsewhere(save, lambda: time.sleep(0.5)) as ended:  # the save's transaction still open a while
        client = Client()
        client.force_login(user)
        url = reverse("judging:judge_hold", args=[campaign.slug, pair.public_id])
        answer = client.post(url, HTTP_HX_REQUEST="true")
        answered = time.monotonic()
    assert answer.status_code == 204, answer.content[:300]
    assert ended and answered >= ended[0]  # it waited for the save
