"""A model judge's prompt template per campaign (versioned) and the mapping of a model's own scale onto the
campaign's grades.

The template is the system message, written out in full: the campaign's guidelines, its scale and a few
examples quoted from its own human judgments that carry a note. A lead edits it in the browser or through
the API; each save is a new version (``JudgeTemplate``) and each model judgment names the version it was
made with. The line that tells the model how to answer is added by the code (it must match the parser),
after the template: ``judge_models.answer_line``.

A model that answers on another scale (0-3, 0-100) has ``scale_low``..``scale_high`` and ascending
``thresholds``, one per campaign grade above the lowest: an answer a maps to the i-th grade when i
thresholds are at most a. An answer off the model's scale leaves the pair unjudged (the job logs why).
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User as Account
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.translation import gettext as _

from judging.models import AnnotatorProfile, Campaign, JudgeTemplate, Judgment

logger = logging.getLogger(__name__)

TEMPLATE_MAX_CHARS = 20_000
EXAMPLE_CHARS = 400  # of an example document's text quoted in the prompt
EXAMPLES_PER_GRADE = 1
SCALE_LIMIT = 1_000_000  # the model's scale lies within +-this (a bound on typing mistakes, not a rule)


# --------------------------------------------------------------------------- the scale mapping


@dataclass(frozen=True)
class ScaleMapping:
    """The model's scale ``low``..``high`` and the thresholds onto ``grades`` (the campaign's values,
    ascending); ``None`` for a model that answers in the campaign's grades."""

    low: int
    high: int
    thresholds: tuple[float, ...]
    grades: tuple[int, ...]

    def grade(self, answer: float) -> int | None:
        """The campaign grade of one answer; None when the answer is off the model's scale."""
        if not self.low <= answer <= self.high:
            return None
        return self.grades[sum(1 for t in self.thresholds if t <= answer)]


def scale_mapping(template: JudgeTemplate | None, grades: Sequence[int]) -> ScaleMapping | None:
    if template is None or template.scale_low is None or template.scale_high is None:
        return None
    return ScaleMapping(
        template.scale_low, template.scale_high, tuple(float(t) for t in template.thresholds), tuple(grades)
    )


def mapping_check(*, low: int | None, high: int | None, thresholds: Sequence[Any], grades: Sequence[int]) -> None:
    """ValidationError naming the field when the model's scale and thresholds do not map onto ``grades``."""
    if low is None and high is None:
        if thresholds:
            raise ValidationError({"thresholds": [_("Thresholds need the model's scale (lowest and highest answer).")]})
        return
    if low is None or high is None:
        field = "scale_low" if low is None else "scale_high"
        raise ValidationError({field: [_("Give both ends of the model's scale, or neither.")]})
    for field, value in (("scale_low", low), ("scale_high", high)):
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > SCALE_LIMIT:
            raise ValidationError({field: [_("A whole number between -1000000 and 1000000.")]})
    if high <= low:
        raise ValidationError({"scale_high": [_("The highest answer must be above the lowest.")]})
    need = len(grades) - 1
    if len(thresholds) != need:
        raise ValidationError(
            {
                "thresholds": [
                    _("Give %(n)d thresholds, one for each campaign grade above the lowest, in ascending order.")
                    % {"n": need}
                ]
            }
        )
    values = []
    for t in thresholds:
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise ValidationError({"thresholds": [_("Thresholds are numbers.")]})
        values.append(float(t))
    if any(b <= a for a, b in zip(values, values[1:], strict=False)) or values[0] <= low or values[-1] > high:
        raise ValidationError(
            {
                "thresholds": [
                    _("Thresholds must rise strictly, above %(low)s and up to %(high)s.") % {"low": low, "high": high}
                ]
            }
        )


def thresholds_parse(text: str) -> list[float]:
    """Thresholds typed into a form: numbers separated by commas or spaces (ASCII digits only)."""
    out: list[float] = []
    for part in re.split(r"[,\s]+", text.strip()):
        if not part:
            continue
        if not re.fullmatch(r"-?[0-9]+(?:\.[0-9]+)?", part):
            raise ValidationError({"thresholds": [_("%(value)r is not a number.") % {"value": part[:20]}]})
        out.append(float(part) if "." in part else int(part))
    return out


# --------------------------------------------------------------------------- building a template


def examples_pick(*, campaign: Campaign, per_grade: int = EXAMPLES_PER_GRADE) -> list[dict[str, Any]]:
    """Few-shot examples from the campaign's own human judgments with a note: per grade, the first
    ``per_grade`` judgments (by id) whose grade is the pair's label, so the example shows a grade people
    settled on, with the annotator's note as the reason."""
    if per_grade < 1:
        return []
    rows = (
        Judgment.objects.filter(pair__campaign=campaign, unsure=False, grade__value=F("pair__label"))
        .exclude(note="")
        .exclude(annotator_id__in=AnnotatorProfile.model_user_ids())
        .exclude(annotator__label_source__isnull=False)
        .order_by("grade__value", "id")
        .values_list(
            "pair_id", "grade__value", "note", "pair__query__text", "pair__document__title", "pair__document__text"
        )
    )
    picked: dict[int, list[dict[str, Any]]] = {}
    n_grades = campaign.grades.count()
    for pair_id, grade, note, query, title, text in rows.iterator(chunk_size=200):
        bucket = picked.setdefault(grade, [])
        if len(bucket) < per_grade and all(e["pair"] != pair_id for b in picked.values() for e in b):
            bucket.append({"pair": pair_id, "grade": grade, "note": note, "query": query, "title": title, "text": text})
        if len(picked) == n_grades and all(len(b) >= per_grade for b in picked.values()):
            break
    return [e for g in sorted(picked) for e in picked[g]]


def template_text_build(
    *, campaign: Campaign, examples: Sequence[dict[str, Any]], low: int | None = None, high: int | None = None
) -> str:
    """The default system message: the role, the scale, the guidelines and the examples."""
    scale = list(campaign.grades.order_by("value").values_list("value", "name", "description"))
    steps = "\n".join(f"{v} = {name}" + (f": {desc}" if desc else "") for v, name, desc in scale)
    text = "You judge how relevant a document is to a search query, as a careful human assessor would.\n"
    if low is None:
        text += f"Grades:\n{steps}\n"
    else:
        text += (
            f"Answer with a number from {low} (not relevant at all) to {high} (exactly what the searcher wanted).\n"
            f"For reference, the grades people give:\n{steps}\n"
        )
    if campaign.guidelines.strip():
        text += f"Guidelines:\n{campaign.guidelines.strip()}\n"
    if examples:
        names = {v: n for v, n, _d in scale}
        text += "Examples graded by people:\n"
        for e in examples:
            doc = (e["title"] + " - " if e["title"] else "") + e["text"][:EXAMPLE_CHARS]
            text += (
                f"- Query: {e['query']}\n  Document: {doc}\n"
                f"  People's grade: {e['grade']} ({names.get(e['grade'], '')}). Why: {e['note'].strip()}\n"
            )
    return text


def template_is_automatic(*, campaign: Campaign, template: JudgeTemplate) -> bool:
    """Whether ``template``'s text is the one RelJudge would build for it (nobody edited it)."""
    examples = [e for e in examples_pick(campaign=campaign) if e["pair"] in set(template.example_pairs)]
    built = template_text_build(campaign=campaign, examples=examples, low=template.scale_low, high=template.scale_high)
    return template.text == built.strip() + "\n" or template.text == built


# --------------------------------------------------------------------------- versions


def judge_template_current(*, campaign: Campaign, judge: Account, create: bool = True) -> JudgeTemplate | None:
    """The judge's latest template version for ``campaign``; the first one is built (version 1, from the
    guidelines, the scale and examples) when it has none and ``create``."""
    current = JudgeTemplate.objects.filter(campaign=campaign, judge=judge).order_by("-version").first()
    if current is not None or not create:
        return current
    examples = examples_pick(campaign=campaign)
    template, _created = _version_add(
        campaign=campaign,
        judge=judge,
        text=template_text_build(campaign=campaign, examples=examples),
        example_pairs=[e["pair"] for e in examples],
        low=None,
        high=None,
        thresholds=[],
        user=None,
        first=True,
    )
    return template


def judge_template_draft(*, campaign: Campaign, judge: Account) -> JudgeTemplate:
    """What the judge's first template version will be (built from the guidelines, the scale and examples), not
    saved: the pages and the API show it on a GET, which writes nothing; the first run or a lead's save stores it."""
    examples = examples_pick(campaign=campaign)
    return JudgeTemplate(
        campaign=campaign,
        judge=judge,
        version=1,
        text=template_text_build(campaign=campaign, examples=examples),
        example_pairs=[e["pair"] for e in examples],
        scale_low=None,
        scale_high=None,
        thresholds=[],
        created_by=None,
        created_at=timezone.now(),
    )


def judge_template_save(
    *,
    campaign: Campaign,
    judge: Account,
    text: str | None,
    scale_low: int | None,
    scale_high: int | None,
    thresholds: Sequence[Any],
    user: Account | None,
    rebuild: bool = False,
) -> tuple[JudgeTemplate, bool]:
    """A new version of the judge's template, and whether it is new. ``rebuild`` (or an empty ``text``) writes
    the text afresh from the guidelines, the scale and examples; otherwise ``text`` is taken as the lead wrote
    it. The same template and mapping as the current version saves nothing and returns it (False), also when
    identical saves race: the comparison is made under the judge's row lock. ValidationError naming the field
    (``text``, ``scale_low``, ``scale_high``, ``thresholds``)."""
    grades = list(campaign.grades.order_by("value").values_list("value", flat=True))
    mapping_check(low=scale_low, high=scale_high, thresholds=thresholds, grades=grades)
    current = judge_template_current(campaign=campaign, judge=judge, create=False)
    examples: list[int] = list(current.example_pairs) if current else []
    if rebuild or not (text or "").strip():
        picked = examples_pick(campaign=campaign)
        text = template_text_build(campaign=campaign, examples=picked, low=scale_low, high=scale_high)
        examples = [e["pair"] for e in picked]
    assert text is not None
    text = text.replace("\r\n", "\n").strip() + "\n"
    if len(text) > TEMPLATE_MAX_CHARS:
        raise ValidationError({"text": [_("The prompt is longer than %(n)d characters.") % {"n": TEMPLATE_MAX_CHARS}]})
    if "\x00" in text:
        raise ValidationError({"text": [_("The prompt holds a NUL character.")]})
    return _version_add(
        campaign=campaign,
        judge=judge,
        text=text,
        example_pairs=examples,
        low=scale_low,
        high=scale_high,
        thresholds=list(thresholds),
        user=user,
    )


@transaction.atomic
def _version_add(
    *,
    campaign: Campaign,
    judge: Account,
    text: str,
    example_pairs: list[int],
    low: int | None,
    high: int | None,
    thresholds: list[Any],
    user: Account | None,
    first: bool = False,
) -> tuple[JudgeTemplate, bool]:
    """The new version (True), or the current one when it is the same template (False); ``first``: only when
    the judge has none (two first requests at once build one version 1)."""
    # Lock the judge's row: two leads saving at once get versions n+1 and n+2, not one integrity error, and
    # eight identical saves at once make one version (each compares with the latest under the lock).
    type(judge).objects.select_for_update().filter(pk=judge.pk).first()
    last = JudgeTemplate.objects.filter(campaign=campaign, judge=judge).order_by("-version").first()
    if last is not None and (
        first
        or (
            last.text == text
            and (last.scale_low, last.scale_high) == (low, high)
            and [float(t) for t in last.thresholds] == [float(t) for t in thresholds]
        )
    ):
        return last, False
    template = JudgeTemplate.objects.create(
        campaign=campaign,
        judge=judge,
        version=(last.version if last else 0) + 1,
        text=text,
        example_pairs=example_pairs,
        scale_low=low,
        scale_high=high,
        thresholds=json.loads(json.dumps(thresholds)),
        created_by=user,
    )
    logger.info("judge %s on %s: prompt template version %d", judge.get_username(), campaign.slug, template.version)
    return template, True
