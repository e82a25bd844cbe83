"""The parse cache for nightly runs: results files are parsed once, then reused.

A nightly run over a tree of thousands of lm-evaluation-harness results files
should cost only what changed. The cache directory keeps every file's parsed
scores, keyed by the file's absolute path, its stat (size, mtime, ctime, inode,
device) and the sha256 of its content:

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
per model variant wins, as :mod:`lbnorm.readers.newest` decides, so the result
equals a run without the cache.

The cache directory holds ``lbnorm-cache.bin`` and a lock: a Parquet table of
one row per results file (:data:`FILES`, its scores a list), then the hex
sha256 of those Parquet bytes; the table's metadata holds the cache's key (its
format, the lbnorm version, the results parser's key, a hash of the suite's
subtasks) and when the files were stat'ed. It is written beside itself and
renamed into place, so a killed run leaves the previous cache whole. A cache
that is damaged, was made by another lbnorm version or results parser
(:func:`parser_key`) or for other subtasks is rebuilt from scratch, never
trusted (``full_rebuild=True`` forces that). The cache directory must not be
inside the output directory, which every run replaces whole
(:func:`check_cache_location`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import hashlib
import json
import os
import stat
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm.core.arrow import booleans, empty_table, numbers, scalar, strings, to_numpy
from lbnorm.core.errors import OptionsError, OutputError
from lbnorm.core.files import MAX_RESULTS_BYTES, read_bytes
from lbnorm.core.options import ProgressCallback, RunOptions
from lbnorm.core.version import lbnorm_version
from lbnorm.output.transaction import write_file
from lbnorm.readers import harness, results_tree
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
    ScannedFile,
    parsed_columns,
    scan_results_files,
)
from lbnorm.suites import Scales, Suite, suite_arrays

IntArray = npt.NDArray[np.int64]

__all__ = [
    "CACHE_FORMAT",
    "FILES",
    "NAME",
    "check_cache_location",
    "parser_key",
    "read_files_cached",
]

#: Bumped whenever what the cache stores changes meaning; a cache of another
#: format is rebuilt. 7: one checksummed file, a row per results file.
CACHE_FORMAT = 7
#: The cache's file in the cache directory.
NAME = "lbnorm-cache.bin"
_META = b"lbnorm.cache"
#: Why a cache whose key differs in a field is rebuilt.
_OTHER = {
    "format": "made by another lbnorm version",
    "lbnorm": "made by another lbnorm version",
    "parser": "made by another version of the results parser",
    "pairs": "made for other subtasks (another suite)",
}

#: A file changed this close to (or after) the previous run's stat could have
#: changed again within one timestamp tick: it is read again (git's "racy clean").
_RACY_NS = 2_000_000_000
#: The fields of a cached file that name its variant.
_VARIANT = ("model", "precision", "revision", "chat_template")
#: The scores of a file that failed to parse (:class:`HarnessFile`'s ``rows``): none.
_NO_ROWS = ("subtask_index", "raw_score", "stderr", "n_samples", "settings")
#: A score's run settings are fields ``setting_num_fewshot``, ...
_SETTING = "setting_"
FILES = pa.schema(
    [
        ("sha256", pa.string()),
        ("reason", pa.string()),  # why the file was rejected; '' if accepted
        ("model", pa.string()),
        ("precision", pa.string()),
        ("revision", pa.string()),
        ("chat_template", pa.bool_()),
        # where the variant comes from: "file" (its own config), "cache" (a
        # rejected file: an earlier parse of it), "folder" (a rejected file:
        # its <org>/<model> folders, the model alone) or "" (unknown)
        ("variant_from", pa.string()),
        ("timestamp", pa.string()),
        ("ignored", pa.list_(pa.string())),  # the entries the suite does not use
        (
            "scores",
            pa.list_(
                pa.struct(
                    [
                        ("subtask_index", pa.int32()),
                        ("raw_score", pa.float64()),
                        ("stderr", pa.float64()),
                        ("n_samples", pa.int64()),
                        *((_SETTING + name, pa.string()) for name in SETTINGS),
                    ]
                )
            ),
        ),
        ("path", pa.string()),  # absolute: the key
        ("stat", pa.list_(pa.int64(), 5)),  # size, mtime_ns, ctime_ns, inode, device
    ]
)
#: What is cached of a file apart from its path and stat.
_CONTENT = pa.schema(
    [column for column in FILES if column.name not in ("path", "stat")]
)


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
    columns = ("benchmark", "subtask", "task", "metric")  # (the scores' subtask_index)
    subtasks = list(zip(*(names[column] for column in columns), strict=True))
    key = {
        "format": CACHE_FORMAT,
        "lbnorm": lbnorm_version(),
        "parser": parser_key(),
        "pairs": hashlib.sha256(json.dumps(subtasks).encode()).hexdigest(),
    }
    with _opened(cache) as damaged:
        loaded = ("--full rebuild asked for" if full_rebuild else damaged) or _read(
            cache / NAME, key
        )
        cached, stat_ns, reason = (
            (empty_table(FILES), 0, loaded)
            if isinstance(loaded, str)
            else (*loaded, "")
        )
        started_ns = time.time_ns()  # before any stat: the next run's racy line
        found = _stat(files)
        old_at = _positions(strings(found.path.tolist()), cached["path"])  # -1: new
        is_unchanged = _is_unchanged(found.stat, cached, old_at, stat_ns)
        changed = np.flatnonzero(~is_unchanged)
        read = _read_changed(found, changed, cached, old_at, pairs, progress)
        # a file read again whose bytes are the cached ones (touched) is not new
        is_new = np.array(
            [item.parsed is not None or item.error is not None for item in read],
            dtype=bool,
        )
        new = [(int(old_at[changed[at]]), read[at]) for at in np.flatnonzero(is_new)]
        # the files in the order found: each cached (unchanged, touched) or new
        at = old_at.copy()
        at[changed[is_new]] = cached.num_rows + np.arange(len(new))
        stat = found.stat.copy()
        stat[changed, 0] = [item.size for item in read]  # of the bytes hashed
        table = pa.concat_tables(
            [cached.select(_CONTENT.names), _new_rows(new, cached, pairs, suite)]
        ).take(numbers(at, pa.int64()))
        table = table.append_column("path", strings(found.path.tolist()))
        stat_column = numbers(stat.ravel(), pa.int64())
        table = table.append_column(
            "stat", pa.FixedSizeListArray.from_arrays(stat_column, stat.shape[1])
        )
        dropped = cached.num_rows - int(np.count_nonzero(old_at >= 0))
        if changed.size or dropped or reason or stat_ns == 0:
            _store(cache, table, key, stat_ns=started_ns)
    status = np.full(len(found.path), "cached", dtype=object)
    status[changed[is_new]] = "parsed"
    is_rejected = _is_rejected(table)
    status[is_rejected] = "rejected"
    read_results, catalog = _assemble(
        table,
        names,
        pairs,
        display=found.display,
        status=status,
        verified=~is_unchanged,  # read and hashed this run
    )
    stats_of_run = _stats(
        cache, status, hashed=int(changed.size), dropped=dropped, reason=reason
    )
    lost = _rejected_variants(table, found.display, is_rejected)
    return replace(read_results, files=catalog, rejected=lost), stats_of_run


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
    }


def _rejected_variants(
    table: pa.Table,
    display: npt.NDArray[np.object_],
    is_rejected: npt.NDArray[np.bool_],
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
    if not is_rejected.any():
        return ()
    # a step per file, only when a file was rejected
    variants = list(zip(*(table[name].to_pylist() for name in _VARIANT), strict=True))
    accepted = [
        v for v, bad in zip(variants, is_rejected.tolist(), strict=True) if not bad
    ]
    holding, holding_model = Counter(accepted), Counter(v[0] for v in accepted)
    records = []
    sources = table["variant_from"].to_pylist()
    for at in np.flatnonzero(is_rejected).tolist():
        source = sources[at] or None
        model, precision, revision, chat_template = variants[at]
        other = holding_model[model] if source == "folder" else holding[variants[at]]
        known = source in ("file", "cache")  # else the model alone, or nothing
        records.append(
            {
                "path": display[at],
                "model": model if source else None,
                "precision": precision if known else None,
                "revision": revision if known else None,
                "chat_template": chat_template if known else None,
                "variant_from": source,
                "other_files": other,
                "lost": None if source is None else other == 0,
            }
        )
    return tuple(records)


def _is_rejected(table: pa.Table) -> npt.NDArray[np.bool_]:
    return to_numpy(pc.not_equal(table["reason"], scalar("", pa.string())))


def _positions(
    keys: pa.Array | pa.ChunkedArray, among: pa.Array | pa.ChunkedArray
) -> IntArray:
    """Each key's row in `among` (distinct strings), -1 where it is not there."""
    at = pc.index_in(keys, value_set=among)
    return to_numpy(at.cast(pa.int64()), null=-1).astype(np.int64)


def _is_unchanged(
    stat: npt.NDArray[np.int64],
    cached: pa.Table,
    old_at: IntArray,
    stat_ns: int,
) -> npt.NDArray[np.bool_]:
    """Files whose stat equals the cached one, and old enough to trust it.

    A file changed within :data:`_RACY_NS` of the cache's own stat could have
    changed again within the same clock tick: it is read again.
    """
    if not cached.num_rows:
        return np.zeros(old_at.size, dtype=bool)
    old = to_numpy(pc.list_flatten(cached["stat"])).reshape(-1, stat.shape[1])
    is_unchanged: npt.NDArray[np.bool_] = (
        (old_at >= 0)
        & (stat == old[np.maximum(old_at, 0)]).all(axis=1)
        & (stat[:, 0] >= 0)  # a stat that failed is no match
        & (np.maximum(stat[:, 1], stat[:, 2]) < stat_ns - _RACY_NS)
    )
    return is_unchanged


@dataclass(frozen=True, slots=True, kw_only=True)
class _Found:
    """The results files found, as columns (one entry per distinct absolute path)."""

    path: npt.NDArray[np.object_]  # absolute: the cache's key
    display: npt.NDArray[np.object_]  # as found: what the catalog shows
    # (files, 5): size, mtime, ctime, inode and device; -1 where stat failed
    stat: npt.NDArray[np.int64]


def _read_changed(
    found: _Found,
    changed: IntArray,
    cached: pa.Table,
    old_at: IntArray,
    pairs: list[tuple[str, str]],
    progress: ProgressCallback | None,
) -> list[ScannedFile]:
    """Read and hash the changed files (on every core when many); parse the new ones.

    A file whose hash is the cached one (touched, not changed) is not parsed
    again. An unreadable file stops the run.
    """
    cached_sha = cached["sha256"].to_pylist()
    scanned = scan_results_files(
        [Path(display) for display in found.display[changed]],
        pairs,
        read=functools.partial(read_bytes, max_bytes=MAX_RESULTS_BYTES),
        known=[cached_sha[at] if at >= 0 else None for at in old_at[changed].tolist()],
        stop_at_error=False,
        progress=progress,
        stage="parsing changed results files",
    )
    read = []
    with contextlib.closing(scanned):  # its workers stop however the loop ends
        for item in scanned:  # a step per changed file
            if item.error is not None and not item.sha256:  # unreadable: stop
                raise item.error
            read.append(item)
    return read


def _new_rows(
    new: list[tuple[int, ScannedFile]],
    cached: pa.Table,
    pairs: list[tuple[str, str]],
    suite: Suite,
) -> pa.Table:
    """The cache rows of new content, parsed or rejected (`new`: each file's scan and cached row, -1 if none)."""
    files = [
        (item.parsed, "file") if item.parsed is not None else _failed(item, cached, at)
        for at, item in new
    ]
    parsed = parsed_columns([file for file, _ in files])
    errors = [
        "" if item.error is None else _first_line(str(item.error)) for _, item in new
    ]
    return _content(
        parsed,
        sha256=[item.sha256 for _, item in new],
        reason=_checked(parsed, errors, pairs, suite),
        variant_from=[source for _, source in files],
    )


def _failed(item: ScannedFile, cached: pa.Table, at: int) -> tuple[HarnessFile, str]:
    """A file that failed to parse: the variant it held as far as known, and where from.

    As its own config names it, else as the cache's earlier row of the path
    (`at`) named it, else its ``<org>/<model>`` folders (the model alone).
    """
    variant, source = item.variant, "file"
    if variant is None and at >= 0 and cached["model"][at].as_py():
        earlier = cached.slice(at, 1).to_pylist()[0]
        variant = tuple(earlier[name] for name in _VARIANT)
        source = "folder" if earlier["variant_from"] == "folder" else "cache"
    elif variant is None:
        variant = (variant_folder(item.path), "", "", False)
        source = "folder" if variant[0] else ""
    model, precision, revision, chat_template = variant
    return HarnessFile(
        path=str(item.path),
        model=model,
        precision=precision,
        revision=revision,
        chat_template=chat_template,
        timestamp="",
        rows={name: [] for name in _NO_ROWS},
        n_ignored=0,
    ), source


def _stat(files: list[Path]) -> _Found:
    """Each file keyed by absolute path, with its stat.

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
        ).reshape(-1, 5),
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


def _content(
    files: ParsedFiles, *, sha256: list[str], reason: list[str], variant_from: list[str]
) -> pa.Table:
    """New files' cache rows (:data:`_CONTENT`): their variant, entries and scores."""
    offsets = np.zeros(len(files.path) + 1, dtype=np.int32)
    np.cumsum(files.lengths, out=offsets[1:])
    score_type = _CONTENT.field("scores").type.value_type
    scores = pa.StructArray.from_arrays(
        [
            numbers(files.subtask_index, pa.int32()),
            numbers(files.raw_score, pa.float64()),
            files.stderr,
            files.n_samples,
            *files.settings.columns(),
        ],
        fields=list(score_type),
    )
    columns = {
        "sha256": strings(sha256),
        "reason": strings(reason),
        "model": strings(files.model),
        "precision": strings(files.precision),
        "revision": strings(files.revision),
        "chat_template": booleans(files.chat_template),
        "variant_from": strings(variant_from),
        "timestamp": strings(files.timestamp),
        "ignored": files.ignored,
        "scores": pa.ListArray.from_arrays(numbers(offsets, pa.int32()), scores),
    }
    return pa.Table.from_arrays(list(columns.values()), schema=_CONTENT)


def _checked(
    files: ParsedFiles, reasons: list[str], pairs: list[tuple[str, str]], suite: Suite
) -> list[str]:
    """Per new file, why it is rejected: it failed to parse, or a score breaks the contract.

    A score is checked on its benchmark's declared range (the suite's
    ``range``), else as a fraction in [0, 1]; the first violation is the reason.
    """
    bad = _bad_scores(files, suite_arrays(suite).scales)
    keys = result_keys(tuple(pairs))
    owner = np.repeat(np.arange(len(files.path)), files.lengths)
    found = list(reasons)
    for at, problem in bad:  # the failing rows only, usually none
        if not found[owner[at]]:
            found[owner[at]] = f"{keys[files.subtask_index[at]]} {problem}"
    return found


def _bad_scores(files: ParsedFiles, scales: Scales | None) -> list[tuple[int, str]]:
    """The rows whose scores break the contract, a check at a time, and why."""
    raw = files.raw_score
    stderr = to_numpy(files.stderr, null=np.nan)
    samples = to_numpy(files.n_samples.cast(pa.float64()), null=np.nan)
    is_fraction = ~((raw >= 0.0) & (raw <= 1.0))
    is_outside = np.zeros(raw.shape, dtype=bool)
    if scales is not None:  # a declared range replaces [0, 1] for its rows
        is_ranged, is_outside = scales.outside(raw, files.subtask_index)
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
    return [
        (at, problem.format(value=float(values[at])))
        for problem, (mask, values) in checks.items()
        for at in np.flatnonzero(mask).tolist()
    ]


def _assemble(
    table: pa.Table,
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
    reads a tree exactly as an uncached one.

    Args:
        table: The cache's rows, one per file found, in that order.
        names: The suite's subtask columns.
        pairs: The suite's (task, metric) pairs.
        display: Per file, its path as found (the catalog shows it).
        status: Per file: ``parsed``, ``cached`` or ``rejected``.
        verified: Per file: whether its sha256 is of bytes read this run.
    """
    is_ok = ~_is_rejected(table)
    accepted_at = np.flatnonzero(is_ok)  # an accepted file's row among all files
    accepted = table.take(numbers(accepted_at, pa.int64()))  # (one chunk)
    read = combine_parsed(_parsed(accepted, display[is_ok].tolist()), pairs, names)
    assert read.settings is not None
    settings = replace(read.settings, file=accepted_at[read.settings.file])
    # what each accepted file gave, in the order of all files (null if rejected)
    place = np.full(table.num_rows, -1, dtype=np.int64)
    place[is_ok] = np.arange(accepted.num_rows)
    gave = read.files.take(numbers(place, pa.int64(), valid=place >= 0))
    catalog = pa.table(
        {
            "path": strings(display.tolist()),
            "sha256": table["sha256"],
            "bytes": pc.list_element(table["stat"], scalar(0, pa.int64())),
            "rows": pc.fill_null(gave["rows"], scalar(0, pa.int64())),
            "superseded_by": gave["superseded_by"],
            "n_ignored": pc.list_value_length(table["ignored"]).cast(pa.int64()),
            "tasks": gave["tasks"],
            "ignored": table["ignored"],
            "reason": table["reason"],
            "sha256_verified": booleans(verified),
            "cache": strings(status.tolist()),
            # for the comparability check (the catalog itself leaves them out)
            **{name: gave[name] for name in _VARIANT},
        }
    )
    return replace(read, settings=settings), catalog


def _parsed(accepted: pa.Table, paths: list[str]) -> ParsedFiles:
    """The accepted files' cache rows as :func:`combine_parsed` takes parsed files.

    `paths` are the files as found (the catalog shows them).
    """
    scores = pc.list_flatten(accepted["scores"].chunk(0))
    column = scores.field
    return ParsedFiles(
        path=paths,
        model=accepted["model"].to_pylist(),
        precision=accepted["precision"].to_pylist(),
        revision=accepted["revision"].to_pylist(),
        chat_template=to_numpy(accepted["chat_template"]).astype(bool),
        timestamp=accepted["timestamp"].to_pylist(),
        n_ignored=to_numpy(pc.list_value_length(accepted["ignored"])).astype(np.int64),
        lengths=to_numpy(pc.list_value_length(accepted["scores"])).astype(np.int64),
        subtask_index=to_numpy(column("subtask_index")).astype(np.int64),
        raw_score=to_numpy(column("raw_score")),
        stderr=column("stderr"),
        n_samples=column("n_samples"),
        settings=RunSettings.from_columns(
            [column(_SETTING + name) for name in SETTINGS]
        ),
        ignored=accepted["ignored"],
    )


@functools.cache
def parser_key() -> str:
    """What a cached parse depends on besides the suite: the parser's version and source.

    :data:`~lbnorm.readers.harness.PARSER_VERSION`, and the sha256 of the
    results parser's source (:mod:`~lbnorm.readers.harness`,
    :mod:`~lbnorm.readers.results_tree`) and this module's (the package's
    version string stays the same across commits: a cache of an older parser
    was reused whole). Where a source cannot be read (a zipped install), the version alone.
    """
    digest = hashlib.sha256()
    for module in (harness, results_tree, sys.modules[__name__]):
        with contextlib.suppress(OSError, TypeError):
            digest.update(Path(str(module.__file__)).read_bytes())
    return f"{PARSER_VERSION}-{digest.hexdigest()[:16]}"


# --- the cache's file and its lock ----------------------------------------------


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
        lbnorm.core.errors.OptionsError: --cache out/cache is inside --out out, which every run replaces whole: the cache would be wiped each time.
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


@contextlib.contextmanager
def _opened(cache: Path) -> Iterator[str]:
    """Hold the cache directory for the block: created, locked, its file's place cleared.

    The lock is a file in it, held or refused at once if another run holds it;
    only a regular file is a lock (a FIFO put there is not waited on).

    Yields:
        Why the cache is discarded if something that is not a file stood where
        the cache's file belongs (it was moved aside); else ''.

    Raises:
        OutputError: The directory cannot be created or locked, or another run
            holds it.
    """
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _cache_error(cache, exc, "cannot create the cache directory") from exc
    if not cache.is_dir():
        raise _cache_error(cache, None, "is not a directory")
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        descriptor = os.open(cache / ".lock", flags, 0o644)
    except OSError as exc:
        raise _cache_error(cache, exc, "cannot lock the cache") from exc
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            error = OSError(errno.EINVAL, "the lock is not a regular file")
            raise _cache_error(cache, error, "cannot lock the cache")
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            msg = (
                f"--cache {cache}: another lbnorm run is using this cache.\n"
                "Hint: wait for it, or give this run its own --cache."
            )
            raise OutputError(msg) from exc
        yield _clear_place(cache / NAME)
    finally:
        os.close(descriptor)


def _read(path: Path, key: Mapping[str, object]) -> tuple[pa.Table, int] | str:
    """The cached files and their stat time, or why they are discarded ('' if none yet).

    Whatever the file holds, this returns: a damaged cache is a reason to
    rebuild, never an error. A cache made under another `key` (the format, the
    lbnorm version, the results parser's, the suite's subtasks') is discarded.
    """
    if not path.is_file():  # none yet (a non-file was moved aside first)
        return ""
    try:
        data = memoryview(path.read_bytes())
        if hashlib.sha256(data[:-64]).hexdigest().encode() != data[-64:]:
            return f"corrupt: {NAME} does not match its checksum"
        table = pq.ParquetFile(pa.BufferReader(data[:-64])).read()
        meta = json.loads((table.schema.metadata or {})[_META])
    except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
        return f"corrupt: {type(exc).__name__}: {_first_line(str(exc))}"
    if not table.schema.equals(FILES) or not isinstance(meta, dict):
        return f"corrupt: {NAME} has an unexpected schema"
    for name, value in key.items():
        if meta.get(name) != value:
            return _OTHER[name]
    stat_ns = meta.get("stat_ns")
    if type(stat_ns) is not int or not 0 <= stat_ns < 2**63:
        return f"corrupt: {NAME} has no stat time"
    return table, stat_ns


def _clear_place(path: Path) -> str:
    """Move aside what is not a file where the cache's file belongs; return why it is discarded.

    A directory, a pipe or a dangling link there would make every run fail to
    write the cache (or, a pipe, block reading it). It is renamed, never
    deleted: lbnorm did not write it.
    """
    if path.is_file() or not (path.exists() or path.is_symlink()):
        return ""
    aside = path.with_name(f"{path.name}.damaged-{uuid.uuid4().hex[:12]}")
    try:
        path.rename(aside)
    except OSError as exc:
        msg = (
            f"{path}: the cache's file is not a file and cannot be moved aside "
            f"({exc.strerror}).\nHint: remove it, or choose another --cache directory."
        )
        raise OutputError(msg) from exc
    return f"corrupt: {NAME} was not a file (moved aside to {aside.name})"


def _store(
    cache: Path, files: pa.Table, key: Mapping[str, object], *, stat_ns: int
) -> None:
    """Write the cache's file whole: `files` as Parquet, then their sha256."""
    sink = pa.BufferOutputStream()
    meta = json.dumps(dict(key) | {"stat_ns": stat_ns})
    pq.write_table(
        files.replace_schema_metadata({_META: meta}), sink, compression="zstd"
    )
    body = sink.getvalue().to_pybytes()
    try:
        write_file(cache / NAME, [body, hashlib.sha256(body).hexdigest().encode()])
    except OutputError as exc:  # the writer's message speaks of --out
        raise _cache_error(cache, exc.__cause__, "cannot write the cache") from exc


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


def _first_line(text: str) -> str:
    """A message's first line (a reason kept in the cache is one line)."""
    return text.split("\n", 1)[0]
