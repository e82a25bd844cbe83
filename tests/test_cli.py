from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm.cli import main

REPO = Path(__file__).parent.parent


def _cell(frame: pd.DataFrame, row: object, column: str) -> Any:
    """One value, typed loosely: pandas-stubs types `.loc[row, column]` as a union."""
    return frame[column].to_dict()[row]


def test_help_explains_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    text = capsys.readouterr().out
    assert "max(0, (raw - lb) / (1 - lb))" in text
    assert "exit codes:" in text
    assert main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    for option in (
        "--suite",
        "--out",
        "--missing",
        "--unknown",
        "--extra-columns",
        "--quiet",
    ):
        assert option in text


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--missing", "sometimes"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main([]) == 2


def test_run_prints_a_summary(
    golden_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "run",
                *map(str, sorted(golden_dir.glob("*.json"))),
                "--out",
                str(tmp_path / "o"),
                "--top",
                "3",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "inputs     8 file(s), 320 scores" in text
    assert "models     8 (8 variants), 0 incomplete (missing=exclude)" in text
    assert "top 3:" in text
    assert "1  01-ai/Yi-34B-Chat" in text
    assert "24.23" in text  # Yi's published average, rounded for display
    assert (
        f"wrote      {tmp_path / 'o'}/ (subtasks, benchmarks, leaderboard .parquet; "
        "manifest.json)" in text
    )


def test_the_summary_names_only_the_tables_written(
    golden_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    inputs = map(str, sorted(golden_dir.glob("*.json")))
    assert main(["run", *inputs, "--out", str(out), "--no-subtasks"]) == 0
    text = capsys.readouterr().out
    assert sorted(path.name for path in out.iterdir()) == [
        "benchmarks.parquet",
        "leaderboard.parquet",
        "manifest.json",
    ]
    assert (
        f"wrote      {out}/ (benchmarks, leaderboard .parquet; manifest.json)" in text
    )


def test_quiet_prints_nothing(
    golden_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "run",
                str(golden_dir / "Amu__t1-3B.json"),
                "--out",
                str(tmp_path / "o"),
                "--quiet",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == ""


def test_incomplete_models_are_counted_and_unranked(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "run",
                str(fixtures / "tables" / "seed_examples.csv"),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    assert "2 incomplete (missing=exclude)" in capsys.readouterr().out
    board = pd.read_parquet(tmp_path / "o" / "leaderboard.parquet")
    assert board["rank"].isna().all()
    assert board["average"].isna().all()
    assert (
        main(
            [
                "run",
                str(fixtures / "tables" / "seed_examples.csv"),
                "--out",
                str(tmp_path / "p"),
                "--missing",
                "partial",
                "--quiet",
            ]
        )
        == 0
    )
    board = pd.read_parquet(tmp_path / "p" / "leaderboard.parquet").set_index("model")
    assert _cell(board, "seed/gpqa-example", "average") == pytest.approx(
        46.666666666666664
    )
    assert _cell(board, "seed/musr-example", "average") == pytest.approx(35.0)
    assert board["n_benchmarks"].tolist() == [1, 1]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--suite", "nope"], 3, "neither a built-in suite nor a file"),
        (["missing-file.csv"], 4, "missing-file.csv: no such file or directory.\nHint"),
    ],
)
def test_errors_exit_with_their_code(
    args: list[str],
    code: int,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", *args, "--out", str(tmp_path / "o")]) == code
    err = capsys.readouterr().err
    assert err.startswith("lbnorm: error: ")
    assert message in err
    assert "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_validation_lists_every_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scores.csv"
    path.write_text(
        "model,benchmark,subtask,raw_score\n"
        "a,GPQA,diamond,55\n"
        "a,GPQA,extended,-0.2\n"
        "a,GPQA,nonsense,0.3\n"
        "b,MMLU-PRO,mmlu_pro,0.4\n"
        "b,MMLU-PRO,mmlu_pro,0.5\n"
    )
    assert main(["run", str(path), "--out", str(tmp_path / "o")]) == 5
    err = capsys.readouterr().err
    assert "5 score(s) failed validation" in err
    assert (
        "percent_scale: " + str(path) + " line 2 (a / GPQA / diamond: raw_score='55')"
        in err
    )
    assert "divide by 100" in err
    assert "out_of_range: " + str(path) + " line 3 (a / GPQA / extended" in err
    assert "unknown_subtask: " + str(path) + " line 4 (a / GPQA / nonsense)" in err
    assert (
        "duplicate_score: "
        + str(path)
        + " line 5 (b / MMLU-PRO / mmlu_pro: also at line 6)"
        in err
    )
    assert "line 6 (b / MMLU-PRO / mmlu_pro: also at line 5)" in err
    assert not (tmp_path / "o").exists()


def test_unknown_ignore_drops_and_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "scores.csv"
    path.write_text(
        "model,benchmark,subtask,raw_score\na,MMLU-PRO,mmlu_pro,0.55\na,DROP,drop,0.1\n"
    )
    assert (
        main(
            [
                "run",
                str(path),
                "--out",
                str(tmp_path / "o"),
                "--unknown",
                "ignore",
                "--missing",
                "partial",
            ]
        )
        == 0
    )
    assert (
        "ignored    1 rows of subtasks the suite does not define"
        in capsys.readouterr().out
    )


def test_suites_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["suites"]) == 0
    text = capsys.readouterr().out
    assert "openllm-v1" in text
    assert "openllm-v2" in text
    assert main(["suites", "show", "openllm-v2"]) == 0
    text = capsys.readouterr().out
    assert "GPQA: pool-then-normalize" in text
    assert "1/3 = 0.333333" in text
    assert main(["suites", "show", "openllm-v2", "--toml"]) == 0
    assert 'name = "openllm-v2"' in capsys.readouterr().out
    assert main(["suites", "show"]) == 2


# --- the run's summary (issue 13, section 4) ------------------------------------------


def _run_options() -> list[str]:
    """Every option `lbnorm run --help` lists (long forms)."""
    import argparse

    from lbnorm.cli import build_parser

    parser = build_parser()
    commands = next(
        action
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    return [
        option
        for action in commands.choices["run"]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]


def test_the_run_page_synopsis_lists_every_run_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    page = (REPO / "docs" / "run.md").read_text()
    synopsis = page.split("## Options\n\n```\n")[1].split("lbnorm suites")[0]
    options = _run_options()
    assert "--health-config" in options
    assert [option for option in options if option not in synopsis] == []
    assert main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    assert all(option in text for option in options)


def test_summary_counts_with_separators_and_lists_superseded_files(
    golden_dir: Path, tmp_path: Path
) -> None:
    from dataclasses import replace

    import pyarrow as pa

    from lbnorm import run
    from lbnorm.faces.terminal import format_summary

    result = run(sorted(golden_dir.glob("*.json")))
    n_files = 3_000
    superseded = [
        f"org/m{i}/results_2024-01-01.json" if i % 2 else None for i in range(n_files)
    ]
    files = pa.table(
        {
            "path": [f"org/m{i}/results_2023-01-01.json" for i in range(n_files)],
            "format": ["lm-eval-harness"] * n_files,
            "sha256": ["0" * 64] * n_files,
            "bytes": [10] * n_files,
            "rows": [40] * n_files,
            "superseded_by": pa.array(superseded, pa.string()),
            "n_ignored": [1] * n_files,
        }
    )
    text = format_summary(replace(result, file_table=files), out="out")
    lines = text.splitlines()
    assert (
        "inputs     3,000 file(s), 320 scores, 1,500 superseded by newer runs, "
        "3,000 results entries not in the suite" in lines
    )
    at = lines.index(
        "superseded org/m1/results_2023-01-01.json (by results_2024-01-01.json)"
    )
    assert lines[at + 1] == (
        "           org/m3/results_2023-01-01.json (by results_2024-01-01.json)"
    )
    assert lines[at + 3] == "           and 1,497 more (manifest.json lists every file)"
    assert lines[at + 4].startswith("models     ")


def test_summary_lists_the_superseded_files_of_a_results_tree(
    golden_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "tree" / "01-ai" / "Yi-34B-Chat"
    tree.mkdir(parents=True)
    source = golden_dir / "01-ai__Yi-34B-Chat.json"
    older = tree / "results_2024-05-01T00-00-00.000000.json"
    newer = tree / "results_2024-06-01T00-00-00.000000.json"
    older.write_bytes(source.read_bytes())
    newer.write_bytes(source.read_bytes())
    argv = ["run", str(tmp_path / "tree"), "--out", str(tmp_path / "o"), "--top", "0"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith(
        "inputs     2 file(s), 40 scores, 1 superseded by newer runs, 1 variant(s) re-run"
    )
    assert lines[2] == (
        f"re-run     01-ai/Yi-34B-Chat (precision unknown): 2 files, newest {newer.name}; "
        f"{older.name} superseded"
    )


def test_the_summary_shows_a_screenful_of_reruns_at_most(
    golden_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twelve re-run variants: five lines, then how many more; the manifest has all."""
    text = (golden_dir / "01-ai__Yi-34B-Chat.json").read_text()
    for model in range(12):
        folder = tmp_path / "tree" / "org" / f"m{model:02d}"
        folder.mkdir(parents=True)
        source = text.replace("01-ai/Yi-34B-Chat", f"org/m{model:02d}")
        (folder / "results_2024-05-01T00-00-00.000000.json").write_text(source)
        newer = json.loads(source)
        newer["results"]["leaderboard_gpqa_main"]["acc_norm,none"] = 0.5
        (folder / "results_2024-06-01T00-00-00.000000.json").write_text(
            json.dumps(newer)
        )
    out = tmp_path / "o"
    assert main(["run", str(tmp_path / "tree"), "--out", str(out), "--top", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("re-run "))
    assert lines[at].startswith("re-run     org/m00 (precision unknown): 2 files, ")
    assert lines[at].endswith(
        "; 1 older score differs (1 benchmark), e.g. GPQA main "
        f"{json.loads(text)['results']['leaderboard_gpqa_main']['acc_norm,none']:.3f} in "
        "results_2024-05-01T00-00-00.000000.json, 0.500 in the newest"
    )
    assert all(line.startswith("           org/m") for line in lines[at + 1 : at + 5])
    assert lines[at + 5] == (
        '           and 7 more variant(s) re-run (manifest.json lists each: "reruns")'
    )
    assert len(lines) < 24  # a screenful
    reruns = json.loads((out / "manifest.json").read_text())["reruns"]
    assert [rerun["model"] for rerun in reruns] == [f"org/m{m:02d}" for m in range(12)]


def test_failures_file_holds_every_failure_in_file_and_line_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """2,400 bad rows (more than the thousand per check the message keeps), two checks."""
    lines = ["model,benchmark,subtask,raw_score"]
    for model in range(1_200):
        lines += [f"m{model},GPQA,main,55", f"m{model},GPQA,diamond,-1"]
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n")
    argv = ["run", str(path), "--out", str(tmp_path / "o")]
    assert main(argv) == 5
    assert capsys.readouterr().err.startswith(
        "lbnorm: error: 2,400 score(s) failed validation (the first 2,000 are listed; "
        "--failures FILE writes every one):\n"
    )
    for name in ("f.csv", "f.parquet"):
        assert main([*argv, "--failures", str(tmp_path / name)]) == 5
        assert capsys.readouterr().err.startswith(
            "lbnorm: error: 2,400 score(s) failed validation (2,400 failure row(s) in "
            f"{tmp_path / name}, in file and line order):\n"
        )
        failures = pq.read_table(tmp_path / name) if name.endswith("parquet") else None
        if failures is None:
            import pyarrow.csv as pacsv

            failures = pacsv.read_csv(
                tmp_path / name,
                convert_options=pacsv.ConvertOptions(
                    column_types={"row": pa.string(), "value": pa.string()}
                ),
            )
        assert failures.num_rows == 2_400
        assert failures["row"].to_pylist() == [str(line) for line in range(2, 2_402)]
        assert failures["value"].to_pylist()[:2] == ["55", "-1"]
        assert failures["check"].to_pylist()[:2] == ["percent_scale", "out_of_range"]
    (tmp_path / "mine.csv").write_text("not lbnorm's\n")
    assert main([*argv, "--failures", str(tmp_path / "mine.csv")]) == 6
    assert "exists and was not written by lbnorm" in capsys.readouterr().err
    assert (tmp_path / "mine.csv").read_text() == "not lbnorm's\n"


def test_summary_says_how_many_are_unranked_and_how_to_rank_them(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", str(fixtures / "tables" / "seed_examples.csv"), "--top", "0"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert (
        "unranked   2 incomplete variant(s) have no average and no rank "
        "(--missing exclude); --missing partial averages the benchmarks they have"
    ) in text.splitlines()
    assert main([*argv, "--out", str(tmp_path / "p"), "--missing", "partial"]) == 0
    assert "unranked" not in capsys.readouterr().out
