"""Issue 11 #12: the API, the pages and the commands follow one rule for who creates campaigns and for keeping
a campaign's last lead (the API removed the last lead with a 204; a lead could create campaigns only by API)."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from judging.models import Campaign, Membership

pytestmark = pytest.mark.django_db
LAST_LEAD = "A campaign needs at least one lead: add another lead first."


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def people(campaign, lead, annotator, make_user):
    """Who asks: the campaign's lead and annotator, a user granted judging.add_campaign, a superuser, a
    user who belongs to no campaign."""
    granted = make_user("granted")
    granted.user_permissions.add(Permission.objects.get(codename="add_campaign"))
    return {
        "lead": lead,
        "annotator": annotator,
        "granted": granted,
        "root": make_user("root", is_superuser=True, is_staff=True),
        "nobody": make_user("nobody"),
    }


@pytest.mark.parametrize(
    ("who", "allowed"),
    [("lead", True), ("granted", True), ("root", True), ("annotator", False), ("nobody", False)],
)
def test_web_and_api_agree_on_who_creates_campaigns(client, people, who, allowed):
    user = people[who]
    client.force_login(user)
    form = {"slug": "web-new", "name": "Web", "pool_depth": 10, "redundancy": 1, "grades": "0,1,2"}
    web = client.post(reverse("judging:campaign_new"), form)
    assert (web.status_code == 302) is allowed and (web.status_code == 403) is not allowed
    home = client.get("/").content.decode()
    assert (reverse("judging:campaign_new") in home) is allowed  # the page offers it exactly when allowed
    response = api(user).post("/api/campaigns/", {"slug": "api-new", "grades": [0, 1]}, format="json")
    assert response.status_code == (201 if allowed else 403)
    made = set(Campaign.objects.filter(slug__in=["web-new", "api-new"]).values_list("slug", flat=True))
    assert made == ({"web-new", "api-new"} if allowed else set())
    if allowed:
        for slug in made:
            assert Membership.objects.get(campaign__slug=slug, user=user).role == "lead"


@pytest.mark.parametrize("how", ["api-remove", "api-demote", "web-remove", "web-demote", "command-demote"])
def test_no_interface_takes_away_the_last_lead(client, campaign, lead, how):
    if how == "api-remove":
        response = api(lead).delete(f"/api/campaigns/{campaign.slug}/members/lead/")
        assert response.status_code == 400 and response.json() == {"non_field_errors": [LAST_LEAD]}
    elif how == "api-demote":
        body = {"username": "lead", "role": "annotator"}
        response = api(lead).post(f"/api/campaigns/{campaign.slug}/members/", body, format="json")
        assert response.status_code == 400 and LAST_LEAD in str(response.json())
    elif how.startswith("web"):
        client.force_login(lead)
        remove = {"action": "remove", "user": lead.pk, "confirm": "1"}
        post = remove if how == "web-remove" else {"action": "role", "user": lead.pk}
        post.setdefault("role", "annotator")
        response = client.post(reverse("judging:campaign_members", args=[campaign.slug]), post, follow=True)
        assert LAST_LEAD in response.content.decode()
    else:
        with pytest.raises(CommandError, match=LAST_LEAD):
            call_command("add_member", campaign.slug, "lead", "--role", "annotator", stdout=io.StringIO())
    assert Membership.objects.get(campaign=campaign, user=lead).role == "lead"


def test_the_last_lead_goes_once_another_lead_is_added(campaign, lead, make_user):
    other = make_user("other-lead")
    assert api(lead).post(
        f"/api/campaigns/{campaign.slug}/members/", {"username": "other-lead", "role": "lead"}, format="json"
    ).status_code in (200, 201)
    assert api(other).delete(f"/api/campaigns/{campaign.slug}/members/lead/").status_code == 204
    assert list(campaign.memberships.filter(role="lead").values_list("user__username", flat=True)) == ["other-lead"]
