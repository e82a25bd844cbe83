"""Forked worker processes: how many cores there are, and how a worker starts.

Two parts of lbnorm fork workers: the results-tree reader (parsing files on
every core) and the stream engine (summing row groups). Both use these, so a
worker behaves the same everywhere: it ignores Ctrl-C (the parent handles it and
cleans up), and it dies with its parent, even a SIGKILLed or OOM-killed one,
instead of blocking forever on a pipe nobody reads.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal

__all__ = ["available_cores", "can_fork", "start_worker"]

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def available_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def can_fork() -> bool:
    """Whether this platform can fork workers (Linux and macOS)."""
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
