"""``lbnorm diff``, ``impact`` and ``health``: what a change did, and whether a benchmark is broken."""

from __future__ import annotations

import argparse

from lbnorm.cli.arguments import (
    Commands,
    Whole,
    add_inputs,
    add_out_tables,
    add_paired_test_options,
    add_policy_options,
    add_verify,
    emit_diff,
)
from lbnorm.core.errors import ExitCode, OptionsError
from lbnorm.core.options import DEFAULT_SUITE, RunOptions

__all__ = ["register"]

_DIFF_EPILOG = """\
exit codes:
  0   compared (whatever changed: a diff is a report, not a check)
  1   another lbnorm error
  2   usage error: an unknown option, --markdown or --out inside an output folder
  4   OLD_OUT or NEW_OUT is missing, not an lbnorm output, or damaged
  6   --out or --markdown not writable (nothing written)

examples:
  lbnorm diff yesterday-out/ today-out/                      # print what changed
  lbnorm diff yesterday-out/ today-out/ --markdown changes.md --out diff/ --quiet
  lbnorm diff yesterday-out/ today-out/ --largest 50         # longer lists of names
  lbnorm diff arena-old/ arena-out/                          # two ratings outputs
"""

_IMPACT_EPILOG = """\
exit codes:
  0   compared
  1-6 as for run (nothing done); 2 usage error

examples:
  lbnorm impact --set-bound GPQA=0.3                 # the demo, GPQA bound 0.25 -> 0.3
  lbnorm impact tests/fixtures/full_structure --suite openllm-v2 --suite my-suite.toml --out impact/
"""

_HEALTH_EPILOG = """\
exit codes:
  0   every check passed (or too few models for any check)
  7   a check failed
  1-6 as for run (nothing done); 2 usage error

examples:
  lbnorm health                                      # the demo
  lbnorm health data/published_v2_final.csv          # any table with X and "X Raw" columns
  lbnorm health lbnorm-out/ --all-subtasks           # an output folder
  lbnorm run tests/fixtures/full_structure --out out/ --cache .lbnorm-cache --report run.json --health
"""


def register(commands: Commands) -> None:
    """Register ``diff``, ``impact`` and ``health``."""
    _register_diff(commands)
    _register_impact(commands)
    _register_health(commands)


def _register_diff(commands: Commands) -> None:
    """``diff``: what changed between two output directories."""
    diff = commands.add_parser(
        "diff",
        help="what changed between two output directories",
        description=(
            "Compare two lbnorm output directories: lower bounds that changed, the delta "
            "per model and benchmark, each model's average delta and rank move, and summary "
            "figures (Kendall tau, Spearman rho, top-k overlaps, big movers, newly clipped "
            "scores, models added and removed, rank moves beyond the rank intervals whose own average moved beyond its own interval too), "
            "and the variants by name: added, removed, newly unranked (and why), the "
            "largest changes of an average and the largest rank moves. Prints Markdown; "
            "--out saves the tables as Parquet."
        ),
        epilog=_DIFF_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diff.add_argument("old", metavar="OLD_OUT", help="the reference output directory")
    diff.add_argument("new", metavar="NEW_OUT", help="the changed output directory")
    _add_diff_options(diff)
    diff.add_argument(
        "--quiet",
        action="store_true",
        help="print nothing (with --out or --markdown: write them, say nothing)",
    )
    add_verify(diff)
    _add_paired_diff_options(diff)
    diff.set_defaults(handler=_cmd_diff, adds_tables=True, writes=("out", "markdown"))


def _register_impact(commands: Commands) -> None:
    """``impact``: the same inputs under two suites, reported as ``diff`` reports."""
    impact = commands.add_parser(
        "impact",
        help="what a suite change does to the same inputs",
        description=(
            "Normalize the same inputs under two suites (--suite OLD --suite NEW, or one "
            "suite and --set-bound overrides) and report what changed, as `lbnorm diff` "
            "does. With no INPUTS, the bundled demo."
        ),
        epilog=_IMPACT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_inputs(impact)
    impact.add_argument(
        "--suite",
        action="append",
        default=[],
        help=f"old suite, then new suite (built-in name or TOML file; default: {DEFAULT_SUITE})",
    )
    impact.add_argument(
        "--set-bound",
        action="append",
        default=[],
        metavar="BENCHMARK[/SUBTASK]=LB",
        help="a lower bound for the new suite, e.g. GPQA=0.3 (repeatable)",
    )
    add_policy_options(impact)
    _add_diff_options(impact)
    impact.set_defaults(
        handler=_cmd_impact, adds_tables=True, writes=("out", "markdown")
    )


def _register_health(commands: Commands) -> None:
    """``health``: is a benchmark broken (an output, a wide table or inputs checked)."""
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
        epilog=_HEALTH_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    health.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="output directory, wide table, or inputs (default: the demo)",
    )
    health.add_argument(
        "--suite", default=DEFAULT_SUITE, help="suite for INPUTS (default: %(default)s)"
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
    health.set_defaults(handler=_cmd_health, adds_tables=True, writes=("out",))


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
        action=Whole,
        what="places",
        default=10,
        metavar="N",
        help="count models that moved more than N places (default: %(default)s)",
    )
    parser.add_argument(
        "--top",
        action=Whole,
        append=True,
        least=1,
        what="a top-K overlap's K",
        example=10,
        metavar="K",
        help="a top-K overlap to report (repeatable; default: 10, 50, 100)",
    )
    parser.add_argument(
        "--largest",
        action=Whole,
        what="rank moves to list",
        default=10,
        metavar="N",
        help="variants listed by name in each list: added, removed, newly unranked, "
        "largest changes, largest rank moves (default: %(default)s)",
    )
    parser.add_argument(
        "--no-intervals",
        dest="intervals",
        action="store_false",
        help="skip the rank intervals (faster)",
    )


def _add_paired_diff_options(diff: argparse.ArgumentParser) -> None:
    paired = diff.add_argument_group(
        "paired (the same models re-evaluated; docs/paired.md)"
    )
    paired.add_argument(
        "--paired",
        action="store_true",
        help="compare each model with itself on the items both runs answered: which benchmark moved beyond its paired noise (--out writes diff_paired.parquet)",
    )
    paired.add_argument(
        "--paired-subtasks",
        action="store_true",
        help="with --paired: a row per subtask too",
    )
    add_paired_test_options(paired)


def _cmd_diff(args: argparse.Namespace) -> int:
    from lbnorm.analysis.diff import diff_snapshots, read_snapshot
    from lbnorm.analysis.render import format_diff
    from lbnorm.core.errors import InputError
    from lbnorm.output.reader import Output

    sides: list[Output | str] = []
    for side in (args.old, args.new):  # each opened once, checked once
        try:
            sides.append(Output.open(side, verify=args.verify))
        except InputError:  # said below, by the reader of the other side's kind
            sides.append(side)
    is_ratings = any(
        isinstance(side, Output) and side.kind == "ratings" for side in sides
    )
    if is_ratings and not args.paired:
        from lbnorm.cli.arena import diff_ratings_outputs

        return diff_ratings_outputs(args, sides[0], sides[1])
    old, new = (Output.open(side, "leaderboard", verify=args.verify) for side in sides)
    if args.paired:  # each variant compared with itself: which benchmark moved
        from lbnorm.analysis.paired import diff_paired
        from lbnorm.faces.paired import format_paired_diff

        paired = diff_paired(
            old,
            new,
            adjust=args.paired_adjust,
            alpha=args.paired_alpha,
            subtasks=args.paired_subtasks,
        )
        text = format_paired_diff(paired, largest=args.largest)
        return emit_diff(
            args, {"diff_paired": paired.changes}, text, stem="diff_paired"
        )
    diff = diff_snapshots(
        read_snapshot(old, intervals=args.intervals),
        read_snapshot(new, intervals=args.intervals),
        moved_places=args.moved,
        top=args.top or (10, 50, 100),
    )
    return emit_diff(
        args, diff.tables(), format_diff(diff, largest=args.largest), stem="diff_"
    )


def _cmd_impact(args: argparse.Namespace) -> int:
    from lbnorm.analysis.impact import compare_suites
    from lbnorm.analysis.render import format_diff

    suites = args.suite or [DEFAULT_SUITE]
    if len(suites) > 2 or (len(suites) == 1 and not args.set_bound):
        msg = (
            "impact compares two suites: --suite OLD --suite NEW, or one --suite "
            f"(default {DEFAULT_SUITE}) and --set-bound BENCHMARK=LB.\n"
            "Hint: lbnorm impact --set-bound GPQA=0.3"
        )
        raise OptionsError(msg)
    diff = compare_suites(
        args.inputs,
        suites=suites,
        set_bounds=args.set_bound,
        intervals=args.intervals,
        moved_places=args.moved,
        top=args.top or (10, 50, 100),
        options=RunOptions(
            missing=args.missing,
            unknown=args.unknown,
            extra_columns=args.extra_columns,
        ),
    )
    on = ", ".join(args.inputs) if args.inputs else "the bundled demo"
    title = f"lbnorm impact: {diff.labels[0]} -> {diff.labels[1]} on {on}"
    text = format_diff(diff, largest=args.largest, title=title)
    return emit_diff(args, diff.tables(), text, stem="diff_")


def _cmd_health(args: argparse.Namespace) -> int:
    from lbnorm.analysis.health import HealthConfig, check_source, is_healthy
    from lbnorm.analysis.render import format_health

    config = HealthConfig.from_toml(args.config) if args.config else None
    health, title = check_source(args.sources, suite=args.suite, config=config)
    print(format_health(health, all_subtasks=args.all_subtasks, title=title))
    if args.out:
        add_out_tables(args, {"health": health})
    return ExitCode.OK if is_healthy(health) else ExitCode.UNHEALTHY
