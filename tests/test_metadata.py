from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pandas.testing as pdt
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import run
from lbnorm.cli import main
from lbnorm.core.errors import InputError, SchemaMismatchError
from lbnorm.core.options import RunOptions
from lbnorm.engines.metadata import (
    annotate_leaderboard,
    list_flagged,
    read_metadata,
    size_class_array,
)

GOLDEN_META = """\
model,params_b,type,submission_date,flagged
01-ai/Yi-34B-Chat,34.39,chatmodels,2024-06-12,False
meta-llama/Meta-Llama-3-8B-Instruct,8.03,chatmodels,2024-06-12,True
AIDC-AI/Marco-o1,7.62,chatmodels,2024-11-22,False
Ateron/Glowing-Forest-12B,12.25,basemergesandmoerges,2025-01-01,False
Magpie-Align/Llama-3-8B-Magpie-Align-SFT-v0.1,8.03,chatmodels,2024-07-01,False
Amu/t1-3B,3.40,chatmodels,2025-01-02,False
EleutherAI/pythia-2.8b,2.91,pretrained,,False
"""


def _board(**columns: object) -> pd.DataFrame:
    base: dict[str, object] = {
        "model": ["a/x", "b/y", "c/z", "d/w"],
        "precision": ["bfloat16"] * 4,
        "revision": [""] * 4,
        "chat_template": [True] * 4,
        "rank": pd.array([1, 2, 2, None], dtype="Int64"),
        "average": [50.0, 40.0, 40.0, np.nan],
    }
    return pd.DataFrame({**base, **columns})


@pytest.fixture(scope="module")
def golden_files(golden_dir: Path) -> list[Path]:
    return sorted(golden_dir.glob("*.json"))


def test_read_metadata_types_keys_like_the_leaderboard(tmp_path: Path) -> None:
    path = tmp_path / "meta.csv"
    path.write_text(
        "model,precision,params_b,flagged,submission_date\n"
        "a/x,,7.2,true,2024-06-01\nb/y,float16,-1,false,\n"
    )
    meta = read_metadata(path)
    assert meta["precision"].tolist() == ["", "float16"]
    assert str(meta["flagged"].dtype) == "boolean"
    assert meta["params_b"].tolist() == [7.2, -1.0]
    assert pd.isna(meta["submission_date"].iloc[1])


@pytest.mark.parametrize(
    ("text", "suffix", "match"),
    [
        (
            "name,x\na,1\n",
            ".csv",
            r"no 'model' column.*\nHint: key each row by 'model'",
        ),
        (
            "model,x\na,1\na,2\n",
            ".csv",
            r"2 rows share their key \['model'\].*\nHint: keep one row per key",
        ),
        (
            "model,chat_template\na,maybe\n",
            ".csv",
            r"'chat_template' must be true/false.*\nHint",
        ),
        ("model,x\n,1\n", ".csv", r"1 row\(s\) have no model name.\nHint: fill in"),
        (
            "model\n",
            ".txt",
            r"unsupported metadata file type '.txt'.\nHint: use one of \['.csv', '.parquet'",
        ),
    ],
)
def test_read_metadata_rejects_bad_tables(
    tmp_path: Path, text: str, suffix: str, match: str
) -> None:
    path = tmp_path / f"meta{suffix}"
    path.write_text(text)
    with pytest.raises(InputError, match=match):
        read_metadata(path)


def test_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(
        InputError, match=r"cannot read the metadata table.*\nHint: check the path"
    ):
        read_metadata(tmp_path / "nope.parquet")


def test_join_keeps_order_and_fills_unmatched_with_nulls() -> None:
    board = _board()
    meta = pd.DataFrame(
        {"model": ["c/z", "a/x"], "params_b": [70.0, 1.5], "note": ["n", "m"]}
    )
    joined = annotate_leaderboard(board, meta)
    expected = board.assign(
        params_b=[1.5, np.nan, 70.0, np.nan],
        note=pd.Series(["m", None, "n", None], dtype="str"),
        size_class=pd.Series(["<3B", None, "65B+", None], dtype="str"),
    )
    pdt.assert_frame_equal(joined, expected, check_dtype=False)
    assert joined.attrs["column_docs"]["note"] == "From the metadata table (<frame>)."
    assert joined.attrs["column_docs"]["params_b"].startswith("Parameters in billions")


def test_join_on_every_key_the_table_has() -> None:
    board = _board(precision=["bfloat16", "float16", "bfloat16", "float16"])
    meta = pd.DataFrame(
        {
            "model": ["a/x", "b/y"],
            "precision": ["bfloat16", "bfloat16"],
            "team": ["r", "g"],
        }
    )
    joined = annotate_leaderboard(board, meta)
    assert joined["team"].fillna("-").tolist() == ["r", "-", "-", "-"]


def test_join_rejects_clashes_and_tables_matching_nothing() -> None:
    with pytest.raises(
        SchemaMismatchError, match=r"\['average'\] have the names.*\nHint: rename"
    ):
        annotate_leaderboard(
            _board(), pd.DataFrame({"model": ["a/x"], "average": [1.0]})
        )
    with pytest.raises(
        SchemaMismatchError,
        match=r"none of the 4 variants matches.*\nHint: spell the keys",
    ):
        annotate_leaderboard(_board(), pd.DataFrame({"model": ["A/X"], "team": ["r"]}))


def test_size_class_edges() -> None:
    values = pa.array(
        [0.1, 2.99, 3.0, 6.0, 9.99, 10.0, 20.0, 40.0, 65.0, 141.0, 0.0, -1.0, np.nan]
    )
    assert size_class_array(values).fill_null("?").to_pylist() == [
        "<3B", "<3B", "3-6B", "6-10B", "6-10B", "10-20B", "20-40B", "40-65B", "65B+", "65B+",
        "?", "?", "?",
    ]  # fmt: skip


def test_exclude_flagged_reranks_the_rest() -> None:
    board = _board(flagged=pd.array([True, False, None, False], dtype="boolean"))
    result = annotate_leaderboard(board, None, is_flagged_excluded=True)
    assert result["model"].tolist() == ["b/y", "c/z", "a/x", "d/w"]
    assert result["rank"].tolist()[:2] == [1, 1]  # the tie stays a tie
    assert result["rank"].isna().tolist() == [False, False, True, True]
    assert list_flagged(result)["model"].tolist() == ["a/x"]
    with pytest.raises(
        SchemaMismatchError, match=r"no column 'flagged'.*\nHint: pass a metadata table"
    ):
        annotate_leaderboard(_board(), None, is_flagged_excluded=True)


def test_rank_within_groups() -> None:
    board = _board(size_class=["65B+", "<3B", "<3B", "<3B"])
    ranked = annotate_leaderboard(board, None, rank_within_columns=["size_class"])
    assert ranked["rank_within_size_class"].tolist()[:3] == [1, 1, 1]  # ties share
    assert pd.isna(ranked["rank_within_size_class"].iloc[3])  # unranked stays unranked
    board = _board(size_class=["<3B", "<3B", None, "<3B"], average=[5.0, 7.0, 9.0, 1.0])
    ranked = annotate_leaderboard(board, None, rank_within_columns=["size_class"])
    assert ranked["rank_within_size_class"].tolist()[:2] == [2, 1]
    with pytest.raises(
        SchemaMismatchError, match=r"cannot rank within.*'size'.*\nHint"
    ):
        annotate_leaderboard(_board(), None, rank_within_columns=["size"])


def test_group_ranks_follow_flag_exclusion() -> None:
    board = annotate_leaderboard(
        _board(type=["x"] * 4, flagged=[True, False, False, False]),
        None,
        rank_within_columns=["type"],
    )
    assert board["rank_within_type"].tolist()[:3] == [1, 2, 2]
    again = annotate_leaderboard(board, None, is_flagged_excluded=True)
    assert again.set_index("model")["rank_within_type"].to_dict()["b/y"] == 1


def test_run_joins_metadata_into_the_output(
    golden_files: list[Path], tmp_path: Path
) -> None:
    path = tmp_path / "meta.csv"
    path.write_text(GOLDEN_META)
    result = run(
        golden_files,
        out=tmp_path / "out",
        options=RunOptions(
            metadata=str(path), rank_within=("size_class",), exclude_flagged=True
        ),
    )
    board = result.leaderboard.set_index("model")
    rank = board["rank"].to_dict()
    assert (
        board["rank"].isna().to_dict()["meta-llama/Meta-Llama-3-8B-Instruct"]
    )  # flagged
    assert rank["AIDC-AI/Marco-o1"] == 2
    assert board["rank_within_size_class"].to_dict()["AIDC-AI/Marco-o1"] == 1
    assert np.isnan(board["params_b"].to_dict()["allenai/Llama-3.1-Tulu-3-8B-RM"])
    table = pq.read_table(tmp_path / "out" / "leaderboard.parquet")
    assert table.column_names[-7:] == [
        "params_b", "type", "type_code", "submission_date", "flagged", "size_class",
        "rank_within_size_class",
    ]  # fmt: skip
    assert table["type"].to_pylist()[:2] == ["chat models (RLHF, DPO, IFT, ...)"] * 2
    assert table["type_code"].to_pylist()[:2] == ["chatmodels"] * 2
    assert table.schema.field("rank_within_size_class").type == pa.int64()
    assert table.schema.field("submission_date").type == pa.date32()
    assert (
        table.schema.field("rank_within_size_class")
        .metadata[b"doc"]
        .startswith(b"Rank by")
    )


def test_demo_brings_its_metadata() -> None:
    board = run().leaderboard
    assert {"type", "params_b", "submission_date", "flagged", "size_class"} <= set(
        board.columns
    )
    assert int(board["flagged"].sum()) == 1
    top = board.iloc[0]
    assert top["model"] == "MaziyarPanahi/calme-3.2-instruct-78b"
    assert top["params_b"] == pytest.approx(77.965)
    assert top["size_class"] == "65B+"


def test_cli_run_options(
    golden_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "meta.csv"
    path.write_text(GOLDEN_META)
    argv = ["run", *map(str, golden_files), "--out", str(tmp_path / "o"), "--top", "2"]
    assert (
        main(
            [
                *argv,
                "--metadata",
                str(path),
                "--exclude-flagged",
                "--rank-within",
                "type",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert (
        "flagged    1 variant(s) excluded from ranks: meta-llama/Meta-Llama-3-8B-Instruct ()"
        in text
    )
    assert (
        "rank_within_type"
        in pq.read_schema(tmp_path / "o" / "leaderboard.parquet").names
    )
    assert main([*argv, "--exclude-flagged"]) == 4
    assert "Hint: pass a metadata table" in capsys.readouterr().err
    assert main(["run", "--help"]) == 0
    assert "--metadata" in capsys.readouterr().out


def test_a_pandas_index_written_along_is_not_metadata(tmp_path: Path) -> None:
    path = tmp_path / "meta.parquet"
    pd.DataFrame({"model": ["a/x"], "team": ["r"]}, index=[7]).to_parquet(path)
    assert read_metadata(path).columns.tolist() == ["model", "team"]
    joined = annotate_leaderboard(_board(), path)
    assert joined.columns.tolist()[-1] == "team"
    assert joined.attrs["column_docs"]["team"] == f"From the metadata table ({path})."


def test_a_misspelled_name_is_counted_in_the_summary(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One variant without a row, one row without a variant: said, not silent."""
    models = tmp_path / "models.csv"
    models.write_text(
        "model,params_b\n01-ai/Yi-34B-Chat,34.4\nmeta-llama/Meta-Llama-3-8B-Instrcut,8\n"
    )
    argv = ["run", str(fixtures / "full_structure"), "--metadata", str(models)]
    assert main([*argv, "--out", str(tmp_path / "o"), "--top", "0"]) == 0
    assert (
        f"metadata   {models}: 1 of 2 variant(s) have no row (e.g. "
        "meta-llama/Meta-Llama-3-8B-Instruct [bfloat16]); 1 of its 2 row(s) match no "
        "variant (e.g. meta-llama/Meta-Llama-3-8B-Instrcut: a misspelled name?)"
    ) in capsys.readouterr().out.splitlines()
    coverage = run(
        [fixtures / "full_structure"], options=RunOptions(metadata=str(models))
    ).metadata_coverage
    assert coverage is not None
    assert (coverage["variants_without_row"], coverage["rows_without_variant"]) == (
        1,
        1,
    )
    models.write_text(
        "model,params_b\n01-ai/Yi-34B-Chat,34.4\nmeta-llama/Meta-Llama-3-8B-Instruct,8\n"
    )
    assert main([*argv, "--out", str(tmp_path / "p"), "--top", "0"]) == 0
    assert "metadata   " not in capsys.readouterr().out  # every one matched
