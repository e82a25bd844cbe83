"""Out-of-core benchmark: a directory of Parquet parts larger than the L size.

Generates ``--parts`` files of ``--variants`` x 100 subtasks each (default 10 x
200,000 x 100 = 200M rows, 10x L; the suite and the generator are L's, each part
with its own seed, so variants do not repeat across parts), then runs in
interleaved rounds, each a separate process:

- ``lbnorm run DIR --engine stream`` (partial sums on both cores) and the same
  with ``--workers 1`` (peak RSS is per process: with two workers it is the
  largest of the three, so the one-process run gives the whole footprint);
- ``lbnorm run DIR --no-subtasks`` (the in-memory engine; ``--with-memory``);
- DuckDB SQL over ``DIR/*.parquet`` (the peer that also runs out of core);
- the floor: reading every part once with pyarrow, a row group at a time.

It checks that the stream engine's tables equal DuckDB's to 1e-9 (and the
in-memory engine's when run), then prints a Markdown table of medians, peak RSS
and ratios. Usage::

    python benchmarks_perf/outofcore.py --parts 10 --repeats 3
    python benchmarks_perf/outofcore.py --parts 2 --variants 20000 --repeats 3  # quick
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from generate import DATA_DIR, DEFAULT_SEED, make_suite, suite_toml, write_scores
from measure import measure, warm_page_cache
from run import PEERS

N_SUBTASKS = 100
FLOOR = """
import sys, pathlib, pyarrow.parquet as pq
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.parquet")):
    f = pq.ParquetFile(path, read_dictionary=["model", "precision", "revision", "benchmark", "subtask"])
    for index in range(f.num_row_groups):
        f.read_row_group(index)
"""


def ensure_parts(parts: int, variants: int) -> Path:
    """Return the directory of parts (and its suite), generating what is missing."""
    root = DATA_DIR / f"OOC-{parts}x{variants}"
    scores = root / "scores"
    scores.mkdir(parents=True, exist_ok=True)
    suite = make_suite(N_SUBTASKS, DEFAULT_SEED)
    (root / "suite.toml").write_text(suite_toml(suite, f"synthetic-{N_SUBTASKS}"))
    for part in range(parts):
        path = scores / f"part-{part:03d}.parquet"
        if path.exists():
            continue
        t0 = time.perf_counter()
        tmp = path.with_suffix(".tmp")
        write_scores(tmp, suite, variants, DEFAULT_SEED + 1_000 + part)
        tmp.replace(path)
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return root


def commands(root: Path, out: Path, names: list[str]) -> dict[str, list[str]]:
    """The command line of each competitor."""
    scores, suite = root / "scores", root / "suite.toml"
    lbnorm = [sys.executable, "-m", "lbnorm", "run", str(scores), "--suite", str(suite)]
    every = {
        "lbnorm-stream": [*lbnorm, "--engine", "stream", "--out", str(out / "stream"), "--quiet"],
        "lbnorm-stream-1w": [*lbnorm, "--engine", "stream", "--workers", "1", "--out", str(out / "stream1"), "--quiet"],
        "lbnorm-memory": [*lbnorm, "--no-subtasks", "--out", str(out / "memory"), "--quiet"],
        "duckdb": [sys.executable, str(PEERS), "duckdb", str(scores / "*.parquet"), str(suite), str(out / "duckdb")],
        "floor-read": [sys.executable, "-c", FLOOR, str(scores)],
    }  # fmt: skip
    return {name: every[name] for name in names}


def check(out: Path, names: list[str]) -> None:
    """The stream engine's benchmark table equals DuckDB's (and memory's) to 1e-9."""
    keys = ["model", "precision", "revision", "chat_template", "benchmark"]
    stream = pd.read_parquet(out / "stream" / "benchmarks.parquet")
    text = dict.fromkeys([*keys[:3], "benchmark"], str)
    stream = stream.astype(text)
    others = {"duckdb": out / "duckdb" / "benchmarks.parquet"}
    if "lbnorm-memory" in names:
        others["lbnorm-memory"] = out / "memory" / "benchmarks.parquet"
    for name, path in others.items():
        other = pd.read_parquet(path).astype(text)
        other = other.rename(
            columns={"normalized": "normalized_score", "raw": "raw_score"}
        )
        merged = stream.merge(other, on=keys, validate="one_to_one", how="outer")
        diff = (merged["normalized_score_x"] - merged["normalized_score_y"]).abs()
        both_nan = (
            merged["normalized_score_x"].isna() & merged["normalized_score_y"].isna()
        )
        worst = float(diff[~both_nan].max())
        if not (diff[~both_nan] <= 1e-9).all() or len(merged) != len(stream):
            msg = f"lbnorm-stream and {name} disagree (max diff {worst})"
            raise SystemExit(msg)
        print(
            f"check: lbnorm-stream == {name} over {len(merged):,} rows (max diff {worst:.1e})"
        )


def main(argv: list[str] | None = None) -> int:
    """Generate, check, time; print the Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", type=int, default=10)
    parser.add_argument("--variants", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--with-memory", action="store_true")
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    root = ensure_parts(args.parts, args.variants)
    rows = args.parts * args.variants * N_SUBTASKS
    out = root / "out"
    names = ["lbnorm-stream", "lbnorm-stream-1w", "duckdb", "floor-read"]
    if args.with_memory:
        names.insert(1, "lbnorm-memory")
    cmds = commands(root, out, names)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for round_no in range(args.repeats):
        order = names[round_no % len(names) :] + names[: round_no % len(names)]
        for name in order:
            for part in sorted((root / "scores").glob("*.parquet")):
                warm_page_cache(part)
            seconds, rss, code, tail = measure(cmds[name], args.timeout)
            if code != 0:
                print(f"{name} failed ({code}): {tail}", file=sys.stderr)
                return 1
            samples[name].append((seconds, rss))
            print(
                f"round {round_no + 1} {name}: {seconds:.2f} s, {rss:,.0f} MB",
                flush=True,
            )
        if round_no == 0:
            check(out, names)
    median = {n: statistics.median(s for s, _ in v) for n, v in samples.items()}
    peak = {n: max(r for _, r in v) for n, v in samples.items()}
    print(
        f"\n{args.parts} parts x {args.variants:,} variants x {N_SUBTASKS} subtasks = {rows:,} rows; medians of {args.repeats} interleaved rounds\n"
    )
    print("| competitor | time | rows/s | peak RSS | / duckdb | / floor-read |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        print(
            f"| {name} | {median[name]:.2f} s | {rows / median[name] / 1e6:.1f} M | "
            f"{peak[name]:,.0f} MB | {median[name] / median['duckdb']:.2f} | "
            f"{median[name] / median['floor-read']:.2f} |"
        )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "samples": samples}, indent=2))
    shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
