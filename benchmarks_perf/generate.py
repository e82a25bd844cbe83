"""Seeded generator of synthetic long-format leaderboards for the benchmarks.

``python benchmarks_perf/generate.py --size S --out DIR`` writes ``DIR/scores.parquet``
(one row per model variant and subtask), ``DIR/suite.toml`` (the bounds and
aggregation rules, in lbnorm's format) and ``DIR/meta.json`` (rows, variants, ...).
``python benchmarks_perf/generate.py --ensure L40,OOC40 [--data ROOT]`` does the same
for each named shape under ``ROOT/<name>`` (default ``benchmarks_perf/.data``) unless
it is there already, and prints the directories.

Shapes (variants x subtasks, :data:`SHAPES`):

- XS 500 x 60, S 5,000 x 60 (300k rows), M 50,000 x 60 (3M), L 200,000 x 100 (20M):
  synthetic suites of 8 and 10 benchmarks (both aggregation rules, 2-19 choices);
- L40 500,000 x 40 (20M rows): the real Open LLM Leaderboard v2 suite (lbnorm's
  built-in ``openllm-v2``: 40 subtasks, 6 benchmarks, GPQA and MATH pooled);
- OOC100 10 parts of 200,000 x 100 (200M rows, 2M variants) and OOC40 10 parts of
  500,000 x 40 under the v2 suite (200M rows, 5M variants): ``DIR/scores/`` holds
  the parts, each with its own seed, so no variant repeats across parts;
- M40 75,000 x 40 (3M rows, the v2 suite): the layout matrix of ``layouts.py``;
- S40 (5,000 x 40), OOC100S and OOC40S (2 parts, 2M rows): small stand-ins for
  ``all.py --quick``;
- L40C, OOC40C and their stand-ins S40C, OOC40SC: the rows of L40, OOC40, S40 and
  OOC40S (the same seed, the same rows in the same order) written as pandas writes
  a categorical column (:func:`write_categorical`): ``model`` a pandas categorical,
  1M-row row groups, every row group's dictionary holding all the names of its
  file (a part's 500,000 at OOC40C); the grouped shape is generated first, then
  converted file by file.

Layout of a file, which ``peers.floor`` relies on and nothing else does: rows are
grouped by variant, each variant has exactly one row per suite subtask, in suite
order; row groups hold whole variants (about 1M rows each). String columns are
stored dictionary-encoded (per row group) and read back as plain ``string``.

The generation is vectorized: per-variant keys are built once (one cheap Python
comprehension per variant for the names), the scores one row group at a time, so
memory stays at a few hundred MB per process; the parts of a multi-part shape are
written by one process per core. L takes about 5 s, a 200M-row shape about a minute.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import string
import time
import tomllib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from measure import DATA_DIR


@dataclass(frozen=True)
class Shape:
    """A generated data set: variants per part x the suite's subtasks, in parts."""

    variants: int
    suite: str  # "synthetic-60", "synthetic-100" or "openllm-v2"
    parts: int = 1  # > 1: a directory of Parquet parts, each with its own variants
    source: str | None = None  # the grouped shape whose files it rewrites (categorical)

    @property
    def subtasks(self) -> int:
        """Subtasks per variant."""
        return 40 if self.suite == "openllm-v2" else int(self.suite.split("-")[1])

    @property
    def rows(self) -> int:
        """Rows in all parts."""
        return self.parts * self.variants * self.subtasks


SHAPES: dict[str, Shape] = {
    "XS": Shape(500, "synthetic-60"),
    "S": Shape(5_000, "synthetic-60"),
    "M": Shape(50_000, "synthetic-60"),
    "L": Shape(200_000, "synthetic-100"),
    "L40": Shape(500_000, "openllm-v2"),
    "S40": Shape(5_000, "openllm-v2"),
    "M40": Shape(75_000, "openllm-v2"),
    "OOC100": Shape(200_000, "synthetic-100", parts=10),
    "OOC40": Shape(500_000, "openllm-v2", parts=10),
    "OOC100S": Shape(10_000, "synthetic-100", parts=2),
    "OOC40S": Shape(25_000, "openllm-v2", parts=2),
    "L40C": Shape(500_000, "openllm-v2", source="L40"),
    "S40C": Shape(5_000, "openllm-v2", source="S40"),
    "OOC40C": Shape(500_000, "openllm-v2", parts=10, source="OOC40"),
    "OOC40SC": Shape(25_000, "openllm-v2", parts=2, source="OOC40S"),
}
"""Named shapes (see the module docstring)."""

SIZES: dict[str, tuple[int, int]] = {
    name: (shape.variants, shape.subtasks)
    for name, shape in SHAPES.items()
    if shape.parts == 1
}
"""Single-file shapes: name -> (variants, subtasks per variant)."""

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


def v2_suite_text() -> str:
    """The text of lbnorm's built-in ``openllm-v2`` suite (the installed lbnorm's)."""
    return (
        resources.files("lbnorm.suites") / "builtin" / "openllm-v2.toml"
    ).read_text()


def v2_suite() -> list[BenchmarkSpec]:
    """lbnorm's built-in ``openllm-v2`` suite as specs: 40 subtasks, 6 benchmarks."""
    suite = []
    for bench in tomllib.loads(v2_suite_text())["benchmarks"]:
        subtasks = tuple(
            SubtaskSpec(
                benchmark=bench["name"],
                name=sub["name"],
                task=sub["task"],
                metric=sub["metric"],
                num_choices=int(sub.get("num_choices", 0)),
                n_samples=sub.get("n_samples"),
                lower_bound=sub.get("lower_bound"),
            )
            for sub in bench["subtasks"]
        )
        aggregation = bench.get("aggregation", "normalize-then-average")
        suite.append(BenchmarkSpec(bench["name"], aggregation, subtasks))
    return suite


def shape_suite(
    shape: Shape, seed: int = DEFAULT_SEED
) -> tuple[list[BenchmarkSpec], str]:
    """The suite of a shape and its TOML text."""
    if shape.suite == "openllm-v2":
        return v2_suite(), v2_suite_text()
    suite = make_suite(shape.subtasks, seed)
    return suite, suite_toml(suite, shape.suite)


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


def _write_part(args: tuple[Path, list[BenchmarkSpec], int, int]) -> dict[str, float]:
    path, suite, n_variants, seed = args
    tmp = path.with_name(path.name + ".tmp")
    stats = write_scores(tmp, suite, n_variants, seed)
    tmp.replace(path)
    return stats


def write_categorical(
    source: Path, path: Path, row_group_size: int = ROWS_PER_GROUP
) -> None:
    """Write the rows of ``source`` as pandas writes them with ``model`` a categorical.

    ``df.astype({"model": "category"}).to_parquet(path, row_group_size=...)``: the
    Arrow writer slices the one dictionary array into row groups, so every row
    group's dictionary holds every name of the file, used in it or not. Written to
    ``path`` + ``.tmp``, then renamed.
    """
    frame = pq.read_table(source).to_pandas().astype({"model": "category"})
    temporary = path.with_name(path.name + ".tmp")
    frame.to_parquet(temporary, row_group_size=row_group_size, engine="pyarrow")
    temporary.replace(path)


def _generate_categorical(
    name: str, out: Path, seed: int, jobs: int | None
) -> dict[str, object]:
    """A categorical shape: its grouped source shape (generated if missing), rewritten.

    One file at a time, on at most ``jobs`` processes (default 1: a 20M-row part
    takes a few GiB as a pandas frame).
    """
    shape = SHAPES[name]
    assert shape.source is not None
    source = ensure_data(shape.source, out.parent, seed)
    known = json.loads((source / "meta.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "suite.toml", out / "suite.toml")
    scores = source / str(known["scores"])
    if shape.parts == 1:
        work = [(scores, out / scores.name)]
    else:
        (out / scores.name).mkdir(exist_ok=True)
        work = [
            (p, out / scores.name / p.name) for p in sorted(scores.glob("*.parquet"))
        ]
    todo = [item for item in work if not item[1].exists()]
    jobs = min(jobs or 1, len(todo)) or 1
    if jobs == 1:
        for item in todo:
            write_categorical(*item)
    else:
        with ProcessPoolExecutor(jobs) as pool:
            list(pool.map(write_categorical, *zip(*todo, strict=True)))
    meta = {
        **known,
        "shape": name,
        "source": shape.source,
        "layout": "model a pandas categorical, 1M-row row groups",
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def generate_shape(
    name: str, out: Path, seed: int = DEFAULT_SEED, *, jobs: int | None = None
) -> dict[str, object]:
    """Write ``suite.toml``, the scores and ``meta.json`` of a named shape into ``out``.

    A single-part shape writes ``out/scores.parquet``; a multi-part one
    ``out/scores/part-NNN.parquet``, the parts on ``jobs`` processes (default:
    every core), part ``i`` seeded ``seed + 1000 + i``. A categorical shape
    (``Shape.source``) rewrites its source shape's files (``out``'s sibling).
    """
    shape = SHAPES[name]
    if shape.source is not None:
        return _generate_categorical(name, out, seed, jobs)
    out.mkdir(parents=True, exist_ok=True)
    suite, text = shape_suite(shape, seed)
    (out / "suite.toml").write_text(text)
    if shape.parts == 1:
        work = [(out / "scores.parquet", suite, shape.variants, seed + shape.variants)]
        scores = out / "scores.parquet"
    else:
        scores = out / "scores"
        scores.mkdir(exist_ok=True)
        work = [
            (
                scores / f"part-{part:03d}.parquet",
                suite,
                shape.variants,
                seed + 1_000 + part,
            )
            for part in range(shape.parts)
        ]
    todo = [item for item in work if not item[0].exists()]
    jobs = min(jobs or os.cpu_count() or 1, len(todo)) or 1
    if jobs == 1:
        stats = [_write_part(item) for item in todo]
    else:
        with ProcessPoolExecutor(jobs) as pool:
            stats = list(pool.map(_write_part, todo))
    meta: dict[str, object] = {
        "shape": name,
        "seed": seed,
        "scores": scores.name,
        "suite": shape.suite,
        "parts": shape.parts,
        "rows": shape.rows,
        "variants": shape.parts * shape.variants,
        "subtasks": shape.subtasks,
        "benchmarks": len(suite),
    }
    if stats:
        meta["share_below_bound"] = float(
            np.mean([s["share_below_bound"] for s in stats])
        )
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def generate(size: str, out: Path, seed: int = DEFAULT_SEED) -> dict[str, object]:
    """Write ``scores.parquet``, ``suite.toml`` and ``meta.json`` for a preset size."""
    return generate_shape(size, out, seed)


def ensure_data(size: str, root: Path = DATA_DIR, seed: int = DEFAULT_SEED) -> Path:
    """Return ``root/size`` holding the data of shape ``size``; generate it if missing."""
    out = root / size
    meta = out / "meta.json"
    if meta.exists():
        known = json.loads(meta.read_text())
        if known.get("seed") == seed and (out / str(known.get("scores"))).exists():
            return out
        shutil.rmtree(out)  # stale: another seed or layout
    # without meta.json, finished parts (written as .tmp, then renamed) are kept
    t0 = time.perf_counter()
    generate_shape(size, out, seed)
    print(
        f"generated {size} ({SHAPES[size].rows:,} rows) in "
        f"{time.perf_counter() - t0:.1f} s -> {out}",
        flush=True,
    )
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=list(SHAPES), help="one shape, into --out")
    parser.add_argument("--out", type=Path, help="with --size: the directory")
    parser.add_argument("--ensure", help="comma-separated shapes, under --data")
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    if args.ensure:
        names = args.ensure.split(",")
        if unknown := [n for n in names if n not in SHAPES]:
            parser.error(f"unknown shapes {unknown}; choose from {list(SHAPES)}")
        for name in names:
            print(ensure_data(name, args.data, args.seed), flush=True)
        return 0
    if not (args.size and args.out):
        parser.error("give --size and --out, or --ensure")
    t0 = time.perf_counter()
    meta = generate_shape(args.size, args.out, args.seed)
    elapsed = time.perf_counter() - t0
    print(f"{args.size}: {meta} -> {args.out} in {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
