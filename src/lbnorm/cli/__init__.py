"""The ``lbnorm`` command line: ``main(argv) -> exit code``.

One module per command group, each registering its commands and defining each
of its options once: :mod:`~lbnorm.cli.run` (``run``), :mod:`~lbnorm.cli.suites`
(``suites``), :mod:`~lbnorm.cli.changes` (``diff``, ``impact``, ``health``) and
:mod:`~lbnorm.cli.analysts` (``query``, ``show``, ``compare``, ``report``); the
options several commands share are in :mod:`~lbnorm.cli.arguments`. The commands
load what they need when they run, so ``lbnorm --help`` loads no pandas.

Exit codes are :class:`lbnorm.core.errors.ExitCode`. Errors print
``lbnorm: error: <message>`` on stderr, without a traceback; bugs keep theirs.

Signals: importing this module loads almost nothing, and :func:`main` loads the
commands itself, so a Ctrl-C at any moment of a command, its imports included,
ends it with one line and exit 130. SIGTERM is handled like Ctrl-C (the staging
folder is removed, the previous output left as it was) and exits 143. Either
message says truly whether a new output is in place.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from lbnorm.core.errors import EXIT_CODES_HELP, ExitCode, LbnormError, Terminated
from lbnorm.core.faults import fault_point

if TYPE_CHECKING:
    import argparse
    from pathlib import Path
    from types import FrameType

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
        The exit code (see :class:`lbnorm.core.errors.ExitCode`).
    """
    _one_blas_thread()
    _system_allocator_for_arrow()
    replaced_before = len(_replaced_outputs())
    restore = _handle_sigterm()
    try:
        code = _run_command(argv)
        if argv is None:  # the process's own command line: done, it exits now
            _exit_done(code)
        return code
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Terminated)
        code = _interrupted(exc, _replaced_outputs()[replaced_before:])
        if argv is None:  # the process's own command line: it exits now
            _exit_now(code)
        return code
    finally:
        restore()
        if argv is None:  # the process's own command line: it exits next
            _ignore_signals()


def _one_blas_thread() -> None:
    """Keep OpenBLAS (numpy's matrix products) to one thread, unless the user set it.

    Only before numpy is first imported, which is when OpenBLAS reads it: a
    command's own process. lbnorm runs its own threads and worker processes; its
    products are small (a pooled benchmark's weights, a ratings fit's systems),
    and a second OpenBLAS thread busy-waits ~0.1 s of a core after the import
    and after each product. Measured on 2 cores: 0.1 s less CPU per command
    (the bundled demo's 0.32 -> 0.22 s, the 20M-row run's 3.65 -> 3.49 s) in
    the same wall time, and Bradley-Terry with 1,000 bootstrap rounds on 2M
    battles 3% faster. Ratings no longer change in their last digits (~1e-13)
    with the number of cores: OpenBLAS splits a system's sums by thread.
    """
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _system_allocator_for_arrow() -> None:
    """Have Arrow allocate with the system allocator, unless the user chose one.

    Only before pyarrow is first imported, as for OpenBLAS: a command's own
    process (and the workers it forks or starts). Arrow's default allocator
    (mimalloc) touches more fresh memory on its first use than the data needs:
    reading the bundled demo's one row group (13 MB allocated) grew the process
    44 MB against 19 MB with the system allocator, and took 16 ms against
    11 ms. Fresh pages are slow on shared machines, and a one-shot command pays
    for every page it touches: against the previous commit, in alternated runs,
    the bundled demo took 0.240 -> 0.229 s (median of 20; its slowest quarter
    0.253 -> 0.239 s, peak 205 -> 142 MB), M 0.813 -> 0.761 s (10), L40
    x0.967 with two tables and x0.973 with three (5 and 8; its peak 150 MB
    higher: Arrow's freed buffers join numpy's on the heap a run that does not
    spill keeps, :func:`lbnorm._runtime.keep_freed_memory`); the 4,576-file tree,
    OOC100 and the per-sample table within 2%, OOC40 x0.97 with a peak
    70-100 MB lower (a spilled run trims that heap between its phases).
    """
    if "pyarrow" not in sys.modules:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def _exit_now(code: int) -> None:
    """End the process with `code` after an interruption was handled and reported.

    CPython (3.11) ends the process by SIGINT, whatever the exit code, once a
    KeyboardInterrupt has left an ``exec`` of source text (a dataclass or a
    named tuple being made while a module is imported), even when lbnorm then
    handled it: the caller would see "killed by SIGINT" after lbnorm said the
    previous output is unchanged. The staging folder and any workers were
    cleaned up as the exception unwound; the atexit handlers run here (a spilled
    run's temporary folder is removed by one); only the interpreter's own
    teardown is skipped.
    """
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _exit_done(code: int) -> None:
    """End the process after its command finished, without the interpreter's teardown.

    Freeing every module object by object (numpy, pyarrow and the rest) took ~30 ms
    of a 0.3 s run at the real size, and decides nothing: every output is written,
    synced and swapped in by now. What exit still owes is done here: the atexit
    handlers (Dask's local cluster, logging), the threads still running (none,
    normally: then the ordinary exit joins them) and flushing stdout and stderr, whose
    failure gives Python's own exit code 120.
    """
    _ignore_signals()  # as the ordinary exit below would, first
    if any(
        thread.is_alive() and not thread.daemon
        for thread in threading.enumerate()
        if thread is not threading.main_thread()
    ):
        return  # let Python join them
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = code or 120
    os._exit(code)


def _ignore_signals() -> None:
    """Ignore Ctrl-C and SIGTERM while the process exits: its outcome is decided.

    Python restores their default actions when it finalizes; a signal then
    would kill the process after the output was written or the interruption
    reported, with an exit status that says neither.
    """
    for number in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(number, signal.SIG_IGN)
        except ValueError:  # not the main thread: not ours to handle
            return


def _run_command(argv: Sequence[str] | None) -> int:
    fault_point("starting")  # signal tests: LBNORM_FAULT_POINT (lbnorm.core.faults)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    try:
        return int(args.handler(args))
    except LbnormError as exc:
        from lbnorm.faces.terminal import printable

        print(
            f"lbnorm: error: {printable(str(exc), keep_newlines=True)}", file=sys.stderr
        )
        return exc.exit_code
    except BrokenPipeError:  # `lbnorm query ... | head`: the reader left, not an error
        _silence_stdout()
        return ExitCode.OK
    except OSError as exc:  # a full disk under a redirected stdout, say
        if not _stdout_fails():
            raise  # not standard output's: a bug, shown as one
        _silence_stdout()
        print(
            f"lbnorm: error: cannot write to standard output: {exc.strerror or exc}; "
            "files the command wrote are complete.\n"
            "Hint: free space where standard output goes, or add --quiet.",
            file=sys.stderr,
        )
        return ExitCode.OUTPUT


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


def _handle_sigterm() -> Callable[[], None]:
    """Turn SIGTERM into :class:`Terminated` for this call; return the undoing."""
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: signals are not ours to handle
        return lambda: None
    interrupt = signal.getsignal(signal.SIGINT)

    def restore() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        if interrupt is not None:
            signal.signal(signal.SIGINT, interrupt)

    return restore


def _terminate(number: int, frame: FrameType | None) -> None:
    raise Terminated


def _interrupted(exc: KeyboardInterrupt, replaced: Sequence[Path]) -> int:
    """Say what an interruption left, truly; return its exit code."""
    for number in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C: no traceback
        try:
            signal.signal(number, signal.SIG_IGN)
        except ValueError:  # not the main thread
            break
    is_terminated = isinstance(exc, Terminated)
    state = (
        f"the new output is in place in {replaced[-1]}"
        if replaced
        else "the previous output is unchanged"
    )
    word = "terminated" if is_terminated else "interrupted"
    print(f"lbnorm: {word}; {state}.", file=sys.stderr)
    return ExitCode.TERMINATED if is_terminated else ExitCode.INTERRUPTED


def _replaced_outputs() -> tuple[Path, ...]:
    """The outputs this process swapped in (none if the writer was never loaded)."""
    writer = sys.modules.get("lbnorm.output.writer")  # importing it here costs pandas
    if writer is None:
        return ()
    return cast("tuple[Path, ...]", writer.replaced_outputs())


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command and option."""
    import argparse

    from lbnorm.cli import analysts, arena, changes, run, suites
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
    return parser
