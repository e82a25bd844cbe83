"""Long-format score tables (CSV and JSONL), read and type-checked on Arrow.

The column contract (see :data:`lbnorm.core.schemas.SCORES`): ``model``, ``benchmark``,
``subtask`` and ``raw_score`` are required; ``precision``, ``revision``,
``chat_template``, ``metric``, ``stderr`` and ``n_samples`` are optional and take
defaults ('' / False / null). An optional key column that is null (an empty
JSON value, a null in Parquet) means unknown, exactly as if the column were
absent: ''. A required key that is null is an error. Any other column is an
error unless the caller says ``extra_columns="keep"`` (carried into the subtask
output) or ``"drop"``.

Rows are counted as the file's lines: in a CSV the header is line 1, so the
first data row is line 2; in JSONL a row is its line. Quoted cells spanning
several lines and blank lines are counted exactly (a record ends at a newline
outside double quotes, as RFC 4180 quoting has it). A score cell that is not a
finite number keeps its text (``nan``, ``inf``, ``''``, ``null``) in a
``_raw_score_text`` column, so a validation message shows the cell as written.

No pandas here: CSV cells of contract columns are read as text by
``pyarrow.csv`` and parsed on Arrow; JSONL is read by ``pyarrow.json``; a file
pyarrow refuses is read again line by line only to name the bad line. The
common file (a row a line, plain numbers) streams from the disk to Arrow and
is never held whole in memory; any other is read whole, as its checks need.
The text key columns (model, benchmark, subtask, precision, revision, metric) come out
as dictionaries, one per column, as the engine and the subtask table take them.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json

from lbnorm._runtime import beside
from lbnorm.core.arrow import dictionary, numbers, scalar, strings, to_numpy
from lbnorm.core.errors import InputError, SchemaMismatchError
from lbnorm.core.files import FileFormat, json_lines, read_bytes, shown
from lbnorm.core.options import ExtraColumns
from lbnorm.core.schemas import (
    OPTIONAL_SCORE_DEFAULTS,
    REQUIRED_SCORE_COLUMNS,
    SCORES,
    TEXT,
    Batch,
)
from lbnorm.readers.table_file import (
    IrregularError,
    RowNumbers,
    TextStream,
    check_utf8,
    count_lines,
    read_csv,
    read_jsonl,
    table_format,
    text_rows,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "NUMBER_TYPES",
    "TEXT_COLUMNS",
    "check_columns",
    "conform_scores",
    "read_score_file",
    "scores_from_frame",
]

#: The contract's text columns (a Parquet reader's too).
TEXT_COLUMNS = ("model", "precision", "revision", "benchmark", "subtask", "metric")
_NUMBER_COLUMNS = ("raw_score", "stderr", "n_samples")
_REQUIRED_KEYS = ("model", "benchmark", "subtask")
# what Arrow's string-to-double cast accepts, for naming the first cell it refuses
_NUMBER = r"^[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[nN][aA][nN]|[iI][nN][fF]([iI][nN][iI][tT][yY])?)$"
#: Cells a CSV reader takes for "no value" (pyarrow's defaults: '', N/A, NA,
#: NULL, nan, #N/A...): a missing stderr, or a raw_score validation reports.
_MISSING = sorted(
    set(pa_csv.ConvertOptions().null_values) - {"NaN", "nan", "-NaN", "-nan"} | {""}
)
_KEY = TEXT  # text keys as the engine and the subtask table take them
_NON_SPACE = re.compile(rb"\S")
_TRUE = {"true", "1"}
_FALSE = {"false", "0", "", "nan", "none"}


def read_score_file(
    path: Path, *, extra_columns: ExtraColumns = "error"
) -> tuple[Batch, str]:
    """Read one long-format CSV or JSONL table into the :data:`SCORES` contract.

    The bytes read are hashed on a second thread while they are parsed: the
    sha256 is of exactly the bytes the table came from (the catalog's
    provenance), and the file is read once.

    Args:
        path: A ``.csv`` or ``.jsonl``/``.ndjson`` file.
        extra_columns: Policy for columns outside the contract.

    Returns:
        One batch: the :data:`SCORES` columns (``source`` = the path), any kept
        extra columns, ``_raw_score_text`` when a score cell is not a finite
        number, and, when rows are not on consecutive lines, ``_row`` (each
        row's line number, as text); else ``first_row`` is the first row's line.
        And the hex sha256 of the bytes read.

    Raises:
        InputError: The file is unreadable, empty, not UTF-8, or not of its format.
        SchemaMismatchError: Required columns are missing, extra columns are
            present under ``extra_columns="error"``, or a cell has the wrong
            type (the message names its line).
    """
    kind = table_format(path, allowed=("csv", "jsonl"))
    streamed = _read_streamed(path, kind)
    table, sha256, rows = streamed or _read_whole(path, kind, extra_columns)
    table = _key_dictionaries(table)
    if table.num_rows == 0:
        msg = f"{path}: the table has no rows.\nHint: an export may have failed; remove the file or write its rows."
        raise InputError(msg)
    scores = conform_scores(
        table,
        source=str(path),
        extra_columns=extra_columns,
        rows=rows,
        keep_dictionaries=True,
    )
    if rows.lines is not None:
        scores = scores.append_column(
            "_row", pc.cast(numbers(rows.lines, pa.int64()), pa.string())
        )
    return Batch(table=scores, source=str(path), first_row=rows.first), sha256


#: A file's table, the sha256 of its bytes, its rows' lines.
_Read = tuple[pa.Table, str, RowNumbers]


def _read_streamed(path: Path, kind: FileFormat) -> _Read | None:
    """The file as Arrow parses it from the disk, or None: :func:`_read_whole` reads it.

    The common file (UTF-8, a row a line, every score a plain number, a JSONL
    file's lines all of its first line's columns) is read once and never held
    whole (:class:`TextStream`). Any other, and every error, is left to the
    whole-file read, which words the message.
    """
    header = kind == "csv"
    try:
        with closing(TextStream(path, is_json=not header)) as stream:
            table = _read_typed(kind, stream.head(), stream)
    except (InputError, IrregularError, OSError, UnicodeDecodeError):
        return None  # (a header not UTF-8 too)
    if table is None or not stream.is_done or not table.num_rows:
        return None
    if stream.lines != table.num_rows + header:  # blank lines, quoted newlines
        return None
    return table, stream.sha256(), RowNumbers(unit="line", first=1 + header)


def _read_whole(path: Path, kind: FileFormat, extra_columns: ExtraColumns) -> _Read:
    """The file read into memory whole: every check words its message with a line."""
    data = read_bytes(path)
    # hashed and its lines counted beside the parse (hashlib and numpy release
    # the GIL): the sha256 of exactly these bytes
    hashed = beside(lambda: (hashlib.sha256(data).hexdigest(), count_lines(data)))
    if not data:
        msg = f"{path}: the file is empty.\nHint: remove it, or write the header and rows."
        raise InputError(msg)
    check_utf8(path, data)
    table = _read_typed(kind, data, data, path)
    if table is None:
        table = _read_untyped(path, data, kind, extra_columns=extra_columns)
    sha256, lines = hashed.result()
    return table, sha256, text_rows(data, kind, table.num_rows, lines=lines)


def conform_scores(
    table: pa.Table,
    *,
    source: str,
    extra_columns: ExtraColumns = "error",
    rows: RowNumbers | None = None,
    keep_dictionaries: bool = False,
) -> pa.Table:
    """Conform a long-format Arrow table to the :data:`SCORES` contract.

    Args:
        table: Long-format scores (see the module docstring for the columns).
        source: Its name, recorded in ``source`` and used in messages.
        extra_columns: Policy for columns outside the contract.
        rows: How to number its rows in messages (default: ``row 1`` first).
        keep_dictionaries: Keep text key columns that are dictionaries of
            strings without nulls as they are, and give ``source`` and absent
            text keys as dictionaries of one entry (the file readers' tables,
            which the engine encodes from their entries); else all text is plain.

    Returns:
        The :data:`SCORES` columns in order, then kept extra columns, then
        ``_raw_score_text`` (the text of each ``raw_score`` cell that is not a
        finite number, else null) when there is such a cell.

    Raises:
        SchemaMismatchError: Missing required columns, unexpected columns under
            ``"error"``, or a value of the wrong type (named by its row).

    Examples:
        >>> table = pa.table({"model": ["m"], "benchmark": ["GPQA"],
        ...     "subtask": ["main"], "revision": [None], "raw_score": [0.6]})
        >>> conform_scores(table, source="inline").select(["model", "revision", "raw_score"]).to_pylist()
        [{'model': 'm', 'revision': '', 'raw_score': 0.6}]
    """
    rows = rows or RowNumbers(unit="row", first=1)
    columns = [str(name) for name in table.column_names]
    extras = check_columns(columns, source=source, extra_columns=extra_columns)
    n_rows = table.num_rows
    data: dict[str, pa.Array | pa.ChunkedArray] = {}
    texts: dict[str, pa.Array | pa.ChunkedArray] = {}
    for field in SCORES:
        name = field.name
        if name == "source" or name not in columns:  # one value for every row
            value = source if name == "source" else OPTIONAL_SCORE_DEFAULTS[name]
            data[name] = (  # (as a dictionary of one entry: no text per row)
                dictionary(np.zeros(n_rows, dtype=np.int32), strings([str(value)]))
                if keep_dictionaries and field.type == pa.string()
                else pa.repeat(scalar(value, field.type), n_rows)  # type: ignore[arg-type]
            )
        elif name in TEXT_COLUMNS:
            column = table[name]
            is_kept = keep_dictionaries and column.type == _KEY
            data[name] = (
                column
                if is_kept and not column.null_count
                else _text_column(column, name, source=source, rows=rows)
            )
        elif name == "chat_template":
            data[name] = _bool_column(table[name], source=source, rows=rows)
        else:
            data[name], text = _number_column(
                table[name], name, source=source, rows=rows
            )
            if text is not None and name == "raw_score":  # what validation shows
                texts[f"_{name}_text"] = text
    if extra_columns == "keep":
        for name in extras:
            data[name] = table[name]
    data.update(texts)
    return pa.Table.from_arrays(list(data.values()), names=list(data))


def scores_from_frame(
    frame: pd.DataFrame, *, source: str, extra_columns: ExtraColumns = "error"
) -> pd.DataFrame:
    """Conform a user's long-format pandas frame to the :data:`SCORES` contract.

    Args:
        frame: Long-format scores (see the module docstring for the columns).
        source: Its name, recorded in ``source`` and used in messages.
        extra_columns: Policy for columns outside the contract.

    Returns:
        A new frame of Arrow-backed columns (so it converts back to Arrow
        unchanged): contract columns, kept extras, and ``_row`` (``"1"``, ...).

    Raises:
        SchemaMismatchError: Missing required columns, unexpected columns under
            ``"error"``, or values of the wrong type (named by row, 1-based).

    Examples:
        >>> import pandas as pd
        >>> frame = pd.DataFrame({"model": ["m"], "benchmark": ["GPQA"],
        ...     "subtask": ["main"], "raw_score": [0.6]})
        >>> scores_from_frame(frame, source="inline")[["model", "precision", "raw_score"]]
          model precision  raw_score
        0     m                  0.6
    """
    import pandas as pd  # a user's frame: pandas is already loaded

    frame = frame.reset_index(drop=True)  # the caller's index carries no meaning here
    frame.columns = [str(name) for name in frame.columns]
    check_columns(list(frame.columns), source=source, extra_columns=extra_columns)
    arrays: dict[str, pa.Array] = {}
    for name in frame.columns:
        values = frame[name]
        try:  # NaN in a float column stays NaN (a null elsewhere is missing)
            arrays[name] = pa.array(values, from_pandas=values.dtype.kind != "f")
        except (pa.ArrowException, ValueError, TypeError, OverflowError):
            _raise_first_bad(
                name, frame[name].tolist(), source, RowNumbers(unit="row", first=1)
            )
            raise
    scores = conform_scores(
        pa.table(arrays), source=source, extra_columns=extra_columns
    )
    scores = scores.append_column(
        "_row", pc.cast(numbers(np.arange(1, len(frame) + 1), pa.int64()), pa.string())
    )
    converted: pd.DataFrame = scores.to_pandas(types_mapper=pd.ArrowDtype)
    return converted


def check_columns(
    columns: list[str], *, source: str, extra_columns: ExtraColumns
) -> list[str]:
    """Check a table's column names against the contract; return the extra ones.

    Raises:
        SchemaMismatchError: A required column is missing, or there are extra
            columns under ``extra_columns="error"``.
    """
    if missing := [name for name in REQUIRED_SCORE_COLUMNS if name not in columns]:
        msg = (
            f"{source}: missing required column(s) {missing}; found {columns[:12]}.\n"
            f"Hint: a long-format table needs {list(REQUIRED_SCORE_COLUMNS)}; "
            f"optional: {list(OPTIONAL_SCORE_DEFAULTS)}."
        )
        raise SchemaMismatchError(msg)
    known = set(SCORES.names) - {"source"}
    extras = [name for name in columns if name not in known]
    if extras and extra_columns == "error":
        msg = (
            f"{source}: unexpected column(s) {extras[:5]}.\n"
            "Hint: pass --extra-columns keep to carry them into the subtask output, "
            "or --extra-columns drop to discard them."
        )
        raise SchemaMismatchError(msg)
    return extras


# --- reading ------------------------------------------------------------------------


def _read_typed(
    kind: FileFormat, head: bytes, source: bytes | TextStream, path: Path | None = None
) -> pa.Table | None:
    """The file read with its contract columns typed as the read goes, or None.

    The CSV's score columns parsed by Arrow (:func:`_read_csv_numbers`: the
    string-to-double parser :func:`_number_column` casts with, so the same
    bits), the JSONL file's first line's columns given their types
    (:func:`_read_jsonl_typed`); `head` holds the header or first line. None:
    :func:`_read_untyped` reads the file and words any message.
    """
    if kind == "csv":
        return _read_csv_numbers(source, _csv_types(head))
    return _read_jsonl_typed(head, source, path)


def _read_untyped(
    path: Path, data: bytes, kind: FileFormat, *, extra_columns: ExtraColumns
) -> pa.Table:
    """The file read with a CSV's contract columns as text, a JSONL file's types inferred.

    A CSV's cells come as written ('' for empty), and :func:`_number_column`
    names the first score cell that is not a number; a JSONL file Arrow
    refuses is read line by line to name the bad line (:func:`_explain_jsonl`).
    """
    try:
        if kind == "jsonl":
            return read_jsonl(data, path)
        return read_csv(
            data,
            convert=pa_csv.ConvertOptions(
                column_types=_csv_types(data),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowException, OSError) as exc:
        if kind == "jsonl":
            _explain_jsonl(path, extra_columns=extra_columns)
        msg = f"{path}: cannot read as {kind}: {exc}.\nHint: check that the file is complete {kind} in UTF-8."
        raise InputError(msg) from exc


def _csv_types(head: bytes) -> dict[str, pa.DataType]:
    """The contract columns the header (the first line of `head`) names, as text."""
    line = head[: head.find(b"\n") if b"\n" in head else len(head)]
    try:
        names = next(csv.reader([line.decode("utf-8-sig").rstrip("\r")]), [])
    except csv.Error:  # a stray carriage return: pyarrow decides, types checked below
        names = []
    contract = set(TEXT_COLUMNS) | set(_NUMBER_COLUMNS) | {"chat_template"}
    return {
        name: _KEY if name in TEXT_COLUMNS else pa.string()
        for name in names
        if name in contract
    }


#: The score columns' types: as Arrow parses them as the CSV is read, as Parquet's are cast.
NUMBER_TYPES = {
    "raw_score": pa.float64(),
    "stderr": pa.float64(),
    "n_samples": pa.int64(),
}


def _read_csv_numbers(
    data: bytes | TextStream, types: dict[str, pa.DataType]
) -> pa.Table | None:
    """The CSV with its score columns parsed as read, or None if a cell needs the text path.

    None when a score cell is not a plain number or one of :data:`_MISSING`
    (padded with spaces, a percent sign, a fraction of n_samples...), is not
    finite, or is an empty raw_score: the text path reads those and words the
    message.
    """
    numbers = {name: NUMBER_TYPES[name] for name in _NUMBER_COLUMNS if name in types}
    if not numbers:
        return None
    try:
        table = read_csv(
            data,
            convert=pa_csv.ConvertOptions(
                column_types={**types, **numbers},
                null_values=_MISSING,
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowException, OSError):
        return None
    if "raw_score" in numbers and table["raw_score"].null_count:
        return None  # an empty raw_score: the text path keeps what the cell said
    floats = [name for name, type_ in numbers.items() if pa.types.is_floating(type_)]
    if any(pc.any(pc.invert(pc.is_finite(table[name]))).as_py() for name in floats):
        return None  # (pc.any passes over the empty cells, null)
    return table


#: The types of the contract columns when a JSONL file is read with a schema.
_JSONL_TYPES = {
    **dict.fromkeys(TEXT_COLUMNS, pa.string()),
    "chat_template": pa.bool_(),
    **NUMBER_TYPES,
}


def _read_jsonl_typed(
    head: bytes, data: bytes | TextStream, path: Path | None = None
) -> pa.Table | None:
    """The JSONL file read with its first line's columns typed, or None to infer them.

    `head` holds the first line that is not blank (the file's bytes do).

    Arrow parses a typed column without inferring it; the table equals the one
    inference gives (cast as :func:`conform_scores` casts it) when every row
    holds the first line's columns and nothing else, each value parses as its
    type (a text where a number goes fails the read), and each float column
    reads as inference reads it (:func:`_reads_as_inferred`). Any other file:
    None, and the inferring read decides, with its messages.
    """
    found = _NON_SPACE.search(head)
    start = found.start() if found else 0
    end = head.find(b"\n", start)
    try:
        first = json.loads(head[start : len(head) if end < 0 else end])
    except (ValueError, RecursionError):
        return None
    if (
        not isinstance(first, dict)
        or not first
        or not set(first) <= _JSONL_TYPES.keys()
    ):
        return None
    names = list(first)
    schema = pa.schema([(name, _JSONL_TYPES[name]) for name in names])
    try:
        table = read_jsonl(
            data,
            path,
            parse=pa_json.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="infer"
            ),
        )
    except (pa.ArrowException, OSError):
        return None
    if table.column_names != names:
        return None
    floats = [name for name in names if pa.types.is_floating(_JSONL_TYPES[name])]
    if not all(_reads_as_inferred(table[name]) for name in floats):
        return None
    return table


def _reads_as_inferred(column: pa.ChunkedArray) -> bool:
    """Whether a float column read with a schema equals the inferring read's, cast to float64.

    A column with a fraction was float64 to inference too; a column of whole
    numbers may have been int64, which reads ``-0`` as 0 and refuses a whole
    number from 2**53 on as a float: such a column is left to inference.
    """
    values = to_numpy(column, null=0.0)
    if not bool((values == np.floor(values)).all()):
        return True
    is_negative_zero = (values == 0) & np.signbit(values)
    return not bool(is_negative_zero.any() or (np.abs(values) >= 2.0**53).any())


def _key_dictionaries(table: pa.Table) -> pa.Table:
    """`table` with its text key columns as dictionaries, one dictionary and chunk each.

    Arrow reads a file in blocks: a text column comes in chunks (encoded here
    by one hash table over them all, so they share its dictionary), a CSV's
    dictionary column with a dictionary per chunk (unified). The engine encodes
    keys from a dictionary's entries (not from every row) and writes the
    subtask table with dictionaries, so one dictionary per column is looked up
    once. Other columns are left as read.
    """
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        if name in TEXT_COLUMNS and pa.types.is_string(column.type):
            column = column.dictionary_encode()  # one hash table: one dictionary
        elif name in TEXT_COLUMNS and column.type == _KEY:
            column = column.unify_dictionaries()  # (a CSV's dictionary per block)
        else:
            continue
        one = column.combine_chunks() if column.num_chunks > 1 else None
        table = table.set_column(i, name, column if one is None else [one])
    return table


def _explain_jsonl(path: Path, *, extra_columns: ExtraColumns) -> None:
    """Raise a precise error for a JSONL file pyarrow refused, if one is found.

    Runs on the error path only: every line is parsed alone, and each contract
    column's values are checked in Python, naming the first bad line.
    """
    hint = "Hint: write one JSON object per line; the file may be truncated."
    numbered = list(json_lines(path, hint=hint))
    lines = np.array([number for number, _ in numbered], dtype=np.int64)
    rows = RowNumbers(unit="line", first=1, lines=lines)  # (first: unread with lines)
    names = list(dict.fromkeys(name for _, record in numbered for name in record))
    check_columns(names, source=str(path), extra_columns=extra_columns)
    for name in names:  # (a column outside the contract is passed over)
        values = [record.get(name) for _, record in numbered]
        _raise_first_bad(name, values, str(path), rows)


# --- columns ------------------------------------------------------------------------


def _text_column(
    column: pa.ChunkedArray, name: str, *, source: str, rows: RowNumbers
) -> pa.ChunkedArray:
    type_ = column.type
    if pa.types.is_dictionary(type_):
        column, type_ = column.cast(type_.value_type), type_.value_type
    if (
        pa.types.is_null(type_)
        or pa.types.is_string(type_)
        or pa.types.is_large_string(type_)
    ):
        if name in _REQUIRED_KEYS and column.null_count:
            where = rows.where(_first(column.is_null()))
            raise _not_text(name, None, source, where)
        return pc.fill_null(
            column.cast(pa.string()), scalar("", pa.string())
        )  # unknown: as if absent
    position = _first(column.is_valid())
    raise _not_text(name, column[position].as_py(), source, rows.where(position))


def _bool_column(
    column: pa.ChunkedArray, *, source: str, rows: RowNumbers
) -> pa.ChunkedArray:
    type_ = column.type
    if pa.types.is_boolean(type_) or pa.types.is_null(type_):
        return pc.fill_null(column.cast(pa.bool_()), scalar(False, pa.bool_()))
    if pa.types.is_integer(type_):
        text = column.cast(pa.string())
    elif pa.types.is_string(type_) or pa.types.is_large_string(type_):
        text = pc.utf8_lower(pc.utf8_trim_whitespace(column.cast(pa.string())))
    else:
        text = None
    if text is not None:
        text = pc.fill_null(text, scalar("", pa.string()))
        known = pc.is_in(text, value_set=strings(sorted(_TRUE | _FALSE)))
        if pc.all(known).as_py():
            return pc.is_in(text, value_set=strings(sorted(_TRUE)))
        position = _first(pc.invert(known))
    else:
        position = _first(column.is_valid())
    msg = (
        f"{source}: {rows.where(position)}: chat_template is {shown(column[position].as_py())}.\n"
        "Hint: write chat_template as true or false."
    )
    raise SchemaMismatchError(msg)


def _number_column(
    column: pa.ChunkedArray, name: str, *, source: str, rows: RowNumbers
) -> tuple[pa.ChunkedArray, pa.ChunkedArray | None]:
    """A score column as float64 (int64 for n_samples), and the text of odd cells.

    The text column (None if every cell is a finite number) keeps what a
    non-finite or empty cell said, for messages.
    """
    type_ = column.type
    text = None
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        cells = pc.utf8_trim_whitespace(column.cast(pa.string()))
        is_number = pc.match_substring_regex(cells, _NUMBER)
        is_empty = pc.is_in(cells, value_set=strings(_MISSING))  # '', N/A, NA, null...
        bad = pc.and_(pc.invert(is_number), pc.invert(is_empty))
        if pc.any(bad).as_py():
            position = _first(bad)
            value = cells[position].as_py()
            raise _wrong_value(name, value, source, rows.where(position))
        values = pc.if_else(is_empty, scalar(None, pa.string()), cells)
        values = values.cast(pa.float64())
        is_odd = pc.invert(
            pc.fill_null(pc.is_finite(values), scalar(False, pa.bool_()))
        )
        if pc.any(is_odd).as_py():
            text = pc.if_else(is_odd, column, scalar(None, pa.string()))
    elif (
        pa.types.is_integer(type_)
        or pa.types.is_floating(type_)
        or pa.types.is_decimal(type_)
        or pa.types.is_null(type_)
    ):  # (unsafe: an integer past 2**53 rounds to the nearest double, as a JSON
        # reader's float does; the range checks then judge the value)
        values = column.cast(pa.float64(), safe=False)
    else:
        position = _first(column.is_valid())
        value = column[position].as_py()
        raise _wrong_value(name, value, source, rows.where(position))
    if text is None and column.null_count and name == "raw_score":
        text = pc.if_else(
            column.is_null(), scalar("null", pa.string()), scalar(None, pa.string())
        )
    if name != "n_samples":
        return values, text
    if pa.types.is_integer(type_):
        return column.cast(pa.int64()), None
    found = to_numpy(values, null=np.nan)
    with np.errstate(invalid="ignore"):  # inf % 1 is NaN: inf is bad anyway
        whole = np.isfinite(found) & (found % 1 == 0) & (np.abs(found) < 2.0**63)
    is_bad = ~np.isnan(found) & ~whole
    if is_bad.any():
        position = int(np.flatnonzero(is_bad)[0])
        cell = column[position].as_py()  # a CSV cell's text, else the number
        written = cell.strip() if isinstance(cell, str) else shown(cell)
        is_huge = bool(np.isfinite(found[position]) and found[position] % 1 == 0)
        what = (
            "too large for a count (2**63 or more)" if is_huge else "not a whole number"
        )
        msg = f"{source}: {rows.where(position)}: n_samples is the number {written}, {what}.\nHint: n_samples counts items: write a whole number, or leave it empty."
        raise SchemaMismatchError(msg)
    values = pc.if_else(pc.is_nan(values), scalar(None, pa.float64()), values)
    return pc.cast(values, pa.int64()), None


def _raise_first_bad(
    name: str, values: Sequence[Any], source: str, rows: RowNumbers
) -> None:
    """Name the first value of a column (as Python objects) of the wrong kind, if any."""
    if name not in SCORES.names or name == "source":
        return
    if name == "chat_template":
        expected: tuple[str, ...] = ("boolean", "null", "number", "text")
    elif name in TEXT_COLUMNS:
        expected = ("text",) if name in _REQUIRED_KEYS else ("text", "null")
    else:
        expected = ("number", "null")
    for position, value in enumerate(values):
        if _kind(value) not in expected:
            error = _not_text if name in TEXT_COLUMNS else _wrong_value
            raise error(name, value, source, rows.where(position))


def _not_text(name: str, value: object, source: str, where: str) -> SchemaMismatchError:
    kind = _kind(value)
    found = "empty (null)" if kind == "null" else f"the {kind} {shown(value)}"
    msg = f"{source}: {where}: {name} is {found}, not text.\nHint: every row needs a {name}, written as text (in JSON, quoted)."
    return SchemaMismatchError(msg)


def _wrong_value(
    name: str, value: object, source: str, where: str
) -> SchemaMismatchError:
    kind = _kind(value)
    unit = " (a fraction in [0, 1])" if name == "raw_score" else ""
    expected = (
        "a whole number" if name == "n_samples" and kind == "number" else "a number"
    )
    msg = f"{source}: {where}: {name} is the {kind} {shown(value)}, not {expected}.\nHint: write {name} as a number{unit}."
    return SchemaMismatchError(msg)


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool | np.bool_):
        return "boolean"
    if isinstance(value, int | float | np.integer | np.floating):
        return "null" if value != value else "number"  # pandas' NaN for missing
    return type(value).__name__


def _first(mask: pa.ChunkedArray | pa.Array) -> int:
    """The position of the first true value of a boolean column."""
    return int(
        np.flatnonzero(to_numpy(pc.fill_null(mask, scalar(False, pa.bool_()))))[0]
    )
