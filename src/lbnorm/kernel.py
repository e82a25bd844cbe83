"""Numpy kernels on integer codes: normalize, clip, pool, group means, ranks.

No I/O and no pandas: every function takes arrays indexed by a model-variant code
(``0..n_variants-1``) and a subtask code (the subtask's row in the suite's
lower-bound table) and returns arrays. The per-benchmark loop runs over a suite's
handful of benchmarks, never over models or rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lbnorm.options import MissingPolicy

__all__ = [
    "RANK_DECIMALS",
    "BenchmarkArrays",
    "Partials",
    "SuiteArrays",
    "aggregate_benchmarks",
    "average_benchmarks",
    "dense_partials",
    "finish_benchmarks",
    "normalize",
    "rank_descending",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Partials:
    """Additive partial sums per (variant, benchmark), shape ``(n_variants, n_benchmarks)``.

    Sums over disjoint sets of rows add up (so batches, or machines, could each
    build their own); :func:`finish_benchmarks` turns the total into benchmark
    scores.

    Attributes:
        count: Subtasks present.
        raw: Sum of raw scores.
        normalized: Sum of normalized (clipped) subtask scores.
        weighted_raw: Sum of raw x n_samples (for pooling).
        weight: Sum of n_samples of the subtasks present.
    """

    count: FloatArray
    raw: FloatArray
    normalized: FloatArray
    weighted_raw: FloatArray
    weight: FloatArray

    @classmethod
    def zeros(cls, n_variants: int, n_benchmarks: int) -> Partials:
        """Return empty partials for `n_variants` x `n_benchmarks`."""
        shape = (n_variants, n_benchmarks)
        return cls(
            count=np.zeros(shape),
            raw=np.zeros(shape),
            normalized=np.zeros(shape),
            weighted_raw=np.zeros(shape),
            weight=np.zeros(shape),
        )


def finish_benchmarks(
    partials: Partials, suite: SuiteArrays, *, missing: MissingPolicy
) -> BenchmarkArrays:
    """Turn partial sums into benchmark scores by each benchmark's rule.

    normalize-then-average: the plain mean of the subtasks' normalized scores
    (raw shown: plain mean of raw). pool-then-normalize: the sample-weighted mean
    of raw scores, normalized and clipped once.

    Args:
        partials: Sums over all rows.
        suite: The suite's arrays.
        missing: Policy for absent subtasks (see :data:`MissingPolicy`).

    Returns:
        The benchmark-level arrays.
    """
    n_benchmarks = suite.is_pooled.shape[0]
    expected = np.bincount(suite.benchmark_index, minlength=n_benchmarks).astype(
        np.int64
    )
    total_weight = np.bincount(
        suite.benchmark_index, weights=suite.n_samples, minlength=n_benchmarks
    )
    bound = np.zeros(n_benchmarks)
    bound[suite.benchmark_index] = suite.lower_bound  # one bound per pooled benchmark
    count = partials.count
    # zero: an absent subtask scores 0, so divide by what the suite expects
    used = np.broadcast_to(expected, count.shape) if missing == "zero" else count
    weight = (
        np.broadcast_to(total_weight, count.shape)
        if missing == "zero"
        else partials.weight
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = partials.weighted_raw / weight
        shown = np.where(suite.is_pooled, pooled, partials.raw / used)
        averaged = partials.normalized / used
        pooled_score = normalize(pooled, np.broadcast_to(bound, pooled.shape))[0]
    score = np.where(suite.is_pooled, pooled_score, averaged)
    if missing == "exclude":
        score = np.where(count == expected, score, np.nan)
    is_present = count > 0
    return BenchmarkArrays(
        raw=np.where(is_present, shown, np.nan),
        normalized=np.where(is_present, score, np.nan),
        n_present=count.astype(np.int64),
        n_expected=expected,
    )


def dense_partials(
    raw: FloatArray, normalized: FloatArray, suite: SuiteArrays
) -> Partials:
    """Sum dense ``(n_variants, n_subtasks)`` matrices (NaN = absent) into partials.

    Each cell is summed in suite subtask order, so the result does not depend on
    the order the scores arrived in (byte-identical outputs for shuffled inputs).

    Args:
        raw: Raw scores, NaN where absent.
        normalized: Normalized, clipped scores, NaN where absent.
        suite: The suite's arrays.

    Returns:
        The partial sums.
    """
    n_variants = raw.shape[0]
    n_benchmarks = suite.is_pooled.shape[0]
    partials = Partials.zeros(n_variants, n_benchmarks)
    for index in range(n_benchmarks):  # a suite's benchmarks, not its models
        columns = np.flatnonzero(suite.benchmark_index == index)
        block = raw[:, columns]
        is_present = ~np.isnan(block)
        block = np.where(is_present, block, 0.0)
        samples = suite.n_samples[columns]
        partials.count[:, index] = is_present.sum(axis=1)
        partials.raw[:, index] = block.sum(axis=1)
        partials.normalized[:, index] = np.where(
            is_present, normalized[:, columns], 0.0
        ).sum(axis=1)
        partials.weighted_raw[:, index] = block @ samples
        partials.weight[:, index] = is_present @ samples
    return partials


def aggregate_benchmarks(
    raw: FloatArray,
    normalized: FloatArray,
    suite: SuiteArrays,
    *,
    missing: MissingPolicy,
) -> BenchmarkArrays:
    """Reduce dense ``(n_variants, n_subtasks)`` matrices (NaN = absent) to benchmarks.

    :func:`dense_partials` then :func:`finish_benchmarks`.

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
    partials = dense_partials(raw, normalized, suite)
    return finish_benchmarks(partials, suite, missing=missing)


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


#: Scores (0-100) equal to this many decimals tie: a sum's rounding depends on
#: the order of its terms (in-memory, streamed and Dask runs add them
#: differently), and noise at 1e-13 must not order two models.
RANK_DECIMALS = 9


def rank_descending(values: FloatArray) -> npt.NDArray[np.float64]:
    """Rank values, highest first; ties share the smallest rank; NaN stays unranked.

    Values equal to :data:`RANK_DECIMALS` decimals tie.

    Args:
        values: Scores; NaN marks an unranked entry.

    Returns:
        Ranks as floats (1.0 is best), NaN where the value is NaN.

    Examples:
        >>> rank_descending(np.array([3.0, 5.0, 3.0, np.nan, 1.0])).tolist()
        [2.0, 1.0, 2.0, nan, 4.0]
        >>> rank_descending(np.array([0.1 + 0.2, 0.3])).tolist()
        [1.0, 1.0]
    """
    is_ranked = ~np.isnan(values)
    values = np.round(values, RANK_DECIMALS)
    descending = np.sort(-values[is_ranked])
    ranks = np.full(values.shape, np.nan)
    ranks[is_ranked] = (
        np.searchsorted(descending, -values[is_ranked], side="left") + 1.0
    )
    return ranks
