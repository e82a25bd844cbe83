"""lbnorm.core.arrow: numpy <-> Arrow without pandas, for every helper.

Each helper is checked against pyarrow's own conversion (which may load pandas
here, in the test process: the subprocess test at the end is the one that
counts): nulls, offsets (slices), chunked arrays, booleans at bit offsets,
empty arrays.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lbnorm.core import arrow

NUMERIC_TYPES = [
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float32(),
    pa.float64(),
]


def _dtype(type_: pa.DataType) -> np.dtype[Any]:
    dtype: np.dtype[Any] = np.dtype(type_.to_pandas_dtype())
    return dtype


@st.composite
def numeric_arrays(
    draw: st.DrawFn,
) -> tuple[pa.DataType, npt.NDArray[Any], npt.NDArray[np.bool_]]:
    """A numeric type, values of its dtype (NaN and infinities too) and a validity mask."""
    type_ = draw(st.sampled_from(NUMERIC_TYPES))
    size = draw(st.integers(0, 40))
    values = draw(hnp.arrays(_dtype(type_), size))
    valid = draw(hnp.arrays(np.bool_, size))
    return type_, values, valid


def _expected(values: npt.NDArray[Any], valid: npt.NDArray[np.bool_]) -> list[Any]:
    return [v if ok else None for v, ok in zip(values.tolist(), valid, strict=True)]


def _same(left: list[Any], right: list[Any]) -> bool:
    """Equal lists, NaN equal to NaN."""
    return len(left) == len(right) and all(
        a == b or (a != a and b != b) for a, b in zip(left, right, strict=True)
    )


# --- numbers, booleans, array ----------------------------------------------------


@given(case=numeric_arrays())
def test_numbers_round_trip_with_nulls(
    case: tuple[pa.DataType, npt.NDArray[Any], npt.NDArray[np.bool_]],
) -> None:
    type_, values, valid = case
    built = arrow.numbers(values, type_, valid=valid)
    built.validate(full=True)
    assert built.type == type_
    assert built.null_count == int((~valid).sum())
    assert _same(built.to_pylist(), _expected(values, valid))
    back = arrow.to_numpy(built, null=0)
    assert back.dtype == values.dtype
    np.testing.assert_array_equal(back, np.where(valid, values, 0))


@given(case=numeric_arrays(), start=st.integers(0, 40), length=st.integers(0, 40))
def test_to_numpy_reads_slices_at_their_offset(
    case: tuple[pa.DataType, npt.NDArray[Any], npt.NDArray[np.bool_]],
    start: int,
    length: int,
) -> None:
    type_, values, _ = case
    sliced = pa.array(values, type_).slice(start, length)
    np.testing.assert_array_equal(
        arrow.to_numpy(sliced), values[start : start + length]
    )


def test_to_numpy_without_nulls_is_zero_copy() -> None:
    values = pa.array(np.arange(10, dtype=np.float64)).slice(3, 4)
    data = np.frombuffer(values.buffers()[1], dtype=np.float64)
    read = arrow.to_numpy(values)
    assert np.shares_memory(read, data)
    assert read.tolist() == [3.0, 4.0, 5.0, 6.0]


def test_to_numpy_with_nulls_needs_a_fill_value() -> None:
    with pytest.raises(ValueError, match="nulls present and no fill value given"):
        arrow.to_numpy(pa.array([1.0, None]))
    assert arrow.to_numpy(pa.array([1.0, None]), null=-1.0).tolist() == [1.0, -1.0]


@given(
    chunks=st.lists(
        st.lists(st.none() | st.integers(-(2**40), 2**40), max_size=6), max_size=4
    ),
    cut=st.integers(0, 3),
)
def test_to_numpy_joins_chunks_and_fills_nulls(
    chunks: list[list[int | None]], cut: int
) -> None:
    arrays = [pa.array(chunk, pa.int64()) for chunk in chunks]
    arrays = [array.slice(min(cut, len(array))) for array in arrays]  # offsets too
    chunked = pa.chunked_array(arrays, pa.int64())
    expected = [-7 if value is None else value for value in chunked.to_pylist()]
    assert arrow.to_numpy(chunked, null=-7).tolist() == expected


@given(
    flags=st.lists(st.none() | st.booleans(), max_size=40),
    start=st.integers(0, 40),
    length=st.integers(0, 40),
)
def test_booleans_at_any_bit_offset(
    flags: list[bool | None], start: int, length: int
) -> None:
    sliced = pa.array(flags, pa.bool_()).slice(start, length)
    expected = [bool(flag) for flag in sliced.to_pylist()]  # null read as False
    read = arrow.to_numpy(sliced, null=False)
    assert read.dtype == np.bool_
    assert read.tolist() == expected
    chunked = pa.chunked_array([sliced, sliced], pa.bool_())
    assert arrow.to_numpy(chunked, null=False).tolist() == expected * 2


@given(
    flags=hnp.arrays(np.bool_, st.integers(0, 40)),
    data=st.data(),
)
def test_booleans_round_trip_with_nulls(
    flags: npt.NDArray[np.bool_], data: st.DataObject
) -> None:
    valid = data.draw(hnp.arrays(np.bool_, flags.size))
    built = arrow.booleans(flags, valid=valid)
    built.validate(full=True)
    assert built.type == pa.bool_()
    assert built.null_count == int((~valid).sum())
    assert built.to_pylist() == _expected(flags, valid)
    assert arrow.to_numpy(built, null=False).tolist() == (flags & valid).tolist()


@given(case=numeric_arrays())
def test_array_infers_the_type_and_masks(
    case: tuple[pa.DataType, npt.NDArray[Any], npt.NDArray[np.bool_]],
) -> None:
    type_, values, valid = case
    built = arrow.array(values, mask=~valid)
    assert built.type == type_
    assert _same(built.to_pylist(), _expected(values, valid))
    assert arrow.array(values).null_count == 0


def test_array_of_booleans_and_given_types() -> None:
    flags = arrow.array(np.array([True, False, True]), mask=np.array([0, 1, 0], bool))
    assert flags.type == pa.bool_()
    assert flags.to_pylist() == [True, None, True]
    widened = arrow.array(np.array([1, 2], dtype=np.int32), pa.int64())
    assert widened.type == pa.int64()
    assert widened.to_pylist() == [1, 2]


def test_numbers_take_strided_numpy_views() -> None:
    view = np.arange(10.0)[::3]  # not contiguous
    assert arrow.numbers(view, pa.float64()).to_pylist() == [0.0, 3.0, 6.0, 9.0]


@pytest.mark.parametrize("type_", [*NUMERIC_TYPES, pa.bool_()], ids=str)
def test_empty_arrays(type_: pa.DataType) -> None:
    dtype = np.bool_ if type_ == pa.bool_() else _dtype(type_)
    empty = np.zeros(0, dtype=dtype)
    built = arrow.array(empty, type_)
    assert (len(built), built.type) == (0, type_)
    for value in (built, pa.array([], type_), pa.chunked_array([], type_)):
        read = arrow.to_numpy(value)
        assert read.shape == (0,)
        assert read.dtype == dtype


def test_is_numeric_is_what_to_numpy_reads() -> None:
    for type_ in [*NUMERIC_TYPES, pa.bool_()]:
        assert arrow.is_numeric(type_)
    others = [
        pa.string(),
        pa.float16(),
        pa.decimal128(5, 2),
        pa.timestamp("s"),
        pa.dictionary(pa.int32(), pa.string()),
        pa.null(),
    ]
    assert not any(arrow.is_numeric(type_) for type_ in others)


# --- strings, string lists, dictionaries, scalars -----------------------------------

texts = st.text(max_size=6)  # any code point, the empty string, NUL


@given(values=st.lists(st.none() | texts, max_size=30))
def test_strings_round_trip(values: list[str | None]) -> None:
    built = arrow.strings(values)
    built.validate(full=True)
    assert built.type == pa.string()
    assert built.null_count == values.count(None)
    assert built.to_pylist() == values
    assert built.equals(pa.array(values, pa.string()))


@given(
    lists=st.lists(st.lists(texts, max_size=4), max_size=12),
    data=st.data(),
)
def test_string_lists_round_trip_with_nulls(
    lists: list[list[str]], data: st.DataObject
) -> None:
    valid = data.draw(hnp.arrays(np.bool_, len(lists)))
    built = arrow.string_lists(lists, valid=valid)
    built.validate(full=True)
    assert built.type == pa.list_(pa.string())
    assert built.to_pylist() == [
        items if ok else None for items, ok in zip(lists, valid, strict=True)
    ]
    assert arrow.string_lists(lists).to_pylist() == lists


@given(
    values=st.lists(texts, min_size=1, max_size=8, unique=True),
    data=st.data(),
)
def test_dictionary_round_trip(values: list[str], data: st.DataObject) -> None:
    indices = data.draw(
        hnp.arrays(
            np.int64, st.integers(0, 20), elements=st.integers(0, len(values) - 1)
        )
    )
    built = arrow.dictionary(indices, arrow.strings(values))
    built.validate(full=True)
    assert built.type == pa.dictionary(pa.int32(), pa.string())
    assert built.to_pylist() == [values[i] for i in indices]
    assert arrow.to_numpy(built.indices).tolist() == indices.tolist()


@pytest.mark.parametrize(
    ("value", "type_"),
    [
        ("a/b", pa.string()),
        ("", pa.string()),
        (True, pa.bool_()),
        (False, pa.bool_()),
        (3, pa.int64()),
        (3, pa.int32()),
        (0.25, pa.float64()),
        (None, pa.float64()),
        (None, pa.string()),
    ],
)
def test_scalar(value: str | float | bool | None, type_: pa.DataType) -> None:
    built = arrow.scalar(value, type_)
    assert built.type == type_
    assert built.as_py() == value
    assert built.is_valid == (value is not None)


def test_empty_text_helpers() -> None:
    assert arrow.strings([]).equals(pa.array([], pa.string()))
    assert arrow.string_lists([]).equals(pa.array([], pa.list_(pa.string())))
    empty = arrow.dictionary(np.zeros(0, np.int64), arrow.strings([]))
    assert (len(empty), empty.type) == (0, pa.dictionary(pa.int32(), pa.string()))


# --- no pandas ----------------------------------------------------------------------

_EVERY_HELPER = """
import sys
import numpy as np
import pyarrow as pa
from lbnorm.core import arrow

valid = np.array([True, False, True])
numbers = arrow.numbers(np.array([1.5, 2.0, 3.0]), pa.float64(), valid=valid)
flags = arrow.booleans(np.array([True, False, True]), valid=valid)
assert arrow.to_numpy(numbers, null=0.0).tolist() == [1.5, 0.0, 3.0]
assert arrow.to_numpy(flags.slice(1), null=False).tolist() == [False, True]
assert arrow.to_numpy(pa.chunked_array([numbers, numbers]), null=-1.0).size == 6
assert arrow.array(np.arange(3), mask=~valid).to_pylist() == [0, None, 2]
assert arrow.array(np.array([True, False])).to_pylist() == [True, False]
assert arrow.strings(["a", None]).to_pylist() == ["a", None]
assert arrow.string_lists([["a"], []], valid=np.array([True, False])).to_pylist() == [["a"], None]
assert arrow.dictionary(np.array([1, 0]), arrow.strings(["x", "y"])).to_pylist() == ["y", "x"]
for value, type_ in [(None, pa.int64()), ("x", pa.string()), (True, pa.bool_()), (2.5, pa.float64())]:
    arrow.scalar(value, type_)
assert arrow.is_numeric(pa.int32())
schema = pa.schema([("model", pa.string()), ("score", pa.float64())])
assert arrow.empty_table(schema).schema == schema and arrow.empty_table(schema).num_rows == 0
loaded = sorted(name for name in sys.modules if name.split(".")[0] == "pandas")
assert not loaded, f"lbnorm.core.arrow loaded pandas: {loaded[:5]}"
"""


def test_helpers_never_import_pandas() -> None:
    """Every helper, run in a fresh process, leaves pandas unloaded."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_EVERY_HELPER)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
