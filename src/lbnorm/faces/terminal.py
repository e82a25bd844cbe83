"""Text for the terminal: a run's summary, a suite's bounds, aligned tables, safe text.

Everything printed passes :func:`printable`, so a model name cannot drive the
terminal. The run's summary is read from the result's Arrow tables: printing it
loads no pandas (nor does this module: ``lbnorm --help`` imports it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from lbnorm.engines.result import Result
    from lbnorm.suites import Suite

__all__ = [
    "folder_label",
    "format_paired_summary",
    "format_suite",
    "format_summary",
    "format_table",
    "printable",
]


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


def format_table(
    frame: pd.DataFrame | pa.Table,
    *,
    digits: int = 2,
    column_digits: Mapping[str, int] | None = None,
) -> str:
    """Render a frame or an Arrow table as an aligned text table.

    Floats are rounded for display only (`digits` decimals, or a column's own in
    `column_digits`); numbers are right-aligned; nulls and NaN are blank.

    Examples:
        >>> import pandas as pd
        >>> print(format_table(pd.DataFrame({"model": ["a/b"], "average": [35.0]})))
        model  average
        a/b      35.00
        >>> import pyarrow as pa
        >>> print(format_table(pa.table({"rank": [1, None], "model": ["a/b", "c/d"]})))
        rank  model
           1  a/b
              c/d
    """
    import pyarrow as pa  # light; a frame's caller has it already (pandas uses it)

    names: list[str]
    if isinstance(frame, pa.Table):
        names = frame.column_names
        values = [frame.column(index).to_pylist() for index in range(len(names))]
        numeric = [
            _is_number_type(
                field.type.value_type
                if pa.types.is_dictionary(field.type)
                else field.type
            )
            for field in frame.schema
        ]
    else:
        import pandas as pd  # the caller holds a frame: pandas is loaded already

        names = [str(name) for name in frame.columns]
        values = [frame[name].tolist() for name in frame.columns]
        numeric = [
            pd.api.types.is_numeric_dtype(frame[name])
            and not pd.api.types.is_bool_dtype(frame[name])
            for name in frame.columns
        ]
    own = column_digits or {}
    cells = [
        _cells(column, own.get(name, digits))
        for name, column in zip(names, values, strict=True)
    ]
    return _aligned(names, cells, numeric)


def _is_number_type(kind: pa.DataType) -> bool:
    import pyarrow as pa

    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_decimal(kind)
    )


def _cells(values: Sequence[object], digits: int) -> list[str]:
    """Each value as shown: blank if null or NaN, floats rounded, text made printable."""
    return [
        ""
        if _is_missing(value)
        else f"{value:.{digits}f}"
        if isinstance(value, float)
        else printable(str(value))
        for value in values
    ]


def _is_missing(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in {
        "NAType",
        "NaTType",
    }  # pandas' nulls, without pandas


def _aligned(names: list[str], cells: list[list[str]], numeric: list[bool]) -> str:
    widths = [
        max([len(name), *map(len, column)])
        for name, column in zip(names, cells, strict=True)
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            value.rjust(width) if is_number else value.ljust(width)
            for value, width, is_number in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    n_rows = len(cells[0]) if cells else 0
    body = [line([column[row] for column in cells]) for row in range(n_rows)]
    return "\n".join([line(names), *body])


#: Superseded files listed by name in the summary; the manifest lists them all.
_SUPERSEDED_SHOWN = 3


def format_summary(
    result: Result, *, out: str | None, top: int = 10, seconds: float | None = None
) -> str:
    """Summarise a run: inputs, superseded files, models, unranked variants, the top N.

    Read from the result's Arrow tables (no pandas).

    Args:
        result: The run's result.
        out: The output directory written (None: nothing written).
        top: Rows of the leaderboard shown (0: none).
        seconds: The run's wall time, if measured.

    Returns:
        The summary, one fact per line.
    """
    import pyarrow.compute as pc

    board = result.board_counts()
    files = result.file_table
    n_subtasks = sum(len(benchmark.subtasks) for benchmark in result.suite.benchmarks)
    lines = [  # (counted without building the suite's subtask table: ~15 ms)
        f"suite      {result.suite.display_name} ({len(result.suite.benchmarks)} benchmarks, {n_subtasks} subtasks)"
    ]
    if files.num_rows:
        is_superseded = pc.is_valid(files["superseded_by"])
        superseded = files.filter(is_superseded).select(["path", "superseded_by"])
        ignored = int(pc.sum(files["n_ignored"]).as_py() or 0)
        lines.append(
            f"inputs     {files.num_rows:,} file(s), {result.n_scores:,} scores"
            + (
                f", {superseded.num_rows:,} superseded by newer runs"
                if superseded.num_rows
                else ""
            )
            + (f", {ignored:,} results entries not in the suite" if ignored else "")
        )
        lines += _superseded_lines(superseded.to_pylist(), out=out)
    if result.n_ignored_rows:
        lines.append(
            f"ignored    {result.n_ignored_rows:,} rows of subtasks the suite does not define"
        )
    from lbnorm.readers import (
        input_warnings,
    )  # the catalog carries the readers' warnings

    lines += [f"warning    {w}" for w in input_warnings(result.file_table)]
    incomplete = board.variants - board.complete
    lines.append(
        f"models     {board.models:,} ({board.variants:,} variant{'' if board.variants == 1 else 's'}), "
        f"{incomplete:,} incomplete (missing={result.missing})"
    )
    unranked = board.unranked_incomplete
    if result.missing == "exclude" and unranked:
        lines.append(
            f"unranked   {unranked:,} incomplete variant(s) have no average and no rank "
            "(--missing exclude); --missing partial averages the benchmarks they have"
        )
    n_resized, resized = result.resized_variants()
    if n_resized:
        lines.append(
            f"sizes      {n_resized:,} variant(s) pooled with sample sizes other than the "
            f"suite's (not comparable to complete runs), e.g. {printable('; '.join(resized))}"
        )
    lines.append(
        f"clipped    {result.n_clipped:,} subtask scores below their random baseline set to 0"
    )
    if top > 0:
        shown = result.board_head(top).select(
            ["rank", "model", "precision", "average", *result.suite.benchmark_names]
        )
        lines += ["", f"top {shown.num_rows}:", format_table(shown)]
    if out is not None:
        written = "benchmarks, leaderboard"
        if result.subtask_parts is not None:  # None: --no-subtasks
            written = "subtasks, " + written
        if result.paired_output is not None:  # --paired
            written += ", paired"
        lines += [
            "",
            f"wrote      {folder_label(out)} ({written} .parquet; manifest.json)",
        ]
    if seconds is not None:
        lines.append(f"time       {seconds:.2f} s")
    return "\n".join(lines)


def _superseded_lines(
    superseded: list[dict[str, str]], *, out: str | None
) -> list[str]:
    """The first superseded files, each with the file that replaced it, then how many more."""
    lines = []
    for index, row in enumerate(superseded[:_SUPERSEDED_SHOWN]):
        older, newer = PurePath(row["path"]), PurePath(row["superseded_by"])
        by = newer.name if newer.parent == older.parent else str(newer)
        label = "superseded" if index == 0 else ""
        lines.append(f"{label:<10} {printable(str(older))} (by {printable(by)})")
    if len(superseded) > _SUPERSEDED_SHOWN:
        lines.append(
            f"{'':<10} and {len(superseded) - _SUPERSEDED_SHOWN:,} more"
            + (" (manifest.json lists every file)" if out is not None else "")
        )
    return lines


def format_suite(suite: Suite) -> str:
    """Show a suite's benchmarks, rules and each subtask's lower bound.

    Sample counts print as integers (blank where unknown); an edited copy of a
    built-in suite is named ``<name> (modified)``.
    """
    from fractions import Fraction  # (decimal: ~3 ms, only for this table)

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


def folder_label(out: str | os.PathLike[str]) -> str:
    """An output folder as a summary names it: with one trailing slash.

    Examples:
        >>> folder_label("out/"), folder_label("out"), folder_label("/")
        ('out/', 'out/', '/')
    """
    text = os.fspath(out)
    return text.rstrip("/") + "/" if text.rstrip("/") else "/"


def format_paired_summary(result: Result, *, alpha: float) -> str:
    """One line on ``paired.parquet``: pairs, separable pairs, tied groups, gaps.

    Args:
        result: A run's result with ``paired_output``.
        alpha: The level of the run's tests.
    """
    import pyarrow as pa  # (loaded already: the run made the table)
    import pyarrow.compute as pc

    from lbnorm.core.arrow import scalar

    table = result.paired_output
    assert table is not None
    separable = table["separable"]
    n_separable = int(pc.sum(separable).as_py() or 0)  # (nulls are not counted)
    unknown = separable.null_count
    is_average = pc.equal(
        table["level"].cast(pa.string()), scalar("average", pa.string())
    )
    average = table.filter(is_average)
    n_groups = int(pc.max(average["group_b"]).as_py() or 0) if average.num_rows else 0
    adjust = "Holm" if result.options.paired_adjust == "holm" else "Benjamini-Hochberg"
    line = (
        f"paired     {table.num_rows:,} adjacent pairs: {n_separable:,} separable at "
        f"{alpha:g} ({adjust}); the average ranks {average.num_rows + 1 if average.num_rows else 0:,} "
        f"variants in {n_groups:,} statistically tied groups"
    )
    if unknown:
        line += f"; {unknown:,} pairs not compared"
    if result.paired_without_items:
        line += f" (no per-sample data: {', '.join(result.paired_without_items)})"
    return line
