"""Readers: every input format to score batches of one long-format contract.

One module per format (:mod:`~lbnorm.readers.harness` results files and trees,
:mod:`~lbnorm.readers.samples` per-sample results, :mod:`~lbnorm.readers.tables`
CSV and JSONL, :mod:`~lbnorm.readers.parquet` Parquet streamed a row group at a
time), the input catalog that dispatches paths to them
(:mod:`~lbnorm.readers.catalog`), the parse cache of nightly runs
(:mod:`~lbnorm.readers.cache`), and what they all need of a file
(:mod:`~lbnorm.readers.files`). :func:`read_inputs` is the one entry.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from lbnorm.options import ProgressCallback, RunOptions
from lbnorm.readers.catalog import Inputs, read_files
from lbnorm.suites import Suite

__all__ = ["Inputs", "cache_stats", "read_inputs"]


def read_inputs(
    paths: Sequence[str | Path],
    *,
    suite: Suite,
    options: RunOptions,
    progress: ProgressCallback | None = None,
) -> Inputs:
    """Read every input path into score batches and a catalog of files.

    Args:
        paths: Files or directories.
        suite: The suite, which says which results-file entries to read.
        options: The run's options (with ``cache``, results files go through
            the parse cache, see :mod:`lbnorm.readers.cache`).
        progress: Called as ``progress(stage, done, total)`` after each file.

    Returns:
        The scores (as batches) and the file catalog.

    Raises:
        InputError: A path is missing, of an unknown type, unreadable or
            malformed; the message names the file.
        OutputError: The parse cache cannot be written or is in use.
    """
    if options.cache is not None:
        from lbnorm.readers.cache import read_files_cached  # nightly runs only

        read = read_files_cached(paths, suite=suite, options=options, progress=progress)
    else:
        read = read_files(paths, suite=suite, options=options, progress=progress)
    return replace(read, files=_catalog_table(read.files))


def cache_stats(files: pa.Table) -> dict[str, Any] | None:
    """The parse cache's figures of a run's catalog (None: no cache was used)."""
    text = (files.schema.metadata or {}).get(_CACHE_KEY)
    return None if text is None else dict(json.loads(text))


_CACHE_KEY = b"lbnorm.cache"


def _catalog_table(files: Any) -> pa.Table:
    """The catalog as Arrow (the parse cache's figures in its schema metadata)."""
    if isinstance(files, pa.Table):
        return files
    stats = files.attrs.get("cache")
    table = pa.Table.from_pandas(files, preserve_index=False)
    table = table.cast(
        pa.schema(
            [
                pa.field(f.name, pa.string()) if pa.types.is_large_string(f.type) else f
                for f in table.schema
            ]
        )
    ).replace_schema_metadata(None)
    if stats is not None:
        table = table.replace_schema_metadata({_CACHE_KEY: json.dumps(stats)})
    return table
