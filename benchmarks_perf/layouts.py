"""One leaderboard in every layout a user hands over: lbnorm against DuckDB on each file.

``python benchmarks_perf/layouts.py [--size M40] [--repeats 5] [--tree base=/tmp/base/src]``

The same rows (M40: 75,000 variants x the 40 subtasks of the v2 suite, 3M rows;
``--quick``: S40, 200,000 rows) written as

- ``grouped``: rows grouped by variant, subtasks in suite order, plain strings
  dictionary-encoded per 1M-row row group (``generate.py``'s layout);
- ``categorical-1M`` and ``categorical-250k``: ``model`` as a pandas categorical
  written by pandas (``df.astype({"model": "category"}).to_parquet(...)``), row
  groups of 1M and 250k rows: every row group's dictionary holds all the names;
- ``shuffled``: the rows in a random order (1M-row row groups);
- ``reverse-250k``: each variant's subtasks in reverse suite order, 250k-row row groups;
- ``csv`` and ``jsonl``: one CSV file and one JSON-lines file.

Each file is run by ``python -m lbnorm run FILE --out OUT --quiet`` (the default
command: three tables) and by ``peers.py duckdb`` doing the same job on the same
file (``read_parquet``, ``read_csv`` or ``read_json``), every (layout, competitor)
pair a process of its own in the same interleaved rounds; on each file also
``peers.py floor-io``, the I/O lbnorm's contract asks and nothing more (the file's
sha256, its rows read: a Parquet file's row groups as dictionaries, a CSV or
JSON-lines file parsed by Arrow, lbnorm's parser; its rows written back in input
order, zstd): what the layout itself costs. The report gives medians, peak RSS, lbnorm /
DuckDB and lbnorm / floor per layout, and each one's slowest Parquet layout over its
fastest. ``--tree NAME=SRC`` adds lbnorm from another source tree (``PYTHONPATH``)
on every layout, to compare a change in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from measure import (
    DATA_DIR,
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

LAYOUTS = (
    "grouped",
    "categorical-1M",
    "categorical-250k",
    "shuffled",
    "reverse-250k",
    "csv",
    "jsonl",
)
PARQUET_LAYOUTS = LAYOUTS[:5]
FILES = {
    name: f"{name}.csv"
    if name == "csv"
    else f"{name}.jsonl"
    if name == "jsonl"
    else f"{name}.parquet"
    for name in LAYOUTS
}
SEED = 7
FLOOR = "floor-io"  # peers.py: the file's hash, read and rows written back, no work


def make_layouts(source: Path, folder: Path) -> None:
    """Write every layout of ``source`` (a grouped file) into ``folder`` (a child process)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as csv
    import pyarrow.parquet as pq
    from generate import write_categorical  # (pyarrow and numpy: child only)

    folder.mkdir(parents=True, exist_ok=True)
    table = pq.read_table(source)  # plain strings (the file stores no Arrow schema)
    n = table.num_rows
    n_subtasks = len(set(table.column("subtask").to_pylist()[:1000]))

    def write(name: str, make: Callable[[Path], object]) -> None:
        path = folder / FILES[name]
        if path.exists():
            return
        temporary = path.with_name(path.name + ".tmp")
        make(temporary)
        temporary.replace(path)

    write("grouped", lambda p: pq.write_table(table, p, row_group_size=1_000_000))
    for name, rows in (("categorical-1M", 1_000_000), ("categorical-250k", 250_000)):
        write(name, lambda p, rows=rows: write_categorical(source, p, rows))
    order = np.random.default_rng(SEED).permutation(n)
    write(
        "shuffled",
        lambda p: pq.write_table(
            table.take(pa.array(order)), p, row_group_size=1_000_000
        ),
    )
    within = np.arange(n) % n_subtasks
    reverse = np.arange(n) - within + (n_subtasks - 1 - within)
    write(
        "reverse-250k",
        lambda p: pq.write_table(
            table.take(pa.array(reverse)), p, row_group_size=250_000
        ),
    )
    write("csv", lambda p: csv.write_csv(table, p))

    def jsonl(path: Path) -> None:
        import duckdb

        con = duckdb.connect()
        con.execute(
            f"COPY (SELECT * FROM read_parquet('{source}')) TO '{path}' (FORMAT json)"
        )

    write("jsonl", jsonl)


@dataclass
class LayoutResult:
    """The samples of one run of the matrix."""

    size: str
    rows: int
    samples: dict[str, Samples] = field(default_factory=dict)  # "layout|competitor"

    def get(self, layout: str, competitor: str) -> Samples | None:
        """One cell's samples."""
        return self.samples.get(f"{layout}|{competitor}")

    def ratio(self, layout: str, competitor: str = "lbnorm") -> float:
        """A competitor's median over DuckDB's on the same file (NaN if either failed)."""
        mine, duck = self.get(layout, competitor), self.get(layout, "duckdb")
        if mine is None or duck is None or not (mine.ok and duck.ok):
            return float("nan")
        return mine.median / duck.median

    def over_floor(self, layout: str, competitor: str = "lbnorm") -> float:
        """A competitor's median over the I/O floor's on the same file (NaN: none)."""
        mine, floor = self.get(layout, competitor), self.get(layout, FLOOR)
        if mine is None or floor is None or not (mine.ok and floor.ok):
            return float("nan")
        return mine.median / floor.median

    def spread(self, competitor: str = "lbnorm") -> float:
        """The slowest Parquet layout's median over the fastest's."""
        medians = [
            s.median
            for layout in PARQUET_LAYOUTS
            if (s := self.get(layout, competitor)) is not None and s.ok
        ]
        return max(medians) / min(medians) if len(medians) > 1 else float("nan")

    def as_dict(self) -> dict[str, object]:
        """For JSON."""
        return {
            "size": self.size,
            "rows": self.rows,
            "samples": {k: v.as_dict() for k, v in self.samples.items()},
        }


def benchmark_layouts(
    size: str,
    *,
    repeats: int,
    data: Path = DATA_DIR,
    trees: dict[str, str] | None = None,
    layouts: tuple[str, ...] = LAYOUTS,
    rss_limit_mb: float = RSS_LIMIT_MB,
) -> LayoutResult:
    """Make the layouts of shape ``size`` if missing, then time them all."""
    folder = ensure_data([size], data)[size]
    meta = read_meta(folder)
    files = folder / "layouts"
    subprocess.run(
        [sys.executable, __file__, "--make", str(folder / str(meta["scores"])),
         str(files)],
        check=True,
    )  # fmt: skip
    suite = folder / "suite.toml"
    out = data / "out" / f"layouts-{size}"
    competitors: list[Competitor] = []
    for layout in layouts:
        path = files / FILES[layout]
        competitors.append(
            Competitor(
                f"{layout}|lbnorm",
                lbnorm_command([str(path)], out / layout / "lbnorm"),
                warm=(path,),
                out=out / layout / "lbnorm",
            )
        )
        for name, src in (trees or {}).items():
            competitors.append(
                Competitor(
                    f"{layout}|{name}",
                    [
                        "env",
                        f"PYTHONPATH={src}",
                        *lbnorm_command([str(path)], out / layout / name),
                    ],
                    warm=(path,),
                    out=out / layout / name,
                )
            )
        competitors.append(
            Competitor(
                f"{layout}|{FLOOR}",
                peer_command(FLOOR, path, suite, out / layout / FLOOR),
                warm=(path,),
                out=out / layout / FLOOR,
            )
        )
        competitors.append(
            Competitor(
                f"{layout}|duckdb",
                peer_command("duckdb", path, suite, out / layout / "duckdb"),
                warm=(path,),
                out=out / layout / "duckdb",
            )
        )
    samples = interleaved(
        competitors, repeats, label=f"layouts {size}", rss_limit_mb=rss_limit_mb,
        warmup=True,
    )  # fmt: skip
    return LayoutResult(size, int(meta["rows"]), samples)


def markdown(result: LayoutResult, trees: tuple[str, ...] = ()) -> str:
    """The matrix: per layout, lbnorm and DuckDB, medians, peaks and ratios."""
    names = ["lbnorm", *trees]
    head = (
        "| layout | "
        + " | ".join(f"{n} median | {n} peak" for n in names)
        + " | duckdb median | duckdb peak | I/O floor | "
        + " | ".join(f"{n} / duckdb | {n} / floor" for n in names)
        + " |"
    )
    lines = [
        f"### layouts: {result.size}, {result.rows:,} rows, the same rows in each file",
        "",
        "I/O floor (`peers.py floor-io`): the file's sha256, its rows read (row groups as",
        "dictionaries; a text file parsed by Arrow) and written back in input order,",
        "nothing computed.",
        "",
        head,
        "|---|" + "---:|" * (4 * len(names) + 3),
    ]
    layouts = sorted({key.split("|")[0] for key in result.samples}, key=LAYOUTS.index)
    for layout in layouts:
        cells = [layout]
        for name in [*names, "duckdb"]:
            s = result.get(layout, name)
            if s is None or not s.ok:
                cells += [f"failed: {s.error}" if s is not None else "-", "-"]
            else:
                cells += [seconds(s.median), megabytes(s.max_rss_mb)]
        floor = result.get(layout, FLOOR)
        cells.append(seconds(floor.median) if floor is not None and floor.ok else "-")
        for name in names:
            cells += [
                f"{result.ratio(layout, name):.2f}",
                f"{result.over_floor(layout, name):.2f}",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for name in [*names, "duckdb", FLOOR]:
        lines.append(
            f"{name}: slowest Parquet layout / fastest: {result.spread(name):.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--size", default="M40")
    parser.add_argument("--quick", action="store_true", help="S40, one round")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--only", help=f"comma-separated, of {LAYOUTS}")
    parser.add_argument(
        "--tree", action="append", default=[], help="NAME=SRC: another lbnorm"
    )
    parser.add_argument("--make", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.make:
        make_layouts(*args.make)
        return 0
    trees = dict(item.split("=", 1) for item in args.tree)
    layouts = tuple(args.only.split(",")) if args.only else LAYOUTS
    print(environment(), flush=True)
    result = benchmark_layouts(
        "S40" if args.quick else args.size,
        repeats=1 if args.quick else args.repeats,
        data=args.data,
        trees=trees,
        layouts=layouts,
    )
    print()
    print(markdown(result, tuple(trees)))
    if args.json:
        args.json.write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
