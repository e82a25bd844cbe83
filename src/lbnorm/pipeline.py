"""The pipeline, composed: readers -> validate -> suite bounds -> kernel -> writer.

``normalize_scores`` is the pure computation (a frame in, a :class:`Result` out);
``run`` adds reading files and, given ``out``, writing the Parquet outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from lbnorm.encode import encode_subtasks, encode_variants
from lbnorm.kernel import (
    BenchmarkArrays,
    FloatArray,
    MissingPolicy,
    SuiteArrays,
    aggregate_benchmarks,
    average_benchmarks,
    normalize,
    rank_descending,
    scatter_dense,
)
from lbnorm.readers import read_inputs
from lbnorm.readers.tables import ExtraColumns, scores_from_frame
from lbnorm.schemas import SCORES, SUBTASK_SCORES
from lbnorm.suites import Suite, load_suite
from lbnorm.validate import UnknownSubtasks, validate_scores

__all__ = ["DEMO_SCORES", "Result", "normalize_scores", "run"]

#: The bundled demo: 4,576 real Open LLM Leaderboard v2 models (see data/README.md).
DEMO_SCORES = "demo"


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """A normalized leaderboard: three tables and where they came from.

    Attributes:
        subtasks: One row per (variant, subtask): raw, bound, normalized, clipped.
        benchmarks: One row per (variant, benchmark): raw as shown, normalized.
        leaderboard: One row per variant, best first: rank, average, coverage and
            a column per benchmark (and ``<benchmark> Raw``).
        suite: The suite used.
        files: The input files (path, format, sha256, rows, superseded_by, ...).
        missing: The missing-data policy used.
        n_ignored_rows: Rows dropped as unknown subtasks under ``unknown="ignore"``.
    """

    subtasks: pd.DataFrame
    benchmarks: pd.DataFrame
    leaderboard: pd.DataFrame
    suite: Suite
    files: pd.DataFrame = field(default_factory=pd.DataFrame)
    missing: MissingPolicy = "exclude"
    n_ignored_rows: int = 0


def normalize_scores(
    scores: pd.DataFrame,
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
    if "_row" not in scores.columns:
        scores = scores_from_frame(
            scores, source="<frame>", extra_columns=extra_columns
        )
    bounds = suite.subtask_table()
    subtask_code = encode_subtasks(scores, bounds)
    variant_code, variants = encode_variants(scores)
    keep = validate_scores(scores, subtask_code, variant_code, unknown=unknown)
    n_ignored = int((~keep).sum())
    if n_ignored:
        scores = scores.loc[keep].reset_index(drop=True)
        subtask_code = subtask_code[keep]
        variant_code, variants = encode_variants(scores)

    raw = scores["raw_score"].to_numpy(dtype=np.float64)
    lower_bound = bounds["lower_bound"].to_numpy()[subtask_code]
    normalized, is_clipped = normalize(raw, lower_bound)
    shape = (len(variants), len(bounds))
    arrays = _suite_arrays(bounds, suite)
    benchmark = aggregate_benchmarks(
        scatter_dense(raw, variant_code, subtask_code, shape),
        scatter_dense(normalized, variant_code, subtask_code, shape),
        arrays,
        missing=missing,
    )
    average = average_benchmarks(benchmark.normalized, arrays.weight, missing=missing)
    rank = rank_descending(average)

    order = np.lexsort((subtask_code, variant_code))
    extras = [
        name for name in scores.columns if name not in SCORES.names and name != "_row"
    ]
    subtasks = (
        scores.assign(
            lower_bound=lower_bound, normalized_score=normalized, is_clipped=is_clipped
        )
        .iloc[order][[*SUBTASK_SCORES.names, *extras]]
        .reset_index(drop=True)
    )
    return Result(
        subtasks=subtasks,
        benchmarks=_benchmark_table(variants, suite, benchmark),
        leaderboard=_leaderboard_table(variants, suite, benchmark, average, rank),
        suite=suite,
        files=files if files is not None else pd.DataFrame(),
        missing=missing,
        n_ignored_rows=n_ignored,
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

    Returns:
        The result tables.

    Raises:
        LbnormError: Any bad input or unwritable output; nothing is written then.
    """
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    paths = list(inputs) or [demo_path()]
    read = read_inputs(paths, suite=suite, extra_columns=extra_columns)
    result = normalize_scores(
        read.scores, suite, missing=missing, unknown=unknown, files=read.files
    )
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


def _benchmark_table(
    variants: pd.DataFrame, suite: Suite, arrays: BenchmarkArrays
) -> pd.DataFrame:
    n_variants, n_benchmarks = arrays.raw.shape
    present = (arrays.n_present > 0).ravel()
    variant_index = np.repeat(np.arange(n_variants), n_benchmarks)[present]
    benchmark_index = np.tile(np.arange(n_benchmarks), n_variants)[present]
    expected = arrays.n_expected[benchmark_index].astype(np.int32)
    count = arrays.n_present.ravel()[present].astype(np.int32)
    table = variants.iloc[variant_index].reset_index(drop=True)
    return table.assign(
        benchmark=np.asarray(suite.benchmark_names, dtype=object)[benchmark_index],
        raw_score=arrays.raw.ravel()[present],
        normalized_score=arrays.normalized.ravel()[present],
        n_subtasks=count,
        n_subtasks_expected=expected,
        is_complete=count == expected,
    )


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
