"""A benchmark's own rules (suites/rules.py): kind, range, missing data, averaging.

Each rule is checked where a suite is parsed (a clear error naming the file,
benchmark and key) and where its values are folded: a run on a small table, in
both engines, against numbers worked out by hand.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from dense_oracle import dense_result

from lbnorm.core.errors import SuiteError, ValidationError
from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.core.schemas import Batch
from lbnorm.engines import stream
from lbnorm.engines.result import Result, finish_job
from lbnorm.readers import Inputs
from lbnorm.suites import Suite, parse_suite, suite_arrays
from lbnorm.suites.rules import parse_rules

SUITE = """
name = "rules"

[[benchmarks]]
name = "pct"
range = [0, 100]
subtasks = [ {{ name = "a" }}, {{ name = "b" }} ]
{pct}

[[benchmarks]]
name = "frac"
subtasks = [ {{ name = "c", num_choices = 4 }} ]

[[benchmarks]]
name = "n_total"
kind = "statistic"
subtasks = [ {{ name = "n" }} ]
"""


def _suite(pct: str = "") -> Suite:
    return parse_suite(SUITE.format(pct=pct).encode(), source="rules.toml")


def _rows(rows: list[tuple[str, str, str, float]]) -> Inputs:
    return Inputs.of_batches([Batch(table=_table(rows), source="t.csv")])


def _table(rows: list[tuple[str, str, str, float]]) -> pa.Table:
    return pa.table(
        {
            "model": [r[0] for r in rows],
            "benchmark": [r[1] for r in rows],
            "subtask": [r[2] for r in rows],
            "raw_score": [r[3] for r in rows],
        }
    )


ROWS = [
    ("m1", "pct", "a", 85.23),
    ("m1", "pct", "b", 100.00000000000001),  # EvalPerf's: one ulp past the end
    ("m1", "frac", "c", 0.5),
    ("m1", "n_total", "n", 805.0),
    ("m2", "pct", "a", 0.3),
    ("m2", "frac", "c", 0.1),
    ("m2", "n_total", "n", 12345678.123456789),
]


def _run(
    engine: str,
    suite: Suite,
    rows: list[tuple[str, str, str, float]],
    *,
    missing: MissingPolicy = "exclude",
) -> Result:
    options = RunOptions(  # memory: the stream engine's subtask table held, sorted
        missing=missing, engine="memory" if engine == "memory" else "stream"
    )
    return finish_job(stream.start(_rows(rows), suite, options))


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ({}, ("score", (0.0, 1.0), None, True)),
        ({"range": [0, 100]}, ("score", (0.0, 100.0), None, True)),
        ({"range": [-1, 1], "averaged": False}, ("score", (-1.0, 1.0), None, False)),
        ({"kind": "statistic"}, ("statistic", (0.0, math.inf), None, False)),
        (
            {"kind": "statistic", "range": [0, 805]},
            ("statistic", (0.0, 805.0), None, False),
        ),
        ({"missing": "zero"}, ("score", (0.0, 1.0), "zero", True)),
    ],
)
def test_rules_are_parsed(
    table: dict[str, object], expected: tuple[object, ...]
) -> None:
    assert parse_rules(table, where="s") == expected


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (
            {"kind": "count"},
            r"kind must be one of \['score', 'statistic'\], got .count.*\n.*Hint",
        ),
        (
            {"range": [100, 0]},
            r"range must be finite numbers low < high, got \[100, 0\]",
        ),
        (
            {"range": [0, math.inf]},
            r"range must be finite numbers low < high.*\n.*Hint",
        ),
        (
            {"range": [0]},
            r"range must be two numbers \[low, high\], got \[0\].*\n.*Hint",
        ),
        ({"range": "0-100"}, r"range must be two numbers"),
        ({"range": [0, True]}, r"range must be two numbers"),
        ({"range": [0, 10**400]}, r"range .* does not fit a float.*\n.*Hint"),
        ({"range": [-1e308, 1e308]}, r"range must be finite numbers low < high"),
        (
            {"kind": "statistic", "range": [math.inf, math.inf]},
            r"range must be numbers low < high \(high may be inf\)",
        ),
        (
            {"missing": "skip"},
            r"missing must be one of \['exclude', 'partial', 'zero'\].*\n.*Hint",
        ),
        ({"averaged": "no"}, r"averaged must be true or false.*\n.*Hint"),
        (
            {"kind": "statistic", "averaged": True},
            r"a statistic is never averaged.*\n.*Hint",
        ),
    ],
)
def test_bad_rules_name_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(
        SuiteError, match=r"^f\.toml: benchmarks\[0\] \(B\): " + message
    ):
        parse_rules(table, where="f.toml: benchmarks[0] (B)")


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (
            'kind = "statistic"\naggregation = "pool-then-normalize"\nsubtasks = [{ name = "n", n_samples = 3 }]',
            r"\(S\): a statistic is the mean of its subtasks' values as given, but aggregation is 'pool-then-normalize'.*\n.*Hint",
        ),
        (
            'kind = "statistic"\nsubtasks = [{ name = "n", num_choices = 4 }]',
            r"\(S\): a statistic has no chance baseline, but subtask\(s\) \['n'\].*\n.*Hint",
        ),
        (
            'kind = "statistic"\nsubtasks = [{ name = "n" }, { name = "m" }]',
            r"\(S\): a statistic with an unbounded range \(high = inf\) has one subtask, got 2.*\n.*Hint: declare a finite range",
        ),
        (
            'aggregation = "bradley-terry"\nrange = [0, 100]\nsubtasks = [{ name = "overall" }]',
            r"\(S\): a bradley-terry benchmark's score is a win rate from battles; it takes no kind or range.*\n.*Hint",
        ),
    ],
)
def test_bad_benchmark_rules(rules: str, message: str) -> None:
    text = f'name = "x"\n[[benchmarks]]\nname = "S"\n{rules}\n'
    with pytest.raises(SuiteError, match=r"^x\.toml: benchmarks\[0\] " + message):
        parse_suite(text.encode(), source="x.toml")


def test_a_statistic_with_a_finite_range_may_have_subtasks() -> None:
    text = 'name = "x"\n[[benchmarks]]\nname = "S"\nkind = "statistic"\nrange = [0, 1000]\nsubtasks = [{ name = "n" }, { name = "m" }]\n'
    suite = parse_suite(text.encode(), source="x.toml")
    assert suite.benchmarks[0].kind == "statistic"


def test_default_suites_keep_the_fraction_path() -> None:
    """No declared range or statistic: no scales, the arrays as before."""
    from lbnorm.suites import load_suite

    arrays = suite_arrays(load_suite("openllm-v2"))
    assert arrays.scales is None
    assert arrays.missing == ()
    assert arrays.is_averaged is None


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_range_and_statistic_values(engine: str) -> None:
    result = _run(engine, _suite(), ROWS, missing="partial")
    subtasks = result.subtasks.sort_values(["model", "benchmark", "subtask"])
    pct = subtasks[subtasks["benchmark"] == "pct"]
    # on [0, 100] with bound 0 the normalized score is the raw score, bit for bit
    assert pct["normalized_score"].tolist() == pct["raw_score"].tolist()
    stat = subtasks[subtasks["benchmark"] == "n_total"]
    assert stat["normalized_score"].tolist() == [805.0, 12345678.123456789]
    assert not stat["is_clipped"].any()
    assert stat["lower_bound"].tolist() == [0.0, 0.0]
    board = result.leaderboard.set_index("model")
    # the statistic is shown as given, its raw value its score
    assert board.loc["m1", "n_total"] == 805.0
    assert board.loc["m2", "n_total"] == 12345678.123456789
    assert board.loc["m2", "n_total Raw"] == 12345678.123456789
    # a score's mean: (85.23 + 100.00000000000001) / 2 from exact sums
    assert board.loc["m1", "pct"] == pytest.approx(92.615, abs=1e-12)
    # the average takes the two scores, not the statistic
    frac = (0.5 - 0.25) / 0.75 * 100
    assert board.loc["m1", "average"] == pytest.approx((92.615 + frac) / 2, abs=1e-12)
    assert board.loc["m2", "average"] == pytest.approx((0.3 + 0.0) / 2, abs=1e-12)


def test_engines_agree_bit_for_bit() -> None:
    """Both orders, and a dense pivot of the rows (:mod:`dense_oracle`)."""
    options = RunOptions(missing="partial")
    tables = [
        _run(engine, _suite(), ROWS, missing="partial")
        for engine in ("memory", "stream")
    ] + [dense_result(_table(ROWS), _suite(), options)]
    for other in tables[1:]:
        assert tables[0].leaderboard_table.equals(other.leaderboard_table)
        assert tables[0].benchmark_table.equals(other.benchmark_table)


def test_a_single_value_keeps_its_bits_in_the_benchmark() -> None:
    """A statistic's one value, and a [0, 100] score's high bits, are not rounded away."""
    rows = [
        ("m", "pct", "a", 85.23),
        ("m", "pct", "b", 64.5),
        ("m", "frac", "c", 0.5),
        ("m", "n_total", "n", 0.1 + 0.2),
    ]
    board = _run("stream", _suite(), rows).leaderboard.set_index("model")
    assert board.loc["m", "n_total"] == 0.1 + 0.2
    assert board.loc["m", "pct"] == (85.23 + 64.5) / 2


@pytest.mark.parametrize("engine", ["memory", "stream"])
@pytest.mark.parametrize(
    ("value", "is_accepted"),
    [(100.00000000000003, True), (100.0001, False), (-1e-300, False), (101.0, False)],
)
def test_values_are_checked_on_the_declared_range(
    engine: str, value: float, is_accepted: bool
) -> None:
    rows = [("m", "pct", "a", value), ("m", "pct", "b", 1.0), ("m", "frac", "c", 0.5)]
    if is_accepted:
        board = _run(engine, _suite(), rows, missing="partial").leaderboard
        assert board["pct"].iloc[0] == pytest.approx(50.5)
        return
    with pytest.raises(
        ValidationError,
        match=r"outside_range.*\n(.*\n)*.*Hint: raw_score must lie in its benchmark's range",
    ) as info:
        _run(engine, _suite(), rows)
    failures = info.value.failures
    assert failures["check"].tolist() == ["outside_range"]
    assert failures["benchmark"].tolist() == ["pct"]


def test_a_fraction_benchmark_beside_a_ranged_one_still_refuses_percentages() -> None:
    rows = [("m", "pct", "a", 70.0), ("m", "pct", "b", 80.0), ("m", "frac", "c", 70.0)]
    with pytest.raises(ValidationError, match="percent_scale") as info:
        _run("stream", _suite(), rows)
    assert info.value.failures["benchmark"].tolist() == ["frac"]


def test_a_statistic_takes_any_non_negative_value_and_refuses_negatives() -> None:
    rows = [
        ("m", "pct", "a", 1.0),
        ("m", "pct", "b", 1.0),
        ("m", "frac", "c", 0.5),
        ("m", "n_total", "n", -1.0),
    ]
    with pytest.raises(ValidationError, match="outside_range"):
        _run("stream", _suite(), rows)


@pytest.mark.parametrize("engine", ["memory", "stream"])
@pytest.mark.parametrize(
    ("own", "run", "expected"),
    [
        ('missing = "partial"', "exclude", 40.0),  # the benchmark's own policy wins
        ('missing = "zero"', "partial", 20.0),
        ('missing = "exclude"', "partial", None),
        ("", "partial", 40.0),  # none of its own: the run's
        ("", "zero", 20.0),
    ],
)
def test_a_benchmark_missing_policy_overrides_the_runs(
    engine: str, own: str, run: MissingPolicy, expected: float | None
) -> None:
    rows = [
        ("m", "pct", "a", 40.0),
        ("m", "frac", "c", 0.5),
        ("m", "n_total", "n", 3.0),
    ]
    board = _run(engine, _suite(own), rows, missing=run).leaderboard
    value = board["pct"].iloc[0]
    if expected is None:
        assert pd.isna(value)
    else:
        assert value == pytest.approx(expected)


def test_averaged_false_is_shown_not_averaged() -> None:
    suite = _suite("averaged = false")
    board = _run("stream", suite, ROWS, missing="partial").leaderboard.set_index(
        "model"
    )
    assert board.loc["m1", "pct"] == pytest.approx(92.615)
    assert board.loc["m1", "average"] == pytest.approx((0.5 - 0.25) / 0.75 * 100)


def test_ranged_pooled_benchmark_scores_on_its_range(tmp_path: Path) -> None:
    text = """name = "p"
[[benchmarks]]
name = "P"
aggregation = "pool-then-normalize"
range = [0, 100]
subtasks = [{ name = "a", n_samples = 3, num_choices = 4 }, { name = "b", n_samples = 1, num_choices = 4 }]
"""
    suite = parse_suite(text.encode(), source="p.toml")
    rows = [("m", "P", "a", 50.0), ("m", "P", "b", 100.0)]
    board = _run("stream", suite, rows).leaderboard
    pooled = (3 * 50.0 + 100.0) / 4  # 62.5 on [0, 100]; bound 25
    assert board["P Raw"].iloc[0] == pytest.approx(pooled)
    assert board["P"].iloc[0] == pytest.approx((pooled - 25.0) / 75.0 * 100.0)


def test_binomial_stderr_on_a_range_is_estimated_on_its_fraction() -> None:
    text = """name = "p"
[[benchmarks]]
name = "P"
range = [0, 100]
subtasks = [{ name = "a", n_samples = 101 }]
"""
    suite = parse_suite(text.encode(), source="p.toml")
    table = pa.table(
        {"model": ["m"], "benchmark": ["P"], "subtask": ["a"], "raw_score": [50.0]}
    )
    options = RunOptions(engine="stream")
    result = finish_job(
        stream.start(
            Inputs.of_batches([Batch(table=table, source="t")]), suite, options
        )
    )
    # sqrt(0.5 * 0.5 / 100) = 0.05 of the range: 5 points
    assert result.benchmarks["raw_stderr"].iloc[0] == pytest.approx(5.0)
    assert result.benchmarks["stderr"].iloc[0] == pytest.approx(5.0)


def test_a_statistic_without_a_stderr_has_none() -> None:
    result = _run("stream", _suite(), ROWS, missing="partial")
    stat = result.benchmarks[result.benchmarks["benchmark"] == "n_total"]
    assert stat["stderr"].isna().all()


def test_unbounded_statistic_sums_exactly_in_any_order() -> None:
    shuffled = list(reversed(ROWS))
    first = _run("stream", _suite(), ROWS, missing="partial").leaderboard_table
    second = _run("stream", _suite(), shuffled, missing="partial").leaderboard_table
    assert first.equals(second)
    assert np.isfinite(first.column("n_total").to_numpy()).all()


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_a_lone_subtask_on_a_range_keeps_its_bits(engine: str) -> None:
    """A benchmark of one subtask sums 0 + x: its score is the input, bit for bit."""
    text = 'name = "one"\n[[benchmarks]]\nname = "P"\nrange = [0, 100]\nsubtasks = [{ name = "a" }]\n'
    suite = parse_suite(text.encode(), source="one.toml")
    values = [5.35, 0.1 + 0.2, 99.99999999999999, 100.00000000000001, 1e-300]
    rows = [(f"m{i}", "P", "a", value) for i, value in enumerate(values)]
    board = _run(engine, suite, rows).leaderboard.set_index("model")
    assert [board["P"].to_dict()[f"m{i}"] for i in range(len(values))] == values
