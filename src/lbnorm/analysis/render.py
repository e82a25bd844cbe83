"""Markdown for people: the diffs (of leaderboards and of ratings), the health table, rank intervals.

Pure functions from the analysis frames to text; the command line prints them or
hands them to the writer.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from lbnorm.analysis.diff import Diff, Figure
from lbnorm.analysis.ratings_diff import RatingsDiff

__all__ = [
    "HEALTH_BENCHMARK_LABELS",
    "HEALTH_FIGURES",
    "HEALTH_SUBTASK_LABELS",
    "cell_text",
    "diff_parts",
    "diff_summary",
    "format_diff",
    "format_health",
    "format_intervals",
    "format_ratings_diff",
    "health_tables",
    "is_number_column",
    "is_summary",
    "largest_rating_moves",
    "markdown_table",
    "options_changed_table",
    "rank_rows",
    "ratings_diff_summary",
]

#: The health table's benchmark columns and their headings, for every face.
HEALTH_BENCHMARK_LABELS = {
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
#: The health table's subtask columns and their headings, for every face.
HEALTH_SUBTASK_LABELS = {
    "benchmark": "benchmark",
    "subtask": "subtask",
    "lower_bound": "bound",
    "max_raw_score": "max raw",
    "below_bound_rate": "below bound",
    "rest_spearman": "rho vs rest",
    "status": "status",
    "failed": "failed checks",
}


#: The headings in words of the columns a diff's lists show.
_HEADINGS = {
    "old_rank": "old rank",
    "new_rank": "new rank",
    "rank_move": "move",
    "old_average": "old average",
    "new_average": "new average",
    "average_delta": "delta",
    "old_rating": "old rating",
    "new_rating": "new rating",
    "rating_delta": "delta",
    "is_beyond_intervals": "beyond intervals",
}
#: What each health figure is, with its unit, by heading.
HEALTH_FIGURES = {
    "models": "variants with a score and a leave-one-out average (the models every figure is over)",
    "rho vs rest": "Spearman's rho (-1 to 1) of the benchmark with the leave-one-out average: the "
    "weighted mean of the variant's other benchmarks",
    "floor": "share (0 to 1) of the models within noise of 0: max(1 point, 1.96 standard errors)",
    "ceiling": "share (0 to 1) of the models within noise of 100",
    "low band": "share (0 to 1) of the models in the lowest tenth of the benchmark's 1st-99th "
    "percentile range",
    "band spread": "interquartile range of the low band's leave-one-out averages over everyone's",
    "bound": "the subtask's lower bound (random baseline, raw 0 to 1)",
    "max raw": "the highest raw score (0 to 1) seen",
    "below bound": "share (0 to 1) of the raw scores below the bound (clipped to 0)",
}


def markdown_table(frame: pd.DataFrame, *, digits: int = 2) -> str:
    r"""Render a frame as a Markdown table (floats rounded, nulls as ``n/a``).

    Examples:
        >>> print(markdown_table(pd.DataFrame({"model": ["a|b"], "average": [35.0]})))
        | model | average |
        |---|---:|
        | a\|b | 35.00 |
    """
    numeric = [is_number_column(frame[name]) for name in frame.columns]
    lines = [
        "| " + " | ".join(str(name) for name in frame.columns) + " |",
        "|" + "|".join("---:" if is_number else "---" for is_number in numeric) + "|",
    ]
    # one line per displayed row: a summary's handful, not the data
    lines += [
        "| "
        + " | ".join(
            cell_text(value, digits=digits).replace("|", "\\|") for value in row
        )
        + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join(lines)


def cell_text(value: object, *, digits: int, null: str = "n/a") -> str:
    """A table cell as the Markdown and HTML tables show it: numbers with thousands separators.

    Floats are rounded to `digits`; nulls and NaN are `null`.

    Examples:
        >>> cell_text(1234.5, digits=1), cell_text(np.int64(12345), digits=2), cell_text(None, digits=2)
        ('1,234.5', '12,345', 'n/a')
    """
    if (
        value is None
        or value is pd.NA
        or (isinstance(value, float) and np.isnan(value))
    ):
        return null
    if isinstance(value, float | np.floating):
        return f"{value:,.{digits}f}"
    if isinstance(value, int | np.integer) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def is_number_column(column: pd.Series) -> bool:
    """Whether a column holds numbers (not booleans): right-aligned in a table."""
    return bool(
        pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
    )


def is_summary(head: bytes, tail: bytes) -> bool:
    """Whether a file is a Markdown summary lbnorm wrote (:func:`format_diff`'s title).

    Examples:
        >>> is_summary(b"# lbnorm diff: old -> new", b""), is_summary(b"# notes", b"")
        (True, False)
    """
    del tail  # the title is the first line
    return head.startswith(b"# lbnorm ")


def format_diff(diff: Diff, *, largest: int = 10, title: str | None = None) -> str:
    """The diff as Markdown: bounds changed, summary, coverage, per benchmark, and names.

    The names: variants added, removed and newly unranked (with why, where the
    outputs tell), the largest changes of an average, and the largest rank
    moves; each list cut at `largest` rows with a line saying how many more.

    Args:
        diff: From :func:`lbnorm.analysis.diff.diff_snapshots`.
        largest: Rows listed per list.
        title: The heading (default: ``old -> new``).

    Returns:
        The Markdown text.
    """
    old, new = diff.labels
    bounds = diff.bounds.rename(
        columns={"old_lower_bound": "old", "new_lower_bound": "new"}
    )
    title = title or f"lbnorm diff: {old} -> {new}"
    changed = ("Bounds changed", bounds, 4)
    return _markdown(title, changed, diff_parts(diff), largest=largest)


def format_ratings_diff(diff: RatingsDiff, *, largest: int = 10) -> str:
    """The ratings diff as Markdown: options changed, summary, biggest moves, added, removed.

    Args:
        diff: From :func:`~lbnorm.analysis.ratings_diff.diff_ratings`.
        largest: Rating moves listed.

    Returns:
        The Markdown text.
    """
    old, new = diff.labels
    moved = largest_rating_moves(diff, largest=largest)
    parts = [
        ("summary", "Summary", ratings_diff_summary(diff)),
        ("moves", f"Largest rating moves ({len(moved)})", moved),
    ]
    for status, heading in (("added", "Models added"), ("removed", "Models removed")):
        names = diff.models.loc[diff.models["status"] == status, ["model"]]
        parts.append(("names", f"{heading} ({len(names)})", names))
    title = f"lbnorm diff: {old} -> {new} (ratings)"
    changed = ("Options changed", options_changed_table(diff), 2)
    return _markdown(title, changed, parts, largest=largest)


def _markdown(
    title: str,
    changed: tuple[str, pd.DataFrame, int],
    parts: list[tuple[str, str, pd.DataFrame]],
    *,
    largest: int,
) -> str:
    """A diff as Markdown: the title, what changed in the setup (always said), the parts.

    A part of kind ``list`` is cut at `largest` rows (:func:`_listed`), one of
    kind ``names`` is its first 20 names in a line; ``bounds`` is left out (it
    is the setup's change, above); an empty part is left out.
    """
    heading, table, digits = changed
    lines = [f"# {title}", "", f"## {heading} ({len(table)})", ""]
    lines += [markdown_table(table, digits=digits) if len(table) else "None.", ""]
    for kind, heading, table in parts:
        if kind == "list":
            lines += _listed(heading, table, largest=largest)
        elif kind == "names" and len(table):
            names = table["model"].tolist()
            shown = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
            lines += [f"## {heading}", "", shown, ""]
        elif kind not in {"bounds", "names"} and len(table):
            lines += [f"## {heading}", "", *_MARKDOWN_NOTES.get(kind, [])]
            lines += [markdown_table(table, digits=_MARKDOWN_DIGITS.get(kind, 2)), ""]
    return "\n".join(lines)


#: The Markdown diff's decimals and notes, by kind of :func:`diff_parts` part.
_MARKDOWN_DIGITS = {"per_benchmark": 3, "moves": 1}
_MARKDOWN_NOTES = {
    "coverage": [
        "Subtasks with a score on each side (a coverage change, not a bound change):",
        "",
    ]
}


def diff_parts(diff: Diff) -> list[tuple[str, str, pd.DataFrame]]:
    """What changed, as ``lbnorm diff`` prints it: each table with its kind and heading.

    The kinds: ``summary``, ``bounds``, ``coverage``, ``per_benchmark`` and
    ``list`` (a list of variants, which a face cuts).

    The summary, the bounds changed, the coverage, the change per benchmark
    (each when it has rows), then the lists ``lbnorm diff`` names: added,
    removed, newly unranked (with why), the largest changes of an average, the
    rank moves beyond the rank intervals and the largest rank moves, whole (the
    faces cut each list with :func:`cut_list`).
    """
    parts = [("summary", "Summary", diff_summary(diff))]
    if len(diff.bounds):
        bounds = diff.bounds.rename(
            columns={"old_lower_bound": "old bound", "new_lower_bound": "new bound"}
        )
        parts.append(("bounds", f"Lower bounds changed ({len(bounds):,})", bounds))
    if len(diff.coverage):
        parts.append(
            (
                "coverage",
                f"Coverage ({len(diff.coverage):,} benchmark(s) scored on other subtasks)",
                diff.coverage.rename(columns=lambda name: name.replace("_", " ")),
            )
        )
    if len(diff.scores):
        parts.append(
            (
                "per_benchmark",
                "Per benchmark (normalized score, new - old)",
                _diff_per_benchmark(diff),
            )
        )
    parts += [
        ("list", f"{heading} ({len(table):,})", table)
        for heading, table in _named_variants(diff)
    ]
    return parts


def _listed(heading: str, table: pd.DataFrame, *, largest: int) -> list[str]:
    """A heading with its rows (the first `largest`) and how many more; none if empty."""
    if not len(table):
        return []
    shown, more = cut_list(table, largest=largest)
    lines = [f"## {heading}", "", markdown_table(shown), ""]
    if more:
        lines += [
            f"... and {more:,} more (--largest N lists more; --out "
            "writes every variant to diff_models.parquet)",
            "",
        ]
    return lines


def cut_list(table: pd.DataFrame, *, largest: int) -> tuple[pd.DataFrame, int]:
    """A named list as every face shows it: its first rows, and how many more.

    Args:
        table: A list of :func:`_named_variants` or :func:`_largest_rank_moves`.
        largest: Rows shown.

    Returns:
        The rows shown (a ``delta`` signed, to the third digit, as the
        summary's) and the number left out.

    Examples:
        >>> table = pd.DataFrame({"model": ["a", "b", "c"], "delta": [2.0, -1.0, 0.5]})
        >>> shown, more = cut_list(table, largest=2)
        >>> shown["delta"].tolist(), more
        (['+2.000', '-1.000'], 1)
    """
    shown = table.head(largest)
    if "delta" in shown.columns:
        shown = shown.assign(delta=[f"{value:+,.3f}" for value in shown["delta"]])
    return shown, len(table) - len(shown)


def _named_variants(diff: Diff) -> list[tuple[str, pd.DataFrame]]:
    """The variants a reader wants by name: added, removed, newly unranked, largest changes and moves.

    Each table whole (a face cuts it), with headings in words; the ``why``
    column only where some variant has a reason.

    Args:
        diff: From :func:`lbnorm.analysis.diff.diff_snapshots`.

    Returns:
        ``(heading, table)`` for each list that has rows: ``Added``,
        ``Removed``, ``Newly unranked`` (ranked on the old side only),
        ``Largest changes of an average`` (by absolute change, whether or not
        the rank moved), ``Rank moves beyond the rank intervals`` (the
        moves the summary counts, largest first) and ``Largest rank moves``
        (:func:`_largest_rank_moves`).
    """
    models = diff.models
    old_rank = models["old_rank"].to_numpy(dtype=np.float64, na_value=np.nan)
    new_rank = models["new_rank"].to_numpy(dtype=np.float64, na_value=np.nan)
    status = models["status"].to_numpy()
    added = models[status == "added"]
    removed = _by_old_rank(models[status == "removed"])
    unranked = _by_old_rank(
        models[(status == "both") & ~np.isnan(old_rank) & np.isnan(new_rank)]
    )
    delta = models["average_delta"].to_numpy(dtype=np.float64, na_value=np.nan)
    is_changed = (status == "both") & ~np.isnan(delta) & (delta != 0)
    changed = models[is_changed].iloc[
        np.argsort(-np.abs(delta[is_changed]), kind="stable")
    ]
    lists = [
        ("Added", added, ["new_rank", "new_average"]),
        ("Removed", removed, ["old_rank", "old_average"]),
        ("Newly unranked", unranked, ["old_rank", "old_average", "new_average"]),
    ]
    tables = [
        (heading, _variant_table(rows, columns, why=True))
        for heading, rows, columns in lists
        if len(rows)
    ]
    if len(changed):
        columns = [
            "old_average",
            "new_average",
            "average_delta",
            "old_rank",
            "new_rank",
        ]
        table = _variant_table(changed, [*columns, "is_beyond_intervals"], why=False)
        tables.append(("Largest changes of an average", table))
    beyond = _largest_rank_moves(
        diff, largest=len(models), where=models["is_beyond_intervals"].eq(True)
    )
    if len(beyond):
        tables.append(("Rank moves beyond the rank intervals", beyond))
    if len(moved := _largest_rank_moves(diff, largest=len(models))):
        tables.append(("Largest rank moves", moved))
    return tables


def _variant_table(
    rows: pd.DataFrame, columns: list[str], *, why: bool
) -> pd.DataFrame:
    table = rows[["model", "precision", *columns]].rename(columns=_HEADINGS)
    if why and rows["reason"].notna().any():
        table = table.assign(why=rows["reason"].fillna("").to_numpy())
    return table.reset_index(drop=True)


def _by_old_rank(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` by old rank, unranked last (a stable sort)."""
    ranks = rows["old_rank"].to_numpy(dtype=np.float64, na_value=np.nan)
    return rows.iloc[np.argsort(np.nan_to_num(ranks, nan=np.inf), kind="stable")]


def diff_summary(diff: Diff) -> pd.DataFrame:
    """The diff's summary figures in words: one row per figure, values as text.

    The rows ``lbnorm diff`` prints under "Summary", for every face that shows a
    diff (the HTML report too).

    Args:
        diff: From :func:`lbnorm.analysis.diff.diff_snapshots`.

    Returns:
        ``figure`` and ``value``, both text.
    """
    figures = diff.summary
    ranked = int(figures["ranked_common"] or 0)
    rows = [
        _sides_row(figures, "variants"),
        (
            "ranked on both sides",
            f"{ranked:,}"
            + (
                f" ({unranked:,} newly unranked)"
                if (unranked := int(figures.get("newly_unranked") or 0))
                else ""
            ),
        ),
        *rank_rows(figures, ranked=ranked),
        (
            "rank moves beyond the rank intervals",
            "n/a (no standard errors)"
            if figures["rank_moves_beyond_intervals"] is None
            else f"{figures['rank_moves_beyond_intervals']:,} of {figures['rank_moves_checked']:,}",
        ),
        (
            "average delta (new - old)",
            f"{_deltas(figures, 'average', 3)}; {figures['averages_changed']:,} changed",
        ),
        ("benchmark scores changed", f"{figures['scores_changed']:,}"),
        (
            "subtask scores newly clipped / unclipped",
            "n/a (no subtask tables)"
            if figures["newly_clipped"] is None
            else f"{figures['newly_clipped']:,} / {figures['newly_unclipped']:,}",
        ),
    ]
    before, after = (
        figures.get("subtasks_scored_old"),
        figures.get("subtasks_scored_new"),
    )
    if before is not None and after is not None and before != after:
        rows.append(("subtasks with scores", f"{before:,} old, {after:,} new"))
    return pd.DataFrame(rows, columns=["figure", "value"])


def _sides_row(figures: Mapping[str, Figure], what: str) -> tuple[str, str]:
    """The keys on both sides, added and removed (:meth:`~lbnorm.analysis.diff.Sides.counts`)."""
    common, added, removed = (figures[f"{what}_{side}"] for side in _SIDES)
    return what, f"{common:,} on both sides, {added:,} added, {removed:,} removed"


_SIDES = ("common", "added", "removed")


def _deltas(figures: Mapping[str, Figure], value: str, digits: int) -> str:
    """The value's mean, least and largest delta (new - old), in words."""
    return ", ".join(
        f"{name} {cell_text(figures[f'{value}_delta_{name}'], digits=digits)}"
        for name in ("mean", "min", "max")
    )


def rank_rows(figures: Mapping[str, Figure], *, ranked: int) -> list[tuple[str, str]]:
    """The summary rows of :meth:`~lbnorm.analysis.diff.Sides.figures`, in words.

    Args:
        figures: A diff's summary (of leaderboards or of ratings).
        ranked: How many are ranked on both sides (the moves' base).

    Returns:
        ``(figure, value)`` rows: the rank correlations, the top-k overlaps
        and the rank moves.
    """
    top = [
        name
        for name in figures
        if name.startswith("top_") and name.endswith("_overlap")
    ]
    return [
        (
            "Kendall tau / Spearman rho",
            f"{cell_text(figures['kendall_tau'], digits=4)} / {cell_text(figures['spearman_rho'], digits=4)}",
        ),
        (
            "top-" + "/".join(name.split("_")[1] for name in top) + " overlap",
            " / ".join(f"{figures[name]}" for name in top),
        ),
        (
            f"moved more than {figures['moved_places']} places",
            f"{figures['moved_more_than_n']:,} of {ranked:,} (max {figures['max_rank_move']:,}, mean {cell_text(figures['mean_abs_rank_move'], digits=1)})",
        ),
    ]


def _diff_per_benchmark(diff: Diff) -> pd.DataFrame:
    """Per benchmark: scores changed, and the mean, least and largest delta (new - old).

    Args:
        diff: From :func:`lbnorm.analysis.diff.diff_snapshots`.

    Returns:
        ``benchmark``, ``changed``, ``mean delta``, ``min delta``, ``max delta``.
    """
    return (
        diff.scores.assign(is_changed=diff.scores["delta"].fillna(0.0) != 0)
        .groupby("benchmark", sort=False)
        .agg(
            changed=("is_changed", "sum"),
            **{f"{name} delta": ("delta", name) for name in ("mean", "min", "max")},
        )
        .reindex(list(diff.benchmarks))
        .reset_index()
    )


def _largest_rank_moves(
    diff: Diff, *, largest: int = 10, where: pd.Series | None = None
) -> pd.DataFrame:
    """The variants that moved most (either way), with headings in words.

    Args:
        diff: From :func:`lbnorm.analysis.diff.diff_snapshots`.
        largest: Rows.
        where: Which of ``diff.models`` to consider (a boolean mask aligned
            with it; nulls count as false); default every variant.

    Returns:
        ``model``, ``precision``, old and new rank, move (old - new: up is
        positive), old and new average, beyond intervals (the rank moved
        beyond the rank intervals and the variant's own average beyond its own
        intervals).
    """
    models = diff.models
    if where is not None:
        models = models[where.fillna(False).to_numpy(dtype=bool)]
    moved = models.dropna(subset=["rank_move"])
    columns = ["model", "precision", "old_rank", "new_rank", "rank_move"]
    columns += ["old_average", "new_average", "is_beyond_intervals"]
    return _largest(moved, "rank_move", columns, largest=largest)


def largest_rating_moves(diff: RatingsDiff, *, largest: int = 10) -> pd.DataFrame:
    """The models on both sides whose rating moved most (either way)."""
    common = diff.models[diff.models["status"] == "both"]
    columns = ["model", "old_rating", "new_rating", "rating_delta", "old_rank"]
    columns += ["new_rank", "rank_move", "is_beyond_intervals"]
    return _largest(common, "rating_delta", columns, largest=largest)


def _largest(
    rows: pd.DataFrame, by: str, columns: list[str], *, largest: int
) -> pd.DataFrame:
    """The `largest` rows that moved most by `by` (either way, none of 0), headed in words."""
    size = np.abs(rows[by].to_numpy(dtype=np.float64))
    moved = rows.iloc[np.argsort(-size, kind="stable")]
    moved = moved[moved[by] != 0].head(largest)
    return moved[columns].rename(columns=_HEADINGS).reset_index(drop=True)


def options_changed_table(diff: RatingsDiff) -> pd.DataFrame:
    """The rating options that differ: ``option``, ``old``, ``new`` (as text)."""
    return pd.DataFrame(
        [
            (name, _text(before), _text(after))
            for name, (before, after) in diff.options_changed.items()
        ],
        columns=["option", "old", "new"],
    )


def ratings_diff_summary(diff: RatingsDiff) -> pd.DataFrame:
    """The ratings diff's summary figures in words: ``figure`` and ``value``, both text."""
    figures = diff.summary
    common = int(figures["models_common"] or 0)
    rows = [
        _sides_row(figures, "models"),
        *rank_rows(figures, ranked=common),
        ("rating delta (new - old)", _deltas(figures, "rating", 1)),
        (
            "95% intervals apart",
            "n/a (run lbnorm arena with --bootstrap on both sides)"
            if figures["moves_beyond_intervals"] is None
            else f"{figures['moves_beyond_intervals']:,} of {figures['intervals_checked']:,}",
        ),
    ]
    return pd.DataFrame(rows, columns=["figure", "value"])


def _text(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "(none)"
    return "(none)" if value is None else str(value)


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
    failed = int((health["status"] == "fail").sum())
    skipped = int((health["status"] == "skipped").sum())
    if failed:
        verdict = f"{failed} failed" + (f", {skipped} skipped" if skipped else "")
    elif skipped == len(health):  # too few models for any check
        verdict = f"every check skipped: {_fewest(health)}"
    else:
        verdict = "all checks passed" + (f" ({skipped} skipped)" if skipped else "")
    parts = {kind: (heading, table) for kind, heading, table in health_tables(health)}
    lines = [f"# {title}: {verdict}", "", "## Benchmarks", ""]
    lines += [markdown_table(parts["benchmarks"][1], digits=3), ""]
    if "subtasks" in parts:
        heading, everyone = parts["subtasks"]
        shown = everyone if all_subtasks else parts.get("failed", ("", everyone[:0]))[1]
        lines += [f"## {heading}", ""]
        if len(shown):
            lines += [markdown_table(shown, digits=3), ""]
    return "\n".join(lines + _comparability_lines(health))


def health_tables(health: pd.DataFrame) -> list[tuple[str, str, pd.DataFrame]]:
    """The health table for people, with ``lbnorm health``'s headings: each part with its kind.

    Args:
        health: The table from :mod:`lbnorm.analysis.health`.

    Returns:
        ``(kind, heading, table)``: every benchmark (``benchmarks``); the
        subtasks that failed (``failed``, if any); every subtask (``subtasks``).
    """
    benchmarks = health.loc[health["level"].eq("benchmark")]
    subtasks = health.loc[health["level"].eq("subtask")]
    failed = subtasks.loc[subtasks["status"].eq("fail")]

    def shown(frame: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
        return frame[list(labels)].rename(columns=labels).reset_index(drop=True)

    tables = [("benchmarks", "Benchmarks", shown(benchmarks, HEALTH_BENCHMARK_LABELS))]
    if len(failed):
        tables.append(
            (
                "failed",
                f"Subtasks that fail ({len(failed)})",
                shown(failed, HEALTH_SUBTASK_LABELS),
            )
        )
    if len(subtasks):
        tables.append(
            (
                "subtasks",
                f"Subtasks ({_subtask_counts(subtasks)})",
                shown(subtasks, HEALTH_SUBTASK_LABELS),
            )
        )
    return tables


def _subtask_counts(subtasks: pd.DataFrame) -> str:
    """The subtask checks in words: checked (not skipped), failed, skipped.

    Examples:
        >>> _subtask_counts(pd.DataFrame({"status": ["pass", "fail", "skipped"]}))
        '2 checked, 1 failed; 1 skipped'
        >>> _subtask_counts(pd.DataFrame({"status": ["skipped"] * 40}))
        'none checked: 40 skipped'
    """
    status = subtasks["status"]
    n_failed = int((status == "fail").sum())
    n_skipped = int((status == "skipped").sum())
    n_checked = len(subtasks) - n_skipped
    if not n_checked:
        return f"none checked: {n_skipped:,} skipped"
    return f"{n_checked:,} checked, {n_failed:,} failed" + (
        f"; {n_skipped:,} skipped" if n_skipped else ""
    )


def _comparability_lines(health: pd.DataFrame) -> list[str]:
    """The comparability check's section (a run told ``--comparability``), else none."""
    rows = health[health["level"] == "comparability"]
    if not len(rows):
        return []
    differs = rows[rows["status"] == "fail"]
    lines = [
        f"## Comparability ({len(rows)} subtasks checked, {len(differs)} with "
        "variants run with other settings than the majority)",
        "",
    ]
    if len(differs):
        table = differs[["benchmark", "subtask", "n_models", "failed"]].rename(
            columns={"n_models": "variants differing", "failed": "settings"}
        )
        lines += [markdown_table(table, digits=0), ""]
    return lines


def _fewest(health: pd.DataFrame) -> str:
    """Why every check was skipped: 'at most 8 models, fewer than a check needs (...)'."""
    most = health["n_models"].max()
    shown = "no models" if pd.isna(most) else f"at most {int(most):,} models"
    return f"{shown}, fewer than a check needs (min_models, default 30)"


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
