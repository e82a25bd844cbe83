"""Model variants' keys as ids into one vocabulary per text column.

:class:`Variants` is what an encoder hands on: per variant, the ids of its model,
precision and revision, and its chat-template flag; :func:`merge_variants` joins
sets of them, and :func:`factorize` gives integer codes in order of first
appearance.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core import arrow
from lbnorm.core.schemas import KEY_COLUMNS

__all__ = [
    "MANY_KEYS",
    "TEXT_KEYS",
    "Variants",
    "factorize",
    "group_keys",
    "merge_variants",
    "variant_labels",
]

IntArray = npt.NDArray[np.int64]
#: The text keys of a variant.
TEXT_KEYS = ("model", "precision", "revision")
#: The keys with about a value per variant (their registries are sized for them).
MANY_KEYS = ("model", "revision")


@dataclass(frozen=True, slots=True, kw_only=True)
class Variants:
    """Model variants' keys: per text key, each variant's id in a vocabulary.

    Attributes:
        vocabularies: ``model``, ``precision``, ``revision`` -> their distinct
            strings, by id.
        codes: ``(n_variants, 4)``: the ids of model, precision and revision,
            and chat_template as 0/1.
    """

    vocabularies: dict[str, pa.Array]
    codes: IntArray

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def n_models(self) -> int:
        """Distinct model names among these variants."""
        return int(np.count_nonzero(np.bincount(self.codes[:, 0])))

    def take(self, order: IntArray, *, renumber: bool = False) -> Variants:
        """These variants, rows in `order`.

        With `renumber`, a model or revision vocabulary whose equal ids come in
        runs in `order` (models, in key order; revisions, when each variant has
        its own or they come model by model) is renumbered by first use and
        stripped of the strings no variant uses: variants taken in key order
        then take their names in vocabulary order (a run of them: a slice, see
        :meth:`dictionary`), not from all over it.
        """
        # np.take: fancy indexing of a 2-D array along axis 0 is several times slower
        codes = np.take(self.codes, order, axis=0)
        vocabularies = dict(self.vocabularies)
        for name in MANY_KEYS if renumber else ():
            position = TEXT_KEYS.index(name)
            ids = codes[:, position]
            is_start = np.ones(ids.size, dtype=bool)
            np.not_equal(ids[1:], ids[:-1], out=is_start[1:])
            used = ids[is_start]
            if not used.size or np.bincount(used).max() == 1:  # ids in one run each
                vocabularies[name] = vocabularies[name].take(arrow.array(used))
                np.cumsum(is_start, out=ids)  # (ids: a view of the codes)
                ids -= 1
        return Variants(vocabularies=vocabularies, codes=codes)

    def order(self) -> IntArray:
        """Row order sorting variants by (model, precision, revision, chat_template).

        Strings compare by code point (UTF-8 byte order), as Python compares them.
        Revisions are compared only where two variants share a model and a
        precision (a few; sorting every sha would cost as much as the models).
        """
        codes = self.codes
        if not codes.shape[0]:
            return np.zeros(0, dtype=np.int64)
        models, precisions = self.vocabularies["model"], self.vocabularies["precision"]
        width = max(len(precisions), 1)
        # (model, precision) ranks in one int32 where they fit: at 5M variants
        # each array is 20 MB, and the order is found beside the spilled sums
        kind = np.int32 if len(models) * width < 2**31 else np.int64
        first = _string_ranks(models, kind)[codes[:, 0]]
        first *= width
        first += _string_ranks(precisions, kind)[codes[:, 1]]  # ranks: no overflow
        by_first = np.argsort(first, kind="stable")
        ordered = first[by_first]
        is_tied = np.zeros(ordered.size, dtype=bool)
        is_tied[1:] = ordered[1:] == ordered[:-1]
        is_tied[:-1] |= is_tied[1:]
        del ordered
        if not is_tied.any():
            return by_first.astype(np.int64, copy=False)
        # the tied come in runs of one (model, precision) each: each run is
        # sorted by (revision, chat_template) in place, the rest stays
        at = np.flatnonzero(is_tied)
        tied = by_first[at]
        revision_ids, inverse = np.unique(codes[tied, 2], return_inverse=True)
        revisions = self.vocabularies["revision"].take(arrow.array(revision_ids))
        revision = _string_ranks(revisions)[inverse.ravel()]
        by_first[at] = tied[np.lexsort([codes[tied, 3], revision, first[tied]])]
        return by_first.astype(np.int64, copy=False)

    def dictionary(
        self, name: str, rows: IntArray | None = None, *, distinct: bool = True
    ) -> pa.DictionaryArray:
        """A text key per variant (or per row: `rows` are variant positions).

        The dictionary holds the variants' distinct values in order of first
        appearance (over the variants, not the rows), int32 indices; or, not
        `distinct`, a value per variant, repeats included (valid Arrow, for a
        column written without a dictionary page: nothing to factorize).
        """
        position = TEXT_KEYS.index(name)
        ids = self.codes[:, position]
        if not distinct:
            indices = np.arange(ids.size) if rows is None else rows
            return arrow.dictionary(indices, _taken(self.vocabularies[name], ids))
        codes, first = factorize(ids)
        indices = codes if rows is None else codes[rows]
        return arrow.dictionary(
            indices, self.vocabularies[name].take(arrow.array(ids[first]))
        )

    def strings(self, name: str) -> pa.Array:
        """A text key per variant, as plain strings."""
        position = TEXT_KEYS.index(name)
        return self.vocabularies[name].take(arrow.array(self.codes[:, position]))

    def flags(self, rows: IntArray | None = None) -> pa.Array:
        """chat_template per variant (or per row: `rows` are variant positions)."""
        flag = self.codes[:, 3].astype(bool)
        return arrow.array(flag if rows is None else flag[rows])

    def table(self) -> pa.Table:
        """The keys as a table of plain columns, one row per variant."""
        columns = {name: self.strings(name) for name in TEXT_KEYS}
        return pa.table({**columns, "chat_template": self.flags()}).select(
            list(KEY_COLUMNS)
        )

    @classmethod
    def from_table(cls, keys: pa.Table) -> Variants:
        """Variants from a table of key columns (plain or dictionary strings)."""
        vocabularies: dict[str, pa.Array] = {}
        codes = np.zeros((keys.num_rows, 4), dtype=np.int64)
        for position, name in enumerate(TEXT_KEYS):
            vocabularies[name], codes[:, position] = _encode_strings(keys.column(name))
        flags = keys.column("chat_template").cast(pa.bool_())
        codes[:, 3] = arrow.to_numpy(flags, null=False)
        return cls(vocabularies=vocabularies, codes=codes)


def variant_labels(keys: pa.Table) -> list[str]:
    """Each row's variant as messages name it: ``model [precision]``, or the model alone.

    Examples:
        >>> variant_labels(pa.table({"model": ["a/x", "b/y"], "precision": ["bf16", ""]}))
        ['a/x [bf16]', 'b/y']
    """
    models = keys["model"].to_pylist()
    has_precision = "precision" in keys.column_names
    precisions = (
        keys["precision"].to_pylist() if has_precision else [None] * len(models)
    )
    return [
        f"{model} [{precision}]" if precision else str(model)
        for model, precision in zip(models, precisions, strict=True)
    ]


def merge_variants(parts: Sequence[Variants]) -> tuple[Variants, IntArray]:
    """The distinct variants of several sets, and each input variant's position.

    Args:
        parts: Sets of variants (each with vocabularies of its own).

    Returns:
        The distinct variants (in order of first appearance) and, for every
        variant of every part in turn, its row among them.

    Examples:
        >>> a = Variants.from_table(pa.table({"model": ["x", "y"], "precision": ["", ""],
        ...     "revision": ["", ""], "chat_template": [False, False]}))
        >>> b = Variants.from_table(pa.table({"model": ["y"], "precision": [""],
        ...     "revision": [""], "chat_template": [False]}))
        >>> merged, rows = merge_variants([a, b])
        >>> merged.strings("model").to_pylist(), rows.tolist()
        (['x', 'y'], [0, 1, 1])
    """
    vocabularies: dict[str, pa.Array] = {}
    counts = [len(part) for part in parts]
    codes = np.concatenate([part.codes for part in parts])
    for position, name in enumerate(TEXT_KEYS):
        # every part's distinct values, encoded together: one id per string
        strings = [part.vocabularies[name] for part in parts]
        vocabularies[name], ids = _encode_strings(
            pa.chunked_array(strings, type=pa.string())
        )
        starts = np.cumsum([0, *map(len, strings)])[:-1]
        codes[:, position] = ids[codes[:, position] + np.repeat(starts, counts)]
    rows, first = group_keys(
        list(codes.T), [int(column.max(initial=-1)) + 1 for column in codes.T]
    )
    return Variants(vocabularies=vocabularies, codes=codes[first]), rows


def group_keys(
    parts: Sequence[npt.NDArray[np.integer[Any]]], widths: Sequence[int]
) -> tuple[IntArray, IntArray]:
    """Group rows by several small-int key columns (-1 = null), without sorting.

    The columns are packed into one int64 per row, re-densified whenever the
    next packing could overflow, and factorized.

    Args:
        parts: Per key column (at least one), each row's value in ``-1..width-1``.
        widths: Per key column, its number of non-null values.

    Returns:
        Each row's group, in order of first appearance, and each group's first row.

    Examples:
        >>> groups, first = group_keys([np.array([1, 0, 1]), np.array([-1, 2, -1])], [2, 3])
        >>> groups.tolist(), first.tolist()
        ([0, 1, 0], [0, 1])
    """
    packed = np.zeros(parts[0].shape[0], dtype=np.int64)
    bound = 1
    for part, width in zip(parts, widths, strict=True):
        if bound * (width + 1) >= 1 << 62:
            packed, first = factorize(packed)
            bound = len(first)
        packed = packed * (width + 1) + (part + 1)  # +1: null (-1) packs as 0
        bound *= width + 1
    return factorize(packed)


def factorize(values: npt.NDArray[np.generic]) -> tuple[IntArray, IntArray]:
    """Codes in order of first appearance, and each code's first position.

    Integers in a range a few times their number go through a table (no sort,
    no hashing); any other values (wider integers, strings) through Arrow's
    hash table, which numbers the distinct values in order of first
    appearance, so a value's first row is where the running maximum of the
    codes grows.

    Examples:
        >>> codes, first = factorize(np.array([7, 3, 7, 5]))
        >>> codes.tolist(), first.tolist()
        ([0, 1, 0, 2], [0, 1, 3])
    """
    if values.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        if high - low <= 4 * values.size:  # dense integers: a table
            offset = values.astype(np.int64) - low
            positions = np.arange(values.size)
            first_at = np.full(high - low + 1, values.size, dtype=np.int64)
            np.minimum.at(first_at, offset, positions)
            first = np.flatnonzero(first_at[offset] == positions)
            code_of = np.empty_like(first_at)
            code_of[offset[first]] = np.arange(first.size)
            return code_of[offset], first
    encoded = pc.dictionary_encode(
        arrow.array(values)
        if values.dtype.kind in "iu"
        else arrow.strings(values.tolist())
    )
    codes = arrow.to_numpy(encoded.indices).astype(np.int64)
    seen = np.maximum.accumulate(codes)
    is_first = np.empty(codes.size, dtype=bool)
    is_first[0] = True
    np.greater(seen[1:], seen[:-1], out=is_first[1:])
    return codes, np.flatnonzero(is_first)


def _taken(values: pa.Array, ids: IntArray) -> pa.Array:
    """``values.take(ids)``; a slice (no copy) if `ids` are one increasing run."""
    spans_run = ids.size and int(ids[-1]) - int(ids[0]) == ids.size - 1  # (cheap first)
    if spans_run and bool((np.diff(ids) == 1).all()):
        return values.slice(int(ids[0]), ids.size)
    return values.take(arrow.array(ids))


def _string_ranks(
    values: pa.Array, kind: type[np.signedinteger[Any]] = np.int64
) -> npt.NDArray[Any]:
    """Each string's position in sorted order (by UTF-8 bytes = code point order)."""
    order = arrow.to_numpy(pc.array_sort_indices(values))
    ranks = np.empty(len(values), dtype=kind)
    ranks[order] = np.arange(len(values), dtype=kind)
    return ranks


def _encode_strings(values: pa.ChunkedArray) -> tuple[pa.Array, IntArray]:
    """Distinct strings in order of first appearance, and each value's id among them.

    Plain or dictionary strings; a null is encoded as the empty string.
    """
    values = values.cast(pa.string())  # (a column of no rows may be of type null)
    if values.null_count:
        values = pc.fill_null(values, arrow.scalar("", pa.string()))
    encoded = values.dictionary_encode().unify_dictionaries().combine_chunks()
    return encoded.dictionary, arrow.to_numpy(encoded.indices).astype(np.int64)
