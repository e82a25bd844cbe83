"""read_ahead: the next item is made on a second thread; closing never hangs.

A reader's generator left suspended (a test's error, a caller that stopped
early) is closed by the garbage collector in whatever thread allocates, which
can be a thread being started: that thread holds the lock a join takes, so a
join there waits for ever (a full test run hung in ``Thread.start`` so).
Closed from another thread than the one that read, ``read_ahead`` does not join.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from lbnorm._runtime import read_ahead

PATIENCE = 30.0  # seconds before a wait counts as a hang (never reached when right)


def _blocking(release: threading.Event, started: threading.Event) -> Iterator[int]:
    yield 1
    started.set()
    release.wait(PATIENCE)  # the second item takes until released
    yield 2


def _reader_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("lbnorm-read")}


def test_items_come_in_order_and_errors_where_they_happen() -> None:
    def items() -> Iterator[int]:
        yield from range(5)
        msg = "the sixth cannot be made"
        raise ValueError(msg)

    got: list[int] = []
    read = read_ahead(items())
    got.extend(next(read) for _ in range(5))
    with pytest.raises(ValueError, match="sixth"):
        next(read)
    assert got == [0, 1, 2, 3, 4]


def test_closed_by_its_reader_the_thread_is_joined() -> None:
    before = _reader_threads()  # (other tests' threads are not this one)
    release, started = threading.Event(), threading.Event()
    read = read_ahead(_blocking(release, started))
    assert next(read) == 1
    assert started.wait(PATIENCE)  # the worker is making the second item
    assert _reader_threads() - before
    threading.Timer(0.2, release.set).start()  # let it finish, a little later
    read.close()  # joins: returns once the worker is gone
    assert release.is_set()
    assert not _reader_threads() - before


def test_closed_from_another_thread_it_does_not_join() -> None:
    before = _reader_threads()
    release, started = threading.Event(), threading.Event()
    read = read_ahead(_blocking(release, started))
    assert next(read) == 1
    assert started.wait(PATIENCE)
    closed = threading.Event()

    def close_elsewhere() -> None:  # as the garbage collector may, in a new thread
        read.close()
        closed.set()

    elsewhere = threading.Thread(target=close_elsewhere)
    elsewhere.start()
    assert closed.wait(PATIENCE)  # returned while the worker still reads
    assert not release.is_set()
    assert _reader_threads() - before  # left to finish its one read
    release.set()
    elsewhere.join(PATIENCE)
    deadline = time.monotonic() + PATIENCE
    while _reader_threads() - before:  # it ends on its own
        assert time.monotonic() < deadline, "the reading thread did not end"
        time.sleep(0.01)
