"""RelJudge's measures, in one place: each one's name, whether it takes a cutoff, its range and whether the
final-pool bounds exist for it (:data:`MEASURES`), and how a measure is named ("nDCG@10", :class:`Measure`).

Everything that lists measures reads this registry: :func:`metrics.evaluate`'s order (:data:`BASES`), the
leaderboard's columns (:data:`LEADERBOARD`), the bounds (:data:`BOUNDED`), the planner's choices. Their labels
in words, in every language, are judging's (``judging.scoring.presenters.MEASURE_TITLES``, one per measure here).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from metrics.numbers import MEASURE_RANGE

__all__ = [
    "AT_K",
    "BASES",
    "BOUNDED",
    "BPREF",
    "JUDGED",
    "LEADERBOARD",
    "MEASURES",
    "MENU",
    "WHOLE_RUN",
    "WHOLE_RUN_ORDER",
    "Measure",
    "MeasureInfo",
    "is_judged",
    "measure_names",
]


@dataclass(frozen=True)
class MeasureInfo:
    """One measure of the registry.

    Parameters
    ----------
    name : str
        Its base name, as trec_eval, the API and the exports write it ("nDCG", "MRR").
    cutoff : bool
        Whether it is written with a cutoff ("nDCG@10"); False for a measure of the whole ranking.
    low, high : float
        Its range: every measure here is a share or a mean of shares, from 0 to 1
        (:data:`metrics.numbers.MEASURE_RANGE`).
    bounds : bool
        Whether the final-pool bounds (:mod:`metrics.verdicts`) exist for it: not for Judged, which measures the
        judging, not the ranking.
    """

    name: str
    cutoff: bool
    low: float = MEASURE_RANGE[0]
    high: float = MEASURE_RANGE[1]
    bounds: bool = True


#: Every measure, in the order :func:`metrics.evaluate` returns them.
MEASURES = (
    MeasureInfo("P", cutoff=True),
    MeasureInfo("R", cutoff=True),
    MeasureInfo("F1", cutoff=True),
    MeasureInfo("Hit", cutoff=True),
    MeasureInfo("MRR", cutoff=False),
    MeasureInfo("MAP", cutoff=False),
    MeasureInfo("nDCG", cutoff=True),
    MeasureInfo("Judged", cutoff=True, bounds=False),
    MeasureInfo("bpref", cutoff=False),
)
#: Base names in the order :func:`metrics.evaluate` returns them.
BASES = tuple(m.name for m in MEASURES)
#: The share of the top k that has a label: a measure of the judging, which the tests and bounds leave out.
JUDGED = "Judged"
#: Binary preference, the whole-run measure of incomplete judgments (its own formula in the metrics).
BPREF = "bpref"
#: The leaderboard's columns, in order: evaluate's, with bpref before Judged (the ranking measures first).
LEADERBOARD = (*[b for b in BASES if b not in (JUDGED, BPREF)], BPREF, JUDGED)
#: The measures the final-pool bounds exist for, in the leaderboard's order.
BOUNDED = tuple(b for b in LEADERBOARD if next(m for m in MEASURES if m.name == b).bounds)
#: The order the pages' menus offer them in: nDCG (the default) first, then the leaderboard's columns.
MENU = ("nDCG", *(b for b in LEADERBOARD if b != "nDCG"))
#: The measures with a cutoff, and those of the whole ranking, each in evaluate's order (Judged left out).
AT_K = tuple(m.name for m in MEASURES if m.cutoff and m.bounds)
WHOLE_RUN_ORDER = tuple(m.name for m in MEASURES if not m.cutoff)
#: Measures of the whole ranking, which take no cutoff.
WHOLE_RUN = frozenset(WHOLE_RUN_ORDER)


def is_judged(name: str) -> bool:
    """Whether a measure name ("Judged@10", "nDCG@10") is Judged's, which describes the judging."""
    return name.partition("@")[0] == JUDGED


@dataclass(frozen=True)
class Measure:
    """One measure's name: ``Measure("nDCG", 10)`` prints as ``nDCG@10``; ``Measure.parse`` reads it back.

    Parameters
    ----------
    base : str
        One of :data:`BASES`.
    cutoff : int or None, default None
        The k of an @k measure; None for a whole-run measure (:data:`WHOLE_RUN`), or for an @k measure
        whose k is still to be chosen (see :meth:`at`).

    Raises
    ------
    ValueError
        For an unknown base, a cutoff that is not a positive whole number, or a cutoff on a whole-run measure.
    """

    base: str
    cutoff: int | None = None

    def __post_init__(self) -> None:
        if self.base not in BASES:
            raise ValueError(f"unknown measure {self.base!r}; expected one of {', '.join(BASES)}")
        if self.cutoff is None:
            return
        if self.base in WHOLE_RUN:
            raise ValueError(f"{self.base} has no cutoff")
        if isinstance(self.cutoff, bool) or not isinstance(self.cutoff, numbers.Integral) or self.cutoff < 1:
            raise ValueError(f"the cutoff of {self.base} must be a whole number >= 1, got {self.cutoff!r}")

    def __str__(self) -> str:
        return self.base if self.cutoff is None else f"{self.base}@{self.cutoff}"

    @classmethod
    def parse(cls, text: str) -> Measure:
        """``"P@5"`` -> ``Measure("P", 5)``, ``"MRR"`` -> ``Measure("MRR")``; ValueError for anything else."""
        base, at, cut = str(text).strip().partition("@")
        if not at:
            return cls(base)
        if not cut.isdigit():
            raise ValueError(f"the cutoff in {text!r} must be a whole number >= 1")
        return cls(base, int(cut))

    def at(self, k: int) -> Measure:
        """This measure with cutoff ``k`` (a whole-run measure stays as it is)."""
        return self if self.base in WHOLE_RUN else Measure(self.base, k)


def measure_names(k: int) -> list[str]:
    """Every measure's name with cutoff ``k``, in :func:`metrics.evaluate`'s order: ``["P@10", ..., "Judged@10"]``."""
    return [str(Measure(base).at(k)) for base in BASES]
