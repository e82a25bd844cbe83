"""What ``lbnorm --help``, ``lbnorm run --help`` and ``lbnorm --version`` claim, checked.

Each claim the help makes about a default or an engine is run and compared with what a
run records and writes.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import fields
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import lbnorm
from lbnorm.cli import build_parser, main
from lbnorm.core.errors import OptionsError
from lbnorm.core.options import RunOptions
from lbnorm.core.version import lbnorm_commit, lbnorm_version

REPO = Path(__file__).parent.parent
SEEDS = REPO / "tests" / "fixtures" / "tables" / "seed_examples.csv"


@pytest.fixture(autouse=True)
def _wide_help(monkeypatch: pytest.MonkeyPatch) -> None:
    """Help on one line per option: argparse wraps at hyphens (``--extra- columns``)."""
    monkeypatch.setenv("COLUMNS", "10000")


def _run_parser() -> argparse.ArgumentParser:
    commands = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    parser: argparse.ArgumentParser = commands.choices["run"]
    return parser


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main([*argv, "--help"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_run_defaults_are_the_options_defaults() -> None:
    """Every ``run`` option that is a RunOptions field defaults to RunOptions' value."""
    defaults = RunOptions()
    names = {field.name for field in fields(RunOptions)}
    checked = []
    for action in _run_parser()._actions:
        if action.dest in names:
            given = action.default
            expected = getattr(defaults, action.dest)
            if isinstance(expected, tuple):
                given = tuple(given)
            assert given == expected, action.dest
            checked.append(action.dest)
    assert {"engine", "workers", "sum_memory", "missing", "subtasks"} <= set(checked)


def test_help_prints_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "run")
    defaults = RunOptions()
    assert f"(default: {defaults.engine})" in text
    assert f"(default: {defaults.sum_memory} GiB)" in text
    assert f"(default: {defaults.workers};" in text
    assert f"(default: {defaults.missing})" in text
    assert "implies --no-subtasks" not in text


def test_auto_is_stream_and_stream_writes_the_subtask_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The help: ``auto: stream, or memory with --extra-columns keep``; the stream
    engine writes subtasks.parquet in input order."""
    text = _help(capsys, "run")
    assert "auto: stream, or memory with --extra-columns keep" in text
    assert "subtasks.parquet written as they come (in input order)" in text
    for engine in ("auto", "stream"):
        out = tmp_path / engine
        assert (
            main(["run", str(SEEDS), "--out", str(out), "--quiet", "--engine", engine])
            == 0
        )
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["options"]["engine"] == "stream"
        assert (out / "subtasks.parquet").is_file()
    plain = lbnorm.run([SEEDS], options=RunOptions(extra_columns="keep"))
    assert plain.options.engine == "memory"


def test_memory_sorts_the_subtask_table_by_benchmark(tmp_path: Path) -> None:
    out = tmp_path / "memory"
    assert (
        main(["run", str(SEEDS), "--out", str(out), "--quiet", "--engine", "memory"])
        == 0
    )
    benchmarks = pq.read_table(out / "subtasks.parquet").column("benchmark").to_pylist()
    assert benchmarks == sorted(benchmarks)


def test_spill_bytes_per_row_agree_with_the_engine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The help's bytes per spilled row are the spill module's own figure."""
    text = _help(capsys, "run")
    found = re.search(r"TMPDIR; (\d+-\d+) bytes per input row", text)
    assert found is not None
    spill = (REPO / "src" / "lbnorm" / "engines" / "spill.py").read_text()
    assert f"{found.group(1)} bytes per input row" in " ".join(spill.split())


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed.startswith(f"lbnorm {lbnorm_version()}")
    assert lbnorm.__version__ == lbnorm_version()
    commit = lbnorm_commit()
    if (REPO / ".git").exists():  # a checkout: the commit is HEAD's
        assert commit is not None
        assert re.fullmatch(r"[0-9a-f]{40}", commit)
        assert f"(git {commit[:12]})" in printed
    else:
        assert commit is None
        assert printed == f"lbnorm {lbnorm_version()}"


def test_commit_is_read_from_a_worktree_and_packed_refs(tmp_path: Path) -> None:
    """``.git`` as a folder with a packed branch, and as a worktree's ``.git`` file."""
    from lbnorm.core.version import _head_commit

    commit = "0123456789abcdef0123456789abcdef01234567"
    main_git = tmp_path / "repo" / ".git"
    main_git.mkdir(parents=True)
    (main_git / "HEAD").write_text("ref: refs/heads/main\n")
    (main_git / "packed-refs").write_text(f"# pack-refs\n{commit} refs/heads/main\n")
    assert _head_commit(main_git) == commit
    other = "fedcba9876543210fedcba9876543210fedcba98"
    worktree_git = main_git / "worktrees" / "wt"
    (worktree_git / "refs" / "heads").mkdir(parents=True)
    (worktree_git / "HEAD").write_text("ref: refs/heads/feature\n")
    (worktree_git / "commondir").write_text("../..\n")
    (main_git / "refs" / "heads").mkdir(parents=True)
    (main_git / "refs" / "heads" / "feature").write_text(other + "\n")
    checkout = tmp_path / "wt"
    checkout.mkdir()
    (checkout / ".git").write_text(f"gitdir: {worktree_git}\n")
    assert _head_commit(checkout / ".git") == other
    (worktree_git / "HEAD").write_text(commit + "\n")  # detached
    assert _head_commit(checkout / ".git") == commit
    assert _head_commit(tmp_path / "nowhere" / ".git") is None


def test_new_options_are_checked_and_recorded_only_when_set() -> None:
    """--failures and --scheduler-timeout: a clear refusal, and manifests unchanged without."""
    with pytest.raises(
        OptionsError, match=r"has neither\.\nHint: name it failures\.csv"
    ):
        RunOptions(failures="failures.txt")
    with pytest.raises(
        OptionsError, match=r"without --scheduler\.\nHint: e\.g\. --scheduler tcp://"
    ):
        RunOptions(engine="dask", scheduler_timeout=5)
    with pytest.raises(OptionsError, match=r"got 0\.\nHint"):
        RunOptions(engine="dask", scheduler="tcp://h:8786", scheduler_timeout=0)
    assert {"failures", "scheduler_timeout"}.isdisjoint(RunOptions().to_manifest())
    given = RunOptions(
        engine="dask",
        scheduler="tcp://h:8786",
        scheduler_timeout=5,
        failures="f.parquet",
    ).to_manifest()
    assert (given["failures"], given["scheduler_timeout"]) == ("f.parquet", 5)
