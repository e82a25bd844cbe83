"""CSV score columns parsed as the file is read equal the text path's, bit for bit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbnorm.core.errors import SchemaMismatchError
from lbnorm.readers import tables
from lbnorm.readers.tables import read_score_file

_CELLS = st.one_of(
    st.floats(0.0, 1.0).map(repr),
    st.floats(0.0, 1.0).map(lambda x: f"{x:.3e}"),
    st.sampled_from(
        ["0", "1", ".25", "0.", "+0.5", "1E-3", "0.1000000000000000055511"]
    ),
)


def _both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    fast = read_score_file(path)[0].table
    with monkeypatch.context() as patched:
        patched.setattr(tables, "_read_csv_numbers", lambda *_args: None)
        text = read_score_file(path)[0].table
    return fast, text


@given(
    scores=st.lists(_CELLS, min_size=1, max_size=20),
    stderr=st.sampled_from(["", "0.01", "NA", "1e-2"]),
)
def test_parsed_as_read_equals_the_text_path(
    tmp_path_factory: pytest.TempPathFactory, scores: list[str], stderr: str
) -> None:
    path = tmp_path_factory.mktemp("csv") / "scores.csv"
    rows = [f"m{i},GPQA,main,{s},{stderr},100" for i, s in enumerate(scores)]
    path.write_text(
        "model,benchmark,subtask,raw_score,stderr,n_samples\n" + "\n".join(rows)
    )
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, text = _both(path, monkeypatch)
    assert fast.equals(text)  # type: ignore[attr-defined]
    assert tables._read_csv_numbers(path.read_bytes(), {"raw_score": pa.string()})


@pytest.mark.parametrize("cell", ["nan", "inf", "", "NA", "50%", "0.5.1"])
def test_cells_the_text_path_reads(tmp_path: Path, cell: str) -> None:
    """Non-finite, empty or odd cells take the text path, and its messages."""
    path = tmp_path / "scores.csv"
    path.write_text(f"model,benchmark,subtask,raw_score\nm,GPQA,main,{cell}\n")
    data = path.read_bytes()
    assert tables._read_csv_numbers(data, {"raw_score": pa.string()}) is None
    if cell in ("50%", "0.5.1"):
        with pytest.raises(
            SchemaMismatchError, match=r"(?s)raw_score is the text.*Hint: "
        ):
            read_score_file(path)
    else:  # read; validation words what is wrong with the value
        assert "_raw_score_text" in read_score_file(path)[0].table.column_names


def test_a_padded_cell_reads_as_the_text_path_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "scores.csv"
    path.write_text("model,benchmark,subtask,raw_score\nm,GPQA,main, 0.5 \n")
    fast, text = _both(path, monkeypatch)
    assert fast.equals(text)  # type: ignore[attr-defined]
