"""A duplicate score names the input that gave it first (issue 14, point 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import ValidationError, run
from lbnorm.cli import main
from lbnorm.core.options import RunOptions

HEADER = "model,benchmark,subtask,raw_score\n"


def _csv(path: Path, *rows: str) -> Path:
    path.write_text(HEADER + "".join(f"{row}\n" for row in rows))
    return path


def test_two_tables_name_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _csv(tmp_path / "first.csv", "m,GPQA,main,0.5")
    second = _csv(tmp_path / "second.csv", "x,GPQA,main,0.5", "m,GPQA,main,0.6")
    out = tmp_path / "out"
    code = main(["run", str(first), str(second), "--out", str(out), "--quiet"])
    assert code == 5
    assert (
        f"- duplicate_score: {second} line 3 (m / GPQA / main: also given by {first})"
        in (capsys.readouterr().err)
    )
    assert not out.exists()
    with pytest.raises(ValidationError) as caught:
        run([first, second], options=RunOptions(missing="partial"))
    failures = caught.value.failures
    assert failures["value"].tolist() == [f"also given by {first}"]
    assert failures["source"].tolist() == [str(second)]


def test_a_results_file_and_a_table(golden_dir: Path, tmp_path: Path) -> None:
    """The issue's case: a score in a CSV that a results file gives too (tables are read first)."""
    results = golden_dir / "Amu__t1-3B.json"
    model = json.loads(results.read_text())["config"]["model_name"]
    table = _csv(tmp_path / "extra.csv", f"{model},MUSR,murder_mysteries,0.5")
    with pytest.raises(ValidationError, match=rf"also given by {table}\)") as caught:
        run([results, table], options=RunOptions(missing="partial"))
    assert caught.value.failures["source"].tolist() == [str(results)]


def test_two_parts_of_one_parquet_file(tmp_path: Path) -> None:
    path = tmp_path / "scores.parquet"
    scores = pa.table(
        {
            "model": ["m", "n", "m"],
            "benchmark": ["GPQA"] * 3,
            "subtask": ["main"] * 3,
            "raw_score": [0.5, 0.5, 0.6],
        }
    )
    pq.write_table(scores, path, row_group_size=1)  # three parts, read in turn
    with pytest.raises(
        ValidationError, match="also given by an earlier part of this file"
    ):
        run([path], options=RunOptions(missing="partial"))


def test_repeats_inside_one_file_keep_their_lines(tmp_path: Path) -> None:
    path = _csv(tmp_path / "one.csv", "m,GPQA,main,0.5", "m,GPQA,main,0.6")
    with pytest.raises(ValidationError) as caught:
        run([path], options=RunOptions(missing="partial"))
    assert set(caught.value.failures["value"]) == {"also at line 2", "also at line 3"}
