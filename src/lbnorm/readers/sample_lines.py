"""A harness sample file's lines: their metrics' values, for scores and for items.

``samples_<task>_<timestamp>.jsonl`` holds one JSON object per document with
``doc_id``, ``filter`` and one field per metric. :func:`read_metric_items`
reads each metric's documents, values and clusters, for scores
(:mod:`lbnorm.readers.samples`) and for items (:mod:`lbnorm.readers.items`):
first Arrow's JSON reader parses only the fields needed (``doc_id``,
``filter``, ``doc_hash`` where documents are matched by it, the suite's metrics
and the cluster key's path); a file Arrow refuses, or whose lines break a
rule, is read again line by line (:func:`_items_by_line`),
which names the first bad line and key: a ``doc_id`` that is not an integer or
repeats for its filter, a metric missing or not a finite number, boolean or
list of them, a metric with no document, or a list in some lines only.
"""

from __future__ import annotations

import functools
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from lbnorm.core.arrow import booleans, numbers, scalar, strings, to_numpy
from lbnorm.core.errors import InputError
from lbnorm.core.files import SAMPLES_FILE, json_lines
from lbnorm.readers.table_file import read_jsonl

__all__ = [
    "HINT_LINE",
    "DocumentKey",
    "ParsedMetric",
    "read_metric_items",
    "task_keys",
]

HINT_LINE = "Hint: a harness samples file has one JSON object per line, with an integer doc_id, filter and each metric as a number, boolean or list of them."
_MISSING = object()
FloatArray = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]


@functools.cache
def _loads() -> Callable[[bytes], Any]:
    """Each line's JSON parser (msgspec's errors are ValueErrors, as json's).

    Imported when a sample file is read: the catalog loads the readers for any run.
    """
    import msgspec

    return msgspec.json.Decoder().decode


def _first_line(path: Path) -> Any:
    """The file's first line, parsed (its fields give the Arrow types to read)."""
    with path.open("rb") as handle:
        return _loads()(handle.readline())


def _arrow_type(value: object) -> pa.DataType:
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
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, int) or (isinstance(item, float) and math.isfinite(item)):
            continue
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


#: How a task's documents are matched across models.
DocumentKey = Literal["doc_id", "doc_hash"]


@dataclass(slots=True)
class ParsedMetric:
    """One metric of one sample file: per line its document, per item its value."""

    documents: pa.Array  # per line: doc_id (int64) or the doc_hash key (string)
    lengths: _I64 | None  # per line, its list's length (a list-valued metric)
    values: FloatArray  # per item
    clusters: pa.Array | None  # per line, its cluster value
    n_duplicated: int = 0

    def positions(self) -> _I64:
        """Per item of a list-valued metric, its position in its line's list."""
        assert self.lengths is not None
        starts = np.repeat(np.cumsum(self.lengths) - self.lengths, self.lengths)
        return np.arange(starts.size, dtype=np.int64) - starts


def task_keys(paths: Sequence[Path]) -> dict[str, DocumentKey]:
    """Per task, ``doc_hash`` if every sample file of it records one on its first line.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "samples_t_2024-01-01T00-00-00.jsonl"
        >>> _ = path.write_text('{"doc_id": 0, "doc_hash": "ab", "acc": 1}')
        >>> task_keys([path])
        {'t': 'doc_hash'}
    """
    keys: dict[str, DocumentKey] = {}
    for path in paths:
        match = SAMPLES_FILE.match(path.name)
        if match is None or keys.get(match["task"]) == "doc_id":
            continue
        try:
            head = _first_line(path)
        except (OSError, ValueError):
            head = None  # the reading proper names the problem
        has_hash = isinstance(head, dict) and isinstance(head.get("doc_hash"), str)
        keys[match["task"]] = "doc_hash" if has_hash else "doc_id"
    return keys


def read_metric_items(
    path: Path, wanted: list[tuple[str, str]], key: DocumentKey, cluster: str | None
) -> list[ParsedMetric]:
    """Per suite metric (``name``, ``filter``) of a sample file: its documents and values.

    Arrow's JSON reader parses the fields needed; a file it refuses, or whose
    lines break a rule, is read again line by line, which names the line.
    """
    try:
        head = _first_line(path)
        fields: dict[str, pa.DataType] = {}
        if key == "doc_hash":
            fields["doc_hash"] = pa.string()
        for name, _ in wanted:
            fields[name] = _arrow_type(head[name])
        path_parts = cluster.split(".") if cluster else []
        if path_parts:
            fields[path_parts[0]] = _nested_type(head, path_parts)
        schema = pa.schema(
            [("doc_id", pa.int64()), ("filter", pa.string()), *fields.items()]
        )
        # in blocks, its nesting checked first (lbnorm.readers.table_file); other fields ignored
        parse = pj.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"
        )
        table = read_jsonl(path, block_size=1 << 26, parse=parse)
        out = []
        # (none given: none's; Arrow scalars, as a Python value would load pandas)
        none = scalar("none", pa.string())
        filters = pc.fill_null(table.column("filter"), none)
        for name, kept in wanted:
            rows = table.filter(
                pc.equal(filters, scalar(kept, pa.string()) if kept else none)
            )
            clusters = None
            if path_parts:
                clusters = rows.column(path_parts[0]).combine_chunks()
                for part in path_parts[1:]:
                    clusters = pc.struct_field(clusters, part)
            hashes = (
                rows.column("doc_hash").combine_chunks() if key == "doc_hash" else None
            )
            out.append(
                _parsed(
                    rows.column("doc_id").combine_chunks(),
                    hashes,
                    rows.column(name).combine_chunks(),
                    clusters,
                )
            )
        return out
    except (
        pa.ArrowException,
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        OSError,
        RecursionError,  # a first line nested too deep for the parser: the same
    ):
        pass  # the line-by-line reading below finds and names what is wrong
    return _items_by_line(path, wanted, key, cluster)


#: The Arrow type of a cluster value (text or a number) as Arrow's JSON reader reads it.
_LEAF_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def _nested_type(head: dict[str, Any], parts: list[str]) -> pa.DataType:
    """The Arrow type of ``head[parts[0]]...[parts[-1]]``, only that path kept."""
    value: Any = head
    for part in parts:
        value = value[part]
    kind = _LEAF_TYPES[type(value)]  # (a KeyError: not a cluster value)
    for part in reversed(parts[1:]):
        kind = pa.struct([(part, kind)])
    return kind


def _parsed(
    doc_id: pa.Array,
    hashes: pa.Array | None,
    column: pa.Array,
    clusters: pa.Array | None,
) -> ParsedMetric:
    """One metric's documents, values and clusters, checked (a ValueError: read again)."""
    is_list = pa.types.is_list(column.type)
    items = pc.list_flatten(column) if is_list else column
    if (
        not len(doc_id)
        or doc_id.null_count
        or column.null_count
        or items.null_count
        or pc.count_distinct(doc_id).as_py() != len(doc_id)
        or (hashes is not None and hashes.null_count)
        or (clusters is not None and clusters.null_count)
    ):
        msg = "a line is missing, repeated or null"
        raise ValueError(msg)
    values = np.asarray(to_numpy(pc.cast(items, pa.float64())), dtype=np.float64)
    if not np.isfinite(values).all():
        msg = "a value is not finite"
        raise ValueError(msg)
    lengths = (
        to_numpy(pc.list_value_length(column).cast(pa.int64())) if is_list else None
    )
    documents, n_duplicated = doc_id, 0
    if hashes is not None:
        documents, n_duplicated = _copy_keys(hashes)
    return ParsedMetric(
        documents=documents,
        lengths=lengths,
        values=values,
        clusters=clusters,
        n_duplicated=n_duplicated,
    )


def _copy_keys(hashes: pa.Array) -> tuple[pa.Array, int]:
    """Document hashes as keys: the k-th copy of a repeated one gets ``#k`` (k >= 1)."""
    hashes = hashes.cast(pa.string())
    distinct = pc.count_distinct(hashes).as_py()
    if distinct == len(hashes):
        return hashes, 0
    code = to_numpy(pc.dictionary_encode(hashes).indices.cast(pa.int64()))
    order = np.argsort(code, kind="stable")  # each hash's lines, in line order
    ranked = code[order]
    start = np.r_[0, np.flatnonzero(ranked[1:] != ranked[:-1]) + 1]
    copy = np.empty(code.size, dtype=np.int64)
    copy[order] = np.arange(code.size) - np.repeat(
        start, np.diff(np.r_[start, code.size])
    )
    empty = scalar("", pa.string())
    suffix = pc.binary_join_element_wise(
        strings(["#"] * code.size), numbers(copy, pa.int64()).cast(pa.string()), empty
    )
    keyed = pc.if_else(
        booleans(copy > 0), pc.binary_join_element_wise(hashes, suffix, empty), hashes
    )
    return keyed, len(hashes) - distinct


def _items_by_line(
    path: Path, wanted: list[tuple[str, str]], key: DocumentKey, cluster: str | None
) -> list[ParsedMetric]:
    """The slow, exact reading: each line parsed alone; the first problem is raised.

    Args:
        path: The sample file.
        wanted: The suite's metrics as ``(name, filter)`` (filter '' is ``none``).
        key: How documents are matched (``doc_hash``: every line needs one).
        cluster: The suite's cluster key (a dotted path into the line), or None.

    Raises:
        InputError: The first bad line or key, or a metric with no document or
            a list in some lines only.
    """
    parts = cluster.split(".") if cluster else []
    filters = {kept or "none" for _, kept in wanted}
    doc_ids: dict[str, list[int]] = {kept: [] for kept in filters}
    hashes: dict[str, list[str]] = defaultdict(list)
    clusters: dict[str, list[Any]] = defaultdict(list)
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
        if key == "doc_hash":
            text = line.get("doc_hash")
            if not isinstance(text, str):
                msg = f"{path}: line {number}: no doc_hash, though the task's files give one on their first line.\nHint: the harness writes doc_hash on every line; give it on every line or on none."
                raise InputError(msg)
            hashes[kept].append(text)
        if parts:
            clusters[kept].append(_cluster_value(path, number, line, parts))
        for name, metric_filter in wanted:
            if (metric_filter or "none") == kept:
                collected[name, metric_filter].append(
                    _checked(path, number, name, line.get(name, _MISSING))
                )
    out = []
    for pair in wanted:
        got, kept = collected[pair], pair[1] or "none"
        if _is_list(path, pair, got):
            lengths = np.array([len(v) for v in got], dtype=np.int64)
            offsets = numbers(np.r_[0, np.cumsum(lengths)].astype(np.int32), pa.int32())
            flat = numbers(np.array([float(x) for v in got for x in v]), pa.float64())
            column = pa.ListArray.from_arrays(offsets, flat)
        else:
            column = numbers(np.array([float(v) for v in got]), pa.float64())
        out.append(
            _parsed(
                numbers(np.array(doc_ids[kept], dtype=np.int64), pa.int64()),
                strings(hashes[kept]) if key == "doc_hash" else None,
                column,
                _cluster_array(clusters[kept]) if parts else None,
            )
        )
    return out


def _cluster_value(
    path: Path, number: int, line: dict[str, Any], parts: list[str]
) -> Any:
    """The value at a cluster key's dotted path, or an error naming the line."""
    value: Any = line
    for part in parts:
        value = value.get(part) if isinstance(value, dict) else None
    if value is None or not isinstance(value, str | int | float | bool):
        what = (
            "missing"
            if value is None
            else f"{type(value).__name__}, not a text or number"
        )
        msg = f"{path}: line {number}: the cluster key {'.'.join(parts)!r} (the suite's) is {what}.\nHint: every line of a clustered task needs the field; fix the lines, or remove cluster from the suite."
        raise InputError(msg)
    return value


def _cluster_array(values: list[Any]) -> pa.Array:
    """Cluster values as one Arrow type (mixed kinds, and text, as text)."""
    kinds = {type(v) for v in values}
    if kinds <= {int}:
        return numbers(np.array(values, dtype=np.int64), pa.int64())
    if kinds <= {float}:
        return numbers(np.array(values, dtype=np.float64), pa.float64())
    if kinds <= {bool}:
        return booleans(np.array(values, dtype=bool))
    return strings([str(v) for v in values])
