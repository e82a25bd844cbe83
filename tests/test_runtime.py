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
from typing import Any

import pytest

from lbnorm import _runtime
from lbnorm.core.errors import Cancelled, Terminated

#: A liveness bound, not a timing: a wait that never wakes would hang.
PATIENCE = 30.0


@pytest.fixture
def held() -> Iterator[None]:
    """The signals held as the command line holds them, for one test."""
    restore = _runtime.take_signals()
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
    restore = _runtime.take_signals()
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


# --- letting go: no signal lost, no handler or flag left behind (issue 38) ----------------


def _recording_handlers() -> tuple[list[int], dict[int, Any]]:
    """Handlers that only record what reaches them, installed as a host's would be.

    Returns what they received, and the handlers they replaced (to put back).
    """
    received: list[int] = []

    def record(number: int, _frame: object) -> None:
        received.append(number)

    previous = {
        int(n): signal.signal(n, record) for n in (signal.SIGINT, signal.SIGTERM)
    }
    return received, previous


def _is_recording(number: int) -> bool:
    return getattr(signal.getsignal(number), "__name__", "") == "record"


def _signal_at_put_back(
    monkeypatch: pytest.MonkeyPatch, at: int, number: int, times: int = 1
) -> list[int]:
    """After the `at`-th handler put back (0: before any), deliver `number` `times` times.

    The hook is ``signal.signal`` itself, wrapped: the signal arrives at that
    moment exactly (``raise_signal`` runs the Python handler before returning).
    """
    real = signal.signal
    calls: list[int] = []

    def put_back_then_signal(which: int, handler: object) -> object:
        previous = real(which, handler)  # type: ignore[arg-type]
        calls.append(which)
        if len(calls) == at:
            for _ in range(times):
                signal.raise_signal(number)
        return previous

    monkeypatch.setattr(signal, "signal", put_back_then_signal)
    return calls


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("at", [0, 1, 2], ids=["before", "after-first", "after-both"])
def test_a_signal_while_letting_go_is_never_lost(
    monkeypatch: pytest.MonkeyPatch, at: int, number: int
) -> None:
    """The old order read the flag, then put the handlers back and cleared it.

    A signal between the two was lost. Now each moment of the letting go is
    forced: the signal is either on the flag the letting go returns, or it
    reached the host's handler, once.
    """
    received, host = _recording_handlers()
    try:
        let_go = _runtime.take_signals()
        _runtime.check_cancelled()  # the command's last look: nothing yet
        if at == 0:
            signal.raise_signal(number)  # after the last look, before letting go
        else:
            _signal_at_put_back(monkeypatch, at, number)
        held = let_go()
        monkeypatch.undo()
        assert [n for n in (held,) if n] + received == [number]
        assert not _runtime.cancelled()
        assert all(_is_recording(n) for n in host)  # the host's handlers, back
    finally:
        monkeypatch.undo()
        for n, handler in host.items():
            signal.signal(n, handler)


@pytest.mark.parametrize("at", [1, 2], ids=["after-first", "after-both"])
def test_a_second_ctrl_c_while_a_library_call_lets_go(
    monkeypatch: pytest.MonkeyPatch, at: int
) -> None:
    """Ctrl-C in the call, a second one as its handlers are put back.

    Python's handler, back, raises the second where it lands (inside the
    letting go): every handler is still put back, the flag cleared, and the
    next call runs as if nothing happened (no lock left taken, nothing held).
    """
    before = [signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)]

    def call() -> None:
        with _runtime.cancellable():
            signal.raise_signal(signal.SIGINT)
            _signal_at_put_back(monkeypatch, at, signal.SIGINT)

    with pytest.raises(KeyboardInterrupt, match=r"^$"):  # Python's own, as it landed
        call()
    monkeypatch.undo()
    assert [signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM)] == before
    assert (_runtime._is_held, _runtime._signalled) == (False, 0)
    with _runtime.cancellable(), _runtime.Threads(1, "test") as thread:
        assert thread.submit(sum, [1, 2]).result() == 3  # the next call goes on


def test_a_library_call_hands_a_signal_on_to_the_hosts_handler() -> None:
    """SIGTERM to a host with its own handler: the run stops, then the host hears it."""
    received, host = _recording_handlers()

    def call() -> None:
        with _runtime.cancellable():
            signal.raise_signal(signal.SIGTERM)
            assert received == []  # held: the host hears nothing yet
            _runtime.check_cancelled()

    try:
        with pytest.raises(Terminated, match="SIGTERM"):
            call()
        assert received == [signal.SIGTERM]  # handed on once the run unwound
    finally:
        for n, handler in host.items():
            signal.signal(n, handler)


def test_an_entry_point_holds_the_signals_for_its_call() -> None:
    seen = []

    @_runtime.entry_point
    def work() -> int:
        seen.append(signal.getsignal(signal.SIGINT) is _runtime._on_signal)
        signal.raise_signal(signal.SIGINT)  # a Ctrl-C in the middle: only the flag
        seen.append(_runtime.cancelled())
        return 1

    with pytest.raises(Cancelled, match="SIGINT"):
        work()
    assert seen == [True, True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


#: Runs in a fresh process: a second signal forced inside the handler, at each
#: line it runs in turn (its own and those of anything it calls; a trace function
#: sends it), never hangs it.
_NESTED = """
import signal, sys
from lbnorm import _runtime

code = _runtime._on_signal.__code__
outcomes = []
for target in range(12):
    let_go = _runtime.take_signals()
    lines = [0]
    inside = [False]

    def trace(frame, event, arg):
        if frame.f_code is code and event in ("call", "return"):
            inside[0] = event == "call"
        elif inside[0] and event == "line":
            lines[0] += 1
            if lines[0] == target + 1:
                signal.raise_signal(signal.SIGINT)  # lands inside the handler
        return trace

    sys.settrace(trace)
    try:
        signal.raise_signal(signal.SIGINT)
        outcome = "flag" if _runtime.cancelled() else "none"
    except KeyboardInterrupt:
        outcome = "raised"
    finally:
        sys.settrace(None)
    let_go()
    outcomes.append(outcome)
print(" ".join(outcomes))
"""


def test_a_signal_inside_the_handler_finds_no_lock_held() -> None:
    """The handler once called ``Event.set()``: a signal inside it waited on its own lock."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _NESTED],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    outcomes = done.stdout.split()
    assert len(outcomes) == 12
    # inside the first signal's handler: either both land on the flag, or the
    # second is a second Ctrl-C (raised where it lands, in a library call)
    assert set(outcomes) <= {"flag", "raised"}, outcomes
    assert "raised" in outcomes


def test_a_signal_the_process_ignores_stays_ignored() -> None:
    """A command started in a script's background ignores Ctrl-C (the shell set it so)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        let_go = _runtime.take_signals()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is _runtime._on_signal
        signal.raise_signal(signal.SIGINT)
        assert not _runtime.cancelled()
        assert let_go() == 0
    finally:
        signal.signal(signal.SIGINT, previous)
