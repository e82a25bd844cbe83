"""One ``lbnorm`` command's phases: wall and CPU at each, each thread's CPU, bytes read and written.

``python benchmarks_perf/phases.py [--tree SRC] -- run SCORES --suite SUITE --out OUT --no-subtasks --quiet``

Runs the command in this process (as ``python -m lbnorm`` does: its console
entry, signals and allocator settings included) from the source tree ``SRC``
(default: the installed lbnorm), and prints, when it ends: the wall and process
CPU at the end of the streaming pass, of a spilled run's partition sums and of
its finish, and as each output table is written (its writer thread's CPU
beside); each thread's user and system CPU, summed by name (Arrow's own pool
threads as ``arrow/other``); and the process's ``rchar`` / ``wchar`` from
``/proc/self/io`` (every byte read or written through a system call, the page
cache's included). Linux only. Where the 200M shape's time goes (issue 43) is
measured with it; wall times on a shared machine move with its load, so two
source trees are compared in alternating runs.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

_START = time.perf_counter()
_MARKS: list[tuple[str, float, float]] = []
_THREADS: dict[str, tuple[str, float, float]] = {}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _mark(name: str) -> None:
    _MARKS.append((name, time.perf_counter() - _START, _cpu()))


def _marked(function: Callable[..., Any], before: str | None, after: str) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before:
            _mark(before)
        result = function(*args, **kwargs)
        _mark(after)
        return result

    return wrapper


def _sample_threads() -> None:
    """Each thread's CPU from ``/proc/self/task``, every quarter second (the last seen is kept)."""
    tick = os.sysconf("SC_CLK_TCK")
    while True:
        names = {thread.native_id: thread.name for thread in threading.enumerate()}
        for task in Path("/proc/self/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue  # (a thread that ended)
            own = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            name = names.get(int(task.name)) or "arrow/other"
            if own.startswith("jemalloc"):
                name = own
            name = name.rstrip("_0123456789")
            _THREADS[task.name] = (name, int(fields[11]) / tick, int(fields[12]) / tick)
        time.sleep(0.25)


def _instrument() -> None:
    from lbnorm.engines import spill, stream
    from lbnorm.output import writer

    stream._Folder.finish = _marked(stream._Folder.finish, "pass done", "finished")  # type: ignore[method-assign]
    spill._sum_partitions = _marked(spill._sum_partitions, None, "partitions summed")
    write_one = writer._write_one

    def write(transaction: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        cpu = time.thread_time()
        result = write_one(transaction, name, *args, **kwargs)
        _mark(f"{name} written (its thread {time.thread_time() - cpu:.1f} s CPU)")
        return result

    writer._write_one = write


def main() -> int:
    """Run the command after ``--``; print its phases."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="a source tree's src folder")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.tree is not None:
        sys.path.insert(0, str(args.tree.resolve()))
    from lbnorm import cli  # (loads neither numpy nor pyarrow)

    cli._one_blas_thread()  # the console's settings, before _instrument loads them
    cli._system_allocator_for_arrow()
    _instrument()
    threading.Thread(target=_sample_threads, daemon=True, name="sampler").start()
    print(f"lbnorm from {Path(cli.__file__).parents[1]}", flush=True)
    cli._exit_done = lambda code: code  # (it ends the process: the report comes first)
    sys.argv = ["lbnorm", *command]
    code = 1
    try:
        code = cli.console_main()
    finally:
        _mark("end")
        for name, wall, cpu in _MARKS:
            print(f"{name:55s} wall {wall:7.1f} s  CPU {cpu:7.1f} s")
        totals: dict[str, list[float]] = {}
        for name, user, system in _THREADS.values():
            if name != "sampler":
                total = totals.setdefault(name, [0.0, 0.0])
                total[0] += user
                total[1] += system
        for name, (user, system) in sorted(totals.items(), key=lambda x: -sum(x[1])):
            print(f"  thread {name:22s} user {user:6.1f} s  sys {system:6.1f} s")
        io = dict(
            line.split(": ") for line in Path("/proc/self/io").read_text().splitlines()
        )
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"rchar {int(io['rchar']) / 1e9:.1f} GB, wchar {int(io['wchar']) / 1e9:.1f} GB, "
            f"peak RSS {peak:,.0f} MiB"
        )
    return code


if __name__ == "__main__":
    raise SystemExit(main())
