"""Competitor implementations of the lbnorm job, and the floors they are measured against.

Each competitor is a function ``(scores_parquet, suite_toml, out_dir) -> None`` that
reads the long-format scores, normalizes them under the suite and writes two tables:

- ``benchmarks.parquet``: ``model, precision, revision, chat_template, benchmark,
  raw, normalized``, one row per variant and benchmark;
- ``leaderboard.parquet``: the variant keys, one column of normalized scores per
  benchmark (suite order), ``average`` and ``rank`` (int64, competition ranking
  1, 2, 2, 4 by descending average), sorted by rank.

Run one as its own process, so that its wall time includes the interpreter start and
its imports (each function imports only what it uses)::

    python benchmarks_perf/peers.py NAME scores.parquet suite.toml OUT_DIR

Competitors: ``loop`` (a naive per-model Python script; small inputs only),
``pandas-apply`` (``groupby().apply``), ``pandas`` (idiomatic vectorized pandas),
``polars`` (lazy), ``duckdb`` (SQL over the Parquet file).
Floors: ``floor`` (read the input once with ``pq.read_table`` and write two tables of
the output's shape with dummy scores, with no grouping: it uses the generator's
layout, one row per suite subtask per variant, in order), ``floor-read`` (the read
alone), ``floor-read-pf`` (the read with ``pq.ParquetFile(...).read()``, which does
not import pyarrow.dataset and pandas), ``floor-read-dict`` (that read with string
columns as dictionaries) and ``floor-import`` (start Python and import
pyarrow.parquet and numpy).
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import pandas as pd

KEYS = ["model", "precision", "revision", "chat_template"]
BENCH_FILE = "benchmarks.parquet"
BOARD_FILE = "leaderboard.parquet"
STRING_COLUMNS = ["model", "precision", "revision", "benchmark", "subtask", "metric"]


@dataclass(frozen=True)
class Bounds:
    """The suite flattened to one entry per subtask, in suite order."""

    benchmarks: list[str]
    benchmark: list[str]
    subtask: list[str]
    lower_bound: list[float]
    weight: list[int]  # the suite's n_samples; 0 where it has none
    pooled: list[bool]  # the benchmark's rule is pool-then-normalize

    def by_subtask(self) -> dict[tuple[str, str], tuple[float, int]]:
        """Map (benchmark, subtask) -> (lower_bound, weight)."""
        return {
            (b, s): (lb, w)
            for b, s, lb, w in zip(
                self.benchmark, self.subtask, self.lower_bound, self.weight, strict=True
            )
        }

    def pooled_benchmarks(self) -> set[str]:
        """Names of the benchmarks aggregated pool-then-normalize."""
        return {b for b, p in zip(self.benchmark, self.pooled, strict=True) if p}

    def benchmark_bounds(self) -> dict[str, float]:
        """Map benchmark -> lower bound (the shared one, for pooled benchmarks)."""
        return dict(zip(self.benchmark, self.lower_bound, strict=True))


def load_bounds(suite_path: str | Path) -> Bounds:
    """Read a suite TOML file: lb = lower_bound, else 1/num_choices, else 0."""
    with Path(suite_path).open("rb") as fh:
        document = tomllib.load(fh)
    out = Bounds([], [], [], [], [], [])
    for bench in document["benchmarks"]:
        out.benchmarks.append(bench["name"])
        pooled = bench.get("aggregation", "normalize-then-average") == (
            "pool-then-normalize"
        )
        for sub in bench["subtasks"]:
            choices = int(sub.get("num_choices", 0))
            default = 1.0 / choices if choices else 0.0
            out.benchmark.append(bench["name"])
            out.subtask.append(sub["name"])
            out.lower_bound.append(float(sub.get("lower_bound", default)))
            out.weight.append(int(sub.get("n_samples", 0)))
            out.pooled.append(pooled)
    return out


def _nz(value: float, lb: float) -> float:
    """Normalize one score: max(0, (value - lb) / (1 - lb)) * 100."""
    return max(0.0, (value - lb) / (1.0 - lb)) * 100.0


# --------------------------------------------------------------------------- loop
def run_loop(scores: Path, suite: Path, out: Path) -> None:
    """A naive script: read with pandas, then plain Python loops per model."""
    import pandas as pd

    bounds = load_bounds(suite)
    spec = bounds.by_subtask()
    pooled = bounds.pooled_benchmarks()
    bench_lb = bounds.benchmark_bounds()
    df = pd.read_parquet(scores)

    per_model: dict[
        tuple[str, str, str, bool], dict[str, list[tuple[float, float, int]]]
    ]
    per_model = {}
    for row in df.itertuples(index=False):
        benchmark, subtask = str(row.benchmark), str(row.subtask)
        found = spec.get((benchmark, subtask))
        if found is None:
            continue
        key = (
            str(row.model),
            str(row.precision),
            str(row.revision),
            bool(row.chat_template),
        )
        per_bench = per_model.setdefault(key, {})
        per_bench.setdefault(benchmark, []).append(
            (cast("float", row.raw_score), *found)
        )

    bench_rows = []
    board_rows = []
    for key, per_bench in per_model.items():
        board: dict[str, object] = dict(zip(KEYS, key, strict=True))
        total = 0.0
        for name in bounds.benchmarks:
            items = per_bench[name]
            if name in pooled:
                raw = sum(r * w for r, _, w in items) / sum(w for _, _, w in items)
                normalized = _nz(raw, bench_lb[name])
            else:
                raw = sum(r for r, _, _ in items) / len(items)
                normalized = sum(_nz(r, lb) for r, lb, _ in items) / len(items)
            bench_rows.append((*key, name, raw, normalized))
            board[name] = normalized
            total += normalized
        board["average"] = total / len(bounds.benchmarks)
        board_rows.append(board)

    board_rows.sort(key=lambda r: -float(r["average"]))  # type: ignore[arg-type]
    previous = None
    for position, board in enumerate(board_rows, start=1):
        if board["average"] != previous:
            rank, previous = position, board["average"]
        board["rank"] = rank

    columns = [*KEYS, "benchmark", "raw", "normalized"]
    pd.DataFrame(bench_rows, columns=columns).to_parquet(out / BENCH_FILE, index=False)
    pd.DataFrame(board_rows).to_parquet(out / BOARD_FILE, index=False)


# ------------------------------------------------------------------- pandas-apply
def run_pandas_apply(scores: Path, suite: Path, out: Path) -> None:
    """pandas with a Python function per (variant, benchmark) via groupby().apply."""
    import pandas as pd

    bounds = load_bounds(suite)
    table = pd.DataFrame(
        {
            "benchmark": bounds.benchmark,
            "subtask": bounds.subtask,
            "lb": bounds.lower_bound,
            "weight": bounds.weight,
            "pooled": bounds.pooled,
        }
    )
    df = pd.read_parquet(scores).merge(table, on=["benchmark", "subtask"])

    def aggregate(group: pd.DataFrame) -> pd.Series:
        raw_scores, lb = group["raw_score"], group["lb"]
        if group["pooled"].iloc[0]:
            weight = group["weight"]
            raw = (raw_scores * weight).sum() / weight.sum()
            normalized = _nz(raw, lb.iloc[0])
        else:
            raw = raw_scores.mean()
            normalized = (((raw_scores - lb) / (1 - lb)).clip(lower=0) * 100).mean()
        return pd.Series({"raw": raw, "normalized": normalized})

    bench = df.groupby([*KEYS, "benchmark"], sort=False).apply(aggregate).reset_index()
    bench.to_parquet(out / BENCH_FILE, index=False)
    _pandas_board(bench, bounds.benchmarks).to_parquet(out / BOARD_FILE, index=False)


def _pandas_board(bench: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Pivot the benchmark-level pandas frame to the leaderboard."""
    # pivot, not pivot_table: one value per cell, nothing to aggregate.
    board = bench.pivot(index=KEYS, columns="benchmark", values="normalized")  # noqa: PD010
    board = board[names]
    board.columns.name = None
    board["average"] = board[names].mean(axis=1)
    board["rank"] = board["average"].rank(method="min", ascending=False).astype("int64")
    return board.reset_index().sort_values("rank", kind="stable")


# ------------------------------------------------------------------------- pandas
def run_pandas(scores: Path, suite: Path, out: Path) -> None:
    """Idiomatic vectorized pandas: merge the bounds, one groupby, vector maths."""
    import numpy as np
    import pandas as pd

    bounds = load_bounds(suite)
    table = pd.DataFrame(
        {
            "benchmark": bounds.benchmark,
            "subtask": bounds.subtask,
            "lb": bounds.lower_bound,
            "weight": bounds.weight,
        }
    )
    df = pd.read_parquet(scores, columns=[*KEYS, "benchmark", "subtask", "raw_score"])
    df = df.merge(table, on=["benchmark", "subtask"])
    df["norm"] = ((df["raw_score"] - df["lb"]) / (1 - df["lb"])).clip(lower=0) * 100
    df["wraw"] = df["raw_score"] * df["weight"]
    bench = (
        df.groupby([*KEYS, "benchmark"], sort=False)
        .agg(
            raw_mean=("raw_score", "mean"),
            norm_mean=("norm", "mean"),
            wraw=("wraw", "sum"),
            weight=("weight", "sum"),
        )
        .reset_index()
    )
    pooled = bench["benchmark"].isin(bounds.pooled_benchmarks()).to_numpy()
    lb = bench["benchmark"].map(bounds.benchmark_bounds())
    pooled_raw = bench["wraw"] / bench["weight"].where(pooled)
    pooled_norm = ((pooled_raw - lb) / (1 - lb)).clip(lower=0) * 100
    bench["raw"] = np.where(pooled, pooled_raw, bench["raw_mean"])
    bench["normalized"] = np.where(pooled, pooled_norm, bench["norm_mean"])
    bench = bench[[*KEYS, "benchmark", "raw", "normalized"]]
    bench.to_parquet(out / BENCH_FILE, index=False)
    _pandas_board(bench, bounds.benchmarks).to_parquet(out / BOARD_FILE, index=False)


# ------------------------------------------------------------------------- polars
def run_polars(scores: Path, suite: Path, out: Path) -> None:
    """Polars lazy: scan, join the bounds, group_by, conditional aggregation."""
    import polars as pl

    bounds = load_bounds(suite)
    table = pl.LazyFrame(
        {
            "benchmark": bounds.benchmark,
            "subtask": bounds.subtask,
            "lb": bounds.lower_bound,
            "weight": bounds.weight,
            "pooled": bounds.pooled,
        },
        schema={
            "benchmark": pl.String,
            "subtask": pl.String,
            "lb": pl.Float64,
            "weight": pl.Float64,
            "pooled": pl.Boolean,
        },
    )
    raw, lb, weight = pl.col("raw_score"), pl.col("lb"), pl.col("weight")
    pooled_raw = pl.col("pooled_raw")
    bench = (
        pl.scan_parquet(scores)
        .join(table, on=["benchmark", "subtask"], how="inner")
        .group_by([*KEYS, "benchmark"])
        .agg(
            raw_mean=raw.mean(),
            norm_mean=(((raw - lb) / (1 - lb)).clip(lower_bound=0) * 100).mean(),
            pooled_raw=(raw * weight).sum() / weight.sum(),
            lb=lb.first(),
            pooled=pl.col("pooled").first(),
        )
        .select(
            *KEYS,
            "benchmark",
            raw=pl.when("pooled").then(pooled_raw).otherwise("raw_mean"),
            normalized=pl.when("pooled")
            .then(((pooled_raw - lb) / (1 - lb)).clip(lower_bound=0) * 100)
            .otherwise("norm_mean"),
        )
        .collect()
    )
    bench.write_parquet(out / BENCH_FILE)
    names = bounds.benchmarks
    board = (
        bench.lazy()
        .group_by(KEYS)
        .agg(
            pl.col("normalized").filter(pl.col("benchmark") == n).first().alias(n)
            for n in names
        )
        .with_columns(average=pl.mean_horizontal(names))
        .with_columns(
            rank=pl.col("average").rank(method="min", descending=True).cast(pl.Int64)
        )
        .sort("rank")
        .collect()
    )
    board.write_parquet(out / BOARD_FILE)


# ------------------------------------------------------------------------- duckdb
def run_duckdb(scores: Path, suite: Path, out: Path) -> None:
    """DuckDB SQL straight over the Parquet file; COPY writes the outputs."""
    import duckdb

    bounds = load_bounds(suite)
    con = duckdb.connect()
    con.execute(
        "CREATE TEMP TABLE bounds (benchmark VARCHAR, subtask VARCHAR, "
        "lb DOUBLE, weight DOUBLE, pooled BOOLEAN)"
    )
    con.executemany(
        "INSERT INTO bounds VALUES (?, ?, ?, ?, ?)",
        list(
            zip(
                bounds.benchmark,
                bounds.subtask,
                bounds.lower_bound,
                bounds.weight,
                bounds.pooled,
                strict=True,
            )
        ),
    )
    keys = ", ".join(KEYS)
    con.execute(
        f"""
        CREATE TEMP TABLE bench AS
        WITH agg AS (
            SELECT {keys}, s.benchmark,
                   avg(raw_score) AS raw_mean,
                   avg(greatest(0.0, (raw_score - lb) / (1 - lb)) * 100) AS norm_mean,
                   sum(raw_score * weight) / sum(weight) AS pooled_raw,
                   any_value(lb) AS lb,
                   any_value(pooled) AS pooled
            FROM read_parquet($path) AS s
            JOIN bounds AS b ON s.benchmark = b.benchmark AND s.subtask = b.subtask
            GROUP BY {keys}, s.benchmark
        )
        SELECT {keys}, benchmark,
               CASE WHEN pooled THEN pooled_raw ELSE raw_mean END AS raw,
               CASE WHEN pooled
                    THEN greatest(0.0, (pooled_raw - lb) / (1 - lb)) * 100
                    ELSE norm_mean END AS normalized
        FROM agg
        """,
        {"path": str(scores)},
    )
    con.execute(f"COPY bench TO '{out / BENCH_FILE}' (FORMAT parquet)")
    columns = ", ".join(
        f"max(normalized) FILTER (WHERE benchmark = '{n}') AS \"{n}\""
        for n in bounds.benchmarks
    )
    con.execute(
        f"""
        COPY (
            SELECT {keys}, {columns},
                   avg(normalized) AS average,
                   rank() OVER (ORDER BY avg(normalized) DESC) AS rank
            FROM bench GROUP BY {keys} ORDER BY rank
        ) TO '{out / BOARD_FILE}' (FORMAT parquet)
        """
    )


# ------------------------------------------------------------------------- floors
def run_floor(scores: Path, suite: Path, out: Path) -> None:
    """Read once with pq.read_table; write two tables of the output's shape.

    No grouping: the variant keys are every n-th row (the generator writes one row
    per suite subtask per variant, in order); the scores are dummies.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    bounds = load_bounds(suite)
    table = pq.read_table(scores)
    names = bounds.benchmarks
    first = np.arange(0, table.num_rows, len(bounds.subtask))
    n_var, n_bench = first.size, len(names)
    rng = np.random.default_rng(0)
    # Take the key rows chunk by chunk: a take on the whole chunked table would
    # first concatenate every chunk (0.6 s at 3M rows).
    pieces, offset = [], 0
    for batch in table.select(KEYS).to_batches():
        local = first[(first >= offset) & (first < offset + batch.num_rows)] - offset
        pieces.append(batch.take(pa.array(local)))
        offset += batch.num_rows
    keys = pa.Table.from_batches(pieces).combine_chunks()  # one row per variant
    bench = keys.take(np.repeat(np.arange(n_var), n_bench))
    bench = bench.append_column("benchmark", pa.array(names * n_var))
    bench = bench.append_column("raw", pa.array(rng.random(n_var * n_bench)))
    bench = bench.append_column("normalized", pa.array(rng.random(n_var * n_bench)))
    pq.write_table(bench, out / BENCH_FILE)
    board = keys
    for name in [*names, "average"]:
        board = board.append_column(name, pa.array(rng.random(n_var) * 100))
    board = board.append_column("rank", pa.array(np.arange(1, n_var + 1)))
    pq.write_table(board, out / BOARD_FILE)


def run_floor_read(scores: Path, suite: Path, out: Path) -> None:
    """Read the input once with pq.read_table (strings decoded), nothing else."""
    import pyarrow.parquet as pq

    pq.read_table(scores)


def run_floor_read_pf(scores: Path, suite: Path, out: Path) -> None:
    """Read the input once with ParquetFile.read, which skips pyarrow.dataset.

    ``pq.read_table`` goes through ``pyarrow.dataset``, whose import also imports
    pandas (about 0.3 s here); ``ParquetFile`` does not.
    """
    import pyarrow.parquet as pq

    pq.ParquetFile(scores).read()


def run_floor_read_dict(scores: Path, suite: Path, out: Path) -> None:
    """Read as floor-read-pf does, string columns as dictionaries (integer codes)."""
    import pyarrow.parquet as pq

    pq.ParquetFile(scores, read_dictionary=STRING_COLUMNS).read()


def run_floor_import(scores: Path, suite: Path, out: Path) -> None:
    """Start Python and import pyarrow.parquet and numpy; no work."""
    import numpy  # noqa: F401
    import pyarrow.parquet  # noqa: F401


Competitor = Callable[[Path, Path, Path], None]

COMPETITORS: dict[str, Competitor] = {
    "loop": run_loop,
    "pandas-apply": run_pandas_apply,
    "pandas": run_pandas,
    "polars": run_polars,
    "duckdb": run_duckdb,
}
FLOORS: dict[str, Competitor] = {
    "floor": run_floor,
    "floor-read": run_floor_read,
    "floor-read-pf": run_floor_read_pf,
    "floor-read-dict": run_floor_read_dict,
    "floor-import": run_floor_import,
}
ALL: dict[str, Competitor] = {**COMPETITORS, **FLOORS}


def main(argv: list[str] | None = None) -> int:
    """``peers.py NAME SCORES SUITE OUT_DIR``: run one competitor or floor."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4 or args[0] not in ALL:
        print(
            f"usage: peers.py {{{','.join(ALL)}}} SCORES SUITE OUT_DIR", file=sys.stderr
        )
        return 2
    name, scores, suite, out = args[0], Path(args[1]), Path(args[2]), Path(args[3])
    out.mkdir(parents=True, exist_ok=True)
    ALL[name](scores, suite, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
