"""Seeded generator of synthetic long-format leaderboards for the benchmarks.

``python benchmarks_perf/generate.py --size S --out DIR`` writes ``DIR/scores.parquet``
(one row per model variant and subtask) and ``DIR/suite.toml`` (the bounds and
aggregation rules), in the formats lbnorm reads.

Sizes (variants x subtasks): XS 500 x 60, S 5,000 x 60 (300k rows), M 50,000 x 60
(3M rows), L 200,000 x 100 (20M rows).

Layout of the file, which ``peers.floor`` relies on and nothing else does: rows are
grouped by variant, each variant has exactly one row per suite subtask, in suite
order; row groups hold whole variants (about 1M rows each). String columns are
stored dictionary-encoded (per row group) and read back as plain ``string``.

The generation is vectorized: per-variant keys are built once (one cheap Python
comprehension per variant for the names), the scores one row group at a time, so
memory stays at a few hundred MB even for L.
"""

from __future__ import annotations

import argparse
import json
import math
import string
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

SIZES: dict[str, tuple[int, int]] = {
    "XS": (500, 60),
    "S": (5_000, 60),
    "M": (50_000, 60),
    "L": (200_000, 100),
}
"""Preset sizes: name -> (variants, subtasks per variant)."""

DATA_DIR = Path(__file__).resolve().parent / ".data"
"""Where run.py and check_peers.py cache generated data (gitignored)."""

ROWS_PER_GROUP = 1_000_000
DEFAULT_SEED = 20240613

SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("precision", pa.string()),
        ("revision", pa.string()),
        ("chat_template", pa.bool_()),
        ("benchmark", pa.string()),
        ("subtask", pa.string()),
        ("metric", pa.string()),
        ("raw_score", pa.float64()),
        ("stderr", pa.float64()),
        ("n_samples", pa.int64()),
    ]
)
"""The schema readers see."""

_WRITE_SCHEMA = pa.schema(
    [
        pa.field(f.name, pa.dictionary(pa.int32(), pa.string()))
        if f.type == pa.string()
        else f
        for f in SCHEMA
    ]
)
"""The schema handed to the writer: strings as dictionaries, written as such."""


@dataclass(frozen=True)
class SubtaskSpec:
    """One suite subtask as written to ``suite.toml``."""

    benchmark: str
    name: str
    task: str
    metric: str
    num_choices: int
    n_samples: int | None
    lower_bound: float | None = None

    @property
    def bound(self) -> float:
        """The random baseline: explicit, else 1/num_choices, else 0."""
        if self.lower_bound is not None:
            return self.lower_bound
        return 1.0 / self.num_choices if self.num_choices else 0.0


@dataclass(frozen=True)
class BenchmarkSpec:
    """One suite benchmark: name, aggregation rule and subtasks."""

    name: str
    aggregation: str
    subtasks: tuple[SubtaskSpec, ...]


# (name, aggregation, n_subtasks, kind, metric) where kind says how to pick
# num_choices: "gen" -> 0, "mixed" -> random 2..19, an int -> that many choices.
_BENCHMARK_PLAN_60: list[tuple[str, str, int, str | int, str]] = [
    ("IFE", "normalize-then-average", 2, "gen", "prompt_level_strict_acc,none"),
    ("BBH", "normalize-then-average", 24, "mixed", "acc_norm,none"),
    ("MATH", "pool-then-normalize", 7, "gen", "exact_match,none"),
    ("GPQA", "pool-then-normalize", 3, 4, "acc_norm,none"),
    ("MUSR", "normalize-then-average", 3, "mixed", "acc_norm,none"),
    ("MMLU-PRO", "normalize-then-average", 1, 10, "acc,none"),
    ("ARC-X", "normalize-then-average", 12, 4, "acc_norm,none"),
    ("WINO-X", "pool-then-normalize", 8, 2, "acc,none"),
]
_BENCHMARK_PLAN_EXTRA: list[tuple[str, str, int, str | int, str]] = [
    ("AGI-X", "normalize-then-average", 24, "mixed", "acc_norm,none"),
    ("HELLA-X", "pool-then-normalize", 16, 3, "acc_norm,none"),
]


def make_suite(n_subtasks: int, seed: int = DEFAULT_SEED) -> list[BenchmarkSpec]:
    """Build the synthetic suite: 8 benchmarks for 60 subtasks, 10 for 100.

    Both aggregation rules, generative subtasks (num_choices 0), 2-19 choices,
    and one explicit ``lower_bound`` override.
    """
    plans = {60: _BENCHMARK_PLAN_60, 100: _BENCHMARK_PLAN_60 + _BENCHMARK_PLAN_EXTRA}
    if n_subtasks not in plans:
        msg = f"n_subtasks must be one of {sorted(plans)}, got {n_subtasks}"
        raise ValueError(msg)
    rng = np.random.default_rng(seed)
    suite: list[BenchmarkSpec] = []
    for bench, aggregation, count, kind, metric in plans[n_subtasks]:
        subtasks = []
        for i in range(count):
            if kind == "gen":
                choices = 0
            elif kind == "mixed":
                choices = int(rng.integers(2, 20))
            else:
                choices = int(kind)
            pooled = aggregation == "pool-then-normalize"
            has_n = pooled or choices > 0
            n_samples = int(rng.integers(100, 600)) if has_n else None
            lower_bound = 0.3 if (bench == "ARC-X" and i == 0) else None
            name = f"{bench.lower().replace('-', '_')}_{i:02d}"
            subtasks.append(
                SubtaskSpec(
                    benchmark=bench,
                    name=name,
                    task=f"synthetic_{name}",
                    metric=metric,
                    num_choices=choices,
                    n_samples=n_samples,
                    lower_bound=lower_bound,
                )
            )
        suite.append(BenchmarkSpec(bench, aggregation, tuple(subtasks)))
    return suite


def suite_toml(suite: list[BenchmarkSpec], name: str) -> str:
    """Render a suite in lbnorm's TOML format."""
    lines = [
        f'name = "{name}"',
        'description = "Synthetic suite generated by benchmarks_perf/generate.py"',
    ]
    for bench in suite:
        lines += ["", "[[benchmarks]]", f'name = "{bench.name}"']
        lines += [f'aggregation = "{bench.aggregation}"', "subtasks = ["]
        for st in bench.subtasks:
            fields = [
                f'name = "{st.name}"',
                f'task = "{st.task}"',
                f"metric = {json.dumps(st.metric)}",
                f"num_choices = {st.num_choices}",
            ]
            if st.n_samples is not None:
                fields.append(f"n_samples = {st.n_samples}")
            if st.lower_bound is not None:
                fields.append(f"lower_bound = {st.lower_bound!r}")
            lines.append("  { " + ", ".join(fields) + " },")
        lines.append("]")
    return "\n".join(lines) + "\n"


_SYLLABLES = [
    "ai", "al", "an", "ar", "bo", "ca", "da", "de", "el", "en", "fa", "ge", "ha",
    "in", "jo", "ka", "la", "lu", "ma", "mi", "mo", "na", "ne", "no", "ol", "pa",
    "qu", "ra", "re", "ri", "sa", "se", "so", "ta", "te", "to", "ul", "va", "vi",
    "xe", "yo", "za", "zu",
]  # fmt: skip
_FAMILIES = [
    "Llama-3.1", "Llama-3", "Qwen2.5", "Qwen2", "Mistral", "Mixtral", "gemma-2",
    "Phi-3.5", "Yi-1.5", "falcon", "SmolLM2", "granite-3.0", "internlm2_5",
    "OLMo-2", "DeepSeek-R1-Distill", "Nemotron", "pythia", "gpt2",
]  # fmt: skip
_PARAMS = ["0.5B", "1.5B", "3B", "7B", "8B", "9B", "12B", "14B", "27B", "32B", "70B"]
_SUFFIXES = [
    "Instruct", "chat", "base", "SFT", "DPO", "ORPO", "merge", "slerp", "v0.2",
    "abliterated", "it", "GGUF-fp16", "lora", "RP", "Math",
]  # fmt: skip


@dataclass(frozen=True)
class Variants:
    """The per-variant key columns and latent abilities."""

    model: np.ndarray  # object array of str
    precision: np.ndarray  # object array of str
    revision: np.ndarray  # object array of str
    chat_template: np.ndarray  # bool
    ability: np.ndarray  # float64


def make_variants(n: int, rng: np.random.Generator) -> Variants:
    """Draw ``n`` unique variant keys; about 3% repeat a name with other settings."""
    n_orgs = max(30, n // 25)
    syl = np.array(_SYLLABLES, dtype=object)
    parts = rng.integers(0, len(syl), size=(n_orgs, 4))
    org_len = rng.integers(2, 5, size=n_orgs)
    orgs = np.array(
        ["".join(syl[p[:k]]) for p, k in zip(parts, org_len, strict=True)],
        dtype=object,
    )
    orgs[rng.random(n_orgs) < 0.3] += "-ai"
    org = orgs[rng.zipf(1.6, size=n) % n_orgs]
    family = np.array(_FAMILIES, dtype=object)[rng.integers(0, len(_FAMILIES), n)]
    params = np.array(_PARAMS, dtype=object)[rng.integers(0, len(_PARAMS), n)]
    suffix = np.array(_SUFFIXES, dtype=object)[rng.integers(0, len(_SUFFIXES), n)]
    # A unique 4-character base-36 tag (36**4 = 1.7M > any preset) keeps names unique.
    alphabet = np.array(list(string.digits + string.ascii_lowercase), dtype=object)
    codes = rng.permutation(36**4)[:n]
    tag = (
        alphabet[codes // 36**3]
        + alphabet[codes // 36**2 % 36]
        + alphabet[codes // 36 % 36]
        + alphabet[codes % 36]
    )
    model = org + "/" + family + "-" + params + "-" + suffix + "-" + tag
    # About 3% of the variants re-use an earlier variant's name: another precision,
    # revision or chat-template setting of the same model (as 79 names do in v2).
    dup = np.flatnonzero(rng.random(n) < 0.03)
    dup = dup[dup > 0]
    model[dup] = model[(rng.random(dup.size) * dup).astype(np.int64)]
    precision = np.where(rng.random(n) < 0.7, "bfloat16", "float16").astype(object)
    hex_all = rng.bytes(20 * n).hex()
    revision = np.array([hex_all[40 * i : 40 * i + 40] for i in range(n)], dtype=object)
    chat_template = rng.random(n) < 0.6
    ability = rng.normal(0.0, 1.0, n)
    return Variants(model, precision, revision, chat_template, ability)


def _dict_column(per_variant: np.ndarray, n_sub: int) -> pa.DictionaryArray:
    """Repeat each per-variant string ``n_sub`` times as a dictionary array."""
    encoded = pc.dictionary_encode(pa.array(per_variant, type=pa.string()))
    indices = np.repeat(encoded.indices.to_numpy(), n_sub)
    return pa.DictionaryArray.from_arrays(pa.array(indices), encoded.dictionary)


def _tiled_column(values: list[str], n_var: int) -> pa.DictionaryArray:
    """Tile the per-subtask strings ``n_var`` times as a dictionary array."""
    encoded = pc.dictionary_encode(pa.array(values, type=pa.string()))
    indices = np.tile(encoded.indices.to_numpy(), n_var)
    return pa.DictionaryArray.from_arrays(pa.array(indices), encoded.dictionary)


# Scores are lb + (1 - lb) * v with v = sigmoid(z) * (1 + c) - c: a fraction of
# them falls below the bound (v < 0); BELOW_SHIFT tunes it to about 10%.
BELOW_SHIFT = 0.14


def write_scores(
    path: Path, suite: list[BenchmarkSpec], n_variants: int, seed: int
) -> dict[str, float]:
    """Write the scores table, one row group (whole variants) at a time.

    Returns:
        Summary statistics (rows, share of scores below their bound, ...).
    """
    rng = np.random.default_rng(seed)
    variants = make_variants(n_variants, rng)
    subtasks = [st for bench in suite for st in bench.subtasks]
    n_sub = len(subtasks)
    bound = np.array([st.bound for st in subtasks])
    n_items = np.array([st.n_samples or 500 for st in subtasks], dtype=np.float64)
    difficulty = rng.normal(0.0, 0.8, n_sub)
    slope = rng.uniform(0.6, 1.6, n_sub)
    n_samples_col = pa.array(
        [st.n_samples for st in subtasks], type=pa.int64()
    )  # null where the suite has none
    bench_col = [st.benchmark for st in subtasks]
    subtask_col = [st.name for st in subtasks]
    metric_col = [st.metric for st in subtasks]

    per_group = max(1, ROWS_PER_GROUP // n_sub)
    below = at_risk = 0
    with pq.ParquetWriter(
        path,
        _WRITE_SCHEMA,
        compression="zstd",
        use_dictionary=True,
        store_schema=False,  # strings read back as plain ``string``, not dictionary
    ) as writer:
        for start in range(0, n_variants, per_group):
            stop = min(start + per_group, n_variants)
            n_var = stop - start
            z = (
                variants.ability[start:stop, None] * slope
                + difficulty
                + rng.normal(0.0, 0.6, (n_var, n_sub))
            )
            v = (1.0 + BELOW_SHIFT) / (1.0 + np.exp(-z)) - BELOW_SHIFT
            raw = np.clip(bound + (1.0 - bound) * v, 0.0, 1.0)
            raw = np.round(raw * n_items) / n_items  # k / n like real accuracies
            has_bound = np.broadcast_to(bound > 0, raw.shape)
            below += int(np.count_nonzero((raw < bound) & has_bound))
            at_risk += int(np.count_nonzero(has_bound))
            stderr = np.sqrt(raw * (1.0 - raw) / (n_items - 1.0))
            stderr_mask = rng.random(raw.shape) < 0.03  # some "N/A" stderrs -> null
            chunk = pa.record_batch(
                [
                    _dict_column(variants.model[start:stop], n_sub),
                    _dict_column(variants.precision[start:stop], n_sub),
                    _dict_column(variants.revision[start:stop], n_sub),
                    pa.array(np.repeat(variants.chat_template[start:stop], n_sub)),
                    _tiled_column(bench_col, n_var),
                    _tiled_column(subtask_col, n_var),
                    _tiled_column(metric_col, n_var),
                    pa.array(raw.ravel()),
                    pa.array(stderr.ravel(), mask=stderr_mask.ravel()),
                    pa.concat_arrays([n_samples_col] * n_var),
                ],
                schema=_WRITE_SCHEMA,
            )
            writer.write_batch(chunk, row_group_size=chunk.num_rows)
    return {
        "rows": n_variants * n_sub,
        "variants": n_variants,
        "subtasks": n_sub,
        "benchmarks": len(suite),
        "distinct_model_names": len(set(variants.model.tolist())),
        "share_below_bound": below / at_risk if at_risk else math.nan,
    }


def generate(size: str, out: Path, seed: int = DEFAULT_SEED) -> dict[str, object]:
    """Write ``scores.parquet``, ``suite.toml`` and ``meta.json`` for a preset size."""
    n_variants, n_sub = SIZES[size]
    out.mkdir(parents=True, exist_ok=True)
    suite = make_suite(n_sub, seed)
    (out / "suite.toml").write_text(suite_toml(suite, f"synthetic-{n_sub}"))
    tmp = out / "scores.parquet.tmp"
    stats = write_scores(tmp, suite, n_variants, seed + n_variants)
    tmp.replace(out / "scores.parquet")
    meta = {"size": size, "seed": seed, **stats}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def ensure_data(size: str, root: Path = DATA_DIR, seed: int = DEFAULT_SEED) -> Path:
    """Return ``root/size`` holding the data for ``size``; generate it if missing."""
    out = root / size
    meta = out / "meta.json"
    if (
        meta.exists()
        and (out / "scores.parquet").exists()
        and json.loads(meta.read_text()).get("seed") == seed
    ):
        return out
    t0 = time.perf_counter()
    generate(size, out, seed)
    print(f"generated {size} in {time.perf_counter() - t0:.1f} s -> {out}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=list(SIZES), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    meta = generate(args.size, args.out, args.seed)
    elapsed = time.perf_counter() - t0
    size_mb = (args.out / "scores.parquet").stat().st_size / 1e6
    print(f"{args.size}: {meta} -> {args.out} ({size_mb:.1f} MB) in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
