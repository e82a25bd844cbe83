"""The options several commands share, defined once, and what they build.

``run`` and ``impact`` take the same data policies; every command that writes
a file checks its folder the same way. :func:`options_of` turns parsed
arguments into the one options object a command takes (``run``'s
:class:`~lbnorm.core.options.RunOptions`, ``arena``'s, ``export``'s).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Mapping, Sequence, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, get_args

from lbnorm.core.errors import ExitCode, OptionsError, OutputError, shown_number
from lbnorm.core.options import (
    MOST_COUNT,
    ExtraColumns,
    MissingPolicy,
    PairedAdjust,
    RunOptions,
    UnknownSubtasks,
    check_paired_alpha,
)

__all__ = [
    "DEFAULTS",
    "MOST_COUNT",
    "MOST_DIGITS",
    "Commands",
    "Whole",
    "add_digits",
    "add_inputs",
    "add_out_tables",
    "add_paired_test_options",
    "add_policy_options",
    "add_verify",
    "check_parent",
    "check_written_files",
    "command_sources",
    "emit_diff",
    "options_of",
    "print_shown",
]


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Options = TypeVar("_Options", bound="DataclassInstance")
#: What a command group registers its commands with.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

#: Where the help's defaults come from: the options a Python caller gets.
DEFAULTS = RunOptions()


#: The most decimals a number is printed with: a float64 holds 15 to 17 significant
#: digits, so more decimals print noise (``--digits 10000`` printed megabytes).
MOST_DIGITS = 17


class Whole(argparse.Action):
    """A whole-number option checked against its range while the command line is parsed.

    Out of range is a usage error (:class:`OptionsError`, exit 2) before any work:
    a 24-digit ``run --top`` overflowed Arrow's slice after the new output was
    swapped in, and ``--digits 10000`` printed megabytes. The message names the
    option, the value and the range, and gives an example (the default, or
    `example`). Text that is no whole number stays argparse's own usage error.

    Args:
        option_strings: The option's flags (argparse's).
        dest: The attribute it sets (argparse's).
        least: The smallest value taken (default 0).
        most: The largest value taken (default :data:`MOST_COUNT`, a count).
        what: What the number counts, for the message (``rows to print``).
        example: The value the hint suggests (default: the option's default).
        append: Collect the values of a repeated option into a list.
        **kwargs: argparse's (``default``, ``metavar``, ``help``).
    """

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        *,
        least: int = 0,
        most: int = MOST_COUNT,
        what: str,
        example: int | None = None,
        append: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(option_strings, dest, type=int, **kwargs)
        self.least, self.most, self.what, self.append = least, most, what, append
        self.example = self.default if example is None else example

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Check the value parsed (an ``int``) and set it, or add it to the list."""
        value = int(values)
        if not self.least <= value <= self.most:
            flag = option_string or self.dest
            msg = (
                f"{flag} {shown_number(value)}: {self.what} must be a whole number from "
                f"{self.least:,} to {self.most:,}.\nHint: e.g. {flag} {self.example}."
            )
            raise OptionsError(msg)
        if self.append:
            earlier = getattr(namespace, self.dest, None) or []
            setattr(namespace, self.dest, [*earlier, value])
        else:
            setattr(namespace, self.dest, value)


def add_digits(
    parser: argparse.ArgumentParser,
    *,
    default: int | None,
    example: int | None = None,
    help_text: str = "decimals (default: %(default)s)",
) -> None:
    """``--digits``: the decimals numbers are printed with (0 to :data:`MOST_DIGITS`)."""
    parser.add_argument(
        "--digits",
        action=Whole,
        most=MOST_DIGITS,
        what="decimals",
        example=example,
        default=default,
        help=help_text,
    )


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
        default=DEFAULTS.missing,
        help="variants lacking a subtask or benchmark: exclude = no score and no rank for what is incomplete (the leaderboard's rule); partial = average what is present; zero = count it as 0 (default: %(default)s)",
    )
    parser.add_argument(
        "--unknown",
        choices=get_args(UnknownSubtasks),
        default=DEFAULTS.unknown,
        help="rows whose subtask the suite lacks: error or ignore (default: %(default)s)",
    )
    parser.add_argument(
        "--extra-columns",
        choices=get_args(ExtraColumns),
        default=DEFAULTS.extra_columns,
        help="table columns outside the contract: error, keep (carried into subtasks.parquet) or drop (default: %(default)s)",
    )


def options_of(
    kind: type[_Options], args: argparse.Namespace, **given: Any
) -> _Options:
    """One options object of parsed arguments: each field from the option of its name.

    Fields the command lacks take their defaults; a repeatable option's list
    becomes a tuple; `given` holds the fields whose options are parsed first
    (``arena --anchor MODEL=RATING``).
    """
    for name in kind.__dataclass_fields__:
        if name not in given and hasattr(args, name):
            value = getattr(args, name)
            given[name] = tuple(value) if isinstance(value, list) else value
    return kind(**given)


class _PairedAlpha(argparse.Action):
    """``--paired-alpha``, checked to lie in (0, 1) while the command line is parsed.

    ``compare --paired`` and ``diff --paired`` build no :class:`RunOptions`, so
    the check is here, before any work, for every command that takes it
    (:func:`~lbnorm.core.options.check_paired_alpha`: exit 2, with a hint).
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        """Check the value parsed (a ``float``: its type) and set it."""
        check_paired_alpha(values)
        setattr(namespace, self.dest, values)


def add_paired_test_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
) -> None:
    """``--paired-adjust`` and ``--paired-alpha``: how paired tests are adjusted and read."""
    parser.add_argument(
        "--paired-adjust",
        choices=list(get_args(PairedAdjust)),
        default=DEFAULTS.paired_adjust,
        help="adjust the p-values across the table: holm (Holm's step-down, the family-wise error) or bh (Benjamini-Hochberg, the false discovery rate) (default: %(default)s)",
    )
    parser.add_argument(
        "--paired-alpha",
        action=_PairedAlpha,
        type=float,
        metavar="LEVEL",
        default=DEFAULTS.paired_alpha,
        help="an adjusted p-value below this separates two models (default: %(default)s)",
    )


def check_parent(name: str) -> None:
    """Fail early (before any work) when a file's folder does not exist.

    Raises:
        OutputError: The folder is missing.
    """
    if not Path(name).resolve().parent.is_dir():
        msg = f"{name}: cannot write: its directory does not exist.\nHint: check that the directory exists and is writable."
        raise OutputError(msg)


def add_verify(parser: argparse.ArgumentParser) -> None:
    """``--verify``: hash every table of the outputs read, however large."""
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check every table's sha256 against the manifest, however large "
        "(tables under 64 MiB are always checked; size and footer always)",
    )


def check_written_files(args: argparse.Namespace) -> None:
    """Check ``--markdown``, ``--html`` and ``--failures FILE`` before any work.

    Run for every command, before its handler (:func:`lbnorm.cli.main`). Such
    a file is refused inside an lbnorm output folder (the outputs the command
    reads or writes count even before they exist: ``lbnorm diff OLD NEW
    --markdown NEW/diff.md``), and where a file lbnorm did not write is
    (recognized by its first and last bytes, by the recognizer beside the code
    that writes that kind of file). ``run --report`` is checked so by the
    nightly run itself (:func:`lbnorm.nightly.run_monitored`), before its work.

    The ``--out`` folder of ``diff``, ``impact`` and ``health`` is checked as the
    transaction will check it, so a folder holding a user's files is refused
    before the work.

    Raises:
        OptionsError: A file is pointed inside an output folder (exit 2).
        OutputError: A file lbnorm did not write is there (exit 6).
    """
    outs = tuple(
        value
        for name in ("out", "old", "new")
        if isinstance(value := getattr(args, name, None), str)
    )
    for option in ("markdown", "html", "failures"):
        value = getattr(args, option, None)
        if isinstance(value, str) and value:
            from lbnorm.output.transaction import check_file  # (Arrow: when needed)

            is_ours = _recognizer(option)
            check_file(value, option=f"--{option}", is_ours=is_ours, outs=outs)
    if getattr(args, "adds_tables", False) and isinstance(args.out, str):
        from lbnorm.output.transaction import check_target

        check_target(Path(args.out))  # (diff, impact, health: refused before the work)


def _recognizer(option: str) -> Callable[[bytes, bytes], bool]:
    """How the file an option names is recognized as lbnorm's: beside the code writing it."""
    if option == "markdown":
        from lbnorm.analysis.render import is_summary

        return is_summary
    if option == "html":
        from lbnorm.faces.report_assets import is_page

        return is_page
    from lbnorm.output.writer import is_table_file  # --failures

    return is_table_file("failures")


def command_sources(args: argparse.Namespace) -> dict[str, Any]:
    """What a command's tables were computed from, for the manifest of its ``--out``.

    The command, and each path it read as given and resolved (absolute, where it
    exists); a suite file's text is embedded, so the record survives its move.
    """
    paths: dict[str, list[dict[str, Any]]] = {}
    for name in ("old", "new", "sources", "inputs", "suite", "config"):
        value = getattr(args, name, None)
        values = value if isinstance(value, list) else [value]
        given = [str(item) for item in values if isinstance(item, str | Path)]
        if given:
            paths[name] = [
                _path_record(item, is_suite=name == "suite") for item in given
            ]
    return {"command": str(getattr(args, "command", "")), "paths": paths}


def add_out_tables(args: argparse.Namespace, tables: Mapping[str, Any]) -> None:
    """Add a command's tables to its ``--out`` folder, with what they were computed from."""
    from lbnorm.output.transaction import Transaction  # (Arrow, Parquet)
    from lbnorm.output.writer import add_to
    from lbnorm.pipeline import created_at_from_environment

    with Transaction(args.out, kind=None) as transaction:
        add_to(transaction, tables, sources=command_sources(args))
        transaction.commit(created_at=created_at_from_environment())


def _path_record(given: str, *, is_suite: bool) -> dict[str, Any]:
    path = Path(given)
    record: dict[str, Any] = {"given": given}
    if path.exists():
        record["resolved"] = str(path.resolve())
        if is_suite and path.is_file():
            with (
                contextlib.suppress(OSError, UnicodeDecodeError),
                path.open("rb") as handle,  # a suite is small: at most 1 MiB kept
            ):
                record["text"] = handle.read(1 << 20).decode("utf-8")
    return record


def print_shown(
    args: argparse.Namespace,
    shown: Sized,
    selected: Sized,
    table: Sized,
    *,
    what: str,
    by: str,
) -> None:
    """``show``'s first line: how many rows of how many, the filters, the order.

    Args:
        args: The command's arguments (``where``, ``model``, ``precision``).
        shown: The rows printed.
        selected: The rows the filters kept.
        table: Every row.
        what: What a row is (``variants``, ``models``).
        by: What the rows are sorted by.
    """
    model = [f"model~{args.model}"] if args.model else []
    precision = [f"precision={args.precision}"] if args.precision else []
    said = [*args.where, *model, *precision]
    print(
        f"top {len(shown):,} of {len(selected):,} {what}"
        + (f" where {' and '.join(said)}" if said else "")
        + f", by {by}"
        + (f" ({len(table):,} in all)" if said else "")
    )


def emit_diff(
    args: argparse.Namespace, tables: Mapping[str, Any], text: str, *, stem: str
) -> int:
    """Print a diff (or write it to ``--markdown``), and add its tables to ``--out``.

    Args:
        args: The command's arguments (``out``, ``markdown``, ``quiet``: print
            nothing).
        tables: The diff's tables by file stem (frames or Arrow tables).
        text: The diff as Markdown, printable as it is.
        stem: How the table files are named, for the message (``diff_``).

    Returns:
        The exit code.
    """
    from lbnorm.analysis.render import is_summary
    from lbnorm.output.transaction import write_file

    if args.out:
        add_out_tables(args, tables)
    is_quiet = bool(getattr(args, "quiet", False))
    if args.markdown:
        data = (text + "\n").encode()
        write_file(args.markdown, data, option="--markdown", is_ours=is_summary)
        if not is_quiet:
            print(
                f"wrote {args.markdown}"
                + (f" and {args.out}/{stem}*.parquet" if args.out else "")
            )
    elif not is_quiet:
        print(text)
    return ExitCode.OK
