"""The HTML report: its figures are `lbnorm health`'s and `lbnorm diff`'s, it loads
nothing, names stay text, and in headless Chromium the leaderboard sorts, filters
and opens a model's scores, and a scatter point names its model on hover."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import html as html_text
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lbnorm import LbnormError, run
from lbnorm.analysis.diff import Snapshot, diff_snapshots, read_snapshot
from lbnorm.analysis.health import check_health, check_source, leave_one_out
from lbnorm.analysis.render import diff_parts, format_diff, health_tables
from lbnorm.cli import main
from lbnorm.core.options import RunOptions
from lbnorm.faces.html_report import (
    read_report_tables,
    render_report,
    summarize_benchmarks,
)
from lbnorm.faces.report_plots import histogram_figure
from lbnorm.output.reader import Output
from lbnorm.suites import load_suite

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
#: Names that are markup somewhere: HTML, a script's end, matplotlib's mathtext.
HOSTILE_BENCHMARKS = [
    "$\\undefinedmacro{x}$",
    "$x$",
    '<img src=x onerror="window.__pwned=1">',
]
HOSTILE_MODELS = [
    '<img src=x onerror="window.__pwned=2">',
    "</script><script>window.__pwned=3</script>",
    "<!--",
    "$\\undefinedmacro{y}$",
    "$y$",
    "org/" + "a-very-long-model-name-" * 12,
]


def _suite_with_gpqa_bound(folder: Path, bound: float) -> Path:
    toml = (resources.files("lbnorm.suites") / "builtin" / "openllm-v2.toml").read_text(
        "utf-8"
    )
    edited = "\n".join(
        line.replace("num_choices = 4", f"num_choices = 4, lower_bound = {bound}")
        if "leaderboard_gpqa" in line
        else line
        for line in toml.splitlines()
    )
    path = folder / f"gpqa-{bound}.toml"
    path.write_text(edited)
    return path


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory, golden_dir: Path) -> Path:
    """Golden results files: today's output, and one from before a GPQA bound change."""
    folder = tmp_path_factory.mktemp("report")
    files = sorted(golden_dir.glob("*.json"))
    run(files, out=folder / "out")
    run(files, suite=_suite_with_gpqa_bound(folder, 0.0), out=folder / "old")
    return folder


@pytest.fixture(scope="module")
def report_html(outputs: Path) -> Path:
    """The report of today's output against the old one, written by the CLI."""
    html = outputs / "report.html"
    argv = ["report", str(outputs / "out"), "--html", str(html)]
    assert main([*argv, "--previous", str(outputs / "old")]) == 0
    return html


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled demo (4,576 variants) as an output directory."""
    out = tmp_path_factory.mktemp("demo") / "out"
    run(out=out)
    return out


@pytest.fixture(scope="module")
def demo_page(demo_out: Path) -> str:
    """The demo's report (docs/analysts.md: report.html)."""
    return render_report(demo_out)


@pytest.fixture(scope="module")
def demo_html(demo_out: Path) -> Path:
    """The demo with GPQA's bound 0 against the demo, by the CLI (docs: gpqa.html)."""
    folder = demo_out.parent
    run(suite=_suite_with_gpqa_bound(folder, 0.0), out=folder / "raw")
    html = folder / "gpqa.html"
    argv = ["report", str(folder / "raw"), "--html", str(html)]
    assert main([*argv, "--previous", str(demo_out)]) == 0
    return html


@pytest.fixture(scope="module")
def hostile_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An output whose benchmark, subtask and model names are markup."""
    folder = tmp_path_factory.mktemp("hostile")
    subtasks = ["a", "b", "</script><script>window.__pwned=4</script>"]
    benchmarks = "".join(
        f"[[benchmarks]]\nname = {json.dumps(name)}\nsubtasks = [{{ name = "
        f'{json.dumps(subtask)}, task = "t{i}", metric = "acc,none", num_choices = 4 }}]\n'
        for i, (name, subtask) in enumerate(
            zip(HOSTILE_BENCHMARKS, subtasks, strict=True)
        )
    )
    (folder / "suite.toml").write_text(f'name = "hostile"\n{benchmarks}')
    rng = np.random.default_rng(0)
    models = [*HOSTILE_MODELS, *(f"org/model-{i}" for i in range(34))]
    skill = rng.uniform(0.3, 0.9, len(models))
    pd.concat(
        [
            pd.DataFrame(
                {
                    "model": models,
                    "benchmark": name,
                    "subtask": subtask,
                    "raw_score": np.clip(
                        skill + rng.normal(0, 0.05, len(models)), 0, 1
                    ),
                }
            )
            for name, subtask in zip(HOSTILE_BENCHMARKS, subtasks, strict=True)
        ]
    ).to_csv(folder / "scores.csv", index=False)
    run([folder / "scores.csv"], suite=folder / "suite.toml", out=folder / "out")
    return folder / "out"


# ------------------------------------------------------------ static checks


def _section(page: str, anchor: str) -> str:
    found = re.search(rf'<section id="{anchor}">(.*?)</section>', page, re.S)
    assert found, f"no section {anchor}"
    return found.group(1)


def _table_after(text: str, heading: str) -> list[list[str]]:
    """The cells (unescaped text) of the first table after `heading`, header first."""
    start = text.index(heading)
    table = text[text.index("<table>", start) : text.index("</table>", start)]
    return [
        [
            html_text.unescape(re.sub(r"<[^>]+>", "", cell))
            for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
        ]
        for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
    ]


def _payload(page: str) -> dict[str, Any]:
    found = re.search(
        r'<script type="application/json" id="lbnorm-data">(.*?)</script>', page, re.S
    )
    assert found
    data: dict[str, Any] = json.loads(found.group(1))
    return data


def test_report_health_is_lbnorm_health_on_the_demo(
    demo_out: Path, demo_page: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One definition: the page shows exactly what `lbnorm health OUT` computes."""
    tables = read_report_tables(demo_out)
    health, _ = check_source([demo_out])
    pd.testing.assert_frame_equal(tables.health, health)
    benchmarks = health[health["level"] == "benchmark"].set_index("benchmark")
    # the figures issue 11 found apart: the report now uses the stderr, as health does
    floor = benchmarks["floor_rate"].round(3).to_dict()
    assert (floor["GPQA"], floor["MUSR"]) == (0.308, 0.242)
    # what the report showed before (docs/changes-and-health.md): no stderr
    bare = check_health(tables.leaderboard, benchmarks=SIX).set_index("benchmark")
    floor = bare["floor_rate"].round(3).to_dict()
    assert (floor["GPQA"], floor["MUSR"]) == (0.095, 0.019)
    # the scatter plots' x: health's leave-one-out average, with the suite's weights
    board = tables.leaderboard
    weights = [benchmark.weight for benchmark in load_suite("openllm-v2").benchmarks]
    expected = leave_one_out(board[SIX], weights=weights)
    pd.testing.assert_frame_equal(tables.others, expected)

    assert main(["health", str(demo_out)]) == 0
    printed = capsys.readouterr().out
    cli_rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in printed.split("## Benchmarks")[1].split("##")[0].splitlines()
        if line.startswith("| ") and not line.startswith("| benchmark")
    ]
    page = demo_page
    page_rows = _table_after(_section(page, "health"), "<h3>Benchmarks</h3>")
    assert page_rows[0] == [
        "benchmark", "models", "rho vs rest", "floor", "ceiling",
        "low band", "band spread", "status", "failed checks",
    ]  # fmt: skip
    assert page_rows[1:] == cli_rows  # every benchmark, every figure, same text
    assert len(cli_rows) == 6
    for name, rho in zip(SIX, benchmarks["loo_spearman"], strict=True):
        assert f"{html_text.escape(name)}: rho = {rho:.3f}</text>" in page
    # one name and one unit per figure: no percentage beside the health fractions
    assert "at_zero_pct" not in page
    assert "floor_rate" not in page


def test_summarize_benchmarks(outputs: Path) -> None:
    board = Output.open(outputs / "out").frame("leaderboard")
    summary = summarize_benchmarks(board).set_index("benchmark")
    assert summary["variants"].tolist() == [8] * 6
    assert summary["max"].to_dict()["IFEval"] == pytest.approx(board["IFEval"].max())
    assert summary["sd"].to_dict()["BBH"] == pytest.approx(board["BBH"].std())


def test_health_and_diff_tables(outputs: Path) -> None:
    board = Output.open(outputs / "out").frame("leaderboard")
    health = check_health(
        board, subtasks=Output.open(outputs / "out").frame("subtasks")
    )
    tables = {heading: table for _, heading, table in health_tables(health)}
    assert tables["Benchmarks"]["benchmark"].tolist() == SIX
    assert "rho vs rest" in tables["Benchmarks"].columns
    (subtask_title,) = [name for name in tables if name.startswith("Subtasks (")]
    assert subtask_title == "Subtasks (none checked: 40 skipped)"  # 8 models: too few
    old = Snapshot(
        leaderboard=Output.open(outputs / "old").frame("leaderboard"), benchmarks=SIX
    )
    new = Snapshot(leaderboard=board, benchmarks=SIX)
    named = {
        heading: table for _, heading, table in diff_parts(diff_snapshots(old, new))
    }
    summary = dict(
        zip(named["Summary"]["figure"], named["Summary"]["value"], strict=True)
    )
    assert summary["variants"] == "8 on both sides, 0 added, 0 removed"
    movers = named["Largest rank moves (2)"]
    assert (movers["old rank"] - movers["new rank"] == movers["move"]).all()
    assert movers["move"].abs().is_monotonic_decreasing


def test_diff_summary_in_words_with_rank_moves(
    outputs: Path, report_html: Path
) -> None:
    page = report_html.read_text()
    diff = _section(page, "diff")
    summary = {row[0]: row[1] for row in _table_after(diff, "<h3>Summary</h3>")[1:]}
    expected = diff_snapshots(
        read_snapshot(outputs / "old"), read_snapshot(outputs / "out")
    ).summary
    ranked = expected["ranked_common"]
    assert ranked == 8
    assert expected["rank_moves_checked"] == 8  # intervals on both sides
    assert summary["rank moves beyond the rank intervals"] == (
        f"{expected['rank_moves_beyond_intervals']} of {expected['rank_moves_checked']}"
    )
    assert summary["moved more than 10 places"].startswith(
        f"{expected['moved_more_than_n']} of {ranked} (max {expected['max_rank_move']}"
    )
    assert summary["variants"] == "8 on both sides, 0 added, 0 removed"
    for key in ("variants_common", "moved_more_than_n", "rank_moves_checked", "_"):
        assert key not in "".join(summary), key  # words, not keys
    assert "Lower bounds changed (3)" in diff
    # every rank move is in the leaderboard's data: a sortable "move" column
    data = _payload(page)
    labels = [column["label"] for column in data["columns"]]
    moves = data["values"][labels.index("move")]
    models = diff_snapshots(
        read_snapshot(outputs / "old"), read_snapshot(outputs / "out")
    ).models.set_index("model")["rank_move"]
    names = data["values"][labels.index("model")]
    assert moves == [int(models[name]) for name in names]


def test_a_no_subtasks_diff_says_what_lbnorm_diff_says(
    tmp_path: Path, golden_dir: Path
) -> None:
    """Outputs written with --no-subtasks: the page's diff is read as ``lbnorm diff``
    reads it (the suites' bounds too: the GPQA bound change is named)."""
    files = sorted(golden_dir.glob("*.json"))
    options = RunOptions(subtasks=False)
    old_suite = _suite_with_gpqa_bound(tmp_path, 0.0)
    run(files, suite=old_suite, out=tmp_path / "old", options=options)
    run(files, out=tmp_path / "new", options=options)
    section = _section(
        render_report(tmp_path / "new", previous=tmp_path / "old"), "diff"
    )
    expected = diff_snapshots(
        read_snapshot(tmp_path / "old"), read_snapshot(tmp_path / "new")
    )
    headings = [heading for _, heading, _ in diff_parts(expected)]
    assert "Lower bounds changed (3)" in headings
    assert re.findall(r"<h3>([^<]*)</h3>", section) == [
        html_text.escape(heading, quote=False) for heading in headings
    ]


@pytest.fixture(scope="module")
def nightly_pair(tmp_path_factory: pytest.TempPathFactory, golden_dir: Path) -> Path:
    """Yesterday's output and today's: one variant gone, two new (one named in
    markup), one flagged and excluded from the ranks, GPQA's bound changed."""
    folder = tmp_path_factory.mktemp("nightly")
    files = sorted(golden_dir.glob("*.json"))
    old_suite = _suite_with_gpqa_bound(folder, 0.0)
    run(files[:7], suite=old_suite, out=folder / "old")
    hostile = json.loads(files[0].read_text())
    hostile["model_name"] = HOSTILE_MODELS[0]
    (folder / "hostile.json").write_text(json.dumps(hostile))
    meta = folder / "meta.csv"
    meta.write_text("model,flagged\nAIDC-AI/Marco-o1,true\n")
    options = RunOptions(metadata=str(meta), exclude_flagged=True)
    run([*files[1:], folder / "hostile.json"], out=folder / "new", options=options)
    return folder


def test_diff_section_names_what_lbnorm_diff_names(
    nightly_pair: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's diff names the variants ``lbnorm diff`` names, cut as it cuts them."""
    import lbnorm.faces.html_report as html_report

    monkeypatch.setattr(html_report, "_DIFF_LISTED", 3)
    old, new = nightly_pair / "old", nightly_pair / "new"
    section = _section(render_report(new, previous=old), "diff")
    headings = re.findall(r"<h3>([^<]*)</h3>", section)
    assert headings == [
        "Summary",
        "Lower bounds changed (3)",
        "Per benchmark (normalized score, new - old)",
        "Added (2)",
        "Removed (1)",
        "Newly unranked (1)",
        "Largest changes of an average (6)",  # ranks kept: no rank moves
    ]
    tables = {
        heading: _table_after(section, f"<h3>{heading}</h3>") for heading in headings
    }
    assert {row[0] for row in tables["Added (2)"][1:]} == {
        "meta-llama/Meta-Llama-3-8B-Instruct",
        HOSTILE_MODELS[0],
    }
    assert HOSTILE_MODELS[0] not in section  # text, never markup
    assert html_text.escape(HOSTILE_MODELS[0]) in section
    assert [row[0] for row in tables["Removed (1)"][1:]] == ["01-ai/Yi-34B-Chat"]
    assert tables["Newly unranked (1)"][0][-1] == "why"
    assert tables["Newly unranked (1)"][1][::5] == [
        "AIDC-AI/Marco-o1",
        "excluded: flagged in the metadata",
    ]
    # the lists as the Markdown has them: same rows, same order, cut at 3
    markdown = format_diff(diff_snapshots(read_snapshot(old), read_snapshot(new)))
    changed = markdown.split("## Largest changes of an average (6)")[1]
    in_markdown = [line.split(" | ")[0][2:] for line in changed.splitlines()[4:7]]
    assert [row[0] for row in tables["Largest changes of an average (6)"][1:]] == (
        in_markdown
    )
    assert len(tables["Largest changes of an average (6)"]) == 1 + 3
    after = section.split("<h3>Largest changes of an average (6)</h3>")[1]
    assert after.split("</table>")[1].startswith(
        '<p class="note">... and 3 more: <code>lbnorm diff '
        f"{html_text.escape(str(old))} {html_text.escape(str(new))} --largest N</code>"
    )
    assert "... and" not in section.split("<h3>Added (2)</h3>")[1].split("<h3>")[0]


def test_diff_tables_name_the_rank_moves_beyond_the_intervals() -> None:
    """A move the summary counts as beyond the intervals is named in its own list."""
    keys = {"precision": "", "revision": "", "chat_template": False}

    def side(names: list[str], averages: list[float]) -> Snapshot:
        board = pd.DataFrame(
            {"model": names, **keys, "average": averages, "X": averages}
        ).assign(rank=pd.array(range(1, len(names) + 1), dtype="Int64"))
        low = np.array(averages) - 1.0
        return Snapshot(
            leaderboard=board,
            benchmarks=["X"],
            intervals=pd.DataFrame(
                {
                    "model": names,
                    **keys,
                    "average_low": low,
                    "average_high": low + 2.0,
                    "rank_best": range(1, len(names) + 1),
                    "rank_worst": range(1, len(names) + 1),
                }
            ),
        )

    diff = diff_snapshots(
        side(["a", "b", "c"], [30.0, 20.0, 10.0]),
        side(["c", "a", "b"], [40.0, 30.0, 20.0]),
    )
    named = {heading: table for _, heading, table in diff_parts(diff)}
    beyond = named["Rank moves beyond the rank intervals (1)"]
    assert beyond[["model", "old rank", "new rank", "move"]].to_numpy().tolist() == [
        ["c", 3, 1, 2]
    ]
    assert "## Rank moves beyond the rank intervals (1)" in format_diff(diff)


def test_report_is_self_contained_and_loads_nothing(
    outputs: Path, report_html: Path
) -> None:
    page = report_html.read_text()
    assert page.startswith("<!DOCTYPE html>")
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 6  # a distribution per benchmark
    assert all(
        base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n") for data in images
    )
    assert page.count('<svg class="scatter"') == 6  # a leave-one-out plot each
    assert page.count("<circle cx=") == 6 * 8  # one point per variant and plot
    assert not re.search(r"https?:", page)  # no URL at all, not even a namespace
    assert not re.search(r"""(src|href)=(?!["']?(data:|#))""", page)
    assert "url(" not in page
    assert "Content-Security-Policy" in page
    assert "default-src 'none'" in page
    assert page.count("<script") == 2  # the data (JSON, inert) and the page's code
    assert "01-ai/Yi-34B-Chat" in page
    assert f"Changes since {outputs / 'old'}" in page
    for anchor in (
        "leaderboard",
        "benchmarks",
        "distributions",
        "leave-one-out",
        "health",
        "diff",
    ):
        assert f'id="{anchor}"' in page


def test_whole_leaderboard_and_subtasks_are_in_the_page(outputs: Path) -> None:
    page = render_report(outputs / "out", top=3)
    data = _payload(page)
    board = Output.open(outputs / "out").frame("leaderboard")
    labels = [column["label"] for column in data["columns"]]
    assert labels == ["rank", "model", "precision", "average", *SIX]
    assert data["values"][1] == board["model"].tolist()  # every variant, rank order
    assert data["values"][labels.index("GPQA")] == board["GPQA"].round(2).tolist()
    subtasks = Output.open(outputs / "out").frame("subtasks")
    found = data["subtasks"]
    assert len(found["subtask"]) == 40
    assert found["benchmark"][0] == "IFEval"  # suite order
    row = board["model"].tolist().index("01-ai/Yi-34B-Chat")
    mine = subtasks[subtasks["model"] == "01-ai/Yi-34B-Chat"]
    scores = dict(
        zip(mine["subtask"].astype(str), mine["normalized_score"], strict=True)
    )
    raws = dict(zip(mine["subtask"].astype(str), mine["raw_score"], strict=True))
    for j, name in enumerate(found["subtask"]):
        assert found["score"][row][j] == pytest.approx(scores[name], abs=0.005)
        assert found["raw"][row][j] == pytest.approx(raws[name], abs=5e-5)
    # the static fallback (no JavaScript) keeps --top rows
    noscript = re.search(r"<noscript>(.*?)</noscript>", page, re.S)
    assert noscript
    assert noscript.group(1).count("<tr") == 1 + 3


def test_histograms_use_each_benchmarks_range(demo_out: Path, demo_page: str) -> None:
    page = demo_page
    board = Output.open(demo_out).frame("leaderboard")
    captions = dict(
        re.findall(
            r"<figcaption>([^:<]+): normalized scores of the [\d,]+ variants scored, "
            r"on the axis from ([\d.]+) to",
            page,
        )
    )
    assert list(captions) == SIX
    for name in SIX:
        high = re.search(
            rf"<figcaption>{re.escape(name)}: normalized scores .*? to ([\d.]+) ", page
        )
        assert high
        assert float(high.group(1)) == round(board[name].max(), 1)
        assert float(captions[name]) == round(board[name].min(), 1)
    gpqa_max = float(board["GPQA"].max())
    assert gpqa_max < 30  # GPQA's axis ends near 24, not at 100


def test_docs_quote_the_report(
    demo_out: Path, demo_page: str, demo_html: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every figure docs/analysts.md quotes from the report is the report's."""
    docs = (Path(__file__).parent.parent / "docs" / "analysts.md").read_text()
    section = docs.split("## The report:")[1].split("\n## ")[0]
    # the size the CLI prints, and what the demo's 5.1 MB are made of
    assert f"wrote gpqa.html ({demo_html.stat().st_size / 1e6:.1f} MB)" in section
    assert f"wrote report.html ({len(demo_page) / 1e6:.1f} MB)" in section
    assert f"the demo's page is {len(demo_page) / 1e6:.1f} MB" in section
    parts = {key: len(json.dumps(value)) for key, value in _payload(demo_page).items()}
    points = sum(len(svg) for svg in re.findall(r"<svg.*?</svg>", demo_page, re.S))
    pngs = sum(len(png) for png in re.findall(r"data:image/png[^\"]+", demo_page))
    text = " ".join(section.split())
    quoted = {
        "are its 183,040 subtask scores": parts["subtasks"],
        "the 27,456 scatter points": points,
        "what names them on hover": parts["points"],
        "the table": parts["values"],
        "the revision and metadata": parts["facts"],
        "the benchmarks' raw values": parts["raw"] + parts["stderr"],
        "the six histograms": pngs,
    }
    for words, size in quoted.items():
        megabytes = f"{size / 1e6:.1f}" if size >= 1e6 else f"{size / 1e6:.2f}"
        assert f"{megabytes} MB {words}" in text, (words, megabytes)
    # the histograms' ranges
    for name in ("GPQA", "MUSR"):
        found = re.search(
            rf"<figcaption>{name}: .*? on the axis from ([\d.]+) to ([\d.]+) ",
            demo_page,
        )
        assert found
        assert f"{name} {found.group(1)} to {found.group(2)}" in text
    # the health table: the page's (which is lbnorm health's)
    table = _table_after(_section(demo_page, "health"), "<h3>Benchmarks</h3>")
    for row in table[1:]:
        assert "  | " + " | ".join(row) + " |" in section
    # the diff summary of gpqa.html, as the page shows it
    summary = _table_after(_section(demo_html.read_text(), "diff"), "<h3>Summary</h3>")
    for row in summary[1:]:
        assert "  | " + " | ".join(row) + " |" in section
    # 27,456 points: one per variant and benchmark
    assert demo_page.count("<circle cx=") == 27_456


def test_demo_page_size(demo_html: Path) -> None:
    """The whole demo (4,576 variants, 183,040 subtask scores) in one file."""
    size = demo_html.stat().st_size
    assert 2_000_000 < size < 7_000_000, size  # about 5.1 MB; see docs/analysts.md


def test_names_are_text_never_markup(hostile_out: Path) -> None:
    page = render_report(hostile_out)  # mathtext would raise on \undefinedmacro
    for name in [HOSTILE_BENCHMARKS[2], *HOSTILE_MODELS[:3]]:  # HTML in them
        assert name not in page
        assert html_text.escape(name) in page
    for name in [*HOSTILE_BENCHMARKS[:2], *HOSTILE_MODELS[3:5]]:  # TeX in them
        assert html_text.escape(name) in page
    body = page.split('<script type="application/json"')[0]
    assert "<img src=x" not in body
    assert "<script>window" not in body
    assert "</script><script>" not in _payload_text(page)
    data = _payload(page)
    assert data["benchmarks"] == HOSTILE_BENCHMARKS
    assert set(HOSTILE_MODELS) <= set(data["values"][1])
    # matplotlib draws every label as text: no mathtext, no TeX
    from matplotlib.figure import Figure
    from matplotlib.text import Text

    for name in HOSTILE_BENCHMARKS:
        figure = histogram_figure(Figure, np.array([1.0, 2.0]), name, (1.0, 2.0))
        texts = [text for text in figure.findobj(Text) if name in text.get_text()]
        assert texts, name
        assert all(not t.get_parse_math() and not t.get_usetex() for t in texts)
        figure.savefig(os.devnull, format="png")


def _payload_text(page: str) -> str:
    return page.split('<script type="application/json" id="lbnorm-data">')[1].split(
        "</script>"
    )[0]


def test_report_marks_flagged_models_and_escapes_the_title(
    golden_dir: Path, tmp_path: Path
) -> None:
    meta = tmp_path / "meta.csv"
    meta.write_text('model,flagged,note\n01-ai/Yi-34B-Chat,true,"<b>"\n')
    run(
        sorted(golden_dir.glob("*.json")),
        out=tmp_path / "out",
        options=RunOptions(metadata=str(meta)),
    )
    page = render_report(tmp_path / "out", top=8, title="<Title>")
    assert "<title>&lt;Title&gt;</title>" in page
    assert page.count('<tr class="marked">') == 1  # in the static table
    data = _payload(page)
    assert sum(data["flagged"]) == 1
    assert data["flagged"][data["values"][1].index("01-ai/Yi-34B-Chat")]
    facts = {fact["label"]: fact["values"] for fact in data["facts"]}
    assert "<b>" in facts["note"]  # shown with textContent
    assert "Changes since" not in page


def test_report_without_matplotlib_says_how_to_install(
    outputs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(
        LbnormError,
        match=r"need matplotlib.*\nHint: pip install matplotlib \(from a clone of lbnorm: "
        r"pip install '\.\[report\]'\)",
    ):
        render_report(outputs / "out")


def test_report_of_an_output_without_subtasks(golden_dir: Path, tmp_path: Path) -> None:
    run(
        sorted(golden_dir.glob("*.json")),
        out=tmp_path / "out",
        options=RunOptions(subtasks=False),
    )
    page = render_report(tmp_path / "out", previous=tmp_path / "out")
    assert _payload(page)["subtasks"] is None
    assert "Subtasks (" not in _section(page, "health")  # benchmark checks only
    assert "moved more than 10 places" in _section(page, "diff")


def test_cli_report_errors(outputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    html = str(outputs / "other.html")
    assert main(["report", str(outputs / "missing"), "--html", html]) == 4
    assert "Hint: write one with `lbnorm run" in capsys.readouterr().err
    unwritable = str(outputs / "no" / "such" / "dir.html")
    assert main(["report", str(outputs / "out"), "--html", unwritable]) == 6
    assert "Hint: check that the directory exists" in capsys.readouterr().err


# ------------------------------------------------------------------ Chromium


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


class _Page:
    """One page open in headless Chromium: evaluate script, move the mouse, type."""

    def __init__(self, browser: _DevTools, session: str) -> None:
        self.browser = browser
        self.session = session

    def evaluate(self, expression: str) -> Any:
        reply = self.browser.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True},
            session=self.session,
        )
        assert "exceptionDetails" not in reply, reply["exceptionDetails"]
        return reply["result"].get("value")

    def send(self, method: str, params: dict[str, Any]) -> Any:
        return self.browser.send(method, params, session=self.session)

    def mouse_move(self, x: float, y: float) -> None:
        self.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})


@contextlib.contextmanager
def _open_in_chromium(page: Path, profile: Path) -> Iterator[_Page]:
    binary = _chromium()
    if binary is None:
        pytest.skip(
            "no chromium binary on PATH (apt-get install -y chromium; CI installs "
            "Debian's chromium in .ci/run)"
        )
    profile.mkdir()
    browser = _DevTools(binary, profile)
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
        browser.send("Page.navigate", {"url": page.as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired")
        yield _Page(browser, session)
    finally:
        browser.close()


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


_VISIBLE_ROWS = (
    "Array.from(document.querySelectorAll('#board tbody tr.row'))"
    ".filter(r => !r.hidden)"
)


def _column_values(page: _Page, label: str) -> list[str]:
    return list(
        page.evaluate(
            f"(() => {{ const k = Array.from(document.querySelectorAll('#board th'))"
            f".findIndex(th => th.textContent === {json.dumps(label)});"
            f" return {_VISIBLE_ROWS}.map(r => r.cells[k].textContent); }})()"
        )
    )


def _click_heading(page: _Page, label: str) -> None:
    page.evaluate(
        "Array.from(document.querySelectorAll('#board th button'))"
        f".find(b => b.textContent === {json.dumps(label)}).click()"
    )


def _hover_point(page: _Page, plot: int, point: int) -> dict[str, Any]:
    """Move the mouse onto circle `point` of scatter `plot`; what is there, and the tooltip."""
    where = page.evaluate(
        f"(() => {{ const svg = document.querySelectorAll('svg.scatter')[{plot}];"
        " svg.scrollIntoView({block: 'center'});"
        f" const c = svg.querySelectorAll('.pts circle')[{point}].getBoundingClientRect();"
        " return [c.x + c.width / 2, c.y + c.height / 2]; })()"
    )
    x, y = where
    # the topmost circle under the pointer (a later one may cover the one asked for)
    top = page.evaluate(
        f"(() => {{ const e = document.elementFromPoint({x}, {y});"
        " return Array.from(e.parentNode.children).indexOf(e); })()"
    )
    page.mouse_move(x, y)
    state = page.evaluate(
        "(() => { const tip = document.getElementById('tip');"
        " return {hidden: tip.hidden, name: tip.querySelector('b').textContent,"
        " text: tip.textContent}; })()"
    )
    return {"point": top, "x": x, "y": y, **state}


@pytest.mark.slow
def test_demo_report_explored_in_chromium(demo_html: Path, tmp_path: Path) -> None:
    """Sort, filter, open a model, hover a point: on all 4,576 demo variants."""
    board = Output.open(demo_html.parent / "raw").frame("leaderboard")
    tables = read_report_tables(demo_html.parent / "raw")
    with _open_in_chromium(demo_html, tmp_path / "profile") as page:
        loaded = page.evaluate(
            "({rows: document.querySelectorAll('#board tbody tr.row').length,"
            " count: document.getElementById('count').textContent,"
            " images: Array.from(document.images).filter(i => i.naturalWidth > 0).length,"
            " circles: document.querySelectorAll('svg.scatter .pts circle').length,"
            " first: document.querySelector('#board tbody td.model').title,"
            " headings: Array.from(document.querySelectorAll('#board th')).map(t => t.textContent)})"
        )
        assert loaded["rows"] == 200  # drawn a page at a time, as one scrolls
        assert loaded["count"] == "4,576 variants, first 200 shown"
        assert loaded["images"] == 6
        assert loaded["circles"] == 6 * 4_576
        assert loaded["first"] == board["model"].iloc[0]
        assert loaded["headings"][-1] == "move"

        # sort by GPQA: descending first, then ascending; rank order is gone
        ranks_before = _column_values(page, "rank")[:5]
        _click_heading(page, "GPQA")
        gpqa = [float(v) for v in _column_values(page, "GPQA")]
        assert gpqa == sorted(gpqa, reverse=True)
        assert gpqa[0] == round(board["GPQA"].max(), 2)
        assert _column_values(page, "rank")[:5] != ranks_before
        _click_heading(page, "GPQA")
        page.evaluate("document.getElementById('all').click()")  # the whole leaderboard
        gpqa = [float(v) for v in _column_values(page, "GPQA")]
        assert len(gpqa) == 4_576
        assert gpqa == sorted(gpqa)
        assert gpqa == sorted(board["GPQA"].round(2).tolist())
        _click_heading(page, "model")
        models = _column_values(page, "model")
        assert models == sorted(models, key=str.lower)
        _click_heading(page, "move")  # largest move up first, blanks last
        moves = [int(v) for v in _column_values(page, "move") if v]
        assert moves == sorted(moves, reverse=True)
        assert moves[0] > 0
        _click_heading(page, "rank")
        assert [int(v) for v in _column_values(page, "rank")[:3]] == [1, 2, 3]

        # filter by a part of a name, typed into the box
        page.evaluate("document.getElementById('filter').focus()")
        page.send("Input.insertText", {"text": "Qwen2.5-72B"})
        shown = _column_values(page, "model")
        expected = board.loc[
            board["model"].str.lower().str.contains("qwen2.5-72b", regex=False), "model"
        ].tolist()
        assert shown == expected
        assert 1 < len(shown) < 100
        assert page.evaluate("document.getElementById('count').textContent") == (
            f"{len(expected)} of 4,576 variants match"
        )

        # a row opens the variant's benchmark and subtask scores
        page.evaluate(f"{_VISIBLE_ROWS}[0].click()")
        detail = page.evaluate(
            "(() => { const d = document.querySelector('#board tr.detail');"
            " const tables = d.querySelectorAll('table');"
            " return {name: d.querySelector('h3').textContent,"
            " facts: d.querySelector('.facts').textContent,"
            " benchmarks: Array.from(tables[0].tBodies[0].rows).map("
            "   r => Array.from(r.cells).map(c => c.textContent)),"
            " subtasks: Array.from(tables[1].tBodies[0].rows).map("
            "   r => Array.from(r.cells).map(c => c.textContent))}; })()"
        )
        assert detail["name"] == expected[0]
        at = board["model"].tolist().index(expected[0])
        assert tables.stderr is not None
        assert detail["benchmarks"] == [
            [
                name,
                f"{board[name].iloc[at]:.2f}",
                ""
                if np.isnan(tables.stderr[name].iloc[at])
                else f"\u00b1 {tables.stderr[name].iloc[at]:.2f}",
                f"{board[f'{name} Raw'].iloc[at]:.4f}",
            ]
            for name in SIX
        ]
        assert f"revision: {board['revision'].iloc[at]}" in detail["facts"]
        assert detail["facts"].count("size_class") == 1
        assert len(detail["subtasks"]) == 40
        subtasks = Output.open(demo_html.parent / "raw").frame(
            "subtasks", models=[expected[0]]
        )
        first = subtasks.iloc[0]
        row = [
            str(first["benchmark"]),
            str(first["subtask"]),
            f"{first['normalized_score']:.2f}",
            f"{first['raw_score']:.4f}",
            f"{first['lower_bound']:.4f}",
        ]
        assert row in detail["subtasks"]

        # hover a point of the GPQA plot: the tooltip names that point's model
        plot = SIX.index("GPQA")
        rows = np.flatnonzero(
            board["GPQA"].notna().to_numpy() & tables.others["GPQA"].notna().to_numpy()
        )[::-1]  # drawing order: rank 1 last, on top
        for point in (0, 2_000, len(rows) - 1):
            hovered = _hover_point(page, plot, point)
            assert not hovered["hidden"]
            assert hovered["name"] == board["model"].iloc[rows[hovered["point"]]]
            assert "GPQA" in hovered["text"]
        # a click on the point opens that model's row (clearing the filter if need be)
        for kind in ("mousePressed", "mouseReleased"):
            page.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": hovered["x"], "y": hovered["y"], "button": "left",
                 "clickCount": 1},
            )  # fmt: skip
        opened = page.evaluate(
            "({filter: document.getElementById('filter').value,"
            " names: Array.from(document.querySelectorAll('#board tr.detail h3'))"
            "   .map(h => h.textContent),"
            " focused: document.activeElement.dataset.i})"
        )
        assert opened["filter"] == ""
        assert hovered["name"] in opened["names"]
        assert board["model"].iloc[int(opened["focused"])] == hovered["name"]
        shot = page.send("Page.captureScreenshot", {"format": "png"})
        errors = _console_errors(page.browser.events)
    assert errors == []
    (tmp_path / "report.png").write_bytes(base64.b64decode(shot["data"]))


@pytest.mark.slow
def test_report_renders_in_chromium(report_html: Path, tmp_path: Path) -> None:
    with _open_in_chromium(report_html, tmp_path / "profile") as page:
        state = page.evaluate(
            "({images: document.images.length,"
            " loaded: Array.from(document.images).filter(i => i.complete && i.naturalWidth > 0).length,"
            " widths: Array.from(document.images).map(i => i.naturalWidth),"
            " title: document.title, h1: document.querySelector('h1').textContent,"
            " rows: document.querySelectorAll('#board tbody tr.row').length,"
            " first: document.querySelector('#board tbody td.model').textContent,"
            " sections: Array.from(document.querySelectorAll('section')).map(s => s.id)})"
        )
        shot = page.send("Page.captureScreenshot", {"format": "png"})
        errors = _console_errors(page.browser.events)
    assert state["images"] == 6
    assert state["loaded"] == 6, "an embedded plot did not decode"
    assert set(state["widths"]) == {420}
    assert state["h1"] == "lbnorm report: openllm-v2"
    assert state["rows"] == 8
    assert state["first"] == "01-ai/Yi-34B-Chat"
    assert state["sections"] == [
        "leaderboard",
        "benchmarks",
        "distributions",
        "leave-one-out",
        "health",
        "diff",
    ]
    assert errors == []
    png = base64.b64decode(shot["data"])
    assert png.startswith(b"\x89PNG")
    assert len(png) > 20_000  # a page, not a blank


@pytest.mark.slow
def test_hostile_names_never_execute_in_chromium(
    hostile_out: Path, tmp_path: Path
) -> None:
    html = tmp_path / "hostile.html"
    html.write_text(render_report(hostile_out))
    with _open_in_chromium(html, tmp_path / "profile") as page:
        state = page.evaluate(
            "({pwned: window.__pwned === undefined ? null : window.__pwned,"
            " injected: document.querySelectorAll('img:not([src^=\"data:\"]), main script').length,"
            " models: Array.from(document.querySelectorAll('#board td.model')).map(t => t.title),"
            " headings: Array.from(document.querySelectorAll('#board th')).map(t => t.textContent),"
            " titles: Array.from(document.querySelectorAll('svg.scatter .title')).map(t => t.textContent)})"
        )
        page.evaluate(
            "Array.from(document.querySelectorAll('#board tr.row'))"
            f".find(r => r.cells[1].title === {json.dumps(HOSTILE_MODELS[1])}).click()"
        )
        detail = page.evaluate(
            "(() => { const d = document.querySelector('#board tr.detail');"
            " return {name: d.querySelector('h3').textContent,"
            " subtasks: Array.from(d.querySelectorAll('table')[1].tBodies[0].rows)"
            "   .map(r => r.cells[1].textContent)}; })()"
        )
        hovered = [_hover_point(page, 0, point) for point in range(0, 40, 7)]
        errors = _console_errors(page.browser.events)
    assert state["pwned"] is None  # no name ran as script
    assert state["injected"] == 0
    assert set(HOSTILE_MODELS) <= set(state["models"])
    assert state["headings"][-3:] == HOSTILE_BENCHMARKS
    assert [title.rsplit(": rho", 1)[0] for title in state["titles"]] == (
        HOSTILE_BENCHMARKS
    )
    assert detail["name"] == HOSTILE_MODELS[1]
    assert "</script><script>window.__pwned=4</script>" in detail["subtasks"]
    board = Output.open(hostile_out).frame("leaderboard")
    assert {h["name"] for h in hovered} <= set(board["model"])
    assert errors == []


def test_report_of_one_benchmark(tmp_path: Path) -> None:
    """Nothing to hold it against: no plot against the others, no health checks."""
    (tmp_path / "suite.toml").write_text(
        'name = "one"\n[[benchmarks]]\nname = "A"\nsubtasks = [{ name = "a", '
        'task = "t", metric = "acc,none", num_choices = 4 }]\n'
    )
    (tmp_path / "s.csv").write_text(
        "model,benchmark,subtask,raw_score\nm1,A,a,0.5\nm2,A,a,0.7\n"
    )
    run([tmp_path / "s.csv"], suite=tmp_path / "suite.toml", out=tmp_path / "out")
    page = render_report(tmp_path / "out")
    assert "one benchmark: there is no other benchmark" in _section(page, "health")
    assert '<svg class="scatter"' not in page
    data = _payload(page)
    assert data["values"][1] == ["m2", "m1"]
    assert data["subtasks"]["score"] == [[60.0], [33.33]]
