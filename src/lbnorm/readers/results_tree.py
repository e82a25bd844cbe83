"""A results tree read on every core: each file read, hashed and parsed, in path order.

A tree of thousands of files is read on every core: :func:`scan_results_files`
deals chunks of paths to forked worker processes, each of which reads, hashes
and parses its files (:func:`lbnorm.readers.harness.parse_results_file`) and
sends back only the parsed scores (a few KB, not the 130 KB file); the parent
puts them back in path order, so the output and the first error reported do not
depend on which worker finished first. Inputs of fewer than 64 files, or a
process allowed one core, are read in-process. :func:`read_results_paths` then
keeps the newest result per (variant, subtask) (:mod:`lbnorm.readers.newest`).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lbnorm._runtime import (
    Processes,
    available_cores,
    can_fork,
    check_cancelled,
    first_done,
)
from lbnorm.core.arrow import numbers, optional_numbers, string_lists, strings
from lbnorm.core.errors import InputError
from lbnorm.core.options import ProgressCallback
from lbnorm.readers.comparability import RunSettings
from lbnorm.readers.harness import (
    HarnessFile,
    Variant,
    parse_results_file,
    variant_in_file,
)
from lbnorm.readers.newest import (
    ParsedFiles,
    ResultsRead,
    SubtaskColumns,
    combine_parsed,
)

__all__ = [
    "ScannedFile",
    "parsed_columns",
    "read_results_paths",
    "scan_results_files",
]

#: Fewer results files than this are read in-process (forking costs ~10 ms).
_MIN_PARALLEL_FILES = 64
_MAX_CHUNK_FILES = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class ScannedFile:
    """One results file read, hashed and (unless its content was known) parsed.

    Attributes:
        path: The file.
        sha256: Hex sha256 of its bytes.
        size: Its size in bytes.
        parsed: The parsed file; None when it failed (see `error`) or its
            hash was the known one (nothing to parse again).
        error: Why it could not be read (then `sha256` is ``''``) or parsed,
            else None.
        variant: For a file that failed to parse: the variant its own
            config names, when it names one (:func:`variant_in_file`).
    """

    path: Path
    sha256: str = ""
    size: int = 0
    parsed: HarnessFile | None = None
    error: InputError | None = None
    variant: Variant | None = None


def parsed_columns(parsed: Sequence[HarnessFile]) -> ParsedFiles:
    """Parsed files as the columns :func:`combine_parsed` takes."""
    lengths = np.array([len(p.rows["raw_score"]) for p in parsed], dtype=np.int64)
    n_rows = int(lengths.sum())

    def column(name: str) -> Iterator[Any]:  # one column of every file's rows
        return itertools.chain.from_iterable(p.rows[name] for p in parsed)

    return ParsedFiles(
        path=[p.path for p in parsed],
        model=[p.model for p in parsed],
        precision=[p.precision for p in parsed],
        revision=[p.revision for p in parsed],
        chat_template=np.array([p.chat_template for p in parsed], dtype=bool),
        timestamp=[p.timestamp for p in parsed],
        n_ignored=np.array([p.n_ignored for p in parsed], dtype=np.int64),
        lengths=lengths,
        subtask_index=np.fromiter(column("subtask_index"), np.int64, n_rows),
        raw_score=np.fromiter(column("raw_score"), np.float64, n_rows),
        stderr=optional_numbers(list(column("stderr")), pa.float64()),
        n_samples=optional_numbers(list(column("n_samples")), pa.int64()),
        settings=RunSettings.from_files([p.rows["settings"] for p in parsed]),
        ignored=string_lists([p.ignored for p in parsed]),
    )


def read_results_paths(
    paths: Sequence[Path],
    pairs: Sequence[tuple[str, str]],
    subtask_names: SubtaskColumns,
    *,
    read: Callable[[Path], bytes],
    progress: ProgressCallback | None = None,
    workers: int | None = None,
) -> ResultsRead:
    """Read, hash and parse results files (on every core); newest result per (variant, subtask).

    The files are read and parsed by :func:`scan_results_files`, in worker
    processes when there are many; the newest result per (variant, subtask) is
    kept by :func:`lbnorm.readers.newest.combine_parsed`.

    Args:
        paths: The results files.
        pairs: The suite's (task, metric) pairs in suite order.
        subtask_names: The suite's subtask columns (:func:`subtask_columns`).
        read: Returns a file's bytes, raising :class:`InputError` if it cannot.
        progress: Called as ``progress(stage, done, total)`` as files complete.
        workers: Processes to use (default: the cores this process may run on).

    Returns:
        As :func:`lbnorm.readers.newest.combine_parsed`; ``files`` has two
        more columns, ``sha256`` and ``bytes``.

    Raises:
        InputError: A file cannot be read or parsed: the first such in `paths`,
            named in the message.
    """
    files_read: list[ScannedFile] = []
    # closed however the loop ends (an error, a Ctrl-C between two files): the
    # workers are stopped before anything is reported, not when (if ever) the
    # suspended generator is collected
    with contextlib.closing(
        scan_results_files(paths, pairs, read=read, progress=progress, workers=workers)
    ) as scanned:
        for item in scanned:  # one small record per file, in path order
            if item.error is not None:
                raise item.error
            files_read.append(item)
    # (every file read was parsed: no hash was known)
    parsed = [item.parsed for item in files_read if item.parsed is not None]
    read_ = combine_parsed(parsed_columns(parsed), pairs, subtask_names)
    hashes = strings([item.sha256 for item in files_read])
    sizes = np.array([item.size for item in files_read], dtype=np.int64)
    files = read_.files.append_column("sha256", hashes)
    files = files.append_column("bytes", numbers(sizes, pa.int64()))
    return replace(read_, files=files)


def scan_results_files(
    paths: Sequence[Path],
    pairs: Sequence[tuple[str, str]],
    *,
    read: Callable[[Path], bytes],
    known: Sequence[str | None] | None = None,
    stop_at_error: bool = True,
    progress: ProgressCallback | None = None,
    stage: str = "parsing results files",
    workers: int | None = None,
) -> Generator[ScannedFile, None, None]:
    """Read, hash and parse each file, in forked workers when it pays; yield in path order.

    With at least 64 files and more than one core, chunks of paths go to a pool
    of forked processes (one per core), each returning small parsed records
    (never a file's bytes); they are yielded in the order of `paths`, whatever
    the order the chunks finish in. Otherwise, or if the pool cannot start or
    breaks, the files are read here, one at a time.

    Args:
        paths: The results files.
        pairs: The suite's (task, metric) pairs in suite order.
        read: Returns a file's bytes, raising :class:`InputError` if it cannot.
        known: Per path, a sha256 whose parse is already known (a cache), or
            None: a file with that hash is not parsed again.
        stop_at_error: Stop at the first file that fails (it is the last one
            yielded); else every file is yielded, failed ones with their error.
        progress: Called as ``progress(stage, done, total)`` as files complete
            (in the calling process).
        stage: The stage name given to `progress`.
        workers: Processes to use (default: the cores this process may run on).

    Yields:
        One :class:`ScannedFile` per path, in order (with `stop_at_error`, up
        to the first failure).
    """
    total = len(paths)
    expected: Sequence[str | None] = [None] * total if known is None else known
    done = 0

    def report(count: int) -> None:  # once per file, as a worker's chunk arrives
        nonlocal done
        for _ in range(count):
            done += 1
            if progress is not None:
                progress(stage, done, total)

    start = 0
    count = _worker_count(total, workers)
    if count > 1:
        size = max(1, min(_MAX_CHUNK_FILES, -(-total // (count * 8))))
        chunks = [
            _Chunk(
                paths=list(paths[at : at + size]),
                known=list(expected[at : at + size]),
                pairs=list(pairs),
                read=read,
                stop_at_error=stop_at_error,
            )
            for at in range(0, total, size)
        ]
        try:  # closing: an early stop (an error, the caller's) stops the pool
            with contextlib.closing(
                _scan_in_workers(chunks, workers=count, report=report)
            ) as scanned:
                for item in scanned:
                    start += 1
                    yield item
                    if item.error is not None and stop_at_error:
                        return
            return
        except (BrokenProcessPool, OSError):  # no fork, or a worker died: go on here
            done = start
    for at in range(start, total):
        check_cancelled()
        item = _scan_file(paths[at], pairs, expected[at], read)
        report(1)
        yield item
        if item.error is not None and stop_at_error:
            return


@dataclass(frozen=True, slots=True, kw_only=True)
class _Chunk:
    """A worker's job: consecutive paths and what it needs to scan them."""

    paths: list[Path]
    known: list[str | None]
    pairs: list[tuple[str, str]]
    read: Callable[[Path], bytes]
    stop_at_error: bool


def _worker_count(total: int, workers: int | None) -> int:
    """Processes worth forking for `total` files (1: read them in-process)."""
    if workers is None:
        workers = available_cores()
    if total < _MIN_PARALLEL_FILES or workers < 2 or not can_fork():
        return 1
    return min(workers, total)


def _scan_in_workers(
    chunks: Sequence[_Chunk], *, workers: int, report: Callable[[int], None]
) -> Generator[ScannedFile, None, None]:
    """Scan chunks in a pool of forked processes; yield their files in chunk order."""
    pool = Processes(workers)
    try:
        futures = pool.submit_all(_scan_chunk, chunks)
        position = {future: at for at, future in enumerate(futures)}
        finished: dict[int, list[_Record]] = {}
        running: set[Future[list[_Record]]] = set(futures)
        for at in range(len(futures)):
            while at not in finished:  # progress counts chunks as they arrive
                ready, running = first_done(running)  # (a cancelled run stops here)
                for future in sorted(ready, key=position.__getitem__):
                    finished[position[future]] = future.result()
                    report(len(finished[position[future]]))
            for path, record in zip(chunks[at].paths, finished.pop(at), strict=False):
                yield _unpack(path, record)
    finally:  # also on an error or an early close: queued chunks are dropped
        pool.close()


def _scan_chunk(chunk: _Chunk) -> list[_Record]:
    """In a worker: scan a chunk's files in order (stopping at the first failure if asked)."""
    records: list[_Record] = []
    for path, expected in zip(chunk.paths, chunk.known, strict=True):
        scanned = _scan_file(path, chunk.pairs, expected, chunk.read)
        records.append(_pack(scanned))
        if scanned.error is not None and chunk.stop_at_error:
            break
    return records


#: The fields of a parsed file a worker sends back (the path the parent knows,
#: ``n_ignored`` is the length of ``ignored``).
_SENT = (
    "model",
    "precision",
    "revision",
    "chat_template",
    "timestamp",
    "ignored",
    "rows",
)

# What a worker sends back per file: plain builtins, which pickle in C, about a
# third of a ScannedFile's cost.
_Record = tuple[
    str,  # sha256
    int,  # size
    tuple[Any, ...] | None,  # the parsed file's _SENT fields
    InputError | None,
    Variant | None,  # a file that failed: the variant its config names
]


def _pack(scanned: ScannedFile) -> _Record:
    """A scanned file as a :data:`_Record`."""
    parsed = scanned.parsed
    sent = None if parsed is None else tuple(getattr(parsed, name) for name in _SENT)
    return scanned.sha256, scanned.size, sent, scanned.error, scanned.variant


def _unpack(path: Path, record: _Record) -> ScannedFile:
    """The :class:`ScannedFile` a :data:`_Record` stands for."""
    sha256, size, sent, error, variant = record
    parsed = None
    if sent is not None:
        fields = dict(zip(_SENT, sent, strict=True))
        parsed = HarnessFile(path=str(path), n_ignored=len(fields["ignored"]), **fields)
    return ScannedFile(
        path=path, sha256=sha256, size=size, parsed=parsed, error=error, variant=variant
    )


def _scan_file(
    path: Path,
    pairs: Sequence[tuple[str, str]],
    expected: str | None,
    read: Callable[[Path], bytes],
) -> ScannedFile:
    """Read, hash and parse one file; a failure is returned, not raised."""
    try:
        data = read(path)
    except InputError as exc:
        return ScannedFile(path=path, error=exc)
    digest = hashlib.sha256(data).hexdigest()
    if digest == expected:
        return ScannedFile(path=path, sha256=digest, size=len(data))
    try:
        parsed = parse_results_file(path, data, pairs)
    except InputError as exc:
        variant = variant_in_file(path, data)  # (a failed file only)
        return ScannedFile(
            path=path, sha256=digest, size=len(data), error=exc, variant=variant
        )
    return ScannedFile(path=path, sha256=digest, size=len(data), parsed=parsed)
