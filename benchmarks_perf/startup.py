"""Whole-process benchmark at the demo's size: ``lbnorm run`` against the imports alone.

``python benchmarks_perf/startup.py [--repeats 9] [--bytecode cached|env]``

The bundled demo (4,576 real models x 40 subtasks, Parquet) is the size of the
real leaderboard, where the job is smaller than the imports. Three commands run,
each as a separate process, in interleaved rounds (the order rotates each round):

* ``import``: ``python -c "import pandas, pyarrow.parquet"``, the baseline;
* ``run``: ``lbnorm run --out OUT --quiet`` (subtasks, benchmarks, leaderboard,
  manifest; the demo's model metadata joined);
* ``run-no-subtasks``: ``lbnorm run --no-subtasks --out OUT --quiet``.

Wall time covers the whole process (interpreter start, imports, read, compute,
write); peak RSS comes from ``os.wait4`` (as in ``run.py``). The report gives the
medians and each command's ratio to the baseline's median, from the same rounds;
the target is 1.5.

``--bytecode cached`` (the default) runs every command with
``PYTHONPYCACHEPREFIX`` set to a scratch directory and ``PYTHONDONTWRITEBYTECODE``
unset, so all of them, the baseline included, load compiled bytecode, as an
installed lbnorm does (pip compiles it; an editable install under
``PYTHONDONTWRITEBYTECODE=1`` would otherwise recompile lbnorm's modules in every
process while pandas' stay compiled). ``--bytecode env`` keeps the environment
as it is. One untimed run of each command comes first.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from run import Samples, environment, measure

NAMES = ["import", "run", "run-no-subtasks"]
TARGET = 1.5


def command(name: str, out: Path) -> list[str]:
    """The command line of ``name``, writing to ``out``."""
    if name == "import":
        return [sys.executable, "-c", "import pandas, pyarrow.parquet"]
    script = Path(sys.executable).with_name("lbnorm")
    lbnorm = [str(script)] if script.is_file() else [sys.executable, "-m", "lbnorm"]
    extra = ["--no-subtasks"] if name == "run-no-subtasks" else []
    return [*lbnorm, "run", *extra, "--out", str(out), "--quiet"]


def markdown(samples: dict[str, Samples]) -> str:
    """Render the medians and ratios to the import baseline as a Markdown table."""
    base = samples["import"].median
    lines = [
        "| command | median s | min s | runs | peak RSS MB | / import |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in samples.items():
        if not s.seconds:
            lines.append(f"| {name} | {s.error or 'skipped'} | | 0 | | |")
            continue
        rss = statistics.median(s.peak_rss_mb)
        lines.append(
            f"| `{' '.join(command(name, Path('OUT'))[1:])}` ({name}) "
            f"| {s.median:.3f} | {min(s.seconds):.3f} | {len(s.seconds)} "
            f"| {rss:.0f} | {s.median / base:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--bytecode",
        choices=("cached", "env"),
        default="cached",
        help="cached: every process loads compiled bytecode (default); env: as is",
    )
    args = parser.parse_args(argv)
    samples = {name: Samples(name) for name in NAMES}
    with tempfile.TemporaryDirectory() as scratch:
        if args.bytecode == "cached":  # children inherit os.environ
            os.environ["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "pycache")
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        for name in NAMES:  # untimed: compiles bytecode, reads libraries off disk
            measure(command(name, Path(scratch) / "warmup" / name), args.timeout)
        active = list(NAMES)
        for round_no in range(args.repeats):
            shift = round_no % len(active)
            print(f"round {round_no + 1}/{args.repeats}: ", end="", flush=True)
            for name in active[shift:] + active[:shift]:
                out = Path(scratch) / name
                shutil.rmtree(out, ignore_errors=True)
                seconds, rss, code, tail = measure(command(name, out), args.timeout)
                if code != 0:
                    samples[name].error = f"exit {code}: {tail.strip()[-200:]}"
                    active.remove(name)
                    print(f"{name} FAILED ", end="", flush=True)
                    continue
                samples[name].seconds.append(seconds)
                samples[name].peak_rss_mb.append(rss)
                print(f"{name} {seconds:.2f}s ", end="", flush=True)
            print(flush=True)
            time.sleep(0.2)
    print()
    print(f"{environment()} Bytecode: {args.bytecode}; target {TARGET}x import.")
    print()
    print(markdown(samples))
    return 0 if all(s.seconds for s in samples.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
