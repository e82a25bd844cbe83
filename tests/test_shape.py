"""The package's shape: no import cycle, arrows pointing down, pandas only at the faces.

* No import cycle among the modules of ``src/lbnorm``, counting imports inside
  functions and under ``TYPE_CHECKING`` (a function-local import hides a cycle;
  it does not remove it).
* The core layers import nothing from the faces, not even through another module.
* ``import lbnorm``, ``python -m lbnorm --help``, every command's ``--help`` and a
  run on the bundled demo load no pandas (each in a fresh process, as narwhals
  tests its own import cost).

The graph is built with :mod:`ast` by the logic of ``shared/tools/import_cycles.py``
(the project's import-cycle checker, kept outside the repository; vendored here so
CI can run it).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest
from source_trees import PACKAGE, nodes, package_modules

from lbnorm.cli import build_parser

# --- the module graph (vendored from shared/tools/import_cycles.py) ----------------------


def module_graph(pkg_dir: Path) -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports, anywhere in it.

    Every ``import`` and ``from ... import`` counts: at the top, inside functions,
    under ``TYPE_CHECKING``; relative imports are resolved. ``from a import b``
    counts ``a.b`` when that is a module, else ``a``; ``from lbnorm import X``
    (a name the package re-exports lazily, its ``_HOMES``) counts X's home
    module. A module importing its own parent package is not an edge.
    """
    root, pkg = pkg_dir.parent, pkg_dir.name
    mods = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in pkg_dir.rglob("*.py")
    }
    homes = _homes(pkg_dir / "__init__.py")

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        base = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in nodes(path.read_text(encoding="utf-8")):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    parts = base.split(".")[: len(base.split(".")) - node.level + 1]
                    target = ".".join([*parts, target] if target else parts)
                names = [target] + [f"{target}.{alias.name}" for alias in node.names]
                if target == pkg:  # a re-exported name: an arrow to its home
                    names += [homes[a.name] for a in node.names if a.name in homes]
            for name in names:
                dep = resolve(name) if name.split(".")[0] == pkg else None
                if dep and dep != mod and not mod.startswith(dep + "."):
                    graph[mod].add(dep)
    return graph


def _homes(init: Path) -> dict[str, str]:
    """The package's lazily re-exported names and their modules (its ``_HOMES``)."""
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.AnnAssign | ast.Assign) and "_HOMES" in ast.unparse(
            node.targets[0] if isinstance(node, ast.Assign) else node.target
        ):
            homes: dict[str, str] = ast.literal_eval(node.value)  # type: ignore[arg-type]
            return homes
    return {}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, deps = work[-1]
            for dep in deps:
                if dep not in index:
                    index[dep] = low[dep] = len(index)
                    stack.append(dep)
                    on_stack.add(dep)
                    work.append((dep, iter(sorted(graph[dep]))))
                    break
                if dep in on_stack:
                    low[node] = min(low[node], index[dep])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return module_graph(PACKAGE)


def test_no_import_cycle(graph: dict[str, set[str]]) -> None:
    found = import_cycles(graph)
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_sees_imports_hidden_in_functions_and_type_checking(
    tmp_path: Path,
) -> None:
    """The check itself, on a package whose cycles only hidden imports make."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from pkg import b\n",
        "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n",
        "c.py": "from .sub import d\n",
        "sub/__init__.py": "",
        "sub/d.py": "from .. import c\nimport pkg\n",
        "e.py": "import os\nfrom pkg.sub.d import x\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    found = module_graph(package)
    assert found["pkg.a"] == {"pkg.b"}
    assert found["pkg.b"] == {"pkg.a"}
    assert found["pkg.c"] == {"pkg.sub", "pkg.sub.d"}  # the package runs too
    assert found["pkg.sub.d"] == {"pkg.c"}  # `import pkg`: its own parent, no edge
    assert found["pkg.e"] == {"pkg.sub.d"}
    assert import_cycles(found) == [["pkg.a", "pkg.b"], ["pkg.c", "pkg.sub.d"]]


# --- arrows point down: the layers in order -------------------------------------------

#: The package's layers, lowest first. A module may import its own layer and the
#: layers below it, never one above, not even inside a function (ARCHITECTURE.md).
#: Each entry names a module or a subpackage of lbnorm; every module is in one.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),  # errors, options, schemas, manifest, arrow, files, version
    ("_runtime",),  # the one place that starts threads and processes
    (
        "output.tablefile",
        "output.transaction",
    ),  # hashed Parquet files; staging, lock, swap, atomic files: the parse cache uses it
    ("suites",),  # suite files -> bound arrays and each benchmark's rule
    ("readers",),  # every input format -> Arrow batches; one table-file reader
    ("ratings",),  # battles -> Bradley-Terry and Elo ratings; battles as scores
    ("board",),  # the suite's board rules on benchmark scores: average, rates, rank
    ("engines",),  # batches -> codes -> exact sums -> a Result
    ("output",),  # the transaction, the Parquet tables, reading an output back
    ("pipeline", "arena", "repeats"),  # composition: readers -> engine -> output
    ("analysis",),  # outputs in, tables out
    ("nightly",),  # the scheduled job: a run, its health checks, its report
    ("faces",),  # terminal views, SQL, reports
    ("cli", "__main__"),  # the command line
)
#: Arrows up that a pending change removes (each names why it is still here).
KNOWN_UP: frozenset[tuple[str, str]] = frozenset()


def _layer_of(module: str) -> int:
    name = module.removeprefix("lbnorm.")
    for level, members in enumerate(LAYERS):
        if any(name == m or name.startswith(m + ".") for m in members):
            return level
    return -1


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    unplaced = sorted(m for m in graph if m != "lbnorm" and _layer_of(m) < 0)
    assert unplaced == [], f"modules in no layer (add them to LAYERS): {unplaced}"


def test_arrows_point_down(graph: dict[str, set[str]]) -> None:
    """No module imports one of a higher layer, anywhere in its text."""
    upward = sorted(
        f"{module} (layer {LAYERS[_layer_of(module)][0]}) imports {dep} "
        f"(layer {LAYERS[_layer_of(dep)][0]})"
        for module, deps in graph.items()
        if module != "lbnorm"
        for dep in deps
        if dep != "lbnorm"
        and _layer_of(dep) > _layer_of(module)
        and (module, dep) not in KNOWN_UP
    )
    assert upward == [], "arrows up:\n" + "\n".join(upward)


def test_known_arrows_up_still_exist(graph: dict[str, set[str]]) -> None:
    gone = sorted(f"{a} -> {b}" for a, b in KNOWN_UP if b not in graph.get(a, set()))
    assert gone == [], f"remove from KNOWN_UP (fixed): {gone}"


def _path_to(graph: dict[str, set[str]], start: str, targets: set[str]) -> list[str]:
    """A shortest import chain from `start` into `targets` ([] if none)."""
    previous: dict[str, str] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        following = []
        for module in frontier:
            for dep in sorted(graph[module]):
                if dep in seen:
                    continue
                seen.add(dep)
                previous[dep] = module
                if dep in targets:
                    chain = [dep]
                    while chain[-1] != start:
                        chain.append(previous[chain[-1]])
                    return chain[::-1]
                following.append(dep)
        frontier = following
    return []


def test_the_ground_reaches_no_face(graph: dict[str, set[str]]) -> None:
    """Not even through another module: the layers below output reach no face."""
    ground = {m for m in graph if 0 <= _layer_of(m) <= _layer_of("lbnorm.output")}
    faces = {m for m in graph if _layer_of(m) >= _layer_of("lbnorm.faces")}
    chains = [
        " -> ".join(chain)
        for module in sorted(ground)
        if (chain := _path_to(graph, module, faces))
    ]
    assert chains == [], "the ground reaches a face:\n" + "\n".join(chains)


def test_the_graph_sees_a_name_taken_from_the_package(tmp_path: Path) -> None:
    """``from lbnorm import run`` inside the package is an arrow to run's home."""
    package = tmp_path / "pkg"
    (package / "faces").mkdir(parents=True)
    (package / "__init__.py").write_text('_HOMES = {"run": "pkg.pipeline"}\n')
    (package / "pipeline.py").write_text("")
    (package / "faces" / "__init__.py").write_text("")
    (package / "core.py").write_text("from pkg import run\n")
    assert module_graph(package)["pkg.core"] == {"pkg.pipeline"}


def test_the_layer_check_finds_an_indirect_arrow_up() -> None:
    graph = {
        "lbnorm.output.writer": {"lbnorm.output.reader"},
        "lbnorm.output.reader": {"lbnorm.faces.terminal"},
        "lbnorm.faces.terminal": set(),
    }
    assert _path_to(graph, "lbnorm.output.writer", {"lbnorm.faces.terminal"}) == [
        "lbnorm.output.writer",
        "lbnorm.output.reader",
        "lbnorm.faces.terminal",
    ]


# --- pandas only at the faces: fresh processes -----------------------------------------

#: Runs ``python -m lbnorm ARGS`` (or imports a module) in this process, then
#: reports the pandas modules loaded, where lbnorm first asked for pandas and every
#: module loaded, as JSON on the last line of stderr (from an atexit handler: the
#: command line ends its process itself, after running them); the exit code is
#: the process's. ``--helps JSON`` runs ``lbnorm.cli.main([*COMMAND, "--help"])``
#: for each command of the JSON list in turn and prints, after each, its first
#: line of help and the pandas modules loaded so far, as JSON on stdout (pandas
#: once loaded stays: the first command after which it is there loaded it).
_PROBE = """
import atexit, json, runpy, sys, traceback

where = []

class _Watch:  # a meta path finder (importlib.abc would load importlib.resources)
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" and not where:
            where.extend(
                f"{frame.filename.split('/src/')[-1]}:{frame.lineno}"
                for frame in traceback.extract_stack()
                if "/lbnorm/" in frame.filename
            )
        return None

sys.meta_path.insert(0, _Watch())

def _report():  # an atexit handler: lbnorm's command line ends its process itself
    sys.stdout.flush()
    loaded = sorted(m for m in sys.modules if m.split(".")[0] == "pandas")
    report = {"pandas": loaded[:3], "where": where, "modules": sorted(sys.modules)}
    print("\\n" + json.dumps(report), file=sys.stderr)

atexit.register(_report)
if sys.argv[1] == "--import":
    __import__(sys.argv[2])
elif sys.argv[1] == "--helps":
    import contextlib, io
    from lbnorm.cli import main

    helps = []
    for command in json.loads(sys.argv[2]):
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            code = main([*command, "--help"])
        loaded = sorted(m for m in sys.modules if m.split(".")[0] == "pandas")
        usage = text.getvalue().partition("\\n")[0]
        helps.append({"code": code, "usage": usage, "pandas": loaded[:3], "where": where})
    print(json.dumps(helps))
else:
    sys.argv = ["lbnorm", *sys.argv[1:]]
    runpy.run_module("lbnorm", run_name="__main__", alter_sys=True)
"""


def _probe(*args: str, cwd: Path) -> tuple[dict[str, object], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LBNORM_")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PROBE), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
        check=False,
    )
    report: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    report["code"] = done.returncode
    return report, done.stdout


def _no_pandas(report: dict[str, object], what: str) -> None:
    assert not report["pandas"], (
        f"{what} loaded pandas; first asked for at "
        + " <- ".join(reversed(list(report["where"])))  # type: ignore[call-overload]
    )


def _commands() -> list[list[str]]:
    """Every command and subcommand of the command line, from its parser."""

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> list[list[str]]:
        found = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += [[*prefix, name], *walk(sub, [*prefix, name])]
        return found

    return walk(build_parser(), [])


COMMANDS = _commands()


# --- the one runtime module -----------------------------------------------------------

#: Modules that may start threads or processes, or set signal handlers, and why.
RUNTIME_MODULES = {
    "lbnorm._runtime": "the one place: threads, forks, pools, signal handlers",
    "lbnorm.engines.dask": "Dask's own scheduler runs the threads and processes",
    "lbnorm.core.faults": "fault injection for tests: a timer thread sends the signal",
    "lbnorm.__main__": "the command's first step, before _runtime and its imports load",
}

#: What starts a thread or a process, or sets a signal handler: names reached as
#: ``module.attribute`` or imported ``from module``.
_RUNTIME_NAMES = {
    "threading": {"Thread", "Timer"},
    "concurrent.futures": {"ThreadPoolExecutor", "ProcessPoolExecutor"},
    "os": {"fork", "forkpty", "posix_spawn", "posix_spawnp", "system"},
    "signal": {"signal", "pthread_sigmask", "setitimer"},
}
#: Every such attribute's name, whatever its module: the others need no closer look.
_RUNTIME_ATTRIBUTES = frozenset().union(*_RUNTIME_NAMES.values())
#: Modules whose import alone means processes (outside ``if TYPE_CHECKING:``).
_PROCESS_MODULES = ("multiprocessing", "subprocess")


def runtime_uses(source: str) -> list[str]:
    """Where `source` starts threads or processes or sets signal handlers (line: what)."""
    walked = nodes(source)  # walked once, read four times
    typing_only = {
        id(inner)
        for node in walked
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    # what each name stands for: ``import threading as th`` makes ``th`` threading
    aliases = {
        alias.asname or alias.name: alias.name
        for node in walked
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        alias.asname or alias.name: f"{node.module}.{alias.name}"
        for node in walked
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    found: list[tuple[int, str]] = []
    for node in walked:
        what = ""
        if isinstance(node, ast.Import) and id(node) not in typing_only:
            what = next(
                (a.name for a in node.names if a.name.startswith(_PROCESS_MODULES)), ""
            )
        elif isinstance(node, ast.ImportFrom) and id(node) not in typing_only:
            module = aliases.get(node.module or "", node.module or "")
            names = {a.name for a in node.names}
            if module.startswith(_PROCESS_MODULES):
                what = module
            elif hit := sorted(names & _RUNTIME_NAMES.get(module, set())):
                what = f"{module}.{hit[0]}"
        elif isinstance(node, ast.Attribute) and node.attr in _RUNTIME_ATTRIBUTES:
            owner = ast.unparse(node.value)
            for module, names in _RUNTIME_NAMES.items():
                if node.attr in names and (
                    owner in {module, module.rpartition(".")[2]}
                    or aliases.get(owner) == module
                ):
                    what = f"{owner}.{node.attr}"
        if what and isinstance(node, ast.stmt | ast.expr):
            found.append((node.lineno, what))
    return [f"{line}: {what}" for line, what in sorted(found)]


def _uses_outside(
    allowed: Iterable[str], find: Callable[[str], list[str]]
) -> list[str]:
    """What `find` finds (``module:line: what``) in the package's modules outside `allowed`.

    A name in `allowed` covers its module and, for a package, the modules in it.
    """
    root = PACKAGE.parent
    return [
        f"{module}:{use}"
        for path in package_modules()
        if not any(
            (module := ".".join(path.relative_to(root).with_suffix("").parts)) == name
            or module.startswith(name + ".")
            for name in allowed
        )
        for use in find(path.read_text(encoding="utf-8"))
    ]


def test_only_the_runtime_starts_threads_and_processes() -> None:
    """Threads, forks, pools and signal handlers go through ``lbnorm._runtime``."""
    offenders = _uses_outside(RUNTIME_MODULES, runtime_uses)
    assert offenders == [], "use lbnorm._runtime instead:\n" + "\n".join(offenders)


def test_the_runtime_check_sees_every_way_to_start_one() -> None:
    source = textwrap.dedent(
        """
        import os, signal, threading
        import multiprocessing
        from concurrent.futures import ThreadPoolExecutor
        from threading import Thread
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from multiprocessing.connection import Connection
        def f():
            from concurrent import futures
            futures.ProcessPoolExecutor(2)
            threading.Thread(target=print).start()
            os.fork()
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            threading.Lock()  # a lock starts nothing
        def g():
            import threading as th
            import signal as sg
            from concurrent import futures as cf
            th.Thread(target=print).start()
            sg.signal(sg.SIGINT, sg.SIG_IGN)
            cf.ThreadPoolExecutor(2)
        """
    )
    assert runtime_uses(source) == [
        "3: multiprocessing",
        "4: concurrent.futures.ThreadPoolExecutor",
        "5: threading.Thread",
        "11: futures.ProcessPoolExecutor",
        "12: threading.Thread",
        "13: os.fork",
        "14: signal.signal",
        "20: th.Thread",
        "21: sg.signal",
        "22: cf.ThreadPoolExecutor",
    ]


@pytest.mark.parametrize("module", ["lbnorm", "lbnorm.core.errors", "lbnorm.cli"])
def test_importing_loads_no_pandas(module: str, tmp_path: Path) -> None:
    report, _ = _probe("--import", module, cwd=tmp_path)
    assert report["code"] == 0
    _no_pandas(report, f"import {module}")


def test_help_loads_no_pandas(tmp_path: Path) -> None:
    report, stdout = _probe("--help", cwd=tmp_path)
    assert report["code"] == 0
    assert stdout.startswith("usage: lbnorm")
    for command in COMMANDS:  # the help lists every command
        assert command[0] in stdout
    _no_pandas(report, "python -m lbnorm --help")


@pytest.fixture(scope="module")
def helps(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    """Every command's ``--help``, one after another in one fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PROBE), "--helps", json.dumps(COMMANDS)],
        capture_output=True, text=True, cwd=tmp_path_factory.mktemp("helps"),
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    helps: list[dict[str, object]] = json.loads(done.stdout.strip().splitlines()[-1])
    return helps


@pytest.mark.parametrize(
    "index", range(len(COMMANDS)), ids=[" ".join(c) for c in COMMANDS]
)
def test_each_commands_help_loads_no_pandas(
    index: int, helps: list[dict[str, object]]
) -> None:
    command = " ".join(COMMANDS[index])
    assert helps[index]["code"] == 0
    assert str(helps[index]["usage"]).startswith(f"usage: lbnorm {command}")
    _no_pandas(helps[index], f"lbnorm {command} --help")


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """``lbnorm run --out DIR`` on the demo, with and without ``--quiet``, probed."""
    runs = {}
    for name, quiet in (("summary", []), ("quiet", ["--quiet"])):
        folder = tmp_path_factory.mktemp(name)
        runs[name], _ = _probe("run", "--out", "out", *quiet, cwd=folder)
        assert (folder / "out" / "leaderboard.parquet").is_file()
    return runs


@pytest.mark.parametrize("name", ["summary", "quiet"])
def test_a_run_on_the_bundled_demo_loads_no_pandas(
    name: str, demo_runs: dict[str, dict[str, object]]
) -> None:
    """``lbnorm run --out DIR``: the 4,576 demo models, their metadata joined."""
    assert demo_runs[name]["code"] == 0
    quiet = " --quiet" if name == "quiet" else ""
    _no_pandas(demo_runs[name], f"lbnorm run --out DIR{quiet}")


FIXTURES = Path(__file__).parent / "fixtures"

#: Modules a run loads only for the inputs that need them.
_BY_FORMAT = ("lbnorm.readers.harness", "msgspec")


#: Modules of other paths than a run on score tables (the demo's): sample files,
#: ratings, paired comparisons, other engines, outputs read back, the faces, the
#: nightly job, ``importlib.resources`` (its imports: ``zipfile``, ``tempfile``).
_OTHER_PATHS = (
    "lbnorm.readers.samples", "lbnorm.readers.sample_lines", "lbnorm.readers.instances",
    "lbnorm.readers.items", "lbnorm.readers.alpacaeval", "lbnorm.readers.cache",
    "lbnorm.ratings.battles", "lbnorm.ratings.fit", "lbnorm.ratings.bootstrap",
    "lbnorm.engines.paired", "lbnorm.engines.sorted_parts", "lbnorm.engines.dask",
    "lbnorm.engines.workers", "lbnorm.output.reader",
    "lbnorm.output.run_report", "lbnorm.analysis", "lbnorm.faces.html_report",
    "lbnorm.faces.show", "lbnorm.faces.query", "lbnorm.arena", "lbnorm.nightly",
    "dask", "duckdb", "importlib.resources", "zipfile",
)  # fmt: skip


@pytest.fixture(scope="module")
def at_start(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The modules loaded before any command: by the probe, or the interpreter itself.

    A ``.pth`` file of the site packages may import certifi, and with it
    importlib.resources and zipfile: not the command's.
    """
    report, _ = _probe("--import", "sys", cwd=tmp_path_factory.mktemp("start"))
    assert report["code"] == 0
    modules = report["modules"]
    assert isinstance(modules, list)
    return set(modules)


def _loaded(
    names: Sequence[str], report: dict[str, object], at_start: set[str]
) -> list[str]:
    """Which of `names` a probed command loaded (:data:`_PROBE`'s report)."""
    modules = report["modules"]
    assert isinstance(modules, list)
    loaded = set(modules)
    return [name for name in names if name in loaded and name not in at_start]


def test_a_run_on_a_table_loads_no_results_parser(
    tmp_path: Path, demo_runs: dict[str, dict[str, object]], at_start: set[str]
) -> None:
    """The results-file parser and msgspec load for results files, not for a table."""
    assert _loaded(_BY_FORMAT, demo_runs["quiet"], at_start) == []  # a Parquet table
    golden = str(FIXTURES / "golden" / "01-ai__Yi-34B-Chat.json")
    tree, _ = _probe("run", golden, "--out", "tree", "--quiet", cwd=tmp_path)
    assert tree["code"] == 0
    assert _loaded(_BY_FORMAT, tree, at_start) == list(_BY_FORMAT)


def test_a_run_on_the_demo_loads_only_its_path(
    demo_runs: dict[str, dict[str, object]], at_start: set[str]
) -> None:
    """``lbnorm run --out DIR`` loads no module of another path (start-up, issue 43)."""
    assert _loaded(_OTHER_PATHS, demo_runs["summary"], at_start) == []


# --- stages read no environment -------------------------------------------------------

#: Modules that may read environment variables, and why (ARCHITECTURE.md: a stage reads none).
ENVIRONMENT_READERS = {
    "lbnorm.pipeline": "the composition: TMPDIR (spill_dir), SOURCE_DATE_EPOCH (created_at)",
    "lbnorm.cli": "the command's entry: the fault point, BLAS threads, Arrow's allocator",
}
_ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb"}


def environment_reads(source: str) -> list[str]:
    """Where `source` reaches the process environment through :mod:`os` (line: what)."""
    walked = nodes(source)
    modules = {  # what stands for os: ``import os as o`` makes ``o`` os
        alias.asname or alias.name
        for node in walked
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name == "os"
    }
    found: list[tuple[int, str]] = []
    for node in walked:
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [
                (node.lineno, f"os.{alias.name}")
                for alias in node.names
                if alias.name in _ENVIRONMENT_NAMES
            ]
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in _ENVIRONMENT_NAMES
            and ast.unparse(node.value) in modules
        ):
            found.append((node.lineno, ast.unparse(node)))
    return [f"{line}: {what}" for line, what in sorted(found)]


def test_stages_read_no_environment() -> None:
    """Only the composition and the command line read environment variables."""
    offenders = _uses_outside(ENVIRONMENT_READERS, environment_reads)
    assert offenders == [], (
        "pass it in through the options or an argument, read in lbnorm.pipeline "
        "or lbnorm.cli:\n" + "\n".join(offenders)
    )


def test_the_environment_check_sees_every_way_to_read_it() -> None:
    source = textwrap.dedent(
        """
        import os
        import os as o
        from os import environ, getenv
        def f():
            os.environ.get("TMPDIR")
            o.getenv("SOURCE_DATE_EPOCH")
            os.path.join("a", "b")  # no environment
            os.environb[b"X"]
        """
    )
    assert environment_reads(source) == [
        "4: os.environ",
        "4: os.getenv",
        "6: os.environ",
        "7: o.getenv",
        "9: os.environb",
    ]


def test_the_benchmark_scripts_import_names_the_package_has() -> None:
    """Every ``from lbnorm... import name`` in ``benchmarks_perf/`` resolves.

    The scripts sit outside mypy's reach and run only when measured, so a name
    made private or moved would otherwise break a benchmark unseen.
    """
    import importlib

    scripts = Path(__file__).resolve().parents[1] / "benchmarks_perf"
    missing = []
    for script in sorted(scripts.glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").split(".")[0] == "lbnorm"
            ):
                continue
            module = importlib.import_module(str(node.module))
            missing += [
                f"{script.name}: {node.module}.{alias.name}"
                for alias in node.names
                if not hasattr(module, alias.name)
                and importlib.util.find_spec(f"{node.module}.{alias.name}") is None
            ]
    assert not missing
