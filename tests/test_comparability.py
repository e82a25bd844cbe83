"""Comparability: results files run with other settings than the majority are named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from lbnorm.cli import main
from lbnorm.core.errors import InputError, OptionsError
from lbnorm.core.options import RunOptions
from lbnorm.readers.comparability import SETTINGS, check_comparability, file_settings
from lbnorm.suites import load_suite

YI = "01-ai/Yi-34B-Chat/results_2025-02-13T18-27-04.338360.json"
BBH = "leaderboard_bbh_boolean_expressions"


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


@pytest.fixture
def tree(tmp_path: Path, full_structure_dir: Path) -> Path:
    """The full-structure tree, a third variant (a copy of Yi's file), and Yi changed."""
    root = tmp_path / "tree"
    shutil.copytree(full_structure_dir, root)
    yi = _json(root / YI)
    copy = root / "x-org" / "copy" / Path(YI).name
    copy.parent.mkdir(parents=True)
    copy.write_text(json.dumps({**yi, "model_name": "x-org/copy"}))
    yi["configs"][BBH]["num_fewshot"] = 0
    yi["n-samples"]["leaderboard_gpqa_main"]["effective"] = 100
    yi["git_hash"] = "deadbee"
    (root / YI).write_text(json.dumps(yi))
    return root


def test_settings_are_read_as_the_file_holds_them(full_structure_dir: Path) -> None:
    path = full_structure_dir / YI
    document = _json(path)
    tasks = [BBH, "leaderboard_gpqa_main", "leaderboard_ifeval"]
    found = file_settings(path, path.read_bytes(), tasks)
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
    row = file_settings(lighteval, lighteval.read_bytes(), ["lighteval|gsm8k|5"])[0]
    sha = _json(lighteval)["config_general"]["lighteval_sha"]
    assert (row["harness"], row["num_fewshot"]) == (sha, "5")
    old = next((fixtures / "openllm_v1" / "tree").rglob("results_2023-08-19*.json"))
    row = file_settings(old, old.read_bytes(), ["harness|arc:challenge|25"])[0]
    summary = _json(old)["summary_tasks"]["harness|arc:challenge|25"]
    assert row["task_hash"] == summary["hashes"]["hash_examples"]
    assert row["num_fewshot"] == "25"  # from the key: this file gives no count
    with pytest.raises(InputError, match=r"(?s)expected a JSON object.*Hint"):
        file_settings(old, b"[1, 2]", ["x"])


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
    assert main(["run", str(tree), "--out", str(plain)]) == 0
    assert (out / "benchmarks.parquet").read_bytes() == (
        plain / "benchmarks.parquet"
    ).read_bytes()
    assert "comparability" not in _json(plain / "manifest.json")["options"]


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
    assert main(["run", str(tree), "--out", str(plain)]) == 0
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


def test_majority_and_its_tie_rule(tmp_path: Path) -> None:
    suite = load_suite("openllm-v2")
    paths = []
    for name, shots in (("a", 3), ("b", 3), ("c", 5), ("d", None)):
        path = tmp_path / f"{name}.json"
        config = {} if shots is None else {"num_fewshot": shots}
        path.write_text(json.dumps({"configs": {BBH: config}, "git_hash": "abc"}))
        paths.append(str(path))
    files = pa.table(
        {
            "path": paths,
            "model": ["a", "b", "c", "d"],
            "precision": [""] * 4,
            "revision": [""] * 4,
            "chat_template": [False] * 4,
            "tasks": [[BBH]] * 4,
        }
    )
    found = check_comparability(files, suite, read=Path.read_bytes)
    rows = found.differences.to_pylist()
    assert [(r["model"], r["setting"], r["value"], r["majority"]) for r in rows] == [
        ("c", "num_fewshot", "5", "3")
    ]
    assert (rows[0]["n_variants"], rows[0]["n_majority"]) == (3, 2)  # d says nothing
    assert [len(notes) for notes in found.notes.to_pylist()] == [0, 0, 1, 0]
    tie = check_comparability(files.slice(1, 2), suite, read=Path.read_bytes)
    assert [r["model"] for r in tie.differences.to_pylist()] == ["c"]  # 3 < 5 wins
