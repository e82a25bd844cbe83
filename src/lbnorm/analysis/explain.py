"""Explain one variant's numbers: every step from a raw subtask score to its rank.

Failing to reproduce a leaderboard number is the question users bring most to a
leaderboard's maintainers. :func:`explain_variant` answers it for one variant
from an output folder alone (its subtask table, benchmark table, leaderboard and
manifest), so it works for any published run: each subtask's raw score and
where it was read, its lower bound and where the bound came from, its
normalized and clipped value; each benchmark's rule and the sample sizes a
pooled one used, its score recomputed from the subtasks beside the table's; the
average with its weights; the rank and its interval.

The suite the run used (named in the manifest) gives the rules, ``num_choices``
and weights; if its file is gone or changed, the rule of each benchmark is
worked out from the tables (the one whose recomputation gives the table's
score) and the weights are taken as equal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import numpy as np
import pandas as pd

from lbnorm.analysis.align import is_variant
from lbnorm.analysis.uncertainty import interval_ranks, normal_quantile
from lbnorm.core.errors import InputError
from lbnorm.core.schemas import KEY_COLUMNS
from lbnorm.output.reader import Output
from lbnorm.suites import Suite, match_benchmark

__all__ = ["Explanation", "explain_variant"]

#: The rules, as the suite spells them.
_AVERAGE_RULE = "normalize-then-average"
_POOL_RULE = "pool-then-normalize"


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    """How one variant's scores were computed.

    Attributes:
        variant: The variant's keys (``model``, ``precision``, ``revision``,
            ``chat_template``).
        suite: The suite's name and whether its file was found unchanged.
        subtasks: One row per subtask: ``benchmark``, ``subtask``, ``source``
            (file), ``key`` (where in it), ``raw_score``, ``num_choices``,
            ``lower_bound``, ``bound_from``, ``normalized`` (before clipping),
            ``normalized_score`` (clipped, the table's), ``is_clipped`` and
            ``n_samples`` (the pooling weight; null for an averaged benchmark).
        benchmarks: One row per benchmark: ``benchmark``, ``rule``,
            ``raw_score`` and ``normalized_score`` (the table's),
            ``recomputed`` (from the subtask rows by the rule), ``n_subtasks``,
            ``n_subtasks_expected``, ``weight`` and ``contribution``
            (weight x score / total weight).
        average: The leaderboard's average, its standard error and the
            recomputed weighted mean.
        rank: ``rank`` (null if unranked), ``rank_best``, ``rank_worst``,
            ``level`` and ``interval_from`` (the run's intervals table, or the
            leaderboard's average and its standard error).
        input_root: The folder the run's input files share (its results tree,
            say), as recorded; '' when they share none. A source is shown
            relative to it.
    """

    variant: dict[str, Any]
    suite: dict[str, Any]
    subtasks: pd.DataFrame
    benchmarks: pd.DataFrame
    average: dict[str, Any]
    rank: dict[str, Any]
    input_root: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (nulls as None)."""
        return {
            "variant": self.variant,
            "suite": self.suite,
            "subtasks": _records(self.subtasks),
            "benchmarks": _records(self.benchmarks),
            "average": self.average,
            "rank": self.rank,
        }


def explain_variant(
    out: Output | str | Path,
    variant: dict[str, Any],
    *,
    benchmark: str | None = None,
    level: float = 0.95,
) -> Explanation:
    """Explain one variant's numbers from an output folder.

    Args:
        out: An lbnorm output directory.
        variant: The variant's four keys, as the leaderboard holds them.
        benchmark: Only this benchmark (a unique prefix will do); default all.
        level: The rank interval's coverage when the run wrote no intervals.

    Returns:
        The explanation.

    Raises:
        InputError: Not an output folder, the variant is not in it, it has no
            subtask table (``--no-subtasks``), or the benchmark is unknown.
    """
    folder = Output.open(out, "leaderboard")
    board = folder.frame("leaderboard")
    row = _variant_row(folder, board, variant)
    if not folder.has("subtasks"):
        msg = (
            f"{folder}: no subtasks.parquet (the run was told --no-subtasks); explain "
            "needs each subtask's score.\n"
            f"Hint: rerun `lbnorm run ... --out {folder}` without --no-subtasks."
        )
        raise InputError(msg)
    model = [str(variant["model"])]
    subtasks = _of_variant(folder.frame("subtasks", models=model), variant)
    benchmarks = _of_variant(folder.frame("benchmarks", models=model), variant)
    suite, _ = folder.suite()
    names = [str(n) for n in pd.unique(benchmarks["benchmark"].astype("str"))]
    chosen = (
        [match_benchmark(benchmark, names, where=str(folder), error=InputError)]
        if benchmark is not None
        else names
    )
    steps = _subtask_steps(subtasks, suite)
    per_benchmark = _benchmark_steps(benchmarks, steps, suite)
    average = _average(board.iloc[row], per_benchmark, suite)
    pooled = per_benchmark.loc[per_benchmark["rule"] == _POOL_RULE, "benchmark"]
    steps = steps.assign(
        n_samples=steps["n_samples"]
        .where(steps["benchmark"].isin(pooled))
        .round()
        .astype("Int64")
    )
    return Explanation(
        variant={key: _plain(board.iloc[row][key]) for key in KEY_COLUMNS},
        suite=_suite_info(folder, suite),
        subtasks=steps.loc[steps["benchmark"].isin(chosen)].reset_index(drop=True),
        benchmarks=per_benchmark.loc[
            per_benchmark["benchmark"].isin(chosen)
        ].reset_index(drop=True),
        average=average,
        rank=_rank(folder, board, row, level=level),
        input_root=_input_root(folder),
    )


def _input_root(folder: Output) -> str:
    """The folder the run's input files share, as the manifest records them ('' if none).

    Examples of what it gives: ``tree`` for ``tree/org/model/results_*.json``
    and ``tree/other/model/results_*.json``; a lone file's folder.
    """
    inputs = folder.inputs()
    if not inputs.num_rows or "path" not in inputs.column_names:
        return ""
    folders = {str(PurePath(str(path)).parent) for path in inputs["path"].to_pylist()}
    try:
        return os.path.commonpath(sorted(folders))
    except ValueError:  # relative and absolute paths mixed: no common folder
        return ""


def _variant_row(folder: Output, board: pd.DataFrame, variant: dict[str, Any]) -> int:
    """The leaderboard position of `variant`."""
    found = np.flatnonzero(is_variant(board, variant))
    if found.size != 1:
        msg = (
            f"{folder}: variant {variant} is not on its leaderboard.\n"
            f"Hint: `lbnorm show {folder} --model PATTERN` lists the variants."
        )
        raise InputError(msg)
    return int(found[0])


def _of_variant(frame: pd.DataFrame, variant: dict[str, Any]) -> pd.DataFrame:
    """The rows of `frame` (one model's) that belong to `variant`, keys as plain values."""
    rows = frame.loc[is_variant(frame, variant)].reset_index(drop=True)
    text = [c for c in rows.columns if isinstance(rows[c].dtype, pd.CategoricalDtype)]
    return rows.astype(dict.fromkeys(text, "str"))


def _subtask_steps(subtasks: pd.DataFrame, suite: Suite | None) -> pd.DataFrame:
    """One row per subtask: where its score came from and how it was normalized."""
    bounds = _suite_bounds(suite)
    steps = subtasks.merge(
        bounds, on=["benchmark", "subtask"], how="left", validate="one_to_one"
    )
    raw = steps["raw_score"].to_numpy(dtype=np.float64)
    lower = steps["lower_bound"].to_numpy(dtype=np.float64)
    k = steps["num_choices"].to_numpy(dtype=np.float64, na_value=np.nan)
    suite_bound = steps["suite_lower_bound"].to_numpy(dtype=np.float64, na_value=np.nan)
    bound_from = np.select(
        [
            np.isnan(suite_bound),
            lower != suite_bound,
            (k == 0) & (lower == 0.0),
            lower == 1.0 / np.where(k > 0, k, np.nan),
        ],
        [
            "the subtask table (suite file gone)",
            "override (the run's, not the suite's)",
            "generative (num_choices 0)",
            "1/num_choices",
        ],
        default="override (the suite's lower_bound)",
    )
    is_results = steps["source"].str.endswith(".json") & steps["task"].fillna("").ne("")
    key = np.where(
        is_results,
        "results['" + steps["task"].fillna("") + "']['" + steps["metric"] + "']",
        "row benchmark=" + steps["benchmark"] + ", subtask=" + steps["subtask"],
    )
    sizes = (
        steps["n_samples"]
        .astype("Float64")
        .fillna(steps["suite_n_samples"].astype("Float64"))
    )
    return pd.DataFrame(
        {
            "benchmark": steps["benchmark"],
            "subtask": steps["subtask"],
            "source": steps["source"],
            "key": key,
            "raw_score": raw,
            "num_choices": steps["num_choices"].astype("Int64"),
            "lower_bound": lower,
            "bound_from": bound_from,
            "normalized": (raw - lower) / (1.0 - lower) * 100.0,
            "normalized_score": steps["normalized_score"].to_numpy(dtype=np.float64),
            "is_clipped": steps["is_clipped"].to_numpy(dtype=bool),
            "n_samples": sizes,  # shown for pooled benchmarks only (explain_variant)
        }
    )


def _suite_bounds(suite: Suite | None) -> pd.DataFrame:
    """The suite's subtask table under the names the merge needs (empty if no suite)."""
    columns = ["benchmark", "subtask", "task", "num_choices"]
    columns += ["suite_lower_bound", "suite_n_samples"]
    if suite is None:
        return pd.DataFrame(columns=columns).astype(
            {"benchmark": "str", "subtask": "str"}
        )
    renamed = {"lower_bound": "suite_lower_bound", "n_samples": "suite_n_samples"}
    return suite.subtask_table().rename(columns=renamed)[columns]


def _benchmark_steps(
    benchmarks: pd.DataFrame, steps: pd.DataFrame, suite: Suite | None
) -> pd.DataFrame:
    """One row per benchmark: its rule, the table's score and the recomputed one."""
    rules = {b.name: b.aggregation for b in suite.benchmarks} if suite else {}
    weights = {b.name: b.weight for b in suite.benchmarks} if suite else {}
    grouped = steps.groupby("benchmark", sort=False)
    averaged = grouped["normalized_score"].mean()
    pooled = _pooled(steps)
    frame = benchmarks[
        [
            "benchmark",
            "raw_score",
            "normalized_score",
            "n_subtasks",
            "n_subtasks_expected",
        ]
    ].copy()
    by_average = frame["benchmark"].map(averaged).to_numpy(dtype=np.float64)
    by_pool = frame["benchmark"].map(pooled).to_numpy(dtype=np.float64)
    table = frame["normalized_score"].to_numpy(dtype=np.float64, na_value=np.nan)
    inferred = np.where(
        np.abs(by_pool - table) < np.abs(by_average - table), _POOL_RULE, _AVERAGE_RULE
    )
    names = frame["benchmark"].astype("str").tolist()
    rule = np.array(
        [rules.get(name, guess) for name, guess in zip(names, inferred, strict=True)],
        dtype=object,
    )  # one per benchmark
    recomputed = np.where(rule == _POOL_RULE, by_pool, by_average)
    is_complete = (
        frame["n_subtasks"].to_numpy() == frame["n_subtasks_expected"].to_numpy()
    )
    weight = frame["benchmark"].map(weights).fillna(1.0).to_numpy(dtype=np.float64)
    return frame.assign(
        rule=pd.Series(rule, index=frame.index, dtype="str"),
        recomputed=np.where(is_complete | ~np.isnan(table), recomputed, np.nan),
        weight=weight,
        contribution=weight * table / weight.sum(),
    )[
        [
            "benchmark",
            "rule",
            "raw_score",
            "normalized_score",
            "recomputed",
            "n_subtasks",
            "n_subtasks_expected",
            "weight",
            "contribution",
        ]
    ]


def _pooled(steps: pd.DataFrame) -> pd.Series:
    """Per benchmark: the sample-weighted mean raw score, normalized once and clipped."""
    sizes = steps["n_samples"].astype("float64")
    sizes = sizes.where(sizes.notna(), 1.0)  # an averaged benchmark: equal weights
    weighted = (
        (steps["raw_score"] * sizes).groupby(steps["benchmark"], sort=False).sum()
    )
    total = sizes.groupby(steps["benchmark"], sort=False).sum()
    bound = steps.groupby("benchmark", sort=False)["lower_bound"].last()
    raw = weighted / total
    return ((raw - bound) / (1.0 - bound) * 100.0).clip(lower=0.0)


def _average(
    row: pd.Series, benchmarks: pd.DataFrame, suite: Suite | None
) -> dict[str, Any]:
    """The leaderboard's average beside the weighted mean of the benchmark scores.

    The benchmarks the suite's board averages (not its statistics, nor those
    with ``averaged = false``), each weighted by its subtasks under
    ``average = "subtasks"``; none under ``average = "none"``.
    """
    rule = suite.board.average if suite is not None else "benchmarks"
    counted = {b.name for b in suite.benchmarks if b.averaged} if suite else None
    scores = benchmarks["normalized_score"].to_numpy(dtype=np.float64, na_value=np.nan)
    weight = benchmarks["weight"].to_numpy(dtype=np.float64)
    if rule == "subtasks":  # each benchmark by the subtasks it counts
        weight = weight * benchmarks["n_subtasks"].to_numpy(dtype=np.float64)
    present = ~np.isnan(scores) & (rule != "none")
    if counted is not None:
        present &= benchmarks["benchmark"].isin(counted).to_numpy(dtype=bool)
    recomputed = (
        float(np.sum(scores[present] * weight[present]) / np.sum(weight[present]))
        if present.any()
        else None
    )
    per = " x subtasks" if rule == "subtasks" else ""
    return {
        "average": _plain(row["average"]),
        "average_stderr": _plain(row.get("average_stderr")),
        "recomputed": recomputed,
        "formula": (
            'no average (the suite\'s board: average = "none")'
            if rule == "none"
            else f"sum(weight{per} x score) / sum(weight{per}) over "
            f"{int(present.sum())} benchmark(s)"
        ),
    }


def _rank(
    folder: Output, board: pd.DataFrame, row: int, *, level: float
) -> dict[str, Any]:
    """The rank and its interval: the run's intervals table, else from the leaderboard."""
    variant = {key: board[key].iloc[row] for key in KEY_COLUMNS}
    table = folder.frame("intervals") if folder.has("intervals") else None
    found = None if table is None else table.loc[is_variant(table, variant)]
    if found is not None and len(found) == 1:
        best, worst = (
            _plain(found.iloc[0].get(name)) for name in ("rank_best", "rank_worst")
        )
        source = "intervals.parquet (lbnorm run --intervals)"
    else:
        average = board["average"].to_numpy(dtype=np.float64, na_value=np.nan)
        stderr = board["average_stderr"].to_numpy(dtype=np.float64, na_value=np.nan)
        ranks = interval_ranks(board, average, stderr, z=normal_quantile(level))[2:4]
        best, worst = (None if np.isnan(r[row]) else int(r[row]) for r in ranks)
        source = "average ± z x average_stderr on the leaderboard"
    return {
        "rank": _plain(board["rank"].iloc[row]),
        "rank_best": best,
        "rank_worst": worst,
        "level": level,
        "interval_from": source,
    }


def _suite_info(folder: Output, suite: Suite | None) -> dict[str, Any]:
    info = folder.manifest.get("suite")
    info = info if isinstance(info, dict) else {}
    return {
        "name": info.get("name"),
        "source": info.get("source"),
        "found": suite is not None,
    }


def _plain(value: object) -> Any:
    """A table cell as a JSON value (None for nulls)."""
    if (
        value is None
        or value is pd.NA
        or (isinstance(value, float) and np.isnan(value))
    ):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {str(key): _plain(value) for key, value in record.items()}
        for record in frame.astype("object").to_dict("records")
    ]
