"""The parse cache for nightly runs: results files are parsed once, then reused.

A nightly run over a tree of thousands of lm-evaluation-harness results files
should cost only what changed. The cache directory keeps every file's parsed
scores as Parquet, keyed by the file's absolute path, size, modification time
and content hash (sha256):

* a file whose size and mtime are unchanged is taken from the cache unread;
* a file whose size or mtime changed is read and hashed: same content, reused
  (the new stat is recorded); different content, parsed again;
* a new file is parsed; a cached file that no longer exists is dropped.

A file that cannot be parsed, or whose scores break the contract (a score
outside [0, 1], a negative stderr), is *rejected* with its reason instead of
stopping the run, and remembered as rejected until it changes. The newest file
per model variant wins, as :mod:`lbnorm.readers.harness` decides, so the result
equals a run without the cache.

Layout: ``lbnorm-cache.json`` names one generation of ``entries-<id>.parquet``
(one row per file) and ``rows-<id>.parquet`` (one row per score) with their
sha256, the cache format, the lbnorm version and a hash of the suite's (task,
metric) pairs. A new generation is written beside the old one and the JSON is
replaced last, so a killed run leaves the previous cache intact. On load both
files are hashed and checked against each other; a cache that fails any check,
was made by another lbnorm version or for other subtasks is rebuilt from
scratch, never trusted (``full_rebuild=True`` forces that). Files changed within
two seconds of the cache write are re-hashed on the next run (their mtime could
hide a second change, as in git's "racy clean" problem).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import itertools
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lbnorm.errors import InputError, OutputError
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

__all__ = ["CACHE_FORMAT", "CacheStats", "read_files_cached"]

#: Bumped whenever what the cache stores changes meaning.
CACHE_FORMAT = 1
_META = "lbnorm-cache.json"
_RACY_NS = 2_000_000_000

_ENTRIES = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
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
        cached: Files taken from the cache (unchanged, or changed stat only).
        rejected: Files rejected (this run or remembered), with reasons in the
            file catalog.
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
        catalogs.append(read.files.assign(cache="table", reason=""))
        num_rows += read.num_rows
    files = pd.concat(catalogs, ignore_index=True) if len(catalogs) > 1 else catalogs[0]
    stats_dict = stats.to_dict() | {"seconds": time.perf_counter() - started}
    return Inputs(
        batches=itertools.chain(*batches),
        catalog=catalog_table(files),
        num_rows=num_rows,
        cache_stats=stats_dict,
    )


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
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        msg = f"{cache}: cannot create the cache directory ({exc.strerror}).\nHint: choose a writable --cache directory."
        raise OutputError(msg) from exc
    with _locked(cache):
        if full_rebuild:
            entries, rows, written_at, reason = (
                _empty_entries(),
                _empty_rows(),
                0,
                "--full rebuild asked for",
            )
        else:
            entries, rows, written_at, reason = _load(cache, pairs_hash)
        current = _stat(files)
        previous = entries[["path", "size", "mtime_ns", "sha256"]].rename(
            columns={
                "size": "old_size",
                "mtime_ns": "old_mtime_ns",
                "sha256": "old_sha256",
            }
        )
        merged = current.merge(previous, on="path", how="left", validate="one_to_one")
        is_unchanged = (
            (merged["size"] == merged["old_size"])
            & (merged["mtime_ns"] == merged["old_mtime_ns"])
            & (merged["mtime_ns"] < written_at - _RACY_NS)
        ).to_numpy(dtype=bool)
        kept = entries.set_index("path")
        reused: list[str] = list(merged["path"][is_unchanged])
        new_entries: list[dict[str, Any]] = []
        parsed: list[tuple[str, HarnessFile]] = []
        status: dict[str, str] = dict.fromkeys(reused, "cached")
        to_read = merged.loc[
            ~is_unchanged, ["path", "display", "size", "mtime_ns", "old_sha256"]
        ]
        # read, hashed and parsed on every core when many changed (a first run);
        # a file whose content hash is the cached one is not parsed again
        scanned = scan_results_files(
            [Path(display) for display in to_read["display"]],
            pairs,
            read=functools.partial(read_bytes, max_bytes=MAX_RESULTS_BYTES),
            known=[
                sha if isinstance(sha, str) else None for sha in to_read["old_sha256"]
            ],
            stop_at_error=False,
            progress=progress,
            stage="parsing changed results files",
        )
        for (key, _display, size, mtime_ns, _old_sha), item in zip(
            to_read.itertuples(index=False), scanned, strict=True
        ):
            # one iteration per changed file: its entry, from its scan
            if item.error is not None and not item.sha256:  # unreadable: stop the run
                scanned.close()
                raise item.error
            if item.parsed is None and item.error is None:
                # touched, not changed: keep the parse, note the stat
                entry = kept.loc[key].to_dict() | {
                    "path": key,
                    "size": size,
                    "mtime_ns": mtime_ns,
                }
                new_entries.append(entry)
                reused.append(key)
                status[key] = "cached"
            else:
                entry, harness = _parse(key, item, size=size, mtime_ns=mtime_ns)
                new_entries.append(entry)
                if harness is not None:
                    parsed.append((key, harness))
                status[key] = "parsed"
        new_rows = _rows_of(parsed)
        bad = _check_rows(new_rows)  # one pass over every new score
        new_rows = new_rows[~new_rows["path"].isin(list(bad))]
        new_entries = [
            _rejected(entry, bad[entry["path"]]) if entry["path"] in bad else entry
            for entry in new_entries  # one entry per changed file
        ]
        is_reused = entries["path"].isin(reused) & ~entries["path"].isin(
            [e["path"] for e in new_entries]
        )
        table = pd.concat(
            [entries[is_reused], pd.DataFrame(new_entries, columns=_ENTRIES.names)],
            ignore_index=True,
        )
        table = table.astype(
            {
                "size": "int64",
                "mtime_ns": "int64",
                "n_ignored": "int64",
                "n_rows": "int64",
                "chat_template": bool,
            }
        )
        scores_rows = pd.concat(
            [rows[rows["path"].isin(reused)], new_rows], ignore_index=True
        )
        dropped = int((~entries["path"].isin(current["path"])).sum())
        is_changed = bool(new_entries) or dropped > 0 or bool(reason) or written_at == 0
        if is_changed:
            _store(cache, table, scores_rows, pairs_hash)
    table = table.set_index("path").loc[current["path"]].reset_index()
    status_column = np.where(
        table["status"] == "rejected", "rejected", table["path"].map(status).to_numpy()
    )
    scores, catalog = _assemble(
        table.assign(display=current["display"].to_numpy(), cache=status_column),
        scores_rows,
        subtasks,
    )
    stats = CacheStats(
        directory=str(cache),
        seen=len(current),
        parsed=int((catalog["cache"] == "parsed").sum()),
        cached=int((catalog["cache"] == "cached").sum()),
        rejected=int((catalog["cache"] == "rejected").sum()),
        dropped=dropped,
        rebuilt=bool(reason),
        rebuild_reason=reason,
        seconds=0.0,
    )
    return scores, catalog, stats


def _stat(files: list[Path]) -> pd.DataFrame:
    """Size and mtime of each file, keyed by absolute path (one stat per file)."""
    stats = [file.stat() for file in files]
    return pd.DataFrame(
        {
            "path": [str(file.absolute()) for file in files],
            "display": [str(file) for file in files],
            "size": pd.array([stat.st_size for stat in stats], dtype="int64"),
            "mtime_ns": pd.array([stat.st_mtime_ns for stat in stats], dtype="int64"),
        }
    ).drop_duplicates("path", ignore_index=True)


def _parse(
    key: str, scanned: ScannedFile, *, size: int, mtime_ns: int
) -> tuple[dict[str, Any], HarnessFile | None]:
    """One scanned file's cache entry; a file that does not parse is rejected."""
    entry: dict[str, Any] = {
        "path": key,
        "size": size,
        "mtime_ns": mtime_ns,
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
    """The cached entries and rows, the write time, and why they were discarded ('' if kept)."""
    meta_path = cache / _META
    if not meta_path.exists():
        return _empty_entries(), _empty_rows(), 0, ""
    try:
        meta = json.loads(meta_path.read_text("utf-8"))
        if meta.get("format") != CACHE_FORMAT or meta.get("lbnorm") != lbnorm_version():
            return _empty_entries(), _empty_rows(), 0, "made by another lbnorm version"
        if meta.get("pairs") != pairs_hash:
            return (
                _empty_entries(),
                _empty_rows(),
                0,
                "made for other subtasks (another suite)",
            )
        tables = {}
        for name, schema in (("entries", _ENTRIES), ("rows", _ROWS)):
            data = (cache / meta[name]["file"]).read_bytes()
            if hashlib.sha256(data).hexdigest() != meta[name]["sha256"]:
                return (
                    _empty_entries(),
                    _empty_rows(),
                    0,
                    f"corrupt: {meta[name]['file']} does not match its checksum",
                )
            table = pq.read_table(io.BytesIO(data))
            if not table.schema.equals(schema):
                return (
                    _empty_entries(),
                    _empty_rows(),
                    0,
                    f"corrupt: {meta[name]['file']} has an unexpected schema",
                )
            tables[name] = table.to_pandas()
        written_at = int(meta["written_at_ns"])
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        return (
            _empty_entries(),
            _empty_rows(),
            0,
            f"corrupt: {type(exc).__name__}: {_first_line(str(exc))}",
        )
    entries, rows = tables["entries"], tables["rows"]
    counts = rows["path"].value_counts()
    expected = entries.set_index("path")["n_rows"]
    if (
        entries["path"].duplicated().any()
        or not counts.index.isin(expected.index).all()
        or not (counts.reindex(expected.index, fill_value=0) == expected).all()
    ):
        return (
            _empty_entries(),
            _empty_rows(),
            0,
            "corrupt: scores do not match the file entries",
        )
    return entries, rows, written_at, ""


def _store(
    cache: Path, entries: pd.DataFrame, rows: pd.DataFrame, pairs_hash: str
) -> None:
    """Write a new generation, then point the JSON at it, then delete older ones."""
    token = uuid.uuid4().hex[:12]
    meta: dict[str, Any] = {
        "format": CACHE_FORMAT,
        "lbnorm": lbnorm_version(),
        "pairs": pairs_hash,
        "written_at_ns": time.time_ns(),
    }
    for name, frame, schema in (("entries", entries, _ENTRIES), ("rows", rows, _ROWS)):
        path = cache / f"{name}-{token}.parquet"
        write_parquet_atomically(
            path,
            pa.Table.from_pandas(
                frame[schema.names], schema=schema, preserve_index=False
            ),
        )
        meta[name] = {"file": path.name, "sha256": sha256_file(path)}
    write_bytes_atomically(
        cache / _META, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode()
    )
    for stale in [*cache.glob("entries-*.parquet"), *cache.glob("rows-*.parquet")]:
        if token not in stale.name:  # the cache's own old generations only
            stale.unlink(missing_ok=True)


def _locked(cache: Path) -> contextlib.AbstractContextManager[None]:
    return exclusive_lock(
        cache / ".lock",
        busy=(
            f"{cache}: another lbnorm run is using this cache.\n"
            "Hint: wait for it, or give this run its own --cache."
        ),
        unlockable=lambda exc: OutputError(
            f"{cache}: cannot lock the cache ({exc.strerror}).\n"
            "Hint: choose a writable --cache directory."
        ),
    )


def _empty_entries() -> pd.DataFrame:
    empty: pd.DataFrame = _ENTRIES.empty_table().to_pandas()
    return empty


def _empty_rows() -> pd.DataFrame:
    empty: pd.DataFrame = _ROWS.empty_table().to_pandas()
    return empty


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0]
