"""Names of RelJudge's measures: a base name and, for the @k measures, a cutoff, written as in "nDCG@10"."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

__all__ = ["BASES", "WHOLE_RUN", "Measure", "measure_names"]

#: Base names in the order :func:`metrics.evaluate` returns them.
BASES = ("P", "R", "F1", "Hit", "MRR", "MAP", "nDCG", "Judged", "bpref")
#: Measures of the whole ranking, which take no cutoff.
WHOLE_RUN = frozenset({"MRR", "MAP", "bpref"})


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
