"""The ``lbnorm`` command line: ``main(argv) -> exit code``, one ``_cmd_<name>`` each.

Exit codes: 0 success; 1 other lbnorm error; 2 usage error; 3 bad suite; 4 bad
input file; 5 scores failed validation; 6 output not writable; 7 ran and wrote the
output, but a health check failed or (with --cache) an input file was rejected;
130 interrupted.
Errors print ``lbnorm: error: <message>`` on stderr, without a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, get_args

from lbnorm.errors import LbnormError
from lbnorm.kernel import MissingPolicy
from lbnorm.readers.tables import ExtraColumns
from lbnorm.validate import UnknownSubtasks

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["main"]

_EPILOG = """\
exit codes:
  0  success               4  an input file is unreadable or malformed
  1  other lbnorm error    5  scores failed validation (every failure listed)
  2  usage error           6  the output directory cannot be written
  3  the suite is invalid  7  ran, but a health check failed or a file was rejected
                           130 interrupted

examples:
  lbnorm run                                   # the bundled demo: 4,576 real models
  lbnorm run results/ --out out/               # a tree of lm-eval-harness results files
  lbnorm run scores.csv --suite my-suite.toml  # a long-format table, your own bounds
  lbnorm suites show openllm-v2 --toml > my-suite.toml   # start a suite from a built-in
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code.

    Args:
        argv: Arguments without the program name; defaults to ``sys.argv[1:]``.

    Returns:
        The exit code (see the module docstring).
    """
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        return int(args.handler(args))
    except LbnormError as exc:
        from lbnorm.summary import printable

        print(
            f"lbnorm: error: {printable(str(exc), keep_newlines=True)}", file=sys.stderr
        )
        return exc.exit_code
    except KeyboardInterrupt:
        print("lbnorm: interrupted; the previous output is unchanged.", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `lbnorm query ... | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes
        return 0


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lbnorm",
        description=(
            "Normalize whole LLM leaderboards: raw benchmark scores in, scores "
            "rescaled above each task's random baseline, max(0, (raw - lb) / (1 - lb)) "
            "* 100 with lb = 1/num_choices, out as Parquet."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="normalize scores and write the output tables",
        description=(
            "Read scores (lm-evaluation-harness results files or trees, CSV, JSONL, "
            "Parquet), normalize them under a suite, write subtasks.parquet, "
            "benchmarks.parquet, leaderboard.parquet and manifest.json to --out "
            "(replaced atomically), and print a summary. With no INPUTS, the bundled "
            "demo leaderboard (4,576 Open LLM Leaderboard v2 models) is used."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="score files or results directories (default: the bundled demo)",
    )
    run.add_argument(
        "--suite",
        default="openllm-v2",
        help="built-in suite name or suite TOML file (default: %(default)s)",
    )
    run.add_argument(
        "--out", default="lbnorm-out", help="output directory (default: %(default)s)"
    )
    _add_policy_options(run)
    run.add_argument(
        "--top",
        type=int,
        default=10,
        help="rows of the leaderboard to print (default: %(default)s)",
    )
    run.add_argument("--quiet", action="store_true", help="print nothing on success")
    run.add_argument(
        "--no-subtasks",
        dest="subtasks",
        action="store_false",
        help="skip subtasks.parquet: read only what the benchmark scores need (faster for big recomputes)",
    )
    run.add_argument(
        "--engine",
        choices=("auto", "memory", "stream", "dask"),
        default="auto",
        help=(
            "memory: every score in one dense store; stream: Parquet row groups "
            "folded into exact partial sums (--workers), in bounded memory for "
            "inputs larger than RAM (implies --no-subtasks); dask: on a Dask cluster "
            "(extra 'dask'; see --scheduler); auto (default): memory, or stream "
            "with --no-subtasks"
        ),
    )
    run.add_argument(
        "--workers",
        type=int,
        metavar="N",
        default=1,
        help="with the stream engine: processes summing Parquet row groups (default: %(default)s; see benchmarks_perf/README.md)",
    )
    run.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --engine dask: the scheduler, e.g. tcp://host:8786 (default: a local cluster)",
    )
    run.add_argument(
        "--batch-rows",
        type=int,
        metavar="N",
        help="with --engine stream: rows per batch (default: each Parquet row group)",
    )
    run.set_defaults(handler=_cmd_run)

    suites = commands.add_parser(
        "suites",
        help="list the built-in suites, or show one",
        description="List the built-in suites, or show one suite's benchmarks, subtasks and lower bounds.",
    )
    suites.add_argument("action", nargs="?", choices=["list", "show"], default="list")
    suites.add_argument("name", nargs="?", help="suite name or TOML file (for show)")
    suites.add_argument(
        "--toml",
        action="store_true",
        help="print the suite file itself (a starting point for your own)",
    )
    suites.set_defaults(handler=_cmd_suites)
    _add_change_commands(commands)
    _add_analyst_commands(commands)
    return parser


def _add_policy_options(parser: argparse.ArgumentParser) -> None:
    """The data policies shared by ``run`` and ``impact``."""
    parser.add_argument(
        "--missing",
        choices=get_args(MissingPolicy),
        default="exclude",
        help="variants lacking a subtask or benchmark: exclude = no score and no rank for what is incomplete (the leaderboard's rule); partial = average what is present; zero = count it as 0 (default: %(default)s)",
    )
    parser.add_argument(
        "--unknown",
        choices=get_args(UnknownSubtasks),
        default="error",
        help="rows whose subtask the suite lacks: error or ignore (default: %(default)s)",
    )
    parser.add_argument(
        "--extra-columns",
        choices=get_args(ExtraColumns),
        default="error",
        help="table columns outside the contract: error, keep (carried into subtasks.parquet) or drop (default: %(default)s)",
    )


def _cmd_run(args: argparse.Namespace) -> int:
    """``run``: read, normalize, write, summarise (the nightly options go to _cmd_run_monitored)."""
    from lbnorm.pipeline import run
    from lbnorm.progress import progress_bar

    started = time.perf_counter()
    bar = progress_bar(sys.stderr, quiet=args.quiet)
    try:
        result = run(args.inputs, progress=bar, **_run_options(args))
    finally:
        if bar is not None:
            bar.close()
    if not args.quiet:
        from lbnorm.summary import format_summary

        print(
            format_summary(
                result,
                out=args.out,
                top=args.top,
                seconds=time.perf_counter() - started,
            )
        )
        if args.exclude_flagged:
            _print_flagged(result.leaderboard)
    return 0


def _run_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options every kind of ``run`` passes on to the pipeline."""
    return {
        "suite": args.suite,
        "out": args.out,
        "missing": args.missing,
        "unknown": args.unknown,
        "extra_columns": args.extra_columns,
        "metadata": args.metadata,
        "rank_within": args.rank_within,
        "exclude_flagged": args.exclude_flagged,
        "subtasks": args.subtasks and args.engine in {"auto", "memory"},
        "engine": args.engine,
        "scheduler": args.scheduler,
        "batch_rows": args.batch_rows,
        "workers": args.workers,
    }


def _print_flagged(leaderboard: pd.DataFrame) -> None:
    from lbnorm.metadata import list_flagged

    flagged = list_flagged(leaderboard)
    names = [
        f"{model} ({precision})"
        for model, precision in zip(flagged["model"], flagged["precision"], strict=True)
    ]
    print(
        f"flagged    {len(names)} variant(s) excluded from ranks"
        + (f": {', '.join(names)}" if names else "")
    )


def _cmd_suites(args: argparse.Namespace) -> int:
    from lbnorm.suites import builtin_suite_names, load_suite

    if args.action == "list":
        for name in builtin_suite_names():
            suite = load_suite(name)
            print(
                f"{name:<12} {len(suite.benchmarks)} benchmarks, {sum(len(b.subtasks) for b in suite.benchmarks):>3} subtasks  {suite.description}"
            )
        return 0
    if not args.name:
        print(
            "lbnorm: error: `lbnorm suites show` needs a suite name.\nHint: `lbnorm suites` lists them.",
            file=sys.stderr,
        )
        return 2
    suite = load_suite(args.name)
    if args.toml:
        from importlib import resources
        from pathlib import Path

        source = suite.source
        data = (
            (
                resources.files("lbnorm")
                / "suites"
                / f"{source.removeprefix('builtin:')}.toml"
            ).read_text("utf-8")
            if source.startswith("builtin:")
            else Path(source).read_text("utf-8")
        )
        print(data, end="")
        return 0
    from lbnorm.summary import format_suite

    print(format_suite(suite))
    return 0


# --- baseline changes and nightly runs: diff, impact, health -----------------------

_CHANGE_EPILOG = """\
exit codes: 0 done (health: every check passed); 7 health: a check failed;
  1-6 as for run (nothing done); 2 usage error

examples:
  lbnorm impact --set-bound GPQA=0.3                 # the demo, GPQA bound 0.25 -> 0.3
  lbnorm impact results/ --suite openllm-v2 --suite my-suite.toml --out impact/
  lbnorm diff yesterday-out/ today-out/ --markdown changes.md
  lbnorm health                                      # the demo
  lbnorm health data/published_v2_final.csv          # any table with X and "X Raw" columns
  lbnorm run results/ --out out/ --cache .lbnorm-cache --report run.json --health
"""


class _RouteToMonitoredRun(argparse.Action):
    """Store the option, and have ``run`` handled by :func:`_cmd_run_monitored`.

    ``run``'s handler is set elsewhere (and again by the analysts' options); an
    option of this section switches ``args.handler`` while parsing, after
    argparse has applied the defaults, so neither handler needs to know.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, True if self.nargs == 0 else values)
        namespace.handler = _cmd_run_monitored


def _add_change_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Register the commands for baseline changes and nightly runs."""
    nightly = commands.choices["run"].add_argument_group(
        "nightly runs (exit 0: ran, healthy; 7: ran, a health check failed or a file was rejected)"
    )
    nightly.add_argument(
        "--cache",
        metavar="DIR",
        action=_RouteToMonitoredRun,
        help="parse cache for results files: parse only new or changed ones; a bad file is rejected, not fatal",
    )
    nightly.add_argument(
        "--full",
        action=_RouteToMonitoredRun,
        nargs=0,
        default=False,
        help="with --cache: ignore its contents and rebuild it",
    )
    nightly.add_argument(
        "--report",
        metavar="FILE",
        action=_RouteToMonitoredRun,
        help="write a JSON run report for the scheduler (inputs, models, warnings, health, timings), also when the run fails",
    )
    nightly.add_argument(
        "--health",
        action=_RouteToMonitoredRun,
        nargs=0,
        default=False,
        help="check every benchmark and subtask (see `lbnorm health`), write health.parquet, exit 7 if a check fails",
    )
    nightly.add_argument(
        "--health-config",
        metavar="FILE",
        action=_RouteToMonitoredRun,
        help="health thresholds (TOML)",
    )
    nightly.add_argument(
        "--intervals",
        action=_RouteToMonitoredRun,
        nargs=0,
        default=False,
        help="95%% interval on each average, rank range and tie group from the subtasks' stderr; write intervals.parquet",
    )

    diff = commands.add_parser(
        "diff",
        help="what changed between two output directories",
        description=(
            "Compare two lbnorm output directories: lower bounds that changed, the delta "
            "per model and benchmark, each model's average delta and rank move, and summary "
            "figures (Kendall tau, Spearman rho, top-k overlaps, big movers, newly clipped "
            "scores, models added and removed, rank moves beyond the rank intervals). "
            "Prints Markdown; --out saves the tables as Parquet."
        ),
        epilog=_CHANGE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diff.add_argument("old", metavar="OLD_OUT", help="the reference output directory")
    diff.add_argument("new", metavar="NEW_OUT", help="the changed output directory")
    _add_diff_options(diff)
    diff.set_defaults(handler=_cmd_diff)

    impact = commands.add_parser(
        "impact",
        help="what a suite change does to the same inputs",
        description=(
            "Normalize the same inputs under two suites (--suite OLD --suite NEW, or one "
            "suite and --set-bound overrides) and report what changed, as `lbnorm diff` "
            "does. With no INPUTS, the bundled demo."
        ),
        epilog=_CHANGE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    impact.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="score files or results directories (default: the demo)",
    )
    impact.add_argument(
        "--suite",
        action="append",
        default=[],
        help="old suite, then new suite (built-in name or TOML file; default: openllm-v2)",
    )
    impact.add_argument(
        "--set-bound",
        action="append",
        default=[],
        metavar="BENCHMARK[/SUBTASK]=LB",
        help="a lower bound for the new suite, e.g. GPQA=0.3 (repeatable)",
    )
    _add_policy_options(impact)
    _add_diff_options(impact)
    impact.set_defaults(handler=_cmd_impact)

    health = commands.add_parser(
        "health",
        help="is a benchmark broken? checks per benchmark and subtask",
        description=(
            "Check each benchmark against the leave-one-out average of the others "
            "(Spearman rho), its floor and ceiling rates, and for a stuck cluster (many "
            "models in a narrow low band whatever their average, as DROP had); and each "
            "subtask's lower bound and agreement with its benchmark. SOURCE: an output "
            "directory, a wide table with X and 'X Raw' columns (benchmark checks only), "
            "or inputs to normalize; none: the bundled demo."
        ),
        epilog=_CHANGE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    health.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="output directory, wide table, or inputs (default: the demo)",
    )
    health.add_argument(
        "--suite", default="openllm-v2", help="suite for INPUTS (default: %(default)s)"
    )
    health.add_argument(
        "--config",
        metavar="FILE",
        help="health thresholds (TOML; defaults in docs/changes-and-health.md)",
    )
    health.add_argument(
        "--all-subtasks",
        action="store_true",
        help="list every subtask, not only failed ones",
    )
    health.add_argument(
        "--out", metavar="DIR", help="also write health.parquet into DIR"
    )
    health.set_defaults(handler=_cmd_health)


def _add_diff_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write diff_bounds, diff_scores, diff_models and diff_summary .parquet here",
    )
    parser.add_argument(
        "--markdown",
        metavar="FILE",
        help="write the Markdown summary to FILE instead of stdout",
    )
    parser.add_argument(
        "--moved",
        type=int,
        default=10,
        metavar="N",
        help="count models that moved more than N places (default: %(default)s)",
    )
    parser.add_argument(
        "--top",
        type=int,
        action="append",
        metavar="K",
        help="a top-K overlap to report (repeatable; default: 10, 50, 100)",
    )
    parser.add_argument(
        "--largest",
        type=int,
        default=10,
        metavar="N",
        help="largest rank moves listed (default: %(default)s)",
    )
    parser.add_argument(
        "--no-intervals",
        dest="intervals",
        action="store_false",
        help="skip the rank intervals (faster)",
    )


def _cmd_run_monitored(args: argparse.Namespace) -> int:
    """``run`` with the nightly options: parse cache, health, intervals, report."""
    from lbnorm.analysis.health import HealthConfig
    from lbnorm.analysis.render import format_health, format_intervals
    from lbnorm.changes import run_monitored
    from lbnorm.progress import progress_bar
    from lbnorm.summary import format_summary

    if args.full and not args.cache:
        print(
            "lbnorm: error: --full rebuilds the parse cache; it needs --cache DIR.",
            file=sys.stderr,
        )
        return 2
    config = HealthConfig.from_toml(args.health_config) if args.health_config else None
    bar = progress_bar(sys.stderr, quiet=args.quiet)
    try:
        monitored = run_monitored(
            args.inputs,
            cache=args.cache,
            full_rebuild=args.full,
            health=args.health,
            health_config=config,
            intervals=args.intervals,
            report=args.report,
            progress=bar,
            **_run_options(args),
        )
    finally:
        if bar is not None:
            bar.close()
    report = monitored.report
    if not args.quiet:
        print(
            format_summary(
                monitored.result,
                out=args.out,
                top=args.top,
                seconds=report["timings_s"]["total"],
            )
        )
        inputs = report["inputs"]
        if args.cache:
            cache = inputs["cache"] or {}
            print(
                f"cache      {args.cache}: {inputs['parsed']} parsed, {inputs['cached']} cached, "
                f"{inputs['rejected']} rejected, {cache.get('dropped', 0)} dropped"
                + (
                    f"; rebuilt ({cache['rebuild_reason']})"
                    if cache.get("rebuilt")
                    else ""
                )
            )
        for rejected in inputs["rejected_files"]:
            print(f"rejected   {rejected['path']}: {rejected['reason']}")
        if "intervals" in monitored.tables:
            print("\n" + format_intervals(monitored.tables["intervals"], top=args.top))
        if "health" in monitored.tables:
            print("\n" + format_health(monitored.tables["health"]))
        if args.report:
            print(
                f"report     {args.report}: {report['status']}, exit {report['exit_code']}"
            )
        if getattr(args, "exclude_flagged", False):
            _print_flagged(monitored.result.leaderboard)
    return int(report["exit_code"])


def _cmd_diff(args: argparse.Namespace) -> int:
    from lbnorm.analysis.diff import diff_snapshots
    from lbnorm.analysis.render import format_diff
    from lbnorm.changes import read_snapshot

    diff = diff_snapshots(
        read_snapshot(args.old, intervals=args.intervals),
        read_snapshot(args.new, intervals=args.intervals),
        moved_places=args.moved,
        top=args.top or (10, 50, 100),
    )
    return _emit_diff(args, diff, format_diff(diff, largest=args.largest))


def _cmd_impact(args: argparse.Namespace) -> int:
    from lbnorm.analysis.render import format_diff
    from lbnorm.changes import compare_suites

    suites = args.suite or ["openllm-v2"]
    if len(suites) > 2 or (len(suites) == 1 and not args.set_bound):
        print(
            "lbnorm: error: impact compares two suites: --suite OLD --suite NEW, or one "
            "--suite (default openllm-v2) and --set-bound BENCHMARK=LB.\n"
            "Hint: lbnorm impact --set-bound GPQA=0.3",
            file=sys.stderr,
        )
        return 2
    diff = compare_suites(
        args.inputs,
        suites=suites,
        set_bounds=args.set_bound,
        intervals=args.intervals,
        moved_places=args.moved,
        top=args.top or (10, 50, 100),
        missing=args.missing,
        unknown=args.unknown,
        extra_columns=args.extra_columns,
    )
    on = ", ".join(args.inputs) if args.inputs else "the bundled demo"
    title = f"lbnorm impact: {diff.labels[0]} -> {diff.labels[1]} on {on}"
    return _emit_diff(args, diff, format_diff(diff, largest=args.largest, title=title))


def _cmd_health(args: argparse.Namespace) -> int:
    from pathlib import Path

    from lbnorm.analysis.health import HealthConfig, is_healthy
    from lbnorm.analysis.render import format_health
    from lbnorm.changes import check_source

    config = HealthConfig.from_toml(args.config) if args.config else None
    health, title = check_source(args.sources, suite=args.suite, config=config)
    print(format_health(health, all_subtasks=args.all_subtasks, title=title))
    if args.out:
        from lbnorm.writer import add_tables

        add_tables(Path(args.out), {"health": health})
    return 0 if is_healthy(health) else 7


def _emit_diff(args: argparse.Namespace, diff: object, text: str) -> int:
    from pathlib import Path

    from lbnorm.analysis.diff import Diff
    from lbnorm.writer import add_tables, write_bytes_atomically

    assert isinstance(diff, Diff)
    if args.out:
        add_tables(Path(args.out), diff.tables())
    if args.markdown:
        write_bytes_atomically(Path(args.markdown), (text + "\n").encode())
        print(
            f"wrote {args.markdown}"
            + (f" and {args.out}/diff_*.parquet" if args.out else "")
        )
    else:
        print(text)
    return 0


# --- analysts: query, show, compare, report ------------------------------------------


def _add_analyst_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Register the commands analysts use on an output directory."""
    # run: the metadata options (handled by _cmd_run)
    run = commands.choices["run"]
    run.add_argument(
        "--metadata",
        metavar="FILE",
        help="model metadata table (CSV/Parquet keyed by model [, precision, revision, chat_template]) whose other columns are appended to the leaderboard; the demo brings its own",
    )
    run.add_argument(
        "--rank-within",
        action="append",
        default=[],
        metavar="COLUMN",
        help="also rank within groups of this leaderboard column, e.g. size_class or type (adds rank_within_COLUMN; repeatable)",
    )
    run.add_argument(
        "--exclude-flagged",
        action="store_true",
        help="give variants flagged in the metadata no rank (and list them)",
    )

    query = commands.add_parser(
        "query",
        help="run SQL (DuckDB) over an output directory",
        description=(
            "Run one SQL statement (DuckDB dialect) over an output directory, whose "
            "files are the views scores (subtasks.parquet), benchmarks, leaderboard, "
            "metadata (the --metadata table, else the leaderboard's metadata columns) "
            "and columns (every view's columns, types and docs). Quote column names "
            "with spaces: \"MATH Lvl 5\". Needs DuckDB: pip install 'lbnorm[sql]'."
        ),
        epilog=_QUERY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("out", metavar="OUT", help="an lbnorm output directory")
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
        type=int,
        default=100,
        help="rows printed in table format (default: %(default)s)",
    )
    query.add_argument(
        "--digits",
        type=int,
        default=2,
        help="decimals printed in table format (default: %(default)s)",
    )
    query.set_defaults(handler=_cmd_query)

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
    show.add_argument(
        "--top", type=int, default=20, help="rows to print (default: %(default)s)"
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
        help="COLUMN OP VALUE, e.g. params_b<10, type=chatmodels (repeatable)",
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
    show.add_argument(
        "--digits", type=int, default=2, help="decimals (default: %(default)s)"
    )
    show.set_defaults(handler=_cmd_show)

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
    compare.add_argument(
        "--digits", type=int, default=2, help="decimals (default: %(default)s)"
    )
    compare.set_defaults(handler=_cmd_compare)

    report = commands.add_parser(
        "report",
        help="write a self-contained HTML report with plots",
        description=(
            "Write one HTML file (plots embedded, nothing fetched) with the leaderboard, "
            "a summary and distribution per benchmark, each benchmark against the "
            "mean of the others, health checks and, given --previous, what changed. "
            "Needs matplotlib: pip install 'lbnorm[report]'."
        ),
    )
    report.add_argument("out", metavar="OUT", help="an lbnorm output directory")
    report.add_argument("--html", required=True, metavar="FILE", help="the HTML file")
    report.add_argument(
        "--previous", metavar="DIR", help="an older output directory to diff against"
    )
    report.add_argument(
        "--top",
        type=int,
        default=50,
        help="leaderboard rows shown (default: %(default)s)",
    )
    report.add_argument("--title", help="page title (default: from the suite)")
    report.set_defaults(handler=_cmd_report)


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
    from lbnorm.query import format_result, infer_format, run_query

    attach = dict(_parse_attach(text) for text in args.attach)
    fmt = args.format or infer_format(args.output)
    if fmt == "parquet" and args.output is None:
        print(
            "lbnorm: error: --format parquet needs --output FILE.\n"
            "Hint: add --output result.parquet.",
            file=sys.stderr,
        )
        return 2
    if args.output is not None:
        _check_parent(args.output)
    sql = sys.stdin.read() if args.sql == "-" else args.sql
    table = run_query(args.out, sql, metadata=args.metadata, attach=attach)
    data = format_result(table, fmt, max_rows=args.max_rows, digits=args.digits)
    if args.output is None:
        sys.stdout.write(data.decode())
        return 0
    _write_atomically(args.output, data)
    print(f"wrote {args.output} ({table.num_rows:,} rows, {fmt})", file=sys.stderr)
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    from lbnorm.metadata import annotate_leaderboard, list_flagged
    from lbnorm.query import read_output_table
    from lbnorm.show import (
        Filter,
        benchmark_names,
        format_leaderboard,
        match_benchmark,
        select_leaderboard,
    )

    filters = [Filter.parse(text) for text in args.where]
    board = annotate_leaderboard(
        read_output_table(args.out, "leaderboard"),
        args.metadata,
        rank_within_columns=args.rank_within,
        is_flagged_excluded=args.exclude_flagged,
    )
    benchmark = (
        match_benchmark(args.benchmark, benchmark_names(board))
        if args.benchmark
        else None
    )
    selected = select_leaderboard(
        board,
        filters=filters,
        model=args.model,
        precision=args.precision,
        benchmark=benchmark,
        top=None,
    )
    conditions = [
        *args.where,
        *([f"model~{args.model}"] if args.model else []),
        *([f"precision={args.precision}"] if args.precision else []),
    ]
    shown = selected.head(args.top)
    print(
        f"top {len(shown):,} of {len(selected):,} variants"
        + (f" where {' and '.join(conditions)}" if conditions else "")
        + (f", by {benchmark}" if benchmark else ", by average")
        + (f" ({len(board):,} in all)" if conditions else "")
    )
    if len(shown):
        print(
            format_leaderboard(
                shown,
                benchmark=benchmark,
                columns=args.columns.split(",") if args.columns else None,
                name_width=None if args.full_names else 48,
                digits=args.digits,
            )
        )
    if args.exclude_flagged:
        flagged = list_flagged(board)
        print(f"\n{len(flagged)} flagged variant(s), not ranked:")
        if len(flagged):
            from lbnorm.summary import format_table

            print(format_table(flagged, digits=args.digits))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from typing import Literal

    import pandas as pd

    from lbnorm.query import has_table, read_output_table
    from lbnorm.schemas import KEY_COLUMNS
    from lbnorm.show import compare_variants, find_variants, format_comparison

    variants = find_variants(read_output_table(args.out, "leaderboard"), args.models)
    models = variants["model"].unique().tolist()
    value: Literal["normalized_score", "raw_score"] = (
        "raw_score" if args.raw else "normalized_score"
    )
    subtasks = (
        read_output_table(args.out, "subtasks", models=models)
        if has_table(args.out, "subtasks")
        else pd.DataFrame(columns=[*KEY_COLUMNS, "benchmark", "subtask", value])
    )  # without subtasks.parquet (run --no-subtasks): benchmarks only
    comparison = compare_variants(
        variants,
        read_output_table(args.out, "benchmarks", models=models),
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
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from lbnorm.report import render_report

    _check_parent(args.html)  # before the plots, not after
    page = render_report(
        args.out, previous=args.previous, top=args.top, title=args.title
    )
    _write_atomically(args.html, page.encode())
    print(f"wrote {args.html} ({len(page) / 1e6:.1f} MB)")
    return 0


def _parse_attach(text: str) -> tuple[str, str]:
    name, is_pair, directory = text.partition("=")
    if not is_pair or not name or not directory:
        msg = f"--attach {text!r}: expected NAME=DIR.\nHint: e.g. --attach old=lbnorm-out-2025-01."
        raise LbnormError(msg)
    return name, directory


def _check_parent(name: str) -> None:
    from pathlib import Path

    from lbnorm.errors import OutputError

    if not Path(name).resolve().parent.is_dir():
        msg = f"{name}: cannot write: its directory does not exist.\nHint: check that the directory exists and is writable."
        raise OutputError(msg)


def _write_atomically(name: str, data: bytes) -> None:
    from pathlib import Path

    from lbnorm.writer import write_bytes_atomically  # the module that writes files

    write_bytes_atomically(Path(name), data)
