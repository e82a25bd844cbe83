"""Atomic Parquet outputs with provenance: the only module that writes files.

An output directory holds ``subtasks.parquet``, ``benchmarks.parquet``,
``leaderboard.parquet`` and ``manifest.json``. It is built in a hidden sibling
directory and swapped in with one atomic ``renameat2(RENAME_EXCHANGE)`` (Linux;
elsewhere two renames, which the next run repairs if interrupted), so a reader
sees either the previous output or the new one, never a mix. A lock file beside
the directory keeps two runs from writing it at once: the second fails at once
with a clear message. Parquet bytes depend only on the data, the suite and the
inputs' hashes; the creation time lives in ``manifest.json`` alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import glob
import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lbnorm._faults import fault_point
from lbnorm.errors import OutputError
from lbnorm.options import RunOptions
from lbnorm.result import Job, PartsOnDisk, Result, SubtaskParts
from lbnorm.suites import Suite
from lbnorm.version import lbnorm_version

__all__ = [
    "OUTPUT_FILES",
    "add_tables",
    "exclusive_lock",
    "provenance_of",
    "write_bytes_atomically",
    "write_job",
    "write_parquet_atomically",
    "write_result",
]

#: The tables of an output directory, by file name.
OUTPUT_FILES = ("subtasks.parquet", "benchmarks.parquet", "leaderboard.parquet")
_MANIFEST = "manifest.json"
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def write_result(result: Result, out: Path, *, created_at: str | None = None) -> Path:
    """Write the result's three tables and manifest to `out`, atomically.

    Args:
        result: The tables to write.
        out: Output directory; an existing lbnorm output there is replaced whole.
        created_at: ISO 8601 creation time for the manifest; defaults to
            ``SOURCE_DATE_EPOCH`` (if set) or now.

    Returns:
        The output directory.

    Raises:
        OutputError: `out` is not an lbnorm output directory, another run holds
            its lock, or the disk refuses the write. The previous output is
            untouched and no partial files remain.
    """
    return _write_staged(
        out, lambda staging: _write_tables(result, staging), created_at=created_at
    )


def write_job(
    job: Job,
    out: Path,
    *,
    finish: Callable[[Result], Result] = lambda result: result,
    provenance: Mapping[str, str],
    created_at: str | None = None,
) -> Result:
    """Write a job's subtask table as its parts come, then the rest, atomically.

    Each part is encoded on this thread while the job computes the next one on
    another (both release the GIL for their array work), so reading, summing
    and writing the subtask table overlap.

    Args:
        job: The engine's job (see :class:`lbnorm.result.Job`).
        out: Output directory; an existing lbnorm output there is replaced whole.
        finish: Applied to the job's result before its tables are written
            (the pipeline joins model metadata there).
        provenance: Parquet metadata of the subtask table (the others get the
            same, from the result).
        created_at: ISO 8601 creation time for the manifest.

    Returns:
        The result written.

    Raises:
        OutputError: As :func:`write_result`; nothing is written on any error.
    """
    finished: list[Result] = []

    def fill(staging: Path) -> dict[str, Any]:
        written = None
        if job.subtask_schema is not None:
            path = staging / "subtasks.parquet"
            metadata = {**provenance, "lbnorm.table": "subtasks"}
            n_rows = _write_parts(
                job.subtask_schema, job.subtask_parts(), metadata, path
            )
            written = _synced(path, n_rows, len(job.subtask_schema))
        finished.append(finish(job.finish()))
        return _write_tables(finished[0], staging, subtasks=written)

    written = _write_staged(out, fill, created_at=created_at)
    result = finished[0]
    if job.subtask_schema is not None and result.subtask_parts is None:
        # the parts went to disk as they came: the result reads them back from there
        result = replace(
            result, subtask_parts=PartsOnDisk(written / "subtasks.parquet")
        )
    return result


def _write_staged(
    out: Path,
    fill: Callable[[Path], dict[str, Any]],
    *,
    created_at: str | None,
) -> Path:
    """Fill a staging folder beside `out`, add the manifest, and swap it in."""
    out = Path.cwd() / out  # absolute, symlinks kept as given
    _check_target(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _output_error(out, exc) from exc
    with _locked(out):
        _clean_leftovers(out)
        fault_point("locked")
        staging = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:12]}"
        try:
            staging.mkdir()
            manifest = fill(staging)
            manifest["created_at"] = created_at or _now()
            _write_bytes(
                staging / _MANIFEST,
                (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(),
            )
            _fsync_dir(staging)
            fault_point("staged")
            _swap_in(staging, out)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise _output_error(out, exc) from exc
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return out


def provenance_of(suite: Suite, options: RunOptions, files: pa.Table) -> dict[str, str]:
    """The Parquet metadata every output table carries: version, suite, inputs."""
    inputs = _sorted_inputs(files)
    return {
        "lbnorm.version": lbnorm_version(),
        "lbnorm.suite": suite.name,
        "lbnorm.suite_source": suite.source,
        "lbnorm.suite_sha256": suite.sha256,
        "lbnorm.suite_modified": "true" if suite.is_modified else "false",
        "lbnorm.missing": options.missing,
        "lbnorm.inputs": json.dumps(
            [
                {"path": i["path"], "sha256": i["sha256"], "rows": i["rows"]}
                for i in inputs
            ],
            sort_keys=True,
        ),
    }


def _sorted_inputs(files: pa.Table) -> list[dict[str, Any]]:
    """The catalog's rows by path."""
    rows: list[dict[str, Any]] = files.to_pylist()
    return sorted(rows, key=lambda row: str(row["path"]))


def _write_tables(
    result: Result, folder: Path, *, subtasks: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write the result's tables (the subtask table unless `subtasks` says it is written)."""
    suite = result.suite
    files = result.file_table
    inputs = _sorted_inputs(files)
    provenance = provenance_of(suite, result.options, files)
    tables: dict[str, pa.Table | SubtaskParts | None] = {
        "subtasks.parquet": None if subtasks is not None else result.subtask_parts,
        "benchmarks.parquet": result.benchmark_table,
        "leaderboard.parquet": result.leaderboard_table,
    }
    jobs = {
        name: (table, {**provenance, "lbnorm.table": name.removesuffix(".parquet")})
        for name in OUTPUT_FILES
        if (table := tables[name]) is not None  # None: not asked for, or written
    }
    # Parquet encoding and fsync release the GIL: the tables are written side by
    # side (a core each), while this thread counts for the manifest below.
    with ThreadPoolExecutor(max_workers=max(len(jobs), 1)) as pool:
        futures = {
            name: pool.submit(_write_output, table, metadata, folder / name)
            for name, (table, metadata) in jobs.items()
        }
        board = result.leaderboard_table
        counts = {
            "models": len(set(board.column("model").to_pylist())),
            "variants": board.num_rows,
            "complete_variants": int(
                np.count_nonzero(board.column("is_complete").to_numpy())
            ),
            "ignored_rows": result.n_ignored_rows,
            "superseded_files": sum(row["superseded_by"] is not None for row in inputs),
        }
        outputs = {name: future.result() for name, future in futures.items()}
    if subtasks is not None:
        outputs["subtasks.parquet"] = subtasks
    return {
        "tool": "lbnorm",
        "version": provenance["lbnorm.version"],
        "suite": suite.provenance(),
        "options": result.options.to_manifest(),
        "inputs": inputs,
        "outputs": {name: outputs[name] for name in OUTPUT_FILES if name in outputs},
        "counts": counts,
    }


def _write_output(
    table: pa.Table | SubtaskParts, metadata: dict[str, str], path: Path
) -> dict[str, Any]:
    """Write and sync one table; return its rows, columns and sha256."""
    if isinstance(table, pa.Table):
        table = table.replace_schema_metadata(metadata)
        _write_parquet(table, path)
        return _synced(path, table.num_rows, table.num_columns)
    n_rows = _write_parts(table.schema, table.parts(), metadata, path)
    return _synced(path, n_rows, len(table.schema))


def _synced(path: Path, n_rows: int, n_columns: int) -> dict[str, Any]:
    """Sync a written table to disk; its rows, columns and sha256 for the manifest."""
    digest = _fsync_file(path)
    with _FAULT_LOCK:  # the point counts its passes; the tables finish in any order
        fault_point("table-written")
    return {"rows": n_rows, "columns": n_columns, "sha256": digest}


_FAULT_LOCK = threading.Lock()


def _write_parts(
    schema: pa.Schema,
    parts: Iterator[pa.Table],
    metadata: dict[str, str],
    path: Path,
) -> int:
    """Write the subtask table a part (one row group) at a time; return its rows.

    The next part is built on a second thread while this one is encoded (both
    release the GIL for their array work), holding at most two parts in memory.
    """
    schema = schema.with_metadata(metadata)
    n_rows = 0
    with (
        pq.ParquetWriter(
            path,
            schema,
            compression="zstd",
            write_batch_size=_WRITE_BATCH_ROWS,
            write_statistics=_statistics_columns(schema),
            use_dictionary=[*_dictionary_columns(schema), *_FEW_VALUES],
        ) as writer,
        ThreadPoolExecutor(max_workers=1) as builder,
    ):
        pending = builder.submit(next, parts, None)
        while (part := pending.result()) is not None:
            pending = builder.submit(next, parts, None)
            if part.num_rows:  # a benchmark nobody has: no empty row group
                writer.write_table(part, row_group_size=part.num_rows)
                n_rows += part.num_rows
    return n_rows


#: Columns with a few values per subtask: dictionary pages make them nearly free.
_FEW_VALUES = ("lower_bound", "n_samples")


def _statistics_columns(schema: pa.Schema) -> list[str]:
    # min/max of model names and revision shas prune nothing and cost a third of
    # the write
    return [name for name in schema.names if name not in _NO_STATISTICS]


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    # dictionary pages for float scores save nothing
    return [field.name for field in schema if pa.types.is_dictionary(field.type)]


#: High-cardinality text columns written without min/max statistics.
_NO_STATISTICS = frozenset({"model", "revision"})

#: Values encoded per call inside the Parquet writer (pyarrow's default: 1,024).
#: Larger batches encode 10-20% faster; the bytes written are the same.
_WRITE_BATCH_ROWS = 65_536


def _write_parquet(table: pa.Table, path: Path) -> None:
    """Write a table as one row group (the subtask table is written in parts).

    Every row group repeats the key dictionaries, which costs more than skipping
    saves for these tables. Per-row-unique text (the leaderboard's keys) is
    written plain, not dictionary-encoded.
    """
    is_unique_keys = path.name == "leaderboard.parquet"
    pq.write_table(
        table,
        path,
        row_group_size=max(table.num_rows, 1),  # one, as the docstring says
        compression="zstd",
        write_batch_size=_WRITE_BATCH_ROWS,
        write_statistics=_statistics_columns(table.schema),
        use_dictionary=["precision"]
        if is_unique_keys
        else _dictionary_columns(table.schema),
    )


def _check_target(out: Path) -> None:
    if out.exists() and not out.is_dir():
        msg = f"{out}: exists and is not a directory.\nHint: choose another --out."
        raise OutputError(msg)
    if out.is_dir() and any(out.iterdir()) and not (out / _MANIFEST).is_file():
        msg = (
            f"{out}: exists, is not empty, and is not an lbnorm output (no {_MANIFEST}); "
            "lbnorm replaces its output directory whole and will not overwrite it.\n"
            "Hint: choose an empty or new --out directory."
        )
        raise OutputError(msg)


@contextlib.contextmanager
def exclusive_lock(
    lock_path: Path, *, busy: str, unlockable: Callable[[OSError], OutputError]
) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path` (created if needed) or fail at once.

    The one lock of lbnorm: an output directory's and the parse cache's.

    Args:
        lock_path: The lock file.
        busy: The message when another process holds the lock.
        unlockable: The error to raise when the lock file cannot be opened.

    Raises:
        OutputError: Another process holds the lock, or it cannot be taken.
    """
    try:
        handle = lock_path.open("a")
    except OSError as exc:
        raise unlockable(exc) from exc
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise OutputError(busy) from exc
        yield


def _locked(out: Path) -> contextlib.AbstractContextManager[None]:
    return exclusive_lock(
        out.parent / f".{out.name}.lock",
        busy=(
            f"{out}: another lbnorm run is writing this output directory.\n"
            "Hint: wait for it to finish, or write to another --out."
        ),
        unlockable=lambda exc: _output_error(out, exc),
    )


def _clean_leftovers(out: Path) -> None:
    """Remove what a killed run left; restore a swapped-out output if needed."""
    prefix = glob.escape(f".{out.name}")  # an --out named "a*" must not match "ab"
    old = sorted(out.parent.glob(f"{prefix}.old-*"))
    if old and not out.exists():
        old[-1].rename(out)  # an interrupted two-rename swap: put it back
        old = old[:-1]
    for leftover in [*old, *out.parent.glob(f"{prefix}.tmp-*")]:
        shutil.rmtree(leftover, ignore_errors=True)


def _swap_in(staging: Path, out: Path) -> None:
    if not out.exists():
        staging.rename(out)
    elif _exchange(staging, out):
        fault_point("swapped")
        shutil.rmtree(staging, ignore_errors=True)  # now holds the previous output
    else:
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:12]}"
        out.rename(old)
        staging.rename(out)
        fault_point("swapped")
        shutil.rmtree(old, ignore_errors=True)
    _fsync_dir(out.parent)


def _exchange(first: Path, second: Path) -> bool:
    """Atomically swap two directories (Linux renameat2); False if unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    status = renameat2(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if status == 0:
        return True
    code = ctypes.get_errno()
    if code in {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP}:
        return False
    raise OSError(code, os.strerror(code), str(second))


def _write_bytes(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_file(path: Path) -> str:
    """Sync a file to disk; return the sha256 of its bytes (read back once)."""
    with path.open("rb") as handle:
        os.fsync(handle.fileno())
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _now() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = float(epoch) if epoch and epoch.isdigit() else time.time()
    return datetime.fromtimestamp(moment, tz=UTC).isoformat(timespec="seconds")


def _output_error(out: Path, exc: OSError) -> OutputError:
    reason = exc.strerror or str(exc)
    hint = {
        errno.ENOSPC: "free disk space or write elsewhere",
        errno.EACCES: "check the directory's permissions or choose another --out",
        errno.EROFS: "the file system is read-only; choose another --out",
        errno.EDQUOT: "the disk quota is exceeded; free space or write elsewhere",
        errno.EFBIG: "a file size limit (ulimit -f) was hit; raise it or write elsewhere",
    }.get(exc.errno or 0, "check the path and the disk")
    msg = f"{out}: cannot write the output ({reason}); the previous output is unchanged.\nHint: {hint}."
    return OutputError(msg)


# --- beside the main tables: analysis tables, reports, the parse cache ---------------
# (lbnorm.analysis results, lbnorm diff/impact outputs, run reports, lbnorm.cache)


def add_tables(out: Path, tables: Mapping[str, pd.DataFrame | pa.Table]) -> list[Path]:
    """Write tables as ``<name>.parquet`` into a directory, each file atomically.

    In an lbnorm output directory (one with ``manifest.json``) this holds the
    output's lock and lists the tables under ``outputs`` in the manifest; the
    next ``lbnorm run`` replaces the directory whole, these tables included.
    Anywhere else the directory is created if needed.

    Args:
        out: The directory.
        tables: Frames (column docs from ``attrs["column_docs"]``) or Arrow tables,
            by name without ``.parquet``.

    Returns:
        The files written.

    Raises:
        OutputError: A name is one of the main tables', or the disk refuses.
    """
    out = Path.cwd() / out
    if clash := sorted(
        set(tables)
        & {name.removesuffix(".parquet") for name in (*OUTPUT_FILES, _MANIFEST)}
    ):
        msg = f"{out}: cannot add tables named {clash}: the run writes those.\nHint: choose other names."
        raise OutputError(msg)
    is_output = (out / _MANIFEST).is_file()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _output_error(out, exc) from exc
    with _locked(out) if is_output else contextlib.nullcontext():
        written = [
            write_parquet_atomically(out / f"{name}.parquet", _extra_arrow(table))
            for name, table in tables.items()  # a handful of tables
        ]
        if is_output:
            manifest = json.loads((out / _MANIFEST).read_text("utf-8"))
            for path in written:
                metadata = pq.read_metadata(path)
                manifest["outputs"][path.name] = {
                    "rows": metadata.num_rows,
                    "columns": metadata.num_columns,
                }
            text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
            write_bytes_atomically(out / _MANIFEST, text.encode())
    return written


def write_parquet_atomically(path: Path, table: pa.Table) -> Path:
    """Write one Parquet file (zstd) via a temporary sibling and a rename.

    Raises:
        OutputError: The disk refuses; no partial file remains.
    """
    return _replace_atomically(
        path, lambda temporary: pq.write_table(table, temporary, compression="zstd")
    )


def write_bytes_atomically(path: Path, data: bytes) -> Path:
    """Write one file's bytes via a temporary sibling and a rename.

    Raises:
        OutputError: The disk refuses; no partial file remains.
    """
    return _replace_atomically(path, lambda temporary: temporary.write_bytes(data))


def _replace_atomically(path: Path, write: Callable[[Path], object]) -> Path:
    temporary = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        write(temporary)
        _fsync_file(temporary)
        temporary.replace(path)
        _fsync_dir(path.parent)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise _output_error(path, exc) from exc
    return path


def _extra_arrow(table: pd.DataFrame | pa.Table) -> pa.Table:
    if isinstance(table, pa.Table):
        return table
    docs = table.attrs.get("column_docs", {})
    converted = pa.Table.from_pandas(table, preserve_index=False)
    fields = []
    for field in converted.schema:
        kind = pa.string() if pa.types.is_large_string(field.type) else field.type
        fields.append(
            pa.field(
                field.name,
                kind,
                metadata={"doc": docs[field.name]} if field.name in docs else None,
            )
        )
    return converted.cast(pa.schema(fields))
