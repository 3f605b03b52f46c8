"""The leaderboard's request parameters, declared once: the pages, the API and ``manage.py scores`` parse them here.

Each parameter is a ``Param`` (name, type, default, limits, help text). ``LeaderboardQuery.parse`` reads the
ones a caller takes from a mapping of raw text (a query string, command options) and answers every bad one
at once as a ``ParamErrors`` that names the parameter; the API's schema is generated from the same
declarations (``judging.api.serializers.query_serializer``).

Numbers are ASCII, as in the imported files (``judging.formats``): Python's int() also reads "١٠" and "２"
as 10 and 2, so a request could say what no form or file may.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import ProhibitNullCharactersValidator
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

import metrics
from judging.aggregation import POLICIES
from judging.errors import RequestError
from judging.models import Campaign
from judging.scoring import TESTS, Params, threshold_check
from judging.selectors.calibration import label_source_choices
from metrics.measures import JUDGED, MENU

_ASCII_INT = re.compile(r"[+-]?[0-9]+")
_ASCII_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

TRUE_VALUES = frozenset({"1", "true", "on", "yes"})
FALSE_VALUES = frozenset({"0", "false", "off", "no"})


def ascii_int(raw: Any) -> int:
    """A whole number written with the digits 0-9 (surrounding ASCII spaces allowed); ValueError otherwise.
    Python's int() would also take "١٠", "２" and "1_000"."""
    if isinstance(raw, bool):
        raise ValueError(raw)
    if isinstance(raw, int):
        return raw
    text = str(raw).strip(" \t\r\n")
    if not _ASCII_INT.fullmatch(text):
        raise ValueError(raw)
    return int(text)


def ascii_float(raw: Any) -> float:
    """A decimal number written with ASCII digits; ValueError otherwise (float() also takes "١", "nan", "1_0")."""
    if isinstance(raw, bool):
        raise ValueError(raw)
    if isinstance(raw, int | float):
        return float(raw)
    text = str(raw).strip(" \t\r\n")
    if not _ASCII_DECIMAL.fullmatch(text):
        raise ValueError(raw)
    return float(text)


class ParamErrors(RequestError):
    """Bad parameters: ``errors`` maps each parameter's name to its messages (in the reader's language)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        ValueError.__init__(self, "; ".join(f"{name}: {' '.join(messages)}" for name, messages in errors.items()))
        self.errors = errors
        self.field = next(iter(errors), "non_field_errors")


@dataclass(frozen=True)
class Param:
    """One parameter: its type ("int", "bool", "choice" or "text"), default, limits and help text."""

    name: str
    kind: str
    default: Any
    label: str | Promise = ""
    help_text: str = ""
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    max_length: int | None = None

    def parse(self, raw: Any) -> Any:
        """The value of ``raw`` (text as sent); an empty or missing value is the default. ValidationError
        in the reader's language otherwise."""
        if raw is None or (isinstance(raw, str) and raw.strip() == ""):
            return self.default
        if self.kind == "int":
            try:
                value = ascii_int(raw)
            except ValueError:
                raise ValidationError(
                    _("must be a whole number written with the digits 0-9, not %(value)r") % {"value": str(raw)[:40]}
                ) from None
            if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
                raise ValidationError(
                    _("must be between %(low)d and %(high)d") % {"low": self.low, "high": self.high}
                ) from None
            return value
        text = str(raw).strip()
        ProhibitNullCharactersValidator()(text)  # PostgreSQL refuses NUL in text: a 400 here, not a 500 later
        if self.kind == "bool":
            if text.lower() in TRUE_VALUES:
                return True
            if text.lower() in FALSE_VALUES:
                return False
            raise ValidationError(_("must be 1 (true) or 0 (false), not %(value)r") % {"value": text[:40]})
        if self.max_length is not None and len(text) > self.max_length:
            raise ValidationError(
                ngettext("at most %(n)d character", "at most %(n)d characters", n := self.max_length) % {"n": n}
            )
        if self.kind == "choice" and text not in self.choices:
            raise ValidationError(
                _("%(value)r is not one of %(choices)s") % {"value": text[:40], "choices": ", ".join(self.choices)}
            )
        return text


PARAMS: dict[str, Param] = {
    p.name: p
    for p in (
        Param("k", "int", 10, label="k", low=1, high=1000, help_text="Cutoff."),
        Param(
            "gain",
            "choice",
            "linear",
            label=gettext_lazy("nDCG gain"),
            choices=tuple(metrics.GAINS),
            help_text="nDCG gain: the label (linear) or 2^label - 1 (exponential).",
        ),
        Param(
            "threshold",
            "int",
            1,
            label=gettext_lazy("Relevant from grade"),
            low=0,
            high=100,
            help_text="Lowest label that counts as relevant for binary measures.",
        ),
        Param(
            "judged_only",
            "bool",
            False,
            label=gettext_lazy("Condensed (judged only)"),
            help_text="Condensed scoring: drop unjudged documents (trec_eval -J).",
        ),
        Param(
            "policy",
            "choice",
            None,
            label=gettext_lazy("Aggregation"),
            choices=tuple(POLICIES),
            help_text="Score under another aggregation policy (default: the campaign's, i.e. its exported qrels).",
        ),
        Param(
            "labels",
            "text",
            "humans",
            label=gettext_lazy("Label source"),
            max_length=200,
            help_text="Label source: humans (default), model:NAME (a model judge's labels alone), hybrid:NAME "
            "(the human label where one exists, the model judge's elsewhere) or ppi:NAME (prediction-powered: "
            "the model judge's scores corrected by the random audit, with 95% intervals).",
        ),
        Param(
            "per_query",
            "bool",
            False,
            label="per_query",
            help_text="Add each system's per-query values (as trec_eval -q gives them); with format=csv, one row per "
            "system and query. Off by default: the means only. Leads only: annotators get the means.",
        ),
        Param(
            "segment",
            "text",
            None,
            label=gettext_lazy("Segment"),
            max_length=100,
            help_text="Only the queries carrying this tag count in the means (e.g. tail).",
        ),
        Param(
            "measure",
            "text",
            "nDCG",
            label=gettext_lazy("Rank by"),
            max_length=40,
            help_text="The measure the systems are ranked by for `settled` "
            f"({', '.join(base for base in MENU if base != JUDGED)}).",
        ),
        Param(
            "bounds",
            "bool",
            True,
            label="bounds",
            help_text="Add each system's score bounds over its unjudged documents and the settled verdicts.",
        ),
        Param(
            "attribute",
            "text",
            None,
            label="attribute",
            max_length=64,
            help_text="A document attribute (e.g. brand): adds ILD@k and Coverage@k over its values.",
        ),
        Param(
            "micro",
            "bool",
            False,
            label="micro",
            help_text="Add micro-averaged P@k and R@k beside the macro means.",
        ),
        Param(
            "test",
            "choice",
            "randomization",
            label="test",
            choices=tuple(TESTS),
            help_text="randomization (Holm-corrected), ttest (Holm-corrected) or tukey (randomized Tukey HSD).",
        ),
        Param("k_max", "int", None, label="k_max", low=1, high=1000, help_text="Curves: largest k."),
        Param(
            "top_k",
            "int",
            3,
            label=gettext_lazy("Stop at the top"),
            low=1,
            high=100,
            help_text="The stop signal: how many of the top systems must be in a settled or likely order.",
        ),
    )
}

# The parameter sets of the leaderboard's requests.
SCORING = ("k", "gain", "threshold", "judged_only", "policy")
LABELLED = (*SCORING, "labels")
LEADERBOARD = (*LABELLED, "per_query", "segment", "measure", "bounds", "attribute", "micro", "top_k")
SIGNIFICANCE = (*LABELLED, "measure", "test")
TRUST = (*SCORING, "segment", "measure", "k_max")
PAGE = (*LABELLED, "measure", "segment", "top_k")


def label_sources(campaign: Campaign) -> list[str]:
    """The label sources of this campaign: humans, and model:NAME / hybrid:NAME for each of its model judges."""
    return [value for value, _label in label_source_choices(campaign=campaign)]


@dataclass(frozen=True)
class LeaderboardQuery:
    """What a leaderboard request asks for: the scoring parameters (``scoring.Params``) and the view's."""

    k: int = 10
    gain: str = "linear"
    threshold: int = 1
    judged_only: bool = False
    policy: str | None = None
    labels: str = "humans"
    segment: str | None = None
    per_query: bool = False
    measure: str = "nDCG"
    bounds: bool = True
    attribute: str | None = None
    micro: bool = False
    test: str = "randomization"
    k_max: int | None = None
    top_k: int = 3

    @classmethod
    def parse(
        cls,
        data: Mapping[str, Any],
        *,
        campaign: Campaign,
        names: Iterable[str] = LEADERBOARD,
        top_grade: int | None = None,
        sources: list[str] | None = None,
    ) -> LeaderboardQuery:
        """The parameters ``names`` read from ``data``; the others keep their defaults.

        ``labels`` must name one of the campaign's label sources (``sources``, read when not given): a
        model judge of another campaign is answered exactly as a name nobody has. ``top_grade``: a threshold
        asked for may not exceed it (the page's limit, which the API holds annotators to). ParamErrors
        names every bad parameter."""
        values: dict[str, Any] = {}
        errors: dict[str, list[str]] = {}
        for name in names:
            try:
                values[name] = PARAMS[name].parse(data.get(name))
            except ValidationError as exc:
                errors[name] = exc.messages
        labels = values.get("labels")
        if labels not in (None, "humans"):
            sources = sources or label_sources(campaign)
            if labels not in sources:
                errors["labels"] = [_label_error(str(labels), sources)]
        asked = str(data.get("threshold") or "").strip()
        if top_grade is not None and asked and "threshold" in values:
            try:
                threshold_check(values["threshold"], top=top_grade)
            except ValidationError as exc:
                errors["threshold"] = exc.messages
        if errors:
            raise ParamErrors(errors)
        return cls(**values)

    def params(self) -> Params:
        """The scoring parameters."""
        return Params.from_settings(self.settings())

    def settings(self, *names: str) -> dict[str, Any]:
        """The values by name (``names``, or every one)."""
        wanted = names or [f.name for f in fields(self)]
        return {name: getattr(self, name) for name in wanted}

    def but(self, **changes: Any) -> LeaderboardQuery:
        return replace(self, **changes)


def _label_error(labels: str, sources: list[str]) -> str:
    kind, sep, name = labels.partition(":")
    if sep and kind == "ppi" and name.strip():
        # The prediction-powered leaderboard names the judges it can take (this campaign's only).
        judges = [s.partition(":")[2] for s in sources if s.startswith("ppi:")]
        return _("no model judge named %(name)r; this campaign's model judges: %(judges)s") % {
            "name": name.strip()[:100],
            "judges": ", ".join(judges) if judges else _("none (run a model judge first)"),
        }
    if sep and kind in ("model", "hybrid") and name.strip():
        # The same words whether the judge exists in another campaign or nowhere.
        return _("no model judge named %(name)r") % {"name": name.strip()[:100]}
    return _("must be humans, model:NAME, hybrid:NAME or ppi:NAME, not %(value)r") % {"value": labels[:40]}
