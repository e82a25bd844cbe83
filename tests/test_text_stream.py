"""A CSV or JSONL score file read as it streams from the disk, never whole in memory.

lbnorm.readers.table_file.TextStream hands Arrow whole lines, each run hashed,
counted and checked; lbnorm.readers.tables reads the common file that way and
leaves every other one, and every error, to the whole-file read. The oracle is
that whole-file read (the path every file took before): the same table, the
same sha256, the same row numbers, the same messages.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbnorm import _runtime
from lbnorm.core.errors import Cancelled, InputError, SchemaMismatchError
from lbnorm.readers import table_file, tables
from lbnorm.readers.table_file import TextStream, count_lines
from lbnorm.readers.tables import read_score_file

#: Model names of any text: quotes, commas, non-ASCII, and newlines (quoted in a CSV).
_NAMES = st.text(
    st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from('\n\r",'),
    min_size=1,
    max_size=12,
)
_ROWS = st.lists(
    st.tuples(_NAMES, st.floats(0.0, 1.0), st.booleans()), min_size=1, max_size=30
)


def _write(
    path: Path, rows: list[tuple[str, float, bool]], *, crlf: bool, end: bool
) -> None:
    """`rows` as a score file of `path`'s format: CRLF or LF, a last newline or not."""
    if path.suffix == ".csv":
        lines = ["model,benchmark,subtask,raw_score,chat_template"] + [
            f'"{name.replace(chr(34), chr(34) * 2)}",GPQA,main,{score!r},{str(flag).lower()}'
            for name, score, flag in rows
        ]
    else:
        lines = [
            json.dumps(
                {"model": name, "benchmark": "GPQA", "subtask": "main",
                 "raw_score": score, "chat_template": flag},
                ensure_ascii=False,
            )
            for name, score, flag in rows
        ]  # fmt: skip
    newline = "\r\n" if crlf else "\n"
    path.write_bytes((newline.join(lines) + (newline if end else "")).encode())


def _whole(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    with monkeypatch.context() as patched:
        patched.setattr(tables, "_read_streamed", lambda *_args: None)
        return read_score_file(path)


@given(
    rows=_ROWS,
    suffix=st.sampled_from([".csv", ".jsonl"]),
    crlf=st.booleans(),
    end=st.booleans(),
    threaded=st.booleans(),
)
def test_the_streamed_read_is_the_whole_reads(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[tuple[str, float, bool]],
    suffix: str,
    crlf: bool,
    end: bool,
    threaded: bool,
) -> None:
    """Names of any text (quotes, non-ASCII, newlines in CSV quotes), CRLF, no last newline.

    `threaded`: runs of 16 bytes, so that a CSV past one run takes Arrow's
    threaded reader (a file of a few rows would take the streaming one).
    """
    path = tmp_path_factory.mktemp("scores") / f"scores{suffix}"
    _write(path, rows, crlf=crlf, end=end)
    with pytest.MonkeyPatch.context() as monkeypatch:
        if threaded:
            monkeypatch.setattr(table_file, "_RUN_BYTES", 16)
        streamed = tables._read_streamed(path, "csv" if suffix == ".csv" else "jsonl")
        batch, sha256 = read_score_file(path)
        whole, whole_sha256 = _whole(path, monkeypatch)
    assert batch.table.equals(whole.table)
    assert (batch.first_row, sha256) == (whole.first_row, whole_sha256)
    assert sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # one row a line (a JSON string escapes its newlines): the stream is the read taken
    is_a_row_a_line = suffix == ".jsonl" or not any("\n" in n for n, _, _ in rows)
    assert (streamed is not None) == is_a_row_a_line


@given(
    lines=st.lists(
        st.text(max_size=40).map(lambda t: t.replace("\n", "").encode()), max_size=12
    ),
    end=st.booleans(),
    size=st.integers(1, 50),
)
def test_runs_are_whole_lines_and_the_file_hashed_and_counted(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    end: bool,
    size: int,
) -> None:
    """Runs of any size, lines longer than a run: every byte handed on once, in order."""
    data = b"\n".join(lines) + (b"\n" if end and lines else b"")
    path = tmp_path_factory.mktemp("bytes") / "f.csv"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(table_file, "_RUN_BYTES", size)
        with closing(TextStream(path, is_json=False)) as stream:
            head = stream.head()
            runs = list(iter(lambda: stream.read(size), b""))  # ([] for an empty file)
            assert stream.is_done
    assert data.startswith(head)
    assert b"".join(runs) == data
    assert all(bytes(run).endswith(b"\n") for run in runs[:-1])
    assert stream.sha256() == hashlib.sha256(data).hexdigest()
    if data:
        assert stream.lines == count_lines(data)


def _rows(n: int, *, suffix: str) -> bytes:
    if suffix == ".csv":
        return b"model,benchmark,subtask,raw_score\n" + b"".join(
            f"model-{i:07d},GPQA,main,0.{i % 97:02d}\n".encode() for i in range(n)
        )
    return b"".join(
        f'{{"model": "model-{i:07d}", "benchmark": "GPQA", "subtask": "main", "raw_score": 0.{i % 97:02d}}}\n'.encode()
        for i in range(n)
    )


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_a_bad_byte_past_the_first_runs_has_the_whole_reads_message(
    tmp_path: Path, suffix: str
) -> None:
    """The stream stops at the run that is not UTF-8; the whole read names the line."""
    data = _rows(100_000, suffix=suffix)  # ~7 MB: several runs before the bad byte
    cut = data.index(b"model-0090000")
    path = tmp_path / f"scores{suffix}"
    path.write_bytes(data[:cut] + b"\xff" + data[cut:])
    line = data.count(b"\n", 0, cut) + 1
    with pytest.raises(InputError, match=rf"line {line}: byte 0xff is not UTF-8"):
        read_score_file(path)


def test_a_line_nested_too_deep_past_the_first_runs_is_refused_by_its_line(
    tmp_path: Path,
) -> None:
    data = _rows(50_000, suffix=".jsonl")
    deep = b'{"model": ' + b"[" * 20_000 + b"]" * 20_000 + b"}\n"
    path = tmp_path / "deep.jsonl"
    path.write_bytes(data + deep)
    with pytest.raises(InputError, match="line 50001 nests arrays or objects"):
        read_score_file(path)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_blank_lines_are_numbered_by_the_whole_read(
    tmp_path: Path, suffix: str
) -> None:
    """A blank line: the lines outnumber the rows, so the whole read numbers them."""
    lines = _rows(3, suffix=suffix).splitlines(keepends=True)
    path = tmp_path / f"scores{suffix}"
    path.write_bytes(b"".join([*lines[:-1], b"\n", lines[-1]]))
    assert tables._read_streamed(path, "csv" if suffix == ".csv" else "jsonl") is None
    batch = read_score_file(path)[0]
    assert batch.table["_row"].to_pylist()[-1] == str(len(lines) + 1)


def test_a_fifo_is_not_opened(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    os.mkfifo(path)
    with pytest.raises(InputError, match="FIFO"):
        read_score_file(path)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_an_empty_file_has_the_whole_reads_message(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"scores{suffix}"
    path.write_bytes(b"")
    with pytest.raises(InputError, match="the file is empty"):
        read_score_file(path)


def test_a_score_cell_that_is_text_has_the_whole_reads_message(tmp_path: Path) -> None:
    data = (
        _rows(20_000, suffix=".jsonl")
        + b'{"model": "x", "benchmark": "GPQA", "subtask": "main", "raw_score": "high"}\n'
    )
    path = tmp_path / "scores.jsonl"
    path.write_bytes(data)
    with pytest.raises(SchemaMismatchError, match="line 20001"):
        read_score_file(path)


def test_a_ctrl_c_stops_the_streamed_read_at_the_next_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream's blocks come through the same loop as the whole read's: it looks at the flag."""
    path = tmp_path / "scores.jsonl"
    path.write_bytes(_rows(60_000, suffix=".jsonl"))
    opened = pa_json.open_json
    taken: list[int] = []

    def blocks(*args: Any, **kwargs: Any) -> Iterator[Any]:
        for batch in opened(*args, **kwargs):
            taken.append(batch.num_rows)
            if len(taken) == 1:
                signal.raise_signal(signal.SIGINT)
            yield batch

    monkeypatch.setattr(pa_json, "open_json", blocks)
    with pytest.raises(Cancelled, match="SIGINT"), _runtime.cancellable():
        read_score_file(path)
    assert len(taken) == 1


@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_threaded_csv_read_at_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, number: int
) -> None:
    """A streamed CSV is parsed on Arrow's threads: the command stops before the read ends, the read at its next run.

    The signal lands as Arrow reads the first run (runs then come slowly, as
    from a slow disk: the whole file would take a second); the command's wait
    raises it at its next tick, and the read it abandons asks for one run more
    at most (the stream is closed as the command unwinds): the rest of the
    file is never read.
    """
    path = tmp_path / "scores.csv"
    path.write_bytes(_rows(700_000, suffix=".csv"))  # ~21 MB: ~21 runs
    read = TextStream.read
    streams: list[TextStream] = []

    def counted(self: TextStream, size: int = -1) -> memoryview:
        streams.append(self)
        if len(streams) == 1:
            signal.raise_signal(number)
        else:
            time.sleep(0.05)
        return read(self, size)

    monkeypatch.setattr(TextStream, "read", counted)
    restore = _runtime.take_signals()  # held, as the command line holds them
    try:
        with pytest.raises(Cancelled, match=signal.Signals(number).name):
            read_score_file(path)
        asked = len(streams)
        time.sleep(0.5)  # the abandoned read, left to go on
    finally:
        restore()
    assert len(streams) <= asked + 1 < 21
    assert not streams[0].is_done
    assert streams[0].closed


@pytest.mark.parametrize(("n_rows", "is_threaded"), [(3_000, False), (100_000, True)])
def test_a_streamed_csv_past_one_run_is_parsed_on_a_thread_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n_rows: int, is_threaded: bool
) -> None:
    """One run (1 MiB) or less: Arrow's streaming reader, called here; more: its threaded reader, on a thread.

    The table is the whole-file read's either way.
    """
    path = tmp_path / "scores.csv"
    path.write_bytes(_rows(n_rows, suffix=".csv"))  # ~90 kB or ~3 MB
    assert (path.stat().st_size > table_file._RUN_BYTES) == is_threaded
    called: list[tuple[str, bool]] = []  # (reader, on the calling thread)
    caller = threading.current_thread()

    def noted(name: str) -> Any:
        reader = getattr(pa_csv, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            is_here = threading.current_thread() is caller
            called.append((name, is_here))
            return reader(*args, **kwargs)

        return call

    with monkeypatch.context() as patched:
        for name in ("open_csv", "read_csv"):
            patched.setattr(pa_csv, name, noted(name))
        batch, sha256 = read_score_file(path)
    expected = ("read_csv", False) if is_threaded else ("open_csv", True)
    assert called == [expected]
    whole, whole_sha256 = _whole(path, monkeypatch)
    assert batch.table.equals(whole.table)
    assert sha256 == whole_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_line_longer_than_arrows_block_is_read(tmp_path: Path) -> None:
    """A run holds whole lines, however long: a 3 MB line is one block to Arrow.

    (The whole read, Arrow's 1 MiB blocks over the file's bytes, refuses it:
    "straddling object straddles two block boundaries".)
    """
    rows = _rows(30_000, suffix=".jsonl").splitlines(keepends=True)
    rows[20_000] = rows[20_000].replace(b"model-0020000", b"x" * 3_000_000)
    path = tmp_path / "scores.jsonl"
    path.write_bytes(b"".join(rows))
    batch, sha256 = read_score_file(path)
    models = batch.table["model"]
    assert models[20_000].as_py() == "x" * 3_000_000
    assert models[29_999].as_py() == "model-0029999"
    assert sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
