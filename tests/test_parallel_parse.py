"""Results trees read on every core: the same scores, catalog and errors as one process."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import msgspec
import pandas as pd
import pytest

from lbnorm import InputError, _runtime, load_suite, run
from lbnorm._runtime import can_fork
from lbnorm.core.files import read_bytes
from lbnorm.core.options import RunOptions
from lbnorm.readers import harness, read_inputs, results_tree
from lbnorm.readers.harness import parse_results_file, subtask_columns
from lbnorm.readers.newest import ResultsRead
from lbnorm.readers.results_tree import (
    read_results_paths,
    scan_results_files,
)

SUITE = load_suite("openllm-v2")
SUBTASKS = subtask_columns(SUITE)
PAIRS = list(zip(SUBTASKS["task"], SUBTASKS["metric"], strict=True))
STAGE = "parsing results files"


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2))
    return path


@pytest.fixture
def tree(tmp_path: Path, golden_dir: Path) -> Path:
    """40 files of 12 models: re-runs (superseded), a tie, two precisions."""
    documents = [json.loads(p.read_text()) for p in sorted(golden_dir.glob("*.json"))]
    root = tmp_path / "tree"
    for i in range(40):
        document = dict(documents[i % len(documents)])
        model = f"org{i % 3}/model-{i % 12:02d}"
        document["model_name"] = model
        document["config"] = dict(document.get("config") or {}, model_dtype="bfloat16")
        if i % 12 == 5 and i >= 24:  # the same name in another precision
            document["config"]["model_dtype"] = "float16"
        stamp = f"2024-0{1 + i // 12}-01T00-00-{i % 7:02d}.000000"
        _write(root / model / f"results_{stamp}.json", document)
    return root


def _results_files(tree: Path) -> list[Path]:
    return sorted(tree.rglob("results_*.json"))


def _read(paths: list[Path], **options: Any) -> ResultsRead:
    return read_results_paths(paths, PAIRS, SUBTASKS, read=read_bytes, **options)


def _held_read(paths: list[Path], **options: Any) -> ResultsRead:
    """:func:`_read` holding Ctrl-C, as every entry point (``lbnorm.run``, the CLI) does."""
    with _runtime.cancellable():
        return _read(paths, **options)


def _slow_first_files(path: Path) -> bytes:
    """Reads the first models' files last, so later chunks finish first."""
    if "model-00" in str(path) or "model-01" in str(path):
        time.sleep(0.02)
    return read_bytes(path)


@pytest.fixture
def parallel(monkeypatch: pytest.MonkeyPatch) -> None:
    """Go parallel for any number of files, in chunks of 3."""
    monkeypatch.setattr(results_tree, "_MIN_PARALLEL_FILES", 1)
    monkeypatch.setattr(results_tree, "_MAX_CHUNK_FILES", 3)


@pytest.mark.usefixtures("parallel")
def test_workers_give_what_one_process_gives(tree: Path) -> None:
    paths = _results_files(tree)
    serial = _read(paths, workers=1)
    catalog = serial.files
    assert catalog["superseded_by"].null_count < catalog.num_rows - 5  # re-runs
    for read in (read_bytes, _slow_first_files):
        in_workers = read_results_paths(paths, PAIRS, SUBTASKS, read=read, workers=2)
        assert in_workers.scores.equals(serial.scores)
        assert in_workers.files.equals(catalog)
        assert in_workers.warnings == serial.warnings
    assert catalog["path"].to_pylist() == [str(p) for p in paths]
    assert {len(sha) for sha in catalog["sha256"].to_pylist()} == {64}
    assert catalog["bytes"].to_pylist() == [p.stat().st_size for p in paths]


@pytest.mark.usefixtures("parallel")
def test_read_inputs_in_workers_equals_one_core(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    serial = read_inputs([tree], suite=SUITE, options=RunOptions())
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    in_workers = read_inputs([tree], suite=SUITE, options=RunOptions())
    assert in_workers.catalog.equals(serial.catalog)
    for ours, theirs in zip(in_workers.eager, serial.eager, strict=True):
        assert ours.table.equals(theirs.table)
    assert serial.catalog["superseded_by"].null_count < serial.catalog.num_rows


@pytest.mark.usefixtures("parallel")
@pytest.mark.parametrize("read", [read_bytes, _slow_first_files])
def test_the_first_bad_file_in_path_order_is_reported(tree: Path, read: Any) -> None:
    paths = _results_files(tree)
    first, second = paths[len(paths) // 2], paths[-2]
    second.write_text(
        '{"results": '
    )  # later in path order, in an earlier-finishing chunk
    first.write_text('{"results": {}, "model_name": 5')
    with pytest.raises(InputError) as serial:
        _read(paths, workers=1)
    with pytest.raises(InputError, match="not valid JSON") as in_workers:
        read_results_paths(paths, PAIRS, SUBTASKS, read=read, workers=2)
    assert str(in_workers.value) == str(serial.value)
    assert str(in_workers.value).startswith(f"{first}: not valid JSON")
    assert "\nHint: " in str(in_workers.value)


@pytest.mark.usefixtures("parallel")
def test_an_unreadable_file_is_named(tree: Path) -> None:
    paths = _results_files(tree)
    paths[7].unlink()
    with pytest.raises(
        InputError, match=rf"{paths[7]}: no such file or directory.\nHint: "
    ):
        _read(paths, workers=2)


@pytest.mark.usefixtures("parallel")
def test_progress_is_reported_for_every_file(tree: Path) -> None:
    paths = _results_files(tree)
    calls: list[tuple[str, int, int]] = []
    _read(paths, workers=2, progress=lambda *call: calls.append(call))
    assert calls == [(STAGE, done, len(paths)) for done in range(1, len(paths) + 1)]


@pytest.mark.usefixtures("parallel")
def test_scan_without_stopping_yields_every_file_in_order(tree: Path) -> None:
    paths = _results_files(tree)
    paths[3].write_text("[]")
    paths[4].write_text(  # fails after naming its variant
        '{"model_name": "o/m", "config": {"model_dtype": "torch.float16", '
        '"model_sha": "abc"}, "results": {"leaderboard_ifeval": 3}}'
    )
    known: list[str | None] = [None] * len(paths)
    known[5] = hashlib.sha256(paths[5].read_bytes()).hexdigest()
    for workers in (1, 2):
        scanned = list(
            scan_results_files(
                paths,
                PAIRS,
                read=_slow_first_files,
                known=known,
                stop_at_error=False,
                workers=workers,
            )
        )
        assert [item.path for item in scanned] == paths
        assert isinstance(scanned[3].error, InputError)
        assert "expected a JSON object" in str(scanned[3].error)
        assert scanned[3].variant is None  # it names none
        assert "is 3, not an object" in str(scanned[4].error)
        assert scanned[4].variant == ("o/m", "float16", "abc", False)
        assert scanned[5].parsed is None  # known: not parsed
        assert scanned[5].error is None
        assert all(item.parsed is not None for item in scanned[6:])


def test_small_inputs_stay_in_process(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pool(*_args: object, **_kwargs: object) -> None:
        msg = "forked for a few files"
        raise AssertionError(msg)

    monkeypatch.setattr(results_tree, "_scan_in_workers", no_pool)
    read = _read(_results_files(tree), workers=2)  # 40 < 64 files
    assert read.scores.num_rows > 0


@pytest.mark.usefixtures("parallel")
def test_a_broken_pool_falls_back_to_one_process(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _results_files(tree)
    expected = _read(paths, workers=1)

    def broken(*_args: object, **_kwargs: object) -> Any:
        msg = "a worker died"
        raise BrokenProcessPool(msg)

    monkeypatch.setattr(results_tree, "_scan_in_workers", broken)
    result = _read(paths, workers=2)
    assert result.files.equals(expected.files)
    assert result.scores.equals(expected.scores)


@pytest.mark.usefixtures("parallel")
@pytest.mark.skipif(not can_fork(), reason="the tree is read in one process")
def test_ctrl_c_inside_the_pools_shutdown_still_ends_the_workers(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C as the pool shuts down is raised once its workers are gone.

    Landing inside ``shutdown()`` before the pool was flagged, it would leave
    the workers waiting for work and the process's exit joining them for ever.
    """
    shutdown = ProcessPoolExecutor.shutdown

    def interrupted(pool: ProcessPoolExecutor, *args: Any, **kwargs: Any) -> None:
        signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, right here
        shutdown(pool, *args, **kwargs)

    monkeypatch.setattr(ProcessPoolExecutor, "shutdown", interrupted)
    with pytest.raises(KeyboardInterrupt, match="SIGINT"):
        _held_read(_results_files(tree), workers=2)
    assert multiprocessing.active_children() == []  # joined: nothing left to wait for


@pytest.mark.usefixtures("parallel")
@pytest.mark.skipif(not can_fork(), reason="the tree is read in one process")
def test_ctrl_c_is_never_delivered_inside_the_wait_for_chunks(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``wait()`` takes the chunks' locks one by one: a Ctrl-C between two left one
    taken, and the pool's shutdown then waited on it for ever. It lands after."""
    calls: list[str] = []

    def interrupted_wait(*args: Any, **kwargs: Any) -> Any:
        signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, as the wait begins
        calls.append("waiting")
        done = wait(*args, **kwargs)
        calls.append("returned")
        return done

    monkeypatch.setattr(_runtime, "wait", interrupted_wait)  # first_done's wait
    with pytest.raises(KeyboardInterrupt, match="SIGINT"):
        _held_read(_results_files(tree), workers=2)
    assert calls == ["waiting", "returned"]  # raised once the wait was over
    assert multiprocessing.active_children() == []


@pytest.mark.usefixtures("parallel")
@pytest.mark.skipif(not can_fork(), reason="the tree is read in one process")
def test_ctrl_c_between_two_files_stops_the_workers_before_it_is_reported(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader closes its scan however its loop ends: a Ctrl-C there once left
    the scan suspended (held by the traceback) and its workers waiting for work
    while the process's exit joined them."""
    unpack = results_tree._unpack
    handed: list[int] = []

    class _Interrupting:  # a scanned file whose reader is interrupted at its hash
        def __init__(self, scanned: Any) -> None:
            self.error, self.parsed, self.size = None, scanned.parsed, scanned.size

        @property
        def sha256(self) -> str:
            raise KeyboardInterrupt

    def interrupting(*args: Any) -> Any:
        handed.append(1)
        scanned = unpack(*args)
        return _Interrupting(scanned) if len(handed) == 5 else scanned

    monkeypatch.setattr(results_tree, "_unpack", interrupting)
    with pytest.raises(KeyboardInterrupt) as caught:
        _read(_results_files(tree), workers=2)
    assert caught.tb is not None  # the frames it holds stay alive, as in the CLI
    assert multiprocessing.active_children() == []


def test_run_on_a_tree_is_the_same_on_one_or_two_cores(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results_tree, "_MIN_PARALLEL_FILES", 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    one = run([tree], out=tmp_path / "one", options=RunOptions(missing="partial"))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    two = run([tree], out=tmp_path / "two", options=RunOptions(missing="partial"))
    pd.testing.assert_frame_equal(one.leaderboard, two.leaderboard)
    pd.testing.assert_frame_equal(one.subtasks, two.subtasks)


# --- the JSON parser: msgspec reads only the keys used, else json -----------------


def test_fast_decoding_reads_what_json_reads(
    golden_dir: Path, full_structure_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [
        *sorted(golden_dir.glob("*.json")),
        *_results_files(full_structure_dir),
    ]
    fast = [parse_results_file(p, p.read_bytes(), PAIRS) for p in paths]

    def refuse(_data: bytes) -> None:
        raise msgspec.DecodeError  # every file to json, as one msgspec refuses

    monkeypatch.setattr(harness, "_decode_read_keys", refuse)
    assert fast == [parse_results_file(p, p.read_bytes(), PAIRS) for p in paths]


def test_non_ascii_files_are_parsed_in_full(tmp_path: Path, golden_dir: Path) -> None:
    document = json.loads((golden_dir / "Amu__t1-3B.json").read_text())
    document["model_name"] = "org/modèle"
    document["configs"] = {"x": "caf\xe9"}
    path = tmp_path / "org" / "m" / "results_2024-01-01T00-00-00.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(json.dumps(document, ensure_ascii=False).encode())
    assert parse_results_file(path, path.read_bytes(), PAIRS).model == "org/modèle"
    path.write_bytes(path.read_bytes().replace("caf\xe9".encode(), b"caf\xe9"))
    with pytest.raises(InputError, match=r"byte 0xe9 is not UTF-8.*\nHint: "):
        parse_results_file(path, path.read_bytes(), PAIRS)


def test_what_msgspec_refuses_goes_to_json(tmp_path: Path, golden_dir: Path) -> None:
    text = (golden_dir / "Amu__t1-3B.json").read_text()
    path = tmp_path / "org" / "m" / "results_2024-01-01T00-00-00.json"
    path.parent.mkdir(parents=True)
    expected = parse_results_file(path, text.encode(), PAIRS)
    for extra in ('"NaN": NaN', '"s": "\\ud800"', f'"big": {"9" * 30}'):
        data = text.replace("{", "{" + extra + ", ", 1).encode()
        assert parse_results_file(path, data, PAIRS) == expected
    nested = text.replace("{", '{"configs": ' + "[" * 5000 + "]" * 5000 + ", ", 1)
    with pytest.raises(InputError, match=r"cannot read the JSON: .*recursion"):
        parse_results_file(path, nested.encode(), PAIRS)


def test_a_huge_integer_in_an_unread_part_is_skipped(
    tmp_path: Path, golden_dir: Path
) -> None:
    """The one documented difference from json, which refuses > 4,300 digits anywhere."""
    text = (golden_dir / "Amu__t1-3B.json").read_text()
    path = tmp_path / "org" / "m" / "results_2024-01-01T00-00-00.json"
    data = text.replace("{", '{"configs": ' + "9" * 5000 + ", ", 1).encode()
    assert parse_results_file(path, data, PAIRS) == parse_results_file(
        path, text.encode(), PAIRS
    )
