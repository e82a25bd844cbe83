"""Standard errors in closed form, checked by hand, by a bootstrap, and on the demo."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lbnorm import InputError, Result, normalize_scores, run
from lbnorm.analysis.uncertainty import (
    estimate_uncertainty,
    normal_quantile,
    rank_intervals,
)
from lbnorm.engines.stderr import clipped_variance
from lbnorm.suites import Suite, parse_suite

SUITE = parse_suite(
    b"""
name = "two"
[[benchmarks]]
name = "A"
aggregation = "normalize-then-average"
subtasks = [
  { name = "a1", num_choices = 2, n_samples = 250 },
  { name = "a2", num_choices = 5, n_samples = 256 },
  { name = "a3", num_choices = 3, n_samples = 250 },
]
[[benchmarks]]
name = "B"
aggregation = "pool-then-normalize"
subtasks = [
  { name = "b1", num_choices = 4, n_samples = 198 },
  { name = "b2", num_choices = 4, n_samples = 448 },
]
""",
    source="<test>",
)
SUBTASKS = [
    ("A", "a1", 0.5, 250),
    ("A", "a2", 0.2, 256),
    ("A", "a3", 1 / 3, 250),
    ("B", "b1", 0.25, 198),
    ("B", "b2", 0.25, 448),
]


def _cell(frame: pd.DataFrame, row: object, column: str) -> Any:
    """One value, typed loosely: pandas-stubs types `.loc[row, column]` as a union."""
    return frame[column].to_dict()[row]


def _frame(
    raw: dict[str, list[float]], stderr: dict[str, list[float]] | None = None
) -> pd.DataFrame:
    """Long scores for models m0, m1, ... from per-subtask lists."""
    n_models = len(next(iter(raw.values())))
    rows = [
        {
            "model": f"m{model}",
            "benchmark": benchmark,
            "subtask": subtask,
            "raw_score": raw[subtask][model],
            "stderr": None if stderr is None else stderr[subtask][model],
        }
        for model in range(n_models)
        for benchmark, subtask, _, _ in SUBTASKS
    ]
    return pd.DataFrame(rows)


def _intervals(result: Result, suite: Suite = SUITE) -> pd.DataFrame:
    return estimate_uncertainty(
        result.subtasks, result.leaderboard, suite, missing=result.missing
    ).leaderboard


def test_clipped_variance_is_the_censored_normal_variance() -> None:
    grid = np.linspace(-12.0, 12.0, 200_001)  # integrate max(0, Y) against N(mu, 1)
    density = np.exp(-0.5 * grid**2) / np.sqrt(2 * np.pi)
    for mean in (-2.0, -0.5, 0.0, 0.7, 3.0):
        clipped = np.maximum(grid + mean, 0.0)
        first = np.trapezoid(clipped * density, grid)
        second = np.trapezoid(clipped**2 * density, grid)
        assert clipped_variance([mean], [1.0])[0] == pytest.approx(
            second - first**2, abs=2e-6
        )
    # scale: Var(max(0, sY)) = s^2 Var(max(0, Y)); far above the bound clipping does nothing
    assert clipped_variance([0.0], [3.0])[0] == pytest.approx(9 * 0.3408451, rel=1e-6)
    assert clipped_variance([40.0, -40.0, 5.0], [2.0, 2.0, 0.0]) == pytest.approx(
        [4.0, 0.0, 0.0], abs=1e-12
    )
    values = clipped_variance(np.linspace(-5, 5, 101), np.ones(101))
    assert (np.diff(values) >= 0).all()
    assert (values <= 1.0).all()


def test_closed_form_by_hand_far_from_the_bounds() -> None:
    raw = {
        "a1": [0.9, 0.8],
        "a2": [0.7, 0.6],
        "a3": [0.8, 0.7],
        "b1": [0.6, 0.55],
        "b2": [0.7, 0.65],
    }
    stderr = {
        "a1": [0.02, 0.025],
        "a2": [0.03, 0.03],
        "a3": [0.025, 0.02],
        "b1": [0.035, 0.035],
        "b2": [0.021, 0.022],
    }
    result = normalize_scores(_frame(raw, stderr), SUITE)
    board = _intervals(result).set_index("model")
    for model in (0, 1):
        se_a = (
            np.sqrt(
                (100 * stderr["a1"][model] / 0.5) ** 2
                + (100 * stderr["a2"][model] / 0.8) ** 2
                + (100 * stderr["a3"][model] / (2 / 3)) ** 2
            )
            / 3
        )
        # lm-evaluation-harness's pooled_sample_stderr (lm_eval/api/metrics.py)
        se_pooled = harness_pooled_sample_stderr(
            [stderr["b1"][model], stderr["b2"][model]], [198, 448]
        )
        se_b = 100 * se_pooled / 0.75
        expected = np.sqrt(se_a**2 + se_b**2) / 2
        row = board.loc[f"m{model}"]
        assert row["average_stderr"] == pytest.approx(expected, rel=1e-9)
        z = normal_quantile(0.95)
        assert row["average_low"] == pytest.approx(
            row["average"] - z * expected, rel=1e-12
        )
        assert row["average_high"] == pytest.approx(
            row["average"] + z * expected, rel=1e-12
        )
        assert row["n_stderr_unknown"] == 0


def test_missing_stderr_is_binomial_when_n_is_known_else_counted() -> None:
    raw = {"a1": [0.9], "a2": [0.7], "a3": [0.8], "b1": [0.6], "b2": [0.7]}
    with_given = normalize_scores(
        _frame(
            raw,
            {
                name: [np.sqrt(p[0] * (1 - p[0]) / (n - 1))]
                for (_, name, _, n), p in zip(SUBTASKS, raw.values(), strict=True)
            },
        ),
        SUITE,
    )
    from_suite_n = normalize_scores(
        _frame(raw), SUITE
    )  # no stderr at all: n_samples from the suite
    assert _intervals(from_suite_n)["average_stderr"].iloc[0] == pytest.approx(
        _intervals(with_given)["average_stderr"].iloc[0], rel=1e-12
    )
    no_n = parse_suite(
        b'name = "x"\n[[benchmarks]]\nname = "A"\nsubtasks = [{ name = "a1", num_choices = 2 }]\n'
        b'[[benchmarks]]\nname = "B"\nsubtasks = [{ name = "b1", num_choices = 4, n_samples = 100 }]\n',
        source="<test>",
    )
    scores = pd.DataFrame(
        {
            "model": ["m", "m"],
            "benchmark": ["A", "B"],
            "subtask": ["a1", "b1"],
            "raw_score": [0.8, 0.5],
        }
    )
    result = normalize_scores(scores, no_n)
    board = _intervals(result, no_n)
    assert board["n_stderr_unknown"].tolist() == [1]  # a1: no stderr, no n_samples
    assert np.isnan(board["average_stderr"].iloc[0])  # unknown, not guessed as 0
    benchmarks = result.benchmarks.set_index("benchmark")
    assert benchmarks["stderr"].isna()["A"]
    assert benchmarks.loc["B", "stderr"] == pytest.approx(
        100 * np.sqrt(0.25 / 99) / 0.75, rel=1e-12
    )
    assert benchmarks.loc["B", "n_stderr_estimated"] == 1


def harness_pooled_sample_stderr(stderrs: list[float], sizes: list[int]) -> float:
    """lm-evaluation-harness 0.4's ``pooled_sample_stderr`` (lm_eval/api/metrics.py), vendored as the oracle."""
    pooled_sample_var = (
        sum(
            [
                (size - 1) * stderr**2 * size
                for size, stderr in zip(sizes, stderrs, strict=True)
            ]
        )
    ) / (sum(sizes) - len(sizes))
    return float(np.sqrt(pooled_sample_var / sum(sizes)))


def test_rank_intervals_by_hand() -> None:
    low = np.array([50.0, 49.0, 45.0, 44.5, 30.0])
    high = np.array([54.0, 51.0, 47.0, 46.0, 40.0])
    best, worst, group = rank_intervals(low, high)
    assert best.tolist() == [1.0, 1.0, 3.0, 3.0, 5.0]
    assert worst.tolist() == [2.0, 2.0, 4.0, 4.0, 5.0]
    assert group.tolist() == [1.0, 1.0, 2.0, 2.0, 3.0]


@dataclass(frozen=True, slots=True, kw_only=True)
class BootstrapCheck:
    """Closed-form standard errors of three models and a bootstrap's (docs/changes-and-health.md
    quotes them)."""

    closed: pd.Series  # average_stderr by model
    closed_benchmarks: pd.Series  # stderr by (model, benchmark)
    spread: pd.DataFrame  # the bootstrap's sd of average, A and B by model
    raw: dict[str, list[float]]
    stderr: dict[str, list[float]]


def closed_form_and_bootstrap() -> BootstrapCheck:
    """Per-sample 0/1 answers; resampling items is Binomial(n, p_hat) / n per subtask."""
    rng = np.random.default_rng(7)
    true_p = {  # model 2 sits at the a1 and b bounds: clipping matters there
        "a1": [0.90, 0.75, 0.52],
        "a2": [0.70, 0.45, 0.30],
        "a3": [0.80, 0.60, 0.40],
        "b1": [0.60, 0.40, 0.26],
        "b2": [0.65, 0.42, 0.25],
    }
    raw, stderr = {}, {}
    for _, name, _, n in SUBTASKS:
        answers = rng.random((3, n)) < np.array(true_p[name])[:, None]
        raw[name] = answers.mean(axis=1).tolist()
        stderr[name] = (
            answers.std(axis=1, ddof=1) / np.sqrt(n)
        ).tolist()  # the harness's stderr
    result = normalize_scores(_frame(raw, stderr), SUITE)
    uncertainty = estimate_uncertainty(
        result.subtasks, result.leaderboard, SUITE, missing="exclude"
    )
    closed = uncertainty.leaderboard.set_index("model")["average_stderr"]
    closed_benchmarks = uncertainty.benchmarks.set_index(["model", "benchmark"])[
        "stderr"
    ]

    replicates = 3000
    rows = []
    for benchmark, name, _, n in SUBTASKS:
        draws = rng.binomial(n, np.array(raw[name]), size=(replicates, 3)) / n
        for model in range(3):
            rows.append(
                pd.DataFrame(
                    {
                        "model": [f"m{model}#{b}" for b in range(replicates)],
                        "benchmark": benchmark,
                        "subtask": name,
                        "raw_score": draws[:, model],
                    }
                )
            )
    boot = normalize_scores(pd.concat(rows, ignore_index=True), SUITE)
    board = boot.leaderboard.assign(
        base=boot.leaderboard["model"].str.split("#").str[0]
    )
    spread = board.groupby("base")[["average", "A", "B"]].std(ddof=1)
    return BootstrapCheck(
        closed=closed,
        closed_benchmarks=closed_benchmarks,
        spread=spread,
        raw=raw,
        stderr=stderr,
    )


def test_closed_form_matches_a_bootstrap_over_per_sample_data() -> None:
    check = closed_form_and_bootstrap()
    closed, closed_benchmarks, spread = (
        check.closed,
        check.closed_benchmarks,
        check.spread,
    )
    raw, stderr = check.raw, check.stderr
    for name in ("m0", "m1", "m2"):
        assert closed[name] == pytest.approx(_cell(spread, name, "average"), rel=0.06)
        for benchmark in ("A", "B"):
            assert closed_benchmarks[(name, benchmark)] == pytest.approx(
                _cell(spread, name, benchmark), rel=0.08
            )
    # m2's B is just above its bound: not clipped, so the harness's linear stderr
    pooled = (198 * raw["b1"][2] + 448 * raw["b2"][2]) / 646
    assert pooled >= 0.25
    linear_b = (
        100
        * harness_pooled_sample_stderr([stderr["b1"][2], stderr["b2"][2]], [198, 448])
        / 0.75
    )
    assert closed_benchmarks[("m2", "B")] == pytest.approx(linear_b, rel=1e-12)


@pytest.fixture(scope="module")
def demo() -> Result:
    return run()


def test_demo_intervals(demo: Result) -> None:
    board = estimate_uncertainty(
        demo.subtasks, demo.leaderboard, demo.suite, missing=demo.missing
    ).leaderboard
    assert len(board) == 4576
    assert board["rank_best"].notna().all()
    rank = board["rank"].astype(float)
    assert (board["rank_best"].astype(float) <= rank).all()
    assert (rank <= board["rank_worst"].astype(float)).all()
    # the demo's IFEval has no stderr: estimated as binomial (541 prompts, 834
    # instructions), so nothing is unknown
    assert (board["n_stderr_unknown"] == 0).all()
    estimated = demo.benchmarks.set_index("benchmark")["n_stderr_estimated"]
    assert (estimated.loc["IFEval"] == 2).all()
    assert (estimated.drop("IFEval") == 0).all()
    assert board["average_stderr"].between(0.15, 0.8).all()
    assert (board["average_low"] <= board["average"]).all()
    assert (board["average"] <= board["average_high"]).all()
    top = board[board["tie_group"] == 1]
    assert top["rank"].min() == 1
    # a tie group: nobody's interval lies wholly above another's
    assert top["average_low"].max() <= top["average_high"].min()
    # groups are ordered: a later group's best rank is worse
    first = board.groupby("tie_group")["rank_best"].first().astype(float)
    assert first.is_monotonic_increasing


def test_tables_that_do_not_belong_together_raise(demo: Result, tmp_path: Path) -> None:
    with pytest.raises(
        InputError,
        match=r"have no leaderboard row.*\n.*Hint: pass the subtasks and leaderboard of one result",
    ):
        estimate_uncertainty(demo.subtasks, demo.leaderboard.head(10), demo.suite)


def test_level_must_be_a_probability() -> None:
    with pytest.raises(
        ValueError, match=r"level must be in \(0, 1\).*\n.*Hint: use 0.95"
    ):
        normal_quantile(95)
