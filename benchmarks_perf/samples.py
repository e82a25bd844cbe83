"""Per-sample aggregation at the Open LLM Leaderboard's size: lbnorm against DuckDB.

Generates a seeded Parquet sample table (default 4,576 models x the v2 suite's
documents, ~21,600 per model: ~100M rows; one 0/1 value per (model, task,
metric, document), the IFEval prompt-level and instruction-level metrics one row
per document each), then runs in interleaved rounds, each a separate process:

- ``lbnorm run samples.parquet --no-subtasks``: aggregate (mean, mean_stderr,
  count) a row group at a time, normalize, rank, write;
- DuckDB: ``GROUP BY model, task, metric`` with ``avg``, ``stddev_samp`` and
  ``count`` over the same file (aggregation only: it writes the per-subtask table);
- the floor: reading the file once with pyarrow.

Before timing, lbnorm's aggregation (``lbnorm.readers.samples``) is checked equal
to DuckDB's to 1e-9. Usage::

    python benchmarks_perf/samples.py --models 4576 --repeats 3
    python benchmarks_perf/samples.py --models 200 --repeats 3   # quick
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from generate import DATA_DIR
from run import measure, warm_page_cache

DUCKDB = """
import sys, duckdb
duckdb.sql(f'''
    COPY (SELECT model, precision, task, metric, avg(value) AS raw_score,
                 stddev_samp(value) / sqrt(count(*)) AS stderr, count(*) AS n_samples
          FROM read_parquet('{sys.argv[1]}') GROUP BY ALL)
    TO '{sys.argv[2]}' (FORMAT parquet)''')
"""
FLOOR = """
import sys, pyarrow.parquet as pq
f = pq.ParquetFile(sys.argv[1], read_dictionary=["model", "precision", "task", "metric"])
for index in range(f.num_row_groups):
    f.read_row_group(index)
"""


def generate(path: Path, n_models: int, seed: int = 20240613) -> int:
    """Write the sample table; return its row count."""
    from lbnorm.suites import load_suite

    subtasks = load_suite("openllm-v2").subtask_table()
    tasks = subtasks["task"].to_numpy()
    metrics = subtasks["metric"].to_numpy()
    counts = subtasks["n_samples"].fillna(0).to_numpy(dtype=np.int64).copy()
    counts[counts == 0] = 541  # IFEval's documents (the suite gives no weight)
    per_model = int(counts.sum())
    rng = np.random.default_rng(seed)
    models_per_group = max(1, 4_000_000 // per_model)
    task_index = np.repeat(np.arange(len(tasks)), counts).astype(np.int32)
    doc_id = np.concatenate([np.arange(n) for n in counts]).astype(np.int32)
    schema = pa.schema(
        [
            ("model", pa.dictionary(pa.int32(), pa.string())),
            ("precision", pa.dictionary(pa.int32(), pa.string())),
            ("task", pa.dictionary(pa.int32(), pa.string())),
            ("metric", pa.dictionary(pa.int32(), pa.string())),
            ("doc_id", pa.int32()),
            ("value", pa.float64()),
        ]
    )
    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for start in range(0, n_models, models_per_group):
            n = min(models_per_group, n_models - start)
            names = pa.array(
                [f"org-{i % 997}/model-name-{i:06d}" for i in range(start, start + n)]
            )
            ability = rng.uniform(0.2, 0.9, n)
            value = (rng.random((n, per_model)) < ability[:, None]).astype(np.float64)
            writer.write_table(
                pa.table(
                    {
                        "model": pa.DictionaryArray.from_arrays(
                            pa.array(
                                np.repeat(np.arange(n, dtype=np.int32), per_model)
                            ),
                            names,
                        ),
                        "precision": pa.DictionaryArray.from_arrays(
                            pa.array(np.zeros(n * per_model, dtype=np.int32)),
                            pa.array(["bfloat16"]),
                        ),
                        "task": pa.DictionaryArray.from_arrays(
                            pa.array(np.tile(task_index, n)), pa.array(tasks.tolist())
                        ),
                        "metric": pa.DictionaryArray.from_arrays(
                            pa.array(np.tile(task_index, n)), pa.array(metrics.tolist())
                        ),
                        "doc_id": pa.array(np.tile(doc_id, n)),
                        "value": pa.array(value.ravel()),
                    },
                    schema=schema,
                )
            )
    return n_models * per_model


def check(path: Path, duckdb_out: Path) -> None:
    """lbnorm's aggregation equals DuckDB's (mean, stderr, count) to 1e-9."""
    import pandas as pd

    from lbnorm.readers.samples import aggregate_samples_table
    from lbnorm.suites import load_suite

    ours = aggregate_samples_table(path, load_suite("openllm-v2").subtask_table())
    theirs = pd.read_parquet(duckdb_out)
    merged = ours.merge(
        theirs.astype({"model": str, "task": str, "metric": str}),
        left_on=["model", ours["_row"].str.split("/").str[0], "metric"],
        right_on=["model", "task", "metric"],
        validate="one_to_one",
    )
    assert len(merged) == len(ours) == len(theirs), (
        len(merged),
        len(ours),
        len(theirs),
    )
    for a, b in (
        ("raw_score_x", "raw_score_y"),
        ("stderr_x", "stderr_y"),
        ("n_samples_x", "n_samples_y"),
    ):
        worst = float((merged[a].astype(float) - merged[b].astype(float)).abs().max())
        assert worst <= 1e-9, (a, worst)
    print(f"check: lbnorm == DuckDB over {len(merged):,} (model, subtask) aggregates")


def main(argv: list[str] | None = None) -> int:
    """Generate, check, time; print the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=4576)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    root = DATA_DIR / f"samples-{args.models}"
    root.mkdir(parents=True, exist_ok=True)
    path = root / "samples.parquet"
    if not path.exists():
        t0 = time.perf_counter()
        generate(path.with_suffix(".tmp"), args.models)
        path.with_suffix(".tmp").replace(path)
        print(f"generated {path} in {time.perf_counter() - t0:.1f} s", flush=True)
    rows = pq.ParquetFile(path).metadata.num_rows
    cmds = {
        "lbnorm": [sys.executable, "-m", "lbnorm", "run", str(path), "--no-subtasks", "--missing", "partial", "--out", str(root / "lbnorm"), "--quiet"],
        "duckdb": [sys.executable, "-c", DUCKDB, str(path), str(root / "duckdb.parquet")],
        "floor-read": [sys.executable, "-c", FLOOR, str(path)],
    }  # fmt: skip
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    names = list(cmds)
    for round_no in range(args.repeats):
        for name in names[round_no % 3 :] + names[: round_no % 3]:
            warm_page_cache(path)
            seconds, rss, code, tail = measure(cmds[name], 3600)
            if code != 0:
                print(f"{name} failed: {tail}", file=sys.stderr)
                return 1
            samples[name].append((seconds, rss))
            print(
                f"round {round_no + 1} {name}: {seconds:.2f} s, {rss:,.0f} MB",
                flush=True,
            )
        if round_no == 0:
            check(path, root / "duckdb.parquet")
    median = {n: statistics.median(s for s, _ in v) for n, v in samples.items()}
    print(
        f"\n{rows:,} sample rows ({args.models:,} models); medians of {args.repeats} interleaved rounds\n"
    )
    print("| competitor | time | rows/s | peak RSS | / duckdb | / floor-read |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        peak = max(r for _, r in samples[name])
        print(
            f"| {name} | {median[name]:.2f} s | {rows / median[name] / 1e6:.1f} M | {peak:,.0f} MB | "
            f"{median[name] / median['duckdb']:.2f} | {median[name] / median['floor-read']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
