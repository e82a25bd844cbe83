"""analysis/paired.py, faces/paired.py (and cli/analysts.py, cli/changes.py): compare --paired, diff --paired.

Two models of one output (Llama and Yi on the repository's per-sample fixtures)
against the oracles on the files read with ``json``; the same model re-evaluated
(tests/fixtures/paired/rerun: 20 MUSR answers changed) found to have moved where it
moved and nowhere else; and the failures: a model without per-sample data, inputs
changed or gone since the run, suites that score differently.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from oracles.paired import cluster_robust_se, linear_se, paired_subtask
from scipy import stats
from test_paired_board import LLAMA, YI, file_values, ifeval_long

import lbnorm
from lbnorm import RunOptions
from lbnorm.analysis.paired import compare_paired, diff_paired, tied_groups
from lbnorm.cli import main
from lbnorm.core.errors import InputError, OptionsError

MUSR = "leaderboard_musr_murder_mysteries"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory, fixtures: Path) -> Path:
    """Llama and Yi, from copies of their sample files (so tests may change them)."""
    folder = tmp_path_factory.mktemp("compare")
    shutil.copytree(
        fixtures / "samples" / "meta-llama", folder / "inputs" / "meta-llama"
    )
    shutil.copytree(
        fixtures / "paired" / "models" / "01-ai", folder / "inputs" / "01-ai"
    )
    lbnorm.run(
        [folder / "inputs"],
        out=folder / "out",
        options=RunOptions(missing="partial", paired=True),
    )
    return folder / "out"


def test_compare_paired_against_the_files(out: Path, fixtures: Path) -> None:
    comparison = compare_paired(out, LLAMA, YI)
    levels = comparison.levels.set_index("level")
    row = levels.to_dict("index")
    murder = "MUSR/murder_mysteries"
    a = file_values(fixtures, LLAMA, MUSR, "acc_norm")
    b = file_values(fixtures, YI, MUSR, "acc_norm")
    x = np.array([a[d] for d in a], dtype=float)
    y = np.array([b[d] for d in a], dtype=float)
    assert [row[murder]["difference"], row[murder]["stderr"]] == pytest.approx(
        paired_subtask(x, y, 0.5), rel=1e-12
    )
    first, second = int((x * (1 - y)).sum()), int(((1 - x) * y).sum())
    assert row[murder]["p_mcnemar"] == pytest.approx(
        stats.binomtest(first, first + second).pvalue, rel=1e-12
    )
    assert row[murder]["stderr_a"] == pytest.approx(
        200 * cluster_robust_se(x, np.arange(x.size)), rel=1e-12
    )
    assert row[murder]["stderr_a"] == pytest.approx(
        200 * np.std(x, ddof=1) / math.sqrt(250), rel=1e-12
    )
    long = ifeval_long(fixtures)
    assert row["IFEval"]["stderr"] == pytest.approx(
        linear_se(long.assign(a=50.0)), rel=1e-12
    )
    inst = long.loc[long["subtask"] == "inst"]
    assert row["IFEval/inst_level_strict"]["stderr"] == pytest.approx(
        100 * cluster_robust_se(inst["z"].to_numpy(), inst["cluster"]), rel=1e-12
    )
    assert np.isnan(row["IFEval/inst_level_strict"]["p_mcnemar"])  # clustered: none
    # the scores are the output's; with every item matched, the difference is theirs
    known = levels["n_items"] > 0
    np.testing.assert_allclose(
        levels.loc[known, "difference"],
        levels.loc[known, "score_a"] - levels.loc[known, "score_b"],
        atol=1e-12,
    )
    subtasks = lbnorm.run(
        [out.parent / "inputs"], options=RunOptions(missing="partial")
    ).subtasks
    murder_rows = subtasks.loc[subtasks["subtask"] == "murder_mysteries"].set_index(
        "model"
    )
    errors = murder_rows["stderr"].to_dict()
    unpaired = math.hypot(200 * errors[LLAMA], 200 * errors[YI])
    assert row[murder]["stderr_unpaired"] == pytest.approx(unpaired, rel=1e-12)
    assert comparison.unmatched.empty
    assert comparison.notes[0] == "documents matched by doc_hash in 2 task(s)"


def test_compare_paired_on_the_command_line(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(out), "Llama", "Yi", "--paired"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"a = {LLAMA}, rank 1\nb = {YI}, rank 2\n")
    line = next(
        row for row in text.splitlines() if row.startswith("  murder_mysteries")
    )
    assert line.split()[1:4] == ["0.00", "11.20", "-11.20"]
    assert "note       documents matched by doc_hash in 2 task(s)" in text
    assert main(["compare", str(out), "Llama", "Yi", "Llama", "--paired"]) == 2
    assert capsys.readouterr().err == (
        "lbnorm: error: --paired compares two models, got 3.\n"
        "Hint: name two models: lbnorm compare OUT A B --paired.\n"
    )


def test_items_only_one_model_has_are_named(out: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "inputs"
    shutil.copytree(out.parent / "inputs", inputs)
    (path,) = inputs.rglob(f"Yi-34B-Chat/samples_{MUSR}_*.jsonl")
    rows = path.read_text().splitlines()
    path.write_text("\n".join(rows[3:]) + "\n")  # Yi lost its first three documents
    lbnorm.run([inputs], out=tmp_path / "out", options=RunOptions(missing="partial"))
    comparison = compare_paired(tmp_path / "out", LLAMA, YI)
    levels = comparison.levels.set_index("level")
    counts = levels.to_dict("index")["MUSR/murder_mysteries"]
    assert [counts["n_items"], counts["n_items_unmatched"]] == [247, 3]
    hashes = [json.loads(row)["doc_hash"] for row in rows[:3]]
    unmatched = comparison.unmatched
    assert unmatched["document"].tolist() == hashes
    assert set(unmatched["model"]) == {LLAMA}
    assert set(unmatched["level"]) == {"MUSR/murder_mysteries"}


def test_a_model_without_per_sample_data_changed_or_gone_inputs_are_errors(
    out: Path, fixtures: Path, tmp_path: Path
) -> None:
    inputs = tmp_path / "inputs"
    shutil.copytree(out.parent / "inputs", inputs)
    shutil.copytree(fixtures / "full_structure" / "01-ai", inputs / "results" / "01-ai")
    lbnorm.run([inputs], out=tmp_path / "out", options=RunOptions(missing="partial"))
    board = pd.read_parquet(tmp_path / "out" / "leaderboard.parquet")
    from_results = {
        str(k): v
        for k, v in board.loc[board["precision"] != "", ["model", "precision"]]
        .iloc[0]
        .to_dict()
        .items()
    }
    with pytest.raises(
        InputError,
        match=r"has no per-sample data among the run's inputs \(its scores came from results files or a score table\)\.\nHint: run again with its samples_",
    ):
        compare_paired(tmp_path / "out", LLAMA, from_results)
    with pytest.raises(
        OptionsError,
        match=r"matches 2 variants: 01-ai/Yi-34B-Chat, 01-ai/Yi-34B-Chat \[bfloat16\]\.\nHint: give precision, revision or chat_template too\.",
    ):
        compare_paired(tmp_path / "out", LLAMA, YI)
    yi = {"model": YI, "precision": ""}
    (path,) = inputs.rglob(f"Yi-34B-Chat/samples_{MUSR}_*.jsonl")
    rows = [json.loads(row) for row in path.read_text().splitlines()]
    rows[0]["acc_norm"] = 1.0 - rows[0]["acc_norm"]
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    with pytest.raises(
        InputError,
        match=r"the per-sample inputs give 01-ai/Yi-34B-Chat 0\.5\d+ on MUSR/murder_mysteries, but the output says 0\.556000: the inputs changed since the run .*\nHint: run again",
    ):
        compare_paired(tmp_path / "out", LLAMA, yi)
    path.unlink()
    with pytest.raises(
        InputError,
        match=r"its per-sample input .* is gone\.\nHint: a paired comparison re-reads",
    ):
        compare_paired(tmp_path / "out", LLAMA, yi)
    with pytest.raises(
        OptionsError,
        match=r"no variant \{'model': 'nobody/x'\} in the leaderboard\.\nHint:",
    ):
        compare_paired(out, LLAMA, "nobody/x")


@pytest.fixture(scope="module")
def before_after(
    tmp_path_factory: pytest.TempPathFactory, fixtures: Path
) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("rerun")
    options = RunOptions(missing="partial")
    lbnorm.run(
        [fixtures / "samples" / "meta-llama"], out=folder / "before", options=options
    )
    lbnorm.run([fixtures / "paired" / "rerun"], out=folder / "after", options=options)
    return folder / "before", folder / "after"


def test_diff_paired_finds_what_moved(
    before_after: tuple[Path, Path], fixtures: Path
) -> None:
    before, after = before_after
    diff = diff_paired(before, after, subtasks=True)
    rows = diff.changes.set_index("level").to_dict("index")
    a = file_values(fixtures, LLAMA, MUSR, "acc_norm")
    (path,) = (fixtures / "paired" / "rerun").rglob(f"samples_{MUSR}_*.jsonl")
    b = {
        row["doc_hash"]: row["acc_norm"]
        for row in map(json.loads, path.read_text().splitlines())
    }
    x = np.array([b[d] for d in a], dtype=float)
    y = np.array([a[d] for d in a], dtype=float)
    murder = rows["MUSR/murder_mysteries"]
    assert (murder["difference"], murder["stderr"]) == pytest.approx(
        paired_subtask(x, y, 0.5), rel=1e-12
    )
    assert murder["difference"] == pytest.approx(16.0)  # 20 of 250 answers, x 200
    assert murder["p_mcnemar"] == pytest.approx(
        stats.binomtest(20, 20).pvalue, rel=1e-12
    )
    assert bool(murder["moved"])
    assert bool(rows["MUSR"]["moved"])
    assert [rows["IFEval"][k] for k in ("difference", "stderr", "p_value")] == [
        0.0,
        0.0,
        1.0,
    ]
    assert not bool(rows["IFEval"]["moved"])
    # unpaired, the move would hide in the noise
    assert murder["stderr"] < 0.5 * rows["MUSR"]["stderr_unpaired"]


def test_diff_paired_on_the_command_line(
    before_after: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = before_after
    code = main(
        ["diff", str(before), str(after), "--paired", "--out", str(tmp_path / "d")]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"# Paired diff: {before} -> {after}\n")
    assert "| MUSR | 1 | 1 |" in text
    assert "| IFEval | 1 | 0 |" in text
    table = pd.read_parquet(tmp_path / "d" / "diff_paired.parquet")
    assert {
        "old_score",
        "new_score",
        "difference",
        "stderr",
        "p_adjusted",
        "moved",
    } <= set(table.columns)


def test_diff_paired_refuses_suites_that_score_differently(
    before_after: tuple[Path, Path], fixtures: Path, tmp_path: Path
) -> None:
    before, _ = before_after
    text = lbnorm.load_suite("openllm-v2").text.replace(
        'num_choices = 2, n_samples = 250 },\n  { name = "object_placements"',
        'num_choices = 3, n_samples = 250 },\n  { name = "object_placements"',
    )
    (tmp_path / "suite.toml").write_text(text)
    lbnorm.run(
        [fixtures / "paired" / "rerun"],
        suite=tmp_path / "suite.toml",
        out=tmp_path / "other",
        options=RunOptions(missing="partial"),
    )
    with pytest.raises(
        InputError,
        match=r"were computed with suites that score differently .*\nHint: `lbnorm diff --paired` compares runs under one suite",
    ):
        diff_paired(before, tmp_path / "other")


def test_show_gives_the_tied_groups(
    out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    groups = tied_groups(out)
    assert groups is not None
    assert groups.set_index("model")["tied"].to_dict() == {LLAMA: 1, YI: 2}
    assert main(["show", str(out)]) == 0
    header = capsys.readouterr().out.splitlines()[1]
    assert header.split()[:3] == ["rank", "tied", "model"]
    musr = tied_groups(out, "MUSR")
    assert musr is not None
    assert musr.set_index("model")["tied"].to_dict() == {YI: 1, LLAMA: 2}


@pytest.mark.slow
def test_the_report_gives_the_tied_groups(out: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    assert main(["report", str(out), "--html", str(page)]) == 0
    assert "tied: the group of statistically tied variants" in page.read_text()
