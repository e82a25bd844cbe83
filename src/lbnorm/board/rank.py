"""The board's rank: by the average, a benchmark or a rate; ties by the suite's method.

Ranks are taken on the unrounded values (presentation rounds later, if at all).
A row without a value, or an incomplete row where the board says so, has no rank.
"""

from __future__ import annotations

import numpy as np

from lbnorm.core.arrow import FloatArray
from lbnorm.suites.board import RankMethod

__all__ = ["rank_descending"]


def rank_descending(values: FloatArray, *, method: RankMethod = "min") -> FloatArray:
    """Rank values, highest first; NaN stays unranked; ties by `method`.

    ``min``: equal values share the smallest rank (1, 2, 2, 4); ``ordinal``:
    every row its own place, equal values in the order given (the runs pass
    rows in key order: model, precision, revision, chat template); ``dense``:
    equal values share a rank and the next value takes the next (1, 2, 2, 3).
    A tie is exact equality: every engine sums scores exactly
    (:class:`~lbnorm.engines.kernel.FixedPoint`), so equal inputs give
    bit-equal averages whatever the row order, batching or engine, and two
    different averages never tie.

    Args:
        values: Scores; NaN marks an unranked entry.
        method: How ties share ranks.

    Returns:
        Ranks as floats (1.0 is best), NaN where the value is NaN.

    Examples:
        >>> rank_descending(np.array([3.0, 5.0, 3.0, np.nan, 1.0])).tolist()
        [2.0, 1.0, 2.0, nan, 4.0]
        >>> rank_descending(np.array([3.0, 5.0, 3.0, np.nan, 1.0]), method="ordinal").tolist()
        [2.0, 1.0, 3.0, nan, 4.0]
        >>> rank_descending(np.array([3.0, 5.0, 3.0, np.nan, 1.0]), method="dense").tolist()
        [2.0, 1.0, 2.0, nan, 3.0]
        >>> rank_descending(np.array([10.0000000005001, 10.0000000004999])).tolist()
        [1.0, 2.0]
    """
    ranked = np.flatnonzero(~np.isnan(values))
    ranks = np.full(values.shape, np.nan)
    if not ranked.size:
        return ranks
    # best first; a stable sort keeps equal values in the order given
    order = np.argsort(-values[ranked], kind="stable" if method == "ordinal" else None)
    if method == "ordinal":
        ranks[ranked[order]] = np.arange(1.0, order.size + 1.0)
        return ranks
    descending = values[ranked[order]]
    is_new = np.empty(order.size, dtype=bool)  # a value unlike the one before
    is_new[0] = True
    np.not_equal(descending[1:], descending[:-1], out=is_new[1:])
    if method == "dense":
        ranks[ranked[order]] = np.cumsum(is_new).astype(np.float64)
        return ranks
    # a rank is 1 + the place of the first of its equals (one sort, no search)
    place = np.maximum.accumulate(np.where(is_new, np.arange(order.size), 0))
    ranks[ranked[order]] = place + 1.0
    return ranks
