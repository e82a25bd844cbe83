"""Determinism: the same inputs and suite give byte-identical Parquet, whatever the order.

Input order, row order, process, hash seed and clock must not reach the data files;
the creation time lives in ``manifest.json`` alone and is settable with
``SOURCE_DATE_EPOCH``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import run
from lbnorm.core.options import RunOptions
from lbnorm.output.writer import OUTPUT_FILES

FIXTURES = Path(__file__).parent / "fixtures"
CREATED_AT = "2023-11-14T22:13:20+00:00"  # SOURCE_DATE_EPOCH=1700000000


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Results files (two variants superseding one another), a CSV and a JSONL table."""
    folder = tmp_path_factory.mktemp("inputs")
    seed = pd.read_csv(
        FIXTURES / "tables" / "seed_examples.csv", dtype={"revision": str}
    )
    seed.assign(model=seed["model"].str.replace("seed/", "jsonl/")).to_json(
        folder / "more.jsonl", orient="records", lines=True
    )
    return [
        *sorted((FIXTURES / "golden").glob("*.json")),
        *sorted(
            (FIXTURES / "full_structure").rglob("results_*.json")
        ),  # newer runs of two golden models
        FIXTURES / "tables" / "seed_examples.csv",
        folder / "more.jsonl",
    ]


@pytest.fixture(scope="module")
def expected(
    inputs: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    out = tmp_path_factory.mktemp("expected") / "out"
    run(inputs, out=out, created_at=CREATED_AT, options=RunOptions(missing="partial"))
    return _digests(out)


def test_any_input_order_gives_identical_bytes(
    inputs: list[Path], expected: dict[str, str], tmp_path: Path
) -> None:
    orders = [list(reversed(inputs))]
    for seed in range(4):
        shuffled = list(inputs)
        random.Random(seed).shuffle(shuffled)
        orders.append(shuffled)
    for index, order in enumerate(orders):
        out = tmp_path / f"out-{index}"
        run(
            order, out=out, created_at=CREATED_AT, options=RunOptions(missing="partial")
        )
        assert _digests(out) == expected  # Parquet files and manifest alike


def test_a_directory_or_its_files_give_identical_bytes(tmp_path: Path) -> None:
    tree = FIXTURES / "full_structure"
    files = sorted(tree.rglob("results_*.json"), reverse=True)
    run([tree], out=tmp_path / "tree", created_at=CREATED_AT)
    run(files, out=tmp_path / "files", created_at=CREATED_AT)
    assert _digests(tmp_path / "tree") == _digests(tmp_path / "files")


def test_other_processes_and_hash_seeds_give_identical_bytes(
    inputs: list[Path], expected: dict[str, str], tmp_path: Path
) -> None:
    shuffled = list(inputs)
    random.Random(7).shuffle(shuffled)
    for hash_seed in ("1", "2"):
        out = tmp_path / f"out-{hash_seed}"
        env = {
            **os.environ,
            "PYTHONHASHSEED": hash_seed,
            "SOURCE_DATE_EPOCH": "1700000000",
        }
        process = subprocess.run(
            [
                sys.executable,
                "-m",
                "lbnorm",
                "run",
                *map(str, shuffled),
                "--out",
                str(out),
                "--missing",
                "partial",
                "--quiet",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert process.returncode == 0, process.stderr
        assert _digests(out) == expected
        shuffled.reverse()


def test_creation_time_is_kept_out_of_the_data(
    inputs: list[Path],
    expected: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    run(
        inputs, out=tmp_path / "now", options=RunOptions(missing="partial")
    )  # the clock's time
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "946684800")
    run(inputs, out=tmp_path / "y2k", options=RunOptions(missing="partial"))
    for folder in ("now", "y2k"):
        digests = _digests(tmp_path / folder)
        assert {name: digests[name] for name in OUTPUT_FILES} == {
            name: expected[name] for name in OUTPUT_FILES
        }
    manifest = json.loads((tmp_path / "y2k" / "manifest.json").read_text())
    assert manifest["created_at"] == "2000-01-01T00:00:00+00:00"
    for name in OUTPUT_FILES:
        metadata = pq.read_metadata(tmp_path / "now" / name).metadata
        # ARROW:schema carries the column types and docs; no time in either
        assert sorted(key for key in metadata if key != b"ARROW:schema") == [
            b"lbnorm.inputs",
            b"lbnorm.metadata_table",
            b"lbnorm.missing",
            b"lbnorm.suite",
            b"lbnorm.suite_modified",
            b"lbnorm.suite_sha256",
            b"lbnorm.suite_source",
            b"lbnorm.table",
            b"lbnorm.version",
            b"pandas",  # integer columns read as nullable integers
        ]


def test_row_order_within_a_file_does_not_change_the_data(tmp_path: Path) -> None:
    seed = pd.read_csv(
        FIXTURES / "tables" / "seed_examples.csv", dtype={"revision": str}
    )
    path = tmp_path / "scores.csv"
    tables = []
    for seed_value in range(3):
        seed.sample(frac=1.0, random_state=seed_value).to_csv(path, index=False)
        run(
            [path],
            out=tmp_path / "out",
            created_at=CREATED_AT,
            options=RunOptions(missing="partial"),
        )
        tables.append(
            {name: pq.read_table(tmp_path / "out" / name) for name in OUTPUT_FILES}
        )
    keys = [(name, "ascending") for name in ("model", "benchmark", "subtask")]
    for other in tables[1:]:
        for name in OUTPUT_FILES:  # the data; the provenance records each file's hash
            if name == "subtasks.parquet":  # a per-row map of the input, in its order
                assert _sorted(other[name], keys).equals(_sorted(tables[0][name], keys))
            else:
                assert other[name].equals(tables[0][name]), name


def _sorted(table: pa.Table, keys: list[tuple[str, str]]) -> pa.Table:
    """The table's rows sorted by `keys`, its text as plain strings."""
    plain = table.cast(
        pa.schema(
            [
                pa.field(f.name, f.type.value_type)
                if pa.types.is_dictionary(f.type)
                else f
                for f in table.schema
            ]
        )
    )
    return plain.sort_by(keys)
