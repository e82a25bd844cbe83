"""The run report and exit codes a scheduler sees: healthy, unhealthy, did not run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

from lbnorm import InputError
from lbnorm.cli import main
from lbnorm.output.run_report import build_run_report, format_run_report


@pytest.fixture
def tree(tmp_path: Path, golden_dir: Path) -> Path:
    root = tmp_path / "tree"
    for path in sorted(golden_dir.glob("*.json")):
        org, _, name = path.stem.partition("__")
        (root / org / name).mkdir(parents=True)
        shutil.copy(path, root / org / name / "results_2024-05-01T00-00-00.000000.json")
    return root


def _report(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def test_nightly_run_reports_inputs_models_health_and_timings(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "run",
        str(tree),
        "--out",
        str(tmp_path / "out"),
        "--cache",
        str(tmp_path / "cache"),
        "--report",
        str(tmp_path / "r.json"),
        "--health",
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "cache      " in printed
    assert "8 parsed, 0 cached, 0 rejected, 0 dropped" in printed
    assert "all checks passed" not in printed  # 8 models: every check was skipped
    assert "healthy" not in printed  # nothing was checked: nothing is called healthy
    assert (
        "health     not checked (8 models, at least 30 needed)" in printed.splitlines()
    )
    assert f"report     {tmp_path / 'r.json'}: not checked, exit 0" in printed
    report = _report(tmp_path / "r.json")
    assert (
        report["report"],
        report["format"],
        report["status"],
        report["exit_code"],
    ) == ("lbnorm-run", 1, "not checked", 0)
    assert {
        key: report["inputs"][key]
        for key in ("seen", "parsed", "cached", "superseded", "rejected")
    } == {
        "seen": 8,
        "parsed": 8,
        "cached": 0,
        "superseded": 0,
        "rejected": 0,
    }
    assert report["models"] | {"missing_policy": ""} == {
        "variants": 8,
        "models": 8,
        "complete": 8,
        "incomplete": 0,
        "ranked": 8,
        "missing_policy": "",
        "lost": 0,
    }
    # 8 models: every check skipped (min_models = 30): nothing was checked, so
    # nothing passed; the run is "not checked" (exit 0) and says why
    assert report["health"]["checked"] is False
    assert report["health"]["reason"] == "8 models, at least 30 needed"
    assert report["health"]["passed"] is None
    assert {row["status"] for row in report["health"]["table"]} == {"skipped"}
    assert report["health"]["skipped"] == 6 + 40
    assert (
        "every health check skipped: too few models for any check (min_models)"
        in report["warnings"]
    )
    assert (report["status"], report["exit_code"]) == ("not checked", 0)
    assert list(report["timings_s"]) == [
        "read (parse cache)",
        "normalize",
        "health",
        "write",
        "total",
    ]
    assert all(seconds >= 0 for seconds in report["timings_s"].values())
    assert report["output"] == str(tmp_path / "out")
    assert (tmp_path / "out" / "health.parquet").is_file()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (
        manifest["outputs"]["health.parquet"]["rows"] == 6 + 40
    )  # benchmarks, subtasks
    assert main(args) == 0
    again = _report(tmp_path / "r.json")
    assert (again["inputs"]["parsed"], again["inputs"]["cached"]) == (0, 8)


def test_rejected_file_means_ran_but_unhealthy(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tree / "broken" / "model" / "results_2024-05-01T00-00-00.000000.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"results": [1, 2]}')
    code = main(
        [
            "run",
            str(tree),
            "--out",
            str(tmp_path / "out"),
            "--cache",
            str(tmp_path / "c"),
            "--report",
            str(tmp_path / "r.json"),
        ]
    )
    assert code == 7
    printed = capsys.readouterr().out
    assert f"rejected   {bad}: 'results' is not an object." in printed.splitlines()
    assert printed.count(str(bad)) == 1  # the path once, not twice
    report = _report(tmp_path / "r.json")
    assert (report["status"], report["exit_code"]) == ("unhealthy", 7)
    # the file names no model and nothing parsed it before: its folders name it
    variant = "broken/model (named by its folder; precision and revision unknown)"
    assert f"lost       {variant}: no other results file holds this variant" in printed
    assert report["problems"] == [
        f"1 input file(s) rejected; 1 variant(s) lost: {variant}"
    ]
    assert report["inputs"]["rejected_files"] == [
        {
            "path": str(bad),
            "reason": f"{bad}: 'results' is not an object.",
            "model": "broken/model",
            "precision": None,
            "revision": None,
            "chat_template": None,
            "variant_from": "folder",
            "other_files": 0,
            "lost": True,
        }
    ]
    assert report["models"]["lost"] == 1
    assert (
        tmp_path / "out" / "leaderboard.parquet"
    ).is_file()  # the other 8 models were written
    assert len(pd.read_parquet(tmp_path / "out" / "leaderboard.parquet")) == 8


def test_a_file_gone_bad_names_the_variant_lost_with_it(
    tmp_path: Path, full_structure_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under --cache a rejected file drops its variant from the board: the summary,
    the manifest and the run report name that variant, as far as it is known."""
    tree = tmp_path / "tree"
    shutil.copytree(full_structure_dir, tree)
    args = ["run", str(tree), "--out", str(tmp_path / "out"), "--cache"]
    args += [str(tmp_path / "c"), "--report", str(tmp_path / "r.json"), "--top", "0"]
    assert main([*args, "--quiet"]) == 0  # last night: both variants
    (yi,) = (tree / "01-ai" / "Yi-34B-Chat").iterdir()
    yi.write_text('{"results": {"leaderboard_ifeval": ')  # truncated: names nothing
    (llama,) = (tree / "meta-llama" / "Meta-Llama-3-8B-Instruct").iterdir()
    older = llama.with_name("results_2024-01-01T00-00-00.000000.json")
    document = json.loads(llama.read_text())
    document["results"]["leaderboard_ifeval"]["inst_level_strict_acc,none"] = 81.0
    older.write_text(json.dumps(document))  # an older re-run, a percentage in it
    stray = tree / "new-org" / "new-model" / "results_2025-01-01T00-00-00.000000.json"
    stray.parent.mkdir(parents=True)
    stray.write_text("{")
    yi_variant = (
        "01-ai/Yi-34B-Chat (bfloat16, revision 2e528b6a80fb, chat template; "
        "as an earlier version of the file named it)"
    )
    llama_variant = (
        "meta-llama/Meta-Llama-3-8B-Instruct (bfloat16, revision e1945c40cd54, "
        "chat template)"
    )
    stray_variant = (
        "new-org/new-model (named by its folder; precision and revision unknown)"
    )
    for night in ("tonight", "tomorrow, nothing changed"):  # rejections are remembered
        assert main(args) == 7, night
        printed = capsys.readouterr().out.splitlines()
        rejected = [
            line
            for line in printed
            if line[:10].strip() in {"rejected", "lost", "kept"}
        ]
        assert rejected == [
            f"rejected   {yi}: not valid JSON: Expecting value (line 1, column 36).",
            f"lost       {yi_variant}: no other results file holds this variant, so it "
            "is not on the board",
            f"rejected   {older}: results['leaderboard_ifeval']"
            "['inst_level_strict_acc,none'] is 81.0, outside [0, 1] (a percentage?)",
            f"kept       {llama_variant}: still on the board from 1 other results file",
            f"rejected   {stray}: not valid JSON: Expecting property name enclosed in "
            "double quotes (line 1, column 2).",
            f"lost       {stray_variant}: no other results file holds this variant, so "
            "it is not on the board",
        ], night
        board = pd.read_parquet(tmp_path / "out" / "leaderboard.parquet")
        assert board["model"].tolist() == ["meta-llama/Meta-Llama-3-8B-Instruct"]
        report = _report(tmp_path / "r.json")
        assert report["problems"] == [
            f"3 input file(s) rejected; 2 variant(s) lost: {yi_variant}, {stray_variant}"
        ]
        assert report["models"]["lost"] == 2
        manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
        named = [
            tuple(record[key] for key in ("model", "precision", "revision"))
            + tuple(record[key] for key in ("variant_from", "other_files", "lost"))
            for record in manifest["rejected"]
        ]
        yi_revision = "2e528b6a80fb064a0a746c5ca43114b135e30464"
        llama_revision = "e1945c40cd546c78e41f1151f4db032b271faeaa"
        assert named == [
            ("01-ai/Yi-34B-Chat", "bfloat16", yi_revision, "cache", 0, True),
            (llama_variant.split(" ")[0], "bfloat16", llama_revision, "file", 1, False),
            ("new-org/new-model", None, None, "folder", 0, True),
        ]
        in_report = {
            record["path"]: record | {"reason": ""}
            for record in report["inputs"]["rejected_files"]
        }
        assert in_report == {
            record["path"]: record | {"reason": ""} for record in manifest["rejected"]
        }


def test_failed_run_reports_why_and_keeps_the_output(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", str(tree), "--out", str(out), "--quiet"]) == 0
    before = (out / "leaderboard.parquet").read_bytes()
    code = main(
        [
            "run",
            str(tmp_path / "missing.json"),
            "--out",
            str(out),
            "--report",
            str(tmp_path / "r.json"),
        ]
    )
    assert code == InputError.exit_code == 4
    assert "Hint: check the path" in capsys.readouterr().err
    report = _report(tmp_path / "r.json")
    assert (report["status"], report["exit_code"], report["output"]) == (
        "failed",
        4,
        None,
    )
    assert report["error"]["type"] == "InputError"
    assert "no such file or directory" in report["error"]["message"]
    assert (out / "leaderboard.parquet").read_bytes() == before


def test_failed_health_check_exits_7(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    strict = tmp_path / "strict.toml"
    strict.write_text("[health]\nmin_loo_spearman = 0.7\n")
    code = main(
        [
            "run",
            "--out",
            str(tmp_path / "out"),
            "--health",
            "--health-config",
            str(strict),
            "--intervals",
            "--report",
            str(tmp_path / "r.json"),
            "--top",
            "3",
        ]
    )
    assert code == 7
    printed = capsys.readouterr().out
    assert "# lbnorm health: 2 failed" in printed
    assert "## Rank intervals (95%)" in printed
    report = _report(tmp_path / "r.json")
    assert report["problems"] == [
        "health: benchmark IFEval failed loo_correlation",
        "health: benchmark MUSR failed loo_correlation",
    ]
    assert [row["benchmark"] for row in report["health"]["failed"]] == [
        "IFEval",
        "MUSR",
    ]
    intervals = pq.read_table(tmp_path / "out" / "intervals.parquet")
    assert intervals.num_rows == 4576
    assert (
        intervals.schema.field("rank_best")
        .metadata[b"doc"]
        .startswith(b"Best rank consistent")
    )


def test_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--full"]) == 2
    assert (
        "(--full) rebuilds the parse cache; it needs a cache (--cache DIR)"
        in capsys.readouterr().err
    )
    assert main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    for option in (
        "--cache",
        "--full",
        "--report",
        "--health",
        "--health-config",
        "--intervals",
    ):
        assert option in text


def test_report_json_is_strict() -> None:
    health = pd.DataFrame(
        {
            "level": ["benchmark"],
            "benchmark": ["A"],
            "subtask": [""],
            "loo_spearman": [float("nan")],
            "status": ["skipped"],
            "failed": [""],
        }
    )
    report = build_run_report(
        None,
        version="0",
        started_at="a",
        finished_at="b",
        out=None,
        stages={"total": 1.0},
        health=health,
        error=KeyboardInterrupt(),
    )
    assert (report["status"], report["exit_code"]) == ("failed", 130)
    assert json.loads(format_run_report(report))["error"]["type"] == "KeyboardInterrupt"


def test_health_verdict_says_skipped_not_passed(tree: Path, tmp_path: Path) -> None:
    from lbnorm.analysis.render import format_health

    out = tmp_path / "out"
    assert main(["run", str(tree), "--out", str(out), "--health", "--quiet"]) == 0
    health = pd.read_parquet(out / "health.parquet")
    assert set(health["status"]) == {"skipped"}

    def verdict(statuses: list[str]) -> str:
        return format_health(health.assign(status=statuses)).splitlines()[0]

    n_rows = len(health)
    assert verdict(["skipped"] * n_rows) == (
        "# lbnorm health: every check skipped: at most 8 models, fewer than a check "
        "needs (min_models, default 30)"
    )
    assert verdict(["pass"] * n_rows) == "# lbnorm health: all checks passed"
    assert verdict(["pass"] * (n_rows - 3) + ["skipped"] * 3) == (
        "# lbnorm health: all checks passed (3 skipped)"
    )
    assert verdict(["fail"] + ["skipped"] * (n_rows - 1)) == (
        f"# lbnorm health: 1 failed, {n_rows - 1} skipped"
    )


def test_thresholds_name_the_models_a_check_needs(tree: Path, tmp_path: Path) -> None:
    """With ``min_models`` lowered to the 8 models, the checks run and the run is
    healthy or not by them; the reason names the thresholds' own minimum."""
    config = tmp_path / "health.toml"
    config.write_text("[health]\nmin_models = 9\n")
    args = ["run", str(tree), "--out", str(tmp_path / "out"), "--quiet", "--health"]
    report_path = tmp_path / "r.json"
    assert (
        main([*args, "--health-config", str(config), "--report", str(report_path)]) == 0
    )
    report = _report(report_path)
    assert report["status"] == "not checked"
    assert report["health"]["reason"] == "8 models, at least 9 needed"
    config.write_text("[health]\nmin_models = 8\n")
    code = main([*args, "--health-config", str(config), "--report", str(report_path)])
    report = _report(report_path)
    assert report["health"]["checked"] is True
    assert "reason" not in report["health"]
    assert report["status"] in {"healthy", "unhealthy"}
    assert code == (0 if report["status"] == "healthy" else 7)


def test_reruns_go_to_the_report_and_warnings_to_the_manifest(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The summary's one line per re-run variant: every detail in both files."""
    tree = tmp_path / "tree"
    shutil.copytree(fixtures / "openllm_v1" / "tree", tree)
    (tree / "README.md").write_text("a stray file: skipped, with a warning\n")
    out, report = tmp_path / "out", tmp_path / "run.json"
    argv = ["run", str(tree), "--suite", "openllm-v1", "--out", str(out)]
    assert main([*argv, "--report", str(report), "--quiet"]) == 0
    (rerun,) = _report(report)["inputs"]["reruns"]
    assert rerun["model"] == "meta-llama/Llama-2-7b-hf"
    assert [d["benchmark"] for d in rerun["differences"]] == ["GSM8K"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["reruns"] == [rerun]
    (warning,) = manifest["warnings"]
    assert warning.startswith("skipped 1 file(s) found but not read")
    assert "ignored" in manifest["inputs"][0]
    clean = tmp_path / "clean"
    assert (
        main(
            [
                "run",
                str(fixtures / "tables" / "seed_examples.csv"),
                "--out",
                str(clean),
                "--quiet",
            ]
        )
        == 0
    )
    assert {"reruns", "warnings"}.isdisjoint(
        json.loads((clean / "manifest.json").read_text())
    )


def test_the_summary_names_ten_rejected_files_then_counts_the_rest() -> None:
    from lbnorm.cli.run import _rejected_lines

    records = [
        {
            "path": f"t/o/m{n:02d}/r.json",
            "reason": "bad",
            "model": f"o/m{n:02d}",
            "variant_from": "folder",
            "other_files": n % 2,
            "lost": n % 2 == 0,  # every other one kept by another file
        }
        for n in range(14)
    ]
    lines = _rejected_lines(records, report="r.json")
    assert [line[:10].strip() for line in lines] == [
        "rejected",
        "lost",
        "rejected",
        "kept",
    ] * 5 + ["rejected"]
    assert lines[-1] == (
        "rejected   and 4 more file(s) (7 variant(s) lost in all; r.json lists every one)"
    )
    assert lines[3] == (
        "kept       o/m01 (named by its folder; precision and revision unknown): "
        "still on the board from 1 other results file"
    )
