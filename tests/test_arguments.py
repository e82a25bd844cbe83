"""Every number an option takes is checked against its range, before any work (issue 40, point 4).

The options are found by walking the parser, so a new numeric option fails
:func:`test_every_numeric_option_has_its_hostile_values` until its range is
checked here: a 24-digit ``run --top`` used to overflow Arrow's slice after the
new output was swapped in, ``--sum-memory inf`` and ``arena --max-memory 1e308``
to overflow ``int()``, ``--digits 1e23`` to fail in a format string and
``--digits 10000`` to print megabytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from option_values import BATTLES, GOLDEN, command_line, numeric_options

from lbnorm.cli import build_parser, main
from lbnorm.cli.arguments import MOST_DIGITS
from lbnorm.core.errors import OptionsError
from lbnorm.core.options import MOST_COUNT, MOST_GIB, RunOptions

HUGE = str(10**23)

#: Per (command, option): values that must be refused (exit 2, one message, a hint).
HOSTILE: dict[tuple[str, str], list[str]] = {
    ("run", "--top"): ["-1", HUGE],
    ("run", "--workers"): ["0", HUGE],
    ("run", "--sum-memory"): ["0", "-1", "nan", "inf", "1e308"],
    ("run", "--batch-rows"): ["0", HUGE],
    ("run", "--scheduler-timeout"): ["0", "-1", "nan", "inf", "1e308"],
    ("arena", "--l2"): ["-1", "nan", "inf", "1e308"],
    ("arena", "--bootstrap"): ["-1", HUGE],
    ("arena", "--seed"): ["-1"],
    ("arena", "--max-memory"): ["0", "nan", "inf", "1e308"],
    ("arena", "--daily-vote-per-user"): ["0", "-1"],
    ("arena", "--min-battles"): ["-1"],
    ("arena", "--top"): ["-1", HUGE],
    ("query", "--max-rows"): ["-1", HUGE],
    ("query", "--digits"): ["-1", "18", HUGE],
    ("show", "--top"): ["-1", HUGE],
    ("show", "--digits"): ["-1", "10000", HUGE],
    ("compare", "--digits"): ["-1", HUGE],
    ("report", "--top"): ["-1", HUGE],
    ("explain", "--digits"): ["-1", "10000", HUGE],
    **{
        (command, "--paired-alpha"): ["0", "1", "-1", "nan", "inf", "1e308"]
        for command in ("run", "compare", "diff")
    },
    **{
        (command, option): values
        for command in ("diff", "impact")
        for option, values in {
            "--moved": ["-1", HUGE],
            "--top": ["0", "-1", HUGE],
            "--largest": ["-1", HUGE],
        }.items()
    },
}


def test_every_numeric_option_has_its_hostile_values() -> None:
    found = {(name, action.option_strings[0]) for name, action in numeric_options()}
    assert found == set(HOSTILE)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A leaderboard output (the golden results files) and a ratings output."""
    root = tmp_path_factory.mktemp("outputs")
    board, ratings = root / "board", root / "ratings"
    assert main(["run", *GOLDEN, "--out", str(board), "--quiet"]) == 0
    assert main(["arena", BATTLES, "--out", str(ratings), "--quiet"]) == 0
    return board, ratings


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [(*key, value) for key, values in HOSTILE.items() for value in values],
)
def test_a_value_out_of_range_is_a_usage_error_before_any_work(
    command: str,
    option: str,
    value: str,
    outputs: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    board, _ = outputs
    before = _snapshot(board.parent)
    code = main([*command_line(command, board, tmp_path, option=option), option, value])
    captured = capsys.readouterr()
    assert code == 2, captured.err
    assert captured.out == ""  # nothing printed before the error: checked first
    assert captured.err.startswith("lbnorm: error: ")
    assert "\nHint: " in captured.err
    assert "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a staging folder
    assert _snapshot(board.parent) == before


def test_the_message_names_the_option_the_value_and_the_range(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["run", "--out", str(tmp_path / "o"), "--top", HUGE]) == 2
    assert capsys.readouterr().err == (
        f"lbnorm: error: --top {HUGE}: rows to print must be a whole number from 0 to "
        f"{MOST_COUNT:,}.\nHint: e.g. --top 10.\n"
    )
    assert not (tmp_path / "o").exists()  # (it used to fail after the swap)
    assert main(["show", str(tmp_path), "--digits", "10000"]) == 2
    assert capsys.readouterr().err == (
        f"lbnorm: error: --digits 10000: decimals must be a whole number from 0 to "
        f"{MOST_DIGITS}.\nHint: e.g. --digits 2.\n"
    )


def test_a_value_of_a_thousand_digits_is_shown_shortened(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["show", "out", "--top", "9" * 1000]) == 2
    err = capsys.readouterr().err
    assert "--top 999999999999...(1000 digits): rows to print" in err
    assert len(err) < 300


def test_the_edges_of_each_range_are_taken(
    outputs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    board, _ = outputs
    assert main(["show", str(board), "--top", "0", "--digits", str(MOST_DIGITS)]) == 0
    assert capsys.readouterr().out == "top 0 of 8 variants, by average\n"
    assert main(["query", str(board), "SELECT 1.5 AS x", "--digits", "0"]) == 0
    assert capsys.readouterr().out == "x\n2\n(1 row)\n"  # 1.5 to no decimals
    assert main(["show", str(board), "--top", str(MOST_COUNT)]) == 0


def test_a_repeated_option_collects_its_values() -> None:
    args = build_parser().parse_args(["diff", "a", "b", "--top", "5", "--top", "7"])
    assert args.top == [5, 7]
    assert build_parser().parse_args(["diff", "a", "b"]).top is None


def test_text_that_is_no_number_stays_argparses_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["show", "out", "--top", "many"]) == 2
    assert "argument --top: invalid int value: 'many'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"sum_memory": float("inf")},
            r"positive number of GiB up to 1,048,576, got inf",
        ),
        ({"sum_memory": 1e308}, r"positive number of GiB up to 1,048,576, got 1e\+308"),
        ({"workers": MOST_COUNT + 1}, r"workers \(--workers\) must be at most"),
        ({"batch_rows": 10**23}, r"batch_rows \(--batch-rows\) must be at most"),
    ],
)
def test_run_options_refuse_what_no_run_can_use(
    given: dict[str, float], message: str
) -> None:
    with pytest.raises(OptionsError, match=message + r".*\nHint: "):
        RunOptions(**given)  # type: ignore[arg-type]
    assert RunOptions(sum_memory=MOST_GIB).sum_memory == MOST_GIB
