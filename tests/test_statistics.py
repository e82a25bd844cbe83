"""Issue 11 end to end: standard errors, pooling sizes and ties, on real files.

Oracles: lm-evaluation-harness's own formulas (``tests/oracles/harness_metrics.py``)
and what real results files carry in ``groups`` (``tests/fixtures/harness_groups``:
two real files whose group stderrs the harness wrote).
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dense_oracle import dense_result
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.harness_metrics import (
    aggregate_subtask_metrics,
    group_stderr,
    mean_stderr,
    pooled_sample_stderr,
)

import lbnorm
from lbnorm.analysis.health import check_source
from lbnorm.cli import main
from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.core.schemas import Batch
from lbnorm.engines import stream
from lbnorm.engines.result import Result
from lbnorm.faces.html_report import render_report
from lbnorm.readers import Inputs
from lbnorm.suites import load_suite

FIXTURES = Path(__file__).parent / "fixtures"
HARNESS_GROUPS = FIXTURES / "harness_groups"
YI_REAL = HARNESS_GROUPS / "01-ai/Yi-34B-Chat/results_2025-02-13T18-27-04.338360.json"
LLAMA_REAL = (
    HARNESS_GROUPS
    / "meta-llama/Meta-Llama-3-8B-Instruct/results_2024-06-17T11-25-17.966751.json"
)
REAL_FILES = [YI_REAL, LLAMA_REAL]
YI_FULL_STRUCTURE = (
    FIXTURES
    / "full_structure/01-ai/Yi-34B-Chat/results_2025-02-13T18-27-04.338360.json"
)
SUITE = load_suite("openllm-v2")
SUBTASKS = SUITE.subtask_table()

#: Yi-34B-Chat's GPQA: the harness's pooled stderr, raw and normalized (lb = 1/4).
YI_GPQA_RAW_STDERR = 0.013717885578733728
YI_GPQA_STDERR = 1.8290514104978304

#: The suite's pooled benchmarks, as harness groups: (benchmark, group, metric).
POOLED_GROUPS = [
    ("MATH Lvl 5", "leaderboard_math_hard", "exact_match,none"),
    ("GPQA", "leaderboard_gpqa", "acc_norm,none"),
]


def _run_cli(inputs: list[Path], out: Path, *extra: str) -> dict[str, pd.DataFrame]:
    """`lbnorm run` on real files; the written tables read back."""
    assert main(["run", *map(str, inputs), "--out", str(out), "--quiet", *extra]) == 0
    return {
        name: pd.read_parquet(out / f"{name}.parquet")
        for name in ("benchmarks", "leaderboard")
    }


def _harness_group(data: dict[str, Any], group: str, metric: str) -> tuple[float, Any]:
    """What the harness computes for a group from the file's own subtasks."""
    tasks = data["group_subtasks"][group]
    stderr_key = metric.replace(",", "_stderr,")
    sizes = [data["n-samples"][task]["effective"] for task in tasks]
    values = [data["results"][task][metric] for task in tasks]
    stderrs = [data["results"][task][stderr_key] for task in tasks]
    return aggregate_subtask_metrics(values, sizes), group_stderr(stderrs, sizes)


# 1. pooled standard errors equal the harness's --------------------------------------


@pytest.mark.parametrize("path", [YI_FULL_STRUCTURE, YI_REAL], ids=["fixture", "real"])
def test_yi_34b_chat_gpqa_stderr_is_the_harness_value(
    path: Path, tmp_path: Path
) -> None:
    tables = _run_cli([path], tmp_path / "out")
    gpqa = tables["benchmarks"].set_index("benchmark").loc["GPQA"]
    assert gpqa["raw_stderr"] == pytest.approx(YI_GPQA_RAW_STDERR, rel=0, abs=1e-12)
    assert gpqa["stderr"] == pytest.approx(YI_GPQA_STDERR, rel=0, abs=1e-12)
    normalized = YI_GPQA_RAW_STDERR * 100 / 0.75  # se_norm = 100 se / (1 - lb)
    assert normalized == pytest.approx(YI_GPQA_STDERR, rel=1e-15)
    assert gpqa["n_stderr_estimated"] == 0
    assert not gpqa["has_other_sizes"]
    # the leaderboard carries the same figure beside the score
    board = tables["leaderboard"]
    assert board["GPQA stderr"].tolist() == [gpqa["stderr"]]


@pytest.mark.parametrize("path", REAL_FILES, ids=lambda path: path.parent.name)
def test_pooled_raw_stderr_is_the_files_groups_stderr(path: Path) -> None:
    """Each pooled benchmark's raw_stderr is the `groups` stderr the harness wrote."""
    data = json.loads(path.read_text())
    benchmarks = lbnorm.run([path]).benchmarks.set_index("benchmark")
    for benchmark, group, metric in POOLED_GROUPS:
        stderr_key = metric.replace(",", "_stderr,")
        written = data["groups"][group][stderr_key]
        value, recomputed = _harness_group(data, group, metric)
        assert recomputed == written  # the harness's formula gives the file's value
        assert benchmarks.loc[benchmark, "raw_stderr"] == pytest.approx(
            written, rel=0, abs=1e-12
        ), benchmark
        assert benchmarks.loc[benchmark, "raw_score"] == pytest.approx(
            value, rel=0, abs=1e-14
        )


def test_stale_math_group_value_is_not_used_but_its_stderr_is_the_files() -> None:
    """Yi's file was rescored (Feb 2025): its MATH stderrs are all the old run's."""
    data = json.loads(YI_REAL.read_text())
    group = data["groups"]["leaderboard_math_hard"]
    value, stderr = _harness_group(data, "leaderboard_math_hard", "exact_match,none")
    assert group["exact_match,none"] == 0.04305135951661632  # stale: not the subtasks'
    assert value == pytest.approx(0.06268882175226587, rel=1e-15)
    assert stderr == group["exact_match_stderr,none"]  # stale subtask stderrs, pooled
    math_row = lbnorm.run([YI_REAL]).benchmarks.set_index("benchmark").loc["MATH Lvl 5"]
    assert math_row["raw_score"] == pytest.approx(value, rel=0, abs=1e-14)


@pytest.mark.parametrize(
    "name", ["01-ai/Yi-34B-Chat", "meta-llama/Meta-Llama-3-8B-Instruct"]
)
def test_full_structure_fixtures_pool_their_own_subtasks(name: str) -> None:
    """The `full_structure` files' `groups` stderrs are stand-ins: the oracle there is
    the harness's formula on the file's own subtask stderrs and `n-samples`."""
    (path,) = (FIXTURES / "full_structure" / name).glob("results_*.json")
    data = json.loads(path.read_text())
    benchmarks = lbnorm.run([path]).benchmarks.set_index("benchmark")
    for benchmark, group, metric in POOLED_GROUPS:
        _, expected = _harness_group(data, group, metric)
        assert benchmarks.loc[benchmark, "raw_stderr"] == pytest.approx(
            expected, rel=0, abs=1e-12
        )


@pytest.mark.parametrize(
    ("golden", "real", "benchmarks"),
    [
        ("01-ai__Yi-34B-Chat.json", YI_REAL, ["GPQA"]),
        (
            "meta-llama__Meta-Llama-3-8B-Instruct.json",
            LLAMA_REAL,
            ["GPQA", "MATH Lvl 5"],
        ),
    ],
    ids=["yi", "llama"],
)
def test_binomial_fallback_reproduces_the_harness_group_stderr(
    golden: str, real: Path, benchmarks: list[str]
) -> None:
    """The golden excerpts carry no stderr: estimated ones give the real `groups` value.

    The harness's stderr of an accuracy is ``mean_stderr`` of 0/1 items, i.e.
    ``sqrt(p (1 - p) / (n - 1))``, lbnorm's fallback; pooled over the suite's
    sizes it is the file's group stderr. (Yi's MATH is left out: the real file's
    MATH stderrs are from before the re-scoring, its golden values after.)
    """
    groups = json.loads(real.read_text())["groups"]
    rows = lbnorm.run([FIXTURES / "golden" / golden]).benchmarks.set_index("benchmark")
    for benchmark, group, metric in POOLED_GROUPS:
        if benchmark not in benchmarks:
            continue
        expected = groups[group][metric.replace(",", "_stderr,")]
        assert rows.loc[benchmark, "raw_stderr"] == pytest.approx(
            expected, rel=0, abs=1e-12
        )
    # every subtask's stderr was estimated, and it says so
    estimated = rows.loc[benchmarks, "n_stderr_estimated"]
    assert (estimated == rows.loc[benchmarks, "n_subtasks"]).all()


# 3. pooling uses the sizes that were actually run ------------------------------------

GPQA_LIMITED = pd.DataFrame(
    {
        "model": ["limited"] * 3 + ["full"] * 3,
        "benchmark": ["GPQA"] * 6,
        "subtask": ["diamond", "extended", "main"] * 2,
        "raw_score": [0.9, 0.3, 0.5] * 2,
        "n_samples": [10, 10, 1000, 198, 546, 448],
    }
)


def _gpqa(scores: pd.DataFrame, tmp_path: Path) -> pd.DataFrame:
    """GPQA rows of `lbnorm run` on a long table (CSV), by model."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "scores.csv"
    scores.to_csv(path, index=False)
    tables = _run_cli([path], tmp_path / "out", "--missing", "partial")
    return tables["benchmarks"].set_index("model")


def test_pooling_weights_by_the_input_n_samples(tmp_path: Path) -> None:
    rows = _gpqa(GPQA_LIMITED, tmp_path)
    limited, full = rows.loc["limited"], rows.loc["full"]
    expected = aggregate_subtask_metrics([0.9, 0.3, 0.5], [10, 10, 1000])
    assert expected == pytest.approx(0.501961, abs=5e-7)
    assert limited["raw_score"] == pytest.approx(expected, rel=0, abs=1e-12)
    assert limited["has_other_sizes"]
    assert full["raw_score"] == pytest.approx(
        aggregate_subtask_metrics([0.9, 0.3, 0.5], [198, 546, 448]), rel=0, abs=1e-12
    )
    assert not full["has_other_sizes"]  # n_samples equal to the suite's
    # no stderr in the table: binomial from the sizes run, pooled as the harness pools
    stderrs = [
        math.sqrt(p * (1 - p) / (n - 1))
        for p, n in zip([0.9, 0.3, 0.5], [10, 10, 1000], strict=True)
    ]
    assert stderrs[0] == pytest.approx(mean_stderr([1.0] * 9 + [0.0]), rel=1e-12)
    assert limited["raw_stderr"] == pytest.approx(
        pooled_sample_stderr(stderrs, [10, 10, 1000]), rel=0, abs=1e-12
    )
    assert limited["n_stderr_estimated"] == 3
    assert limited["normalized_score"] == pytest.approx(
        (expected - 0.25) / 0.75 * 100, rel=0, abs=1e-10
    )


def test_without_n_samples_the_suite_sizes_weigh(tmp_path: Path) -> None:
    rows = _gpqa(GPQA_LIMITED.drop(columns="n_samples"), tmp_path)
    expected = aggregate_subtask_metrics([0.9, 0.3, 0.5], [198, 546, 448])
    assert expected == pytest.approx(0.474832, abs=5e-7)
    assert rows["raw_score"].tolist() == pytest.approx([expected] * 2, rel=0, abs=1e-12)
    assert not rows["has_other_sizes"].any()
    # a partial column: null sizes fall back to the suite's, row by row
    sizes = pd.array([10, None, None, None, None, None], dtype="Int64")
    partial = GPQA_LIMITED.assign(n_samples=sizes)
    rows = _gpqa(partial, tmp_path / "partial")
    assert rows.loc["limited", "raw_score"] == pytest.approx(
        aggregate_subtask_metrics([0.9, 0.3, 0.5], [10, 546, 448]), rel=0, abs=1e-12
    )
    assert rows.loc["limited", "has_other_sizes"]
    assert not rows.loc["full", "has_other_sizes"]


def test_a_limit_run_results_file_pools_by_its_effective_sizes(tmp_path: Path) -> None:
    """Yi's real file edited as a `--limit 10` GPQA run writes it (`effective` 10)."""
    data = json.loads(YI_REAL.read_text())
    tasks = [
        "leaderboard_gpqa_diamond",
        "leaderboard_gpqa_extended",
        "leaderboard_gpqa_main",
    ]
    correct = [9, 3, 5]
    for task, k in zip(tasks, correct, strict=True):
        items = [1.0] * k + [0.0] * (10 - k)
        data["results"][task]["acc_norm,none"] = k / 10
        data["results"][task]["acc_norm_stderr,none"] = mean_stderr(items)
        data["n-samples"][task]["effective"] = 10
    folder = tmp_path / "tree" / "01-ai" / "Yi-34B-Chat"
    folder.mkdir(parents=True)
    (folder / YI_REAL.name).write_text(json.dumps(data))
    rows = _run_cli([tmp_path / "tree"], tmp_path / "out")["benchmarks"]
    rows = rows.set_index("benchmark")
    value, stderr = _harness_group(data, "leaderboard_gpqa", "acc_norm,none")
    assert rows.loc["GPQA", "raw_score"] == pytest.approx(value, rel=0, abs=1e-12)
    assert rows.loc["GPQA", "raw_stderr"] == pytest.approx(stderr, rel=0, abs=1e-12)
    assert rows["has_other_sizes"].to_dict() == {
        "IFEval": False, "BBH": False, "MATH Lvl 5": False,
        "GPQA": True, "MUSR": False, "MMLU-PRO": False,
    }  # fmt: skip


@settings(deadline=None)
@given(data=st.data())
def test_pooled_scores_and_stderrs_are_the_harness_for_any_sizes(
    data: st.DataObject,
) -> None:
    """GPQA and MATH with sizes from 1/20 to twice the suite's, stderrs given or not."""
    rows = []
    expected = {}
    for benchmark in ("GPQA", "MATH Lvl 5"):
        subtasks = SUBTASKS[SUBTASKS["benchmark"] == benchmark]
        values, sizes, stderrs = [], [], []
        for subtask, suite_n in zip(
            subtasks["subtask"], subtasks["n_samples"], strict=True
        ):
            n = data.draw(st.integers(max(2, suite_n // 20), 2 * suite_n))
            p = data.draw(st.integers(0, n)) / n
            given_stderr = data.draw(st.booleans())
            se = math.sqrt(p * (1 - p) / (n - 1))  # the harness's mean_stderr of 0/1
            rows.append((benchmark, subtask, p, se if given_stderr else None, n))
            values.append(p)
            sizes.append(n)
            stderrs.append(se)
        expected[benchmark] = (
            aggregate_subtask_metrics(values, sizes),
            pooled_sample_stderr(stderrs, sizes),
            list(subtasks["n_samples"]) != sizes,
        )
    scores = pd.DataFrame(
        rows, columns=["benchmark", "subtask", "raw_score", "stderr", "n_samples"]
    ).assign(model="m")
    result = lbnorm.normalize_scores(scores, options=RunOptions(missing="partial"))
    got = result.benchmarks.set_index("benchmark")
    for benchmark, (value, stderr, is_resized) in expected.items():
        assert got.loc[benchmark, "raw_score"] == pytest.approx(value, rel=0, abs=1e-12)
        assert got.loc[benchmark, "raw_stderr"] == pytest.approx(
            stderr, rel=0, abs=1e-12
        )
        assert got.loc[benchmark, "has_other_sizes"] == is_resized


def test_run_summary_and_manifest_name_variants_pooled_with_other_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scores.csv"
    GPQA_LIMITED.to_csv(path, index=False)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--missing", "partial"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "sizes" in line]
    assert "limited" in " ".join(lines)  # the example variant, counted
    assert "full" not in " ".join(lines)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.pop("options")
    assert "limited" in json.dumps(manifest)
    assert manifest["counts"]["variants_pooled_with_other_sizes"] == 1  # "limited" only


# 4. ties are exact -------------------------------------------------------------------

ONE_BENCHMARK = """
name = "one-score"
[[benchmarks]]
name = "Score"
subtasks = [{ name = "all", num_choices = 0 }]
"""


def _ranked(averages: dict[str, float], tmp_path: Path, *engine: str) -> pd.DataFrame:
    """`lbnorm run` on one score per model (lb 0: the average is 100 x raw)."""
    suite = tmp_path / "suite.toml"
    suite.write_text(ONE_BENCHMARK)
    scores = pd.DataFrame(
        {
            "model": list(averages),
            "benchmark": "Score",
            "subtask": "all",
            "raw_score": [value / 100 for value in averages.values()],
        }
    )
    path = tmp_path / "scores.parquet"
    scores.to_parquet(path)
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                str(path),
                "--suite",
                str(suite),
                "--out",
                str(out),
                "--quiet",
                *engine,
            ]
        )
        == 0
    )
    return pd.read_parquet(out / "leaderboard.parquet").set_index("model")


@pytest.mark.parametrize("engine", [[], ["--engine", "stream", "--batch-rows", "1"]])
def test_averages_across_a_rounding_boundary_do_not_tie(
    tmp_path: Path, engine: list[str]
) -> None:
    """2e-13 apart across a 9-decimal rounding boundary: ranks 1 and 2."""
    board = _ranked({"a": 10.0000000005001, "b": 10.0000000004999}, tmp_path, *engine)
    assert round(10.0000000005001, 9) != round(
        10.0000000004999, 9
    )  # rounding split them
    assert board["rank"].to_dict() == {"a": 1, "b": 2}
    averages = board["average"].to_dict()
    assert averages["a"] > averages["b"]


def test_averages_4e_10_apart_inside_one_rounding_step_do_not_tie(
    tmp_path: Path,
) -> None:
    board = _ranked({"a": 10.0000000004999, "b": 10.0000000001}, tmp_path)
    assert round(10.0000000004999, 9) == round(10.0000000001, 9)  # rounding tied them
    assert board["rank"].to_dict() == {"a": 1, "b": 2}


def _long_rows(path: Path, model: str) -> pd.DataFrame:
    """A results file's scores as a long table (what `subtasks.parquet` holds)."""
    result = lbnorm.run([path])
    return result.subtasks[
        ["benchmark", "subtask", "raw_score", "stderr", "n_samples"]
    ].assign(model=model)


def test_equal_inputs_share_a_rank_whatever_file_order_and_batching(
    tmp_path: Path,
) -> None:
    """Yi-34B-Chat's real file; its scores again as a shuffled Parquet table under
    another name; and again split over two CSV files: one average, bit for bit."""
    other = _long_rows(LLAMA_REAL, "zz/other")
    copy = _long_rows(YI_REAL, "copy/yi").sample(frac=1.0, random_state=3)
    split = _long_rows(YI_REAL, "split/yi").sample(frac=1.0, random_state=4)
    pq.write_table(
        pa.Table.from_pandas(pd.concat([other, copy]), preserve_index=False),
        tmp_path / "table.parquet",
        row_group_size=7,
    )
    split.iloc[:17].to_csv(tmp_path / "first.csv", index=False)
    split.iloc[17:].to_csv(tmp_path / "second.csv", index=False)
    inputs = [
        YI_REAL,
        tmp_path / "table.parquet",
        tmp_path / "first.csv",
        tmp_path / "second.csv",
    ]
    boards = [
        _run_cli(inputs, tmp_path / name, *options)["leaderboard"].set_index("model")
        for name, options in [
            ("memory", ["--engine", "memory"]),
            ("stream", ["--engine", "stream", "--batch-rows", "5"]),
        ]
    ]
    for board in boards:
        same = board.loc[["01-ai/Yi-34B-Chat", "copy/yi", "split/yi"]]
        for column in ("average", "average_stderr", "rank"):  # bit-equal
            assert (same[column] == same[column].iloc[0]).all(), column
        assert board.loc["zz/other", "rank"] != same["rank"].iloc[0]
    pd.testing.assert_frame_equal(boards[0], boards[1], check_exact=True)


def _engine_result(table: pa.Table, missing: MissingPolicy, **options: Any) -> Result:
    if options.get("engine") == "dense":  # the oracle: a dense pivot of the rows
        return dense_result(table, SUITE, RunOptions(subtasks=False, missing=missing))
    chosen = RunOptions(subtasks=False, missing=missing, **options)
    return stream.compute(
        Inputs.of_batches([Batch(table=table, source="t")]), SUITE, chosen
    )


@st.composite
def score_tables(draw: st.DrawFn) -> pa.Table:
    """Up to 6 variants, any subset of the 40 subtasks, stderrs and sizes or not."""
    n_variants = draw(st.integers(1, 6))
    rows = []
    for variant in range(n_variants):
        present = draw(
            st.lists(st.booleans(), min_size=len(SUBTASKS), max_size=len(SUBTASKS))
        )
        for code in np.flatnonzero(present):
            suite_n = int(SUBTASKS["n_samples"].iloc[code])
            rows.append(
                {
                    "model": f"org/m{variant % 3}",
                    "precision": ["bfloat16", "float16"][variant // 3],
                    "benchmark": SUBTASKS["benchmark"].iloc[code],
                    "subtask": SUBTASKS["subtask"].iloc[code],
                    "raw_score": draw(st.floats(0.0, 1.0)),
                    "stderr": draw(st.none() | st.floats(0.0, 0.5)),
                    "n_samples": draw(st.none() | st.integers(2, 2 * suite_n)),
                }
            )
    schema = pa.schema(
        [
            ("model", pa.string()),
            ("precision", pa.string()),
            ("benchmark", pa.string()),
            ("subtask", pa.string()),
            ("raw_score", pa.float64()),
            ("stderr", pa.float64()),
            ("n_samples", pa.int64()),
        ]
    )
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.mark.slow
@settings(deadline=None)
@given(
    table=score_tables(),
    seed=st.integers(0, 2**32 - 1),
    batch_rows=st.integers(1, 13),
    missing=st.sampled_from(["exclude", "partial", "zero"]),
)
def test_tables_are_bit_equal_across_engines_order_and_batching(
    table: pa.Table, seed: int, batch_rows: int, missing: MissingPolicy
) -> None:
    """Every float column of the benchmark and leaderboard tables, bit for bit."""
    shuffled = table.take(
        pa.array(np.random.default_rng(seed).permutation(table.num_rows))
    )
    reference = _engine_result(table, missing, engine="dense")
    others = [
        _engine_result(shuffled, missing, engine="dense"),
        _engine_result(shuffled, missing, engine="memory"),
        _engine_result(shuffled, missing, engine="stream", batch_rows=batch_rows),
        _engine_result(table, missing, engine="stream", batch_rows=10_000),
    ]
    for other in others:
        pd.testing.assert_frame_equal(
            reference.benchmarks, other.benchmarks, check_exact=True
        )
        pd.testing.assert_frame_equal(
            reference.leaderboard, other.leaderboard, check_exact=True
        )


def test_published_ties_are_exact_and_share_ranks(published_csv: Path) -> None:
    """The published table's 100 tied rows (46 groups): equal averages, bit for bit."""
    published = pd.read_csv(published_csv)
    published = published.assign(**{"Model sha": published["Model sha"].fillna("")})
    board = lbnorm.run([lbnorm.demo_path()]).leaderboard.merge(
        published,
        left_on=["model", "precision", "revision", "chat_template"],
        right_on=["fullname", "Precision", "Model sha", "Chat Template"],
        validate="one_to_one",
    )
    tied = board[board["Average ⬆️"].duplicated(keep=False)]
    assert len(tied) == 100
    groups = tied.groupby("Average ⬆️")
    assert groups.ngroups == 46
    for column in ("average", "rank"):  # exact ties, not rounded ones
        assert (groups[column].min() == groups[column].max()).all(), column
    # and no other rows tie in lbnorm
    assert board["average"].duplicated(keep=False).sum() == 100


def test_a_variants_average_does_not_depend_on_the_other_variants() -> None:
    files = sorted((FIXTURES / "golden").glob("*.json"))
    together = lbnorm.run(files).leaderboard.set_index("model")
    for path in files:
        alone = lbnorm.run([path]).leaderboard.set_index("model")
        (model,) = alone.index
        for column in ("average", "average_stderr"):
            assert alone.loc[model, column] == together.loc[model, column], (
                model,
                column,
            )


# 5. one definition of each health figure ---------------------------------------------


def _page_table(page: str, heading: str) -> list[list[str]]:
    """The cells of the first table after `heading` in the report, header first."""
    start = page.index(heading)
    table = page[page.index("<table>", start) : page.index("</table>", start)]
    return [
        [
            html.unescape(re.sub(r"<[^>]+>", "", cell))
            for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
    ]


@pytest.mark.slow
def test_report_subtask_health_and_counts_are_lbnorm_healths(tmp_path: Path) -> None:
    """What tests/test_report.py leaves out: the page's subtask table and its counts.

    (That test checks the benchmark table, the leave-one-out figures and the
    health frame itself against `lbnorm health` on the demo.)
    """
    out = tmp_path / "out"
    lbnorm.run(out=out)
    health, _ = check_source([out])
    page = render_report(out)
    section = re.search(r'<section id="health">(.*?)</section>', page, re.S)
    assert section
    text = section.group(1)
    subtasks = health[health["level"] == "subtask"]
    failed = int((subtasks["status"] == "fail").sum())
    heading = f"Subtasks ({len(subtasks)} checked, {failed} failed)"
    rows = _page_table(text, heading)
    assert rows[0] == [
        "benchmark", "subtask", "bound", "max raw", "below bound",
        "rho vs rest", "status", "failed checks",
    ]  # fmt: skip

    def fixed(values: pd.Series[float]) -> list[str]:
        return [
            "n/a" if math.isnan(value) else f"{value:.3f}" for value in values.tolist()
        ]

    columns = ["lower_bound", "max_raw_score", "below_bound_rate", "rest_spearman"]
    cells = [
        subtasks["benchmark"].tolist(),
        subtasks["subtask"].tolist(),
        *(fixed(subtasks[column]) for column in columns),
        subtasks["status"].tolist(),
        subtasks["failed"].tolist(),
    ]
    expected = [list(row) for row in zip(*cells, strict=True)]
    assert rows[1:] == expected
    counts = health["status"].value_counts().to_dict()
    summary = (
        f"{counts.get('fail', 0)} fail, {counts.get('skipped', 0)} skipped, "
        f"{counts.get('pass', 0)} pass"
    )
    assert summary in re.sub(r"<[^>]+>", "", text)
    assert main(["health", str(out)]) == 0  # and the CLI heading says the same
