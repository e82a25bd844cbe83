"""Per-sample aggregation at the Open LLM Leaderboard's size: lbnorm against DuckDB.

Generates a seeded Parquet sample table (:data:`lbnorm.core.schemas.SAMPLES`; default
4,576 models x the v2 suite's 22,147 documents = 101M rows; one 0/1 value per
(model, task, metric, document); ``model``, ``precision``, ``task`` and ``metric``
dictionary-encoded; row groups of ~4M rows), then runs, each as a separate process
in interleaved rounds (the order rotates), with the file in the page cache:

- ``lbnorm``: ``lbnorm run samples.parquet --out OUT --quiet``, the default
  command: aggregate the samples (mean, ``mean_stderr``, documents), normalize,
  and write the three tables;
- ``duckdb``: ``peers.py duckdb --input samples``: the same job in SQL (``GROUP BY``
  with ``avg``, ``stddev_samp / sqrt(count)`` and ``count``, joined to the suite,
  then the three tables as for scores); DuckDB uses both cores;
- ``lbnorm-aggregate``: :func:`lbnorm.readers.samples.aggregate_samples_table`
  alone (the real function), written to Parquet, against ``duckdb-aggregate``, the
  ``GROUP BY`` alone: the aggregation without the rest of the job;
- ``floor-read``: pyarrow reads the columns the aggregation needs once.

After the first round, lbnorm's three tables are checked against DuckDB's
(``check_peers.py --compare``, 1e-9) and the two aggregates against each other.
Wall time covers the whole process; peak RSS comes from ``os.wait4``. Linux hands
a child its parent's peak RSS, so this process imports only the standard library
and leaves generating and checking to child processes. Usage::

    python benchmarks_perf/samples.py --models 4576 --repeats 3
    python benchmarks_perf/samples.py --models 200 --repeats 3   # quick
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from measure import (
    DATA_DIR,
    HERE,
    RSS_LIMIT_MB,
    Competitor,
    Samples,
    demo_paths,
    environment,
    interleaved,
    lbnorm_command,
    megabytes,
    peer_command,
    seconds,
)

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
import pyarrow.parquet as pq
from lbnorm.readers.harness import subtask_columns
from lbnorm.readers.samples import aggregate_samples_table
from lbnorm.suites import load_suite
scores, _ = aggregate_samples_table(Path(sys.argv[1]), subtask_columns(load_suite("openllm-v2")))
pq.write_table(scores, sys.argv[2])
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

    from lbnorm.core.schemas import SAMPLES
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


@dataclass
class SamplesResult:
    """The samples of the per-sample benchmark."""

    rows: int
    models: int
    samples: dict[str, Samples] = field(default_factory=dict)
    check: str = "not run"

    def ratio(self) -> float:
        """lbnorm / DuckDB, both doing the whole job."""
        return self.samples["lbnorm"].median / self.samples["duckdb"].median

    def as_dict(self) -> dict[str, object]:
        """For JSON."""
        return {
            "rows": self.rows,
            "models": self.models,
            "check": self.check,
            "samples": {k: v.as_dict() for k, v in self.samples.items()},
        }


def ensure_table(models: int, data: Path) -> tuple[Path, int]:
    """The sample table for ``models`` models (generated in a child if missing)."""
    root = data / f"samples-table-{models}"
    root.mkdir(parents=True, exist_ok=True)
    path, rows_file = root / "samples.parquet", root / "rows.txt"
    if not (path.exists() and rows_file.exists()):
        t0 = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        made = subprocess.run(
            [sys.executable, __file__, "--models", str(models), "--generate", str(tmp)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        tmp.replace(path)
        rows_file.write_text(made.stdout)
        print(f"generated {path} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path, int(rows_file.read_text())


def benchmark_samples(
    models: int,
    *,
    repeats: int,
    data: Path,
    timeout: float = 3600.0,
    rss_limit_mb: float | None = RSS_LIMIT_MB,
) -> SamplesResult:
    """Generate (if missing), time and check."""
    path, rows = ensure_table(models, data)
    out = data / "out" / f"samples-{models}"
    suite = demo_paths()[2]
    python = sys.executable
    aggregates = {"lbnorm-aggregate": out / "lbnorm.parquet", "duckdb-aggregate": out / "duckdb.parquet"}  # fmt: skip
    competitors = [
        Competitor("lbnorm", lbnorm_command([str(path)], out / "lbnorm"), (path,), out / "lbnorm"),
        Competitor("duckdb", peer_command("duckdb", path, suite, out / "duckdb", extra=("--input", "samples")), (path,), out / "duckdb"),
        Competitor("lbnorm-aggregate", [python, "-c", AGGREGATE, str(path), str(aggregates["lbnorm-aggregate"])], (path,)),
        Competitor("duckdb-aggregate", [python, "-c", DUCKDB, str(path), str(aggregates["duckdb-aggregate"])], (path,)),
        Competitor("floor-read", [python, "-c", FLOOR, str(path)], (path,)),
    ]  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    result = SamplesResult(rows, models)

    def check(round_no: int) -> None:
        if round_no != 0:
            return
        verdicts = []
        if (out / "lbnorm").exists() and (out / "duckdb").exists():
            found = subprocess.run(
                [python, str(HERE / "check_peers.py"), "--compare", str(out / "lbnorm"), str(out / "duckdb"), "--tables", "3"],
                check=False, capture_output=True, text=True,
            )  # fmt: skip
            print(found.stdout.strip(), flush=True)
            verdicts.append(
                "tables " + ("equal" if found.returncode == 0 else "MISMATCH")
            )
        if all(p.exists() for p in aggregates.values()):
            found = subprocess.run(
                [python, __file__, "--check", *map(str, aggregates.values())],
                check=False, capture_output=True, text=True,
            )  # fmt: skip
            print(found.stdout.strip(), found.stderr.strip()[-500:], flush=True)
            verdicts.append(
                "aggregates " + ("equal" if found.returncode == 0 else "MISMATCH")
            )
        result.check = ", ".join(verdicts) + " (1e-9)" if verdicts else "not run"

    result.samples = interleaved(
        competitors,
        repeats,
        timeout=timeout,
        rss_limit_mb=rss_limit_mb,
        label="samples",
        after_round=check,
    )
    return result


def markdown(result: SamplesResult) -> str:
    """The results as a Markdown table."""
    duckdb = result.samples["duckdb"].median
    floor = result.samples["floor-read"].median
    lines = [
        f"{result.rows:,} sample rows ({result.models:,} models; check: {result.check})",
        "",
        "| competitor | median | runs | M rows/s | peak RSS | / duckdb | / floor-read |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in result.samples.items():
        if not s.ok:
            lines.append(f"| {name} | {s.error or 'skipped'} | 0 | | | | |")
            continue
        lines.append(
            f"| {name} | {seconds(s.median)} | {len(s.seconds)} "
            f"| {result.rows / s.median / 1e6:.1f} | {megabytes(s.max_rss_mb)} "
            f"| {s.median / duckdb:.2f} | {s.median / floor:.2f} |"
        )
    aggregate = (
        result.samples["lbnorm-aggregate"].median
        / result.samples["duckdb-aggregate"].median
    )
    lines += [
        "",
        f"Aggregation alone: lbnorm-aggregate / duckdb-aggregate = {aggregate:.2f}.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Generate, check, time; print the Markdown table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", type=int, default=4576)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--rss-limit-gb", type=float, default=RSS_LIMIT_MB / 1024)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--check", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--generate", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.check:
        check(*args.check)
        return 0
    if args.generate:
        print(generate(args.generate, args.models))
        return 0
    header = environment()
    print(header, flush=True)
    result = benchmark_samples(
        args.models,
        repeats=args.repeats,
        data=args.data,
        timeout=args.timeout,
        rss_limit_mb=args.rss_limit_gb * 1024,
    )
    print(f"\n{header}\n")
    print(markdown(result))
    if args.json:
        payload = {"environment": header, "samples": result.as_dict()}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
