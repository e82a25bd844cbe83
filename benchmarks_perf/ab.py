"""A/B: two (or more) lbnorm source trees on the same commands, in interleaved rounds.

``python benchmarks_perf/ab.py --tree base=/tmp/base/src --tree new=src --sizes L40,real --repeats 5``

Each tree runs as ``PYTHONPATH=TREE python -m lbnorm run ...`` (this interpreter, so
the same numpy, pyarrow and msgspec), both the default command (three tables) and
``--no-subtasks``, in the same rounds as every other tree (the order rotates), through
:func:`measure.interleaved` (whole processes, warm page cache, peak RSS from
``os.wait4``). Each competitor runs once untimed first (bytecode, shared libraries).
The report gives each tree's median and, per command, each tree's ratio to the first
tree. Sizes: ``real`` (the bundled demo, its metadata joined) and the shapes of
``generate.py`` (under ``--data``). Standard library only, like every measuring script.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from measure import (
    DATA_DIR,
    Competitor,
    child_environment,
    ensure_data,
    interleaved,
    read_meta,
)


def _command(tree: Path, size: str, data: Path, tables: int, out: Path) -> list[str]:
    inputs: list[str] = []
    if size != "real":
        folder = ensure_data([size], data)[size]
        meta = read_meta(folder)
        inputs = [
            str(folder / str(meta["scores"])),
            "--suite",
            str(folder / "suite.toml"),
        ]
    extra = ["--no-subtasks"] if tables == 2 else []
    return [
        "env", f"PYTHONPATH={tree}", sys.executable, "-m", "lbnorm", "run", *inputs,
        "--out", str(out), "--quiet", *extra,
    ]  # fmt: skip


def _cpu_seconds(competitors: list[Competitor], repeats: int) -> dict[str, list[float]]:
    """User + system CPU seconds of each competitor, in interleaved rounds of their own."""
    import shutil
    import subprocess

    cpu: dict[str, list[float]] = {c.name: [] for c in competitors}
    for round_no in range(repeats):
        shift = round_no % len(competitors)
        for competitor in [*competitors[shift:], *competitors[:shift]]:
            if competitor.out is not None:
                shutil.rmtree(competitor.out, ignore_errors=True)
            proc = subprocess.Popen(
                competitor.command, stdout=subprocess.DEVNULL, env=child_environment()
            )
            _, _, usage = os.wait4(proc.pid, 0)
            cpu[competitor.name].append(usage.ru_utime + usage.ru_stime)
    return cpu


def main(argv: list[str] | None = None) -> int:
    """Run the A/B comparison and print the medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", required=True, help="NAME=SRC_DIR")
    parser.add_argument("--sizes", default="L40,real")
    parser.add_argument("--modes", default="3,2", help="tables: 3, 2 or 3,2 (both)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--cpu", action="store_true", help="also rounds taking user+system CPU time"
    )
    args = parser.parse_args(argv)
    trees = {}
    for spec in args.tree:
        name, _, src = spec.partition("=")
        trees[name] = Path(src).resolve()
    modes = [int(mode) for mode in args.modes.split(",")]
    print(f"load average {os.getloadavg()}, {os.cpu_count()} CPUs", flush=True)
    report: dict[str, dict[str, object]] = {}
    for size in args.sizes.split(","):
        competitors = []
        for tables in modes:
            for name, tree in trees.items():
                out = args.data / "out" / f"ab-{size}-{tables}-{name}"
                warm = () if size == "real" else (args.data / size,)
                competitors.append(
                    Competitor(
                        f"{name}/{tables}t",
                        _command(tree, size, args.data, tables, out),
                        warm=warm,
                        out=out,
                    )
                )
        samples = interleaved(competitors, args.repeats, label=size, warmup=True)
        cpu = _cpu_seconds(competitors, args.repeats) if args.cpu else {}
        print(f"\n{size}: median s (peak MB) and ratio to {next(iter(trees))}")
        for tables in modes:
            first = samples[f"{next(iter(trees))}/{tables}t"]
            for name in trees:
                got = samples[f"{name}/{tables}t"]
                ratio = got.median / first.median if first.ok else float("nan")
                print(
                    f"  {tables} tables {name:>10}: {got.median:6.2f} s "
                    f"({got.max_rss_mb:,.0f} MB)  x{ratio:.3f}  "
                    f"[{', '.join(f'{s:.2f}' for s in got.seconds)}]"
                    + (f"  ERROR {got.error}" if got.error else "")
                )
                if cpu:
                    times = cpu[f"{name}/{tables}t"]
                    base = statistics.median(cpu[f"{next(iter(trees))}/{tables}t"])
                    print(
                        f"  {'':>9}cpu {name:>10}: {statistics.median(times):6.2f} s"
                        f"  x{statistics.median(times) / base:.3f}  "
                        f"[{', '.join(f'{s:.2f}' for s in times)}]"
                    )
        report[size] = {name: s.as_dict() for name, s in samples.items()}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
