"""A batch's work done on a second thread while the next batch is read.

A streaming pass over batches is two halves: one must follow the input's order
(encoding keys, checking duplicates against every earlier batch), the other only
needs what the first produced (summing). numpy and Arrow release the GIL in
their kernels, so the two run on both cores of a 2-core machine: the streaming
engine (:mod:`lbnorm.engines.partials`, :mod:`lbnorm.engines.spill`) and the
sample-table reader (:mod:`lbnorm.readers.samples`) sum a batch this way.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar, cast

from lbnorm.forking import hand_over

__all__ = ["THREAD_ROWS", "BatchThread", "beside", "read_ahead"]

_T = TypeVar("_T")

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
