"""Harness sample files, read for their items: each metric's documents, values and clusters.

The part of :mod:`lbnorm.readers.items` that parses ``samples_<task>_<timestamp>.jsonl``
lines: Arrow's JSON reader parses only the fields needed (``doc_id``, ``filter``,
``doc_hash`` where documents are matched by it, the suite's metrics and the
cluster key's path); a file it refuses, or whose lines break a rule, is read again
line by line, which names the line and the key. The metric values follow the
sample reader's own rules (:mod:`lbnorm.readers.samples`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.arrow import booleans, numbers, scalar, strings, to_numpy
from lbnorm.core.errors import InputError
from lbnorm.readers.sample_lines import (  # the sample reader's own rules, not a copy
    HINT_LINE,
    arrow_type,
    first_line,
    read_fields,
    read_lines,
    rows_of_filter,
)
from lbnorm.readers.samples import SAMPLES_FILE

__all__ = [
    "HINT_LINE",
    "DocumentKey",
    "ParsedMetric",
    "document_key_of",
    "read_metric_items",
    "task_keys",
]

#: How a task's documents are matched across models.
DocumentKey = Literal["doc_id", "doc_hash"]
_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]


@dataclass(slots=True)
class ParsedMetric:
    """One metric of one sample file: per line its document, per item its value."""

    documents: pa.Array  # per line: doc_id (int64) or the doc_hash key (string)
    lengths: _I64 | None  # per line, its list's length (a list-valued metric)
    values: _F64  # per item
    clusters: pa.Array | None  # per line, its cluster value
    n_duplicated: int = 0


def document_key_of(path: Path) -> DocumentKey:
    """How a sample file's documents can be matched: ``doc_hash`` if its first line has one.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "samples_t_2024-01-01T00-00-00.jsonl"
        >>> _ = path.write_text('{"doc_id": 0, "doc_hash": "ab", "acc": 1}')
        >>> document_key_of(path)
        'doc_hash'
    """
    try:
        head = first_line(path)
    except (OSError, ValueError):
        return "doc_id"  # the reading proper names the problem
    return (
        "doc_hash"
        if isinstance(head, dict) and isinstance(head.get("doc_hash"), str)
        else "doc_id"
    )


def task_keys(paths: Sequence[Path]) -> dict[str, DocumentKey]:
    """Per task, ``doc_hash`` if every sample file of it records one on its first line."""
    keys: dict[str, DocumentKey] = {}
    for path in paths:
        match = SAMPLES_FILE.match(path.name)
        if match is None:
            continue
        task = match["task"]
        if keys.get(task) != "doc_id":
            keys[task] = document_key_of(path)
    return keys


def read_metric_items(
    path: Path, wanted: list[tuple[str, str]], key: DocumentKey, cluster: str | None
) -> list[ParsedMetric]:
    """Per suite metric (``name``, ``filter``) of a sample file: its documents and values.

    Arrow's JSON reader parses the fields needed; a file it refuses, or whose
    lines break a rule, is read again line by line, which names the line.
    """
    try:
        head = first_line(path)
        fields: dict[str, pa.DataType] = {}
        if key == "doc_hash":
            fields["doc_hash"] = pa.string()
        for name, _ in wanted:
            fields[name] = arrow_type(head[name])
        path_parts = cluster.split(".") if cluster else []
        if path_parts:
            fields[path_parts[0]] = _nested_type(head, path_parts)
        table = read_fields(path, fields)
        out = []
        for name, kept in wanted:
            rows = rows_of_filter(table, kept)
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
    return _read_lines(path, wanted, key, cluster)


def _nested_type(head: dict[str, Any], parts: list[str]) -> pa.DataType:
    """The Arrow type of ``head[parts[0]]...[parts[-1]]``, only that path kept."""
    value: Any = head
    for part in parts:
        value = value[part]
    kind: pa.DataType = (
        pa.bool_()
        if isinstance(value, bool)
        else pa.int64()
        if isinstance(value, int)
        else pa.float64()
        if isinstance(value, float)
        else pa.string()
    )
    if not isinstance(value, bool | int | float | str):
        raise TypeError(parts)
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


def _read_lines(
    path: Path, wanted: list[tuple[str, str]], key: DocumentKey, cluster: str | None
) -> list[ParsedMetric]:
    """The slow, exact reading: each line parsed alone; the first problem is raised."""
    parts = cluster.split(".") if cluster else []
    hashes: dict[str, list[str]] = defaultdict(list)
    clusters: dict[str, list[Any]] = defaultdict(list)

    def on_line(number: int, kept: str, line: dict[str, Any]) -> None:
        if key == "doc_hash":
            text = line.get("doc_hash")
            if not isinstance(text, str):
                msg = f"{path}: line {number}: no doc_hash, though the task's files give one on their first line.\nHint: the harness writes doc_hash on every line; give it on every line or on none."
                raise InputError(msg)
            hashes[kept].append(text)
        if parts:
            clusters[kept].append(_cluster_value(path, number, line, parts))

    doc_ids, metrics = read_lines(path, wanted, on_line=on_line)
    out = []
    for (_, metric_filter), (got, is_list) in zip(wanted, metrics, strict=True):
        kept = metric_filter or "none"
        if is_list:
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
