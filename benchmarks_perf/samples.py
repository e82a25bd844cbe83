"""Per-sample aggregation at the Open LLM Leaderboard's size: lbnorm against DuckDB.

Generates a seeded Parquet sample table (:data:`lbnorm.schemas.SAMPLES`; default
4,576 models x the v2 suite's 22,147 documents = 101M rows; one 0/1 value per
(model, task, metric, document); ``model``, ``precision``, ``task`` and ``metric``
dictionary-encoded; row groups of ~4M rows), then runs, each as a separate process
in interleaved rounds (the order rotates), with the file in the page cache:

- ``lbnorm-aggregate``: :func:`lbnorm.readers.samples.aggregate_samples_table`
  (mean, ``mean_stderr``, documents per (model, subtask)), written to Parquet;
- ``lbnorm-run``: ``lbnorm run samples.parquet --no-subtasks --missing partial``:
  the same aggregation, then normalize, rank and write the leaderboard;
- ``duckdb``: ``GROUP BY ALL`` with ``avg``, ``stddev_samp / sqrt(count)`` and
  ``count`` over the same file, written to Parquet (DuckDB uses both cores);
- ``floor-read``: pyarrow reads the columns the aggregation needs once.

Wall time covers the whole process (interpreter start, imports, read, compute,
write); peak RSS comes from ``os.wait4`` (as in ``run.py``). Linux hands a child
its parent's peak RSS at fork and keeps it across ``exec``, so this process imports
only the standard library and leaves generating the data and checking lbnorm's
aggregates against DuckDB's (to 1e-9, before any timing counts) to child
processes: each child's peak is its own. Usage::

    python benchmarks_perf/samples.py --models 4576 --repeats 3
    python benchmarks_perf/samples.py --models 200 --repeats 3   # quick
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from measure import measure, warm_page_cache

DATA_DIR = Path(__file__).parent / ".data"
COLUMNS = ["model", "precision", "task", "metric", "value"]
DUCKDB = """
import sys, duckdb
duckdb.sql(f'''
    COPY (SELECT model, precision, task, metric, avg(value) AS raw_score,
                 stddev_samp(value) / sqrt(count(*)) AS stderr, count(*) AS n_samples
          FROM read_parquet('{sys.argv[1]}') GROUP BY ALL)
    TO '{sys.argv[2]}' (FORMAT parquet)''')
"""
AGGREGATE = """
import sys
from pathlib import Path
from lbnorm.readers.samples import aggregate_samples_table
from lbnorm.suites import load_suite
scores, _ = aggregate_samples_table(Path(sys.argv[1]), load_suite("openllm-v2").subtask_table())
scores.to_parquet(sys.argv[2])
"""
FLOOR = f"""
import sys, pyarrow.parquet as pq
f = pq.ParquetFile(sys.argv[1], read_dictionary={COLUMNS[:4]})
for batch in f.iter_batches(batch_size=1 << 20, columns={COLUMNS}):
    pass
"""


def generate(path: Path, n_models: int, seed: int = 20240613) -> int:
    """Write the sample table; return its row count."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lbnorm.schemas import SAMPLES
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
    doc_id = np.concatenate([np.arange(n) for n in counts])
    text = pa.dictionary(pa.int32(), pa.string())
    schema = pa.schema(
        [
            pa.field(name, text if name in COLUMNS[:4] else SAMPLES.field(name).type)
            for name in ["model", "precision", "task", "metric", "doc_id", "value"]
        ]
    )

    def coded(codes: Any, values: list[str]) -> Any:
        return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)), values)

    with pq.ParquetWriter(path, schema, compression="zstd") as writer:
        for start in range(0, n_models, models_per_group):
            n = min(models_per_group, n_models - start)
            names = [f"org-{i % 997}/model-name-{i:06d}" for i in range(start, start + n)]  # fmt: skip
            ability = rng.uniform(0.2, 0.9, n)
            value = (rng.random((n, per_model)) < ability[:, None]).astype(np.float64)
            table = pa.table(
                {
                    "model": coded(np.repeat(np.arange(n), per_model), names),
                    "precision": coded(np.zeros(n * per_model), ["bfloat16"]),
                    "task": coded(np.tile(task_index, n), tasks.tolist()),
                    "metric": coded(np.tile(task_index, n), metrics.tolist()),
                    "doc_id": pa.array(np.tile(doc_id, n)),
                    "value": pa.array(value.ravel()),
                },
                schema=schema,
            )
            writer.write_table(table)
    return n_models * per_model


def check(ours_path: Path, duckdb_path: Path) -> None:
    """lbnorm's aggregates equal DuckDB's (mean, stderr, count) to 1e-9."""
    import pandas as pd

    ours = pd.read_parquet(ours_path)
    ours["task"] = ours["_row"].str.split("/").str[0]
    theirs = pd.read_parquet(duckdb_path).astype(
        {"model": str, "precision": str, "task": str, "metric": str}
    )
    keys = ["model", "precision", "task", "metric"]
    merged = ours.merge(theirs, on=keys, validate="one_to_one")
    assert len(merged) == len(ours) == len(theirs), (len(merged), len(ours), len(theirs))  # fmt: skip
    for name in ("raw_score", "stderr", "n_samples"):
        gap = (merged[f"{name}_x"].astype(float) - merged[f"{name}_y"].astype(float)).abs()  # fmt: skip
        assert float(gap.max()) <= 1e-9, (name, float(gap.max()))
    print(f"check: lbnorm == DuckDB to 1e-9 over {len(merged):,} (model, subtask) aggregates")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Generate, check, time; print the Markdown table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", type=int, default=4576)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check:
        check(*args.check)
        return 0
    if args.generate:
        print(generate(args.generate, args.models))
        return 0
    root = DATA_DIR / f"samples-table-{args.models}"
    root.mkdir(parents=True, exist_ok=True)
    path = root / "samples.parquet"
    python = sys.executable
    rows_file = root / "rows.txt"
    if not path.exists():
        t0 = time.perf_counter()
        made = subprocess.run([python, __file__, "--models", str(args.models), "--generate", str(path.with_suffix(".tmp"))], check=True, capture_output=True, text=True)  # fmt: skip
        path.with_suffix(".tmp").replace(path)
        rows_file.write_text(made.stdout)
        print(f"generated {path} in {time.perf_counter() - t0:.1f} s", flush=True)
    rows = int(rows_file.read_text())
    cmds = {
        "lbnorm-aggregate": [python, "-c", AGGREGATE, str(path), str(root / "lbnorm.parquet")],
        "lbnorm-run": [python, "-m", "lbnorm", "run", str(path), "--no-subtasks", "--missing", "partial", "--out", str(root / "lbnorm"), "--quiet"],
        "duckdb": [python, "-c", DUCKDB, str(path), str(root / "duckdb.parquet")],
        "floor-read": [python, "-c", FLOOR, str(path)],
    }  # fmt: skip
    names = list(cmds)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for round_no in range(args.repeats):
        shift = round_no % len(names)
        for name in names[shift:] + names[:shift]:
            warm_page_cache(path)
            seconds, rss, code, tail = measure(cmds[name], 3600)
            if code != 0:
                print(f"{name} failed: {tail}", file=sys.stderr)
                return 1
            samples[name].append((seconds, rss))
            print(f"round {round_no + 1} {name}: {seconds:.2f} s, {rss:,.0f} MB", flush=True)  # fmt: skip
        if round_no == 0:  # both outputs now exist
            subprocess.run([python, __file__, "--check", str(root / "lbnorm.parquet"), str(root / "duckdb.parquet")], check=True)  # fmt: skip
    median = {n: statistics.median(s for s, _ in v) for n, v in samples.items()}
    print(f"\n{rows:,} sample rows ({args.models:,} models); medians of {args.repeats} interleaved rounds\n")  # fmt: skip
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
