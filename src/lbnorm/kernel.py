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
    "BenchmarkArrays",
    "FixedPoint",
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


class FixedPoint:
    """Scores as exact fixed-point integers, so that every sum is exact.

    A score ``x`` of a subtask of benchmark ``b`` becomes ``rint(x * 2**k_b)``
    (for a pooled benchmark, ``rint(x * n_samples * 2**k_b)``), held in float64:
    ``k_b`` is the largest power of two that keeps the benchmark's whole sum
    (every subtask at 1.0; for pooling, every sample) below 2**53, so adding such
    integers is exact in any order. Sums then do not depend on row order, batch
    boundaries, worker count or engine, bit for bit, and identical submissions
    tie exactly. The rounding is at most 2**-k_b per term, about 1e-16 of a
    benchmark's score for the v2 suite. Two terms per score: the raw score (x
    its samples when pooled) and the clipped normalized score / 100.

    Attributes:
        scale: Per benchmark, ``2**k_b``.
        multiplier: Per subtask, what its raw score is multiplied by.
        reciprocal: Per subtask, ``scale / (1 - lower_bound)``.
        lower_bound: Per subtask, its bound.
    """

    __slots__ = ("lower_bound", "multiplier", "reciprocal", "scale")

    def __init__(self, suite: SuiteArrays) -> None:
        n_benchmarks = suite.is_pooled.shape[0]
        per_benchmark = np.bincount(suite.benchmark_index, minlength=n_benchmarks)
        total = np.bincount(
            suite.benchmark_index, weights=suite.n_samples, minlength=n_benchmarks
        )
        sum_bound = np.where(suite.is_pooled, np.maximum(total, 1.0), per_benchmark)
        self.scale: FloatArray = np.exp2(
            53.0 - np.ceil(np.log2(np.maximum(sum_bound, 1.0)))
        )
        scale = self.scale[suite.benchmark_index]
        self.multiplier: FloatArray = np.where(
            suite.is_pooled[suite.benchmark_index], suite.n_samples * scale, scale
        )
        self.lower_bound: FloatArray = suite.lower_bound
        self.reciprocal: FloatArray = scale / (1.0 - suite.lower_bound)

    def terms(
        self, raw: FloatArray, subtask: IntArray | slice
    ) -> tuple[FloatArray, FloatArray]:
        """The fixed-point terms of `raw` scores of the given subtasks.

        Args:
            raw: Raw scores (any shape whose last axis matches `subtask`).
            subtask: Each score's subtask code (or a slice of the suite's
                subtasks for a dense block).

        Returns:
            The raw term and the normalized term, as integers in float64.
        """
        fraction = raw - self.lower_bound[subtask]
        fraction *= self.reciprocal[subtask]
        np.maximum(fraction, 0.0, out=fraction)
        np.rint(fraction, out=fraction)
        weighted = raw * self.multiplier[subtask]
        np.rint(weighted, out=weighted)
        return weighted, fraction


def dense_partials(raw: FloatArray, suite: SuiteArrays) -> Partials:
    """Sum a dense ``(n_variants, n_subtasks)`` matrix of raw scores (NaN = absent).

    The sums are exact (:class:`FixedPoint`), so they equal the streaming
    engine's, bit for bit, and do not depend on the order scores arrived in.

    Args:
        raw: Raw scores, NaN where absent.
        suite: The suite's arrays.

    Returns:
        The partial sums.
    """
    fixed = FixedPoint(suite)
    n_variants = raw.shape[0]
    n_benchmarks = suite.is_pooled.shape[0]
    partials = Partials.zeros(n_variants, n_benchmarks)
    starts = np.searchsorted(suite.benchmark_index, np.arange(n_benchmarks + 1))
    for index in range(n_benchmarks):  # a suite's benchmarks, not its models
        columns = slice(int(starts[index]), int(starts[index + 1]))  # contiguous
        block = raw[:, columns]
        is_present = ~np.isnan(block)
        block = np.where(is_present, block, 0.0)
        raw_term, normalized_term = fixed.terms(block, columns)
        raw_sum = raw_term.sum(axis=1) / fixed.scale[index]
        partials.count[:, index] = is_present.sum(axis=1)
        partials.normalized[:, index] = normalized_term.sum(axis=1) * (
            100.0 / fixed.scale[index]
        )
        partials.raw[:, index] = raw_sum
        partials.weighted_raw[:, index] = raw_sum
        if suite.is_pooled[index]:  # only pooling reads the sample weights
            partials.weight[:, index] = is_present @ suite.n_samples[columns]
    return partials


def aggregate_benchmarks(
    raw: FloatArray, suite: SuiteArrays, *, missing: MissingPolicy
) -> BenchmarkArrays:
    """Reduce a dense ``(n_variants, n_subtasks)`` matrix (NaN = absent) to benchmarks.

    :func:`dense_partials` then :func:`finish_benchmarks`.

    Examples:
        >>> arrays = SuiteArrays(lower_bound=np.array([0.5, 0.2, 1 / 3]),
        ...     n_samples=np.zeros(3), benchmark_index=np.array([0, 0, 0]),
        ...     is_pooled=np.array([False]), weight=np.array([1.0]))
        >>> result = aggregate_benchmarks(np.array([[0.7, 0.4, 0.6]]), arrays,
        ...     missing="exclude")
        >>> result.normalized.round(10).tolist()
        [[35.0]]
    """
    return finish_benchmarks(dense_partials(raw, suite), suite, missing=missing)


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
    """Rank values, highest first; equal values share the smallest rank; NaN stays unranked.

    A tie is exact equality: every engine sums scores exactly
    (:class:`FixedPoint`), so equal inputs give bit-equal averages whatever the
    row order, batching or engine, and two different averages never tie.

    Args:
        values: Scores; NaN marks an unranked entry.

    Returns:
        Ranks as floats (1.0 is best), NaN where the value is NaN.

    Examples:
        >>> rank_descending(np.array([3.0, 5.0, 3.0, np.nan, 1.0])).tolist()
        [2.0, 1.0, 2.0, nan, 4.0]
        >>> rank_descending(np.array([10.0000000005001, 10.0000000004999])).tolist()
        [1.0, 2.0]
    """
    is_ranked = ~np.isnan(values)
    descending = np.sort(-values[is_ranked])
    ranks = np.full(values.shape, np.nan)
    ranks[is_ranked] = (
        np.searchsorted(descending, -values[is_ranked], side="left") + 1.0
    )
    return ranks
