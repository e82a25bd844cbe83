"""Percentile intervals over bootstrap rounds, the Arena's rank (UB), predicted win rates."""

from __future__ import annotations

import numpy as np

from lbnorm.ratings.options import BASE, SCALE, FloatArray, IntArray

__all__ = [
    "percentile_intervals",
    "predicted_win_rates",
    "rank_by_rating",
    "rank_with_uncertainty",
    "win_chance",
]

_QUANTILES = (0.025, 0.975)


def percentile_intervals(samples: FloatArray) -> tuple[FloatArray, FloatArray]:
    """2.5th and 97.5th percentiles per column, skipping NaN, honouring +-inf.

    Linear interpolation between order statistics, as ``pandas`` and ``numpy``
    do (and equal to ``np.quantile`` when all values are finite).

    Args:
        samples: ``rounds x k``.

    Returns:
        ``(lower, upper)``; NaN for a column with no values.

    Examples:
        >>> lower, upper = percentile_intervals(np.array([[1.0], [2.0], [np.inf]]))
        >>> lower.tolist(), upper.tolist()
        ([1.05], [inf])
    """
    if np.isfinite(samples).all():
        lower, upper = np.quantile(samples, _QUANTILES, axis=0)
        return lower, upper
    ordered = np.sort(samples, axis=0)  # NaN last
    n_valid = (~np.isnan(samples)).sum(axis=0)
    bounds = []
    for q in _QUANTILES:
        position = q * np.maximum(n_valid - 1, 0)
        below = np.floor(position).astype(np.int64)
        above = np.minimum(below + 1, np.maximum(n_valid - 1, 0))
        fraction = position - below
        low = np.take_along_axis(ordered, below[None], axis=0)[0]
        high = np.take_along_axis(ordered, above[None], axis=0)[0]
        with np.errstate(invalid="ignore"):
            value = low + (high - low) * fraction
        value = np.where((fraction == 0) | (low == high), low, value)
        value = np.where(np.isneginf(low), -np.inf, value)
        value = np.where(np.isposinf(high) & (fraction > 0), np.inf, value)
        value[n_valid == 0] = np.nan
        bounds.append(value)
    return bounds[0], bounds[1]


def rank_with_uncertainty(lower: FloatArray, upper: FloatArray) -> IntArray:
    """The Arena's rank (UB): 1 + the number of models whose lower bound is above this upper bound.

    Args:
        lower: Lower interval bounds per model.
        upper: Upper interval bounds per model.

    Returns:
        Ranks (1 is best); the best rank the intervals allow.

    Examples:
        >>> rank_with_uncertainty(np.array([10.0, 5.0, 0.0]), np.array([12.0, 11.0, 4.0])).tolist()
        [1, 1, 3]
    """
    ordered = np.sort(lower[~np.isnan(lower)])
    above = len(ordered) - np.searchsorted(ordered, upper, side="right")
    return (1 + above).astype(np.int64)


def rank_by_rating(rating: FloatArray) -> IntArray:
    """1 + the number of models with a strictly higher rating (ratings are never NaN)."""
    return rank_with_uncertainty(rating, rating)


def predicted_win_rates(rating: FloatArray) -> FloatArray:
    """``P[i, j]``: the probability that ``i`` beats ``j`` (a tie counting half).

    Args:
        rating: Ratings on the 400-point scale.

    Returns:
        ``k x k``; ``P + P.T == 1`` and the diagonal is 0.5.

    Examples:
        >>> predicted_win_rates(np.array([1400.0, 1000.0])).round(4).tolist()
        [[0.5, 0.9091], [0.0909, 0.5]]
    """
    return win_chance(rating[:, None], rating[None, :])


def win_chance(rating: FloatArray, opponent: FloatArray | float) -> FloatArray:
    """The predicted chance that a model rated `rating` beats one rated `opponent`.

    ``1 / (1 + 10 ** ((opponent - rating) / 400))``, broadcast; a tie counts half.

    Examples:
        >>> win_chance(np.array([1400.0, 1000.0]), 1000.0).round(4).tolist()
        [0.9091, 0.5]
    """
    with np.errstate(over="ignore", invalid="ignore"):
        chance: FloatArray = 1.0 / (1.0 + np.power(BASE, (opponent - rating) / SCALE))
    return chance
