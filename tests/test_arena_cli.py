"""``lbnorm arena``: every option, the output files, the manifest, atomic replacement, bad input."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm.arena import ArenaOptions
from lbnorm.cli import main
from lbnorm.core.schemas import RATINGS, WIN_RATES
from lbnorm.core.version import lbnorm_version
from lbnorm.ratings import (
    RatingOptions,
    compute_ratings,
    ratings_table,
    read_battles,
    win_rates_table,
)

BATTLES = Path(__file__).parent / "fixtures" / "battles"
CLEAN = BATTLES / "clean_battle_20230601.json"
CSV = BATTLES / "battles.csv"
COUNTS = BATTLES / "battle_counts.csv"
GOLDEN = Path(__file__).parent / "fixtures" / "golden"


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file and directory under `folder`, with each file's sha256."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        if path.is_file()
        else "<dir>"
        for path in sorted(folder.rglob("*"))
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _manifest(out: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((out / "manifest.json").read_text())
    return manifest


def _expected(
    paths: list[Path], options: RatingOptions, where: tuple[str, ...] = ()
) -> tuple[pa.Table, pa.Table]:
    """The tables the library computes for the same battles and options."""
    ratings = compute_ratings(read_battles(paths, where=where), options)
    return ratings_table(ratings), win_rates_table(ratings)


# --- the output ---------------------------------------------------------------------------


def test_arena_writes_ratings_win_rates_and_a_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "arena"
    argv = [
        "arena",
        str(CLEAN),
        "--out",
        str(out),
        "--where",
        "anony",
        "--bootstrap",
        "100",
        "--seed",
        "3",
        "--anchor",
        "mixtral-8x7b-instruct-v0.1=1114",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "ratings.parquet",
        "win_rates.parquet",
    ]
    # the tables: the contract's schemas, field docs included, and the library's values
    options = RatingOptions(
        bootstrap=100, seed=3, anchor=("mixtral-8x7b-instruct-v0.1", 1114.0)
    )
    expected_ratings, expected_win_rates = _expected([CLEAN], options, ("anony",))
    ratings = pq.read_table(out / "ratings.parquet")
    win_rates = pq.read_table(out / "win_rates.parquet")
    for table, schema, expected in (
        (ratings, RATINGS, expected_ratings),
        (win_rates, WIN_RATES, expected_win_rates),
    ):
        assert table.schema.remove_metadata().equals(schema.remove_metadata())
        assert [f.metadata for f in table.schema] == [f.metadata for f in schema]
        assert table.equals(expected)
    assert ratings.num_rows == 10
    assert win_rates.num_rows == 90
    by_model = dict(
        zip(ratings["model"].to_pylist(), ratings["rating"].to_pylist(), strict=True)
    )
    assert by_model["mixtral-8x7b-instruct-v0.1"] == pytest.approx(1114.0)
    assert ratings["rank_upper_bound"].null_count == 0
    # the Parquet files carry their provenance
    metadata = ratings.schema.metadata
    assert metadata[b"lbnorm.kind"] == b"ratings"
    assert metadata[b"lbnorm.table"] == b"ratings"
    assert json.loads(metadata[b"lbnorm.options"]) == _manifest(out)["options"]
    # the manifest: kind, version, every option whole, inputs and outputs hashed
    manifest = _manifest(out)
    assert manifest["tool"] == "lbnorm"
    assert manifest["kind"] == "ratings"
    assert manifest["version"] == lbnorm_version()
    assert (
        manifest["options"]
        == ArenaOptions(rating=options, where=("anony",)).to_manifest()
    )
    assert manifest["options"]["rating"]["anchor"] == [
        "mixtral-8x7b-instruct-v0.1",
        1114.0,
    ]
    assert manifest["inputs"] == [
        {
            "path": str(CLEAN),
            "resolved": str(CLEAN),  # given absolute
            "format": "json",
            "shape": "battles",
            "sha256": _sha256(CLEAN),
            "bytes": CLEAN.stat().st_size,
            "rows": 324,
            "rows_read": 400,
            "rows_filtered_out": 76,
        }
    ]
    for name in ("ratings.parquet", "win_rates.parquet"):
        assert manifest["outputs"][name]["sha256"] == _sha256(out / name)
    assert manifest["outputs"]["ratings.parquet"]["rows"] == 10
    assert manifest["outputs"]["win_rates.parquet"]["rows"] == 90
    assert manifest["counts"] == {
        "models": 10,
        "battles": 324,
        "rows_read": 400,
        "rows_filtered_out": 76,
        "bootstrap_rounds": 100,
    }
    assert {"code": "filtered", "message": "76 of 400 rows did not match --where."} in (
        manifest["warnings"]
    )
    assert re.match(r"\d{4}-\d\d-\d\dT", manifest["created_at"])
    # the summary: the battles, the method, the top models with their intervals
    text = captured.out
    assert (
        "battles    1 file(s), 400 rows read, 76 filtered out by --where: 324 battles among 10 models"
        in text
    )
    assert (
        "anchored: mixtral-8x7b-instruct-v0.1 = 1114; 100 bootstrap rounds (seed 3)"
        in (text)
    )
    lines = text.splitlines()
    header = lines.index("top 10 of 10:") + 1
    assert lines[header].split() == [
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
    first = lines[header + 1].split()
    assert first[:4] == ["1", "1", "gpt-4", f"{by_model['gpt-4']:.1f}"]
    assert f"wrote      {out}/ (ratings, win_rates .parquet; manifest.json)" in text
    assert "lbnorm: warning: filtered: 76 of 400 rows did not match --where." in (
        captured.err
    )


@pytest.mark.parametrize(
    ("args", "options", "path"),
    [
        (["--method", "elo"], RatingOptions(method="elo"), CSV),
        (["--ties", "drop"], RatingOptions(ties="drop"), CSV),
        (["--l2", "1"], RatingOptions(l2=1.0), CSV),
        (["--l2", "0.05", "--ties", "drop"], RatingOptions(l2=0.05, ties="drop"), CSV),
        (
            ["--bootstrap", "30", "--seed", "9"],
            RatingOptions(bootstrap=30, seed=9),
            CSV,
        ),
        (
            ["--method", "elo", "--bootstrap", "5", "--seed", "1"],
            RatingOptions(method="elo", bootstrap=5, seed=1),
            CSV,
        ),
        (["--anchor", "gpt-4=1300"], RatingOptions(anchor=("gpt-4", 1300.0)), COUNTS),
        (
            ["--bootstrap", "10", "--max-memory", "0.5"],
            RatingOptions(bootstrap=10, max_bootstrap_bytes=2**29),
            COUNTS,
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else None,
)
def test_every_option_reaches_the_fit_and_the_manifest(
    args: list[str], options: RatingOptions, path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "o"
    assert main(["arena", str(path), "--out", str(out), "--quiet", *args]) == 0
    expected_ratings, expected_win_rates = _expected([path], options)
    assert pq.read_table(out / "ratings.parquet").equals(expected_ratings)
    assert pq.read_table(out / "win_rates.parquet").equals(expected_win_rates)
    assert _manifest(out)["options"] == ArenaOptions(rating=options).to_manifest()


def test_where_filters_and_files_pool(tmp_path: Path) -> None:
    out = tmp_path / "o"
    where = ["language = 'English'", "tstamp >= 1682400000"]
    argv = ["arena", str(CSV), str(BATTLES / "battles.parquet"), "--out", str(out)]
    argv += [item for condition in where for item in ("--where", condition)]
    assert main([*argv, "--quiet"]) == 0
    expected, _ = _expected(
        [CSV, BATTLES / "battles.parquet"], RatingOptions(), tuple(where)
    )
    assert pq.read_table(out / "ratings.parquet").equals(expected)
    manifest = _manifest(out)
    assert manifest["options"]["where"] == where
    assert [entry["format"] for entry in manifest["inputs"]] == ["csv", "parquet"]
    battles = read_battles([CSV, BATTLES / "battles.parquet"], where=where)
    assert sum(entry["rows"] for entry in manifest["inputs"]) == battles.n_battles
    assert all(
        entry["rows"] + entry["rows_filtered_out"] == entry["rows_read"] == 400
        for entry in manifest["inputs"]
    )


def test_counts_shape_records_rows_not_cells(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert main(["arena", str(COUNTS), "--out", str(out), "--quiet"]) == 0
    (entry,) = _manifest(out)["inputs"]
    assert (entry["shape"], entry["rows_read"], entry["rows_filtered_out"]) == (
        "counts",
        90,
        0,
    )


def test_quiet_and_top(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["arena", str(CSV), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["arena", str(CSV), "--out", str(tmp_path / "b"), "--top", "3"]) == 0
    text = capsys.readouterr().out
    assert "top 3 of 10:" in text
    assert "no intervals (--bootstrap N adds them)" in text
    table = text.split("top 3 of 10:\n")[1].split("\n\n")[0].splitlines()
    assert len(table) == 4
    assert "lower" not in table[0]


def test_model_names_are_escaped_in_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    battles = tmp_path / "b.csv"
    evil = "evil\x1b[2J"
    battles.write_text(
        f"model_a,model_b,winner\n{evil},good,model_a\ngood,{evil},model_a\n"
    )
    assert main(["arena", str(battles), "--out", str(tmp_path / "o")]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text
    assert "evil\\x1b[2J" in text


# --- replacing, and refusing to replace ---------------------------------------------------


def test_a_second_run_replaces_the_ratings_output_whole(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert (
        main(["arena", str(CSV), "--out", str(out), "--bootstrap", "20", "--quiet"])
        == 0
    )
    first = _manifest(out)
    foreign = out / "notes.parquet"  # a file lbnorm did not write: never deleted
    foreign.write_bytes(b"an analyst's own table")
    assert main(["arena", str(COUNTS), "--out", str(out), "--quiet"]) == 6
    assert foreign.read_bytes() == b"an analyst's own table"
    assert _manifest(out) == first
    foreign.unlink()
    assert main(["arena", str(COUNTS), "--out", str(out), "--quiet"]) == 0
    second = _manifest(out)
    assert sorted(p.name for p in out.iterdir()) == [
        "manifest.json",
        "ratings.parquet",
        "win_rates.parquet",
    ]
    assert second["inputs"][0]["path"] == str(COUNTS)
    assert first["outputs"] != second["outputs"]
    assert pq.read_table(out / "ratings.parquet")["rating_lower"].null_count == 10
    leftovers = [
        p.name for p in tmp_path.iterdir() if ".tmp-" in p.name or ".old-" in p.name
    ]
    assert leftovers == []  # no staging folder, no swapped-out output


def test_arena_will_not_replace_a_leaderboard(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "board"
    assert (
        main(["run", str(GOLDEN / "Amu__t1-3B.json"), "--out", str(out), "--quiet"])
        == 0
    )
    before = _snapshot(tmp_path)
    assert main(["arena", str(CSV), "--out", str(out)]) == 6
    captured = capsys.readouterr()
    assert re.search(
        r"board: holds a leaderboard output \(written by `lbnorm run`\); a ratings "
        r"output will not replace it\.\nHint: choose another --out",
        captured.err,
    )
    assert captured.out == ""
    assert _snapshot(tmp_path) == before


def test_run_will_not_replace_ratings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ratings"
    assert main(["arena", str(CSV), "--out", str(out), "--quiet"]) == 0
    before = _snapshot(tmp_path)
    assert (
        main(["run", str(GOLDEN / "Amu__t1-3B.json"), "--out", str(out), "--quiet"])
        == 6
    )
    assert re.search(
        r"ratings: holds a ratings output \(written by `lbnorm arena`\); a leaderboard "
        r"output will not replace it\.\nHint: choose another --out",
        capsys.readouterr().err,
    )
    assert _snapshot(tmp_path) == before


def test_help_lists_every_option_and_loads_no_pandas() -> None:
    code = (
        "import sys\n"
        "from lbnorm.cli import main\n"
        "assert main(['arena', '--help']) == 0\n"
        "assert 'pandas' not in sys.modules, 'pandas was imported'\n"
        "assert 'pyarrow' not in sys.modules, 'pyarrow was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    for option in (
        "--out",
        "--method",
        "--ties",
        "--l2",
        "--anchor",
        "--bootstrap",
        "--seed",
        "--where",
        "--max-memory",
        "--top",
        "--quiet",
    ):
        assert option in done.stdout


# --- bad input: a clear error with a hint, the right exit code, nothing written ------------

_SELF = "model_a,model_b,winner\na,b,model_a\nb,b,model_a\nb,a,tie\n"
_UNKNOWN = "model_a,model_b,winner\na,b,model_a\nb,a,draw\n"
_EMPTY = "model_a,model_b,winner\na,b,model_a\na,,tie\nb,a,model_b\n"
_DISCONNECTED = (
    "model_a,model_b,winner\na,b,model_a\nb,a,model_a\nc,d,model_a\nd,c,tie\n"
)
_NEVER_LOST = (
    "model_a,model_b,winner\na,b,model_a\nb,c,model_a\nc,b,model_a\nc,a,model_b\n"
)
_GOOD = "model_a,model_b,winner\na,b,model_a\nb,a,model_a\n"

BAD_INPUTS: list[tuple[str, str, list[str], int, str]] = [
    (
        "self-battle",
        _SELF,
        [],
        4,
        r"b\.csv: a model battles itself \(model_a == model_b\) at line 3: 'b'\.\n"
        r"Hint: drop self-battles",
    ),
    (
        "unknown winner",
        _UNKNOWN,
        [],
        4,
        r"b\.csv: unknown winner value at line 3: 'draw'\.\nHint: winner must be one of "
        r"'model_a', 'model_b', 'tie', 'tie \(bothbad\)'",
    ),
    (
        "empty name",
        _EMPTY,
        [],
        4,
        r"b\.csv: empty or null model_b at line 3: ''\.\nHint: every battle needs both "
        r"model names",
    ),
    (
        "disconnected graph",
        _DISCONNECTED,
        [],
        4,
        r"the comparison graph has 2 separate parts, and ratings in different parts "
        r"cannot be compared: \{a, b\}; \{c, d\}\.\nHint: rate one part at a time",
    ),
    (
        "disconnected graph (elo too)",
        _DISCONNECTED,
        ["--method", "elo"],
        4,
        r"2 separate parts.*\{a, b\}; \{c, d\}\.\nHint: rate one part at a time",
    ),
    (
        "never lost",
        _NEVER_LOST,
        [],
        4,
        r"Bradley-Terry ratings diverge: .*never lost: a \(2 wins, 0 losses\).*\n"
        r"Hint: add an L2 penalty \(--l2 1",
    ),
    (
        "bootstrap too big for memory",
        _GOOD,
        ["--bootstrap", "1000000000000"],
        2,
        r"a bootstrap of 1000000000000 rounds over 2 models would need about .* GiB, "
        r"more than the 4\.00 GiB allowed\.\nHint: use fewer rounds \(--bootstrap \d+ "
        r"fits\), or allow more memory \(--max-memory GIB",
    ),
    (
        "elo on counts",
        "model_a,model_b,wins_a,wins_b,ties\na,b,2,1,0\n",
        ["--method", "elo"],
        2,
        r"online Elo needs one battle per row.*\nHint: use --method bt",
    ),
    (
        "l2 with elo",
        _GOOD,
        ["--method", "elo", "--l2", "1"],
        2,
        r"l2 applies to Bradley-Terry only.*\nHint: drop --l2",
    ),
    (
        "l2 not positive",
        _GOOD,
        ["--l2", "0"],
        2,
        r"l2 must be a finite number > 0, got 0\.0\.\nHint: l2 is scikit-learn's C",
    ),
    (
        "anchor not MODEL=RATING",
        _GOOD,
        ["--anchor", "a"],
        2,
        r"--anchor 'a' is not MODEL=RATING\.\nHint: write e\.g\. --anchor",
    ),
    (
        "anchor not in the battles",
        _GOOD,
        ["--anchor", "gpt-5=1200"],
        4,
        r"anchor model 'gpt-5' is not in the battles \(2 models\)\.\nHint: use a model "
        r"name exactly as the battles spell it",
    ),
    (
        "where unreadable",
        _GOOD,
        ["--where", "language =="],
        2,
        r"--where 'language ==': expected one value after the operator\.\nHint: write "
        r"COLUMN",
    ),
    (
        "where on a missing column",
        _GOOD,
        ["--where", "anony"],
        4,
        r"b\.csv: --where 'anony': no column 'anony'; found \['model_a', 'model_b', "
        r"'winner'\]\.\nHint: filter on a column the file has",
    ),
    (
        "negative bootstrap",
        _GOOD,
        ["--bootstrap", "-1"],
        2,
        r"bootstrap must be a whole number >= 0, got -1\.\nHint: use 0 for no intervals",
    ),
    (
        "max-memory not positive",
        _GOOD,
        ["--max-memory", "0"],
        2,
        r"--max-memory must be a positive number of GiB, got 0\.\nHint: e\.g\.",
    ),
    (
        "an empty file",
        "",
        [],
        4,
        r"b\.csv: the file is empty\.\nHint: remove it",
    ),
    (
        "no battle columns",
        "model,benchmark,subtask,raw_score\nm,b,s,0.5\n",
        [],
        4,
        r"b\.csv: missing column\(s\) \['model_a', 'model_b', 'winner'\]; found .*\n"
        r"Hint: battles need model_a, model_b, winner",
    ),
    # issue 30 items 7 and 13: ambiguous files, extreme counts and options
    (
        "two winner columns",
        "model_a,model_b,winner,winner\na,b,model_a,model_b\nb,a,tie,model_a\n",
        [],
        4,
        r"b\.csv: the column\(s\) \['winner'\] appear more than once.*\nHint: keep one column",
    ),
    (
        "two model_a columns",
        "model_a,model_b,winner,model_a\na,b,model_a,c\n",
        [],
        4,
        r"the column\(s\) \['model_a'\] appear more than once",
    ),
    (
        "winner and counts",
        "model_a,model_b,winner,wins_a,wins_b,ties\na,b,model_a,5,1,0\nb,a,tie,1,1,1\n",
        [],
        4,
        r"both a winner column and count columns \(wins_a, wins_b, ties\).*\nHint: keep "
        r"winner",
    ),
    (
        "all-zero counts, ties kept",
        "model_a,model_b,wins_a,wins_b,ties\na,b,0,0,0\nb,c,1,1,0\nc,b,1,0,0\n",
        [],
        4,
        r"1 model\(s\) have no battles \(all their counts are 0\): \{a\}\.\nHint: drop",
    ),
    (
        "wins_a = 2**63 - 1",
        "model_a,model_b,wins_a,wins_b,ties\na,b,9223372036854775807,0,0\nb,a,1,1,0\n",
        [],
        4,
        r"wins_a is too large \(2\*\*53 battles or more\) at line 2.*\nHint: wins_a counts",
    ),
    (
        "l2 1e308",
        _GOOD,
        ["--l2", "1e308"],
        2,
        r"l2 must be at most 1e\+12, got 1e\+308\.\nHint",
    ),
    (
        "anchor 1e308",
        _GOOD,
        ["--anchor", "a=1e308"],
        2,
        r"--anchor 'a=1e308' is not MODEL=RATING\.\nHint: .*within \+-1e9",
    ),
    (
        "a fit too big for memory",
        _GOOD,
        ["--max-memory", "1e-9"],
        2,
        r"rating 2 models would need about .* GiB for the fit alone.*\nHint: rate fewer",
    ),
]


@pytest.mark.parametrize(
    ("content", "args", "exit_code", "message"),
    [case[1:] for case in BAD_INPUTS],
    ids=[case[0] for case in BAD_INPUTS],
)
def test_bad_input_fails_cleanly_and_writes_nothing(
    content: str,
    args: list[str],
    exit_code: int,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    battles = tmp_path / "b.csv"
    battles.write_text(content)
    previous = tmp_path / "previous"
    assert main(["arena", str(CSV), "--out", str(previous), "--quiet"]) == 0
    before = _snapshot(tmp_path)
    for out in (tmp_path / "new", previous):  # a new folder, and over an old output
        code = main(["arena", str(battles), "--out", str(out), *args])
        captured = capsys.readouterr()
        assert code == exit_code, captured.err
        assert captured.out == ""
        assert captured.err.startswith("lbnorm: error: ")
        assert re.search(message, captured.err, flags=re.DOTALL), captured.err
        assert "Traceback" not in captured.err
        assert _snapshot(tmp_path) == before  # nothing written, the old output intact


def test_the_l2_penalty_rates_a_model_that_never_lost(tmp_path: Path) -> None:
    battles = tmp_path / "b.csv"
    battles.write_text(_NEVER_LOST)
    out = tmp_path / "o"
    assert main(["arena", str(battles), "--out", str(out), "--l2", "1", "--quiet"]) == 0
    ratings = pq.read_table(out / "ratings.parquet")
    assert ratings["model"][0].as_py() == "a"
    assert np.isfinite(ratings["rating"].to_numpy()).all()


def test_missing_file_and_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    assert main(["arena", str(tmp_path / "nope.csv"), "--out", str(out)]) == 4
    assert re.search(
        r"nope\.csv: cannot read the file .*\nHint: check the path",
        capsys.readouterr().err,
    )
    (tmp_path / "b.txt").write_text("model_a,model_b,winner\n")
    assert main(["arena", str(tmp_path / "b.txt"), "--out", str(out)]) == 4
    assert re.search(
        r"b\.txt: unsupported file type '\.txt'\.\nHint: use one of",
        capsys.readouterr().err,
    )
    assert main(["arena", str(CSV), "--out", str(out), "--method", "glicko"]) == 2
    assert "invalid choice: 'glicko'" in capsys.readouterr().err
    assert main(["arena", str(CSV)]) == 2  # --out is required
    assert "--out" in capsys.readouterr().err
    assert main(["arena", str(CSV), "--out", str(tmp_path / "no" / "such" / "o")]) == 6
    assert re.search(r"directory does not exist\.\nHint:", capsys.readouterr().err)
    assert not out.exists()


def test_order_warnings_are_shown_for_online_elo_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    battles = tmp_path / "b.csv"
    battles.write_text(_GOOD)  # no tstamp column
    assert (
        main(["arena", str(battles), "--out", str(tmp_path / "bt"), "--l2", "1"]) == 0
    )
    assert "no_tstamp" not in capsys.readouterr().err
    assert (
        main(["arena", str(battles), "--out", str(tmp_path / "elo"), "--method", "elo"])
        == 0
    )
    assert (
        "lbnorm: warning: no_tstamp: a file has no tstamp column; online Elo replays "
        "battles in file order." in capsys.readouterr().err
    )
    assert _manifest(tmp_path / "elo")["warnings"][0]["code"] == "no_tstamp"


def test_a_bootstrap_warning_is_named_and_an_open_interval_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ["a,b,model_a"] * 20 + ["b,a,model_a"] + ["b,c,model_a"] * 10
    rows += ["c,b,model_a"] * 5 + ["a,c,model_a"] * 10
    battles = tmp_path / "b.csv"
    battles.write_text("model_a,model_b,winner\n" + "\n".join(rows) + "\n")
    out = tmp_path / "o"
    assert main(["arena", str(battles), "--out", str(out), "--bootstrap", "200"]) == 0
    captured = capsys.readouterr()
    assert re.search(
        r"lbnorm: warning: bootstrap_divergent: in \d+ of 200 bootstrap rounds some "
        r"models never lost",
        captured.err,
    )
    assert [w["code"] for w in _manifest(out)["warnings"]] == ["bootstrap_divergent"]
    first = captured.out.split("top 3 of 3:\n")[1].splitlines()[1].split()
    assert first[2] == "a"
    assert first[5] == "inf"  # the upper bound the data do not give
    upper = pq.read_table(out / "ratings.parquet")["rating_upper"][0].as_py()
    assert upper == float("inf")


def test_style_control_writes_its_tables_and_prints_the_coefficients(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    style = BATTLES / "clean_battle_style.json"
    out = tmp_path / "style"
    code = main(
        ["arena", str(style), "--style-control", "--bootstrap", "20", "--out", str(out)]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "style control (L2 penalty C = 2)" in printed
    assert "style coefficients (log-odds per standard deviation" in printed
    coefficients = pq.read_table(out / "style_coefficients.parquet").to_pylist()
    assert [row["feature"] for row in coefficients] == [
        "length",
        "header",
        "list",
        "bold",
    ]
    length = coefficients[0]
    assert (
        length["coefficient_lower"]
        < length["coefficient"]
        < length["coefficient_upper"]
    )
    ranks = pq.read_table(out / "style_control.parquet").to_pylist()
    verbose = next(row for row in ranks if row["model"] == "verbose-7b")
    assert verbose["rating"] < verbose["rating_plain"]  # its length no longer counts
    assert all(row["rank_delta"] == row["rank_plain"] - row["rank"] for row in ranks)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["rating"]["style_control"] is True


def test_style_control_without_conv_metadata_is_a_clean_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["arena", str(CLEAN), "--style-control", "--out", str(tmp_path / "o")])
    assert code == 4
    assert re.search(
        r"lbnorm: error: .*no field 'conv_metadata\.sum_assistant_a_tokens'.*\nHint: style control reads conv_metadata",
        capsys.readouterr().err,
    )
    assert not (tmp_path / "o").exists()


def _write_binary_case(name: str, folder: Path) -> Path:
    if name == "deep.json":
        path = folder / name
        path.write_text("[" * 100_000 + "]" * 100_000)
        return path
    path = folder / name
    if name == "repeated.parquet":
        table = pa.Table.from_arrays(
            [
                pa.array(["a", "b"]),
                pa.array(["b", "a"]),
                pa.array(["model_a", "tie"]),
                pa.array(["x", "y"]),
            ],
            names=["model_a", "model_b", "winner", "model_a"],
        )
    else:
        big = pa.array([2**62, 1], pa.int64())
        if name == "uint64.parquet":
            big = pa.array([2**63 + 5, 1], pa.uint64())
        table = pa.table(
            {
                "model_a": ["a", "b"],
                "model_b": ["b", "a"],
                "wins_a": big,
                "wins_b": [1, 1],
                "ties": [0, 0],
            }
        )
    pq.write_table(table, path)
    return path


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("deep.json", r"deep\.json: element 1 \(line 1\): Expected `object`.*\nHint"),
        (
            "int64.parquet",
            r"wins_a is too large \(2\*\*53 battles or more\) at row 1: 4611686018427387904",
        ),
        ("uint64.parquet", r"wins_a is too large .* at row 1: 9223372036854775808"),
        ("repeated.parquet", r"the column\(s\) \['model_a'\] appear more than once"),
    ],
)
def test_issue_30_tracebacks_are_clean_errors(
    name: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 30 item 6: RecursionError, ArrowInvalid and KeyError before
    path = _write_binary_case(name, tmp_path)
    code = main(["arena", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 4, err
    assert "Traceback" not in err
    assert re.search(message, err, flags=re.DOTALL), err
    assert not (tmp_path / "o").exists()


def test_the_same_file_given_twice_is_warned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["arena", str(CSV), str(CSV), "--out", str(tmp_path / "o")])
    assert code == 0
    assert re.search(
        r"lbnorm: warning: repeated_file: .*battles\.csv given more than once",
        capsys.readouterr().err,
    )


STYLE = BATTLES / "clean_battle_style.json"


def test_daily_vote_cap_keeps_each_judges_first_votes_of_each_utc_day() -> None:
    from lbnorm.ratings.categories import daily_vote_cap

    records = json.loads(STYLE.read_text())
    battles = read_battles(STYLE, judges=True)
    assert battles.judge is not None
    assert battles.tstamp is not None
    keep = daily_vote_cap(battles.judge, battles.tstamp, 3)
    # the oracle: a loop over the votes in time order, counting per judge and day
    seen: dict[tuple[str, int], int] = {}
    expected = [False] * len(records)
    for i in sorted(range(len(records)), key=lambda i: (records[i]["tstamp"], i)):
        key = (records[i]["judge"], int(records[i]["tstamp"] // 86_400))
        seen[key] = seen.get(key, 0) + 1
        expected[i] = seen[key] <= 3
    assert keep.tolist() == expected
    assert 0 < keep.sum() < len(records)


def test_categories_are_each_rated_as_their_own_battles_with_rank_deltas(
    tmp_path: Path,
) -> None:
    out = tmp_path / "o"
    args = ["arena", str(STYLE), "--anony-only", "--bootstrap", "50", "--quiet"]
    categories = ["--category", "math=category_tag.math_v0.1.math"]
    assert main([*args, *categories, "--out", str(out)]) == 0
    table = pq.read_table(out / "categories.parquet").to_pylist()
    assert {row["category"] for row in table} == {"overall", "math"}
    # the Arena's own tables only when asked for (--arena-tables)
    assert not (out / "leaderboard.parquet").exists()
    assert not (out / "pairwise_observed.parquet").exists()
    # the same as rating a file of the category's battles alone
    alone = tmp_path / "alone"
    where = ["--where", "category_tag.math_v0.1.math"]
    assert main([*args, *where, "--out", str(alone)]) == 0
    expected = {
        row["model"]: row
        for row in pq.read_table(alone / "ratings.parquet").to_pylist()
    }
    math = [row for row in table if row["category"] == "math"]
    for row in math:
        assert row["rating"] == pytest.approx(
            expected[row["model"]]["rating"], abs=1e-9
        )
        assert row["final_ranking"] == expected[row["model"]]["rank_upper_bound"]
        assert row["rank_delta"] == row["final_ranking_overall"] - row["final_ranking"]


def test_display_filters_recompute_the_rank_over_the_models_shown(
    tmp_path: Path,
) -> None:
    out = tmp_path / "o"
    code = main(
        [
            "arena",
            str(STYLE),
            "--bootstrap",
            "50",
            "--arena-tables",
            "--hide",
            "gpt-4o",
            "--min-battles",
            "300",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    board = pq.read_table(out / "leaderboard.parquet").to_pandas()
    ratings = pq.read_table(out / "ratings.parquet").to_pandas().set_index("model")
    assert "gpt-4o" not in set(board["model"])
    assert (board["num_battles"] > 300).all()
    shown = ratings.loc[board["model"]]
    lower, upper = shown["rating_lower"].to_numpy(), shown["rating_upper"].to_numpy()
    expected = [
        1 + int((lower > u).sum()) for u in upper
    ]  # Arena's formula, shown only
    assert board["final_ranking"].tolist() == expected
    assert list(board.columns) == [
        "model",
        "rating",
        "variance",
        "rating_q975",
        "rating_q025",
        "num_battles",
        "final_ranking",
    ]
    observed = pq.read_table(out / "pairwise_observed.parquet").to_pylist()
    records = json.loads(STYLE.read_text())
    first = observed[0]
    pair = [
        r
        for r in records
        if {r["model_a"], r["model_b"]} == {first["model_a"], first["model_b"]}
        and r["winner"] in ("model_a", "model_b")
    ]
    won = sum(r[r["winner"]] == first["model_a"] for r in pair)
    assert first["n_battles"] == len(pair)
    assert first["win_fraction"] == pytest.approx(won / len(pair))
