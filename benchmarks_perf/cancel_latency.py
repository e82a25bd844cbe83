"""How long a Ctrl-C waits: a 3M-row CSV and JSONL parse, a Dask run, an arena bootstrap.

``python benchmarks_perf/cancel_latency.py [--repeats 3] [--tree base=/tmp/base/src]``

Each job runs in a process of its own, as a user runs it: ``python -m lbnorm
run FILE --out OUT`` on the M40 layouts' CSV and JSONL files (3M rows; the
parse is most of the run), ``lbnorm run M40.parquet --engine dask`` (a local
cluster of two workers) and ``lbnorm arena battles.parquet --bootstrap 1000``
(the arena benchmark's 2M battles among 300 models). The job is first run once
to its end (its time T); then, in each round, SIGINT is sent at fixed fractions
of T (``--at``, by default 0.5 and 0.8: inside the parse, the computation, the
bootstrap rounds), and the latency is the time from the signal to the
process's exit, cleanup included. A job that finished before the signal came is
reported as such. Every signalled run must exit 130 with one line. The commands
get SIGINT's default action even when this script was started in the
background (where the shell has it ignored, and lbnorm leaves it ignored).

Not a test: the machines are noisy, the numbers are what a user waited on this
one. Compare trees (``--tree``, ``PYTHONPATH``) in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from measure import DATA_DIR, child_environment, ensure_data, environment, read_meta

JOBS = ("csv", "jsonl", "dask", "arena-bootstrap")


def _layouts(data: Path) -> Path:
    """The M40 layouts (a 3M-row CSV and JSONL file), made by layouts.py if missing."""
    folder = ensure_data(["M40"], data)["M40"]
    layouts = folder / "layouts"
    if not (layouts / "csv.csv").exists() or not (layouts / "jsonl.jsonl").exists():
        scores = folder / str(read_meta(folder)["scores"])
        here = Path(__file__).parent
        subprocess.run(
            [sys.executable, str(here / "layouts.py"), "--make", str(scores), str(layouts)],
            check=True,
        )  # fmt: skip
    return folder


def _battles(data: Path) -> Path:
    """The arena benchmark's battles (2M among 300 models), made by arena.py if missing."""
    root = data / "arena-300-2000000"
    if not (root / "battles.parquet").exists():
        root.mkdir(parents=True, exist_ok=True)
        here = Path(__file__).parent
        subprocess.run(
            [sys.executable, str(here / "arena.py"), "--battles", "2000000", "--models",
             "300", "--generate", str(root)],
            check=True,
        )  # fmt: skip
    return root / "battles.parquet"


def _commands(data: Path, out: Path) -> dict[str, list[str]]:
    folder = _layouts(data)
    lbnorm = [sys.executable, "-m", "lbnorm"]
    run = [*lbnorm, "run", "--suite", str(folder / "suite.toml"), "--quiet"]
    return {
        "csv": [*run, str(folder / "layouts" / "csv.csv"), "--out", str(out / "csv")],
        "jsonl": [*run, str(folder / "layouts" / "jsonl.jsonl"), "--out", str(out / "jsonl")],
        "dask": [
            *run, str(folder / "layouts" / "grouped.parquet"), "--engine", "dask",
            "--out", str(out / "dask"),
        ],
        "arena-bootstrap": [
            *lbnorm, "arena", str(_battles(data)), "--bootstrap", "1000", "--out",
            str(out / "arena"), "--quiet",
        ],
    }  # fmt: skip


def _run(
    command: list[str], env: dict[str, str], at: float | None
) -> dict[str, object]:
    """Run `command`; with `at`, SIGINT it `at` seconds in. Latency: signal to exit."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    sent = None
    if at is not None:
        while time.perf_counter() - started < at and process.poll() is None:
            time.sleep(0.002)
        if process.poll() is None:
            sent = time.perf_counter()
            os.kill(process.pid, signal.SIGINT)
    _, stderr = process.communicate()
    ended = time.perf_counter()
    return {
        "code": process.returncode,
        "seconds": ended - started,
        "latency": None if sent is None else ended - sent,
        "stderr": stderr.decode(errors="replace").strip().splitlines()[-1:],
    }


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"of {JOBS}")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--at", default="0.5,0.8", help="fractions of the job's time")
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument(
        "--tree", action="append", default=[], help="NAME=SRC: lbnorm from SRC"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    trees = dict(item.split("=", 1) for item in args.tree) or {"this": ""}
    # a process started in the background of a script ignores SIGINT, and so would
    # the commands (lbnorm keeps a signal its process ignores ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    fractions = [float(f) for f in args.at.split(",")]
    print(environment(), flush=True)
    out = Path(tempfile.mkdtemp(prefix="cancel-latency-"))
    results: list[dict[str, object]] = []
    try:
        commands = _commands(args.data, out / "out")
        for job in args.jobs.split(","):
            for name, src in trees.items():
                env = child_environment()
                if src:
                    env["PYTHONPATH"] = src
                whole = _run(commands[job], env, None)
                print(f"{job} [{name}]: runs {whole['seconds']:.2f} s (exit {whole['code']})", flush=True)  # fmt: skip
                for round_ in range(args.repeats):
                    for fraction in fractions:
                        at = fraction * float(whole["seconds"])  # type: ignore[arg-type]
                        done = _run(commands[job], env, at)
                        results.append({"job": job, "tree": name, "round": round_, "at": at, **done})  # fmt: skip
                        latency = done["latency"]
                        shown = (
                            "finished first" if latency is None else f"{latency:.2f} s"
                        )
                        print(f"  SIGINT at {at:5.2f} s: exit {done['code']}, waited {shown}  {done['stderr']}", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(out, ignore_errors=True)
    print("\n| job | tree | signals | latency median | latency max | exit codes |")
    print("|---|---|---|---|---|---|")
    for job in args.jobs.split(","):
        for name in trees:
            rows = [r for r in results if r["job"] == job and r["tree"] == name]
            waited = [float(r["latency"]) for r in rows if r["latency"] is not None]  # type: ignore[arg-type]
            codes = sorted({int(r["code"]) for r in rows})  # type: ignore[call-overload]
            if waited:
                print(f"| {job} | {name} | {len(waited)} | {statistics.median(waited):.2f} s | {max(waited):.2f} s | {codes} |")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
