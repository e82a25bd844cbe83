"""The parse cache: an incremental run equals a full one; a bad cache is never trusted."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from lbnorm import OutputError, Result, run
from lbnorm.options import RunOptions
from lbnorm.readers import cache_stats

TABLES = ("subtasks.parquet", "benchmarks.parquet", "leaderboard.parquet")


@pytest.fixture
def tree(tmp_path: Path, golden_dir: Path, full_structure_dir: Path) -> Path:
    """Ten real results files in the leaderboard's layout."""
    root = tmp_path / "tree"
    shutil.copytree(full_structure_dir, root)
    for path in sorted(golden_dir.glob("*.json")):
        org, _, name = path.stem.partition("__")
        folder = root / org / name
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, folder / "results_2024-05-01T00-00-00.000000.json")
    return root


def _digests(out: Path) -> dict[str, str]:
    return {
        name: hashlib.sha256((out / name).read_bytes()).hexdigest() for name in TABLES
    }


def _stats(result: Result) -> dict[str, object]:
    stats: dict[str, object] = cache_stats(result.file_table) or {}
    return stats


def _status(result: Result) -> dict[str, str]:
    return {
        Path(path).parent.name: status
        for path, status in zip(
            result.files["path"], result.files["cache"], strict=True
        )
    }


def _edit_score(path: Path, task: str, value: float) -> None:
    document = json.loads(path.read_text())
    metric = next(
        key
        for key in document["results"][task]
        if not key.endswith("stderr,none") and key != "alias"
    )
    document["results"][task][metric] = value
    path.write_text(json.dumps(document))


def test_incremental_run_equals_a_full_run(
    tree: Path, tmp_path: Path, golden_dir: Path
) -> None:
    cache = tmp_path / "cache"
    first = run([tree], out=tmp_path / "first", options=RunOptions(cache=str(cache)))
    assert _stats(first) | {"seconds": 0} == {
        "directory": str(cache),
        "seen": 10,
        "parsed": 10,
        "cached": 0,
        "rejected": 0,
        "dropped": 0,
        "rebuilt": False,
        "rebuild_reason": "",
        "seconds": 0,
    }
    run([tree], out=tmp_path / "plain")
    assert _digests(tmp_path / "first") == _digests(tmp_path / "plain")
    # change one file, add one, remove one
    changed = tree / "Amu" / "t1-3B" / "results_2024-05-01T00-00-00.000000.json"
    _edit_score(changed, "leaderboard_gpqa_main", 0.4)
    added = tree / "Amu" / "t1-3B-copy"
    added.mkdir()
    shutil.copy(
        golden_dir / "Amu__t1-3B.json",
        added / "results_2024-06-01T00-00-00.000000.json",
    )
    document = json.loads(
        (added / "results_2024-06-01T00-00-00.000000.json").read_text()
    )
    document["model_name"] = "Amu/t1-3B-copy"
    (added / "results_2024-06-01T00-00-00.000000.json").write_text(json.dumps(document))
    shutil.rmtree(tree / "EleutherAI")
    second = run([tree], out=tmp_path / "second", options=RunOptions(cache=str(cache)))
    stats = _stats(second)
    assert (stats["seen"], stats["parsed"], stats["cached"], stats["dropped"]) == (
        10,
        2,
        8,
        1,
    )
    assert _status(second)["t1-3B"] == "parsed"
    assert _status(second)["t1-3B-copy"] == "parsed"
    full = run(
        [tree],
        out=tmp_path / "full",
        options=RunOptions(cache=str(tmp_path / "fresh"), full_rebuild=True),
    )
    assert _stats(full)["rebuilt"] is True
    plain = run([tree], out=tmp_path / "plain2")
    assert (
        _digests(tmp_path / "second")
        == _digests(tmp_path / "full")
        == _digests(tmp_path / "plain2")
    )
    assert "EleutherAI/pythia-2.8b" not in set(second.leaderboard["model"])
    gpqa = second.subtasks.set_index(["model", "subtask"]).loc[
        ("Amu/t1-3B", "main"), "raw_score"
    ]
    assert gpqa == 0.4
    assert plain.leaderboard.equals(second.leaderboard)


def test_unchanged_and_touched_files_are_not_parsed(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run([tree], options=RunOptions(cache=str(cache)))
    touched = next(tree.rglob("results_*.json"))
    os.utime(
        touched,
        ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 5_000_000_000),
    )
    again = run([tree], options=RunOptions(cache=str(cache)))
    assert (_stats(again)["parsed"], _stats(again)["cached"]) == (0, 10)


def test_corrupt_cache_is_rebuilt_not_trusted(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    reference = run([tree], out=tmp_path / "plain")
    run([tree], options=RunOptions(cache=str(cache)))
    rows = next(cache.glob("rows-*.parquet"))
    data = bytearray(rows.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit of rot
    rows.write_bytes(bytes(data))
    rebuilt = run(
        [tree], out=tmp_path / "rebuilt", options=RunOptions(cache=str(cache))
    )
    assert _stats(rebuilt)["rebuilt"] is True
    assert str(_stats(rebuilt)["rebuild_reason"]).startswith("corrupt: rows-")
    assert _stats(rebuilt)["parsed"] == 10
    assert _digests(tmp_path / "rebuilt") == _digests(tmp_path / "plain")
    assert reference.leaderboard.equals(rebuilt.leaderboard)
    (cache / "lbnorm-cache.json").write_text("{ not json")
    assert str(
        _stats(run([tree], options=RunOptions(cache=str(cache))))["rebuild_reason"]
    ).startswith("corrupt: JSONDecodeError")
    next(cache.glob("entries-*.parquet")).unlink()
    assert str(
        _stats(run([tree], options=RunOptions(cache=str(cache))))["rebuild_reason"]
    ).startswith("corrupt: FileNotFoundError")
    assert (
        _stats(run([tree], options=RunOptions(cache=str(cache))))["rebuilt"] is False
    )  # and healthy again
    assert len(list(cache.glob("rows-*.parquet"))) == 1  # old generations are removed


def test_cache_for_other_subtasks_is_rebuilt(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run([tree], options=RunOptions(cache=str(cache)))
    other = run(
        [tree],
        suite="openllm-v1",
        options=RunOptions(cache=str(cache), missing="partial", unknown="ignore"),
    )
    assert _stats(other)["rebuild_reason"] == "made for other subtasks (another suite)"


def test_bad_files_are_rejected_with_reasons_and_remembered(
    tree: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    truncated = tree / "bad" / "truncated" / "results_2024-05-02T00-00-00.000000.json"
    truncated.parent.mkdir(parents=True)
    truncated.write_text('{"results": {"leaderboard_ifeval": ')
    percent = tree / "bad" / "percent" / "results_2024-05-02T00-00-00.000000.json"
    percent.parent.mkdir(parents=True)
    shutil.copy(
        tree / "Amu" / "t1-3B" / "results_2024-05-01T00-00-00.000000.json", percent
    )
    document = json.loads(percent.read_text())
    document["model_name"] = "bad/percent"
    percent.write_text(json.dumps(document))
    _edit_score(percent, "leaderboard_mmlu_pro", 45.3)
    result = run([tree], options=RunOptions(cache=str(cache)))
    reasons = dict(
        zip(
            result.files["path"].map(lambda p: Path(p).parent.name),
            result.files["reason"],
            strict=True,
        )
    )
    assert _status(result)["truncated"] == _status(result)["percent"] == "rejected"
    assert "not valid JSON" in reasons["truncated"]
    assert (
        reasons["percent"]
        == "results['leaderboard_mmlu_pro']['acc,none'] is 45.3, outside [0, 1] (a percentage?)"
    )
    assert "bad/percent" not in set(result.leaderboard["model"])
    assert len(result.leaderboard) == 10
    again = run([tree], options=RunOptions(cache=str(cache)))
    assert (_stats(again)["parsed"], _stats(again)["rejected"]) == (0, 2)


def test_newer_file_supersedes_across_cache_and_new(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run([tree], options=RunOptions(cache=str(cache)))
    folder = tree / "Amu" / "t1-3B"
    newer = folder / "results_2024-09-01T00-00-00.000000.json"
    shutil.copy(folder / "results_2024-05-01T00-00-00.000000.json", newer)
    _edit_score(newer, "leaderboard_gpqa_main", 0.5)
    result = run([tree], out=tmp_path / "cached", options=RunOptions(cache=str(cache)))
    plain = run([tree], out=tmp_path / "plain")
    superseded = result.files.dropna(subset=["superseded_by"])
    assert superseded["path"].str.endswith(
        "results_2024-05-01T00-00-00.000000.json"
    ).tolist() == [True]
    assert superseded["superseded_by"].tolist() == [str(newer)]
    assert _digests(tmp_path / "cached") == _digests(tmp_path / "plain")
    assert plain.files["superseded_by"].notna().sum() == 1


def test_a_busy_cache_fails_clearly(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    with (cache / ".lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        with pytest.raises(
            OutputError,
            match=r"another lbnorm run is using this cache.*\n.*Hint: wait for it",
        ):
            run([tree], options=RunOptions(cache=str(cache)))
