"""Open LLM Leaderboard v1 trees and lighteval results files, read as the leaderboard read them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from lbnorm import InputError, load_suite, run
from lbnorm.cli import main
from lbnorm.core.options import RunOptions
from lbnorm.readers import input_reruns, read_inputs
from lbnorm.readers.harness import parse_results_file, subtask_columns

V1 = load_suite("openllm-v1")
LLAMA = "meta-llama/Llama-2-7b-hf"
LLAMA_SHA = "6fdf2e60f86ff2481f2241aaee459f85b5b0bbb9"
AUG, SEPT, DEC = (
    "results_2023-08-19T16-35-46.942696.json",
    "results_2023-09-15T09-53-02.418861.json",
    "results_2023-12-02T13-00-54.924067.json",
)


@pytest.fixture(scope="module")
def v1_tree(fixtures: Path) -> Path:
    return fixtures / "openllm_v1" / "tree"


def _pairs(suite_name: str = "openllm-v1") -> list[tuple[str, str]]:
    columns = subtask_columns(load_suite(suite_name))
    return list(zip(columns["task"], columns["metric"], strict=True))


def test_each_task_comes_from_the_newest_file_that_has_it(v1_tree: Path) -> None:
    result = run([v1_tree], suite=V1)
    board = result.leaderboard.set_index("model")
    llama = board.loc[LLAMA].to_dict()
    assert bool(llama["is_complete"])
    assert llama["n_benchmarks"] == 6
    # ARC from August, Winogrande from September, GSM8K from the December re-run
    assert llama["ARC"] == pytest.approx(622 / 1172 * 100, abs=1e-12)
    assert llama["Winogrande"] == pytest.approx(938 / 1267 * 100, abs=1e-12)
    assert llama["GSM8K"] == pytest.approx(191 / 1319 * 100, abs=1e-12)
    assert f"{llama['GSM8K']:.2f}" == "14.48"  # as the v1 leaderboard showed it
    assert llama["TruthfulQA"] == pytest.approx(38.75969646393069, abs=1e-12)
    assert bool(board.loc["tiiuae/falcon-7b", "is_complete"])
    sources = result.subtasks[result.subtasks["model"] == LLAMA].set_index("subtask")
    assert Path(str(sources.loc["gsm8k", "source"])).name == DEC
    assert Path(str(sources.loc["winogrande", "source"])).name == SEPT
    assert Path(str(sources.loc["abstract_algebra", "source"])).name == AUG


def test_the_newest_file_alone_holds_only_gsm8k(v1_tree: Path) -> None:
    """Why newest-file-per-variant was wrong: the December file has one task."""
    result = run(
        [v1_tree / "meta-llama" / "Llama-2-7b-hf" / DEC],
        suite=V1,
        options=RunOptions(missing="partial"),
    )
    (row,) = result.leaderboard.to_dict("records")
    assert int(row["n_benchmarks"]) == 1
    assert row["GSM8K"] == pytest.approx(191 / 1319 * 100, abs=1e-12)


def test_variant_keys_come_from_config_general_and_old_config(v1_tree: Path) -> None:
    folder = v1_tree / "meta-llama" / "Llama-2-7b-hf"
    for name in (AUG, DEC):  # "config" (2023-08) and "config_general" (later)
        parsed = parse_results_file(
            folder / name, (folder / name).read_bytes(), _pairs()
        )
        assert (parsed.model, parsed.precision, parsed.revision) == (
            LLAMA,
            "float16",
            LLAMA_SHA,
        )
        assert parsed.chat_template is False
    board = run([v1_tree], suite=V1).leaderboard.set_index("model")
    assert board.loc[LLAMA, "precision"] == "float16"
    assert board.loc[LLAMA, "revision"] == LLAMA_SHA
    assert board.loc["tiiuae/falcon-7b", "precision"] == "bfloat16"


def test_the_catalog_lists_what_each_file_gave(v1_tree: Path) -> None:
    read = read_inputs([v1_tree], suite=V1, options=RunOptions())
    catalog = {Path(row["path"]).name: row for row in read.catalog.to_pylist()}
    assert catalog[DEC]["tasks"] == ["harness|gsm8k|5"]
    assert catalog[DEC]["rows"] == 1
    assert catalog[SEPT]["tasks"] == ["harness|winogrande|5"]  # its GSM8K lost
    assert catalog[SEPT]["n_ignored"] == 2  # harness|drop|3 and all
    aug_tasks = catalog[AUG]["tasks"]
    assert aug_tasks[0] == "harness|arc:challenge|25"
    assert len(aug_tasks) == 2 + 57 + 1
    assert aug_tasks[-1] == "harness|truthfulqa:mc|0"
    assert all(row["superseded_by"] is None for row in catalog.values())
    assert {row["format"] for row in catalog.values()} == {"lm-eval-harness"}
    assert read.num_rows == 62 + 62


def test_files_that_disagree_on_a_score_are_one_rerun_record(v1_tree: Path) -> None:
    read = read_inputs([v1_tree], suite=V1, options=RunOptions())
    assert read.warnings == ()
    folder = v1_tree / "meta-llama" / "Llama-2-7b-hf"
    (rerun,) = read.reruns
    assert rerun == {
        "model": LLAMA,
        "precision": "float16",
        "revision": LLAMA_SHA,
        "chat_template": False,
        "files": [str(path) for path in sorted(folder.glob("results_*.json"))],
        "superseded": [],
        "differences": [
            {
                "benchmark": "GSM8K",
                "subtask": "gsm8k",
                "subtasks": 1,
                "older": str(folder / SEPT),
                "newer": str(folder / DEC),
                "older_score": 100 / 1319,
                "newer_score": 191 / 1319,
            }
        ],
    }
    assert input_reruns(read.catalog) == [rerun]


def test_the_summary_gives_a_rerun_variant_one_line(
    v1_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", str(v1_tree), "--suite", "openllm-v1", "--top", "0"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].endswith(
        "1 variant(s) re-run, 5 results entries not in the suite"
    )
    assert printed[2] == (
        f"re-run     {LLAMA} (float16): 3 files, newest {DEC}; 1 older score differs "
        f"(1 benchmark), e.g. GSM8K gsm8k 0.076 in {SEPT}, 0.145 in the newest"
    )
    assert printed[3] == (
        "unused     results entries no subtask of the suite takes (files holding each): "
        "all (4), harness|drop|3 (1)"
    )


def test_a_file_whose_every_score_is_newer_elsewhere_is_superseded(
    v1_tree: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(v1_tree, tree)
    folder = tree / "meta-llama" / "Llama-2-7b-hf"
    shutil.copy(folder / DEC, folder / "results_2023-11-01T00-00-00.000000.json")
    read = read_inputs([tree], suite=V1, options=RunOptions())
    catalog = {Path(row["path"]).name: row for row in read.catalog.to_pylist()}
    older = catalog["results_2023-11-01T00-00-00.000000.json"]
    assert older["rows"] == 0
    assert older["tasks"] == []
    assert older["superseded_by"] == str(folder / DEC)
    (rerun,) = read.reruns  # one line for the variant: the file superseded, ...
    assert rerun["superseded"] == [str(older["path"])]
    # ... and only September's GSM8K differs: equal scores are no disagreement
    assert [difference["older"] for difference in rerun["differences"]] == [
        str(folder / SEPT)
    ]


def test_files_with_one_run_time_and_different_scores_are_an_error(
    v1_tree: Path, tmp_path: Path
) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(v1_tree, tree)
    copy = tree / "backup" / "meta-llama" / "Llama-2-7b-hf" / DEC
    copy.parent.mkdir(parents=True)
    document = json.loads((tree / "meta-llama" / "Llama-2-7b-hf" / DEC).read_text())
    document["results"]["harness|gsm8k|5"]["acc"] = 0.5
    copy.write_text(json.dumps(document))
    with pytest.raises(
        InputError,
        match=r"backup/meta-llama/Llama-2-7b-hf/results_2023-12-02T13-00-54\.924067\.json and \S*tree/meta-llama/Llama-2-7b-hf/results_2023-12-02T13-00-54\.924067\.json: two results files for the same model variant .* hold different scores.*\nHint: remove the wrong file",
    ):
        read_inputs([tree], suite=V1, options=RunOptions())


LIGHTEVAL_SUITE = (
    Path(__file__).parent / "fixtures" / "openllm_v1" / "lighteval-suite.toml"
).read_text()


def test_lighteval_results_files_are_read(fixtures: Path, tmp_path: Path) -> None:
    suite_path = tmp_path / "lighteval.toml"
    suite_path.write_text(LIGHTEVAL_SUITE)
    path = next((fixtures / "openllm_v1" / "lighteval").rglob("results_*.json"))
    document = json.loads(path.read_text())
    assert document["versions"] == {}
    assert document["config_general"]["job_id"] == "0"
    assert set(document) >= {
        "config_general",
        "results",
        "versions",
        "config_tasks",
        "summary_tasks",
        "summary_general",
    }
    result = run([fixtures / "openllm_v1" / "lighteval"], suite=load_suite(suite_path))
    (row,) = result.leaderboard.to_dict("records")
    assert (row["model"], row["precision"], row["revision"]) == (
        LLAMA,
        "bfloat16",
        LLAMA_SHA,
    )
    assert row["ARC"] == pytest.approx(622 / 1172 * 100, abs=1e-12)
    assert row["GSM8K"] == pytest.approx(191 / 1319 * 100, abs=1e-12)
    stderr = result.subtasks.set_index("subtask").loc["gsm8k", "stderr"]
    assert stderr == pytest.approx(0.009693234799052708)


def test_a_renamed_lighteval_file_in_a_folder_is_read(
    fixtures: Path, tmp_path: Path
) -> None:
    """Found by its layout (first key config_general), not by a results_ name."""
    suite_path = tmp_path / "lighteval.toml"
    suite_path.write_text(LIGHTEVAL_SUITE)
    source = next((fixtures / "openllm_v1" / "lighteval").rglob("results_*.json"))
    folder = tmp_path / "tree" / "org" / "model"
    folder.mkdir(parents=True)
    shutil.copy(source, folder / "lighteval_output.json")
    (folder / "notes.json").write_text('{"note": "not results"}')
    read = read_inputs(
        [tmp_path / "tree"], suite=load_suite(suite_path), options=RunOptions()
    )
    catalog = {Path(row["path"]).name: row for row in read.catalog.to_pylist()}
    assert catalog["lighteval_output.json"]["format"] == "lm-eval-harness"
    assert catalog["lighteval_output.json"]["rows"] == 2
    assert catalog["lighteval_output.json"]["ignored"] == ["all"]
    assert catalog["notes.json"]["format"] == "skipped"
    assert catalog["notes.json"]["reason"].startswith(
        "a .json file that is not a results file"
    )
    assert read.warnings == (
        "skipped 1 file(s) found but not read (the input catalog lists each with "
        f"its reason): {folder / 'notes.json'}: a .json file that is not a results "
        "file",
    )
    result = run([tmp_path / "tree"], suite=load_suite(suite_path))
    assert result.leaderboard["GSM8K"].item() == pytest.approx(191 / 1319 * 100)


def test_no_scores_names_the_entries_the_file_holds_and_their_metrics(
    fixtures: Path, tmp_path: Path
) -> None:
    """A custom suite that guessed the task and metric: the message shows the file's."""
    suite_path = tmp_path / "guess.toml"
    suite_path.write_text(
        LIGHTEVAL_SUITE.replace('metric = "qem"', 'metric = "acc"').replace(
            'task = "leaderboard|arc:challenge|25"', 'task = "arc:challenge"'
        )
    )
    source = next((fixtures / "openllm_v1" / "lighteval").rglob("results_*.json"))
    with pytest.raises(
        InputError,
        match=(
            r"no scores for suite 'lighteval-leaderboard' in these 1 file\(s\); the file "
            r"holds results entries 'all', 'leaderboard\|arc:challenge\|25', "
            r"'leaderboard\|gsm8k\|5 \(holds qem, qem_stderr; the suite reads acc\)'\.\n"
            r"Hint: a suite subtask reads results\[task\]\[metric\]"
        ),
    ):
        run([source], suite=load_suite(suite_path))


def test_lighteval_model_config_name_and_chat_template(tmp_path: Path) -> None:
    """Newer lighteval keeps the name in config_general.model_config."""
    document = {
        "config_general": {
            "job_id": "0",
            "model_config": {"model_name": "org/model", "use_chat_template": True},
            "model_dtype": None,
        },
        "results": {"leaderboard|gsm8k|5": {"qem": 0.25}, "all": {"qem": 0.25}},
        "versions": {},
    }
    path = tmp_path / "results_2025-01-01T00-00-00.000000.json"
    path.write_text(json.dumps(document))
    parsed = parse_results_file(
        path, path.read_bytes(), [("leaderboard|gsm8k|5", "qem")]
    )
    assert (parsed.model, parsed.precision, parsed.chat_template) == (
        "org/model",
        "",
        True,
    )
    assert parsed.rows["raw_score"] == [0.25]
    assert parsed.n_ignored == 1


def test_the_parse_cache_reads_a_v1_tree_as_a_plain_run(
    v1_tree: Path, tmp_path: Path
) -> None:
    plain = run([v1_tree], suite=V1)
    for attempt in ("parsed", "cached"):
        cached = run(
            [v1_tree], suite=V1, options=RunOptions(cache=str(tmp_path / "cache"))
        )
        pd.testing.assert_frame_equal(cached.leaderboard, plain.leaderboard)
        pd.testing.assert_frame_equal(cached.subtasks, plain.subtasks)
        assert set(cached.files["cache"]) == {attempt}
        rows = cached.files.set_index(cached.files["path"].map(lambda p: Path(p).name))
        assert rows.loc[DEC, "tasks"] == "harness|gsm8k|5"
        assert rows.loc[SEPT, "rows"] == 1
