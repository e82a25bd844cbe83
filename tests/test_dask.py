"""The Dask engine on a local cluster of worker processes, against the local engines."""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dense_oracle import dense_result
from strategies import OPENLLM_V2

import lbnorm
from lbnorm.cli import main
from lbnorm.core.errors import Cancelled, InputError, ValidationError
from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.pipeline import demo_path

pytestmark = pytest.mark.slow  # a local Dask cluster of worker processes

distributed = pytest.importorskip("distributed")
pytest.importorskip("lbnorm.engines.dask")


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """Two worker processes, one thread each; yields the scheduler address."""
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        scheduler_kwargs={"dashboard_address": ":0"},  # not 8787: see engines.dask
    ) as local:
        yield str(local.scheduler_address)


def write_partitioned(table: pa.Table, root: Path, parts: int = 4) -> Path:
    """A hive-style partitioned dataset: ``root/part=i/data.parquet``."""
    size = -(-table.num_rows // parts)
    for index in range(parts):
        folder = root / f"part={index}"
        folder.mkdir(parents=True)
        pq.write_table(
            table.slice(index * size, size),
            folder / "data.parquet",
            row_group_size=20_000,
        )
    return root


@pytest.fixture(scope="module")
def demo_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_partitioned(
        pq.read_table(demo_path()), tmp_path_factory.mktemp("dataset") / "scores"
    )


def test_equals_local_engines(cluster: str, demo_dataset: Path) -> None:
    on_cluster = lbnorm.run(
        [demo_dataset], options=RunOptions(engine="dask", scheduler=cluster)
    )
    oracle = dense_result(pq.read_table(demo_path()), OPENLLM_V2)
    streamed = lbnorm.run([demo_dataset], options=RunOptions(engine="stream"))
    for name in ("benchmarks", "leaderboard"):
        pd.testing.assert_frame_equal(
            getattr(oracle, name), getattr(on_cluster, name), rtol=0.0, atol=1e-12
        )
        pd.testing.assert_frame_equal(
            getattr(streamed, name), getattr(on_cluster, name), check_exact=True
        )
    assert on_cluster.subtask_table is None
    assert on_cluster.n_scores == oracle.n_scores == 183_040


def test_cli_writes_what_the_local_engine_writes(
    cluster: str, demo_dataset: Path, tmp_path: Path
) -> None:
    dask_out, local_out = tmp_path / "dask", tmp_path / "local"
    assert (
        main(
            [
                "run",
                str(demo_dataset),
                "--engine",
                "dask",
                "--scheduler",
                cluster,
                "--out",
                str(dask_out),
                "--quiet",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "run",
                str(demo_dataset),
                "--engine",
                "stream",
                "--out",
                str(local_out),
                "--quiet",
            ]
        )
        == 0
    )
    for name in ("benchmarks.parquet", "leaderboard.parquet"):
        assert pq.read_table(dask_out / name).equals(pq.read_table(local_out / name))


@pytest.mark.parametrize("missing", ["exclude", "partial", "zero"])
def test_missing_policies_with_holes(
    cluster: str, tmp_path: Path, missing: MissingPolicy
) -> None:
    demo = pq.read_table(demo_path()).slice(0, 30_000)
    holes = demo.filter(pa.array([index % 7 != 3 for index in range(demo.num_rows)]))
    root = write_partitioned(holes, tmp_path / "holes", parts=3)
    on_cluster = lbnorm.run(
        [root], options=RunOptions(engine="dask", scheduler=cluster, missing=missing)
    )
    oracle = dense_result(holes, OPENLLM_V2, RunOptions(missing=missing))
    pd.testing.assert_frame_equal(
        oracle.leaderboard, on_cluster.leaderboard, rtol=0.0, atol=1e-12
    )


def test_duplicate_across_partitions_is_reported(cluster: str, tmp_path: Path) -> None:
    demo = pq.read_table(demo_path()).slice(0, 10_000)
    root = tmp_path / "dup"
    for index in range(2):  # the same first row in both partitions
        (root / f"part={index}").mkdir(parents=True)
        pq.write_table(
            demo.slice(index * 5_000, 5_000) if index else demo.slice(0, 5_000),
            root / f"part={index}" / "data.parquet",
        )
    pq.write_table(demo.slice(0, 1), root / "part=1" / "extra.parquet")
    with pytest.raises(ValidationError, match="duplicate_score") as raised:
        lbnorm.run([root], options=RunOptions(engine="dask", scheduler=cluster))
    failures = raised.value.failures
    assert failures["check"].tolist() == ["duplicate_score"]
    assert failures["value"].str.contains(str(demo.column("model")[0])).all()


def test_bad_score_names_the_file_and_row(cluster: str, tmp_path: Path) -> None:
    demo = pq.read_table(demo_path()).slice(0, 5_000)
    scores = demo.column("raw_score").to_pylist()
    scores[1234] = 1.5
    bad = demo.set_column(
        demo.schema.get_field_index("raw_score"), "raw_score", pa.array(scores)
    )
    root = write_partitioned(bad, tmp_path / "bad", parts=2)
    # 1.5 among fractions: out of range (not a percentage to divide by 100)
    with pytest.raises(
        ValidationError, match=r"out_of_range: .*\n  Hint: raw_score must be a fraction"
    ) as raised:
        lbnorm.run([root], options=RunOptions(engine="dask", scheduler=cluster))
    failures = raised.value.failures
    assert failures["source"].str.endswith("part=0/data.parquet").all()
    assert failures["row"].tolist() == ["1235"]


def test_non_parquet_input_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "scores.csv"
    table.write_text(
        "model,benchmark,subtask,raw_score\nm,GPQA,main,0.5\n", encoding="utf-8"
    )
    with pytest.raises(InputError, match=r"Parquet only.*\n.*Hint"):
        lbnorm.run(
            [table], options=RunOptions(engine="dask", scheduler="tcp://127.0.0.1:1")
        )


def test_a_converted_tree_on_the_cluster_equals_the_tree_run_locally(
    cluster: str, tmp_path: Path
) -> None:
    tree = Path(__file__).parent / "fixtures" / "full_structure"
    scores = tmp_path / "scores.parquet"
    assert main(["convert", str(tree), "--out", str(scores), "--quiet"]) == 0
    on_cluster = lbnorm.run(
        [scores], options=RunOptions(engine="dask", scheduler=cluster)
    )
    local = lbnorm.run([tree])
    pd.testing.assert_frame_equal(on_cluster.leaderboard, local.leaderboard)


def test_an_unreachable_scheduler_fails_after_the_timeout_given(tmp_path: Path) -> None:
    scores = tmp_path / "scores.parquet"
    pq.write_table(pq.read_table(demo_path()).slice(0, 40), scores)
    options = RunOptions(
        engine="dask", scheduler="tcp://127.0.0.1:1", scheduler_timeout=0.5
    )
    with pytest.raises(
        InputError,
        match=r"cannot reach the Dask scheduler tcp://127\.0\.0\.1:1: .*\n"
        r"Hint: .*--scheduler-timeout SECONDS",
    ):
        lbnorm.run([scores], options=options)


def test_relative_inputs_are_read_by_workers_in_another_directory(
    cluster: str, demo_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cluster's workers run elsewhere: a path relative to the client's directory
    is resolved before it is sent, and messages still name it as given."""
    elsewhere = tmp_path / "worker-home"
    elsewhere.mkdir()
    with distributed.Client(cluster) as client:
        before = client.run(Path.cwd)
        client.run(lambda: __import__("os").chdir(elsewhere))
        try:
            monkeypatch.chdir(demo_dataset.parent)
            on_cluster = lbnorm.run(
                [Path(demo_dataset.name)],
                options=RunOptions(engine="dask", scheduler=cluster),
            )
            bad = pq.read_table(demo_path()).slice(0, 2_000)
            scores = bad.column("raw_score").to_numpy().copy()
            scores[7] = 1.5
            bad = bad.set_column(
                bad.schema.get_field_index("raw_score"), "raw_score", pa.array(scores)
            )
            write_partitioned(bad, Path("bad"), parts=1)
            with pytest.raises(
                ValidationError, match=r"bad/part=0/data\.parquet"
            ) as raised:
                lbnorm.run(
                    [Path("bad")], options=RunOptions(engine="dask", scheduler=cluster)
                )
            assert str(Path.cwd()) not in str(raised.value)
        finally:
            for worker, folder in before.items():
                client.run(__import__("os").chdir, folder, workers=[worker])
    assert on_cluster.n_scores == 183_040


def test_a_ctrl_c_ends_the_wait_for_the_cluster(
    cluster: str, demo_dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client waits a tick at a time, looking at the flag: a Ctrl-C ends the wait."""
    import distributed

    def never_done(*args: object, **kwargs: object) -> None:
        signal.raise_signal(signal.SIGINT)  # a Ctrl-C while the cluster computes
        raise TimeoutError  # the tick passed, the total not in yet

    monkeypatch.setattr(distributed, "wait", never_done)
    options = RunOptions(engine="dask", scheduler=cluster)
    with pytest.raises(Cancelled, match="SIGINT"):
        lbnorm.run(
            [demo_dataset], options=options
        )  # (an entry point: holds the signals)


def test_a_local_cluster_leaves_nothing_in_tmpdir(tmp_path: Path) -> None:
    """Dask kept $TMPDIR/dask-scratch-space/ after every run; the run's own folder is removed.

    A command of its own (this module's cluster holds Dask's default ports).
    """
    import os
    import subprocess
    import sys

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "lbnorm", "run", "--engine", "dask", "--out", str(out)],
        env={**os.environ, "TMPDIR": str(scratch)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert pq.read_table(out / "leaderboard.parquet").num_rows == 4576
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize("missing", ["exclude", "partial"])
def test_sums_over_the_budget_are_finished_on_the_workers(
    cluster: str, tmp_path: Path, missing: str
) -> None:
    """Past --sum-memory (where the stream engine spills), each partition of the
    variants is finished and saved on a worker and the client writes the tables
    from the saved arrays: the files are the spilled stream engine's, byte for
    byte, and the spill folder is gone after."""
    demo = pq.read_table(demo_path()).slice(0, 60_000)
    holes = demo.filter(pa.array([index % 11 != 5 for index in range(demo.num_rows)]))
    root = write_partitioned(holes, tmp_path / "scores", parts=3)
    spills = tmp_path / "spills"
    spills.mkdir()
    _same_files_over_the_budget(root, cluster, tmp_path, "--missing", missing)
    options = RunOptions(
        engine="dask",
        scheduler=cluster,
        missing=missing,  # type: ignore[arg-type]
        sum_memory=0.0005,
        spill_dir=str(spills),
    )
    on_cluster = lbnorm.run([root], options=options)
    streamed = lbnorm.run(
        [root],
        options=replace(options, engine="stream", scheduler=None, subtasks=False),
    )
    for name in ("benchmarks", "leaderboard"):
        pd.testing.assert_frame_equal(
            getattr(on_cluster, name), getattr(streamed, name), check_exact=True
        )
    del streamed, on_cluster
    gc.collect()  # (the results' cycles: their spill folders go with them)
    assert list(spills.iterdir()) == []


def test_revisions_shared_by_models_over_the_budget(
    cluster: str, tmp_path: Path
) -> None:
    """Past --sum-memory the client joins the partitions' vocabularies as they
    are: a revision string of models in several partitions ("r1") keeps an id
    in each, and the files are still the stream engine's, byte for byte."""
    scores = pq.read_table(demo_path()).slice(0, 40_000).to_pandas()
    variant = ["model", "precision", "chat_template"]
    number = scores.groupby(variant)["revision"].rank(method="dense").astype(int)
    scores["revision"] = "r" + number.astype(str)
    # a second revision of some models: variants whose order the revision decides
    again = scores["model"].isin(scores["model"].unique()[::7])
    scores = pd.concat([scores, scores[again].assign(revision="r0")])
    table = pa.Table.from_pandas(scores, preserve_index=False)
    root = write_partitioned(table, tmp_path / "scores", parts=3)
    _same_files_over_the_budget(root, cluster, tmp_path)
    board = pq.read_table(tmp_path / "dask" / "leaderboard.parquet")
    assert sorted(board.column("revision").unique().to_pylist()) == ["r0", "r1"]


def _same_files_over_the_budget(
    root: Path, cluster: str, tmp_path: Path, *options: str
) -> None:
    """``lbnorm run ROOT`` past --sum-memory on the cluster (into tmp_path/dask) writes
    the spilled stream engine's files (tmp_path/stream), byte for byte."""
    for engine in ("dask", "stream"):
        command = ["run", str(root), "--engine", engine, *options]
        command += [
            "--sum-memory",
            "0.0005",
            "--out",
            str(tmp_path / engine),
            "--quiet",
        ]
        command += ["--scheduler", cluster] if engine == "dask" else ["--no-subtasks"]
        assert main(command) == 0
    for name in ("benchmarks.parquet", "leaderboard.parquet"):
        dask = (tmp_path / "dask" / name).read_bytes()
        assert dask == (tmp_path / "stream" / name).read_bytes(), name


def test_a_duplicate_over_the_budget_is_reported(cluster: str, tmp_path: Path) -> None:
    """Two files holding one score: found where its model's partition is added up."""
    demo = pq.read_table(demo_path()).slice(0, 20_000)
    root = write_partitioned(demo, tmp_path / "dup", parts=2)
    pq.write_table(demo.slice(7, 1), root / "part=1" / "extra.parquet")
    spills = tmp_path / "spills"
    spills.mkdir()
    options = RunOptions(
        engine="dask", scheduler=cluster, sum_memory=0.0002, spill_dir=str(spills)
    )
    with pytest.raises(ValidationError, match="duplicate_score") as raised:
        lbnorm.run([root], options=options)
    failures = raised.value.failures
    assert failures["value"].str.contains(str(demo.column("model")[7])).all()
    assert list(spills.iterdir()) == []


def test_a_models_partition_hash_is_the_same_in_every_process() -> None:
    """Workers split sums by a hash of the model name: it must not be salted per
    process (Python's own is), and a slice of an array hashes as its values do."""
    from lbnorm.engines.vocabulary import hash_strings

    names = ["Qwen/Qwen2.5-72B", "", "modèle-é", "x" * 300, "a", "b"]
    here = hash_strings(pa.array(names, pa.large_string())).tolist()
    sliced = pa.array(["pad", *names], pa.large_string()).slice(1)
    assert hash_strings(sliced).tolist() == here
    script = (
        "import sys, pyarrow as pa; from lbnorm.engines.vocabulary import hash_strings; "
        f"print(hash_strings(pa.array({names!r}, pa.large_string())).tolist())"
    )
    for seed in ("1", "2"):
        other = subprocess.run(
            [sys.executable, "-c", script],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        assert other.stdout.strip() == str(here)
    assert len(set(here)) == len(names)


def test_a_worker_that_cannot_save_its_partition_says_where_and_what_to_do(
    tmp_path: Path,
) -> None:
    """A worker of a remote cluster sees another filesystem than the client's TMPDIR."""
    from lbnorm.core.errors import SpillError
    from lbnorm.core.schemas import Batch
    from lbnorm.engines.dask import _finish_share
    from lbnorm.engines.stream import sum_scores
    from lbnorm.suites import load_suite

    suite = load_suite("openllm-v2")
    table = pq.read_table(demo_path()).slice(0, 400)
    totals = sum_scores([Batch(table=table, source="t")], suite, RunOptions())
    missing = tmp_path / "lbnorm-spill-elsewhere"
    with pytest.raises(
        SpillError,
        match=r"lbnorm-spill-elsewhere: a Dask worker .*\n.*shared filesystem",
    ):
        _finish_share(totals, 0, str(missing), suite, RunOptions(engine="dask"))


def test_a_local_cluster_beside_another_one_gives_no_port_warning(
    demo_dataset: Path,
) -> None:
    """Two runs (or test suites) on one machine: the scheduler's HTTP server takes any free port.

    The port the scheduler's metrics server would take by default is held here,
    as another cluster on the machine holds it; warnings are errors in the test
    suite, so the run must not warn that the port is in use.
    """
    held = socket.socket()
    try:
        held.bind(("", 8787))
        held.listen()
    except OSError:  # (something else holds it: the case itself)
        pass
    try:
        on_cluster = lbnorm.run([demo_dataset], options=RunOptions(engine="dask"))
    finally:
        held.close()
    assert on_cluster.n_scores == 183_040
