"""AlpacaEval's results layout as an input: the committed fixture, bad files, the real board.

The real board's check reads ``../shared/foreign`` in place (``alpaca2_*.csv``, see
``SOURCES.md`` there; ``LBNORM_FOREIGN`` points elsewhere) and is skipped without it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import runpy
import shutil
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from test_instances import alpacaeval_head2head

from lbnorm import _runtime
from lbnorm.cli import main
from lbnorm.core.errors import Cancelled, InputError
from lbnorm.core.options import RunOptions
from lbnorm.readers.alpacaeval import find_layout, read_alpacaeval
from lbnorm.readers.catalog import Inputs, read_files
from lbnorm.readers.harness import subtask_columns
from lbnorm.readers.instances import instance_rules
from lbnorm.suites import Suite, load_suite

FIXTURE = Path(__file__).parent / "fixtures" / "alpacaeval"
RESULTS = FIXTURE / "results"
#: the foreign data beside the clone (../shared/foreign from the main checkout or a
#: worktree under it), or where LBNORM_FOREIGN says
FOREIGN = Path(
    os.environ.get("LBNORM_FOREIGN")
    or next(
        (
            folder / "shared" / "foreign"
            for folder in Path(__file__).resolve().parents[1:4]
            if (folder / "shared" / "foreign").is_dir()
        ),
        Path(__file__).parents[2] / "shared" / "foreign",
    )
)
ANNOTATOR = "weighted_alpaca_eval_gpt4_turbo"
#: the published columns checked, and where lbnorm's value is
COLUMNS = (
    "win_rate",
    "standard_error",
    "discrete_win_rate",
    "n_wins",
    "n_wins_base",
    "n_draws",
    "n_total",
    "avg_length",
)


#: the fixture's maker: its data (MODELS, INSTRUCTIONS) and write_fixture
MAKER = runpy.run_path(str(FIXTURE / "make_alpacaeval.py"))


def alpacaeval_suite(folder: Path, *, instances: int = 805) -> Suite:
    """The built-in ``alpacaeval-2``, or a copy whose board has `instances` instructions."""
    builtin = load_suite("alpacaeval-2")
    if instances == 805:
        return builtin
    path = folder / "alpacaeval.toml"
    path.write_text(builtin.text.replace("instances = 805", f"instances = {instances}"))
    return load_suite(path)


def board(inputs: Inputs) -> dict[str, dict[str, float]]:
    """model -> the published columns, from the scores read (as the board shows them)."""
    rows: dict[str, dict[str, float]] = defaultdict(dict)
    for batch in inputs.batches:
        for row in batch.table.select(
            ["model", "benchmark", "raw_score", "stderr"]
        ).to_pylist():
            values = rows[str(row["model"])]
            if row["benchmark"] == "win_rate":
                values["win_rate"] = row["raw_score"] * 100
                stderr = row["stderr"]
                values["standard_error"] = math.nan if stderr is None else stderr * 100
            else:
                values[str(row["benchmark"])] = row["raw_score"]
    return dict(rows)


def expected_row(
    preferences: list[float | None], lengths: list[int], instances: int
) -> dict[str, float]:
    """AlpacaEval's columns: its head-to-head arithmetic, avg_length over the board's count."""
    return alpacaeval_head2head(preferences) | {
        "avg_length": float(int(sum(lengths) / instances))
    }


def assert_rows_equal(
    got: dict[str, dict[str, float]], expected: dict[str, dict[str, float]]
) -> int:
    """Every column equal (rates to 1e-8); returns how many numbers were compared."""
    assert set(got) == set(expected)
    compared = 0
    for model, columns in expected.items():
        for column in COLUMNS:
            tolerance = 1e-8 if column in COLUMNS[:3] else 0.0
            assert got[model][column] == pytest.approx(
                columns[column], abs=tolerance, nan_ok=True
            ), (model, column)
            compared += 1
    return compared


# --- the committed fixture ----------------------------------------------------------


def test_the_fixture_is_what_its_maker_writes(tmp_path: Path) -> None:
    MAKER["write_fixture"](tmp_path)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*.json"))
    assert written == sorted(p.relative_to(RESULTS) for p in RESULTS.rglob("*.json"))
    for path in written:
        assert (tmp_path / path).read_bytes() == (RESULTS / path).read_bytes(), path


def test_the_fixture_gives_alpacaevals_numbers(tmp_path: Path) -> None:
    suite = alpacaeval_suite(tmp_path, instances=len(MAKER["INSTRUCTIONS"]))
    inputs = read_files([RESULTS], suite=suite, options=RunOptions())
    expected = {
        model: expected_row(
            preferences,
            [len(text or "") for text in outputs],
            len(MAKER["INSTRUCTIONS"]),
        )
        for model, (_, preferences, outputs) in MAKER["MODELS"].items()
    }
    got = board(inputs)  # (the batches are read once)
    assert assert_rows_equal(got, expected) == 4 * 8
    # the baseline judged against itself: AlpacaEval's own row for it
    assert {c: got["gpt4_1106_preview"][c] for c in COLUMNS[:7]} == {
        "win_rate": 50.0,
        "standard_error": 0.0,
        "discrete_win_rate": 50.0,
        "n_wins": 0.0,
        "n_wins_base": 0.0,
        "n_draws": 8.0,
        "n_total": 8.0,
    }
    # named by the folder, not by the generator its files name ("example")
    assert "null-model" in got
    assert "example" not in got
    # a null preference dropped, 0 read as a draw; lengths in code points
    assert got["model-a"]["n_total"] == 7
    assert got["model-a"]["n_draws"] == 2
    characters = 5 + 12 + 6 * 300 + 2 + 5 + 1000 + 11 + 3  # not bytes: 5 + 13 + 18 ...
    assert got["model-b"]["avg_length"] == characters // 8


def test_the_fixture_catalog_lists_what_was_read_and_skipped(tmp_path: Path) -> None:
    suite = alpacaeval_suite(tmp_path)
    inputs = read_files([RESULTS], suite=suite, options=RunOptions())
    rows = {
        str(Path(r["path"]).relative_to(RESULTS)): r
        for r in inputs.catalog.select(
            ["path", "format", "rows", "n_ignored", "sha256", "reason"]
        ).to_pylist()
    }
    annotations = f"model-a/{ANNOTATOR}/annotations.json"
    assert rows[annotations]["format"] == "alpacaeval"
    assert rows[annotations]["rows"] == 6  # six subtasks
    assert rows[annotations]["n_ignored"] == 1  # the null preference, dropped
    assert len(rows[annotations]["sha256"]) == 64
    assert rows["model-a/model_outputs.json"]["rows"] == 1
    unused = rows["model-b/alpaca_eval_gpt4/annotations.json"]
    assert (unused["format"], unused["rows"], unused["n_ignored"]) == (
        "alpacaeval",
        0,
        1,
    )
    nested = rows[f"model-a/{ANNOTATOR}/{ANNOTATOR}/annotations.json"]
    assert nested["format"] == "skipped"
    assert "AlpacaEval's results layout" in nested["reason"]
    assert any("skipped 1 file(s)" in warning for warning in inputs.warnings)


def test_an_unread_annotator_is_not_parsed(tmp_path: Path) -> None:
    shutil.copytree(RESULTS, tmp_path / "results")
    (tmp_path / "results" / "model-b" / "alpaca_eval_gpt4" / "annotations.json").write_text("{")  # fmt: skip
    suite = alpacaeval_suite(tmp_path)
    got = board(read_files([tmp_path / "results"], suite=suite, options=RunOptions()))
    assert set(got) == set(MAKER["MODELS"])


def test_a_model_folder_given_alone_is_read(tmp_path: Path) -> None:
    suite = alpacaeval_suite(tmp_path)
    got = board(read_files([RESULTS / "model-b"], suite=suite, options=RunOptions()))
    assert set(got) == {"model-b"}


def test_a_ctrl_c_stops_the_read_at_the_next_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The signal comes while the first file is read; the next one is not opened."""
    import lbnorm.readers.alpacaeval as alpacaeval
    from lbnorm.core.files import read_bytes

    read: list[Path] = []

    def read_then_ctrl_c(path: Path, **kwargs: Any) -> bytes:
        read.append(path)
        if len(read) == 1:
            signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, here
        return read_bytes(path, **kwargs)

    monkeypatch.setattr(alpacaeval, "read_bytes", read_then_ctrl_c)
    suite = alpacaeval_suite(tmp_path)
    with pytest.raises(Cancelled, match="SIGINT"), _runtime.cancellable():
        read_files([RESULTS], suite=suite, options=RunOptions())
    assert len(read) == 1


def test_the_layout_is_found_by_its_files() -> None:
    files = sorted(path for path in RESULTS.rglob("*") if path.is_file())
    found = find_layout(files)
    assert found is not None
    inputs, skipped = found
    assert len(inputs) == 9  # 4 outputs, 4 + 1 annotations
    assert [path.relative_to(RESULTS) for path, _ in skipped] == [
        Path(f"model-a/{ANNOTATOR}/{ANNOTATOR}/annotations.json")
    ]
    assert find_layout([Path("a/results_x.json")]) is None


# --- bad files ----------------------------------------------------------------------


def _one_model(tmp_path: Path) -> Path:
    root = tmp_path / "results"
    shutil.copytree(RESULTS / "model-a", root / "model-a")
    return root


def _read(root: Path, tmp_path: Path) -> Inputs:
    return read_files([root], suite=alpacaeval_suite(tmp_path), options=RunOptions())


def _rewrite(path: Path, change: object) -> None:
    entries = json.loads(path.read_text())
    assert callable(change)
    change(entries)
    path.write_text(json.dumps(entries))


ENTRY = '[{"instruction": "x", "generator_2": "m", "preference": '
BAD_ANNOTATIONS = [
    (
        lambda e: e[3].pop("generator_2"),
        r"Object missing required field `generator_2` - at `\$\[3\]`",
    ),
    (
        lambda e: e[2].update(preference="1.5"),
        r"Expected `float \| null`, got `str` - at `\$\[2\]\.preference`",
    ),
    (
        lambda e: e[1].update(preference=True),
        r"Expected `float \| null`, got `bool` - at `\$\[1\]\.preference`",
    ),
    (
        lambda e: e[4].update(generator_2="someone-else"),
        r"\$\[4\]\.generator_2 is 'someone-else', but \$\[0\]'s is 'model-a': one annotations\.json judges one model",
    ),
    (
        lambda e: e[5].update(preference=2.5),
        r"weighted_alpaca_eval_gpt4_turbo / preference: a value outside the scale \[1, 2\] in entry\(s\) 5 \(2\.5\)",
    ),
    (
        lambda e: e.__setitem__(0, [1.5]),
        r"Expected `object`, got `array` - at `\$\[0\]`",
    ),
]


@pytest.mark.parametrize(("change", "message"), BAD_ANNOTATIONS)
def test_a_bad_annotation_names_the_file_and_entry(
    tmp_path: Path, change: object, message: str
) -> None:
    root = _one_model(tmp_path)
    path = root / "model-a" / ANNOTATOR / "annotations.json"
    _rewrite(path, change)
    with pytest.raises(InputError, match=rf"annotations\.json: {message}.*\nHint: "):
        _read(root, tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"the file is empty"),
        ("  \n", r"the file is empty"),
        ('{"instruction": "x"}', r"Expected `array`, got `object`"),
        (f"{ENTRY}1", r"not valid JSON: Expecting"),
    ],
)
def test_a_broken_annotations_file_is_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    root = _one_model(tmp_path)
    (root / "model-a" / ANNOTATOR / "annotations.json").write_text(text)
    with pytest.raises(InputError, match=rf"annotations\.json: .*{message}.*\nHint: "):
        _read(root, tmp_path)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_literal_is_a_dropped_preference(
    tmp_path: Path, literal: str
) -> None:
    """As AlpacaEval drops it (``validate_alpacaeval_preference``: not in [1, 2])."""
    root = _one_model(tmp_path)
    path = root / "model-a" / ANNOTATOR / "annotations.json"
    path.write_text(
        path.read_text().replace('"preference": null', f'"preference": {literal}')
    )
    assert board(_read(root, tmp_path))["model-a"]["n_total"] == 7


def test_not_utf8_is_refused(tmp_path: Path) -> None:
    root = _one_model(tmp_path)
    path = root / "model-a" / "model_outputs.json"
    path.write_bytes(path.read_bytes().replace(b"Yes.", b"Y\xe9s."))
    with pytest.raises(InputError, match=r"model_outputs\.json: line \d+: byte 0xe9 is not UTF-8\.\nHint: "):  # fmt: skip
        _read(root, tmp_path)


def test_a_lone_surrogate_in_an_output_counts_as_one_character(tmp_path: Path) -> None:
    root = _one_model(tmp_path)
    path = root / "model-a" / "model_outputs.json"
    path.write_text(path.read_text().replace('"Yes."', '"Yes\\ud800"'))
    got = board(read_files([root], suite=alpacaeval_suite(tmp_path, instances=1), options=RunOptions()))  # fmt: skip
    lengths = [len(t or "") for t in MAKER["MODELS"]["model-a"][2]]
    assert got["model-a"]["avg_length"] == sum(lengths)


def test_an_output_entry_without_output_is_refused(tmp_path: Path) -> None:
    root = _one_model(tmp_path)
    _rewrite(root / "model-a" / "model_outputs.json", lambda e: e[2].pop("output"))
    with pytest.raises(InputError, match=r"model_outputs\.json: Object missing required field `output` - at `\$\[2\]`\.\nHint: a model_outputs\.json is"):  # fmt: skip
        _read(root, tmp_path)


def test_a_null_preference_needs_a_suite_that_drops_it(tmp_path: Path) -> None:
    root = _one_model(tmp_path)
    suite_path = tmp_path / "keep.toml"
    suite_path.write_text(
        f'name = "keep"\n[[benchmarks]]\nname = "win_rate"\n'
        f'subtasks = [{{ name = "s", task = "{ANNOTATOR}", metric = "preference" }}]\n'
    )
    with pytest.raises(InputError, match=r"annotations\.json: preference is null or not finite in entries \[4\] \(\$\[4\]\), and the suite keeps every instance\.\nHint: .*non_finite = \"drop\""):  # fmt: skip
        read_files([root], suite=load_suite(suite_path), options=RunOptions())


def test_annotations_without_model_outputs_are_refused(tmp_path: Path) -> None:
    root = _one_model(tmp_path)
    (root / "model-a" / "model_outputs.json").unlink()
    with pytest.raises(InputError, match=r"annotations\.json: annotations\.json file\(s\) but no model_outputs\.json.*\nHint: AlpacaEval's layout"):  # fmt: skip
        _read(root, tmp_path)


def test_one_model_in_two_folders_is_refused(tmp_path: Path) -> None:
    first, second = _one_model(tmp_path), tmp_path / "again"
    shutil.copytree(first, second)
    with pytest.raises(InputError, match=r"model 'model-a' task 'model_outputs' is also given by .*\nHint: give each model's results folder once"):  # fmt: skip
        read_files(
            [first, second], suite=alpacaeval_suite(tmp_path), options=RunOptions()
        )


def test_a_fifo_named_like_an_input_is_refused(tmp_path: Path) -> None:
    root = _one_model(tmp_path)
    fifo = root / "model-b" / "model_outputs.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"model_outputs\.json: is a FIFO.*, not a regular file\.\nHint: "):  # fmt: skip
        _read(root, tmp_path)


# --- the real board ---------------------------------------------------------------


def write_foreign_layout(
    root: Path, models: tuple[str, ...] = ()
) -> dict[str, dict[str, float]]:
    """AlpacaEval's results layout built from the foreign CSVs, and the published rows.

    Instruction texts are synthetic (one per index); outputs are ``"x" * length``.
    `models`: only these (default: all 57).
    """
    preferences: dict[str, list[float]] = defaultdict(list)
    lengths: dict[str, list[int]] = defaultdict(list)
    with (FOREIGN / "alpaca2_preferences.csv").open() as handle:
        for row in csv.DictReader(handle):
            preferences[row["model"]].append(float(row["preference"]))
    with (FOREIGN / "alpaca2_output_lengths.csv").open() as handle:
        for row in csv.DictReader(handle):
            lengths[row["model"]].append(int(row["length"]))
    for model, values in preferences.items():
        if models and model not in models:
            continue
        folder = root / model / ANNOTATOR
        folder.mkdir(parents=True)
        annotations = [
            {
                "instruction": f"instruction {i}",
                "generator_1": "gpt4_1106_preview",
                "generator_2": model,
                "preference": value,
            }
            for i, value in enumerate(values)
        ]
        (folder / "annotations.json").write_text(json.dumps(annotations))
        outputs = [
            {"instruction": f"instruction {i}", "output": "x" * n, "generator": model}
            for i, n in enumerate(lengths[model])
        ]
        (root / model / "model_outputs.json").write_text(json.dumps(outputs))
    with (FOREIGN / "alpaca2_leaderboard.csv").open() as handle:
        return {
            row["model"]: {column: float(row[column]) for column in COLUMNS}
            for row in csv.DictReader(handle)
            if not models or row["model"] in models
        }


@pytest.fixture(scope="module")
def foreign_layout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, float]]]:  # fmt: skip
    if not (FOREIGN / "alpaca2_preferences.csv").is_file():
        pytest.skip(f"the AlpacaEval data is not in {FOREIGN}")
    root = tmp_path_factory.mktemp("alpacaeval") / "results"
    return root, write_foreign_layout(root)


def published_columns(out: Path, table: Path) -> dict[str, dict[str, float]]:
    """model -> the board's columns, as ``lbnorm export OUT --format table`` writes them."""
    assert main(["export", str(out), "--format", "table", "--out", str(table)]) == 0
    exported = pd.read_csv(table)
    assert exported.columns.tolist() == ["model", *COLUMNS[:2], *COLUMNS[3:7], COLUMNS[2], COLUMNS[7]]  # fmt: skip
    counts = ["n_wins", "n_wins_base", "n_draws", "n_total", "avg_length"]
    assert (exported.dtypes[counts] == "int64").all()  # whole numbers, as published
    return {
        str(row["model"]): {column: float(row[column]) for column in COLUMNS}
        for row in exported.to_dict("records")
    }


def test_a_run_on_the_fixture_shows_the_boards_columns(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["run", str(RESULTS), "--suite", "alpacaeval-2", "--out", str(out), "--quiet"]) == 0  # fmt: skip
    expected = {
        model: expected_row(preferences, [len(t or "") for t in outputs], 805)
        for model, (_, preferences, outputs) in MAKER["MODELS"].items()
    }
    got = published_columns(out, tmp_path / "board.csv")
    assert assert_rows_equal(got, expected) == 4 * 8
    leaderboard = pd.read_parquet(out / "leaderboard.parquet").set_index("model")
    # statistics are shown, not averaged, and ranked by the win rate (no average)
    assert leaderboard["average"].isna().all()
    assert leaderboard["rank"].to_dict() == {
        "null-model": 1,
        "model-a": 2,
        "gpt4_1106_preview": 3,
        "model-b": 4,
    }
    assert leaderboard["n_wins stderr"].isna().all()


@pytest.mark.slow
def test_alpacaeval_2_is_reproduced(
    foreign_layout: tuple[Path, dict[str, dict[str, float]]], tmp_path: Path
) -> None:
    """All 57 models x 8 published columns: 456 numbers, the baseline's row included.

    ``lbnorm run DIR --suite alpacaeval-2 --out O`` then ``lbnorm export O --format
    table --out P.csv``: the board's columns by their published names.
    """
    root, published = foreign_layout
    out = tmp_path / "out"
    assert main(["run", str(root), "--suite", "alpacaeval-2", "--out", str(out), "--quiet"]) == 0  # fmt: skip
    got = published_columns(out, tmp_path / "board.csv")
    assert assert_rows_equal(got, published) == 456
    assert published["gpt4_1106_preview"]["n_draws"] == 805


def test_alpacaeval_2_quick_sibling(tmp_path: Path) -> None:
    """The same path on the foreign data's first two models and the baseline (reader level)."""
    if not (FOREIGN / "alpaca2_preferences.csv").is_file():
        pytest.skip(f"the AlpacaEval data is not in {FOREIGN}")
    root = tmp_path / "results"
    published = write_foreign_layout(root, models=("gpt4_1106_preview", "claude-2"))
    got = board(
        read_files([root], suite=alpacaeval_suite(tmp_path), options=RunOptions())
    )
    assert assert_rows_equal(got, published) == 2 * 8


def test_the_reader_alone_on_the_fixture(tmp_path: Path) -> None:
    """The reader's own catalog columns, without the run's catalog around it."""
    suite = alpacaeval_suite(tmp_path)
    paths = sorted(RESULTS.glob("*/model_outputs.json"))
    scores, files = read_alpacaeval(
        paths, subtask_columns(suite), rules=instance_rules(suite)
    )
    assert files.column_names == ["path", "sha256", "bytes", "rows", "n_ignored"]
    assert files["rows"].to_pylist() == [1, 1, 1, 1]
    assert isinstance(scores, pa.Table)
    assert set(scores["benchmark"].to_pylist()) == {"avg_length"}


def test_a_models_files_given_by_name_read_as_in_the_folder(tmp_path: Path) -> None:
    """``annotations.json`` and ``model_outputs.json`` named on the command line, not a folder."""
    folder = RESULTS / "model-b"
    files = [
        folder / "weighted_alpaca_eval_gpt4_turbo" / "annotations.json",
        folder / "model_outputs.json",
    ]
    suite = alpacaeval_suite(tmp_path)
    given = read_files(files, suite=suite, options=RunOptions())
    assert given.catalog["format"].to_pylist() == ["alpacaeval"] * 2
    assert board(given) == {"model-b": board(_read(RESULTS, tmp_path))["model-b"]}
