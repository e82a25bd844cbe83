"""Ctrl-C, SIGTERM and SIGKILL against real ``lbnorm`` processes and their workers.

A Ctrl-C at any moment from the command line's start (its imports included) ends
the run with one line and exit 130; SIGTERM the same way with exit 143; workers
print nothing of their own, and none outlives its parent, even a SIGKILLed one
(issue 14, points 3, 13 and 14). Signals land at named points of a run through
``LBNORM_FAULT_POINT`` (see ``lbnorm.core.faults``) or from outside at random moments.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lbnorm._runtime import available_cores, can_fork
from lbnorm.engines import workers as stream_workers
from lbnorm.engines.workers import sum_in_workers
from lbnorm.pipeline import demo_path

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
ONE = GOLDEN / "Amu__t1-3B.json"
TWO = GOLDEN / "AIDC-AI__Marco-o1.json"
EPOCH = "1700000000"
#: A liveness bound, not a timing: a stuck worker would wait forever.
PATIENCE = 60.0
INTERRUPTED = "lbnorm: interrupted; the previous output is unchanged.\n"
TERMINATED = "lbnorm: terminated; the previous output is unchanged.\n"


def _digests(folder: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
    }


def _env(fault: str = "") -> dict[str, str]:
    env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH}
    env.pop("LBNORM_FAULT_POINT", None)
    if fault:
        env["LBNORM_FAULT_POINT"] = fault
    return env


def _lbnorm(launcher: str = "module") -> list[str]:
    """How a user starts lbnorm: ``python -m lbnorm`` or the console script."""
    if launcher == "module":
        return [sys.executable, "-m", "lbnorm"]
    script = Path(sys.executable).with_name("lbnorm")
    if not script.is_file():
        pytest.skip("the lbnorm console script is not installed beside python")
    return [str(script)]


# --- /proc: a process's children, state, and handled signals ---------------------------


def _stat(pid: int) -> list[str]:
    """Fields of /proc/PID/stat after the command name (state first); [] if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text.rsplit(")", 1)[1].split()


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields and int(fields[1]) == pid:
                found.append(int(entry.name))
    return sorted(found)


def _is_alive(pid: int) -> bool:
    """Running, sleeping or stopped: not gone and not a zombie awaiting its reaper."""
    fields = _stat(pid)
    return bool(fields) and fields[0] not in {"Z", "X"}


def _handles(pid: int, number: int) -> bool:
    """Whether the process has a handler for signal `number` (SigCgt)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return False
    caught = next(
        (line.split()[1] for line in lines if line.startswith("SigCgt:")), "0"
    )
    return bool(int(caught, 16) & (1 << (number - 1)))


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll `condition()` until true, within :data:`PATIENCE` (a hang fails)."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.005)


def _has_started(process: subprocess.Popen[bytes]) -> bool:
    """Whether lbnorm's main runs (it handles SIGTERM from then on) or has ended."""
    return _handles(process.pid, signal.SIGTERM) or process.poll() is not None


def _have_ended(pids: list[int]) -> bool:
    return not any(map(_is_alive, pids))


def _read_all(stream: IO[bytes]) -> threading.Thread:
    """Read `stream` to its end in a thread: the end comes when no process holds it."""
    chunks: list[bytes] = []

    def read() -> None:
        with stream:
            chunks.append(stream.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.chunks = chunks  # type: ignore[attr-defined]
    return reader


# --- fixtures: an old output, a Parquet input with row groups, a results tree ---------


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    old: Path  # an output written from the golden file
    big: Path  # the demo six times over (other model names), 22 row groups
    tree: Path  # a results tree of 2,000 files


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    folder = tmp_path_factory.mktemp("signals")
    old = folder / "old"
    subprocess.run(
        [*_lbnorm(), "run", str(ONE), "--out", str(old), "--quiet"],
        env=_env(),
        check=True,
    )
    demo = pq.read_table(demo_path())
    model = demo.schema.field("model")
    copies = [demo] + [
        demo.set_column(
            0,
            model,
            pc.binary_join_element_wise(
                demo["model"].cast(pa.string()), pa.scalar(f"-{copy}"), ""
            ),
        )
        for copy in range(1, 6)
    ]
    big = folder / "big.parquet"
    pq.write_table(pa.concat_tables(copies), big, row_group_size=50_000)
    tree = folder / "tree"
    files = sorted(GOLDEN.glob("*.json"))
    for index in range(2_000):
        document = json.loads(files[index % len(files)].read_text())
        document["model_name"] = f"org{index}/model"
        path = (
            tree / f"org{index}" / "model" / "results_2025-01-01T00-00-00.000000.json"
        )
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(document))
    return Setup(old=old, big=big, tree=tree)


@pytest.fixture
def out(setup: Setup, tmp_path: Path) -> Iterator[Path]:
    """A copy of the old output; after the test, nothing may lie beside it."""
    copy = tmp_path / "out"
    shutil.copytree(setup.old, copy)
    yield copy
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _stream(setup: Setup, out: Path) -> list[str]:
    return [
        "run",
        str(setup.big),
        "--engine",
        "stream",
        "--workers",
        "2",
        "--no-subtasks",
        "--out",
        str(out),
        "--quiet",
    ]


# --- quick: what a worker holds --------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Share:
    payload: bytes = b""


def _big_share(part: int, parts: int) -> _Share:
    return _Share(payload=bytes(4 * 2**20))  # far more than a pipe buffers


@pytest.mark.skipif(not can_fork(), reason="no fork here")
def test_a_worker_whose_pipe_lost_its_reader_exits() -> None:
    """A worker holds no read end of the pipes, its own included: with the parent
    gone, sending fails at once instead of blocking forever."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=stream_workers._work,
        args=(_big_share, 0, 1, sender, [receiver], os.getpid()),
        daemon=True,
    )
    process.start()
    sender.close()
    receiver.close()  # as if the parent had died: nobody will read
    process.join(PATIENCE)
    try:
        assert process.exitcode == 0  # ended quietly, not stuck in send()
    finally:
        process.kill()


@pytest.mark.skipif(not can_fork(), reason="no fork here")
def test_workers_sums_arrive_whole() -> None:
    shares = sum_in_workers(_big_share, 2)
    assert len(b"".join(share.payload for share in shares)) == 8 * 2**20


def _named_share(part: int, parts: int) -> _Share:
    return _Share(payload=f"{part}/{parts};".encode())


@pytest.mark.skipif(not can_fork(), reason="no fork here")
def test_workers_are_capped_at_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """--workers 100000 forked thousands of processes; now one per core."""
    monkeypatch.setattr(stream_workers, "available_cores", lambda: 3)
    assert stream_workers.most_workers() == 3
    shares = sum_in_workers(_named_share, 100_000)
    assert b"".join(share.payload for share in shares) == b"0/3;1/3;2/3;"


def test_too_many_workers_are_noted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lbnorm.cli import main

    expected = stream_workers.most_workers()
    args = ["run", str(demo_path()), "--no-subtasks", "--engine", "stream", "--quiet"]
    assert main([*args, "--workers", "100000", "--out", str(tmp_path / "a")]) == 0
    assert capsys.readouterr().err == (
        f"note: --workers 100000 is more than the {expected} cores this run may "
        f"use; it sums in {expected} processes\n"
    )
    assert main([*args, "--workers", "2", "--out", str(tmp_path / "b")]) == 0
    assert capsys.readouterr().err == ""
    assert pq.read_table(tmp_path / "a" / "leaderboard.parquet").num_rows == (
        pq.read_table(tmp_path / "b" / "leaderboard.parquet").num_rows
    )


# --- Ctrl-C and SIGTERM from the start ---------------------------------------------------

_BOTH_LAUNCHERS = pytest.mark.parametrize("launcher", ["module", "script"])
#: Each signal, with the exit code and the one line it ends a command with.
_BOTH_SIGNALS = pytest.mark.parametrize(
    ("number", "code", "message"),
    [(signal.SIGINT, 130, INTERRUPTED), (signal.SIGTERM, 143, TERMINATED)],
    ids=["ctrl-c", "sigterm"],
)


@pytest.mark.slow
@_BOTH_LAUNCHERS
@_BOTH_SIGNALS
def test_a_signal_at_the_first_step_is_one_line(
    launcher: str, number: int, code: int, message: str, out: Path, setup: Setup
) -> None:
    """Stopped at the command line's first step, then signalled and resumed."""
    process = subprocess.Popen(
        [*_lbnorm(launcher), "run", str(ONE), "--out", str(out), "--quiet"],
        env=_env("starting:stop"),
        stderr=subprocess.PIPE,
    )
    _, status = os.waitpid(process.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status)
    os.kill(process.pid, number)
    os.kill(process.pid, signal.SIGCONT)
    _, stderr = process.communicate(timeout=PATIENCE)
    assert (process.returncode, stderr.decode()) == (code, message)
    assert _digests(out) == _digests(setup.old)


#: Loads the command as the console script does (``from lbnorm.__main__ import
#: main``) and reports, for each heavy module, who handled SIGTERM and SIGINT
#: when it began to load.
_FIRST_STEP = """
import importlib.abc, json, signal, sys

seen = {}

class _Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in ("lbnorm.cli", "numpy", "pyarrow") and name not in seen:
            seen[name] = [
                getattr(signal.getsignal(n), "__qualname__", str(signal.getsignal(n)))
                for n in (signal.SIGTERM, signal.SIGINT)
            ]
        return None

sys.meta_path.insert(0, _Watch())
from lbnorm.__main__ import main
import numpy, pyarrow
print(json.dumps(seen))
"""


def _python_code(code: str) -> subprocess.CompletedProcess[str]:
    """`code` run by this Python in a process of its own."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )


def test_the_console_script_takes_the_signals_before_the_heavy_imports() -> None:
    """Issue 40.6: the installed script's entry is lbnorm.__main__, whose first step takes them."""
    import tomllib

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["lbnorm"] == "lbnorm.__main__:main"
    done = _python_code(_FIRST_STEP)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {
        name: ["_on_signal", "_on_signal"]
        for name in ("lbnorm.cli", "numpy", "pyarrow")
    }


@pytest.mark.slow
@_BOTH_LAUNCHERS
@_BOTH_SIGNALS
def test_a_signal_in_the_first_50_ms_is_one_line(
    launcher: str, number: int, code: int, message: str, out: Path, setup: Setup
) -> None:
    """Issue 40.6: from lbnorm's first step (it handles SIGTERM), a signal in the next 50 ms.

    The imports of the command line and its libraries come after that step.
    """
    for trial in range(6):
        process = subprocess.Popen(
            [*_lbnorm(launcher), "run", str(ONE), "--out", str(out), "--quiet"],
            env=_env(),
            stderr=subprocess.PIPE,
        )
        _wait_for(partial(_has_started, process), "lbnorm's first step")
        time.sleep(random.Random(trial).uniform(0.0, 0.05))
        os.kill(process.pid, number)
        _, stderr = process.communicate(timeout=PATIENCE)
        assert (process.returncode, stderr.decode()) == (code, message)
        assert _digests(out) == _digests(setup.old)


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["module", "script"])
def test_ctrl_c_during_imports_and_after_never_prints_a_traceback(
    launcher: str, out: Path, setup: Setup
) -> None:
    """From the moment main runs (it handles SIGTERM), a Ctrl-C in the next 0.3 s."""
    new: dict[str, str] = {}
    for trial in range(8):
        before = _digests(out)  # the old output, or the new one a trial finished
        process = subprocess.Popen(
            [
                *_lbnorm(launcher),
                "run",
                str(ONE),
                str(TWO),
                "--out",
                str(out),
                "--quiet",
            ],
            env=_env(),
            stderr=subprocess.PIPE,
        )
        _wait_for(partial(_has_started, process), "main to start")
        time.sleep(random.Random(trial).uniform(0.0, 0.3))
        os.kill(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=PATIENCE)
        if process.returncode == 0:  # finished first: then it wrote the new output
            new = new or _digests(out)
            assert _digests(out) == new != _digests(setup.old)
            continue
        if stderr.decode().startswith(
            "lbnorm: interrupted; the new output is in place"
        ):
            assert process.returncode == 130  # after the swap: said truly
            new = new or _digests(out)
            # the new output (an earlier trial may have put the same one in place)
            assert _digests(out) == new != _digests(setup.old)
            continue
        assert (process.returncode, stderr.decode()) == (130, INTERRUPTED)
        assert _digests(out) == before


# --- workers: Ctrl-C, SIGTERM, a worker killed, the parent killed ------------------------


@pytest.mark.slow
@pytest.mark.skipif(not can_fork(), reason="no fork here")
def test_workers_ignore_ctrl_c(out: Path, setup: Setup) -> None:
    """Each worker sends itself SIGINT as it starts: no traceback, the run goes on."""
    process = subprocess.run(
        [*_lbnorm(), *_stream(setup, out)],
        env=_env("worker-summing:int"),
        capture_output=True,
        text=True,
        check=False,
        timeout=PATIENCE * 5,
    )
    assert (process.returncode, process.stderr) == (0, "")
    assert _digests(out) != _digests(setup.old)


@pytest.mark.slow
@pytest.mark.skipif(not can_fork(), reason="no fork here")
@pytest.mark.parametrize(
    ("number", "code", "message"),
    [(signal.SIGINT, 130, INTERRUPTED), (signal.SIGTERM, 143, TERMINATED)],
    ids=["ctrl-c", "sigterm"],
)
def test_a_signal_to_the_whole_group_during_workers(
    number: int, code: int, message: str, out: Path, setup: Setup
) -> None:
    """As a terminal's Ctrl-C or a supervisor's stop: the parent alone speaks."""
    process = subprocess.Popen(
        [*_lbnorm(), *_stream(setup, out)],
        env=_env("worker-summing:stop"),
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as under a terminal
    )
    _wait_for(
        lambda: (
            len(workers := _children(process.pid)) == 2
            and all(_stat(pid)[0] == "T" for pid in workers)
        ),
        "both workers to stop",
    )
    workers = _children(process.pid)
    os.killpg(process.pid, number)
    os.killpg(process.pid, signal.SIGCONT)
    _, stderr = process.communicate(timeout=PATIENCE)
    assert (process.returncode, stderr.decode()) == (code, message)
    _wait_for(partial(_have_ended, workers), "the workers to end")
    assert _digests(out) == _digests(setup.old)


@pytest.mark.slow
@pytest.mark.skipif(not can_fork(), reason="no fork here")
def test_a_worker_killed_from_outside_is_a_clear_error(out: Path, setup: Setup) -> None:
    """The out-of-memory killer sends SIGKILL: say so, without a traceback."""
    process = subprocess.run(
        [*_lbnorm(), *_stream(setup, out)],
        env=_env("worker-summing:kill"),
        capture_output=True,
        text=True,
        check=False,
        timeout=PATIENCE,
    )
    assert process.returncode == 1
    assert process.stderr == (
        "lbnorm: error: lbnorm worker 1 of 2 was killed by SIGKILL (the out-of-memory "
        "killer sends it).\nHint: give the run more memory, or run with --workers 1.\n"
    )
    assert _digests(out) == _digests(setup.old)


#: Starts lbnorm with workers that lack the parent-death signal, so that only
#: their closed pipes can end them.
_WITHOUT_PDEATHSIG = """
import signal, sys
import lbnorm.engines.workers as workers
def start_worker(parent):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
workers.start_worker = start_worker
from lbnorm.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not can_fork(), reason="no fork here")
@pytest.mark.parametrize("death", ["parent-death signal", "closed pipe only"])
def test_a_sigkilled_parent_leaves_no_stream_worker(
    death: str, out: Path, setup: Setup
) -> None:
    """kill -9 of the parent (or the OOM killer): its workers end, stderr closes."""
    start = (
        _lbnorm()
        if death == "parent-death signal"
        else [sys.executable, "-c", _WITHOUT_PDEATHSIG]
    )
    process = subprocess.Popen(
        [*start, *_stream(setup, out)],
        env=_env("workers-started:stop"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    _, status = os.waitpid(process.pid, os.WUNTRACED)
    assert os.WIFSTOPPED(status)
    workers = _children(process.pid)
    assert len(workers) == 2
    reader = _read_all(process.stderr)  # ends when no process holds the pipe
    process.kill()
    process.wait()
    reader.join(PATIENCE)
    assert not reader.is_alive(), "a worker still holds the parent's stderr"
    assert reader.chunks == [b""]  # type: ignore[attr-defined]
    _wait_for(partial(_have_ended, workers), "the orphaned workers to end")
    assert _digests(out) == _digests(setup.old)
    subprocess.run(  # the next run removes what the killed one left
        [*_lbnorm(), "run", str(ONE), "--out", str(out), "--quiet"],
        env=_env(),
        check=True,
    )


def _tree_run(setup: Setup, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*_lbnorm(), "run", str(setup.tree), "--out", str(out), "--quiet"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _ignores_ctrl_c(pid: int) -> bool:
    """Whether the process ignores SIGINT (SigIgn): a worker past its start."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return False
    ignored = next(
        (line.split()[1] for line in lines if line.startswith("SigIgn:")), "0"
    )
    return bool(int(ignored, 16) & (1 << (signal.SIGINT - 1)))


def _parse_workers(process: subprocess.Popen[bytes], *, started: bool) -> list[int]:
    """The results-tree reader's workers once all are forked and set up (else as
    soon as one is forked); empty if the run ended first."""
    expected = min(available_cores(), 2) if started else 1

    def ready() -> bool:
        workers = _children(process.pid)
        if started:
            workers = [pid for pid in workers if _ignores_ctrl_c(pid)]
        return len(workers) >= expected or process.poll() is not None

    _wait_for(ready, "the parse workers")
    return _children(process.pid)


def _ctrl_c_the_tree_run(setup: Setup, out: Path, *, started: bool) -> bool:
    """Ctrl-C a results-tree run with its workers; whether it was interrupted."""
    process = _tree_run(setup, out)
    try:
        workers = _parse_workers(process, started=started)
        with contextlib.suppress(ProcessLookupError):  # (it may have ended first)
            os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=PATIENCE)
    finally:
        with contextlib.suppress(ProcessLookupError):  # a hung run: end it
            os.killpg(process.pid, signal.SIGKILL)
    _wait_for(partial(_have_ended, workers), "the parse workers to end")
    if process.returncode == 0:  # it finished before the signal landed
        assert stderr.decode() == ""
        shutil.rmtree(out)
        shutil.copytree(setup.old, out)
        return False
    assert (process.returncode, stderr.decode()) == (130, INTERRUPTED)
    assert _digests(out) == _digests(setup.old)
    return True


@pytest.mark.slow
@pytest.mark.skipif(
    not can_fork() or available_cores() < 2, reason="the tree is read in one process"
)
def test_ctrl_c_while_a_results_tree_is_parsed_in_workers(
    out: Path, setup: Setup
) -> None:
    """Workers that have started ignore Ctrl-C; the parent says one line."""
    assert sum(_ctrl_c_the_tree_run(setup, out, started=True) for _ in range(3))


@pytest.mark.slow
@pytest.mark.skipif(
    not can_fork() or available_cores() < 2, reason="the tree is read in one process"
)
def test_ctrl_c_while_the_parse_workers_start(out: Path, setup: Setup) -> None:
    for _ in range(2):
        _ctrl_c_the_tree_run(setup, out, started=False)


@pytest.mark.slow
@pytest.mark.skipif(
    not can_fork() or available_cores() < 2, reason="the tree is read in one process"
)
def test_a_sigkilled_parent_leaves_no_parse_worker(out: Path, setup: Setup) -> None:
    process = _tree_run(setup, out)
    workers = _parse_workers(process, started=True)
    assert workers, "the run ended before its workers were seen"
    assert process.stderr is not None
    reader = _read_all(process.stderr)
    process.kill()
    process.wait()
    reader.join(PATIENCE)
    assert not reader.is_alive(), "a worker still holds the parent's stderr"
    _wait_for(partial(_have_ended, workers), "the orphaned workers to end")
    assert _digests(out) == _digests(setup.old)


# --- lbnorm query: DuckDB interrupted --------------------------------------------------


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's output, written in this process: the query's process is the test's."""
    from lbnorm import run

    out = tmp_path_factory.mktemp("query") / "out"
    run(out=out)
    return out


@pytest.mark.parametrize(
    ("number", "code", "line"),
    [
        (signal.SIGINT, 130, "lbnorm: interrupted.\n"),
        pytest.param(  # (the quick run: SIGINT's; SIGTERM's code and line, quick, elsewhere)
            signal.SIGTERM, 143, "lbnorm: terminated.\n", marks=pytest.mark.slow
        ),
    ],
)
def test_a_signal_interrupts_a_long_query(
    demo_out: Path, number: int, code: int, line: str
) -> None:
    """A self-join that would run for days: the signal ends it, one line, no traceback.

    A query writes nothing: the line speaks of no output (issue 40, point 5)."""
    sql = (
        "SELECT count(*) FROM scores a, scores b, scores c "
        "WHERE a.raw_score + b.raw_score > c.raw_score"
    )
    process = subprocess.Popen(
        [*_lbnorm(), "query", str(demo_out), sql],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        while (fields := _stat(process.pid)) and (
            int(fields[11]) + int(fields[12]) < 2 * ticks  # imported (~1.3 s), joining
        ):
            time.sleep(0.05)
        assert process.poll() is None, process.communicate()
        process.send_signal(number)
        stdout, stderr = process.communicate(timeout=PATIENCE)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == code
    assert stderr == line
    assert stdout == ""


def test_the_first_step_leaves_an_ignored_signal_ignored() -> None:
    """A command started with Ctrl-C ignored (``nohup``, a background job) keeps ignoring it."""
    code = (
        "import signal\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "import lbnorm.__main__\n"
        "print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN,"
        " getattr(signal.getsignal(signal.SIGTERM), '__qualname__', ''))\n"
    )
    done = _python_code(code)
    assert (done.returncode, done.stdout) == (0, "True _on_signal\n"), done.stderr
