"""What an import did (ImportSummary), and the log line every importer writes."""

from __future__ import annotations

import functools
import io
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, cast

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from judging.imports.errors import ImportRefused

if TYPE_CHECKING:
    from judging.models import Campaign

logger = logging.getLogger(__name__)

BATCH = 2000  # rows per ORM bulk statement
Progress = Callable[[int], None] | None
P = ParamSpec("P")


# The summary's first line for each kind of row, its noun agreeing with the count added (``kind`` itself stays
# English: the API and the logs name it). One whole sentence per kind and number, for every language's grammar.
def _added_line(kind: str, added: int) -> str:
    if kind == "queries":
        return ngettext(
            "%(file)s: %(added)s query added, %(updated)s updated, %(unchanged)s unchanged",
            "%(file)s: %(added)s queries added, %(updated)s updated, %(unchanged)s unchanged",
            added,
        )
    if kind == "query tags":
        return ngettext(
            "%(file)s: %(added)s query tag added, %(updated)s updated, %(unchanged)s unchanged",
            "%(file)s: %(added)s query tags added, %(updated)s updated, %(unchanged)s unchanged",
            added,
        )
    if kind == "documents":
        return ngettext(
            "%(file)s: %(added)s document added, %(updated)s updated, %(unchanged)s unchanged",
            "%(file)s: %(added)s documents added, %(updated)s updated, %(unchanged)s unchanged",
            added,
        )
    if kind == "rankings":
        return ngettext(
            "%(file)s: %(added)s ranking added, %(updated)s updated, %(unchanged)s unchanged",
            "%(file)s: %(added)s rankings added, %(updated)s updated, %(unchanged)s unchanged",
            added,
        )
    if kind == "judgments":
        return ngettext(
            "%(file)s: %(added)s judgment added, %(updated)s updated, %(unchanged)s unchanged",
            "%(file)s: %(added)s judgments added, %(updated)s updated, %(unchanged)s unchanged",
            added,
        )
    return ngettext(
        "%(file)s: %(added)s online figure added, %(updated)s updated, %(unchanged)s unchanged",
        "%(file)s: %(added)s online figures added, %(updated)s updated, %(unchanged)s unchanged",
        added,
    )


# Kinds whose import can put pairs in the pool: their summary says how many it did, even none.
_POOLING_KINDS = ("rankings", "judgments")


@dataclass
class ImportSummary:
    """What one import did, for the command's output, the upload page and the API."""

    kind: str
    filename: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    stub_queries: int = 0
    stub_documents: int = 0
    pairs_added: int = 0
    systems: list[str] = field(default_factory=list)
    # Qrels only: whose judgments the labels became, and how many labels were not applied because that
    # person had judged the pair in the app (imports never rewrite a person's own judgment).
    source: str = ""
    source_created: bool = False
    kept: int = 0

    def lines(self) -> list[str]:
        counts = {
            "file": self.filename,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "source": self.source,
            "kept": self.kept,
        }
        out = [_added_line(self.kind, self.added) % counts]
        if self.source_created:
            out.append(
                _("created the source account %(source)s for these labels (nobody can log in with it)")
                % {"source": repr(self.source)}
            )
        if self.kept:
            out.append(
                ngettext(
                    "%(kept)s label left alone: %(source)s had already judged that pair in the app, "
                    "and imports never overwrite a person's own judgment",
                    "%(kept)s labels left alone: %(source)s had already judged those pairs in the app, "
                    "and imports never overwrite a person's own judgment",
                    self.kept,
                )
                % counts
            )
        if self.systems:
            out.append(_("systems: %(names)s") % {"names": ", ".join(self.systems)})
        if self.stub_queries or self.stub_documents:
            stubs = {
                "queries": ngettext("%(n)s query", "%(n)s queries", self.stub_queries) % {"n": self.stub_queries},
                "documents": ngettext("%(n)s document", "%(n)s documents", self.stub_documents)
                % {"n": self.stub_documents},
            }
            out.append(
                _("stubs created: %(queries)s, %(documents)s (import their topics/documents to fill them in)") % stubs
            )
        if self.pairs_added:
            out.append(
                ngettext("%(n)s pair added to the pool", "%(n)s pairs added to the pool", self.pairs_added)
                % {"n": self.pairs_added}
            )
        elif self.kind in _POOLING_KINDS:
            out.append(_("no new pairs for the pool"))
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImportSummary:
        """The summary as_dict() stored (a job's result); keys a field added since does not know take its default."""
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "filename": self.filename,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "stub_queries": self.stub_queries,
            "stub_documents": self.stub_documents,
            "pairs_added": self.pairs_added,
            "systems": self.systems,
            "source": self.source,
            "source_created": self.source_created,
            "kept": self.kept,
        }


def logged(importer: Callable[P, ImportSummary]) -> Callable[P, ImportSummary]:
    """Log each import with its row counts and duration (outside its transaction: the commit counts too)."""

    @functools.wraps(importer)
    def logged(*args: P.args, **kwargs: P.kwargs) -> ImportSummary:
        campaign = cast("Campaign", kwargs["campaign"])
        filename = str(kwargs["filename"])
        started = time.monotonic()
        try:
            summary = importer(*args, **kwargs)
        except ImportRefused as exc:
            logger.info(
                "%s %s -> %s refused after %.2f s: %s",
                importer.__name__,
                filename,
                campaign.slug,
                time.monotonic() - started,
                exc,
            )
            raise
        logger.info(
            "%s %s -> %s: %d bytes, %d %s added, %d updated, %d unchanged, %d stubs, %d pairs added in %.2f s",
            importer.__name__,
            filename,
            campaign.slug,
            size_of(kwargs.get("data", b"")),
            summary.added,
            summary.kind,
            summary.updated,
            summary.unchanged,
            summary.stub_queries + summary.stub_documents,
            summary.pairs_added,
            time.monotonic() - started,
        )
        return summary

    return logged


def size_of(data: object) -> int:
    """Bytes in an import's data: bytes, or a file object (an upload, a file on disk)."""
    if isinstance(data, bytes | bytearray | memoryview):
        return len(data)
    size = getattr(data, "size", None)
    if size is not None:
        return int(size)
    if isinstance(data, io.BytesIO):
        return data.getbuffer().nbytes
    fileno = getattr(data, "fileno", None)
    try:
        return os.fstat(fileno()).st_size if fileno is not None else 0
    except (OSError, ValueError, io.UnsupportedOperation):
        return 0
