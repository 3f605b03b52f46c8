"""Aggregate several annotators' grades of a pair into the one label the scorer uses (numpy, no ORM).

``Policy`` is the one list of aggregation policies: ``Campaign.Aggregation`` is this enum, forms and
serializers take its choices, and ``POLICIES`` (the values) is derived from it.
"""

from __future__ import annotations

import numpy as np
from django.db.models.enums import TextChoices
from django.utils.translation import gettext_lazy as _


class Policy(TextChoices):
    """How a pair's confident grades become its label (labels say how ties go)."""

    MEDIAN = "median", _("Median (ties to the lower grade)")
    MAJORITY = "majority", _("Majority vote")
    MEAN = "mean", _("Rounded mean")
    MAX = "max", _("Maximum")
    MIN = "min", _("Minimum")


POLICIES: tuple[str, ...] = tuple(Policy.values)


def aggregate_grades(group: np.ndarray, grades: np.ndarray, *, policy: str = "median") -> tuple[np.ndarray, np.ndarray]:
    """Aggregate grades grouped by an integer key, vectorized.

    Parameters
    ----------
    group : ndarray of shape (n,)
        Group key of each grade (e.g. a pair id).
    grades : ndarray of shape (n,)
        Confident grades (unsure judgments are left out by the caller).
    policy : {"median", "majority", "mean", "max", "min"}
        ``median`` takes the lower middle grade on an even count (ties go to the lower grade);
        ``majority`` takes the most frequent grade, ties to the lower grade; ``mean`` rounds half up.

    Returns
    -------
    keys, labels : ndarrays of shape (groups,)
        The distinct keys in ascending order and the label of each.
    """
    if policy not in POLICIES:
        raise ValueError(f"unknown aggregation policy {policy!r}; expected one of {', '.join(POLICIES)}")
    group = np.asarray(group, dtype=np.int64)
    grades = np.asarray(grades, dtype=np.int64)
    if group.shape != grades.shape or group.ndim != 1:
        raise ValueError("group and grades must be 1-d arrays of the same length")
    if group.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.lexsort((grades, group))
    g, v = group[order], grades[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    counts = np.diff(np.r_[starts, g.size])
    keys = g[starts]
    if policy == "median":
        labels = v[starts + (counts - 1) // 2]
    elif policy == "min":
        labels = v[starts]
    elif policy == "max":
        labels = v[starts + counts - 1]
    elif policy == "mean":
        sums = np.add.reduceat(v, starts)
        labels = np.floor(sums / counts + 0.5).astype(np.int64)
    else:  # majority: runs of equal (group, grade) — the longest run per group, first (lowest grade) on ties
        run_starts = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (v[1:] != v[:-1])])
        run_len = np.diff(np.r_[run_starts, g.size])
        run_group = np.searchsorted(starts, run_starts, side="right") - 1
        # sort runs by group, then length descending, then grade ascending; take each group's first
        run_order = np.lexsort((v[run_starts], -run_len, run_group))
        first = np.r_[True, run_group[run_order][1:] != run_group[run_order][:-1]]
        labels = v[run_starts[run_order][first]]
    return keys, labels
