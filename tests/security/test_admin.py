"""The admin site: superusers only, and judging data read-only there (it changes only through the services)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from judging.demo.loader import demo_users
from judging.models import Adjudication, Judgment, JudgmentRevision, Membership, Pair
from judging.services import adjudication_set


@pytest.fixture
def staff_lead(world):
    """The lead as the demo used to make it: staff, with every judging.* permission."""
    lead = world.lead
    lead.is_staff = True
    lead.save(update_fields=["is_staff"])
    lead.user_permissions.set(Permission.objects.filter(content_type__app_label="judging"))
    return lead


@pytest.fixture
def root(make_user):
    return make_user("root", is_staff=True, is_superuser=True)


def test_admin_refuses_a_staff_user_with_every_judging_permission(client, world, staff_lead):
    client.force_login(staff_lead)
    # The index and another campaign's change page send the user to the admin login, not into the data.
    assert client.get("/admin/").status_code == 302
    other = world.stranger.memberships.get().campaign
    page = client.get(f"/admin/judging/campaign/{other.pk}/change/")
    assert page.status_code == 302 and page["Location"].startswith("/admin/login/")
    assert client.get("/admin/judging/judgment/").status_code == 302


def test_admin_staff_lead_cannot_add_itself_to_another_campaign(client, world, staff_lead):
    other = world.stranger.memberships.get().campaign
    client.force_login(staff_lead)
    client.post(
        "/admin/judging/membership/add/",
        {"campaign": other.pk, "user": staff_lead.pk, "role": "lead"},
    )
    assert not Membership.objects.filter(campaign=other, user=staff_lead).exists()


def test_admin_logging_in_as_staff_non_superuser_is_refused(client, world, staff_lead):
    page = client.post("/admin/login/?next=/admin/", {"username": "lead", "password": "pw-lead"})
    assert page.status_code == 200  # the form again, with an error, not a redirect into the admin
    assert b"Please enter the correct username and password for a staff account" in page.content
    assert "_auth_user_id" not in client.session


def test_admin_opens_for_a_superuser(client, root):
    client.force_login(root)
    assert client.get("/admin/").status_code == 200


def test_demo_lead_is_not_staff_and_has_no_global_permissions(db):
    users, _ = demo_users(reset=False)
    lead = users["lead"]
    assert not lead.is_staff and not lead.is_superuser
    assert not lead.user_permissions.exists()
    assert users["admin"].is_superuser


def test_demo_reset_takes_staff_away_from_a_lead_made_by_an_older_demo(db):
    users, _ = demo_users(reset=False)
    old = users["lead"]
    old.is_staff = True
    old.save(update_fields=["is_staff"])
    old.user_permissions.set(Permission.objects.filter(content_type__app_label="judging"))
    users, _ = demo_users(reset=True)
    lead = users["lead"]
    lead.refresh_from_db()
    assert not lead.is_staff and not lead.user_permissions.exists()


def test_base_page_links_the_admin_for_superusers_only(client, world, staff_lead, root):
    client.force_login(staff_lead)
    assert b'href="/admin/"' not in client.get("/").content
    client.force_login(root)
    assert b'href="/admin/"' in client.get("/").content


# --------------------------------------------------------------------------- judging data is read-only


@pytest.mark.parametrize("model", ["judgment", "judgmentrevision", "adjudication", "pair"])
def test_admin_judging_data_cannot_be_added_changed_or_deleted(client, world, root, model):
    adjudication_set(pair=world.pair, lead=world.lead, grade=0)
    obj = {
        "judgment": world.judgment,
        "judgmentrevision": JudgmentRevision.objects.filter(judgment=world.judgment).first(),
        "adjudication": Adjudication.objects.get(pair=world.pair),
        "pair": world.pair,
    }[model]
    client.force_login(root)
    base = f"/admin/judging/{model}/"
    assert client.get(base).status_code == 200  # still visible
    assert client.get(base + "add/").status_code == 403
    page = client.get(f"{base}{obj.pk}/change/")
    assert page.status_code == 200  # the view page, with no form to submit
    assert b'type="submit"' not in page.content or b'name="_save"' not in page.content
    assert client.post(f"{base}{obj.pk}/change/", {}).status_code == 403
    assert client.post(f"{base}{obj.pk}/delete/", {"post": "yes"}).status_code == 403
    assert type(obj).objects.filter(pk=obj.pk).exists()


def test_admin_judgment_edit_is_refused_and_label_qrels_stay_in_step(client, world, root):
    """A grade change in the admin used to write no revision and leave the label and the qrels stale."""
    client.force_login(root)
    judgment = world.judgment
    other_grade = judgment.pair.campaign.grades.exclude(pk=judgment.grade_id).first()
    revisions = JudgmentRevision.objects.count()
    response = client.post(
        f"/admin/judging/judgment/{judgment.pk}/change/",
        {
            "pair": judgment.pair_id,
            "annotator": judgment.annotator_id,
            "grade": other_grade.pk,
            "note": "changed in the admin",
            "seconds_spent": "0",
            "revisions-TOTAL_FORMS": "0",
            "revisions-INITIAL_FORMS": "0",
        },
    )
    assert response.status_code == 403
    judgment.refresh_from_db()
    assert judgment.note == "spot on" and JudgmentRevision.objects.count() == revisions
    # What the label, the qrels export and the judgment say still agree.
    pair = Pair.objects.get(pk=judgment.pair_id)
    lead_api = APIClient()
    lead_api.force_authenticate(world.lead)
    qrels = b"".join(lead_api.get(f"/api/campaigns/{world.campaign.slug}/qrels/").streaming_content).decode()
    assert f"q1 0 d1 {pair.label}" in qrels


def test_admin_never_offers_a_grade_dropdown(client, world, root):
    """The grade select listed every campaign's grades; now no admin form chooses a grade at all."""
    client.force_login(root)
    for url in (
        f"/admin/judging/judgment/{world.judgment.pk}/change/",
        "/admin/judging/adjudication/add/",
        f"/admin/judging/pair/{world.pair.pk}/change/",
    ):
        content = client.get(url).content
        assert b'name="grade"' not in content and b'name="tentative_grade"' not in content, url


def test_admin_revisions_cannot_be_deleted_even_through_a_campaign_delete(client, world, root):
    client.force_login(root)
    revisions = JudgmentRevision.objects.count()
    assert revisions > 0
    page = client.post(f"/admin/judging/campaign/{world.campaign.pk}/delete/", {"post": "yes"})
    # Django's admin refuses a delete that would cascade to objects the user may not delete.
    assert page.status_code in (200, 403)
    assert JudgmentRevision.objects.count() == revisions
    assert Judgment.objects.filter(pair__campaign=world.campaign).exists()
