"""The process side of lbnorm: worker processes, helper threads and the heap.

The one module that starts threads and forks processes (the Dask engine aside),
so that how a worker starts, how a thread is joined and what a signal does to
either is decided in one place.

Processes. Two parts of lbnorm fork workers: the results-tree reader (parsing
files on every core) and the stream engine (summing row groups). A worker
ignores Ctrl-C (the parent handles it and cleans up) and dies with its parent,
even a SIGKILLed or OOM-killed one, instead of blocking forever on a pipe nobody
reads. Fork inside :func:`held_signals`: a Ctrl-C that lands while Python runs
its at-fork hooks is otherwise lost in the parent.

Threads. A streaming pass over batches is two halves: one must follow the
input's order (encoding keys, checking duplicates), the other only needs what
the first produced (summing). numpy and Arrow release the GIL in their kernels,
so :class:`BatchThread` runs the second half on the other core, and
:func:`read_ahead` reads the next batch while this one is worked on.

The heap. glibc keeps what a process frees for reuse, and pyarrow's allocator
keeps pages too; resident memory then stays at a phase's high-water mark through
the next phase. A run that must stay within a bound (a spilled streaming run)
calls :func:`release_free_memory` between phases.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, TypeVar, cast

__all__ = [
    "THREAD_ROWS",
    "BatchThread",
    "allow_keeping_freed_memory",
    "available_cores",
    "beside",
    "can_fork",
    "hand_over",
    "held_signals",
    "keep_freed_memory",
    "read_ahead",
    "release_free_memory",
    "start_worker",
]

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


# --- threads ---


#: Batches smaller than this are done at once (a thread saves nothing there).
THREAD_ROWS = 1 << 16


def read_ahead(items: Iterator[_T]) -> Generator[_T, None, None]:
    """Yield `items`, the next one made on a second thread meanwhile.

    For readers: Arrow decodes the next row group or batch with the GIL
    released while the caller works on this one. An error making an item is
    raised where that item is taken. Closed early (the caller's error, a
    Ctrl-C), the thread is stopped; when the garbage collector closes a
    generator left suspended, it may do so inside another thread's start,
    which holds the lock a join needs (the join would wait for ever): the
    thread is then left to finish its one read instead of being joined.
    """
    owner = threading.current_thread()
    pool = ThreadPoolExecutor(1, thread_name_prefix="lbnorm-read")
    end = object()
    try:
        ahead = pool.submit(next, items, end)
        while (item := ahead.result()) is not end:
            ahead = pool.submit(next, items, end)
            yield cast("_T", item)  # (not the end marker)
    finally:
        pool.shutdown(wait=threading.current_thread() is owner, cancel_futures=True)


def beside(work: Callable[[], _T]) -> Future[_T]:
    """Start `work` on a thread of its own, which ends with it; the caller goes on.

    The future gives what `work` returned, or raises what it raised.
    """
    pool = ThreadPoolExecutor(1, thread_name_prefix="lbnorm-beside")
    future = hand_over(pool, work)
    pool.shutdown(wait=False)  # the thread ends once the work is done
    return future


class BatchThread:
    """Runs one batch's work on a second thread while the caller reads the next.

    One batch at most is in flight, its arrays held until its work is done, and
    the batches' work runs in the order given. An error the work raised (a full
    disk while spilling, a non-finite sample value) is raised by the next
    :meth:`run` or :meth:`wait`. The thread starts with the first large batch
    (none exists when a run forks its workers) and stops at :meth:`close`.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None

    def run(self, work: Callable[[], None], n_rows: int) -> None:
        """Wait for the batch before, then do this one's `work` on the thread."""
        self.wait()
        if n_rows < THREAD_ROWS:
            work()
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="lbnorm-batch")
        self._pending = hand_over(self._pool, work)  # close() waits for it

    def wait(self) -> None:
        """Wait until every batch handed over is done (raising what its work raised)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        """Wait, then stop the thread (no more batches will come)."""
        try:
            self.wait()
        finally:
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None

    def abandon(self) -> None:
        """Stop once the batch under way is done, whatever it raised.

        For a run that already failed (or was interrupted): its own error is
        the one to report, and the batch's arrays are free to go once it returns.
        """
        with contextlib.suppress(Exception):
            self.close()

    def settle(self) -> None:
        """After the caller's own error: raise the batch behind's first, if it had one.

        That batch came earlier in the input, so its error is the one to report
        (the first bad row); otherwise the thread just stops.
        """
        pending, self._pending = self._pending, None
        error = None if pending is None else pending.exception()
        self.abandon()
        if error is not None:
            raise error


# --- the heap ---


def release_free_memory() -> None:
    """Return free heap memory to the system (glibc ``malloc_trim``; Arrow's pool).

    A few milliseconds per GB of heap; does nothing where neither applies.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    import pyarrow as pa  # (loaded by every caller already; not by the CLI's start)

    pa.default_memory_pool().release_unused()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """Glibc's ``malloc_trim``, or None (another C library, another system)."""
    import ctypes.util  # (only a run that spills gets here: ~2 ms of imports)

    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function: Callable[[int], int] = libc.malloc_trim
        return function
    return None


def allow_keeping_freed_memory() -> None:
    """Let a run that does not spill keep freed memory (:func:`keep_freed_memory`).

    The command line calls it: its process is lbnorm's own (a library call
    leaves its host's allocator alone).
    """
    global _is_allowed  # (one allocator per process)
    _is_allowed = True


def keep_freed_memory() -> None:
    """Have glibc keep what this process frees, for reuse, if its owner allowed it.

    By default glibc unmaps every freed block above its mmap threshold (it
    rises to 32 MB at most) and trims its heap's top above twice that, so each
    batch of a large run faults fresh pages in again (~0.3 GB/s on these
    machines, as system time): L40 with two tables took 2.95 s (system 1.1 s)
    against 2.58 s (0.5 s) with blocks under 1 GiB kept on the heap and no
    automatic trim, its peak ~150 MB higher. The engines call it when a run
    will not spill: a spilled run frees and trims between its phases to stay
    within its bound (with freed blocks kept, OOC40's peak rose 1,605 -> 1,863
    MB, no faster; glibc's settings cannot be put back as they were: its
    thresholds' settled values cost OOC100 4%). Does nothing where glibc's
    ``mallopt`` is not found, or if :func:`allow_keeping_freed_memory` was not
    called.
    """
    global _is_kept  # (one allocator per process)
    if _is_allowed and not _is_kept:
        _is_kept = _mallopt(_KEPT)


#: Whether the process's owner let a run keep freed memory, and whether it does.
_is_allowed = False
_is_kept = False

#: glibc's mallopt parameters (malloc.h: M_MMAP_THRESHOLD, M_TRIM_THRESHOLD,
#: M_TOP_PAD) as a run that keeps freed memory sets them: blocks under 1 GiB
#: come from, and go back to, the heap; its free top is not trimmed by itself; it
#: grows 256 MiB at a time (address space: pages are resident once touched).
_KEPT = {-3: 1 << 30, -1: 2**31 - 1, -2: 256 << 20}


def _mallopt(values: dict[int, int]) -> bool:
    """Set glibc's ``mallopt`` parameters; whether it could (another C library: no)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes  # (loaded by the writer anyway)

        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        done = [mallopt(parameter, value) for parameter, value in values.items()]
        return all(result == 1 for result in done)  # (each set, whatever the others)
    return False
