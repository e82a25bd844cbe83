"""One table file into Arrow, for every reader: scores, battles, metadata, samples.

The one map from suffix to format is :data:`lbnorm.core.files.FILE_FORMATS`;
each reader names the formats it takes (:func:`table_format`). Text tables
(CSV, JSON lines) are parsed by Arrow's streaming readers a block (1 MiB by
default) at a time, the cancellation flag looked at between blocks, so a Ctrl-C
waits for one block, not the file; a CSV file streamed from the disk
(:class:`TextStream`) past its first run is parsed by Arrow's threaded reader,
on every core, on a thread whose wait looks at the flag: a Ctrl-C waits for a
tick. A file the streaming read cannot take in one schema (a column whose type
widens past the first block) is read again whole: Arrow's whole-file reader
widens such a column, and its table (or its error) is the one a reader gets. A
JSON line long enough to nest past what Arrow's parser follows is measured
before Arrow sees it, and refused if it nests deeper than
:data:`MAX_JSON_DEPTH`: the parser recurses, and nested deep enough it
overflows the stack and the process dies.

Rows are numbered as the file counts them (:class:`RowNumbers`,
:func:`text_rows`): in a CSV the header is line 1, so the first data row is
line 2; in JSON lines a row is its line; quoted cells spanning several lines
and blank lines are counted exactly (a record ends at a newline outside double
quotes, as RFC 4180 quoting has it).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from lbnorm._runtime import beside, check_cancelled
from lbnorm.core.errors import InputError
from lbnorm.core.files import (
    FILE_FORMATS,
    FileFormat,
    check_regular_file,
    file_format,
    read_bytes,
)

__all__ = [
    "MAX_JSON_DEPTH",
    "IrregularError",
    "RowNumbers",
    "TextStream",
    "check_json_depth",
    "check_utf8",
    "count_lines",
    "read_csv",
    "read_jsonl",
    "read_parquet",
    "table_format",
    "text_rows",
]

#: The deepest nesting of arrays and objects read from a JSON file: far past any
#: real row (scores are flat; a battle's or a sample's fields nest a few levels)
#: and far below what overflows Arrow's parser (about 15,000).
MAX_JSON_DEPTH = 1_000

#: How rows are counted in messages: ``line`` in text files, ``row`` elsewhere.
RowUnit = Literal["line", "row"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RowNumbers:
    """Where each row of a table sits in its file, for messages.

    Attributes:
        unit: ``line`` (CSV, JSONL) or ``row`` (Parquet, frames).
        first: The first row's number (rows then follow one per line or row).
        lines: Each row's number, when rows do not follow one per line (quoted
            newlines, blank lines); None otherwise.

    Examples:
        >>> RowNumbers(unit="line", first=2).where(3)
        'line 5'
    """

    unit: RowUnit
    first: int
    lines: npt.NDArray[np.int64] | None = None

    def where(self, position: int) -> str:
        """``line N`` or ``row N`` for the row at `position` (0-based)."""
        if self.lines is not None:
            return f"{self.unit} {self.lines[position]}"
        return f"{self.unit} {self.first + position}"


def table_format(
    path: Path, *, allowed: Collection[FileFormat], what: str = ""
) -> FileFormat:
    """The format `path`'s suffix says, if the reader (of `what`) takes it.

    Raises:
        InputError: Another suffix; the hint lists the ones taken.
    """
    kind = file_format(path)
    if kind is None or kind not in allowed:
        suffixes = sorted(s for s, k in FILE_FORMATS.items() if k in allowed)
        msg = f"{path}: unsupported {what + ' ' if what else ''}file type {path.suffix!r}.\nHint: use one of {suffixes}."
        raise InputError(msg)
    return kind


def check_utf8(path: Path, data: bytes) -> None:
    """Refuse bytes that are not UTF-8, naming the line of the first bad byte.

    Raises:
        InputError: A byte that is not UTF-8.
    """
    if data.isascii():  # the common case, checked in C at memory speed
        return
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        msg = f"{path}: line {line}: byte {data[exc.start]:#04x} is not UTF-8.\nHint: re-save the file as UTF-8."
        raise InputError(msg) from exc


class IrregularError(Exception):
    """A :class:`TextStream`'s file is not one it reads (not UTF-8, a line nested too deep)."""


class TextStream:
    """A CSV or JSON-lines file read once, in runs of whole lines, for Arrow to parse as they come.

    Each run handed on is hashed, its lines counted and checked as the
    whole-file read checks its bytes (UTF-8; no JSON line nested past
    :data:`MAX_JSON_DEPTH`), so the file is never held whole in memory: fresh
    pages are slow to touch on these machines, and a file's bytes are the
    largest allocation of its read. A run that fails a check raises
    :class:`IrregularError` (through Arrow); the caller then reads the file whole,
    and that read words the message. Arrow takes it as ``pa.PythonFile(stream)``.
    """

    closed = False

    def __init__(self, path: Path, *, is_json: bool) -> None:
        check_regular_file(path)  # (a FIFO is not opened: nothing waits for a writer)
        self.path, self._is_json = path, is_json
        self._file = path.open("rb", buffering=0)
        self.size = os.fstat(self._file.fileno()).st_size  # (bytes, as opened)
        self._reading = threading.Lock()
        self._hash = hashlib.sha256()
        self._newlines, self._last = 0, b"\n"
        self.is_done = False  # every byte of the file handed on

    def head(self) -> bytes:
        """The first bytes, through the newline ending the first line not blank (or all).

        At most :data:`_HEAD_BYTES` and a run: past that, what was read. Read
        again by :meth:`read`.
        """
        held = b""
        while len(held) < _HEAD_BYTES and (more := self._file.read(_RUN_BYTES)):
            held += more
            found = _NON_SPACE.search(held)
            if found and held.find(b"\n", found.start()) >= 0:
                break
        self._file.seek(0)
        return held

    def read(self, size: int = -1) -> memoryview:
        """Whole lines, about `size` bytes and at least a line (the rest at the file's end), checked.

        A run ends at its last newline; the file is read again from there.
        """
        with self._reading:  # (not closed under a read: see close)
            step = max(size, _RUN_BYTES)
            run = self._file.read(step)
            cut = run.rfind(b"\n") + 1
            while run and not cut:  # a line longer than a run, or the file's last
                more = self._file.read(step)
                run, step = run + more, step * 2  # (doubling: linear in its length)
                cut = run.rfind(b"\n") + 1 if more else len(run)
            self._file.seek(cut - len(run), os.SEEK_CUR)
        self._check(run, cut)
        self.is_done = not cut
        return memoryview(run)[:cut]  # (no copy: Arrow keeps the bytes alive)

    def _check(self, run: bytes, cut: int) -> None:
        """Hash, count and check ``run[:cut]`` (past the cut: a line's start, read again)."""
        whole = memoryview(run)[:cut]
        self._hash.update(whole)  # (hashlib releases the GIL: Arrow's threads go on)
        self._newlines += run.count(b"\n", 0, cut)
        self._last = run[cut - 1 : cut] or self._last
        try:
            if not run.isascii():
                str(whole, "utf-8")
            if self._is_json:  # (a line's start measures no deeper than the line)
                check_json_depth(run, self.path)
        except (UnicodeDecodeError, InputError):
            raise IrregularError from None

    @property
    def lines(self) -> int:
        """The lines handed on, as :func:`count_lines` counts them."""
        return self._newlines + (self._last != b"\n")

    def sha256(self) -> str:
        """The hex sha256 of the bytes handed on."""
        return self._hash.hexdigest()

    def close(self) -> None:
        """Close the file once a run under way is read; Arrow reads no more of it.

        A cancelled run closes it under a read it abandoned (:func:`read_csv`),
        which stops there.
        """
        with self._reading:
            self._file.close()
            self.closed = True


#: Bytes read from a :class:`TextStream`'s file at a time, at least; and the
#: most :meth:`TextStream.head` looks through for the first line.
_RUN_BYTES = 1 << 20
_HEAD_BYTES = 1 << 24
_NON_SPACE = re.compile(rb"\S")


def read_csv(
    source: bytes | Path | TextStream,
    *,
    convert: pa_csv.ConvertOptions | None = None,
) -> pa.Table:
    """A CSV file (or its bytes, or a stream of it) as Arrow, a block at a time.

    See the module docstring. A stream is read once: one of a run or less by
    the streaming reader (a read that needs the whole file raises Arrow's
    streaming error), a longer one by Arrow's threaded reader, beside.

    Raises:
        pa.ArrowException: Arrow cannot read it (the whole-file reader's error).
        OSError: The file cannot be read.
        IrregularError: A stream's file fails a check.
        Cancelled: A Ctrl-C or SIGTERM, seen between two blocks (a stream
            read by the threaded reader: at the wait's next tick).
    """

    def stream() -> Iterator[pa.RecordBatch]:
        return pa_csv.open_csv(_opened(source), convert_options=convert)  # type: ignore[no-any-return]

    def whole() -> pa.Table:
        # (Arrow's own reader stops on a Ctrl-C in the main thread: ArrowCancelled)
        return pa_csv.read_csv(_opened(source), convert_options=convert)

    if isinstance(source, TextStream):
        if source.size > _RUN_BYTES:  # read once, its blocks parsed on every
            # core (the streaming reader parses on one), on a thread whose wait
            # looks at the flag each tick; abandoned, it stops as the stream
            # closes. (A run or less: one block, and a thread would cost more.)
            return beside(whole).result()
        return _in_blocks(stream, None)
    return _in_blocks(stream, whole)


def _opened(source: bytes | Path | TextStream) -> pa.NativeFile | str:
    if isinstance(source, TextStream):
        return pa.PythonFile(source, mode="r")
    return str(source) if isinstance(source, Path) else pa.BufferReader(source)


def read_jsonl(
    source: bytes | Path | TextStream,
    path: Path | None = None,
    *,
    parse: pa_json.ParseOptions | None = None,
    block_size: int | None = None,
) -> pa.Table:
    """A JSON-lines file as Arrow, a block at a time (see the module docstring).

    Args:
        source: The file's bytes, the file, or a stream of it (read once: a
            read that needs the whole file raises Arrow's streaming error).
        path: The file, for messages (default: `source`).
        parse: Arrow's parse options (an explicit schema, unexpected fields).
        block_size: Bytes per block (a line must fit in one); Arrow's default.

    Raises:
        InputError: A line nests deeper than :data:`MAX_JSON_DEPTH`.
        pa.ArrowException: Arrow cannot read it (the whole-file reader's error).
        IrregularError: A stream's file fails a check.
        Cancelled: A Ctrl-C or SIGTERM, seen between two blocks.
    """
    if isinstance(source, Path):
        path, source = source, read_bytes(source)
    if isinstance(source, bytes):  # (a stream checks its own runs)
        check_json_depth(source, path or Path("<data>"))  # before Arrow: it would crash
    data = source
    options = pa_json.ReadOptions(block_size=block_size) if block_size else None

    def stream() -> Iterator[pa.RecordBatch]:
        return pa_json.open_json(  # type: ignore[no-any-return]
            _opened(data), read_options=options, parse_options=parse
        )

    def whole() -> pa.Table:
        def read() -> pa.Table:
            return pa_json.read_json(
                _opened(data), read_options=options, parse_options=parse
            )

        # on a thread whose wait looks at the flag each tick (Arrow's JSON
        # reader has no cancellation of its own); abandoned, it ends by itself
        return beside(read).result()

    return _in_blocks(stream, None if isinstance(data, TextStream) else whole)


def _in_blocks(
    stream: Callable[[], Iterator[pa.RecordBatch]],
    whole: Callable[[], pa.Table] | None,
) -> pa.Table:
    """The streaming read's table, or the whole read's (if any) if the stream failed."""
    try:
        reader = stream()
        batches = []
        for batch in reader:
            check_cancelled()  # a cancelled run stops between two blocks
            batches.append(batch)
        return pa.Table.from_batches(batches, schema=reader.schema)  # type: ignore[attr-defined]
    except pa.ArrowInvalid:
        check_cancelled()
        if whole is None:
            raise
    try:
        return whole()
    except pa.ArrowException:
        check_cancelled()  # (Arrow stopped for the signal: the run's, not an error)
        raise


#: A line of fewer than twice this many bytes cannot nest deep enough to hurt
#: Arrow's parser; longer lines are found by looking for a newline in each such
#: window of the file.
_WINDOW = 4096
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')


def check_json_depth(data: bytes, path: Path) -> None:
    """Refuse JSON lines nested deeper than :data:`MAX_JSON_DEPTH`, before Arrow parses them.

    Cheap: only lines long enough to nest past what Arrow follows (8 KiB and
    more; a shorter one nests 4,096 deep at most), found window by window, are
    measured, by their brackets outside strings.

    Raises:
        InputError: A line nests too deep; the message names it.
    """
    find = data.find
    start = 0
    while start < len(data):
        if find(b"\n", start, start + _WINDOW) >= 0:
            start += _WINDOW
            continue
        first = data.rfind(b"\n", 0, start) + 1
        end = find(b"\n", start)
        end = len(data) if end < 0 else end
        line = data[first:end]
        if (
            line.count(b"[") + line.count(b"{") > MAX_JSON_DEPTH
            and _depth(line) > MAX_JSON_DEPTH
        ):
            number = data.count(b"\n", 0, first) + 1
            msg = (
                f"{path}: line {number} nests arrays or objects more than "
                f"{MAX_JSON_DEPTH:,} levels deep.\nHint: a row's values nest a few "
                "levels at most; the file may be damaged or not a table."
            )
            raise InputError(msg)
        start = end + 1


def _depth(line: bytes) -> int:
    """The deepest nesting of a JSON text's arrays and objects (strings left out)."""
    plain = np.frombuffer(_STRING.sub(b'""', line), dtype=np.uint8)
    steps = np.isin(plain, (ord("["), ord("{"))).astype(np.int32)
    steps -= np.isin(plain, (ord("]"), ord("}")))
    return int(np.cumsum(steps).max(initial=0))


def read_parquet(
    path: Path, *, columns: list[str] | None = None, text: Collection[str] = ()
) -> pa.Table:
    """A Parquet file (or a dataset folder) as Arrow, `text` columns as dictionaries.

    Raises:
        pa.ArrowException, OSError: Arrow cannot read it.
    """
    if path.is_dir():  # a dataset directory named *.parquet
        return pq.read_table(path, columns=columns, read_dictionary=list(text))
    # one file: ParquetFile spares importing pyarrow.dataset (and pandas)
    return pq.ParquetFile(path, read_dictionary=list(text)).read(columns=columns)


def text_rows(
    data: bytes,
    kind: FileFormat,
    n_rows: int | None = None,
    *,
    lines: int | None = None,
) -> RowNumbers:
    """Where each row of a CSV or JSON-lines file is: its line, as the file counts them.

    Args:
        data: The file's bytes.
        kind: ``csv`` or ``jsonl``.
        n_rows: The rows a reader found (checked against the lines; ``row N``
            numbering if they disagree); None: every row the lines hold.
        lines: :func:`count_lines` of `data`, if counted already (beside the parse).
    """
    header = int(kind == "csv")  # a CSV's line 1
    lines = count_lines(data) if lines is None else lines
    if lines == (n_rows or 0) + header:  # a row a line
        return RowNumbers(unit="line", first=1 + header)
    starts = _record_lines(data, is_quoted=kind == "csv")
    if n_rows is not None and starts.size != n_rows + header:  # quoting not followed
        return RowNumbers(unit="row", first=1)
    starts = starts[header:]
    first = int(starts[0]) if starts.size else 1 + header
    return RowNumbers(unit="line", first=first, lines=starts)


#: Bytes compared at a time when counting newlines (a mask of this size at most).
_COUNT_BYTES = 1 << 22


def count_lines(data: bytes) -> int:
    """The lines of a text file (a last line without its newline counts too).

    Counted by numpy a block at a time, which releases the GIL: a thread can
    count while another parses.
    """
    buffer = np.frombuffer(data, dtype=np.uint8)
    newlines = sum(
        int(np.count_nonzero(buffer[start : start + _COUNT_BYTES] == ord("\n")))
        for start in range(0, buffer.size, _COUNT_BYTES)
    )
    return newlines + (0 if data.endswith(b"\n") else 1)


def _record_lines(data: bytes, *, is_quoted: bool) -> npt.NDArray[np.int64]:
    """The line each record that is not blank starts on (1-based).

    A record ends at a newline; with `is_quoted` (a CSV), only at one outside
    double quotes (an even number of them before it), and a blank record is
    empty or a lone carriage return; else (JSON lines) a blank record holds
    ASCII whitespace only, as ``bytes.strip`` strips it.
    """
    buffer = np.frombuffer(data, dtype=np.uint8)
    newlines = np.flatnonzero(buffer == ord("\n"))
    ends = newlines
    if is_quoted:
        quotes = np.flatnonzero(buffer == ord('"'))
        ends = newlines[np.searchsorted(quotes, newlines) % 2 == 0]
    starts = np.r_[0, ends + 1]
    stops = np.r_[ends, len(data)]
    width = stops - starts
    if is_quoted:
        last = buffer[np.maximum(stops - 1, 0)] if len(data) else np.zeros_like(stops)
        is_blank = width - ((width > 0) & (last == ord("\r"))) <= 0
    else:  # a record opening with whitespace (few: blank lines) is looked at whole
        is_blank = width == 0
        opens = np.flatnonzero(~is_blank)
        opens = opens[_IS_SPACE[buffer[starts[opens]]]]
        for at in opens.tolist():
            is_blank[at] = not data[starts[at] : stops[at]].strip()
    first_lines: npt.NDArray[np.int64] = np.searchsorted(newlines, starts[~is_blank])
    return first_lines + 1


#: Per byte value, whether ``bytes.strip`` strips it (ASCII whitespace).
_IS_SPACE = np.isin(np.arange(256), list(b" \t\n\r\x0b\x0c"))
