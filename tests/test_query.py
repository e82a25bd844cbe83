from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import sys
from importlib import resources
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import LbnormError, run
from lbnorm.cli import main
from lbnorm.core.errors import InputError, OptionsError
from lbnorm.core.options import RunOptions
from lbnorm.faces.query import (
    format_result,
    infer_format,
    run_query,
)
from lbnorm.output.reader import Output

pytest.importorskip("duckdb", reason="lbnorm query needs the sql extra (duckdb)")

DOCS = (
    Path(__file__).parent.parent / "docs" / "analysts.md"
)  # the five analyst questions
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
    assert setup is not None, "docs/analysts.md lost its GPQA setup commands"
    address, pattern, replacement = setup.groups()
    text = (resources.files("lbnorm.suites") / "builtin" / "openllm-v2.toml").read_text(
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
    views = run_query(demo_out, "FROM columns").to_pandas()
    leaderboard = views.loc[views["view"] == "leaderboard"].set_index("column")
    assert leaderboard.loc["params_b", "type"] == "DOUBLE"
    assert leaderboard.loc["submission_date", "type"] == "DATE"
    assert str(leaderboard.loc["rank", "doc"]).startswith("1 = best average")
    assert set(views["view"]) == {"scores", "benchmarks", "leaderboard", "metadata"}
    assert Output.open(demo_out).metadata_columns() == [
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
    board = Output.open(demo_out).frame("leaderboard")
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
        Output.open(tmp_path).frame("leaderboard")


def test_bad_attach_names(demo_out: Path) -> None:
    with pytest.raises(
        OptionsError, match=r"not a plain SQL name.*\nHint: use another"
    ):
        run_query(demo_out, "SELECT 1", attach={"a-b": demo_out})
    with pytest.raises(OptionsError, match=r"DuckDB keeps for its own.*\nHint: use"):
        run_query(demo_out, "SELECT 1", attach={"main": demo_out})
    assert main(["query", str(demo_out), "SELECT 1", "--attach", "nodir"]) == 2


@pytest.mark.parametrize(
    ("attach", "message"),
    [
        (["select={out}"], "DuckDB cannot name a schema 'select'"),
        (["system={out}"], "a name DuckDB keeps for its own schema"),
        (["memory={out}"], "a name DuckDB keeps for its own schema"),
        (["information_schema={out}"], "a name DuckDB keeps for its own schema"),
        (["pg_catalog={out}"], "a name DuckDB keeps for its own schema"),
        (["old={out}", "OLD={out}"], "the same name as --attach old="),
        (["old={out}", "old={out}"], "a NAME given twice"),
    ],
)
def test_attach_names_duckdb_refuses_are_usage_errors(
    demo_out: Path, capsys: pytest.CaptureFixture[str], attach: list[str], message: str
) -> None:
    argv = ["query", str(demo_out), "SELECT 1"]
    for text in attach:
        argv += ["--attach", text.format(out=demo_out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("lbnorm: error: --attach")
    assert message in err
    assert "\nHint: " in err
    assert "Traceback" not in err


def test_missing_duckdb_says_how_to_install(
    demo_out: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "duckdb", None)
    with pytest.raises(
        LbnormError,
        match=r"need DuckDB.*\nHint: pip install duckdb \(or, in a clone of lbnorm, pip install '\.\[sql\]'\)",
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
    views = set(run_query(tmp_path / "out", "FROM columns")["view"].to_pylist())
    assert views == {"benchmarks", "leaderboard"}
    with pytest.raises(
        InputError, match=r"no subtasks.parquet.*\nHint: rerun `lbnorm run"
    ):
        Output.open(tmp_path / "out").frame("subtasks")


# --- a query reads the output's tables and nothing else ---------------------------------


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def own_out(demo_out: Path, tmp_path: Path) -> Path:
    """A copy of the demo output that a test may try to damage."""
    out = tmp_path / "out"
    shutil.copytree(demo_out, out)
    return out


@pytest.mark.parametrize(
    ("sql", "refused"),
    [
        (
            "COPY (SELECT 1 AS a) TO '{out}/leaderboard.parquet'",
            r'Cannot access file ".*leaderboard\.parquet"',
        ),
        (
            "COPY (SELECT 1 AS a) TO '{out}/leaderboard.parquet' (FORMAT parquet, USE_TMP_FILE false)",
            r'Cannot access file ".*leaderboard\.parquet"',
        ),
        (
            "CREATE TABLE t AS FROM leaderboard LIMIT 0;"
            " COPY t FROM '{out}/leaderboard.parquet'",
            r"Cannot access file",
        ),
        ("ATTACH '{tmp}/new.db' AS x", r'Cannot access file ".*new\.db"'),
        ("SELECT * FROM read_text('/etc/hostname')", r'"/etc/hostname"'),
        ("SELECT * FROM read_parquet('{out}/leaderboard.parquet')", r"Cannot access"),
        ("SELECT * FROM '{out}/leaderboard.parquet'", r"Cannot access"),
        ("SELECT * FROM glob('/etc/*')", r"Cannot access file"),
        ("INSTALL httpfs", r"Cannot access directory"),
        ("LOAD httpfs", r"extensions is disabled"),
        ("EXPORT DATABASE '{tmp}/dump'", r"Cannot access directory"),
        ("SET enable_external_access = true", r"configuration has been locked"),
        ("SET threads = 1", r"configuration has been locked"),
        ("SELECT 1 AS a; COPY (SELECT 1) TO '{tmp}/x.csv'", r"x\.csv"),
    ],
    ids=[
        "copy-over-output",
        "copy-no-tmp-file",
        "copy-from-file",
        "attach-file",
        "read-text",
        "read-parquet-path",
        "replacement-scan-path",
        "glob",
        "install-extension",
        "load-extension",
        "export-database",
        "set-external-access",
        "set-threads",
        "second-statement",
    ],
)
def test_a_query_cannot_reach_outside_the_tables(
    sql: str,
    refused: str,
    own_out: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = _digests(tmp_path)
    statement = sql.format(out=own_out, tmp=tmp_path)
    assert main(["query", str(own_out), statement, "--attach", f"old={own_out}"]) == 1
    err = capsys.readouterr().err
    assert re.match(r"lbnorm: error: query refused: ", err), err
    assert re.search(refused, err), err
    assert "Hint: a query reads the output's tables only" in err
    assert "--output FILE" in err
    assert "Traceback" not in err
    assert _digests(tmp_path) == before  # nothing written, nothing changed
    with pytest.raises(LbnormError, match=r"query refused: .*\nHint: a query reads"):
        run_query(own_out, statement)


def test_the_database_is_locked_down(demo_out: Path) -> None:
    settings = run_query(
        demo_out,
        "SELECT current_setting('enable_external_access') AS external,"
        " current_setting('lock_configuration') AS locked,"
        " current_setting('autoinstall_known_extensions') AS autoinstall,"
        " current_setting('python_enable_replacements') AS python_scans",
    ).to_pylist()
    assert settings == [
        {"external": False, "locked": True, "autoinstall": False, "python_scans": False}
    ]


def test_in_memory_scratch_tables_still_work(demo_out: Path) -> None:
    rows = run_query(
        demo_out,
        "CREATE TEMP TABLE top AS SELECT model FROM leaderboard ORDER BY rank LIMIT 3;"
        " SELECT count(*) AS n FROM top",
    ).to_pylist()
    assert rows == [{"n": 3}]


def test_output_file_inside_an_output_is_refused(
    own_out: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _digests(tmp_path)
    sql = "SELECT model FROM leaderboard LIMIT 1"
    for target in (own_out / "leaderboard.parquet", own_out / "extra.csv"):
        assert main(["query", str(own_out), sql, "--output", str(target)]) == 2
        assert re.fullmatch(
            r"lbnorm: error: --output \S+: inside the output directory \S+; a query "
            r"result saved there would change the output.\nHint: save it elsewhere, "
            r"e.g. --output result.csv.\n",
            capsys.readouterr().err,
        )
    assert _digests(tmp_path) == before
    assert main(["query", str(own_out), sql, "--output", str(tmp_path / "r.csv")]) == 0
    assert (tmp_path / "r.csv").read_text().startswith("model\n")
    other = tmp_path / "other-output"  # any lbnorm output, not only the one queried
    shutil.copytree(own_out, other)
    assert main(["query", str(own_out), sql, "--output", str(other / "r.csv")]) == 2
    assert "inside the output directory" in capsys.readouterr().err
    app = tmp_path / "web-app"  # a manifest.json that is not lbnorm's
    app.mkdir()
    (app / "manifest.json").write_text('{"name": "app"}')
    assert main(["query", str(own_out), sql, "--output", str(app / "r.csv")]) == 0
    assert (app / "r.csv").read_text().startswith("model\n")


# --- what a query prints -----------------------------------------------------------------


def test_table_prints_what_the_query_returned(
    demo_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = (
        'SELECT round(corr("BBH", average), 3) AS r3, 1.0 / 3 AS third,'
        " round(50.0, 2) AS fifty, 7 AS seven FROM leaderboard"
    )
    assert main(["query", str(demo_out), sql]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["r3", "third", "fifty", "seven"]
    r3, third, fifty, seven = lines[1].split()
    assert len(r3.split(".")[1]) == 3  # the SQL's round(..., 3), not 2 digits
    assert third == repr(1 / 3)
    assert (fifty, seven) == ("50.0", "7")
    assert main(["query", str(demo_out), sql, "--digits", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[1:3] == ["0.33", "50.00"]


def test_duplicate_column_names(
    workdir: Path, demo_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = (
        "SELECT n.model, n.rank, o.rank FROM leaderboard n JOIN old.leaderboard o"
        " USING (model, precision, revision, chat_template) ORDER BY n.rank, n.model LIMIT 2"
    )
    attach = ["--attach", f"old={workdir / 'out-gpqa-raw'}"]
    assert main(["query", str(demo_out), sql, *attach]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["model", "rank", "rank"]
    assert lines[1].split()[1:] == ["1", "1"]
    assert main(["query", str(demo_out), sql, *attach, "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("model,rank,rank\n")
    for fmt in ("json", "parquet"):
        with pytest.raises(
            LbnormError,
            match=rf"--format {fmt} needs distinct column names; the result repeats \['rank'\].*\n"
            r"Hint: name them apart \(SELECT n.rank AS rank_new",
        ):
            format_result(run_query(demo_out, sql, attach={"old": demo_out}), fmt)


def test_control_characters_never_reach_a_terminal(
    demo_out: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "SELECT 'evil' || chr(27) || '[2J' || chr(155) || 'x' AS model, 1 AS n"
    assert main(["query", str(demo_out), sql]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown
    assert "\x9b" not in shown
    assert "evil\\x1b[2J\\x9bx" in shown
    for fmt, expected in (
        ("csv", "evil\x1b[2J\x9bx,1"),
        ("json", '"evil\\u001b[2J\x9bx"'),
    ):
        assert main(["query", str(demo_out), sql, "--format", fmt]) == 0  # a pipe: data
        assert expected in capsys.readouterr().out

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for fmt in ("csv", "json", "table"):
        terminal = Terminal()
        monkeypatch.setattr(sys, "stdout", terminal)
        assert main(["query", str(demo_out), sql, "--format", fmt]) == 0
        assert "\x1b" not in terminal.getvalue()
        assert "\x9b" not in terminal.getvalue()
        assert "[2J" in terminal.getvalue()


def test_a_damaged_table_is_one_clear_error(
    demo_out: Path, own_out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    board = own_out / "leaderboard.parquet"
    board.write_bytes(board.read_bytes()[: board.stat().st_size // 2])
    assert main(["query", str(own_out), "SELECT count(*) FROM benchmarks"]) == 4
    err = capsys.readouterr().err
    assert re.match(  # the one reader of output folders (lbnorm.output.reader) says it
        r"lbnorm: error: \S+leaderboard\.parquet: cannot read: .*"
        r"\nHint: [^\n]*rerun `lbnorm run` to rewrite the output\.\n$",
        err,
    ), err
    subtasks = own_out / "subtasks.parquet"
    data = bytearray(subtasks.read_bytes())
    for at in range(1_000, 400_000, 7):  # rot in the data pages, the footer intact
        data[at] ^= 0x5A
    subtasks.write_bytes(bytes(data))
    shutil.copy(demo_out / "leaderboard.parquet", board)
    with pytest.raises(  # its sha256 is not the manifest's
        InputError,
        match=r"subtasks\.parquet: does not match the output's manifest.json .*\nHint: ",
    ):
        run_query(own_out, "SELECT avg(raw_score) AS m FROM scores")
    from lbnorm.output import reader

    with pytest.MonkeyPatch.context() as patch:  # too large to hash: DuckDB finds it
        patch.setattr(reader, "HASH_ON_READ", 0)
        with pytest.raises(
            InputError,
            match=r"subtasks\.parquet: cannot read this output table: .*\nHint: rerun `lbnorm run",
        ):
            run_query(own_out, "SELECT avg(raw_score) AS m FROM scores")


def test_attached_views_are_listed_with_their_docs(demo_out: Path) -> None:
    views = run_query(demo_out, "FROM columns", attach={"old": demo_out}).to_pandas()
    assert set(views["view"]) == {
        "scores",
        "benchmarks",
        "leaderboard",
        "metadata",
        "old.scores",
        "old.benchmarks",
        "old.leaderboard",
    }  # the tables behind the attached views are not listed
    old = views.loc[views["view"] == "old.leaderboard"].set_index("column")
    assert str(old.loc["rank", "doc"]).startswith("1 = best average")


def test_json_is_streamed_a_slice_at_a_time_and_reads_the_same(
    demo_out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lbnorm.faces import query as query_face

    sql = "SELECT model, average, rank FROM leaderboard ORDER BY model LIMIT 7"
    table = run_query(demo_out, sql)
    whole = json.dumps(table.to_pylist(), default=str, ensure_ascii=False) + "\n"
    monkeypatch.setattr(query_face, "JSON_ROWS", 2)
    parts = list(query_face.result_parts(table, "json"))
    assert len(parts) == 6  # "[", 4 slices, "]\n"
    assert b"".join(parts).decode() == whole
    assert format_result(table.slice(0, 0), "json") == b"[]\n"
    out = tmp_path / "result.json"
    assert main(["query", str(demo_out), sql, "--output", str(out)]) == 0
    assert out.read_text() == whole
