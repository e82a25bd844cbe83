"""The board rules (lbnorm.board): average, summation, rank methods, rates.

Each rule is checked against its publisher's formula written independently as a
plain loop (EvalPerf's stats.py, HELM's summarize.py, MTEB's Borda count, pandas'
row mean) or against scipy, on constructed data, and end to end in both engines.
"""

from __future__ import annotations

import math
import statistics
from fractions import Fraction
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pytest
import scipy.stats
from dense_oracle import dense_result
from hypothesis import example, given
from hypothesis import strategies as st

from lbnorm.board import (
    average_rows,
    average_stderr,
    rank_descending,
    score_board,
    sum_benchmarks,
)
from lbnorm.board.rates import borda_count, mean_win_rate, model_win_rate, task_win_rate
from lbnorm.core.errors import OptionsError, SuiteError
from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.core.schemas import Batch
from lbnorm.engines import stream
from lbnorm.engines.result import Result, finish_job
from lbnorm.readers import Inputs
from lbnorm.suites import Suite, SuiteArrays, parse_suite, suite_arrays

# --- scores: a few distinct values, so ties are common ----------------------------

_VALUES = st.sampled_from([0.0, 12.5, 33.25, 50.0, 50.0, 71.125, 100.0, math.nan])


def _matrices(max_rows: int = 7, max_columns: int = 5) -> st.SearchStrategy[np.ndarray]:
    return st.integers(1, max_rows).flatmap(
        lambda rows: st.integers(1, max_columns).flatmap(
            lambda columns: st.lists(
                st.lists(_VALUES, min_size=columns, max_size=columns),
                min_size=rows,
                max_size=rows,
            ).map(lambda cells: np.array(cells, dtype=np.float64))
        )
    )


# --- the publishers' formulas, as loops ---------------------------------------------


def _evalperf_task_win_rate(values: np.ndarray) -> list[float]:
    """stats.py taskwise_winrate: every task both have, every other model."""
    n_rows, n_columns = values.shape
    rates = []
    for me in range(n_rows):
        wins = ties = rounds = 0
        for other in range(n_rows):
            if other == me:
                continue
            for task in range(n_columns):
                a, b = values[me, task], values[other, task]
                if math.isnan(a) or math.isnan(b):
                    continue
                wins += a > b
                ties += a == b
                rounds += 1
        rates.append((wins + ties / 2) / rounds if rounds else math.nan)
    return rates


def _evalperf_model_win_rate(values: np.ndarray) -> list[float]:
    """stats.py modelwise_winrate, the aligned means compared exactly (Fractions)."""
    n_rows, n_columns = values.shape
    rates = []
    for me in range(n_rows):
        wins = ties = compared = 0
        for other in range(n_rows):
            if other == me:
                continue
            common = [
                t
                for t in range(n_columns)
                if not math.isnan(values[me, t]) and not math.isnan(values[other, t])
            ]
            if not common:
                continue
            mine = sum(Fraction(values[me, t]) for t in common) / len(common)
            theirs = sum(Fraction(values[other, t]) for t in common) / len(common)
            wins += mine > theirs
            ties += mine == theirs
            compared += 1
        rates.append((wins + ties / 2) / compared if compared else math.nan)
    return rates


def _helm_mean_win_rate(
    columns: np.ndarray, lower_is_better: list[bool]
) -> list[float]:
    """summarize.py compute_aggregate_row_win_rates (aggregation = "mean")."""
    per_row: list[list[float]] = [[] for _ in range(columns.shape[0])]
    for index, lower in enumerate(lower_is_better):
        counts: dict[float, int] = {}
        for value in columns[:, index]:
            if not math.isnan(value):
                counts[value] = counts.get(value, 0) + 1
        wins: dict[float, float] = {}
        seen = 0
        for value, count in sorted(counts.items(), reverse=lower):
            wins[value] = seen + (count - 1) / 2
            seen += count
        if seen < 2:
            continue
        for row, value in enumerate(columns[:, index]):
            if not math.isnan(value):
                per_row[row].append(wins[value] / (seen - 1))
    return [statistics.mean(rates) if rates else math.nan for rates in per_row]


def _mteb_borda(values: np.ndarray) -> list[float]:
    """MTEB's _borda_rank_from_long before the final rank: n - average rank per task."""
    n_rows, n_columns = values.shape
    n_models = sum(1 for r in range(n_rows) if not np.isnan(values[r]).all())
    points = [0.0] * n_rows
    for task in range(n_columns):
        present = [
            (values[r, task], r)
            for r in range(n_rows)
            if not math.isnan(values[r, task])
        ]
        for value, row in present:
            above = sum(1 for v, _ in present if v > value)
            equal = sum(1 for v, _ in present if v == value)
            rank = above + (equal + 1) / 2  # polars rank(method="average", descending)
            points[row] += n_models - rank
    return [
        points[r] if not np.isnan(values[r]).all() else math.nan for r in range(n_rows)
    ]


def _assert_close(got: np.ndarray, expected: list[float]) -> None:
    np.testing.assert_allclose(
        got, np.array(expected, dtype=np.float64), rtol=0, atol=1e-12
    )


@given(_matrices())
def test_task_win_rate_is_evalperfs(values: np.ndarray) -> None:
    _assert_close(task_win_rate(values), _evalperf_task_win_rate(values))


@given(_matrices())
def test_model_win_rate_is_evalperfs(values: np.ndarray) -> None:
    _assert_close(model_win_rate(values), _evalperf_model_win_rate(values))


def test_model_win_rate_compares_sums_exactly() -> None:
    """Means that differ in the last bit are no tie; equal sums in another order are."""
    tiny = np.nextafter(0.1, 1.0)
    values = np.array(
        [[0.1, 0.2, 0.3], [0.3, 0.2, 0.1], [0.1, 0.2, 0.3 + 1e-15], [tiny, 0.2, 0.3]]
    )
    _assert_close(model_win_rate(values), _evalperf_model_win_rate(values))
    # rows 0 and 1 hold the same values: a tie, though float sums in order differ
    assert (0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1


def test_model_win_rate_in_blocks_equals_one_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lbnorm.board import rates

    values = np.random.default_rng(0).choice([0.0, 25.0, 50.0, np.nan], size=(40, 6))
    whole = model_win_rate(values)
    monkeypatch.setattr(rates, "_BLOCK_ROWS", 7)
    np.testing.assert_array_equal(model_win_rate(values), whole)


@given(_matrices(), st.data())
def test_mean_win_rate_is_helms(values: np.ndarray, data: st.DataObject) -> None:
    lower = data.draw(
        st.lists(st.booleans(), min_size=values.shape[1], max_size=values.shape[1])
    )
    _assert_close(
        mean_win_rate(values, np.array(lower, dtype=bool)),
        _helm_mean_win_rate(values, lower),
    )


@given(_matrices())
def test_borda_count_is_mtebs(values: np.ndarray) -> None:
    _assert_close(borda_count(values), _mteb_borda(values))


def test_borda_then_min_rank() -> None:
    values = np.array([[90.0, 80.0], [80.0, 90.0], [70.0, np.nan]])
    points = borda_count(values)
    assert points.tolist() == [3.0, 3.0, 0.0]  # n = 3: (2 + 1), (1 + 2), (0 + 0)
    assert rank_descending(points, method="min").tolist() == [1.0, 1.0, 3.0]


@pytest.mark.parametrize("method", ["min", "ordinal", "dense"])
@given(
    values=st.lists(
        st.sampled_from([1.0, 2.0, 2.0, 3.0, math.nan]), min_size=1, max_size=12
    )
)
def test_rank_methods_are_scipys(method: str, values: list[float]) -> None:
    array = np.array(values)
    got = rank_descending(array, method=method)  # type: ignore[arg-type]
    present = ~np.isnan(array)
    expected = np.full(array.shape, np.nan)
    if present.any():
        expected[present] = scipy.stats.rankdata(
            -array[present], method=cast(Any, method)
        )
    np.testing.assert_array_equal(got, expected)


# --- averages and summation -------------------------------------------------------

BOARD_SUITE = """
name = "b"
[board]
{board}

[[benchmarks]]
name = "A"
range = [0, 100]
{a}
subtasks = [{{ name = "a1" }}, {{ name = "a2" }}, {{ name = "a3" }}]

[[benchmarks]]
name = "B"
range = [0, 100]
subtasks = [{{ name = "b1" }}]

[[benchmarks]]
name = "N"
kind = "statistic"
subtasks = [{{ name = "n" }}]
"""


def _board_suite(board: str = "", a: str = "") -> Suite:
    return parse_suite(BOARD_SUITE.format(board=board, a=a).encode(), source="b.toml")


def _run(
    suite: Suite,
    rows: list[tuple[str, str, str, float]],
    *,
    engine: str = "stream",
    missing: MissingPolicy = "exclude",
) -> Result:
    table = pa.table(
        {
            "model": [r[0] for r in rows],
            "benchmark": [r[1] for r in rows],
            "subtask": [r[2] for r in rows],
            "raw_score": [r[3] for r in rows],
        }
    )
    inputs = Inputs.of_batches([Batch(table=table, source="t.csv")])
    options = RunOptions(  # memory: the stream engine's subtask table held, sorted
        missing=missing, engine="memory" if engine == "memory" else "stream"
    )
    return finish_job(stream.start(inputs, suite, options))


ROWS = [
    ("m1", "A", "a1", 0.1), ("m1", "A", "a2", 0.2), ("m1", "A", "a3", 0.3),
    ("m1", "B", "b1", 40.0), ("m1", "N", "n", 7.0),
    ("m2", "A", "a1", 0.3), ("m2", "A", "a2", 0.2), ("m2", "A", "a3", 0.1),
    ("m2", "B", "b1", 40.0), ("m2", "N", "n", 9.0),
    ("m3", "A", "a1", 50.0), ("m3", "N", "n", 1.0),
]  # fmt: skip


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_subtasks_average_is_the_mean_of_every_subtask(engine: str) -> None:
    board = _run(
        _board_suite('average = "subtasks"'), ROWS, engine=engine, missing="partial"
    )
    row = board.leaderboard.set_index("model")
    # (0.1 + 0.2 + 0.3 + 40) / 4, not the mean of A's 0.2 and B's 40
    assert row.loc["m1", "average"] == pytest.approx((0.6 + 40.0) / 4, abs=1e-12)
    assert row.loc["m3", "average"] == pytest.approx(50.0)


def test_left_to_right_sums_as_a_pandas_row_mean_does() -> None:
    import pandas as pd

    suite = _board_suite('average = "subtasks"\nsummation = "left-to-right"')
    board = _run(suite, ROWS, missing="partial").leaderboard.set_index("model")
    frame = pd.DataFrame(
        {"a1": [0.1, 0.3], "a2": [0.2, 0.2], "a3": [0.3, 0.1], "b1": [40.0, 40.0]}
    )
    a_mean = frame[["a1", "a2", "a3"]].mean(axis=1)
    every_mean = frame.mean(axis=1)
    cell = board.to_dict(orient="index")
    assert cell["m1"]["A"] == a_mean[0] == ((0.1 + 0.2) + 0.3) / 3  # bit for bit
    assert cell["m2"]["A"] == a_mean[1] == ((0.3 + 0.2) + 0.1) / 3
    assert cell["m1"]["A"] != cell["m2"]["A"]  # the order shows
    assert cell["m1"]["average"] == every_mean[0]
    assert cell["m2"]["average"] == every_mean[1]
    # the benchmark table shows the same means as the leaderboard
    table = _run(suite, ROWS, missing="partial").benchmarks
    a = table[(table["model"] == "m1") & (table["benchmark"] == "A")]
    assert a["normalized_score"].item() == cell["m1"]["A"]


def test_exact_sums_tie_what_left_to_right_does_not() -> None:
    board = _run(_board_suite(), ROWS, missing="partial").leaderboard
    a = board.set_index("model")["A"].to_dict()
    assert a["m1"] == a["m2"]  # order-free


@pytest.mark.parametrize(
    ("own", "run", "expected"),
    [
        ("", "exclude", math.nan),  # m3 lacks a2, a3 and B: no average
        (
            "",
            "partial",
            (50.0 + 0.0) / 1,
        ),  # A partial: 50 over its one subtask; B absent
        ("", "zero", 50.0 / 4),  # all four subtasks, the absent at 0
        ('missing = "zero"', "partial", 50.0 / 3),  # A over 3; B absent, skipped
    ],
)
@pytest.mark.parametrize("summation", ["exact", "left-to-right"])
def test_subtasks_average_under_missing_policies(
    own: str, run: MissingPolicy, expected: float, summation: str
) -> None:
    suite = _board_suite(f'average = "subtasks"\nsummation = "{summation}"', a=own)
    board = _run(suite, ROWS, missing=run).leaderboard
    value = float(board.set_index("model")["average"].to_dict()["m3"])
    if math.isnan(expected):
        assert math.isnan(value)
    else:
        assert value == pytest.approx(expected, abs=1e-12)


def test_average_none_and_rank_by_a_benchmark() -> None:
    suite = _board_suite('average = "none"\nrank_by = "N"\nrank_method = "dense"')
    board = _run(suite, ROWS, missing="partial").leaderboard
    assert board["average"].isna().all()
    assert board["model"].tolist() == ["m2", "m1", "m3"]  # by the statistic N
    assert board["rank"].tolist() == [1, 2, 3]


def test_incomplete_rows_unranked() -> None:
    suite = _board_suite("rank_incomplete = false")
    board = _run(suite, ROWS, missing="partial").leaderboard.set_index("model")
    assert board.loc["m3", "average"] == pytest.approx(50.0)  # averaged, not ranked
    assert board["rank"].isna().tolist() == [False, False, True]


def test_ordinal_ties_in_key_order() -> None:
    suite = _board_suite('rank_by = "B"\nrank_method = "ordinal"')
    rows = [r for r in ROWS if r[0] != "m3"]
    board = _run(suite, list(reversed(rows)), missing="partial").leaderboard
    assert board[["model", "rank"]].to_numpy().tolist() == [["m1", 1], ["m2", 2]]


RATES = """
average = "none"
rank_by = "wins"

[[board.rates]]
name = "wins"
rule = "task-win-rate"
benchmarks = ["A"]

[[board.rates]]
name = "aligned"
rule = "model-win-rate"
benchmarks = ["A"]

[[board.rates]]
name = "helm"
rule = "mean-win-rate"
benchmarks = ["A", "B"]
lower_is_better = ["B"]

[[board.rates]]
name = "borda"
rule = "borda"
benchmarks = ["A", "B"]
"""


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_rates_end_to_end(engine: str) -> None:
    result = _run(_board_suite(RATES), ROWS, engine=engine, missing="partial")
    board = result.leaderboard.set_index("model").loc[["m1", "m2", "m3"]]
    a = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1], [50.0, np.nan, np.nan]])
    _assert_close(board["wins"].to_numpy(), _evalperf_task_win_rate(a))
    _assert_close(board["aligned"].to_numpy(), _evalperf_model_win_rate(a))
    columns = board[["A", "B"]].to_numpy()
    _assert_close(board["helm"].to_numpy(), _helm_mean_win_rate(columns, [False, True]))
    ab = np.array(
        [[0.1, 0.2, 0.3, 40.0], [0.3, 0.2, 0.1, 40.0], [50.0, np.nan, np.nan, np.nan]]
    )
    _assert_close(board["borda"].to_numpy(), _mteb_borda(ab))
    assert result.leaderboard["model"].iloc[0] == "m3"  # ranked by its win rate


def test_engines_agree_on_rates() -> None:
    """Both orders, and a dense pivot of the rows (:mod:`dense_oracle`)."""
    suite = _board_suite(RATES)
    rows = pa.table(
        {
            name: [row[at] for row in ROWS]
            for at, name in enumerate(["model", "benchmark", "subtask", "raw_score"])
        }
    )
    tables = [
        _run(suite, ROWS, engine=engine, missing="partial").leaderboard_table
        for engine in ("memory", "stream")
    ] + [dense_result(rows, suite, RunOptions(missing="partial")).leaderboard_table]
    assert tables[0].equals(tables[1])
    assert tables[0].equals(tables[2])


def test_sum_benchmarks_leaves_exact_boards_alone() -> None:
    suite = _board_suite()
    arrays = suite_arrays(suite)
    scores = np.array([[1.0, 2.0, 3.0]])
    assert (
        sum_benchmarks(suite, arrays, scores, missing="exclude", values=None) is scores
    )


def test_score_board_default_is_todays_board() -> None:
    from lbnorm.suites import load_suite

    suite = load_suite("openllm-v2")
    arrays = suite_arrays(suite)
    scores = np.random.default_rng(1).uniform(0, 100, size=(50, 6))
    scores[3, 2] = np.nan
    counts = np.tile(np.bincount(arrays.benchmark_index), (50, 1))
    board = score_board(
        suite, arrays, scores, np.full_like(scores, np.nan), counts, missing="partial"
    )
    expected, _ = _loop_average(
        scores, np.full_like(scores, np.nan), arrays.weight, "partial"
    )
    np.testing.assert_array_equal(board.average, expected)
    np.testing.assert_array_equal(board.rank, rank_descending(board.average))


def _loop_average(
    scores: np.ndarray, errors: np.ndarray, weight: np.ndarray, missing: str
) -> tuple[list[float], list[float]]:
    """Each row's weighted mean and its stderr, summed in benchmark order as plain floats."""
    averages, stderrs = [], []
    for row, error_row in zip(scores.tolist(), errors.tolist(), strict=True):
        total = divisor = squares = 0.0
        is_empty = is_unknown = False
        for score, error, w in zip(row, error_row, weight.tolist(), strict=True):
            if math.isnan(score):
                is_empty |= missing == "exclude"
                divisor += w if missing == "zero" else 0.0
                continue
            total += score * w
            divisor += w
            is_unknown |= math.isnan(error)
            squares += 0.0 if math.isnan(error) else (error * error) * (w * w)
        is_none = is_empty or divisor == 0.0
        averages.append(math.nan if is_none else total / divisor)
        unknown = is_none or is_unknown
        stderrs.append(math.nan if unknown else math.sqrt(squares) / divisor)
    return averages, stderrs


_CELLS = st.one_of(st.just(math.nan), st.floats(0.0, 100.0))


@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.lists(st.floats(0.01, 10.0), min_size=n, max_size=n),
            st.lists(st.lists(_CELLS, min_size=n, max_size=n), min_size=1, max_size=4),
            st.lists(st.lists(_CELLS, min_size=n, max_size=n), min_size=1, max_size=4),
        )
    ),
    st.sampled_from(["exclude", "partial", "zero"]),
)
@example(  # here numpy's pairwise weight.sum() is 14.169999999999998, in order 14.17
    (
        [1.95, 0.88, 0.22, 0.15, 2.46, 2.75, 1.86, 2.22, 1.68],
        [[50.0] * 8 + [math.nan]],
        [[1.0] * 9],
    ),
    "zero",
)
def test_benchmark_average_sums_in_benchmark_order(
    cells: tuple[list[float], list[list[float]], list[list[float]]],
    missing: MissingPolicy,
) -> None:
    """Every divisor (``zero``'s sum of all weights too) is summed as the numerator is.

    Bit-equal to a plain loop in benchmark order, with 8+ benchmarks and weights that
    are not integers (where numpy's pairwise ``weight.sum()`` could differ in the
    last bit), and within rounding of the exactly rounded sums (``math.fsum``).
    """
    weight = np.array(cells[0])
    scores = np.array(cells[1])
    errors = np.resize(np.array(cells[2]), scores.shape)
    n = weight.size  # a suite of n benchmarks with these weights, the default board
    arrays = SuiteArrays(
        lower_bound=np.zeros(n),
        n_samples=np.zeros(n),
        benchmark_index=np.arange(n),
        is_pooled=np.zeros(n, dtype=bool),
        weight=weight,
    )
    average, board_stderr = average_rows(
        _board_suite(), arrays, scores, errors, np.ones_like(scores), missing=missing
    )
    stderr = average_stderr(errors, scores, weight, missing=missing)
    expected, expected_stderr = _loop_average(scores, errors, weight, missing)
    np.testing.assert_array_equal(average, expected)
    np.testing.assert_array_equal(stderr, expected_stderr)
    np.testing.assert_array_equal(board_stderr, expected_stderr)
    for row, got in zip(scores.tolist(), average.tolist(), strict=True):
        taken = [(s, w) for s, w in zip(row, weight.tolist(), strict=True)]
        if missing != "zero":
            taken = [(s, w) for s, w in taken if not math.isnan(s)]
        exact = math.fsum(0.0 if math.isnan(s) else s * w for s, w in taken)
        divisor = math.fsum(w for _, w in taken)
        if not math.isnan(got):
            assert got == pytest.approx(exact / divisor, rel=1e-13, abs=1e-13)


# --- the [board] table: every mistake named ----------------------------------------


@pytest.mark.parametrize(
    ("board", "message"),
    [
        (
            'average = "median"',
            r": average must be one of \['benchmarks', 'subtasks', 'none'\], got 'median'",
        ),
        ('summation = "kahan"', r": summation must be one of"),
        (
            'rank_method = "average"',
            r": rank_method must be one of \['min', 'ordinal', 'dense'\]",
        ),
        ("rank_incomplete = 1", r": rank_incomplete must be true or false"),
        (
            'rank_by = "C"',
            r": rank_by 'C' is neither 'average', a benchmark nor a rate",
        ),
        (
            'average = "none"\nrank_by = "average"',
            r'rank_by = "average", but average = "none"',
        ),
        ("colour = 1", r": unknown key\(s\) \['colour'\]"),
        (
            '[[board.rates]]\nname = "w"\nrule = "elo"\nbenchmarks = ["A"]',
            r"rates\[0\] \(w\): unknown rule 'elo'",
        ),
        (
            '[[board.rates]]\nname = "w"\nrule = "borda"\nbenchmarks = ["Z"]',
            r"rates\[0\] \(w\): benchmark\(s\) \['Z'\] are not in the suite",
        ),
        (
            '[[board.rates]]\nname = "w"\nrule = "borda"\nbenchmarks = []',
            r"rates\[0\] \(w\): 'benchmarks' must list at least one",
        ),
        (
            '[[board.rates]]\nname = "w"\nrule = "task-win-rate"\nbenchmarks = ["A", "B"]',
            r"a task-win-rate compares one benchmark's subtasks, got 2",
        ),
        (
            '[[board.rates]]\nname = "w"\nrule = "borda"\nbenchmarks = ["A"]\nlower_is_better = ["A"]',
            r"lower_is_better belongs to a mean-win-rate",
        ),
        (
            '[[board.rates]]\nname = "w"\nrule = "mean-win-rate"\nbenchmarks = ["A"]\nlower_is_better = ["B"]',
            r"lower_is_better names \['B'\], which the rate does not read",
        ),
        (
            '[[board.rates]]\nname = "average"\nrule = "borda"\nbenchmarks = ["A"]',
            r"rate name\(s\) \['average'\] are leaderboard columns already",
        ),
        (
            '[[board.rates]]\nname = "A Raw"\nrule = "borda"\nbenchmarks = ["A"]',
            r"rate name\(s\) \['A Raw'\] are leaderboard columns",
        ),
        (  # every leaderboard column after the keys is taken, this one too
            '[[board.rates]]\nname = "n_benchmarks_expected"\nrule = "borda"\nbenchmarks = ["A"]',
            r"rate name\(s\) \['n_benchmarks_expected'\] are leaderboard columns",
        ),
        (
            '[[board.rates]]\nname = "w"\nrule = "borda"\nbenchmarks = ["A"]\n[[board.rates]]\nname = "w"\nrule = "borda"\nbenchmarks = ["B"]',
            r"duplicate rate name\(s\) \['w'\]",
        ),
        (
            '[[board.columns]]\ncolumn = "median"',
            r"columns\[0\]: column 'median' is not a leaderboard column",
        ),
        (
            '[[board.columns]]\ncolumn = "A"\ndigits = 16',
            r"columns\[0\]: digits must be a whole number from 0 to 15, got 16",
        ),
        (
            '[[board.columns]]\ncolumn = "A"\ndigits = true',
            r"digits must be a whole number",
        ),
        (
            '[[board.columns]]\ncolumn = "A"\nname = "model"',
            r"a presented column is named 'model'",
        ),
        (
            '[[board.columns]]\ncolumn = "A"\n[[board.columns]]\ncolumn = "B"\nname = "A"',
            r"duplicate column name\(s\) \['A'\]",
        ),
    ],
)
def test_bad_boards_name_the_key(board: str, message: str) -> None:
    with pytest.raises(
        SuiteError,
        match=r"^b\.toml: \[board\]" + "(.|\n)*" + message + r"(.|\n)*Hint: ",
    ):
        _board_suite(board)


def test_left_to_right_needs_subtask_means() -> None:
    text = 'name = "p"\n[board]\nsummation = "left-to-right"\n[[benchmarks]]\nname = "P"\naggregation = "pool-then-normalize"\nsubtasks = [{ name = "a", n_samples = 2 }]\n'
    with pytest.raises(
        SuiteError,
        match=r"summation = \"left-to-right\" sums subtask scores, but benchmark\(s\) \['P'\] pool raw scores.*\n.*Hint",
    ):
        parse_suite(text.encode(), source="p.toml")


def test_a_board_that_compares_every_model_does_not_spill() -> None:
    from lbnorm.engines.spill import spill_width

    arrays = suite_arrays(_board_suite(RATES))
    assert not arrays.can_spill
    assert arrays.keeps_scores
    with pytest.raises(
        OptionsError, match=r"cannot spill to disk.*\n.*Hint: raise --sum-memory"
    ):
        spill_width(arrays, 10**9, RunOptions(sum_memory=0.01))


def test_builtin_boards_round_trip_through_their_toml() -> None:
    from lbnorm.suites import builtin_suite_names, load_suite

    for name in builtin_suite_names():
        suite = load_suite(name)
        again = parse_suite(suite.text.encode(), source="copy.toml")
        assert (again.benchmarks, again.board) == (suite.benchmarks, suite.board)
        assert not again.is_modified


def test_a_spilled_run_applies_the_same_board(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row rules a partition at a time, the rank once: the unspilled run's tables."""
    import tempfile
    from pathlib import Path

    folder = Path(str(tmp_path)) / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    suite = _board_suite(
        'average = "subtasks"\nrank_by = "B"\nrank_method = "ordinal"\nrank_incomplete = false',
        a='missing = "zero"',
    )
    rows = [
        (f"m{i:03d}", benchmark, subtask, float((i * 7 + len(subtask)) % 101))
        for i in range(60)
        for benchmark, subtask in (
            ("A", "a1"),
            ("A", "a2"),
            ("A", "a3"),
            ("B", "b1"),
            ("N", "n"),
        )
        if not (i % 9 == 0 and subtask == "a2")
    ]
    table = pa.table(
        {
            name: [r[k] for r in rows]
            for k, name in enumerate(["model", "benchmark", "subtask", "raw_score"])
        }
    )
    batches = [
        Batch(table=table.slice(start, 40), source="t")
        for start in range(0, len(rows), 40)
    ]
    results = [
        finish_job(
            stream.start(
                Inputs.of_batches(batches),
                suite,
                RunOptions(missing="partial", subtasks=False, sum_memory=memory),
            )
        )
        for memory in (0.5, 1e-9)
    ]
    assert results[1].leaderboard_table.equals(results[0].leaderboard_table)
    assert results[1].benchmark_table.equals(results[0].benchmark_table)
    rank = results[0].leaderboard["rank"]
    assert int(rank.isna().sum()) == 7  # the rows missing a2: incomplete, unranked
    assert sorted(rank.dropna().astype(int)) == list(range(1, 54))  # ordinal


def test_shares_added_up_keep_the_subtask_scores() -> None:
    """Workers and Dask add stores up: each share's subtask scores come along."""
    suite = _board_suite(RATES)
    table = pa.table(
        {
            name: [r[k] for r in ROWS]
            for k, name in enumerate(["model", "benchmark", "subtask", "raw_score"])
        }
    )
    options = RunOptions(missing="partial")
    whole = stream.finish_totals(
        stream.sum_scores([Batch(table=table, source="t")], suite, options),
        suite,
        options=options,
    )
    shares = [
        stream.sum_scores(
            [Batch(table=table.slice(start, 5), source="t")], suite, options
        )
        for start in range(0, table.num_rows, 5)
    ]
    added = stream.finish_totals(stream.add_totals(shares), suite, options=options)
    assert added.leaderboard_table.equals(whole.leaderboard_table)
    assert added.leaderboard["wins"].notna().all()
