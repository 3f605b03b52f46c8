"""The TREC files RelJudge exchanges: column widths, a ranked list, and the writers of runs and qrels.

Reading them is judging.imports.parse; the widths here are shared by those parsers, the models and the API.
"""

from __future__ import annotations

import operator
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DOCID_MAX_LENGTH",
    "ONLINE_METRIC_MAX_LENGTH",
    "QID_MAX_LENGTH",
    "QRELS_COLUMNS",
    "RUN_COLUMNS",
    "SYSTEM_NAME_MAX_LENGTH",
    "TAG_MAX",
    "URL_MAX_LENGTH",
    "RankedList",
    "format_qrels",
    "format_run",
    "nfc",
]

RUN_COLUMNS = "qid Q0 docid rank score tag"
QRELS_COLUMNS = "qid iteration docid label"

# Widths of the database columns these values go to: the models take their max_length from here, so
# that a parse rejects exactly what the database could not store (SQLite would store it anyway,
# PostgreSQL would fail the whole import with a DataError).
QID_MAX_LENGTH = 100
DOCID_MAX_LENGTH = 200
SYSTEM_NAME_MAX_LENGTH = 100  # a run's tag names its system
URL_MAX_LENGTH = 2000
TAG_MAX = 100  # characters of one query tag (QueryTag.tag)
ONLINE_METRIC_MAX_LENGTH = 100


@dataclass
class RankedList:
    """One query's ranked documents, best first, in the order trec_eval scores them."""

    qid: str
    docids: list[str]
    scores: np.ndarray

    def __post_init__(self) -> None:
        self.scores = np.asarray(self.scores, dtype=np.float64)
        if self.scores.shape != (len(self.docids),):
            raise ValueError(
                f"ranking of qid {self.qid!r}: {len(self.docids)} docids but scores of shape {self.scores.shape}"
            )

    def __eq__(self, other: object) -> bool:
        # The generated __eq__ would compare arrays with ==, whose truth value is ambiguous.
        if not isinstance(other, RankedList):
            return NotImplemented
        return (
            self.qid == other.qid
            and list(self.docids) == list(other.docids)
            and np.array_equal(self.scores, other.scores)
        )


def nfc(text: str) -> str:
    """Text in Unicode NFC, the form keyboards and browsers produce: Hangul typed on a Mac or copied out of a
    file name there can be decomposed (NFD, "패딩" as six jamo instead of two syllables), which displays the same
    but does not match the query a browser sends, sorts apart and can be cut inside a syllable. Imported text
    (query text and description, document title and body) is stored in NFC; identifiers (qid, docid, tags,
    system names) are kept exactly as written so that exports match the files other tools hold byte for byte."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


# --------------------------------------------------------------------------- writing


def _token(value: str, name: str) -> str:
    if not value or len(value.split()) != 1 or value.strip() != value:
        raise ValueError(f"{name} {value!r} cannot be written to a whitespace-separated TREC file")
    return value


def format_qrels(rows: Iterable[tuple[str, str, int | None]]) -> Iterator[str]:
    """Yield TREC qrels lines ``"qid 0 docid label\\n"`` from ``(qid, docid, label)`` rows, for streaming."""
    for qid, docid, label in rows:
        if label is None:
            raise ValueError(f"{qid} {docid}: a pair without a label has no qrels line")
        yield f"{_token(qid, 'qid')} 0 {_token(docid, 'docid')} {operator.index(label)}\n"


def format_run(tag: str, rankings: Iterable[RankedList]) -> Iterator[str]:
    """Yield TREC run lines ``"qid Q0 docid rank score tag\\n"``, ranks from 1 in each ranking's order.

    Scores are written with ``repr`` so that they read back bit for bit.
    """
    _token(tag, "tag")
    for ranking in rankings:
        qid = _token(ranking.qid, "qid")
        scores = np.asarray(ranking.scores, dtype=np.float64)
        if not np.isfinite(scores).all():
            raise ValueError(f"ranking of qid {qid!r} has a score that is not finite")
        for rank, (docid, score) in enumerate(zip(ranking.docids, scores.tolist(), strict=True), 1):
            yield f"{qid} Q0 {_token(docid, 'docid')} {rank} {score!r} {tag}\n"
