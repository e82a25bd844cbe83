"""Parquet row groups whose text fell back to plain pages read as the dictionary pages do."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import OPENLLM_V2

from lbnorm.cli import main
from lbnorm.core.errors import SchemaMismatchError
from lbnorm.readers import parquet
from lbnorm.readers.parquet import open_parquet_scores

#: Names that repeat (so dictionaries have work), an empty one, and names holding
#: the NUL that joins ``model`` and ``revision`` into one key.
_MODELS = st.sampled_from(["a", "b", "a\x00", "\x00b", "", "org/model-7B"])
_REVISIONS = st.sampled_from(["", "main", "\x00", "0f1e2d3c"])


@st.composite
def _shuffled_rows(draw: st.DrawFn) -> pa.Table:
    """A few rows of repeated keys in any order; nulls where the contract allows them."""
    n_rows = draw(st.integers(0, 40))
    model = draw(
        st.lists(st.one_of(st.none(), _MODELS), min_size=n_rows, max_size=n_rows)
    )
    revision = draw(
        st.lists(st.one_of(st.none(), _REVISIONS), min_size=n_rows, max_size=n_rows)
    )
    precision = draw(
        st.lists(
            st.sampled_from(["bfloat16", "float16"]), min_size=n_rows, max_size=n_rows
        )
    )
    subtask = draw(
        st.lists(st.sampled_from(["x", "y"]), min_size=n_rows, max_size=n_rows)
    )
    return pa.table(
        {
            "model": pa.array(model, pa.string()),
            "precision": pa.array(precision, pa.string()),
            "revision": pa.array(revision, pa.string()),
            "benchmark": pa.array(["B"] * n_rows, pa.string()),
            "subtask": pa.array(subtask, pa.string()),
            "raw_score": pa.array(np.linspace(0, 1, n_rows), pa.float64()),
        }
    )


def _tables(path: Path, *, plain: bool) -> list[pa.Table]:
    """The row groups as the reader hands them over (`plain`: its plain route allowed)."""
    with pytest.MonkeyPatch.context() as patched:
        if not plain:
            patched.setattr(parquet, "_is_plain", lambda chunk: False)
        return [batch.table for batch in open_parquet_scores(path).batches()]


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    table=_shuffled_rows(),
    plain=st.sampled_from(
        [
            ["model"],
            ["model", "revision"],
            ["model", "precision", "revision", "subtask"],
        ]
    ),
)
def test_plain_pages_read_as_their_dictionaries(
    tmp_path: Path, table: pa.Table, plain: list[str]
) -> None:
    """Columns written without dictionaries read as Arrow's dictionary read of them."""
    path = tmp_path / "plain.parquet"
    dictionaries = [name for name in table.column_names if name not in plain]
    pq.write_table(table, path, use_dictionary=dictionaries, row_group_size=16)
    if table.num_rows:
        assert sorted(open_parquet_scores(path)._routes(0)[0]) == sorted(plain)
    got, expected = _tables(path, plain=True), _tables(path, plain=False)
    assert [t.schema for t in got] == [t.schema for t in expected]
    assert all(a.equals(b) for a, b in zip(got, expected, strict=True))


def _board(n_variants: int, seed: int) -> pa.Table:
    """Every openllm-v2 subtask of `n_variants` variants, rows in random order."""
    pairs = [(b.name, t.name) for b in OPENLLM_V2.benchmarks for t in b.subtasks]
    rng = np.random.default_rng(seed)
    variant = np.repeat(np.arange(n_variants), len(pairs))
    pair = np.tile(np.arange(len(pairs)), n_variants)
    order = rng.permutation(variant.size)
    variant, pair = variant[order], pair[order]
    models = np.array(
        [f"s{seed}-org-{v % 7}/model-{v // 2}-{v % 3}B" for v in range(n_variants)]
    )
    revisions = np.array(
        [f"{v * 2654435761 % 2**32:08x}" * 5 for v in range(n_variants)]
    )
    return pa.table(
        {
            "model": pa.array(models[variant]),
            "precision": pa.array(np.where(variant % 2, "bfloat16", "float16")),
            "revision": pa.array(revisions[variant // 2 * 2]),  # shared by pairs
            "benchmark": pa.array([pairs[i][0] for i in pair]),
            "subtask": pa.array([pairs[i][1] for i in pair]),
            "raw_score": pa.array(rng.uniform(0, 1, variant.size).round(4)),
        }
    )


def test_a_file_with_plain_and_dictionary_row_groups_runs_as_dictionaries(
    tmp_path: Path,
) -> None:
    """One row group fell back to plain pages, the other did not: the same tables out."""
    few, many = _board(3, seed=1), _board(400, seed=2)
    few = few.take(pa.array(np.argsort(few["model"].to_numpy(), kind="stable")))
    rows = pa.concat_tables([few, many])
    fallen, encoded = (
        tmp_path / "in" / "fallen.parquet",
        tmp_path / "in2" / "encoded.parquet",
    )
    fallen.parent.mkdir()
    encoded.parent.mkdir()
    with pq.ParquetWriter(
        fallen, rows.schema, dictionary_pagesize_limit=2048
    ) as writer:
        writer.write_table(few)
        writer.write_table(many)
    pq.write_table(rows, encoded, row_group_size=few.num_rows + many.num_rows)
    opened = open_parquet_scores(fallen)
    assert [opened._routes(i)[0] for i in range(2)] == [
        (),
        ("model", "revision"),
    ]
    assert open_parquet_scores(encoded)._routes(0) == ((), ())
    assert all(
        a.equals(b)
        for a, b in zip(
            _tables(fallen, plain=True), _tables(fallen, plain=False), strict=True
        )
    )
    routes = {
        "plain": (fallen, parquet._is_plain),
        "dictionary": (fallen, lambda chunk: False),  # Arrow's dictionary read
        "encoded": (encoded, parquet._is_plain),
    }
    outs = {}
    for route, (path, is_plain) in routes.items():
        outs[route] = tmp_path / f"out-{route}"
        with pytest.MonkeyPatch.context() as patched:
            patched.setattr(parquet, "_is_plain", is_plain)
            assert main(["run", str(path), "--out", str(outs[route]), "--quiet"]) == 0
    names = sorted(path.name for path in outs["plain"].glob("*.parquet"))
    assert names == ["benchmarks.parquet", "leaderboard.parquet", "subtasks.parquet"]
    for name in names:  # the same bytes; the same rows as the other file's
        plain = (outs["plain"] / name).read_bytes()
        assert plain == (outs["dictionary"] / name).read_bytes(), name
        tables = [pq.read_table(outs[route] / name) for route in ("plain", "encoded")]
        rows = [  # (source: the input's path)
            table.drop_columns(
                ["source"] if "source" in table.column_names else []
            ).to_pylist()
            for table in tables
        ]
        assert sorted(rows[0], key=repr) == sorted(rows[1], key=repr), name


def _categorical(table: pa.Table, names: list[str], unused: int) -> pa.Table:
    """`table` with columns `names` as Arrow dictionaries holding every value and `unused` more.

    As pandas writes a categorical: each row group's dictionary is the whole
    column's (here also names no row uses, so the dictionary outgrows the rows).
    """
    columns = {}
    for name in table.column_names:
        column = table.column(name).combine_chunks()
        if name in names:
            values = pa.array(
                sorted(set(column.drop_null().to_pylist()))
                + [f"unused-{i}" for i in range(unused)],
                pa.large_string(),
            )
            indices = pc.index_in(column, value_set=values)
            column = pa.DictionaryArray.from_arrays(indices.cast(pa.int32()), values)
        columns[name] = column
    return pa.table(columns)


def _decoded(path: Path, *, views: bool) -> list[list[object]]:
    """The row groups' rows as the reader hands them over (`views`: that route allowed)."""
    with pytest.MonkeyPatch.context() as patched:
        if not views:
            patched.setattr(parquet, "_is_large_dictionary", lambda chunk: False)
        return [
            [
                batch.table.column(name).cast(pa.string()).to_pylist()
                if pa.types.is_dictionary(batch.table.column(name).type)
                else batch.table.column(name).to_pylist()
                for name in batch.table.column_names
            ]
            for batch in open_parquet_scores(path, keep_details=False).batches()
        ]


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    table=_shuffled_rows(),
    names=st.sampled_from([["model"], ["model", "revision"], ["precision"]]),
)
def test_file_wide_dictionaries_read_as_views_give_the_same_rows(
    tmp_path: Path, table: pa.Table, names: list[str]
) -> None:
    """A dictionary column whose dictionary outgrows its rows reads the same either route."""
    path = tmp_path / "categorical.parquet"
    pq.write_table(_categorical(table, names, unused=200), path, row_group_size=16)
    if table.num_rows:
        opened = open_parquet_scores(path, keep_details=False)
        assert opened._routes(0) == ((), tuple(names))
    assert _decoded(path, views=True) == _decoded(path, views=False)


def test_a_categorical_with_a_file_wide_dictionary_runs_to_the_same_bytes(
    tmp_path: Path,
) -> None:
    """The view route and Arrow's dictionary read give the same output files.

    Only a job writing no subtask table takes it: that table carries the
    input's dictionaries as stored.
    """
    rows = _board(300, seed=3)
    rows = rows.take(pa.array(np.argsort(rows["model"].to_numpy(), kind="stable")))
    path = tmp_path / "in" / "categorical.parquet"
    path.parent.mkdir()
    pq.write_table(_categorical(rows, ["model"], unused=0), path, row_group_size=600)
    opened = open_parquet_scores(path, keep_details=False)
    assert opened.num_row_groups == 20
    assert {opened._routes(i) for i in range(20)} == {((), ("model",))}
    assert open_parquet_scores(path)._routes(0) == ((), ())
    outs = {}
    for route in ("views", "dictionary"):
        outs[route] = tmp_path / f"out-{route}"
        with pytest.MonkeyPatch.context() as patched:
            if route == "dictionary":
                patched.setattr(parquet, "_is_large_dictionary", lambda chunk: False)
            run = ["run", str(path), "--no-subtasks", "--quiet"]
            assert main([*run, "--out", str(outs[route])]) == 0
    names = sorted(path.name for path in outs["views"].glob("*.parquet"))
    assert names == ["benchmarks.parquet", "leaderboard.parquet"]
    for name in names:
        assert (outs["views"] / name).read_bytes() == (
            outs["dictionary"] / name
        ).read_bytes(), name


def test_a_small_dictionary_is_read_as_arrow_reads_it(tmp_path: Path) -> None:
    """Row groups holding most of their dictionary's names keep Arrow's dictionary read."""
    rows = _board(300, seed=4)
    path = tmp_path / "categorical.parquet"
    pq.write_table(_categorical(rows, ["model"], unused=0), path)
    assert open_parquet_scores(path, keep_details=False)._routes(0) == ((), ())


def test_a_repeated_text_column_is_named(tmp_path: Path) -> None:
    """A text key written twice is refused by name, as a repeated score column is."""
    path = tmp_path / "twice.parquet"
    columns = [pa.array(["m"]), pa.array(["n"]), pa.array(["B"]), pa.array(["s"])]
    table = pa.Table.from_arrays(
        [*columns, pa.array([0.5])],
        names=["model", "model", "benchmark", "subtask", "raw_score"],
    )
    pq.write_table(table, path)
    with pytest.raises(
        SchemaMismatchError, match=r"column 'model' appears 2 times\.\nHint: rewrite"
    ):
        open_parquet_scores(path)
