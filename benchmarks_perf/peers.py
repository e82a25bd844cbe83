"""The peers: lbnorm's job written with DuckDB, polars and pandas, and the floors.

Each competitor does what ``lbnorm run SCORES --suite SUITE --out OUT`` does with
its default options, and writes the same tables (same rows, same columns in the
same order, types as close as the library allows; Parquet, zstd as lbnorm):

- ``subtasks.parquet`` (not with ``--tables 2``): one row per input score:
  ``model, precision, revision, chat_template, benchmark, subtask, metric,
  raw_score, lower_bound, normalized_score, is_clipped, stderr, n_samples, source``;
  ``normalized_score = max(0, (raw - lb) / (1 - lb)) * 100``, ``is_clipped = raw < lb``;
- ``benchmarks.parquet``: one row per (variant, benchmark): keys, ``benchmark,
  raw_score, normalized_score, n_subtasks, n_subtasks_expected, is_complete``;
  normalize-then-average: the mean of the normalized subtask scores (raw: the mean
  raw score); pool-then-normalize: the mean of the raw scores weighted by the suite's
  ``n_samples``, normalized once; ``normalized_score`` null when a subtask is missing;
- ``leaderboard.parquet``: one row per variant, best first: keys, ``rank`` (1, 2, 2,
  4 over the average rounded to 9 decimals, descending; null when unranked),
  ``average`` (the weighted mean of the benchmark scores; null unless every
  benchmark is complete), ``n_benchmarks, n_benchmarks_expected, is_complete``,
  then ``<benchmark>`` and ``<benchmark> Raw`` per benchmark in suite order; with
  ``--metadata FILE`` (as ``lbnorm run`` joins its demo's metadata) the metadata's
  other columns, left-joined on the keys, and ``size_class`` from ``params_b``.

``--tables 2`` writes the last two only, as ``lbnorm run --no-subtasks`` does.
``--input samples`` reads a per-sample table (``lbnorm.core.schemas.SAMPLES``) and first
aggregates it as lbnorm does (mean, ``stddev_samp / sqrt(n)`` or null for one
document, the count; ``source`` is the path as given). Row order is each library's
own (the subtask table is not sorted: ``check_peers.py`` joins on the keys).

Run one as its own process, so that its wall time includes the interpreter start and
its imports (each function imports only what it uses)::

    python benchmarks_perf/peers.py NAME SCORES SUITE OUT [--tables 2|3]
        [--metadata FILE] [--input scores|samples]

SCORES is a Parquet file or a directory of Parquet parts. Competitors: ``duckdb``
(SQL over the Parquet files, ``COPY ... TO ... (FORMAT parquet)``), ``polars``
(lazy scan, ``sink_parquet`` / ``write_parquet``), ``pandas`` (idiomatic
vectorized pandas), ``pandas-apply`` (``groupby().apply``), ``loop`` (a naive
per-row Python script; small inputs only). Floors (single files, ``--input
scores``): ``floor`` (read the input once with ``pq.read_table`` and write tables of
the output's shape with dummy scores, no grouping: it relies on the generator's
layout, one row per suite subtask per variant, in order), ``floor-read`` (the read
alone), ``floor-read-pf`` (the read with ``pq.ParquetFile(...).read()``, which
does not import pyarrow.dataset and pandas), ``floor-read-dict`` (that read with
string columns as dictionaries), ``floor-import`` (start Python, import
pyarrow.parquet and numpy) and ``floor-io`` (the file's sha256, its row groups read
as dictionaries, the rows written back in input order: the I/O of lbnorm's
contract on one Parquet file, set against each layout by ``layouts.py``).
"""

from __future__ import annotations

import argparse
import math
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pandas as pd
    import polars as pl
    import pyarrow as pa

KEYS = ["model", "precision", "revision", "chat_template"]
SUBTASKS_FILE = "subtasks.parquet"
BENCH_FILE = "benchmarks.parquet"
BOARD_FILE = "leaderboard.parquet"
STRING_COLUMNS = ["model", "precision", "revision", "benchmark", "subtask", "metric"]
SUBTASK_COLUMNS = [
    *KEYS, "benchmark", "subtask", "metric", "raw_score", "lower_bound",
    "normalized_score", "is_clipped", "stderr", "n_samples", "source",
]  # fmt: skip
BENCH_COLUMNS = [
    *KEYS, "benchmark", "raw_score", "normalized_score", "n_subtasks",
    "n_subtasks_expected", "is_complete",
]  # fmt: skip
#: lbnorm.engines.metadata.SIZE_CLASSES: (label, lower edge in billions), a class per
#: [edge, next edge); null where params_b is not a positive number.
SIZE_CLASSES = [
    ("<3B", 0.0), ("3-6B", 3.0), ("6-10B", 6.0), ("10-20B", 10.0),
    ("20-40B", 20.0), ("40-65B", 40.0), ("65B+", 65.0),
]  # fmt: skip
RANK_DECIMALS = (
    9  # lbnorm.engines.kernel.RANK_DECIMALS: averages equal to 9 decimals tie
)
Tables = Literal[2, 3]
InputKind = Literal["scores", "samples"]


@dataclass(frozen=True)
class Bounds:
    """The suite flattened to one entry per subtask (suite order), and per benchmark."""

    benchmarks: list[str]  # in suite order
    benchmark_weight: list[float]  # weight in the average, per benchmark
    benchmark: list[str]  # per subtask from here on
    subtask: list[str]
    task: list[str]
    metric: list[str]
    lower_bound: list[float]
    weight: list[int]  # the suite's n_samples; 0 where it has none
    pooled: list[bool]  # the benchmark's rule is pool-then-normalize

    def expected(self) -> dict[str, int]:
        """Subtasks per benchmark."""
        return {name: self.benchmark.count(name) for name in self.benchmarks}

    def pooled_benchmarks(self) -> set[str]:
        """Names of the benchmarks aggregated pool-then-normalize."""
        return {b for b, p in zip(self.benchmark, self.pooled, strict=True) if p}

    def benchmark_bounds(self) -> dict[str, float]:
        """Benchmark -> lower bound (its last subtask's: one per pooled benchmark)."""
        return dict(zip(self.benchmark, self.lower_bound, strict=True))

    def benchmark_rows(self) -> list[tuple[str, bool, float, int, float]]:
        """Per benchmark: (name, pooled, weight, subtasks expected, bound)."""
        pooled, bound, expected = (
            self.pooled_benchmarks(),
            self.benchmark_bounds(),
            self.expected(),
        )
        return [
            (name, name in pooled, weight, expected[name], bound[name])
            for name, weight in zip(self.benchmarks, self.benchmark_weight, strict=True)
        ]

    def subtask_rows(self) -> list[tuple[str, str, str, str, float, int, bool]]:
        """Per subtask: (benchmark, subtask, task, metric, lower_bound, weight, pooled)."""
        return list(
            zip(
                self.benchmark,
                self.subtask,
                self.task,
                self.metric,
                self.lower_bound,
                self.weight,
                self.pooled,
                strict=True,
            )
        )


def load_bounds(suite_path: str | Path) -> Bounds:
    """Read a suite TOML file: lb = lower_bound, else 1/num_choices, else 0."""
    with Path(suite_path).open("rb") as fh:
        document = tomllib.load(fh)
    out = Bounds([], [], [], [], [], [], [], [], [])
    for bench in document["benchmarks"]:
        out.benchmarks.append(bench["name"])
        out.benchmark_weight.append(float(bench.get("weight", 1.0)))
        pooled = bench.get("aggregation", "normalize-then-average") == (
            "pool-then-normalize"
        )
        for sub in bench["subtasks"]:
            choices = int(sub.get("num_choices", 0))
            default = 1.0 / choices if choices else 0.0
            out.benchmark.append(bench["name"])
            out.subtask.append(sub["name"])
            out.task.append(sub.get("task", ""))
            out.metric.append(sub.get("metric", ""))
            out.lower_bound.append(float(sub.get("lower_bound", default)))
            out.weight.append(int(sub.get("n_samples", 0)))
            out.pooled.append(pooled)
    return out


@dataclass(frozen=True)
class Job:
    """What a competitor is asked to do."""

    scores: Path  # a Parquet file or a directory of parts
    suite: Bounds
    out: Path
    tables: Tables = 3
    metadata: Path | None = None
    kind: InputKind = "scores"

    @property
    def glob(self) -> str:
        """The input as a path or glob string (DuckDB and polars read either)."""
        return (
            str(self.scores / "*.parquet") if self.scores.is_dir() else str(self.scores)
        )


def _nz(value: float, lb: float) -> float:
    """Normalize one score: max(0, (value - lb) / (1 - lb) * 100)."""
    return max(0.0, (value - lb) / (1.0 - lb) * 100.0)


def _size_class(params_b: float | None) -> str | None:
    if params_b is None or not math.isfinite(params_b) or params_b <= 0:
        return None
    return [label for label, edge in SIZE_CLASSES if params_b >= edge][-1]


# ------------------------------------------------------------------------- duckdb
def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _sql_name(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _duckdb_source(path: str) -> str:
    """DuckDB's reader of the input: Parquet, or by suffix ``read_csv`` / ``read_json``."""
    if path.endswith(".csv"):
        return f"read_csv({_sql_text(path)})"
    if path.endswith((".jsonl", ".ndjson")):
        return f"read_json({_sql_text(path)}, format = 'newline_delimited')"
    return f"read_parquet({_sql_text(path)})"


def run_duckdb(job: Job) -> None:
    """DuckDB SQL straight over the Parquet files; COPY writes the outputs."""
    import duckdb

    bounds = job.suite
    con = duckdb.connect()
    con.execute(
        "CREATE TEMP TABLE bounds (benchmark VARCHAR, subtask VARCHAR, task VARCHAR, "
        "metric VARCHAR, lb DOUBLE, w DOUBLE, pooled BOOLEAN)"
    )
    con.executemany(
        "INSERT INTO bounds VALUES (?, ?, ?, ?, ?, ?, ?)", bounds.subtask_rows()
    )
    con.execute(
        "CREATE TEMP TABLE info (benchmark VARCHAR, pooled BOOLEAN, weight DOUBLE, "
        "expected INTEGER, bound DOUBLE)"
    )
    con.executemany("INSERT INTO info VALUES (?, ?, ?, ?, ?)", bounds.benchmark_rows())
    source = _duckdb_source(job.glob)
    keys = ", ".join(KEYS)
    if job.kind == "samples":
        columns = {
            row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        }
        precision = "coalesce(s.precision, '')" if "precision" in columns else "''"
        revision = "coalesce(s.revision, '')" if "revision" in columns else "''"
        chat = (
            "coalesce(s.chat_template, false)"
            if "chat_template" in columns
            else "false"
        )
        # a few hundred thousand aggregates: materialized, read twice below
        con.execute(
            f"""
            CREATE TEMP TABLE scores AS
            SELECT s.model, {precision} AS precision, {revision} AS revision,
                   {chat} AS chat_template, b.benchmark, b.subtask, s.metric,
                   avg(s.value) AS raw_score,
                   CASE WHEN count(*) > 1 THEN stddev_samp(s.value) / sqrt(count(*)) END AS stderr,
                   count(*) AS n_samples, {_sql_text(str(job.scores))} AS source
            FROM {source} AS s JOIN bounds AS b ON s.task = b.task AND s.metric = b.metric
            GROUP BY ALL
            """
        )
        source, text_source = "scores", "source"
    else:
        text_source = _sql_text(str(job.scores))  # the path as given, as lbnorm writes
    rows = f"""
        SELECT {", ".join("s." + k for k in KEYS)}, s.benchmark, s.subtask, s.metric,
               s.raw_score, b.lb AS lower_bound,
               greatest((s.raw_score - b.lb) / (1 - b.lb) * 100, 0) AS normalized_score,
               s.raw_score < b.lb AS is_clipped, s.stderr, s.n_samples,
               {text_source} AS source, b.w
        FROM {source} AS s JOIN bounds AS b USING (benchmark, subtask)
    """
    options = "(FORMAT parquet, COMPRESSION zstd)"
    if job.tables == 3:
        con.execute(
            f"COPY (SELECT {', '.join(SUBTASK_COLUMNS)} FROM ({rows})) "
            f"TO {_sql_text(str(job.out / SUBTASKS_FILE))} {options}"
        )
    con.execute(
        f"""
        CREATE TEMP TABLE bench AS
        WITH agg AS (
            SELECT {keys}, benchmark, count(*) AS n,
                   avg(raw_score) AS raw_mean, avg(normalized_score) AS norm_mean,
                   sum(raw_score * w) / sum(w) AS pooled_raw
            FROM ({rows}) GROUP BY {keys}, benchmark
        )
        SELECT {keys}, benchmark,
               CASE WHEN pooled THEN pooled_raw ELSE raw_mean END AS raw_score,
               CASE WHEN n <> expected THEN NULL
                    WHEN pooled THEN greatest((pooled_raw - bound) / (1 - bound) * 100, 0)
                    ELSE norm_mean END AS normalized_score,
               n::INTEGER AS n_subtasks, expected AS n_subtasks_expected,
               n = expected AS is_complete, weight
        FROM agg JOIN info USING (benchmark)
        """
    )
    con.execute(
        f"COPY (SELECT {', '.join(BENCH_COLUMNS)} FROM bench) "
        f"TO {_sql_text(str(job.out / BENCH_FILE))} {options}"
    )
    n_bench = len(bounds.benchmarks)
    per_bench = ", ".join(
        f"max(normalized_score) FILTER (WHERE benchmark = {_sql_text(n)}) AS {_sql_name(n)}, "
        f"max(raw_score) FILTER (WHERE benchmark = {_sql_text(n)}) AS {_sql_name(n + ' Raw')}"
        for n in bounds.benchmarks
    )
    board = f"""
        SELECT {keys},
               CASE WHEN count(normalized_score) = {n_bench}
                    THEN sum(normalized_score * weight) / sum(weight) END AS average,
               count(*) FILTER (WHERE is_complete)::INTEGER AS n_benchmarks,
               {n_bench}::INTEGER AS n_benchmarks_expected,
               count(*) FILTER (WHERE is_complete) = {n_bench} AS is_complete,
               {per_bench}
        FROM bench GROUP BY {keys}
    """
    bench_names = ", ".join(
        f"{_sql_name(n)}, {_sql_name(n + ' Raw')}" for n in bounds.benchmarks
    )
    select = f"""
        {", ".join("g." + k for k in KEYS)},
        CASE WHEN average IS NOT NULL THEN rank() OVER (
            ORDER BY round(average, {RANK_DECIMALS}) DESC NULLS LAST) END AS rank,
        average, n_benchmarks, n_benchmarks_expected, is_complete, {bench_names}
    """
    joined = f"({board}) AS g"
    if job.metadata is not None:
        meta = f"read_parquet({_sql_text(str(job.metadata))})"
        names = [
            row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {meta}").fetchall()
        ]
        on = [k for k in KEYS if k in names]
        free = [n for n in names if n not in on]
        select += "".join(f", m.{_sql_name(n)}" for n in free)
        if "params_b" in free and "size_class" not in free:
            cases = " ".join(
                f"WHEN m.params_b >= {edge} THEN {_sql_text(label)}"
                for label, edge in reversed(SIZE_CLASSES)
            )
            select += (
                ", CASE WHEN isfinite(m.params_b) AND m.params_b > 0 "
                f"THEN CASE {cases} END END AS size_class"
            )
        condition = " AND ".join(f"g.{k} = m.{k}" for k in on)
        joined += f" LEFT JOIN {meta} AS m ON {condition}"
    con.execute(
        f"COPY (SELECT {select} FROM {joined} ORDER BY rank NULLS LAST) "
        f"TO {_sql_text(str(job.out / BOARD_FILE))} {options}"
    )


# ------------------------------------------------------------------------- polars
def run_polars(job: Job) -> None:
    """Polars lazy: scan, join the bounds, group_by; sinks and writes the outputs."""
    import polars as pl

    bounds = job.suite
    table = pl.LazyFrame(
        {
            "benchmark": bounds.benchmark,
            "subtask": bounds.subtask,
            "task": bounds.task,
            "metric": bounds.metric,
            "lb": bounds.lower_bound,
            "w": [float(w) for w in bounds.weight],
        },
        schema={
            "benchmark": pl.String, "subtask": pl.String, "task": pl.String,
            "metric": pl.String, "lb": pl.Float64, "w": pl.Float64,
        },
    )  # fmt: skip
    info = pl.LazyFrame(
        [list(row) for row in zip(*bounds.benchmark_rows(), strict=True)],
        schema={
            "benchmark": pl.String, "pooled": pl.Boolean, "weight": pl.Float64,
            "expected": pl.Int32, "bound": pl.Float64,
        },
        orient="col",
    )  # fmt: skip
    if job.kind == "samples":
        scores = _polars_samples(job, table).collect().lazy()  # small: read twice
        source = pl.col("source")
    else:
        scores = pl.scan_parquet(job.glob)
        source = pl.lit(str(job.scores))  # the path as given, as lbnorm writes
    raw, lb = pl.col("raw_score"), pl.col("lb")
    rows = scores.join(
        table.drop("task", "metric"), on=["benchmark", "subtask"], how="inner"
    ).with_columns(
        lower_bound=lb,
        normalized_score=((raw - lb) / (1 - lb) * 100).clip(lower_bound=0),
        is_clipped=raw < lb,
        source=source,
    )
    bench_query = (
        rows.group_by([*KEYS, "benchmark"])
        .agg(
            n=pl.len().cast(pl.Int32),
            raw_mean=raw.mean(),
            norm_mean=pl.col("normalized_score").mean(),
            pooled_raw=(raw * pl.col("w")).sum() / pl.col("w").sum(),
        )
        .join(info, on="benchmark", how="inner")
        .select(
            *KEYS,
            "benchmark",
            raw_score=pl.when("pooled").then("pooled_raw").otherwise("raw_mean"),
            normalized_score=pl.when(pl.col("n") != pl.col("expected"))
            .then(None)
            .when("pooled")
            .then(
                (
                    (pl.col("pooled_raw") - pl.col("bound"))
                    / (1 - pl.col("bound"))
                    * 100
                ).clip(lower_bound=0)
            )
            .otherwise("norm_mean"),
            n_subtasks="n",
            n_subtasks_expected="expected",
            is_complete=pl.col("n") == pl.col("expected"),
            weight="weight",
        )
    )
    if job.tables == 3:
        sink = rows.select(SUBTASK_COLUMNS).sink_parquet(
            job.out / SUBTASKS_FILE, lazy=True
        )
        bench = pl.collect_all([sink, bench_query])[1]
    else:
        bench = bench_query.collect()
    bench.select(BENCH_COLUMNS).write_parquet(job.out / BENCH_FILE)
    _polars_board(bench.lazy(), job).collect().write_parquet(job.out / BOARD_FILE)


def _polars_samples(job: Job, table: pl.LazyFrame) -> pl.LazyFrame:
    """Aggregate a sample table into scores (mean, stderr, count) per subtask."""
    import polars as pl

    samples = pl.scan_parquet(job.glob)
    names = samples.collect_schema().names()
    fill = {
        "precision": pl.lit(""),
        "revision": pl.lit(""),
        "chat_template": pl.lit(False),
    }
    samples = samples.with_columns(
        pl.col(n).fill_null(v) if n in names else v.alias(n) for n, v in fill.items()
    )
    value, count = pl.col("value"), pl.len()
    return (
        samples.with_columns(pl.col("task", "metric").cast(pl.String))
        .join(
            table.select("task", "metric", "benchmark", "subtask"),
            on=["task", "metric"],
        )
        .group_by([*KEYS, "benchmark", "subtask", "metric"])
        .agg(
            raw_score=value.mean(),
            stderr=pl.when(count > 1).then(value.std(ddof=1) / count.sqrt()),
            n_samples=count.cast(pl.Int64),
        )
        .with_columns(
            pl.col("model", "precision", "revision").cast(pl.String),
            source=pl.lit(str(job.scores)),
        )
    )


def _polars_board(bench: pl.LazyFrame, job: Job) -> pl.LazyFrame:
    """Pivot the benchmark table to the leaderboard (and join the metadata)."""
    import polars as pl

    names = job.suite.benchmarks
    norm, raw = pl.col("normalized_score"), pl.col("raw_score")
    per_bench = []
    for name in names:
        is_this = pl.col("benchmark") == name
        per_bench += [
            norm.filter(is_this).first().alias(name),
            raw.filter(is_this).first().alias(f"{name} Raw"),
        ]
    n_bench = len(names)
    complete = pl.col("is_complete").sum().cast(pl.Int32)
    board = (
        bench.group_by(KEYS)
        .agg(
            *per_bench,
            average=pl.when(norm.count() == n_bench).then(
                (norm * pl.col("weight")).sum() / pl.col("weight").sum()
            ),
            n_benchmarks=complete,
            n_benchmarks_expected=pl.lit(n_bench, pl.Int32),
            is_complete=complete == n_bench,
        )
        .with_columns(
            rank=pl.col("average")
            .round(RANK_DECIMALS)
            .rank(method="min", descending=True)
            .cast(pl.Int64)
        )
        .select(
            *KEYS,
            "rank",
            "average",
            "n_benchmarks",
            "n_benchmarks_expected",
            "is_complete",
            *[c for n in names for c in (n, f"{n} Raw")],
        )
        .sort("rank", nulls_last=True)
    )
    if job.metadata is None:
        return board
    meta = pl.scan_parquet(job.metadata)
    columns = meta.collect_schema().names()
    on = [k for k in KEYS if k in columns]
    board = board.join(meta, on=on, how="left", maintain_order="left")
    if "params_b" in columns and "size_class" not in columns:
        params = pl.col("params_b")
        label: Any = pl.lit(None, pl.String)
        for name, edge in SIZE_CLASSES:
            label = pl.when(params >= edge).then(pl.lit(name)).otherwise(label)
        board = board.with_columns(
            size_class=pl.when(params.is_finite() & (params > 0)).then(label)
        )
    return board


# ------------------------------------------------------------------------- pandas
def _pandas_rows(job: Job, *, vectorized: bool = True) -> pd.DataFrame:
    """Read the scores, merge the bounds; the subtask table's columns plus ``w``."""
    import numpy as np
    import pandas as pd

    if job.kind != "scores":
        msg = "the pandas peers read score tables only"
        raise SystemExit(msg)
    bounds = job.suite
    table = pd.DataFrame(
        {
            "benchmark": bounds.benchmark,
            "subtask": bounds.subtask,
            "lower_bound": bounds.lower_bound,
            "w": np.asarray(bounds.weight, dtype=np.float64),
        }
    )
    columns = [*KEYS, "benchmark", "subtask", "metric", "raw_score", "stderr", "n_samples"]  # fmt: skip
    rows = pd.read_parquet(job.scores, columns=columns).merge(
        table, on=["benchmark", "subtask"], validate="many_to_one"
    )
    raw, lb = rows["raw_score"], rows["lower_bound"]
    if vectorized:
        rows["normalized_score"] = ((raw - lb) / (1 - lb) * 100).clip(lower=0)
    else:  # a naive script: one Python call per row
        rows["normalized_score"] = [
            _nz(r, b) for r, b in zip(raw.tolist(), lb.tolist(), strict=True)
        ]
    rows["is_clipped"] = raw < lb
    rows["n_samples"] = rows["n_samples"].astype("Int64")
    rows["source"] = str(job.scores)  # the path as given, as lbnorm writes
    return rows


def _pandas_write(job: Job, rows: pd.DataFrame, bench: pd.DataFrame) -> None:
    """Write the subtask table (unless two tables), the benchmark table, the board."""
    import numpy as np
    import pandas as pd

    if job.tables == 3:
        rows[SUBTASK_COLUMNS].to_parquet(
            job.out / SUBTASKS_FILE, index=False, compression="zstd"
        )
    expected = job.suite.expected()
    bench["n_subtasks_expected"] = bench["benchmark"].map(expected).astype(np.int32)
    bench["n_subtasks"] = bench["n_subtasks"].astype(np.int32)
    bench["is_complete"] = bench["n_subtasks"] == bench["n_subtasks_expected"]
    bench.loc[~bench["is_complete"], "normalized_score"] = np.nan
    bench = bench[BENCH_COLUMNS]
    bench.to_parquet(job.out / BENCH_FILE, index=False, compression="zstd")

    names = job.suite.benchmarks
    weight = pd.Series(dict(zip(names, job.suite.benchmark_weight, strict=True)))
    # pivot, not pivot_table: one value per cell, nothing to aggregate
    norm = bench.pivot(index=KEYS, columns="benchmark", values="normalized_score")  # noqa: PD010
    norm = norm.reindex(columns=names)
    raw = bench.pivot(index=KEYS, columns="benchmark", values="raw_score")  # noqa: PD010
    raw = raw.reindex(index=norm.index, columns=names)
    complete = bench.groupby(KEYS)["is_complete"].sum().reindex(norm.index)
    average = norm.mul(weight).sum(axis=1, skipna=False) / weight.sum()
    columns: dict[str, Any] = {
        "rank": average.round(RANK_DECIMALS)
        .rank(method="min", ascending=False)
        .astype("Int64"),
        "average": average,
        "n_benchmarks": complete.astype(np.int32),
        "n_benchmarks_expected": np.int32(len(names)),
        "is_complete": complete == len(names),
    }
    for name in names:
        columns[name] = norm[name]
        columns[f"{name} Raw"] = raw[name]
    board = pd.DataFrame(columns, index=norm.index).reset_index()
    if job.metadata is not None:
        meta = pd.read_parquet(job.metadata)
        on = [k for k in KEYS if k in meta.columns]
        board = board.merge(meta, on=on, how="left", validate="one_to_one")
        if "params_b" in meta.columns and "size_class" not in meta.columns:
            board["size_class"] = pd.Series(
                [_size_class(v) for v in board["params_b"].astype(float).tolist()],
                dtype="str",
            )
    board = board.sort_values("rank", kind="stable", na_position="last")
    board.to_parquet(job.out / BOARD_FILE, index=False, compression="zstd")


def _finish(bench: pd.DataFrame, job: Job) -> pd.DataFrame:
    """Pick raw and normalized by each benchmark's rule from the grouped sums."""
    import numpy as np

    pooled = bench["benchmark"].isin(job.suite.pooled_benchmarks()).to_numpy()
    lb = bench["benchmark"].map(job.suite.benchmark_bounds()).astype(float)
    pooled_raw = bench["wraw"] / bench["wsum"]
    pooled_norm = ((pooled_raw - lb) / (1 - lb) * 100).clip(lower=0)
    bench["raw_score"] = np.where(pooled, pooled_raw, bench["raw_mean"])
    bench["normalized_score"] = np.where(pooled, pooled_norm, bench["norm_mean"])
    return bench


def run_pandas(job: Job) -> None:
    """Idiomatic vectorized pandas: merge the bounds, one groupby, vector maths."""
    rows = _pandas_rows(job)
    rows["wraw"] = rows["raw_score"] * rows["w"]
    bench = (
        rows.groupby([*KEYS, "benchmark"], sort=False, observed=True)
        .agg(
            raw_mean=("raw_score", "mean"),
            norm_mean=("normalized_score", "mean"),
            wraw=("wraw", "sum"),
            wsum=("w", "sum"),
            n_subtasks=("raw_score", "size"),
        )
        .reset_index()
    )
    _pandas_write(job, rows, _finish(bench, job))


def run_pandas_apply(job: Job) -> None:
    """pandas with a Python function per (variant, benchmark) via groupby().apply."""
    import pandas as pd

    rows = _pandas_rows(job)
    pooled = job.suite.pooled_benchmarks()

    def aggregate(group: pd.DataFrame) -> pd.Series:
        raw_scores, weight = group["raw_score"], group["w"]
        if group.name[-1] in pooled:
            raw = (raw_scores * weight).sum() / weight.sum()
            lb = group["lower_bound"].iloc[-1]
            normalized = _nz(raw, lb)
        else:
            raw, normalized = raw_scores.mean(), group["normalized_score"].mean()
        return pd.Series(
            {"raw_score": raw, "normalized_score": normalized, "n_subtasks": len(group)}
        )

    bench = (
        rows.groupby([*KEYS, "benchmark"], sort=False, observed=True)[
            ["raw_score", "w", "lower_bound", "normalized_score"]
        ]
        .apply(aggregate)
        .reset_index()
    )
    _pandas_write(job, rows, bench)


def run_loop(job: Job) -> None:
    """A naive script: read with pandas, then plain Python loops over the rows."""
    import pandas as pd

    rows = _pandas_rows(job, vectorized=False)
    pooled = job.suite.pooled_benchmarks()
    bench_lb = job.suite.benchmark_bounds()
    sums: dict[tuple[Any, ...], list[float]] = {}
    columns = [*KEYS, "benchmark", "raw_score", "normalized_score", "w"]
    for *key, raw, normalized, weight in rows[columns].itertuples(index=False):
        entry = sums.setdefault(tuple(key), [0.0, 0.0, 0.0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += raw
        entry[2] += normalized
        entry[3] += raw * weight
        entry[4] += weight
    records = []
    for group, (count, raw, normalized, wraw, wsum) in sums.items():
        benchmark = group[-1]
        if benchmark in pooled:
            shown = wraw / wsum
            score = _nz(shown, bench_lb[benchmark])
        else:
            shown, score = raw / count, normalized / count
        records.append((*group, shown, score, int(count)))
    bench = pd.DataFrame(
        records,
        columns=[*KEYS, "benchmark", "raw_score", "normalized_score", "n_subtasks"],
    )
    _pandas_write(job, rows, bench)


# ------------------------------------------------------------------------- floors
def run_floor(job: Job) -> None:
    """Read once with pq.read_table; write tables of the output's shape.

    No grouping: the variant keys are every n-th row (the generator writes one row
    per suite subtask per variant, in order); the scores are dummies. The subtask
    table is the input with the three computed columns added.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    bounds = job.suite
    table = pq.read_table(job.scores)
    names = bounds.benchmarks
    first = np.arange(0, table.num_rows, len(bounds.subtask))
    n_var, n_bench = first.size, len(names)
    rng = np.random.default_rng(0)
    if job.tables == 3:
        dummy = pa.array(rng.random(table.num_rows))
        subtasks = table.append_column("lower_bound", dummy)
        subtasks = subtasks.append_column("normalized_score", dummy)
        subtasks = subtasks.append_column(
            "is_clipped", pa.array(np.zeros(table.num_rows, dtype=bool))
        )
        pq.write_table(subtasks, job.out / SUBTASKS_FILE, compression="zstd")
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
    for name in ("raw_score", "normalized_score"):
        bench = bench.append_column(name, pa.array(rng.random(n_var * n_bench)))
    pq.write_table(bench, job.out / BENCH_FILE, compression="zstd")
    board = keys
    for name in ["average", *[c for n in names for c in (n, f"{n} Raw")]]:
        board = board.append_column(name, pa.array(rng.random(n_var) * 100))
    board = board.append_column("rank", pa.array(np.arange(1, n_var + 1)))
    pq.write_table(board, job.out / BOARD_FILE, compression="zstd")


def run_floor_read(job: Job) -> None:
    """Read the input once with pq.read_table (strings decoded), nothing else."""
    import pyarrow.parquet as pq

    pq.read_table(job.scores)


def run_floor_read_pf(job: Job) -> None:
    """Read the input once with ParquetFile.read, which skips pyarrow.dataset.

    ``pq.read_table`` goes through ``pyarrow.dataset``, whose import also imports
    pandas (about 0.3 s here); ``ParquetFile`` does not.
    """
    import pyarrow.parquet as pq

    pq.ParquetFile(job.scores).read()


def run_floor_read_dict(job: Job) -> None:
    """Read as floor-read-pf does, string columns as dictionaries (integer codes)."""
    import pyarrow.parquet as pq

    pq.ParquetFile(job.scores, read_dictionary=STRING_COLUMNS).read()


def run_floor_io(job: Job) -> None:
    """The I/O lbnorm's contract asks of one scores file, and no other work.

    The file's sha256 (the manifest's provenance), its rows read (a Parquet
    file's row groups with the string columns as dictionaries, as ``lbnorm
    run`` reads; a CSV or JSON-lines file parsed by Arrow with the contract
    columns' types, Arrow's parser being lbnorm's), and the rows written back
    in input order with three more columns, zstd (the subtask table keeps input
    order). The hash runs beside the read, as no serial tool could beat. What a
    layout costs before any computing: ``layouts.py`` sets lbnorm's time on
    each layout against it.
    """
    import hashlib
    import threading

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    digest: list[str] = []

    def hash_file() -> None:
        with job.scores.open("rb") as handle:
            digest.append(hashlib.file_digest(handle, "sha256").hexdigest())

    hasher = threading.Thread(target=hash_file)
    hasher.start()
    writer: pq.ParquetWriter | None = None
    for part in _floor_parts(job.scores):
        scores = part.column("raw_score")
        part = part.append_column("lower_bound", scores)
        part = part.append_column("normalized_score", scores)
        part = part.append_column("is_clipped", pc.is_nan(scores))  # (a dummy;
        # pa.array of numpy, or a Python scalar, would import pandas: lbnorm does not)
        if writer is None:
            writer = pq.ParquetWriter(
                job.out / SUBTASKS_FILE, part.schema, compression="zstd"
            )
        writer.write_table(part, row_group_size=part.num_rows)
    if writer is not None:
        writer.close()
    hasher.join()


def _floor_parts(path: Path) -> Iterator[pa.Table]:
    """A scores file's rows as ``lbnorm run`` reads them, in parts of at most 1M rows."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        source = pq.ParquetFile(path, read_dictionary=STRING_COLUMNS)
        for index in range(source.num_row_groups):
            yield source.read_row_group(index)
        return
    types = {name: pa.string() for name in STRING_COLUMNS}
    types |= {"chat_template": pa.bool_(), "raw_score": pa.float64()}
    types |= {"stderr": pa.float64(), "n_samples": pa.int64()}
    if path.suffix == ".csv":
        table = pa_csv.read_csv(
            path, convert_options=pa_csv.ConvertOptions(column_types=types)
        )
    else:
        schema = pa.schema(list(types.items()))
        table = pa_json.read_json(
            path, parse_options=pa_json.ParseOptions(explicit_schema=schema)
        )
    for start in range(0, table.num_rows, 1 << 20):
        yield table.slice(start, 1 << 20)


def run_floor_import(job: Job) -> None:
    """Start Python and import pyarrow.parquet and numpy; no work."""
    import numpy  # noqa: F401
    import pyarrow.parquet  # noqa: F401


Competitor = Callable[[Job], None]

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
    "floor-io": run_floor_io,
}
ALL: dict[str, Competitor] = {**COMPETITORS, **FLOORS}


def main(argv: list[str] | None = None) -> int:
    """``peers.py NAME SCORES SUITE OUT [...]``: run one competitor or floor."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("name", choices=list(ALL))
    parser.add_argument("scores", type=Path)
    parser.add_argument("suite", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--tables", type=int, choices=(2, 3), default=3)
    parser.add_argument("--metadata", type=Path)
    parser.add_argument("--input", choices=("scores", "samples"), default="scores")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    job = Job(
        scores=args.scores,
        suite=load_bounds(args.suite),
        out=args.out,
        tables=args.tables,
        metadata=args.metadata,
        kind=args.input,
    )
    ALL[args.name](job)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
