"""lbnorm.engines.stderr against independent oracles: math.erfc, scipy, Monte Carlo, the harness.

The harness's own formulas are vendored in ``tests/oracles/harness_metrics.py``
(lm-evaluation-harness ``lm_eval/api/metrics.py``, MIT).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracles.harness_metrics import (
    agg_inst_level_acc,
    mean_stderr,
    pooled_sample_stderr,
)
from scipy import stats

import lbnorm
from lbnorm.engines import stderr as lbnorm_stderr
from lbnorm.engines.stderr import (
    binomial_stderr,
    clipped_variance,
    erfc,
    score_variance,
    upper_tail,
)

#: The smallest normal double: below it math.erfc's result has fewer digits.
TINY = np.finfo(np.float64).tiny

#: Worst relative error of lbnorm's erfc against math.erfc where the result is a
#: normal double: measured 1.11e-15 (about 5 ulp) on 10 million uniform points
#: in [-6, 26.5]; 1.0e-15 on the dense grid below.
ERFC_RTOL = 1.5e-15

HARNESS_GROUPS = Path(__file__).parent / "fixtures" / "harness_groups"
YI = HARNESS_GROUPS / "01-ai/Yi-34B-Chat/results_2025-02-13T18-27-04.338360.json"


def _math_erfc(x: np.ndarray) -> np.ndarray:
    return np.array([math.erfc(value) for value in x.tolist()])


def _assert_erfc_exact(x: np.ndarray) -> None:
    expected = _math_erfc(x)
    actual = erfc(x)
    normal = expected >= TINY
    relative = np.abs(actual[normal] / expected[normal] - 1.0)
    assert relative.max(initial=0.0) <= ERFC_RTOL, x[normal][relative.argmax()]
    # a subnormal result (x > 26.54) keeps a few bits: within 4 of its last units
    spacing = np.spacing(expected[~normal])
    assert (np.abs(actual[~normal] - expected[~normal]) <= 4 * spacing).all()


# erfc ------------------------------------------------------------------------------


def test_erfc_is_math_erfc_on_a_dense_grid_to_the_deep_tail() -> None:
    thresholds = [0.46875, 4.0, 26.0, 26.5, 26.543, 27.2]  # range boundaries, underflow
    edges = np.array(
        [t + d for t in thresholds for d in (-1e-12, 0.0, 1e-12)]
        + [np.nextafter(t, s) for t in (0.46875, 4.0) for s in (0.0, 10.0)]
    )
    grid = np.concatenate([np.linspace(-30.0, 27.5, 460_001), edges, -edges])
    _assert_erfc_exact(grid)
    # the deep tail is really covered: results down to the smallest doubles
    assert erfc(np.array([26.0]))[0] == pytest.approx(5.663192408856143e-296, rel=1e-15)
    assert erfc(np.array([-26.0, 30.0])).tolist() == [2.0, 0.0]


@given(st.floats(-40.0, 40.0, allow_nan=False))
def test_erfc_is_math_erfc_anywhere(x: float) -> None:
    _assert_erfc_exact(np.array([x, -x]))


def _grid() -> np.ndarray:
    thresholds = [0.46875, 4.0, 26.0, 26.5, 27.2]
    edges = np.array(
        [t + d for t in thresholds for d in (-1e-12, 0.0, 1e-12)]
        + [np.nextafter(t, s) for t in (0.46875, 4.0) for s in (0.0, 10.0)]
    )
    return np.concatenate(
        [np.linspace(-30.0, 27.5, 100_001), edges, -edges, [0.0, -0.0]]
    )


def test_both_erfc_are_the_two_calls_bit_for_bit() -> None:
    """clipped_variance takes erfc(x) and erfc(-x) in one pass: the same bits."""
    grid = _grid()
    both = lbnorm_stderr._erfc_both(grid)
    assert both[0].tobytes() == erfc(grid).tobytes()
    assert both[1].tobytes() == erfc(-grid).tobytes()
    tails = lbnorm_stderr._tails(grid)
    assert tails[0].tobytes() == upper_tail(grid).tobytes()
    assert tails[1].tobytes() == upper_tail(-grid).tobytes()


@given(st.floats(-40.0, 40.0, allow_nan=False))
def test_both_tails_are_the_two_calls_anywhere(x: float) -> None:
    values = np.array([x, -x])
    upper, lower = lbnorm_stderr._tails(values)
    assert upper.tobytes() == upper_tail(values).tobytes()
    assert lower.tobytes() == upper_tail(-values).tobytes()


def test_erfc_keeps_shape_and_takes_scalars() -> None:
    block = np.array([[0.1, 2.0], [-3.0, 6.0]])
    assert erfc(block).shape == (2, 2)
    assert erfc(0.5).shape == ()
    assert float(erfc(0.5)) == pytest.approx(math.erfc(0.5), rel=ERFC_RTOL)


def test_upper_tail_is_scipy_normal_survival() -> None:
    x = np.linspace(-8.0, 37.0, 90_001)
    expected = stats.norm.sf(x)
    actual = upper_tail(x)
    normal = expected >= TINY
    # x / sqrt(2) is rounded once: about x^2 * 2e-16 relative in the far tail
    np.testing.assert_allclose(actual[normal], expected[normal], rtol=1e-12, atol=0)


# clipped (censored normal) variance ------------------------------------------------


def _censored_variance_scipy(mean: float, sd: float) -> float:
    """Var(max(0, Y)), Y ~ N(mean, sd^2), from scipy's truncated normal moments.

    With ``p = P(Y > 0)`` and ``T = Y | Y > 0``: ``E[max(0, Y)^k] = p E[T^k]``, so
    ``Var = p Var(T) + p (1 - p) E[T]^2`` (no cancellation).
    """
    p = float(stats.norm.sf(0.0, loc=mean, scale=sd))
    truncated = stats.truncnorm(a=-mean / sd, b=np.inf, loc=mean, scale=sd)
    return float(p * truncated.var() + p * (1.0 - p) * truncated.mean() ** 2)


@pytest.mark.slow
@pytest.mark.parametrize("sd", [0.3, 1.0, 7.5])
def test_clipped_variance_is_scipys_censored_normal(sd: float) -> None:
    ratios = np.linspace(-37.0, 37.0, 741)  # mean / sd
    expected = np.array([_censored_variance_scipy(r * sd, sd) for r in ratios])
    actual = clipped_variance(ratios * sd, np.full_like(ratios, sd))
    near = np.abs(ratios) <= 10.0
    # near the bound (where a clipped score's variance matters) to 1e-9 relative:
    # measured 1.2e-10 at mean = -10 sd, 1.6e-12 within 5 sd
    np.testing.assert_allclose(actual[near], expected[near], rtol=1e-9, atol=0)
    # everywhere to 1e-15 of sd^2 (or 1e-13 relative): far below the bound it is below
    # 1e-23 sd^2 and its digits cancel (both lbnorm's and scipy's)
    np.testing.assert_allclose(actual, expected, rtol=1e-13, atol=1e-15 * sd**2)
    # more variance the higher the mean (up to a rounding where it reaches sd^2)
    assert (np.diff(actual) >= -1e-15 * sd**2).all()
    assert (actual <= sd**2).all()


@pytest.mark.parametrize(
    ("mean", "sd"), [(-1.0, 1.0), (0.0, 2.0), (0.5, 1.0), (-0.2, 0.5), (3.0, 1.0)]
)
def test_clipped_variance_matches_a_monte_carlo(mean: float, sd: float) -> None:
    draws = np.maximum(np.random.default_rng(11).normal(mean, sd, size=2_000_000), 0.0)
    simulated = draws.var(ddof=1)
    # the Monte Carlo's own standard error of a variance: sqrt((m4 - var^2) / n)
    centred = draws - draws.mean()
    noise = math.sqrt(((centred**4).mean() - simulated**2) / draws.size)
    assert abs(clipped_variance([mean], [sd])[0] - simulated) <= 5 * noise


def test_score_variance_is_linear_unless_clipped() -> None:
    means = np.array([-3.0, -0.1, 0.0, 0.1, 20.0])
    sds = np.array([1.0, 2.0, 2.0, 2.0, 4.0])
    variance = score_variance(means, sds)
    np.testing.assert_array_equal(variance[2:], sds[2:] ** 2)  # as the harness does
    np.testing.assert_array_equal(variance[:2], clipped_variance(means[:2], sds[:2]))
    # at the bound: Var(max(0, Z)) = E[Z^2; Z > 0] - E[max(0, Z)]^2 = 1/2 - 1/(2 pi)
    assert clipped_variance([0.0], [1.0])[0] == pytest.approx(
        0.5 - 1 / (2 * math.pi), rel=1e-15
    )


# pooled standard error --------------------------------------------------------------


def _harness_sum_of_squares(stderrs: list[float], sizes: list[int]) -> float:
    """The numerator the harness forms, summed in the harness's order."""
    return sum(
        (size - 1) * stderr**2 * size
        for size, stderr in zip(sizes, stderrs, strict=True)
    )


def test_pooled_sample_stderr_by_hand() -> None:
    stderrs, sizes = [0.1, 0.2], [10, 30]
    # sqrt((9 * 10 * 0.01 + 29 * 30 * 0.04) / (40 - 2) / 40) = sqrt(35.7 / 1520)
    by_hand = math.sqrt(35.7 / 38 / 40)
    ours = lbnorm_stderr.pooled_sample_stderr(
        _harness_sum_of_squares(stderrs, sizes), sum(sizes), len(sizes)
    )
    assert float(ours) == pytest.approx(by_hand, rel=1e-15)
    assert float(ours) == pooled_sample_stderr(stderrs, sizes)
    # one item per subtask leaves no degrees of freedom: NaN, where the harness divides by 0
    assert np.isnan(lbnorm_stderr.pooled_sample_stderr(0.0, 3, 3))
    with pytest.raises(ZeroDivisionError, match="division by zero"):
        pooled_sample_stderr([0.1, 0.2, 0.3], [1, 1, 1])


def test_pooled_sample_stderr_on_yi_34b_chat_gpqa() -> None:
    """The real file's GPQA subtasks give its `groups` stderr, bit for bit."""
    data = json.loads(YI.read_text())
    tasks = [
        "leaderboard_gpqa_diamond",
        "leaderboard_gpqa_extended",
        "leaderboard_gpqa_main",
    ]
    stderrs = [data["results"][task]["acc_norm_stderr,none"] for task in tasks]
    sizes = [data["n-samples"][task]["effective"] for task in tasks]
    assert sizes == [198, 546, 448]
    expected = data["groups"]["leaderboard_gpqa"]["acc_norm_stderr,none"]
    assert expected == 0.013717885578733728
    assert pooled_sample_stderr(stderrs, sizes) == expected
    ours = lbnorm_stderr.pooled_sample_stderr(
        _harness_sum_of_squares(stderrs, sizes), sum(sizes), len(sizes)
    )
    assert float(ours) == expected
    # and not the variance of a weighted mean of independent means (lbnorm before
    # issue 11): sqrt(sum(n^2 se^2)) / N is 3.6e-6 relative off
    weighted = math.sqrt(
        sum((n * se) ** 2 for n, se in zip(sizes, stderrs, strict=True))
    )
    assert weighted / sum(sizes) / expected - 1 == pytest.approx(-3.6e-6, abs=5e-8)


subtask_stderrs = st.lists(
    st.tuples(st.integers(2, 20_000), st.floats(0.0, 0.5)), min_size=1, max_size=30
)


@given(subtasks=subtask_stderrs)
def test_pooled_sample_stderr_is_the_harness_formula(
    subtasks: list[tuple[int, float]],
) -> None:
    sizes = [size for size, _ in subtasks]
    stderrs = [stderr for _, stderr in subtasks]
    ours = lbnorm_stderr.pooled_sample_stderr(
        _harness_sum_of_squares(stderrs, sizes), sum(sizes), len(sizes)
    )
    assert float(ours) == pooled_sample_stderr(
        stderrs, sizes
    )  # same numbers, same bits


@given(subtasks=subtask_stderrs)
def test_pooled_sample_stderr_from_numpy_sums(
    subtasks: list[tuple[int, float]],
) -> None:
    """Vectorized, as the kernel calls it (sums in another order): to 1e-13."""
    sizes = np.array([size for size, _ in subtasks], dtype=float)
    stderrs = np.array([stderr for _, stderr in subtasks])
    squares = ((sizes - 1) * sizes * stderrs**2).sum()
    ours = lbnorm_stderr.pooled_sample_stderr(
        squares[None], sizes.sum()[None], [len(sizes)]
    )
    expected = pooled_sample_stderr(stderrs.tolist(), sizes.astype(int).tolist())
    assert ours.shape == (1,)
    assert ours[0] == pytest.approx(expected, rel=1e-13, abs=1e-300)


# binomial fallback ----------------------------------------------------------------


@given(n=st.integers(2, 3_000), data=st.data())
def test_binomial_stderr_is_the_harness_mean_stderr_of_0_1_items(
    n: int, data: st.DataObject
) -> None:
    correct = data.draw(st.integers(0, n))
    items = [1.0] * correct + [0.0] * (n - correct)
    expected = mean_stderr(items)
    ours = float(binomial_stderr([correct / n], [n])[0])
    assert ours == pytest.approx(expected, rel=1e-12, abs=1e-300)


def test_binomial_stderr_needs_two_items() -> None:
    assert np.isnan(binomial_stderr([0.5, 1.0], [1, 0])).all()
    assert binomial_stderr([0.5], [101]).tolist() == [0.05]


def test_ifeval_instruction_level_fallback_counts_instructions() -> None:
    """IFEval's inst-level stderr is "N/A" in real files; the fallback uses n = 834.

    Yi-34B-Chat followed 440 of the 834 instructions (``agg_inst_level_acc``
    flattens each prompt's list of instructions): the harness's ``mean_stderr``
    of those 834 0/1 items is the stderr it would have reported.
    """
    data = json.loads(YI.read_text())
    ifeval = data["results"]["leaderboard_ifeval"]
    assert ifeval["inst_level_strict_acc_stderr,none"] == "N/A"
    assert data["n-samples"]["leaderboard_ifeval"]["effective"] == 541  # prompts
    followed = [
        [True] * 440,
        [False] * 394,
    ]  # grouped any way: only the flat list counts
    assert agg_inst_level_acc(followed) == ifeval["inst_level_strict_acc,none"]
    inst_stderr = mean_stderr([1.0] * 440 + [0.0] * 394)
    prompt_stderr = ifeval["prompt_level_strict_acc_stderr,none"]
    expected = math.sqrt(prompt_stderr**2 + inst_stderr**2) / 2  # mean of the two
    wrong = (
        math.sqrt(prompt_stderr**2 + mean_stderr([1.0] * 285 + [0.0] * 256) ** 2) / 2
    )

    benchmarks = lbnorm.run([YI]).benchmarks.set_index("benchmark")
    row = benchmarks.loc["IFEval"]
    assert row["raw_stderr"] == pytest.approx(expected, rel=0, abs=1e-12)
    assert abs(row["raw_stderr"] - wrong) > 1e-3  # what n = 541 prompts would give
    assert row["stderr"] == pytest.approx(100 * expected, rel=0, abs=1e-10)  # lb = 0
    # the fallback is marked: one estimated subtask in IFEval, none elsewhere
    assert benchmarks["n_stderr_estimated"].to_dict() == {
        "IFEval": 1, "BBH": 0, "MATH Lvl 5": 0, "GPQA": 0, "MUSR": 0, "MMLU-PRO": 0,
    }  # fmt: skip


def test_ifeval_fallback_ignores_a_prompt_count_given_as_n_samples() -> None:
    """A long table's n_samples (prompts) does not replace the instruction count."""
    import pandas as pd

    scores = pd.DataFrame(
        {
            "model": ["m", "m"],
            "benchmark": ["IFEval", "IFEval"],
            "subtask": ["prompt_level_strict", "inst_level_strict"],
            "raw_score": [223 / 541, 440 / 834],
            "stderr": [0.02, None],
            "n_samples": [541, 541],
        }
    )
    result = lbnorm.normalize_scores(
        scores, options=lbnorm.RunOptions(missing="partial")
    )
    row = result.benchmarks.set_index("benchmark").loc["IFEval"]
    inst_stderr = mean_stderr([1.0] * 440 + [0.0] * 394)
    assert row["raw_stderr"] == pytest.approx(
        math.sqrt(0.02**2 + inst_stderr**2) / 2, rel=0, abs=1e-12
    )
    assert row["n_stderr_estimated"] == 1
