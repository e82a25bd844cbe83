"""What the Arena column of ``lbnorm run`` does when models come and go, in each score form.

The pairwise benchmark scores a model by one of three forms (``suites``):
``field`` (the expected win rate against the other rated models), ``reference``
(the chance of beating one model) and ``rating`` (the chance of beating a fixed
rating on a scale an anchor pins). This script measures, on the fixture
``tests/fixtures/arena_leaderboard/battles.csv`` (360 battles, 9 models) and on a
seeded field of 40 models (ratings spread 100) and 40,000 battles:

* how far every other model's score moves when 1 and when 5 weak models join
  (each newcomer 100 battles against random opponents, drawn from a rating 100
  points below the weakest model's fit), in score points (0-100) and in the
  score's own standard error (100 bootstrap rounds, seed 0, as a suite's
  default);
* how far a +50 rating gain moves a model's score, for the model in the middle
  of the field and for the best and the worst.

Nothing here is timed. ``python benchmarks_perf/arena_column.py``
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
from arena_lbfgs_gap import synthetic  # the same seeded field (15% ties near even)

from lbnorm.ratings import RatingOptions, compute_ratings, read_battles
from lbnorm.ratings.battles import Battles
from lbnorm.ratings.pairwise_scores import (
    PairwiseScores,
    field_win_rates,
    score_against_field,
    score_against_rating,
    score_against_reference,
)

FIXTURE = Path(__file__).parent.parent / "tests" / "fixtures" / "arena_leaderboard"
FloatArray = npt.NDArray[np.float64]
BOOTSTRAP = RatingOptions(bootstrap=100, seed=0)


def with_newcomers(battles: Battles, count: int, seed: int) -> Battles:
    """`battles` plus `count` new models, each 100 battles below the weakest fit."""
    rng = np.random.default_rng(seed)
    fitted = compute_ratings(battles, RatingOptions()).rating
    k = len(battles.models)
    names = [f"zz-new-{i}" for i in range(count)]  # sorted after the others
    ratings = np.concatenate([fitted, np.full(count, fitted.min() - 100.0)])
    a = np.repeat(np.arange(k, k + count), 100)
    b = rng.integers(0, k, a.size)
    p = 1.0 / (1.0 + 10.0 ** ((ratings[b] - ratings[a]) / 400.0))
    outcome = np.where(rng.random(a.size) < p, 2, 0)
    return replace(
        battles,
        models=np.concatenate([battles.models, np.array(names)]),
        model_a=np.concatenate([battles.model_a, a.astype(np.int32)]),
        model_b=np.concatenate([battles.model_b, b.astype(np.int32)]),
        outcome=np.concatenate([battles.outcome, outcome.astype(np.int8)]),
        count=np.concatenate([battles.count, np.ones(a.size, dtype=np.int64)]),
        tstamp=None,
        judge=None,
        fields={},
        flags={},
    )


def yardstick(battles: Battles, anchor: str) -> float:
    """The rating form's ``against``: the middle model's rating with `anchor` at 1000, to 10 points."""
    rating = compute_ratings(battles, RatingOptions()).rating
    pinned = rating - rating[battles.models.tolist().index(anchor)] + 1000.0
    return float(np.round(np.sort(pinned)[len(pinned) // 2], -1))


def scores(battles: Battles, form: str, anchor: str, against: float) -> PairwiseScores:
    """The column's raw scores (and their stderr) in one form."""
    if form == "field":
        return score_against_field(battles, options=BOOTSTRAP)
    if form == "reference":
        return score_against_reference(battles, reference=anchor, options=BOOTSTRAP)
    return score_against_rating(
        battles, anchor=(anchor, 1000.0), against=against, options=BOOTSTRAP
    )


def moves(battles: Battles, anchor: str, against: float) -> None:
    """Per form: how far the others' scores move when 1 and 5 weak models join."""
    for form in ("field", "reference", "rating"):
        before = scores(battles, form, anchor, against)
        assert before.stderr is not None
        old = dict(
            zip(
                before.table["model"].to_pylist(),
                before.table["raw_score"].to_pylist(),
                strict=True,
            )
        )
        stderr = dict(
            zip(before.table["model"].to_pylist(), before.stderr, strict=True)
        )
        parts = []
        for count in (1, 5):
            after = scores(
                with_newcomers(battles, count, seed=count), form, anchor, against
            )
            new = dict(
                zip(
                    after.table["model"].to_pylist(),
                    after.table["raw_score"].to_pylist(),
                    strict=True,
                )
            )
            names = [name for name in old if name != anchor or form == "field"]
            delta = np.array([100.0 * (new[n] - old[n]) for n in names])
            ratio = np.array([(new[n] - old[n]) / stderr[n] for n in names])
            parts.append(
                f"{count} weak model(s) join: {delta.min():+.2f} to {delta.max():+.2f} points "
                f"({ratio.min():+.2f} to {ratio.max():+.2f} standard errors)"
            )
        sys.stdout.write(f"  {form:9s} " + "; ".join(parts) + "\n")


def gains(battles: Battles, anchor: str, against: float) -> None:
    """Per form: a +50 rating gain's score change for the middle, best and worst model."""
    rating = compute_ratings(battles, RatingOptions()).rating
    order = np.argsort(-rating)
    picks = {"best": order[0], "middle": order[len(order) // 2], "worst": order[-1]}
    pinned = rating - rating[battles.models.tolist().index(anchor)] + 1000.0
    yardsticks = {"reference": 1000.0, "rating": against}  # the anchor is at 1000
    for form in ("field", "reference", "rating"):
        parts = []
        for label, i in picks.items():
            lifted = rating.copy()
            lifted[i] += 50.0
            if form == "field":
                delta = field_win_rates(lifted)[i] - field_win_rates(rating)[i]
            else:
                gap = yardsticks[form] - pinned[i] - np.array([0.0, 50.0])
                p = 1.0 / (1.0 + 10.0 ** (gap / 400.0))
                delta = p[1] - p[0]
            parts.append(f"{label} {100.0 * delta:+.1f}")
        sys.stdout.write(f"  {form:9s} +50 rating: " + ", ".join(parts) + " points\n")


def main() -> None:
    """Print the moves and the gains for the fixture and the synthetic field."""
    cases = [
        (
            "arena_leaderboard/battles.csv (9 models, 360 battles)",
            read_battles(FIXTURE / "battles.csv"),
            "t1-3b",
        ),
        (
            "synthetic (40 models, 40,000 battles)",
            synthetic(40, 40_000, 0, 100.0),
            "m000",
        ),
    ]
    for name, battles, anchor in cases:
        against = yardstick(battles, anchor)
        sys.stdout.write(
            f"{name}: reference {anchor}; rating form {anchor} = 1000, against {against:g}\n"
        )
        moves(battles, anchor, against)
        gains(battles, anchor, against)


if __name__ == "__main__":
    main()
