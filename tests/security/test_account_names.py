"""Usernames are one name to a reader: NFKC-normalised and compared case-insensitively wherever an account is
created or named (members page, API, add_member, a qrels import's source, a model judge), and a name that
only looks like an existing account's is refused, naming the account it resembles."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from judging.imports.errors import FormatError
from judging.models import Judgment, LabelSource, Membership
from judging.services import qrels_import, run_import
from judging.services.model_judge import model_judge_get_or_create

User = get_user_model()


@pytest.fixture
def api(campaign, lead):
    client = APIClient()
    client.force_authenticate(lead)
    return client


def create(api, username: str):
    return api.post("/api/campaigns/demo/members/", {"username": username, "create": True}, format="json")


@pytest.mark.parametrize("typed", ["ANN", "Ann", "ａｎｎ", "ＡＮＮ"])
def test_a_case_or_width_variant_names_the_existing_account(api, typed):
    response = create(api, typed)
    assert response.status_code == 200 and response.json()["username"] == "ann"
    assert response.json()["created"] is False
    assert User.objects.filter(username__iexact="ann").count() == 1
    assert User.objects.count() == 2  # lead and ann


@pytest.mark.parametrize(
    ("typed", "script"),
    [
        ("lеad", "Cyrillic е"),
        ("leаd", "Cyrillic а"),
        ("lеаd", "two Cyrillic letters"),
        ("lεad", "Greek epsilon"),
        ("ΑΝΝ", "capital Greek letters only"),
        ("аnn", "Cyrillic а before Latin"),
    ],
)
def test_a_look_alike_of_an_existing_account_is_refused_naming_it(api, typed, script):
    response = create(api, typed)
    assert response.status_code == 400, script
    message = str(response.json())
    assert f"{typed!r} looks like the existing account" in message
    assert "'lead'" in message or "'ann'" in message
    assert User.objects.count() == 2


def test_mixed_scripts_are_refused_even_without_a_look_alike(api):
    response = create(api, "nеwbie")  # a Cyrillic е, and no account named newbie
    assert response.status_code == 400
    assert "mixes letters of several scripts (Cyrillic, Latin)" in str(response.json())
    assert not User.objects.filter(username__in=["nеwbie", "newbie"]).exists()


@pytest.mark.parametrize("name", ["иван", "ελένη", "김민수", "田中さん", "newbie2"])
def test_a_name_in_one_script_is_accepted(api, name):
    response = create(api, name)
    assert response.status_code == 201 and response.json()["username"] == name


def test_a_full_width_new_name_is_stored_normalised_and_logs_in(api, client):
    response = create(api, "ｎｅｗｂｉｅ２")
    assert response.status_code == 201 and response.json()["username"] == "newbie2"
    user = User.objects.get(username="newbie2")
    user.set_password("a-Long-enough-passphrase-9")
    user.save()
    assert client.login(username="newbie2", password="a-Long-enough-passphrase-9")


def test_members_page_refuses_a_look_alike(campaign, client, lead):
    client.force_login(lead)
    page = client.post(
        "/campaigns/demo/members/", {"action": "add", "username": "lеad", "role": "annotator", "create": "on"}
    )
    assert page.status_code == 422
    assert "looks like the existing account &#x27;lead&#x27;" in page.content.decode()


def test_bulk_list_refuses_two_spellings_of_one_name(campaign, client, lead):
    client.force_login(lead)
    page = client.post(
        "/campaigns/demo/members/",
        {"action": "bulk", "people": "newbie\nNEWBIE\n", "role": "annotator"},
    )
    assert page.status_code == 422 and "is listed twice" in page.content.decode()
    page = client.post(
        "/campaigns/demo/members/",
        {"action": "bulk", "people": "newbie\nnеwbie\n", "role": "annotator"},  # the second with a Cyrillic е
    )
    assert page.status_code == 422
    assert not User.objects.filter(username="newbie").exists()


def test_add_member_command_refuses_a_look_alike(campaign):
    with pytest.raises(CommandError, match="looks like the existing account 'lead'"):
        call_command("add_member", "demo", "lеad", "--role", "lead", "--create", stdout=io.StringIO())
    call_command("add_member", "demo", "ANN", "--role", "lead", stdout=io.StringIO())
    assert Membership.objects.get(campaign=campaign, user__username="ann").role == "lead"


def test_qrels_import_annotator_in_capitals_is_the_existing_account(campaign, lead, annotator):
    run_import(campaign=campaign, data=b"q1 Q0 d1 1 3 bm25\n", filename="r.trec")
    qrels_import(campaign=campaign, data=b"q1 0 d1 2\n", filename="q.qrels", annotator="ANN", imported_by=lead)
    assert not LabelSource.objects.exists()
    assert User.objects.filter(username__iexact="ann").count() == 1
    assert Judgment.objects.get().annotator == annotator


def test_qrels_import_annotator_look_alike_is_refused(campaign, lead):
    run_import(campaign=campaign, data=b"q1 Q0 d1 1 3 bm25\n", filename="r.trec")
    with pytest.raises(FormatError, match="looks like the existing account 'ann'"):
        qrels_import(campaign=campaign, data=b"q1 0 d1 2\n", filename="q.qrels", annotator="аnn", imported_by=lead)
    assert User.objects.count() == 2


def test_model_judge_name_follows_the_rule(campaign):
    judge = model_judge_get_or_create(name="gpt-x", campaign=campaign)
    assert model_judge_get_or_create(name="GPT-X", campaign=campaign) == judge
    with pytest.raises(ValidationError, match="looks like the existing account 'gpt-x'"):
        model_judge_get_or_create(name="gрt-x", campaign=campaign)  # a Cyrillic р


def test_resolve_and_skeleton():
    from judging.usernames import account_name_resolve, username_skeleton

    assert username_skeleton("ＬＥＡＤ２") == username_skeleton("lеad2") == "lead2"
    with pytest.raises(ValidationError):
        account_name_resolve("has space")


@pytest.mark.parametrize(
    ("typed", "what"),
    [
        ("ɑlice", "Latin alpha U+0251 (one script: only the TR39 skeleton sees it)"),
        ("alİce", "capital I with dot above, case-folded to i and an invisible dot"),
        ("aIice", "capital I for the l"),
        ("a1ice", "digit one for the l"),
        ("ａｌｉｃｅ", "full-width: the same account"),
    ],
)
def test_a_tr39_confusable_of_an_existing_account_is_refused_naming_it(api, make_user, typed, what):
    make_user("alice")
    response = create(api, typed)
    if typed == "ａｌｉｃｅ":
        assert response.status_code == 200 and response.json()["username"] == "alice", what
        return
    assert response.status_code == 400, what
    assert f"{typed!r} looks like the existing account 'alice'" in str(response.json())
    assert User.objects.count() == 3  # lead, ann, alice


def test_a_confusable_skeleton_is_tr39s():
    from judging.usernames import username_skeletons

    assert username_skeletons("ɑlice")[0] == username_skeletons("ALICE")[0] == "alice"
    assert "alice" in username_skeletons("aIice") and "alice" in username_skeletons("alİce")
    assert username_skeletons("rn")[0] == username_skeletons("m")[0]  # TR39's m -> rn
    assert username_skeletons("alice")[0] != username_skeletons("alike")[0]
