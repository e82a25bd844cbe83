"""Every benchmark of the speed issue from one command, ending in one targets table.

``python benchmarks_perf/all.py`` runs, in this order (each a part; ``--only``
picks some, e.g. ``--only real,L``):

- ``check``: ``check_peers.py`` on the real size, the golden files, a sample table,
  XS, S40 and S40C (S40's rows with ``model`` a pandas categorical; DuckDB and
  polars, three tables and two): the peers compute what lbnorm does, or the
  timings mean nothing;
- ``real``: the bundled demo (4,576 real models x 40 subtasks), plain
  ``lbnorm run --out OUT`` against DuckDB and polars doing the same job
  (``run.py``), three tables and two;
- ``M``: 50,000 variants x 60 subtasks (3M rows), same competitors (``run.py``);
- ``L``: L40, 500,000 variants x 40 subtasks of the real v2 suite (20M rows),
  lbnorm's default (three tables) and ``--no-subtasks`` against peers writing the
  same tables (``run.py``);
- ``L-cat``: L40C, L40's rows written as pandas writes a categorical ``model``
  (every 1M-row row group's dictionary holds all 500,000 names), measured as L;
- ``ooc``: out of core, 200M rows in ten Parquet parts, 2M variants x 100 subtasks
  and 5M variants x 40, ``lbnorm --no-subtasks`` against DuckDB (``outofcore.py``);
- ``ooc-cat``: OOC40C, OOC40's parts each written as pandas writes a categorical
  ``model``, measured as OOC40;
- ``samples``: per-sample aggregation at ~100M rows against DuckDB (``samples.py``);
- ``tree``: 4,576 real-size results files against the read-and-parse floor, on
  both cores and on one (``tree.py``);
- ``layouts``: one 3M-row leaderboard (M40: 75,000 variants x 40 subtasks) as
  grouped plain strings, a pandas categorical (1M- and 250k-row row groups),
  shuffled rows, reverse suite order in 250k-row row groups, one CSV and one
  JSONL file: ``lbnorm run FILE`` against DuckDB on each file (``layouts.py``);
- ``L100`` (not in the default set): the old L, 200,000 x 100 (20M rows).

Every ratio is taken within one part's interleaved rounds (lbnorm against the
faster of DuckDB and polars in the same rounds). The last thing printed is the
targets table: each target of the issue, the measured value and whether it
holds. ``--quick`` runs small stand-ins (S for M, S40 for L, S40C for L-cat,
2M-row parts, 50-model samples, 300 files) for one round: a smoke test of a few minutes whose
ratios say nothing about the targets.

Runs ``python -m lbnorm`` of this interpreter: install the checkout you mean to
measure into it (``pip install -e .``); the header names lbnorm's commit and
location and the versions of DuckDB, polars, pyarrow and numpy. Usage::

    python benchmarks_perf/all.py                  # ~30-40 min on 2 vCPUs, ~15 GB in .data/ with the outputs
    python benchmarks_perf/all.py --quick          # about a minute
    python benchmarks_perf/all.py --only real,L --repeats 5
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import layouts
import outofcore
import run
import samples
import tree
from measure import DATA_DIR, HERE, REPO, RSS_LIMIT_MB, environment, lbnorm_info

PARTS = [
    "check", "real", "M", "L", "L-cat", "layouts", "ooc", "ooc-cat", "samples",
    "tree", "L100",
]  # fmt: skip
IN_MEMORY = ("real", "M", "L", "L-cat", "L100")
"""The parts measured by ``run.py``."""
OOC_PARTS = {"ooc": outofcore.SHAPES, "ooc-cat": outofcore.CATEGORICAL_SHAPES}
"""The parts measured by ``outofcore.py``, and their shapes."""
DEFAULT_PARTS = PARTS[:-1]


@dataclass(frozen=True)
class Scale:
    """What each part runs on: the full sizes, or the quick stand-ins."""

    sizes: dict[str, str]  # part -> run.py size
    samples: int  # models in the sample table
    tree: int  # results files


FULL = Scale(
    {"real": "real", "M": "M", "L": "L40", "L-cat": "L40C", "L100": "L",
     "layouts": "M40"},
    4_576, 4_576,
)  # fmt: skip
QUICK = Scale(
    {"real": "real", "M": "S", "L": "S40", "L-cat": "S40C", "L100": "XS",
     "layouts": "S40"},
    50, 300,
)  # fmt: skip
PEERS = ["lbnorm", "duckdb", "polars"]
GIB = 1024  # MiB


@dataclass(frozen=True)
class Target:
    """One row of the targets table."""

    target: str
    lbnorm: str
    peer: str
    measured: float
    goal: str  # "<= 1.0", "< 2 GiB", ...
    limit: float
    unit: str = "x"

    @property
    def holds(self) -> str:
        """yes, no, or - when not measured."""
        if self.measured != self.measured:
            return "-"
        strict = self.goal.startswith("<") and not self.goal.startswith("<=")
        met = self.measured < self.limit if strict else self.measured <= self.limit
        return "**yes**" if met else "no"

    def row(self) -> str:
        """The Markdown row."""
        value = (
            "-" if self.measured != self.measured else f"{self.measured:.2f}{self.unit}"
        )
        return f"| {self.target} | {self.lbnorm} | {self.peer} | {value} | {self.goal} | {self.holds} |"


def _time(s: Any) -> str:
    return "-" if s is None or not s.ok else f"{s.median:.2f} s"


def size_targets(results: dict[str, run.SizeResult], scale: Scale) -> list[Target]:
    """The in-memory targets: real, M, L (three tables and two), L categorical."""
    out = []
    rows = [
        ("real", "real", 3, "real size (4,576 models x 40 subtasks), three tables", 1.0),
        ("M", scale.sizes["M"], 3, "M (3M rows), three tables", 1.0),
        ("L", scale.sizes["L"], 3, "L (20M rows: 500,000 x 40), three tables, default options", 0.8),
        ("L", scale.sizes["L"], 2, "L `--no-subtasks` vs peers writing the same two tables", 0.8),
        ("L-cat", scale.sizes["L-cat"], 3, "L categorical (20M rows, `model` a pandas categorical), three tables, default options", 0.8),
    ]  # fmt: skip
    for part, size, tables, text, limit in rows:
        result = results.get(size)
        if result is None:
            out.append(
                Target(f"{text} [{size}]", "-", "-", float("nan"), f"<= {limit}", limit)
            )
            continue
        peer, median = result.best_peer(tables)
        lbnorm = result.samples.get(run.label("lbnorm", tables))
        out.append(
            Target(
                f"{text} [{size}]" if size != part else text,
                _time(lbnorm),
                f"{peer} {median:.2f} s",
                result.ratio(tables),
                f"<= {limit}",
                limit,
            )
        )
    return out


def ooc_targets(results: dict[str, outofcore.ShapeResult]) -> list[Target]:
    """Out of core: peak RSS and time against DuckDB, per shape (or its stand-in)."""
    out = []
    for shape, label in (
        ("OOC100", "out of core, 200M rows as 2M variants x 100"),
        ("OOC40", "out of core, 200M rows as 5M variants x 40"),
        ("OOC40C", "out of core categorical, 200M rows as 5M variants x 40"),
    ):
        names = (shape, outofcore.QUICK_SHAPES[shape])
        found = [r for name, r in results.items() if name in names]
        if not found:
            out += [
                Target(
                    f"{label}: peak RSS", "-", "-", float("nan"), "< 2 GiB", 2, " GiB"
                ),
                Target(
                    f"{label}: time / DuckDB", "-", "-", float("nan"), "<= 1.0", 1.0
                ),
            ]
            continue
        result = found[0]
        tag = "" if result.shape == shape else f" [{result.shape}]"
        lbnorm, duckdb = result.lbnorm, result.duckdb
        rss = lbnorm.max_rss_mb / GIB if lbnorm.ok else float("nan")
        out += [
            Target(
                f"{label}{tag}: peak RSS (`--no-subtasks`)",
                f"{lbnorm.max_rss_mb:,.0f} MiB" if lbnorm.ok else lbnorm.error or "-",
                f"DuckDB {duckdb.max_rss_mb:,.0f} MiB" if duckdb.ok else "-",
                rss,
                "< 2 GiB",
                2.0,
                " GiB",
            ),
            Target(
                f"{label}{tag}: time / DuckDB (two tables)",
                _time(lbnorm),
                f"DuckDB {_time(duckdb)}",
                lbnorm.median / duckdb.median,
                "<= 1.0",
                1.0,
            ),
        ]
    return out


def flatness(
    sizes: dict[str, run.SizeResult],
    shapes: dict[str, outofcore.ShapeResult],
    scale: Scale,
) -> list[Target]:
    """Time per row of ``lbnorm --no-subtasks`` from M to L to 200M; and M to L by default.

    The peer column gives DuckDB's own time per row over the same runs (the same
    tables): what a fixed start-up does to the smallest size, for comparison.
    """
    out = []
    for tables, text in ((2, "`--no-subtasks`"), (3, "default, three tables")):
        per_row: dict[str, float] = {}
        peer_per_row: dict[str, float] = {}
        for part in ("M", "L"):
            result = sizes.get(scale.sizes[part])
            if result is None:
                continue
            for name, into in (("lbnorm", per_row), ("duckdb", peer_per_row)):
                s = result.samples.get(run.label(name, tables))
                if s is not None and s.ok:
                    into[part] = s.median / result.rows * 1e9
        if tables == 2:
            grouped = {
                *outofcore.SHAPES,
                *map(outofcore.QUICK_SHAPES.get, outofcore.SHAPES),
            }
            for name, shape in shapes.items():
                if name not in grouped:  # the time per row of the grouped layout
                    continue
                if shape.lbnorm.ok:
                    per_row[name] = shape.lbnorm.median / shape.rows * 1e9
                if shape.duckdb.ok:
                    peer_per_row[name] = shape.duckdb.median / shape.rows * 1e9
        expected = 2 + (len(outofcore.SHAPES) if tables == 2 else 0)
        spread, steps = _spread(per_row, expected)
        peer_spread, peer_steps = _spread(peer_per_row, expected)
        scope = "M -> L -> 200M" if tables == 2 else "M -> L (200M runs two tables)"
        peer = "-" if not peer_per_row else f"DuckDB {peer_steps} ({peer_spread:.2f}x)"
        out.append(
            Target(
                f"time per row flat, {scope}, {text}: slowest / fastest",
                steps,
                peer,
                spread,
                "<= 1.5",
                1.5,
            )
        )
    return out


def _spread(per_row: dict[str, float], expected: int) -> tuple[float, str]:
    """Slowest / fastest time per row (NaN unless every size ran), and the steps."""
    spread = (
        max(per_row.values()) / min(per_row.values())
        if len(per_row) > 1
        else float("nan")
    )
    steps = " -> ".join(f"{k} {v:,.0f}" for k, v in per_row.items()) or "-"
    if len(per_row) < expected:
        return float("nan"), f"{steps} ns/row (spread {spread:.2f}; not every size ran)"
    return spread, f"{steps} ns/row"


def layout_targets(result: layouts.LayoutResult | None) -> list[Target]:
    """Issue 29's layout targets: no cliff between Parquet layouts, each at most DuckDB's time."""
    if result is None:
        return [
            Target(text, "-", "-", float("nan"), goal, limit)
            for text, goal, limit in (
                ("layouts: slowest Parquet layout / fastest", "<= 1.25", 1.25),
                ("layouts: slowest Parquet layout / DuckDB on it", "<= 1.0", 1.0),
                ("layouts: CSV / DuckDB read_csv", "<= 1.0", 1.0),
                ("layouts: JSONL / DuckDB read_json", "<= 1.0", 1.0),
            )
        ]
    tag = f" [{result.size}]"

    def cell(layout: str, name: str) -> str:
        return f"{layout} {_time(result.get(layout, name))}"

    def text_peer(layout: str) -> str:
        # the floor with lbnorm's parser: how far the row can come down, and
        # how far lbnorm is from it
        return (
            f"DuckDB {cell(layout, 'duckdb')}; the I/O floor (Arrow's parse, the"
            f" hash, the rows written) {cell(layout, layouts.FLOOR)}:"
            f" {result.ratio(layout, layouts.FLOOR):.2f}x DuckDB, lbnorm"
            f" {result.over_floor(layout):.2f}x the floor"
        )

    medians = {
        layout: s.median
        for layout in layouts.PARQUET_LAYOUTS
        if (s := result.get(layout, "lbnorm")) is not None and s.ok
    }
    slow = max(medians, key=medians.__getitem__, default="grouped")
    fast = min(medians, key=medians.__getitem__, default="grouped")
    ratios = {layout: result.ratio(layout) for layout in layouts.PARQUET_LAYOUTS}
    worst = max(ratios, key=lambda k: -1.0 if ratios[k] != ratios[k] else ratios[k])
    return [
        Target(
            "layouts: slowest Parquet layout / fastest" + tag,
            cell(slow, "lbnorm"),
            f"fastest: {cell(fast, 'lbnorm')}; the same spread of DuckDB"
            f" {result.spread('duckdb'):.2f}, of the I/O floor"
            f" {result.spread(layouts.FLOOR):.2f}",
            result.spread(),
            "<= 1.25",
            1.25,
        ),
        Target(
            "layouts: slowest Parquet layout / DuckDB on it" + tag,
            cell(worst, "lbnorm"),
            f"DuckDB {cell(worst, 'duckdb')}",
            ratios[worst],
            "<= 1.0",
            1.0,
        ),
        Target(
            "layouts: CSV / DuckDB read_csv" + tag,
            cell("csv", "lbnorm"),
            text_peer("csv"),
            result.ratio("csv"),
            "<= 1.0",
            1.0,
        ),
        Target(
            "layouts: JSONL / DuckDB read_json" + tag,
            cell("jsonl", "lbnorm"),
            text_peer("jsonl"),
            result.ratio("jsonl"),
            "<= 1.0",
            1.0,
        ),
    ]


def targets_table(targets: list[Target]) -> str:
    """The Markdown targets table."""
    lines = [
        "| target | lbnorm | faster peer (same rounds) | measured | goal | holds |",
        "|---|---:|---:|---:|---|---|",
    ]
    return "\n".join(lines + [t.row() for t in targets])


def main(argv: list[str] | None = None) -> int:
    """Run the parts; print every table, then the targets table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default=",".join(DEFAULT_PARTS), help=f"of {PARTS}")
    parser.add_argument("--quick", action="store_true", help="small stand-ins, 1 round")
    parser.add_argument(
        "--repeats", type=int, default=3, help="rounds of L, samples, tree"
    )
    parser.add_argument(
        "--small-repeats", type=int, default=7, help="rounds of real, M"
    )
    parser.add_argument("--ooc-repeats", type=int, default=1)
    parser.add_argument("--rss-limit-gb", type=float, default=RSS_LIMIT_MB / 1024)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--json", type=Path, help="write every sample here")
    args = parser.parse_args(argv)
    parts = args.only.split(",")
    if unknown := [p for p in parts if p not in PARTS]:
        parser.error(f"unknown parts {unknown}; choose from {PARTS}")
    info = lbnorm_info()
    if info.location is None:
        print(
            f"lbnorm is not importable by {sys.executable}.\n"
            f"Hint: pip install -e {REPO} (into this interpreter's environment).",
            file=sys.stderr,
        )
        return 2
    header = environment(info)
    if not info.is_this_checkout:
        header += (
            f"\nWARNING: `python -m lbnorm` runs {info.location}, not {REPO / 'src'}; "
            f"pip install -e {REPO} to measure this checkout."
        )
    print(header, flush=True)
    scale = QUICK if args.quick else FULL
    repeats = 1 if args.quick else args.repeats
    small = 1 if args.quick else args.small_repeats
    rss = args.rss_limit_gb * GIB
    reports: list[str] = []
    payload: dict[str, Any] = {"environment": header, "quick": args.quick}
    sizes: dict[str, run.SizeResult] = {}
    shapes: dict[str, outofcore.ShapeResult] = {}
    failed: list[str] = []

    def report(title: str, text: str) -> None:
        reports.append(f"## {title}\n\n{text}")
        print(f"\n## {title}\n\n{text}\n", flush=True)

    if "check" in parts:
        found = subprocess.run(
            [sys.executable, str(HERE / "check_peers.py"), "--sizes",
             "real,samples,XS,S40C" if args.quick else "real,golden,samples,XS,S40,S40C",
             "--peers", "duckdb,polars", "--data", str(args.data)],
            check=False, capture_output=True, text=True,
        )  # fmt: skip
        report(
            "check_peers.py",
            found.stdout.strip()[-3000:] + found.stderr.strip()[-1000:],
        )
        if found.returncode != 0:
            failed.append("check_peers.py found mismatches")
    if any(p in parts for p in IN_MEMORY):
        run.warm_up(PEERS, args.data, 600.0)
    for part in IN_MEMORY:
        if part not in parts:
            continue
        size = scale.sizes[part]
        result = run.benchmark_size(
            size, PEERS, [3, 2],
            repeats=small if part in ("real", "M") else repeats,
            data=args.data, timeout=1800.0, rss_limit_mb=rss,
        )  # fmt: skip
        sizes[size] = result
        report(f"{part}: run.py --sizes {size}", run.markdown(result))
    layout_result = None
    if "layouts" in parts:
        layout_result = layouts.benchmark_layouts(
            scale.sizes["layouts"], repeats=repeats, data=args.data, rss_limit_mb=rss
        )
        report(
            f"layouts: layouts.py --size {scale.sizes['layouts']}",
            layouts.markdown(layout_result),
        )
    ooc_shapes = [
        s for part, group in OOC_PARTS.items() if part in parts for s in group
    ]
    for shape in ooc_shapes:
        name = outofcore.QUICK_SHAPES[shape] if args.quick else shape
        result_ooc = outofcore.benchmark_shape(
            name, repeats=1 if args.quick else args.ooc_repeats, data=args.data,
            rss_limit_mb=rss,
        )  # fmt: skip
        shapes[name] = result_ooc
        if "MISMATCH" in result_ooc.check:
            failed.append(f"{name}: {result_ooc.check}")
        part = "ooc-cat" if shape in outofcore.CATEGORICAL_SHAPES else "ooc"
        report(f"{part}: outofcore.py --shapes {name}", outofcore.markdown(result_ooc))
    samples_result = None
    if "samples" in parts:
        samples_result = samples.benchmark_samples(
            int(scale.samples), repeats=repeats, data=args.data, rss_limit_mb=rss
        )
        if "MISMATCH" in samples_result.check:
            failed.append(f"samples: {samples_result.check}")
        report(
            f"samples: samples.py --models {scale.samples}",
            samples.markdown(samples_result),
        )
    tree_result = None
    if "tree" in parts:
        tree_result = tree.benchmark_tree(
            int(scale.tree), repeats=repeats, data=args.data
        )
        report(f"tree: tree.py --files {scale.tree}", tree.markdown(tree_result))

    targets = (
        size_targets(sizes, scale) + layout_targets(layout_result) + ooc_targets(shapes)
    )
    sample_label = (
        f"per-sample aggregation at ~100M rows ({scale.samples:,} models) / DuckDB"
    )
    if samples_result is not None and all(
        s.ok for s in samples_result.samples.values()
    ):
        targets.append(
            Target(
                sample_label,
                _time(samples_result.samples["lbnorm"]),
                f"DuckDB {_time(samples_result.samples['duckdb'])}",
                samples_result.ratio(),
                "<= 1.0",
                1.0,
            )
        )
    else:
        targets.append(Target(sample_label, "-", "-", float("nan"), "<= 1.0", 1.0))
    for name, floor, cores in (
        ("lbnorm", "floor-2cores", "2 cores"),
        ("lbnorm-1core", "floor", "1 core"),
    ):
        text = f"results tree ({scale.tree:,} files), {cores}: lbnorm / read-and-parse floor"
        if (
            tree_result is not None
            and name in tree_result.samples
            and tree_result.samples[name].ok
        ):
            json_floor = tree.JSON_FLOORS[name]  # issue 4's floor, beside
            targets.append(
                Target(
                    text,
                    _time(tree_result.samples[name]),
                    f"{floor} {_time(tree_result.samples.get(floor))}; "
                    f"issue 4's json.loads floor {_time(tree_result.samples.get(json_floor))}: "
                    f"{tree_result.ratio(name, tree.JSON_FLOORS):.2f}x",
                    tree_result.ratio(name),
                    "<= 1.5",
                    1.5,
                )
            )
        else:
            targets.append(Target(text, "-", "-", float("nan"), "<= 1.5", 1.5))
    targets += flatness(sizes, shapes, scale)

    table = targets_table(targets)
    print("\n\n# All results\n")
    print(header + "\n")
    print("\n\n".join(reports))
    print(
        "\n## Targets (issues 15 and 29)"
        + (" -- QUICK: small stand-ins, not the targets' sizes" if args.quick else "")
        + "\n"
    )
    print(table)
    for problem in failed:
        print(f"\nFAILED: {problem}")
    if args.json:
        payload["sizes"] = {k: v.as_dict() for k, v in sizes.items()}
        payload["ooc"] = {k: v.as_dict() for k, v in shapes.items()}
        payload["samples"] = samples_result.as_dict() if samples_result else None
        payload["tree"] = tree_result.as_dict() if tree_result else None
        payload["layouts"] = layout_result.as_dict() if layout_result else None
        payload["targets"] = [
            {
                "target": t.target,
                "measured": t.measured,
                "goal": t.goal,
                "holds": t.holds,
            }
            for t in targets
        ]
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
