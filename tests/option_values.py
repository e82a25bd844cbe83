"""Every numeric option of every command, and a command line to try each on.

Shared by ``tests/test_arguments.py`` (each option's range) and
``benchmarks_perf/hostile.py`` (the hostile-values campaign): the options are
found by walking the parser, so a new one is tried as soon as it exists.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from lbnorm.cli import build_parser
from lbnorm.cli.arguments import Whole

FIXTURES = Path(__file__).parent / "fixtures"
#: Small real inputs: eight results files, and a battles table.
GOLDEN = sorted(str(path) for path in (FIXTURES / "golden").glob("*.json"))
BATTLES = str(FIXTURES / "battles" / "battles.csv")


def commands(
    parser: argparse.ArgumentParser | None = None, prefix: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Each command and subcommand (``suites show``) with its parser."""
    for action in (parser or build_parser())._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                yield f"{prefix}{name}", command
                yield from commands(command, prefix=f"{prefix}{name} ")


def numeric_options() -> Iterator[tuple[str, argparse.Action]]:
    """Each option that takes a number, with its command."""
    for name, command in commands():
        for action in command._actions:
            is_number = action.type in {int, float} or isinstance(action, Whole)
            if action.option_strings and is_number:
                yield name, action


#: Options that mean something only beside others (the value is then what is refused).
NEEDS = {
    "--scheduler-timeout": ["--engine", "dask", "--scheduler", "tcp://127.0.0.1:1"]
}


def command_line(
    command: str, board: Path, work: Path, *, option: str = ""
) -> list[str]:
    """`command` with the arguments it requires; what it writes goes to `work` / new.

    Args:
        command: A command with numeric options.
        board: An lbnorm output (of :data:`GOLDEN`) for the commands that read one.
        work: An empty folder.
        option: The option to be tried: the options it needs are added (:data:`NEEDS`).
    """
    return _required(command, board, work) + NEEDS.get(option, [])


def _required(command: str, board: Path, work: Path) -> list[str]:
    new = str(work / "new")
    return {
        "run": ["run", *GOLDEN, "--out", new],
        "arena": ["arena", BATTLES, "--out", new],
        "query": ["query", str(board), "SELECT 1.5 AS x"],
        "show": ["show", str(board)],
        "compare": ["compare", str(board), "Amu/t1-3B"],
        "report": ["report", str(board), "--html", str(work / "new.html")],
        "explain": ["explain", str(board), "Amu/t1-3B"],
        "diff": ["diff", str(board), str(board), "--out", new],
        "impact": ["impact", *GOLDEN, "--set-bound", "GPQA=0.3", "--out", new],
    }[command]
