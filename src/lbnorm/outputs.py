"""The output tables, built from the kernel's arrays.

Three tables, keyed by model variant: one row per (variant, subtask) as Arrow
(it can hold tens of millions of rows, so text columns are dictionary-encoded by
code), one row per (variant, benchmark) and the leaderboard, one row per variant,
best first. Column names and types follow :mod:`lbnorm.schemas`.
"""

from __future__ import annotations

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
    picked = dense.table.unify_dictionaries().take(
        pa.array(dense.rows[variant, subtask])
    )
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
    columns["metric"] = _column(picked, "metric", pa.scalar("", TEXT))
    columns["raw_score"] = pa.array(raw)
    columns["lower_bound"] = pa.array(lower_bound)
    columns["normalized_score"] = pa.array(normalized[variant, subtask])
    columns["is_clipped"] = pa.array(raw < lower_bound)
    columns["stderr"] = _column(picked, "stderr", pa.scalar(None, pa.float64()))
    columns["n_samples"] = _column(picked, "n_samples", pa.scalar(None, pa.int64()))
    columns["source"] = _column(picked, "source", pa.scalar("", TEXT))
    extras = [
        name
        for name in picked.column_names
        if name not in SCORES.names and name != "_row"
    ]
    table = pa.table(columns)
    table = conform(table, SUBTASK_SCORES, source="subtasks")
    for name in extras:
        table = table.append_column(name, picked.column(name))
    return table


def _column(
    table: pa.Table, name: str, default: pa.Scalar
) -> pa.ChunkedArray | pa.Array:
    if name not in table.column_names:
        return pa.repeat(default, table.num_rows)
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
    keys = {  # categorical: one string per variant, not per row
        name: pd.Categorical.from_codes(*_codes_of(variants[name]))[variant_index]
        if name != "chat_template"
        else variants[name].to_numpy()[variant_index]
        for name in KEY_COLUMNS
    }
    table = pd.DataFrame(keys)
    return table.assign(
        benchmark=pd.Categorical.from_codes(
            benchmark_index, pd.Index(suite.benchmark_names)
        ),
        raw_score=arrays.raw.T.ravel()[present],
        normalized_score=arrays.normalized.T.ravel()[present],
        n_subtasks=count,
        n_subtasks_expected=expected,
        is_complete=count == expected,
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
    is_complete_benchmark = arrays.n_present == arrays.n_expected
    columns: dict[str, FloatArray] = {}
    for index, name in enumerate(suite.benchmark_names):
        columns[name] = arrays.normalized[:, index]
        columns[f"{name} Raw"] = arrays.raw[:, index]
    n_benchmarks = is_complete_benchmark.sum(axis=1).astype(np.int32)
    table = variants.assign(
        rank=pd.Series(rank).astype("Int64"),
        average=average,
        n_benchmarks=n_benchmarks,
        n_benchmarks_expected=np.int32(len(suite.benchmarks)),
        is_complete=n_benchmarks == len(suite.benchmarks),
        **columns,
    )
    order = np.lexsort((np.arange(len(table)), np.where(np.isnan(rank), np.inf, rank)))
    return table.iloc[order].reset_index(drop=True)
