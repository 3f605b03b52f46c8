"""judging/jobs/ in process: starting, running, reaping and retrying jobs (the worker's code, called directly)."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from tests.data import RUN_BM25

pytestmark = pytest.mark.django_db(transaction=False)


@pytest.fixture
def run_job(campaign, lead):
    from judging.jobs import job_start

    def start(text: str, **options):
        return job_start(
            kind="run", campaign=campaign, user=lead, data=text.encode(), filename="x.run", options=options
        )

    return start


def test_job_start_queues_the_upload_with_its_line_count(run_job):
    job = run_job(RUN_BM25)
    job.refresh_from_db()
    assert (job.status, job.done, job.total, job.size) == ("queued", 0, 5, len(RUN_BM25))
    assert b"".join(bytes(c) for c in job.chunks.order_by("seq").values_list("data", flat=True)) == RUN_BM25.encode()
    assert job.upload is None and job.task_id


def test_job_run_imports_marks_done_and_drops_the_upload(run_job, campaign):
    from judging.jobs import job_run
    from judging.models import Job, System

    job = run_job(RUN_BM25, system_name="renamed")
    assert job_run(job_id=job.pk)["status"] == "done"
    job = Job.objects.get(pk=job.pk)
    assert job.status == "done" and job.upload is None and not job.chunks.exists() and job.finished_at
    assert job.result["systems"] == ["renamed"] and job.error is None
    assert list(System.objects.filter(campaign=campaign).values_list("name", flat=True)) == ["renamed"]
    # A second delivery of the same task does nothing.
    assert job_run(job_id=job.pk) == {"status": "skipped"}


def test_job_run_failure_names_file_line_field_and_writes_nothing(run_job, campaign):
    from judging.jobs import job_run
    from judging.models import Job, Pair, System

    job = run_job(RUN_BM25 + "q2 Q0 d9 3 notanumber bm25\n")
    job_run(job_id=job.pk)
    job = Job.objects.get(pk=job.pk)
    assert job.status == "failed"
    assert {k: job.error[k] for k in ("file", "line", "field")} == {"file": "x.run", "line": 6, "field": "score"}
    assert not System.objects.filter(campaign=campaign).exists() and not Pair.objects.filter(campaign=campaign).exists()


def test_running_job_without_heartbeat_is_reaped_and_can_be_retried(run_job, lead, settings):
    from judging.jobs import job_can_retry, job_get, job_retry, job_run
    from judging.models import Job

    settings.RELJUDGE_JOB_STALE_SECONDS = 30
    job = run_job(RUN_BM25)
    # A worker claimed it, then died 31 s ago.
    Job.objects.filter(pk=job.pk).update(
        status="running", attempts=1, heartbeat_at=timezone.now() - timedelta(seconds=31)
    )
    seen = job_get(job_id=job.pk, user=lead)
    assert seen.status == "failed" and "stopped" in seen.error["detail"] and job_can_retry(seen)
    job_retry(job=seen)
    assert Job.objects.get(pk=job.pk).status == "queued"
    job_run(job_id=job.pk)
    assert Job.objects.get(pk=job.pk).status == "done"


def test_running_job_with_a_recent_heartbeat_is_left_alone(run_job, lead):
    from judging.jobs import job_get
    from judging.models import Job

    job = run_job(RUN_BM25)
    Job.objects.filter(pk=job.pk).update(status="running", attempts=1, heartbeat_at=timezone.now())
    assert job_get(job_id=job.pk, user=lead).status == "running"


def test_a_reaped_job_whose_worker_still_finishes_commits_nothing(run_job, campaign, monkeypatch):
    """If a slow worker was taken for dead, its late import must not land beside a retry's."""
    from judging import services
    from judging.jobs import job_run
    from judging.models import Job, System

    job = run_job(RUN_BM25)
    real = services.run_import

    def import_then_get_reaped(**kwargs):
        summary = real(**kwargs)
        Job.objects.filter(pk=job.pk).update(status="failed", error={"detail": "reaped"})
        return summary

    monkeypatch.setattr(services, "run_import", import_then_get_reaped)
    assert job_run(job_id=job.pk) == {"status": "superseded"}
    assert not System.objects.filter(campaign=campaign).exists()
    # (the reaping UPDATE ran on the import's own connection here, so it rolled back with it)
    assert Job.objects.get(pk=job.pk).status != "done"


def test_job_is_hidden_from_annotators_and_other_campaigns_leads(run_job, annotator, make_user):
    from judging.jobs import job_get
    from judging.models import Job

    job = run_job(RUN_BM25)
    for outsider in (annotator, make_user("stranger")):
        with pytest.raises(Job.DoesNotExist):
            job_get(job_id=job.pk, user=outsider)


def test_api_upload_above_threshold_answers_202_with_location(client, campaign, lead, settings):
    settings.RELJUDGE_JOB_THRESHOLD_BYTES = 10
    client.force_login(lead)
    from django.core.files.uploadedfile import SimpleUploadedFile

    r = client.post(
        "/api/campaigns/demo/upload/run/", {"file": SimpleUploadedFile("b.run", RUN_BM25.encode())}, format="multipart"
    )
    assert r.status_code == 202
    assert r.json() == {"job": r["Location"], "status": "queued"}
    body = client.get(r["Location"]).json()
    assert body["status"] == "queued" and body["progress"] == {"done": 0, "total": 5, "per_second": None}
    assert body["result"] == {} and body["error"] == {}


def test_api_upload_below_threshold_is_imported_in_the_request(client, campaign, lead):
    client.force_login(lead)
    from django.core.files.uploadedfile import SimpleUploadedFile

    r = client.post("/api/campaigns/demo/upload/run/", {"file": SimpleUploadedFile("b.run", RUN_BM25.encode())})
    assert r.status_code == 200 and r.json()["systems"] == ["bm25"]


def test_healthz_needs_no_login(client, db):
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["database"] == "ok"


# --------------------------------------------------------------------------- aggregation policy switches


def _labels(campaign) -> dict:
    from judging.models import Pair

    return dict(Pair.objects.filter(campaign=campaign).values_list("id", "label"))


def test_policy_switch_above_threshold_is_a_job_from_the_settings_page(client, world, settings):
    from judging.jobs import job_run
    from judging.models import Campaign, Job

    settings.RELJUDGE_POLICY_JOB_PAIRS = 2  # the world has 4 judged pairs
    client.force_login(world.lead)
    page = client.get("/campaigns/demo/settings/")
    form = {k: v for k, v in page.context["form"].initial.items() if v is not None}
    form.update(aggregation="max", name="Renamed", **{"grades-TOTAL_FORMS": "0", "grades-INITIAL_FORMS": "0"})
    for i, g in enumerate(world.campaign.grades.order_by("value")):
        form.update({f"grades-{i}-value": g.value, f"grades-{i}-name": g.name, "grades-TOTAL_FORMS": str(i + 1)})
    form["leaderboard_visible_to_annotators"] = ""
    before = _labels(world.campaign)
    r = client.post("/campaigns/demo/settings/", {k: v for k, v in form.items() if v != ""})
    assert r.status_code == 302, r.content.decode()[:2000]
    campaign = Campaign.objects.get(pk=world.campaign.pk)
    assert (campaign.name, campaign.aggregation) == ("Renamed", "median")  # the rest saved, the switch queued
    assert _labels(campaign) == before
    job = Job.objects.get(kind="policy")
    assert (job.status, job.total, job.options["policy"]) == ("queued", 4, "max")
    html = client.get("/campaigns/demo/settings/").content.decode()
    assert "Switching to the max aggregation policy" in html and 'hx-trigger="every 1s"' in html

    assert job_run(job_id=job.pk)["status"] == "done"
    campaign.refresh_from_db()
    assert campaign.aggregation == "max"
    assert world.pair_of("q1", "d1").label == 2  # grades 2 and 1: the median was 1, the maximum is 2
    job.refresh_from_db()
    assert job.result == {"policy": "max", "from": "median", "labels_changed": 1, "judged_pairs": 4}
    assert "Switching to" not in client.get("/campaigns/demo/settings/").content.decode()


def test_policy_switch_below_threshold_stays_in_the_request(world, settings):
    from tests.data import client_for

    settings.RELJUDGE_POLICY_JOB_PAIRS = 100
    r = client_for(world.lead).patch("/api/campaigns/demo/", {"aggregation": "max"}, format="json")
    assert r.status_code == 200 and r.json()["aggregation"] == "max"
    assert world.pair_of("q1", "d1").label == 2


def test_policy_switch_api_answers_202_then_the_job_reports_the_outcome(world, settings):
    from judging.jobs import job_run
    from judging.models import Campaign
    from tests.data import client_for

    settings.RELJUDGE_POLICY_JOB_PAIRS = 2
    api = client_for(world.lead)
    r = api.patch("/api/campaigns/demo/", {"aggregation": "max", "description": "new"}, format="json")
    assert r.status_code == 202 and r.json() == {"job": r["Location"], "status": "queued"}
    assert Campaign.objects.get(pk=world.campaign.pk).description == "new"
    again = api.patch("/api/campaigns/demo/", {"aggregation": "min"}, format="json")
    assert again.status_code == 409 and "already under way" in again.json()["detail"]
    body = api.get(r["Location"]).json()
    assert body["kind"] == "policy" and body["progress"] == {"done": 0, "total": 4, "per_second": None}
    job_run(job_id=body["id"])
    body = api.get(r["Location"]).json()
    assert body["status"] == "done" and body["progress"] == {"done": 4, "total": 4, "per_second": None}
    assert body["result"]["labels_changed"] == 1
    assert Campaign.objects.get(pk=world.campaign.pk).aggregation == "max"
    # annotators can neither switch nor see the job
    ann = client_for(world.annotator)
    assert ann.patch("/api/campaigns/demo/", {"aggregation": "min"}, format="json").status_code == 403
    assert ann.get(r["Location"]).status_code == 404


def test_policy_job_failing_midway_changes_no_label_and_not_the_policy(world, settings, monkeypatch):
    from judging.jobs import job_can_retry, job_retry, job_run, policy_job_start
    from judging.models import Campaign, Job
    from judging.services import campaigns

    monkeypatch.setattr(campaigns, "POLICY_CHUNK", 1)
    real = campaigns.labels_refresh
    calls = []

    def fail_on_the_third_chunk(**kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("disk full")
        return real(**kwargs)

    monkeypatch.setattr(campaigns, "labels_refresh", fail_on_the_third_chunk)
    before = _labels(world.campaign)
    job = policy_job_start(campaign=world.campaign, user=world.lead, policy="max")
    assert job_run(job_id=job.pk)["status"] == "failed"
    job = Job.objects.get(pk=job.pk)
    assert (
        job.status == "failed" and "disk full" in job.error["detail"] and "nothing was changed" in job.error["detail"]
    )
    assert Campaign.objects.get(pk=world.campaign.pk).aggregation == "median"
    assert _labels(world.campaign) == before
    # Retry runs the switch again
    monkeypatch.setattr(campaigns, "labels_refresh", real)
    assert job_can_retry(job)
    job_retry(job=job)
    assert job_run(job_id=job.pk)["status"] == "done"
    assert Campaign.objects.get(pk=world.campaign.pk).aggregation == "max"


def test_agreement_page_policy_switch_becomes_a_job(client, world, settings):
    from judging.models import Campaign, Job

    settings.RELJUDGE_POLICY_JOB_PAIRS = 2
    client.force_login(world.lead)
    r = client.post("/campaigns/demo/agreement/policy/", {"policy": "max"}, follow=True)
    html = r.content.decode()
    assert "recomputes 4 labels in the background" in html and "Switching to the max aggregation policy" in html
    assert Job.objects.get(kind="policy").status == "queued"
    assert Campaign.objects.get(pk=world.campaign.pk).aggregation == "median"


# --------------------------------------------------------------------------- slow significance tests

MATRIX = '<table class="lb-matrix">'


def _expected_tukey(job):
    from judging import scoring

    lb = scoring.leaderboard(job.campaign, scoring.Params(**job.options["params"]))
    return lb, scoring.pairwise_stats(lb, "nDCG@10", test="tukey")


def test_significance_above_threshold_runs_as_a_job_and_the_page_shows_the_result(client, world, settings):
    from judging.jobs import job_run
    from judging.models import Job
    from judging.services import judgment_record

    settings.RELJUDGE_STATS_JOB_CELLS = 0  # every randomized test goes to a job
    client.force_login(world.lead)
    url = "/campaigns/demo/leaderboard/significance/?test=tukey"
    html = client.get(url).content.decode()
    # A visit offers the job and does not start it; the button (a POST) does.
    assert 'id="significance-job"' in html and 'method="post"' in html and MATRIX not in html
    assert not Job.objects.exists()
    started = client.post(url)
    assert started.status_code == 302 and started["Location"] == url
    html = client.get(url).content.decode()
    assert 'id="significance-job"' in html and 'hx-trigger="every 1s"' in html and MATRIX not in html
    job = Job.objects.get(kind="significance")
    assert (job.status, job.total, job.options["test"], job.options["measure"]) == ("queued", 5000, "tukey", "nDCG@10")
    client.get(url)
    assert Job.objects.filter(kind="significance").count() == 1  # a second visit follows the same job

    ticks: list[int] = []
    assert job_run(job_id=job.pk, progress=ticks.append)["status"] == "done"
    job.refresh_from_db()
    assert job.done == job.total == 5000 == sum(ticks)
    partial = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert MATRIX in partial and "significance-job" not in partial
    lb, expected = _expected_tukey(job)
    assert job.result["state"] == lb.state
    np.testing.assert_allclose(np.array(job.result["p"], dtype=float), expected.p, equal_nan=True)

    # New labels: the old matrix is not current any more, so it is not shown; a new job starts.
    judgment_record(pair=world.pair_of("q1", "d2"), annotator=world.annotator, grade=2)
    html = client.get(url).content.decode()
    assert MATRIX not in html and 'id="significance-job"' in html and 'method="post"' in html
    client.post(url)
    assert Job.objects.filter(kind="significance").count() == 2


def test_significance_below_threshold_is_computed_in_the_request(client, world):
    from judging.models import Job

    client.force_login(world.lead)
    html = client.get("/campaigns/demo/leaderboard/significance/?test=tukey").content.decode()
    assert MATRIX in html and not Job.objects.exists()


def test_significance_api_202_then_the_matrix_for_the_current_labels(world, settings):
    from judging.jobs import job_run
    from judging.models import Job
    from tests.data import client_for

    api = client_for(world.lead)
    url = "/api/campaigns/demo/leaderboard/significance/?test=tukey"
    small = api.get(url)
    assert small.status_code == 200 and small.json()["systems"] == ["bm25", "dense"]

    settings.RELJUDGE_STATS_JOB_CELLS = 0
    api.get("/api/campaigns/demo/leaderboard/significance/?test=ttest")  # no permutations: never a job
    assert not Job.objects.exists()
    r = api.get(url + "&measure=MAP")
    assert r.status_code == 202 and r.json() == {"job": r["Location"], "status": "queued"}
    job_run(job_id=api.get(r["Location"]).json()["id"])
    done = api.get(r["Location"]).json()
    assert done["status"] == "done" and done["progress"] == {"done": 5000, "total": 5000, "per_second": None}
    body = api.get(url + "&measure=MAP").json()
    assert body["measure"] == "MAP" and body["test"] == "tukey" and body["p"][0][0] is None
    assert body["p"] == done["result"]["p"] and body["state"] == done["result"]["state"]
    assert api.get(url + "&measure=nope").status_code == 400
    # an annotator of a campaign that hides its leaderboard gets 403
    assert client_for(world.annotator).get(url).status_code == 403


def test_significance_result_survives_a_lost_cache_through_the_job(client, world, settings):
    from django.core.cache import cache

    from judging.jobs import job_run
    from judging.models import Job

    settings.RELJUDGE_STATS_JOB_CELLS = 0
    client.force_login(world.lead)
    url = "/campaigns/demo/leaderboard/significance/?test=randomization"
    client.post(url)
    job_run(job_id=Job.objects.get().pk)
    cache.clear()
    assert MATRIX in client.get(url).content.decode()
    assert Job.objects.count() == 1


@pytest.mark.parametrize(
    ("seconds", "english", "korean"),
    [
        (25, "<strong>Done</strong> in 25 s:", "25초"),
        (245, "in 4 min 5 s:", "4분 5초"),
        (7380, "in 2 h 3 min:", "2시간 3분"),
    ],
)
def test_the_job_page_says_how_long_the_job_took(run_job, campaign, lead, seconds, english, korean):
    """To the second under an hour, in both languages (Django's timesince said "0 minutes" for a 25 s import)."""
    from django.test import Client
    from django.urls import reverse

    from judging.jobs import job_run
    from judging.models import Job

    job = run_job(RUN_BM25)
    job_run(job_id=job.pk)
    start = timezone.now()
    Job.objects.filter(pk=job.pk).update(started_at=start, finished_at=start + timedelta(seconds=seconds))
    url = reverse("judging:job_detail", args=[campaign.slug, job.pk])
    for language, expected in (("en", english), ("ko", korean)):
        client = Client(HTTP_ACCEPT_LANGUAGE=language)
        client.force_login(lead)
        page = client.get(url).content.decode()
        assert expected in page, page
        assert "0 minutes" not in page and "0분" not in page


def test_a_finished_qrels_job_shows_the_summary_the_upload_page_gives(campaign, lead):
    """The job page reads like an import done at once, in the reader's language: the kind of rows named in it
    (not the stored English word), the source account the labels went to, and the stubs."""
    from django.test import Client
    from django.urls import reverse

    from judging.jobs import job_run, job_start

    job = job_start(
        kind="qrels",
        campaign=campaign,
        user=lead,
        data=b"q1 0 d1 2\nq1 0 d2 0\nq9 0 d9 1\n",
        filename="old.qrels",
        options={"annotator": "trec-2019"},
    )
    job_run(job_id=job.pk)
    url = reverse("judging:job_detail", args=[campaign.slug, job.pk])
    pages = {}
    for language in ("en", "ko"):
        client = Client(HTTP_ACCEPT_LANGUAGE=language)
        client.force_login(lead)
        pages[language] = client.get(url).content.decode()
    assert "old.qrels: 3 judgments added, 0 updated, 0 unchanged" in pages["en"]
    assert "created the source account &#x27;trec-2019&#x27; for these labels" in pages["en"]
    assert "stubs created: 2 queries, 3 documents" in pages["en"]
    assert "old.qrels: 판정 3건 추가" in pages["ko"] and "judgments" not in pages["ko"]
    assert "출처 계정 &#x27;trec-2019&#x27;" in pages["ko"]
