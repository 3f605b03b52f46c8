"""Diversity of the ranked lists over a document attribute: intra-list diversity and coverage at k."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import numpy as np
from django.db.models import Count, Max
from django.db.models.fields.json import KT
from django.utils.translation import gettext

import metrics
from judging import runtime
from judging.errors import RequestError
from judging.models import Campaign, Document
from judging.scoring.cache import Leaderboard
from judging.scoring.trust.arrays import trust_arrays
from judging.scoring.trust.store import LOCK, cached

ATTRIBUTE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
ATTRIBUTE_SECONDS = 60.0  # documents' attributes change only on import: re-read at most this often
_ATTRIBUTES: dict[tuple[object, ...], tuple[float, np.ndarray, np.ndarray, list[str]]] = runtime.keep(
    "trust.document_attributes",
    {},
    bound=None,
    grows_with="campaign and attribute",
    invalidated_by="ATTRIBUTE_SECONDS (read again)",
    lock=LOCK,
    group="trust",
)


def check_attribute(attribute: str) -> str:
    if not ATTRIBUTE_PATTERN.match(attribute or "") or "__" in attribute:
        raise RequestError(
            "attribute",
            gettext(
                "attribute must be 1 to 64 letters, digits, '-' or '_' (one '_' at a time), "
                "starting with a letter or digit"
            ),
        )
    return attribute


def _attribute_codes(campaign: Campaign, attribute: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(document pks sorted, their value codes, the values): the documents that have the attribute.

    The database extracts the key (``KT``, a JSON path on SQLite and PostgreSQL alike); numpy numbers
    the distinct values. Kept ATTRIBUTE_SECONDS, keyed by the campaign's document count and largest id.
    """
    shape = Document.objects.filter(campaign=campaign).aggregate(n=Count("id"), top=Max("id"))
    key = (campaign.pk, attribute, shape["n"], shape["top"])
    with LOCK:
        got = _ATTRIBUTES.get(key)
    if got is not None and time.monotonic() - got[0] < ATTRIBUTE_SECONDS:
        return got[1], got[2], got[3]
    rows = np.array(
        list(
            Document.objects.filter(campaign=campaign)
            .annotate(value=KT(f"attributes__{attribute}"))
            .exclude(value__isnull=True)
            .order_by("id")
            .values_list("id", "value")
        ),
        dtype=object,
    ).reshape(-1, 2)
    text = rows[:, 1].astype(str)
    keep = text != ""  # an empty value says no more than a missing one
    pks = rows[keep, 0].astype(np.int64)
    values, codes = np.unique(text[keep], return_inverse=True)
    values = values.tolist()
    codes = codes.astype(np.int64).reshape(-1)
    with LOCK:
        _ATTRIBUTES[key] = (time.monotonic(), pks, codes, values)
    return pks, codes, values


def attribute_names(campaign: Campaign, *, sample: int = 500) -> list[str]:
    """Attribute keys found on (a sample of) the campaign's documents, for the page's menu."""
    rows = (
        Document.objects.filter(campaign=campaign)
        .exclude(attributes={})
        .order_by("id")
        .values_list("attributes", flat=True)[:sample]
    )
    keys: set[str] = set()
    for attrs in rows:  # a bounded sample, not the collection
        if isinstance(attrs, dict):
            keys.update(k for k in attrs if ATTRIBUTE_PATTERN.match(k) and "__" not in k)
    return sorted(keys)


@dataclass
class Diversity:
    attribute: str
    k: int
    ild: np.ndarray  # (S, Qs) intra-list diversity at k
    coverage: np.ndarray  # (S, Qs) distinct values in the top k
    n_values: int  # distinct values of the attribute in the campaign
    share_known: float  # share of the top-k documents that have the attribute

    @property
    def names(self) -> tuple[str, str]:
        return f"ILD@{self.k}", f"Coverage@{self.k}"

    def means(self) -> tuple[np.ndarray, np.ndarray]:
        n = max(self.ild.shape[1], 1)
        return self.ild.sum(axis=1) / n, self.coverage.sum(axis=1) / n


def diversity(lb: Leaderboard, attribute: str) -> Diversity:
    """ILD@k and coverage@k of every system over one document attribute, on the scored queries."""
    attribute = check_attribute(attribute)
    pks, codes, values = _attribute_codes(lb.campaign, attribute)
    if not values:
        raise RequestError(
            "attribute",
            gettext("attribute: no document of this campaign has the attribute %(name)r") % {"name": attribute},
        )

    def compute() -> Diversity:
        arrays = trust_arrays(lb)
        k = lb.params.k
        docs = arrays.doc_ids[..., :k]  # both measures look at the top k only: look up no deeper
        at = np.minimum(np.searchsorted(pks, docs), max(pks.size - 1, 0))
        found = pks[at] == docs
        grid = np.where(found, codes[at], metrics.NO_VALUE)
        grid[docs < 0] = metrics.PAD
        listed = np.count_nonzero(grid != metrics.PAD)
        share = float(np.count_nonzero(grid >= 0) / listed) if listed else 0.0
        return Diversity(
            attribute,
            k,
            metrics.intra_list_diversity(grid, k=k),
            metrics.coverage(grid, k=k).astype(np.float64),
            len(values),
            share,
        )

    return cached(lb, ("diversity", attribute, len(values)), compute)
