"""The in-memory engine: every score in a dense (variant x subtask) store.

Scores arrive as Arrow batches (Parquet row groups are streamed, so the working
set stays one row group; other formats arrive as one batch). Each batch is encoded
to integer codes (:class:`lbnorm.encode.KeyEncoder`), checked (every failure is
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
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.encode import KeyEncoder, Variants, factorize
from lbnorm.kernel import FloatArray, IntArray, aggregate_benchmarks
from lbnorm.options import RunOptions, UnknownSubtasks
from lbnorm.readers import Inputs
from lbnorm.result import Result, assemble_result
from lbnorm.schemas import KEY_COLUMNS, SCORES, SUBTASK_SCORES, Batch
from lbnorm.suites import Suite, suite_arrays
from lbnorm.validate import check_batch, describe_failures, failure_error

__all__ = ["DenseScores", "DenseSubtasks", "collect_scores", "compute"]

_Matrix = TypeVar(
    "_Matrix", npt.NDArray[np.float64], npt.NDArray[np.int64], npt.NDArray[np.int32]
)

#: Columns of the subtask table the dense store keeps per cell (besides raw).
_DETAILS = ("metric", "stderr", "n_samples", "source")


def compute(inputs: Inputs, suite: Suite, options: RunOptions) -> Result:
    """Normalize every score held in one dense store (the engine interface).

    Args:
        inputs: The score batches and the catalog of their files.
        suite: The suite.
        options: The run's options (``unknown``, ``missing``, ``subtasks``).

    Returns:
        The result, with the subtask table when ``options.subtasks``.

    Raises:
        ValidationError: Any check failed in any batch; ``failures`` lists them.
    """
    dense = collect_scores(
        inputs.batches,
        suite,
        unknown=options.unknown,
        expected_rows=inputs.num_rows,
        keep_details=options.subtasks,
    )
    arrays = suite_arrays(suite)
    order = dense.variants.order()
    raw = dense.raw[order]
    benchmark = aggregate_benchmarks(raw, arrays, missing=options.missing)
    is_present = ~np.isnan(raw)
    n_clipped = int(np.count_nonzero(raw < arrays.lower_bound))  # NaN compares False
    del raw
    return assemble_result(
        dense.variants.take(order),
        benchmark,
        suite,
        options=options,
        files=inputs.files,
        subtask_parts=DenseSubtasks(dense, order, suite) if options.subtasks else None,
        n_ignored_rows=dense.n_ignored,
        n_scores=int(np.count_nonzero(is_present)),
        n_clipped=n_clipped,
    )


class DenseScores:
    """Every accepted score (and its details) in dense ``(variant, subtask)`` matrices.

    Attributes:
        raw: Raw scores, NaN where absent (rows in variant code order).
        stderr: Standard errors, NaN where absent or null (None: not kept).
        n_samples: Sample counts, 0 where absent or null (None: not kept).
        metric: Codes into :attr:`metrics` (-1: absent).
        source: Codes into :attr:`sources` (-1: absent).
        rows: Each cell's row in :attr:`kept` (only when extra columns are kept).
        kept: The batches' kept extra columns, concatenated.
        variants: The variant keys, in code order.
        n_ignored: Rows dropped as unknown subtasks under ``unknown="ignore"``.
    """

    def __init__(self, n_subtasks: int, capacity: int, *, keep_details: bool) -> None:
        shape = (max(capacity, 16), n_subtasks)
        self.raw: FloatArray = np.full(shape, np.nan)
        self.keep_details = keep_details
        self.stderr: FloatArray | None = None
        self.n_samples: IntArray | None = None
        self.metric: npt.NDArray[np.int32] | None = None
        self.source: npt.NDArray[np.int32] | None = None
        self.rows: IntArray | None = None
        self.metrics: dict[str, int] = {}
        self.sources: dict[str, int] = {}
        self.extras: list[str] = []
        self._kept: list[pa.Table] = []
        self._offset = 0
        self.variants = Variants(vocabularies={}, codes=np.zeros((0, 4), np.int64))
        self.n_ignored = 0

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

    def is_stored(self, variant: IntArray, subtask: IntArray) -> npt.NDArray[np.bool_]:
        """Which (variant, subtask) pairs already hold a score."""
        inside = variant < self.raw.shape[0]
        stored = np.zeros(variant.shape, dtype=bool)
        stored[inside] = ~np.isnan(self.raw[variant[inside], subtask[inside]])
        return stored

    def reserve(self, n_variants: int) -> None:
        """Make room for `n_variants` (doubling, so growth stays amortized)."""
        capacity = self.raw.shape[0]
        if n_variants <= capacity:
            return
        capacity = max(2 * capacity, n_variants)
        self.raw = _grow(self.raw, capacity, np.nan)
        if self.stderr is not None:
            self.stderr = _grow(self.stderr, capacity, np.nan)
        if self.n_samples is not None:
            self.n_samples = _grow(self.n_samples, capacity, 0)
        if self.metric is not None:
            self.metric = _grow(self.metric, capacity, -1)
        if self.source is not None:
            self.source = _grow(self.source, capacity, -1)
        if self.rows is not None:
            self.rows = _grow(self.rows, capacity, -1)

    def add(
        self, batch: Batch, rows: IntArray, variant: IntArray, subtask: IntArray
    ) -> None:
        """Store a batch's accepted `rows` in their cells (`variant`, `subtask`)."""
        table, picked = batch.table, _Picked(rows)
        self.raw[variant, subtask] = picked.floats(table, "raw_score")
        if not self.keep_details:
            return
        if "stderr" in table.column_names:
            self.stderr = self._matrix(self.stderr, np.float64, np.nan)
            self.stderr[variant, subtask] = picked.floats(table, "stderr")
        if "n_samples" in table.column_names:
            self.n_samples = self._matrix(self.n_samples, np.int64, 0)
            self.n_samples[variant, subtask] = picked.integers(table, "n_samples")
        self.metric = self._matrix(self.metric, np.int32, -1)
        self.metric[variant, subtask] = picked.codes(table, "metric", self.metrics, "")
        self.source = self._matrix(self.source, np.int32, -1)
        self.source[variant, subtask] = picked.codes(
            table, "source", self.sources, batch.source
        )
        extras = [
            name
            for name in table.column_names
            if name not in SCORES.names and name != "_row"
        ]
        if extras:
            self.rows = self._matrix(self.rows, np.int64, -1)
            self.rows[variant, subtask] = self._offset + picked.positions
            self.extras.extend(name for name in extras if name not in self.extras)
        self._kept.append(table.select(extras))
        self._offset += table.num_rows

    def _matrix(
        self, matrix: npt.NDArray[Any] | None, dtype: type[np.generic], fill: float
    ) -> npt.NDArray[Any]:
        """The matrix, or a new one filled with `fill` (the input has the column)."""
        return np.full(self.raw.shape, fill, dtype=dtype) if matrix is None else matrix


class _Picked:
    """The accepted rows of a batch, for gathering its columns."""

    def __init__(self, positions: IntArray) -> None:
        self.positions = positions

    def floats(self, table: pa.Table, name: str) -> FloatArray:
        values = np.asarray(table.column(name).to_numpy(), dtype=np.float64)
        return values[self.positions]

    def integers(self, table: pa.Table, name: str) -> IntArray:
        column = table.column(name).fill_null(0)
        return np.asarray(column.to_numpy(), dtype=np.int64)[self.positions]

    def codes(
        self, table: pa.Table, name: str, registry: dict[str, int], default: str
    ) -> npt.NDArray[np.int32]:
        """Each accepted row's text in `name` as a code into `registry` (grown)."""
        if name not in table.column_names:
            code = registry.setdefault(default, len(registry))
            return np.full(self.positions.size, code, dtype=np.int32)
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
            [chunk.indices.fill_null(-1).to_numpy() for chunk in chunks]
            or [np.zeros(0, np.int32)]
        )
        codes: npt.NDArray[np.int32] = ids[indices[self.positions]]
        return codes


def collect_scores(
    batches: Iterable[Batch],
    suite: Suite,
    *,
    unknown: UnknownSubtasks = "error",
    keep_details: bool = True,
    expected_rows: int = 0,
) -> DenseScores:
    """Encode, check and scatter every batch; raise once with all failures.

    Args:
        batches: The score batches.
        suite: The suite.
        unknown: ``error`` reports unknown subtasks; ``ignore`` drops them.
        keep_details: Keep what the subtask table needs besides the raw score
            (metric, stderr, n_samples, source, kept extra columns).
        expected_rows: Rows expected in all, to size the dense store up front.

    Returns:
        The dense scores.

    Raises:
        ValidationError: Any check failed in any batch; ``failures`` lists them.
    """
    pairs = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
    encoder = KeyEncoder(pairs)
    dense = DenseScores(
        len(pairs), expected_rows // max(len(pairs), 1) + 1, keep_details=keep_details
    )
    failures: list[pa.Table] = []
    n_failed = 0
    for batch in batches:
        checked = check_batch(
            batch, encoder, unknown=unknown, seen_before=dense.is_stored
        )
        dense.n_ignored += checked.n_ignored
        if checked.n_failed:
            failures.extend(describe_failures(batch, checked.failed))
            n_failed += checked.n_failed
        dense.reserve(encoder.n_variants)
        if failures:  # the run fails: keep checking, stop storing
            continue
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

    def __init__(self, dense: DenseScores, order: IntArray, suite: Suite) -> None:
        self._dense = dense
        self._order = order
        self._suite = suite
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
        return int(np.count_nonzero(~np.isnan(self._dense.raw)))

    def parts(self) -> Iterator[pa.Table]:
        """Each benchmark's rows, conformed to :attr:`schema`."""
        suite, arrays, dense = self._suite, self._arrays, self._dense
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
        subtask_names = pa.array([pairs[i][1] for i in first], pa.string())
        benchmark_names = pa.array(suite.benchmark_names, pa.string())
        metrics = _sorted_dictionary(dense.metrics)
        sources = _sorted_dictionary(dense.sources)
        for index in range(len(suite.benchmarks)):
            columns = np.flatnonzero(arrays.benchmark_index == index)
            rows = self._order
            block = dense.raw[np.ix_(rows, columns)]
            variant, local = np.nonzero(~np.isnan(block))  # variant, then subtask
            subtask = columns[local]
            cell = (rows[variant], subtask)
            raw = block[variant, local]
            lower_bound = arrays.lower_bound[subtask]
            normalized = np.maximum(
                (raw - lower_bound) / (1.0 - lower_bound) * 100.0, 0.0
            )
            n_rows = raw.size
            data: dict[str, pa.Array] = {
                name: pa.DictionaryArray.from_arrays(
                    keys[name].indices.take(pa.array(variant)), keys[name].dictionary
                )
                for name in keys
            }
            data["chat_template"] = pa.array(flags[variant])
            data["benchmark"] = pa.DictionaryArray.from_arrays(
                pa.array(np.full(n_rows, index, dtype=np.int32)), benchmark_names
            )
            data["subtask"] = pa.DictionaryArray.from_arrays(
                pa.array(subtask_codes[subtask].astype(np.int32)), subtask_names
            )
            data["metric"] = _coded(dense.metric, cell, metrics, n_rows)
            data["raw_score"] = pa.array(raw)
            data["lower_bound"] = pa.array(lower_bound)
            data["normalized_score"] = pa.array(normalized)
            data["is_clipped"] = pa.array(raw < lower_bound)
            data["stderr"] = (
                pa.nulls(n_rows, pa.float64())
                if dense.stderr is None
                else _nullable(dense.stderr[cell])
            )
            data["n_samples"] = (
                pa.nulls(n_rows, pa.int64())
                if dense.n_samples is None
                else _counts(dense.n_samples[cell])
            )
            data["source"] = _coded(dense.source, cell, sources, n_rows)
            if self._kept is not None and dense.rows is not None:
                picked = self._kept.take(pa.array(dense.rows[cell]))
                for name in picked.column_names:
                    data[name] = picked.column(name).combine_chunks()
            yield pa.Table.from_arrays(
                [_typed(data[field.name], field.type) for field in self.schema],
                schema=self.schema,
            )


def _sorted_dictionary(
    registry: dict[str, int],
) -> tuple[npt.NDArray[np.int32], pa.Array]:
    """A registry's strings sorted, and each code's position among them."""
    names = sorted(registry)
    position = np.zeros(max(len(registry), 1), dtype=np.int32)
    for at, name in enumerate(names):
        position[registry[name]] = at
    return position, pa.array(names or [""], pa.string())


def _coded(
    codes: npt.NDArray[np.int32] | None,
    cell: tuple[IntArray, IntArray],
    dictionary: tuple[npt.NDArray[np.int32], pa.Array],
    n_rows: int,
) -> pa.DictionaryArray:
    position, names = dictionary
    indices = (
        np.zeros(n_rows, dtype=np.int32) if codes is None else position[codes[cell]]
    )
    return pa.DictionaryArray.from_arrays(pa.array(indices), names)


def _typed(values: pa.Array, kind: pa.DataType) -> pa.Array:
    return values if values.type == kind else values.cast(kind)


def _nullable(values: FloatArray) -> pa.Array:
    return pa.array(values, mask=np.isnan(values))


def _counts(values: IntArray) -> pa.Array:
    return pa.array(values, mask=values <= 0)


def _grow(matrix: _Matrix, rows: int, fill: float) -> _Matrix:
    grown = np.full((rows, matrix.shape[1]), fill, dtype=matrix.dtype)
    grown[: matrix.shape[0]] = matrix
    return grown
