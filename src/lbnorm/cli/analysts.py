"""``lbnorm query``, ``show``, ``compare`` and ``report``: what analysts ask of an output.

``compare --paired`` is here too; :mod:`lbnorm.cli.changes` has ``diff --paired``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Literal

from lbnorm.cli.arguments import (
    Commands,
    Whole,
    add_digits,
    add_paired_test_options,
    add_verify,
    check_parent,
    print_shown,
)
from lbnorm.core.errors import ExitCode, OptionsError

__all__ = ["register"]


def register(commands: Commands) -> None:
    """Register ``query``, ``show``, ``compare`` and ``report``."""
    _register_query(commands)
    _register_show(commands)
    _register_compare(commands)
    _register_report(commands)


def _register_query(commands: Commands) -> None:
    query = commands.add_parser(
        "query",
        help="run SQL (DuckDB) over an output directory",
        description=(
            "Run one SQL statement (DuckDB dialect) over an output directory, whose "
            "files are the views scores (subtasks.parquet), benchmarks, leaderboard, "
            "metadata (the --metadata table, else the leaderboard's metadata columns) "
            "and columns (every view's columns, types and docs); a ratings output "
            "(lbnorm arena) has ratings, win_rates and columns. Quote column names "
            'with spaces: "MATH Lvl 5". A query reads these tables only (no files, '
            "network, extensions or settings); --output saves a result. Needs DuckDB: "
            "pip install duckdb (from a clone of lbnorm: pip install '.[sql]')."
        ),
        epilog=_QUERY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("out", metavar="OUT", help="an lbnorm output directory")
    add_verify(query)
    query.add_argument(
        "sql",
        metavar="SQL",
        help="the statement; - reads it from stdin; 'FROM columns' lists the columns",
    )
    query.add_argument(
        "--format",
        choices=["table", "csv", "json", "parquet"],
        help="output format (default: from --output's suffix, else table)",
    )
    query.add_argument("--output", metavar="FILE", help="write the result here")
    query.add_argument(
        "--metadata", metavar="FILE", help="a metadata table to query as `metadata`"
    )
    query.add_argument(
        "--attach",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="also query another output directory as NAME.leaderboard etc. (repeatable)",
    )
    query.add_argument(
        "--max-rows",
        action=Whole,
        what="rows to print",
        default=100,
        help="rows printed in table format (default: %(default)s)",
    )
    add_digits(
        query,
        default=None,
        example=2,
        help_text="round every float to this many decimals in table format "
        "(default: print values as the query returned them)",
    )
    query.set_defaults(handler=_cmd_query, writes=("output",))


def _register_show(commands: Commands) -> None:
    show = commands.add_parser(
        "show",
        help="print the top of a leaderboard, filtered",
        description=(
            "Print the top N variants of an output directory's leaderboard. Filters "
            "combine: --model (regular expression), --precision, --where COLUMN OP VALUE "
            "on any column (OP: = != < <= > >= ~), --benchmark sorts by one benchmark."
        ),
        epilog=(
            "examples:\n"
            "  lbnorm show lbnorm-out --top 20 --benchmark math --where 'params_b<10'\n"
            "  lbnorm show lbnorm-out --model qwen --precision bfloat16\n"
            "  lbnorm show lbnorm-out --rank-within size_class --where size_class=7-13B\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    show.add_argument("out", metavar="OUT", help="an lbnorm output directory")
    add_verify(show)
    show.add_argument(
        "--top",
        action=Whole,
        what="rows to print",
        default=20,
        help="rows to print (default: %(default)s)",
    )
    show.add_argument(
        "--benchmark", help="sort by this benchmark (a unique prefix will do: math)"
    )
    show.add_argument(
        "--model", metavar="PATTERN", help="model names matching (case-insensitive)"
    )
    show.add_argument("--precision", help="this precision only, e.g. bfloat16")
    show.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COND",
        help="a condition, as arena's --where: COLUMN OP VALUE (params_b<10, "
        "type~chat), a flag, or COLUMN in (V1, V2) (repeatable)",
    )
    show.add_argument(
        "--columns", help="comma-separated columns to print instead of the defaults"
    )
    show.add_argument(
        "--rank-within",
        action="append",
        default=[],
        metavar="COLUMN",
        help="add ranks within groups of this column (repeatable)",
    )
    show.add_argument(
        "--exclude-flagged",
        action="store_true",
        help="re-rank without flagged variants and list them",
    )
    show.add_argument(
        "--metadata", metavar="FILE", help="join this metadata table first"
    )
    show.add_argument(
        "--full-names",
        action="store_true",
        help="do not shorten long model names",
    )
    add_digits(show, default=2)
    show.set_defaults(handler=_cmd_show)


def _register_compare(commands: Commands) -> None:
    compare = commands.add_parser(
        "compare",
        help="put models side by side, per benchmark and subtask",
        description=(
            "Print the named models' scores side by side: average, each benchmark and "
            "its subtasks (normalized 0-100, or --raw). A name may be a unique part of "
            "a model name; every variant of a model is shown. For two, the last column "
            "is the difference (second minus first)."
        ),
    )
    compare.add_argument("out", metavar="OUT", help="an lbnorm output directory")
    compare.add_argument("models", nargs="+", metavar="MODEL")
    compare.add_argument(
        "--raw", action="store_true", help="raw scores (0-1) instead of normalized"
    )
    add_digits(compare, default=2)
    compare.add_argument(
        "--paired",
        action="store_true",
        help="two models on the items both answered (the run's per-sample inputs): the difference per subtask, benchmark and average, its paired standard error beside the unpaired one, p-values, McNemar's test (docs/paired.md)",
    )
    add_verify(compare)
    add_paired_test_options(compare)
    compare.set_defaults(handler=_cmd_compare)


def _register_report(commands: Commands) -> None:
    report = commands.add_parser(
        "report",
        help="write a self-contained HTML report with plots",
        description=(
            "Write one HTML file (plots embedded, nothing fetched) with the leaderboard, "
            "a summary and distribution per benchmark, each benchmark against the "
            "mean of the others, health checks and, given --previous, what changed. "
            "Needs matplotlib: pip install matplotlib (from a clone of lbnorm: pip install '.[report]')."
        ),
    )
    report.add_argument("out", metavar="OUT", help="an lbnorm output directory")
    report.add_argument("--html", required=True, metavar="FILE", help="the HTML file")
    report.add_argument(
        "--previous", metavar="DIR", help="an older output directory to diff against"
    )
    report.add_argument(
        "--top",
        action=Whole,
        what="rows to show",
        default=50,
        help="rows of the static table shown without JavaScript; the interactive table holds every variant (default: %(default)s)",
    )
    report.add_argument("--title", help="page title (default: from the suite)")
    report.set_defaults(handler=_cmd_report, writes=("html",))


_QUERY_EPILOG = """\
examples:
  lbnorm query lbnorm-out "FROM columns"       # the views' columns and docs
  lbnorm query lbnorm-out "SELECT model, \\"MATH Lvl 5\\" FROM leaderboard
      WHERE params_b < 10 ORDER BY 2 DESC LIMIT 20"
  lbnorm query new-out "SELECT ... FROM leaderboard n JOIN old.leaderboard o
      USING (model, precision, revision, chat_template)" --attach old=lbnorm-out
  lbnorm query lbnorm-out "SELECT * FROM scores" --output scores.csv
"""


def _cmd_query(args: argparse.Namespace) -> int:
    from lbnorm.faces.query import infer_format, result_parts, run_query
    from lbnorm.output.reader import Output
    from lbnorm.output.transaction import check_file, write_file

    pairs = [_parse_attach(text) for text in args.attach]
    attach = dict(pairs)
    if len(attach) < len(pairs):  # (the same name again: case too, in the query)
        msg = "--attach: a NAME given twice.\nHint: give each output its own name."
        raise OptionsError(msg)
    if args.verify:  # every table hashed, before any work
        for out in (args.out, *attach.values()):
            Output.open(out, verify=True).close()
    fmt = args.format or infer_format(args.output)
    if fmt == "parquet" and args.output is None:
        msg = (
            "--format parquet needs --output FILE.\nHint: add --output result.parquet."
        )
        raise OptionsError(msg)
    if args.output is not None:
        check_parent(args.output)
        outs = (args.out, *attach.values())  # a result saved there changes the output
        check_file(args.output, option="--output", is_ours=None, outs=outs)
    sql = sys.stdin.read() if args.sql == "-" else args.sql
    table = run_query(args.out, sql, metadata=args.metadata, attach=attach)
    parts = result_parts(  # (JSON a slice of rows at a time)
        table,
        fmt,
        max_rows=args.max_rows,
        digits=args.digits,
        escape=args.output is None
        and sys.stdout.isatty(),  # CSV is data, but not for a TTY
    )
    if args.output is None:
        for part in parts:
            sys.stdout.write(part.decode())
        return ExitCode.OK
    write_file(args.output, parts, option="--output")
    print(f"wrote {args.output} ({table.num_rows:,} rows, {fmt})", file=sys.stderr)
    return ExitCode.OK


def _cmd_show(args: argparse.Namespace) -> int:
    from lbnorm.engines.metadata import annotate_leaderboard, list_flagged
    from lbnorm.output.reader import Output

    output = Output.open(args.out, verify=args.verify)
    if output.kind == "ratings":  # lbnorm arena's output
        from lbnorm.cli.arena import show_ratings

        return show_ratings(args, output)
    from lbnorm.core.schemas import benchmark_columns
    from lbnorm.faces.show import (
        format_leaderboard,
        match_benchmark,
        parse_where,
        select_leaderboard,
        with_tied_groups,
    )
    from lbnorm.suites.board import Board

    filters = [parse_where(text) for text in args.where]
    output = Output.open(output, "leaderboard")
    suite, _ = output.suite()
    rules = suite.board if suite is not None else Board()
    board = annotate_leaderboard(
        output.frame("leaderboard"),
        args.metadata,
        rank_within_columns=args.rank_within,
        is_flagged_excluded=args.exclude_flagged,
        rank_by=rules.rank_by,
        rank_method=rules.rank_method,
    )
    benchmark = (
        match_benchmark(
            args.benchmark, benchmark_columns(board.columns), error=OptionsError
        )
        if args.benchmark
        else None
    )
    board = with_tied_groups(board, output, benchmark or rules.rank_by)
    selected = select_leaderboard(
        board,
        filters=filters,
        model=args.model,
        precision=args.precision,
        benchmark=benchmark,
        top=None,
    )
    shown = selected.head(args.top)
    print_shown(
        args, shown, selected, board, what="variants", by=benchmark or rules.rank_by
    )
    if len(shown):
        print(
            format_leaderboard(
                shown,
                benchmark=benchmark,
                columns=args.columns.split(",") if args.columns else None,
                name_width=None if args.full_names else 48,
                digits=args.digits,
                rates=rules.rate_names,
                has_average=rules.average != "none",
            )
        )
    if args.exclude_flagged:
        flagged = list_flagged(board)
        print(f"\n{len(flagged)} flagged variant(s), not ranked:")
        if len(flagged):
            from lbnorm.faces.terminal import format_table

            print(format_table(flagged, digits=args.digits))
    return ExitCode.OK


def _cmd_compare(args: argparse.Namespace) -> int:
    if args.paired:
        return _compare_paired(args)
    import pandas as pd

    from lbnorm.core.schemas import KEY_COLUMNS
    from lbnorm.faces.show import compare_variants, find_variants, format_comparison
    from lbnorm.output.reader import Output

    output = Output.open(args.out, "leaderboard", verify=args.verify)
    variants = find_variants(output.frame("leaderboard"), args.models)
    models = variants["model"].unique().tolist()
    value: Literal["normalized_score", "raw_score"] = (
        "raw_score" if args.raw else "normalized_score"
    )
    subtasks = (
        output.frame("subtasks", models=models)
        if output.has("subtasks")
        else pd.DataFrame(columns=[*KEY_COLUMNS, "benchmark", "subtask", value])
    )  # without subtasks.parquet (run --no-subtasks): benchmarks only
    comparison = compare_variants(
        variants,
        output.frame("benchmarks", models=models),
        subtasks,
        value=value,
    )
    print(
        format_comparison(
            variants,
            comparison,
            digits=max(args.digits, 4) if args.raw else args.digits,
        )
    )
    return ExitCode.OK


def _compare_paired(args: argparse.Namespace) -> int:
    """``compare --paired``: two variants of an output, on the items both answered."""
    from lbnorm.analysis.paired import compare_paired
    from lbnorm.core.schemas import KEY_COLUMNS
    from lbnorm.faces.paired import format_paired_comparison
    from lbnorm.faces.show import find_variants
    from lbnorm.output.reader import Output

    if len(args.models) != 2:
        msg = f"--paired compares two models, got {len(args.models)}.\nHint: name two models: lbnorm compare OUT A B --paired."
        raise OptionsError(msg)
    output = Output.open(args.out, "leaderboard", verify=args.verify)
    variants = find_variants(output.frame("leaderboard"), args.models)
    if len(variants) != 2:
        shown = ", ".join(
            f"{model} [{precision}]"
            for model, precision in zip(
                variants["model"], variants["precision"], strict=True
            )
        )
        msg = f"--paired compares two variants, but the names match {len(variants)}: {shown}.\nHint: compare variants of one model in Python: lbnorm.analysis.paired.compare_paired(out, {{'model': ..., 'precision': ...}}, ...)."
        raise OptionsError(msg)
    a, b = (  # the two variants named
        {key: variants.iloc[at][key] for key in KEY_COLUMNS} for at in range(2)
    )
    comparison = compare_paired(
        output, a, b, adjust=args.paired_adjust, alpha=args.paired_alpha
    )
    print(format_paired_comparison(comparison, digits=args.digits))
    return ExitCode.OK


def _cmd_report(args: argparse.Namespace) -> int:
    from lbnorm.faces.html_report import render_report
    from lbnorm.faces.ratings_report import render_ratings_report
    from lbnorm.faces.report_assets import is_page
    from lbnorm.output.reader import Output
    from lbnorm.output.transaction import write_file

    check_parent(args.html)  # before the plots, not after
    output = Output.open(args.out)
    is_ratings = output.kind == "ratings"  # lbnorm arena's output
    render = render_ratings_report if is_ratings else render_report
    page = render(output, previous=args.previous, top=args.top, title=args.title)
    data = page.encode()
    write_file(args.html, data, option="--html", is_ours=is_page)
    size = f"{len(data) / 1e3:,.0f} kB" if is_ratings else f"{len(page) / 1e6:.1f} MB"
    print(f"wrote {args.html} ({size})")
    return ExitCode.OK


def _parse_attach(text: str) -> tuple[str, str]:
    name, is_pair, directory = text.partition("=")
    if not is_pair or not name or not directory:
        msg = f"--attach {text!r}: expected NAME=DIR.\nHint: e.g. --attach old=lbnorm-out-2025-01."
        raise OptionsError(msg)
    return name, directory
