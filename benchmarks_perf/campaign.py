"""The interrupt campaign: lbnorm commands stopped at random moments, their outputs checked.

``python benchmarks_perf/campaign.py [--n 10] [--modes default,spilling] [--seed 0]``
runs each mode's command ``--n`` times and sends it Ctrl-C (SIGINT) or SIGTERM at a
random moment between its start and a little past its usual end (``--faults``: at
one of lbnorm's fault points, :mod:`lbnorm.core.faults`, at once or 1-60 ms after),
then checks:

* the output directory is the previous complete output or the new complete one,
  byte for byte (every file's sha256), never a mix and never missing;
* the exit code is 130 (SIGINT) or 143 (SIGTERM), with one ``lbnorm:`` line and
  no traceback; or 0 when the run ended before the signal came;
* no process of the run is left (each run's environment carries a tag, looked
  for in every process's environment once it ended);
* no staging folder beside the output, no ``lbnorm-spill-*`` folder in TMPDIR
  and no temporary file in the parse cache is left;
* nothing hangs (a run still alive 60 s after its signal counts as a hang).

The modes: ``default`` (the bundled demo, subtask table and all), ``no-subtasks``,
``spilling`` (``--sum-memory`` of a few bytes), ``workers`` (``--workers 2``),
``arena`` (``arena --bootstrap``), ``tree`` (a generated tree of results files)
and ``cached`` (the same tree with ``--cache``). The previous output is the same
command's output on a smaller input, so "old" and "new" differ. Counts are
printed per mode and in all; the exit status is 1 if any check failed.

Not collected by pytest (it runs for minutes and uses wall-clock timing); run it
by hand, with lbnorm importable (``PYTHONPATH=src``).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
BATTLES = HERE.parent / "tests" / "fixtures" / "battles"

#: Seconds a signalled run may take to end before it counts as a hang.
PATIENCE = 60.0


@dataclass(frozen=True, slots=True)
class Mode:
    """A command to interrupt: its arguments for the new and the old input."""

    name: str
    new: list[str]
    old: list[str]
    cache: bool = False


def _modes(work: Path) -> dict[str, Mode]:
    """Each mode's command lines, their inputs made under `work`."""
    from generate_tree import generate_tree

    from lbnorm.pipeline import demo_path

    demo = demo_path()
    half = work / "inputs" / "half.parquet"
    half.parent.mkdir(parents=True, exist_ok=True)
    table = pq.read_table(demo)
    pq.write_table(table.slice(0, table.num_rows // 2), half)
    tree, small = work / "inputs" / "tree", work / "inputs" / "small-tree"
    if not tree.exists():
        generate_tree(tree, n=120, seed=1)
        generate_tree(small, n=40, seed=2)
    stream = ["--no-subtasks", "--engine", "stream"]
    battles = str(BATTLES / "clean_battle_20230601.json")
    old_battles = str(BATTLES / "battles.csv")

    def run(*extra: str) -> tuple[list[str], list[str]]:
        return (["run", str(demo), *extra], ["run", str(half), *extra])

    return {
        "default": Mode("default", *run()),
        "no-subtasks": Mode("no-subtasks", *run("--no-subtasks")),
        "spilling": Mode("spilling", *run(*stream, "--sum-memory", "1e-6")),
        "workers": Mode("workers", *run(*stream, "--workers", "2")),
        "arena": Mode(
            "arena",
            ["arena", battles, "--bootstrap", "200"],
            ["arena", old_battles, "--bootstrap", "200"],
        ),
        "tree": Mode("tree", ["run", str(tree)], ["run", str(small)]),
        "cached": Mode("cached", ["run", str(tree)], ["run", str(small)], cache=True),
    }


def _digests(folder: Path) -> dict[str, str] | None:
    """Every file of an output with its sha256; None if there is no output."""
    if not folder.is_dir():
        return None
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


class Trial:
    """One mode's command line, run as a user would."""

    def __init__(self, mode: Mode, root: Path) -> None:
        self.mode = mode
        self.parent = root / mode.name / "parent"  # holds the output only
        self.out = self.parent / "out"
        self.tmpdir = root / mode.name / "tmp"
        self.cache = root / mode.name / "cache"
        for folder in (self.parent, self.tmpdir):
            folder.mkdir(parents=True, exist_ok=True)

    def argv(self, args: list[str]) -> list[str]:
        argv = [sys.executable, "-m", "lbnorm", *args, "--out", str(self.out)]
        if self.mode.cache:
            argv += ["--cache", str(self.cache)]
        return [*argv, "--quiet"]

    def env(self, tag: str) -> dict[str, str]:
        return {
            **os.environ,
            "SOURCE_DATE_EPOCH": "1700000000",
            "TMPDIR": str(self.tmpdir),
            "LBNORM_CAMPAIGN": tag,
        }

    def complete(self, args: list[str]) -> tuple[float, dict[str, str]]:
        """Run to the end; its time and output."""
        start = time.perf_counter()
        done = subprocess.run(
            self.argv(args),
            env=self.env("complete"),
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            msg = f"{self.mode.name}: {' '.join(args)} failed:\n{done.stderr}"
            raise SystemExit(msg)
        seconds = time.perf_counter() - start
        digests = _digests(self.out)
        assert digests is not None
        return seconds, digests

    def leftovers(self) -> list[str]:
        """Temporary files and folders a run left."""
        found = [f"beside the output: {p.name}" for p in self.parent.iterdir()]
        found = [name for name in found if not name.endswith(": out")]
        found += [f"in TMPDIR: {p.name}" for p in self.tmpdir.iterdir()]
        if self.cache.is_dir():
            found += [
                f"in the cache: {p.name}"
                for p in self.cache.iterdir()
                if ".tmp-" in p.name
            ]
        return found


def _differing(found: dict[str, str] | None, expected: dict[str, str]) -> set[str]:
    return {
        name for name, digest in (found or {}).items() if expected.get(name) != digest
    }


def _same_tables(out: Path, found: dict[str, str] | None, new: dict[str, str]) -> bool:
    """With --cache: the new tables, their manifest naming them (its input
    listing says which hashes were verified this run, which depends on the cache)."""
    if (
        found is None
        or _differing(found, new) - {"manifest.json"}
        or set(found) != set(new)
    ):
        return False
    outputs = json.loads((out / "manifest.json").read_text())["outputs"]
    return all(outputs[name]["sha256"] == new[name] for name in outputs)


def _tagged(tag: str) -> list[int]:
    """Processes whose environment carries `tag`."""
    needle = f"LBNORM_CAMPAIGN={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _interrupt(
    trial: Trial, args: list[str], delay: float, number: int, fault: str = ""
) -> tuple[str, list[str]]:
    """Run, signal after `delay` s (or at `fault`); the outcome and what went wrong."""
    tag = uuid.uuid4().hex
    env = trial.env(tag)
    if fault:  # the run signals itself there (lbnorm.core.faults)
        env["LBNORM_FAULT_POINT"] = fault
    process = subprocess.Popen(
        trial.argv(args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    is_sent = bool(fault)
    if not fault:
        time.sleep(delay)
        is_sent = process.poll() is None
        if is_sent:
            process.send_signal(number)
    try:
        _, stderr = process.communicate(timeout=PATIENCE)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return "hang", [f"still running {PATIENCE:.0f} s after the signal"]
    problems = []
    expected = {signal.SIGINT: 130, signal.SIGTERM: 143}[signal.Signals(number)]
    if process.returncode == 0:
        outcome = "finished"
    elif process.returncode == expected:
        outcome = "interrupted"
        lines = stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("lbnorm: "):
            problems.append(f"not one lbnorm line: {stderr[-300:]!r}")
    else:
        outcome = "wrong exit"
        problems.append(
            f"exit {process.returncode} (sent: {is_sent}): {stderr[-300:]!r}"
        )
    if "Traceback" in stderr:
        problems.append("a traceback")
    for _ in range(50):  # (a worker's parent-death signal takes a moment)
        if not (stray := _tagged(tag)):
            break
        time.sleep(0.1)
    if stray:
        problems.append(f"stray processes {stray}")
        for pid in stray:
            os.kill(pid, signal.SIGKILL)
    return outcome, problems


#: Fault points every run passes (lbnorm.core.faults), and those of some modes.
POINTS = [
    "starting",
    "locked",
    "table-written@1",
    "table-written@2",
    "staged",
    "swapped",
]
MODE_POINTS = {"spilling": ["spilled"], "workers": ["workers-started"]}


def _fault(mode: Mode, rng: random.Random, number: int) -> str:
    """A fault point and how the signal comes there: at once or some ms later."""
    point = rng.choice(POINTS + MODE_POINTS.get(mode.name, []))
    action = "int" if number == signal.SIGINT else "term"
    if rng.random() < 0.5:
        action += f"-after={rng.randint(1, 60)}"
    return f"{point}:{action}"


def _campaign(
    mode: Mode,
    root: Path,
    n: int,
    rng: random.Random,
    say: Callable[[str], None],
    *,
    faults: bool = False,
) -> collections.Counter[str]:
    trial = Trial(mode, root)
    if mode.cache:
        trial.complete(mode.new)  # (the cache warm: a cold one hashes otherwise)
    seconds, new = trial.complete(mode.new)
    _, old = trial.complete(mode.old)
    counts: collections.Counter[str] = collections.Counter()
    for index in range(n):
        if _digests(trial.out) != old:  # the previous run finished: old again
            trial.complete(mode.old)
        number = rng.choice([signal.SIGINT, signal.SIGTERM])
        delay = rng.uniform(0.0, 1.1 * seconds)
        fault = _fault(mode, rng, number) if faults else ""
        outcome, problems = _interrupt(trial, mode.new, delay, number, fault)
        found = _digests(trial.out)
        if found == old:
            state = "old"
        elif found == new or (mode.cache and _same_tables(trial.out, found, new)):
            state = "new"
        else:
            state = "mixed or missing"
            differ = sorted(set(found or {}) ^ set(new) | _differing(found, new))
            problems.append(f"output neither old nor new: {differ} differ from new")
        problems += trial.leftovers()
        counts[outcome] += 1
        counts[f"output {state}"] += 1
        counts["runs"] += 1
        if problems:
            counts["failed checks"] += 1
            name = signal.Signals(number).name
            when = fault or f"{name} at {delay:.2f} s"
            say(f"  {mode.name} #{index} ({when}): {'; '.join(problems)}")
        for leftover in trial.tmpdir.iterdir():  # (counted: the next run starts clean)
            shutil.rmtree(leftover, ignore_errors=True)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="runs per mode")
    parser.add_argument("--modes", default="all", help="comma-separated, or all")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--faults",
        action="store_true",
        help="signal from the fault points (LBNORM_FAULT_POINT), not at random times",
    )
    parser.add_argument("--work", type=Path, help="a folder to work in (kept)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    root = args.work or Path(tempfile.mkdtemp(prefix="lbnorm-campaign-"))
    modes = _modes(root)
    chosen = list(modes) if args.modes == "all" else args.modes.split(",")
    total: collections.Counter[str] = collections.Counter()
    for name in chosen:
        counts = _campaign(modes[name], root, args.n, rng, print, faults=args.faults)
        print(f"{name:12} " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        total += counts
    print(f"{'all':12} " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
    if args.work is None:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if total["failed checks"] else 0


if __name__ == "__main__":
    sys.exit(main())
