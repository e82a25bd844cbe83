"""lbnorm.engines.result: assemble_result, the output tables and the subtask parts.

The tables are checked against :mod:`lbnorm.core.schemas` (names, types, nullability
and the field docs), then for what they say: ranks, completeness, averages.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dense_oracle import aggregate_benchmarks
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import (
    OPENLLM_V2,
    metadata_tables,
    missing_policies,
    score_tables,
    suites_with_scores,
)

import lbnorm
from lbnorm import cli
from lbnorm.board import rank_descending
from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.core.schemas import (
    BENCHMARK_SCORES,
    INPUT_FILES,
    SUBTASK_SCORES,
    Batch,
    leaderboard_schema,
)
from lbnorm.engines import stream
from lbnorm.engines.encode import Variants
from lbnorm.engines.metadata import type_label_array
from lbnorm.engines.result import (
    BoardCounts,
    Result,
    TableParts,
    assemble_result,
    benchmark_table,
    finish_job,
    start_benchmark_keys,
    with_present_values,
)
from lbnorm.pipeline import demo_metadata_path, demo_path
from lbnorm.readers import Inputs
from lbnorm.suites import Suite, parse_suite, suite_arrays

SUITE = parse_suite(
    b"""
name = "two"
[[benchmarks]]
name = "A"
subtasks = [ { name = "x", num_choices = 2 }, { name = "y", num_choices = 0 } ]
[[benchmarks]]
name = "B"
weight = 3.0
subtasks = [ { name = "z", num_choices = 4 } ]
""",
    source="two.toml",
)


def _variants(models: list[str]) -> Variants:
    n_models = len(models)
    return Variants.from_table(
        pa.table(
            {
                "model": models,
                "precision": [""] * n_models,
                "revision": [""] * n_models,
                "chat_template": [False] * n_models,
            }
        )
    )


def _assemble(
    models: list[str], raw: list[list[float]], *, missing: MissingPolicy = "exclude"
) -> Result:
    """assemble_result on a dense (model x subtask) matrix, NaN = absent."""
    benchmark = aggregate_benchmarks(
        np.array(raw, dtype=np.float64), suite_arrays(SUITE), missing=missing
    )
    return assemble_result(
        _variants(models), benchmark, SUITE, options=RunOptions(missing=missing)
    )


def _column(table: pa.Table, name: str) -> list[Any]:
    return list(table.column(name).to_pylist())


# --- schemas --------------------------------------------------------------------------


def test_tables_have_the_schemas_of_lbnorm_schemas() -> None:
    result = _assemble(["a", "b"], [[1.0, 0.5, 1.0], [0.5, np.nan, 0.25]])
    assert result.benchmark_table.schema.equals(BENCHMARK_SCORES, check_metadata=True)
    assert result.leaderboard_table.schema.equals(
        leaderboard_schema(["A", "B"]), check_metadata=True
    )
    assert result.file_table.schema.equals(INPUT_FILES)
    assert result.subtask_parts is None
    assert result.subtask_table is None
    assert list(result.subtasks.columns) == SUBTASK_SCORES.names  # empty, typed
    assert result.missing == "exclude"


def test_field_docs_travel_with_every_column() -> None:
    result = _assemble(["a"], [[1.0, 0.5, 1.0]])
    for table in (result.benchmark_table, result.leaderboard_table):
        for field in table.schema:
            assert field.metadata is not None, field.name
            assert field.metadata[b"doc"], field.name


# --- what the tables say ----------------------------------------------------------------


def test_averages_ranks_and_order_by_hand() -> None:
    # A = mean(x normalized above 1/2, y above 0), B above 1/4; weights 1 and 3
    result = _assemble(
        ["c", "a", "b", "d"],
        [
            [1.0, 1.0, 1.0],  # c: A 100, B 100 -> 100
            [0.75, 0.5, 0.625],  # a: A (50 + 50) / 2 = 50, B 50 -> 50
            [0.5, 0.25, 0.25],  # b: A (0 + 25) / 2 = 12.5, B 0 -> 3.125
            [0.75, 0.5, 0.625],  # d: as a: a tie
        ],
    )
    board = result.leaderboard_table
    assert _column(board, "model") == ["c", "a", "d", "b"]  # ties keep key order
    assert _column(board, "rank") == [1, 2, 2, 4]  # ties share the smallest rank
    assert _column(board, "average") == pytest.approx([100.0, 50.0, 50.0, 3.125])
    assert _column(board, "A") == pytest.approx([100.0, 50.0, 50.0, 12.5])
    assert _column(board, "A Raw") == pytest.approx([1.0, 0.625, 0.625, 0.375])
    assert _column(board, "B") == pytest.approx([100.0, 50.0, 50.0, 0.0])
    assert _column(board, "is_complete") == [True] * 4
    benchmarks = result.benchmark_table
    assert benchmarks.num_rows == 8
    assert _column(benchmarks, "benchmark") == ["A"] * 4 + ["B"] * 4
    assert _column(benchmarks, "model") == ["c", "a", "b", "d"] * 2  # variant order


@pytest.mark.parametrize(
    ("missing", "averages", "ranks"),
    [
        ("exclude", [100.0, None, None], [1, None, None]),
        ("partial", [100.0, 100.0, 100.0], [1, 1, 1]),
        # A = (100 + 0) / 2 and (100 + 0) / 2; B (weight 3) 100 and 0
        ("zero", [100.0, (50.0 + 300.0) / 4, 50.0 / 4], [1, 2, 3]),
    ],
)
def test_completeness_under_each_missing_policy(
    missing: MissingPolicy, averages: list[float | None], ranks: list[int | None]
) -> None:
    nan = np.nan
    result = _assemble(
        ["full", "no_y", "only_x"],
        [[1.0, 1.0, 1.0], [1.0, nan, 1.0], [1.0, nan, nan]],
        missing=missing,
    )
    board = result.leaderboard_table
    assert _column(board, "model") == ["full", "no_y", "only_x"]
    assert _column(board, "rank") == ranks
    assert _column(board, "average") == pytest.approx(averages, nan_ok=True)
    assert _column(board, "n_benchmarks") == [2, 1, 0]
    assert _column(board, "n_benchmarks_expected") == [2, 2, 2]
    assert _column(board, "is_complete") == [True, False, False]
    benchmarks = result.benchmark_table
    # a (variant, benchmark) with no subtask at all has no row
    keys = list(
        zip(_column(benchmarks, "model"), _column(benchmarks, "benchmark"), strict=True)
    )
    assert keys == [
        ("full", "A"),
        ("no_y", "A"),
        ("only_x", "A"),
        ("full", "B"),
        ("no_y", "B"),
    ]
    assert _column(benchmarks, "n_subtasks") == [2, 1, 1, 1, 1]
    assert _column(benchmarks, "n_subtasks_expected") == [2, 2, 2, 1, 1]
    assert _column(benchmarks, "is_complete") == [True, False, False, True, True]
    if missing == "exclude":  # an incomplete benchmark has no score
        assert _column(benchmarks, "normalized_score")[1:3] == [None, None]


def test_unranked_variants_come_last_in_key_order() -> None:
    nan = np.nan
    result = _assemble(
        ["a", "b", "c", "d"],
        [[nan, nan, 1.0], [0.5, 0.0, 0.25], [1.0, nan, 1.0], [1.0, 1.0, 1.0]],
    )
    board = result.leaderboard_table
    assert _column(board, "model") == ["d", "b", "a", "c"]
    assert _column(board, "rank") == [1, 2, None, None]
    assert board.schema.field("rank").nullable


def test_no_variants_at_all() -> None:
    benchmark = aggregate_benchmarks(
        np.zeros((0, 3)), suite_arrays(SUITE), missing="exclude"
    )
    result = assemble_result(_variants([]), benchmark, SUITE, options=RunOptions())
    assert result.leaderboard_table.num_rows == 0
    assert result.benchmark_table.num_rows == 0
    assert result.leaderboard_table.schema.equals(leaderboard_schema(["A", "B"]))


def test_counts_and_options_are_kept() -> None:
    benchmark = aggregate_benchmarks(
        np.array([[0.25, 0.5, 0.1]]), suite_arrays(SUITE), missing="partial"
    )
    options = RunOptions(missing="partial", unknown="ignore")
    files = INPUT_FILES.empty_table()
    result = assemble_result(
        _variants(["a"]),
        benchmark,
        SUITE,
        options=options,
        files=files,
        n_ignored_rows=4,
        n_scores=3,
        n_clipped=2,
    )
    assert (result.n_ignored_rows, result.n_scores, result.n_clipped) == (4, 3, 2)
    assert result.options is options
    assert result.suite is SUITE
    assert result.file_table is files


def test_the_model_count_comes_from_the_engine_until_the_board_is_replaced() -> None:
    result = _assemble(["b", "a", "b2", "a"], [[0.5, 0.1, 0.3]] * 4)
    assert result.n_models == 3  # the key registry's count: "a" twice
    assert result.board_counts() == BoardCounts.of(result.leaderboard_table)
    # a metadata join replaces the board: its models are counted from it
    joined = lbnorm.run(
        options=RunOptions(exclude_flagged=True, metadata=str(demo_metadata_path()))
    )
    assert joined.n_models is None
    assert joined.board_counts() == BoardCounts.of(joined.leaderboard_table)
    plain = lbnorm.run([demo_path()])  # no metadata: the engine's count stays
    assert plain.n_models == joined.board_counts().models


# --- pandas views -------------------------------------------------------------------


def test_pandas_views_of_the_tables() -> None:
    nan = np.nan
    result = _assemble(["a", "b"], [[1.0, 1.0, 1.0], [nan, nan, 0.5]])
    board = result.leaderboard
    assert isinstance(board, pd.DataFrame)
    assert board["rank"].dtype == pd.Int64Dtype()
    assert board["rank"].isna().tolist() == [False, True]
    benchmarks = result.benchmarks
    assert isinstance(benchmarks["model"].dtype, pd.CategoricalDtype)
    assert result.files.columns.tolist() == INPUT_FILES.names


def test_subtask_views_have_plain_text() -> None:
    table = pa.table(
        {
            "model": ["a", "a", "a"],
            "benchmark": ["A", "A", "B"],
            "subtask": ["x", "y", "z"],
            "raw_score": [0.75, 0.5, 0.25],
            "n_samples": pa.array([None, 10, None], pa.int64()),
        }
    )
    options = RunOptions(engine="memory")
    result = stream.compute(
        Inputs.of_batches([Batch(table=table, source="t.parquet")]), SUITE, options
    )
    subtask_table = result.subtask_table
    assert subtask_table is not None
    assert subtask_table.schema.equals(SUBTASK_SCORES, check_metadata=True)
    frame = result.subtasks
    assert frame["model"].dtype == object or pd.api.types.is_string_dtype(
        frame["model"]
    )
    assert frame["subtask"].tolist() == ["x", "y", "z"]
    assert frame["n_samples"].dtype == pd.Int64Dtype()
    assert frame["n_samples"].isna().tolist() == [True, False, True]
    assert frame["source"].tolist() == ["t.parquet"] * 3


# --- subtask parts ------------------------------------------------------------------


def _parts() -> list[pa.Table]:
    schema = pa.schema([pa.field("x", pa.int64()), pa.field("name", pa.string())])
    return [
        pa.table({"x": [1, 2], "name": ["a", "b"]}, schema=schema),
        pa.table({"x": [3], "name": ["c"]}, schema=schema),
    ]


def test_parts_in_memory() -> None:
    parts = _parts()
    held = TableParts.held(parts[0].schema, parts)
    assert held.num_rows == 3
    assert list(held.parts()) == parts
    assert list(held.parts()) == parts  # read again: the same parts
    assert TableParts.held(parts[0].schema, []).num_rows == 0


def test_parts_on_disk_read_back_a_row_group_at_a_time(tmp_path: Path) -> None:
    parts = _parts()
    path = tmp_path / "subtasks.parquet"
    with pq.ParquetWriter(path, parts[0].schema) as writer:
        for part in parts:
            writer.write_table(part)
    on_disk = TableParts.on_disk(path)
    assert on_disk.num_rows == 3
    assert on_disk.schema.equals(parts[0].schema)
    assert on_disk.schema.metadata is None  # the file's own metadata left out
    read = list(on_disk.parts())
    assert [part.num_rows for part in read] == [2, 1]
    assert all(
        part.equals(expected) for part, expected in zip(read, parts, strict=True)
    )


def _demo_slice() -> pa.Table:
    """The first 400 rows of the bundled demo (10 variants of openllm-v2)."""
    return pq.read_table(lbnorm.demo_path()).slice(0, 400)


def test_subtask_table_of_the_written_file_equals_the_one_in_memory(
    tmp_path: Path,
) -> None:
    """A run written to disk hands its subtask table back from the file."""
    scores = tmp_path / "scores.parquet"
    pq.write_table(_demo_slice(), scores, row_group_size=90)
    in_memory = lbnorm.run([scores], options=RunOptions(engine="memory"))
    written = lbnorm.run(
        [scores], out=tmp_path / "out", options=RunOptions(engine="memory")
    )
    assert in_memory.subtask_table is not None
    assert written.subtask_table is not None
    assert written.subtask_table.equals(in_memory.subtask_table)
    assert written.benchmark_table.equals(in_memory.benchmark_table)
    assert written.leaderboard_table.equals(in_memory.leaderboard_table)


def test_an_empty_subtask_table_keeps_its_schema() -> None:
    result = Result(
        benchmark_output=BENCHMARK_SCORES.empty_table(),
        leaderboard_output=leaderboard_schema([]).empty_table(),
        suite=SUITE,
        subtask_parts=TableParts.held(SUBTASK_SCORES, []),
    )
    table = result.subtask_table
    assert table is not None
    assert table.num_rows == 0
    assert table.schema.equals(SUBTASK_SCORES)


class _Job:
    """A job whose result lacks the parts it streamed (as a streaming engine's)."""

    def __init__(self, parts: list[pa.Table], result: Result) -> None:
        self.subtask_schema = parts[0].schema if parts else None
        self._parts, self._result = parts, result

    def subtask_parts(self) -> Any:
        return iter(self._parts)

    def finish(self) -> Result:
        return self._result


def test_finish_job_keeps_streamed_parts_in_memory() -> None:
    parts = [*_parts(), _parts()[1].slice(0, 0)]  # an empty part is dropped
    bare = _assemble(["a"], [[1.0, 1.0, 1.0]])
    result = finish_job(_Job(parts, bare))
    assert result.subtask_parts is not None
    assert result.subtask_parts.num_rows == 3
    assert [part.num_rows for part in result.subtask_parts.parts()] == [2, 1]
    assert result.leaderboard_table.equals(bare.leaderboard_table)
    assert isinstance(result.leaderboard_output, pa.Table)  # built, not under way
    alone = finish_job(_Job([], bare))  # no subtask table asked for
    assert alone.subtask_parts is None
    assert alone.leaderboard_table.equals(bare.leaderboard_table)


# --- a large run's tables: built on threads ---------------------------------------------


def test_built_beside_hands_over_the_table_once_built() -> None:
    table = pa.table({"x": [1, 2]})
    started, release = threading.Event(), threading.Event()

    def build() -> pa.Table:
        started.set()
        assert release.wait(10)
        return table

    later = TableParts.beside(build, schema=table.schema, num_rows=2)
    assert started.wait(10)  # under way on its own thread; the caller goes on
    assert later.num_rows == 2
    assert later.schema.equals(table.schema)
    release.set()
    assert later.whole() is table
    assert [part is table for part in later.parts()] == [True]


def test_built_beside_raises_what_the_build_raised_where_it_is_asked_for() -> None:
    def build() -> pa.Table:
        message = "no room for the leaderboard"
        raise MemoryError(message)

    later = TableParts.beside(build, schema=pa.schema([]), num_rows=0)
    with pytest.raises(MemoryError, match="no room"):
        later.whole()
    with pytest.raises(MemoryError, match="no room"):
        list(later.parts())


_NAN = float("nan")
#: Three variants; "b" has no B subtask, "c" none of A's: cells are missing.
_HOLES = [[0.9, 0.5, 0.75], [0.2, _NAN, _NAN], [_NAN, _NAN, 0.4]]


@pytest.mark.parametrize("raw", [_HOLES, [[0.9, 0.5, 0.75], [0.2, 0.1, 0.3]]])
def test_keys_built_ahead_give_the_same_benchmark_table(
    monkeypatch: pytest.MonkeyPatch, raw: list[list[float]]
) -> None:
    variants = _variants(["a", "b", "c"][: len(raw)])
    arrays = aggregate_benchmarks(
        np.array(raw, dtype=np.float64), suite_arrays(SUITE), missing="exclude"
    )
    monkeypatch.setattr("lbnorm._runtime.THREAD_ROWS", 1)  # built on a thread
    keys = start_benchmark_keys(variants, SUITE)
    assert keys is not None
    ahead = benchmark_table(variants, SUITE, arrays, keys=keys.result())
    assert ahead.equals(benchmark_table(variants, SUITE, arrays))
    assert ahead.num_rows == int((arrays.n_present > 0).sum())


@pytest.mark.parametrize("missing", ["exclude", "zero"])
def test_tables_built_on_threads_equal_those_built_at_once(
    monkeypatch: pytest.MonkeyPatch, missing: MissingPolicy
) -> None:
    variants = _variants(["a", "b", "c"])
    arrays = aggregate_benchmarks(
        np.array(_HOLES, dtype=np.float64), suite_arrays(SUITE), missing=missing
    )
    options = RunOptions(missing=missing)
    monkeypatch.setattr("lbnorm._runtime.THREAD_ROWS", 1 << 30)
    assert start_benchmark_keys(variants, SUITE) is None  # small: nothing to start
    at_once = assemble_result(variants, arrays, SUITE, options=options)
    assert isinstance(at_once.leaderboard_output, pa.Table)
    monkeypatch.setattr("lbnorm._runtime.THREAD_ROWS", 1)
    keys = start_benchmark_keys(variants, SUITE)
    assert keys is not None
    threaded = assemble_result(variants, arrays, SUITE, options=options, keys=keys)
    assert isinstance(threaded.leaderboard_output, TableParts)  # built beside
    assert threaded.leaderboard_table.equals(at_once.leaderboard_table)
    assert threaded.benchmark_table.equals(at_once.benchmark_table)
    assert threaded.board_counts() == at_once.board_counts()


# --- properties on generated suites and scores ------------------------------------------


@settings(deadline=None)
@given(case=suites_with_scores(), missing=missing_policies)
def test_output_tables_agree_with_each_other(
    case: tuple[Suite, pa.Table], missing: MissingPolicy
) -> None:
    suite, table = case
    options = RunOptions(engine="memory", missing=missing)
    result = stream.compute(
        Inputs.of_batches([Batch(table=table, source="s.parquet")]), suite, options
    )
    board, benchmarks = result.leaderboard_table, result.benchmark_table
    assert board.schema.equals(
        leaderboard_schema(suite.benchmark_names), check_metadata=True
    )
    assert benchmarks.schema.equals(BENCHMARK_SCORES, check_metadata=True)
    assert result.subtask_table is not None
    assert result.subtask_table.schema.equals(SUBTASK_SCORES, check_metadata=True)
    # every score is a subtask row; every (variant, benchmark) with one is a row
    assert result.n_scores == table.num_rows == result.subtask_table.num_rows
    keys = ["model", "precision", "revision", "chat_template"]
    plain = {
        name: [str(v) if name != "chat_template" else v for v in _column(table, name)]
        for name in keys
        if name in table.column_names
    }
    variants = {tuple(row) for row in zip(*plain.values(), strict=True)}
    assert board.num_rows == len(variants)
    pairs = {
        (*row, benchmark)
        for *row, benchmark in zip(
            *plain.values(), _column(table, "benchmark"), strict=True
        )
    }
    assert benchmarks.num_rows == len(pairs)
    # ranks: by average, ties sharing the smallest, unranked last
    average = np.array(_column(board, "average"), dtype=np.float64)
    ranks = rank_descending(average)
    expected = [None if np.isnan(r) else int(r) for r in ranks]
    assert _column(board, "rank") == expected
    ranked = [r for r in expected if r is not None]
    assert ranked == sorted(ranked)
    assert expected[len(ranked) :] == [None] * (len(expected) - len(ranked))
    n_expected = len(suite.benchmarks)
    complete = [n == n_expected for n in _column(board, "n_benchmarks")]
    assert _column(board, "is_complete") == complete
    if missing == "exclude":
        assert [r is not None for r in expected] == complete


@settings(deadline=None, max_examples=10)
@given(table=score_tables(OPENLLM_V2, max_variants=4), data=st.data())
def test_metadata_keeps_the_leaderboard_and_adds_documented_columns(
    table: pa.Table, data: st.DataObject
) -> None:
    """Any metadata for some of the models: same rows, order and columns first."""
    models = [str(model) for model in _column(table, "model")]
    metadata = data.draw(metadata_tables(models))
    with tempfile.TemporaryDirectory() as folder:
        scores, meta = Path(folder) / "scores.parquet", Path(folder) / "meta.parquet"
        pq.write_table(table, scores)
        pq.write_table(metadata, meta)
        bare = lbnorm.run([scores], options=RunOptions(missing="partial"))
        joined = lbnorm.run(
            [scores], options=RunOptions(missing="partial", metadata=str(meta))
        )
    before, after = bare.leaderboard_table, joined.leaderboard_table
    assert after.schema.names[: len(before.schema)] == before.schema.names
    assert after.select(before.schema.names).equals(before)
    added = after.schema.names[len(before.schema) :]
    assert added == ["type", "type_code", "params_b", "flagged", "size_class"]
    for name in added:
        field = after.schema.field(name)
        assert field.metadata is not None
        assert field.metadata[b"doc"]
    known = dict(
        zip(_column(metadata, "model"), _column(metadata, "type"), strict=True)
    )
    codes = [known.get(m) for m in _column(after, "model")]
    assert _column(after, "type_code") == codes  # as the metadata spells it
    labels = type_label_array(pa.array(codes, pa.string())).to_pylist()
    assert _column(after, "type") == labels  # the leaderboard's words


@pytest.mark.parametrize(
    "sum_memory",
    [0.5, pytest.param(1e-9, marks=pytest.mark.slow)],  # (two demo runs spilled)
    ids=["in-memory", "spilled"],
)
def test_counts_follow_a_replaced_leaderboard(sum_memory: float) -> None:
    """A metadata join that takes ranks away (``--exclude-flagged``) changes the counts."""
    plain = lbnorm.run(options=RunOptions(sum_memory=sum_memory))
    flagged = lbnorm.run(
        options=RunOptions(sum_memory=sum_memory, exclude_flagged=True)
    )
    counts, fewer = plain.board_counts(), flagged.board_counts()
    assert fewer == BoardCounts.of(flagged.leaderboard_table)
    assert fewer.ranked < counts.ranked
    assert (fewer.variants, fewer.models) == (counts.variants, counts.models)
    # nothing the engine counted outlives its leaderboard
    swapped = replace(plain, leaderboard_output=flagged.leaderboard_table)
    assert swapped.board_counts() == fewer


# --- output dictionaries hold only values present -------------------------------------


def _categorical_input(path: Path) -> pd.DataFrame:
    """A Parquet input written by pandas, its categoricals carrying unused values."""
    scores = pd.read_parquet(demo_path()).head(400)
    rows = pd.concat(
        [scores, scores.head(3).assign(benchmark="NOPE", subtask="x")],
        ignore_index=True,
    )
    models = pd.unique(rows["model"]).tolist()
    unused = [f"unused/model-{at}" for at in range(3_000)]
    typed = rows.astype(
        {
            "model": pd.CategoricalDtype([*unused, *models]),
            "benchmark": pd.CategoricalDtype([*pd.unique(rows["benchmark"]), "UNUSED"]),
            "subtask": pd.CategoricalDtype([*pd.unique(rows["subtask"]), "y"]),
        }
    )
    typed.to_parquet(path, row_group_size=100)
    return scores


@pytest.mark.parametrize(
    "options",
    [[], ["--engine", "memory"], ["--sum-memory", "0.0001"], ["--batch-rows", "7"]],
)
def test_output_dictionaries_hold_only_values_present(
    tmp_path: Path, options: list[str]
) -> None:
    """Unused categories, and rows dropped as unknown, leave no value in subtasks.parquet."""
    source = tmp_path / "in.parquet"
    scores = _categorical_input(source)
    out = tmp_path / "out"
    argv = ["run", str(source), "--unknown", "ignore", "--quiet", "--out", str(out)]
    assert cli.main([*argv, *options]) == 0
    subtasks = pd.read_parquet(out / "subtasks.parquet")
    assert len(subtasks) == len(scores)
    for name in ("model", "precision", "revision", "benchmark", "subtask", "metric"):
        column = subtasks[name]
        assert isinstance(column.dtype, pd.CategoricalDtype), name
        assert set(column.cat.categories) == set(column.unique()), name
    assert set(subtasks["model"].cat.categories) == set(scores["model"])
    assert "NOPE" not in set(subtasks["benchmark"].cat.categories)
    benchmarks = pd.read_parquet(out / "benchmarks.parquet")
    for name in ("model", "benchmark"):
        column = benchmarks[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            assert set(column.cat.categories) == set(column.unique()), name


def test_present_values_keep_a_dictionary_all_used_as_it_is() -> None:
    values = pa.DictionaryArray.from_arrays(
        pa.array([2, None, 0, 2], pa.int32()), pa.array(["a", "b", "c"])
    )
    table = pa.table({"key": values, "n": [1, 2, 3, 4]})
    cut = with_present_values(table)
    assert cut.column("key").chunk(0).dictionary.to_pylist() == ["a", "c"]
    assert cut.column("key").to_pylist() == values.to_pylist()
    assert cut.column("key").type == values.type
    assert with_present_values(cut) is cut  # every value used: nothing rebuilt
