"""Both cores for the streaming engine: forked workers, one share of the input each.

Each worker is a forked copy of the running process (so it inherits the opened
inputs and the suite, and nothing is pickled on the way in). It sums its share of
the row groups into exact partial sums (:func:`lbnorm.stream.sum_scores`) and
sends them back through a pipe (multiprocessing pickles them: data this process
made itself, never an input); the parent adds them up by variant key
(:func:`lbnorm.stream.add_totals`). Fixed-point sums are exact, so the result is
bit-identical to a one-process run whatever the split.

Failures stay simple: an input error in a worker is raised again in the parent;
a score that fails a check (or a duplicate across shares) makes the caller redo
the run in one process, which lists every failure with its file and row.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from lbnorm.errors import LbnormError
from lbnorm.stream import Totals, add_totals

__all__ = ["available_cores", "sum_in_workers"]


def available_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def sum_in_workers(work: Callable[[int, int], Totals], workers: int) -> Totals | None:
    """Run ``work(part, workers)`` for every part in forked processes and add up.

    Args:
        work: Sums one share of the input: ``work(part, parts)``.
        workers: Processes to fork (at least 2).

    Returns:
        The added sums, or None when a share failed a check (see the module
        docstring).

    Raises:
        LbnormError: A worker hit an input error (re-raised as it was).
        RuntimeError: A worker died or failed in an unexpected way.
    """
    context = multiprocessing.get_context("fork")
    receivers: list[Connection] = []
    processes = []
    for part in range(workers):
        receiver, sender = context.Pipe(duplex=False)
        process = context.Process(
            target=_work, args=(work, part, workers, sender), daemon=True
        )
        process.start()
        sender.close()
        receivers.append(receiver)
        processes.append(process)
    replies: list[tuple[str, Any]] = []
    try:
        for part, receiver in enumerate(receivers):
            try:
                replies.append(receiver.recv())
            except EOFError:
                msg = f"lbnorm worker {part} of {workers} died (exit code {processes[part].exitcode}); run with --workers 1 to see why."
                raise RuntimeError(msg) from None
    finally:
        for process in processes:
            process.join()
    for kind, payload in replies:
        if kind == "error":
            raise payload
    totals = add_totals([payload for _, payload in replies])
    return None if totals.failures else totals


def _work(
    work: Callable[[int, int], Totals], part: int, parts: int, sender: Connection
) -> None:
    """In the forked worker: sum one share and send the totals (or the error) back."""
    try:
        reply: tuple[str, Any] = ("ok", work(part, parts))
    except LbnormError as exc:
        reply = ("error", exc)
    except Exception as exc:
        reply = ("error", RuntimeError(f"lbnorm worker {part}: {exc!r}"))
    try:
        sender.send(reply)
    except Exception:  # an error that cannot be sent: send its text
        sender.send(("error", RuntimeError(f"lbnorm worker {part}: {reply[1]!r}")))
    finally:
        sender.close()
