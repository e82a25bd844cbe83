"""The options several commands share, defined once, and what they build.

``run`` and ``impact`` take the same data policies; every command that writes
a file checks its folder the same way. :func:`run_options` turns parsed
arguments into the one :class:`~lbnorm.core.options.RunOptions` the pipeline takes.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

from lbnorm.core.errors import ExitCode, OutputError
from lbnorm.core.options import (
    ExtraColumns,
    MissingPolicy,
    RunOptions,
    UnknownSubtasks,
)

__all__ = [
    "add_inputs",
    "add_policy_options",
    "check_parent",
    "run_options",
]


#: Where the help's defaults come from: the options a Python caller gets.
_DEFAULTS = RunOptions()


def add_inputs(parser: argparse.ArgumentParser) -> None:
    """The INPUT arguments (score files or results directories; none: the demo)."""
    parser.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="score files or results directories (default: the bundled demo)",
    )


def add_policy_options(parser: argparse.ArgumentParser) -> None:
    """The data policies shared by ``run`` and ``impact``."""
    parser.add_argument(
        "--missing",
        choices=get_args(MissingPolicy),
        default=_DEFAULTS.missing,
        help="variants lacking a subtask or benchmark: exclude = no score and no rank for what is incomplete (the leaderboard's rule); partial = average what is present; zero = count it as 0 (default: %(default)s)",
    )
    parser.add_argument(
        "--unknown",
        choices=get_args(UnknownSubtasks),
        default=_DEFAULTS.unknown,
        help="rows whose subtask the suite lacks: error or ignore (default: %(default)s)",
    )
    parser.add_argument(
        "--extra-columns",
        choices=get_args(ExtraColumns),
        default=_DEFAULTS.extra_columns,
        help="table columns outside the contract: error, keep (carried into subtasks.parquet) or drop (default: %(default)s)",
    )


def run_options(args: argparse.Namespace) -> RunOptions:
    """The :class:`RunOptions` of parsed arguments (fields the command lacks default)."""
    given = {
        name: getattr(args, name)
        for name in RunOptions.__dataclass_fields__
        if hasattr(args, name)
    }
    if "rank_within" in given:
        given["rank_within"] = tuple(given["rank_within"])
    return RunOptions(**given)


def check_parent(name: str) -> None:
    """Fail early (before any work) when a file's folder does not exist.

    Raises:
        OutputError: The folder is missing.
    """
    if not Path(name).resolve().parent.is_dir():
        msg = f"{name}: cannot write: its directory does not exist.\nHint: check that the directory exists and is writable."
        raise OutputError(msg)


def emit_diff(
    args: argparse.Namespace, tables: Mapping[str, Any], text: str, *, stem: str
) -> int:
    """Print a diff (or write it to ``--markdown``), and add its tables to ``--out``.

    Args:
        args: The command's arguments (``out``, ``markdown``).
        tables: The diff's tables by file stem (frames or Arrow tables).
        text: The diff as Markdown, printable as it is.
        stem: How the table files are named, for the message (``diff_``).

    Returns:
        The exit code.
    """
    from lbnorm.output.writer import (  # (Arrow, Parquet)
        add_tables,
        write_bytes_atomically,
    )

    if args.out:
        add_tables(Path(args.out), tables)
    if args.markdown:
        write_bytes_atomically(Path(args.markdown), (text + "\n").encode())
        print(
            f"wrote {args.markdown}"
            + (f" and {args.out}/{stem}*.parquet" if args.out else "")
        )
    else:
        print(text)
    return ExitCode.OK
