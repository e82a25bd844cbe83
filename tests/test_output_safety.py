"""What lbnorm may replace, and what it leaves beside and inside an output folder.

lbnorm replaces a folder only if it is empty, missing, or an lbnorm output
holding nothing its manifest does not list; it writes through a symbolic link,
leaves no lock or staging folder beside the output, and handles names up to the
file system's limit (issue 14, points 1, 2, 3 and 13; issue 13, the lock file).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm import OutputError, run
from lbnorm.cli import main
from lbnorm.core.errors import OptionsError
from lbnorm.core.manifest import manifest_problem
from lbnorm.output.transaction import STAGING_MARK, Transaction, write_file
from lbnorm.output.writer import OUTPUT_FILES, add_to

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
ONE = GOLDEN / "Amu__t1-3B.json"
TWO = GOLDEN / "AIDC-AI__Marco-o1.json"
#: Per-sample inputs of two models (Llama's and Yi's IFEval and MUSR murder mysteries).
SAMPLES = Path(__file__).parent / "fixtures" / "samples" / "meta-llama"
PAIRED_MODELS = Path(__file__).parent / "fixtures" / "paired" / "models"


def _tree(folder: Path) -> dict[str, str]:
    """Every entry under `folder` (links not followed), with each file's sha256."""
    entries = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            entries[name] = f"-> {path.readlink()}"
        elif path.is_file():
            entries[name] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            entries[name] = "<dir>"
    return entries


def _run(out: str | Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["run", str(ONE), "--out", str(out), "--quiet"])
    return code, capsys.readouterr().err


def _assert_one_line_and_hint(err: str) -> None:
    lines = err.rstrip("\n").split("\n")
    assert len(lines) == 2, err
    assert lines[0].startswith("lbnorm: error: ")
    assert re.fullmatch(r"Hint: \S.*\.", lines[1]), err
    assert "Traceback" not in err


# --- 1. a folder holding a manifest.json is not an output ---------------------------


def test_the_reported_web_app_folder_is_refused_and_kept(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The issue's reproduction: `cd proj && lbnorm run FILE --out .`."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "manifest.json").write_text('{"name":"app"}\n')
    (project / "notes.txt").write_text("x\n")
    (project / "src").mkdir()
    before = _tree(tmp_path)
    monkeypatch.chdir(project)
    code, err = _run(".", capsys)
    assert code == 6
    assert err == (
        f"lbnorm: error: {project}: not an lbnorm output (its manifest.json has no "
        '"tool": "lbnorm") and not empty: it holds manifest.json, notes.txt, src/; '
        "lbnorm replaces its own output folders whole and deletes nothing it did not "
        "write.\nHint: choose an empty or new --out folder.\n"
    )
    assert _tree(tmp_path) == before


@pytest.mark.parametrize(
    ("manifest", "problem"),
    [
        ("not json", "is not JSON"),
        ("[1, 2]", 'has no "tool": "lbnorm"'),
        ('{"tool": "lbnorm", "format": 2, "outputs": {}}', "newer lbnorm"),
        ('{"tool": "lbnorm", "format": "1", "outputs": {}}', 'unknown "format"'),
        ('{"tool": "lbnorm", "format": 1}', 'no "outputs"'),
        ("[" * 100_000, "is not JSON"),
    ],
)
def test_a_manifest_lbnorm_did_not_write_is_refused(
    manifest: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(manifest)
    before = _tree(tmp_path)
    code, err = _run(out, capsys)
    assert code == 6
    assert f"{out}: not an lbnorm output (its manifest.json " in err
    assert problem in err
    _assert_one_line_and_hint(err)
    assert _tree(tmp_path) == before


def test_an_output_holding_files_lbnorm_did_not_write_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _run(out, capsys)[0] == 0
    (out / "notes.txt").write_text("mine")
    (out / "plots").mkdir()
    (out / "plots" / "a.png").write_bytes(b"png")
    (out / ".hidden").write_text("mine too")
    before = _tree(tmp_path)
    code, err = _run(out, capsys)
    assert code == 6
    assert err == (
        f"lbnorm: error: {out}: an lbnorm output that also holds 3 file(s) lbnorm did "
        "not write: .hidden, notes.txt, plots/; lbnorm replaces its output folder whole "
        "and deletes nothing it did not write.\n"
        f"Hint: move those files out of {out}, or choose another --out.\n"
    )
    assert _tree(tmp_path) == before


def test_a_listed_name_that_is_a_folder_or_link_is_not_lbnorm_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert _run(out, capsys)[0] == 0
    precious = tmp_path / "precious.parquet"
    precious.write_bytes(b"someone's")
    (out / "leaderboard.parquet").unlink()
    (out / "leaderboard.parquet").symlink_to(precious)
    before = _tree(tmp_path)
    code, err = _run(out, capsys)
    assert code == 6
    assert "did not write: leaderboard.parquet;" in err
    assert _tree(tmp_path) == before


def test_empty_missing_and_older_outputs_are_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _run(empty, capsys)[0] == 0
    assert _run(tmp_path / "new" / "deeper", capsys)[0] == 0
    # an output written before format versions: the tool and the listing suffice
    manifest = json.loads((empty / "manifest.json").read_text())
    del manifest["format"]
    (empty / "manifest.json").write_text(json.dumps(manifest))
    assert _run(empty, capsys)[0] == 0
    assert json.loads((empty / "manifest.json").read_text())["format"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "new"]


def test_out_naming_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "scores.csv").write_text("mine")
    code, err = _run(tmp_path / "scores.csv", capsys)
    assert (code, err) == (
        6,
        f"lbnorm: error: {tmp_path / 'scores.csv'}: exists and is not a folder.\n"
        "Hint: choose another --out.\n",
    )
    assert (tmp_path / "scores.csv").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["scores.csv"]


def test_manifest_problem_names_what_is_wrong() -> None:
    assert manifest_problem({"tool": "lbnorm", "outputs": {}}) is None  # format 0
    assert manifest_problem({"tool": "lbnorm", "format": True, "outputs": {}}) == (
        'has an unknown "format" (True)'
    )
    assert manifest_problem(None) == 'has no "tool": "lbnorm"'


def add_tables(out: Path, tables: dict[str, pa.Table]) -> list[Path]:
    """What ``diff``/``impact``/``health --out`` do: the tables added in one transaction."""
    with Transaction(out, kind=None) as transaction:
        add_to(transaction, tables)
        transaction.commit()
    return [out / f"{name}.parquet" for name in tables]


def test_added_tables_are_listed_and_swapped_in_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run([ONE], out=out)
    before = _tree(out)
    written = add_tables(out, {"health": pa.table({"x": [1, 2]})})
    assert written == [out / "health.parquet"]
    manifest = json.loads((out / "manifest.json").read_text())
    listed = manifest["outputs"]["health.parquet"]
    assert (listed["rows"], listed["columns"]) == (2, 1)
    digest = hashlib.sha256((out / "health.parquet").read_bytes()).hexdigest()
    assert listed["sha256"] == digest
    after = _tree(out)
    assert {name: after[name] for name in OUTPUT_FILES} == {
        name: before[name] for name in OUTPUT_FILES
    }
    add_tables(out, {"health": pa.table({"x": [3]})})  # replaced, not appended
    assert pq.read_table(out / "health.parquet").to_pydict() == {"x": [3]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    run([ONE], out=out)  # a listed table is lbnorm's: the run replaces it
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*OUTPUT_FILES, "manifest.json"]
    )


def test_added_tables_refuse_an_output_holding_foreign_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run([ONE], out=out)
    (out / "notes.txt").write_text("mine")
    before = _tree(tmp_path)
    with pytest.raises(
        OutputError, match=r"did not write: notes.txt; .*\nHint: move those files"
    ):
        add_tables(out, {"health": pa.table({"x": [1]})})
    assert _tree(tmp_path) == before


def test_added_tables_may_not_take_a_runs_own_names(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run([ONE], out=out)
    before = _tree(tmp_path)
    with pytest.raises(
        OutputError,
        match=r"cannot add tables named \['leaderboard'\]: the run writes those\.\n"
        r"Hint: choose other names",
    ):
        add_tables(out, {"leaderboard": pa.table({"x": [1]})})
    assert _tree(tmp_path) == before


def test_added_tables_never_go_into_a_folder_holding_other_files(
    tmp_path: Path,
) -> None:
    """A folder with files lbnorm did not write is refused and left as it is."""
    folder = tmp_path / "diff"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"name": "app"}')  # not lbnorm's: kept
    before = _tree(folder)
    with pytest.raises(
        OutputError, match=r"not an lbnorm output .*\nHint: choose an empty"
    ):
        add_tables(folder, {"diff_models": pa.table({"x": [1]})})
    assert _tree(folder) == before


def test_files_that_appear_during_the_run_are_not_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is checked again just before the swap."""
    from lbnorm.output import writer

    out = tmp_path / "out"
    run([ONE], out=out)
    before = _tree(out)
    write_tables = writer._write_tables

    def write_and_meddle(*args: Any, **kwargs: Any) -> None:
        (out / "notes.txt").write_text("written while lbnorm ran")
        write_tables(*args, **kwargs)

    monkeypatch.setattr(writer, "_write_tables", write_and_meddle)
    with pytest.raises(OutputError, match=r"did not write: notes.txt; .*\nHint: "):
        run([ONE], out=out)
    assert _tree(out) == {**before, "notes.txt": _tree(out)["notes.txt"]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


# --- 2. --out through a symbolic link ----------------------------------------------


def test_out_link_is_written_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = tmp_path / "data" / "real"
    real.parent.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)  # dangling for now
    code, err = _run(link, capsys)
    assert code == 6
    assert err == (
        f"lbnorm: error: {link}: a symbolic link to {real}, which does not exist.\n"
        "Hint: create the folder it points to, or choose another --out.\n"
    )
    real.mkdir()
    for _ in range(2):  # a new output, then a replaced one
        assert _run(link, capsys) == (0, "")
        assert link.is_symlink()
        assert link.readlink() == real
        assert sorted(p.name for p in real.iterdir()) == sorted(
            [*OUTPUT_FILES, "manifest.json"]
        )
        assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "link"]
        assert sorted(p.name for p in real.parent.iterdir()) == ["real"]


def test_out_link_to_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file.txt").write_text("mine")
    (tmp_path / "link").symlink_to(tmp_path / "file.txt")
    before = _tree(tmp_path)
    code, err = _run(tmp_path / "link", capsys)
    assert code == 6
    assert "which is not a folder.\nHint: choose another --out." in err
    assert _tree(tmp_path) == before


def test_files_are_written_through_links_too(tmp_path: Path) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "report.json").symlink_to(tmp_path / "reports" / "today.json")
    write_file(tmp_path / "report.json", b"{}")
    assert (tmp_path / "report.json").is_symlink()
    assert (tmp_path / "reports" / "today.json").read_bytes() == b"{}"
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["today.json"]


# --- 4. nothing beside the output --------------------------------------------------


def test_dead_runs_leftovers_go_and_live_ones_stay(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run([ONE], out=out)
    dead = tmp_path / ".out.tmp-0123456789ab"
    dead.mkdir()
    (dead / STAGING_MARK).write_bytes(b"")  # written first into every staging folder
    (dead / "leaderboard.parquet").write_bytes(b"half")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("kept")
    link = tmp_path / ".out.tmp-ba5eba11cafe"  # a link of that name: not lbnorm's
    link.symlink_to(elsewhere)
    other = tmp_path / ".outer.tmp-0123456789ab"  # another output's staging
    other.mkdir()
    run([ONE], out=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".out.tmp-ba5eba11cafe",
        ".outer.tmp-0123456789ab",
        "elsewhere",
        "out",
    ]
    assert (elsewhere / "keep.txt").read_text() == "kept"


def test_runs_on_other_outputs_in_one_folder_do_not_refuse_each_other(
    tmp_path: Path,
) -> None:
    live = tmp_path / ".a.tmp-0123456789ab"  # a run writing ./a right now
    live.mkdir()
    descriptor = os.open(live, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        run([ONE], out=tmp_path / "b")
        run([ONE], out=tmp_path / "a.tmp-0123456789ab")  # a name like it
    finally:
        os.close(descriptor)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".a.tmp-0123456789ab",
        "a.tmp-0123456789ab",
        "b",
    ]


# --- 5. long names ------------------------------------------------------------------


def test_a_name_over_the_limit_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / ("a" * 256)
    code, err = _run(out, capsys)
    assert code == 6
    assert err == (
        f"lbnorm: error: {out}: the name {'a' * 24}... is 256 bytes long; the file "
        "system allows at most 255.\nHint: choose a shorter --out name.\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_name_near_the_limit_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "é" * 125  # 250 bytes
    out = tmp_path / name
    for _ in range(2):  # created, then replaced through a staging folder
        assert _run(out, capsys) == (0, "")
        assert [p.name for p in tmp_path.iterdir()] == [name]
    report = tmp_path / ("r" * 250)
    write_file(report, b"{}")
    write_file(report, b"[]")
    assert report.read_bytes() == b"[]"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, report.name])
    add_tables(out, {"t" * 200: pa.table({"x": [1]})})
    assert (out / f"{'t' * 200}.parquet").is_file()


def test_the_root_is_not_an_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run("/", capsys)
    assert code == 6
    assert err == (
        "lbnorm: error: /: the root folder cannot be an output.\n"
        "Hint: choose a folder below it as --out.\n"
    )


def test_an_interrupted_file_write_leaves_no_temporary(tmp_path: Path) -> None:
    """Interrupted while written, a file leaves nothing; a killed writer's temporary
    of lbnorm's own is removed by the next write, a user's file of such a name is not."""
    from lbnorm.output.run_report import is_run_report

    target = tmp_path / "report.json"

    def interrupted() -> Iterator[bytes]:
        yield b"{"
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_file(target, interrupted(), is_ours=is_run_report)
    assert list(tmp_path.iterdir()) == []
    dead = tmp_path / ".report.json.tmp-0123456789ab"  # a killed writer's
    dead.write_bytes(b'{\n  "report": "lbnorm-run", "format": 1')
    users = tmp_path / ".report.json.tmp-aaaaaaaaaaaa"  # a user's, by that name
    users.write_bytes(b"notes")
    write_file(target, b'{"report": "lbnorm-run"}', is_ours=is_run_report)
    assert sorted(p.name for p in tmp_path.iterdir()) == [users.name, "report.json"]
    assert users.read_bytes() == b"notes"


def test_a_dead_staging_folder_is_never_put_in_place(tmp_path: Path) -> None:
    """Only a folder set aside by a two-rename swap is restored, whatever the name."""
    out = tmp_path / "a.old-b"
    dead = tmp_path / ".a.old-b.tmp-0123456789ab"  # half written, its run killed
    dead.mkdir()
    (dead / STAGING_MARK).write_bytes(b"")
    (dead / "manifest.json").write_text("{}")
    run([ONE], out=out)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*OUTPUT_FILES, "manifest.json"]
    )
    assert [p.name for p in tmp_path.iterdir()] == ["a.old-b"]


def test_leftovers_that_are_not_lbnorm_s_are_left_alone(tmp_path: Path) -> None:
    """Issue 40, point 2: cleaning up and the swap repair go by lbnorm's mark, not by name."""
    out = tmp_path / "out"
    staging = tmp_path / ".out.tmp-0123456789ab"  # a user's folder of that name
    staging.mkdir()
    (staging / "notes.txt").write_text("mine")
    (tmp_path / ".out.tmp-aaaaaaaaaaaa").write_text("a user's file")
    aside = tmp_path / ".out.old-0123456789ab"  # and a user's folder, no output at out
    aside.mkdir()
    (aside / "draft.md").write_text("draft")
    before = _tree(tmp_path)
    run([ONE], out=out)
    assert {
        name: data
        for name, data in _tree(tmp_path).items()
        if name.split("/")[0] != "out"
    } == before
    dead = tmp_path / ".out.tmp-ba5eba11cafe"  # what a killed run left: marked
    dead.mkdir()
    (dead / STAGING_MARK).write_bytes(b"")
    (dead / "subtasks.parquet").write_bytes(b"half")
    swapped = tmp_path / ".out.tmp-0000000000ff"  # a previous output a swap set aside
    shutil.copytree(out, swapped)
    run([ONE], out=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [
            ".out.tmp-0123456789ab",
            ".out.tmp-aaaaaaaaaaaa",
            ".out.old-0123456789ab",
            "out",
        ]
    )


def test_a_previous_output_being_removed_beside_is_left_to_its_remover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run that swapped its output in removes the previous one outside the parent's lock.

    Another run claiming the same output then meets that folder (staging-named,
    no mark) while its files vanish; it must neither fail nor touch it.
    """
    out = tmp_path / "out"
    run([ONE], out=out)
    going = tmp_path / ".out.tmp-0123456789ab"  # the previous output, set aside
    shutil.copytree(out, going)
    real_lstat = os.lstat

    def vanishing(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if Path(path).parent == going:  # its files go as they are looked at
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        return real_lstat(path, *args, **kwargs)

    monkeypatch.setattr(os, "lstat", vanishing)
    run([ONE], out=out)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == [going.name, "out"]


# --- every command's --out, --html, --report, --markdown: one transaction -----------------

BATTLES = Path(__file__).parent / "fixtures" / "battles" / "battles.csv"


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    old, new = tmp_path / "old", tmp_path / "new"
    run([ONE], out=old)
    run([ONE, TWO], out=new)
    return old, new


def _folder_commands(old: Path, new: Path, out: Path) -> dict[str, list[str]]:
    """Each command that writes a folder, writing it to `out`."""
    return {
        "health": ["health", str(new), "--out", str(out)],
        "diff": ["diff", str(old), str(new), "--out", str(out), "--no-intervals"],
        "impact": [
            "impact",
            str(ONE),
            "--set-bound",
            "GPQA=0.3",
            "--out",
            str(out),
            "--no-intervals",
        ],
        "arena": ["arena", str(BATTLES), "--out", str(out), "--quiet"],
    }


#: Each folder command's table, as a user's file of the same name would be.
_TABLE = {
    "health": "health.parquet",
    "diff": "diff_scores.parquet",
    "impact": "diff_scores.parquet",
    "arena": "ratings.parquet",
}


@pytest.fixture(params=["health", "diff", "impact", "arena"])
def command(request: pytest.FixtureRequest) -> str:
    """Each command that writes a folder of its own."""
    return str(request.param)


def test_a_commands_out_refuses_a_users_file_and_replaces_its_own_output(
    two_runs: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    """The issue's reproduction: `echo "my data" > f/health.parquet; lbnorm health OUT --out f`
    overwrote the file. Refused now; into an empty folder, and again into its own output, written."""
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / _TABLE[command]).write_text("my data\n")
    before = _tree(folder)
    assert main(_folder_commands(*two_runs, folder)[command]) == 6
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the work: no report printed first
    err = captured.err.split("lbnorm: error: ", 1)[1]
    assert re.fullmatch(
        rf"{re.escape(str(folder))}: not an lbnorm output \(no manifest.json\) and not "
        rf"empty: it holds {_TABLE[command]}; .*\nHint: choose an empty or new --out folder.\n",
        err,
    ), err
    assert _tree(folder) == before
    (folder / _TABLE[command]).unlink()  # empty now: the command's output goes there
    argv = _folder_commands(*two_runs, folder)[command]
    assert main(argv) in (0, 3)  # health may find a failed check
    first = json.loads((folder / "manifest.json").read_text())
    assert first["tool"] == "lbnorm"
    assert first["environment"]["cwd"] == str(Path.cwd())
    assert set(first["outputs"]) == {
        p.name for p in folder.iterdir() if p.name != "manifest.json"
    }
    assert main(argv) in (0, 3)  # into its own output: replaced
    capsys.readouterr()
    second = json.loads((folder / "manifest.json").read_text())
    assert second["outputs"] == first["outputs"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    if command != "arena":
        assert first["kind"] == "analysis"
        assert first["sources"]["command"] == command


def test_analysis_tables_still_join_a_runs_output(
    two_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Into a run's output, health.parquet is added beside the run's tables."""
    _, new = two_runs
    assert main(["health", str(new), "--out", str(new)]) in (0, 3)
    manifest = json.loads((new / "manifest.json").read_text())
    assert manifest.get("kind", "leaderboard") == "leaderboard"
    assert "health.parquet" in manifest["outputs"]
    assert main(["run", str(ONE), str(TWO), "--out", str(new), "--quiet"]) == 0
    capsys.readouterr()


def _inside_commands(old: Path, new: Path, tmp_path: Path) -> dict[str, list[str]]:
    """Each command that writes a file, pointed inside an lbnorm output."""
    fresh = tmp_path / "fresh"  # not written yet: inside the command's own --out
    return {
        "run --report": [
            "run",
            str(ONE),
            "--out",
            str(fresh),
            "--report",
            str(fresh / "run.json"),
            "--quiet",
        ],
        "run --report (existing)": [
            "run",
            str(ONE),
            "--out",
            str(fresh),
            "--report",
            str(new / "run.json"),
            "--quiet",
        ],
        "report --html": ["report", str(new), "--html", str(new / "x.html")],
        "diff --markdown": [
            "diff",
            str(old),
            str(new),
            "--markdown",
            str(old / "x.md"),
            "--no-intervals",
        ],
        "diff --markdown (its --out)": [
            "diff",
            str(old),
            str(new),
            "--markdown",
            str(fresh / "x.md"),
            "--out",
            str(fresh),
            "--no-intervals",
        ],
        "impact --markdown": [
            "impact",
            str(ONE),
            "--set-bound",
            "GPQA=0.3",
            "--markdown",
            str(new / "x.md"),
            "--no-intervals",
        ],
    }


@pytest.mark.parametrize(
    "case",
    [
        "run --report",
        "run --report (existing)",
        "report --html",
        "diff --markdown",
        "diff --markdown (its --out)",
        "impact --markdown",
    ],
)
def test_a_file_pointed_inside_an_output_is_refused(
    two_runs: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    """As `query --output` and `--cache` are: the next run would refuse the folder."""
    before = _tree(tmp_path)
    assert main(_inside_commands(*two_runs, tmp_path)[case]) == 2
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"lbnorm: error: --(report|html|markdown) \S+: inside the lbnorm output folder "
        r"\S+; a file written there would change the output, and the next run to it "
        r"would refuse the folder.\nHint: write it elsewhere, e.g. beside the output folder.\n",
        err,
    ), err
    assert _tree(tmp_path) == before  # nothing written, nothing changed


def test_a_file_written_beside_an_output_is_written(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = two_runs
    markdown = tmp_path / "changes.md"
    assert (
        main(
            ["diff", str(old), str(new), "--markdown", str(markdown), "--no-intervals"]
        )
        == 0
    )
    assert markdown.read_text().startswith("#")
    capsys.readouterr()


def test_the_atomic_file_writer_refuses_a_place_inside_an_output(
    two_runs: tuple[Path, Path],
) -> None:
    """The last guard, for library callers: nothing lands inside an output."""
    _, new = two_runs
    before = _tree(new)
    with pytest.raises(
        OptionsError, match=r"inside the lbnorm output folder .*\nHint: "
    ):
        write_file(new / "notes.txt", b"x")
    assert _tree(new) == before


@pytest.mark.parametrize("command", ["diff", "health"])
def test_a_full_disk_leaves_a_commands_previous_output_unchanged(
    two_runs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    """The issue's diff on a full disk left 2 of 4 tables and said "unchanged"."""
    folder = tmp_path / "f"
    argv = _folder_commands(*two_runs, folder)[command]
    assert main(argv) in (0, 3)
    capsys.readouterr()
    before = _tree(folder)
    from lbnorm.output import tablefile

    write = tablefile.Hashed.write  # where every table's bytes go to the disk
    sinks: list[object] = []

    def fail_on_the_second(sink: Any, data: Any) -> int:
        sinks.extend([sink] if sink not in sinks else [])
        if len(sinks) == 2 or command == "health":  # half the bytes, then a full disk
            write(sink, memoryview(data).cast("B")[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return write(sink, data)

    monkeypatch.setattr(tablefile.Hashed, "write", fail_on_the_second)
    assert main(argv) == 6
    assert capsys.readouterr().err.endswith(
        f"lbnorm: error: {folder}: cannot write the output (No space left on device); "
        "the previous output is unchanged.\nHint: free disk space or write elsewhere.\n"
    )
    assert _tree(folder) == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _file_commands(old: Path, new: Path, target: Path) -> dict[str, list[str]]:
    """Each command that writes one file beside the outputs, writing it to `target`."""
    return {
        "run --report": [
            "run",
            str(ONE),
            "--out",
            str(target.parent / "o"),
            "--report",
            str(target),
            "--quiet",
        ],
        "report --html": ["report", str(new), "--html", str(target)],
        "diff --markdown": [
            "diff",
            str(old),
            str(new),
            "--markdown",
            str(target),
            "--no-intervals",
        ],
    }


@pytest.mark.parametrize(
    "case",
    [
        "run --report",
        pytest.param(
            "report --html", marks=pytest.mark.slow
        ),  # (the same check, longer)
        "diff --markdown",
    ],
)
def test_a_users_file_is_not_overwritten_by_a_report_and_lbnorms_own_is(
    two_runs: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    case: str,
) -> None:
    """A file of the user's at --report/--html/--markdown is refused (exit 6), untouched;
    the file an earlier command wrote there is replaced."""
    if case == "report --html":
        pytest.importorskip("matplotlib")
    target = tmp_path / "reports" / "mine.txt"
    target.parent.mkdir()
    target.write_text("my notes\n")
    argv = _file_commands(*two_runs, target)[case]
    assert main(argv) == 6
    option = case.split()[1]
    assert capsys.readouterr().err == (
        f"lbnorm: error: {option} {target}: exists and was not written by lbnorm; "
        "lbnorm replaces only its own files.\nHint: choose another file name, or "
        "move that file away first.\n"
    )
    assert target.read_text() == "my notes\n"
    assert not (target.parent / "o").exists()  # refused before any work
    target.unlink()
    assert main(argv) == 0  # written
    first = target.stat()
    assert main(argv) == 0  # its own: replaced (a new file, renamed over it)
    capsys.readouterr()
    assert target.stat().st_ino != first.st_ino
    left = {p.name for p in target.parent.iterdir()} - {"o"}  # run's own --out
    assert left == {"mine.txt"}  # no temporary left beside it


def test_a_folder_or_fifo_at_a_report_path_is_refused_without_waiting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target in (fifo, tmp_path):
        argv = ["run", str(ONE), "--out", str(tmp_path / "o"), "--report", str(target)]
        assert main([*argv, "--quiet"]) == 6
        assert "exists and is not a file lbnorm wrote" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_an_analysis_folder_is_named_when_a_leaderboard_is_expected(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "f"
    assert main(_folder_commands(*two_runs, folder)["diff"]) == 0
    capsys.readouterr()
    assert main(["show", str(folder)]) == 4
    assert capsys.readouterr().err == (
        f"lbnorm: error: {folder}: holds the tables of `lbnorm diff`, `impact` or "
        "`health`, not a leaderboard; this reads leaderboard outputs.\nHint: read "
        "those tables with pandas or DuckDB (docs/outputs.md).\n"
    )


def test_a_manifest_larger_than_lbnorm_reads_back_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 298 MB manifest made every later run to the --out fail: refused when written."""
    from lbnorm.output import transaction

    out = tmp_path / "out"
    monkeypatch.setattr(transaction, "MANIFEST_LIMIT", 100)  # any manifest "too large"
    before = _tree(tmp_path)
    code, err = _run(out, capsys)
    assert code == 6
    assert re.fullmatch(
        rf"lbnorm: error: {re.escape(str(out))}: its manifest.json would be \S+ MiB, "
        r"more than lbnorm reads back \(0 MiB\); the previous output is unchanged.\n"
        r"Hint: report this as a bug, with the number of input files.\n",
        err,
    ), err
    assert _tree(tmp_path) == before  # nothing written, no staging folder left


# --- one transaction, one swap, for every command -----------------------------------------


def _swaps_and_renames(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count the folder swaps and single-file renames lbnorm makes from here on."""
    from lbnorm.output import transaction

    counts = {"swaps": 0, "files": 0}
    swap_in, put = transaction._swap_in, transaction._Beside.put

    def counted_swap(staging: Path, target: Path) -> Path | None:
        counts["swaps"] += 1
        return swap_in(staging, target)

    def counted_put(beside: Any, **how: bool) -> None:
        counts["files"] += 1
        put(beside, **how)

    monkeypatch.setattr(transaction, "_swap_in", counted_swap)
    monkeypatch.setattr(transaction._Beside, "put", counted_put)
    return counts


def _writing_commands(old: Path, new: Path, tmp_path: Path) -> dict[str, list[str]]:
    folder, file = str(tmp_path / "w"), str(tmp_path / "w.file")
    return {
        "run": ["run", str(ONE), "--out", folder, "--quiet"],
        "run --health --intervals --report": [
            *["run", str(ONE), str(TWO), "--out", folder, "--quiet", "--health"],
            *["--intervals", "--report", file],
        ],
        "run --paired": [
            *["run", str(SAMPLES), str(PAIRED_MODELS), "--missing", "partial"],
            *["--paired", "--out", folder, "--quiet"],
        ],
        "arena": ["arena", str(BATTLES), "--out", folder, "--quiet"],
        "diff --out": ["diff", str(old), str(new), "--out", folder, "--no-intervals"],
        "impact --out": [
            *["impact", str(ONE), "--set-bound", "GPQA=0.3", "--out", folder],
            "--no-intervals",
        ],
        "health --out": ["health", str(new), "--out", folder],
        "health --out OUT": ["health", str(new), "--out", str(new)],
        "export": [
            *["export", str(new), "--format", "open-llm-leaderboard", "--out", file],
            *["--skip-incomplete", "--unknown-precision", "bfloat16"],
        ],
        "report --html": ["report", str(new), "--html", file],
        "diff --markdown": ["diff", str(old), str(new), "--markdown", file],
        "query --output": ["query", str(new), "SELECT 1 AS x", "--output", file],
    }


@pytest.mark.parametrize(
    "command", list(_writing_commands(Path(), Path(), Path())), ids=str
)
def test_every_command_swaps_in_once(
    command: str,
    two_runs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """One transaction per command: a nightly run adds its tables and report before
    its one swap (issue 38: it used to swap twice, unlocked in between)."""
    if command == "report --html":
        pytest.importorskip("matplotlib")
    if command == "query --output":
        pytest.importorskip("duckdb")
    argv = _writing_commands(*two_runs, tmp_path)[command]
    counts = _swaps_and_renames(monkeypatch)
    assert main(argv) in (0, 7), capsys.readouterr().err
    folder = command.split()[0] in {"run", "arena"} or command.endswith(
        ("--out", "OUT")
    )
    report = command.startswith("run --health")
    expected = {"swaps": int(folder), "files": int(not folder or report)}
    assert counts == expected
    if command == "run --paired":  # paired.parquet from the run's one commit
        names = json.loads((tmp_path / "w" / "manifest.json").read_text())["outputs"]
        assert "paired.parquet" in names
    if report:  # its tables and report, from the one commit
        names = json.loads((tmp_path / "w" / "manifest.json").read_text())["outputs"]
        assert {"health.parquet", "intervals.parquet"} <= set(names)
        assert json.loads((tmp_path / "w.file").read_text())["status"] != "failed"


# --- a hostile manifest: nothing outside the folder is opened (issue 40, point 1) ---------


class _OpenAudit:
    """Every open or read of a file in a folder, by any thread or library (inotify)."""

    def __init__(self, folder: Path) -> None:
        import ctypes

        self._libc = ctypes.CDLL(None, use_errno=True)
        self._descriptor = self._libc.inotify_init1(os.O_NONBLOCK)
        if self._descriptor < 0:
            pytest.skip("no inotify here: the audit cannot be made")
        in_access, in_open = 0x1, 0x20
        self._libc.inotify_add_watch(
            self._descriptor, os.fsencode(folder), in_access | in_open
        )

    def events(self) -> bytes:
        try:
            return os.read(self._descriptor, 65536)
        except BlockingIOError:
            return b""

    def close(self) -> None:
        os.close(self._descriptor)


def _reading_commands(good: Path, out: Path, tmp_path: Path) -> dict[str, list[str]]:
    return {
        "show": ["show", str(out)],
        "explain": ["explain", str(out), "Amu/t1-3B"],
        "export": [
            *["export", str(out), "--format", "open-llm-leaderboard"],
            *["--out", str(tmp_path / "e.parquet")],
        ],
        "report": ["report", str(out), "--html", str(tmp_path / "r.html")],
        "diff": ["diff", str(good), str(out)],
        "health": ["health", str(out)],
        "compare": ["compare", str(out), "Amu/t1-3B"],
        "query": ["query", str(out), "SELECT 1"],
    }


def _hostile(manifest: dict[str, Any], victim: Path) -> dict[str, dict[str, Any]]:
    """Manifests naming files outside their folder, by every route the issue found."""
    secret = {"rows": 1, "columns": 1, "bytes": 5, "sha256": "0" * 64}
    return {
        "relative": {
            **manifest,
            "outputs": {**manifest["outputs"], "../victim/secret.txt": secret},
        },
        "absolute": {
            **manifest,
            "outputs": {**manifest["outputs"], str(victim / "secret.txt"): secret},
        },
        "proc-mem": {
            **manifest,
            "outputs": {**manifest["outputs"], "/proc/self/mem": secret},
        },
        "inputs-fifo": {
            **manifest,
            "inputs": {"table": str(victim / "pipe"), "rows": 1},
        },
        "inputs-zero": {**manifest, "inputs": {"table": "/dev/zero", "rows": 1}},
    }


def test_a_manifest_naming_paths_is_damaged_and_nothing_outside_is_opened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import faulthandler

    good = tmp_path / "good"
    run([ONE], out=good)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_text("hello world")  # 11 bytes, never to be told
    os.mkfifo(victim / "pipe")
    manifest = json.loads((good / "manifest.json").read_text())
    audit = _OpenAudit(victim)
    faulthandler.dump_traceback_later(300, exit=True, file=2)  # a blocked open hangs
    try:
        for case, hostile in _hostile(manifest, victim).items():
            out = tmp_path / case
            shutil.copytree(good, out)
            (out / "manifest.json").write_text(json.dumps(hostile))
            for command, argv in _reading_commands(good, out, tmp_path).items():
                code = main(argv)
                err = capsys.readouterr().err
                assert code == 4, (case, command, err)
                assert "manifest.json is damaged: " in err, (case, command, err)
                assert "Traceback" not in err
                told = err.split("damaged")[1].replace(str(tmp_path), "<tmp>")
                # the secret's size (the temp path may hold "11")
                assert "11" not in told
                assert audit.events() == b"", (case, command)  # nothing outside opened
    finally:
        faulthandler.cancel_dump_traceback_later()
        audit.close()
    assert not (tmp_path / "e.parquet").exists()
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("kind", ["fifo", "link", "device"])
def test_a_listed_file_that_is_no_regular_file_is_refused_without_waiting(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inside the folder: a FIFO, a link to a file outside, a device; each refused unread."""
    import faulthandler

    out = tmp_path / "out"
    run([ONE], out=out)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_text("hello world")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["outputs"]["extra.parquet"] = {"rows": 1, "columns": 1}
    (out / "manifest.json").write_text(json.dumps(manifest))
    extra = out / "extra.parquet"
    if kind == "fifo":
        os.mkfifo(extra)
    elif kind == "link":
        extra.symlink_to(victim / "secret.txt")
    else:
        extra.symlink_to("/dev/zero")
    audit = _OpenAudit(victim)
    faulthandler.dump_traceback_later(120, exit=True, file=2)
    try:
        for command in ("show", "export", "query", "health"):
            argv = _reading_commands(out, out, tmp_path)[command]
            assert main(argv) == 4
            err = capsys.readouterr().err
            reason = "not a regular file" if kind == "fifo" else "a symbolic link"
            assert (
                f"{extra}: cannot read: {reason}.\nHint: the output is damaged" in err
            )
        assert audit.events() == b""
    finally:
        faulthandler.cancel_dump_traceback_later()
        audit.close()


def test_a_folder_replaced_while_it_is_opened_is_opened_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run swapping the folder in between two of a reader's opens: no false "damaged"."""
    from lbnorm.output import reader

    out = tmp_path / "out"
    run([ONE], out=out)
    open_plain = reader.open_plain  # type: ignore[attr-defined]
    swaps: list[str] = []

    def swap_first(folder: int, name: str) -> int:
        if name == "leaderboard.parquet" and not swaps:
            swaps.append(name)
            run([ONE, TWO], out=out)  # the previous folder is swapped out and removed
        return open_plain(folder, name)

    monkeypatch.setattr(reader, "open_plain", swap_first)
    output = reader.Output.open(out, "leaderboard")
    assert swaps == ["leaderboard.parquet"]
    assert output.frame("leaderboard")["model"].nunique() == 2  # the new one, whole


# --- messages that stay true (issue 40, point 5) ------------------------------------------


@pytest.mark.parametrize("moment", ["before", "after"])
@pytest.mark.parametrize(
    "command",
    [
        pytest.param("report --html", marks=pytest.mark.slow),
        "export",
    ],  # (export: quick)
)
def test_ctrl_c_around_a_files_rename_is_told_truly(
    command: str,
    moment: str,
    two_runs: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before the rename the file is left as it was; after it, the line says it is new."""
    import signal

    from lbnorm.output import transaction

    if command == "report --html":
        pytest.importorskip("matplotlib")
    argv = _writing_commands(*two_runs, tmp_path)[command]
    target = tmp_path / "w.file"
    assert main(argv) == 0
    capsys.readouterr()
    before = target.read_bytes()
    target.write_bytes(before)  # (a new ctime: the next write shows)
    put = transaction._Beside.put

    def interrupted_put(beside: Any, **how: bool) -> None:
        if moment == "before":
            signal.raise_signal(signal.SIGINT)
        put(beside, **how)
        if moment == "after":
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(transaction._Beside, "put", interrupted_put)
    assert main(argv) == 130
    err = capsys.readouterr().err
    if moment == "before":
        assert err == "lbnorm: interrupted; the previous output is unchanged.\n"
        assert target.read_bytes() == before
    else:
        assert err == f"lbnorm: interrupted; the new output is in place in {target}.\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old", "w.file"]


def test_ctrl_c_in_a_query_says_nothing_of_outputs(
    two_runs: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import signal

    from lbnorm.faces import query

    pytest.importorskip("duckdb")

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        signal.raise_signal(signal.SIGINT)
        return run_query(*args, **kwargs)

    run_query = query.run_query
    monkeypatch.setattr(query, "run_query", interrupted)
    assert main(["query", str(two_runs[1]), "SELECT 1"]) == 130
    assert capsys.readouterr().err == "lbnorm: interrupted.\n"


def test_a_report_that_cannot_be_written_stops_the_run_before_it_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 40, point 5: a read-only report folder said "unchanged" after the swap."""
    reports = tmp_path / "reports"
    reports.mkdir()
    reports.chmod(0o555)
    try:
        if os.access(reports, os.W_OK):
            pytest.skip("running with permission to write anywhere")
        code = main(
            [
                *["run", str(ONE), "--out", str(tmp_path / "out"), "--quiet"],
                *["--report", str(reports / "r.json")],
            ]
        )
    finally:
        reports.chmod(0o755)
    assert code == 6
    err = capsys.readouterr().err
    assert "is missing or read-only; nothing was run.\nHint: " in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]


def test_a_report_that_fails_after_the_swap_says_what_is_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lbnorm.output import transaction

    def full_disk(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out, report = tmp_path / "out", tmp_path / "r.json"
    monkeypatch.setattr(transaction._Beside, "put", full_disk)
    argv = ["run", str(ONE), "--out", str(out), "--quiet", "--report", str(report)]
    assert main(argv) == 6
    err = capsys.readouterr().err
    assert err.startswith(f"lbnorm: error: {report}: cannot write the file (No space")
    assert f"; the new output is in place in {out}.\nHint: " in err
    assert (out / "manifest.json").is_file()
