"""The in-memory engine: every score in a dense (variant x subtask) store.

Scores arrive as Arrow batches (Parquet row groups are streamed, so the working
set stays one row group; other formats arrive as one batch). Each batch is encoded
to integer codes (:class:`lbnorm.encode.KeyEncoder`), checked (every failure is
collected, with file and row), and its raw scores are scattered into a dense
``(variant, subtask)`` matrix. A cell is written once, so the result does not
depend on the order rows or files arrive in. At the end, variants are sorted by
key and handed to the kernel; this is the engine that can build the subtask table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from lbnorm.encode import KeyEncoder
from lbnorm.kernel import FloatArray, aggregate_benchmarks, normalize
from lbnorm.options import RunOptions, UnknownSubtasks
from lbnorm.readers import Inputs
from lbnorm.result import Result, assemble_result
from lbnorm.schemas import KEY_COLUMNS, SCORES, SUBTASK_SCORES, TEXT, Batch, conform
from lbnorm.suites import Suite, suite_arrays
from lbnorm.validate import check_batch, describe_failures, failure_error

__all__ = ["DenseScores", "collect_scores", "compute"]


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
    bounds = suite.subtask_table()
    dense = collect_scores(
        inputs.batches,
        bounds,
        unknown=options.unknown,
        expected_rows=inputs.num_rows,
        keep_rows=options.subtasks,
    )
    arrays = suite_arrays(suite)
    normalized = normalize(dense.raw, arrays.lower_bound)[0]
    benchmark = aggregate_benchmarks(
        dense.raw, normalized, arrays, missing=options.missing
    )
    return assemble_result(
        dense.variants,
        benchmark,
        suite,
        options=options,
        files=inputs.files,
        subtask_table=subtask_table(dense, bounds, normalized)
        if options.subtasks
        else None,
        n_ignored_rows=dense.n_ignored,
        n_scores=int(np.count_nonzero(~np.isnan(dense.raw))),
        n_clipped=int((dense.raw < arrays.lower_bound).sum()),
    )


_Matrix = TypeVar("_Matrix", npt.NDArray[np.float64], npt.NDArray[np.int64])


@dataclass(frozen=True, slots=True, kw_only=True)
class DenseScores:
    """Every accepted score, as dense arrays over sorted variants and suite subtasks.

    Attributes:
        variants: The variant keys, one row per variant, sorted by key.
        raw: ``(n_variants, n_subtasks)`` raw scores, NaN where absent.
        rows: Same shape: the position of each score in :attr:`table` (-1 where
            absent), or None when the rows were not kept.
        table: Every batch's rows, concatenated (only when rows are kept).
        n_ignored: Rows dropped as unknown subtasks under ``unknown="ignore"``.
    """

    variants: pd.DataFrame
    raw: npt.NDArray[np.float64]
    rows: npt.NDArray[np.int64] | None
    table: pa.Table | None
    n_ignored: int


def collect_scores(
    batches: Iterable[Batch],
    bounds: pd.DataFrame,
    *,
    unknown: UnknownSubtasks = "error",
    keep_rows: bool = True,
    expected_rows: int = 0,
) -> DenseScores:
    """Encode, check and scatter every batch; raise once with all failures.

    Args:
        batches: The score batches.
        bounds: The suite's subtask table (:meth:`lbnorm.suites.Suite.subtask_table`).
        unknown: ``error`` reports unknown subtasks; ``ignore`` drops them.
        keep_rows: Keep the rows (for the subtask-level output); False keeps only
            the raw scores, for a smaller working set.
        expected_rows: Rows expected in all, to size the dense store up front.

    Returns:
        The dense scores.

    Raises:
        ValidationError: Any check failed in any batch; ``failures`` lists them.
    """
    encoder = KeyEncoder(bounds)
    n_subtasks = len(bounds)
    capacity = max(expected_rows // max(n_subtasks, 1) + 1, 16)
    raw = np.full((capacity, n_subtasks), np.nan)
    rows = np.full((capacity, n_subtasks), -1, dtype=np.int64) if keep_rows else None
    kept: list[pa.Table] = []
    failures: list[pa.Table] = []
    offset = 0
    n_ignored = 0
    n_failed = 0
    for batch in batches:
        table = batch.table
        checked = check_batch(
            batch, encoder, unknown=unknown, seen_before=_stored_in(raw)
        )
        variant, subtask, scores = checked.variant, checked.subtask, checked.scores
        accepted, duplicate = checked.accepted, checked.failed["duplicate_score"]
        n_ignored += checked.n_ignored
        if checked.n_failed:
            failures.extend(describe_failures(batch, checked.failed))
            n_failed += checked.n_failed
        if encoder.n_variants > raw.shape[0]:
            capacity = max(2 * raw.shape[0], encoder.n_variants)
            raw = _grow(raw, capacity, np.nan)
            rows = None if rows is None else _grow(rows, capacity, -1)
        take = accepted & ~duplicate
        raw[variant[take], subtask[take]] = scores[take]
        if rows is not None:
            rows[variant[take], subtask[take]] = offset + np.flatnonzero(take)
            kept.append(table)
        offset += table.num_rows
    if failures:
        raise failure_error(failures, total=n_failed)
    order = encoder.variant_order()
    return DenseScores(
        variants=encoder.variant_keys().iloc[order].reset_index(drop=True),
        raw=raw[order],
        rows=None if rows is None else rows[order],
        table=_concat(kept) if rows is not None else None,
        n_ignored=n_ignored,
    )


def _stored_in(
    raw: npt.NDArray[np.float64],
) -> Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.bool_]]:
    """Which (variant, subtask) pairs already hold a score in the dense store."""

    def is_stored(
        variant: npt.NDArray[np.int64], subtask: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        inside = variant < raw.shape[0]
        stored = np.zeros(variant.shape, dtype=bool)
        stored[inside] = ~np.isnan(raw[variant[inside], subtask[inside]])
        return stored

    return is_stored


def _grow(matrix: _Matrix, rows: int, fill: float) -> _Matrix:
    grown = np.full((rows, matrix.shape[1]), fill, dtype=matrix.dtype)
    grown[: matrix.shape[0]] = matrix
    return grown


def _concat(tables: list[pa.Table]) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    names = list(dict.fromkeys(name for table in tables for name in table.column_names))
    aligned = []
    for table in tables:
        for name in names:
            if name not in table.column_names:
                table = table.append_column(name, pa.nulls(table.num_rows))
        aligned.append(table.select(names))
    return pa.concat_tables(aligned, promote_options="permissive")


def subtask_table(
    dense: DenseScores, bounds: pd.DataFrame, normalized: FloatArray
) -> pa.Table:
    """One row per score present, benchmark-major, then variant, then subtask.

    Text columns are dictionary-encoded by code, so no string is built per row.

    Args:
        dense: The engine's dense scores, with their rows kept.
        bounds: The suite's subtask table.
        normalized: Normalized scores, shaped like ``dense.raw``.

    Returns:
        The subtask-level table (:data:`lbnorm.schemas.SUBTASK_SCORES` columns,
        then any kept extra columns).
    """
    # benchmark-major (subtask codes are contiguous per benchmark), then variant:
    # one Parquet row group per benchmark lets readers skip the others
    subtask, variant = np.nonzero(~np.isnan(dense.raw.T))
    by_benchmark = np.lexsort(
        (subtask, variant, bounds["benchmark_index"].to_numpy()[subtask])
    )
    variant, subtask = variant[by_benchmark], subtask[by_benchmark]
    assert dense.rows is not None
    assert dense.table is not None
    carried = [  # the columns taken from the input rows (not the keys, not raw)
        name
        for name in dense.table.column_names
        if name in _FROM_INPUT or (name not in SCORES.names and name != "_row")
    ]
    picked = (
        dense.table.select(carried)
        .unify_dictionaries()
        .take(pa.array(dense.rows[variant, subtask]))
    )
    n_rows = len(variant)
    lower_bound = bounds["lower_bound"].to_numpy()[subtask]
    raw = dense.raw[variant, subtask]
    columns: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in KEY_COLUMNS:
        values = dense.variants[name]
        if name == "chat_template":
            columns[name] = pa.array(values.to_numpy(dtype=bool)[variant])
            continue
        codes, uniques = pd.factorize(values)
        columns[name] = pa.DictionaryArray.from_arrays(
            pa.array(codes[variant].astype(np.int32)),
            pa.array(np.asarray(uniques, dtype=object), pa.string()),
        )
    for name in ("benchmark", "subtask"):
        codes, uniques = pd.factorize(bounds[name])
        columns[name] = pa.DictionaryArray.from_arrays(
            pa.array(codes[subtask].astype(np.int32)),
            pa.array(np.asarray(uniques, dtype=object), pa.string()),
        )
    columns["metric"] = _column(picked, "metric", pa.scalar("", TEXT), n_rows)
    columns["raw_score"] = pa.array(raw)
    columns["lower_bound"] = pa.array(lower_bound)
    columns["normalized_score"] = pa.array(normalized[variant, subtask])
    columns["is_clipped"] = pa.array(raw < lower_bound)
    columns["stderr"] = _column(picked, "stderr", pa.scalar(None, pa.float64()), n_rows)
    columns["n_samples"] = _column(
        picked, "n_samples", pa.scalar(None, pa.int64()), n_rows
    )
    columns["source"] = _column(picked, "source", pa.scalar("", TEXT), n_rows)
    extras = [name for name in picked.column_names if name not in _FROM_INPUT]
    table = pa.table(columns)
    table = conform(table, SUBTASK_SCORES, source="subtasks")
    for name in extras:
        table = table.append_column(name, picked.column(name))
    return table


#: Contract columns of the subtask table taken from the input rows as they are.
_FROM_INPUT = frozenset({"metric", "stderr", "n_samples", "source"})


def _column(
    table: pa.Table, name: str, default: pa.Scalar, n_rows: int
) -> pa.ChunkedArray | pa.Array:
    if name not in table.column_names:
        return pa.repeat(default, n_rows)
    return table.column(name)
