"""Which differences are real: 95% intervals on averages, and rank intervals.

Every standard error is the engine's own (:mod:`lbnorm.engines.stderr` says how they
travel: linear normalization, the censored normal of a clipped score, the
harness's pooled formula, the weighted average), computed here from a subtask
table with the same kernel (:func:`lbnorm.engines.kernel.dense_partials`), so an
output's intervals agree with its ``stderr`` columns.

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

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm._runtime import entry_point
from lbnorm.analysis.align import align_rows, align_variants, nullable, plain_keys
from lbnorm.board import average_stderr
from lbnorm.core.errors import InputError
from lbnorm.core.options import MissingPolicy
from lbnorm.engines.kernel import dense_partials, finish_benchmarks
from lbnorm.engines.stderr import clipped_variance
from lbnorm.suites import Suite, suite_arrays

__all__ = [
    "Uncertainty",
    "clipped_variance",
    "estimate_uncertainty",
    "interval_ranks",
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


@entry_point  # (Ctrl-C and SIGTERM held for the call)
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
    names = suite.benchmark_names
    dense = _dense_subtasks(subtasks, leaderboard, suite)
    arrays = suite_arrays(suite)
    # the kernel's own sums: one definition of every standard error (lbnorm.engines.stderr)
    partials = dense_partials(
        dense["raw_score"],
        arrays,
        stderr=dense["stderr"],
        n_samples=dense["n_samples"],
    )
    benchmark = finish_benchmarks(partials, arrays, missing=missing)
    scores = leaderboard[names].to_numpy(dtype=np.float64)
    variance = np.where(np.isnan(scores), np.nan, benchmark.stderr**2)
    average_se = average_stderr(
        benchmark.stderr, scores, arrays.weight, missing=missing
    )
    n_unknown = partials.sums["n_unknown"].sum(axis=1)
    keys = plain_keys(leaderboard)
    board = _interval_board(leaderboard, keys, average_se, n_unknown, z=z)
    benchmarks = _benchmark_rows(keys, names, scores, variance)
    return Uncertainty(
        benchmarks=benchmarks,
        leaderboard=board,
        benchmark_stderr=pd.DataFrame(
            np.sqrt(variance), columns=names, index=leaderboard.index
        ),
        level=level,
    )


def _interval_board(
    leaderboard: pd.DataFrame,
    keys: pd.DataFrame,
    average_se: FloatArray,
    n_unknown: npt.NDArray[np.int64],
    *,
    z: float,
) -> pd.DataFrame:
    """A row per variant: its average's interval (``z`` errors, within 0-100) and the ranks it allows.

    ``rank_best``/``rank_worst`` and ``tie_group`` come from the overlaps of the
    intervals (:func:`interval_ranks`); the columns are documented (``INTERVAL_DOCS``).
    """
    average = leaderboard["average"].to_numpy(dtype=np.float64)
    low, high, *ranks = interval_ranks(leaderboard, average, average_se, z=z)
    board = keys.assign(
        rank=leaderboard["rank"].astype("Int64").to_numpy(),
        average=average,
        average_stderr=average_se,
        average_low=low,
        average_high=high,
        rank_best=nullable(ranks[0], "Int64"),
        rank_worst=nullable(ranks[1], "Int64"),
        tie_group=nullable(ranks[2], "Int64"),
        n_stderr_unknown=n_unknown.astype(np.int64),
    )
    board.attrs["column_docs"] = dict(INTERVAL_DOCS)
    return board


def _dense_subtasks(
    subtasks: pd.DataFrame, leaderboard: pd.DataFrame, suite: Suite
) -> dict[str, FloatArray]:
    """``raw_score``, ``stderr`` and ``n_samples`` as (variant x suite subtask) matrices.

    Rows are the leaderboard's, columns the suite's subtasks in order (NaN where
    a variant has no score): the layout the kernel's sums take.

    Raises:
        InputError: A subtask row's variant is not on the leaderboard, or its
            subtask is not in the suite.
    """
    bounds = suite.subtask_table()
    variant = align_variants(subtasks, leaderboard)
    subtask = align_rows(subtasks, bounds, on=["benchmark", "subtask"])
    if (variant < 0).any() or (subtask < 0).any():
        msg = (
            f"{int((variant < 0).sum())} subtask row(s) have no leaderboard row and "
            f"{int((subtask < 0).sum())} have a subtask outside suite {suite.name!r}.\n"
            "Hint: pass the subtasks and leaderboard of one result, and its suite."
        )
        raise InputError(msg)
    shape = (len(leaderboard), len(bounds))
    dense = {
        name: np.full(shape, np.nan) for name in ("raw_score", "stderr", "n_samples")
    }
    for name, matrix in dense.items():
        matrix[variant, subtask] = _floats(subtasks, name)
    return dense


def _benchmark_rows(
    keys: pd.DataFrame, names: list[str], scores: FloatArray, variance: FloatArray
) -> pd.DataFrame:
    """One row per (variant, benchmark) with a score: the score and its standard error."""
    rows, columns = np.nonzero(~np.isnan(scores))
    return (
        keys.iloc[rows]
        .reset_index(drop=True)
        .assign(
            benchmark=np.asarray(names, dtype=object)[columns],
            normalized_score=scores[rows, columns],
            stderr=np.sqrt(variance[rows, columns]),
        )
    )


def _floats(frame: pd.DataFrame, name: str) -> FloatArray:
    if name not in frame.columns:
        return np.full(len(frame), np.nan)
    return np.asarray(frame[name].to_numpy(dtype=np.float64, na_value=np.nan))


def interval_ranks(
    leaderboard: pd.DataFrame, average: FloatArray, stderr: FloatArray, *, z: float
) -> list[FloatArray]:
    """Each average's interval (``z`` errors, within 0-100), rank intervals and tie groups.

    A ranked variant without a stderr counts as a point for the others' ranks
    and gets no interval itself (NaN).

    Args:
        leaderboard: The leaderboard (its ``rank``: who is ranked).
        average: Its averages.
        stderr: Their standard errors (NaN where unknown).
        z: Standard errors each side of the average.

    Returns:
        ``average_low``, ``average_high``, ``rank_best``, ``rank_worst`` and
        ``tie_group``, one value per leaderboard row.
    """
    low = np.clip(average - z * stderr, 0.0, 100.0)
    high = np.clip(average + z * stderr, 0.0, 100.0)
    is_ranked = leaderboard["rank"].notna().to_numpy() & ~np.isnan(average)
    has_interval = is_ranked & ~np.isnan(stderr)
    is_point = np.isnan(stderr)
    ranked = rank_intervals(
        np.where(is_point, average, low)[is_ranked],
        np.where(is_point, average, high)[is_ranked],
    )
    columns = [low, high]
    for values in ranked:
        column = np.full(len(average), np.nan)
        column[is_ranked] = values
        columns.append(np.where(has_interval, column, np.nan))
    return columns
