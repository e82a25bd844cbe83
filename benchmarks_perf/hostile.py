"""The hostile-values campaign: option values, bounds, nested files and memory limits, as real processes.

``python benchmarks_perf/hostile.py [--parts options,bounds,files,memory] [--limits 300,400,...]``
runs ``python -m lbnorm`` on values meant to break it (issue 40, points 3, 4 and 7)
and sorts each outcome:

* ``clean``: the exit code expected, one ``lbnorm: error:`` message with a ``Hint:``,
  no traceback, nothing written, within the patience;
* ``ok``: exit 0 where a run may succeed (``memory``: the limit was enough);
* ``traceback``, ``wrong exit``, ``no message``, ``hang`` (still running after the
  patience, then killed), ``aborted`` (killed by a signal: an uncatchable abort in a
  library), ``library exit`` (a library ended the process itself: OpenBLAS's exit 1,
  glibc's 127), ``written`` (a refused command left a file).

The parts:

* ``options``: every numeric option of every command (found by walking the parser,
  as ``tests/test_arguments.py`` does), each with its hostile values; exit 2;
* ``bounds``: ``impact --set-bound`` texts that once cost minutes or raised (exit 2);
* ``files``: a suite and a health thresholds file nested 100,000 deep (exit 3, 4),
  style counts that cannot be (exit 4), ``export`` on a file and with
  ``--unknown-precision '\\n'``, and the Dask engine's ``TMPDIR`` (nothing left);
* ``memory``: the commands under ``ulimit -v`` (``resource.setrlimit`` in the
  child) at each ``--limits`` MiB: exit 0 or 8 with the message.

Counts are printed per part and in all; the exit status is 1 if any outcome is
not ``clean`` or ``ok`` (some ``memory`` ones are libraries' own: see
docs/reliability.md). Not collected by pytest (it runs for minutes and times out
hangs by the wall clock); run it by hand, with lbnorm importable.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(
    0, str(HERE.parent / "tests")
)  # the options and command lines the tests try
from option_values import BATTLES, FIXTURES, GOLDEN, command_line, numeric_options  # noqa: E402

STYLE = FIXTURES / "battles" / "clean_battle_style.json"
HUGE = str(10**23)
#: Seconds a command may take before it counts as a hang.
PATIENCE = 120.0

#: Hostile values per kind of option (an option's own minimum is added: 0 or 1 below it).
_VALUES = {
    int: ["-1", HUGE, "9" * 1000],
    float: ["0", "-1", "nan", "inf", "-inf", "1e308", "1e400"],
}
#: Options whose hostile values are only these (a seed takes any whole number >= 0).
_ONLY = {
    "--seed": ["-1"],
    "--daily-vote-per-user": ["0", "-1"],
    "--min-battles": ["-1"],
}


@dataclass(frozen=True, slots=True)
class Attempt:
    """One command line and what it must do."""

    part: str
    argv: list[str]
    code: int
    env: dict[str, str] = field(default_factory=dict)
    may_succeed: bool = False
    preamble: str = ""


def _options(board: Path, work: Path) -> Iterator[Attempt]:
    from lbnorm.cli.arguments import Whole

    for name, action in numeric_options():
        flag = action.option_strings[0]
        values = _ONLY.get(flag) or _VALUES[float if action.type is float else int]
        if isinstance(action, Whole):
            values = [*values, str(action.least - 1), str(action.most + 1)]
        for value in dict.fromkeys(values):
            argv = [*command_line(name, board, work, option=flag), f"{flag}={value}"]
            yield Attempt("options", argv, 2)


BOUNDS = [
    "GPQA=1e100000000",
    "GPQA=1e-999999999",
    "GPQA/main=1e309",
    "GPQA=1e999",
    "GPQA=" + "9" * 5000,
    "GPQA=0." + "3" * 5000,
    "GPQA=0.99999999999999999",
    "GPQA=1/0",
    "GPQA=" + "1" * 4000 + "/" + "3" * 4000,
    "GPQA=nan",
    "GPQA=-inf",
]


def _bounds(work: Path) -> Iterator[Attempt]:
    for text in BOUNDS:
        yield Attempt(
            "bounds", ["impact", "--set-bound", text, "--out", str(work / "new")], 2
        )


def _files(board: Path, work: Path) -> Iterator[Attempt]:
    deep = work / "inputs" / "deep.toml"
    deep.parent.mkdir(parents=True, exist_ok=True)
    deep.write_text(
        'name = "deep"\nbenchmarks = ' + "[" * 100_000 + "]" * 100_000 + "\n"
    )
    new = str(work / "new")
    yield Attempt("files", ["run", *GOLDEN, "--suite", str(deep), "--out", new], 3)
    yield Attempt("files", ["suites", "show", str(deep)], 3)
    yield Attempt("files", ["health", str(board), "--config", str(deep)], 4)
    records = json.loads(STYLE.read_text())
    for name, (key, value) in {
        "negative": ("sum_assistant_a_tokens", -5),
        "huge": ("sum_assistant_b_tokens", 1e300),
        "fraction": ("sum_assistant_a_tokens", 10.5),
        "opposite": (
            "sum_assistant_b_tokens",
            -records[3]["conv_metadata"]["sum_assistant_a_tokens"],
        ),
    }.items():
        changed = json.loads(json.dumps(records))
        changed[3]["conv_metadata"][key] = value
        path = work / "inputs" / f"style_{name}.json"
        path.write_text(json.dumps(changed))
        yield Attempt("files", ["arena", str(path), "--style-control", "--out", new], 4)
    notes = work / "inputs" / "notes.txt"
    notes.write_text("mine\n")
    export = ["--format", "open-llm-leaderboard", "--out", str(work / "new.parquet")]
    yield Attempt("files", ["export", str(notes), *export], 4)
    for precision in ("\n", "bf 16", "\x1b[31m"):
        yield Attempt(
            "files",
            ["export", str(board), *export, "--unknown-precision", precision],
            2,
        )


#: Runs the command line with its address space limited to argv[1] MiB (``ulimit -v``).
_LIMITED = """
import resource, sys
limit = int(sys.argv[1]) * 2**20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from lbnorm.cli import console_main
sys.argv = ["lbnorm", *sys.argv[2:]]
sys.exit(console_main())
"""


def _memory(board: Path, work: Path, limits: list[int]) -> Iterator[Attempt]:
    new = str(work / "new")
    commands = [
        ["run", "--out", new, "--quiet"],
        ["run", "--out", new, "--quiet", "--no-subtasks", "--sum-memory", "1e-6"],
        ["arena", BATTLES, "--out", new, "--quiet", "--bootstrap", "100"],
        ["show", str(board)],
        ["query", str(board), "SELECT * FROM leaderboard", "--max-rows", "5"],
        ["health", str(board)],
    ]
    for argv in commands:
        for limit in limits:
            yield Attempt(
                "memory", [str(limit), *argv], 8, may_succeed=True, preamble=_LIMITED
            )


def _judge(attempt: Attempt, work: Path) -> tuple[str, str]:
    """Run `attempt`; its outcome and, if not as it should be, why."""
    command = (
        [sys.executable, "-c", attempt.preamble, *attempt.argv]
        if attempt.preamble
        else [sys.executable, "-m", "lbnorm", *attempt.argv]
    )
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=PATIENCE,
            check=False,
            env={**__import__("os").environ, **attempt.env},
        )
    except subprocess.TimeoutExpired:
        return "hang", f"still running after {PATIENCE:.0f} s"
    err = done.stderr
    written = [p.name for p in work.iterdir() if p.name != "inputs"]
    for leftover in written:
        path = work / leftover
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    if done.returncode < 0:
        return (
            "aborted",
            f"{signal.Signals(-done.returncode).name}: {err.strip()[-200:]!r}",
        )
    if done.returncode == 0 and attempt.may_succeed:
        return "ok", ""
    if "Traceback" in err:
        return "traceback", err.strip().splitlines()[-1][:200]
    if done.returncode in {1, 127} and not err.startswith("lbnorm: "):
        return "library exit", f"exit {done.returncode}: {err.strip()[-200:]!r}"
    if done.returncode != attempt.code:
        return "wrong exit", f"exit {done.returncode}: {err.strip()[-300:]!r}"
    if not err.startswith("lbnorm: error: ") or "\nHint: " not in err:
        return "no message", repr(err[-300:])
    if written and attempt.part != "memory":
        return "written", ", ".join(written)
    return "clean", ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="options,bounds,files,memory")
    parser.add_argument(
        "--limits",
        default="300,350,400,450,500,550,600,700,800",
        help="MiB of address space for the memory part",
    )
    parser.add_argument("--work", type=Path, help="a folder to work in (kept)")
    args = parser.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="lbnorm-hostile-"))
    (work / "inputs").mkdir(parents=True, exist_ok=True)
    board = work / "inputs" / "board"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "lbnorm",
            "run",
            *GOLDEN,
            "--out",
            str(board),
            "--quiet",
        ],
        check=True,
    )
    demo = work / "inputs" / "demo"
    subprocess.run(
        [sys.executable, "-m", "lbnorm", "run", "--out", str(demo), "--quiet"],
        check=True,
    )
    parts = args.parts.split(",")
    attempts: list[Attempt] = []
    if "options" in parts:
        attempts += _options(board, work)
    if "bounds" in parts:
        attempts += _bounds(work)
    if "files" in parts:
        attempts += _files(board, work)
    if "memory" in parts:
        attempts += _memory(demo, work, [int(x) for x in args.limits.split(",")])
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(
        collections.Counter
    )
    for attempt in attempts:
        outcome, why = _judge(attempt, work)
        counts[attempt.part][outcome] += 1
        if outcome not in {"clean", "ok"}:
            shown = " ".join(attempt.argv)[:160]
            print(f"  {attempt.part}: {outcome}: {shown}: {why}")
    total: collections.Counter[str] = collections.Counter()
    for part, counted in counts.items():
        print(f"{part:8} " + ", ".join(f"{k} {v}" for k, v in sorted(counted.items())))
        total += counted
    print(f"{'all':8} " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if set(total) <= {"clean", "ok"} else 1


if __name__ == "__main__":
    sys.exit(main())
