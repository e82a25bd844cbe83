"""``--set-bound`` values: read exactly when they are numbers, refused at once when they are not (issue 40, point 3).

``float(Fraction("1e100000000"))`` builds a hundred-million-digit integer (minutes of
CPU, deaf to SIGTERM while it runs), ``1e-999999999`` longer still, and
``float(Fraction("1e309"))`` raised OverflowError: the text is checked before it is read.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbnorm.analysis import impact
from lbnorm.analysis.impact import parse_bound_override
from lbnorm.cli import main
from lbnorm.core.errors import OptionsError

ABSURD = [
    "GPQA=1e100000000",
    "GPQA=1e-999999999",
    "GPQA/main=1e309",
    "GPQA=1e999",
    "GPQA=" + "9" * 100,
    "GPQA=0." + "3" * 100,
    "GPQA=" + "1" * 30 + "/" + "3" * 30,
    "GPQA=0.99999999999999999",  # under 1, but rounds to 1.0: no bound
    "GPQA=1/0",
    "GPQA=1.2",
    "GPQA=-0.1",
    "GPQA=nan",
    "GPQA=inf",
    "GPQA=0x1",
    "GPQA=0.3_0",
    "GPQA=\uff10.3",  # a full-width digit
    "GPQA=",
    "=0.3",
    "GPQA",
]


@pytest.mark.parametrize("text", ABSURD)
def test_a_bound_that_is_no_number_in_range_is_refused_before_it_is_read(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[str] = []

    def fraction(value: str) -> Fraction:
        read.append(value)
        return Fraction(value)

    monkeypatch.setattr(impact, "Fraction", fraction)
    with pytest.raises(
        OptionsError,
        match=r"expected BENCHMARK\[/SUBTASK\]=BOUND with BOUND in \[0, 1\).*\n"
        r"Hint: e\.g\. --set-bound GPQA=0\.3",
    ):
        parse_bound_override(text)
    assert all(len(value) <= 40 for value in read)  # nothing long was ever read


@pytest.mark.parametrize(
    ("text", "bound"),
    [
        ("GPQA=0.3", 0.3),
        ("GPQA=.25", 0.25),
        ("GPQA=2.5e-1", 0.25),
        ("GPQA=0", 0.0),
        ("GPQA=1e-400", 0.0),
        ("MUSR/team_allocation=1/3", 1 / 3),
        ("GPQA= 0.3 ", 0.3),
    ],
)
def test_decimals_and_ratios_are_read_exactly(text: str, bound: float) -> None:
    assert parse_bound_override(text).lower_bound == bound


@given(st.decimals(min_value=0, max_value=1, places=20, allow_nan=False))
def test_a_decimal_gives_the_float_its_exact_value_rounds_to(value: object) -> None:
    text = f"{value:f}"
    exact = Fraction(text)
    if exact < 1 and float(exact) < 1.0:
        assert parse_bound_override(f"GPQA={text}").lower_bound == float(exact)
    else:
        with pytest.raises(OptionsError, match=r"BOUND in \[0, 1\)"):
            parse_bound_override(f"GPQA={text}")


def test_the_command_line_refuses_them_as_usage_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for text in ("GPQA=1e100000000", "GPQA=1e-999999999", "GPQA/main=1e309"):
        assert main(["impact", "--set-bound", text, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"lbnorm: error: bound override {text!r}: expected ")
        assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []
