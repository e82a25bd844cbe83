"""What every reader needs of a file: its format by suffix, its bytes, its hash, its lines.

The one map from file suffix to format lives here; the score readers, the
metadata join, the reader of output directories and ``lbnorm query`` all use it.
So do the rules every reader follows before it opens anything: an input is a
regular file (a FIFO, a device or a socket is refused, named for what it is,
without opening it: opening a FIFO would wait for a writer), every folder of a
directory input is readable (an unreadable one is an error, never a silent
skip), and a results file is at most :data:`MAX_RESULTS_BYTES`. A file given as
an option's value (a suite, health thresholds, a metadata table) is checked
alike (:func:`read_option_file`, :func:`check_option_file`).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import reprlib
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, NoReturn

from lbnorm.core.errors import InputError

#: How results files are named (the leaderboard's ``results_<timestamp>.json``);
#: here, not in :mod:`lbnorm.readers.harness`, so that finding inputs does not load
#: the results parser (and msgspec) for a run that reads none.
RESULTS_FILE = re.compile(r"^results_.*\.json$")
#: How harness sample files are named (``samples_<task>_<timestamp>.jsonl``); here
#: for the same reason: finding inputs loads no sample reader for a run that reads none.
SAMPLES_FILE = re.compile(
    r"^samples_(?P<task>.+)_(?P<timestamp>\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)\.jsonl$"
)

__all__ = [
    "FILE_FORMATS",
    "MAX_OPTION_BYTES",
    "MAX_RESULTS_BYTES",
    "RESULTS_FILE",
    "SAMPLES_FILE",
    "TABLE_SUFFIXES",
    "FileFormat",
    "check_option_file",
    "check_regular_file",
    "describe_mode",
    "file_format",
    "json_lines",
    "read_bytes",
    "read_option_file",
    "sha256_file",
    "sha256_of",
    "shown",
    "walk_directory",
]

_SHORT = reprlib.Repr()  # bounded reprs for messages
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 60, 60
#: A value as messages show it: bounded, even for a 100,000-deep one.
shown = _SHORT.repr

#: A file's format, as lbnorm tells it by its suffix.
FileFormat = Literal["csv", "jsonl", "json", "parquet"]

#: Suffix -> format, every suffix lbnorm reads or writes.
FILE_FORMATS: dict[str, FileFormat] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}

#: Suffixes of long-format score tables (a ``.json`` file is a results file).
TABLE_SUFFIXES: dict[str, FileFormat] = {
    suffix: kind for suffix, kind in FILE_FORMATS.items() if kind != "json"
}


def file_format(path: str | Path) -> FileFormat | None:
    """Return the format a file's suffix says, or None.

    Examples:
        >>> file_format("scores.PQ"), file_format("notes.txt")
        ('parquet', None)
    """
    return FILE_FORMATS.get(Path(path).suffix.lower())


#: The largest results file read by default: 512 MiB. Real lm-evaluation-harness
#: and lighteval results files are about 130 KB; a file thousands of times that
#: size is a damaged or padded download, and parsing it takes about twice its size
#: in memory. Pass ``max_results_bytes`` to :func:`lbnorm.readers.read_inputs`
#: (None: no limit) to read one anyway.
MAX_RESULTS_BYTES = 512 * 2**20

_VCS_FOLDERS = frozenset({".git", ".hg", ".svn"})
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def describe_mode(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words.

    Examples:
        >>> describe_mode(os.stat("/dev/null").st_mode)
        'a character device'
    """
    for is_kind, words in _KINDS:
        if is_kind(mode):
            return words
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def check_regular_file(path: Path) -> os.stat_result:
    """Return a file's ``stat``; refuse anything that is not a regular file.

    Only ``stat`` is called (it follows symbolic links): a FIFO is refused
    without being opened, so nothing waits for a writer.

    Raises:
        InputError: The path does not exist, cannot be looked at, or is a
            directory, FIFO, device or socket; the message says which.
    """
    try:
        info = path.stat()
    except FileNotFoundError as exc:
        msg = f"{path}: no such file or directory.\nHint: check the path."
        raise InputError(msg) from exc
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    if not stat.S_ISREG(info.st_mode):
        msg = (
            f"{path}: is {describe_mode(info.st_mode)}, not a regular file; lbnorm reads "
            "score files and results files only.\n"
            "Hint: copy the data into a file first (lbnorm does not read pipes or devices)."
        )
        raise InputError(msg)
    return info


#: The largest option file read whole (a suite or health thresholds: a few KB).
MAX_OPTION_BYTES = 16 * 2**20


def check_option_file(path: Path, *, option: str, folders: bool = False) -> None:
    """Refuse a FIFO, device or socket given as `option`'s value, without opening it.

    A FIFO would block its reader for ever and ``/dev/zero`` never end; a
    directory is refused unless `folders` (a Parquet dataset). A path that
    cannot be looked at is left to the reader's own message.

    Raises:
        InputError: Not a regular file; the message says what it is.
    """
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if not (stat.S_ISREG(mode) or (folders and stat.S_ISDIR(mode))):
        msg = (
            f"{option} {path}: is {describe_mode(mode)}, not a regular file.\n"
            "Hint: copy it into a file first (lbnorm does not read an option's "
            "value from pipes or devices)."
        )
        raise InputError(msg)


def read_option_file(
    path: Path, *, option: str, max_bytes: int = MAX_OPTION_BYTES
) -> bytes:
    """A regular file given as `option`'s value, whole, if at most `max_bytes`.

    Raises:
        InputError: Not a regular file (:func:`check_option_file`), unreadable,
            or over `max_bytes`.
    """
    check_option_file(path, option=option)
    try:
        # (not waiting on a FIFO put in the file's place since the stat)
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(descriptor, "rb") as handle:
            info = os.fstat(descriptor)
            size = info.st_size if stat.S_ISREG(info.st_mode) else max_bytes + 1
            data = handle.read(max_bytes + 1) if size <= max_bytes else b""
    except OSError as exc:
        msg = f"{option} {path}: cannot read: {exc.strerror}.\nHint: check the path and the file's permissions."
        raise InputError(msg) from exc
    if size > max_bytes or len(data) > max_bytes:
        msg = (
            f"{option} {path}: over {max_bytes:,} bytes, far larger than such a "
            "file is.\nHint: check that the path names the file meant."
        )
        raise InputError(msg)
    return data


def read_bytes(path: Path, *, max_bytes: int | None = None) -> bytes:
    """Return a regular file's bytes, refusing files over `max_bytes`.

    Args:
        path: The file.
        max_bytes: The largest size read (None: no limit); a results reader
            passes :data:`MAX_RESULTS_BYTES` or the caller's choice.

    Raises:
        InputError: Not a regular file, unreadable, or over `max_bytes`.
    """
    size = check_regular_file(path).st_size
    if max_bytes is not None and size > max_bytes:
        raise _too_large(path, size, max_bytes)
    try:
        with path.open("rb") as handle:
            data = handle.read()  # sized from fstat: one allocation
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    if max_bytes is not None and len(data) > max_bytes:  # it grew since stat
        raise _too_large(path, len(data), max_bytes)
    return data


def _unreadable(path: Path, exc: OSError) -> InputError:
    msg = f"{path}: cannot read: {exc.strerror}.\nHint: check the file's permissions."
    return InputError(msg)


def _too_large(path: Path, size: int, limit: int) -> InputError:
    msg = (
        f"{path}: {size:,} bytes is over the {limit:,}-byte ({limit / 2**20:,.0f} MiB) "
        "limit for one results file; real results files are about 130 KB.\n"
        "Hint: check that this is a complete, undamaged results file; to read larger "
        "files, pass max_results_bytes (None: no limit) to lbnorm.readers.read_inputs."
    )
    return InputError(msg)


def walk_directory(directory: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """Every regular file under `directory`, and every other entry with what it is.

    Version-control folders (``.git``, ``.hg``, ``.svn``: a cloned results
    repository has one) are neither walked nor listed; every other folder is.
    Symbolic links to files count as files; links to directories are not
    followed (listed as others).

    Args:
        directory: The directory.

    Returns:
        The regular files, sorted; and the other entries (FIFOs, devices,
        sockets, links to directories, dangling links), sorted, each with its
        kind in words.

    Raises:
        InputError: A directory in the tree (or the tree itself) cannot be
            listed; the message names it, as it does for an unreadable file.
    """

    def fail(exc: OSError) -> NoReturn:
        msg = (
            f"{exc.filename}: cannot read the directory: {exc.strerror}.\n"
            "Hint: check its permissions: every folder of an input tree must be "
            "readable (lbnorm never skips one silently)."
        )
        raise InputError(msg) from exc

    files: list[Path] = []
    others: list[tuple[Path, str]] = []
    pending = [directory]
    while pending:  # scandir's entries know their type: no stat per plain file
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as exc:
            fail(exc)
        for entry in entries:
            path = folder / entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in _VCS_FOLDERS:
                        pending.append(path)
                    continue
                if entry.is_file(follow_symlinks=False):
                    files.append(path)
                    continue
                mode = entry.stat().st_mode  # a link, a FIFO, a device...
            except FileNotFoundError:
                others.append((path, "a dangling symbolic link"))
                continue
            except OSError as exc:
                fail(exc)
            if stat.S_ISREG(mode):
                files.append(path)
            elif stat.S_ISDIR(mode):
                others.append((path, "a link to a directory (not followed)"))
            else:
                others.append((path, describe_mode(mode)))
    return sorted(files), sorted(others)


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file's content."""
    with path.open("rb", buffering=0) as handle:
        return sha256_of(handle)


def sha256_of(handle: io.RawIOBase) -> str:
    """The hex sha256 of what is left to read of an open file.

    Read and hashed 8 MiB at a time: both release the GIL, so a hash on one
    thread (the writer syncs a written table while the engine finishes) takes
    it back a few times per 100 MB; ``hashlib.file_digest``'s 256 KiB reads
    took it back hundreds of times, each a wait behind the busy thread.
    """
    digest = hashlib.sha256()
    # no larger than the file: a new buffer is written whole (zeroed), and 8 MiB
    # of fresh pages would cost a small file's hash many times over
    left = os.fstat(handle.fileno()).st_size - handle.tell()
    chunk = bytearray(min(_HASH_CHUNK, max(left, 0) + 1))
    view = memoryview(chunk)
    while size := handle.readinto(chunk):
        digest.update(view[:size])
    return digest.hexdigest()


#: Bytes read and hashed at a time by :func:`sha256_of`.
_HASH_CHUNK = 8 << 20


def json_lines(
    path: Path, *, hint: str, loads: Any = json.loads
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line of a JSON-lines file.

    Args:
        path: The file.
        hint: The ``Hint:`` line of every error (what a line should hold).
        loads: The JSON parser (a faster one may be passed).

    Raises:
        InputError: A line is not JSON, or not a JSON object; the message names it.
    """
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                document = loads(line.rstrip(b"\r\n"))
            except (ValueError, RecursionError) as exc:
                msg = f"{path}: line {number} is not valid JSON ({exc}).\n{hint}"
                raise InputError(msg) from exc
            if not isinstance(document, dict):
                msg = f"{path}: line {number} is {shown(document)}, not a JSON object.\n{hint}"
                raise InputError(msg)
            yield number, document
