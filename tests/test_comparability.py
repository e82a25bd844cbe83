"""Comparability: results files run with other settings than the majority are named."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from lbnorm.cli import main
from lbnorm.core.errors import OptionsError
from lbnorm.core.options import RunOptions
from lbnorm.readers.comparability import (
    SETTINGS,
    RunSettings,
    check_comparability,
    settings_text,
    task_settings,
)
from lbnorm.suites import load_suite

YI = "01-ai/Yi-34B-Chat/results_2025-02-13T18-27-04.338360.json"
BBH = "leaderboard_bbh_boolean_expressions"


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _file_settings(data: bytes, tasks: list[str]) -> list[dict[str, str | None]]:
    """A file's settings for `tasks` as text, from json's reading of the whole file."""
    document = json.loads(data)
    counts = document.get("n-samples", {})  # each score's: effective, else original
    sizes = [
        counts.get(task, {}).get("effective", counts.get(task, {}).get("original"))
        for task in tasks
    ]
    found = task_settings(document, tasks, sizes)
    return [dict(zip(SETTINGS, settings_text(row), strict=True)) for row in found]


@pytest.fixture
def tree(tmp_path: Path, full_structure_dir: Path) -> Path:
    """The full-structure tree, a third variant (a copy of Yi's file), and Yi changed."""
    root = tmp_path / "tree"
    shutil.copytree(full_structure_dir, root)
    yi = _json(root / YI)
    copy = root / "x-org" / "copy" / Path(YI).name
    copy.parent.mkdir(parents=True)
    copy.write_text(json.dumps({**yi, "model_name": "x-org/copy"}))
    yi["configs"][BBH]["num_fewshot"] = 0  # as a run with 0 shots records it
    yi["n-shot"][BBH] = 0
    yi["n-samples"]["leaderboard_gpqa_main"]["effective"] = 100
    yi["git_hash"] = "deadbee"
    (root / YI).write_text(json.dumps(yi))
    return root


def test_settings_are_read_as_the_file_holds_them(full_structure_dir: Path) -> None:
    path = full_structure_dir / YI
    document = _json(path)
    tasks = [BBH, "leaderboard_gpqa_main", "leaderboard_ifeval"]
    found = _file_settings(path.read_bytes(), tasks)
    assert [set(row) for row in found] == [set(SETTINGS)] * 3
    for task, row in zip(tasks, found, strict=True):  # json's reading, independently
        assert row["num_fewshot"] == str(document["configs"][task]["num_fewshot"])
        assert row["n_samples"] == str(document["n-samples"][task]["effective"])
        assert row["version"] == str(int(document["versions"][task]))
        assert row["harness"] == document["git_hash"] == "8f1dc26"
        assert row["task_hash"] is None  # lm-eval's hashes are per model: not compared
        assert row["limit"] is None
    assert found[0]["num_fewshot"] == "3"
    assert found[1]["n_samples"] == "448"


def test_lighteval_and_v1_settings(fixtures: Path) -> None:
    lighteval = next((fixtures / "openllm_v1" / "lighteval").rglob("*.json"))
    row = _file_settings(lighteval.read_bytes(), ["lighteval|gsm8k|5"])[0]
    sha = _json(lighteval)["config_general"]["lighteval_sha"]
    assert (row["harness"], row["num_fewshot"]) == (sha, "5")
    old = next((fixtures / "openllm_v1" / "tree").rglob("results_2023-08-19*.json"))
    row = _file_settings(old.read_bytes(), ["harness|arc:challenge|25"])[0]
    summary = _json(old)["summary_tasks"]["harness|arc:challenge|25"]
    assert row["task_hash"] == summary["hashes"]["hash_examples"]
    assert row["num_fewshot"] == "25"  # from the key: this file gives no count


def test_a_run_names_the_variants_that_differ(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", str(tree), "--comparability", "--out", str(out)]) == 0
    summary = capsys.readouterr().out
    assert (
        "not comparable: BBH num_fewshot differs from the majority for 1 variant(s): "
        "01-ai/Yi-34B-Chat [bfloat16]: 0 (majority 3) on 1 subtask (boolean_expressions)"
    ) in summary
    assert "GPQA n_samples differs" in summary
    assert "100 (majority 448) on 1 subtask (main)" in summary
    assert "BBH harness differs" in summary
    manifest = _json(out / "manifest.json")
    assert manifest["options"]["comparability"] == "report"
    notes = {
        Path(i["path"]).parent.name: i["comparability"] for i in manifest["inputs"]
    }
    assert notes["copy"] == []
    assert notes["Meta-Llama-3-8B-Instruct"] == []
    assert {
        "benchmark": "BBH",
        "subtask": "boolean_expressions",
        "setting": "num_fewshot",
        "value": "0",
        "majority": "3",
    } in notes["Yi-34B-Chat"]
    settings = {(n["benchmark"], n["setting"]) for n in notes["Yi-34B-Chat"]}
    assert ("GPQA", "n_samples") in settings
    assert ("MUSR", "num_fewshot") not in settings
    # the scores themselves: the newest-result rule is unchanged
    plain = tmp_path / "plain"
    assert main(["run", str(tree), "--no-comparability", "--out", str(plain)]) == 0
    assert (out / "benchmarks.parquet").read_bytes() == (
        plain / "benchmarks.parquet"
    ).read_bytes()
    assert "comparability" not in _json(plain / "manifest.json")["options"]
    default = tmp_path / "default"  # on unless --no-comparability
    assert main(["run", str(tree), "--out", str(default), "--quiet"]) == 0
    assert _json(default / "manifest.json")["options"]["comparability"] == "report"


def test_health_has_a_comparability_check(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", str(tree), "--comparability", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["health", str(out), "--out", str(tmp_path / "health")]) == 7
    text = capsys.readouterr().out
    assert "## Comparability (40 subtasks checked, 40 with variants run" in text
    assert "| GPQA | main | 1 | harness, n_samples |" in text
    health = pd.read_parquet(tmp_path / "health" / "health.parquet")
    rows = health[health["level"] == "comparability"]
    assert len(rows) == 40
    assert set(rows["status"]) == {"fail"}
    plain = tmp_path / "plain"
    assert main(["run", str(tree), "--no-comparability", "--out", str(plain)]) == 0
    capsys.readouterr()
    assert main(["health", str(plain)]) == 0  # not compared: no such rows
    assert "Comparability" not in capsys.readouterr().out


def test_the_real_files_are_comparable(
    full_structure_dir: Path,
    golden_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "tree"
    assert (
        main(
            [
                "run",
                str(full_structure_dir),
                "--strict-comparability",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "not comparable" not in capsys.readouterr().out
    assert main(["health", str(out)]) == 0
    text = capsys.readouterr().out
    assert "## Comparability (40 subtasks checked, 0 with variants" in text
    files = [str(p) for p in sorted(golden_dir.glob("*.json"))]
    golden = tmp_path / "golden"  # excerpts: no settings kept, nothing to compare
    assert main(["run", *files, "--strict-comparability", "--out", str(golden)]) == 0
    inputs = _json(golden / "manifest.json")["inputs"]
    assert all(entry["comparability"] == [] for entry in inputs)


def test_strict_refuses_and_writes_nothing(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", str(tree), "--strict-comparability", "--out", str(out)]) == 4
    err = capsys.readouterr().err
    assert "1 variant(s) were run with settings that differ from the majority's" in err
    assert "Hint: re-run those tasks" in err
    assert not out.exists()
    with pytest.raises(OptionsError, match=r"(?s)comparability must be one of.*Hint"):
        RunOptions(comparability="loud")  # type: ignore[arg-type]


def _files(shots: dict[str, int | None]) -> tuple[pa.Table, RunSettings]:
    """One results file per model recording `shots` for BBH (None: no count recorded)."""
    suite = load_suite("openllm-v2")
    at = [s.task for b in suite.benchmarks for s in b.subtasks].index(BBH)
    documents = [
        {"configs": {BBH: {} if n is None else {"num_fewshot": n}}, "git_hash": "abc"}
        for n in shots.values()
    ]
    n = len(shots)
    files = pa.table(
        {
            "path": [f"{name}.json" for name in shots],
            "model": list(shots),
            "precision": [""] * n,
            "revision": [""] * n,
            "chat_template": [False] * n,
        }
    )
    settings = RunSettings.from_files(
        [[task_settings(d, [BBH], [None])[0] for d in documents]]
    )
    return files, replace(
        settings, file=np.arange(n), subtask=np.full(n, at, dtype=np.int64)
    )


def _sliced(
    files: tuple[pa.Table, RunSettings], start: int, length: int
) -> tuple[pa.Table, RunSettings]:
    table, settings = files
    rows = np.arange(start, start + length)
    return table.slice(start, length), replace(
        settings,
        code=settings.code[rows],
        file=np.arange(length),
        subtask=settings.subtask[rows],
    )


def test_majority_and_its_tie_rule() -> None:
    suite = load_suite("openllm-v2")
    files = _files({"a": 3, "b": 3, "c": 5, "d": None})
    found = check_comparability(*files, suite)
    rows = found.differences.to_pylist()
    assert [(r["model"], r["setting"], r["value"], r["majority"]) for r in rows] == [
        ("c", "num_fewshot", "5", "3"),
        ("d", "num_fewshot", None, "3"),  # recording no count is a setting too
    ]
    assert [len(notes) for notes in found.notes.to_pylist()] == [0, 0, 1, 1]
    tie = check_comparability(*_sliced(files, 1, 2), suite)
    assert [r["model"] for r in tie.differences.to_pylist()] == ["c"]  # 3 < 5 wins
    tie = check_comparability(*_sliced(files, 2, 2), suite)
    assert [r["model"] for r in tie.differences.to_pylist()] == ["d"]  # null last
    assert "d: null (majority 5) on 1 subtask" in tie.warnings[0]
    alike = check_comparability(*_files({"a": None, "b": None}), suite)
    assert alike.differences.num_rows == 0  # null on both sides is the same


@pytest.mark.parametrize(
    ("key", "value", "setting"),
    [
        ("limit", 100, "limit"),
        ("system_instruction_sha", "5f3a", "system_instruction"),
        ("fewshot_as_multiturn", True, "fewshot_as_multiturn"),
    ],
)
@pytest.mark.parametrize("others", ["null", "absent"])
def test_a_setting_the_others_record_as_null_or_not_at_all_is_named(
    tree: Path, tmp_path: Path, key: str, value: object, setting: str, others: str
) -> None:
    """One file sets it; the other three record null, or lack the key."""
    paths = sorted(tree.rglob("results_*.json"))
    for path in paths:
        document = _json(path)
        place = document["config"] if key == "limit" else document
        if path.parent.name == "copy":
            place[key] = value
        elif others == "null":
            place[key] = None
        else:
            place.pop(key, None)
        path.write_text(json.dumps(document))
    out = tmp_path / "out"
    read = run_to_manifest(tree, out)
    notes = {Path(i["path"]).parent.name: i["comparability"] for i in read["inputs"]}
    shown = json.dumps(value) if not isinstance(value, str) else value
    assert {(n["setting"], n["value"], n["majority"]) for n in notes["copy"]} == {
        (setting, shown, None)
    }
    assert notes["Meta-Llama-3-8B-Instruct"] == []


def run_to_manifest(tree: Path, out: Path) -> dict[str, Any]:
    """A run over `tree` comparing settings; its manifest."""
    assert (
        main(["run", str(tree), "--comparability", "--out", str(out), "--quiet"]) == 0
    )
    manifest: dict[str, Any] = _json(out / "manifest.json")
    return manifest


def test_the_warning_counts_the_variants_that_differ(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run with --limit 100 differs from each subtask's own majority: one variant."""
    yi = _json(tree / YI)
    for task in ("leaderboard_gpqa_diamond", "leaderboard_gpqa_extended"):
        yi["n-samples"][task]["effective"] = 100
    (tree / YI).write_text(json.dumps(yi))
    assert (
        main(["run", str(tree), "--comparability", "--out", str(tmp_path / "o")]) == 0
    )
    (line,) = [
        text
        for text in capsys.readouterr().out.splitlines()
        if "GPQA n_samples differs" in text
    ]
    assert "for 1 variant(s): 01-ai/Yi-34B-Chat [bfloat16]: " in line
    for majority, subtask in ((198, "diamond"), (546, "extended"), (448, "main")):
        assert f"100 (majority {majority}) on 1 subtask ({subtask})" in line


def test_comparing_reads_no_file_again(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lbnorm.core.files import read_bytes

    reads: list[Path] = []

    def counted(path: Path, **kwargs: Any) -> bytes:
        reads.append(Path(path))
        return read_bytes(path, **kwargs)

    monkeypatch.setattr("lbnorm.readers.catalog.read_bytes", counted)
    manifest = run_to_manifest(tree, tmp_path / "out")
    assert sorted(reads) == sorted(tree.rglob("results_*.json"))  # each once
    assert any(entry["comparability"] for entry in manifest["inputs"])


def test_the_parse_cache_keeps_the_settings(tree: Path, tmp_path: Path) -> None:
    plain = run_to_manifest(tree, tmp_path / "plain")
    for _ in range(2):  # parsed, then taken from the cache
        out = tmp_path / "cached"
        code = main(
            [
                "run",
                str(tree),
                "--comparability",
                "--cache",
                str(tmp_path / "cache"),
                "--out",
                str(out),
                "--quiet",
            ]
        )
        assert code == 0
        cached = _json(out / "manifest.json")
        assert [i["comparability"] for i in cached["inputs"]] == [
            i["comparability"] for i in plain["inputs"]
        ]


def test_the_parse_reads_the_settings_json_reads(
    full_structure_dir: Path, tmp_path: Path
) -> None:
    """The parser's one pass, msgspec or json (a NaN sends a file to json), agrees."""
    from lbnorm.readers.harness import parse_results_file, subtask_columns

    columns = subtask_columns(load_suite("openllm-v2"))
    pairs = list(zip(columns["task"], columns["metric"], strict=True))
    path = full_structure_dir / YI
    nan = tmp_path / "org" / "m" / Path(YI).name
    nan.parent.mkdir(parents=True)
    nan.write_text(path.read_text().replace('"date":', '"nan_here": NaN, "date":', 1))
    for file in (path, nan):
        data = file.read_bytes()
        parsed = parse_results_file(file, data, pairs)
        tasks = [pairs[at][0] for at in parsed.rows["subtask_index"]]
        expected = [tuple(row.values()) for row in _file_settings(data, tasks)]
        assert [settings_text(row) for row in parsed.rows["settings"]] == expected
        assert expected[0][SETTINGS.index("harness")] == "8f1dc26"


def test_few_shot_counts_from_n_shot_else_configs_and_odd_shapes() -> None:
    document = {
        "n-shot": {"a": 5},
        "configs": {"a": {"num_fewshot": 1}, "b": {"num_fewshot": 2.0}, "c": None},
        "versions": {"a": 1.0, "b": "2"},
        "n-samples": {"a": {"effective": 10, "original": 20}},
        "config": {"limit": 10.0},
        "fewshot_as_multiturn": True,
    }
    data = json.dumps(document).encode()
    found = _file_settings(data, ["a", "b", "c"])
    assert [row["num_fewshot"] for row in found] == ["5", "2", None]
    assert [row["version"] for row in found] == ["1", "2", None]
    assert [row["n_samples"] for row in found] == ["10", None, None]
    assert {row["limit"] for row in found} == {"10.0"}
    assert {row["fewshot_as_multiturn"] for row in found} == {"true"}
    odd = json.dumps({**document, "configs": [1, 2]}).encode()
    assert [r["num_fewshot"] for r in _file_settings(odd, ["a", "b"])] == [
        "5",
        None,
    ]
    # a lighteval summary that is not an object of objects: its settings read as
    # not recorded, the scores as always
    from lbnorm.readers.harness import parse_results_file

    results = {"results": {"t": {"acc": 0.5}}, "model_name": "m", "git_hash": "ab"}
    for summary in ({"t": 3}, {"t": {"hashes": {"hash_examples": "h"}}}):
        text = json.dumps({**results, "summary_tasks": summary}).encode()
        parsed = parse_results_file(Path("r.json"), text, [("t", "acc")])
        assert parsed.rows["raw_score"] == [0.5]
        (row,) = parsed.rows["settings"]
        named = dict(zip(SETTINGS, row, strict=True))
        assert named["task_hash"] == (None if summary["t"] == 3 else "h")
        assert named["harness"] == (None if summary["t"] == 3 else "ab")
