from __future__ import annotations

import datetime
from pathlib import Path

import pandas as pd
import pytest

from lbnorm import LbnormError, run
from lbnorm.cli import main
from lbnorm.core.options import RunOptions
from lbnorm.faces.show import (
    Filter,
    compare_variants,
    find_variants,
    format_comparison,
    format_leaderboard,
    match_benchmark,
    select_leaderboard,
)
from lbnorm.output.reader import Output

YI = "01-ai/Yi-34B-Chat"
LLAMA = "meta-llama/Meta-Llama-3-8B-Instruct"


@pytest.fixture(scope="module")
def golden_out(tmp_path_factory: pytest.TempPathFactory, golden_dir: Path) -> Path:
    folder = tmp_path_factory.mktemp("show")
    meta = folder / "meta.csv"
    meta.write_text(
        f"model,params_b,type,submission_date\n{YI},34.39,chatmodels,2024-06-12\n"
        f"{LLAMA},8.03,chatmodels,2024-06-12\nAmu/t1-3B,3.4,pretrained,2025-01-02\n"
    )
    run(
        sorted(golden_dir.glob("*.json")),
        out=folder / "out",
        options=RunOptions(metadata=str(meta)),
    )
    return folder / "out"


@pytest.fixture(scope="module")
def board(golden_out: Path) -> pd.DataFrame:
    return Output.open(golden_out).frame("leaderboard")


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": ["org/alpha", "org/beta", "other/gamma"],
            "params_b": [7.0, 70.0, float("nan")],
            "flagged": [False, True, False],
            "submission_date": [
                datetime.date(2024, 6, 1),
                datetime.date(2025, 1, 5),
                None,
            ],
            "type": ["chat", "pretrained", None],
        }
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("params_b<10", [True, False, False]),
        ("params_b >= 7", [True, True, False]),
        ("params_b!=7", [False, True, True]),
        ("flagged=true", [False, True, False]),
        ("submission_date>=2025-01-01", [False, True, False]),
        ("type=chat", [True, False, False]),
        ("model~^ORG/", [True, True, False]),
    ],
)
def test_filters(text: str, expected: list[bool]) -> None:
    assert Filter.parse(text).mask(_frame()).tolist() == expected


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (
            "params_b",
            r"cannot read the filter 'params_b'.\nHint: write COLUMN OP VALUE",
        ),
        (
            "param_b<3",
            r"no column 'param_b'; did you mean \['params_b'\]\?\nHint: filter on one of",
        ),
        ("params_b<big", r"'big' does not fit column 'params_b'.*\nHint: numbers"),
        (
            "flagged=maybe",
            r"'maybe' does not fit.*\nHint: numbers for numeric columns, true/false",
        ),
        ("model~(", r"not a regular expression.*\nHint: escape"),
    ],
)
def test_bad_filters_say_how_to_fix_them(text: str, match: str) -> None:
    with pytest.raises(LbnormError, match=match):
        Filter.parse(text).mask(_frame())


@pytest.mark.parametrize("text", ["params_b", "model~("])
def test_where_syntax_errors_are_usage_errors(
    golden_out: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """As arena's --where: exit 2."""
    assert main(["show", str(golden_out), "--where", text]) == 2
    assert "\nHint: " in capsys.readouterr().err


def test_select_sorts_by_a_benchmark_and_keeps_positions(board: pd.DataFrame) -> None:
    selected = select_leaderboard(board, benchmark="gpqa", top=3)
    assert selected["GPQA"].tolist() == sorted(board["GPQA"].tolist(), reverse=True)[:3]
    assert selected["position"].tolist() == [1, 2, 3]
    assert selected["model"].iloc[0] == YI
    small = select_leaderboard(
        board, filters=[Filter.parse("params_b<10")], model="llama"
    )
    assert small["model"].tolist() == [LLAMA]
    assert select_leaderboard(board, precision="float16").empty


def test_match_benchmark() -> None:
    names = ["IFEval", "MATH Lvl 5", "MMLU-PRO", "MUSR"]
    assert match_benchmark("mmlu", names) == "MMLU-PRO"
    with pytest.raises(LbnormError, match=r"'m' is ambiguous.*\nHint: use one of"):
        match_benchmark("m", names)
    with pytest.raises(LbnormError, match=r"'drop' is not in this leaderboard.\nHint"):
        match_benchmark("drop", names)


def test_format_leaderboard(board: pd.DataFrame) -> None:
    text = format_leaderboard(select_leaderboard(board, top=2))
    header, first, second = text.splitlines()
    assert header.split() == [
        "rank", "model", "precision", "params_b", "size_class", "average",
        "IFEval", "BBH", "MATH", "Lvl", "5", "GPQA", "MUSR", "MMLU-PRO",
    ]  # fmt: skip
    assert first.split()[:4] == ["1", YI, "34.39", "20-40B"]
    assert first.split()[4] == "24.23"
    assert second.split()[1] == LLAMA
    by_math = format_leaderboard(
        select_leaderboard(board, benchmark="MATH Lvl 5", top=1), benchmark="MATH Lvl 5"
    )
    assert by_math.splitlines()[0].split()[:2] == ["#", "rank"]  # position != rank
    short = format_leaderboard(select_leaderboard(board, top=1), name_width=9)
    assert "01-a…Chat" in short
    with pytest.raises(
        LbnormError, match=r"no column\(s\) \['nope'\].*\nHint: choose from"
    ):
        format_leaderboard(board, columns=["model", "nope"])


def test_find_variants(board: pd.DataFrame) -> None:
    found = find_variants(board, ["yi-34b", LLAMA])
    assert found["model"].tolist() == [YI, LLAMA]
    assert found["label"].tolist() == ["Yi-34B-Chat", "Meta-Llama-3-8B-Instruct"]
    with pytest.raises(
        LbnormError, match=r"'llama' matches 3 models.*\nHint: give the full name"
    ):
        find_variants(board, ["llama"])
    with pytest.raises(
        LbnormError, match=r"did you mean \['01-ai/Yi-34B-Chat'\]\?\nHint"
    ):
        find_variants(board, ["01-ai/Yi-34B-Chatt"])


def test_labels_tell_variants_apart() -> None:
    variants = pd.DataFrame(
        {
            "model": ["a/m", "a/m", "b/m"],
            "precision": ["bfloat16", "float16", "bfloat16"],
            "revision": ["abc", "abc", "abc"],
            "chat_template": [True, True, True],
            "average": [1.0, 2.0, 3.0],
        }
    )
    assert find_variants(variants, ["a/m", "b/m"])["label"].tolist() == [
        "a/m [bfloat16]",
        "a/m [float16]",
        "b/m",
    ]


def test_compare_side_by_side(golden_out: Path, board: pd.DataFrame) -> None:
    variants = find_variants(board, [YI, LLAMA])
    models = [YI, LLAMA]
    benchmarks = Output.open(golden_out).frame("benchmarks", models=models)
    subtasks = Output.open(golden_out).frame("subtasks", models=models)
    table = compare_variants(variants, benchmarks, subtasks)
    assert table["score"].tolist()[:5] == [
        "average",
        "IFEval",
        "  prompt_level_strict",
        "  inst_level_strict",
        "BBH",
    ]
    assert "MMLU-PRO" in table["score"].tolist()
    assert not table["score"].str.contains("mmlu_pro").any()  # one subtask: not split
    rows = table.set_index("score")
    expected = benchmarks.loc[benchmarks["benchmark"] == "GPQA"].set_index("model")
    gpqa = expected["normalized_score"].to_dict()
    assert rows["Yi-34B-Chat"].to_dict()["GPQA"] == gpqa[YI]
    assert rows["Δ"].to_dict()["GPQA"] == pytest.approx(gpqa[LLAMA] - gpqa[YI])
    assert rows["Yi-34B-Chat"].to_dict()["average"] == pytest.approx(24.22666, abs=1e-5)
    raw = compare_variants(variants, benchmarks, subtasks, value="raw_score")
    assert "average" not in raw["score"].tolist()
    text = format_comparison(variants, table)
    assert text.splitlines()[1].split()[:2] == ["Yi-34B-Chat", YI]


def test_cli_show_and_compare(
    golden_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(golden_out)
    assert (
        main(
            [
                "show",
                out,
                "--top",
                "2",
                "--where",
                "params_b<10",
                "--benchmark",
                "ifeval",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert text.splitlines()[0] == (
        "top 2 of 2 variants where params_b<10, by IFEval (8 in all)"
    )
    assert LLAMA in text.splitlines()[2]
    assert (
        main(
            [
                "show",
                out,
                "--rank-within",
                "type",
                "--columns",
                "model,rank_within_type",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["model", "rank_within_type"]
    assert lines[2].split() == [YI, "1"]
    assert main(["compare", out, "yi-34b", "llama-3-8b-instruct", "--raw"]) == 0
    text = capsys.readouterr().out
    assert "  boolean_expressions" in text
    assert "Δ" in text
    assert main(["compare", out, "nobody"]) == 2  # a usage error
    assert "Hint: give the full name" in capsys.readouterr().err
    assert main(["show", out, "--exclude-flagged"]) == 4
    assert "Hint: pass a metadata table" in capsys.readouterr().err


def test_compare_without_subtasks_parquet(
    golden_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    run(sorted(golden_dir.glob("*.json")), out=out, options=RunOptions(subtasks=False))
    assert not (out / "subtasks.parquet").exists()
    assert main(["compare", str(out), "yi-34b", "llama-3-8b-instruct"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[4]
        == "Δ = Meta-Llama-3-8B-Instruct minus Yi-34B-Chat (second minus first)"
    )
    assert lines[5].split()[-4:] == ["Δ", "(2nd", "-", "1st)"]  # the header says it
    assert [line.split()[0] for line in lines[6:]] == [
        "average",
        "IFEval",
        "BBH",
        "MATH",
        "GPQA",
        "MUSR",
        "MMLU-PRO",
    ]
    assert lines[7].split()[1:] == ["46.99", "74.08", "27.10"]  # numbers, right-aligned


def test_types_show_in_words_and_filter_by_either_spelling(
    golden_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13: `type` reads as words; the leaderboard API's spelling is `type_code`."""
    argv = ["show", str(golden_out), "--columns", "model,type,type_code"]
    assert main([*argv, "--where", "type_code=chatmodels"]) == 0
    by_code = capsys.readouterr().out.splitlines()
    assert by_code[0].startswith("top 2 of 2 variants where type_code=chatmodels")
    assert by_code[2].split("  ")[0] == YI
    assert "chat models (RLHF, DPO, IFT, ...)  chatmodels" in by_code[2]
    assert main([*argv, "--where", "type~chat models"]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == by_code[2:]
    # pretrained reads the same in both spellings
    assert main([*argv, "--where", "type=pretrained"]) == 0
    assert "Amu/t1-3B" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["show", "{out}", "--benchmark", "xyz"],
            "benchmark 'xyz' is not in this leaderboard",
        ),
        (
            ["show", "{out}", "--where", "paramsb>5"],
            "no column 'paramsb'; did you mean ['params_b']?",
        ),
        (["show", "{out}", "--where", "params_b"], "cannot read the filter 'params_b'"),
        (
            ["show", "{out}", "--where", "params_b>>5"],
            "'>5' does not fit column 'params_b'",
        ),
        (["show", "{out}", "--where", "model~("], "not a regular expression"),
        (["show", "{out}", "--columns", "nothing"], "no column(s) ['nothing']"),
        (["compare", "{out}", "qwen"], "model 'qwen' matches"),
        (
            ["compare", "{out}", "nobody-at-all"],
            "model 'nobody-at-all' is not in this leaderboard",
        ),
    ],
)
def test_usage_mistakes_exit_2(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name or filter the user typed that does not fit the output is a usage error."""
    out = tmp_path / "out"
    assert main(["run", "--quiet", "--out", str(out)]) == 0
    assert main([word.format(out=out) for word in argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "\nHint: " in err


def test_raw_columns_show_four_decimals_and_the_summary_reads_well(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Raw scores are fractions: two more decimals than the 0-100 scores; an output
    given as ``out/`` is named ``out/`` (not ``out//``); one variant is singular."""
    table = tmp_path / "one.csv"
    table.write_text(
        "model,benchmark,subtask,raw_score\n"
        "m,GPQA,diamond,0.61234\nm,GPQA,extended,0.5\nm,GPQA,main,0.5\n"
    )
    out = f"{tmp_path / 'out'}/"
    assert main(["run", str(table), "--out", out, "--missing", "partial"]) == 0
    printed = capsys.readouterr().out
    assert f"wrote      {out} (subtasks" in printed
    assert "models     1 (1 variant), 1 incomplete (missing=partial)" in printed
    assert main(["show", out, "--benchmark", "gpqa"]) == 0
    header, row = capsys.readouterr().out.splitlines()[1:3]
    assert "GPQA Raw" in header
    raw = (0.61234 * 198 + 0.5 * 546 + 0.5 * 448) / (198 + 546 + 448)
    assert f"{raw:.4f}" in row.split()
