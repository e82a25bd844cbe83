"""engines/paired_board.py and ``lbnorm run --paired``: paired.parquet for the whole board.

On the repository's per-sample fixtures (Llama and Yi, tests/fixtures/samples and
tests/fixtures/paired) the numbers are checked against the oracles on the files
read with ``json``; on a generated table of a dozen models, every adjacent pair
against numpy on the table's pivot, the two engines alike; a model with no
per-sample data is named and its pairs carry no paired numbers; without
``--paired`` nothing changes.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from oracles.paired import benjamini_hochberg, holm, linear_se, paired_subtask

import lbnorm
from lbnorm import RunOptions
from lbnorm.cli import main
from lbnorm.core.errors import InputError, OptionsError
from lbnorm.core.schemas import PAIRED

LLAMA = "meta-llama/Meta-Llama-3-8B-Instruct"
YI = "01-ai/Yi-34B-Chat"
PARTIAL = RunOptions(paired=True, missing="partial")


@pytest.fixture
def inputs(fixtures: Path) -> list[Path]:
    return [fixtures / "samples" / "meta-llama", fixtures / "paired" / "models"]


def file_values(fixtures: Path, model: str, task: str, metric: str) -> dict[str, Any]:
    """A model's values on a task, by doc_hash, read with json."""
    folder = fixtures / ("samples" if model == LLAMA else "paired/models") / model
    (path,) = folder.glob(f"samples_{task}_*.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {row["doc_hash"]: row[metric] for row in rows}


def ifeval_long(fixtures: Path) -> pd.DataFrame:
    """IFEval's items (prompt and instruction level) with Llama - Yi and the prompt."""
    parts = []
    for metric, subtask in (
        ("prompt_level_strict_acc", "prompt"),
        ("inst_level_strict_acc", "inst"),
    ):
        a = file_values(fixtures, LLAMA, "leaderboard_ifeval", metric)
        b = file_values(fixtures, YI, "leaderboard_ifeval", metric)
        for doc, value in a.items():
            pairs = (
                zip(value, b[doc], strict=True)
                if isinstance(value, list)
                else [(value, b[doc])]
            )
            parts += [(subtask, doc, float(x) - float(y)) for x, y in pairs]
    return pd.DataFrame(parts, columns=["subtask", "cluster", "z"])


def test_run_paired_on_the_fixtures(
    inputs: list[Path], fixtures: Path, tmp_path: Path
) -> None:
    result = lbnorm.run(inputs, out=tmp_path / "out", options=PARTIAL)
    table = pq.read_table(tmp_path / "out" / "paired.parquet")
    assert table.schema.names == PAIRED.names
    assert [f.type for f in table.schema] == [f.type for f in PAIRED]
    paired = table.to_pandas().set_index(pd.Index(table["level"].to_pylist()))
    assert paired.index.tolist() == ["average", "IFEval", "MUSR"]
    assert (paired["model_a"] == LLAMA).tolist() == [True, True, False]  # Yi leads MUSR
    board = result.leaderboard.set_index("model")
    for level in ("average", "IFEval", "MUSR"):
        row = paired.loc[level]
        column = "average" if level == "average" else level
        error = "average_stderr" if level == "average" else f"{level} stderr"
        errors = board[error].to_dict()
        assert row["difference"] == pytest.approx(
            board.loc[row["model_a"], column] - board.loc[row["model_b"], column],
            abs=1e-12,
        )
        assert row["stderr_unpaired"] == pytest.approx(
            math.hypot(errors[LLAMA], errors[YI]),
            rel=1e-12,
        )
        assert (row["rank_a"], row["rank_b"], row["n_items_unmatched"]) == (1, 2, 0)
    long = ifeval_long(fixtures)
    assert paired.loc["IFEval", "stderr"] == pytest.approx(
        linear_se(long.assign(a=50.0)), rel=1e-12
    )
    assert paired.loc["IFEval", "n_items"] == 541 + 834
    x = np.array(
        list(
            file_values(
                fixtures, YI, "leaderboard_musr_murder_mysteries", "acc_norm"
            ).values()
        )
    )
    y = np.array(
        [
            file_values(
                fixtures, LLAMA, "leaderboard_musr_murder_mysteries", "acc_norm"
            )[d]
            for d in file_values(
                fixtures, YI, "leaderboard_musr_murder_mysteries", "acc_norm"
            )
        ]
    )
    assert paired.loc["MUSR", ["difference", "stderr"]].tolist() == pytest.approx(
        paired_subtask(x, y, 0.5), rel=1e-12
    )
    # the models agree more than chance: pairing shrinks the error
    assert (paired["stderr"] < 0.75 * paired["stderr_unpaired"]).all()
    np.testing.assert_allclose(
        paired["p_adjusted"], holm(paired["p_value"].tolist()), rtol=1e-15
    )
    assert paired["separable"].tolist() == (paired["p_adjusted"] < 0.05).tolist()
    assert (paired["group_b"] - paired["group_a"]).tolist() == paired[
        "separable"
    ].astype(int).tolist()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["outputs"]["paired.parquet"]["rows"] == 3
    assert manifest["options"]["paired_adjust"] == "holm"
    metadata = pq.read_schema(tmp_path / "out" / "paired.parquet").metadata
    assert metadata[b"lbnorm.table"] == b"paired"  # the run's writer, its provenance


def generated_table(path: Path, n_models: int = 12, seed: int = 0) -> pd.DataFrame:
    """Models of graded ability on GPQA and MUSR (all three subtasks each), some rows
    dropped so that items go unmatched, one subtask with partial credit."""
    rng = np.random.default_rng(seed)
    tasks = {
        "leaderboard_gpqa_diamond": 198,
        "leaderboard_gpqa_extended": 546,
        "leaderboard_gpqa_main": 448,
        "leaderboard_musr_murder_mysteries": 250,
        "leaderboard_musr_object_placements": 256,
        "leaderboard_musr_team_allocation": 250,
    }
    rows = []
    difficulty = {task: rng.normal(size=n) for task, n in tasks.items()}
    for m in range(n_models):
        ability = 0.2 + m * 0.12
        for task, n in tasks.items():
            values = (ability - difficulty[task] + rng.normal(size=n) > 0).astype(float)
            if task.endswith("team_allocation"):
                values = np.clip(values * 0.75 + rng.random(n) * 0.25, 0, 1)
            keep = rng.random(n) > (0.03 if m % 4 == 1 else 0.0)
            rows.append(
                pd.DataFrame(
                    {
                        "model": f"org/m{m:02d}",
                        "task": task,
                        "metric": "acc_norm,none",
                        "doc_id": np.arange(n)[keep],
                        "value": values[keep],
                    }
                )
            )
    frame = pd.concat(rows, ignore_index=True)
    pq.write_table(
        pa.Table.from_pandas(frame, preserve_index=False), path, row_group_size=5000
    )
    return frame


def pivot_oracle(
    frame: pd.DataFrame, a: str, b: str, level: str
) -> tuple[float, float]:
    """The paired difference and error of a benchmark, from the table's pivot (numpy)."""
    bounds = {
        "leaderboard_gpqa": 0.25,
        "leaderboard_musr_murder_mysteries": 0.5,
        "leaderboard_musr_object_placements": 0.2,
        "leaderboard_musr_team_allocation": 1 / 3,
    }
    parts = []
    for task, group in frame.groupby("task"):
        if not str(task).startswith(
            "leaderboard_gpqa" if level == "GPQA" else "leaderboard_musr"
        ):
            continue
        wide = group.pivot_table(
            index="doc_id", columns="model", values="value", aggfunc="first"
        )[[a, b]].dropna()
        bound = bounds.get(str(task), bounds["leaderboard_gpqa"])
        parts.append((wide[a].to_numpy(), wide[b].to_numpy(), bound))
    if level == "GPQA":  # pooled: one bound, weights the matched documents
        x = np.concatenate([p[0] for p in parts])
        y = np.concatenate([p[1] for p in parts])
        shares = np.array([p[0].size for p in parts]) / x.size
        errors = [paired_subtask(p[0], p[1], 0.25)[1] for p in parts]
        assert min(x.mean(), y.mean()) > 0.25
        return (x.mean() - y.mean()) * 100 / 0.75, math.sqrt(
            sum((s * e) ** 2 for s, e in zip(shares, errors, strict=True))
        )
    scores = [paired_subtask(*p) for p in parts]
    for x, y, bound in parts:
        assert min(x.mean(), y.mean()) >= bound
    return float(np.mean([s[0] for s in scores])), math.sqrt(
        sum(s[1] ** 2 for s in scores)
    ) / len(scores)


def test_the_adjacent_pairs_of_a_small_board_match_numpy(tmp_path: Path) -> None:
    """The quick sibling of the next test: four models, one engine."""
    frame = generated_table(tmp_path / "samples.parquet", n_models=4, seed=5)
    result = lbnorm.run([tmp_path / "samples.parquet"], options=PARTIAL)
    paired = result.paired
    assert paired is not None
    rows = paired.loc[paired["level"] == "MUSR"]
    assert len(rows) == 3
    for row in rows.itertuples():
        expected = pivot_oracle(frame, str(row.model_a), str(row.model_b), "MUSR")
        assert (row.difference, row.stderr) == pytest.approx(expected, rel=1e-12)


@pytest.mark.slow
def test_every_adjacent_pair_of_a_generated_board_matches_numpy(tmp_path: Path) -> None:
    frame = generated_table(tmp_path / "samples.parquet")
    tables = {}
    for engine in ("stream", "memory"):
        options = RunOptions(paired=True, missing="partial", engine=engine)
        result = lbnorm.run([tmp_path / "samples.parquet"], options=options)
        assert result.paired_output is not None
        tables[engine] = result.paired_output
    assert tables["stream"].equals(tables["memory"])
    paired = tables["stream"].to_pandas()
    for level in ("GPQA", "MUSR"):
        rows = paired.loc[paired["level"] == level]
        assert len(rows) == 11
        assert (rows["rank_a"] < rows["rank_b"]).all()
        for row in rows.itertuples():
            difference, stderr = pivot_oracle(
                frame, str(row.model_a), str(row.model_b), level
            )
            assert (row.difference, row.stderr) == pytest.approx(
                (difference, stderr), rel=1e-12
            )
    unmatched = paired.loc[
        paired["model_a"].isin(["org/m01", "org/m05", "org/m09"])
        | paired["model_b"].isin(["org/m01", "org/m05", "org/m09"])
    ]
    assert (unmatched["n_items_unmatched"] > 0).all()
    # groups: consecutive models, a new one after each separable pair
    for _, rows in paired.groupby("level", observed=True):
        groups = np.r_[rows["group_a"].to_numpy()[0], rows["group_b"].to_numpy()]
        assert groups[0] == 1
        assert np.diff(groups).tolist() == rows["separable"].astype(int).tolist()


def test_a_model_without_per_sample_data_is_named_and_gets_no_paired_numbers(
    inputs: list[Path],
    fixtures: Path,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    results = (
        fixtures / "full_structure" / "meta-llama"
    )  # Llama [bfloat16], from results
    code = main(
        [
            "run",
            *map(str, inputs),
            str(results),
            "--paired",
            "--missing",
            "partial",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0
    summary = capsys.readouterr().out
    assert (
        "(no per-sample data: meta-llama/Meta-Llama-3-8B-Instruct [bfloat16])"
        in summary
    )
    paired = pd.read_parquet(tmp_path / "out" / "paired.parquet")
    lone = (paired["precision_a"] == "bfloat16") | (paired["precision_b"] == "bfloat16")
    assert lone.any()
    assert (
        paired.loc[lone, ["difference", "stderr", "p_value", "p_adjusted", "separable"]]
        .isna()
        .all()
        .all()
    )
    assert (paired.loc[lone, "n_items"] == 0).all()
    assert (paired.loc[lone, "n_items_unmatched"] > 0).all()
    assert paired.loc[lone, "stderr_unpaired"].notna().all()
    assert paired.loc[~lone, "stderr"].notna().all()


def test_paired_without_per_sample_inputs_says_so(fixtures: Path) -> None:
    with pytest.raises(
        InputError,
        match=r"--paired compares models on the items they answered, but no per-sample input gave a score\.\nHint: give the harness's",
    ):
        lbnorm.run([fixtures / "full_structure"], options=RunOptions(paired=True))


def test_benjamini_hochberg_and_the_level_are_options(tmp_path: Path) -> None:
    generated_table(tmp_path / "samples.parquet", n_models=8, seed=3)
    options = RunOptions(
        paired=True, missing="partial", paired_adjust="bh", paired_alpha=0.2
    )
    result = lbnorm.run([tmp_path / "samples.parquet"], options=options)
    paired = result.paired
    assert paired is not None
    known = paired["p_value"].notna()
    np.testing.assert_allclose(
        paired.loc[known, "p_adjusted"],
        benjamini_hochberg(paired.loc[known, "p_value"].tolist()),
        rtol=1e-15,
    )
    assert (
        paired.loc[known, "separable"].tolist()
        == (paired.loc[known, "p_adjusted"] < 0.2).tolist()
    )
    with pytest.raises(
        OptionsError,
        match=r"paired_alpha \(--paired-alpha\) must be between 0 and 1, got 1\.5\.\nHint:",
    ):
        RunOptions(paired_alpha=1.5)


def test_without_paired_nothing_changes(inputs: list[Path], tmp_path: Path) -> None:
    result = lbnorm.run(
        inputs, out=tmp_path / "out", options=RunOptions(missing="partial")
    )
    assert result.paired is None
    assert not (tmp_path / "out" / "paired.parquet").exists()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert not {"paired", "paired_adjust", "paired_alpha"} & set(manifest["options"])
    assert "paired.parquet" not in manifest["outputs"]


@pytest.mark.slow
def test_run_paired_loads_no_pandas(inputs: list[Path], tmp_path: Path) -> None:
    """The item matrix and the comparisons are numpy and Arrow, the summary too."""
    code = (
        "import sys; from lbnorm.cli import main; "
        f"assert main(['run', *{[str(p) for p in inputs]!r}, '--missing', 'partial', "
        f"'--paired', '--out', {str(tmp_path / 'out')!r}]) == 0; "
        "print('pandas' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "False"
    assert "paired     3 adjacent pairs: 3 separable at 0.05 (Holm)" in done.stdout


def test_scores_a_results_file_won_are_not_compared_on_sample_items(
    fixtures: Path, tmp_path: Path
) -> None:
    """Llama's samples with its results file beside (without MUSR murder mysteries):
    the results file wins IFEval, so IFEval is not compared on the sample items."""
    folder = tmp_path / "inputs"
    shutil.copytree(fixtures / "samples" / "meta-llama", folder / "meta-llama")
    shutil.copytree(fixtures / "paired" / "models" / "01-ai", folder / "01-ai")
    (stamp,) = {
        p.name.rsplit("_", 1)[1].removesuffix(".jsonl")
        for p in (folder / "meta-llama").rglob("*.jsonl")
    }
    results = (
        fixtures
        / "full_structure"
        / "meta-llama"
        / "Meta-Llama-3-8B-Instruct"
        / f"results_{stamp}.json"
    )
    document = json.loads(results.read_text())
    del document["results"]["leaderboard_musr_murder_mysteries"]
    (folder / "meta-llama" / "Meta-Llama-3-8B-Instruct" / results.name).write_text(
        json.dumps(document)
    )
    result = lbnorm.run([folder], out=tmp_path / "out", options=PARTIAL)
    paired = result.paired
    assert paired is not None
    rows = paired.set_index("level").to_dict("index")
    assert rows["IFEval"]["n_items"] == 0
    assert np.isnan(rows["IFEval"]["difference"])
    assert rows["MUSR"]["n_items"] == 250
    from lbnorm.analysis.paired import compare_paired

    levels = compare_paired(tmp_path / "out", LLAMA, YI).levels.set_index("level")
    assert levels.to_dict("index")["IFEval"]["n_items"] == 0
    assert levels.to_dict("index")["MUSR/murder_mysteries"]["n_items"] == 250
