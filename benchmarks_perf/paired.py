"""Paired comparisons of a whole board (``run --paired``) against the per-sample aggregation.

The per-sample table of ``samples.py`` (default 4,576 models x the v2 suite's 22,147
documents = 101M rows, 0/1 values, generated once into ``.data``) is aggregated by
lbnorm's own :func:`~lbnorm.readers.samples.aggregate_samples_table`. ``lbnorm run
--paired`` lays the same rows out as an item matrix in the same pass (the
aggregation hands each batch to :class:`~lbnorm.readers.items.ItemCollector`, with
the ``doc_id`` column read too) and then compares every pair of variants adjacent
in rank, by the average and by each benchmark
(:func:`~lbnorm.engines.paired_board.board_pairs`: 7 levels x 4,575 pairs). Each
competitor is a separate process (interpreter, imports, read, work, write), in
interleaved rounds with the file in the page cache:

- ``aggregate``: the aggregation alone, written to Parquet (as in ``samples.py``);
- ``run`` and ``run-paired``: ``lbnorm run samples.parquet`` without and with
  ``--paired`` (the whole command);
- ``paired``: the paired step on its own (the table read again into the item
  matrix, as ``compare --paired`` reads an output's inputs, then every adjacent
  pair compared); it writes how long each part took.

The target: what ``--paired`` adds to the run, ``run-paired - run``, is at most the
aggregation, ``aggregate``. After the first round, the paired table of
``run-paired`` is checked equal to the ``paired`` process's, and three adjacent
pairs of the GPQA level against numpy on the pivot of their rows (1e-12).
Usage::

    python benchmarks_perf/paired.py --models 4576 --repeats 3
    python benchmarks_perf/paired.py --models 300 --repeats 3   # quick
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from measure import (
    DATA_DIR,
    RSS_LIMIT_MB,
    Competitor,
    Samples,
    environment,
    interleaved,
    lbnorm_command,
    megabytes,
    seconds,
)
from samples import AGGREGATE, ensure_table

PAIRED = """
import json, sys, time
from pathlib import Path
import pyarrow.parquet as pq
from lbnorm.engines.paired_board import board_pairs
from lbnorm.readers.items import ItemSource, read_items
from lbnorm.suites import load_suite
suite = load_suite("openllm-v2")
start = time.perf_counter()
items = read_items([ItemSource(path=Path(sys.argv[1]))], suite)
read = time.perf_counter()
board = pq.read_table(Path(sys.argv[2]) / "leaderboard.parquet")
pairs = board_pairs(items, board, suite)
compared = time.perf_counter()
pq.write_table(pairs.table, sys.argv[3])
Path(sys.argv[4]).write_text(json.dumps({"read items": read - start, "compare": compared - read}))
"""

CHECK = """
import sys, math
import numpy as np, pandas as pd, pyarrow.dataset as ds, pyarrow.parquet as pq
mine = pq.read_table(sys.argv[2]).to_pandas()
theirs = pq.read_table(sys.argv[3]).to_pandas()
pd.testing.assert_frame_equal(mine, theirs, check_dtype=False)
gpqa = theirs.loc[theirs["level"] == "GPQA"]
gpqa = gpqa.iloc[[0, len(gpqa) // 4, len(gpqa) // 2]]
names = sorted(set(gpqa["model_a"]) | set(gpqa["model_b"]))
rows = ds.dataset(sys.argv[1]).to_table(filter=ds.field("model").isin(names) & ds.field("task").isin(["leaderboard_gpqa_diamond", "leaderboard_gpqa_extended", "leaderboard_gpqa_main"])).to_pandas()
rows = rows.astype({"model": str, "task": str})
for row in gpqa.itertuples():
    parts = []
    for task, group in rows.groupby("task"):
        wide = group.pivot_table(index="doc_id", columns="model", values="value", aggfunc="first")[[row.model_a, row.model_b]].dropna()
        parts.append(wide.to_numpy())
    x = np.concatenate([p[:, 0] for p in parts]); y = np.concatenate([p[:, 1] for p in parts])
    n = np.array([p.shape[0] for p in parts])
    se = [np.std(p[:, 0] - p[:, 1], ddof=1) / math.sqrt(p.shape[0]) for p in parts]
    assert min(x.mean(), y.mean()) > 0.25
    difference = (x.mean() - y.mean()) / 0.75 * 100
    stderr = math.sqrt(sum((k / n.sum() * s) ** 2 for k, s in zip(n, se))) / 0.75 * 100
    assert abs(difference - row.difference) <= 1e-12 * max(1, abs(difference)), (difference, row.difference)
    assert abs(stderr - row.stderr) <= 1e-12 * stderr, (stderr, row.stderr)
print(f"check: run --paired == the paired step ({len(theirs):,} rows); 3 GPQA pairs == numpy on their rows to 1e-12")
"""


def benchmark(
    models: int, *, repeats: int, data: Path, timeout: float, rss_limit_mb: float
) -> dict[str, Samples]:
    """Generate (if missing), time and check."""
    path, _ = ensure_table(models, data)
    out = data / "out" / f"paired-{models}"
    out.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    board = out / "board"
    if not (
        board / "leaderboard.parquet"
    ).exists():  # the leaderboard the paired step reads
        subprocess.run(lbnorm_command([str(path)], board), check=True)
    competitors = [
        Competitor(
            "aggregate",
            [python, "-c", AGGREGATE, str(path), str(out / "aggregate.parquet")],
            (path,),
        ),
        Competitor(
            "paired",
            [
                python,
                "-c",
                PAIRED,
                str(path),
                str(board),
                str(out / "paired.parquet"),
                str(out / "stages.json"),
            ],
            (path,),
        ),
        Competitor(
            "run", lbnorm_command([str(path)], out / "run"), (path,), out / "run"
        ),
        Competitor(
            "run-paired",
            lbnorm_command([str(path)], out / "run-paired", extra=("--paired",)),
            (path,),
            out / "run-paired",
        ),
    ]
    stages: list[dict[str, float]] = []

    def after(round_no: int) -> None:
        if (out / "stages.json").exists():
            stages.append(json.loads((out / "stages.json").read_text()))
        if round_no == 0:
            found = subprocess.run(
                [
                    python,
                    "-c",
                    CHECK,
                    str(path),
                    str(out / "paired.parquet"),
                    str(out / "run-paired" / "paired.parquet"),
                ],
                check=False,
                capture_output=True,
                text=True,
            )
            print(found.stdout.strip(), found.stderr.strip()[-800:], flush=True)
            if found.returncode:
                msg = "check failed"
                raise SystemExit(msg)

    samples = interleaved(
        competitors,
        repeats,
        timeout=timeout,
        rss_limit_mb=rss_limit_mb,
        label="paired",
        after_round=after,
    )
    if stages:
        for name in stages[0]:
            values = sorted(s[name] for s in stages)
            print(f"paired step, {name}: median {values[len(values) // 2]:.2f} s")
    return samples


def markdown(samples: dict[str, Samples], rows: int) -> str:
    """The results as a Markdown table, with the ratios the target reads."""
    aggregate = samples["aggregate"].median
    lines = [
        f"{rows:,} sample rows",
        "",
        "| competitor | median | runs | peak RSS | / aggregate |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, s in samples.items():
        if not s.ok:
            lines.append(f"| {name} | {s.error or 'skipped'} | 0 | | |")
            continue
        lines.append(
            f"| {name} | {seconds(s.median)} | {len(s.seconds)} | {megabytes(s.max_rss_mb)} | {s.median / aggregate:.2f} |"
        )
    added = samples["run-paired"].median - samples["run"].median
    lines += [
        "",
        f"(run --paired - run) / aggregate = {added / aggregate:.2f} (the target: <= 1); "
        f"paired step alone / aggregate = {samples['paired'].median / aggregate:.2f}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Time; print the Markdown table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", type=int, default=4576)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--rss-limit-gb", type=float, default=RSS_LIMIT_MB / 1024)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    header = environment()
    print(header, flush=True)
    samples = benchmark(
        args.models,
        repeats=args.repeats,
        data=args.data,
        timeout=args.timeout,
        rss_limit_mb=args.rss_limit_gb * 1024,
    )
    _, rows = ensure_table(args.models, args.data)
    print(f"\n{header}\n")
    print(markdown(samples, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
