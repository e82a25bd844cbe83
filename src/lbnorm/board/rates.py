"""Columns computed across models: observed win rates, HELM's mean win rate, MTEB's Borda count.

Each rule reads a ``(n_rows, n_columns)`` matrix, NaN where a model has no
value, and returns one value per row (NaN where it has none). They compare
every model with every other, so they run once on the whole board, after the
engines (a spilled run does not spill when its suite asks for one):

- :func:`task_win_rate` (EvalPerf's ``task_win_rate``): each subtask is a
  comparison with each other model that has it; a win counts 1, a tie 1/2;
  the rate is the wins over the comparisons. A sort per subtask: O(k n log n).
- :func:`model_win_rate` (EvalPerf's ``model_win_rate``): each other model is
  one comparison, on the mean over the subtasks both have, compared exactly
  (two fixed-point limbs per score, so the sums do not depend on their order);
  over the models compared (those sharing a subtask). Two ``(n, n)`` matrix
  products over the subtasks, in blocks of rows: O(k n^2) time, O(b n) memory.
- :func:`mean_win_rate` (HELM's ``compute_aggregate_row_win_rates``): per
  column, the share of the other models with a value that a row beats
  (``#strictly worse + (#equal - 1) / 2`` over ``n - 1``; direction-aware;
  a column with fewer than two values is skipped), then the mean over the
  row's columns. A sort per column.
- :func:`borda_count` (MTEB v2's ``Rank (Borda)`` before its final rank): per
  subtask, the models that have it ranked best first, ties by their average
  rank; each earns ``n - rank`` points, ``n`` the models with any of the
  subtasks; a missing subtask earns 0. Rank the total with ``rank_method =
  "min"``. A sort per subtask.
"""

from __future__ import annotations

import numpy as np

from lbnorm.core.arrow import BoolArray, FloatArray

__all__ = ["borda_count", "mean_win_rate", "model_win_rate", "task_win_rate"]


#: Rows of the ``(rows, n)`` blocks :func:`model_win_rate` holds at once.
_BLOCK_ROWS = 1024


def _standing(
    column: FloatArray, *, lower_is_better: bool = False
) -> tuple[BoolArray, FloatArray, FloatArray]:
    """Per row of one column: present, how many present values it beats, how many equal it.

    Equal counts the row itself. A sort and two searches: no pair is formed.
    """
    is_present = ~np.isnan(column)
    present = column[is_present]
    ordered = np.sort(-present if lower_is_better else present)
    values = -column if lower_is_better else column
    filled = np.where(is_present, values, 0.0)
    below = np.searchsorted(ordered, filled, side="left").astype(np.float64)
    equal = np.searchsorted(ordered, filled, side="right") - below
    return (
        is_present,
        np.where(is_present, below, 0.0),
        np.where(is_present, equal, 0.0),
    )


def task_win_rate(values: FloatArray) -> FloatArray:
    """Each row's wins over its comparisons, a comparison per (other row, column) both have.

    Args:
        values: ``(n_rows, n_columns)``, NaN where absent; higher wins.

    Returns:
        ``(wins + ties / 2) / comparisons``; NaN for a row never compared.

    Examples:
        >>> task_win_rate(np.array([[1.0, 2.0], [0.0, 2.0], [np.nan, 3.0]])).tolist()
        [0.5, 0.16666666666666666, 1.0]
    """
    wins = np.zeros(values.shape[0])
    rounds = np.zeros(values.shape[0])
    for index in range(values.shape[1]):  # a subtask at a time, every row at once
        is_present, below, equal = _standing(values[:, index])
        wins += below + 0.5 * np.where(is_present, equal - 1.0, 0.0)
        rounds += np.where(is_present, np.count_nonzero(is_present) - 1.0, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate: FloatArray = np.where(rounds > 0, wins / rounds, np.nan)
    return rate


def _limbs(values: FloatArray) -> tuple[FloatArray, FloatArray, float]:
    """Scores as two integer-valued limbs whose sums over any set are exact.

    ``v = hi / 2**s + lo / 2**t`` up to 2**-t (about 2**-100 of the largest
    score): sums of up to `n_columns` limbs stay below 2**52, so any order of
    addition (a matrix product's) gives the same integers.

    Returns:
        The high and low limbs (0 where absent) and ``2**(t - s)``.
    """
    filled = np.where(np.isnan(values), 0.0, values)
    n_columns = max(values.shape[1], 1)
    largest = float(np.abs(filled).max(initial=0.0)) or 1.0
    room = 52 - int(np.ceil(np.log2(n_columns)))
    high_bits = room - int(np.ceil(np.log2(largest)))
    high = np.rint(np.ldexp(filled, high_bits))
    rest = filled - np.ldexp(high, -high_bits)  # exact: |rest| <= 2**-(high_bits+1)
    low = np.rint(np.ldexp(rest, high_bits + room))
    return high, low, float(2.0**room)


def model_win_rate(values: FloatArray) -> FloatArray:
    """Each row's wins over the rows it shares a column with, on the means over the shared columns.

    Args:
        values: ``(n_rows, n_columns)``, NaN where absent; higher wins.

    Returns:
        ``(wins + ties / 2) / rows compared``; NaN for a row sharing no column.

    Examples:
        >>> model_win_rate(np.array([[1.0, 3.0], [2.0, np.nan], [0.0, 4.0]])).tolist()
        [0.25, 1.0, 0.25]
    """
    n_rows = values.shape[0]
    present = (~np.isnan(values)).astype(np.float64)
    high, low, carry = _limbs(values)
    wins = np.zeros(n_rows)
    compared = np.zeros(n_rows)
    for start in range(0, n_rows, _BLOCK_ROWS):
        rows = slice(start, min(start + _BLOCK_ROWS, n_rows))
        shared = present[rows] @ present.T  # columns both have
        # sum of row i over the columns j has, and of j over those i has
        mine_high, theirs_high = high[rows] @ present.T, present[rows] @ high.T
        mine_low, theirs_low = low[rows] @ present.T, present[rows] @ low.T
        # the sign of an exact difference: limb differences are exact integers,
        # and a rounded sum of two keeps the sign of the exact one
        difference = (mine_high - theirs_high) * carry + (mine_low - theirs_low)
        is_other = np.ones(shared.shape, dtype=bool)
        is_other[np.arange(shared.shape[0]), np.arange(rows.start, rows.stop)] = False
        is_compared = is_other & (shared > 0)
        score = np.where(difference > 0, 1.0, np.where(difference == 0, 0.5, 0.0))
        wins[rows] = np.where(is_compared, score, 0.0).sum(axis=1)
        compared[rows] = is_compared.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate: FloatArray = np.where(compared > 0, wins / compared, np.nan)
    return rate


def mean_win_rate(columns: FloatArray, lower_is_better: BoolArray) -> FloatArray:
    """HELM's mean win rate: per column the share of the others a row beats, then their mean.

    Args:
        columns: ``(n_rows, n_columns)``, NaN where absent.
        lower_is_better: Per column, whether the smaller value wins.

    Returns:
        Per row, the mean of its win rates; NaN for a row in no usable column.

    Examples:
        >>> mean_win_rate(np.array([[1.0, 5.0], [2.0, 5.0], [3.0, np.nan]]),
        ...     np.array([False, True])).tolist()
        [0.25, 0.5, 1.0]
    """
    total = np.zeros(columns.shape[0])
    count = np.zeros(columns.shape[0])
    for index in range(columns.shape[1]):
        is_present, below, equal = _standing(
            columns[:, index], lower_is_better=bool(lower_is_better[index])
        )
        n_present = int(np.count_nonzero(is_present))
        if n_present < 2:  # no one to beat: the column is skipped
            continue
        rate = (below + (equal - 1.0) / 2.0) / (n_present - 1)
        total += np.where(is_present, rate, 0.0)
        count += is_present
    with np.errstate(invalid="ignore", divide="ignore"):
        mean: FloatArray = np.where(count > 0, total / count, np.nan)
    return mean


def borda_count(values: FloatArray) -> FloatArray:
    """MTEB v2's Borda points: per column ``n - average rank`` (best rank 1), a missing one 0.

    Args:
        values: ``(n_rows, n_columns)``, NaN where absent; higher is better.

    Returns:
        Per row, its points; NaN for a row with no value at all (MTEB drops it).

    Examples:
        >>> borda_count(np.array([[3.0, 1.0], [2.0, 1.0], [1.0, np.nan]])).tolist()
        [3.5, 2.5, 0.0]
    """
    has_any = ~np.isnan(values).all(axis=1)
    n_models = float(np.count_nonzero(has_any))
    points = np.zeros(values.shape[0])
    for index in range(values.shape[1]):
        is_present, below, equal = _standing(values[:, index])
        # average rank, best first: those above, then the middle of the equals
        above = np.count_nonzero(is_present) - below - equal
        rank = above + (equal + 1.0) / 2.0
        points += np.where(is_present, n_models - rank, 0.0)
    return np.where(has_any, points, np.nan)
