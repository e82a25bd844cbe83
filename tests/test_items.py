"""readers/items.py: per-sample inputs as an item matrix, documents lined up across models.

The oracle reads the same files with ``json`` (tests/sample_rows.py) or the same
table with pandas and pivots it. Failure paths: items missing on one side (absent,
counted by the comparisons), copies of one document (counted), a repeated doc_id, a
doc_id given as text, a cluster key missing on some lines or rows: each a clear error
or a count, never a silent match.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_rows import sample_rows

from lbnorm.core.errors import InputError
from lbnorm.readers import samples as samples_module
from lbnorm.readers.harness import subtask_columns
from lbnorm.readers.items import Items, ItemSource, read_items
from lbnorm.suites import Suite, load_suite, parse_suite

V2 = load_suite("openllm-v2")
MUSR = "leaderboard_musr_murder_mysteries"
LLAMA = "meta-llama/Meta-Llama-3-8B-Instruct"
YI = "01-ai/Yi-34B-Chat"


def suite_index(suite: Suite, benchmark: str, subtask: str) -> int:
    names = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
    return names.index((benchmark, subtask))


@pytest.fixture
def tree(tmp_path: Path, fixtures: Path) -> Path:
    """Llama's committed sample files and Yi's beside them (a details tree)."""
    for folder in (
        fixtures / "samples" / "meta-llama",
        fixtures / "paired" / "models" / "01-ai",
    ):
        shutil.copytree(folder, tmp_path / "tree" / folder.name)
    return tmp_path / "tree"


def jsonl(folder: Path) -> list[ItemSource]:
    return [ItemSource(path=path) for path in sorted(folder.rglob("samples_*.jsonl"))]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def row_of(items: Items, model: str) -> int:
    return int(items.variants["model"].to_pylist().index(model))


def test_sample_files_line_up_by_doc_hash(tree: Path) -> None:
    items = read_items(jsonl(tree), V2)
    assert sorted(items.variants["model"].to_pylist()) == [YI, LLAMA]
    murder = items.subtasks[suite_index(V2, "MUSR", "murder_mysteries")]
    assert murder is not None
    assert (murder.key, murder.is_list, murder.is_binary) == ("doc_hash", False, True)
    for model in (LLAMA, YI):
        (path,) = tree.rglob(f"{model.split('/')[1]}/samples_{MUSR}_*.jsonl")
        expected = {line["doc_hash"]: line["acc_norm"] for line in lines(path)}
        got = murder.floats([row_of(items, model)])[0]
        assert (
            dict(zip(murder.documents.to_pylist(), got.tolist(), strict=True))
            == expected
        )
    inst = items.subtasks[suite_index(V2, "IFEval", "inst_level_strict")]
    assert inst is not None
    assert inst.is_list
    (path,) = tree.rglob("Yi-34B-Chat/samples_leaderboard_ifeval_*.jsonl")
    expected_items: dict[tuple[object, int], float] = {
        (line["doc_hash"], at): float(value)
        for line in lines(path)
        for at, value in enumerate(line["inst_level_strict_acc"])
    }
    got = inst.floats([row_of(items, YI)])[0]
    keys = zip(inst.documents.to_pylist(), inst.positions.tolist(), strict=True)
    assert dict(zip(keys, got.tolist(), strict=True)) == expected_items
    # the instructions of a prompt are one cluster: the prompt's
    prompt = items.subtasks[suite_index(V2, "IFEval", "prompt_level_strict")]
    assert prompt is not None
    cluster_of = dict(
        zip(prompt.documents.to_pylist(), prompt.clusters.tolist(), strict=True)
    )
    assert [cluster_of[d] for d in inst.documents.to_pylist()] == inst.clusters.tolist()


def test_a_table_gives_the_items_the_files_give(tree: Path, tmp_path: Path) -> None:
    """The same values through a Parquet sample table (matched by doc_id there)."""
    columns = subtask_columns(V2)
    tables = []
    for model, folder in ((LLAMA, "Meta-Llama-3-8B-Instruct"), (YI, "Yi-34B-Chat")):
        rows = sample_rows(
            sorted(tree.rglob(f"{folder}/samples_*.jsonl")),
            lambda task: [
                m
                for t, m in zip(columns["task"], columns["metric"], strict=True)
                if t == task
            ],
        )
        tables.append(pa.table({"model": [model] * len(rows["value"]), **rows}))
    path = tmp_path / "samples.parquet"
    pq.write_table(pa.concat_tables(tables), path, row_group_size=700)
    from_table = read_items([ItemSource(path=path)], V2)
    from_files = read_items(jsonl(tree), V2)
    for mine, theirs in zip(from_table.subtasks, from_files.subtasks, strict=True):
        if theirs is None:
            assert mine is None
            continue
        assert mine is not None
        assert mine.key == "doc_id"
        for model in (LLAMA, YI):
            a = pd.Series(
                mine.floats([row_of(from_table, model)])[0],
                index=pd.MultiIndex.from_arrays([mine.document_index, mine.positions]),
            )
            b = pd.Series(
                theirs.floats([row_of(from_files, model)])[0],
                index=pd.MultiIndex.from_arrays(
                    [theirs.document_index, theirs.positions]
                ),
            )
            pd.testing.assert_series_equal(
                a.sort_index(), b.sort_index(), check_names=False
            )


def test_renumbered_documents_match_by_their_hash(tree: Path) -> None:
    """A harness that numbered the documents otherwise: the hashes still line them up."""
    (path,) = tree.rglob(f"Yi-34B-Chat/samples_{MUSR}_*.jsonl")
    original = lines(path)
    renumbered = [
        {**line, "doc_id": len(original) - 1 - i} for i, line in enumerate(original)
    ]
    path.write_text("\n".join(json.dumps(line) for line in renumbered[::-1]) + "\n")
    items = read_items(jsonl(tree), V2)
    murder = items.subtasks[suite_index(V2, "MUSR", "murder_mysteries")]
    assert murder is not None
    got = dict(
        zip(
            murder.documents.to_pylist(),
            murder.floats([row_of(items, YI)])[0].tolist(),
            strict=True,
        )
    )
    assert got == {line["doc_hash"]: line["acc_norm"] for line in original}


def test_without_doc_hash_in_one_file_the_task_matches_by_doc_id(tree: Path) -> None:
    (path,) = tree.rglob(f"Yi-34B-Chat/samples_{MUSR}_*.jsonl")
    stripped = [
        {k: v for k, v in line.items() if k != "doc_hash"} for line in lines(path)
    ]
    path.write_text("\n".join(json.dumps(line) for line in stripped) + "\n")
    items = read_items(jsonl(tree), V2)
    murder = items.subtasks[suite_index(V2, "MUSR", "murder_mysteries")]
    ifeval = items.subtasks[suite_index(V2, "IFEval", "prompt_level_strict")]
    assert murder is not None
    assert ifeval is not None
    assert (murder.key, ifeval.key) == ("doc_id", "doc_hash")
    assert murder.documents.to_pylist() == list(range(250))


def test_copies_of_a_document_are_matched_copy_by_copy_and_counted(tree: Path) -> None:
    (path,) = tree.rglob(f"Yi-34B-Chat/samples_{MUSR}_*.jsonl")
    rows = lines(path)
    copy = {**rows[5], "doc_id": 9999, "acc_norm": 1.0 - float(rows[5]["acc_norm"])}
    path.write_text("\n".join(json.dumps(line) for line in [*rows, copy]) + "\n")
    items = read_items(jsonl(tree), V2)
    murder = items.subtasks[suite_index(V2, "MUSR", "murder_mysteries")]
    assert murder is not None
    assert murder.n_duplicated == 1
    have = murder.codes != 0
    only = np.flatnonzero(have[row_of(items, YI)] & ~have[row_of(items, LLAMA)])
    assert murder.documents.take(pa.array(only)).to_pylist() == [
        f"{rows[5]['doc_hash']}#1"
    ]


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (
            lambda r: [*r, {**r[3]}],
            r"line 251: doc_id 3 for filter 'none' repeats line 4\.\nHint: keep one line",
        ),
        (
            lambda r: [{**r[0], "doc_id": "0"}, *r[1:]],
            r"line 1: 'doc_id' is the text '0', not the integer 0; .*\nHint: a harness samples file",
        ),
        (
            lambda r: [{**r[0], "doc_id": 0.5}, *r[1:]],
            r"line 1: 'doc_id' is 0\.5, not an integer\.\nHint:",
        ),
        (
            lambda r: [
                r[0],
                {k: v for k, v in r[1].items() if k != "doc_hash"},
                *r[2:],
            ],
            r"line 2: no doc_hash, though .*\nHint: the harness writes doc_hash on every line",
        ),
        (
            lambda r: [
                r[0],
                {k: v for k, v in r[1].items() if k != "acc_norm"},
                *r[2:],
            ],
            r"line 2: 'acc_norm' is missing\.\nHint:",
        ),
    ],
    ids=[
        "repeated-doc-id",
        "doc-id-as-text",
        "doc-id-float",
        "doc-hash-on-some-lines",
        "metric-missing",
    ],
)
def test_bad_lines_are_named(tree: Path, edit: object, match: str) -> None:
    (path,) = tree.rglob(f"Yi-34B-Chat/samples_{MUSR}_*.jsonl")
    path.write_text("\n".join(json.dumps(line) for line in edit(lines(path))) + "\n")  # type: ignore[operator]
    with pytest.raises(InputError, match=f"{path.name}: {match}"):
        read_items(jsonl(tree), V2)


def clustered_suite(key: str = "doc.passage") -> Suite:
    text = V2.text.replace(
        'metric = "acc_norm,none", num_choices = 2, n_samples = 250 }',
        f'metric = "acc_norm,none", num_choices = 2, n_samples = 250, cluster = "{key}" }}',
    )
    return parse_suite(text.encode(), source="clustered")


def with_passages(path: Path, *, missing_at: int | None = None) -> None:
    rows = lines(path)
    for i, line in enumerate(rows):
        doc = {k: v for k, v in line["doc"].items() if k != "passage"}
        line["doc"] = doc if i == missing_at else {**doc, "passage": f"p{i // 5}"}
    path.write_text("\n".join(json.dumps(line) for line in rows) + "\n")


def test_a_cluster_key_groups_documents_and_a_line_without_it_is_named(
    tree: Path,
) -> None:
    suite = clustered_suite()
    assert suite.benchmarks[4].subtasks[0].cluster == "doc.passage"
    for path in tree.rglob(f"samples_{MUSR}_*.jsonl"):
        with_passages(path)
    murder = read_items(jsonl(tree), suite).subtasks[
        suite_index(suite, "MUSR", "murder_mysteries")
    ]
    assert murder is not None
    assert np.unique(murder.clusters).size == 50
    (path,) = tree.rglob(f"Yi-34B-Chat/samples_{MUSR}_*.jsonl")
    with_passages(path, missing_at=7)
    with pytest.raises(
        InputError,
        match=r"line 8: the cluster key 'doc.passage' \(the suite's\) is missing\.\nHint: every line of a clustered task",
    ):
        read_items(jsonl(tree), suite)


def test_a_document_given_two_clusters_is_an_error(tree: Path) -> None:
    suite = clustered_suite()
    for path in tree.rglob(f"samples_{MUSR}_*.jsonl"):
        with_passages(path)
    (path,) = tree.rglob(f"Yi-34B-Chat/samples_{MUSR}_*.jsonl")
    rows = lines(path)
    rows[2]["doc"] = {**rows[2]["doc"], "passage": "elsewhere"}
    path.write_text("\n".join(json.dumps(line) for line in rows) + "\n")
    with pytest.raises(
        InputError,
        match=r"Meta-Llama-3-8B-Instruct/samples_leaderboard_musr_murder_mysteries_.*: document [0-9a-f]{64}: cluster value 'p0', but another line or input gives the same document 'elsewhere'\.\nHint: a document belongs to one cluster",
    ):
        read_items(jsonl(tree), suite)


def write_table(path: Path, frame: pd.DataFrame, **options: object) -> ItemSource:
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path, **options)
    return ItemSource(path=path)


def gpqa_rows(models: list[str], docs: list[int], value: float = 1.0) -> pd.DataFrame:
    return pd.DataFrame(
        [
            (m, "leaderboard_gpqa_main", "acc_norm,none", d, value)
            for m in models
            for d in docs
        ],
        columns=["model", "task", "metric", "doc_id", "value"],
    )


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (
            pd.concat([gpqa_rows(["a/b"], [0, 1, 2]), gpqa_rows(["a/b"], [1])]),
            r"give 1 value\(s\) twice for one \(variant, task, metric, document\).*\nHint: keep one row",
        ),
        (
            gpqa_rows(["a/b"], [0, 1]).astype({"doc_id": "str"}),
            r"column 'doc_id' has type (large_)?string, expected int64\.\nHint: a sample table has the columns",
        ),
        (
            gpqa_rows(["a/b"], [0, 1]).assign(value=[1.0, np.inf]),
            r"value is not finite in row\(s\) 2\.\nHint:",
        ),
    ],
    ids=["duplicate-rows", "doc-id-text", "value-infinite"],
)
def test_bad_tables_are_named(tmp_path: Path, frame: pd.DataFrame, match: str) -> None:
    source = write_table(tmp_path / "t.parquet", frame)
    with pytest.raises(InputError, match=match):
        read_items([source], V2)


@pytest.mark.parametrize("models", [None, ["a/b"]], ids=["all", "one-model"])
def test_a_bad_row_is_named_by_its_row_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, models: list[str] | None
) -> None:
    # rows 1-8: a/b and c/d alternate; the file is read 3 rows at a time and, with
    # `models`, c/d's rows are left out first: the row numbers stay the file's
    frame = gpqa_rows(["a/b", "c/d"], [0, 1, 2, 3]).sort_values("doc_id", kind="stable")
    flags = pd.array([False] * 6 + [None, False], dtype="boolean")  # row 7 (a/b's)
    frame = frame.assign(chat_template=flags, value=0.5)
    frame.loc[frame.index[4], "value"] = np.inf  # row 5 (a/b's): not finite
    monkeypatch.setattr(samples_module, "_BATCH_ROWS", 3)
    source = write_table(tmp_path / "t.parquet", frame)
    with pytest.raises(InputError, match=r"value is not finite in row\(s\) 5\.\nHint:"):
        read_items([source], V2, models=models)
    source = write_table(tmp_path / "t.parquet", frame.assign(value=0.5))
    with pytest.raises(
        InputError, match=r"chat_template is null in row\(s\) 7\.\nHint:"
    ):
        read_items([source], V2, models=models)


def test_a_table_cluster_column_missing_or_null_is_an_error(tmp_path: Path) -> None:
    text = V2.text.replace(
        'task = "leaderboard_gpqa_main", metric = "acc_norm,none", num_choices = 4, n_samples = 448 }',
        'task = "leaderboard_gpqa_main", metric = "acc_norm,none", num_choices = 4, n_samples = 448, cluster = "passage" }',
    )
    suite = parse_suite(text.encode(), source="clustered")
    frame = gpqa_rows(["a/b"], [0, 1, 2, 3])
    source = write_table(tmp_path / "t.parquet", frame)
    with pytest.raises(
        InputError,
        match=r"no column 'passage', the suite's cluster key for task 'leaderboard_gpqa_main' \(row 1\)\.\nHint: add the cluster's column",
    ):
        read_items([source], suite)
    passages = pd.Series(["x", None, "y", None], dtype="string")
    source = write_table(tmp_path / "t.parquet", frame.assign(passage=passages))
    with pytest.raises(
        InputError,
        match=r"'passage' \(the suite's cluster key for task 'leaderboard_gpqa_main'\) is null in 2 row\(s\): 2, 4\.\nHint:",
    ):
        read_items([source], suite)
    items = read_items(
        [
            write_table(
                tmp_path / "t.parquet", frame.assign(passage=["x", "x", "y", "z"])
            )
        ],
        suite,
    )
    main = items.subtasks[suite_index(suite, "GPQA", "main")]
    assert main is not None
    assert main.clusters.tolist() == [0, 0, 1, 2]


def test_large_and_negative_doc_ids_are_matched_too(tmp_path: Path) -> None:
    docs = [-5, 0, 3, 2**40, 2**22 + 1]
    frame = pd.concat(
        [gpqa_rows(["a/x"], docs, 1.0), gpqa_rows(["b/y"], docs[1:], 0.0)]
    )
    items = read_items([write_table(tmp_path / "t.parquet", frame)], V2)
    main = items.subtasks[suite_index(V2, "GPQA", "main")]
    assert main is not None
    by_doc = dict(zip(main.documents.to_pylist(), main.codes.T.tolist(), strict=True))
    assert by_doc == {
        -5: [2, 0],
        0: [2, 1],
        3: [2, 1],
        2**40: [2, 1],
        2**22 + 1: [2, 1],
    }


def test_models_filter_reads_only_those(tree: Path) -> None:
    items = read_items(jsonl(tree), V2, models=[YI])
    assert items.variants["model"].to_pylist() == [YI]


@pytest.mark.slow
@settings(deadline=None, max_examples=25)
@given(
    seed=st.integers(0, 2**31),
    batch=st.integers(3, 50),
    n_models=st.integers(1, 6),
)
def test_any_row_order_and_batching_gives_the_pivot(
    tmp_path_factory: pytest.TempPathFactory, seed: int, batch: int, n_models: int
) -> None:
    """A random table (some documents missing, some values not 0/1, list items), in
    random row order and row groups, read in small batches: pandas' pivot."""
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, str, int, int | None, float]] = []
    for m in range(n_models):
        for task, metric, docs in (
            ("leaderboard_gpqa_main", "acc_norm,none", 30),
            ("leaderboard_math_geometry_hard", "exact_match,none", 12),
        ):
            for d in range(docs):
                if rng.random() < 0.8:
                    value = (
                        float(rng.random() < 0.5)
                        if task.endswith("main")
                        else float(rng.integers(0, 3)) / 2
                    )
                    rows.append((f"o/m{m}", task, metric, int(d * 7), None, value))
        for d in range(10):
            for position in range(int(rng.integers(1, 4))):
                if rng.random() < 0.9:
                    rows.append(
                        (
                            f"o/m{m}",
                            "leaderboard_ifeval",
                            "inst_level_strict_acc,none",
                            d,
                            position,
                            float(rng.random() < 0.7),
                        )
                    )
    frame = pd.DataFrame(
        rows, columns=["model", "task", "metric", "doc_id", "item", "value"]
    )
    frame = frame.sample(frac=1.0, random_state=seed % 2**31).astype({"item": "Int32"})
    path = tmp_path_factory.mktemp("pivot") / "t.parquet"
    source = write_table(path, frame, row_group_size=batch * 3)
    old = samples_module._BATCH_ROWS
    samples_module._BATCH_ROWS = batch
    try:
        items = read_items([source], V2)
    finally:
        samples_module._BATCH_ROWS = old
    for task, metric in (
        frame[["task", "metric"]].drop_duplicates().itertuples(index=False)
    ):
        k = next(
            i
            for i, (t, m) in enumerate(
                zip(
                    subtask_columns(V2)["task"],
                    subtask_columns(V2)["metric"],
                    strict=True,
                )
            )
            if (t, m) == (task, metric)
        )
        subtask = items.subtasks[k]
        assert subtask is not None
        mine = frame.loc[(frame["task"] == task) & (frame["metric"] == metric)]
        expected = (
            mine.assign(item=mine["item"].fillna(-1).astype(int))
            .set_index(["model", "doc_id", "item"])["value"]
            .sort_index()
        )
        values = subtask.floats()
        row, column = np.nonzero(~np.isnan(values))
        models = np.array(items.variants["model"].to_pylist())
        index = pd.MultiIndex.from_arrays(
            [
                models[row],
                np.asarray(subtask.documents.to_pylist())[column],
                subtask.positions[column],
            ],
            names=["model", "doc_id", "item"],
        )
        got = pd.Series(values[row, column], index=index)
        pd.testing.assert_series_equal(got.sort_index(), expected, check_names=False)


def test_the_aggregation_hands_its_batches_to_a_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run --paired`` reads a sample table once: the aggregation's batches (with
    doc_id) make the same item matrix as reading the table again."""
    from lbnorm.readers.items import ItemCollector
    from lbnorm.readers.samples import aggregate_samples_table

    rng = np.random.default_rng(11)
    frame = pd.concat(
        [gpqa_rows([f"o/m{m}"], list(range(40))) for m in range(5)], ignore_index=True
    ).assign(value=lambda f: (rng.random(len(f)) < 0.6).astype(float))
    frame = frame.sample(frac=1.0, random_state=3)
    source = write_table(tmp_path / "t.parquet", frame, row_group_size=37)
    collector = ItemCollector(V2)
    monkeypatch.setattr(samples_module, "_BATCH_ROWS", 29)
    scores, _ = aggregate_samples_table(
        source.path, subtask_columns(V2), sink=collector
    )
    assert scores.num_rows == 5
    shared = collector.finish()
    again = read_items([source], V2)
    k = suite_index(V2, "GPQA", "main")
    mine, theirs = shared.subtasks[k], again.subtasks[k]
    assert mine is not None
    assert theirs is not None
    assert shared.variants.equals(again.variants)
    order = np.argsort(mine.documents.to_numpy())  # numbered as batches came
    assert np.array_equal(
        mine.codes[:, order], theirs.codes[:, np.argsort(theirs.documents.to_numpy())]
    )


def test_a_task_a_table_gives_is_matched_by_doc_id_in_the_files_too(
    tree: Path, tmp_path: Path
) -> None:
    frame = pd.DataFrame(
        {
            "model": "o/table",
            "task": MUSR,
            "metric": "acc_norm,none",
            "doc_id": range(250),
            "value": 1.0,
        }
    )
    table = write_table(tmp_path / "t.parquet", frame)
    items = read_items([*jsonl(tree), table], V2)
    murder = items.subtasks[suite_index(V2, "MUSR", "murder_mysteries")]
    ifeval = items.subtasks[suite_index(V2, "IFEval", "prompt_level_strict")]
    assert murder is not None
    assert ifeval is not None
    assert (murder.key, ifeval.key) == ("doc_id", "doc_hash")
    assert (murder.codes != 0).all()  # every document lined up across the three


def test_a_null_chat_template_is_refused_in_a_task_the_suite_leaves_out(
    tmp_path: Path,
) -> None:
    # the item matrix and the run's aggregation read a sample table by one rule:
    # a variant key is checked on every row of the file, not only the suite's tasks
    used = gpqa_rows(["a/b"], [0, 1]).assign(chat_template=False)
    unused = used.assign(task="some_other_task")
    frame = pd.concat([used, unused], ignore_index=True)
    frame["chat_template"] = pd.array([False, False, None, None], dtype="boolean")
    source = write_table(tmp_path / "t.parquet", frame)
    match = r"chat_template is null in row\(s\) 3, 4\.\nHint:"
    with pytest.raises(InputError, match=match):
        read_items([source], V2)
    with pytest.raises(InputError, match=match):
        samples_module.aggregate_samples_table(source.path, subtask_columns(V2))
