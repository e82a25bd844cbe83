"""Every input format, read from real files into the one long-format contract."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from lbnorm import (
    InputError,
    LbnormError,
    SchemaMismatchError,
    load_suite,
    normalize_scores,
    run,
)
from lbnorm.core.files import read_bytes
from lbnorm.core.options import RunOptions
from lbnorm.core.schemas import SCORES
from lbnorm.readers import read_inputs
from lbnorm.readers.harness import parse_results_file, subtask_columns
from lbnorm.readers.results_tree import read_results_paths


def _cell(frame: pd.DataFrame, row: object, column: str) -> Any:
    """One value, typed loosely: pandas-stubs types `.loc[row, column]` as a union."""
    return frame[column].to_dict()[row]


SUITE = load_suite("openllm-v2")


@pytest.mark.parametrize("suffix", ["csv", "jsonl", "parquet"])
def test_each_table_format_gives_the_seed_examples(fixtures: Path, suffix: str) -> None:
    result = run(
        [fixtures / "tables" / f"seed_examples.{suffix}"],
        options=RunOptions(missing="partial"),
    )
    benchmarks = result.benchmarks.set_index("benchmark")
    assert _cell(benchmarks, "MUSR", "normalized_score") == pytest.approx(
        35.0, abs=1e-12
    )
    assert _cell(benchmarks, "GPQA", "normalized_score") == pytest.approx(
        46.666666666666664, abs=1e-12
    )
    assert f"{_cell(benchmarks, 'GPQA', 'normalized_score'):.2f}" == "46.67"
    subtasks = result.subtasks.set_index("subtask")
    assert _cell(subtasks, "team_allocation", "stderr") != _cell(
        subtasks, "team_allocation", "stderr"
    )  # empty -> null
    assert _cell(subtasks, "diamond", "revision") == "0123456789"  # digits stay text
    assert bool(_cell(subtasks, "diamond", "chat_template")) is True
    assert _cell(subtasks, "main", "n_samples") == 448


def test_formats_agree(fixtures: Path) -> None:
    frames = [
        run(
            [fixtures / "tables" / f"seed_examples.{suffix}"],
            options=RunOptions(missing="partial"),
        ).leaderboard
        for suffix in ("csv", "jsonl", "parquet")
    ]
    for frame in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], frame)


def test_table_contract_columns(fixtures: Path) -> None:
    read = read_inputs(
        [fixtures / "tables" / "seed_examples.csv"], suite=SUITE, options=RunOptions()
    )
    (batch,) = list(read.batches)
    assert batch.table.column_names == SCORES.names
    assert batch.first_row == 2  # rows are counted as lines: the header is line 1
    assert read.num_rows == 6


def test_parquet_streams_row_groups_and_reads_only_needed_columns(
    tmp_path: Path, fixtures: Path
) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(fixtures / "tables" / "seed_examples.parquet")
    path = tmp_path / "groups.parquet"
    pq.write_table(table, path, row_group_size=2)
    read = read_inputs([path], suite=SUITE, options=RunOptions(subtasks=False))
    batches = list(read.batches)
    assert [batch.table.num_rows for batch in batches] == [2, 2, 2]
    assert [batch.first_row for batch in batches] == [1, 3, 5]
    # the subtask table's metric is left unread; stderr and n_samples make the
    # benchmarks' standard errors, so they are read
    assert "metric" not in batches[0].table.column_names
    assert "stderr" in batches[0].table.column_names
    assert str(batches[0].table.schema.field("model").type).startswith("dictionary")
    streamed = run([path], options=RunOptions(missing="partial")).leaderboard
    whole = run(
        [fixtures / "tables" / "seed_examples.parquet"],
        options=RunOptions(missing="partial"),
    ).leaderboard
    pd.testing.assert_frame_equal(streamed, whole)


def test_optional_columns_take_defaults() -> None:
    frame = pd.DataFrame(
        {
            "model": ["m"],
            "benchmark": ["MMLU-PRO"],
            "subtask": ["mmlu_pro"],
            "raw_score": [0.55],
        }
    )
    result = normalize_scores(frame)
    row = result.subtasks.iloc[0]
    assert (
        row["precision"],
        row["revision"],
        bool(row["chat_template"]),
        row["metric"],
    ) == ("", "", False, "")
    assert row["normalized_score"] == pytest.approx(50.0)


def test_extra_columns_are_rejected_kept_or_dropped(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "model": ["m"],
            "benchmark": ["MMLU-PRO"],
            "subtask": ["mmlu_pro"],
            "raw_score": [0.55],
            "note": ["x"],
        }
    )
    with pytest.raises(
        SchemaMismatchError,
        match=r"unexpected column\(s\) \['note'\].*\n.*Hint: pass --extra-columns keep",
    ):
        normalize_scores(frame)
    kept = normalize_scores(frame, options=RunOptions(extra_columns="keep"))
    assert kept.subtasks["note"].tolist() == ["x"]
    assert (
        "note"
        not in normalize_scores(
            frame, options=RunOptions(extra_columns="drop")
        ).subtasks.columns
    )
    path = tmp_path / "scores.csv"
    frame.to_csv(path, index=False)
    run(
        [path],
        out=tmp_path / "out",
        options=RunOptions(extra_columns="keep", missing="partial"),
    )
    assert pd.read_parquet(tmp_path / "out" / "subtasks.parquet")["note"].tolist() == [
        "x"
    ]


def test_extra_columns_of_files_that_differ_are_kept_with_nulls(
    tmp_path: Path,
) -> None:
    """Each file's extra columns, in the order first seen; null where a file lacks one."""
    header = "model,benchmark,subtask,raw_score"
    (tmp_path / "a.csv").write_text(f"{header},note\nm,MMLU-PRO,mmlu_pro,0.55,x\n")
    (tmp_path / "b.csv").write_text(f"{header},seed\nn,MMLU-PRO,mmlu_pro,0.5,7\n")
    options = RunOptions(extra_columns="keep", missing="partial")
    run([tmp_path / "a.csv", tmp_path / "b.csv"], out=tmp_path / "out", options=options)
    subtasks = pd.read_parquet(tmp_path / "out" / "subtasks.parquet")
    assert list(subtasks.columns[-2:]) == ["note", "seed"]
    kept = subtasks.set_index("model")[["note", "seed"]].astype(object)
    assert kept.where(kept.notna(), None).to_dict("index") == {
        "m": {"note": "x", "seed": None},
        "n": {"note": None, "seed": 7},
    }


def test_missing_required_column(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text("model,benchmark,score\nm,GPQA,0.5\n")
    with pytest.raises(
        SchemaMismatchError,
        match=r"scores.csv: missing required column\(s\) \['subtask', 'raw_score'\].*\n.*Hint",
    ):
        read_inputs([path], suite=SUITE, options=RunOptions())


def test_harness_file_variant_keys(full_structure_dir: Path) -> None:
    path = next(full_structure_dir.rglob("results_*.json"))
    pairs = list(
        zip(SUITE.subtask_table()["task"], SUITE.subtask_table()["metric"], strict=True)
    )
    parsed = parse_results_file(path, path.read_bytes(), pairs)
    assert parsed.precision == "bfloat16"
    assert len(parsed.revision) == 40
    assert parsed.chat_template is True
    assert len(parsed.rows["raw_score"]) == 40
    assert (
        parsed.n_ignored >= 2
    )  # the overall "leaderboard" group and arc_challenge, at least


def test_results_text_columns_are_dictionaries_in_row_order(
    full_structure_dir: Path, tmp_path: Path
) -> None:
    # an older copy of one file: every row superseded, so its path may not
    # appear in the source column's dictionary
    tree = tmp_path / "tree"
    shutil.copytree(full_structure_dir, tree)
    newest = next((tree / "01-ai").rglob("results_*.json"))
    older = newest.with_name("results_2020-01-01T00-00-00.000000.json")
    shutil.copy(newest, older)
    columns = subtask_columns(SUITE)
    pairs = list(zip(columns["task"], columns["metric"], strict=True))
    paths = sorted(tree.rglob("results_*.json"))
    read = read_results_paths(paths, pairs, columns, read=read_bytes, workers=1)
    scores = read.scores
    text = [name for name in SCORES.names if SCORES.field(name).type == pa.string()]
    for name in [*text, "_row"]:
        column = scores.column(name).combine_chunks()
        assert column.type == pa.dictionary(pa.int32(), pa.string()), name
        rows = column.to_pylist()
        # distinct values, in the order they first appear in the rows
        assert column.dictionary.to_pylist() == list(dict.fromkeys(rows)), name
    assert scores.schema.field("model").nullable is False
    sources = scores.column("source").combine_chunks().dictionary.to_pylist()
    assert sources == [str(path) for path in paths if path != older]
    assert read.files.column("superseded_by").to_pylist()[paths.index(older)] == str(
        newest
    )
    assert scores.column("_row").to_pylist()[:40] == [
        f"results[{task!r}][{metric!r}]" for task, metric in pairs
    ]


def test_na_stderr_is_accepted_as_null(full_structure_dir: Path) -> None:
    result = run([full_structure_dir])
    ifeval = result.subtasks[
        (result.subtasks["benchmark"] == "IFEval")
        & (result.subtasks["model"] == "meta-llama/Meta-Llama-3-8B-Instruct")
    ].set_index("subtask")
    assert pd.isna(_cell(ifeval, "inst_level_strict", "stderr"))  # "N/A" in the file
    assert _cell(ifeval, "prompt_level_strict", "stderr") == pytest.approx(
        0.01974447348351436
    )


def test_model_name_falls_back_to_model_args_then_path(
    tmp_path: Path, full_structure_dir: Path
) -> None:
    source = next(full_structure_dir.rglob("results_*.json"))
    document = json.loads(source.read_text())
    document.pop("model_name")
    target = tmp_path / "tree" / "some-org" / "some-model" / source.name
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(document))
    assert run([tmp_path / "tree"]).leaderboard["model"].tolist() == [
        document["config"]["model_args"].split(",")[0].removeprefix("pretrained=")
    ]
    document["config"].pop("model_args")
    target.write_text(json.dumps(document))
    assert run([tmp_path / "tree"]).leaderboard["model"].tolist() == [
        "some-org/some-model"
    ]


def test_string_score_is_an_error_naming_the_key(
    tmp_path: Path, golden_dir: Path
) -> None:
    document = json.loads((golden_dir / "Amu__t1-3B.json").read_text())
    document["results"]["leaderboard_mmlu_pro"]["acc,none"] = "0.5"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(
        InputError,
        match=r"bad.json: results\['leaderboard_mmlu_pro'\]\['acc,none'\] is '0.5', not a number.\nHint",
    ):
        run([path])


def test_directory_of_tables(tmp_path: Path, fixtures: Path) -> None:
    shutil.copy(fixtures / "tables" / "seed_examples.csv", tmp_path / "a.csv")
    result = run([tmp_path], options=RunOptions(missing="partial"))
    assert len(result.subtasks) == 6


def test_mixed_inputs_duplicates_are_reported(tmp_path: Path, fixtures: Path) -> None:
    with pytest.raises(Exception, match="duplicate_score"):
        run(
            [
                fixtures / "tables" / "seed_examples.csv",
                fixtures / "tables" / "seed_examples.parquet",
            ]
        )


def test_many_variants_with_one_score_each_grow_the_dense_store() -> None:
    # 100 variants x 1 of 40 subtasks: the store is first sized from rows / subtasks
    scores = pd.DataFrame(
        {
            "model": [f"m{i:03d}" for i in range(100)],
            "benchmark": "MMLU-PRO",
            "subtask": "mmlu_pro",
            "raw_score": [i / 99 for i in range(100)],
        }
    )
    result = normalize_scores(
        scores.sample(frac=1.0, random_state=0), options=RunOptions(missing="partial")
    )
    board = result.leaderboard
    assert len(board) == 100
    assert board["model"].tolist()[:2] == ["m099", "m098"]
    # raw below MMLU-PRO's 1/10 bound clips to 0: the ten lowest tie at rank 91
    assert board["rank"].tolist() == [*range(1, 91), *[91] * 10]
    assert board["average"].iloc[0] == pytest.approx(100.0)
    assert len(result.subtasks) == 100


def test_jsonl_integer_score_past_2_53_is_judged_not_a_traceback(
    tmp_path: Path,
) -> None:
    """A whole-number score column with a value past 2**53 reaches the range check."""
    path = tmp_path / "scores.jsonl"
    rows = [
        {
            "model": "a",
            "benchmark": "IFEval",
            "subtask": "prompt_level_strict",
            "raw_score": 1,
        },
        {
            "model": "b",
            "benchmark": "IFEval",
            "subtask": "prompt_level_strict",
            "raw_score": 2**53 + 1,
        },
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(
        LbnormError, match=r"(?s)line 2 .*Hint: raw_score must be a fraction"
    ):
        run([path], suite="openllm-v2")


def test_jsonl_n_samples_past_int64_is_named_too_large(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"
    row = {
        "model": "a",
        "benchmark": "IFEval",
        "subtask": "prompt_level_strict",
        "raw_score": 0.5,
        "n_samples": 2**64 - 1,
    }
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(
        SchemaMismatchError,
        match=r"line 1: n_samples is the number .*too large for a count.*\nHint: n_samples counts",
    ):
        run([path], suite="openllm-v2")


def test_text_table_hash_is_of_the_bytes_read(tmp_path: Path) -> None:
    """A CSV or JSONL table is hashed from the bytes parsed (not read a second time)."""
    import hashlib

    from lbnorm.readers.tables import read_score_file

    csv_path = tmp_path / "scores.csv"
    csv_path.write_text(
        "model,benchmark,subtask,raw_score\na,IFEval,prompt_level_strict,0.5\n"
    )
    jsonl_path = tmp_path / "scores.jsonl"
    jsonl_path.write_text(
        '{"model": "a", "benchmark": "IFEval", "subtask": "prompt_level_strict", "raw_score": 0.5}\n'
    )
    for path in (csv_path, jsonl_path):
        batch, sha256 = read_score_file(path)
        assert sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
        assert batch.table.num_rows == 1
    read = read_inputs(
        [csv_path, jsonl_path], suite=load_suite("openllm-v2"), options=RunOptions()
    )
    assert read.catalog.column("sha256").to_pylist() == [
        hashlib.sha256(path.read_bytes()).hexdigest() for path in (csv_path, jsonl_path)
    ]
