"""The in-memory engine: every score in a dense (variant x subtask) store.

Scores arrive as Arrow batches (Parquet row groups are streamed, so the working
set stays one row group; other formats arrive as one batch). Each batch is encoded
to integer codes (:class:`lbnorm.engines.encode.KeyEncoder`), checked (every failure is
collected, with file and row), and scattered into dense ``(variant, subtask)``
matrices: the raw score and, for the subtask table, its stderr, sample count,
metric and source file. A cell is written once, so the result does not depend
on the order rows or files arrive in. At the end, variants are sorted by key,
the kernel sums each benchmark exactly, and the subtask table is built from
the matrices a benchmark at a time, as the writer asks for it: one Parquet row
group each, so a 20M-row table never sits whole in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm._runtime import keep_freed_memory
from lbnorm.core import arrow
from lbnorm.core.options import RunOptions, UnknownSubtasks
from lbnorm.core.schemas import KEY_COLUMNS, SCORES, SUBTASK_SCORES, Batch
from lbnorm.engines.encode import KeyEncoder, Variants, factorize
from lbnorm.engines.kernel import (
    FloatArray,
    IntArray,
    aggregate_benchmarks,
    normalize_matrix,
    normalize_rows,
)
from lbnorm.engines.result import (
    Result,
    assemble_result,
    start_benchmark_keys,
    with_present_values,
)
from lbnorm.engines.validate import (
    MAX_FAILURES_SHOWN,
    check_batch,
    describe_failures,
    failure_error,
)
from lbnorm.readers import Inputs
from lbnorm.suites import Suite, suite_arrays

__all__ = [
    "DenseScores",
    "DenseSubtasks",
    "MemoryJob",
    "collect_scores",
    "compute",
    "start",
]


def start(inputs: Inputs, suite: Suite, options: RunOptions) -> MemoryJob:
    """Hold every score in a dense store (the engine interface): see :class:`MemoryJob`."""
    return MemoryJob(inputs, suite, options)


def compute(inputs: Inputs, suite: Suite, options: RunOptions) -> Result:
    """Normalize every score held in one dense store, the whole way.

    Args:
        inputs: The score batches and the catalog of their files.
        suite: The suite.
        options: The run's options (``unknown``, ``missing``, ``subtasks``).

    Returns:
        The result, with the subtask table when ``options.subtasks``.

    Raises:
        ValidationError: Any check failed in any batch; ``failures`` lists them.
    """
    return start(inputs, suite, options).finish()


class MemoryJob:
    """A run over a dense store: the subtask table comes sorted, after all input.

    Rows of the subtask table are benchmark-major, then variant in key order,
    then subtask, whatever order the input came in.
    """

    def __init__(self, inputs: Inputs, suite: Suite, options: RunOptions) -> None:
        self._inputs, self._suite, self._options = inputs, suite, options
        self._result: Result | None = None
        keep_freed_memory()  # (if the command line allowed it)

    @property
    def subtask_schema(self) -> pa.Schema | None:
        """The subtask table's schema (with kept extra columns: after reading)."""
        if not self._options.subtasks:
            return None
        parts = self.finish().subtask_parts
        return SUBTASK_SCORES if parts is None else parts.schema

    def subtask_parts(self) -> Iterator[pa.Table]:
        """The subtask table a benchmark at a time (after reading every batch)."""
        parts = self.finish().subtask_parts
        return iter(()) if parts is None else parts.parts()

    def finish(self) -> Result:
        """Read, check and store every batch, then sum and build the result."""
        if self._result is None:
            self._result = self._compute()
        return self._result

    def _compute(self) -> Result:
        inputs, suite, options = self._inputs, self._suite, self._options
        dense = collect_scores(
            inputs.batches,
            suite,
            unknown=options.unknown,
            expected_rows=inputs.num_rows,
            keep_details=options.subtasks,
            failure_limit=None if options.failures else MAX_FAILURES_SHOWN,
        )
        arrays = suite_arrays(suite)
        order = dense.variants.order()
        variants = dense.variants.take(order)
        keys = start_benchmark_keys(variants, suite)  # while the scores are summed
        raw = dense.sorted("raw", order)  # (subtask, variant), variants in key order
        details = {
            name: dense.sorted(name, order).T.astype(np.float64, copy=False)
            for name in ("stderr", "n_samples")
            if name in dense.matrices
        }
        benchmark = aggregate_benchmarks(
            raw.T,
            arrays,
            missing=options.missing,
            stderr=details.get("stderr"),
            n_samples=details.get("n_samples"),
        )
        values = normalize_matrix(raw.T, arrays) if arrays.keeps_scores else None
        is_present = ~np.isnan(raw)
        floor = arrays.lower_bound if arrays.scales is None else arrays.scales.floor
        n_clipped = int(np.count_nonzero(raw < floor[:, None]))
        parts = DenseSubtasks(dense, order, suite, raw) if options.subtasks else None
        return assemble_result(
            variants,
            benchmark,
            suite,
            options=options,
            files=inputs.catalog,
            subtask_parts=parts,
            n_ignored_rows=dense.n_ignored,
            n_scores=int(np.count_nonzero(is_present)),
            n_clipped=n_clipped,
            keys=keys,
            values=values,
        )


class DenseScores:
    """Every accepted score (and its details) in dense ``(subtask, variant)`` matrices.

    Subtask-major, so a benchmark's subtasks (contiguous in suite order) are one
    contiguous block. Only the columns an input has are kept.

    Attributes:
        raw: Raw scores, NaN where absent (columns in variant code order).
        stderr: Standard errors, NaN where absent or null (None: not kept).
        n_samples: Sample counts, 0 where absent or null (None: not kept).
        metric: Codes into :attr:`metrics` (-1: absent).
        source: Codes into :attr:`sources` (-1: absent).
        rows: Each cell's row in :attr:`kept` (only when extra columns are kept).
        variants: The variant keys, in code order.
        n_ignored: Rows dropped as unknown subtasks under ``unknown="ignore"``.
    """

    _FILLS: ClassVar[dict[str, tuple[type[np.generic], float]]] = {
        "raw": (np.float64, np.nan),
        "stderr": (np.float64, np.nan),
        "n_samples": (np.int64, 0),
        "metric": (np.int32, -1),
        "source": (np.int32, -1),
        "rows": (np.int64, -1),
    }

    def __init__(self, n_subtasks: int, capacity: int, *, keep_details: bool) -> None:
        self._shape = (n_subtasks, max(capacity, 16))
        self.matrices: dict[str, npt.NDArray[Any]] = {"raw": self._new("raw")}
        self.keep_details = keep_details
        self.metrics: dict[str, int] = {}
        self.sources: dict[str, int] = {}
        self.extras: list[str] = []
        self._kept: list[pa.Table] = []
        self._offset = 0
        self.variants = Variants(vocabularies={}, codes=np.zeros((0, 4), np.int64))
        self.n_ignored = 0

    @property
    def raw(self) -> FloatArray:
        """Raw scores, ``(subtask, variant)``, NaN where absent."""
        raw: FloatArray = self.matrices["raw"][:, : len(self.variants) or None]
        return raw

    @property
    def kept(self) -> pa.Table | None:
        """The kept extra columns of every batch, concatenated (None: none kept)."""
        if not self.extras:
            return None
        aligned = []
        for table in self._kept:
            for name in self.extras:
                if name not in table.column_names:
                    table = table.append_column(name, pa.nulls(table.num_rows))
            aligned.append(table.select(self.extras))
        return pa.concat_tables(aligned, promote_options="permissive")

    def sorted(
        self, name: str, order: IntArray, subtasks: slice = slice(None)
    ) -> npt.NDArray[Any]:
        """A matrix's `subtasks` rows with its variants in `order` (None if not kept)."""
        return np.take(self.matrices[name][subtasks], order, axis=1)

    def is_stored(self, variant: IntArray, subtask: IntArray) -> npt.NDArray[np.bool_]:
        """Which (variant, subtask) pairs already hold a score."""
        capacity = self._shape[1]
        inside = variant < capacity
        if inside.all():
            stored: npt.NDArray[np.bool_] = ~np.isnan(
                self.matrices["raw"].ravel()[subtask * capacity + variant]
            )
            return stored
        stored = np.zeros(variant.shape, dtype=bool)
        flat = subtask[inside] * capacity + variant[inside]
        stored[inside] = ~np.isnan(self.matrices["raw"].ravel()[flat])
        return stored

    def reserve(self, n_variants: int) -> None:
        """Make room for `n_variants` (doubling, so growth stays amortized)."""
        n_subtasks, capacity = self._shape
        if n_variants <= capacity:
            return
        self._shape = (n_subtasks, max(2 * capacity, n_variants))
        for name, matrix in self.matrices.items():
            grown = self._new(name)
            grown[:, :capacity] = matrix
            self.matrices[name] = grown

    def add(
        self, batch: Batch, rows: IntArray | None, variant: IntArray, subtask: IntArray
    ) -> None:
        """Store a batch's accepted `rows` (None: all) in their cells."""
        table, picked = batch.table, _Picked(rows)
        cell = subtask * self._shape[1] + variant  # in the flattened matrices
        self._matrix("raw")[cell] = picked.floats(table, "raw_score")
        if "stderr" in table.column_names:  # the standard errors need both
            self._matrix("stderr")[cell] = picked.floats(table, "stderr")
        if "n_samples" in table.column_names:
            self._matrix("n_samples")[cell] = picked.integers(table, "n_samples")
        if not self.keep_details:
            return
        self._matrix("metric")[cell] = picked.codes(table, "metric", self.metrics, "")
        self._matrix("source")[cell] = picked.codes(
            table, "source", self.sources, batch.source
        )
        extras = [
            name
            for name in table.column_names
            if name not in SCORES.names and name != "_row"
        ]
        if extras:
            positions = np.arange(table.num_rows) if rows is None else rows
            self._matrix("rows")[cell] = self._offset + positions
            self.extras.extend(name for name in extras if name not in self.extras)
        self._kept.append(table.select(extras))
        self._offset += table.num_rows

    def _matrix(self, name: str) -> npt.NDArray[Any]:
        """A matrix, flattened (created on first use: the input has the column)."""
        if name not in self.matrices:
            self.matrices[name] = self._new(name)
        return self.matrices[name].ravel()

    def _new(self, name: str) -> npt.NDArray[Any]:
        dtype, fill = self._FILLS[name]
        return np.full(self._shape, fill, dtype=dtype)


class _Picked:
    """The accepted rows of a batch (None: all of them), for gathering its columns."""

    def __init__(self, positions: IntArray | None) -> None:
        self.positions = positions

    def _take(self, values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return values if self.positions is None else values[self.positions]

    def floats(self, table: pa.Table, name: str) -> FloatArray:
        values = arrow.to_numpy(table.column(name), null=np.nan)
        return self._take(np.asarray(values, dtype=np.float64))

    def integers(self, table: pa.Table, name: str) -> IntArray:
        values = arrow.to_numpy(table.column(name), null=0)
        return self._take(np.asarray(values, dtype=np.int64))

    def codes(
        self, table: pa.Table, name: str, registry: dict[str, int], default: str
    ) -> npt.NDArray[np.int32]:
        """Each accepted row's text in `name` as a code into `registry` (grown)."""
        if name not in table.column_names:
            code = registry.setdefault(default, len(registry))
            return np.asarray(code, dtype=np.int32)  # one code for every row
        column = table.column(name)
        if not pa.types.is_dictionary(column.type):
            column = column.dictionary_encode()
        column = column.unify_dictionaries() if column.num_chunks > 1 else column
        chunks = column.chunks
        dictionary = (
            chunks[0].dictionary.cast(pa.string()).to_pylist() if chunks else []
        )
        ids = np.array(
            [registry.setdefault(value or "", len(registry)) for value in dictionary]
            + [registry.setdefault("", len(registry))],
            dtype=np.int32,
        )  # few distinct metrics and files per batch; the last id stands for null
        indices = np.concatenate(
            [arrow.to_numpy(chunk.indices, null=-1) for chunk in chunks]
            or [np.zeros(0, np.int32)]
        )
        codes: npt.NDArray[np.int32] = ids[self._take(indices)]
        return codes


def collect_scores(
    batches: Iterable[Batch],
    suite: Suite,
    *,
    unknown: UnknownSubtasks = "error",
    keep_details: bool = True,
    expected_rows: int = 0,
    failure_limit: int | None = MAX_FAILURES_SHOWN,
) -> DenseScores:
    """Encode, check and scatter every batch; raise once with all failures.

    Args:
        batches: The score batches.
        suite: The suite.
        unknown: ``error`` reports unknown subtasks; ``ignore`` drops them.
        keep_details: Keep what the subtask table needs besides the raw score
            (metric, stderr, n_samples, source, kept extra columns).
        expected_rows: Rows expected in all, to size the dense store up front.
        failure_limit: Failure rows described per check and batch (None: all).

    Returns:
        The dense scores.

    Raises:
        ValidationError: Any check failed in any batch; ``failures`` lists them.
    """
    pairs = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
    encoder = KeyEncoder(pairs)
    scales = suite_arrays(suite).scales
    dense = DenseScores(
        len(pairs), expected_rows // max(len(pairs), 1) + 1, keep_details=keep_details
    )
    failures: list[pa.Table] = []
    n_failed = 0
    for batch in batches:
        checked = check_batch(
            batch, encoder, unknown=unknown, seen_before=dense.is_stored, scales=scales
        )
        dense.n_ignored += checked.n_ignored
        if checked.n_failed:
            failures.extend(
                describe_failures(
                    batch,
                    checked.failed,
                    known=encoder.suite_pairs,
                    limit=failure_limit,
                )
            )
            n_failed += checked.n_failed
        dense.reserve(encoder.n_variants)
        if failures:  # the run fails: keep checking, stop storing
            continue
        if checked.accepted.all():
            dense.add(batch, None, checked.variant, checked.subtask)
        else:
            rows = np.flatnonzero(checked.accepted)
            dense.add(batch, rows, checked.variant[rows], checked.subtask[rows])
    if failures:
        raise failure_error(failures, total=n_failed)
    dense.variants = encoder.variants()
    return dense


class DenseSubtasks:
    """The subtask table of a dense store, built a benchmark at a time.

    Rows are benchmark-major, then variant (in key order), then subtask (in
    suite order), so each benchmark is one Parquet row group a reader can skip
    to. Text columns are dictionary-encoded by code: no string is built per row.
    """

    def __init__(
        self, dense: DenseScores, order: IntArray, suite: Suite, raw: FloatArray
    ) -> None:
        self._dense = dense
        self._order = order
        self._suite = suite
        self._raw = raw  # (subtask, variant), variants in key order
        self._variants = dense.variants.take(order)
        self._arrays = suite_arrays(suite)
        extras = dense.kept
        self._kept = extras
        self.schema = SUBTASK_SCORES
        if extras is not None:
            for field in extras.schema:
                kind = (
                    pa.string() if pa.types.is_large_string(field.type) else field.type
                )
                self.schema = self.schema.append(pa.field(field.name, kind))

    @property
    def num_rows(self) -> int:
        """Rows in all parts."""
        return int(np.count_nonzero(~np.isnan(self._raw)))

    def parts(self) -> Iterator[pa.Table]:
        """Each benchmark's rows, conformed to :attr:`schema`."""
        suite, arrays, dense = self._suite, self._arrays, self._dense
        n_variants = len(self._variants)
        keys = {
            name: self._variants.dictionary(name)
            for name in KEY_COLUMNS
            if name != "chat_template"
        }
        flags = self._variants.codes[:, 3].astype(bool)
        pairs = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
        subtask_codes, first = factorize(
            np.asarray([s for _, s in pairs], dtype=object)
        )
        subtask_names = arrow.strings([pairs[i][1] for i in first])
        benchmark_names = arrow.strings(list(suite.benchmark_names))
        dictionaries = {
            "metric": _sorted_dictionary(dense.metrics),
            "source": _sorted_dictionary(dense.sources),
        }
        start = 0
        for index, benchmark in enumerate(suite.benchmarks):
            subtasks = slice(start, start + len(benchmark.subtasks))
            start = subtasks.stop
            k = subtasks.stop - subtasks.start
            block = self._raw[subtasks]  # (k, variant)

            present: npt.NDArray[np.bool_] | None = ~np.isnan(block.T).ravel()
            variant = np.repeat(np.arange(n_variants), k)
            subtask = np.tile(np.arange(subtasks.start, subtasks.stop), n_variants)
            if present is not None and present.all():
                present = None  # every cell: no gathering
            if present is not None:
                variant, subtask = variant[present], subtask[present]

            def cells(values: npt.NDArray[Any], present: Any = present) -> Any:
                return _cells(values, present)

            raw = cells(block)
            normalized, lower_bound, is_clipped = normalize_rows(raw, subtask, arrays)
            n_rows = raw.size
            data: dict[str, pa.Array] = {
                name: arrow.dictionary(
                    np.asarray(arrow.to_numpy(key.indices), np.int32)[variant],
                    key.dictionary,
                )
                for name, key in keys.items()
            }
            data["chat_template"] = arrow.array(flags[variant])
            data["benchmark"] = arrow.dictionary(
                np.full(n_rows, index, dtype=np.int32), benchmark_names
            )
            data["subtask"] = arrow.dictionary(subtask_codes[subtask], subtask_names)
            data["raw_score"] = arrow.array(raw)
            data["lower_bound"] = arrow.array(lower_bound)
            data["normalized_score"] = arrow.array(normalized)
            data["is_clipped"] = arrow.array(is_clipped)
            data["stderr"] = (
                _nullable(cells(dense.sorted("stderr", self._order, subtasks)))
                if "stderr" in dense.matrices
                else pa.nulls(n_rows, pa.float64())
            )
            data["n_samples"] = (
                _counts(cells(dense.sorted("n_samples", self._order, subtasks)))
                if "n_samples" in dense.matrices
                else pa.nulls(n_rows, pa.int64())
            )
            for name, (position, names) in dictionaries.items():
                codes = (
                    cells(dense.sorted(name, self._order, subtasks))
                    if name in dense.matrices
                    else np.zeros(n_rows, dtype=np.int32)
                )
                data[name] = arrow.dictionary(position[codes], names)
            if self._kept is not None:
                at = cells(dense.sorted("rows", self._order, subtasks))
                picked = self._kept.take(arrow.array(at))
                for name in picked.column_names:
                    data[name] = picked.column(name).combine_chunks()
            yield with_present_values(
                pa.Table.from_arrays(
                    [_typed(data[field.name], field.type) for field in self.schema],
                    schema=self.schema,
                )
            )


def _sorted_dictionary(
    registry: dict[str, int],
) -> tuple[npt.NDArray[np.int32], pa.Array]:
    """A registry's strings sorted, and each code's position among them."""
    names = sorted(registry)
    position = np.zeros(max(len(registry), 1), dtype=np.int32)
    for at, name in enumerate(names):
        position[registry[name]] = at
    return position, arrow.strings(names or [""])


def _cells(
    values: npt.NDArray[Any], present: npt.NDArray[np.bool_] | None
) -> npt.NDArray[Any]:
    """A ``(subtask, variant)`` block's cells variant-major, subtask-minor (present only)."""
    flat = np.ascontiguousarray(values.T).ravel()
    return flat if present is None else flat[present]


def _typed(values: pa.Array, kind: pa.DataType) -> pa.Array:
    return values if values.type == kind else values.cast(kind)


def _nullable(values: FloatArray) -> pa.Array:
    return arrow.array(values, mask=np.isnan(values))


def _counts(values: IntArray) -> pa.Array:
    return arrow.array(values, pa.int64(), mask=values <= 0)
