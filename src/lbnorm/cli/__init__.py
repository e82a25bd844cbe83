"""The ``lbnorm`` command line: ``main(argv) -> exit code``.

One module per command group, each registering its commands and defining each
of its options once: :mod:`~lbnorm.cli.run` (``run``), :mod:`~lbnorm.cli.suites`
(``suites``), :mod:`~lbnorm.cli.changes` (``diff``, ``impact``, ``health``) and
:mod:`~lbnorm.cli.analysts` (``query``, ``show``, ``compare``, ``report``); the
options several commands share are in :mod:`~lbnorm.cli.arguments`. The commands
load what they need when they run, so ``lbnorm --help`` loads no pandas.

Exit codes are :class:`lbnorm.errors.ExitCode`. Errors print
``lbnorm: error: <message>`` on stderr, without a traceback; bugs keep theirs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from lbnorm.cli import analysts, changes, run, suites
from lbnorm.errors import EXIT_CODES_HELP, ExitCode, LbnormError
from lbnorm.terminal import printable

__all__ = ["main"]

_EXAMPLES = """\
examples:
  lbnorm run                                   # the bundled demo: 4,576 real models
  lbnorm run results/ --out out/               # a tree of lm-eval-harness results files
  lbnorm run scores.csv --suite my-suite.toml  # a long-format table, your own bounds
  lbnorm suites show openllm-v2 --toml > my-suite.toml   # start a suite from a built-in
"""

#: The epilog of the top-level help and of ``run``'s.
EPILOG = f"{EXIT_CODES_HELP}\n\n{_EXAMPLES}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code.

    Args:
        argv: Arguments without the program name; defaults to ``sys.argv[1:]``.

    Returns:
        The exit code (see :class:`lbnorm.errors.ExitCode`).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        return int(args.handler(args))
    except LbnormError as exc:
        print(
            f"lbnorm: error: {printable(str(exc), keep_newlines=True)}", file=sys.stderr
        )
        return exc.exit_code
    except KeyboardInterrupt:
        print("lbnorm: interrupted; the previous output is unchanged.", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except BrokenPipeError:  # `lbnorm query ... | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes
        return ExitCode.OK


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command and option."""
    parser = argparse.ArgumentParser(
        prog="lbnorm",
        description=(
            "Normalize whole LLM leaderboards: raw benchmark scores in, scores "
            "rescaled above each task's random baseline, max(0, (raw - lb) / (1 - lb)) "
            "* 100 with lb = 1/num_choices, out as Parquet."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run.register(commands, epilog=EPILOG)
    suites.register(commands)
    changes.register(commands)
    analysts.register(commands)
    return parser
