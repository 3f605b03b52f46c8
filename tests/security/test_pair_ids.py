"""Issue 11 #6: nothing an annotator sees of a pair (its id in the judge URL, the form, the API) tells which
system found it. Row ids follow run-import order: the run imported last owns the highest ones."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from judging.models import Pair
from judging.services import run_import

pytestmark = pytest.mark.django_db
PAIR_ID = re.compile(r'data-pair-id="(\d+)"')


@pytest.fixture
def late_system(campaign):
    """bm25 and a random baseline, imported in that order; the baseline finds 40 documents nobody else does."""
    campaign.pool_depth = 20
    campaign.save()
    shared = "".join(f"q{q} Q0 s{q}-{i:02d} {i + 1} {50 - i} bm25\n" for q in (1, 2) for i in range(20))
    run_import(campaign=campaign, data=shared.encode(), filename="bm25.run")
    random = "".join(f"q{q} Q0 r{q}-{i:02d} {i + 1} {50 - i} random\n" for q in (1, 2) for i in range(20))
    run_import(campaign=campaign, data=random.encode(), filename="random.run")
    return campaign


def only_random(pair_docid: str) -> bool:
    return pair_docid.startswith("r")


def auc(ids: dict[int, bool]) -> float:
    """P(id of a baseline-only pair > id of another pair): 1.0 when row ids leak, about 0.5 when they do not."""
    pos = [i for i, flag in ids.items() if flag]
    neg = [i for i, flag in ids.items() if not flag]
    return sum(p > n for p in pos for n in neg) / (len(pos) * len(neg))


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def test_pair_ids_in_the_api_do_not_single_out_the_last_system(late_system, annotator):
    rows = api(annotator).get("/api/pairs/", {"campaign": "demo", "page_size": 1000}).json()["results"]
    assert len(rows) == 80
    seen = {row["id"]: only_random(row["docid"]) for row in rows}
    assert len(seen) == 80 and sum(seen.values()) == 40
    assert 0.2 < auc(seen) < 0.8
    top = sorted(seen, reverse=True)[:40]
    assert not all(seen[i] for i in top)  # the 40 highest ids are not the baseline's 40
    # Nor do creation times, nor the listing order (in row-id order today).
    assert all("created_at" not in row for row in rows)
    order = [only_random(row["docid"]) for row in rows]
    assert order != sorted(order)


def test_judge_page_names_pairs_by_public_id_only(late_system, annotator):
    client = Client()
    client.force_login(annotator)
    seen = {}
    html = client.get(reverse("judging:judge", args=["demo"])).content.decode()
    for _ in range(80):
        match = PAIR_ID.search(html)
        if match is None:
            break
        shown = int(match.group(1))
        pair = Pair.objects.select_related("document").get(public_id=shown)
        assert pair.id != shown
        # The form posts to the public id; the row id appears nowhere in the panel's URLs.
        record = reverse("judging:judge_record", args=["demo", shown])
        assert f'action="{record}"' in html
        assert f"/judge/{pair.id}/" not in html
        seen[shown] = only_random(pair.document.docid)
        html = client.post(record, {"grade": 1}, HTTP_HX_REQUEST="true").content.decode()
    assert len(seen) == 80
    assert 0.2 < auc(seen) < 0.8
    # The row id no longer opens a pair.
    assert client.get(reverse("judging:judge", args=["demo"]), {"pair": Pair.objects.first().id}).status_code == 404


def test_judgments_api_pair_field_is_the_public_id(late_system, annotator):
    pair = Pair.objects.get(query__qid="q2", document__docid="r2-19")
    client = api(annotator)
    assert client.post("/api/judgments/", {"pair": pair.id, "grade": 1}, format="json").status_code == 404
    response = client.post("/api/judgments/", {"pair": pair.public_id, "grade": 1}, format="json")
    assert response.status_code == 201 and response.json()["pair"] == pair.public_id
    rows = client.get("/api/judgments/", {"campaign": "demo"}).json()["results"]
    assert [r["pair"] for r in rows] == [pair.public_id]
    csv = client.get("/api/judgments/", {"campaign": "demo", "format": "csv"})
    assert str(pair.public_id) in b"".join(csv.streaming_content).decode()
    assert api(annotator).get(f"/api/pairs/{pair.public_id}/").json()["docid"] == "r2-19"
    assert api(annotator).get(f"/api/pairs/{pair.id}/").status_code == 404


def test_pool_rows_are_inserted_in_a_shuffled_order(late_system):
    # Within one import too: the baseline's pairs are not stored in (query, document) order.
    rows = list(
        Pair.objects.filter(document__docid__startswith="r").order_by("id").values_list("query__qid", "document__docid")
    )
    assert len(rows) == 40 and rows != sorted(rows)


@pytest.mark.parametrize("value", ["99999999999999999999999", "-1", "1e5", str(2**63)])
def test_out_of_range_pair_ids_are_404_or_400_never_500(late_system, annotator, value):
    client = Client()
    client.force_login(annotator)
    assert client.get(reverse("judging:judge", args=["demo"]), {"pair": value}).status_code == 404
    assert api(annotator).get(f"/api/pairs/{value}/").status_code == 404
    response = api(annotator).post("/api/judgments/", {"pair": value, "grade": 1}, format="json")
    assert response.status_code == 400 and "pair" in response.json()


def test_the_database_keeps_public_ids_unique(late_system):
    from django.db import IntegrityError, transaction

    from judging.models import PUBLIC_ID_MAX, PUBLIC_ID_MIN

    ids = list(Pair.objects.values_list("public_id", flat=True))
    assert len(set(ids)) == len(ids) == 80 and all(PUBLIC_ID_MIN <= i < PUBLIC_ID_MAX for i in ids)
    a, b = Pair.objects.all()[:2]
    with pytest.raises(IntegrityError), transaction.atomic():
        Pair.objects.filter(pk=b.pk).update(public_id=a.public_id)
