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
file: the way to verify every hash. The stat is trusted otherwise because
reading and hashing every file costs about what parsing it does
(``benchmarks_perf/README.md`` has the measurements).

A new file is parsed; a cached file that no longer exists is dropped. A file
that cannot be parsed, or whose scores break the contract (a score outside
[0, 1], a negative stderr), is *rejected* with its reason instead of stopping
the run, and remembered as rejected until its content changes. The newest file
per model variant wins, as :mod:`lbnorm.readers.harness` decides, so the result
equals a run without the cache.

Layout: ``lbnorm-cache.json`` (the index) names one generation of
``entries-<id>.parquet`` (one row per file) and ``rows-<id>.parquet`` (one row
per score) with their sha256, the cache format, the lbnorm version, the results
parser's key (:func:`parser_key`: its version and source), a hash of the suite's
subtasks (benchmark, subtask, task, metric) and when the files were stat'ed. A new generation is
written beside the old one and the index replaced last, so a killed run leaves
the previous cache intact. On load the index is checked field by field and both
files are hashed and checked against each other; a cache that fails any check
(an index that is not such an object, nested beyond reason, a number out of
range, a file that is missing, damaged or a directory), was made by another
lbnorm version or parser or for other subtasks is rebuilt from scratch, never trusted
(``full_rebuild=True`` forces that). Something that is not a regular file where
the index belongs is moved aside (``lbnorm-cache.json.damaged-<id>``), never
deleted; of the generation files, lbnorm deletes only its own regular files.
These files, the index and the lock are kept by :mod:`lbnorm.readers.cache_store`;
this module decides what to reuse and assembles the run's scores from it.

The cache directory must not be inside the output directory, which every run
replaces whole (:func:`check_cache_location`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.arrow import (
    booleans,
    numbers,
    scalar,
    strings,
    to_numpy,
)
from lbnorm.core.files import MAX_RESULTS_BYTES, read_bytes
from lbnorm.core.options import ProgressCallback, RunOptions
from lbnorm.readers import cache_store, harness, results_tree
from lbnorm.readers.cache_store import (
    ENTRIES,
    ROWS,
    SETTING,
    first_line,
    load,
    opened,
    store,
)
from lbnorm.readers.catalog import Inputs, read_files
from lbnorm.readers.comparability import SETTINGS, RunSettings
from lbnorm.readers.harness import (
    PARSER_VERSION,
    HarnessFile,
    subtask_columns,
    variant_folder,
)
from lbnorm.readers.instances import results_columns
from lbnorm.readers.newest import (
    ParsedFiles,
    ResultsRead,
    SubtaskColumns,
    combine_parsed,
    result_keys,
)
from lbnorm.readers.results_tree import (
    parsed_columns,
    scan_results_files,
)
from lbnorm.suites import Scales, Suite, suite_arrays

IntArray = npt.NDArray[np.int64]

__all__ = [
    "parser_key",
    "read_files_cached",
]

#: What a file's stat must keep for its cached parse and hash to be trusted unread.
#: The ctime cannot be set back (a write or a utime sets it to now), so a rewrite
#: that keeps size and mtime, or restores the mtime, is still seen.
_STAT = ("size", "mtime_ns", "ctime_ns", "inode", "device")
#: A file changed this close to (or after) the previous run's stat could have
#: changed again within one timestamp tick: it is read again (git's "racy clean").
_RACY_NS = 2_000_000_000


def read_files_cached(
    paths: Sequence[str | Path],
    *,
    suite: Suite,
    options: RunOptions,
    progress: ProgressCallback | None = None,
) -> Inputs:
    """Read inputs as :func:`lbnorm.readers.catalog.read_files` does, with a parse cache.

    The inputs are found and read as a plain run finds and reads them; the
    results files among them go through the cache (parsed only when new or
    changed), so the result equals a plain run's.

    Args:
        paths: Files or directories.
        suite: The suite, which says which results entries to read.
        options: The run's options: ``cache`` (the cache directory, created if
            needed), ``full_rebuild`` (ignore the cache's contents and rebuild it)
            and what :func:`~lbnorm.readers.catalog.read_files` reads.
        progress: Called as ``progress(stage, done, total)`` per file read.

    Returns:
        The inputs; their catalog has two more columns, ``sha256_verified``
        and ``cache`` (``parsed``, ``cached``, ``rejected``, or ``table`` for
        every other input), ``reason`` says why a file was rejected, and
        ``cache_stats`` holds the refresh's figures (:func:`_stats`) and
        ``rejected`` each rejected file with the variant it held
        (:func:`_rejected_variants`).

    Raises:
        InputError: A path is missing or holds nothing readable.
        OutputError: The cache directory cannot be written, or another run
            holds its lock.
    """
    assert options.cache is not None
    cache = Path(options.cache)
    started = time.perf_counter()
    refreshed: list[dict[str, Any]] = []

    def read_results(files: Sequence[Path]) -> ResultsRead:
        read, stats = _refresh(
            list(files),
            suite,
            cache,
            full_rebuild=options.full_rebuild,
            progress=progress,
        )
        refreshed.append(stats)
        return read

    read = read_files(
        paths,
        suite=suite,
        options=options,
        progress=progress,
        read_results=read_results,
    )
    catalog = read.catalog
    # every input but a results file is read as usual: a "table", hashed this run
    for name, value in (
        ("sha256_verified", scalar(True, pa.bool_())),
        ("cache", scalar("table", pa.string())),
    ):
        if name not in catalog.column_names:  # no results files: tables only
            catalog = catalog.append_column(
                name, pa.nulls(catalog.num_rows, value.type)
            )
        filled = pc.fill_null(catalog[name], value)
        catalog = catalog.set_column(catalog.column_names.index(name), name, filled)
    stats = (
        refreshed[0]
        if refreshed  # else no results files
        else _stats(cache, np.array([], dtype=object), hashed=0, dropped=0, reason="")
    )
    seconds = time.perf_counter() - started
    return replace(read, catalog=catalog, cache_stats=stats | {"seconds": seconds})


def _refresh(
    files: list[Path],
    suite: Suite,
    cache: Path,
    *,
    full_rebuild: bool,
    progress: ProgressCallback | None,
) -> tuple[ResultsRead, dict[str, Any]]:
    """Bring the cache up to date with `files`.

    Returns their scores, catalog, warnings and rejected files (with the
    variants they held), and the cache's figures.
    """
    names = results_columns(subtask_columns(suite), suite)
    pairs = list(zip(names["task"], names["metric"], strict=True))
    columns = ("benchmark", "subtask", "task", "metric")  # (the rows' subtask_index)
    subtasks = list(zip(*(names[column] for column in columns), strict=True))
    pairs_hash = hashlib.sha256(json.dumps(subtasks).encode()).hexdigest()
    with opened(cache) as damaged:
        entries, rows, stat_ns, reason = load(
            cache,
            pairs_hash,
            parser=parser_key(),
            discard="--full rebuild asked for" if full_rebuild else damaged,
        )
        started_ns = time.time_ns()  # before any stat: the next run's racy line
        current = _stat(files)
        all_paths = strings(current.path.tolist())
        old_at = _positions(all_paths, entries["path"])  # -1: not in the cache
        is_unchanged = _is_unchanged(current.stat, entries, old_at, stat_ns)
        changed = np.flatnonzero(~is_unchanged)
        read = _read_changed(current, changed, entries, old_at, pairs, progress)
        new_entries, new_rows = _checked_new(read, pairs, suite_arrays(suite).scales)
        # the entries in the order of the files found: each kept or new
        at = np.empty(len(current.path), dtype=np.int64)
        at[is_unchanged] = old_at[is_unchanged]
        at[changed] = entries.num_rows + np.arange(changed.size)
        table = pa.concat_tables([entries, _entries_table(new_entries)]).take(
            numbers(at, pa.int64())
        )
        unchanged_paths = strings(current.path[is_unchanged].tolist())
        reused = pa.concat_arrays(
            [unchanged_paths, strings(read.reused)]
        )  # files whose cached rows stay
        scores_rows = pa.concat_tables(
            [rows.filter(pc.is_in(rows["path"], value_set=reused)), new_rows]
        )
        dropped = entries.num_rows - int(np.count_nonzero(old_at >= 0))  # (distinct)
        if new_entries or dropped or reason or stat_ns == 0:
            store(
                cache,
                table,
                scores_rows,
                pairs_hash,
                stat_ns=started_ns,
                parser=parser_key(),
            )
    status = np.full(len(current.path), "cached", dtype=object)
    status[changed] = read.status
    status[_is(table["status"], "rejected")] = "rejected"
    read_results, catalog = _assemble(
        table,
        scores_rows,
        names,
        pairs,
        display=current.display,
        status=status,
        verified=~is_unchanged,  # read and hashed this run
    )
    stats_of_run = _stats(
        cache,
        status,
        hashed=int(np.count_nonzero(~is_unchanged)),
        dropped=dropped,
        reason=reason,
    )
    lost = _rejected_variants(table, current.display)
    return replace(read_results, files=catalog, rejected=lost), stats_of_run


def _checked_new(
    read: _Changed, pairs: list[tuple[str, str]], scales: Scales | None
) -> tuple[list[dict[str, Any]], pa.Table]:
    """The changed files' entries and score rows, a file whose scores break the contract rejected."""
    new_rows = _rows_of(read.parsed, pairs)
    bad = _check_rows(new_rows, scales)  # every new score
    if bad:
        new_rows = new_rows.filter(
            pc.invert(pc.is_in(new_rows["path"], value_set=strings(list(bad))))
        )
    new_entries = [
        _rejected(entry, bad[entry["path"]]) if entry["path"] in bad else entry
        for entry in read.entries  # one entry per changed file
    ]
    return new_entries, new_rows


def _stats(
    cache: Path,
    status: npt.NDArray[np.object_],
    *,
    hashed: int,
    dropped: int,
    reason: str,
) -> dict[str, Any]:
    """What one refresh of the cache did, from each file's status, as a JSON-ready dict.

    Returns:
        ``directory`` (the cache directory); ``seen`` (results files found in
        the inputs); ``parsed`` (files parsed this run, new or changed, and
        accepted); ``cached`` (taken from the cache: unchanged stat, or read
        and hashed to the cached content); ``rejected`` (this run or
        remembered, with reasons in the file catalog); ``hashed`` (read and
        hashed this run: the rest were trusted on their unchanged stat, their
        ``sha256_verified`` is false); ``dropped`` (cache entries whose file
        is gone); ``rebuilt`` (the previous cache was discarded) and
        ``rebuild_reason`` (why; '' if not rebuilt, or there was none);
        ``seconds`` (the refresh's wall time, filled in by the caller).
    """
    return {
        "directory": str(cache),
        "seen": len(status),
        "parsed": int(np.count_nonzero(status == "parsed")),
        "cached": int(np.count_nonzero(status == "cached")),
        "rejected": int(np.count_nonzero(status == "rejected")),
        "hashed": hashed,
        "dropped": dropped,
        "rebuilt": bool(reason),
        "rebuild_reason": reason,
        "seconds": 0.0,
    }


def _rejected_variants(
    entries: pa.Table, display: npt.NDArray[np.object_]
) -> tuple[dict[str, Any], ...]:
    """Each rejected file, the variant it held as far as known, and whether it is lost.

    A rejected file gives no score, so its variant leaves the board unless an
    accepted results file holds it too. A variant the file (or an earlier parse
    of it) named is matched on model, precision, revision and chat template;
    one named by its folders on the model alone.

    Returns:
        Per rejected file, in the order found: ``path`` (as found),
        ``model``, ``precision``, ``revision``, ``chat_template`` (null where
        unknown), ``variant_from`` (``file``, ``cache``, ``folder`` or null:
        unknown), ``other_files`` (accepted results files holding the variant)
        and ``lost`` (none does: the variant is not on the board; null if the
        variant is unknown).
    """
    is_rejected = _is(entries["status"], "rejected")
    if not is_rejected.any():
        return ()
    rejected = entries.filter(booleans(is_rejected))
    accepted = entries.filter(booleans(_is(entries["status"], "ok")))
    by_folder = _is(rejected["variant_from"], "folder")
    others = np.where(
        by_folder,
        _holding(rejected, accepted, _VARIANT[:1]),
        _holding(rejected, accepted, _VARIANT[:4]),
    )
    records = []
    rows = rejected.select(list(_VARIANT)).to_pylist()
    for path, row, other in zip(  # the rejected files only: usually none
        display[is_rejected].tolist(), rows, others.tolist(), strict=True
    ):
        source = row.pop("variant_from") or None
        if source != "file" and source != "cache":  # only the model is known
            row |= {"precision": None, "revision": None, "chat_template": None}
        if source is None:
            row["model"] = None
        records.append(
            {"path": path, **row, "variant_from": source, "other_files": other}
            | {"lost": None if source is None else other == 0}
        )
    return tuple(records)


def _holding(
    rejected: pa.Table, accepted: pa.Table, columns: Sequence[str]
) -> IntArray:
    """Per rejected entry, the accepted entries with the same values in `columns`."""
    if not accepted.num_rows:
        return np.zeros(rejected.num_rows, dtype=np.int64)

    def keys(table: pa.Table) -> pa.ChunkedArray:
        parts = [table[name].cast(pa.string()) for name in columns]
        return (
            pc.binary_join_element_wise(*parts, "\x1f") if len(parts) > 1 else parts[0]
        )

    counted = pc.value_counts(keys(accepted))
    at = _positions(keys(rejected), counted.field("values"))
    counts = to_numpy(counted.field("counts")).astype(np.int64)
    return np.where(at >= 0, counts[np.maximum(at, 0)], 0)


def _is(values: pa.ChunkedArray, text: str) -> npt.NDArray[np.bool_]:
    """Where a string column equals `text`."""
    return to_numpy(pc.equal(values, scalar(text, pa.string())), null=False)


def _entries_table(entries: list[dict[str, Any]]) -> pa.Table:
    """Cache entries (dicts of :data:`ENTRIES`'s fields) as a table."""
    columns = []
    for field in ENTRIES:
        values = [entry[field.name] for entry in entries]
        if pa.types.is_string(field.type):
            columns.append(strings(values))
        elif pa.types.is_boolean(field.type):
            columns.append(booleans(np.array(values, dtype=bool)))
        else:
            columns.append(numbers(np.array(values, dtype=np.int64), field.type))
    return pa.Table.from_arrays(columns, schema=ENTRIES)


def _positions(
    keys: pa.Array | pa.ChunkedArray, among: pa.Array | pa.ChunkedArray
) -> IntArray:
    """Each key's row in `among` (distinct strings), -1 where it is not there."""
    at = pc.index_in(keys, value_set=among)
    return to_numpy(at.cast(pa.int64()), null=-1).astype(np.int64)


def _is_unchanged(
    stat: npt.NDArray[np.int64],
    entries: pa.Table,
    old_at: IntArray,
    stat_ns: int,
) -> npt.NDArray[np.bool_]:
    """Files whose stat equals the cached one, and old enough to trust it.

    A file changed within :data:`_RACY_NS` of the cache's own stat could have
    changed again within the same clock tick: it is read again.
    """
    is_known = old_at >= 0
    if not entries.num_rows:
        return np.zeros(old_at.size, dtype=bool)
    cached = np.column_stack(
        [to_numpy(entries[name], null=-1).astype(np.int64) for name in _STAT]
    )
    old = cached[np.maximum(old_at, 0)]  # (a file not cached: not known)
    is_unchanged: npt.NDArray[np.bool_] = (
        is_known
        & (stat == old).all(axis=1)
        & (stat[:, 0] >= 0)  # a stat that failed is no match
        & (np.maximum(stat[:, 1], stat[:, 2]) < stat_ns - _RACY_NS)
    )
    return is_unchanged


@dataclass(frozen=True, slots=True, kw_only=True)
class _Changed:
    """What reading the changed files gave: entries, parsed files, statuses."""

    entries: list[dict[str, Any]]
    parsed: list[tuple[str, HarnessFile]]
    reused: list[str]  # touched, same bytes: the cached rows stay
    status: list[str]  # per changed file: parsed or cached (touched)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Found:
    """The results files found, as columns (one entry per distinct absolute path)."""

    path: npt.NDArray[np.object_]  # absolute: the cache's key
    display: npt.NDArray[np.object_]  # as found: what the catalog shows
    stat: npt.NDArray[np.int64]  # (files, 5): the fields of _STAT, -1 if it failed


def _read_changed(
    found: _Found,
    changed: IntArray,
    entries: pa.Table,
    old_at: IntArray,
    pairs: list[tuple[str, str]],
    progress: ProgressCallback | None,
) -> _Changed:
    """Read and hash the changed files (on every core when many); parse the new ones.

    A file whose hash is the cached one (touched, not changed) is not parsed
    again. An unreadable file stops the run.
    """
    result = _Changed(entries=[], parsed=[], reused=[], status=[])
    cached_sha = entries["sha256"].to_pylist()
    known = [cached_sha[at] if at >= 0 else None for at in old_at[changed].tolist()]
    scanned = scan_results_files(
        [Path(display) for display in found.display[changed]],
        pairs,
        read=functools.partial(read_bytes, max_bytes=MAX_RESULTS_BYTES),
        known=known,
        stop_at_error=False,
        progress=progress,
        stage="parsing changed results files",
    )
    keys = found.path[changed].tolist()
    stats = found.stat[changed].tolist()
    with contextlib.closing(scanned):  # its workers stop however the loop ends
        for at, key, fields, item in zip(
            old_at[changed].tolist(), keys, stats, scanned, strict=True
        ):
            # one iteration per changed file: its entry, from the bytes just read
            if item.error is not None and not item.sha256:  # unreadable: stop
                raise item.error
            is_touched = item.parsed is None and item.error is None  # not changed
            entry = (
                entries.slice(at, 1).to_pylist()[0]
                if is_touched
                else _BLANK_ENTRY | {"status": "ok"}
            ) | {
                "path": key,
                # taken before the read: a change during the run is seen next time
                **dict(zip(_STAT, fields, strict=True)),
                "size": item.size,  # of the bytes hashed (and parsed)
                "sha256": item.sha256,
            }
            result.status.append("cached" if is_touched else "parsed")
            if is_touched:
                result.reused.append(key)
            elif item.parsed is not None:
                result.parsed.append((key, item.parsed))
                entry |= _parsed_entry(item.parsed)
            else:  # a file that does not parse is rejected
                entry = _rejected(entry, first_line(str(item.error)))
                entry |= (  # its variant, as its config names it if it does
                    dict(zip(_VARIANT, (*item.variant, "file"), strict=True))
                    if item.variant is not None
                    else _earlier_variant(entries, at, Path(item.path))
                )
            result.entries.append(entry)
    return result


def _stat(files: list[Path]) -> _Found:
    """Each file keyed by absolute path, with the stat fields of :data:`_STAT`.

    A file found twice (two paths given to one file) is kept once, where it
    was first found.
    """
    first: dict[str, Path] = {}
    for file in files:  # one stat per file: the cache's only per-file step
        first.setdefault(str(file.absolute()), file)
    return _Found(
        path=np.array(list(first), dtype=object),
        display=np.array([str(file) for file in first.values()], dtype=object),
        stat=np.array(
            [_stat_fields(file) for file in first.values()], dtype=np.int64
        ).reshape(-1, len(_STAT)),
    )


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


def _parsed_entry(parsed: HarnessFile) -> dict[str, Any]:
    """A parsed file's fields of its cache entry: its variant, run time and counts."""
    return {
        "variant_from": "file",
        "model": parsed.model,
        "precision": parsed.precision,
        "revision": parsed.revision,
        "chat_template": parsed.chat_template,
        "timestamp": parsed.timestamp,
        "n_ignored": parsed.n_ignored,
        "n_rows": len(parsed.rows["raw_score"]),
        "ignored": "\n".join(parsed.ignored),
    }


def _rejected(entry: dict[str, Any], reason: str) -> dict[str, Any]:
    return entry | {"status": "rejected", "reason": reason, "n_rows": 0}


def _earlier_variant(entries: pa.Table, at: int, path: Path) -> dict[str, Any]:
    """A rejected file's variant when the file does not name it.

    As the cache's previous entry of the same path named it, else its
    ``<org>/<model>`` folders.
    """
    if at >= 0:  # (the rejected files only: one row each)
        (row,) = entries.slice(at, 1).select(list(_VARIANT)).to_pylist()
        previous: dict[str, Any] = row
        if previous["model"]:  # (a variant named by its folder stays so)
            return previous | {
                "variant_from": "folder"
                if previous["variant_from"] == "folder"
                else "cache"
            }
    model = variant_folder(path)
    return {"model": model, "variant_from": "folder" if model else ""}


#: The fields of an entry that name its variant, and where they come from.
_VARIANT = ("model", "precision", "revision", "chat_template", "variant_from")
#: An entry before its file is read: every field of :data:`ENTRIES` empty.
_BLANK_ENTRY: dict[str, Any] = {
    field.name: {pa.string(): "", pa.bool_(): False}.get(field.type, 0)
    for field in ENTRIES
}


def _rows_of(
    parsed: list[tuple[str, HarnessFile]], pairs: list[tuple[str, str]]
) -> pa.Table:
    """The score rows of newly parsed files, as one table (NaN stored as null: missing)."""
    files = parsed_columns([harness for _, harness in parsed])
    owner = np.repeat(np.arange(len(parsed), dtype=np.int64), files.lengths)
    index, raw = files.subtask_index, files.raw_score
    stderr = to_numpy(files.stderr, null=np.nan)
    columns = [
        strings([key for key, _ in parsed]).take(numbers(owner, pa.int64())),
        numbers(index, pa.int32()),
        numbers(raw, pa.float64(), valid=~np.isnan(raw)),
        numbers(stderr, pa.float64(), valid=~np.isnan(stderr)),
        files.n_samples,
        strings(result_keys(tuple(pairs))).take(numbers(index, pa.int64())),
        *files.settings.columns(),
    ]
    return pa.Table.from_arrays(columns, schema=ROWS)


def _check_rows(rows: pa.Table, scales: Scales | None) -> dict[str, str]:
    """Files whose scores break the contract, with the first violation as reason.

    A score is checked on its benchmark's declared range (the suite's
    ``range``), else as a fraction in [0, 1].
    """
    raw = to_numpy(rows["raw_score"], null=np.nan)
    stderr = to_numpy(rows["stderr"], null=np.nan)
    samples = to_numpy(rows["n_samples"].cast(pa.float64()), null=np.nan)
    is_fraction = ~((raw >= 0.0) & (raw <= 1.0))
    is_outside = np.zeros(raw.shape, dtype=bool)
    if scales is not None:  # a declared range replaces [0, 1] for its rows
        subtask = to_numpy(rows["subtask_index"]).astype(np.int64)
        is_ranged, is_outside = scales.outside(raw, subtask)
        is_fraction &= ~is_ranged
        is_outside |= is_ranged & ~np.isfinite(raw)
    checks = {
        "is {value!r}, outside [0, 1] (a percentage?)": (is_fraction, raw),
        "is {value!r}, outside its benchmark's range": (is_outside, raw),
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
    for problem, (mask, values) in checks.items():  # a check at a time, over all rows
        for at in np.flatnonzero(mask).tolist():  # the failing rows only, usually none
            path = str(rows["path"][at].as_py())
            text = problem.format(value=float(values[at]))
            reasons.setdefault(path, f"{rows['key'][at].as_py()} {text}")
    return reasons


def _assemble(
    entries: pa.Table,
    rows: pa.Table,
    names: SubtaskColumns,
    pairs: list[tuple[str, str]],
    *,
    display: npt.NDArray[np.object_],
    status: npt.NDArray[np.object_],
    verified: npt.NDArray[np.bool_],
) -> tuple[ResultsRead, pa.Table]:
    """The scores taken from the accepted files, and the file catalog.

    Taken by :func:`lbnorm.readers.newest.combine_parsed`, as from freshly
    parsed files (the newest result per variant and subtask), so a cached run
    reads a tree exactly as an uncached one. The cached rows are put in file
    order, then suite order, in one sort (no step per file).

    Args:
        entries: One per file found, in that order.
        rows: The cached and new score rows (of any files).
        names: The suite's subtask columns.
        pairs: The suite's (task, metric) pairs.
        display: Per file, its path as found (the catalog shows it).
        status: Per file: ``parsed``, ``cached`` or ``rejected``.
        verified: Per file: whether its sha256 is of bytes read this run.
    """
    is_ok = _is(entries["status"], "ok")
    accepted = entries.filter(booleans(is_ok))
    parsed = _stored_files(accepted, rows, display[is_ok].tolist())
    read = combine_parsed(parsed, pairs, names)
    assert read.settings is not None
    accepted_at = np.flatnonzero(is_ok)  # an accepted file's row among all files
    settings = replace(read.settings, file=accepted_at[read.settings.file])
    # what each accepted file gave, in the order of all files (null if rejected)
    place = np.full(entries.num_rows, -1, dtype=np.int64)
    place[is_ok] = np.arange(accepted.num_rows)
    gave = read.files.take(numbers(place, pa.int64(), valid=place >= 0))
    catalog = pa.table(
        {
            "path": strings(display.tolist()),
            "sha256": entries["sha256"],
            "bytes": entries["size"],
            "rows": pc.fill_null(gave["rows"], scalar(0, pa.int64())),
            "superseded_by": gave["superseded_by"],
            "n_ignored": entries["n_ignored"],
            "tasks": gave["tasks"],
            "ignored": _lines(entries["ignored"]),
            "reason": entries["reason"],
            "sha256_verified": booleans(verified),
            "cache": strings(status.tolist()),
            # for the comparability check (the catalog itself leaves them out)
            **{
                name: gave[name]
                for name in ("model", "precision", "revision", "chat_template")
            },
        }
    )
    return replace(read, settings=settings), catalog


def _stored_files(accepted: pa.Table, rows: pa.Table, paths: list[str]) -> ParsedFiles:
    """The accepted files' entries and rows as :func:`combine_parsed` takes parsed files.

    The rows are put in file order, then suite order, in one sort; `paths`
    are the files as found (the catalog shows them).
    """
    owner = _positions(rows["path"], accepted["path"])
    is_taken = owner >= 0  # -1: a row of a file not accepted
    owner = owner[is_taken]
    subtask = to_numpy(rows["subtask_index"]).astype(np.int64)[is_taken]
    order = np.lexsort((subtask, owner))  # by file, then by subtask
    taken = numbers(np.flatnonzero(is_taken)[order], pa.int64())
    return ParsedFiles(
        path=paths,
        model=accepted["model"].to_pylist(),
        precision=accepted["precision"].to_pylist(),
        revision=accepted["revision"].to_pylist(),
        chat_template=to_numpy(accepted["chat_template"]).astype(bool),
        timestamp=accepted["timestamp"].to_pylist(),
        n_ignored=to_numpy(accepted["n_ignored"]).astype(np.int64),
        lengths=np.bincount(owner, minlength=accepted.num_rows).astype(np.int64),
        subtask_index=subtask[order],
        raw_score=to_numpy(rows["raw_score"].take(taken), null=np.nan),
        stderr=rows["stderr"].take(taken).combine_chunks(),
        n_samples=rows["n_samples"].take(taken).combine_chunks(),
        settings=RunSettings.from_columns(
            [rows[SETTING + name].take(taken) for name in SETTINGS]
        ),
        ignored=_lines(accepted["ignored"]),
    )


def _lines(texts: pa.ChunkedArray) -> pa.ChunkedArray:
    """Entries stored one per line, as a list<string> column ('' is no entry)."""
    split = pc.split_pattern(texts, "\n")
    # the empty list, built from arrays (pa.scalar of a list probes pandas)
    offsets = numbers(np.zeros(2), pa.int32())
    none = pa.ListArray.from_arrays(offsets, strings([]))[0]
    return pc.if_else(pc.equal(texts, scalar("", pa.string())), none, split)


@functools.cache
def parser_key() -> str:
    """What a cached parse depends on besides the suite: the parser's version and source.

    :data:`~lbnorm.readers.harness.PARSER_VERSION`, and the sha256 of the
    results parser's source (:mod:`~lbnorm.readers.harness`,
    :mod:`~lbnorm.readers.results_tree`) and the cache's (this module and
    :mod:`~lbnorm.readers.cache_store`) (the package's version string
    stays the same across commits: a cache of an older parser was reused
    whole). Where a source cannot be read (a zipped install), the version alone.
    """
    digest = hashlib.sha256()
    for module in (harness, results_tree, sys.modules[__name__], cache_store):
        with contextlib.suppress(OSError, TypeError):
            digest.update(Path(str(module.__file__)).read_bytes())
    return f"{PARSER_VERSION}-{digest.hexdigest()[:16]}"
