"""Django admin for every model, read-only for judging data: that changes only through the services."""

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest

from judging import models


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shown, never added, changed or deleted here. A judgment written in the admin would skip the service
    that records its revision and refreshes the pair's label, the qrels and the leaderboard; revisions are the
    audit trail and are deleted by nobody. As every object that cascades to these lacks the delete right too,
    the admin also refuses to delete a campaign, query or document that holds judgments."""

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class GradeInline(admin.TabularInline):
    model = models.Grade
    extra = 0


class MembershipInline(admin.TabularInline):
    model = models.Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(models.Campaign)
class CampaignAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "pool_depth", "redundancy", "aggregation", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [GradeInline, MembershipInline]


@admin.register(models.Grade)
class GradeAdmin(admin.ModelAdmin):
    list_display = ["campaign", "value", "name"]
    list_filter = ["campaign"]


@admin.register(models.Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["campaign", "user", "role"]
    list_filter = ["campaign", "role"]


@admin.register(models.Query)
class QueryAdmin(admin.ModelAdmin):
    list_display = ["qid", "text", "campaign", "is_stub"]
    list_filter = ["campaign", "is_stub"]
    search_fields = ["qid", "text"]


@admin.register(models.Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["docid", "title", "campaign", "is_stub"]
    list_filter = ["campaign", "is_stub"]
    search_fields = ["docid", "title"]


@admin.register(models.System)
class SystemAdmin(admin.ModelAdmin):
    list_display = ["name", "campaign", "entries", "source", "imported_at"]
    list_filter = ["campaign"]


@admin.register(models.Ranking)
class RankingAdmin(admin.ModelAdmin):
    list_display = ["system", "query", "length"]
    list_select_related = ["system", "query"]
    raw_id_fields = ["system", "query"]
    readonly_fields = ["doc_ids", "scores"]


@admin.register(models.Pair)
class PairAdmin(ReadOnlyAdmin):
    list_display = ["id", "query", "document", "pooled", "label", "judgment_count", "adjudicated"]
    list_filter = ["campaign", "pooled", "adjudicated"]
    list_select_related = ["query", "document"]
    raw_id_fields = ["query", "document"]


class RevisionInline(admin.TabularInline):
    model = models.JudgmentRevision
    extra = 0
    can_delete = False
    readonly_fields = [f.name for f in models.JudgmentRevision._meta.fields]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


@admin.register(models.Judgment)
class JudgmentAdmin(ReadOnlyAdmin):
    list_display = ["id", "pair", "annotator", "grade", "unsure", "updated_at"]
    list_filter = ["unsure", "pair__campaign"]
    list_select_related = ["pair", "annotator", "grade"]
    raw_id_fields = ["pair"]
    readonly_fields = ["created_at", "updated_at"]
    inlines = [RevisionInline]


@admin.register(models.JudgmentRevision)
class JudgmentRevisionAdmin(ReadOnlyAdmin):
    list_display = ["judgment", "changed_by", "changed_at", "old_grade", "new_grade", "old_unsure", "new_unsure"]
    readonly_fields = [f.name for f in models.JudgmentRevision._meta.fields]


@admin.register(models.Adjudication)
class AdjudicationAdmin(ReadOnlyAdmin):
    list_display = ["pair", "grade", "decided_by", "decided_at"]
    raw_id_fields = ["pair"]


@admin.register(models.Engine)
class EngineAdmin(admin.ModelAdmin):
    """Search engines leads may make systems of. The credentials are never here: only the name of the
    environment variable that holds them."""

    list_display = ["name", "kind", "base_url", "secret_env", "timeout", "concurrency", "rate_limit", "enabled"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "base_url"]


@admin.register(models.EngineSystem)
class EngineSystemAdmin(ReadOnlyAdmin):
    list_display = ["name", "campaign", "engine", "version", "depth", "created_at"]
    list_filter = ["campaign", "engine"]


@admin.register(models.EngineSnapshot)
class EngineSnapshotAdmin(ReadOnlyAdmin):
    list_display = ["engine_system", "number", "created_at", "queries_ok", "queries_failed", "answer_ms"]
    list_filter = ["engine_system__campaign"]
