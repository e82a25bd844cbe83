"""How far `lbnorm run FILE.jsonl` is from what Arrow's JSON parse alone costs: wall and CPU.

``python benchmarks_perf/jsonl_floor.py [--size M40] [--repeats 3] [--tree base=/tmp/base/src]``

The layouts' JSONL and CSV files (``layouts.py``: the same 3M rows) run as whole
processes in interleaved rounds: ``lbnorm run`` on each file, DuckDB's
``read_json`` job (``peers.py duckdb``), and Arrow's parse alone of each file
(``pyarrow.json.read_json`` / ``pyarrow.csv.read_csv`` with the contract
columns' types, start-up included). Reported: median wall and CPU (user +
system) seconds and peak RSS. On a loaded two-core machine DuckDB's threads wait
for a core, so its wall time swells more than its CPU time; the CPU columns say
what each job costs. lbnorm's JSONL run less Arrow's JSON parse, against its CSV
run less Arrow's CSV parse, is what lbnorm adds around each parser.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from measure import (
    DATA_DIR,
    ensure_data,
    environment,
    lbnorm_command,
    measure,
    peer_command,
    read_meta,
    warm_page_cache,
)

_TYPES = (
    "import pyarrow as pa; types = pa.schema([('model', pa.string()), "
    "('precision', pa.string()), ('revision', pa.string()), ('chat_template', pa.bool_()), "
    "('benchmark', pa.string()), ('subtask', pa.string()), ('metric', pa.string()), "
    "('raw_score', pa.float64()), ('stderr', pa.float64()), ('n_samples', pa.int64())]); "
)


def commands(
    jsonl: Path, csv: Path, suite: Path, out: Path, trees: dict[str, str]
) -> dict[str, tuple[list[str], Path]]:
    """Each competitor's command line and the file it reads."""
    python = sys.executable
    found: dict[str, tuple[list[str], Path]] = {
        "lbnorm jsonl": (lbnorm_command([str(jsonl)], out / "lbnorm"), jsonl)
    }
    for name, src in trees.items():
        for file in (jsonl, csv):
            command = lbnorm_command([str(file)], out / f"{name}-{file.suffix[1:]}")
            found[f"{name} {file.suffix[1:]}"] = (
                ["env", f"PYTHONPATH={src}", *command],
                file,
            )
    found["duckdb jsonl"] = (
        peer_command("duckdb", jsonl, suite, out / "duckdb"),
        jsonl,
    )
    found["arrow json parse"] = (
        [python, "-c", _TYPES + "import pyarrow.json as j; j.read_json("
         f"{str(jsonl)!r}, parse_options=j.ParseOptions(explicit_schema=types))"],
        jsonl,
    )  # fmt: skip
    found["lbnorm csv"] = (lbnorm_command([str(csv)], out / "csv"), csv)
    found["arrow csv parse"] = (
        [python, "-c", _TYPES + "import pyarrow.csv as c; c.read_csv("
         f"{str(csv)!r}, convert_options=c.ConvertOptions(column_types=types))"],
        csv,
    )  # fmt: skip
    return found


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", default="M40")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument(
        "--tree", action="append", default=[], help="NAME=SRC: another lbnorm"
    )
    parser.add_argument("--only", help="comma-separated process names (default: all)")
    args = parser.parse_args(argv)
    folder = ensure_data([args.size], args.data)[args.size]
    files = folder / "layouts"
    scores = folder / str(read_meta(folder)["scores"])
    here = Path(__file__).parent
    subprocess.run(
        [sys.executable, str(here / "layouts.py"), "--make", str(scores), str(files)],
        check=True,
    )
    out = args.data / "out" / f"jsonl-floor-{args.size}"
    trees = dict(item.split("=", 1) for item in args.tree)
    competitors = commands(
        files / "jsonl.jsonl", files / "csv.csv", folder / "suite.toml", out, trees
    )
    if args.only:
        competitors = {k: competitors[k] for k in args.only.split(",")}
    print(environment(), flush=True)
    runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in competitors}
    names = list(competitors)
    for round_no in range(args.repeats):
        shift = round_no % len(names)
        print(f"round {round_no + 1}/{args.repeats}: ", end="", flush=True)
        for name in names[shift:] + names[:shift]:
            command, source = competitors[name]
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            warm_page_cache(source)
            run = measure(command, 1800.0)
            if run.code != 0:
                print(f"\n{name} failed: {run.stderr_tail}", file=sys.stderr)
                return 1
            runs[name].append((run.seconds, run.cpu_seconds, run.peak_rss_mb))
            print(f"{name} {run.seconds:.2f}s cpu {run.cpu_seconds:.2f}s | ", end="")
        print(flush=True)
    medians = {
        name: tuple(statistics.median(column) for column in zip(*samples, strict=True))
        for name, samples in runs.items()
    }
    duck_wall, duck_cpu, _ = medians.get("duckdb jsonl", (float("nan"),) * 3)
    print("\n| process | wall | CPU | peak RSS | wall / DuckDB | CPU / DuckDB |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, (wall, cpu, rss) in medians.items():
        print(
            f"| {name} | {wall:.2f} s | {cpu:.2f} s | {rss:,.0f} MiB "
            f"| {wall / duck_wall:.2f} | {cpu / duck_cpu:.2f} |"
        )
    if len(medians) == len(commands(Path(), Path(), Path(), Path(), trees)):
        around_json = medians["lbnorm jsonl"][1] - medians["arrow json parse"][1]
        around_csv = medians["lbnorm csv"][1] - medians["arrow csv parse"][1]
        print(
            f"\nCPU lbnorm adds around the parser: JSONL {around_json:.2f} s, "
            f"CSV {around_csv:.2f} s"
        )
    for name in (t for t in trees if f"{t} jsonl" in runs and "lbnorm jsonl" in runs):
        ratios = [
            new[1] / old[1]
            for new, old in zip(
                runs["lbnorm jsonl"], runs[f"{name} jsonl"], strict=True
            )
        ]
        print(f"CPU lbnorm / {name}, per round: {[round(r, 3) for r in ratios]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
