"""The Dask engine beside the stream engine: time and peak memory of the client and of each worker.

``python benchmarks_perf/dask_memory.py --data DIR [--parts 1,2,10] [--repeats 1]``

DIR is a shape of ``outofcore.py`` (``benchmarks_perf/.data/OOC40``: ten Parquet
parts of 20M rows, 500,000 models x 40 subtasks each, and its ``suite.toml``);
``--parts N`` runs on its first N parts (a folder of links to them, so one
generated shape gives the scaling: 20M, 40M, ... 200M rows). Each run is a whole
process, ``lbnorm run PARTS --suite SUITE --no-subtasks --engine E --out OUT --quiet``
(the Dask engine starts its local cluster of two worker processes), the engines
alternating.

``os.wait4``'s peak is the largest of a process and the children it waited for,
so a Dask run's would be its largest worker's; here each process's own peak
(``VmHWM`` in ``/proc/PID/status``, polled every 0.1 s until the process ends)
is taken instead: the client's (the ``lbnorm`` process), and the largest of the
other processes of its group (the local cluster's workers). CPU time is the
client's and its workers' together (user + system). Standard library only, as
``measure.py`` asks.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from measure import (
    child_environment,
    environment,
    lbnorm_command,
    megabytes,
    seconds,
)


def _peaks(pgid: int, seen: dict[int, float]) -> None:
    """Record each process of group `pgid`'s own peak resident size (MiB) in `seen`."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[2]) != pgid:
                continue
            for line in Path(entry.path, "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    seen[int(entry.name)] = int(line.split()[1]) / 1024
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue


def run_once(cmd: list[str], timeout: float) -> dict[str, float]:
    """One whole process: its time, CPU time, own peak and its group's largest other peak."""
    seen: dict[int, float] = {}
    done = threading.Event()
    # (stderr to a file: a pipe would fill with Dask's logging and block the run)
    with tempfile.TemporaryFile() as log:
        started = time.perf_counter()
        process = subprocess.Popen(
            cmd,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            env=child_environment(),
        )

        def poll() -> None:
            while not done.wait(0.1):
                _peaks(process.pid, seen)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        timer = threading.Timer(timeout, os.killpg, (process.pid, signal.SIGKILL))
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)
        finally:
            timer.cancel()
            done.set()
            poller.join()
        elapsed = time.perf_counter() - started
        log.seek(0)
        error = log.read().decode(errors="replace")[-2000:]
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{error}")
    client = seen.pop(process.pid, float("nan"))
    return {
        "seconds": elapsed,
        "cpu": usage.ru_utime + usage.ru_stime,
        "client": client,
        "worker": max(seen.values(), default=float("nan")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a shape's folder")
    parser.add_argument("--parts", default="1,2", help="first N parts, comma-separated")
    parser.add_argument("--engines", default="stream,dask")
    parser.add_argument("--repeats", type=int, default=1)
    # (a 200M Dask run took over 30 minutes at load 20)
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args(argv)
    scores = sorted((args.data / "scores").glob("*.parquet"))
    suite = args.data / "suite.toml"
    meta = json.loads((args.data / "meta.json").read_text())
    per_part = int(meta["rows"]) // int(meta["parts"])
    print(environment())
    print()
    print("| rows | engine | time | CPU | client peak | largest worker peak |")
    print("|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="lbnorm-dask-memory-") as scratch:
        for count in (int(n) for n in args.parts.split(",")):
            folder = Path(scratch) / f"parts-{count}"
            folder.mkdir()
            for path in scores[:count]:
                (folder / path.name).symlink_to(path.resolve())
            rows = f"{count * per_part / 1e6:,.0f}M"
            engines = args.engines.split(",")
            for repeat in range(args.repeats):
                for engine in engines[repeat % 2 :] + engines[: repeat % 2]:
                    out = Path(scratch) / f"out-{engine}"
                    cmd = lbnorm_command(
                        [str(folder)],
                        out,
                        tables=2,
                        extra=["--suite", str(suite), "--engine", engine],
                    )
                    found = run_once(cmd, args.timeout)
                    worker = found["worker"] if engine == "dask" else float("nan")
                    print(
                        f"| {rows} | {engine} | {seconds(found['seconds'])} "
                        f"| {seconds(found['cpu'])} | {megabytes(found['client'])} "
                        f"| {megabytes(worker)} |",
                        flush=True,
                    )
    print()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
