"""How far FastChat's ``compute_bt`` L-BFGS stops from the Bradley-Terry optimum lbnorm computes.

FastChat's ``compute_bt`` (``rating_systems.py``) minimises the count-weighted log
loss of the distinct ``(a, b, outcome)`` cells with scipy's L-BFGS-B from zeros,
``maxiter=100``, ``gtol=1e-6``; the tests' re-implementation of that description
(``tests/test_ratings.py``'s ``fastchat_bt``, the oracle they check against) is used. lbnorm
solves the same likelihood by Newton's method to ``1e-8`` rating points. Printed:
per case, the largest gap in rating points between the two fits; and first, where
``compute_bt`` puts a model that never lost (whose rating has no finite optimum:
lbnorm's is +inf).

    python benchmarks_perf/arena_lbfgs_gap.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from lbnorm.ratings import RatingOptions, compute_ratings, read_battles
from lbnorm.ratings.battles import Battles

TESTS = Path(__file__).parent.parent / "tests"
FIXTURE = TESTS / "fixtures" / "battles"
sys.path.insert(0, str(TESTS))  # the tests' FastChat oracle (needs the dev extra)
from test_ratings import fastchat_bt  # noqa: E402


def synthetic(k: int, n: int, seed: int, spread: float) -> Battles:
    """Battles among ``k`` models of known strengths, 15% ties near even matches."""
    rng = np.random.default_rng(seed)
    true = rng.normal(0.0, spread, k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = 1.0 / (1.0 + 10.0 ** ((true[b] - true[a]) / 400.0))
    q = 0.3 * np.minimum(p, 1 - p)
    u = rng.random(n)
    outcome = np.where(u < p - q / 2, 2, np.where(u < p + q / 2, 1, 0))
    return Battles(
        models=np.array([f"m{i:03d}" for i in range(k)]),
        model_a=a.astype(np.int32),
        model_b=b.astype(np.int32),
        outcome=outcome.astype(np.int8),
        count=np.ones(n, dtype=np.int64),
    )


def open_interval() -> None:
    """Where FastChat's L-BFGS puts a model that never lost, against lbnorm's +inf.

    A bootstrap round in which a model won every battle has no finite optimum;
    lbnorm gives the model +inf there (its interval's upper end is then inf),
    FastChat's ``compute_bt`` stops wherever L-BFGS-B stops (``maxiter`` 100),
    and the Arena's table shows that as the interval's upper end.
    """
    rng = np.random.default_rng(3)
    k = 5  # "champ" (code 0) and four others
    a = [0] * 15 + [int(rng.integers(1, k)) for _ in range(400)]
    b = [int(rng.integers(1, k)) for _ in range(15)]
    b += [(x - 1 + int(rng.integers(1, k - 1))) % (k - 1) + 1 for x in a[15:]]
    battles = Battles(
        models=np.array(["champ", "m1", "m2", "m3", "m4"]),
        model_a=np.array(a, dtype=np.int32),
        model_b=np.array(b, dtype=np.int32),
        outcome=np.array([2] * 15 + [2, 0] * 200, dtype=np.int8),
        count=np.ones(len(a), dtype=np.int64),
    )
    stopped = fastchat_bt(battles)
    gap = stopped[0] - np.max(stopped[1:])
    sys.stdout.write(
        f"a model that won all its 15 battles: compute_bt stops {gap:,.0f} points "
        "above the best of the others (lbnorm: +inf)\n"
    )


def main() -> None:
    """Print the gap for the fixture and for synthetic sets of 20 to 60 models."""
    open_interval()
    cases = [
        (
            "clean_battle_20230601.json",
            read_battles(FIXTURE / "clean_battle_20230601.json"),
        )
    ]
    for k, n, spread in (
        (20, 20_000, 150.0),
        (60, 100_000, 250.0),
        (60, 1_000_000, 300.0),
        (100, 2_000_000, 400.0),
    ):
        cases.append((f"synthetic {k} models, {n} battles", synthetic(k, n, 0, spread)))
    for name, battles in cases:
        ours = compute_ratings(battles, RatingOptions()).rating
        gap = np.abs(fastchat_bt(battles) - ours).max()
        sys.stdout.write(f"{name}: max |compute_bt - optimum| = {gap:.3f} points\n")


if __name__ == "__main__":
    main()
