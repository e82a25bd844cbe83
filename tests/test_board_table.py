"""``lbnorm export --format table``: the leaderboard as its suite presents it (faces/board_table.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lbnorm.cli import main
from lbnorm.faces.board_table import board_table, round_half_even

SUITE = """
name = "presented"

[board]
average = "benchmarks"
rank_method = "dense"

[[board.columns]]
column = "rank"
name = "#"

[[board.columns]]
column = "average"
name = "Mean score"
digits = 2

[[board.columns]]
column = "B"
name = "Bench B"

[[board.columns]]
column = "A"
name = "Bench A"
digits = 1

[[benchmarks]]
name = "A"
range = [0, 100]
subtasks = [{ name = "a" }]

[[benchmarks]]
name = "B"
range = [0, 100]
subtasks = [{ name = "b" }]
"""

#: The averages are 49.975, 2.675 and 0.125 (A halved: B is 0), each kept exactly.
SCORES = """model,benchmark,subtask,raw_score
x/one,A,a,0.25
x/one,B,b,0.0
x/two,A,a,5.35
x/two,B,b,0.0
x/three,A,a,99.95
x/three,B,b,0.0
x/four,A,a,40.0
"""


@pytest.fixture
def output(tmp_path: Path) -> Path:
    (tmp_path / "suite.toml").write_text(SUITE)
    (tmp_path / "scores.csv").write_text(SCORES)
    out = tmp_path / "out"
    argv = [
        "run",
        str(tmp_path / "scores.csv"),
        "--suite",
        str(tmp_path / "suite.toml"),
    ]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    return out


def test_round_half_even_on_the_binary_value() -> None:
    """numpy's round, as pandas' DataFrame.round publishes: rint(x * 10**d) / 10**d.

    The product is a float itself: 2.675 (2.67499999999999982...) times 100 is
    267.5 exactly in binary, which rounds half to even to 268; 1.005 times 100 is
    100.49999999999999, which rounds down. Python's round(2.675, 2) gives 2.67.
    """
    values = np.array([0.125, 0.375, 2.675, 1.005, 74.035, -0.125, np.nan])
    rounded = round_half_even(values, 2)
    assert rounded.tolist()[:-1] == [0.12, 0.38, 2.68, 1.0, 74.04, -0.12]
    assert np.isnan(rounded[-1])
    assert rounded[:-1].tolist() == (np.rint(values[:-1] * 100) / 100).tolist()
    assert round(2.675, 2) == 2.67  # (not what a pandas-published table shows)


def test_table_as_the_suite_presents_it(
    output: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "board.csv"
    assert main(["export", str(output), "--format", "table", "--out", str(target)]) == 0
    assert capsys.readouterr().out == f"wrote {target} (4 rows, 5 columns)\n"
    assert target.read_text() == (
        "model,#,Mean score,Bench B,Bench A\n"
        "x/three,1,49.98,0.0,100.0\n"  # 4997.5 -> 4998; 999.5 -> 1000
        "x/two,2,2.68,0.0,5.4\n"  # 2.675 * 100 = 267.5 -> 268; 5.35 * 10 = 53.5 -> 54
        "x/one,3,0.12,0.0,0.2\n"  # 12.5 -> 12 and 2.5 -> 2: half to even
        "x/four,,,,40.0\n"  # B missing: no average (exclude), no rank, blanks
    )


def test_parquet_keeps_types_and_can_be_written_again(
    output: Path, tmp_path: Path
) -> None:
    target = tmp_path / "board.parquet"
    for _ in range(2):  # the second write replaces lbnorm's own file
        assert (
            main(["export", str(output), "--format", "table", "--out", str(target)])
            == 0
        )
    table = pq.read_table(target)
    assert table.column_names == ["model", "#", "Mean score", "Bench B", "Bench A"]
    assert table.column("#").to_pylist() == [1, 2, 3, None]
    assert str(table.schema.field("#").type) == "int64"
    assert table.column("Mean score").to_pylist()[:3] == [49.98, 2.68, 0.12]
    assert b"lbnorm" in (table.schema.metadata or {})


def test_a_file_lbnorm_did_not_write_is_left_alone(
    output: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "notes.csv"
    target.write_text("model,mine\n")
    code = main(["export", str(output), "--format", "table", "--out", str(target)])
    assert code == 6
    assert "exists and was not written by lbnorm" in capsys.readouterr().err
    assert target.read_text() == "model,mine\n"


def test_open_llm_options_are_refused_for_a_table(
    output: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "export",
        str(output),
        "--format",
        "table",
        "--out",
        str(tmp_path / "b.csv"),
    ]
    assert main([*argv, "--skip-incomplete"]) == 2
    assert "Hint: leave them out" in capsys.readouterr().err


def test_without_columns_the_leaderboard_is_presented_as_it_is(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    assert main(["run", "--out", str(out), "--quiet", "--no-subtasks"]) == 0
    table = board_table(out)
    assert table.column_names == [
        "model", "rank", "average", "IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO",
    ]  # fmt: skip
    board = pq.read_table(out / "leaderboard.parquet")
    assert table.column("average").equals(board.column("average"))  # no rounding
    assert table.column("model").to_pylist() == board.column("model").to_pylist()
