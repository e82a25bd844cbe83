"""The parse cache on disk: one checksummed file and a lock.

The cache directory holds ``lbnorm-cache.bin``: a Parquet table of one row per
results file (:data:`FILES`, its scores a list), then the hex sha256 of those
Parquet bytes. The table's metadata holds the cache format, the lbnorm
version, the results parser's key, a hash of the suite's subtasks and when the
files were stat'ed. It is written beside itself and renamed into place, so a
killed run leaves the previous cache whole. :mod:`lbnorm.readers.cache` decides
what to reuse; this module only keeps what it is given.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import stat
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lbnorm.core.arrow import empty_table
from lbnorm.core.errors import OptionsError, OutputError
from lbnorm.core.version import lbnorm_version
from lbnorm.output.transaction import write_file
from lbnorm.readers.comparability import SETTINGS

__all__ = [
    "CACHE_FORMAT",
    "FILES",
    "NAME",
    "SETTING",
    "check_cache_location",
    "first_line",
    "load",
    "opened",
    "store",
]

#: Bumped whenever what the cache stores changes meaning; a cache of another
#: format is rebuilt. 7: one checksummed file, a row per results file.
CACHE_FORMAT = 7
#: The cache's file in the cache directory.
NAME = "lbnorm-cache.bin"
_META = b"lbnorm.cache"
#: Why a cache whose metadata differs in a field is rebuilt.
_OTHER = {
    "format": "made by another lbnorm version",
    "lbnorm": "made by another lbnorm version",
    "parser": "made by another version of the results parser",
    "pairs": "made for other subtasks (another suite)",
}

#: A score's run settings are fields ``setting_num_fewshot``, ...
SETTING = "setting_"
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
                        *((SETTING + name, pa.string()) for name in SETTINGS),
                    ]
                )
            ),
        ),
        ("path", pa.string()),  # absolute: the key
        ("stat", pa.list_(pa.int64(), 5)),  # size, mtime_ns, ctime_ns, inode, device
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
    """Hold the cache directory for the block: created, locked, its file's place cleared.

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
    with _lock(cache):
        yield _clear_place(cache / NAME)


def load(
    cache: Path, key: Mapping[str, str], *, discard: str = ""
) -> tuple[pa.Table, int, str]:
    """The cached files, when they were stat'ed, and why the cache was discarded.

    Whatever the directory holds, this returns: a damaged cache is a reason to
    rebuild, never an error. A cache made under another `key` (the results
    parser's, the suite's subtasks') is discarded, and so is one when a
    `discard` reason is given (``--full``, a file moved aside).
    """
    found = discard or _read(cache / NAME, key)
    if isinstance(found, str):  # why the cache is discarded ('' if none yet)
        return empty_table(FILES), 0, found
    return *found, ""


def _read(path: Path, key: Mapping[str, str]) -> tuple[pa.Table, int] | str:
    """The cached files and their stat time, or why they are not trusted."""
    if not path.is_file():  # none yet (a non-file was moved aside first)
        return ""
    try:
        data = memoryview(path.read_bytes())
        if hashlib.sha256(data[:-64]).hexdigest().encode() != data[-64:]:
            return f"corrupt: {NAME} does not match its checksum"
        table = pq.ParquetFile(pa.BufferReader(data[:-64])).read()
        meta = json.loads((table.schema.metadata or {})[_META])
    except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
        return f"corrupt: {type(exc).__name__}: {first_line(str(exc))}"
    if not table.schema.equals(FILES) or not isinstance(meta, dict):
        return f"corrupt: {NAME} has an unexpected schema"
    expected = {"format": CACHE_FORMAT, "lbnorm": lbnorm_version(), **key}
    for name, value in expected.items():
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


def store(
    cache: Path, files: pa.Table, key: Mapping[str, str], *, stat_ns: int
) -> None:
    """Write the cache's file whole: `files` as Parquet, then their sha256."""
    meta = {"format": CACHE_FORMAT, "lbnorm": lbnorm_version(), **key}
    sink = pa.BufferOutputStream()
    pq.write_table(
        files.replace_schema_metadata({_META: json.dumps(meta | {"stat_ns": stat_ns})}),
        sink,
        compression="zstd",
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
