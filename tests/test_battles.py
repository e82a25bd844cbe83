"""Battle files in every shape and format, the --where filters, and every bad input."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from source_trees import nodes

from lbnorm.core.errors import InputError, LbnormError, WhereSyntaxError
from lbnorm.ratings import battles as battles_module
from lbnorm.ratings.battles import Battles, read_battles, read_model_map
from lbnorm.ratings.where import parse_where

FOLDER = Path(__file__).parent / "fixtures" / "battles"
CLEAN = FOLDER / "clean_battle_20230601.json"
SAME_BATTLES = [
    "clean_battle_20230522_win.json",
    "battles.csv",
    "battles.jsonl",
    "battles.parquet",
]
OUTCOME = {"model_a": 2, "model_b": 0, "tie": 1, "tie (bothbad)": 1}


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    """The clean_battle fixture parsed by the standard library: the oracle."""
    rows: list[dict[str, Any]] = json.loads(CLEAN.read_text())
    return rows


def _expected(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What read_battles must return for `rows`, computed row by row in Python."""
    models = sorted({r["model_a"] for r in rows} | {r["model_b"] for r in rows})
    code = {name: i for i, name in enumerate(models)}
    return {
        "models": models,
        "model_a": [code[r["model_a"]] for r in rows],
        "model_b": [code[r["model_b"]] for r in rows],
        "outcome": [OUTCOME[r["winner"]] for r in rows],
        "tstamp": [r["tstamp"] for r in rows],
    }


def _as_lists(battles: Battles) -> dict[str, Any]:
    assert battles.tstamp is not None
    return {
        "models": battles.models.tolist(),
        "model_a": battles.model_a.tolist(),
        "model_b": battles.model_b.tolist(),
        "outcome": battles.outcome.tolist(),
        "tstamp": battles.tstamp.tolist(),
    }


def test_clean_battle_json_matches_a_row_by_row_reading(
    records: list[dict[str, Any]],
) -> None:
    battles = read_battles(CLEAN)
    assert _as_lists(battles) == _expected(records)
    assert battles.count.tolist() == [1] * len(records)
    assert battles.n_battles == len(records) == battles.n_rows_read
    assert not battles.is_aggregated
    assert battles.sources == (str(CLEAN),)
    assert battles.warnings == ()
    assert battles.model_a.dtype == np.int32
    assert battles.outcome.dtype == np.int8


@pytest.mark.parametrize("name", SAME_BATTLES)
def test_every_format_reads_the_same_battles(
    name: str, records: list[dict[str, Any]]
) -> None:
    assert _as_lists(read_battles(FOLDER / name)) == _expected(records)


def test_several_files_pool_their_battles(records: list[dict[str, Any]]) -> None:
    battles = read_battles([FOLDER / "battles.csv", FOLDER / "battles.parquet"])
    assert battles.n_battles == 2 * len(records)
    expected = _expected(records)
    assert battles.model_a.tolist() == expected["model_a"] * 2
    assert battles.sources == (
        str(FOLDER / "battles.csv"),
        str(FOLDER / "battles.parquet"),
    )


def test_models_are_the_sorted_union_across_files(tmp_path: Path) -> None:
    first, second = tmp_path / "1.csv", tmp_path / "2.jsonl"
    first.write_text("model_a,model_b,winner\nzeta,alpha,model_a\n")
    second.write_text('{"model_a": "mid", "model_b": "alpha", "winner": "tie"}\n')
    battles = read_battles([first, second])
    assert battles.models.tolist() == ["alpha", "mid", "zeta"]
    assert battles.model_a.tolist() == [2, 1]
    assert battles.model_b.tolist() == [0, 0]
    assert battles.outcome.tolist() == [2, 1]


def test_aggregated_counts_expand_to_cells(records: list[dict[str, Any]]) -> None:
    battles = read_battles(FOLDER / "battle_counts.csv")
    assert battles.is_aggregated
    assert battles.tstamp is None
    assert battles.n_battles == len(records)
    assert battles.count.min() >= 1
    assert [w.code for w in battles.warnings] == ["unordered"]
    # the same cells as counting the battles one by one
    expected: dict[tuple[str, str, int], int] = {}
    for r in records:
        key = (r["model_a"], r["model_b"], OUTCOME[r["winner"]])
        expected[key] = expected.get(key, 0) + 1
    names = battles.models.tolist()
    got = {
        (names[a], names[b], int(o)): int(c)
        for a, b, o, c in zip(
            battles.model_a,
            battles.model_b,
            battles.outcome,
            battles.count,
            strict=True,
        )
    }
    assert got == expected


def test_aggregated_counts_in_jsonl_and_parquet(tmp_path: Path) -> None:
    rows = [
        {"model_a": "a", "model_b": "b", "wins_a": 3, "wins_b": 1, "ties": 0},
        {"model_a": "b", "model_b": "c", "wins_a": 0, "wins_b": 2, "ties": 5},
    ]
    jsonl = tmp_path / "counts.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parquet = tmp_path / "counts.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    for path in (jsonl, parquet):
        battles = read_battles(path)
        assert battles.is_aggregated
        assert battles.n_battles == 11
        cells = sorted(
            zip(
                battles.model_a.tolist(),
                battles.model_b.tolist(),
                battles.outcome.tolist(),
                battles.count.tolist(),
                strict=True,
            )
        )
        assert cells == [(0, 1, 0, 1), (0, 1, 2, 3), (1, 2, 0, 2), (1, 2, 1, 5)]


# --- filters ----------------------------------------------------------------------


WHERE_CASES = [
    ("anony", lambda r: r["anony"]),
    ("not anony", lambda r: not r["anony"]),
    ("language = 'English'", lambda r: r["language"] == "English"),
    ('language == "English"', lambda r: r["language"] == "English"),
    ("language != English", lambda r: r["language"] != "English"),
    ("tstamp >= 1682400000", lambda r: r["tstamp"] >= 1682400000),
    ("tstamp < 1.6824e9", lambda r: r["tstamp"] < 1.6824e9),
    ("turn > 1", lambda r: r["turn"] > 1),
    ("turn <= 1", lambda r: r["turn"] <= 1),
    (
        "language in ('Chinese', German)",
        lambda r: r["language"] in ("Chinese", "German"),
    ),
    ("language not in (English)", lambda r: r["language"] != "English"),
    ("winner = 'tie (bothbad)'", lambda r: r["winner"] == "tie (bothbad)"),
    ("model_a != gpt-4", lambda r: r["model_a"] != "gpt-4"),
]


@pytest.mark.parametrize("name", ["clean_battle_20230601.json", *SAME_BATTLES[1:]])
@pytest.mark.parametrize(("where", "keep"), WHERE_CASES)
def test_where_keeps_the_rows_python_would(
    name: str, where: str, keep: Any, records: list[dict[str, Any]]
) -> None:
    kept = [r for r in records if keep(r)]
    battles = read_battles(FOLDER / name, where=[where])
    expected = _expected(kept)
    got = _as_lists(battles)
    # codes index the models left after filtering
    assert got == expected
    assert battles.n_filtered_out == len(records) - len(kept)
    assert battles.n_rows_read == len(records)
    assert [w.code for w in battles.warnings] == (
        ["filtered"] if len(kept) < len(records) else []
    )


def test_where_conditions_combine_with_and(records: list[dict[str, Any]]) -> None:
    battles = read_battles(CLEAN, where=["anony", "language = English"])
    assert battles.n_battles == sum(
        r["anony"] and r["language"] == "English" for r in records
    )


def test_where_on_a_2023_file_filters_the_win_column(
    records: list[dict[str, Any]],
) -> None:
    battles = read_battles(
        FOLDER / "clean_battle_20230522_win.json", where=["win = tie"]
    )
    assert battles.n_battles == sum(r["winner"] == "tie" for r in records)
    assert set(battles.outcome.tolist()) == {1}


def test_null_filter_values_do_not_match(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(
        '{"model_a": "a", "model_b": "b", "winner": "model_a", "language": "English"}\n'
        '{"model_a": "a", "model_b": "b", "winner": "model_b"}\n'
        '{"model_a": "a", "model_b": "b", "winner": "tie", "language": null}\n'
    )
    assert read_battles(path, where=["language = English"]).outcome.tolist() == [2]
    assert read_battles(path, where=["language != Chinese"]).outcome.tolist() == [2]
    with pytest.raises(InputError, match=r"no battles left \(3 rows read"):
        read_battles(path, where=["language != English"])


@pytest.mark.parametrize(
    ("text", "column", "op", "values"),
    [
        ("anony", "anony", "true", ()),
        ("not anony", "anony", "false", ()),
        ("language = 'English'", "language", "==", ("English",)),
        ("language='it''s'", None, None, None),
        ("tstamp >= 1700000000", "tstamp", ">=", (1700000000.0,)),
        ("x != -2.5e3", "x", "!=", (-2500.0,)),
        ("flag = true", "flag", "==", (True,)),
        ("name = 'a b\\'c'", "name", "==", ("a b'c",)),
        (
            "lang in (English, 'Chinese', \"Ger man\")",
            "lang",
            "in",
            ("English", "Chinese", "Ger man"),
        ),
        ("lang not in (x)", "lang", "not in", ("x",)),
        ("category.code = yes", "category.code", "==", ("yes",)),
    ],
)
def test_parse_where_forms(
    text: str, column: str | None, op: str | None, values: tuple[object, ...] | None
) -> None:
    if column is None:
        with pytest.raises(WhereSyntaxError, match="Hint: write COLUMN"):
            parse_where(text)
        return
    where = parse_where(text)
    assert (where.column, where.op, where.values) == (column, op, values)
    assert where.text == text


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "the condition is empty"),
        ("   ", "the condition is empty"),
        ("= 3", "'=' is not a column name"),
        ("'language' = x", "is not a column name"),
        ("language English", "expected an operator after 'language', got 'English'"),
        ("language 'English'", "expected an operator"),
        ("language =", "expected one value after the operator"),
        ("language = a b", "expected one value after the operator"),
        ("language = (", "expected a value, got '\\('"),
        ("language in English", "expected a parenthesised list"),
        ("language in ()", "expected a parenthesised list"),
        ("language in (a,)", "ends with a comma"),
        ("language in (a b)", "expected values separated by commas"),
        ("language in (a, 1)", "mix types"),
        ("language not (a)", "expected 'not in"),
        ("language = 'open", "cannot read"),
        ("not 3x", "is not a column name"),
    ],
)
def test_parse_where_rejects_other_text_with_a_hint(text: str, problem: str) -> None:
    with pytest.raises(WhereSyntaxError, match=rf"(?s){problem}.*Hint: write COLUMN"):
        parse_where(text)


def test_where_syntax_error_is_a_usage_error() -> None:
    with pytest.raises(WhereSyntaxError) as caught:
        read_battles(CLEAN, where=["language =="])
    assert isinstance(caught.value, LbnormError)
    assert isinstance(caught.value, ValueError)
    assert caught.value.exit_code == 2


def test_parquet_filter_uses_the_stored_types(tmp_path: Path) -> None:
    path = tmp_path / "typed.parquet"
    table = pa.table(
        {
            "model_a": ["a", "b", "a"],
            "model_b": ["b", "a", "b"],
            "winner": ["model_a", "tie", "model_b"],
            "anony": [True, False, True],
            "turn": pa.array([1, 2, 3], pa.int64()),
            "language": pa.array(["x", "y", "x"]).dictionary_encode(),
        }
    )
    pq.write_table(table, path)
    assert read_battles(path, where=["anony"]).outcome.tolist() == [2, 0]
    assert read_battles(path, where=["turn >= 2"]).outcome.tolist() == [1, 0]
    assert (
        read_battles(path, where=["turn"]).n_battles == 3
    )  # integers: non-zero is true
    assert read_battles(path, where=["language = x"]).outcome.tolist() == [2, 0]
    assert read_battles(path, where=["anony = false"]).outcome.tolist() == [1]
    with pytest.raises(
        InputError, match=r"(?s)column 'language' is string, not a boolean.*Hint:"
    ):
        read_battles(path, where=["language"])
    with pytest.raises(
        InputError,
        match=r"(?s)'abc' does not fit column 'turn' \(int64\): compare it with a number.*Hint:",
    ):
        read_battles(path, where=["turn = abc"])
    assert read_battles(path, where=["anony = 1"]).outcome.tolist() == [2, 0]
    with pytest.raises(
        InputError,
        match=r"(?s)'maybe' does not fit column 'anony' \(bool\): compare it with true or false.*Hint:",
    ):
        read_battles(path, where=["anony = maybe"])


# --- warnings and other accepted inputs -----------------------------------------------


def test_a_file_without_tstamp_warns_that_elo_uses_file_order(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("model_a,model_b,winner\na,b,model_a\nb,a,tie (bothbad)\n")
    battles = read_battles(path)
    assert battles.tstamp is None
    assert [w.code for w in battles.warnings] == ["no_tstamp"]
    assert battles.outcome.tolist() == [2, 1]


def test_empty_tstamp_becomes_nan_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(
        '{"model_a": "a", "model_b": "b", "winner": "model_a", "tstamp": 5}\n'
        '{"model_a": "a", "model_b": "b", "winner": "model_b", "tstamp": null}\n'
    )
    battles = read_battles(path)
    assert battles.tstamp is not None
    assert battles.tstamp[0] == 5.0
    assert np.isnan(battles.tstamp[1])
    assert [w.code for w in battles.warnings] == ["null_tstamp"]


def test_parquet_tstamp_may_be_a_timestamp_or_an_integer(tmp_path: Path) -> None:
    base = {"model_a": ["a", "b"], "model_b": ["b", "a"], "winner": ["tie", "tie"]}
    moments = pa.array([1_700_000_000_500_000, None], pa.timestamp("us", tz="UTC"))
    stamped = tmp_path / "stamped.parquet"
    pq.write_table(pa.table({**base, "tstamp": moments}), stamped)
    times = read_battles(stamped).tstamp
    assert times is not None
    assert times[0] == 1_700_000_000.5
    assert np.isnan(times[1])
    counted = tmp_path / "counted.parquet"
    pq.write_table(pa.table({**base, "tstamp": pa.array([7, 3], pa.int64())}), counted)
    assert read_battles(counted).tstamp.tolist() == [7.0, 3.0]  # type: ignore[union-attr]
    texts = tmp_path / "texts.parquet"
    pq.write_table(pa.table({**base, "tstamp": ["noon", "dusk"]}), texts)
    with pytest.raises(
        InputError,
        match=r"tstamp is string, not a time\.\nHint: tstamp is a time in seconds",
    ):
        read_battles(texts)


def test_model_names_are_text_even_when_they_look_like_numbers(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("model_a,model_b,winner\n007,NA,model_a\nNA,null,model_b\n")
    assert read_battles(path).models.tolist() == ["007", "NA", "null"]


def test_battles_are_frozen() -> None:
    battles = read_battles(FOLDER / "battles.csv")
    with pytest.raises(AttributeError):
        battles.count = np.zeros(1, np.int64)  # type: ignore[misc]


# --- bad inputs ----------------------------------------------------------------------


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_self_battle_names_the_csv_line_even_after_a_multiline_field(
    tmp_path: Path,
) -> None:
    path = _write(
        tmp_path,
        "b.csv",
        'model_a,model_b,winner,note\na,b,model_a,"two\nlines"\n\nb,b,tie,x\n',
    )
    with pytest.raises(
        InputError,
        match=r"(?s)b\.csv: a model battles itself \(model_a == model_b\) at line 5: 'b'\.\nHint: drop self-battles",
    ):
        read_battles(path)


def test_self_battle_after_filtering_keeps_the_file_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "b.jsonl",
        '{"model_a": "a", "model_b": "a", "winner": "tie", "anony": false}\n'
        "\n"
        '{"model_a": "a", "model_b": "b", "winner": "tie", "anony": true}\n'
        '{"model_a": "c", "model_b": "c", "winner": "tie", "anony": true}\n',
    )
    assert read_battles(path, where=["anony", "model_a = a"]).model_b.tolist() == [1]
    with pytest.raises(InputError, match=r"at line 4: 'c'\.\nHint: drop self-battles"):
        read_battles(path, where=["anony"])
    with pytest.raises(InputError, match=r"at line 1, line 4: 'a', 'c'\.\nHint:"):
        read_battles(path)


def test_unknown_winner_names_value_and_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "b.jsonl",
        '{"model_a": "a", "model_b": "b", "winner": "model_a"}\n'
        '{"model_a": "a", "model_b": "b", "winner": "A"}\n'
        '{"model_a": "a", "model_b": "b", "winner": null}\n',
    )
    with pytest.raises(
        InputError,
        match=r"(?s)unknown winner value at line 2, line 3: 'A', null\.\nHint: winner must be one of 'model_a', 'model_b', 'tie', 'tie \(bothbad\)'",
    ):
        read_battles(path)


def test_unknown_win_value_in_a_2023_file_names_the_element_and_line(
    tmp_path: Path,
) -> None:
    rows = [
        {"model_a": "a", "model_b": "b", "win": "model_a"},
        {"model_a": "a", "model_b": "b", "win": "bothbad_vote"},
    ]
    path = _write(tmp_path, "old.json", json.dumps(rows, indent=2))
    with pytest.raises(
        InputError,
        match=r"(?s)unknown win value at element 2 \(line 7\): 'bothbad_vote'.*Hint: winner must be",
    ):
        read_battles(path)


def test_many_bad_rows_show_five_and_count_the_rest(tmp_path: Path) -> None:
    rows = "".join(f"m{i},m{i},tie\n" for i in range(8))
    path = _write(tmp_path, "b.csv", "model_a,model_b,winner\n" + rows)
    with pytest.raises(
        InputError, match=r"at line 2, line 3, line 4, line 5, line 6 \(and 3 more\)"
    ):
        read_battles(path)


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("b.csv", "model_a,model_b,winner\n,b,model_a\n", "line 2"),
        ("b.csv", "model_a,model_b,winner\na,b,model_a\na,  ,tie\n", "line 3"),
        (
            "b.jsonl",
            '{"model_a": "a", "model_b": "b", "winner": "tie"}\n{"model_a": null, "model_b": "b", "winner": "tie"}\n',
            "line 2",
        ),
        (
            "b.jsonl",
            '{"model_a": "a", "model_b": "b", "winner": "tie"}\n{"model_b": "b", "winner": "tie"}\n',
            "line 2",
        ),
        (
            "b.json",
            '[{"model_a": "a", "model_b": "b", "winner": "tie"},\n {"model_a": "a", "model_b": "", "winner": "tie"}]',
            "element 2 \\(line 2\\)",
        ),
    ],
)
def test_empty_or_null_model_name_names_the_row(
    tmp_path: Path, name: str, text: str, where: str
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(
        InputError,
        match=rf"(?s)empty or null model_[ab] at {where}.*Hint: every battle needs both model names",
    ):
        read_battles(path)


def test_null_model_in_parquet_names_the_row(tmp_path: Path) -> None:
    path = tmp_path / "b.parquet"
    pq.write_table(
        pa.table(
            {"model_a": ["a", None], "model_b": ["b", "b"], "winner": ["tie", "tie"]}
        ),
        path,
    )
    with pytest.raises(
        InputError, match=r"(?s)empty or null model_a at row 2: null\.\nHint:"
    ):
        read_battles(path)


@pytest.mark.parametrize(
    ("name", "text", "missing"),
    [
        ("b.csv", "model_a,model_b\na,b\n", r"\['winner'\]"),
        ("b.csv", "model_a,winner\na,tie\n", r"\['model_b'\]"),
        ("b.jsonl", '{"model_a": "a", "model_b": "b"}\n', r"\['winner'\]"),
        ("b.json", '[{"a": 1}]', r"\['model_a', 'model_b', 'winner'\]"),
        ("b.csv", "model_a,model_b,wins_a,wins_b\na,b,1,2\n", r"\['winner'\]"),
    ],
)
def test_missing_columns_are_named_with_the_expected_shapes(
    tmp_path: Path, name: str, text: str, missing: str
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(
        InputError,
        match=rf"(?s)missing column\(s\) {missing}.*Hint: battles need model_a, model_b, winner \(or win\)",
    ):
        read_battles(path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "model_a,model_b,wins_a,wins_b,ties\na,b,1,-2,0\n",
            r"wins_b is not a whole number >= 0 at line 2: -2\.0",
        ),
        (
            "model_a,model_b,wins_a,wins_b,ties\na,b,1.5,2,0\n",
            r"wins_a is not a whole number >= 0 at line 2: 1\.5",
        ),
        (
            "model_a,model_b,wins_a,wins_b,ties\na,b,1,2,\n",
            r"ties is not a whole number >= 0 at line 2: null",
        ),
    ],
)
def test_bad_counts_are_named(tmp_path: Path, text: str, problem: str) -> None:
    path = _write(tmp_path, "counts.csv", text)
    with pytest.raises(InputError, match=rf"(?s){problem}.*Hint: .* counts battles"):
        read_battles(path)


def test_count_that_is_not_a_number_names_the_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "counts.csv",
        "model_a,model_b,wins_a,wins_b,ties\na,b,1,2,0\na,c,x,2,0\n",
    )
    with pytest.raises(
        InputError,
        match=r"(?s)counts\.csv: line 3: wins_a = 'x' is not a number\.\nHint: wins_a counts battles",
    ):
        read_battles(path)


def test_self_battle_in_aggregated_counts(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "counts.csv", "model_a,model_b,wins_a,wins_b,ties\na,a,1,2,0\n"
    )
    with pytest.raises(InputError, match=r"at line 2: 'a'\.\nHint: drop self-battles"):
        read_battles(path)


@pytest.mark.parametrize(
    ("name", "content", "problem", "hint"),
    [
        (
            "b.txt",
            b"x",
            r"unsupported file type '\.txt'",
            r"use one of \['\.csv', '\.json'",
        ),
        ("b.csv", b"", "the file is empty", "remove it, or write the battles"),
        (
            "b.parquet",
            b"not parquet at all",
            "cannot read as parquet",
            "check that the file is complete parquet",
        ),
        (
            "b.json",
            b'{"model_a": "a"}',
            "Expected `array`, got `object`",
            r"a \.json battles file is one JSON array",
        ),
        (
            "b.json",
            b'[{"model_a": "a",\n "model_b": 3, "winner": "tie"}]',
            r"element 1 \(line 1\):.*got `int`",
            "model names and winner are text",
        ),
        (
            "b.json",
            b'[{"model_a": "a", "model_b": "b"},\n{"model_a": "a", "model_b"',
            "not valid JSON at line 2",
            "the file may be truncated",
        ),
        ("b.json", b"[1, 2]", r"element 1 \(line 1\):", "one JSON array of objects"),
        (
            "b.jsonl",
            b'{"model_a": "a", "model_b": "b", "winner": "tie"}\n{"model_a": "a", "model_b": 7, "winner": "tie"}\n',
            "line 2: model_b = 7 is not text",
            "model names and winner are text",
        ),
        (
            "b.jsonl",
            b'{"model_a": "a", "model_b": "b", "winner": "tie"}\n{"model_a": \n',
            "line 2 is not valid JSON",
            "write one JSON object per line",
        ),
        (
            "b.csv",
            b"model_a,model_b,winner\na,b,tie\n\xff,b,tie\n",
            "line 3: byte 0xff is not UTF-8",
            "re-save the file as UTF-8",
        ),
        (
            "b.csv",
            b"model_a,model_b,winner,tstamp\na,b,tie,12\na,b,tie,noon\n",
            "line 3: tstamp = 'noon' is not a number",
            "tstamp is a time in seconds",
        ),
    ],
)
def test_unreadable_files_are_named_with_a_hint(
    tmp_path: Path, name: str, content: bytes, problem: str, hint: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(
        InputError, match=rf"(?s){re.escape(str(path))}.*{problem}.*Hint: .*{hint}"
    ):
        read_battles(path)


def test_json_array_errors_name_the_element_and_line(tmp_path: Path) -> None:
    bad_type = _write(
        tmp_path,
        "t.json",
        '[{"model_a": "a", "model_b": "b", "winner": "tie"},\n\n {"model_a": 5, "model_b": "b", "winner": "tie"}]',
    )
    with pytest.raises(
        InputError,
        match=r"(?s)element 2 \(line 3\): Expected `str \| null`, got `int`.*model_a.*Hint:",
    ):
        read_battles(bad_type)
    broken = _write(tmp_path, "b.json", '[{"model_a": "a"},\n{')
    with pytest.raises(
        InputError, match=r"(?s)not valid JSON at line 2.*Hint: .*truncated"
    ):
        read_battles(broken)
    not_array = _write(tmp_path, "o.json", '{"a": 1}')
    with pytest.raises(
        InputError,
        match=r"(?s)Expected `array`, got `object`.*Hint: a .json battles file is one JSON array",
    ):
        read_battles(not_array)


def test_missing_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nowhere.csv"
    with pytest.raises(
        InputError,
        match=r"(?s)nowhere\.csv: cannot read the file.*Hint: check the path",
    ):
        read_battles(path)


def test_no_files_at_all() -> None:
    with pytest.raises(InputError, match=r"no battle files were given\.\nHint:"):
        read_battles([])


def test_filter_on_a_missing_column_lists_the_columns() -> None:
    with pytest.raises(
        InputError,
        match=r"(?s)--where 'lang = English': no column 'lang'; found \[.*'language'.*Hint: filter on a column the file has",
    ):
        read_battles(FOLDER / "battles.csv", where=["lang = English"])


def test_filter_of_the_wrong_type_in_a_text_file_names_the_line(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "b.csv", "model_a,model_b,winner,anony\na,b,tie,true\na,b,tie,maybe\n"
    )
    with pytest.raises(
        InputError,
        match=r"(?s)line 3: anony = 'maybe' is not true or false\.\nHint: the --where condition on anony treats it as true or false",
    ):
        read_battles(path, where=["anony"])


def test_filter_that_keeps_nothing_says_so() -> None:
    with pytest.raises(
        InputError,
        match=r"(?s)no battles left \(400 rows read; filters: 'language = Klingon'\)\.\nHint: check the --where",
    ):
        read_battles(FOLDER / "battles.csv", where=["language = Klingon"])


# --- model map -------------------------------------------------------------------------


def test_model_map_reads_two_columns() -> None:
    names = read_model_map(FOLDER / "model_map.csv")
    assert names["gpt-4"] == "openai/gpt-4"
    assert len(names) == 5


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "arena_name,model\ngpt-4,a\ngpt-4,b\n",
            r"arena_name appears more than once at line 2, line 3: 'gpt-4', 'gpt-4'",
        ),
        (
            "arena_name,model\ngpt-4,a\nclaude,a\n",
            r"model appears more than once at line 2, line 3: 'a', 'a'",
        ),
        ("arena_name,model\ngpt-4,\n", r"empty model at line 2"),
        ("arena,model\ngpt-4,a\n", r"missing column\(s\) \['arena_name'\]"),
    ],
)
def test_model_map_problems_are_named(tmp_path: Path, text: str, problem: str) -> None:
    path = _write(tmp_path, "map.csv", text)
    with pytest.raises(InputError, match=rf"(?s){problem}.*Hint:"):
        read_model_map(path)


def test_model_map_in_jsonl(tmp_path: Path) -> None:
    path = _write(tmp_path, "map.jsonl", '{"arena_name": "x", "model": "org/x"}\n')
    assert read_model_map(path) == {"x": "org/x"}
    missing = _write(tmp_path, "m.jsonl", '{"arena_name": "x"}\n')
    with pytest.raises(InputError, match=r"missing column\(s\) \['model'\]"):
        read_model_map(missing)


# --- the module's imports ----------------------------------------------------------------


def test_reader_imports_no_pandas() -> None:
    source = Path(battles_module.__file__).read_text()
    imported = set()
    for node in nodes(source):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert "pandas" not in imported
    # the error tree, Arrow arrays built without pyarrow's pandas probe, the
    # sniffing of battle files (which every run does without this module), the
    # signals held for a library call, and the warning type the fit shares
    assert {name for name in imported if name.startswith("lbnorm")} == {
        "lbnorm._runtime",
        "lbnorm.core.errors",
        "lbnorm.core.arrow",
        "lbnorm.ratings.battle_files",
        "lbnorm.ratings.battle_io",
        "lbnorm.ratings.options",
        "lbnorm.ratings.where",
    }


def test_counts_files_report_rows_read_and_kept_not_cells() -> None:
    counts = Path(__file__).parent / "fixtures" / "battles" / "battle_counts.csv"
    battles = read_battles(counts, where=["wins_a > 2"])
    (file,) = battles.files
    assert (file.shape, file.format, file.n_rows_read) == ("counts", "csv", 90)
    assert battles.n_filtered_out == 90 - file.n_rows_kept >= 0
    assert len(battles.model_a) > file.n_rows_kept  # a row is up to three cells
    assert read_battles(counts).n_filtered_out == 0


# --- nested fields (category_tag, dedup_tag, conv_metadata) ------------------------------


def _nested_records() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads(CLEAN.read_text())
    for i, row in enumerate(rows):
        row["category_tag"]["math_v0.1"] = {"math": i % 3 == 0}
        row["dedup_tag"]["sampled"] = i % 10 != 0
        row["conv_metadata"] = {
            "sum_assistant_a_tokens": 100 + i,
            "header_count_a": {"h1": i % 2, "h2": 1, "h3": 0},
            "bold_count_a": {"**": 2, "__": None},
        }
    return rows


def _write_nested(tmp_path: Path, kind: str) -> Path:
    rows = _nested_records()
    path = tmp_path / f"nested.{kind}"
    if kind == "json":
        path.write_text(json.dumps(rows))
    elif kind == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("kind", ["json", "jsonl", "parquet"])
def test_dotted_conditions_reach_into_nested_objects(tmp_path: Path, kind: str) -> None:
    path = _write_nested(tmp_path, kind)
    rows = _nested_records()
    # a key with a dot of its own (math_v0.1): the longest matching run of segments
    math = read_battles(path, where=["category_tag.math_v0.1.math"])
    assert math.n_battles == sum(i % 3 == 0 for i in range(len(rows)))
    equal = read_battles(path, where=["category_tag.math_v0.1.math = true"])
    assert equal.n_battles == math.n_battles
    sampled = read_battles(path, where=["dedup_tag.sampled", "anony"])
    assert sampled.n_battles == sum(
        i % 10 != 0 and r["anony"] for i, r in enumerate(rows)
    )
    tokens = read_battles(path, where=["conv_metadata.sum_assistant_a_tokens >= 300"])
    assert tokens.n_battles == len(rows) - 200


@pytest.mark.parametrize("kind", ["json", "jsonl", "parquet"])
def test_fields_read_numbers_and_sum_objects_as_fastchat(
    tmp_path: Path, kind: str
) -> None:
    path = _write_nested(tmp_path, kind)
    battles = read_battles(
        path,
        fields=[
            "conv_metadata.sum_assistant_a_tokens",
            "conv_metadata.header_count_a",
            "conv_metadata.bold_count_a",
        ],
    )
    n = len(_nested_records())
    assert battles.fields["conv_metadata.sum_assistant_a_tokens"].tolist() == [
        100.0 + i for i in range(n)
    ]
    # extract_style_feature: an object of counts is their sum (a null counts 0)
    assert battles.fields["conv_metadata.header_count_a"].tolist() == [
        float(i % 2 + 1) for i in range(n)
    ]
    assert set(battles.fields["conv_metadata.bold_count_a"].tolist()) == {2.0}


def test_a_dotted_condition_on_a_json_array_is_a_clean_error(tmp_path: Path) -> None:
    # issue 32 item 3 / issue 30 item 6: msgspec.defstruct refused dotted names
    path = _write_nested(tmp_path, "json")
    with pytest.raises(
        InputError,
        match=r"no column 'category_tag\.math'; found \[.*'category_tag\.math_v0\.1\.math'.*\]\.\nHint: filter on a column the file has",
    ):
        read_battles(path, where=["category_tag.math=true"])
    with pytest.raises(
        InputError, match=r"no field 'conv_metadata\.nope'.*\nHint: style"
    ):
        read_battles(path, fields=["conv_metadata.nope"])


def test_a_key_that_is_a_python_keyword_reads_from_a_json_array(tmp_path: Path) -> None:
    path = tmp_path / "odd.json"
    path.write_text(
        json.dumps(
            [
                {"model_a": "x", "model_b": "y", "winner": "model_a", "class": "a"},
                {"model_a": "y", "model_b": "x", "winner": "tie", "class": "b"},
            ]
        )
    )
    assert read_battles(path, where=["class = a"]).n_battles == 1


def test_nested_values_of_different_shapes_are_named(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    rows = [
        {"model_a": "x", "model_b": "y", "winner": "model_a", "tag": {"m": 1}},
        {"model_a": "y", "model_b": "x", "winner": "model_b", "tag": 3},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        InputError,
        match=r"the field 'tag' holds values of different shapes \(dict, int\).*\nHint: a nested field",
    ):
        read_battles(path, where=["tag.m = 1"])
