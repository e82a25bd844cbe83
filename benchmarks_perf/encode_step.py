"""The key-encoding step alone, per input layout: where a layout's cliff comes from.

``python benchmarks_perf/encode_step.py [--size M40] [--tree base=/tmp/base/src] [--repeats 5]``

For each Parquet file of ``layouts.py`` (made first if missing), a child process
per (source tree, layout) reads every row group as ``lbnorm run`` does
(``lbnorm.readers.parquet``, dictionary columns), untimed, then times
:meth:`lbnorm.engines.encode.KeyEncoder.encode` over all of them with a fresh
encoder, ``--repeats`` times, and prints the median; also the part of it spent
cutting rows into variant runs and grouping them (``_group_rows``), the path
shuffled rows take with runs of length 1; and the whole check-and-sum step of the
streaming engine (``_Folder.fold`` over every row group: encoding, the checks and
the sums, the summing thread drained), no reading or writing. The trees' rounds
are interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from layouts import FILES, PARQUET_LAYOUTS
from measure import DATA_DIR, child_environment, ensure_data, read_meta

_CHILD = r"""
import json, statistics, sys, time
from pathlib import Path
from lbnorm.engines import encode
from lbnorm.readers.parquet import open_parquet_scores
from lbnorm.suites import load_suite

path, repeats = Path(sys.argv[1]), int(sys.argv[2])
suite = load_suite("openllm-v2")
pairs = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
tables = [batch.table for batch in open_parquet_scores(path).batches()]
rows = sum(t.num_rows for t in tables)
grouping = [0.0]
group_rows = encode._group_rows

def timed(*args):
    start = time.perf_counter()
    try:
        return group_rows(*args)
    finally:
        grouping[0] += time.perf_counter() - start

encode._group_rows = timed
times, groups = [], []
for _ in range(repeats):
    grouping[0] = 0.0
    encoder = encode.KeyEncoder(pairs, expected_variants=rows // len(pairs))
    start = time.perf_counter()
    for table in tables:
        encoder.encode(table)
    times.append(time.perf_counter() - start)
    groups.append(grouping[0])
from lbnorm.core.options import RunOptions
from lbnorm.engines import stream
from lbnorm.readers.parquet import open_parquet_scores as _open

batches = list(_open(path).batches())
folds = []
for _ in range(repeats):  # the whole check-and-sum step: encode, checks, sums
    folder = stream._Folder(suite, unknown="error", rows=rows, options=RunOptions())
    start = time.perf_counter()
    for batch in batches:
        folder.fold(batch)
    folder._store._behind.close()  # (the summing thread drained)
    folds.append(time.perf_counter() - start)
print(json.dumps({"seconds": statistics.median(times), "grouping": statistics.median(groups),
                  "fold": statistics.median(folds),
                  "rows": rows, "row_groups": len(tables), "variants": encoder.n_variants}))
"""


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", default="M40")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--tree", action="append", default=[], help="NAME=SRC")
    args = parser.parse_args(argv)
    folder = ensure_data([args.size], args.data)[args.size]
    meta = read_meta(folder)
    files = folder / "layouts"
    subprocess.run(
        [sys.executable, str(Path(__file__).with_name("layouts.py")), "--make",
         str(folder / str(meta["scores"])), str(files)],
        check=True,
    )  # fmt: skip
    trees = dict(item.split("=", 1) for item in args.tree) or {
        "lbnorm": os.environ.get("PYTHONPATH", "")
    }
    found: dict[tuple[str, str], list[dict[str, float]]] = {}
    for _ in range(args.rounds):
        for layout in PARQUET_LAYOUTS:
            for name, src in trees.items():
                env = child_environment()
                env["PYTHONPATH"] = src
                done = subprocess.run(
                    [sys.executable, "-c", _CHILD, str(files / FILES[layout]),
                     str(args.repeats)],
                    check=True, capture_output=True, text=True, env=env,
                )  # fmt: skip
                found.setdefault((layout, name), []).append(json.loads(done.stdout))
    print(
        f"KeyEncoder.encode over every row group, {args.size} "
        f"({meta['rows']:,} rows); medians of {args.repeats} x {args.rounds} rounds"
    )
    names = list(trees)
    print(
        "| layout | row groups | "
        + " | ".join(
            f"{n} encode | {n} of it grouping | {n} check and sum (encode included)"
            for n in names
        )
        + " |"
    )
    print("|---|---:|" + "---:|---:|---:|" * len(names))
    for layout in PARQUET_LAYOUTS:
        cells = [layout, str(found[(layout, names[0])][0]["row_groups"])]
        for name in names:
            runs = found[(layout, name)]
            cells.append(
                f"{1000 * statistics.median(r['seconds'] for r in runs):.0f} ms"
            )
            for key in ("grouping", "fold"):
                cells.append(f"{1000 * statistics.median(r[key] for r in runs):.0f} ms")
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
