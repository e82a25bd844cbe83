"""``lbnorm explain``: every number it shows is the tables', and recomputes from the subtasks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lbnorm.analysis.explain import explain_variant
from lbnorm.cli import main
from lbnorm.core.errors import InputError
from lbnorm.output.reader import Output
from lbnorm.suites import load_suite

HERO = {
    "model": "0-hero/Matter-0.2-7B-DPO",
    "precision": "bfloat16",
    "revision": "26a66f0d862e2024ce4ad0a09c37052ac36e8af6",
    "chat_template": True,
}


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("explain") / "demo"
    assert main(["run", "--intervals", "--out", str(out)]) == 0
    return out


def _explained(out: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    assert main(["explain", str(out), *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _recompute(subtasks: pd.DataFrame) -> dict[str, float]:
    """Each benchmark's score by the suite's rule, written out independently."""
    suite = load_suite("openllm-v2").subtask_table()
    rows = subtasks.astype({"benchmark": "str", "subtask": "str"}).merge(
        suite, on=["benchmark", "subtask"], suffixes=("", "_suite")
    )
    scores = {}
    for name, group in rows.groupby("benchmark"):
        if group["aggregation"].iloc[0] == "pool-then-normalize":
            raw = np.average(group["raw_score"], weights=group["n_samples_suite"])
            bound = group["lower_bound"].iloc[0]
            scores[str(name)] = max(0.0, (raw - bound) / (1 - bound) * 100)
        else:
            normalized = (group["raw_score"] - group["lower_bound"]) / (
                1 - group["lower_bound"]
            )
            scores[str(name)] = float((normalized.clip(lower=0) * 100).mean())
    return scores


def test_numbers_equal_the_tables_and_recompute(
    demo_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = _explained(demo_out, capsys, "Matter-0.2-7B-DPO")
    assert found["variant"] == HERO
    models = [str(HERO["model"])]
    subtasks = Output.open(demo_out).frame("subtasks", models=models)
    benchmarks = Output.open(demo_out).frame("benchmarks", models=models)
    board = Output.open(demo_out).frame("leaderboard", models=models)
    on_board: Any = board.to_dict("records")[0]
    shown = pd.DataFrame(found["subtasks"])
    assert len(shown) == 40
    by_subtask: dict[str, Any] = {
        str(row["subtask"]): row for row in subtasks.to_dict("records")
    }
    for row in found["subtasks"]:
        table = by_subtask[row["subtask"]]
        assert row["raw_score"] == table["raw_score"]
        assert row["normalized_score"] == table["normalized_score"]
        assert row["lower_bound"] == table["lower_bound"]
        assert row["normalized_score"] == max(row["normalized"], 0.0)
    assert shown.loc[shown["subtask"] == "team_allocation", "num_choices"].item() == 3
    assert set(shown["bound_from"]) == {"1/num_choices", "generative (num_choices 0)"}
    gpqa = shown.loc[shown["benchmark"] == "GPQA", "n_samples"].tolist()
    assert gpqa == [198, 546, 448]
    assert shown.loc[shown["benchmark"] == "BBH", "n_samples"].isna().all()
    independent = _recompute(subtasks)
    scores: dict[str, Any] = {
        str(row["benchmark"]): row for row in benchmarks.to_dict("records")
    }
    for row in found["benchmarks"]:
        name = row["benchmark"]
        assert row["normalized_score"] == scores[name]["normalized_score"]
        assert row["raw_score"] == scores[name]["raw_score"]
        assert row["recomputed"] == pytest.approx(independent[name], rel=1e-12)
        assert row["normalized_score"] == pytest.approx(independent[name], rel=1e-12)
    rules = {row["benchmark"]: row["rule"] for row in found["benchmarks"]}
    assert rules["GPQA"] == "pool-then-normalize"
    assert rules["BBH"] == "normalize-then-average"
    assert found["average"]["average"] == on_board["average"]
    assert found["average"]["recomputed"] == pytest.approx(
        np.mean(list(independent.values())), rel=1e-12
    )
    contributions = sum(row["contribution"] for row in found["benchmarks"])
    assert contributions == pytest.approx(found["average"]["average"], rel=1e-12)
    assert found["rank"]["rank"] == on_board["rank"]


def test_rank_interval_agrees_with_the_runs_intervals(
    demo_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = explain_variant(demo_out, HERO).rank
    intervals = pd.read_parquet(demo_out / "intervals.parquet")
    row = intervals.loc[intervals["model"] == HERO["model"]].iloc[0]
    assert (found["rank_best"], found["rank_worst"]) == (
        row["rank_best"],
        row["rank_worst"],
    )
    assert found["interval_from"].startswith("intervals.parquet")
    # without the intervals table, the same interval from the leaderboard's stderr
    plain = demo_out.parent / "plain"
    assert main(["run", "--out", str(plain)]) == 0
    capsys.readouterr()
    again = explain_variant(plain, HERO).rank
    assert (again["rank_best"], again["rank_worst"]) == (
        row["rank_best"],
        row["rank_worst"],
    )
    assert again["interval_from"].startswith("average ± z")


def test_text_output_and_one_benchmark(
    demo_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(demo_out), "Matter-0.2-7B-DPO", "gpqa"]) == 0
    text = capsys.readouterr().out
    assert "pool-then-normalize: raw = sum(n_samples x raw)" in text
    assert "diamond" in text
    assert "team_allocation" not in text
    assert "rank       3790" in text
    found = _explained(demo_out, capsys, "Matter-0.2-7B-DPO", "gpqa")
    assert {row["benchmark"] for row in found["subtasks"]} == {"GPQA"}
    assert [row["benchmark"] for row in found["benchmarks"]] == ["GPQA"]
    assert main(["explain", str(demo_out), "Matter-0.2-7B-DPO", "nope"]) == 4
    assert "is not in" in capsys.readouterr().err


def test_several_variants_are_a_usage_error_listing_them(
    demo_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(demo_out), "gpt2"]) == 2
    err = capsys.readouterr().err
    assert "model 'gpt2' has 2 variants" in err
    assert "--precision bfloat16" in err
    assert "--precision float16" in err
    assert "Hint: narrow it" in err
    found = _explained(demo_out, capsys, "gpt2", "--precision", "float16")
    assert found["variant"]["precision"] == "float16"
    assert main(["explain", str(demo_out), "gpt2", "--chat-template", "yes"]) == 2
    assert "no variant matching the options" in capsys.readouterr().err
    # an unknown model is a usage error, as `lbnorm compare` and `show` say
    assert main(["explain", str(demo_out), "no-such-model-anywhere"]) == 2
    assert "no-such-model-anywhere" in capsys.readouterr().err


def test_results_files_name_their_key(
    golden_dir: Path,
    full_structure_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = [str(p) for p in sorted(golden_dir.glob("*.json"))]
    assert main(["run", *files, "--out", str(tmp_path / "golden")]) == 0
    assert main(["run", str(full_structure_dir), "--out", str(tmp_path / "tree")]) == 0
    capsys.readouterr()
    for out in ("golden", "tree"):
        found = _explained(tmp_path / out, capsys, "Yi-34B-Chat", "bbh")
        first = found["subtasks"][0]
        assert first["key"] == (
            "results['leaderboard_bbh_boolean_expressions']['acc_norm,none']"
        )
        assert first["source"].endswith(".json")
        assert found["benchmarks"][0]["recomputed"] == pytest.approx(
            found["benchmarks"][0]["normalized_score"], rel=1e-12
        )
    # the text shows a source by its path under the folder the inputs share
    assert main(["explain", str(tmp_path / "tree"), "Yi-34B-Chat", "gpqa"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert any(
        "  01-ai/Yi-34B-Chat/results_2025-02-13T18-27-04.338360.json  " in row
        for row in rows
    )
    assert main(["explain", str(tmp_path / "golden"), "Yi-34B-Chat", "gpqa"]) == 0
    assert "  01-ai__Yi-34B-Chat.json  " in capsys.readouterr().out  # files given alone


def test_a_gone_suite_and_no_subtasks(tmp_path: Path) -> None:
    scores = tmp_path / "scores.csv"
    scores.write_text(
        "model,benchmark,subtask,raw_score,n_samples\n"
        "org/a,B,x,0.5,100\norg/a,B,y,0.2,300\norg/b,B,x,0.4,100\norg/b,B,y,0.3,300\n"
    )
    suite = tmp_path / "mine.toml"
    suite.write_text(
        'name = "mine"\n[[benchmarks]]\nname = "B"\naggregation = "pool-then-normalize"\n'
        'subtasks = [{ name = "x", num_choices = 4, n_samples = 100 },'
        ' { name = "y", num_choices = 4, n_samples = 300 }]\n'
    )
    out = tmp_path / "out"
    assert main(["run", str(scores), "--suite", str(suite), "--out", str(out)]) == 0
    bare = tmp_path / "bare"
    run_bare = ["run", str(scores), "--suite", str(suite), "--no-subtasks"]
    assert main([*run_bare, "--out", str(bare)]) == 0
    suite.unlink()
    variant = {
        "model": "org/a",
        "precision": "",
        "revision": "",
        "chat_template": False,
    }
    found = explain_variant(out, variant)
    # the manifest embeds the suite's text: a moved or deleted suite file is still read
    assert found.suite["found"] is True
    assert set(found.subtasks["bound_from"]) == {"1/num_choices"}
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["suite"].pop("text", None)  # an older output: the path and hash alone
    manifest_path.write_text(json.dumps(manifest))
    found = explain_variant(out, variant)
    assert found.suite["found"] is False
    assert found.benchmarks["rule"].tolist() == ["pool-then-normalize"]
    assert found.benchmarks["recomputed"].item() == pytest.approx(
        found.benchmarks["normalized_score"].item(), rel=1e-12
    )
    assert set(found.subtasks["bound_from"]) == {"the subtask table (suite file gone)"}
    with pytest.raises(InputError, match=r"(?s)no subtasks.parquet.*Hint: rerun"):
        explain_variant(bare, variant)
    with pytest.raises(InputError, match=r"(?s)is not on its leaderboard.*Hint"):
        explain_variant(out, {**variant, "model": "org/zzz"})
