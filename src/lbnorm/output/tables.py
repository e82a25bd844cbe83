"""The Parquet encoding of lbnorm's tables: what each column is written with, and why.

Parquet bytes depend only on the data, the suite and the inputs' hashes; the
creation time lives in ``manifest.json`` alone. Every table carries a
``pandas`` schema entry so that pandas reads integer columns with nulls as
nullable integers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from lbnorm._runtime import Threads
from lbnorm.core.version import lbnorm_version
from lbnorm.engines.result import TableParts, UniquePerPart
from lbnorm.output.transaction import synced

if TYPE_CHECKING:
    import pandas as pd  # only a caller's frames: never loaded here

__all__ = [
    "PartWriter",
    "extra_arrow",
    "pandas_metadata",
    "write_output",
    "write_parquet",
    "write_parts",
]

_T = TypeVar("_T")


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


def write_output(
    table: pa.Table | TableParts, metadata: dict[str, str], path: Path
) -> dict[str, Any]:
    """Write and sync one table; return its rows, columns and sha256."""
    if isinstance(table, pa.Table):
        table = table.replace_schema_metadata(
            {**metadata, **pandas_metadata(table.schema)}
        )
        write_parquet(table, path)
        return synced(path, table.num_rows, table.num_columns)
    plain = table.unique_columns if isinstance(table, UniquePerPart) else ()
    n_rows = write_parts(table.schema, table.parts(), metadata, path, plain=plain)
    return synced(path, n_rows, len(table.schema))


def write_parts(
    schema: pa.Schema,
    parts: Iterator[pa.Table],
    metadata: dict[str, str],
    path: Path,
    *,
    plain: tuple[str, ...] = (),
) -> int:
    """Write a table a part (one row group) at a time (:class:`PartWriter`); return its rows."""
    with PartWriter(schema, metadata, path, plain=plain) as writer:
        for part in parts:
            writer.add(part)
        return writer.close_then(lambda n_rows: n_rows).result()


class PartWriter:
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
        self._thread = Threads(1, "writer")
        self._pending: Future[None] | None = None
        self._n_rows = 0

    def __enter__(self) -> PartWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._thread.close(cancel=True)
        finally:
            self._writer.close()  # (idempotent: close_then closed it already)

    def add(self, part: pa.Table) -> None:
        """Encode `part` on the thread once the part before is written."""
        self._wait()
        if part.num_rows:  # a benchmark nobody has: no empty row group
            self._pending = self._thread.submit(
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

        return self._thread.submit(close)

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
#: Larger batches encode faster; the bytes written are the same.
_WRITE_BATCH_ROWS = 65_536


def write_parquet(table: pa.Table, path: Path) -> None:
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


def extra_arrow(table: pd.DataFrame | pa.Table) -> pa.Table:
    """An added table as Arrow: a frame converted, its ``attrs["column_docs"]`` as field docs."""
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
