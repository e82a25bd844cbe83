"""Health checks: a DROP-like benchmark is flagged, the real v2 leaderboard is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lbnorm import Result, run
from lbnorm.analysis.health import (
    HealthConfig,
    ceiling_rate,
    check_benchmarks,
    check_directory,
    check_health,
    check_result,
    check_source,
    check_subtasks,
    floor_rate,
    is_healthy,
    leave_one_out,
    loo_spearman,
    noise_margin,
    stuck_cluster,
)
from lbnorm.cli import main
from lbnorm.core.errors import HealthConfigError, InputError
from lbnorm.core.options import RunOptions

SIX = ["IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO"]


def _cell(frame: pd.DataFrame, row: object, column: str) -> Any:
    """One value, typed loosely: pandas-stubs types `.loc[row, column]` as a union."""
    return frame[column].to_dict()[row]


@pytest.fixture(scope="module")
def published(published_csv: Path) -> pd.DataFrame:
    return pd.read_csv(published_csv)


@pytest.fixture(scope="module")
def demo() -> Result:
    return run()


def _with_drop(
    published: pd.DataFrame, *, stuck_share: float, seed: int = 0
) -> pd.DataFrame:
    """Add DROP as the deep dive saw it: most models stuck near 5 whatever their
    average, the rest following it."""
    rng = np.random.default_rng(seed)
    average = published[SIX].mean(axis=1).to_numpy()
    is_stuck = rng.random(len(published)) < stuck_share
    follows = np.clip(1.4 * average + rng.normal(0, 4, len(published)), 0, 100)
    drop = np.where(is_stuck, rng.uniform(2, 8, len(published)), follows)
    return published.assign(DROP=drop, **{"DROP Raw": drop / 100})


def test_published_leaderboard_is_healthy(published: pd.DataFrame) -> None:
    health = check_health(published)
    assert health["benchmark"].tolist() == SIX  # found as the columns with a "Raw" twin
    assert is_healthy(health)
    rho = dict(zip(health["benchmark"], health["loo_spearman"].round(3), strict=True))
    assert rho == {
        "IFEval": 0.650,
        "BBH": 0.887,
        "MATH Lvl 5": 0.844,
        "GPQA": 0.795,
        "MUSR": 0.638,
        "MMLU-PRO": 0.918,
    }
    assert health["stuck_share"].max() < 0.35  # MATH Lvl 5: 0.308, the largest low band
    assert health["floor_rate"].max() < 0.1  # no stderr in the table: 1-point margin


@pytest.mark.parametrize("stuck_share", [0.6, 0.8, 0.9])
def test_drop_like_benchmark_is_flagged(
    published: pd.DataFrame, stuck_share: float
) -> None:
    health = check_health(_with_drop(published, stuck_share=stuck_share)).set_index(
        "benchmark"
    )
    drop = health.loc["DROP"]
    assert drop["status"] == "fail"
    assert drop["failed"] == "loo_correlation, stuck_cluster"
    assert drop["loo_spearman"] < 0.35
    assert drop["stuck_share"] >= 0.6
    assert (
        drop["stuck_spread"] > 0.9
    )  # the stuck models' averages spread like everyone's
    assert (
        health.drop(index="DROP")["status"] == "pass"
    ).all()  # the others stay healthy


def test_floor_ceiling_and_stderr_margins() -> None:
    rng = np.random.default_rng(1)
    skill = rng.uniform(0, 80, 400)
    scores = pd.DataFrame(
        {
            "A": skill,
            "B": skill + rng.normal(0, 2, 400),
            "Hard": np.where(
                skill < 60, 0.0, skill - 60
            ),  # 3/4 of the models at 0: clipped
            "Easy": np.where(skill > 20, 100.0, 80 + skill),  # 3/4 at 100
        }
    )
    health = check_benchmarks(scores).set_index("benchmark")
    assert _cell(health, "Hard", "floor_rate") == pytest.approx(
        (skill < 60).mean() + ((skill >= 60) & (skill <= 61)).mean()
    )
    assert "floor" in _cell(health, "Hard", "failed")
    assert "ceiling" in _cell(health, "Easy", "failed")
    assert _cell(health, "A", "status") == "pass"
    # within noise: a 3-point score with a 2-point stderr is at the floor (3 <= 1.96 * 2)
    near = pd.DataFrame({"A": skill, "B": skill, "C": np.full(400, 3.0)})
    stderr = pd.DataFrame({"A": 0.5, "B": 0.5, "C": 2.0}, index=near.index)
    assert check_benchmarks(near).set_index("benchmark").loc["C", "floor_rate"] == 0.0
    assert (
        check_benchmarks(near, stderr=stderr)
        .set_index("benchmark")
        .loc["C", "floor_rate"]
        == 1.0
    )


def test_subtask_sanity() -> None:
    rng = np.random.default_rng(2)
    skill = rng.uniform(0.3, 0.9, 300)
    columns = {
        "s1": (skill, 0.25),
        "s2": (skill - 0.05, 0.25),
        "s3": (skill + 0.02, 0.25),
        "noise": (rng.uniform(0.2, 0.6, 300), 0.2),  # tracks nothing
        "wrong_bound": (
            skill * 0.5,
            0.5,
        ),  # every score below its bound (num_choices = 2?)
    }
    subtasks = pd.concat(
        [
            pd.DataFrame(
                {
                    "model": [f"m{i}" for i in range(300)],
                    "precision": "",
                    "revision": "",
                    "chat_template": False,
                    "benchmark": "X",
                    "subtask": name,
                    "raw_score": np.clip(values + rng.normal(0, 0.02, 300), 0, 1),
                    "lower_bound": bound,
                }
            )
            for name, (values, bound) in columns.items()
        ],
        ignore_index=True,
    )
    health = check_subtasks(subtasks).set_index("subtask")
    assert _cell(health, "wrong_bound", "failed") == "bound_above_scores"
    assert _cell(health, "wrong_bound", "below_bound_rate") == 1.0
    assert _cell(health, "noise", "failed") == "subtask_correlation"
    assert abs(_cell(health, "noise", "rest_spearman")) < 0.2
    assert (health.loc[["s1", "s2", "s3"], "status"] == "pass").all()
    assert (health.loc[["s1", "s2", "s3"], "rest_spearman"] > 0.7).all()


def test_too_few_models_are_skipped() -> None:
    scores = pd.DataFrame({"A": [1.0, 2.0, 3.0], "B": [3.0, 2.0, 1.0]})
    health = check_benchmarks(scores, config=HealthConfig(min_models=5))
    assert health["status"].tolist() == ["skipped", "skipped"]
    assert is_healthy(health)


def test_a_skipped_subtask_is_not_counted_as_checked(
    fixtures: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two models: every check skipped, so none checked (not '40 checked, 40 skipped')."""
    assert main(["health", str(fixtures / "full_structure")]) == 0
    text = capsys.readouterr().out
    assert "## Subtasks (none checked: 40 skipped)" in text
    assert "checked, 0 failed" not in text


def test_demo_is_healthy_with_stderr_aware_floors(demo: Result) -> None:
    health = check_result(
        demo.subtasks, demo.leaderboard, demo.suite, missing=demo.missing
    )
    assert is_healthy(health)
    assert (health["level"] == "subtask").sum() == 40
    benchmarks = health[health["level"] == "benchmark"].set_index("benchmark")
    # GPQA's noise (stderr about 1.8 points) puts 30% of the models within noise of 0
    assert 0.25 < _cell(benchmarks, "GPQA", "floor_rate") < 0.35
    without_stderr = check_health(demo.leaderboard, benchmarks=SIX).set_index(
        "benchmark"
    )
    assert _cell(benchmarks, "GPQA", "floor_rate") > 3 * _cell(
        without_stderr, "GPQA", "floor_rate"
    )


def test_config_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "health.toml"
    path.write_text("[health]\nmin_loo_spearman = 0.9\nmin_models = 10\n")
    config = HealthConfig.from_toml(path)
    assert (config.min_loo_spearman, config.min_models, config.max_floor_rate) == (
        0.9,
        10,
        0.5,
    )
    path.write_text("min_loo_spearmann = 0.9\n")
    with pytest.raises(
        HealthConfigError,
        match=r"unknown health threshold\(s\) \['min_loo_spearmann'\].*\n.*Hint: known ones are",
    ):
        HealthConfig.from_toml(path)
    with pytest.raises(
        HealthConfigError, match=r"max_floor_rate=1.5.*\n.*Hint: shares are in \[0, 1\]"
    ):
        HealthConfig(max_floor_rate=1.5)


def test_cli_health_on_tables_and_outputs(
    published: pd.DataFrame,
    published_csv: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["health", str(published_csv)]) == 0
    text = capsys.readouterr().out
    assert "all checks passed" in text
    assert "| GPQA | 4,576 | 0.795 |" in text
    broken = tmp_path / "with_drop.csv"
    _with_drop(published, stuck_share=0.8).to_csv(broken, index=False)
    assert main(["health", str(broken), "--out", str(tmp_path / "h")]) == 7
    assert "| DROP | 4,576 |" in capsys.readouterr().out
    saved = pd.read_parquet(tmp_path / "h" / "health.parquet")
    assert (
        saved.loc[saved["benchmark"] == "DROP", "failed"].item()
        == "loo_correlation, stuck_cluster"
    )
    strict = tmp_path / "strict.toml"
    strict.write_text("min_loo_spearman = 0.7\n")
    assert (
        main(["health", str(published_csv), "--config", str(strict)]) == 7
    )  # IFEval 0.650, MUSR 0.638
    assert "2 failed" in capsys.readouterr().out


def test_each_figure_has_one_function() -> None:
    """check_benchmarks is the figure functions, over the same models."""
    rng = np.random.default_rng(3)
    skill = rng.uniform(0, 60, 200)
    scores = pd.DataFrame(
        {
            "A": skill + rng.normal(0, 3, 200),
            "B": np.clip(skill - 20 + rng.normal(0, 3, 200), 0, 100),
            "C": np.where(rng.random(200) < 0.1, np.nan, skill),  # some missing
        }
    )
    stderr = pd.DataFrame({"A": 0.5, "B": 3.0, "C": np.nan}, index=scores.index)
    weights = [1.0, 2.0, 1.0]
    health = check_benchmarks(scores, stderr=stderr, weights=weights).set_index(
        "benchmark"
    )
    others = leave_one_out(scores, weights=weights)
    margin = noise_margin(scores, stderr=stderr)
    stuck = stuck_cluster(scores, others)
    expected = pd.DataFrame(
        {
            "loo_spearman": loo_spearman(scores, others),
            "floor_rate": floor_rate(scores, others, margin=margin),
            "ceiling_rate": ceiling_rate(scores, others, margin=margin),
            "stuck_share": stuck["stuck_share"],
            "stuck_spread": stuck["stuck_spread"],
        }
    ).rename_axis("benchmark")
    pd.testing.assert_frame_equal(health[list(expected.columns)], expected)
    # the leave-one-out average is the weighted mean of the variant's other scores
    row = scores.iloc[0]
    assert others["A"].iloc[0] == pytest.approx((2 * row["B"] + row["C"]) / 3)
    missing = int(np.flatnonzero(scores["C"].isna())[0])
    assert np.isnan(others["C"].iloc[missing])
    assert others["A"].iloc[missing] == pytest.approx(scores["B"].iloc[missing])
    # rho as numpy computes it on the ranks of the complete pairs
    used = scores["C"].notna()
    ranks = pd.DataFrame({"s": scores["C"][used], "o": others["C"][used]}).rank()
    assert health.loc["C", "loo_spearman"] == pytest.approx(
        np.corrcoef(ranks["s"], ranks["o"])[0, 1]
    )
    assert health.loc["C", "n_models"] == used.sum()
    # a 1.96-stderr margin of 5.88 points for B, 1 point (no stderr) for C
    assert health.loc["B", "floor_rate"] == pytest.approx(
        (scores["B"] <= 1.96 * 3.0).mean()
    )


def test_check_directory_is_what_lbnorm_health_prints(
    golden_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    run(sorted(golden_dir.glob("*.json")), out=out)
    checked = check_directory(out, config=HealthConfig(min_models=3))
    assert checked.benchmarks == tuple(SIX)
    assert checked.stderr is not None  # the suite loads: stderr-aware floors
    assert checked.stderr.shape == (8, 6)
    health, title = check_source([out], config=HealthConfig(min_models=3))
    pd.testing.assert_frame_equal(checked.health, health)
    assert title == f"lbnorm health: {out}"
    # without subtasks.parquet: the benchmark checks, with the fixed margin
    bare = tmp_path / "bare"
    run(
        sorted(golden_dir.glob("*.json")),
        out=bare,
        options=RunOptions(subtasks=False),
    )
    only = check_directory(bare, config=HealthConfig(min_models=3))
    assert only.stderr is None
    assert only.snapshot.subtasks is None
    assert (only.health["level"] == "benchmark").all()
    assert main(["health", str(bare)]) == 0
    assert "| GPQA | 8 |" in capsys.readouterr().out


def test_config_nested_too_deeply_is_a_clean_error(tmp_path: Path) -> None:
    """tomllib reads nesting recursively: 100,000 levels were a RecursionError traceback."""
    path = tmp_path / "deep.toml"
    path.write_text("min_models = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(
        InputError,
        match=r"deep\.toml: cannot read the health thresholds: arrays or tables nest "
        r"too deeply\.\nHint: write TOML",
    ):
        HealthConfig.from_toml(path)
