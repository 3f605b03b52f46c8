"""The background jobs' pages in Korean: the model judge form, a job's progress and outcome, a policy switch."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.fixture(autouse=True)
def korean(settings):
    settings.LANGUAGE_CODE = "ko"


def test_model_judge_form_without_endpoint_reads_in_korean(pooled, lead, monkeypatch):
    monkeypatch.delenv("RELJUDGE_MODEL_ENDPOINT", raising=False)
    client = Client(HTTP_ACCEPT_LANGUAGE="ko")
    client.force_login(lead)
    html = client.get("/campaigns/demo/judges/").content.decode()
    assert "모델 판정자 실행" in html and "이 서버에 모델 엔드포인트가 설정되어 있지 않습니다." in html
    assert "이 판정자가 아직 판정하지 않은 쌍" in html and "실행 시작" in html


def test_policy_job_page_reads_in_korean(world, settings):
    from judging.jobs import job_run, policy_job_start

    job = policy_job_start(campaign=world.campaign, user=world.lead, policy="max")
    client = Client(HTTP_ACCEPT_LANGUAGE="ko")
    client.force_login(world.lead)
    html = client.get(f"/campaigns/demo/jobs/{job.pk}/").content.decode()
    assert "max 집계 정책으로 전환" in html and "백그라운드에서 실행되므로" in html
    job_run(job_id=job.pk)
    done = client.get(f"/campaigns/demo/jobs/{job.pk}/").content.decode()
    assert "집계 정책이 이제 max입니다(이전: median). 레이블 4개 중 1개가 바뀌었으며" in done
