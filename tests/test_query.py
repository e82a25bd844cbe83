from __future__ import annotations

import io
import json
import re
import shlex
import sys
from importlib import resources
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import LbnormError, run
from lbnorm.cli import main
from lbnorm.errors import InputError
from lbnorm.options import RunOptions
from lbnorm.outdir import metadata_columns, read_output_table
from lbnorm.query import (
    describe_views,
    format_result,
    infer_format,
    run_query,
)

pytest.importorskip("duckdb", reason="lbnorm query needs the sql extra (duckdb)")

DOCS = Path(__file__).parent.parent / "README.md"  # the five analyst questions
KEYS = ["model", "precision", "revision", "chat_template"]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs' setup: the demo in lbnorm-out, GPQA at bound 0 in out-gpqa-raw."""
    folder = tmp_path_factory.mktemp("analyst")
    run(out=folder / "lbnorm-out", created_at="2025-01-01T00:00:00+00:00")
    setup = re.search(
        r"lbnorm suites show openllm-v2 --toml \| sed '/(\w+)/s/([^/]+)/([^/]+)/' > gpqa-raw.toml\n"
        r"lbnorm run --suite gpqa-raw.toml --out out-gpqa-raw --quiet",
        DOCS.read_text(),
    )
    assert setup is not None, "README.md lost its GPQA setup commands"
    address, pattern, replacement = setup.groups()
    text = (resources.files("lbnorm") / "suite_files" / "openllm-v2.toml").read_text(
        "utf-8"
    )
    edited = "\n".join(
        line.replace(pattern, replacement) if address in line else line
        for line in text.splitlines()
    )
    (folder / "gpqa-raw.toml").write_text(edited)
    run(suite=folder / "gpqa-raw.toml", out=folder / "out-gpqa-raw")
    return folder


@pytest.fixture
def demo_out(workdir: Path) -> Path:
    return workdir / "lbnorm-out"


def _doc_examples() -> list[tuple[str, str]]:
    pairs = re.findall(
        r"```bash\n(lbnorm query .*?)\n```\n\n```text\n(.*?)\n```",
        DOCS.read_text(),
        re.S,
    )
    return [(command, output) for command, output in pairs]


def test_docs_have_five_questions_with_outputs() -> None:
    text = DOCS.read_text()
    assert len(re.findall(r"^### \d\. ", text, re.M)) == 5
    assert len(_doc_examples()) >= 5


@pytest.mark.parametrize(
    ("command", "expected"),
    _doc_examples(),
    ids=[f"example{i}" for i in range(len(_doc_examples()))],
)
def test_docs_examples_print_what_the_docs_show(
    command: str,
    expected: str,
    workdir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(workdir)
    argv = shlex.split(command)
    assert argv[0] == "lbnorm"
    assert main(argv[1:]) == 0
    assert capsys.readouterr().out.rstrip() == expected


def test_top_math_under_10b_matches_pandas(demo_out: Path) -> None:
    result = run_query(
        demo_out,
        'SELECT model, "MATH Lvl 5" FROM leaderboard WHERE params_b > 0 AND params_b < 10 '
        'ORDER BY "MATH Lvl 5" DESC, model LIMIT 20',
    ).to_pandas()
    board = pd.read_parquet(demo_out / "leaderboard.parquet")
    small = board.loc[(board["params_b"] > 0) & (board["params_b"] < 10)]
    expected = small.sort_values(["MATH Lvl 5", "model"], ascending=[False, True]).head(
        20
    )
    assert result["model"].tolist() == expected["model"].tolist()
    assert result["model"].iloc[0] == "nvidia/AceMath-7B-Instruct"
    assert result["MATH Lvl 5"].iloc[0] == pytest.approx(63.3685800604229)


def test_views_cover_every_output_file_and_the_metadata(demo_out: Path) -> None:
    counts = run_query(
        demo_out,
        "SELECT (SELECT count(*) FROM scores) AS scores, (SELECT count(*) FROM subtasks) AS subtasks,"
        " (SELECT count(*) FROM benchmarks) AS benchmarks,"
        " (SELECT count(*) FROM leaderboard) AS leaderboard,"
        " (SELECT count(*) FROM metadata) AS metadata,"
        " (SELECT count(*) FROM metadata WHERE flagged) AS flagged",
    ).to_pylist()
    assert counts == [
        {
            "scores": 4576 * 40,
            "subtasks": 4576 * 40,
            "benchmarks": 4576 * 6,
            "leaderboard": 4576,
            "metadata": 4576,
            "flagged": 1,
        }
    ]
    views = describe_views(demo_out)
    leaderboard = views.loc[views["view"] == "leaderboard"].set_index("column")
    assert leaderboard.loc["params_b", "type"] == "DOUBLE"
    assert leaderboard.loc["submission_date", "type"] == "DATE"
    assert str(leaderboard.loc["rank", "doc"]).startswith("1 = best average")
    assert set(views["view"]) == {"scores", "benchmarks", "leaderboard", "metadata"}
    assert metadata_columns(demo_out) == [
        "type",
        "type_code",
        "params_b",
        "submission_date",
        "flagged",
        "size_class",
    ]


def test_output_parquet_types_and_docs_serve_other_tools(demo_out: Path) -> None:
    schema = pq.read_schema(demo_out / "leaderboard.parquet")
    assert schema.field("rank").type == pa.int64()
    assert schema.field("GPQA").type == pa.float64()
    assert schema.field("params_b").type == pa.float64()
    assert schema.field("submission_date").type == pa.date32()
    assert schema.field("flagged").type == pa.bool_()
    assert schema.field("size_class").metadata[b"doc"].startswith(b"Size class")
    assert b"metadata table" in schema.field("type").metadata[b"doc"]
    board = read_output_table(demo_out, "leaderboard")
    assert str(board["rank"].dtype) == "Int64"


def test_formats_round_trip(demo_out: Path, tmp_path: Path) -> None:
    table = run_query(
        demo_out,
        "SELECT model, rank, submission_date, flagged, average, 2.5 AS literal,"
        " CAST('nan' AS DOUBLE) AS nan_value FROM leaderboard LIMIT 3",
    )
    assert table.schema.field("literal").type == pa.float64()  # decimals become floats
    assert table.column("nan_value").null_count == 3  # NaN becomes null
    csv = pd.read_csv(io.BytesIO(format_result(table, "csv")))
    assert csv["model"].tolist() == table.column("model").to_pylist()
    assert (
        csv["average"].tolist() == table.column("average").to_pylist()
    )  # full precision
    records = json.loads(format_result(table, "json"))
    assert records[0]["submission_date"] == "2024-11-28"
    assert records[0]["nan_value"] is None
    assert records[0]["rank"] == 1
    (tmp_path / "r.parquet").write_bytes(format_result(table, "parquet"))
    assert pq.read_table(tmp_path / "r.parquet").equals(table)
    text = format_result(table, "table", max_rows=2).decode()
    assert "... 1 more rows" in text
    assert text.rstrip().endswith("(3 rows)")
    assert infer_format("x.parquet") == "parquet"
    assert infer_format("x.txt") == "table"


def test_cli_writes_each_format(
    demo_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "SELECT model, average FROM leaderboard ORDER BY rank LIMIT 5"
    for name in ("top.csv", "top.json", "top.parquet"):
        assert (
            main(["query", str(demo_out), sql, "--output", str(tmp_path / name)]) == 0
        )
    assert pd.read_csv(tmp_path / "top.csv")["model"].iloc[0] == (
        "MaziyarPanahi/calme-3.2-instruct-78b"
    )
    assert len(json.loads((tmp_path / "top.json").read_text())) == 5
    assert pq.read_table(tmp_path / "top.parquet").num_rows == 5
    assert "wrote" in capsys.readouterr().err
    assert main(["query", str(demo_out), sql, "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("model,average\n")
    assert main(["query", str(demo_out), sql, "--format", "parquet"]) == 2
    assert "Hint: add --output" in capsys.readouterr().err


def test_sql_from_stdin_and_attach(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        sys, "stdin", io.StringIO("SELECT count(*) AS n FROM old.leaderboard")
    )
    out = str(workdir / "lbnorm-out")
    assert main(["query", out, "-", "--attach", f"old={out}"]) == 0
    assert "4576" in capsys.readouterr().out.replace(",", "")
    unchanged = run_query(
        out,
        "SELECT count(*) AS moved FROM leaderboard n JOIN same.leaderboard o"
        " USING (model, precision, revision, chat_template) WHERE n.rank <> o.rank",
        attach={"same": out},
    )
    assert unchanged.to_pylist() == [{"moved": 0}]


def test_metadata_file_becomes_the_metadata_view(
    demo_out: Path, tmp_path: Path
) -> None:
    path = tmp_path / "meta.csv"
    path.write_text("model,team\nnvidia/AceMath-7B-Instruct,red\n")
    rows = run_query(
        demo_out,
        "SELECT l.model, m.team FROM leaderboard l JOIN metadata m USING (model)",
        metadata=path,
    ).to_pylist()
    assert rows == [{"model": "nvidia/AceMath-7B-Instruct", "team": "red"}]


def test_bad_sql_names_the_views(
    demo_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", str(demo_out), "SELECT nope FROM leaderboard"]) == 1
    err = capsys.readouterr().err
    assert "query failed" in err
    assert "nope" in err
    assert "Hint: the views are scores, benchmarks, leaderboard and metadata" in err
    with pytest.raises(
        LbnormError,
        match=r"(?s)Catalog Error.*Did you mean \"leaderboard\".*\nHint: the views are",
    ):
        run_query(demo_out, "SELECT * FROM leaderbord")


def test_not_an_output_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", str(tmp_path), "SELECT 1"]) == 4
    assert "not an lbnorm output directory" in capsys.readouterr().err
    with pytest.raises(
        InputError, match=r"missing manifest.json.*\nHint: write one with `lbnorm run"
    ):
        read_output_table(tmp_path, "leaderboard")


def test_bad_attach_names(demo_out: Path) -> None:
    with pytest.raises(LbnormError, match=r"not a plain SQL name.*\nHint: use letters"):
        run_query(demo_out, "SELECT 1", attach={"main": demo_out})
    assert main(["query", str(demo_out), "SELECT 1", "--attach", "nodir"]) == 1


def test_missing_duckdb_says_how_to_install(
    demo_out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(
        LbnormError, match=r"need DuckDB.*\nHint: pip install 'lbnorm\[sql\]'"
    ):
        run_query(demo_out, "SELECT 1")


def test_outputs_without_subtasks_have_no_scores_view(
    golden_dir: Path, tmp_path: Path
) -> None:
    run(
        sorted(golden_dir.glob("*.json")),
        out=tmp_path / "out",
        options=RunOptions(subtasks=False),
    )
    views = set(describe_views(tmp_path / "out")["view"])
    assert views == {"benchmarks", "leaderboard"}
    with pytest.raises(
        InputError, match=r"no subtasks.parquet.*\nHint: rerun `lbnorm run"
    ):
        read_output_table(tmp_path / "out", "subtasks")
