"""How far to trust the leaderboard, as leads and annotators see it: pages, query tags and document attributes
on import, and the "pairs that matter most" judging queue."""

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from judging.imports import parse
from judging.models import Assignment, Campaign, Document, Pair, QueryTag
from judging.scoring import trust
from judging.selectors import pair_next
from judging.services import (
    campaign_create,
    campaign_settings_update,
    judgment_record,
    membership_add,
    pair_assign,
    queries_import,
    run_import,
)


@pytest.fixture(autouse=True)
def _fresh_trust_caches():
    trust.caches_clear()
    yield


def url(name, *args, **query):
    from urllib.parse import urlencode

    base = reverse(f"judging:{name}", args=["tiny", *args])
    return f"{base}?{urlencode(query)}" if query else base


@pytest.fixture
def tagged(tiny):
    queries_import(
        campaign=tiny,
        data=b"qid\ttext\tdescription\ttags\nq1\tmerino wool sweater\t\thead\nq2\train jacket\t\thead,outerwear\n"
        b"q3\tcable knit\t\ttail\n",
        filename="t.tsv",
    )
    return tiny


# --------------------------------------------------------------------------- pages


def test_leaderboard_shows_bounds_settled_and_pairs_left(as_lead, tagged):
    html = as_lead.get(url("leaderboard", measure="P", k=3)).content.decode()
    assert "Bounds" in html and "vs next" in html
    # d9 (alpha, q3) and d10 (beta, q3) are the unjudged pairs in the top 3 of the labelled queries; q4 has no
    # label yet, and its pooled pairs count too: it joins the means once judged
    assert re.search(r"<strong>\d+</strong> unjudged pairs left can still change the ranking by P@3", html)
    # q4: no label, and no system retrieved anything for it: it will never be scored, and is not counted
    assert "over the 3 queries that will be scored once the pool is judged" in html
    assert "without any label yet" not in html
    # tiny has 3 systems: the top 3 is all of them, and the message says so
    assert re.search(r"There are 3 systems, no more than the top 3 you chose\. (You may stop|Keep) judging", html)
    assert "settled with 95% confidence" not in html
    assert re.search(r'<span class="lb-badge (settled|open|likely|even)"', html)
    assert "bpref" in html  # a leaderboard column
    assert "&lt;em&gt;gamma&lt;/em&gt;" in html and "<em>gamma</em>" not in html


def test_segment_filters_the_leaderboard_page(as_lead, tagged):
    html = as_lead.get(url("leaderboard", segment="tail")).content.decode()
    assert "<strong>1</strong> of 4 queries have labels and are scored" in html
    assert '<option value="tail" selected>tail (1)</option>' in html
    bad = as_lead.get(url("leaderboard", segment="nowhere"))
    assert bad.status_code == 400
    assert "no query of this campaign has the tag &#x27;nowhere&#x27;" in bad.content.decode()


def test_trust_page_sections(as_lead, tagged):
    html = as_lead.get(url("leaderboard_trust", measure="P", k=3)).content.decode()
    for text in (
        "Can we stop judging?",
        "unjudged pairs left can still change the ranking by P@3",
        "its own and those only other systems found",
        "The verdicts are on the final means, over the 3 queries that will be scored once the pool is judged.",
        "Pool bias",
        "would be under-scored",
        "Macro and micro averages",
        "Diversity beside relevance",
    ):
        assert text in html, text
    assert "&lt;em&gt;gamma&lt;/em&gt;" in html and "<em>gamma</em>" not in html


def test_trust_page_says_which_queries_hold_the_open_pairs(as_lead, tagged):
    # By P@3, alpha and beta are open: d9 (alpha's) and d10 (beta's) are unjudged, both in q3.
    html = as_lead.get(url("leaderboard_trust", measure="P", k=3)).content.decode()
    assert re.search(r"against (alpha|beta): 2 unjudged pairs in either cutoff, in 1 query: q3 \(2\)", html)


def test_trust_page_diversity_over_an_attribute(as_lead, tagged):
    docs = "".join(
        f'{{"docid": "d{i}", "title": "T{i}", "text": "t", "attributes": {{"brand": "b{i % 2}"}}}}\n'
        for i in range(1, 11)
    )
    from judging.services import documents_import

    documents_import(campaign=tagged, data=docs.encode(), filename="d.jsonl")
    html = as_lead.get(url("leaderboard_trust", k=3, attribute="brand")).content.decode()
    assert '<option value="brand" selected>brand</option>' in html
    assert "ILD@3" in html and "Coverage@3" in html
    bad = as_lead.get(url("leaderboard_trust", attribute="colour"))
    assert bad.status_code == 400


def test_trust_page_diversity_per_query(as_lead, tagged, monkeypatch):
    """Each scored query's ILD@k and coverage@k for every system, a page of queries at a time."""
    from judging.services import documents_import
    from judging.views import leaderboard as leaderboard_views

    brands = {1: "x", 2: "x", 3: "y", 4: "x", 5: "y", 6: "z", 7: "x", 8: "x", 9: "x", 10: "y"}
    docs = "".join(
        f'{{"docid": "d{i}", "title": "T{i}", "text": "t", "attributes": {{"brand": "{b}"}}}}\n'
        for i, b in brands.items()
    )
    documents_import(campaign=tagged, data=docs.encode(), filename="d.jsonl")

    def table(**query):
        html = as_lead.get(url("leaderboard_trust", k=3, attribute="brand", **query)).content.decode()
        assert "Per query: ILD@3 · Coverage@3" in html
        part = html.split('class="data lb-table lb-diversity-queries"', 1)[1].split("</table>", 1)[0]
        systems = re.findall(r'<th class="num" scope="col">(.*?)</th>', part)
        rows = re.findall(r'<tr><th scope="row" class="lb-system">(\w+)</th>(.*?)</tr>', part)
        cells = {qid: re.findall(r'<td class="num">(.*?)</td>', tds) for qid, tds in rows}
        return html, {qid: dict(zip(systems, values, strict=True)) for qid, values in cells.items()}

    _, got = table()
    # top 3 of each run (see test_leaderboard_views' RUNS): alpha q3 = d7 d8 d9, all "x"; beta q3 = d8 d7 d10
    gamma = "&lt;em&gt;gamma&lt;/em&gt;"
    assert got == {
        "q1": {"alpha": "0.667 · 2", "beta": "0.667 · 2", gamma: "0.667 · 2"},
        "q2": {"alpha": "1.000 · 3", "beta": "1.000 · 3", gamma: "0.000 · 0"},
        "q3": {"alpha": "0.000 · 1", "beta": "0.667 · 2", gamma: "0.000 · 0"},
    }  # q4 has no label yet: not in the means, not listed
    monkeypatch.setattr(leaderboard_views, "PAGE_SIZE", 2)
    html, first = table()
    assert list(first) == ["q1", "q2"] and "page 1 of 2" in html and "attribute=brand" in html
    _, second = table(page=2)
    assert list(second) == ["q3"]


def test_curves_page_chart_and_table(as_lead, tagged):
    response = as_lead.get(url("leaderboard_curves", measure="P", k_max=3))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<svg" in html and 'class="lb-series lb-series-0"' in html
    assert '<th class="num" scope="col">@3</th>' in html
    assert as_lead.get(url("leaderboard_curves", k_max=0)).status_code == 400


def test_segments_page_warns_about_small_segments(as_lead, tagged):
    html = as_lead.get(url("leaderboard_segments", measure="P", k=1)).content.decode()
    assert "fewer than 10 scored queries" in html
    for tag in ("head", "outerwear", "tail"):
        assert f">{tag}</a>" in html


def test_segments_page_without_tags_says_how_to_add_them(as_lead, tiny):
    html = as_lead.get(url("leaderboard_segments")).content.decode()
    assert "No query has a tag yet" in html and "import_query_tags" in html


def test_lead_edits_query_tags_on_a_page(as_lead, tagged):
    response = as_lead.post(url("leaderboard_tags"), {"qid": "q3", "tags": "tail, knit , tail"})
    assert response.status_code == 200
    assert set(QueryTag.objects.filter(query__qid="q3").values_list("tag", flat=True)) == {"tail", "knit"}
    bad = as_lead.post(url("leaderboard_tags"), {"qid": "q3", "tags": "x" * 101})
    assert bad.status_code == 400
    assert "tag longer than 100 characters" in bad.content.decode()
    assert set(QueryTag.objects.filter(query__qid="q3").values_list("tag", flat=True)) == {"tail", "knit"}
    unknown = as_lead.post(url("leaderboard_tags"), {"qid": "q99", "tags": "x"})
    assert unknown.status_code == 400 and "unknown qid" in unknown.content.decode()


def test_annotators_never_edit_tags(as_annotator, tagged):
    assert as_annotator.post(url("leaderboard_tags"), {"qid": "q3", "tags": "x"}).status_code == 403
    assert not QueryTag.objects.filter(tag="x").exists()


def test_annotators_see_trust_pages_only_when_the_leaderboard_is_shown(as_annotator, tagged):
    assert as_annotator.get(url("leaderboard_trust")).status_code == 403
    Campaign.objects.filter(pk=tagged.pk).update(leaderboard_visible_to_annotators=True)
    assert as_annotator.get(url("leaderboard_curves")).status_code == 200


# --------------------------------------------------------------------------- formats and imports


def test_topics_tags_from_tsv_and_jsonl():
    tsv = parse.parse_topics(b"q1\tshoes\t\thead, sale\nq2\tsocks\n", filename="t.tsv")
    assert [t.tags for t in tsv] == [("head", "sale"), None]
    jsonl = parse.parse_topics(b'{"qid": "q1", "text": "shoes", "tags": ["tail"]}\n', filename="t.jsonl")
    assert jsonl[0].tags == ("tail",)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b'{"qid": "q1", "text": "a", "tags": "tail"}\n',
            "t.jsonl, line 1, field 'tags': expected an array of strings",
        ),
        (b'{"qid": "q1", "text": "a", "tags": [3]}\n', "t.jsonl, line 1, field 'tags[0]': expected a string"),
        (b'{"qid": "q1", "text": "a", "tags": ["a,b"]}\n', "field 'tags[0]': a tag may not contain a comma"),
        (b"q1\ta\t\thead,,tail\n", "line 1, field 'tags': empty tag"),
        (b"q1\ta\tb\tc\td\n", "expected 2 to 4 tab-separated columns"),
    ],
)
def test_topics_tags_errors_name_line_and_field(data, message):
    name = "t.jsonl" if data.startswith(b"{") else "t.tsv"
    with pytest.raises(parse.FormatError) as err:
        parse.parse_topics(data, filename=name)
    assert message in str(err.value)


def test_docs_attributes_must_be_flat():
    docs = parse.parse_docs(
        b'{"docid": "d1", "text": "t", "attributes": {"brand": "acme", "n": 3}}\n', filename="d.jsonl"
    )
    assert docs[0].attributes == {"brand": "acme", "n": 3}
    with pytest.raises(parse.FormatError) as err:
        parse.parse_docs(b'{"docid": "d1", "text": "t", "attributes": {"brand": ["a"]}}\n', filename="d.jsonl")
    assert "field 'attributes.brand': expected a string, number or boolean, found an array" in str(err.value)


def test_reimporting_docs_without_attributes_keeps_them(tiny):
    from judging.services import documents_import

    documents_import(
        campaign=tiny, data=b'{"docid": "d1", "text": "t", "attributes": {"brand": "a"}}\n', filename="d.jsonl"
    )
    summary = documents_import(campaign=tiny, data=b'{"docid": "d1", "text": "t"}\n', filename="d.jsonl")
    assert Document.objects.get(campaign=tiny, docid="d1").attributes == {"brand": "a"}
    assert summary.unchanged == 1


def test_import_query_tags_command(tagged, write):
    out = io.StringIO()
    call_command("import_query_tags", "tiny", write("tags.tsv", "q1\thead,new\nq3\t\n"), stdout=out)
    assert "2 updated" in out.getvalue()
    assert set(QueryTag.objects.filter(query__qid="q1").values_list("tag", flat=True)) == {"head", "new"}
    assert not QueryTag.objects.filter(query__qid="q3").exists()
    before = set(QueryTag.objects.values_list("query__qid", "tag"))
    with pytest.raises(CommandError) as err:
        call_command("import_query_tags", "tiny", write("bad.tsv", "q1\tx\n\nq42\ty\n"), stdout=out)
    assert "bad.tsv, line 3, field 'qid': unknown qid 'q42'" in str(err.value)
    assert set(QueryTag.objects.values_list("query__qid", "tag")) == before  # nothing written


# --------------------------------------------------------------------------- the judging queue


def _queue_campaign(make_user, mode):
    """Two systems over four queries, six documents each, disjoint: every comparison is open at first."""
    c = campaign_create(slug=f"queue-{mode}", pool_depth=6)
    run = "".join(
        f"q{q} Q0 {name}{q}_{d} {d + 1} {10 - d} {name}\n" for name in ("a", "b") for q in range(4) for d in range(6)
    )
    run_import(campaign=c, data=run.encode(), filename="r")
    campaign_settings_update(campaign=c, queue_mode=mode)
    users = [make_user(f"{mode}{i}") for i in range(2)]
    for u in users:
        membership_add(campaign=c, user=u, role="annotator")
    return c, users


def _rank(pair: Pair) -> int:
    return int(pair.document.docid.rsplit("_", 1)[1]) + 1


def test_pairs_that_matter_most_come_first(make_user):
    campaign, (ann, _) = _queue_campaign(make_user, Campaign.QueueMode.MATTER)
    served = []
    for _ in range(8):
        pair = pair_next(campaign=campaign, annotator=ann).pair
        served.append(_rank(pair))
        judgment_record(pair=pair, annotator=ann, grade=0)
    # the eight rank-1 documents (two systems x four queries) first, whatever the query
    assert served == [1] * 8
    assert _rank(pair_next(campaign=campaign, annotator=ann).pair) == 2


def test_shuffled_queue_stays_on_a_query(make_user):
    campaign, (ann, _) = _queue_campaign(make_user, Campaign.QueueMode.SHUFFLED)
    served = []
    for _ in range(8):
        pair = pair_next(campaign=campaign, annotator=ann).pair
        served.append(_rank(pair))
        judgment_record(pair=pair, annotator=ann, grade=0)
    assert served != [1] * 8


def test_pairs_that_matter_respect_holds(make_user):
    campaign, (a, b) = _queue_campaign(make_user, Campaign.QueueMode.MATTER)
    first = pair_assign(campaign=campaign, annotator=a).pair
    second = pair_assign(campaign=campaign, annotator=b).pair
    assert first != second and _rank(first) == _rank(second) == 1
    assert Assignment.objects.filter(pair=first, annotator=a).exists()


def test_pair_taken_between_the_queue_reads_is_passed_over(make_user):
    """Another annotator holds the chosen pair while the queue is choosing it: the annotator is handed the next
    open pair of the priority list, never a 500 (Pair.DoesNotExist, when two reads straddled the other's hold)."""
    from django.db import connection

    campaign, (a, b) = _queue_campaign(make_user, Campaign.QueueMode.MATTER)
    expected = pair_next(campaign=campaign, annotator=b).pair  # the priority list, computed and cached
    armed = [True]

    def hold_after_first_read(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if armed[0] and sql.lstrip().upper().startswith("SELECT") and "judging_assignment" in sql:
            armed[0] = False  # the queue has read its open candidates: someone else takes the first one now
            assert pair_assign(campaign=campaign, annotator=a).pair.id == expected.id
        return result

    with connection.execute_wrapper(hold_after_first_read):
        got = pair_assign(campaign=campaign, annotator=b).pair
    assert not armed[0]
    assert got is not None and got.id != expected.id and _rank(got) == 1  # the next one of the priority list
    assert Assignment.objects.get(annotator=b).pair_id == got.id
    assert Assignment.objects.get(annotator=a).pair_id == expected.id


def test_settled_campaign_falls_back_to_the_shuffled_queue(make_user):
    campaign, (ann, _) = _queue_campaign(make_user, Campaign.QueueMode.MATTER)
    for pair in Pair.objects.filter(campaign=campaign, document__docid__endswith="_0"):
        judgment_record(pair=pair, annotator=ann, grade=2 if pair.document.docid.startswith("a") else 0)
    trust.caches_clear()
    # a is ahead on every query with grade 2 at rank 1, but b's unjudged ranks 2..10 keep nDCG@10 open:
    # the next pair still comes from the priority list, and nothing breaks once the list runs dry
    pair = pair_next(campaign=campaign, annotator=make_user("late")).pair
    assert pair is not None and pair.label is None


def test_demo_topics_carry_tags_and_products_attributes():
    from judging.demo.catalogue import demo_data

    data = demo_data()
    topics = parse.parse_topics(data.topics_tsv(), filename="topics.tsv")
    tiers = [t.tags[0] for t in topics]
    assert {tier: tiers.count(tier) for tier in set(tiers)} == {"head": 9, "torso": 9, "tail": 10}
    assert {t.tags[1] for t in topics} == {"clothing", "footwear", "gear"}
    docs = parse.parse_docs(data.docs_jsonl(), filename="docs.jsonl")
    assert all({"brand", "category"} <= set(d.attributes) for d in docs)
    assert len({d.attributes["brand"] for d in docs}) >= 10


def test_lead_chooses_the_queue_mode_through_the_api(tiny, lead, annotator):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(annotator)
    assert client.patch("/api/campaigns/tiny/", {"queue_mode": "matter"}, format="json").status_code == 403
    client.force_authenticate(lead)
    response = client.patch("/api/campaigns/tiny/", {"queue_mode": "matter"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["queue_mode"] == "matter"
    assert Campaign.objects.get(slug="tiny").queue_mode == Campaign.QueueMode.MATTER
    bad = client.patch("/api/campaigns/tiny/", {"queue_mode": "fastest"}, format="json")
    assert bad.status_code == 400 and "queue_mode" in bad.json()
