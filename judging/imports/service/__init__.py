"""The importers: one transaction each, file/line/field errors, stubs and pooling (judging.services re-exports them)."""

from collections.abc import Callable

from judging.imports.errors import FormatError, ImportConflict, ImportRefused
from judging.imports.service.pool import pool_build
from judging.imports.service.qrels import qrels_import
from judging.imports.service.records import documents_import, queries_import, query_tags_import, query_tags_set
from judging.imports.service.runs import run_import
from judging.imports.service.summary import BATCH, ImportSummary, Progress

__all__ = [
    "BATCH",
    "IMPORTERS",
    "FormatError",
    "ImportConflict",
    "ImportRefused",
    "ImportSummary",
    "Progress",
    "documents_import",
    "pool_build",
    "qrels_import",
    "queries_import",
    "query_tags_import",
    "query_tags_set",
    "run_import",
]

# The importers by the kind of file, as the upload page, the API and the jobs name them.
IMPORTERS: dict[str, Callable[..., ImportSummary]] = {
    "topics": queries_import,
    "docs": documents_import,
    "run": run_import,
    "qrels": qrels_import,
}
