"""The one reader of output folders: a damaged or foreign output gets one clear error.

Every command that reads an output (``show``, ``health``, ``diff``, ``compare``,
``report``, ``query``) goes through :meth:`lbnorm.output.reader.Output.open`, which
checks the manifest and each table's footer and schema once (issue 14, point 11).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import InputError
from lbnorm.cli import main
from lbnorm.output.reader import Output
from lbnorm.output.transaction import Transaction
from lbnorm.output.writer import add_to

GOLDEN = Path(__file__).parent / "fixtures" / "golden"


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("outdir") / "good"
    files = [GOLDEN / "Amu__t1-3B.json", GOLDEN / "AIDC-AI__Marco-o1.json"]
    assert main(["run", *map(str, files), "--out", str(out), "--quiet"]) == 0
    return out


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt_footer(path: Path) -> None:
    """Keep the magic bytes and the footer length; garble the footer (thrift)."""
    data = bytearray(path.read_bytes())
    length = int.from_bytes(data[-8:-4], "little")
    data[-8 - length : -8] = b"\xff" * length
    path.write_bytes(bytes(data))


def _drop_rank_and_average(path: Path) -> None:
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["rank", "average"]), path)


def _rank_as_text(path: Path) -> None:
    table = pq.read_table(path)
    at = table.schema.get_field_index("rank")
    pq.write_table(table.set_column(at, "rank", table["rank"].cast(pa.string())), path)


def _foreign_table(path: Path) -> None:
    pq.write_table(pa.table({"name": ["app"], "size": [1]}), path)


def _foreign_manifest(path: Path) -> None:
    path.write_text('{"name": "app"}')


def _newer_manifest(path: Path) -> None:
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "format": 99}))


#: (file damaged, how, what the message says after "<file>: ")
DAMAGES: list[tuple[str, Callable[[Path], None], str]] = [
    (
        "leaderboard.parquet",
        _truncate,
        r"cannot read: Parquet magic bytes not found in footer\. Either the file is "
        r"corrupted or this is not a parquet file\.\nHint: the file is damaged or not Parquet",
    ),
    (
        "leaderboard.parquet",
        _corrupt_footer,
        r"cannot read: Couldn't deserialize thrift: [^\n]*\.\nHint: the file is damaged",
    ),
    (
        "leaderboard.parquet",
        _drop_rank_and_average,
        r"not an lbnorm leaderboard table: missing column\(s\) rank, average; it has "
        r"model, precision, revision, chat_template, average_stderr and \d+ more\.\nHint: ",
    ),
    (
        "leaderboard.parquet",
        _rank_as_text,
        r"not an lbnorm leaderboard table: rank is string, not integer\.\nHint: ",
    ),
    (
        "benchmarks.parquet",
        _foreign_table,
        r"not an lbnorm benchmarks table: missing column\(s\) model, precision, "
        r"revision, chat_template, benchmark and \d+ more; it has name, size\.\nHint: ",
    ),
    ("subtasks.parquet", _truncate, r"cannot read: .*\nHint: the file is damaged"),
    (
        "manifest.json",
        _foreign_manifest,
        r'not an lbnorm output directory \(its manifest.json has no "tool": "lbnorm"\)'
        r"\.\nHint: point at a folder `lbnorm run --out` wrote\.",
    ),
    (
        "manifest.json",
        _newer_manifest,
        r"not an lbnorm output directory \(its manifest.json was written by a newer "
        r"lbnorm \(output format 99; this one knows up to 1\)\)\.\nHint: ",
    ),
]

COMMANDS: dict[str, Callable[[Path, Path, Path], list[str]]] = {
    "show": lambda out, good, tmp: ["show", str(out)],
    "health": lambda out, good, tmp: ["health", str(out)],
    "diff": lambda out, good, tmp: ["diff", str(good), str(out)],
    "compare": lambda out, good, tmp: ["compare", str(out), "Amu/t1-3B"],
    "report": lambda out, good, tmp: [
        "report",
        str(out),
        "--html",
        str(tmp / "r.html"),
    ],
    "query": lambda out, good, tmp: [
        "query",
        str(out),
        "SELECT count(*) FROM leaderboard",
    ],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("name", "damage", "message"),
    DAMAGES,
    ids=[f"{name}-{damage.__name__.strip('_')}" for name, damage, _ in DAMAGES],
)
def test_a_damaged_output_is_one_clear_error_in_every_command(
    command: str,
    name: str,
    damage: Callable[[Path], None],
    message: str,
    good: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    shutil.copytree(good, out)
    damage(out / name)
    where = out if name == "manifest.json" else out / name
    code = main(COMMANDS[command](out, good, tmp_path))
    err = capsys.readouterr().err
    assert code == 4, err
    assert re.fullmatch(
        rf"lbnorm: error: {re.escape(str(where))}: {message}[^\n]*\n", err
    ), err
    assert "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_a_missing_folder_and_missing_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(
        InputError, match=r"nowhere: not an lbnorm output directory \(no such folder\)"
    ):
        Output.open(tmp_path / "nowhere", "leaderboard")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "manifest.json").write_text("{}")
    with pytest.raises(
        InputError,
        match=r"half: not an lbnorm output directory \(missing benchmarks.parquet, "
        r"leaderboard.parquet\)\.\nHint: write one with `lbnorm run",
    ):
        Output.open(tmp_path / "half")


@pytest.mark.parametrize(
    ("table", "message"),
    [
        # a table every leaderboard output holds: an output of lbnorm's, damaged
        (
            "leaderboard.parquet",
            r"/out: a leaderboard output without leaderboard\.parquet\.\n"
            r"Hint: rerun `lbnorm run` to rewrite the output\.",
        ),
        # a table only its manifest lists: named as the file that cannot be read
        (
            "subtasks.parquet",
            r"subtasks\.parquet: cannot read: No such file or directory\.\nHint: the "
            r"output is damaged; rerun `lbnorm run` to rewrite the output\.",
        ),
    ],
)
def test_an_lbnorm_output_missing_a_table_is_called_damaged(
    table: str, message: str, good: Path, tmp_path: Path
) -> None:
    """lbnorm's own manifest there: the folder is an output of lbnorm's, missing a table."""
    out = tmp_path / "out"
    shutil.copytree(good, out)
    (out / table).unlink()
    with pytest.raises(InputError, match=message):
        Output.open(out)


def test_an_output_written_before_format_versions_is_refused_with_a_hint(
    good: Path, tmp_path: Path
) -> None:
    """lbnorm had no release before output format 1: such a folder is rewritten, not read."""
    out = tmp_path / "out"
    shutil.copytree(good, out)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["format"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(
        InputError,
        match=rf"{re.escape(str(out / 'manifest.json'))}: written by a development "
        r"version of lbnorm before output format 1, which this one reads\.\n"
        rf"Hint: re-run `lbnorm run \[INPUT\.\.\.\] --out {re.escape(str(out))}` to rewrite it\.",
    ):
        Output.open(out)


def test_damaged_pages_behind_a_good_footer_are_named_when_read(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table too large to hash on every read: its damage shows when it is read."""
    from lbnorm.output import reader

    monkeypatch.setattr(reader, "HASH_ON_READ", 0)  # every table "large"
    out = tmp_path / "out"
    shutil.copytree(good, out)
    path = out / "leaderboard.parquet"
    data = bytearray(path.read_bytes())
    data[4:200] = b"\x00" * 196  # the first data pages, not the footer
    path.write_bytes(bytes(data))
    Output.open(out, "leaderboard")  # the footer, schema and size are fine
    with pytest.raises(
        InputError, match=r"leaderboard.parquet: does not match .*sha256.*\nHint: "
    ):
        Output.open(out, "leaderboard", verify=True)  # --verify hashes it
    with pytest.raises(
        InputError, match=r"leaderboard.parquet: cannot read: [^\n]*\.\nHint: "
    ):
        Output.open(out).frame("leaderboard")


def test_a_damaged_added_table_is_named(good: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(good, out)
    with Transaction(out, kind=None) as transaction:
        add_to(transaction, {"health": pa.table({"x": [1.0]})})
        transaction.commit()
    _truncate(out / "health.parquet")
    with pytest.raises(
        InputError,
        match=r"health.parquet: does not match the output's manifest.json \(size in "
        r"bytes \d+, recorded \d+\): the file was changed or damaged after lbnorm "
        r"wrote it\.\nHint: restore it",
    ):
        Output.open(out, "leaderboard")


def test_a_changed_suite_is_noted_once_per_output(
    fixtures: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lbnorm.cli import main

    suite = tmp_path / "suite.toml"
    assert main(["suites", "show", "openllm-v2", "--toml"]) == 0
    suite.write_text(capsys.readouterr().out)
    out = tmp_path / "out"
    scores = fixtures / "tables" / "seed_examples.csv"
    assert (
        main(
            [
                "run",
                str(scores),
                "--suite",
                str(suite),
                "--out",
                str(out),
                "--quiet",
                "--missing",
                "partial",
            ]
        )
        == 0
    )
    recorded = Output.open(out).suite()[0]
    suite.write_text(suite.read_text() + "\n# edited after the run\n")
    embedded = Output.open(out).suite()[0]  # the text the manifest embeds
    assert embedded is not None
    assert recorded is not None
    assert embedded.sha256 == recorded.sha256
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["suite"]["text"]  # as manifests before the text was embedded
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert Output.open(out).suite()[0] is None
    assert Output.open(out).suite()[0] is None
    notes = [line for line in capsys.readouterr().err.splitlines() if "note" in line]
    assert notes == [
        f"lbnorm: note: {out}: its suite {str(suite)!r} is gone or changed; no rank "
        "intervals or stderr-aware floors for this output."
    ]


def _run_with_a_relative_suite(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """Two outputs written from `project` with `--suite my-suite.toml` (relative)."""
    project.mkdir()
    assert main(["suites", "show", "openllm-v2", "--toml"]) == 0
    text = capsys.readouterr().out.replace(
        'name = "openllm-v2"', 'name = "my-suite"', 1
    )
    (project / "my-suite.toml").write_text(text)
    monkeypatch.chdir(project)
    one, two = GOLDEN / "Amu__t1-3B.json", GOLDEN / "AIDC-AI__Marco-o1.json"
    for name, files in (("out1", [one]), ("out2", [one, two])):
        argv = ["run", *map(str, files), "--suite", "my-suite.toml", "--out", name]
        assert main([*argv, "--quiet"]) == 0
    return project / "out1", project / "out2"


def test_an_output_is_read_from_any_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 31's reproduction: `cd /tmp && lbnorm diff /abs/out1 /abs/out2` lost the suite."""
    out1, out2 = _run_with_a_relative_suite(tmp_path / "repo", capsys, monkeypatch)
    manifest = json.loads((out1 / "manifest.json").read_text())
    suite = manifest["suite"]
    assert suite["source"] == "my-suite.toml"
    assert suite["resolved"] == str(tmp_path / "repo" / "my-suite.toml")
    assert suite["text"] == (tmp_path / "repo" / "my-suite.toml").read_text()
    environment = manifest["environment"]
    assert environment["cwd"] == str(tmp_path / "repo")
    assert set(environment) == {
        "cwd",
        "lbnorm",
        "lbnorm_commit",
        "python",
        "numpy",
        "pyarrow",
    }
    assert [i["resolved"] for i in manifest["inputs"]] == [
        str(GOLDEN / "Amu__t1-3B.json")
    ]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["diff", str(out1), str(out2)]) == 0
    captured = capsys.readouterr()
    assert "gone or changed" not in captured.err
    assert "| rank moves beyond the rank intervals | 0 of 1 |" in captured.out
    (tmp_path / "repo" / "my-suite.toml").rename(tmp_path / "moved.toml")  # moved
    assert main(["diff", str(out1), str(out2)]) == 0
    captured = capsys.readouterr()
    assert "gone or changed" not in captured.err  # the embedded text
    assert "| rank moves beyond the rank intervals | 0 of 1 |" in captured.out


# --- reading an output checks it against its manifest (issue 30 item 8) ----------------


def _flipped(good: Path, tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A copy of `good` with one bit flipped inside `name`'s data pages (its footer intact)."""
    out = tmp_path / "out"
    shutil.copytree(good, out)
    path = out / name
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x01
    path.write_bytes(bytes(data))
    return out, path


def test_a_flipped_byte_in_a_table_is_exit_4_naming_it(
    good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's reproduction: 3 of 40 bit flips gave a different sum with exit 0."""
    out, path = _flipped(good, tmp_path, "leaderboard.parquet")
    for argv in (["show", str(out)], ["diff", str(good), str(out)]):
        assert main(argv) == 4
        err = capsys.readouterr().err
        assert re.fullmatch(
            rf"lbnorm: error: {re.escape(str(path))}: does not match the output's "
            r"manifest.json \(sha256 [0-9a-f]{16}, recorded [0-9a-f]{16}\): the file was "
            r"changed or damaged after lbnorm wrote it.\nHint: restore it from a copy, "
            r"or rerun `lbnorm run` to rewrite the output.\n",
            err,
        ), err


def test_a_table_rewritten_with_one_value_changed_is_exit_4(
    good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    shutil.copytree(good, out)
    path = out / "leaderboard.parquet"
    table = pq.read_table(path)
    average = table["average"].to_pylist()
    average[0] = (average[0] or 0.0) + 1.0
    changed = table.set_column(
        table.schema.get_field_index("average"), "average", pa.array(average)
    )
    pq.write_table(changed, path)  # a valid table, its schema and rows unchanged
    assert main(["show", str(out)]) == 4
    err = capsys.readouterr().err
    assert f"{path}: does not match the output's manifest.json (" in err
    assert "Hint: restore it from a copy" in err


def test_verify_hashes_a_large_table_and_its_size_is_always_checked(
    good: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from lbnorm.output import reader

    monkeypatch.setattr(reader, "HASH_ON_READ", 0)  # no table hashed unless --verify
    out, _ = _flipped(good, tmp_path, "benchmarks.parquet")
    assert main(["show", str(out)]) == 0  # size and footer fine, not hashed
    capsys.readouterr()
    assert main(["show", str(out), "--verify"]) == 4
    assert "benchmarks.parquet: does not match" in capsys.readouterr().err
    assert main(["query", str(out), "SELECT 1 AS x", "--verify"]) == 4
    assert "benchmarks.parquet: does not match" in capsys.readouterr().err
    table = pq.read_table(out / "leaderboard.parquet")
    pq.write_table(table, out / "leaderboard.parquet", compression="snappy")
    assert main(["show", str(out)]) == 4  # the same rows, another size
    assert "(size in bytes" in capsys.readouterr().err
