"""Build lbnorm's bundled demo leaderboard from the published Open LLM Leaderboard v2.

Run from the repository root, without arguments::

    python data/make_demo.py

Inputs (both in ``data/``):

* ``published_v2_final.csv``: the final published Open LLM Leaderboard v2 table
  (4,576 model variants), with each benchmark's raw value (``<name> Raw``), its
  normalized score (``<name>``) and the average.
* ``v2_subtasks.csv``: the suite's 40 subtasks (benchmark, harness task, metric,
  number of answer choices, number of samples).

Outputs (in ``src/lbnorm/data/``):

* ``demo_scores.parquet``: long format, one row per (model variant, subtask): the
  per-subtask raw scores a leaderboard pipeline would read.
* ``demo_metadata.parquet``: one row per model variant (type, size, date, flag).

The leaderboard only published per-benchmark values, so the per-subtask scores are
*synthesized*: realistic-looking, deterministic, and constrained so that the
leaderboard's own rules, applied to them, give back the published table.

Method, per benchmark and vectorized over all models at once (no Python loop over
models; every 1-D root is found by bisection on a bracket, run on all models at
once):

1. **A realistic profile.** Each subtask score is drawn as
   ``x_i = g_i + (1 - g_i) * sigmoid(d_i + e_i + s)``: a guessing floor ``g_i``
   (a random 80-100 % of the chance level ``1/num_choices``, so weak models land
   at or a little below chance, as real ones do), a fixed per-subtask difficulty
   ``d_i`` (hand-set from typical Open LLM Leaderboard results: e.g. BBH's
   boolean_expressions is easy, tracking_shuffled_objects is hard), seeded noise
   ``e_i``, and a per-model ability ``s`` found by bisection so that the
   benchmark's raw aggregate (plain or sample-weighted mean) equals the published
   raw value.
2. **Benchmarks with a pooled or linear rule** (IFEval, MATH Lvl 5, GPQA,
   MMLU-PRO): the published normalized score is a function of the raw value
   alone, so step 1 already reproduces it. IFEval's two scores are the raw value
   -/+ a half-gap (instruction-level accuracy is above prompt-level accuracy);
   GPQA's noise has the size of the subsets' binomial sampling error.
3. **BBH and MUSR** (normalize-then-average): the normalized score is the mean of
   per-subtask ``max(0, (x_i - 1/k_i) / (1 - 1/k_i)) * 100``, so it depends on the
   whole profile, not only on the raw mean. For each model we draw several
   candidate profiles (step 1), keep the one whose normalized score is closest to
   the published one, and then close the remaining gap exactly along a path that
   keeps the raw mean fixed: first a "tilt" (shift the logits of subtasks with
   few answer choices up and of those with many choices down, or the reverse;
   sampled as a polyline, each vertex re-solved for the raw mean), then, only if
   the tilt cannot reach the target, a straight segment to the extreme profile of
   the linear program (max: subtasks at 1 and one fractional; min: every subtask
   at chance, the excess poured into the subtasks with the most choices). The
   normalized score is convex along each straight segment, so the first segment
   whose end passes the target contains exactly one crossing, found by
   bisection. The published value is reachable exactly iff it lies between the
   two LP extremes; otherwise the closest extreme is used and the miss reported.

Every raw score stays in [0, 1]; the benchmark raw values are reproduced to
within float rounding (checked below at 1e-12) and BBH/MUSR normalized values to
~1e-13 wherever feasible (all 4,576 models of the published table are). The
script is deterministic: one fixed seed, an independent stream per benchmark, no
time stamps in the files, so two runs on the same platform write byte-identical
Parquet files.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

ROOT: Final = Path(__file__).resolve().parent.parent
SOURCE_CSV: Final = ROOT / "data" / "published_v2_final.csv"
SUBTASKS_CSV: Final = ROOT / "data" / "v2_subtasks.csv"
OUT_DIR: Final = ROOT / "src" / "lbnorm" / "data"
SCORES_PATH: Final = OUT_DIR / "demo_scores.parquet"
METADATA_PATH: Final = OUT_DIR / "demo_metadata.parquet"

SEED: Final = 20250321
BENCHMARKS: Final = ("IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO")
KEYS: Final = ("model", "precision", "revision", "chat_template")

RAW_TOL: Final = 1e-12  # recomputed benchmark raw values vs published
NORM_TOL: Final = 1e-9  # recomputed BBH / MUSR normalized values vs published
BISECT_STEPS: Final = 64  # halvings of each bracket: well past float resolution
CANDIDATES: Final = {"BBH": 16, "MUSR": 64}  # profiles drawn per model
TILT_MAX: Final = 3.0  # largest tilt, in logits per standard deviation of 1/(1-lb)
TILT_STEPS: Final = 12  # vertices of the tilt polyline
FLOOR_RANGE: Final = (0.8, 1.0)  # guessing floor as a fraction of chance

# Per-subtask difficulty on the logit scale (higher = easier), hand-set from typical
# Open LLM Leaderboard v2 results; only differences within a benchmark matter.
DIFFICULTY: Final[dict[str, dict[str, float]]] = {
    "BBH": {
        "boolean_expressions": 1.2,
        "causal_judgement": 0.2,
        "date_understanding": 0.3,
        "disambiguation_qa": 0.2,
        "formal_fallacies": -0.6,
        "geometric_shapes": -0.5,
        "hyperbaton": 0.8,
        "logical_deduction_five_objects": -0.2,
        "logical_deduction_seven_objects": -0.5,
        "logical_deduction_three_objects": 0.4,
        "movie_recommendation": 0.6,
        "navigate": 0.1,
        "object_counting": -0.3,
        "penguins_in_a_table": 0.2,
        "reasoning_about_colored_objects": 0.3,
        "ruin_names": 0.3,
        "salient_translation_error_detection": -0.1,
        "snarks": 0.5,
        "sports_understanding": 0.7,
        "temporal_sequences": -0.2,
        "tracking_shuffled_objects_five_objects": -1.5,
        "tracking_shuffled_objects_seven_objects": -1.8,
        "tracking_shuffled_objects_three_objects": -1.0,
        "web_of_lies": -0.4,
    },
    "MATH Lvl 5": {
        "algebra": 0.9,
        "counting_and_prob": -0.3,
        "geometry": -0.6,
        "intermediate_algebra": -1.0,
        "num_theory": 0.2,
        "prealgebra": 1.0,
        "precalculus": -1.0,
    },
    "GPQA": {"diamond": -0.05, "extended": 0.0, "main": 0.0},
    "MUSR": {
        "murder_mysteries": 0.2,
        "object_placements": -0.3,
        "team_allocation": -0.4,
    },
}
NOISE_SD: Final = {"BBH": 0.35, "MATH Lvl 5": 0.3, "MUSR": 0.25}  # logits


@dataclass(frozen=True)
class Benchmark:
    """One benchmark of the suite: its subtasks, in suite order."""

    name: str
    subtasks: tuple[str, ...]
    metrics: tuple[str, ...]
    lower_bounds: FloatArray  # 1/num_choices, 0 for generative subtasks
    n_samples: IntArray | None  # None where unknown (IFEval)

    @property
    def sample_weights(self) -> FloatArray:
        """Weights of the sample-weighted mean (n_samples / total)."""
        if self.n_samples is None:
            msg = f"{self.name}: sample counts unknown"
            raise ValueError(msg)
        counts = self.n_samples.astype(np.float64)
        weights: FloatArray = counts / counts.sum()
        return weights


# --------------------------------------------------------------------------- rules


def normalize(x: FloatArray, lower_bound: FloatArray | float) -> FloatArray:
    """Leaderboard normalization: max(0, (x - lb) / (1 - lb)) * 100."""
    return np.maximum(0.0, (x - lower_bound) / (1.0 - lower_bound)) * 100.0


def benchmark_values(bench: Benchmark, x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Recompute a benchmark's (raw, normalized) from subtask scores (models x subtasks).

    IFEval, BBH and MUSR: raw = plain mean, normalized = mean of per-subtask
    normalized scores. MATH Lvl 5 and GPQA: raw = sample-weighted mean, normalized =
    normalize(raw). MMLU-PRO has one subtask, for which both readings agree.
    """
    if bench.name in {"MATH Lvl 5", "GPQA"}:
        raw = x @ bench.sample_weights
        lb = float(bench.lower_bounds[0])
        return raw, normalize(raw, lb)
    return x.mean(axis=-1), normalize(x, bench.lower_bounds).mean(axis=-1)


# ----------------------------------------------------------------------- numerics


def sigmoid(z: FloatArray) -> FloatArray:
    """Logistic function, clipped far outside the range that matters."""
    return 1.0 / (1.0 + np.exp(-np.clip(z, -500.0, 500.0)))


def bisect(
    below: Callable[[FloatArray], BoolArray],
    lo: FloatArray,
    hi: FloatArray,
    steps: int = BISECT_STEPS,
) -> FloatArray:
    """Vectorized bisection: `below(t)` is True where the root lies above `t`.

    Keeps the invariant below(lo) and not below(hi), elementwise, so it converges
    to a crossing of any continuous function bracketed by [lo, hi].
    """
    lo, hi = lo.copy(), hi.copy()
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        go_up = below(mid)
        lo = np.where(go_up, mid, lo)
        hi = np.where(go_up, hi, mid)
    return 0.5 * (lo + hi)


def fill_profile(
    logits: FloatArray, floor: FloatArray, target: FloatArray, weights: FloatArray
) -> FloatArray:
    """Scores floor + (1 - floor) * sigmoid(logits + s) with weighted mean = target.

    `logits` and `floor` have a last axis of subtasks; `target` has the leading
    shape. The shift `s` is found by bisection (the mean is increasing in `s`).
    Targets of exactly 0 or 1 give all-0 or all-1 profiles (floor must then be 0).
    """

    def profile(shift: FloatArray) -> FloatArray:
        return floor + (1.0 - floor) * sigmoid(logits + shift[..., None])

    def below(shift: FloatArray) -> BoolArray:
        return profile(shift) @ weights < target

    bound = np.full(target.shape, 60.0)
    x = profile(bisect(below, -bound, bound))
    x = np.where(target[..., None] <= 0.0, 0.0, x)
    return np.where(target[..., None] >= 1.0, 1.0, x)


def draw_floor(
    rng: np.random.Generator, lower_bounds: FloatArray, target: FloatArray
) -> FloatArray:
    """Guessing floors: 80-100 % of chance, lowered where the raw target is below."""
    shape = (*target.shape, lower_bounds.size)
    floor = lower_bounds * rng.uniform(*FLOOR_RANGE, size=shape)
    room = np.minimum(1.0, 0.9 * target / np.maximum(floor.mean(axis=-1), 1e-300))
    floor_scaled: FloatArray = floor * room[..., None]
    return floor_scaled


# ----------------------------------------------------- benchmark-specific profiles


def make_ifeval(raw: FloatArray, rng: np.random.Generator) -> FloatArray:
    """(prompt_level_strict, inst_level_strict) = raw -/+ half a realistic gap."""
    gap = 0.13 - 0.08 * raw + 0.015 * rng.standard_normal(raw.size)
    half = np.clip(0.5 * gap, 0.005, None)
    half = np.minimum(half, np.minimum(raw, 1.0 - raw))
    return np.stack([raw - half, raw + half], axis=1)


def make_pooled(
    bench: Benchmark, raw: FloatArray, rng: np.random.Generator
) -> FloatArray:
    """Subtask scores whose sample-weighted mean is the raw value (MATH, GPQA)."""
    weights = bench.sample_weights
    offsets = np.array([DIFFICULTY[bench.name][s] for s in bench.subtasks])
    clipped = np.clip(raw, 1e-3, 1 - 1e-3)[:, None]
    if bench.name == "GPQA":
        # Same-difficulty subsets: spread = binomial sampling error, in logits.
        assert bench.n_samples is not None
        sd = 1.0 / np.sqrt(bench.n_samples * clipped * (1.0 - clipped))
    else:
        sd = np.full((raw.size, 1), NOISE_SD[bench.name])
    logits = np.log(clipped / (1.0 - clipped)) + offsets
    logits = logits + sd * rng.standard_normal((raw.size, len(bench.subtasks)))
    floor = np.zeros_like(logits)
    return fill_profile(logits, floor, raw, weights)


@dataclass(frozen=True)
class NormalizedFit:
    """Result of matching a normalize-then-average benchmark."""

    scores: FloatArray
    feasible: BoolArray
    used_extreme: BoolArray  # the path went past the tilt, towards the LP extreme


def lp_extremes(
    raw: FloatArray, lower_bounds: FloatArray, prefer: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Profiles with mean `raw` minimizing / maximizing the normalized mean.

    Min: every subtask at its chance level, the excess poured into subtasks in
    increasing order of the slope 1/(1-lb) (water-filling), or all scaled below
    chance if the raw mean is below the mean chance level. Max: floor(n*raw)
    subtasks at 1 (those highest in `prefer`), the remainder on the subtask with the
    smallest lower bound, where it counts most.
    """
    m, n = prefer.shape
    total = raw * n
    # minimum
    order = np.argsort(lower_bounds, kind="stable")
    capacity = 1.0 - lower_bounds[order]
    before = np.concatenate([[0.0], np.cumsum(capacity)[:-1]])
    excess = np.maximum(0.0, total - lower_bounds.sum())
    lowest = np.empty((m, n))
    lowest[:, order] = lower_bounds[order] + np.clip(
        excess[:, None] - before, 0.0, capacity
    )
    scaled = lower_bounds * (total / lower_bounds.sum())[:, None]
    lowest = np.where((total < lower_bounds.sum())[:, None], scaled, lowest)
    # maximum
    ones = np.floor(total)
    spare = int(np.argmin(lower_bounds))
    rank_key = prefer.copy()
    rank_key[:, spare] = -np.inf
    rank = np.argsort(
        np.argsort(-rank_key, axis=1, kind="stable"), axis=1, kind="stable"
    )
    highest = (rank < ones[:, None]).astype(np.float64)
    highest[:, spare] = np.where(ones < n, total - ones, 1.0)
    return lowest, highest


def make_normalized(
    bench: Benchmark, raw: FloatArray, target: FloatArray, rng: np.random.Generator
) -> NormalizedFit:
    """Subtask scores with plain mean = raw and mean normalized score = target."""
    m, n = raw.size, len(bench.subtasks)
    lb = bench.lower_bounds
    weights = np.full(n, 1.0 / n)
    k = CANDIDATES[bench.name]

    def norm_mean(x: FloatArray) -> FloatArray:
        mean: FloatArray = normalize(x, lb).mean(axis=-1)
        return mean

    # 1. candidate profiles with the right raw mean; keep the closest in normalized
    offsets = np.array([DIFFICULTY[bench.name][s] for s in bench.subtasks])
    logits = offsets + NOISE_SD[bench.name] * rng.standard_normal((m, k, n))
    floor = draw_floor(rng, lb, np.repeat(raw[:, None], k, axis=1))
    candidates = fill_profile(
        logits, floor, np.repeat(raw[:, None], k, axis=1), weights
    )
    best = np.argmin(np.abs(norm_mean(candidates) - target[:, None]), axis=1)
    rows = np.arange(m)
    start, logits, floor = candidates[rows, best], logits[rows, best], floor[rows, best]

    # 2. path: start -> tilt polyline -> LP extreme, all at constant raw mean
    direction = np.where(target >= norm_mean(start), 1.0, -1.0)
    slope = 1.0 / (1.0 - lb)
    tilt = (slope - slope.mean()) / slope.std()
    vertices = [start]
    for step in range(1, TILT_STEPS + 1):
        amount = direction[:, None] * (TILT_MAX * step / TILT_STEPS) * tilt
        vertices.append(fill_profile(logits + amount, floor, raw, weights))
    lowest, highest = lp_extremes(raw, lb, start)
    extreme = np.where(direction[:, None] > 0, highest, lowest)
    path = np.stack(vertices, axis=1)  # (m, TILT_STEPS + 1, n)
    # stop the tilt at its most extreme vertex, then head for the LP extreme
    signed = direction[:, None] * (norm_mean(path) - target[:, None])
    last = np.argmax(signed, axis=1)
    past = np.arange(TILT_STEPS + 1)[None, :] > last[:, None]
    path = np.where(past[..., None], extreme[:, None, :], path)
    path = np.concatenate([path, extreme[:, None, :]], axis=1)
    signed = direction[:, None] * (norm_mean(path) - target[:, None])
    reached = signed >= 0.0
    feasible = reached.any(axis=1)
    # first vertex at or past the target (the LP extreme if infeasible)
    first = np.where(feasible, np.argmax(reached, axis=1), path.shape[1] - 1)
    seg_end = path[rows, first]
    seg_start = path[rows, np.maximum(first - 1, 0)]

    def point(t: FloatArray) -> FloatArray:
        mixed: FloatArray = (1.0 - t[:, None]) * seg_start + t[:, None] * seg_end
        return mixed

    def below(t: FloatArray) -> BoolArray:
        return direction * (norm_mean(point(t)) - target) < 0.0

    t = bisect(below, np.zeros(m), np.ones(m))
    t = np.where(feasible & (first > 0), t, 1.0)
    used_extreme: BoolArray = np.asarray(first > last)
    return NormalizedFit(point(t), np.asarray(feasible), used_extreme)


# ---------------------------------------------------------------------- load / save


def load_suite() -> list[Benchmark]:
    """The suite's benchmarks and subtasks, in suite order."""
    table = pd.read_csv(SUBTASKS_CSV, dtype={"n_samples": "Int64"})
    suite = []
    for name in BENCHMARKS:
        part = table[table["benchmark"] == name]
        choices = part["num_choices"].to_numpy(dtype=np.float64)
        lb = np.divide(1.0, choices, out=np.zeros_like(choices), where=choices > 0)
        counts = part["n_samples"]
        n_samples = None if counts.isna().any() else counts.to_numpy(dtype=np.int64)
        suite.append(
            Benchmark(
                name=name,
                subtasks=tuple(part["subtask"]),
                metrics=tuple(part["metric"]),
                lower_bounds=lb,
                n_samples=n_samples,
            )
        )
    if sum(len(b.subtasks) for b in suite) != len(table):
        msg = f"{SUBTASKS_CSV.name}: benchmarks other than {BENCHMARKS}"
        raise ValueError(msg)
    return suite


def load_published() -> pd.DataFrame:
    """The published table, keyed and sorted like the output."""
    df = pd.read_csv(SOURCE_CSV, dtype={"Model sha": "string"})
    df = df.rename(
        columns={
            "fullname": "model",
            "Precision": "precision",
            "Model sha": "revision",
            "Chat Template": "chat_template",
        }
    )
    df["revision"] = df["revision"].fillna("")
    if df.duplicated(list(KEYS)).any():
        msg = f"{SOURCE_CSV.name}: duplicate model variants"
        raise ValueError(msg)
    return df.sort_values(list(KEYS), kind="stable", ignore_index=True)


def _field(
    name: str, type_: pa.DataType, doc: str, *, nullable: bool = False
) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


KEY_FIELDS: Final = [
    _field("model", pa.string(), "Model name, `org/name` (leaderboard `fullname`)."),
    _field("precision", pa.string(), "Weights' precision (bfloat16, float16, 4bit)."),
    _field("revision", pa.string(), "Model revision (commit sha); '' if unknown."),
    _field("chat_template", pa.bool_(), "Whether a chat template was applied."),
]
SCORES_SCHEMA: Final = pa.schema(
    [
        *KEY_FIELDS,
        _field("benchmark", pa.string(), "Benchmark name as the suite spells it."),
        _field("subtask", pa.string(), "Subtask name as the suite spells it."),
        _field("metric", pa.string(), "lm-evaluation-harness metric key."),
        _field("raw_score", pa.float64(), "Synthesized raw score, fraction in [0, 1]."),
        _field(
            "stderr",
            pa.float64(),
            "Binomial standard error sqrt(p(1-p)/(n-1)); null if n unknown.",
            nullable=True,
        ),
        _field(
            "n_samples",
            pa.int64(),
            "Items in the subtask; null if unknown.",
            nullable=True,
        ),
    ]
)
METADATA_SCHEMA: Final = pa.schema(
    [
        *KEY_FIELDS,
        _field("type", pa.string(), "Leaderboard model type (`Type`)."),
        _field("params_b", pa.float64(), "Parameters, billions (`#Params (B)`)."),
        _field(
            "submission_date",
            pa.date32(),
            "Leaderboard submission date; null if unknown.",
            nullable=True,
        ),
        _field("flagged", pa.bool_(), "Flagged on the leaderboard."),
    ]
)
FILE_METADATA: Final = {
    "lbnorm.generator": "data/make_demo.py",
    "lbnorm.seed": str(SEED),
    "lbnorm.source": "Open LLM Leaderboard v2 final table (fboulnois/llm-leaderboard-csv "
    "2025.03.21); per-subtask scores synthesized to reproduce it",
}


def write_parquet(table: pa.Table, path: Path) -> None:
    """Write compactly and reproducibly: zstd, dictionary-encoded strings."""
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), **FILE_METADATA}
    )
    strings = [f.name for f in table.schema if pa.types.is_string(f.type)]
    floats = [f.name for f in table.schema if pa.types.is_floating(f.type)]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        table,
        path,
        compression="zstd",
        compression_level=9,
        use_dictionary=strings,
        use_byte_stream_split=floats,
        write_statistics=True,
    )


def build_scores(
    df: pd.DataFrame, suite: list[Benchmark], scores: FloatArray
) -> pa.Table:
    """Long table: models x subtasks, row-major (model order, then suite order)."""
    m = len(df)
    n = scores.shape[1]
    bench_of = [b.name for b in suite for _ in b.subtasks]
    subtask_of = [s for b in suite for s in b.subtasks]
    metric_of = [x for b in suite for x in b.metrics]
    counts = np.concatenate(
        [
            np.zeros(len(b.subtasks), dtype=np.int64)
            if b.n_samples is None
            else b.n_samples
            for b in suite
        ]
    )
    known = np.concatenate(
        [np.full(len(b.subtasks), b.n_samples is not None) for b in suite]
    )
    flat = scores.reshape(-1)
    n_flat = np.tile(counts, m)
    known_flat = np.tile(known, m)
    stderr = np.sqrt(flat * (1.0 - flat) / np.where(known_flat, n_flat - 1, 1))
    return pa.table(
        {
            "model": np.repeat(df["model"].to_numpy(dtype=object), n),
            "precision": np.repeat(df["precision"].to_numpy(dtype=object), n),
            "revision": np.repeat(df["revision"].to_numpy(dtype=object), n),
            "chat_template": np.repeat(df["chat_template"].to_numpy(dtype=bool), n),
            "benchmark": np.tile(np.array(bench_of, dtype=object), m),
            "subtask": np.tile(np.array(subtask_of, dtype=object), m),
            "metric": np.tile(np.array(metric_of, dtype=object), m),
            "raw_score": flat,
            "stderr": pa.array(stderr, mask=~known_flat),
            "n_samples": pa.array(n_flat, mask=~known_flat),
        },
        schema=SCORES_SCHEMA,
    )


def build_metadata(df: pd.DataFrame) -> pa.Table:
    """One row per model variant."""
    dates = pd.to_datetime(df["Submission Date"], format="%Y-%m-%d")
    return pa.table(
        {
            "model": df["model"].to_numpy(dtype=object),
            "precision": df["precision"].to_numpy(dtype=object),
            "revision": df["revision"].to_numpy(dtype=object),
            "chat_template": df["chat_template"].to_numpy(dtype=bool),
            "type": df["Type"].to_numpy(dtype=object),
            "params_b": df["#Params (B)"].to_numpy(dtype=np.float64),
            "submission_date": pa.array(dates, from_pandas=True).cast(pa.date32()),
            "flagged": df["Flagged"].to_numpy(dtype=bool),
        },
        schema=METADATA_SCHEMA,
    )


# ----------------------------------------------------------------------------- main


def _same_block_for_same_values(
    df: pd.DataFrame, bench: Benchmark, block: FloatArray
) -> FloatArray:
    """Give variants with the same published values the same subtask scores.

    The published table shows identical submissions with identical values; their
    subtask scores are then identical too, so lbnorm's exact sums tie them
    exactly, as the leaderboard does (each variant's own draw would differ in
    the last bits).
    """
    values = df[[f"{bench.name} Raw", bench.name]].to_numpy(dtype=np.float64)
    _, first, inverse = np.unique(values, axis=0, return_index=True, return_inverse=True)
    same: FloatArray = block[first[inverse.ravel()]]
    return same


def check(condition: bool, message: str) -> None:
    """Raise AssertionError if `condition` is false (also under python -O)."""
    if not condition:
        raise AssertionError(message)


def main() -> int:
    """Generate, verify and write the demo files; print a report."""
    started = time.perf_counter()
    suite = load_suite()
    df = load_published()
    m = len(df)
    root_seq = np.random.SeedSequence(SEED)
    streams = dict(zip(BENCHMARKS, root_seq.spawn(len(BENCHMARKS)), strict=True))

    blocks: list[FloatArray] = []
    fits: dict[str, NormalizedFit] = {}
    for bench in suite:
        rng = np.random.default_rng(streams[bench.name])
        raw = df[f"{bench.name} Raw"].to_numpy(dtype=np.float64)
        if bench.name == "IFEval":
            block = make_ifeval(raw, rng)
        elif bench.name in {"MATH Lvl 5", "GPQA"}:
            block = make_pooled(bench, raw, rng)
        elif bench.name in {"BBH", "MUSR"}:
            target = df[bench.name].to_numpy(dtype=np.float64)
            fits[bench.name] = make_normalized(bench, raw, target, rng)
            block = fits[bench.name].scores
        else:  # MMLU-PRO: a single subtask
            block = raw[:, None].copy()
        blocks.append(block)
    blocks = [
        _same_block_for_same_values(df, bench, block)
        for bench, block in zip(suite, blocks, strict=True)
    ]
    scores = np.concatenate(blocks, axis=1)
    check(scores.shape == (m, 40), f"expected {m} x 40 scores, got {scores.shape}")
    check(bool(np.isfinite(scores).all()), "non-finite scores")
    check(bool(((scores >= 0.0) & (scores <= 1.0)).all()), "scores outside [0, 1]")

    # ---- verify: recompute the published table from the subtask scores
    print(f"{m} model variants x {scores.shape[1]} subtasks")
    print(f"{'benchmark':<11} {'max|raw err|':>13} {'max|norm err|':>14}  within 1e-9")
    normalized = []
    col = 0
    for bench in suite:
        x = scores[:, col : col + len(bench.subtasks)]
        col += len(bench.subtasks)
        raw, norm = benchmark_values(bench, x)
        raw_err = np.abs(raw - df[f"{bench.name} Raw"].to_numpy())
        norm_err = np.abs(norm - df[bench.name].to_numpy())
        check(
            float(raw_err.max()) <= RAW_TOL,
            f"{bench.name}: raw not reproduced (max error {raw_err.max():.3g})",
        )
        normalized.append(norm)
        ok = int((norm_err <= NORM_TOL).sum())
        print(
            f"{bench.name:<11} {raw_err.max():13.2e} {norm_err.max():14.2e}  {ok}/{m}"
        )
        if bench.name in fits:
            fit = fits[bench.name]
            bad = norm_err > NORM_TOL
            print(
                f"  {bench.name}: infeasible {int((~fit.feasible).sum())}, "
                f"not within {NORM_TOL:g}: {int(bad.sum())}"
                + (f" (max error {norm_err[bad].max():.3g})" if bad.any() else "")
                + f"; path needed the LP extreme for {int(fit.used_extreme.sum())}"
            )
    average = np.mean(normalized, axis=0)
    avg_err = np.abs(average - df["Average ⬆️"].to_numpy())
    print(
        f"{'Average':<11} {'':>13} {avg_err.max():14.2e}  {int((avg_err <= NORM_TOL).sum())}/{m}"
    )
    lb_all = np.concatenate([b.lower_bounds for b in suite])
    print(f"subtask scores below chance: {float((scores < lb_all).mean()):.1%}")

    # ---- write
    scores_table = build_scores(df, suite, scores)
    meta_table = build_metadata(df)
    write_parquet(scores_table, SCORES_PATH)
    write_parquet(meta_table, METADATA_PATH)
    back = pq.read_table(SCORES_PATH)
    check(back.equals(scores_table), "demo_scores.parquet does not read back equal")
    check(back.schema.names == SCORES_SCHEMA.names, "unexpected columns")
    for path, table in ((SCORES_PATH, scores_table), (METADATA_PATH, meta_table)):
        size = path.stat().st_size
        print(
            f"wrote {path.relative_to(ROOT)}: {table.num_rows} rows, {size / 1e6:.2f} MB"
        )
    print(f"done in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
