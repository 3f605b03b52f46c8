"""A five-annotator campaign in the browser: the lead gives queries to people (a list, a tag, a range), each
annotator is served their own queries first, and Progress shows each person's remaining work and pace.

Screenshots of the assignments, progress, jobs and plan pages at 1366x900 and 390x844, in English and Korean,
land in tests/browser/screenshots/ (team-*.png)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from judging.models import AnnotatorProfile, Job, Judgment, QueryAssignment
from judging.services import campaign_create, membership_add, queries_import, query_tags_set, run_import
from tests.browser.conftest import SCREENSHOTS
from tests.browser.knitwear import log_in
from tests.data import DESKTOP, PHONE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUERIES = 10
DOCS = 4
ANNOTATORS = ["ana", "ben", "chae", "dara", "eun"]
TOPICS = "".join(f"{q}\tknit pattern number {q}\tPatterns for project {q}.\n" for q in range(1, QUERIES + 1))
RUN_A = "".join(f"{q} Q0 d{q}_{d} {d + 1} {10 - d} cable-bm25\n" for q in range(1, QUERIES + 1) for d in range(DOCS))
RUN_B = "".join(
    f"{q} Q0 d{q}_{d} {DOCS - d} {d} long-system-name-dense-retriever\n"
    for q in range(1, QUERIES + 1)
    for d in range(DOCS)
)


def password(name: str) -> str:
    return f"{name}-pw-secret-1"


@pytest.fixture
def team(db):
    User = get_user_model()
    campaign = campaign_create(slug="fivefold", name="Five knitters", pool_depth=DOCS, redundancy=1)
    queries_import(campaign=campaign, data=TOPICS.encode(), filename="topics.tsv")
    run_import(campaign=campaign, data=RUN_A.encode(), filename="a.run")
    run_import(campaign=campaign, data=RUN_B.encode(), filename="b.run")
    for qid in ("3", "4"):
        query_tags_set(campaign=campaign, qid=qid, tags=["hard"])
    lead = User.objects.create_user("lena", password=password("lena"))
    membership_add(campaign=campaign, user=lead, role="lead")
    for name in ANNOTATORS:
        membership_add(
            campaign=campaign, user=User.objects.create_user(name, password=password(name)), role="annotator"
        )
    now = timezone.now()
    Job.objects.create(
        kind=Job.Kind.RUN,
        campaign=campaign,
        started_by=lead,
        status=Job.Status.DONE,
        filename="b.run",
        started_at=now - timedelta(minutes=3),
        finished_at=now - timedelta(minutes=2),
    )
    Job.objects.create(
        kind=Job.Kind.MODEL_JUDGE,
        campaign=campaign,
        started_by=lead,
        status=Job.Status.FAILED,
        filename="",
        error={"detail": "the endpoint did not answer"},
        started_at=now - timedelta(seconds=50),
        finished_at=now - timedelta(seconds=45),
    )
    return campaign, lead


def assign(page, annotator: str, batch: str, **fields) -> str:
    page.select_option("#assign-annotator", annotator)
    page.check(f'input[name=batch][value="{batch}"]')
    for name, value in fields.items():
        if name == "tag":
            page.select_option("#assign-tag", value)
        else:
            page.fill(f"#assign-{name}", value)
    with page.expect_navigation():
        page.click(".assign-form button[type=submit]")
    return page.inner_text(".messages, .form-error")


def judge(page, n: int) -> list[str]:
    """Grade ``n`` pairs with the key 1; the qids shown, in order."""
    seen = []
    page.wait_for_selector("#judge .workspace[data-pair-id]")
    page.wait_for_timeout(400)
    for _ in range(n):
        seen.append(page.inner_text(".query-card .eyebrow .mono"))
        before = page.get_attribute("#judge .workspace", "data-pair-id")
        page.keyboard.press("1")
        page.wait_for_function(
            "before => { const w = document.querySelector('#judge .workspace');"
            " return !w || w.dataset.pairId !== String(before); }",
            arg=before,
        )
        page.wait_for_timeout(400)
    return seen


def shoot(page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"team-{name}.png"), full_page=True)


def test_five_annotators_judge_their_own_queries_first(live_server, new_page, team):
    campaign, lead = team
    base = live_server.url
    page, watch = new_page(**DESKTOP)
    log_in(page, base, "lena", password("lena"), then="/campaigns/fivefold/assignments/")
    assert "2 queries given to ana" in assign(page, "ana", "qids", qids="1 2")
    assert "2 queries given to ben" in assign(page, "ben", "tag", tag="hard")
    assert "2 queries given to chae" in assign(page, "chae", "range", **{"from": "5", "to": "6"})
    # a refusal names what is wrong and keeps the form
    assign(page, "dara", "qids", qids="7 99")
    assert "99" in page.inner_text(".form-error") and page.input_value("#assign-qids") == "7 99"
    rows = page.locator("table.assignments tbody tr")
    assert rows.count() == 6
    assert QueryAssignment.objects.filter(campaign=campaign).count() == 6

    served = {}
    for name, n in (("ana", 5), ("ben", 3), ("chae", 2), ("dara", 4), ("eun", 1)):
        p, w = new_page(**DESKTOP)
        log_in(p, base, name, password(name), then="/campaigns/fivefold/judge/")
        served[name] = judge(p, n)
        assert not w.errors, w.errors
    assert set(served["ana"][:5]) <= {"1", "2"}  # her own two queries first (8 pairs)
    assert set(served["ben"]) <= {"3", "4"}  # the tag "hard"
    assert set(served["chae"]) <= {"5", "6"}  # the range 5..6
    # dara and eun were given nothing: they judge shared queries only, never someone else's
    assert set(served["dara"]) | set(served["eun"]) <= {"7", "8", "9", "10"}
    assert Judgment.objects.filter(pair__campaign=campaign).count() == 15

    # Progress: each person's work left and pace
    page.goto(base + "/campaigns/fivefold/progress/")
    table = page.locator("table.pace")
    row = {name: table.locator("tr", has_text=name).inner_text().split("\t") for name in ANNOTATORS}
    # columns: user, today, judged, assigned left, remaining, median, finish in
    # shared: queries 7-10 (16 pairs), 5 judged by dara and eun -> 11 open
    assert row["ana"][1:5] == ["5", "5", "3", "14"]
    assert row["ben"][1:5] == ["3", "3", "5", "16"]
    assert row["eun"][1:5] == ["1", "1", "0", "11"]
    for name in ("ana", "ben", "chae", "dara"):
        assert row[name][5].endswith(" s") and row[name][6] != "–"
    assert "more of judging" in page.inner_text("#pace-title + p")
    assert not watch.errors, watch.errors


@pytest.mark.parametrize("language", ["en", "ko"])
@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_team_pages_screenshots(live_server, new_page, team, language, size):
    campaign, lead = team
    AnnotatorProfile.objects.create(user=lead, language=language)
    User = get_user_model()
    from judging.services import judgment_record, pair_assign
    from judging.services.assignments import assignments_add, queries_of_batch

    for name, qids in (("ana", ["1", "2"]), ("ben", ["3", "4"])):
        assignments_add(
            campaign=campaign, by=lead, annotator=name, queries=queries_of_batch(campaign=campaign, qids=qids)
        )
    for i, name in enumerate(ANNOTATORS):
        user = User.objects.get(username=name)
        for _ in range(3 + i):
            pair = pair_assign(campaign=campaign, annotator=user).pair
            judgment_record(pair=pair, annotator=user, grade=(i + pair.id) % 3, seconds_spent=6.0 + 2 * i)
    page, watch = new_page(**(DESKTOP if size == "desktop" else PHONE))
    log_in(page, live_server.url, "lena", password("lena"), then="/campaigns/fivefold/")
    assert page.get_attribute("html", "lang") == language
    for name, path in (
        ("assignments", "assignments/"),
        ("progress", "progress/"),
        ("jobs", "jobs/"),
        ("plan", "plan/?delta=0.1"),
    ):
        page.goto(f"{live_server.url}/campaigns/fivefold/{path}")
        assert page.locator("h1").count() >= 1
        current = page.locator('.campaign-nav [aria-current="page"]')
        assert current.count() == 1
        shoot(page, f"{size}-{language}-{name}")
        width = 1366 if size == "desktop" else 390
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width + 1, name
    assert not watch.errors, watch.errors
