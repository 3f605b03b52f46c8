"""Large uploads through gunicorn become jobs that the real task worker (manage.py db_worker) runs."""

from __future__ import annotations

import os
import signal
import time

from tests.data import DOCS, TOPICS
from tests.serving.servers import login, run_text

# Every upload above 1 kB goes to a job here, so test files stay small.
JOB_ENV = {"RELJUDGE_JOB_THRESHOLD_BYTES": "1000", "RELJUDGE_JOB_STALE_SECONDS": "4"}


def _serve(site, slug: str):
    site.seed(slug=slug, leads=(f"{slug}-lead", f"{slug}-lead2"), annotators=(f"{slug}-ann",), topics=TOPICS, docs=DOCS)
    base = site.gunicorn(log=site.logs / "gunicorn.log", workers=1, threads=4, env=JOB_ENV)
    return base, login(base, f"{slug}-lead", f"pw-{slug}-lead")


def _upload(lead, base, slug, name, text, **fields):
    return lead.post(
        f"{base}/api/campaigns/{slug}/upload/run/", files={"file": (name, text.encode())}, data=fields, timeout=60
    )


def _poll(session, url, *, until=("done", "failed"), timeout=90, interval=0.1) -> list[dict]:
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = session.get(url, timeout=30).json()
        seen.append(body)
        if body["status"] in until:
            return seen
        time.sleep(interval)
    raise AssertionError(f"job still {seen[-1]['status']} after {timeout} s")


def _campaign_rows(site, slug) -> dict:
    cid = site.sql("SELECT id FROM judging_campaign WHERE slug = %s", (slug,))[0][0]
    return {t: site.count(f"judging_{t}", "campaign_id = %s", (cid,)) for t in ("system", "pair")} | {
        "ranking": site.count(
            "judging_ranking r JOIN judging_system s ON r.system_id = s.id", "s.campaign_id = %s", (cid,)
        )
    }


def test_large_upload_runs_as_a_job_with_progress_to_done(site):
    base, lead = _serve(site, "jobok")
    text = run_text(tag="big", queries=20, depth=100)
    started = _upload(lead, base, "jobok", "big.run", text)
    assert started.status_code == 202, started.text
    url = started.headers["Location"]
    assert started.json() == {"job": url, "status": "queued"}

    # No worker yet: the job waits, and its page keeps polling.
    job_page = url.replace("/api/jobs/", "/campaigns/jobok/jobs/")
    page = lead.get(job_page, timeout=30)
    assert page.status_code == 200 and 'hx-trigger="every 1s"' in page.text and "Queued" in page.text
    assert "<script>" not in page.text  # no inline script: htmx attributes do the polling
    assert lead.get(url, timeout=30).json()["progress"] == {"done": 0, "total": 2000, "per_second": None}

    site.worker(log=site.logs / "worker.log")
    seen = _poll(lead, url)
    final = seen[-1]
    assert final["status"] == "done", final
    statuses = [b["status"] for b in seen]
    assert statuses == sorted(statuses, key=["queued", "running", "done"].index)  # never goes back
    dones = [b["progress"]["done"] for b in seen]
    assert dones == sorted(dones) and final["progress"] == {"done": 2000, "total": 2000, "per_second": None}
    assert final["result"]["systems"] == ["big"] and final["result"]["added"] == 20
    assert final["result"]["pairs_added"] == 20 * 10  # pool depth 10
    assert final["error"] == {}
    assert _campaign_rows(site, "jobok") == {"system": 1, "pair": 200, "ranking": 20}

    done_page = lead.get(job_page, timeout=30).text
    assert "Done" in done_page and "200 pairs added to the pool" in done_page
    assert 'hx-trigger="every 1s"' not in done_page  # finished: polling stops
    partial = lead.get(job_page, headers={"HX-Request": "true"}, timeout=30).text
    assert "<html" not in partial and 'id="job-status"' in partial


def test_job_is_visible_to_its_campaigns_leads_only(site):
    base, lead = _serve(site, "jobvis")
    url = _upload(lead, base, "jobvis", "big.run", run_text(tag="v", queries=5, depth=50)).headers["Location"]
    other_lead = login(base, "jobvis-lead2", "pw-jobvis-lead2")
    assert other_lead.get(url, timeout=30).status_code == 200
    annotator = login(base, "jobvis-ann", "pw-jobvis-ann")
    assert annotator.get(url, timeout=30).status_code == 404
    assert annotator.get(url.replace("/api/jobs/", "/campaigns/jobvis/jobs/"), timeout=30).status_code == 404
    import requests

    assert requests.get(url, timeout=30).status_code in (401, 403)


def test_failing_job_reports_file_line_field_and_writes_nothing(site):
    base, lead = _serve(site, "jobbad")
    site.worker(log=site.logs / "worker.log")
    text = run_text(tag="bad", queries=20, depth=100, bad_line=1500)
    url = _upload(lead, base, "jobbad", "bad.run", text).headers["Location"]
    final = _poll(lead, url)[-1]
    assert final["status"] == "failed"
    assert {k: final["error"][k] for k in ("file", "line", "field")} == {
        "file": "bad.run",
        "line": 1500,
        "field": "score",
    }
    assert "abc" in final["error"]["detail"]
    assert _campaign_rows(site, "jobbad") == {"system": 0, "pair": 0, "ranking": 0}
    page = lead.get(url.replace("/api/jobs/", "/campaigns/jobbad/jobs/"), timeout=30).text
    assert "bad.run, line 1500, field 'score'" in page and "nothing was imported" in page
    # The failed job's upload is not kept: bad input needs a corrected file, not a retry.
    assert lead.post(url + "retry/", timeout=30).status_code == 409


def test_web_upload_above_the_threshold_redirects_to_the_job_page(site):
    base, lead = _serve(site, "jobweb")
    site.worker(log=site.logs / "worker.log")
    form = lead.get(f"{base}/campaigns/jobweb/upload/", timeout=30)
    assert form.status_code == 200
    r = lead.post(
        f"{base}/campaigns/jobweb/upload/",
        data={
            "kind": "run",
            "run-kind": "run",
            "run-system": "web-sys",
            "csrfmiddlewaretoken": lead.cookies["csrftoken"],
        },
        files={"run-file": ("web.run", run_text(tag="w", queries=10, depth=20).encode())},
        allow_redirects=False,
        timeout=60,
    )
    assert r.status_code == 302 and "/campaigns/jobweb/jobs/" in r.headers["Location"]
    job_id = r.headers["Location"].rstrip("/").rsplit("/", 1)[1]
    final = _poll(lead, f"{base}/api/jobs/{job_id}/")[-1]
    assert final["status"] == "done" and final["result"]["systems"] == ["web-sys"]


def test_killed_worker_leaves_no_partial_import_and_the_job_fails_then_retries(site):
    base, lead = _serve(site, "jobkill")
    worker = site.worker(log=site.logs / "worker.log")
    # Large enough that the import runs for seconds after the worker claims it (600k lines, about 20 MB).
    text = run_text(tag="huge", queries=600, depth=1000)
    url = _upload(lead, base, "jobkill", "huge.run", text).headers["Location"]
    _poll(lead, url, until=("running", "done", "failed"), interval=0.02)
    # Frozen at once, mid-import, however fast this machine imports; then killed (SIGKILL: no cleanup runs).
    os.killpg(worker.pid, signal.SIGSTOP)
    frozen = lead.get(url, timeout=30).json()
    assert frozen["status"] == "running", frozen  # not yet known to be dead
    assert frozen["progress"]["done"] < frozen["progress"]["total"], frozen
    site.stop(worker, kill=True)

    final = _poll(lead, url, timeout=30)[-1]  # no heartbeat for 4 s -> reaped on read
    assert final["status"] == "failed" and "worker" in final["error"]["detail"]
    assert final["error"]["file"] == "huge.run"
    assert _campaign_rows(site, "jobkill") == {"system": 0, "pair": 0, "ranking": 0}

    # Its upload was kept: a retry on a new worker imports it whole.
    retried = lead.post(url + "retry/", timeout=30)
    assert retried.status_code == 202 and retried.json()["status"] == "queued"
    site.worker(log=site.logs / "worker2.log")
    final = _poll(lead, url, timeout=180)[-1]
    assert final["status"] == "done", final
    assert _campaign_rows(site, "jobkill") == {"system": 1, "pair": 600 * 10, "ranking": 600}


def test_slow_significance_test_runs_in_the_worker_and_the_app_then_serves_its_matrix(site):
    """The worker computes the test; the app server (another process) finds the matrix in the shared cache."""
    from tests.data import RUN_BM25, RUN_DENSE

    site.seed(slug="sig", leads=("sig-lead",), topics=TOPICS, docs=DOCS, runs=(RUN_BM25, RUN_DENSE))
    base = site.gunicorn(
        log=site.logs / "gunicorn.log", workers=1, threads=4, env={**JOB_ENV, "RELJUDGE_STATS_JOB_CELLS": "0"}
    )
    lead = login(base, "sig-lead", "pw-sig-lead")
    qrels = "q1 0 d1 2\nq1 0 d3 1\nq1 0 d2 0\nq2 0 d4 2\nq2 0 d2 0\n"
    up = lead.post(f"{base}/api/campaigns/sig/upload/qrels/", files={"file": ("h.qrels", qrels.encode())}, timeout=60)
    assert up.status_code == 200, up.text
    url = f"{base}/api/campaigns/sig/leaderboard/significance/?test=tukey"
    started = lead.get(url, timeout=60)
    assert started.status_code == 202, started.text
    job_url = started.headers["Location"]

    site.worker(log=site.logs / "worker.log")
    final = _poll(lead, job_url)[-1]
    assert final["status"] == "done", final
    assert final["kind"] == "significance" and final["progress"] == {"done": 5000, "total": 5000, "per_second": None}
    matrix = lead.get(url, timeout=60)
    assert matrix.status_code == 200 and matrix.json()["p"] == final["result"]["p"]
    page = lead.get(f"{base}/campaigns/sig/leaderboard/significance/?test=tukey", timeout=60).text
    assert '<table class="lb-matrix">' in page


def test_an_import_queued_behind_a_long_model_run_starts_at_once(site):
    """A model judge's run goes to the "models" queue and its own worker (scripts/serve.sh starts both): the
    default queue's worker takes the import queued after it while the run is still calling the endpoint."""
    from tests.data import RUN_BM25, RUN_DENSE
    from tests.fake_model import FakeModel

    model = FakeModel(default=(200, '{"grade": 1, "reason": "slow"}', 12.0))  # every call takes 12 s
    try:
        slug = "jobq"
        site.seed(slug=slug, leads=(f"{slug}-lead",), topics=TOPICS, docs=DOCS, runs=(RUN_BM25, RUN_DENSE))
        env = {**JOB_ENV, "RELJUDGE_JOB_STALE_SECONDS": "30", "RELJUDGE_MODEL_ENDPOINT": model.url}
        base = site.gunicorn(log=site.logs / "gunicorn.log", workers=1, threads=4, env=env)
        lead = login(base, f"{slug}-lead", f"pw-{slug}-lead")
        started = lead.post(f"{base}/api/campaigns/{slug}/judges/run/", json={"model": "tiny"}, timeout=60)
        assert started.status_code == 202, started.text
        run_url = started.headers["Location"]
        site.worker(log=site.logs / "worker.log", env=env, queue="default")
        site.worker(log=site.logs / "models.log", env=env, queue="models")
        _poll(lead, run_url, until=("running", "done", "failed"))

        imported = _upload(lead, base, slug, "later.run", run_text(tag="later", queries=5, depth=100))
        assert imported.status_code == 202, imported.text
        final = _poll(lead, imported.headers["Location"], timeout=60)[-1]
        assert final["status"] == "done", final
        assert lead.get(run_url, timeout=30).json()["status"] == "running"  # the run still calls the endpoint
        assert _poll(lead, run_url, timeout=90)[-1]["status"] == "done"
    finally:
        model.close()
