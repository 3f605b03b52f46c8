"""What a lead configures about a model judge, and what its runs measure beside its grades: the prompt
template (versioned, with the mapping of the model's own scale onto the campaign's grades), the answers of
a pair asked several times (self-consistency), and the query-word-stuffing canary's probes.

Registered through judging.models (imported at its end); split out to keep each module to one concern.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _


class JudgeTemplate(models.Model):
    """One version of a model judge's prompt for one campaign. Never edited: a change is a new version, and
    each model judgment names the version it was made with (``Judgment.template``).

    ``text`` is the system message as sent (guidelines, scale and few-shot examples written in);
    ``example_pairs`` the pairs whose human judgments it quotes. ``scale_low``..``scale_high``, when set, is
    the model's own scale (e.g. 0-100) and ``thresholds`` (ascending, one per campaign grade above the
    lowest) map an answer onto the campaign's grades: the answer reaches grade i when it is at least the
    i-th threshold.
    """

    campaign = models.ForeignKey("judging.Campaign", on_delete=models.CASCADE, related_name="judge_templates")
    judge = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    version = models.PositiveIntegerField(_("version"))
    text = models.TextField(_("prompt (system message)"))
    example_pairs = models.JSONField(_("pairs quoted as examples"), default=list, blank=True)
    scale_low = models.IntegerField(_("model's lowest answer"), null=True, blank=True)
    scale_high = models.IntegerField(_("model's highest answer"), null=True, blank=True)
    thresholds = models.JSONField(_("thresholds onto the campaign's grades"), default=list, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        verbose_name = _("judge prompt template")
        verbose_name_plural = _("judge prompt templates")
        ordering = ["campaign", "judge", "version"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "judge", "version"], name="judge_template_unique_version"),
            models.CheckConstraint(
                condition=(Q(scale_low__isnull=True) & Q(scale_high__isnull=True))
                | (Q(scale_low__isnull=False) & Q(scale_high__gt=F("scale_low"))),
                name="judge_template_scale_ordered",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.judge} v{self.version} on {self.campaign}"

    @property
    def mapped(self) -> bool:
        return self.scale_low is not None


def answer_line(template: JudgeTemplate | None) -> str:
    """How the model must answer, added after the template by the code (the parser reads exactly this)."""
    if template is not None and template.scale_low is not None:
        what = f"<a number from {template.scale_low} to {template.scale_high}>"
    else:
        what = "<one of the grades>"
    return f'Answer with JSON only: {{"grade": {what}, "reason": "<one short sentence>"}}'


class ModelConsistency(models.Model):
    """A pair asked ``repeats`` times in one run (``judge_with_model --repeat N``): the grades (on the
    campaign's scale, None for an answer that could not be read), and how far they agree: ``agreement``
    is the share of the N(N-1)/2 pairs of answers that agree, ``unanimous`` whether all N are equal. The
    latest run replaces the row. The judge's doubt about the pair is 1 - ``agreement``."""

    pair = models.ForeignKey("judging.Pair", on_delete=models.CASCADE, related_name="model_consistency")
    judge = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    template = models.ForeignKey(JudgeTemplate, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    answers = models.JSONField(_("grades of the repeated answers"))
    repeats = models.PositiveSmallIntegerField(_("times asked"))
    agreement = models.FloatField(_("share of agreeing answer pairs"))
    unanimous = models.BooleanField(_("all answers equal"))
    temperature = models.FloatField(_("temperature"))
    created_at = models.DateTimeField(_("asked"), auto_now=True)

    class Meta:
        verbose_name = _("model self-consistency")
        verbose_name_plural = _("model self-consistency")
        ordering = ["pair", "judge"]
        constraints = [
            models.UniqueConstraint(fields=["pair", "judge"], name="model_consistency_unique_pair_judge"),
            models.CheckConstraint(
                condition=Q(agreement__gte=0) & Q(agreement__lte=1), name="model_consistency_agreement_share"
            ),
            models.CheckConstraint(condition=Q(repeats__gte=2), name="model_consistency_repeats_at_least_2"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} on {self.pair}: {self.answers}"


class CanaryProbe(models.Model):
    """One query-word-stuffing probe (``judge_with_model --canary``): a pair people graded not relevant,
    asked as it is (``original_grade``) and with the query's words written into the document
    (``stuffed_grade``). The stuffed text exists only in the prompt: it is never a document, never in the
    pool, never on a leaderboard. The latest run replaces the row."""

    pair = models.ForeignKey("judging.Pair", on_delete=models.CASCADE, related_name="+")
    judge = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    template = models.ForeignKey(JudgeTemplate, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    original_grade = models.SmallIntegerField(_("grade of the document as it is"), null=True, blank=True)
    stuffed_grade = models.SmallIntegerField(_("grade with the query's words inserted"), null=True, blank=True)
    created_at = models.DateTimeField(_("asked"), auto_now=True)

    class Meta:
        verbose_name = _("canary probe")
        verbose_name_plural = _("canary probes")
        ordering = ["pair", "judge"]
        constraints = [models.UniqueConstraint(fields=["pair", "judge"], name="canary_probe_unique_pair_judge")]

    def __str__(self) -> str:
        return f"{self.judge} on {self.pair}: {self.original_grade} -> {self.stuffed_grade}"
