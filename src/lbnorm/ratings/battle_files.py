"""Which input files hold battles, told by their columns without loading the battle reader.

``lbnorm run`` asks this of every file it is given (:mod:`lbnorm.ratings.pairwise_inputs`);
the reader of battles (:mod:`lbnorm.ratings.battles`, with its CSV and JSON
parsers) loads only when a file is one.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from lbnorm.core.files import FileFormat, file_format

__all__ = ["NAME_COLUMNS", "header_names", "is_battles_file"]

_PROBE_BYTES = 256 * 1024  # a battle record is well under 1 KiB
#: The two columns every battle file has (the reader asks for them too).
NAME_COLUMNS = ("model_a", "model_b")


def is_battles_file(path: Path | str) -> bool:
    r"""Whether a file holds battles: how ``lbnorm run`` tells them from scores.

    A file is battles if it has ``model_a`` and ``model_b`` columns: a CSV's
    header, a Parquet file's schema, the keys of a JSONL file's first line, the
    keys of the first element of a ``.json`` file that is a JSON array (a
    results file is one object). Only the header, the first line or the first
    256 KiB are read; an unreadable file is not battles (its reader then says
    what is wrong).

    Args:
        path: The file.

    Returns:
        True for either battle shape.

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "b.csv").write_text("model_a,model_b,winner\na,b,tie\n")
        >>> _ = (folder / "s.csv").write_text("model,benchmark,subtask,raw_score\n")
        >>> is_battles_file(folder / "b.csv"), is_battles_file(folder / "s.csv")
        (True, False)
    """
    path = Path(path)
    kind = file_format(path)  # (a battle file may be of every format lbnorm reads)
    names: Iterable[object] = ()
    try:
        if kind in ("csv", "parquet"):
            names = header_names(path, kind)
        elif kind in ("json", "jsonl"):
            with path.open("rb") as fh:
                if kind == "json":  # an array's first element
                    text = fh.read(_PROBE_BYTES).decode("utf-8", errors="replace")
                    text = text.lstrip("\ufeff \t\r\n")
                    body = text[1:].lstrip(" \t\r\n") if text.startswith("[") else ""
                else:  # the first line
                    body = next((line for line in fh if line.strip()), b"").decode()
            record = json.JSONDecoder().raw_decode(body)[0] if body else None
            names = record if isinstance(record, dict) else ()
    except (OSError, ValueError, RecursionError, csv.Error, pa.ArrowException):
        return False
    present = set(names)
    return all(name in present for name in NAME_COLUMNS)


def header_names(path: Path, kind: FileFormat) -> list[str]:
    """A CSV file's header or a Parquet file's column names, as stored (none for JSON).

    Raises:
        OSError, UnicodeDecodeError, csv.Error, pyarrow.ArrowException: As reading does.
    """
    if kind == "csv":
        with path.open("rb") as fh:  # the header only: rows are checked later
            first = fh.readline().decode("utf-8-sig")
        return next(csv.reader([first]), [])
    if kind == "parquet":
        import pyarrow.parquet as pq  # (loaded by every run's Parquet reader)

        return list(pq.read_schema(path).names)
    return []  # JSON: null columns are absent keys, found after reading
