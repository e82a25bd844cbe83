"""Which differences are real: standard errors, 95% intervals and rank intervals.

Standard errors travel in closed form, for every variant at once, along the path
the scores take (``se`` is a raw score's standard error, ``lb`` its lower bound):

* normalization is linear: ``se_norm = 100 * se / (1 - lb)``;
* pooling (pool-then-normalize) takes the sample-weighted mean of independent
  subtasks: ``se_pooled = sqrt(sum(n_k^2 se_k^2)) / sum(n_k)``, then normalizes;
* a benchmark's plain mean of K subtasks: ``se = sqrt(sum(se_k^2)) / K``;
* the average of benchmarks with weights ``w_b``: ``sqrt(sum(w_b^2 se_b^2)) / sum(w_b)``.

Clipping at 0 is not linear. ``max(0, Y)`` is 1-Lipschitz, so it can only shrink
the variance: a score far below its bound is stuck at 0 and varies not at all, a
score at its bound keeps about a third of its variance (0.34 sigma^2), one well
above keeps all of it. We use the exact variance of a censored normal,
``Var(max(0, Y))`` with ``Y ~ N(observed unclipped score, se_norm^2)`` (see
:func:`clipped_variance`); the clipped point estimate itself is the leaderboard's
and is left as is (it is biased upward near the bound, by at most ``0.4 se``).

A missing ``stderr`` is estimated as binomial, ``sqrt(p (1 - p) / (n - 1))`` (what
lm-evaluation-harness reports for accuracies), when ``n_samples`` is known (in
the row, else in the suite); otherwise it counts as 0 and is counted in
``n_stderr_unknown``. A variant with no known standard error at all gets no
interval.

Ranks follow Chatbot Arena: with 95% intervals ``[low, high]`` on the averages, a
variant's best possible rank is 1 + the number of variants whose interval lies
wholly above its own, and its worst is the number of variants whose interval
reaches its ``low``. Variants with the same best rank are pairwise tied (no
interval among them lies above another) and form a ``tie_group``. Overlap of two
95% intervals is a conservative test of a difference; the intervals are
per-variant, not simultaneous.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm.analysis.align import align_rows, align_variants, plain_keys
from lbnorm.errors import InputError
from lbnorm.options import MissingPolicy
from lbnorm.suites import Suite

__all__ = [
    "Uncertainty",
    "clipped_variance",
    "estimate_uncertainty",
    "normal_quantile",
    "rank_intervals",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The columns :func:`estimate_uncertainty` adds per variant, with their docs.
INTERVAL_DOCS: dict[str, str] = {
    "average_stderr": "Standard error of average (closed form; null if no stderr is known).",
    "average_low": "Lower end of the interval on average (default 95%), in [0, 100].",
    "average_high": "Upper end of the interval on average, in [0, 100].",
    "rank_best": "Best rank consistent with the intervals: 1 + variants wholly above.",
    "rank_worst": "Worst rank consistent with the intervals: variants reaching low.",
    "tie_group": "Statistically tied group (1 = top): variants sharing rank_best.",
    "n_stderr_unknown": "Subtask scores without stderr or n_samples (counted as 0).",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Uncertainty:
    """Standard errors per benchmark and intervals per variant.

    Attributes:
        benchmarks: One row per (variant, benchmark) with a score: the keys,
            ``benchmark``, ``normalized_score`` and ``stderr``.
        leaderboard: One row per variant, in leaderboard order: the keys,
            ``rank``, ``average`` and the columns of :data:`INTERVAL_DOCS`.
        benchmark_stderr: The benchmarks' standard errors as the leaderboard lays
            out their scores: one row per leaderboard row, one column per
            benchmark (NaN where unknown).
        level: The intervals' coverage, e.g. 0.95.
    """

    benchmarks: pd.DataFrame
    leaderboard: pd.DataFrame
    benchmark_stderr: pd.DataFrame
    level: float


def normal_quantile(level: float) -> float:
    """Return z such that ``[-z, z]`` holds `level` of a standard normal.

    Examples:
        >>> round(normal_quantile(0.95), 4)
        1.96
    """
    if not 0.0 < level < 1.0:
        msg = f"level must be in (0, 1), got {level!r}.\nHint: use 0.95 for 95% intervals."
        raise ValueError(msg)
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def clipped_variance(mean: npt.ArrayLike, sd: npt.ArrayLike) -> FloatArray:
    """Variance of ``max(0, Y)`` for ``Y ~ N(mean, sd^2)``, elementwise.

    With ``a = mean / sd``, ``P = Phi(a)``, ``Q = 1 - P`` and ``phi`` the normal
    density, ``Var / sd^2 = P + a^2 P Q + a phi (Q - P) - phi^2``: this form has
    no cancellation far from the bound on either side.

    Args:
        mean: Means of the unclipped scores.
        sd: Their standard deviations (0 gives 0).

    Returns:
        The variances of the clipped scores, never above ``sd^2``.

    Examples:
        >>> clipped_variance([50.0, 0.0, -50.0], [2.0, 1.0, 2.0]).round(4).tolist()
        [4.0, 0.3408, 0.0]
    """
    mu = np.asarray(mean, dtype=np.float64)
    sigma = np.asarray(sd, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(sigma > 0, mu / sigma, 0.0)
    upper = _upper_tail(a)
    lower = _upper_tail(-a)
    density = np.exp(-0.5 * a * a) / np.sqrt(2.0 * np.pi)
    ratio = lower + a * a * lower * upper + a * density * (upper - lower) - density**2
    variance = np.clip(ratio, 0.0, 1.0) * sigma**2
    return np.asarray(np.where(sigma > 0, variance, 0.0), dtype=np.float64)


def rank_intervals(
    low: npt.ArrayLike, high: npt.ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Best and worst rank consistent with intervals, and tie groups.

    Args:
        low: Lower interval ends, one per ranked variant.
        high: Upper interval ends (``high >= low``).

    Returns:
        ``rank_best`` (1 + intervals wholly above), ``rank_worst`` (intervals
        reaching ``low``, itself included) and ``tie_group`` (dense rank of
        ``rank_best``: 1 for the top group).

    Examples:
        >>> best, worst, group = rank_intervals([8.0, 7.5, 2.0], [10.0, 9.0, 3.0])
        >>> best.tolist(), worst.tolist(), group.tolist()
        ([1.0, 1.0, 3.0], [2.0, 2.0, 3.0], [1.0, 1.0, 2.0])
    """
    lows = np.asarray(low, dtype=np.float64)
    highs = np.asarray(high, dtype=np.float64)
    n = lows.size
    best = 1.0 + (n - np.searchsorted(np.sort(lows), highs, side="right"))
    worst = n - np.searchsorted(np.sort(highs), lows, side="left").astype(np.float64)
    group = np.unique(best, return_inverse=True)[1].astype(np.float64) + 1.0
    return best.astype(np.float64), worst.astype(np.float64), group


def estimate_uncertainty(
    subtasks: pd.DataFrame,
    leaderboard: pd.DataFrame,
    suite: Suite,
    *,
    missing: MissingPolicy = "exclude",
    level: float = 0.95,
) -> Uncertainty:
    """Propagate subtask standard errors to benchmarks, averages and ranks.

    Args:
        subtasks: The subtask table (keys, ``benchmark``, ``subtask``,
            ``raw_score``, ``stderr``, ``n_samples``), e.g. ``Result.subtasks``.
        leaderboard: The leaderboard (keys, ``rank``, ``average`` and a column
            per benchmark).
        suite: The suite the result was computed under (rules, weights, bounds).
        missing: The missing-data policy the result was computed with.
        level: Coverage of the intervals.

    Returns:
        Standard errors per (variant, benchmark) and intervals per variant.

    Raises:
        InputError: A subtask row's variant is not on the leaderboard, or its
            subtask is not in the suite (the tables do not belong together).

    Examples:
        >>> from lbnorm import RunOptions, normalize_scores
        >>> scores = pd.DataFrame({"model": ["a", "b", "c"], "benchmark": "MMLU-PRO",
        ...     "subtask": "mmlu_pro", "raw_score": [0.55, 0.54, 0.46], "stderr": 0.01})
        >>> result = normalize_scores(scores, options=RunOptions(missing="partial"))
        >>> board = estimate_uncertainty(result.subtasks, result.leaderboard,
        ...     result.suite, missing="partial").leaderboard
        >>> columns = ["model", "average", "average_stderr", "rank_best", "rank_worst", "tie_group"]
        >>> board[columns].round(3)
          model  average  average_stderr  rank_best  rank_worst  tie_group
        0     a   50.000           1.111          1           2          1
        1     b   48.889           1.111          1           2          1
        2     c   40.000           1.111          3           3          2
    """
    z = normal_quantile(level)
    bounds = suite.subtask_table()
    names = suite.benchmark_names
    n_variants, n_benchmarks = len(leaderboard), len(names)
    variant = align_variants(subtasks, leaderboard)
    subtask = align_rows(subtasks, bounds, on=["benchmark", "subtask"])
    if (variant < 0).any() or (subtask < 0).any():
        msg = (
            f"{int((variant < 0).sum())} subtask row(s) have no leaderboard row and "
            f"{int((subtask < 0).sum())} have a subtask outside suite {suite.name!r}.\n"
            "Hint: pass the subtasks and leaderboard of one result, and its suite."
        )
        raise InputError(msg)
    stderr, is_unknown = _raw_stderr(subtasks, bounds, subtask)
    variance = _benchmark_variance(
        subtasks, bounds, suite, variant, subtask, stderr, missing=missing
    )
    scores = leaderboard[names].to_numpy(dtype=np.float64)
    linear = variant * n_benchmarks + bounds["benchmark_index"].to_numpy()[subtask]
    n_known = np.bincount(
        linear, weights=~is_unknown, minlength=n_variants * n_benchmarks
    ).reshape(n_variants, n_benchmarks)
    # no stderr known for any of a benchmark's subtasks: its stderr is unknown
    variance = np.where(np.isnan(scores) | (n_known == 0), np.nan, variance)
    average_se = _average_stderr(variance, scores, suite, missing=missing)
    average_se = np.where(n_known.sum(axis=1) > 0, average_se, np.nan)
    average = leaderboard["average"].to_numpy(dtype=np.float64)
    low = np.clip(average - z * average_se, 0.0, 100.0)
    high = np.clip(average + z * average_se, 0.0, 100.0)
    ranks = _ranks(leaderboard, average, low, high, average_se)
    keys = plain_keys(leaderboard)
    board = keys.assign(
        rank=leaderboard["rank"].astype("Int64").to_numpy(),
        average=average,
        average_stderr=average_se,
        average_low=low,
        average_high=high,
        rank_best=_nullable(ranks[0], "Int64"),
        rank_worst=_nullable(ranks[1], "Int64"),
        tie_group=_nullable(ranks[2], "Int64"),
        n_stderr_unknown=np.bincount(
            variant, weights=is_unknown, minlength=n_variants
        ).astype(np.int64),
    )
    present = ~np.isnan(scores)
    rows, columns = np.nonzero(present)
    benchmarks = (
        keys.iloc[rows]
        .reset_index(drop=True)
        .assign(
            benchmark=np.asarray(names, dtype=object)[columns],
            normalized_score=scores[rows, columns],
            stderr=np.sqrt(variance[rows, columns]),
        )
    )
    board.attrs["column_docs"] = dict(INTERVAL_DOCS)
    return Uncertainty(
        benchmarks=benchmarks,
        leaderboard=board,
        benchmark_stderr=pd.DataFrame(
            np.sqrt(variance), columns=names, index=leaderboard.index
        ),
        level=level,
    )


def _raw_stderr(
    subtasks: pd.DataFrame, bounds: pd.DataFrame, subtask: IntArray
) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
    """Each row's stderr: given, else binomial from n_samples, else 0 (unknown)."""
    raw = subtasks["raw_score"].to_numpy(dtype=np.float64)
    given = _floats(subtasks, "stderr")
    row_samples = _floats(subtasks, "n_samples")
    suite_samples = bounds["n_samples"].to_numpy(dtype=np.float64)[subtask]
    samples = np.where(np.isnan(row_samples), suite_samples, row_samples)
    with np.errstate(invalid="ignore", divide="ignore"):
        binomial = np.sqrt(np.clip(raw * (1.0 - raw), 0.0, None) / (samples - 1.0))
    binomial = np.where(samples > 1, binomial, np.nan)
    stderr = np.where(np.isnan(given), binomial, given)
    is_unknown = np.isnan(stderr)
    return np.where(is_unknown, 0.0, stderr), is_unknown


def _floats(frame: pd.DataFrame, name: str) -> FloatArray:
    if name not in frame.columns:
        return np.full(len(frame), np.nan)
    return np.asarray(frame[name].to_numpy(dtype=np.float64, na_value=np.nan))


def _benchmark_variance(
    subtasks: pd.DataFrame,
    bounds: pd.DataFrame,
    suite: Suite,
    variant: IntArray,
    subtask: IntArray,
    stderr: FloatArray,
    *,
    missing: MissingPolicy,
) -> FloatArray:
    """Variance of each (variant, benchmark) score, shape (n_variants, n_benchmarks)."""
    n_variants = int(variant.max(initial=-1)) + 1
    n_benchmarks = len(suite.benchmarks)
    benchmark = bounds["benchmark_index"].to_numpy(dtype=np.int64)[subtask]
    lower = bounds["lower_bound"].to_numpy(dtype=np.float64)[subtask]
    weight = bounds["n_samples"].to_numpy(dtype=np.float64)[subtask]
    raw = subtasks["raw_score"].to_numpy(dtype=np.float64)
    linear = variant * n_benchmarks + benchmark
    shape = (n_variants, n_benchmarks)

    def total(values: FloatArray | None) -> FloatArray:
        summed = np.bincount(
            linear, weights=values, minlength=n_variants * n_benchmarks
        )
        return summed.astype(np.float64).reshape(shape)

    is_pooled = np.array(
        [b.aggregation == "pool-then-normalize" for b in suite.benchmarks]
    )
    expected = np.bincount(bounds["benchmark_index"], minlength=n_benchmarks)
    suite_weight = np.bincount(
        bounds["benchmark_index"], weights=bounds["n_samples"], minlength=n_benchmarks
    )
    # normalize-then-average: clipped subtask variances, mean over the subtasks
    subtask_variance = clipped_variance(
        100.0 * (raw - lower) / (1.0 - lower), 100.0 * stderr / (1.0 - lower)
    )
    count = total(None)
    divisor = np.broadcast_to(expected, shape) if missing == "zero" else count
    # pool-then-normalize: pooled raw and its stderr, then one normalization
    pooled_weight = (
        np.broadcast_to(suite_weight, shape) if missing == "zero" else total(weight)
    )
    bound = np.zeros(n_benchmarks)
    bound[bounds["benchmark_index"].to_numpy()] = bounds["lower_bound"].to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        averaged = total(subtask_variance) / divisor**2
        pooled = total(raw * weight) / pooled_weight
        pooled_se = np.sqrt(total((weight * stderr) ** 2)) / pooled_weight
        pooled_variance = clipped_variance(
            100.0 * (pooled - bound) / (1.0 - bound), 100.0 * pooled_se / (1.0 - bound)
        )
    return np.where(is_pooled, pooled_variance, averaged)


def _average_stderr(
    variance: FloatArray, scores: FloatArray, suite: Suite, *, missing: MissingPolicy
) -> FloatArray:
    """Stderr of the weighted average; an unknown benchmark stderr counts as 0."""
    weight = np.array([b.weight for b in suite.benchmarks], dtype=np.float64)
    is_present = ~np.isnan(scores)
    total = np.where(is_present & ~np.isnan(variance), variance * weight**2, 0.0).sum(
        axis=1
    )
    divisor = (
        np.full(len(scores), weight.sum()) if missing == "zero" else is_present @ weight
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        stderr = np.sqrt(total) / divisor
    if missing == "exclude":
        stderr = np.where(is_present.all(axis=1), stderr, np.nan)
    return np.asarray(stderr, dtype=np.float64)


def _ranks(
    leaderboard: pd.DataFrame,
    average: FloatArray,
    low: FloatArray,
    high: FloatArray,
    stderr: FloatArray,
) -> list[FloatArray]:
    """Rank intervals and tie groups among ranked variants.

    A ranked variant without a stderr counts as a point for the others' ranks
    and gets no interval itself.
    """
    is_ranked = leaderboard["rank"].notna().to_numpy() & ~np.isnan(average)
    has_interval = is_ranked & ~np.isnan(stderr)
    is_point = np.isnan(stderr)
    ranked = rank_intervals(
        np.where(is_point, average, low)[is_ranked],
        np.where(is_point, average, high)[is_ranked],
    )
    columns = []
    for values in ranked:
        column = np.full(len(average), np.nan)
        column[is_ranked] = values
        columns.append(np.where(has_interval, column, np.nan))
    return columns


def _upper_tail(x: FloatArray) -> FloatArray:
    """``1 - Phi(x)``, vectorized, to a relative error below 1.2e-7 in both tails.

    Numerical Recipes' Chebyshev fit of ``erfc`` (numpy has no ``erf``).
    """
    z = np.abs(x) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -0.82215223 + t * 0.17087277
    for coefficient in (
        1.48851587,
        -1.13520398,
        0.27886807,
        -0.18628806,
        0.09678418,
        0.37409196,
        1.00002368,
        -1.26551223,
    ):
        poly = coefficient + t * poly
    erfc = t * np.exp(-z * z + poly)
    return np.asarray(np.where(x >= 0, 0.5 * erfc, 1.0 - 0.5 * erfc), dtype=np.float64)


def _nullable(
    values: FloatArray, dtype: Literal["Int64", "boolean"]
) -> pd.api.extensions.ExtensionArray:
    """Whole numbers (or 0/1) with NaN as a nullable pandas array (NaN becomes NA)."""
    return pd.Series(values, dtype="float64").astype(dtype).array
