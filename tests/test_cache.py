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

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lbnorm import OutputError, Result, run
from lbnorm.cli import main
from lbnorm.core.errors import InputError, OptionsError
from lbnorm.core.options import RunOptions
from lbnorm.readers import cache as cache_module
from lbnorm.readers import (
    cache_stats,
    input_rejections,
    input_reruns,
    input_warnings,
)
from lbnorm.readers.cache import NAME
from lbnorm.readers.harness import HarnessFile
from lbnorm.readers.results_tree import parsed_columns
from lbnorm.suites import load_suite, parse_suite, suite_arrays

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
    data = bytearray((cache / NAME).read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit of rot
    (cache / NAME).write_bytes(bytes(data))
    rebuilt = run(
        [tree], out=tmp_path / "rebuilt", options=RunOptions(cache=str(cache))
    )
    assert _stats(rebuilt)["rebuilt"] is True
    assert _stats(rebuilt)["rebuild_reason"] == CHECKSUM
    assert _stats(rebuilt)["parsed"] == 10
    assert _digests(tmp_path / "rebuilt") == _digests(tmp_path / "plain")
    assert reference.leaderboard.equals(rebuilt.leaderboard)
    (cache / NAME).unlink()  # no cache: every file parsed, nothing to distrust
    assert _stats(run([tree], options=RunOptions(cache=str(cache)))) | {
        "seconds": 0
    } == _stats(rebuilt) | {"rebuilt": False, "rebuild_reason": "", "seconds": 0}
    assert (
        _stats(run([tree], options=RunOptions(cache=str(cache))))["rebuilt"] is False
    )  # and healthy again
    assert sorted(path.name for path in cache.iterdir()) == [".lock", NAME]


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
    index = (cache / NAME).read_bytes()
    assert (
        run([tree], options=RunOptions(cache=str(cache)))
        .files["cache"]
        .eq("cached")
        .all()
    )
    assert (cache / NAME).read_bytes() == index  # nothing to rewrite
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


def _body(cache: Path) -> pa.Table:
    """The cache's table: its file's Parquet bytes, before their checksum."""
    return pq.read_table(pa.BufferReader((cache / NAME).read_bytes()[:-64]))


def _meta(cache: Path) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads(_body(cache).schema.metadata[b"lbnorm.cache"])
    return meta


def _write(cache: Path, body: bytes) -> None:
    """Write `body` as the cache's file, with its checksum: made as lbnorm makes it."""
    digest = hashlib.sha256(body).hexdigest().encode()
    (cache / NAME).write_bytes(body + digest)


def _rewrite(cache: Path, table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    _write(cache, sink.getvalue().to_pybytes())


def _set_field(name: str, value: object) -> Callable[[Path], None]:
    def damage(cache: Path) -> None:
        meta = json.dumps(_meta(cache) | {name: value}).encode()
        _rewrite(cache, _body(cache).replace_schema_metadata({b"lbnorm.cache": meta}))

    return damage


def _cut(cache: Path) -> None:
    data = (cache / NAME).read_bytes()
    (cache / NAME).write_bytes(data[: len(data) // 2])


def _replace_with(data: bytes) -> Callable[[Path], None]:
    def damage(cache: Path) -> None:
        (cache / NAME).write_bytes(data)

    return damage


def _checksum_flipped(cache: Path) -> None:
    data = (cache / NAME).read_bytes()
    (cache / NAME).write_bytes(data[:-1] + (b"0" if data[-1:] != b"0" else b"1"))


def _another_schema(cache: Path) -> None:
    _rewrite(cache, _body(cache).drop_columns(["stat"]))


def _no_metadata(cache: Path) -> None:
    _rewrite(cache, _body(cache).replace_schema_metadata(None))


def _cache_becomes_a_directory(cache: Path) -> None:
    (cache / NAME).unlink()
    (cache / NAME).mkdir()
    (cache / NAME / "keep.txt").write_text("not lbnorm's")


def _cache_becomes_a_pipe(cache: Path) -> None:
    (cache / NAME).unlink()
    os.mkfifo(cache / NAME)  # reading it would block forever


CHECKSUM = "corrupt: lbnorm-cache.bin does not match its checksum"
#: Each damage and the reason given. Any change to the file's bytes fails its
#: checksum; the rest are files with a right checksum (written as lbnorm writes)
#: that an lbnorm of this version and suite must still not trust.
DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (_cut, CHECKSUM),
    "empty": (_replace_with(b""), CHECKSUM),
    "a-json-list": (_replace_with(b"[]"), CHECKSUM),
    "not-utf8": (_replace_with(b'{"format": "\xff"}'), CHECKSUM),
    "checksum-flipped": (_checksum_flipped, CHECKSUM),
    "not-parquet": (
        lambda cache: _write(cache, b"not parquet"),
        r"corrupt: ArrowInvalid: ",
    ),
    "another-schema": (
        _another_schema,
        r"corrupt: lbnorm-cache\.bin has an unexpected schema",
    ),
    "no-metadata": (_no_metadata, r"corrupt: KeyError: "),
    "of-format-1": (_set_field("format", 1), r"made by another lbnorm version"),
    "format-a-list": (_set_field("format", [7]), r"made by another lbnorm version"),
    "of-another-parser": (
        _set_field("parser", "0-0000000000000000"),
        r"made by another version of the results parser",
    ),
    "of-no-parser": (
        _set_field("parser", None),
        r"made by another version of the results parser",
    ),
    "stat-time-1e400": (
        _set_field("stat_ns", 1e400),
        r"corrupt: lbnorm-cache\.bin has no stat time",
    ),
    "stat-time-400-digits": (
        _set_field("stat_ns", 10**400),
        r"corrupt: lbnorm-cache\.bin has no stat time",
    ),
    "cache-a-directory": (
        _cache_becomes_a_directory,
        r"corrupt: lbnorm-cache\.bin was not a file \(moved aside to "
        r"lbnorm-cache\.bin\.damaged-[0-9a-f]{12}\)",
    ),
    "cache-a-pipe": (
        _cache_becomes_a_pipe,
        r"corrupt: lbnorm-cache\.bin was not a file",
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
    cache.mkdir()
    older = {"lbnorm-cache.json": b"{}", "rows-0123456789ab.parquet": b"PAR1"}
    for name, data in older.items():  # (an older lbnorm's cache: not read, kept)
        (cache / name).write_bytes(data)
    run([tree], options=RunOptions(cache=str(cache)))
    _cache_becomes_a_directory(cache)
    stats = _stats(run([tree], options=RunOptions(cache=str(cache))))
    assert re.fullmatch(DAMAGE["cache-a-directory"][1], str(stats["rebuild_reason"]))
    (aside,) = cache.glob(f"{NAME}.damaged-*")
    assert (aside / "keep.txt").read_text() == "not lbnorm's"  # moved, not deleted
    assert _stats(run([tree], options=RunOptions(cache=str(cache))))["rebuilt"] is False
    _cache_becomes_a_directory(cache)
    full = run([tree], options=RunOptions(cache=str(cache), full_rebuild=True))
    assert _stats(full)["rebuild_reason"] == "--full rebuild asked for"
    assert len(list(cache.glob(f"{NAME}.damaged-*"))) == 2
    assert {name: (cache / name).read_bytes() for name in older} == older


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

    monkeypatch.setattr(cache_module, "write_file", refuse)
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
    assert _meta(folder)["parser"] == key
    monkeypatch.setattr(parse_cache, "parser_key", lambda: "2-" + key[2:])
    again = _stats(run([tree], options=RunOptions(cache=str(folder))))
    assert again["rebuild_reason"] == "made by another version of the results parser"
    assert again["parsed"] == 10


def test_scores_edited_in_the_cache_are_not_trusted(tree: Path, tmp_path: Path) -> None:
    """The cache's scores halved by a Parquet tool, its checksum left: rebuilt."""
    folder = tmp_path / "cache"
    first = run([tree], options=RunOptions(cache=str(folder)))
    table = _body(folder).combine_chunks()
    lists = table["scores"].chunk(0)
    halved = pa.StructArray.from_arrays(
        [
            pc.multiply(lists.values.field(at), pa.scalar(0.5))
            if field.name == "raw_score"
            else lists.values.field(at)
            for at, field in enumerate(lists.type.value_type)
        ],
        fields=list(lists.type.value_type),
    )
    edited = table.set_column(
        table.schema.get_field_index("scores"),
        "scores",
        pa.ListArray.from_arrays(lists.offsets, halved),
    )
    checksum = (folder / NAME).read_bytes()[-64:]
    sink = pa.BufferOutputStream()
    pq.write_table(edited, sink)
    (folder / NAME).write_bytes(sink.getvalue().to_pybytes() + checksum)
    again = run([tree], options=RunOptions(cache=str(folder)))
    assert _stats(again)["rebuild_reason"] == CHECKSUM
    assert again.leaderboard_table.equals(first.leaderboard_table)


def test_cached_scores_are_checked_on_their_benchmarks_range() -> None:
    """A [0, 100] benchmark's 85 is a score there, a fraction's 85 a percentage."""
    text = b'name = "p"\n[[benchmarks]]\nname = "P"\nrange = [0, 100]\nsubtasks = [{ name = "a", task = "t", metric = "m" }]\n[[benchmarks]]\nname = "F"\nsubtasks = [{ name = "b", task = "u", metric = "m" }]\n'
    suite = parse_suite(text, source="p.toml")

    def parsed(path: str, subtasks: list[int], scores: list[float]) -> HarnessFile:
        rows: dict[str, list[Any]] = {
            "subtask_index": subtasks,
            "raw_score": scores,
            "stderr": [None] * len(scores),
            "n_samples": [None] * len(scores),
            "settings": [(None,) * 8] * len(scores),
        }
        return HarnessFile(
            path=path,
            model="m",
            precision="",
            revision="",
            chat_template=False,
            timestamp="",
            rows=rows,
            n_ignored=0,
        )

    files = parsed_columns(
        [
            parsed("ok.json", [0, 1], [85.0, 0.85]),
            parsed("big.json", [0], [100.5]),
            parsed("pct.json", [1], [85.0]),
        ]
    )
    pairs = [("t", "m"), ("u", "m")]
    assert cache_module._checked(files, ["", "", "bad"], pairs, suite) == [
        "",
        "results['t']['m'] is 100.5, outside its benchmark's range",
        "bad",  # (failed to parse: that reason stays)
    ]
    assert cache_module._checked(files, ["", "", ""], pairs, suite)[2] == (
        "results['u']['m'] is 85.0, outside [0, 1] (a percentage?)"
    )
    assert suite_arrays(load_suite("openllm-v2")).scales is None
