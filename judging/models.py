"""Campaigns, queries, documents, systems, runs, pool pairs and judgments."""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as Account
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from judging.aggregation import Policy
from judging.formats import (
    DOCID_MAX_LENGTH,
    ONLINE_METRIC_MAX_LENGTH,
    QID_MAX_LENGTH,
    SYSTEM_NAME_MAX_LENGTH,
    URL_MAX_LENGTH,
)

if TYPE_CHECKING:
    from judging.figures import JudgeProgress

# Whoever a request or a script acts as: services and selectors take the logged-in user or the anonymous one.
# Account is settings.AUTH_USER_MODEL (Django's own, which is what django-stubs types request.user with).
User: TypeAlias = Account | AnonymousUser

DEFAULT_SCALE: list[dict[str, Any]] = [
    {
        "value": 0,
        "name": "Not relevant",
        "description": "The document does not help with the query at all, or is about something else.",
    },
    {
        "value": 1,
        "name": "Partially relevant",
        "description": "The document is on topic and partly answers the query, or answers a nearby need.",
    },
    {
        "value": 2,
        "name": "Highly relevant",
        "description": "The document is exactly what the searcher wanted.",
    },
]


class Campaign(models.Model):
    """One judging project: its queries, documents, systems, grading scale, guidelines and pool depth."""

    Aggregation = Policy  # the policies live with the code that applies them

    slug = models.SlugField(_("slug"), max_length=64, unique=True)
    name = models.CharField(_("name"), max_length=200)
    description = models.TextField(_("description"), blank=True)
    guidelines = models.TextField(_("guidelines"), blank=True, help_text=_("Shown beside every pair while judging."))
    pool_depth = models.PositiveIntegerField(
        _("pool depth"),
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(10_000)],
        help_text=_("Each run's top k documents per query are pooled for judging."),
    )
    redundancy = models.PositiveSmallIntegerField(
        _("annotators per pair"), default=1, validators=[MinValueValidator(1), MaxValueValidator(5)]
    )
    overlap_percent = models.PositiveSmallIntegerField(
        _("overlap sample (%)"),
        default=0,
        validators=[MaxValueValidator(100)],
        help_text=_("Share of pairs judged by every annotator, to measure agreement (e.g. 10)."),
    )
    aggregation = models.CharField(
        _("aggregation policy"), max_length=16, choices=Aggregation.choices, default=Aggregation.MEDIAN
    )

    class QueueMode(models.TextChoices):
        SHUFFLED = "shuffled", _("Query by query, in each annotator's own order")
        MATTER = "matter", _("Pairs that matter most: those that can still change the ranking")
        MTC = "mtc", _("Minimal test collections: the judgment that most narrows the open comparisons")
        BANDIT = "bandit", _("Bandit: the next document of the system finding the most relevant ones")
        AUDIT = "audit", _("Audit: every pair of the queries drawn at random for the prediction-powered leaderboard")
        DOUBTFUL = "doubtful", _("The model's doubtful pairs: those the model judges are least sure of")
        HYBRID = (
            "hybrid",
            _("Hybrid: people judge where their label would move the ranking most, a model judge the rest"),
        )

    queue_mode = models.CharField(
        _("judging queue"),
        max_length=16,
        choices=QueueMode.choices,
        default=QueueMode.MTC,
        help_text=_("How the queue picks each annotator's next pair; no mode shows annotators the systems."),
    )
    # "Judge what is new first" (judging.engine_models.QueueFocus): the queue serves these pairs before any other.
    queue_focus = models.OneToOneField(
        "judging.QueueFocus",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        editable=False,
        related_name="campaign",
        verbose_name=_("judge first"),
    )
    leaderboard_visible_to_annotators = models.BooleanField(
        _("annotators may see the leaderboard"),
        default=False,
        help_text=_("Off by default: knowing which system is winning biases judgments."),
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("created by"),
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )

    class Meta:
        verbose_name = _("campaign")
        verbose_name_plural = _("campaigns")
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=Q(pool_depth__gte=1), name="campaign_pool_depth_positive"),
            models.CheckConstraint(
                condition=Q(redundancy__gte=1) & Q(redundancy__lte=5), name="campaign_redundancy_1_to_5"
            ),
            models.CheckConstraint(condition=Q(overlap_percent__lte=100), name="campaign_overlap_percent_max_100"),
        ]

    def __str__(self) -> str:
        return self.name or self.slug


class Grade(models.Model):
    """One step of a campaign's grading scale (default 0/1/2)."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="grades")
    value = models.SmallIntegerField(_("value"))
    name = models.CharField(_("name"), max_length=100)
    description = models.TextField(_("description"), blank=True)
    examples = models.TextField(_("examples"), blank=True)

    class Meta:
        verbose_name = _("grade")
        verbose_name_plural = _("grades")
        ordering = ["campaign", "value"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "value"], name="grade_unique_value_per_campaign"),
            models.CheckConstraint(condition=Q(value__gte=0) & Q(value__lte=100), name="grade_value_0_to_100"),
        ]

    def __str__(self) -> str:
        return f"{self.value} – {self.name}"


class Membership(models.Model):
    """A user's role in one campaign. Superusers are leads everywhere without a membership."""

    class Role(models.TextChoices):
        ANNOTATOR = "annotator", _("Annotator")
        LEAD = "lead", _("Lead")

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(_("role"), max_length=16, choices=Role.choices, default=Role.ANNOTATOR)
    # A model judge's description as this campaign knows it: a judge serves many campaigns, and one
    # campaign's lead must not rewrite what another's reads.
    description = models.TextField(
        _("description"), blank=True, help_text=_("For a model judge: which model and prompt produced its labels here.")
    )
    created_at = models.DateTimeField(_("added"), auto_now_add=True)

    class Meta:
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        ordering = ["campaign", "user"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "user"], name="membership_unique_user_per_campaign"),
        ]

    def __str__(self) -> str:
        return f"{self.user} – {self.role} of {self.campaign}"


class Query(models.Model):
    """A topic: the external qid, what the user typed, and what counts as relevant."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="queries")
    qid = models.CharField("qid", max_length=QID_MAX_LENGTH)
    text = models.TextField(_("text"))
    description = models.TextField(_("description"), blank=True)
    is_stub = models.BooleanField(
        _("stub"), default=False, help_text=_("Created by a run or qrels import before its topic was imported.")
    )
    # Bumped whenever a label of one of this query's pairs changes: the leaderboard rescored only
    # queries whose version moved since its cache was filled.
    labels_version = models.PositiveBigIntegerField(_("labels version"), default=0)

    class Meta:
        verbose_name = _("query")
        verbose_name_plural = _("queries")
        ordering = ["campaign", "qid"]
        constraints = [models.UniqueConstraint(fields=["campaign", "qid"], name="query_unique_qid_per_campaign")]

    def __str__(self) -> str:
        return f"{self.qid}: {self.text[:60]}"


class QueryTag(models.Model):
    """A segment a query belongs to (head/torso/tail, a category...): the leaderboard filters on it.

    A row per (query, tag) rather than a JSON list on Query: the leaderboard asks "which queries carry
    tag t" on every filtered request, an indexed lookup here and a JSON scan (unsupported on SQLite) there.
    """

    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="tags")
    tag = models.CharField(_("tag"), max_length=100)

    class Meta:
        verbose_name = _("query tag")
        verbose_name_plural = _("query tags")
        ordering = ["query", "tag"]
        constraints = [models.UniqueConstraint(fields=["query", "tag"], name="query_tag_unique_per_query")]
        indexes = [models.Index(fields=["tag", "query"], name="query_tag_tag_idx")]

    def __str__(self) -> str:
        return self.tag


class Document(models.Model):
    """A document to judge. Its text may contain HTML and is never rendered unescaped."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="documents")
    docid = models.CharField("docid", max_length=DOCID_MAX_LENGTH)
    title = models.TextField(_("title"), blank=True)
    text = models.TextField(_("text"), blank=True)
    url = models.URLField(_("URL"), max_length=URL_MAX_LENGTH, blank=True)
    attributes = models.JSONField(
        _("attributes"),
        default=dict,
        blank=True,
        help_text=_(
            'Facets such as {"brand": "...", "category": "..."}: the leaderboard measures diversity over them.'
        ),
    )
    is_stub = models.BooleanField(
        _("stub"), default=False, help_text=_("Created by a run or qrels import before the document was imported.")
    )

    class Meta:
        verbose_name = _("document")
        verbose_name_plural = _("documents")
        ordering = ["campaign", "docid"]
        constraints = [models.UniqueConstraint(fields=["campaign", "docid"], name="document_unique_docid_per_campaign")]

    def __str__(self) -> str:
        return self.docid


class System(models.Model):
    """A ranker being compared; its run is stored as one Ranking row per query."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="systems")
    name = models.CharField(_("name"), max_length=SYSTEM_NAME_MAX_LENGTH)
    source = models.CharField(_("imported from"), max_length=255, blank=True)
    imported_at = models.DateTimeField(_("imported"), auto_now_add=True)
    entries = models.PositiveIntegerField(_("ranked entries"), default=0)
    fingerprint = models.CharField(
        _("content fingerprint"),
        max_length=64,
        blank=True,
        help_text=_("Hash of the imported rankings: re-importing the same run is a no-op."),
    )

    class Meta:
        verbose_name = _("system")
        verbose_name_plural = _("systems")
        ordering = ["campaign", "name"]
        constraints = [models.UniqueConstraint(fields=["campaign", "name"], name="system_unique_name_per_campaign")]

    def __str__(self) -> str:
        return self.name


class Ranking(models.Model):
    """One system's ranked list for one query, stored compactly.

    Runs are fixed once imported while labels change all the time, so a ranking is one row holding
    the document primary keys (int64) and scores (float64) as packed arrays, already in trec_eval
    order. Scoring a 20 x 5,000 x 100 campaign reads 100,000 small rows instead of 10M.
    """

    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="rankings")
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="rankings")
    doc_ids = models.BinaryField(_("document ids (int64, trec order)"))
    scores = models.BinaryField(_("scores (float64, trec order)"))
    length = models.PositiveIntegerField(_("length"))

    class Meta:
        verbose_name = _("ranking")
        verbose_name_plural = _("rankings")
        ordering = ["system", "query"]
        constraints = [models.UniqueConstraint(fields=["system", "query"], name="ranking_unique_system_query")]

    def __str__(self) -> str:
        return f"{self.system_id}/{self.query_id} ({self.length})"

    def score_array(self) -> np.ndarray:
        return np.frombuffer(bytes(self.scores), dtype=np.float64)


# Public pair ids: random integers in [2**40, 2**53). Row ids follow the order runs were imported in, so a
# pair added by the run imported last has a high row id: shown to annotators, ids would tell which system
# found a pair. The range never meets row ids (a row id sent where a public id belongs is simply not found)
# and stays within the integers JavaScript and JSON clients hold exactly.
PUBLIC_ID_MIN = 2**40
PUBLIC_ID_MAX = 2**53


def pair_public_id() -> int:
    """A fresh random public id for a pair (unique: a clash, about one in 10**9 per pair, fails the insert)."""
    return PUBLIC_ID_MIN + secrets.randbelow(PUBLIC_ID_MAX - PUBLIC_ID_MIN)


class Pair(models.Model):
    """A (query, document) pair, judged once per annotator however many systems returned it.

    ``public_id`` is the id annotators, URLs, forms and the API see; the row id stays internal.
    """

    # Not indexed alone: pair_queue_idx leads with the campaign, pair_query_level with the query. Every
    # judgment updates its pair's row (label and judgment count, both indexed: no HOT update), so each index
    # of the table takes an entry a judgment.
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="pairs", db_index=False)
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="pairs", db_index=False)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="pairs")
    pooled = models.BooleanField(
        _("in the pool"),
        default=True,
        help_text=_("False for pairs that exist only because imported qrels labelled them."),
    )
    # The label the scorer uses, kept in step with the judgments by the services (aggregated under
    # the campaign's policy, or the lead's adjudication). NULL = unjudged.
    label = models.SmallIntegerField(_("label"), null=True, blank=True)
    adjudicated = models.BooleanField(_("adjudicated by a lead"), default=False)
    gold_label = models.SmallIntegerField(
        _("gold label"),
        null=True,
        blank=True,
        help_text=_("Set by a lead in advance to measure each annotator's accuracy; not shown to annotators."),
    )
    judgment_count = models.PositiveSmallIntegerField(_("judgments"), default=0)
    public_id = models.BigIntegerField(
        _("public id"),
        default=pair_public_id,
        unique=True,
        editable=False,
        help_text=_("Random: what annotators, URLs and the API call the pair (the row id would reveal import order)."),
    )
    # Shown to leads only: it says when the run that pooled the pair was imported.
    created_at = models.DateTimeField(_("added"), auto_now_add=True)

    # Never stored: set by the judging page's reads on the pair they hand out (selectors.pair_next(lock=True),
    # selectors.judgment_following_pair): the annotator's progress, and for a pair of their history their
    # judgment of it and the public id of the pair they judged after it.
    progress: JudgeProgress
    judgment_of_annotator: Judgment
    next_in_history: int | None

    class Meta:
        verbose_name = _("pair")
        verbose_name_plural = _("pairs")
        ordering = ["campaign", "query", "document"]
        constraints = [
            models.UniqueConstraint(fields=["query", "document"], name="pair_unique_query_document"),
        ]
        indexes = [
            models.Index(fields=["campaign", "pooled", "judgment_count"], name="pair_queue_idx"),
            # A query's pairs at a judgment level: where the queue looks for the next query with an open pair at a
            # level, each query's probe finds its pairs at that level (none, once the query is done) where it read
            # every pair of the query (27-88 ms of PostgreSQL's CPU a probe at 200 queries of 60 pairs).
            models.Index(fields=["query", "judgment_count"], name="pair_query_level"),
            # The labelled pairs alone, by campaign and by query: what the scores read (scoring.cube.labels_for), a
            # campaign's labels on a worker's first leaderboard and a judged query's after each judgment, without
            # walking the unlabelled pairs of the pool (100,000 rows read for a few hundred labels).
            models.Index(fields=["campaign"], condition=models.Q(label__isnull=False), name="pair_labelled_idx"),
            models.Index(fields=["query"], condition=models.Q(label__isnull=False), name="pair_labelled_query_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.query_id}×{self.document_id}"


class Judgment(models.Model):
    """One annotator's current judgment of one pair. Every change is kept as a JudgmentRevision."""

    # indexed by judgment_unique_pair_annotator, which leads with the pair
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="judgments", db_index=False)
    # indexed with the judgment's id (Meta.indexes: judgment_history), which serves every look-up by annotator
    annotator = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="judgments", db_index=False
    )
    # RESTRICT, not PROTECT: a grade in use cannot be deleted on its own, but deleting the whole
    # campaign (which deletes these judgments too) still works.
    grade = models.ForeignKey(
        Grade,
        on_delete=models.RESTRICT,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("Empty when the annotator is unsure."),
    )
    unsure = models.BooleanField(_("unsure"), default=False)
    tentative_grade = models.ForeignKey(
        Grade,
        on_delete=models.RESTRICT,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("An unsure annotator's best guess; kept and exported, not scored by default."),
    )
    note = models.TextField(_("note"), blank=True)
    seconds_spent = models.FloatField(_("seconds spent"), default=0)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True, db_index=True)
    # A model judge's prompt version (judging.judge_models); empty for people and imported model labels.
    template = models.ForeignKey(
        "judging.JudgeTemplate",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="judgments",
        help_text=_("The model judge's prompt version this judgment was made with."),
    )

    class Meta:
        verbose_name = _("judgment")
        verbose_name_plural = _("judgments")
        ordering = ["pair", "annotator"]
        # An annotator's judgments in the order they were made: the latest one in a campaign (where the queue
        # resumes, Back from a pair not judged yet) and the one before or after a judgment (Back and Forward) walk
        # it from the end or from that judgment and stop at the first of the campaign. By the annotator's index
        # alone PostgreSQL read all their judgments and sorted them (970 rows a Back on the load bench), or walked
        # the table's ids back past every other annotator's.
        indexes = [models.Index(fields=["annotator", "id"], name="judgment_history")]
        constraints = [
            models.UniqueConstraint(fields=["pair", "annotator"], name="judgment_unique_pair_annotator"),
            # Confident: a grade and no tentative grade. Unsure: no grade (maybe a tentative one).
            models.CheckConstraint(
                condition=(
                    Q(unsure=False, grade__isnull=False, tentative_grade__isnull=True)
                    | Q(unsure=True, grade__isnull=True)
                ),
                name="judgment_grade_xor_unsure",
            ),
            models.CheckConstraint(condition=Q(seconds_spent__gte=0), name="judgment_seconds_nonnegative"),
        ]

    def __str__(self) -> str:
        return f"{self.annotator} on {self.pair}"


class JudgmentRevision(models.Model):
    """An immutable record of one change to a judgment: who, when, old and new values.

    A change made in the app is made by the annotator themselves (``changed_by``; ``on_behalf_of`` empty).
    Imported labels are recorded as made by the lead who imported them (``changed_by``; empty when the
    command line imported them) on behalf of the named source (``on_behalf_of``), from ``imported_from``.
    """

    # What a revision says changed, old and new value side by side: the columns that the app's writes, the
    # qrels import and the API's revision history all carry, in this order.
    CHANGE_FIELDS = (
        "old_grade",
        "new_grade",
        "old_unsure",
        "new_unsure",
        "old_tentative_grade",
        "new_tentative_grade",
        "old_note",
        "new_note",
    )

    judgment = models.ForeignKey(Judgment, on_delete=models.CASCADE, related_name="revisions")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("Who made the change; empty for labels imported from the command line."),
    )
    on_behalf_of = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        verbose_name=_("imported on behalf of"),
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text=_("Imported labels: the source (annotator or source account) they are recorded for."),
    )
    imported_from = models.CharField(_("imported from"), max_length=255, blank=True)
    changed_at = models.DateTimeField(_("changed"), auto_now_add=True, db_index=True)
    old_grade = models.SmallIntegerField(_("old grade"), null=True, blank=True)
    new_grade = models.SmallIntegerField(_("new grade"), null=True, blank=True)
    old_unsure = models.BooleanField(_("was unsure"), null=True, blank=True)
    new_unsure = models.BooleanField(_("is unsure"))
    old_tentative_grade = models.SmallIntegerField(_("old tentative grade"), null=True, blank=True)
    new_tentative_grade = models.SmallIntegerField(_("new tentative grade"), null=True, blank=True)
    old_note = models.TextField(_("old note"), blank=True)
    new_note = models.TextField(_("new note"), blank=True)
    seconds_spent = models.FloatField(_("seconds spent on this change"), default=0)

    class Meta:
        verbose_name = _("judgment revision")
        verbose_name_plural = _("judgment revisions")
        ordering = ["judgment", "changed_at", "id"]

    def __str__(self) -> str:
        return f"{self.judgment_id}: {self.old_grade}→{self.new_grade} at {self.changed_at:%Y-%m-%d %H:%M}"


class LabelSource(models.Model):
    """A source of imported labels that is not a person, e.g. ``trec-2019``: a user account nobody can log in
    with (inactive, no usable password), created by the qrels import that first named it."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="label_source")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        verbose_name = _("label source")
        verbose_name_plural = _("label sources")
        ordering = ["user"]

    def __str__(self) -> str:
        return f"{self.user} (imported labels)"


class Adjudication(models.Model):
    """A lead's decision on a pair; it always wins over the aggregated judgments."""

    pair = models.OneToOneField(Pair, on_delete=models.CASCADE, related_name="adjudication")
    grade = models.ForeignKey(Grade, on_delete=models.RESTRICT, related_name="+")
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    decided_at = models.DateTimeField(_("decided"), auto_now=True)
    note = models.TextField(_("note"), blank=True)

    class Meta:
        verbose_name = _("adjudication")
        verbose_name_plural = _("adjudications")
        ordering = ["pair"]

    def __str__(self) -> str:
        return f"{self.pair} = {self.grade_id}"


class Assignment(models.Model):
    """The pair an annotator is looking at now, held for them for a while.

    With several annotators per pair (Campaign.redundancy), a pair on someone's screen counts toward its
    redundancy, so two annotators opening the queue at the same moment are never both handed the last
    open slot of a pair. One per annotator and campaign; it lapses if they walk away.
    """

    # The campaign and the pair lead assignment_one_per_annotator and assignment_pair_idx: not indexed alone (a hold
    # moves at each judgment, a new entry in every index of the table).
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    pair = models.ForeignKey(Pair, on_delete=models.CASCADE, related_name="assignments", db_index=False)
    expires_at = models.DateTimeField(_("held until"))

    class Meta:
        verbose_name = _("assignment")
        verbose_name_plural = _("assignments")
        ordering = ["campaign", "annotator"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "annotator"], name="assignment_one_per_annotator"),
        ]
        indexes = [models.Index(fields=["pair", "expires_at"], name="assignment_pair_idx")]

    def __str__(self) -> str:
        return f"{self.annotator} on {self.pair_id} until {self.expires_at:%H:%M}"


class LabelsCounter(models.Model):
    """One of a campaign's LABELS_SHARDS counters of label changes: every writer of a label (a judgment, its
    change, an adjudication, an import, a new policy) adds one to the counter of each query's shard
    (query id % LABELS_SHARDS) in the transaction that changes it (services.labels_bump), so the sum of a
    campaign's counters moves whenever one of its labels may have, and only then.

    The queue modes with a list ask whether the labels moved every few seconds per process
    (scoring.selection): a read of these rows, where the sum of every query's labels_version read thousands.
    Split over shards, so that annotators judging different queries seldom wait for one another's commit on one
    row (each judgment's transaction holds its shard's row from the bump to its commit)."""

    # indexed by labelscounter_one_per_shard, which leads with the campaign
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    shard = models.PositiveSmallIntegerField(_("shard"))
    version = models.PositiveBigIntegerField(_("version"), default=0)

    class Meta:
        verbose_name = _("labels counter")
        verbose_name_plural = _("labels counters")
        ordering = ["campaign", "shard"]
        constraints = [models.UniqueConstraint(fields=["campaign", "shard"], name="labelscounter_one_per_shard")]

    def __str__(self) -> str:
        return f"{self.campaign_id}/{self.shard}: {self.version}"


LABELS_SHARDS = 16


class LabelsChange(models.Model):
    """A line of a campaign's labels log: a query whose labels_version moved, with the value its shard's
    LabelsCounter took in that bump. Written in the bump's transaction (services.labels_bump), insert-only, and
    pruned LABELS_LOG_KEEP bumps of a shard later. A process that kept every query's labels_version at known
    counter values reads the lines since them to learn which queries moved (scoring.cache.labels_versions): after
    a judgment, one query's line instead of every query's version (5,000 rows at 5,000 queries).

    Sound because a shard's counter row is locked from its bump to the commit: the lines of every bump up to the
    counter value a reader saw are committed when it reads them, and each bump's value is one above the last, so
    a reader that finds fewer distinct values than the counter moved by knows lines are gone and reads every
    version instead. A query's deletion changes the run cube, whose versions are then read whole."""

    # No constraints in the database: checking one would lock the campaign's row (FOR KEY SHARE) inside every
    # judgment, after its shard's counter, where a policy switch holds the campaign's row and waits for the
    # counters: a deadlock (tests/judging/test_concurrency.py). The campaign's deletion removes its lines (the ORM).
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    shard = models.PositiveSmallIntegerField(_("shard"))
    version = models.PositiveBigIntegerField(_("version"))
    query = models.ForeignKey(Query, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+")

    class Meta:
        verbose_name = _("labels change")
        verbose_name_plural = _("labels changes")
        indexes = [models.Index(fields=["campaign", "shard", "version"], name="labelschange_since")]

    def __str__(self) -> str:
        return f"{self.campaign_id}/{self.shard}@{self.version}: {self.query_id}"


# A shard's lines of the labels log are kept for this many of its bumps, and pruned every LABELS_LOG_PRUNE bumps
# (by the bump that reaches a multiple of it); a process further behind reads every query's version.
LABELS_LOG_KEEP = 1024
LABELS_LOG_PRUNE = 256


class PoolCount(models.Model):
    """How many pooled pairs a campaign has, kept by the pool's one writer (imports.service.pool.pool_merge) in
    its transaction: the judging page's progress and the queue modes read this row (selectors.pool_size) instead
    of counting the pool's index (100,000 rows at 100,000 pairs). Apart from the campaign's row, which a lead's
    settings save whole and a judgment never locks."""

    campaign = models.OneToOneField(Campaign, on_delete=models.CASCADE, primary_key=True, related_name="+")
    pairs = models.PositiveBigIntegerField(_("pooled pairs"), default=0)

    class Meta:
        verbose_name = _("pool count")
        verbose_name_plural = _("pool counts")

    def __str__(self) -> str:
        return f"{self.campaign_id}: {self.pairs}"


class Job(models.Model):
    """A background import of one uploaded file, or other long work: a model judge's run, an aggregation
    policy switch on a large campaign, a slow significance test (judging/jobs/ runs them in the task worker).

    An import's file waits in its JobChunk pieces (in the database, so a worker on any machine can read it)
    until the job ends; a model judge's run keeps the ids of its pairs in ``upload``. ``done``/``total`` count
    lines read of the file (pairs judged, labels recomputed, permutations drawn); ``heartbeat_at`` is refreshed
    while the worker runs the job, so one whose worker died can be told apart from a slow one.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", _("queued")
        RUNNING = "running", _("running")
        DONE = "done", _("done")
        FAILED = "failed", _("failed")

    class Kind(models.TextChoices):
        TOPICS = "topics", _("topics")
        DOCS = "docs", _("documents")
        RUN = "run", _("run")
        QRELS = "qrels", _("qrels")
        MODEL_JUDGE = "model_judge", _("model judge")
        POLICY = "policy", _("aggregation policy switch")
        SIGNIFICANCE = "significance", _("significance test")
        ENGINE_FETCH = "engine_fetch", _("engine fetch")

    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="jobs")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.QUEUED)
    filename = models.CharField(_("file name"), max_length=255)
    options = models.JSONField(_("import options"), default=dict, blank=True)
    upload = models.BinaryField(_("uploaded file (kept until the job ends)"), null=True, editable=False)
    size = models.BigIntegerField(_("file size in bytes"), default=0)
    done = models.BigIntegerField(_("lines read"), default=0)
    total = models.BigIntegerField(_("lines in the file"), default=0)
    result = models.JSONField(_("import summary"), null=True, blank=True)
    error = models.JSONField(_("error: detail, file, line, field"), null=True, blank=True)
    task_id = models.CharField(_("task id"), max_length=64, blank=True)
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    started_at = models.DateTimeField(_("started"), null=True, blank=True)
    heartbeat_at = models.DateTimeField(_("last heartbeat"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished"), null=True, blank=True)

    class Meta:
        verbose_name = _("job")
        verbose_name_plural = _("jobs")
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "done", "failed"]), name="job_status_valid"
            ),
            models.CheckConstraint(condition=Q(done__gte=0) & Q(total__gte=0), name="job_progress_nonnegative"),
        ]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="job_status_idx")]

    IMPORTS = ("topics", "docs", "run", "qrels")

    def __str__(self) -> str:
        if self.kind in self.IMPORTS:
            return f"{self.get_kind_display()} import {self.filename} ({self.status})"
        return f"{self.get_kind_display()} ({self.status})"

    @property
    def is_import(self) -> bool:
        return self.kind in self.IMPORTS

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)


class JobChunk(models.Model):
    """One piece (at most ``MAX_BYTES``) of an import job's uploaded file, in order of ``seq``: the upload is
    written and read a piece at a time, so no process holds the whole file to store or hand it on. The pieces
    are kept until the job ends (a failed job whose worker died keeps them for a retry)."""

    MAX_BYTES = 1 << 20

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="chunks")
    seq = models.PositiveIntegerField(_("position in the file"))
    data = models.BinaryField(_("bytes of the file"), editable=False)

    class Meta:
        verbose_name = _("piece of an uploaded file")
        verbose_name_plural = _("pieces of uploaded files")
        constraints = [models.UniqueConstraint(fields=["job", "seq"], name="jobchunk_job_seq_unique")]

    def __str__(self) -> str:
        return f"piece {self.seq} of job {self.job_id}"


class AnnotatorProfile(models.Model):
    """What kind of annotator a user is: a person (the default, no row needed) or an automatic judge.

    A model judge is a user-like annotator (its username is the judge's name, its password unusable, it
    never logs in) so that every page, filter and export that lists judgments by annotator works for it.
    Its judgments never count toward the human labels the leaderboard scores by default.
    """

    class Kind(models.TextChoices):
        HUMAN = "human", _("Human")
        MODEL = "model", _("Model")

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="annotator_profile"
    )
    kind = models.CharField(_("kind"), max_length=8, choices=Kind.choices, default=Kind.HUMAN)
    description = models.TextField(
        _("description"), blank=True, help_text=_("For a model: which model, endpoint and prompt produced its labels.")
    )
    # A code of settings.LANGUAGES chosen with the header's switcher; empty: follow the browser.
    language = models.CharField(_("interface language"), max_length=8, blank=True, default="")
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        verbose_name = _("annotator profile")
        verbose_name_plural = _("annotator profiles")
        ordering = ["user"]

    def __str__(self) -> str:
        return f"{self.user} ({self.kind})"

    @classmethod
    def model_user_ids(cls) -> list[int]:
        """Ids of the users that are model judges: left out wherever labels aggregate human judgments.
        A handful of rows at most, read once per call instead of joined into every judgment query."""
        return list(cls.objects.filter(kind=cls.Kind.MODEL).order_by().values_list("user_id", flat=True))


class OnlineMetric(models.Model):
    """One online figure of a system (CTR, conversion, ...) from an A/B test or a log analysis.

    Campaign-wide when ``query`` is empty, else for that one query. Compared with the offline measures on
    the "Offline vs online" page.
    """

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="online_metrics")
    system = models.ForeignKey(System, on_delete=models.CASCADE, related_name="online_metrics")
    metric = models.CharField(_("metric"), max_length=ONLINE_METRIC_MAX_LENGTH)
    value = models.FloatField(_("value"))
    ci_low = models.FloatField(_("confidence interval low"), null=True, blank=True)
    ci_high = models.FloatField(_("confidence interval high"), null=True, blank=True)
    query = models.ForeignKey(
        Query,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="online_metrics",
        help_text=_("Empty: all queries."),
    )
    imported_at = models.DateTimeField(_("imported"), auto_now=True)

    class Meta:
        verbose_name = _("online metric")
        verbose_name_plural = _("online metrics")
        ordering = ["campaign", "metric", "system", "query"]
        constraints = [
            # Two partial constraints: NULLs are distinct in a plain unique constraint on PostgreSQL.
            models.UniqueConstraint(
                fields=["system", "metric"], condition=Q(query__isnull=True), name="online_metric_unique_overall"
            ),
            models.UniqueConstraint(
                fields=["system", "metric", "query"],
                condition=Q(query__isnull=False),
                name="online_metric_unique_per_query",
            ),
            models.CheckConstraint(
                condition=(Q(ci_low__isnull=True) & Q(ci_high__isnull=True))
                | (Q(ci_low__lte=F("value")) & Q(ci_high__gte=F("value"))),
                name="online_metric_ci_brackets_value",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.system} {self.metric}={self.value:g}"


class AuditDraw(models.Model):
    """A lead's draw of queries for the audit of a prediction-powered leaderboard (``labels=ppi:NAME``).

    The queries are drawn uniformly at random, without replacement, from those not drawn before: the union of
    every draw of a campaign stays a uniform random sample of its queries. ``seed`` makes the draw repeatable
    (the same seed over the same undrawn queries draws the same ones). People judge the drawn queries' pooled
    pairs in the "audit" queue mode; a query counts as audited when each of them has a human label.
    """

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="audit_draws")
    drawn_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, verbose_name=_("drawn by"), on_delete=models.SET_NULL, null=True, related_name="+"
    )
    drawn_at = models.DateTimeField(_("drawn"), auto_now_add=True)
    seed = models.BigIntegerField(_("seed"))
    size = models.PositiveIntegerField(_("queries drawn"))

    class Meta:
        verbose_name = _("audit draw")
        verbose_name_plural = _("audit draws")
        ordering = ["campaign", "drawn_at", "id"]
        constraints = [models.CheckConstraint(condition=Q(seed__gte=0), name="auditdraw_seed_nonnegative")]

    def __str__(self) -> str:
        return f"{self.size} queries of {self.campaign_id} at {self.drawn_at:%Y-%m-%d %H:%M}"


class AuditQuery(models.Model):
    """One query of an audit draw, at its place in the draw's order (the audit queue serves them in it)."""

    draw = models.ForeignKey(AuditDraw, on_delete=models.CASCADE, related_name="queries")
    query = models.OneToOneField(Query, on_delete=models.CASCADE, related_name="audit")
    position = models.PositiveIntegerField(_("position in the draw"))

    class Meta:
        verbose_name = _("audited query")
        verbose_name_plural = _("audited queries")
        ordering = ["draw", "position"]
        constraints = [models.UniqueConstraint(fields=["draw", "position"], name="auditquery_unique_position")]

    def __str__(self) -> str:
        return f"{self.query_id} (#{self.position} of draw {self.draw_id})"


class QueryAssignment(models.Model):
    """A query a lead gave to one annotator to judge ("assignment" on the pages; not the short-lived hold of
    a pair on someone's screen, which is ``Assignment``).

    The queue serves each annotator their assigned queries first, in every queue mode. While an assignee has
    not judged a pair of their query, the pair keeps a slot of the campaign's redundancy for them: others are
    served it only from the slots left over (judging.selectors.queue_rules.open_pairs_of). Queries nobody was given
    stay shared.
    """

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="query_assignments")
    query = models.ForeignKey(Query, on_delete=models.CASCADE, related_name="assignments")
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(_("assigned"), auto_now_add=True)

    class Meta:
        verbose_name = _("assignment")
        verbose_name_plural = _("assignments")
        ordering = ["campaign", "annotator", "query"]
        constraints = [
            models.UniqueConstraint(fields=["query", "annotator"], name="query_assignment_unique"),
        ]
        indexes = [models.Index(fields=["annotator", "campaign"], name="query_assignment_annotator_idx")]

    def __str__(self) -> str:
        return f"{self.query_id} to {self.annotator_id}"


# The model judges' configuration and measurements, in their own module (one concern each).
from judging.engine_models import Engine, EngineSnapshot, EngineSystem, QueueFocus  # noqa: E402, F401
from judging.judge_models import CanaryProbe, JudgeTemplate, ModelConsistency  # noqa: E402, F401
