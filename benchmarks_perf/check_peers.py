"""Check that every peer writes the tables lbnorm writes, to 1e-9.

``python benchmarks_perf/check_peers.py [--sizes real,XS,S] [--tables 3,2]`` runs
``lbnorm run`` (the installed lbnorm, ``python -m lbnorm``) and each peer of
``peers.py`` as its own process on the same data, then compares every table of
every peer with lbnorm's:

- the columns: same names in the same order, same types once dictionary and large
  strings count as strings;
- the rows: joined on their keys (variant keys, plus ``benchmark`` and
  ``subtask``), none unmatched on either side and no key twice (lbnorm sorts its
  subtask table benchmark-major, then by variant, then subtask; peers keep their
  own order, so rows are joined, never compared by position);
- the values: floats to 1e-9 (null against null), everything else exactly; a rank
  may differ only inside a near-tie (averages within 1e-9 of another variant's).

Three tables by default (``lbnorm run``'s default) and two with ``--tables 2``
(``lbnorm run --no-subtasks`` against peers writing two). Sizes: ``real`` (the
bundled demo, 4,576 real models x 40 subtasks, as ``lbnorm run --out OUT`` runs
it with its metadata; the peers get ``--metadata``), the generated shapes of
``generate.py``, ``golden`` (the eight real results files of
``tests/fixtures/golden``, also checked against ``expected.csv``, the published
leaderboard's numbers) and ``samples`` (a small per-sample table, aggregated first).
The default set includes S40C (S40's rows with ``model`` a pandas categorical, every
row group's dictionary holding every name): a peer reading the categorical column
must compute the same tables. Exits 1 on any mismatch.

``check_peers.py --compare REF OTHER [--tables N]`` compares two output
directories only (the other benchmarks call it on their first round); the join
runs in DuckDB, so it scales to the 200M-row outputs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from generate import SCHEMA, ensure_data
from measure import DATA_DIR, demo_paths, lbnorm_command, peer_command
from peers import BENCH_FILE, BOARD_FILE, COMPETITORS, KEYS, SUBTASKS_FILE

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TOLERANCE = 1e-9
GOLDEN_DIR = REPO / "tests" / "fixtures" / "golden"
# expected.csv column prefix -> openllm-v2 benchmark name
GOLDEN_COLUMNS = {
    "ifeval": "IFEval",
    "bbh": "BBH",
    "math": "MATH Lvl 5",
    "gpqa": "GPQA",
    "musr": "MUSR",
    "mmlu_pro": "MMLU-PRO",
}
TABLE_KEYS = {
    SUBTASKS_FILE: [*KEYS, "benchmark", "subtask"],
    BENCH_FILE: [*KEYS, "benchmark"],
    BOARD_FILE: KEYS,
}


def tables_of(count: int) -> list[str]:
    """The output files of a run writing ``count`` tables."""
    return [SUBTASKS_FILE, BENCH_FILE, BOARD_FILE][3 - count :]


def _plain(type_: pa.DataType) -> pa.DataType:
    """A type with dictionary and large strings read as plain strings."""
    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    return pa.string() if type_ == pa.large_string() else type_


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


#: Columns only lbnorm writes: the standard errors (the peers compute the scores, not
#: their uncertainty) and ``type_code``, the metadata's own spelling of ``type`` (lbnorm
#: puts ``type`` in words; a peer keeps the spelling, so its ``type`` is compared with
#: lbnorm's ``type_code``). A peer therefore does less work than lbnorm, never more.
LBNORM_ONLY = frozenset(
    {"stderr", "raw_stderr", "n_stderr_estimated", "has_other_sizes", "average_stderr"}
)


_NOT_COMPARED = (
    "(not compared: the standard-error columns only lbnorm writes; a peer's `type` is "
    "compared with lbnorm's `type_code`)"
)


def lbnorm_only(name: str) -> bool:
    """Whether a column of lbnorm's is one the peers do not write (:data:`LBNORM_ONLY`)."""
    return name in LBNORM_ONLY or name.endswith(" stderr") or name == "type_code"


def compare_table(ref: Path, other: Path, keys: list[str], label: str) -> list[str]:
    """Compare one table of two output directories; return the problems."""
    ref_schema, other_schema = pq.read_schema(ref), pq.read_schema(other)
    renamed = {}  # lbnorm's column -> the peer's column compared with it
    if "type_code" in ref_schema.names and "type_code" not in other_schema.names:
        renamed = {"type_code": "type"}
        ref_schema = ref_schema.remove(ref_schema.get_field_index("type"))
    skipped = [
        n for n in ref_schema.names if lbnorm_only(n) and n not in other_schema.names
    ]
    for name in skipped:
        if name not in renamed:
            ref_schema = ref_schema.remove(ref_schema.get_field_index(name))
    if renamed:
        position = ref_schema.get_field_index("type_code")
        ref_schema = ref_schema.remove(position).insert(
            position, ref_schema.field(position).with_name("type")
        )
    if ref_schema.names != other_schema.names:
        missing = [n for n in ref_schema.names if n not in other_schema.names]
        extra = [n for n in other_schema.names if n not in ref_schema.names]
        return [
            f"{label}: columns differ: missing {missing}, extra {extra}"
            + ("" if missing or extra else " (same names, other order)")
        ]
    problems = [
        f"{label}: column {f.name!r} is {_plain(g.type)}, lbnorm's is {_plain(f.type)}"
        for f, g in zip(ref_schema, other_schema, strict=True)
        if _plain(f.type) != _plain(g.type)
    ]
    con = duckdb.connect()
    replace = ' REPLACE ("type_code" AS "type")' if renamed else ""
    con.execute(f"CREATE VIEW a AS SELECT *{replace} FROM read_parquet('{ref}')")
    con.execute(f"CREATE VIEW b AS SELECT * FROM read_parquet('{other}')")
    on = " AND ".join(f"a.{_quoted(k)} = b.{_quoted(k)}" for k in keys)
    key_list = ", ".join(_quoted(k) for k in keys)
    counts = con.execute(
        f"""
        SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b),
               (SELECT count(*) FROM (SELECT DISTINCT {key_list} FROM a)),
               (SELECT count(*) FROM (SELECT DISTINCT {key_list} FROM b)),
               (SELECT count(*) FROM a JOIN b ON {on})
        """
    ).fetchone()
    assert counts is not None
    n_ref, n_other, distinct_ref, distinct_other, matched = counts
    if not n_ref == n_other == distinct_ref == distinct_other == matched:
        problems.append(
            f"{label}: rows differ: lbnorm {n_ref:,} ({distinct_ref:,} distinct keys), "
            f"peer {n_other:,} ({distinct_other:,}), {matched:,} matched on {keys}"
        )
        return problems
    checks = []
    for field in ref_schema:
        if field.name in keys or field.name == "rank":
            continue
        a, b = f"a.{_quoted(field.name)}", f"b.{_quoted(field.name)}"
        if pa.types.is_floating(field.type):
            a = f"CASE WHEN isnan({a}) THEN NULL ELSE {a} END"
            b = f"CASE WHEN isnan({b}) THEN NULL ELSE {b} END"
            checks.append((field.name, f"coalesce(max(abs({a} - {b})), 0)", "max diff"))
            checks.append(
                (
                    field.name,
                    f"count(*) FILTER (WHERE ({a} IS NULL) <> ({b} IS NULL))",
                    "nulls differ",
                )
            )
        else:
            checks.append(
                (
                    field.name,
                    f"count(*) FILTER (WHERE {a}::VARCHAR IS DISTINCT FROM {b}::VARCHAR)",
                    "values differ",
                )
            )
    if checks:
        values = con.execute(
            f"SELECT {', '.join(sql for _, sql, _ in checks)} FROM a JOIN b ON {on}"
        ).fetchone()
        assert values is not None
        for (name, _, what), value in zip(checks, values, strict=True):
            limit = TOLERANCE if what == "max diff" else 0
            if not value <= limit:
                problems.append(f"{label}: {name}: {what}: {value:.3g}")
    if "rank" in ref_schema.names:
        problems += _compare_ranks(con, on, label)
    return problems


def _compare_ranks(con: duckdb.DuckDBPyConnection, on: str, label: str) -> list[str]:
    """Ranks equal, except inside near-ties of the averages (lbnorm's as reference)."""
    row = con.execute(
        f"""
        WITH joined AS (
            SELECT a.average, a.rank AS ra, b.rank AS rb FROM a JOIN b ON {on}
        ), gaps AS (
            SELECT ra, rb, least(
                abs(average - lag(average) OVER (ORDER BY average)),
                abs(lead(average) OVER (ORDER BY average) - average)) AS gap
            FROM joined
        )
        SELECT count(*) FILTER (WHERE ra IS DISTINCT FROM rb AND NOT coalesce(gap <= {TOLERANCE}, false)),
               count(*) FILTER (WHERE ra IS DISTINCT FROM rb)
        FROM gaps
        """
    ).fetchone()
    assert row is not None
    outside, inside = row[0], row[1] - row[0]
    problems = []
    if outside:
        problems.append(f"{label}: {outside} ranks differ outside near-ties")
    if inside:
        print(f"  note: {label}: {inside} ranks differ inside near-ties")
    return problems


def compare_dirs(ref: Path, other: Path, tables: int, label: str) -> list[str]:
    """Compare the ``tables`` output tables of two directories."""
    problems = []
    for name in tables_of(tables):
        if not (other / name).exists():
            problems.append(f"{label}: no {name}")
            continue
        problems += compare_table(
            ref / name, other / name, TABLE_KEYS[name], f"{label} {name}"
        )
    return problems


@dataclass(frozen=True)
class Case:
    """One data set to check: lbnorm's inputs, the peers' inputs, which peers."""

    name: str
    inputs: list[str]  # lbnorm run's INPUTS and --suite ([] for the bundled demo)
    scores: Path
    suite: Path
    peers: list[str]
    extra: tuple[str, ...] = ()  # peers' --metadata / --input


def check_case(case: Case, tables: int, work: Path) -> list[str]:
    """Run lbnorm and the peers of one case; compare each peer with lbnorm."""
    ref = work / case.name / f"lbnorm-{tables}"
    subprocess.run(lbnorm_command(case.inputs, ref, tables=tables), check=True)
    problems = []
    for name in case.peers:
        out = work / case.name / f"{name}-{tables}"
        command = peer_command(
            name, case.scores, case.suite, out, tables=tables, extra=case.extra
        )
        subprocess.run(command, check=True)
        label = f"{case.name} {name} ({tables} tables)"
        found = compare_dirs(ref, out, tables, label)
        print(f"  {label}: {'ok' if not found else 'MISMATCH'}", flush=True)
        problems += found
    return problems


def make_case(name: str, names: list[str], work: Path, data: Path) -> Case:
    """The case of a size name: real, golden, samples or a generated shape."""
    demo, demo_metadata, v2_suite = demo_paths()
    big = [n for n in names if n not in ("loop", "pandas-apply")]
    if name == "real":  # `lbnorm run --out OUT`: the demo, with its metadata
        extra = ("--metadata", str(demo_metadata))
        return Case(name, [], demo, v2_suite, names, extra)
    if name == "golden":
        scores = work / "golden.parquet"
        golden_scores(scores, v2_suite)
        return Case(name, [str(scores)], scores, v2_suite, names)
    if name == "samples":
        scores = work / "samples.parquet"
        subprocess.run(
            [sys.executable, str(HERE / "samples.py"), "--models", "40",
             "--generate", str(scores)],
            check=True, capture_output=True,
        )  # fmt: skip
        peers = [n for n in names if n in ("duckdb", "polars")]
        return Case(
            name, [str(scores)], scores, v2_suite, peers, ("--input", "samples")
        )
    folder = ensure_data(name, data)
    scores, suite = folder / "scores.parquet", folder / "suite.toml"
    rows = json.loads((folder / "meta.json").read_text())["rows"]
    return Case(
        name,
        [str(scores), "--suite", str(suite)],
        scores,
        suite,
        names if rows <= 300_000 else big,
    )


def golden_scores(path: Path, suite_path: Path) -> None:
    """Build a long-format scores table from the golden results-file excerpts."""
    import pandas as pd

    expected = pd.read_csv(GOLDEN_DIR / "expected.csv")
    suite = tomllib.loads(suite_path.read_text())
    rows = []
    for record in expected.itertuples(index=False):
        document = json.loads((GOLDEN_DIR / str(record.results_file)).read_text())
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
                        "raw_score": float(document["results"][sub["task"]][sub["metric"]]),
                        "stderr": None,
                        "n_samples": sub.get("n_samples"),
                    }
                )  # fmt: skip
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)


def check_golden_expected(out: Path) -> list[str]:
    """lbnorm's benchmark table on the golden files equals expected.csv to 1e-9."""
    import pandas as pd

    expected = pd.read_csv(GOLDEN_DIR / "expected.csv")
    bench = pq.read_table(out / BENCH_FILE).to_pandas()
    problems = []
    for prefix, benchmark in GOLDEN_COLUMNS.items():
        got = bench[bench["benchmark"] == benchmark].astype({"model": str})
        merged = got.merge(expected, on="model", validate="one_to_one")
        for kind, column in (("raw", "raw_score"), ("normalized", "normalized_score")):
            gap = (merged[column] - merged[f"{prefix}_{kind}"]).abs().max()
            if len(merged) != len(expected) or not gap <= TOLERANCE:
                problems.append(f"golden lbnorm: {benchmark} {kind} max diff {gap:.3g}")
    print(f"  golden lbnorm vs expected.csv: {'ok' if not problems else 'MISMATCH'}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; exit 1 on any mismatch."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="real,golden,samples,XS,S40,S40C,S")
    parser.add_argument("--peers", default=",".join(COMPETITORS))
    parser.add_argument("--tables", default="3,2", help="3, 2 or 3,2")
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("REF", "OTHER"))
    args = parser.parse_args(argv)
    if args.compare:
        tables = int(args.tables.split(",")[0])
        ref, other = args.compare
        found = compare_dirs(ref, other, tables, other.name)
        for problem in found:
            print("MISMATCH", problem)
        if not found:
            print(f"check: {other} equals lbnorm's {ref} ({tables} tables, 1e-9)")
            print(_NOT_COMPARED)
        return 1 if found else 0
    names = args.peers.split(",")
    args.data.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with tempfile.TemporaryDirectory(dir=args.data, prefix="check-") as tmp:
        work = Path(tmp)
        cases = [
            make_case(name, names, work, args.data) for name in args.sizes.split(",")
        ]
        for tables in (int(t) for t in args.tables.split(",")):
            for case in cases:
                problems += check_case(case, tables, work)
                if case.name == "golden" and tables == 3:
                    problems += check_golden_expected(work / case.name / "lbnorm-3")
    for problem in problems:
        print("MISMATCH", problem)
    print(
        "all peers agree with lbnorm" if not problems else f"{len(problems)} problem(s)"
    )
    print(_NOT_COMPARED)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
