"""Online figures: the CSV parser, the import (command, web, API), and offline-vs-online agreement."""

import io

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient
from scipy import stats

import metrics
from judging.imports.parse import FormatError, OnlineFigure, parse_online
from judging.models import OnlineMetric
from judging.scoring import Params, leaderboard
from judging.selectors.online import offline_vs_online
from judging.services import qrels_import, run_import
from judging.services.online import online_import
from tests.oracle import random_campaign

# --------------------------------------------------------------------------- parser


def test_parse_online_column_layouts_and_header():
    data = b"bm25,ctr,0.31\nbm25,ctr,0.2,q1\ndense,ctr,0.35,0.33,0.37\ndense,ctr,0.4,0.3,0.5,q1\n"
    assert parse_online(data, filename="o.csv") == [
        OnlineFigure("bm25", "ctr", 0.31),
        OnlineFigure("bm25", "ctr", 0.2, qid="q1"),
        OnlineFigure("dense", "ctr", 0.35, 0.33, 0.37),
        OnlineFigure("dense", "ctr", 0.4, 0.3, 0.5, "q1"),
    ]
    with_header = b"metric,system,qid,value\r\nctr,bm25,,0.31\r\nctr,bm25,q2,1e-1\r\n"
    figures = parse_online(with_header, filename="o.csv")
    assert figures == [OnlineFigure("bm25", "ctr", 0.31), OnlineFigure("bm25", "ctr", 0.1, qid="q2")]
    assert [f.line for f in figures] == [2, 3]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "o.csv: empty file"),
        (b"bm25,ctr\n", "o.csv, line 1: expected 3 to 6 columns (system,metric,value[,ci_low,ci_high][,qid]), found 2"),
        (b"bm25,ctr,0.1\nbm25,ctr,nan\n", "o.csv, line 2, field 'value': not a number: 'nan'"),
        (b"bm25,ctr,inf\n", "o.csv, line 1, field 'value': not a number: 'inf'"),
        ("bm25,ctr,\u0661\n".encode(), "o.csv, line 1, field 'value': not a number: '\u0661'"),
        (b"bm25,ctr,1_000\n", "o.csv, line 1, field 'value': not a number: '1_000'"),
        (b"bm25,ctr,1e999\n", "o.csv, line 1, field 'value': not a finite number: '1e999'"),
        (b",ctr,0.1\n", "o.csv, line 1, field 'system': empty"),
        (
            b"bm25,ctr,0.5,0.6,0.7\n",
            "o.csv, line 1, field 'ci_low': the interval [0.6, 0.7] does not contain the value 0.5",
        ),
        (
            b"bm25,ctr,0.5,0.1,,q1\n",
            "o.csv, line 1, field 'ci_high': give both ends of the confidence interval or neither",
        ),
        (
            b"bm25,ctr,0.5\n\nbm25,ctr,0.6\n",
            "o.csv, line 3, field 'metric': 'ctr' of system 'bm25' given twice (first on line 1)",
        ),
        (
            b"system,metric,score\n",
            "o.csv, line 1: unknown column 'score' (expected system,metric,value[,ci_low,ci_high][,qid])",
        ),
        (b"system,metric,value\n", "o.csv: no figures, only a header"),
        (b"\xff\xfe", "o.csv: the file is UTF-16; save it as UTF-8"),
    ],
)
def test_parse_online_errors_name_file_line_field(data, message):
    with pytest.raises(FormatError) as exc:
        parse_online(data, filename="o.csv")
    assert str(exc.value) == message


# --------------------------------------------------------------------------- import


@pytest.fixture
def three_systems(campaign, annotator):
    """bm25 > dense > tfidf by every offline measure on q1 and q2 (tfidf retrieves nothing relevant)."""
    run = (
        "q1 Q0 d1 1 3 bm25\nq1 Q0 d3 2 2 bm25\nq2 Q0 d4 1 1 bm25\n"
        "q1 Q0 d3 1 3 dense\nq1 Q0 d2 2 2 dense\nq2 Q0 d2 1 1 dense\n"
        "q1 Q0 d2 1 3 tfidf\nq2 Q0 d2 1 1 tfidf\n"
    )
    run_import(campaign=campaign, data=run.encode(), filename="runs.trec")
    qrels = "q1 0 d1 2\nq1 0 d3 1\nq1 0 d2 0\nq2 0 d4 2\nq2 0 d2 0\n"
    qrels_import(campaign=campaign, data=qrels.encode(), filename="q.qrels", annotator=annotator)
    return campaign


def test_import_online_command_is_idempotent_and_replaces(three_systems, write):
    path = write("online.csv", "system,metric,value,ci_low,ci_high\nbm25,ctr,0.30,0.28,0.32\ndense,ctr,0.25,,\n")
    out = io.StringIO()
    call_command("import_online", "demo", path, stdout=out)
    assert "online.csv: 2 online figures added, 0 updated, 0 unchanged" in out.getvalue()
    assert "pool" not in out.getvalue()  # online figures never add pairs: no line about the pool
    out = io.StringIO()
    call_command("import_online", "demo", path, stdout=out)
    assert "0 online figures added, 0 updated, 2 unchanged" in out.getvalue()
    call_command("import_online", "demo", write("again.csv", "bm25,ctr,0.31\n"), stdout=io.StringIO())
    row = OnlineMetric.objects.get(system__name="bm25", metric="ctr")
    assert (row.value, row.ci_low, row.ci_high) == (0.31, None, None)
    assert OnlineMetric.objects.count() == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("bm25,ctr,0.3\nsplade,ctr,0.2\n", "o.csv, line 2, field 'system': unknown system 'splade'"),
        ("bm25,ctr,0.3,q9\n", "o.csv, line 1, field 'qid': unknown qid 'q9' in campaign 'demo'"),
        ("bm25,ctr,0.3\ndense,ctr,x\n", "o.csv, line 2, field 'value': not a number: 'x'"),
    ],
)
def test_import_online_bad_file_writes_nothing(three_systems, write, content, message):
    with pytest.raises(CommandError) as exc:
        call_command("import_online", "demo", write("o.csv", content), stdout=io.StringIO())
    assert str(exc.value).startswith(message)
    assert str(exc.value).endswith("nothing was imported")
    assert not OnlineMetric.objects.exists()


def test_database_refuses_an_interval_that_misses_the_value(three_systems):
    from django.db import IntegrityError, transaction

    system = three_systems.systems.get(name="bm25")
    with pytest.raises(IntegrityError), transaction.atomic():
        OnlineMetric.objects.create(campaign=three_systems, system=system, metric="ctr", value=1, ci_low=2, ci_high=3)
    OnlineMetric.objects.create(campaign=three_systems, system=system, metric="ctr", value=1)
    with pytest.raises(IntegrityError), transaction.atomic():
        OnlineMetric.objects.create(campaign=three_systems, system=system, metric="ctr", value=2)


def test_api_upload_online_and_offline_vs_online(three_systems, lead, annotator):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=lead).key)
    csv = (
        b"system,metric,value,qid\n"
        b"bm25,ctr,0.30,\ndense,ctr,0.32,\ntfidf,ctr,0.10,\n"  # dense beats bm25 online: one discordant pair
        b"bm25,conversion,0.05,\ndense,conversion,0.04,\ntfidf,conversion,0.01,\n"
        b"bm25,ctr,0.5,q1\ndense,ctr,0.4,q1\ntfidf,ctr,0.1,q1\n"
    )
    url = "/api/campaigns/demo/upload/online/"
    bad = client.post(url, {"file": io.BytesIO(b"bm25,ctr,zero\n")}, format="multipart")
    assert bad.status_code == 400
    assert bad.json() == {
        "detail": "file, line 1, field 'value': not a number: 'zero'",
        "file": "file",
        "line": 1,
        "field": "value",
    }
    f = io.BytesIO(csv)
    f.name = "online.csv"
    ok = client.post(url, {"file": f}, format="multipart")
    assert ok.status_code == 200, ok.content
    assert ok.json()["added"] == 9
    data = client.get("/api/campaigns/demo/online/?k=2").json()
    assert data["metrics"] == ["conversion", "ctr"] and data["per_query_metrics"] == ["ctr"]
    row = next(r for r in data["agreement"] if r["measure"] == "nDCG@2" and r["metric"] == "ctr")
    assert row["n_systems"] == 3
    assert row["discordant_pairs"] == [["bm25", "dense"]]
    assert row["kendall_tau"] == pytest.approx(1 / 3)
    conv = next(r for r in data["agreement"] if r["measure"] == "nDCG@2" and r["metric"] == "conversion")
    assert conv["kendall_tau"] == pytest.approx(1.0) and conv["discordant_pairs"] == []
    assert data["best"]["conversion"]["kendall_tau"] == pytest.approx(1.0)
    assert data["few_systems"] is True
    assert len(data["figures"]) == 9
    pq = next(r for r in data["per_query"] if r["measure"] == "nDCG@2")
    assert [q["qid"] for q in pq["per_query"]] == ["q1"]
    # annotators do not see it while the leaderboard is hidden from them
    client.credentials(HTTP_AUTHORIZATION="Token " + Token.objects.create(user=annotator).key)
    assert client.get("/api/campaigns/demo/online/").status_code == 403
    assert client.post(url, {"file": io.BytesIO(csv)}, format="multipart").status_code == 403


def test_offline_vs_online_tau_and_r_match_scipy(make_user):
    """Hidden data: 8 systems with random runs and labels, random online figures; tau and r as scipy says."""

    campaign, runs, qrels = random_campaign(
        make_user, seed=11, systems=("alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta")
    )
    rng = np.random.default_rng(3)
    names = sorted(runs)
    ctr = rng.random(len(names))
    lines = [f"{n},ctr,{float(v)!r}" for n, v in zip(names, ctr, strict=True)]
    lines += [f"{n},ctr,{float(round(v, 1))},q1" for n, v in zip(names, rng.random(len(names)), strict=True)]
    online_import(campaign=campaign, data="\n".join(lines).encode(), filename="o.csv")
    params = Params(k=5)
    data = offline_vs_online(campaign=campaign, params=params)
    lb = leaderboard(campaign, params)
    means = lb.means()
    order = [lb.cube.system_names.index(n) for n in names]
    for row in data["agreement"]:
        x = means[lb.measures.index(row["measure"]), order]
        assert row["n_systems"] == 8
        assert row["kendall_tau"] == pytest.approx(stats.kendalltau(x, ctr).statistic, abs=1e-12)
        assert row["pearson_r"] == pytest.approx(stats.pearsonr(x, ctr).statistic, abs=1e-12)
        expected = {
            (names[i], names[j]) for i in range(8) for j in range(i + 1, 8) if (x[i] - x[j]) * (ctr[i] - ctr[j]) < 0
        }
        assert {tuple(sorted(p)) for p in row["discordant_pairs"]} == {tuple(sorted(p)) for p in expected}
    assert data["few_systems"] is False
    # per query, q1: ties in the rounded figures, still as scipy says
    qi = lb.cube.qids.index("q1")
    q1 = OnlineMetric.objects.filter(query__qid="q1")
    by_name = {m.system.name: m.value for m in q1}
    y = np.array([by_name[n] for n in names])
    for block in data["per_query"]:
        x = lb.table.scores[lb.measures.index(block["measure"]), order, qi]
        (detail,) = block["per_query"]
        if np.ptp(x) == 0:
            assert detail["kendall_tau"] is None
        else:
            assert detail["kendall_tau"] == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
            assert detail["pearson_r"] == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_pearson_r_and_discordant_pairs_match_scipy(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 4, 12).astype(float), rng.random(12)
    assert metrics.pearson_r(a, b) == pytest.approx(stats.pearsonr(a, b).statistic, abs=1e-12)
    d = metrics.discordant_pairs(a, b)
    n_c = sum((a[i] - a[j]) * (b[i] - b[j]) > 0 for i in range(12) for j in range(i + 1, 12))
    # tau-a's numerator from scipy's tau-b: (n_c - n_d) / sqrt(...) -> compare the counts directly
    assert len(d) == sum((a[i] - a[j]) * (b[i] - b[j]) < 0 for i in range(12) for j in range(i + 1, 12))
    assert n_c + len(d) <= 66
    assert np.isnan(metrics.pearson_r([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError):
        metrics.pearson_r([1], [2])


def test_online_page_states_best_measure_with_caveat_and_scatter(client, three_systems, lead):
    online_import(
        campaign=three_systems,
        data=b"bm25,ctr,0.30\ndense,ctr,0.32\ntfidf,ctr,0.10\nbm25,ctr,0.5,q1\ndense,ctr,0.4,q1\ntfidf,ctr,0.1,q1\n",
        filename="o.csv",
    )
    client.force_login(lead)
    page = client.get("/campaigns/demo/online/?k=2")
    assert page.status_code == 200
    html = page.content.decode()
    assert "agrees best with ctr" in html or "orders the systems exactly as ctr" in html
    assert "Few systems." in html
    assert html.count("<svg") >= 8  # a scatter per offline measure
    assert "bm25 ⇄ dense" in html
    assert "Per query" in html
    bad = client.get("/campaigns/demo/online/?k=0")
    assert bad.status_code == 400


def test_online_page_empty_says_how_to_import(client, three_systems, lead, annotator):
    client.force_login(lead)
    html = client.get("/campaigns/demo/online/").content.decode()
    assert "No online figures yet." in html and "import_online demo FILE" in html
    client.force_login(annotator)
    assert client.get("/campaigns/demo/online/").status_code == 403


def test_web_upload_of_online_figures(client, three_systems, lead):
    client.force_login(lead)
    f = io.BytesIO(b"bm25,ctr,0.3\nsplade,ctr,0.2\n")
    f.name = "o.csv"
    page = client.post("/campaigns/demo/upload/", {"kind": "online", "online-kind": "online", "online-file": f})
    assert page.status_code == 422
    assert "o.csv, line 2, field &#x27;system&#x27;: unknown system &#x27;splade&#x27;" in page.content.decode()
    f = io.BytesIO(b"bm25,ctr,0.3\ndense,ctr,0.2\n")
    f.name = "o.csv"
    page = client.post("/campaigns/demo/upload/", {"kind": "online", "online-kind": "online", "online-file": f})
    assert page.status_code == 302
    assert OnlineMetric.objects.count() == 2


@pytest.mark.parametrize(
    ("offline", "online", "offline_ties", "online_ties"),
    [
        ([0.1, 0.2510, 0.2510], [1.0, 2.0, 3.0], [["b", "c"]], []),  # the measure ties b and c, the metric does not
        ([0.1, 0.2, 0.3], [1.0, 2.0, 2.0], [], [["b", "c"]]),
        ([0.1, 0.2, 0.3], [1.0, 2.0, 3.0], [], []),
    ],
)
def test_tau_b_and_the_words_agree_on_ties(offline, online, offline_ties, online_ties):
    """τ is scipy's τ-b; with no pair ordered differently it is 1 exactly when no pair is tied in one order only,
    and the pairs tied in one order only are named, so "ordered differently: none" never stands beside an
    unexplained τ below 1."""
    from scipy import stats

    from judging.selectors.online import metric_agreement

    got = metric_agreement(np.array(offline), np.array(online), ["a", "b", "c"])
    assert got["kendall_tau"] == pytest.approx(stats.kendalltau(offline, online, variant="b").statistic)
    assert got["discordant_pairs"] == []
    assert got["offline_ties"] == offline_ties and got["online_ties"] == online_ties
    assert (got["kendall_tau"] == pytest.approx(1.0)) == (not offline_ties and not online_ties)
