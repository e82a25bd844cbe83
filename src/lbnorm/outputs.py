"""The output tables, built from the kernel's arrays.

Three tables, keyed by model variant: one row per (variant, subtask) as Arrow
(it can hold tens of millions of rows, so text columns are dictionary-encoded by
code), one row per (variant, benchmark) and the leaderboard, one row per variant,
best first. Column names and types follow :mod:`lbnorm.schemas`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from lbnorm.engine import DenseScores
from lbnorm.kernel import BenchmarkArrays, FloatArray
from lbnorm.schemas import KEY_COLUMNS, SCORES, SUBTASK_SCORES, TEXT, conform
from lbnorm.suites import Suite

__all__ = ["benchmark_table", "leaderboard_table", "subtask_table"]


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


def benchmark_table(
    variants: pd.DataFrame, suite: Suite, arrays: BenchmarkArrays
) -> pd.DataFrame:
    """One row per (variant, benchmark) with at least one subtask present.

    Args:
        variants: The variant keys, one row per row of `arrays`.
        suite: The suite (benchmark names).
        arrays: The kernel's benchmark-level arrays.

    Returns:
        The table, benchmark-major then variant; keys as categoricals.
    """
    n_variants, n_benchmarks = arrays.raw.shape
    present = (arrays.n_present > 0).T.ravel()  # benchmark-major, then variant
    variant_index = np.tile(np.arange(n_variants), n_benchmarks)[present]
    benchmark_index = np.repeat(np.arange(n_benchmarks), n_variants)[present]
    expected = arrays.n_expected[benchmark_index].astype(np.int32)
    count = arrays.n_present.T.ravel()[present].astype(np.int32)
    columns: dict[str, object] = {  # categorical: one string per variant, not per row
        name: _take_categorical(variants[name], variant_index)
        if name != "chat_template"
        else variants[name].to_numpy()[variant_index]
        for name in KEY_COLUMNS
    }
    columns["benchmark"] = pd.Categorical.from_codes(
        benchmark_index, pd.Index(suite.benchmark_names)
    )
    columns["raw_score"] = arrays.raw.T.ravel()[present]
    columns["normalized_score"] = arrays.normalized.T.ravel()[present]
    columns["n_subtasks"] = count
    columns["n_subtasks_expected"] = expected
    columns["is_complete"] = count == expected
    return pd.DataFrame(columns, copy=False)  # every column is a new array


def _take_categorical(
    values: pd.Series, index: npt.NDArray[np.intp]
) -> pd.Categorical[Any]:
    """Return ``values[index]`` as a categorical, categories in order of appearance."""
    codes, uniques = _codes_of(values)
    # categories checked once, per variant; codes already in their smallest dtype
    per_variant = pd.Categorical.from_codes(
        codes, dtype=pd.CategoricalDtype(uniques, ordered=False)
    )
    return pd.Categorical.from_codes(
        per_variant.codes[index], dtype=per_variant.dtype, validate=False
    )


def _codes_of(values: pd.Series) -> tuple[npt.NDArray[np.intp], pd.Index]:
    codes, uniques = pd.factorize(values)
    return codes, uniques


def leaderboard_table(
    variants: pd.DataFrame,
    suite: Suite,
    arrays: BenchmarkArrays,
    average: FloatArray,
    rank: FloatArray,
) -> pd.DataFrame:
    """One row per variant, best first: rank, average, coverage, benchmark columns.

    Args:
        variants: The variant keys, one row per row of `arrays`.
        suite: The suite (benchmark names, count).
        arrays: The kernel's benchmark-level arrays.
        average: Each variant's average (NaN: unranked).
        rank: Each variant's rank (NaN: unranked).

    Returns:
        The leaderboard, ranked variants first, then the others in key order.
    """
    # order first, then every column gathered once, already in order
    order = np.lexsort((np.arange(len(rank)), np.where(np.isnan(rank), np.inf, rank)))
    n_benchmarks = (arrays.n_present == arrays.n_expected).sum(axis=1)[order]
    normalized = np.take(arrays.normalized, order, axis=0).T  # rows, then columns
    raw = np.take(arrays.raw, order, axis=0).T
    columns: dict[str, object] = {
        name: variants[name].array.take(order) for name in variants.columns
    }
    columns["rank"] = pd.Series(rank[order]).astype("Int64").array
    columns["average"] = average[order]
    columns["n_benchmarks"] = n_benchmarks.astype(np.int32)
    columns["n_benchmarks_expected"] = np.full(
        len(order), len(suite.benchmarks), dtype=np.int32
    )
    columns["is_complete"] = n_benchmarks == len(suite.benchmarks)
    for index, name in enumerate(suite.benchmark_names):
        columns[name] = normalized[index]
        columns[f"{name} Raw"] = raw[index]
    return pd.DataFrame(columns, copy=False)
