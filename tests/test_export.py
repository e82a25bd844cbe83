"""``lbnorm export --format open-llm-leaderboard``: the contents table, checked against the real one."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lbnorm.cli import main
from lbnorm.core.errors import InputError, OptionsError, OutputError
from lbnorm.faces.export import ExportOptions, export_table, write_export

SIX = ["IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO"]
#: The contents dataset's features, in order (datasets-server dump of the real table).
REAL_COLUMNS = [
    ("eval_name", "string"),
    ("Precision", "string"),
    ("Type", "string"),
    ("T", "string"),
    ("Weight type", "string"),
    ("Architecture", "string"),
    ("Model", "string"),
    ("fullname", "string"),
    ("Model sha", "string"),
    ("Average \u2b06\ufe0f", "double"),
    ("Hub License", "string"),
    ("Hub \u2764\ufe0f", "int64"),
    ("#Params (B)", "double"),
    ("Available on the hub", "bool"),
    ("MoE", "bool"),
    ("Flagged", "bool"),
    ("Chat Template", "bool"),
    ("CO\u2082 cost (kg)", "double"),
    ("IFEval Raw", "double"),
    ("IFEval", "double"),
    ("BBH Raw", "double"),
    ("BBH", "double"),
    ("MATH Lvl 5 Raw", "double"),
    ("MATH Lvl 5", "double"),
    ("GPQA Raw", "double"),
    ("GPQA", "double"),
    ("MUSR Raw", "double"),
    ("MUSR", "double"),
    ("MMLU-PRO Raw", "double"),
    ("MMLU-PRO", "double"),
    ("Merged", "bool"),
    ("Official Providers", "bool"),
    ("Upload To Hub Date", "string"),
    ("Submission Date", "string"),
    ("Generation", "int64"),
    ("Base Model", "string"),
]
#: Two real rows' links, copied from the contents dataset.
REAL_MODEL_LINK = {
    "0-hero/Matter-0.2-7B-DPO": (
        '<a target="_blank" href="https://huggingface.co/0-hero/Matter-0.2-7B-DPO" '
        'style="color: var(--link-text-color); text-decoration: underline;text-decoration-style: '
        'dotted;">0-hero/Matter-0.2-7B-DPO</a>  <a target="_blank" '
        'href="https://huggingface.co/datasets/open-llm-leaderboard/0-hero__Matter-0.2-7B-DPO-details" '
        'style="color: var(--link-text-color); text-decoration: underline;text-decoration-style: '
        'dotted;">\U0001f4d1</a>'
    ),
    "Aashraf995/Gemma-Evo-10B": (
        '<a target="_blank" href="https://huggingface.co/Aashraf995/Gemma-Evo-10B" '
        'style="color: var(--link-text-color); text-decoration: underline;text-decoration-style: '
        'dotted;">Aashraf995/Gemma-Evo-10B</a>  <a target="_blank" '
        'href="https://huggingface.co/datasets/open-llm-leaderboard/Aashraf995__Gemma-Evo-10B-details" '
        'style="color: var(--link-text-color); text-decoration: underline;text-decoration-style: '
        'dotted;">\U0001f4d1</a>'
    ),
}
KEYS = ["fullname", "Precision", "Model sha", "Chat Template"]


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "demo"
    assert main(["run", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def exported(demo_out: Path) -> pd.DataFrame:
    file = demo_out.parent / "train-00000-of-00001.parquet"
    args = ["export", str(demo_out), "--format", "open-llm-leaderboard"]
    assert main([*args, "--out", str(file)]) == 0
    frame: pd.DataFrame = pq.read_table(file).to_pandas()
    return frame


def test_columns_types_and_datasets_features(demo_out: Path) -> None:
    file = demo_out.parent / "features.parquet"
    write_export(export_table(demo_out), file)
    schema = pq.read_schema(file)
    assert [(f.name, str(f.type)) for f in schema] == REAL_COLUMNS
    features = json.loads(schema.metadata[b"huggingface"])["info"]["features"]
    spelled = {
        "double": "float64",
        "bool": "bool",
        "int64": "int64",
        "string": "string",
    }
    assert list(features) == [name for name, _ in REAL_COLUMNS]
    assert [f["dtype"] for f in features.values()] == [
        spelled[kind] for _, kind in REAL_COLUMNS
    ]
    assert pq.ParquetFile(file).metadata.num_row_groups == 1


def test_demo_reproduces_the_published_table(
    exported: pd.DataFrame, published_csv: Path
) -> None:
    published = pd.read_csv(published_csv)
    published = published.assign(**{"Model sha": published["Model sha"].fillna("")})
    assert len(exported) == len(published) == 4576
    both = published.merge(
        exported, on=KEYS, suffixes=("_real", ""), validate="one_to_one"
    )
    assert len(both) == 4576
    floats = [*[n for b in SIX for n in (f"{b} Raw", b)], "Average ⬆️", "#Params (B)"]
    for name in floats:
        np.testing.assert_allclose(
            both[name].to_numpy(float), both[f"{name}_real"], rtol=1e-12, err_msg=name
        )
    assert (both["Flagged"] == both["Flagged_real"]).all()
    dates = both["Submission Date_real"].fillna("<null>")
    assert (both["Submission Date"].fillna("<null>") == dates).all()
    # the backend's transform_data cleaning of Type gives the published codes back
    cleaned = (
        both["Type"]
        .str.lower()
        .str.split("(")
        .str[0]
        .str.replace(r"[🔶🟢🟩💬🤝🌸 ]", "", regex=True)
    )
    assert (cleaned == both["Type_real"]).all()
    assert (both["T"] == both["Type"].str.split(" ").str[0]).all()


def test_average_is_the_real_tables_sum_of_six(exported: pd.DataFrame) -> None:
    scores = exported[SIX].to_numpy(float)
    total = scores[:, 0].copy()
    for column in range(1, 6):
        total = total + scores[:, column]
    assert (exported["Average ⬆️"].to_numpy(float) == total / 6).all()  # bit for bit
    row = exported.iloc[0]
    assert row["Average ⬆️"] == sum(float(row[b]) for b in SIX) / 6
    raw = exported[[f"{b} Raw" for b in SIX]].to_numpy(float)
    assert not np.isnan(raw).any()
    assert not np.isnan(scores).any()


def test_real_rows_keys_links_and_types(exported: pd.DataFrame) -> None:
    rows: dict[str, Any] = {
        str(row["eval_name"]): row for row in exported.to_dict("records")
    }
    hero = rows["0-hero_Matter-0.2-7B-DPO_bfloat16"]
    evo = rows["Aashraf995_Gemma-Evo-10B_float16"]
    assert hero["Model"] == REAL_MODEL_LINK["0-hero/Matter-0.2-7B-DPO"]
    assert evo["Model"] == REAL_MODEL_LINK["Aashraf995/Gemma-Evo-10B"]
    assert (hero["Type"], hero["T"]) == ("💬 chat models (RLHF, DPO, IFT, ...)", "💬")
    assert (evo["Type"], evo["T"]) == ("🤝 base merges and moerges", "🤝")
    assert hero["Model sha"] == "26a66f0d862e2024ce4ad0a09c37052ac36e8af6"
    assert (hero["Submission Date"], hero["#Params (B)"]) == ("2024-08-05", 7.242)
    assert math.isclose(hero["Average ⬆️"], 8.90636130175029, rel_tol=1e-12)
    assert math.isclose(evo["MUSR"], 16.66822916666666, rel_tol=1e-12)
    assert "01-ai_Yi-1.5-34B-Chat-16K_bfloat16" in rows
    assert rows["gpt2_bfloat16"]["Model"].count("gpt2-details") == 1
    # columns the demo's metadata does not give: null, their types kept
    assert exported["Hub ❤️"].isna().all()
    assert exported["Architecture"].isna().all()


def test_rows_follow_the_results_tree(
    exported: pd.DataFrame, published_csv: Path
) -> None:
    real = pd.read_csv(published_csv, usecols=["fullname"])["fullname"]
    same = (real.to_numpy() == exported["fullname"].to_numpy()).mean()
    assert same > 0.99  # the real table puts dnhkng/RYS-Medium out of order
    org = exported["fullname"].str.split("/").str[0]
    assert org.is_monotonic_increasing


def test_metadata_columns_feed_their_export_columns(
    demo_out: Path, tmp_path: Path
) -> None:
    import lbnorm

    meta = pq.read_table(
        Path(lbnorm.__file__).parent / "data" / "demo_metadata.parquet"
    )
    n = meta.num_rows
    extra = {
        "architecture": pa.array(["LlamaForCausalLM"] * n),
        "Hub ❤️": pa.array(np.arange(n, dtype=np.int32)),  # cast to int64
        "merged": pa.array([True] * n),
        "upload_to_hub_date": pa.array([None] * (n - 1) + ["2024-04-13"]),
        "co2_cost_kg": pa.array([1.5] * n),
        "generation": pa.array([0] * n),
        "base_model": meta["model"],
    }
    for name, values in extra.items():
        meta = meta.append_column(name, values)
    pq.write_table(meta, tmp_path / "meta.parquet")
    out = tmp_path / "out"
    assert (
        main(["run", "--metadata", str(tmp_path / "meta.parquet"), "--out", str(out)])
        == 0
    )
    table = export_table(out)
    assert table.schema.field("Hub ❤️").type == pa.int64()
    frame = table.to_pandas()
    assert (frame["Architecture"] == "LlamaForCausalLM").all()
    assert frame["Merged"].all()
    assert (frame["CO₂ cost (kg)"] == 1.5).all()
    assert (frame["Generation"] == 0).all()
    assert (frame["Base Model"] == frame["fullname"]).all()
    assert frame["Upload To Hub Date"].notna().sum() == 1
    assert sorted(frame["Hub ❤️"]) == list(range(n))
    assert frame["Hub License"].isna().all()  # no such metadata column: null
    bad = meta.set_column(
        meta.schema.get_field_index("merged"), "merged", pa.array(["x"] * n)
    )
    pq.write_table(bad, tmp_path / "bad.parquet")
    out_bad = tmp_path / "out_bad"
    assert (
        main(
            ["run", "--metadata", str(tmp_path / "bad.parquet"), "--out", str(out_bad)]
        )
        == 0
    )
    with pytest.raises(InputError, match=r"(?s)'merged' \(string\) does not fit.*Hint"):
        export_table(out_bad)


def test_other_suites_and_incomplete_variants_are_refused(tmp_path: Path) -> None:
    scores = tmp_path / "scores.csv"
    scores.write_text(
        "model,precision,benchmark,subtask,raw_score\n"
        "org/a,bfloat16,MMLU-PRO,mmlu_pro,0.5\norg/b,bfloat16,MMLU-PRO,mmlu_pro,0.4\n"
    )
    suite = tmp_path / "one.toml"
    suite.write_text(
        'name = "one"\n[[benchmarks]]\nname = "MMLU-PRO"\n'
        'subtasks = [{ name = "mmlu_pro", num_choices = 10 }]\n'
    )
    out = tmp_path / "out"
    assert main(["run", str(scores), "--suite", str(suite), "--out", str(out)]) == 0
    with pytest.raises(
        InputError,
        match=r"(?s)suite 'one' has benchmarks \['MMLU-PRO'\], .* \(missing \['BBH', "
        r"'GPQA', 'IFEval', 'MATH Lvl 5', 'MUSR'\]\)\.\nHint: export",
    ):
        export_table(out)
    v1 = tmp_path / "v1"
    tree = Path(__file__).parent / "fixtures" / "openllm_v1" / "tree"
    assert main(["run", str(tree), "--suite", "openllm-v1", "--out", str(v1)]) == 0
    with pytest.raises(  # six missing: five named, and one more said (not cut silently)
        InputError,
        match=r"\(missing \['BBH', 'GPQA', 'IFEval', 'MATH Lvl 5', 'MMLU-PRO'\] and 1 more\)",
    ):
        export_table(v1)
    args = ["export", str(out), "--format", "open-llm-leaderboard"]
    assert main([*args, "--out", str(tmp_path / "x.parquet")]) == 4
    assert not (tmp_path / "x.parquet").exists()
    partial = tmp_path / "partial"
    assert (
        main(["run", str(scores), "--missing", "partial", "--out", str(partial)]) == 0
    )
    with pytest.raises(InputError, match=r"(?s)2 variant\(s\) lack.*--skip-incomplete"):
        export_table(partial)
    assert (
        export_table(partial, options=ExportOptions(skip_incomplete=True)).num_rows == 0
    )


def test_never_writes_over_a_file_it_did_not_write(
    demo_out: Path, tmp_path: Path
) -> None:
    table = export_table(demo_out)
    for name in ("theirs.parquet", "theirs.csv"):
        foreign = tmp_path / name
        if name.endswith(".parquet"):
            pq.write_table(pa.table({"a": [1]}), foreign)
        else:
            foreign.write_text("a,b\n1,2\n")
        before = foreign.read_bytes()
        with pytest.raises(
            OutputError, match=r"(?s)exists and was not written by lbnorm.*Hint"
        ):
            write_export(table, foreign)
        assert foreign.read_bytes() == before
    ours = tmp_path / "ours.csv"
    write_export(table, ours)
    write_export(table.slice(0, 3), ours)  # its own file: replaced whole
    again = pd.read_csv(ours)
    assert list(again.columns) == [name for name, _ in REAL_COLUMNS]
    assert len(again) == 3
    assert again["Average ⬆️"].tolist() == table["Average ⬆️"].to_pylist()[:3]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ours.csv",
        "theirs.csv",
        "theirs.parquet",
    ]


def test_golden_files_and_the_full_structure_tree(
    golden_dir: Path, full_structure_dir: Path, tmp_path: Path
) -> None:
    golden = tmp_path / "golden"
    files = [str(p) for p in sorted(golden_dir.glob("*.json"))]
    assert main(["run", *files, "--out", str(golden)]) == 0
    with pytest.raises(
        InputError, match=r"(?s)8 variant\(s\) have no precision.*--unknown"
    ):
        export_table(golden)
    table = export_table(golden, options=ExportOptions(unknown_precision="bfloat16"))
    board = pq.read_table(golden / "leaderboard.parquet").to_pandas()
    rows = table.to_pandas().merge(
        board, left_on="fullname", right_on="model", suffixes=("", "_board")
    )
    for name in SIX:  # the export carries the leaderboard's scores as they are
        assert (rows[name] == rows[f"{name}_board"]).all()
        assert (rows[f"{name} Raw"] == rows[f"{name} Raw_board"]).all()
    expected = pd.read_csv(golden_dir / "expected.csv")
    average = float(
        expected.loc[expected["model"] == "01-ai/Yi-34B-Chat", "average"].item()
    )
    yi: Any = rows.loc[rows["fullname"] == "01-ai/Yi-34B-Chat"].to_dict("records")[0]
    assert math.isclose(yi["Average ⬆️"], average, rel_tol=1e-6)
    assert yi["eval_name"] == "01-ai_Yi-34B-Chat_bfloat16"
    with pytest.raises(OptionsError, match=r"(?s)empty precision.*Hint"):
        ExportOptions(unknown_precision="")
    tree = tmp_path / "tree"
    assert main(["run", str(full_structure_dir), "--out", str(tree)]) == 0
    csv = tmp_path / "tree.csv"
    args = ["export", str(tree), "--format", "open-llm-leaderboard", "--out", str(csv)]
    assert main(args) == 0
    written = pd.read_csv(csv)
    assert written["fullname"].tolist() == [
        "01-ai/Yi-34B-Chat",
        "meta-llama/Meta-Llama-3-8B-Instruct",
    ]
    assert (written["Precision"] == "bfloat16").all()


def test_export_into_an_output_folder_is_refused(tmp_path: Path) -> None:
    """An export written inside an lbnorm output would change that output."""
    out = tmp_path / "out"
    assert main(["run", "--out", str(out), "--quiet"]) == 0
    before = sorted(p.name for p in out.iterdir())
    code = main(
        [
            "export",
            str(out),
            "--format",
            "open-llm-leaderboard",
            "--out",
            str(out / "x.parquet"),
        ]
    )
    assert code == 2
    assert sorted(p.name for p in out.iterdir()) == before


def test_a_file_given_as_the_output_folder_is_named_as_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    argv = ["--format", "open-llm-leaderboard", "--out", str(tmp_path / "x.parquet")]
    assert main(["export", str(notes), *argv]) == 4
    assert capsys.readouterr().err == (
        f"lbnorm: error: {notes}: not an lbnorm output directory (it is a regular "
        "file).\nHint: give the folder `lbnorm run [INPUT...] --out DIR` wrote, not a "
        "file.\n"
    )
    assert main(["export", str(tmp_path / "nowhere"), *argv]) == 4
    assert "(no such folder).\nHint: write one with" in capsys.readouterr().err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("precision", ["\n", "bf 16", "bf16\x1b[31m", "x" * 65])
def test_an_unknown_precision_that_cannot_name_a_row_is_refused(
    precision: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(
        OptionsError,
        match=r"a precision is one word of at most 64 printable characters.*\n"
        r"Hint: give the precision the runs used",
    ):
        ExportOptions(unknown_precision=precision)
    argv = ["--format", "open-llm-leaderboard", "--out", str(tmp_path / "x.parquet")]
    board = str(tmp_path / "board")
    assert main(["export", board, *argv, "--unknown-precision", precision]) == 2
    assert "a precision is one word" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
