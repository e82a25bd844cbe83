"""Untrusted names: model, task and file names come from outside.

Names like ``../../etc``, absolute paths, NUL bytes, 100,000-character names and
Unicode look-alikes must round-trip unchanged through every output, and nothing
lbnorm writes may land outside the output directory (beside it: only its lock
file). No code in the package evaluates, unpickles or YAML-loads anything.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from source_trees import nodes, package_modules

from lbnorm import run
from lbnorm.cli import main

FIXTURES = Path(__file__).parent / "fixtures"

NAMES = [
    "../../etc/passwd",
    "/etc/passwd",
    "..",
    "~/.ssh/id_rsa",
    "C:\\Windows\\System32\\config",
    "nul\x00byte",
    "x" * 100_000,
    "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Meta-L\u043b\u0430ma-3-8B",  # Cyrillic look-alikes
    "meta-llama/Meta-Llama-3-8\u0412",  # Cyrillic capital ve for B
    unicodedata.normalize("NFC", "org/caf\u00e9"),
    unicodedata.normalize("NFD", "org/caf\u00e9"),  # same glyphs, other code points
    "\u202eexe.txt",  # right-to-left override
    "line\nbreak\r\nand\ttab",
    "$(rm -rf ~); `id`",
    "'; DROP TABLE scores; --",
    "%s%n%x{0}",
    "\U0001f999/llama",
    "\u540d\u524d/\u30e2\u30c7\u30eb",
    "  padded  ",
    "\ufeffbom",
    "null",
    "NA",
]


def _tree(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        if path.is_file()
        else "<dir>"
        for path in sorted(folder.rglob("*"))
    }


def _outputs_hold_exactly(out: Path, column: str, names: list[str]) -> None:
    for table in ("subtasks", "benchmarks", "leaderboard"):
        found = pq.read_table(out / f"{table}.parquet").column(column).to_pylist()
        assert sorted(set(found)) == sorted(names), table


def _score_rows(names: list[str]) -> pd.DataFrame:
    """One MMLU-PRO score per name, the name also as revision and precision."""
    return pd.DataFrame(
        {
            "model": names,
            "precision": names,
            "revision": names,
            "benchmark": "MMLU-PRO",
            "subtask": "mmlu_pro",
            "raw_score": [0.1 + 0.8 * i / len(names) for i in range(len(names))],
        }
    )


@pytest.mark.parametrize("suffix", ["csv", "jsonl", "parquet"])
def test_names_in_tables_round_trip_and_stay_inside(
    suffix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    path = inputs / f"scores.{suffix}"
    rows = _score_rows(NAMES)
    if suffix == "csv":
        rows.to_csv(path, index=False)
    elif suffix == "jsonl":
        rows.to_json(path, orient="records", lines=True)
    else:
        pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # relative writes would land here
    before = _tree(tmp_path)
    assert main(["run", str(path), "--out", "out", "--quiet"]) == 0
    created = set(_tree(tmp_path)) - set(before)
    assert created == {"work/out"} | {
        f"work/out/{path.name}" for path in (work / "out").iterdir()
    }
    assert sorted(path.name for path in (work / "out").iterdir()) == [
        "benchmarks.parquet",
        "leaderboard.parquet",
        "manifest.json",
        "subtasks.parquet",
    ]
    _outputs_hold_exactly(work / "out", "model", NAMES)
    for column in ("precision", "revision"):
        assert sorted(
            pq.read_table(work / "out" / "subtasks.parquet").column(column).to_pylist()
        ) == sorted(NAMES)
    assert len(NAMES) == len(set(NAMES))  # look-alikes stay distinct variants
    assert pq.read_table(work / "out" / "leaderboard.parquet").num_rows == len(NAMES)


def test_names_from_results_files_and_their_paths_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Model names from inside the file and from the <org>/<model>/ directory names."""
    document = json.loads((FIXTURES / "golden" / "Amu__t1-3B.json").read_text())
    tree = tmp_path / "tree"
    from_file = [name for name in NAMES if len(name) < 200]
    for index, name in enumerate(from_file):
        folder = tree / "named" / f"model-{index}"
        folder.mkdir(parents=True)
        (folder / "results_2025-01-01T00-00-00.000000.json").write_text(
            json.dumps({**document, "config": {"model_name": name}})
        )
    # Directory names can hold anything but "/" and NUL, and 255 bytes.
    from_path = [
        "..dotted/\u043c\u043e\u0434\u0435\u043b\u044c",  # Cyrillic
        "org with spaces/model\nwith newline",
        "-rf/--out=elsewhere",
        "\u202eorg/" + "y" * 250,
        unicodedata.normalize("NFD", "caf\u00e9/m\u00f6del"),
    ]
    without_name = {key: value for key, value in document.items() if key != "config"}
    for name in from_path:
        folder = tree / "pathed" / name
        folder.mkdir(parents=True)
        (folder / "results_2025-01-01T00-00-00.000000.json").write_text(
            json.dumps(without_name)
        )
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = _tree(tmp_path)
    assert main(["run", str(tree), "--out", "out", "--quiet"]) == 0
    created = set(_tree(tmp_path)) - set(before)
    assert {entry.split("/")[1] for entry in created} == {"out"}
    _outputs_hold_exactly(work / "out", "model", from_file + from_path)
    files = sorted(str(path) for path in tree.rglob("results_*.json"))
    manifest = json.loads((work / "out" / "manifest.json").read_text())
    assert sorted(entry["path"] for entry in manifest["inputs"]) == files
    metadata = pq.read_metadata(work / "out" / "subtasks.parquet").metadata
    assert (
        sorted(entry["path"] for entry in json.loads(metadata[b"lbnorm.inputs"]))
        == files
    )
    assert (
        sorted(
            set(
                pq.read_table(work / "out" / "subtasks.parquet")
                .column("source")
                .to_pylist()
            )
        )
        == files
    )


def test_task_and_benchmark_names_from_a_suite_round_trip(tmp_path: Path) -> None:
    """A suite's names become output values and leaderboard column names."""
    benchmark, subtask, task = "../../etc", "a\x00b/..", "/abs/task\u202e"
    suite = tmp_path / "suite.toml"
    suite.write_text(
        'name = "hostile"\n[[benchmarks]]\nname = "../../etc"\n'
        'subtasks = [{ name = "a\\u0000b/..", task = "/abs/task\\u202e", metric = "acc,none", num_choices = 4 }]\n'
    )
    results = tmp_path / "results_2025-01-01T00-00-00.000000.json"
    results.write_text(
        json.dumps({"results": {task: {"acc,none": 0.625}}, "model_name": "../m"})
    )
    out = tmp_path / "out"
    result = run([results], suite=suite, out=out)
    assert result.subtasks["subtask"].tolist() == [subtask]
    subtasks = pq.read_table(out / "subtasks.parquet").to_pylist()
    assert [(row["benchmark"], row["subtask"], row["model"]) for row in subtasks] == [
        (benchmark, subtask, "../m")
    ]
    assert subtasks[0]["normalized_score"] == pytest.approx(50.0)
    board = pq.read_table(out / "leaderboard.parquet")
    assert {benchmark, f"{benchmark} Raw"} <= set(board.column_names)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        ["out", "results_2025-01-01T00-00-00.000000.json", "suite.toml"]
    )


def test_paths_that_are_not_utf8_are_refused_clearly(tmp_path: Path) -> None:
    """A name of raw bytes cannot be recorded as text: a clear error, not a crash."""
    table = tmp_path / os.fsdecode(
        b"scores\xff.csv"
    )  # surrogate-escaped, as Python sees it
    shutil.copy(FIXTURES / "tables" / "seed_examples.csv", table)
    folder = tmp_path / "tree" / os.fsdecode(b"caf\xe9") / "model"
    folder.mkdir(parents=True)
    results = FIXTURES / "full_structure" / "01-ai" / "Yi-34B-Chat"
    shutil.copy(next(results.glob("results_*.json")), folder)
    out = tmp_path / "out"
    run([FIXTURES / "golden" / "Amu__t1-3B.json"], out=out)  # a previous output
    before = _tree(out)
    for argument, shown in ((table, "\\xff"), (tmp_path / "tree", "\\xe9")):
        command = [
            sys.executable,
            "-m",
            "lbnorm",
            "run",
            str(argument),
            "--out",
            str(out),
        ]
        process = subprocess.run(command, capture_output=True, check=False, timeout=120)
        stderr = process.stderr.decode()
        assert process.returncode == 4, stderr
        assert "the path is not valid UTF-8" in stderr
        assert shown in stderr  # the bytes are shown, escaped
        assert "Hint: rename the file or directory to a UTF-8 name." in stderr
        assert "Traceback" not in stderr
        assert _tree(out) == before


def test_no_eval_pickle_or_code_executing_loaders() -> None:
    forbidden_calls = {"eval", "exec", "compile", "__import__", "execfile"}
    forbidden_modules = {
        "pickle",
        "cPickle",
        "dill",
        "cloudpickle",
        "marshal",
        "shelve",
        "yaml",
        "jsonpickle",
        "joblib",
    }
    forbidden_attributes = {
        "read_pickle",
        "to_pickle",
        "load_pickle",
        "unsafe_load",
        "full_load",
    }
    files = package_modules()
    assert len(files) > 10
    for path in files:
        for node in nodes(path.read_text(encoding="utf-8")):
            if isinstance(node, ast.Import):
                assert (
                    not {alias.name.split(".")[0] for alias in node.names}
                    & forbidden_modules
                ), path
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] not in forbidden_modules, path
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in forbidden_calls, (path, node.lineno)
            elif isinstance(node, ast.Attribute):
                assert node.attr not in forbidden_attributes, (path, node.lineno)
