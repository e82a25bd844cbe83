"""The docs quote real runs: README.md and docs/*.md, re-run and compared.

What is checked, read from the Markdown itself (so an edited doc is checked as it is):

* **Transcripts.** A fenced block whose first line is ``$ COMMAND`` shows commands and what
  they print (stdout and stderr, as a terminal interleaves them; ``$ echo $?`` the exit
  code, ``$ cat FILE`` a file); a ```bash block of one ``lbnorm`` command followed by a
  ```text block shows that command and its output (the README's queries). Every one is
  re-run and must print exactly what the doc shows.
* **Commands.** Every other ``lbnorm`` command in a ```bash block runs and exits 0, unless it
  names an input the reader is meant to bring (:data:`PLACEHOLDERS`); every command, those
  included, parses with the CLI's own parser (quick).
* **Python.** Every ```python block runs (the blocks of one doc in one namespace, in order);
  one followed by a ```text block must print exactly that. Every ``lbnorm.x.y`` name the
  docs give resolves, and every ```toml block loads (quick).
* **Figures.** Numbers quoted in prose and rendered tables (:data:`FIGURES`): each entry
  names the doc, the text as it must read with the computed values in it, and how to
  compute them. :data:`QUOTED_TABLES`: Markdown tables copied from a command's output, row
  for row. :data:`ABRIDGED_JSON`: a JSON file shown in part. The report's own figures in
  docs/analysts.md (its size and what it is made of, its health and diff tables) are
  checked by ``tests/test_report.py::test_docs_quote_the_report``, on the page itself.

Everything runs in one folder, doc after doc (README.md first, then docs/ by name) and
block after block, as a reader following the docs would: later commands read the outputs
of earlier ones. The folder is a fresh clone as a reader has it: links to each of the
clone's top-level entries (the docs run "from the repository's root" and name the
repository's own files: ``tests/fixtures/full_structure``, ``tests/fixtures/tables/models.csv``).
What the docs write must be covered by the repository's ``.gitignore``, the clone's
``git status`` must be the same after the replay, and no two pages may write one output
(but the demo's ``lbnorm-out``, from plain demo runs).

Normalized before comparing, because they differ from run to run and nothing else may:
the time a run took (``time       0.48 s`` in a summary); in a JSON run report, its
``started_at`` and ``finished_at`` and the seconds it took (``timings_s``, the cache's
``seconds``). Paths are not normalized: the commands use relative paths. Blank lines at
the end of an output are not compared: in a doc they only separate one command from the
next. Measurements (timings, memory, speed-ups in the performance sections) are not
figures of a run and are not checked.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import io
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tomllib
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from oracles.harness_metrics import pooled_sample_stderr as harness_pooled_sample_stderr
from test_health import _with_drop
from test_uncertainty import closed_form_and_bootstrap

import lbnorm
from lbnorm import Result, RunOptions
from lbnorm.analysis.health import HealthConfig, check_health, check_result
from lbnorm.analysis.uncertainty import Uncertainty, estimate_uncertainty
from lbnorm.cli import build_parser, main
from lbnorm.core.files import MAX_RESULTS_BYTES
from lbnorm.engines.kernel import normalize as normalize_raw
from lbnorm.engines.metadata import TYPE_LABELS
from lbnorm.engines.stderr import clipped_variance
from lbnorm.ratings import (
    Battles,
    PairwiseScores,
    RatingOptions,
    compute_ratings,
    ratings_table,
    read_battles,
    win_rates_table,
)
from lbnorm.suites import load_suite, parse_suite

REPO = Path(__file__).parent.parent
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))

#: Words that mark a command's input as the reader's own (a cluster the docs cannot provide):
#: such a command is parsed, not run. Every other example runs as written from a fresh clone.
PLACEHOLDERS = (
    "/shared/",  # docs/dask.md: a real cluster's scheduler and shared folders
    "SCHEDULER",
)

_FENCE = re.compile(r"^( *)```(\S*)\s*$")


# --- reading the docs ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """A fenced block of a doc."""

    doc: str  # the doc's path in the repository
    line: int  # the line of its opening fence, from 1
    lang: str
    text: str
    # the next block comes right after it (only blank lines between)
    is_followed: bool = False

    @property
    def is_transcript(self) -> bool:
        return self.text.startswith("$ ")


def fenced_blocks(doc: Path) -> list[Block]:
    """The fenced blocks of `doc`, in order, each's indentation removed."""
    lines = doc.read_text().splitlines()
    found: list[tuple[int, int, str, str]] = []  # (open line, close line, lang, text)
    at = 0
    while at < len(lines):
        opening = _FENCE.match(lines[at])
        if opening is None:
            at += 1
            continue
        indent, lang = opening.groups()
        end = next(
            i for i in range(at + 1, len(lines)) if lines[i].strip() == "```"
        )  # a fence that never closes is a broken doc: StopIteration fails the test
        body = [line[len(indent) :] for line in lines[at + 1 : end]]
        found.append((at, end, lang, "\n".join(body)))
        at = end + 1
    name = str(doc.relative_to(REPO))
    return [
        Block(
            doc=name,
            line=start + 1,
            lang=lang,
            text=text,
            is_followed=index + 1 < len(found)
            and all(not line.strip() for line in lines[end + 1 : found[index + 1][0]]),
        )
        for index, (start, end, lang, text) in enumerate(found)
    ]


def _is_complete(command: str) -> bool:
    """Whether `command` is whole: no open quote, no line continued by a backslash."""
    if command.endswith("\\"):
        return False
    try:
        shlex.split(command, comments=True)
    except ValueError:  # No closing quotation
        return False
    return True


def split_commands(text: str, *, prompt: str = "") -> list[tuple[int, str, list[str]]]:
    """The commands of a block: (line offset, command, the lines printed after it).

    A command starts on a line beginning with `prompt` and goes on over the next lines while
    a quote is open or a line ends with a backslash. Without a prompt (a ```bash block)
    every other line that is not blank or a comment starts a command.
    """
    lines = text.splitlines()
    commands: list[tuple[int, str, list[str]]] = []
    at = 0
    while at < len(lines):
        line = lines[at]
        if not line.startswith(prompt) or not line.strip() or line.startswith("#"):
            if commands and prompt:
                commands[-1][2].append(line)
            at += 1
            continue
        start, command = at, line[len(prompt) :]
        while not _is_complete(command) and at + 1 < len(lines):
            at += 1
            command += "\n" + lines[at]
        commands.append((start, command.replace("\\\n", " "), []))
        at += 1
    return commands


def doc_blocks() -> list[Block]:
    return [block for doc in DOCS for block in fenced_blocks(doc)]


def _words(command: str) -> list[str]:
    return shlex.split(command, comments=True)


def lbnorm_commands() -> list[tuple[str, str]]:
    """Every ``lbnorm`` command the docs show: (where, command)."""
    found = []
    for block in doc_blocks():
        if block.is_transcript:
            commands = split_commands(block.text, prompt="$ ")
        elif block.lang == "bash":
            commands = split_commands(block.text)
        else:
            continue
        for offset, command, _ in commands:
            for part in _parts(command):
                if part[:1] == ["lbnorm"]:
                    found.append((f"{block.doc}:{block.line + 1 + offset}", part))
    return [(where, shlex.join(part)) for where, part in found]


def _parts(command: str) -> list[list[str]]:
    """The simple commands of a command line: split at ``&&``, ``|`` and ``>``."""
    parts: list[list[str]] = [[]]
    for word in _words(command):
        if word in ("&&", "|", ">"):
            parts.append([])
        else:
            parts[-1].append(word)
    return [part for part in parts if part]


# --- the plan: what runs, in order, and what the docs say it prints ----------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One command or snippet of the docs, where it is, and what the doc shows of it."""

    place: str  # doc:line
    kind: str  # "command" or "python"
    source: str  # the command line or the snippet
    shown: str | None  # what the doc says it prints; None: the doc shows nothing
    # the exit code it must end with (None: the `$ echo $?` after it checks it)
    code: int | None = 0


def plan() -> list[Step]:
    """Every step of every doc, in the order a reader meets them."""
    steps: list[Step] = []
    blocks = doc_blocks()
    for index, block in enumerate(blocks):
        after = blocks[index + 1] if block.is_followed else None
        shown_after = after.text + "\n" if after and after.lang == "text" else None
        if block.is_transcript:
            commands = split_commands(block.text, prompt="$ ")
            for number, (offset, command, shown) in enumerate(commands):
                is_checked_next = (
                    number + 1 < len(commands) and commands[number + 1][1] == "echo $?"
                )
                steps.append(
                    Step(
                        place=f"{block.doc}:{block.line + 1 + offset}",
                        kind="command",
                        source=command,
                        shown="".join(f"{line}\n" for line in shown),
                        code=None if is_checked_next else 0,
                    )
                )
        elif block.lang == "bash":
            commands = split_commands(block.text)
            steps += [
                Step(
                    place=f"{block.doc}:{block.line + 1 + offset}",
                    kind="command",
                    source=command,
                    shown=shown_after if len(commands) == 1 else None,
                )
                for offset, command, _ in commands
                if not any(word in command for word in PLACEHOLDERS)
                and any(part[0] == "lbnorm" for part in _parts(command))
            ]
        elif block.lang == "python":
            steps.append(
                Step(
                    place=f"{block.doc}:{block.line}",
                    kind="python",
                    source=block.text,
                    shown=shown_after,
                )
            )
    return steps


# --- running them ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What a step printed (stdout and stderr, interleaved), and its exit code."""

    printed: str
    code: int


def normalize(text: str) -> str:
    """`text` without what differs from run to run (see the module's docstring)."""
    text = re.sub(r"(?m)^time( +)[\d.]+ s$", r"time\1<seconds> s", text)
    text = re.sub(r'("(?:started|finished)_at": )"[^"]*"', r'\1"<time>"', text)
    text = re.sub(r'("seconds": )[\d.e-]+', r"\1<seconds>", text)
    for timings in re.findall(r'"timings_s": \{[^}]*\}', text):
        text = text.replace(timings, re.sub(r"(: )[\d.e-]+", r"\1<seconds>", timings))
    return text


#: What the docs run as written, in a shell: a tree copied to change a file in it.
_FILE_COMMANDS = {"cp", "printf"}


@dataclass(slots=True, kw_only=True)
class Replay:
    """The docs' steps run in order in `folder`, each's outcome kept by its place."""

    folder: Path
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    namespaces: dict[str, dict[str, object]] = field(default_factory=dict)
    last_code: int = 0
    status_before: str | None = None  # the clone's git status before the replay

    def run(self, steps: list[Step]) -> None:
        for step in steps:
            outcome = (
                self._python(step)
                if step.kind == "python"
                else self._command(step.source)
            )
            self.outcomes[step.place] = outcome

    def _command(self, command: str) -> Outcome:
        words = _words(command)
        if words == ["echo", "$?"]:
            return Outcome(printed=f"{self.last_code}\n", code=0)
        if words[:1] == ["cat"]:
            return Outcome(printed=(self.folder / words[1]).read_text(), code=0)
        if any(word in ("|", ">") for word in words) or words[0] in _FILE_COMMANDS:
            outcome = self._shell(command)
        else:  # `pip install . && lbnorm run`: lbnorm's part (installing is not ours)
            outcome = [
                run_lbnorm(list(_expand(part[1:], self.folder)))
                for part in _parts(command)
                if part[0] == "lbnorm"
            ][-1]
        self.last_code = outcome.code
        return outcome

    def _shell(self, command: str) -> Outcome:
        path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.folder,
            env={**os.environ, "PATH": path},
            capture_output=True,
            text=True,
            check=False,
        )
        return Outcome(printed=done.stdout + done.stderr, code=done.returncode)

    def _python(self, step: Step) -> Outcome:
        namespace = self.namespaces.setdefault(step.place.split(":")[0], {})
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            try:
                exec(compile(step.source, step.place, "exec"), namespace)
                code = 0
            except Exception:
                traceback.print_exc()
                code = -1
        return Outcome(printed=printed.getvalue(), code=code)


def run_lbnorm(argv: list[str]) -> Outcome:
    """``lbnorm ARGV`` in this process, its stdout and stderr captured as one stream."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            code = main(argv)
        except Exception:  # a bug: its traceback is what the test shows
            traceback.print_exc()
            code = -1
    return Outcome(printed=printed.getvalue(), code=code)


def _expand(words: list[str], folder: Path) -> Iterator[str]:
    """Words as the shell passes them: a pattern matching files becomes their names."""
    for word in words:
        is_pattern = bool(re.search(r"[*?[]", word)) and " " not in word
        matches = sorted(folder.glob(word)) if is_pattern else []
        yield from [str(path.relative_to(folder)) for path in matches] or [word]


def clone_entries() -> list[str]:
    """The top-level entries of a fresh clone: what git tracks (else what is here)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"],
            cwd=REPO,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (
        OSError,
        subprocess.CalledProcessError,
    ):  # not a checkout: the tree as it is
        return sorted(
            path.name
            for path in REPO.iterdir()
            if not path.name.startswith(".") and path.name not in _NOT_TRACKED
        )
    return sorted({name.split("/")[0] for name in listed.split("\0") if name})


#: What a working tree holds that a clone does not (without git to ask).
_NOT_TRACKED = {"build", "dist", "lbnorm-out"}


def git_status() -> str | None:
    """``git status --porcelain`` of the clone, untracked files included (None: no git)."""
    try:
        done = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replay]:
    """Every step of the docs, run once, in order, in one folder (see the docstring).

    The folder is a fresh clone as a reader has it: a link to each of the clone's
    top-level entries (``tests``, ``data``, ``README.md``...), so the docs' paths
    are the repository's own; what the docs write lands beside them, not in the
    clone, and the clone's ``git status`` is the same after the replay.
    """
    folder = tmp_path_factory.mktemp("docs")
    for name in clone_entries():
        (folder / name).symlink_to(REPO / name)
    replay = Replay(folder=folder, status_before=git_status())
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        replay.run(plan())
        yield replay


# --- the quick checks -------------------------------------------------------------------------


def test_docs_show_commands_with_their_output() -> None:
    shown = {doc.name: 0 for doc in DOCS}
    for step in plan():
        if step.shown is not None:
            shown[Path(step.place.split(":")[0]).name] += 1
    # README: the demo's summary, a hand-written table and its run, the suites, reading a table
    assert shown["README.md"] >= 4
    assert shown["analysts.md"] >= 6  # the five questions' queries
    assert shown["run.md"] >= 3  # the summaries, a v1 tree
    assert shown["arena.md"] >= 10
    assert shown["changes-and-health.md"] >= 8
    analysts = (REPO / "docs" / "analysts.md").read_text()
    assert len(re.findall(r"^### \d\. ", analysts, re.M)) == 5  # the analyst questions


@pytest.mark.parametrize(("where", "command"), lbnorm_commands())
def test_every_command_parses(where: str, command: str) -> None:
    """Placeholders included: every option the docs use exists and takes what they give."""
    with contextlib.redirect_stderr(io.StringIO()) as errors:
        try:
            build_parser().parse_args(shlex.split(command)[1:])
        except SystemExit as exc:
            pytest.fail(f"{where}: {command!r} exits {exc.code}: {errors.getvalue()}")


def test_install_commands_name_real_extras() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    named = [
        name
        for doc in DOCS
        for group in re.findall(r"pip install [^`\n]*?\.\[([\w,]+)\]", doc.read_text())
        for name in group.split(",")
    ]
    assert "sql" in named
    # lbnorm is on no package index: installs are from a clone (`pip install '.[sql]'`)
    by_name = [
        doc.name
        for doc in DOCS
        if re.search(r"pip install ['\"]?lbnorm", doc.read_text())
    ]
    assert by_name == []
    assert [
        name for name in named if name not in project["optional-dependencies"]
    ] == []


def test_every_data_file_of_the_package_is_installed() -> None:
    """A wheel (``pip install .``) ships each non-Python file of the package.

    The suites, the demo data and the reports' style sheets and script are read
    from beside their modules; a file that pyproject's package-data does not
    name works in a clone and is missing from an installation.
    """
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["lbnorm"]
    package = REPO / "src" / "lbnorm"
    files = [
        path.relative_to(package)
        for path in package.rglob("*")
        if path.is_file() and path.suffix not in {".py", ".pyc"}
    ]
    assert Path("faces/report.css") in files
    assert [path for path in files if not any(path.match(p) for p in patterns)] == []


def test_ci_runs_the_test_commands_the_docs_give() -> None:
    """``.ci/run`` runs the full suite exactly as the README gives it; CONTRIBUTING agrees.

    The README's quick and full commands are what a reader (and CI) runs; a flag
    added to one (``-n auto``, a marker) and not to the others would let CI test
    something else than the README promises.
    """
    readme = (REPO / "README.md").read_text()
    quick = re.findall(r'pip install -e "\.\[dev\]" && (python -m pytest.*)', readme)
    full = re.findall(
        r"The full suite \(slow tests.*?\n?.*?`(python -m pytest [^`]+)`", readme
    )
    assert quick == ["python -m pytest -n auto"]
    assert full == ['python -m pytest -n auto -m ""']
    ci = (REPO / ".ci" / "run").read_text().splitlines()[-1]
    assert ci == f'pip install -e ".[dev]" && {full[0]}'
    contributing = (REPO / "CONTRIBUTING.md").read_text()
    assert f"{quick[0]}  " in contributing
    assert f"{full[0]}  " in contributing


@pytest.mark.parametrize(
    "step", [step for step in plan() if step.kind == "python"], ids=lambda s: s.place
)
def test_python_snippets_compile(step: Step) -> None:
    compile(step.source, step.place, "exec")


# --- the reruns -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("step", plan(), ids=lambda step: step.place)
def test_docs_print_what_the_commands_print(step: Step, replay: Replay) -> None:
    outcome = replay.outcomes[step.place]
    if step.code is not None:
        assert outcome.code == step.code, outcome.printed
    if step.shown is not None:  # a blank line after the output only separates commands
        assert normalize(outcome.printed).rstrip("\n") == normalize(step.shown).rstrip(
            "\n"
        )


def written_entries(replay: Replay) -> list[str]:
    """What the docs wrote into the replay's folder: its entries but the clone's."""
    clone = set(clone_entries())
    return sorted(
        path.name for path in replay.folder.iterdir() if path.name not in clone
    )


@pytest.mark.slow
def test_the_docs_leave_nothing_but_what_they_name(replay: Replay) -> None:
    """After every command of the docs, the folder holds the clone's entries and the
    files and outputs the commands name: no lock file, no staging folder."""
    sources = [step.source for step in plan()]
    left = written_entries(replay)
    assert left  # the outputs are there
    assert [
        name for name in left if not any(name in source for source in sources)
    ] == []


@pytest.mark.slow
def test_gitignore_covers_what_the_docs_write(replay: Replay) -> None:
    """A reader following the docs from the clone's root leaves it clean: every file
    and folder the docs write is ignored by the repository's .gitignore."""
    names = [
        name + "/" if (replay.folder / name).is_dir() else name
        for name in written_entries(replay)
    ]
    try:
        done = subprocess.run(
            ["git", "check-ignore", "--no-index", "--stdin"],
            cwd=REPO,
            input="\n".join(names) + "\n",
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        pytest.skip("git is not installed")
    if done.returncode not in (0, 1):  # 128: not a git checkout
        pytest.skip(f"git check-ignore: {done.stderr.strip()}")
    ignored = set(done.stdout.splitlines())
    assert [name for name in names if name not in ignored] == []


@pytest.mark.slow
def test_the_replay_leaves_the_clone_clean(replay: Replay) -> None:
    """Nothing the docs run writes through the folder's links into the clone."""
    if replay.status_before is None:
        pytest.skip("not a git checkout")
    assert git_status() == replay.status_before


#: Outputs the docs share on purpose: the bundled demo's, written by plain `lbnorm run`s
#: (no inputs, no option that changes the tables) and read by later pages.
SHARED_OUTPUTS = {"lbnorm-out"}


def _written_by(command: str) -> list[tuple[str, bool]]:
    """The files and folders a command line's ``lbnorm`` parts write (``--out``,
    reports, ``>``), each with whether a plain demo run writes it."""
    written = []
    for part in _parts(command):
        if part[:1] != ["lbnorm"]:
            continue
        try:
            args = build_parser().parse_args(part[1:])
        except SystemExit:
            continue
        names = ["report", "markdown", "html", "failures", "output"]
        if args.command in _WRITES_OUT:
            names.append("out")
        for name in names:
            value = getattr(args, name, None)
            if isinstance(value, str) and value:
                written.append((value, _is_plain_demo_run(part)))
    words = _words(command)
    written += [
        (words[at + 1], False) for at, word in enumerate(words[:-1]) if word == ">"
    ]
    return [
        (Path(name).parts[0], is_plain)
        for name, is_plain in written
        if not Path(name).is_absolute()
    ]


#: The commands whose ``out`` they write (the others' ``out`` is the output they read).
_WRITES_OUT = {"run", "arena", "convert", "diff", "impact", "health", "export"}


def _is_plain_demo_run(part: list[str]) -> bool:
    """``lbnorm run`` of the demo with options that change no table (--top, --quiet)."""
    options = [
        word for word in part[2:] if word not in ("--quiet", "--out", "lbnorm-out")
    ]
    return part[:2] == ["lbnorm", "run"] and all(
        word == "--top" or word.isdigit() for word in options
    )


def test_no_two_pages_write_one_output() -> None:
    """A page's outputs are its own: a reader may follow the pages in any order, and
    an output another page wrote would change what a command prints (an existing
    output of another kind is refused, exit 6). Only plain demo runs share lbnorm-out."""
    writers: dict[str, set[str]] = {}
    not_plain = []
    for step in plan():
        if step.kind != "command":
            continue
        doc = step.place.split(":")[0]
        for name, is_plain in _written_by(step.source):
            if name in SHARED_OUTPUTS:
                if not is_plain:
                    not_plain.append(step.place)
                continue
            writers.setdefault(name, set()).add(doc)
    assert not_plain == []  # they would change the demo's output other pages read
    assert {name: docs for name, docs in writers.items() if len(docs) > 1} == {}


# --- figures quoted in prose and rendered tables ------------------------------------------------


class Sources:
    """What the figures are computed from: the replay's outputs, and runs of their own."""

    def __init__(self, replay: Replay) -> None:
        self.replay = replay

    def printed(self, command: str) -> str:
        """What the docs' first step running `command` printed (the replay's)."""
        wanted = shlex.split(command)
        for step in plan():
            if step.kind == "command" and _words(step.source) == wanted:
                return self.replay.outcomes[step.place].printed
        msg = f"no doc runs {command!r}"
        raise AssertionError(msg)

    def cli(self, *argv: str) -> Outcome:
        """Run ``lbnorm ARGV`` in the replay's folder (the caller is in it)."""
        return run_lbnorm(list(argv))

    @functools.cached_property
    def demo(self) -> Result:
        return lbnorm.run()

    @functools.cached_property
    def uncertainty(self) -> Uncertainty:
        demo = self.demo
        return estimate_uncertainty(
            demo.subtasks, demo.leaderboard, demo.suite, missing=demo.missing
        )

    @functools.cached_property
    def demo_health(self) -> pd.DataFrame:
        demo = self.demo
        return check_result(demo.subtasks, demo.leaderboard, demo.suite)

    @functools.cached_property
    def published(self) -> pd.DataFrame:
        return pd.read_csv(REPO / "data" / "published_v2_final.csv")

    @functools.cached_property
    def published_health(self) -> pd.DataFrame:
        return check_health(self.published).set_index("benchmark")

    @functools.cache  # noqa: B019 (one Sources per module)
    def drop_health(self, stuck_share: float) -> pd.DataFrame:
        """The health table of the published table plus a DROP-like benchmark."""
        table = _with_drop(self.published, stuck_share=stuck_share)
        return check_health(table).set_index("benchmark")

    @functools.cached_property
    def with_drop_csv(self) -> str:
        """The published table with DROP as the deep dive saw it, 80% stuck, as a CSV."""
        path = self.replay.folder / "with_drop.csv"
        _with_drop(self.published, stuck_share=0.8).to_csv(path, index=False)
        return path.name

    @functools.cached_property
    def arena(self) -> dict[str, object]:
        """The names docs/arena.md's Python snippets defined (``battles``, ``table``...)."""
        return self.replay.namespaces["docs/arena.md"]

    def ratings(self, where: str, **options: object) -> pd.DataFrame:
        battles = read_battles(ARENA_BATTLES, where=[where])
        fit = compute_ratings(battles, RatingOptions(**options))  # type: ignore[arg-type]
        table: pd.DataFrame = ratings_table(fit).to_pandas()
        return table.set_index("model")


ARENA_BATTLES = REPO / "tests" / "fixtures" / "battles" / "clean_battle_20230601.json"


def _n(value: float) -> str:
    """A count as the docs write it: 4,576."""
    return f"{round(value):,}"


def _top(table: pd.DataFrame, n: int) -> str:
    """The first `n` ratings as docs/arena.md lists them: ``gpt-4 1183.6, ...``."""
    return ", ".join(
        f"{model} {rating:.1f}" for model, rating in table["rating"].head(n).items()
    )


def _relative(value: float) -> str:
    """A relative difference as the stderr table writes it: -3.6e-6, +4.1%."""
    if abs(value) >= 0.01:
        return f"{value:+.1%}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _pooled_stderrs(group: str, name: str) -> tuple[float, float, float, list[float]]:
    """One real file's pooled benchmark: the harness's stderr, the two alternatives' relative
    differences from it (weighted mean of independent means; the items as one sample), and
    the subtask means."""
    (path,) = (REPO / "tests" / "fixtures" / "harness_groups").glob(
        f"*/{name}/results_*.json"
    )
    data = json.loads(path.read_text())
    metric = "acc_norm" if "gpqa" in group else "exact_match"
    tasks = data["group_subtasks"][group]
    means = [data["results"][task][f"{metric},none"] for task in tasks]
    stderrs = [data["results"][task][f"{metric}_stderr,none"] for task in tasks]
    sizes = [data["n-samples"][task]["effective"] for task in tasks]
    total = sum(sizes)
    harness = harness_pooled_sample_stderr(stderrs, sizes)
    weighted = math.sqrt(
        sum((n * se) ** 2 for n, se in zip(sizes, stderrs, strict=True))
    )
    mean = sum(n * p for n, p in zip(sizes, means, strict=True)) / total
    one_sample = math.sqrt(mean * (1 - mean) / (total - 1))
    return harness, weighted / total / harness - 1, one_sample / harness - 1, means


def _cell(frame: pd.DataFrame, row: object, column: str) -> Any:
    """One value, typed loosely: pandas-stubs types `.loc[row, column]` as a union."""
    return frame[column].to_dict()[row]


def _rho(health: pd.DataFrame, name: str, digits: int = 2) -> str:
    return f"{_cell(health, name, 'loo_spearman'):.{digits}f}"


def _pct(share: float) -> str:
    return f"{share:.0%}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """A doc quotes `text`, with each ``{}`` the value `compute` gives, exactly."""

    doc: str
    text: str
    compute: Callable[[Sources], tuple[object, ...]]


def _suite_counts(name: str) -> dict[str, int]:
    return {b.name: len(b.subtasks) for b in load_suite(name).benchmarks}


FIGURES = [
    # README: the Quickstart, the normalization rule, the suites
    Figure(
        doc="README.md",
        text="bundled demo leaderboard ({} real Open LLM Leaderboard v2 models)",
        compute=lambda s: (_n(len(s.demo.leaderboard)),),
    ),
    Figure(
        doc="README.md",
        text="for `allenai/Llama-3.1-Tulu-3-8B-RM`, {} of {} BBH subtasks are below chance; clipping "
        "each subtask gives the published BBH of {}, averaging unclipped values would give {}.",
        compute=lambda s: _tulu(),
    ),
    Figure(
        doc="README.md",
        text="IFEval, BBH ({} subtasks), MATH Lvl 5 ({}, pooled), GPQA ({}, pooled), MUSR ({}), "
        "MMLU-PRO: {} subtasks",
        compute=lambda s: (
            *(
                _suite_counts("openllm-v2")[b]
                for b in ("BBH", "MATH Lvl 5", "GPQA", "MUSR")
            ),
            sum(_suite_counts("openllm-v2").values()),
        ),
    ),
    Figure(
        doc="README.md",
        text="MMLU ({} subjects)",
        compute=lambda s: (_suite_counts("openllm-v1")["MMLU"],),
    ),
    Figure(
        doc="docs/run.md",
        text="A results file is at most {} MiB (real ones are about {} KB;",
        compute=lambda s: (
            MAX_RESULTS_BYTES // 2**20,
            round(
                statistics.mean(
                    path.stat().st_size
                    for path in (REPO / "tests/fixtures/full_structure").rglob("*.json")
                ),
                -4,
            )
            // 1000,
        ),
    ),
    # changes-and-health: health in one paragraph
    Figure(
        doc="docs/changes-and-health.md",
        text="(Spearman vs the rest: IFEval {}, BBH {}, MATH {}, GPQA {}, MUSR {}, MMLU-PRO {}); a "
        "synthetic DROP-like benchmark fails with rho {} and {} of models stuck in the low band.",
        compute=lambda s: (
            *(
                _rho(s.published_health, name)
                for name in ("IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO")
            ),
            _rho(s.drop_health(0.8), "DROP"),
            _pct(_cell(s.drop_health(0.8), "DROP", "stuck_share")),
        ),
    ),
    # analysts: the analyst questions' prose
    Figure(
        doc="docs/analysts.md",
        text='Two leaders carry odd published parameter counts (a "7B" listed at {}B, a "14B" at {}B)',
        compute=lambda s: tuple(
            f"{_params(s, model):.2f}"
            for model in (
                "PJMixers-Dev/Qwen2.5-RomboTiesTest-7B",
                "FINGU-AI/Chocolatine-Fusion-14B",
            )
        ),
    ),
    Figure(
        doc="docs/analysts.md",
        text="The best average has not moved since {},",
        compute=lambda s: (_best_month(s),),
    ),
]

CHANGES = "docs/changes-and-health.md"
FIGURES += [
    # changes-and-health, section 1: the GPQA bound 0.25 -> 0.3 on the demo
    Figure(
        doc=CHANGES,
        text="The largest drop, {} points, is for `p` just under 0.3.",
        compute=lambda s: (f"{-_gpqa_deltas(s).min():.2f}",),
    ),
    Figure(
        doc=CHANGES,
        text="(min {} = {} / 6; max 0 for the {} variants whose GPQA was already clipped to 0): "
        "{} scores and {} averages changed.",
        compute=lambda s: (
            f"{_gpqa_deltas(s).min() / 6:.3f}",
            f"{_gpqa_deltas(s).min():.3f}",
            _n((s.demo.leaderboard["GPQA"] == 0).sum()),
            _n((_gpqa_deltas(s) != 0).sum()),
            _n((_gpqa_deltas(s) != 0).sum()),
        ),
    ),
    Figure(
        doc=CHANGES,
        text="{} newly clipped (every GPQA subtask score in [0.25, 0.3)), 0 unclipped.",
        compute=lambda s: (_n(_gpqa_subtasks_between(s, 0.25, 0.3)),),
    ),
    Figure(
        doc=CHANGES,
        text="lightly reordered: tau {} and rho {}, below 1.",
        compute=lambda s: _tau_rho(s),
    ),
    Figure(
        doc=CHANGES,
        text="None of the {} moves beyond 10 places leaves the rank intervals: a GPQA shift of at "
        "most {} points on the average is within the average's own noise (95% intervals about "
        "+/- {} points; section 4).",
        compute=lambda s: (
            _impact_figure(s, "moved more than 10 places").split(" of ")[0],
            f"{-_gpqa_deltas(s).min() / 6:.1f}",
            f"{1.96 * s.uncertainty.leaderboard['average_stderr'].median():.2f}",
        ),
    ),
    # section 3: health
    Figure(
        doc=CHANGES,
        text="MMLU-PRO and BBH track the rest most closely ({}, {}); MUSR and IFEval least ({}, {})",
        compute=lambda s: tuple(
            _rho(s.published_health, name)
            for name in ("MMLU-PRO", "BBH", "MUSR", "IFEval")
        ),
    ),
    Figure(
        doc=CHANGES,
        text="{} of the models are in the lowest tenth of its range, and their averages spread {} "
        "times as wide as everyone's",
        compute=lambda s: (
            _pct(_cell(s.published_health, "MATH Lvl 5", "stuck_share")),
            f"{_cell(s.published_health, 'MATH Lvl 5', 'stuck_spread'):.2f}",
        ),
    ),
    Figure(
        doc=CHANGES,
        text="the floor becomes the noise (`lbnorm health`, exit 0, {} subtasks checked, 0 failed)",
        compute=lambda s: ((s.demo_health["level"] == "subtask").sum(),),
    ),
    Figure(
        doc=CHANGES,
        text="{} of the models are within noise of GPQA's floor, and {} of MUSR's (1.96 standard "
        "errors: a median of {} points on GPQA, {} on MUSR)",
        compute=lambda s: (
            _pct(_cell(_demo_benchmark_health(s), "GPQA", "floor_rate")),
            _pct(_cell(_demo_benchmark_health(s), "MUSR", "floor_rate")),
            f"{_median_margin(s, 'GPQA'):.1f}",
            f"{_median_margin(s, 'MUSR'):.1f}",
        ),
    ),
    Figure(
        doc=CHANGES,
        text="the real v2 benchmarks range from {} (MUSR) to {}; a DROP-like benchmark gives {} "
        "(90% stuck) to {} (60% stuck).",
        compute=lambda s: (
            _rho(s.published_health, "MUSR", 3),
            f"{s.published_health['loo_spearman'].max():.3f}",
            _rho(s.drop_health(0.9), "DROP"),
            _rho(s.drop_health(0.6), "DROP"),
        ),
    ),
    Figure(
        doc=CHANGES,
        text="Real maxima: {} (GPQA, with stderr), {} without; 0 at the ceiling.",
        compute=lambda s: (
            f"{_demo_benchmark_health(s)['floor_rate'].max():.2f}",
            f"{s.published_health['floor_rate'].max():.3f}",
        ),
    ),
    Figure(
        doc=CHANGES,
        text="`floor_points = 1.0`, the margin without stderr, is about {} GPQA or {} MATH items.",
        compute=lambda s: tuple(
            round(_items_per_point(name)) for name in ("GPQA", "MATH Lvl 5")
        ),
    ),
    Figure(
        doc=CHANGES,
        text="the real low bands hold at most {} (MATH); the synthetic DROP's {}-{}.",
        compute=lambda s: (
            _pct(s.published_health["stuck_share"].max()),
            f"{_cell(s.drop_health(0.6), 'DROP', 'stuck_share'):.0%}".rstrip("%"),
            _pct(_cell(s.drop_health(0.9), "DROP", "stuck_share")),
        ),
    ),
    Figure(
        doc=CHANGES,
        text="the real bands spread {}-{} (IFEval's {} is over a band of {}); the stuck clusters "
        "{}-{}.",
        compute=lambda s: (
            f"{s.published_health['stuck_spread'].drop('IFEval').min():.2f}",
            f"{s.published_health['stuck_spread'].drop('IFEval').max():.2f}",
            f"{_cell(s.published_health, 'IFEval', 'stuck_spread'):.2f}",
            f"{_cell(s.published_health, 'IFEval', 'stuck_share'):.1%}",
            f"{_cell(s.drop_health(0.9), 'DROP', 'stuck_spread'):.2f}",
            f"{_cell(s.drop_health(0.6), 'DROP', 'stuck_spread'):.2f}",
        ),
    ),
    Figure(
        doc=CHANGES,
        text="On the demo the lowest is {} {} at {}",
        compute=lambda s: _lowest_subtask(s),
    ),
    # section 4: standard errors
    Figure(
        doc=CHANGES,
        text="| GPQA (Yi-34B-Chat) | {} | {} | {} |",
        compute=lambda s: _stderr_row("leaderboard_gpqa", "Yi-34B-Chat"),
    ),
    Figure(
        doc=CHANGES,
        text="| GPQA (Meta-Llama-3-8B-Instruct) | {} | {} | {} |",
        compute=lambda s: _stderr_row("leaderboard_gpqa", "Meta-Llama-3-8B-Instruct"),
    ),
    Figure(
        doc=CHANGES,
        text="| MATH Lvl 5 (Meta-Llama-3-8B-Instruct) | {} | {} | {} |",
        compute=lambda s: _stderr_row(
            "leaderboard_math_hard", "Meta-Llama-3-8B-Instruct"
        ),
    ),
    Figure(
        doc=CHANGES,
        text="MATH's subtask means run from {} (intermediate algebra) to {} (prealgebra): taken as "
        "one sample its items would look {} noisier.",
        compute=lambda s: _math_means(),
    ),
    Figure(
        doc=CHANGES,
        text="GPQA: the file's `groups` says {} raw, i.e. `100 * {} / 0.75 = {}` normalized.",
        compute=lambda s: (
            repr(float(_pooled_stderrs("leaderboard_gpqa", "Yi-34B-Chat")[0])),
            repr(float(_pooled_stderrs("leaderboard_gpqa", "Yi-34B-Chat")[0])),
            repr(
                float(
                    100 * _pooled_stderrs("leaderboard_gpqa", "Yi-34B-Chat")[0] / 0.75
                )
            ),
        ),
    ),
    Figure(
        doc=CHANGES,
        text="one at its bound keeps about a third ({} sigma^2)",
        compute=lambda s: (f"{clipped_variance([0.0], [1.0])[0]:.2f}",),
    ),
    Figure(
        doc=CHANGES,
        text="near the bound it is biased upward by at most {} standard errors",
        compute=lambda s: (f"{1 / math.sqrt(2 * math.pi):.1f}",),
    ),
    Figure(
        doc=CHANGES,
        text="IFEval's instruction-level accuracy averages {} instructions over {} prompts",
        compute=lambda s: _ifeval_items(),
    ),
    Figure(
        doc=CHANGES,
        text="without the `n_samples` column both rows pool by the suite's {} and give {}.",
        compute=lambda s: _pooled_by_suite(),
    ),
    Figure(
        doc=CHANGES,
        text="The published table's {} tied rows ({} groups) are exact ties",
        compute=lambda s: _published_ties(s),
    ),
    Figure(
        doc=CHANGES,
        text="On the demo: averages have standard errors of {}-{} points (median {}; per "
        "benchmark, median: IFEval {}, BBH {}, MATH Lvl 5 {}, GPQA {}, MUSR {}, MMLU-PRO {}), "
        "and the {} ranked variants form {} tie groups; the median rank range spans {} places.",
        compute=lambda s: _interval_figures(s),
    ),
    Figure(
        doc=CHANGES,
        text="The top four are statistically tied; so are the next {} (ranks {}-{}:",
        compute=lambda s: _second_tie_group(s),
    ),
]

ARENA = "docs/arena.md"
FIGURES += [
    Figure(
        doc=ARENA,
        text="holds {} battles among ten spring-2023 Arena models",
        compute=lambda s: (_n(read_battles(ARENA_BATTLES).n_rows_read),),
    ),
    Figure(
        doc=ARENA,
        text="# {} models, {} battles; warnings: filtered ({} rows did not match --where)",
        compute=lambda s: _battle_counts(s),
    ),
    Figure(
        doc=ARENA,
        text='With {} votes the intervals are wide: the top seven models are all "rank (UB) 1 or '
        '2".',
        compute=lambda s: (
            _table(s, "table")["n_battles"].sum() // 2
            if _table(s, "table")["rank_upper_bound"].head(7).max() <= 2
            else "(the top seven are not all rank (UB) 1 or 2)",
        ),
    ),
    Figure(
        doc=ARENA,
        text="The first rows of `win_rates_table`: gpt-4 beats gpt-3.5-turbo with probability "
        "{}, claude-v1 {}, mixtral-8x7b-instruct-v0.1 {}.",
        compute=lambda s: _gpt4_win_rates(s),
    ),
    Figure(
        doc=ARENA,
        text="`scores.unmapped` lists the six arena names the map does not cover ({}); "
        "`scores.unused` is `{}`,",
        compute=lambda s: (
            ", ".join(sorted(cast("PairwiseScores", s.arena["scores"]).unmapped)),
            repr(tuple(cast("PairwiseScores", s.arena["scores"]).unused)),
        ),
    ),
    Figure(
        doc=ARENA,
        text="`--l2 1` shrinks the ratings towards 1000 ({}, unanchored)",
        compute=lambda s: (_top(s.ratings("anony", l2=1.0), 3),),
    ),
    Figure(
        doc=ARENA,
        text="online Elo with K = 4 has barely moved from 1000 after {} battles ({}).",
        compute=lambda s: (
            read_battles(ARENA_BATTLES, where=["anony"]).n_battles,
            _top(s.ratings("anony", method="elo"), 3),
        ),
    ),
    Figure(
        doc=ARENA,
        text="With `--l2 1` the same battles are rated ({}, ...).",
        compute=lambda s: (
            _top(s.ratings("language = 'German'", ties="drop", l2=1.0), 3),
        ),
    ),
    # samples.md: the real file the sample fixtures reproduce
    Figure(
        doc="docs/samples.md",
        text="(MUSR murder mysteries {} over {} documents: {} right, in a seeded order; MMLU-PRO {} "
        "over {}; IFEval's instruction lists sized so the flattened mean is {}).",
        compute=lambda s: _llama_scores(),
    ),
    Figure(
        doc="docs/samples.md",
        text="ddof = 0 would miss MUSR murder mysteries' by {})",
        compute=lambda s: (_ddof_gap(),),
    ),
    Figure(
        doc="docs/samples.md",
        text="{} models x {} documents = **{} rows**",
        compute=lambda s: (
            _n(len(s.demo.leaderboard)),
            _n(_suite_documents()),
            _n(len(s.demo.leaderboard) * _suite_documents()),
        ),
    ),
    Figure(
        doc="docs/samples.md",
        text="to 1e-9 over all {} (model, subtask) groups.",
        compute=lambda s: (_n(len(s.demo.subtasks)),),
    ),
    # analysts.md: the demo's metadata
    Figure(
        doc="docs/analysts.md",
        text="`type` in words, as the leaderboard shows it ({}), `type_code` (the same as the "
        "leaderboard's API spells it: `{}`)",
        compute=lambda s: (
            ", ".join(f"`{label}`" for label in _types(s)),
            _type_code(s, "fine-tuned on domain-specific datasets"),
        ),
    ),
    Figure(
        doc="docs/analysts.md",
        text="parameters in billions, {} where unknown",
        compute=lambda s: (
            " or ".join(
                f"{value:g}"
                for value in sorted(
                    set(
                        s.demo.leaderboard["params_b"][
                            s.demo.leaderboard["params_b"] <= 0
                        ]
                    )
                )
            ),
        ),
    ),
    Figure(
        doc="docs/analysts.md",
        text="derived from `params_b` ({};",
        compute=lambda s: (
            ", ".join(
                f"`{size}`"
                for size in s.demo.leaderboard.dropna(subset="size_class")
                .groupby("size_class", observed=True)["params_b"]
                .min()
                .sort_values()
                .index
            ),
        ),
    ),
]


FIGURES += [
    Figure(
        doc="README.md",
        text="| MUSR murder mysteries (2 choices) | 0.7 | 1/2 | **{}** |\n"
        "| MUSR object placements (5 choices) | 0.4 | 1/5 | **{}** |\n"
        "| MUSR team allocation (3 choices) | 0.6 | 1/3 | **{}** (with the page's rounded 0.333 it "
        "would be {}) |\n"
        "| MUSR (normalize, then average) | | | (40 + 25 + 40) / 3 = **{}** ({} with 0.333) |",
        compute=lambda s: _musr_example(),
    ),
    Figure(
        doc=CHANGES,
        text="({} of them land in the low band at 80%)",
        compute=lambda s: (_pct(_cell(s.drop_health(0.8), "DROP", "stuck_share")),),
    ),
    Figure(
        doc=CHANGES,
        text="both IFEval subtasks are estimated for every variant (`n_stderr_estimated` {}).",
        compute=lambda s: _ifeval_estimated(s),
    ),
    Figure(
        doc=CHANGES,
        text="The closed-form standard errors agree with the bootstrap's within {}% for the averages "
        "({}) and {}% for the benchmarks. The widest gap is the model whose pooled score sits {} "
        "standard errors above its bound: lbnorm gives the harness's linear {}, the bootstrap {},",
        compute=lambda s: _bootstrap_figures(),
    ),
    Figure(
        doc=ARENA,
        text="| model | rating | rating_lower | rating_upper | rank | rank_upper_bound | n_battles | "
        "n_wins | n_ties | win_rate |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n{}",
        compute=lambda s: (_ratings_rows(_table(s, "table")),),
    ),
    Figure(
        doc=ARENA,
        text="| model | raw_score | n_samples |\n|---|---:|---:|\n{}",
        compute=lambda s: (
            "\n".join(
                f"| {row['model']} | {row['raw_score']:.3f} | {row['n_samples']} |"
                for row in cast("PairwiseScores", s.arena["scores"]).table.to_pylist()
            ),
        ),
    ),
]

# the computations the figures share


def _musr_example() -> tuple[object, ...]:
    raw = np.array([0.7, 0.4, 0.6])
    exact, _ = normalize_raw(raw, np.array([1 / 2, 1 / 5, 1 / 3]))
    rounded, _ = normalize_raw(raw, np.array([1 / 2, 1 / 5, 0.333]))
    scores = pd.DataFrame(
        {
            "model": ["m"] * 3,
            "benchmark": ["MUSR"] * 3,
            "subtask": ["murder_mysteries", "object_placements", "team_allocation"],
            "raw_score": raw,
        }
    )
    musr = lbnorm.normalize_scores(scores, options=RunOptions(missing="partial"))
    return (
        *(f"{value:.2f}" for value in exact),
        f"{rounded[2]:.2f}",
        f"{musr.benchmarks['normalized_score'].item():.2f}",
        f"{rounded.mean():.2f}",
    )


def _ifeval_estimated(s: Sources) -> tuple[object, ...]:
    benchmarks = s.demo.benchmarks
    (estimated,) = set(
        benchmarks.loc[benchmarks["benchmark"] == "IFEval", "n_stderr_estimated"]
    )
    return (estimated,)


def _bootstrap_figures() -> tuple[object, ...]:
    check = closed_form_and_bootstrap()
    models = ["m0", "m1", "m2"]
    averages = [(check.closed[m], _cell(check.spread, m, "average")) for m in models]
    benchmarks = [
        (check.closed_benchmarks[(m, b)], _cell(check.spread, m, b))
        for m in models
        for b in ("A", "B")
    ]
    widest_model, widest_benchmark = max(
        ((m, b) for m in models for b in ("A", "B")),
        key=lambda key: abs(
            check.closed_benchmarks[key] / _cell(check.spread, *key) - 1
        ),
    )
    assert widest_benchmark == "B"  # the pooled one
    index = models.index(widest_model)
    pooled = (198 * check.raw["b1"][index] + 448 * check.raw["b2"][index]) / 646
    linear = check.closed_benchmarks[(widest_model, "B")]
    return (
        math.ceil(100 * max(abs(a / b - 1) for a, b in averages)),
        ", ".join(f"{a:.2f} against {b:.2f}" for a, b in averages),
        math.ceil(100 * max(abs(a / b - 1) for a, b in benchmarks)),
        f"{(pooled - 0.25) / (linear * 0.75 / 100):.1f}",
        f"{linear:.2f}",
        f"{_cell(check.spread, widest_model, 'B'):.2f}",
    )


def _ratings_rows(table: pd.DataFrame) -> str:
    return "\n".join(
        f"| {row['model']} | {row['rating']:.1f} | {row['rating_lower']:.1f} | "
        f"{row['rating_upper']:.1f} | {row['rank']} | {row['rank_upper_bound']} | "
        f"{row['n_battles']} | {row['n_wins']} | {row['n_ties']} | {row['win_rate']:.3f} |"
        for row in table.to_dict("records")
    )


def _tulu() -> tuple[object, ...]:
    result = lbnorm.run(
        [REPO / "tests/fixtures/golden/allenai__Llama-3.1-Tulu-3-8B-RM.json"]
    )
    bbh = result.subtasks[result.subtasks["benchmark"] == "BBH"]
    unclipped = (bbh["raw_score"] - bbh["lower_bound"]) / (1 - bbh["lower_bound"]) * 100
    return (
        int(bbh["is_clipped"].sum()),
        len(bbh),
        f"{result.leaderboard['BBH'].item():.2f}",
        f"{unclipped.mean():.2f}",
    )


def _params(s: Sources, model: str) -> float:
    board = s.demo.leaderboard
    return float(board.loc[board["model"] == model, "params_b"].item())


def _best_month(s: Sources) -> str:
    board = s.demo.leaderboard.dropna(subset="submission_date")
    best = board["submission_date"].to_list()[int(board["average"].to_numpy().argmax())]
    return f"{best:%B %Y}"


def _gpqa_deltas(s: Sources) -> pd.Series:
    """GPQA's change per variant when its bound goes from 0.25 to 0.3 (the pooled raw score)."""
    raw = s.demo.benchmarks.loc[s.demo.benchmarks["benchmark"] == "GPQA", "raw_score"]
    new = ((raw - 0.3) / 0.7).clip(lower=0) * 100
    old = ((raw - 0.25) / 0.75).clip(lower=0) * 100
    return (new - old).reset_index(drop=True)


def _gpqa_subtasks_between(s: Sources, low: float, high: float) -> int:
    gpqa = s.demo.subtasks[s.demo.subtasks["benchmark"] == "GPQA"]
    return int(gpqa["raw_score"].between(low, high, inclusive="left").sum())


def _impact_figure(s: Sources, name: str) -> str:
    """A figure of the summary `lbnorm impact --set-bound GPQA=0.3` printed on the demo."""
    printed = s.printed("lbnorm impact --set-bound GPQA=0.3")
    found = re.search(rf"^\| {re.escape(name)} \| (.*) \|$", printed, re.M)
    assert found, printed
    return found.group(1)


def _tau_rho(s: Sources) -> tuple[object, ...]:
    tau, rho = _impact_figure(s, "Kendall tau / Spearman rho").split(" / ")
    return f"{float(tau):.3f}", rho


def _demo_benchmark_health(s: Sources) -> pd.DataFrame:
    health = s.demo_health
    return health[health["level"] == "benchmark"].set_index("benchmark")


def _median_margin(s: Sources, benchmark: str) -> float:
    stderr = s.demo.benchmarks.loc[
        s.demo.benchmarks["benchmark"] == benchmark, "stderr"
    ]
    config = HealthConfig()
    return float((config.noise_z * stderr).clip(lower=config.floor_points).median())


def _items_per_point(benchmark: str) -> float:
    """Items of `benchmark` one normalized point is worth (its bound, its sizes)."""
    (found,) = (b for b in load_suite("openllm-v2").benchmarks if b.name == benchmark)
    items = sum(subtask.n_samples or 0 for subtask in found.subtasks)
    return items * (1 - found.subtasks[0].lower_bound) / 100


def _lowest_subtask(s: Sources) -> tuple[object, ...]:
    subtasks = s.demo_health[s.demo_health["level"] == "subtask"]
    lowest = subtasks.sort_values("rest_spearman").to_dict("records")[0]
    return lowest["benchmark"], lowest["subtask"], f"{lowest['rest_spearman']:.3f}"


def _stderr_row(group: str, name: str) -> tuple[object, ...]:
    harness, weighted, one_sample, _ = _pooled_stderrs(group, name)
    return repr(float(harness)), _relative(weighted), _relative(one_sample)


def _math_means() -> tuple[object, ...]:
    _, _, one_sample, means = _pooled_stderrs(
        "leaderboard_math_hard", "Meta-Llama-3-8B-Instruct"
    )
    low, high = min(means), max(means)
    return f"{low:.1%}", f"{high:.0%}", f"{one_sample:.0%}"


def _ifeval_items() -> tuple[object, ...]:
    (ifeval,) = (b for b in load_suite("openllm-v2").benchmarks if b.name == "IFEval")
    (instructions,) = (t.items for t in ifeval.subtasks if t.items)
    (prompts,) = {t.n_samples for t in ifeval.subtasks}
    return instructions, prompts


def _pooled_by_suite() -> tuple[object, ...]:
    scores = pd.read_csv(REPO / "tests/fixtures/tables/limited_sizes.csv")
    scores = scores.drop(columns="n_samples")
    result = lbnorm.normalize_scores(
        scores[scores["model"] == "limited"], options=RunOptions(missing="partial")
    )
    (gpqa,) = (b for b in load_suite("openllm-v2").benchmarks if b.name == "GPQA")
    sizes = "/".join(str(t.n_samples) for t in gpqa.subtasks)
    return sizes, f"{result.benchmarks['raw_score'].item():.6f}"


def _published_ties(s: Sources) -> tuple[object, ...]:
    average = s.published["Average ⬆️"]
    tied = average[average.duplicated(keep=False)]
    return len(tied), tied.nunique()


def _interval_figures(s: Sources) -> tuple[object, ...]:
    board = s.uncertainty.leaderboard
    stderr = board["average_stderr"]
    medians = s.demo.benchmarks.groupby("benchmark", observed=True, sort=False)[
        "stderr"
    ].median()
    spans = board["rank_worst"].astype(float) - board["rank_best"].astype(float) + 1
    return (
        f"{stderr.min():.2f}",
        f"{stderr.max():.2f}",
        f"{stderr.median():.2f}",
        *(
            f"{medians[name]:.2f}"
            for name in ("IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO")
        ),
        _n(board["rank"].notna().sum()),
        _n(board["tie_group"].nunique()),
        _n(spans.median()),
    )


def _second_tie_group(s: Sources) -> tuple[object, ...]:
    board = s.uncertainty.leaderboard
    group = board[board["tie_group"] == 2]
    assert "mistralai/Mistral-Large-Instruct-2411" in set(group["model"])
    return len(group), group["rank"].min(), group["rank"].max()


def _battle_counts(s: Sources) -> tuple[object, ...]:
    battles = cast("Battles", s.arena["battles"])
    return len(battles.models), _n(battles.n_battles), battles.n_filtered_out


def _table(s: Sources, name: str) -> pd.DataFrame:
    table = s.arena[name]
    assert isinstance(table, pa.Table)
    frame: pd.DataFrame = table.to_pandas()
    return frame


def _gpt4_win_rates(s: Sources) -> tuple[object, ...]:
    options = RatingOptions(
        bootstrap=1000, seed=0, anchor=("mixtral-8x7b-instruct-v0.1", 1114.0)
    )
    rates = win_rates_table(compute_ratings(s.arena["battles"], options)).to_pandas()  # type: ignore[arg-type]
    gpt4 = rates[rates["model_a"] == "gpt-4"].set_index("model_b")["win_rate"]
    return tuple(
        f"{gpt4[name]:.3f}"
        for name in ("gpt-3.5-turbo", "claude-v1", "mixtral-8x7b-instruct-v0.1")
    )


def _llama_results() -> dict[str, object]:
    (path,) = (REPO / "tests/fixtures/full_structure/meta-llama").rglob(
        "results_*.json"
    )
    data: dict[str, object] = json.loads(path.read_text())
    return data


def _llama_scores() -> tuple[object, ...]:
    data = _llama_results()
    results, sizes = data["results"], data["n-samples"]
    assert isinstance(results, dict)
    assert isinstance(sizes, dict)
    musr = results["leaderboard_musr_murder_mysteries"]["acc_norm,none"]
    n_musr = sizes["leaderboard_musr_murder_mysteries"]["effective"]
    return (
        musr,
        n_musr,
        round(musr * n_musr),
        f"{results['leaderboard_mmlu_pro']['acc,none']:.5f}",
        _n(sizes["leaderboard_mmlu_pro"]["effective"]),
        f"{results['leaderboard_ifeval']['inst_level_strict_acc,none']:.5f}",
    )


def _ddof_gap() -> str:
    data = _llama_results()
    sizes = data["n-samples"]
    assert isinstance(sizes, dict)
    n = sizes["leaderboard_musr_murder_mysteries"]["effective"]
    p = 0.5
    gap = math.sqrt(p * (1 - p) / (n - 1)) - math.sqrt(p * (1 - p) / n)
    return _relative(gap)


def _suite_documents() -> int:
    return sum(
        subtask.n_samples or 0
        for benchmark in load_suite("openllm-v2").benchmarks
        for subtask in benchmark.subtasks
    )


def _types(s: Sources) -> list[str]:
    present = set(s.demo.leaderboard["type"].dropna())
    return [label for label in TYPE_LABELS.values() if label in present]


def _type_code(s: Sources, label: str) -> str:
    board = s.demo.leaderboard
    (code,) = set(board.loc[board["type"] == label, "type_code"])
    return str(code)


# tables a doc quotes from a command's output: every row must be a line of the output


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotedTable:
    """The first Markdown table after `anchor` in `doc` is rows of what `output` prints."""

    doc: str
    anchor: str
    output: Callable[[Sources], Outcome]
    code: int = 0


QUOTED_TABLES = [
    QuotedTable(
        doc="docs/changes-and-health.md",
        anchor="On the demo, GPQA's bound 0.25 → 0.3 (the figures of its summary):",
        output=lambda s: Outcome(
            printed=s.printed("lbnorm impact --set-bound GPQA=0.3"), code=0
        ),
    ),
    QuotedTable(
        doc=CHANGES,
        anchor="`lbnorm health data/published_v2_final.csv` (exit 0):",
        output=lambda s: s.cli("health", "data/published_v2_final.csv"),
    ),
    QuotedTable(
        doc=CHANGES,
        anchor="the floor becomes the noise (`lbnorm health`, exit 0",
        output=lambda s: s.cli("health"),
    ),
    QuotedTable(
        doc=CHANGES,
        anchor="running `lbnorm health with_drop.csv` (exit 7):",
        output=lambda s: s.cli("health", s.with_drop_csv),
        code=7,
    ),
]


def _flat(text: str) -> str:
    """`text` with every run of whitespace one space (prose wraps anywhere)."""
    return " ".join(text.split())


def _table_after(doc: str, anchor: str) -> list[str]:
    text = (REPO / doc).read_text()
    assert anchor in text, f"{doc} lost {anchor!r}"
    lines = text[text.index(anchor) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("|"))
    rows = []
    for line in lines[start:]:
        if not line.lstrip().startswith("|"):
            break
        rows.append(line.strip())
    return rows


@pytest.fixture(scope="module")
def sources(replay: Replay) -> Sources:
    return Sources(replay)


@pytest.mark.slow
@pytest.mark.parametrize(
    "figure", FIGURES, ids=lambda figure: f"{figure.doc}:{figure.text[:40]}"
)
def test_docs_quote_the_figures_of_a_run(figure: Figure, sources: Sources) -> None:
    expected = _flat(figure.text.format(*figure.compute(sources)))
    assert expected in _flat((REPO / figure.doc).read_text()), expected


@pytest.mark.slow
@pytest.mark.parametrize(
    "quoted", QUOTED_TABLES, ids=lambda quoted: f"{quoted.doc}:{quoted.anchor[:40]}"
)
def test_docs_quote_tables_a_command_prints(
    quoted: QuotedTable, sources: Sources
) -> None:
    outcome = quoted.output(sources)
    assert outcome.code == quoted.code, outcome.printed
    rows = _table_after(quoted.doc, quoted.anchor)
    assert len(rows) >= 4  # a header, its rule and rows
    printed = set(outcome.printed.splitlines())
    assert [row for row in rows if row not in printed] == []


def test_figures_name_their_docs() -> None:
    """Each figure's doc exists and still has the words around the value (quick)."""
    for figure in FIGURES:
        text = _flat((REPO / figure.doc).read_text())
        for words in _flat(figure.text).split("{}"):
            assert words.strip(" ,;:()") in text, (figure.doc, words)


# JSON a doc shows abridged: every key it shows has the value it shows ("abc..." a prefix)


@dataclass(frozen=True, slots=True, kw_only=True)
class AbridgedJson:
    """The first JSON block after `anchor` in `doc` is part of the file `path` (in the replay)."""

    doc: str
    anchor: str
    path: str


ABRIDGED_JSON = [
    AbridgedJson(
        doc=ARENA,
        anchor="each table's rows and sha256 (abridged):",
        path="arena-out/manifest.json",
    ),
]


def _is_part(shown: object, real: object) -> bool:
    """Whether `shown` is `real` with keys left out and strings cut to ``prefix...``."""
    if isinstance(shown, str) and shown.endswith("..."):
        return isinstance(real, str) and real.startswith(shown.removesuffix("..."))
    if isinstance(shown, dict):
        return isinstance(real, dict) and all(
            key in real and _is_part(value, real[key]) for key, value in shown.items()
        )
    if isinstance(shown, list):
        return (
            isinstance(real, list)
            and len(shown) == len(real)
            and all(_is_part(a, b) for a, b in zip(shown, real, strict=True))
        )
    return shown == real and type(shown) is type(real)


@pytest.mark.slow
@pytest.mark.parametrize("quoted", ABRIDGED_JSON, ids=lambda quoted: quoted.path)
def test_docs_quote_json_files_abridged(quoted: AbridgedJson, replay: Replay) -> None:
    text = (REPO / quoted.doc).read_text()
    start = text.index("```json\n", text.index(quoted.anchor)) + len("```json\n")
    shown = json.loads(text[start : text.index("```", start)])
    real = json.loads((replay.folder / quoted.path).read_text())
    assert _is_part(shown, real), json.dumps(real, indent=1)
    # a manifest's output hashes ("..." in the doc: they change with the Parquet writer's
    # version) are the files'
    folder = (replay.folder / quoted.path).parent
    for name, output in real.get("outputs", {}).items():
        digest = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        assert output["sha256"] == digest, name


#: Keys of a Parquet file's metadata (docs/arena.md lists them), not Python names.
PARQUET_KEYS = {
    "lbnorm.kind",
    "lbnorm.options",
    "lbnorm.inputs",
    "lbnorm.version",
    "lbnorm.table",
}


def _dotted_names() -> list[str]:
    """Every ``lbnorm.x.y`` name the docs write (in code spans and blocks)."""
    names = {
        name.rstrip(".")
        for doc in DOCS
        for name in re.findall(r"(?<![\w/.-])lbnorm(?:\.\w+)+", doc.read_text())
    }
    return sorted(names - PARQUET_KEYS)


@pytest.mark.parametrize("name", _dotted_names())
def test_every_python_name_the_docs_give_exists(name: str) -> None:
    """``lbnorm.analysis.health.check_result`` and the like: modules and what they hold."""
    parts = name.split(".")
    found: object = None
    for end in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[end:]:
            assert hasattr(found, attribute), f"{name}: no {attribute!r}"
            found = getattr(found, attribute)
        break
    assert found is not None, name


@pytest.mark.parametrize(
    "block",
    [block for block in doc_blocks() if block.lang == "toml"],
    ids=lambda block: f"{block.doc}:{block.line}",
)
def test_toml_blocks_load(block: Block, tmp_path: Path) -> None:
    """A suite (or a benchmark to add to one) loads as a suite; a ``[health]`` table as
    health thresholds."""
    values = tomllib.loads(block.text)
    if "benchmarks" in values:
        named = block.text if "name" in values else 'name = "x"\n' + block.text
        assert parse_suite(named.encode(), source=block.doc).benchmarks
    else:
        (tmp_path / "health.toml").write_text(block.text)
        config = HealthConfig.from_toml(tmp_path / "health.toml")
        shown = values.get("health", values)
        assert {key: getattr(config, key) for key in shown} == shown
