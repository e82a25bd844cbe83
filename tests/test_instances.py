"""Per-instance rules: the suite keys, and the values they give where samples are read.

The oracle is AlpacaEval's own arithmetic (``metrics/helpers.py``: ``describe_head2head``
of ``AbsoluteScoringRule`` and ``ZeroOneScoringRule``), written here independently in
pandas, step by step as AlpacaEval does it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbnorm.core.errors import InputError, SuiteError
from lbnorm.core.options import RunOptions
from lbnorm.readers.catalog import read_files
from lbnorm.readers.harness import subtask_columns
from lbnorm.readers.instances import (
    InstanceRules,
    apply_rule,
    instance_rules,
    results_columns,
)
from lbnorm.readers.samples import (
    aggregate_sample_batches,
    aggregate_samples_files,
    aggregate_samples_table,
)
from lbnorm.suites import Suite, load_suite
from lbnorm.suites.instances import InstanceRule, parse_instance_rule

TASK = "judge"
RULE = 'scale = [1, 2], draw = 1.5, recode = [[0, 1.5]], non_finite = "drop"'
#: benchmark name -> statistic, as AlpacaEval's leaderboard names the columns
STATISTICS = {
    "win_rate": "mean",
    "discrete_win_rate": "discrete",
    "n_wins": "wins",
    "n_wins_base": "losses",
    "n_draws": "draws",
    "n_total": "total",
}


def write_suite(folder: Path, *, rule: str = RULE, instances: int = 805) -> Path:
    """A suite reading every statistic of one annotator's preferences, and the lengths."""
    lines = ['name = "instances-test"']
    for name, statistic in STATISTICS.items():
        lines += [
            "[[benchmarks]]",
            f'name = "{name}"',
            f'subtasks = [{{ name = "{TASK}", task = "{TASK}", metric = "preference", '
            f'statistic = "{statistic}", {rule} }}]',
        ]
    lines += [
        "[[benchmarks]]",
        'name = "avg_length"',
        'subtasks = [{ name = "outputs", task = "model_outputs", metric = "length", '
        f'instances = {instances}, round = "floor" }}]',
    ]
    path = folder / "suite.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def alpacaeval_head2head(preferences: list[float | None]) -> dict[str, float]:
    """AlpacaEval's ``get_winrate`` (weighted and discrete), in pandas, as it computes it."""
    given_values = pd.Series(preferences, dtype=float)
    series = given_values.replace({0: 1.5}).astype(float)
    n_draws = int(((series == 1.5) | (series == 0)).sum())
    series = series.replace({0.0: 1.5})
    kept = series[(series >= 1) & (series <= 2)] - 1
    rounded = given_values.replace({1.5: 0}).round().astype(pd.Int64Dtype())
    discrete = rounded.astype(float).replace({0.0: 1.5})
    discrete = discrete[(discrete >= 1) & (discrete <= 2)] - 1
    return {
        "win_rate": float(kept.mean()) * 100,
        "standard_error": cast(float, kept.sem()) * 100,
        "n_wins": float((kept > 0.5).sum()),
        "n_wins_base": float((kept < 0.5).sum()),
        "n_draws": float(n_draws),
        "n_total": float(len(kept)),
        "discrete_win_rate": float(discrete.mean()) * 100,
    }


def sample_table(preferences: dict[str, list[float | None]]) -> pa.Table:
    """A sample table of each model's preferences (null for None)."""
    models, values = [], []
    for model, given_values in preferences.items():
        models += [model] * len(given_values)
        values += given_values
    return pa.table(
        {
            "model": pa.array(models, pa.string()),
            "task": pa.array([TASK] * len(values), pa.string()),
            "metric": pa.array(["preference"] * len(values), pa.string()),
            "doc_id": pa.array(np.arange(len(values)), pa.int64()),
            "value": pa.array(values, pa.float64()),
        }
    )


def values_of(scores: pa.Table) -> dict[tuple[str, str], tuple[float, float]]:
    """(model, benchmark) -> (raw_score, stderr; NaN for null)."""
    rows = scores.select(["model", "benchmark", "raw_score", "stderr"]).to_pylist()
    return {
        (str(r["model"]), str(r["benchmark"])): (
            r["raw_score"],
            math.nan if r["stderr"] is None else r["stderr"],
        )
        for r in rows
    }


def check_against_alpacaeval(
    scores: pa.Table, preferences: dict[str, list[float | None]]
) -> None:
    got = values_of(scores)
    for model, given_values in preferences.items():
        expected = alpacaeval_head2head(given_values)
        win_rate, standard_error = got[model, "win_rate"]
        assert win_rate * 100 == pytest.approx(expected["win_rate"], abs=1e-9)
        if math.isnan(expected["standard_error"]):
            assert math.isnan(standard_error)
        else:
            assert standard_error * 100 == pytest.approx(
                expected["standard_error"], abs=1e-9
            )
        assert got[model, "discrete_win_rate"][0] == pytest.approx(
            expected["discrete_win_rate"], abs=1e-9
        )
        for name in ("n_wins", "n_wins_base", "n_draws", "n_total"):
            assert got[model, name][0] == expected[name], (model, name)
            assert math.isnan(got[model, name][1])


@pytest.fixture
def suite(tmp_path: Path) -> Suite:
    return load_suite(write_suite(tmp_path))


# --- the suite keys ------------------------------------------------------------------


def test_the_rule_is_parsed_with_its_defaults() -> None:
    rule = parse_instance_rule(
        {"task": "t", "scale": [1, 2], "statistic": "wins"}, where="x"
    )
    assert rule == InstanceRule(statistic="wins", scale=(1.0, 2.0))
    assert rule.draw_point == 1.5
    assert not rule.is_score
    assert parse_instance_rule({"task": "t", "metric": "m"}, where="x") is None
    assert InstanceRule(scale=(0.0, 10.0)).is_score


def test_a_suite_round_trips_its_rules(tmp_path: Path, suite: Suite) -> None:
    subtask = suite.benchmarks[2].subtasks[0]
    assert subtask.instance == InstanceRule(
        statistic="wins",
        scale=(1.0, 2.0),
        draw=1.5,
        recode=((0.0, 1.5),),
        non_finite="drop",
    )
    assert suite.benchmarks[-1].subtasks[0].instance == InstanceRule(
        instances=805, rounding="floor"
    )
    again = load_suite(write_suite(tmp_path))
    assert again.benchmarks == suite.benchmarks


BAD_RULES = [
    ("scale = [2, 1]", "scale \\[2, 1\\] must have lo < hi"),
    ("scale = [1]", "scale must be \\[lo, hi\\], got \\[1\\]"),
    ('scale = [1, "2"]', "scale must be a finite number, got '2'"),
    ("scale = [1, inf]", "scale must be a finite number, got inf"),
    ("scale = [1, 2], draw = 3", "draw 3 is outside the scale \\[1, 2\\]"),
    ("draw = true", "draw must be a finite number, got True"),
    ("recode = [0, 1.5]", "recode must be a list of \\[from, to\\] pairs"),
    ("recode = [[0, 1.5], [0, 1]]", "recode names a value twice"),
    ("scale = [1, 2], recode = [[0, 3]]", "recode target 3 is outside the scale"),
    ('non_finite = "skip"', "non_finite must be one of \\['error', 'drop'\\]"),
    ('statistic = "median"', "statistic must be one of \\['mean', 'wins'"),
    ('round = "nearest"', "round must be one of \\['none', 'floor'\\]"),
    ("instances = 0", "instances must be a positive integer"),
    ("instances = 805.0", "instances must be a positive integer"),
    ('instances = 5, statistic = "total"', "instances divides a mean"),
    ('statistic = "wins"', "statistic = 'wins' compares each value with the draw"),
]


@pytest.mark.parametrize(("keys", "message"), BAD_RULES)
def test_a_bad_rule_names_the_subtask_and_key(
    tmp_path: Path, keys: str, message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        'name = "bad"\n[[benchmarks]]\nname = "B"\n'
        f'subtasks = [{{ name = "s", task = "t", metric = "m", {keys} }}]\n'
    )
    with pytest.raises(SuiteError, match=rf"bad\.toml: benchmarks\[0\] \(B\) subtasks\[0\] \(s\): {message}.*\n.*Hint: "):  # fmt: skip
        load_suite(path)


def test_rules_need_a_task(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        'name = "bad"\n[[benchmarks]]\nname = "B"\n'
        'subtasks = [{ name = "s", scale = [1, 2] }]\n'
    )
    with pytest.raises(SuiteError, match=r"\(s\): per-instance keys \(scale\) need the task and metric.*\nHint: add task"):  # fmt: skip
        load_suite(path)


def test_one_statistic_of_a_task_and_metric_once(tmp_path: Path) -> None:
    path = tmp_path / "twice.toml"
    line = f'subtasks = [{{ name = "s", task = "t", metric = "m", statistic = "wins", {RULE} }}]'  # fmt: skip
    path.write_text(
        f'name = "twice"\n[[benchmarks]]\nname = "A"\n{line}\n'
        f'[[benchmarks]]\nname = "B"\n{line}\n'
    )
    with pytest.raises(SuiteError, match=r"duplicate \(task, metric\) pair\(s\) \['t / m / wins'\].*\nHint: "):  # fmt: skip
        load_suite(path)


def test_a_suite_without_rules_has_none() -> None:
    assert instance_rules(load_suite("openllm-v2")) is None
    assert all(
        s.instance is None
        for b in load_suite("openllm-v2").benchmarks
        for s in b.subtasks
    )


# --- the values --------------------------------------------------------------------


def test_apply_rule_recodes_drops_and_compares_with_the_draw() -> None:
    rule = InstanceRule(
        statistic="mean", scale=(1.0, 2.0), recode=((0.0, 1.5),), non_finite="drop"
    )
    given_values = np.array([1.25, 0.0, 2.0, np.nan, 1.0, np.inf])
    rows = np.arange(6, dtype=np.int64)
    out, keep = apply_rule(rule, given_values, label="f", rows=rows, unit="row")
    assert keep.tolist() == [True, True, True, False, True, False]
    assert out.tolist() == [0.25, 0.5, 1.0, 0.0, 0.0, 0.0]
    expected = {
        "wins": [0, 0, 1, 0, 0, 0],
        "losses": [1, 0, 0, 0, 1, 0],
        "draws": [0, 1, 0, 0, 0, 0],
        "total": [1, 1, 1, 0, 1, 0],
        "discrete": [0, 0.5, 1, 0, 0, 0],
    }
    for statistic, values in expected.items():
        other = InstanceRule(
            statistic=statistic,  # type: ignore[arg-type]
            scale=(1.0, 2.0),
            recode=((0.0, 1.5),),
            non_finite="drop",
        )
        got, _ = apply_rule(other, given_values, label="f", rows=rows, unit="row")
        assert got.tolist() == values, statistic


def test_values_outside_the_scale_or_not_finite_are_refused() -> None:
    rule = InstanceRule(scale=(1.0, 2.0))
    rows = np.arange(10, 14, dtype=np.int64)
    with pytest.raises(InputError, match=r"^f: a value outside the scale \[1, 2\] in row\(s\) 11 \(2\.5\), 13 \(-1\.0\)\.\nHint: check the values' scale"):  # fmt: skip
        apply_rule(rule, np.array([1.0, 2.5, 1.5, -1.0]), label="f", rows=rows, unit="row")  # fmt: skip
    with pytest.raises(InputError, match=r"^f: a non-finite value in entry\(s\) 12 \(nan\)\.\nHint: .*non_finite = \"drop\""):  # fmt: skip
        apply_rule(rule, np.array([1.0, 1.0, np.nan, 1.0]), label="f", rows=rows, unit="entry")  # fmt: skip


def test_a_table_gives_alpacaevals_numbers(suite: Suite, tmp_path: Path) -> None:
    preferences: dict[str, list[float | None]] = {
        "a": [1.9, 1.2, 1.5, 0, None, 2.0, 1.0, 1.75],
        "b": [1.5000000001, 1.4999999999, 1.1, 1.3],
        "baseline": [1.5] * 5,
        "one": [1.7, None],  # one kept: no standard error
    }
    path = tmp_path / "samples.parquet"
    pq.write_table(sample_table(preferences), path)
    scores, ignored = aggregate_samples_table(
        path, subtask_columns(suite), rules=instance_rules(suite)
    )
    check_against_alpacaeval(scores, preferences)
    assert ignored == 2  # the dropped nulls
    assert values_of(scores)["baseline", "win_rate"] == (0.5, 0.0)
    keys = zip(
        scores["model"].to_pylist(), scores["benchmark"].to_pylist(), strict=True
    )
    n_samples = dict(zip(keys, scores["n_samples"].to_pylist(), strict=True))
    assert n_samples["a", "win_rate"] == n_samples["a", "n_wins"] == 7


preference = st.one_of(
    st.floats(1.0, 2.0),
    st.sampled_from([1.0, 1.5, 2.0, 0.0, 1.5 + 1e-10, 1.5 - 1e-10]),
    st.none(),
    st.just(math.nan),
)


@settings(deadline=None)
@given(
    preferences=st.dictionaries(
        st.sampled_from(["m1", "m2", "m3"]),
        st.lists(preference, min_size=1, max_size=40),
        min_size=1,
    ),
    batch_rows=st.integers(1, 50),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_preferences_in_any_batches_match_alpacaeval(
    preferences: dict[str, list[float | None]], batch_rows: int, seed: int
) -> None:
    suite = _shared_suite()
    kept = {m: v for m, v in preferences.items() if any(_is_kept(x) for x in v)}
    table = sample_table(preferences)
    table = table.take(np.random.default_rng(seed).permutation(table.num_rows))
    batches = ((batch, "t.parquet") for batch in table.to_batches(batch_rows))
    scores, _ = aggregate_sample_batches(
        batches, subtask_columns(suite), rules=instance_rules(suite)
    )
    check_against_alpacaeval(scores, kept)
    assert {m for m, _ in values_of(scores)} == set(kept)


def _is_kept(value: float | None) -> bool:
    return value is not None and not math.isnan(value)


_SUITES: list[Suite] = []


def _shared_suite() -> Suite:
    """One suite for every hypothesis example (function-scoped fixtures do not mix)."""
    if not _SUITES:
        import tempfile

        _SUITES.append(load_suite(write_suite(Path(tempfile.mkdtemp()))))
    return _SUITES[0]


def test_row_numbers_in_messages_are_the_files(suite: Suite, tmp_path: Path) -> None:
    """Copies of rows are appended, so a row's number stays its own."""
    table = sample_table({"a": [1.5, 1.2, 2.5, 1.1]})
    path = tmp_path / "bad.parquet"
    pq.write_table(table, path)
    with pytest.raises(InputError, match=r"bad\.parquet: judge / preference: a value outside the scale \[1, 2\] in row\(s\) 3 \(2\.5\)\.\nHint: "):  # fmt: skip
        aggregate_samples_table(path, subtask_columns(suite), rules=instance_rules(suite))  # fmt: skip


def test_a_null_outside_the_rules_stays_a_null(suite: Suite, tmp_path: Path) -> None:
    table = pa.concat_tables(
        [
            sample_table({"a": [1.5, 1.2]}),
            pa.table(
                {
                    "model": ["a"],
                    "task": ["another_task"],
                    "metric": ["acc"],
                    "doc_id": pa.array([0], pa.int64()),
                    "value": pa.array([None], pa.float64()),
                }
            ),
        ]
    )
    path = tmp_path / "null.parquet"
    pq.write_table(table, path)
    with pytest.raises(InputError, match=r"null\.parquet: value is null in row\(s\) 3\.\nHint: "):  # fmt: skip
        aggregate_samples_table(path, subtask_columns(suite), rules=instance_rules(suite))  # fmt: skip


def test_a_mean_over_the_boards_instances_is_floored(suite: Suite) -> None:
    lengths = [2570.0, 2847.0, 2659.0]
    table = pa.table(
        {
            "model": ["a"] * 3,
            "task": ["model_outputs"] * 3,
            "metric": ["length"] * 3,
            "doc_id": pa.array([0, 1, 2], pa.int64()),
            "value": lengths,
        }
    )
    scores, _ = aggregate_sample_batches(
        [(table.to_batches()[0], "x")],
        subtask_columns(suite),
        rules=instance_rules(suite),
    )
    value, stderr = values_of(scores)["a", "avg_length"]
    assert value == math.floor(sum(lengths) / 805) == 10
    assert math.isnan(stderr)


def test_harness_sample_files_take_the_rules_too(suite: Suite, tmp_path: Path) -> None:
    stamp = "2024-06-16T14-11-30.000000"
    folder = tmp_path / "org" / "model"
    folder.mkdir(parents=True)
    given_values = [1.9, 1.2, 1.5, 0.0, 2.0]
    lines = [
        json.dumps({"doc_id": i, "filter": "none", "preference": p})
        for i, p in enumerate(given_values)
    ]
    (folder / f"samples_{TASK}_{stamp}.jsonl").write_text("\n".join(lines) + "\n")
    scores, _ = aggregate_samples_files(
        sorted(folder.glob("*.jsonl")),
        subtask_columns(suite),
        rules=instance_rules(suite),
    )
    check_against_alpacaeval(
        scores.set_column(0, "model", pa.array(["org/model"] * scores.num_rows)),
        {"org/model": list(given_values)},
    )


def test_a_harness_file_value_outside_the_scale_is_named(
    suite: Suite, tmp_path: Path
) -> None:
    """The file, its task and metric, and the value's place among the file's values."""
    path = tmp_path / "org" / "model" / f"samples_{TASK}_2024-06-16T14-11-30.jsonl"
    path.parent.mkdir(parents=True)
    lines = [{"doc_id": i, "preference": p} for i, p in enumerate([1.5, 3.0, 1.2])]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(
        InputError,
        match=rf"{TASK} / preference: a value outside the scale \[1, 2\] in value\(s\) 1 \(3.0\).\nHint: check the values' scale",
    ) as caught:
        aggregate_samples_files(
            [path], subtask_columns(suite), rules=instance_rules(suite)
        )
    assert str(path) in str(caught.value)


def test_rules_keys_give_further_subtasks_their_own(suite: Suite) -> None:
    rules = instance_rules(suite)
    assert isinstance(rules, InstanceRules)
    assert rules.keys[0] == "preference"
    assert rules.keys[1] == "preference\x1fdiscrete"
    assert rules.keys[-1] == "length"
    assert rules.drops_non_finite(TASK, "preference")
    assert not rules.drops_non_finite("model_outputs", "length")


def test_a_results_file_never_gives_a_ruled_subtask(
    suite: Suite, tmp_path: Path
) -> None:
    """A results file holds one aggregate per (task, metric), not the instances a rule needs."""
    folder = tmp_path / "org" / "m"
    folder.mkdir(parents=True)
    document = {"results": {TASK: {"preference": 0.6}}, "model_name": "org/m"}
    (folder / "results_2024-01-01T00-00-00.json").write_text(json.dumps(document))
    with pytest.raises(InputError, match=r"no scores for suite 'instances-test'.*\nHint: "):  # fmt: skip
        read_files([tmp_path], suite=suite, options=RunOptions())
    columns = results_columns(subtask_columns(suite), suite)
    assert set(columns["task"]) == {""}
    plain = load_suite("openllm-v2")
    assert results_columns(subtask_columns(plain), plain) == subtask_columns(plain)
