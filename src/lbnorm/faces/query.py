"""SQL over an output directory: its tables under stable names, read-only, results in any format.

An output directory becomes an in-memory DuckDB database whose views are its
Parquet files, read lazily by pyarrow (only the columns and row groups a query
touches)::

    scores       subtasks.parquet     one row per (variant, subtask)
    subtasks     the same (the file's name)
    benchmarks   benchmarks.parquet   one row per (variant, benchmark)
    leaderboard  leaderboard.parquet  one row per variant, best first
    metadata     the metadata table given, else the leaderboard's metadata columns
    columns      every view's columns, types and docs (``FROM columns``)

A ratings output (``lbnorm arena``) has the views ``ratings`` (ratings.parquet),
``win_rates`` (win_rates.parquet) and ``columns``.

``attach={"old": other_out}`` adds the same views under a schema (``old.leaderboard``)
to compare two outputs. Column names with spaces are quoted: ``"MATH Lvl 5"``.

A query reads these tables and nothing else: the database is opened with
DuckDB's ``enable_external_access = false`` (no file is read or written, so no
``COPY ... TO``, ``ATTACH`` of a file, ``read_text``/``read_csv``/``glob`` on
paths, ``EXPORT DATABASE``), no extension is installed or loaded on demand, no
Python variable is scanned, and ``lock_configuration = true`` keeps it so (a
``SET`` is refused). The tables are registered before that, as pyarrow datasets,
so nothing is copied. A refused statement is a :class:`~lbnorm.core.errors.LbnormError`
(exit 1) that says so; the one way to save a result is the command line's
``--output FILE`` (never inside an output directory).

DuckDB is an optional extra (``pip install '.[sql]'`` from a clone); it is
imported only when a query runs. Each output is opened once
(:class:`lbnorm.output.reader.Output`), and its views read the files it opened.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm._runtime import beside
from lbnorm.core.errors import InputError, LbnormError, OptionsError
from lbnorm.core.schemas import KEY_COLUMNS
from lbnorm.engines.metadata import read_metadata
from lbnorm.faces.terminal import format_table, printable
from lbnorm.output.reader import Output

if TYPE_CHECKING:
    import duckdb
    import pyarrow.dataset as ds

__all__ = [
    "JSON_ROWS",
    "RATINGS_VIEWS",
    "VIEWS",
    "QueryFormat",
    "format_result",
    "infer_format",
    "result_parts",
    "run_query",
]

#: How a query result is printed or saved.
QueryFormat = Literal["table", "csv", "json", "parquet"]

#: View name -> output file.
VIEWS: dict[str, str] = {
    "scores": "subtasks.parquet",
    "subtasks": "subtasks.parquet",
    "benchmarks": "benchmarks.parquet",
    "leaderboard": "leaderboard.parquet",
}

#: View name -> file, for a ratings output (``lbnorm arena``).
RATINGS_VIEWS: dict[str, str] = {
    "ratings": "ratings.parquet",
    "win_rates": "win_rates.parquet",
}

#: The database a query runs in: it reaches nothing beyond the tables registered
#: in it, and no statement can change that (DuckDB "Securing DuckDB").
_LOCKED_DOWN: dict[str, str | bool] = {
    "enable_external_access": False,  # no files (COPY, ATTACH, read_*), no network
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "python_enable_replacements": False,  # no scans of Python variables
    "lock_configuration": True,  # and no SET undoes any of it
}
_SUFFIX_FORMATS: dict[str, QueryFormat] = {
    ".csv": "csv",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HIDDEN = "_lbnorm_"  # registered tables behind an attached schema's views
_REGISTERED = re.compile(r"registered as '([^']+)'")
_SQL_HINT = (
    "the views are scores, benchmarks, leaderboard and metadata; "
    "`lbnorm query OUT 'FROM columns'` lists their columns; "
    'quote names with spaces: "MATH Lvl 5"'
)
_RATINGS_SQL_HINT = (
    "a ratings output's views are ratings and win_rates; "
    "`lbnorm query OUT 'FROM columns'` lists their columns"
)
_REFUSED_HINT = (
    "a query reads the output's tables only (no files, network, extensions or "
    "settings); save a result with --output FILE, and query another output "
    "directory with --attach NAME=DIR"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Source:
    """One registered table: its view, the name DuckDB knows it by, its file and output.

    The output is held open as long as its table is registered: the dataset
    reads the file it opened (that version of the folder).
    """

    view: str
    registered: str
    path: Path
    dataset: ds.Dataset
    output: Output


def run_query(
    out: str | Path,
    sql: str,
    *,
    metadata: str | Path | None = None,
    attach: Mapping[str, str | Path] | None = None,
) -> pa.Table:
    """Run SQL over an output directory's tables; return the result as Arrow.

    Decimals become float64 and float NaN becomes null, so every format shows
    the same values.

    Args:
        out: The output directory.
        sql: SQL (DuckDB dialect) whose last statement returns rows.
        metadata: A metadata table (CSV/Parquet) to register as ``metadata``;
            by default the leaderboard's own metadata columns, if any.
        attach: Other output directories by schema name, e.g. ``{"old": path}``
            for ``old.leaderboard``.

    Returns:
        The result table.

    Raises:
        LbnormError: The SQL fails (DuckDB's message and a hint), it tries to
            reach beyond the tables (a file, the network, an extension, a
            setting: refused), DuckDB is not installed, or a schema name is invalid.
        InputError: A directory is not an lbnorm output, a table in it (also
            while scanned) or the metadata table is unreadable.
    """
    duckdb_module = _import_duckdb()
    connection, sources = _connect(out, metadata=metadata, attach=attach)
    try:
        table = _interruptible(connection, sql)
    except duckdb_module.Error as exc:
        raise _query_error(exc, duckdb_module, sources) from exc
    finally:
        connection.close()
    return _clean(table)


def _interruptible(connection: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    """Run `sql` on a thread of its own; a Ctrl-C or SIGTERM interrupts DuckDB.

    DuckDB holds the calling thread until the query ends, so a signal's
    handler would not run for as long (minutes for a large join). The main
    thread waits instead, where a signal lands at once: it then interrupts the
    query, waits for DuckDB to stop, and the interrupt goes on as raised.
    """

    def fetch() -> pa.Table:
        # None for statements without rows (the stubs do not say so)
        relation: duckdb.DuckDBPyRelation | None = connection.sql(sql)
        if relation is None:
            msg = (
                f"the statement returned no rows to show: {sql.strip()[:80]!r}.\n"
                "Hint: end with a SELECT (the tables are read-only)."
            )
            raise LbnormError(msg)
        return relation.to_arrow_table()

    running = beside(fetch)
    try:
        return running.result()
    except KeyboardInterrupt:  # (SIGTERM too: the command line raises it so)
        connection.interrupt()
        while not running.done():  # the connection is closed only once it stops
            with contextlib.suppress(KeyboardInterrupt):
                concurrent.futures.wait([running])
        raise


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
    table: pa.Table,
    fmt: QueryFormat,
    *,
    max_rows: int = 100,
    digits: int | None = None,
    escape: bool = False,
) -> bytes:
    r"""Serialize a query result: an aligned text table, CSV, JSON or Parquet.

    ``table`` is for reading: values as the query returned them (a float in its
    shortest exact form, so ``round(x, 3)`` shows 3 decimals), control
    characters escaped (a model name cannot drive the terminal), duplicate
    column names (a join's ``n.rank, o.rank``) shown as they are. ``csv``,
    ``json`` and ``parquet`` are data, written faithfully: a name's bytes as
    they are, unless `escape` (the command line sets it when printing to a
    terminal). JSON objects and Parquet columns need distinct names.

    Args:
        table: The result (see :func:`run_query`).
        fmt: ``table`` (at most `max_rows` rows and a row count), ``csv`` (full
            precision, header row), ``json`` (an array of objects) or ``parquet``.
        max_rows: Rows shown in ``table`` format.
        digits: Decimals for every float in ``table`` format; None (the
            default) shows each float as the query returned it.
        escape: Escape control characters in ``csv`` and ``json`` too.

    Returns:
        The bytes to print or save.

    Raises:
        LbnormError: ``json`` or ``parquet`` with duplicate column names.

    Examples:
        >>> result = pa.table({"model": ["a/b", "c/d"], "MATH": [40.125, None]})
        >>> print(format_result(result, "table").decode(), end="")
        model    MATH
        a/b    40.125
        c/d
        (2 rows)
        >>> print(format_result(result, "table", digits=1).decode(), end="")
        model  MATH
        a/b    40.1
        c/d
        (2 rows)
        >>> format_result(result, "json").decode()
        '[{"model": "a/b", "MATH": 40.125}, {"model": "c/d", "MATH": null}]\n'
    """
    if fmt == "json":
        return b"".join(result_parts(table, fmt, escape=escape))
    if fmt == "parquet":
        _check_distinct_names(table, fmt)
        buffer = io.BytesIO()
        pq.write_table(table, buffer, compression="zstd")
        return buffer.getvalue()
    if fmt != "csv":  # table
        return _format_text_table(table, max_rows=max_rows, digits=digits).encode()
    import pandas as pd  # CSV as pandas writes it: full precision, quoted as needed

    frame: pd.DataFrame = table.to_pandas(types_mapper=pd.ArrowDtype)
    text = str(frame.to_csv(index=False, lineterminator="\n"))
    return (printable(text, keep_newlines=True) if escape else text).encode()


#: Rows of a query result turned into JSON at a time.
JSON_ROWS = 1 << 15


def result_parts(
    table: pa.Table, fmt: QueryFormat, *, escape: bool = False, **options: Any
) -> Iterator[bytes]:
    r""":func:`format_result`'s bytes in parts: ``json`` a slice of rows at a time.

    A JSON array made whole would hold all its rows as Python objects at once;
    in slices of :data:`JSON_ROWS` rows only one slice is. Other
    formats come as one part.

    Examples:
        >>> result = pa.table({"model": ["a/b", "c/d"], "MATH": [40.125, None]})
        >>> b"".join(result_parts(result, "json"))
        b'[{"model": "a/b", "MATH": 40.125}, {"model": "c/d", "MATH": null}]\n'
    """
    if fmt != "json":
        yield format_result(table, fmt, escape=escape, **options)
        return
    _check_distinct_names(table, fmt)
    yield b"["
    for start in range(0, table.num_rows, JSON_ROWS):
        records = table.slice(start, JSON_ROWS).to_pylist()
        text = json.dumps(records, default=str, ensure_ascii=False)[1:-1]
        text = (", " if start else "") + text
        yield (printable(text, keep_newlines=True) if escape else text).encode()
    yield b"]\n"


def _connect(
    out: str | Path,
    *,
    metadata: str | Path | None,
    attach: Mapping[str, str | Path] | None,
) -> tuple[duckdb.DuckDBPyConnection, list[_Source]]:
    """The locked-down connection and what is registered in it."""
    attach = dict(attach or {})
    _check_schema_names(attach)  # every name checked before any work
    output = _queryable(out)
    sources = _open_tables(output, schema=None)
    attached = {
        schema: _open_tables(_queryable(other), schema=schema)
        for schema, other in attach.items()
    }
    extra_metadata = read_metadata(metadata) if metadata is not None else None
    connection: duckdb.DuckDBPyConnection = _import_duckdb().connect(
        ":memory:", config=_LOCKED_DOWN
    )
    for source in sources:
        connection.register(source.registered, source.dataset)
    if extra_metadata is not None:
        connection.register("metadata", extra_metadata)
    elif output.kind == "leaderboard" and (extras := output.metadata_columns()):
        columns = ", ".join(_quote(name) for name in [*KEY_COLUMNS, *extras])
        connection.execute(f"CREATE VIEW metadata AS SELECT {columns} FROM leaderboard")
    for schema, tables in attached.items():
        try:
            connection.execute(f"CREATE SCHEMA {schema}")
        except _import_duckdb().Error as exc:  # a keyword DuckDB reserves
            msg = (
                f"--attach {schema}={attach[schema]}: DuckDB cannot name a schema "
                f"{schema!r} ({_first_line(str(exc))}).\n{_SCHEMA_HINT}"
            )
            raise OptionsError(msg) from None
        for source in tables:
            connection.register(source.registered, source.dataset)
            connection.execute(
                f"CREATE VIEW {schema}.{source.view} AS SELECT * FROM {source.registered}"
            )
        sources += tables
    connection.register("columns", _describe(connection, sources))
    return connection, sources


#: Schema names DuckDB keeps for itself (with ``main`` and ``temp``).
_TAKEN_SCHEMAS = frozenset(
    {"main", "temp", "system", "memory", "information_schema", "pg_catalog"}
)
_SCHEMA_HINT = "Hint: use another plain name: letters, digits and _ (e.g. old=OUT_DIR)."


def _check_schema_names(attach: Mapping[str, str | Path]) -> None:
    """Refuse a schema name that is not a plain SQL name, DuckDB's own, or repeated."""
    seen: dict[str, str] = {}
    for schema, other in attach.items():
        if not _SCHEMA_NAME.fullmatch(schema):
            why = "not a plain SQL name"
        elif schema.lower() in _TAKEN_SCHEMAS:
            why = "a name DuckDB keeps for its own schema"
        elif schema.lower() in seen:  # SQL names ignore case
            why = f"the same name as --attach {seen[schema.lower()]} (SQL ignores case)"
        else:
            seen[schema.lower()] = f"{schema}={other}"
            continue
        msg = f"--attach {schema}={other}: cannot attach as {schema!r}: {why}.\n{_SCHEMA_HINT}"
        raise OptionsError(msg)


def _queryable(out: str | Path) -> Output:
    """An output of either kind with views (a leaderboard's or ratings)."""
    output = Output.open(out)
    return output if output.kind == "ratings" else Output.open(output, "leaderboard")


def _open_tables(out: Output, *, schema: str | None) -> list[_Source]:
    """Each table of an output as a pyarrow dataset (its footer read, no data)."""
    import pyarrow.dataset as ds  # only queries need datasets

    opened: dict[str, ds.Dataset] = {}
    sources = []
    views = RATINGS_VIEWS if out.kind == "ratings" else VIEWS
    for view, file in views.items():
        if not out.has(file):  # subtasks.parquet under --no-subtasks
            continue
        path = out.path / file
        if file not in opened:
            try:
                opened[file] = ds.dataset(out.location(file), format="parquet")
            except (pa.ArrowException, OSError) as exc:
                raise _unreadable(path, str(exc)) from exc
        name = view if schema is None else f"{_HIDDEN}{schema}_{view}"
        sources.append(
            _Source(
                view=view, registered=name, path=path, dataset=opened[file], output=out
            )
        )
    return sources


def _describe(
    connection: duckdb.DuckDBPyConnection, sources: Sequence[_Source]
) -> pa.Table:
    """The ``columns`` table: every view's columns, types and docs."""
    listed: pa.Table = connection.sql(
        "SELECT CASE WHEN table_schema = 'main' THEN '' ELSE table_schema || '.' END"
        " || table_name AS view, column_name AS column, data_type AS type,"
        " table_schema = 'main' AS is_main, ordinal_position"
        f" FROM information_schema.columns WHERE table_name <> 'subtasks'"
        f" AND NOT starts_with(table_name, '{_HIDDEN}')"
        " ORDER BY is_main DESC, table_schema, CASE table_name WHEN 'scores' THEN 0"
        " WHEN 'benchmarks' THEN 1 WHEN 'leaderboard' THEN 2 WHEN 'ratings' THEN 3"
        " WHEN 'win_rates' THEN 4 ELSE 5 END,"
        " ordinal_position"
    ).to_arrow_table()
    docs: dict[tuple[str, str], str] = {}
    for source in sources:  # a handful of tables, each with its columns' docs
        for field in source.dataset.schema:
            doc = (field.metadata or {}).get(b"doc", b"").decode()
            docs.setdefault((source.view, field.name), doc)
    doc = [
        docs.get((view.split(".")[-1], column), "")
        for view, column in zip(
            listed.column("view").to_pylist(),
            listed.column("column").to_pylist(),
            strict=True,
        )
    ]
    return listed.select(["view", "column", "type"]).append_column(
        "doc", pa.array(doc, pa.string())
    )


def _query_error(
    exc: Exception, duckdb: ModuleType, sources: Sequence[_Source]
) -> LbnormError:
    """DuckDB's error as lbnorm's: refused, an unreadable table, or failed SQL."""
    text = str(exc).strip()
    if (
        isinstance(exc, duckdb.PermissionException)
        or "configuration has been locked" in text
    ):
        msg = f"query refused: {_first_line(text)}\nHint: {_REFUSED_HINT}."
        return LbnormError(msg)
    if (found := _REGISTERED.search(text)) is not None:
        paths = {source.registered: source.path for source in sources}
        if (path := paths.get(found.group(1))) is not None:
            return _unreadable(path, text)
    is_ratings = any(source.view == "ratings" for source in sources)
    hint = _RATINGS_SQL_HINT if is_ratings else _SQL_HINT
    return LbnormError(f"query failed: {text}\nHint: {hint}.")


def _unreadable(path: Path, error: str) -> InputError:
    msg = (
        f"{path}: cannot read this output table: {_first_line(error)}\n"
        f"Hint: rerun `lbnorm run ... --out {path.parent}` to rewrite the output."
    )
    return InputError(msg)


def _check_distinct_names(table: pa.Table, fmt: QueryFormat) -> None:
    if repeated := sorted(
        name for name, count in Counter(table.column_names).items() if count > 1
    ):
        msg = (
            f"--format {fmt} needs distinct column names; the result repeats "
            f"{repeated[:5]} (a join's columns of the same name).\n"
            f"Hint: name them apart (SELECT n.rank AS rank_new, o.rank AS rank_old ...),"
            " or use --format csv or table."
        )
        raise LbnormError(msg)


def _format_text_table(table: pa.Table, *, max_rows: int, digits: int | None) -> str:
    """Aligned columns of the first rows, escaped, then how many rows in all."""
    head = table.slice(0, max_rows)
    lines = [format_table(head, digits=digits)] if table.num_columns else []
    if table.num_rows > max_rows:
        lines.append(
            f"... {table.num_rows - max_rows:,} more rows (add LIMIT, or --format csv for all)"
        )
    lines.append(f"({table.num_rows:,} row{'s' * (table.num_rows != 1)})")
    return "\n".join(lines) + "\n"


def _clean(table: pa.Table) -> pa.Table:
    """Decimals to float64, float NaN to null."""
    for index, field in enumerate(table.schema):
        column = table.column(index)
        if pa.types.is_decimal(field.type):
            column = column.cast(pa.float64())
        elif not pa.types.is_floating(field.type):
            continue
        column = pc.if_else(pc.is_nan(column), None, column)
        table = table.set_column(index, field.with_type(column.type), column)
    return table


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _first_line(text: str) -> str:
    return text.split("\n", 1)[0]


def _import_duckdb() -> ModuleType:
    try:
        import duckdb
    except ImportError as exc:
        msg = (
            "SQL queries need DuckDB, which is not installed.\n"
            "Hint: pip install duckdb (or, in a clone of lbnorm, pip install '.[sql]')."
        )
        raise LbnormError(msg) from exc
    return duckdb
