"""The process side of lbnorm: cancellation, helper threads, worker processes, the heap.

The one module that sets signal handlers, starts threads and forks processes
(the Dask engine aside), so that what a signal does to a run, how a worker
starts and how a thread is joined are decided in one place (``tests/test_shape.py``
holds every other module to it).

Cancellation. Ctrl-C and SIGTERM never raise where they land. Every entry
point holds them for its whole call: the command line for its command
(:func:`take_signals`), a library function by :func:`entry_point` (or
:func:`cancellable`); nothing swaps handlers per piece of work. While held, the
handler only records the signal in a plain integer (no lock). The run asks
:func:`check_cancelled` at its natural boundaries (a batch, a block of a text
table, a chunk of files, a partition, a bootstrap round, a table, the swap), and
every wait here wakes each :data:`TICK` seconds to ask too; the run then
unwinds from there by :class:`~lbnorm.core.errors.Cancelled` (or
:class:`~lbnorm.core.errors.Terminated`), a :class:`KeyboardInterrupt`, through
the cleanup every error takes. So no signal lands inside a thread's start, a
fork, a lock or a folder's removal. Letting go puts the handlers back before it
reads and clears the flag, so no signal is lost in between. A second signal,
while the first is being acted on, stops at once.

Threads. A streaming pass over batches is two halves: one must follow the
input's order (encoding keys, checking duplicates), the other only needs what
the first produced (summing). numpy and Arrow release the GIL in their kernels,
so :class:`BatchThread` runs the second half on the other core, and
:func:`read_ahead` reads the next batch while this one is worked on. Every
other helper thread (writing tables side by side, hashing, sorting) comes from
:class:`Threads`; the futures it gives wait in ticks (see above).

Processes. Two parts of lbnorm fork workers: the results-tree reader
(:class:`Processes`, parsing files on every core) and the stream engine
(:func:`fork`, summing row groups). A worker ignores Ctrl-C (the parent handles
it and cleans up) and dies with its parent, even a SIGKILLed or OOM-killed one,
instead of blocking forever on a pipe nobody reads.

The heap. glibc keeps what a process frees for reuse, and pyarrow's allocator
keeps pages too; resident memory then stays at a phase's high-water mark through
the next phase. A run that must stay within a bound (a spilled streaming run)
calls :func:`release_free_memory` between phases; a run that need not may keep
freed memory for reuse (:func:`keep_freed_memory`) if the process is lbnorm's own.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from lbnorm.core.errors import Cancelled, ExitCode, Terminated

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess
    from types import FrameType, TracebackType
    from typing import TypeAlias

    _Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | None

__all__ = [
    "THREAD_ROWS",
    "TICK",
    "BatchThread",
    "Processes",
    "Threads",
    "allow_keeping_freed_memory",
    "available_cores",
    "beside",
    "can_fork",
    "cancellable",
    "cancellation",
    "cancelled",
    "check_cancelled",
    "entry_point",
    "first_done",
    "fork",
    "ignore_signals",
    "keep_freed_memory",
    "pipe",
    "read_ahead",
    "receive",
    "release_free_memory",
    "start_worker",
    "take_signals",
]

_T = TypeVar("_T")
_P = ParamSpec("_P")

_PR_SET_PDEATHSIG = 1  # linux/prctl.h

# --- cancellation ---

#: Seconds between two looks at the cancellation flag in a wait.
TICK = 0.05

_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: The first Ctrl-C's or SIGTERM's number while lbnorm holds the signals (0:
#: none yet): a plain integer, so the handler takes no lock.
_signalled = 0
#: Whether lbnorm holds the signals, and what a second signal does.
_is_held = False
_exits_at_once = False


def cancelled() -> bool:
    """Whether a Ctrl-C or SIGTERM asked the run to stop."""
    return _is_held and _signalled != 0


def check_cancelled() -> None:
    """Raise :class:`~lbnorm.core.errors.Cancelled` if the run was asked to stop.

    Raises:
        Cancelled: After Ctrl-C; :class:`~lbnorm.core.errors.Terminated` after SIGTERM.
    """
    if _is_held and _signalled:
        raise cancellation(_signalled)


def cancellation(number: int) -> Cancelled:
    """The exception that unwinds a run signal `number` cancelled."""
    name = signal.Signals(number).name if number else "SIGINT"
    return Terminated(name) if number == signal.SIGTERM else Cancelled(name)


def _on_signal(number: int, _frame: FrameType | None) -> None:
    """The handler: the first signal sets the flag; a second one stops at once.

    It takes no lock (a signal landing in the handler itself finds nothing
    held), and while the handlers are being put back it only records.
    """
    global _signalled  # (one flag per process)
    if not _signalled:
        _signalled = number
        return
    if not _is_held:  # being let go: the first signal is acted on as it ends
        return
    if _exits_at_once:  # the command's own process: nothing more to wait for
        code = ExitCode.TERMINATED if number == signal.SIGTERM else ExitCode.INTERRUPTED
        with contextlib.suppress(OSError):
            os.write(2, b"lbnorm: stopped at once (a second signal).\n")
        os._exit(code)
    raise cancellation(number)  # a library call: the caller asked twice


def take_signals(*, exit_at_once: bool = False) -> Callable[[], int]:
    """Have Ctrl-C and SIGTERM set the cancellation flag; return the letting go.

    The letting go puts the previous handlers back first and then reads and
    clears the flag, returning the signal that came while held (0: none), so a
    signal at any moment is either on the flag it reads or goes to the
    handler put back. Nothing is taken (and the letting go returns 0) outside
    the main thread, which alone handles signals, or while lbnorm holds them
    already (an outer call does, and acts on them). A signal the process
    ignores stays ignored.

    Args:
        exit_at_once: A second signal ends the process there and then (the
            command's own process); otherwise it raises where it lands.
    """
    global _is_held, _exits_at_once, _signalled  # (one handler per process)
    if _is_held or threading.current_thread() is not threading.main_thread():
        return lambda: 0  # nothing taken, nothing to let go
    previous: dict[int, _Handler] = {
        int(number): handler
        for number in _SIGNALS
        # None: not set from Python; SIG_IGN: the process's owner ignores it
        if (handler := signal.getsignal(number)) not in (None, signal.SIG_IGN)
    }
    _signalled = 0
    _is_held, _exits_at_once = True, exit_at_once
    try:
        for number in previous:
            signal.signal(number, _on_signal)
    except BaseException:  # a host's handler raised before ours was in
        _let_go(previous)
        raise
    return functools.partial(_let_go, previous)


def _let_go(previous: dict[int, _Handler]) -> int:
    """Put the handlers back, then read and clear the flag: the signal held (0: none)."""
    global _is_held, _signalled  # (one handler per process)
    _is_held = False
    try:
        _put_back(previous)
    finally:  # (no call between the read and the clearing: no handler runs there)
        number, _signalled = _signalled, 0
    return number


def _put_back(previous: dict[int, _Handler]) -> None:
    """Put each handler back, every one even if a host's handler raises meanwhile.

    A host's handler is in place once put back: a signal then raises there
    (Python's Ctrl-C), so the second one is put back in a ``finally``.
    """
    numbers = list(previous)
    try:
        if numbers:
            signal.signal(numbers[0], previous[numbers[0]])
    finally:
        for number in numbers[1:]:  # (SIGTERM: at most one more)
            signal.signal(number, previous[number])


@contextlib.contextmanager
def cancellable() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM for a library call (see :func:`entry_point`).

    Within the block a signal only sets the flag, which the run checks at its
    boundaries; as the block ends, the handlers are put back, and a signal
    that came is handed on as the caller's own handler would have taken it:
    Python's Ctrl-C raises :class:`~lbnorm.core.errors.Cancelled` (a
    :class:`KeyboardInterrupt`); any other handler (SIGTERM's default: the
    process ends) gets the signal, after the run cleaned up. Does nothing
    inside a block that already holds them (the command line's included).

    Examples:
        >>> order = []
        >>> with contextlib.suppress(KeyboardInterrupt), cancellable():
        ...     signal.raise_signal(signal.SIGINT)
        ...     order.append("block")
        >>> order, cancelled()
        (['block'], False)
    """
    let_go = take_signals()
    try:
        yield
    except BaseException as error:
        number = let_go()
        if not number:
            raise
        _hand_on(number)
        if isinstance(error, KeyboardInterrupt):
            raise
        raise cancellation(number) from error  # an error while the run stopped
    number = let_go()
    if number:
        _hand_on(number)
        raise cancellation(number)


def _hand_on(number: int) -> None:
    """Send a signal held for a library call to the caller's own handler, now back.

    Python's own Ctrl-C handler is spared: :class:`Cancelled` says the same.
    """
    if signal.getsignal(number) is not signal.default_int_handler:
        signal.raise_signal(number)


def entry_point(function: Callable[_P, _T]) -> Callable[_P, _T]:
    """Have a public function hold Ctrl-C and SIGTERM for its call (:func:`cancellable`).

    Every public entry point of the library does, as the command line does for
    a command: a Ctrl-C never lands inside a thread's start, a fork, a lock or
    a swap, and the run stops within a tick at its next boundary.
    """

    @functools.wraps(function)
    def held(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        with cancellable():
            return function(*args, **kwargs)

    return held


def ignore_signals() -> int:
    """Ignore Ctrl-C and SIGTERM from now on; the signal held and not yet acted on (0: none).

    For a process whose outcome is decided (the command's, as it exits): a
    signal after this is ignored, one before it is returned. (Python restores
    their default actions as it finalizes: a signal then would kill the process
    after the output was written or the interruption reported, with an exit
    status that says neither.)
    """
    global _signalled  # (one flag per process)
    for each in _SIGNALS:
        try:
            signal.signal(each, signal.SIG_IGN)
        except ValueError:  # not the main thread: not ours to handle
            return 0
    number, _signalled = (_signalled if _is_held else 0), 0
    return number


class _Task(Future[_T]):
    """A future whose waits wake each :data:`TICK` to check for cancellation."""

    def result(self, timeout: float | None = None) -> _T:
        if timeout is None:
            self._await()
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if timeout is None:
            self._await()
        return super().exception(timeout)

    def _await(self) -> None:
        while not self.done():
            wait((self,), TICK)
            check_cancelled()


# --- threads ---


#: Batches smaller than this are done at once (a thread saves nothing there).
THREAD_ROWS = 1 << 16


class Threads:
    """A pool of `count` helper threads named ``lbnorm-<name>``; a context manager.

    Leaving the block waits for the work handed over (dropping what has not
    started, on an error). The futures :meth:`submit` gives wait in ticks, so a
    Ctrl-C during a long wait is acted on at once.
    """

    def __init__(self, count: int, name: str) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._pool: ThreadPoolExecutor = ThreadPoolExecutor(
            max(count, 1), thread_name_prefix=f"lbnorm-{name}"
        )

    def __enter__(self) -> Threads:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close(cancel=kind is not None)

    def submit(
        self, work: Callable[..., _T], /, *args: Any, **kwargs: Any
    ) -> Future[_T]:
        """Run ``work(*args, **kwargs)`` on a thread; its future.

        A cancelled run stops here, before handing anything over.
        """
        check_cancelled()
        task: _Task[_T] = _Task()

        def run() -> None:
            if not task.set_running_or_notify_cancel():
                return
            try:
                value = work(*args, **kwargs)
            except BaseException as exc:  # handed to the waiting thread
                task.set_exception(exc)
            else:
                task.set_result(value)

        handed = self._pool.submit(run)
        handed.add_done_callback(lambda done: done.cancelled() and task.cancel())
        return task

    def close(self, *, wait: bool = True, cancel: bool = False) -> None:
        """Stop the threads once their work is done (`cancel`: drop work not started).

        Args:
            wait: Wait for the work under way (else the threads end on their own).
            cancel: Drop the work handed over that has not started.
        """
        self._pool.shutdown(wait=wait, cancel_futures=cancel)


def read_ahead(items: Iterator[_T]) -> Generator[_T, None, None]:
    """Yield `items`, the next one made on a second thread meanwhile.

    For readers: Arrow decodes the next row group or batch with the GIL
    released while the caller works on this one. An error making an item is
    raised where that item is taken, and a cancelled run stops at the next
    item. Closed early (the caller's error, a Ctrl-C), the thread is stopped;
    when the garbage collector closes a generator left suspended, it may do so
    inside another thread's start, which holds the lock a join needs (the join
    would wait for ever): the thread is then left to finish its one read
    instead of being joined.
    """
    owner = threading.current_thread()
    reader = Threads(1, "read")
    end = object()
    try:
        ahead = reader.submit(next, items, end)
        while (item := ahead.result()) is not end:
            ahead = reader.submit(next, items, end)
            yield cast("_T", item)  # (not the end marker)
    finally:
        reader.close(wait=threading.current_thread() is owner, cancel=True)


def beside(work: Callable[[], _T]) -> Future[_T]:
    """Start `work` on a thread of its own, which ends with it; the caller goes on.

    The future gives what `work` returned, or raises what it raised.
    """
    thread = Threads(1, "beside")
    future = thread.submit(work)
    thread.close(wait=False)  # the thread ends once the work is done
    return future


class BatchThread:
    """Runs one batch's work on a second thread while the caller reads the next.

    One batch at most is in flight, its arrays held until its work is done, and
    the batches' work runs in the order given. An error the work raised (a full
    disk while spilling, a non-finite sample value) is raised by the next
    :meth:`run` or :meth:`wait`. The thread starts with the first large batch
    (none exists when a run forks its workers) and stops at :meth:`close`. A
    cancelled run stops at the next :meth:`run`.
    """

    def __init__(self) -> None:
        self._thread: Threads | None = None
        self._pending: Future[None] | None = None

    def run(self, work: Callable[[], None], n_rows: int) -> None:
        """Wait for the batch before, then do this one's `work` on the thread."""
        self.wait()
        check_cancelled()
        if n_rows < THREAD_ROWS:
            work()
            return
        if self._thread is None:
            self._thread = Threads(1, "batch")
        self._pending = self._thread.submit(work)  # close() waits for it

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
            self._stop()

    def abandon(self) -> None:
        """Stop once the batch under way is done, whatever it raised.

        For a run that already failed (or was cancelled): its own error is
        the one to report, and the batch's arrays are free to go once it returns.
        """
        self._pending = None
        self._stop()

    def settle(self) -> None:
        """After the caller's own error: raise the batch behind's first, if it had one.

        That batch came earlier in the input, so its error is the one to report
        (the first bad row); otherwise the thread just stops.
        """
        pending, self._pending = self._pending, None
        self._stop()  # the batch under way is done once this returns
        if pending is not None and not pending.cancelled():
            error = pending.exception(timeout=0)
            if error is not None:
                raise error

    def _stop(self) -> None:
        if self._thread is not None:
            self._thread.close()  # joins the batch under way
            self._thread = None


# --- processes ---


def available_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def can_fork() -> bool:
    """Whether this platform can fork workers (Linux and macOS)."""
    import multiprocessing  # (only a run that may fork asks)

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
    global _is_held  # (the parent's handler is not this process's)
    # the parent sees Ctrl-C too and cleans up; a worker must not print a
    # traceback of its own
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _is_held = False
    # die with the parent, even a SIGKILLed one, rather than wait forever
    import ctypes  # (not loaded by the command line's first step)

    with contextlib.suppress(OSError, AttributeError):  # not Linux: no prctl
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def fork(target: Callable[..., None], /, *args: Any) -> BaseProcess:
    """Start ``target(*args)`` in a forked child (a daemon); its process.

    `target` calls :func:`start_worker` first.
    """
    import multiprocessing

    process = multiprocessing.get_context("fork").Process(
        target=target, args=args, daemon=True
    )
    process.start()
    return process


def pipe() -> tuple[Connection, Connection]:
    """A one-way pipe for a forked worker's reply: (receiver, sender)."""
    import multiprocessing

    return multiprocessing.get_context("fork").Pipe(duplex=False)


def receive(connection: Connection) -> Any:
    """``connection.recv()``, waking each :data:`TICK` to check for cancellation.

    Raises:
        EOFError: The other end closed without sending (its process died).
    """
    while not connection.poll(TICK):
        check_cancelled()
    # the signal that stopped the run may have ended the worker too (a whole
    # process group's): the run was cancelled, the worker did not fail
    check_cancelled()
    return connection.recv()


class Processes:
    """A pool of `count` forked worker processes (each set up by :func:`start_worker`)."""

    def __init__(self, count: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self._pool: ProcessPoolExecutor = ProcessPoolExecutor(
            max_workers=count,
            mp_context=multiprocessing.get_context("fork"),
            initializer=start_worker,
            initargs=(os.getpid(),),
        )

    def submit_all(
        self, work: Callable[[Any], _T], items: Iterable[Any]
    ) -> list[Future[_T]]:
        """``work(item)`` for each item, in the workers; the futures in order.

        The first submission forks every worker.
        """
        check_cancelled()
        return [self._pool.submit(work, item) for item in items]

    def close(self) -> None:
        """Drop the work not started, wait for the work under way, end the workers."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def first_done(
    futures: set[Future[_T]],
) -> tuple[set[Future[_T]], set[Future[_T]]]:
    """Wait until one of `futures` is done: (done, not done), checking for cancellation."""
    while True:
        done, running = wait(futures, TICK, FIRST_COMPLETED)
        if done:
            return done, running
        check_cancelled()


# --- the heap ---


def release_free_memory() -> None:
    """Return free heap memory to the system (glibc ``malloc_trim``; Arrow's pool).

    Does nothing where neither applies.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    import pyarrow as pa  # (loaded by every caller already; not by the CLI's start)

    pa.default_memory_pool().release_unused()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """Glibc's ``malloc_trim``, or None (another C library, another system)."""
    import ctypes
    import ctypes.util  # (only a run that spills gets here)

    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function: Callable[[int], int] = libc.malloc_trim
        return function
    return None


def allow_keeping_freed_memory() -> None:
    """Let a run that does not spill keep freed memory (:func:`keep_freed_memory`).

    The console command calls it: its process is lbnorm's own (a library call,
    :func:`lbnorm.cli.main` from Python included, leaves its host's allocator alone).
    """
    global _is_allowed  # (one allocator per process)
    _is_allowed = True


def keep_freed_memory() -> None:
    """Have glibc keep what this process frees, for reuse, if its owner allowed it.

    By default glibc unmaps every freed block above its mmap threshold (it
    rises to 32 MB at most) and trims its heap's top above twice that, so each
    batch of a large run faults fresh pages in again, paid as system time. The
    engines call it when a run will not spill: a spilled run frees and trims
    between its phases to stay within its bound, and glibc's settings cannot
    be put back as they were afterwards. Does nothing where glibc's ``mallopt``
    is not found, or if :func:`allow_keeping_freed_memory` was not called.
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
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        done = [mallopt(parameter, value) for parameter, value in values.items()]
        return all(result == 1 for result in done)  # (each set, whatever the others)
    return False
