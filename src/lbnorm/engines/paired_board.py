"""The whole board at once: every pair of variants adjacent in rank, compared on its items.

``lbnorm run --paired`` (``paired.parquet``, :data:`lbnorm.core.schemas.PAIRED`):
for the average and each benchmark, the variants with a score are put in order
(best first; equal scores in leaderboard order), and each variant is compared
with the next on the items both answered (:mod:`lbnorm.engines.paired`). The
p-values are adjusted across the whole table (Holm, or Benjamini-Hochberg), a
pair whose adjusted p-value is below the level is *separable*, and the
consecutive variants no test separates form a *group* ("statistically tied";
a pair whose separation is unknown, for want of per-sample data, does not
split a group).

Vectorized: the pairs of every level are compared at once (each distinct pair
once), on the bit-packed item matrix for binary subtasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.board.rank import rank_descending
from lbnorm.core.arrow import booleans, dictionary, numbers, strings, to_numpy
from lbnorm.core.options import MissingPolicy, PairedAdjust
from lbnorm.core.schemas import KEY_COLUMNS, PAIRED, conform
from lbnorm.engines.kernel import FloatArray, IntArray
from lbnorm.engines.paired import (
    Level,
    LevelStatistics,
    adjust_p_values,
    level_statistics,
    pair_moments,
    suite_levels,
)
from lbnorm.engines.variants import variant_labels
from lbnorm.readers.items import Items, variant_rows
from lbnorm.suites import Suite, suite_arrays

__all__ = ["BoardPairs", "board_pairs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BoardPairs:
    """``paired.parquet`` and what a summary says about it.

    Attributes:
        table: The table (:data:`lbnorm.core.schemas.PAIRED`).
        without_items: Leaderboard variants with no per-sample data (their
            pairs have no paired numbers), as ``model [precision]``.
        left_out: The levels not compared, each with why (a statistic, ...).
    """

    table: pa.Table
    without_items: tuple[str, ...]
    left_out: tuple[str, ...] = ()


def board_pairs(
    items: Items,
    leaderboard: pa.Table,
    suite: Suite,
    *,
    adjust: PairedAdjust = "holm",
    alpha: float = 0.05,
    missing: MissingPolicy = "exclude",
) -> BoardPairs:
    """Compare every pair of variants adjacent in rank, by the average and each benchmark.

    Args:
        items: The item matrix of the run's per-sample inputs.
        leaderboard: The leaderboard (keys, ``rank``, ``average``,
            ``average_stderr``, and ``X``, ``X stderr`` per benchmark).
        suite: The suite (its rules).
        adjust: The p-value adjustment across the table.
        alpha: The level below which an adjusted p-value separates a pair.
        missing: The run's missing-data policy (see
            :func:`lbnorm.engines.paired.level_statistics`).

    Returns:
        The table and the variants without per-sample data.
    """
    arrays = suite_arrays(suite)
    levels, left_out = suite_levels(suite, arrays)
    row = variant_rows(leaderboard.select(list(KEY_COLUMNS)), items)
    orders, scores, errors = [], [], []
    for level in levels:  # a level's variants in order, best first
        column = "average" if level.benchmark < 0 else level.name
        stderr = "average_stderr" if level.benchmark < 0 else f"{column} stderr"
        score = _floats(leaderboard[column])
        ranked = np.flatnonzero(~np.isnan(score))
        orders.append(ranked[np.argsort(-score[ranked], kind="stable")])
        scores.append(score)
        errors.append(_floats(leaderboard[stderr]))
    first = np.concatenate([order[:-1] for order in orders])
    second = np.concatenate([order[1:] for order in orders])
    has_items = (row[first] >= 0) & (row[second] >= 0)
    pair_key = first * leaderboard.num_rows + second
    distinct, where = np.unique(pair_key[has_items], return_inverse=True)
    compared = np.full(first.size, -1, dtype=np.int64)  # each pair's distinct pair
    compared[has_items] = where
    moments = pair_moments(
        items,
        row[distinct // leaderboard.num_rows],
        row[distinct % leaderboard.num_rows],
    )
    counts = _item_counts(items, row)
    ends = np.cumsum([max(order.size - 1, 0) for order in orders])  # pairs per level
    parts = [
        _level_part(
            level,
            order,
            score,
            error,
            compared=level_pairs,
            stats=level_statistics(moments, arrays, level, missing=missing),
            counts=counts[:, level.subtasks].sum(axis=1),
        )
        for level, order, score, error, level_pairs in zip(
            levels, orders, scores, errors, np.split(compared, ends[:-1]), strict=True
        )
    ]
    adjusted = adjust_p_values(
        np.concatenate([part["p_value"] for part in parts]), adjust
    )
    table = _assemble(leaderboard, levels, parts, adjusted, alpha)
    lacking = np.flatnonzero(row < 0)
    names = variant_labels(leaderboard.take(numbers(lacking[:5], pa.int64())))
    more = [f"and {lacking.size - 5} more"] if lacking.size > 5 else []
    return BoardPairs(table=table, without_items=(*names, *more), left_out=left_out)


def _item_counts(items: Items, row: IntArray) -> FloatArray:
    """Per board variant and subtask, the items it has (0 without per-sample data)."""
    counts = np.zeros((row.size, len(items.subtasks)))
    known = row >= 0
    for k, subtask in enumerate(items.subtasks):  # a suite's subtasks
        if subtask is not None:
            counts[known, k] = np.count_nonzero(subtask.codes[row[known]], axis=1)
    return counts


def _floats(column: pa.ChunkedArray) -> FloatArray:
    return np.asarray(
        to_numpy(column.cast(pa.float64()), null=np.nan), dtype=np.float64
    )


def _level_part(
    level: Level,
    order: IntArray,
    score: FloatArray,
    error: FloatArray,
    *,
    compared: IntArray,
    stats: LevelStatistics,
    counts: FloatArray,
) -> dict[str, npt.NDArray[np.generic]]:
    """One level's rows: the pairs of consecutive variants and their numbers."""
    first, second = order[:-1], order[1:]
    known = compared >= 0
    at = np.maximum(compared, 0)

    def pick(values: FloatArray) -> FloatArray:
        return np.where(known, values[at] if values.size else np.nan, np.nan)

    rank = rank_descending(score)
    return {
        "first": first,
        "second": second,
        "rank_a": rank[first],
        "rank_b": rank[second],
        "difference": pick(stats.difference),
        "stderr": pick(stats.stderr),
        "stderr_unpaired": np.sqrt(error[first] ** 2 + error[second] ** 2),
        "stderr_a": pick(stats.stderr_a),
        "stderr_b": pick(stats.stderr_b),
        "p_value": pick(stats.p_value),
        "n_items": np.where(known, pick(stats.n_items), 0.0),
        "n_items_unmatched": np.where(
            known, pick(stats.n_items_unmatched), counts[first] + counts[second]
        ),
    }


def _assemble(
    leaderboard: pa.Table,
    levels: list[Level],
    parts: list[dict[str, npt.NDArray[np.generic]]],
    adjusted: FloatArray,
    alpha: float,
) -> pa.Table:
    """The levels' rows as one table, with the adjusted p-values and the groups."""

    def joined(name: str) -> npt.NDArray[np.generic]:
        return np.concatenate([part[name] for part in parts]) if parts else np.empty(0)

    sizes = np.array([part["first"].size for part in parts], dtype=np.int64)
    separable = adjusted < alpha
    is_known = ~np.isnan(adjusted)
    # a group starts after each separable pair, anew at each level
    breaks = (separable & is_known).astype(np.int64)
    level_start = np.repeat(np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes)
    before = np.cumsum(breaks) - breaks
    group_a = 1 + before - (before[level_start] if before.size else 0)
    first = joined("first").astype(np.int64)
    second = joined("second").astype(np.int64)
    columns: dict[str, pa.Array] = {
        "level": dictionary(
            np.repeat(np.arange(len(levels)), sizes),
            strings([lv.name for lv in levels]),
        ),
    }
    for side, rows in (("a", first), ("b", second)):
        for name in KEY_COLUMNS:
            columns[f"{name}_{side}"] = (
                leaderboard[name].take(numbers(rows, pa.int64())).combine_chunks()
            )
        rank = joined(f"rank_{side}").astype(np.float64)
        columns[f"rank_{side}"] = numbers(
            np.nan_to_num(rank), pa.int64(), valid=~np.isnan(rank)
        )
    for name in (
        "difference",
        "stderr",
        "stderr_unpaired",
        "stderr_a",
        "stderr_b",
        "p_value",
    ):
        values = joined(name).astype(np.float64)
        columns[name] = numbers(values, pa.float64(), valid=~np.isnan(values))
    columns["p_adjusted"] = numbers(adjusted, pa.float64(), valid=is_known)
    columns["separable"] = booleans(separable, valid=is_known)
    columns["group_a"] = numbers(group_a, pa.int64())
    columns["group_b"] = numbers(group_a + breaks, pa.int64())
    for name in ("n_items", "n_items_unmatched"):
        columns[name] = numbers(joined(name).astype(np.int64), pa.int64())
    return conform(pa.table(columns), PAIRED, source="paired comparisons")
