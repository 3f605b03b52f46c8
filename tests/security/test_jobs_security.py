"""Background jobs: who may read and retry one (membership and role now, one rule for pages and API), how many
may wait, what a visit may start, errors PostgreSQL refuses, and the SQLite progress files."""

from __future__ import annotations

import logging
import os

import pytest
from django.test import Client
from rest_framework.test import APIClient

from judging.models import Campaign, Job, Judgment, Membership

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def page(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _failed_model_run(campaign, user) -> Job:
    """A model judge's run that failed with pairs left (Retry would judge them with the server's key)."""
    from judging.jobs.model_judge import pack

    return Job.objects.create(
        kind=Job.Kind.MODEL_JUDGE,
        campaign=campaign,
        started_by=user,
        status=Job.Status.FAILED,
        options={"model": "tiny", "judge": "tiny", "cursor": 0, "failed": [], "concurrency": 1, "timeout": 1,
                 "retries": 0, "tally": {"graded": 0, "unsure": 0, "unchanged": 0}},
        upload=pack([1, 2, 3]),
        total=3,
        error={"detail": "the endpoint failed"},
    )  # fmt: skip


def _significance_job(campaign, user) -> Job:
    return Job.objects.create(
        kind=Job.Kind.SIGNIFICANCE,
        campaign=campaign,
        started_by=user,
        status=Job.Status.DONE,
        options={"key": "k", "measure": "nDCG@10", "test": "tukey"},
        result={"measure": "nDCG@10", "test": "tukey", "systems": ["bm25", "dense"], "p": [[None, 0.01], [0.01, None]]},
        total=5000,
        done=5000,
    )


def test_a_lead_removed_from_the_campaign_can_neither_read_nor_retry_its_job(campaign, lead, make_user, settings):
    settings.RELJUDGE_TASKS_BACKEND = "django_tasks.backends.dummy.DummyBackend"
    former = make_user("former")
    Membership.objects.create(campaign=campaign, user=former, role=Membership.Role.LEAD)
    job = _failed_model_run(campaign, former)
    assert api(former).get(f"/api/jobs/{job.pk}/").status_code == 200  # while a lead

    Membership.objects.filter(campaign=campaign, user=former).delete()
    assert api(former).get(f"/api/jobs/{job.pk}/").status_code == 404
    assert api(former).post(f"/api/jobs/{job.pk}/retry/").status_code == 404
    assert page(former).get(f"/campaigns/demo/jobs/{job.pk}/").status_code == 404
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and not Judgment.objects.exists()  # not queued again
    # The campaign's leads still can, whoever started it.
    assert api(lead).get(f"/api/jobs/{job.pk}/").status_code == 200
    assert page(lead).get(f"/campaigns/demo/jobs/{job.pk}/").status_code == 200


def test_a_lead_made_annotator_loses_the_leads_jobs(campaign, make_user):
    demoted = make_user("demoted")
    Membership.objects.create(campaign=campaign, user=demoted, role=Membership.Role.ANNOTATOR)
    job = _failed_model_run(campaign, demoted)  # started while a lead
    assert api(demoted).get(f"/api/jobs/{job.pk}/").status_code == 404
    assert api(demoted).post(f"/api/jobs/{job.pk}/retry/").status_code == 404
    assert page(demoted).get(f"/campaigns/demo/jobs/{job.pk}/").status_code == 404


def test_an_annotators_significance_job_follows_the_leaderboards_visibility(campaign, annotator, lead):
    Campaign.objects.filter(pk=campaign.pk).update(leaderboard_visible_to_annotators=True)
    job = _significance_job(campaign, annotator)
    seen = api(annotator).get(f"/api/jobs/{job.pk}/")
    assert seen.status_code == 200 and seen.json()["result"]["p"]
    assert page(annotator).get(f"/campaigns/demo/jobs/{job.pk}/").status_code == 200

    Campaign.objects.filter(pk=campaign.pk).update(leaderboard_visible_to_annotators=False)
    assert api(annotator).get(f"/api/jobs/{job.pk}/").status_code == 404
    assert page(annotator).get(f"/campaigns/demo/jobs/{job.pk}/").status_code == 404
    assert api(lead).get(f"/api/jobs/{job.pk}/").status_code == 200


def test_page_and_api_agree_on_another_annotators_job(campaign, annotator, make_user):
    other = make_user("other")
    Membership.objects.create(campaign=campaign, user=other, role=Membership.Role.ANNOTATOR)
    Campaign.objects.filter(pk=campaign.pk).update(leaderboard_visible_to_annotators=True)
    job = _significance_job(campaign, annotator)
    assert api(other).get(f"/api/jobs/{job.pk}/").status_code == 404
    assert page(other).get(f"/campaigns/demo/jobs/{job.pk}/").status_code == 404


# --------------------------------------------------------------------------- how many may wait


def _upload(client, name: str, **extra):
    from tests.data import RUN_BM25

    return client.post(
        "/api/campaigns/demo/upload/run/", {"file": _named(RUN_BM25.encode(), name)}, format="multipart", **extra
    )


def _named(data: bytes, name: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def test_queued_jobs_are_capped_per_user_with_a_429_naming_the_limit(pooled, lead, settings):
    settings.RELJUDGE_JOB_THRESHOLD_BYTES = 10  # every upload becomes a job, which waits (no worker here)
    settings.RELJUDGE_JOBS_QUEUED_PER_USER = 2
    client = api(lead)
    assert [_upload(client, f"r{i}.run").status_code for i in range(2)] == [202, 202]
    refused = _upload(client, "r3.run")
    assert refused.status_code == 429
    assert "2 jobs waiting" in refused.json()["detail"] and "RELJUDGE_JOBS_QUEUED_PER_USER" in refused.json()["detail"]
    korean = _upload(client, "r4.run", HTTP_ACCEPT_LANGUAGE="ko")
    assert korean.status_code == 429 and "워커를 기다리는 내 작업이 이미 2개 있습니다" in korean.json()["detail"]
    assert Job.objects.filter(status="queued").count() == 2


def test_queued_jobs_are_capped_per_campaign(pooled, lead, make_user, settings, caplog):
    settings.RELJUDGE_JOB_THRESHOLD_BYTES = 10
    settings.RELJUDGE_JOBS_QUEUED_PER_CAMPAIGN = 3
    lead2 = make_user("lead2")
    Membership.objects.create(campaign=pooled, user=lead2, role=Membership.Role.LEAD)
    assert [_upload(api(lead), f"a{i}.run").status_code for i in range(2)] == [202, 202]
    assert _upload(api(lead2), "b1.run").status_code == 202
    with caplog.at_level(logging.INFO, logger="judging.jobs"):
        refused = _upload(api(lead2), "b2.run")
    assert refused.status_code == 429 and "RELJUDGE_JOBS_QUEUED_PER_CAMPAIGN" in refused.json()["detail"]
    # the operator sees who was refused where, and why
    assert "job refused for lead2: campaign demo has 3 jobs queued (the limit)" in caplog.text


def test_the_upload_page_refuses_past_the_cap_with_the_message(pooled, lead, settings):
    from tests.data import RUN_BM25

    settings.RELJUDGE_JOB_THRESHOLD_BYTES = 10
    settings.RELJUDGE_JOBS_QUEUED_PER_USER = 1
    client = page(lead)
    first = client.post(
        "/campaigns/demo/upload/", {"kind": "run", "run-kind": "run", "run-file": _named(RUN_BM25.encode(), "a.run")}
    )
    assert first.status_code == 302 and "/jobs/" in first["Location"]
    second = client.post(
        "/campaigns/demo/upload/", {"kind": "run", "run-kind": "run", "run-file": _named(RUN_BM25.encode(), "b.run")}
    )
    assert second.status_code == 422 and "RELJUDGE_JOBS_QUEUED_PER_USER" in second.content.decode()
    assert Job.objects.count() == 1


# --------------------------------------------------------------------------- what a visit may start


def test_visits_to_the_significance_page_start_no_job_and_the_button_needs_the_csrf_token(world, settings):
    settings.RELJUDGE_STATS_JOB_CELLS = 0  # every randomized test goes to a job
    Campaign.objects.filter(pk=world.campaign.pk).update(leaderboard_visible_to_annotators=True)
    client = Client(enforce_csrf_checks=True)
    client.force_login(world.annotator)
    url = "/campaigns/demo/leaderboard/significance/?test=tukey"
    for _ in range(10):
        html = client.get(url).content.decode()
    assert not Job.objects.exists()
    assert client.post(url).status_code == 403  # no CSRF token
    assert not Job.objects.exists()
    token = html.split('name="csrfmiddlewaretoken" value="')[1].split('"')[0]
    assert client.post(url, {"csrfmiddlewaretoken": token}).status_code == 302
    assert Job.objects.filter(kind="significance", started_by=world.annotator).count() == 1


# --------------------------------------------------------------------------- errors the database refuses


def test_a_job_error_with_a_nul_character_is_recorded(campaign, lead, monkeypatch):
    from judging import services
    from judging.jobs import job_run, job_start

    def broken(**kwargs):
        raise RuntimeError("cannot read b'\x00\x01' in the file")

    monkeypatch.setattr(services, "run_import", broken)
    job = job_start(kind="run", campaign=campaign, user=lead, data=b"q1 Q0 d1 1 1.0 x\n", filename="x.run")
    assert job_run(job_id=job.pk)["status"] == "failed"
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED
    assert "\x00" not in job.error["detail"] and "cannot read" in job.error["detail"]


# --------------------------------------------------------------------------- the SQLite progress files


@pytest.fixture
def own_tmp(tmp_path, monkeypatch):
    """A temp directory of the test's own, as tempfile.gettempdir() answers."""
    import tempfile

    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(folder))
    return folder


def _beat(job) -> None:
    from judging.jobs.runner import Heartbeat

    beat = Heartbeat(job)
    beat._sqlite = True  # the progress file, whatever the test database
    beat.done = 2
    beat.beat()


def test_the_progress_file_never_writes_through_a_link(run_campaign_job, own_tmp, tmp_path):
    from judging.jobs.runner import job_refresh, sidecar_folder

    job = run_campaign_job()
    folder = sidecar_folder()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    for name in (f"{job.pk}.tmp", f"{job.pk}.json"):
        (folder / name).symlink_to(victim)
    _beat(job)
    assert victim.read_text() == "precious"
    assert not (folder / f"{job.pk}.json").is_symlink()
    Job.objects.filter(pk=job.pk).update(status=Job.Status.RUNNING)
    job.refresh_from_db()
    assert job_refresh(job).done == 1  # the progress still reads (1 line of 1)


def test_the_progress_folder_is_refused_when_someone_else_made_it_a_link(run_campaign_job, own_tmp, tmp_path):
    from judging.jobs.runner import sidecar_folder

    job = run_campaign_job()
    folder = sidecar_folder()
    os.rmdir(folder)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder.symlink_to(elsewhere)
    _beat(job)  # the beat is skipped (logged), not written into the link's target
    assert list(elsewhere.iterdir()) == []
    with pytest.raises(OSError, match="not a directory only this user can write to"):
        sidecar_folder()


def test_the_progress_folder_is_private(run_campaign_job, own_tmp):
    from judging.jobs.runner import sidecar_folder

    assert oct(sidecar_folder().stat().st_mode & 0o777) == "0o700"


@pytest.fixture
def run_campaign_job(campaign, lead):
    from judging.jobs import job_start

    def start():
        return job_start(kind="run", campaign=campaign, user=lead, data=b"q1 Q0 d1 1 1.0 x\n", filename="x.run")

    return start
