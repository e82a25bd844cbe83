"""Invariants of the whole computation, on generated leaderboards."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import leaderboards

from lbnorm import load_suite, normalize_scores

SUITE = load_suite("openllm-v2")
SUBTASKS = SUITE.subtask_table()


@pytest.mark.slow
@given(scores=leaderboards(), seed=st.integers(0, 2**32 - 1))
def test_row_order_does_not_change_any_output(scores: pd.DataFrame, seed: int) -> None:
    shuffled = scores.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    first, second = normalize_scores(scores, SUITE), normalize_scores(shuffled, SUITE)
    for name in ("subtasks", "benchmarks", "leaderboard"):
        left = getattr(first, name).drop(columns="source", errors="ignore")
        right = getattr(second, name).drop(columns="source", errors="ignore")
        pd.testing.assert_frame_equal(
            left, right, check_exact=False, atol=1e-12, rtol=0
        )


@given(scores=leaderboards())
def test_outputs_in_range_and_consistent(scores: pd.DataFrame) -> None:
    result = normalize_scores(scores, SUITE)
    assert result.subtasks["normalized_score"].between(0, 100 + 1e-9).all()
    assert result.benchmarks["normalized_score"].between(0, 100 + 1e-9).all()
    board = result.leaderboard
    assert board["average"].between(0, 100 + 1e-9).all()
    np.testing.assert_allclose(
        board["average"], board[SUITE.benchmark_names].mean(axis=1), atol=1e-9
    )
    assert board["rank"].iloc[0] == 1
    assert board["rank"].is_monotonic_increasing
    assert (board["average"].diff().dropna() <= 1e-12).all()
    clipped = result.subtasks["raw_score"] < result.subtasks["lower_bound"]
    assert (result.subtasks["is_clipped"] == clipped).all()
    assert (result.subtasks.loc[clipped, "normalized_score"] == 0).all()


@given(scores=leaderboards(), delta=st.floats(0.0, 1.0))
def test_raising_a_raw_score_never_lowers_the_average(
    scores: pd.DataFrame, delta: float
) -> None:
    first_model = scores["model"].iloc[0]
    before = normalize_scores(scores, SUITE).leaderboard.set_index(
        ["model", "precision"]
    )["average"]
    raised = scores.assign(
        raw_score=np.where(
            scores["model"] == first_model,
            np.minimum(scores["raw_score"] + delta, 1.0),
            scores["raw_score"],
        )
    )
    after = normalize_scores(raised, SUITE).leaderboard.set_index(
        ["model", "precision"]
    )["average"]
    key = (first_model, scores["precision"].iloc[0])
    assert after.loc[key] >= before.loc[key] - 1e-12


def test_all_at_bound_is_zero_and_all_perfect_is_hundred() -> None:
    at_bound = SUBTASKS.assign(model="floor", raw_score=SUBTASKS["lower_bound"])
    perfect = SUBTASKS.assign(model="ceiling", raw_score=1.0)
    board = normalize_scores(
        pd.concat([at_bound, perfect])[["model", "benchmark", "subtask", "raw_score"]],
        SUITE,
    ).leaderboard
    assert board.set_index("model")["average"].to_dict() == pytest.approx(
        {"ceiling": 100.0, "floor": 0.0}
    )
