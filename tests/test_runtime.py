"""lbnorm._runtime's cancellation: a signal sets a flag; the run stops where it checks.

Ctrl-C and SIGTERM never raise where they land while lbnorm holds them; every
wait in ``_runtime`` wakes to look at the flag, so a long wait still ends; the
handlers are put back as they were.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator

import pytest

from lbnorm import _runtime
from lbnorm.core.errors import Cancelled, Terminated

#: A liveness bound, not a timing: a wait that never wakes would hang.
PATIENCE = 30.0


@pytest.fixture
def held() -> Iterator[None]:
    """The signals held as the command line holds them, for one test."""
    restore = _runtime.take_signals(sigterm=True)
    try:
        yield
    finally:
        restore()


def _signal_later(number: int, started: threading.Event) -> threading.Thread:
    """Send `number` to this process once `started` is set (from another thread)."""

    def send() -> None:
        assert started.wait(PATIENCE)
        os.kill(os.getpid(), number)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def test_a_signal_sets_the_flag_and_raises_only_where_checked(held: None) -> None:
    steps = []
    signal.raise_signal(signal.SIGINT)
    steps.append("went on")  # nothing raised where the signal landed
    assert _runtime.cancelled()
    with pytest.raises(Cancelled, match="SIGINT") as raised:
        _runtime.check_cancelled()
    assert steps == ["went on"]
    assert not isinstance(raised.value, Terminated)
    assert isinstance(
        raised.value, KeyboardInterrupt
    )  # not stopped by except Exception


def test_sigterm_is_terminated(held: None) -> None:
    signal.raise_signal(signal.SIGTERM)
    with pytest.raises(Terminated, match="SIGTERM"):
        _runtime.check_cancelled()


def test_a_second_signal_raises_where_it_lands_in_a_library_call(held: None) -> None:
    signal.raise_signal(signal.SIGINT)
    with pytest.raises(Cancelled, match="SIGINT"):
        signal.raise_signal(signal.SIGINT)


def test_the_handlers_are_put_back_and_the_flag_cleared() -> None:
    before = [signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)]
    restore = _runtime.take_signals(sigterm=True)
    assert signal.getsignal(signal.SIGINT) is not before[0]
    assert _runtime.take_signals() is not restore  # nested: takes nothing
    signal.raise_signal(signal.SIGINT)
    restore()
    assert [signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)] == before
    assert not _runtime.cancelled()  # nothing after the holder may act on it
    _runtime.check_cancelled()  # (a library call's next batch goes on)


def test_a_cancellable_block_raises_as_it_ends_in_a_library_call() -> None:
    steps = []

    def block() -> None:
        with _runtime.cancellable():
            signal.raise_signal(signal.SIGINT)
            steps.append("the block went on")

    with pytest.raises(Cancelled, match="SIGINT"):
        block()
    assert steps == ["the block went on"]
    assert not _runtime.cancelled()  # cleared for the caller's next call
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_wait_for_a_thread_wakes_for_a_signal(held: None) -> None:
    """The work blocks until released; a Ctrl-C during result() ends the wait."""
    release, started = threading.Event(), threading.Event()

    def work() -> int:
        started.set()
        release.wait(PATIENCE)
        return 1

    with _runtime.Threads(1, "test") as thread:
        future = thread.submit(work)
        _signal_later(signal.SIGINT, started)
        try:
            with pytest.raises(Cancelled, match="SIGINT"):
                future.result()
            assert not release.is_set()  # the wait ended while the work went on
        finally:
            release.set()


def test_a_cancelled_run_hands_nothing_more_to_a_thread(held: None) -> None:
    signal.raise_signal(signal.SIGINT)
    ran: list[int] = []
    with (
        _runtime.Threads(1, "test") as thread,
        pytest.raises(Cancelled, match="SIGINT"),
    ):
        thread.submit(ran.append, 1)
    batches = _runtime.BatchThread()
    with pytest.raises(Cancelled, match="SIGINT"):
        batches.run(lambda: ran.append(2), 1)
    assert ran == []


def test_read_ahead_stops_at_the_next_item(held: None) -> None:
    read = _runtime.read_ahead(iter(range(10)))
    assert next(read) == 0
    signal.raise_signal(signal.SIGINT)
    with pytest.raises(Cancelled, match="SIGINT"):
        next(read)


@pytest.mark.skipif(not _runtime.can_fork(), reason="no fork here")
def test_a_wait_for_a_worker_wakes_for_a_signal(held: None) -> None:
    """The worker never replies; SIGTERM during receive() ends the wait; it is killed."""
    receiver, sender = _runtime.pipe()
    parent = os.getpid()

    def silent() -> None:
        _runtime.start_worker(parent)
        threading.Event().wait(PATIENCE)

    worker = _runtime.fork(silent)
    sender.close()
    started = threading.Event()
    _signal_later(signal.SIGTERM, started)
    started.set()
    try:
        with pytest.raises(Terminated, match="SIGTERM"):
            _runtime.receive(receiver)
    finally:
        worker.kill()
        worker.join(PATIENCE)
        receiver.close()
    assert worker.exitcode == -signal.SIGKILL  # still waiting when it was killed


def test_first_done_wakes_for_a_signal(held: None) -> None:
    release, started = threading.Event(), threading.Event()

    def work() -> None:
        started.set()
        release.wait(PATIENCE)

    with _runtime.Threads(1, "test") as thread:
        future = thread.submit(work)
        _signal_later(signal.SIGINT, started)
        try:
            with pytest.raises(Cancelled, match="SIGINT"):
                _runtime.first_done({future})
            assert not future.done()
        finally:
            release.set()
