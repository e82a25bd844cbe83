"""The pipeline, composed: readers -> validate -> suite bounds -> kernel -> writer.

``normalize_scores`` is the pure computation (a frame in, a :class:`Result` out);
``run`` adds reading files and, given ``out``, writing the Parquet outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from lbnorm._faults import fault_point
from lbnorm.engine import Batch, DenseScores, UnknownSubtasks, collect_scores
from lbnorm.kernel import (
    BenchmarkArrays,
    FloatArray,
    MissingPolicy,
    SuiteArrays,
    aggregate_benchmarks,
    average_benchmarks,
    normalize,
    rank_descending,
)
from lbnorm.readers import read_inputs
from lbnorm.readers.tables import ExtraColumns, scores_from_frame
from lbnorm.schemas import KEY_COLUMNS, SCORES, SUBTASK_SCORES, TEXT, conform
from lbnorm.suites import Suite, load_suite

__all__ = ["Result", "compute_result", "demo_path", "normalize_scores", "run"]


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

    Returns:
        The result tables.
    """
    bounds = suite.subtask_table()
    dense = collect_scores(
        batches,
        bounds,
        unknown=unknown,
        expected_rows=expected_rows,
        keep_rows=keep_subtasks,
    )
    arrays = _suite_arrays(bounds, suite)
    normalized = normalize(dense.raw, arrays.lower_bound)[0]
    benchmark = aggregate_benchmarks(dense.raw, normalized, arrays, missing=missing)
    average = average_benchmarks(benchmark.normalized, arrays.weight, missing=missing)
    rank = rank_descending(average)
    is_present = ~np.isnan(dense.raw)
    return Result(
        subtask_table=_subtask_table(dense, bounds, normalized)
        if keep_subtasks
        else None,
        benchmarks=_benchmark_table(dense.variants, suite, benchmark),
        leaderboard=_leaderboard_table(dense.variants, suite, benchmark, average, rank),
        suite=suite,
        files=files if files is not None else pd.DataFrame(),
        missing=missing,
        n_ignored_rows=dense.n_ignored,
        n_scores=int(is_present.sum()),
        n_clipped=int((dense.raw < arrays.lower_bound).sum()),
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

    Returns:
        The result tables.

    Raises:
        LbnormError: Any bad input or unwritable output; nothing is written then.
    """
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    paths = list(inputs) or [demo_path()]
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
    )
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


def _suite_arrays(bounds: pd.DataFrame, suite: Suite) -> SuiteArrays:
    return SuiteArrays(
        lower_bound=bounds["lower_bound"].to_numpy(dtype=np.float64),
        n_samples=bounds["n_samples"].to_numpy(dtype=np.float64),
        benchmark_index=bounds["benchmark_index"].to_numpy(dtype=np.int64),
        is_pooled=np.array(
            [b.aggregation == "pool-then-normalize" for b in suite.benchmarks]
        ),
        weight=np.array([b.weight for b in suite.benchmarks], dtype=np.float64),
    )


def _subtask_table(
    dense: DenseScores, bounds: pd.DataFrame, normalized: FloatArray
) -> pa.Table:
    """One row per score present, sorted by variant then suite subtask order.

    Text columns are dictionary-encoded by code, so no string is built per row.
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


def _benchmark_table(
    variants: pd.DataFrame, suite: Suite, arrays: BenchmarkArrays
) -> pd.DataFrame:
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


def _leaderboard_table(
    variants: pd.DataFrame,
    suite: Suite,
    arrays: BenchmarkArrays,
    average: FloatArray,
    rank: FloatArray,
) -> pd.DataFrame:
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
