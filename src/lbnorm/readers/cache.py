"""The parse cache for nightly runs: results files are parsed once, then reused.

A nightly run over a tree of thousands of lm-evaluation-harness results files
should cost only what changed. The cache directory keeps every file's parsed
scores as Parquet, keyed by the file's absolute path, its stat (size, mtime,
ctime, inode, device) and the sha256 of its content:

* a file whose stat is unchanged is taken from the cache unread, its sha256
  the one an earlier run computed from the bytes it read; the file catalog (and
  the manifest) mark such a hash ``sha256_verified = false``;
* any other file is read and hashed (``sha256_verified = true``): the cached
  content reuses its parse (a touch, a copy with the same bytes), new content is
  parsed again.

The ctime is what makes the stat trustworthy: a write or a ``utime`` sets it to
the present and nothing but the clock sets it back, so a rewrite that keeps the
size and restores the old mtime is still seen. A file whose mtime or ctime is
within 2 s of the previous run's stat (or after it) is read again regardless, as
a second write in the same timestamp tick would keep every field (git's "racy
clean" rule). ``full_rebuild=True`` (``--full``) reads, hashes and parses every
file: the way to verify every hash. Hashing every file on every run instead was
measured: on the 4,576-file tree (606 MB, warm page cache) it made a run with
nothing changed as slow as a run without the cache (medians 6.0 s, 5.9 s; 4.0 s
trusting the stat), because reading and hashing cost about what parsing does.

A new file is parsed; a cached file that no longer exists is dropped. A file
that cannot be parsed, or whose scores break the contract (a score outside
[0, 1], a negative stderr), is *rejected* with its reason instead of stopping
the run, and remembered as rejected until its content changes. The newest file
per model variant wins, as :mod:`lbnorm.readers.harness` decides, so the result
equals a run without the cache.

Layout: ``lbnorm-cache.json`` (the index) names one generation of
``entries-<id>.parquet`` (one row per file) and ``rows-<id>.parquet`` (one row
per score) with their sha256, the cache format, the lbnorm version, a hash of the
suite's (task, metric) pairs and when the files were stat'ed. A new generation is
written beside the old one and the index replaced last, so a killed run leaves
the previous cache intact. On load the index is checked field by field and both
files are hashed and checked against each other; a cache that fails any check
(an index that is not such an object, nested beyond reason, a number out of
range, a file that is missing, damaged or a directory), was made by another
lbnorm version or for other subtasks is rebuilt from scratch, never trusted
(``full_rebuild=True`` forces that). Something that is not a regular file where
the index belongs is moved aside (``lbnorm-cache.json.damaged-<id>``), never
deleted; of the generation files, lbnorm deletes only its own regular files.

The cache directory must not be inside the output directory, which every run
replaces whole (:func:`check_cache_location`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import itertools
import json
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lbnorm.errors import InputError, OptionsError, OutputError
from lbnorm.options import ProgressCallback, RunOptions
from lbnorm.readers.catalog import Inputs, catalog_table, read_files
from lbnorm.readers.files import MAX_RESULTS_BYTES, read_bytes, sha256_file
from lbnorm.readers.harness import (
    HarnessFile,
    ScannedFile,
    combine_results,
    find_results_files,
    scan_results_files,
)
from lbnorm.schemas import Batch
from lbnorm.suites import Suite
from lbnorm.version import lbnorm_version
from lbnorm.writer import (
    exclusive_lock,
    write_bytes_atomically,
    write_parquet_atomically,
)

__all__ = ["CACHE_FORMAT", "CacheStats", "check_cache_location", "read_files_cached"]

#: Bumped whenever what the cache stores changes meaning (2: the stat key holds
#: ctime, inode and device too; sizes and hashes are of the bytes read).
CACHE_FORMAT = 2
_META = "lbnorm-cache.json"
_GENERATION = re.compile(r"(entries|rows)-[0-9a-f]{12}\.parquet")
_SHA256 = re.compile(r"[0-9a-f]{64}")

#: What a file's stat must keep for its cached parse and hash to be trusted unread.
#: The ctime cannot be set back (a write or a utime sets it to now), so a rewrite
#: that keeps size and mtime, or restores the mtime, is still seen.
_STAT = ("size", "mtime_ns", "ctime_ns", "inode", "device")
#: A file changed this close to (or after) the previous run's stat could have
#: changed again within one timestamp tick: it is read again (git's "racy clean").
_RACY_NS = 2_000_000_000

_ENTRIES = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("ctime_ns", pa.int64()),
        ("inode", pa.int64()),
        ("device", pa.int64()),
        ("sha256", pa.string()),
        ("status", pa.string()),
        ("reason", pa.string()),
        ("model", pa.string()),
        ("precision", pa.string()),
        ("revision", pa.string()),
        ("chat_template", pa.bool_()),
        ("timestamp", pa.string()),
        ("n_ignored", pa.int64()),
        ("n_rows", pa.int64()),
    ]
)
_ROWS = pa.schema(
    [
        ("path", pa.string()),
        ("subtask_index", pa.int32()),
        ("raw_score", pa.float64()),
        ("stderr", pa.float64()),
        ("n_samples", pa.int64()),
        ("key", pa.string()),
    ]
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheStats:
    """What one refresh of the cache did.

    Attributes:
        directory: The cache directory.
        seen: Results files found in the inputs.
        parsed: Files parsed this run (new or changed) and accepted.
        cached: Files taken from the cache: unchanged stat, or read and hashed
            to the cached content.
        rejected: Files rejected (this run or remembered), with reasons in the
            file catalog.
        hashed: Files read and hashed this run (the rest were trusted on their
            unchanged stat; their ``sha256_verified`` is false).
        dropped: Cache entries whose file is gone.
        rebuilt: The previous cache was discarded.
        rebuild_reason: Why ('' if not rebuilt, or there was none).
        seconds: Wall time of the refresh.
    """

    directory: str
    seen: int
    parsed: int
    cached: int
    rejected: int
    hashed: int
    dropped: int
    rebuilt: bool
    rebuild_reason: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """The stats as a JSON-ready dict."""
        return asdict(self)


def read_files_cached(
    paths: Sequence[str | Path],
    *,
    suite: Suite,
    options: RunOptions,
    progress: ProgressCallback | None = None,
) -> Inputs:
    """Read inputs as :func:`lbnorm.readers.catalog.read_files` does, with a parse cache.

    Results files are parsed only when new or changed. Results files (``.json``,
    and directories holding ``results_*.json``) go through the cache; score
    tables are read as usual.

    Args:
        paths: Files or directories.
        suite: The suite, which says which results entries to read.
        options: The run's options: ``cache`` (the cache directory, created if
            needed), ``full_rebuild`` (ignore the cache's contents and rebuild it)
            and what :func:`~lbnorm.readers.catalog.read_files` reads.
        progress: Called as ``progress(stage, done, total)`` per file read.

    Returns:
        The inputs; ``files`` has two more columns, ``cache`` (``parsed``,
        ``cached``, ``rejected``, or ``table`` for score tables) and ``reason``
        (why a file was rejected), and ``files.attrs["cache"]`` holds the
        :class:`CacheStats` as a dict.

    Raises:
        InputError: A path is missing or holds nothing readable.
        OutputError: The cache directory cannot be written, or another run
            holds its lock.
    """
    assert options.cache is not None
    cache = Path(options.cache)
    started = time.perf_counter()
    results, others = _split_paths(paths)
    batches: list[Iterator[Batch]] = []
    catalogs: list[pd.DataFrame] = []
    num_rows = 0
    stats = CacheStats(
        directory=str(cache),
        seen=0,
        parsed=0,
        cached=0,
        rejected=0,
        hashed=0,
        dropped=0,
        rebuilt=False,
        rebuild_reason="",
        seconds=0.0,
    )
    if results:
        scores, catalog, stats = _refresh(
            results, suite, cache, full_rebuild=options.full_rebuild, progress=progress
        )
        batches.append(
            iter(
                [
                    Batch(
                        table=pa.Table.from_pandas(scores, preserve_index=False),
                        source="results files",
                    )
                ]
            )
        )
        catalogs.append(catalog)
        num_rows += len(scores)
    if others:
        read = read_files(others, suite=suite, options=options, progress=progress)
        batches.append(iter(read.batches))
        catalogs.append(
            read.files.assign(cache="table", reason="", sha256_verified=True)
        )
        num_rows += read.num_rows
    files = pd.concat(catalogs, ignore_index=True) if len(catalogs) > 1 else catalogs[0]
    stats_dict = stats.to_dict() | {"seconds": time.perf_counter() - started}
    return Inputs(
        batches=itertools.chain(*batches),
        catalog=catalog_table(files),
        num_rows=num_rows,
        cache_stats=stats_dict,
    )


def check_cache_location(cache: str | Path, out: str | Path) -> None:
    """Refuse a cache directory inside the output directory (or the same one).

    A run replaces its output directory whole, so a cache inside it would be
    wiped by every run and every run would parse everything again.

    Args:
        cache: The cache directory (``--cache``).
        out: The output directory (``--out``).

    Raises:
        OptionsError: `cache` is `out` or inside it (symbolic links resolved).

    Examples:
        >>> check_cache_location("nightly-cache", "out")
        >>> check_cache_location("out/cache", "out")
        Traceback (most recent call last):
        ...
        lbnorm.errors.OptionsError: --cache out/cache is inside --out out, which every run replaces whole: the cache would be wiped each time.
        Hint: keep the cache beside the output, e.g. --cache out.cache (or .lbnorm-cache).
    """
    resolved_cache, resolved_out = Path(cache).resolve(), Path(out).resolve()
    if resolved_cache == resolved_out or resolved_out in resolved_cache.parents:
        msg = (
            f"--cache {cache} is inside --out {out}, which every run replaces whole: "
            "the cache would be wiped each time.\n"
            f"Hint: keep the cache beside the output, e.g. --cache {Path(out).name}.cache "
            "(or .lbnorm-cache)."
        )
        raise OptionsError(msg)


def _split_paths(paths: Sequence[str | Path]) -> tuple[list[Path], list[Path]]:
    """Results files (found as :func:`~lbnorm.readers.catalog.read_files` finds them) and the rest."""
    if not paths:
        msg = "no input given.\nHint: pass score files or a results directory."
        raise InputError(msg)
    results: list[Path] = []
    others: list[Path] = []
    for entry in map(Path, paths):  # the paths given, not their files
        if entry.is_dir() and any(entry.rglob("results_*.json")):
            results.extend(find_results_files(entry))
        elif entry.is_file() and entry.suffix.lower() == ".json":
            results.append(entry)
        else:
            others.append(entry)  # tables, or an error read_files will explain
    return results, others


def _refresh(
    files: list[Path],
    suite: Suite,
    cache: Path,
    *,
    full_rebuild: bool,
    progress: ProgressCallback | None,
) -> tuple[pd.DataFrame, pd.DataFrame, CacheStats]:
    subtasks = suite.subtask_table()
    pairs = list(zip(subtasks["task"], subtasks["metric"], strict=True))
    pairs_hash = hashlib.sha256(json.dumps(pairs).encode()).hexdigest()
    _make_directory(cache)
    with _locked(cache):
        moved = _clear_index_place(cache)
        entries, rows, stat_ns, reason = _empty_entries(), _empty_rows(), 0, ""
        if full_rebuild:
            reason = "--full rebuild asked for"
        elif moved:
            reason = f"corrupt: {_META} was not a file (moved aside to {moved})"
        else:
            entries, rows, stat_ns, reason = _load(cache, pairs_hash)
        started_ns = time.time_ns()  # before any stat: the next run's racy line
        current = _stat(files)
        previous = entries[["path", *_STAT, "sha256"]].rename(
            columns={name: f"old_{name}" for name in [*_STAT, "sha256"]}
        )
        merged = current.merge(previous, on="path", how="left", validate="one_to_one")
        is_unchanged = _is_unchanged(merged, stat_ns)
        reused: list[str] = list(merged["path"][is_unchanged])
        read = _read_changed(
            merged[~is_unchanged], entries.set_index("path"), pairs, progress
        )
        reused += read.reused
        status = dict.fromkeys(merged["path"][is_unchanged], "cached") | read.status
        verified = dict.fromkeys(merged["path"][is_unchanged], False) | read.verified
        new_entries, parsed = read.entries, read.parsed
        new_rows = _rows_of(parsed)
        bad = _check_rows(new_rows)  # one pass over every new score
        new_rows = new_rows[~new_rows["path"].isin(list(bad))]
        new_entries = [
            _rejected(entry, bad[entry["path"]]) if entry["path"] in bad else entry
            for entry in new_entries  # one entry per changed file
        ]
        is_kept = entries["path"].isin(list(merged["path"][is_unchanged]))
        table = pd.concat(
            [entries[is_kept], pd.DataFrame(new_entries, columns=_ENTRIES.names)],
            ignore_index=True,
        ).astype(dict.fromkeys(["n_ignored", "n_rows", *_STAT], "int64"))
        table = table.astype({"chat_template": bool})
        scores_rows = pd.concat(
            [rows[rows["path"].isin(reused)], new_rows], ignore_index=True
        )
        dropped = int((~entries["path"].isin(current["path"])).sum())
        if new_entries or dropped or reason or stat_ns == 0:
            _store(cache, table, scores_rows, pairs_hash, stat_ns=started_ns)
    table = table.set_index("path").loc[current["path"]].reset_index()
    status_column = np.where(
        table["status"] == "rejected", "rejected", table["path"].map(status).to_numpy()
    )
    scores, catalog = _assemble(
        table.assign(
            display=current["display"].to_numpy(),
            cache=status_column,
            sha256_verified=table["path"].map(verified).to_numpy(dtype=bool),
        ),
        scores_rows,
        subtasks,
    )
    stats_of_run = CacheStats(
        directory=str(cache),
        seen=len(current),
        parsed=int((catalog["cache"] == "parsed").sum()),
        cached=int((catalog["cache"] == "cached").sum()),
        rejected=int((catalog["cache"] == "rejected").sum()),
        dropped=dropped,
        rebuilt=bool(reason),
        rebuild_reason=reason,
        hashed=int(catalog["sha256_verified"].sum()),
        seconds=0.0,
    )
    return scores, catalog, stats_of_run


def _is_unchanged(merged: pd.DataFrame, stat_ns: int) -> npt.NDArray[np.bool_]:
    """Files whose stat equals the cached one, and old enough to trust it.

    A file changed within :data:`_RACY_NS` of the cache's own stat could have
    changed again within the same clock tick: it is read again.
    """
    is_unchanged: npt.NDArray[np.bool_] = np.logical_and.reduce(
        [merged[name].eq(merged[f"old_{name}"]).to_numpy(bool) for name in _STAT]
        + [
            merged["size"].to_numpy() >= 0,  # a stat that failed is no match
            np.maximum(
                merged["mtime_ns"].to_numpy(np.int64),
                merged["ctime_ns"].to_numpy(np.int64),
            )
            < stat_ns - _RACY_NS,
        ]
    )
    return is_unchanged


@dataclass(frozen=True, slots=True, kw_only=True)
class _Changed:
    """What reading the changed files gave: entries, parsed files, statuses."""

    entries: list[dict[str, Any]]
    parsed: list[tuple[str, HarnessFile]]
    reused: list[str]  # touched, same bytes: the cached rows stay
    status: dict[str, str]
    verified: dict[str, bool]


def _read_changed(
    to_read: pd.DataFrame,
    kept: pd.DataFrame,
    pairs: list[tuple[str, str]],
    progress: ProgressCallback | None,
) -> _Changed:
    """Read and hash the changed files (on every core when many); parse the new ones.

    A file whose hash is the cached one (touched, not changed) is not parsed
    again. An unreadable file stops the run.
    """
    changed = _Changed(entries=[], parsed=[], reused=[], status={}, verified={})
    scanned = scan_results_files(
        [Path(display) for display in to_read["display"]],
        pairs,
        read=functools.partial(read_bytes, max_bytes=MAX_RESULTS_BYTES),
        known=[sha if isinstance(sha, str) else None for sha in to_read["old_sha256"]],
        stop_at_error=False,
        progress=progress,
        stage="parsing changed results files",
    )
    stats = cast("list[dict[str, int]]", to_read[list(_STAT)].to_dict("records"))
    with contextlib.closing(scanned):  # its workers stop however the loop ends
        for key, stat, item in zip(to_read["path"], stats, scanned, strict=True):
            # one iteration per changed file: its entry, from the bytes just read
            if item.error is not None and not item.sha256:  # unreadable: stop
                raise item.error
            if item.parsed is None and item.error is None:  # touched, not changed
                entry = kept.loc[key].to_dict() | {"path": key, **stat}
                entry |= {"size": item.size, "sha256": item.sha256}
                changed.reused.append(key)
                changed.status[key] = "cached"
            else:
                entry, harness = _parse(key, item, stat=stat)
                if harness is not None:
                    changed.parsed.append((key, harness))
                changed.status[key] = "parsed"
            changed.verified[key] = True
            changed.entries.append(entry)
    return changed


def _stat(files: list[Path]) -> pd.DataFrame:
    """Each file keyed by absolute path, with the stat fields of :data:`_STAT`."""
    stats = [_stat_fields(file) for file in files]
    frame = pd.DataFrame(
        {
            "path": [str(file.absolute()) for file in files],
            "display": [str(file) for file in files],
        }
    )
    for at, name in enumerate(_STAT):  # five fields, each one column
        frame[name] = pd.array([fields[at] for fields in stats], dtype="int64")
    return frame.drop_duplicates("path", ignore_index=True)


def _stat_fields(file: Path) -> tuple[int, int, int, int, int]:
    try:
        stat = file.stat()
    except OSError:  # gone or unreadable: reading it will say so, with a hint
        return -1, -1, -1, -1, -1
    return (
        stat.st_size,
        stat.st_mtime_ns,
        stat.st_ctime_ns,
        stat.st_ino & 0x7FFF_FFFF_FFFF_FFFF,  # int64 columns
        stat.st_dev & 0x7FFF_FFFF_FFFF_FFFF,
    )


def _parse(
    key: str, scanned: ScannedFile, *, stat: dict[str, int]
) -> tuple[dict[str, Any], HarnessFile | None]:
    """One scanned file's cache entry; a file that does not parse is rejected."""
    entry: dict[str, Any] = {
        "path": key,
        **stat,  # taken before the read: a change during the run is seen next time
        "size": scanned.size,  # of the bytes hashed and parsed
        "sha256": scanned.sha256,
        "status": "ok",
        "reason": "",
        "model": "",
        "precision": "",
        "revision": "",
        "chat_template": False,
        "timestamp": "",
        "n_ignored": 0,
        "n_rows": 0,
    }
    parsed = scanned.parsed
    if parsed is None:
        return _rejected(entry, _first_line(str(scanned.error))), None
    return entry | {
        "model": parsed.model,
        "precision": parsed.precision,
        "revision": parsed.revision,
        "chat_template": parsed.chat_template,
        "timestamp": parsed.timestamp,
        "n_ignored": parsed.n_ignored,
        "n_rows": len(parsed.rows["raw_score"]),
    }, parsed


def _rejected(entry: dict[str, Any], reason: str) -> dict[str, Any]:
    return entry | {"status": "rejected", "reason": reason, "n_rows": 0}


def _rows_of(parsed: list[tuple[str, HarnessFile]]) -> pd.DataFrame:
    """The score rows of newly parsed files, as one frame (lists joined once)."""
    lengths = [len(harness.rows["raw_score"]) for _, harness in parsed]

    def joined(name: str) -> list[Any]:
        return [value for _, harness in parsed for value in harness.rows[name]]

    return pd.DataFrame(
        {
            "path": np.repeat(
                np.array([key for key, _ in parsed], dtype=object), lengths
            ),
            "subtask_index": pd.array(joined("subtask_index"), dtype="int32"),
            "raw_score": pd.array(joined("raw_score"), dtype="float64"),
            "stderr": pd.array(joined("stderr"), dtype="float64"),
            "n_samples": pd.array(joined("n_samples"), dtype="Int64"),
            "key": pd.array(joined("key"), dtype="str"),
        }
    )


def _check_rows(rows: pd.DataFrame) -> dict[str, str]:
    """Files whose scores break the contract, with the first violation as reason."""
    raw = rows["raw_score"].to_numpy(dtype=np.float64)
    stderr = rows["stderr"].to_numpy(dtype=np.float64, na_value=np.nan)
    samples = rows["n_samples"].to_numpy(dtype=np.float64, na_value=np.nan)
    checks = {
        "is {value!r}, outside [0, 1] (a percentage?)": (
            ~((raw >= 0.0) & (raw <= 1.0)),
            raw,
        ),
        "has stderr {value!r}, not a finite number >= 0": (
            ~np.isnan(stderr) & ~((stderr >= 0) & np.isfinite(stderr)),
            stderr,
        ),
        "has n_samples {value!r}, not > 0": (
            ~np.isnan(samples) & (samples <= 0),
            samples,
        ),
    }
    reasons: dict[str, str] = {}
    for problem, (mask, values) in checks.items():  # three checks, each over all rows
        for at in np.flatnonzero(mask):  # the failing rows only, usually none
            path = str(rows["path"].iloc[at])
            text = problem.format(value=float(values[at]))
            reasons.setdefault(path, f"{rows['key'].iloc[at]} {text}")
    return reasons


def _assemble(
    entries: pd.DataFrame, rows: pd.DataFrame, subtasks: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The scores taken from the accepted files, and the file catalog.

    Taken as :func:`lbnorm.readers.harness.combine_results` takes them from
    freshly parsed files (the newest result per variant and subtask), so a
    cached run reads a tree exactly as an uncached one.
    """
    is_ok = (entries["status"] == "ok").to_numpy()
    accepted = entries[is_ok]
    by_path: dict[str, pd.DataFrame] = {}
    for path, group in rows.groupby("path", sort=False):  # one step per file
        by_path[str(path)] = group
    empty = rows.iloc[:0]
    parsed = [
        HarnessFile(
            path=str(entry["display"]),
            model=str(entry["model"]),
            precision=str(entry["precision"]),
            revision=str(entry["revision"]),
            chat_template=bool(entry["chat_template"]),
            timestamp=str(entry["timestamp"]),
            rows={
                name: [None if pd.isna(v) else v for v in picked[name].tolist()]
                for picked in [
                    by_path.get(entry["path"], empty).sort_values("subtask_index")
                ]
                for name in ("subtask_index", "raw_score", "stderr", "n_samples", "key")
            },
            n_ignored=int(entry["n_ignored"]),
        )
        for entry in accepted.to_dict("records")  # one step per file, not per row
    ]
    columns = {
        name: subtasks[name].tolist()
        for name in ("benchmark", "subtask", "task", "metric")
    }
    pairs = list(zip(columns["task"], columns["metric"], strict=True))
    read = combine_results(parsed, pairs, columns)
    n_files = len(entries)
    taken = np.zeros(n_files, dtype=np.int64)
    taken[is_ok] = read.files["rows"].to_numpy()
    superseded_by = np.full(n_files, None, dtype=object)
    superseded_by[is_ok] = read.files["superseded_by"].to_pylist()
    tasks = np.full(n_files, None, dtype=object)
    for at, given in zip(
        np.flatnonzero(is_ok), read.files["tasks"].to_pylist(), strict=True
    ):
        tasks[at] = given
    catalog = pd.DataFrame(
        {
            "path": entries["display"].to_numpy(),
            "format": "lm-eval-harness",
            "sha256": entries["sha256"].to_numpy(),
            "sha256_verified": entries["sha256_verified"].to_numpy(dtype=bool),
            "bytes": entries["size"].to_numpy(dtype=np.int64),
            "rows": taken,
            "superseded_by": superseded_by,
            "n_ignored": entries["n_ignored"].to_numpy(dtype=np.int64),
            "tasks": tasks,
            "cache": entries["cache"].to_numpy(),
            "reason": entries["reason"].to_numpy(),
        }
    )
    scores: pd.DataFrame = read.scores.to_pandas(types_mapper=pd.ArrowDtype)
    return scores, catalog


def _load(cache: Path, pairs_hash: str) -> tuple[pd.DataFrame, pd.DataFrame, int, str]:
    """The cached entries and rows, when its files were stat'ed, and why they were discarded.

    Whatever the directory holds, this returns: a damaged cache is a reason to
    rebuild, never an error.
    """
    empty = _empty_entries(), _empty_rows()
    meta_path = cache / _META
    if not meta_path.is_file():  # none yet (a non-file was moved aside first)
        return *empty, 0, ""
    try:
        meta = _check_index(json.loads(meta_path.read_bytes()))
    except (OSError, ValueError, RecursionError) as exc:  # JSON, UTF-8, nesting
        return *empty, 0, f"corrupt: {type(exc).__name__}: {_first_line(str(exc))}"
    if meta["format"] != CACHE_FORMAT or meta["lbnorm"] != lbnorm_version():
        return *empty, 0, "made by another lbnorm version"
    if meta["pairs"] != pairs_hash:
        return *empty, 0, "made for other subtasks (another suite)"
    tables = {}
    for name, schema in (("entries", _ENTRIES), ("rows", _ROWS)):
        path = cache / meta[name]["file"]
        try:
            if not path.is_file():  # a directory in its place must not stay fatal
                msg = f"{path.name} is missing or not a file"
                raise FileNotFoundError(msg)
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() != meta[name]["sha256"]:
                return *empty, 0, f"corrupt: {path.name} does not match its checksum"
            table = pq.read_table(io.BytesIO(data))
        except (OSError, pa.ArrowException) as exc:
            return *empty, 0, f"corrupt: {type(exc).__name__}: {_first_line(str(exc))}"
        if not table.schema.equals(schema):
            return *empty, 0, f"corrupt: {path.name} has an unexpected schema"
        tables[name] = table.to_pandas()
    entries, rows = tables["entries"], tables["rows"]
    counts = rows["path"].value_counts()
    expected = entries.set_index("path")["n_rows"]
    if (
        entries["path"].duplicated().any()
        or not counts.index.isin(expected.index).all()
        or not (counts.reindex(expected.index, fill_value=0) == expected).all()
    ):
        return *empty, 0, "corrupt: scores do not match the file entries"
    return entries, rows, meta["stat_ns"], ""


def _check_index(meta: object) -> dict[str, Any]:
    """The index, if it has every field with a value of its type; else ValueError."""
    if not isinstance(meta, dict):
        msg = f"the index is not a JSON object: {json.dumps(meta)[:80]}"
        raise ValueError(msg)  # a list, a string, null
    is_valid = (
        isinstance(meta.get("format"), int)
        and isinstance(meta.get("lbnorm"), str)
        and isinstance(meta.get("pairs"), str)
        and isinstance(meta.get("stat_ns"), int)
        and not isinstance(meta.get("stat_ns"), bool)
        and 0 <= meta["stat_ns"] < 2**63
        and all(
            isinstance(meta.get(name), dict)
            and isinstance(meta[name].get("file"), str)
            and _GENERATION.fullmatch(meta[name]["file"]) is not None
            and meta[name]["file"].startswith(f"{name}-")
            and isinstance(meta[name].get("sha256"), str)
            and _SHA256.fullmatch(meta[name]["sha256"]) is not None
            for name in ("entries", "rows")
        )
    )
    if not is_valid:
        msg = (
            f"the index lacks a field or has one of the wrong type: {sorted(meta)[:8]}"
        )
        raise ValueError(msg)
    return meta


def _clear_index_place(cache: Path) -> str:
    """Move aside what is not a file where the index belongs; return its new name.

    A directory, a pipe or a dangling link named ``lbnorm-cache.json`` would make
    every run fail to write the index (or, a pipe, block reading it). It is
    renamed, never deleted: lbnorm did not write it.
    """
    path = cache / _META
    if path.is_file() or not (path.exists() or path.is_symlink()):
        return ""
    aside = path.with_name(f"{path.name}.damaged-{uuid.uuid4().hex[:12]}")
    try:
        path.rename(aside)
    except OSError as exc:
        msg = (
            f"{path}: the cache's index is not a file and cannot be moved aside "
            f"({exc.strerror}).\nHint: remove it, or choose another --cache directory."
        )
        raise OutputError(msg) from exc
    return aside.name


def _store(
    cache: Path,
    entries: pd.DataFrame,
    rows: pd.DataFrame,
    pairs_hash: str,
    *,
    stat_ns: int,
) -> None:
    """Write a new generation, then point the index at it, then delete older ones."""
    token = uuid.uuid4().hex[:12]
    meta: dict[str, Any] = {
        "format": CACHE_FORMAT,
        "lbnorm": lbnorm_version(),
        "pairs": pairs_hash,
        "stat_ns": stat_ns,  # when the files were stat'ed (before they were read)
    }
    try:
        for name, frame, schema in (
            ("entries", entries, _ENTRIES),
            ("rows", rows, _ROWS),
        ):
            path = cache / f"{name}-{token}.parquet"
            table = pa.Table.from_pandas(
                frame[schema.names], schema=schema, preserve_index=False
            )
            write_parquet_atomically(path, table)
            meta[name] = {"file": path.name, "sha256": sha256_file(path)}
        text = json.dumps(meta, indent=2, sort_keys=True) + "\n"
        write_bytes_atomically(cache / _META, text.encode())
    except OutputError as exc:  # the writer's message speaks of --out
        for name in ("entries", "rows"):
            (cache / f"{name}-{token}.parquet").unlink(missing_ok=True)
        raise _cache_error(cache, exc.__cause__, "cannot write the cache") from exc
    for stale in cache.iterdir():
        if (
            _GENERATION.fullmatch(stale.name)
            and token not in stale.name
            and stale.is_file()  # the cache's own old files: a directory stays
        ):
            stale.unlink(missing_ok=True)


def _make_directory(cache: Path) -> None:
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cache_error(cache, exc, "cannot create the cache directory") from exc
    if not cache.is_dir():
        raise _cache_error(cache, None, "is not a directory")


def _cache_error(cache: Path, cause: BaseException | None, what: str) -> OutputError:
    """An error about the --cache directory, and how to fix it (never --out)."""
    reason = (
        f" ({cause.strerror})" if isinstance(cause, OSError) and cause.strerror else ""
    )
    msg = (
        f"--cache {cache}: {what}{reason}; nothing was written to the output.\n"
        "Hint: make the cache directory writable, choose another --cache directory, "
        "or leave --cache out to run without the cache."
    )
    return OutputError(msg)


def _locked(cache: Path) -> contextlib.AbstractContextManager[None]:
    return exclusive_lock(
        cache / ".lock",
        busy=(
            f"--cache {cache}: another lbnorm run is using this cache.\n"
            "Hint: wait for it, or give this run its own --cache."
        ),
        unlockable=lambda exc: _cache_error(cache, exc, "cannot lock the cache"),
    )


def _empty_entries() -> pd.DataFrame:
    empty: pd.DataFrame = _ENTRIES.empty_table().to_pandas()
    return empty


def _empty_rows() -> pd.DataFrame:
    empty: pd.DataFrame = _ROWS.empty_table().to_pandas()
    return empty


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0]
