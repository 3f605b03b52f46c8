"""AP rank correlation: Kendall's tau with the top of the ranking weighing most."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def tau_ap(truth: npt.ArrayLike, estimate: npt.ArrayLike) -> float:
    r"""The AP correlation of an estimated ranking against the true one (Yilmaz, Aslam & Robertson, "A new
    rank correlation coefficient for information retrieval", SIGIR 2008).

    .. math:: \tau_{AP} = \frac{2}{N - 1} \sum_{i=2}^{N} \frac{C(i)}{i - 1} - 1

    where the items are taken in the estimated order and ``C(i)`` counts the items above the i-th one that the
    true order also puts above it. A swap near the top costs more than one near the bottom; for a swap of two
    neighbours it is asymmetric in the two rankings, unlike Kendall's tau. Equal estimated scores keep the
    items' order; equal true scores count as correctly ordered either way.

    Parameters
    ----------
    truth, estimate : array, shape (n,)
        Scores of the same n >= 2 items, larger is better.

    Returns
    -------
    float
        In [-1, 1]: 1 for the same order, -1 for the reverse.
    """
    t = np.asarray(truth, dtype=np.float64)
    e = np.asarray(estimate, dtype=np.float64)
    if t.ndim != 1 or t.shape != e.shape or t.size < 2:
        raise ValueError(f"truth and estimate must be 1-D of the same length >= 2, got {t.shape} and {e.shape}")
    order = np.argsort(-e, kind="stable")
    ranked = t[order]  # true scores in the estimated order
    # C(i): items above position i whose true score is at least the i-th item's
    above_ok = np.triu(ranked[:, None] >= ranked[None, :], k=1).sum(axis=0)[1:]
    n = t.size
    return float(2.0 / (n - 1) * (above_ok / np.arange(1, n)).sum() - 1.0)
