"""Forked worker processes: how many cores there are, and how a worker starts.

Two parts of lbnorm fork workers: the results-tree reader (parsing files on
every core) and the stream engine (summing row groups). Both use these, so a
worker behaves the same everywhere: it ignores Ctrl-C (the parent handles it and
cleans up), and it dies with its parent, even a SIGKILLed or OOM-killed one,
instead of blocking forever on a pipe nobody reads.

Fork inside :func:`held_signals`: a Ctrl-C that lands while Python runs its
at-fork hooks is otherwise lost in the parent (the hooks' errors are only
printed, "Exception ignored in ..."), and the run goes on as if never interrupted.
The writer holds the signals the same way while it swaps an output in.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from typing import Any, TypeVar

__all__ = ["available_cores", "can_fork", "hand_over", "held_signals", "start_worker"]

_T = TypeVar("_T")

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def available_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def can_fork() -> bool:
    """Whether this platform can fork workers (Linux and macOS)."""
    import multiprocessing  # (~1.3 ms: only a run that may fork asks)

    return "fork" in multiprocessing.get_all_start_methods()


def start_worker(parent: int) -> None:
    """Set up a forked worker: Ctrl-C and shutdown are the parent's business.

    The worker ignores Ctrl-C (the parent, which sees it too, says one line and
    cleans up), dies of SIGTERM without a word, and is killed when its parent
    dies (Linux ``PR_SET_PDEATHSIG``; it fires when the *thread* that forked the
    worker ends, so fork workers from the main thread).

    Args:
        parent: The parent's process id, taken before forking.
    """
    # the parent sees Ctrl-C too and cleans up; a worker must not print a
    # traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # die with the parent, even a SIGKILLed one, rather than wait forever
    with contextlib.suppress(OSError, AttributeError):  # not Linux: no prctl
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def hand_over(
    pool: Executor, work: Callable[..., _T], /, *args: Any, **kwargs: Any
) -> Future[_T]:
    """``pool.submit(work, ...)``, with Ctrl-C and SIGTERM held until it returns.

    ``ThreadPoolExecutor.submit`` starts its thread before it records it (and
    ``Thread.start`` waits for the thread to come up): a signal landing there
    left a thread the pool's shutdown does not wait for, still encoding into a
    Parquet writer that the unwinding then closed (a segfault) or into a staging
    folder being deleted (left behind): 3 in ~700 interrupted runs under load.
    The signal now lands once the work is handed over.
    """
    with held_signals():
        return pool.submit(work, *args, **kwargs)


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM back until the block is done, then deliver them.

    Only the main thread handles signals in Python; elsewhere this does nothing.
    A worker forked inside the block inherits the holding handlers until
    :func:`start_worker` makes it ignore both.

    Examples:
        >>> order = []
        >>> previous = signal.signal(signal.SIGTERM, lambda *_: order.append("signal"))
        >>> with held_signals():
        ...     signal.raise_signal(signal.SIGTERM)
        ...     order.append("block")
        >>> _ = signal.signal(signal.SIGTERM, previous)
        >>> order
        ['block', 'signal']
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []

    def hold(number: int, _frame: object) -> None:
        caught.append(number)

    previous = {
        number: signal.signal(number, hold)
        for number in (signal.SIGINT, signal.SIGTERM)
        if signal.getsignal(number) is not None  # None: not set from Python
    }
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for pending in dict.fromkeys(caught):
            signal.raise_signal(pending)
