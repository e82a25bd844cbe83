"""Both cores for the streaming engine: forked workers, one share of the input each.

Each worker is a forked copy of the running process (so it inherits the opened
inputs and the suite, and nothing is pickled on the way in). It sums its share of
the row groups into exact partial sums and sends them back through a pipe
(multiprocessing pickles them: data this process made itself, never an input);
the parent adds them up by variant key. Fixed-point sums are exact, so the result
is bit-identical to a one-process run whatever the split.

Failures stay simple: an input error in a worker is raised again in the parent;
a score that fails a check (or a duplicate across shares) makes the caller redo
the run in one process, which lists every failure with its file and row. A
worker dies with its parent (:func:`lbnorm._runtime.start_worker`), so a killed
run leaves no process behind; and a worker holds no pipe but its own, so even
where there is no parent-death signal, a worker whose parent is gone finds its
pipe closed and exits instead of waiting forever to send. A worker killed from
outside (the out-of-memory killer) is reported as a clear error.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from lbnorm._runtime import available_cores, fork, pipe, receive, start_worker
from lbnorm.core.errors import LbnormError
from lbnorm.core.faults import fault_point

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = ["most_workers", "sum_in_workers"]


_Share = TypeVar("_Share")


def most_workers() -> int:
    """Workers a run forks at most: one per core it may run on (two at least).

    More only wait for a core, each with its own copy of the sums (``--workers
    100000`` forked thousands of processes, then ran out of open files).
    """
    return max(available_cores(), 2)


def sum_in_workers(work: Callable[[int, int], _Share], workers: int) -> list[_Share]:
    """Run ``work(part, workers)`` for every part in forked processes.

    Args:
        work: Sums one share of the input: ``work(part, parts)``.
        workers: Processes to fork (at least 2; at most :func:`most_workers`).

    Returns:
        Each share's sums, in part order (the caller adds them up).

    Raises:
        LbnormError: A worker hit an input error (re-raised as it was), or was
            killed by a signal (the out-of-memory killer, say).
        RuntimeError: A worker died or failed in an unexpected way.
    """
    workers = min(workers, most_workers())  # (the command line notes the cap)
    receivers: list[Connection] = []
    processes: list[BaseProcess] = []
    parent = os.getpid()
    replies: list[tuple[str, Any]] = []
    try:
        for part in range(workers):
            receiver, sender = pipe()
            receivers.append(receiver)
            # the child closes the read ends it inherits (its own and its elder
            # siblings'): a pipe's only reader is then this process
            inherited = list(receivers)
            processes.append(
                fork(_work, work, part, workers, sender, inherited, parent)
            )
            sender.close()
        fault_point("workers-started")  # orphan tests: LBNORM_FAULT_POINT
        for part, receiver in enumerate(receivers):
            try:  # a cancelled run stops waiting here; the workers are killed below
                replies.append(receive(receiver))
            except EOFError:
                raise _died(part, workers, processes[part]) from None
    finally:
        for process in processes:
            if process.is_alive() and len(replies) < workers:
                process.kill()  # interrupted or failed: no worker outlives the run
            process.join()
        for receiver in receivers:
            receiver.close()
    for kind, payload in replies:
        if kind == "error":
            raise payload
    return [payload for _, payload in replies]


def _died(part: int, workers: int, process: BaseProcess) -> Exception:
    """The error for a worker that closed its pipe without a reply."""
    process.join()
    code = process.exitcode
    if code is not None and code < 0:  # killed by a signal: not a bug of lbnorm
        name = signal.Signals(-code).name
        why = " (the out-of-memory killer sends it)" if -code == signal.SIGKILL else ""
        msg = (
            f"lbnorm worker {part + 1} of {workers} was killed by {name}{why}.\n"
            "Hint: give the run more memory, or run with --workers 1."
        )
        return LbnormError(msg)
    msg = f"lbnorm worker {part + 1} of {workers} died (exit code {code}); run with --workers 1 to see why."
    return RuntimeError(msg)


def _work(
    work: Callable[[int, int], object],
    part: int,
    parts: int,
    sender: Connection,
    inherited: list[Connection],
    parent: int,
) -> None:
    """In the forked worker: sum one share and send the totals (or the error) back."""
    start_worker(parent)
    for receiver in inherited:  # read ends of the parent's pipes, this one's too
        receiver.close()
    # signal tests: LBNORM_FAULT_POINT (lbnorm.core.faults)
    fault_point("worker-summing")
    try:
        reply: tuple[str, Any] = ("ok", work(part, parts))
    except LbnormError as exc:
        reply = ("error", exc)
    except Exception as exc:
        reply = ("error", RuntimeError(f"lbnorm worker {part}: {exc!r}"))
    try:
        sender.send(reply)
    except OSError:  # the pipe has no reader: the parent is gone, nobody to tell
        pass
    except Exception:  # an error that cannot be pickled: send its text
        with contextlib.suppress(OSError):
            sender.send(("error", RuntimeError(f"lbnorm worker {part}: {reply[1]!r}")))
    finally:
        sender.close()
