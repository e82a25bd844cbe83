"""Per-sample files: the harness's own aggregation, checked against a real results file."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import lbnorm
from lbnorm.errors import InputError
from lbnorm.readers.samples import (
    _stderr,
    aggregate_samples_files,
    aggregate_samples_table,
)
from lbnorm.suites import load_suite

SUITE = load_suite("openllm-v2")
SUBTASKS = SUITE.subtask_table()
STAMP = "2024-06-16T14-11-30.000000"


@pytest.fixture(scope="module")
def results_file(full_structure_dir: Path) -> Path:
    return (
        full_structure_dir
        / "meta-llama"
        / "Meta-Llama-3-8B-Instruct"
        / f"results_{STAMP}.json"
    )


def _documents(score: float, n: int) -> list[int]:
    """n per-document 0/1 values whose mean is exactly `score`."""
    k = round(score * n)
    assert k / n == score, (score, n)
    return [1] * k + [0] * (n - k)


def _items(score: float, documents: int) -> list[list[bool]]:
    """Per-document lists of instruction results whose flattened mean is `score`."""
    for total in range(documents, 3 * documents):
        k = round(score * total)
        if k / total == score:
            flat = [True] * k + [False] * (total - k)
            sizes = [1] * documents
            for index in range(total - documents):
                sizes[index % documents] += 1
            starts = np.cumsum([0, *sizes])
            return [flat[a:b] for a, b in itertools.pairwise(starts)]
    raise AssertionError(score)


@pytest.fixture(scope="module")
def details_tree(results_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A details folder as the harness writes it: the results file and its samples."""
    root = tmp_path_factory.mktemp("details")
    folder = root / "meta-llama" / "Meta-Llama-3-8B-Instruct"
    folder.mkdir(parents=True)
    shutil.copy(results_file, folder)
    document = json.loads(results_file.read_text())
    for task in SUBTASKS["task"].unique():
        entry = document["results"][task]
        n = document["n-samples"][task]["original"]
        metrics = SUBTASKS.loc[SUBTASKS["task"] == task, "metric"]
        columns: dict[str, list[object]] = {}
        for metric in metrics:
            name = metric.split(",")[0]
            if name.startswith("inst_level"):
                columns[name] = list(_items(entry[metric], n))
            elif name.startswith("prompt_level"):
                columns[name] = [bool(v) for v in _documents(entry[metric], n)]
            else:
                columns[name] = [float(v) for v in _documents(entry[metric], n)]
        lines = [
            json.dumps(
                {
                    "doc_id": doc,
                    "doc": {"question": f"q{doc}", "choices": ["a", "b"]},
                    "target": "a",
                    "arguments": [["prompt", " a"]],
                    "resps": [[["-1.5", False]]],
                    "filtered_resps": [["-1.5", False]],
                    "filter": "none",
                    "metrics": [metric.split(",")[0] for metric in metrics],
                    "doc_hash": "0" * 64,
                    **{name: values[doc] for name, values in columns.items()},
                }
            )
            for doc in range(n)
        ]
        (folder / f"samples_{task}_{STAMP}.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_samples_reproduce_the_results_file(
    details_tree: Path, results_file: Path
) -> None:
    """Mean and mean_stderr (ddof=1) over the samples give the file's own numbers."""
    document = json.loads(results_file.read_text())
    files = sorted(details_tree.rglob("samples_*.jsonl"))
    scores, catalog = aggregate_samples_files(files, SUBTASKS)
    assert len(scores) == len(SUBTASKS) == 40
    assert catalog["rows"].sum() == 40
    for row in scores.to_dict("records"):
        task, metric = str(row["_row"]).split("/")
        entry = document["results"][task]
        assert row["raw_score"] == pytest.approx(entry[metric], abs=1e-12)
        stderr = entry[metric.replace(",", "_stderr,")]
        if stderr == "N/A":  # the harness gives list-valued metrics no stderr
            assert row["stderr"] is None
        else:
            assert row["stderr"] == pytest.approx(stderr, abs=1e-9)
        assert row["n_samples"] == document["n-samples"][task]["original"]
    assert set(scores["model"]) == {"meta-llama/Meta-Llama-3-8B-Instruct"}


def test_run_on_samples_equals_run_on_results(
    details_tree: Path, results_file: Path
) -> None:
    from_samples = lbnorm.run([details_tree], subtasks=False, engine="memory")
    from_results = lbnorm.run([results_file], subtasks=False, engine="memory")
    pd.testing.assert_frame_equal(
        from_results.leaderboard, from_samples.leaderboard, rtol=0.0, atol=1e-12
    )
    assert from_samples.files["format"].unique().tolist() == ["lm-eval-samples"]


def test_sample_table_equals_sample_files(details_tree: Path, tmp_path: Path) -> None:
    """The Parquet form, streamed in small row groups, aggregates the same."""
    files = sorted(details_tree.rglob("samples_*.jsonl"))
    expected, _ = aggregate_samples_files(files, SUBTASKS)
    rows = []
    for path in files:
        task = path.name.removeprefix("samples_").removesuffix(f"_{STAMP}.jsonl")
        for metric in SUBTASKS.loc[SUBTASKS["task"] == task, "metric"]:
            name = metric.split(",")[0]
            for line in path.read_text().splitlines():
                value = json.loads(line)[name]
                for item in value if isinstance(value, list) else [value]:
                    rows.append((task, metric, json.loads(line)["doc_id"], float(item)))
    table = pa.table(
        {
            "model": ["meta-llama/Meta-Llama-3-8B-Instruct"] * len(rows),
            "precision": ["bfloat16"] * len(rows),
            "task": [r[0] for r in rows],
            "metric": [r[1] for r in rows],
            "doc_id": [r[2] for r in rows],
            "value": [r[3] for r in rows],
        }
    )
    path = tmp_path / "samples.parquet"
    pq.write_table(table, path, row_group_size=1_000)
    actual = aggregate_samples_table(path, SUBTASKS)
    merged = expected.merge(actual, on=["benchmark", "subtask"], validate="one_to_one")
    assert len(merged) == 40
    np.testing.assert_allclose(merged["raw_score_x"], merged["raw_score_y"], atol=1e-12)
    scalar = merged["stderr_x"].notna()
    np.testing.assert_allclose(
        merged.loc[scalar, "stderr_x"].astype(float),
        merged.loc[scalar, "stderr_y"],
        atol=1e-12,
    )
    result = lbnorm.run([path], subtasks=False, engine="memory", missing="partial")
    assert result.files["format"].tolist() == ["sample-table"]
    assert len(result.leaderboard) == 1


@given(
    st.lists(
        st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0)),
        min_size=2,
        max_size=300,
    )
)
def test_stderr_is_the_sample_deviation_over_root_n(values: list[float]) -> None:
    array = np.array(values)
    expected = np.std(array, ddof=1) / np.sqrt(array.size)
    actual = _stderr(array.size, array.sum(), array @ array)
    assert actual == pytest.approx(expected, abs=1e-9)


def _one_file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "org" / "model" / f"samples_leaderboard_gpqa_main_{STAMP}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_line_that_is_not_json(tmp_path: Path) -> None:
    path = _one_file(tmp_path, ["{not json"])
    with pytest.raises(InputError, match=r"line 1 is not a JSON object.*\n.*Hint"):
        aggregate_samples_files([path], SUBTASKS)


def test_missing_metric(tmp_path: Path) -> None:
    path = _one_file(tmp_path, ['{"doc_id": 0, "filter": "none", "acc": 1.0}'])
    with pytest.raises(InputError, match=r"no 'acc_norm'.*\n.*Hint: check the suite"):
        aggregate_samples_files([path], SUBTASKS)


def test_metric_of_changing_type(tmp_path: Path) -> None:
    path = _one_file(
        tmp_path,
        [
            '{"doc_id": 0, "filter": "none", "acc_norm": 1.0}',
            '{"doc_id": 1, "filter": "none", "acc_norm": "yes"}',
        ],
    )
    with pytest.raises(InputError, match=r"cannot read metric 'acc_norm'.*\n.*Hint"):
        aggregate_samples_files([path], SUBTASKS)


def test_model_from_folders_without_results_file(tmp_path: Path) -> None:
    path = _one_file(tmp_path, ['{"doc_id": 0, "filter": "none", "acc_norm": 1.0}'] * 1)
    scores, _ = aggregate_samples_files([path], SUBTASKS)
    assert scores["model"].tolist() == ["org/model"]
    assert scores["raw_score"].tolist() == [1.0]
