"""Readers: every supported input format into one long-format scores frame.

``read_inputs`` dispatches each path: a directory is searched for
lm-evaluation-harness ``results_*.json`` files (the leaderboard tree), else for
score tables; a ``.json`` file is a results file; ``.csv``, ``.jsonl``/``.ndjson``
and ``.parquet`` files are long-format tables (see :mod:`lbnorm.readers.tables`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from lbnorm.errors import InputError
from lbnorm.readers.harness import find_results_files, read_results_files
from lbnorm.readers.tables import TABLE_SUFFIXES, ExtraColumns, read_score_table
from lbnorm.suites import Suite

__all__ = ["Inputs", "read_inputs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    """What the readers produced.

    Attributes:
        scores: Long-format scores (:data:`lbnorm.schemas.SCORES` columns, kept
            extra columns, and ``_row``: the row number or results key).
        files: One row per input file: ``path``, ``format``, ``sha256``, ``bytes``,
            ``rows`` (scores taken from it), ``superseded_by`` and ``n_ignored``.
    """

    scores: pd.DataFrame
    files: pd.DataFrame


def read_inputs(
    paths: Sequence[str | Path], *, suite: Suite, extra_columns: ExtraColumns = "error"
) -> Inputs:
    """Read every input path into one scores frame and a catalog of files.

    Args:
        paths: Files or directories.
        suite: The suite, which says which results-file entries to read.
        extra_columns: Policy for unknown columns in tables.

    Returns:
        The scores and the file catalog.

    Raises:
        InputError: A path is missing, of an unknown type, unreadable or
            malformed; the message names the file.
    """
    if not paths:
        msg = "no input given.\nHint: pass score files or a results directory (or run `lbnorm run` alone for the demo)."
        raise InputError(msg)
    table_paths: list[Path] = []
    json_paths: list[Path] = []
    for entry in map(Path, paths):
        if entry.is_dir():
            if any(entry.rglob("results_*.json")):
                json_paths.extend(find_results_files(entry))
                continue
            found = sorted(
                p
                for p in entry.rglob("*")
                if p.suffix.lower() in TABLE_SUFFIXES and p.is_file()
            )
            if not found:
                find_results_files(entry)  # raises the "nothing found" error
            table_paths.extend(found)
        elif entry.is_file():
            (json_paths if entry.suffix.lower() == ".json" else table_paths).append(
                entry
            )
        else:
            msg = f"{entry}: no such file or directory.\nHint: check the path."
            raise InputError(msg)
    frames: list[pd.DataFrame] = []
    catalogs: list[pd.DataFrame] = []
    for path in table_paths:
        scores = read_score_table(path, extra_columns=extra_columns)
        frames.append(scores)
        catalogs.append(
            pd.DataFrame(
                {
                    "path": [str(path)],
                    "format": [TABLE_SUFFIXES[path.suffix.lower()]],
                    "sha256": [_sha256_file(path)],
                    "bytes": [path.stat().st_size],
                    "rows": [len(scores)],
                    "superseded_by": [None],
                    "n_ignored": [0],
                }
            )
        )
    if json_paths:
        blobs = [(path, _read_bytes(path)) for path in json_paths]
        subtasks = suite.subtask_table()
        pairs = list(zip(subtasks["task"], subtasks["metric"], strict=True))
        scores, catalog = read_results_files(blobs, pairs, subtasks)
        frames.append(scores)
        catalog = catalog.assign(
            format="lm-eval-harness",
            sha256=[hashlib.sha256(data).hexdigest() for _, data in blobs],
            bytes=[len(data) for _, data in blobs],
            rows=catalog["rows"].where(catalog["superseded_by"].isna(), 0),
        )
        catalogs.append(
            catalog[
                [
                    "path",
                    "format",
                    "sha256",
                    "bytes",
                    "rows",
                    "superseded_by",
                    "n_ignored",
                ]
            ]
        )
    scores = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    files = pd.concat(catalogs, ignore_index=True) if len(catalogs) > 1 else catalogs[0]
    return Inputs(scores=scores, files=files)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        msg = (
            f"{path}: cannot read: {exc.strerror}.\nHint: check the file's permissions."
        )
        raise InputError(msg) from exc


def _sha256_file(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
