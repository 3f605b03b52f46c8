"""Live search engines: the engines an administrator configures, the systems leads make of them (a request
template and the fields to read), and each fetch of such a system (a snapshot, stored as a system of its own).

Registered through judging.models (imported at its end); split out to keep each module to one concern.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

# Credentials come only from variables named for them: an engine naming DATABASE_URL or DJANGO_SECRET_KEY would
# send that to its address (a staff member given the right to add engines must not reach the server's secrets).
SECRET_ENV_PATTERN = re.compile(r"^RELJUDGE_ENGINE_[A-Z0-9_]{1,80}$")
ENV_NAME = RegexValidator(SECRET_ENV_PATTERN, _("an environment variable's name: RELJUDGE_ENGINE_ then A-Z, 0-9 and _"))
ENGINE_NAME = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", _("letters, digits, '.', '_' and '-'"))
DEPTH_MAX = 1000  # hits a snapshot keeps per query at most


class Engine(models.Model):
    """A search engine the server may call, configured by an administrator (the admin). Leads choose among
    these only: the server never calls an address a lead typed. The credentials are never stored: ``secret_env``
    names the environment variable (of the web server and the task worker) whose value is sent as the
    ``Authorization`` header (e.g. ``ApiKey ...`` or ``Basic ...``)."""

    class Kind(models.TextChoices):
        ELASTICSEARCH = "elasticsearch", "Elasticsearch"
        OPENSEARCH = "opensearch", "OpenSearch"
        SOLR = "solr", "Solr"
        HTTP = "http", _("any JSON API (http)")

    name = models.CharField(_("name"), max_length=64, unique=True, validators=[ENGINE_NAME])
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    base_url = models.URLField(
        _("base URL"),
        max_length=500,
        help_text=_("Scheme, host, port and path, without credentials: e.g. http://search.internal:9200"),
    )
    secret_env = models.CharField(
        _("credentials variable"),
        max_length=100,
        blank=True,
        validators=[ENV_NAME],
        help_text=_(
            "The NAME of the environment variable (RELJUDGE_ENGINE_...) whose value is sent as the Authorization "
            "header."
        ),
    )
    timeout = models.FloatField(
        _("timeout (seconds)"), default=10.0, validators=[MinValueValidator(0.1), MaxValueValidator(300)]
    )
    concurrency = models.PositiveIntegerField(
        _("concurrent requests"), default=4, validators=[MinValueValidator(1), MaxValueValidator(64)]
    )
    rate_limit = models.FloatField(
        _("requests per second"),
        default=0.0,
        validators=[MinValueValidator(0.0)],
        help_text=_("0: no limit beyond the concurrency."),
    )
    max_answer_bytes = models.PositiveIntegerField(
        _("largest answer (bytes)"), default=4 * 1024 * 1024, validators=[MinValueValidator(1024)]
    )
    enabled = models.BooleanField(_("enabled"), default=True)

    class Meta:
        verbose_name = _("search engine")
        verbose_name_plural = _("search engines")
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(condition=Q(timeout__gt=0), name="engine_timeout_positive"),
            models.CheckConstraint(condition=Q(concurrency__gte=1), name="engine_concurrency_positive"),
            models.CheckConstraint(condition=Q(rate_limit__gte=0), name="engine_rate_limit_nonnegative"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"


class EngineSystem(models.Model):
    """A lead's system made of an engine: where to ask it (an index, a collection or a path under the engine's
    base URL), the request template with ``{{query}}`` and the query's other fields as placeholders, and the
    fields its hits are read from. Each fetch is a snapshot, stored as the system ``<name>@<n>``."""

    class Method(models.TextChoices):
        GET = "GET", "GET"
        POST = "POST", "POST"

    campaign = models.ForeignKey("judging.Campaign", on_delete=models.CASCADE, related_name="engine_systems")
    engine = models.ForeignKey(Engine, on_delete=models.PROTECT, related_name="systems")
    name = models.CharField(_("name"), max_length=64, validators=[ENGINE_NAME])
    target = models.CharField(_("index, collection or path"), max_length=200, blank=True)
    method = models.CharField(_("method"), max_length=4, choices=Method.choices, default=Method.POST)
    template = models.TextField(_("request template"))
    hits_path = models.CharField(_("hit list (JSONPath)"), max_length=200, blank=True)
    id_field = models.CharField(_("id field"), max_length=200, blank=True)
    title_field = models.CharField(_("title field"), max_length=200, blank=True)
    text_field = models.CharField(_("text field"), max_length=200, blank=True)
    depth = models.PositiveIntegerField(
        _("hits kept per query"), default=100, validators=[MinValueValidator(1), MaxValueValidator(DEPTH_MAX)]
    )
    version = models.PositiveIntegerField(_("template version"), default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        verbose_name = _("system from an engine")
        verbose_name_plural = _("systems from engines")
        ordering = ["campaign", "name"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "name"], name="engine_system_unique_name_per_campaign"),
            models.CheckConstraint(condition=Q(depth__gte=1) & Q(depth__lte=DEPTH_MAX), name="engine_system_depth"),
        ]

    def __str__(self) -> str:
        return self.name


class EngineSnapshot(models.Model):
    """One fetch of an engine system: every campaign query asked once, the top hits stored as the run of the
    system ``<name>@<number>`` (so the leaderboard puts snapshots side by side)."""

    engine_system = models.ForeignKey(EngineSystem, on_delete=models.CASCADE, related_name="snapshots")
    number = models.PositiveIntegerField(_("number"))
    system = models.OneToOneField(
        "judging.System", on_delete=models.SET_NULL, null=True, blank=True, related_name="snapshot"
    )
    template_version = models.PositiveIntegerField(_("template version"))
    template = models.TextField(_("request template"))
    queries_ok = models.PositiveIntegerField(_("queries answered"), default=0)
    queries_failed = models.PositiveIntegerField(_("queries failed"), default=0)
    failures = models.JSONField(_("failed queries and why"), default=list, blank=True)
    answer_ms = models.FloatField(_("median answer time (ms)"), null=True, blank=True)
    seconds = models.FloatField(_("fetch time (seconds)"), default=0.0)
    pairs_added = models.PositiveIntegerField(_("pairs added to the pool"), default=0)
    documents_added = models.PositiveIntegerField(_("documents added"), default=0)
    created_at = models.DateTimeField(_("fetched"), auto_now_add=True)

    class Meta:
        verbose_name = _("engine snapshot")
        verbose_name_plural = _("engine snapshots")
        ordering = ["engine_system", "number"]
        constraints = [
            models.UniqueConstraint(fields=["engine_system", "number"], name="engine_snapshot_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.engine_system.name}@{self.number}"


class QueueFocus(models.Model):
    """A lead's "judge what is new first": the pooled pairs a snapshot brought that wait for a label (in its top
    k, not in the top k of the snapshot before), which the judging queue serves before any other pair, to every
    annotator and in every queue mode, until they are judged (selectors.queue.pair_next). The campaign points at
    its focus (``Campaign.queue_focus``); a row is never changed, a new focus is a new row, so a process may keep
    its pair list by the row's id."""

    snapshot = models.ForeignKey(EngineSnapshot, on_delete=models.CASCADE, related_name="focuses")
    against = models.ForeignKey(
        EngineSnapshot, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )  # the snapshot before (None: every pair of the top k is new)
    k = models.PositiveIntegerField(_("top k"))
    pair_ids = models.BinaryField(_("pairs (int64, in serving order)"))
    pairs = models.PositiveIntegerField(_("pairs"))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(_("started"), auto_now_add=True)

    class Meta:
        verbose_name = _("judging focus")
        verbose_name_plural = _("judging focuses")

    def __str__(self) -> str:
        return f"focus on {self.snapshot}"
