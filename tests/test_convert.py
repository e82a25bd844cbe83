"""``lbnorm convert``: a results tree (or any inputs) as the one long Parquet table a run reads."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import lbnorm
from lbnorm.cli import main
from lbnorm.core.errors import InputError, OptionsError
from lbnorm.core.options import RunOptions
from lbnorm.pipeline import convert

FIXTURES = Path(__file__).parent / "fixtures"
TREE = FIXTURES / "full_structure"


def test_a_converted_tree_runs_to_the_same_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scores = tmp_path / "scores.parquet"
    assert main(["convert", str(TREE), "--out", str(scores)]) == 0
    assert capsys.readouterr().out == (
        f"wrote {scores} (80 scores from 2 input file(s))\n"
    )
    table = pq.read_table(scores)
    assert table.column_names == [
        "model",
        "precision",
        "revision",
        "chat_template",
        "benchmark",
        "subtask",
        "metric",
        "raw_score",
        "stderr",
        "n_samples",
    ]
    metadata = pq.read_metadata(scores).metadata
    assert metadata[b"lbnorm.file"] == b"scores"
    assert b"results_2024-06-16T14-11-30.000000.json" in metadata[b"lbnorm.inputs"]
    converted, direct = lbnorm.run([scores]), lbnorm.run([TREE])
    for name in ("leaderboard", "benchmarks"):
        assert getattr(converted, name).equals(getattr(direct, name)), name
    subtasks = converted.subtasks.drop(columns="source")
    assert subtasks.equals(direct.subtasks.drop(columns="source"))


def test_a_table_and_the_demo_convert_row_for_row(tmp_path: Path) -> None:
    seeds = FIXTURES / "tables" / "seed_examples.csv"
    assert convert([seeds], out=tmp_path / "seeds.parquet") == (6, 1)
    options = RunOptions(missing="partial")
    assert lbnorm.run([tmp_path / "seeds.parquet"], options=options).leaderboard.equals(
        lbnorm.run([seeds], options=options).leaderboard
    )
    assert convert([lbnorm.demo_path()], out=tmp_path / "demo.pq") == (183_040, 1)


def test_what_convert_refuses_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(OptionsError, match=r"writes Parquet.*\nHint: name the file"):
        convert([TREE], out=tmp_path / "scores.csv")
    mine = tmp_path / "mine.parquet"
    mine.write_bytes(b"PAR1 not lbnorm's PAR1")
    assert main(["convert", str(TREE), "--out", str(mine)]) == 6
    assert "exists and was not written by lbnorm" in capsys.readouterr().err
    assert mine.read_bytes() == b"PAR1 not lbnorm's PAR1"
    out = tmp_path / "out"
    assert main(["run", str(TREE), "--out", str(out), "--quiet"]) == 0
    assert main(["convert", str(TREE), "--out", str(out / "x.parquet")]) == 2
    assert "inside the lbnorm output folder" in capsys.readouterr().err
    assert main(["convert", str(TREE), "--out", str(tmp_path / "s.parquet")]) == 0
    assert main(["convert", str(TREE), "--out", str(tmp_path / "s.parquet")]) == 0


def test_a_tree_is_refused_with_a_few_paths_a_count_and_convert(
    tmp_path: Path,
) -> None:
    """A big tree's refusal names three files and counts the rest, not all of them."""
    golden = Path(__file__).parent / "fixtures" / "golden"
    for path in sorted(golden.glob("*.json")):
        target = tmp_path / "tree" / path.stem.replace("__", "/")
        target.mkdir(parents=True)
        (target / "results_2024-01-01T00-00-00.json").write_bytes(path.read_bytes())
    (tmp_path / "tree" / "README.md").write_text("skipped, not counted\n")
    with pytest.raises(
        InputError,
        match=r"^\S+results_2024-01-01T00-00-00\.json, \S+\.json, \S+\.json and 5 more: "
        r"8 input file\(s\) not in Parquet; the Dask engine reads Parquet only\.\n"
        r"Hint: `lbnorm convert INPUT\.\.\. --out scores\.parquet`",
    ):
        lbnorm.run([tmp_path / "tree"], options=RunOptions(engine="dask"))
