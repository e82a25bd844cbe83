"""Fuzzing every input reader: a correct result or lbnorm's own error, never another.

Each reader (lm-evaluation-harness results JSON, CSV, JSONL, Parquet) gets arbitrary
bytes and structurally mutated valid files. When lbnorm accepts a mutated file, the
result must be right: every score it read is the number at its place in the file,
and every output is in range.

The default run uses the hypothesis profile from ``conftest.py`` (25 examples per
test, 200 with ``CI`` set). For a long session::

    LBNORM_FUZZ_EXAMPLES=20000 python -m pytest tests/test_fuzz.py -p no:cacheprovider -x

Failures are stored in ``.hypothesis/`` and replayed first on the next run.
"""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_values

from lbnorm import LbnormError, Result, load_suite, run
from lbnorm.core.errors import InputError
from lbnorm.core.options import RunOptions
from lbnorm.readers.harness import parse_results_file

FIXTURES = Path(__file__).parent / "fixtures"
SUITE = load_suite("openllm-v2")
SUBTASKS = SUITE.subtask_table()
PAIRS = list(zip(SUBTASKS["task"], SUBTASKS["metric"], strict=True))
GOLDEN = [
    json.loads(path.read_text())
    for path in sorted((FIXTURES / "golden").glob("*.json"))
]
SEED_CSV = (FIXTURES / "tables" / "seed_examples.csv").read_text()
SEED = pd.read_csv(FIXTURES / "tables" / "seed_examples.csv", dtype={"revision": str})

_EXAMPLES = os.environ.get("LBNORM_FUZZ_EXAMPLES")
fuzz = settings(
    *([] if _EXAMPLES is None else [settings(max_examples=int(_EXAMPLES))]),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    deadline=None,
)


@st.composite
def mutated_documents(draw: st.DrawFn) -> Any:
    """A golden results document with one to five structural mutations."""
    document = copy.deepcopy(draw(st.sampled_from(GOLDEN)))
    for _ in range(draw(st.integers(1, 5))):
        # Walk down from the top, or from 'results' (where the scores are), at random.
        node: Any = (
            document["results"]
            if isinstance(document.get("results"), dict) and draw(st.booleans())
            else document
        )
        while isinstance(node, dict | list) and node and draw(st.booleans()):
            key = draw(
                st.sampled_from(
                    sorted(node) if isinstance(node, dict) else range(len(node))
                )
            )
            if not isinstance(node[key], dict | list):
                break
            node = node[key]
        if not isinstance(node, dict | list) or not node:
            continue
        key = draw(
            st.sampled_from(
                sorted(node) if isinstance(node, dict) else range(len(node))
            )
        )
        operation = draw(
            st.sampled_from(["replace", "delete", "insert", "stringify", "wrap"])
        )
        if operation == "replace":
            node[key] = draw(json_values)
        elif operation == "delete":
            del node[key]
        elif operation == "insert" and isinstance(node, dict):
            node[draw(st.text(max_size=30))] = draw(json_values)
        elif operation == "stringify":
            node[key] = str(node[key])
        elif operation == "wrap":
            node[key] = [node[key]]
    return document


def _write(folder: Path, name: str, data: bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def _run(paths: list[Path], out: Path | None = None, **options: Any) -> Result | None:
    """Run lbnorm; None when it refused the input with its own error."""
    try:
        return run(paths, out=out, options=RunOptions(missing="partial", **options))
    except LbnormError as error:
        message = str(error)
    assert "Hint: " in message, message
    return None


def _check_in_range(result: Result) -> None:
    assert result.subtasks["raw_score"].between(0.0, 1.0).all()
    assert result.subtasks["normalized_score"].between(0.0, 100.0).all()
    assert result.benchmarks["normalized_score"].dropna().between(0.0, 100.0).all()
    assert result.leaderboard["average"].dropna().between(0.0, 100.0).all()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@fuzz
@given(data=st.binary(max_size=4000))
def test_results_reader_on_arbitrary_bytes(data: bytes) -> None:
    path = Path("org/model/results_2025-01-01T00-00-00.json")
    try:
        parse_results_file(path, data, PAIRS)
    except InputError as error:
        message = str(error)
    else:
        return
    assert "\nHint: " in message, message


@fuzz
@given(
    document=mutated_documents(),
    corrupt=st.lists(
        st.tuples(st.integers(0, 5000), st.binary(max_size=3)), max_size=2
    ),
)
def test_results_reader_on_mutated_files(
    folder: Path, document: Any, corrupt: list[tuple[int, bytes]]
) -> None:
    data = json.dumps(
        document, indent=1
    ).encode()  # NaN and Infinity as Python writes them
    for offset, replacement in corrupt:  # and, sometimes, a few bytes overwritten
        data = data[:offset] + replacement + data[offset + len(replacement) :]
    path = _write(
        folder, "tree/org/model/results_2025-01-01T00-00-00.000000.json", data
    )
    result = _run([folder / "tree"], out=folder / "out")
    if result is None:
        return
    _check_in_range(result)
    if not corrupt:  # every score read is the number at its place in the file
        subtasks = result.subtasks.merge(
            SUBTASKS, on=["benchmark", "subtask"], validate="one_to_one"
        )
        for task, metric, score in zip(
            subtasks["task"], subtasks["metric_y"], subtasks["raw_score"], strict=True
        ):
            assert document["results"][task][metric] == score
    assert pq.read_table(folder / "out" / "subtasks.parquet").num_rows == len(
        result.subtasks
    )
    assert path.exists()


@fuzz
@given(
    data=st.binary(max_size=2000), suffix=st.sampled_from(["csv", "jsonl", "parquet"])
)
def test_table_readers_on_arbitrary_bytes(
    folder: Path, data: bytes, suffix: str
) -> None:
    path = _write(folder, f"bytes.{suffix}", data)
    result = _run([path])
    if result is not None:
        _check_in_range(result)


cells = st.text(max_size=12) | st.sampled_from(
    ["N/A", "nan", "inf", "-1", "1e999", "2.5", "", '"', ",", "\n", "true"]
)


@fuzz
@given(
    edits=st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 9), cells), min_size=1, max_size=5
    ),
    drop=st.none() | st.integers(0, 9),
    duplicate=st.booleans(),
)
def test_csv_reader_on_mutated_files(
    folder: Path, edits: list[tuple[int, int, str]], drop: int | None, duplicate: bool
) -> None:
    rows = [
        line.split(",")
        for line in SEED_CSV.replace('"acc_norm,none"', "acc_norm").splitlines()
    ]
    for row, column, value in edits:
        rows[row][column] = value
    if drop is not None:
        rows = [row[:drop] + row[drop + 1 :] for row in rows]
    if duplicate:
        rows.append(rows[1])
    path = _write(
        folder, "mutated.csv", "\n".join(",".join(row) for row in rows).encode() + b"\n"
    )
    result = _run([path])
    if result is not None:
        _check_in_range(result)


@fuzz
@given(
    changes=st.lists(
        st.tuples(
            st.integers(0, 5),
            st.sampled_from([*SEED.columns, "extra"]),
            json_values | st.just("<delete>"),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_jsonl_reader_on_mutated_files(
    folder: Path, changes: list[tuple[int, str, Any]]
) -> None:
    records = [
        {str(key): value for key, value in row.items()}
        for row in SEED.to_dict("records")
    ]
    for row, column, value in changes:
        if value == "<delete>":
            records[row].pop(column, None)
        else:
            records[row][column] = value
    lines = [json.dumps(record, default=str) for record in records]
    path = _write(folder, "mutated.jsonl", ("\n".join(lines) + "\n").encode())
    result = _run([path], extra_columns="drop")
    if result is None:
        return
    _check_in_range(result)
    subtasks = result.subtasks.set_index(["model", "subtask"])["raw_score"].to_dict()
    for record in records:  # every accepted score is the number in the file
        key = (record.get("model"), record.get("subtask"))
        if key in subtasks:
            assert math.isclose(subtasks[key], float(record["raw_score"]))


arrow_columns = st.sampled_from(
    [
        pa.array(["a", "b", "c", "d", "e", "f"]),
        pa.array([1, 2, 3, 4, 5, 6]),
        pa.array([0.1, 0.2, None, 0.4, 0.5, 0.6]),
        pa.array([True, False, True, None, False, True]),
        pa.array([b"x", b"y", b"z", b"w", b"v", b"u"]),
        pa.array([[1], [], None, [2, 3], [4], [5]]),
        pa.array([None] * 6, type=pa.null()),
        pa.array(["a", "b", "a", "b", "a", "b"]).dictionary_encode(),
        pa.array([1.5, float("nan"), float("inf"), -1.0, 100.0, 0.0]),
        pa.array([0, 1, 2, 3, 4, 2**62]),
        pa.array(pd.to_datetime(["2024-01-01"] * 6)),
    ]
)


@fuzz
@given(
    replaced=st.dictionaries(
        st.sampled_from(list(SEED.columns)), arrow_columns, max_size=3
    ),
    dropped=st.sets(st.sampled_from(list(SEED.columns)), max_size=2),
)
def test_parquet_reader_on_mutated_files(
    folder: Path, replaced: dict[str, pa.Array], dropped: set[str]
) -> None:
    table = pa.Table.from_pandas(SEED, preserve_index=False)
    for name, column in replaced.items():
        table = table.set_column(table.column_names.index(name), name, column)
    table = table.drop_columns(sorted(dropped))
    path = folder / "mutated.parquet"
    pq.write_table(table, path)
    result = _run([path])
    if result is not None:
        _check_in_range(result)


ALPACAEVAL = FIXTURES / "alpacaeval" / "results" / "model-a"
ALPACAEVAL_FILES = {
    "annotations": "weighted_alpaca_eval_gpt4_turbo/annotations.json",
    "outputs": "model_outputs.json",
}


def _alpacaeval_tree(folder: Path, name: str, data: bytes) -> Path:
    """A one-model AlpacaEval layout (the fixture's model-a) with one file replaced."""
    root = folder / "alpacaeval"
    for path in ALPACAEVAL_FILES.values():
        _write(root / "model-a", path, (ALPACAEVAL / path).read_bytes())
    _write(root / "model-a", ALPACAEVAL_FILES[name], data)
    return root


def _alpacaeval_run(root: Path) -> Result | None:
    """Run the alpacaeval-2 suite; None when lbnorm refused the input with its own error."""
    try:
        return run([root], suite="alpacaeval-2")
    except LbnormError as error:
        message = str(error)
    assert "\nHint: " in message, message
    return None


@fuzz
@given(data=st.binary(max_size=4000), name=st.sampled_from(sorted(ALPACAEVAL_FILES)))
def test_alpacaeval_reader_on_arbitrary_bytes(
    folder: Path, data: bytes, name: str
) -> None:
    _alpacaeval_run(_alpacaeval_tree(folder, name, data))


@fuzz
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, 5),
            st.sampled_from(["preference", "generator_2", "instruction"]),
            json_values
            | st.sampled_from([0, 1, 2, 1.5, 2.5, 0.5, None, math.nan, math.inf]),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_alpacaeval_reader_on_mutated_annotations(
    folder: Path, edits: list[tuple[int, str, Any]]
) -> None:
    """Accepted only as AlpacaEval's own arithmetic reads it: the win rate of the values."""
    entries = json.loads((ALPACAEVAL / ALPACAEVAL_FILES["annotations"]).read_text())
    for index, key, value in edits:
        entries[index][key] = value
    root = _alpacaeval_tree(
        folder, "annotations", json.dumps(entries).encode()
    )  # NaN and Infinity as Python writes them
    result = _alpacaeval_run(root)
    if result is None:
        return
    preferences = [entry["preference"] for entry in entries]
    assert all(
        p is None or (isinstance(p, int | float) and not isinstance(p, bool))
        for p in preferences
    )
    assert all(isinstance(entry["generator_2"], str) for entry in entries)
    kept = [
        1.5 if p == 0 else p for p in preferences if p is not None and math.isfinite(p)
    ]
    assert all(1 <= p <= 2 for p in kept)
    row = result.leaderboard.iloc[0]
    assert row["n_total"] == len(kept)
    assert row["win_rate"] == pytest.approx(
        sum(p - 1 for p in kept) / len(kept) * 100, abs=1e-9
    )
