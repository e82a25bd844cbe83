"""`lbnorm run` loads no pandas (issue 10, point 2; issue 15: it costs more than the run).

Three checks, each in a fresh interpreter:

* the whole command, as a user runs it (the demo, a CSV and a Parquet input,
  ``--metadata``, ``--rank-within``, ``--exclude-flagged``, ``--report``, a run
  that spills its sums (``--sum-memory``); per-sample
  inputs: a harness samples tree, one with a results file that takes some of its
  subtasks, and a Parquet sample table): pandas never appears in ``sys.modules``;
  when it does, the test names the module that imported it;
* what ``run`` does after the engine (the metadata join, the summary, the
  flagged listing, the run report) with every import of pandas refused;
* why the run path converts through :mod:`lbnorm.core.arrow`: pyarrow's own
  conversions import pandas to probe for it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sample_rows import sample_rows

from lbnorm import run
from lbnorm.core.schemas import SAMPLES
from lbnorm.engines.metadata import annotate_table
from lbnorm.output.run_report import build_run_report, format_run_report
from lbnorm.readers.harness import subtask_columns
from lbnorm.readers.samples import SAMPLES_FILE
from lbnorm.suites import load_suite

pytestmark = pytest.mark.slow  # fresh interpreters

#: Runs the command line as `python -m lbnorm` does, then says whether pandas was loaded.
RUN_CLI = """\
import atexit, runpy, sys
sys.argv = ["lbnorm", *sys.argv[1:]]
# lbnorm's command line ends its process itself (no teardown) after running the
# atexit handlers: the modules loaded are listed from one
atexit.register(lambda: print(
    "loaded: " + ",".join(sorted(n for n in sys.modules if n.split(".")[0] == "pan" + "das"))
))
runpy.run_module("lbnorm", run_name="__main__", alter_sys=True)
"""


def _python(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=False, cwd=cwd
    )


def _importer_of_pandas(importtime: str) -> str:
    """Which module's import brought pandas in (``-X importtime`` lists children first)."""
    rows = [
        (len(found.group(1)), found.group(2))
        for found in re.finditer(r"^import time:.*?\|.*?\|( *)(\S+)$", importtime, re.M)
    ]
    for index, (depth, name) in enumerate(rows):
        if name == "pandas":
            parent = next((n for d, n in rows[index + 1 :] if d < depth), None)
            return parent or "a call at run time (no module's import)"
    return "nobody"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, fixtures: Path) -> Path:
    """A long table as CSV and Parquet, and model metadata for it in both formats."""
    folder = tmp_path_factory.mktemp("inputs")
    scores = pq.read_table(fixtures / "tables" / "seed_examples.parquet")
    pq.write_table(scores, folder / "scores.parquet")
    (folder / "scores.csv").write_bytes(
        (fixtures / "tables" / "seed_examples.csv").read_bytes()
    )
    meta = (
        "model,type,params_b,submission_date,flagged\n"
        "seed/musr-example,chatmodels,7.2,2024-06-01,true\n"
        "seed/gpqa-example,pretrained,70,2025-01-02,false\n"
    )
    (folder / "meta.csv").write_text(meta)
    pq.write_table(pa.csv.read_csv(folder / "meta.csv"), folder / "meta.parquet")
    # a --limit run: GPQA pooled with sizes other than the suite's (the summary's sizes line)
    (folder / "resized.csv").write_text(
        "model,benchmark,subtask,raw_score,n_samples\n"
        "a/limited,GPQA,diamond,0.3,50\n"
        "a/limited,GPQA,extended,0.35,50\n"
        "a/limited,GPQA,main,0.4,50\n"
        "b/full,GPQA,diamond,0.3,198\n"
        "b/full,GPQA,extended,0.35,546\n"
        "b/full,GPQA,main,0.4,448\n"
    )
    return folder


@pytest.mark.parametrize(
    "argv",
    [
        "run --out {out} --quiet",
        "run --out {out} --exclude-flagged --rank-within size_class",
        "run {inputs}/scores.csv --metadata {inputs}/meta.csv --out {out} "
        "--missing partial --rank-within type --quiet",
        "run {inputs}/scores.parquet --metadata {inputs}/meta.parquet --out {out} "
        "--missing partial --exclude-flagged --report {out}.json",
        "run {inputs}/resized.csv --out {out} --missing partial",
        "run --out {out} --sum-memory 1e-6",
        "run {inputs}/resized.csv --out {out} --missing partial --sum-memory 1e-9",
    ],
    ids=[
        "demo-quiet",
        "demo-summary-flagged",
        "csv-metadata",
        "parquet-report",
        "other-sample-sizes",
        "demo-spilled",
        "other-sample-sizes-spilled",
    ],
)
def test_lbnorm_run_loads_no_pandas(argv: str, inputs: Path, tmp_path: Path) -> None:
    filled = argv.format(out=tmp_path / "out", inputs=inputs).split()
    done = _python("-X", "importtime", "-c", RUN_CLI, *filled, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "leaderboard.parquet").is_file()
    loaded = done.stdout.rstrip().splitlines()[-1]
    assert loaded == "loaded:", (
        f"pandas was imported by {_importer_of_pandas(done.stderr)}"
    )


@pytest.fixture(scope="module")
def sample_inputs(tmp_path_factory: pytest.TempPathFactory, fixtures: Path) -> Path:
    """The committed samples tree; a copy with a results file beside the samples
    that holds every task but MUSR murder mysteries (so it wins those and the
    samples give the rest); and the tree's samples as a Parquet sample table."""
    folder = tmp_path_factory.mktemp("samples")
    shutil.copytree(fixtures / "samples", folder / "tree")
    shutil.copytree(fixtures / "samples", folder / "mixed")
    samples = sorted((folder / "tree").rglob("samples_*.jsonl"))
    beside = samples[0].parent.relative_to(folder / "tree")
    stamp = SAMPLES_FILE.match(samples[0].name)
    assert stamp is not None
    results_name = f"results_{stamp['timestamp']}.json"
    results = fixtures / "full_structure" / beside / results_name
    document = json.loads(results.read_text())
    del document["results"]["leaderboard_musr_murder_mysteries"]
    (folder / "mixed" / beside / results_name).write_text(json.dumps(document))
    suite = subtask_columns(load_suite("openllm-v2"))
    rows = sample_rows(
        samples,
        lambda task: [
            m for t, m in zip(suite["task"], suite["metric"], strict=True) if t == task
        ],
    )
    size = len(rows["value"])
    table = pa.table({"model": ["org/model"] * size, **rows})
    pq.write_table(
        table.cast(pa.schema([SAMPLES.field(name) for name in table.column_names])),
        folder / "samples.parquet",
    )
    return folder


@pytest.mark.parametrize(
    "argv",
    [
        "run {samples}/tree --out {out} --missing partial",
        "run {samples}/mixed --out {out} --missing partial --quiet",
        "run {samples}/samples.parquet --out {out} --missing partial --quiet",
    ],
    ids=["samples-tree", "samples-and-results", "sample-table"],
)
def test_lbnorm_run_on_samples_loads_no_pandas(
    argv: str, sample_inputs: Path, tmp_path: Path
) -> None:
    """Per-sample inputs are aggregated with numpy and Arrow (readers/samples.py)."""
    filled = argv.format(out=tmp_path / "out", samples=sample_inputs).split()
    done = _python("-X", "importtime", "-c", RUN_CLI, *filled, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    board = pq.read_table(tmp_path / "out" / "leaderboard.parquet")
    assert board["model"].to_pylist() == [
        "org/model" if "parquet" in argv else "meta-llama/Meta-Llama-3-8B-Instruct"
    ]
    subtasks = pq.read_table(tmp_path / "out" / "subtasks.parquet")
    sources = dict(
        zip(
            subtasks["subtask"].cast(pa.string()).to_pylist(),
            subtasks["source"].cast(pa.string()).to_pylist(),
            strict=True,
        )
    )
    assert sources["murder_mysteries"].endswith(
        ".parquet" if "parquet" in argv else ".jsonl"
    )
    # with a results file beside them, it wins the subtasks it has
    from_results = "mixed" in argv
    assert sources["prompt_level_strict"].endswith(".json") == from_results
    loaded = done.stdout.rstrip().splitlines()[-1]
    assert loaded == "loaded:", (
        f"pandas was imported by {_importer_of_pandas(done.stderr)}"
    )


def test_a_nightly_run_with_the_parse_cache_loads_no_pandas(
    tmp_path: Path, full_structure_dir: Path
) -> None:
    """``--cache``: the first run fills the cache, the second takes every file from it."""
    tree = tmp_path / "tree"
    shutil.copytree(full_structure_dir, tree)
    for path in tree.rglob("results_*.json"):  # older than the racy line: trusted
        os.utime(path, ns=(1_600_000_000_000_000_000,) * 2)
    for step in ("fills", "reuses"):
        argv = ["run", str(tree), "--out", str(tmp_path / step), "--quiet"]
        argv += ["--cache", str(tmp_path / "cache"), "--report", f"{step}.json"]
        done = _python("-X", "importtime", "-c", RUN_CLI, *argv, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        loaded = done.stdout.rstrip().splitlines()[-1]
        assert loaded == "loaded:", (
            f"the run that {step} the cache imported pandas via "
            f"{_importer_of_pandas(done.stderr)}"
        )
    report = json.loads((tmp_path / "reuses.json").read_text())
    assert report["inputs"]["cache"]["cached"] == report["inputs"]["cache"]["seen"] > 0


#: After the engine, with every import of pandas refused: join, summary, flagged, report.
FACES = """\
import importlib.abc, sys
from pathlib import Path

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "pan" + "das":
            raise ModuleNotFoundError(name + " refused: this step must not need it", name=name)
        return None

sys.meta_path.insert(0, Refuse())

import pyarrow.parquet as pq
from lbnorm.cli.run import _print_flagged
from lbnorm.engines.metadata import annotate_table
from lbnorm.core.options import RunOptions
from lbnorm.engines.result import Result
from lbnorm.output.run_report import build_run_report, format_run_report
from lbnorm.suites import load_suite
from lbnorm.faces.terminal import format_summary

folder = Path(sys.argv[1])
board = annotate_table(
    pq.read_table(folder / "leaderboard.parquet"),
    folder / "meta.csv",
    rank_within_columns=["size_class", "type"],
    is_flagged_excluded=True,
)[0]
pq.write_table(board, folder / "annotated.parquet")
result = Result(
    benchmark_output=pq.read_table(folder / "benchmarks.parquet"),
    leaderboard_output=board,
    suite=load_suite("openllm-v2"),
    options=RunOptions(missing="partial"),
    file_table=pq.read_table(folder / "files.parquet"),
    n_scores=8,
    n_clipped=1,
)
print(format_summary(result, out="out", top=3))
_print_flagged(board)
report = build_run_report(result, version="v", started_at="t0", finished_at="t1",
    out="out", stages={"total": 0.0})
print(format_run_report(report), end="")
print("loaded: " + ",".join(n for n in sys.modules if n.split(".")[0] == "pan" + "das"))
"""


def test_the_steps_after_the_engine_need_no_pandas(
    inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dataclasses import replace

    from lbnorm.cli.run import _print_flagged
    from lbnorm.core.options import RunOptions
    from lbnorm.faces.terminal import format_summary

    result = run([inputs / "scores.csv"], options=RunOptions(missing="partial"))
    pq.write_table(result.leaderboard_table, tmp_path / "leaderboard.parquet")
    pq.write_table(result.benchmark_table, tmp_path / "benchmarks.parquet")
    pq.write_table(result.file_table, tmp_path / "files.parquet")
    (tmp_path / "meta.csv").write_bytes((inputs / "meta.csv").read_bytes())
    done = _python("-c", FACES, str(tmp_path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    *printed, loaded = done.stdout.splitlines()
    assert loaded == "loaded: "
    # the same steps here, where pandas is loaded, print and write the same
    board = annotate_table(
        result.leaderboard_table,
        inputs / "meta.csv",
        rank_within_columns=["size_class", "type"],
        is_flagged_excluded=True,
    )[0]
    assert pq.read_table(tmp_path / "annotated.parquet").equals(board)
    here = replace(
        result,
        leaderboard_output=board,
        file_table=pq.read_table(tmp_path / "files.parquet"),
        n_scores=8,
        n_clipped=1,
        subtask_parts=None,  # as the subprocess's result, built from two tables
    )
    print(format_summary(here, out="out", top=3))
    _print_flagged(board)
    report = build_run_report(
        here,
        version="v",
        started_at="t0",
        finished_at="t1",
        out="out",
        stages={"total": 0.0},
    )
    report["inputs"]["cache"] = None  # (the subprocess's cache_stats is a stand-in)
    print(format_run_report(report), end="")
    assert printed == capsys.readouterr().out.splitlines()
    assert (
        "flagged    1 variant(s) excluded from ranks: seed/musr-example (bfloat16)"
        in (printed)
    )


def test_pyarrow_conversions_import_pandas(tmp_path: Path) -> None:
    """Why lbnorm.core.arrow exists: with pandas installed, one pa.array call loads it."""
    script = textwrap.dedent(
        """\
        import sys
        import numpy as np
        import pyarrow as pa
        pa.array(np.arange(3))
        print("pan" + "das" in sys.modules)
        """
    )
    done = _python("-c", script, cwd=tmp_path)
    assert done.stdout.strip() == "True", done.stderr
