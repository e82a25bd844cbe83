"""Every benchmark of issue 4, one after the other, from one command.

Runs, each as its own script (see benchmarks_perf/README.md for what each
measures and the tables they print):

1. ``run.py``: S, M, L against DuckDB, polars and the floors;
2. ``tree.py``: the 4,576-file results tree against the read-and-parse floors;
3. ``samples.py``: per-sample aggregation at ~100M rows against DuckDB;
4. ``outofcore.py``: 200M rows as ten Parquet parts against DuckDB.

Usage::

    python benchmarks_perf/all.py                 # ~25 min on 2 vCPUs, ~7 GB of data
    python benchmarks_perf/all.py --quick         # small sizes, one round: a smoke test
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    """Run the four benchmarks; stop at the first that fails."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    repeats = "1" if args.quick else str(args.repeats)
    steps = [
        ["run.py", "--sizes", "XS,S" if args.quick else "S,M,L", "--repeats", repeats,
         "--only", "lbnorm,duckdb,polars,floor,floor-read-dict"],
        ["tree.py", "--repeats", repeats],
        ["samples.py", "--models", "50" if args.quick else "4576", "--repeats", repeats],
        ["outofcore.py", "--parts", "2", "--variants", "20000"] if args.quick
        else ["outofcore.py", "--parts", "10", "--repeats", "1"],
    ]  # fmt: skip
    for step in steps:
        print(f"\n## {' '.join(step)}\n", flush=True)
        code = subprocess.run(
            [sys.executable, str(HERE / step[0]), *step[1:]], check=False
        ).returncode
        if code != 0:
            print(f"{step[0]} failed with exit code {code}", file=sys.stderr)
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
