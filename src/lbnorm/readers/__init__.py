"""Readers: every input format to score batches of one long-format contract.

One module per format (:mod:`~lbnorm.readers.harness` results files and trees,
:mod:`~lbnorm.readers.samples` per-sample results, :mod:`~lbnorm.readers.tables`
CSV and JSONL, :mod:`~lbnorm.readers.parquet` Parquet streamed a row group at a
time), the input catalog that dispatches paths to them
(:mod:`~lbnorm.readers.catalog`, which also says what a directory's inputs
are), the parse cache of nightly runs (:mod:`~lbnorm.readers.cache`), what they
all need of a file (:mod:`~lbnorm.core.files`: regular files only, readable
folders, the results-file size cap) and of Arrow (:mod:`~lbnorm.core.arrow`:
columns built without importing pandas). :func:`read_inputs` is the one entry;
reading CSV, JSONL, Parquet and results files loads no pandas.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from lbnorm.core.files import MAX_RESULTS_BYTES
from lbnorm.core.options import ProgressCallback, RunOptions
from lbnorm.readers.catalog import Inputs, describe_variant, read_files
from lbnorm.suites import Suite

__all__ = [
    "Inputs",
    "cache_stats",
    "describe_variant",
    "input_rejections",
    "input_reruns",
    "input_warnings",
    "noted",
    "read_inputs",
]


def read_inputs(
    paths: Sequence[str | Path],
    *,
    suite: Suite,
    options: RunOptions,
    progress: ProgressCallback | None = None,
    max_results_bytes: int | None = MAX_RESULTS_BYTES,
) -> Inputs:
    """Read every input path into score batches and a catalog of files.

    Args:
        paths: Files or directories (see :mod:`lbnorm.readers.catalog` for
            what a directory's inputs are).
        suite: The suite, which says which results-file entries to read.
        options: The run's options (with ``cache``, results files go through
            the parse cache, see :mod:`lbnorm.readers.cache`).
        progress: Called as ``progress(stage, done, total)`` after each file.
        max_results_bytes: The largest results file read (None: no limit);
            default 512 MiB, thousands of times a real one.

    Returns:
        The scores (as batches), the catalog of files (an Arrow table,
        :data:`lbnorm.core.schemas.INPUT_FILES`) and warnings. Battle files
        are the composition's (:func:`lbnorm.pipeline.read_all`: they are
        scored as a pairwise benchmark by :mod:`lbnorm.ratings.pairwise_inputs`).

    Raises:
        InputError: A path is missing, not a regular file or directory, of an
            unknown type, unreadable, too large or malformed; the message names
            the file.
        OutputError: The parse cache cannot be written or is in use.
    """
    if options.cache is not None:
        from lbnorm.readers.cache import read_files_cached  # nightly runs only

        read = read_files_cached(paths, suite=suite, options=options, progress=progress)
    else:
        read = read_files(
            paths,
            suite=suite,
            options=options,
            progress=progress,
            max_results_bytes=max_results_bytes,
        )
    return noted(read)


def noted(read: Inputs) -> Inputs:
    """`read` with its warnings and cache figures noted in its catalog's metadata."""
    notes = {_WARNINGS: json.dumps(list(read.warnings))}
    if read.cache_stats is not None:
        notes[_CACHE] = json.dumps(dict(read.cache_stats))
    if read.reruns:
        notes[_RERUNS] = json.dumps(list(read.reruns))
    if read.rejected:
        notes[_REJECTED] = json.dumps(list(read.rejected))
    return replace(read, catalog=read.catalog.replace_schema_metadata(notes))


def cache_stats(catalog: pa.Table) -> dict[str, Any] | None:
    """The parse cache's figures of a run's catalog (None: no cache was used)."""
    stats = _note(catalog, _CACHE)
    return None if stats is None else dict(stats)


def input_warnings(catalog: pa.Table) -> list[str]:
    """What the readers warned of (files skipped, settings that differ, ...)."""
    return list(_note(catalog, _WARNINGS) or ())


def input_reruns(catalog: pa.Table) -> list[dict[str, Any]]:
    """The variants read from several results files that were superseded or differ.

    One record per variant (see :attr:`lbnorm.readers.newest.ResultsRead.reruns`).
    """
    return list(_note(catalog, _RERUNS) or ())


def input_rejections(catalog: pa.Table) -> list[dict[str, Any]]:
    """The results files a cached run rejected, each with the variant it held.

    One record per rejected file: ``path``, ``model``, ``precision``,
    ``revision``, ``chat_template`` (as far as known: from the file's own
    config, an earlier parse of it, or its ``<org>/<model>`` folders),
    ``variant_from`` (``file``, ``cache``, ``folder``; null: unknown),
    ``other_files`` (accepted results files of that variant) and ``lost``
    (true: no other file holds it, so it is not on the board).
    """
    return list(_note(catalog, _REJECTED) or ())


def _note(catalog: pa.Table, key: bytes) -> Any:
    """The note at `key` of a catalog's metadata (:func:`noted`); None if absent."""
    text = (catalog.schema.metadata or {}).get(key)
    return None if text is None else json.loads(text)


_CACHE = b"lbnorm.cache"
_WARNINGS = b"lbnorm.warnings"
_RERUNS = b"lbnorm.reruns"
_REJECTED = b"lbnorm.rejected"
