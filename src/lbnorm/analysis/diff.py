"""What did this change do? Two leaderboards in, every difference out, vectorized.

Each side is a :class:`Snapshot`: a leaderboard plus, when known, its subtask
table (for scores that became clipped or unclipped), its lower bounds and its
rank intervals (from :func:`lbnorm.analysis.uncertainty.estimate_uncertainty`).
:func:`diff_snapshots` joins the two sides once on the variant keys (a hash join
of one row per variant; the subtask rows are lined up by integer code, never
joined row by row) and returns a :class:`Diff`: the bounds that changed, the
delta per variant and benchmark, the delta and rank move per variant, and the
summary figures (Kendall's tau and Spearman's rho between the rankings, top-k
overlaps, big movers, newly clipped scores, variants added, removed and newly
unranked, and how many rank moves lie outside the rank intervals with the
variant's own average moved beyond its own interval).

Bounds are compared suite to suite: a subtask with scores on one side only is
coverage (``subtasks_scored_old`` / ``_new``), not a bound added or removed. A
variant unranked on the new side, or gone from it, says why where the outputs
tell: incomplete (the benchmarks it lacks), excluded (flagged in the metadata),
or its results file rejected by the new run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow.compute as pc

from lbnorm.analysis.align import (
    align_rows,
    align_variants,
    match_keys,
    nullable,
    take_at,
)
from lbnorm.analysis.correlation import kendall_tau, spearman_rho
from lbnorm.analysis.uncertainty import estimate_uncertainty
from lbnorm.core.schemas import KEY_COLUMNS, benchmark_columns
from lbnorm.engines.result import Result
from lbnorm.output.reader import Output

__all__ = [
    "Diff",
    "Sides",
    "Snapshot",
    "diff_results",
    "diff_snapshots",
    "line_up",
    "read_snapshot",
    "snapshot_of",
    "summary_row",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Figure = float | int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """One side of a comparison.

    Attributes:
        leaderboard: One row per variant: the keys, ``rank``, ``average`` and a
            column per benchmark.
        benchmarks: The benchmark columns, in display order.
        subtasks: The subtask table (keys, ``benchmark``, ``subtask``,
            ``is_clipped``), for clip changes; None if unknown.
        bounds: One row per subtask: ``benchmark``, ``subtask``, ``lower_bound``;
            None derives them from `subtasks`.
        intervals: Per variant: the keys, ``rank_best``, ``rank_worst``,
            ``average_low`` and ``average_high``; None if unknown.
        label: A name for the side (a suite, a directory).
        rejected: Input files the run rejected (``--cache``), as its manifest
            names them: a variant whose file was rejected is named with it.
    """

    leaderboard: pd.DataFrame
    benchmarks: Sequence[str]
    subtasks: pd.DataFrame | None = None
    bounds: pd.DataFrame | None = None
    intervals: pd.DataFrame | None = None
    label: str = ""
    rejected: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Diff:
    """Everything that changed between two snapshots.

    Attributes:
        bounds: Subtasks whose lower bound changed, was added or removed:
            ``benchmark``, ``subtask``, ``old_lower_bound``, ``new_lower_bound``,
            ``change``.
        scores: Per (variant, benchmark) present on either side: the keys,
            ``benchmark``, ``old_score``, ``new_score``, ``delta`` (new - old).
        models: Per variant on either side: the keys, ``status`` (``both``,
            ``added``, ``removed``), ``old_rank``, ``new_rank``, ``rank_move``
            (old - new: positive moved up), ``old_average``, ``new_average``,
            ``average_delta``, ``is_beyond_intervals`` (the rank moved beyond
            both rank intervals and the variant's own average beyond both of its
            95% intervals; null when unknown) and ``reason`` (why a variant is unranked on the
            new side or gone from it, where known; else null); sorted by new
            rank, then old rank.
        summary: The summary figures, by name: ``variants_old``,
            ``variants_new``, ``variants_common``, ``variants_added``,
            ``variants_removed``, ``ranked_common`` (ranked on both sides: the
            base of the rank figures), those of :meth:`Sides.figures` (with
            ``average_delta_*``), ``averages_changed``, ``scores_changed``
            (benchmark scores), ``newly_clipped``, ``newly_unclipped`` (subtask
            scores; null without subtask tables), ``bounds_changed``,
            ``rank_moves_checked`` (ranked on both sides, with intervals on
            both), ``rank_moves_beyond_intervals`` (of those, the variants whose
            new rank is outside the old rank interval and the old rank outside
            the new one, and whose own average moved beyond its own 95%
            intervals the same way: a variant pushed down by a newcomer, its
            average unchanged, is not one; null without intervals),
            ``newly_unranked`` (ranked on the old side only) and
            ``subtasks_scored_old`` / ``_new`` (subtasks with a score on each
            side; null when unknown).
        labels: The sides' labels.
        benchmarks: The benchmarks of either side, in display order.
        coverage: Per benchmark whose scored subtasks differ between the
            sides: ``benchmark``, ``old_subtasks`` and ``new_subtasks`` (how
            many of its subtasks have a score on each side); empty when they
            agree or are unknown.
    """

    bounds: pd.DataFrame
    scores: pd.DataFrame
    models: pd.DataFrame
    summary: dict[str, Figure]
    labels: tuple[str, str] = ("old", "new")
    benchmarks: tuple[str, ...] = field(default=())
    coverage: pd.DataFrame = field(default_factory=lambda: _coverage_frame([], [], []))

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables to save, by file stem (the summary as one row)."""
        return {
            "diff_bounds": self.bounds,
            "diff_scores": self.scores,
            "diff_models": self.models,
            "diff_summary": summary_row(self.labels, self.summary),
        }


def summary_row(labels: tuple[str, str], summary: Mapping[str, Figure]) -> pd.DataFrame:
    """A diff's summary figures as one row, after the two sides' labels."""
    return pd.DataFrame(
        {"old": [labels[0]], "new": [labels[1]]}
        | {name: [value] for name, value in summary.items()}
    )


def _bounds_of(subtasks: pd.DataFrame) -> pd.DataFrame:
    """Return each subtask's lower bound as a subtask table records it.

    Examples:
        >>> subtasks = pd.DataFrame({"benchmark": ["GPQA"] * 3, "subtask": ["main", "main", "diamond"],
        ...     "lower_bound": [0.25, 0.25, 0.25]})
        >>> _bounds_of(subtasks).to_dict("list")
        {'benchmark': ['GPQA', 'GPQA'], 'subtask': ['main', 'diamond'], 'lower_bound': [0.25, 0.25]}
    """
    columns = ["benchmark", "subtask"]
    first = (
        subtasks.groupby(columns, observed=True, sort=False)["lower_bound"]
        .first()
        .reset_index()
    )
    return pd.DataFrame(
        {
            "benchmark": first["benchmark"].astype("str").to_numpy(),
            "subtask": first["subtask"].astype("str").to_numpy(),
            "lower_bound": first["lower_bound"].to_numpy(dtype=np.float64),
        }
    )


def snapshot_of(result: Result, *, intervals: bool = True) -> Snapshot:
    """Describe a :class:`~lbnorm.pipeline.Result` for :func:`diff_snapshots`.

    Args:
        result: A normalized leaderboard.
        intervals: Compute its rank intervals (from the subtasks' stderr).

    Returns:
        The snapshot: leaderboard, suite bounds, subtasks and intervals.
    """
    subtasks = result.subtasks
    uncertainty = (
        estimate_uncertainty(
            subtasks, result.leaderboard, result.suite, missing=result.missing
        )
        if intervals and len(subtasks)
        else None
    )
    return Snapshot(
        leaderboard=result.leaderboard,
        benchmarks=result.suite.benchmark_names,
        subtasks=subtasks,
        bounds=result.suite.subtask_table()[["benchmark", "subtask", "lower_bound"]],
        intervals=None if uncertainty is None else uncertainty.leaderboard,
        label=result.suite.name,
    )


def diff_results(
    old: Result,
    new: Result,
    *,
    intervals: bool = True,
    moved_places: int = 10,
    top: Sequence[int] = (10, 50, 100),
) -> Diff:
    """Compare two results, e.g. one input under two suites (an impact study).

    Args:
        old: The reference result.
        new: The changed result.
        intervals: Count rank moves beyond the rank intervals (needs stderr).
        moved_places: N in "moved more than N places".
        top: The k of the top-k overlaps.

    Returns:
        The differences (see :func:`diff_snapshots`).

    Examples:
        >>> from lbnorm import RunOptions, normalize_scores
        >>> from lbnorm.analysis.impact import override_bounds, parse_bound_override
        >>> scores = pd.DataFrame({"model": ["a", "b"], "benchmark": "GPQA", "subtask": "main",
        ...     "raw_score": [0.28, 0.40]})
        >>> partial = RunOptions(missing="partial")
        >>> old = normalize_scores(scores, options=partial)
        >>> new = normalize_scores(scores, override_bounds(old.suite, [parse_bound_override("GPQA=0.3")]), options=partial)
        >>> diff = diff_results(old, new)
        >>> diff.summary["newly_clipped"], diff.scores["delta"].round(3).tolist()
        (1, [-4.0, -5.714])
    """
    return diff_snapshots(
        snapshot_of(old, intervals=intervals),
        snapshot_of(new, intervals=intervals),
        moved_places=moved_places,
        top=top,
    )


def diff_snapshots(
    old: Snapshot,
    new: Snapshot,
    *,
    moved_places: int = 10,
    top: Sequence[int] = (10, 50, 100),
) -> Diff:
    """Compare two leaderboards: bounds, scores, averages, ranks and summary.

    Args:
        old: The reference side.
        new: The changed side.
        moved_places: N in "moved more than N places".
        top: The k of the top-k overlaps.

    Returns:
        The differences.

    Examples:
        >>> def board(averages):
        ...     return pd.DataFrame({"model": list("abc"), "precision": "", "revision": "",
        ...         "chat_template": False, "rank": pd.Series(averages).rank(ascending=False),
        ...         "average": averages, "X": averages})
        >>> diff = diff_snapshots(Snapshot(leaderboard=board([3.0, 2.0, 1.0]), benchmarks=["X"]),
        ...     Snapshot(leaderboard=board([1.0, 2.0, 3.0]), benchmarks=["X"]), moved_places=1, top=[1])
        >>> {k: diff.summary[k] for k in ("kendall_tau", "spearman_rho", "top_1_overlap", "moved_more_than_n")}
        {'kendall_tau': -1.0, 'spearman_rho': -1.0, 'top_1_overlap': 0, 'moved_more_than_n': 2}
    """
    sides = line_up(old.leaderboard, new.leaderboard, on=KEY_COLUMNS, value="average")
    merged, (old_at, new_at), (old_rank, new_rank) = sides.keys, sides.at, sides.ranks
    old_average, new_average = sides.compared
    is_both = sides.is_both
    is_ranked = is_both & ~np.isnan(old_rank) & ~np.isnan(new_rank)
    beyond = _beyond_intervals(old, new, sides, is_ranked)
    models = sides.table(
        is_beyond_intervals=nullable(beyond, "boolean"),
        reason=_reasons(old, new, merged, new_at, new_rank),
    )
    names = list(dict.fromkeys([*old.benchmarks, *new.benchmarks]))
    scores = _score_deltas(old, new, merged, old_at, new_at, names)
    old_bounds, new_bounds = _side_bounds(old), _side_bounds(new)
    bounds = _bound_changes(
        old_bounds,
        new_bounds,
        is_whole=old.bounds is not None and new.bounds is not None,
    )
    clipped = _clip_changes(old, new, merged, old_bounds, new_bounds)
    scored = _scored(old), _scored(new)
    delta = (new_average - old_average)[is_both]
    is_checked = ~np.isnan(beyond)
    summary: dict[str, Figure] = {
        "variants_old": int((old_at >= 0).sum()),
        "variants_new": int((new_at >= 0).sum()),
        **sides.counts("variants"),
        "ranked_common": int(is_ranked.sum()),
        **sides.figures(is_ranked, moved_places=moved_places, top=top),
        "averages_changed": int((delta[~np.isnan(delta)] != 0).sum()),
        "scores_changed": int((scores["delta"].fillna(0.0) != 0).sum()),
        "newly_clipped": clipped[0],
        "newly_unclipped": clipped[1],
        "bounds_changed": len(bounds),
        "rank_moves_checked": int(is_checked.sum()),
        "rank_moves_beyond_intervals": int(np.nansum(beyond))
        if is_checked.any()
        else None,
        "newly_unranked": int(
            (is_both & ~np.isnan(old_rank) & np.isnan(new_rank)).sum()
        ),
        "subtasks_scored_old": None if scored[0] is None else len(scored[0]),
        "subtasks_scored_new": None if scored[1] is None else len(scored[1]),
    }
    return Diff(
        bounds=bounds,
        scores=scores,
        models=models,
        summary=summary,
        labels=(old.label or "old", new.label or "new"),
        benchmarks=tuple(names),
        coverage=_coverage(*scored, names),
    )


@dataclass(frozen=True, slots=True)
class Sides:
    """Two ranked tables lined up by key (:func:`line_up`): the job both diffs share.

    Leaderboards by variant on the average, ratings by model on the rating.

    Attributes:
        keys: The keys of either side (plain strings and bools).
        at: Per key, its position in the old and in the new table (-1: absent).
        ranks: Old and new rank per key (NaN: unranked or absent).
        compared: Old and new value ranked by (NaN: absent).
        value: That value's name (``average``, ``rating``).
    """

    keys: pd.DataFrame
    at: tuple[IntArray, IntArray]
    ranks: tuple[FloatArray, FloatArray]
    compared: tuple[FloatArray, FloatArray]
    value: str

    @property
    def is_both(self) -> npt.NDArray[np.bool_]:
        """Keys on both sides."""
        return (self.at[0] >= 0) & (self.at[1] >= 0)

    def counts(self, what: str) -> dict[str, Figure]:
        """``<what>_common``, ``_added`` and ``_removed``: the keys on each side."""
        old, new = (at >= 0 for at in self.at)
        return {
            f"{what}_common": int((old & new).sum()),
            f"{what}_added": int((new & ~old).sum()),
            f"{what}_removed": int((old & ~new).sum()),
        }

    def table(
        self, **more: npt.NDArray[Any] | pd.api.extensions.ExtensionArray
    ) -> pd.DataFrame:
        """One row per key, sorted by new rank, then old rank, unranked (NaN) last.

        The keys, ``status`` (``both``, ``removed`` or ``added``), ``old_rank``,
        ``new_rank``, ``rank_move`` (old - new: positive moved up),
        ``old_<value>``, ``new_<value>``, ``<value>_delta`` (new - old), then
        `more` (aligned with the keys).
        """
        old_rank, new_rank = self.ranks
        old_value, new_value = self.compared
        status = np.where(
            self.is_both, "both", np.where(self.at[0] >= 0, "removed", "added")
        )
        table = self.keys.assign(
            status=status,
            old_rank=nullable(old_rank, "Int64"),
            new_rank=nullable(new_rank, "Int64"),
            rank_move=nullable(old_rank - new_rank, "Int64"),
            **{
                f"old_{self.value}": old_value,
                f"new_{self.value}": new_value,
                f"{self.value}_delta": new_value - old_value,
            },
            **more,
        )
        order = np.lexsort(
            (np.nan_to_num(old_rank, nan=np.inf), np.nan_to_num(new_rank, nan=np.inf))
        )
        return table.iloc[order].reset_index(drop=True)

    def figures(
        self, is_ranked: npt.NDArray[np.bool_], *, moved_places: int, top: Sequence[int]
    ) -> dict[str, Figure]:
        """The summary figures every diff of rankings reports (leaderboards and ratings).

        ``kendall_tau`` and ``spearman_rho`` of the values ranked on both sides
        (`is_ranked`), ``top_<k>_overlap`` (in both top-k lists),
        ``moved_places`` (N), ``moved_more_than_n``, ``max_rank_move`` and
        ``mean_abs_rank_move`` of those ranked on both sides, and
        ``<value>_delta_mean`` / ``_min`` / ``_max`` (new - old) over the known
        values of those on both sides; in the order the summaries show them.
        """
        (old_rank, new_rank), (old_value, new_value) = self.ranks, self.compared
        figures: dict[str, Figure] = {
            "kendall_tau": kendall_tau(old_value[is_ranked], new_value[is_ranked]),
            "spearman_rho": spearman_rho(old_value[is_ranked], new_value[is_ranked]),
        }
        for k in top:
            figures[f"top_{k}_overlap"] = int(((old_rank <= k) & (new_rank <= k)).sum())
        moves = np.abs(old_rank - new_rank)[is_ranked]
        delta = (new_value - old_value)[self.is_both]
        delta = delta[~np.isnan(delta)]
        value = self.value
        return figures | {
            "moved_places": moved_places,
            "moved_more_than_n": int((moves > moved_places).sum()),
            "max_rank_move": int(moves.max()) if moves.size else 0,
            "mean_abs_rank_move": float(moves.mean()) if moves.size else 0.0,
            f"{value}_delta_mean": float(delta.mean()) if delta.size else None,
            f"{value}_delta_min": float(delta.min()) if delta.size else None,
            f"{value}_delta_max": float(delta.max()) if delta.size else None,
        }


def line_up(
    old: pd.DataFrame, new: pd.DataFrame, *, on: Sequence[str], value: str
) -> Sides:
    """Line two ranked tables up by `on` (one hash join): see :class:`Sides`.

    Examples:
        >>> old = pd.DataFrame({"model": ["a", "b"], "rank": [1, 2], "rating": [2.0, 1.0]})
        >>> new = pd.DataFrame({"model": ["b", "c"], "rank": [1, 2], "rating": [3.0, 1.0]})
        >>> sides = line_up(old, new, on=["model"], value="rating")
        >>> sides.table()[["model", "status", "rank_move"]].to_dict("list")
        {'model': ['b', 'c', 'a'], 'status': ['both', 'added', 'removed'], 'rank_move': [1, None, None]}
    """
    keys, old_at, new_at = match_keys(old, new, on=on)
    return Sides(
        keys=keys,
        at=(old_at, new_at),
        ranks=(take_at(old, "rank", old_at), take_at(new, "rank", new_at)),
        compared=(take_at(old, value, old_at), take_at(new, value, new_at)),
        value=value,
    )


def _score_deltas(
    old: Snapshot,
    new: Snapshot,
    merged: pd.DataFrame,
    old_at: IntArray,
    new_at: IntArray,
    names: list[str],
) -> pd.DataFrame:
    """Long table of benchmark scores on both sides, from the leaderboards' columns."""

    def matrix(side: Snapshot, at: IntArray) -> FloatArray:
        columns = [
            take_at(side.leaderboard, name, at)
            if name in side.benchmarks
            else np.full(at.shape, np.nan)
            for name in names  # a suite's handful of benchmarks
        ]
        return np.column_stack(columns) if columns else np.zeros((len(at), 0))

    before, after = matrix(old, old_at), matrix(new, new_at)
    rows, columns = np.nonzero(~(np.isnan(before) & np.isnan(after)))
    return (
        merged.iloc[rows]
        .reset_index(drop=True)
        .assign(
            benchmark=np.asarray(names, dtype=object)[columns],
            old_score=before[rows, columns],
            new_score=after[rows, columns],
            delta=after[rows, columns] - before[rows, columns],
        )
    )


def _side_bounds(side: Snapshot) -> pd.DataFrame | None:
    if side.bounds is not None:
        return side.bounds[["benchmark", "subtask", "lower_bound"]]
    if side.subtasks is not None and len(side.subtasks):
        return _bounds_of(side.subtasks)
    return None


def _bound_changes(
    before: pd.DataFrame | None, after: pd.DataFrame | None, *, is_whole: bool
) -> pd.DataFrame:
    """The bounds that changed; added and removed ones only between two whole suites.

    A side's bounds read from its subtask table cover only the subtasks that
    have scores: a subtask missing there is coverage (see :func:`_coverage`),
    not a bound removed.
    """
    columns = ["benchmark", "subtask", "old_lower_bound", "new_lower_bound", "change"]
    if before is None or after is None:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in columns})
    merged = before.rename(columns={"lower_bound": "old_lower_bound"}).merge(
        after.rename(columns={"lower_bound": "new_lower_bound"}),
        on=["benchmark", "subtask"],
        how="outer" if is_whole else "inner",
        validate="one_to_one",
        indicator=True,
        sort=False,
    )
    side = merged["_merge"].astype(str).to_numpy()
    change = np.where(
        side == "left_only",
        "removed",
        np.where(side == "right_only", "added", "changed"),
    )
    is_changed = (side != "both") | (
        merged["old_lower_bound"].to_numpy() != merged["new_lower_bound"].to_numpy()
    )
    changes = merged.assign(change=change).loc[is_changed]
    return pd.DataFrame({name: changes[name].to_numpy() for name in columns})


def _scored(side: Snapshot) -> pd.DataFrame | None:
    """The (benchmark, subtask) pairs with a score on a side (None: no subtask table)."""
    if side.subtasks is None or not len(side.subtasks):
        return None
    return _bounds_of(side.subtasks)[["benchmark", "subtask"]]


def _coverage_frame(
    names: Sequence[str], before: Sequence[int], after: Sequence[int]
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "benchmark": pd.Series(list(names), dtype=object),
            "old_subtasks": pd.Series(list(before), dtype="int64"),
            "new_subtasks": pd.Series(list(after), dtype="int64"),
        }
    )


def _coverage(
    before: pd.DataFrame | None, after: pd.DataFrame | None, names: Sequence[str]
) -> pd.DataFrame:
    """Per benchmark, the subtasks with scores on each side (:func:`_scored`), where they differ."""
    if before is None or after is None:
        return _coverage_frame([], [], [])
    old, new = (
        np.array([int((side["benchmark"] == name).sum()) for name in names])
        for side in (before, after)  # a suite's handful of benchmarks
    )
    differ = old != new
    return _coverage_frame(
        np.asarray(names, dtype=object)[differ], old[differ], new[differ]
    )


def _clip_changes(
    old: Snapshot,
    new: Snapshot,
    merged: pd.DataFrame,
    old_bounds: pd.DataFrame | None,
    new_bounds: pd.DataFrame | None,
) -> tuple[int | None, int | None]:
    """Subtask scores clipped on one side only (variants and subtasks on both)."""
    if (
        old.subtasks is None
        or new.subtasks is None
        or not len(old.subtasks)
        or not len(new.subtasks)
    ):
        return None, None
    assert old_bounds is not None
    assert new_bounds is not None
    subtasks = pd.concat([old_bounds, new_bounds], ignore_index=True).drop_duplicates(
        ["benchmark", "subtask"], ignore_index=True
    )
    shape = (len(merged), len(subtasks))

    def clip_matrix(table: pd.DataFrame) -> npt.NDArray[np.int8]:
        matrix = np.full(shape, -1, dtype=np.int8)  # -1: no score
        variant = align_variants(table, merged)
        subtask = align_rows(table, subtasks, on=["benchmark", "subtask"])
        matrix[variant, subtask] = table["is_clipped"].to_numpy(dtype=np.int8)
        return matrix

    before, after = clip_matrix(old.subtasks), clip_matrix(new.subtasks)
    return int(((before == 0) & (after == 1)).sum()), int(
        ((before == 1) & (after == 0)).sum()
    )


def _beyond_intervals(
    old: Snapshot, new: Snapshot, sides: Sides, is_ranked: npt.NDArray[np.bool_]
) -> FloatArray:
    """1.0 where a rank move is beyond the intervals, 0.0 within, NaN unknown.

    Beyond: the new rank is outside the old rank interval and the old rank
    outside the new one, and the variant's own average moved beyond its own
    95% intervals (the new average outside the old interval, the old average
    outside the new one). A variant pushed down by a newcomer, or by others
    leaving, its average unchanged, is within.
    """
    if old.intervals is None or new.intervals is None:
        return np.full(len(sides.keys), np.nan)
    columns = ("rank_best", "rank_worst", "average_low", "average_high")

    def interval(side: pd.DataFrame) -> list[FloatArray]:
        at = align_rows(sides.keys, side, on=KEY_COLUMNS)
        return [take_at(side, name, at) for name in columns]

    old_best, old_worst, old_low, old_high = interval(old.intervals)
    new_best, new_worst, new_low, new_high = interval(new.intervals)
    (old_rank, new_rank), (old_average, new_average) = sides.ranks, sides.compared
    rank_outside = ((new_rank < old_best) | (new_rank > old_worst)) & (
        (old_rank < new_best) | (old_rank > new_worst)
    )
    average_outside = ((new_average < old_low) | (new_average > old_high)) & (
        (old_average < new_low) | (old_average > new_high)
    )
    known = is_ranked
    for bound in (old_best, new_best, old_low, new_low):
        known = known & ~np.isnan(bound)
    return np.where(known, (rank_outside & average_outside).astype(np.float64), np.nan)


def _reasons(
    old: Snapshot,
    new: Snapshot,
    merged: pd.DataFrame,
    new_at: IntArray,
    new_rank: FloatArray,
) -> npt.NDArray[np.object_]:
    """Why each variant is unranked on the new side or gone from it (None: nothing to say).

    Excluded (flagged in the metadata, with an average), incomplete (the
    benchmarks it lacks), and a results file of the variant that the new run
    rejected (its old subtask rows' ``source``, else ``<org>/<model>/`` in the
    rejected file's path).
    """
    reasons = np.full(len(merged), None, dtype=object)
    is_unranked = (new_at >= 0) & np.isnan(new_rank)
    if is_unranked.any():
        board = new.leaderboard
        rows = new_at[is_unranked]
        lacking = np.full(rows.size, "", dtype=object)
        for name in new.benchmarks:  # a suite's handful of benchmarks
            is_missing = np.isnan(take_at(board, name, rows))
            lacking = np.where(
                is_missing, lacking + np.where(lacking == "", "", ", ") + name, lacking
            )
        text: npt.NDArray[np.object_] = np.where(
            lacking == "", np.array(None, dtype=object), "incomplete: no " + lacking
        )
        if "flagged" in board.columns:
            is_flagged = board["flagged"].fillna(False).to_numpy(dtype=bool)[
                rows
            ] & ~np.isnan(take_at(board, "average", rows))
            text = np.where(is_flagged, "excluded: flagged in the metadata", text)
        reasons[is_unranked] = text
    if new.rejected:
        rejected = _rejected_files(old, merged, new.rejected)
        is_gone = (new_at < 0) | is_unranked
        has_file = is_gone & pd.notna(rejected)
        note = "file rejected: " + rejected[has_file].astype(str)
        reasons[has_file] = np.where(
            pd.isna(reasons[has_file]),
            note,
            reasons[has_file].astype(str) + "; " + note,
        )
    return reasons


def _rejected_files(
    old: Snapshot, merged: pd.DataFrame, rejected: Sequence[str]
) -> npt.NDArray[np.object_]:
    """Per variant, a rejected file it came from on the old side (None: none)."""
    found = np.full(len(merged), None, dtype=object)
    subtasks = old.subtasks
    if subtasks is not None and "source" in subtasks.columns:
        rows = subtasks[subtasks["source"].astype(str).isin(list(rejected))]
        at = align_variants(rows, merged)
        found[at[at >= 0]] = rows["source"].astype(str).to_numpy()[at >= 0]
        return found
    by_model = {  # <org>/<model>/results_*.json: the model the leaderboard layout names
        f"{PurePath(path).parent.parent.name}/{PurePath(path).parent.name}": path
        for path in rejected
    }
    models = merged["model"].astype(str)
    found[:] = models.map(by_model).to_numpy(dtype=object)
    found[pd.isna(found)] = None
    return found


def read_snapshot(
    out: Output | str | Path, *, intervals: bool = True, columns: Sequence[str] = ()
) -> Snapshot:
    """Read an output directory as one side of a diff.

    The bounds are its suite's, when the suite can still be loaded unchanged
    (see :meth:`Output.suite`), else those its subtask table records. Rank
    intervals come from its ``intervals.parquet`` if there is one, else are
    computed from the subtasks' stderr when the suite loads. The input files
    its run rejected (``--cache``) are read from its manifest.

    Args:
        out: The output directory.
        intervals: Read or compute rank intervals.
        columns: More subtask columns to read.

    Returns:
        The snapshot.

    Raises:
        InputError: Not an output directory, or unreadable.
    """
    folder = Output.open(out, "leaderboard")
    leaderboard = folder.frame("leaderboard")
    suite, missing = folder.suite()
    bounds = (
        None
        if suite is None
        else suite.subtask_table()[["benchmark", "subtask", "lower_bound"]]
    )
    table = None
    if intervals and folder.has("intervals"):
        table = folder.frame("intervals")
    subtasks = None
    if folder.has("subtasks"):  # (not written with --no-subtasks)
        wanted = [
            *KEY_COLUMNS,
            "benchmark",
            "subtask",
            "lower_bound",
            "is_clipped",
            *columns,
        ]
        if "source" in folder.schema("subtasks").names:
            # a variant lost to a rejected file is named with it
            wanted.append("source")
        if intervals:
            wanted += ["raw_score", "stderr", "n_samples"]
        subtasks = folder.frame("subtasks", columns=list(dict.fromkeys(wanted)))
        if table is None and intervals and len(subtasks) and suite is not None:
            table = estimate_uncertainty(
                subtasks, leaderboard, suite, missing=missing
            ).leaderboard
    return Snapshot(
        leaderboard=leaderboard,
        benchmarks=benchmark_columns(leaderboard.columns),
        subtasks=subtasks if subtasks is not None and len(subtasks) else None,
        bounds=bounds,
        intervals=table,
        label=str(out),
        rejected=_rejected_inputs(folder),
    )


def _rejected_inputs(folder: Output) -> tuple[str, ...]:
    """The input files an output's run rejected (``cache`` is ``rejected``), as recorded."""
    inputs = folder.inputs()
    if "cache" not in inputs.column_names:
        return ()
    is_rejected = pc.fill_null(pc.equal(inputs["cache"], "rejected"), False)
    return tuple(map(str, inputs["path"].filter(is_rejected).to_pylist()))
