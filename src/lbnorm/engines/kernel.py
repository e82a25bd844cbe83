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

from lbnorm.core.options import MissingPolicy
from lbnorm.engines.stderr import (
    binomial_stderr,
    clipped_variance,
    pooled_sample_stderr,
    score_variance,
)
from lbnorm.suites import SuiteArrays

__all__ = [
    "SIZE_HEADROOM",
    "SUMS",
    "BenchmarkArrays",
    "FixedPoint",
    "Partials",
    "SuiteArrays",
    "dense_partials",
    "finish_benchmarks",
    "normalize",
    "normalize_rows",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkArrays:
    """Benchmark-level results, shape ``(n_variants, n_benchmarks)``.

    Attributes:
        raw: Raw value as shown: plain mean, or pooled mean for pooled benchmarks.
        normalized: Score 0-100 by the benchmark's rule; NaN where not computable.
        n_present: Subtasks present.
        n_expected: Subtasks in the suite, per benchmark (shape ``(n_benchmarks,)``).
        stderr: Standard error of `normalized`; NaN where a subtask's is unknown.
        raw_stderr: Standard error of `raw`; NaN where a subtask's is unknown.
        n_estimated: Subtasks whose stderr was estimated as binomial.
        has_other_sizes: A pooled benchmark weighted by sample sizes other than
            the suite's (the input's ``n_samples``: a ``--limit`` run).
    """

    raw: FloatArray
    normalized: FloatArray
    n_present: IntArray
    n_expected: IntArray
    stderr: FloatArray
    raw_stderr: FloatArray
    n_estimated: IntArray
    has_other_sizes: BoolArray


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
    return np.maximum(normalized, 0.0, out=normalized), raw < lower_bound


def normalize_rows(
    raw: FloatArray, subtask: IntArray, suite: SuiteArrays
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Each score's normalized value, the bound shown beside it, and whether it clipped.

    The subtask table's columns. Fractions take :func:`normalize`'s arithmetic;
    a benchmark with a declared range takes ``(raw - offset) / (1 - b) * factor``
    (:class:`lbnorm.suites.Scales`: on ``[0, 100]`` with bound 0, the raw value
    itself), and a statistic keeps its raw value.

    Args:
        raw: Raw scores.
        subtask: Each score's subtask code.
        suite: The suite's arrays.

    Returns:
        The normalized scores, the bounds in raw units, the clipped mask.

    Examples:
        >>> arrays = SuiteArrays(lower_bound=np.array([0.25]), n_samples=np.zeros(1),
        ...     benchmark_index=np.zeros(1, np.int64), is_pooled=np.array([False]),
        ...     weight=np.ones(1))
        >>> normalize_rows(np.array([0.625, 0.1]), np.zeros(2, np.int64), arrays)[0].tolist()
        [50.0, 0.0]
    """
    lower_bound = suite.lower_bound[subtask]
    scales = suite.scales
    if scales is None:
        normalized, is_clipped = normalize(raw, lower_bound)
        return normalized, lower_bound, is_clipped
    offset = scales.offset[subtask]
    normalized = (raw - offset) / (1.0 - lower_bound) * scales.factor[subtask]
    is_statistic = scales.is_statistic[subtask]
    np.maximum(normalized, np.where(is_statistic, -np.inf, 0.0), out=normalized)
    return normalized, offset, (raw < offset) & ~is_statistic


#: The rows of :class:`Partials`' sums, in order.
SUMS = (
    "raw",  # fixed point: the raw score, x its sample size when pooled
    "normalized",  # fixed point: the clipped normalized score (normalize-then-average)
    "weight",  # what the input's sample sizes add to the suite's (pooled), exact
    "variance",  # fixed point: Var(clipped normalized) or (n - 1) n se^2 (pooled)
    "raw_variance",  # fixed point: se^2 (normalize-then-average)
    "n_unknown",  # subtasks without a stderr or a sample size to estimate one
    "n_estimated",  # subtasks whose stderr was estimated as binomial
    "n_other_sizes",  # pooled subtasks sized by the input, not the suite
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Partials:
    """Additive sums per (variant, benchmark), shape ``(n_variants, n_benchmarks)``.

    Sums over disjoint sets of rows add up (so batches, or machines, could each
    build their own); :func:`finish_benchmarks` turns the total into benchmark
    scores and their standard errors.

    Attributes:
        count: Subtasks present.
        sums: Per name of :data:`SUMS`, the sum over the subtasks present, in
            plain units (fixed-point sums already divided by their scale).
        values: ``(n_variants, n_subtasks)`` normalized subtask scores (NaN:
            absent), kept when the suite's board reads them; else None.
    """

    count: FloatArray
    sums: dict[str, FloatArray]
    values: FloatArray | None = None


def finish_benchmarks(
    partials: Partials, suite: SuiteArrays, *, missing: MissingPolicy
) -> BenchmarkArrays:
    """Turn partial sums into benchmark scores and their standard errors.

    normalize-then-average: the plain mean of the subtasks' normalized scores
    (raw shown: plain mean of raw). pool-then-normalize: the sample-weighted mean
    of raw scores, normalized and clipped once; its standard error is the
    harness's ``pooled_sample_stderr`` (see :mod:`lbnorm.engines.stderr`).

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
    pooled = _PooledScales.of(suite)
    count, sums = partials.count, partials.sums
    shape = count.shape
    raw, normalized, stderr, raw_stderr = (np.empty(shape) for _ in range(4))
    # a benchmark (a column) at a time, by its own rule only: the same arithmetic
    # per element as whole matrices, on vectors small enough to stay in cache
    for index in range(n_benchmarks):
        policy = suite.missing_of(index, missing)
        is_zero = policy == "zero"  # an absent subtask scores 0: divide by the suite's
        column = count[:, index]
        used = np.full_like(column, expected[index]) if is_zero else column
        with np.errstate(invalid="ignore", divide="ignore"):
            if suite.is_pooled[index]:
                shown, score, column_se, column_raw_se = pooled.finish(
                    sums, index, used, is_zero=is_zero
                )
            else:
                shown, score, column_se, column_raw_se = _finish_plain(
                    sums, index, used
                )
        if policy == "exclude":
            score = np.where(column == expected[index], score, np.nan)
        is_present = column > 0
        is_known = sums["n_unknown"][:, index] == 0
        raw[:, index] = np.where(is_present, shown, np.nan)
        normalized[:, index] = np.where(is_present, score, np.nan)
        stderr[:, index] = np.where(
            is_present & is_known & ~np.isnan(score), column_se, np.nan
        )
        raw_stderr[:, index] = np.where(is_present & is_known, column_raw_se, np.nan)
    return BenchmarkArrays(
        raw=raw,
        normalized=normalized,
        n_present=count.astype(np.int64),
        n_expected=expected,
        stderr=stderr,
        raw_stderr=raw_stderr,
        n_estimated=sums["n_estimated"].astype(np.int64),
        has_other_sizes=sums["n_other_sizes"] > 0,
    )


#: Per name of :data:`SUMS`, a sum per (variant, benchmark) (:attr:`Partials.sums`).
_Sums = dict[str, FloatArray]
#: A benchmark column's raw mean, score, score stderr and raw stderr.
_Column = tuple[FloatArray, FloatArray, FloatArray, FloatArray]


def _finish_plain(sums: _Sums, index: int, used: FloatArray) -> _Column:
    """A normalize-then-average benchmark: plain means over the `used` subtasks."""
    shown = sums["raw"][:, index] / used
    score = sums["normalized"][:, index] / used
    column_se = np.sqrt(sums["variance"][:, index]) / used
    column_raw_se = np.sqrt(sums["raw_variance"][:, index]) / used
    return shown, score, column_se, column_raw_se


@dataclass(frozen=True, slots=True, kw_only=True)
class _PooledScales:
    """Per benchmark, what a pooled score is normalized by (one range and bound each).

    Attributes:
        total_weight: The suite's sample sizes, summed.
        bound: The lower bound.
        offset: The raw value that scores 0 (the bound, for fractions).
        factor: The score of a raw value of 1 above the offset, times ``1 - b``
            (100 for fractions).
        is_fraction: No declared ranges: :func:`normalize`'s arithmetic.
    """

    total_weight: FloatArray
    bound: FloatArray
    offset: FloatArray
    factor: FloatArray
    is_fraction: bool

    @classmethod
    def of(cls, suite: SuiteArrays) -> _PooledScales:
        """The scales of every benchmark of `suite` (a plain one's are not used)."""
        n_benchmarks = suite.is_pooled.shape[0]
        scales, index = suite.scales, suite.benchmark_index
        bound, offset, factor = (np.zeros(n_benchmarks) for _ in range(3))
        bound[index] = suite.lower_bound
        offset[index] = suite.lower_bound if scales is None else scales.offset
        factor[index] = 100.0 if scales is None else scales.factor
        return cls(
            total_weight=np.bincount(
                index, weights=suite.n_samples, minlength=n_benchmarks
            ).astype(np.float64),  # (float already: for the type checker)
            bound=bound,
            offset=offset,
            factor=factor,
            is_fraction=scales is None,
        )

    def finish(
        self, sums: _Sums, index: int, used: FloatArray, *, is_zero: bool
    ) -> _Column:
        """A pool-then-normalize benchmark: the sample-weighted mean, normalized once."""
        weight = (
            np.full_like(used, self.total_weight[index])
            if is_zero
            else sums["weight"][:, index]
        )
        shown = sums["raw"][:, index] / weight
        lower = np.full_like(shown, self.bound[index])
        scale = self.factor[index] / (1.0 - lower)  # (a fraction's factor: 100)
        if self.is_fraction:
            score = normalize(shown, lower)[0]
        else:  # on its range: (shown - offset) / (1 - b) * factor
            score = np.maximum((shown - self.offset[index]) * scale, 0.0)
        column_raw_se = pooled_sample_stderr(sums["variance"][:, index], weight, used)
        column_se = np.sqrt(
            score_variance((shown - self.offset[index]) * scale, column_raw_se * scale)
        )
        return shown, score, column_se, column_raw_se


#: Sample sizes an input may give above the suite's while sums stay exact.
SIZE_HEADROOM = 2.0


class FixedPoint:
    """Cell terms as exact fixed-point integers, so that every sum is exact.

    A term ``v`` of a subtask of benchmark ``b`` becomes ``rint(v * 2**k)``, held
    in float64, with ``k`` per benchmark and sum the largest power of two that
    keeps the benchmark's whole sum (every subtask at its largest possible term)
    below 2**53, so adding such integers is exact in any order. Sums then do not
    depend on row order, batch boundaries, worker count or engine, bit for bit,
    and identical submissions tie exactly. The rounding is at most ``2**-k`` per
    term: about 1e-16 of a benchmark's score for the v2 suite, and 1e-13 of its
    standard error. The largest terms assume a standard error of at most 0.5
    (a mean of values in [0, 1]) and sample sizes at most :data:`SIZE_HEADROOM`
    times the suite's; beyond those a sum is still right, but no longer exact.

    Attributes:
        scale: Per sum name and benchmark, ``2**k``.
        lower_bound: Per subtask, the raw value that scores 0 (its bound, for
            fractions; on a declared range, the bound in raw units).
    """

    __slots__ = (
        "_factor",
        "_floor",
        "_is_plain",
        "_is_pooled",
        "_reach",
        "_suite",
        "lower_bound",
        "scale",
    )

    def __init__(self, suite: SuiteArrays) -> None:
        self._suite = suite
        self._is_pooled = suite.is_pooled[suite.benchmark_index]
        scales = suite.scales
        #: Per subtask, the raw value that scores 0 (the bound, for fractions).
        self.lower_bound: FloatArray = (
            suite.lower_bound if scales is None else scales.offset
        )
        n_benchmarks = suite.is_pooled.shape[0]
        #: Per subtask, whether its terms are summed as they are (None: none):
        #: in a suite with declared ranges, the one subtask of a benchmark (its
        #: sum is 0 + x = x, exact in any order, so its value keeps every bit)
        #: and an unbounded statistic's (which has one).
        self._is_plain: BoolArray | None = None
        is_single = np.bincount(suite.benchmark_index, minlength=n_benchmarks) == 1
        if scales is not None and is_single.any():
            self._is_plain = is_single[suite.benchmark_index]

        def largest(per_subtask: FloatArray) -> FloatArray:
            total = np.bincount(
                suite.benchmark_index, weights=per_subtask, minlength=n_benchmarks
            )
            scale: FloatArray = np.exp2(
                53.0 - np.ceil(np.log2(np.maximum(total, 2.0**-60)))
            )
            if scales is None:
                return scale
            return np.where(is_single | np.isinf(total), 1.0, scale)

        n_most = np.maximum(suite.n_samples, 1.0) * SIZE_HEADROOM
        reach = 50.0 / (1.0 - suite.lower_bound)  # 100 * se / (1 - lb), se <= 0.5
        # the largest raw value, the margin above it and the largest stderr
        if scales is None:  # fractions (x 1.0 and 0.5 * 0.5 are exact: as ever)
            top = margin = np.ones_like(suite.lower_bound)
            half = np.full_like(suite.lower_bound, 0.5)
            is_statistic = np.zeros(suite.lower_bound.shape, dtype=bool)
        else:  # a range's ends may be passed by a few ulps: a margin above them
            top, half = scales.largest, (scales.high - scales.low) * 0.5
            margin = np.where(scales.is_default, 1.0, 1.0 + 2.0**-20)
            is_statistic = scales.is_statistic
        most = {
            "raw": np.where(self._is_pooled, n_most, 1.0) * top * margin,
            "normalized": np.where(is_statistic, top, 100.0) * margin,
            "variance": np.where(
                self._is_pooled,
                n_most * n_most * half * half,
                np.where(is_statistic, half * half, reach * reach),
            ),
            "raw_variance": half * half,
        }
        self.scale: dict[str, FloatArray] = {
            name: largest(values) for name, values in most.items()
        }
        #: Per subtask, the normalized score's floor (None: 0 for every one).
        self._floor: FloatArray | None = None
        if scales is not None:
            self._floor = np.where(scales.is_statistic, -np.inf, 0.0)
        # Per subtask, each term's factor with its power-of-two scale folded in:
        # scaling by 2**k is exact, so fl(x * (f * 2**k)) == fl(x * f) * 2**k and
        # the terms keep their bits with one multiplication less per row.
        self._reach: FloatArray = (
            100.0 / (1.0 - suite.lower_bound)
            if scales is None
            else scales.factor / (1.0 - suite.lower_bound)
        )
        self._factor: dict[str, FloatArray] = {
            **_sized_factors(suite.n_samples, self._is_pooled, self._reach),
            "normalized": self._reach.copy(),
            "raw_variance": np.where(self._is_pooled, 0.0, 1.0),
        }
        for name, factor in self._factor.items():
            factor *= self.scale[name][suite.benchmark_index]

    def terms(
        self,
        raw: FloatArray,
        subtask: IntArray | slice,
        *,
        stderr: FloatArray | None = None,
        n_samples: FloatArray | None = None,
    ) -> dict[str, FloatArray]:
        """Every sum's term for scores of the given subtasks.

        Sums that would only add zeros are left out of the result (the caller
        treats an absent sum as zeros): the common input, with standard errors
        and the suite's sample sizes, needs four sums, not eight.

        Args:
            raw: Raw scores (any shape whose last axis matches `subtask`).
            subtask: Each score's subtask code (or a slice of the suite's
                subtasks, for a dense block).
            stderr: Their standard errors (NaN: none given); None: none given.
            n_samples: The sample sizes the input gives (NaN or 0: none);
                None: none given.

        Returns:
            Per name of :data:`SUMS`, the terms (fixed-point ones as integers);
            ``weight`` holds what the input's sizes add to the suite's.
        """
        is_pooled = self._is_pooled[subtask]
        terms: dict[str, FloatArray] = {}
        n: FloatArray | None = None  # None: the suite's sizes
        if n_samples is not None:
            suite_n = self._suite.n_samples[subtask]
            given = n_samples > 0
            resized = given & (n_samples != suite_n)
            if resized.any():  # a --limit run: the input's sizes weigh its scores
                n = np.where(given, n_samples, suite_n)
                terms["weight"] = np.where(is_pooled, n - suite_n, 0.0)
                terms["n_other_sizes"] = (is_pooled & resized).astype(np.float64)
        codes = np.arange(self.lower_bound.shape[0])[subtask]  # per row or column
        squares, counts = self._squared_errors(raw, codes, stderr, n)
        terms.update(counts)
        factor = self._factors(subtask, is_pooled, n)
        normalized = raw - self.lower_bound[subtask]
        normalized *= factor["normalized"]  # the reach, scaled
        # the variance of a normalized score: linear where it is not clipped; a
        # pooled benchmark's term is the harness's (n - 1) n se^2
        variance = squares * factor["variance"]
        is_clipped = (normalized < 0.0) & ~is_pooled
        if self._floor is not None:  # a statistic is never clipped
            is_clipped &= np.isfinite(self._floor[subtask])
        if is_clipped.any():  # a few: the censored normal for those
            clipped = np.flatnonzero(is_clipped)
            # flat positions in C order, whatever the layout
            np.put(variance, clipped, self._censored(raw, squares, codes, clipped))
        np.maximum(
            normalized,
            0.0 if self._floor is None else self._floor[subtask],
            out=normalized,
        )
        terms["raw"] = raw * factor["raw"]
        terms["normalized"] = normalized
        terms["variance"] = variance
        terms["raw_variance"] = squares * factor["raw_variance"]
        if self._is_plain is None:
            for name in self.scale:
                np.rint(terms[name], out=terms[name])
        else:  # a lone subtask's terms are kept as they are
            is_plain = self._is_plain[subtask]
            for name in self.scale:
                terms[name] = np.where(is_plain, terms[name], np.rint(terms[name]))
        return terms

    def _squared_errors(
        self,
        raw: FloatArray,
        codes: IntArray,
        se: FloatArray | None,
        n: FloatArray | None,
    ) -> tuple[FloatArray, dict[str, FloatArray]]:
        """Each score's se^2, and the counts of those estimated and unknown.

        A stderr not given (None or NaN) is estimated as binomial from the
        metric's sample size (the input's `n`, or the suite's); one with no size
        to estimate it from is counted unknown and its variance taken as 0.
        """
        suite = self._suite
        shape = np.shape(raw)
        se = np.full(shape, np.nan) if se is None else se
        is_estimated = np.isnan(se)
        squares = se * se  # NaN where none was given: filled in below
        if not is_estimated.any():
            return squares, {}
        estimated = np.flatnonzero(is_estimated)
        items = suite.n_samples if suite.items is None else suite.items
        items_at = _suite_at(items, codes, estimated)
        if n is not None:  # IFEval counts items
            items_at = np.where(
                items_at != _suite_at(suite.n_samples, codes, estimated),
                items_at,
                _at(n, estimated),
            )
        scales = suite.scales
        if scales is None:
            filled = binomial_stderr(_at(raw, estimated), items_at)
        else:  # the fraction of its range, and back (a statistic: none)
            low = _suite_at(scales.low, codes, estimated)
            width = _suite_at(scales.high - scales.low, codes, estimated)
            # an unbounded statistic's stderr is not estimated (0 x inf)
            width = np.where(np.isfinite(width), width, np.nan)
            filled = binomial_stderr((_at(raw, estimated) - low) / width, items_at)
            filled *= width
        # (only an estimate can be unknown: no full pass looks for them)
        is_unknown_at = np.isnan(filled)
        n_estimated = is_estimated.astype(np.float64)
        counts = {"n_estimated": n_estimated}
        if is_unknown_at.any():  # counted, and their variance taken as 0
            unknown = estimated[is_unknown_at]
            np.put(n_estimated, unknown, 0.0)
            counts["n_unknown"] = np.zeros(shape)
            np.put(counts["n_unknown"], unknown, 1.0)
            filled[is_unknown_at] = 0.0
        np.put(squares, estimated, filled * filled)
        return squares, counts

    def _factors(
        self, subtask: IntArray | slice, is_pooled: BoolArray, n: FloatArray | None
    ) -> dict[str, FloatArray]:
        """Each term's factor per score, its power-of-two scale folded in."""
        factor = {name: values[subtask] for name, values in self._factor.items()}
        if n is not None:  # sizes per row: the pooled factors change
            benchmark = self._suite.benchmark_index[subtask]
            sized = _sized_factors(n, is_pooled, self._reach[subtask])
            for name, values in sized.items():
                factor[name] = values * self.scale[name][benchmark]
        return factor

    def _censored(
        self, raw: FloatArray, squares: FloatArray, codes: IntArray, clipped: IntArray
    ) -> FloatArray:
        """The variance terms of the clipped scores at flat positions `clipped`."""
        reach = _suite_at(self._reach, codes, clipped)
        variance = clipped_variance(
            (_at(raw, clipped) - _suite_at(self.lower_bound, codes, clipped)) * reach,
            np.sqrt(_at(squares, clipped)) * reach,
        )
        scale = self.scale["variance"][self._suite.benchmark_index]
        return variance * _suite_at(scale, codes, clipped)


def _sized_factors(
    n: FloatArray, is_pooled: BoolArray, reach: FloatArray
) -> dict[str, FloatArray]:
    """The terms' factors that depend on the sample size `n`, before their scale.

    A pooled score is weighted by `n` and its variance term is the harness's
    ``(n - 1) n se^2``; a plain one's are 1 and the reach squared.
    """
    return {
        "raw": np.where(is_pooled, n, 1.0),
        "variance": np.where(is_pooled, (n - 1.0) * n, reach * reach),
    }


def _at(values: FloatArray, positions: IntArray) -> FloatArray:
    """Per-row values at flat row positions."""
    picked: FloatArray = np.ravel(values).take(positions)
    return picked


def _suite_at(values: FloatArray, codes: IntArray, positions: IntArray) -> FloatArray:
    """Per-subtask values of the suite at flat row positions (`codes`: per row or column)."""
    picked: FloatArray = values.take(codes.take(positions % codes.size))
    return picked


def dense_partials(
    raw: FloatArray,
    suite: SuiteArrays,
    *,
    stderr: FloatArray | None = None,
    n_samples: FloatArray | None = None,
) -> Partials:
    """Sum dense ``(n_variants, n_subtasks)`` matrices (raw NaN = absent).

    The sums are exact (:class:`FixedPoint`), so they equal the streaming
    engine's, bit for bit, and do not depend on the order scores arrived in.

    Args:
        raw: Raw scores, NaN where absent.
        suite: The suite's arrays.
        stderr: Standard errors, NaN where none (None: no column).
        n_samples: Sample sizes, 0 or NaN where none (None: no column).

    Returns:
        The partial sums (:func:`finish_benchmarks` makes them benchmark scores).

    Examples:
        >>> arrays = SuiteArrays(lower_bound=np.array([0.5, 0.2, 1 / 3]),
        ...     n_samples=np.zeros(3), benchmark_index=np.array([0, 0, 0]),
        ...     is_pooled=np.array([False]), weight=np.array([1.0]))
        >>> partials = dense_partials(np.array([[0.7, 0.4, 0.6]]), arrays)
        >>> finish_benchmarks(partials, arrays, missing="exclude").normalized.round(10).tolist()
        [[35.0]]
    """
    fixed = FixedPoint(suite)
    n_benchmarks = suite.is_pooled.shape[0]
    shape = (raw.shape[0], n_benchmarks)
    partials = Partials(count=np.zeros(shape), sums={n: np.zeros(shape) for n in SUMS})
    starts = suite.benchmark_starts()
    for index in range(n_benchmarks):  # a suite's benchmarks, not its models
        columns = slice(int(starts[index]), int(starts[index + 1]))  # contiguous
        block = raw[:, columns]
        is_present = ~np.isnan(block)
        terms = fixed.terms(
            np.where(is_present, block, 0.0),
            columns,
            stderr=None if stderr is None else stderr[:, columns],
            n_samples=None if n_samples is None else n_samples[:, columns],
        )
        partials.count[:, index] = is_present.sum(axis=1)
        for name, values in terms.items():
            total = np.where(is_present, values, 0.0).sum(axis=1)
            if name in fixed.scale:  # fixed point: back in plain units
                total /= fixed.scale[name][index]
            partials.sums[name][:, index] = total
        if suite.is_pooled[index]:  # the suite's sizes, plus what the input changed
            partials.sums["weight"][:, index] += is_present @ suite.n_samples[columns]
    return partials
