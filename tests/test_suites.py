from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lbnorm import SuiteError, builtin_suite_names, load_suite
from lbnorm.suites import parse_suite


def _cell(frame: pd.DataFrame, row: object, column: str) -> Any:
    """One value, typed loosely: pandas-stubs types `.loc[row, column]` as a union."""
    return frame[column].to_dict()[row]


GOOD = """
name = "tiny"
[[benchmarks]]
name = "A"
aggregation = "{aggregation}"
subtasks = [
  {{ name = "x", num_choices = {k}, n_samples = 10 }},
  {{ name = "y", num_choices = 4{extra} }},
]
"""


def _suite(**fields: object) -> bytes:
    values: dict[str, object] = {
        "aggregation": "normalize-then-average",
        "k": 2,
        "extra": ", n_samples = 5",
    }
    values.update(fields)
    return GOOD.format(**values).encode()


def test_builtin_suites() -> None:
    assert builtin_suite_names() == ["openllm-v1", "openllm-v2"]
    v2 = load_suite("openllm-v2")
    table = v2.subtask_table()
    assert len(table) == 40
    assert table.groupby("benchmark", sort=False).size().to_dict() == {
        "IFEval": 2,
        "BBH": 24,
        "MATH Lvl 5": 7,
        "GPQA": 3,
        "MUSR": 3,
        "MMLU-PRO": 1,
    }
    bounds = table.set_index("subtask")["lower_bound"]
    assert bounds["team_allocation"] == 1 / 3  # exactly, not 0.333
    assert bounds["object_counting"] == 1 / 19
    assert bounds["geometric_shapes"] == 1 / 11
    assert bounds["reasoning_about_colored_objects"] == 1 / 18
    assert bounds["algebra"] == 0.0
    assert {b.name: b.aggregation for b in v2.benchmarks}[
        "GPQA"
    ] == "pool-then-normalize"
    assert {b.name: b.aggregation for b in v2.benchmarks}[
        "BBH"
    ] == "normalize-then-average"
    gpqa = table[table["benchmark"] == "GPQA"]
    assert gpqa["n_samples"].tolist() == [198, 546, 448]
    v1 = load_suite("openllm-v1")
    assert v1.benchmark_names == [
        "ARC",
        "HellaSwag",
        "MMLU",
        "TruthfulQA",
        "Winogrande",
        "GSM8K",
    ]
    assert (v1.subtask_table()["lower_bound"] == 0).all()  # v1: raw x 100
    assert len(v1.subtask_table()) == 62


def test_suite_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_bytes(_suite())
    suite = load_suite(path)
    assert suite.source == str(path)
    assert len(suite.sha256) == 64
    assert suite.subtask_table()["lower_bound"].tolist() == [0.5, 0.25]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"k": 1},
            r"benchmarks\[0\] \(A\) subtasks\[0\] \(x\): num_choices must be an integer >= 2.*\n.*Hint",
        ),
        ({"k": -3}, r"subtasks\[0\] \(x\): num_choices must be .*got -3"),
        ({"k": "2.5"}, r"num_choices must be an integer"),
        (
            {"extra": ", lower_bound = 1.0"},
            r"subtasks\[1\] \(y\): lower_bound must be in \[0, 1\), got 1.0.*\n.*Hint",
        ),
        ({"extra": ", lower_bound = -0.1"}, r"lower_bound must be in \[0, 1\)"),
        (
            {"extra": ", n_samples = 0"},
            r"n_samples must be a positive integer of at most 2\*\*53, got 0",
        ),
        (
            {"aggregation": "median"},
            r"unknown aggregation 'median'.*\n.*Hint: use one of",
        ),
        (
            {"aggregation": "pool-then-normalize", "extra": ""},
            r"pool-then-normalize needs n_samples > 0 .*\['y'\]",
        ),
        (
            {"aggregation": "pool-then-normalize"},
            r"pooled subtasks must share one lower bound",
        ),
        (
            {"extra": ", choices = 3"},
            r"unknown key\(s\) \['choices'\].*\n.*Hint: allowed keys",
        ),
    ],
)
def test_invalid_suites_name_file_and_row(
    tmp_path: Path, fields: dict[str, object], message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(_suite(**fields))
    with pytest.raises(SuiteError, match=message) as info:
        load_suite(path)
    assert str(path) in str(info.value)
    assert "Hint:" in str(info.value)


def test_duplicates_and_syntax(tmp_path: Path) -> None:
    path = tmp_path / "dup.toml"
    path.write_text(
        'name = "d"\n[[benchmarks]]\nname = "A"\nsubtasks = [{ name = "x" }, { name = "x" }]\n'
    )
    with pytest.raises(
        SuiteError, match=r"duplicate subtask name\(s\) \['x'\].*\n.*Hint"
    ):
        load_suite(path)
    path.write_text('name = "d"\n[[benchmarks]\n')
    with pytest.raises(
        SuiteError, match=r"dup.toml: not a valid UTF-8 TOML suite file"
    ):
        load_suite(path)
    with pytest.raises(
        SuiteError,
        match=r"neither a built-in suite nor a file.\nHint: use one of \['openllm-v1', 'openllm-v2'\]",
    ):
        load_suite("openllm-v3")
    with pytest.raises(SuiteError, match=r"duplicate \(task, metric\) pair"):
        parse_suite(
            b'name = "t"\n[[benchmarks]]\nname = "A"\nsubtasks = [{ name = "x", task = "t", metric = "m" }, { name = "y", task = "t", metric = "m" }]\n',
            source="t",
        )


def test_editing_a_bound_changes_the_scores(tmp_path: Path) -> None:
    from lbnorm import run

    edited = (
        Path(__file__).parent.parent
        / "src"
        / "lbnorm"
        / "suite_files"
        / "openllm-v2.toml"
    ).read_text()
    edited = edited.replace(
        'task = "leaderboard_gpqa_diamond", metric = "acc_norm,none", num_choices = 4',
        'task = "leaderboard_gpqa_diamond", metric = "acc_norm,none", num_choices = 4, lower_bound = 0.3',
    )
    path = tmp_path / "edited.toml"
    path.write_text(edited)
    with pytest.raises(SuiteError, match="pooled subtasks must share one lower bound"):
        load_suite(path)
    path.write_text(
        edited.replace(
            'aggregation = "pool-then-normalize"\nsubtasks = [\n  { name = "diamond"',
            'aggregation = "normalize-then-average"\nsubtasks = [\n  { name = "diamond"',
        )
    )
    fixtures = Path(__file__).parent / "fixtures" / "golden"
    before = run([fixtures / "01-ai__Yi-34B-Chat.json"]).benchmarks.set_index(
        "benchmark"
    )
    after = run(
        [fixtures / "01-ai__Yi-34B-Chat.json"], suite=path
    ).benchmarks.set_index("benchmark")
    assert _cell(after, "GPQA", "normalized_score") != _cell(
        before, "GPQA", "normalized_score"
    )
    assert _cell(after, "BBH", "normalized_score") == _cell(
        before, "BBH", "normalized_score"
    )
