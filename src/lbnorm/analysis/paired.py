"""Paired comparisons of an output's models, and of one model across two outputs.

:func:`compare_paired` (``lbnorm compare OUT A B --paired``) puts two variants of
one output side by side per subtask, benchmark and the average: the difference
of their scores on the items both answered, its paired standard error, the
unpaired one (from the errors the output reports) beside it, a two-sided
p-value and, for binary items, McNemar's exact test. :func:`diff_paired`
(``lbnorm diff OLD NEW --paired``) does the same for each variant in two outputs
(the same model re-evaluated: a new harness version, a fixed prompt) and says
which benchmark moved beyond its paired noise. The arithmetic is
:mod:`lbnorm.engines.paired`'s; ``docs/paired.md`` explains the numbers.

Both re-read the per-sample inputs the run listed in its manifest (the sample
files and tables that gave scores) and check them against the output: each
variant's mean over its items must be the subtask's raw score, or the inputs
changed since the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from lbnorm.analysis.align import is_variant
from lbnorm.core.errors import InputError, OptionsError
from lbnorm.core.options import MissingPolicy, PairedAdjust, check_paired_alpha
from lbnorm.core.schemas import KEY_COLUMNS
from lbnorm.engines.paired import (
    Level,
    LevelStatistics,
    adjust_p_values,
    level_statistics,
    pair_moments,
    refuse_unpairable,
    score_scale,
    suite_levels,
)
from lbnorm.engines.stderr import binomial_stderr, score_variance
from lbnorm.output.reader import Output
from lbnorm.readers.items import (
    Items,
    ItemSource,
    read_items,
    unpaired_benchmarks,
    variant_rows,
    without_scores,
)
from lbnorm.suites import Suite, SuiteArrays, suite_arrays

__all__ = [
    "PairedComparison",
    "PairedDiff",
    "compare_paired",
    "diff_paired",
    "tied_groups",
    "variant_name",
]

FloatArray = npt.NDArray[np.float64]
#: A variant: a model name (its only variant), or its key columns.
VariantSpec = str | Mapping[str, object]
#: The per-sample input formats, as the run's catalog names them.
_SAMPLE_FORMATS = ("lm-eval-samples", "sample-table")
#: Largest gap between an input's mean and the output's raw score.
_SAME_SCORE = 1e-9
_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedComparison:
    """Two variants of one output, compared on the items both answered.

    Attributes:
        variants: The two variants' key columns (a, then b) and ``rank``.
        levels: One row per level (``average``, each benchmark, each subtask of
            a benchmark of several: ``benchmark/subtask``): ``level``,
            ``score_a`` and ``score_b`` (the output's), ``difference`` (a - b on
            the matched items), ``stderr`` (paired), ``stderr_unpaired``
            (``sqrt(se_a² + se_b²)``, the output's errors), ``stderr_a`` and
            ``stderr_b`` (each model's own, from all its items, clustered where
            the suite says), ``p_value``, ``p_adjusted`` (across the rows),
            ``p_mcnemar``, ``separable``, ``n_items``, ``n_items_unmatched``.
        unmatched: Items only one has: ``level`` (its subtask), ``model`` (the
            one that has it), ``document`` (its ``doc_id`` or ``doc_hash``) and
            ``position`` (in a list-valued metric's list, else -1).
        notes: How documents were matched, repeated documents, subtasks without
            per-sample data.
    """

    variants: pd.DataFrame
    levels: pd.DataFrame
    unmatched: pd.DataFrame
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PairedDiff:
    """Each variant of two outputs, compared with itself on the items both runs have.

    Attributes:
        changes: One row per (variant, level): the key columns, ``level``,
            ``old_score``, ``new_score``, ``difference`` (new - old on the
            matched items), ``stderr`` (paired), ``stderr_unpaired``,
            ``p_value``, ``p_adjusted`` (across the table), ``p_mcnemar``,
            ``moved`` (beyond its paired noise: ``p_adjusted`` below the
            level), ``n_items``, ``n_items_unmatched``.
        labels: The two outputs.
        notes: Variants only one output has, variants without per-sample data.
    """

    changes: pd.DataFrame
    labels: tuple[str, str]
    notes: tuple[str, ...]


def _sample_sources(out: Output, tag: str) -> list[ItemSource]:
    """The per-sample inputs of an output that gave scores, read as side `tag`.

    Raises:
        InputError: The run read no per-sample input, or one is gone.
    """
    listing = out.inputs()
    rows = listing.to_pylist() if listing.num_rows else []
    sources = []
    for row in rows:  # a step per input file
        if row.get("format") not in _SAMPLE_FORMATS or not row.get("rows"):
            continue
        if row.get("superseded_by") is not None:
            continue
        path = Path(str(row["path"]))
        if not path.exists() and row.get("resolved"):
            path = Path(str(row["resolved"]))
        if not path.exists():
            msg = f"{out}: its per-sample input {row['path']} is gone.\nHint: a paired comparison re-reads the per-sample inputs the run read; keep them where the run found them (or run again)."
            raise InputError(msg)
        sources.append(ItemSource(path=path, tag=tag))
    if not sources:
        msg = f"{out}: its run read no per-sample input (every score came from results files or score tables).\nHint: a paired comparison needs the harness's samples_<task>_<timestamp>.jsonl files (--log_samples) or a sample table among the run's inputs (docs/paired.md)."
        raise InputError(msg)
    return sources


def tied_groups(
    out: Output | str | Path, level: str = "average"
) -> pd.DataFrame | None:
    """Each variant's group of statistically tied variants at a level (``run --paired``).

    Consecutive variants no adjacent test separates share a group (1 = the
    top); read from ``paired.parquet``.

    Args:
        out: The output directory (or the output opened).
        level: ``average`` or a benchmark's name.

    Returns:
        The key columns and ``tied`` (the group), a row per variant ranked at
        the level; None if the output has no ``paired.parquet``, or the level
        is not one it compares (a statistic, a rate).
    """
    output = Output.open(out, "leaderboard")
    if not output.has("paired"):
        return None
    paired = output.frame("paired")
    levels = paired["level"].astype("str")
    if level not in _level_names(paired["level"]):
        return None
    rows = paired.loc[levels == level]
    sides = [
        rows[[f"{key}_{side}" for key in KEY_COLUMNS] + [f"group_{side}"]].set_axis(
            [*KEY_COLUMNS, "tied"], axis=1
        )
        for side in ("a", "b")
    ]
    groups = pd.concat(sides, ignore_index=True).drop_duplicates(list(KEY_COLUMNS))
    return groups.astype(
        {key: "str" for key in KEY_COLUMNS if key != "chat_template"}
    ).astype({"tied": "Int64"})


def _level_names(column: pd.Series) -> set[str]:
    """The levels ``paired.parquet`` compares (a level of one variant has no row)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return {str(name) for name in column.cat.categories}
    return set(column.astype("str").unique().tolist())


def compare_paired(
    out: Output | str | Path,
    a: VariantSpec,
    b: VariantSpec,
    *,
    adjust: PairedAdjust = "holm",
    alpha: float = 0.05,
) -> PairedComparison:
    """Compare two variants of an output on the items both answered.

    Args:
        out: The output directory.
        a: The first variant: a model name, or its key columns
            (``model``, and ``precision`` etc. where the model has several).
        b: The second variant.
        adjust: How the p-values are adjusted across the levels.
        alpha: The level below which an adjusted p-value separates them.

    Returns:
        The comparison (:class:`PairedComparison`).

    Raises:
        OptionsError: A model is not in the output, or has several variants;
            `alpha` is not in (0, 1); nothing in the suite can be compared.
        InputError: The output's suite is gone, its per-sample inputs are gone
            or changed since the run, or a model has no per-sample data.
    """
    check_paired_alpha(alpha)
    out = Output.open(out, "leaderboard")
    suite, missing = _suite_of(out)
    board = out.frame("leaderboard")
    variants = pd.concat(
        [_variant(board, a, out), _variant(board, b, out)], ignore_index=True
    )
    models = variants["model"].astype("str").unique().tolist()
    items = read_items(_sample_sources(out, ""), suite, models=models)
    row = variant_rows(
        pa.Table.from_pandas(variants[list(KEY_COLUMNS)], preserve_index=False), items
    )
    for at in np.flatnonzero(row < 0).tolist():
        msg = f"{out}: {variant_name(variants.iloc[at])} has no per-sample data among the run's inputs (its scores came from results files or a score table).\nHint: run again with its samples_<task>_<timestamp>.jsonl files, or its rows in a sample table."
        raise InputError(msg)
    subtasks = out.frame("subtasks", models=models) if out.has("subtasks") else None
    if subtasks is not None:
        items = _only_sampled(items, subtasks, out, suite)
        _check_scores(out, items, row, variants, subtasks, suite)
    arrays = suite_arrays(suite)
    levels, left_out = suite_levels(suite, arrays, subtasks=True)
    moments = pair_moments(items, row[[0, 0, 1]], row[[1, 0, 1]])
    stats = [
        level_statistics(moments, arrays, level, missing=missing, mcnemar=True)
        for level in levels
    ]
    reported = _reported(board, variants, levels, subtasks, suite)
    frame = _level_table(levels, stats, reported)
    adjusted = adjust_p_values(frame["p_value"].to_numpy(dtype=np.float64), adjust)
    frame = frame.assign(
        p_adjusted=adjusted,
        separable=_flags(adjusted, alpha),
    ).astype({"n_items": "int64", "n_items_unmatched": "int64"})
    return PairedComparison(
        variants=variants,
        levels=frame,
        unmatched=_unmatched(items, row, variants, suite),
        notes=(
            *_notes(items, row, variants, suite),
            *(f"not compared: {note}" for note in left_out),
        ),
    )


def _level_table(
    levels: list[Level], stats: list[LevelStatistics], reported: FloatArray
) -> pd.DataFrame:
    """A row per level: each side's reported score, the paired difference, its tests.

    `stats` holds each level's statistics over the pairs (a-b, a-a, b-b): the
    difference, its paired error and the p-values come from the first; each
    side's own paired error from its pair with itself. `reported` is
    :func:`_reported`'s scores and errors, for the unpaired error beside.
    """
    return pd.DataFrame(
        {
            "level": [level.name for level in levels],
            "score_a": reported[0, :, 0],
            "score_b": reported[0, :, 1],
            "difference": [s.difference[0] for s in stats],
            "stderr": [s.stderr[0] for s in stats],
            "stderr_unpaired": np.sqrt(reported[1, :, 0] ** 2 + reported[1, :, 1] ** 2),
            "stderr_a": [s.stderr_a[1] for s in stats],
            "stderr_b": [s.stderr_b[2] for s in stats],
            "p_value": [s.p_value[0] for s in stats],
            "p_mcnemar": [s.p_mcnemar[0] for s in stats],
            "n_items": [s.n_items[0] for s in stats],
            "n_items_unmatched": [s.n_items_unmatched[0] for s in stats],
        }
    )  # a row per level of the suite (tens), each from the vectorized statistics


def diff_paired(
    old: Output | str | Path,
    new: Output | str | Path,
    *,
    adjust: PairedAdjust = "holm",
    alpha: float = 0.05,
    subtasks: bool = False,
) -> PairedDiff:
    """Compare each variant of two outputs with itself, on the items both runs have.

    Args:
        old: The reference output directory.
        new: The changed output directory (the same suite).
        adjust: How the p-values are adjusted across the table.
        alpha: The level below which an adjusted p-value says a score moved.
        subtasks: Also a row per subtask of a benchmark of several.

    Returns:
        The paired diff (:class:`PairedDiff`).

    Raises:
        OptionsError: `alpha` is not in (0, 1); nothing in the suite can be compared.
        InputError: A suite is gone, or the two suites score differently; the
            per-sample inputs are gone; no variant is in both outputs.
    """
    check_paired_alpha(alpha)
    old, new = (Output.open(side, "leaderboard") for side in (old, new))
    suite, missing = _suite_of(new)
    _check_same_rules(_suite_of(old)[0], suite, old, new)
    boards = [side.frame("leaderboard") for side in (old, new)]
    keys = list(KEY_COLUMNS)
    both = boards[1][keys].merge(
        boards[0][keys], on=keys, how="inner", validate="one_to_one"
    )
    if both.empty:
        msg = f"{old} and {new} have no variant in common.\nHint: `lbnorm diff --paired` compares the same models re-evaluated; run both on the same models."
        raise InputError(msg)
    models = both["model"].astype("str").unique().tolist()
    items = _two_sided_items(old, new, suite, models)
    key_table = pa.Table.from_pandas(both, preserve_index=False)
    new_row, old_row = (
        variant_rows(key_table, items, tag=tag) for tag in ("new", "old")
    )
    compared = (new_row >= 0) & (old_row >= 0)
    arrays = suite_arrays(suite)
    levels, left_out = suite_levels(suite, arrays, subtasks=subtasks)
    moments = pair_moments(items, new_row[compared], old_row[compared])
    reported = [_level_scores(board, both, levels) for board in boards]
    frames = []
    for at, level in enumerate(levels):  # the suite's levels, each for every variant
        stats = level_statistics(moments, arrays, level, missing=missing, mcnemar=True)
        scores = (reported[0][0][at], reported[1][0][at])
        errors = (reported[0][1][at], reported[1][1][at])
        frames.append(_diff_rows(both, compared, level, stats, scores, errors))
    changes = pd.concat(frames, ignore_index=True)
    adjusted = adjust_p_values(changes["p_value"].to_numpy(dtype=np.float64), adjust)
    changes = changes.assign(
        p_adjusted=adjusted,
        moved=_flags(adjusted, alpha),
    )
    notes = []
    if n_only := len(boards[0]) + len(boards[1]) - 2 * len(both):
        notes.append(f"{n_only:,} variant(s) in one output only, not compared")
    if lacking := int((~compared).sum()):
        names_missing = [
            variant_name(row) for _, row in both.loc[~compared].head(_SHOWN).iterrows()
        ]
        notes.append(
            f"{lacking:,} variant(s) without per-sample data on one side: {', '.join(names_missing)}"
        )
    notes.extend(f"not compared: {note}" for note in left_out)
    return PairedDiff(changes=changes, labels=(str(old), str(new)), notes=tuple(notes))


def _two_sided_items(
    old: Output, new: Output, suite: Suite, models: list[str]
) -> Items:
    sources = [*_sample_sources(old, "old"), *_sample_sources(new, "new")]
    items = read_items(sources, suite, models=models)
    for side, tag in ((old, "old"), (new, "new")):
        if side.has("subtasks"):
            subtasks = side.frame("subtasks", models=models)
            items = _only_sampled(items, subtasks, side, suite, tag=tag)
    return items


def _only_sampled(
    items: Items,
    subtasks: pd.DataFrame,
    out: Output,
    suite: Suite,
    *,
    tag: str = "",
) -> Items:
    """The items of the scores the per-sample inputs gave (not a results file's)."""
    listing = out.inputs()
    recorded = {
        str(path)
        for path, kind in zip(
            listing["path"].to_pylist(), listing["format"].to_pylist(), strict=True
        )  # a step per input file
        if kind in _SAMPLE_FORMATS
    }
    other = ~subtasks["source"].astype("str").isin(recorded)
    if not other.any():
        return items
    rows = subtasks.loc[other, [*KEY_COLUMNS, "benchmark", "subtask"]]
    scores = pa.Table.from_pandas(
        rows.astype({"benchmark": "str", "subtask": "str"}), preserve_index=False
    )
    return without_scores(items, scores, suite, tag=tag)


def _suite_of(out: Output) -> tuple[Suite, MissingPolicy]:
    suite, missing = out.suite()
    if suite is None:
        msg = f"{out}: the suite it was computed with is gone or changed.\nHint: a paired comparison applies the suite's rules again; restore the suite file (or run again)."
        raise InputError(msg)
    refuse_unpairable(suite, where=str(out))
    return suite, missing


def _check_same_rules(first: Suite, second: Suite, old: Output, new: Output) -> None:
    def rules(suite: Suite) -> list[tuple[object, ...]]:
        return [
            (
                b.name,
                b.aggregation,
                b.weight,
                s.name,
                s.task,
                s.metric,
                s.lower_bound,
                s.cluster,
            )
            for b in suite.benchmarks
            for s in b.subtasks
        ]

    if rules(first) != rules(second):
        msg = f"{old} and {new} were computed with suites that score differently ({first.display_name}, {second.display_name}).\nHint: `lbnorm diff --paired` compares runs under one suite; for a suite change, use `lbnorm diff` or `lbnorm impact`."
        raise InputError(msg)


def _variant(board: pd.DataFrame, spec: VariantSpec, out: Output) -> pd.DataFrame:
    """The leaderboard row of one variant (a model name, or its key columns)."""
    given = {"model": spec} if isinstance(spec, str) else dict(spec)
    if unknown := sorted(set(given) - set(KEY_COLUMNS)):
        msg = f"unknown key column(s) {unknown} for a variant.\nHint: name a variant by {list(KEY_COLUMNS)}."
        raise OptionsError(msg)
    rows = board.loc[is_variant(board, given), [*KEY_COLUMNS, "rank"]]
    if len(rows) == 1:
        return rows.reset_index(drop=True)
    if rows.empty:
        msg = f"{out}: no variant {given} in the leaderboard.\nHint: give the model's full name as `lbnorm show {out} --model PATTERN` lists it."
        raise OptionsError(msg)
    shown = [variant_name(row) for _, row in rows.head(_SHOWN).iterrows()]
    msg = f"{out}: {given} matches {len(rows)} variants: {', '.join(shown)}.\nHint: give precision, revision or chat_template too."
    raise OptionsError(msg)


def variant_name(row: pd.Series) -> str:
    """A variant as the paired faces name it: ``model [precision]`` (no brackets without one)."""
    precision = str(row["precision"])
    return f"{row['model']}" + (f" [{precision}]" if precision else "")


def _check_scores(
    out: Output,
    items: Items,
    row: npt.NDArray[np.int64],
    variants: pd.DataFrame,
    subtasks: pd.DataFrame,
    suite: Suite,
) -> None:
    """Each variant's mean over its items is the output's raw score, or the inputs changed."""
    names = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
    for at in range(len(variants)):  # the two variants
        own = _subtask_rows(subtasks, variants.iloc[at])
        for k, subtask in enumerate(items.subtasks):  # the suite's subtasks
            if subtask is None or names[k] not in own.index:
                continue
            values = subtask.floats([row[at]])[0]
            if np.isnan(values).all():
                continue
            mean = float(np.nanmean(values))
            score = float(own.loc[[names[k]]].iloc[0]["raw_score"])
            if abs(mean - score) > _SAME_SCORE:
                msg = f"{out}: the per-sample inputs give {variant_name(variants.iloc[at])} {mean:.6f} on {names[k][0]}/{names[k][1]}, but the output says {score:.6f}: the inputs changed since the run (or the score came from another input).\nHint: run again (`lbnorm run ... --out {out}`), then compare."
                raise InputError(msg)


def _subtask_rows(subtasks: pd.DataFrame, variant: pd.Series) -> pd.DataFrame:
    """The variant's rows of the subtask table, indexed by (benchmark, subtask)."""
    mine = subtasks.loc[is_variant(subtasks, {k: variant[k] for k in KEY_COLUMNS})]
    return mine.set_index(
        [mine["benchmark"].astype("str"), mine["subtask"].astype("str")]
    )


def _reported(
    board: pd.DataFrame,
    variants: pd.DataFrame,
    levels: list[Level],
    subtasks: pd.DataFrame | None,
    suite: Suite,
) -> FloatArray:
    """``(2, n_levels, 2)``: each variant's score and standard error as the output reports them.

    The average's and the benchmarks' are the leaderboard's (:func:`_level_scores`),
    a subtask's the subtask table's.
    """
    result = np.array(_level_scores(board, variants[list(KEY_COLUMNS)], levels))
    arrays = suite_arrays(suite)
    names = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
    if subtasks is None:
        return result
    subtask_levels = [
        (at, int(level.subtasks[0]))
        for at, level in enumerate(levels)
        if level.is_subtask
    ]
    for side in range(2):  # the two variants
        own = _subtask_rows(subtasks, variants.iloc[side])
        for at, k in subtask_levels:  # (a subtask level's one suite row: k)
            if names[k] in own.index:
                picked = own.loc[[names[k]]].iloc[0]
                stderr = _subtask_stderr(picked, arrays, k)
                result[:, at, side] = [_number(picked["normalized_score"]), stderr]
    return result


def _number(value: Any) -> float:
    """A table's value as a float (NaN for a null)."""
    return float("nan") if pd.isna(value) else float(value)


def _flags(adjusted: FloatArray, alpha: float) -> pd.Series:
    """``adjusted < alpha``, null where there is no p-value."""
    return pd.Series(adjusted < alpha, dtype="boolean").mask(np.isnan(adjusted))


def _subtask_stderr(row: pd.Series, arrays: SuiteArrays, k: int) -> float:
    """A subtask's standard error in normalized points, as the benchmarks' is built.

    A missing stderr is the binomial one of the fraction of its range (as the
    kernel estimates it); the score's scale follows the range too.
    """
    raw = float(row["raw_score"])
    se = row["stderr"]
    if pd.isna(se):
        items = arrays.items[k] if arrays.items is not None else arrays.n_samples[k]
        scales = arrays.scales
        low, width = (
            (0.0, 1.0)
            if scales is None
            else (float(scales.low[k]), float(scales.high[k] - scales.low[k]))
        )
        se = float(binomial_stderr([(raw - low) / width], [items])[0]) * width
    offset, scale = score_scale(arrays, np.array([k]))
    return float(
        np.sqrt(
            score_variance([(raw - offset[0]) * scale[0]], [float(se) * scale[0]])[0]
        )
    )


def _unmatched(
    items: Items, row: npt.NDArray[np.int64], variants: pd.DataFrame, suite: Suite
) -> pd.DataFrame:
    """The items only one of the two has, named."""
    names = [f"{b.name}/{s.name}" for b in suite.benchmarks for s in b.subtasks]
    frames = []
    for k, subtask in enumerate(items.subtasks):  # the suite's subtasks
        if subtask is None:
            continue
        have = subtask.codes[row[:2]] != 0
        for side in range(2):
            only = np.flatnonzero(have[side] & ~have[1 - side])
            if only.size:
                frames.append(
                    pd.DataFrame(
                        {
                            "level": names[k],
                            "model": variant_name(variants.iloc[side]),
                            "document": subtask.documents.take(
                                pa.array(only)
                            ).to_pylist(),
                            "position": subtask.positions[only],
                        }
                    )
                )
    if not frames:
        return pd.DataFrame({"level": [], "model": [], "document": [], "position": []})
    return pd.concat(frames, ignore_index=True)


def _notes(
    items: Items, row: npt.NDArray[np.int64], variants: pd.DataFrame, suite: Suite
) -> tuple[str, ...]:
    """How documents were matched, and what was not compared."""
    notes = []
    by_key: dict[str, list[str]] = {}
    for task, subtask in zip(items.tasks, items.subtasks, strict=True):
        if subtask is not None:
            by_key.setdefault(subtask.key, [])
            if task not in by_key[subtask.key]:
                by_key[subtask.key].append(task)
    for key, tasks in sorted(by_key.items()):
        notes.append(f"documents matched by {key} in {len(tasks)} task(s)")
    duplicated = sum(s.n_duplicated for s in items.subtasks if s is not None)
    if duplicated:
        notes.append(
            f"{duplicated:,} line(s) repeat a document of their file (one doc_hash): matched copy by copy"
        )
    clustered = sorted(
        {s.cluster for b in suite.benchmarks for s in b.subtasks if s.cluster}
    )
    if clustered:
        notes.append(f"standard errors clustered by {', '.join(clustered)}")
    names = [f"{b.name}/{s.name}" for b in suite.benchmarks for s in b.subtasks]
    left_out = unpaired_benchmarks(suite)  # (said apart)
    compared = [
        index not in left_out
        for index, b in enumerate(suite.benchmarks)
        for _ in b.subtasks
    ]
    for side in range(2):
        missing = [
            names[k]
            for k, s in enumerate(items.subtasks)
            if compared[k] and (s is None or not (s.codes[row[side]] != 0).any())
        ]
        if missing:
            notes.append(
                f"{variant_name(variants.iloc[side])}: no per-sample data for {len(missing)} subtask(s), e.g. {', '.join(missing[:3])}"
            )
    return tuple(notes)


def _level_scores(
    board: pd.DataFrame, both: pd.DataFrame, levels: list[Level]
) -> tuple[list[FloatArray], list[FloatArray]]:
    """Per level, each common variant's score and stderr on one leaderboard.

    NaN for a subtask level (the leaderboard holds benchmarks and the average).
    """
    aligned = both.merge(board, on=list(KEY_COLUMNS), how="left", validate="one_to_one")
    scores, errors = [], []
    for level in levels:  # the suite's levels
        if level.is_subtask:
            scores.append(np.full(len(both), np.nan))
            errors.append(np.full(len(both), np.nan))
            continue
        name = "average" if level.benchmark < 0 else level.name
        error = "average_stderr" if level.benchmark < 0 else f"{name} stderr"
        scores.append(aligned[name].to_numpy(dtype=np.float64, na_value=np.nan))
        errors.append(aligned[error].to_numpy(dtype=np.float64, na_value=np.nan))
    return scores, errors


def _diff_rows(
    both: pd.DataFrame,
    compared: npt.NDArray[np.bool_],
    level: Level,
    stats: LevelStatistics,
    scores: tuple[FloatArray, FloatArray],
    errors: tuple[FloatArray, FloatArray],
) -> pd.DataFrame:
    """One level's rows of the paired diff: every common variant."""

    def spread(values: FloatArray) -> FloatArray:
        out = np.full(len(both), np.nan)
        out[compared] = values
        return out

    return both.assign(
        level=level.name,
        old_score=scores[0],
        new_score=scores[1],
        difference=spread(stats.difference),
        stderr=spread(stats.stderr),
        stderr_unpaired=np.sqrt(errors[0] ** 2 + errors[1] ** 2),
        p_value=spread(stats.p_value),
        p_mcnemar=spread(stats.p_mcnemar),
        n_items=spread(stats.n_items),
        n_items_unmatched=spread(stats.n_items_unmatched),
    )
