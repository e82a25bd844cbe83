"""A run whose sums pass ``--sum-memory`` spills its rows and sums a partition at a time.

The engine contract (``tests/test_engines.py``, engine ``stream-spilled``) checks
the tables bit for bit on every input there; here: the command line (outputs,
summary and manifest identical but for the option), the counts and examples a
summary takes from the tables without reading them whole, the temporary folder
(inside ``TMPDIR``, gone after a run, a failed run, an interruption and a
SIGTERM), the partition width, and a bad ``--sum-memory``.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import _runtime
from lbnorm.core.errors import ValidationError
from lbnorm.core.options import RunOptions
from lbnorm.core.schemas import Batch
from lbnorm.engines import spill, stream
from lbnorm.engines.result import BoardCounts, Result, TableParts, finish_job
from lbnorm.engines.variants import Variants
from lbnorm.pipeline import demo_path, run
from lbnorm.readers import Inputs, read_inputs
from lbnorm.suites import load_suite, suite_arrays

SUITE = load_suite("openllm-v2")
#: A budget of about a byte: every run spills, a few variants per partition.
TINY = 1e-9


@pytest.fixture
def tmpdir_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """TMPDIR pointed at an empty folder of this test (where spills go)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    return folder


def _limited_demo(tmp_path: Path) -> Path:
    """The demo with sample sizes of a --limit run for some GPQA rows, as Parquet."""
    table = pq.read_table(demo_path())
    n_samples = np.where(
        (np.arange(table.num_rows) % 7 == 0)
        & (table["benchmark"].to_numpy(zero_copy_only=False) == "GPQA"),
        50.0,
        np.nan,
    )
    table = table.set_column(
        table.schema.get_field_index("n_samples"),
        "n_samples",
        pa.array(n_samples, mask=np.isnan(n_samples)),
    )
    path = tmp_path / "limited.parquet"
    pq.write_table(table, path, row_group_size=20_000)
    return path


def _plain(path: Path) -> pa.Table:
    """A written table with text columns as plain strings (row groups differ)."""
    table = pq.read_table(path)
    for index, field in enumerate(table.schema):
        if pa.types.is_dictionary(field.type):
            table = table.set_column(
                index, field.name, table.column(index).cast(pa.string())
            )
    return table.replace_schema_metadata(None).combine_chunks()


def _lbnorm(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lbnorm", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000", **(env or {})},
        check=False,
    )


def _summary(text: str) -> list[str]:
    """A run's summary without its time, the output named alike."""
    return [
        line.replace("spilled", "plain")
        for line in text.splitlines()
        if not line.startswith("time")
    ]


@pytest.mark.slow
def test_the_command_line_writes_the_same_tables_summary_and_manifest(
    tmp_path: Path, tmpdir_env: Path
) -> None:
    source = _limited_demo(tmp_path)
    common = [str(source), "--engine", "stream", "--missing", "partial"]
    plain = _lbnorm("run", *common, "--out", str(tmp_path / "plain"))
    spilled = _lbnorm(
        "run", *common, "--out", str(tmp_path / "spilled"), "--sum-memory", "1e-6"
    )
    assert plain.returncode == spilled.returncode == 0, spilled.stderr
    assert _summary(spilled.stdout) == _summary(plain.stdout)
    assert "sizes " in plain.stdout  # variants pooled with other sizes are named
    for name in ("subtasks", "benchmarks", "leaderboard"):
        a = _plain(tmp_path / "plain" / f"{name}.parquet")
        b = _plain(tmp_path / "spilled" / f"{name}.parquet")
        assert a.equals(b), name
    manifests = [
        json.loads((tmp_path / out / "manifest.json").read_text())
        for out in ("plain", "spilled")
    ]
    assert manifests[1]["options"]["sum_memory"] == 1e-6
    assert manifests[0]["options"]["sum_memory"] == 0.5
    for manifest in manifests:
        del (
            manifest["options"]["sum_memory"],
            manifest["outputs"],
            manifest["created_at"],
        )
    assert manifests[0] == manifests[1]
    leaderboard = pq.ParquetFile(tmp_path / "spilled" / "leaderboard.parquet")
    assert leaderboard.metadata.num_rows == 4576
    assert list(tmp_path.joinpath("tmp").iterdir()) == []  # the spill is gone
    # a spilled part holds each variant once: its names are written plain
    benchmarks = pq.ParquetFile(tmp_path / "spilled" / "benchmarks.parquet")
    first = benchmarks.metadata.row_group(0)
    encodings = {
        first.column(i).path_in_schema: first.column(i).encodings
        for i in range(first.num_columns)
    }
    assert "RLE_DICTIONARY" not in encodings["model"] + encodings["revision"]
    assert "RLE_DICTIONARY" in encodings["benchmark"]
    assert pa.types.is_dictionary(benchmarks.schema_arrow.field("model").type)


@pytest.mark.slow
def test_the_counts_and_examples_come_without_the_whole_tables(
    tmp_path: Path, tmpdir_env: Path
) -> None:
    source = _limited_demo(tmp_path)
    results = {
        name: run([source], options=RunOptions(engine="stream", sum_memory=memory))
        for name, memory in [("plain", 0.5), ("spilled", TINY)]
    }
    plain, spilled = results["plain"], results["spilled"]
    benchmarks, board = _spilled_parts(spilled), spilled.leaderboard_output
    assert benchmarks.num_rows == plain.benchmark_table.num_rows
    assert isinstance(board, TableParts)
    assert board.num_rows == plain.leaderboard_table.num_rows
    # counted while summing, not by building the table
    assert board.counts is not None
    assert benchmarks.resized is not None
    assert spilled.board_counts() == plain.board_counts()
    assert spilled.board_counts() == BoardCounts.of(spilled.leaderboard_table)
    assert spilled.resized_variants() == plain.resized_variants()
    assert spilled.resized_variants()[0] > 0
    assert spilled.board_head(5).equals(plain.leaderboard_table.slice(0, 5))
    assert spilled.benchmarks.equals(plain.benchmarks)  # pandas, for the Python API
    assert spilled.leaderboard.equals(plain.leaderboard)
    del results, spilled, benchmarks, board
    gc.collect()
    assert list(tmpdir_env.iterdir()) == []  # dropped with the result


@pytest.mark.slow
def test_more_variants_than_the_row_count_said(tmpdir_env: Path) -> None:
    """One subtask per variant: 40x the variants the estimate expects, still right."""
    n = 3_000
    table = pa.table(
        {
            "model": [f"org/m{i:05d}" for i in range(n)],
            "benchmark": ["MUSR"] * n,
            "subtask": ["murder_mysteries"] * n,
            "raw_score": np.linspace(0.2, 0.9, n),
        }
    )
    batches = [Batch(table=table.slice(i, 500), source="t") for i in range(0, n, 500)]
    results = [
        finish_job(
            stream.start(
                Inputs.of_batches(batches),
                SUITE,
                RunOptions(missing="partial", subtasks=False, sum_memory=memory),
            )
        )
        for memory in (0.5, TINY)
    ]
    assert spill.spill_width(suite_arrays(SUITE), n, RunOptions(sum_memory=TINY)) == 1
    assert results[1].benchmark_table.equals(results[0].benchmark_table)
    assert results[1].leaderboard_table.equals(results[0].leaderboard_table)


def test_a_failed_spilled_run_says_the_same_and_leaves_nothing(
    tmp_path: Path, tmpdir_env: Path
) -> None:
    table = pq.read_table(demo_path())
    doubled = pa.concat_tables([table, table.slice(100, 1)])
    path = tmp_path / "doubled.parquet"
    pq.write_table(doubled, path, row_group_size=50_000)
    messages = []
    for memory in (0.5, TINY):
        options = RunOptions(engine="stream", sum_memory=memory).resolved()
        inputs = read_inputs([path], suite=SUITE, options=options)
        with pytest.raises(ValidationError) as error:
            finish_job(stream.start(inputs, SUITE, options))
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert "duplicate" in messages[0]
    gc.collect()
    assert list(tmpdir_env.iterdir()) == []


def test_an_interrupted_spilled_run_leaves_nothing(tmpdir_env: Path) -> None:
    table = pq.read_table(demo_path())

    def batches() -> Iterator[Batch]:
        yield Batch(table=table.slice(0, 60_000), source="t")
        raise KeyboardInterrupt

    inputs = Inputs(batches=batches(), num_rows=table.num_rows)
    job = stream.start(inputs, SUITE, RunOptions(subtasks=False, sum_memory=TINY))
    with pytest.raises(KeyboardInterrupt):
        job.finish()
    assert list(tmpdir_env.iterdir()) == []  # removed as the interrupt left the pass
    del job
    gc.collect()
    assert list(tmpdir_env.iterdir()) == []


@pytest.mark.parametrize(
    ("action", "code"),
    [
        ("term", 143),
        # (quick sibling: test_an_interrupted_spilled_run_leaves_nothing, in-process)
        pytest.param("int", 130, marks=pytest.mark.slow),
    ],
)
def test_a_signal_while_partitions_are_summed_leaves_nothing(
    tmp_path: Path, action: str, code: int
) -> None:
    spill_dir = tmp_path / "tmp"
    spill_dir.mkdir()
    out = tmp_path / "out"
    done = _lbnorm(
        "run",
        "--out",
        str(out),
        "--engine",
        "stream",
        "--sum-memory",
        "1e-6",
        "--quiet",
        env={"TMPDIR": str(spill_dir), "LBNORM_FAULT_POINT": f"spilled@2:{action}"},
    )
    assert done.returncode == code, done.stderr
    assert done.stderr.startswith("lbnorm: ")
    assert "Traceback" not in done.stderr
    assert list(spill_dir.iterdir()) == []
    assert not out.exists()


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_a_bad_sum_memory_is_a_clear_error(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from lbnorm.cli import main

    assert main(["run", "--out", str(tmp_path / "out"), "--sum-memory", value]) == 2
    message = capsys.readouterr().err
    assert "sum_memory (--sum-memory) must be a positive number of GiB" in message
    assert "Hint:" in message
    assert not (tmp_path / "out").exists()


def test_freed_memory_goes_back_to_the_system_between_phases() -> None:
    """glibc's malloc_trim is found here (Linux); elsewhere the call does nothing."""
    from lbnorm import _runtime as heap

    if platform.libc_ver()[0] == "glibc":
        assert heap._malloc_trim() is not None
    blocks = [np.ones(100_000) for _ in range(200)]  # 160 MB in heap-sized blocks
    del blocks[::2]
    heap.release_free_memory()
    heap.release_free_memory()
    assert len(blocks) == 100


@pytest.mark.slow
def test_a_command_line_run_keeps_freed_memory_unless_it_spills(
    tmp_path: Path, tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """glibc keeps freed blocks for the command's own run; a library call
    (``main`` from Python included) or a spill does not."""
    from lbnorm import _runtime as heap
    from lbnorm.cli import main

    calls: list[dict[int, int]] = []

    def mallopt(values: dict[int, int]) -> bool:
        calls.append(values)
        return True

    monkeypatch.setattr(heap, "_mallopt", mallopt)
    monkeypatch.setattr(heap, "_is_allowed", False)  # (put back after the test)
    monkeypatch.setattr(heap, "_is_kept", False)
    run(out=tmp_path / "library")  # the host's allocator is left alone
    out = str(tmp_path / "cli")
    assert main(["run", "--engine", "memory", "--out", out, "--quiet"]) == 0
    assert calls == []  # main called from Python too
    heap.allow_keeping_freed_memory()  # as the console command does (console_main)
    spilled = ["run", "--engine", "stream", "--sum-memory", "1e-6", "--quiet"]
    assert main([*spilled, "--out", out]) == 0
    assert calls == []  # a spilled run keeps its bound
    for engine in ("memory", "stream"):
        monkeypatch.setattr(heap, "_is_kept", False)
        assert main(["run", "--engine", engine, "--out", out, "--quiet"]) == 0
        assert calls == [heap._KEPT]
        calls.clear()
    if (
        platform.libc_ver()[0] == "glibc"
    ):  # glibc takes every value (in a process of its own)
        code = (
            "from lbnorm import _runtime as heap\n"
            "heap.allow_keeping_freed_memory()\n"
            "heap.keep_freed_memory()\n"
            "assert heap._is_kept\n"
        )
        done = subprocess.run([sys.executable, "-c", code], check=False)
        assert done.returncode == 0


def test_the_key_registry_takes_no_lookups_once_its_index_is_dropped() -> None:
    from lbnorm.engines.encode import KeyEncoder

    encoder = KeyEncoder([("MUSR", "murder_mysteries")])
    table = pa.table(
        {
            "model": ["a", "b"],
            "benchmark": ["MUSR"] * 2,
            "subtask": ["murder_mysteries"] * 2,
        }
    )
    encoder.encode(table)
    variants = encoder.variants(last=True)
    assert variants.strings("model").to_pylist() == ["a", "b"]
    with pytest.raises(AssertionError, match="index was dropped"):
        encoder.encode(table)


def test_a_full_disk_while_spilling_is_raised_and_leaves_nothing(
    tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sums are written on the summing thread: its error still ends the run."""
    calls = []

    def full(self: spill.SpillStore, *args: object) -> None:
        calls.append(args)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spill.SpillStore, "_append", full)
    table = pq.read_table(demo_path())
    batches = [Batch(table=table.slice(i, 20_000), source="t") for i in (0, 20_000)]
    job = stream.start(
        Inputs.of_batches(batches), SUITE, RunOptions(subtasks=False, sum_memory=TINY)
    )
    with pytest.raises(OSError, match="No space left on device"):
        job.finish()
    assert len(calls) == 1  # the first batch's error stopped the run
    del job
    gc.collect()
    assert list(tmpdir_env.iterdir()) == []


def test_nothing_is_written_to_a_removed_spill_folder(tmpdir_env: Path) -> None:
    """A removal (an interrupt) and a write under way on the summing thread."""
    store = spill.SpillStore(suite_arrays(SUITE), 16, [], width=4, where=None)
    store.folder.remove()
    assert store.folder.is_removed
    store._append(0, np.array([1, 0]), [np.zeros(1, dtype=np.int64)])
    assert list(tmpdir_env.iterdir()) == []  # no file, no folder made again


def test_a_failed_check_is_reported_over_a_spill_error_behind_it(
    tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch before a duplicate could not be spilled: the duplicate is the error."""

    def full(self: spill.SpillStore, *args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spill.SpillStore, "_append", full)
    table = pq.read_table(demo_path())
    batches = [
        Batch(table=table.slice(0, 20_000), source="t"),
        Batch(table=table.slice(100, 1), source="t", first_row=20_001),  # a repeat
    ]
    job = stream.start(
        Inputs.of_batches(batches), SUITE, RunOptions(subtasks=False, sum_memory=TINY)
    )
    with pytest.raises(ValidationError, match="duplicate"):
        job.finish()
    del job
    gc.collect()
    assert list(tmpdir_env.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("n_parts", [1, 3, 300, 70_000])
def test_gathered_groups_are_each_partitions_codes_in_order(n_parts: int) -> None:
    """Grouping codes by partition (a counting sort up to 16 bits, else a sort)."""
    rng = np.random.default_rng(n_parts)
    width = 4
    n_variants = n_parts * width - 1  # the last partition a variant short
    codes = rng.integers(0, n_variants, 3 * n_variants)
    sizes = [width] * (n_parts - 1) + [width - 1]
    spilled = spill._Spilled(None, sizes, np.arange(n_variants), SUITE)  # type: ignore[arg-type]
    groups = spilled.groups(codes)
    part = codes // width
    assert [index for index, _, _ in groups] == np.unique(part).tolist()
    for index, positions, rows in groups:
        assert positions.tolist() == np.flatnonzero(part == index).tolist()
        assert rows.tolist() == (codes[positions] % width).tolist()


def test_a_ctrl_c_as_the_saving_thread_starts_waits_for_that_thread(
    tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The partitions are saved on a thread into the spill folder: a Ctrl-C as
    that thread starts, before its pool records it, would leave it writing into
    the folder being removed (the pool's exit does not wait for a thread it has
    not recorded). The call holds the signals, as every entry point does
    (``lbnorm.run``, the command line): the Ctrl-C is acted on at the next
    boundary, the run stops with the partition saved and no saving thread
    left, and the folder is gone."""
    start, save = threading.Thread.start, spill.save_partition
    saved: list[int] = []

    def start_then_ctrl_c(thread: threading.Thread) -> None:
        start(thread)
        if thread.name.startswith("lbnorm-save"):
            signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, right here

    def slow_save(folder: Any, part: int, *args: Any) -> None:
        time.sleep(0.2)  # still saving when the Ctrl-C unwinds the caller
        save(folder, part, *args)
        saved.append(part)

    monkeypatch.setattr(threading.Thread, "start", start_then_ctrl_c)
    monkeypatch.setattr(spill, "save_partition", slow_save)
    table = pq.read_table(demo_path())
    inputs = Inputs(batches=iter([Batch(table=table, source="t")]), num_rows=table.num_rows)  # fmt: skip
    job = stream.start(inputs, SUITE, RunOptions(subtasks=False, sum_memory=TINY))
    with pytest.raises(KeyboardInterrupt, match="SIGINT"), _runtime.cancellable():
        job.finish()
    assert saved == [0]  # the first partition's save ran to its end
    assert not [t for t in threading.enumerate() if t.name.startswith("lbnorm-save")]
    del job
    gc.collect()
    assert list(tmpdir_env.iterdir()) == []


def _spilled_parts(result: Result) -> TableParts:
    """A spilled run's benchmark table: parts gathered from its saved arrays."""
    parts = result.benchmark_output
    assert isinstance(parts, TableParts)
    assert parts.unique_columns  # (keys written plain: a spilled run's parts only)
    return parts


def _sparse(n: int) -> list[Batch]:
    """`n` models with one MUSR subtask each, in batches of 500 rows."""
    table = pa.table(
        {
            "model": [f"org/m{i:05d}" for i in range(n)],
            "benchmark": ["MUSR"] * n,
            "subtask": ["murder_mysteries"] * n,
            "raw_score": np.linspace(0.2, 0.9, n),
        }
    )
    return [Batch(table=table.slice(i, 500), source="t") for i in range(0, n, 500)]


def test_a_sparse_input_spills_once_the_variants_seen_pass_the_budget(
    tmpdir_env: Path,
) -> None:
    """The row count promises n / subtasks variants; the budget holds a quarter of n."""
    n = 4_000
    arrays = suite_arrays(SUITE)
    per_variant = spill._CELL_BYTES * arrays.is_pooled.shape[0]
    budget = n // 4 * per_variant / 2**30
    options = RunOptions(missing="partial", subtasks=False, sum_memory=budget)
    assert spill.spill_width(arrays, n, options) is None  # by the row count: fits
    assert spill.spill_width(arrays, n, options, n_variants=n) is not None
    plain, spilled = (
        stream.start(Inputs.of_batches(_sparse(n)), SUITE, RunOptions(**kwargs))
        for kwargs in (
            {"missing": "partial", "subtasks": False},
            {"missing": "partial", "subtasks": False, "sum_memory": budget},
        )
    )
    expected, result = plain.finish(), spilled.finish()
    _spilled_parts(result)
    assert result.benchmark_table.equals(expected.benchmark_table)
    assert result.leaderboard_table.equals(expected.leaderboard_table)


def test_a_spilled_run_holds_one_copy_of_the_variants_while_it_finishes(
    tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once ordered, the variants in code order are freed: no frame still holds them.

    The keys of millions of variants are among a spilled run's largest arrays;
    a caller's local keeping the unordered copy alive raises the peak of a
    200M-row run, which the spill exists to bound.
    """
    n = 4_000
    budget = n // 4 * spill._CELL_BYTES * suite_arrays(SUITE).is_pooled.shape[0] / 2**30
    held: list[str] = []
    finish = spill.finish_saved

    def checked(folder: Any, ordered: Any, *args: Any, **kwargs: Any) -> Any:
        frame: FrameType | None = sys._getframe(1)
        while frame is not None:
            held.extend(
                f"{frame.f_code.co_name}: {name}"
                for name, value in frame.f_locals.items()
                if isinstance(value, Variants) and value is not ordered
            )
            frame = frame.f_back
        return finish(folder, ordered, *args, **kwargs)

    monkeypatch.setattr(spill, "finish_saved", checked)
    options = RunOptions(missing="partial", subtasks=False, sum_memory=budget)
    result = stream.start(Inputs.of_batches(_sparse(n)), SUITE, options).finish()
    _spilled_parts(result)
    assert held == []


def test_spill_files_held_open_stay_under_the_open_files_limit(
    tmpdir_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny budget: thousands of partitions, at most a quarter of the limit open."""
    monkeypatch.setattr(resource, "getrlimit", lambda _limit: (16, 16))
    most = []
    append = spill.SpillStore._append

    def counted(self: spill.SpillStore, *args: Any) -> None:
        append(self, *args)
        most.append(len(self.folder.files))

    monkeypatch.setattr(spill.SpillStore, "_append", counted)
    options = RunOptions(missing="partial", subtasks=False)
    expected = stream.start(Inputs.of_batches(_sparse(3_000)), SUITE, options).finish()
    job = stream.start(
        Inputs.of_batches(_sparse(3_000)),
        SUITE,
        RunOptions(missing="partial", subtasks=False, sum_memory=TINY),
    )
    result = job.finish()
    assert result.leaderboard_table.equals(expected.leaderboard_table)
    assert result.benchmark_table.equals(expected.benchmark_table)
    assert len(most) > 100
    assert max(most) == 4


@pytest.mark.slow  # a real process (quick sibling: ..._stay_under_the_open_files_limit)
@pytest.mark.skipif(platform.system() == "Windows", reason="POSIX rlimits")
def test_a_tiny_budget_under_a_low_open_files_limit_runs(
    tmp_path: Path, tmpdir_env: Path
) -> None:
    """`ulimit -n 64` and --sum-memory 1e-9 on a sparse input: no 'Too many open files'."""
    n = 20_000
    path = tmp_path / "sparse.parquet"
    pq.write_table(
        pa.concat_tables([batch.table for batch in _sparse(n)]),
        path,
        row_group_size=2_000,
    )
    script = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
        "from lbnorm.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "run",
            str(path),
            "--out",
            str(tmp_path / "out"),
            "--missing",
            "partial",
            "--no-subtasks",
            "--sum-memory",
            "1e-9",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmpdir_env)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert pq.read_metadata(tmp_path / "out" / "leaderboard.parquet").num_rows == n
    assert list(tmpdir_env.iterdir()) == []


def _spilling_argv(tmp_path: Path) -> list[str]:
    """A run of the demo that spills, to tmp_path/out."""
    out = str(tmp_path / "out")
    return [
        "run",
        str(demo_path()),
        "--out",
        out,
        "--no-subtasks",
        "--sum-memory",
        "1e-9",
    ]


def _spilled_run(
    tmp_path: Path,
    tmpdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str]:
    """A spilling run in this process, spilling under `tmpdir`: code, stderr.

    The golden results files, not the demo: a spill of a few models is a spill.
    """
    from lbnorm.cli import main

    monkeypatch.setenv("TMPDIR", str(tmpdir))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    golden = Path(__file__).parent / "fixtures" / "golden"
    out = str(tmp_path / "out")
    code = main(["run", str(golden), "--out", out, "--quiet", "--sum-memory", "1e-9"])
    return code, capsys.readouterr().err


def test_a_missing_tmpdir_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "no-such-folder"
    code, message = _spilled_run(tmp_path, missing, monkeypatch, capsys)
    assert code == 6, message
    assert f"TMPDIR {missing}" in message
    assert "cannot write the output" not in message
    assert "Hint: point TMPDIR at an existing folder" in message
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_a_read_only_tmpdir_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        code, message = _spilled_run(tmp_path, folder, monkeypatch, capsys)
    finally:
        folder.chmod(0o755)
    assert code == 6, message
    assert f"TMPDIR {folder}" in message
    assert "Permission denied" in message


def test_a_full_tmpdir_names_it_and_its_free_space(
    tmp_path: Path,
    tmpdir_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from lbnorm.cli import main

    real_open = Path.open

    def opened(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.suffix == ".sums":
            raise OSError(28, "No space left on device")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", opened)
    code = main(_spilling_argv(tmp_path))
    message = capsys.readouterr().err
    assert code == 6
    assert f"TMPDIR {tmpdir_env} (" in message
    assert "GiB free" in message
    assert "No space left on device" in message
    assert "cannot write the output" not in message
    assert "Hint: free space in TMPDIR" in message
    gc.collect()
    assert list(tmpdir_env.iterdir()) == []


def test_a_spill_folder_removed_under_the_run_is_an_error_not_zeros(
    tmpdir_env: Path,
) -> None:
    import shutil

    from lbnorm.core.errors import SpillError

    store = spill.SpillStore(suite_arrays(SUITE), 16, [], width=4, where=None)
    shutil.rmtree(store.folder.path)
    with pytest.raises(SpillError, match=r"spill folder was removed.*\n.*Hint"):
        list(store.sums(0))


def test_spill_folders_of_dead_runs_are_removed_by_the_next(
    tmp_path: Path,
    tmpdir_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import fcntl

    dead = tmpdir_env / "lbnorm-spill-deadbeef"
    dead.mkdir()
    (dead / "0.sums").write_bytes(b"x")
    alive = tmpdir_env / "lbnorm-spill-alive123"
    alive.mkdir()
    other = tmpdir_env / "lbnorm-spill-notours-at-all"  # not a name lbnorm makes
    other.mkdir()
    holder = os.open(alive, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code, message = _spilled_run(tmp_path, tmpdir_env, monkeypatch, capsys)
        assert code == 0, message
        assert sorted(path.name for path in tmpdir_env.iterdir()) == [
            alive.name,
            other.name,
        ]
    finally:
        os.close(holder)


def test_a_spill_folder_is_locked_while_it_lives(tmpdir_env: Path) -> None:
    import fcntl

    store = spill.SpillStore(suite_arrays(SUITE), 16, [], width=4, where=None)
    assert store.folder.path.name.startswith("lbnorm-spill-")
    descriptor = os.open(store.folder.path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(descriptor)
    store.folder.remove()
    assert list(tmpdir_env.iterdir()) == []
