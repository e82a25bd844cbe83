"""The docs quote real runs: README.md and docs/*.md, re-run and compared.

What is checked, read from the Markdown itself (so an edited doc is checked as it is):

* **Transcripts.** A fenced block whose first line is ``$ COMMAND`` shows commands and what
  they print (stdout and stderr, as a terminal interleaves them; ``$ echo $?`` the exit
  code, ``$ cat FILE`` a file); a ```bash block of one ``lbnorm`` command followed by a
  ```text block shows that command and its output (the README's queries). Every one is
  re-run and must print exactly what the doc shows.
* **Commands.** Every other ``lbnorm`` command in a ```bash block runs and exits 0, unless it
  names an input the reader is meant to bring (:data:`PLACEHOLDERS`); those are parsed only.
* **Python.** Every ```python block runs (the blocks of one doc in one namespace, in order);
  one followed by a ```text block must print exactly that.
* **Figures.** Numbers quoted in prose and rendered tables (:data:`FIGURES`): each entry
  names the doc, the text as it must read with the computed value in it, and how to
  compute the value.

Everything runs in one folder, doc after doc (README.md first, then docs/ by name) and
block after block, as a reader following the docs would: later commands read the outputs
of earlier ones. The folder holds links to the repository's ``tests`` and ``data`` (the
docs run "from the repository's root") and ``results``, a link to
``tests/fixtures/full_structure``, the results tree the docs' ``results/`` stands for.

Normalized before comparing, because they differ from run to run and nothing else may:
the time a run took (``time       0.48 s`` in a summary); in a JSON run report, its
``started_at`` and ``finished_at`` and the seconds it took (``timings_s``, the cache's
``seconds``). Paths are not normalized: the commands use relative paths.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
import tomllib
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lbnorm.cli import build_parser, main

REPO = Path(__file__).parent.parent
DOCS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))

#: Words that mark a command's input as the reader's own (a file the docs do not provide):
#: such a command is parsed, not run.
PLACEHOLDERS = (
    "mine.toml",
    "yesterday-out/",
    "models.csv",
    "thresholds.toml",
    "details/",
    "samples.parquet",
    "/shared/",
    "SCHEDULER",
    "arena-old",
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
    is_followed: bool = (
        False  # the next block comes right after it (only blank lines between)
    )

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
    code: int | None = (
        0  # the exit code it must end with (None: a `$ echo $?` checks it)
    )


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


@dataclass(slots=True, kw_only=True)
class Replay:
    """The docs' steps run in order in `folder`, each's outcome kept by its place."""

    folder: Path
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    namespaces: dict[str, dict[str, object]] = field(default_factory=dict)
    last_code: int = 0

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
        if any(word in ("|", ">") for word in words):
            outcome = self._shell(command)
        else:  # `pip install . && lbnorm run`: lbnorm's part (installing is not ours)
            outcome = [
                self._lbnorm(list(_expand(part[1:], self.folder)))
                for part in _parts(command)
                if part[0] == "lbnorm"
            ][-1]
        self.last_code = outcome.code
        return outcome

    @staticmethod
    def _lbnorm(argv: list[str]) -> Outcome:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            try:
                code = main(argv)
            except Exception:  # a bug: its traceback is what the test shows
                traceback.print_exc()
                code = -1
        return Outcome(printed=printed.getvalue(), code=code)

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


def _expand(words: list[str], folder: Path) -> Iterator[str]:
    """Words as the shell passes them: a pattern matching files becomes their names."""
    for word in words:
        is_pattern = bool(re.search(r"[*?[]", word)) and " " not in word
        matches = sorted(folder.glob(word)) if is_pattern else []
        yield from [str(path.relative_to(folder)) for path in matches] or [word]


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replay]:
    """Every step of the docs, run once, in order, in one folder (see the docstring)."""
    folder = tmp_path_factory.mktemp("docs")
    for name, target in (
        ("tests", REPO / "tests"),
        ("data", REPO / "data"),
        ("results", REPO / "tests" / "fixtures" / "full_structure"),
    ):
        (folder / name).symlink_to(target)
    replay = Replay(folder=folder)
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
    assert shown["README.md"] >= 8
    assert shown["arena.md"] >= 8
    assert shown["changes-and-health.md"] >= 3


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
    assert [
        name for name in named if name not in project["optional-dependencies"]
    ] == []


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
