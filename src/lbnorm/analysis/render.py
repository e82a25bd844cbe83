"""Markdown for people: the diff summary, the health table and rank intervals.

Pure functions from the analysis frames to text; the command line prints them or
hands them to the writer.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lbnorm.analysis.diff import Diff

__all__ = ["format_diff", "format_health", "format_intervals", "markdown_table"]

_BENCHMARK_COLUMNS = {
    "benchmark": "benchmark",
    "n_models": "models",
    "loo_spearman": "rho vs rest",
    "floor_rate": "floor",
    "ceiling_rate": "ceiling",
    "stuck_share": "low band",
    "stuck_spread": "band spread",
    "status": "status",
    "failed": "failed checks",
}
_MOVE_COLUMNS = {
    "old_rank": "old rank",
    "new_rank": "new rank",
    "rank_move": "move",
    "old_average": "old average",
    "new_average": "new average",
    "is_beyond_intervals": "beyond intervals",
}
_SUBTASK_COLUMNS = {
    "benchmark": "benchmark",
    "subtask": "subtask",
    "lower_bound": "bound",
    "max_raw_score": "max raw",
    "below_bound_rate": "below bound",
    "rest_spearman": "rho vs rest",
    "status": "status",
    "failed": "failed checks",
}


def markdown_table(frame: pd.DataFrame, *, digits: int = 2) -> str:
    r"""Render a frame as a Markdown table (floats rounded, nulls as ``n/a``).

    Examples:
        >>> print(markdown_table(pd.DataFrame({"model": ["a|b"], "average": [35.0]})))
        | model | average |
        |---|---:|
        | a\|b | 35.00 |
    """

    def cell(value: object) -> str:
        if (
            value is None
            or value is pd.NA
            or (isinstance(value, float) and np.isnan(value))
        ):
            return "n/a"
        if isinstance(value, float | np.floating):
            return f"{value:,.{digits}f}"
        if isinstance(value, int | np.integer) and not isinstance(value, bool):
            return f"{value:,}"
        return str(value).replace("|", "\\|")

    numeric = [
        pd.api.types.is_numeric_dtype(frame[name])
        and not pd.api.types.is_bool_dtype(frame[name])
        for name in frame.columns
    ]
    lines = [
        "| " + " | ".join(str(name) for name in frame.columns) + " |",
        "|" + "|".join("---:" if is_number else "---" for is_number in numeric) + "|",
    ]
    # one line per displayed row: a summary's handful, not the data
    lines += [
        "| " + " | ".join(cell(value) for value in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join(lines)


def format_diff(diff: Diff, *, largest: int = 10, title: str | None = None) -> str:
    """The diff as Markdown: bounds changed, summary, per benchmark, biggest moves.

    Args:
        diff: From :func:`lbnorm.analysis.diff.diff_snapshots`.
        largest: Rank moves listed.
        title: The heading (default: ``old -> new``).

    Returns:
        The Markdown text.
    """
    old, new = diff.labels
    figures = diff.summary
    lines = [f"# {title or f'lbnorm diff: {old} -> {new}'}", ""]
    bounds = diff.bounds
    lines += [f"## Bounds changed ({len(bounds)})", ""]
    if len(bounds):
        lines += [
            markdown_table(
                bounds.rename(
                    columns={"old_lower_bound": "old", "new_lower_bound": "new"}
                ),
                digits=4,
            ),
            "",
        ]
    else:
        lines += ["None.", ""]
    top = [
        name
        for name in figures
        if name.startswith("top_") and name.endswith("_overlap")
    ]
    ranked = int(figures["ranked_common"] or 0)
    rows = [
        (
            "variants",
            f"{figures['variants_common']:,} on both sides, {figures['variants_added']:,} added, {figures['variants_removed']:,} removed",
        ),
        ("ranked on both sides", f"{ranked:,}"),
        (
            "Kendall tau / Spearman rho",
            f"{_number(figures['kendall_tau'], 4)} / {_number(figures['spearman_rho'], 4)}",
        ),
        (
            "top-" + "/".join(name.split("_")[1] for name in top) + " overlap",
            " / ".join(f"{figures[name]}" for name in top),
        ),
        (
            f"moved more than {figures['moved_places']} places",
            f"{figures['moved_more_than_n']:,} of {ranked:,} (max {figures['max_rank_move']:,}, mean {_number(figures['mean_abs_rank_move'], 1)})",
        ),
        (
            "rank moves beyond the rank intervals",
            "n/a (no standard errors)"
            if figures["rank_moves_beyond_intervals"] is None
            else f"{figures['rank_moves_beyond_intervals']:,} of {figures['rank_moves_checked']:,}",
        ),
        (
            "average delta (new - old)",
            f"mean {_number(figures['average_delta_mean'], 3)}, min {_number(figures['average_delta_min'], 3)}, "
            f"max {_number(figures['average_delta_max'], 3)}; {figures['averages_changed']:,} changed",
        ),
        ("benchmark scores changed", f"{figures['scores_changed']:,}"),
        (
            "subtask scores newly clipped / unclipped",
            "n/a (no subtask tables)"
            if figures["newly_clipped"] is None
            else f"{figures['newly_clipped']:,} / {figures['newly_unclipped']:,}",
        ),
    ]
    lines += [
        "## Summary",
        "",
        markdown_table(pd.DataFrame(rows, columns=["figure", "value"])),
        "",
    ]
    if len(diff.scores):
        per_benchmark = (
            diff.scores.assign(is_changed=diff.scores["delta"].fillna(0.0) != 0)
            .groupby("benchmark", sort=False)
            .agg(
                changed=("is_changed", "sum"),
                mean_delta=("delta", "mean"),
                min_delta=("delta", "min"),
                max_delta=("delta", "max"),
            )
            .reindex(list(diff.benchmarks))
            .reset_index()
        )
        lines += [
            "## Per benchmark (normalized score, new - old)",
            "",
            markdown_table(
                per_benchmark.rename(
                    columns={
                        "mean_delta": "mean delta",
                        "min_delta": "min delta",
                        "max_delta": "max delta",
                    }
                ),
                digits=3,
            ),
            "",
        ]
    moved = diff.models.dropna(subset=["rank_move"])
    moved = moved.iloc[
        np.argsort(
            -np.abs(moved["rank_move"].to_numpy(dtype=np.float64)), kind="stable"
        )
    ]
    moved = moved[moved["rank_move"] != 0].head(largest)
    if len(moved):
        shown = moved[
            [
                "model",
                "precision",
                "old_rank",
                "new_rank",
                "rank_move",
                "old_average",
                "new_average",
                "is_beyond_intervals",
            ]
        ]
        lines += [
            f"## Largest rank moves ({len(shown)})",
            "",
            markdown_table(shown.rename(columns=_MOVE_COLUMNS)),
            "",
        ]
    return "\n".join(lines)


def format_health(
    health: pd.DataFrame, *, all_subtasks: bool = False, title: str = "lbnorm health"
) -> str:
    """The health table as Markdown: every benchmark, the failed subtasks.

    Args:
        health: From :func:`lbnorm.analysis.health.check_health`.
        all_subtasks: List every subtask, not only those that failed.
        title: The heading.

    Returns:
        The Markdown text.
    """
    benchmarks = health[health["level"] == "benchmark"]
    subtasks = health[health["level"] == "subtask"]
    failed = int((health["status"] == "fail").sum())
    verdict = "all checks passed" if failed == 0 else f"{failed} failed"
    lines = [f"# {title}: {verdict}", "", "## Benchmarks", ""]
    lines += [
        markdown_table(
            benchmarks[list(_BENCHMARK_COLUMNS)].rename(columns=_BENCHMARK_COLUMNS),
            digits=3,
        ),
        "",
    ]
    if len(subtasks):
        shown = subtasks if all_subtasks else subtasks[subtasks["status"] == "fail"]
        n_failed = int((subtasks["status"] == "fail").sum())
        lines += [f"## Subtasks ({len(subtasks)} checked, {n_failed} failed)", ""]
        if len(shown):
            lines += [
                markdown_table(
                    shown[list(_SUBTASK_COLUMNS)].rename(columns=_SUBTASK_COLUMNS),
                    digits=3,
                ),
                "",
            ]
    return "\n".join(lines)


def format_intervals(
    intervals: pd.DataFrame, *, top: int = 10, level: float = 0.95
) -> str:
    """The top of the leaderboard with intervals, rank ranges and tie groups.

    Args:
        intervals: :attr:`lbnorm.analysis.uncertainty.Uncertainty.leaderboard`.
        top: Rows shown.
        level: The intervals' coverage (for the heading).

    Returns:
        The Markdown text.
    """
    shown = intervals.dropna(subset=["rank"]).head(top)
    table = pd.DataFrame(
        {
            "rank": shown["rank"].to_numpy(),
            "rank range": [
                "n/a" if pd.isna(best) else f"{best}-{worst}"
                for best, worst in zip(
                    shown["rank_best"], shown["rank_worst"], strict=True
                )
            ],
            "tie group": shown["tie_group"].to_numpy(),
            "model": shown["model"].to_numpy(),
            "precision": shown["precision"].to_numpy(),
            "average": shown["average"].to_numpy(),
            "stderr": shown["average_stderr"].to_numpy(),
            f"{level:.0%} interval": [
                "n/a" if np.isnan(low) else f"{low:.2f}-{high:.2f}"
                for low, high in zip(
                    shown["average_low"], shown["average_high"], strict=True
                )
            ],
        }
    )
    ranked = intervals.dropna(subset=["rank_best"])
    groups = int(ranked["tie_group"].nunique())
    unknown = int((intervals["n_stderr_unknown"] > 0).sum())
    lines = [
        f"## Rank intervals ({level:.0%}): {len(ranked):,} ranked variants in {groups:,} tie groups",
        "",
        markdown_table(table),
    ]
    if unknown:
        lines += [
            "",
            f"{unknown:,} variant(s) have subtask scores without stderr or n_samples (counted as 0).",
        ]
    return "\n".join(lines)


def _number(value: object, digits: int) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "n/a"
    assert isinstance(value, int | float)
    return f"{value:,.{digits}f}"
