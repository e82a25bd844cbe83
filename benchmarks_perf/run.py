"""In-memory sizes: ``lbnorm run`` with its defaults against the peers doing the same job.

``python benchmarks_perf/run.py --sizes real,M,L40 --repeats 5``

For each size, every (competitor, tables) pair runs as its own process in the same
interleaved rounds (the order rotates each round), the input read right before
every run (warm page cache):

- ``lbnorm``: ``python -m lbnorm run SCORES --suite SUITE --out OUT --quiet``, the
  default command (three tables: subtasks, benchmarks, leaderboard); at size
  ``real`` plain ``lbnorm run --out OUT --quiet`` (the bundled demo: 4,576 real
  models x 40 subtasks under openllm-v2, its metadata joined to the leaderboard);
- ``lbnorm --no-subtasks``: the same with ``--no-subtasks`` (two tables);
- each peer of ``peers.py`` writing the same three tables, and two with
  ``(2 tables)`` (at ``real`` the peers join the demo's metadata too).

``--modes 3`` or ``--modes 2`` runs one of the two; ``--modes 3,2`` (default) both.
Sizes: ``real`` and the shapes of ``generate.py`` (XS, S, M, L, L40, S40, and
L40C, S40C: L40's and S40's rows with ``model`` a pandas categorical, every 1M-row
row group's dictionary holding all the names), generated on first use into
``--data`` (default ``benchmarks_perf/.data``). ``loop`` runs up
to 300k rows, ``pandas-apply`` and ``pandas`` up to 3M (``--no-limits`` lifts
that); a run that fails, passes ``--timeout`` or the RSS guard is dropped for the
rest of that size.

The report gives medians, peak RSS and two ratios from the same rounds: against
the faster of DuckDB and polars writing the same number of tables, and against
``floor`` (read the input, write tables of the output's shape, no work). Run
``check_peers.py`` to see that the peers compute what lbnorm does.
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
    RSS_LIMIT_MB,
    Competitor,
    Samples,
    demo_paths,
    ensure_data,
    environment,
    interleaved,
    lbnorm_command,
    megabytes,
    peer_command,
    read_meta,
    seconds,
)

LBNORM = "lbnorm"
PEER_NAMES = ["duckdb", "polars", "pandas", "pandas-apply", "loop"]
FLOOR_NAMES = [
    "floor",
    "floor-read",
    "floor-read-pf",
    "floor-read-dict",
    "floor-import",
]
NAMES = [LBNORM, *PEER_NAMES, *FLOOR_NAMES]
FAST_PEERS = ["duckdb", "polars"]  # the ratios' denominator: the faster of the two
MAX_ROWS: dict[str, int] = {
    "loop": 300_000,
    "pandas-apply": 3_000_000,
    "pandas": 3_000_000,
}
"""Slow competitors run only up to this many input rows unless --no-limits."""
SIZE_NAMES = ["real", "XS", "S", "S40", "S40C", "M", "L", "L40", "L40C"]


def label(name: str, tables: int) -> str:
    """How a (competitor, tables) pair is named in reports."""
    if tables == 3:
        return name
    return f"{LBNORM} --no-subtasks" if name == LBNORM else f"{name} (2 tables)"


@dataclass(frozen=True)
class Data:
    """One size's inputs."""

    size: str
    lbnorm_inputs: list[str]  # lbnorm run's INPUTS and --suite; [] for the demo
    scores: Path
    suite: Path
    rows: int
    variants: int
    peer_extra: tuple[str, ...] = ()
    warm: tuple[Path, ...] = ()


def _parquet_rows(path: Path) -> int:
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, pyarrow.parquet as pq; "
         "print(pq.ParquetFile(sys.argv[1]).metadata.num_rows)", str(path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(probe.stdout)


def size_data(size: str, data: Path) -> Data:
    """The inputs of a size (generated on first use)."""
    if size == "real":
        scores, metadata, suite = demo_paths()
        rows = _parquet_rows(scores)
        return Data(
            size, [], scores, suite, rows, rows // 40,
            ("--metadata", str(metadata)), (scores, metadata),
        )  # fmt: skip
    folder = ensure_data([size], data)[size]
    meta = read_meta(folder)
    scores, suite = folder / str(meta["scores"]), folder / "suite.toml"
    return Data(
        size,
        [str(scores), "--suite", str(suite)],
        scores,
        suite,
        int(str(meta["rows"])),
        int(str(meta["variants"])),
        warm=(scores,),
    )


@dataclass
class SizeResult:
    """One size's samples, by label."""

    size: str
    rows: int
    variants: int
    samples: dict[str, Samples] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def best_peer(self, tables: int) -> tuple[str, float]:
        """The faster of DuckDB and polars writing ``tables`` tables: (label, median)."""
        found = [
            (self.samples[label(n, tables)].median, label(n, tables))
            for n in FAST_PEERS
            if label(n, tables) in self.samples and self.samples[label(n, tables)].ok
        ]
        if not found:
            return "-", float("nan")
        median, name = min(found)
        return name, median

    def ratio(self, tables: int) -> float:
        """lbnorm / the faster peer, both writing ``tables`` tables."""
        lbnorm = self.samples.get(label(LBNORM, tables))
        return (lbnorm.median if lbnorm else float("nan")) / self.best_peer(tables)[1]

    def as_dict(self) -> dict[str, object]:
        """For JSON."""
        return {
            "rows": self.rows,
            "variants": self.variants,
            "samples": {k: v.as_dict() for k, v in self.samples.items()},
            "notes": self.notes,
        }


def benchmark_size(
    size: str,
    names: list[str],
    modes: list[int],
    *,
    repeats: int,
    data: Path,
    timeout: float,
    rss_limit_mb: float | None,
    no_limits: bool = False,
) -> SizeResult:
    """Time every (competitor, tables) pair of one size in the same rounds."""
    inputs = size_data(size, data)
    result = SizeResult(size, inputs.rows, inputs.variants)
    out_root = data / "out" / size
    competitors = []
    for name in names:
        if not no_limits and inputs.rows > MAX_ROWS.get(name, inputs.rows):
            result.notes.append(f"{name} skipped (> {MAX_ROWS[name]:,} rows)")
            continue
        for tables in modes:
            out = out_root / f"{name}-{tables}"
            if name == LBNORM:
                command = lbnorm_command(inputs.lbnorm_inputs, out, tables=tables)
            else:
                extra = inputs.peer_extra if name in PEER_NAMES else ()
                command = peer_command(
                    name, inputs.scores, inputs.suite, out, tables=tables, extra=extra
                )
            competitors.append(
                Competitor(label(name, tables), command, inputs.warm, out)
            )
    result.samples = interleaved(
        competitors,
        repeats,
        timeout=timeout,
        rss_limit_mb=rss_limit_mb,
        label=size,
    )
    return result


def warm_up(names: list[str], data: Path, timeout: float) -> None:
    """Run every competitor once, untimed, on XS (cold imports compile bytecode)."""
    interleaved(
        benchmark_competitors(names, "XS", data), 1, timeout=timeout, label="warm-up"
    )


def benchmark_competitors(names: list[str], size: str, data: Path) -> list[Competitor]:
    """One three-table competitor per name on ``size`` (for the warm-up)."""
    inputs = size_data(size, data)
    out_root = data / "out" / "warmup"
    return [
        Competitor(
            name,
            lbnorm_command(inputs.lbnorm_inputs, out_root / name)
            if name == LBNORM
            else peer_command(name, inputs.scores, inputs.suite, out_root / name),
            inputs.warm,
            out_root / name,
        )
        for name in names
    ]


def _ratio(value: float, base: float) -> str:
    ratio = value / base
    return "-" if ratio != ratio else f"{ratio:.2f}"


def markdown(result: SizeResult) -> str:
    """One size's results as a Markdown table."""
    rows_label = f"{result.rows:,} rows, {result.variants:,} variants"
    lines = [
        f"### {result.size}: {rows_label}",
        "",
        "| competitor | median | min | runs | peak RSS | ns/row | / faster peer | / floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, s in result.samples.items():
        if not s.ok:
            lines.append(f"| {name} | {s.error or 'skipped'} | | 0 | | | | |")
            continue
        tables = 2 if name.endswith(("(2 tables)", "--no-subtasks")) else 3
        best = result.best_peer(tables)[1]
        floor = result.samples.get(label("floor", tables))
        floor_median = floor.median if floor and floor.ok else float("nan")
        lines.append(
            f"| {name} | {seconds(s.median)} | {seconds(min(s.seconds))} "
            f"| {len(s.seconds)} | {megabytes(s.max_rss_mb)} "
            f"| {s.median / result.rows * 1e9:,.0f} | {_ratio(s.median, best)} "
            f"| {_ratio(s.median, floor_median)} |"
        )
    lines += ["", *(f"Note: {note}." for note in result.notes)]
    for tables in (3, 2):
        if label(LBNORM, tables) in result.samples:
            peer = result.best_peer(tables)[0]
            lines.append(
                f"lbnorm ({tables} tables) / {peer}: {result.ratio(tables):.2f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="real,M,L40", help=f"of {SIZE_NAMES}")
    parser.add_argument("--modes", default="3,2", help="tables: 3 (default path), 2")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--only", default="lbnorm,duckdb,polars", help=f"competitors, of {NAMES}"
    )
    parser.add_argument("--no-limits", action="store_true", help="lift MAX_ROWS")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--rss-limit-gb", type=float, default=RSS_LIMIT_MB / 1024)
    parser.add_argument("--no-warmup", dest="warmup", action="store_false")
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--json", type=Path, help="write all samples here")
    args = parser.parse_args(argv)
    sizes = args.sizes.split(",")
    if unknown := [s for s in sizes if s not in SIZE_NAMES]:
        parser.error(f"unknown sizes {unknown}; choose from {SIZE_NAMES}")
    names = args.only.split(",")
    if unknown := [n for n in names if n not in NAMES]:
        parser.error(f"unknown competitors {unknown}; choose from {NAMES}")
    modes = [int(m) for m in args.modes.split(",")]
    header = environment()
    print(header, flush=True)
    if args.warmup:
        warm_up(names, args.data, args.timeout)
    results = [
        benchmark_size(
            size,
            names,
            modes,
            repeats=args.repeats,
            data=args.data,
            timeout=args.timeout,
            rss_limit_mb=args.rss_limit_gb * 1024,
            no_limits=args.no_limits,
        )
        for size in sizes
    ]
    print(f"\n{header}\n")
    print("\n\n".join(markdown(result) for result in results))
    if args.json:
        payload = {
            "environment": header,
            "sizes": {r.size: r.as_dict() for r in results},
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
