"""Where a duplicate score was first given: the failed run's inputs read once more.

The engines catch a (variant, subtask) given twice with a seen matrix of one
bit per cell, which says that an earlier input gave it but not which. When a
run fails with such duplicates, :func:`name_earlier_inputs` reads the inputs
again in the same order, with a fresh encoder (which gives the same codes), and
names the file that first gave each repeated score. This costs a second read
of the inputs, on the error path only.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.core import arrow
from lbnorm.core.errors import ValidationError
from lbnorm.core.schemas import Batch
from lbnorm.engines.encode import KeyEncoder
from lbnorm.readers import Inputs
from lbnorm.suites import Suite

__all__ = ["EARLIER", "name_earlier_inputs"]

#: What a duplicate failure says when the engine cannot name the earlier input.
EARLIER = "also given by an earlier input"
_SHOWN = 5  # failures of one check the message names (as lbnorm.engines.validate)
_NAMED = 3  # earlier inputs named per duplicate


def name_earlier_inputs(
    error: ValidationError, inputs: Inputs, suite: Suite
) -> ValidationError:
    """The same error, each duplicate naming the input that gave the score first.

    Args:
        error: The run's validation error.
        inputs: The run's inputs (read again: eager batches and Parquet files).
        suite: The run's suite.

    Returns:
        `error` itself when no duplicate points at an earlier input, else a new
        error whose failures and message name the earlier inputs.
    """
    table = error.failure_table
    checks = table["check"].to_pylist()
    values = table["value"].to_pylist()
    if not any(
        check == "duplicate_score" and value == EARLIER
        for check, value in zip(checks, values, strict=True)
    ):
        return error
    # one share of one: every batch, in the order the run read them
    earlier = _earlier_sources(inputs.partition(0, 1), suite)
    columns = ["source", "model", "benchmark", "subtask"]
    keys = [tuple(row.values()) for row in table.select(columns).to_pylist()]
    named = []
    for check, value, key in zip(checks, values, keys, strict=True):
        sources = earlier.get(key) if check == "duplicate_score" else None
        if value == EARLIER and sources:
            shown = ", ".join(
                "an earlier part of this file" if name == key[0] else name
                for name in sorted(sources)[:_NAMED]
            )
            more = f" and {len(sources) - _NAMED} more" if len(sources) > _NAMED else ""
            value = f"also given by {shown}{more}"
        named.append(value)
    message = _renamed(str(error), checks, values, named)
    column = table.column_names.index("value")
    renamed = table.set_column(column, "value", arrow.strings(named))
    return ValidationError(message, renamed)


def _earlier_sources(
    batches: Iterator[Batch], suite: Suite
) -> dict[tuple[object, ...], set[str]]:
    """For each repeated (source, model, benchmark, subtask), the inputs that gave it before."""
    pairs = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
    encoder = KeyEncoder(pairs)
    n_subtasks = max(len(pairs), 1)
    first = np.zeros(0, dtype=np.int32)  # per cell: 1 + the first source's index
    found: dict[tuple[object, ...], set[str]] = {}
    index: dict[str, int] = {}  # each input's position, in the order first seen
    for batch in batches:
        row_source = _row_sources(batch, index)  # 1 + each row's source
        variant, subtask = encoder.encode(batch.table)
        rows = np.flatnonzero((variant >= 0) & (subtask >= 0))
        cells = variant[rows] * n_subtasks + subtask[rows]
        if cells.size and cells.max() >= first.size:
            grown = np.zeros(max(2 * first.size, int(cells.max()) + 1), dtype=np.int32)
            grown[: first.size] = first
            first = grown
        given = first[cells]
        is_repeat = given > 0  # given by an earlier batch (of this file, too)
        if is_repeat.any():
            limit = 64 * _SHOWN  # the first repeats of a batch: enough for a message
            at = rows[is_repeat][:limit]
            picked = batch.table.take(arrow.array(at))
            names = [
                picked[name].to_pylist() for name in ("model", "benchmark", "subtask")
            ]
            later = row_source[at].tolist()
            earlier = given[is_repeat][:limit].tolist()
            sources = list(index)
            for key, this, that in zip(
                zip(*names, strict=True), later, earlier, strict=True
            ):
                found.setdefault((sources[this - 1], *key), set()).add(
                    sources[that - 1]
                )
        is_new = given == 0
        new_cells, first_at = np.unique(cells[is_new], return_index=True)
        first[new_cells] = row_source[rows[is_new][first_at]]
    return found


def _renamed(
    message: str, checks: list[str], values: list[str], named: list[str]
) -> str:
    """The message with each duplicate it shows naming its earlier inputs.

    The message names the first :data:`_SHOWN` failures of each check, in the
    failure table's order.
    """
    shown = [
        (value, new)
        for check, value, new in zip(checks, values, named, strict=True)
        if check == "duplicate_score"
    ][:_SHOWN]
    lines = message.split("\n")
    for at, line in enumerate(lines):
        if line.startswith("- duplicate_score: "):
            parts = line.split(EARLIER)
            text = parts[0]
            replacements = iter(new for old, new in shown if old == EARLIER)
            for part in parts[1:]:
                text += next(replacements, EARLIER) + part
            lines[at] = text
    return "\n".join(lines)


def _row_sources(batch: Batch, index: dict[str, int]) -> npt.NDArray[np.int32]:
    """1 + the position in `index` (a new input added last) of each row's input file."""
    table = batch.table
    if "source" not in table.column_names:
        code = index.setdefault(batch.source, len(index)) + 1
        return np.full(table.num_rows, code, dtype=np.int32)
    column = table["source"].cast(pa.string()).combine_chunks().dictionary_encode()
    names = column.dictionary.to_pylist()
    for name in names:
        index.setdefault(name, len(index))
    codes = np.array([index[name] + 1 for name in names], dtype=np.int32)
    row_codes: npt.NDArray[np.int32] = codes[arrow.to_numpy(column.indices)]
    return row_codes
