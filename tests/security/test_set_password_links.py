"""A set-password link is only as good as the rules that let a lead issue it, checked again when it is used:
an account made an administrator, or added to a campaign its issuer does not lead, after the link was issued
cannot be taken over with it; the person who opens it is told why (in English and Korean)."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils.http import int_to_base36

from judging.services import campaign_create, membership_add

LINK = re.compile(r"/accounts/set-password/[^\s\"<]+/")
PASSWORD = "a-Long-enough-passphrase-9"


def issued_link(campaign, lead, username: str = "newboss") -> str:
    client = Client()
    client.force_login(lead)
    page = client.post(
        f"/campaigns/{campaign.slug}/members/",
        {"action": "add", "username": username, "role": "annotator", "create": "on"},
    )
    return LINK.search(page.content.decode()).group(0)


def use(link: str, language: str = "en") -> tuple[Client, list]:
    """Open the link and post a new password, as its holder would; the responses of each step."""
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    first = client.get(link)
    steps = [first]
    form_url = first["Location"] if first.status_code == 302 else link
    if first.status_code == 302:
        steps.append(client.get(form_url))
    steps.append(client.post(form_url, {"new_password1": PASSWORD, "new_password2": PASSWORD}))
    return client, steps


def can_log_in(username: str) -> bool:
    return Client().login(username=username, password=PASSWORD)


def test_unchanged_account_link_still_sets_the_password(campaign, lead):
    link = issued_link(campaign, lead)
    _client, steps = use(link)
    assert steps[-1].status_code == 302 and steps[-1]["Location"] == "/accounts/set-password/done/"
    assert can_log_in("newboss")


@pytest.mark.parametrize("power", ["is_staff", "is_superuser"])
def test_link_refused_once_the_account_is_made_an_administrator(campaign, lead, power):
    link = issued_link(campaign, lead)
    get_user_model().objects.filter(username="newboss").update(**{power: True})
    _client, steps = use(link)
    assert [r.status_code for r in steps] == [403, 403]
    assert "newboss is now an administrator account" in steps[0].content.decode()
    assert not can_log_in("newboss")
    assert not get_user_model().objects.get(username="newboss").has_usable_password()


def test_link_refused_at_the_form_when_the_account_changes_after_opening_it(campaign, lead):
    """The holder opened the link (the token moved into the session); the account is promoted; the POST of
    the form is refused too."""
    link = issued_link(campaign, lead)
    client = Client()
    form_url = client.get(link)["Location"]
    assert 'name="new_password1"' in client.get(form_url).content.decode()
    get_user_model().objects.filter(username="newboss").update(is_superuser=True, is_staff=True)
    response = client.post(form_url, {"new_password1": PASSWORD, "new_password2": PASSWORD})
    assert response.status_code == 403 and "administrator account" in response.content.decode()
    assert not can_log_in("newboss")
    assert client.get("/admin/").status_code == 302  # to the admin's login page: nobody is logged in


def test_link_refused_once_the_account_joins_a_campaign_its_issuer_does_not_lead(campaign, lead, make_user):
    link = issued_link(campaign, lead)
    other = campaign_create(slug="other", name="Other", pool_depth=2)
    membership_add(campaign=other, user=make_user("olga"), role="lead")
    membership_add(campaign=other, user=get_user_model().objects.get(username="newboss"), role="lead")
    _client, steps = use(link)
    assert [r.status_code for r in steps] == [403, 403]
    assert (
        "newboss now belongs to a campaign that lead, who issued this link, does not lead" in steps[0].content.decode()
    )
    assert not can_log_in("newboss")


def test_link_refused_once_its_issuer_no_longer_leads(campaign, lead, make_user):
    link = issued_link(campaign, lead)
    membership_add(campaign=campaign, user=make_user("lea"), role="lead")
    membership_add(campaign=campaign, user=lead, role="annotator")
    _client, steps = use(link)
    assert steps[0].status_code == 403
    assert "lead, who issued this link, no longer leads a campaign of newboss" in steps[0].content.decode()


def test_link_of_another_lead_of_every_campaign_still_works(campaign, lead, make_user):
    """Joining a second campaign the issuer also leads changes nothing."""
    link = issued_link(campaign, lead)
    second = campaign_create(slug="second", name="Second", pool_depth=2)
    membership_add(campaign=second, user=lead, role="lead")
    membership_add(campaign=second, user=get_user_model().objects.get(username="newboss"), role="annotator")
    _client, steps = use(link)
    assert steps[-1].status_code == 302 and can_log_in("newboss")


def test_refusal_page_in_korean(campaign, lead):
    link = issued_link(campaign, lead)
    get_user_model().objects.filter(username="newboss").update(is_staff=True)
    _client, steps = use(link, language="ko")
    html = steps[0].content.decode()
    assert steps[0].status_code == 403 and 'lang="ko"' in html
    assert "이 링크로는 비밀번호를 설정할 수 없습니다" in html
    assert "newboss" in html and "관리자 계정" in html


def test_a_token_naming_another_issuer_is_no_link(campaign, lead, make_user):
    """The issuer is part of what the token signs: a lead cannot pass theirs off as a superuser's."""
    root = make_user("root", is_superuser=True, is_staff=True)
    link = issued_link(campaign, lead)
    uid, token = link.rstrip("/").split("/")[-2:]
    _issuer, _dash, rest = token.partition("-")
    forged = f"/accounts/set-password/{uid}/{int_to_base36(root.pk)}-{rest}/"
    page = Client().get(forged, follow=True).content.decode()
    assert "This link no longer works" in page
    assert not can_log_in("newboss")
