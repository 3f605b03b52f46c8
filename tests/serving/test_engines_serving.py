"""A live search engine fetched through gunicorn and the real task worker: the API starts the fetch (202), the
worker asks the local engine over HTTP, and the snapshot, its documents and pool pairs are there when it is done;
the credentials reach the engine from the worker's environment and nowhere else."""

from __future__ import annotations

import time

from tests.data import TOPICS
from tests.fake_engine import BM25, INDEX, FakeEngine
from tests.serving.servers import login

DOCS = {
    "w1": {"title": "Merino wool sweater", "text": "A knit sweater of merino wool."},
    "w2": {"title": "Cable knit jumper", "text": "Chunky wool cable knit."},
    "w3": {"title": "Rain jacket", "text": "A waterproof rain jacket."},
    "w4": {"title": "Rain boots", "text": "Rubber boots for rain."},
    "w5": {"title": "Wool socks", "text": "Warm wool socks."},
}
KEY = "ApiKey c2VydmluZy10ZXN0LWtleQ=="


def test_fetch_through_the_api_runs_in_the_worker_and_stores_the_snapshot(site):
    engine = FakeEngine(DOCS)
    try:
        site.seed(slug="eng", leads=("eng-lead",), annotators=("eng-ann",), topics=TOPICS)
        site.sql(
            "INSERT INTO judging_engine (name, kind, base_url, secret_env, timeout, concurrency, rate_limit, "
            "max_answer_bytes, enabled) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
            ("shop", "elasticsearch", engine.url, "RELJUDGE_ENGINE_SERVING", 5.0, 2, 0.0, 1 << 20, True),
        )
        base = site.gunicorn(log=site.logs / "gunicorn.log", workers=1, threads=2)
        lead = login(base, "eng-lead", "pw-eng-lead")
        saved = lead.post(
            f"{base}/api/campaigns/eng/engine-systems/",
            json={
                "name": "bm25",
                "engine": "shop",
                "target": INDEX,
                "template": '{"query": {"match": {"text": "{{query}}"}}}',
                "title_field": "title",
                "text_field": "text",
                "depth": 3,
            },
            timeout=30,
        )
        assert saved.status_code == 201, saved.text
        started = lead.post(f"{base}/api/campaigns/eng/systems/bm25/fetch/", timeout=30)
        assert started.status_code == 202, started.text
        url = started.headers["Location"]
        assert not engine.requests  # the request only queues the job
        site.worker(log=site.logs / "worker.log", env={"RELJUDGE_ENGINE_SERVING": KEY})
        deadline = time.monotonic() + 90
        while (body := lead.get(url, timeout=30).json())["status"] not in ("done", "failed"):
            assert time.monotonic() < deadline, body
            time.sleep(0.2)
        assert body["status"] == "done", body
        r = body["result"]
        assert (r["run"], r["queries"], r["ok"], r["failed"]) == ("bm25@1", 2, 2, 0)
        ranker = BM25(DOCS)
        expected = {d for q in ("wool knit sweater", "rain jacket") for d, _s in ranker.search(q)[:3]}
        assert r["documents_added"] == len(expected)
        assert site.count(
            "judging_document", "docid IN ('w1', 'w2', 'w3', 'w4', 'w5') AND is_stub = %s", (False,)
        ) == len(expected)
        assert {h["Authorization"] for _m, _p, h, _b in engine.requests} == {KEY}
        listed = lead.get(f"{base}/api/campaigns/eng/engine-systems/", timeout=30).json()
        assert listed[0]["snapshots"][0]["run"] == "bm25@1"
        assert KEY not in lead.get(f"{base}/campaigns/eng/engines/", timeout=30).text
    finally:
        engine.close()
