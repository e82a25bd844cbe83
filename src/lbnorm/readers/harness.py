"""lm-evaluation-harness results files, single or as leaderboard trees.

A leaderboard keeps one file per run, ``<org>/<model>/results_<ISO timestamp>.json``.
For each file this reader takes the suite's ``results[task][metric]`` values
(never ``groups``, which can hold stale values after a re-scoring), their
``*_stderr`` (``"N/A"`` becomes null) and ``n-samples``, and the model variant:
name from ``model_name`` / ``config.model_name`` / ``model_args`` ``pretrained=`` /
the path; precision from ``config.model_dtype`` or ``dtype=``; revision from
``config.model_sha`` / ``model_revision`` / ``revision=``; chat template applied
when ``chat_template`` is not null. Tasks the suite does not use are counted, not
read. When several files describe one variant, the newest timestamp wins (ties
broken by path) and the others are reported as superseded.

A tree of thousands of files is read on every core: :func:`scan_results_files`
deals chunks of paths to forked worker processes, each of which reads, hashes
and parses its files and sends back only the parsed scores (a few KB, not the
130 KB file); the parent puts them back in path order, so the output and the
first error reported do not depend on which worker finished first. Inputs of
fewer than 64 files, or a process allowed one core, are read in-process.

JSON parser: msgspec, decoding only the keys read here (``results``, ``config``,
``n-samples``, ``model_name``, ``chat_template``, ``date``) into a Struct and
skipping the rest (``configs``, with its prompts and few-shot samples, is 70% of
a leaderboard file) without building Python objects for it: 0.18 ms per 130 KB
file, against 0.34 ms for orjson's full parse and 1.0 ms for ``json`` (see
``benchmarks_perf/README.md``). A file that is not pure ASCII (msgspec does not
check the UTF-8 of what it skips), or that msgspec refuses (NaN, Infinity, lone
surrogate escapes, integers beyond 64 bits where a score is read), goes to
orjson, then to ``json``, which decides and words the error. Without msgspec
(the ``fast`` extra) orjson parses; without either, ``json``. One difference
remains by design: an integer of more than 4,300 digits in a part never read
was a ``json`` error and is now skipped.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import hashlib
import json
import math
import multiprocessing
import os
import re
import reprlib
from collections.abc import Callable, Generator, Iterable, Sequence, Sized
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lbnorm.errors import InputError
from lbnorm.forking import available_cores, can_fork, start_worker
from lbnorm.options import ProgressCallback
from lbnorm.schemas import KEY_COLUMNS, SCORES

__all__ = [
    "HarnessFile",
    "ScannedFile",
    "find_results_files",
    "parse_results_file",
    "read_results_files",
    "read_results_paths",
    "scan_results_files",
]

_TIMESTAMP = re.compile(
    r"results_(\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)"
)
_loads: Callable[[bytes], Any]
try:  # orjson parses the 120 KB files about 3x faster than json
    import orjson

    _loads = orjson.loads
    _DECODE_ERRORS: tuple[type[Exception], ...] = (
        orjson.JSONDecodeError,
        RecursionError,
    )
except ImportError:  # pragma: no cover - orjson is an optional extra
    _loads = json.loads
    _DECODE_ERRORS = (ValueError, RecursionError)
_decode_read_keys: Callable[[bytes], Any] | None = None
_SKIP_ERRORS: tuple[type[Exception], ...] = ()
try:  # msgspec skips the parts of a file this reader never looks at
    import msgspec
except ImportError:  # pragma: no cover - msgspec is an optional extra
    pass
else:

    class _ReadKeys(msgspec.Struct):
        """The top-level keys :func:`parse_results_file` reads; others are skipped."""

        results: Any = None
        config: Any = None
        n_samples: Any = msgspec.field(default=None, name="n-samples")
        model_name: Any = None
        chat_template: Any = None
        date: Any = None

    _decode_read_keys = msgspec.json.Decoder(_ReadKeys).decode
    _SKIP_ERRORS = (msgspec.DecodeError, RecursionError)
#: Fewer results files than this are read in-process (forking costs ~10 ms).
_MIN_PARALLEL_FILES = 64
_MAX_CHUNK_FILES = 64
_MAX_INT64 = 2**63 - 1
_REPR = reprlib.Repr()  # bounded reprs for messages, even of 100,000-deep values
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60
_shown = _REPR.repr


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessFile:
    """One parsed results file: its variant, run time and the suite's scores.

    Attributes:
        path: The file.
        model, precision, revision, chat_template: The model variant.
        timestamp: Run time (UTC ISO string) used to pick the newest file.
        rows: Columns of the file's scores (``subtask_index``, ``raw_score``,
            ``stderr``, ``n_samples``, ``key``), one entry per suite subtask found.
        n_ignored: Result entries the suite does not use.
    """

    path: str
    model: str
    precision: str
    revision: str
    chat_template: bool
    timestamp: str
    rows: dict[str, list[Any]]
    n_ignored: int


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
    """

    path: Path
    sha256: str
    size: int
    parsed: HarnessFile | None
    error: InputError | None


def find_results_files(directory: Path) -> list[Path]:
    """Return the ``results_*.json`` files under `directory`, sorted.

    Raises:
        InputError: None were found.
    """
    files = sorted(path for path in directory.rglob("results_*.json") if path.is_file())
    if not files:
        msg = (
            f"{directory}: no results_*.json files found in this directory tree.\n"
            "Hint: point lbnorm at a leaderboard tree (<org>/<model>/results_<timestamp>.json) "
            "or at score tables (.csv, .jsonl, .parquet)."
        )
        raise InputError(msg)
    return files


def parse_results_file(
    path: Path, data: bytes, pairs: Sequence[tuple[str, str]]
) -> HarnessFile:
    """Parse one results file's bytes, extracting the suite's (task, metric) pairs.

    Args:
        path: The file (for messages and the path-derived model name).
        data: Its bytes.
        pairs: The suite's (task, metric) pairs, in suite order.

    Returns:
        The parsed file.

    Raises:
        InputError: Not JSON, no ``results`` object, a score that is not a
            number, or no model name anywhere.
    """
    document = _decode(path, data)
    if not isinstance(document, dict):
        msg = f"{path}: expected a JSON object at the top level, got {type(document).__name__}.\nHint: is this an lm-evaluation-harness results file?"
        raise InputError(msg)
    results = document.get("results")
    if not isinstance(results, dict):
        msg = (
            f"{path}: 'results' is {'missing' if results is None else 'not an object'}.\n"
            "Hint: lbnorm reads lm-evaluation-harness results files, whose scores are under 'results'."
        )
        raise InputError(msg)
    config = document.get("config") if isinstance(document.get("config"), dict) else {}
    assert isinstance(config, dict)
    args = _parse_model_args(config.get("model_args"))
    model = _first_text(
        document.get("model_name"), config.get("model_name"), args.get("pretrained")
    )
    model = model or _model_from_path(path)
    if not model:
        msg = f'{path}: no model name (model_name, config.model_name, model_args pretrained=) and the path is not <org>/<model>/results_*.json.\nHint: add "model_name" to the file or use the leaderboard layout.'
        raise InputError(msg)
    precision = _first_text(config.get("model_dtype"), args.get("dtype")).removeprefix(
        "torch."
    )
    revision = _first_text(
        config.get("model_sha"), config.get("model_revision"), args.get("revision")
    )
    rows: dict[str, list[Any]] = {
        "subtask_index": [],
        "raw_score": [],
        "stderr": [],
        "n_samples": [],
        "key": [],
    }
    counts = (
        document.get("n-samples") if isinstance(document.get("n-samples"), dict) else {}
    )
    assert isinstance(counts, dict)
    used_tasks: set[str] = set()
    keys = _result_keys(pairs)
    for index, (task, metric) in enumerate(pairs):  # the suite's subtasks, not rows
        entry = results.get(task)
        if entry is not None and not isinstance(entry, dict):
            msg = f"{path}: results[{task!r}] is {_shown(entry)}, not an object.\nHint: each results entry maps metric names to numbers; fix or re-run this task."
            raise InputError(msg)
        if entry is None or metric not in entry:
            continue
        used_tasks.add(task)
        key = keys[index]
        value = entry[metric]
        if isinstance(value, bool) or not isinstance(value, int | float):
            msg = f"{path}: {key} is {_shown(value)}, not a number.\nHint: fix or re-run this task; scores must be JSON numbers."
            raise InputError(msg)
        rows["subtask_index"].append(index)
        rows["raw_score"].append(float(value))
        rows["stderr"].append(_stderr(entry, metric))
        rows["n_samples"].append(_n_samples(counts.get(task)))
        rows["key"].append(key)
    names = {"model name": model, "precision": precision, "revision": revision}
    for what, text in names.items():
        _check_unicode(path, what, text)
    return HarnessFile(
        path=str(path),
        model=model,
        precision=precision,
        revision=revision,
        chat_template=document.get("chat_template") is not None,
        timestamp=_timestamp(path, document.get("date")),
        rows=rows,
        n_ignored=len(set(results) - used_tasks),
    )


def read_results_files(
    files: Iterable[tuple[Path, bytes]],
    pairs: Sequence[tuple[str, str]],
    subtask_names: pd.DataFrame,
    *,
    progress: ProgressCallback | None = None,
    total: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Parse results files and keep the newest file per model variant.

    Args:
        files: (path, bytes) of each results file; consumed once, so a generator
            keeps one file's bytes in memory at a time.
        pairs: The suite's (task, metric) pairs in suite order.
        subtask_names: The suite's ``benchmark``, ``subtask`` and ``metric`` in
            the same order.
        progress: Called as ``progress(stage, done, total)`` after each file.
        total: How many files `files` yields, for progress (default: its length).

    Returns:
        The scores (:data:`SCORES` columns plus ``_row``, the results key) and a
        frame of files: ``path``, the variant keys, ``timestamp``, ``rows``,
        ``n_ignored`` and ``superseded_by`` (null for the file used).
    """
    parsed: list[HarnessFile] = []
    if total is None and isinstance(files, Sized):
        total = len(files)
    for path, data in files:
        parsed.append(parse_results_file(path, data, pairs))
        if progress is not None:
            progress("parsing results files", len(parsed), total or len(parsed))
    return _combine(parsed, subtask_names)


def read_results_paths(
    paths: Sequence[Path],
    pairs: Sequence[tuple[str, str]],
    subtask_names: pd.DataFrame,
    *,
    read: Callable[[Path], bytes],
    progress: ProgressCallback | None = None,
    workers: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read, hash and parse results files (on every core) and keep the newest per variant.

    As :func:`read_results_files`, from paths: the files are read and parsed by
    :func:`scan_results_files`, in worker processes when there are many.

    Args:
        paths: The results files.
        pairs: The suite's (task, metric) pairs in suite order.
        subtask_names: The suite's ``benchmark``, ``subtask`` and ``metric`` in
            the same order.
        read: Returns a file's bytes, raising :class:`InputError` if it cannot.
        progress: Called as ``progress(stage, done, total)`` as files complete.
        workers: Processes to use (default: the cores this process may run on).

    Returns:
        The scores and the file catalog of :func:`read_results_files`, whose
        catalog has two more columns: ``sha256`` and ``bytes``.

    Raises:
        InputError: A file cannot be read or parsed: the first such in `paths`,
            named in the message.
    """
    parsed: list[HarnessFile] = []
    hashes: list[str] = []
    sizes: list[int] = []
    scanned = scan_results_files(
        paths, pairs, read=read, progress=progress, workers=workers
    )
    for item in scanned:  # one small record per file, in path order
        if item.error is not None:
            scanned.close()  # stop the workers before reporting
            raise item.error
        assert item.parsed is not None
        parsed.append(item.parsed)
        hashes.append(item.sha256)
        sizes.append(item.size)
    scores, catalog = _combine(parsed, subtask_names)
    return scores, catalog.assign(sha256=hashes, bytes=sizes)


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
    pool = ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=start_worker,
        initargs=(os.getpid(),),
    )
    try:
        futures = [pool.submit(_scan_chunk, chunk) for chunk in chunks]
        position = {future: at for at, future in enumerate(futures)}
        finished: dict[int, list[_Record]] = {}
        running: set[Future[list[_Record]]] = set(futures)
        keys = _result_keys(chunks[0].pairs) if chunks else []
        for at in range(len(futures)):
            while at not in finished:  # progress counts chunks as they arrive
                ready, running = wait(running, return_when=FIRST_COMPLETED)
                for future in sorted(ready, key=position.__getitem__):
                    finished[position[future]] = future.result()
                    report(len(finished[position[future]]))
            for path, record in zip(chunks[at].paths, finished.pop(at), strict=False):
                yield _unpack(path, record, keys)
    finally:  # also on an error or an early close: queued chunks are dropped
        pool.shutdown(wait=True, cancel_futures=True)


def _scan_chunk(chunk: _Chunk) -> list[_Record]:
    """In a worker: scan a chunk's files in order (stopping at the first failure if asked)."""
    records: list[_Record] = []
    for path, expected in zip(chunk.paths, chunk.known, strict=True):
        scanned = _scan_file(path, chunk.pairs, expected, chunk.read)
        records.append(_pack(scanned))
        if scanned.error is not None and chunk.stop_at_error:
            break
    return records


# What a worker sends back per file: plain builtins, which pickle in C, about a
# third of a ScannedFile's cost; the path and the results keys the parent knows.
_Record = tuple[
    str,  # sha256
    int,  # size
    tuple[str, str, str, bool, str, int, list[int], list[float], list[Any], list[Any]]
    | None,  # model, precision, revision, chat_template, timestamp, n_ignored, rows
    InputError | None,
]


def _pack(scanned: ScannedFile) -> _Record:
    """A scanned file as a :data:`_Record`."""
    parsed = scanned.parsed
    fields = None
    if parsed is not None:
        fields = (
            parsed.model,
            parsed.precision,
            parsed.revision,
            parsed.chat_template,
            parsed.timestamp,
            parsed.n_ignored,
            parsed.rows["subtask_index"],
            parsed.rows["raw_score"],
            parsed.rows["stderr"],
            parsed.rows["n_samples"],
        )
    return scanned.sha256, scanned.size, fields, scanned.error


def _unpack(path: Path, record: _Record, keys: Sequence[str]) -> ScannedFile:
    """The :class:`ScannedFile` a :data:`_Record` stands for."""
    sha256, size, fields, error = record
    parsed = None
    if fields is not None:
        model, precision, revision, chat, timestamp, n_ignored, index, *rows = fields
        parsed = HarnessFile(
            path=str(path),
            model=model,
            precision=precision,
            revision=revision,
            chat_template=chat,
            timestamp=timestamp,
            rows={
                "subtask_index": index,
                "raw_score": rows[0],
                "stderr": rows[1],
                "n_samples": rows[2],
                "key": [keys[at] for at in index],
            },
            n_ignored=n_ignored,
        )
    return ScannedFile(path=path, sha256=sha256, size=size, parsed=parsed, error=error)


def _result_keys(pairs: Sequence[tuple[str, str]]) -> list[str]:
    """Per suite subtask, where a results file keeps its score (for messages)."""
    return _keys_of(tuple(pairs))


@functools.lru_cache(maxsize=8)  # one suite per run: made once, not per file
def _keys_of(pairs: tuple[tuple[str, str], ...]) -> list[str]:
    return [f"results[{task!r}][{metric!r}]" for task, metric in pairs]


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
        return ScannedFile(path=path, sha256="", size=0, parsed=None, error=exc)
    digest = hashlib.sha256(data).hexdigest()
    parsed, error = None, None
    if digest != expected:
        try:
            parsed = parse_results_file(path, data, pairs)
        except InputError as exc:
            error = exc
    return ScannedFile(
        path=path, sha256=digest, size=len(data), parsed=parsed, error=error
    )


def _combine(
    parsed: Sequence[HarnessFile], subtask_names: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The newest file per variant: its scores, and the catalog of every file."""
    catalog = pd.DataFrame(
        {
            "path": [p.path for p in parsed],
            "model": [p.model for p in parsed],
            "precision": [p.precision for p in parsed],
            "revision": [p.revision for p in parsed],
            "chat_template": [p.chat_template for p in parsed],
            "timestamp": [p.timestamp for p in parsed],
            "rows": [len(p.rows["raw_score"]) for p in parsed],
            "n_ignored": [p.n_ignored for p in parsed],
        }
    )
    order = catalog.sort_values([*KEY_COLUMNS, "timestamp", "path"]).index
    newest = (
        catalog.loc[order]
        .groupby(list(KEY_COLUMNS), sort=False)["path"]
        .transform("last")
    )
    catalog["superseded_by"] = newest.where(
        newest != catalog.loc[order, "path"]
    ).reindex(catalog.index)
    _check_ties(parsed, catalog)
    kept = [
        p
        for p, is_superseded in zip(
            parsed, catalog["superseded_by"].notna(), strict=True
        )
        if not is_superseded
    ]
    # text columns are built as Arrow string arrays of the few distinct values,
    # then taken per row: no conversion of 180k Python strings per column
    lengths = [len(p.rows["raw_score"]) for p in kept]
    owner = np.repeat(np.arange(len(kept)), lengths)  # each row's file
    index = np.array([i for p in kept for i in p.rows["subtask_index"]], dtype=np.int64)
    distinct: dict[str, int] = {}
    key_codes = [
        distinct.setdefault(k, len(distinct)) for p in kept for k in p.rows["key"]
    ]

    text: Any = "str" if len(index) else object  # no rows: untyped, as always

    def per_file(values: list[str]) -> Any:
        return pd.array(values, dtype="str").take(owner).astype(text)

    def per_subtask(column: str) -> Any:
        values = pd.array(subtask_names[column].to_numpy(), dtype="str")
        return values.take(index).astype(text)

    scores = pd.DataFrame(
        {
            "model": per_file([p.model for p in kept]),
            "precision": per_file([p.precision for p in kept]),
            "revision": per_file([p.revision for p in kept]),
            "chat_template": np.array([p.chat_template for p in kept], dtype=bool)[
                owner
            ],
            "benchmark": per_subtask("benchmark"),
            "subtask": per_subtask("subtask"),
            "metric": per_subtask("metric"),
            "raw_score": pd.Series(
                [v for p in kept for v in p.rows["raw_score"]], dtype="float64"
            ),
            "stderr": pd.Series(
                [v for p in kept for v in p.rows["stderr"]], dtype="float64"
            ),
            "n_samples": pd.Series(
                [v for p in kept for v in p.rows["n_samples"]], dtype="Int64"
            ),
            "source": per_file([p.path for p in kept]),
            "_row": pd.array(list(distinct), dtype="str").take(
                np.array(key_codes, dtype=np.int64)
            ),
        }
    )
    return scores[[*SCORES.names, "_row"]], catalog


def _check_ties(parsed: Sequence[HarnessFile], catalog: pd.DataFrame) -> None:
    """Files of one variant with the same run time must agree: neither is newer."""
    is_tied = catalog.duplicated([*KEY_COLUMNS, "timestamp"], keep=False)
    if not is_tied.any():
        return
    groups = catalog[is_tied].groupby([*KEY_COLUMNS, "timestamp"], sort=True)
    for positions in groups.indices.values():  # a few tied groups, not rows
        first, *others = sorted((parsed[i] for i in positions), key=lambda p: p.path)
        for other in others:
            if not pd.DataFrame(other.rows).equals(pd.DataFrame(first.rows)):
                msg = (
                    f"{first.path} and {other.path}: two results files for the same model "
                    f"variant ({_shown(first.model)}, precision {first.precision!r}, revision "
                    f"{first.revision!r}) with the same run time ({first.timestamp or 'none in the file name'}) "
                    "hold different scores, so neither is the newest.\n"
                    "Hint: remove the wrong file, or keep the results_<timestamp>.json names "
                    "so that the newest run wins."
                )
                raise InputError(msg)


def _decode(path: Path, data: bytes) -> Any:
    """Parse a results file's bytes; the message says what is wrong and where."""
    data = data.removeprefix(codecs.BOM_UTF8)  # Windows editors add one; harmless
    if not data.strip():
        msg = f"{path}: the file is empty.\nHint: the run may have crashed before writing it; re-run it or remove the file."
        raise InputError(msg)
    if _decode_read_keys is not None and data.isascii():  # ASCII: valid UTF-8
        try:
            read_keys = _decode_read_keys(data)
        except _SKIP_ERRORS:
            pass  # orjson, then json, decide and word the error
        else:  # absent and null keys alike read as None, as from dict.get
            return {
                "results": read_keys.results,
                "config": read_keys.config,
                "n-samples": read_keys.n_samples,
                "model_name": read_keys.model_name,
                "chat_template": read_keys.chat_template,
                "date": read_keys.date,
            }
    try:
        return _loads(data)
    except _DECODE_ERRORS:
        pass  # NaN / Infinity (Python's json.dump writes them) or a real error: json decides
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        msg = f"{path}: line {line}: byte {data[exc.start]:#04x} is not UTF-8.\nHint: re-save the file as UTF-8 (JSON files must be UTF-8)."
        raise InputError(msg) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).\nHint: the file may be truncated or hand-edited; re-download or re-run it."
        raise InputError(msg) from exc
    except (ValueError, RecursionError) as exc:  # deep nesting, 5,000-digit numbers
        msg = f"{path}: cannot read the JSON: {exc}.\nHint: this does not look like an lm-evaluation-harness results file; check where it came from."
        raise InputError(msg) from exc


def _check_unicode(path: Path, what: str, text: str) -> None:
    """Reject lone surrogates (from a JSON escape, or a non-UTF-8 file name)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = f"{path}: the {what} {_shown(text)} is not valid Unicode.\nHint: fix the name in the file (or its directory name, if the name comes from the path)."
        raise InputError(msg) from exc


def _parse_model_args(model_args: object) -> dict[str, str]:
    """Split ``"pretrained=org/name,revision=sha,dtype=bfloat16"`` into a dict."""
    if not isinstance(model_args, str):
        return {}
    pairs = (item.split("=", 1) for item in model_args.split(",") if "=" in item)
    return {key.strip(): value.strip() for key, value in pairs}


def _first_text(*candidates: object) -> str:
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate  # as written: names round-trip unchanged
    return ""


def _model_from_path(path: Path) -> str:
    if _TIMESTAMP.match(path.name) and path.parent.parent.name:
        return f"{path.parent.parent.name}/{path.parent.name}"
    return ""


def _timestamp(path: Path, date: object) -> str:
    """Return the run time as a sortable UTC string: file name first, then ``date``."""
    if match := _TIMESTAMP.match(path.name):
        day, time = match.group(1).split("T")
        clock, _, fraction = time.replace(":", "-").partition(".")
        return f"{day}T{clock.replace('-', ':')}.{fraction.ljust(6, '0')[:6]}"
    if (
        isinstance(date, int | float)
        and not isinstance(date, bool)
        and math.isfinite(date)
    ):
        try:
            moment = datetime.fromtimestamp(date, tz=UTC)
        except (OverflowError, OSError, ValueError):  # a date no clock can show
            return ""
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return ""


def _stderr(entry: dict[str, Any], metric: str) -> float | None:
    value = entry.get(_stderr_key(metric))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # "N/A" (the harness's own marker) or absent
    return float(value)


@functools.lru_cache(maxsize=1024)  # a suite's few metrics, looked up per file
def _stderr_key(metric: str) -> str:
    """``acc_norm,none`` -> ``acc_norm_stderr,none``."""
    name, comma, filtering = metric.partition(",")
    return f"{name}_stderr{comma}{filtering}"


def _n_samples(counts: object) -> int | None:
    if isinstance(counts, dict):
        value = counts.get("effective", counts.get("original"))
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and 0 < value <= _MAX_INT64
        ):
            return value
    return None
