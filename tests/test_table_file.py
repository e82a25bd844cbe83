"""lbnorm.readers.table_file: the one table-file reader (blocks, cancellation, nesting, rows)."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lbnorm import _runtime
from lbnorm.core.errors import Cancelled, InputError
from lbnorm.readers import table_file
from lbnorm.readers.table_file import (
    MAX_JSON_DEPTH,
    check_json_depth,
    read_csv,
    read_jsonl,
    table_format,
    text_rows,
)

#: Rows enough for several of Arrow's 1 MiB blocks.
ROWS = 60_000


def _csv() -> bytes:
    lines = [b"model,raw_score,pad"]
    lines += [f"m{i},{i / ROWS},{'p' * 40}".encode() for i in range(ROWS)]
    return b"\n".join(lines) + b"\n"


def _jsonl() -> bytes:
    rows = (
        {"model": f"m{i}", "raw_score": i / ROWS, "pad": "p" * 40} for i in range(ROWS)
    )
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def test_the_blocks_make_the_whole_files_table() -> None:
    data = _csv()
    assert read_csv(data).equals(pa_csv.read_csv(pa.BufferReader(data)))
    lines = _jsonl()
    assert read_jsonl(lines).equals(pa_json.read_json(pa.BufferReader(lines)))


@pytest.mark.parametrize(
    ("read", "data", "module", "opener"),
    [
        (read_csv, _csv(), pa_csv, "open_csv"),
        (read_jsonl, _jsonl(), pa_json, "open_json"),
    ],
    ids=["csv", "jsonl"],
)
def test_a_ctrl_c_stops_the_parse_at_the_next_block(
    monkeypatch: pytest.MonkeyPatch,
    read: Callable[[bytes], pa.Table],
    data: bytes,
    module: Any,
    opener: str,
) -> None:
    """The signal comes as the first block is parsed; the next one is not asked for."""
    opened = getattr(module, opener)
    taken: list[int] = []

    def blocks(*args: Any, **kwargs: Any) -> Iterator[pa.RecordBatch]:
        reader = opened(*args, **kwargs)
        for batch in reader:
            taken.append(batch.num_rows)
            if len(taken) == 1:
                signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, here
            yield batch

    monkeypatch.setattr(module, opener, blocks)
    assert (
        len(list(opened(pa.BufferReader(data)))) > 2
    )  # several blocks to stop between

    def parse() -> None:
        with _runtime.cancellable():  # held, as every entry point holds it
            read(data)

    with pytest.raises(Cancelled, match="SIGINT"):
        parse()
    assert len(taken) == 1


def test_a_column_that_widens_past_the_first_block_is_read_whole() -> None:
    """The streaming reader keeps the first block's types; the whole-file reader widens."""
    rows = [
        f'{{"x": {1 if i < ROWS // 2 else 1.5}, "pad": "{"p" * 40}"}}'
        for i in range(ROWS)
    ]
    data = ("\n".join(rows) + "\n").encode()
    table = read_jsonl(data)
    assert table.schema.field("x").type == pa.float64()
    assert table.equals(pa_json.read_json(pa.BufferReader(data)))


def test_an_error_is_the_whole_file_readers() -> None:
    data = b'{"x": "a"}\n' * ROWS + b'{"x": 1}\n'
    with pytest.raises(pa.ArrowInvalid, match="changed from string to number"):
        read_jsonl(data)


def test_nesting_deeper_than_arrow_can_parse_is_refused_before_it_parses(
    tmp_path: Path,
) -> None:
    deep = b'{"a": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    path = tmp_path / "deep.jsonl"
    path.write_bytes(b'{"a": []}\n\n' + deep + b"\n")
    with pytest.raises(
        InputError,
        match=r"deep\.jsonl: line 3 nests arrays or objects more than 1,000 levels deep.*\nHint: ",
    ):
        read_jsonl(path)


@pytest.mark.parametrize(
    ("line", "is_refused"),
    [
        (b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH, True),  # in the row's object
        (b"[" * (MAX_JSON_DEPTH - 1) + b"]" * (MAX_JSON_DEPTH - 1), False),
        (b'["' + b"[" * 9_000 + b'"]', False),  # brackets in a string do not nest
        (b"[" + b"[]," * 9_000 + b"[]]", False),  # long and wide, not deep
    ],
    ids=["one-too-deep", "as-deep-as-allowed", "in-a-string", "wide"],
)
def test_only_real_nesting_counts(line: bytes, *, is_refused: bool) -> None:
    """Measured in a line long enough to nest past what Arrow's parser follows."""
    data = b'{"pad": "' + b"x" * 9_000 + b'", "a": ' + line + b"}\n"
    if is_refused:
        with pytest.raises(InputError, match="line 1 nests"):
            check_json_depth(data, Path("x.jsonl"))
    else:
        check_json_depth(data, Path("x.jsonl"))


def test_one_suffix_map_for_every_reader() -> None:
    assert table_format(Path("a.NDJSON"), allowed={"jsonl"}) == "jsonl"
    with pytest.raises(
        InputError,
        match=r"a\.txt: unsupported metadata file type '\.txt'\.\nHint: use one of \['\.csv', '\.parquet', '\.pq'\]",
    ):
        table_format(Path("a.txt"), allowed={"csv", "parquet"}, what="metadata")


def test_rows_are_numbered_as_the_file_counts_them() -> None:
    csv_data = b'model,note\na,"two\nlines"\n\nb,x\n'
    assert text_rows(csv_data, "csv", 2).lines.tolist() == [2, 5]  # type: ignore[union-attr]
    assert text_rows(csv_data, "csv").lines.tolist() == [2, 5]  # type: ignore[union-attr]
    jsonl_data = b'{"a": 1}\n\n{"a": 2}\n'
    assert text_rows(jsonl_data, "jsonl").lines.tolist() == [1, 3]  # type: ignore[union-attr]
    assert text_rows(b'{"a": 1}\n', "jsonl", 1).where(0) == "line 1"
    assert table_file.RowNumbers(unit="row", first=1).where(4) == "row 5"


@given(
    st.lists(
        st.sampled_from([b"{}", b"x", b" ", b"\t", b"\r", b"\x0b", b"\n"]), max_size=30
    )
)
def test_a_json_line_of_whitespace_only_is_blank(pieces: list[bytes]) -> None:
    """As ``bytes.strip`` has it (the line numbers a message names)."""
    data = b"".join(pieces)
    filled = [n for n, line in enumerate(data.split(b"\n"), 1) if line.strip()]
    assert table_file._record_lines(data, is_quoted=False).tolist() == filled


@pytest.mark.parametrize(
    "data", [b"", b"a", b"a\n", b"\n\n", b"a\nb", b"a\r\nb\r\n", b"x\n" * 1000 + b"y"]
)
def test_lines_are_counted_as_the_file_counts_them(
    monkeypatch: pytest.MonkeyPatch, data: bytes
) -> None:
    """Block by block (7 bytes here: newlines on every side of a block's edge)."""
    monkeypatch.setattr(table_file, "_COUNT_BYTES", 7)
    expected = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    assert table_file.count_lines(data) == expected
