"""Whole-process benchmark: lbnorm on a tree of results files against read-and-parse floors.

``python benchmarks_perf/tree.py [--tree DIR] [--repeats 5]``

Generates the tree if missing (``generate_tree.py``: 4,576 full-structure
lm-evaluation-harness results files of ~130 KB, 606 MB), then runs, each as a
separate process, in interleaved rounds (the order rotates each round), with the
page cache warmed (every file read) before every run:

* ``lbnorm``: ``python -m lbnorm run TREE --no-subtasks --out OUT --quiet``;
* ``lbnorm-1core``: the same under ``taskset -c 0`` (one core: lbnorm then reads
  the files in-process, no workers);
* ``floor-json``: one process that finds the files as lbnorm does and reads +
  ``json.loads`` every one (the "bare read-and-parse floor");
* ``floor-orjson``: the same with ``orjson.loads``;
* ``floor-orjson-2cores``: the same on every core (a fork pool over chunks);
* ``floor-msgspec-2cores``: read + msgspec's decode of only the keys lbnorm reads
  (the parser lbnorm uses), on every core.

Wall time covers the whole process (interpreter start, imports, walk, read,
parse, and for lbnorm the computation and the Parquet writes); peak RSS comes
from ``os.wait4`` (the largest of the process and its workers, not their sum).
The report is a Markdown table of medians with the ratio lbnorm / each floor,
computed within the same run.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from generate import DATA_DIR
from generate_tree import DEFAULT_N, generate_tree
from run import Samples, environment, measure

HERE = Path(__file__).resolve().parent
DEFAULT_TREE = DATA_DIR / "tree"
FLOORS = ["floor-json", "floor-orjson", "floor-orjson-2cores", "floor-msgspec-2cores"]
NAMES = ["lbnorm", "lbnorm-1core", *FLOORS]


def find_files(tree: Path) -> list[Path]:
    """The results files, found as lbnorm finds them (sorted ``rglob``)."""
    return sorted(p for p in tree.rglob("results_*.json") if p.is_file())


def _parser(kind: str) -> Callable[[bytes], Any]:
    if kind == "json":
        return json.loads
    if kind == "orjson":
        import orjson

        return orjson.loads
    import msgspec

    class ReadKeys(msgspec.Struct):
        results: Any = None
        config: Any = None
        n_samples: Any = msgspec.field(default=None, name="n-samples")
        model_name: Any = None
        chat_template: Any = None
        date: Any = None

    return msgspec.json.Decoder(ReadKeys).decode


def _parse_chunk(kind: str, paths: list[Path]) -> int:
    loads = _parser(kind)
    for path in paths:
        loads(path.read_bytes())
    return len(paths)


def run_floor(name: str, tree: Path) -> int:
    """One floor, in this process: find, read and parse every file."""
    kind = name.removeprefix("floor-").removesuffix("-2cores")
    files = find_files(tree)
    if not name.endswith("-2cores"):
        return _parse_chunk(kind, files)
    workers = len(os.sched_getaffinity(0))
    size = max(1, len(files) // (workers * 8))
    chunks = [files[at : at + size] for at in range(0, len(files), size)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return sum(pool.starmap(_parse_chunk, [(kind, chunk) for chunk in chunks]))


def command(name: str, tree: Path, out: Path) -> list[str]:
    """The command line of one competitor."""
    if name.startswith("floor"):
        return [sys.executable, str(Path(__file__).resolve()), "--floor", name, str(tree)]  # fmt: skip
    lbnorm = [
        sys.executable, "-m", "lbnorm", "run", str(tree),
        "--no-subtasks", "--out", str(out), "--quiet",
    ]  # fmt: skip
    return ["taskset", "-c", "0", *lbnorm] if name == "lbnorm-1core" else lbnorm


def warm(files: list[Path]) -> None:
    """Read every file so the timed run reads them from the page cache."""
    for path in files:
        path.read_bytes()


def markdown(samples: dict[str, Samples], n_files: int, n_bytes: int) -> str:
    """The results as a Markdown table, with lbnorm / each competitor."""
    lbnorm = samples["lbnorm"].median
    lines = [
        f"{n_files:,} files, {n_bytes / 1e6:,.0f} MB; medians of {max(len(s.seconds) for s in samples.values())} "
        "interleaved rounds, warm page cache.",
        "",
        "| command | median s | min s | runs | peak RSS MB | lbnorm / this |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in samples.items():
        if not s.seconds:
            lines.append(f"| {name} | {s.error or 'skipped'} | | 0 | | |")
            continue
        rss = statistics.median(s.peak_rss_mb)
        lines.append(
            f"| {name} | {s.median:.2f} | {min(s.seconds):.2f} | {len(s.seconds)} "
            f"| {rss:.0f} | {lbnorm / s.median:.2f} |"
        )
    one = samples["lbnorm-1core"].median
    if samples["lbnorm-1core"].seconds:
        lines += ["", f"Second core: lbnorm 1 core / 2 cores = {one / lbnorm:.2f}x."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", help="comma-separated competitors (default: all)")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--floor", help=argparse.SUPPRESS)  # internal: run a floor
    args, rest = parser.parse_known_args(argv)
    if args.floor:
        count = run_floor(args.floor, Path(rest[0]))
        print(f"{args.floor}: {count} files")
        return 0
    names = args.only.split(",") if args.only else list(NAMES)
    if unknown := sorted(set(names) - set(NAMES)):
        parser.error(f"unknown competitors {unknown}; choose from {NAMES}")
    if "lbnorm" not in names:
        names.insert(0, "lbnorm")
    if "lbnorm-1core" in names and shutil.which("taskset") is None:
        names.remove("lbnorm-1core")
        print("lbnorm-1core skipped: no taskset")
    if not args.tree.exists():
        print(f"generating {DEFAULT_N} results files in {args.tree} ...", flush=True)
        generate_tree(args.tree)
    files = find_files(args.tree)
    n_bytes = sum(path.stat().st_size for path in files)
    samples = {name: Samples(name) for name in names}
    active = list(names)
    with tempfile.TemporaryDirectory() as scratch:
        for round_no in range(args.repeats):
            shift = round_no % len(active)
            print(f"round {round_no + 1}/{args.repeats}: ", end="", flush=True)
            for name in active[shift:] + active[:shift]:
                out = Path(scratch) / name
                shutil.rmtree(out, ignore_errors=True)
                warm(files)
                seconds, rss, code, tail = measure(
                    command(name, args.tree, out), args.timeout
                )
                if code != 0:
                    samples[name].error = f"exit {code}: {tail.strip()[-200:]}"
                    active.remove(name)
                    print(f"{name} FAILED ", end="", flush=True)
                    continue
                samples[name].seconds.append(seconds)
                samples[name].peak_rss_mb.append(rss)
                print(f"{name} {seconds:.2f}s ", end="", flush=True)
            print(flush=True)
            time.sleep(0.5)
    print()
    print(environment())
    print()
    print(markdown(samples, len(files), n_bytes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
