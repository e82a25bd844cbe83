"""Writing lbnorm's outputs: a run's tables and provenance, ratings, tables added to a folder.

What goes into each table's metadata and the manifest (provenance), written
through one :class:`~lbnorm.output.transaction.Transaction` per command (staging
folder, lock, hashing while writing, one swap). A run's folder holds
``subtasks.parquet``, ``benchmarks.parquet``, ``leaderboard.parquet`` and
``manifest.json``, plus the tables a nightly run or :func:`add_to` adds;
``docs/outputs.md`` describes it for readers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lbnorm._runtime import Threads
from lbnorm.core import arrow
from lbnorm.core.errors import OptionsError, OutputError
from lbnorm.core.files import check_option_file, sha256_file
from lbnorm.core.manifest import (
    INLINE_INPUTS,
    INPUTS_TABLE,
    MANIFEST,
    Listing,
    environment,
)
from lbnorm.core.options import RunOptions
from lbnorm.core.version import lbnorm_version
from lbnorm.engines.result import Job, Result, TableParts
from lbnorm.output.transaction import (
    Recognizer,
    Transaction,
    check_file,
    read_manifest,
    write_file,
)
from lbnorm.readers import input_rejections, input_reruns, input_warnings
from lbnorm.suites import Suite

if TYPE_CHECKING:
    import pandas as pd  # only a caller's frames: never loaded here

__all__ = [
    "OUTPUT_FILES",
    "PAIRED_FILE",
    "add_to",
    "provenance_of",
    "write_job",
    "write_table_file",
]

#: The tables of a run's output folder, by file name.
OUTPUT_FILES = ("subtasks.parquet", "benchmarks.parquet", "leaderboard.parquet")
#: The table ``lbnorm run --paired`` adds beside them.
PAIRED_FILE = "paired.parquet"


def write_job(
    job: Job,
    transaction: Transaction,
    *,
    finish: Callable[[Result], Result],
    provenance: Mapping[str, str],
) -> Result:
    """Write a job's subtask table into `transaction` as its parts come, then the rest.

    Each part is encoded on a thread while the job computes the next one (both
    release the GIL for their array work), so reading, summing and writing overlap.
    The caller commits (a nightly run adds its own tables first).

    Args:
        job: The engine's job (see :class:`lbnorm.engines.result.Job`).
        transaction: The output's transaction.
        finish: Applied to the job's result before its tables are written.
        provenance: Every table's Parquet metadata (:func:`provenance_of`).

    Returns:
        The result written (its subtask table read back from the file).
    """
    if job.subtask_schema is None:
        result = finish(job.finish())
    else:
        name = "subtasks.parquet"
        result = transaction.write_parts(  # (the parts are summed as they come)
            name,
            _stamped(job.subtask_schema, provenance, name),
            (part for part in job.subtask_parts() if part.num_rows),
            then=lambda: finish(job.finish()),
        )
        if result.subtask_parts is None:  # the parts went to disk: read back from there
            result = replace(
                result, subtask_parts=TableParts.on_disk(transaction.path(name))
            )
    _write_tables(result, transaction, provenance)  # (the staged subtasks skipped)
    return result


def provenance_of(suite: Suite, options: RunOptions, files: pa.Table) -> dict[str, str]:
    """The Parquet metadata every output table carries: version, suite, inputs."""
    listed = _by_path(files.select(["path", "sha256", "rows"])).to_pylist()
    return {
        "lbnorm.version": lbnorm_version(),
        "lbnorm.suite": suite.name,
        "lbnorm.suite_source": suite.source,
        "lbnorm.suite_sha256": suite.sha256,
        "lbnorm.suite_modified": "true" if suite.is_modified else "false",
        "lbnorm.missing": options.missing,
        "lbnorm.inputs": json.dumps(listed, sort_keys=True),
        "lbnorm.metadata_table": json.dumps(_metadata_input(options), sort_keys=True),
    }


def _metadata_input(options: RunOptions) -> dict[str, Any] | None:
    """The model metadata table a run joined: its path, size and sha256 (None: none).

    Examples:
        >>> _metadata_input(RunOptions()) is None
        True
    """
    if options.metadata is None:
        return None
    path = Path(options.metadata)
    check_option_file(path, option="--metadata", folders=True)  # (no FIFO opened)
    try:
        return {
            "path": str(path),
            "bytes": path.stat().st_size,
            "sha256": sha256_file(path),
        }
    except OSError as exc:
        msg = f"{path}: cannot read the metadata table to record it: {exc.strerror or exc}.\nHint: keep the file in place until the run ends."
        raise OutputError(msg) from exc


def _by_path(files: pa.Table) -> pa.Table:
    """The catalog's rows by path (Arrow's order of UTF-8 bytes: Python's of text)."""
    return files.take(pc.sort_indices(files["path"]))


def _holds_floats(kind: pa.DataType) -> bool:
    """Whether a type (a table's: its columns as a struct) holds floats, at any depth.

    A :class:`Listing` may not.
    """
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return True
    return any(_holds_floats(kind.field(at).type) for at in range(kind.num_fields))


def _absolute(path: str) -> str:
    """`path` made absolute against the working directory, without touching the disk."""
    return os.path.abspath(path)  # noqa: PTH100 - Path.resolve stats every part


def _write_tables(
    result: Result,
    transaction: Transaction,
    provenance: Mapping[str, str],
) -> None:
    """Write the result's tables (but a subtask table written already) and set the manifest.

    `provenance` is :func:`provenance_of` the run: each table's Parquet metadata.
    """
    suite, files = result.suite, result.file_table
    ordered = _by_path(files)
    resolved = [_absolute(path) for path in ordered["path"].to_pylist()]
    ordered = ordered.append_column("resolved", arrow.strings(resolved))  # (no pandas)
    inputs: list[dict[str, Any]] = ordered.to_pylist()
    tables: dict[str, pa.Table | TableParts | None] = {
        "subtasks.parquet": result.subtask_parts,
        "benchmarks.parquet": result.benchmark_output,
        "leaderboard.parquet": result.leaderboard_output,
        PAIRED_FILE: result.paired_output,
    }
    # Parquet encoding and fsync release the GIL: the tables are written side by
    # side (a core each), while this thread counts for the manifest below.
    with Threads(len(tables), "table") as pool:
        futures = [
            pool.submit(_write_one, transaction, name, table, provenance)
            for name, table in tables.items()
            # None: not asked for; staged already: the subtasks, as they came
            if table is not None and name not in transaction.outputs
        ]
        board = result.board_counts()
        n_resized, resized = result.resized_variants()
        counts = {
            "models": board.models,
            "variants": board.variants,
            "complete_variants": board.complete,
            "ignored_rows": result.n_ignored_rows,
            "superseded_files": sum(row["superseded_by"] is not None for row in inputs),
            "variants_pooled_with_other_sizes": n_resized,
        }
        for future in futures:
            future.result()
    listing: Any
    if len(inputs) > INLINE_INPUTS:  # a results tree: listed in a table beside
        listing = {"table": INPUTS_TABLE, "rows": len(inputs)}
        transaction.write_table(INPUTS_TABLE, ordered, is_tuned=False)
    else:
        listing = inputs if _holds_floats(pa.struct(files.schema)) else Listing(inputs)
    metadata = json.loads(provenance["lbnorm.metadata_table"])  # (hashed once a run)
    builtin = suite.source.startswith("builtin:")
    transaction.manifest |= {
        # the text lets the output be read back where the suite file moved or changed
        "suite": suite.provenance()
        | {
            "resolved": None if builtin else _absolute(suite.source),
            "text": None if builtin else suite.text,
        },
        "options": result.options.to_manifest(),
        "inputs": listing,
        "metadata_table": None
        if metadata is None
        else {**metadata, "resolved": _absolute(metadata["path"])},
        "counts": counts,
        # pooled by the sample sizes the input gave (a --limit run): not comparable
        "pooled_with_other_sizes": resized,
    }
    # what the readers noted beyond the catalog, each key absent when empty: the
    # variants read from several results files with superseded files or older
    # scores that differ, the results files a cached run rejected (with the
    # variant each held and whether it is lost), every warning of the summary
    notes = {
        "reruns": input_reruns(files),
        "rejected": input_rejections(files),
        "warnings": input_warnings(files),
    }
    transaction.manifest |= {key: value for key, value in notes.items() if value}


def _write_one(
    transaction: Transaction,
    name: str,
    table: pa.Table | TableParts,
    provenance: Mapping[str, str],
) -> None:
    """Write one of a run's tables: whole (one row group), or its parts (no empty row group)."""
    parts, plain = (
        ([table], ())
        if isinstance(table, pa.Table)
        else ((part for part in table.parts() if part.num_rows), table.unique_columns)
    )
    schema = _stamped(table.schema, provenance, name)
    transaction.write_parts(name, schema, parts, then=lambda: None, plain=plain)


def _stamped(schema: pa.Schema, provenance: Mapping[str, str], name: str) -> pa.Schema:
    """`schema` with a run's table's metadata: provenance, its name, pandas' types."""
    table = {"lbnorm.table": name.removesuffix(".parquet")}
    return schema.with_metadata({**provenance, **table, **_pandas_metadata(schema)})


def _pandas_metadata(schema: pa.Schema) -> dict[str, str]:
    """Schema metadata that makes pandas read integer columns as nullable integers.

    Without it a column such as ``rank`` arrives as float64 whenever it holds a
    null; ``to_pandas`` (and ``pd.read_parquet``) read the ``pandas`` entry's
    ``numpy_type`` (``Int64``...) instead. Other readers (DuckDB, polars) ignore it.

    Examples:
        >>> json.loads(_pandas_metadata(pa.schema([("rank", pa.int64())]))["pandas"])["columns"][0]["numpy_type"]
        'Int64'
    """
    columns = [
        {
            "name": field.name,
            "field_name": field.name,
            "pandas_type": str(field.type),
            "numpy_type": str(field.type).capitalize(),  # int64 -> Int64
            "metadata": None,
        }
        for field in schema
        if pa.types.is_integer(field.type)
    ]
    document = {
        "index_columns": [],
        "column_indexes": [],
        "columns": columns,
        "creator": {"library": "lbnorm", "version": lbnorm_version()},
        "pandas_version": "2.0.0",  # the metadata layout, not a dependency
    }
    return {"pandas": json.dumps(document)}


# --- tables added beside a run's (diff, impact, health --out) --------------------------------


def add_to(
    transaction: Transaction,
    tables: Mapping[str, pd.DataFrame | pa.Table],
    *,
    sources: Mapping[str, Any] | None = None,
) -> None:
    """Stage `tables` as ``<name>.parquet`` in a transaction, beside what it holds.

    Into an lbnorm output (a transaction that has staged nothing yet), the
    output's files are carried over (hard links) and the tables added to its
    manifest; the next ``lbnorm run`` replaces it, these tables included. A new
    or empty folder becomes an output of its own (``kind`` ``analysis``,
    recording `sources`); a folder holding anything else was refused by the
    transaction. Tables are written with pyarrow's defaults.

    Args:
        transaction: The folder's transaction (``kind=None``), committed by the caller.
        tables: Frames (column docs from ``attrs["column_docs"]``) or Arrow
            tables, by name without ``.parquet``.
        sources: What the tables were computed from (the command, the outputs
            and suites it read), recorded in the manifest.

    Raises:
        OutputError: A name is one of a run's own.
    """
    reserved = {
        name.removesuffix(".parquet")
        for name in (*OUTPUT_FILES, PAIRED_FILE, MANIFEST, INPUTS_TABLE)
    }
    if clash := sorted(set(tables) & reserved):
        msg = f"{transaction.out}: cannot add tables named {clash}: the run writes those.\nHint: choose other names."
        raise OutputError(msg)
    record = {"sources": dict(sources or {})}
    files = {f"{name}.parquet": _arrow(table) for name, table in tables.items()}
    if not transaction.manifest:
        previous = read_manifest(transaction.target, whole=True)[0]
        if previous is None:
            transaction.manifest = {"kind": "analysis", **record}
        else:
            if previous.get("kind") == "analysis":  # the latest command's sources
                previous.update(record, environment=environment())
            transaction.keep(skip=set(files))
            transaction.manifest = previous
    for name, table in files.items():
        transaction.write_table(name, table, is_tuned=False)


def _arrow(table: pd.DataFrame | pa.Table) -> pa.Table:
    """An added table as Arrow: a frame converted, its ``attrs["column_docs"]`` as field docs."""
    if isinstance(table, pa.Table):
        return table
    docs = table.attrs.get("column_docs", {})
    converted = pa.Table.from_pandas(table, preserve_index=False)
    fields = [
        pa.field(
            field.name,
            pa.string() if pa.types.is_large_string(field.type) else field.type,
            metadata={"doc": docs[field.name]} if field.name in docs else None,
        )
        for field in converted.schema
    ]
    return converted.cast(pa.schema(fields))


def check_scores_target(path: str | Path) -> None:
    """Check ``lbnorm convert --out FILE`` before any work.

    Raises:
        OptionsError: Not a ``.parquet`` file, or inside an output folder (exit 2).
        OutputError: A file lbnorm did not write is there (exit 6).
    """
    if not str(path).lower().endswith((".parquet", ".pq")):
        msg = (
            f"--out {path}: lbnorm convert writes Parquet (what the Dask engine "
            "reads).\nHint: name the file scores.parquet."
        )
        raise OptionsError(msg)
    check_file(path, option="--out", is_ours=is_table_file("scores"))


def write_table_file(
    table: pa.Table, path: str | Path, *, kind: str, option: str
) -> None:
    """Write a table to one CSV or Parquet file (by suffix), atomically, marked as lbnorm's `kind`.

    A run's validation failures (``failures``: ``--failures FILE``) or the long
    scores ``lbnorm convert`` writes for the Dask engine (``scores``: Parquet,
    :func:`check_scores_target` before the work). The file is replaced whole
    (written beside it, then renamed), and an existing file lbnorm did not
    write (:func:`is_table_file`) is refused.

    Args:
        table: The rows (a Parquet file keeps its schema's metadata).
        path: The file; ``.csv``, else Parquet (pyarrow's defaults, zstd).
        kind: What the file holds: ``failures`` or ``scores``.
        option: The option that named the file, for messages.

    Raises:
        OptionsError: The file is inside an lbnorm output folder.
        OutputError: The file cannot be written, or is not one lbnorm wrote.
    """
    target = Path(path)
    content: bytes | pa.Table
    if target.suffix.lower() == ".csv":
        import pyarrow.csv as pacsv

        sink = pa.BufferOutputStream()
        pacsv.write_csv(table, sink)
        content = sink.getvalue().to_pybytes()
    else:
        metadata = {**(table.schema.metadata or {}), _KIND_KEY: kind.encode()}
        content = table.replace_schema_metadata(metadata)
    write_file(target, content, option=option, is_ours=is_table_file(kind))


#: How lbnorm's failures files are recognized: a CSV's header, a Parquet footer's key.
_FAILURES_HEADER = b'"check","source","row","column","value"'
_KIND_KEY = b"lbnorm.file"


def is_table_file(kind: str) -> Recognizer:
    r"""Whether a file's first and last bytes are a `kind` file lbnorm wrote (``failures``, ``scores``).

    A Parquet file's footer holds the key and its value as Thrift writes them
    (the value's field header, 0x18, and its length before it); a failures CSV
    starts with its header.

    Examples:
        >>> is_failures = is_table_file("failures")
        >>> is_failures(b'"check","source","row","column","value","model"', b"")
        True
        >>> is_failures(b"PAR1...", b"...lbnorm.file\x18\x08failures...PAR1")
        True
    """
    mark = _KIND_KEY + b"\x18" + bytes([len(kind)]) + kind.encode()

    def is_ours(head: bytes, tail: bytes) -> bool:
        if kind == "failures" and head.startswith(_FAILURES_HEADER):
            return True
        return head.startswith(b"PAR1") and mark in tail

    return is_ours
