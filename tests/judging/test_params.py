"""judging.params: the leaderboard's parameters, parsed once for the pages, the API and ``manage.py scores``."""

from __future__ import annotations

import pytest

from judging import params
from judging.params import LeaderboardQuery, ParamErrors, ascii_float, ascii_int
from judging.scoring import Params

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("raw", "value"), [("10", 10), (" 7 ", 7), ("-3", -3), ("+4", 4), (12, 12)])
def test_ascii_int_reads_ascii_whole_numbers(raw, value):
    assert ascii_int(raw) == value


@pytest.mark.parametrize("raw", ["١٠", "１０", "۲", "1_000", "1.5", "", "ten", "²", True])
def test_ascii_int_refuses_everything_else(raw):
    with pytest.raises(ValueError):
        ascii_int(raw)


@pytest.mark.parametrize("raw", ["٢", "nan", "inf", "1_0", "２.５"])
def test_ascii_float_refuses_what_float_would_take(raw):
    with pytest.raises(ValueError):
        ascii_float(raw)


def test_parse_fills_the_defaults(campaign):
    query = LeaderboardQuery.parse({}, campaign=campaign)
    assert query == LeaderboardQuery()
    assert query.params() == Params()


def test_parse_reads_the_named_parameters_only(campaign):
    data = {"k": "5", "gain": "exponential", "judged_only": "yes", "test": "ttest", "per_query": "0"}
    query = LeaderboardQuery.parse(data, campaign=campaign, names=params.SCORING)
    assert (query.k, query.gain, query.judged_only) == (5, "exponential", True)
    assert (query.test, query.per_query) == ("randomization", False)  # not in SCORING: defaults


def test_parse_names_every_bad_parameter_at_once(campaign):
    data = {"k": "0", "threshold": "١", "gain": "cubic", "judged_only": "maybe", "labels": "robots"}
    with pytest.raises(ParamErrors) as caught:
        LeaderboardQuery.parse(data, campaign=campaign)
    errors = caught.value.errors
    assert set(errors) == {"k", "threshold", "gain", "judged_only", "labels"}
    assert errors["k"] == ["must be between 1 and 1000"]
    assert errors["threshold"] == ["must be a whole number written with the digits 0-9, not '١'"]
    assert errors["gain"] == ["'cubic' is not one of linear, exponential"]
    assert errors["labels"] == ["must be humans, model:NAME, hybrid:NAME or ppi:NAME, not 'robots'"]


def test_parse_holds_the_threshold_to_the_top_grade_only_when_asked_for(campaign):
    with pytest.raises(ParamErrors) as caught:
        LeaderboardQuery.parse({"threshold": "3"}, campaign=campaign, top_grade=2)
    assert caught.value.errors == {"threshold": ["must be between 0 and 2, the top grade of this campaign's scale"]}
    assert LeaderboardQuery.parse({}, campaign=campaign, top_grade=0).threshold == 1


def test_parse_takes_only_the_campaigns_own_label_sources(campaign):
    sources = ["humans", "model:bot", "hybrid:bot"]
    assert LeaderboardQuery.parse({"labels": "hybrid:bot"}, campaign=campaign, sources=sources).labels == "hybrid:bot"
    with pytest.raises(ParamErrors) as caught:
        LeaderboardQuery.parse({"labels": "model:elsewhere"}, campaign=campaign, sources=sources)
    assert caught.value.errors == {"labels": ["no model judge named 'elsewhere'"]}
