"""The Arrow metadata join gives the table the pandas join gave (commit c250040).

``_Oracle`` is the pandas implementation :func:`lbnorm.engines.metadata.annotate_table`
replaced, kept here, trimmed to what it computed, as the reference: the
leaderboard after the join, flag exclusion and group ranks must have the same
columns, values, types and docs. Two changes are deliberate and applied to the
oracle's output before comparing: ``type`` in words with its own spelling in
``type_code`` (issue 13), and integer metadata columns staying ``int64`` where
pandas turned them into floats whenever a variant had no metadata row.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbnorm import run
from lbnorm.board import rank_descending
from lbnorm.core.errors import SchemaMismatchError
from lbnorm.core.schemas import KEY_COLUMNS
from lbnorm.engines.metadata import (
    COLUMN_DOCS,
    SIZE_CLASSES,
    TYPE_LABELS,
    annotate_table,
    conform_metadata_table,
    read_raw_metadata,
)
from lbnorm.pipeline import demo_metadata_path, demo_path


class _Oracle:
    """The pandas join of commit c250040 (lbnorm/engines/metadata.py), trimmed."""

    @staticmethod
    def conform(metadata: pd.DataFrame) -> pd.DataFrame:
        keys = [name for name in KEY_COLUMNS if name in metadata.columns]
        fixes = {
            name: metadata[name].fillna("").astype(str)
            for name in keys
            if name in ("precision", "revision")
        }
        fixes["model"] = metadata["model"].astype(str)
        booleans = {
            name: metadata[name].astype("boolean")
            for name in metadata.columns
            if name not in keys and pd.api.types.is_bool_dtype(metadata[name])
        }
        return metadata.assign(**fixes, **booleans)

    @staticmethod
    def join(
        leaderboard: pd.DataFrame, metadata: pd.DataFrame, source: str
    ) -> pd.DataFrame:
        keys = [name for name in KEY_COLUMNS if name in metadata.columns]
        n_rows = len(leaderboard)
        left = np.zeros(n_rows, dtype=np.int64)
        right = np.zeros(len(metadata), dtype=np.int64)
        for name in keys:
            both = pd.concat([leaderboard[name], metadata[name]], ignore_index=True)
            codes, uniques = pd.factorize(both, use_na_sentinel=False)
            combined, _ = pd.factorize(
                np.concatenate([left, right]) * len(uniques) + codes
            )
            left, right = combined[:n_rows], combined[n_rows:]
        match = pd.Index(right).get_indexer(pd.Index(left))
        free = metadata.drop(columns=keys).reset_index(drop=True).reindex(match)
        free = free.set_axis(pd.RangeIndex(len(match)))
        joined = leaderboard.reset_index(drop=True).assign(
            **{name: free[name] for name in free.columns}
        )
        if "params_b" in joined.columns and "size_class" not in joined.columns:
            joined = joined.assign(size_class=_Oracle.size_classes(joined["params_b"]))
        joined.attrs["column_docs"] = {
            name: COLUMN_DOCS.get(name, f"From the metadata table ({source}).")
            for name in joined.columns
            if name not in leaderboard.columns
        }
        return joined

    @staticmethod
    def size_classes(params_b: pd.Series) -> pd.Series:
        values = pd.to_numeric(params_b, errors="coerce").to_numpy(dtype=np.float64)
        edges = np.array([edge for _, edge in SIZE_CLASSES])
        labels = np.array([label for label, _ in SIZE_CLASSES], dtype=object)
        index = np.searchsorted(edges, values, side="right") - 1
        is_known = np.isfinite(values) & (values > 0)
        classes = pd.Series(
            labels[np.clip(index, 0, len(labels) - 1)],
            index=params_b.index,
            dtype="str",
        )
        return classes.where(is_known)

    @staticmethod
    def exclude_flagged(leaderboard: pd.DataFrame) -> pd.DataFrame:
        flags = leaderboard["flagged"].astype("boolean").fillna(False)
        is_flagged = flags.to_numpy(dtype=bool)
        average = leaderboard["average"].to_numpy(dtype=np.float64, na_value=np.nan)
        is_eligible = leaderboard["rank"].notna().to_numpy() & ~is_flagged
        rank = rank_descending(np.where(is_eligible, average, np.nan))
        order = np.lexsort(
            (np.arange(len(leaderboard)), np.where(np.isnan(rank), np.inf, rank))
        )
        ranked = leaderboard.assign(
            rank=pd.Series(rank, index=leaderboard.index).astype("Int64")
        )
        return ranked.iloc[order].reset_index(drop=True)

    @staticmethod
    def rank_within(leaderboard: pd.DataFrame, column: str) -> pd.DataFrame:
        average = leaderboard["average"].where(leaderboard["rank"].notna())
        group_rank = average.groupby(leaderboard[column], dropna=True).rank(
            method="min", ascending=False
        )
        name = f"rank_within_{column}"
        ranked = leaderboard.assign(**{name: group_rank.astype("Int64")})
        ranked.attrs["column_docs"] = {
            **leaderboard.attrs.get("column_docs", {}),
            name: f"Rank by average among variants with the same {column} (1 = best); "
            "null if unranked or the group is unknown.",
        }
        return ranked

    @classmethod
    def annotate(
        cls,
        leaderboard: pa.Table,
        metadata: pd.DataFrame | None,
        *,
        source: str,
        rank_within_columns: Sequence[str] = (),
        is_flagged_excluded: bool = False,
    ) -> pa.Table:
        board = leaderboard.to_pandas()
        if metadata is not None:
            board = cls.join(board, cls.conform(metadata), source)
        if is_flagged_excluded:
            board = cls.exclude_flagged(board)
        for column in dict.fromkeys(rank_within_columns):
            board = cls.rank_within(board, column)
        docs = board.attrs.get("column_docs", {})
        arrays = [
            pa.array(board[field.name], type=field.type, from_pandas=True)
            for field in leaderboard.schema
        ]
        fields = list(leaderboard.schema)
        for name in board.columns:
            if name in leaderboard.column_names:
                continue
            column = pa.array(board[name], from_pandas=True)
            if pa.types.is_large_string(column.type):
                column = column.cast(pa.string())
            arrays.append(column)
            fields.append(pa.field(name, column.type, metadata={"doc": docs[name]}))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _with_type_labels(expected: pa.Table) -> pa.Table:
    """The oracle's table with the deliberate change: ``type`` in words, ``type_code``."""
    if "type" not in expected.column_names or expected.column_names.count("type_code"):
        return expected
    index = expected.column_names.index("type")
    codes = expected.column("type")
    words = pa.array(
        [TYPE_LABELS.get(code, code) for code in codes.to_pylist()], pa.string()
    )
    labelled = expected.set_column(
        index,
        pa.field("type", pa.string(), metadata={"doc": COLUMN_DOCS["type"]}),
        words,
    )
    return labelled.add_column(
        index + 1,
        pa.field("type_code", pa.string(), metadata={"doc": COLUMN_DOCS["type_code"]}),
        codes,
    )


def _assert_same_table(actual: pa.Table, expected: pa.Table) -> None:
    assert actual.column_names == expected.column_names
    for name in expected.column_names:
        field, want = actual.schema.field(name), expected.schema.field(name)
        assert field.type == want.type, name
        assert (field.metadata or {}) == (want.metadata or {}), name
        assert actual.column(name).to_pylist() == expected.column(name).to_pylist(), (
            name
        )
    assert actual.equals(expected, check_metadata=True)


@pytest.fixture(scope="module")
def demo_board() -> pa.Table:
    """The demo's leaderboard as the engine leaves it (no metadata joined)."""
    return run([demo_path()]).leaderboard_table


@pytest.fixture(scope="module")
def demo_metadata() -> pd.DataFrame:
    frame: pd.DataFrame = pq.read_table(demo_metadata_path()).to_pandas()
    return frame


@pytest.mark.parametrize(
    ("rank_within_columns", "is_flagged_excluded"),
    [((), False), (("size_class", "type"), False), (("size_class", "type"), True)],
)
def test_the_demo_join_is_the_pandas_join(
    demo_board: pa.Table,
    demo_metadata: pd.DataFrame,
    rank_within_columns: tuple[str, ...],
    is_flagged_excluded: bool,
) -> None:
    path = demo_metadata_path()
    actual = annotate_table(
        demo_board,
        path,
        rank_within_columns=rank_within_columns,
        is_flagged_excluded=is_flagged_excluded,
    )[0]
    expected = _Oracle.annotate(
        demo_board,
        demo_metadata,
        source=str(path),
        rank_within_columns=rank_within_columns,
        is_flagged_excluded=is_flagged_excluded,
    )
    _assert_same_table(actual, _with_type_labels(expected))
    types = {field.name: field.type for field in actual.schema}
    assert types["params_b"] == pa.float64()
    assert types["submission_date"] == pa.date32()
    assert types["flagged"] == pa.bool_()
    assert types["type"] == types["type_code"] == types["size_class"] == pa.string()


def test_the_demo_types_read_as_words(demo_board: pa.Table) -> None:
    board = annotate_table(demo_board, demo_metadata_path())[0]
    pairs = set(
        zip(board["type_code"].to_pylist(), board["type"].to_pylist(), strict=True)
    )
    assert pairs == {
        (
            "fine-tunedondomain-specificdatasets",
            "fine-tuned on domain-specific datasets",
        ),
        ("basemergesandmoerges", "base merges and moerges"),
        ("chatmodels", "chat models (RLHF, DPO, IFT, ...)"),
        ("pretrained", "pretrained"),
        ("continuouslypretrained", "continuously pretrained"),
        ("multimodal", "multimodal"),
        ("❓other", "other"),
    }
    names = board.column_names
    assert names[names.index("type") + 1] == "type_code"


#: A metadata table with a null in every kind of column, a NaN, keys on precision.
MIXED_CSV = """\
model,precision,params_b,type,submission_date,flagged,note,score
a/x,bfloat16,7.5,chatmodels,2024-06-01,true,first,0.5
a/x,float16,,pretrained,,false,,
b/y,bfloat16,NaN,,2025-01-02,,third,nan
d/w,bfloat16,70,mine,2024-12-31,false,fourth,1.0
zz/unmatched,bfloat16,1,pretrained,2024-01-01,true,never,2.0
"""


def _small_board() -> pa.Table:
    return pa.table(
        {
            "model": ["a/x", "a/x", "b/y", "c/z", "d/w"],
            "precision": ["bfloat16", "float16", "bfloat16", "bfloat16", "bfloat16"],
            "revision": [""] * 5,
            "chat_template": [True, True, False, True, True],
            "rank": pa.array([1, 2, 2, None, 4], pa.int64()),
            "average": [50.0, 40.0, 40.0, None, 30.0],
        }
    )


@pytest.mark.parametrize(
    ("rank_within_columns", "is_flagged_excluded", "suffix"),
    [
        ((), False, ".csv"),
        (("size_class", "note", "type"), True, ".csv"),
        (("size_class", "note", "type"), True, ".parquet"),
    ],
)
def test_nulls_of_every_type_match_the_pandas_join(
    tmp_path: Path,
    rank_within_columns: tuple[str, ...],
    is_flagged_excluded: bool,
    suffix: str,
) -> None:
    csv = tmp_path / "meta.csv"
    csv.write_text(MIXED_CSV)
    raw = pa_csv.read_csv(csv)  # the table as written, as the oracle read it
    path = csv
    if suffix == ".parquet":  # Parquet keeps NaN as NaN (CSV reads it as null)
        raw = raw.set_column(
            raw.column_names.index("score"),
            "score",
            pa.array([0.5, None, float("nan"), 1.0, 2.0]),
        )
        path = tmp_path / "meta.parquet"
        pq.write_table(raw, path)
    board = _small_board()
    actual = annotate_table(
        board,
        path,
        rank_within_columns=rank_within_columns,
        is_flagged_excluded=is_flagged_excluded,
    )[0]
    expected = _Oracle.annotate(
        board,
        raw.to_pandas(),
        source=str(path),
        rank_within_columns=rank_within_columns,
        is_flagged_excluded=is_flagged_excluded,
    )
    _assert_same_table(actual, _with_type_labels(expected))
    rows = {(row["model"], row["precision"]): row for row in actual.to_pylist()}
    assert rows["b/y", "bfloat16"]["params_b"] is None  # NaN read as unknown
    assert rows["b/y", "bfloat16"]["size_class"] is None
    assert rows["a/x", "float16"]["submission_date"] is None
    assert rows["a/x", "bfloat16"]["submission_date"] == datetime.date(2024, 6, 1)
    assert rows["c/z", "bfloat16"]["type"] is None  # no metadata row
    assert (
        rows["d/w", "bfloat16"]["type"]
        == rows["d/w", "bfloat16"]["type_code"]
        == "mine"
    )
    # NaN (Parquet) or nan (CSV): unknown
    assert rows["b/y", "bfloat16"]["score"] is None


def test_a_frame_gives_the_same_table_as_its_file(tmp_path: Path) -> None:
    path = tmp_path / "meta.csv"
    path.write_text(MIXED_CSV)
    from_file = annotate_table(_small_board(), path)[0]
    from_frame = annotate_table(
        _small_board(),
        conform_metadata_table(read_raw_metadata(path), source=str(path)).to_pandas(),
    )[0]
    assert from_frame.drop_columns(["note"]).equals(from_file.drop_columns(["note"]))
    assert from_frame["note"].to_pylist() == from_file["note"].to_pylist()


def test_integer_metadata_stays_integer_with_nulls(tmp_path: Path) -> None:
    path = tmp_path / "meta.csv"
    path.write_text("model,likes\na/x,12\nb/y,7\n")
    board = annotate_table(_small_board(), path)[0]
    assert board.schema.field("likes").type == pa.int64()  # pandas made it float64
    assert board["likes"].to_pylist() == [12, 12, 7, None, None]


@given(
    values=st.lists(
        st.one_of(st.none(), st.sampled_from([1.0, 2.0, 2.5, 3.0])),
        min_size=1,
        max_size=40,
    ),
    groups=st.data(),
)
def test_group_ranks_are_pandas_min_ranks(
    values: list[float | None], groups: st.DataObject
) -> None:
    names = groups.draw(
        st.lists(
            st.one_of(st.none(), st.sampled_from("abc")),
            min_size=len(values),
            max_size=len(values),
        )
    )
    board = pa.table(
        {
            "rank": pa.array([None if v is None else 1 for v in values], pa.int64()),
            "average": pa.array(values, pa.float64()),
            "group": pa.array(names, pa.string()),
        }
    )
    actual = annotate_table(board, None, rank_within_columns=["group"])[0]
    expected = _Oracle.annotate(board, None, source="-", rank_within_columns=["group"])
    assert actual.equals(expected, check_metadata=True)


def test_rules_and_messages_are_the_pandas_ones(tmp_path: Path) -> None:
    duplicated = tmp_path / "dup.csv"
    duplicated.write_text("model,x\na/x,1\na/x,2\nb/y,3\nb/y,4\nc/z,5\n")
    with pytest.raises(
        SchemaMismatchError,
        match=r"4 rows share their key \['model'\] with another row, e.g. "
        r"\{'model': 'a/x'\}, \{'model': 'b/y'\}.\nHint: keep one row per key",
    ):
        annotate_table(_small_board(), duplicated)
    nothing = tmp_path / "nothing.csv"
    nothing.write_text("model,precision,x\nA/X,bfloat16,1\n")
    with pytest.raises(
        SchemaMismatchError,
        match=r"none of the 5 variants matches a metadata row on \['model', 'precision'\]; "
        r"e.g. leaderboard \[\{'model': 'a/x', 'precision': 'bfloat16'\}, "
        r"\{'model': 'a/x', 'precision': 'float16'\}\], metadata \[\{'model': 'A/X', "
        r"'precision': 'bfloat16'\}\].\nHint: spell the keys",
    ):
        annotate_table(_small_board(), nothing)
    clash = tmp_path / "clash.csv"
    clash.write_text("model,average\na/x,1\n")
    with pytest.raises(
        SchemaMismatchError, match=r"\['average'\] have the names.*\nHint: rename"
    ):
        annotate_table(_small_board(), clash)
    with pytest.raises(
        SchemaMismatchError,
        match=r"cannot exclude flagged variants: the leaderboard has no column 'flagged'.*"
        r"\nHint: pass a metadata table",
    ):
        annotate_table(_small_board(), None, is_flagged_excluded=True)
