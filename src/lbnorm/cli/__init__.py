"""The ``lbnorm`` command line: ``main(argv) -> exit code``.

One module per command group, each registering its commands and defining each
of its options once: :mod:`~lbnorm.cli.run` (``run``), :mod:`~lbnorm.cli.suites`
(``suites``), :mod:`~lbnorm.cli.changes` (``diff``, ``impact``, ``health``) and
:mod:`~lbnorm.cli.analysts` (``query``, ``show``, ``compare``, ``report``); the
options several commands share are in :mod:`~lbnorm.cli.arguments`. The commands
load what they need when they run, so ``lbnorm --help`` loads no pandas.

Exit codes are :class:`lbnorm.core.errors.ExitCode`. Errors print
``lbnorm: error: <message>`` on stderr, without a traceback; bugs keep theirs.

Signals: Ctrl-C ends a command with one line and exit 130, SIGTERM the same
way with exit 143; the staging folder is removed and the previous output left
as it was, and the line says truly whether a new output is in place. Neither
raises where it lands: the command line holds both for the whole command
(:func:`lbnorm._runtime.take_signals`), and the run stops where it next checks
(see :mod:`lbnorm._runtime`).

Process-wide settings (one OpenBLAS thread, Arrow's system allocator, glibc
keeping freed memory, the signal handlers, the fast exit) belong to the
``lbnorm`` command's own process: :func:`console_main` makes them and then runs
:func:`main`. :func:`main` called from Python leaves ``os.environ``, the signal
handlers and the allocator as it found them.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from lbnorm import _runtime
from lbnorm.core import faults
from lbnorm.core.errors import (
    EXIT_CODES_HELP,
    ExitCode,
    LbnormError,
    Terminated,
    memory_failure,
)

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

__all__ = ["console_main", "main"]

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

    Ctrl-C and SIGTERM set a flag while the command runs (in the main thread);
    their handlers are put back as they were when it returns, before the flag
    is read for the last time, so a signal at any moment is acted on.

    Args:
        argv: Arguments without the program name; defaults to ``sys.argv[1:]``.

    Returns:
        The exit code (see :class:`lbnorm.core.errors.ExitCode`).
    """
    return _main(argv, [])


def _main(argv: Sequence[str] | None, parsed: list[argparse.Namespace]) -> int:
    """:func:`main`; `parsed` gets the command's arguments once they are known."""
    replaced_before = len(_replaced_outputs())
    faults.arm(os.environ.get("LBNORM_FAULT_POINT"))  # the crash tests' switch
    let_go = _runtime.take_signals()
    try:
        code = _run_command(argv, parsed)
        _runtime.check_cancelled()  # a signal the command finished before acting on
    except KeyboardInterrupt as exc:  # Ctrl-C (Cancelled), or SIGTERM (Terminated)
        let_go()
        return _interrupted(exc, parsed, since=replaced_before)
    except Exception as exc:
        let_go()
        if (failure := memory_failure(exc)) is None:
            raise  # a bug: its traceback
        return _out_of_memory(exc, failure, _replaced_outputs()[replaced_before:])
    except BaseException:
        let_go()
        raise
    number = let_go()  # a signal after the last look: on the flag, or the caller's
    if number:
        return _interrupted(
            _runtime.cancellation(number), parsed, since=replaced_before
        )
    return code


def console_main() -> int:
    """The ``lbnorm`` command (and ``python -m lbnorm``): its process is lbnorm's own.

    The signals are taken first (:mod:`lbnorm.__main__`, the console script's
    entry, took them before loading this module), so that a Ctrl-C from here on
    ends the command with one line; then the process-wide settings a one-shot
    command wants, which :func:`main` from Python leaves alone; then
    :func:`main`, and the exit without the interpreter's teardown.

    Returns:
        The exit code, if threads still run and Python's own exit must join them.
    """
    _runtime.take_signals(exit_at_once=True)  # for the process's life
    _one_blas_thread()
    _system_allocator_for_arrow()
    _runtime.allow_keeping_freed_memory()
    parsed: list[argparse.Namespace] = []
    code = _main(None, parsed)
    # the outcome is decided: a signal since main's last look
    late = _runtime.ignore_signals()
    if late and code not in {ExitCode.INTERRUPTED, ExitCode.TERMINATED}:
        code = _interrupted(_runtime.cancellation(late), parsed)
    return _exit_done(code)


def _one_blas_thread() -> None:
    """Keep OpenBLAS (numpy's matrix products) to one thread, unless the user set it.

    Only before numpy is first imported, which is when OpenBLAS reads it: a
    command's own process. lbnorm runs its own threads and worker processes; its
    products are small (a pooled benchmark's weights, a ratings fit's systems),
    and a second OpenBLAS thread busy-waits a share of a core after the import
    and after each product. Ratings then do not change in their last digits
    (~1e-13) with the number of cores: OpenBLAS splits a system's sums by thread.
    """
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _system_allocator_for_arrow() -> None:
    """Have Arrow allocate with the system allocator, unless the user chose one.

    Only before pyarrow is first imported, as for OpenBLAS: a command's own
    process (and the workers it forks or starts). Arrow's default allocator
    (mimalloc) touches more fresh memory on its first use than the data needs,
    and a one-shot command pays for every page it touches; with the system
    allocator, Arrow's freed buffers also join numpy's on the heap a run that
    does not spill keeps (:func:`lbnorm._runtime.keep_freed_memory`).
    """
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def _exit_done(code: int) -> int:
    """End the process after its command finished, without the interpreter's teardown.

    Freeing every module object by object (numpy, pyarrow and the rest) takes a
    noticeable share of a short run, and decides nothing: every output is
    written, synced and swapped in by now (or, after an interruption, the
    staging folder and any workers were cleaned up as the run unwound). What
    exit still owes is done here: the atexit handlers (Dask's local cluster,
    logging, a spilled run's temporary folder), the threads still running (none,
    normally: then the ordinary exit joins them) and flushing stdout and stderr
    (:func:`_flushed`).

    An interrupted command always ends here: CPython (3.11) ends the process by
    SIGINT, whatever the exit code, once a KeyboardInterrupt has left an ``exec``
    of source text (a dataclass or a named tuple being made while a module is
    imported), even when lbnorm then handled it (a second Ctrl-C, in a library
    call, raises where it lands): the caller would see "killed by SIGINT" after
    lbnorm said the previous output is unchanged.

    Returns:
        The exit code, when threads still run and Python's own exit must join them.
    """
    _runtime.ignore_signals()  # as the ordinary exit below would, first
    is_interrupted = code in {ExitCode.INTERRUPTED, ExitCode.TERMINATED}
    if not is_interrupted and any(
        thread.is_alive() and not thread.daemon
        for thread in threading.enumerate()
        if thread is not threading.main_thread()
    ):
        return _flushed(code)  # let Python join them
    atexit._run_exitfuncs()
    os._exit(_flushed(code))


def _flushed(code: int) -> int:
    """The exit code once stdout and stderr are flushed: `code`, unless stdout failed.

    Standard output not on a terminal is buffered (without ``PYTHONUNBUFFERED``):
    what a command printed may first be written here, so a full disk under it
    fails here, and is the same error as a write failing in the command (one
    line, exit 6); a reader that left (``| head``) is no error, as there. A
    command that failed keeps its own code and message; stderr failing gives
    Python's own code, 120. Only in the command's own process: :func:`main`
    called from Python leaves the caller's streams to the caller.
    """
    try:
        sys.stdout.flush()
    except OSError as exc:
        _silence_stdout()  # (Python's own exit flushes it again, should it run)
        if code == ExitCode.OK and not isinstance(exc, BrokenPipeError):
            code = _cannot_write_stdout(exc)
    except ValueError:  # closed
        code = code or 120
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        code = code or 120
    return code


def _run_command(argv: Sequence[str] | None, parsed: list[argparse.Namespace]) -> int:
    from lbnorm.cli.arguments import check_written_files

    faults.fault_point("starting")  # signal tests (lbnorm.core.faults)
    _runtime.check_cancelled()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    except LbnormError as exc:  # an option's value out of range (cli.arguments.Whole)
        return _error(exc)
    parsed.append(args)
    _runtime.check_cancelled()  # (the commands' imports take a moment)
    try:
        check_written_files(args)  # before the command's work, not after
        return int(args.handler(args))
    except LbnormError as exc:
        _runtime.check_cancelled()  # an error while the run stopped: the signal's
        if memory_failure(exc) is not None:
            raise  # (named as what it is by main)
        return _error(exc)
    except BrokenPipeError:  # `lbnorm query ... | head`: the reader left, not an error
        _silence_stdout()
        return ExitCode.OK
    except OSError as exc:  # a full disk under a redirected stdout, say
        if memory_failure(exc) is not None or not _stdout_fails():
            raise  # not standard output's: out of memory (main), or a bug
        _silence_stdout()
        return _cannot_write_stdout(exc)


def _cannot_write_stdout(exc: OSError) -> int:
    """Say that standard output could not be written (the files are complete); exit 6."""
    print(
        f"lbnorm: error: cannot write to standard output: {exc.strerror or exc}; "
        "files the command wrote are complete.\n"
        "Hint: free space where standard output goes, or add --quiet.",
        file=sys.stderr,
    )
    return ExitCode.OUTPUT


def _error(exc: LbnormError) -> int:
    """Print an lbnorm error as one message (no traceback); its exit code."""
    from lbnorm.faces.terminal import printable

    print(f"lbnorm: error: {printable(str(exc), keep_newlines=True)}", file=sys.stderr)
    return exc.exit_code


def _stdout_fails() -> bool:
    """Whether standard output cannot be written (asked after an OSError).

    The failed write dropped its buffer, so a flush proves nothing: one newline
    is written straight to the descriptor. Should standard output work after all,
    the newline goes out before the traceback of the real error.
    """
    try:
        sys.stdout.flush()
        os.write(sys.stdout.fileno(), b"\n")
    except (OSError, ValueError):
        return True
    return False


def _silence_stdout() -> None:
    """Point standard output at /dev/null: no second error when Python flushes it."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _writes(parsed: list[argparse.Namespace]) -> bool:
    """Whether the command writes a file or folder (True until its arguments are known)."""
    if not parsed:
        return True
    return any(
        getattr(parsed[0], name, None) for name in getattr(parsed[0], "writes", ())
    )


def _interrupted(
    exc: KeyboardInterrupt, parsed: list[argparse.Namespace], *, since: int = 0
) -> int:
    """Say what an interruption left, truly; return its exit code.

    Args:
        exc: The interruption.
        parsed: The command's arguments, once known (:func:`_writes`).
        since: How many outputs were swapped in before the command began.
    """
    is_terminated = isinstance(exc, Terminated)
    replaced = _replaced_outputs()[since:]
    state = (
        f"; the new output is in place in {replaced[-1]}"
        if replaced
        else "; the previous output is unchanged"
        if _writes(parsed)
        else ""  # a command that writes nothing (a query) has no output to speak of
    )
    word = "terminated" if is_terminated else "interrupted"
    print(f"lbnorm: {word}{state}.", file=sys.stderr)
    return ExitCode.TERMINATED if is_terminated else ExitCode.INTERRUPTED


def _out_of_memory(
    error: BaseException, failure: BaseException, replaced: Sequence[Path]
) -> int:
    """Say that memory ran out, where, and what is in place; return exit 8.

    Numpy, Arrow, DuckDB and the interpreter each say it their own way
    (:func:`lbnorm.core.errors.memory_failure`); a reader that wrapped it says
    which file it was reading (its hint, a damaged file, is dropped). A library
    that could not be loaded is named by its own error, not lbnorm's "not
    installed".
    """
    is_said = isinstance(error, LbnormError) and not isinstance(failure, ImportError)
    said = error if is_said else failure  # (a library that could not load is there)
    what = str(said).split("\n", 1)[0].strip().rstrip(".") or "an allocation failed"
    state = (
        f"the new output is in place in {replaced[-1]}"
        if replaced
        else "no output was replaced"
    )
    message = (
        f"lbnorm: error: out of memory: {what[:300]}; {state}.\n"
        "Hint: give lbnorm more memory (ulimit -v, the container's limit), or ask "
        "for less: a lower run --sum-memory spills the sums to TMPDIR, --no-subtasks "
        "reads fewer columns, arena's --max-memory bounds its bootstrap."
    )
    try:
        print(message, file=sys.stderr)
    except MemoryError:  # (even the message: the line alone, without formatting)
        os.write(sys.stderr.fileno(), b"lbnorm: error: out of memory.\n")
    return ExitCode.MEMORY


def _replaced_outputs() -> tuple[Path, ...]:
    """The outputs this process swapped in (none if the writer was never loaded)."""
    transaction = sys.modules.get("lbnorm.output.transaction")  # loaded by a writer
    if transaction is None:
        return ()
    return cast("tuple[Path, ...]", transaction.replaced_outputs())


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command and option."""
    import argparse

    from lbnorm.cli import analysts, arena, changes, publish, run, suites
    from lbnorm.core.version import version_line

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
    parser.add_argument(
        "--version",
        action="version",
        version=version_line(),
        help="print lbnorm's version (and the git commit of a checkout) and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run.register(commands, epilog=EPILOG)
    arena.register(commands)
    suites.register(commands)
    changes.register(commands)
    analysts.register(commands)
    publish.register(commands)
    return parser
