"""Long-format score tables: CSV, JSONL and Parquet.

The column contract (see :data:`lbnorm.schemas.SCORES`): ``model``, ``benchmark``,
``subtask`` and ``raw_score`` are required; ``precision``, ``revision``,
``chat_template``, ``metric``, ``stderr`` and ``n_samples`` are optional and take
defaults ('' / False / null). Any other column is an error unless the caller says
``extra_columns="keep"`` (carried into the subtask output) or ``"drop"``.
"""

from __future__ import annotations

import reprlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from lbnorm.errors import InputError, SchemaMismatchError
from lbnorm.options import ExtraColumns
from lbnorm.readers.files import TABLE_SUFFIXES, json_lines
from lbnorm.schemas import OPTIONAL_SCORE_DEFAULTS, REQUIRED_SCORE_COLUMNS, SCORES

__all__ = [
    "check_columns",
    "read_score_table",
    "scores_from_frame",
]


_STRING_COLUMNS = ("model", "precision", "revision", "benchmark", "subtask", "metric")
_REPR = reprlib.Repr()  # bounded reprs for messages
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60
_shown = _REPR.repr


def read_score_table(
    path: Path, *, extra_columns: ExtraColumns = "error"
) -> pd.DataFrame:
    """Read one long-format table into the :data:`SCORES` contract.

    Args:
        path: A ``.csv``, ``.jsonl``/``.ndjson`` or ``.parquet`` file.
        extra_columns: Policy for columns outside the contract.

    Returns:
        Frame with the :data:`SCORES` columns (``source`` = the path), any kept
        extra columns, and ``_row``, the 1-based data row in the file.

    Raises:
        InputError: The file is unreadable, empty, or not of its format.
        SchemaMismatchError: Required columns are missing, extra columns are
            present under ``extra_columns="error"``, or a column has the wrong type.
    """
    kind = TABLE_SUFFIXES.get(path.suffix.lower())
    if kind is None:
        msg = f"{path}: unsupported file type {path.suffix!r}.\nHint: use one of {sorted(TABLE_SUFFIXES)} or a results_*.json file."
        raise InputError(msg)
    try:
        if path.stat().st_size == 0:
            msg = f"{path}: the file is empty.\nHint: remove it, or write the header and rows."
            raise InputError(msg)
        table = _read_arrow(path, kind)
        frame = table.to_pandas()  # a column name that is not UTF-8 fails only here
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        if isinstance(exc, InputError):
            raise
        if kind != "parquet":  # say which line is wrong, which pyarrow cannot
            _explain_text_table(path, kind, extra_columns=extra_columns)
        encoding = "" if kind == "parquet" else " in UTF-8"
        msg = f"{path}: cannot read as {kind}: {exc}.\nHint: check that the file is complete {kind}{encoding}."
        raise InputError(msg) from exc
    if table.num_rows == 0:
        msg = f"{path}: the table has no rows.\nHint: an export may have failed; remove the file or write its rows."
        raise InputError(msg)
    return scores_from_frame(frame, source=str(path), extra_columns=extra_columns)


def scores_from_frame(
    frame: pd.DataFrame, *, source: str, extra_columns: ExtraColumns = "error"
) -> pd.DataFrame:
    """Conform a user's long-format frame to the :data:`SCORES` contract.

    Args:
        frame: Long-format scores (see the module docstring for the columns).
        source: Its name, recorded in ``source`` and used in messages.
        extra_columns: Policy for columns outside the contract.

    Returns:
        A new frame: contract columns, kept extras, and the 1-based ``_row``.

    Raises:
        SchemaMismatchError: Missing required columns, unexpected columns under
            ``"error"``, or values of the wrong type.

    Examples:
        >>> frame = pd.DataFrame({"model": ["m"], "benchmark": ["GPQA"],
        ...     "subtask": ["main"], "raw_score": [0.6]})
        >>> scores_from_frame(frame, source="inline")[["model", "precision", "raw_score"]]
          model precision  raw_score
        0     m                  0.6
    """
    frame = frame.reset_index(drop=True)  # the caller's index carries no meaning here
    columns = [str(name) for name in frame.columns]
    extras = check_columns(columns, source=source, extra_columns=extra_columns)
    data: dict[str, object] = {}
    for name in SCORES.names:
        if name == "source":
            data[name] = source
        elif name in columns:
            data[name] = _coerce(frame[name], name, source=source)
        else:
            default = OPTIONAL_SCORE_DEFAULTS[name]
            data[name] = _coerce(
                pd.Series([default] * len(frame), dtype=object), name, source=source
            )
    scores = pd.DataFrame(data, index=pd.RangeIndex(len(frame)))
    if extra_columns == "keep":
        for name in extras:
            scores[name] = frame[name].to_numpy()
    scores["_row"] = pd.RangeIndex(1, len(frame) + 1)
    return scores


def _explain_text_table(path: Path, kind: str, *, extra_columns: ExtraColumns) -> None:
    """Raise a precise error for a CSV or JSONL file pyarrow refused, if one is found.

    Runs on the error path only: it reads the whole file with the standard library.
    """
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        msg = f"{path}: line {line}: byte {data[exc.start]:#04x} is not UTF-8.\nHint: re-save the file as UTF-8."
        raise InputError(msg) from exc
    if kind != "jsonl":
        return
    hint = "Hint: write one JSON object per line; the file may be truncated."
    records = [record for _, record in json_lines(path, hint=hint)]
    # Rows of mixed types, which pyarrow refuses by column: the contract names the row.
    scores_from_frame(
        pd.DataFrame.from_records(records),
        source=str(path),
        extra_columns=extra_columns,
    )


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


def _read_arrow(path: Path, kind: str) -> pa.Table:
    if kind == "parquet":
        return pq.read_table(path)
    if kind == "jsonl":
        return pa_json.read_json(path)
    # Key columns are text even when every value looks numeric (a revision sha
    # of digits); the score columns are left to inference and checked below.
    header = (
        path.read_bytes()[:65536].decode("utf-8-sig", errors="replace").splitlines()
    )
    names = [
        name.strip().strip('"') for name in (header[0].split(",") if header else [])
    ]
    types = {name: pa.string() for name in _STRING_COLUMNS if name in names}
    return pa_csv.read_csv(
        path, convert_options=pa_csv.ConvertOptions(column_types=types)
    )


def _coerce(values: pd.Series, name: str, *, source: str) -> pd.Series:
    """Cast one column to its contract type, naming the first bad value."""
    if name == "chat_template":
        return _coerce_bool(values, source=source)
    kind = _kinds(values)
    if name in _STRING_COLUMNS:
        is_bad = ~kind.isin(["text", "null"])
        if name in REQUIRED_SCORE_COLUMNS:
            is_bad |= kind == "null"
        if is_bad.any():
            hint = f"every row needs a {name}, written as text (in JSON, quoted)."
            raise _wrong_value(
                values, kind, is_bad, "text", name=name, source=source, hint=hint
            )
        return values.astype("str").where(kind != "null", "")
    # Text such as "0.5" or "N/A", or true/false, in a numeric column is a
    # contract violation, reported rather than parsed.
    is_bad = ~kind.isin(["number", "null"])
    if is_bad.any():
        unit = " (a fraction in [0, 1])" if name == "raw_score" else ""
        hint = f"write {name} as a number{unit}."
        raise _wrong_value(
            values, kind, is_bad, "a number", name=name, source=source, hint=hint
        )
    try:
        numbers = pd.to_numeric(values).astype("float64")
    except (ValueError, TypeError, OverflowError) as exc:  # a 400-digit integer
        msg = f"{source}: column {name!r} holds a number out of range: {exc}.\nHint: write {name} as a number in range."
        raise SchemaMismatchError(msg) from exc
    if name != "n_samples":
        return numbers
    is_bad = (kind == "number") & ((numbers % 1 != 0) | (numbers.abs() >= 2.0**63))
    if is_bad.any():
        hint = "n_samples counts items: write a whole number, or leave it empty."
        raise _wrong_value(
            values, kind, is_bad, "a whole number", name=name, source=source, hint=hint
        )
    return numbers.astype("Int64")


def _kinds(values: pd.Series) -> pd.Series:
    """Each value's kind: ``text``, ``number``, ``null`` or another type's name."""
    if values.dtype == object or isinstance(values.dtype, pd.CategoricalDtype):
        kinds = values.astype(object).map(_kind)  # mixed Python objects: look at each
    elif pd.api.types.is_bool_dtype(values):
        kinds = pd.Series("boolean", index=values.index)
    elif pd.api.types.is_numeric_dtype(values):
        kinds = pd.Series("number", index=values.index)
    elif pd.api.types.is_string_dtype(values):
        kinds = pd.Series("text", index=values.index)
    else:  # dates, durations, ...
        kinds = pd.Series(str(values.dtype), index=values.index)
    return kinds.where(values.notna(), "null")


def _kind(value: object) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, bool | np.bool_):
        return "boolean"
    if isinstance(value, int | float | np.integer | np.floating):
        return "number"
    return type(value).__name__


def _wrong_value(
    values: pd.Series,
    kinds: pd.Series,
    is_bad: pd.Series,
    expected: str,
    *,
    name: str,
    source: str,
    hint: str,
) -> SchemaMismatchError:
    """The error for the first bad row: its number, the value found, the fix."""
    position = int(is_bad.to_numpy().argmax())
    kind, value = kinds.iloc[position], values.iloc[position]
    if isinstance(value, np.generic):  # show 2.5, not np.float64(2.5)
        value = value.item()
    found = "empty" if kind == "null" else f"the {kind} {_shown(value)}"
    msg = f"{source}: row {position + 1}: {name} is {found}, not {expected}.\nHint: {hint}"
    return SchemaMismatchError(msg)


def _coerce_bool(values: pd.Series, *, source: str) -> pd.Series:
    if pd.api.types.is_bool_dtype(values):
        return values.astype(bool)
    text = values.astype("str").str.strip().str.lower().fillna("")  # null: False
    mapping = {
        "true": True,
        "1": True,
        "false": False,
        "0": False,
        "": False,
        "nan": False,
        "none": False,
    }
    is_unknown = ~text.isin(list(mapping))
    if is_unknown.any():
        row = int(is_unknown.to_numpy().argmax()) + 1
        msg = (
            f"{source}: row {row}: chat_template is {_shown(values[is_unknown].iloc[0])}.\n"
            "Hint: write chat_template as true or false."
        )
        raise SchemaMismatchError(msg)
    return text.map(mapping).astype(bool)
