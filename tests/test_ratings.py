"""Pairwise ratings against independent oracles: scikit-learn and scipy fits, plain loops.

The oracles are written here from the reference's description (FastChat's
``rating_systems.py`` and its 2023 ``elo_analysis.py`` / notebook), on expanded
rows, one battle or one round at a time: nothing in them shares code with the
count-matrix kernels they check.
"""

from __future__ import annotations

import ast
import math
import re
import signal
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import expit, log_expit
from sklearn.linear_model import LogisticRegression  # type: ignore[import-untyped]
from source_trees import nodes
from strategies import battle_sets, make_battles

from lbnorm.core.errors import (
    Cancelled,
    InputError,
    RatingOptionsError,
    RatingsNotIdentifiableError,
)
from lbnorm.core.schemas import PAIRWISE_SCORES, RATINGS, WIN_RATES
from lbnorm.ratings import (
    Battles,
    RatingOptions,
    Ratings,
    bootstrap_elo,
    compute_ratings,
    count_outcomes,
    draw_multinomial,
    estimate_bootstrap_bytes,
    fit_bradley_terry,
    online_elo,
    parse_anchor,
    percentile_intervals,
    predicted_win_rates,
    rank_with_uncertainty,
    ratings_table,
    read_battles,
    score_against_reference,
    win_matrix,
    win_rates_table,
)
from lbnorm.ratings import bootstrap as bootstrap_module
from lbnorm.ratings.options import Method

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
FOLDER = Path(__file__).parent / "fixtures" / "battles"
LN10 = math.log(10.0)


def synthetic(
    k: int, n: int, *, seed: int, spread: float = 150.0, tie_rate: float = 0.15
) -> tuple[Battles, FloatArray]:
    """Battles drawn from known ratings (mean 1000), a tie being half a win."""
    rng = np.random.default_rng(seed)
    true = rng.normal(0.0, spread, k)
    true += 1000.0 - true.mean()
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p_a = 1.0 / (1.0 + 10.0 ** ((true[b] - true[a]) / 400.0))
    # ties take probability q half from each side: A's expected score stays p_a
    q = tie_rate * 2 * np.minimum(p_a, 1 - p_a)
    u = rng.random(n)
    outcome = np.where(u < p_a - q / 2, 2, np.where(u < p_a + q / 2, 1, 0))
    return make_battles(a, b, outcome, k=k, tstamp=np.arange(n, dtype=float)), true


# --- oracles ---------------------------------------------------------------------


def sklearn_one_row(
    battles: Battles, *, c: float, drop_ties: bool = False
) -> FloatArray:
    """scikit-learn on one row per battle (the 2023-05 notebook's design with ties
    dropped): +-ln10 columns, a tie as two rows of weight 1/2, one won by each side;
    LogisticRegression(C, no intercept, tol=1e-10)."""
    a, b, o = battles.model_a, battles.model_b, battles.outcome
    if drop_ties:
        keep = o != 1
        a, b, o = a[keep], b[keep], o[keep]
    tie = o == 1
    first = np.concatenate([a, a[tie]])  # ties: a second row, won by B
    second = np.concatenate([b, b[tie]])
    label = np.concatenate([(o >= 1).astype(float), np.zeros(int(tie.sum()))])
    weight = np.concatenate([np.where(tie, 0.5, 1.0), np.full(int(tie.sum()), 0.5)])
    n, k = len(first), len(battles.models)
    design = np.zeros((n, k))
    design[np.arange(n), first] = +LN10
    design[np.arange(n), second] = -LN10
    model = LogisticRegression(C=c, fit_intercept=False, tol=1e-10, max_iter=10_000)
    model.fit(design, label, sample_weight=weight)
    return np.asarray(400.0 * model.coef_[0] + 1000.0, dtype=np.float64)


def sklearn_2023(battles: Battles, *, c: float) -> FloatArray:
    """FastChat's later compute_mle_elo design: every battle twice, +-ln10 columns,
    a tie once as A's win and once as B's; LogisticRegression(C, no intercept)."""
    a, b, o = battles.model_a, battles.model_b, battles.outcome
    n, k = len(a), len(battles.models)
    rows = np.arange(2 * n)
    design = np.zeros((2 * n, k))
    design[rows, np.concatenate([a, a])] = +LN10
    design[rows, np.concatenate([b, b])] = -LN10
    outcome = np.concatenate([o, o])
    label = (outcome == 2).astype(float)
    label[:n][o == 1] = 1.0  # first copy of a tie: A won; second copy: B won
    model = LogisticRegression(
        C=c, fit_intercept=False, solver="newton-cholesky", tol=1e-14, max_iter=500
    )
    model.fit(design, label)
    return np.asarray(400.0 * model.coef_[0] + 1000.0, dtype=np.float64)


def sklearn_pivot(battles: Battles, *, c: float) -> FloatArray:
    """The later 2023 variant: one row per ordered pair and label, weighted by
    2 * wins + ties (both orders listed), fitted with sample weights."""
    k = len(battles.models)
    wins2 = np.zeros((k, k))  # 2 * wins + ties, from the battles one by one
    for a, b, o in zip(battles.model_a, battles.model_b, battles.outcome, strict=True):
        if o == 2:
            wins2[a, b] += 2
        elif o == 0:
            wins2[b, a] += 2
        else:
            wins2[a, b] += 1
            wins2[b, a] += 1
    design, label, weight = [], [], []
    for i in range(k):
        for j in range(k):
            if i == j or wins2[i, j] + wins2[j, i] == 0:
                continue
            row = np.zeros(k)
            row[i], row[j] = LN10, -LN10
            design += [row, row]
            label += [1.0, 0.0]
            weight += [wins2[i, j], wins2[j, i]]
    model = LogisticRegression(
        C=c, fit_intercept=False, solver="newton-cholesky", tol=1e-14, max_iter=500
    )
    model.fit(np.array(design), np.array(label), sample_weight=np.array(weight))
    return np.asarray(400.0 * model.coef_[0] + 1000.0, dtype=np.float64)


def _minimise(loss: Any, grad: Any, hess: Any, k: int) -> FloatArray:
    """scipy's trust-region Newton, then plain Newton steps (least squares: the
    Hessian is singular along the constant) until they stop moving; mean 1000."""
    result = minimize(
        loss,
        np.zeros(k),
        jac=grad,
        hess=hess,
        method="trust-exact",
        options={"gtol": 1e-8},
    )
    theta = result.x
    for _ in range(20):
        step = np.linalg.lstsq(hess(theta), -grad(theta), rcond=1e-12)[0]
        theta = theta + step
        if np.abs(step).max() < 1e-13:
            break
    assert np.abs(grad(theta)).max() < 1e-8
    return np.asarray(400.0 * (theta - theta.mean()) + 1000.0, dtype=np.float64)


def scipy_rows(battles: Battles, *, drop_ties: bool = False) -> FloatArray:
    """Unregularised MLE on the battles one row each (y = 1, 0.5, 0), exact Newton
    (trust-exact), centred to mean 1000."""
    keep = battles.outcome != 1 if drop_ties else np.ones(len(battles.outcome), bool)
    a = battles.model_a[keep].astype(np.int64)
    b = battles.model_b[keep].astype(np.int64)
    y = battles.outcome[keep] / 2.0
    w = battles.count[keep].astype(float)
    k = len(battles.models)

    def loss(theta: FloatArray) -> float:
        d = LN10 * (theta[a] - theta[b])
        return float(-(w * (y * log_expit(d) + (1 - y) * log_expit(-d))).sum())

    def grad(theta: FloatArray) -> FloatArray:
        r = -LN10 * w * (y - expit(LN10 * (theta[a] - theta[b])))
        g = np.zeros(k)
        np.add.at(g, a, r)
        np.add.at(g, b, -r)
        return g

    def hess(theta: FloatArray) -> FloatArray:
        p = expit(LN10 * (theta[a] - theta[b]))
        v = LN10**2 * w * p * (1 - p)
        h = np.zeros((k, k))
        np.add.at(h, (a, a), v)
        np.add.at(h, (b, b), v)
        np.add.at(h, (a, b), -v)
        np.add.at(h, (b, a), -v)
        return h

    return _minimise(loss, grad, hess, k)


def scipy_pairs(wins: FloatArray) -> FloatArray:
    """Unregularised MLE from a win matrix, by scipy (trust-exact), mean 1000."""
    k = len(wins)
    first, second = np.nonzero(wins)

    def loss(theta: FloatArray) -> float:
        return float(
            -(
                wins[first, second] * log_expit(LN10 * (theta[first] - theta[second]))
            ).sum()
        )

    def grad(theta: FloatArray) -> FloatArray:
        r = (
            -LN10
            * wins[first, second]
            * (1 - expit(LN10 * (theta[first] - theta[second])))
        )
        g = np.zeros(k)
        np.add.at(g, first, r)
        np.add.at(g, second, -r)
        return g

    def hess(theta: FloatArray) -> FloatArray:
        p = expit(LN10 * (theta[first] - theta[second]))
        v = LN10**2 * wins[first, second] * p * (1 - p)
        h = np.zeros((k, k))
        np.add.at(h, (first, first), v)
        np.add.at(h, (second, second), v)
        np.add.at(h, (first, second), -v)
        np.add.at(h, (second, first), -v)
        return h

    return _minimise(loss, grad, hess, k)


def fastchat_bt(battles: Battles) -> FloatArray:
    """The current reference, as described: distinct (a, b, outcome) cells weighted
    by their counts, outcome = code / 2, L-BFGS-B from zeros (maxiter 100,
    gtol 1e-6), rating = 400 theta + 1000 (no anchor model present)."""
    schedule = np.stack([battles.model_a, battles.model_b, battles.outcome], axis=1)
    cells, weights = np.unique(schedule.astype(np.int64), axis=0, return_counts=True)
    a, b, y = cells[:, 0], cells[:, 1], cells[:, 2] / 2.0
    k = len(battles.models)

    def loss_and_grad(theta: FloatArray) -> tuple[float, FloatArray]:
        d = LN10 * (theta[a] - theta[b])
        loss = -(weights * (y * log_expit(d) + (1 - y) * log_expit(-d))).sum()
        r = -LN10 * weights * (y - expit(d))
        g = np.zeros(k)
        np.add.at(g, a, r)
        np.add.at(g, b, -r)
        return float(loss), g

    result = minimize(
        loss_and_grad,
        np.zeros(k),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 100, "gtol": 1e-6},
    )
    return 400.0 * result.x + 1000.0


def elo_loop(battles: Battles, order: Any = None) -> FloatArray:
    """FastChat's compute_elo (rating_systems.py): alpha = ln(10) / 400, numpy ratings."""
    order = np.arange(len(battles.model_a)) if order is None else order
    ratings = np.full(len(battles.models), 1000.0)
    alpha = math.log(10.0) / 400.0
    for i in order:
        a, b = battles.model_a[i], battles.model_b[i]
        prob = 1.0 / (1.0 + math.exp(alpha * (ratings[b] - ratings[a])))
        update = 4.0 * (battles.outcome[i] / 2.0 - prob)
        ratings[a] += update
        ratings[b] -= update
    return ratings


def elo_loop_2023(battles: Battles) -> FloatArray:
    """The 2023 elo_analysis.py compute_elo: BASE ** (diff / SCALE), r_b += K (1 - s - e_b)."""
    rating = dict.fromkeys(range(len(battles.models)), 1000.0)
    for a, b, o in zip(battles.model_a, battles.model_b, battles.outcome, strict=True):
        ra, rb = rating[a], rating[b]
        ea = 1 / (1 + 10 ** ((rb - ra) / 400))
        eb = 1 / (1 + 10 ** ((ra - rb) / 400))
        sa = o / 2
        rating[a] += 4 * (sa - ea)
        rating[b] += 4 * (1 - sa - eb)
    return np.array([rating[i] for i in range(len(battles.models))])


@pytest.fixture(scope="module")
def arena() -> Battles:
    return read_battles(FOLDER / "clean_battle_20230601.json")


# --- Bradley-Terry against the oracles ----------------------------------------------


def test_unregularised_fit_equals_a_row_level_fit(arena: Battles) -> None:
    ours = compute_ratings(arena).rating
    assert np.abs(ours - scipy_rows(arena)).max() < 1e-6
    assert ours.mean() == pytest.approx(1000.0, abs=1e-9)


def test_count_matrix_fit_equals_row_fit_on_synthetic_battles() -> None:
    battles, _ = synthetic(15, 6000, seed=4)
    ours = compute_ratings(battles).rating
    assert np.abs(ours - scipy_rows(battles)).max() < 1e-6
    dropped = compute_ratings(battles, RatingOptions(ties="drop")).rating
    assert np.abs(dropped - scipy_rows(battles, drop_ties=True)).max() < 1e-6


@pytest.mark.parametrize("c", [1.0, 0.05])
def test_l2_is_scikit_learns_c_on_one_row_per_battle(arena: Battles, c: float) -> None:
    ours = compute_ratings(arena, RatingOptions(l2=c)).rating
    assert np.abs(ours - sklearn_one_row(arena, c=c)).max() < 1e-4
    assert ours.mean() == pytest.approx(1000.0, abs=1e-9)


def test_l2_1_with_ties_dropped_is_the_2023_05_notebook(arena: Battles) -> None:
    # one row per decisive battle, LogisticRegression(fit_intercept=False), C = 1
    ours = compute_ratings(arena, RatingOptions(l2=1.0, ties="drop")).rating
    assert np.abs(ours - sklearn_one_row(arena, c=1.0, drop_ties=True)).max() < 1e-4


@pytest.mark.parametrize("c", [1.0, 0.05])
def test_the_duplicated_design_is_l2_2c(arena: Battles, c: float) -> None:
    ours = compute_ratings(arena, RatingOptions(l2=2 * c)).rating
    assert np.abs(ours - sklearn_2023(arena, c=c)).max() < 1e-6


def test_l2_with_ties_dropped_on_the_duplicated_design(arena: Battles) -> None:
    keep = arena.outcome != 1
    decisive = make_battles(
        arena.model_a[keep],
        arena.model_b[keep],
        arena.outcome[keep],
        k=len(arena.models),
    )
    ours = compute_ratings(arena, RatingOptions(l2=2.0, ties="drop")).rating
    assert np.abs(ours - sklearn_2023(decisive, c=1.0)).max() < 1e-6


def test_sample_weight_design_counts_every_battle_four_times(arena: Battles) -> None:
    # pivot rows list both orders and weight a win 2: C there is l2 = 4 C here
    ours = compute_ratings(arena, RatingOptions(l2=2.0)).rating
    assert np.abs(ours - sklearn_pivot(arena, c=0.5)).max() < 1e-6


def test_notebook_defaults_agree_to_their_tolerance(arena: Battles) -> None:
    # LogisticRegression(fit_intercept=False) as the notebook called it: lbfgs, tol 1e-4
    a, b, o = arena.model_a, arena.model_b, arena.outcome
    n, k = len(a), len(arena.models)
    design = np.zeros((2 * n, k))
    design[np.arange(2 * n), np.concatenate([a, a])] = LN10
    design[np.arange(2 * n), np.concatenate([b, b])] = -LN10
    label = (np.concatenate([o, o]) == 2).astype(float)
    label[:n][o == 1] = 1.0
    published = (
        400.0 * LogisticRegression(fit_intercept=False).fit(design, label).coef_[0]
        + 1000
    )
    ours = compute_ratings(arena, RatingOptions(l2=2.0)).rating
    assert np.abs(ours - published).max() < 0.5


def test_matches_the_current_reference_to_its_tolerance(arena: Battles) -> None:
    ours = compute_ratings(arena).rating
    reference = fastchat_bt(arena)
    assert reference.mean() == pytest.approx(1000.0, abs=1e-6)  # mean 1000, as ours
    assert np.abs(ours - reference).max() < 0.05


def test_aggregated_counts_give_the_same_ratings(arena: Battles) -> None:
    counts = read_battles(FOLDER / "battle_counts.csv")
    assert (
        np.abs(compute_ratings(counts).rating - compute_ratings(arena).rating).max()
        < 1e-9
    )
    for options in (RatingOptions(l2=1.0), RatingOptions(ties="drop")):
        assert (
            np.abs(
                compute_ratings(counts, options).rating
                - compute_ratings(arena, options).rating
            ).max()
            < 1e-9
        )


def test_ties_half_and_drop_on_a_hand_example() -> None:
    # a beats b 3 times, b beats a once, 2 ties
    battles = make_battles([0, 0, 0, 1, 0, 1], [1, 1, 1, 0, 1, 0], [2, 2, 2, 2, 1, 1])
    half = compute_ratings(battles).rating
    drop = compute_ratings(battles, RatingOptions(ties="drop")).rating
    assert half[0] - half[1] == pytest.approx(400 * math.log10(4 / 2), abs=1e-9)
    assert drop[0] - drop[1] == pytest.approx(400 * math.log10(3 / 1), abs=1e-9)
    assert half.mean() == pytest.approx(1000.0)
    assert drop.mean() == pytest.approx(1000.0)
    counts = count_outcomes(
        battles.model_a, battles.model_b, battles.outcome, n_models=2
    )
    assert win_matrix(counts).tolist() == [[0.0, 4.0], [2.0, 0.0]]
    assert win_matrix(counts, ties="drop").tolist() == [[0.0, 3.0], [1.0, 0.0]]


def test_count_outcomes_equals_a_loop() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, 5, 500), rng.integers(0, 5, 500)
    o, c = rng.integers(0, 3, 500), rng.integers(1, 4, 500)
    expected = np.zeros((5, 5, 3), np.int64)
    for i, j, oo, cc in zip(a, b, o, c, strict=True):
        expected[i, j, oo] += cc
    assert np.array_equal(count_outcomes(a, b, o, c, n_models=5), expected)
    ones = np.ones(500, np.int64)
    assert count_outcomes(a, b, o, ones, n_models=5).sum() == 500
    zeros_and_ones = (np.arange(500) % 2).astype(
        np.int64
    )  # a zero count counts nothing
    assert count_outcomes(a, b, o, zeros_and_ones, n_models=5).sum() == 250


def test_fit_on_a_wide_spread_converges_from_zero() -> None:
    battles, true = synthetic(12, 30000, seed=2, spread=600.0)
    ours = compute_ratings(battles).rating
    assert np.abs(ours - scipy_rows(battles)).max() < 1e-6
    assert np.corrcoef(ours, true)[0, 1] > 0.99


# --- anchoring, mean, ranks ------------------------------------------------------------


def test_anchor_shifts_every_rating_and_every_round(arena: Battles) -> None:
    free = compute_ratings(arena, RatingOptions(bootstrap=50, seed=3))
    anchored = compute_ratings(
        arena,
        RatingOptions(
            bootstrap=50, seed=3, anchor=("mixtral-8x7b-instruct-v0.1", 1114.0)
        ),
    )
    index = arena.models.tolist().index("mixtral-8x7b-instruct-v0.1")
    assert anchored.rating[index] == 1114.0
    shift = anchored.rating - free.rating
    assert np.ptp(shift) < 1e-9
    assert anchored.samples is not None
    assert free.samples is not None
    assert np.all(anchored.samples[:, index] == 1114.0)  # per round, as the reference
    per_round = anchored.samples - free.samples
    assert np.abs(per_round - per_round[:, [0]]).max() < 1e-9
    assert anchored.rating_lower is not None
    assert anchored.rating_upper is not None
    assert anchored.rating_lower[index] == anchored.rating_upper[index] == 1114.0


def test_unanchored_ratings_have_mean_1000(arena: Battles) -> None:
    for options in (
        RatingOptions(),
        RatingOptions(l2=1.0),
        RatingOptions(ties="drop"),
        RatingOptions(method="elo"),
    ):
        assert compute_ratings(arena, options).rating.mean() == pytest.approx(
            1000.0, abs=1e-9
        )


def test_anchor_must_be_a_model_of_the_battles(arena: Battles) -> None:
    with pytest.raises(
        InputError,
        match=r"(?s)anchor model 'gpt4' is not in the battles \(10 models\)\. Did you mean gpt-4.*Hint: use a model name exactly",
    ):
        compute_ratings(arena, RatingOptions(anchor=("gpt4", 1200.0)))


def test_rank_upper_bound_on_a_hand_example() -> None:
    lower = np.array([10.0, 5.0, 0.0, 11.5])
    upper = np.array([12.0, 11.0, 4.0, 13.0])
    # model 1's upper (11) is below model 3's lower (11.5): one model is surely better
    assert rank_with_uncertainty(lower, upper).tolist() == [1, 2, 4, 1]


def test_rank_upper_bound_equals_the_arena_loop() -> None:
    rng = np.random.default_rng(5)
    lower = rng.normal(1000, 50, 60)
    upper = lower + rng.uniform(0, 80, 60)
    expected = [
        1 + sum(lower[j] > upper[i] for j in range(60) if j != i) for i in range(60)
    ]
    assert rank_with_uncertainty(lower, upper).tolist() == expected


def test_rank_counts_strictly_higher_ratings() -> None:
    battles = make_battles([0, 1, 2, 0], [1, 2, 0, 2], [1, 1, 1, 1])  # all ties
    result = compute_ratings(battles)
    assert result.rank.tolist() == [1, 1, 1]


# --- bootstrap -----------------------------------------------------------------------------


def test_bootstrap_is_reproducible_with_a_seed(arena: Battles) -> None:
    first = compute_ratings(arena, RatingOptions(bootstrap=40, seed=7)).samples
    second = compute_ratings(arena, RatingOptions(bootstrap=40, seed=7)).samples
    other = compute_ratings(arena, RatingOptions(bootstrap=40, seed=8)).samples
    assert first is not None
    assert second is not None
    assert other is not None
    assert np.array_equal(first, second)
    assert not np.array_equal(first, other)
    assert first.shape == (40, len(arena.models))


def test_round_generators_are_the_seeds_children_made_as_the_rounds_come() -> None:
    """The same streams as spawning every round at once, without holding them all."""
    at_once = [
        np.random.default_rng(child).random(3)
        for child in np.random.SeedSequence(7).spawn(50)
    ]
    as_they_come = [g.random(3) for g in bootstrap_module.round_generators(7, 50)]
    assert np.array_equal(np.array(as_they_come), np.array(at_once))
    # a trillion rounds: the first is there at once (all made first, they could not be)
    first = next(bootstrap_module.round_generators(7, 10**12))
    assert np.array_equal(first.random(3), at_once[0])


def test_bootstrap_rounds_equal_independent_fits(
    arena: Battles, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batched round equals scipy fitting that round's counts on its own."""
    seen: list[tuple[FloatArray, FloatArray]] = []
    fit_rounds = bootstrap_module._fit_rounds

    def spy(wins: FloatArray, *args: Any) -> Any:
        copy = wins.copy()
        theta, divergent, failed = fit_rounds(wins, *args)
        seen.append((copy, theta.copy()))
        return theta, divergent, failed

    monkeypatch.setattr(bootstrap_module, "_fit_rounds", spy)
    result = compute_ratings(arena, RatingOptions(bootstrap=25, seed=1))
    assert result.samples is not None
    rounds = [(w, t) for wins, theta in seen for w, t in zip(wins, theta, strict=True)]
    assert len(rounds) == 25
    total = compute_ratings(arena).n_battles.sum() / 2
    for (wins, theta), sample in zip(rounds, result.samples, strict=True):
        assert wins.sum() == total  # a multinomial redraw of every battle
        assert np.abs(400 * theta + 1000 - sample).max() == 0.0
        assert np.abs(sample - scipy_pairs(wins)).max() < 1e-6


def test_l2_bootstrap_rounds_equal_scikit_learn_per_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    battles, _ = synthetic(6, 600, seed=9)
    seen: list[FloatArray] = []
    fit_rounds = bootstrap_module._fit_rounds

    def spy(wins: FloatArray, *args: Any) -> Any:
        seen.append(wins.copy())
        return fit_rounds(wins, *args)

    monkeypatch.setattr(bootstrap_module, "_fit_rounds", spy)
    result = compute_ratings(battles, RatingOptions(bootstrap=5, l2=1.0))
    assert result.samples is not None
    wins = np.concatenate(seen)
    for round_wins, sample in zip(wins, result.samples, strict=True):
        # expand the round's (half-tie) win matrix into 2023-design rows
        k = len(round_wins)
        rows, labels, weights = [], [], []
        for i in range(k):
            for j in range(k):
                if round_wins[i, j] > 0:
                    row = np.zeros(k)
                    row[i], row[j] = LN10, -LN10
                    rows.append(row)
                    labels.append(1.0)
                    weights.append(round_wins[i, j])  # one row per battle
                    rows.append(-row)  # a weightless row of the other label:
                    labels.append(0.0)  # scikit-learn needs two classes
                    weights.append(0.0)
        model = LogisticRegression(
            C=1.0,
            fit_intercept=False,
            solver="newton-cholesky",
            tol=1e-14,
            max_iter=500,
        )
        model.fit(np.array(rows), np.array(labels), sample_weight=np.array(weights))
        assert np.abs(400 * model.coef_[0] + 1000 - sample).max() < 1e-6


def test_draw_multinomial_has_the_multinomial_distribution() -> None:
    p = np.array([0.5, 0.3, 0.15, 0.049, 0.001])
    n, size = 40, 200_000
    draws = draw_multinomial(np.random.default_rng(0), n, p, size=size)
    assert (draws.sum(axis=1) == n).all()
    assert (draws >= 0).all()
    standard_error = np.sqrt(n * p * (1 - p) / size)
    assert np.all(np.abs(draws.mean(axis=0) - n * p) < 5 * standard_error)
    covariance = n * (np.diag(p) - np.outer(p, p))
    assert np.abs(np.cov(draws.T) - covariance).max() < 0.05
    # the whole distribution of one cell against numpy's own multinomial
    numpy_draws = np.random.default_rng(1).multinomial(n, p, size=size)
    ours = np.bincount(draws[:, 2], minlength=20)[:20] / size
    theirs = np.bincount(numpy_draws[:, 2], minlength=20)[:20] / size
    assert np.abs(ours - theirs).max() < 0.005


def test_draw_multinomial_with_few_draws() -> None:
    draws = draw_multinomial(
        np.random.default_rng(2), 3, np.array([0.2, 0.8]), size=50_000
    )
    assert (draws.sum(axis=1) == 3).all()
    assert draws[:, 0].mean() == pytest.approx(0.6, abs=0.02)


def test_synthetic_ratings_are_recovered_within_their_intervals() -> None:
    battles, true = synthetic(40, 40_000, seed=11)
    result = compute_ratings(battles, RatingOptions(bootstrap=400, seed=0))
    assert result.rating_lower is not None
    assert result.rating_upper is not None
    inside = (result.rating_lower <= true) & (true <= result.rating_upper)
    # 95% intervals: about 38 of 40 cover; far fewer would mean intervals too narrow
    assert inside.sum() >= 34
    width = result.rating_upper - result.rating_lower
    assert np.all(np.abs(result.rating - true) < 1.5 * width)
    assert np.all(width > 0)


def test_small_synthetic_recovery_within_intervals() -> None:
    battles, true = synthetic(8, 8000, seed=3)
    result = compute_ratings(battles, RatingOptions(bootstrap=200, seed=0))
    assert result.rating_lower is not None
    assert result.rating_upper is not None
    inside = (result.rating_lower <= true) & (true <= result.rating_upper)
    assert inside.sum() >= 6  # 95% intervals: 7.6 of 8 on average
    width = result.rating_upper - result.rating_lower
    assert np.all(np.abs(result.rating - true) < width)
    assert np.all(result.rating_lower <= result.rating)
    assert np.all(result.rating <= result.rating_upper)


@pytest.mark.slow
def test_intervals_cover_the_true_ratings_about_95_percent() -> None:
    inside = []
    for seed in range(30):
        battles, true = synthetic(8, 8000, seed=seed)
        result = compute_ratings(battles, RatingOptions(bootstrap=200, seed=seed))
        assert result.rating_lower is not None
        assert result.rating_upper is not None
        inside.append((result.rating_lower <= true) & (true <= result.rating_upper))
    coverage = float(np.mean(inside))
    assert 0.88 <= coverage <= 0.99, coverage


@pytest.mark.slow
def test_intervals_match_the_reference_bootstrap(arena: Battles) -> None:
    """The reference's procedure (multinomial over its distinct seat cells, one
    L-BFGS-B fit per round) gives the same intervals up to Monte Carlo noise."""
    schedule = np.stack([arena.model_a, arena.model_b, arena.outcome], axis=1)
    cells, weights = np.unique(schedule.astype(np.int64), axis=0, return_counts=True)
    rng = np.random.default_rng(0)
    n, k = len(arena.model_a), len(arena.models)
    draws = rng.multinomial(n, weights / weights.sum(), size=400)
    rounds = []
    for draw in draws:
        wins = np.zeros((k, k))
        for (a, b, o), count in zip(cells, draw, strict=True):
            wins[a, b] += count * o / 2
            wins[b, a] += count * (2 - o) / 2
        rounds.append(scipy_pairs(wins))
    lower, upper = np.quantile(np.array(rounds), [0.025, 0.975], axis=0)
    ours = compute_ratings(arena, RatingOptions(bootstrap=400, seed=0))
    assert ours.rating_lower is not None
    assert ours.rating_upper is not None
    width = upper - lower
    assert np.all(np.abs(ours.rating_lower - lower) < 0.25 * width)
    assert np.all(np.abs(ours.rating_upper - upper) < 0.25 * width)


def test_a_model_that_never_lost_in_some_rounds_gets_an_open_interval() -> None:
    rng = np.random.default_rng(0)
    rows = [(0, 1 + i % 3, 2) for i in range(29)] + [(1, 0, 2)]
    for _ in range(60):
        x, y = rng.choice([1, 2, 3], 2, replace=False)
        rows.append((int(x), int(y), int(rng.integers(0, 3))))
    a, b, o = map(np.array, zip(*rows, strict=True))
    result = compute_ratings(make_battles(a, b, o), RatingOptions(bootstrap=200))
    assert result.rating_upper is not None
    assert result.rating_lower is not None
    assert result.rating_upper[0] == np.inf
    assert np.isfinite(result.rating_lower[0])
    assert np.isfinite(result.rating_upper[1:]).all()
    assert [w.code for w in result.warnings] == ["bootstrap_divergent"]
    assert result.samples is not None
    diverged = np.isinf(result.samples[:, 0])
    assert 0 < diverged.sum() < 200
    assert np.isfinite(result.samples[diverged, 1:]).all()  # the others stay finite
    table = ratings_table(result).to_pylist()
    assert table[0]["rating_upper"] == math.inf


def test_barely_connected_rounds_are_open_or_left_out() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(80):
        x, y = rng.choice([0, 1, 2], 2, replace=False)
        rows.append((int(x), int(y), int(rng.integers(0, 3))))
        x, y = rng.choice([3, 4, 5], 2, replace=False)
        rows.append((int(x), int(y), int(rng.integers(0, 3))))
    rows += [(0, 3, 2), (3, 0, 2)]  # one bridge: one win each way
    a, b, o = map(np.array, zip(*rows, strict=True))
    battles = make_battles(a, b, o)
    result = compute_ratings(battles, RatingOptions(bootstrap=200))
    assert result.rating_lower is not None
    assert result.rating_upper is not None
    assert np.isneginf(result.rating_lower).all()
    assert np.isposinf(result.rating_upper).all()
    assert "bootstrap_divergent" in {w.code for w in result.warnings}
    regularised = compute_ratings(battles, RatingOptions(bootstrap=200, l2=1.0))
    assert "bootstrap_failed" in {w.code for w in regularised.warnings}
    assert regularised.samples is not None
    left_out = np.isnan(regularised.samples).all(axis=1)
    assert 0 < left_out.sum() < 200  # rounds without the bridge


def test_percentiles_skip_nan_and_keep_infinities() -> None:
    samples = np.array(
        [
            [1.0, np.nan, -np.inf],
            [2.0, 5.0, 0.0],
            [3.0, np.nan, 1.0],
            [np.inf, 6.0, 2.0],
        ]
    )
    lower, upper = percentile_intervals(samples)
    expected_lower = [
        np.quantile([1.0, 2.0, 3.0, 10.0], 0.025),
        np.quantile([5.0, 6.0], 0.025),
    ]
    assert lower[:2] == pytest.approx(expected_lower)
    assert lower[2] == -np.inf
    assert upper[0] == np.inf
    assert upper[1] == pytest.approx(np.quantile([5.0, 6.0], 0.975))
    assert upper[2] == pytest.approx(np.quantile([-1e300, 0.0, 1.0, 2.0], 0.975))
    finite = np.random.default_rng(0).normal(size=(101, 4))
    got = percentile_intervals(finite)
    assert np.array_equal(got[0], np.quantile(finite, 0.025, axis=0))
    all_nan = percentile_intervals(np.full((3, 1), np.nan))
    assert np.isnan(all_nan[0]).all()
    assert np.isnan(all_nan[1]).all()


def test_bootstrap_that_does_not_fit_in_memory_is_refused(arena: Battles) -> None:
    limit = 5 * 2**20
    options = RatingOptions(bootstrap=100_000, max_bootstrap_bytes=limit)
    error = _error(arena, options)
    assert re.search(
        r"(?s)a bootstrap of 100000 rounds over 10 models would need about 0\.02 GiB, more than the 0\.00 GiB allowed\.\nHint: use fewer rounds \(--bootstrap \d+ fits\), or allow more memory \(--max-memory GIB; RatingOptions\.max_bootstrap_bytes\)\.",
        str(error),
    )
    advice = re.search(r"--bootstrap (\d+) fits", str(error))
    assert advice is not None
    fits = int(advice.group(1))
    cells = 3 * 45

    def needs(rounds: int) -> int:
        trial = RatingOptions(bootstrap=rounds, max_bootstrap_bytes=limit)
        return estimate_bootstrap_bytes(
            n_models=10, n_battles=400, n_cells=cells, options=trial
        )

    assert needs(fits) <= limit < needs(fits + 1)  # the advice is the most that fits
    result = compute_ratings(
        arena, RatingOptions(bootstrap=fits // 100, max_bootstrap_bytes=limit)
    )
    assert result.samples is not None
    tiny = RatingOptions(bootstrap=5, max_bootstrap_bytes=1000)
    with pytest.raises(
        RatingOptionsError,
        match=r"rating 10 models would need about 0\.00 GiB for the fit alone .*\nHint: rate fewer models",
    ):
        compute_ratings(arena, tiny)  # the point fit's guard, before any work
    elo = RatingOptions(method="elo", bootstrap=5, max_bootstrap_bytes=20_000)
    with pytest.raises(
        RatingOptionsError, match="even one round does not fit: rate fewer models"
    ):
        compute_ratings(arena, elo)


def test_batches_follow_the_memory_budget(arena: Battles) -> None:
    # a small budget means more, smaller batches: the same rounds either way
    roomy = compute_ratings(arena, RatingOptions(bootstrap=30, seed=4)).samples
    cramped = compute_ratings(
        arena, RatingOptions(bootstrap=30, seed=4, max_bootstrap_bytes=2**20)
    ).samples
    assert roomy is not None
    assert cramped is not None
    assert np.abs(roomy - cramped).max() < 1e-6
    elo = [
        bootstrap_elo(
            arena.model_a,
            arena.model_b,
            arena.outcome,
            n_models=10,
            rounds=6,
            seed=1,
            block_bytes=size,
        )
        for size in (10**6, 24 * 6 * 7)  # one block, or blocks of 7 battles
    ]
    assert np.array_equal(elo[0], elo[1])


def _error(battles: Battles, options: RatingOptions) -> Exception:
    try:
        compute_ratings(battles, options)
    except RatingOptionsError as exc:
        return exc
    msg = "no error"  # pragma: no cover
    raise AssertionError(msg)  # pragma: no cover


def test_memory_estimate_grows_with_rounds_and_models() -> None:
    small = estimate_bootstrap_bytes(
        n_models=300,
        n_battles=2_000_000,
        n_cells=134_550,
        options=RatingOptions(bootstrap=100),
    )
    large = estimate_bootstrap_bytes(
        n_models=300,
        n_battles=2_000_000,
        n_cells=134_550,
        options=RatingOptions(bootstrap=10_000),
    )
    assert small < large
    huge = estimate_bootstrap_bytes(
        n_models=20_000, n_battles=10, n_cells=3, options=RatingOptions(bootstrap=1)
    )
    assert huge > 8 * 20_000**2  # one round's k x k matrices
    elo = estimate_bootstrap_bytes(
        n_models=300,
        n_battles=2_000_000,
        n_cells=0,
        options=RatingOptions(method="elo", bootstrap=1000),
    )
    assert elo > 5 * 2_000_000 * 8


# --- online Elo ------------------------------------------------------------------------------


def test_online_elo_equals_the_reference_loop_bit_for_bit(arena: Battles) -> None:
    assert arena.tstamp is not None
    order = np.argsort(arena.tstamp, kind="stable")
    ours = compute_ratings(arena, RatingOptions(method="elo")).rating
    assert np.array_equal(ours, elo_loop(arena, order))
    assert (
        np.abs(
            ours
            - elo_loop_2023(
                make_battles(
                    arena.model_a[order],
                    arena.model_b[order],
                    arena.outcome[order],
                    k=len(arena.models),
                )
            )
        ).max()
        < 1e-9
    )


def test_online_elo_replays_in_tstamp_order_stably() -> None:
    battles, _ = synthetic(6, 3000, seed=3)
    rng = np.random.default_rng(0)
    shuffled = rng.permutation(3000)
    tstamp = np.floor(
        np.arange(3000) / 3.0
    )  # three battles per second: order within kept
    ordered = make_battles(
        battles.model_a, battles.model_b, battles.outcome, tstamp=tstamp
    )
    mixed = make_battles(
        battles.model_a[shuffled],
        battles.model_b[shuffled],
        battles.outcome[shuffled],
        tstamp=tstamp[shuffled],
    )
    expected = elo_loop(mixed, np.argsort(tstamp[shuffled], kind="stable"))
    assert np.array_equal(
        compute_ratings(mixed, RatingOptions(method="elo")).rating, expected
    )
    no_time = make_battles(battles.model_a, battles.model_b, battles.outcome)
    assert np.array_equal(
        compute_ratings(no_time, RatingOptions(method="elo")).rating, elo_loop(no_time)
    )
    assert np.array_equal(
        compute_ratings(ordered, RatingOptions(method="elo")).rating, elo_loop(ordered)
    )


def test_online_elo_drops_ties_on_request_and_puts_unknown_times_last() -> None:
    battles = make_battles(
        [0, 1, 0, 2], [1, 2, 2, 0], [1, 2, 0, 2], tstamp=[3.0, np.nan, 1.0, 2.0]
    )
    order = [2, 3, 0, 1]
    assert np.array_equal(
        compute_ratings(battles, RatingOptions(method="elo")).rating,
        elo_loop(battles, order),
    )
    no_ties = compute_ratings(battles, RatingOptions(method="elo", ties="drop")).rating
    assert np.array_equal(no_ties, elo_loop(battles, [2, 3, 1]))


def test_online_elo_of_one_battle() -> None:
    assert online_elo(
        np.array([0]), np.array([1]), np.array([1]), n_models=2
    ).tolist() == [1000.0, 1000.0]
    assert online_elo(
        np.array([1]), np.array([0]), np.array([0]), n_models=2
    ).tolist() == [1002.0, 998.0]


def test_elo_bootstrap_equals_plain_loops_over_the_same_draws() -> None:
    battles, _ = synthetic(5, 400, seed=6)
    samples = bootstrap_elo(
        battles.model_a, battles.model_b, battles.outcome, n_models=5, rounds=7, seed=3
    )
    picks = (np.random.default_rng(3).random((400, 7)) * 400).astype(np.int64)
    for r in range(7):
        expected = elo_loop(battles, picks[:, r])
        assert np.abs(samples[r] - expected).max() < 1e-9


def test_elo_bootstrap_gives_intervals_around_the_online_rating(arena: Battles) -> None:
    result = compute_ratings(arena, RatingOptions(method="elo", bootstrap=60, seed=2))
    assert result.rating_lower is not None
    assert result.rating_upper is not None
    assert np.all(result.rating_lower < result.rating_upper)
    assert result.samples is not None
    assert result.samples.shape == (60, 10)
    assert np.corrcoef(result.samples.mean(axis=0), result.rating)[0, 1] > 0.9


def test_elo_needs_battles_in_order() -> None:
    counts = read_battles(FOLDER / "battle_counts.csv")
    with pytest.raises(
        RatingOptionsError,
        match=r"online Elo needs one battle per row.*\nHint: use --method bt",
    ):
        compute_ratings(counts, RatingOptions(method="elo"))


# --- identifiability -----------------------------------------------------------------------


def test_disconnected_battles_name_the_parts() -> None:
    battles = Battles(
        models=np.array(["a", "b", "c", "d", "e", "f"]),
        model_a=np.array([0, 1, 2, 3, 4, 5], np.int32),
        model_b=np.array([1, 0, 3, 4, 2, 4], np.int32),
        outcome=np.array([1, 2, 1, 1, 0, 1], np.int8),
        count=np.ones(6, np.int64),
    )
    methods: tuple[Method, ...] = ("bt", "elo")
    for method in methods:
        with pytest.raises(
            RatingsNotIdentifiableError,
            match=r"(?s)the comparison graph has 2 separate parts, and ratings in different parts cannot be compared: \{c, d, e, f\}; \{a, b\}\.\nHint: rate one part at a time",
        ) as caught:
            compute_ratings(battles, RatingOptions(method=method))
        assert caught.value.groups == (("c", "d", "e", "f"), ("a", "b"))
        assert caught.value.exit_code == 4


def test_many_parts_show_five_and_count_the_rest() -> None:
    k = 16
    a, b = np.arange(0, k, 2), np.arange(1, k, 2)
    battles = make_battles(a, b, np.ones(len(a)), k=k)
    with pytest.raises(
        RatingsNotIdentifiableError, match=r"8 separate parts.*; and 3 more\."
    ):
        compute_ratings(battles)


def test_a_model_that_never_lost_is_named_with_its_record() -> None:
    battles = make_battles([0, 0, 1, 2, 1], [1, 2, 2, 1, 0], [2, 2, 2, 2, 0])
    with pytest.raises(
        RatingsNotIdentifiableError,
        match=r"(?s)Bradley-Terry ratings diverge.*never lost: m00 \(3 wins, 0 losses\).*Hint: add an L2 penalty \(--l2 1",
    ):
        compute_ratings(battles)
    # a penalty, or online Elo, rates them
    assert np.isfinite(compute_ratings(battles, RatingOptions(l2=1.0)).rating).all()
    assert np.isfinite(
        compute_ratings(battles, RatingOptions(method="elo")).rating
    ).all()


def test_a_model_that_never_won_is_named() -> None:
    battles = make_battles([0, 1, 2, 2, 1], [1, 0, 0, 1, 2], [2, 2, 0, 0, 1])
    with pytest.raises(
        RatingsNotIdentifiableError, match=r"never won: m02 \(0 wins, 2 losses\)"
    ):
        compute_ratings(battles, RatingOptions(ties="drop"))


def test_a_group_that_never_lost_to_the_rest_is_named() -> None:
    # m00 and m01 beat each other, and beat m02 and m03, who beat each other
    battles = make_battles([0, 1, 0, 1, 2, 3], [1, 0, 2, 3, 3, 2], [2, 2, 2, 2, 2, 2])
    with pytest.raises(
        RatingsNotIdentifiableError,
        match=r"never lost: \{m00, m01\} \(never lost to a model outside the group\); never won: \{m02, m03\} \(never beat a model outside the group\)",
    ) as caught:
        compute_ratings(battles)
    assert caught.value.groups == (("m00", "m01"), ("m02", "m03"))


def test_ties_drop_can_leave_a_model_without_battles() -> None:
    battles = make_battles([0, 1, 2], [1, 0, 0], [2, 2, 1])
    with pytest.raises(
        RatingsNotIdentifiableError,
        match=r"(?s)1 model\(s\) have no battles once ties are dropped: \{m02\}.*Hint: use --ties half",
    ):
        compute_ratings(battles, RatingOptions(ties="drop"))


# --- options ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"method": "glicko"}, "method must be 'bt' or 'elo', got 'glicko'"),
        ({"ties": "win"}, "ties must be 'half' or 'drop', got 'win'"),
        ({"l2": 0.0}, r"l2 must be a finite number > 0, got 0\.0"),
        ({"l2": math.inf}, "l2 must be a finite number > 0, got inf"),
        ({"l2": "1"}, "l2 must be a number, got '1'"),
        ({"l2": 1.0, "method": "elo"}, "l2 applies to Bradley-Terry only"),
        ({"anchor": ("", 1114.0)}, "anchor must be \\(model name, finite rating\\)"),
        ({"anchor": ("x", math.nan)}, "anchor must be"),
        ({"anchor": "x=1"}, "anchor must be"),
        ({"bootstrap": -1}, "bootstrap must be a whole number >= 0, got -1"),
        ({"bootstrap": True}, "bootstrap must be a whole number >= 0, got True"),
        ({"bootstrap": 1.5}, "bootstrap must be a whole number >= 0"),
        ({"seed": -3}, "seed must be a whole number >= 0"),
        ({"max_bootstrap_bytes": -1}, "max_bootstrap_bytes must be"),
    ],
)
def test_invalid_options_say_what_to_write(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(RatingOptionsError, match=rf"(?s){problem}.*\nHint: ") as caught:
        RatingOptions(**fields)
    assert caught.value.exit_code == 2
    assert isinstance(caught.value, ValueError)


def test_options_are_frozen() -> None:
    options = RatingOptions()
    with pytest.raises(AttributeError):
        options.l2 = 1.0  # type: ignore[misc]


def test_parse_anchor() -> None:
    assert parse_anchor("mixtral-8x7b-instruct-v0.1=1114") == (
        "mixtral-8x7b-instruct-v0.1",
        1114.0,
    )
    assert parse_anchor("a=b=-5.5") == ("a=b", -5.5)
    for text in ("gpt-4", "=1000", "gpt-4=high", "gpt-4=nan"):
        with pytest.raises(
            RatingOptionsError, match=r"is not MODEL=RATING\.\nHint: write e\.g\."
        ):
            parse_anchor(text)


# --- outputs ------------------------------------------------------------------------------------


def test_ratings_table_schema_order_and_counts(arena: Battles) -> None:
    result = compute_ratings(arena, RatingOptions(bootstrap=30))
    table = ratings_table(result)
    assert table.schema.equals(RATINGS, check_metadata=True)
    assert all(field.metadata and field.metadata[b"doc"] for field in RATINGS)
    rows = table.to_pylist()
    assert [r["rating"] for r in rows] == sorted(
        (r["rating"] for r in rows), reverse=True
    )
    assert [r["rank"] for r in rows] == list(range(1, 11))
    names = arena.models.tolist()
    for row in rows:
        i = names.index(row["model"])
        battles = (arena.model_a == i) | (arena.model_b == i)
        won = ((arena.model_a == i) & (arena.outcome == 2)) | (
            (arena.model_b == i) & (arena.outcome == 0)
        )
        tied = battles & (arena.outcome == 1)
        assert row["n_battles"] == battles.sum()
        assert row["n_wins"] == won.sum()
        assert row["n_ties"] == tied.sum()
        assert row["win_rate"] == pytest.approx(
            (won.sum() + tied.sum() / 2) / battles.sum()
        )
        assert row["rating_lower"] <= row["rating"] <= row["rating_upper"]
        assert 1 <= row["rank_upper_bound"] <= row["rank"]
    assert sum(r["n_battles"] for r in rows) == 2 * len(arena.model_a)


def test_ratings_table_without_bootstrap_has_null_intervals(arena: Battles) -> None:
    table = ratings_table(compute_ratings(arena, RatingOptions(ties="drop")))
    for name in ("rating_lower", "rating_upper", "rank_upper_bound"):
        assert table.column(name).null_count == 10
    row = table.to_pylist()[0]
    assert row["win_rate"] == pytest.approx(
        row["n_wins"] / (row["n_battles"] - row["n_ties"])
    )


def test_win_rates_follow_the_ratings(arena: Battles) -> None:
    result = compute_ratings(arena)
    table = win_rates_table(result)
    assert table.schema.equals(WIN_RATES, check_metadata=True)
    assert table.num_rows == 10 * 9
    rating = dict(zip(result.models.tolist(), result.rating.tolist(), strict=True))
    for row in table.to_pylist():
        expected = 1 / (
            1 + 10 ** ((rating[row["model_b"]] - rating[row["model_a"]]) / 400)
        )
        assert row["win_rate"] == pytest.approx(expected, abs=1e-12)
    first = table.column("model_a").to_pylist()[0]
    assert first == ratings_table(result).column("model").to_pylist()[0]
    matrix = predicted_win_rates(result.rating)
    assert np.allclose(matrix + matrix.T, 1.0)
    assert np.allclose(np.diag(matrix), 0.5)


def test_scores_against_a_reference_for_the_leaderboard(arena: Battles) -> None:
    model_map = {
        "gpt-4": "openai/gpt-4",
        "vicuna-13b": "lmsys/vicuna-13b-v1.3",
        "falcon-40b": "tiiuae/falcon-40b-instruct",
    }
    scores = score_against_reference(arena, reference="vicuna-13b", model_map=model_map)
    assert scores.table.schema.equals(PAIRWISE_SCORES, check_metadata=True)
    assert scores.reference == "lmsys/vicuna-13b-v1.3"
    rows = {r["model"]: r for r in scores.table.to_pylist()}
    assert rows["lmsys/vicuna-13b-v1.3"]["raw_score"] == 0.5
    result = compute_ratings(arena)
    names = arena.models.tolist()
    ref = result.rating[names.index("vicuna-13b")]
    gpt4 = result.rating[names.index("gpt-4")]
    assert rows["openai/gpt-4"]["raw_score"] == pytest.approx(
        1 / (1 + 10 ** ((ref - gpt4) / 400))
    )
    assert rows["openai/gpt-4"]["n_samples"] == result.n_battles[names.index("gpt-4")]
    assert all(0.0 <= r["raw_score"] <= 1.0 for r in rows.values())
    assert "claude-v1" in rows  # not in the map: kept as it is, and listed
    assert set(scores.unmapped) == set(names) - {"gpt-4", "vicuna-13b"}
    assert scores.unused == ("falcon-40b",)
    assert scores.table.column("model").to_pylist() == sorted(rows)
    by_mapped = score_against_reference(
        arena, reference="lmsys/vicuna-13b-v1.3", model_map=model_map
    )
    assert by_mapped.table.equals(scores.table)
    anchored = score_against_reference(
        arena,
        reference="vicuna-13b",
        options=RatingOptions(anchor=("gpt-4", 2000.0), bootstrap=5),
    )
    plain = score_against_reference(arena, reference="vicuna-13b")
    assert anchored.table.equals(plain.table)
    assert plain.unmapped == ()
    assert plain.unused == ()


def test_scores_against_a_reference_problems(arena: Battles) -> None:
    with pytest.raises(
        InputError,
        match=r"(?s)reference model 'vicuna' is not in the battles.*Did you mean vicuna-13b.*Hint:",
    ):
        score_against_reference(arena, reference="vicuna")
    with pytest.raises(
        InputError,
        match=r"(?s)the model map gives two arena names one model: org/x <- \['gpt-4', 'koala-13b'\].*Hint:",
    ):
        score_against_reference(
            arena,
            reference="vicuna-13b",
            model_map={"gpt-4": "org/x", "koala-13b": "org/x"},
        )


def test_ratings_of_a_result_are_consistent(arena: Battles) -> None:
    result = compute_ratings(arena, RatingOptions(bootstrap=20))
    assert isinstance(result, Ratings)
    assert result.rank_upper_bound is not None
    bound = rank_with_uncertainty(result.rating_lower, result.rating_upper)  # type: ignore[arg-type]
    assert np.array_equal(result.rank_upper_bound, bound)
    assert compute_ratings(arena).rank_upper_bound is None
    with pytest.raises(AttributeError):
        result.rating = result.rating  # type: ignore[misc]


# --- properties ----------------------------------------------------------------------------------


@settings(deadline=None)
@given(data=battle_sets(), seed=st.integers(0, 2**32 - 1))
def test_bradley_terry_ignores_the_order_of_battles(
    data: tuple[Battles, int], seed: int
) -> None:
    battles, k = data
    order = np.random.default_rng(seed).permutation(len(battles.model_a))
    shuffled = make_battles(
        battles.model_a[order], battles.model_b[order], battles.outcome[order], k=k
    )
    assert (
        np.abs(compute_ratings(battles).rating - compute_ratings(shuffled).rating).max()
        < 1e-8
    )


@settings(deadline=None)
@given(data=battle_sets())
def test_swapping_seats_and_flipping_outcomes_changes_nothing(
    data: tuple[Battles, int],
) -> None:
    battles, k = data
    swapped = make_battles(battles.model_b, battles.model_a, 2 - battles.outcome, k=k)
    for options in (RatingOptions(), RatingOptions(l2=0.5)):
        assert (
            np.abs(
                compute_ratings(battles, options).rating
                - compute_ratings(swapped, options).rating
            ).max()
            < 1e-8
        )


@settings(deadline=None)
@given(
    data=battle_sets(),
    first=st.floats(-3000, 3000),
    second=st.floats(-3000, 3000),
)
def test_anchoring_shifts_ratings_by_a_constant(
    data: tuple[Battles, int], first: float, second: float
) -> None:
    battles, k = data
    one = compute_ratings(battles, RatingOptions(anchor=("m00", first))).rating
    other = compute_ratings(
        battles, RatingOptions(anchor=(f"m{k - 1:02d}", second))
    ).rating
    assert one[0] == first
    difference = one - other
    assert np.ptp(difference) < 1e-8
    free = compute_ratings(battles).rating
    assert np.abs((one - one.mean()) - (free - 1000.0)).max() < 1e-8


@settings(deadline=None)
@given(data=battle_sets(), repeat=st.integers(1, 4))
def test_counts_equal_repeated_rows(data: tuple[Battles, int], repeat: int) -> None:
    battles, k = data
    repeated = make_battles(
        np.repeat(battles.model_a, repeat),
        np.repeat(battles.model_b, repeat),
        np.repeat(battles.outcome, repeat),
        k=k,
    )
    counted = make_battles(
        battles.model_a,
        battles.model_b,
        battles.outcome,
        k=k,
        count=np.full(len(battles.model_a), repeat),
    )
    assert (
        np.abs(compute_ratings(repeated).rating - compute_ratings(counted).rating).max()
        < 1e-9
    )


@settings(deadline=None)
@given(data=battle_sets())
def test_count_fit_equals_the_row_fit_on_random_battles(
    data: tuple[Battles, int],
) -> None:
    battles, _ = data
    assert np.abs(compute_ratings(battles).rating - scipy_rows(battles)).max() < 1e-6


# --- the module's imports --------------------------------------------------------------------------


FIT_MODULES = (
    "options",
    "bradley_terry",
    "bootstrap",
    "elo",
    "intervals",
    "checks",
    "fit",
    "pairwise_scores",
    "style",
)


@pytest.mark.parametrize("name", FIT_MODULES)
def test_fit_modules_import_no_pandas_and_no_files(name: str) -> None:
    source = (Path(bootstrap_module.__file__).parent / f"{name}.py").read_text()
    imported = set()
    for node in nodes(source):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert "pandas" not in imported
    # the error tree, the output schemas (schemas.py imports pyarrow alone), the
    # cancellation flag (a bootstrap stops between rounds) and the kernels
    # beside it: never the battle reader
    allowed = {"lbnorm.core.errors", "lbnorm.core.schemas", "lbnorm._runtime"} | {
        f"lbnorm.ratings.{module}" for module in FIT_MODULES
    }
    assert {name for name in imported if name.startswith("lbnorm")} <= allowed
    assert (
        not {"pyarrow.csv", "pyarrow.parquet", "pyarrow.json", "os", "pathlib"}
        & imported
    )


def test_fit_bradley_terry_directly() -> None:
    wins = np.array([[0.0, 3.0, 1.0], [1.0, 0.0, 2.0], [1.0, 1.0, 0.0]])
    assert np.abs(fit_bradley_terry(wins) - scipy_pairs(wins)).max() < 1e-6
    regularised = fit_bradley_terry(wins, l2=0.5)
    assert regularised.mean() == pytest.approx(1000.0)
    assert np.ptp(regularised) < np.ptp(fit_bradley_terry(wins))  # shrunk


def test_a_ctrl_c_stops_the_bootstrap_at_the_next_round(
    arena: Battles, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bootstrap fits its rounds in batches; the flag is looked at before each round's draw."""
    drawn: list[int] = []
    draw = bootstrap_module._Multinomial.draw

    def draw_then_ctrl_c(self: Any, rng: np.random.Generator, size: int) -> Any:
        drawn.append(size)
        if len(drawn) == 3:
            signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, in round 3
        return draw(self, rng, size)

    monkeypatch.setattr(bootstrap_module._Multinomial, "draw", draw_then_ctrl_c)
    with pytest.raises(Cancelled, match="SIGINT"):
        compute_ratings(arena, RatingOptions(bootstrap=200, seed=0))  # an entry point
    assert len(drawn) == 3
