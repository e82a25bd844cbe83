"""lbnorm.engines.validate: every check of check_batch, the failure tables and the one error.

Each failure kind is checked on a small batch: the mask, the failure row (file,
place, column, value, key) and the message (file, place, key, value, hint).
"""

from __future__ import annotations

import decimal
import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import OPENLLM_V2, score_tables

import lbnorm
from lbnorm.core.errors import LbnormError, ValidationError
from lbnorm.core.options import RunOptions, UnknownSubtasks
from lbnorm.core.schemas import Batch
from lbnorm.engines.encode import KeyEncoder
from lbnorm.engines.validate import (
    MAX_FAILURES_SHOWN,
    CheckedBatch,
    check_batch,
    describe_failures,
    failure_error,
    failure_rows,
    find_duplicates,
)

PAIRS = [(b.name, s.name) for b in OPENLLM_V2.benchmarks for s in b.subtasks]
GPQA_MAIN = PAIRS.index(("GPQA", "main"))
FAILURE_COLUMNS = [
    "check",
    "source",
    "row",
    "column",
    "value",
    "model",
    "benchmark",
    "subtask",
]


def _nothing_before(
    variant: npt.NDArray[np.int64], subtask: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    return np.zeros(variant.shape, dtype=bool)


def _scores(**columns: list[Any]) -> pa.Table:
    """A GPQA / main table of as many rows as `raw_score`, other columns given."""
    n_rows = len(columns["raw_score"])
    base: dict[str, Any] = {
        "model": [f"org/m{i}" for i in range(n_rows)],
        "benchmark": ["GPQA"] * n_rows,
        "subtask": ["main"] * n_rows,
    }
    return pa.table({**base, **columns})


def _check(
    table: pa.Table,
    *,
    source: str = "scores.parquet",
    first_row: int = 1,
    unknown: UnknownSubtasks = "error",
    encoder: KeyEncoder | None = None,
) -> tuple[Batch, CheckedBatch]:
    batch = Batch(table=table, source=source, first_row=first_row)
    checked = check_batch(
        batch,
        encoder or KeyEncoder(PAIRS),
        unknown=unknown,
        seen_before=_nothing_before,
    )
    return batch, checked


def _failing(checked: CheckedBatch) -> dict[str, list[int]]:
    """Check name -> failing rows, for the checks that failed."""
    return {
        check: np.flatnonzero(mask).tolist()
        for check, mask in checked.failed.items()
        if mask.any()
    }


def _raise(batch: Batch, checked: CheckedBatch) -> None:
    """What an engine does with a batch's failures."""
    if checked.n_failed:
        raise failure_error(
            describe_failures(batch, checked.failed), total=checked.n_failed
        )


# --- each failure kind: mask, failure row, message -----------------------------------

# check -> (columns, the failing row's column, its value as shown, the hint)
KINDS: dict[str, tuple[dict[str, list[Any]], str, str, str]] = {
    "empty_model": (
        {"model": ["org/a", ""], "raw_score": [0.5, 0.5]},
        "subtask",
        "main",
        "every row needs a non-empty model name.",
    ),
    "null_key": (
        {"model": ["org/a", None], "raw_score": [0.5, 0.5]},
        "subtask",
        "main",
        "model, precision, revision, chat_template, benchmark and subtask must not be empty (null).",
    ),
    "non_finite_score": (
        {"raw_score": [0.5, float("nan")]},
        "raw_score",
        "nan",
        "raw_score must be a number in [0, 1]; fix or remove the row.",
    ),
    "percent_scale": (
        {"raw_score": [0.5, 45.0]},
        "raw_score",
        "45",
        "raw_score looks like a percentage; lbnorm expects fractions in [0, 1]: divide by 100.",
    ),
    "out_of_range": (
        {"raw_score": [0.5, -0.25]},
        "raw_score",
        "-0.25",
        "raw_score must be a fraction in [0, 1].",
    ),
    "bad_stderr": (
        {"raw_score": [0.5, 0.5], "stderr": [0.01, -0.01]},
        "stderr",
        "-0.01",
        "stderr must be a finite number >= 0, or empty.",
    ),
    "bad_n_samples": (
        {"raw_score": [0.5, 0.5], "n_samples": [10, 0]},
        "n_samples",
        "0",
        "n_samples must be a positive integer, or empty.",
    ),
    "unknown_subtask": (
        {"subtask": ["main", "platinum"], "raw_score": [0.5, 0.5]},
        "subtask",
        "platinum",
        "the suite has no such (benchmark, subtask); fix the names (`lbnorm suites show SUITE` lists them), use another --suite, or pass --unknown ignore.",
    ),
    "duplicate_score": (
        {"model": ["org/a", "org/a"], "raw_score": [0.5, 0.6]},
        "subtask",
        "also at row 1",
        "each (model, precision, revision, chat_template, benchmark, subtask) must appear once; remove the duplicates or give them distinct variant keys.",
    ),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_failure_kind_names_file_row_key_value_and_hint(kind: str) -> None:
    columns, column, value, hint = KINDS[kind]
    batch, checked = _check(_scores(**columns), source="scores.parquet")
    failing = _failing(checked)
    last = [1] if kind != "duplicate_score" else [0, 1]  # both copies of a pair
    assert failing == {kind: last}
    assert checked.n_failed == len(last)
    [table] = describe_failures(batch, checked.failed)
    row = table.to_pylist()[-1]
    model = columns.get("model", ["org/m0", "org/m1"])[1]
    subtask = columns.get("subtask", ["main", "main"])[1]
    assert {name: row[name] for name in FAILURE_COLUMNS} == {
        "check": kind,
        "source": "scores.parquet",
        "row": "2",
        "column": column,
        "value": value,
        "model": model,
        "benchmark": "GPQA",
        "subtask": subtask,
    }
    shown = "null" if model is None else model or "''"
    detail = "" if column == "subtask" and kind != "duplicate_score" else ": "
    expected = (
        rf"^{checked.n_failed} score\(s\) failed validation:\n- {kind}: .*scores\.parquet row 2 "
        rf"\({re.escape(shown)} / GPQA / {re.escape(subtask)}{detail}.*\n"
        rf"  Hint: {re.escape(hint)}"
    )
    with pytest.raises(ValidationError, match=expected) as raised:
        _raise(batch, checked)
    assert isinstance(raised.value, LbnormError)
    assert raised.value.exit_code == 5
    assert raised.value.failure_table.column_names == FAILURE_COLUMNS  # no hint


def test_a_good_batch_fails_nothing() -> None:
    table = _scores(
        raw_score=[0.0, 1.0, 0.25],
        stderr=[0.0, None, float("nan")],  # NaN or null: no stderr, not a failure
        n_samples=[1, None, 198],
    )
    batch, checked = _check(table)
    assert checked.n_failed == 0
    assert checked.is_good.all()
    assert describe_failures(batch, checked.failed) == []
    assert checked.subtask.tolist() == [GPQA_MAIN] * 3
    assert checked.variant.tolist() == [0, 1, 2]


def test_values_out_of_range_and_percent_boundaries() -> None:
    scores = [1.0, 1.0000001, 100.0, 100.5, -1e-12, float("inf"), float("-inf")]
    _, checked = _check(_scores(raw_score=scores))
    # among fractions, only a score of 2 or more looks like a percentage: 1.0000001
    # is out of range (a stray value just over 1 is not a scale to divide by 100)
    assert _failing(checked) == {
        "percent_scale": [2],
        "out_of_range": [1, 3, 4],
        "non_finite_score": [5, 6],
    }
    # when at least half the scores are in (1, 100], every one of them is a percentage
    _, checked = _check(_scores(raw_score=[1.2, 45.0, 0.7]))
    assert _failing(checked) == {"percent_scale": [0, 1]}
    _, checked = _check(_scores(raw_score=[1.2, 0.5, 0.7]))
    assert _failing(checked) == {"out_of_range": [0]}


def test_unknown_subtasks_ignored_are_counted_not_failed() -> None:
    table = _scores(subtask=["main", "nope", "nope"], raw_score=[0.5, 0.5, 0.5])
    _, checked = _check(table, unknown="ignore")
    assert checked.n_failed == 0
    assert checked.n_ignored == 2
    assert checked.accepted.tolist() == [True, False, False]
    assert checked.is_good.tolist() == [True, False, False]


def test_a_row_failing_several_checks_counts_once() -> None:
    table = _scores(model=[None], raw_score=[float("nan")], stderr=[-1.0])
    batch, checked = _check(table)
    assert _failing(checked) == {
        "null_key": [0],
        "non_finite_score": [0],
        "bad_stderr": [0],
    }
    assert checked.n_failed == 1
    assert sum(t.num_rows for t in describe_failures(batch, checked.failed)) == 3


def test_message_says_a_listing_is_cut_only_when_it_is() -> None:
    table = _scores(model=["org/a", ""], raw_score=[0.5, 45.0])
    batch, checked = _check(table)
    error = failure_error(
        describe_failures(batch, checked.failed), total=checked.n_failed
    )
    assert error.failure_table.num_rows == 2  # empty_model and percent_scale, row 2
    assert str(error).startswith("1 score(s) failed validation:\n")


# --- nulls ---------------------------------------------------------------------------


def test_nulls_in_each_column() -> None:
    table = pa.table(
        {
            "model": ["a", None, "c", "d", "e", "f", "g"],
            "precision": ["", "", None, "", "", "", ""],
            "chat_template": [False, False, False, None, False, False, False],
            "benchmark": ["GPQA", "GPQA", "GPQA", "GPQA", None, "GPQA", "GPQA"],
            "subtask": ["main"] * 7,
            "raw_score": pa.array([0.5, 0.5, 0.5, 0.5, 0.5, None, 0.5]),
            "stderr": pa.array([None] * 7, pa.float64()),
            "n_samples": pa.array([None] * 7, pa.int64()),
        }
    )
    batch, checked = _check(table, source="scores.parquet")
    failing = _failing(checked)
    # a null key of the variant (rows 1-3) or a null benchmark (row 4)
    assert failing == {"null_key": [1, 2, 3, 4], "non_finite_score": [5]}
    assert checked.subtask.tolist()[4] == -1
    values = {
        row["row"]: row["value"]
        for part in describe_failures(batch, checked.failed)
        for row in part.to_pylist()
        if row["check"] == "non_finite_score"
    }
    assert values == {"6": "null"}  # a null cell is shown as null


@pytest.mark.parametrize("unknown", ["error", "ignore"])
def test_a_null_benchmark_or_subtask_is_a_null_key(unknown: UnknownSubtasks) -> None:
    table = pa.table(
        {
            "model": ["a", "b", "c"],
            "benchmark": ["GPQA", None, "GPQA"],
            "subtask": ["main", "main", None],
            "raw_score": [0.5, 0.5, 0.5],
        }
    )
    _, checked = _check(table, unknown=unknown)
    assert _failing(checked) == {"null_key": [1, 2]}
    assert checked.n_ignored == 0


def test_null_typed_optional_columns_are_absent_values() -> None:
    table = _scores(raw_score=[0.5, 0.6]).append_column(
        "stderr", pa.nulls(2)
    )  # a column of nulls (Parquet of an all-empty CSV column)
    _, checked = _check(table)
    assert checked.n_failed == 0
    assert np.isnan(checked.details["stderr"]).all()
    assert "n_samples" not in checked.details


# --- numbers: zero copy, integers, decimals ---------------------------------------------


def test_float_scores_are_read_without_a_copy() -> None:
    table = _scores(raw_score=[0.25, 0.5, 0.75])
    _, checked = _check(table)
    buffer = table.column("raw_score").chunk(0).buffers()[1]
    assert np.shares_memory(checked.scores, np.frombuffer(buffer, dtype=np.float64))
    assert checked.scores.tolist() == [0.25, 0.5, 0.75]


def test_sliced_batches_read_their_own_rows() -> None:
    table = _scores(raw_score=[0.1, 0.2, 0.3, 45.0, 0.5])
    batch, checked = _check(table.slice(2, 3), first_row=3)
    assert checked.scores.tolist() == [0.3, 45.0, 0.5]
    assert _failing(checked) == {"percent_scale": [1]}
    [part] = describe_failures(batch, checked.failed)
    assert part.column("row").to_pylist() == ["4"]
    assert part.column("model").to_pylist() == ["org/m3"]


def test_integer_scores_are_numbers() -> None:
    table = _scores(raw_score=pa.array([0, 1, 50], pa.int64()))
    _, checked = _check(table)
    assert checked.scores.dtype == np.float64
    assert checked.scores.tolist() == [0.0, 1.0, 50.0]
    assert _failing(checked) == {"percent_scale": [2]}


def test_decimal_columns_are_converted() -> None:
    table = _scores(
        raw_score=pa.array(
            [decimal.Decimal("0.50"), decimal.Decimal("45.00"), None],
            pa.decimal128(4, 2),
        ),
        stderr=pa.array(
            [decimal.Decimal("0.01"), None, decimal.Decimal("-0.02")],
            pa.decimal128(4, 2),
        ),
    )
    batch, checked = _check(table, source="scores.parquet")
    assert checked.scores[:2].tolist() == [0.5, 45.0]
    assert _failing(checked) == {
        "non_finite_score": [2],
        "percent_scale": [1],
        "bad_stderr": [2],
    }
    shown = {
        row["check"]: row["value"]
        for part in describe_failures(batch, checked.failed)
        for row in part.to_pylist()
    }
    assert shown == {
        "non_finite_score": "null",
        "percent_scale": "45.00",
        "bad_stderr": "-0.02",
    }


# --- where a failure is: lines, rows, results keys, the cell as written ----------------


def test_text_tables_count_lines_other_tables_rows() -> None:
    table = _scores(raw_score=[0.5, 45.0])
    for source, first_row, place in [
        ("scores.csv", 2, "line 3"),  # the header is line 1
        ("scores.jsonl", 1, "line 2"),
        ("scores.parquet", 1, "row 2"),
    ]:
        batch, checked = _check(table, source=source, first_row=first_row)
        with pytest.raises(
            ValidationError,
            match=rf"{re.escape(source)} {place} \(org/m1 / GPQA / main: raw_score='45'\)\n  Hint: raw_score looks like a percentage",
        ):
            _raise(batch, checked)


def test_results_keys_and_cells_as_written() -> None:
    key = "results['leaderboard_gpqa_main']['acc_norm,none']"
    table = _scores(raw_score=[0.5, float("nan")]).append_column(
        "_row", pa.array(["results['x']['acc']", key])
    )
    table = table.append_column("_raw_score_text", pa.array([None, "N/A"]))
    batch, checked = _check(table, source="org/m/results_2024.json")
    with pytest.raises(
        ValidationError,
        match=rf"org/m/results_2024\.json {re.escape(key)} \(org/m1 / GPQA / main: raw_score='N/A'\)\n  Hint: raw_score must be a number",
    ) as raised:
        _raise(batch, checked)
    assert raised.value.failure_table.column("row").to_pylist() == [key]


def test_a_source_column_names_each_rows_file() -> None:
    table = _scores(raw_score=[45.0, 0.5, 45.0]).append_column(
        "source", pa.array(["a.parquet", "b.parquet", "c.parquet"]).dictionary_encode()
    )
    batch, checked = _check(table, source="ignored")
    [part] = describe_failures(batch, checked.failed)
    assert part.column("source").to_pylist() == ["a.parquet", "c.parquet"]


# --- duplicates ------------------------------------------------------------------------


def test_duplicates_name_the_other_rows_of_their_file() -> None:
    table = _scores(
        model=["org/a", "org/b", "org/a", "org/a"], raw_score=[0.5, 0.5, 0.5, 0.6]
    )
    batch, checked = _check(table, source="scores.csv", first_row=2)
    assert _failing(checked) == {"duplicate_score": [0, 2, 3]}
    [part] = describe_failures(batch, checked.failed)
    assert part.column("value").to_pylist() == [
        "also at line 4, line 5",
        "also at line 2, line 5",
        "also at line 2, line 4",
    ]


def test_variant_keys_tell_duplicates_apart() -> None:
    table = _scores(
        model=["org/a"] * 4,
        precision=["bfloat16", "float16", "bfloat16", "bfloat16"],
        revision=["", "", "abc", ""],
        chat_template=[False, False, False, True],
        raw_score=[0.5] * 4,
    )
    _, checked = _check(table)
    assert checked.n_failed == 0
    assert sorted(set(checked.variant.tolist())) == [0, 1, 2, 3]


def test_duplicates_of_an_earlier_batch_say_so() -> None:
    encoder = KeyEncoder(PAIRS)
    _check(_scores(model=["org/a"], raw_score=[0.5]), encoder=encoder)
    seen = {(0, GPQA_MAIN)}

    def seen_before(
        variant: npt.NDArray[np.int64], subtask: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        pairs = zip(variant.tolist(), subtask.tolist(), strict=True)
        return np.array([pair in seen for pair in pairs], dtype=bool)

    batch = Batch(
        table=_scores(model=["org/b", "org/a"], raw_score=[0.5, 0.7]),
        source="later.parquet",
    )
    checked = check_batch(batch, encoder, unknown="error", seen_before=seen_before)
    assert _failing(checked) == {"duplicate_score": [1]}
    with pytest.raises(
        ValidationError,
        match=r"later\.parquet row 2 \(org/a / GPQA / main: also given by an earlier input\)\n  Hint: each \(model",
    ):
        _raise(batch, checked)


@given(
    variant=st.lists(st.integers(0, 5_000), min_size=1, max_size=30),
    data=st.data(),
)
def test_find_duplicates_equals_counting_pairs(
    variant: list[int], data: st.DataObject
) -> None:
    """Variant codes in a run or spread out (codes are below the run's variant
    count): a row is a duplicate iff its accepted pair repeats."""
    n_subtasks = 3
    subtask = data.draw(
        st.lists(
            st.integers(0, n_subtasks - 1), min_size=len(variant), max_size=len(variant)
        )
    )
    accepted = np.array(
        data.draw(st.lists(st.booleans(), min_size=len(variant), max_size=len(variant)))
    )
    pairs = list(zip(variant, subtask, strict=True))
    counted = [
        ok
        and sum(1 for p, a in zip(pairs, accepted, strict=True) if a and p == pair) > 1
        for pair, ok in zip(pairs, accepted, strict=True)
    ]
    found = find_duplicates(
        np.array(variant, dtype=np.int64),
        np.array(subtask, dtype=np.int64),
        accepted,
        n_subtasks,
        _nothing_before,
    )
    assert found.tolist() == counted


# --- failure tables and the one error ----------------------------------------------


def test_failures_are_capped_per_check_but_counted_exactly() -> None:
    n_rows = MAX_FAILURES_SHOWN + 200
    batch, checked = _check(_scores(raw_score=[45.0] * n_rows))
    [part] = describe_failures(batch, checked.failed)
    assert part.num_rows == MAX_FAILURES_SHOWN
    error = failure_error([part], total=checked.n_failed)
    message = str(error)
    assert message.startswith(
        f"{n_rows:,} score(s) failed validation (the first {MAX_FAILURES_SHOWN:,} are "
        "listed; --failures FILE writes every one):\n"
    )
    assert f" and {MAX_FAILURES_SHOWN - 5:,} more\n" in message  # five are shown
    assert message.count("scores.parquet row ") == 5
    assert len(error.failures) == MAX_FAILURES_SHOWN
    [every] = describe_failures(batch, checked.failed, limit=None)
    assert every.num_rows == n_rows
    assert str(failure_error([every], total=n_rows)).startswith(
        f"{n_rows:,} score(s) failed validation:\n"
    )


def test_failures_come_in_file_and_line_order_cells_as_written() -> None:
    """Not by check: line 2's percentage, line 3's NaN, line 4's -1 in that order."""
    table = _scores(raw_score=[0.5, 55.0, float("nan"), -1.0])
    batch, checked = _check(table)
    error = failure_error(describe_failures(batch, checked.failed), total=3)
    assert error.failure_table.select(["row", "check", "value"]).to_pylist() == [
        {"row": "2", "check": "percent_scale", "value": "55"},
        {"row": "3", "check": "non_finite_score", "value": "nan"},
        {"row": "4", "check": "out_of_range", "value": "-1"},
    ]


def test_checks_are_listed_in_order_each_with_its_hint() -> None:
    table = _scores(raw_score=[45.0, -1.0, float("nan"), 0.5])
    batch, checked = _check(table)
    message = str(failure_error(describe_failures(batch, checked.failed), total=3))
    checks = re.findall(r"^- (\w+):", message, flags=re.MULTILINE)
    assert checks == ["non_finite_score", "out_of_range", "percent_scale"]
    assert message.count("\n  Hint: ") == 3


def test_failure_rows_without_a_batch() -> None:
    table = failure_rows(
        "duplicate_score",
        ["org/a / GPQA / main", "org/b / GPQA / main"],
        sources=["(two parts of the input)"] * 2,
        rows=["-"] * 2,
        column="subtask",
    )
    assert table.column_names == [*FAILURE_COLUMNS, "suggestion"]
    assert table.column("model").null_count == 2
    with pytest.raises(
        ValidationError,
        match=r"- duplicate_score: \(two parts of the input\) \(org/a / GPQA / main: given twice\).*\n  Hint: each \(model",
    ):
        raise failure_error([table], total=2)


def test_no_failures_make_an_empty_table() -> None:
    error = failure_error([], total=0)
    assert error.failure_table.num_rows == 0
    assert error.failure_table.column_names == FAILURE_COLUMNS


@given(table=score_tables(OPENLLM_V2, optional_columns=False), data=st.data())
def test_injected_bad_scores_are_found_exactly(
    table: pa.Table, data: st.DataObject
) -> None:
    """Good generated scores with some replaced: exactly those rows fail, by kind."""
    n_rows = table.num_rows
    positions = data.draw(st.sets(st.integers(0, n_rows - 1), max_size=n_rows))
    bad = {
        position: data.draw(
            st.sampled_from([float("nan"), float("inf"), 45.0, 100.0, -0.5, 101.0])
        )
        for position in positions
    }
    scores = table.column("raw_score").to_pylist()
    for position, value in bad.items():
        scores[position] = value
    index = table.column_names.index("raw_score")
    injected = table.set_column(index, "raw_score", pa.array(scores, pa.float64()))
    _, checked = _check(injected)

    def kind(value: float) -> str:
        if not np.isfinite(value):
            return "non_finite_score"
        return "percent_scale" if 1.0 < value <= 100.0 else "out_of_range"

    expected: dict[str, list[int]] = {}
    for position in sorted(bad):
        expected.setdefault(kind(bad[position]), []).append(position)
    assert _failing(checked) == expected
    assert checked.n_failed == len(bad)


@given(table=score_tables(OPENLLM_V2, dictionary=False), data=st.data())
def test_dictionary_encoding_changes_no_failure(
    table: pa.Table, data: st.DataObject
) -> None:
    """Plain or dictionary text (as Parquet hands it over): the same failure rows."""
    scores = table.column("raw_score").to_pylist()
    position = data.draw(st.integers(0, table.num_rows - 1))
    scores[position] = 45.0
    bad = table.set_column(
        table.column_names.index("raw_score"), "raw_score", pa.array(scores)
    )
    encoded = bad
    for index, field in enumerate(bad.schema):
        if pa.types.is_string(field.type):
            encoded = encoded.set_column(
                index, field.name, bad.column(index).dictionary_encode()
            )
    described = []
    for version in (bad, encoded):
        batch, checked = _check(version)
        described.append(
            pa.concat_tables(describe_failures(batch, checked.failed)).to_pylist()
        )
    assert described[0] == described[1]
    assert any(row["check"] == "percent_scale" for row in described[0])


def test_names_match_ignoring_case_as_the_command_line_does(tmp_path: Path) -> None:
    """``MuSR`` / ``Murder_Mysteries`` is MUSR's murder_mysteries; the subtask table
    gives the suite's spelling, whichever engine writes it."""
    rows = "\n".join(
        f"m,{benchmark},{subtask},{score}"
        for benchmark, subtask, score in (
            ("MuSR", "Murder_Mysteries", 0.7),
            ("musr", "object_placements", 0.4),
            ("MUSR", "TEAM_ALLOCATION", 0.6),
        )
    )
    table = tmp_path / "scores.csv"
    table.write_text(f"model,benchmark,subtask,raw_score\n{rows}\n")
    for engine in ("stream", "memory"):
        out = tmp_path / engine
        result = lbnorm.run(
            [table], out=out, options=RunOptions(engine=engine, missing="partial")
        )
        assert result.benchmarks["normalized_score"].round(9).tolist() == [35.0]
        subtasks = pq.read_table(out / "subtasks.parquet").to_pydict()
        assert set(subtasks["benchmark"]) == {"MUSR"}
        assert sorted(subtasks["subtask"]) == [
            "murder_mysteries",
            "object_placements",
            "team_allocation",
        ]


def test_unknown_names_suggest_the_closest(tmp_path: Path) -> None:
    table = tmp_path / "scores.csv"
    table.write_text(
        "model,benchmark,subtask,raw_score\n"
        "m,GPQA,diamnd,0.5\nm,MUSRR,murder_mysteries,0.5\nm,BBH,nothing-like-it,0.5\n"
    )
    with pytest.raises(
        ValidationError, match=r"(?s)unknown_subtask: .*Hint: "
    ) as raised:
        lbnorm.run([table])
    message = str(raised.value)
    assert "line 2 (m / GPQA / diamnd; did you mean 'diamond'?)" in message
    assert "line 3 (m / MUSRR / murder_mysteries; did you mean 'MUSR'?)" in message
    assert "line 4 (m / BBH / nothing-like-it)" in message
