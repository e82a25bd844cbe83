"""Out of core: 200M rows in ten Parquet parts, lbnorm against DuckDB.

``python benchmarks_perf/outofcore.py [--shapes OOC100,OOC40,OOC40C] [--repeats 1]``

Three shapes of 200M rows, each a directory of ten Parquet parts (``generate.py``;
each part its own seed, so no variant repeats across parts):

- ``OOC100``: 2,000,000 variants x 100 subtasks (10 parts of 200,000 x 100, the
  synthetic suite of L);
- ``OOC40``: 5,000,000 variants x 40 subtasks under the real v2 suite (10 parts of
  500,000 distinct models x 40): the cost that grows with distinct variants;
- ``OOC40C``: OOC40's rows, each part written as pandas writes a categorical
  ``model`` (``df.astype({"model": "category"}).to_parquet(...)``, 1M-row row
  groups): every row group's dictionary holds all 500,000 names of its part.

Competitors, each a separate process, in interleaved rounds, every part read
right before every run (warm page cache):

- ``lbnorm --no-subtasks``: ``lbnorm run DIR --suite SUITE --no-subtasks --out OUT
  --quiet`` (two tables; the default engine then streams the row groups);
- ``duckdb (2 tables)``: ``peers.py duckdb`` over ``DIR/*.parquet``, the same two
  tables;
- ``floor-read``: read every row group of every part once (string columns as
  dictionaries), nothing else.

With ``--tables 3`` lbnorm runs with its defaults and DuckDB writes the three
tables (a 200M-row subtask table; today lbnorm then holds every row in memory: the
RSS guard, ``--rss-limit-gb``, stops a run before it takes the machine down).
``--with-polars`` adds polars. After the first round the outputs are checked equal
to DuckDB's (``check_peers.py --compare``: every table joined on its keys, 1e-9).
The targets: peak RSS < 2 GiB and time <= 1.0x DuckDB.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from measure import (
    DATA_DIR,
    HERE,
    RSS_LIMIT_MB,
    Competitor,
    Samples,
    ensure_data,
    environment,
    interleaved,
    lbnorm_command,
    megabytes,
    peer_command,
    read_meta,
    seconds,
)

SHAPES = ["OOC100", "OOC40"]
"""The grouped shapes (plain strings, dictionaries per row group)."""
CATEGORICAL_SHAPES = ["OOC40C"]
"""OOC40's rows as pandas writes a categorical ``model``."""
ALL_SHAPES = [*SHAPES, *CATEGORICAL_SHAPES]
QUICK_SHAPES = {"OOC100": "OOC100S", "OOC40": "OOC40S", "OOC40C": "OOC40SC"}
"""The 2M-row stand-ins of ``--quick``."""
FLOOR = """
import sys, pathlib, pyarrow.parquet as pq
text = ["model", "precision", "revision", "benchmark", "subtask", "metric"]
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.parquet")):
    f = pq.ParquetFile(path, read_dictionary=text)
    for index in range(f.num_row_groups):
        f.read_row_group(index)
"""
LBNORM = "lbnorm --no-subtasks"
DUCKDB = "duckdb (2 tables)"


@dataclass
class ShapeResult:
    """One shape's samples, by competitor."""

    shape: str
    rows: int
    variants: int
    tables: int
    samples: dict[str, Samples] = field(default_factory=dict)
    check: str = "not run"

    @property
    def lbnorm(self) -> Samples:
        """lbnorm's samples."""
        return self.samples[LBNORM if self.tables == 2 else "lbnorm"]

    @property
    def duckdb(self) -> Samples:
        """DuckDB's samples."""
        return self.samples[DUCKDB if self.tables == 2 else "duckdb"]

    def as_dict(self) -> dict[str, object]:
        """For JSON."""
        return {
            "rows": self.rows,
            "variants": self.variants,
            "tables": self.tables,
            "check": self.check,
            "samples": {k: v.as_dict() for k, v in self.samples.items()},
        }


def benchmark_shape(
    shape: str,
    *,
    repeats: int,
    data: Path,
    tables: int = 2,
    with_polars: bool = False,
    timeout: float = 3600.0,
    rss_limit_mb: float | None = RSS_LIMIT_MB,
) -> ShapeResult:
    """Generate (if missing), time and check one shape."""
    folder = ensure_data([shape], data)[shape]
    meta = read_meta(folder)
    scores, suite = folder / "scores", folder / "suite.toml"
    result = ShapeResult(
        shape, int(str(meta["rows"])), int(str(meta["variants"])), tables
    )
    out = data / "out" / shape
    lbnorm_name = LBNORM if tables == 2 else "lbnorm"
    peers = ["duckdb", "polars"] if with_polars else ["duckdb"]
    competitors = [
        Competitor(
            lbnorm_name,
            lbnorm_command(
                [str(scores), "--suite", str(suite)], out / "lbnorm", tables=tables
            ),
            (scores,),
            out / "lbnorm",
        ),
        *[
            Competitor(
                name if tables == 3 else f"{name} (2 tables)",
                peer_command(name, scores, suite, out / name, tables=tables),
                (scores,),
                out / name,
            )
            for name in peers
        ],
        Competitor("floor-read", [sys.executable, "-c", FLOOR, str(scores)], (scores,)),
    ]

    def check(round_no: int) -> None:
        if round_no != 0:
            return
        lbnorm_ok = (out / "lbnorm" / "leaderboard.parquet").exists()
        if not lbnorm_ok:
            result.check = "lbnorm wrote nothing"
            return
        for name in peers:
            if not (out / name / "leaderboard.parquet").exists():
                continue
            found = subprocess.run(
                [sys.executable, str(HERE / "check_peers.py"), "--compare",
                 str(out / "lbnorm"), str(out / name), "--tables", str(tables)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            print(found.stdout.strip(), flush=True)
            verdict = "equal to 1e-9" if found.returncode == 0 else "MISMATCH"
            result.check = f"lbnorm vs {name}: {verdict}"

    result.samples = interleaved(
        competitors,
        repeats,
        timeout=timeout,
        rss_limit_mb=rss_limit_mb,
        label=shape,
        after_round=check,
    )
    return result


def markdown(result: ShapeResult) -> str:
    """One shape's results as a Markdown table."""
    duckdb = result.duckdb.median
    floor = result.samples["floor-read"].median
    lines = [
        f"### {result.shape}: {result.rows:,} rows, {result.variants:,} variants "
        f"({result.tables} tables; check: {result.check})",
        "",
        "| competitor | median | runs | M rows/s | peak RSS | / DuckDB | / floor-read |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in result.samples.items():
        if not s.ok:
            lines.append(f"| {name} | {s.error or 'skipped'} | 0 | | | | |")
            continue
        lines.append(
            f"| {name} | {seconds(s.median)} | {len(s.seconds)} "
            f"| {result.rows / s.median / 1e6:.1f} | {megabytes(s.max_rss_mb)} "
            f"| {s.median / duckdb:.2f} | {s.median / floor:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--shapes", default=",".join(ALL_SHAPES))
    parser.add_argument("--quick", action="store_true", help="2M-row stand-ins")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--tables", type=int, choices=(2, 3), default=2)
    parser.add_argument("--with-polars", action="store_true")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--rss-limit-gb", type=float, default=RSS_LIMIT_MB / 1024)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    if args.quick:
        shapes = [QUICK_SHAPES.get(s, s) for s in shapes]
    header = environment()
    print(header, flush=True)
    results = [
        benchmark_shape(
            shape,
            repeats=args.repeats,
            data=args.data,
            tables=args.tables,
            with_polars=args.with_polars,
            timeout=args.timeout,
            rss_limit_mb=args.rss_limit_gb * 1024,
        )
        for shape in shapes
    ]
    print(f"\n{header}\n")
    print("\n\n".join(markdown(r) for r in results))
    if args.json:
        payload = {
            "environment": header,
            "shapes": {r.shape: r.as_dict() for r in results},
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
