"""What every reader needs of a file: its format by suffix, its bytes, its hash, its lines.

The one map from file suffix to format lives here; the score readers, the
metadata join, the reader of output directories and ``lbnorm query`` all use it.
"""

from __future__ import annotations

import hashlib
import json
import reprlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from lbnorm.errors import InputError

__all__ = [
    "FILE_FORMATS",
    "TABLE_SUFFIXES",
    "FileFormat",
    "file_format",
    "json_lines",
    "read_bytes",
    "sha256_file",
]

_SHORT = reprlib.Repr()  # bounded reprs for messages
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother = 3, 60, 60

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


def read_bytes(path: Path) -> bytes:
    """Return a file's bytes; an unreadable file is an :class:`InputError`."""
    try:
        return path.read_bytes()
    except OSError as exc:
        msg = (
            f"{path}: cannot read: {exc.strerror}.\nHint: check the file's permissions."
        )
        raise InputError(msg) from exc


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file's content."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


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
                msg = f"{path}: line {number} is {_SHORT.repr(document)}, not a JSON object.\n{hint}"
                raise InputError(msg)
            yield number, document
