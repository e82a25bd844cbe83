"""Per-sample results, aggregated into subtask scores as lm-evaluation-harness does.

Two forms are read:

- **Harness sample files**, ``<org>/<model>/samples_<task>_<ISO timestamp>.jsonl``:
  one JSON line per document with ``doc_id``, ``filter`` and one field per metric
  (``"acc_norm": 1.0``, ``"prompt_level_strict_acc": true``, or a list such as
  ``"inst_level_strict_acc": [true, false]``). The model variant comes from the
  ``results_<same timestamp>.json`` next to it when there is one, else from the
  ``<org>/<model>`` folders. Lines are parsed by Arrow's JSON reader, only the
  fields needed.
- **Sample tables** (Parquet): one row per (variant, task, metric, document) with
  columns ``model`` (and optionally ``precision``, ``revision``,
  ``chat_template``), ``task``, ``metric`` (as the suite names it, e.g.
  ``acc_norm,none``), ``doc_id`` and a numeric ``value``; read a row group at a
  time and summed with Arrow's hash aggregation. A list-valued metric is one row
  per item, and ``n_samples`` then counts items.

The aggregation is the harness's (lm-eval 0.4, ``api/metrics.py``): the score is
the mean over documents (``mean``); its stderr is the sample standard deviation
(``ddof=1``) over the square root of the count (``mean_stderr``); a list-valued
metric is flattened first (``agg_inst_level_acc``) and has no stderr (the harness
writes ``"N/A"``). ``n_samples`` counts documents. Values are summed as
``count``, ``sum`` and ``sum of squares``, which add up across row groups.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from lbnorm.errors import InputError
from lbnorm.readers.harness import parse_results_file

__all__ = [
    "SAMPLES_FILE",
    "aggregate_samples_files",
    "aggregate_samples_table",
    "is_samples_table",
]

#: How harness sample files are named.
SAMPLES_FILE = re.compile(
    r"^samples_(?P<task>.+)_(?P<timestamp>\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)\.jsonl$"
)
_KEYS = ["model", "precision", "revision", "chat_template"]
_OUTPUT = [*_KEYS, "benchmark", "subtask", "metric", "raw_score", "stderr", "n_samples", "source", "_row"]  # fmt: skip


def is_samples_table(path: Path) -> bool:
    """Whether a Parquet file holds per-sample values (``task`` and ``value``).

    An unreadable file is not one: the score-table reader reports it.
    """
    try:
        names = set(pq.ParquetFile(path).schema_arrow.names)
    except (pa.ArrowException, OSError):
        return False
    return {"task", "value"} <= names and "raw_score" not in names


def aggregate_samples_files(
    paths: Sequence[Path], subtasks: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Aggregate harness sample files into subtask scores.

    Args:
        paths: ``samples_<task>_<timestamp>.jsonl`` files.
        subtasks: The suite's subtask table (``task``, ``metric``, ``benchmark``,
            ``subtask``).

    Returns:
        The scores (the columns :func:`lbnorm.readers.harness.read_results_files`
        gives) and a catalog row per file (``path``, ``rows``, ``n_ignored``).

    Raises:
        InputError: A misnamed file, a line that is not JSON, a missing or
            non-numeric metric, or a task with no documents.
    """
    frames, catalog = [], []
    for path in paths:
        match = SAMPLES_FILE.match(path.name)
        if match is None:
            msg = f"{path}: not named samples_<task>_<timestamp>.jsonl.\nHint: keep the harness's file names; lbnorm reads the task from them."
            raise InputError(msg)
        wanted = subtasks[subtasks["task"] == match["task"]]
        if wanted.empty:  # a task the suite does not use
            catalog.append({"path": str(path), "rows": 0, "n_ignored": 1})
            continue
        keys = _variant_of(path, match["timestamp"])
        for entry in wanted.itertuples():  # a task's few metrics, not its documents
            metric, _, kept_filter = str(entry.metric).partition(",")
            count, total, squares, documents, is_list = _read_metric(
                path, metric, kept_filter or "none"
            )
            frames.append(
                pd.DataFrame(
                    {
                        **{name: [value] for name, value in keys.items()},
                        "benchmark": [entry.benchmark],
                        "subtask": [entry.subtask],
                        "metric": [entry.metric],
                        "raw_score": [total / count],
                        "stderr": [None if is_list else _stderr(count, total, squares)],
                        "n_samples": [documents],
                        "source": [str(path)],
                        "_row": [f"{match['task']}/{entry.metric}"],
                    }
                )
            )
        catalog.append({"path": str(path), "rows": len(wanted), "n_ignored": 0})
    scores = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=_OUTPUT)
    )
    return scores, pd.DataFrame(catalog, columns=["path", "rows", "n_ignored"])


def aggregate_samples_table(path: Path, subtasks: pd.DataFrame) -> pd.DataFrame:
    """Aggregate a Parquet sample table, a row group at a time, into subtask scores.

    Args:
        path: A Parquet sample table (see the module docstring).
        subtasks: The suite's subtask table.

    Returns:
        The scores, one row per (variant, suite subtask).

    Raises:
        InputError: Unreadable, columns missing, or values that are not numbers.
    """
    try:
        file = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        msg = f"{path}: cannot read as parquet: {exc}.\nHint: check that the file is complete."
        raise InputError(msg) from exc
    names = file.schema_arrow.names
    missing = [
        name for name in ("model", "task", "metric", "value") if name not in names
    ]
    if missing:
        msg = f"{path}: sample table without column(s) {', '.join(missing)}.\nHint: a sample table has model, task, metric, doc_id and value (see lbnorm.readers.samples)."
        raise InputError(msg)
    groups = [name for name in [*_KEYS, "task", "metric"] if name in names]
    partials = []
    for index in range(file.num_row_groups):
        table = file.read_row_group(index, columns=[*groups, "value"])
        if (
            not pa.types.is_floating(table.field("value").type)
            and not pa.types.is_integer(table.field("value").type)
            and not pa.types.is_boolean(table.field("value").type)
        ):
            msg = f"{path}: column 'value' has type {table.field('value').type}, not a number.\nHint: store one numeric metric value per row (booleans count as 0/1)."
            raise InputError(msg)
        value = pc.cast(table.column("value"), pa.float64())
        table = table.set_column(table.schema.get_field_index("value"), "value", value)
        table = table.append_column("square", pc.multiply(value, value))
        partial = table.group_by(groups).aggregate(
            [("value", "count"), ("value", "sum"), ("square", "sum")]
        )
        partials.append(_decoded(partial))  # row groups differ in dictionaries
    summed = (
        pa.concat_tables(partials)
        .group_by(groups)
        .aggregate(
            [("value_count", "sum"), ("value_sum", "sum"), ("square_sum", "sum")]
        )
        .to_pandas()
    )
    for name in _KEYS:
        if name not in summed.columns:
            summed[name] = False if name == "chat_template" else ""
    summed = summed.merge(
        subtasks[["task", "metric", "benchmark", "subtask"]],
        on=["task", "metric"],
        how="inner",
        validate="many_to_one",
    )
    count = summed["value_count_sum"].to_numpy(dtype=np.float64)
    total = summed["value_sum_sum"].to_numpy(dtype=np.float64)
    squares = summed["square_sum_sum"].to_numpy(dtype=np.float64)
    scores: pd.DataFrame = summed.assign(
        raw_score=total / count,
        stderr=_stderr(count, total, squares),
        n_samples=count.astype(np.int64),
        source=str(path),
        _row=summed["task"] + "/" + summed["metric"],
    )[_OUTPUT]
    return scores


def _decoded(table: pa.Table) -> pa.Table:
    """Dictionary columns as plain strings (a small, aggregated table)."""
    for index, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(
                index, field.name, table.column(index).cast(field.type.value_type)
            )
    return table


def _variant_of(path: Path, timestamp: str) -> dict[str, object]:
    """The variant keys: from the sibling results file, else the folders."""
    results = path.with_name(f"results_{timestamp}.json")
    if results.is_file():
        parsed = parse_results_file(results, results.read_bytes(), [])
        return {name: getattr(parsed, name) for name in _KEYS}
    model = f"{path.parent.parent.name}/{path.parent.name}"
    return {"model": model, "precision": "", "revision": "", "chat_template": False}


def _read_metric(
    path: Path, metric: str, kept_filter: str
) -> tuple[float, float, float, int, bool]:
    """Count, sum, sum of squares, documents and list-ness of one metric's values."""
    data = path.read_bytes()
    first = data.split(b"\n", 1)[0]
    value_type = _value_type(path, first, metric)
    schema = pa.schema([("filter", pa.string()), (metric, value_type)])
    try:
        table = pj.read_json(
            io.BytesIO(data),
            parse_options=pj.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"
            ),
        )
    except pa.ArrowInvalid as exc:
        msg = f"{path}: cannot read metric {metric!r} from every line: {exc}.\nHint: each line must be one JSON object with the same type of {metric!r}."
        raise InputError(msg) from exc
    table = table.filter(
        pc.fill_null(pc.equal(table.column("filter"), kept_filter), False)
    )
    column = table.column(metric)
    documents = table.num_rows
    is_list = pa.types.is_list(value_type)
    values = pc.list_flatten(column) if is_list else column
    values = pc.cast(values, pa.float64())
    if documents == 0 or values.null_count or len(values) == 0:
        msg = f"{path}: no {metric!r} value for filter {kept_filter!r} in {'some' if documents else 'any'} line(s).\nHint: the file must hold the metric for every document."
        raise InputError(msg)
    array = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
    return (
        float(array.size),
        float(array.sum()),
        float(array @ array),
        documents,
        is_list,
    )


def _value_type(path: Path, line: bytes, metric: str) -> pa.DataType:
    """The Arrow type of a metric's values, from the first line."""
    try:
        value = json.loads(line).get(metric)
    except (ValueError, AttributeError) as exc:
        msg = f"{path}: line 1 is not a JSON object: {exc}.\nHint: a samples file has one JSON object per line."
        raise InputError(msg) from exc
    if isinstance(value, list):
        item = value[0] if value else 0.0
        return pa.list_(pa.bool_() if isinstance(item, bool) else pa.float64())
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int | float):
        return pa.float64()
    msg = f"{path}: line 1 has {'no' if value is None else 'a non-numeric'} {metric!r} ({value!r}).\nHint: check the suite's metric name for this task."
    raise InputError(msg)


def _stderr(
    count: object, total: object, squares: object
) -> npt.NDArray[np.float64] | float:
    """``mean_stderr``: sqrt(sample variance (ddof=1) / n), NaN for one value."""
    n = np.asarray(count, dtype=np.float64)
    mean = np.asarray(total, dtype=np.float64) / n
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = (np.asarray(squares, dtype=np.float64) - n * mean * mean) / (n - 1)
        stderr = np.sqrt(np.maximum(variance, 0.0) / n)
    return float(stderr) if stderr.ndim == 0 else stderr
