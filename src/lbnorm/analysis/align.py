"""Line up rows of two tables by model variant, without a row-by-row join.

A long table (2 million subtask rows) is grouped once by its variant keys; only
the distinct keys (one row per variant) are joined to the reference, and the
positions are broadcast back to every row by integer code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm.core.schemas import KEY_COLUMNS

__all__ = [
    "align_rows",
    "align_variants",
    "group_codes",
    "is_variant",
    "match_keys",
    "nullable",
    "plain_keys",
    "take_at",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def plain_keys(frame: pd.DataFrame) -> pd.DataFrame:
    """Return the variant keys of `frame` as plain strings and bools.

    Output tables store text dictionary-encoded (pandas reads it as categories);
    joins need one spelling on both sides.

    Examples:
        >>> keys = pd.DataFrame({"model": pd.Categorical(["a"]), "precision": [""],
        ...     "revision": [""], "chat_template": [True]})
        >>> plain_keys(keys).dtypes.astype(str).tolist()
        ['str', 'str', 'str', 'bool']
    """
    return _plain(frame, KEY_COLUMNS)


def align_variants(rows: pd.DataFrame, reference: pd.DataFrame) -> IntArray:
    """Return, for each row of `rows`, the position of its variant in `reference`.

    Args:
        rows: Any table with the variant key columns (long tables welcome).
        reference: One row per variant (e.g. a leaderboard).

    Returns:
        Positions into `reference` (``0..len(reference)-1``), -1 where the
        variant is not in `reference`.

    Examples:
        >>> board = pd.DataFrame({"model": ["a", "b"], "precision": "", "revision": "",
        ...     "chat_template": False})
        >>> rows = pd.DataFrame({"model": ["b", "b", "c", "a"], "precision": "",
        ...     "revision": "", "chat_template": False})
        >>> align_variants(rows, board).tolist()
        [1, 1, -1, 0]
    """
    return align_rows(rows, reference, on=KEY_COLUMNS)


def align_rows(
    rows: pd.DataFrame, reference: pd.DataFrame, *, on: Sequence[str]
) -> IntArray:
    """Return, for each row of `rows`, the position of its key in `reference`.

    Args:
        rows: A table with the columns `on` (any length; text may be categorical).
        reference: A table unique on `on`.
        on: Key columns.

    Returns:
        Positions into `reference`, -1 where the key is not there.

    Examples:
        >>> bounds = pd.DataFrame({"benchmark": ["GPQA", "GPQA"], "subtask": ["main", "diamond"]})
        >>> rows = pd.DataFrame({"benchmark": ["GPQA"] * 3, "subtask": ["diamond", "x", "main"]})
        >>> align_rows(rows, bounds, on=["benchmark", "subtask"]).tolist()
        [1, -1, 0]
    """
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    columns = list(on)
    codes, first = group_codes(rows, columns)
    distinct = _plain(rows.iloc[first], columns)
    positions = _plain(reference, columns).assign(_position=np.arange(len(reference)))
    matched = distinct.merge(positions, on=columns, how="left", validate="one_to_one")
    lookup = matched["_position"].fillna(-1).to_numpy(dtype=np.int64)
    return np.asarray(lookup[codes], dtype=np.int64)


def match_keys(
    old: pd.DataFrame, new: pd.DataFrame, *, on: Sequence[str] = KEY_COLUMNS
) -> tuple[pd.DataFrame, IntArray, IntArray]:
    """Outer-join two tables unique on `on`: the keys, and each side's positions.

    Args:
        old: One side (e.g. a leaderboard).
        new: The other side.
        on: Key columns (default: the variant keys).

    Returns:
        The keys of either side (plain strings and bools), and per key its
        position in `old` and in `new` (-1 where that side lacks it).

    Examples:
        >>> old, new = pd.DataFrame({"model": ["a", "b"]}), pd.DataFrame({"model": ["b", "c"]})
        >>> keys, old_at, new_at = match_keys(old, new, on=["model"])
        >>> keys["model"].tolist(), old_at.tolist(), new_at.tolist()
        (['a', 'b', 'c'], [0, 1, -1], [-1, 0, 1])
    """
    keys = list(on)
    merged = (
        _plain(old, keys)
        .assign(_old=np.arange(len(old)))
        .merge(
            _plain(new, keys).assign(_new=np.arange(len(new))),
            on=keys,
            how="outer",
            validate="one_to_one",
            sort=False,
        )
    )
    old_at = merged["_old"].fillna(-1).to_numpy(dtype=np.int64)
    new_at = merged["_new"].fillna(-1).to_numpy(dtype=np.int64)
    return merged[keys], old_at, new_at


def is_variant(
    frame: pd.DataFrame, keys: Mapping[str, object]
) -> npt.NDArray[np.bool_]:
    """Which rows of `frame` hold the values of `keys` (a variant's, or some of them).

    Examples:
        >>> board = pd.DataFrame({"model": ["a", "a"], "precision": ["bf16", "fp16"]})
        >>> is_variant(board, {"model": "a", "precision": "fp16"}).tolist()
        [False, True]
    """
    found = np.ones(len(frame), dtype=bool)
    for name, value in keys.items():  # a variant's four keys at most
        found &= (frame[name].astype("object") == value).to_numpy(dtype=bool)
    return found


def take_at(frame: pd.DataFrame, name: str, at: IntArray) -> FloatArray:
    """Column `name` of `frame` as floats at positions `at` (NaN at -1, or where it has no such column).

    Examples:
        >>> frame = pd.DataFrame({"rank": [1, 2]})
        >>> take_at(frame, "rank", np.array([1, -1])).tolist(), take_at(frame, "x", np.array([0])).tolist()
        ([2.0, nan], [nan])
    """
    if name not in frame.columns or len(frame) == 0:
        return np.full(at.shape, np.nan)
    values = frame[name].to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(at >= 0, values[np.maximum(at, 0)], np.nan)


def nullable(
    values: FloatArray, dtype: Literal["Int64", "boolean"]
) -> pd.api.extensions.ExtensionArray:
    """Whole numbers (or 0/1) with NaN as a nullable pandas array (NaN becomes NA)."""
    return pd.Series(values, dtype="float64").astype(dtype).array


def group_codes(
    frame: pd.DataFrame, columns: Sequence[str]
) -> tuple[IntArray, IntArray]:
    """Number the distinct combinations of `columns`: a code per row, a first row per code.

    Each column becomes integer codes (a categorical's own codes, else
    ``pd.factorize``), combined in mixed radix into one integer. When equal keys
    sit in one run (lbnorm's tables are sorted by variant) the runs are the
    groups, in O(n); otherwise distinct integers are found with a lookup table
    when their range is small, else with one sort.

    Args:
        frame: The table.
        columns: The key columns (nulls are a value of their own).

    Returns:
        ``codes`` (``0..k-1`` per row) and ``first`` (the first row of each code).

    Examples:
        >>> frame = pd.DataFrame({"a": ["x", "y", "x", "y"], "b": [1, 1, 1, 2]})
        >>> [part.tolist() for part in group_codes(frame, ["a", "b"])]
        [[0, 1, 0, 2], [0, 1, 3]]
    """
    linear = np.zeros(len(frame), dtype=np.int64)
    space = 1
    for name in columns:  # a handful of key columns
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            codes = column.cat.codes.to_numpy(dtype=np.int64)
            size = len(column.cat.categories)
        else:
            codes, uniques = pd.factorize(column)
            size = len(uniques)
        size += 1  # code -1 (null) becomes 0
        if space * size >= 2**62:  # too many combinations to number: let pandas do it
            grouped = frame.groupby(
                list(columns), observed=True, sort=False, dropna=False
            )
            numbered: IntArray = np.asarray(grouped.ngroup().to_numpy(), dtype=np.int64)
            first: IntArray = np.unique(numbered, return_index=True)[1].astype(np.int64)
            return numbered, first
        linear = linear * size + (codes + 1)
        space *= size
    is_start = np.ones(len(frame), dtype=bool)
    is_start[1:] = linear[1:] != linear[:-1]
    starts = np.flatnonzero(is_start)
    # each key in one run (sorted tables)
    if np.unique(linear[starts]).size == starts.size:
        return np.cumsum(is_start, dtype=np.int64) - 1, starts.astype(np.int64)
    if space <= 4 * len(frame) + 1024:
        first_at = np.full(space, len(frame), dtype=np.int64)
        np.minimum.at(first_at, linear, np.arange(len(frame), dtype=np.int64))
        is_used = first_at < len(frame)
        number = np.cumsum(is_used) - 1
        # codes by first appearance
        order = np.argsort(first_at[is_used], kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        return rank[number[linear]].astype(np.int64), np.sort(first_at[is_used])
    _, first, inverse = np.unique(linear, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inverse.reshape(-1)].astype(np.int64), first[order].astype(np.int64)


def _plain(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    frame = frame.reset_index(drop=True)
    return pd.DataFrame(
        {
            name: frame[name].astype(bool)
            if pd.api.types.is_bool_dtype(frame[name])
            else frame[name].astype("str")
            for name in columns
        },
        index=pd.RangeIndex(len(frame)),
    )
