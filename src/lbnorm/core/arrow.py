"""Arrow arrays from numpy and Python values, and back, without importing pandas.

pyarrow probes for pandas (and so imports it, slower than the job at the
real leaderboard's size) the first time it converts
a Python or numpy value: ``pa.array``, ``pa.scalar``, ``Array.to_numpy``, a
Python scalar handed to a compute function. lbnorm's run path (readers, engines,
result tables, writer) builds its columns here instead, from buffers, so a run
loads no pandas; compute functions are then called with Arrow values only.

Examples:
    >>> strings(["a", None, "bc"]).to_pylist()
    ['a', None, 'bc']
    >>> numbers(np.array([1.5, 2.0]), pa.float64(), valid=np.array([True, False])).to_pylist()
    [1.5, None]
    >>> to_numpy(numbers(np.array([3, 4]), pa.int64())).tolist()
    [3, 4]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "BoolArray",
    "FloatArray",
    "IntArray",
    "array",
    "bitmap",
    "booleans",
    "dictionary",
    "empty_table",
    "is_numeric",
    "numbers",
    "optional_numbers",
    "scalar",
    "string_lists",
    "strings",
    "to_numpy",
]

#: The numpy arrays of lbnorm's columns, as every layer annotates them.
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

_DTYPES = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
    pa.uint8(): np.uint8,
    pa.uint16(): np.uint16,
    pa.uint32(): np.uint32,
    pa.uint64(): np.uint64,
    pa.float32(): np.float32,
    pa.float64(): np.float64,
}


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of no rows of `schema` (``Schema.empty_table`` would import pandas)."""
    return pa.Table.from_arrays(
        [pa.nulls(0, field.type) for field in schema], schema=schema
    )


def is_numeric(type_: pa.DataType) -> bool:
    """Whether :func:`to_numpy` reads `type_` (a fixed-width number or a boolean)."""
    return type_ in _DTYPES or pa.types.is_boolean(type_)


def bitmap(mask: npt.NDArray[np.bool_] | None) -> pa.Buffer | None:
    """An Arrow validity bitmap of `mask` (None: all valid)."""
    if mask is None or bool(mask.all()):
        return None
    return pa.py_buffer(np.packbits(mask, bitorder="little"))


def numbers(
    values: npt.NDArray[np.generic],
    type_: pa.DataType,
    *,
    valid: npt.NDArray[np.bool_] | None = None,
) -> pa.Array:
    """A numeric array of `values` (cast to `type_`'s dtype); null where not `valid`."""
    data = np.ascontiguousarray(values, dtype=_DTYPES[type_])
    null_count = -1 if valid is None or valid.all() else int((~valid).sum())
    return pa.Array.from_buffers(
        type_,
        len(data),
        [bitmap(valid), pa.py_buffer(data)],
        null_count=max(null_count, 0),
    )


def booleans(
    values: npt.NDArray[np.bool_], *, valid: npt.NDArray[np.bool_] | None = None
) -> pa.Array:
    """A boolean array; null where not `valid`."""
    flags = np.asarray(values, dtype=bool)
    null_count = 0 if valid is None or valid.all() else int((~valid).sum())
    return pa.Array.from_buffers(
        pa.bool_(),
        len(flags),
        [bitmap(valid), pa.py_buffer(np.packbits(flags, bitorder="little"))],
        null_count=null_count,
    )


def optional_numbers(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """Python numbers with None for null, as Arrow.

    Examples:
        >>> optional_numbers([1.5, None, float("nan")], pa.float64()).to_pylist()
        [1.5, None, nan]
    """
    valid = np.array([value is not None for value in values], dtype=bool)
    data = np.array(
        [0 if value is None else value for value in values], dtype=_DTYPES[type_]
    )
    return numbers(data, type_, valid=valid)


def strings(values: Sequence[str | None]) -> pa.Array:
    """A string array (None: null). One Python step per value: for few values."""
    encoded = [b"" if value is None else value.encode("utf-8") for value in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(item) for item in encoded], out=offsets[1:])
    valid = np.array([value is not None for value in values], dtype=bool)
    data = pa.Array.from_buffers(
        pa.large_string(),
        len(encoded),
        [bitmap(valid), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))],
        null_count=int((~valid).sum()),
    )
    return data.cast(pa.string())


def string_lists(
    lists: Sequence[Sequence[str]], *, valid: npt.NDArray[np.bool_] | None = None
) -> pa.Array:
    """A list<string> array; null where not `valid`."""
    offsets = np.zeros(len(lists) + 1, dtype=np.int32)
    np.cumsum([len(items) for items in lists], out=offsets[1:])
    distinct: dict[str, int] = {}  # lists repeat a few names: encode each once
    codes = np.fromiter(
        (distinct.setdefault(item, len(distinct)) for items in lists for item in items),
        dtype=np.int64,
        count=int(offsets[-1]),
    )
    flat = strings(list(distinct)).take(numbers(codes, pa.int64()))
    null_count = 0 if valid is None or valid.all() else int((~valid).sum())
    return pa.Array.from_buffers(
        pa.list_(pa.string()),
        len(lists),
        [bitmap(valid), pa.py_buffer(offsets)],
        null_count=null_count,
        children=[flat],
    )


def scalar(value: str | float | int | bool | None, type_: pa.DataType) -> pa.Scalar:
    """An Arrow scalar, for compute functions (a Python value would probe pandas)."""
    if value is None:
        return pa.nulls(1, type_)[0]
    if pa.types.is_string(type_):
        assert isinstance(value, str)
        return strings([value])[0]
    if pa.types.is_boolean(type_):
        return booleans(np.array([bool(value)]))[0]
    return numbers(np.array([value]), type_)[0]


def to_numpy(
    values: pa.Array | pa.ChunkedArray, *, null: float | int | None = None
) -> npt.NDArray[Any]:
    """A numeric or boolean column as numpy; nulls become `null` (required if any)."""
    if isinstance(values, pa.ChunkedArray):
        if not values.num_chunks:  # (combine_chunks would probe for pandas)
            return np.empty(0, dtype=_numpy_type(values.type))
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if values.null_count:
        if null is None:
            msg = "to_numpy: nulls present and no fill value given"
            raise ValueError(msg)
        values = pc.fill_null(values, scalar(null, values.type))
    length, offset = len(values), values.offset
    if pa.types.is_boolean(values.type):
        bits = np.frombuffer(values.buffers()[1], dtype=np.uint8)
        unpacked = np.unpackbits(bits, bitorder="little")
        return unpacked[offset : offset + length].astype(bool)
    dtype = _DTYPES[values.type]
    return np.frombuffer(
        values.buffers()[1],
        dtype=dtype,
        count=length,
        offset=offset * np.dtype(dtype).itemsize,
    )


def _numpy_type(type_: pa.DataType) -> type[np.generic]:
    return np.bool_ if pa.types.is_boolean(type_) else _DTYPES[type_]


_ARROW_TYPES = {np.dtype(dtype): type_ for type_, dtype in _DTYPES.items()}


def array(
    values: npt.NDArray[np.generic],
    type_: pa.DataType | None = None,
    *,
    mask: npt.NDArray[np.bool_] | None = None,
) -> pa.Array:
    """A numeric or boolean numpy array as Arrow; null where `mask` is True.

    Examples:
        >>> array(np.array([1.5, np.nan]), mask=np.array([False, True])).to_pylist()
        [1.5, None]
    """
    valid = None if mask is None else ~mask
    if np.asarray(values).dtype == np.bool_:
        return booleans(np.asarray(values, dtype=np.bool_), valid=valid)
    kind = _ARROW_TYPES[np.asarray(values).dtype] if type_ is None else type_
    return numbers(values, kind, valid=valid)


def dictionary(indices: npt.NDArray[np.integer[Any]], values: pa.Array) -> pa.Array:
    """A dictionary array: int32 `indices` into `values`.

    Examples:
        >>> dictionary(np.array([1, 0, 1]), strings(["a", "b"])).to_pylist()
        ['b', 'a', 'b']
    """
    return pa.DictionaryArray.from_arrays(
        numbers(np.asarray(indices), pa.int32()), values
    )
