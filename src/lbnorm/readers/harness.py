"""Results files, single or as leaderboard trees: lm-evaluation-harness, v1 and lighteval.

A leaderboard keeps one file per run, ``<org>/<model>/results_<ISO timestamp>.json``.
Three layouts are read, all the same way:

- **lm-evaluation-harness 0.4** (the v2 leaderboard): ``results[task][metric]``
  with metrics such as ``acc_norm,none``, the model in ``model_name`` and
  ``config`` (``model_args``, ``model_dtype``, ``model_sha``...).
- **Open LLM Leaderboard v1** (lighteval running the harness tasks):
  ``results["harness|<task>|<shots>"]`` plus an ``all`` entry, ``versions``,
  ``config_tasks``, ``summary_tasks``, ``summary_general``, and the model in
  ``config_general`` (``model_name``, ``model_sha``, ``model_dtype``); files
  from before autumn 2023 call that object ``config``.
- **lighteval**: the same layout, keyed ``<suite>|<task>|<shots>`` (``versions``
  may be empty, ``job_id`` is a string); newer versions also keep the name in
  ``config_general.model_config.model_name``.

For each file this reader takes the suite's ``results[task][metric]`` values
(never ``groups``, which can hold stale values after a re-scoring), their
``*_stderr`` (``"N/A"`` becomes null) and ``n-samples``, and the model variant:
name from ``model_name`` / ``config_general.model_name`` / ``config.model_name``
/ ``model_args`` ``pretrained=`` / the path; precision from ``model_dtype`` (in
``config`` or ``config_general``) or ``dtype=``; revision from ``model_sha`` /
``model_revision`` / ``revision=``; chat template applied when ``chat_template``
is not null (or lighteval's ``use_chat_template`` is true). Tasks the suite does
not use are counted, not read.

**Several files of one variant.** The v1 leaderboard added tasks over time
(Winogrande and GSM8K in autumn 2023, a GSM8K re-run in December 2023), so a
model's newest file often holds one task and ``all``; the leaderboard took each
task from the newest file that has it, and so does this reader: per (variant,
suite subtask), the newest run time wins (ties broken by path; a tie between
files holding different values is an error). The catalog lists which tasks each
file gave; a file that gave nothing because newer files gave all its scores is
superseded by the newest of them; files of one variant that disagree on a score
produce a warning naming both files and the benchmark.

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
import itertools
import json
import math
import multiprocessing
import os
import re
import reprlib
from collections.abc import (
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
    Sized,
)
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm._runtime import available_cores, can_fork, held_signals, start_worker
from lbnorm.core.arrow import (
    booleans,
    dictionary,
    numbers,
    optional_numbers,
    strings,
    to_numpy,
)
from lbnorm.core.errors import InputError
from lbnorm.core.files import RESULTS_FILE, walk_directory
from lbnorm.core.options import ProgressCallback
from lbnorm.core.schemas import SCORES, TEXT
from lbnorm.suites import Suite

__all__ = [
    "RESULTS_FILE",
    "HarnessFile",
    "ResultsRead",
    "ScannedFile",
    "combine_results",
    "find_results_files",
    "parse_results_file",
    "read_results_files",
    "read_results_paths",
    "scan_results_files",
    "subtask_columns",
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
        config_general: Any = None
        n_samples: Any = msgspec.field(default=None, name="n-samples")
        model_name: Any = None
        chat_template: Any = None
        date: Any = None

    _decode_read_keys = msgspec.json.Decoder(_ReadKeys).decode
    _SKIP_ERRORS = (msgspec.DecodeError, RecursionError)
#: The results parser's own version: bumped whenever a results file may parse
#: differently (the parse cache, :mod:`lbnorm.readers.cache`, is keyed on it and
#: on this module's source, so a change that forgets the bump is seen too).
PARSER_VERSION = 1

#: Fewer results files than this are read in-process (forking costs ~10 ms).
_MIN_PARALLEL_FILES = 64
_ABSENT = object()  # a key a results entry does not have
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


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedFiles:
    """Parsed results files as columns: one entry per file, then their rows.

    What :func:`combine_parsed` takes: built from :class:`HarnessFile` objects by
    :func:`parsed_columns`, or straight from stored columns (the parse cache).

    Attributes:
        path, model, precision, revision, timestamp: Per file, as in
            :class:`HarnessFile`.
        chat_template: Per file.
        n_ignored: Per file: result entries the suite does not use.
        lengths: Per file: its rows.
        subtask_index: Per row: its suite subtask; a file's rows together and in
            suite order, the files in order.
        raw_score: Per row.
        stderr: Per row (float64), null where the file gave none.
        n_samples: Per row (int64), null where the file gave none.
    """

    path: list[str]
    model: list[str]
    precision: list[str]
    revision: list[str]
    chat_template: npt.NDArray[np.bool_]
    timestamp: list[str]
    n_ignored: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]
    subtask_index: npt.NDArray[np.int64]
    raw_score: npt.NDArray[np.float64]
    stderr: pa.Array
    n_samples: pa.Array


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
    )


def find_results_files(directory: Path) -> list[Path]:
    """Return the ``results_*.json`` files under `directory`, sorted.

    Raises:
        InputError: None were found; a folder of the tree cannot be read; or
            an entry named ``results_*.json`` is not a regular file (a FIFO, a
            device), named for what it is.
    """
    files, others = walk_directory(directory)
    for path, kind in others:
        if RESULTS_FILE.match(path.name):
            msg = f"{path}: is {kind}, not a regular file.\nHint: replace it with the results file, or remove it from the tree."
            raise InputError(msg)
    found = [path for path in files if RESULTS_FILE.match(path.name)]
    if not found:
        msg = (
            f"{directory}: no results_*.json files found in this directory tree.\n"
            "Hint: point lbnorm at a leaderboard tree (<org>/<model>/results_<timestamp>.json) "
            "or at score tables (.csv, .jsonl, .parquet)."
        )
        raise InputError(msg)
    return found


def subtask_columns(suite: Suite) -> dict[str, list[str]]:
    """The suite's subtasks as columns, in suite order: what the results readers need.

    Examples:
        >>> from lbnorm.suites import load_suite
        >>> columns = subtask_columns(load_suite("openllm-v1"))
        >>> columns["task"][-1], columns["metric"][-1], columns["benchmark"][-1]
        ('harness|gsm8k|5', 'acc', 'GSM8K')
    """
    subtasks = [(b, s) for b in suite.benchmarks for s in b.subtasks]
    return {
        "benchmark": [b.name for b, _ in subtasks],
        "subtask": [s.name for _, s in subtasks],
        "task": [s.task for _, s in subtasks],
        "metric": [s.metric for _, s in subtasks],
    }


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
    config = _object(document.get("config"))
    general = _object(document.get("config_general"))  # v1 leaderboard, lighteval
    args = _parse_model_args(config.get("model_args"))
    model = _first_text(
        document.get("model_name"),
        general.get("model_name"),
        _object(general.get("model_config")).get("model_name"),
        config.get("model_name"),
        args.get("pretrained"),
    )
    model = model or _model_from_path(path)
    if not model:
        msg = f'{path}: no model name (model_name, config_general.model_name, config.model_name, model_args pretrained=) and the path is not <org>/<model>/results_*.json.\nHint: add "model_name" to the file or use the leaderboard layout.'
        raise InputError(msg)
    precision = _first_text(
        config.get("model_dtype"), general.get("model_dtype"), args.get("dtype")
    ).removeprefix("torch.")
    revision = _first_text(
        config.get("model_sha"),
        config.get("model_revision"),
        general.get("model_sha"),
        general.get("model_revision"),
        args.get("revision"),
    )
    is_chat = document.get("chat_template") is not None or True in (
        general.get("use_chat_template"),
        _object(general.get("model_config")).get("use_chat_template"),
    )
    counts = document.get("n-samples")
    if not isinstance(counts, dict):
        counts = {}
    indices: list[int] = []
    raws: list[float] = []
    stderrs: list[float | None] = []
    sizes: list[int | None] = []
    keys: list[str] = []
    used_tasks: set[str] = set()
    for index, task, metric, error_metric, key, error_key in _subtask_plan(
        tuple(pairs)
    ):
        entry = results.get(task)  # the suite's subtasks, not rows
        if entry is None:
            continue
        if not isinstance(entry, dict):
            msg = f"{path}: results[{task!r}] is {_shown(entry)}, not an object.\nHint: each results entry maps metric names to numbers; fix or re-run this task."
            raise InputError(msg)
        value = entry.get(metric, _ABSENT)
        if value is _ABSENT:
            continue
        used_tasks.add(task)
        if type(value) is not float:  # a float is taken as it is (nearly all)
            if isinstance(value, bool) or not isinstance(value, int | float):
                msg = f"{path}: {key} is {_shown(value)}, not a number.\nHint: fix or re-run this task; scores must be JSON numbers."
                raise InputError(msg)
            value = _float(path, key, value)
        error = entry.get(error_metric)
        indices.append(index)
        raws.append(value)
        stderrs.append(
            error if type(error) is float else _stderr(path, error_key, error)
        )
        sizes.append(_n_samples(counts.get(task)))
        keys.append(key)
    rows: dict[str, list[Any]] = {
        "subtask_index": indices,
        "raw_score": raws,
        "stderr": stderrs,
        "n_samples": sizes,
        "key": keys,
    }
    names = {"model name": model, "precision": precision, "revision": revision}
    for what, text in names.items():
        _check_unicode(path, what, text)
    return HarnessFile(
        path=str(path),
        model=model,
        precision=precision,
        revision=revision,
        chat_template=is_chat,
        timestamp=_timestamp(path, document.get("date")),
        rows=rows,
        n_ignored=len(set(results) - used_tasks),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultsRead:
    """Results files read: the scores taken, what each file gave, and warnings.

    Attributes:
        scores: The :data:`~lbnorm.core.schemas.SCORES` columns plus ``_row`` (the
            results key each score came from), newest per (variant, subtask);
            text as dictionary arrays, as a Parquet input's.
        files: One row per file, in input order: ``path``, the variant keys,
            ``timestamp``, ``rows`` (scores taken from it), ``n_ignored``,
            ``superseded_by`` (null unless newer files gave all its scores),
            ``tasks`` (the tasks taken from it) and, from paths, ``sha256`` and
            ``bytes``.
        warnings: Files of one variant that disagree on a score, one line per
            (variant, benchmark, older file).
    """

    scores: pa.Table
    files: pa.Table
    warnings: tuple[str, ...] = ()


#: Per suite subtask: ``benchmark``, ``subtask``, ``task`` and ``metric`` (see
#: :func:`subtask_columns`; a pandas frame of the suite's subtask table also fits).
SubtaskColumns = Mapping[str, Sequence[str]]


def read_results_files(
    files: Iterable[tuple[Path, bytes]],
    pairs: Sequence[tuple[str, str]],
    subtask_names: SubtaskColumns,
    *,
    progress: ProgressCallback | None = None,
    total: int | None = None,
) -> ResultsRead:
    """Parse results files and keep the newest result per (variant, subtask).

    Args:
        files: (path, bytes) of each results file; consumed once, so a generator
            keeps one file's bytes in memory at a time.
        pairs: The suite's (task, metric) pairs in suite order.
        subtask_names: The suite's subtask columns (:func:`subtask_columns`).
        progress: Called as ``progress(stage, done, total)`` after each file.
        total: How many files `files` yields, for progress (default: its length).

    Returns:
        The scores, the files and the warnings (:class:`ResultsRead`).

    Raises:
        InputError: A file is malformed, or two files of one variant with the
            same run time hold different values for one subtask.
    """
    parsed: list[HarnessFile] = []
    if total is None and isinstance(files, Sized):
        total = len(files)
    for path, data in files:
        parsed.append(parse_results_file(path, data, pairs))
        if progress is not None:
            progress("parsing results files", len(parsed), total or len(parsed))
    return combine_results(parsed, pairs, subtask_names)


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

    As :func:`read_results_files`, from paths: the files are read and parsed by
    :func:`scan_results_files`, in worker processes when there are many.

    Args:
        paths: The results files.
        pairs: The suite's (task, metric) pairs in suite order.
        subtask_names: The suite's subtask columns (:func:`subtask_columns`).
        read: Returns a file's bytes, raising :class:`InputError` if it cannot.
        progress: Called as ``progress(stage, done, total)`` as files complete.
        workers: Processes to use (default: the cores this process may run on).

    Returns:
        As :func:`read_results_files`; ``files`` has two more columns,
        ``sha256`` and ``bytes``.

    Raises:
        InputError: A file cannot be read or parsed: the first such in `paths`,
            named in the message.
    """
    parsed: list[HarnessFile] = []
    hashes: list[str] = []
    sizes: list[int] = []
    # closed however the loop ends (an error, a Ctrl-C between two files): the
    # workers are stopped before anything is reported, not when (if ever) the
    # suspended generator is collected
    with contextlib.closing(
        scan_results_files(paths, pairs, read=read, progress=progress, workers=workers)
    ) as scanned:
        for item in scanned:  # one small record per file, in path order
            if item.error is not None:
                raise item.error
            assert item.parsed is not None
            parsed.append(item.parsed)
            hashes.append(item.sha256)
            sizes.append(item.size)
    read_ = combine_results(parsed, pairs, subtask_names)
    files = read_.files.append_column("sha256", strings(hashes))
    files = files.append_column("bytes", numbers(np.array(sizes), pa.int64()))
    return ResultsRead(scores=read_.scores, files=files, warnings=read_.warnings)


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
        with held_signals():  # Ctrl-C waits until every worker is forked and ready
            futures = [pool.submit(_scan_chunk, chunk) for chunk in chunks]
        position = {future: at for at, future in enumerate(futures)}
        finished: dict[int, list[_Record]] = {}
        running: set[Future[list[_Record]]] = set(futures)
        keys = _result_keys(chunks[0].pairs) if chunks else []
        for at in range(len(futures)):
            while at not in finished:  # progress counts chunks as they arrive
                # a Ctrl-C inside wait() can leave a chunk's lock taken (it takes
                # them one by one), and the pool then hangs on it as it shuts
                # down: it lands once a chunk is in, a fraction of a second later
                with held_signals():
                    ready, running = wait(running, return_when=FIRST_COMPLETED)
                for future in sorted(ready, key=position.__getitem__):
                    finished[position[future]] = future.result()
                    report(len(finished[position[future]]))
            for path, record in zip(chunks[at].paths, finished.pop(at), strict=False):
                yield _unpack(path, record, keys)
    finally:  # also on an error or an early close: queued chunks are dropped
        # a Ctrl-C that lands inside shutdown() before it flags the pool (as the
        # last chunk comes in) would leave the workers waiting for work and the
        # exit joining them for ever: it is raised once they are gone
        with held_signals():
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


@functools.lru_cache(maxsize=8)  # one suite per run: made once, not per file
def _subtask_plan(
    pairs: tuple[tuple[str, str], ...],
) -> tuple[tuple[int, str, str, str, str, str], ...]:
    """Per suite subtask: index, task, metric, its standard error's metric, and both keys."""
    keys = _keys_of(pairs)
    return tuple(
        (index, task, metric, error, keys[index], f"results[{task!r}][{error!r}]")
        for index, (task, metric) in enumerate(pairs)
        for error in [_stderr_key(metric)]
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


def combine_results(
    parsed: Sequence[HarnessFile],
    pairs: Sequence[tuple[str, str]],
    names: SubtaskColumns,
) -> ResultsRead:
    """The newest result per (variant, subtask), what each file gave, and warnings.

    As :func:`combine_parsed`, from parsed files.
    """
    return combine_parsed(parsed_columns(parsed), pairs, names)


def combine_parsed(
    files: ParsedFiles,
    pairs: Sequence[tuple[str, str]],
    names: SubtaskColumns,
) -> ResultsRead:
    """The newest result per (variant, subtask), what each file gave, and warnings.

    The one rule for several files of a variant (see the module docstring),
    used on freshly parsed files and by the parse cache on remembered ones.

    Args:
        files: The parsed files, in input order, as columns.
        pairs: The suite's (task, metric) pairs in suite order.
        names: The suite's subtask columns (:func:`subtask_columns`).

    Returns:
        The scores, one row per file, and the warnings (:class:`ResultsRead`).

    Raises:
        InputError: Two files of a variant with the same run time hold
            different values for one subtask.
    """
    n_files = len(files.path)
    lengths = files.lengths
    n_rows = int(lengths.sum())
    owner = np.repeat(np.arange(n_files, dtype=np.int64), lengths)  # each row's file
    index, raw = files.subtask_index, files.raw_score
    stderr, n_samples = files.stderr, files.n_samples
    # each file's variant code and rank by (run time, path): per file, not per row
    variants: dict[tuple[str, str, str, bool], int] = {}
    file_variant = np.array(
        [
            variants.setdefault(key, len(variants))
            for key in zip(
                files.model,
                files.precision,
                files.revision,
                files.chat_template.tolist(),
                strict=True,
            )
        ],
        dtype=np.int64,
    )
    run_times = list(zip(files.timestamp, files.path, strict=True))
    by_time = np.array(
        sorted(range(n_files), key=run_times.__getitem__), dtype=np.int64
    )
    rank = np.empty(n_files, dtype=np.int64)
    rank[by_time] = np.arange(n_files)
    # rows grouped by (variant, subtask), oldest first: the last of a group wins
    order = np.lexsort((rank[owner], index, file_variant[owner]))
    variant_sorted, index_sorted = file_variant[owner][order], index[order]
    is_last = np.ones(n_rows, dtype=bool)
    is_last[:-1] = (variant_sorted[1:] != variant_sorted[:-1]) | (
        index_sorted[1:] != index_sorted[:-1]
    )
    group = np.cumsum(np.r_[True, is_last[:-1]][:n_rows]) - 1  # each sorted row's group
    winner = order[is_last][group]  # each sorted row's group winner (a row)
    _check_ties(files, owner, order, winner, raw, stderr, n_samples)
    taken = np.sort(order[is_last])  # in file order, then suite order
    rows_taken = np.bincount(owner[taken], minlength=n_files)
    lost = order[order != winner]  # rows a newer file's row replaced
    newest_over = np.full(n_files, -1, dtype=np.int64)
    np.maximum.at(newest_over, owner[lost], rank[owner[winner[order != winner]]])
    is_superseded = (rows_taken == 0) & (lengths > 0)
    superseded_by = np.full(n_files, None, dtype=object)
    superseded_by[is_superseded] = np.array(files.path, dtype=object)[
        by_time[newest_over[is_superseded]]
    ]
    tasks = _tasks_taken(pairs, owner[taken], index[taken], n_files)
    table = pa.table(
        {
            "path": strings(files.path),
            "model": strings(files.model),
            "precision": strings(files.precision),
            "revision": strings(files.revision),
            "chat_template": booleans(files.chat_template),
            "timestamp": strings(files.timestamp),
            "rows": numbers(rows_taken, pa.int64()),
            "n_ignored": numbers(files.n_ignored, pa.int64()),
            "superseded_by": strings(superseded_by.tolist()),
            "tasks": tasks,
        }
    )
    warnings = _disagreements(files, names, owner, index, order, winner, raw)
    return ResultsRead(
        scores=_scores(
            files, names, pairs, owner, index, taken, raw, stderr, n_samples
        ),
        files=table,
        warnings=warnings,
    )


def _tasks_taken(
    pairs: Sequence[tuple[str, str]],
    owner: npt.NDArray[np.int64],
    index: npt.NDArray[np.int64],
    n_files: int,
) -> pa.Array:
    """Per file, the tasks its taken rows come from, each once, in the order they come.

    `owner` and `index` are the taken rows' files and subtasks, in file order.
    """
    names = list(dict.fromkeys(task for task, _ in pairs))
    code_of = {name: at for at, name in enumerate(names)}
    task = np.array([code_of[task] for task, _ in pairs], dtype=np.int64)[index]
    _, first = np.unique(owner * len(names) + task, return_index=True)
    first.sort()  # each (file, task)'s first row, in row order
    offsets = np.zeros(n_files + 1, dtype=np.int32)
    np.cumsum(np.bincount(owner[first], minlength=n_files), out=offsets[1:])
    values = strings(names).take(numbers(task[first], pa.int64()))
    return pa.ListArray.from_arrays(numbers(offsets, pa.int32()), values)


#: What :func:`_scores` returns: :data:`SCORES` with its text as dictionaries, and ``_row``.
_SCORES_READ = pa.schema(
    [field.with_type(TEXT) if field.type == pa.string() else field for field in SCORES]
).append(pa.field("_row", TEXT))


def _scores(
    files: ParsedFiles,
    names: SubtaskColumns,
    pairs: Sequence[tuple[str, str]],
    owner: npt.NDArray[np.int64],
    index: npt.NDArray[np.int64],
    taken: npt.NDArray[np.int64],
    raw: npt.NDArray[np.float64],
    stderr: pa.Array,
    n_samples: pa.Array,
) -> pa.Table:
    """The taken rows in the :data:`SCORES` contract, plus ``_row``.

    Text comes as dictionary arrays over the few distinct values (one per file
    or per subtask), each dictionary in the order its values first appear in
    the rows, as a Parquet input's dictionaries come: no string is copied per
    row, and the engine encodes keys and writes the subtask table from the
    dictionaries as they are.
    """
    owner_taken, index_taken = owner[taken], index[taken]
    # rows come in file order: the files that gave rows, in order, are the
    # order in which their values first appear
    file_rows = np.bincount(owner_taken, minlength=len(files.path))
    files_used = np.flatnonzero(file_rows)
    at_file = np.repeat(np.arange(files_used.size), file_rows[files_used])
    subtasks_used, first = np.unique(index_taken, return_index=True)
    subtasks_used = subtasks_used[np.argsort(first, kind="stable")]
    at_subtask = np.empty(len(pairs), dtype=np.int64)
    at_subtask[subtasks_used] = np.arange(subtasks_used.size)
    at_subtask = at_subtask[index_taken]

    def per_file(values: list[str]) -> pa.Array:
        return _first_seen(
            strings(values).take(numbers(files_used, pa.int64())), at_file
        )

    def per_subtask(values: Sequence[str]) -> pa.Array:
        used = strings(list(values)).take(numbers(subtasks_used, pa.int64()))
        return _first_seen(used, at_subtask)

    rows = numbers(taken, pa.int64())
    columns = {
        "model": per_file(files.model),
        "precision": per_file(files.precision),
        "revision": per_file(files.revision),
        "chat_template": booleans(files.chat_template[owner_taken]),
        "benchmark": per_subtask(names["benchmark"]),
        "subtask": per_subtask(names["subtask"]),
        "metric": per_subtask(names["metric"]),
        "raw_score": numbers(raw[taken], pa.float64()),
        "stderr": stderr.take(rows),
        "n_samples": n_samples.take(rows),
        "source": per_file(files.path),
        "_row": per_subtask(_result_keys(pairs)),
    }
    return pa.Table.from_arrays(list(columns.values()), schema=_SCORES_READ)


def _first_seen(values: pa.Array, at: npt.NDArray[np.int64]) -> pa.Array:
    """``values[at]`` as a dictionary array of the distinct values.

    `values` are in the order they are first used by `at`, so the dictionary
    (built by Arrow's hash kernel over the few `values`) is in the order of
    first appearance in the rows too.
    """
    encoded = values.dictionary_encode()
    codes = to_numpy(encoded.indices).astype(np.int32)[at]
    return dictionary(codes, encoded.dictionary)


def _differs(
    raw: npt.NDArray[np.float64],
    left: npt.NDArray[np.int64],
    right: npt.NDArray[np.int64],
) -> npt.NDArray[np.bool_]:
    """Whether rows hold different scores (NaN equals NaN: the same text was read)."""
    a, b = raw[left], raw[right]
    same: npt.NDArray[np.bool_] = (a == b) | (np.isnan(a) & np.isnan(b))
    return ~same


def _check_ties(
    files: ParsedFiles,
    owner: npt.NDArray[np.int64],
    order: npt.NDArray[np.int64],
    winner: npt.NDArray[np.int64],
    raw: npt.NDArray[np.float64],
    stderr: pa.Array,
    n_samples: pa.Array,
) -> None:
    """A subtask's newest value must be unambiguous: two files with its run time agree."""
    runner_up = np.flatnonzero(
        (order[:-1] != winner[:-1]) & (order[1:] == winner[1:])
    )  # sorted positions just before a group's winner, in the same group
    first, second = order[runner_up], order[runner_up + 1]
    times = np.array(files.timestamp, dtype=object)
    is_tied = times[owner[first]] == times[owner[second]]
    first, second = first[is_tied], second[is_tied]
    if not first.size:
        return
    numbers = np.column_stack(
        [
            to_numpy(stderr, null=np.nan),
            to_numpy(n_samples, null=-1).astype(np.float64),
        ]
    )
    conflict = _differs(raw, first, second) | np.any(
        (numbers[first] != numbers[second])
        & ~(np.isnan(numbers[first]) & np.isnan(numbers[second])),
        axis=1,
    )
    if not conflict.any():
        return
    at = int(np.flatnonzero(conflict)[0])
    older, newer = int(owner[first[at]]), int(owner[second[at]])
    msg = (
        f"{files.path[older]} and {files.path[newer]}: two results files for the same model "
        f"variant ({_shown(files.model[older])}, precision {files.precision[older]!r}, revision "
        f"{files.revision[older]!r}) with the same run time ({files.timestamp[older] or 'none in the file name'}) "
        "hold different scores, so neither is the newest.\n"
        "Hint: remove the wrong file, or keep the results_<timestamp>.json names "
        "so that the newest run wins."
    )
    raise InputError(msg)


def _disagreements(
    files: ParsedFiles,
    names: SubtaskColumns,
    owner: npt.NDArray[np.int64],
    index: npt.NDArray[np.int64],
    order: npt.NDArray[np.int64],
    winner: npt.NDArray[np.int64],
    raw: npt.NDArray[np.float64],
) -> tuple[str, ...]:
    """One warning per (variant, benchmark, older file) whose score differs from the newest."""
    replaced = order[order != winner]
    newest = winner[order != winner]
    differs = _differs(raw, replaced, newest)
    replaced, newest = replaced[differs], newest[differs]
    if not replaced.size:
        return ()
    benchmark_names = list(dict.fromkeys(names["benchmark"]))
    benchmark_code = {name: at for at, name in enumerate(benchmark_names)}
    subtask_benchmark = np.array(
        [benchmark_code[name] for name in names["benchmark"]], dtype=np.int64
    )
    key = np.stack([owner[newest], subtask_benchmark[index[replaced]], owner[replaced]])
    groups, first, counts = np.unique(
        key, axis=1, return_index=True, return_counts=True
    )
    warnings = []
    for (_, benchmark, _), at, count in zip(groups.T, first, counts, strict=True):
        old, new = replaced[at], newest[at]
        older, newer = int(owner[old]), int(owner[new])
        subtask = names["subtask"][index[old]]
        more = f" and {count - 1} more subtask(s)" if count > 1 else ""
        warnings.append(
            f"{files.model[older]} ({files.precision[older] or 'precision unknown'}, revision "
            f"{files.revision[older] or 'unknown'}): {benchmark_names[benchmark]} {subtask} is "
            f"{float(raw[old])!r} in {files.path[older]} but {float(raw[new])!r} in the newer "
            f"{files.path[newer]}"
            f"{more}; the newer value is used."
        )
    return tuple(warnings)


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
                "config_general": read_keys.config_general,
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


def _object(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (absent or malformed)."""
    return value if isinstance(value, dict) else {}


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
    if isinstance(date, int | float) and not isinstance(date, bool):
        try:  # a 400-digit integer does not even fit a float
            moment = datetime.fromtimestamp(float(date), tz=UTC)
        except (OverflowError, OSError, ValueError):  # a date no clock can show
            return ""  # no run time: as for a file without a date
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return ""


def _float(path: Path, key: str, value: int | float) -> float:
    """A JSON number as a float; an integer too large for one is an error."""
    try:
        return float(value)
    except OverflowError:  # only an int overflows: JSON floats too large read as inf
        raise _too_large(path, key, value) from None


def _too_large(path: Path, key: str, value: object) -> InputError:
    assert isinstance(value, int)
    digits = int(value.bit_length() * math.log10(2)) + 1
    msg = (
        f"{path}: {key} is an integer of about {digits:,} digits, too large for "
        "any score.\nHint: the file is damaged or was edited by hand; re-download "
        "or re-run this task."
    )
    return InputError(msg)


def _stderr(path: Path, key: str, value: object) -> float | None:
    """A standard error (at `key`) as a float; None for "N/A" (the harness's marker) or none."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # only an int overflows
        raise _too_large(path, key, value) from None


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
