"""What a change did: rank statistics, small hand-made diffs, and the GPQA bound on the demo."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbnorm import Result, SuiteError, load_suite, run
from lbnorm.analysis.correlation import kendall_tau, rank_columns, spearman_rho
from lbnorm.analysis.diff import (
    Diff,
    Snapshot,
    diff_results,
    diff_snapshots,
    read_snapshot,
)
from lbnorm.analysis.impact import override_bounds, parse_bound_override
from lbnorm.analysis.render import format_diff
from lbnorm.cli import main

KEYS = {"precision": "", "revision": "", "chat_template": False}


def _cell(frame: pd.DataFrame, row: object, column: str) -> Any:
    """One value, typed loosely: pandas-stubs types `.loc[row, column]` as a union."""
    return frame[column].to_dict()[row]


def _brute_tau(x: list[float], y: list[float]) -> float:
    concordant = discordant = x_only = y_only = 0
    for (a, b), (c, d) in itertools.combinations(zip(x, y, strict=True), 2):
        dx, dy = np.sign(a - c), np.sign(b - d)
        if dx == 0 and dy == 0:
            continue
        if dx == 0:
            x_only += 1
        elif dy == 0:
            y_only += 1
        elif dx == dy:
            concordant += 1
        else:
            discordant += 1
    denominator = np.sqrt(
        (concordant + discordant + x_only) * (concordant + discordant + y_only)
    )
    return (concordant - discordant) / denominator if denominator else float("nan")


@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4)), min_size=2, max_size=60)
)
def test_kendall_tau_b_matches_pair_counting(pairs: list[tuple[int, int]]) -> None:
    x = [float(a) for a, _ in pairs]
    y = [float(b) for _, b in pairs]
    expected = _brute_tau(x, y)
    if np.isnan(expected):
        assert np.isnan(kendall_tau(x, y))
    else:
        assert kendall_tau(x, y) == pytest.approx(expected, abs=1e-12)


def test_spearman_and_ranks_agree_with_pandas() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(0, 20, 500).astype(float)
    y = x + rng.integers(-5, 5, 500)
    x[::17] = np.nan
    frame = pd.DataFrame({"x": x, "y": y}).dropna()
    assert spearman_rho(x, y) == pytest.approx(
        frame["x"].rank().corr(frame["y"].rank()), abs=1e-12
    )
    matrix = np.column_stack([x, y])
    np.testing.assert_allclose(
        rank_columns(matrix), pd.DataFrame(matrix).rank().to_numpy(), equal_nan=True
    )
    assert spearman_rho([1.0, 2.0], [2.0, 1.0]) != spearman_rho(
        [1.0, 2.0], [2.0, 1.0]
    )  # NaN: too few


def _board(models: list[str], averages: list[float]) -> pd.DataFrame:
    series = pd.Series(averages, dtype="float64")
    return pd.DataFrame(
        {
            "model": models,
            **KEYS,
            "rank": series.rank(ascending=False, method="min").astype("Int64"),
            "average": series,
            "X": series,
            "Y": 0.0,
        }
    )


def _subtasks(models: list[str], clipped: list[bool], bound: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "model": models,
            **KEYS,
            "benchmark": "X",
            "subtask": "x1",
            "lower_bound": bound,
            "is_clipped": clipped,
        }
    )


def test_small_diff_by_hand() -> None:
    old = Snapshot(
        leaderboard=_board(["a", "b", "c", "d"], [40.0, 30.0, 20.0, 10.0]),
        benchmarks=["X", "Y"],
        subtasks=_subtasks(["a", "b", "c", "d"], [False, False, True, True], 0.25),
        intervals=_intervals(["a", "b", "c", "d"], [40.0, 30.0, 20.0, 10.0], 2.0),
        label="old",
    )
    new = Snapshot(
        leaderboard=_board(["b", "a", "d", "e"], [31.0, 30.0, 25.0, 5.0]),
        benchmarks=["X", "Y"],
        subtasks=_subtasks(["a", "b", "d", "e"], [True, False, False, True], 0.3),
        intervals=_intervals(["a", "b", "d", "e"], [30.0, 31.0, 25.0, 5.0], 2.0),
        label="new",
    )
    diff = diff_snapshots(old, new, moved_places=0, top=[1, 2])
    summary = diff.summary
    assert (
        summary["variants_common"],
        summary["variants_added"],
        summary["variants_removed"],
    ) == (3, 1, 1)
    assert summary["ranked_common"] == 3
    assert summary["kendall_tau"] == pytest.approx(
        1 / 3
    )  # a, b, d: (a,b) swap, (a,d), (b,d) agree
    assert summary["top_1_overlap"] == 0
    assert summary["top_2_overlap"] == 2
    assert summary["moved_more_than_n"] == 3  # a 1 -> 2, b 2 -> 1, d 4 -> 3
    assert summary["max_rank_move"] == 1
    assert (summary["newly_clipped"], summary["newly_unclipped"]) == (
        1,
        1,
    )  # a clipped, d unclipped
    assert summary["bounds_changed"] == 1
    assert diff.bounds.to_dict("list") == {
        "benchmark": ["X"],
        "subtask": ["x1"],
        "old_lower_bound": [0.25],
        "new_lower_bound": [0.3],
        "change": ["changed"],
    }
    assert summary["average_delta_mean"] == pytest.approx((-10 + 1 + 15) / 3)
    assert summary["rank_moves_checked"] == 3
    # old rank ranges [1, 1], [2, 2], [3, 3], [4, 4]; new b and a [1, 2], d [3, 3]:
    # only d (4 -> 3) left both ranges, and its average 10 -> 25 left both +/- 2
    assert summary["rank_moves_beyond_intervals"] == 1
    models = diff.models.set_index("model")
    assert _cell(models, "e", "status") == "added"
    assert _cell(models, "c", "status") == "removed"
    assert _cell(models, "b", "rank_move") == 1
    assert bool(_cell(models, "d", "is_beyond_intervals")) is True
    assert bool(_cell(models, "b", "is_beyond_intervals")) is False
    assert pd.isna(_cell(models, "e", "is_beyond_intervals"))
    scores = diff.scores.set_index(["model", "benchmark"])
    assert _cell(scores, ("a", "X"), "delta") == -10.0
    assert np.isnan(_cell(scores, ("c", "X"), "new_score"))
    assert diff.models["model"].tolist() == [
        "b",
        "a",
        "d",
        "e",
        "c",
    ]  # new rank, then old
    text = format_diff(diff)
    assert "| variants | 3 on both sides, 1 added, 1 removed |" in text
    assert "| rank moves beyond the rank intervals | 1 of 3 |" in text
    assert "## Added (1)\n\n| model | precision | new rank | new average |" in text
    assert "| e |  | 4 | 5.00 |" in text
    assert "## Removed (1)\n\n| model | precision | old rank | old average |" in text
    assert "| c |  | 3 | 20.00 |" in text
    # the largest changes of an average, whether or not the rank moved: d +15, a -10, b +1
    changes = text.split("## Largest changes of an average (3)")[1]
    assert [line.split(" | ")[0] for line in changes.splitlines()[4:7]] == [
        "| d",
        "| a",
        "| b",
    ]
    assert "| d |  | 10.00 | 25.00 | +15.000 | 4 | 3 | True |" in changes


def _intervals(
    models: list[str], averages: list[float], half_width: float
) -> pd.DataFrame:
    """95% intervals of `half_width` around each average (ranks from the averages)."""
    average = np.array(averages)
    low, high = average - half_width, average + half_width
    above = (low[None, :] > high[:, None]).sum(axis=1)  # intervals wholly above
    reaching = (high[None, :] >= low[:, None]).sum(axis=1)
    return pd.DataFrame(
        {
            "model": models,
            **KEYS,
            "average_low": low,
            "average_high": high,
            "rank_best": 1 + above,
            "rank_worst": reaching,
        }
    )


def test_a_newcomer_moves_nobody_beyond_their_intervals() -> None:
    """Rank moves caused by a variant entering, averages unchanged, are within.

    The rank intervals alone would call them beyond: with tight intervals a
    and b had rank ranges [1, 1] and [2, 2], and are now 2nd and 3rd.
    """
    old = Snapshot(
        leaderboard=_board(["a", "b"], [8.81, 3.32]),
        benchmarks=["X", "Y"],
        intervals=_intervals(["a", "b"], [8.81, 3.32], 0.1),
    )
    new = Snapshot(
        leaderboard=_board(["a", "b", "n"], [8.81, 3.32, 20.0]),
        benchmarks=["X", "Y"],
        intervals=_intervals(["a", "b", "n"], [8.81, 3.32, 20.0], 0.1),
    )
    assert old.intervals is not None
    assert new.intervals is not None
    rank_range = old.intervals[["rank_best", "rank_worst"]].to_numpy().tolist()
    assert rank_range == [[1, 1], [2, 2]]  # new ranks 2 and 3: outside these
    diff = diff_snapshots(old, new)
    assert diff.summary["rank_moves_checked"] == 2
    assert diff.summary["rank_moves_beyond_intervals"] == 0
    models = diff.models.set_index("model")
    assert _cell(models, "a", "rank_move") == -1
    assert bool(_cell(models, "a", "is_beyond_intervals")) is False
    text = format_diff(diff)
    assert "| rank moves beyond the rank intervals | 0 of 2 |" in text
    assert "## Largest changes of an average" not in text  # no average changed
    assert "| n |  | 1 | 20.00 |" in text  # the newcomer, named


def test_lists_are_cut_at_largest_with_how_many_more() -> None:
    names = [f"m{i:02d}" for i in range(13)]
    old = Snapshot(leaderboard=_board(names[:1], [50.0]), benchmarks=["X", "Y"])
    new = Snapshot(
        leaderboard=_board(names, [50.0 - i for i in range(13)]), benchmarks=["X", "Y"]
    )
    text = format_diff(diff_snapshots(old, new), largest=5)
    added = text.split("## Added (12)\n\n")[1].split("\n\n")
    assert len(added[0].splitlines()) == 2 + 5  # heading, rule, five rows
    assert added[1].strip() == (
        "... and 7 more (--largest N lists more; --out writes every variant to "
        "diff_models.parquet)"
    )


def test_newly_unranked_variants_are_named_with_why() -> None:
    old = Snapshot(
        leaderboard=_board(["a", "b", "c"], [40.0, 30.0, 20.0]), benchmarks=["X", "Y"]
    )
    board = _board(["a", "b", "c"], [40.0, 30.0, np.nan]).assign(
        flagged=[False, True, False],  # b: flagged, excluded from the ranks
        rank=pd.array([1, None, None], dtype="Int64"),  # c: no X any more
    )
    new = Snapshot(leaderboard=board, benchmarks=["X", "Y"])
    diff = diff_snapshots(old, new)
    assert diff.summary["newly_unranked"] == 2
    assert diff.summary["ranked_common"] == 1
    reasons = diff.models.set_index("model")["reason"].to_dict()
    assert {model: None if pd.isna(why) else why for model, why in reasons.items()} == {
        "a": None,
        "b": "excluded: flagged in the metadata",
        "c": "incomplete: no X",
    }
    text = format_diff(diff)
    assert "| ranked on both sides | 1 (2 newly unranked) |" in text
    assert (
        "## Newly unranked (2)\n\n"
        "| model | precision | old rank | old average | new average | why |\n"
        "|---|---|---:|---:|---:|---|\n"
        "| b |  | 2 | 30.00 | 30.00 | excluded: flagged in the metadata |\n"
        "| c |  | 3 | 20.00 | n/a | incomplete: no X |\n"
    ) in text


@pytest.fixture(scope="module")
def gpqa_impact() -> tuple[Result, Result, Diff]:
    old = run()
    new = run(suite=override_bounds(old.suite, [parse_bound_override("GPQA=0.3")]))
    return old, new, diff_results(old, new)


def test_gpqa_bound_change_on_the_demo(
    gpqa_impact: tuple[Result, Result, Diff],
) -> None:
    old, _, diff = gpqa_impact
    summary = diff.summary
    assert diff.bounds["subtask"].tolist() == ["diamond", "extended", "main"]
    assert (diff.bounds["old_lower_bound"] == 0.25).all()
    assert (diff.bounds["new_lower_bound"] == 0.3).all()
    # only GPQA moves, and only down: (p - 0.3) / 0.7 <= (p - 0.25) / 0.75 for p <= 1
    deltas = diff.scores.set_index(
        ["model", "precision", "revision", "chat_template", "benchmark"]
    )["delta"]
    other = diff.scores[diff.scores["benchmark"] != "GPQA"]
    assert (other["delta"] == 0).all()
    gpqa = diff.scores[diff.scores["benchmark"] == "GPQA"]
    assert (gpqa["delta"] <= 0).all()
    pooled = old.leaderboard["GPQA Raw"].to_numpy()
    expected = (
        np.maximum(0, (pooled - 0.3) / 0.7) * 100
        - np.maximum(0, (pooled - 0.25) / 0.75) * 100
    )
    keys = old.leaderboard.set_index(
        ["model", "precision", "revision", "chat_template"]
    ).index
    np.testing.assert_allclose(
        deltas.xs("GPQA", level="benchmark").reindex(keys).to_numpy(),
        expected,
        atol=1e-9,
    )
    assert summary["scores_changed"] == int((expected != 0).sum())
    # each average moves by a sixth of its GPQA move
    models = diff.models.set_index(
        ["model", "precision", "revision", "chat_template"]
    ).reindex(keys)
    np.testing.assert_allclose(
        models["average_delta"].to_numpy(), expected / 6, atol=1e-9
    )
    assert summary["average_delta_max"] == 0.0
    assert summary["average_delta_min"] == pytest.approx(expected.min() / 6)
    # raising a bound clips more subtask scores, never fewer
    raw = old.subtasks.loc[old.subtasks["benchmark"] == "GPQA", "raw_score"]
    assert summary["newly_clipped"] == int(((raw >= 0.25) & (raw < 0.3)).sum()) > 0
    assert summary["newly_unclipped"] == 0
    # the same models, reordered a little
    assert (summary["variants_added"], summary["variants_removed"]) == (0, 0)
    assert summary["ranked_common"] == 4576
    assert 0.95 < float(summary["kendall_tau"] or 0) < 1.0
    assert (
        float(summary["kendall_tau"] or 0) < float(summary["spearman_rho"] or 0) < 1.0
    )
    assert 0 < summary["top_100_overlap"] <= 100  # type: ignore[operator]
    assert summary["moved_more_than_n"] > 0  # type: ignore[operator]
    # variants whose GPQA was already 0 lose nothing: they can only move up
    unchanged = models["average_delta"].to_numpy() == 0
    assert (models["rank_move"].to_numpy()[unchanged] >= 0).all()
    # the moves are small next to the noise: none leaves the rank intervals
    assert summary["rank_moves_checked"] == 4576
    assert summary["rank_moves_beyond_intervals"] == 0


@pytest.mark.slow
def test_cli_impact_and_diff_agree(
    gpqa_impact: tuple[Result, Result, Diff],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, _, diff = gpqa_impact
    assert (
        main(
            [
                "impact",
                "--set-bound",
                "GPQA=0.3",
                "--out",
                str(tmp_path / "impact"),
                "--largest",
                "3",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert (
        "# lbnorm impact: openllm-v2 -> openllm-v2 (GPQA=0.3) on the bundled demo"
        in text
    )
    assert "## Bounds changed (3)" in text
    assert "| GPQA | main | 0.2500 | 0.3000 | changed |" in text
    # the same change as two output directories
    toml = tmp_path / "gpqa.toml"
    lines = (
        (Path(__file__).parents[1] / "src/lbnorm/suites/builtin/openllm-v2.toml")
        .read_text()
        .splitlines()
    )
    toml.write_text(
        "\n".join(
            line.replace("num_choices = 4,", "num_choices = 4, lower_bound = 0.3,")
            if "leaderboard_gpqa_" in line
            else line
            for line in lines
        )
    )
    assert main(["run", "--out", str(tmp_path / "old"), "--quiet"]) == 0
    assert (
        main(["run", "--suite", str(toml), "--out", str(tmp_path / "new"), "--quiet"])
        == 0
    )
    assert (
        main(
            [
                "diff",
                str(tmp_path / "old"),
                str(tmp_path / "new"),
                "--out",
                str(tmp_path / "diff"),
                "--markdown",
                str(tmp_path / "d.md"),
            ]
        )
        == 0
    )
    assert "wrote" in capsys.readouterr().out
    from_dirs = pd.read_parquet(tmp_path / "diff" / "diff_summary.parquet").iloc[0]
    from_suites = pd.read_parquet(tmp_path / "impact" / "diff_summary.parquet").iloc[0]
    for name in (
        "kendall_tau",
        "spearman_rho",
        "top_10_overlap",
        "top_50_overlap",
        "top_100_overlap",
        "moved_more_than_n",
        "newly_clipped",
        "newly_unclipped",
        "scores_changed",
        "rank_moves_beyond_intervals",
    ):
        assert from_dirs[name] == pytest.approx(from_suites[name]), name
        assert from_dirs[name] == pytest.approx(diff.summary[name]), name
    assert (
        "| subtask scores newly clipped / unclipped |"
        in (tmp_path / "d.md").read_text()
    )


def test_cli_impact_usage_and_suite_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["impact"]) == 2
    assert "Hint: lbnorm impact --set-bound GPQA=0.3" in capsys.readouterr().err
    assert main(["impact", "--set-bound", "GPQA=1.2"]) == 2  # an option's value
    assert "Hint: e.g. --set-bound GPQA=0.3" in capsys.readouterr().err
    with pytest.raises(
        SuiteError,
        match=r"pools its subtasks.*\n.*Hint: set the whole benchmark: --set-bound GPQA=0.3",
    ):
        override_bounds(
            load_suite("openllm-v2"), [parse_bound_override("GPQA/main=0.3")]
        )
    with pytest.raises(
        SuiteError, match=r"has no benchmark 'DROP'.*\n.*Hint: use one of"
    ):
        override_bounds(load_suite("openllm-v2"), [parse_bound_override("DROP=0.3")])


def test_diff_reads_an_output_written_without_subtasks(
    golden_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = sorted(golden_dir.glob("*.json"))
    old, new = tmp_path / "old", tmp_path / "new"
    assert main(["run", *map(str, files[:5]), "--out", str(old), "--quiet"]) == 0
    assert (
        main(["run", *map(str, files), "--out", str(new), "--quiet", "--no-subtasks"])
        == 0
    )
    capsys.readouterr()
    assert main(["diff", str(old), str(new)]) == 0
    text = capsys.readouterr().out
    assert "| variants | 5 on both sides, 3 added, 0 removed |" in text
    assert "newly clipped / unclipped | n/a (no subtask tables) |" in text
    assert "## Bounds changed (0)" in text  # the bounds from the suite it records


FIXTURES = Path(__file__).parent / "fixtures"


def test_bounds_are_compared_suite_to_suite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One suite, two outputs scoring other subtasks: no bound "removed", coverage apart."""
    old, new = tmp_path / "old", tmp_path / "new"
    assert (
        main(["run", str(FIXTURES / "full_structure"), "--out", str(old), "--quiet"])
        == 0
    )
    seeds = FIXTURES / "tables" / "seed_examples.csv"
    argv = ["run", str(seeds), "--missing", "partial", "--out", str(new), "--quiet"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["diff", str(old), str(new)]) == 0
    text = capsys.readouterr().out
    assert "## Bounds changed (0)\n\nNone." in text
    assert "| subtasks with scores | 40 old, 6 new |" in text
    assert (
        "| benchmark | old subtasks | new subtasks |\n|---|---:|---:|\n"
        "| IFEval | 2 | 0 |\n| BBH | 24 | 0 |\n| MATH Lvl 5 | 7 | 0 |\n| MMLU-PRO | 1 | 0 |\n"
    ) in text
    assert "## Removed (2)" in text
    assert "| meta-llama/Meta-Llama-3-8B-Instruct | bfloat16 | 2 | 23.91 |" in text


def test_rejected_files_name_the_variants_they_held() -> None:
    """A variant gone with its rejected file (by its old rows' source, else its folder)."""
    old = Snapshot(
        leaderboard=_board(["org/a", "org/b"], [40.0, 30.0]),
        benchmarks=["X", "Y"],
        subtasks=_subtasks(["org/a", "org/b"], [False, False], 0.25).assign(
            source=["t/org/a/r.json", "t/org/b/r.json"]
        ),
    )
    new = Snapshot(
        leaderboard=_board(["org/a"], [40.0]),
        benchmarks=["X", "Y"],
        rejected=("t/org/b/r.json",),
    )
    reasons = diff_snapshots(old, new).models.set_index("model")["reason"]
    assert reasons.to_dict()["org/b"] == "file rejected: t/org/b/r.json"
    assert pd.isna(reasons.to_dict()["org/a"])
    by_folder = Snapshot(leaderboard=old.leaderboard, benchmarks=["X", "Y"])
    reasons = diff_snapshots(by_folder, new).models.set_index("model")["reason"]
    assert reasons.to_dict()["org/b"] == "file rejected: t/org/b/r.json"


@pytest.mark.slow
def test_a_variant_lost_to_a_rejected_file_is_named_with_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(FIXTURES / "full_structure", tree)
    shutil.copytree(FIXTURES / "comparability" / "example-org", tree / "example-org")
    cache, old, new = (str(tmp_path / name) for name in ("cache", "old", "new"))
    assert main(["run", str(tree), "--out", old, "--cache", cache, "--quiet"]) == 0
    (bad,) = (tree / "example-org").rglob("results_*.json")
    data = json.loads(bad.read_text())
    data["results"]["leaderboard_gpqa_main"]["acc_norm,none"] = 1.7
    bad.write_text(json.dumps(data))
    assert main(["run", str(tree), "--out", new, "--cache", cache, "--quiet"]) == 7
    capsys.readouterr()
    assert main(["diff", old, new, "--largest", "1"]) == 0
    text = capsys.readouterr().out
    assert (
        "## Removed (1)\n\n| model | precision | old rank | old average | why |\n"
        "|---|---|---:|---:|---|\n"
        f"| example-org/Yi-34B-Chat-rerun | bfloat16 | 1 | 24.26 | file rejected: {bad} |\n"
    ) in text
    models = diff_snapshots(read_snapshot(old), read_snapshot(new)).models
    removed = models[models["status"] == "removed"]
    assert removed["reason"].tolist() == [f"file rejected: {bad}"]


def test_diff_quiet_prints_nothing_and_writes_what_it_is_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    seeds = FIXTURES / "tables" / "seed_examples.csv"
    argv = ["run", str(seeds), "--missing", "partial", "--out", str(out)]
    assert main([*argv, "--quiet"]) == 0
    assert main(["diff", str(out), str(out), "--quiet", "--no-intervals"]) == 0
    md = tmp_path / "changes.md"
    argv = ["diff", str(out), str(out), "--quiet", "--markdown", str(md)]
    assert main([*argv, "--out", str(tmp_path / "d")]) == 0
    assert capsys.readouterr() == ("", "")
    assert md.read_text().startswith(f"# lbnorm diff: {out} -> {out}")
    assert (tmp_path / "d" / "diff_models.parquet").is_file()


def test_diff_help_gives_its_own_exit_codes_and_examples(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["diff", "--help"]) == 0
    text = capsys.readouterr().out
    epilog = text[text.index("exit codes:") :]
    assert "4   OLD_OUT or NEW_OUT is missing" in epilog
    assert "health" not in epilog
    assert "lbnorm impact" not in epilog
    assert "lbnorm run" not in epilog
    assert "lbnorm diff yesterday-out/ today-out/ --markdown changes.md" in epilog
