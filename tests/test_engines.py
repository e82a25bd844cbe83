"""One contract for every engine in lbnorm.engines.

Each engine (stream; stream in the ``memory`` order, its subtask table held and
sorted; stream summing in forked workers, which needs the subtask table off;
stream spilling its rows to disk and summing a partition of the variants at a
time; Dask on a local cluster, slow) is run on the same Parquet inputs through
the engine interface (``start(inputs, suite, options) -> Job``) and must give
the same tables, bit for bit, and the same errors; the stream engine's tables
equal a dense pivot of the scores (:mod:`dense_oracle`), bit for bit. Engines that
run in this process must let an interruption through and leave no worker behind.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import tempfile
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dense_oracle import dense_result
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import OPENLLM_V2, suites_with_scores

from lbnorm._runtime import can_fork
from lbnorm.core.errors import InputError, ValidationError
from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.core.schemas import Batch
from lbnorm.engines import stream
from lbnorm.engines import workers as workers_module
from lbnorm.engines.result import BoardCounts, Result, finish_job
from lbnorm.pipeline import demo_path, select_engine
from lbnorm.readers import Inputs, read_inputs
from lbnorm.suites import Suite, parse_suite

HAS_DASK = find_spec("dask") is not None and find_spec("distributed") is not None
needs_fork = pytest.mark.skipif(not can_fork(), reason="no fork here")

#: engine id -> the options that choose it (besides the policies under test)
ENGINE_OPTIONS: dict[str, dict[str, Any]] = {
    "memory": {"engine": "memory"},
    "stream": {"engine": "stream"},
    "stream-workers": {"engine": "stream", "workers": 2, "subtasks": False},
    # a budget of ~1 byte: every run spills, a partition of a few variants each
    "stream-spilled": {"engine": "stream", "sum_memory": 1e-9},
    "dask": {"engine": "dask"},
}
ENGINES = [
    pytest.param("memory"),
    pytest.param("stream"),
    pytest.param("stream-workers", marks=needs_fork),
    pytest.param("stream-spilled"),
    pytest.param(
        "dask",
        marks=[
            pytest.mark.slow,
            pytest.mark.skipif(not HAS_DASK, reason="dask is an optional extra"),
        ],
    ),
]
LOCAL_ENGINES = ["memory", "stream", "stream-workers", "stream-spilled"]

SUITE = parse_suite(
    b"""
name = "mixed"
[[benchmarks]]
name = "GPQA"
aggregation = "pool-then-normalize"
weight = 2.0
subtasks = [
  { name = "main", num_choices = 4, n_samples = 448 },
  { name = "diamond", num_choices = 4, n_samples = 198 },
]
[[benchmarks]]
name = "MUSR"
subtasks = [
  { name = "murder_mysteries", num_choices = 2 },
  { name = "object_placements", num_choices = 5 },
  { name = "team_allocation", num_choices = 3, n_samples = 250 },
]
""",
    source="mixed.toml",
)


@pytest.fixture(scope="module")
def dask_scheduler() -> Iterator[str]:
    """A local cluster of two worker processes, for the Dask engine's cases."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": ":0"},  # not 8787: see engines.dask
    ) as cluster:
        yield str(cluster.scheduler_address)


def _options(engine: str, scheduler: str | None = None, **policies: Any) -> RunOptions:
    chosen = {**ENGINE_OPTIONS[engine], **policies}
    if engine == "dask":
        chosen["scheduler"] = scheduler
    return RunOptions(**chosen).resolved()


def _engine(name: str) -> ModuleType:
    if name == "dask":
        from lbnorm.engines import dask

        return dask
    return stream  # (``memory``: the stream engine's order, held and sorted)


def _compute(
    engine: str,
    paths: list[Path],
    suite: Suite,
    request: pytest.FixtureRequest | None = None,
    **policies: Any,
) -> Result:
    """Read the inputs and run one engine through the interface the pipeline uses."""
    scheduler = (
        request.getfixturevalue("dask_scheduler")
        if engine == "dask" and request is not None
        else None
    )
    options = _options(engine, scheduler, **policies)
    inputs = read_inputs(paths, suite=suite, options=options)
    return finish_job(select_engine(options.engine)(inputs, suite, options))


def _assert_same_tables(expected: Result, actual: Result) -> None:
    """Benchmark and leaderboard tables and counts identical, bit for bit."""
    assert actual.benchmark_table.equals(expected.benchmark_table, check_metadata=True)
    assert actual.leaderboard_table.equals(
        expected.leaderboard_table, check_metadata=True
    )
    assert actual.file_table.equals(expected.file_table)
    # the counts an engine keeps for the summary are the leaderboard's
    assert actual.board_counts() == BoardCounts.of(actual.leaderboard_table)
    assert actual.board_counts() == expected.board_counts()
    counts = ("n_scores", "n_clipped", "n_ignored_rows")
    assert [getattr(actual, name) for name in counts] == [
        getattr(expected, name) for name in counts
    ]


def _assert_oracle(
    result: Result, paths: list[Path], suite: Suite, **policies: Any
) -> None:
    """The tables and counts equal the dense oracle's on the same rows, bit for bit."""
    table = pa.concat_tables([pq.read_table(path) for path in paths])
    expected = dense_result(table, suite, RunOptions(**policies))
    assert result.benchmark_table.equals(expected.benchmark_table)
    assert result.leaderboard_table.equals(expected.leaderboard_table)
    counts = ("n_scores", "n_clipped", "n_ignored_rows")
    assert [getattr(result, name) for name in counts] == [
        getattr(expected, name) for name in counts
    ]


def _sorted_subtasks(result: Result) -> pa.Table:
    table = result.subtask_table
    assert table is not None
    keys = ["benchmark", "subtask", "model", "precision", "revision", "chat_template"]
    plain = table
    for index, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            plain = plain.set_column(
                index, field.name, table.column(index).cast(pa.string())
            )
    return plain.sort_by([(key, "ascending") for key in keys])


# --- the inputs -----------------------------------------------------------------------


def _mixed_scores(seed: int = 5) -> pa.Table:
    """Scores for SUITE: holes, clipped scores, stderrs with nulls, resized pools."""
    rng = np.random.default_rng(seed)
    pairs = [(b.name, s.name) for b in SUITE.benchmarks for s in b.subtasks]
    rows = [
        (f"org/m{m:02d}", precision, benchmark, subtask)
        for m in range(30)
        for precision in ("bfloat16", "float16")
        for benchmark, subtask in pairs
        if rng.random() > 0.1  # about a tenth of the cells missing
    ]
    n_rows = len(rows)
    stderr = rng.uniform(0.0, 0.05, n_rows)
    n_samples = rng.integers(100, 400, n_rows)
    return pa.table(
        {
            "model": [row[0] for row in rows],
            "precision": [row[1] for row in rows],
            "benchmark": [row[2] for row in rows],
            "subtask": [row[3] for row in rows],
            "raw_score": rng.uniform(0.0, 1.0, n_rows),
            "stderr": pa.array(stderr, mask=rng.random(n_rows) < 0.2),
            "n_samples": pa.array(n_samples, mask=rng.random(n_rows) < 0.5),
        }
    )


@pytest.fixture(scope="module")
def inputs_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same scores as two Parquet files of several row groups each, rows shuffled."""
    folder = tmp_path_factory.mktemp("engines")
    table = _mixed_scores()
    unknown = pa.table(  # rows the suite does not define (the runs ignore them)
        {
            "model": ["org/m00", "org/x"],
            "precision": ["bfloat16", "bfloat16"],
            "benchmark": ["GPQA", "BBH"],
            "subtask": ["extended", "navigate"],
            "raw_score": [0.5, 0.5],
            "stderr": pa.array([None, None], pa.float64()),
            "n_samples": pa.array([None, None], pa.int64()),
        }
    )
    table = pa.concat_tables([table, unknown.cast(table.schema)])
    order = np.random.default_rng(1).permutation(table.num_rows)
    table = table.take(pa.array(order))
    half = table.num_rows // 2
    pq.write_table(table.slice(0, half), folder / "a.parquet", row_group_size=37)
    pq.write_table(table.slice(half), folder / "b.parquet", row_group_size=101)
    demo = folder / "demo"
    demo.mkdir()
    pq.write_table(
        pq.read_table(demo_path()).slice(0, 4_000),
        demo / "demo.parquet",
        row_group_size=1_500,
    )
    return folder


def _paths(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.parquet"))


@pytest.fixture(scope="module")
def reference(inputs_dir: Path) -> dict[str, Result]:
    """The default engine's results (the dense oracle's): what every engine must give."""
    references = {}
    for missing in ("exclude", "partial", "zero"):
        policies: dict[str, Any] = {"missing": missing, "unknown": "ignore"}
        paths = _paths(inputs_dir)
        references[missing] = _compute("stream", paths, SUITE, **policies)
        _assert_oracle(references[missing], paths, SUITE, **policies)
    return references


# --- the interface --------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_has_the_interface_and_the_one_switch(engine: str) -> None:
    module = _engine(engine)
    options = _options(engine)
    assert select_engine(options.engine) is module.start
    for function in (module.start, module.compute):
        assert list(inspect.signature(function).parameters)[:3] == [
            "inputs",
            "suite",
            "options",
        ]


# --- same tables for the same inputs ------------------------------------------------


@pytest.mark.parametrize("missing", ["exclude", "partial", "zero"])
@pytest.mark.parametrize("engine", ENGINES)
def test_same_tables_for_the_same_inputs(
    engine: str,
    missing: MissingPolicy,
    inputs_dir: Path,
    reference: dict[str, Result],
    request: pytest.FixtureRequest,
) -> None:
    result = _compute(
        engine,
        _paths(inputs_dir),
        SUITE,
        request,
        missing=missing,
        unknown="ignore",
    )
    expected = reference[missing]
    _assert_same_tables(expected, result)
    assert result.n_ignored_rows == 2
    if engine in ("memory", "stream", "stream-spilled"):  # (memory's come sorted)
        assert _sorted_subtasks(result).equals(_sorted_subtasks(expected))
    else:  # summing in parts builds no subtask table
        assert result.subtask_table is None


@pytest.mark.parametrize("engine", ENGINES)
def test_same_tables_on_the_demo_suite(
    engine: str, inputs_dir: Path, request: pytest.FixtureRequest
) -> None:
    paths = _paths(inputs_dir / "demo")
    expected = _compute("stream", paths, OPENLLM_V2)
    _assert_oracle(expected, paths, OPENLLM_V2)
    _assert_same_tables(expected, _compute(engine, paths, OPENLLM_V2, request))


@pytest.mark.slow
@settings(deadline=None)
@given(case=suites_with_scores(max_variants=5), rows=st.integers(1, 40))
@pytest.mark.parametrize("engine", [p for p in ENGINES if p.values[0] != "dask"])
def test_same_tables_on_generated_suites_and_scores(
    engine: str, case: tuple[Suite, pa.Table], rows: int
) -> None:
    suite, table = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scores.parquet"
        pq.write_table(table, path, row_group_size=rows)
        expected = _compute("stream", [path], suite, missing="partial")
        _assert_oracle(expected, [path], suite, missing="partial")
        result = _compute(engine, [path], suite, missing="partial")
    _assert_same_tables(expected, result)


# --- same errors for bad inputs -----------------------------------------------------


def _damaged(table: pa.Table, kind: str) -> pa.Table:
    """The scores with one kind of failure in two places (different row groups)."""
    scores = table.column("raw_score").to_pylist()
    if kind == "percent_scale":
        scores[3], scores[250] = 45.0, 99.0
    elif kind == "non_finite_score":
        scores[3], scores[250] = float("nan"), float("inf")
    if kind in ("percent_scale", "non_finite_score"):
        index = table.column_names.index("raw_score")
        return table.set_column(index, "raw_score", pa.array(scores))
    if kind == "unknown_subtask":
        names = table.column("subtask").to_pylist()
        names[3], names[250] = "nope", "platinum"
        return table.set_column(
            table.column_names.index("subtask"), "subtask", pa.array(names)
        )
    assert kind == "duplicate_in_a_row_group"
    return pa.concat_tables([table.slice(0, 5), table.slice(2, 1), table.slice(5)])


BAD_KINDS = {
    "percent_scale": r"- percent_scale: .*\n  Hint: raw_score looks like a percentage",
    "non_finite_score": r"- non_finite_score: .*\n  Hint: raw_score must be a number",
    "unknown_subtask": r"- unknown_subtask: .*\n  Hint: the suite has no such",
    "duplicate_in_a_row_group": r"- duplicate_score: .*also at row 3.*\n  Hint: each \(model",
}


@pytest.mark.parametrize("kind", list(BAD_KINDS))
@pytest.mark.parametrize("engine", ENGINES)
def test_same_errors_for_bad_inputs(
    engine: str, kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(_damaged(_mixed_scores(), kind), path, row_group_size=100)
    with pytest.raises(ValidationError, match=BAD_KINDS[kind]) as expected:
        _compute("stream", [path], SUITE)
    with pytest.raises(ValidationError, match=BAD_KINDS[kind]) as raised:
        _compute(engine, [path], SUITE, request)
    assert str(raised.value) == str(expected.value)
    assert raised.value.failure_table.equals(expected.value.failure_table)


@pytest.mark.parametrize("engine", [p for p in ENGINES if p.values[0] != "dask"])
def test_a_duplicate_across_row_groups_is_located_alike(
    engine: str, tmp_path: Path
) -> None:
    """In one process, or in workers that hand the failure back to one process."""
    table = _mixed_scores()
    path = tmp_path / "dup.parquet"
    pq.write_table(
        pa.concat_tables([table, table.slice(7, 1)]), path, row_group_size=100
    )
    row = table.num_rows + 1
    with pytest.raises(
        ValidationError,
        match=rf"dup\.parquet row {row} \(org/m\d+ / \w+ / \w+: also given by an earlier input\)\n  Hint: each \(model",
    ) as raised:
        _compute(engine, [path], SUITE)
    assert raised.value.failure_table.column("row").to_pylist() == [str(row)]


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DASK, reason="dask is an optional extra")
def test_dask_names_a_duplicate_across_row_groups_as_two_parts(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Row groups are summed apart on the cluster: the pair, not its row, is named."""
    table = _mixed_scores()
    path = tmp_path / "dup.parquet"
    pq.write_table(
        pa.concat_tables([table, table.slice(7, 1)]), path, row_group_size=100
    )
    model = table.column("model")[7].as_py()
    with pytest.raises(
        ValidationError,
        match=rf"\(two parts of the input\) \({model} / \w+ / \w+: given twice\)\n  Hint: each \(model",
    ):
        _compute("dask", [path], SUITE, request)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DASK, reason="dask is an optional extra")
def test_dask_refuses_inputs_it_cannot_read_on_workers(tmp_path: Path) -> None:
    from lbnorm.engines import dask

    path = tmp_path / "scores.csv"
    path.write_text("model,benchmark,subtask,raw_score\nm,GPQA,main,0.5\n")
    options = _options("dask")
    inputs = read_inputs([path], suite=SUITE, options=options)
    with pytest.raises(
        InputError,
        match=r"scores\.csv: 1 input file\(s\) not in Parquet; the Dask engine reads Parquet only\.\n"
        r"Hint: `lbnorm convert INPUT\.\.\. --out scores\.parquet`",
    ):
        dask.compute(inputs, SUITE, options)


# --- interruption ---------------------------------------------------------------------


def _interrupted_batches(table: pa.Table, after: int) -> Iterator[Batch]:
    """Batches of 50 rows, then a Ctrl-C while the engine reads the next one."""
    for number, start in enumerate(range(0, table.num_rows, 50)):
        if number == after:
            raise KeyboardInterrupt
        yield Batch(
            table=table.slice(start, 50), source="s.parquet", first_row=start + 1
        )


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_an_interruption_goes_through_and_the_job_gives_nothing(engine: str) -> None:
    table = _mixed_scores()
    options = _options(engine)
    inputs = Inputs(
        batches=_interrupted_batches(table, after=3), num_rows=table.num_rows
    )
    job = _engine(engine).start(inputs, SUITE, options)
    parts: list[pa.Table] = []

    def run_job() -> None:  # as the writer does: the parts, then the result
        parts.extend(job.subtask_parts())
        job.finish()

    with pytest.raises(KeyboardInterrupt):  # not turned into an lbnorm error
        run_job()
    if engine == "stream":  # the parts before the interruption came out
        assert sum(part.num_rows for part in parts) == 150


@needs_fork
def test_an_interruption_while_workers_sum_leaves_no_worker(
    inputs_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C in the parent once the workers are forked: all are killed and reaped."""
    others = {child.pid for child in multiprocessing.active_children()}  # a cluster's
    forked: list[int] = []

    def interrupt(name: str) -> None:
        if name == "workers-started":
            forked.extend(
                child.pid
                for child in multiprocessing.active_children()
                if child.pid is not None and child.pid not in others
            )
            raise KeyboardInterrupt

    monkeypatch.setattr(workers_module, "fault_point", interrupt)
    with pytest.raises(KeyboardInterrupt):
        _compute("stream-workers", _paths(inputs_dir), SUITE, unknown="ignore")
    assert len(forked) == 2
    assert not {child.pid for child in multiprocessing.active_children()} & set(forked)
    for pid in forked:  # reaped, not left as zombies
        with pytest.raises(ProcessLookupError, match="No such process"):
            os.kill(pid, 0)


@pytest.mark.parametrize("engine", LOCAL_ENGINES)
def test_a_failed_run_can_be_run_again(
    engine: str, inputs_dir: Path, reference: dict[str, Result], tmp_path: Path
) -> None:
    """Nothing of a run survives into the next: no state outside the job."""
    bad = tmp_path / "bad.parquet"
    pq.write_table(_damaged(_mixed_scores(), "percent_scale"), bad, row_group_size=100)
    with pytest.raises(
        ValidationError, match=r"\n  Hint: raw_score looks like a percentage"
    ):
        _compute(engine, [bad], SUITE)
    again = _compute(engine, _paths(inputs_dir), SUITE, unknown="ignore")
    _assert_same_tables(reference["exclude"], again)
