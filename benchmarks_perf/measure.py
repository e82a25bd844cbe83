"""The one measuring module: whole processes, interleaved rounds, medians, peak RSS.

Every benchmark script measures through :func:`interleaved`: each competitor is a
separate process (so its time covers the interpreter start, the imports, the read,
the work and the writes), competitors run in rounds (A B C, then B C A, ...: the
order rotates), the inputs are read right before every run (warm page cache; an
idle file drops out of the cache within about 30 s here), and the report quotes
medians. Peak RSS comes from ``os.wait4``: the largest of the process and the
children it waited for, not their sum.

Standard library only, and so are the scripts that import it at their top: Linux
starts a child's ``ru_maxrss`` at its parent's resident size (the high-water mark
survives ``fork`` and ``exec``), so a measuring process that had imported pandas
would add ~100 MB to every peak it reports. Data generation and output checks run
in child processes for the same reason.

The module also holds what several scripts share: the commands that run lbnorm
and the peers, the data directory, and the header (lbnorm's commit and location,
library versions, the machine) printed above every report.
"""

from __future__ import annotations

import contextlib
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DATA_DIR = HERE / ".data"
"""Where generated data and outputs go by default (gitignored); ``--data`` overrides."""
PEERS = HERE / "peers.py"
RSS_LIMIT_MB = 14 * 1024
"""Default guard: a run whose process group passes this resident size is killed."""
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2**20


@dataclass(frozen=True)
class Run:
    """One timed process."""

    seconds: float
    peak_rss_mb: float
    code: int  # exit code; -9 when killed at the timeout or the RSS guard
    stderr_tail: str
    killed: str | None = None  # "timeout" or "rss-limit"
    cpu_seconds: float = (
        0.0  # user + system, the process and the children it waited for
    )


def _kill_group(pgid: int) -> None:
    """SIGKILL a process group that may already be gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def group_rss_mb(pgid: int) -> float:
    """The summed resident size of the processes in group ``pgid`` (from /proc)."""
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid:  # pgrp is the 5th field, 3rd after the name
            total += int(fields[21])  # rss in pages, the 24th field
    return total * _PAGE_MB


BYTECODE_DIR = Path(tempfile.gettempdir()) / "lbnorm-benchmarks-pycache"
"""Where measured processes keep compiled bytecode (``PYTHONPYCACHEPREFIX``)."""


def child_environment() -> dict[str, str]:
    """The environment of every measured process: bytecode compiled once and kept.

    An installed lbnorm loads compiled bytecode (pip compiles it), as the peers'
    installed packages do. An editable checkout under ``PYTHONDONTWRITEBYTECODE=1``
    (set on these machines) would recompile lbnorm's ~100 modules in every process
    (~0.2 s) and measure that instead. So the variable is dropped and bytecode goes
    to :data:`BYTECODE_DIR`; the first (warm-up) run of each command compiles it.
    ``LBNORM_BENCH_BYTECODE=env`` keeps the environment as it is.
    """
    env = dict(os.environ)
    if env.get("LBNORM_BENCH_BYTECODE") != "env":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(BYTECODE_DIR)
    return env


def measure(
    cmd: Sequence[str], timeout: float, *, rss_limit_mb: float | None = None
) -> Run:
    """Run ``cmd`` in its own process group; time it and take its peak RSS.

    Args:
        cmd: The command line.
        timeout: Seconds before the group is killed.
        rss_limit_mb: Kill the group when its summed RSS passes this (polled twice
            a second); a guard for a shared machine, not a measurement.
    """
    killed: list[str] = []

    def kill(reason: str, pgid: int) -> None:
        killed.append(reason)
        _kill_group(pgid)

    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            list(cmd),
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            env=child_environment(),
        )
        timer = threading.Timer(timeout, kill, ("timeout", proc.pid))
        timer.start()
        done = threading.Event()
        if rss_limit_mb is not None:

            def guard() -> None:
                while not done.wait(0.5):
                    if group_rss_mb(proc.pid) > rss_limit_mb:
                        kill("rss-limit", proc.pid)
                        return

            threading.Thread(target=guard, daemon=True).start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            done.set()
            timer.cancel()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        _kill_group(proc.pid)  # leftover workers, if any
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace")
    reason = killed[0] if killed else None
    cpu = usage.ru_utime + usage.ru_stime
    return Run(seconds, usage.ru_maxrss / 1024, proc.returncode, tail, reason, cpu)


def warm_page_cache(*paths: Path) -> None:
    """Read every file (directories: every file below) so runs read from the cache."""
    for path in paths:
        files = (
            sorted(p for p in path.rglob("*") if p.is_file())
            if path.is_dir()
            else [path]
        )
        for file in files:
            with file.open("rb") as fh:
                while fh.read(16 << 20):
                    pass


@dataclass
class Samples:
    """The timed runs of one competitor."""

    name: str
    seconds: list[float] = field(default_factory=list)
    peak_rss_mb: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether it has samples."""
        return bool(self.seconds)

    @property
    def median(self) -> float:
        """Median wall time in seconds (NaN without samples)."""
        return statistics.median(self.seconds) if self.seconds else float("nan")

    @property
    def max_rss_mb(self) -> float:
        """The largest peak RSS of its runs, MB (NaN without samples)."""
        return max(self.peak_rss_mb) if self.peak_rss_mb else float("nan")

    def as_dict(self) -> dict[str, object]:
        """For JSON."""
        return {
            "seconds": self.seconds,
            "peak_rss_mb": self.peak_rss_mb,
            "error": self.error,
        }


@dataclass(frozen=True)
class Competitor:
    """A command to time, what to read before it, and its output to clear."""

    name: str
    command: list[str]
    warm: tuple[Path, ...] = ()
    out: Path | None = None  # removed before every run
    warm_with: Callable[[], None] | None = None  # instead of reading ``warm``


def interleaved(
    competitors: Sequence[Competitor],
    repeats: int,
    *,
    timeout: float = 1800.0,
    rss_limit_mb: float | None = RSS_LIMIT_MB,
    label: str = "",
    after_round: Callable[[int], None] | None = None,
    warmup: bool = False,
) -> dict[str, Samples]:
    """Time ``competitors`` in ``repeats`` interleaved rounds, the order rotating.

    A competitor that fails (exit code, timeout, RSS guard) is dropped for the
    remaining rounds and keeps its error. ``warmup`` runs each once untimed first
    (cold imports read shared libraries and compile bytecode).
    """
    import shutil

    samples = {c.name: Samples(c.name) for c in competitors}
    active = list(competitors)

    def prepare(competitor: Competitor) -> None:
        if competitor.out is not None:
            shutil.rmtree(competitor.out, ignore_errors=True)
            competitor.out.parent.mkdir(parents=True, exist_ok=True)
        if competitor.warm_with is not None:
            competitor.warm_with()
        else:
            warm_page_cache(*competitor.warm)

    if warmup:
        for competitor in active:
            prepare(competitor)
            measure(competitor.command, timeout, rss_limit_mb=rss_limit_mb)
    for round_no in range(repeats):
        shift = round_no % len(active) if active else 0
        order = active[shift:] + active[:shift]
        print(f"{label} round {round_no + 1}/{repeats}: ", end="", flush=True)
        for competitor in order:
            prepare(competitor)
            run = measure(competitor.command, timeout, rss_limit_mb=rss_limit_mb)
            if run.code != 0:
                reason = run.killed or f"exit {run.code}"
                tail = run.stderr_tail.strip().splitlines()[-3:]
                samples[competitor.name].error = f"{reason}: {' / '.join(tail)[-300:]}"
                active.remove(competitor)
                print(f"{competitor.name} FAILED ({reason}) ", end="", flush=True)
                continue
            samples[competitor.name].seconds.append(run.seconds)
            samples[competitor.name].peak_rss_mb.append(run.peak_rss_mb)
            print(
                f"{competitor.name} {run.seconds:.2f}s {run.peak_rss_mb:,.0f}MB | ",
                end="",
                flush=True,
            )
        print(flush=True)
        if after_round is not None:
            after_round(round_no)
    return samples


# ------------------------------------------------------------------- the commands
def lbnorm_command(
    inputs: Sequence[str], out: Path, *, tables: int = 3, extra: Sequence[str] = ()
) -> list[str]:
    """``python -m lbnorm run INPUTS --out OUT --quiet``: default options, or
    ``--no-subtasks`` for two tables. No INPUTS: the bundled demo (and its metadata).
    """
    no_subtasks = ["--no-subtasks"] if tables == 2 else []
    return [
        sys.executable, "-m", "lbnorm", "run", *inputs, "--out", str(out),
        "--quiet", *no_subtasks, *extra,
    ]  # fmt: skip


def peer_command(
    name: str,
    scores: Path,
    suite: Path,
    out: Path,
    *,
    tables: int = 3,
    extra: Sequence[str] = (),
) -> list[str]:
    """``python peers.py NAME SCORES SUITE OUT --tables N ...``."""
    return [
        sys.executable, str(PEERS), name, str(scores), str(suite), str(out),
        "--tables", str(tables), *extra,
    ]  # fmt: skip


def ensure_data(names: Sequence[str], data: Path = DATA_DIR) -> dict[str, Path]:
    """Generate the named shapes under ``data`` if missing (in a child process)."""
    if names:
        subprocess.run(
            [sys.executable, str(HERE / "generate.py"), "--ensure", ",".join(names),
             "--data", str(data)],
            check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
    return {name: data / name for name in names}


def read_meta(folder: Path) -> dict[str, object]:
    """A generated data set's ``meta.json``."""
    import json

    meta: dict[str, object] = json.loads((folder / "meta.json").read_text())
    return meta


def demo_paths() -> tuple[Path, Path, Path]:
    """The installed lbnorm's demo scores, demo metadata and openllm-v2 suite file."""
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlib import resources; root = resources.files('lbnorm'); "
            "print(root / 'data' / 'demo_scores.parquet'); "
            "print(root / 'data' / 'demo_metadata.parquet'); "
            "print(root / 'suites' / 'builtin' / 'openllm-v2.toml')",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    scores, meta, suite = (Path(line) for line in probe.stdout.split("\n")[:3])
    return scores, meta, suite


# --------------------------------------------------------------------- the header
@dataclass(frozen=True)
class LbnormInfo:
    """Which lbnorm ``python -m lbnorm`` runs."""

    version: str
    location: Path | None  # the package directory; None when lbnorm is missing
    commit: str  # git commit of the checkout it is imported from, or why not
    is_this_checkout: bool


def lbnorm_info() -> LbnormInfo:
    """Ask a child ``python`` where lbnorm comes from; find its git commit."""
    probe = subprocess.run(
        [sys.executable, "-c", "import lbnorm; print(lbnorm.__file__); print(lbnorm.__version__)"],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if probe.returncode != 0:
        return LbnormInfo("missing", None, "-", is_this_checkout=False)
    file, version = probe.stdout.split("\n")[:2]
    location = Path(file).resolve().parent
    git = ["git", "-C", str(location)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=False)  # fmt: skip
    if head.returncode != 0:
        commit = "not a git checkout (an installed wheel?)"
    else:
        commit = head.stdout.strip()[:12]
        status = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no", "--", str(location)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if status.stdout.strip():
            commit += " + uncommitted changes in src/lbnorm"
    inside = location.is_relative_to(REPO / "src")
    return LbnormInfo(version, location, commit, is_this_checkout=inside)


def versions() -> str:
    """Library versions (from their metadata: nothing is imported)."""
    found = []
    for package in ["duckdb", "polars", "pyarrow", "numpy", "pandas", "msgspec"]:
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} missing")
    return ", ".join(found)


def environment(info: LbnormInfo | None = None) -> str:
    """The header of a report: lbnorm's commit, versions, the machine, the method."""
    info = info or lbnorm_info()
    memory = "?"
    with contextlib.suppress(OSError, ValueError, IndexError):
        line = Path("/proc/meminfo").read_text().splitlines()[0]
        memory = f"{int(line.split()[1]) / 2**20:.0f} GiB"
    where = (
        "this checkout"
        if info.is_this_checkout
        else f"NOT this checkout: {info.location}"
    )
    lines = [
        f"lbnorm {info.version}, commit {info.commit} ({where})",
        f"{versions()}; Python {platform.python_version()} ({sys.executable})",
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} CPUs, {memory} RAM, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "Whole processes (start-up included), warm page cache, medians of "
        "interleaved rounds; peak RSS from os.wait4.",
        "Bytecode: "
        + (
            "as the environment says (LBNORM_BENCH_BYTECODE=env)"
            if os.environ.get("LBNORM_BENCH_BYTECODE") == "env"
            else f"compiled once, kept in {BYTECODE_DIR} (as an installed tool has it)"
        )
        + ".",
    ]
    return "\n".join(lines)


def seconds(value: float) -> str:
    """A time for a table: 0.523 s, 12.3 s."""
    if value != value:  # NaN
        return "-"
    return f"{value:.3f} s" if value < 10 else f"{value:.1f} s"


def megabytes(value: float) -> str:
    """A peak RSS for a table."""
    return "-" if value != value else f"{value:,.0f} MiB"
