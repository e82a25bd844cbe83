"""Style control at scale: ``lbnorm arena --style-control`` against FastChat's procedure.

Generates seeded battles with Arena-shaped ``conv_metadata`` (a Parquet struct;
one model in ten answers three times longer, and length sways the votes), then
times, each as its own process:

- ``lbnorm``: ``lbnorm arena FILE --style-control --bootstrap ROUNDS`` (read,
  plain and style-controlled fits, both bootstraps, tables written);
- ``fastchat``: FastChat's ``compute_style_control`` and
  ``compute_bootstrap_style_control`` as its code describes them, re-implemented
  here: pandas reading, ``preprocess_for_style`` features, scipy L-BFGS-B on the
  contextual objective (``reg = 0.5``, ``maxiter`` 100, ``gtol`` 1e-6) from
  zeros for the point fit and for every round of battles resampled with
  replacement. Its rounds run one after another here (FastChat spreads them over
  a ``multiprocessing`` pool: divide by the cores you have), ``--reference-rounds``
  of them, and its time for ``ROUNDS`` is extrapolated: point time + ROUNDS x
  time per round.

Usage::

    python benchmarks_perf/arena_style.py                       # 2M battles, 100 models, 1,000 rounds
    python benchmarks_perf/arena_style.py --battles 200000 --rounds 100   # quick
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REFERENCE = r"""
import json, math, sys, time
import numpy as np, pandas as pd
from scipy.optimize import minimize
started = time.perf_counter()
frame = pd.read_parquet(sys.argv[1])
rounds = int(sys.argv[2])
meta = pd.json_normalize(frame["conv_metadata"].tolist())
def side(name, s):
    cols = [c for c in meta.columns if c == f"{name}_{s}" or c.startswith(f"{name}_{s}.")]
    return meta[cols].sum(axis=1).to_numpy(float)
names = ["sum_assistant", "header_count", "list_count", "bold_count"]
a_side = np.stack([meta[f"sum_assistant_a_tokens"].to_numpy(float)] + [side(n, "a") for n in names[1:]])
b_side = np.stack([meta[f"sum_assistant_b_tokens"].to_numpy(float)] + [side(n, "b") for n in names[1:]])
diff = (a_side - b_side) / (a_side + b_side + 1)
features = ((diff - diff.mean(axis=1, keepdims=True)) / diff.std(axis=1, keepdims=True)).T
models = pd.concat([frame["model_a"], frame["model_b"]]).astype(str)
codes, uniques = pd.factorize(models)
n = len(frame)
matchups = np.stack([codes[:n], codes[n:]], axis=1)
outcomes = frame["winner"].astype(str).map({"model_a": 1.0, "model_b": 0.0}).fillna(0.5).to_numpy()
k, alpha, reg = len(uniques), math.log(10.0), 0.5
def loss_and_grad(params, matchups, features, outcomes):
    ratings = params[:k]
    logits = alpha * (ratings[matchups[:, 0]] - ratings[matchups[:, 1]]) + features @ params[k:]
    probs = 1.0 / (1.0 + np.exp(-logits))
    loss = -(np.log(probs) * outcomes + np.log(1.0 - probs) * (1.0 - outcomes)).sum() + reg / 2.0 * params @ params
    error = outcomes - probs
    grad = reg * params
    m_grad = np.zeros(k)
    np.add.at(m_grad, matchups[:, 0], -alpha * error)
    np.add.at(m_grad, matchups[:, 1], alpha * error)
    grad[:k] += m_grad
    grad[k:] -= features.T @ error
    return loss, grad
def fit(matchups, features, outcomes):
    return minimize(loss_and_grad, np.zeros(k + 4), args=(matchups, features, outcomes), jac=True,
                    method="L-BFGS-B", options={"maxiter": 100, "gtol": 1e-6}).x
point = fit(matchups, features, outcomes)
point_done = time.perf_counter()
np.random.seed(42)
for _ in range(rounds):
    idx = np.random.randint(0, n, n)
    fit(matchups[idx], features[idx], outcomes[idx])
done = time.perf_counter()
json.dump({"point": point_done - started, "per_round": (done - point_done) / max(rounds, 1),
           "models": list(uniques), "ratings": (400 * point[:k] + 1000).tolist(), "gamma": point[k:].tolist()},
          open(sys.argv[3], "w"))
"""


def make_battles(path: Path, n: int, k: int, seed: int = 0) -> None:
    """Seeded battles with conv_metadata; length sways the votes (0.5 per SD)."""
    rng = np.random.default_rng(seed)
    true = rng.normal(0, 150, k)
    verbose = np.where(np.arange(k) % 10 == 0, 1500.0, 500.0)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    tokens_a = rng.lognormal(np.log(verbose[a]), 0.4).round()
    tokens_b = rng.lognormal(np.log(verbose[b]), 0.4).round()
    diff = (tokens_a - tokens_b) / (tokens_a + tokens_b + 1)
    z = (diff - diff.mean()) / diff.std()
    logit = math.log(10) * (true[a] - true[b]) / 400 + 0.5 * z
    u, tie = rng.random(n), rng.random(n) < 0.15
    winner = np.where(
        tie, "tie", np.where(u < 1 / (1 + np.exp(-logit)), "model_a", "model_b")
    )
    names = np.array([f"model-{i:03d}" for i in range(k)])

    def counts(*keys: str) -> pa.StructArray:
        return pa.StructArray.from_arrays(
            [pa.array(rng.poisson(1.5, n)) for _ in keys], list(keys)
        )

    meta = pa.StructArray.from_arrays(
        [
            pa.array(tokens_a.astype(np.int64)),
            pa.array(tokens_b.astype(np.int64)),
            counts("h1", "h2", "h3", "h4", "h5", "h6"),
            counts("h1", "h2", "h3", "h4", "h5", "h6"),
            counts("ordered", "unordered"),
            counts("ordered", "unordered"),
            counts("**", "__"),
            counts("**", "__"),
        ],
        [
            "sum_assistant_a_tokens",
            "sum_assistant_b_tokens",
            "header_count_a",
            "header_count_b",
            "list_count_a",
            "list_count_b",
            "bold_count_a",
            "bold_count_b",
        ],
    )
    table = pa.table(
        {
            "model_a": pa.array(names[a]).dictionary_encode(),
            "model_b": pa.array(names[b]).dictionary_encode(),
            "winner": pa.array(winner).dictionary_encode(),
            "tstamp": np.arange(n, dtype=float),
            "conv_metadata": meta,
        }
    )
    pq.write_table(table, path)


def main() -> None:
    """Generate, time both, print one line each and the agreement of their point fits."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--battles", type=int, default=2_000_000)
    parser.add_argument("--models", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--reference-rounds", type=int, default=2)
    args = parser.parse_args()
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    src = str(Path(__file__).resolve().parent.parent / "src")
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "battles.parquet"
        make_battles(data, args.battles, args.models)
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "lbnorm",
                "arena",
                str(data),
                "--style-control",
                "--bootstrap",
                str(args.rounds),
                "--quiet",
                "--out",
                str(Path(folder) / "out"),
            ],
            check=True,
            env={**env, "PYTHONPATH": src},
        )
        ours = time.perf_counter() - started
        started = time.perf_counter()
        report = Path(folder) / "reference.json"
        subprocess.run(
            [
                sys.executable,
                "-c",
                REFERENCE,
                str(data),
                str(args.reference_rounds),
                str(report),
            ],
            check=True,
            env=env,
        )
        measured = time.perf_counter() - started
        reference = json.loads(report.read_text())
        extrapolated = reference["point"] + args.rounds * reference["per_round"]
        ratings = pq.read_table(Path(folder) / "out" / "ratings.parquet").to_pydict()
        gap = max(
            abs(r - reference["ratings"][reference["models"].index(m)])
            for m, r in zip(ratings["model"], ratings["rating"], strict=True)
        )
    print(
        f"{args.battles:,} battles, {args.models} models, style control, {args.rounds:,} bootstrap rounds"
    )
    print(
        f"lbnorm     {ours:8.1f} s  (one process: read, plain and style-controlled fits and bootstraps, write)"
    )
    print(
        f"fastchat   {extrapolated:8.1f} s  extrapolated: point fit {reference['point']:.1f} s (read included) + "
        f"{args.rounds:,} x {reference['per_round']:.2f} s a round, one core ({args.reference_rounds} rounds run, {measured:.1f} s)"
    )
    print(
        f"point fits differ by at most {gap:.3f} rating points (FastChat's L-BFGS stops at gtol 1e-6)"
    )


if __name__ == "__main__":
    main()
