"""Chatbot Arena ratings at scale: lbnorm against the reference implementation.

Generates seeded battles from known ratings (default 2M battles among 300 models,
15% ties, a tstamp per battle; Parquet with dictionary-encoded names) and times,
each as a separate process (interpreter start and imports included) in interleaved
rounds with the order rotated, the input in the page cache:

- ``lbnorm``: :func:`lbnorm.ratings.battles.read_battles`, then
  :func:`lbnorm.ratings.fit.compute_ratings` (Bradley-Terry, 1,000 bootstrap
  rounds), then the ratings and win-rate tables written to Parquet;
- ``lbnorm-fit``: the same without the bootstrap; ``lbnorm-elo``: online Elo;
- ``fastchat-bt``: the current reference (FastChat's ``rating_systems.py``,
  re-implemented here): pandas, distinct (a, b, outcome) cells, scipy L-BFGS-B,
  a multinomial bootstrap fitted round by round on a ``multiprocessing.Pool``
  of every core;
- ``fastchat-sklearn``: the older reference (``compute_mle_elo`` of
  ``elo_analysis.py`` and the 2023 notebook): pandas, a dense design of every
  battle twice, ``LogisticRegression(fit_intercept=False)`` without penalty
  (``tol=1e-8``), the bootstrap resampling battles (``DataFrame.sample``) and
  refitting;
- ``fastchat-elo``: the reference's online Elo loop (numpy ratings).

The references would take minutes to hours for 1,000 rounds, so they run
``--reference-rounds`` (default 4 and 1) and write how long their point fit and
their rounds took; the table extrapolates their time to ``--rounds`` linearly
(process time - bootstrap time + rounds x time per round) and says so. Before any
timing counts, a child process checks lbnorm's ratings against the reference's
fit (to 0.05 points, its own tolerance) and against the ratings the battles were
drawn from. Usage::

    python benchmarks_perf/arena.py                          # 2M x 300, 3 rounds
    python benchmarks_perf/arena.py --battles 200000 --models 100 --repeats 2  # quick
    python benchmarks_perf/arena.py --skip fastchat-sklearn  # the sklearn design needs ~10 GB
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measure import measure, warm_page_cache

DATA_DIR = Path(__file__).parent / ".data"

LBNORM = """
import sys, pyarrow.parquet as pq
from lbnorm.ratings import RatingOptions, compute_ratings, ratings_table, win_rates_table
from lbnorm.ratings import read_battles
battles = read_battles(sys.argv[1])
result = compute_ratings(battles, RatingOptions(method=sys.argv[3], bootstrap=int(sys.argv[2]), seed=0))
pq.write_table(ratings_table(result), sys.argv[4] + "-ratings.parquet")
pq.write_table(win_rates_table(result), sys.argv[4] + "-win_rates.parquet")
"""

# FastChat's rating_systems.py, re-implemented from its description: factorize
# the names, distinct (a, b, outcome) cells with their counts, L-BFGS-B on the
# weighted log-likelihood (maxiter 100, gtol 1e-6), a multinomial bootstrap over
# the cells, rounds fitted on a pool of every core.
FASTCHAT_BT = """
import json, math, os, sys, time
import multiprocessing as mp
from functools import partial
import numpy as np, pandas as pd
from scipy.optimize import minimize
from scipy.special import expit

def cells(df):
    codes, models = pd.factorize(pd.concat([df["model_a"], df["model_b"]]))
    n = len(df)
    schedule = np.full((n, 3), 1, dtype=np.int32)
    schedule[:, 0], schedule[:, 1] = codes[:n], codes[n:]
    schedule[(df["winner"] == "model_a").to_numpy(), 2] = 2
    schedule[(df["winner"] == "model_b").to_numpy(), 2] = 0
    unique, counts = np.unique(schedule, return_counts=True, axis=0)
    return unique[:, :2], unique[:, 2] / 2.0, list(models), counts.astype(np.float64)

def loss_and_grad(theta, pairs, outcome, weight, alpha):
    both = theta[pairs]
    p = expit(alpha * (both[:, 0] - both[:, 1]))
    loss = -((np.log(p) * outcome + np.log(1.0 - p) * (1.0 - outcome)) * weight).sum()
    per_cell = -alpha * (outcome - p) * weight
    grad = np.zeros_like(theta)
    np.add.at(grad, pairs, per_cell[:, None] * np.array([1.0, -1.0]))
    return loss, grad

def fit(pairs, outcome, weight, k, alpha):
    result = minimize(loss_and_grad, np.zeros(k), args=(pairs, outcome, weight, alpha),
                      jac=True, method="L-BFGS-B", options={"maxiter": 100, "gtol": 1e-6})
    return result.x

if __name__ == "__main__":
    t0 = time.perf_counter()
    df = pd.read_parquet(sys.argv[1], columns=["model_a", "model_b", "winner"])
    pairs, outcome, models, weight = cells(df)
    alpha = math.log(10.0)
    ratings = 400 * fit(pairs, outcome, weight, len(models), alpha) + 1000
    t1 = time.perf_counter()
    rounds = int(sys.argv[2])
    rng = np.random.default_rng(seed=0)
    draws = rng.multinomial(len(df), weight / weight.sum(), size=rounds) / len(df)
    with mp.Pool(os.cpu_count()) as pool:
        boot = list(pool.imap_unordered(partial(fit, pairs, outcome, k=len(models), alpha=alpha), draws))
    table = pd.DataFrame(400 * np.array(boot) + 1000, columns=models)
    lower, upper = table.quantile(0.025), table.quantile(0.975)
    t2 = time.perf_counter()
    pd.Series(ratings, index=models).to_frame("rating").to_parquet(sys.argv[3] + "-ratings.parquet")
    json.dump({"fit": t1 - t0, "bootstrap": t2 - t1, "rounds": rounds}, open(sys.argv[3] + ".json", "w"))
"""

# compute_mle_elo of the 2023 notebook / elo_analysis.py, re-implemented: every
# battle twice, +-ln 10 columns, a tie once as A's win and once as B's, dense
# numpy design, LogisticRegression without intercept (no penalty, tol 1e-8);
# get_bootstrap_result resamples the battles and refits each round.
FASTCHAT_SKLEARN = """
import json, math, sys, time
import numpy as np, pandas as pd
from sklearn.linear_model import LogisticRegression

def compute_mle_elo(df):
    models = pd.concat([df["model_a"], df["model_b"]]).unique()
    index = pd.Series(np.arange(len(models)), index=models)
    df = pd.concat([df, df], ignore_index=True)
    n, k = len(df), len(models)
    design = np.zeros([n, k])
    design[np.arange(n), index[df["model_a"]]] = +math.log(10)
    design[np.arange(n), index[df["model_b"]]] = -math.log(10)
    label = np.zeros(n)
    label[(df["winner"] == "model_a").to_numpy()] = 1.0
    tie = ((df["winner"] == "tie") | (df["winner"] == "tie (bothbad)")).to_numpy().copy()
    tie[n // 2:] = False
    label[tie] = 1.0
    model = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-8)
    model.fit(design, label)
    return pd.Series(400 * model.coef_[0] + 1000, index=models)

if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")  # lbfgs stops at max_iter, as it does for FastChat
    np.random.seed(42)
    t0 = time.perf_counter()
    battles = pd.read_parquet(sys.argv[1], columns=["model_a", "model_b", "winner"])
    battles = battles.astype({"model_a": str, "model_b": str, "winner": str})
    ratings = compute_mle_elo(battles)
    t1 = time.perf_counter()
    rows = [compute_mle_elo(battles.sample(frac=1.0, replace=True)) for _ in range(int(sys.argv[2]))]
    table = pd.DataFrame(rows)
    lower, upper = table.quantile(0.025), table.quantile(0.975)
    t2 = time.perf_counter()
    ratings.to_frame("rating").to_parquet(sys.argv[3] + "-ratings.parquet")
    json.dump({"fit": t1 - t0, "bootstrap": t2 - t1, "rounds": int(sys.argv[2])}, open(sys.argv[3] + ".json", "w"))
"""

# compute_elo of rating_systems.py, re-implemented: numpy ratings, one battle a step.
FASTCHAT_ELO = """
import math, sys
import numpy as np, pandas as pd
df = pd.read_parquet(sys.argv[1], columns=["model_a", "model_b", "winner", "tstamp"])
df = df.sort_values("tstamp", kind="stable")
codes, models = pd.factorize(pd.concat([df["model_a"], df["model_b"]]))
n = len(df)
matchups = np.column_stack([codes[:n], codes[n:]])
outcomes = np.full(n, 0.5)
outcomes[(df["winner"] == "model_a").to_numpy()] = 1.0
outcomes[(df["winner"] == "model_b").to_numpy()] = 0.0
alpha = math.log(10.0) / 400.0
ratings = np.full(len(models), 1000.0)
for (a, b), outcome in zip(matchups, outcomes):
    prob = 1.0 / (1.0 + math.exp(alpha * (ratings[b] - ratings[a])))
    update = 4.0 * (outcome - prob)
    ratings[a] += update
    ratings[b] -= update
pd.Series(ratings, index=models).to_frame("rating").to_parquet(sys.argv[2])
"""

CHECK = """
import sys, numpy as np, pandas as pd
ours = pd.read_parquet(sys.argv[1] + "-ratings.parquet").set_index("model")["rating"]
reference = pd.read_parquet(sys.argv[2] + "-ratings.parquet")["rating"]
true = pd.read_parquet(sys.argv[3]).set_index("model")["rating"]
gap = (ours - reference.reindex(ours.index)).abs().max()
error = ours - true.reindex(ours.index)
print(f"check: lbnorm vs the reference's fit: max gap {gap:.4f} points; "
      f"vs the true ratings: RMS {np.sqrt((error ** 2).mean()):.2f} points, "
      f"correlation {np.corrcoef(ours, true.reindex(ours.index))[0, 1]:.5f}")
assert gap < 0.05, gap
"""


def generate(folder: Path, n_battles: int, n_models: int, seed: int = 20240614) -> None:
    """Write battles.parquet and true_ratings.parquet into `folder`."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    names = [f"org-{i % 37}/model-{i:04d}" for i in range(n_models)]
    true = rng.normal(0.0, 200.0, n_models)
    true += 1000.0 - true.mean()
    a = rng.integers(0, n_models, n_battles)
    b = (a + rng.integers(1, n_models, n_battles)) % n_models
    p_a = 1.0 / (1.0 + 10.0 ** ((true[b] - true[a]) / 400.0))
    tie = 0.15 * 2 * np.minimum(p_a, 1 - p_a)  # ties keep A's expected score at p_a
    u = rng.random(n_battles)
    outcome = np.where(u < p_a - tie / 2, 0, np.where(u < p_a + tie / 2, 2, 1))
    winners = ["model_a", "model_b", "tie", "tie (bothbad)"]
    outcome = np.where((outcome == 2) & (rng.random(n_battles) < 0.3), 3, outcome)

    def coded(codes: object, values: list[str]) -> pa.DictionaryArray:
        return pa.DictionaryArray.from_arrays(
            pa.array(np.asarray(codes, dtype=np.int32)), values
        )

    table = pa.table(
        {
            "model_a": coded(a, names),
            "model_b": coded(b, names),
            "winner": coded(outcome, winners),
            "tstamp": 1.7e9 + np.sort(rng.uniform(0, 3e7, n_battles)),
            "anony": rng.random(n_battles) < 0.9,
        }
    )
    pq.write_table(table, folder / "battles.tmp.parquet", row_group_size=1 << 20)
    pq.write_table(
        pa.table({"model": names, "rating": true}), folder / "true_ratings.parquet"
    )
    (folder / "battles.tmp.parquet").replace(folder / "battles.parquet")


def main(argv: list[str] | None = None) -> int:
    """Generate, check, time; print the Markdown table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--battles", type=int, default=2_000_000)
    parser.add_argument("--models", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--reference-rounds",
        type=int,
        nargs=2,
        default=(4, 1),
        metavar=("BT", "SKLEARN"),
        help="bootstrap rounds the two references run (then extrapolated)",
    )
    parser.add_argument(
        "--skip", default="", help="competitors to leave out, comma-separated"
    )
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.generate:
        generate(args.generate, args.battles, args.models)
        return 0
    root = DATA_DIR / f"arena-{args.models}-{args.battles}"
    root.mkdir(parents=True, exist_ok=True)
    path = root / "battles.parquet"
    python = sys.executable
    if not path.exists():
        t0 = time.perf_counter()
        subprocess.run([python, __file__, "--battles", str(args.battles), "--models", str(args.models), "--generate", str(root)], check=True)  # fmt: skip
        print(f"generated {path} in {time.perf_counter() - t0:.1f} s", flush=True)
    out = Path(tempfile.mkdtemp(prefix="arena-bench-"))
    bt_rounds, sk_rounds = args.reference_rounds
    cmds = {
        "lbnorm": [python, "-c", LBNORM, str(path), str(args.rounds), "bt", str(out / "lbnorm")],
        "lbnorm-fit": [python, "-c", LBNORM, str(path), "0", "bt", str(out / "lbnorm-fit")],
        "lbnorm-elo": [python, "-c", LBNORM, str(path), "0", "elo", str(out / "lbnorm-elo")],
        "fastchat-bt": [python, "-c", FASTCHAT_BT, str(path), str(bt_rounds), str(out / "fastchat-bt")],
        "fastchat-sklearn": [python, "-c", FASTCHAT_SKLEARN, str(path), str(sk_rounds), str(out / "fastchat-sklearn")],
        "fastchat-elo": [python, "-c", FASTCHAT_ELO, str(path), str(out / "fastchat-elo.parquet")],
    }  # fmt: skip
    skipped = {name.strip() for name in args.skip.split(",") if name.strip()}
    names = [name for name in cmds if name not in skipped]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    estimates: dict[str, list[float]] = {name: [] for name in names}
    fit_times: dict[str, list[float]] = {}
    for round_no in range(args.repeats):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            warm_page_cache(path)
            run = measure(cmds[name], args.timeout)
            seconds, rss, code, tail = (
                run.seconds,
                run.peak_rss_mb,
                run.code,
                run.stderr_tail,
            )
            if code != 0:
                print(f"{name} failed ({code}): {tail}", file=sys.stderr)
                return 1
            samples[name].append((seconds, rss))
            estimate = seconds
            phases = out / f"{name}.json"
            if phases.exists():  # a reference: extrapolate its bootstrap
                timed = json.loads(phases.read_text())
                per_round = timed["bootstrap"] / max(timed["rounds"], 1)
                estimate = seconds - timed["bootstrap"] + args.rounds * per_round
                fit_times.setdefault(name, []).append(seconds - timed["bootstrap"])
                phases.unlink()
            estimates[name].append(estimate)
            print(f"round {round_no + 1} {name}: {seconds:.2f} s, {rss:,.0f} MB", flush=True)  # fmt: skip
        if round_no == 0 and {"lbnorm-fit", "fastchat-bt"} <= set(names):
            subprocess.run([python, "-c", CHECK, str(out / "lbnorm-fit"), str(out / "fastchat-bt"), str(root / "true_ratings.parquet")], check=True)  # fmt: skip
    median = {n: statistics.median(s for s, _ in v) for n, v in samples.items()}
    fit_only = {n: statistics.median(v) for n, v in fit_times.items()}
    at_rounds = {n: statistics.median(v) for n, v in estimates.items()}
    print(
        f"\n{args.battles:,} battles among {args.models} models; whole processes (interpreter, "
        f"imports, read, fit, bootstrap, write); medians of {args.repeats} interleaved rounds\n"
    )
    print("| competitor | bootstrap rounds run | time | peak RSS |")
    print("|---|---:|---:|---:|")
    rounds_run = {
        "lbnorm": args.rounds,
        "fastchat-bt": bt_rounds,
        "fastchat-sklearn": sk_rounds,
    }
    for name in names:
        peak = max(r for _, r in samples[name])
        print(f"| {name} | {rounds_run.get(name, 0):,} | {median[name]:.2f} s | {peak:,.0f} MB |")  # fmt: skip

    def cell(name: str, value: dict[str, float], ours: str, note: str = "") -> str:
        if name not in value or ours not in value:
            return "- | -"
        return f"{value[name]:,.1f} s{note} | {value[name] / value[ours]:,.1f}"

    print("\n| job | lbnorm | fastchat-bt (scipy) | x lbnorm | fastchat-sklearn | x lbnorm |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|")
    if "lbnorm" in at_rounds:
        extrapolated = " (extrapolated)"
        print(
            f"| Bradley-Terry + {args.rounds:,} bootstrap rounds | {at_rounds['lbnorm']:,.1f} s | "
            f"{cell('fastchat-bt', at_rounds, 'lbnorm', extrapolated)} | "
            f"{cell('fastchat-sklearn', at_rounds, 'lbnorm', extrapolated)} |"
        )
    if "lbnorm-fit" in median:
        fits = {**fit_only, "lbnorm-fit": median["lbnorm-fit"]}
        print(
            f"| Bradley-Terry point fit | {median['lbnorm-fit']:,.1f} s | "
            f"{cell('fastchat-bt', fits, 'lbnorm-fit')} | {cell('fastchat-sklearn', fits, 'lbnorm-fit')} |"
        )
    if "lbnorm-elo" in median:
        print(
            f"| online Elo | {median['lbnorm-elo']:,.1f} s | "
            f"{cell('fastchat-elo', median, 'lbnorm-elo', ' (fastchat-elo)')} | - | - |"
        )
    print(
        "\nThe references' times for all rounds are extrapolated from the rounds they ran: "
        "process time - their bootstrap time + rounds x their time per round; "
        "their point fit is the process time without the bootstrap."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
