"""Out of memory is named as such: exit 8, where it happened, what is in place (issue 40, point 4).

Under ``ulimit -v`` numpy raised ``_ArrayMemoryError`` and Arrow ``ArrowMemoryError``
tracebacks, a thread that could not start a ``RuntimeError`` traceback, and a reader
wrapped "malloc of size 1600000 failed" as a damaged file ("the file may be
truncated; rewrite it") about a sound file. :func:`lbnorm.core.errors.memory_failure`
recognises each, through the chain of causes, and the command line says so once.
"""

from __future__ import annotations

import builtins
import errno
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm.cli import main
from lbnorm.core.errors import ExitCode, InputError, memory_failure
from lbnorm.pipeline import demo_path

FIXTURES = Path(__file__).parent / "fixtures"
GOLDEN = sorted(str(path) for path in (FIXTURES / "golden").glob("*.json"))
BATTLES = str(FIXTURES / "battles" / "battles.csv")
HINT = "\nHint: give lbnorm more memory (ulimit -v, the container's limit), or ask for less"


def _numpy_memory_error() -> MemoryError:
    try:
        np.empty(2**62, dtype=np.uint8)
    except MemoryError as exc:
        return exc
    pytest.fail("numpy allocated 4 EiB")


def _raised_in_arrow(error: OSError) -> OSError:
    """`error` raised where Arrow raises its I/O errors (Python's OSError, from its code)."""
    try:
        exec(compile("raise error", "pyarrow/error.pxi", "exec"), {"error": error})
    except OSError as exc:
        return exc
    pytest.fail("not raised")


def _wrapped(cause: BaseException) -> InputError:
    """An lbnorm error raised from `cause`, as a reader raises one."""
    try:
        try:
            raise cause
        except BaseException as exc:
            msg = "x.parquet: cannot read row group 2: ...\nHint: the file may be truncated."
            raise InputError(msg) from exc
    except InputError as error:
        return error


MEMORY = {
    "numpy": _numpy_memory_error,
    "arrow malloc": lambda: pa.ArrowMemoryError("malloc of size 1600000 failed"),
    "arrow thread": lambda: pa.lib.ArrowException(
        "Unknown error: Failed to launch worker thread: Resource temporarily unavailable"
    ),
    "zstd": lambda: _raised_in_arrow(OSError("ZSTD_DCtx create failed")),
    "python thread": lambda: RuntimeError("can't start new thread"),
    "library": lambda: ImportError(
        "/x/_duckdb.so: failed to map segment from shared object"
    ),
    "enomem": lambda: OSError(errno.ENOMEM, os.strerror(errno.ENOMEM)),
}

NOT_MEMORY = {
    "lbnorm's message": lambda: InputError("out of memory.csv: no such file"),
    "a file named so": lambda: FileNotFoundError(
        2, "No such file", "out of memory.csv"
    ),
    "arrow's file named so": lambda: _raised_in_arrow(
        FileNotFoundError(2, "Failed to open local file 'out of memory.csv'")
    ),
    "python's value error": lambda: ValueError("out of memory"),
    "arrow parse error": lambda: pa.ArrowInvalid("CSV parse error: expected 4 columns"),
    "a missing module": lambda: ModuleNotFoundError("No module named 'duckdb'"),
}


@pytest.mark.parametrize("make", MEMORY.values(), ids=MEMORY.keys())
def test_memory_failures_are_recognised_directly_and_through_a_cause(make: Any) -> None:
    failure: BaseException = make()
    assert memory_failure(failure) is failure
    assert memory_failure(_wrapped(make())) is not None


@pytest.mark.parametrize("make", NOT_MEMORY.values(), ids=NOT_MEMORY.keys())
def test_other_errors_are_not_taken_for_memory(make: Any) -> None:
    assert memory_failure(make()) is None
    assert memory_failure(_wrapped(make())) is None


def test_duckdbs_out_of_memory_is_recognised() -> None:
    duckdb = pytest.importorskip("duckdb")
    failure = duckdb.OutOfMemoryException("Out of Memory Error: Allocation failure")
    assert memory_failure(failure) is failure


def _raise(error: BaseException) -> Any:
    def raising(*args: object, **kwargs: object) -> Any:
        raise error

    return raising


def test_a_memory_error_while_computing_is_exit_8_and_replaces_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import lbnorm.pipeline

    monkeypatch.setattr(lbnorm.pipeline, "run", _raise(_numpy_memory_error()))
    assert main(["run", *GOLDEN, "--out", str(tmp_path / "out")]) == ExitCode.MEMORY
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"lbnorm: error: out of memory: Unable to allocate 4\.00 EiB for an array with "
        r"shape \(4611686018427387904,\) and data type uint8; no output was replaced\."
        + re.escape(HINT)
        + r".*\n",
        err,
    ), err
    assert list(tmp_path.iterdir()) == []


def test_a_reader_out_of_memory_is_not_called_a_damaged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        pq.ParquetFile,
        "read_row_group",
        _raise(pa.ArrowMemoryError("malloc of size 1600000 failed")),
    )
    assert main(["run", "--out", str(tmp_path / "out")]) == ExitCode.MEMORY
    err = capsys.readouterr().err
    assert err.startswith(
        f"lbnorm: error: out of memory: {demo_path()}: cannot read row group 0: "
        "malloc of size 1600000 failed; no output was replaced." + HINT
    ), err
    assert "truncated" not in err
    assert list(tmp_path.iterdir()) == []


def test_after_the_swap_the_message_says_the_new_output_is_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import lbnorm.faces.terminal

    out = tmp_path / "out"
    monkeypatch.setattr(lbnorm.faces.terminal, "format_summary", _raise(MemoryError()))
    assert main(["run", *GOLDEN, "--out", str(out)]) == ExitCode.MEMORY
    err = capsys.readouterr().err
    assert err.startswith(
        "lbnorm: error: out of memory: an allocation failed; the new output is in "
        f"place in {out}." + HINT
    ), err
    assert (out / "leaderboard.parquet").is_file()


def test_a_library_that_cannot_be_mapped_is_not_called_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["run", *GOLDEN, "--out", str(out), "--quiet"]) == 0
    real_import = builtins.__import__
    unmappable = ImportError("/x/_duckdb.so: failed to map segment from shared object")

    def importing(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "duckdb":
            raise unmappable
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "duckdb", raising=False)
    monkeypatch.setattr(builtins, "__import__", importing)
    assert main(["query", str(out), "SELECT 1"]) == ExitCode.MEMORY
    err = capsys.readouterr().err
    assert err.startswith(
        "lbnorm: error: out of memory: /x/_duckdb.so: failed to map segment from "
        "shared object; no output was replaced."
    ), err
    assert "not installed" not in err


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.slow  # two real runs (quick siblings above, in this process)
def test_a_real_run_out_of_memory_while_writing_keeps_the_previous_output(
    tmp_path: Path,
) -> None:
    out = tmp_path / "parent" / "out"
    assert main(["run", *GOLDEN[:4], "--out", str(out), "--quiet"]) == 0
    before = _snapshot(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "lbnorm", "run", *GOLDEN, "--out", str(out), "--quiet"],
        env={**os.environ, "LBNORM_FAULT_POINT": "table-written@2:memory"},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == ExitCode.MEMORY, done.stderr
    assert done.stderr.startswith(
        "lbnorm: error: out of memory: Unable to allocate 1.00 GiB at table-written "
        "(LBNORM_FAULT_POINT); no output was replaced." + HINT
    ), done.stderr
    assert _snapshot(tmp_path) == before  # nothing beside it, nothing changed


#: Imports everything first, then limits the address space to what is mapped
#: plus `headroom` MiB (``ulimit -v``), and runs the command line.
_UNDER_LIMIT = """
import resource, sys
import numpy, pyarrow, pyarrow.parquet
import lbnorm.arena, lbnorm.cli, lbnorm.ratings
mapped = next(
    int(line.split()[1]) * 1024
    for line in open("/proc/self/status")
    if line.startswith("VmSize:")
)
limit = mapped + int(sys.argv[1]) * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.exit(lbnorm.cli.main(sys.argv[2:]))
"""


@pytest.mark.slow  # a real process under an address-space limit
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="Linux /proc only")
def test_under_an_address_space_limit_a_bootstrap_too_big_is_named(
    tmp_path: Path,
) -> None:
    """A bootstrap the memory allowance lets through (--max-memory 1000) but the
    limit does not: 20 million rounds under 400 MiB of headroom."""
    out = tmp_path / "out"
    argv = [BATTLES, "--out", str(out), "--bootstrap", "20000000"]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _UNDER_LIMIT,
            "400",
            "arena",
            *argv,
            "--max-memory",
            "1000",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == ExitCode.MEMORY, done.stderr
    assert done.stderr.startswith("lbnorm: error: out of memory: "), done.stderr
    assert "; no output was replaced." + HINT in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []
