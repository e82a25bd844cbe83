"""The pipeline, composed: readers -> validate -> suite bounds -> kernel -> writer.

``normalize_scores`` is the pure computation (a frame in, a :class:`Result` out);
``run`` adds reading files and, given ``out``, writing the Parquet outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa

from lbnorm._faults import fault_point
from lbnorm.engine import Batch, UnknownSubtasks, collect_scores
from lbnorm.kernel import (
    BenchmarkArrays,
    MissingPolicy,
    SuiteArrays,
    aggregate_benchmarks,
    average_benchmarks,
    normalize,
    rank_descending,
)
from lbnorm.outputs import benchmark_table, leaderboard_table, subtask_table
from lbnorm.readers import read_inputs
from lbnorm.readers.tables import ExtraColumns, scores_from_frame
from lbnorm.schemas import SUBTASK_SCORES
from lbnorm.suites import Suite, load_suite

#: How scores are held while they are aggregated (see :func:`run`).
Engine = Literal["auto", "memory", "stream", "dask"]

__all__ = [
    "Engine",
    "Result",
    "assemble_result",
    "compute_result",
    "demo_path",
    "normalize_scores",
    "run",
    "suite_arrays",
]


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
        files: The input files (path, format, sha256, rows, superseded_by, ...).
        missing: The missing-data policy used.
        n_ignored_rows: Rows dropped as unknown subtasks under ``unknown="ignore"``.
    """

    subtask_table: pa.Table | None
    benchmarks: pd.DataFrame
    leaderboard: pd.DataFrame
    suite: Suite
    files: pd.DataFrame = field(default_factory=pd.DataFrame)
    missing: MissingPolicy = "exclude"
    n_ignored_rows: int = 0
    n_scores: int = 0
    n_clipped: int = 0

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


def normalize_scores(
    scores: pd.DataFrame | pa.Table,
    suite: Suite | str | Path = "openllm-v2",
    *,
    missing: MissingPolicy = "exclude",
    unknown: UnknownSubtasks = "error",
    extra_columns: ExtraColumns = "error",
    files: pd.DataFrame | None = None,
) -> Result:
    """Normalize a long-format scores frame under a suite.

    Args:
        scores: Long-format scores: ``model``, ``benchmark``, ``subtask``,
            ``raw_score`` (fractions), optionally the other :data:`SCORES` columns.
        suite: A :class:`Suite`, a built-in suite name or a suite file.
        missing: Policy for absent subtasks/benchmarks (:data:`MissingPolicy`).
        unknown: Policy for subtasks the suite does not define.
        extra_columns: Policy for columns outside the contract.
        files: The catalog of input files, recorded in the result.

    Returns:
        The result tables.

    Raises:
        ValidationError: Scores violate the contract (every failure listed).
        SchemaMismatchError: Columns are missing or of the wrong type.

    Examples:
        >>> scores = pd.DataFrame({"model": ["m"] * 3, "benchmark": ["MUSR"] * 3,
        ...     "subtask": ["murder_mysteries", "object_placements", "team_allocation"],
        ...     "raw_score": [0.7, 0.4, 0.6]})
        >>> result = normalize_scores(scores, missing="partial")
        >>> result.benchmarks["normalized_score"].round(9).tolist()
        [35.0]
    """
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    if isinstance(scores, pd.DataFrame):
        if "_row" not in scores.columns:
            scores = scores_from_frame(
                scores, source="<frame>", extra_columns=extra_columns
            )
        scores = pa.Table.from_pandas(scores, preserve_index=False)
    batches = [Batch(table=scores, source="<frame>")]
    return compute_result(
        batches,
        suite,
        missing=missing,
        unknown=unknown,
        files=files,
        expected_rows=scores.num_rows,
    )


def compute_result(
    batches: Iterable[Batch],
    suite: Suite,
    *,
    missing: MissingPolicy = "exclude",
    unknown: UnknownSubtasks = "error",
    files: pd.DataFrame | None = None,
    expected_rows: int = 0,
    keep_subtasks: bool = True,
    streaming: bool = False,
    batch_rows: int | None = None,
    shares: Callable[[int, int], Iterable[Batch]] | None = None,
    workers: int = 1,
) -> Result:
    """Normalize score batches under a suite: the engine, then the kernel.

    Args:
        batches: Score batches (see :class:`lbnorm.engine.Batch`).
        suite: The suite.
        missing: Policy for absent subtasks/benchmarks.
        unknown: Policy for subtasks the suite does not define.
        files: The catalog of input files, recorded in the result.
        expected_rows: Rows expected in all (sizes the dense store).
        keep_subtasks: Build the subtask-level table (False: a smaller working set).
        streaming: Fold batches into partial sums in bounded memory instead
            (:mod:`lbnorm.stream`; no subtask-level table).
        batch_rows: With `streaming`, split batches into slices of this many rows.
        shares: With `streaming`, disjoint shares of `batches` for `workers`.
        workers: With `streaming` and `shares`, processes to sum in.

    Returns:
        The result tables.
    """
    if streaming:
        from lbnorm.stream import compute_result_streaming

        return compute_result_streaming(
            batches,
            suite,
            missing=missing,
            unknown=unknown,
            files=files,
            expected_rows=expected_rows,
            batch_rows=batch_rows,
            shares=shares,
            workers=workers,
        )
    bounds = suite.subtask_table()
    dense = collect_scores(
        batches,
        bounds,
        unknown=unknown,
        expected_rows=expected_rows,
        keep_rows=keep_subtasks,
    )
    arrays = suite_arrays(suite)
    normalized = normalize(dense.raw, arrays.lower_bound)[0]
    benchmark = aggregate_benchmarks(dense.raw, normalized, arrays, missing=missing)
    return assemble_result(
        dense.variants,
        benchmark,
        suite,
        missing=missing,
        files=files,
        subtask_table=subtask_table(dense, bounds, normalized)
        if keep_subtasks
        else None,
        n_ignored_rows=dense.n_ignored,
        n_scores=int(np.count_nonzero(~np.isnan(dense.raw))),
        n_clipped=int((dense.raw < arrays.lower_bound).sum()),
    )


def assemble_result(
    variants: pd.DataFrame,
    benchmark: BenchmarkArrays,
    suite: Suite,
    *,
    missing: MissingPolicy,
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
        missing: The missing-data policy (also used for the average).
        files: The catalog of input files.
        subtask_table: The subtask-level table, if built.
        n_ignored_rows: Rows dropped as unknown subtasks.
        n_scores: Subtask scores used.
        n_clipped: Subtask scores below their bound.

    Returns:
        The result.
    """
    arrays = suite_arrays(suite)
    average = average_benchmarks(benchmark.normalized, arrays.weight, missing=missing)
    rank = rank_descending(average)
    return Result(
        subtask_table=subtask_table,
        benchmarks=benchmark_table(variants, suite, benchmark),
        leaderboard=leaderboard_table(variants, suite, benchmark, average, rank),
        suite=suite,
        files=files if files is not None else pd.DataFrame(),
        missing=missing,
        n_ignored_rows=n_ignored_rows,
        n_scores=n_scores,
        n_clipped=n_clipped,
    )


def run(
    inputs: Sequence[str | Path] = (),
    *,
    suite: Suite | str | Path = "openllm-v2",
    out: str | Path | None = None,
    missing: MissingPolicy = "exclude",
    unknown: UnknownSubtasks = "error",
    extra_columns: ExtraColumns = "error",
    created_at: str | None = None,
    metadata: str | Path | pd.DataFrame | None = None,
    rank_within: Sequence[str] = (),
    exclude_flagged: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    subtasks: bool = True,
    cache: str | Path | None = None,
    full_rebuild: bool = False,
    engine: Engine = "auto",
    scheduler: str | None = None,
    batch_rows: int | None = None,
    workers: int = 1,
) -> Result:
    """Read inputs, normalize them under a suite and, given `out`, write Parquet.

    Args:
        inputs: Score files or results directories; empty means the bundled demo.
        suite: A :class:`Suite`, a built-in suite name or a suite file.
        out: Output directory, replaced atomically; None writes nothing.
        missing: Policy for absent subtasks/benchmarks.
        unknown: Policy for subtasks the suite does not define.
        extra_columns: Policy for columns outside the contract.
        created_at: Creation time recorded in the manifest (ISO 8601); defaults
            to ``SOURCE_DATE_EPOCH`` if set, else now. Kept out of the data files.
        metadata: A model metadata table (CSV/Parquet file or frame) whose
            columns are appended to the leaderboard (see :mod:`lbnorm.metadata`);
            None uses the demo's own metadata for the demo, else none.
        rank_within: Leaderboard columns to rank within (``rank_within_<col>``).
        exclude_flagged: Give variants flagged in the metadata no rank.
        progress: Called as ``progress(stage, done, total)`` while reading files.
        subtasks: Build (and write) the subtask-level table; False streams only
            the columns the benchmark scores need: faster, for big recomputes.
        cache: A parse cache directory for nightly runs: results files are parsed
            only when new or changed, and a bad one is rejected (listed in
            ``Result.files``) instead of stopping the run (see :mod:`lbnorm.cache`).
        full_rebuild: With `cache`, ignore its contents and rebuild it.
        engine: ``memory`` keeps every score in one dense store (and can build
            the subtask table); ``stream`` folds batches into exact partial sums,
            in bounded memory, in `workers` processes (see :mod:`lbnorm.stream`);
            ``dask`` runs on a Dask cluster (see :mod:`lbnorm.dask_engine`).
            Both leave out the subtask table. ``auto``: ``memory`` when
            `subtasks`, else ``stream``.
        scheduler: With ``engine="dask"``, the scheduler address (None: a local
            cluster).
        batch_rows: With ``engine="stream"``, rows per batch (None: each Parquet
            row group, or each other input as read).
        workers: With ``engine="stream"``, processes summing Parquet row groups.
            More than one pays where cores are real and variants few per row:
            the parent adds the workers' sums by key (see :mod:`lbnorm.parallel`).

    Returns:
        The result tables.

    Raises:
        LbnormError: Any bad input or unwritable output; nothing is written then.
    """
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    paths = list(inputs) or [demo_path()]
    if engine == "auto":
        engine = "memory" if subtasks else "stream"
    subtasks = subtasks and engine == "memory"
    if engine == "dask":
        from lbnorm.dask_engine import compute_result_dask

        result = compute_result_dask(
            paths,
            suite,
            scheduler=scheduler,
            missing=missing,
            unknown=unknown,
            extra_columns=extra_columns,
        )
        return _finish_run(
            result, out, inputs, metadata, rank_within, exclude_flagged, created_at
        )
    if cache is not None:  # nightly runs: parse only new or changed results files
        from lbnorm.cache import read_inputs_cached

        read = read_inputs_cached(
            paths,
            suite=suite,
            cache=Path(cache),
            full_rebuild=full_rebuild,
            extra_columns=extra_columns,
            progress=progress,
        )
    else:
        read = read_inputs(
            paths,
            suite=suite,
            extra_columns=extra_columns,
            progress=progress,
            keep_details=subtasks,
        )
    fault_point("computing")  # crash-safety tests: LBNORM_FAULT_POINT (lbnorm._faults)
    result = compute_result(
        read.batches,
        suite,
        missing=missing,
        unknown=unknown,
        files=read.files,
        expected_rows=read.num_rows,
        keep_subtasks=subtasks,
        streaming=engine == "stream",
        batch_rows=batch_rows,
        shares=read.partition if read.streamed else None,
        workers=max(workers, 1),
    )
    return _finish_run(
        result, out, inputs, metadata, rank_within, exclude_flagged, created_at
    )


def _finish_run(
    result: Result,
    out: str | Path | None,
    inputs: Sequence[str | Path],
    metadata: str | Path | pd.DataFrame | None,
    rank_within: Sequence[str],
    exclude_flagged: bool,
    created_at: str | None,
) -> Result:
    """Join model metadata (and group ranks), then write the outputs if asked."""
    if metadata is None and not inputs:
        metadata = demo_path().with_name("demo_metadata.parquet")
    if metadata is not None or rank_within or exclude_flagged:
        from lbnorm.metadata import annotate_leaderboard

        board = annotate_leaderboard(
            result.leaderboard,
            metadata,
            rank_within_columns=rank_within,
            is_flagged_excluded=exclude_flagged,
        )
        result = replace(result, leaderboard=board)
    if out is not None:
        from lbnorm.writer import write_result  # the only module that writes files

        write_result(result, Path(out), created_at=created_at)
    return result


def demo_path() -> Path:
    """Return the path of the bundled demo leaderboard (a Parquet file)."""
    return Path(str(resources.files("lbnorm") / "data" / "demo_scores.parquet"))


def suite_arrays(suite: Suite) -> SuiteArrays:
    """Return the suite as the kernel's arrays (subtasks in suite order)."""
    bounds = suite.subtask_table()
    return SuiteArrays(
        lower_bound=bounds["lower_bound"].to_numpy(dtype=np.float64),
        n_samples=bounds["n_samples"].to_numpy(dtype=np.float64),
        benchmark_index=bounds["benchmark_index"].to_numpy(dtype=np.int64),
        is_pooled=np.array(
            [b.aggregation == "pool-then-normalize" for b in suite.benchmarks]
        ),
        weight=np.array([b.weight for b in suite.benchmarks], dtype=np.float64),
    )
