"""The subtask table held until the input ends, then sorted (``--engine memory``).

The stream engine writes each batch's rows as they come, in input order. Asked
for the ``memory`` order (the Python API's :func:`lbnorm.normalize_scores`,
``--engine memory``, and any run keeping extra columns, whose set and types are
known only once every batch is read), it hands each checked batch's accepted
rows to :class:`SortedParts` instead: their codes, scores and details as flat
arrays, and their extra columns. At the end the rows are sorted by benchmark
(suite order), variant (key order) and subtask (suite order), and built a
benchmark at a time: one Parquet row group each. Text columns are dictionaries
built from codes (no string per row); a benchmark's keys and names are in the
order their variants and subtasks sort, metric and source in text order, each
cut to the values its rows hold, so the table does not depend on the order
rows, batches or files came in.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.core import arrow
from lbnorm.core.schemas import SCORES, SUBTASK_SCORES, Batch
from lbnorm.engines.encode import Variants, factorize
from lbnorm.engines.kernel import SuiteArrays, normalize_rows
from lbnorm.engines.result import key_columns, with_present_values
from lbnorm.engines.validate import CheckedBatch
from lbnorm.suites import Suite, suite_arrays

__all__ = ["SortedParts"]

#: What is held per row of the checked batches, and its type (codes: 4 bytes a row).
_HELD = {
    "variant": np.int32,
    "subtask": np.int32,
    "raw": np.float64,
    "stderr": np.float64,
    "n_samples": np.float64,
}
#: Everything held per row: with codes into the metric and source registries.
_ROW_COLUMNS = (*_HELD, "metric", "source")


class SortedParts:
    """Every accepted row of a run, held for a subtask table sorted at the end."""

    def __init__(self, suite: Suite) -> None:
        self._suite = suite
        self._arrays = suite_arrays(suite)
        self._columns: dict[str, list[npt.NDArray[Any]]] = {
            name: [] for name in _ROW_COLUMNS
        }
        self._registries: dict[str, dict[str, int]] = {"metric": {}, "source": {}}
        self._kept: list[pa.Table] = []
        self.extras: list[str] = []
        self._schema: pa.Schema | None = None

    def add(self, batch: Batch, checked: CheckedBatch) -> None:
        """Hold a checked batch's accepted rows."""
        keep = checked.is_good
        is_all = bool(keep.all())
        table = batch.table if is_all else batch.table.filter(arrow.array(keep))
        columns = self._columns
        given = {  # (NaN: a detail not given)
            "variant": checked.variant,
            "subtask": checked.subtask,
            "raw": checked.scores,
            **checked.details,
        }
        for name, kind in _HELD.items():
            values = given[name] if name in given else np.full(keep.size, np.nan)
            columns[name].append((values if is_all else values[keep]).astype(kind))
        for name, default in (("metric", ""), ("source", batch.source)):
            columns[name].append(_codes(table, name, self._registries[name], default))
        extras = [
            n for n in table.column_names if n not in SCORES.names and n != "_row"
        ]
        self.extras.extend(name for name in extras if name not in self.extras)
        self._kept.append(table.select(extras))

    @property
    def schema(self) -> pa.Schema:
        """:data:`SUBTASK_SCORES`, then the kept extra columns (in order first seen)."""
        if self._schema is None:
            schema = SUBTASK_SCORES
            kept = self._kept_table()
            for field in [] if kept is None else kept.schema:
                kind = (
                    pa.string() if pa.types.is_large_string(field.type) else field.type
                )
                schema = schema.append(pa.field(field.name, kind))
            self._schema = schema
        return self._schema

    def _kept_table(self) -> pa.Table | None:
        """The kept extra columns of every row, nulls where a batch had none."""
        if not self.extras:
            return None
        # (a column a batch lacks is promoted to nulls there)
        kept = pa.concat_tables(self._kept, promote_options="permissive")
        return kept.select(self.extras)

    def parts(self, variants: Variants) -> Iterator[pa.Table]:
        """Each benchmark's rows, sorted, conformed to :attr:`schema`.

        Args:
            variants: The run's variant keys, in code order (the encoder's).
        """
        suite, arrays, schema = self._suite, self._arrays, self.schema
        rows = {}  # each column joined, its pieces let go before the next
        for name in _ROW_COLUMNS:
            rows[name] = _joined(self._columns.pop(name))
        order = variants.order()
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        ordered = variants.take(order)
        variant = rank[rows.pop("variant")]
        subtask = rows.pop("subtask").astype(np.int64)
        sort, bounds = _cell_order(variant, subtask, order.size, arrays)
        pairs = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
        subtask_codes, first = factorize(
            np.asarray([s for _, s in pairs], dtype=object)
        )
        subtask_names = arrow.strings([pairs[i][1] for i in first])
        benchmark_names = arrow.strings(list(suite.benchmark_names))
        texts = {
            name: _sorted_dictionary(self._registries[name])
            for name in ("metric", "source")
        }
        kept, self._kept = self._kept_table(), []
        for index in range(len(suite.benchmarks)):
            at = sort[bounds[index] : bounds[index + 1]]
            row_variant, row_subtask, raw = variant[at], subtask[at], rows["raw"][at]
            normalized, lower_bound, is_clipped = normalize_rows(
                raw, row_subtask, arrays
            )
            data = key_columns(ordered, row_variant)
            stderr, n_samples = rows["stderr"][at], rows["n_samples"][at]
            data.update(
                benchmark=arrow.dictionary(
                    np.full(at.size, index, dtype=np.int32), benchmark_names
                ),
                subtask=arrow.dictionary(subtask_codes[row_subtask], subtask_names),
                raw_score=arrow.array(raw),
                lower_bound=arrow.array(lower_bound),
                normalized_score=arrow.array(normalized),
                is_clipped=arrow.array(is_clipped),
                stderr=arrow.array(stderr, mask=np.isnan(stderr)),
                n_samples=arrow.array(
                    np.nan_to_num(n_samples).astype(np.int64), mask=np.isnan(n_samples)
                ),
            )
            for name, (position, names) in texts.items():
                data[name] = arrow.dictionary(position[rows[name][at]], names)
            if kept is not None:
                picked = kept.take(arrow.array(at))
                for name in picked.column_names:
                    data[name] = picked.column(name).combine_chunks()
            yield with_present_values(
                pa.Table.from_arrays(
                    [data[field.name].cast(field.type) for field in schema],
                    schema=schema,
                )
            )


def _cell_order(
    variant: npt.NDArray[np.int64],
    subtask: npt.NDArray[np.int64],
    n_variants: int,
    arrays: SuiteArrays,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The rows in (benchmark, variant, subtask) order, and where each benchmark starts.

    A (variant, subtask) pair comes once, so each row has its own cell in a
    benchmark-major dense layout: rows scattered to their cells and read back
    in cell order are sorted (linear: no comparison sort).
    """
    benchmark_index = arrays.benchmark_index
    n_subtasks = benchmark_index.size
    starts = arrays.benchmark_starts()  # each benchmark's first subtask
    first = starts[benchmark_index]  # per subtask
    width = np.diff(starts)[benchmark_index]
    benchmark = benchmark_index[subtask]
    cell = (
        first[subtask] * n_variants
        + variant * width[subtask]
        + (subtask - first[subtask])
    )
    kind: type[np.signedinteger[Any]] = np.int32 if variant.size < 2**31 else np.int64
    slot: npt.NDArray[np.signedinteger[Any]] = np.full(
        n_variants * n_subtasks, -1, kind
    )
    slot[cell] = np.arange(variant.size, dtype=kind)
    sort = slot[slot >= 0].astype(np.int64)
    rows = np.bincount(benchmark, minlength=starts.size - 1)
    return sort, np.concatenate([[0], np.cumsum(rows)])


def _joined(values: list[npt.NDArray[Any]]) -> npt.NDArray[Any]:
    return np.concatenate(values) if values else np.zeros(0, dtype=np.int64)


def _codes(
    table: pa.Table, name: str, registry: dict[str, int], default: str
) -> npt.NDArray[np.int32]:
    """Each row's text in `name` as a code into `registry` (grown; null: ``""``)."""
    if name not in table.column_names:
        code = registry.setdefault(default, len(registry))
        return np.full(table.num_rows, code, dtype=np.int32)
    column = table.column(name)
    if not pa.types.is_dictionary(column.type):
        column = column.dictionary_encode()
    column = column.unify_dictionaries() if column.num_chunks > 1 else column
    chunks = column.chunks
    dictionary = chunks[0].dictionary.cast(pa.string()).to_pylist() if chunks else []
    ids = np.array(
        [registry.setdefault(value or "", len(registry)) for value in dictionary]
        + [registry.setdefault("", len(registry))],
        dtype=np.int32,
    )  # few distinct metrics and files per batch; the last id stands for null
    indices = np.concatenate(
        [arrow.to_numpy(chunk.indices, null=-1) for chunk in chunks]
        or [np.zeros(0, np.int32)]
    )
    codes: npt.NDArray[np.int32] = ids[indices]
    return codes


def _sorted_dictionary(
    registry: dict[str, int],
) -> tuple[npt.NDArray[np.int32], pa.Array]:
    """A registry's strings sorted, and each code's position among them."""
    names = sorted(registry)
    position = np.zeros(max(len(registry), 1), dtype=np.int32)
    position[[registry[name] for name in names]] = np.arange(len(names))
    return position, arrow.strings(names or [""])
