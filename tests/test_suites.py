from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from lbnorm import LbnormError, SuiteError, builtin_suite_names, load_suite
from lbnorm.core.errors import SchemaMismatchError
from lbnorm.core.schemas import conform, leaderboard_schema
from lbnorm.suites import match_benchmark, matching_benchmarks, parse_suite

GOLDEN = Path(__file__).parent / "fixtures" / "golden"


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


def _benchmarks(names: list[str], *, weights: list[str] | None = None) -> bytes:
    """A suite with one 4-way subtask per benchmark (and the weights given)."""
    weights = weights or ["1"] * len(names)
    return "".join(
        ['name = "t"\n']
        + [
            f'[[benchmarks]]\nname = "{name}"\nweight = {weight}\n'
            'subtasks = [{ name = "s", num_choices = 4 }]\n'
            for name, weight in zip(names, weights, strict=True)
        ]
    ).encode()


def test_builtin_suites() -> None:
    assert {
        "openllm-v1",
        "openllm-v2",
        "evalperf",
        "mteb-legacy-en",
        "alpacaeval-2",
    } <= set(builtin_suite_names())
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
            r"aggregation must be one of \[.*\], got 'median'.*\n.*Hint: the default is",
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
        match=r"neither a built-in suite nor a file.\nHint: use one of \[.*'openllm-v1', 'openllm-v2'\]",
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
        / "suites"
        / "builtin"
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


# --- names: one rule, no clash with the leaderboard's own columns ----------------------


def test_one_rule_for_benchmark_names() -> None:
    names = ["IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO"]
    assert matching_benchmarks("GPQA", names) == ["GPQA"]
    assert matching_benchmarks("gpqa", names) == ["GPQA"]  # any case
    assert matching_benchmarks("math", names) == ["MATH Lvl 5"]  # a unique prefix
    assert matching_benchmarks("m", names) == ["MATH Lvl 5", "MUSR", "MMLU-PRO"]
    assert matching_benchmarks("drop", names) == []
    assert matching_benchmarks("MMLU", ["MMLU", "MMLU-PRO"]) == ["MMLU"]  # exact first
    assert match_benchmark("ifeval", names) == "IFEval"
    with pytest.raises(
        SuiteError,
        match=r"benchmark 'm' is ambiguous: \['MATH Lvl 5', 'MUSR', 'MMLU-PRO'\]\.\n"
        r"Hint: use one of \[.*\] \(any case; a unique prefix will do\)\.",
    ):
        match_benchmark("m", names, error=SuiteError)
    with pytest.raises(
        LbnormError, match=r"'drop' is not in suite x\.\nHint: use one of"
    ):
        match_benchmark("drop", names, where="suite x")


def test_set_bound_and_show_take_the_same_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lbnorm.analysis.impact import override_bounds, parse_bound_override
    from lbnorm.cli import main

    v2 = load_suite("openllm-v2")
    for typed in ("GPQA", "gpqa", "gp"):
        changed = override_bounds(v2, [parse_bound_override(f"{typed}=0.3")])
        assert changed.name == "openllm-v2 (GPQA=0.3)"  # spelt as the suite spells it
        bounds = changed.subtask_table().groupby("benchmark")["lower_bound"].max()
        assert bounds["GPQA"] == 0.3
    with pytest.raises(
        SuiteError,
        match=r"--set-bound m=0.3: 'm' is ambiguous: .*\nHint: use one of",
    ):
        override_bounds(v2, [parse_bound_override("m=0.3")])
    out = tmp_path / "out"
    assert (
        main(["run", str(GOLDEN / "Amu__t1-3B.json"), "--out", str(out), "--quiet"])
        == 0
    )
    capsys.readouterr()
    for typed in ("GPQA", "gpqa", "gp"):
        assert main(["show", str(out), "--benchmark", typed]) == 0
        assert ", by GPQA" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["A", "A Raw"], r"benchmark name\(s\) \['A Raw'\] clash with the leaderboard"),
        (["B raw"], r"\['B raw'\] clash"),
        (["rank"], r"\['rank'\] clash with the leaderboard's own columns \(average, "),
        (["Model"], r"\['Model'\] clash"),
        (["n_benchmarks"], r"\['n_benchmarks'\] clash"),
        (["rank_within_size_class"], r"\['rank_within_size_class'\] clash"),
        (["GPQA", "gpqa"], r"benchmark names \['GPQA', 'gpqa'\] differ only in case"),
    ],
)
def test_benchmark_names_that_clash_with_the_leaderboard(
    names: list[str], message: str
) -> None:
    with pytest.raises(SuiteError, match=rf"(?s)t\.toml: .*{message}.*\nHint: \S"):
        parse_suite(_benchmarks(names), source="t.toml")


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (["inf"], r"weight must be a positive finite number, got inf\."),
        (["nan"], r"weight must be a positive finite number, got nan"),
        (["0"], r"weight must be a positive finite number, got 0"),
        (["1e-320"], r"got 1e-320"),  # subnormal: the average would lose its digits
        (["1" + "0" * 400], r"got an integer of 401 digits"),
        (
            ["1e308", "1e308"],
            r"the benchmark weights sum to more than a float can hold",
        ),
        (["1e307"], r"the benchmark weights sum to more than a float can hold"),
    ],
)
def test_weights_keep_the_average_finite(weights: list[str], message: str) -> None:
    with pytest.raises(SuiteError, match=rf"(?s)t\.toml: .*{message}.*\nHint: \S"):
        parse_suite(
            _benchmarks([f"B{i}" for i in range(len(weights))], weights=weights),
            source="t.toml",
        )
    assert parse_suite(_benchmarks(["A"], weights=["1e300"]), source="t").benchmarks


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "1" + "0" * 400,
            r"n_samples must be a positive integer of at most 2\*\*53, got an integer of 401 digits",
        ),
        ("9007199254740993", r"n_samples must be .*got 9007199254740993"),
        ("1e400", r"n_samples must be .*got inf"),
    ],
)
def test_sample_counts_fit_a_float(value: str, message: str) -> None:
    text = (
        _benchmarks(["A"])
        .decode()
        .replace("num_choices = 4", f"num_choices = 4, n_samples = {value}")
    )
    with pytest.raises(SuiteError, match=rf"{message}\.\nHint: give the number"):
        parse_suite(text.encode(), source="t.toml")
    huge_choices = (
        _benchmarks(["A"])
        .decode()
        .replace("num_choices = 4", "num_choices = 1" + "0" * 400)
    )
    with pytest.raises(
        SuiteError,
        match=r"num_choices must be .*got an integer of 401 digits\.\nHint: a k-way",
    ):
        parse_suite(huge_choices.encode(), source="t.toml")
    with pytest.raises(
        SuiteError, match=r"not a valid UTF-8 TOML suite file(.|\n)*Hint:"
    ):
        parse_suite(b"x = " + b"1" * 5000, source="t.toml")  # beyond int() digit limits


def test_n_samples_at_the_limit_is_accepted() -> None:
    text = (
        _benchmarks(["A"])
        .decode()
        .replace("num_choices = 4", f"num_choices = 4, n_samples = {2**53}")
    )
    suite = parse_suite(text.encode(), source="t.toml")
    assert suite.subtask_table()["n_samples"].tolist() == [2**53]


# --- an edited copy of a built-in suite says so ------------------------------------------


def test_an_edited_builtin_is_modified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lbnorm.cli import main

    original = (
        resources.files("lbnorm.suites") / "builtin" / "openllm-v2.toml"
    ).read_text("utf-8")
    cosmetic = tmp_path / "cosmetic.toml"  # comments, description and layout only
    cosmetic.write_text(
        "# my copy\n"
        + original.replace('description = "', 'description = "edited: ').replace(
            "\n\n", "\n\n\n"
        )
    )
    edited = tmp_path / "edited.toml"
    edited.write_text(
        original.replace(
            'metric = "acc_norm,none", num_choices = 4, n_samples = 198',
            'metric = "acc_norm,none", num_choices = 4, lower_bound = 0.0, n_samples = 198',
        )
        .replace(
            'metric = "acc_norm,none", num_choices = 4, n_samples = 546',
            'metric = "acc_norm,none", num_choices = 4, lower_bound = 0.0, n_samples = 546',
        )
        .replace(
            'metric = "acc_norm,none", num_choices = 4, n_samples = 448',
            'metric = "acc_norm,none", num_choices = 4, lower_bound = 0.0, n_samples = 448',
        )
    )
    builtin, copy, changed = (load_suite(s) for s in ("openllm-v2", cosmetic, edited))
    assert copy.sha256 != builtin.sha256  # other bytes ...
    assert (copy.is_modified, copy.display_name) == (
        False,
        "openllm-v2",
    )  # ... same content
    assert (changed.is_modified, changed.display_name) == (
        True,
        "openllm-v2 (modified)",
    )
    assert changed.provenance() == {
        "name": "openllm-v2",
        "source": str(edited),
        "sha256": changed.sha256,
        "modified": True,
    }
    assert builtin.provenance()["modified"] is False
    renamed = parse_suite(
        edited.read_bytes().replace(b'name = "openllm-v2"', b'name = "mine"'),
        source="m",
    )
    assert not renamed.is_modified  # not a built-in's name: nothing to differ from
    inputs = [str(GOLDEN / "Amu__t1-3B.json")]
    out = ["--out", str(tmp_path / "out")]
    assert main(["run", *inputs, "--suite", str(edited), *out]) == 0
    assert (
        "suite      openllm-v2 (modified) (6 benchmarks, 40 subtasks)"
        in capsys.readouterr().out
    )
    assert (
        main(["impact", *inputs, "--suite", "openllm-v2", "--suite", str(edited)]) == 0
    )
    assert (
        "# lbnorm impact: openllm-v2 -> openllm-v2 (modified) on"
        in capsys.readouterr().out
    )
    assert (
        main(["impact", *inputs, "--suite", str(cosmetic), "--suite", "openllm-v2"])
        == 0
    )
    title = capsys.readouterr().out.splitlines()[
        0
    ]  # same name: the sources tell them apart
    assert title.startswith(
        f"# lbnorm impact: openllm-v2 [{cosmetic}] -> openllm-v2 [builtin:openllm-v2] on"
    )
    assert (
        main(["impact", *inputs, "--suite", str(edited), "--set-bound", "gpqa=0.1"])
        == 0
    )
    assert capsys.readouterr().out.startswith(
        "# lbnorm impact: openllm-v2 (modified) -> openllm-v2 (modified) (GPQA=0.1) on"
    )
    assert main(["suites", "show", str(edited)]) == 0
    assert capsys.readouterr().out.startswith("openllm-v2 (modified): ")


def test_suites_show_prints_sample_counts_as_integers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from lbnorm.cli import main

    assert main(["suites", "show", "openllm-v2"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    navigate = next(row for row in rows if row[:2] == ["BBH", "navigate"])
    assert navigate[-1] == "250"
    ifeval = next(row for row in rows if row[:2] == ["IFEval", "prompt_level_strict"])
    assert ifeval[-1] == "541"  # prompts; its instruction-level twin counts items
    assert not any(cell.endswith(".00") for row in rows for cell in row)


# --- a suite of 16,000 benchmarks costs work linear in its size ---------------------------


class _CountingTable:
    """A table that counts how often its column list is built (each time is O(columns))."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.listed = 0

    @property
    def column_names(self) -> list[str]:
        self.listed += 1
        return [str(name) for name in self.table.column_names]

    def select(self, names: list[str]) -> pa.Table:
        return self.table.select(names)


def test_conform_builds_the_column_list_once() -> None:
    names = [f"B{i}" for i in range(2_000)]
    schema = leaderboard_schema(names)
    table = _CountingTable(schema.empty_table())
    conformed = conform(cast("pa.Table", table), schema, source="leaderboard")
    assert conformed.schema.names == schema.names
    assert table.listed == 1  # not once per column: 16,000 benchmarks took minutes
    short = _CountingTable(schema.empty_table().drop_columns(["B7", "B7 Raw"]))
    with pytest.raises(
        SchemaMismatchError,
        match=r"leaderboard: missing column\(s\) \['B7', 'B7 Raw'\]; found \[.*\] and "
        r"5,996 more\.\nHint: expected columns are \[.*\] and 5,998 more",
    ):
        conform(cast("pa.Table", short), schema, source="leaderboard")
    assert short.listed <= 2  # once to check, once for the message


@pytest.mark.slow
def test_a_suite_of_16000_benchmarks() -> None:
    from lbnorm import normalize_scores

    n = 16_000
    suite = parse_suite(_benchmarks([f"B{i}" for i in range(n)]), source="big.toml")
    scores = pd.DataFrame(
        {
            "model": np.repeat(["m/a", "m/b"], n),
            "benchmark": [f"B{i}" for i in range(n)] * 2,
            "subtask": "s",
            "raw_score": np.tile(np.linspace(0.25, 1.0, n), 2),
        }
    )
    result = normalize_scores(scores, suite)
    assert result.leaderboard["n_benchmarks"].tolist() == [n, n]
    table = pa.Table.from_pandas(result.leaderboard, preserve_index=False)
    conformed = conform(table, leaderboard_schema(suite.benchmark_names), source="lb")
    assert conformed.num_columns == 10 + 3 * n  # keys etc., then X, X Raw, X stderr
    assert conformed.column("B15999").to_pylist() == [100.0, 100.0]
