"""Results trees: ``lbnorm run TREE`` against the read-and-parse floor, on 1 and 2 cores.

``python benchmarks_perf/tree.py [--files 4576] [--repeats 5]``

Generates the tree if missing (``generate_tree.py``: 4,576 full-structure
lm-evaluation-harness results files of ~130 KB, ~600 MB, into
``--data``/tree-N/results), then runs, each as a separate process, in interleaved
rounds (the order rotates each round), every file read right before every run:

* ``lbnorm``: ``python -m lbnorm run TREE --out OUT --quiet``, the default command
  (three tables), on both cores (forked workers read, hash and parse);
* ``lbnorm-1core``: the same under ``taskset -c 0`` (lbnorm then reads in-process);
* ``floor``: find the files and read and parse each one with lbnorm's own code
  (:func:`lbnorm.core.files.walk_directory`, as the input catalog walks a tree, then the reader's JSON
  decoder ``harness._decode``: msgspec into a Struct of the keys lbnorm reads),
  nothing else, in one process;
* ``floor-2cores``: the same on every core (a fork pool over chunks of files);
* ``floor-sha256``, ``floor-sha256-2cores``: ``floor`` and ``floor-2cores`` plus the
  sha256 of every file, which lbnorm must compute for its manifest (provenance) and the
  issue's floor leaves out: what the same job costs with provenance, printed beside;
* ``floor-json``, ``floor-json-2cores``: the floor as issue 4 defined it (the
  target's origin: "reading and ``json.loads``-ing every file"): ``rglob``, read
  and ``json.loads`` every file, importing nothing from lbnorm, in one process
  and on every core (the same fork pool as ``floor-2cores``). ``json.loads``
  builds every object of a file; lbnorm's own decoder (``floor``) builds only
  the keys lbnorm reads, the stricter floor the targets table judges by;
* ``lbnorm-cached``: the nightly command on a tree where nothing changed,
  ``lbnorm run TREE --out OUT --quiet --cache CACHE``, its parse cache filled by
  one untimed run first: files whose stat is unchanged are taken from the cache
  unread (``lbnorm.readers.cache``). Not a target; what a repeated run costs.

The floors import the real reader module, so they pay its imports as lbnorm does
(numpy, pyarrow and msgspec; no pandas).
The targets: lbnorm / floor-2cores and lbnorm-1core / floor at most 1.5 each.
Peak RSS comes from ``os.wait4`` (the largest of the process and its workers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from measure import (
    DATA_DIR,
    HERE,
    Competitor,
    Samples,
    environment,
    interleaved,
    lbnorm_command,
    megabytes,
    seconds,
)

DEFAULT_FILES = 4_576
FLOORS = [
    "floor",
    "floor-2cores",
    "floor-sha256",
    "floor-sha256-2cores",
    "floor-json",
    "floor-json-2cores",
]
NAMES = ["lbnorm", "lbnorm-1core", "lbnorm-cached", *FLOORS]
TARGETS = {"lbnorm": "floor-2cores", "lbnorm-1core": "floor"}
PROVENANCE_FLOORS = {"lbnorm": "floor-sha256-2cores", "lbnorm-1core": "floor-sha256"}
#: Issue 4's floor (``json.loads`` of every file), on as many cores.
JSON_FLOORS = {"lbnorm": "floor-json-2cores", "lbnorm-1core": "floor-json"}


def ensure_tree(files: int, data: Path) -> Path:
    """The tree of ``files`` results files (generated in a child if missing)."""
    root = data / f"tree-{files}"
    tree, meta = root / "results", root / "meta.json"
    if meta.exists() and tree.exists():
        return tree
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    print(f"generating {files:,} results files in {tree} ...", flush=True)
    made = subprocess.run(
        [sys.executable, str(HERE / "generate_tree.py"), "--out", str(root / "tmp"), "--n", str(files)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    (root / "tmp").rename(tree)
    meta.write_text(
        json.dumps({"files": files, "generator": made.stdout.strip()}) + "\n"
    )
    return tree


def _parse_json(paths: list[Path]) -> int:
    for path in paths:
        json.loads(path.read_bytes())
    return len(paths)


def _parse_lbnorm(paths: list[Path]) -> int:
    from lbnorm.readers import harness

    for path in paths:
        harness._decode(path, path.read_bytes())  # the reader's own parser
    return len(paths)


def _hash_parse_lbnorm(paths: list[Path]) -> int:
    import hashlib

    from lbnorm.readers import harness

    for path in paths:
        data = path.read_bytes()
        hashlib.sha256(data).hexdigest()  # as lbnorm's manifest needs
        harness._decode(path, data)
    return len(paths)


def run_floor(name: str, tree: Path) -> int:
    """One floor, in this process: find, read and parse every file."""
    if name.startswith("floor-json"):
        files = sorted(p for p in tree.rglob("results_*.json") if p.is_file())
        parse = _parse_json
    else:
        from lbnorm.core.files import RESULTS_FILE, walk_directory

        files = [p for p in walk_directory(tree)[0] if RESULTS_FILE.match(p.name)]
        parse = _hash_parse_lbnorm if name.startswith("floor-sha256") else _parse_lbnorm
    if not name.endswith("-2cores"):
        return parse(files)
    import multiprocessing

    workers = len(os.sched_getaffinity(0))
    size = max(1, len(files) // (workers * 8))
    chunks = [files[at : at + size] for at in range(0, len(files), size)]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return sum(pool.map(parse, chunks))


def command(name: str, tree: Path, out: Path, cache: Path) -> list[str]:
    """The command line of one competitor (`cache`: lbnorm-cached's parse cache)."""
    if name.startswith("floor"):
        return [sys.executable, str(Path(__file__).resolve()), "--floor", name, str(tree)]  # fmt: skip
    extra = ["--cache", str(cache)] if name == "lbnorm-cached" else []
    lbnorm = lbnorm_command([str(tree)], out, extra=extra)
    return ["taskset", "-c", "0", *lbnorm] if name == "lbnorm-1core" else lbnorm


@dataclass
class TreeResult:
    """The tree benchmark's samples."""

    files: int
    bytes: int
    samples: dict[str, Samples] = field(default_factory=dict)

    def ratio(self, name: str, floors: dict[str, str] = TARGETS) -> float:
        """lbnorm (or lbnorm-1core) / its floor on as many cores (of `floors`)."""
        floor = floors[name]
        if not all(k in self.samples and self.samples[k].ok for k in (name, floor)):
            return float("nan")
        return self.samples[name].median / self.samples[floor].median

    def as_dict(self) -> dict[str, Any]:
        """For JSON."""
        return {
            "files": self.files,
            "bytes": self.bytes,
            "samples": {k: v.as_dict() for k, v in self.samples.items()},
        }


def benchmark_tree(
    files: int,
    *,
    repeats: int,
    data: Path,
    names: list[str] | None = None,
    timeout: float = 600.0,
) -> TreeResult:
    """Generate (if missing) and time."""
    tree = ensure_tree(files, data)
    paths = sorted(p for p in tree.rglob("results_*.json") if p.is_file())
    names = list(names or NAMES)
    if "lbnorm-1core" in names and shutil.which("taskset") is None:
        names.remove("lbnorm-1core")
        print("lbnorm-1core skipped: no taskset")
    out = data / "out" / f"tree-{files}"

    def warm() -> None:
        for path in paths:
            path.read_bytes()

    cache = out / "cache"  # beside the outputs, never inside one
    competitors = [
        Competitor(
            name,
            command(name, tree, out / name, cache),
            out=out / name,
            warm_with=warm,
        )
        for name in names
    ]
    if "lbnorm-cached" in names:  # fill the cache once, untimed
        shutil.rmtree(cache, ignore_errors=True)
        filling = command("lbnorm-cached", tree, out / "lbnorm-cached", cache)
        subprocess.run(filling, check=True, capture_output=True)
    result = TreeResult(len(paths), sum(p.stat().st_size for p in paths))
    result.samples = interleaved(competitors, repeats, timeout=timeout, label="tree")
    return result


def markdown(result: TreeResult) -> str:
    """The results as a Markdown table, with lbnorm / each competitor."""
    lbnorm = (
        result.samples["lbnorm"].median if "lbnorm" in result.samples else float("nan")
    )
    lines = [
        f"{result.files:,} files, {result.bytes / 1e6:,.0f} MB",
        "",
        "| command | median | min | runs | peak RSS | lbnorm / this |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in result.samples.items():
        if not s.ok:
            lines.append(f"| {name} | {s.error or 'skipped'} | | 0 | | |")
            continue
        lines.append(
            f"| {name} | {seconds(s.median)} | {seconds(min(s.seconds))} | {len(s.seconds)} "
            f"| {megabytes(s.max_rss_mb)} | {lbnorm / s.median:.2f} |"
        )
    lines.append("")
    for name, floor in TARGETS.items():
        lines.append(f"{name} / {floor}: {result.ratio(name):.2f} (target <= 1.5)")
    for name, floor in PROVENANCE_FLOORS.items():
        if name in result.samples and floor in result.samples:
            ratio = result.ratio(name, PROVENANCE_FLOORS)
            lines.append(f"{name} / {floor} (with provenance's sha256): {ratio:.2f}")
    for name, floor in JSON_FLOORS.items():
        if name in result.samples and floor in result.samples:
            ratio = result.ratio(name, JSON_FLOORS)
            lines.append(f"{name} / {floor} (issue 4's floor, json.loads): {ratio:.2f}")
    if "lbnorm-1core" in result.samples and result.samples["lbnorm-1core"].ok:
        gain = result.samples["lbnorm-1core"].median / lbnorm
        lines.append(f"Second core: lbnorm 1 core / 2 cores = {gain:.2f}x.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--files", type=int, default=DEFAULT_FILES)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", help=f"comma-separated, of {NAMES}")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--floor", help=argparse.SUPPRESS)  # internal: run a floor
    args, rest = parser.parse_known_args(argv)
    if args.floor:
        t0 = time.perf_counter()
        count = run_floor(args.floor, Path(rest[0]))
        print(f"{args.floor}: {count} files in {time.perf_counter() - t0:.2f} s")
        return 0
    names = args.only.split(",") if args.only else list(NAMES)
    if unknown := sorted(set(names) - set(NAMES)):
        parser.error(f"unknown competitors {unknown}; choose from {NAMES}")
    header = environment()
    print(header, flush=True)
    result = benchmark_tree(
        args.files,
        repeats=args.repeats,
        data=args.data,
        names=names,
        timeout=args.timeout,
    )
    print(f"\n{header}\n")
    print(markdown(result))
    if args.json:
        args.json.write_text(
            json.dumps({"environment": header, "tree": result.as_dict()}, indent=2)
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
