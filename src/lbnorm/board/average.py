"""The board's average: of benchmark scores or of subtask scores, summed exactly or in order.

Row-local rules (each row's average depends on that row alone), so a spilled
run takes them a partition at a time. ``average = "benchmarks"`` is the
weighted mean of the benchmark scores; ``"subtasks"`` weighs each benchmark by
the subtasks it counts (the mean of every subtask score); statistics and
benchmarks with ``averaged = false`` are left out. With
``summation = "left-to-right"`` a mean of subtask scores is the float64 sum of
the scores in suite order, then divided, as a publisher's pandas row mean
(``DataFrame.mean(axis=1)``) gives it; otherwise the benchmark means come from
the engines' exact sums.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from lbnorm.core.arrow import BoolArray, FloatArray
from lbnorm.core.options import MissingPolicy
from lbnorm.suites import Suite, SuiteArrays

__all__ = [
    "average_rows",
    "average_stderr",
    "averaged",
    "sum_benchmarks",
]


def averaged(suite: SuiteArrays) -> BoolArray:
    """Per benchmark, whether the average counts it (statistics never do).

    Examples:
        >>> from lbnorm.suites import load_suite, suite_arrays
        >>> averaged(suite_arrays(load_suite("openllm-v2"))).all()
        np.True_
    """
    if suite.is_averaged is None:
        return np.ones(suite.is_pooled.shape[0], dtype=bool)
    return suite.is_averaged


def average_rows(
    suite: Suite,
    arrays: SuiteArrays,
    normalized: FloatArray,
    stderr: FloatArray,
    n_present: npt.NDArray[Any],
    *,
    missing: MissingPolicy,
    values: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Each row's average and its standard error, by the suite's board rule.

    Args:
        suite: The suite (its board's ``average`` and ``summation``).
        arrays: Its arrays.
        normalized: ``(n_rows, n_benchmarks)`` benchmark scores, NaN where none.
        stderr: Their standard errors.
        n_present: Subtasks present per cell.
        missing: The run's missing-data policy (for the benchmarks' own, see
            :meth:`~lbnorm.suites.SuiteArrays.missing_of`).
        values: ``(n_rows, n_subtasks)`` subtask scores in suite order (NaN:
            absent), for a left-to-right sum; None: exact sums.

    Returns:
        The averages and their standard errors (NaN: none).
    """
    board = suite.board
    n_rows = normalized.shape[0]
    if board.average == "none":
        empty = np.full(n_rows, np.nan)
        return empty, empty.copy()
    kept = averaged(arrays)
    every = bool(kept.all())  # the usual suite: the arrays as they are
    scores = normalized if every else normalized[:, kept]
    errors = stderr if every else stderr[:, kept]
    if board.average == "benchmarks":
        weight = arrays.weight if every else arrays.weight[kept]
        weights = _weights(weight, scores, 1.0, 1.0, missing=missing)
    else:
        weights = _subtask_weights(arrays, scores, n_present, kept, missing=missing)
    total = None
    if (
        board.average == "subtasks"
        and values is not None
        and board.summation == "left-to-right"
    ):
        total = _left_to_right_total(arrays, values, scores, weights, kept)
    return _weighted_average(scores, errors, weights, total=total)


def _weights(
    weight: FloatArray,
    scores: FloatArray,
    count: float | FloatArray,
    expected: float | FloatArray,
    *,
    missing: MissingPolicy,
) -> FloatArray:
    """Per row and benchmark, its weight times the count it takes (a benchmark mean: 1).

    A scored benchmark counts `count`; one without a score counts under the
    run's policy: as 0 over `expected` (``zero``), not at all (``partial``),
    or it empties the average (``exclude``: NaN).
    """
    absent = (
        expected if missing == "zero" else (np.nan if missing == "exclude" else 0.0)
    )
    return np.asarray(weight * np.where(np.isnan(scores), absent, count), np.float64)


def _subtask_weights(
    arrays: SuiteArrays,
    scores: FloatArray,
    n_present: npt.NDArray[Any],
    kept: BoolArray,
    *,
    missing: MissingPolicy,
) -> FloatArray:
    """Per row and averaged benchmark, its weight times the subtasks it counts.

    A benchmark's count is its subtasks present under ``partial`` (its own
    policy), all of them under ``exclude`` and ``zero``.
    """
    benchmarks = np.flatnonzero(kept)
    expected = np.bincount(arrays.benchmark_index, minlength=arrays.is_pooled.shape[0])[
        benchmarks
    ].astype(np.float64)
    is_partial = np.array(
        [
            arrays.missing_of(index, missing) == "partial"
            for index in benchmarks.tolist()
        ],
        dtype=bool,
    )
    count = np.where(is_partial, n_present[:, benchmarks], expected)
    return _weights(arrays.weight[benchmarks], scores, count, expected, missing=missing)


def _weighted_average(
    scores: FloatArray,
    errors: FloatArray,
    weights: FloatArray,
    *,
    total: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Each row's ``sum(W x) / sum(W)`` and its standard error, ``sqrt(sum(W^2 se^2)) / sum(W)``.

    `total`: the rows' ``sum(W x)`` summed otherwise (left to right). The error
    is over the benchmarks counted, NaN if one's is unknown. A NaN weight
    leaves the row's average NaN, and so its error.
    """
    if total is None:
        total = _row_sums(np.where(np.isnan(scores), 0.0, scores), weights)
    is_scored = ~np.isnan(scores) & (weights > 0)
    is_known = ~np.isnan(errors)
    known = np.where(is_scored & is_known, errors * errors, 0.0)
    divisor = _row_sums(weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        average: FloatArray = total / divisor
        result = np.sqrt(_row_sums(known, weights**2)) / divisor
    is_unknown = (is_scored & ~is_known).any(axis=1)
    result = np.where(np.isnan(average) | is_unknown, np.nan, result)
    return average, np.asarray(result, dtype=np.float64)


def sum_benchmarks(
    suite: Suite,
    arrays: SuiteArrays,
    normalized: FloatArray,
    *,
    missing: MissingPolicy,
    values: FloatArray | None,
) -> FloatArray:
    """The benchmark scores, each mean of subtask scores summed left to right where the board asks.

    Under ``summation = "left-to-right"``, a publisher's ``DataFrame.mean(axis=1)``
    over a benchmark's task columns: ``((v1 + v2) + v3) / n``, an absent score
    skipped (``partial``), counted 0 (``zero``) or emptying the mean
    (``exclude``). Where two such sums land on either side of a rounding tie
    (x.xx5), this decides the published digit.

    Args:
        suite: The suite (its board's ``summation``).
        arrays: Its arrays.
        normalized: The engines' exact benchmark scores: a cell they left empty
            (no subtask, or excluded) stays empty.
        missing: The run's policy (a benchmark's own overrides it).
        values: ``(n_rows, n_subtasks)`` subtask scores in suite order, NaN where
            absent (None: exact sums only).

    Returns:
        `normalized` itself, or the left-to-right means in its place.
    """
    if values is None or suite.board.summation != "left-to-right":
        return normalized
    result = normalized.copy()
    starts = arrays.benchmark_starts()
    for index in range(arrays.is_pooled.shape[0]):  # a suite's benchmarks
        if arrays.is_pooled[index]:
            continue
        policy = arrays.missing_of(index, missing)
        total = np.zeros(values.shape[0])
        count = np.zeros(values.shape[0])
        for column in range(int(starts[index]), int(starts[index + 1])):
            value = values[:, column]
            is_present = ~np.isnan(value)
            total += np.where(is_present, value, 0.0)  # x + 0.0 == x: a skip
            count += is_present
        size = float(starts[index + 1] - starts[index])
        divisor = count if policy == "partial" else np.full_like(count, size)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = total / divisor
        result[:, index] = np.where(np.isnan(normalized[:, index]), np.nan, mean)
    return result


def _left_to_right_total(
    arrays: SuiteArrays,
    values: FloatArray,
    scores: FloatArray,
    weights: FloatArray,
    kept: BoolArray,
) -> FloatArray:
    """The sum of every counted subtask score (times its weight), left to right in suite order."""
    starts = arrays.benchmark_starts()
    total = np.zeros(values.shape[0])
    for column, index in enumerate(np.flatnonzero(kept).tolist()):
        weight = weights[:, column]
        is_counted = ~np.isnan(scores[:, column]) & (weight > 0)
        factor = arrays.weight[index]
        for subtask in range(int(starts[index]), int(starts[index + 1])):
            value = values[:, subtask]
            term = np.where(is_counted & ~np.isnan(value), value, 0.0)
            total += term if factor == 1.0 else term * factor
    return total


def _row_sums(matrix: npt.NDArray[Any], weight: FloatArray | None = None) -> FloatArray:
    """``matrix @ weight``, summed column by column in one fixed order.

    `weight` holds a weight per column, or per row and column (the shape of
    `matrix`); None: the plain row sums. A matrix product's summation order
    depends on the BLAS and on the matrix's shape, so a variant's average could
    change in its last bit with the other variants in the run; here each row's
    sum depends on that row alone.

    Examples:
        >>> _row_sums(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([0.5, 2.0])).tolist()
        [4.5, 9.5]
    """
    total = np.zeros(matrix.shape[0], dtype=np.float64)
    for column in range(matrix.shape[1]):
        total += (
            matrix[:, column]
            if weight is None
            else matrix[:, column] * weight[..., column]
        )
    return total


def average_stderr(
    stderr: FloatArray,
    normalized: FloatArray,
    weight: FloatArray,
    *,
    missing: MissingPolicy,
) -> FloatArray:
    """Return the standard error of each variant's weighted average.

    ``sqrt(sum(w_b^2 se_b^2)) / sum(w_b)`` over the benchmarks the average
    takes; NaN where the average is NaN or a benchmark it takes has no stderr.

    Args:
        stderr: ``(n_variants, n_benchmarks)`` standard errors, NaN where unknown.
        normalized: The scores (NaN where missing).
        weight: Per-benchmark weights.
        missing: The policy the average used.

    Examples:
        >>> average_stderr(np.array([[3.0, 4.0]]), np.array([[50.0, 60.0]]),
        ...     np.ones(2), missing="exclude").tolist()
        [2.5]
    """
    weights = _weights(weight, normalized, 1.0, 1.0, missing=missing)
    return _weighted_average(normalized, stderr, weights)[1]
