"""FastChat's style control as its code describes it, written independently for the tests.

``style_features`` follows ``preprocess_for_style`` (an object of counts is their
sum; ``(A - B) / (A + B + 1)``; standardised with numpy's mean and std), and
``fit_contextual`` minimises ``contextual_bt_loss_and_grad``'s objective (one row
per battle, a tie ``y = 1/2``, ``0.25 |params|^2`` for ``reg = 0.5``, log-10
strengths, natural-log style coefficients), converged far tighter than FastChat's
own ``gtol = 1e-6``. ``make_records`` draws clean_battle-like records from known
strengths and a known length effect.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize
from scipy.special import expit, log_expit

FloatArray = npt.NDArray[np.float64]
ELEMENTS = (
    "sum_assistant_{}_tokens",
    "header_count_{}",
    "list_count_{}",
    "bold_count_{}",
)


def _value(metadata: dict[str, Any], key: str) -> float:
    value = metadata[key]
    return (
        float(value) if isinstance(value, (int, float)) else float(sum(value.values()))
    )


def style_features(records: list[dict[str, Any]]) -> FloatArray:
    """``n x 4`` standardised style differences, record by record."""
    rows = []
    for record in records:
        meta = record["conv_metadata"]
        a = [_value(meta, name.format("a")) for name in ELEMENTS]
        b = [_value(meta, name.format("b")) for name in ELEMENTS]
        rows.append([(x - y) / (x + y + 1.0) for x, y in zip(a, b, strict=True)])
    diff = np.array(rows)
    return np.asarray((diff - diff.mean(axis=0)) / diff.std(axis=0))


def fit_contextual(
    records: list[dict[str, Any]], models: list[str], *, reg: float = 0.5
) -> tuple[FloatArray, FloatArray]:
    """``(ratings 400 r + 1000, gamma)`` minimising FastChat's contextual objective."""
    index = {name: i for i, name in enumerate(models)}
    a = np.array([index[r["model_a"]] for r in records])
    b = np.array([index[r["model_b"]] for r in records])
    y = np.array(
        [{"model_a": 1.0, "model_b": 0.0}.get(r["winner"], 0.5) for r in records]
    )
    z = style_features(records)
    k = len(models)
    alpha = math.log(10.0)

    def loss_and_grad(params: FloatArray) -> tuple[float, FloatArray]:
        s = alpha * (params[a] - params[b]) + z @ params[k:]
        loss = -(y * log_expit(s) + (1 - y) * log_expit(-s)).sum()
        loss += reg / 2.0 * params @ params
        error = expit(s) - y
        grad = reg * params
        np.add.at(grad, a, alpha * error)
        np.add.at(grad, b, -alpha * error)
        grad[k:] += z.T @ error
        return float(loss), grad

    def hessian(params: FloatArray) -> FloatArray:
        s = alpha * (params[a] - params[b]) + z @ params[k:]
        v = expit(s) * (1 - expit(s))
        rows = np.zeros((len(a), k + z.shape[1]))  # d s / d params, battle by battle
        rows[np.arange(len(a)), a] += alpha
        rows[np.arange(len(a)), b] -= alpha
        rows[:, k:] = z
        return np.asarray(rows.T @ (v[:, None] * rows) + reg * np.eye(rows.shape[1]))

    result = minimize(
        loss_and_grad,
        np.zeros(k + z.shape[1]),
        jac=True,
        hess=hessian,
        method="trust-exact",
        options={"gtol": 1e-10},
    )
    assert (
        np.abs(loss_and_grad(result.x)[1]).max() < 1e-7
    )  # float64 noise of a 6,000-term sum
    return 400.0 * result.x[:k] + 1000.0, result.x[k:]


def make_records(
    *,
    n: int,
    seed: int,
    strengths: dict[str, float],
    verbose: str,
    length_effect: float,
) -> list[dict[str, Any]]:
    """Battles whose outcome depends on strength and on the answers' relative length.

    ``verbose`` writes answers about three times longer than the others; each
    battle's log-odds are ``ln(10) (r_a - r_b) / 400 + length_effect * z_length``.
    """
    rng = np.random.default_rng(seed)
    names = list(strengths)
    rating = np.array([strengths[m] for m in names])
    k = len(names)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    base = np.where(np.array(names) == verbose, 1500.0, 500.0)
    tokens_a = rng.lognormal(np.log(base[a]), 0.4).round()
    tokens_b = rng.lognormal(np.log(base[b]), 0.4).round()
    extras = rng.poisson(2.0, size=(n, 6))
    diff = (tokens_a - tokens_b) / (tokens_a + tokens_b + 1)
    z = (diff - diff.mean()) / diff.std()
    logit = math.log(10) * (rating[a] - rating[b]) / 400 + length_effect * z
    u = rng.random(n)
    p = 1 / (1 + np.exp(-logit))
    tie = rng.random(n) < 0.1
    winner = np.where(tie, "tie", np.where(u < p, "model_a", "model_b"))
    records = []
    for i in range(n):
        records.append(
            {
                "model_a": names[a[i]],
                "model_b": names[b[i]],
                "winner": str(winner[i]),
                "judge": f"arena_user_{int(rng.integers(60))}",
                "anony": bool(rng.random() < 0.9),
                "language": "English" if rng.random() < 0.8 else "Chinese",
                "tstamp": 1717200000.0 + 40.0 * i,
                "dedup_tag": {
                    "high_freq": bool(i % 40 == 0),
                    "sampled": bool(i % 40 != 0),
                },
                "category_tag": {
                    "math_v0.1": {"math": bool(rng.random() < 0.25)},
                    "criteria_v0.1": {
                        name: bool(rng.random() < 0.6)
                        for name in (
                            "specificity",
                            "domain_knowledge",
                            "complexity",
                            "problem_solving",
                            "creativity",
                            "technical_accuracy",
                            "real_world",
                        )
                    },
                },
                "conv_metadata": {
                    "sum_user_tokens": int(rng.integers(3, 900)),
                    "sum_assistant_a_tokens": int(tokens_a[i]),
                    "sum_assistant_b_tokens": int(tokens_b[i]),
                    "header_count_a": {"h1": int(extras[i, 0]), "h2": 0, "h3": 1},
                    "header_count_b": {"h1": int(extras[i, 1]), "h2": 0, "h3": 0},
                    "list_count_a": {"ordered": int(extras[i, 2]), "unordered": 1},
                    "list_count_b": {"ordered": int(extras[i, 3]), "unordered": 0},
                    "bold_count_a": {"**": int(extras[i, 4]), "__": 0},
                    "bold_count_b": {"**": int(extras[i, 5]), "__": 0},
                },
            }
        )
    return records
