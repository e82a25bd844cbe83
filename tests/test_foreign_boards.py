"""Other leaderboards recomputed from their own public raw data, exactly as published.

The data is read in place from ``shared/foreign`` (its SOURCES.md says where
each file comes from), found beside a parent folder of this file or named by
``LBNORM_FOREIGN``; without it these tests skip. Nothing of it is copied into the
repository: each test builds its long score table in ``tmp_path``, runs
``lbnorm run`` with the built-in suite and ``lbnorm export --format table``, and
compares the published table cell by cell.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from lbnorm.cli import main


def _foreign() -> Path | None:
    if named := os.environ.get("LBNORM_FOREIGN"):
        return Path(named)
    for parent in Path(__file__).resolve().parents:
        if (parent / "shared" / "foreign" / "SOURCES.md").is_file():
            return parent / "shared" / "foreign"
    return None


FOREIGN = _foreign()
needs_data = pytest.mark.skipif(FOREIGN is None, reason="shared/foreign is absent")

#: Per MTEB board: published non-blank averages, blank cells, complete rows.
MTEB_COUNTS = {
    "en": (2182, 906, 212),
    "zh": (607, 1850, 74),
    "fr": (710, 250, 63),
    "pl": (256, 314, 28),
    "ru": (436, 236, 43),
}


def _mteb_table(board: str, folder: Path) -> Path:
    """The long score table: model, benchmark = category, subtask = task, the 0-100 score."""
    assert FOREIGN is not None
    path = folder / f"mteb_{board}.csv"
    with (
        (FOREIGN / f"mteb_{board}_tasks.csv").open(newline="") as source,
        path.open("w", newline="") as target,
    ):
        writer = csv.writer(target)
        writer.writerow(["model", "benchmark", "subtask", "raw_score"])
        for row in csv.DictReader(source):
            writer.writerow([row["model"], row["category"], row["task"], row["score"]])
    return path


def _rows(path: Path) -> dict[str, dict[str, str]]:
    """A CSV's rows by model, every cell as written (a blank is '')."""
    with path.open(newline="", encoding="utf-8") as handle:
        return {row["model"]: row for row in csv.DictReader(handle)}


def _run_and_export(
    table: Path, suite: str, tmp_path: Path
) -> tuple[dict[str, dict[str, str]], dict[str, float]]:
    """The exported table's rows by model, and each model's unrounded average."""
    out, presented = tmp_path / "out", tmp_path / "board.csv"
    assert (
        main(["run", str(table), "--suite", suite, "--out", str(out), "--quiet"]) == 0
    )
    assert main(["export", str(out), "--format", "table", "--out", str(presented)]) == 0
    board = pd.read_parquet(out / "leaderboard.parquet", columns=["model", "average"])
    average = dict(
        zip(board["model"].astype(str), board["average"].astype(float), strict=True)
    )
    return _rows(presented), average


def _check_mteb(
    board: str, tmp_path: Path, suite: str | None = None
) -> tuple[int, int, int, int]:
    """Equal averages, blank blanks, ranks inside their tie groups; and cells that differ."""
    assert FOREIGN is not None
    ours, average = _run_and_export(
        _mteb_table(board, tmp_path), suite or f"mteb-legacy-{board}", tmp_path
    )
    published = _rows(FOREIGN / f"mteb_{board}_overall.csv")
    columns = [c for c in next(iter(published.values())) if "Average" in c]
    assert list(next(iter(ours.values()))) == ["model", "Rank", *columns]  # in order
    equal = blank = differ = 0
    for model, row in published.items():
        for column in columns:
            mine = ours[model][column] if model in ours else ""
            if row[column] == "":
                blank += mine == ""
                differ += mine != ""
            elif mine != "" and abs(float(mine) - float(row[column])) <= 1e-9:
                equal += 1
            else:
                differ += 1
    # Rank: positional by the unrounded average; any order inside an exact tie
    ranks = 0
    for model, row in published.items():
        if row[columns[0]] == "":
            continue
        tied = [m for m, value in average.items() if value == average[model]]
        positions = sorted(int(ours[m]["Rank"]) for m in tied)
        ranks += positions[0] <= int(row["Rank"]) <= positions[-1]
    return equal, blank, ranks, differ


@needs_data
@pytest.mark.parametrize(
    "board",
    [
        "ru",  # the quick one; the others take a second or more each
        *(
            pytest.param(board, marks=pytest.mark.slow)
            for board in ("pl", "fr", "zh", "en")
        ),
    ],
)
def test_mteb_legacy_board_as_published(board: str, tmp_path: Path) -> None:
    equal, blank, ranks, differ = _check_mteb(board, tmp_path)
    assert (equal, blank, ranks, differ) == (*MTEB_COUNTS[board], 0)


@needs_data
def test_mteb_needs_the_publishers_summation(tmp_path: Path) -> None:
    """Negative control: exact (order-free) sums miss published digits at x.xx5 ties."""
    from lbnorm.suites import load_suite

    text = load_suite("mteb-legacy-pl").text.replace(
        'summation = "left-to-right"', 'summation = "exact"'
    )
    suite = tmp_path / "pl-exact.toml"
    suite.write_text(text.replace('name = "mteb-legacy-pl"', 'name = "pl-exact"'))
    *_, differ = _check_mteb("pl", tmp_path, suite=str(suite))
    assert differ >= 1


@needs_data
def test_mteb_boards_are_the_published_task_lists() -> None:
    """The built-in suites' benchmarks and subtasks are the config's, in its order."""
    from lbnorm.suites import load_suite

    assert FOREIGN is not None
    boards = json.loads((FOREIGN / "mteb_boards.json").read_text())
    for board, categories in boards.items():
        suite = load_suite(f"mteb-legacy-{board}")
        listed = {b.name: [s.name for s in b.subtasks] for b in suite.benchmarks}
        assert listed == categories


@needs_data
def test_evalperf_as_published(tmp_path: Path) -> None:
    assert FOREIGN is not None
    table = tmp_path / "evalperf.csv"
    with (
        (FOREIGN / "evalperf_tasks.csv").open(newline="") as source,
        table.open("w", newline="") as target,
    ):
        writer = csv.writer(target)
        writer.writerow(["model", "benchmark", "subtask", "raw_score"])
        for row in csv.DictReader(source):
            for benchmark in ("dps", "dps_norm", "pass@1"):
                if row[benchmark] != "":  # a null left out
                    writer.writerow(
                        [row["model"], benchmark, row["task"], row[benchmark]]
                    )
    ours, _ = _run_and_export(table, "evalperf", tmp_path)
    published = _rows(FOREIGN / "evalperf_published.csv")
    assert sorted(ours) == sorted(published)  # all 34 models
    columns = ["dps", "dps_norm", "pass@1", "model_win_rate", "task_win_rate"]
    equal = sum(
        abs(float(ours[model][c]) - float(row[c])) <= 1e-9
        for model, row in published.items()
        for c in columns
    )
    assert equal == 170
