"""``lbnorm suites``: list the built-in suites, or show one (as a table or its TOML)."""

from __future__ import annotations

import argparse

from lbnorm.cli.arguments import Commands
from lbnorm.core.errors import ExitCode, OptionsError

__all__ = ["register"]


def register(commands: Commands) -> None:
    """Register ``suites``."""
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


def _cmd_suites(args: argparse.Namespace) -> int:
    from lbnorm.suites import builtin_suite_names, load_suite

    if args.action == "list":
        names = builtin_suite_names()
        width = max(len(name) for name in names)
        for name in names:
            suite = load_suite(name)
            n_subtasks = sum(len(b.subtasks) for b in suite.benchmarks)
            print(
                f"{name:<{width}} {len(suite.benchmarks)} benchmarks, {n_subtasks:>3} subtasks  {suite.description}"
            )
        return ExitCode.OK
    if not args.name:
        msg = "`lbnorm suites show` needs a suite name.\nHint: `lbnorm suites` lists them."
        raise OptionsError(msg)
    suite = load_suite(args.name)
    if args.toml:
        print(suite.text, end="")
        return ExitCode.OK
    from lbnorm.faces.terminal import format_suite

    print(format_suite(suite))
    return ExitCode.OK
