"""Whole-process benchmark of lbnorm against its peers and floors.

``python benchmarks_perf/run.py --sizes S,M,L --repeats 5``

For each size it generates the data if missing (cached in ``benchmarks_perf/.data``),
then runs every competitor as a separate process in interleaved rounds (A B C, then
B C A, ...; the order rotates each round), warming the page cache (reading the input
file) before every run. Each run's wall time covers the whole process (interpreter
start, imports, read, compute, write) and its peak RSS comes from ``os.wait4``.
Before the first size, every competitor runs once untimed on the XS data, so that
cold imports (bytecode compilation, shared libraries off disk) are not timed.

The report gives medians, rows per second and two ratios computed within the same
run: against the best peer (the fastest of loop, pandas-apply, pandas, polars,
duckdb) and against the floor (``peers.py floor``: read the input once with
``pq.read_table`` and write outputs of the same shape, with no computation).

The ``lbnorm`` slot runs ``python -m lbnorm run SCORES --suite SUITE --out OUT --quiet
--no-subtasks`` (the peers write the benchmark-level and leaderboard tables only; so does
lbnorm with ``--no-subtasks``); it is skipped, with a note, when ``import lbnorm`` fails.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from generate import DATA_DIR, SIZES, ensure_data
from measure import measure, warm_page_cache
from peers import COMPETITORS, FLOORS

HERE = Path(__file__).resolve().parent
PEERS = HERE / "peers.py"
LBNORM = "lbnorm"

MAX_ROWS: dict[str, int] = {"loop": 300_000, "pandas-apply": 3_000_000}
"""Slow competitors run only up to this many input rows unless --no-limits."""

DEFAULT_ORDER = [LBNORM, *COMPETITORS, *FLOORS]


@dataclass
class Samples:
    """The timed runs of one competitor on one size."""

    name: str
    seconds: list[float] = field(default_factory=list)
    peak_rss_mb: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def median(self) -> float:
        """Median wall time in seconds (NaN without samples)."""
        return statistics.median(self.seconds) if self.seconds else float("nan")


def command(name: str, scores: Path, suite: Path, out: Path) -> list[str]:
    """The command line that runs competitor ``name``."""
    if name == LBNORM:
        return [
            sys.executable, "-m", "lbnorm", "run", str(scores),
            "--suite", str(suite), "--out", str(out), "--quiet", "--no-subtasks",
        ]  # fmt: skip
    return [sys.executable, str(PEERS), name, str(scores), str(suite), str(out)]


def lbnorm_available() -> bool:
    """Whether ``import lbnorm`` works in a child process."""
    probe = subprocess.run(
        [sys.executable, "-c", "import lbnorm"], capture_output=True, check=False
    )
    return probe.returncode == 0


def benchmark_size(
    size: str, names: list[str], repeats: int, timeout: float, out_root: Path
) -> tuple[dict[str, Samples], int]:
    """Time ``names`` on ``size`` in interleaved rounds; return samples and rows."""
    data = ensure_data(size)
    scores, suite = data / "scores.parquet", data / "suite.toml"
    rows = int(json.loads((data / "meta.json").read_text())["rows"])
    samples = {name: Samples(name) for name in names}
    active = list(names)
    for round_no in range(repeats):
        shift = round_no % len(active) if active else 0
        order = active[shift:] + active[:shift]
        print(f"{size} round {round_no + 1}/{repeats}: ", end="", flush=True)
        for name in order:
            out = out_root / size / name
            shutil.rmtree(out, ignore_errors=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            warm_page_cache(scores)
            seconds, rss, code, tail = measure(
                command(name, scores, suite, out), timeout
            )
            if code != 0:
                reason = "timeout" if code == -signal.SIGKILL else f"exit {code}"
                samples[name].error = f"{reason}: {tail.strip()[-300:]}"
                active.remove(name)
                print(f"{name} FAILED ({reason}) ", end="", flush=True)
                continue
            samples[name].seconds.append(seconds)
            samples[name].peak_rss_mb.append(rss)
            print(f"{name} {seconds:.2f}s ", end="", flush=True)
        print(flush=True)
    return samples, rows


def warm_up(names: list[str], timeout: float, out_root: Path) -> None:
    """Run every competitor once, untimed, on the XS data."""
    data = ensure_data("XS")
    for name in names:
        out = out_root / "warmup" / name
        shutil.rmtree(out, ignore_errors=True)
        measure(
            command(name, data / "scores.parquet", data / "suite.toml", out), timeout
        )


def markdown(size: str, rows: int, samples: dict[str, Samples]) -> str:
    """Render one size's results as a Markdown table."""
    peers = [s.median for n, s in samples.items() if n in COMPETITORS and s.seconds]
    best = min(peers) if peers else float("nan")
    floor = samples["floor"].median if "floor" in samples else float("nan")
    lines = [
        f"### {size}: {rows:,} rows",
        "",
        "| competitor | median s | min s | runs | peak RSS MB | M rows/s "
        "| x best peer | x floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in samples.items():
        if not s.seconds:
            lines.append(f"| {name} | {s.error or 'skipped'} | | 0 | | | | |")
            continue
        rss = statistics.median(s.peak_rss_mb)
        lines.append(
            f"| {name} | {s.median:.3f} | {min(s.seconds):.3f} | {len(s.seconds)} "
            f"| {rss:.0f} | {rows / s.median / 1e6:.2f} | {s.median / best:.2f} "
            f"| {s.median / floor:.2f} |"
        )
        if s.error:
            lines[-1] += f" (then {s.error.splitlines()[0][:60]})"
    return "\n".join(lines)


def environment() -> str:
    """A one-paragraph description of the machine and library versions."""
    versions = []
    for package in ["numpy", "pandas", "pyarrow", "polars", "duckdb", "lbnorm"]:
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} missing")
    return (
        f"{time.strftime('%Y-%m-%d %H:%M')}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, {', '.join(versions)}. Whole-process wall time, "
        "warm page cache, medians of interleaved rounds."
    )


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="S,M,L", help="comma-separated, of XS,S,M,L")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--only", help="comma-separated competitors to run (default: all)"
    )
    parser.add_argument("--exclude", default="", help="comma-separated, to skip")
    parser.add_argument(
        "--no-limits", action="store_true", help="run loop and pandas-apply at any size"
    )
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--no-warmup", dest="warmup", action="store_false")
    parser.add_argument("--json", type=Path, help="write all samples here")
    args = parser.parse_args(argv)

    sizes = args.sizes.split(",")
    if unknown := [s for s in sizes if s not in SIZES]:
        parser.error(f"unknown sizes {unknown}; choose from {list(SIZES)}")
    names = args.only.split(",") if args.only else list(DEFAULT_ORDER)
    names = [n for n in names if n not in args.exclude.split(",")]
    if unknown := [n for n in names if n not in DEFAULT_ORDER]:
        parser.error(f"unknown competitors {unknown}; choose from {DEFAULT_ORDER}")
    notes = []
    if LBNORM in names and not lbnorm_available():
        names.remove(LBNORM)
        notes.append("lbnorm skipped: `import lbnorm` fails in this environment.")

    out_root = DATA_DIR / "out"
    if args.warmup:
        warm_up(names, args.timeout, out_root)
    reports, results = [], {}
    for size in sizes:
        rows = SIZES[size][0] * SIZES[size][1]
        size_names = [
            n for n in names if args.no_limits or rows <= MAX_ROWS.get(n, rows)
        ]
        for skipped in sorted(set(names) - set(size_names)):
            notes.append(f"{skipped} skipped at {size} (> {MAX_ROWS[skipped]:,} rows).")
        samples, rows = benchmark_size(
            size, size_names, args.repeats, args.timeout, out_root
        )
        reports.append(markdown(size, rows, samples))
        results[size] = {
            "rows": rows,
            "samples": {
                n: {
                    "seconds": s.seconds,
                    "peak_rss_mb": s.peak_rss_mb,
                    "error": s.error,
                }
                for n, s in samples.items()
            },
        }

    print()
    print(environment())
    print()
    print("\n\n".join(reports))
    for note in notes:
        print(f"\nNote: {note}", end="")
    print()
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"environment": environment(), "notes": notes, "results": results}
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
