from __future__ import annotations

import hashlib
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import OutputError, _runtime, run
from lbnorm.core.manifest import OUTPUT_FORMAT
from lbnorm.core.options import RunOptions
from lbnorm.output.transaction import STAGING_MARK, Transaction
from lbnorm.output.writer import OUTPUT_FILES, add_to

GOLDEN = Path(__file__).parent / "fixtures" / "golden"


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
    }


def test_replaces_an_existing_output_whole(golden_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run([golden_dir / "Amu__t1-3B.json"], out=out)
    with Transaction(out, kind=None) as transaction:  # a table listed in the manifest
        add_to(transaction, {"extra": pa.table({"x": [1]})})
        transaction.commit()
    run(
        [golden_dir / "Amu__t1-3B.json", golden_dir / "AIDC-AI__Marco-o1.json"], out=out
    )
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*OUTPUT_FILES, "manifest.json"]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["variants"] == 2
    assert (manifest["tool"], manifest["format"]) == ("lbnorm", OUTPUT_FORMAT)
    assert sorted(manifest["outputs"]) == sorted(OUTPUT_FILES)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no lock, no staging


def test_refuses_to_replace_a_directory_that_is_not_an_output(
    golden_dir: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(
        OutputError,
        match=r"precious: not an lbnorm output \(no manifest.json\) and not empty: it "
        r"holds thesis.tex; .*\nHint: choose an empty or new --out folder\.$",
    ):
        run([golden_dir / "Amu__t1-3B.json"], out=precious)
    assert (precious / "thesis.tex").read_text() == "years of work"
    assert [p.name for p in tmp_path.iterdir()] == ["precious"]


def test_failed_run_leaves_previous_output_unchanged(
    golden_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run([golden_dir / "Amu__t1-3B.json"], out=out)
    before = _digests(out)
    bad = tmp_path / "bad.json"
    bad.write_text('{"results": ')
    with pytest.raises(Exception, match="not valid JSON"):
        run([bad], out=out)
    assert _digests(out) == before


def test_parquet_bytes_are_deterministic_and_time_is_settable(
    golden_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = sorted(golden_dir.glob("*.json"))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    run(files, out=tmp_path / "a")
    run(list(reversed(files)), out=tmp_path / "b")
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b")
    assert (
        json.loads((tmp_path / "a" / "manifest.json").read_text())["created_at"]
        == "2023-11-14T22:13:20+00:00"
    )


def test_a_live_run_on_the_same_output_is_refused_at_once(
    golden_dir: Path, tmp_path: Path
) -> None:
    """Another run's staging folder, locked while that run lives, makes this one fail."""
    import fcntl
    import os

    inputs = [golden_dir / "Amu__t1-3B.json"]
    staging = tmp_path / ".out.tmp-0123456789ab"
    staging.mkdir()
    descriptor = os.open(staging, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        with pytest.raises(
            OutputError,
            match=r"another lbnorm run is writing this output directory.\nHint: wait",
        ):
            run(inputs, out=tmp_path / "out")
    finally:
        os.close(descriptor)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.tmp-0123456789ab"]
    run(inputs, out=tmp_path / "out")  # nobody holds it now: a dead run's
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_leftovers_of_a_killed_run_are_cleaned(
    golden_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    run([golden_dir / "Amu__t1-3B.json"], out=out)
    before = _digests(out)
    staging = tmp_path / ".out.tmp-deadbeef0123"
    staging.mkdir()
    (staging / STAGING_MARK).write_bytes(b"")  # (written first into every staging)
    (staging / "subtasks.parquet").write_bytes(b"half")
    out.rename(
        tmp_path / ".out.old-cafe01234567"
    )  # killed between the two renames of the fallback swap
    run([golden_dir / "Amu__t1-3B.json"], out=out)
    assert _digests(out).keys() == before.keys()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_subtask_table_is_written_a_benchmark_per_row_group(tmp_path: Path) -> None:
    """The `memory` order writes the subtask table one benchmark (row group) at a time."""
    out = tmp_path / "out"
    result = run(options=RunOptions(engine="memory"), out=out)
    written = pq.ParquetFile(out / "subtasks.parquet")
    assert written.num_row_groups == 6
    for group in range(written.num_row_groups):
        benchmarks = written.read_row_group(group, columns=["benchmark"])
        assert len(set(benchmarks.column(0).to_pylist())) == 1
    assert written.read().equals(result.subtask_table)
    manifest = json.loads((out / "manifest.json").read_text())
    for name in OUTPUT_FILES:  # each output's sha256, for consumers to check
        digest = hashlib.sha256((out / name).read_bytes()).hexdigest()
        assert manifest["outputs"][name]["sha256"] == digest


def test_version_read_from_the_dist_info_matches_importlib_metadata() -> None:
    """The manifest's version is read from the dist-info without importlib.metadata."""
    from importlib import metadata

    from lbnorm.core.version import lbnorm_version

    assert lbnorm_version() == metadata.version("lbnorm")


def test_manifest_records_the_metadata_table_it_joined(
    fixtures: Path, tmp_path: Path
) -> None:
    scores = fixtures / "tables" / "seed_examples.csv"
    meta = tmp_path / "meta.csv"
    meta.write_text("model,params_b\nseed/musr-example,7.2\nseed/gpqa-example,70\n")
    out = tmp_path / "out"
    run(
        [scores],
        out=out,
        options=RunOptions(missing="partial", metadata=str(meta)),
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["metadata_table"] == {
        "path": str(meta),
        "resolved": str(meta),  # already absolute
        "bytes": meta.stat().st_size,
        "sha256": hashlib.sha256(meta.read_bytes()).hexdigest(),
    }
    assert manifest["options"]["metadata"] == str(meta)
    stored = pq.read_metadata(out / "leaderboard.parquet").metadata
    recorded = {k: v for k, v in manifest["metadata_table"].items() if k != "resolved"}
    assert json.loads(stored[b"lbnorm.metadata_table"]) == recorded
    run([scores], out=out, options=RunOptions(missing="partial"))
    assert json.loads((out / "manifest.json").read_text())["metadata_table"] is None


def test_pandas_reads_integer_columns_as_nullable_integers(
    fixtures: Path, tmp_path: Path
) -> None:
    """rank (null when unranked) and n_samples (null when not given) stay integers."""
    import pandas as pd

    out = tmp_path / "out"
    run([fixtures / "tables" / "seed_examples.csv"], out=out)  # missing=exclude
    board = pd.read_parquet(out / "leaderboard.parquet")
    assert board["rank"].isna().all()  # incomplete variants: no rank
    assert str(board["rank"].dtype) == "Int64"
    assert str(board["n_benchmarks"].dtype) == "Int32"
    subtasks = pd.read_parquet(out / "subtasks.parquet")
    assert str(subtasks["n_samples"].dtype) == "Int64"
    demo = tmp_path / "demo"
    run(out=demo)  # the bundled demo: its inputs give no sample sizes for IFEval
    n_samples = pd.read_parquet(demo / "subtasks.parquet")["n_samples"]
    assert n_samples.isna().any()
    assert str(n_samples.dtype) == "Int64"
    assert board["average"].dtype == "float64"  # floats as they are


@pytest.mark.parametrize("parts", [1, 3])
def test_a_tables_digest_is_taken_as_it_is_written(tmp_path: Path, parts: int) -> None:
    """The manifest's sha256 and size of a table, hashed while written, are the file's."""
    from lbnorm.output.tablefile import TableFile

    table = pa.table(
        {"x": list(range(300_000)), "y": [f"n{i % 977}" for i in range(300_000)]}
    )
    path = tmp_path / "table.parquet"
    with path.open("wb") as handle:
        written = TableFile(handle.fileno(), table.schema, name=path.name)
        for part in range(parts):
            written.write(table.slice(part * 100_000, 300_000 // parts))
        entry = written.close()
    data = path.read_bytes()
    assert entry == {
        "rows": 300_000 // parts * parts,
        "columns": 2,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }


def test_a_ctrl_c_as_a_writer_thread_starts_waits_for_that_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``submit`` starts its thread before its pool records it: a Ctrl-C between the
    two left a thread the pool's shutdown did not wait for, still encoding into the
    Parquet writer that the unwinding closed (a segfault in 2 of 400 interrupted
    runs). The write is held as every entry point holds it (``lbnorm.run``, the
    command line): the Ctrl-C only sets the flag, the part is handed over and the
    writer waits for it, and the call ends with the interruption."""
    start, write_table = threading.Thread.start, pq.ParquetWriter.write_table
    written: list[int] = []

    def start_then_ctrl_c(thread: threading.Thread) -> None:
        start(thread)
        if thread.name.startswith("lbnorm-writer"):
            signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, right here

    def slow_write(self: pq.ParquetWriter, table: pa.Table, **kwargs: Any) -> None:
        time.sleep(0.2)  # still encoding when the Ctrl-C unwinds the caller
        write_table(self, table, **kwargs)
        written.append(table.num_rows)

    monkeypatch.setattr(threading.Thread, "start", start_then_ctrl_c)
    monkeypatch.setattr(pq.ParquetWriter, "write_table", slow_write)
    table = pa.table({"x": list(range(10))})
    with (
        pytest.raises(KeyboardInterrupt, match="SIGINT"),
        _runtime.cancellable(),
        Transaction(tmp_path / "out", kind=None) as transaction,
    ):
        transaction.write_parts("t.parquet", table.schema, [table], then=list)
    alive = [
        t.name for t in threading.enumerate() if t.name.startswith("lbnorm-writer")
    ]
    assert alive == []  # the part was written before the writer was closed
    assert written == [10]


# --- a manifest that scales (issue 30 item 3) ---------------------------------------------


@pytest.mark.parametrize(
    "inline",
    [
        pytest.param(
            None, marks=pytest.mark.slow, id="real-limit"
        ),  # 2,007 files: ~4 s
        pytest.param(5, id="limit-5"),  # the same path on 17 files
    ],
)
def test_a_large_tree_is_listed_beside_a_small_manifest(
    inline: int | None,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """130,000 results files listed inline made a 298 MB manifest lbnorm then refused."""
    from lbnorm.cli import main
    from lbnorm.core.manifest import INLINE_INPUTS
    from lbnorm.output.reader import Output

    if inline is not None:  # (the writer's own name for the limit)
        monkeypatch.setattr("lbnorm.output.writer.INLINE_INPUTS", inline)
    golden = json.loads((GOLDEN / "Amu__t1-3B.json").read_text())
    tree = tmp_path / "tree"
    n_files = (inline or INLINE_INPUTS) * 2 + 7
    for at in range(n_files):
        folder = tree / "org" / f"m{at:05d}"
        folder.mkdir(parents=True)
        document = {**golden, "config": {"model_name": f"org/m{at:05d}"}}
        (folder / "results_2025-01-01T00-00-00.json").write_text(json.dumps(document))
    out = tmp_path / "out"
    for _ in range(2):  # the second run replaces the first's output
        assert main(["run", str(tree), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    manifest_size = (out / "manifest.json").stat().st_size
    assert manifest_size < 32 * 1024  # ~4 MB if every input were listed inline
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"] == {"table": "inputs.parquet", "rows": n_files}
    entry = manifest["outputs"]["inputs.parquet"]
    data = (out / "inputs.parquet").read_bytes()
    assert entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert entry["bytes"] == len(data)
    assert entry["rows"] == n_files
    inputs = Output.open(out).inputs()
    paths = inputs["path"].to_pylist()
    assert paths == sorted(paths)
    assert len(set(paths)) == n_files
    assert inputs["resolved"].to_pylist() == paths  # given absolute
    assert main(["query", str(out), "SELECT count(*) AS n FROM leaderboard"]) == 0
    assert f"{n_files}" in capsys.readouterr().out


def test_a_few_inputs_stay_in_the_manifest(tmp_path: Path) -> None:
    from lbnorm.output.reader import Output

    out = tmp_path / "out"
    run([GOLDEN / "Amu__t1-3B.json"], out=out)
    assert not (out / "inputs.parquet").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert [i["path"] for i in manifest["inputs"]] == [str(GOLDEN / "Amu__t1-3B.json")]
    inputs = Output.open(out).inputs()["path"].to_pylist()
    assert inputs == [str(GOLDEN / "Amu__t1-3B.json")]
