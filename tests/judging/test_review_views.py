"""The leads' review queue, agreement and annotator-quality pages through Django's test Client."""

from __future__ import annotations

import re

import krippendorff
import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from judging import charts
from judging.models import Adjudication, Campaign, Pair
from judging.scoring import leaderboard_data
from judging.selectors import agreement as agreement_selectors
from judging.selectors.agreement import review_queue
from judging.services import (
    adjudication_set,
    campaign_create,
    campaign_policy_set,
    gold_label_set,
    judgment_record,
    membership_add,
    run_import,
)
from judging.views import review as review_views
from tests.data import THREE_ANNOTATOR_GRADES

HTMX = {"HTTP_HX_REQUEST": "true"}
ALPHA = re.compile(r'rv-figure-value">([-0-9.]+)<')


@pytest.fixture
def judged(make_user):
    """8 pairs over two queries judged by three annotators; a lead and a user outside the campaign."""
    campaign = campaign_create(slug="rev", pool_depth=8)
    run = "".join(f"q{i // 4} Q0 d{i} {i % 4 + 1} {10 - i % 4} sysA\n" for i in range(8))
    # sysB ranks each query's documents in the opposite order
    run += "".join(f"q{i // 4} Q0 d{i} {4 - i % 4} {1 + i % 4} sysB\n" for i in range(8))
    run_import(campaign=campaign, data=run.encode(), filename="r.run")
    users = [make_user(n) for n in ("alice", "bob", "carol")]
    for u in users:
        membership_add(campaign=campaign, user=u, role="annotator")
    lead = make_user("boss")
    membership_add(campaign=campaign, user=lead, role="lead")
    make_user("outsider")
    pairs = {p.document.docid: p for p in Pair.objects.filter(campaign=campaign).select_related("document", "campaign")}
    for i, row in enumerate(THREE_ANNOTATOR_GRADES):
        for u, g in zip(users, row, strict=True):
            if g is not None:
                judgment_record(pair=pairs[f"d{i}"], annotator=u, grade=g, seconds_spent=5 + i)
    judgment_record(pair=pairs["d4"], annotator=users[2], unsure=True, tentative_grade=2, note="can't tell")
    return campaign, users, lead, pairs


def client_for(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def url(name: str, campaign: Campaign, *args) -> str:
    return reverse(f"judging:{name}", args=[campaign.slug, *args])


def queue_docids(campaign: Campaign) -> set[str]:
    return {p.document.docid for p in review_queue(campaign=campaign)}


# --------------------------------------------------------------------------- access

GET_PAGES = ["review", "agreement", "quality"]


def _post_targets(pairs) -> list[tuple[str, tuple, dict]]:
    d3 = pairs["d3"].id
    return [
        ("review_decide", (d3,), {"grade": "1"}),
        ("review_withdraw", (d3,), {}),
        ("agreement_policy", (), {"policy": "max"}),
        ("quality_gold", (d3,), {"grade": "2"}),
    ]


@pytest.mark.parametrize("name", GET_PAGES)
def test_pages_permission_matrix(judged, django_user_model, name):
    campaign, users, lead, _ = judged
    target = url(name, campaign)
    anonymous = client_for().get(target)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    assert client_for().get(target, **HTMX).status_code == 401
    assert client_for(django_user_model.objects.get(username="outsider")).get(target).status_code == 404
    assert client_for(users[0]).get(target).status_code == 403
    assert client_for(lead).get(target).status_code == 200


def test_posts_permission_matrix(judged, django_user_model):
    campaign, users, lead, pairs = judged
    outsider = django_user_model.objects.get(username="outsider")
    for name, args, data in _post_targets(pairs):
        target = url(name, campaign, *args)
        anonymous = client_for().post(target, data)
        assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login")), name
        assert client_for(outsider).post(target, data).status_code == 404, name
        assert client_for(users[0]).post(target, data).status_code == 403, name
    # nothing was written by anyone but a lead
    assert not Adjudication.objects.exists()
    assert not Pair.objects.filter(gold_label__isnull=False).exists()
    assert Campaign.objects.get(id=campaign.id).aggregation == "median"
    for name, args, data in _post_targets(pairs):
        assert client_for(lead).post(url(name, campaign, *args), data).status_code == 302, name


def test_pages_refuse_get_on_post_views_and_unknown_pairs(judged):
    campaign, _, lead, pairs = judged
    client = client_for(lead)
    assert client.get(url("review_decide", campaign, pairs["d3"].id)).status_code == 405
    other = campaign_create(slug="other", pool_depth=1)
    run_import(campaign=other, data=b"x Q0 y 1 1 s\n", filename="o.run")
    foreign = Pair.objects.get(campaign=other)
    assert client.post(url("review_decide", campaign, foreign.id), {"grade": "1"}).status_code == 404
    assert not Adjudication.objects.exists()


# --------------------------------------------------------------------------- review queue


def test_review_page_lists_unsure_and_disputed_with_every_judgment(judged):
    campaign, _, lead, pairs = judged
    response = client_for(lead).get(url("review", campaign))
    html = response.content.decode()
    shown = {row.pair.document.docid for row in response.context["rows"]}
    assert shown == {"d3", "d4", "d5"}
    assert [t["count"] for t in response.context["tabs"]] == [3, 1, 2, 0]
    d3 = next(r for r in response.context["rows"] if r.pair.document.docid == "d3")
    assert [(j.annotator.username, j.grade.value) for j in d3.judgments] == [("alice", 2), ("bob", 0), ("carol", 1)]
    assert d3.reasons == ["grades 0 and 2: two or more apart"]
    assert 'unsure</span> <span class="rv-tentative">(tentative 2)</span>' in html
    assert "can&#x27;t tell" in html


@pytest.mark.parametrize(
    ("kind", "expected"), [("unsure", {"d4"}), ("disputed", {"d3", "d5"}), ("all", {"d3", "d4", "d5"})]
)
def test_review_page_filters_by_kind(judged, kind, expected):
    campaign, _, lead, _ = judged
    response = client_for(lead).get(url("review", campaign), {"kind": kind})
    assert {row.pair.document.docid for row in response.context["rows"]} == expected


def test_review_page_filters_by_query(judged):
    campaign, _, lead, _ = judged
    response = client_for(lead).get(url("review", campaign), {"q": "q0"})
    assert {row.pair.document.docid for row in response.context["rows"]} == {"d3"}
    response = client_for(lead).get(url("review", campaign), {"q": "nothing like it"})
    assert response.context["rows"] == []


def test_review_decision_becomes_the_label_and_leaves_the_queue(judged):
    campaign, _, lead, pairs = judged
    d3 = pairs["d3"]
    assert Pair.objects.get(id=d3.id).label == 1  # median of 2, 0, 1
    response = client_for(lead).post(url("review_decide", campaign, d3.id), {"grade": "0", "note": "off topic"}, **HTMX)
    assert response.status_code == 200
    assert response.templates[0].name == "judging/_review_row.html"
    assert f'id="pair-{d3.id}"' in response.content.decode()
    assert "has left the queue" in response.content.decode()
    pair = Pair.objects.get(id=d3.id)
    assert (pair.label, pair.adjudicated) == (0, True)
    decision = Adjudication.objects.get(pair=d3)
    assert (decision.decided_by, decision.note, decision.grade.value) == (lead, "off topic", 0)
    assert decision.decided_at is not None
    assert "d3" not in queue_docids(campaign)
    listed = client_for(lead).get(url("review", campaign))
    assert d3.id not in {row.pair.id for row in listed.context["rows"]}
    decided = client_for(lead).get(url("review", campaign), {"kind": "decided"})
    assert [row.pair.id for row in decided.context["rows"]] == [d3.id]
    assert "by boss" in decided.content.decode()


def test_review_decision_can_be_changed_and_withdrawn(judged):
    campaign, _, lead, pairs = judged
    d5 = pairs["d5"]
    client = client_for(lead)
    client.post(url("review_decide", campaign, d5.id), {"grade": "2"})
    client.post(url("review_decide", campaign, d5.id), {"grade": "1", "note": "second look"})
    assert Adjudication.objects.filter(pair=d5).count() == 1
    assert Pair.objects.get(id=d5.id).label == 1
    response = client.post(url("review_withdraw", campaign, d5.id), **HTMX)
    assert response.status_code == 200 and "back in the queue" in response.content.decode()
    assert not Adjudication.objects.filter(pair=d5).exists()
    pair = Pair.objects.get(id=d5.id)
    assert (pair.label, pair.adjudicated) == (1, False)  # median of 0, 1, 2
    assert "d5" in queue_docids(campaign)


def test_review_decision_without_htmx_redirects_back(judged):
    campaign, _, lead, pairs = judged
    back = url("review", campaign) + "?kind=disputed"
    response = client_for(lead).post(url("review_decide", campaign, pairs["d3"].id), {"grade": "2", "back": back})
    assert response.status_code == 302 and response["Location"] == back
    evil = client_for(lead).post(
        url("review_decide", campaign, pairs["d5"].id), {"grade": "2", "back": "https://evil.example/"}
    )
    assert evil["Location"] == url("review", campaign)


@pytest.mark.parametrize("grade", ["7", "", "two"])
def test_review_decision_off_the_scale_is_refused(judged, grade):
    campaign, _, lead, pairs = judged
    response = client_for(lead).post(url("review_decide", campaign, pairs["d3"].id), {"grade": grade}, **HTMX)
    assert response.status_code == 422
    assert "Not decided" in response.content.decode()
    assert not Adjudication.objects.exists()
    assert Pair.objects.get(id=pairs["d3"].id).label == 1


def test_review_page_escapes_notes_and_documents(judged):
    campaign, users, lead, pairs = judged
    doc = pairs["d3"].document
    doc.title = "<script>alert('title')</script>Jumper"
    doc.text = "<script>alert('text')</script><b>Wool</b> & more"
    doc.save()
    query = pairs["d3"].query
    query.description = "<img src=x onerror=alert(1)>"
    query.save()
    judgment_record(pair=pairs["d3"], annotator=users[0], grade=2, note="<script>alert('note')</script>")
    adjudication_set(pair=pairs["d5"], lead=lead, grade=1, note="<script>alert('decision')</script>")
    client = client_for(lead)
    for params in ({}, {"kind": "decided"}):
        html = client.get(url("review", campaign), params).content.decode()
        assert "<script>alert" not in html
        assert "<img src=x" not in html
    html = client.get(url("review", campaign)).content.decode()
    assert "&lt;script&gt;alert(&#x27;note&#x27;)&lt;/script&gt;" in html
    assert "&lt;script&gt;alert(&#x27;text&#x27;)" in html  # the markup, shown as text on request
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    decided = client.get(url("review", campaign), {"kind": "decided"}).content.decode()
    assert "&lt;script&gt;alert(&#x27;decision&#x27;)&lt;/script&gt;" in decided


def test_review_page_query_count_does_not_grow_with_rows(make_user, django_assert_max_num_queries):
    campaign = campaign_create(slug="big", pool_depth=60)
    run = "".join(f"q{i % 3} Q0 d{i} {i // 3 + 1} {100 - i} s\n" for i in range(60))
    run_import(campaign=campaign, data=run.encode(), filename="big.run")
    lead, a, b = make_user("lead"), make_user("a"), make_user("b")
    membership_add(campaign=campaign, user=lead, role="lead")
    for u in (a, b):
        membership_add(campaign=campaign, user=u, role="annotator")
    pairs = list(Pair.objects.filter(campaign=campaign).select_related("campaign"))
    for p in pairs:
        judgment_record(pair=p, annotator=a, unsure=True, note="?")
        judgment_record(pair=p, annotator=b, grade=2)
    for p in pairs[:5]:
        adjudication_set(pair=p, lead=lead, grade=0)
    client = client_for(lead)
    client.get(url("review", campaign))  # warm the session
    with django_assert_max_num_queries(16):
        response = client.get(url("review", campaign))
    assert len(response.context["rows"]) == review_views.PAGE_SIZE
    assert response.context["page"].paginator.count == 55
    with django_assert_max_num_queries(16):
        response = client.get(url("review", campaign), {"kind": "decided"})
    assert len(response.context["rows"]) == 5
    with django_assert_max_num_queries(16):
        response = client.get(url("review", campaign), {"page": "2"})
    assert len(response.context["rows"]) == 5


# --------------------------------------------------------------------------- agreement and policy


def _values() -> np.ndarray:
    return np.array([[np.nan if g is None else g for g in row] for row in THREE_ANNOTATOR_GRADES], dtype=float)


def test_agreement_page_alpha_equals_krippendorff(judged):
    campaign, _, lead, _ = judged
    response = client_for(lead).get(url("agreement", campaign))
    html = response.content.decode()
    expected = krippendorff.alpha(reliability_data=_values().T, level_of_measurement="ordinal", value_domain=[0, 1, 2])
    data = response.context["data"]
    assert data["overall"]["alpha"] == pytest.approx(expected, abs=1e-9)
    assert ALPHA.findall(html)[0] == f"{expected:.3f}"
    # shares of agreeing annotator pairs per pair: 1, 0, 1, 0, 1, 0, 1, 1/3 (d7: 1-0-1) -> mean 13/24
    assert data["overall"]["raw"] == pytest.approx(13 / 24, abs=1e-12)
    low, high = data["overall"]["raw_ci"]
    assert low <= 13 / 24 <= high
    assert "0.542" in html and f"[{low:.2f}, {high:.2f}]" in html
    assert {(p["a"], p["b"]) for p in response.context["pairs"]} == {
        ("alice", "bob"),
        ("alice", "carol"),
        ("bob", "carol"),
    }
    assert html.count('class="rv-confusion"') == 3
    assert "q0" in html and "q1" in html


def test_agreement_is_cached_until_a_judgment_changes(judged, monkeypatch):
    campaign, users, lead, pairs = judged
    calls = []
    real = agreement_selectors.campaign_agreement

    def counting(**kwargs):
        calls.append(1)
        return real(**kwargs)

    monkeypatch.setattr(agreement_selectors, "campaign_agreement", counting)
    client = client_for(lead)
    first = client.get(url("agreement", campaign)).context["data"]["overall"]["alpha"]
    client.get(url("agreement", campaign))
    assert len(calls) == 1
    judgment_record(pair=pairs["d3"], annotator=users[1], grade=2)
    changed = client.get(url("agreement", campaign)).context["data"]["overall"]["alpha"]
    assert len(calls) == 2
    assert changed != pytest.approx(first)


def test_agreement_page_without_enough_judgments(make_user):
    campaign = campaign_create(slug="empty", pool_depth=2)
    lead = make_user("lead")
    membership_add(campaign=campaign, user=lead, role="lead")
    response = client_for(lead).get(url("agreement", campaign))
    assert response.status_code == 200
    assert "No agreement figures yet" in response.content.decode()
    assert "No systems yet" in response.content.decode()


def test_agreement_page_with_one_system_and_no_judgments(make_user):
    campaign = campaign_create(slug="fresh", pool_depth=2)
    run_import(campaign=campaign, data=b"q Q0 a 1 2 only\nq Q0 b 2 1 only\n", filename="one.run")
    lead = make_user("lead")
    membership_add(campaign=campaign, user=lead, role="lead")
    response = client_for(lead).get(url("agreement", campaign))
    assert response.status_code == 200
    assert [s["tau"] for s in response.context["stability"]] == ["–"] * 5  # one system: nothing to correlate


def test_policy_switch_changes_every_label_and_the_leaderboard_follows(judged):
    campaign, _, lead, pairs = judged
    before = leaderboard_data(campaign=campaign, per_query=False)
    preview = leaderboard_data(campaign=campaign, policy="max", per_query=False)
    response = client_for(lead).post(url("agreement_policy", campaign), {"policy": "max", "measure": "MAP"})
    assert response.status_code == 302 and response["Location"].endswith("?measure=MAP#policy")
    campaign.refresh_from_db()
    assert campaign.aggregation == "max"
    stored = dict(Pair.objects.filter(campaign=campaign, label__isnull=False).values_list("id", "label"))
    # the highest confident grade of each pair, read off THREE_ANNOTATOR_GRADES (carol is unsure of d4)
    assert stored == {pairs[f"d{i}"].id: grade for i, grade in enumerate([2, 2, 0, 2, 1, 2, 2, 1])}
    assert stored[pairs["d3"].id] == 2 and stored[pairs["d1"].id] == 2
    after = leaderboard_data(campaign=campaign, per_query=False)
    assert after["policy"] == "max"
    for a, p in zip(after["systems"], preview["systems"], strict=True):
        assert a["measures"] == pytest.approx(p["measures"])
    assert any(
        b["measures"] != pytest.approx(a["measures"]) for b, a in zip(before["systems"], after["systems"], strict=True)
    )
    page = client_for(lead).get(url("agreement", campaign))
    current = [s["policy"] for s in page.context["stability"] if s["current"]]
    assert current == ["max"]


def test_policy_switch_keeps_adjudications(judged):
    campaign, _, lead, pairs = judged
    adjudication_set(pair=pairs["d3"], lead=lead, grade=0)
    changed = campaign_policy_set(campaign=campaign, lead=lead, policy="max")
    assert changed > 0
    assert Pair.objects.get(id=pairs["d3"].id).label == 0
    assert campaign_policy_set(campaign=campaign, lead=lead, policy="max") == 0


def test_policy_switch_refuses_unknown_policies(judged):
    campaign, _, lead, _ = judged
    response = client_for(lead).post(url("agreement_policy", campaign), {"policy": "loudest"}, follow=True)
    assert "Choose one of the aggregation policies" in response.content.decode()
    assert Campaign.objects.get(id=campaign.id).aggregation == "median"


def test_confusion_svg_escapes_names_and_draws_every_cell():
    svg = charts.confusion_svg(
        [[3, 1], [0, 2]], [0, 1], row_name="<b>a&b</b>", col_name='x"y', grade_names={0: "<i>no</i>", 1: "yes"}
    )
    assert "<b>" not in svg and "<i>" not in svg
    assert "&lt;b&gt;a&amp;b&lt;/b&gt;" in svg and "x&quot;y" in svg
    assert svg.count("<rect") == 4
    # colours by class from app.css: the diagonal in blues, disagreement in oranges, an empty cell blank
    cells = re.findall(r'<rect [^>]*class="ch-cell ([a-z0-9-]+)"', svg)
    assert cells == ["ch-b8", "ch-o3", "ch-empty", "ch-b6"]
    assert "#" not in re.sub(r"<title>.*?</title>", "", svg)
    assert "over 6 pairs both graded; they gave the same grade to 5" in svg


# --------------------------------------------------------------------------- quality and gold pairs


def test_gold_set_remove_and_accuracy(judged):
    campaign, users, lead, pairs = judged
    client = client_for(lead)
    # d0 is (2, 2, 2), d3 is (2, 0, 1): alice is right on both, bob on one, carol on one
    for docid in ("d0", "d3"):
        response = client.post(url("quality_gold", campaign, pairs[docid].id), {"grade": "2"})
        assert response.status_code == 302
    assert set(Pair.objects.filter(gold_label=2).values_list("document__docid", flat=True)) == {"d0", "d3"}
    page = client.get(url("quality", campaign))
    accuracy = {r["annotator"]: (r["gold_accuracy"], r["gold_n"]) for r in page.context["rows"]}
    assert accuracy == {"alice": ("100%", 2), "bob": ("50%", 2), "carol": ("50%", 2)}
    assert [p.document.docid for p in page.context["gold"]] == ["d0", "d3"]
    client.post(url("quality_gold", campaign, pairs["d3"].id), {"grade": ""})
    assert Pair.objects.get(id=pairs["d3"].id).gold_label is None
    page = client.get(url("quality", campaign))
    accuracy = {r["annotator"]: r["gold_accuracy"] for r in page.context["rows"]}
    assert accuracy == {"alice": "100%", "bob": "100%", "carol": "100%"}
    # gold labels are not labels: the scorer's label of d0 is untouched
    assert Pair.objects.get(id=pairs["d0"].id).label == 2


def test_gold_search_by_qid_and_docid(judged):
    campaign, _, lead, _ = judged
    client = client_for(lead)
    found = client.get(url("quality", campaign), {"qid": "q1"}).context["results"]
    assert [p.document.docid for p in found] == ["d4", "d5", "d6", "d7"]
    found = client.get(url("quality", campaign), {"qid": "q0", "docid": "d2"}).context["results"]
    assert [p.document.docid for p in found] == ["d2"]
    assert client.get(url("quality", campaign)).context["searched"] is False


def test_gold_off_the_scale_is_refused(judged):
    campaign, _, lead, pairs = judged
    response = client_for(lead).post(url("quality_gold", campaign, pairs["d0"].id), {"grade": "9"}, follow=True)
    assert "not on this campaign" in response.content.decode()
    assert Pair.objects.get(id=pairs["d0"].id).gold_label is None


def test_gold_from_the_review_row_swaps_the_row(judged):
    campaign, _, lead, pairs = judged
    d4 = pairs["d4"]
    response = client_for(lead).post(url("quality_gold", campaign, d4.id), {"grade": "1", "row": "review"}, **HTMX)
    assert response.status_code == 200
    assert response.templates[0].name == "judging/_review_row.html"
    assert "Gold label set to 1" in response.content.decode()
    assert Pair.objects.get(id=d4.id).gold_label == 1


def test_gold_labels_are_not_shown_to_annotators(judged):
    campaign, users, lead, pairs = judged
    gold_label_set(pair=pairs["d1"], lead=lead, grade=0)
    page = client_for(users[2]).get(reverse("judging:judge", args=[campaign.slug]), {"pair": pairs["d1"].public_id})
    assert page.status_code == 200
    assert "gold" not in page.content.decode().lower()


def test_gold_label_set_needs_a_lead(judged):
    from django.core.exceptions import PermissionDenied

    campaign, users, _, pairs = judged
    with pytest.raises(PermissionDenied):
        gold_label_set(pair=pairs["d1"], lead=users[0], grade=1)
    with pytest.raises(PermissionDenied):
        campaign_policy_set(campaign=campaign, lead=users[0], policy="max")
