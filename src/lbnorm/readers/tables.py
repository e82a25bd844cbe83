"""Long-format score tables: CSV, JSONL and Parquet.

The column contract (see :data:`lbnorm.schemas.SCORES`): ``model``, ``benchmark``,
``subtask`` and ``raw_score`` are required; ``precision``, ``revision``,
``chat_template``, ``metric``, ``stderr`` and ``n_samples`` are optional and take
defaults ('' / False / null). Any other column is an error unless the caller says
``extra_columns="keep"`` (carried into the subtask output) or ``"drop"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from lbnorm.errors import InputError, SchemaMismatchError
from lbnorm.schemas import OPTIONAL_SCORE_DEFAULTS, REQUIRED_SCORE_COLUMNS, SCORES

__all__ = ["TABLE_SUFFIXES", "ExtraColumns", "read_score_table", "scores_from_frame"]

#: What to do with columns outside the contract.
ExtraColumns = Literal["error", "keep", "drop"]

#: File suffixes read as long-format tables.
TABLE_SUFFIXES: dict[str, str] = {
    ".csv": "csv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".parquet": "parquet",
    ".pq": "parquet",
}

_STRING_COLUMNS = ("model", "precision", "revision", "benchmark", "subtask", "metric")


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
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        if isinstance(exc, InputError):
            raise
        msg = f"{path}: cannot read as {kind}: {exc}.\nHint: check that the file is complete {kind} in UTF-8."
        raise InputError(msg) from exc
    frame = table.to_pandas()
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
    try:
        if name in _STRING_COLUMNS:
            is_null = values.isna()
            if name in REQUIRED_SCORE_COLUMNS and is_null.any():
                row = int(is_null.to_numpy().argmax()) + 1
                msg = f"{source}: row {row}: {name} is empty.\nHint: every row needs a {name}."
                raise SchemaMismatchError(msg)
            return values.astype("str").where(~is_null, "")
        if name == "chat_template":
            return _coerce_bool(values, source=source)
        if name == "n_samples":
            return pd.to_numeric(values).astype("Int64")
        if values.dtype == object or pd.api.types.is_string_dtype(values):
            # Strings such as "0.5" or "N/A" in a numeric column are a contract
            # violation, reported rather than parsed.
            is_text = values.map(lambda value: isinstance(value, str))
            if is_text.any():
                row = int(is_text.to_numpy().argmax()) + 1
                msg = (
                    f"{source}: row {row}: {name} is the text {values[is_text].iloc[0]!r}, "
                    f"not a number.\nHint: write {name} as a number (a fraction in [0, 1] for raw_score)."
                )
                raise SchemaMismatchError(msg)
        return pd.to_numeric(values).astype("float64")
    except (ValueError, TypeError) as exc:
        msg = f"{source}: column {name!r} has values of the wrong type: {exc}.\nHint: see the column contract in the README."
        raise SchemaMismatchError(msg) from exc


def _coerce_bool(values: pd.Series, *, source: str) -> pd.Series:
    if pd.api.types.is_bool_dtype(values):
        return values.astype(bool)
    text = values.astype("str").str.strip().str.lower()
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
            f"{source}: row {row}: chat_template is {values[is_unknown].iloc[0]!r}.\n"
            "Hint: write chat_template as true or false."
        )
        raise SchemaMismatchError(msg)
    return text.map(mapping).astype(bool)
