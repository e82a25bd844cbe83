"""A run's result: :class:`Result`, and the output tables built from the kernel's arrays.

Three tables, keyed by model variant, all Arrow: one row per (variant, subtask)
(written a part at a time as the engine makes it, so a 20M-row table is never
whole in memory on its way to disk), one row per (variant,
benchmark), and the leaderboard, one row per variant, best first. Every engine
ends in :func:`assemble_result`, so they share one definition of the average,
the ranks and the tables. Column names and types follow :mod:`lbnorm.core.schemas`.
pandas appears only in the properties that hand a user a DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm import _runtime
from lbnorm._runtime import beside
from lbnorm.board import BoardScores, score_board, sum_benchmarks
from lbnorm.core import arrow
from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.core.schemas import (
    BENCHMARK_SCORES,
    INPUT_FILES,
    KEY_COLUMNS,
    SUBTASK_SCORES,
    leaderboard_schema,
)
from lbnorm.engines.kernel import (
    BenchmarkArrays,
    BoolArray,
    FloatArray,
    IntArray,
)
from lbnorm.engines.variants import TEXT_KEYS, Variants, merge_variants
from lbnorm.suites import Suite, suite_arrays

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "BoardCounts",
    "Job",
    "Result",
    "TableParts",
    "assemble_result",
    "benchmark_table",
    "board_order",
    "board_schema",
    "finish_job",
    "key_columns",
    "leaderboard_rows",
    "leaderboard_table",
    "resized_examples",
    "resized_variants",
    "start_benchmark_keys",
    "with_present_values",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TableParts:
    """A table handed over a part (one Parquet row group) at a time, never whole in memory.

    The one shape of every table an engine does not hand over whole: parts
    held in memory (:meth:`held`), read back from a written file
    (:meth:`on_disk`), a table built on a thread of its own (:meth:`beside`),
    or a spilled run's, gathered from its saved arrays (:mod:`lbnorm.engines.spill`).

    Attributes:
        schema: The parts' schema (a subtask table's: :data:`SUBTASK_SCORES`,
            then kept extra columns).
        num_rows: Rows in all parts.
        parts: Makes the parts, in the table's row order (anew at each call).
        build: Builds the whole table at once (for the Python API); None:
            the parts are put together.
        unique_columns: Key columns whose values hardly repeat within a part,
            written without dictionaries. A spilled run's benchmark table comes
            a benchmark and a chunk of variants at a time, each variant once: a
            dictionary page per row group of half a million distinct names
            would cost three times the plain encoding, and more bytes.
        counts: A leaderboard's counts, taken while summing (None: counted
            from its rows).
        resized: A benchmark table's variants pooled with other sizes, found
            while summing (None: found in its rows; see :func:`resized_variants`).
    """

    schema: pa.Schema
    num_rows: int
    parts: Callable[[], Iterator[pa.Table]]
    build: Callable[[], pa.Table] | None = None
    unique_columns: tuple[str, ...] = ()
    counts: BoardCounts | None = None
    resized: tuple[int, list[str]] | None = None

    def whole(self) -> pa.Table:
        """The whole table."""
        if self.build is not None:
            return self.build()
        parts = list(self.parts())
        return pa.concat_tables(parts) if parts else arrow.empty_table(self.schema)

    @classmethod
    def held(cls, schema: pa.Schema, parts: list[pa.Table]) -> TableParts:
        """A table already built, held as its parts."""
        rows = sum(part.num_rows for part in parts)
        return cls(schema=schema, num_rows=rows, parts=lambda: iter(parts))

    @classmethod
    def on_disk(cls, path: Path) -> TableParts:
        """A table written to a Parquet file, read back a row group at a time."""
        import pyarrow.parquet as pq

        file = pq.ParquetFile(path)
        schema = file.schema_arrow.remove_metadata()

        def each() -> Iterator[pa.Table]:
            for group in range(file.num_row_groups):
                yield file.read_row_group(group).cast(schema)

        return cls(schema=schema, num_rows=int(file.metadata.num_rows), parts=each)

    @classmethod
    def beside(
        cls, build: Callable[[], pa.Table], *, schema: pa.Schema, num_rows: int
    ) -> TableParts:
        """A table built on a thread of its own while the caller goes on (one part).

        A large run's leaderboard comes this way, so that the writer encodes the
        benchmark table while the leaderboard is built, and the leaderboard's own
        encoding follows it at once. Whoever asks first (:meth:`whole`,
        :meth:`parts`) waits for it; the build's error is raised there.
        """
        table = beside(build)
        return cls(
            schema=schema,
            num_rows=num_rows,
            parts=lambda: iter([table.result()]),
            build=table.result,
        )


class Job(Protocol):
    """What an engine hands back: the subtask table's parts as they come, then the result.

    Consuming :meth:`subtask_parts` drives the computation (a streaming engine
    reads, checks and sums a batch per part), so a writer can put each part on
    disk while the next is computed; :meth:`finish` completes what the parts
    did not and returns the result. A job is used once.
    """

    @property
    def subtask_schema(self) -> pa.Schema | None:
        """The parts' schema; None when the subtask table is not built."""
        ...

    def subtask_parts(self) -> Iterator[pa.Table]:
        """The subtask table, a part (one Parquet row group) at a time."""
        ...

    def finish(self) -> Result:
        """The result (computing whatever the parts left)."""
        ...


def finish_job(job: Job) -> Result:
    """Run a job to the end, keeping its subtask table in memory (for the Python API)."""
    schema = job.subtask_schema
    parts = [part for part in job.subtask_parts() if part.num_rows]
    result = job.finish()
    board = result.leaderboard_output
    if isinstance(board, TableParts) and board.build is not None:  # built beside
        result = replace(result, leaderboard_output=board.whole())
    if schema is None:
        return result
    return replace(result, subtask_parts=TableParts.held(schema, parts))


@dataclass(frozen=True, slots=True)
class BoardCounts:
    """What a summary counts in the leaderboard, without reading it whole.

    Attributes:
        variants: Rows (model variants).
        models: Distinct model names.
        complete: Variants with every benchmark complete.
        ranked: Variants with a rank.
        unranked_incomplete: Incomplete variants without a rank.
    """

    variants: int
    models: int
    complete: int
    ranked: int
    unranked_incomplete: int

    @classmethod
    def of_arrays(
        cls, n_models: int, is_complete: BoolArray, rank: FloatArray
    ) -> BoardCounts:
        """Counts from an engine's arrays (a complete flag and a rank per variant)."""
        is_ranked = ~np.isnan(rank)
        return cls(
            variants=len(rank),
            models=n_models,
            complete=int(np.count_nonzero(is_complete)),
            ranked=int(np.count_nonzero(is_ranked)),
            unranked_incomplete=int(np.count_nonzero(~is_complete & ~is_ranked)),
        )

    @classmethod
    def of(cls, board: pa.Table, *, n_models: int | None = None) -> BoardCounts:
        """Count a leaderboard table (its distinct models unless `n_models` says)."""
        return cls.of_arrays(
            _count_distinct(board.column("model")) if n_models is None else n_models,
            arrow.to_numpy(board.column("is_complete")).astype(bool),
            arrow.to_numpy(board.column("rank").cast(pa.float64()), null=np.nan),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """A normalized leaderboard: three tables and where they came from.

    Attributes:
        benchmark_output: One row per (variant, benchmark): raw as shown,
            normalized; an Arrow table, or its parts when the run spilled to
            disk (:attr:`benchmark_table` is the whole table either way;
            :attr:`benchmarks` gives it as pandas).
        leaderboard_output: One row per variant, best first: rank, average,
            coverage and a column per benchmark and ``<benchmark> Raw``; a
            table or its parts (:attr:`leaderboard_table`, :attr:`leaderboard`),
            or, from an engine, a table still being built (:meth:`TableParts.beside`;
            :func:`finish_job` hands the Python API the built table).
        suite: The suite used.
        options: The options of the run.
        file_table: One row per input file (see :data:`INPUT_FILES`).
        subtask_parts: The subtask-level table's parts: each batch's rows, or
            (the ``memory`` order) each benchmark's, then variant, then subtask;
            None when it was not asked for (:attr:`subtask_table`,
            :attr:`subtasks`).
        n_ignored_rows: Rows dropped as unknown subtasks under ``unknown="ignore"``.
        n_scores: Subtask scores used.
        n_clipped: Subtask scores below their bound.
        n_models: Distinct model names in `leaderboard_output`, as the engine
            that built it counted them (its key registry knows); None: counted
            from the table. Whatever replaces `leaderboard_output` resets it.
        metadata_coverage: With a metadata table joined, the variants it has
            no row for and its rows that match no variant
            (:func:`lbnorm.engines.metadata.join_metadata_table`); else None.
        paired_output: With ``paired``: every pair of variants adjacent in
            rank, compared on its items (:data:`lbnorm.core.schemas.PAIRED`,
            ``paired.parquet``); None otherwise.
        paired_without_items: With ``paired``: the leaderboard's variants
            without per-sample data (named, at most five, then a count).
    """

    benchmark_output: pa.Table | TableParts
    leaderboard_output: pa.Table | TableParts
    suite: Suite
    options: RunOptions = field(default_factory=RunOptions)
    file_table: pa.Table = field(default_factory=lambda: arrow.empty_table(INPUT_FILES))
    subtask_parts: TableParts | None = None
    n_ignored_rows: int = 0
    n_scores: int = 0
    n_clipped: int = 0
    n_models: int | None = None
    metadata_coverage: Mapping[str, Any] | None = None
    paired_output: pa.Table | None = None
    paired_without_items: tuple[str, ...] = ()

    @property
    def missing(self) -> MissingPolicy:
        """The missing-data policy of the run."""
        return self.options.missing

    @property
    def benchmark_table(self) -> pa.Table:
        """One row per (variant, benchmark), as one Arrow table."""
        return _whole(self.benchmark_output)

    @property
    def leaderboard_table(self) -> pa.Table:
        """One row per variant, best first, as one Arrow table."""
        return _whole(self.leaderboard_output)

    def board_counts(self) -> BoardCounts:
        """The leaderboard's counts (variants, models, complete, ranked).

        Counted from the leaderboard itself, whatever replaced it (a metadata
        join that takes ranks away), or by the parts that make it up.
        """
        board = self.leaderboard_output
        if isinstance(board, TableParts) and board.counts is not None:
            return board.counts
        return BoardCounts.of(self.leaderboard_table, n_models=self.n_models)

    def board_head(self, n_rows: int) -> pa.Table:
        """The first `n_rows` rows of the leaderboard (its best variants)."""
        board = self.leaderboard_output
        if isinstance(board, pa.Table):
            return board.slice(0, n_rows)
        head, left = [], n_rows
        for part in board.parts():
            if left <= 0:
                break
            head.append(part.slice(0, left))
            left -= head[-1].num_rows
        return pa.concat_tables(head) if head else arrow.empty_table(board.schema)

    def resized_variants(self) -> tuple[int, list[str]]:
        """Variants pooled with other sample sizes: how many, and examples."""
        table = self.benchmark_output
        if isinstance(table, TableParts) and table.resized is not None:
            return table.resized
        return resized_variants(self.benchmark_table)

    @property
    def subtask_table(self) -> pa.Table | None:
        """The subtask-level table as one Arrow table, or None if not built."""
        if self.subtask_parts is None:
            return None
        return _whole(self.subtask_parts)

    @property
    def subtasks(self) -> pd.DataFrame:
        """The subtask-level table as pandas (text columns as plain strings)."""
        table = self.subtask_table
        if table is None:
            table = arrow.empty_table(SUBTASK_SCORES)
        return _to_pandas(_plain_text(table))

    @property
    def benchmarks(self) -> pd.DataFrame:
        """One row per (variant, benchmark), as pandas (keys as categoricals)."""
        return _to_pandas(self.benchmark_table)

    @property
    def leaderboard(self) -> pd.DataFrame:
        """One row per variant, best first, as pandas (ranks as nullable integers)."""
        return _to_pandas(self.leaderboard_table)

    @property
    def paired(self) -> pd.DataFrame | None:
        """With ``paired``: the paired comparisons as pandas (None otherwise)."""
        return None if self.paired_output is None else _to_pandas(self.paired_output)

    @property
    def files(self) -> pd.DataFrame:
        """The input files, as pandas."""
        return _to_pandas(self.file_table)


def _count_distinct(values: pa.ChunkedArray) -> int:
    """Distinct values of a column; of a dictionary column, its distinct indices."""
    import pyarrow.compute as pc

    if pa.types.is_dictionary(values.type):
        values = values.unify_dictionaries()
        values = pa.chunked_array([chunk.indices for chunk in values.chunks])
    count: int = pc.count_distinct(values).as_py()
    return count


def _whole(table: pa.Table | TableParts) -> pa.Table:
    """A table, or its parts put together."""
    return table if isinstance(table, pa.Table) else table.whole()


#: Variants named when a run reports those pooled with other sample sizes.
RESIZED_SHOWN = 3

#: Rows (variant, benchmark) the examples are taken from.
RESIZED_ROWS = 64 * RESIZED_SHOWN


def resized_variants(benchmarks: pa.Table) -> tuple[int, list[str]]:
    """Variants pooled with sample sizes other than the suite's: how many, and examples.

    Such a variant's pooled benchmarks weight its subtasks by the sizes the
    input gave (a ``--limit`` run, an ``n_samples`` column), so its row is not
    comparable to full runs. The examples (at most :data:`RESIZED_SHOWN`) read
    ``model [precision] (benchmark, ...)``.

    Examples:
        >>> table = pa.table({"model": ["a", "a", "b"], "precision": ["", "", ""],
        ...     "revision": ["", "", ""], "chat_template": [False] * 3,
        ...     "benchmark": ["GPQA", "MATH", "GPQA"],
        ...     "has_other_sizes": [True, True, False]})
        >>> resized_variants(table)
        (1, ['a (GPQA, MATH)'])
    """
    if "has_other_sizes" not in benchmarks.column_names:
        return 0, []
    rows = benchmarks.filter(benchmarks["has_other_sizes"])
    if not rows.num_rows:
        return 0, []
    keys = Variants.from_table(rows.select(list(KEY_COLUMNS)))
    return len(merge_variants([keys])[0]), resized_examples(rows)


def resized_examples(rows: pa.Table) -> list[str]:
    """The examples of :func:`resized_variants`, from its rows' first few (their keys and benchmark)."""
    keys = [*KEY_COLUMNS]
    found: dict[tuple[object, ...], list[str]] = {}
    for row in rows.slice(0, RESIZED_ROWS).to_pylist():  # examples only
        key = tuple(row[name] for name in keys)
        if key in found or len(found) < RESIZED_SHOWN:
            found.setdefault(key, []).append(str(row["benchmark"]))
    return [
        f"{key[0]}{f' [{key[1]}]' if key[1] else ''} ({', '.join(names)})"
        for key, names in found.items()
    ]


def assemble_result(
    variants: Variants,
    benchmark: BenchmarkArrays,
    suite: Suite,
    *,
    options: RunOptions,
    files: pa.Table | None = None,
    n_ignored_rows: int = 0,
    n_scores: int = 0,
    n_clipped: int = 0,
    keys: Future[dict[str, pa.Array]] | None = None,
    values: FloatArray | None = None,
) -> Result:
    """Apply the suite's board rules to benchmark scores and build the result tables.

    Every engine (streaming, spilled, Dask) ends here, so they share one
    definition of the average, the rates, the ranks and the output tables
    (:mod:`lbnorm.board`). A large run's leaderboard (averages and ranks
    included) is built on a thread of its own (:meth:`TableParts.beside`): the
    writer encodes the benchmark table meanwhile, the longer of the two, and
    the result is returned without waiting for it.

    Args:
        variants: The variant keys, sorted by key, one row per row of `benchmark`.
        benchmark: The benchmark-level arrays.
        suite: The suite.
        options: The run's options (the missing-data policy shapes the average).
        files: The catalog of input files.
        n_ignored_rows: Rows dropped as unknown subtasks.
        n_scores: Subtask scores used.
        n_clipped: Subtask scores below their bound.
        keys: The benchmark table's key columns, under way
            (:func:`start_benchmark_keys`), or None: built here.
        values: ``(n_variants, n_subtasks)`` subtask scores in suite order (NaN:
            absent), when the suite's board reads them
            (:attr:`lbnorm.suites.board.Board.needs_subtask_scores`).

    Returns:
        The result.
    """
    arrays = suite_arrays(suite)
    summed = sum_benchmarks(
        suite, arrays, benchmark.normalized, missing=options.missing, values=values
    )
    if summed is not benchmark.normalized:  # both tables show the board's means
        benchmark = replace(benchmark, normalized=summed)

    def board() -> pa.Table:
        scores = score_board(
            suite,
            arrays,
            benchmark.normalized,
            benchmark.stderr,
            benchmark.n_present,
            missing=options.missing,
            values=values,
        )
        return leaderboard_table(variants, suite, benchmark, scores)

    leaderboard_output: pa.Table | TableParts
    if len(variants) < _runtime.THREAD_ROWS:
        leaderboard_output = board()
    else:  # built beside the benchmark table, and beside its encoding when written
        leaderboard_output = TableParts.beside(
            board, schema=board_schema(suite), num_rows=len(variants)
        )
    benchmark_output = benchmark_table(
        variants, suite, benchmark, keys=None if keys is None else keys.result()
    )
    return Result(
        benchmark_output=benchmark_output,
        leaderboard_output=leaderboard_output,
        suite=suite,
        options=options,
        file_table=files if files is not None else arrow.empty_table(INPUT_FILES),
        n_ignored_rows=n_ignored_rows,
        n_scores=n_scores,
        n_clipped=n_clipped,
        n_models=variants.n_models(),
    )


def benchmark_table(
    variants: Variants,
    suite: Suite,
    arrays: BenchmarkArrays,
    *,
    benchmarks: IntArray | None = None,
    plain: Collection[str] = (),
    keys: dict[str, pa.Array] | None = None,
) -> pa.Table:
    """One row per (variant, benchmark) with at least one subtask present.

    Args:
        variants: The variant keys, one row per row of `arrays`.
        suite: The suite (benchmark names).
        arrays: The kernel's benchmark-level arrays.
        benchmarks: The suite's benchmark of each column of `arrays` (default:
            every benchmark, in order).
        plain: Key columns to be written without a dictionary page: their
            dictionaries hold a value per variant, repeats included (see
            :meth:`Variants.dictionary`).
        keys: The key columns of every (benchmark, variant) cell, built already
            (:func:`start_benchmark_keys`; every benchmark, `plain` empty).

    Returns:
        The table, benchmark-major then variant, in :data:`BENCHMARK_SCORES` types.
    """
    n_variants, n_benchmarks = arrays.raw.shape
    is_present = (arrays.n_present > 0).T.ravel()  # benchmark-major, then variant
    # every cell present (complete inputs, the usual case): no selection to copy
    present: npt.NDArray[np.bool_] | slice = (
        slice(None) if is_present.all() else is_present
    )

    def cells(values: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """A (variant, benchmark) array's present cells, benchmark-major."""
        picked: npt.NDArray[Any] = values.T.ravel()[present]
        return picked

    column_index = np.repeat(np.arange(n_benchmarks), n_variants)[present]
    benchmark_index = (
        column_index if benchmarks is None else np.asarray(benchmarks)[column_index]
    )
    expected = arrays.n_expected[column_index].astype(np.int32)
    count = cells(arrays.n_present).astype(np.int32)
    columns: dict[str, pa.Array]
    if keys is None:
        variant_index = np.tile(np.arange(n_variants), n_benchmarks)[present]
        columns = key_columns(variants, variant_index, plain=plain)
    elif isinstance(present, slice):
        columns = dict(keys)
    else:
        is_kept = arrow.array(present)
        columns = {name: column.filter(is_kept) for name, column in keys.items()}
    columns["benchmark"] = pa.DictionaryArray.from_arrays(
        arrow.numbers(benchmark_index, pa.int32()),
        arrow.strings(suite.benchmark_names),
    )
    columns["raw_score"] = arrow.array(cells(arrays.raw))
    columns["normalized_score"] = _nullable(cells(arrays.normalized))
    columns["stderr"] = _nullable(cells(arrays.stderr))
    columns["raw_stderr"] = _nullable(cells(arrays.raw_stderr))
    columns["n_stderr_estimated"] = arrow.array(
        cells(arrays.n_estimated).astype(np.int32)
    )
    columns["has_other_sizes"] = arrow.array(cells(arrays.has_other_sizes))
    columns["n_subtasks"] = arrow.array(count)
    columns["n_subtasks_expected"] = arrow.array(expected)
    columns["is_complete"] = arrow.array(count == expected)
    return pa.Table.from_arrays(
        [columns[name] for name in BENCHMARK_SCORES.names], schema=BENCHMARK_SCORES
    )


def start_benchmark_keys(
    variants: Variants, suite: Suite
) -> Future[dict[str, pa.Array]] | None:
    """A large run's benchmark-table keys, built on a thread while its scores are finished.

    For :func:`assemble_result`; None for a small run (a thread saves nothing).

    Args:
        variants: The variant keys in key order, as :func:`assemble_result` gets them.
        suite: The suite.
    """
    if len(variants) < _runtime.THREAD_ROWS:
        return None
    n_benchmarks = len(suite.benchmarks)
    # every (benchmark, variant) cell, benchmark-major: the rows of
    # benchmark_table when every cell is present
    return beside(
        lambda: key_columns(variants, np.tile(np.arange(len(variants)), n_benchmarks))
    )


def key_columns(
    variants: Variants, variant_index: IntArray, *, plain: Collection[str] = ()
) -> dict[str, pa.Array]:
    """The key columns of the rows `variant_index` points at."""
    columns: dict[str, pa.Array] = {
        name: variants.dictionary(name, variant_index, distinct=name not in plain)
        for name in TEXT_KEYS
    }
    columns["chat_template"] = variants.flags(variant_index)
    return columns


def leaderboard_table(
    variants: Variants,
    suite: Suite,
    arrays: BenchmarkArrays,
    scores: BoardScores,
) -> pa.Table:
    """One row per variant, best first: rank, average, coverage, benchmark and rate columns.

    Args:
        variants: The variant keys, one row per row of `arrays`.
        suite: The suite (benchmark names, count, rates).
        arrays: The kernel's benchmark-level arrays.
        scores: The board's average, its standard error, rates and rank per
            variant (NaN: none).

    Returns:
        The leaderboard, ranked variants first, then the others in key order.
    """
    # order first, then every column gathered once, already in order
    rank = scores.rank
    order = board_order(rank)
    return leaderboard_rows(
        variants.take(order),
        suite,
        n_complete=(arrays.n_present == arrays.n_expected).sum(axis=1)[order],
        normalized=np.take(arrays.normalized, order, axis=0).T,  # rows, then columns
        raw=np.take(arrays.raw, order, axis=0).T,
        stderr=np.take(arrays.stderr, order, axis=0).T,
        rank=rank[order],
        average=scores.average[order],
        average_error=scores.average_stderr[order],
        rates={name: values[order] for name, values in scores.rates.items()},
    )


def board_order(rank: FloatArray) -> IntArray:
    """The leaderboard's row order: by rank, then unranked ones, each in key order.

    Args:
        rank: Each variant's rank, variants in key order (NaN: unranked).
    """
    order: IntArray = np.lexsort(
        (np.arange(len(rank)), np.where(np.isnan(rank), np.inf, rank))
    )
    return order


def leaderboard_rows(
    ordered: Variants,
    suite: Suite,
    *,
    n_complete: IntArray,
    normalized: FloatArray,
    raw: FloatArray,
    stderr: FloatArray,
    rank: FloatArray,
    average: FloatArray,
    average_error: FloatArray,
    rates: dict[str, FloatArray] | None = None,
) -> pa.Table:
    """Leaderboard rows, already in the board's order.

    Args:
        ordered: The rows' variant keys.
        suite: The suite (benchmark names, count).
        n_complete: Complete benchmarks per row.
        normalized: Scores per benchmark (first axis), then row.
        raw: Raw values, the same shape.
        stderr: Standard errors, the same shape.
        rank: Per row (NaN: unranked).
        average: Per row (NaN: none).
        average_error: Per row (NaN: unknown).
        rates: Per rate column of the suite's board, per row (NaN: none).

    Returns:
        Rows in the :func:`lbnorm.core.schemas.leaderboard_schema` of the suite.
    """
    columns: dict[str, pa.Array] = {name: ordered.strings(name) for name in TEXT_KEYS}
    columns["chat_template"] = ordered.flags()
    columns["rank"] = arrow.array(
        np.nan_to_num(rank).astype(np.int64), mask=np.isnan(rank)
    )
    columns["average"] = _nullable(average)
    columns["average_stderr"] = _nullable(average_error)
    columns["n_benchmarks"] = arrow.array(n_complete.astype(np.int32))
    columns["n_benchmarks_expected"] = arrow.array(
        np.full(len(rank), len(suite.benchmarks), dtype=np.int32)
    )
    columns["is_complete"] = arrow.array(n_complete == len(suite.benchmarks))
    for index, name in enumerate(suite.benchmark_names):
        columns[name] = _nullable(normalized[index])
        columns[f"{name} Raw"] = _nullable(raw[index])
        columns[f"{name} stderr"] = _nullable(stderr[index])
    for name, values in (rates or {}).items():
        columns[name] = _nullable(values)
    schema = board_schema(suite)
    return pa.Table.from_arrays([columns[name] for name in schema.names], schema=schema)


def _nullable(values: FloatArray) -> pa.Array:
    """A float column, null where NaN (a figure not computable, or unknown)."""
    return arrow.array(values, mask=np.isnan(values))


def board_schema(suite: Suite) -> pa.Schema:
    """The leaderboard's schema under `suite` (its benchmarks and rates)."""
    return leaderboard_schema(
        suite.benchmark_names,
        rates=suite.board.rate_names,
        rank_doc=suite.board.rank_doc,
    )


def with_present_values(table: pa.Table) -> pa.Table:
    """`table` with each dictionary column's dictionary cut to the values its rows hold.

    A batch dictionary may carry values no row uses: a pandas categorical writes
    every category in every row group, and rows dropped as unknown leave theirs.
    Written as they are, a reader of the output would take them for values of
    the table (pandas: categories, ``groupby(observed=False)`` groups). A column
    whose dictionary is all used is kept as it is.
    """
    for index, column in enumerate(table.columns):
        if not pa.types.is_dictionary(column.type):
            continue
        originals = column.chunks
        chunks = [_present_values(chunk) for chunk in originals]
        if any(new is not old for new, old in zip(chunks, originals, strict=True)):
            table = table.set_column(
                index, table.field(index), pa.chunked_array(chunks, column.type)
            )
    return table


def _present_values(values: pa.DictionaryArray) -> pa.DictionaryArray:
    """`values` with only the dictionary entries its indices point at (in their order)."""
    size = len(values.dictionary)
    indices = values.indices
    valid = indices.drop_null() if indices.null_count else indices
    counts = np.bincount(arrow.to_numpy(valid), minlength=size)
    if counts.all():
        return values
    used = np.flatnonzero(counts)
    position = np.zeros(size, dtype=np.int64)
    position[used] = np.arange(used.size)
    kept = arrow.array(position).take(indices).cast(indices.type)  # (nulls stay)
    return pa.DictionaryArray.from_arrays(
        kept, values.dictionary.take(arrow.array(used))
    )


def _plain_text(table: pa.Table) -> pa.Table:
    """Dictionary-encoded text columns as plain strings."""
    for index, column in enumerate(table.columns):
        if pa.types.is_dictionary(column.type):
            table = table.set_column(
                index, table.field(index).name, column.cast(column.type.value_type)
            )
    return table


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    """A table as pandas; nullable integer columns (ranks, sample counts) as ``Int64``."""
    import pandas as pd  # the user asked for a frame

    frame: pd.DataFrame = table.to_pandas()
    for column in table.schema:
        if pa.types.is_integer(column.type) and column.nullable:
            frame[column.name] = frame[column.name].astype(pd.Int64Dtype())
    return frame
