"""Start-up at the real leaderboard's size: ``lbnorm run`` against bare imports.

``python benchmarks_perf/startup.py [--repeats 9] [--bytecode cached|env]``

The bundled demo (4,576 real models x 40 subtasks, Parquet) is the size of the
real leaderboard, where the job is smaller than the imports. Each command runs as
a separate process, in interleaved rounds (the order rotates each round):

* ``import-numpy-pyarrow``: ``python -c "import numpy, pyarrow.parquet"``;
* ``import-arrow-compute``: the same and ``pyarrow.compute``, what a run without
  pandas cannot avoid (pyarrow's own ``Array.cast``, ``filter``, ``take`` and
  ``sort_by`` import it);
* ``import-pandas``: ``python -c "import pandas, pyarrow.parquet"``;
* ``run``: ``lbnorm run --out OUT --quiet`` (subtasks, benchmarks, leaderboard,
  manifest; the demo's model metadata joined);
* ``run-no-subtasks``: ``lbnorm run --no-subtasks --out OUT --quiet``.

The report gives medians and each command's ratio to both baselines, from the
same rounds. (``run.py --sizes real`` times the same run against DuckDB and
polars doing the same job.)

``--bytecode cached`` (the default) runs every command with ``PYTHONPYCACHEPREFIX``
set to a scratch directory and ``PYTHONDONTWRITEBYTECODE`` unset, so all of them
load compiled bytecode, as an installed lbnorm does (pip compiles it; an editable
install under ``PYTHONDONTWRITEBYTECODE=1`` would otherwise recompile lbnorm's
modules in every process while pandas' stay compiled). ``--bytecode env`` keeps
the environment as it is. One untimed run of each command comes first.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from measure import (
    Competitor,
    Samples,
    environment,
    interleaved,
    lbnorm_command,
    megabytes,
    seconds,
)

BASELINES = {
    "import-numpy-pyarrow": "import numpy, pyarrow.parquet",
    "import-arrow-compute": "import numpy, pyarrow.parquet, pyarrow.compute",
    "import-pandas": "import pandas, pyarrow.parquet",
}
NAMES = [*BASELINES, "run", "run-no-subtasks"]


def command(name: str, out: Path) -> list[str]:
    """The command line of ``name``, writing to ``out``."""
    if name in BASELINES:
        return [sys.executable, "-c", BASELINES[name]]
    return lbnorm_command([], out, tables=2 if name == "run-no-subtasks" else 3)


def markdown(samples: dict[str, Samples]) -> str:
    """Render the medians and ratios to the baselines as a Markdown table."""
    bases = [samples[name].median for name in BASELINES]
    lines = [
        "| command | median | min | runs | peak RSS | / numpy+pyarrow "
        "| / +compute | / pandas |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in samples.items():
        if not s.ok:
            lines.append(f"| {name} | {s.error or 'skipped'} | | 0 | | | | |")
            continue
        lines.append(
            f"| {name} | {seconds(s.median)} | {seconds(min(s.seconds))} "
            f"| {len(s.seconds)} | {megabytes(s.max_rss_mb)} "
            + "".join(f"| {s.median / base:.2f} " for base in bases)
            + "|"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--bytecode",
        choices=("cached", "env"),
        default="cached",
        help="cached: every process loads compiled bytecode (default); env: as is",
    )
    args = parser.parse_args(argv)
    header = environment()
    print(header, flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        if args.bytecode == "cached":  # children inherit os.environ
            os.environ["PYTHONPYCACHEPREFIX"] = str(Path(scratch) / "pycache")
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        competitors = [
            Competitor(
                name, command(name, Path(scratch) / name), out=Path(scratch) / name
            )
            for name in NAMES
        ]
        samples = interleaved(
            competitors, args.repeats, timeout=args.timeout, label="demo", warmup=True
        )
    print(f"\n{header}\nBytecode: {args.bytecode}.\n")
    print(markdown(samples))
    return 0 if all(s.ok for s in samples.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
