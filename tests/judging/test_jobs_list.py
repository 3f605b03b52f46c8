"""The campaign's jobs list: leads see every job with who started it, when and how long it took; annotators
are refused; pages of 50 (100 in the API); a job's page sits under the right tab."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from judging.models import Job
from judging.services import campaign_create, membership_add
from tests.data import client_for


@pytest.fixture
def jobs_world(make_user):
    campaign = campaign_create(slug="jobs", pool_depth=3)
    lead, annotator = make_user("jobs-lead"), make_user("jobs-annotator")
    membership_add(campaign=campaign, user=lead, role="lead")
    membership_add(campaign=campaign, user=annotator, role="annotator")
    now = timezone.now()
    imp = Job.objects.create(
        kind=Job.Kind.RUN,
        campaign=campaign,
        started_by=lead,
        status=Job.Status.DONE,
        filename="big.run",
        started_at=now - timedelta(seconds=200),
        finished_at=now - timedelta(seconds=20),
    )
    judge = Job.objects.create(
        kind=Job.Kind.MODEL_JUDGE,
        campaign=campaign,
        started_by=lead,
        status=Job.Status.FAILED,
        filename="",
        error={"detail": "the endpoint did not answer"},
        started_at=now - timedelta(seconds=50),
        finished_at=now - timedelta(seconds=45),
    )
    return campaign, lead, annotator, imp, judge


def test_leads_see_every_job_with_who_when_and_how_long(jobs_world, client):
    campaign, lead, _annotator, imp, judge = jobs_world
    client.force_login(lead)
    text = client.get(reverse("judging:jobs", args=[campaign.slug]), HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "run import" in text and "model judge run" in text and "big.run" in text
    assert "3 min" in text and "5 s" in text  # 180 s and 5 s
    assert "the endpoint did not answer" in text
    rows = client_for(lead).get(reverse("api:campaign-jobs", args=[campaign.slug])).json()
    assert rows["count"] == 2
    assert [(r["kind"], r["status"], r["started_by"]) for r in rows["results"]] == [
        ("model_judge", "failed", lead.username),
        ("run", "done", lead.username),
    ]
    assert rows["results"][1]["seconds"] == pytest.approx(180.0)


def test_a_job_from_the_command_line_says_so_on_the_list_and_its_page(jobs_world, client):
    """'Started by –' on the list and 'the command line' on the page (issue 42): one wording, both places. Only a
    model judge's run comes from the command line; another job without its user lost it to a deletion."""
    campaign, lead, _annotator, imp, judge = jobs_world
    Job.objects.filter(pk__in=[imp.pk, judge.pk]).update(started_by=None)
    client.force_login(lead)
    for language, command_line, deleted in (
        ("en", "the command line", "a deleted user"),
        ("ko", "명령줄", "삭제된 사용자"),
    ):
        text = client.get(reverse("judging:jobs", args=[campaign.slug]), HTTP_ACCEPT_LANGUAGE=language).content
        rows = text.decode().split("<tr>")
        assert f"<td>{command_line}</td>" in next(r for r in rows if f"/jobs/{judge.pk}/" in r)
        assert f"<td>{deleted}</td>" in next(r for r in rows if "big.run" in r)
        for job, said in ((judge, command_line), (imp, deleted)):
            url = reverse("judging:job_detail", args=[campaign.slug, job.pk])
            assert said in client.get(url, HTTP_ACCEPT_LANGUAGE=language).content.decode()


def test_annotators_and_outsiders_are_refused(jobs_world, client, make_user):
    campaign, _lead, annotator, _imp, _judge = jobs_world
    client.force_login(annotator)
    assert client.get(reverse("judging:jobs", args=[campaign.slug])).status_code == 403
    assert client_for(annotator).get(reverse("api:campaign-jobs", args=[campaign.slug])).status_code == 403
    outsider = make_user("jobs-outsider")
    assert client_for(outsider).get(reverse("api:campaign-jobs", args=[campaign.slug])).status_code == 404


def test_lists_are_paginated(jobs_world, client):
    campaign, lead, *_ = jobs_world
    Job.objects.bulk_create(
        [Job(kind=Job.Kind.SIGNIFICANCE, campaign=campaign, started_by=lead, filename="") for _ in range(110)]
    )
    data = client_for(lead).get(reverse("api:campaign-jobs", args=[campaign.slug])).json()
    assert data["count"] == 112 and len(data["results"]) == 100 and data["next"]
    client.force_login(lead)
    page = client.get(reverse("judging:jobs", args=[campaign.slug]) + "?page=3").content.decode()
    assert "page 3 of 3" in page


def test_a_jobs_page_highlights_its_tab(jobs_world, client):
    campaign, lead, _annotator, imp, judge = jobs_world
    client.force_login(lead)

    def current(job):
        text = client.get(reverse("judging:job_detail", args=[campaign.slug, job.pk])).content.decode()
        nav = text[text.index('class="campaign-nav"') :]
        return nav[: nav.index('aria-current="page"')].rsplit("href=", 1)[1]

    assert "/upload/" in current(imp)
    assert "/jobs/" in current(judge)  # a model run is no upload
