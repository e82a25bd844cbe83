"""Paired comparisons under a suite's own rules (issue 37 on issue 41's comparisons).

A benchmark on a range scores ``(m - lo - b w) / (1 - b) x 100 / w``, so its paired
difference and error carry the same factor (checked against the leaderboard the
kernel computed, and against numpy on the table's pivot); the board's
``average = "subtasks"`` weighs each benchmark by its subtasks; a statistic, a
benchmark of per-instance rules and an average the board does not have are left
out and said so; a benchmark's own ``missing`` policy decides where it is compared.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.paired import paired_subtask

import lbnorm
from lbnorm.analysis.paired import compare_paired
from lbnorm.cli import main
from lbnorm.core.errors import OptionsError
from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.engines.paired import level_statistics, pair_moments, suite_levels
from lbnorm.readers.items import Items, ItemSource, SubtaskItems, read_items
from lbnorm.suites import load_suite, parse_suite, suite_arrays

FloatArray = npt.NDArray[np.float64]
#: AlpacaEval's results layout (per-instance rules, statistics, no average).
ALPACAEVAL = Path(__file__).parent / "fixtures" / "alpacaeval" / "results"

RULES_TOML = """
name = "paired-rules"

[board]
average = "subtasks"

[[benchmarks]]
name = "Speed"
range = [0, 100]
subtasks = [
  { name = "s1", task = "speed_a", metric = "score,none", lower_bound = 0.2 },
  { name = "s2", task = "speed_b", metric = "score,none" },
]

[[benchmarks]]
name = "Quiz"
subtasks = [ { name = "q1", task = "quiz", metric = "acc,none", num_choices = 4 } ]

[[benchmarks]]
name = "Length"
kind = "statistic"
subtasks = [ { name = "chars", task = "lengths", metric = "chars,none" } ]
"""
#: Per task: documents, and whether values are 0/1 (else on [0, 100], else lengths).
TASKS = {"speed_a": 150, "speed_b": 120, "quiz": 200, "lengths": 40}


def rules_table(path: Path, n_models: int = 3, seed: int = 7) -> pd.DataFrame:
    """Models of graded ability: percentages on Speed, 0/1 on Quiz, lengths."""
    rng = np.random.default_rng(seed)
    hard = {task: rng.normal(size=n) for task, n in TASKS.items()}
    frames = []
    for m in range(n_models):
        for task, n in TASKS.items():
            if task == "quiz":
                values = (0.8 + 0.3 * m - hard[task] + rng.normal(size=n) > 0) * 1.0
            elif task == "lengths":
                values = np.floor(200 + 50 * m + 30 * hard[task] ** 2)
            else:  # percentages, a document hard for every model
                raw = 55 + 6 * m - 12 * hard[task] + 10 * rng.normal(size=n)
                values = np.clip(raw, 0, 100)
            frames.append(
                pd.DataFrame(
                    {
                        "model": f"org/m{m}",
                        "task": task,
                        "metric": {
                            "speed_a": "score,none",
                            "speed_b": "score,none",
                        }.get(task, "acc,none" if task == "quiz" else "chars,none"),
                        "doc_id": np.arange(n),
                        "value": values.astype(float),
                    }
                )
            )
    frame = pd.concat(frames, ignore_index=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return frame


def pivot(
    frame: pd.DataFrame, task: str, a: str, b: str
) -> tuple[FloatArray, FloatArray]:
    wide = frame.loc[frame["task"] == task].pivot_table(
        index="doc_id", columns="model", values="value", aggfunc="first"
    )
    return wide[a].to_numpy(), wide[b].to_numpy()


def oracle(frame: pd.DataFrame, a: str, b: str) -> dict[str, tuple[float, float]]:
    """Each level's paired difference and error, by hand: numpy on the pivot.

    Speed is on [0, 100]: s1's bound 0.2 of the range is 20 points, its score
    ``(m - 20) / 0.8``; s2's bound 0, its score the mean itself. The board averages
    the three subtask scores (``average = "subtasks"``).
    """
    parts = {}
    for task, offset, slope in (
        ("speed_a", 20.0, 1 / 0.8),
        ("speed_b", 0.0, 1.0),
        ("quiz", 0.25, 100 / 0.75),
    ):
        x, y = pivot(frame, task, a, b)
        assert min(x.mean(), y.mean()) > offset  # nothing clipped
        d = x - y
        parts[task] = (
            float(d.mean() * slope),
            float(np.std(d, ddof=1) / math.sqrt(d.size) * slope),
        )
    speed = [parts["speed_a"], parts["speed_b"]]
    return {
        "Speed": (
            (speed[0][0] + speed[1][0]) / 2,
            math.hypot(speed[0][1], speed[1][1]) / 2,
        ),
        "Quiz": parts["quiz"],
        "average": (
            sum(p[0] for p in parts.values()) / 3,
            math.sqrt(sum(p[1] ** 2 for p in parts.values())) / 3,
        ),
    }


@pytest.fixture
def rules_run(tmp_path: Path) -> tuple[Path, Path, pd.DataFrame]:
    suite = tmp_path / "rules.toml"
    suite.write_text(RULES_TOML)
    frame = rules_table(tmp_path / "samples.parquet")
    return suite, tmp_path / "samples.parquet", frame


def test_a_range_the_board_average_and_a_statistic_in_run_paired(
    rules_run: tuple[Path, Path, pd.DataFrame],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """paired.parquet on a suite with a [0, 100] benchmark, average = "subtasks" and a
    statistic: every difference is the leaderboard's own (the kernel's scale), every
    error numpy's on the pivot, the statistic left out and named in the summary."""
    suite, table, frame = rules_run
    out = tmp_path / "out"
    argv = ["run", str(table), "--suite", str(suite), "--paired", "--out", str(out)]
    assert main(argv) == 0
    summary = capsys.readouterr().out
    assert "not compared: Length: a statistic: no paired test" in summary
    assert "the average ranks 3 variants" in summary
    paired = pd.read_parquet(out / "paired.parquet")
    assert set(paired["level"].astype(str)) == {"average", "Speed", "Quiz"}
    board = pd.read_parquet(out / "leaderboard.parquet").set_index("model")

    def cell(model: str, column: str) -> float:
        return float(board[column].to_numpy(dtype=float)[board.index.get_loc(model)])

    for row in paired.itertuples():
        level = str(row.level)
        a, b = str(row.model_a), str(row.model_b)
        assert row.difference == pytest.approx(
            cell(a, level) - cell(b, level), rel=1e-9, abs=1e-9
        )  # the leaderboard's own difference: no item unmatched
        expected = oracle(frame, a, b)[level]
        assert (row.difference, row.stderr) == pytest.approx(expected, rel=1e-9)
        error = "average_stderr" if level == "average" else f"{level} stderr"
        assert row.stderr_unpaired == pytest.approx(
            math.hypot(cell(a, error), cell(b, error)), rel=1e-12
        )


def test_compare_paired_scales_a_ranged_subtask_and_names_the_statistic(
    rules_run: tuple[Path, Path, pd.DataFrame], tmp_path: Path
) -> None:
    """compare --paired: a subtask on [0, 100] with bound 0.2: difference and paired
    error x 1/0.8, its unpaired error from each model's own (sd/sqrt(n) x 1/0.8)."""
    suite, table, frame = rules_run
    lbnorm.run([table], suite=suite, out=tmp_path / "out", options=RunOptions())
    comparison = compare_paired(tmp_path / "out", "org/m2", "org/m0")
    levels = comparison.levels.set_index("level")
    assert "Length" not in levels.index
    x, y = pivot(frame, "speed_a", "org/m2", "org/m0")
    row = levels.loc["Speed/s1"]
    difference, stderr = paired_subtask(x / 100, y / 100, 0.2)  # as fractions
    assert (row["difference"], row["stderr"]) == pytest.approx(
        (difference, stderr), rel=1e-9
    )
    own = [np.std(v, ddof=1) / math.sqrt(v.size) / 0.8 for v in (x, y)]
    assert row["stderr_unpaired"] == pytest.approx(math.hypot(*own), rel=1e-9)
    assert row["score_a"] == pytest.approx((x.mean() - 20) / 0.8, rel=1e-12)
    assert "not compared: Length: a statistic: no paired test" in comparison.notes


def test_a_suite_with_nothing_to_compare_is_refused_before_reading(
    tmp_path: Path,
) -> None:
    """alpacaeval-2: per-instance rules, statistics, no average: --paired has no level."""
    with pytest.raises(
        OptionsError,
        match=r"(?s)no level of suite alpacaeval-2.*per-instance rules.*Hint:",
    ):
        lbnorm.run(
            [tmp_path / "absent"],
            suite="alpacaeval-2",
            options=RunOptions(paired=True),
        )


def test_compare_and_diff_paired_refuse_an_output_with_nothing_to_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An alpacaeval-2 output: compare --paired and diff --paired name the suite,
    why each benchmark is left out, and a Hint (exit 2), not an empty table."""
    out = tmp_path / "out"
    lbnorm.run([ALPACAEVAL], suite="alpacaeval-2", out=out, options=RunOptions())
    with pytest.raises(
        OptionsError, match=r"(?s)out: no level of suite alpacaeval-2.*Hint:"
    ):
        compare_paired(out, "model-a", "model-b")
    argv = ["diff", str(out), str(out), "--paired"]
    assert main(argv) == 2
    assert "no level of suite alpacaeval-2" in capsys.readouterr().err


def test_per_instance_rules_and_statistics_get_no_items(tmp_path: Path) -> None:
    """The item reader leaves out what it cannot score (AlpacaEval's preferences are
    recoded onto [1, 2] by the suite's rules: their items would not give the score)."""
    suite = load_suite("alpacaeval-2")
    levels, notes = suite_levels(suite, suite_arrays(suite))
    assert levels == []
    assert "average: the suite's board has none" in notes
    assert any("per-instance rules" in note for note in notes)
    subtask = next(s for b in suite.benchmarks for s in b.subtasks if s.instance)
    path = tmp_path / "samples.parquet"
    pq.write_table(
        pa.table(
            {
                "model": ["a", "a", "b", "b"],
                "task": [subtask.task] * 4,
                "metric": [subtask.metric] * 4,
                "doc_id": [0, 1, 0, 1],
                "value": [1.0, 2.0, 1.5, 2.0],
            }
        ),
        path,
    )
    items = read_items([ItemSource(path=path)], suite)
    assert all(s is None for s in items.subtasks)


def binary_items(values: list[FloatArray | None], tasks: list[str]) -> Items:
    """Two variants' 0/1 items per subtask (None: no inputs)."""
    columns: list[SubtaskItems | None] = []
    for matrix in values:
        if matrix is None:
            columns.append(None)
            continue
        width = matrix.shape[1]
        columns.append(
            SubtaskItems(
                codes=np.where(np.isnan(matrix), 0, matrix + 1).astype(np.uint8),
                values=None,
                documents=pa.array(range(width), pa.int64()),
                document_index=np.arange(width, dtype=np.int64),
                positions=np.full(width, -1, dtype=np.int64),
                clusters=np.arange(width, dtype=np.int64),
                key="doc_id",
                is_list=False,
            )
        )
    return Items(
        variants=pa.table({"model": ["x", "y"]}),
        subtasks=tuple(columns),
        tasks=tuple(tasks),
    )


OWN_MISSING = """
name = "own-missing"
{board}
[[benchmarks]]
name = "A"
missing = "partial"
subtasks = [
  {{ name = "a1", task = "ta1", metric = "acc,none", num_choices = 4 }},
  {{ name = "a2", task = "ta2", metric = "acc,none", num_choices = 4 }},
]
[[benchmarks]]
name = "B"
subtasks = [
  {{ name = "b1", task = "tb1", metric = "acc,none", num_choices = 2 }},
  {{ name = "b2", task = "tb2", metric = "acc,none", num_choices = 2 }},
]
"""


def test_a_benchmarks_own_missing_policy_decides_where_it_is_compared() -> None:
    """A (missing = "partial") is compared on the subtask both have under a run's
    exclude, B (the run's exclude) is not; the average counts A alone where B is
    unknown only under a run's partial; average = "none" has no average level."""
    suite = parse_suite(OWN_MISSING.format(board="").encode(), source="own-missing")
    rng = np.random.default_rng(3)
    a1 = (rng.random((2, 300)) < [[0.8], [0.6]]).astype(float)
    b1 = (rng.random((2, 200)) < [[0.9], [0.7]]).astype(float)
    items = binary_items([a1, None, b1, None], ["ta1", "ta2", "tb1", "tb2"])
    arrays = suite_arrays(suite)
    levels = {lv.name: lv for lv in suite_levels(suite, arrays)[0]}
    moments = pair_moments(items, [0], [1])

    def stats(name: str, missing: MissingPolicy) -> tuple[float, float]:
        got = level_statistics(moments, arrays, levels[name], missing=missing)
        return float(got.difference[0]), float(got.stderr[0])

    expected_a = paired_subtask(a1[0], a1[1], 0.25)
    assert stats("A", "exclude") == pytest.approx(expected_a, rel=1e-12)
    assert np.isnan(stats("B", "exclude")).all()  # b2 absent: excluded
    assert np.isnan(stats("average", "exclude")).all()  # B unknown
    expected_b = paired_subtask(b1[0], b1[1], 0.5)
    assert stats("average", "partial") == pytest.approx(
        (
            (expected_a[0] + expected_b[0]) / 2,
            math.hypot(expected_a[1], expected_b[1]) / 2,
        ),
        rel=1e-12,
    )
    no_average = parse_suite(
        OWN_MISSING.format(board='[board]\naverage = "none"').encode(), source="none"
    )
    levels_none, notes = suite_levels(no_average, suite_arrays(no_average))
    assert [lv.name for lv in levels_none] == ["A", "B"]
    assert notes == ("average: the suite's board has none",)
