"""The parse cache: an incremental run equals a full one; a bad cache is never trusted."""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lbnorm import OutputError, Result, run
from lbnorm.cli import main
from lbnorm.core.errors import InputError, OptionsError
from lbnorm.core.options import RunOptions
from lbnorm.readers import cache as cache_module
from lbnorm.readers import (
    cache_stats,
    cache_store,
    input_rejections,
    input_reruns,
    input_warnings,
)

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
        "hashed": 10,
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
    # these v2 files hold no v1 scores: the run fails as a plain one does (an
    # empty table must not replace a leaderboard), after rebuilding the cache
    with pytest.raises(InputError, match="no scores for suite 'openllm-v1'"):
        run(
            [tree],
            suite="openllm-v1",
            out=tmp_path / "v1",
            options=RunOptions(cache=str(cache), missing="partial", unknown="ignore"),
        )
    with pytest.raises(InputError, match="no scores for suite 'openllm-v1'"):
        run([tree], suite="openllm-v1", out=tmp_path / "v1-plain")
    back = run([tree], options=RunOptions(cache=str(cache)))  # made for v1 now
    assert _stats(back)["rebuild_reason"] == "made for other subtasks (another suite)"
    assert _stats(back)["parsed"] == 10


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
    # each names the variant lost with it: its own config, else its folders
    lost = {
        record["model"]: (record["variant_from"], record["precision"], record["lost"])
        for record in input_rejections(result.file_table)
    }
    assert lost == {
        "bad/percent": ("file", "", True),
        "bad/truncated": ("folder", None, True),
    }
    again = run([tree], options=RunOptions(cache=str(cache)))
    assert (_stats(again)["parsed"], _stats(again)["rejected"]) == (0, 2)
    assert input_rejections(again.file_table) == input_rejections(result.file_table)


def test_a_rejected_file_outside_any_folder_names_no_variant(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("loose.json").write_text("{")
    result = run([tree, "loose.json"], options=RunOptions(cache="cache"))
    (record,) = input_rejections(result.file_table)
    assert record == {
        "path": "loose.json",
        "model": None,
        "precision": None,
        "revision": None,
        "chat_template": None,
        "variant_from": None,
        "other_files": 0,
        "lost": None,  # unknown: no claim either way
    }


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
    # the older file's GPQA differs: a cached run says so as a plain one does
    (rerun,) = input_reruns(plain.file_table)
    assert rerun["superseded"] == [
        str(folder / "results_2024-05-01T00-00-00.000000.json")
    ]
    assert [difference["benchmark"] for difference in rerun["differences"]] == ["GPQA"]
    assert input_reruns(result.file_table) == [rerun]
    again = run([tree], out=tmp_path / "again", options=RunOptions(cache=str(cache)))
    assert _stats(again)["cached"] == _stats(again)["seen"]  # all from the cache
    assert input_reruns(again.file_table) == [rerun]
    # the tree's golden excerpts record no run settings: only those warnings, alike
    warnings = input_warnings(plain.file_table)
    assert all(w.startswith("not comparable") for w in warnings)
    assert (
        input_warnings(again.file_table)
        == input_warnings(result.file_table)
        == warnings
    )


def test_score_tables_beside_the_tree_are_listed_as_a_plain_run_lists_them(
    tree: Path, tmp_path: Path, fixtures: Path
) -> None:
    """Tables go around the cache: the same catalog rows, reasons included."""
    tables = tmp_path / "tables"
    tables.mkdir()
    shutil.copy(fixtures / "tables" / "seed_examples.csv", tables / "seed.csv")
    (tables / "README.md").write_text("not a table\n")  # skipped, with its reason
    options = RunOptions(cache=str(tmp_path / "cache"), missing="partial")
    cached = run([tree, tables], out=tmp_path / "cached", options=options)
    plain = run(
        [tree, tables], out=tmp_path / "plain", options=RunOptions(missing="partial")
    )
    assert _digests(tmp_path / "cached") == _digests(tmp_path / "plain")
    listed = cached.files.drop(columns=["cache", "sha256_verified"])
    assert listed.equals(plain.files)
    kinds = dict(zip(cached.files["path"], cached.files["cache"], strict=True))
    assert (
        kinds[str(tables / "seed.csv")] == kinds[str(tables / "README.md")] == "table"
    )
    readme = plain.files.set_index("path").loc[str(tables / "README.md"), "reason"]
    assert str(readme).startswith("not a score table")


@pytest.mark.parametrize("n_files", [1, 7])
def test_a_tree_of_rejected_files_fails_and_says_why(
    tmp_path: Path, golden_dir: Path, n_files: int
) -> None:
    """Nothing accepted: the run fails as a plain one does, naming the rejections."""
    paths = []
    for source in sorted(golden_dir.glob("*.json"))[:n_files]:
        org, _, name = source.stem.partition("__")
        folder = tmp_path / "tree" / org / name
        folder.mkdir(parents=True)
        path = folder / "results_2024-05-01T00-00-00.000000.json"
        shutil.copy(source, path)
        _edit_score(path, "leaderboard_gpqa_main", 1.5)
        paths.append(path)
    with pytest.raises(InputError) as caught:
        run(
            [tmp_path / "tree"],
            out=tmp_path / "out",
            options=RunOptions(cache=str(tmp_path / "cache")),
        )
    message = str(caught.value)
    assert "no scores for suite 'openllm-v2'" in message
    were = "was" if n_files == 1 else "were"
    assert f"{n_files} of them {were} rejected:\n  {paths[0]}: " in message
    assert message.count("outside [0, 1]") == min(n_files, 5)  # five shown at most
    # each shown file names the variant lost with it, as the file's config gives it
    first = json.loads(paths[0].read_text())["config"]["model_name"]
    assert f"\n    lost: {first} (" in message
    assert message.count("\n    lost: ") == min(n_files, 5)
    assert ("... and 2 more" in message) == (n_files == 7)
    assert "Hint: fix or remove the rejected files" in message
    assert not (tmp_path / "out").exists()  # nothing written


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


# --- a changed file is always seen; the manifest records what was read --------------------


def test_a_change_that_keeps_size_and_mtime_is_parsed(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "_RACY_NS", 0)  # the stat alone must tell
    cache = tmp_path / "cache"
    run([tree], options=RunOptions(cache=str(cache)))
    path = tree / "Amu" / "t1-3B" / "results_2024-05-01T00-00-00.000000.json"
    stat = path.stat()
    data = path.read_bytes()
    old = b'"leaderboard_gpqa_main": {\n   "acc_norm,none": 0.21428571428571427'
    assert data.count(old) == 1
    path.write_bytes(data.replace(old, old.replace(b"0.214", b"0.914")))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (
        stat.st_size,
        stat.st_mtime_ns,
    )
    out = tmp_path / "out"
    again = run([tree], out=out, options=RunOptions(cache=str(cache)))
    assert (_stats(again)["parsed"], _stats(again)["cached"]) == (1, 9)
    assert _status(again)["t1-3B"] == "parsed"
    gpqa = again.subtasks.set_index(["model", "subtask"]).loc[
        ("Amu/t1-3B", "main"), "raw_score"
    ]
    assert gpqa == pytest.approx(0.91428571428571427)
    plain = run([tree], out=tmp_path / "plain")
    assert plain.leaderboard.equals(again.leaderboard)
    assert _digests(out) == _digests(tmp_path / "plain")
    manifest = json.loads((out / "manifest.json").read_text())
    recorded = {Path(i["path"]).parent.name: i for i in manifest["inputs"]}
    assert recorded["t1-3B"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert recorded["t1-3B"]["bytes"] == len(path.read_bytes())
    assert recorded["t1-3B"]["sha256_verified"] is True
    for entry in manifest["inputs"]:  # every hash is of the bytes on disk
        assert (
            entry["sha256"]
            == hashlib.sha256(Path(entry["path"]).read_bytes()).hexdigest()
        )


def test_files_changed_just_before_a_run_are_read_again(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    run([tree], options=RunOptions(cache=str(cache)))
    again = run([tree], out=tmp_path / "out", options=RunOptions(cache=str(cache)))
    # the files were written within 2 s of the first run's stat: a second write
    # in the same timestamp tick would keep every stat field, so they are hashed
    assert (_stats(again)["parsed"], _stats(again)["cached"]) == (0, 10)
    assert _stats(again)["hashed"] == 10
    inputs = json.loads((tmp_path / "out" / "manifest.json").read_text())["inputs"]
    assert all(entry["sha256_verified"] for entry in inputs)
    monkeypatch.setattr(cache_module, "_RACY_NS", 0)  # as if the run came later
    trusted = run([tree], out=tmp_path / "out", options=RunOptions(cache=str(cache)))
    assert (_stats(trusted)["cached"], _stats(trusted)["hashed"]) == (10, 0)
    index = (cache / "lbnorm-cache.json").read_bytes()
    assert (
        run([tree], options=RunOptions(cache=str(cache)))
        .files["cache"]
        .eq("cached")
        .all()
    )
    assert (cache / "lbnorm-cache.json").read_bytes() == index  # nothing to rewrite
    inputs = json.loads((tmp_path / "out" / "manifest.json").read_text())["inputs"]
    assert not any(entry["sha256_verified"] for entry in inputs)  # taken on their stat
    for entry in inputs:  # yet each is the hash of the bytes an earlier run read
        assert (
            entry["sha256"]
            == hashlib.sha256(Path(entry["path"]).read_bytes()).hexdigest()
        )
    full = run(
        [tree],
        out=tmp_path / "out",
        options=RunOptions(cache=str(cache), full_rebuild=True),
    )
    assert _stats(full)["hashed"] == 10  # --full verifies every hash


# --- the cache is never inside the output --------------------------------------------------


def test_a_cache_inside_the_output_is_refused(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    run([tree], out=out)
    before = _digests(out)
    link = tmp_path / "link"
    link.symlink_to(out)
    for cache in (out / "cache", out, link / "cache"):
        code = main(
            ["run", str(tree), "--out", str(out), "--cache", str(cache), "--quiet"]
        )
        assert code == 2
        err = capsys.readouterr().err
        assert re.fullmatch(
            r"lbnorm: error: --cache \S+ is inside --out \S+, which every run replaces "
            r"whole: the cache would be wiped each time\.\nHint: keep the cache beside "
            r"the output, e.g\. --cache out\.cache \(or \.lbnorm-cache\)\.\n",
            err,
        ), err
    with pytest.raises(OptionsError, match=r"is inside --out .*\nHint: keep the cache"):
        run([tree], out=out, options=RunOptions(cache=str(out / "cache")))
    assert _digests(out) == before
    assert not (out / "cache").exists()
    assert (
        main(
            [
                "run",
                str(tree),
                "--out",
                str(out),
                "--cache",
                str(tmp_path / "out.cache"),
                "--quiet",
            ]
        )
        == 0
    )


# --- a damaged cache is rebuilt, never a crash ----------------------------------------------


def _index(cache: Path) -> dict[str, Any]:
    index: dict[str, Any] = json.loads((cache / "lbnorm-cache.json").read_text())
    return index


def _damage_index(text: str) -> Callable[[Path], None]:
    def damage(cache: Path) -> None:
        (cache / "lbnorm-cache.json").write_text(text)

    return damage


def _set_field(name: str, value: object) -> Callable[[Path], None]:
    def damage(cache: Path) -> None:
        index = _index(cache)
        index[name] = value
        (cache / "lbnorm-cache.json").write_text(json.dumps(index))

    return damage


def _stat_time_1e400(cache: Path) -> None:
    text = json.dumps(_index(cache))
    (cache / "lbnorm-cache.json").write_text(
        re.sub(r'"stat_ns": \d+', '"stat_ns": 1e400', text)
    )


def _stat_time_huge(cache: Path) -> None:
    text = json.dumps(_index(cache))
    (cache / "lbnorm-cache.json").write_text(
        re.sub(r'"stat_ns": \d+', '"stat_ns": 1' + "0" * 400, text)
    )


def _rows_become_a_directory(cache: Path) -> None:
    rows = cache / _index(cache)["rows"]["file"]
    rows.unlink()
    rows.mkdir()
    (rows / "part-0.parquet").write_bytes(b"not lbnorm's")


def _index_becomes_a_directory(cache: Path) -> None:
    (cache / "lbnorm-cache.json").unlink()
    (cache / "lbnorm-cache.json").mkdir()
    (cache / "lbnorm-cache.json" / "keep.txt").write_text("not lbnorm's")


def _index_becomes_a_pipe(cache: Path) -> None:
    (cache / "lbnorm-cache.json").unlink()
    os.mkfifo(cache / "lbnorm-cache.json")  # reading it would block forever


def _index_not_utf8(cache: Path) -> None:
    (cache / "lbnorm-cache.json").write_bytes(b'{"format": "\xff"}')


def _entries_outside_the_cache(cache: Path) -> None:
    index = _index(cache)
    index["entries"]["file"] = "../../../etc/hostname"
    (cache / "lbnorm-cache.json").write_text(json.dumps(index))


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "index-list": (
        _damage_index("[]"),
        r"corrupt: ValueError: the index is not a JSON object: \[\]",
    ),
    "index-string": (
        _damage_index('"x"'),
        r'corrupt: ValueError: the index is not a JSON object: "x"',
    ),
    "index-null": (
        _damage_index("null"),
        r"corrupt: ValueError: the index is not a JSON object: null",
    ),
    "index-empty-object": (
        _damage_index("{}"),
        r"corrupt: ValueError: the index lacks a field",
    ),
    "index-nested-100000-deep": (
        _damage_index("[" * 100_000 + "]" * 100_000),
        r"corrupt: RecursionError",
    ),
    "index-not-utf8": (
        _index_not_utf8,
        r"corrupt: (UnicodeDecodeError|JSONDecodeError)",
    ),
    "stat-time-1e400": (
        _stat_time_1e400,
        r"corrupt: ValueError: the index lacks a field",
    ),
    "stat-time-400-digits": (
        _stat_time_huge,
        r"corrupt: ValueError: the index lacks a field",
    ),
    "index-of-format-1": (
        _set_field("format", 1),
        r"made by another lbnorm version",
    ),
    "index-of-another-parser": (
        _set_field("parser", "0-0000000000000000"),
        r"made by another version of the results parser",
    ),
    "index-of-the-package-version-only": (  # (a cache of before the parser key)
        _set_field("parser", None),
        r"made by another version of the results parser",
    ),
    "format-a-list": (
        _set_field("format", [2]),
        r"corrupt: ValueError: the index lacks a field",
    ),
    "rows-a-directory": (
        _rows_become_a_directory,
        r"corrupt: FileNotFoundError: rows-[0-9a-f]{12}\.parquet is missing or not a file",
    ),
    "index-a-directory": (
        _index_becomes_a_directory,
        r"corrupt: lbnorm-cache\.json was not a file \(moved aside to "
        r"lbnorm-cache\.json\.damaged-[0-9a-f]{12}\)",
    ),
    "index-a-pipe": (
        _index_becomes_a_pipe,
        r"corrupt: lbnorm-cache\.json was not a file",
    ),
    "entries-outside-the-cache": (
        _entries_outside_the_cache,
        r"corrupt: ValueError: the index lacks a field",
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_cache_is_rebuilt(
    damage: str, tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    plain = run([tree], out=tmp_path / "plain")
    run([tree], options=RunOptions(cache=str(cache)))
    spoil, reason = DAMAGE[damage]
    spoil(cache)
    out = tmp_path / "out"
    assert main(["run", str(tree), "--out", str(out), "--cache", str(cache)]) == 0
    printed = capsys.readouterr().out
    assert re.search(
        r"cache      \S+: 10 parsed, 0 cached, 0 rejected, 0 dropped; rebuilt \(",
        printed,
    )
    rebuilt = run([tree], out=tmp_path / "again", options=RunOptions(cache=str(cache)))
    assert (_stats(rebuilt)["parsed"], _stats(rebuilt)["cached"]) == (
        0,
        10,
    )  # healthy again
    assert _stats(rebuilt)["rebuilt"] is False
    assert _digests(out) == _digests(tmp_path / "plain") == _digests(tmp_path / "again")
    assert plain.leaderboard.equals(rebuilt.leaderboard)
    spoil(cache)  # the same damage again, now seen from Python
    stats = _stats(run([tree], options=RunOptions(cache=str(cache))))
    assert stats["rebuilt"] is True
    assert re.match(reason, str(stats["rebuild_reason"])), stats["rebuild_reason"]


def test_what_lbnorm_did_not_write_is_kept(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    run([tree], options=RunOptions(cache=str(cache)))
    _index_becomes_a_directory(cache)
    stats = _stats(run([tree], options=RunOptions(cache=str(cache))))
    assert re.fullmatch(DAMAGE["index-a-directory"][1], str(stats["rebuild_reason"]))
    (aside,) = cache.glob("lbnorm-cache.json.damaged-*")
    assert (aside / "keep.txt").read_text() == "not lbnorm's"  # moved, not deleted
    _rows_become_a_directory(cache)
    stats = _stats(run([tree], options=RunOptions(cache=str(cache))))
    assert re.fullmatch(DAMAGE["rows-a-directory"][1], str(stats["rebuild_reason"]))
    kept = [path for path in cache.glob("rows-*.parquet") if path.is_dir()]
    assert [(path / "part-0.parquet").read_bytes() for path in kept] == [
        b"not lbnorm's"
    ]
    assert _stats(run([tree], options=RunOptions(cache=str(cache))))["rebuilt"] is False
    _index_becomes_a_directory(cache)
    full = run([tree], options=RunOptions(cache=str(cache), full_rebuild=True))
    assert _stats(full)["rebuild_reason"] == "--full rebuild asked for"
    assert len(list(cache.glob("lbnorm-cache.json.damaged-*"))) == 2


# --- a cache that cannot be written says so, and names --cache --------------------------------


def test_an_unwritable_cache_names_the_cache_not_the_output(
    tree: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def refuse(path: Path, content: object, **how: object) -> str:
        msg = "writer's words"
        raise OutputError(msg) from PermissionError(
            errno.EACCES, "Permission denied", str(path)
        )

    monkeypatch.setattr(cache_store, "write_file", refuse)
    cache = tmp_path / "cache"
    out = tmp_path / "out"
    assert main(["run", str(tree), "--out", str(out), "--cache", str(cache)]) == 6
    err = capsys.readouterr().err
    assert re.fullmatch(
        rf"lbnorm: error: --cache {re.escape(str(cache))}: cannot write the cache "
        r"\(Permission denied\); nothing was written to the output\.\nHint: make the "
        r"cache directory writable, choose another --cache directory, or leave "
        r"--cache out to run without the cache\.\n",
        err,
    ), err
    assert "--out" not in err
    assert not out.exists()
    assert sorted(path.name for path in cache.iterdir()) == [
        ".lock"
    ]  # no half generation
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(
        OutputError,
        match=r"--cache \S+a-file: cannot create the cache directory \(File exists\).*\nHint: make the cache",
    ):
        run([tree], options=RunOptions(cache=str(tmp_path / "a-file")))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_a_read_only_cache_names_the_cache(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache = tmp_path / "cache"
    run([tree], options=RunOptions(cache=str(cache)))
    (tree / "Amu" / "t1-3B" / "results_2024-05-01T00-00-00.000000.json").write_text(
        "{}"
    )
    cache.chmod(0o555)
    try:
        code = main(
            ["run", str(tree), "--out", str(tmp_path / "out"), "--cache", str(cache)]
        )
    finally:
        cache.chmod(0o755)
    assert code == 6
    err = capsys.readouterr().err
    assert "--cache" in err
    assert "another --out" not in err


def test_the_cache_is_keyed_on_the_parser_not_the_package_version(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package's version string stays put across commits; the parser's key moves."""
    from lbnorm.readers import cache as parse_cache
    from lbnorm.readers import harness

    folder = tmp_path / "cache"
    run([tree], options=RunOptions(cache=str(folder)))
    key = parse_cache.parser_key()
    assert key.startswith(f"{harness.PARSER_VERSION}-")
    meta = json.loads((folder / "lbnorm-cache.json").read_text())
    assert meta["parser"] == key
    monkeypatch.setattr(parse_cache, "parser_key", lambda: "2-" + key[2:])
    again = _stats(run([tree], options=RunOptions(cache=str(folder))))
    assert again["rebuild_reason"] == "made by another version of the results parser"
    assert again["parsed"] == 10


def test_scores_edited_with_the_index_checksum_updated_are_not_trusted(
    tree: Path, tmp_path: Path
) -> None:
    """A rows file with halved scores and its sha256 in the index updated: rebuilt."""
    import hashlib

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    folder = tmp_path / "cache"
    first = run([tree], options=RunOptions(cache=str(folder)))
    index = _index(folder)
    rows_path = folder / index["rows"]["file"]
    rows = pq.read_table(rows_path)
    halved = pc.multiply(rows["raw_score"], pa.scalar(0.5))
    rows = rows.set_column(
        rows.schema.get_field_index("raw_score"), "raw_score", halved
    )
    pq.write_table(rows, rows_path)
    index["rows"]["sha256"] = hashlib.sha256(rows_path.read_bytes()).hexdigest()
    (folder / "lbnorm-cache.json").write_text(json.dumps(index))
    again = run([tree], options=RunOptions(cache=str(folder)))
    stats = _stats(again)
    assert str(stats["rebuild_reason"]).startswith("corrupt: the scores of ")
    assert str(stats["rebuild_reason"]).endswith("files do not match their digests")
    assert again.leaderboard_table.equals(first.leaderboard_table)


def test_cached_scores_are_checked_on_their_benchmarks_range() -> None:
    """A [0, 100] benchmark's 85 is a score there, a fraction's 85 a percentage."""
    import pyarrow as pa

    from lbnorm.suites import load_suite, parse_suite, suite_arrays

    text = b'name = "p"\n[[benchmarks]]\nname = "P"\nrange = [0, 100]\nsubtasks = [{ name = "a", task = "t", metric = "m" }]\n[[benchmarks]]\nname = "F"\nsubtasks = [{ name = "b", task = "u", metric = "m" }]\n'
    scales = suite_arrays(parse_suite(text, source="p.toml")).scales
    rows = pa.table(
        {
            "path": ["ok.json", "ok.json", "big.json", "pct.json"],
            "subtask_index": pa.array([0, 1, 0, 1], pa.int32()),
            "raw_score": [85.0, 0.85, 100.5, 85.0],
            "stderr": pa.array([None] * 4, pa.float64()),
            "n_samples": pa.array([None] * 4, pa.int64()),
            "key": ["k"] * 4,
        }
    )
    bad = cache_module._check_rows(rows, scales)
    assert bad == {
        "big.json": "k is 100.5, outside its benchmark's range",
        "pct.json": "k is 85.0, outside [0, 1] (a percentage?)",
    }
    assert cache_module._check_rows(rows.slice(0, 2), scales) == {}
    assert suite_arrays(load_suite("openllm-v2")).scales is None
