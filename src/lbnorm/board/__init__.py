"""The suite's board rules, run once on the engines' benchmark scores: average, rates, rank.

The engines end at per-(variant, benchmark) scores (and, when the board asks,
each (variant, subtask) score); every engine hands them to
:func:`score_board` (through :func:`lbnorm.engines.result.assemble_result`; a
spilled run a partition at a time through :func:`average_rows`, then
:func:`rank_rows`), so there is one definition of the leaderboard's average,
its rates and its ranks. Today's leaderboard (the mean of the benchmark scores,
ranked ``min``) is the board with every key at its default.

Pure numpy on arrays; the rules themselves are in :mod:`.average`,
:mod:`.rank` and :mod:`.rates`, the suite's ``[board]`` table in
:mod:`lbnorm.suites.board`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from lbnorm.board.average import (
    average_rows,
    average_stderr,
    sum_benchmarks,
)
from lbnorm.board.rank import rank_descending
from lbnorm.board.rates import (
    borda_count,
    mean_win_rate,
    model_win_rate,
    task_win_rate,
)
from lbnorm.core.arrow import BoolArray, FloatArray
from lbnorm.core.options import MissingPolicy
from lbnorm.suites import Suite, SuiteArrays

__all__ = [
    "BoardScores",
    "average_rows",
    "average_stderr",
    "rank_descending",
    "rank_rows",
    "rate_rows",
    "score_board",
    "sum_benchmarks",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class BoardScores:
    """What the board adds to the engines' benchmark scores, one value per row.

    Attributes:
        average: The board's average (NaN: none).
        average_stderr: Its standard error (NaN: unknown).
        rates: Per rate column of the board, its values.
        rank: The rank (NaN: unranked).
    """

    average: FloatArray
    average_stderr: FloatArray
    rates: dict[str, FloatArray]
    rank: FloatArray


def rate_rows(
    suite: Suite,
    arrays: SuiteArrays,
    normalized: FloatArray,
    values: FloatArray | None,
) -> dict[str, FloatArray]:
    """The board's rate columns, across every row (the whole board at once).

    Args:
        suite: The suite (its board's rates).
        arrays: Its arrays.
        normalized: ``(n_rows, n_benchmarks)`` benchmark scores.
        values: ``(n_rows, n_subtasks)`` subtask scores (needed by every rate
            but a mean-win-rate).

    Returns:
        Per rate name, one value per row.
    """
    names = suite.benchmark_names
    starts = arrays.benchmark_starts()
    rates: dict[str, FloatArray] = {}
    for rate in suite.board.rates:
        indices = [names.index(name) for name in rate.benchmarks]
        if rate.rule == "mean-win-rate":
            lower = np.array([name in rate.lower_is_better for name in rate.benchmarks])
            rates[rate.name] = mean_win_rate(normalized[:, indices], lower)
            continue
        assert values is not None, "the engines keep subtask scores for this board"
        columns = np.concatenate(
            [np.arange(starts[index], starts[index + 1]) for index in indices]
        )
        rule = {
            "task-win-rate": task_win_rate,
            "model-win-rate": model_win_rate,
            "borda": borda_count,
        }[rate.rule]
        rates[rate.name] = rule(values[:, columns])
    return rates


def rank_rows(
    suite: Suite, by: FloatArray, *, is_complete: BoolArray | None
) -> FloatArray:
    """Each row's rank by the board's ``rank_method`` (rows in key order).

    Args:
        suite: The suite (its board).
        by: The values ranked (the average, a rate or a benchmark's scores),
            highest first; NaN: unranked.
        is_complete: Per row, whether every subtask is present, under
            ``rank_incomplete = false`` (a row that is not is unranked; None:
            the board ranks incomplete rows).

    Returns:
        The ranks (NaN: unranked), rows in the order given (key order: the
        order ``ordinal`` breaks ties in).
    """
    if is_complete is not None:
        by = np.where(is_complete, by, np.nan)
    return rank_descending(by, method=suite.board.rank_method)


def score_board(
    suite: Suite,
    arrays: SuiteArrays,
    normalized: FloatArray,
    stderr: FloatArray,
    n_present: npt.NDArray[Any],
    *,
    missing: MissingPolicy,
    values: FloatArray | None = None,
) -> BoardScores:
    """Every board rule on a whole board: :func:`average_rows`, :func:`rate_rows`, :func:`rank_rows`.

    Args:
        suite: The suite.
        arrays: Its arrays.
        normalized: ``(n_rows, n_benchmarks)`` benchmark scores, rows in key
            order (as :func:`sum_benchmarks` gives them).
        stderr: Their standard errors.
        n_present: Subtasks present per cell.
        missing: The run's missing-data policy.
        values: ``(n_rows, n_subtasks)`` subtask scores, when the board reads them.

    Returns:
        The board's scores.

    Examples:
        >>> from lbnorm.suites import load_suite, suite_arrays
        >>> suite = load_suite("openllm-v2")
        >>> arrays = suite_arrays(suite)
        >>> scores = np.array([[10.0] * 6, [20.0] * 6])
        >>> board = score_board(suite, arrays, scores, np.full((2, 6), np.nan),
        ...     np.array([[2, 24, 7, 3, 3, 1]] * 2), missing="exclude")
        >>> board.average.tolist(), board.rank.tolist()
        ([10.0, 20.0], [2.0, 1.0])
    """
    average, error = average_rows(
        suite, arrays, normalized, stderr, n_present, missing=missing, values=values
    )
    rates = rate_rows(suite, arrays, normalized, values) if suite.board.rates else {}
    is_complete = None  # (only where the board asks: a pass over every cell)
    if not suite.board.rank_incomplete:
        expected = np.bincount(arrays.benchmark_index, minlength=normalized.shape[1])
        is_complete = (n_present == expected).all(axis=1)
    by = suite.board.rank_by  # the average, a rate or a benchmark's scores
    keys = {"average": average, **rates}
    key = keys[by] if by in keys else normalized[:, suite.benchmark_names.index(by)]
    rank = rank_rows(suite, key, is_complete=is_complete)
    return BoardScores(average=average, average_stderr=error, rates=rates, rank=rank)
