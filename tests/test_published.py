"""The final published Open LLM Leaderboard v2 table (4,576 rows) is reproduced."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lbnorm import normalize_scores
from lbnorm.suites import parse_suite

# Benchmarks whose published score is a function of the published raw value alone.
BENCHMARK_LEVEL_SUITE = b"""
name = "openllm-v2-benchmark-level"
[[benchmarks]]
name = "IFEval"
subtasks = [{ name = "all", num_choices = 0 }]
[[benchmarks]]
name = "MATH Lvl 5"
aggregation = "pool-then-normalize"
subtasks = [{ name = "all", num_choices = 0, n_samples = 1324 }]
[[benchmarks]]
name = "GPQA"
aggregation = "pool-then-normalize"
subtasks = [{ name = "all", num_choices = 4, n_samples = 1192 }]
[[benchmarks]]
name = "MMLU-PRO"
subtasks = [{ name = "all", num_choices = 10, n_samples = 12032 }]
"""
SIX = ["IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO"]


@pytest.fixture(scope="module")
def published(published_csv: Path) -> pd.DataFrame:
    table = pd.read_csv(published_csv)
    assert len(table) == 4576
    return table.assign(**{"Model sha": table["Model sha"].fillna("")})


def test_benchmark_level_scores_reproduce_published(published: pd.DataFrame) -> None:
    suite = parse_suite(BENCHMARK_LEVEL_SUITE, source="test")
    names = ["IFEval", "MATH Lvl 5", "GPQA", "MMLU-PRO"]
    long = published.melt(
        id_vars=["fullname", "Precision", "Model sha", "Chat Template"],
        value_vars=[f"{name} Raw" for name in names],
        var_name="benchmark",
        value_name="raw_score",
    )
    scores = pd.DataFrame(
        {
            "model": long["fullname"],
            "precision": long["Precision"],
            "revision": long["Model sha"],
            "chat_template": long["Chat Template"],
            "benchmark": long["benchmark"].str.removesuffix(" Raw"),
            "subtask": "all",
            "raw_score": long["raw_score"],
        }
    )
    board = normalize_scores(scores, suite).leaderboard
    assert len(board) == 4576
    merged = published.merge(
        board,
        left_on=["fullname", "Precision", "Model sha", "Chat Template"],
        right_on=["model", "precision", "revision", "chat_template"],
        suffixes=("_published", ""),
        validate="one_to_one",
    )
    assert len(merged) == 4576
    for name in names:
        error = (merged[name] - merged[f"{name}_published"]).abs()
        assert error.max() < 1e-9, (name, error.max())


def test_published_average_is_the_plain_mean_of_six(published: pd.DataFrame) -> None:
    error = (published[SIX].mean(axis=1) - published["Average ⬆️"]).abs()
    assert error.max() < 1e-9
    # and a weighted or raw-based average would not be
    assert (
        published[[f"{n} Raw" for n in SIX]].mean(axis=1) * 100 - published["Average ⬆️"]
    ).abs().max() > 1


def test_the_published_table_has_no_partial_rows(published: pd.DataFrame) -> None:
    assert not published[SIX].isna().any().any()
    assert np.isfinite(published["Average ⬆️"]).all()
