from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lbnorm import LbnormError, run
from lbnorm.analysis.diff import Snapshot, diff_snapshots
from lbnorm.analysis.health import check_health
from lbnorm.cli import main
from lbnorm.html_report import (
    diff_tables,
    health_tables,
    leave_one_out,
    loo_correlations,
    render_report,
    summarize_benchmarks,
)
from lbnorm.options import RunOptions
from lbnorm.outdir import read_output_table

pytest.importorskip(
    "matplotlib", reason="the report needs the report extra (matplotlib)"
)

SIX = ["IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO"]
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory, golden_dir: Path) -> Path:
    """Golden results files: today's output, and one from before a GPQA bound change."""
    folder = tmp_path_factory.mktemp("report")
    files = sorted(golden_dir.glob("*.json"))
    run(files, out=folder / "out")
    toml = (resources.files("lbnorm") / "suite_files" / "openllm-v2.toml").read_text(
        "utf-8"
    )
    edited = "\n".join(
        line.replace("num_choices = 4", "num_choices = 4, lower_bound = 0.0")
        if "leaderboard_gpqa" in line
        else line
        for line in toml.splitlines()
    )
    (folder / "old.toml").write_text(edited)
    run(files, suite=folder / "old.toml", out=folder / "old")
    return folder


@pytest.fixture(scope="module")
def report_html(outputs: Path) -> Path:
    """The report of today's output against the old one, written by the CLI."""
    html = outputs / "report.html"
    argv = ["report", str(outputs / "out"), "--html", str(html)]
    assert main([*argv, "--previous", str(outputs / "old")]) == 0
    return html


def test_leave_one_out_means_the_other_benchmarks() -> None:
    board = pd.DataFrame(
        {
            **{name: [10.0 * (i + 1), 20.0, np.nan] for i, name in enumerate(SIX)},
            **{f"{name} Raw": [0.1, 0.2, 0.3] for name in SIX},
        }
    )
    loo = leave_one_out(board)
    assert len(loo) == 12  # the row with a missing benchmark is left out
    assert loo["others"].iloc[0] == pytest.approx((20 + 30 + 40 + 50 + 60) / 5)
    assert loo["others"].iloc[6:].tolist() == [20.0] * 6
    assert loo["benchmark"].tolist() == SIX * 2


def test_loo_correlations_match_numpy(outputs: Path) -> None:
    board = read_output_table(outputs / "out", "leaderboard")
    loo = leave_one_out(board)
    correlations = loo_correlations(loo).set_index("benchmark")
    pairs = loo.loc[loo["benchmark"] == "BBH"]
    assert correlations["pearson"].to_dict()["BBH"] == pytest.approx(
        np.corrcoef(pairs["score"], pairs["others"])[0, 1]
    )
    ranks = pairs[["score", "others"]].rank()
    assert correlations["spearman"].to_dict()["BBH"] == pytest.approx(
        np.corrcoef(ranks["score"], ranks["others"])[0, 1]
    )
    assert correlations["n"].tolist() == [8] * 6


def test_summarize_benchmarks(outputs: Path) -> None:
    board = read_output_table(outputs / "out", "leaderboard")
    summary = summarize_benchmarks(board).set_index("benchmark")
    assert summary["n"].tolist() == [8] * 6
    assert summary["max"].to_dict()["IFEval"] == pytest.approx(board["IFEval"].max())
    assert summary["at_zero_pct"].to_dict()["MATH Lvl 5"] == pytest.approx(12.5)


def test_health_and_diff_tables(outputs: Path) -> None:
    board = read_output_table(outputs / "out", "leaderboard")
    health = check_health(
        board, subtasks=read_output_table(outputs / "out", "subtasks")
    )
    (_, benchmarks), (subtask_title, failed) = health_tables(health)
    assert benchmarks["benchmark"].tolist() == SIX
    assert "loo_spearman" in benchmarks.columns
    assert subtask_title.startswith("Subtasks: ")
    assert (failed["status"] == "fail").all()
    old = Snapshot(
        leaderboard=read_output_table(outputs / "old", "leaderboard"), benchmarks=SIX
    )
    new = Snapshot(leaderboard=board, benchmarks=SIX)
    tables = dict(diff_tables(diff_snapshots(old, new), top=2))
    summary = dict(
        zip(tables["Summary"]["figure"], tables["Summary"]["value"], strict=True)
    )
    assert summary["variants_common"] == "8"
    movers = tables["Largest rank moves (2 up, 2 down)"]
    assert movers["rank_move"].iloc[0] > 0 > movers["rank_move"].iloc[-1]
    assert (movers["old_rank"] - movers["new_rank"] == movers["rank_move"]).all()


def test_report_is_self_contained_html(outputs: Path, report_html: Path) -> None:
    page = report_html.read_text()
    assert page.startswith("<!DOCTYPE html>")
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 12  # a distribution and a leave-one-out plot per benchmark
    assert all(
        base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n") for data in images
    )
    assert not re.search(r"(src|href)=\"(https?:|//)", page)  # nothing fetched
    assert "<script" not in page
    assert "01-ai/Yi-34B-Chat" in page
    assert f"Changes since {outputs / 'old'}" in page
    assert "Lower bounds changed" in page
    assert "Largest rank moves" in page
    for anchor in (
        "leaderboard",
        "benchmarks",
        "distributions",
        "leave-one-out",
        "health",
        "diff",
    ):
        assert f'id="{anchor}"' in page


def test_report_escapes_and_marks_flagged_models(
    golden_dir: Path, tmp_path: Path
) -> None:
    meta = tmp_path / "meta.csv"
    meta.write_text('model,flagged,note\n01-ai/Yi-34B-Chat,true,"<b>"\n')
    run(
        sorted(golden_dir.glob("*.json")),
        out=tmp_path / "out",
        options=RunOptions(metadata=str(meta)),
    )
    page = render_report(tmp_path / "out", top=3, title="<Title>")
    assert "<title>&lt;Title&gt;</title>" in page
    assert page.count('<tr class="marked">') == 1  # the flagged variant
    assert "Changes since" not in page


def test_report_without_matplotlib_says_how_to_install(
    outputs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(
        LbnormError, match=r"need matplotlib.*\nHint: pip install 'lbnorm\[report\]'"
    ):
        render_report(outputs / "out")


def test_cli_report_errors(outputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = str(outputs / "other.html")
    assert main(["report", str(outputs / "missing"), "--html", html]) == 4
    assert "Hint: write one with `lbnorm run" in capsys.readouterr().err
    unwritable = str(outputs / "no" / "such" / "dir.html")
    assert main(["report", str(outputs / "out"), "--html", unwritable]) == 6
    assert "Hint: check that the directory exists" in capsys.readouterr().err


def _chromium() -> str | None:
    return next(
        (
            found
            for name in ("chromium", "chromium-browser", "google-chrome")
            if (found := shutil.which(name))
        ),
        None,
    )


class _DevTools:
    """Headless Chromium driven by the DevTools protocol over a pipe (fds 3 and 4)."""

    def __init__(self, binary: str, profile: Path, *, timeout: float = 30.0) -> None:
        commands_read, self._write = os.pipe()
        self._read, replies_write = os.pipe()
        # copies at fds >= 10 survive being dup2'ed onto 3 and 4 in the child
        child_read = fcntl.fcntl(commands_read, fcntl.F_DUPFD, 10)
        child_write = fcntl.fcntl(replies_write, fcntl.F_DUPFD, 10)
        os.close(commands_read)
        os.close(replies_write)

        def attach_pipes() -> None:
            os.dup2(child_read, 3)
            os.dup2(child_write, 4)

        self._process = subprocess.Popen(
            [
                binary,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=attach_pipes,
        )
        os.close(child_read)
        os.close(child_write)
        self._buffer = b""
        self._id = 0
        self._timeout = timeout
        self.events: list[dict[str, Any]] = []

    def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str = "",
        *,
        timeout: float | None = None,
    ) -> Any:
        self._id += 1
        message: dict[str, Any] = {
            "id": self._id,
            "method": method,
            "params": params or {},
        }
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._receive(timeout)
            if reply.get("id") != self._id:
                self.events.append(reply)
                continue
            assert "error" not in reply, f"{method}: {reply['error']}"
            return reply.get("result", {})

    def wait_for(self, method: str) -> None:
        while not any(event.get("method") == method for event in self.events):
            self.events.append(self._receive())

    def _receive(self, timeout: float | None = None) -> dict[str, Any]:
        deadline = time.monotonic() + (timeout or self._timeout)
        while b"\0" not in self._buffer:
            ready, _, _ = select.select(
                [self._read], [], [], max(deadline - time.monotonic(), 0)
            )
            assert ready, "Chromium did not answer in time"
            chunk = os.read(self._read, 1 << 20)
            assert chunk, "Chromium closed the DevTools pipe"
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        decoded: dict[str, Any] = json.loads(message)
        return decoded

    def close(self) -> None:
        with contextlib.suppress(AssertionError, OSError):
            self.send("Browser.close")
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._write)
        os.close(self._read)


def _console_errors(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        event
        for event in events
        if event.get("method") == "Runtime.exceptionThrown"
        or (
            event.get("method") == "Runtime.consoleAPICalled"
            and event["params"]["type"] in {"error", "assert"}
        )
        or (
            event.get("method") == "Log.entryAdded"
            and event["params"]["entry"]["level"] == "error"
        )
    ]


def test_report_renders_in_chromium(report_html: Path, tmp_path: Path) -> None:
    binary = _chromium()
    if binary is None:
        pytest.skip(
            "no chromium binary on PATH (CI installs Debian's chromium in .ci/run)"
        )
    html = report_html
    (tmp_path / "profile").mkdir()
    browser = _DevTools(binary, tmp_path / "profile")
    try:
        # a cold first start (binaries not yet in the page cache, as on a fresh CI
        # machine right after the install) took 20-30 s here: allow for it once
        target = browser.send(
            "Target.createTarget", {"url": "about:blank"}, timeout=180
        )["targetId"]
        session = browser.send(
            "Target.attachToTarget", {"targetId": target, "flatten": True}
        )["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            browser.send(f"{domain}.enable", session=session)
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        browser.send("Page.navigate", {"url": html.as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired")
        state = browser.send(
            "Runtime.evaluate",
            {
                "expression": "JSON.stringify({images: document.images.length,"
                " loaded: Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length,"
                " widths: Array.from(document.images).map(i => i.naturalWidth),"
                " title: document.title, h1: document.querySelector('h1').textContent,"
                " rows: document.querySelectorAll('#leaderboard tbody tr').length,"
                " first: document.querySelector('#leaderboard tbody td.model').textContent,"
                " sections: Array.from(document.querySelectorAll('section')).map(s => s.id)})",
                "returnByValue": True,
            },
            session=session,
        )
        shot = browser.send(
            "Page.captureScreenshot", {"format": "png"}, session=session
        )
    finally:
        browser.close()
    page = json.loads(state["result"]["value"])
    assert page["images"] == 12
    assert page["loaded"] == 12, "an embedded plot did not decode"
    assert set(page["widths"]) == {420}
    assert page["h1"] == "lbnorm report: openllm-v2"
    assert page["rows"] == 8
    assert page["first"] == "01-ai/Yi-34B-Chat"
    assert page["sections"] == [
        "leaderboard",
        "benchmarks",
        "distributions",
        "leave-one-out",
        "health",
        "diff",
    ]
    assert _console_errors(browser.events) == []
    png = base64.b64decode(shot["data"])
    assert png.startswith(b"\x89PNG")
    assert len(png) > 20_000  # a page, not a blank
    (tmp_path / "report.png").write_bytes(png)
