"""A harness sample file's lines: the rules both sample readers hold them to.

``samples_<task>_<timestamp>.jsonl`` holds one JSON object per document with
``doc_id``, ``filter`` and one field per metric. :mod:`lbnorm.readers.samples`
reads it for scores and :mod:`lbnorm.readers.item_lines` for items, each first
through Arrow's JSON reader (:func:`read_fields`: only the fields it needs); a
file Arrow refuses, or whose lines break a rule, is read again line by line
(:func:`read_lines`), which names the first bad line and key: a ``doc_id`` that
is not an integer or repeats for its filter, a metric missing or not a finite
number, boolean or list of them, a metric with no document, or a list in some
lines only.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from lbnorm.core.arrow import scalar, to_numpy
from lbnorm.core.errors import InputError
from lbnorm.core.files import json_lines
from lbnorm.readers.table_file import read_jsonl

__all__ = [
    "HINT_LINE",
    "arrow_type",
    "first_line",
    "read_fields",
    "read_lines",
    "read_metric_values",
    "rows_of_filter",
]

HINT_LINE = "Hint: a harness samples file has one JSON object per line, with an integer doc_id, filter and each metric as a number, boolean or list of them."
_MISSING = object()
FloatArray = npt.NDArray[np.float64]


@functools.cache
def _loads() -> Callable[[bytes], Any]:
    """Each line's JSON parser (msgspec's errors are ValueErrors, as json's).

    Imported when a sample file is read: the catalog loads the readers for any run.
    """
    import msgspec

    return msgspec.json.Decoder().decode


def first_line(path: Path) -> Any:
    """The file's first line, parsed (its fields give the Arrow types to read)."""
    with path.open("rb") as handle:
        return _loads()(handle.readline())


def arrow_type(value: object) -> pa.DataType:
    """The Arrow type a metric's value reads as (a TypeError: not a metric value)."""
    if isinstance(value, list):
        first = value[0] if value else 0.0
        return pa.list_(pa.bool_() if isinstance(first, bool) else pa.float64())
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int | float):
        return pa.float64()
    msg = "not a metric value"  # the line-by-line reader words the error
    raise TypeError(msg)


def read_fields(path: Path, fields: dict[str, pa.DataType]) -> pa.Table:
    """The file's ``doc_id``, ``filter`` and `fields` through Arrow's JSON reader.

    In blocks, its nesting checked first (:mod:`lbnorm.readers.table_file`);
    other fields are ignored.
    """
    schema = pa.schema(
        [("doc_id", pa.int64()), ("filter", pa.string()), *fields.items()]
    )
    return read_jsonl(
        path,
        block_size=1 << 26,
        parse=pj.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"
        ),
    )


def rows_of_filter(table: pa.Table, kept: str) -> pa.Table:
    """The rows of one filter (a line without one is ``none``'s)."""
    filters = pc.fill_null(table.column("filter"), scalar("none", pa.string()))
    return table.filter(pc.equal(filters, scalar(kept or "none", pa.string())))


def read_lines(
    path: Path,
    wanted: Sequence[tuple[str, str]],
    *,
    on_line: Callable[[int, str, dict[str, Any]], None] | None = None,
) -> tuple[dict[str, list[int]], list[tuple[list[Any], bool]]]:
    """The slow, exact reading: each line parsed alone; the first problem is raised.

    Args:
        path: The sample file.
        wanted: The suite's metrics as ``(name, filter)`` (filter '' is ``none``).
        on_line: Called with ``(line number, filter, line)`` for each line of a
            wanted filter once its ``doc_id`` is checked, for the fields one
            reader alone needs.

    Returns:
        Per filter, its lines' ``doc_id`` in line order; per wanted metric, its
        values (one per line of its filter) and whether they are lists.

    Raises:
        InputError: The first bad line or key, or a metric with no document or
            a list in some lines only.
    """
    filters = {kept or "none" for _, kept in wanted}
    doc_ids: dict[str, list[int]] = {kept: [] for kept in filters}
    collected: dict[tuple[str, str], list[Any]] = {pair: [] for pair in wanted}
    seen: dict[tuple[str, int], int] = {}
    for number, line in json_lines(path, hint=HINT_LINE, loads=_loads()):
        kept = line.get("filter") or "none"
        if kept not in filters:
            continue
        doc = _doc_id(path, number, line.get("doc_id"))
        if (kept, doc) in seen:
            msg = f"{path}: line {number}: doc_id {doc} for filter {kept!r} repeats line {seen[kept, doc]}.\nHint: keep one line per document and filter (merge or drop duplicate runs)."
            raise InputError(msg)
        seen[kept, doc] = number
        doc_ids[kept].append(doc)
        if on_line is not None:
            on_line(number, kept, line)
        for name, metric_filter in wanted:
            if (metric_filter or "none") == kept:
                collected[name, metric_filter].append(
                    _checked(path, number, name, line.get(name, _MISSING))
                )
    return doc_ids, [
        (collected[pair], _is_list(path, pair, collected[pair])) for pair in wanted
    ]


def _doc_id(path: Path, number: int, doc: object) -> int:
    """A line's ``doc_id``, or an :class:`InputError` naming the line."""
    if isinstance(doc, str) and doc.strip().lstrip("-").isdigit():
        msg = f"{path}: line {number}: 'doc_id' is the text {doc!r}, not the integer {int(doc)}; a document keyed \"1\" and one keyed 1 would not match.\n{HINT_LINE}"
        raise InputError(msg)
    if isinstance(doc, bool) or not isinstance(doc, int):
        msg = (
            f"{path}: line {number}: 'doc_id' is {doc!r}, not an integer.\n{HINT_LINE}"
        )
        raise InputError(msg)
    return doc


def _checked(path: Path, number: int, name: str, value: object) -> Any:
    """A metric value, or an :class:`InputError` naming the line and key."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        if (
            item is _MISSING
            or item is None
            or not isinstance(item, int | float)
            or (isinstance(item, float) and not math.isfinite(item))
        ):
            what = (
                "missing"
                if item is _MISSING
                else f"{item!r}, not a finite number or boolean"
            )
            msg = f"{path}: line {number}: {name!r} is {what}.\nHint: check the suite's metric name for this task; every document needs the metric as a number, boolean or list of them."
            raise InputError(msg)
    return value


def _is_list(path: Path, metric: tuple[str, str], values: list[Any]) -> bool:
    """Whether a metric's values are lists: all of them or none, and at least one."""
    name, metric_filter = metric
    if not values:
        msg = f"{path}: no documents with filter {metric_filter or 'none'!r} and metric {name!r}: the task has no documents.\nHint: the file is empty or of another filter; re-run the task with --log_samples."
        raise InputError(msg)
    is_list = isinstance(values[0], list)
    if any(isinstance(v, list) != is_list for v in values):
        msg = f"{path}: {name!r} is a list in some lines and a number in others.\nHint: a metric is either one value per document or a list per document."
        raise InputError(msg)
    return is_list


def read_metric_values(
    path: Path, metrics: list[str]
) -> list[tuple[FloatArray, int, bool]]:
    """Per suite metric (``name,filter``) of a file: its values, documents and list-ness.

    A list-valued metric's values are flattened (lm-eval's ``agg_inst_level_acc``).
    """
    wanted = [metric.partition(",")[::2] for metric in metrics]
    try:
        head = first_line(path)
        table = read_fields(
            path, {name: arrow_type(head.get(name)) for name, _ in wanted}
        )
        return [_metric_values(table, name, kept) for name, kept in wanted]
    except (pa.ArrowException, ValueError, TypeError, AttributeError, OSError):
        pass  # the slow path below finds and names what is wrong
    except RecursionError:  # a first line nested too deep for the parser: the same
        pass
    out = []
    _, metrics_read = read_lines(path, wanted)
    for (name, _), (values, is_list) in zip(wanted, metrics_read, strict=True):
        flat = [x for v in values for x in v] if is_list else values
        if not flat:
            msg = f"{path}: {name!r} lists are empty in every line.\n{HINT_LINE}"
            raise InputError(msg)
        out.append((np.array(flat, dtype=np.float64), len(values), is_list))
    return out


def _metric_values(
    table: pa.Table, name: str, kept: str
) -> tuple[FloatArray, int, bool]:
    """One metric's values read by Arrow, checked (a ValueError: read line by line)."""
    rows = rows_of_filter(table, kept)
    column, doc_id = rows.column(name), rows.column("doc_id")
    is_list = pa.types.is_list(column.type)
    items = pc.list_flatten(column) if is_list else column
    unique = pc.count_distinct(doc_id).as_py()
    if (
        not rows.num_rows
        or column.null_count
        or items.null_count
        or doc_id.null_count
        or unique != rows.num_rows
    ):
        msg = "a line is missing, repeated or null"  # the slow path names it
        raise ValueError(msg)
    values = np.asarray(to_numpy(pc.cast(items, pa.float64())), dtype=np.float64)
    if not values.size or not np.isfinite(values).all():
        msg = "no or non-finite values"
        raise ValueError(msg)
    return values, rows.num_rows, is_list
