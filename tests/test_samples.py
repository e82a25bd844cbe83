"""Per-sample results: the harness's own aggregation, checked against a real results file."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import threading
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sample_rows import sample_rows
from strategies import sample_values

import lbnorm
from lbnorm.core.errors import InputError
from lbnorm.core.options import RunOptions
from lbnorm.core.schemas import SAMPLES
from lbnorm.readers import samples as samples_module
from lbnorm.readers.harness import subtask_columns
from lbnorm.readers.samples import (
    aggregate_samples_files,
    aggregate_samples_table,
    read_samples,
)
from lbnorm.suites import load_suite

SUBTASKS = load_suite("openllm-v2").subtask_table()
COLUMNS = subtask_columns(load_suite("openllm-v2"))
STAMP = "2024-06-16T14-11-30.000000"
MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"
KEYS = ["model", "precision", "revision", "chat_template", "benchmark", "subtask"]


def _load_maker() -> ModuleType:
    path = Path(__file__).parent / "fixtures" / "samples" / "make_samples.py"
    spec = importlib.util.spec_from_file_location("make_samples", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKER = _load_maker()
SCORE_COLUMNS = [*KEYS[:4], "benchmark", "subtask", "metric", "raw_score", "stderr", "n_samples", "source", "_row"]  # fmt: skip


def _frames(
    read: tuple[pa.Table, pa.Table],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The readers' Arrow scores and catalog, as frames for the checks below."""
    scores, catalog = read
    assert isinstance(scores, pa.Table)
    assert isinstance(catalog, pa.Table)
    assert scores.column_names == SCORE_COLUMNS
    assert catalog.column_names[0] == "path"
    return scores.to_pandas(), catalog.to_pandas()


def _table_scores(path: Path, batch_rows: int = 1 << 20) -> tuple[pd.DataFrame, int]:
    """:func:`aggregate_samples_table`'s Arrow scores as a frame, and the rows ignored."""
    old, samples_module._BATCH_ROWS = samples_module._BATCH_ROWS, batch_rows
    try:
        scores, ignored = aggregate_samples_table(path, COLUMNS)
    finally:
        samples_module._BATCH_ROWS = old
    assert isinstance(scores, pa.Table)
    assert scores.column_names == SCORE_COLUMNS
    return scores.to_pandas(), ignored


@pytest.fixture(scope="module")
def results_file(full_structure_dir: Path) -> Path:
    return (
        full_structure_dir
        / "meta-llama"
        / "Meta-Llama-3-8B-Instruct"
        / f"results_{STAMP}.json"
    )


@pytest.fixture(scope="module")
def details_tree(results_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A details tree: samples of all 34 suite tasks, and a results file beside
    them that names the variant but holds no suite scores (so the samples count)."""
    root = tmp_path_factory.mktemp("details")
    folder = root / "meta-llama" / "Meta-Llama-3-8B-Instruct"
    MAKER.write_samples(results_file, folder)
    document = json.loads(results_file.read_text())
    document["results"] = {"leaderboard_arc_challenge": {"acc_norm,none": 0.5}}
    (folder / results_file.name).write_text(json.dumps(document))
    return root


def _jsonl(tree: Path) -> list[Path]:
    return sorted(tree.rglob("samples_*.jsonl"))


def _check_against_results(scores: pd.DataFrame, results_file: Path) -> None:
    document = json.loads(results_file.read_text())
    for row in scores.to_dict("records"):
        task, metric = str(row["_row"]).split("/")
        entry = document["results"][task]
        assert abs(row["raw_score"] - entry[metric]) <= 1e-12, (task, metric)
        stderr = entry[metric.replace(",", "_stderr,")]
        if stderr == "N/A":  # the harness gives list-valued metrics no stderr
            assert math.isnan(row["stderr"]), (task, metric)
        else:  # the harness computed it with ddof=1: ddof=0 would miss by ~1e-4
            assert abs(row["stderr"] - stderr) <= 1e-9, (task, metric)
        assert row["n_samples"] == document["n-samples"][task]["original"]


def test_samples_reproduce_every_score_and_stderr_of_a_real_file(
    details_tree: Path, results_file: Path
) -> None:
    scores, catalog = _frames(aggregate_samples_files(_jsonl(details_tree), COLUMNS))
    assert len(scores) == len(SUBTASKS) == 40
    assert catalog["rows"].sum() == 40
    assert catalog["superseded_by"].isna().all()
    _check_against_results(scores, results_file)
    variant = scores[
        ["model", "precision", "revision", "chat_template"]
    ].drop_duplicates()
    assert variant.to_numpy().tolist() == [
        [MODEL, "bfloat16", "e1945c40cd546c78e41f1151f4db032b271faeaa", True]
    ]


def test_committed_fixture_reproduces_its_subtasks(
    fixtures: Path, results_file: Path
) -> None:
    """MUSR murder mysteries 0.5 of 250 (125 right), IFEval 0.6987 of 541 and the
    flattened instruction level; no results file: the variant is the folders."""
    scores, _ = _frames(read_samples(_jsonl(fixtures / "samples"), COLUMNS))
    assert sorted(scores["subtask"]) == [
        "inst_level_strict",
        "murder_mysteries",
        "prompt_level_strict",
    ]
    _check_against_results(scores, results_file)
    assert scores["model"].unique().tolist() == [MODEL]
    assert scores["precision"].unique().tolist() == [""]


def test_run_on_samples_equals_run_on_results(
    details_tree: Path, results_file: Path
) -> None:
    from_samples = lbnorm.run([details_tree], options=RunOptions(engine="memory"))
    from_results = lbnorm.run([results_file], options=RunOptions(engine="memory"))
    for name in ("leaderboard", "benchmarks"):
        pd.testing.assert_frame_equal(
            getattr(from_results, name), getattr(from_samples, name), atol=1e-12
        )
    columns = [*KEYS, "raw_score", "normalized_score", "n_samples"]
    pd.testing.assert_frame_equal(
        from_results.subtasks[columns], from_samples.subtasks[columns], atol=1e-12
    )
    files = from_samples.files.set_index("format")["rows"]
    assert files["lm-eval-samples"].sum() == 40
    assert files["lm-eval-harness"] == 0  # the results file named the variant only


def test_results_files_win_and_samples_fill_the_gaps(
    details_tree: Path, results_file: Path, tmp_path: Path
) -> None:
    """With both in a tree, a results file's scores stay; samples give the rest."""
    tree = tmp_path / "tree"
    shutil.copytree(details_tree, tree)
    folder = tree / "meta-llama" / "Meta-Llama-3-8B-Instruct"
    document = json.loads(results_file.read_text())
    del document["results"]["leaderboard_musr_murder_mysteries"]  # only samples
    document["results"]["leaderboard_gpqa_diamond"]["acc_norm,none"] = 0.75
    (folder / results_file.name).write_text(json.dumps(document))
    result = lbnorm.run([tree], options=RunOptions(engine="memory"))
    subtasks = result.subtasks.astype({"subtask": str, "source": str})
    subtasks = subtasks.set_index("subtask")
    assert subtasks.loc["diamond", "raw_score"] == 0.75  # the results file's
    assert subtasks.loc["murder_mysteries", "raw_score"] == 0.5  # from samples
    assert str(subtasks.loc["murder_mysteries", "source"]).endswith(".jsonl")
    files = result.files.set_index("path")
    gpqa = files.loc[str(folder / f"samples_leaderboard_gpqa_diamond_{STAMP}.jsonl")]
    assert gpqa["rows"] == 0
    assert gpqa["superseded_by"] == str(folder / results_file.name)
    assert files.loc[str(folder / results_file.name), "rows"] == 39
    assert int(files["rows"].sum()) == len(result.subtasks) == 40


def test_newest_sample_file_wins(tmp_path: Path) -> None:
    folder = tmp_path / "org" / "model"
    old = _one_file(folder, ['{"doc_id": 0, "filter": "none", "acc_norm": 0.0}'])
    new = _one_file(
        folder,
        ['{"doc_id": 0, "filter": "none", "acc_norm": 1.0}'],
        stamp="2024-07-01T00-00-00.000000",
    )
    scores, catalog = _frames(aggregate_samples_files([new, old], COLUMNS))
    assert scores["raw_score"].tolist() == [1.0]
    assert catalog.set_index("path").loc[str(old), "superseded_by"] == str(new)
    assert catalog["rows"].tolist() == [1, 0]


def _sample_table(files: list[Path]) -> pa.Table:
    """The long sample table of harness files, built without lbnorm's reader."""
    columns = sample_rows(
        files, lambda task: SUBTASKS.loc[SUBTASKS["task"] == task, "metric"]
    )
    size = len(columns["value"])
    table = pa.table(
        {
            "model": [MODEL] * size,
            "precision": ["bfloat16"] * size,
            "revision": ["e1945c40cd546c78e41f1151f4db032b271faeaa"] * size,
            "chat_template": [True] * size,
            **columns,
        }
    )
    return table.cast(SAMPLES)


@pytest.fixture(scope="module")
def sample_table(details_tree: Path) -> pa.Table:
    return _sample_table(_jsonl(details_tree))


@pytest.mark.slow
def test_group_numbers_widened_or_renumbered_give_the_same_scores(
    sample_table: pa.Table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's group numbers are summed in int32 while they fit, widened to
    int64 when the next key would overflow them, and renumbered when they
    outgrow the batch: each way, every group gets the same sums."""
    models = [f"org/m{i}" for i in range(30)]
    table = pa.concat_tables(
        sample_table.set_column(
            sample_table.schema.get_field_index("model"),
            "model",
            pa.array([name] * sample_table.num_rows),
        )
        for name in models
    )
    order = np.random.default_rng(11).permutation(table.num_rows)
    path = tmp_path / "many.parquet"
    pq.write_table(table.take(order), path, row_group_size=997)
    # 30 models x 39 tasks x 5 metrics outgrow a batch of 613 rows: renumbered
    renumbered, _ = _table_scores(path, batch_rows=613)
    whole, _ = _table_scores(path, batch_rows=1 << 20)
    monkeypatch.setattr(samples_module, "_INT32_MAX", 100)  # widened at once, or later
    pd.testing.assert_frame_equal(_table_scores(path, batch_rows=613)[0], renumbered)
    pd.testing.assert_frame_equal(_table_scores(path, batch_rows=1 << 20)[0], whole)
    assert len(whole) == 30 * 40
    merged = whole.merge(renumbered, on=KEYS, validate="one_to_one")
    assert len(merged) == len(whole)
    np.testing.assert_allclose(merged["raw_score_x"], merged["raw_score_y"], atol=1e-12)  # fmt: skip
    assert (merged["n_samples_x"] == merged["n_samples_y"]).all()


def test_jsonl_and_parquet_samples_give_the_same_scores(
    details_tree: Path, sample_table: pa.Table, tmp_path: Path
) -> None:
    expected, _ = _frames(aggregate_samples_files(_jsonl(details_tree), COLUMNS))
    path = tmp_path / "samples.parquet"
    pq.write_table(sample_table, path)
    actual, ignored = _table_scores(path)
    assert ignored == 0
    merged = expected.merge(actual, on=KEYS, validate="one_to_one")
    assert len(merged) == 40
    np.testing.assert_allclose(
        merged["raw_score_x"], merged["raw_score_y"], rtol=0, atol=1e-15
    )
    np.testing.assert_allclose(
        merged["stderr_x"], merged["stderr_y"], rtol=0, atol=1e-15
    )
    assert (merged["n_samples_x"] == merged["n_samples_y"]).all()
    from_jsonl = lbnorm.run(
        [details_tree], options=RunOptions(engine="memory")
    ).leaderboard
    from_parquet = lbnorm.run([path], options=RunOptions(engine="memory")).leaderboard
    pd.testing.assert_frame_equal(from_jsonl, from_parquet, atol=1e-12)


def test_streaming_in_small_shuffled_row_groups_changes_nothing(
    sample_table: pa.Table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Row groups of 997 rows in random order, batches of 613, partials merged
    every few thousand groups: the same as one pass over one row group."""
    one, many = tmp_path / "one.parquet", tmp_path / "many.parquet"
    pq.write_table(sample_table, one)
    order = np.random.default_rng(7).permutation(sample_table.num_rows)
    pq.write_table(sample_table.take(order), many, row_group_size=997)
    assert pq.ParquetFile(many).num_row_groups > 20
    expected, _ = _table_scores(one)
    monkeypatch.setattr(samples_module, "_COMPACT_ROWS", 2_000)
    actual, _ = _table_scores(many, batch_rows=613)
    merged = expected.merge(actual, on=KEYS, validate="one_to_one")
    assert len(merged) == 40
    np.testing.assert_allclose(
        merged["raw_score_x"], merged["raw_score_y"], rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(
        merged["stderr_x"], merged["stderr_y"], rtol=0, atol=1e-12
    )
    assert (merged["n_samples_x"] == merged["n_samples_y"]).all()


def _write_values(
    path: Path, values: np.ndarray, groups: np.ndarray, rows: int
) -> None:
    tasks = np.array(["leaderboard_gpqa_main", "leaderboard_gpqa_diamond"])
    size = len(values)
    table = pa.table(
        {
            "model": [f"m{g}" for g in groups // 2],
            "task": tasks[groups % 2],
            "metric": ["acc_norm,none"] * size,
            "doc_id": np.arange(size),
            "value": values,
        }
    )
    pq.write_table(table, path, row_group_size=max(rows, 1))


@given(
    values=st.lists(
        sample_values,
        min_size=2,
        max_size=400,
    ),
    seed=st.integers(0, 2**32 - 1),
    offset=st.sampled_from([0.0, 1e6]),
)
def test_mean_and_stderr_match_numpy(
    values: list[float],
    seed: int,
    offset: float,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Random 0/1 and float values in up to 4 groups, random row groups: the
    harness's mean and std(ddof=1)/sqrt(n) per group; an offset of 1e6 (where
    a sum of squares loses 12 digits) changes nothing."""
    rng = np.random.default_rng(seed)
    array = np.array(values) + offset
    groups = rng.integers(0, 4, array.size)
    path = tmp_path_factory.mktemp("prop") / "samples.parquet"
    _write_values(path, array, groups, int(rng.integers(1, array.size + 1)))
    scores, _ = _table_scores(path, batch_rows=int(rng.integers(1, 64)))
    for group in np.unique(groups):
        part = array[groups == group]
        subtask = "main" if group % 2 == 0 else "diamond"
        row = scores[
            (scores["model"] == f"m{group // 2}") & (scores["subtask"] == subtask)
        ]
        assert row["n_samples"].item() == part.size
        assert row["raw_score"].item() == pytest.approx(
            part.mean(), rel=1e-12, abs=1e-12
        )
        if part.size > 1:
            expected = part.std(ddof=1) / math.sqrt(part.size)
            # the data's own precision: 1e6 + x is stored to ~1.2e-10
            precision = 1e-12 + offset * 1e-15
            assert row["stderr"].item() == pytest.approx(
                expected, rel=1e-9, abs=precision
            )
        else:  # the harness writes "N/A" for one document
            assert math.isnan(row["stderr"].item())


def test_stderr_keeps_its_digits_far_from_zero(tmp_path: Path) -> None:
    """1e8 + 0/1 values over 300 row groups: sum-of-squares arithmetic would
    give garbage (it cancels 16 digits); shifted partials give the exact value."""
    values = 1e8 + np.tile([0.0, 1.0, 1.0, 0.0, 1.0], 600)
    path = tmp_path / "far.parquet"
    _write_values(path, values, np.zeros(values.size, dtype=np.int64), 10)
    scores, _ = _table_scores(path, batch_rows=7)
    n, k = values.size, 1800
    exact = math.sqrt(k * (n - k) / (n * (n - 1))) / math.sqrt(n)
    assert scores["stderr"].item() == pytest.approx(exact, rel=1e-12)
    assert scores["raw_score"].item() == 1e8 + 0.6


def _one_file(folder: Path, lines: list[str], *, stamp: str = STAMP) -> Path:
    path = folder / f"samples_leaderboard_gpqa_main_{stamp}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


GOOD = '{"doc_id": 0, "filter": "none", "acc_norm": 1.0}'


@pytest.mark.parametrize(
    ("lines", "match"),
    [
        (
            [GOOD, GOOD.replace("0,", "1,"), "{not json"],
            r"line 3 is not valid JSON.*\nHint: a harness samples file",
        ),
        ([GOOD, "[1, 2]"], r"line 2 is \[1, 2\], not a JSON object.*\nHint"),
        (
            [GOOD, '{"doc_id": 1, "filter": "none", "acc": 1.0}'],
            r"line 2: 'acc_norm' is missing.\nHint: check the suite's metric name",
        ),
        (
            [GOOD, '{"doc_id": 1, "filter": "none", "acc_norm": "yes"}'],
            r"line 2: 'acc_norm' is 'yes', not a finite number.*\nHint",
        ),
        (
            [GOOD, '{"doc_id": 1, "filter": "none", "acc_norm": null}'],
            r"line 2: 'acc_norm' is None.*\nHint",
        ),
        (
            [GOOD, GOOD],
            r"line 2: doc_id 0 for filter 'none' repeats line 1.\nHint: keep one line",
        ),
        (
            [GOOD, '{"doc_id": 1, "filter": "none", "acc_norm": [1.0]}'],
            r"'acc_norm' is a list in some lines.*\nHint",
        ),
        (
            ['{"doc_id": 0, "filter": "none", "acc_norm": []}'],
            r"'acc_norm' lists are empty in every line.\nHint: a harness samples file",
        ),
        (
            [GOOD.replace('"none"', '"strict"')],
            r"no documents with filter 'none'.*the task has no documents.\nHint",
        ),
        ([""], r"no documents .*\nHint: the file is empty"),
    ],
)
def test_bad_sample_files(tmp_path: Path, lines: list[str], match: str) -> None:
    path = _one_file(tmp_path / "org" / "model", lines)
    with pytest.raises(InputError, match=match) as caught:
        aggregate_samples_files([path], COLUMNS)
    assert str(path) in str(caught.value)


def test_misnamed_sample_file(tmp_path: Path) -> None:
    path = tmp_path / "samples_gpqa.jsonl"
    path.write_text(GOOD + "\n")
    with pytest.raises(
        InputError, match=r"not named samples_<task>_<timestamp>.jsonl.\nHint"
    ):
        aggregate_samples_files([path], COLUMNS)


def test_tasks_outside_the_suite_are_counted_not_read(tmp_path: Path) -> None:
    folder = tmp_path / "org" / "model"
    kept = _one_file(folder, [GOOD])
    other = folder / f"samples_leaderboard_arc_challenge_{STAMP}.jsonl"
    other.write_text("not even JSON\n")
    scores, catalog = _frames(aggregate_samples_files([kept, other], COLUMNS))
    assert scores["model"].tolist() == ["org/model"]
    assert catalog["n_ignored"].tolist() == [0, 1]


def _table_file(tmp_path: Path, **columns: object) -> Path:
    base: dict[str, object] = {
        "model": ["a/b", "a/b"],
        "task": ["leaderboard_gpqa_main"] * 2,
        "metric": ["acc_norm,none"] * 2,
        "doc_id": [0, 1],
        "value": [1.0, 0.0],
    }
    base.update(columns)
    path = tmp_path / "samples.parquet"
    pq.write_table(pa.table({k: v for k, v in base.items() if v is not None}), path)
    return path


@pytest.mark.parametrize(
    ("columns", "match"),
    [
        (
            {"doc_id": None},
            r"without column\(s\) doc_id.*\nHint: a sample table has the columns of lbnorm.core.schemas.SAMPLES",
        ),
        (
            {"value": ["1", "0"]},
            r"column 'value' has type string, expected double.\nHint",
        ),
        (
            {"value": [1.0, None]},
            r"value is null in row\(s\) 2.\nHint: every sample row",
        ),
        ({"value": [math.inf, 0.0]}, r"value is not finite in row\(s\) 1.\nHint"),
        ({"model": ["a/b", None]}, r"model is null in row\(s\) 2.\nHint"),
        (
            {"item": [0, None]},
            r"mixes rows with and without 'item'.\nHint: give every row",
        ),
    ],
)
def test_bad_sample_tables(
    tmp_path: Path, columns: dict[str, object], match: str
) -> None:
    path = _table_file(tmp_path, **columns)
    with pytest.raises(InputError, match=match) as caught:
        aggregate_samples_table(path, COLUMNS)
    assert str(path) in str(caught.value)


def test_the_first_bad_row_is_named_when_two_batches_have_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value checked on the summing thread (batch 1) before a key checked on
    the reading thread (batch 2): the error names the earlier row."""
    path = _table_file(
        tmp_path,
        model=["a/b", "a/b", None, "a/b"],
        doc_id=[0, 1, 2, 3],
        task=["leaderboard_gpqa_main"] * 4,
        metric=["acc_norm,none"] * 4,
        value=[1.0, math.nan, 0.0, 1.0],
    )
    monkeypatch.setattr(samples_module, "_BATCH_ROWS", 2)
    before = set(threading.enumerate())
    with pytest.raises(InputError, match=r"value is not finite in row\(s\) 2.\nHint"):
        aggregate_samples_table(path, COLUMNS)
    started = set(threading.enumerate()) - before
    assert not [t for t in started if t.name.startswith("lbnorm-batch")]  # stopped


def test_list_metric_rows_count_documents_and_have_no_stderr(tmp_path: Path) -> None:
    path = _table_file(
        tmp_path,
        model=["a/b"] * 3,
        task=["leaderboard_ifeval"] * 3,
        metric=["inst_level_strict_acc,none"] * 3,
        doc_id=[0, 0, 1],
        item=[0, 1, 0],
        value=[True, False, True],
    )
    scores, _ = _table_scores(path)
    assert scores[["raw_score", "n_samples"]].to_numpy().tolist() == [[2 / 3, 2]]
    assert math.isnan(scores["stderr"].item())


def test_a_document_with_an_empty_list_counts_as_no_sample(tmp_path: Path) -> None:
    """A document whose list-valued metric is [] adds no item, so no document:
    ``n_samples`` counts the documents the mean is over, as a sample table
    (which cannot hold such a document) counts them; the line's other metrics
    keep it."""
    lists = [[True, False], [], [True]]
    path = tmp_path / "org" / "model" / f"samples_leaderboard_ifeval_{STAMP}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(
        "".join(
            json.dumps({"doc_id": doc, "filter": "none", "inst_level_strict_acc": items,
                        "prompt_level_strict_acc": doc % 2}) + "\n"
            for doc, items in enumerate(lists)
        )
    )  # fmt: skip
    scores, _ = _frames(aggregate_samples_files([path], COLUMNS))
    counts = dict(zip(scores["metric"], scores["n_samples"], strict=True))
    assert counts == {
        "inst_level_strict_acc,none": 2,
        "prompt_level_strict_acc,none": 3,
    }
    items = [(doc, i, v) for doc, got in enumerate(lists) for i, v in enumerate(got)]
    table = _table_file(
        tmp_path,
        model=["org/model"] * 3,
        task=["leaderboard_ifeval"] * 3,
        metric=["inst_level_strict_acc,none"] * 3,
        doc_id=[d for d, _, _ in items],
        item=[i for _, i, _ in items],
        value=[float(v) for _, _, v in items],
    )
    from_table, _ = _table_scores(table)
    listed = scores[scores["metric"] == "inst_level_strict_acc,none"]
    assert from_table[["raw_score", "n_samples"]].to_numpy().tolist() == [[2 / 3, 2]]
    assert listed[["raw_score", "n_samples"]].to_numpy().tolist() == [[2 / 3, 2]]


def test_sample_table_is_found_by_read_inputs(tmp_path: Path) -> None:
    path = _table_file(tmp_path, metric=["acc_norm"] * 2)  # metric without filter
    with pytest.raises(InputError, match=r"no scores for suite 'openllm-v2'.*\nHint"):
        lbnorm.run([path])
    result = lbnorm.run([_table_file(tmp_path)], options=RunOptions(missing="partial"))
    assert result.files["format"].tolist() == ["sample-table"]
    assert result.subtasks["raw_score"].tolist() == [0.5]


def test_damaged_sample_table(tmp_path: Path) -> None:
    path = _table_file(tmp_path)
    path.write_bytes(path.read_bytes()[:-40])  # the footer cut off
    with pytest.raises(InputError, match=r"cannot read as Parquet.*\nHint: check that"):
        aggregate_samples_table(path, COLUMNS)


def test_single_sample_file_is_an_input(fixtures: Path) -> None:
    folder = fixtures / "samples" / "meta-llama" / "Meta-Llama-3-8B-Instruct"
    path = folder / f"samples_leaderboard_musr_murder_mysteries_{STAMP}.jsonl"
    result = lbnorm.run([path], options=RunOptions(missing="partial", engine="memory"))
    assert result.files["format"].tolist() == ["lm-eval-samples"]
    assert result.subtasks["raw_score"].tolist() == [0.5]
    assert result.subtasks["n_samples"].tolist() == [250]
