"""Style control against an independent, tightly converged fit of FastChat's objective."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from oracles.arena_style import fit_contextual, make_records

from lbnorm.cli import main
from lbnorm.core.errors import InputError, RatingOptionsError
from lbnorm.ratings import RatingOptions, compute_ratings, read_battles
from lbnorm.ratings.style import STYLE_FIELDS

STRENGTHS = {
    "alpha": 1150.0,
    "beta": 1080.0,
    "gamma": 1020.0,
    "verbose": 1000.0,
    "delta": 960.0,
    "epsilon": 900.0,
}


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return make_records(
        n=6000, seed=3, strengths=STRENGTHS, verbose="verbose", length_effect=0.6
    )


@pytest.fixture(scope="module")
def battles_file(
    records: list[dict[str, Any]], tmp_path_factory: pytest.TempPathFactory
) -> Path:
    path = tmp_path_factory.mktemp("style") / "clean_battle.json"
    path.write_text(json.dumps(records))
    return path


def test_style_control_equals_a_tight_fit_of_fastchats_objective(
    records: list[dict[str, Any]], battles_file: Path
) -> None:
    battles = read_battles(battles_file, fields=STYLE_FIELDS)
    result = compute_ratings(battles, RatingOptions(style_control=True))
    expected, gamma = fit_contextual(records, battles.models.tolist())
    assert result.style is not None
    assert np.abs(result.rating - expected).max() < 1e-4
    assert np.abs(result.style.coefficients - gamma).max() < 1e-6


def test_a_verbose_model_is_rated_near_its_strength_once_length_is_controlled(
    battles_file: Path,
) -> None:
    battles = read_battles(battles_file, fields=STYLE_FIELDS)
    names = battles.models.tolist()
    verbose = names.index("verbose")
    plain = compute_ratings(battles, RatingOptions())
    styled = compute_ratings(battles, RatingOptions(style_control=True))
    true = np.array([STRENGTHS[name] for name in names])
    # centred as the fits are (mean 1000): the plain fit credits length to the model
    plain_gap = plain.rating[verbose] - (true[verbose] - true.mean() + 1000)
    styled_gap = styled.rating[verbose] - (true[verbose] - true.mean() + 1000)
    assert plain_gap > 60
    assert abs(styled_gap) < 20
    assert styled.style is not None
    assert styled.style.coefficients[0] == pytest.approx(0.6, abs=0.1)
    assert styled.baseline is not None
    assert np.array_equal(styled.baseline.rating, plain.rating)


def test_the_bootstrap_gives_intervals_for_ratings_and_coefficients(
    battles_file: Path,
) -> None:
    battles = read_battles(battles_file, fields=STYLE_FIELDS)
    options = RatingOptions(style_control=True, bootstrap=30, seed=4)
    result = compute_ratings(battles, options)
    assert result.style is not None
    assert result.style.coefficient_samples is not None
    assert result.rating_lower is not None
    assert result.rating_upper is not None
    assert (result.rating_lower <= result.rating).all()
    assert (result.rating <= result.rating_upper).all()
    assert result.style.coefficient_samples.shape == (30, 4)
    again = compute_ratings(battles, options)
    assert again.samples is not None
    assert result.samples is not None
    assert np.array_equal(again.samples, result.samples)  # seeded


def test_each_round_is_the_fit_of_its_resample(
    records: list[dict[str, Any]], battles_file: Path
) -> None:
    from lbnorm.ratings.style import bootstrap_style, fit_style, style_data

    battles = read_battles(battles_file, fields=STYLE_FIELDS)
    data = style_data(battles, ties="half")
    point = fit_style(data, l2=2.0)
    rounds, _ = bootstrap_style(data, point, l2=2.0, rounds=3, seed=7)
    generators = [np.random.default_rng(c) for c in np.random.SeedSequence(7).spawn(3)]
    n = len(data.score)
    for generator, params in zip(generators, rounds, strict=True):
        weight = np.bincount(generator.integers(0, n, n), minlength=n).astype(float)
        exact = fit_style(data, l2=2.0, weight=weight)
        k = len(battles.models)
        assert 400 * np.abs(exact[:k] - params[:k]).max() < 1e-3  # rating points
        assert np.abs(exact[k:] - params[k:]).max() < 1e-5


def test_missing_or_constant_style_metadata_is_a_clean_error(tmp_path: Path) -> None:
    battles = read_battles(
        Path(__file__).parent / "fixtures" / "battles" / "clean_battle_20230601.json"
    )
    with pytest.raises(InputError, match=r"style control needs the fields.*\nHint"):
        compute_ratings(battles, RatingOptions(style_control=True))
    rows = make_records(
        n=50, seed=1, strengths=STRENGTHS, verbose="verbose", length_effect=0.0
    )
    for row in rows:
        row["conv_metadata"]["bold_count_a"] = {"**": 0}
        row["conv_metadata"]["bold_count_b"] = {"**": 0}
    path = tmp_path / "flat.json"
    path.write_text(json.dumps(rows))
    flat = read_battles(path, fields=STYLE_FIELDS)
    with pytest.raises(InputError, match=r"\['bold'\] do not vary.*\nHint"):
        compute_ratings(flat, RatingOptions(style_control=True))


def test_a_csv_with_flat_conv_metadata_columns_is_style_controlled(
    tmp_path: Path,
) -> None:
    """The same battles as a CSV with ``conv_metadata.*`` columns: the same ratings."""
    rows = make_records(
        n=300, seed=3, strengths=STRENGTHS, verbose="verbose", length_effect=0.5
    )
    nested = tmp_path / "battles.json"
    nested.write_text(json.dumps(rows))
    names = [field.removeprefix("conv_metadata.") for field in STYLE_FIELDS]
    lines = [",".join(["model_a", "model_b", "winner", *STYLE_FIELDS])]
    for row in rows:
        counts = [
            value if isinstance(value, int | float) else sum(value.values())
            for value in (row["conv_metadata"][name] for name in names)
        ]
        lines.append(
            ",".join([row["model_a"], row["model_b"], row["winner"], *map(str, counts)])
        )
    flat = tmp_path / "battles.csv"
    flat.write_text("\n".join(lines) + "\n")
    options = RatingOptions(style_control=True)
    from_json = compute_ratings(read_battles(nested, fields=STYLE_FIELDS), options)
    from_csv = compute_ratings(read_battles(flat, fields=STYLE_FIELDS), options)
    np.testing.assert_allclose(from_csv.rating, from_json.rating, atol=1e-9)
    bare = tmp_path / "bare.csv"
    bare.write_text("model_a,model_b,winner\na,b,model_a\nb,a,model_b\n")
    with pytest.raises(
        InputError,
        match=r"no field 'conv_metadata\.sum_assistant_a_tokens'.*\nHint: .*in a CSV or "
        r"any flat table, columns named by the dotted path",
    ):
        read_battles(bare, fields=STYLE_FIELDS)


def test_style_control_is_for_bradley_terry() -> None:
    with pytest.raises(
        RatingOptionsError,
        match=r"style control applies to Bradley-Terry only.*\nHint: drop --style-control",
    ):
        RatingOptions(style_control=True, method="elo")


@pytest.mark.parametrize(
    ("field", "values", "message"),
    [
        (
            "sum_assistant_a_tokens",
            [-5],
            r"sum_assistant_a_tokens holds 1 value\(s\) .*: -5\.",
        ),
        (
            "sum_assistant_b_tokens",
            [1e300],
            r"sum_assistant_b_tokens holds 1 value\(s\) .*: 1e\+300\.",
        ),
        (
            "sum_assistant_a_tokens",
            [100.5],
            r"sum_assistant_a_tokens holds 1 value\(s\) .*: 100\.5\.",
        ),
        (
            "list_count_b",
            [{"ordered": -1, "unordered": 0}, {"ordered": -2, "unordered": 0}],
            r"list_count_b holds 2 value\(s\) .*: -2, -1\.",
        ),
    ],
)
def test_counts_that_cannot_be_are_refused(
    tmp_path: Path, field: str, values: list[Any], message: str
) -> None:
    """Negative, fractional or astronomical counts changed every rating without a word."""
    rows = make_records(
        n=200, seed=1, strengths=STRENGTHS, verbose="verbose", length_effect=0.6
    )
    for row, value in zip(rows, values, strict=False):
        row["conv_metadata"][field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(rows))
    battles = read_battles(path, fields=STYLE_FIELDS)
    is_negative = any(
        (sum(v.values()) if isinstance(v, dict) else v) < 0 for v in values
    )
    keep = ">= 0" if is_negative else "<= 1000000000"
    with pytest.raises(
        InputError,
        match=message + rf"\nHint: .*--where 'conv_metadata\.{field} {keep}'\.",
    ):
        compute_ratings(battles, RatingOptions(style_control=True))


def test_opposite_token_counts_are_refused_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A = -B made the difference's denominator 1: refused, nothing written."""
    rows = make_records(
        n=200, seed=1, strengths=STRENGTHS, verbose="verbose", length_effect=0.6
    )
    rows[3]["conv_metadata"]["sum_assistant_a_tokens"] = 100
    rows[3]["conv_metadata"]["sum_assistant_b_tokens"] = -100
    path = tmp_path / "opposite.json"
    path.write_text(json.dumps(rows))
    out = tmp_path / "out"
    assert main(["arena", str(path), "--out", str(out), "--style-control"]) == 4
    assert capsys.readouterr().err == (
        "lbnorm: error: conv_metadata.sum_assistant_b_tokens holds 1 value(s) that are no "
        "count (a whole number from 0 to 2**53): -100.\nHint: correct those battles' style "
        "metadata, or leave them out, e.g. --where 'conv_metadata.sum_assistant_b_tokens >= 0'.\n"
    )
    assert not out.exists()
    assert (
        main(
            [
                "arena",
                str(path),
                "--out",
                str(out),
                "--style-control",
                "--quiet",
                "--where",
                "conv_metadata.sum_assistant_b_tokens >= 0",
            ]
        )
        == 0
    )
