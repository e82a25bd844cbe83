"""Numpy kernels on integer codes: normalize, clip, pool, group means, ranks.

No I/O and no pandas: every function takes arrays indexed by a model-variant code
(``0..n_variants-1``) and a subtask code (the subtask's row in the suite's
lower-bound table) and returns arrays. The per-benchmark loop runs over a suite's
handful of benchmarks, never over models or rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "BenchmarkArrays",
    "MissingPolicy",
    "SuiteArrays",
    "aggregate_benchmarks",
    "average_benchmarks",
    "normalize",
    "rank_descending",
    "scatter_dense",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

#: What to do with a model variant that lacks a subtask or a benchmark:
#: ``exclude`` leaves the incomplete benchmark / average null and the variant
#: unranked (the Open LLM Leaderboard shows no partial rows); ``partial``
#: averages what is present; ``zero`` counts what is missing as 0.
MissingPolicy = Literal["exclude", "partial", "zero"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SuiteArrays:
    """A suite as arrays: subtasks in suite order, grouped by benchmark.

    Attributes:
        lower_bound: Per subtask, the random baseline in [0, 1).
        n_samples: Per subtask, item counts (pooling weights; 0 if unknown).
        benchmark_index: Per subtask, its benchmark's position.
        is_pooled: Per benchmark, True for pool-then-normalize.
        weight: Per benchmark, its weight in the average.
    """

    lower_bound: FloatArray
    n_samples: FloatArray
    benchmark_index: IntArray
    is_pooled: BoolArray
    weight: FloatArray


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkArrays:
    """Benchmark-level results, shape ``(n_variants, n_benchmarks)``.

    Attributes:
        raw: Raw value as shown: plain mean, or pooled mean for pooled benchmarks.
        normalized: Score 0-100 by the benchmark's rule; NaN where not computable.
        n_present: Subtasks present.
        n_expected: Subtasks in the suite, per benchmark (shape ``(n_benchmarks,)``).
    """

    raw: FloatArray
    normalized: FloatArray
    n_present: IntArray
    n_expected: IntArray


def normalize(raw: FloatArray, lower_bound: FloatArray) -> tuple[FloatArray, BoolArray]:
    """Rescale raw scores above their random baseline to 0-100, clipping at 0.

    Args:
        raw: Raw scores in [0, 1].
        lower_bound: Baselines in [0, 1), broadcastable against `raw`.

    Returns:
        ``max(0, (raw - lb) / (1 - lb)) * 100`` and the mask of clipped scores
        (raw strictly below its bound).

    Examples:
        >>> normalize(np.array([0.6, 0.1]), np.array([0.25, 0.25]))[0].round(2)
        array([46.67,  0.  ])
    """
    normalized = (raw - lower_bound) / (1.0 - lower_bound) * 100.0
    is_clipped = raw < lower_bound
    return np.maximum(normalized, 0.0), is_clipped


def scatter_dense(
    values: FloatArray, variant: IntArray, subtask: IntArray, shape: tuple[int, int]
) -> FloatArray:
    """Place row values into a ``(n_variants, n_subtasks)`` matrix, NaN where absent.

    Args:
        values: One value per row.
        variant: Each row's variant code.
        subtask: Each row's subtask code; (variant, subtask) pairs must be unique.
        shape: ``(n_variants, n_subtasks)``.

    Returns:
        The dense matrix.
    """
    matrix = np.full(shape, np.nan)
    matrix[variant, subtask] = values
    return matrix


def aggregate_benchmarks(
    raw: FloatArray,
    normalized: FloatArray,
    suite: SuiteArrays,
    *,
    missing: MissingPolicy,
) -> BenchmarkArrays:
    """Reduce subtask matrices to benchmark scores by each benchmark's rule.

    normalize-then-average: the plain mean of the subtasks' normalized scores
    (raw shown: plain mean of raw). pool-then-normalize: the sample-weighted mean
    of raw scores, normalized and clipped once.

    Args:
        raw: ``(n_variants, n_subtasks)`` raw scores, NaN where absent.
        normalized: The same shape, normalized and clipped per subtask.
        suite: The suite's arrays.
        missing: Policy for absent subtasks (see :data:`MissingPolicy`).

    Returns:
        The benchmark-level arrays.

    Examples:
        >>> arrays = SuiteArrays(lower_bound=np.array([0.5, 0.2, 1 / 3]),
        ...     n_samples=np.zeros(3), benchmark_index=np.array([0, 0, 0]),
        ...     is_pooled=np.array([False]), weight=np.array([1.0]))
        >>> raw = np.array([[0.7, 0.4, 0.6]])
        >>> result = aggregate_benchmarks(raw, normalize(raw, arrays.lower_bound)[0],
        ...     arrays, missing="exclude")
        >>> result.normalized.round(10).tolist()
        [[35.0]]
    """
    n_variants = raw.shape[0]
    n_benchmarks = suite.is_pooled.shape[0]
    out_raw = np.full((n_variants, n_benchmarks), np.nan)
    out_normalized = np.full((n_variants, n_benchmarks), np.nan)
    n_present = np.zeros((n_variants, n_benchmarks), dtype=np.int64)
    n_expected = np.bincount(suite.benchmark_index, minlength=n_benchmarks).astype(
        np.int64
    )
    for index in range(n_benchmarks):  # a suite's benchmarks, not its models
        columns = np.flatnonzero(suite.benchmark_index == index)
        block = raw[:, columns]
        is_present = ~np.isnan(block)
        count = is_present.sum(axis=1)
        n_present[:, index] = count
        block = np.where(is_present, block, 0.0)
        normalized_block = np.where(is_present, normalized[:, columns], 0.0)
        if missing == "zero":  # an absent subtask scores 0, raw and normalized
            is_present = np.ones_like(is_present)
        used = is_present.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            if suite.is_pooled[index]:
                weights = suite.n_samples[columns]
                shown = (block @ weights) / (is_present @ weights)
                bound = suite.lower_bound[columns[0]]
                score = normalize(shown, np.full_like(shown, bound))[0]
            else:
                shown = block.sum(axis=1) / used
                score = normalized_block.sum(axis=1) / used
        if missing == "exclude":
            score = np.where(count == columns.size, score, np.nan)
        out_raw[:, index] = np.where(count > 0, shown, np.nan)
        out_normalized[:, index] = np.where(count > 0, score, np.nan)
    return BenchmarkArrays(
        raw=out_raw,
        normalized=out_normalized,
        n_present=n_present,
        n_expected=n_expected,
    )


def average_benchmarks(
    normalized: FloatArray, weight: FloatArray, *, missing: MissingPolicy
) -> FloatArray:
    """Return each variant's weighted mean of benchmark scores.

    Args:
        normalized: ``(n_variants, n_benchmarks)`` scores, NaN where missing.
        weight: Per-benchmark weights.
        missing: ``exclude``: NaN if any is missing; ``partial``: mean of those
            present; ``zero``: missing count as 0.

    Returns:
        One average per variant.

    Examples:
        >>> average_benchmarks(np.array([[10.0, np.nan]]), np.ones(2), missing="zero")
        array([5.])
    """
    is_present = ~np.isnan(normalized)
    filled = np.where(is_present, normalized, 0.0)
    weighted_sum = filled @ weight
    if missing == "zero":
        return np.asarray(weighted_sum / weight.sum(), dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        average = weighted_sum / (is_present @ weight)
    if missing == "exclude":
        average = np.where(is_present.all(axis=1), average, np.nan)
    return average


def rank_descending(values: FloatArray) -> npt.NDArray[np.float64]:
    """Rank values, highest first; ties share the smallest rank; NaN stays unranked.

    Args:
        values: Scores; NaN marks an unranked entry.

    Returns:
        Ranks as floats (1.0 is best), NaN where the value is NaN.

    Examples:
        >>> rank_descending(np.array([3.0, 5.0, 3.0, np.nan, 1.0])).tolist()
        [2.0, 1.0, 2.0, nan, 4.0]
    """
    is_ranked = ~np.isnan(values)
    descending = np.sort(-values[is_ranked])
    ranks = np.full(values.shape, np.nan)
    ranks[is_ranked] = (
        np.searchsorted(descending, -values[is_ranked], side="left") + 1.0
    )
    return ranks
