"""What the readers accept as input files and folders, and how they say what they refuse."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import InputError, ValidationError, load_suite, run
from lbnorm.cli import main
from lbnorm.core.files import MAX_RESULTS_BYTES
from lbnorm.core.options import RunOptions
from lbnorm.readers import read_inputs

SUITE = load_suite("openllm-v2")
GOLDEN = Path(__file__).parent / "fixtures" / "golden" / "Amu__t1-3B.json"


def _tree(root: Path) -> Path:
    """A one-model leaderboard tree (the golden Amu/t1-3B file)."""
    path = root / "Amu" / "t1-3B" / "results_2025-03-13T16-46-20.235537.json"
    path.parent.mkdir(parents=True)
    shutil.copy(GOLDEN, path)
    return root


# --- no pandas while reading -------------------------------------------------------


def test_reading_every_format_loads_no_pandas(fixtures: Path, tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree")
    script = f"""
import sys
from lbnorm.core.options import RunOptions
from lbnorm.readers import read_inputs
from lbnorm.suites import load_suite
suite = load_suite("openllm-v2")
tables = {str(fixtures / "tables")!r}
for paths in ([tables + "/seed_examples.csv"], [tables + "/seed_examples.jsonl"],
              [{str(tree)!r}], [tables + "/seed_examples.parquet"]):
    read = read_inputs(paths, suite=suite, options=RunOptions())
    rows = sum(batch.table.num_rows for batch in read.batches)
    assert rows == read.num_rows > 0, paths
    assert read.catalog.num_rows == 1
assert "pandas" not in sys.modules, "pandas was imported"
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# --- null optional keys: unknown, as if absent ----------------------------------


@pytest.fixture(scope="module")
def no_sha_rows(published_csv: Path) -> pd.DataFrame:
    """The 16 published variants without a revision sha, as a long MMLU-PRO table."""
    published = pd.read_csv(published_csv)
    rows = published[published["Model sha"].isna()]
    assert len(rows) == 16
    return pd.DataFrame(
        {
            "model": rows["fullname"].to_numpy(),
            "precision": rows["Precision"].to_numpy(),
            "revision": rows["Model sha"].to_numpy(),  # NaN: null in every format
            "chat_template": rows["Chat Template"].to_numpy(dtype=bool),
            "benchmark": "MMLU-PRO",
            "subtask": "mmlu_pro",
            "raw_score": rows["MMLU-PRO Raw"].to_numpy(),
            "published": rows["MMLU-PRO"].to_numpy(),
        }
    )


def _write(frame: pd.DataFrame, path: Path) -> Path:
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".jsonl":  # json.dumps: every digit (to_json keeps 10)
        records = frame.astype(object).where(frame.notna(), None).to_dict("records")
        path.write_text("".join(json.dumps(record) + "\n" for record in records))
    else:
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_a_null_revision_is_unknown_as_if_absent(
    no_sha_rows: pd.DataFrame, tmp_path: Path, suffix: str
) -> None:
    table = no_sha_rows.drop(columns=["published"])
    options = RunOptions(missing="partial")
    written = _write(table, tmp_path / f"nulls{suffix}")
    if suffix == ".jsonl":
        assert '"revision": null' in written.read_text()
    with_nulls = run([written], options=options)
    without = run(
        [_write(table.drop(columns=["revision"]), tmp_path / f"absent{suffix}")],
        options=options,
    )
    pd.testing.assert_frame_equal(with_nulls.leaderboard, without.leaderboard)
    board = with_nulls.leaderboard.set_index("model")
    assert (board["revision"] == "").all()
    assert len(board) == 16
    published = no_sha_rows.set_index("model")["published"]
    assert (board["MMLU-PRO"] - published[board.index]).abs().max() < 1e-9


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_null_precision_or_chat_template_is_unknown(
    tmp_path: Path, suffix: str
) -> None:
    table = pd.DataFrame(
        {
            "model": ["m"],
            "precision": [None],
            "revision": ["abc"],
            "chat_template": [None],
            "benchmark": ["MMLU-PRO"],
            "subtask": ["mmlu_pro"],
            "raw_score": [0.55],
        }
    )
    read = read_inputs(
        [_write(table, tmp_path / f"t{suffix}")], suite=SUITE, options=RunOptions()
    )
    (batch,) = list(read.batches)
    row = batch.table.select(["precision", "chat_template"]).to_pylist()[0]
    assert row == {"precision": "", "chat_template": False}


def test_a_null_model_is_still_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"model": "m", "benchmark": "MMLU-PRO", "subtask": "mmlu_pro", "raw_score": 0.5}\n'
        '{"model": null, "benchmark": "MMLU-PRO", "subtask": "mmlu_pro", "raw_score": 0.5}\n'
    )
    with pytest.raises(
        InputError,
        match=r"t\.jsonl: line 2: model is empty \(null\), not text\.\nHint: every row needs a model",
    ):
        read_inputs([path], suite=SUITE, options=RunOptions())
    parquet = tmp_path / "t.parquet"
    pq.write_table(
        pa.table(
            {
                "model": ["m", None],
                "benchmark": ["MMLU-PRO"] * 2,
                "subtask": ["mmlu_pro"] * 2,
                "raw_score": [0.5, 0.5],
            }
        ),
        parquet,
    )
    with pytest.raises(
        ValidationError, match=r"null_key: \S*t\.parquet row 2 .*\n  Hint: model"
    ):
        run([parquet])


# --- what a directory's inputs are ------------------------------------------------


def test_stray_files_in_a_results_tree_are_skipped_and_listed(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree")
    (tree / "README.md").write_text("# results\n")
    (tree / "expected.csv").write_text("model,average\nAmu/t1-3B,1\n")
    (tree / "Amu" / "t1-3B" / "config.json").write_text("{}")
    read = read_inputs([tree], suite=SUITE, options=RunOptions())
    rows = {Path(row["path"]).name: row for row in read.catalog.to_pylist()}
    assert (
        rows["results_2025-03-13T16-46-20.235537.json"]["format"] == "lm-eval-harness"
    )
    for name in ("README.md", "expected.csv", "config.json"):
        assert rows[name]["format"] == "skipped"
        assert rows[name]["rows"] == 0
        assert rows[name]["sha256"] == ""
    for name in ("README.md", "expected.csv"):
        assert rows[name]["reason"].startswith("not an input of a results tree")
    assert rows["config.json"]["reason"].startswith(
        "a .json file that is not a results file (a results file's first key is "
    )
    assert read.warnings == (
        "skipped 3 file(s) found but not read (the input catalog lists each with its "
        f"reason): {tree / 'Amu' / 't1-3B' / 'config.json'}: a .json file that is not "
        f"a results file; {tree / 'README.md'}, {tree / 'expected.csv'}: not an input "
        "of a results tree",
    )
    reference = run([GOLDEN]).leaderboard
    pd.testing.assert_frame_equal(run([tree]).leaderboard, reference)


def test_a_table_directory_skips_what_is_not_a_table(
    tmp_path: Path, fixtures: Path
) -> None:
    shutil.copy(fixtures / "tables" / "seed_examples.csv", tmp_path / "a.csv")
    (tmp_path / "notes.txt").write_text("x")
    read = read_inputs([tmp_path], suite=SUITE, options=RunOptions())
    formats = {
        Path(row["path"]).name: row["format"] for row in read.catalog.to_pylist()
    }
    assert formats == {"a.csv": "csv", "notes.txt": "skipped"}
    assert read.num_rows == 6


def test_an_unreadable_folder_is_an_error_like_an_unreadable_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "tree")
    locked = tree / "meta-llama"
    locked.mkdir()
    scandir = os.scandir

    def refuse(path: Any = ".") -> Any:  # what `chmod 000` does to a non-root user
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse)
    code = main(["run", str(tree), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 4
    assert err == (
        f"lbnorm: error: {locked}: cannot read the directory: Permission denied.\n"
        "Hint: check its permissions: every folder of an input tree must be readable "
        "(lbnorm never skips one silently).\n"
    )


def _run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lbnorm", "run", *args, "--quiet"],
        capture_output=True,
        text=True,
        timeout=timeout,  # a FIFO opened for reading would wait for ever
        check=False,
    )


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "scores.csv"
    os.mkfifo(fifo)
    done = _run_cli(str(fifo), "--out", str(tmp_path / "out"))
    assert done.returncode == 4
    assert done.stderr.startswith(
        f"lbnorm: error: {fifo}: is a FIFO (named pipe), not a regular file"
    )
    assert "Hint: copy the data into a file first" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_fifo_named_like_a_results_file_in_a_tree_is_refused(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree")
    fifo = tree / "Amu" / "t1-3B" / "results_2025-04-01T00-00-00.000000.json"
    os.mkfifo(fifo)
    with pytest.raises(
        InputError,
        match=rf"{fifo}: is a FIFO \(named pipe\), not a regular file.\nHint",
    ):
        read_inputs([tree], suite=SUITE, options=RunOptions())


def test_a_device_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        InputError,
        match=r"/dev/zero: is a character device, not a regular file; .*\nHint: copy",
    ):
        read_inputs([Path("/dev/zero")], suite=SUITE, options=RunOptions())


def test_a_missing_path_says_so(tmp_path: Path) -> None:
    with pytest.raises(
        InputError, match=r"nothere\.csv: no such file or directory.\nHint"
    ):
        read_inputs([tmp_path / "nothere.csv"], suite=SUITE, options=RunOptions())


# --- results files: size cap and huge integers -----------------------------------


def test_a_results_file_over_the_cap_is_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = _tree(tmp_path / "tree")
    huge = tree / "Amu" / "t1-3B" / "results_2025-04-01T00-00-00.000000.json"
    with huge.open("wb") as handle:  # sparse: no disk, no memory
        handle.truncate(MAX_RESULTS_BYTES + 1)
    assert main(["run", str(tree), "--out", str(tmp_path / "out"), "--quiet"]) == 4
    assert capsys.readouterr().err == (
        f"lbnorm: error: {huge}: {MAX_RESULTS_BYTES + 1:,} bytes is over the "
        f"{MAX_RESULTS_BYTES:,}-byte (512 MiB) limit for one results file; real "
        "results files are about 130 KB.\nHint: check that this is a complete, "
        "undamaged results file; to read larger files, pass max_results_bytes (None: "
        "no limit) to lbnorm.readers.read_inputs.\n"
    )


def test_the_cap_can_be_lowered_or_lifted(tmp_path: Path) -> None:
    size = GOLDEN.stat().st_size
    with pytest.raises(InputError, match=rf"{size:,} bytes is over the 1,000-byte"):
        read_inputs([GOLDEN], suite=SUITE, options=RunOptions(), max_results_bytes=1000)
    read = read_inputs(
        [GOLDEN], suite=SUITE, options=RunOptions(), max_results_bytes=None
    )
    assert read.num_rows == 40


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (
            ("results", "leaderboard_mmlu_pro", "acc,none"),
            r"results\['leaderboard_mmlu_pro'\]\['acc,none'\] is an integer of about 401 digits, too large for any score",
        ),
        (
            ("results", "leaderboard_mmlu_pro", "acc_stderr,none"),
            r"results\['leaderboard_mmlu_pro'\]\['acc_stderr,none'\] is an integer of about 401 digits",
        ),
    ],
)
def test_a_400_digit_integer_is_a_clear_error(
    tmp_path: Path, where: tuple[str, str, str], message: str
) -> None:
    document = json.loads(GOLDEN.read_text())
    section, task, metric = where
    document[section][task][metric] = "HUGE"
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(document).replace('"HUGE"', "1" + "0" * 400))
    with pytest.raises(InputError, match=rf"huge\.json: {message}.*\nHint: "):
        read_inputs([path], suite=SUITE, options=RunOptions())


def test_a_400_digit_date_is_no_date(tmp_path: Path) -> None:
    document = json.loads(GOLDEN.read_text())
    document["date"] = "HUGE"
    path = tmp_path / "huge_date.json"
    path.write_text(json.dumps(document).replace('"HUGE"', "9" * 400))
    pd.testing.assert_frame_equal(run([path]).leaderboard, run([GOLDEN]).leaderboard)


# --- messages name the right line and show the cell --------------------------------

HEADER = "model,benchmark,subtask,raw_score,stderr\n"


@pytest.mark.parametrize("column", ["raw_score", "stderr"])
def test_a_csv_type_error_names_the_bad_line(tmp_path: Path, column: str) -> None:
    rows = [
        "m,MUSR,murder_mysteries,0.5,0.01",
        "m,MUSR,object_placements,0.5,0.01",
        "m,MUSR,team_allocation,abc,0.01"
        if column == "raw_score"
        else "m,MUSR,team_allocation,0.5,abc",
    ]
    path = tmp_path / "scores.csv"
    path.write_text(HEADER + "\n".join(rows) + "\n")
    with pytest.raises(
        InputError,
        match=rf"scores\.csv: line 4: {column} is the text 'abc', not a number\.\nHint: write {column}",
    ):
        read_inputs([path], suite=SUITE, options=RunOptions())


def test_lines_are_counted_across_quoted_newlines_and_blank_lines(
    tmp_path: Path,
) -> None:
    path = tmp_path / "scores.csv"
    path.write_text(
        HEADER
        + '"m\nwith a newline",MUSR,murder_mysteries,0.5,0.01\n'  # lines 2-3
        + "\n"  # line 4: blank
        + "m,MUSR,object_placements,nan,0.01\n"  # line 5
        + "m,MUSR,team_allocation,,0.01\n"  # line 6
    )
    with pytest.raises(ValidationError) as raised:
        run([path])
    message = str(raised.value)
    assert f"{path} line 5 (m / MUSR / object_placements: raw_score='nan')" in message
    assert f"{path} line 6 (m / MUSR / team_allocation: raw_score='')" in message
    assert raised.value.failures["row"].tolist() == ["5", "6"]
    assert raised.value.failures["model"].tolist() == ["m", "m"]


def test_jsonl_lines_are_counted_across_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "scores.jsonl"
    row = {"model": "m", "benchmark": "MUSR", "subtask": "murder_mysteries"}
    path.write_text(
        json.dumps({**row, "raw_score": 0.5})
        + "\n\n"
        + json.dumps({**row, "subtask": "team_allocation", "raw_score": None})
        + "\n"
    )
    with pytest.raises(
        ValidationError,
        match=rf"{path} line 3 \(m / MUSR / team_allocation: raw_score='null'\)",
    ):
        run([path])


def test_parquet_rows_are_counted_from_one(tmp_path: Path) -> None:
    path = tmp_path / "scores.parquet"
    pq.write_table(
        pa.table(
            {
                "model": ["m", "m"],
                "benchmark": ["MUSR"] * 2,
                "subtask": ["murder_mysteries", "team_allocation"],
                "raw_score": [0.5, float("inf")],
            }
        ),
        path,
    )
    with pytest.raises(
        ValidationError,
        match=rf"{path} row 2 \(m / MUSR / team_allocation: raw_score='inf'\)",
    ):
        run([path])


def test_a_duplicate_across_files_says_another_input_holds_it(
    tmp_path: Path, fixtures: Path
) -> None:
    with pytest.raises(ValidationError) as raised:
        run(
            [
                fixtures / "tables" / "seed_examples.csv",
                fixtures / "tables" / "seed_examples.jsonl",
            ]
        )
    message = str(raised.value)
    assert (
        f"duplicate_score: {fixtures / 'tables' / 'seed_examples.jsonl'} line 1 "
        "(seed/musr-example / MUSR / murder_mysteries: also given by "
        f"{fixtures / 'tables' / 'seed_examples.csv'})"
    ) in message


def test_a_duplicate_across_a_csv_and_a_results_file(tmp_path: Path) -> None:
    """Both places are named: the results key, and the CSV (read first) that holds it too."""
    (batch,) = list(read_inputs([GOLDEN], suite=SUITE, options=RunOptions()).batches)
    first = batch.table.slice(0, 1).to_pylist()[0]
    keys = ["model", "precision", "revision", "chat_template", "benchmark", "subtask"]
    path = tmp_path / "scores.csv"
    path.write_text(
        ",".join([*keys, "raw_score"])
        + "\n"
        + ",".join(
            [
                *(
                    str(first[key]).lower() if key == "chat_template" else first[key]
                    for key in keys
                ),
                "0.5",
            ]
        )
        + "\n"
    )
    with pytest.raises(ValidationError) as raised:
        run([path, GOLDEN])
    message = str(raised.value)
    assert (
        f"- duplicate_score: {GOLDEN} {first['_row']} ({first['model']} / "
        f"{first['benchmark']} / {first['subtask']}: also given by {path})"
    ) in message
    failures = raised.value.failures
    assert failures["source"].tolist() == [str(GOLDEN)]


@pytest.mark.parametrize("size", [0, 1, 3, 7, 8, 100])
def test_sha256_in_chunks_is_the_files_sha256(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    import hashlib

    from lbnorm.core import files

    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(size)))
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    assert files.sha256_file(path) == expected  # a buffer the file's size
    monkeypatch.setattr(files, "_HASH_CHUNK", 7)  # reads that end mid-chunk and on one
    assert files.sha256_file(path) == expected
    with path.open("rb", buffering=0) as handle:  # what is left of an open file
        handle.read(3)
        rest = hashlib.sha256(path.read_bytes()[3:]).hexdigest()
        assert files.sha256_of(handle) == rest


def test_several_tables_are_hashed_alike_and_fail_in_input_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tables hashed on every core: each its own sha256; the first bad one named."""
    import hashlib

    from lbnorm.pipeline import demo_path
    from lbnorm.readers import catalog

    demo = pq.read_table(demo_path())
    paths = []
    for index in range(4):
        path = tmp_path / f"part-{index}.parquet"
        pq.write_table(demo.slice(index * 1000, 1000), path)
        paths.append(path)
    suite = load_suite("openllm-v2")
    read = read_inputs(paths, suite=suite, options=RunOptions(subtasks=False))
    assert read.catalog.column("sha256").to_pylist() == [
        hashlib.sha256(path.read_bytes()).hexdigest() for path in paths
    ]
    paths[1].write_bytes(b"not parquet")  # the first bad input, in order
    from lbnorm.core.files import sha256_file

    def refuse(path: Path) -> str:
        if path == paths[3]:
            msg = f"{path}: cannot be read"
            raise InputError(msg)
        return sha256_file(path)

    monkeypatch.setattr(catalog, "sha256_file", refuse)
    with pytest.raises(InputError, match=r"part-1\.parquet"):
        read_inputs(paths, suite=suite, options=RunOptions(subtasks=False))
