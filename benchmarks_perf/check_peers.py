"""Check that every competitor in peers.py computes the same numbers.

``python benchmarks_perf/check_peers.py --sizes XS,S`` runs each competitor as its
own process (``peers.py NAME ...``) on the generated data and compares their
outputs with each other: benchmark-level raw and normalized values and leaderboard
columns and averages to 1e-9, ranks exactly (a rank may differ only between
variants whose averages are within 1e-9 of each other, a tie that summation order
can break either way). With ``--golden`` (the default) it also builds a long-format
table from the eight real results files in ``shared/reference/openllm/golden`` and
checks every competitor against ``expected.csv`` under the openllm-v2 suite.
Exits 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from generate import DATA_DIR, SCHEMA, ensure_data
from peers import BENCH_FILE, BOARD_FILE, COMPETITORS, KEYS, load_bounds

HERE = Path(__file__).resolve().parent
TOLERANCE = 1e-9
GOLDEN_DIR = Path("/work/shared/reference/openllm/golden")
V2_SUITE = HERE.parent / "src" / "lbnorm" / "suite_files" / "openllm-v2.toml"
# expected.csv column prefix -> openllm-v2 benchmark name
GOLDEN_COLUMNS = {
    "ifeval": "IFEval",
    "bbh": "BBH",
    "math": "MATH Lvl 5",
    "gpqa": "GPQA",
    "musr": "MUSR",
    "mmlu_pro": "MMLU-PRO",
}


def run_peer(name: str, scores: Path, suite: Path, out: Path) -> float:
    """Run one competitor as a process; return its wall time in seconds."""
    t0 = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            str(HERE / "peers.py"),
            name,
            str(scores),
            str(suite),
            str(out),
        ],
        check=True,
    )
    return time.perf_counter() - t0


def load_outputs(out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read a competitor's two tables, sorted by their keys, with plain dtypes."""
    bench = pq.read_table(out / BENCH_FILE).to_pandas()
    board = pq.read_table(out / BOARD_FILE).to_pandas()
    for frame in (bench, board):
        for key in ["model", "precision", "revision", "benchmark"]:
            if key in frame:
                frame[key] = frame[key].astype(str)
        frame["chat_template"] = frame["chat_template"].astype(bool)
    bench = bench.sort_values([*KEYS, "benchmark"], ignore_index=True)
    board = board.sort_values(KEYS, ignore_index=True)
    return bench, board


def compare(
    ref_name: str,
    ref: tuple[pd.DataFrame, pd.DataFrame],
    name: str,
    other: tuple[pd.DataFrame, pd.DataFrame],
    benchmarks: list[str],
) -> list[str]:
    """Compare two competitors' outputs; return the problems found."""
    problems: list[str] = []
    (bench_a, board_a), (bench_b, board_b) = ref, other
    label = f"{name} vs {ref_name}"
    for what, a, b, keys in (
        ("benchmarks", bench_a, bench_b, [*KEYS, "benchmark"]),
        ("leaderboard", board_a, board_b, KEYS),
    ):
        if len(a) != len(b) or not a[keys].equals(b[keys]):
            problems.append(f"{label}: {what} rows/keys differ ({len(a)} vs {len(b)})")
            return problems
    for column in ["raw", "normalized"]:
        diff = np.abs(bench_a[column].to_numpy() - bench_b[column].to_numpy())
        if not diff.max() <= TOLERANCE:
            problems.append(f"{label}: benchmarks.{column} max diff {diff.max():.3g}")
    for column in [*benchmarks, "average"]:
        diff = np.abs(board_a[column].to_numpy() - board_b[column].to_numpy())
        if not diff.max() <= TOLERANCE:
            problems.append(f"{label}: leaderboard.{column} max diff {diff.max():.3g}")
    rank_a = board_a["rank"].to_numpy(np.int64)
    rank_b = board_b["rank"].to_numpy(np.int64)
    if (bad := np.flatnonzero(rank_a != rank_b)).size:
        # A differing rank is acceptable only inside a near-tie of averages.
        average = board_a["average"].to_numpy()
        near = [
            np.count_nonzero(np.abs(average - average[i]) <= TOLERANCE) > 1 for i in bad
        ]
        if not all(near):
            problems.append(f"{label}: {bad.size} ranks differ outside near-ties")
        else:
            print(f"  note: {label}: {bad.size} ranks differ inside near-ties")
    return problems


def check_size(size: str, names: list[str], work: Path) -> list[str]:
    """Run ``names`` on generated data of ``size`` and compare them all."""
    data = ensure_data(size)
    scores, suite = data / "scores.parquet", data / "suite.toml"
    benchmarks = load_bounds(suite).benchmarks
    outputs = {}
    for name in names:
        seconds = run_peer(name, scores, suite, work / size / name)
        outputs[name] = load_outputs(work / size / name)
        print(f"  {size} {name}: {seconds:.2f} s")
    problems = _sanity(size, outputs[names[0]], data, benchmarks)
    for name in names[1:]:
        problems += compare(
            names[0], outputs[names[0]], name, outputs[name], benchmarks
        )
    return problems


def _sanity(
    size: str, ref: tuple[pd.DataFrame, pd.DataFrame], data: Path, benchmarks: list[str]
) -> list[str]:
    """Row counts, ranges and rank properties of the reference output."""
    meta = json.loads((data / "meta.json").read_text())
    bench, board = ref
    problems = []
    if len(board) != meta["variants"] or len(bench) != meta["variants"] * len(
        benchmarks
    ):
        problems.append(f"{size}: expected {meta['variants']} variants")
    if not bench["normalized"].between(0, 100).all():
        problems.append(f"{size}: normalized outside [0, 100]")
    if (bench["normalized"] == 0).mean() == 0:
        problems.append(f"{size}: no clipped benchmark score (data too easy)")
    ranks = board.sort_values("rank")["rank"].to_numpy()
    expected = pd.Series(-board["average"]).rank(method="min").to_numpy(np.int64)
    if ranks[0] != 1 or not np.array_equal(board["rank"].to_numpy(np.int64), expected):
        problems.append(f"{size}: ranks are not competition ranks of -average")
    return problems


def golden_scores(path: Path) -> pd.DataFrame:
    """Build a long-format scores table from the golden results-file excerpts."""
    expected = pd.read_csv(GOLDEN_DIR / "expected.csv")
    with V2_SUITE.open("rb") as fh:
        suite = tomllib.load(fh)
    rows = []
    for record in expected.itertuples(index=False):
        results = json.loads((GOLDEN_DIR / str(record.results_file)).read_text())[
            "results"
        ]
        for bench in suite["benchmarks"]:
            for sub in bench["subtasks"]:
                rows.append(
                    {
                        "model": record.model,
                        "precision": record.precision,
                        "revision": record.revision,
                        "chat_template": False,
                        "benchmark": bench["name"],
                        "subtask": sub["name"],
                        "metric": sub["metric"],
                        "raw_score": float(results[sub["task"]][sub["metric"]]),
                        "stderr": None,
                        "n_samples": sub.get("n_samples"),
                    }
                )
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    pq.write_table(table, path)
    return expected


def check_golden(names: list[str], work: Path) -> list[str]:
    """Run ``names`` on the golden files and compare them to expected.csv."""
    work.mkdir(parents=True, exist_ok=True)
    scores = work / "golden.parquet"
    expected = golden_scores(scores).sort_values(
        ["model", "precision", "revision"], ignore_index=True
    )
    problems: list[str] = []
    for name in names:
        before = len(problems)
        run_peer(name, scores, V2_SUITE, work / name)
        bench, board = load_outputs(work / name)
        for prefix, benchmark in GOLDEN_COLUMNS.items():
            got = bench[bench["benchmark"] == benchmark]
            for kind, column in (("raw", "raw"), ("normalized", "normalized")):
                diff = np.abs(
                    got[column].to_numpy() - expected[f"{prefix}_{kind}"].to_numpy()
                )
                if not diff.max() <= TOLERANCE:
                    problems.append(
                        f"golden {name}: {benchmark} {kind} max diff {diff.max():.3g}"
                    )
        diff = np.abs(board["average"].to_numpy() - expected["average"].to_numpy())
        if not diff.max() <= TOLERANCE:
            problems.append(f"golden {name}: average max diff {diff.max():.3g}")
        print(f"  golden {name}: {'ok' if len(problems) == before else 'MISMATCH'}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; exit 1 on any mismatch."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="XS,S")
    parser.add_argument("--peers", default=",".join(COMPETITORS))
    parser.add_argument("--no-golden", dest="golden", action="store_false")
    args = parser.parse_args(argv)
    names = args.peers.split(",")
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with tempfile.TemporaryDirectory(dir=DATA_DIR, prefix="check-") as tmp:
        work = Path(tmp)
        if args.golden and GOLDEN_DIR.exists():
            problems += check_golden(names, work / "golden")
        for size in args.sizes.split(","):
            problems += check_size(size, names, work)
    for problem in problems:
        print("MISMATCH", problem)
    print("all peers agree" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
