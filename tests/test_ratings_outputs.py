"""A ratings output (``lbnorm arena``'s) read back: its kind, show, query, diff and report."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm.analysis.correlation import kendall_tau, spearman_rho
from lbnorm.analysis.ratings_diff import diff_rating_tables, diff_ratings
from lbnorm.cli import main
from lbnorm.core.errors import InputError, OutputError
from lbnorm.faces.ratings_report import render_ratings_report
from lbnorm.output.reader import Output
from lbnorm.output.transaction import Transaction

BATTLES = Path(__file__).parent / "fixtures" / "battles"
CLEAN = BATTLES / "clean_battle_20230601.json"
GOLDEN = Path(__file__).parent / "fixtures" / "golden"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two ratings outputs of the same battles (anonymous votes, then all) and a leaderboard."""
    folder = tmp_path_factory.mktemp("ratings")
    common = ["--bootstrap", "200", "--seed", "1", "--quiet"]
    assert main(["arena", str(CLEAN), "--out", str(folder / "old"), *common]) == 0
    assert (
        main(
            [
                "arena",
                str(CLEAN),
                "--out",
                str(folder / "new"),
                "--where",
                "anony",
                "--anchor",
                "mixtral-8x7b-instruct-v0.1=1114",
                *common,
            ]
        )
        == 0
    )
    board = ["run", str(GOLDEN / "Amu__t1-3B.json"), "--out", str(folder / "board")]
    assert main([*board, "--quiet"]) == 0
    return folder


# --- the kind, in one place ------------------------------------------------------------------


def test_output_kind_tells_ratings_from_leaderboards(
    outputs: Path, tmp_path: Path
) -> None:
    assert Output.open(outputs / "new").kind == "ratings"
    assert Output.open(outputs / "board").kind == "leaderboard"
    old_style = tmp_path / "old-style"  # a manifest without "kind": a leaderboard
    shutil.copytree(outputs / "board", old_style)
    manifest = json.loads((old_style / "manifest.json").read_text())
    manifest.pop("kind", None)
    (old_style / "manifest.json").write_text(json.dumps(manifest))
    assert Output.open(old_style).kind == "leaderboard"
    manifest["kind"] = "tournament"
    (old_style / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(
        InputError,
        match=r"has an unknown \"kind\" \('tournament'; this lbnorm reads leaderboard, ratings, analysis\).*\nHint: point at a folder",
    ):
        Output.open(old_style)
    with pytest.raises(
        InputError,
        match=r"\(missing manifest\.json, ratings\.parquet, win_rates\.parquet\)\.\n"
        r"Hint: write one with `lbnorm arena BATTLES",
    ):
        Output.open(tmp_path, "ratings")


def test_each_reader_says_what_an_output_holds(outputs: Path) -> None:
    with pytest.raises(
        InputError,
        match=r"new: holds pairwise ratings \(written by `lbnorm arena`\), not a "
        r"leaderboard.*\nHint: `lbnorm show`, `query`, `diff` and `report` read ratings",
    ):
        Output.open(outputs / "new", "leaderboard")
    with pytest.raises(
        InputError,
        match=r"board: holds a leaderboard \(written by `lbnorm run`\), not pairwise "
        r"ratings; this reads ratings outputs\.\nHint: write ratings with `lbnorm arena",
    ):
        Output.open(outputs / "board", "ratings")
    assert Output.open(outputs / "new").manifest["kind"] == "ratings"
    assert "suite" in Output.open(outputs / "board").manifest
    ratings = Output.open(outputs / "new").frame("ratings")
    assert str(ratings["rank"].dtype) == "Int64"
    assert len(Output.open(outputs / "new").frame("win_rates")) == 90


def test_a_ratings_output_missing_a_table(outputs: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(outputs / "new", broken)
    (broken / "win_rates.parquet").unlink()
    with pytest.raises(
        InputError,
        match=r"broken: a ratings output without win_rates\.parquet\.\n"
        r"Hint: rerun `lbnorm arena` to rewrite the output",
    ):
        Output.open(broken).frame("ratings")


def write_tables(
    out: Path,
    tables: dict[str, pa.Table],
    manifest: dict[str, str],
    *,
    created_at: str | None = None,
) -> None:
    """What `rate_battles` does with its tables: one transaction of the manifest's kind."""
    with Transaction(out, kind=manifest["kind"]) as transaction:  # type: ignore[arg-type]
        for name, table in tables.items():
            transaction.write_table(f"{name}.parquet", table)
        transaction.manifest |= manifest
        transaction.commit(created_at=created_at)


def test_a_ratings_transaction_stages_swaps_and_records(tmp_path: Path) -> None:
    out = tmp_path / "o"
    table = pa.table({"x": [1, 2, 3]})
    manifest = {"tool": "lbnorm", "kind": "ratings", "version": "0"}
    write_tables(out, {"ratings": table, "win_rates": table}, manifest, created_at="t")
    written = json.loads((out / "manifest.json").read_text())
    assert written["created_at"] == "t"
    assert written["outputs"]["ratings.parquet"]["rows"] == 3
    assert pq.read_table(out / "ratings.parquet").equals(table)
    with pytest.raises(
        OutputError, match=r"a table named '\.\./x'.*\nHint: name tables"
    ):
        write_tables(out, {"../x": table}, manifest)
    with pytest.raises(
        OutputError,
        match=r"holds a ratings output .*; a leaderboard output will not replace it\.\n"
        r"Hint: choose another --out",
    ):
        write_tables(out, {"t": table}, {"tool": "lbnorm", "kind": "leaderboard"})
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "ratings.parquet",
        "win_rates.parquet",
    ]


# --- show ------------------------------------------------------------------------------------


def test_show_prints_the_ratings(
    outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(outputs / "new"), "--top", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "top 3 of 10 models, by rating"
    assert lines[1].split() == [
        "rank",
        "rank_ub",
        "model",
        "rating",
        "lower",
        "upper",
        "battles",
        "wins",
        "ties",
        "win_%",
    ]
    ratings = Output.open(outputs / "new").frame("ratings")
    for line, row in zip(lines[2:], ratings.head(3).to_dict("records"), strict=True):
        cells = line.split()
        assert cells[2] == row["model"]
        assert float(cells[3]) == pytest.approx(row["rating"], abs=0.006)
        assert float(cells[4]) == pytest.approx(row["rating_lower"], abs=0.006)
        assert float(cells[9]) == pytest.approx(100 * float(row["win_rate"]), abs=0.006)
    assert len(lines) == 5


def test_show_filters_ratings_by_name_and_column(
    outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(outputs / "new")
    assert main(["show", out, "--model", "GPT"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("top 2 of 2 models where model~GPT, by rating (10 in all)")
    assert "gpt-4" in text
    assert "gpt-3.5-turbo" in text
    assert "claude" not in text
    assert (
        main(["show", out, "--where", "n_battles>=65", "--columns", "model,n_battles"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["model", "battles"]
    assert all(int(line.split()[1]) >= 65 for line in lines[2:])
    ratings = Output.open(out).frame("ratings")
    assert len(lines) - 2 == int((ratings["n_battles"] >= 65).sum())


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--benchmark", "math"], "--benchmark"),
        (["--precision", "bfloat16"], "--precision"),
        (["--rank-within", "type"], "--rank-within"),
        (["--exclude-flagged"], "--exclude-flagged"),
    ],
)
def test_show_refuses_leaderboard_options_on_ratings(
    args: list[str], flag: str, outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(outputs / "new"), *args]) == 2
    assert re.search(
        rf"new: holds pairwise ratings; {flag} applies to leaderboards only\.\n"
        r"Hint: for ratings, `lbnorm show` takes --top, --model, --where",
        capsys.readouterr().err,
    )


def test_show_reports_a_bad_filter_and_column(
    outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(outputs / "new"), "--where", "elo>1"]) == 2
    assert re.search(
        r"no column 'elo'.*\nHint: filter on one of", capsys.readouterr().err
    )
    assert main(["show", str(outputs / "new"), "--columns", "model,elo"]) == 2
    assert re.search(
        r"no column\(s\) \['elo'\] in the ratings\.\nHint: choose from",
        capsys.readouterr().err,
    )


# --- query -----------------------------------------------------------------------------------


def test_query_has_ratings_and_win_rates_views(
    outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("duckdb", reason="lbnorm query needs the sql extra (duckdb)")
    from lbnorm.faces.query import run_query

    out = outputs / "new"
    views = run_query(out, "FROM columns").to_pandas()
    assert sorted(set(views["view"])) == ["ratings", "win_rates"]
    assert views.loc[views["view"] == "ratings", "column"].tolist() == list(
        Output.open(out).frame("ratings").columns
    )
    assert views["doc"].str.len().gt(0).all()
    result = run_query(out, "SELECT model, rating FROM ratings ORDER BY rating DESC")
    expected = Output.open(out).frame("ratings")
    assert result["model"].to_pylist() == expected["model"].tolist()
    pairs = run_query(
        out,
        "SELECT r.model, w.win_rate FROM win_rates w JOIN ratings r ON r.model = w.model_b"
        " WHERE w.model_a = 'gpt-4' ORDER BY w.win_rate DESC",
    )
    assert pairs.num_rows == 9
    # against the old output: rating moves in SQL
    moves = run_query(
        out,
        "SELECT n.model, n.rating - o.rating AS delta FROM ratings n JOIN old.ratings o"
        " USING (model) ORDER BY n.model",
        attach={"old": outputs / "old"},
    )
    diff = diff_ratings(outputs / "old", out).models.sort_values("model")
    assert np.allclose(moves["delta"].to_numpy(), diff["rating_delta"].to_numpy())
    assert main(["query", str(out), "SELECT count(*) AS n FROM leaderboard"]) == 1
    assert re.search(
        r"(?s)query failed: .*leaderboard.*\nHint: a ratings output's views are ratings "
        r"and win_rates",
        capsys.readouterr().err,
    )
    assert main(["query", str(out), "SELECT count(*) AS n FROM win_rates"]) == 0
    assert capsys.readouterr().out.split() == ["n", "90", "(1", "row)"]


# --- diff ------------------------------------------------------------------------------------


def test_diff_of_two_ratings_outputs(
    outputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = outputs / "old", outputs / "new"
    diff = diff_ratings(old, new)
    before = Output.open(old).frame("ratings").set_index("model")
    after = Output.open(new).frame("ratings").set_index("model")
    models = diff.models.set_index("model")
    assert (models["status"] == "both").all()
    names = list(after.index)
    assert np.allclose(
        models.loc[names, "rating_delta"], after["rating"] - before.loc[names, "rating"]
    )
    assert (
        models.loc[names, "rank_move"].astype(int)
        == (before.loc[names, "rank"] - after["rank"]).astype(int)
    ).all()
    assert diff.summary["kendall_tau"] == pytest.approx(
        kendall_tau(before.loc[names, "rating"], after["rating"])
    )
    assert diff.summary["spearman_rho"] == pytest.approx(
        spearman_rho(before.loc[names, "rating"], after["rating"])
    )
    assert diff.summary["intervals_checked"] == 10
    assert diff.options_changed == {
        "anchor": (None, ["mixtral-8x7b-instruct-v0.1", 1114.0]),
        "where": ([], ["anony"]),
    }
    assert main(["diff", str(old), str(new), "--out", str(tmp_path / "d")]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"# lbnorm diff: {old} -> {new} (ratings)")
    assert "| anchor | (none) | mixtral-8x7b-instruct-v0.1, 1114.0 |" in text
    assert (
        f"| Kendall tau / Spearman rho | {diff.summary['kendall_tau']:.4f} / "
        f"{diff.summary['spearman_rho']:.4f} |" in text
    )
    assert "## Largest rating moves (10)" in text
    saved = pq.read_table(tmp_path / "d" / "diff_ratings.parquet").to_pandas()
    assert saved["model"].tolist() == diff.models["model"].tolist()
    summary = pq.read_table(tmp_path / "d" / "diff_ratings_summary.parquet")
    assert summary["kendall_tau"][0].as_py() == pytest.approx(
        diff.summary["kendall_tau"]
    )
    assert main(["diff", str(old), str(new), "--markdown", str(tmp_path / "d.md")]) == 0
    assert (tmp_path / "d.md").read_text().startswith("# lbnorm diff:")


def test_diff_counts_added_removed_and_moves() -> None:
    old = pd.DataFrame(
        {
            "model": ["a", "b", "c", "d"],
            "rating": [1200.0, 1100.0, 1000.0, 900.0],
            "rank": [1, 2, 3, 4],
            "rating_lower": [1150.0, 1050.0, 950.0, 850.0],
            "rating_upper": [1250.0, 1150.0, 1050.0, 950.0],
        }
    )
    new = pd.DataFrame(
        {
            "model": ["c", "a", "b", "e"],
            "rating": [1300.0, 1190.0, 1090.0, 800.0],
            "rank": [1, 2, 3, 4],
            "rating_lower": [1260.0, 1140.0, 1040.0, 700.0],
            "rating_upper": [1340.0, 1240.0, 1140.0, 900.0],
        }
    )
    diff = diff_rating_tables(old, new, moved_places=1, top=(1, 3))
    models = diff.models.set_index("model")
    assert models["status"].to_dict() == {
        "c": "both",
        "a": "both",
        "b": "both",
        "e": "added",
        "d": "removed",
    }
    assert models.loc["c", "rank_move"] == 2
    assert bool(models.loc["c", "is_beyond_intervals"])  # [950, 1050] -> [1260, 1340]
    assert not bool(models.loc["a", "is_beyond_intervals"])
    assert models["is_beyond_intervals"].isna().to_dict()["e"]
    summary = diff.summary
    assert (
        summary["models_common"],
        summary["models_added"],
        summary["models_removed"],
    ) == (3, 1, 1)
    assert summary["top_1_overlap"] == 0
    assert summary["top_3_overlap"] == 3
    assert summary["moved_more_than_n"] == 1
    assert summary["max_rank_move"] == 2
    assert summary["moves_beyond_intervals"] == 1
    assert summary["intervals_checked"] == 3
    assert summary["kendall_tau"] == pytest.approx(
        kendall_tau([1200, 1100, 1000], [1190, 1090, 1300])
    )


def test_diff_refuses_outputs_of_two_kinds(
    outputs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diff", str(outputs / "board"), str(outputs / "new")]) == 4
    assert re.search(
        r"lbnorm diff compares two outputs of one kind: .*board holds a leaderboard.*"
        r"new holds ratings\.\nHint: diff two `lbnorm arena` outputs, or two `lbnorm run`",
        capsys.readouterr().err,
    )
    missing = outputs / "arena-old"
    assert main(["diff", str(missing), str(outputs / "new")]) == 4
    assert capsys.readouterr().err == (
        f"lbnorm: error: {missing}: no such output folder.\n"
        "Hint: check the path; `lbnorm arena BATTLES... --out DIR` writes one.\n"
    )


# --- report ----------------------------------------------------------------------------------


def test_report_of_a_ratings_output_is_self_contained(
    outputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    html_file = tmp_path / "r.html"
    args = ["report", str(outputs / "new"), "--html", str(html_file)]
    assert main([*args, "--previous", str(outputs / "old"), "--top", "6"]) == 0
    assert f"wrote {html_file}" in capsys.readouterr().out
    page = html_file.read_text()
    assert page.startswith("<!DOCTYPE html>")
    assert "default-src 'none'; style-src 'unsafe-inline'" in page
    assert "<script" not in page
    assert "<img" not in page
    assert not re.search(r"https?:", page)
    assert not re.search(r"""(src|href)=(?!["']?(data:|#))""", page)
    for anchor in ("ratings", "table", "win-rates", "diff"):
        assert f'id="{anchor}"' in page
    ratings = Output.open(outputs / "new").frame("ratings")
    chart = page.split('id="ratings"')[1].split("</section>")[0]
    assert chart.count('<g class="row">') == 6  # --top 6
    assert chart.count('class="bar"') == 6  # each with its interval
    for row in ratings.head(6).itertuples():
        assert (
            f"{row.model}: {row.rating:.1f} (95% interval {row.rating_lower:.1f} to "
            f"{row.rating_upper:.1f})" in chart
        )
    heat = page.split('id="win-rates"')[1].split("</section>")[0]
    assert heat.count("<rect") == 36
    win_rates = Output.open(outputs / "new").frame("win_rates")
    first = win_rates.iloc[0]
    assert f"{first.model_a} beats {first.model_b}: {first.win_rate:.3f}" in heat
    table = page.split('id="table"')[1].split("</section>")[0]
    assert table.count("<tr>") == 1 + len(ratings)  # the header and every model
    assert "Largest rating moves (10)" in page
    assert render_ratings_report(outputs / "new", top=50).count('<g class="row">') == 10


def test_report_names_are_text_never_markup(tmp_path: Path) -> None:
    battles = tmp_path / "b.csv"
    hostile = '<img src=x onerror="alert(1)">'
    battles.write_text(
        f'model_a,model_b,winner\n"{hostile.replace(chr(34), chr(34) * 2)}",b,model_a\n'
        f'b,"{hostile.replace(chr(34), chr(34) * 2)}",model_a\n'
    )
    assert main(["arena", str(battles), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    page = render_ratings_report(tmp_path / "o", title="<b>t</b>")
    assert hostile not in page
    assert "<b>t</b>" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page


def test_report_of_a_ratings_output_without_intervals(tmp_path: Path) -> None:
    assert main(["arena", str(CLEAN), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    page = render_ratings_report(tmp_path / "o")
    assert 'class="bar"' not in page
    assert "no intervals: run lbnorm arena with --bootstrap N" in page
    assert "rank_ub" not in page


@pytest.mark.slow
def test_ratings_report_renders_in_chromium(outputs: Path, tmp_path: Path) -> None:
    chromium = next(
        (
            found
            for name in ("chromium", "chromium-browser", "google-chrome")
            if (found := shutil.which(name))
        ),
        None,
    )
    if chromium is None:
        pytest.skip("no chromium binary on PATH (apt-get install -y chromium)")
    html_file = tmp_path / "r.html"
    assert main(["report", str(outputs / "new"), "--html", str(html_file)]) == 0
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            html_file.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    dom = done.stdout
    assert dom.count('<g class="row">') == 10  # the browser parsed every chart row
    assert dom.count("<rect") == 100 + 1  # the heat map's cells and the chart's frame
    assert "lbnorm ratings: new" in dom
