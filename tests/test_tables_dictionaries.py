"""CSV and JSONL key columns read as dictionaries hold the cells the text path reads."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbnorm.core.errors import SchemaMismatchError
from lbnorm.readers import tables
from lbnorm.readers.tables import conform_scores, read_score_file

_KEYS = ("model", "precision", "revision", "benchmark", "subtask", "metric")
_DICTIONARY = pa.dictionary(pa.int32(), pa.string())

#: Cells a reader could mistake: empty, null-like, padded, quoted separators,
#: quotes, newlines, case variants, non-ASCII.
_CELLS = st.one_of(
    st.sampled_from(
        ["", " ", "NA", "N/A", "null", "NULL", "nan", "None", "#N/A", "-", "0"]
    ),
    st.sampled_from(["a,b", 'say "hi"', "two\nlines", " pad ", "Model", "model"]),
    st.text(st.characters(codec="utf-8", exclude_characters="\r\x00"), max_size=8),
)


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=[*_KEYS, "raw_score"], quoting=csv.QUOTE_ALL
        )
        writer.writeheader()
        writer.writerows(rows)


def _text_path(path: Path) -> pa.Table:
    """The table as read before key columns were dictionaries (plain text)."""
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(tables, "_KEY", pa.string())
        patched.setattr(tables, "_key_dictionaries", lambda table: table)
        return read_score_file(path)[0].table


def _plain(table: pa.Table) -> pa.Table:
    return pa.table(
        {
            name: column.cast(column.type.value_type)
            if pa.types.is_dictionary(column.type)
            else column
            for name, column in zip(table.column_names, table.columns, strict=True)
        }
    )


@given(
    cells=st.lists(st.tuples(_CELLS, _CELLS, _CELLS), min_size=1, max_size=12),
    score=st.sampled_from(["0.5", "inf", ""]),  # (NaN is unequal to itself)
)
def test_csv_keys_as_dictionaries_equal_the_text_path_and_the_csv_module(
    tmp_path_factory: pytest.TempPathFactory,
    cells: list[tuple[str, str, str]],
    score: str,
) -> None:
    path = tmp_path_factory.mktemp("csv") / "scores.csv"
    rows = [
        {
            "model": f"m{model}",
            "precision": precision,
            "revision": revision,
            "benchmark": "GPQA",
            "subtask": f"s{model}",
            "metric": revision.upper(),
            "raw_score": score,
        }
        for model, precision, revision in cells
    ]
    _write_csv(path, rows)
    read = read_score_file(path)[0].table
    for name in _KEYS:
        assert read.schema.field(name).type == _DICTIONARY
        assert read[name].num_chunks == 1
    assert _plain(read).equals(_plain(_text_path(path)))
    with path.open(newline="", encoding="utf-8") as handle:
        oracle = list(csv.DictReader(handle))
    for name in _KEYS:
        assert read[name].to_pylist() == [row[name] for row in oracle]


def test_a_csv_of_many_blocks_has_one_dictionary_per_key_column(
    tmp_path: Path,
) -> None:
    """Arrow parses 1 MiB blocks, each with a dictionary: one comes out per column."""
    n_rows = 80_000
    lines = [
        f"model-{i % 997:04d},GPQA,main,{'Bf16' if i % 3 else 'bf16'},{i / n_rows}"
        for i in range(n_rows)
    ]
    path = tmp_path / "scores.csv"
    path.write_text("model,benchmark,subtask,precision,raw_score\n" + "\n".join(lines))
    assert path.stat().st_size > 2 * 2**20
    read = read_score_file(path)[0].table
    model = read["model"]
    assert model.type == _DICTIONARY
    assert model.num_chunks == 1
    assert len(model.chunk(0).dictionary) == 997
    assert model.to_pylist() == [line.split(",")[0] for line in lines]
    assert read["precision"].unique().dictionary.to_pylist() == ["bf16", "Bf16"]
    assert _plain(read).equals(_plain(_text_path(path)))


def test_jsonl_keys_are_dictionaries_and_a_null_optional_key_is_empty(
    tmp_path: Path,
) -> None:
    records = [
        {"model": "a", "benchmark": "GPQA", "subtask": "main", "raw_score": 0.5},
        {"model": "b", "benchmark": "GPQA", "subtask": "main", "raw_score": 0.25},
    ]
    records[0]["precision"] = None
    records[1]["precision"] = "bf16"
    path = tmp_path / "scores.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in records) + "\n")
    read = read_score_file(path)[0].table
    assert read.schema.field("model").type == _DICTIONARY
    assert read["model"].to_pylist() == ["a", "b"]
    assert read["precision"].to_pylist() == ["", "bf16"]  # null: unknown, as if absent
    assert _plain(read).equals(_plain(_text_path(path)))


def test_a_frame_dictionary_column_comes_back_plain_unless_kept() -> None:
    """Dictionaries stay only where the caller asks (the readers), not for a frame."""
    table = pa.table(
        {
            "model": pa.array(["m", "n", "m"]).dictionary_encode(),
            "benchmark": ["GPQA"] * 3,
            "subtask": ["main"] * 3,
            "raw_score": [0.1, 0.2, 0.3],
        }
    )
    plain = conform_scores(table, source="inline")
    kept = conform_scores(table, source="inline", keep_dictionaries=True)
    assert plain.schema.field("model").type == pa.string()
    assert kept.schema.field("model").type == _DICTIONARY
    assert plain.equals(_plain(kept))


def test_keys_of_an_empty_cell_csv_match_python_csv(tmp_path: Path) -> None:
    """Empty and quoted-empty cells are '' (never null), as the text path has them."""
    text = 'model,benchmark,subtask,revision,raw_score\nm,GPQA,main,,0.5\nn,GPQA,main,"",0.5\n'
    path = tmp_path / "scores.csv"
    path.write_text(text)
    read = read_score_file(path)[0].table
    assert read["revision"].null_count == 0
    assert read["revision"].to_pylist() == [
        row["revision"] for row in csv.DictReader(io.StringIO(text))
    ]


_VALUES = st.one_of(
    st.none(),
    st.sampled_from([0, -0, 1, 0.5, -0.0, 1.0, 0.25, 2**53, 1e300, True]),
    st.floats(0.0, 1.0),
    st.sampled_from(["0.5", "x", ""]),
)


@given(
    scores=st.lists(_VALUES, min_size=1, max_size=8),
    stderr=_VALUES,
    extra=st.sampled_from([None, "tag", "precision", "n_samples"]),
)
def test_jsonl_read_with_a_schema_equals_the_inferring_read(
    tmp_path_factory: pytest.TempPathFactory,
    scores: list[object],
    stderr: object,
    extra: str | None,
) -> None:
    """Same table, or the same message, with the first line's columns typed or inferred."""
    records: list[dict[str, object]] = [
        {"model": f"m{i}", "benchmark": "GPQA", "subtask": "main", "raw_score": score}
        for i, score in enumerate(scores)
    ]
    records[0]["stderr"] = stderr
    if extra is not None:  # a column the first line does not have
        records[-1][extra] = "bf16" if extra != "n_samples" else 7
    path = tmp_path_factory.mktemp("jsonl") / "scores.jsonl"
    path.write_text("\n".join(json.dumps(record) for record in records) + "\n")

    def read() -> tuple[pa.Table | None, str | None]:
        try:
            return read_score_file(path, extra_columns="keep")[0].table, None
        except SchemaMismatchError as error:
            return None, str(error)

    typed = read()
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(tables, "_read_jsonl_typed", lambda *_args: None)
        inferred = read()
    if typed[0] is None or inferred[0] is None:
        assert typed == inferred
    else:
        assert typed[0].equals(inferred[0])


def test_jsonl_of_whole_scores_is_read_by_inference(tmp_path: Path) -> None:
    """A column of whole numbers is int64 to inference: -0 is 0, never -0.0."""
    path = tmp_path / "scores.jsonl"
    path.write_text(
        '{"model": "a", "benchmark": "GPQA", "subtask": "main", "raw_score": -0}\n'
    )
    assert tables._read_jsonl_typed(path.read_bytes(), path.read_bytes()) is None
    score = read_score_file(path)[0].table["raw_score"][0].as_py()
    assert str(score) == "0.0"


def test_jsonl_of_fractions_is_read_with_a_schema(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"
    path.write_text(
        '\n{"model": "a", "benchmark": "GPQA", "subtask": "main", "raw_score": -0}\n'
        '{"model": "b", "benchmark": "GPQA", "subtask": "main", "raw_score": 0.5}\n'
    )
    typed = tables._read_jsonl_typed(path.read_bytes(), path.read_bytes())
    assert typed is not None
    assert typed.schema.field("model").type == pa.string()
    assert [str(value) for value in typed["raw_score"].to_pylist()] == ["-0.0", "0.5"]


def test_jsonl_of_whole_scores_is_read_once_with_a_schema(tmp_path: Path) -> None:
    """Scores of 0 and 1 only (int64 to inference) read typed: the same floats."""
    path = tmp_path / "scores.jsonl"
    path.write_text(
        '{"model": "a", "benchmark": "GPQA", "subtask": "main", "raw_score": 1}\n'
        '{"model": "b", "benchmark": "GPQA", "subtask": "main", "raw_score": 0}\n'
        '{"model": "c", "benchmark": "GPQA", "subtask": "main", "raw_score": null}\n'
    )
    typed = tables._read_jsonl_typed(path.read_bytes(), path.read_bytes())
    assert typed is not None
    assert typed["raw_score"].to_pylist() == [1.0, 0.0, None]
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(tables, "_read_jsonl_typed", lambda *_args: None)
        inferred = read_score_file(path)[0].table
    assert read_score_file(path)[0].table.equals(inferred)


@pytest.mark.parametrize("score", ["-0", "9007199254740992", "-9007199254740993"])
def test_jsonl_of_whole_scores_inference_reads_otherwise_is_inferred(
    tmp_path: Path, score: str
) -> None:
    path = tmp_path / "scores.jsonl"
    path.write_text(
        f'{{"model": "a", "benchmark": "GPQA", "subtask": "main", "raw_score": {score}}}\n'
    )
    assert tables._read_jsonl_typed(path.read_bytes(), path.read_bytes()) is None
