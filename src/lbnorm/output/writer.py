"""Atomic Parquet outputs with provenance: the only module that writes outputs.

(A spilled streaming run also writes temporary files, in a folder of its own
under ``TMPDIR``: :mod:`lbnorm.engines.spill`.)

An output folder holds ``subtasks.parquet``, ``benchmarks.parquet``,
``leaderboard.parquet`` and ``manifest.json`` (plus any tables
:func:`add_tables` listed in the manifest). It is built in a hidden staging
folder beside it and swapped in with one atomic ``renameat2(RENAME_EXCHANGE)``
(Linux; elsewhere two renames, which the next run repairs if interrupted), so a
reader sees either the previous output or the new one, never a mix. Parquet
bytes depend only on the data, the suite and the inputs' hashes; the creation
time lives in ``manifest.json`` alone.

What lbnorm replaces, and what it leaves alone:

* Only its own outputs: a folder whose ``manifest.json`` says ``"tool":
  "lbnorm"`` with a format it knows (:data:`OUTPUT_FORMAT`) and that holds
  nothing the manifest does not list. Anything else that is not empty is
  refused (:class:`~lbnorm.core.errors.OutputError`, exit 6) and left as it is; so is
  a read-only output folder.
* ``--out LINK`` (a symbolic link to a folder) writes through the link: the
  folder it points to is replaced, the link stays.
* Nothing is left beside the output. A run holds an advisory lock (``flock``) on
  its own staging folder while it lives; a second run on the same output sees
  that lock and fails at once, and a staging folder nobody holds is what a
  killed run left, which the next run removes. The parent folder is locked only
  for the instants when a run claims its staging folder and swaps it in.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm._runtime import hand_over, held_signals
from lbnorm.core.errors import OutputError
from lbnorm.core.faults import fault_point
from lbnorm.core.files import check_option_file, sha256_file, sha256_of
from lbnorm.core.manifest import (
    MANIFEST,
    OUTPUT_FORMAT,
    Listing,
    OutputKind,
    manifest_bytes,
    manifest_head,
    manifest_kind,
    manifest_problem,
)
from lbnorm.core.options import RunOptions
from lbnorm.core.version import lbnorm_version
from lbnorm.engines.result import (
    Job,
    PartsOnDisk,
    Result,
    TableParts,
    UniquePerPart,
)
from lbnorm.suites import Suite

if TYPE_CHECKING:
    import pandas as pd  # only a caller's frames: never loaded here

__all__ = [
    "OUTPUT_FILES",
    "OUTPUT_FORMAT",
    "add_tables",
    "check_output_kind",
    "exclusive_lock",
    "manifest_problem",
    "provenance_of",
    "replaced_outputs",
    "write_bytes_atomically",
    "write_job",
    "write_parquet_atomically",
    "write_result",
    "write_tables",
]

#: The tables of an output directory, by file name.
OUTPUT_FILES = ("subtasks.parquet", "benchmarks.parquet", "leaderboard.parquet")
_MANIFEST = MANIFEST
_T = TypeVar("_T")
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def write_result(result: Result, out: Path, *, created_at: str | None = None) -> Path:
    """Write the result's three tables and manifest to `out`, atomically.

    Args:
        result: The tables to write.
        out: Output folder: new, empty, or an lbnorm output (replaced whole). A
            symbolic link to a folder is written through.
        created_at: ISO 8601 creation time for the manifest; defaults to
            ``SOURCE_DATE_EPOCH`` (if set) or now.

    Returns:
        The output directory.

    Raises:
        OutputError: `out` is not an lbnorm output folder (or holds files lbnorm
            did not write), is read-only, another run is writing it, or the disk
            refuses the write. The previous output is untouched and no partial
            files remain.
    """
    check_output_kind(out, "leaderboard")
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
        job: The engine's job (see :class:`lbnorm.engines.result.Job`).
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
    check_output_kind(out, "leaderboard")
    finished: list[Result] = []

    def fill(staging: Path) -> dict[str, Any]:
        if job.subtask_schema is None:
            finished.append(finish(job.finish()))
            return _write_tables(finished[0], staging)
        path = staging / "subtasks.parquet"
        metadata = {**provenance, "lbnorm.table": "subtasks"}
        n_columns = len(job.subtask_schema)
        with _PartWriter(job.subtask_schema, metadata, path) as parts:
            for part in job.subtask_parts():  # summed as they come
                parts.add(part)
            # the last part is encoded, then the file synced and hashed, on the
            # writer's thread while the job finishes here (both release the GIL)
            synced = parts.close_then(lambda n_rows: _synced(path, n_rows, n_columns))
            finished.append(finish(job.finish()))
            written = synced.result()
        return _write_tables(finished[0], staging, subtasks=written)

    written = _write_staged(out, fill, created_at=created_at)
    result = finished[0]
    if job.subtask_schema is not None and result.subtask_parts is None:
        # the parts went to disk as they came: the result reads them back from there
        result = replace(
            result, subtask_parts=PartsOnDisk(written / "subtasks.parquet")
        )
    return result


def write_tables(
    out: Path,
    tables: Mapping[str, pa.Table],
    manifest: Mapping[str, Any],
    *,
    created_at: str | None = None,
) -> Path:
    """Write tables as ``<name>.parquet`` and a manifest to `out`, atomically.

    The same staging folder, lock and swap as :func:`write_result`; the
    manifest gets ``outputs`` (each table's rows, columns and sha256) and
    ``created_at``. An output of another kind (its manifest's ``kind``) is not
    replaced.

    Args:
        out: Output directory; an existing lbnorm output of the same kind there
            is replaced whole.
        tables: Arrow tables by name without ``.parquet`` (their schema
            metadata is written as it is).
        manifest: The rest of the manifest (``tool``, ``kind``, ``version``,
            ``options``, ``inputs``...).
        created_at: ISO 8601 creation time for the manifest; defaults to
            ``SOURCE_DATE_EPOCH`` (if set) or now.

    Returns:
        The output directory.

    Raises:
        OutputError: As :func:`write_result`, or `out` holds an output of
            another kind; nothing is written then.
    """
    kind = str(manifest.get("kind", "leaderboard"))
    for name in tables:
        if not name or name != Path(name).name or name.startswith("."):
            msg = f"{out}: cannot write a table named {name!r}.\nHint: name tables with a plain file name."
            raise OutputError(msg)
    check_output_kind(out, kind)

    def fill(staging: Path) -> dict[str, Any]:
        check_output_kind(out, kind)  # again, under the lock
        outputs = {}
        for name, table in tables.items():  # a ratings output's two tables
            path = staging / f"{name}.parquet"
            _write_parquet(table, path)
            outputs[path.name] = _synced(path, table.num_rows, table.num_columns)
        return {**manifest, "outputs": outputs}

    return _write_staged(out, fill, created_at=created_at)


def check_output_kind(out: Path, kind: OutputKind | str) -> None:
    """Refuse to replace an output of another kind (a leaderboard with ratings, or back).

    A directory without a readable lbnorm manifest is left to the target
    checks of the writer.

    Args:
        out: The output directory about to be written.
        kind: What will be written there: ``leaderboard`` or ``ratings``.

    Raises:
        OutputError: `out` holds an lbnorm output of another kind.
    """
    out = Path(out)
    try:
        if not (out / _MANIFEST).is_file():
            return
    except OSError:  # e.g. a name too long: the target checks say what is wrong
        return
    manifest, _ = _load_manifest(out / _MANIFEST)
    if manifest is None:  # not a manifest lbnorm can read: the target checks say so
        return
    existing = manifest_kind(manifest)
    if existing != kind:
        makers = {"leaderboard": "lbnorm run", "ratings": "lbnorm arena"}
        msg = (
            f"{out}: holds a {existing} output (written by `{makers.get(existing, 'lbnorm')}`); "
            f"a {kind} output will not replace it.\n"
            "Hint: choose another --out, or remove the directory first if it is no longer needed."
        )
        raise OutputError(msg)


def _write_staged(
    out: Path,
    fill: Callable[[Path], dict[str, Any]],
    *,
    created_at: str | None,
) -> Path:
    """Fill a staging folder beside `out`, add the manifest, and swap it in."""
    out = Path.cwd() / out  # absolute, symlinks kept as given
    with _staged(out) as stage:
        manifest = fill(stage.folder)
        manifest["format"] = OUTPUT_FORMAT
        manifest["created_at"] = created_at or _now()
        _write_bytes(stage.folder / _MANIFEST, manifest_bytes(manifest))
        _fsync_dir(stage.folder)
        fault_point("staged")
        stage.swap()
    return out


def provenance_of(suite: Suite, options: RunOptions, files: pa.Table) -> dict[str, str]:
    """The Parquet metadata every output table carries: version, suite, inputs."""
    return _provenance(
        suite, options, _sorted_inputs(files.select(["path", "sha256", "rows"]))
    )


def _provenance(
    suite: Suite, options: RunOptions, inputs: list[dict[str, Any]]
) -> dict[str, str]:
    """:func:`provenance_of`, from the catalog's rows sorted by path."""
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
        "lbnorm.metadata_table": json.dumps(metadata_input(options), sort_keys=True),
    }


def metadata_input(options: RunOptions) -> dict[str, Any] | None:
    """The model metadata table a run joined: its path, size and sha256 (None: none).

    Examples:
        >>> metadata_input(RunOptions()) is None
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


def pandas_metadata(schema: pa.Schema) -> dict[str, str]:
    """Schema metadata that makes pandas read integer columns as nullable integers.

    Without it a column such as ``rank`` or ``n_samples`` arrives as float64
    whenever it holds a null; pyarrow's ``to_pandas`` (and ``pd.read_parquet``)
    read the ``pandas`` entry's ``numpy_type`` (``Int64``...) instead. Other
    readers (DuckDB, polars) ignore it.

    Examples:
        >>> json.loads(pandas_metadata(pa.schema([("rank", pa.int64())]))["pandas"])["columns"][0]["numpy_type"]
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


def _sorted_inputs(files: pa.Table) -> list[dict[str, Any]]:
    """The catalog's rows by path (Arrow's order of UTF-8 bytes: Python's of text)."""
    rows: list[dict[str, Any]] = files.take(pc.sort_indices(files["path"])).to_pylist()
    return rows


def _holds_floats(schema: pa.Schema) -> bool:
    """Whether a column holds floats, at any depth (a :class:`Listing` may not)."""

    def floats(kind: pa.DataType) -> bool:
        if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
            return True
        return any(floats(kind.field(at).type) for at in range(kind.num_fields))

    return any(floats(field.type) for field in schema)


def _write_tables(
    result: Result, folder: Path, *, subtasks: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write the result's tables (the subtask table unless `subtasks` says it is written)."""
    suite = result.suite
    files = result.file_table
    inputs = _sorted_inputs(files)
    provenance = _provenance(suite, result.options, inputs)
    tables: dict[str, pa.Table | TableParts | None] = {
        "subtasks.parquet": None if subtasks is not None else result.subtask_parts,
        "benchmarks.parquet": result.benchmark_output,
        "leaderboard.parquet": result.leaderboard_output,
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
            name: hand_over(pool, _write_output, table, metadata, folder / name)
            for name, (table, metadata) in jobs.items()
        }
        board = result.board_counts()
        counts = {
            "models": board.models,
            "variants": board.variants,
            "complete_variants": board.complete,
            "ignored_rows": result.n_ignored_rows,
            "superseded_files": sum(row["superseded_by"] is not None for row in inputs),
        }
        n_resized, resized = result.resized_variants()
        counts["variants_pooled_with_other_sizes"] = n_resized
        outputs = {name: future.result() for name, future in futures.items()}
    if subtasks is not None:
        outputs["subtasks.parquet"] = subtasks
    return {
        "tool": "lbnorm",
        "version": provenance["lbnorm.version"],
        "suite": suite.provenance(),
        "options": result.options.to_manifest(),
        "inputs": inputs if _holds_floats(files.schema) else Listing(inputs),
        "outputs": {name: outputs[name] for name in OUTPUT_FILES if name in outputs},
        "metadata_table": metadata_input(result.options),
        "counts": counts,
        # pooled by the sample sizes the input gave (a --limit run): not comparable
        "pooled_with_other_sizes": resized,
    }


def _write_output(
    table: pa.Table | TableParts, metadata: dict[str, str], path: Path
) -> dict[str, Any]:
    """Write and sync one table; return its rows, columns and sha256."""
    if isinstance(table, pa.Table):
        table = table.replace_schema_metadata(
            {**metadata, **pandas_metadata(table.schema)}
        )
        _write_parquet(table, path)
        return _synced(path, table.num_rows, table.num_columns)
    plain = table.unique_columns if isinstance(table, UniquePerPart) else ()
    n_rows = _write_parts(table.schema, table.parts(), metadata, path, plain=plain)
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
    *,
    plain: tuple[str, ...] = (),
) -> int:
    """Write a table a part (one row group) at a time (:class:`_PartWriter`); return its rows."""
    with _PartWriter(schema, metadata, path, plain=plain) as writer:
        for part in parts:
            writer.add(part)
        return writer.close_then(lambda n_rows: n_rows).result()


class _PartWriter:
    """A Parquet file written a part (one row group) at a time, on a thread of its own.

    The subtask table, and the other two of a spilled run, come this way: each
    part is encoded on the writer's thread while the caller builds the next one
    (both release the GIL for their array work), holding at most two parts in
    memory. Columns in `plain` are written without dictionary pages (see
    :class:`lbnorm.engines.result.UniquePerPart`). Leaving the ``with`` block waits for
    the thread; on an error the file is left to the staging folder's cleanup.
    """

    def __init__(
        self,
        schema: pa.Schema,
        metadata: dict[str, str],
        path: Path,
        *,
        plain: tuple[str, ...] = (),
    ) -> None:
        schema = schema.with_metadata({**metadata, **pandas_metadata(schema)})
        self._writer = pq.ParquetWriter(
            path,
            schema,
            compression="zstd",
            write_batch_size=_WRITE_BATCH_ROWS,
            write_statistics=_statistics_columns(schema),
            use_dictionary=[
                name for name in _dictionary_choice(schema, path) if name not in plain
            ],
            column_encoding=_float_encodings(schema),
        )
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="lbnorm-writer")
        self._pending: Future[None] | None = None
        self._n_rows = 0

    def __enter__(self) -> _PartWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._thread.shutdown(wait=True, cancel_futures=True)
        finally:
            self._writer.close()  # (idempotent: close_then closed it already)

    def add(self, part: pa.Table) -> None:
        """Encode `part` on the thread once the part before is written."""
        self._wait()
        if part.num_rows:  # a benchmark nobody has: no empty row group
            self._pending = hand_over(
                self._thread,
                self._writer.write_table,
                part,
                row_group_size=part.num_rows,
            )
            self._n_rows += part.num_rows

    def close_then(self, then: Callable[[int], _T]) -> Future[_T]:
        """On the thread, after the last part: finish the file, then ``then(rows written)``.

        The caller goes on meanwhile; the future raises what writing raised.
        """
        last, self._pending = self._pending, None
        n_rows = self._n_rows

        def close() -> _T:
            if last is not None:
                last.result()  # done (one thread, in order): raises what it raised
            self._writer.close()
            return then(n_rows)

        return hand_over(self._thread, close)

    def _wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()  # raises what writing the part raised


#: Columns with a few values per subtask: dictionary pages make them nearly free.
_FEW_VALUES = ("lower_bound", "n_samples")


def _statistics_columns(schema: pa.Schema) -> list[str]:
    # min/max of names with a few values (benchmark, subtask, precision, ...) let
    # a reader skip row groups; those of model names, shas and float scores prune
    # nothing and cost a third of the write
    return [
        field.name
        for field in schema
        if field.name not in _NO_STATISTICS and not pa.types.is_floating(field.type)
    ]


def _float_encodings(schema: pa.Schema) -> dict[str, str]:
    # float scores byte-stream split: as small as plain on real scores (k/n
    # fractions), and zstd compresses them in two thirds of the time
    return {
        field.name: "BYTE_STREAM_SPLIT"
        for field in schema
        if pa.types.is_floating(field.type) and field.name not in _FEW_VALUES
    }


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    # dictionary pages for float scores save nothing
    return [field.name for field in schema if pa.types.is_dictionary(field.type)]


def _dictionary_choice(schema: pa.Schema, path: Path) -> list[str]:
    """Columns written with dictionary pages.

    The leaderboard's keys are unique per row: written plain, but for precision.
    Elsewhere: dictionary-typed text and the few-valued columns.
    """
    if path.name == "leaderboard.parquet":
        return ["precision"]
    few = [name for name in _FEW_VALUES if name in schema.names]
    return [*_dictionary_columns(schema), *few]


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
    pq.write_table(
        table,
        path,
        row_group_size=max(table.num_rows, 1),  # one, as the docstring says
        compression="zstd",
        write_batch_size=_WRITE_BATCH_ROWS,
        write_statistics=_statistics_columns(table.schema),
        column_encoding=_float_encodings(table.schema),
        use_dictionary=_dictionary_choice(table.schema, path),
    )


# --- where the output goes, and what may be replaced -----------------------------------

#: A ``manifest.json`` larger than this is not lbnorm's (one lists every input file).
_MANIFEST_LIMIT = 256 * 2**20
#: Characters a staging name adds to its tag: ``.<tag>.tmp-<12 hex digits>``.
_STAGING_EXTRA = len("..tmp-") + 12
#: Entries shown when a message lists a folder's files.
_SHOWN = 5


def _load_manifest(
    path: Path, *, whole: bool = False
) -> tuple[dict[str, Any] | None, str]:
    """The manifest at `path` if lbnorm wrote it, else None and why not.

    Only the keys the checks read (:func:`~lbnorm.core.manifest.manifest_head`), or
    all of it if `whole`.
    """
    try:
        with path.open("rb") as handle:
            data = handle.read(_MANIFEST_LIMIT + 1)
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    if len(data) > _MANIFEST_LIMIT:
        return None, "is too large to be lbnorm's"
    try:
        manifest: object = json.loads(data) if whole else manifest_head(data)
    except (ValueError, RecursionError):
        return None, "is not JSON"
    problem = manifest_problem(manifest)
    if problem or not isinstance(manifest, dict):  # a problem unless a dict
        return None, problem or ""
    return manifest, ""


def _target(out: Path) -> Path:
    """The folder `out` names: itself, or the folder its symbolic link points to."""
    if out.name in {"", ".."}:
        out = out.resolve()
        if not out.name:
            msg = f"{out}: the root folder cannot be an output.\nHint: choose a folder below it as --out."
            raise OutputError(msg)
    _check_name_length(out, out)
    try:
        if not out.is_symlink():
            return out
        target = out.resolve(strict=True)
    except FileNotFoundError as exc:
        msg = (
            f"{out}: a symbolic link to {out.readlink()}, which does not exist.\n"
            "Hint: create the folder it points to, or choose another --out."
        )
        raise OutputError(msg) from exc
    except RuntimeError as exc:  # a loop of links (Python < 3.13)
        raise _output_error(out, OSError(errno.ELOOP, str(exc))) from exc
    except OSError as exc:
        raise _output_error(out, exc) from exc
    if not target.is_dir():
        msg = f"{out}: a symbolic link to {target}, which is not a folder.\nHint: choose another --out."
        raise OutputError(msg)
    if not target.name:
        msg = f"{out}: a link to the root folder, which cannot be an output.\nHint: choose another --out."
        raise OutputError(msg)
    _check_name_length(out, target)
    return target


def _name_max(folder: Path) -> int:
    """The longest file name (bytes) the file system holding `folder` allows."""
    for place in (folder, *folder.parents):
        with contextlib.suppress(OSError, ValueError):
            return int(os.pathconf(place, "PC_NAME_MAX"))
    return 255


def _check_name_length(out: Path, path: Path, *, what: str = "--out name") -> None:
    length = len(os.fsencode(path.name))
    limit = _name_max(path.parent)
    if length > limit:
        msg = (
            f"{out}: the name {path.name[:24]}... is {length} bytes long; the file "
            f"system allows at most {limit}.\nHint: choose a shorter {what}."
        )
        raise OutputError(msg)


def _sibling_tag(name: str, name_max: int) -> str:
    """The part of a staging name that names its output: the name, or a hash of a long one."""
    if len(os.fsencode(name)) + _STAGING_EXTRA <= name_max:
        return name
    return "lbnorm-" + hashlib.sha256(os.fsencode(name)).hexdigest()[:24]


def _check_target(out: Path, target: Path) -> None:
    """Refuse a target that is neither absent, empty, nor wholly an lbnorm output; or read-only."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _output_error(out, exc) from exc
    if not stat.S_ISDIR(info.st_mode):
        msg = f"{out}: exists and is not a folder.\nHint: choose another --out."
        raise OutputError(msg)
    try:
        entries = sorted(entry.name for entry in target.iterdir())
    except OSError as exc:
        raise _output_error(out, exc) from exc
    if entries:
        _check_own_files(out, target, entries)
    if not os.access(target, os.W_OK | os.X_OK):
        msg = (
            f"{out}: cannot write the output (the folder is read-only, "
            f"{stat.filemode(info.st_mode)}); the previous output is unchanged.\n"
            f"Hint: make it writable (chmod u+w {out}) or choose another --out."
        )
        raise OutputError(msg)


def _check_own_files(out: Path, target: Path, entries: list[str]) -> None:
    """Refuse a folder holding anything its lbnorm manifest does not list."""
    if _MANIFEST not in entries:
        problem = f"no {_MANIFEST}"
        manifest = None
    else:
        manifest, problem = _load_manifest(target / _MANIFEST)
        problem = f"its {_MANIFEST} {problem}"
    if manifest is None:
        msg = (
            f"{out}: not an lbnorm output ({problem}) and not empty: it holds "
            f"{_listing(target, entries)}; lbnorm replaces its own output folders "
            "whole and deletes nothing it did not write.\n"
            "Hint: choose an empty or new --out folder."
        )
        raise OutputError(msg)
    listed = {*manifest["outputs"], _MANIFEST}
    unknown = [
        name
        for name in entries
        if name not in listed or not stat.S_ISREG(os.lstat(target / name).st_mode)
    ]
    if unknown:
        msg = (
            f"{out}: an lbnorm output that also holds {len(unknown)} file(s) lbnorm "
            f"did not write: {_listing(target, unknown)}; lbnorm replaces its output "
            "folder whole and deletes nothing it did not write.\n"
            f"Hint: move those files out of {out}, or choose another --out."
        )
        raise OutputError(msg)


def _listing(folder: Path, names: list[str]) -> str:
    """Up to five names, folders marked with a slash."""
    shown = [
        name
        + ("/" if (folder / name).is_dir() and not (folder / name).is_symlink() else "")
        for name in names[:_SHOWN]
    ]
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(shown) + more


def _is_own_output(target: Path) -> bool:
    return target.is_dir() and _load_manifest(target / _MANIFEST)[0] is not None


# --- claiming an output: staging folders, their locks, the swap --------------------------

#: The outputs this process has swapped in (see :func:`replaced_outputs`).
_replaced: list[Path] = []


def replaced_outputs() -> tuple[Path, ...]:
    """The outputs this process has swapped in so far, oldest first.

    An interrupted command reads it to say truly whether its new output is in
    place or the previous one is unchanged.
    """
    return tuple(_replaced)


class _Stage:
    """A run's staging folder beside its output, locked for as long as the run lives."""

    __slots__ = ("_lock", "folder", "is_swapped", "out", "previous", "target")

    def __init__(self, *, out: Path, target: Path, folder: Path, lock: int) -> None:
        self.out = out  # as the caller named it, for messages
        self.target = target  # the folder itself (a link's target)
        self.folder = folder
        self.previous: Path | None = None  # where the previous output went
        self.is_swapped = False
        self._lock = lock

    def swap(self) -> None:
        """Put the staged folder in place of the target, atomically."""
        with held_signals(), _parent_locked(self.target.parent):
            _check_target(self.out, self.target)  # files may have come meanwhile
            self.previous = _swap_in(self.folder, self.target, self._tag())
            self.is_swapped = True
            _replaced.append(self.out)
            _fsync_dir(self.target.parent)

    def discard(self) -> None:
        """Delete the unfinished output, or after the swap the previous one.

        A Ctrl-C or SIGTERM arriving meanwhile waits until the folder is gone
        (a deletion cut short would leave half a folder behind).
        """
        with held_signals():
            for path in (self.folder, self.previous):
                if path is not None:
                    shutil.rmtree(path, ignore_errors=True)

    def release(self) -> None:
        os.close(self._lock)

    def _tag(self) -> str:
        return self.folder.name[1:].rsplit(".tmp-", 1)[0]


@contextlib.contextmanager
def _staged(out: Path) -> Iterator[_Stage]:
    """Claim `out`, yield its locked staging folder, and clean up whatever happens.

    The staging folder is deleted on any error and on Ctrl-C or SIGTERM (the
    command line turns both into :class:`KeyboardInterrupt`); after the swap it
    holds the previous output, which is deleted too.
    """
    target = _target(out)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _output_error(out, exc) from exc
    stage = _claim(out, target)
    try:
        fault_point("locked")
        yield stage
    except OutputError:
        stage.discard()
        raise
    except OSError as exc:
        stage.discard()
        raise _output_error(out, exc, is_replaced=stage.is_swapped) from exc
    except BaseException:
        stage.discard()
        raise
    else:
        stage.discard()
    finally:
        stage.release()


def _claim(out: Path, target: Path) -> _Stage:
    """Refuse a busy or foreign target, clear what killed runs left, make a staging folder.

    All under the parent folder's lock, so that two runs never claim one output
    and no run removes a staging folder between its creation and its lock.
    """
    parent = target.parent
    tag = _sibling_tag(target.name, _name_max(parent))
    with _parent_locked(parent):
        leftovers = _leftovers(out, parent, tag)
        try:
            leftovers = _repair_interrupted_swap(target, leftovers)
            _check_target(out, target)
            folder = parent / f".{tag}.tmp-{uuid.uuid4().hex[:12]}"
            folder.mkdir()
            try:
                lock = _lock_folder(folder)
            except BaseException:
                folder.rmdir()
                raise
        except OSError as exc:
            _release(leftovers)
            if isinstance(exc, OutputError):
                raise
            raise _output_error(out, exc) from exc
        except BaseException:
            _release(leftovers)
            raise
    _remove(leftovers)
    _remove_old_lock_file(parent / f".{target.name}.lock")
    return _Stage(out=out, target=target, folder=folder, lock=lock)


def _remove_old_lock_file(path: Path) -> None:
    """Remove the empty lock file lbnorm 0.1 left beside every output, if unheld."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # none there (or a name too long to have one)
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        info = os.fstat(descriptor)
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            path.unlink()
    except OSError:  # held by a run of that version, or not ours to remove
        pass
    finally:
        os.close(descriptor)


def _lock_folder(folder: Path) -> int:
    """Open `folder` and hold an exclusive lock on it; return the descriptor."""
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise
    except OSError:  # a file system without directory locks: best effort
        pass
    return descriptor


def _leftovers(out: Path, parent: Path, tag: str) -> list[tuple[Path, int | None]]:
    """This output's staging folders that nobody holds, locked; refuse if one is held."""
    pattern = re.compile(rf"\.{re.escape(tag)}\.(?:tmp|old)-[0-9a-f]{{12}}")
    try:
        names = sorted(entry.name for entry in parent.iterdir())
    except OSError:
        return []
    found: list[tuple[Path, int | None]] = []
    try:
        for name in names:
            if not pattern.fullmatch(name):
                continue
            path = parent / name
            try:
                found.append((path, _lock_folder(path)))
            except BlockingIOError:  # a live run holds it
                msg = (
                    f"{out}: another lbnorm run is writing this output directory.\n"
                    "Hint: wait for it to finish, or write to another --out."
                )
                raise OutputError(msg) from None
            except OSError:  # a file or link an old version left, or unreadable
                found.append((path, None))
    except BaseException:
        _release(found)
        raise
    return found


def _repair_interrupted_swap(
    target: Path, leftovers: list[tuple[Path, int | None]]
) -> list[tuple[Path, int | None]]:
    """Put back an output a two-rename swap moved aside and did not replace."""
    if os.path.lexists(target):
        return leftovers
    aside = [  # .<tag>.old-<12 hex digits>, a folder (the tag may hold ".old-" too)
        item
        for item in leftovers
        if item[0].name[:-12].endswith(".old-") and item[1] is not None
    ]
    if not aside:
        return leftovers
    newest = max(aside, key=lambda item: item[0].stat().st_mtime_ns)
    newest[0].rename(target)
    _release([newest])
    return [item for item in leftovers if item is not newest]


def _release(leftovers: list[tuple[Path, int | None]]) -> None:
    for _, descriptor in leftovers:
        if descriptor is not None:
            os.close(descriptor)


def _remove(leftovers: list[tuple[Path, int | None]]) -> None:
    """Delete what killed runs left (still holding their locks while deleting)."""
    try:
        for path, descriptor in leftovers:
            if descriptor is None:  # not a folder (or unreadable): unlink what can be
                with contextlib.suppress(OSError):
                    path.unlink()
            else:
                shutil.rmtree(path, ignore_errors=True)
    finally:
        _release(leftovers)


@contextlib.contextmanager
def _parent_locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` itself for the block (a claim or a swap).

    Runs writing other outputs in the same folder wait for it, an instant. An
    unreadable folder, or a file system without directory locks, goes unlocked.
    """
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        descriptor = -1
    try:
        if descriptor >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        if descriptor >= 0:
            os.close(descriptor)  # releases the lock


def _swap_in(staging: Path, target: Path, tag: str) -> Path | None:
    """Put `staging` in place of `target`; return where the previous output went."""
    if not os.path.lexists(target):
        if not _renameat2(staging, target, _RENAME_NOREPLACE):
            if os.path.lexists(target):
                raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
            staging.rename(target)
        fault_point("swapped")
        return None
    if _renameat2(staging, target, _RENAME_EXCHANGE):
        fault_point("swapped")
        return staging  # now holds the previous output
    old = target.parent / f".{tag}.old-{uuid.uuid4().hex[:12]}"
    target.rename(old)
    staging.rename(target)
    fault_point("swapped")
    return old


def _renameat2(source: Path, target: Path, flags: int) -> bool:
    """Linux renameat2(2) with `flags`; False where it is not supported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    status = renameat2(
        _AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags
    )
    if status == 0:
        return True
    code = ctypes.get_errno()
    if code in {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP}:
        return False
    raise OSError(code, os.strerror(code), str(target))


@contextlib.contextmanager
def exclusive_lock(
    lock_path: Path, *, busy: str, unlockable: Callable[[OSError], OutputError]
) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path` (created if needed) or fail at once.

    The parse cache's lock: a file inside the cache folder (outputs are locked
    through their staging folders and leave no lock file).

    Args:
        lock_path: The lock file.
        busy: The message when another process holds the lock.
        unlockable: The error to raise when the lock file cannot be opened.

    Raises:
        OutputError: Another process holds the lock, or it cannot be taken.
    """
    try:  # (not waiting on a FIFO put there: only a regular file is a lock)
        handle = os.fdopen(
            os.open(
                lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, 0o644
            ),
            "a",
        )
    except OSError as exc:
        raise unlockable(exc) from exc
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise unlockable(OSError(errno.EINVAL, "the lock is not a regular file"))
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise OutputError(busy) from exc
        yield


def _write_bytes(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_file(path: Path) -> str:
    """Sync a file to disk; return the sha256 of its bytes (read back once).

    A large file is hashed on a second thread while this one waits for the disk
    (the spilled benchmark table, 1 GB: 0.9 s one after the other).
    """
    with path.open("rb", buffering=0) as handle:
        if os.fstat(handle.fileno()).st_size < _HASH_BESIDE_SYNC:
            os.fsync(handle.fileno())
            return sha256_of(handle)
        with ThreadPoolExecutor(1, thread_name_prefix="lbnorm-hash") as hasher:
            digest = hasher.submit(sha256_of, handle)
            os.fsync(handle.fileno())
            return digest.result()


#: Bytes from which a written file is hashed while it is synced (a thread each).
_HASH_BESIDE_SYNC = 32 << 20


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


def _output_error(out: Path, exc: OSError, *, is_replaced: bool = False) -> OutputError:
    reason = " ".join((exc.strerror or str(exc)).split())
    hint = {
        errno.ENOSPC: "free disk space or write elsewhere",
        errno.EACCES: "check the directory's permissions or choose another --out",
        errno.EPERM: "check the directory's permissions or choose another --out",
        errno.EROFS: "the file system is read-only; choose another --out",
        errno.EDQUOT: "the disk quota is exceeded; free space or write elsewhere",
        errno.EFBIG: "a file size limit (ulimit -f) was hit; raise it or write elsewhere",
        errno.ENAMETOOLONG: "a name in the path is too long; choose a shorter --out",
        errno.ENOTDIR: "a part of the path is a file, not a folder; check the path",
        errno.ELOOP: "the path has a loop of symbolic links; check the path",
    }.get(exc.errno or 0, "check the path and the disk")
    state = (
        "the new output is in place but may not be synced to disk"
        if is_replaced
        else "the previous output is unchanged"
    )
    msg = f"{out}: cannot write the output ({reason}); {state}.\nHint: {hint}."
    return OutputError(msg)


# --- beside the main tables: analysis tables, reports, the parse cache ---------------
# (lbnorm.analysis results, lbnorm diff/impact outputs, run reports, lbnorm.cache)


def add_tables(out: Path, tables: Mapping[str, pd.DataFrame | pa.Table]) -> list[Path]:
    """Write tables as ``<name>.parquet`` into a folder.

    Into an lbnorm output folder, the tables are added the way a run writes: the
    output is staged (its files hard-linked, the tables and an updated manifest
    listing them written), then swapped in whole, so a reader, a kill or another
    run sees it with or without every new table, never half. The next ``lbnorm
    run`` replaces the folder whole, these tables included. Anywhere else the
    folder is created if needed and each file is written atomically.

    Args:
        out: The folder.
        tables: Frames (column docs from ``attrs["column_docs"]``) or Arrow tables,
            by name without ``.parquet``.

    Returns:
        The files written.

    Raises:
        OutputError: A name is one of the main tables', the output is busy,
            read-only or holds files lbnorm did not write, or the disk refuses.
    """
    out = Path.cwd() / out
    if clash := sorted(
        set(tables)
        & {name.removesuffix(".parquet") for name in (*OUTPUT_FILES, _MANIFEST)}
    ):
        msg = f"{out}: cannot add tables named {clash}: the run writes those.\nHint: choose other names."
        raise OutputError(msg)
    target = _target(out)
    if not _is_own_output(target):
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise _output_error(out, exc) from exc
        return [
            write_parquet_atomically(out / f"{name}.parquet", _extra_arrow(table))
            for name, table in tables.items()  # a handful of tables
        ]
    with _staged(out) as stage:
        manifest, problem = _load_manifest(stage.target / _MANIFEST, whole=True)
        if manifest is None:
            msg = f"{out}: its {_MANIFEST} changed meanwhile and now {problem}.\nHint: run the command again."
            raise OutputError(msg)
        files = {f"{name}.parquet": table for name, table in tables.items()}
        _link_into(stage.target, stage.folder, skip={_MANIFEST, *files})
        outputs: dict[str, Any] = manifest["outputs"]
        extra = {  # what the run recorded for each file beyond rows and columns
            key
            for entry in outputs.values()
            if isinstance(entry, dict)
            for key in entry
            if key in {"sha256", "bytes"}
        }
        for name, table in files.items():
            path = stage.folder / name
            pq.write_table(_extra_arrow(table), path, compression="zstd")
            _fsync_file(path)
            metadata = pq.read_metadata(path)
            entry: dict[str, Any] = {
                "rows": metadata.num_rows,
                "columns": metadata.num_columns,
            }
            if "sha256" in extra:
                entry["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
            if "bytes" in extra:
                entry["bytes"] = path.stat().st_size
            outputs[name] = entry
        _write_bytes(stage.folder / _MANIFEST, manifest_bytes(manifest))
        _fsync_dir(stage.folder)
        stage.swap()
    return [out / name for name in files]


def _link_into(source: Path, folder: Path, *, skip: set[str]) -> None:
    """Hard-link `source`'s files into `folder` (copy where links are refused)."""
    for name in sorted(entry.name for entry in source.iterdir()):
        if name in skip:
            continue
        try:
            os.link(source / name, folder / name, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            shutil.copy2(source / name, folder / name)
            _fsync_file(folder / name)


#: Errors of link(2) that mean "copy instead".
_NO_LINKS = frozenset(
    {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}
)


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


def write_parts_atomically(path: Path, parts: Iterable[bytes]) -> Path:
    """Write one file from parts of its bytes (never all in memory) via a temporary sibling.

    Raises:
        OutputError: The disk refuses; no partial file remains.
    """

    def write(temporary: Path) -> None:
        with temporary.open("wb") as handle:
            for part in parts:
                handle.write(part)

    return _replace_atomically(path, write)


def _replace_atomically(path: Path, write: Callable[[Path], object]) -> Path:
    """Write `path` through a locked temporary sibling, removed on any failure.

    A symbolic link is written through. A temporary that a killed writer left
    (nobody holds its lock) is removed by the next write of the same file.
    """
    try:
        target = path.resolve() if path.is_symlink() else Path.cwd() / path
    except (OSError, RuntimeError) as exc:
        error = exc if isinstance(exc, OSError) else OSError(errno.ELOOP, str(exc))
        raise _output_error(path, error) from exc
    _check_name_length(path, target, what="file name")
    tag = _sibling_tag(target.name, _name_max(target.parent))
    temporary = target.with_name(f".{tag}.tmp-{uuid.uuid4().hex[:12]}")
    descriptor = -1
    try:
        with _parent_locked(target.parent):
            _remove_dead_temporaries(target.parent, tag)
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with contextlib.suppress(OSError):  # without file locks: best effort
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        write(temporary)
        _fsync_file(temporary)
        temporary.replace(target)
        _fsync_dir(target.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(exc, OutputError):
            raise
        raise _output_error(path, exc) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    return path


def _remove_dead_temporaries(folder: Path, tag: str) -> None:
    """Unlink temporaries of this file that no live writer holds."""
    pattern = re.compile(rf"\.{re.escape(tag)}\.tmp-[0-9a-f]{{12}}")
    with contextlib.suppress(OSError):
        for name in [entry.name for entry in folder.iterdir()]:
            if not pattern.fullmatch(name):
                continue
            try:
                descriptor = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if stat.S_ISREG(os.fstat(descriptor).st_mode):
                    (folder / name).unlink()
            except OSError:  # held by a live writer, or no locks here: leave it
                pass
            finally:
                os.close(descriptor)


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
