"""Text for the terminal: a run's summary, a suite's bounds, aligned tables, safe text.

Everything printed passes :func:`printable`, so a model name cannot drive the
terminal.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from lbnorm.result import Result
    from lbnorm.suites import Suite

__all__ = ["format_suite", "format_summary", "format_table", "printable"]


def printable(text: str, *, keep_newlines: bool = False) -> str:
    r"""Escape control characters (an ANSI escape in a model name must not drive the terminal).

    Examples:
        >>> printable("evil" + chr(27) + "[2J")  # ESC shown as its escape, 4 characters
        'evil\\x1b[2J'
    """
    if text.isprintable():
        return text
    lines = text.split("\n") if keep_newlines else [text]
    escaped = [
        "".join(
            c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
            for c in line
        )
        for line in lines
    ]
    return "\n".join(escaped)


def format_table(frame: pd.DataFrame, *, digits: int = 2) -> str:
    """Render a frame as an aligned text table (floats rounded for display only).

    Examples:
        >>> import pandas as pd
        >>> print(format_table(pd.DataFrame({"model": ["a/b"], "average": [35.0]})))
        model  average
        a/b      35.00
    """
    import pandas as pd  # the caller holds a frame: pandas is loaded already

    cells = {
        name: [
            ""
            if pd.isna(value)
            else f"{value:.{digits}f}"
            if isinstance(value, float)
            else printable(str(value))
            for value in frame[name].tolist()
        ]
        for name in frame.columns
    }
    numeric = {
        name: pd.api.types.is_numeric_dtype(frame[name])
        and not pd.api.types.is_bool_dtype(frame[name])
        for name in frame.columns
    }
    widths = {
        name: max([len(str(name)), *map(len, values)]) for name, values in cells.items()
    }

    def line(values: dict[str, str]) -> str:
        parts = [
            values[n].rjust(widths[n]) if numeric[n] else values[n].ljust(widths[n])
            for n in frame.columns
        ]
        return "  ".join(parts).rstrip()

    header = line({str(name): str(name) for name in frame.columns})
    body = [
        line({name: cells[name][i] for name in frame.columns})
        for i in range(len(frame))
    ]
    return "\n".join([header, *body])


def format_summary(
    result: Result, *, out: str | None, top: int = 10, seconds: float | None = None
) -> str:
    """Summarise a run: inputs, models, benchmarks, incomplete variants, the top N."""
    board = result.leaderboard
    files = result.files
    n_subtasks = sum(len(benchmark.subtasks) for benchmark in result.suite.benchmarks)
    lines = [  # (counted without building the suite's subtask table: ~15 ms)
        f"suite      {result.suite.display_name} ({len(result.suite.benchmarks)} benchmarks, {n_subtasks} subtasks)"
    ]
    if len(files):
        superseded = int(files["superseded_by"].notna().sum())
        ignored = int(files["n_ignored"].sum())
        lines.append(
            f"inputs     {len(files)} file(s), {result.n_scores:,} scores"
            + (f", {superseded} superseded by newer runs" if superseded else "")
            + (f", {ignored:,} results entries not in the suite" if ignored else "")
        )
    if result.n_ignored_rows:
        lines.append(
            f"ignored    {result.n_ignored_rows:,} rows of subtasks the suite does not define"
        )
    from lbnorm.readers import (
        input_warnings,
    )  # the catalog carries the readers' warnings

    lines += [f"warning    {w}" for w in input_warnings(result.file_table)]
    incomplete = int((~board["is_complete"]).sum())
    lines.append(
        f"models     {board['model'].nunique():,} ({len(board):,} variants), {incomplete:,} incomplete (missing={result.missing})"
    )
    clipped = result.n_clipped
    lines.append(
        f"clipped    {clipped:,} subtask scores below their random baseline set to 0"
    )
    if top > 0:
        shown = board.head(top)[
            ["rank", "model", "precision", "average", *result.suite.benchmark_names]
        ]
        lines += ["", f"top {len(shown)}:", format_table(shown)]
    if out is not None:
        lines += [
            "",
            f"wrote      {out}/ (subtasks, benchmarks, leaderboard .parquet; manifest.json)",
        ]
    if seconds is not None:
        lines.append(f"time       {seconds:.2f} s")
    return "\n".join(lines)


def format_suite(suite: Suite) -> str:
    """Show a suite's benchmarks, rules and each subtask's lower bound.

    Sample counts print as integers (blank where unknown); an edited copy of a
    built-in suite is named ``<name> (modified)``.
    """
    import pandas as pd  # the suite shown as a table

    table = suite.subtask_table()
    bound = [
        f"1/{k} = {lb:.6g}"
        if k and Fraction(lb).limit_denominator(1000) == Fraction(1, k)
        else f"{lb:.6g}"
        for k, lb in zip(table["num_choices"], table["lower_bound"], strict=True)
    ]
    samples = table["n_samples"].astype("Int64")  # counts print as integers
    shown = table.assign(lower_bound=bound, n_samples=samples.where(samples > 0, pd.NA))
    header = [
        f"{suite.display_name}: {suite.description}",
        f"source {suite.source}  sha256 {suite.sha256[:16]}",
        "",
    ]
    for benchmark in suite.benchmarks:
        header.append(
            f"{benchmark.name}: {benchmark.aggregation}, weight {benchmark.weight:g}, {len(benchmark.subtasks)} subtask(s)"
        )
    columns = [
        "benchmark",
        "subtask",
        "task",
        "metric",
        "num_choices",
        "lower_bound",
        "n_samples",
    ]
    return "\n".join([*header, "", format_table(shown[columns])])
