"""The bad-input corpus (tests/bad_inputs/): every case fails cleanly or is accepted on purpose.

A failing case must exit with its documented code, print one ``lbnorm: error:``
message naming the file and ending with a hint, print no traceback, and leave the
previous output byte for byte as it was (nothing written anywhere). An accepted
case says what lbnorm did with it, and a check below verifies that.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lbnorm.cli import main

CORPUS = Path(__file__).parent / "bad_inputs"
FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN_FILE = FIXTURES / "golden" / "Amu__t1-3B.json"
SEED_TABLE = FIXTURES / "tables" / "seed_examples.csv"


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    path: str
    description: str
    exit_code: int
    message: str = ""
    check: str = ""
    kind: str = "input"
    args: list[str] = field(default_factory=list)
    requires: str = ""
    suite: str = ""


CASES = [
    Case(**entry)
    for entry in tomllib.loads((CORPUS / "cases.toml").read_text())["case"]
]
REJECTED = [case for case in CASES if case.exit_code != 0]
ACCEPTED = [case for case in CASES if case.exit_code == 0]


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file and directory under `folder`, with each file's sha256."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        if path.is_file()
        else "<dir>"
        for path in sorted(folder.rglob("*"))
    }


def _argv(case: Case, out: Path) -> list[str]:
    if case.kind == "suite":
        inputs, suite = [str(GOLDEN_FILE)], str(CORPUS / case.path)
    else:
        inputs = [str(CORPUS / case.path)]
        suite = str(CORPUS / case.suite) if case.suite else "openllm-v2"
    return ["run", *inputs, "--suite", suite, "--out", str(out), "--quiet", *case.args]


@pytest.fixture(scope="module")
def previous_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A good output directory, written once; each test works on a copy."""
    out = tmp_path_factory.mktemp("previous") / "out"
    assert (
        main(
            [
                "run",
                *map(str, sorted((FIXTURES / "golden").glob("*.json"))),
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    return out


def _skip_unless_available(case: Case) -> None:
    if case.requires and importlib.util.find_spec(case.requires) is None:
        pytest.skip(f"{case.path} needs {case.requires}")


def test_corpus_is_documented_and_complete() -> None:
    listed = {case.path for case in CASES}
    on_disk = {
        str(path.relative_to(CORPUS))
        for folder in ("results", "tables", "suites")
        for path in (CORPUS / folder).iterdir()
    } | {str(path.relative_to(CORPUS)) for path in (CORPUS / "trees").iterdir()}
    assert listed == on_disk  # every file has a case, every case a file
    assert len(REJECTED) >= 30
    assert all(case.description and (case.message or case.check) for case in CASES)
    assert all(case.exit_code in {0, 3, 4, 5, 6} for case in CASES)
    readme = (CORPUS / "README.md").read_text()
    assert all(f"`{case.path}`" in readme for case in CASES)


@pytest.mark.parametrize("case", REJECTED, ids=[case.path for case in REJECTED])
def test_bad_input_fails_cleanly(
    case: Case,
    previous_output: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _skip_unless_available(case)
    out = tmp_path / "out"
    shutil.copytree(previous_output, out)
    before = _snapshot(tmp_path)
    code = main(_argv(case, out))
    captured = capsys.readouterr()
    assert code == case.exit_code, captured.err
    assert captured.out == ""
    assert captured.err.startswith("lbnorm: error: ")
    assert re.search(case.message, captured.err, flags=re.DOTALL), captured.err
    assert Path(case.path).name in captured.err  # the message names the file
    assert re.search(r"\n *Hint: \S", captured.err), captured.err
    assert "Traceback" not in captured.err
    assert _snapshot(tmp_path) == before  # previous output untouched, nothing written


def test_missing_input_path(
    previous_output: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    shutil.copytree(previous_output, out)
    before = _snapshot(tmp_path)
    assert (
        main(["run", str(tmp_path / "nowhere.json"), "--out", str(out), "--quiet"]) == 4
    )
    assert re.fullmatch(
        r"lbnorm: error: \S*nowhere\.json: no such file or directory\.\nHint: check the path\.\n",
        capsys.readouterr().err,
    )
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize(
    "path",
    [
        "results/truncated.json",
        "tables/deep_nesting_first_line.jsonl",  # once a SIGSEGV in Arrow's parser
        # (quick siblings: test_bad_input_fails_cleanly, the same cases in-process)
        *(
            pytest.param(path, marks=pytest.mark.slow)
            for path in (
                "tables/score_text.csv",
                "trees/no_results",
                "suites/bound_one.toml",
            )
        ),
    ],
)
def test_real_process_exit_code_and_no_traceback(
    path: str, previous_output: Path, tmp_path: Path
) -> None:
    case = next(case for case in CASES if case.path == path)
    out = tmp_path / "out"
    shutil.copytree(previous_output, out)
    before = _snapshot(tmp_path)
    process = subprocess.run(
        [sys.executable, "-m", "lbnorm", *_argv(case, out)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert process.returncode == case.exit_code
    assert re.search(case.message, process.stderr, flags=re.DOTALL)
    assert "Hint: " in process.stderr
    assert "Traceback" not in process.stderr
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("line", [1, 2])
def test_a_deep_samples_file_in_a_cached_tree_is_a_clean_error(
    line: int, tmp_path: Path
) -> None:
    """Issue 40.3: a samples file nested 20,000 deep, in a results tree read through the parse cache.

    Its first line nested so crashed the parse (a RecursionError, or Arrow's stack
    overflowing: SIGSEGV); a later one would reach Arrow. A real process: a crash
    must show as one.
    """
    model = tmp_path / "tree" / "org" / "model"
    model.mkdir(parents=True)
    shutil.copy(GOLDEN_FILE, model / "results_2024-01-01T00-00-00.json")
    deep = (
        '{"doc_id": 0, "filter": "none", "acc_norm": '
        + "[" * 20_000
        + "]" * 20_000
        + "}"
    )
    plain = '{"doc_id": 1, "filter": "none", "acc_norm": 1.0}'
    lines = [deep, plain] if line == 1 else [plain, deep]
    samples = model / "samples_leaderboard_bbh_navigate_2024-01-01T00-00-00.jsonl"
    samples.write_text("\n".join(lines) + "\n")
    process = subprocess.run(
        [sys.executable, "-m", "lbnorm", "run", str(tmp_path / "tree"), "--cache",
         str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--quiet"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert process.returncode == 4, process.stderr
    assert re.fullmatch(
        rf"lbnorm: error: \S*{samples.name}: line {line} (is not valid JSON|nests).*\nHint: \S.*\n",
        process.stderr,
        flags=re.DOTALL,
    ), process.stderr
    assert not (tmp_path / "out").exists()


# --- accepted inputs: what lbnorm did with them ---------------------------------------


def _subtasks(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out / "subtasks.parquet")


def _subtask(out: Path, name: str) -> dict[str, Any]:
    rows = _subtasks(out)
    picked = rows[rows["subtask"] == name].to_dict("records")
    assert len(picked) == 1
    return {str(key): value for key, value in picked[0].items()}


def _golden_leaderboard(tmp_path: Path) -> pd.DataFrame:
    assert (
        main(["run", str(GOLDEN_FILE), "--out", str(tmp_path / "reference"), "--quiet"])
        == 0
    )
    return pd.read_parquet(tmp_path / "reference" / "leaderboard.parquet")


def _check_read_like_the_golden_file(case: Case, out: Path, tmp_path: Path) -> None:
    board = pd.read_parquet(out / "leaderboard.parquet")
    golden = _golden_leaderboard(tmp_path)
    # the scores as the golden file's; a standard error the case leaves out (N/A,
    # NaN) is estimated instead, so those columns may differ
    errors = [name for name in board.columns if name.endswith("stderr")]
    pd.testing.assert_frame_equal(
        board.drop(columns=errors), golden.drop(columns=errors)
    )
    assert board["model"].tolist() == ["Amu/t1-3B"]  # no BOM glued to anything


def _check_stderr_na_is_null(case: Case, out: Path, tmp_path: Path) -> None:
    assert pd.isna(_subtask(out, "inst_level_strict")["stderr"])
    assert _subtask(out, "prompt_level_strict")["stderr"] == pytest.approx(0.01)
    _check_read_like_the_golden_file(case, out, tmp_path)


def _check_nan_stderr_is_null(case: Case, out: Path, tmp_path: Path) -> None:
    assert pd.isna(_subtask(out, "team_allocation")["stderr"])
    assert _subtask(out, "team_allocation")["raw_score"] == pytest.approx(0.296)
    _check_read_like_the_golden_file(case, out, tmp_path)


def _check_last_duplicate_key_wins(case: Case, out: Path, tmp_path: Path) -> None:
    assert _subtask(out, "team_allocation")["raw_score"] == pytest.approx(
        0.296
    )  # not 0.1
    _check_read_like_the_golden_file(case, out, tmp_path)


def _check_unknown_tasks_are_counted(case: Case, out: Path, tmp_path: Path) -> None:
    _check_read_like_the_golden_file(case, out, tmp_path)
    ignored = [
        json.loads((folder / "manifest.json").read_text())["inputs"][0]["n_ignored"]
        for folder in (out, tmp_path / "reference")
    ]
    assert ignored[0] == ignored[1] + 3  # arc_challenge, hellaswag, leaderboard


def _check_n_samples_overflow_is_null(case: Case, out: Path, tmp_path: Path) -> None:
    assert pd.isna(_subtask(out, "team_allocation")["n_samples"])
    _check_read_like_the_golden_file(case, out, tmp_path)


def _check_missing_metric_leaves_benchmark_incomplete(
    case: Case, out: Path, tmp_path: Path
) -> None:
    assert "team_allocation" not in _subtasks(out)["subtask"].tolist()
    board: dict[Any, Any] = pd.read_parquet(out / "leaderboard.parquet").to_dict(
        "records"
    )[0]
    assert pd.isna(board["MUSR"])
    assert pd.isna(board["rank"])
    assert not board["is_complete"]
    benchmarks = pd.read_parquet(out / "benchmarks.parquet").set_index("benchmark")
    assert benchmarks["n_subtasks"].to_dict()["MUSR"] == 2


def _check_read_like_the_seed_table(case: Case, out: Path, tmp_path: Path) -> None:
    assert (
        main(
            [
                "run",
                str(SEED_TABLE),
                "--out",
                str(tmp_path / "seed"),
                "--quiet",
                "--missing",
                "partial",
            ]
        )
        == 0
    )
    expected = _subtasks(tmp_path / "seed").drop(columns="source")
    pd.testing.assert_frame_equal(_subtasks(out).drop(columns="source"), expected)
    assert _subtask(out, "diamond")["revision"] == "0123456789"  # digits stay text


def _check_csv_stderr_na_is_null(case: Case, out: Path, tmp_path: Path) -> None:
    assert pd.isna(_subtask(out, "object_placements")["stderr"])
    assert _subtask(out, "murder_mysteries")["stderr"] == pytest.approx(0.029)


def _check_optional_keys_take_defaults(case: Case, out: Path, tmp_path: Path) -> None:
    second = _subtask(out, "object_placements")  # this row lacks the optional keys
    assert (second["precision"], second["chat_template"]) == ("", False)
    assert pd.isna(second["stderr"])
    assert pd.isna(second["n_samples"])
    assert _subtask(out, "murder_mysteries")["precision"] == "bfloat16"


def _check_identical_copy_is_superseded(case: Case, out: Path, tmp_path: Path) -> None:
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["counts"]["superseded_files"] == 1
    assert manifest["counts"]["variants"] == 1
    _check_read_like_the_golden_file(case, out, tmp_path)


def _check_alpacaeval_null_dropped_zero_a_draw(
    case: Case, out: Path, tmp_path: Path
) -> None:
    leaderboard = pd.read_parquet(out / "leaderboard.parquet").iloc[0]
    assert leaderboard["model"] == "model-a"  # the folder's name
    # 1.9, null (dropped), 0 (a draw), 1.2: AlpacaEval's 3 kept, 1 win, 1 draw, 1 loss
    assert (leaderboard["n_total"], leaderboard["n_wins"]) == (3, 1)
    assert (leaderboard["n_draws"], leaderboard["n_wins_base"]) == (1, 1)
    assert leaderboard["win_rate"] == pytest.approx((0.9 + 0.5 + 0.2) / 3 * 100)


def _check_ulp_past_the_range_is_kept(case: Case, out: Path, tmp_path: Path) -> None:
    row = _subtask(out, "team_allocation")
    assert row["raw_score"] == 100.00000000000001  # kept as given, not clipped
    assert row["normalized_score"] > 100.0  # (100.00000000000001 - 33.3...) / 66.6...
    assert not row["is_clipped"]


CHECKS: dict[str, Callable[[Case, Path, Path], None]] = {
    name.removeprefix("_check_"): check
    for name, check in dict(globals()).items()
    if name.startswith("_check_")
}


@pytest.mark.parametrize("case", ACCEPTED, ids=[case.path for case in ACCEPTED])
def test_accepted_input_and_what_was_done(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _skip_unless_available(case)
    out = tmp_path / "out"
    assert main(_argv(case, out)) == 0
    assert capsys.readouterr().err == ""
    CHECKS[case.check](case, out, tmp_path)


# --- a results file of hundreds of MB, generated here --------------------------------


@pytest.mark.slow
def test_huge_results_file_is_read_with_bounded_memory(tmp_path: Path) -> None:
    """A real results file padded to 256 MiB in 'configs': read right, in O(file) memory."""
    source = (
        FIXTURES
        / "full_structure"
        / "01-ai"
        / "Yi-34B-Chat"
        / "results_2025-02-13T18-27-04.338360.json"
    )
    head, marker, tail = source.read_bytes().partition(b'"configs": {')
    assert marker
    size = 256 * 2**20
    huge = tmp_path / "tree" / "01-ai" / "Yi-34B-Chat" / source.name
    huge.parent.mkdir(parents=True)
    with huge.open("wb") as handle:
        handle.write(head + marker + b'"padding": "')
        chunk = b"x" * 2**20
        for _ in range(size // len(chunk)):
            handle.write(chunk)
        handle.write(b'", ' + tail)
    out = tmp_path / "out"
    with (tmp_path / "stderr").open("wb") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lbnorm",
                "run",
                str(huge.parent.parent.parent),
                "--out",
                str(out),
                "--quiet",
            ],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0, (tmp_path / "stderr").read_text()
    peak = usage.ru_maxrss * 1024  # kilobytes on Linux
    assert peak < 4 * size + 512 * 2**20, f"peak RSS {peak / 2**20:.0f} MiB"
    reference = tmp_path / "reference"
    assert main(["run", str(source), "--out", str(reference), "--quiet"]) == 0
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "leaderboard.parquet"),
        pd.read_parquet(reference / "leaderboard.parquet"),
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][0]["bytes"] == huge.stat().st_size > size


def _special_files(tmp_path: Path) -> dict[str, Path]:
    """A FIFO nobody writes, and /dev/zero under a table's name."""
    fifo = tmp_path / "option.toml"
    os.mkfifo(fifo)
    fifo_csv = tmp_path / "meta.csv"
    os.mkfifo(fifo_csv)
    zero_csv = tmp_path / "zero.csv"
    zero_csv.symlink_to("/dev/zero")
    return {"fifo": fifo, "fifo_csv": fifo_csv, "zero_csv": zero_csv}


SPECIAL_OPTION_VALUES = [
    (["run", "--suite", "{fifo}"], 3, "a FIFO"),
    (["run", "--suite", "/dev/zero"], 3, "a character device"),
    (["run", "--metadata", "{fifo_csv}"], 4, "a FIFO"),
    (["run", "--metadata", "{zero_csv}"], 4, "a character device"),
    (["health", "--config", "{fifo}"], 4, "a FIFO"),
    (["suites", "show", "{fifo}"], 3, "a FIFO"),
    (["impact", "--suite", "openllm-v2", "--suite", "{fifo}"], 3, "a FIFO"),
    (["query", "{out}", "SELECT 1", "--metadata", "{fifo_csv}"], 4, "a FIFO"),
]


def _special_argv(tmp_path: Path, previous_output: Path, argv: list[str]) -> list[str]:
    names = {**_special_files(tmp_path), "out": previous_output}
    args = [arg.format(**names) for arg in argv]
    return [*args, "--out", str(tmp_path / "out")] if args[0] == "run" else args


def _refused_at_once(code: int, what: str, expected: int, stderr: str) -> None:
    assert code == expected, stderr
    assert stderr.startswith("lbnorm: error:"), stderr
    assert f"is {what}" in stderr
    assert "not a regular file" in stderr
    assert "Hint:" in stderr
    assert "Traceback" not in stderr


@contextmanager
def _fifos_unblocked_after(seconds: float, folder: Path) -> Iterator[None]:
    """Should a reader be stuck opening a FIFO of `folder`, let it through (to EOF).

    A hang guard for the in-process test, as a subprocess's ``timeout`` is for a
    process: a read that waits for a writer ends, and the test fails on its
    message instead of blocking the suite. No time is asserted.
    """

    def unblock() -> None:
        for path in folder.iterdir():
            if path.is_fifo():
                with contextlib.suppress(OSError):  # ENXIO: nobody reads it
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    timer = threading.Timer(seconds, unblock)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
@pytest.mark.parametrize(("argv", "code", "what"), SPECIAL_OPTION_VALUES)
def test_special_files_as_option_values_are_refused_without_waiting(
    tmp_path: Path,
    previous_output: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    what: str,
) -> None:
    """A FIFO would block for ever and /dev/zero never end: both refused at once."""
    args = _special_argv(tmp_path, previous_output, argv)
    with _fifos_unblocked_after(60, tmp_path):
        done = main(args)
    _refused_at_once(done, what, code, capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
@pytest.mark.parametrize(
    ("argv", "code", "what"),
    [
        *SPECIAL_OPTION_VALUES[:2],
        # (quick sibling: the same, in-process, above)
        *(
            pytest.param(*case, marks=pytest.mark.slow)
            for case in SPECIAL_OPTION_VALUES[2:]
        ),
    ],
)
def test_special_files_as_option_values_are_refused_by_the_real_process(
    tmp_path: Path, previous_output: Path, argv: list[str], code: int, what: str
) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lbnorm",
            *_special_argv(tmp_path, previous_output, argv),
        ],
        capture_output=True,
        text=True,
        timeout=120,  # (a hang fails here instead of blocking the suite)
        check=False,
    )
    _refused_at_once(done.returncode, what, code, done.stderr)
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_a_fifo_as_the_cache_lock_is_refused_without_waiting(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    os.mkfifo(cache / ".lock")
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(GOLDEN_FILE, tree / "results_2024-01-01T00-00-00.json")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lbnorm",
            "run",
            str(tree),
            "--out",
            str(tmp_path / "out"),
            "--cache",
            str(cache),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 6, done.stderr
    assert f"--cache {cache}: cannot lock the cache" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_option_file_over_the_cap_is_refused(tmp_path: Path) -> None:
    from lbnorm.core.errors import InputError
    from lbnorm.core.files import read_option_file

    path = tmp_path / "big.toml"
    path.write_bytes(b"#" * 101)
    with pytest.raises(InputError, match=r"--suite .*big.toml: over 100 bytes.*\nHint"):
        read_option_file(path, option="--suite", max_bytes=100)
    assert read_option_file(path, option="--suite", max_bytes=101) == b"#" * 101
