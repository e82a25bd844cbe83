"""Real results files through the full CLI path reproduce expected.csv to 1e-9."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lbnorm.cli import main


def _cell(frame: pd.DataFrame, row: object, column: str) -> Any:
    """One value, typed loosely: pandas-stubs types `.loc[row, column]` as a union."""
    return frame[column].to_dict()[row]


BENCHMARKS = {
    "ifeval": "IFEval",
    "bbh": "BBH",
    "math": "MATH Lvl 5",
    "gpqa": "GPQA",
    "musr": "MUSR",
    "mmlu_pro": "MMLU-PRO",
}
YI = "01-ai/Yi-34B-Chat/results_2025-02-13T18-27-04.338360.json"
LLAMA = "meta-llama/Meta-Llama-3-8B-Instruct/results_2024-06-16T14-11-30.000000.json"


def _run(inputs: list[Path], out: Path) -> pd.DataFrame:
    assert main(["run", *map(str, inputs), "--out", str(out), "--quiet"]) == 0
    return pd.read_parquet(out / "leaderboard.parquet")


@pytest.fixture(scope="module")
def expected(golden_dir: Path) -> pd.DataFrame:
    return pd.read_csv(golden_dir / "expected.csv")


def test_golden_files_reproduce_expected(
    golden_dir: Path, expected: pd.DataFrame, tmp_path: Path
) -> None:
    board = _run(sorted(golden_dir.glob("*.json")), tmp_path / "out")
    merged = expected.merge(
        board, on="model", suffixes=("_expected", ""), validate="one_to_one"
    )
    assert len(merged) == 8
    for key, name in BENCHMARKS.items():
        assert (merged[f"{name} Raw"] - merged[f"{key}_raw"]).abs().max() < 1e-9, name
        assert (merged[name] - merged[f"{key}_normalized"]).abs().max() < 1e-9, name
    assert (merged["average"] - merged["average_expected"]).abs().max() < 1e-9
    assert sorted(merged["rank"]) == list(range(1, 9))


def test_worked_example_pythia(golden_dir: Path, tmp_path: Path) -> None:
    # ../shared/reference/openllm/README.md: BBH 5.0778 (3.86 unclipped), MUSR 3.2/7.7148/0 -> 3.6383
    _run([golden_dir / "EleutherAI__pythia-2.8b.json"], tmp_path / "out")
    benchmarks = pd.read_parquet(tmp_path / "out" / "benchmarks.parquet").set_index(
        "benchmark"
    )
    subtasks = pd.read_parquet(tmp_path / "out" / "subtasks.parquet").set_index(
        "subtask"
    )
    assert _cell(benchmarks, "BBH", "normalized_score") == pytest.approx(
        5.0778, abs=5e-5
    )
    assert _cell(benchmarks, "BBH", "raw_score") == pytest.approx(0.3224086, abs=5e-8)
    musr = subtasks["normalized_score"].reindex(
        ["murder_mysteries", "object_placements", "team_allocation"]
    )
    assert musr.round(4).tolist() == [3.2, 7.7148, 0.0]
    assert _cell(subtasks, "team_allocation", "is_clipped")
    assert _cell(benchmarks, "MUSR", "normalized_score") == pytest.approx(
        3.6383, abs=5e-5
    )
    assert _cell(benchmarks, "GPQA", "normalized_score") == 0.0
    assert _cell(benchmarks, "IFEval", "normalized_score") == pytest.approx(
        21.7322, abs=5e-5
    )


def test_weak_model_clips_each_bbh_subtask(golden_dir: Path, tmp_path: Path) -> None:
    # Tulu-3-8B-RM: 11 of 24 BBH subtasks below chance; clipped mean 2.65 (unclipped: 0.02)
    _run([golden_dir / "allenai__Llama-3.1-Tulu-3-8B-RM.json"], tmp_path / "out")
    subtasks = pd.read_parquet(tmp_path / "out" / "subtasks.parquet")
    bbh = subtasks[subtasks["benchmark"] == "BBH"]
    assert int(bbh["is_clipped"].sum()) == 11
    assert bbh["normalized_score"].mean() == pytest.approx(2.6496699813735507, abs=1e-9)


def test_full_structure_files(
    full_structure_dir: Path, expected: pd.DataFrame, tmp_path: Path
) -> None:
    board = _run([full_structure_dir], tmp_path / "out")
    assert set(board["precision"]) == {"bfloat16"}
    assert set(board["chat_template"]) == {True}
    merged = expected.merge(
        board,
        on=["model", "revision"],
        suffixes=("_expected", ""),
        validate="one_to_one",
    )
    assert len(merged) == 2
    for key, name in BENCHMARKS.items():
        assert (merged[name] - merged[f"{key}_normalized"]).abs().max() < 1e-9, name
    assert (merged["average"] - merged["average_expected"]).abs().max() < 1e-9
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert all(
        entry["n_ignored"] > 0 for entry in manifest["inputs"]
    )  # leaderboard, arc, loose...


def test_stale_groups_entry_is_ignored(
    full_structure_dir: Path, expected: pd.DataFrame, tmp_path: Path
) -> None:
    document = json.loads((full_structure_dir / YI).read_text())
    stale = document["groups"]["leaderboard_math_hard"]["exact_match,none"]
    board = _run([full_structure_dir / YI], tmp_path / "out")
    yi = expected.set_index("model").loc["01-ai/Yi-34B-Chat"]
    assert board["MATH Lvl 5 Raw"].item() == pytest.approx(yi["math_raw"], abs=1e-12)
    assert abs(board["MATH Lvl 5 Raw"].item() - stale) > 0.01


def test_missing_group_values_are_recomputed(
    full_structure_dir: Path, expected: pd.DataFrame, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(full_structure_dir, tree)
    for relative in (YI, LLAMA):
        path = tree / relative
        document = json.loads(path.read_text())
        for group in ("leaderboard_gpqa", "leaderboard_math_hard"):
            document["results"].pop(group)
            document["groups"].pop(group, None)
        path.write_text(json.dumps(document))
    board = _run([tree], tmp_path / "out").set_index("model")
    reference = expected.set_index("model")
    for model in board.index:
        assert _cell(board, model, "GPQA Raw") == pytest.approx(
            _cell(reference, model, "gpqa_raw"), abs=1e-12
        )
        assert _cell(board, model, "GPQA") == pytest.approx(
            _cell(reference, model, "gpqa_normalized"), abs=1e-9
        )
        assert _cell(board, model, "MATH Lvl 5") == pytest.approx(
            _cell(reference, model, "math_normalized"), abs=1e-9
        )


def test_newest_run_wins_and_superseded_files_are_reported(
    full_structure_dir: Path, expected: pd.DataFrame, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(full_structure_dir, tree)
    newest = tree / YI
    document = json.loads(newest.read_text())
    for entry in document["results"].values():
        for metric, value in list(entry.items()):
            if isinstance(value, float) and "stderr" not in metric:
                entry[metric] = value / 2
    older = newest.with_name("results_2024-06-16T10-00-00.000000.json")
    older.write_text(json.dumps(document))  # an older re-run with other scores
    board = _run([tree], tmp_path / "out").set_index("model")
    reference = expected.set_index("model")
    assert _cell(board, "01-ai/Yi-34B-Chat", "average") == pytest.approx(
        _cell(reference, "01-ai/Yi-34B-Chat", "average"), abs=1e-9
    )
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    superseded = {
        Path(i["path"]).name: i for i in manifest["inputs"] if i["superseded_by"]
    }
    assert list(superseded) == [older.name]
    assert superseded[older.name]["superseded_by"] == str(newest)
    assert superseded[older.name]["rows"] == 0
    assert manifest["counts"]["superseded_files"] == 1

    # and the other way round: a newer file with other scores wins
    newer = newest.with_name("results_2025-03-01T00-00-00.000000.json")
    older.rename(newer)
    board = _run([tree], tmp_path / "out2").set_index("model")
    assert (
        _cell(board, "01-ai/Yi-34B-Chat", "average")
        < _cell(reference, "01-ai/Yi-34B-Chat", "average") - 1
    )
