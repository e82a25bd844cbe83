"""The ``lbnorm`` command line: ``main(argv) -> exit code``, one ``_cmd_<name>`` each.

Exit codes: 0 success; 1 other lbnorm error; 2 usage error; 3 bad suite; 4 bad
input file; 5 scores failed validation; 6 output not writable; 130 interrupted.
Errors print ``lbnorm: error: <message>`` on stderr, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import get_args

from lbnorm.errors import LbnormError
from lbnorm.kernel import MissingPolicy
from lbnorm.readers.tables import ExtraColumns
from lbnorm.validate import UnknownSubtasks

__all__ = ["main"]

_EPILOG = """\
exit codes:
  0  success               4  an input file is unreadable or malformed
  1  other lbnorm error    5  scores failed validation (every failure listed)
  2  usage error           6  the output directory cannot be written
  3  the suite is invalid  130 interrupted

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
        print(f"lbnorm: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("lbnorm: interrupted; the previous output is unchanged.", file=sys.stderr)
        return 130


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
    run.add_argument(
        "--missing",
        choices=get_args(MissingPolicy),
        default="exclude",
        help="variants lacking a subtask or benchmark: exclude = no score and no rank for what is incomplete (the leaderboard's rule); partial = average what is present; zero = count it as 0 (default: %(default)s)",
    )
    run.add_argument(
        "--unknown",
        choices=get_args(UnknownSubtasks),
        default="error",
        help="rows whose subtask the suite lacks: error or ignore (default: %(default)s)",
    )
    run.add_argument(
        "--extra-columns",
        choices=get_args(ExtraColumns),
        default="error",
        help="table columns outside the contract: error, keep (carried into subtasks.parquet) or drop (default: %(default)s)",
    )
    run.add_argument(
        "--top",
        type=int,
        default=10,
        help="rows of the leaderboard to print (default: %(default)s)",
    )
    run.add_argument("--quiet", action="store_true", help="print nothing on success")
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


def _cmd_run(args: argparse.Namespace) -> int:
    from lbnorm.pipeline import run  # pandas loads here, not for --help

    started = time.perf_counter()
    result = run(
        args.inputs,
        suite=args.suite,
        out=args.out,
        missing=args.missing,
        unknown=args.unknown,
        extra_columns=args.extra_columns,
    )
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
    return 0


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


def _add_change_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the commands for baseline changes and nightly runs."""


# --- analysts: query, show, compare, report ------------------------------------------


def _add_analyst_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the commands analysts use on an output directory."""
