"""The judging pages through Django's test Client: access, the judging flow, uploads, escaping, queue order."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from judging import selectors
from judging.models import Campaign, Document, Judgment, JudgmentRevision, Membership, Pair, Query, System
from judging.services import (
    campaign_create,
    documents_import,
    judgment_record,
    membership_add,
    queries_import,
    run_import,
)
from judging.services.model_judge import model_judge_get_or_create
from tests.data import DOCS, RUN_BM25, TOPICS, client_for

HTMX = {"HTTP_HX_REQUEST": "true"}
PAIR_ID = re.compile(r'data-pair-id="(\d+)"')


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def judge_url(campaign, *, pair=None) -> str:
    url = reverse("judging:judge", args=[campaign.slug])
    return f"{url}?pair={pair}" if pair else url


def record_url(campaign, pair_id) -> str:
    return reverse("judging:judge_record", args=[campaign.slug, pair_id])


def shown_pair(response) -> int | None:
    match = PAIR_ID.search(response.content.decode())
    return int(match.group(1)) if match else None


def pair_of(campaign, qid, docid) -> Pair:
    return Pair.objects.get(campaign=campaign, query__qid=qid, document__docid=docid)


def walk(client, campaign, *, grade=1, limit=100) -> list[int]:
    """Judge the whole queue through the views; the pair ids in the order they were offered."""
    order = []
    pair_id = shown_pair(client.get(judge_url(campaign)))
    while pair_id is not None and len(order) < limit:
        order.append(pair_id)
        response = client.post(record_url(campaign, pair_id), {"grade": grade, "seconds": "2.5"}, **HTMX)
        assert response.status_code == 200, response.content[:300]
        pair_id = shown_pair(response)
    return order


# --------------------------------------------------------------------------- access


@pytest.mark.parametrize(
    "name",
    [
        "judge",
        "my_judgments",
        "campaign_detail",
        "campaign_settings",
        "campaign_members",
        "campaign_upload",
        "campaign_progress",
    ],
)
def test_campaign_pages_require_login(client, campaign, name):
    url = reverse(f"judging:{name}", args=[campaign.slug])
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")


def test_home_requires_login(client, db):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_htmx_post_after_session_expiry_gets_401_not_a_login_page(client, pooled):
    pair = pair_of(pooled, "q1", "d1")
    response = client.post(record_url(pooled, pair.public_id), {"grade": 1}, **HTMX)
    assert response.status_code == 401
    assert not Judgment.objects.exists()


def test_login_page_and_login(client, annotator):
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert b'name="username"' in page.content and b'name="password"' in page.content
    response = client.post("/accounts/login/", {"username": "ann", "password": "pw-ann"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_login_with_wrong_password_says_so(client, annotator):
    response = client.post("/accounts/login/", {"username": "ann", "password": "nope"})
    assert response.status_code == 200
    assert b"do not match" in response.content


def test_logout_is_a_post_form(campaign, annotator):
    client = login(annotator)
    home = client.get("/").content.decode()
    assert re.search(r'<form method="post" action="/accounts/logout/"', home)
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_password_change_pages(annotator):
    client = login(annotator)
    assert client.get("/accounts/password_change/").status_code == 200
    response = client.post(
        "/accounts/password_change/",
        {
            "old_password": "pw-ann",
            "new_password1": "a-much-longer-secret-42",
            "new_password2": "a-much-longer-secret-42",
        },
    )
    assert response.status_code == 302
    assert client.get(response["Location"]).status_code == 200
    annotator.refresh_from_db()
    assert annotator.check_password("a-much-longer-secret-42")


def test_csrf_is_enforced(pooled, annotator):
    client = Client(enforce_csrf_checks=True)
    client.force_login(annotator)
    pair = pair_of(pooled, "q1", "d1")
    assert client.post(record_url(pooled, pair.public_id), {"grade": 1}).status_code == 403
    page = client.get(judge_url(pooled)).content.decode()
    token = re.search(r'"X-CSRFToken": "([^"]+)"', page).group(1)
    response = client.post(record_url(pooled, pair.public_id), {"grade": 1}, HTTP_X_CSRFTOKEN=token, **HTMX)
    assert response.status_code == 200
    assert Judgment.objects.count() == 1


@pytest.mark.parametrize("name", ["judge", "my_judgments", "campaign_detail"])
def test_non_member_gets_404(pooled, make_user, name):
    outsider = login(make_user("outsider"))
    assert outsider.get(reverse(f"judging:{name}", args=[pooled.slug])).status_code == 404


def test_non_member_cannot_record(pooled, make_user):
    outsider = login(make_user("outsider"))
    pair = pair_of(pooled, "q1", "d1")
    assert outsider.post(record_url(pooled, pair.public_id), {"grade": 1}, **HTMX).status_code == 404
    assert not Judgment.objects.exists()


def test_pair_of_another_campaign_is_404(pooled, annotator):
    other = campaign_create(slug="other")
    membership_add(campaign=other, user=annotator, role="annotator")
    pair = pair_of(pooled, "q1", "d1")
    client = login(annotator)
    assert client.get(judge_url(other, pair=pair.public_id)).status_code == 404
    assert client.post(record_url(other, pair.public_id), {"grade": 1}).status_code == 404


@pytest.mark.parametrize("name", ["campaign_settings", "campaign_members", "campaign_upload", "campaign_progress"])
def test_annotator_cannot_open_lead_pages(pooled, annotator, name):
    response = login(annotator).get(reverse(f"judging:{name}", args=[pooled.slug]))
    assert response.status_code == 403


@pytest.mark.parametrize("name", ["campaign_settings", "campaign_members", "campaign_upload", "campaign_progress"])
def test_lead_and_superuser_open_lead_pages(pooled, lead, make_user, name):
    url = reverse(f"judging:{name}", args=[pooled.slug])
    assert login(lead).get(url).status_code == 200
    assert login(make_user("root", is_superuser=True, is_staff=True)).get(url).status_code == 200


def test_home_lists_only_my_campaigns(pooled, annotator):
    campaign_create(slug="secret-campaign", name="Secret campaign")
    page = login(annotator).get("/").content.decode()
    assert "Demo" in page and "Secret campaign" not in page


def test_annotator_never_sees_system_names(pooled, annotator):
    client = login(annotator)
    pages = [
        client.get(judge_url(pooled)),
        client.get(reverse("judging:campaign_detail", args=[pooled.slug])),
        client.get(reverse("judging:my_judgments", args=[pooled.slug])),
    ]
    pair_id = shown_pair(pages[0])
    pages.append(client.post(record_url(pooled, pair_id), {"grade": 2}, **HTMX))
    for page in pages:
        html = page.content.decode().lower()
        assert page.status_code == 200
        assert "bm25" not in html and "dense" not in html
        assert "rank" not in html and "score" not in html


def test_lead_sees_systems_on_the_campaign_page(pooled, lead):
    html = login(lead).get(reverse("judging:campaign_detail", args=[pooled.slug])).content.decode()
    assert "bm25" in html and "dense" in html


def test_leaderboard_link_only_for_those_allowed(pooled, annotator, lead):
    link = f'href="/campaigns/{pooled.slug}/leaderboard/"'
    assert link not in login(annotator).get(judge_url(pooled)).content.decode()
    assert link in login(lead).get(judge_url(pooled)).content.decode()
    Campaign.objects.filter(id=pooled.id).update(leaderboard_visible_to_annotators=True)
    assert link in login(annotator).get(judge_url(pooled)).content.decode()


# --------------------------------------------------------------------------- the judging flow


def test_judge_page_shows_query_document_scale_and_guidelines(pooled, annotator):
    Campaign.objects.filter(id=pooled.id).update(guidelines="Judge the product, not the shop.")
    html = login(annotator).get(judge_url(pooled)).content.decode()
    pair = Pair.objects.get(public_id=shown_pair_html(html))
    assert pair.query.text in html and pair.query.description in html
    assert pair.document.title in html and pair.document.text in html
    assert "Judge the product, not the shop." in html
    for value, name in [(0, "Not relevant"), (1, "Partially relevant"), (2, "Highly relevant")]:
        button = rf'data-grade="{value}"[^>]*>\s*<kbd>{value}</kbd><span class="grade-name">{name}</span>'
        assert re.search(button, html)
    assert 'id="shortcuts"' in html and 'id="guidelines"' in html


def shown_pair_html(html: str) -> int:
    return int(PAIR_ID.search(html).group(1))


def test_record_grade_stores_it_with_time_and_shows_next_pair(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    response = client.post(record_url(pooled, first), {"grade": 2, "seconds": "12.5", "note": ""}, **HTMX)
    assert response.status_code == 200
    j = Judgment.objects.get()
    assert (j.pair.public_id, j.grade.value, j.unsure, j.seconds_spent) == (first, 2, False, 12.5)
    html = response.content.decode()
    assert shown_pair(response) not in (None, first)
    assert "Saved" in html and "2 – Highly relevant" in html
    assert "<html" not in html  # an htmx partial, not a whole page
    assert response["HX-Replace-Url"] == judge_url(pooled)


def test_record_and_next_pair_take_at_most_18_sql_queries(pooled, annotator, make_user, django_assert_max_num_queries):
    """The performance contract of the judging page: recording a grade and getting the next pair costs at
    most 17 SQL statements, session, user, BEGIN and COMMIT included, on every step of the queue, whoever
    judged the pair before; 18 when the query has no open pair left and the next one is chosen (the current
    query's statement, prepared on PostgreSQL, then the queue's level probes: judging.selectors.queue). Two of them
    keep the next pair's statement to the query's pairs in PostgreSQL's plan made without values: the probe of the
    annotator's own queries (none here, so the statement leaves them out) and the chosen pair's query and document,
    read by key afterwards (joined in, the query's row was read for every candidate pair). One of
    them adds one to the campaign's labels counter (services.labels_bump): what spares every process a sum over
    the campaign's queries every few seconds; on PostgreSQL the same statement writes the labels log's line (what
    spares the leaderboard a read of every query's version after a judgment), SQLite takes one more for it (it
    has no data-modifying WITH). On PostgreSQL the request runs in one transaction (judging.request_transaction),
    which a test's own transaction turns into one more SAVEPOINT and RELEASE (a server's BEGIN and COMMIT, where
    the session's and the user's reads committed on their own before)."""
    # SQLite's log line, or PostgreSQL's request transaction (a savepoint here)
    extra = 1 if connection.vendor != "postgresql" else 2
    other = make_user("other")
    membership_add(campaign=pooled, user=other, role="annotator")
    client = login(annotator)
    page = client.get(judge_url(pooled))
    hold = re.search(r'data-hold hx-post="([^"]+)"', page.content.decode()).group(1)
    assert client.post(hold, **HTMX).status_code == 204
    pair_id, seen, versions = shown_pair(page), [], dict(Query.objects.values_list("id", "labels_version"))
    judgment_record(pair=Pair.objects.get(public_id=pair_id), annotator=other, grade=0)
    switches = 0
    while len(seen) < 4:  # the fifth and last pair ends the queue: "all done" is another page
        seen.append(pair_id)
        with CaptureQueriesContext(connection) as statements:
            response = client.post(record_url(pooled, pair_id), {"grade": 2, "seconds": "3", "version": ""}, **HTMX)
        assert response.status_code == 200
        before, pair_id = pair_id, shown_pair(response)
        assert pair_id not in seen
        same_query = Pair.objects.get(public_id=before).query_id == Pair.objects.get(public_id=pair_id).query_id
        switches += not same_query
        assert len(statements.captured_queries) <= (17 if same_query else 18) + extra
    assert switches == 1  # both cases were seen
    # What the leaderboard reads was kept up to date on the way: labels (median of 0 and 2 is 0 here) and
    # the versions of the queries whose labels it must rescore.
    first = Pair.objects.get(public_id=seen[0])
    assert (first.label, first.judgment_count) == (0, 2)
    assert all(Pair.objects.get(public_id=p).label == 2 for p in seen[1:])
    bumped = {q for q, v in Query.objects.values_list("id", "labels_version") if v > versions[q]}
    assert bumped == set(Pair.objects.filter(public_id__in=seen).values_list("query_id", flat=True))
    # A change made after going back costs no more.
    page = client.get(judge_url(pooled, pair=seen[1]), **HTMX).content.decode()
    version = re.search(r'name="version" value="([^"]*)"', page).group(1)
    with django_assert_max_num_queries(15 + extra):
        response = client.post(record_url(pooled, seen[1]), {"grade": 1, "version": version}, **HTMX)
    assert response.status_code == 200 and shown_pair(response) == seen[2]
    assert Pair.objects.get(public_id=seen[1]).label == 1


def test_record_without_htmx_redirects_to_the_next_pair(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    response = client.post(record_url(pooled, first), {"grade": 0})
    assert response.status_code == 302 and response["Location"] == judge_url(pooled)
    page = client.get(response["Location"])
    assert shown_pair(page) != first
    assert "Saved" in page.content.decode()


def test_unsure_with_tentative_grade_and_note(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    client.post(record_url(pooled, first), {"unsure": "1", "grade": 1, "note": "brand unclear"}, **HTMX)
    j = Judgment.objects.get()
    assert (j.unsure, j.grade, j.tentative_grade.value, j.note) == (True, None, 1, "brand unclear")


def test_unsure_without_grade(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    response = client.post(record_url(pooled, first), {"unsure": "1", "note": "cannot tell"}, **HTMX)
    assert "Unsure" in response.content.decode()
    j = Judgment.objects.get()
    assert (j.unsure, j.grade, j.tentative_grade) == (True, None, None)


def test_back_then_change_keeps_history_and_moves_forward(pooled, annotator):
    client = login(annotator)
    order = []
    pair_id = shown_pair(client.get(judge_url(pooled)))
    for grade in (0, 1, 2):
        order.append(pair_id)
        pair_id = shown_pair(client.post(record_url(pooled, pair_id), {"grade": grade}, **HTMX))
    # Back from the fourth pair shows the third, and back again the second, with the grade given.
    page = client.get(judge_url(pooled), **HTMX).content.decode()
    back = int(re.search(r'id="back-link" href="\?pair=(\d+)"', page).group(1))
    assert back == order[2]
    page = client.get(judge_url(pooled, pair=order[1]), **HTMX).content.decode()
    assert "Your judgment: <strong>1 – Partially relevant</strong>" in page
    version = re.search(r'name="version" value="([^"]*)"', page).group(1)
    response = client.post(record_url(pooled, order[1]), {"grade": 2, "version": version}, **HTMX)
    assert response.status_code == 200
    assert shown_pair(response) == order[2]  # forward through the history, like a browser
    assert response["HX-Replace-Url"] == judge_url(pooled, pair=order[2])
    j = Judgment.objects.get(pair__public_id=order[1])
    assert j.grade.value == 2
    assert list(j.revisions.values_list("old_grade", "new_grade")) == [(None, 1), (1, 2)]
    assert Judgment.objects.count() == 3


def test_skip_moves_on_and_the_pair_comes_back_last(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    response = client.post(reverse("judging:judge_skip", args=[pooled.slug, first]), **HTMX)
    assert shown_pair(response) != first
    assert "Skipped" in response.content.decode()
    assert not Judgment.objects.exists()
    order = walk(client, pooled)
    assert order[-1] == first and len(order) == 5
    assert Judgment.objects.filter(annotator=annotator).count() == 5


def test_double_submit_records_once(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    data = {"grade": 1, "version": "", "seconds": "3"}
    one = client.post(record_url(pooled, first), data, **HTMX)
    two = client.post(record_url(pooled, first), data, **HTMX)
    assert one.status_code == two.status_code == 200
    assert Judgment.objects.count() == 1
    assert JudgmentRevision.objects.count() == 1
    assert "no change" in two.content.decode()


def test_off_scale_grade_shows_error_and_keeps_the_note(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    response = client.post(record_url(pooled, first), {"grade": 7, "note": "keep this text"}, **HTMX)
    assert response.status_code == 422
    html = response.content.decode()
    assert "Not saved" in html and "7 is not on this campaign&#x27;s scale (0, 1, 2)" in html
    assert ">keep this text</textarea>" in html
    assert shown_pair(response) == first
    assert not Judgment.objects.exists()


def test_non_numeric_grade_is_a_form_error(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    response = client.post(record_url(pooled, first), {"grade": "high"}, **HTMX)
    assert response.status_code == 422 and "Enter a whole number" in response.content.decode()
    assert not Judgment.objects.exists()


def test_grade_is_required_unless_unsure(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    response = client.post(record_url(pooled, first), {"note": "forgot the grade"}, **HTMX)
    assert response.status_code == 422 and "choose a grade" in response.content.decode()


def test_stale_form_does_not_silently_overwrite(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    stale = client.get(judge_url(pooled, pair=first), **HTMX).content.decode()
    stale_version = re.search(r'name="version" value="([^"]*)"', stale).group(1)
    assert stale_version == ""
    # Meanwhile another tab records grade 1 ...
    client.post(record_url(pooled, first), {"grade": 1, "version": ""}, **HTMX)
    # ... and the stale tab sends grade 2: refused, and told what the pair holds now.
    response = client.post(record_url(pooled, first), {"grade": 2, "version": stale_version, "note": "mine"}, **HTMX)
    assert response.status_code == 409
    html = response.content.decode()
    assert "changed after the page was shown" in html and "1 – Partially relevant" in html
    assert ">mine</textarea>" in html
    assert Judgment.objects.get().grade.value == 1
    # Pressing the grade again (the form now carries the current version) replaces it.
    version = re.search(r'name="version" value="([^"]*)"', html).group(1)
    assert client.post(record_url(pooled, first), {"grade": 2, "version": version}, **HTMX).status_code == 200
    assert Judgment.objects.get().grade.value == 2


def test_judging_a_pair_outside_the_pool_is_404(pooled, annotator):
    pair = pair_of(pooled, "q1", "d1")
    Pair.objects.filter(id=pair.id).update(pooled=False)
    client = login(annotator)
    assert client.get(judge_url(pooled, pair=pair.public_id)).status_code == 404
    assert client.get(judge_url(pooled) + "?pair=abc").status_code == 404


def test_all_done_page(pooled, annotator):
    client = login(annotator)
    walk(client, pooled)
    html = client.get(judge_url(pooled)).content.decode()
    assert "Nothing left to judge" in html and "You have judged 5 pairs" in html
    assert PAIR_ID.search(html) is None


def test_all_done_page_is_not_complete_while_a_pair_is_unsure(pooled, lead, annotator):
    client = login(annotator)
    pairs = list(Pair.objects.filter(campaign=pooled, pooled=True).order_by("id"))
    for pair in pairs[:-1]:
        judgment_record(pair=pair, annotator=annotator, grade=1)
    judgment_record(pair=pairs[-1], annotator=annotator, unsure=True, tentative_grade=2)
    note = "Every pair has its judgments, but 1 has no label yet: an annotator was unsure, and a lead decides it"
    done = client.get(judge_url(pooled)).content.decode()
    assert "Nothing left to judge" in done and note in done and "100%" not in done
    back = client.get(judge_url(pooled, pair=pairs[0].public_id)).content.decode()  # the meter, on a judged pair
    assert "all judged · 1 without a label" in back and "% complete" not in back
    campaign = login(lead).get(reverse("judging:campaign_detail", args=[pooled.slug])).content.decode()
    assert "all judged · 1 without a label" in campaign and "100%" not in campaign
    progress = login(lead).get(reverse("judging:campaign_progress", args=[pooled.slug])).content.decode()
    assert "(all judged · 1 without a label)" in progress and "100.0%" not in progress
    Pair.objects.filter(id=pairs[-1].id).update(label=2)  # a lead decided it
    assert "The campaign is 100% complete." in client.get(judge_url(pooled)).content.decode()


@pytest.mark.parametrize(
    ("done", "total", "unlabelled", "digits", "percent"),
    [
        (0, 0, 0, 0, 0.0),
        (1, 3, 0, 0, 33.0),
        (999, 1000, 0, 0, 99.0),
        (9999, 10000, 0, 1, 99.9),
        (5, 5, 1, 0, 99.0),
        (5, 5, 0, 0, 100.0),
        (2, 3, 0, 1, 66.6),
    ],
)
def test_percent_complete_says_100_only_when_every_pair_is_labelled(done, total, unlabelled, digits, percent):
    assert selectors.percent_complete(done, total, unlabelled=unlabelled, digits=digits) == percent


def test_progress_for_query_and_campaign(pooled, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    html = client.post(record_url(pooled, first), {"grade": 1}, **HTMX).content.decode()
    query_total = Pair.objects.filter(query_id=Pair.objects.get(public_id=shown_pair_html(html)).query_id).count()
    assert f'<progress max="{query_total}" value="1">' in html
    assert '<progress max="5" value="1">' in html  # campaign: 1 of 5 pairs has its one judgment


# --------------------------------------------------------------------------- escaping

XSS_DOCS = (
    '{"docid": "evil", "title": "<img src=x onerror=\\"window.__xss=1\\">Evil title", '
    '"text": "Before <script>window.__xss=1</script> after <img src=x onerror=alert(1)>", '
    '"url": "javascript:alert(1)"}\n'
)


@pytest.fixture
def xss_campaign(campaign):
    queries_import(campaign=campaign, data=b"q1\t<script>alert('q')</script> query\n", filename="t.tsv")
    documents_import(campaign=campaign, data=XSS_DOCS.encode(), filename="d.jsonl")
    run_import(campaign=campaign, data=b"q1 Q0 evil 1 1.0 sys\n", filename="r.run")
    return campaign


def test_document_html_is_escaped(xss_campaign, annotator):
    html = login(annotator).get(judge_url(xss_campaign)).content.decode()
    assert "<script>window.__xss" not in html and "<script>alert" not in html
    assert "onerror=" not in html.replace("onerror=alert(1)&gt;", "").replace("onerror=\\&quot;", "")
    assert "<img src=x" not in html
    assert 'href="javascript:' not in html
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html  # the original markup, shown as text
    assert "Evil title" in html and "Before" in html and "after" in html
    assert "&lt;script&gt;alert(&#x27;q&#x27;)&lt;/script&gt; query" in html


def test_document_url_is_a_link_only_when_http(pooled, annotator):
    Document.objects.filter(docid="d1").update(url="https://shop.example/sweater?a=1&b=2")
    client = login(annotator)
    html = client.get(judge_url(pooled, pair=pair_of(pooled, "q1", "d1").public_id)).content.decode()
    assert 'href="https://shop.example/sweater?a=1&amp;b=2"' in html and 'rel="noopener noreferrer nofollow"' in html


def test_my_judgments_escapes_notes_and_titles(xss_campaign, annotator):
    pair = Pair.objects.get(campaign=xss_campaign)
    judgment_record(pair=pair, annotator=annotator, grade=1, note="<script>window.__note=1</script>")
    html = login(annotator).get(reverse("judging:my_judgments", args=[xss_campaign.slug])).content.decode()
    assert "<script>window.__note" not in html and "&lt;script&gt;window.__note=1&lt;/script&gt;" in html
    assert "<img src=x" not in html


# --------------------------------------------------------------------------- my judgments


def test_my_judgments_shows_only_mine(pooled, annotator, make_user):
    other = make_user("ann2")
    membership_add(campaign=pooled, user=other, role="annotator")
    judgment_record(pair=pair_of(pooled, "q1", "d1"), annotator=annotator, grade=2, note="my-own-note")
    judgment_record(pair=pair_of(pooled, "q1", "d3"), annotator=other, grade=0, note="secret-note-of-ann2")
    html = login(annotator).get(reverse("judging:my_judgments", args=[pooled.slug])).content.decode()
    assert "my-own-note" in html and "secret-note-of-ann2" not in html
    assert f'id="j-{pair_of(pooled, "q1", "d3").public_id}"' not in html
    # Nor can the first annotator open the other's judgment through the row editor.
    response = login(annotator).post(
        reverse("judging:my_judgment_save", args=[pooled.slug, pair_of(pooled, "q1", "d3").public_id]), {"grade": 2}
    )
    assert response.status_code == 404
    assert Judgment.objects.get(annotator=other).grade.value == 0


def test_judging_page_does_not_show_another_annotators_judgment(pooled, annotator, make_user):
    other = make_user("ann2")
    membership_add(campaign=pooled, user=other, role="annotator")
    pair = pair_of(pooled, "q1", "d1")
    judgment_record(pair=pair, annotator=other, grade=2, note="secret-note-of-ann2")
    html = login(annotator).get(judge_url(pooled, pair=pair.public_id)).content.decode()
    assert "secret-note-of-ann2" not in html and "Your judgment" not in html
    assert 'aria-pressed="true"' not in html


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"d1", "d2", "d4"}),
        ({"grade": 2}, {"d1"}),
        ({"unsure": "yes"}, {"d2"}),
        ({"unsure": "no"}, {"d1", "d4"}),
        ({"query": "q2"}, {"d4"}),
        ({"q": "merino"}, {"d1"}),
        ({"q": "hesitant"}, {"d2"}),
    ],
)
def test_my_judgments_filters(pooled, annotator, params, expected):
    judgment_record(pair=pair_of(pooled, "q1", "d1"), annotator=annotator, grade=2)
    judgment_record(
        pair=pair_of(pooled, "q1", "d2"), annotator=annotator, unsure=True, tentative_grade=1, note="hesitant"
    )
    judgment_record(pair=pair_of(pooled, "q2", "d4"), annotator=annotator, grade=0)
    html = login(annotator).get(reverse("judging:my_judgments", args=[pooled.slug]), params).content.decode()
    shown = {docid for docid in ("d1", "d2", "d3", "d4") if f'<span class="mono">{docid}</span>' in html}
    assert shown == expected


def test_my_judgments_row_edit(pooled, annotator):
    pair = pair_of(pooled, "q1", "d1")
    j, _ = judgment_record(pair=pair, annotator=annotator, grade=2)
    url = reverse("judging:my_judgment_save", args=[pooled.slug, pair.public_id])
    client = login(annotator)
    response = client.post(url, {"grade": 0, "note": "on reflection", "version": j.updated_at.isoformat()}, **HTMX)
    assert response.status_code == 200
    assert f'id="j-{pair.public_id}"' in response.content.decode()
    j.refresh_from_db()
    assert (j.grade.value, j.note, j.revisions.count()) == (0, "on reflection", 2)
    stale = client.post(url, {"grade": 1, "version": "2000-01-01T00:00:00+00:00"}, **HTMX)
    assert stale.status_code == 409 and "Changed elsewhere" in stale.content.decode()
    bad = client.post(url, {"grade": 9, "version": j.updated_at.isoformat()}, **HTMX)
    assert bad.status_code == 422 and "not on this campaign" in bad.content.decode()
    assert Judgment.objects.get().grade.value == 0


def test_my_judgments_row_edit_without_js_redirects_back_safely(pooled, annotator):
    pair = pair_of(pooled, "q1", "d1")
    j, _ = judgment_record(pair=pair, annotator=annotator, grade=2)
    url = reverse("judging:my_judgment_save", args=[pooled.slug, pair.public_id])
    response = login(annotator).post(
        url, {"grade": 1, "version": j.updated_at.isoformat(), "back": "https://evil.example/"}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("judging:my_judgments", args=[pooled.slug])


# --------------------------------------------------------------------------- queue order


@pytest.fixture
def ranked(db, make_user):
    """One query with 30 documents that every system ranks d00, d01, ... d29, imported in that order;
    five annotators who may all judge every pair."""
    c = campaign_create(slug="ranked", pool_depth=30, redundancy=5, queue_mode="shuffled")
    queries_import(campaign=c, data=b"q1\tbest wool sweater\n", filename="t.tsv")
    docs = "".join(f'{{"docid": "d{i:02d}", "title": "doc {i}", "text": "text"}}\n' for i in range(30))
    documents_import(campaign=c, data=docs.encode(), filename="d.jsonl")
    run = "".join(f"q1 Q0 d{i:02d} {i + 1} {100 - i} sys\n" for i in range(30))
    run_import(campaign=c, data=run.encode(), filename="r.run")
    users = [make_user(f"judge{i}") for i in range(5)]
    for u in users:
        membership_add(campaign=c, user=u, role="annotator")
    return c, users


def test_document_order_is_not_the_rank_order_and_is_stable(ranked):
    campaign, users = ranked
    rank_order = list(
        Pair.objects.filter(campaign=campaign).order_by("document__docid").values_list("public_id", flat=True)
    )
    skipped_ids: list[int] = []
    skipped_first: list[str] = []
    while not (nxt := selectors.pair_next(campaign=campaign, annotator=users[0], exclude=skipped_ids)).was_skipped:
        skipped_ids.append(nxt.pair.id)
        skipped_first.append(nxt.pair.public_id)
    orders = []
    for user in users:
        client = login(user)
        first_look = shown_pair(client.get(judge_url(campaign)))
        assert shown_pair(client.get(judge_url(campaign))) == first_look  # a reload shows the same pair
        order = walk(client, campaign)
        assert order[0] == first_look
        assert sorted(order) == sorted(rank_order)  # every pair once
        orders.append(order)
    assert all(order != rank_order for order in orders)
    assert len({tuple(o) for o in orders}) == len(orders)  # each annotator has an order of their own
    # The order is computed, not stored: skipping through the queue before judging showed the same one.
    assert skipped_first == orders[0]


def test_queries_are_grouped_and_shuffled_per_annotator(db, make_user):
    c = campaign_create(slug="many", pool_depth=3, redundancy=3, queue_mode="shuffled")
    topics = "".join(f"q{i}\tquery {i}\n" for i in range(12))
    queries_import(campaign=c, data=topics.encode(), filename="t.tsv")
    run = "".join(f"q{i} Q0 d{i}-{j} {j + 1} {10 - j} sys\n" for i in range(12) for j in range(3))
    run_import(campaign=c, data=run.encode(), filename="r.run")
    sequences = []
    for n in range(3):
        user = make_user(f"j{n}")
        membership_add(campaign=c, user=user, role="annotator")
        order = walk(login(user), c)
        queries = list(Pair.objects.filter(public_id__in=order).values_list("public_id", "query__qid"))
        qid_of = dict(queries)
        seq = [qid_of[p] for p in order]
        # grouped: once a query is left it never comes back
        visited = [q for i, q in enumerate(seq) if i == 0 or seq[i - 1] != q]
        assert len(visited) == len(set(visited)) == 12
        sequences.append(visited)
    assert len({tuple(s) for s in sequences}) == 3


def test_redundancy_one_shares_the_pool(pooled, annotator, make_user):
    other = make_user("ann2")
    membership_add(campaign=pooled, user=other, role="annotator")
    first = walk(login(annotator), pooled)
    assert len(first) == 5
    html = login(other).get(judge_url(pooled)).content.decode()
    assert "Nothing left to judge" in html


def test_redundancy_two_gives_each_pair_to_two_annotators_least_judged_first(pooled, annotator, make_user):
    Campaign.objects.filter(id=pooled.id).update(redundancy=2)
    pooled.refresh_from_db()
    others = [make_user(f"ann{i}") for i in (2, 3)]
    for u in others:
        membership_add(campaign=pooled, user=u, role="annotator")
    # The first annotator judges two pairs of q1; the second is offered unjudged pairs first.
    q1_pairs = list(Pair.objects.filter(query__qid="q1").values_list("public_id", flat=True))
    for pid in q1_pairs[:2]:
        judgment_record(pair=Pair.objects.get(public_id=pid), annotator=annotator, grade=1)
    second = walk(login(others[0]), pooled)
    assert len(second) == 5
    assert second[0] not in q1_pairs[:2]  # a pair nobody has judged comes first
    walk(login(annotator), pooled)
    # Every pair now has two judgments: the third annotator gets nothing.
    assert set(Pair.objects.values_list("judgment_count", flat=True)) == {2}
    assert "Nothing left to judge" in login(others[1]).get(judge_url(pooled)).content.decode()


def test_pair_next_prefers_unjudged_pairs_across_queries(pooled, annotator, make_user):
    Campaign.objects.filter(id=pooled.id).update(redundancy=2)
    pooled.refresh_from_db()
    other = make_user("ann2")
    membership_add(campaign=pooled, user=other, role="annotator")
    q1_pairs = Pair.objects.filter(query__qid="q1")
    for pair in q1_pairs:
        judgment_record(pair=pair, annotator=annotator, grade=1)
    # Starting fresh, the other annotator is sent to q2 (no judgments yet) before q1 (one each).
    nxt = selectors.pair_next(campaign=pooled, annotator=other)
    assert nxt.pair.query.qid == "q2"


# --------------------------------------------------------------------------- lead pages


def upload(client, campaign, kind, name, content, **extra):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = {"kind": kind, f"{kind}-kind": kind, f"{kind}-file": SimpleUploadedFile(name, content)}
    data.update({f"{kind}-{k}": v for k, v in extra.items()})
    return client.post(reverse("judging:campaign_upload", args=[campaign.slug]), data)


def test_upload_all_four_kinds(campaign, lead):
    client = login(lead)
    assert upload(client, campaign, "topics", "t.tsv", TOPICS.encode()).status_code == 302
    assert upload(client, campaign, "docs", "d.jsonl", DOCS.encode()).status_code == 302
    assert upload(client, campaign, "run", "bm25.run", RUN_BM25.encode()).status_code == 302
    response = upload(client, campaign, "qrels", "old.qrels", b"q1 0 d1 2\n", annotator="ann")
    assert response.status_code == 302
    page = client.get(response["Location"]).content.decode()
    assert "old.qrels: 1 judgment added" in page
    assert Query.objects.count() == 2 and Document.objects.count() == 4
    assert System.objects.get().name == "bm25"
    assert Judgment.objects.get().annotator.username == "ann"


@pytest.mark.parametrize(
    ("kind", "name", "content", "message"),
    [
        ("topics", "topics.tsv", b"q1\tok\nq2\n", "topics.tsv, line 2: expected 2 to 4 tab-separated columns"),
        (
            "docs",
            "docs.jsonl",
            b'{"docid": "a", "text": "x"}\n{"docid": "b"}\n',
            "docs.jsonl, line 2, field &#x27;text&#x27;",
        ),
        (
            "run",
            "bad.run",
            b"q1 Q0 d1 1 2.0 t\nq1 Q0 d2 x 1.0 t\n",
            "bad.run, line 2, field &#x27;rank&#x27;: not an integer",
        ),
        (
            "qrels",
            "bad.qrels",
            b"q1 0 d1 1\nq1 0 d2 high\n",
            "bad.qrels, line 2, field &#x27;label&#x27;: not an integer",
        ),
    ],
)
def test_upload_broken_file_names_file_line_field_and_writes_nothing(campaign, lead, kind, name, content, message):
    response = upload(login(lead), campaign, kind, name, content)
    assert response.status_code == 422
    html = response.content.decode()
    assert message in html and "nothing was imported" in html
    assert not Query.objects.exists() and not Document.objects.exists()
    assert not Pair.objects.exists() and not Judgment.objects.exists() and not System.objects.exists()


def test_upload_qrels_off_scale_label_is_refused(campaign, lead):
    response = upload(login(lead), campaign, "qrels", "q.qrels", b"q1 0 d1 1\nq1 0 d2 5\n")
    assert response.status_code == 422
    assert "q.qrels, line 2, field &#x27;label&#x27;: label 5 is not on campaign" in response.content.decode()
    assert not Judgment.objects.exists()


def test_upload_qrels_for_a_user_outside_the_campaign(campaign, lead, make_user):
    make_user("nobody")
    response = upload(login(lead), campaign, "qrels", "q.qrels", b"q1 0 d1 1\n", annotator="nobody")
    assert response.status_code == 422 and "is not a member of campaign" in response.content.decode()


def test_upload_different_run_for_same_system_needs_replace(pooled, lead):
    changed = RUN_BM25.replace("9.5", "1.5").encode()
    response = upload(login(lead), pooled, "run", "bm25.run", changed)
    page = response.content.decode()
    assert response.status_code == 422 and "already has a different run" in page
    # The page names its own checkbox, not a command-line flag or an API field.
    assert "tick “replace a different run of the same system” and upload the file again" in page
    assert "--replace" not in page and "replace=true" not in page
    assert upload(login(lead), pooled, "run", "bm25.run", changed, replace="on").status_code == 302


def test_create_campaign_and_edit_scale(make_user):
    boss = make_user("boss")
    boss.user_permissions.add(Permission.objects.get(codename="add_campaign"))
    client = login(boss)
    response = client.post(
        reverse("judging:campaign_new"),
        {
            "slug": "web-2024",
            "name": "Web 2024",
            "description": "",
            "guidelines": "Be kind.",
            "pool_depth": 20,
            "redundancy": 2,
            "grades": "0,1,2,3",
        },
    )
    assert response.status_code == 302
    c = Campaign.objects.get(slug="web-2024")
    assert (c.pool_depth, c.redundancy, c.guidelines) == (20, 2, "Be kind.")
    assert list(c.grades.values_list("value", flat=True)) == [0, 1, 2, 3]
    assert Membership.objects.get(campaign=c, user=boss).role == "lead"

    settings_url = reverse("judging:campaign_settings", args=["web-2024"])
    assert client.get(settings_url).status_code == 200
    form = {
        "name": "Web 2024",
        "description": "d",
        "guidelines": "New guidelines",
        "pool_depth": 25,
        "redundancy": 1,
        "aggregation": "median",
        "grades-TOTAL_FORMS": 4,
        "grades-INITIAL_FORMS": 4,
        "grades-MIN_NUM_FORMS": 0,
        "grades-MAX_NUM_FORMS": 1000,
    }
    names = ["Junk", "Meh", "Good", "Perfect"]
    for i, name in enumerate(names):
        form.update(
            {
                f"grades-{i}-value": i,
                f"grades-{i}-name": name,
                f"grades-{i}-description": f"about {name}",
                f"grades-{i}-examples": f"e.g. {name}",
            }
        )
    assert client.post(settings_url, form).status_code == 302
    c.refresh_from_db()
    assert (c.guidelines, c.pool_depth, c.redundancy) == ("New guidelines", 25, 1)
    assert list(c.grades.values_list("name", "examples")) == [(n, f"e.g. {n}") for n in names]

    # Once judging has started the values are fixed; names can still change.
    queries_import(campaign=c, data=TOPICS.encode(), filename="t.tsv")
    run_import(campaign=c, data=RUN_BM25.encode(), filename="r.run")
    membership_add(campaign=c, user=boss, role="lead")
    judgment_record(pair=Pair.objects.filter(campaign=c).first(), annotator=boss, grade=3)
    form["grades-3-value"] = 4
    response = client.post(settings_url, form)
    assert response.status_code == 422 and "fixed once judging has started" in response.content.decode()
    assert list(c.grades.values_list("value", flat=True)) == [0, 1, 2, 3]


def test_create_campaign_needs_permission(annotator):
    assert login(annotator).get(reverse("judging:campaign_new")).status_code == 403


def settings_form(campaign, *, grades=None, **changes) -> dict:
    """The settings page's POST body: the campaign's settings with ``changes``, and its grades (or ``grades``,
    (value, name) pairs)."""
    grades = grades if grades is not None else [(g.value, g.name) for g in campaign.grades.all()]
    form = {
        "name": campaign.name,
        "description": campaign.description,
        "guidelines": campaign.guidelines,
        "pool_depth": campaign.pool_depth,
        "redundancy": campaign.redundancy,
        "aggregation": campaign.aggregation,
        "grades-TOTAL_FORMS": len(grades),
        "grades-INITIAL_FORMS": len(grades),
        "grades-MIN_NUM_FORMS": 0,
        "grades-MAX_NUM_FORMS": 1000,
        **changes,
    }
    for i, (value, name) in enumerate(grades):
        form.update({f"grades-{i}-value": value, f"grades-{i}-name": name})
    return form


def test_deeper_pool_adds_pairs(pooled, lead):
    run_import(campaign=pooled, data=b"q2 Q0 d4 1 3 deep\nq2 Q0 d2 2 2 deep\nq2 Q0 d1 3 1 deep\n", filename="deep.run")
    before = Pair.objects.filter(pooled=True).count()
    client = login(lead)
    url = reverse("judging:campaign_settings", args=[pooled.slug])
    response = client.post(url, settings_form(pooled, pool_depth=3))
    assert response.status_code == 302
    assert Pair.objects.filter(pooled=True).count() == before + 1  # q2 d1, third in the deep run
    assert pair_of(pooled, "q2", "d1").pooled
    page = client.get(response["Location"]).content.decode()
    assert "Settings saved. The deeper pool added 1 pair to judge." in page


def test_members_add_change_remove(pooled, lead, annotator, make_user):
    make_user("newbie")
    client = login(lead)
    url = reverse("judging:campaign_members", args=[pooled.slug])
    assert client.post(url, {"action": "add", "username": "newbie", "role": "annotator"}).status_code == 302
    newbie = Membership.objects.get(campaign=pooled, user__username="newbie")
    assert newbie.role == "annotator"
    response = client.post(url, {"action": "add", "username": "ghost", "role": "annotator"})
    assert response.status_code == 422 and "no user named" in response.content.decode()
    page = client.post(url, {"action": "role", "user": newbie.user_id, "role": "lead"}, follow=True).content.decode()
    assert Membership.objects.get(id=newbie.id).role == "lead" and "newbie is now a lead." in page
    page = client.post(url, {"action": "role", "user": newbie.user_id, "role": "annotator"}, follow=True)
    assert "newbie is now an annotator." in page.content.decode()  # an article that fits the word
    client.post(url, {"action": "role", "user": newbie.user_id, "role": "lead"})
    page = client.post(url, {"action": "remove", "user": annotator.id}).content.decode()
    assert "Remove ann from this campaign?" in page  # asked first: nothing removed yet
    assert Membership.objects.filter(campaign=pooled, user=annotator).exists()
    client.post(url, {"action": "remove", "user": annotator.id, "confirm": "1"})
    assert not Membership.objects.filter(campaign=pooled, user=annotator).exists()
    assert login(annotator).get(judge_url(pooled)).status_code == 404


def test_last_lead_cannot_be_removed(pooled, lead):
    client = login(lead)
    url = reverse("judging:campaign_members", args=[pooled.slug])
    response = client.post(url, {"action": "remove", "user": lead.id, "confirm": "1"}, follow=True)
    assert "at least one lead" in response.content.decode()
    assert Membership.objects.filter(campaign=pooled, user=lead, role="lead").exists()


def test_progress_page_per_annotator(pooled, lead, annotator):
    client = login(annotator)
    first = shown_pair(client.get(judge_url(pooled)))
    client.post(record_url(pooled, first), {"grade": 1, "seconds": "4"}, **HTMX)
    second = shown_pair(client.get(judge_url(pooled)))
    client.post(record_url(pooled, second), {"unsure": "1", "note": "hmm", "seconds": "8"}, **HTMX)
    html = login(lead).get(reverse("judging:campaign_progress", args=[pooled.slug])).content.decode()
    row = re.search(r"<td>ann</td>(.*?)</tr>", html, re.S).group(1)
    cells = re.findall(r'<td class="num">([^<]*)</td>', row)
    assert cells == ["2", "1", "1", "6.0 s"]


def test_progress_page_tags_a_model_judge(pooled, lead, annotator):
    judge = model_judge_get_or_create(name="bot", campaign=pooled)
    judgment_record(pair=pair_of(pooled, "q1", "d1"), annotator=judge, grade=1)
    judgment_record(pair=pair_of(pooled, "q1", "d1"), annotator=annotator, grade=1, seconds_spent=3.0)
    html = login(lead).get(reverse("judging:campaign_progress", args=[pooled.slug])).content.decode()
    bot = re.search(r"<td>bot</td>(.*?)</tr>", html, re.S).group(1)
    ann = re.search(r"<td>ann</td>(.*?)</tr>", html, re.S).group(1)
    assert '<span class="badge">model judge</span>' in bot and "model judge" not in ann
    assert re.findall(r'<td class="num">([^<]*)</td>', bot)[-1] == "–"  # not "0.0 s": a model takes no time
    assert re.findall(r'<td class="num">([^<]*)</td>', ann)[-1] == "3.0 s"


def test_htmx_history_restore_gets_the_whole_page(pooled, annotator):
    response = login(annotator).get(judge_url(pooled), HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")
    assert "<html" in response.content.decode()


def test_settings_switch_aggregation_relabels(pooled, lead, annotator, make_user):
    Campaign.objects.filter(id=pooled.id).update(redundancy=2)
    other = make_user("ann2")
    membership_add(campaign=pooled, user=other, role="annotator")
    pair = pair_of(pooled, "q1", "d1")
    judgment_record(pair=pair, annotator=annotator, grade=0)
    judgment_record(pair=pair, annotator=other, grade=2)
    assert Pair.objects.get(id=pair.id).label == 0  # median, ties to the lower grade
    form = settings_form(pooled, redundancy=2, aggregation="max")
    assert login(lead).post(reverse("judging:campaign_settings", args=[pooled.slug]), form).status_code == 302
    assert Pair.objects.get(id=pair.id).label == 2


def test_settings_page_and_api_refuse_a_bad_scale_with_the_services_words(pooled, lead):
    """The page's formset and the API's serializer both use the service's scale check: same rule, same words."""
    form = settings_form(pooled, grades=[(1, g.name) for g in pooled.grades.all()])  # every grade given the value 1
    response = login(lead).post(reverse("judging:campaign_settings", args=[pooled.slug]), form)
    assert response.status_code == 422 and "each grade value may appear only once" in response.content.decode()
    scale = [{"value": 1, "name": "a"}, {"value": 1, "name": "b"}]
    response = client_for(lead).patch(f"/api/campaigns/{pooled.slug}/", {"scale": scale}, format="json")
    assert response.status_code == 400 and response.json() == {"scale": ["each grade value may appear only once"]}
    response = client_for(lead).patch(f"/api/campaigns/{pooled.slug}/", {"scale": []}, format="json")
    assert response.status_code == 400 and response.json() == {"scale": ["a grading scale needs at least one grade"]}
    assert list(pooled.grades.values_list("value", flat=True)) == [0, 1, 2]


def test_members_page_offers_no_lead_role_to_a_model_judge(pooled, lead):
    model_judge_get_or_create(name="bot", campaign=pooled)
    html = login(lead).get(reverse("judging:campaign_members", args=[pooled.slug])).content.decode()
    bot = re.search(r"<td>bot</td>(.*?)</tr>", html, re.S).group(1)
    assert "<select" not in bot and "annotator" in bot and "model judge (no login)" in bot
    assert 'aria-label="Role of ann"' in html  # a person's role can still be changed


def test_members_page_answers_404_for_a_user_who_is_not_a_member(pooled, lead, make_user):
    outsider = make_user("outsider")
    url = reverse("judging:campaign_members", args=[pooled.slug])
    for action in ("role", "remove", "link"):
        response = login(lead).post(url, {"action": action, "user": outsider.id, "role": "lead"})
        assert response.status_code == 404, action
    assert not Membership.objects.filter(user=outsider).exists()
