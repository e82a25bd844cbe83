"""Reading one battle file's columns (CSV, JSONL, JSON array, Parquet) and naming its bad rows.

The formats' readers are pyarrow's; a JSON array (Arena's ``clean_battle`` files)
is decoded by msgspec (a dependency), only the keys read. On the error path the helpers here find the line (or element) of a bad
value so that a message can point at it.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, get_args

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from lbnorm.core.errors import InputError
from lbnorm.core.files import FileFormat, json_lines, read_bytes
from lbnorm.core.schemas import TEXT  # asked of text columns (model names, winner)
from lbnorm.ratings.battle_files import header_names
from lbnorm.readers.table_file import (
    check_utf8,
    read_csv,
    read_jsonl,
    read_parquet,
    table_format,
    text_rows,
)

__all__ = [
    "COUNT_COLUMNS",
    "NESTED",
    "SHOWN",
    "TEXT",
    "Source",
    "fail_rows",
    "open_source",
    "read_table",
]

#: Values shown in a message, at most.
SHOWN = 5
#: Count columns of the aggregated shape.
COUNT_COLUMNS = ("wins_a", "wins_b", "ties")
#: The type asked of a nested field (``category_tag``, ``dedup_tag``,
#: ``conv_metadata``): whatever objects it holds, as an Arrow struct.
NESTED = pa.struct([])


@dataclass(frozen=True, slots=True)
class Source:
    """One input file and its format (for reading and for messages)."""

    path: Path
    kind: FileFormat


def open_source(
    path: Path, *, allowed: Collection[FileFormat] = get_args(FileFormat)
) -> tuple[Source, set[str]]:
    """A file's format and columns, refusing a missing, unreadable or empty file.

    A JSON file's columns are none here: an absent key reads as a null column,
    so which it has shows once it is read.
    """
    source = Source(path, table_format(path, allowed=allowed))
    try:
        size = path.stat().st_size
    except OSError as exc:
        msg = f"{path}: cannot read the file ({exc.strerror or exc}).\nHint: check the path and its permissions."
        raise InputError(msg) from exc
    if size == 0:
        msg = f"{path}: the file is empty.\nHint: remove it, or write the battles into it."
        raise InputError(msg)
    try:
        names = header_names(path, source.kind)
    except (pa.ArrowException, OSError, UnicodeDecodeError, csv.Error) as exc:
        msg = f"{path}: cannot read as {source.kind}: {exc}.\nHint: check that the file is complete {source.kind}."
        raise InputError(msg) from exc
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        msg = f"{path}: the column(s) {repeated[:SHOWN]} appear more than once, so which one holds the battles is ambiguous.\nHint: keep one column of each name (rename or drop the others)."
        raise InputError(msg)
    return source, set(names)


def read_table(
    source: Source, wanted: dict[str, pa.DataType], present: set[str]
) -> pa.Table:
    """Read the wanted columns; text formats get the types asked for.

    A column asked as :data:`NESTED` keeps the objects a JSON file holds there
    (a Parquet struct as stored); the other JSON columns get the types asked.
    """
    path, kind = source.path, source.kind
    names = [name for name in wanted if name in present]  # (Parquet and CSV)
    try:
        if kind == "parquet":
            schema = pq.read_schema(path)
            text = [
                n
                for n in names
                if wanted[n] == TEXT and pa.types.is_string(schema.field(n).type)
            ]
            return read_parquet(path, columns=names, text=text)
        if kind == "csv":
            types = {n: wanted[n] for n in names}
            options = pa_csv.ConvertOptions(include_columns=names, column_types=types)
            return read_csv(path, convert=options)
        schema = pa.schema(
            [
                (name, pa.string() if type_ == TEXT else type_)
                for name, type_ in wanted.items()
            ]
        )
        if kind == "jsonl":
            data = read_bytes(path)
            flat = pa.schema([f for f in schema if f.type != NESTED])
            options = pa_json.ParseOptions(
                explicit_schema=flat, unexpected_field_behavior="ignore"
            )
            table = read_jsonl(data, path, parse=options)
            nested = pa.schema([f for f in schema if f.type == NESTED])
            if not nested:
                return table
            lines = [line for line in data.splitlines() if line.strip()]
            records = _decode(path, b"[" + b",".join(lines) + b"]", nested)
            return _with_nested(table, path, records, nested)
        records = _decode(path, path.read_bytes(), schema)
        flat = pa.struct([f for f in schema if f.type != NESTED])
        table = pa.Table.from_struct_array(pa.array(records, type=flat))
        return _with_nested(table, path, records, schema)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        _explain_text(source, wanted)  # raises when it finds the line
        msg = f"{path}: cannot read as {kind}: {exc}.\nHint: check that the file is complete {kind} in UTF-8."
        raise InputError(msg) from exc


def _with_nested(
    table: pa.Table, path: Path, records: list[Any], schema: pa.Schema
) -> pa.Table:
    """``table`` with the :data:`NESTED` columns of ``schema`` from the decoded records."""
    for field in schema:
        if field.type == NESTED:
            table = table.append_column(
                field.name, _nested_column(path, records, field.name)
            )
    return table


def _nested_column(path: Path, records: list[Any], name: str) -> pa.Array:
    """One key's objects across records as an Arrow struct (types inferred)."""
    values = [r.get(name) if isinstance(r, dict) else None for r in records]
    try:
        return pa.array(values)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        kinds = sorted({type(v).__name__ for v in values if v is not None})
        msg = f"{path}: the field {name!r} holds values of different shapes ({', '.join(kinds[:5])}): {exc}.\nHint: a nested field must have the same structure in every battle (objects of the same keys and value types)."
        raise InputError(msg) from exc


def _decode(path: Path, data: bytes, schema: pa.Schema) -> list[Any]:
    """A JSON array's elements, only the wanted keys, of the types asked (else an InputError naming the element)."""
    import msgspec  # loaded when a JSON battle file is read, not before

    python_types = {
        pa.string(): str | None,
        pa.float64(): float | None,
        pa.bool_(): bool | None,
        NESTED: Any,
    }
    # keys need not be identifiers ("dedup_tag.sampled", "a b"): fields are
    # named f0, f1, ... and renamed to the keys they decode
    row_type = msgspec.defstruct(
        "BattleRow",
        [(f"f{i}", python_types[field.type], None) for i, field in enumerate(schema)],
        rename={f"f{i}": field.name for i, field in enumerate(schema)},
    )
    try:
        rows = msgspec.json.decode(data, type=list[row_type])  # type: ignore[valid-type]
    except msgspec.ValidationError as exc:
        element = re.search(r"\$\[(\d+)\]", str(exc))
        where = ""
        if element:
            index = int(element.group(1))
            line = _json_array_lines(data, [index]).get(index, "?")
            where = f" element {index + 1} (line {line}):"
        msg = f"{path}:{where} {exc}.\nHint: a .json battles file is one JSON array of objects; model names and winner are text, tstamp a number, filter columns of the type the --where condition implies."
        raise InputError(msg) from exc
    except msgspec.DecodeError as exc:
        byte = re.search(r"byte (\d+)", str(exc))
        end = len(data) if "truncated" in str(exc) else None
        offset = int(byte.group(1)) if byte else end
        line = data.count(b"\n", 0, offset) + 1 if offset is not None else 0
        at = f" at line {line}" if line else ""
        msg = f"{path}: not valid JSON{at} ({exc}).\nHint: a .json battles file is one JSON array of objects; the file may be truncated."
        raise InputError(msg) from exc
    return msgspec.to_builtins(rows)  # type: ignore[no-any-return]


def _explain_text(source: Source, wanted: dict[str, pa.DataType]) -> None:
    """On the error path, name the line of the first CSV or JSONL value of the wrong type."""
    path = source.path
    if source.kind not in ("csv", "jsonl"):
        return
    check_utf8(path, path.read_bytes())
    types = {name: pa.string() if t == TEXT else t for name, t in wanted.items()}
    if source.kind == "jsonl":
        hint = "Hint: write one JSON object per line; the file may be truncated."
        records, fits = json_lines(path, hint=hint), _fits_json
    else:
        records, fits = _csv_records(path), _fits_csv
    for number, record in records:
        for name, type_ in types.items():
            value = record.get(name)
            if value is not None and not fits(value, type_):
                msg = f"{path}: line {number}: {name} = {value!r} is not {_type_words(type_)}.\nHint: {_type_hint(name, type_)}"
                raise InputError(msg)


def _csv_records(path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, row)`` for each row of a CSV file (the line the row starts on)."""
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        start = reader.line_num + 1
        for record in reader:
            yield start, record
            start = reader.line_num + 1


def _fits_csv(value: object, type_: pa.DataType) -> bool:
    """Whether a CSV cell reads as ``type_`` (an empty cell is null: it does)."""
    if value == "" or type_ == pa.string():
        return True
    try:
        pa.array([value]).cast(type_)
    except pa.ArrowException:
        return False
    return True


def _fits_json(value: object, type_: pa.DataType) -> bool:
    """Whether a JSON value reads as ``type_`` (a nested field holds anything)."""
    if type_ == pa.float64():
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return type_ == NESTED or isinstance(value, str if type_ == pa.string() else bool)


def _type_words(type_: pa.DataType) -> str:
    if type_ == pa.bool_():
        return "true or false"
    return "a number" if type_ == pa.float64() else "text"


def _type_hint(name: str, type_: pa.DataType) -> str:
    if name in COUNT_COLUMNS:
        return f"{name} counts battles: write a whole number."
    if name == "tstamp":
        return "tstamp is a time in seconds (a number), as in Arena's files."
    if name in ("model_a", "model_b", "winner", "win", "judge"):
        return "model names and winner are text, as is judge."
    return f"the --where condition on {name} treats it as {_type_words(type_)}; write the condition to match the column."


# --- messages -------------------------------------------------------------------


def fail_rows(
    source: Source,
    rows: npt.NDArray[np.int64],
    values: Sequence[str | None],
    *,
    what: str,
    hint: str,
    quote: bool = True,
) -> NoReturn:
    """Raise an InputError naming the file, the first rows (as the file counts them) and values.

    Values are shown quoted (None as ``null``), or with ``quote=False`` as given.
    """
    places = _places(source, rows[:SHOWN].tolist())
    if quote:
        values = ["null" if v is None else repr(v) for v in values[:SHOWN]]
    shown = ", ".join(str(v) for v in values[:SHOWN])
    more = f" (and {len(rows) - SHOWN} more)" if len(rows) > SHOWN else ""
    msg = f"{source.path}: {what} at {', '.join(places)}{more}: {shown}.\nHint: {hint}"
    raise InputError(msg)


def _places(source: Source, rows: list[int]) -> list[str]:
    """Rows (0-based data rows) as the file counts them: lines, or Parquet rows."""
    if not rows:
        return []
    if source.kind == "parquet":
        return [f"row {row + 1}" for row in rows]
    data = source.path.read_bytes()
    if source.kind == "json":
        lines = _json_array_lines(data, rows)
        return [f"element {row + 1} (line {lines[row]})" for row in rows]
    numbers = text_rows(data, "csv" if source.kind == "csv" else "jsonl")
    found = numbers.lines if numbers.lines is not None else np.array([], np.int64)
    return [f"line {found[row] if row < len(found) else '?'}" for row in rows]


_BETWEEN = re.compile(r"[\s,]*")


def _json_array_lines(data: bytes, elements: Sequence[int]) -> dict[int, int]:
    """The line each wanted element of a JSON array starts on (error path only)."""
    text = data.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    position = text.find("[") + 1
    wanted, found, line, counted = set(elements), {}, 1, 0
    for index in range(max(elements) + 1):
        between = _BETWEEN.match(text, position)
        position = between.end() if between else position
        if index in wanted:
            line += text.count("\n", counted, position)
            counted = position
            found[index] = line
        try:
            _, position = decoder.raw_decode(text, position)
        except (ValueError, RecursionError):  # an element nested too deep to place
            break
    return found
