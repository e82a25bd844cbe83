"""Text for the terminal: a run's summary, a suite's bounds, aligned tables, safe text.

Everything printed passes :func:`printable`, so a model name cannot drive the
terminal. The run's summary is read from the result's Arrow tables: printing it
loads no pandas (nor does this module: ``lbnorm --help`` imports it).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from lbnorm.engines.result import Result
    from lbnorm.suites import Suite

__all__ = [
    "aligned",
    "closing_lines",
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
    digits: int | None = 2,
    column_digits: Mapping[str, int] | None = None,
) -> str:
    """Render a frame or an Arrow table as an aligned text table.

    Floats are rounded for display only (`digits` decimals, or a column's own in
    `column_digits`; None: shown exact, as ``repr``); numbers are right-aligned;
    nulls and NaN are blank.

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
        kinds = [  # a dictionary column is numeric if its values are
            field.type.value_type if pa.types.is_dictionary(field.type) else field.type
            for field in frame.schema
        ]
        numeric = [
            pa.types.is_integer(kind)
            or pa.types.is_floating(kind)
            or pa.types.is_decimal(kind)
            for kind in kinds
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
    return aligned(names, cells, numeric)


def _cells(values: Sequence[object], digits: int | None) -> list[str]:
    """Each value as shown: blank if null or NaN, floats rounded, text made printable."""
    return [
        ""
        if _is_missing(value)
        else (repr(value) if digits is None else f"{value:.{digits}f}")
        if isinstance(value, float)
        else printable(str(value))
        for value in values
    ]


def _is_missing(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    # pandas' nulls, without pandas
    return type(value).__name__ in {"NAType", "NaTType"}


def aligned(names: list[str], cells: list[list[str]], numeric: list[bool]) -> str:
    """Columns of text cells under their names: numbers right-aligned, text left.

    Examples:
        >>> print(aligned(["model", "n"], [["a/b", "c"], ["1", "10"]], [False, True]))
        model   n
        a/b     1
        c      10
    """
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
#: Re-run variants given a line each in the summary; the manifest lists them all.
_RERUNS_SHOWN = 5
#: Warnings printed by the summary (about a screenful with the rest of it).
_WARNINGS_SHOWN = 8


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
    board = result.board_counts()
    n_subtasks = sum(len(benchmark.subtasks) for benchmark in result.suite.benchmarks)
    lines = [  # (counted without building the suite's subtask table: ~15 ms)
        f"suite      {result.suite.display_name} ({len(result.suite.benchmarks)} benchmarks, {n_subtasks} subtasks)"
    ]
    lines += _input_lines(result, out=out)
    if result.n_ignored_rows:
        lines.append(
            f"ignored    {result.n_ignored_rows:,} rows of subtasks the suite does not define"
        )
    from lbnorm.readers import input_warnings  # (the catalog carries them)

    lines += _warning_lines(input_warnings(result.file_table), out=out)
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
    lines += _metadata_lines(result.metadata_coverage)
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
        rules = result.suite.board
        shown = result.board_head(top).select(
            [
                "rank",
                "model",
                "precision",
                *(["average"] if rules.average != "none" else []),
                *result.suite.benchmark_names,
                *rules.rate_names,
            ]
        )
        lines += ["", f"top {shown.num_rows}:", format_table(shown)]
    written = "benchmarks, leaderboard"
    if result.subtask_parts is not None:  # None: --no-subtasks
        written = "subtasks, " + written
    if result.paired_output is not None:  # --paired
        written += ", paired"
    return "\n".join([*lines, *closing_lines(out, written, seconds)])


def closing_lines(
    out: str | os.PathLike[str] | None, written: str, seconds: float | None
) -> list[str]:
    """A command's summary's last lines: the folder written, its tables, the time taken.

    Examples:
        >>> closing_lines("out", "ratings, win_rates", 1.5)
        ['', 'wrote      out/ (ratings, win_rates .parquet; manifest.json)', 'time       1.50 s']
    """
    lines = []
    if out is not None:
        lines += [
            "",
            f"wrote      {_folder_label(out)} ({written} .parquet; manifest.json)",
        ]
    if seconds is not None:
        lines.append(f"time       {seconds:.2f} s")
    return lines


def _input_lines(result: Result, *, out: str | None) -> list[str]:
    """The ``inputs`` line and what the catalog says of the files read.

    Files and scores counted, then the variants re-run, the files superseded
    by newer runs (those no re-run names) and the files that gave nothing.
    No lines when there is no file table (scores handed over in memory).
    """
    import pyarrow.compute as pc

    files = result.file_table
    if not files.num_rows:
        return []
    from lbnorm.readers import input_reruns  # (the catalog carries them)

    is_superseded = pc.is_valid(files["superseded_by"])
    superseded = files.filter(is_superseded).select(["path", "superseded_by"])
    ignored = int(pc.sum(files["n_ignored"]).as_py() or 0)
    reruns = input_reruns(files)
    lines = [
        f"inputs     {files.num_rows:,} file(s), {result.n_scores:,} scores"
        + (
            f", {superseded.num_rows:,} superseded by newer runs"
            if superseded.num_rows
            else ""
        )
        + (f", {len(reruns):,} variant(s) re-run" if reruns else "")
        + (f", {ignored:,} results entries not in the suite" if ignored else "")
    ]
    lines += _rerun_lines(reruns, out=out)
    named = {path for rerun in reruns for path in rerun["superseded"]}
    lines += _superseded_lines(
        [row for row in superseded.to_pylist() if row["path"] not in named],
        out=out,
    )
    lines += _unused_lines(files, out=out)
    return lines


def _superseded_lines(
    superseded: list[dict[str, str]], *, out: str | None
) -> list[str]:
    """The first superseded files, each with the file that replaced it, then how many more."""
    texts = []
    for row in superseded[:_SUPERSEDED_SHOWN]:
        older, newer = PurePath(row["path"]), PurePath(row["superseded_by"])
        by = newer.name if newer.parent == older.parent else str(newer)
        texts.append(f"{printable(str(older))} (by {printable(by)})")
    note = " (manifest.json lists every file)" if out is not None else ""
    return _first_few("superseded", texts, len(superseded), more=note)


def _first_few(
    label: str,
    texts: Sequence[str],
    total: int,
    *,
    more: str = "",
    is_labelled: bool = False,
) -> list[str]:
    """A summary's lines of one kind: the `texts` shown (of `total`), then how many more.

    The label heads the first line, or each line when `is_labelled`; `more`
    ends the line that counts the rest (what they are, where all are listed).
    """
    lines = [
        f"{label if index == 0 or is_labelled else '':<10} {text}"
        for index, text in enumerate(texts)
    ]
    if total > len(texts):
        label = label if is_labelled else ""
        lines.append(f"{label:<10} and {total - len(texts):,} more{more}")
    return lines


def _metadata_lines(coverage: Mapping[str, Any] | None) -> list[str]:
    """What a metadata table missed: variants without a row, rows without a variant."""
    if not coverage:
        return []
    missed, stray = coverage["variants_without_row"], coverage["rows_without_variant"]
    if not missed and not stray:
        return []
    parts = []
    if missed:
        shown = ", ".join(coverage["variants_shown"][:3])
        parts.append(
            f"{missed:,} of {coverage['variants']:,} variant(s) have no row (e.g. {shown})"
        )
    if stray:
        shown = ", ".join(coverage["rows_shown"][:3])
        parts.append(
            f"{stray:,} of its {coverage['rows']:,} row(s) match no variant (e.g. {shown}: "
            "a misspelled name?)"
        )
    return [f"metadata   {printable(str(coverage['source']))}: {'; '.join(parts)}"]


def _rerun_lines(reruns: Sequence[Mapping[str, Any]], *, out: str | None) -> list[str]:
    """One line per re-run variant (the first few), then how many more."""
    texts = [printable(_rerun_text(rerun)) for rerun in reruns[:_RERUNS_SHOWN]]
    note = ' (manifest.json lists each: "reruns")' if out is not None else ""
    return _first_few("re-run", texts, len(reruns), more=f" variant(s) re-run{note}")


def _rerun_text(rerun: Mapping[str, Any]) -> str:
    """A re-run variant in one line: its files, what was superseded, what differs.

    Examples:
        >>> _rerun_text({"model": "o/m", "precision": "bfloat16", "files": ["t/o/m/r_1.json",
        ...     "t/o/m/r_2.json"], "superseded": ["t/o/m/r_1.json"], "differences": [{"benchmark":
        ...     "BBH", "subtask": "navigate", "subtasks": 24, "older": "t/o/m/r_1.json",
        ...     "newer": "t/o/m/r_2.json", "older_score": 0.776, "newer_score": 0.8}]})
        'o/m (bfloat16): 2 files, newest r_2.json; r_1.json superseded; 24 older scores differ (1 benchmark), e.g. BBH navigate 0.776 in r_1.json, 0.800 in the newest'
    """
    files, superseded = rerun["files"], rerun["superseded"]
    newest = files[-1]
    text = (
        f"{rerun['model']} ({rerun['precision'] or 'precision unknown'}): "
        f"{len(files):,} files, newest {PurePath(newest).name}"
    )
    if superseded:
        more = f" and {len(superseded) - 1:,} more" if len(superseded) > 1 else ""
        text += f"; {_beside(superseded[0], newest)}{more} superseded"
    differences = rerun["differences"]
    if differences:
        first = differences[0]
        n_scores = sum(int(difference["subtasks"]) for difference in differences)
        n_benchmarks = len({difference["benchmark"] for difference in differences})
        older, newer = _score_texts(first["older_score"], first["newer_score"])
        where = (
            "the newest"
            if first["newer"] == newest
            else _beside(first["newer"], newest)
        )
        text += (
            f"; {n_scores:,} older score{'' if n_scores == 1 else 's'} differ"
            f"{'s' if n_scores == 1 else ''} ({n_benchmarks:,} "
            f"benchmark{'' if n_benchmarks == 1 else 's'}), e.g. {first['benchmark']} "
            f"{first['subtask']} {older} in {_beside(first['older'], newest)}, "
            f"{newer} in {where}"
        )
    return text


def _score_texts(older: float, newer: float) -> tuple[str, str]:
    """Two scores to three decimals, or to as many as tell them apart.

    Examples:
        >>> _score_texts(0.0758150113722517, 0.14480667172100076)
        ('0.076', '0.145')
        >>> _score_texts(0.5, 0.50004)
        ('0.50000', '0.50004')
    """
    for digits in range(3, 18):
        texts = f"{older:.{digits}f}", f"{newer:.{digits}f}"
        if texts[0] != texts[1]:
            return texts
    return repr(older), repr(newer)


def _beside(path: str, other: str) -> str:
    """`path` by its name when it is in `other`'s folder, else relative where it can be.

    Relative to the working directory when `path` is under it, else as given.
    """
    if PurePath(path).parent == PurePath(other).parent:
        return PurePath(path).name
    if PurePath(path).is_absolute() and PurePath(path).is_relative_to(Path.cwd()):
        return str(PurePath(path).relative_to(Path.cwd()))
    return path


def _warning_lines(warnings: Sequence[str], *, out: str | None) -> list[str]:
    """The readers' warnings, the first few, then how many more."""
    note = ' (manifest.json lists every one: "warnings")' if out is not None else ""
    shown = warnings[:_WARNINGS_SHOWN]
    return _first_few("warning", shown, len(warnings), more=note, is_labelled=True)


#: Results entries the summary names; the manifest lists each file's.
_UNUSED_SHOWN = 8


def _unused_lines(files: pa.Table, *, out: str | None) -> list[str]:
    """The results entries no suite subtask took, most files first, with their counts."""
    from lbnorm.readers.catalog import ignored_entries

    entries = ignored_entries(files)
    if not entries:
        return []
    shown = ", ".join(
        f"{printable(entry)} ({count:,})" for entry, count in entries[:_UNUSED_SHOWN]
    )
    more = len(entries) - _UNUSED_SHOWN
    return [
        f"unused     results entries no subtask of the suite takes (files holding "
        f"each): {shown}"
        + (f" and {more:,} more" if more > 0 else "")
        + (" (manifest.json lists each file's)" if out is not None and more > 0 else "")
    ]


def format_suite(suite: Suite) -> str:
    """Show a suite's benchmarks, rules and each subtask's lower bound.

    Sample counts print as integers (blank where unknown); an edited copy of a
    built-in suite is named ``<name> (modified)``.
    """
    from fractions import Fraction  # (decimal: ~3 ms, only for this table)

    import pandas as pd  # the suite shown as a table

    from lbnorm.suites.rules import DEFAULT_RANGE

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
        low, high = benchmark.value_range
        rules = [
            text
            for is_said, text in (
                (benchmark.kind != "score", f"kind {benchmark.kind}"),
                ((low, high) != DEFAULT_RANGE, f"range [{low:g}, {high:g}]"),
                (bool(benchmark.missing), f"missing {benchmark.missing}"),
                (not benchmark.averaged and benchmark.kind == "score", "not averaged"),
            )
            if is_said
        ]
        header.append(
            f"{benchmark.name}: {benchmark.aggregation}, weight {benchmark.weight:g}, {len(benchmark.subtasks)} subtask(s)"
            + "".join(f", {rule}" for rule in rules)
        )
    header.extend(_board_lines(suite))
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


def _board_lines(suite: Suite) -> list[str]:
    """The suite's board rules, when they are not the defaults (none: no lines)."""
    board = suite.board
    if board == type(board)():
        return []
    summed = " (left to right)" if board.summation == "left-to-right" else ""
    complete = ", complete rows only" if not board.rank_incomplete else ""
    lines = [
        "",
        f"board: average {board.average}{summed}; rank by {board.rank_by} "
        f"({board.rank_method}{complete})",
    ]
    lines.extend(
        f"rate {rate.name}: {rate.rule} of {', '.join(rate.benchmarks)}"
        for rate in board.rates
    )
    if board.columns:
        lines.append(
            "presented as: model, "
            + ", ".join(
                c.name + (f" ({c.digits} digits)" if c.digits is not None else "")
                for c in board.columns
            )
        )
    return lines


def _folder_label(out: str | os.PathLike[str]) -> str:
    """An output folder as a summary names it: with one trailing slash.

    Examples:
        >>> _folder_label("out/"), _folder_label("out"), _folder_label("/")
        ('out/', 'out/', '/')
    """
    text = os.fspath(out)
    return text.rstrip("/") + "/" if text.rstrip("/") else "/"


def format_paired_summary(result: Result, *, alpha: float) -> str:
    """One line on ``paired.parquet``: pairs, separable pairs, tied groups, gaps.

    The groups are those of the level the board ranks by (the average unless
    the suite's board says otherwise); levels not compared are named with why.

    Args:
        result: A run's result with ``paired_output``.
        alpha: The level of the run's tests.
    """
    import pyarrow as pa  # (loaded already: the run made the table)
    import pyarrow.compute as pc

    from lbnorm.core.arrow import scalar
    from lbnorm.engines.paired import suite_levels
    from lbnorm.suites import suite_arrays

    table = result.paired_output
    assert table is not None
    separable = table["separable"]
    n_separable = int(pc.sum(separable).as_py() or 0)  # (nulls are not counted)
    unknown = separable.null_count
    level = result.suite.board.rank_by
    is_ranked = pc.equal(table["level"].cast(pa.string()), scalar(level, pa.string()))
    ranked = table.filter(is_ranked)
    n_groups = int(pc.max(ranked["group_b"]).as_py() or 0) if ranked.num_rows else 0
    adjust = "Holm" if result.options.paired_adjust == "holm" else "Benjamini-Hochberg"
    line = (
        f"paired     {table.num_rows:,} adjacent pairs: {n_separable:,} separable at "
        f"{alpha:g} ({adjust})"
    )
    if ranked.num_rows:
        line += (
            f"; the {level} ranks {ranked.num_rows + 1:,} variants in {n_groups:,} "
            "statistically tied groups"
        )
    if unknown:
        line += f"; {unknown:,} pairs not compared"
    if result.paired_without_items:
        line += f" (no per-sample data: {', '.join(result.paired_without_items)})"
    _, left_out = suite_levels(result.suite, suite_arrays(result.suite))
    if left_out:
        line += f"; not compared: {'; '.join(left_out)}"
    return line
