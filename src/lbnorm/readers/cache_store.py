"""The parse cache on disk: its index, its generations of Parquet files, its lock.

Each entry is stored with a 64-bit digest of its scores and its file's sha256
(:func:`entry_digests`), checked on load with the files' own checksums.

:mod:`lbnorm.readers.cache` decides what to reuse and assembles a run's
scores from it; this module only keeps what it is given. The layout and the
checks on load are described there.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm.core.arrow import numbers, scalar, to_numpy
from lbnorm.core.errors import OptionsError, OutputError
from lbnorm.core.version import lbnorm_version
from lbnorm.output.transaction import write_file
from lbnorm.readers.comparability import SETTINGS

__all__ = [
    "CACHE_FORMAT",
    "ENTRIES",
    "INDEX",
    "ROWS",
    "SETTING",
    "check_cache_location",
    "empty_table",
    "entry_digests",
    "first_line",
    "load",
    "opened",
    "rows_match",
    "store",
]

#: Bumped whenever what the cache stores changes meaning (2: the stat key holds
#: ctime, inode and device too; sizes and hashes are of the bytes read).
#: 3: each entry stores a digest of its scores and its file's sha256.
#: 4: each entry stores the results entries the suite does not use (``ignored``).
#: 5: a rejected entry keeps the variant it held as far as known (``variant_from``).
#: 6: each score row stores its run settings (the comparability check's).
CACHE_FORMAT = 6
#: The index's name in the cache directory.
INDEX = "lbnorm-cache.json"
#: The index's plain fields and their types (``entries`` and ``rows`` name files).
_INDEX_FIELDS = {"format": int, "lbnorm": str, "pairs": str, "stat_ns": int}
_GENERATION = re.compile(r"(entries|rows)-[0-9a-f]{12}\.parquet")
_SHA256 = re.compile(r"[0-9a-f]{64}")

#: The rows' columns of run settings: ``setting_num_fewshot``, ...
SETTING = "setting_"
ENTRIES = pa.schema(
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
        # the entries the suite does not use, one per line (messages and the manifest)
        ("ignored", pa.string()),
        # where model, precision and revision come from: "file" (its own config),
        # "cache" (a rejected file: an earlier parse of it), "folder" (a rejected
        # file: its <org>/<model> folders, the model alone) or "" (unknown)
        ("variant_from", pa.string()),
    ]
)
#: The entries as stored: with each one's digest (:func:`entry_digests`).
_ENTRIES_STORED = ENTRIES.append(pa.field("rows_digest", pa.int64()))
ROWS = pa.schema(
    [
        ("path", pa.string()),
        ("subtask_index", pa.int32()),
        ("raw_score", pa.float64()),
        ("stderr", pa.float64()),
        ("n_samples", pa.int64()),
        ("key", pa.string()),
        *((SETTING + name, pa.string()) for name in SETTINGS),
    ]
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
def opened(cache: Path) -> Iterator[str]:
    """Hold the cache directory for the block: created, locked, its index's place cleared.

    Yields:
        Why the cache is discarded if something that is not a file stood where
        the index belongs (it was moved aside); else ''.

    Raises:
        OutputError: The directory cannot be created or locked, or another run
            holds it.
    """
    _make_directory(cache)
    with _lock(cache):
        yield _clear_index_place(cache)


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows (``Schema.empty_table`` would probe for pandas)."""
    return pa.Table.from_arrays(
        [pa.nulls(0, field.type) for field in schema], schema=schema
    )


def load(
    cache: Path, pairs_hash: str, *, parser: str, discard: str = ""
) -> tuple[pa.Table, pa.Table, int, str]:
    """The cached entries and rows, when its files were stat'ed, and why they were discarded.

    Whatever the directory holds, this returns: a damaged cache is a reason to
    rebuild, never an error. `parser` is the results parser's key
    (:func:`lbnorm.readers.cache.parser_key`): a cache of another is discarded.
    A `discard` reason given (``--full``, an index moved aside) discards it unread.
    """
    found = discard or _read_generation(cache, pairs_hash, parser=parser)
    if isinstance(found, str):  # why the cache is discarded ('' if none yet)
        return empty_table(ENTRIES), empty_table(ROWS), 0, found
    return *found, ""


def _read_generation(
    cache: Path, pairs_hash: str, *, parser: str
) -> tuple[pa.Table, pa.Table, int] | str:
    """The cached entries and rows and their stat time, or why they are not trusted."""
    meta_path = cache / INDEX
    if not meta_path.is_file():  # none yet (a non-file was moved aside first)
        return ""
    try:
        meta = _check_index(json.loads(meta_path.read_bytes()))
    except (OSError, ValueError, RecursionError) as exc:  # JSON, UTF-8, nesting
        return f"corrupt: {type(exc).__name__}: {first_line(str(exc))}"
    if meta["format"] != CACHE_FORMAT or meta["lbnorm"] != lbnorm_version():
        return "made by another lbnorm version"
    if meta.get("parser") != parser:
        return "made by another version of the results parser"
    if meta["pairs"] != pairs_hash:
        return "made for other subtasks (another suite)"
    tables = {}
    for name, schema in (("entries", _ENTRIES_STORED), ("rows", ROWS)):
        path = cache / meta[name]["file"]
        try:
            if not path.is_file():  # a directory in its place must not stay fatal
                msg = f"{path.name} is missing or not a file"
                raise FileNotFoundError(msg)
            data = path.read_bytes()
            if hashlib.sha256(data).hexdigest() != meta[name]["sha256"]:
                return f"corrupt: {path.name} does not match its checksum"
            table = pq.ParquetFile(pa.BufferReader(data)).read()
        except (OSError, pa.ArrowException) as exc:
            return f"corrupt: {type(exc).__name__}: {first_line(str(exc))}"
        if not table.schema.equals(schema):
            return f"corrupt: {path.name} has an unexpected schema"
        tables[name] = table
    entries, rows = tables["entries"], tables["rows"]
    if not rows_match(entries, rows):
        return "corrupt: scores do not match the file entries"
    stored = to_numpy(entries["rows_digest"], null=0)
    entries = entries.drop_columns(["rows_digest"])
    if n_changed := int(np.count_nonzero(entry_digests(entries, rows) != stored)):
        return f"corrupt: the scores of {n_changed:,} files do not match their digests"
    return entries, rows, meta["stat_ns"]


def _check_index(meta: object) -> dict[str, Any]:
    """The index, if it has every field with a value of its type; else ValueError."""
    if not isinstance(meta, dict):
        msg = f"the index is not a JSON object: {json.dumps(meta)[:80]}"
        raise ValueError(msg)  # a list, a string, null
    is_valid = (
        all(isinstance(meta.get(name), kind) for name, kind in _INDEX_FIELDS.items())
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
    """Move aside what is not a file where the index belongs; return why the cache is discarded.

    A directory, a pipe or a dangling link named ``lbnorm-cache.json`` would make
    every run fail to write the index (or, a pipe, block reading it). It is
    renamed, never deleted: lbnorm did not write it.
    """
    path = cache / INDEX
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
    return f"corrupt: {INDEX} was not a file (moved aside to {aside.name})"


def store(
    cache: Path,
    entries: pa.Table,
    rows: pa.Table,
    pairs_hash: str,
    *,
    stat_ns: int,
    parser: str,
) -> None:
    """Write a new generation, then point the index at it, then delete older ones."""
    token = uuid.uuid4().hex[:12]
    meta: dict[str, Any] = {
        "format": CACHE_FORMAT,
        "lbnorm": lbnorm_version(),
        "parser": parser,
        "pairs": pairs_hash,
        "stat_ns": stat_ns,  # when the files were stat'ed (before they were read)
    }
    try:
        digests = numbers(entry_digests(entries, rows), pa.int64())
        stored = entries.append_column("rows_digest", digests)
        for name, table in (("entries", stored), ("rows", rows)):
            path = cache / f"{name}-{token}.parquet"
            digest = write_file(path, table.combine_chunks())  # hashed as written
            meta[name] = {"file": path.name, "sha256": digest}
        text = json.dumps(meta, indent=2, sort_keys=True) + "\n"
        write_file(cache / INDEX, text.encode())
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


@contextlib.contextmanager
def _lock(cache: Path) -> Iterator[None]:
    """Hold the cache's lock (a file in it) for the block, or fail at once if another run does.

    Only a regular file is a lock: a FIFO put there is not waited on.
    """
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
        yield
    finally:
        os.close(descriptor)


def first_line(text: str) -> str:
    """A message's first line (a reason kept in the cache is one line)."""
    return text.split("\n", 1)[0]


# --- the digests: what proves the stored scores are the ones the entries describe


def entry_digests(entries: pa.Table, rows: pa.Table) -> npt.NDArray[np.int64]:
    """Per entry, a 64-bit digest of its scores (in any order) and its file's sha256.

    Stored with the entries: a rows file edited, even with its checksum in the
    index updated to match, no longer matches its entries' digests, and the
    cache is then rebuilt. This is integrity against edits and damage, not a
    defence against someone who also rewrites the entries. The rows are those
    of the entries (:func:`rows_match`).
    """
    row = np.full(rows.num_rows, 0x9E3779B97F4A7C15, dtype=np.uint64)
    settings = [name for name in rows.column_names if name.startswith("setting_")]
    columns: tuple[tuple[str, str | float | int], ...] = (
        ("subtask_index", -1),
        ("raw_score", -1.0),
        ("stderr", -1.0),
        ("n_samples", -1),
        ("key", "\0"),
        *((name, "\0") for name in settings),  # the run settings, as text
    )
    for column, absent in columns:
        values = pc.fill_null(
            rows[column], scalar(absent, rows.schema.field(column).type)
        )
        if pa.types.is_string(values.type):
            row = _mixed(row ^ _string_hashes(values))
        else:  # (a float's bits, an integer widened)
            found = to_numpy(values)
            kind = np.float64 if found.dtype.kind == "f" else np.int64
            bits: npt.NDArray[np.uint64] = found.astype(kind).view(np.uint64)
            row = _mixed(np.bitwise_xor(row, bits))
    owner = to_numpy(
        pc.index_in(rows["path"], value_set=entries["path"]).cast(pa.int64())
    )
    digest = np.zeros(entries.num_rows, dtype=np.uint64)
    np.add.at(digest, owner, row)  # (wraps: an order-free sum modulo 2**64)
    sha = _string_hashes(pc.fill_null(entries["sha256"], scalar("", pa.string())))
    return _mixed(digest ^ sha).view(np.int64)


def _string_hashes(values: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.uint64]:
    """Per value, 64 bits of its blake2b (each distinct value hashed once)."""
    if isinstance(values, pa.ChunkedArray):  # (no chunks: combine_chunks probes pandas)
        values = (
            values.combine_chunks() if values.num_chunks else pa.nulls(0, values.type)
        )
    encoded = pc.dictionary_encode(values)
    hashes = np.array(
        [
            int.from_bytes(
                hashlib.blake2b(text.encode(), digest_size=8).digest(), "little"
            )
            for text in encoded.dictionary.to_pylist()  # distinct values, not rows
        ],
        dtype=np.uint64,
    )
    return hashes[to_numpy(encoded.indices).astype(np.int64)]


def _mixed(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finalizer: every input bit moves every output bit."""
    values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


def rows_match(entries: pa.Table, rows: pa.Table) -> bool:
    """Whether the entries' paths are distinct and each has its ``n_rows`` rows."""
    paths = entries["path"]
    if paths.null_count or pc.count_distinct(paths).as_py() != entries.num_rows:
        return False
    owner = pc.index_in(rows["path"], value_set=paths)
    if owner.null_count:  # rows of no entry
        return False
    counts = np.bincount(
        to_numpy(owner.cast(pa.int64())).astype(np.int64), minlength=entries.num_rows
    )
    return bool(np.array_equal(counts, to_numpy(entries["n_rows"], null=-1)))
