"""SQL over an output directory: DuckDB views with stable names, results in any format.

An output directory becomes an in-memory DuckDB database of views over its
Parquet files (nothing is copied)::

    scores       subtasks.parquet     one row per (variant, subtask)
    subtasks     the same (the file's name)
    benchmarks   benchmarks.parquet   one row per (variant, benchmark)
    leaderboard  leaderboard.parquet  one row per variant, best first
    metadata     the metadata table given, else the leaderboard's metadata columns
    columns      every view's columns, types and docs (``FROM columns``)

``attach={"old": other_out}`` adds the same views under a schema (``old.leaderboard``)
to compare two outputs. Column names with spaces are quoted: ``"MATH Lvl 5"``.
DuckDB is an optional extra (``pip install 'lbnorm[sql]'``); it is imported only
when a query runs. The table readers here (:func:`read_output_table`) need only
pyarrow and serve :mod:`lbnorm.show` and :mod:`lbnorm.report`.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Literal

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm.errors import LbnormError
from lbnorm.metadata import read_metadata
from lbnorm.outdir import check_output, metadata_columns
from lbnorm.schemas import KEY_COLUMNS
from lbnorm.terminal import format_table

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "QUERY_FORMATS",
    "VIEWS",
    "OutputTable",
    "QueryFormat",
    "connect",
    "describe_views",
    "format_result",
    "infer_format",
    "run_query",
]

#: How a query result is printed or saved.
QueryFormat = Literal["table", "csv", "json", "parquet"]
QUERY_FORMATS: tuple[QueryFormat, ...] = ("table", "csv", "json", "parquet")

#: An output table, by the name of its file without ``.parquet``.
OutputTable = Literal["subtasks", "benchmarks", "leaderboard"]

#: View name -> output file.
VIEWS: dict[str, str] = {
    "scores": "subtasks.parquet",
    "subtasks": "subtasks.parquet",
    "benchmarks": "benchmarks.parquet",
    "leaderboard": "leaderboard.parquet",
}

_SUFFIX_FORMATS: dict[str, QueryFormat] = {
    ".csv": "csv",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SQL_HINT = (
    "the views are scores, benchmarks, leaderboard and metadata; "
    "`lbnorm query OUT 'FROM columns'` lists their columns; "
    'quote names with spaces: "MATH Lvl 5"'
)


def connect(
    out: str | Path,
    *,
    metadata: str | Path | None = None,
    attach: Mapping[str, str | Path] | None = None,
) -> duckdb.DuckDBPyConnection:
    """Open an in-memory DuckDB database with views over an output directory.

    Args:
        out: The output directory.
        metadata: A metadata table (CSV/Parquet) to register as ``metadata``;
            by default the leaderboard's own metadata columns, if any.
        attach: Other output directories by schema name, e.g. ``{"old": path}``
            for ``old.leaderboard``.

    Returns:
        The connection.

    Raises:
        LbnormError: DuckDB is not installed, or a schema name is invalid.
        InputError: A directory is not an lbnorm output, or the metadata
            table is unreadable.
    """
    connection: duckdb.DuckDBPyConnection = _import_duckdb().connect()
    _create_views(connection, check_output(out), schema=None)
    if metadata is not None:
        connection.register("metadata", read_metadata(metadata))
    elif extras := metadata_columns(out):
        columns = ", ".join(_quote(name) for name in [*KEY_COLUMNS, *extras])
        connection.execute(f"CREATE VIEW metadata AS SELECT {columns} FROM leaderboard")
    for schema, other in (attach or {}).items():
        if not _SCHEMA_NAME.fullmatch(schema) or schema.lower() in {"main", "temp"}:
            msg = (
                f"cannot attach {other} as {schema!r}: not a plain SQL name.\n"
                "Hint: use letters, digits and _ (e.g. old=OUT_DIR)."
            )
            raise LbnormError(msg)
        connection.execute(f"CREATE SCHEMA {schema}")
        _create_views(connection, check_output(other), schema=schema)
    connection.register("columns", _describe(connection, check_output(out)))
    return connection


def run_query(
    out: str | Path,
    sql: str,
    *,
    metadata: str | Path | None = None,
    attach: Mapping[str, str | Path] | None = None,
) -> pa.Table:
    """Run SQL over an output directory's views; return the result as Arrow.

    Decimals become float64 and float NaN becomes null, so every format shows
    the same values.

    Args:
        out: The output directory.
        sql: One SQL statement (DuckDB dialect) returning rows.
        metadata: See :func:`connect`.
        attach: See :func:`connect`.

    Returns:
        The result table.

    Raises:
        LbnormError: The SQL fails (DuckDB's message and a hint), or DuckDB is
            not installed.
    """
    errors = _import_duckdb().Error
    connection = connect(out, metadata=metadata, attach=attach)
    try:
        # None for statements without rows (the stubs do not say so)
        relation: duckdb.DuckDBPyRelation | None = connection.sql(sql)
        if relation is None:
            msg = f"the statement returned no rows to show: {sql.strip()[:80]!r}.\nHint: write a SELECT (views are read-only)."
            raise LbnormError(msg)
        table = relation.to_arrow_table()
    except errors as exc:
        msg = f"query failed: {exc}\nHint: {_SQL_HINT}."
        raise LbnormError(msg) from exc
    finally:
        connection.close()
    return _clean(table)


def describe_views(
    out: str | Path,
    *,
    metadata: str | Path | None = None,
    attach: Mapping[str, str | Path] | None = None,
) -> pd.DataFrame:
    """List every view's columns: ``view``, ``column``, ``type`` and ``doc``.

    The same table is the view ``columns`` in every query (``FROM columns``).

    Raises:
        LbnormError: DuckDB is not installed.
        InputError: Not an output directory.
    """
    connection = connect(out, metadata=metadata, attach=attach)
    try:
        columns: pd.DataFrame = connection.sql("FROM columns").df()
    finally:
        connection.close()
    return columns


def _describe(connection: duckdb.DuckDBPyConnection, out: Path) -> pd.DataFrame:
    columns: pd.DataFrame = connection.sql(
        "SELECT CASE WHEN table_schema = 'main' THEN '' ELSE table_schema || '.' END"
        " || table_name AS view, column_name AS column, data_type AS type,"
        " table_schema = 'main' AS is_main, ordinal_position"
        " FROM information_schema.columns WHERE table_name <> 'subtasks'"
        " ORDER BY is_main DESC, table_schema, CASE table_name WHEN 'scores' THEN 0"
        " WHEN 'benchmarks' THEN 1 WHEN 'leaderboard' THEN 2 ELSE 3 END,"
        " ordinal_position"
    ).df()
    docs = _column_docs(out)
    doc = [
        docs.get((view.split(".")[-1], column), "")
        for view, column in zip(columns["view"], columns["column"], strict=True)
    ]
    return columns.assign(doc=doc)[["view", "column", "type", "doc"]]


def infer_format(output: str | Path | None) -> QueryFormat:
    """Return the format an output file's suffix implies; ``table`` otherwise.

    Examples:
        >>> infer_format("top.csv"), infer_format(None)
        ('csv', 'table')
    """
    if output is None:
        return "table"
    return _SUFFIX_FORMATS.get(Path(output).suffix.lower(), "table")


def format_result(
    table: pa.Table, fmt: QueryFormat, *, max_rows: int = 100, digits: int = 2
) -> bytes:
    r"""Serialize a query result: an aligned text table, CSV, JSON or Parquet.

    Args:
        table: The result (see :func:`run_query`).
        fmt: ``table`` (floats rounded to `digits`, at most `max_rows` rows and a
            row count), ``csv`` (full precision, header row), ``json`` (an array
            of objects) or ``parquet``.
        max_rows: Rows shown in ``table`` format.
        digits: Decimals shown in ``table`` format.

    Returns:
        The bytes to print or save.

    Examples:
        >>> result = pa.table({"model": ["a/b", "c/d"], "MATH": [40.125, None]})
        >>> print(format_result(result, "table").decode(), end="")
        model   MATH
        a/b    40.12
        c/d
        (2 rows)
        >>> format_result(result, "json").decode()
        '[{"model": "a/b", "MATH": 40.125}, {"model": "c/d", "MATH": null}]\n'
    """
    if fmt == "parquet":
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        return buffer.getvalue()
    frame: pd.DataFrame = table.to_pandas(types_mapper=pd.ArrowDtype)
    if fmt == "csv":
        return str(frame.to_csv(index=False)).encode()
    if fmt == "json":
        records = table.to_pylist()  # the result of a query: rows are the output
        return (json.dumps(records, default=str, ensure_ascii=False) + "\n").encode()
    shown = (
        format_table(frame.head(max_rows), digits=digits) if len(frame.columns) else ""
    )
    more = (
        f"... {len(frame) - max_rows:,} more rows (add LIMIT, or --format csv for all)\n"
        if len(frame) > max_rows
        else ""
    )
    return f"{shown}\n{more}({len(frame):,} row{'s' * (len(frame) != 1)})\n".encode()


def _create_views(
    connection: duckdb.DuckDBPyConnection, out: Path, *, schema: str | None
) -> None:
    prefix = f"{schema}." if schema else ""
    for view, file in VIEWS.items():
        if not (out / file).is_file():  # subtasks.parquet under --no-subtasks
            continue
        path = str((out / file).resolve()).replace("'", "''")
        connection.execute(
            f"CREATE VIEW {prefix}{view} AS SELECT * FROM read_parquet('{path}')"
        )


def _column_docs(out: Path) -> dict[tuple[str, str], str]:
    docs: dict[tuple[str, str], str] = {}
    for view, file in VIEWS.items():
        if not (out / file).is_file():
            continue
        for field in pq.read_schema(out / file):
            metadata = field.metadata or {}
            docs[view, field.name] = metadata.get(b"doc", b"").decode()
    return docs


def _clean(table: pa.Table) -> pa.Table:
    """Decimals to float64, float NaN to null."""
    for index, field in enumerate(table.schema):
        column = table.column(index)
        if pa.types.is_decimal(field.type):
            column = column.cast(pa.float64())
        if pa.types.is_floating(column.type):
            column = pc.if_else(pc.is_nan(column), None, column)
        if column is not table.column(index):
            table = table.set_column(index, field.with_type(column.type), column)
    return table


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _import_duckdb() -> ModuleType:
    try:
        import duckdb
    except ImportError as exc:
        msg = (
            "SQL queries need DuckDB, which is not installed.\n"
            "Hint: pip install 'lbnorm[sql]' (or pip install duckdb)."
        )
        raise LbnormError(msg) from exc
    return duckdb
