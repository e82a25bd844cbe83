"""The bundled demo: `lbnorm run` alone reproduces the published v2 leaderboard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from lbnorm import demo_path, run
from lbnorm.cli import main

SIX = ["IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO"]
KEYS = ["model", "precision", "revision", "chat_template"]


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    assert main(["run", "--out", str(out), "--quiet"]) == 0
    return out


def test_demo_reproduces_the_published_table(
    demo_out: Path, published_csv: Path
) -> None:
    published = pd.read_csv(published_csv)
    published = published.assign(**{"Model sha": published["Model sha"].fillna("")})
    board = pd.read_parquet(demo_out / "leaderboard.parquet")
    assert len(board) == 4576
    assert board["is_complete"].all()
    merged = published.merge(
        board,
        left_on=["fullname", "Precision", "Model sha", "Chat Template"],
        right_on=KEYS,
        suffixes=("_published", ""),
        validate="one_to_one",
    )
    assert len(merged) == 4576
    for name in SIX:
        assert (
            merged[f"{name} Raw"] - merged[f"{name} Raw_published"]
        ).abs().max() < 1e-9, name
        assert (merged[name] - merged[f"{name}_published"]).abs().max() < 1e-9, name
    assert (merged["average"] - merged["Average ⬆️"]).abs().max() < 1e-9
    # averages equal to 9 decimals tie (kernel.RANK_DECIMALS): the published
    # averages differ from ours by ~1e-13 (rounding in the source file)
    published_order = merged["Average ⬆️"].round(9).rank(ascending=False, method="min")
    assert (merged["rank"] == published_order).all()


def test_demo_output_files_and_provenance(demo_out: Path) -> None:
    manifest = json.loads((demo_out / "manifest.json").read_text())
    assert manifest["suite"]["name"] == "openllm-v2"
    assert len(manifest["suite"]["sha256"]) == 64
    assert manifest["inputs"][0]["path"] == str(demo_path())
    assert manifest["inputs"][0]["rows"] == 4576 * 40
    assert manifest["outputs"]["subtasks.parquet"]["rows"] == 4576 * 40
    assert manifest["outputs"]["benchmarks.parquet"]["rows"] == 4576 * 6
    assert manifest["outputs"]["leaderboard.parquet"]["rows"] == 4576
    assert manifest["created_at"]
    for name in ("subtasks", "benchmarks", "leaderboard"):
        metadata = pq.read_schema(demo_out / f"{name}.parquet").metadata
        assert metadata[b"lbnorm.suite"] == b"openllm-v2"
        assert metadata[b"lbnorm.suite_sha256"].decode() == manifest["suite"]["sha256"]
        assert metadata[b"lbnorm.table"].decode() == name
        assert demo_path().name.encode() in metadata[b"lbnorm.inputs"]
    schema = pq.read_schema(demo_out / "subtasks.parquet")
    assert schema.field("normalized_score").metadata[b"doc"].startswith(b"max(0,")


def test_demo_works_after_install_from_any_directory(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "lbnorm", "run", "--out", "o", "--top", "3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "models     4,497 (4,576 variants), 0 incomplete" in done.stdout
    assert "1  MaziyarPanahi/calme-3.2-instruct-78b" in done.stdout
    assert (tmp_path / "o" / "leaderboard.parquet").is_file()


def test_api_default_is_the_demo() -> None:
    result = run()
    assert len(result.leaderboard) == 4576
    assert result.leaderboard["rank"].iloc[0] == 1
