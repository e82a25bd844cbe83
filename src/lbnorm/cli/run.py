"""``lbnorm run``: read, normalize, write, summarise; with nightly options, checked and reported.

Every option of ``run`` is defined here, once; :func:`lbnorm.cli.arguments.options_of`
turns them into the one :class:`~lbnorm.core.options.RunOptions`.

A run loads no pandas (``import pandas`` alone takes longer than normalizing
the whole demo): the pipeline, the summary, the flagged listing and the run
report work on Arrow tables, built with :mod:`lbnorm.core.arrow` (pyarrow's own
conversions would import pandas to probe for it). Only the analyses of a nightly run
(``--health``, ``--intervals``) use pandas.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lbnorm.cli.arguments import (
    DEFAULTS,
    Commands,
    Whole,
    add_inputs,
    add_paired_test_options,
    add_policy_options,
    options_of,
)
from lbnorm.core.errors import ExitCode
from lbnorm.core.options import DEFAULT_SUITE, EngineName, RunOptions

if TYPE_CHECKING:
    import pyarrow as pa

    from lbnorm.faces.progress import ProgressBar
    from lbnorm.nightly import MonitoredRun

__all__ = ["register"]

_ENGINES: tuple[EngineName, ...] = ("auto", "memory", "stream", "dask")


def register(commands: Commands, *, epilog: str) -> None:
    """Register ``run`` and all its options, and ``convert``."""
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
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_inputs(run)
    run.add_argument(
        "--suite",
        default=DEFAULT_SUITE,
        help="built-in suite name or suite TOML file (default: %(default)s)",
    )
    run.add_argument(
        "--out", default="lbnorm-out", help="output directory (default: %(default)s)"
    )
    add_policy_options(run)
    run.add_argument(
        "--top",
        action=Whole,
        what="rows to print",
        default=10,
        help="rows of the leaderboard to print (default: %(default)s)",
    )
    run.add_argument("--quiet", action="store_true", help="print nothing on success")
    run.add_argument(
        "--failures",
        metavar="FILE",
        help="when scores fail validation (exit 5), write every failure to FILE, in file "
        "and line order: CSV (.csv) or Parquet (.parquet) by its suffix (the message "
        "lists the first few of each check)",
    )
    _add_engine_options(run)
    _add_metadata_options(run)
    _add_nightly_options(run)
    _add_paired_options(run)
    run.set_defaults(handler=_cmd_run, writes=("out", "report"))
    _register_convert(commands)


def _register_convert(commands: Commands) -> None:
    """``convert``: inputs read as ``run`` reads them, written as one long Parquet table."""
    convert = commands.add_parser(
        "convert",
        help="write inputs (a results tree, tables) as one long Parquet scores table",
        description=(
            "Read INPUTS as `lbnorm run` reads them (a results tree: the suite's "
            "subtasks, each from the newest file of its variant; CSV, JSONL, Parquet, "
            "sample files) and write their scores as one long-format Parquet file: one "
            "row per variant and subtask, the columns of `lbnorm run`'s input contract. "
            "It is what the Dask engine reads (Parquet only), and a faster input for any "
            "run. The scores are checked when the file is run, not here."
        ),
        epilog=_CONVERT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    convert.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="score files or results directories",
    )
    convert.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="the Parquet file to write (.parquet), replaced atomically",
    )
    convert.add_argument(
        "--suite",
        default=DEFAULT_SUITE,
        help="built-in suite name or suite TOML file: which results entries to read "
        "(default: %(default)s)",
    )
    convert.add_argument(
        "--quiet", action="store_true", help="print nothing on success"
    )
    convert.set_defaults(handler=_cmd_convert)


_CONVERT_EPILOG = """\
exit codes:
  0   written
  1   another lbnorm error
  2   usage error (--out not a .parquet file, or inside an output folder)
  3   invalid suite
  4   an input is missing, unreadable or malformed, or holds no scores for the suite
  6   --out not writable, or a file lbnorm did not write (nothing written)

examples:
  lbnorm convert tests/fixtures/full_structure --out scores.parquet
  lbnorm run scores.parquet --engine dask --out dask-out       # the Dask engine reads Parquet only
"""


def _add_paired_options(run: argparse.ArgumentParser) -> None:
    paired = run.add_argument_group(
        "paired comparisons (per-sample inputs; docs/paired.md)"
    )
    paired.add_argument(
        "--paired",
        action="store_true",
        help="compare every pair of variants adjacent in rank (by the average and each benchmark) on the items both answered; write paired.parquet and the groups no test separates",
    )
    add_paired_test_options(paired)


def _add_engine_options(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--no-subtasks",
        dest="subtasks",
        action="store_false",
        help="skip subtasks.parquet: read only what the benchmark scores need (faster for big recomputes)",
    )
    run.add_argument(
        "--engine",
        choices=_ENGINES,
        default=DEFAULTS.engine,
        help=(
            "stream: batches folded into exact partial sums as they are read, "
            "subtasks.parquet written as they come (in input order), in bounded "
            "memory for inputs larger than RAM (--workers with --no-subtasks); "
            "memory: the same, subtasks.parquet held and written sorted by "
            "benchmark, variant and subtask; dask: on a Dask cluster, Parquet inputs only, no "
            "subtasks.parquet (extra 'dask'; see --scheduler); auto: stream, or "
            "memory with --extra-columns keep (default: %(default)s)"
        ),
    )
    run.add_argument(
        "--workers",
        type=int,
        metavar="N",
        default=DEFAULTS.workers,
        help="with the stream engine and --no-subtasks: processes summing Parquet row groups (default: %(default)s; a run that spills, see --sum-memory, sums in one)",
    )
    run.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="with --engine dask: the scheduler, e.g. tcp://host:8786 (default: a local cluster)",
    )
    run.add_argument(
        "--scheduler-timeout",
        type=float,
        metavar="SECONDS",
        help="with --scheduler: how long to try to reach it before giving up "
        "(default: Dask's distributed.comm.timeouts.connect, 30 s)",
    )
    run.add_argument(
        "--sum-memory",
        type=float,
        metavar="GIB",
        default=DEFAULTS.sum_memory,
        help=(
            "with the stream engine: memory the exact sums may take (default: "
            "%(default)s GiB); a larger input spills its sums to a temporary folder "
            "(TMPDIR; 5-7 bytes per input row) and is summed a partition of the variants at a time"
        ),
    )
    run.add_argument(
        "--batch-rows",
        type=int,
        metavar="N",
        help="with --engine stream: rows per batch (default: each Parquet row group)",
    )


def _add_metadata_options(run: argparse.ArgumentParser) -> None:
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
    run.add_argument(
        "--model-map",
        metavar="FILE",
        help="for a suite's pairwise benchmark: a table arena_name, model (CSV/JSONL/Parquet) renaming the battles' models to the results' names",
    )


def _add_nightly_options(run: argparse.ArgumentParser) -> None:
    nightly = run.add_argument_group(
        "nightly runs (exit 0: ran, no file rejected, no health check failed; with --health and "
        "fewer models than a check needs, nothing is checked and the summary says "
        "'health not checked'; 7: ran, a health check failed or a file was rejected)"
    )
    nightly.add_argument(
        "--cache",
        metavar="DIR",
        help="parse cache for results files: parse only new or changed ones; a bad file is rejected, not fatal",
    )
    nightly.add_argument(
        "--full",
        dest="full_rebuild",
        action="store_true",
        help="with --cache: ignore its contents and rebuild it",
    )
    nightly.add_argument(
        "--report",
        metavar="FILE",
        help="write a JSON run report for the scheduler (inputs, models, warnings, health, timings), also when the run fails",
    )
    nightly.add_argument(
        "--health",
        action="store_true",
        help="check every benchmark and subtask (see `lbnorm health`), write health.parquet, exit 7 if a check fails",
    )
    nightly.add_argument(
        "--health-config",
        metavar="FILE",
        help="with --health: the checks' thresholds (TOML; see `lbnorm health --help`)",
    )
    nightly.add_argument(
        "--intervals",
        action="store_true",
        help="95%% interval on each average, rank range and tie group from the subtasks' stderr; write intervals.parquet",
    )
    nightly.add_argument(
        "--comparability",
        action="store_const",
        const="report",
        default=DEFAULTS.comparability,
        help="results files: compare the settings each score was run with (few-shot count, sample limit, task and harness versions; a setting recorded as null or not at all is one too) and name the variants that differ from the majority (summary, catalog, manifest; `lbnorm health`); the default",
    )
    nightly.add_argument(
        "--strict-comparability",
        dest="comparability",
        action="store_const",
        const="strict",
        default=DEFAULTS.comparability,
        help="as --comparability, and a difference is an error (exit 4)",
    )
    nightly.add_argument(
        "--no-comparability",
        dest="comparability",
        action="store_const",
        const="off",
        default=DEFAULTS.comparability,
        help="do not compare the results files' settings (they are read in the same pass either way)",
    )


def _cmd_run(args: argparse.Namespace) -> int:
    """Read, normalize, write, summarise (and, for a nightly run, check and report)."""
    from lbnorm.faces.terminal import format_summary

    options = options_of(RunOptions, args)
    if options.workers > 2:
        from lbnorm.engines.workers import most_workers

        if options.workers > (most := most_workers()):
            print(
                f"note: --workers {options.workers} is more than the {most} cores "
                f"this run may use; it sums in {most} processes",
                file=sys.stderr,
            )
    started = time.perf_counter()
    monitored: MonitoredRun | None = None
    with _progress(args) as bar:
        if options.is_monitored:
            from lbnorm.nightly import run_monitored

            monitored = run_monitored(
                args.inputs,
                out=args.out,
                suite=args.suite,
                options=options,
                progress=bar,
            )
            result = monitored.result
        else:
            from lbnorm.pipeline import run

            result = run(
                args.inputs,
                suite=args.suite,
                out=args.out,
                options=options,
                progress=bar,
            )
    code = ExitCode.OK if monitored is None else int(monitored.report["exit_code"])
    if args.quiet:
        return code
    seconds = (
        time.perf_counter() - started
        if monitored is None
        else monitored.report["timings_s"]["total"]
    )
    print(format_summary(result, out=args.out, top=args.top, seconds=seconds))
    if result.paired_output is not None:
        from lbnorm.faces.terminal import format_paired_summary

        print(format_paired_summary(result, alpha=options.paired_alpha))
    if monitored is not None:
        _print_nightly(args, monitored)
    if options.exclude_flagged:
        _print_flagged(result.leaderboard_table)
    return code


def _cmd_convert(args: argparse.Namespace) -> int:
    """Read the inputs and write them as one Parquet scores table."""
    from lbnorm.pipeline import convert

    with _progress(args) as bar:
        rows, files = convert(args.inputs, out=args.out, suite=args.suite, progress=bar)
    if not args.quiet:
        print(f"wrote {args.out} ({rows:,} scores from {files:,} input file(s))")
    return ExitCode.OK


def _progress(
    args: argparse.Namespace,
) -> contextlib.AbstractContextManager[ProgressBar | None]:
    """The progress bar on stderr (closed when the block ends), or None: quiet, no terminal."""
    from lbnorm.faces.progress import progress_bar

    return progress_bar(sys.stderr, quiet=args.quiet) or contextlib.nullcontext()


def _print_nightly(args: argparse.Namespace, monitored: MonitoredRun) -> None:
    """What a nightly run adds to the summary: the cache, rejections, checks, report."""
    report = monitored.report
    inputs = report["inputs"]
    if args.cache:
        cache = inputs["cache"] or {}
        print(
            f"cache      {args.cache}: {inputs['parsed']:,} parsed, {inputs['cached']:,} cached, "
            f"{inputs['rejected']:,} rejected, {cache.get('dropped', 0):,} dropped"
            + (f"; rebuilt ({cache['rebuild_reason']})" if cache.get("rebuilt") else "")
        )
    for line in _rejected_lines(inputs["rejected_files"], report=args.report):
        print(line)
    if "intervals" in monitored.tables:
        from lbnorm.analysis.render import format_intervals  # a frame: pandas is here

        print("\n" + format_intervals(monitored.tables["intervals"], top=args.top))
    if report["health"].get("reason"):  # nothing checked: not "healthy", and why
        print(f"health     not checked ({report['health']['reason']})")
    elif "health" in monitored.tables:
        from lbnorm.analysis.render import format_health

        print("\n" + format_health(monitored.tables["health"]))
    if args.report:
        print(
            f"report     {args.report}: {report['status']}, exit {report['exit_code']}"
        )


#: Rejected files the summary names (each with its variant); the report and the
#: manifest list every one.
_REJECTED_SHOWN = 10


def _rejected_lines(
    rejected: Sequence[Mapping[str, Any]], *, report: str | None
) -> list[str]:
    """Each rejected file (the first few) and the variant lost with it, or kept.

    Examples:
        >>> for line in _rejected_lines([{"path": "t/o/m/r.json", "reason": "bad",
        ...     "model": "o/m", "precision": "bfloat16", "revision": "", "chat_template":
        ...     False, "variant_from": "file", "other_files": 0, "lost": True}], report=None):
        ...     print(line)
        rejected   t/o/m/r.json: bad
        lost       o/m (bfloat16): no other results file holds this variant, so it is not on the board
    """
    from lbnorm.faces.terminal import printable
    from lbnorm.readers import describe_variant

    lines = []
    for record in rejected[:_REJECTED_SHOWN]:
        lines.append(f"rejected   {_rejection(record['path'], record['reason'])}")
        if record.get("lost") is None:  # no cache entry named it, or unknown
            continue
        variant = printable(describe_variant(record), keep_newlines=False)
        others = int(record.get("other_files") or 0)
        lines.append(
            f"lost       {variant}: no other results file holds this variant, so it "
            "is not on the board"
            if record["lost"]
            else f"kept       {variant}: still on the board from {others:,} other "
            f"results file{'' if others == 1 else 's'}"
        )
    if len(rejected) > _REJECTED_SHOWN:
        n_lost = len({describe_variant(r) for r in rejected if r.get("lost")})
        where = (
            f"{report} lists every one"
            if report
            else 'manifest.json lists every one: "rejected"'
        )
        lines.append(
            f"rejected   and {len(rejected) - _REJECTED_SHOWN:,} more file(s) "
            f"({n_lost:,} variant(s) lost in all; {where})"
        )
    return lines


def _rejection(path: str, reason: str | None) -> str:
    """A rejected file and why, naming the file once (reasons start with it).

    Examples:
        >>> _rejection("a/r.json", "a/r.json: not valid JSON (line 1).")
        'a/r.json: not valid JSON (line 1).'
        >>> _rejection("a/r.json", "truncated")
        'a/r.json: truncated'
    """
    from lbnorm.faces.terminal import printable

    reason = (reason or "").strip()
    if not reason.startswith(path):
        reason = f"{path}: {reason}" if reason else path
    return printable(reason, keep_newlines=False)


def _print_flagged(leaderboard: pa.Table) -> None:
    from lbnorm.core import arrow
    from lbnorm.engines.metadata import flag_mask
    from lbnorm.faces.terminal import printable

    # (a numpy mask made an Arrow array first: pyarrow would probe pandas for it)
    flagged = leaderboard.filter(arrow.array(flag_mask(leaderboard, "flagged")))
    names = [
        printable(f"{model} ({precision})")
        for model, precision in zip(
            flagged["model"].to_pylist(), flagged["precision"].to_pylist(), strict=True
        )
    ]
    print(
        f"flagged    {len(names):,} variant(s) excluded from ranks"
        + (f": {', '.join(names)}" if names else "")
    )
