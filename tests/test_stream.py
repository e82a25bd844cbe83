"""The streaming engine against a dense pivot of the scores: same tables, any batching."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dense_oracle import dense_result
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import missing_policies, score_tables

import lbnorm
from lbnorm import _runtime as batch_thread
from lbnorm.cli import main
from lbnorm.core.errors import InputError, OptionsError, ValidationError
from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.core.schemas import Batch
from lbnorm.engines import stream
from lbnorm.engines.result import Result
from lbnorm.pipeline import demo_path
from lbnorm.readers import Inputs
from lbnorm.suites import load_suite

SUITE = load_suite("openllm-v2")


def assert_same_result(
    expected: lbnorm.Result, actual: lbnorm.Result, *, exact: bool = False
) -> None:
    """Tables equal to 1e-12 (``exact``: bit for bit); ranks and order identical."""
    tolerance = {"check_exact": True} if exact else {"rtol": 0.0, "atol": 1e-12}
    pd.testing.assert_frame_equal(expected.benchmarks, actual.benchmarks, **tolerance)
    pd.testing.assert_frame_equal(expected.leaderboard, actual.leaderboard, **tolerance)
    assert (expected.n_scores, expected.n_clipped) == (
        actual.n_scores,
        actual.n_clipped,
    )


def streamed(batches: list[Batch], **options: Any) -> Result:
    """The stream engine on batches in memory."""
    chosen = RunOptions(subtasks=False, engine="stream", **options)
    return stream.compute(Inputs.of_batches(batches), SUITE, chosen)


def in_memory(batches: list[Batch], **options: Any) -> Result:
    """The dense oracle (:mod:`dense_oracle`) on the batches' rows."""
    table = pa.concat_tables([batch.table for batch in batches])
    return dense_result(table, SUITE, RunOptions(subtasks=False, **options))


@pytest.fixture(scope="module")
def demo() -> pa.Table:
    return pq.read_table(demo_path())


@pytest.fixture(scope="module")
def demo_in_memory() -> lbnorm.Result:
    """The demo in the ``memory`` order, checked against the dense oracle."""
    result = lbnorm.run([demo_path()], options=RunOptions(engine="memory"))
    oracle = dense_result(pq.read_table(demo_path()), SUITE)
    assert_same_result(oracle, result, exact=True)
    return result


@pytest.mark.slow
@pytest.mark.parametrize("batch_rows", [None, 50_000, 997])
def test_demo_streamed_equals_in_memory(
    demo_in_memory: lbnorm.Result, batch_rows: int | None
) -> None:
    streamed = lbnorm.run(
        [demo_path()], options=RunOptions(engine="stream", batch_rows=batch_rows)
    )
    assert_same_result(demo_in_memory, streamed)
    # the subtask table: the same rows, in input order instead of sorted
    keys = ["model", "precision", "revision", "chat_template", "benchmark", "subtask"]
    ours = streamed.subtasks.sort_values(keys, ignore_index=True)
    theirs = demo_in_memory.subtasks.sort_values(keys, ignore_index=True)
    pd.testing.assert_frame_equal(ours, theirs)


def test_sums_do_not_depend_on_order_or_batches(demo: pa.Table) -> None:
    """Fixed-point sums: shuffled rows in other batch sizes give identical bits."""
    order = np.random.default_rng(7).permutation(demo.num_rows)
    shuffled = demo.take(pa.array(order))
    first = streamed(
        [Batch(table=demo, source="a")],
    )
    second = streamed([Batch(table=shuffled, source="b")], batch_rows=4_099)
    assert_same_result(first, second, exact=True)


def test_published_table_reproduced(published_csv: Path) -> None:
    published = pd.read_csv(published_csv)
    published = published.assign(**{"Model sha": published["Model sha"].fillna("")})
    streamed = lbnorm.run(
        [demo_path()], options=RunOptions(engine="stream", batch_rows=20_000)
    )
    board = streamed.leaderboard.merge(
        published,
        left_on=["model", "precision", "revision", "chat_template"],
        right_on=["fullname", "Precision", "Model sha", "Chat Template"],
        validate="one_to_one",
    )
    assert len(board) == len(published) == 4576
    np.testing.assert_allclose(board["average"], board["Average ⬆️"], atol=1e-9)
    published_rank = board["Average ⬆️"].round(9).rank(ascending=False, method="min")
    assert (board["rank"] == published_rank).all()


@pytest.mark.slow
@settings(deadline=None)
@given(
    table=score_tables(SUITE),
    batch_rows=st.integers(1, 50),
    missing=missing_policies,
)
def test_any_batching_equals_in_memory(
    table: pa.Table, batch_rows: int, missing: MissingPolicy
) -> None:
    batch = Batch(table=table, source="t")
    expected = in_memory([batch], missing=missing)
    actual = streamed([batch], missing=missing, batch_rows=batch_rows)
    assert_same_result(expected, actual)


def test_duplicate_across_batches_is_reported(demo: pa.Table) -> None:
    doubled = pa.concat_tables([demo.slice(0, 10), demo.slice(5, 1)])
    with pytest.raises(ValidationError, match="duplicate_score") as raised:
        streamed([Batch(table=doubled, source="scores.parquet")], batch_rows=3)
    failures = raised.value.failures
    assert failures["row"].tolist() == ["11"]
    assert failures["source"].tolist() == ["scores.parquet"]


def test_every_bad_batch_is_reported(demo: pa.Table) -> None:
    scores = demo.column("raw_score").to_numpy().copy()
    scores[[3, 150_000]] = [np.nan, 1.5]
    bad = demo.set_column(
        demo.schema.get_field_index("raw_score"), "raw_score", pa.array(scores)
    )
    with pytest.raises(ValidationError, match="raw_score") as raised:
        streamed([Batch(table=bad, source="s.parquet")], batch_rows=10_000)
    failures = raised.value.failures
    # 1.5 among fractions: out of range, not a percentage
    assert sorted(failures["check"]) == ["non_finite_score", "out_of_range"]
    assert sorted(failures["row"]) == ["150001", "4"]


def test_unknown_subtasks_ignored_and_counted(demo: pa.Table) -> None:
    extra = pa.table(
        {
            "model": ["m"],
            "benchmark": ["BBH"],
            "subtask": ["not_a_subtask"],
            "raw_score": [0.5],
        }
    )
    result = streamed(
        [Batch(table=extra, source="x"), Batch(table=demo.slice(0, 40), source="y")],
        unknown="ignore",
    )
    assert result.n_ignored_rows == 1


def test_cli_stream_engine_without_subtasks_writes_two_tables(
    tmp_path: Path, demo_in_memory: lbnorm.Result
) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    demo = pq.read_table(demo_path())
    for index, start in enumerate(range(0, demo.num_rows, 40_000)):
        pq.write_table(
            demo.slice(start, 40_000),
            parts / f"part-{index}.parquet",
            row_group_size=9_000,
        )
    out = tmp_path / "out"
    assert main(["run", str(parts), "--no-subtasks", "--out", str(out), "--quiet"]) == 0
    assert sorted(path.name for path in out.iterdir()) == [
        "benchmarks.parquet",
        "leaderboard.parquet",
        "manifest.json",
    ]
    board = pd.read_parquet(out / "leaderboard.parquet")
    expected = demo_in_memory.leaderboard
    np.testing.assert_allclose(
        board["average"].to_numpy(dtype=float),
        expected["average"].to_numpy(dtype=float),
        atol=1e-12,
    )
    assert board["model"].astype(str).tolist() == expected["model"].tolist()


def test_two_workers_give_identical_bits(tmp_path: Path, demo: pa.Table) -> None:
    """Shares summed in forked workers add up to the one-process sums exactly."""
    path = tmp_path / "scores.parquet"
    pq.write_table(demo, path, row_group_size=25_000)
    one = lbnorm.run(
        [path], options=RunOptions(engine="stream", subtasks=False, workers=1)
    )
    two = lbnorm.run(
        [path], options=RunOptions(engine="stream", subtasks=False, workers=2)
    )
    assert_same_result(one, two, exact=True)


def test_workers_fall_back_to_one_process_to_locate_failures(
    tmp_path: Path, demo: pa.Table
) -> None:
    """A duplicate split across two workers' shares is reported with its row."""
    path = tmp_path / "scores.parquet"
    doubled = pa.concat_tables([demo.slice(0, 30_000), demo.slice(0, 1)])
    pq.write_table(doubled, path, row_group_size=10_000)
    with pytest.raises(ValidationError, match="duplicate_score") as raised:
        lbnorm.run(
            [path], options=RunOptions(engine="stream", subtasks=False, workers=2)
        )
    assert raised.value.failures["row"].tolist() == ["30001"]


def test_worker_input_error_is_raised_in_the_parent(
    tmp_path: Path, demo: pa.Table
) -> None:
    path = tmp_path / "scores.parquet"
    pq.write_table(demo.slice(0, 40_000), path, row_group_size=10_000)
    data = bytearray(path.read_bytes())
    data[200:60_000] = bytes(59_800)  # corrupt the first row groups' pages
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="row group"):
        lbnorm.run(
            [path], options=RunOptions(engine="stream", subtasks=False, workers=2)
        )


def test_subtask_table_streams_out_a_part_per_batch(
    tmp_path: Path, demo: pa.Table
) -> None:
    """The default run writes each input row group as a row group of the subtask table."""
    path = tmp_path / "scores.parquet"
    pq.write_table(demo, path, row_group_size=40_000)
    out = tmp_path / "out"
    result = lbnorm.run([path], out=out)
    written = pq.ParquetFile(out / "subtasks.parquet")
    assert written.num_row_groups == pq.ParquetFile(path).num_row_groups == 5
    assert written.metadata.num_rows == demo.num_rows
    table = written.read()
    assert table.column("source").unique().to_pylist() == [str(path)]
    assert result.subtask_table is not None
    assert result.subtask_table.equals(table.replace_schema_metadata(None))


def test_workers_need_no_subtask_table() -> None:
    with pytest.raises(
        OptionsError, match=r"without the subtask table.*\n.*Hint: add --no-subtasks"
    ):
        lbnorm.run(options=RunOptions(workers=2))


def test_finishing_frees_the_sums_the_job_still_references(
    demo: pa.Table, demo_in_memory: lbnorm.Result
) -> None:
    """The sums and the seen matrix go once the partials are taken (peak memory).

    The job's folder and the caller both still reference the store, so dropping a
    name frees nothing: the store must let go of its buffers itself. The result is
    unchanged.
    """
    totals = stream.sum_scores([Batch(table=demo, source="demo")], SUITE, RunOptions())
    store = totals.store
    assert sum(part.size for part in store._sums) > 0
    assert store.seen.size > 0
    result = stream.finish_totals(totals, SUITE, options=RunOptions(subtasks=False))
    assert all(part.size == 0 for part in store._sums)  # buffers freed, not views
    assert all(part.base is None for part in store._sums)
    assert store.seen.size == 0
    assert store.seen.base is None
    assert result.benchmark_table.equals(demo_in_memory.benchmark_table)


def test_the_summing_thread_raises_its_error_at_the_next_batch() -> None:
    before = set(threading.enumerate())
    behind = batch_thread.BatchThread()
    done: list[int] = []

    def fail() -> None:
        raise OSError(28, "No space left on device")

    behind.run(fail, batch_thread.THREAD_ROWS)
    with pytest.raises(OSError, match="No space"):
        behind.run(lambda: done.append(1), batch_thread.THREAD_ROWS)
    assert done == []  # nothing more summed after the error
    behind.run(lambda: done.append(2), batch_thread.THREAD_ROWS)
    behind.close()
    assert done == [2]
    behind.run(fail, batch_thread.THREAD_ROWS)
    behind.abandon()  # a run that failed already: its own error is the one shown
    started = set(threading.enumerate()) - before
    assert not [t for t in started if t.name.startswith("lbnorm-batch")]  # stopped


def test_a_ctrl_c_as_the_summing_thread_starts_is_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``submit`` starts its thread before its pool records it; held as every
    entry point holds it, a Ctrl-C between the two only sets the flag: the batch
    is handed over, closing waits for it, and the call ends interrupted."""
    start = threading.Thread.start

    def start_then_ctrl_c(thread: threading.Thread) -> None:
        start(thread)
        if thread.name.startswith("lbnorm-batch"):
            signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, right here

    monkeypatch.setattr(threading.Thread, "start", start_then_ctrl_c)
    behind = batch_thread.BatchThread()
    done: list[int] = []

    def slow() -> None:
        time.sleep(0.2)
        done.append(1)

    with pytest.raises(KeyboardInterrupt, match="SIGINT"), batch_thread.cancellable():
        behind.run(slow, batch_thread.THREAD_ROWS)
    behind.abandon()  # as a run being interrupted does
    assert done == [1]  # the batch handed over was waited for


def test_small_batches_are_summed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch_thread, "THREAD_ROWS", 1 << 16)
    behind = batch_thread.BatchThread()
    seen: list[str] = []
    behind.run(lambda: seen.append(threading.current_thread().name), 10)
    assert seen == [threading.current_thread().name]  # summed before run returned
    behind.run(lambda: seen.append(threading.current_thread().name), 1 << 16)
    behind.close()
    assert seen[1].startswith("lbnorm-batch")
