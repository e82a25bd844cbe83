from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from dense_oracle import aggregate_benchmarks
from hypothesis import given
from hypothesis import strategies as st
from strategies import lower_bounds, num_choices, raw_scores

from lbnorm.board import average_rows, rank_descending
from lbnorm.engines.kernel import (
    SuiteArrays,
    normalize,
)
from lbnorm.suites import load_suite


def _suite(
    bounds: list[float],
    benchmark: list[int],
    pooled: list[bool],
    n: list[int] | None = None,
) -> SuiteArrays:
    return SuiteArrays(
        lower_bound=np.array(bounds),
        n_samples=np.array(n if n is not None else [0] * len(bounds), dtype=np.float64),
        benchmark_index=np.array(benchmark),
        is_pooled=np.array(pooled),
        weight=np.ones(len(pooled)),
    )


def test_seed_gpqa_example() -> None:
    # ../shared/seeds/000: GPQA has 4 choices, raw 0.6 -> 46.67
    normalized, is_clipped = normalize(np.array([0.6]), np.array([1 / 4]))
    assert f"{normalized[0]:.2f}" == "46.67"
    assert not is_clipped[0]


def test_seed_musr_example_needs_the_exact_bound() -> None:
    # murder mysteries k=2, object placement k=5, team allocation k=3
    raw = np.array([[0.7, 0.4, 0.6]])
    suite = _suite([1 / 2, 1 / 5, 1 / 3], [0, 0, 0], [False])
    normalized = normalize(raw, suite.lower_bound)[0]
    assert normalized.round(2).tolist() == [[40.0, 25.0, 40.0]]
    result = aggregate_benchmarks(raw, suite, missing="exclude")
    assert result.normalized[0, 0] == pytest.approx(35.0, abs=1e-12)
    # the page's rounded 0.333 does not give the printed 40.00 and 35.00
    rounded, _ = normalize(raw, np.array([0.5, 0.2, 0.333]))
    assert f"{rounded[0, 2]:.2f}" != "40.00"


def test_clipping_happens_per_subtask_before_averaging() -> None:
    raw = np.array([[0.4, 0.9]])  # first below its 0.5 bound
    suite = _suite([0.5, 0.5], [0, 0], [False])
    is_clipped = normalize(raw, suite.lower_bound)[1]
    assert is_clipped.tolist() == [[True, False]]
    result = aggregate_benchmarks(raw, suite, missing="exclude")
    assert result.normalized[0, 0] == pytest.approx((0 + 80) / 2)
    assert result.raw[0, 0] == pytest.approx(0.65)


def test_pooling_weights_by_samples_then_clips_once() -> None:
    # GPQA: diamond/extended/main 198/546/448, one bound 0.25
    raw = np.array([[0.30, 0.20, 0.25]])
    suite = _suite([0.25] * 3, [0, 0, 0], [True], [198, 546, 448])
    result = aggregate_benchmarks(raw, suite, missing="exclude")
    pooled = (0.30 * 198 + 0.20 * 546 + 0.25 * 448) / (198 + 546 + 448)
    assert result.raw[0, 0] == pytest.approx(pooled, abs=1e-15)
    assert result.normalized[0, 0] == 0.0  # pooled < 0.25, though diamond is above


def test_missing_policies() -> None:
    raw = np.array([[0.8, np.nan], [0.6, 0.7]])
    suite = _suite([0.0, 0.0], [0, 1], [False, False])
    excluded = aggregate_benchmarks(raw, suite, missing="exclude")
    assert np.isnan(excluded.normalized[0, 1])
    assert excluded.n_present.tolist() == [[1, 0], [1, 1]]
    averages = {
        policy: average_rows(
            load_suite("openllm-v2"),  # (its board: the mean of benchmark scores)
            suite,
            aggregate_benchmarks(raw, suite, missing=policy).normalized,
            np.full((2, 2), np.nan),
            np.ones((2, 2)),
            missing=policy,
        )[0]
        for policy in ("exclude", "partial", "zero")
    }
    assert np.isnan(averages["exclude"][0])
    assert averages["partial"][0] == pytest.approx(80.0)
    assert averages["zero"][0] == pytest.approx(40.0)
    for policy in averages:
        assert averages[policy][1] == pytest.approx(65.0)


def test_missing_subtask_inside_a_benchmark() -> None:
    raw = np.array([[0.8, np.nan]])
    suite = _suite([0.0, 0.0], [0, 0], [False])
    assert np.isnan(
        aggregate_benchmarks(raw, suite, missing="exclude").normalized[0, 0]
    )
    assert aggregate_benchmarks(raw, suite, missing="partial").normalized[
        0, 0
    ] == pytest.approx(80.0)
    assert aggregate_benchmarks(raw, suite, missing="zero").normalized[
        0, 0
    ] == pytest.approx(40.0)


def test_weighted_average() -> None:
    scores = np.array([[10.0, 40.0]])
    suite = replace(
        _suite([0.0, 0.0], [0, 1], [False, False]), weight=np.array([1.0, 2.0])
    )
    average, _ = average_rows(
        load_suite("openllm-v2"),
        suite,
        scores,
        scores,
        np.ones((1, 2)),
        missing="exclude",
    )
    assert average[0] == pytest.approx(30.0)


def test_ranks_share_the_smallest_rank_on_ties() -> None:
    ranks = rank_descending(np.array([50.0, 70.0, 50.0, np.nan, 10.0, 70.0]))
    assert ranks.tolist()[:3] == [3.0, 1.0, 3.0]
    assert np.isnan(ranks[3])
    assert ranks.tolist()[4:] == [5.0, 1.0]


@given(
    values=st.lists(
        st.one_of(
            st.sampled_from([0.0, -0.0, 1.5, 70.0, np.nan]),
            st.floats(-1e3, 1e3, allow_nan=False),
        ),
        max_size=60,
    )
)
def test_ranks_are_scipy_min_ranks(values: list[float]) -> None:
    """1 + how many are strictly higher; NaN unranked (oracle: scipy's min rank)."""
    scipy_stats = pytest.importorskip("scipy.stats")
    array = np.array(values, dtype=np.float64)
    ranks = rank_descending(array)
    is_nan = np.isnan(array)
    assert np.isnan(ranks[is_nan]).all()
    expected = scipy_stats.rankdata(-array[~is_nan], method="min")
    assert ranks[~is_nan].tolist() == expected.astype(float).tolist()


@given(raw=raw_scores, bound=lower_bounds)
def test_normalized_is_in_range(raw: float, bound: float) -> None:
    value = normalize(np.array([raw]), np.array([bound]))[0][0]
    assert 0.0 <= value <= 100.0 + 1e-9


@given(a=raw_scores, b=raw_scores, bound=lower_bounds)
def test_normalized_is_monotone(a: float, b: float, bound: float) -> None:
    low, high = sorted((a, b))
    values = normalize(np.array([low, high]), np.array([bound, bound]))[0]
    assert values[0] <= values[1]


@given(bound=lower_bounds)
def test_bound_maps_to_zero_and_one_to_hundred(bound: float) -> None:
    values = normalize(np.array([bound, 1.0]), np.array([bound, bound]))[0]
    assert values[0] == 0.0
    assert values[1] == pytest.approx(100.0, abs=1e-9)


@given(
    raw=raw_scores,
    k=num_choices,
    pooled=st.booleans(),
)
def test_one_subtask_benchmark_equals_its_subtask(
    raw: float, k: int, pooled: bool
) -> None:
    bound = 1 / k if k else 0.0
    suite = _suite([bound], [0], [pooled], [100])
    matrix = np.array([[raw]])
    normalized, _ = normalize(matrix, suite.lower_bound)
    result = aggregate_benchmarks(matrix, suite, missing="exclude")
    assert result.normalized[0, 0] == pytest.approx(normalized[0, 0], abs=1e-12)
    assert result.raw[0, 0] == pytest.approx(raw, abs=1e-15)
