"""How the command line ends its own process: atexit handlers run, streams flushed, no teardown."""

from __future__ import annotations

import argparse
import atexit
import functools
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from lbnorm import _runtime, cli


class _ExitCalledError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _fake_exit(code: int) -> None:
    raise _ExitCalledError(code)


def test_done_runs_the_atexit_handlers_flushes_and_exits_with_the_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ran: list[str] = []
    monkeypatch.setattr(os, "_exit", _fake_exit)
    monkeypatch.setattr(_runtime, "ignore_signals", lambda: ran.append("signals"))
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: ran.append("atexit"))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    out.write("summary\n")
    with pytest.raises(_ExitCalledError) as exited:
        cli._exit_done(6)
    assert exited.value.code == 6
    assert ran == ["signals", "atexit"]


class _Failing(io.StringIO):
    """A stream whose flush fails as a full disk (or a reader that left) makes it."""

    def __init__(self, error: OSError) -> None:
        super().__init__()
        self.error = error

    def flush(self) -> None:
        raise self.error


def _done_with(
    monkeypatch: pytest.MonkeyPatch, code: int, **streams: io.StringIO
) -> int:
    """`cli._exit_done(code)` with these streams; the code it exits with."""
    monkeypatch.setattr(os, "_exit", _fake_exit)
    monkeypatch.setattr(_runtime, "ignore_signals", lambda: None)
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: None)
    for name, stream in streams.items():
        monkeypatch.setattr(sys, name, stream)
    with pytest.raises(_ExitCalledError) as exited:
        cli._exit_done(code)
    return exited.value.code


def test_a_standard_output_full_at_exit_is_the_commands_output_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a buffered stdout held fails only when flushed: as a failed write, exit 6."""
    full = OSError(28, "No space left on device")
    err = io.StringIO()
    assert _done_with(monkeypatch, 0, stdout=_Failing(full), stderr=err) == 6
    assert err.getvalue() == (
        "lbnorm: error: cannot write to standard output: No space left on device; "
        "files the command wrote are complete.\n"
        "Hint: free space where standard output goes, or add --quiet.\n"
    )
    err = io.StringIO()
    assert _done_with(monkeypatch, 5, stdout=_Failing(full), stderr=err) == 5
    assert err.getvalue() == ""  # a failure keeps its own code and message


def test_a_reader_that_left_before_the_exit_is_no_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gone = BrokenPipeError(32, "Broken pipe")
    err = io.StringIO()
    assert _done_with(monkeypatch, 0, stdout=_Failing(gone), stderr=err) == 0
    assert err.getvalue() == ""


def test_a_standard_error_that_cannot_be_flushed_gives_pythons_code_120(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    full = _Failing(OSError(28, "No space left on device"))
    assert _done_with(monkeypatch, 0, stdout=io.StringIO(), stderr=full) == 120
    assert _done_with(monkeypatch, 5, stdout=io.StringIO(), stderr=full) == 5


def test_a_thread_still_running_is_left_to_pythons_own_exit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "_exit", _fake_exit)
    monkeypatch.setattr(_runtime, "ignore_signals", lambda: None)
    release = threading.Event()
    worker = threading.Thread(target=release.wait)  # not a daemon
    worker.start()
    try:  # returns: the ordinary exit will join the thread
        assert cli._exit_done(0) == 0
    finally:
        release.set()
        worker.join()


def test_an_interrupted_command_ends_its_process_whatever_still_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Python's own exit is not waited for: it would end the process by SIGINT."""
    monkeypatch.setattr(os, "_exit", _fake_exit)
    monkeypatch.setattr(_runtime, "ignore_signals", lambda: None)
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: None)
    release = threading.Event()
    worker = threading.Thread(target=release.wait)  # not a daemon
    worker.start()
    try:
        with pytest.raises(_ExitCalledError) as exited:
            cli._exit_done(130)
        assert exited.value.code == 130
    finally:
        release.set()
        worker.join()


def test_the_process_ends_with_the_commands_code_after_its_atexit_handlers(
    tmp_path: Path,
) -> None:
    script = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('atexit ran', flush=True))\n"
        "from lbnorm.cli import console_main\n"
        "sys.argv = ['lbnorm', 'run', 'missing.csv', '--out', 'out', '--quiet']\n"
        "console_main()\n"
        "print('not reached')\n"
    )
    done = _python(script, tmp_path)
    assert done.returncode == 4, done.stderr
    assert done.stdout == "atexit ran\n"
    assert "missing.csv" in done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("unbuffered", [True, False], ids=["unbuffered", "buffered"])
def test_a_full_standard_output_is_one_error_line_and_the_output_is_kept(
    tmp_path: Path, unbuffered: bool
) -> None:
    """Written at once (PYTHONUNBUFFERED) or buffered until the command ends: the same."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    with Path("/dev/full").open("w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "lbnorm", "run", "--out", "out"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            cwd=tmp_path,
            env=env,
        )
    assert done.returncode == 6, done.stderr
    assert done.stderr == (
        "lbnorm: error: cannot write to standard output: No space left on device; "
        "files the command wrote are complete.\n"
        "Hint: free space where standard output goes, or add --quiet.\n"
    )
    assert (tmp_path / "out" / "leaderboard.parquet").is_file()
    assert (tmp_path / "out" / "manifest.json").is_file()


def test_an_os_error_elsewhere_is_not_taken_for_standard_output(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    def broken(args: object) -> int:
        msg = "a bug's own error"
        raise OSError(5, msg)

    parser = cli.build_parser()
    real = parser.parse_args

    def parse(argv: list[str]) -> argparse.Namespace:
        args = real(argv)
        args.handler = broken
        return args

    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_args", parse)
    with pytest.raises(OSError, match="a bug's own error"):
        cli.main(["suites", "list"])
    assert capfd.readouterr().err == ""


#: The process-wide settings a command's own process makes, unless the user made them.
_SETTINGS = ("OPENBLAS_NUM_THREADS", "ARROW_DEFAULT_MEMORY_POOL")
#: What a command's process had at its exit: both settings, the allocator the run's
#: buffers came from, whether glibc may keep freed memory.
_AT_EXIT = (
    "import pyarrow as pa\n"
    "from lbnorm import _runtime\n"
    "print(os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    "print(os.environ.get('ARROW_DEFAULT_MEMORY_POOL'))\n"
    "print(pa.default_memory_pool().backend_name)\n"
    "print(_runtime._is_allowed)\n"
)


def _users_values() -> dict[str, str]:
    """The user's own settings: three OpenBLAS threads, jemalloc where this pyarrow has it."""
    arrow = {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}
    has_jemalloc = "jemalloc" in pa.supported_memory_backends()
    return {"OPENBLAS_NUM_THREADS": "3", **(arrow if has_jemalloc else {})}


@pytest.fixture(scope="module")
def console_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str, bool], list[str]]:
    """`lbnorm run` on the demo as the console command, after the code `before`,
    with the user's own settings or none: the lines :data:`_AT_EXIT` printed.

    Each distinct run is made once: the tests below read one run's several lines.
    """

    @functools.cache
    def run(before: str, users: bool) -> tuple[str, ...]:
        script = (
            "import atexit, os, sys\n"
            f"{before}"
            "def report():\n"
            + "".join(f"    {line}\n" for line in _AT_EXIT.splitlines())
            + "atexit.register(report)\n"
            "from lbnorm.cli import console_main\n"
            "sys.argv = ['lbnorm', 'run', '--out', 'out', '--quiet']\n"
            "console_main()\n"
        )
        env = {k: v for k, v in os.environ.items() if k not in _SETTINGS}
        env.update(_users_values() if users else {})
        folder = tmp_path_factory.mktemp("console")
        done = _python(script, folder, env=env)
        assert done.returncode == 0, done.stderr
        assert (folder / "out" / "leaderboard.parquet").is_file()
        return tuple(done.stdout.splitlines())

    return lambda before, users: list(run(before, users))


@pytest.mark.parametrize(
    ("before", "users", "expected"),
    [
        ("", False, "1"),  # a command's own process: one OpenBLAS thread
        ("", True, "3"),  # the user's own setting is kept
        ("import numpy\n", False, None),  # numpy loaded already: too late, untouched
    ],
)
def test_a_command_keeps_openblas_to_one_thread_unless_told_otherwise(
    console_run: Callable[[str, bool], list[str]],
    before: str,
    users: bool,
    expected: str | None,
) -> None:
    assert console_run(before, users)[0] == str(expected)


@pytest.mark.parametrize(
    ("before", "users", "expected"),
    [
        ("", False, "system"),  # a command's own process: the system allocator
        ("", True, "jemalloc"),  # the user's own choice is kept
        ("import numpy\n", False, "system"),  # numpy alone loaded already: still set
        ("import pyarrow\n", False, None),  # pyarrow loaded already: untouched
    ],
)
def test_a_command_has_arrow_allocate_with_the_system_allocator_unless_told_otherwise(
    console_run: Callable[[str, bool], list[str]],
    before: str,
    users: bool,
    expected: str | None,
) -> None:
    if users and "ARROW_DEFAULT_MEMORY_POOL" not in _users_values():
        pytest.skip("this pyarrow has no jemalloc allocator")
    _, variable, backend, _ = console_run(before, users)
    assert variable == str(expected)
    if expected is not None:  # the allocator the run's buffers came from
        assert backend == expected


#: Runs ``main(["run", ...])`` as a library call would, and prints what the
#: process-wide state was before and after: the environment, the signal
#: handlers, whether glibc may keep (or keeps) freed memory.
_LIBRARY_CALL = """
import json, os, signal, sys
from lbnorm import _runtime
from lbnorm.cli import main

def state():
    return {
        "environ": dict(os.environ),
        "signals": [repr(signal.getsignal(n)) for n in (signal.SIGINT, signal.SIGTERM)],
        "heap": [_runtime._is_allowed, _runtime._is_kept],
    }

before = state()
codes = [main(["run", "--out", "out", "--quiet"]), main(["suites", "list"])]
print(json.dumps({"codes": codes, "before": before, "after": state()}))
"""


@pytest.mark.parametrize("engine", ["memory", "stream"])
def test_main_from_python_leaves_the_process_as_it_found_it(
    tmp_path: Path, engine: str
) -> None:
    """No environment variable, signal handler or allocator setting changes."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"OPENBLAS_NUM_THREADS", "ARROW_DEFAULT_MEMORY_POOL"}
    }
    script = _LIBRARY_CALL.replace('"--quiet"]', f'"--quiet", "--engine", "{engine}"]')
    done = _python(script, tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["codes"] == [0, 0]
    assert report["after"] == report["before"]
    assert report["before"]["heap"] == [False, False]
    assert "OPENBLAS_NUM_THREADS" not in report["after"]["environ"]
    assert (tmp_path / "out" / "leaderboard.parquet").is_file()


def test_the_console_command_keeps_freed_memory(
    console_run: Callable[[str, bool], list[str]],
) -> None:
    """The command's own process: glibc may keep freed memory, as a run asks."""
    assert console_run("", False)[3] == "True"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_numpy_then_starts_no_blas_thread_of_its_own(tmp_path: Path) -> None:
    script = (
        "import os, sys\n"
        "from lbnorm import cli\n"
        "if sys.argv[1] == 'one': cli._one_blas_thread()\n"
        "before = len(os.listdir('/proc/self/task'))\n"
        "import numpy\n"
        "print(len(os.listdir('/proc/self/task')) - before)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def new_threads(mode: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", script, mode],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,
            env=env,
        )
        return int(done.stdout)

    if new_threads("default") == 0:
        pytest.skip("this numpy starts no BLAS threads (one core, or another BLAS)")
    assert new_threads("one") == 0


def _python(
    script: str, cwd: Path, *, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `script` in a Python process of its own in `cwd`; its output as text."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
    )
