"""Writing lbnorm's outputs: a run's three tables, a ratings output, tables added to a folder.

The composition of the output side: what goes into each table's metadata and
the manifest (provenance), written through the transaction of
:mod:`lbnorm.output.transaction` (staging folder, lock, swap) in the encoding of
:mod:`lbnorm.output.tables`. An output folder holds ``subtasks.parquet``,
``benchmarks.parquet``, ``leaderboard.parquet`` and ``manifest.json`` (plus any
tables :func:`add_tables` listed in the manifest); ``docs/outputs.md`` describes
it for readers.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm._runtime import Threads, cancellable
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
from lbnorm.engines.result import Job, PartsOnDisk, Result, TableParts
from lbnorm.output.tables import (
    PartWriter,
    extra_arrow,
    pandas_metadata,
    write_output,
    write_parquet,
)
from lbnorm.output.transaction import (
    check_not_in_output,
    check_output_kind,
    check_own_file,
    checked_manifest_bytes,
    fsync_dir,
    fsync_file,
    is_own_output,
    link_into,
    load_manifest,
    resolve_target,
    staged,
    synced,
    write_bytes_atomically,
    write_staged,
    write_synced_bytes,
)
from lbnorm.suites import Suite

if TYPE_CHECKING:
    import pandas as pd  # only a caller's frames: never loaded here

__all__ = [
    "OUTPUT_FILES",
    "PAIRED_FILE",
    "add_tables",
    "metadata_input",
    "pandas_metadata",
    "provenance_of",
    "write_job",
    "write_result",
    "write_tables",
]

#: The tables of an output directory, by file name.
OUTPUT_FILES = ("subtasks.parquet", "benchmarks.parquet", "leaderboard.parquet")
#: The table ``lbnorm run --paired`` adds beside them.
PAIRED_FILE = "paired.parquet"
_MANIFEST = MANIFEST


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
    return write_staged(
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
        with PartWriter(job.subtask_schema, metadata, path) as parts:
            for part in job.subtask_parts():  # summed as they come
                parts.add(part)
            # the last part is encoded, then the file synced and hashed, on the
            # writer's thread while the job finishes here (both release the GIL)
            syncing = parts.close_then(lambda n_rows: synced(path, n_rows, n_columns))
            finished.append(finish(job.finish()))
            written = syncing.result()
        return _write_tables(finished[0], staging, subtasks=written)

    written = write_staged(out, fill, created_at=created_at)
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
            write_parquet(table, path)
            outputs[path.name] = synced(path, table.num_rows, table.num_columns)
        return {**manifest, "outputs": outputs}

    return write_staged(out, fill, created_at=created_at)


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


def suite_record(suite: Suite) -> dict[str, Any]:
    """What a manifest records about its suite: name, source as given and resolved, hash, text.

    The text lets the output be read back where the suite file moved or changed.
    """
    builtin = suite.source.startswith("builtin:")
    return {
        **suite.provenance(),
        "resolved": None if builtin else _absolute(suite.source),
        "text": None if builtin else suite.text,
    }


def _resolved(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """A recorded file with its absolute path beside the path as given (manifest only)."""
    return None if record is None else {**record, "resolved": _absolute(record["path"])}


def _absolute(path: str) -> str:
    """`path` made absolute against the working directory, without touching the disk."""
    return os.path.abspath(path)  # noqa: PTH100 - Path.resolve stats every part


def _write_inputs_table(files: pa.Table, path: Path) -> dict[str, Any]:
    """Write the catalog's rows by path, each with its absolute path, to `path`."""
    listing = files.take(pc.sort_indices(files["path"]))
    resolved = pa.array(
        [_absolute(name) for name in listing["path"].to_pylist()], pa.string()
    )
    listing = listing.append_column("resolved", resolved)
    pq.write_table(listing, path, compression="zstd")
    return synced(path, listing.num_rows, listing.num_columns)


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
        PAIRED_FILE: result.paired_output,
    }
    jobs = {
        name: (table, {**provenance, "lbnorm.table": name.removesuffix(".parquet")})
        for name in (*OUTPUT_FILES, PAIRED_FILE)
        if (table := tables[name]) is not None  # None: not asked for, or written
    }
    # Parquet encoding and fsync release the GIL: the tables are written side by
    # side (a core each), while this thread counts for the manifest below.
    with Threads(len(jobs), "table") as pool:
        futures = {
            name: pool.submit(write_output, table, metadata, folder / name)
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
    listed = {
        name: outputs[name] for name in (*OUTPUT_FILES, PAIRED_FILE) if name in outputs
    }
    listing: Any
    if len(inputs) > INLINE_INPUTS:  # a results tree: listed in a table beside
        listing = {"table": INPUTS_TABLE, "rows": len(inputs)}
        listed[INPUTS_TABLE] = _write_inputs_table(files, folder / INPUTS_TABLE)
    else:
        for row in inputs:
            row["resolved"] = _absolute(row["path"])
        listing = inputs if _holds_floats(files.schema) else Listing(inputs)
    return {
        "tool": "lbnorm",
        "version": provenance["lbnorm.version"],
        "suite": suite_record(suite),
        "options": result.options.to_manifest(),
        "inputs": listing,
        "outputs": listed,
        "metadata_table": _resolved(metadata_input(result.options)),
        "counts": counts,
        # pooled by the sample sizes the input gave (a --limit run): not comparable
        "pooled_with_other_sizes": resized,
    } | _input_notes(files)


def _input_notes(files: pa.Table) -> dict[str, Any]:
    """What the readers noted beyond the catalog, for the manifest (absent when none).

    ``reruns``: each variant read from several results files with superseded
    files or older scores that differ; ``rejected``: each results file a cached
    run rejected, with the variant it held and whether that variant is lost;
    ``warnings``: what the summary warned of, every one (the summary shows the
    first few).
    """
    from lbnorm.readers import (  # the catalog's notes
        input_rejections,
        input_reruns,
        input_warnings,
    )

    notes: dict[str, Any] = {}
    if reruns := input_reruns(files):
        notes["reruns"] = reruns
    if rejected := input_rejections(files):
        notes["rejected"] = rejected
    if warnings := input_warnings(files):
        notes["warnings"] = warnings
    return notes


# (lbnorm.analysis results, lbnorm diff/impact outputs, run reports, lbnorm.cache)


def add_tables(
    out: Path,
    tables: Mapping[str, pd.DataFrame | pa.Table],
    *,
    sources: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write tables as ``<name>.parquet`` into a folder, through the output transaction.

    Into an lbnorm output folder, the tables are added the way a run writes: the
    output is staged (its files hard-linked, the tables and an updated manifest
    listing them written), then swapped in whole, so a reader, a kill or another
    run sees it with or without every new table, never half. The next ``lbnorm
    run`` replaces the folder whole, these tables included. A new or empty
    folder becomes an output of its own (``kind`` ``analysis``, with a manifest
    recording `sources`), written the same way; a folder holding anything else
    is refused and left as it is.

    Args:
        out: The folder.
        tables: Frames (column docs from ``attrs["column_docs"]``) or Arrow tables,
            by name without ``.parquet``.
        sources: What the tables were computed from (the command, the outputs
            and suites it read), recorded in the manifest.

    Returns:
        The files written.

    Raises:
        OutputError: A name is one of the main tables', the output is busy,
            read-only or holds files lbnorm did not write, or the disk refuses.
    """
    out = Path.cwd() / out
    reserved = (*OUTPUT_FILES, PAIRED_FILE, _MANIFEST, INPUTS_TABLE)
    if clash := sorted(
        set(tables) & {name.removesuffix(".parquet") for name in reserved}
    ):
        msg = f"{out}: cannot add tables named {clash}: the run writes those.\nHint: choose other names."
        raise OutputError(msg)
    target = resolve_target(out)
    record = {"sources": dict(sources or {})}
    if not is_own_output(target):
        return _write_analysis(out, target, tables, record)
    with cancellable(), staged(out) as stage:
        manifest, problem = load_manifest(stage.target / _MANIFEST, whole=True)
        if manifest is None:
            msg = f"{out}: its {_MANIFEST} changed meanwhile and now {problem}.\nHint: run the command again."
            raise OutputError(msg)
        if manifest.get("kind") == "analysis":  # the latest command's sources
            manifest.update(record, environment=environment())
        files = {f"{name}.parquet": table for name, table in tables.items()}
        link_into(stage.target, stage.folder, skip={_MANIFEST, *files})
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
            pq.write_table(extra_arrow(table), path, compression="zstd")
            fsync_file(path)
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
        write_synced_bytes(
            stage.folder / _MANIFEST, checked_manifest_bytes(out, manifest)
        )
        fsync_dir(stage.folder)
        stage.swap()
    return [out / name for name in files]


def _write_analysis(
    out: Path,
    target: Path,
    tables: Mapping[str, pd.DataFrame | pa.Table],
    record: dict[str, Any],
) -> list[Path]:
    """Write `tables` as a new output of kind ``analysis`` (staged, then swapped in)."""

    def fill(staging: Path) -> dict[str, Any]:
        if is_own_output(target):  # an output came meanwhile: not replaced whole
            msg = f"{out}: an lbnorm output appeared there meanwhile.\nHint: run the command again."
            raise OutputError(msg)
        outputs = {}
        for name, table in tables.items():
            path = staging / f"{name}.parquet"
            arrow = extra_arrow(table)
            pq.write_table(arrow, path, compression="zstd")
            outputs[path.name] = synced(path, arrow.num_rows, arrow.num_columns)
        return {
            "tool": "lbnorm",
            "kind": "analysis",
            "version": lbnorm_version(),
            "outputs": outputs,
            **record,
        }

    write_staged(out, fill, created_at=None)
    return [out / f"{name}.parquet" for name in tables]


def write_failures(failures: pa.Table, path: str | Path) -> None:
    """Write a run's validation failures to a CSV or Parquet file, atomically.

    The format is the file's suffix's (``.csv``; ``.parquet`` or ``.pq``);
    the file is replaced whole (written beside it, then renamed), and an
    existing file lbnorm did not write is refused, as for ``--report``.

    Args:
        failures: The failure rows (:attr:`lbnorm.core.errors.ValidationError.failure_table`).
        path: The file.

    Raises:
        OutputError: The file cannot be written, or is not one lbnorm wrote.
    """
    _write_table_file(failures, Path(path), kind="failures", option="--failures")


def write_scores_file(
    scores: pa.Table, path: str | Path, *, provenance: dict[str, str]
) -> int:
    """Write scores in the long contract to one Parquet file, atomically (``lbnorm convert``).

    What the Dask engine reads (Parquet only): one row per variant and
    subtask, the :data:`~lbnorm.core.schemas.SCORES` columns.

    Args:
        scores: The rows.
        path: The ``.parquet`` file; one lbnorm did not write is refused.
        provenance: Key-value metadata for the file (the suite, the inputs).

    Returns:
        The file's size in bytes.

    Raises:
        OptionsError: Not a ``.parquet`` file, or inside an output folder.
        OutputError: The file cannot be written, or is not one lbnorm wrote.
    """
    check_scores_target(path)
    marked = scores.replace_schema_metadata(
        {key.encode(): value.encode() for key, value in provenance.items()}
    )
    return _write_table_file(marked, Path(path), kind="scores", option="--out")


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
    check_not_in_output(path, option="--out")
    check_own_file(path, option="--out", is_ours=is_scores_file)


def _write_table_file(table: pa.Table, target: Path, *, kind: str, option: str) -> int:
    """A table as one CSV or Parquet file (by suffix), marked as lbnorm's `kind`."""
    import io

    check_own_file(target, option=option, is_ours=_is_table_file(kind))
    sink = io.BytesIO()
    if target.suffix.lower() == ".csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, sink)
    else:
        metadata = {**(table.schema.metadata or {}), _KIND_KEY: kind.encode()}
        pq.write_table(
            table.replace_schema_metadata(metadata), sink, compression="zstd"
        )
    data = sink.getvalue()
    write_bytes_atomically(target, data)
    return len(data)


#: How lbnorm's failures files are recognized: a CSV's header, a Parquet footer's key.
_FAILURES_HEADER = b'"check","source","row","column","value"'
_KIND_KEY = b"lbnorm.file"


def _is_table_file(kind: str) -> Callable[[bytes, bytes], bool]:
    """Whether a file's first and last bytes are a `kind` file lbnorm wrote.

    A Parquet file's footer holds the key and its value as Thrift writes them
    (the value's field header, 0x18, and its length before it).
    """
    mark = _KIND_KEY + b"\x18" + bytes([len(kind)]) + kind.encode()

    def is_ours(head: bytes, tail: bytes) -> bool:
        if kind == "failures" and head.startswith(_FAILURES_HEADER):
            return True
        return head.startswith(b"PAR1") and mark in tail

    return is_ours


def is_failures_file(head: bytes, tail: bytes) -> bool:
    r"""Whether a file's first and last bytes are a failures file lbnorm wrote.

    Examples:
        >>> is_failures_file(b'"check","source","row","column","value","model"', b"")
        True
        >>> is_failures_file(b"PAR1...", b"...lbnorm.file\x18\x08failures...PAR1")
        True
    """
    return _is_table_file("failures")(head, tail)


def is_scores_file(head: bytes, tail: bytes) -> bool:
    """Whether a file's first and last bytes are a scores file ``lbnorm convert`` wrote."""
    return _is_table_file("scores")(head, tail)
