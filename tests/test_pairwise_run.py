"""A suite's pairwise (bradley-terry) benchmark in ``lbnorm run``: battles beside results files."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import re
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy.optimize import minimize

from lbnorm import SuiteError, load_suite, run
from lbnorm.cli import main
from lbnorm.core.options import RunOptions
from lbnorm.output.reader import Output
from lbnorm.ratings.battle_files import is_battles_file
from lbnorm.readers import input_warnings
from lbnorm.suites import parse_suite

FIXTURES = Path(__file__).parent / "fixtures"
HERE = FIXTURES / "arena_leaderboard"
SUITE = HERE / "suite.toml"
BATTLES = HERE / "battles.csv"
MODEL_MAP = HERE / "model_map.csv"
RESULTS = sorted((FIXTURES / "golden").glob("*.json"))
TREE = FIXTURES / "full_structure"  # two of the models again, with their full keys
INPUTS = [*map(str, RESULTS), str(TREE), str(BATTLES)]

YI = "01-ai/Yi-34B-Chat"
LLAMA = "meta-llama/Meta-Llama-3-8B-Instruct"
TULU = "allenai/Llama-3.1-Tulu-3-8B-RM"


def _arena_map() -> dict[str, str]:
    with MODEL_MAP.open() as fh:
        return {row["arena_name"]: row["model"] for row in csv.DictReader(fh)}


def oracle_win_probability(reference: str) -> dict[str, float]:
    """Each arena model's chance of beating `reference`, fitted independently.

    The battles are read with the csv module and the Bradley-Terry likelihood
    (ties half, base 10, scale 400) is maximised with scipy's BFGS.
    """
    with BATTLES.open() as fh:
        rows = list(csv.DictReader(fh))
    names = sorted({row["model_a"] for row in rows} | {row["model_b"] for row in rows})
    index = {name: i for i, name in enumerate(names)}
    wins = np.zeros((len(names), len(names)))
    for row in rows:  # a few hundred battles: the plain loop is the point
        a, b = index[row["model_a"]], index[row["model_b"]]
        score = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[row["winner"]]
        wins[a, b] += score
        wins[b, a] += 1.0 - score
    ln10 = math.log(10.0)

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        diff = ln10 * (theta[:, None] - theta[None, :])
        value = float(np.sum(wins * np.logaddexp(0.0, -diff)))
        p = 1.0 / (1.0 + np.exp(-diff))
        grad = ln10 * ((wins.T * p).sum(axis=1) - (wins * (1.0 - p)).sum(axis=1))
        return value, grad

    fit = minimize(
        loss, np.zeros(len(names)), jac=True, method="BFGS", options={"gtol": 1e-10}
    )
    rating = 400.0 * fit.x
    reference_rating = rating[index[reference]]
    return {
        name: 1.0 / (1.0 + 10.0 ** ((reference_rating - rating[i]) / 400.0))
        for name, i in index.items()
    }


@pytest.fixture(scope="module")
def board_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pairwise") / "out"
    run(
        INPUTS,
        suite=SUITE,
        out=out,
        options=RunOptions(model_map=str(MODEL_MAP)),
    )
    return out


# --- suites ----------------------------------------------------------------------------------


def test_a_pairwise_benchmark_parses() -> None:
    suite = load_suite(SUITE)
    (arena,) = suite.pairwise_benchmarks
    assert arena.name == "Arena"
    assert arena.reference == "t1-3b"
    assert arena.is_pairwise
    assert arena.subtasks[0].lower_bound == 0.5
    assert [b.is_pairwise for b in suite.benchmarks] == [False, False, False, True]


_ARENA = """name = "s"
[[benchmarks]]
name = "Arena"
aggregation = "{aggregation}"
{reference}
subtasks = [{subtasks}]
"""


@pytest.mark.parametrize(
    ("aggregation", "reference", "subtasks", "message"),
    [
        (
            "bradley-terry",
            "",
            '{ name = "overall", num_choices = 2 }',
            r"the expected win rate against the field has no chance baseline, but the "
            r"subtask has a bound \(0\.5\)\.\nHint: remove num_choices",
        ),
        (
            "bradley-terry",
            'score = "reference"',
            '{ name = "overall", num_choices = 2 }',
            r"a bradley-terry benchmark needs a reference model, got None\.\n"
            r'Hint: add reference = "<model>"',
        ),
        (
            "bradley-terry",
            'reference = "gpt-4"\nscore = "field"',
            '{ name = "overall" }',
            r"reference = 'gpt-4' is for score = \"reference\", but score is \"field\"\.\nHint",
        ),
        (
            "bradley-terry",
            "bootstrap = -1",
            '{ name = "overall" }',
            r"bootstrap must be a whole number of rounds from 0 to 100000, got -1\.\nHint",
        ),
        (
            "normalize-then-average",
            "bootstrap = 10",
            '{ name = "x", task = "t", metric = "m" }',
            r"'score' and 'bootstrap' belong to a pairwise benchmark.*\nHint: remove them",
        ),
        (
            "bradley-terry",
            'reference = " "',
            '{ name = "overall" }',
            r"needs a reference model, got ' '\.\nHint: add reference",
        ),
        (
            "bradley-terry",
            'reference = "gpt-4"',
            '{ name = "a" }, { name = "b" }',
            r"a bradley-terry benchmark has exactly one subtask, got 2 \(\['a', 'b'\]\)\.\n"
            r"Hint: keep one subtask",
        ),
        (
            "bradley-terry",
            'reference = "gpt-4"',
            '{ name = "a", task = "leaderboard_bbh_navigate", metric = "acc_norm,none" }',
            r"subtask is scored from battles, not from results files, but names task "
            r"'leaderboard_bbh_navigate'\.\nHint: remove task and metric",
        ),
        (
            "normalize-then-average",
            'reference = "gpt-4"',
            '{ name = "a" }',
            r"'reference' belongs to a pairwise benchmark, not to aggregation "
            r"'normalize-then-average'\.\nHint: set aggregation = \"bradley-terry\"",
        ),
        (
            "elo",
            'reference = "gpt-4"',
            '{ name = "a" }',
            r"aggregation must be one of \[.*'bradley-terry'\], got 'elo'\.\nHint",
        ),
        (
            "bradley-terry",
            'score = "rating"',
            '{ name = "overall" }',
            r'score = "rating" needs anchor = "MODEL=RATING", got None\.\nHint: the anchor pins',
        ),
        (
            "bradley-terry",
            'score = "rating"\nanchor = "gpt-4"',
            '{ name = "overall" }',
            r"needs anchor = \"MODEL=RATING\", got 'gpt-4'\.\nHint",
        ),
        (
            "bradley-terry",
            'score = "rating"\nanchor = "gpt-4=1e12"',
            '{ name = "overall" }',
            r"needs anchor = \"MODEL=RATING\", got 'gpt-4=1e12'\.\nHint",
        ),
        (
            "bradley-terry",
            'score = "rating"\nanchor = "gpt-4=1100"\nagainst = "high"',
            '{ name = "overall" }',
            r"against must be a finite rating within \+-1e9, got 'high'\.\nHint",
        ),
        (
            "bradley-terry",
            'anchor = "gpt-4=1100"',
            '{ name = "overall" }',
            r'anchor belong to score = "rating", but score is "field"\.\nHint: remove them',
        ),
        (
            "bradley-terry",
            'score = "rating"\nanchor = "gpt-4=1100"',
            '{ name = "overall", num_choices = 2 }',
            r"win rate against a fixed rating has no chance baseline.*\nHint: remove num_choices",
        ),
        (
            "bradley-terry",
            'score = "best"',
            '{ name = "overall" }',
            r'score must be "field", "reference" or "rating", got \'best\'\.\nHint',
        ),
    ],
)
def test_suite_rules_for_pairwise_benchmarks(
    aggregation: str, reference: str, subtasks: str, message: str
) -> None:
    text = _ARENA.format(
        aggregation=aggregation, reference=reference, subtasks=subtasks
    )
    with pytest.raises(SuiteError, match=message):
        parse_suite(text.encode(), source="s.toml")


def test_suites_show_prints_a_pairwise_benchmark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["suites", "show", str(SUITE)]) == 0
    text = capsys.readouterr().out
    assert "Arena: bradley-terry, weight 1, 1 subtask(s)" in text


# --- recognising battle files ----------------------------------------------------------------


def test_battle_files_are_recognised_by_their_columns(tmp_path: Path) -> None:
    assert is_battles_file(BATTLES)
    assert not is_battles_file(MODEL_MAP)
    assert not is_battles_file(RESULTS[0])  # a results file: one JSON object
    battles = pd.read_csv(BATTLES)
    battles.to_parquet(tmp_path / "b.parquet")
    battles.to_json(tmp_path / "b.jsonl", orient="records", lines=True)
    battles.to_json(tmp_path / "b.json", orient="records")
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "scores.csv").write_text("model,benchmark,subtask,raw_score\n")
    assert all(
        is_battles_file(tmp_path / n) for n in ("b.parquet", "b.jsonl", "b.json")
    )
    assert not is_battles_file(tmp_path / "list.json")
    assert not is_battles_file(tmp_path / "scores.csv")
    assert not is_battles_file(tmp_path / "missing.csv")


# --- the leaderboard -------------------------------------------------------------------------


def test_the_pairwise_column_is_the_normalized_win_probability(board_out: Path) -> None:
    board = Output.open(board_out).frame("leaderboard")
    names = _arena_map()
    expected = oracle_win_probability("t1-3b")
    by_model = {names.get(arena, arena): p for arena, p in expected.items()}
    rated = board[board["Arena Raw"].notna()]
    assert sorted(set(rated["model"])) == sorted(by_model)
    raw = rated["Arena Raw"].to_numpy(dtype=np.float64)
    oracle = np.array([by_model[m] for m in rated["model"]])
    assert np.abs(raw - oracle).max() < 1e-6
    normalized = rated["Arena"].to_numpy(dtype=np.float64)
    assert np.allclose(normalized, np.maximum(0.0, (raw - 0.5) / 0.5) * 100.0)
    assert by_model["Amu/t1-3B"] == pytest.approx(0.5)  # the reference
    assert (
        rated.loc[rated["model"] == "EleutherAI/pythia-2.8b", "Arena"].item() == 0.0
    )  # below the reference: clipped
    # averaged with the rest: the four benchmarks' mean
    complete = board[board["is_complete"]]
    columns = ["IFEval", "GPQA", "MMLU-PRO", "Arena"]
    assert np.allclose(complete["average"], complete[columns].mean(axis=1))
    assert len(complete) == 9  # the 7 mapped models, two of them in two variants


def test_every_variant_of_a_model_gets_its_pairwise_score(board_out: Path) -> None:
    board = Output.open(board_out).frame("leaderboard")
    for model in (YI, LLAMA):
        variants = board[board["model"] == model]
        assert sorted(variants["precision"]) == ["", "bfloat16"]
        scores = variants["Arena Raw"].to_numpy(dtype=np.float64)
        assert (scores == scores[0]).all()
        assert variants["is_complete"].all()
    assert board.loc[board["model"] == TULU, "Arena"].isna().all()  # not in the battles
    arena_only = board[board["model"].isin(["gpt-4", "claude-v1"])]
    assert len(arena_only) == 2
    assert (arena_only["precision"] == "").all()
    assert arena_only[["IFEval", "GPQA", "MMLU-PRO"]].isna().all().all()
    assert arena_only["rank"].isna().all()  # incomplete under missing=exclude


def test_the_subtask_rows_and_the_manifest(board_out: Path) -> None:
    subtasks = Output.open(board_out).frame("subtasks")
    arena = subtasks[subtasks["benchmark"] == "Arena"]
    assert (arena["subtask"] == "overall").all()
    assert (arena["lower_bound"] == 0.5).all()
    assert (arena["metric"] == "win probability vs t1-3b").all()
    with BATTLES.open() as fh:
        rows = list(csv.DictReader(fh))
    played = Counter(row[seat] for row in rows for seat in ("model_a", "model_b"))
    names = _arena_map()
    expected = {names.get(name, name): count for name, count in played.items()}
    assert {
        model: int(n)
        for model, n in zip(arena["model"], arena["n_samples"], strict=True)
    } == expected
    manifest = json.loads((board_out / "manifest.json").read_text())
    inputs = {Path(entry["path"]).name: entry for entry in manifest["inputs"]}
    assert inputs["battles.csv"]["format"] == "battles"
    assert inputs["battles.csv"]["rows"] == 360
    assert (
        inputs["battles.csv"]["sha256"]
        == hashlib.sha256(BATTLES.read_bytes()).hexdigest()
    )
    assert inputs["model_map.csv"]["format"] == "model-map"
    assert (
        inputs["model_map.csv"]["sha256"]
        == hashlib.sha256(MODEL_MAP.read_bytes()).hexdigest()
    )
    assert manifest["options"]["model_map"] == str(MODEL_MAP)


def test_the_summary_lists_models_in_one_source_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", *INPUTS, "--suite", str(SUITE), "--out", str(tmp_path / "o")]
    assert main([*argv, "--model-map", str(MODEL_MAP), "--top", "0"]) == 0
    text = capsys.readouterr().out
    assert (
        "warning    2 model(s) only in the battles, in no other input file: claude-v1, "
        "gpt-4 (--model-map renames arena names)" in text
    )
    assert (
        f"warning    1 model(s) only in the other inputs, in no battle file: {TULU}"
        in text
    )
    assert (
        "warning    --model-map: 1 arena name(s) not in the battles: falcon-40b" in text
    )
    assert "inputs     12 file(s)" in text  # 10 results files, the battles, the map


def test_without_a_model_map_the_names_do_not_meet(tmp_path: Path) -> None:
    result = run(INPUTS, suite=SUITE, out=None)
    warnings = [  # (the golden excerpts record no run settings: not comparable)
        w
        for w in input_warnings(result.file_table)
        if not w.startswith("not comparable")
    ]
    assert warnings[0].startswith("9 model(s) only in the battles, in no other input")
    assert warnings[1].startswith("8 model(s) only in the other inputs")
    board = result.leaderboard
    assert board.loc[board["model"] == YI, "Arena"].isna().all()


def test_the_reference_may_be_named_as_the_results_name_it(tmp_path: Path) -> None:
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE.read_text().replace('"t1-3b"', '"Amu/t1-3B"'))
    result = run(INPUTS, suite=suite, options=RunOptions(model_map=str(MODEL_MAP)))
    board = result.leaderboard
    assert board.loc[board["model"] == "Amu/t1-3B", "Arena Raw"].item() == 0.5
    expected = oracle_win_probability("t1-3b")["yi-34b-chat"]
    assert board.loc[board["model"] == YI, "Arena Raw"].tolist() == pytest.approx(
        [expected, expected], abs=1e-6
    )


def test_battles_alone_make_a_leaderboard_of_their_benchmark(tmp_path: Path) -> None:
    result = run([BATTLES], suite=SUITE, options=RunOptions(missing="partial"))
    board = result.leaderboard
    assert len(board) == 9
    assert board["model"].iloc[0] == "gpt-4"
    assert input_warnings(result.file_table) == []


def test_the_stream_engine_and_parquet_inputs_see_every_variant(tmp_path: Path) -> None:
    scores = tmp_path / "scores.parquet"
    pd.DataFrame(
        {
            "model": [YI, YI, "Amu/t1-3B"],
            "precision": ["bfloat16", "float16", "bfloat16"],
            "benchmark": ["MMLU-PRO"] * 3,
            "subtask": ["mmlu_pro"] * 3,
            "raw_score": [0.5, 0.49, 0.2],
        }
    ).to_parquet(scores)
    options = RunOptions(model_map=str(MODEL_MAP), missing="partial", engine="stream")
    board = run([scores, BATTLES], suite=SUITE, options=options).leaderboard
    yi = board[board["model"] == YI].sort_values("precision")
    assert yi["precision"].tolist() == ["bfloat16", "float16"]
    expected = oracle_win_probability("t1-3b")["yi-34b-chat"]
    assert yi["Arena Raw"].tolist() == pytest.approx([expected, expected], abs=1e-6)


def test_the_parse_cache_path_scores_the_battles_too(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    options = RunOptions(model_map=str(MODEL_MAP), cache=str(cache))
    for _ in range(2):  # parsed, then from the cache
        result = run(INPUTS, suite=SUITE, out=tmp_path / "o", options=options)
        board = result.leaderboard
        assert board.loc[board["model"] == YI, "Arena Raw"].notna().all()
        assert len(board[board["model"] == YI]) == 2


# --- refusals --------------------------------------------------------------------------------


def test_battles_without_a_pairwise_benchmark_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    assert main(["run", str(RESULTS[0]), str(BATTLES), "--out", str(out)]) == 4
    assert re.search(
        r"battles\.csv: battles \(model_a, model_b columns\), but suite 'openllm-v2' "
        r"has no pairwise benchmark to score them\.\nHint: rate battles alone with "
        r"`lbnorm arena FILE --out DIR`",
        capsys.readouterr().err,
    )
    argv = ["run", str(RESULTS[0]), "--out", str(out), "--model-map", str(MODEL_MAP)]
    assert main(argv) == 2
    assert re.search(
        r"--model-map .*model_map\.csv: renames battle models for a pairwise benchmark, "
        r"but suite 'openllm-v2' has none\.\nHint: leave out --model-map",
        capsys.readouterr().err,
    )
    assert not out.exists()


def test_a_pairwise_suite_without_battles_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "run",
        *map(str, RESULTS),
        "--suite",
        str(SUITE),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 0
    assert (
        "warning    no battles file among the inputs for the pairwise benchmark(s) "
        "['Arena']: their scores are missing" in capsys.readouterr().out
    )
    board = Output.open(tmp_path / "o").frame("leaderboard")
    assert board["Arena"].isna().all()


@pytest.mark.parametrize(
    ("battles", "suite_edit", "map_text", "message"),
    [
        (
            "model_a,model_b,winner\na,b,model_a\nb,a,model_a\n",
            ('"t1-3b"', '"gpt-9"'),
            None,
            r"b\.csv: pairwise benchmark 'Arena': reference model 'gpt-9' is not in the "
            r"battles \(2 models\)\.\nHint: use a model name exactly as the battles spell it",
        ),
        (
            "model_a,model_b,winner\na,b,model_a\nb,c,model_a\nc,b,model_a\n",
            ('"t1-3b"', '"b"'),
            None,
            r"b\.csv: pairwise benchmark 'Arena': Bradley-Terry ratings diverge: .*never "
            r"lost: a \(1 wins, 0 losses\).*\nHint: a leaderboard's pairwise benchmark is "
            r"fitted without a penalty.*`lbnorm arena FILE --out DIR --l2 1`",
        ),
        (
            "model_a,model_b,winner\na,b,model_a\nb,a,model_a\nc,d,tie\n",
            ('"t1-3b"', '"a"'),
            None,
            r"pairwise benchmark 'Arena': the comparison graph has 2 separate parts.*"
            r"\{a, b\}; \{c, d\}\.\nHint: a leaderboard's pairwise benchmark",
        ),
        (
            "model_a,model_b,winner\na,a,model_a\n",
            ('"t1-3b"', '"a"'),
            None,
            r"b\.csv: a model battles itself \(model_a == model_b\) at line 2: 'a'\.\n"
            r"Hint: drop self-battles",
        ),
        (
            "model_a,model_b,winner\na,b,model_a\nb,a,model_a\n",
            ('"t1-3b"', '"a"'),
            "arena_name,model\na,x\nb,x\n",
            r"map\.csv: model appears more than once at line 2, line 3: 'x', 'x'\.\n"
            r"Hint: map each arena name to exactly one model",
        ),
    ],
    ids=["unknown reference", "never lost", "disconnected", "self-battle", "map clash"],
)
def test_bad_battles_in_a_run_fail_cleanly(
    battles: str,
    suite_edit: tuple[str, str],
    map_text: str | None,
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "b.csv").write_text(battles)
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE.read_text().replace(*suite_edit))
    previous = tmp_path / "out"
    shutil.copytree(FIXTURES / "full_structure", tmp_path / "tree")
    options = ["--suite", str(suite), "--out", str(previous)]
    argv = ["run", str(tmp_path / "tree"), *options, "--quiet"]
    assert main(argv) == 0  # an earlier output, to be left alone
    before = sorted((p.name, p.read_bytes()) for p in previous.iterdir() if p.is_file())
    extra = ["--model-map", str(tmp_path / "map.csv")] if map_text else []
    if map_text:
        (tmp_path / "map.csv").write_text(map_text)
    argv = ["run", str(tmp_path / "tree"), str(tmp_path / "b.csv"), *options, *extra]
    assert main(argv) == 4
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("lbnorm: error: ")
    assert re.search(message, captured.err, flags=re.DOTALL), captured.err
    after = sorted((p.name, p.read_bytes()) for p in previous.iterdir() if p.is_file())
    assert after == before
    assert pq.read_table(previous / "leaderboard.parquet").num_rows == 2


FIELD_SUITE = """
name = "arena-field"

[[benchmarks]]
name = "Arena"
aggregation = "bradley-terry"
bootstrap = 50
subtasks = [ { name = "overall" } ]
"""


def test_the_default_pairwise_score_is_the_expected_win_rate_against_the_field(
    tmp_path: Path,
) -> None:
    from lbnorm.ratings import RatingOptions, compute_ratings, read_battles

    suite = tmp_path / "field.toml"
    suite.write_text(FIELD_SUITE)
    battles_file = Path(__file__).parent / "fixtures" / "battles" / "battles.csv"
    out = tmp_path / "out"
    code = main(
        ["run", str(battles_file), "--suite", str(suite), "--out", str(out), "--quiet"]
    )
    assert code == 0
    rows = pq.read_table(out / "subtasks.parquet").to_pylist()
    by_model = {row["model"]: row for row in rows}
    battles = read_battles(battles_file)
    ratings = compute_ratings(battles, RatingOptions())
    names = battles.models.tolist()
    k = len(names)
    for i, name in enumerate(names):
        # the oracle: a plain mean over the other models of P(i beats j)
        chance = [
            1 / (1 + 10 ** ((ratings.rating[j] - ratings.rating[i]) / 400))
            for j in range(k)
            if j != i
        ]
        assert by_model[name]["raw_score"] == pytest.approx(
            sum(chance) / (k - 1), abs=1e-9
        )
    scores = [row["raw_score"] for row in rows]
    assert sum(scores) / len(scores) == pytest.approx(0.5, abs=1e-9)  # no clipping
    assert min(scores) > 0  # every model separated, none at a floor
    assert all(row["stderr"] is not None and row["stderr"] > 0 for row in rows)


RATING_SUITE = """
name = "arena-rating"

[[benchmarks]]
name = "Arena"
aggregation = "bradley-terry"
score = "rating"
anchor = "vicuna-13b=1100"
against = 1000
bootstrap = 50
subtasks = [ { name = "overall" } ]
"""


def test_the_rating_form_is_the_chance_of_beating_a_fixed_rating(
    tmp_path: Path,
) -> None:
    from lbnorm.ratings import RatingOptions, compute_ratings, read_battles

    suite = tmp_path / "rating.toml"
    suite.write_text(RATING_SUITE)
    (arena,) = load_suite(suite).pairwise_benchmarks
    assert (arena.score, arena.anchor, arena.against) == (
        "rating",
        ("vicuna-13b", 1100.0),
        1000.0,
    )
    battles_file = FIXTURES / "battles" / "battles.csv"
    out = tmp_path / "out"
    args = ["run", str(battles_file), "--suite", str(suite), "--out", str(out)]
    assert main([*args, "--quiet"]) == 0
    rows = {r["model"]: r for r in pq.read_table(out / "subtasks.parquet").to_pylist()}
    ratings = compute_ratings(read_battles(battles_file), RatingOptions())
    vicuna = ratings.rating[ratings.models.tolist().index("vicuna-13b")]
    for name, rating in zip(ratings.models.tolist(), ratings.rating, strict=True):
        # the oracle: the anchored rating against 1000, written out
        pinned = rating - vicuna + 1100.0
        expected = 1 / (1 + 10 ** ((1000.0 - pinned) / 400))
        assert rows[name]["raw_score"] == pytest.approx(expected, abs=1e-9)
        assert rows[name]["metric"] == (
            "win probability vs a rating of 1000 (vicuna-13b = 1100)"
        )
        assert rows[name]["stderr"] > 0
    assert rows["vicuna-13b"]["raw_score"] == pytest.approx(1 / (1 + 10**-0.25))


def _with_a_newcomer(path: Path, out: Path, *, rivals: list[str], wins: int) -> Path:
    """The battles plus a new model that played only `rivals`, winning `wins` of 10 each."""
    rows = path.read_text().splitlines()
    for rival in rivals:
        rows += [
            f"newcomer,{rival},{'model_a' if i < wins else 'model_b'},True,English,0,1"
            for i in range(10)
        ]
    out.write_text("\n".join(rows) + "\n")
    return out


def test_only_the_field_form_moves_when_a_model_joins(tmp_path: Path) -> None:
    """A model that played one other model leaves the others' ratings as they were.

    (Its own rating absorbs its battles: the likelihood's maximum over it is the
    same whatever the others' ratings.) So the reference and the rating forms
    do not move for the others; the field form moves them all.
    """
    from lbnorm.ratings import RatingOptions, read_battles
    from lbnorm.ratings.pairwise_scores import (
        score_against_field,
        score_against_rating,
        score_against_reference,
    )

    plain = FIXTURES / "battles" / "battles.csv"
    joined = _with_a_newcomer(plain, tmp_path / "b.csv", rivals=["alpaca-13b"], wins=1)
    options = RatingOptions()

    def scores(path: Path, form: str) -> dict[str, float]:
        battles = read_battles(path)
        if form == "field":
            result = score_against_field(battles, options=options)
        elif form == "reference":
            result = score_against_reference(battles, reference="vicuna-13b")
        else:
            result = score_against_rating(
                battles, anchor=("vicuna-13b", 1100.0), against=1000.0
            )
        table = result.table.to_pydict()
        return dict(zip(table["model"], table["raw_score"], strict=True))

    for form in ("reference", "rating"):
        before, after = scores(plain, form), scores(joined, form)
        for name, value in before.items():
            assert after[name] == pytest.approx(value, abs=1e-9), (form, name)
    before, after = scores(plain, "field"), scores(joined, "field")
    moved = [after[name] - value for name, value in before.items()]
    assert min(moved) > 0.005  # a weak newcomer lifts every other model
