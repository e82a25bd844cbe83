"""What the comparability check costs a run on a results tree, before and after its settings moved into the parse.

``python benchmarks_perf/comparability.py --old /tmp/old/src [--files 1000] [--repeats 5]``

Generates the tree if missing (``generate_tree.py``: full-structure
lm-evaluation-harness results files of ~130 KB, under ``--data``/tree-N/results),
then runs, each as a separate process, in interleaved rounds (the order rotates
each round; every file read right before every run), with the source tree given
by ``--old`` (e.g. ``git archive main src | tar -x -C /tmp/old``) and this
checkout's ``src``:

* ``old-off``, ``old-on``: ``lbnorm run TREE --out OUT --quiet``, without and
  with ``--comparability`` (which read every results file a second time);
* ``new-off``, ``new-on``: the same with ``--no-comparability`` and
  ``--comparability`` (the settings read in the parse's one pass).

Printed: each one's median wall time, median and least CPU time (user + system
of the process and its workers, from ``os.wait4``: steadier than wall time on a
shared machine), and the ratios that decide the default, all from the same
rounds (compare ratios, not times from other runs). ``--one-core`` runs every
command under ``taskset -c 0``, where lbnorm parses in-process.
Standard library only, like every measuring script.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from measure import (
    DATA_DIR,
    HERE,
    environment,
    measure,
    seconds,
    warm_page_cache,
)


def ensure_tree(data: Path, files: int) -> Path:
    """The generated tree of `files` results files (made once, then reused)."""
    root = data / f"tree-{files}" / "results"
    if not root.is_dir():
        subprocess.run(
            [
                sys.executable,
                str(HERE / "generate_tree.py"),
                "--out",
                str(root),
                "--n",
                str(files),
            ],
            check=True,
        )
    return root


def main(argv: list[str] | None = None) -> int:
    """Time the four commands in interleaved rounds; print medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the old src folder")
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument(
        "--one-core",
        action="store_true",
        help="run under taskset -c 0 (lbnorm then parses in-process)",
    )
    parser.add_argument(
        "--in-process",
        type=int,
        default=0,
        metavar="K",
        help="instead: each process runs the command K times after one untimed run "
        "(start-up left out) and reports each run's CPU time",
    )
    args = parser.parse_args(argv)
    tree = ensure_tree(args.data, args.files)
    new = HERE.parent / "src"
    flags = {
        "old-off": (args.old, []),
        "old-on": (args.old, ["--comparability"]),
        "new-off": (new, ["--no-comparability"]),
        "new-on": (new, ["--comparability"]),
    }
    outs = args.data / "comparability-out"
    run = _in_process if args.in_process else _whole_process
    found: dict[str, dict[str, list[float]]] = {}
    names = list(flags)
    for round_no in range(args.repeats + (not args.in_process)):
        order = names[round_no % len(names) :] + names[: round_no % len(names)]
        print(f"round {round_no}: ", end="", flush=True)
        for name in order:
            source, extra = flags[name]
            prefix = [
                *(["taskset", "-c", "0"] if args.one_core else []),
                "env",
                f"PYTHONPATH={source.resolve()}",
                sys.executable,
            ]
            command = ["run", str(tree), *extra, "--out", str(outs / name), "--quiet"]
            times = run(prefix, command, outs / name, args.in_process)
            if round_no or args.in_process:  # (whole processes: round 0 compiles)
                for label, values in times.items():
                    found.setdefault(label, {n: [] for n in names})[name] += values
            print(f"{name} {times} | ", end="", flush=True)
        print(flush=True)
    print(environment())
    for label, times in found.items():
        for pick in (statistics.median, min):
            value = {name: pick(values) for name, values in times.items()}
            title = f"{label} {'median' if pick is statistics.median else 'least'}"
            print(
                f"{title}: " + ", ".join(f"{n} {seconds(v)}" for n, v in value.items())
            )
            for a, b in (
                ("old-on", "old-off"),
                ("new-on", "new-off"),
                ("new-off", "old-off"),
                ("new-on", "old-off"),
            ):
                print(f"  {title} {a} / {b}: {value[a] / value[b]:.3f}")
    return 0


def _whole_process(
    prefix: list[str], command: list[str], out: Path, _: int
) -> dict[str, list[float]]:
    """One process, timed: its wall and CPU seconds."""
    shutil.rmtree(out, ignore_errors=True)
    warm_page_cache(Path(command[1]))
    run = measure([*prefix, "-m", "lbnorm", *command], 1800.0)
    if run.code != 0:
        msg = f"failed: {' '.join(command)}: {run.stderr_tail}"
        raise SystemExit(msg)
    return {"wall": [run.seconds], "cpu": [run.cpu_seconds]}


#: Runs ``lbnorm.cli.main(argv)`` K times after one untimed run; prints each
#: run's CPU time (the process and the workers it waited for) as JSON.
_SNIPPET = """
import json, resource, shutil, sys
from lbnorm.cli import main
k, out, argv = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
def cpu():
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
times = []
for at in range(k + 1):
    shutil.rmtree(out, ignore_errors=True)
    start = cpu()
    assert main(argv) == 0
    if at:
        times.append(cpu() - start)
print(json.dumps(times))
"""


def _in_process(
    prefix: list[str], command: list[str], out: Path, k: int
) -> dict[str, list[float]]:
    """One process running the command k + 1 times: each timed run's CPU seconds."""
    done = subprocess.run(
        [*prefix, "-c", _SNIPPET, str(k), str(out), *command],
        capture_output=True,
        text=True,
        check=True,
    )
    return {"cpu in-process": json.loads(done.stdout.strip().splitlines()[-1])}


if __name__ == "__main__":
    raise SystemExit(main())
