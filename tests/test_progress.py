from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from lbnorm import run
from lbnorm.cli import main
from lbnorm.faces import progress
from lbnorm.faces.progress import ProgressBar, progress_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _clock(*ticks: float) -> Iterator[float]:
    yield from ticks


def test_only_terminals_get_a_bar() -> None:
    assert progress_bar(io.StringIO()) is None
    assert progress_bar(_Terminal(), quiet=True) is None
    assert isinstance(progress_bar(_Terminal()), ProgressBar)


def test_bar_waits_throttles_and_ends_each_stage() -> None:
    ticks = _clock(0.0, 0.6, 0.62, 0.9, 1.0, 1.1)
    stream = io.StringIO()
    bar = ProgressBar(stream=stream, width=10, clock=lambda: next(ticks))
    bar("reading", 1, 100)  # 0.0 s: before the delay, nothing drawn
    bar("reading", 50, 100)  # 0.6 s: drawn
    bar("reading", 51, 100)  # 0.62 s: within the interval, skipped
    bar("reading", 100, 100)  # 0.9 s: last, drawn and the line ended
    bar("parsing", 1, 2)  # a new stage starts its own delay
    bar("parsing", 2, 2)  # 1.1 s: quick stage, never drawn
    bar.close()
    assert stream.getvalue().split("\r")[1:] == [
        "reading [#####.....] 50/100  50% 0.6s\x1b[K",
        "reading [##########] 100/100 100% 0.9s\x1b[K\n",
    ]


def test_readers_report_each_file(golden_dir: Path) -> None:
    calls: list[tuple[str, int, int]] = []
    run(sorted(golden_dir.glob("*.json")), progress=lambda *call: calls.append(call))
    assert [c for c in calls if c[0] == "parsing results files"][-1] == (
        "parsing results files",
        8,
        8,
    )
    # each file is read, hashed and parsed in one pass (one file's bytes in memory)
    assert {stage for stage, _, _ in calls} == {"parsing results files"}
    assert [
        done for stage, done, _ in calls if stage == "parsing results files"
    ] == list(range(1, 9))


def test_cli_draws_on_a_terminal_and_not_when_quiet(
    golden_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def eager(
        stream: TextIO | None = None, *, quiet: bool = False
    ) -> ProgressBar | None:
        stream = stream or sys.stderr
        return None if quiet else ProgressBar(stream=stream, delay=0.0, interval=0.0)

    monkeypatch.setattr(progress, "progress_bar", eager)
    files = [str(p) for p in sorted(golden_dir.glob("*.json"))]
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["run", *files, "--out", str(tmp_path / "a"), "--top", "0"]) == 0
    assert "parsing results files [" in terminal.getvalue()
    assert "8/8 100%" in terminal.getvalue()
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert main(["run", *files, "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert quiet.getvalue() == ""
