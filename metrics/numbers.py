"""How numbers leave RelJudge: finite, within their range, bounds in order; one tolerance for float rounding.

Every measure, bound, interval, power, probability and estimate that reaches JSON, a page, a CSV or a command goes
through one of these functions, so that the rule is decided here once:

* **Rounding is not an error.** Sums of the same terms in another order differ in the last bits: a DCG summed
  down a ranking and an ideal DCG summed from grade counts give an nDCG of 1.0000000000000002 where the exact
  value is 1. A value within :data:`TOLERANCE` outside its range is clipped into it, and a low bound within
  :data:`TOLERANCE` above its high bound is lowered to it.
* **Anything beyond that is a bug**, not the caller's mistake: :class:`NumberError` (an ``ArithmeticError``, never a
  ``ValueError``, so that no handler of bad arguments takes it for one) names what was out of range and where.
  In the web app it is a 500 with the campaign, the parameters and the stack in the log.
* **Estimates may leave the range on purpose.** An unbiased estimator (prediction-powered inference, PPI) is not
  bounded: its estimate and interval can step outside [0, 1] when the model's labels and the audit disagree. They
  are shown clipped to the range (:func:`clip_interval`), and the raw values are kept beside them in the JSON.
* **Non-finite is never silent.** NaN or an infinity is a :class:`NumberError` wherever a number must be finite;
  where "no value" is a legitimate answer (a p-value of a comparison with no spread), :func:`finite_or_none` turns
  it into ``None`` (JSON ``null``) and says so in the caller's docstring.

Every measure of RelJudge (P, R, F1, Hit, RR/MRR, AP/MAP, nDCG, bpref, Judged) lies in [0, 1]
(:data:`MEASURE_RANGE`), differences of two such values in [-1, 1], probabilities and powers in [0, 1].
"""

from __future__ import annotations

import math
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from metrics._types import FloatArray

__all__ = [
    "DIFFERENCE_RANGE",
    "MEASURE_RANGE",
    "PROBABILITY_RANGE",
    "TOLERANCE",
    "NumberError",
    "clip_interval",
    "finite",
    "finite_array",
    "finite_or_none",
    "ordered_bounds",
    "within",
]

#: How far outside its range (or a low bound above its high bound) a computed value may be and still count as
#: float rounding. Rounding errors of the sums here (at most a few thousand terms in [0, 1]) are below 1e-12.
TOLERANCE = 1e-9

#: The range of every measure (P, R, F1, Hit, RR, AP, nDCG, bpref, Judged) per query and as a mean.
MEASURE_RANGE = (0.0, 1.0)
#: The range of a difference of two measure values.
DIFFERENCE_RANGE = (-1.0, 1.0)
#: Probabilities, powers, shares.
PROBABILITY_RANGE = (0.0, 1.0)


class NumberError(ArithmeticError):
    """A computed number that is not finite, or outside its range beyond rounding: a bug in the computation,
    never the caller's error. The message names the value, what it is and where in its array it was."""


def _where(array: np.ndarray, bad: np.ndarray) -> str:
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return "" if array.ndim == 0 else f" at {index}"


def _check_finite(array: np.ndarray, what: str) -> None:
    bad = ~np.isfinite(array)
    if bad.any():
        raise NumberError(f"{what}: {float(array[bad].flat[0])!r} is not a finite number{_where(array, bad)}")


@overload
def within(values: float, low: float = ..., high: float = ..., *, what: str) -> float: ...
@overload
def within(values: npt.ArrayLike, low: float = ..., high: float = ..., *, what: str) -> FloatArray: ...
def within(values: Any, low: float = 0.0, high: float = 1.0, *, what: str) -> Any:
    """``values`` (a number or an array) clipped into [low, high] where they stray by at most :data:`TOLERANCE`.

    Raises
    ------
    NumberError
        A value that is not finite, or outside [low - TOLERANCE, high + TOLERANCE]; ``what`` names it.
    """
    scalar = np.ndim(values) == 0 and not isinstance(values, np.ndarray)
    array = np.asarray(values, dtype=np.float64)
    _check_finite(array, what)
    outside = (array < low - TOLERANCE) | (array > high + TOLERANCE)
    if outside.any():
        raise NumberError(
            f"{what}: {float(array[outside].flat[0])!r} is outside [{low}, {high}]{_where(array, outside)}"
            f" by more than rounding ({TOLERANCE})"
        )
    clipped = np.clip(array, low, high)
    return float(clipped) if scalar else clipped


def ordered_bounds(
    low: npt.ArrayLike, high: npt.ArrayLike, lo: float = 0.0, hi: float = 1.0, *, what: str
) -> tuple[FloatArray, FloatArray]:
    """Lower and upper bounds of one quantity, each clipped into [lo, hi] (:func:`within`), the low bound lowered
    to the high one where it lies above it by at most :data:`TOLERANCE`: afterwards ``low <= high`` holds exactly.

    Raises
    ------
    NumberError
        A bound that is not finite or outside the range beyond rounding, or a low bound above its high bound by
        more than :data:`TOLERANCE` (a bug in how they were computed: it names the position).
    """
    low_a = within(low, lo, hi, what=f"{what} (low bound)")
    high_a = within(high, lo, hi, what=f"{what} (high bound)")
    if low_a.shape != high_a.shape:
        raise NumberError(f"{what}: low and high bounds of different shapes {low_a.shape} and {high_a.shape}")
    above = low_a > high_a + TOLERANCE
    if above.any():
        raise NumberError(
            f"{what}: low bound {float(low_a[above].flat[0])!r} above high bound {float(high_a[above].flat[0])!r}"
            f"{_where(low_a, above)} by more than rounding ({TOLERANCE})"
        )
    return np.minimum(low_a, high_a), high_a


def clip_interval(
    low: npt.ArrayLike, high: npt.ArrayLike, lo: float = 0.0, hi: float = 1.0, *, what: str
) -> tuple[FloatArray, FloatArray]:
    """An estimate's interval as a reader is shown it: both ends clipped into [lo, hi] however far outside they are
    (an unbiased estimator is not bounded; keep the raw ends beside the clipped ones), ``low <= high``.

    Raises
    ------
    NumberError
        An end that is not finite, or a low end above the high end by more than :data:`TOLERANCE`.
    """
    low_a = np.asarray(low, dtype=np.float64)
    high_a = np.asarray(high, dtype=np.float64)
    _check_finite(low_a, f"{what} (low end)")
    _check_finite(high_a, f"{what} (high end)")
    above = low_a > high_a + TOLERANCE
    if above.any():
        low_end, high_end = float(low_a[above].flat[0]), float(high_a[above].flat[0])
        raise NumberError(f"{what}: low end {low_end!r} above high end {high_end!r}{_where(low_a, above)}")
    low_c, high_c = np.clip(low_a, lo, hi), np.clip(high_a, lo, hi)
    return np.minimum(low_c, high_c), high_c


def finite(value: float | np.floating[Any] | int, *, what: str) -> float:
    """``value`` as a float; :class:`NumberError` naming ``what`` when it is NaN or infinite."""
    number = float(value)
    if not math.isfinite(number):
        raise NumberError(f"{what}: {number!r} is not a finite number")
    return number


def finite_array(values: npt.ArrayLike, *, what: str) -> FloatArray:
    """``values`` as a float64 array; :class:`NumberError` naming ``what`` and the position of the first value that
    is NaN or infinite."""
    array = np.asarray(values, dtype=np.float64)
    _check_finite(array, what)
    return array


def finite_or_none(value: float | np.floating[Any] | int | None) -> float | None:
    """``value`` as a float, or None where it is None, NaN or infinite: for numbers whose absence is an answer (a
    p-value with nothing to test). The caller's docstring says when that happens."""
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None
