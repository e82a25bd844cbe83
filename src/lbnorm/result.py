"""A run's result: :class:`Result`, and the output tables built from the kernel's arrays.

Three tables, keyed by model variant: one row per (variant, subtask) as Arrow
(built by the engine that keeps the rows), one row per (variant, benchmark) and
the leaderboard, one row per variant, best first. Every engine ends in
:func:`assemble_result`, so they share one definition of the average, the ranks
and the tables. Column names and types follow :mod:`lbnorm.schemas`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from lbnorm.kernel import (
    BenchmarkArrays,
    FloatArray,
    average_benchmarks,
    rank_descending,
)
from lbnorm.options import MissingPolicy, RunOptions
from lbnorm.schemas import KEY_COLUMNS, SUBTASK_SCORES
from lbnorm.suites import Suite, suite_arrays

__all__ = ["Result", "assemble_result", "benchmark_table", "leaderboard_table"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """A normalized leaderboard: three tables and where they came from.

    Attributes:
        subtask_table: One row per (variant, subtask): raw, bound, normalized,
            clipped, as Arrow (it can hold tens of millions of rows); None when
            the subtask-level output was not asked for. :attr:`subtasks` gives
            it as pandas.
        benchmarks: One row per (variant, benchmark): raw as shown, normalized.
        leaderboard: One row per variant, best first: rank, average, coverage and
            a column per benchmark (and ``<benchmark> Raw``).
        suite: The suite used.
        options: The options of the run.
        files: The input files (path, format, sha256, rows, superseded_by, ...).
        n_ignored_rows: Rows dropped as unknown subtasks under ``unknown="ignore"``.
        n_scores: Subtask scores used.
        n_clipped: Subtask scores below their bound.
    """

    subtask_table: pa.Table | None
    benchmarks: pd.DataFrame
    leaderboard: pd.DataFrame
    suite: Suite
    options: RunOptions = field(default_factory=RunOptions)
    files: pd.DataFrame = field(default_factory=pd.DataFrame)
    n_ignored_rows: int = 0
    n_scores: int = 0
    n_clipped: int = 0

    @property
    def missing(self) -> MissingPolicy:
        """The missing-data policy of the run."""
        return self.options.missing

    @property
    def subtasks(self) -> pd.DataFrame:
        """The subtask-level table as pandas (text columns as plain strings)."""
        if self.subtask_table is None:
            return pd.DataFrame(columns=SUBTASK_SCORES.names)
        table = self.subtask_table
        for index, column in enumerate(table.columns):
            if pa.types.is_dictionary(column.type):
                table = table.set_column(
                    index, table.field(index).name, column.cast(pa.string())
                )
        frame: pd.DataFrame = table.to_pandas()
        return frame


def assemble_result(
    variants: pd.DataFrame,
    benchmark: BenchmarkArrays,
    suite: Suite,
    *,
    options: RunOptions,
    files: pd.DataFrame | None = None,
    subtask_table: pa.Table | None = None,
    n_ignored_rows: int = 0,
    n_scores: int = 0,
    n_clipped: int = 0,
) -> Result:
    """Average and rank benchmark scores and build the result tables.

    Every engine (in memory, streaming, Dask) ends here, so they share one
    definition of the average, the ranks and the output tables.

    Args:
        variants: The variant keys, sorted by key, one row per row of `benchmark`.
        benchmark: The benchmark-level arrays.
        suite: The suite.
        options: The run's options (the missing-data policy shapes the average).
        files: The catalog of input files.
        subtask_table: The subtask-level table, if built.
        n_ignored_rows: Rows dropped as unknown subtasks.
        n_scores: Subtask scores used.
        n_clipped: Subtask scores below their bound.

    Returns:
        The result.
    """
    arrays = suite_arrays(suite)
    average = average_benchmarks(
        benchmark.normalized, arrays.weight, missing=options.missing
    )
    rank = rank_descending(average)
    return Result(
        subtask_table=subtask_table,
        benchmarks=benchmark_table(variants, suite, benchmark),
        leaderboard=leaderboard_table(variants, suite, benchmark, average, rank),
        suite=suite,
        options=options,
        files=files if files is not None else pd.DataFrame(),
        n_ignored_rows=n_ignored_rows,
        n_scores=n_scores,
        n_clipped=n_clipped,
    )


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
