"""Keys to integer codes: model variants and suite subtasks, batch by batch.

The kernel works on codes, not strings. :class:`KeyEncoder` gives every model
variant (model, precision, revision, chat_template) a code as batches arrive, and
maps each (benchmark, subtask) to its position in the suite; :class:`Variants`
holds the variants' keys as ids into one vocabulary per text column.

Per batch, each text column becomes dictionary indices (Parquet hands them over
that way, and they are used in place: -1 marks a null). Rows of one variant
usually come together, so the key columns are cut into runs where any of them
changes, and only the runs' keys are packed and factorized. Only the batch's
*distinct* values and variants then meet the global registries, through C-level
dict look-ups (``map``), never a Python step per row.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core import arrow
from lbnorm.core.errors import InputError
from lbnorm.core.schemas import KEY_COLUMNS

__all__ = ["KeyEncoder", "Variants", "factorize", "merge_variants"]

IntArray = npt.NDArray[np.int64]
_TEXT_KEYS = ("model", "precision", "revision")
#: The keys with about a value per variant (their registries are sized for them).
_MANY = ("model", "revision")
_NULL = -1
_Item = TypeVar("_Item", bound=np.generic)
_EMPTY = arrow.strings([])

#: The hash multiplier M (and its inverse) of :func:`_hash_strings`.
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd: invertible modulo 2**64
_INVERSE = np.uint64(pow(0x9E3779B97F4A7C15, -1, 2**64))


class _Powers:
    """``M**i`` and ``M**-i`` modulo 2**64 for i < n, grown on demand."""

    def __init__(self) -> None:
        self.up: npt.NDArray[Any] = np.ones(1, dtype=np.uint64)
        self.down: npt.NDArray[Any] = np.ones(1, dtype=np.uint64)

    def reserve(self, n: int) -> None:
        if n <= self.up.size:
            return
        size = max(n, 2 * self.up.size)
        self.up = np.cumprod(np.full(size, _MULTIPLIER, dtype=np.uint64)) * _INVERSE
        self.down = np.cumprod(np.full(size, _INVERSE, dtype=np.uint64)) * _MULTIPLIER


_POWERS = _Powers()


def _mix(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """A 64-bit finalizer (splitmix64's): every input bit moves every output bit."""
    values = values ^ (values >> np.uint64(30))
    values *= np.uint64(0xBF58476D1CE4E5B9)
    values ^= values >> np.uint64(27)
    values *= np.uint64(0x94D049BB133111EB)
    values ^= values >> np.uint64(31)
    return values


def _string_buffers(
    values: pa.Array,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """A string array's offsets (rebased to 0, int64) and its bytes, without copies."""
    n = len(values)
    buffers = values.buffers()
    width = 8 if pa.types.is_large_string(values.type) else 4
    offsets = np.frombuffer(
        buffers[1],
        dtype=np.int64 if width == 8 else np.int32,
        count=n + 1,
        offset=values.offset * width,
    ).astype(np.int64)
    data = (
        np.zeros(0, dtype=np.uint8)
        if buffers[2] is None
        else np.frombuffer(buffers[2], dtype=np.uint8)
    )
    first = int(offsets[0])
    return offsets - first, data[first : int(offsets[-1])]


def _hash_strings(values: pa.Array) -> npt.NDArray[np.uint64]:
    """A 64-bit hash per string (no nulls), computed from the Arrow buffers in numpy.

    A polynomial hash of the bytes: ``sum(b_i * M**i)``, taken from one prefix
    sum over the bytes of a block of strings and shifted back by ``M**-start``,
    then mixed with the length and finished by splitmix64's mixer. Equal strings
    hash equal; the registries check every match against the strings
    themselves, so a collision is caught. The bytes are multiplied as they are
    (widened inside the multiplication) into one buffer the prefix sum runs in:
    no per-byte table lookup or fresh array per block, which cost 5x the
    arithmetic.
    """
    offsets, data = _string_buffers(values)
    hashes = np.empty(offsets.size - 1, dtype=np.uint64)
    prefix = np.zeros(0, dtype=np.uint64)
    first = 0
    while first < hashes.size:  # blocks of strings of ~_HASH_BLOCK bytes
        last = int(
            np.searchsorted(offsets, offsets[first] + _HASH_BLOCK, side="right") - 1
        )
        last = min(max(last, first + 1), hashes.size)
        block = offsets[first : last + 1] - offsets[first]
        size = int(block[-1])
        _POWERS.reserve(size + 1)
        if prefix.size < size + 1:  # one buffer for every block (a long string: more)
            prefix = np.zeros(max(size, _HASH_BLOCK) + 1, dtype=np.uint64)
        start = int(offsets[first])
        sums = prefix[1 : size + 1]
        np.multiply(data[start : start + size], _POWERS.up[:size], out=sums)
        np.cumsum(sums, out=sums)
        starts = block[:-1]
        part = (prefix[block[1:]] - prefix[starts]) * _POWERS.down[starts]
        part ^= np.diff(block).astype(np.uint64) * _MULTIPLIER
        hashes[first:last] = part
        first = last
    return _mix(hashes)


#: Bytes hashed per block (the power tables stay this size: 2 MB each).
_HASH_BLOCK = 1 << 18
#: The most slots a hash table is given before its keys come (64 MB): past
#: 8M keys it grows as they come.
_MOST_SLOTS = 1 << 24


class _HashIndex:
    """An open-addressing hash table from uint64 keys to ids, in numpy.

    Lookups and inserts go a whole batch of keys at a time, probing linearly; the
    Python loop runs once per probe step (a few), not per key. Keys are hashes
    or packed codes: the caller checks what a match means. The slots hold int32
    ids, the keys are kept by id (so a slot costs 4 bytes, and the table can
    stay at most half full: a key that is absent, most of a batch's in a large
    run, ends its probe after ~2.5 steps on average, ~6 at 70%). 5M keys take
    104-124 MB.
    """

    def __init__(self, capacity: int = 1 << 10, *, expected: int = 0) -> None:
        self._slots_ids = np.full(capacity, _NULL, dtype=np.int32)
        self._shift = np.uint64(64 - (capacity.bit_length() - 1))
        # by id (never empty: see find)
        self._keys = np.zeros(max(expected, 1), dtype=np.uint64)
        self.size = 0

    @classmethod
    def for_keys(cls, expected: int) -> _HashIndex:
        """A table with room for `expected` keys made up front (at most :data:`_MOST_SLOTS`).

        Up to there no key is placed twice: growing re-places every key.
        """
        expected = min(expected, _MOST_SLOTS // 2)
        capacity = 1 << max(10, (2 * expected - 1).bit_length())
        return cls(capacity, expected=expected)

    def _slots(self, keys: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        return ((keys * _MULTIPLIER) >> self._shift).astype(np.int64)

    def find(self, keys: npt.NDArray[np.uint64]) -> IntArray:
        """Each key's id, -1 where absent."""
        table, by_id = self._slots_ids, self._keys
        slots = self._slots(keys)
        ids = table[slots]
        is_used = ids >= 0
        is_hit = is_used & (by_id[ids] == keys)  # (-1 reads the last key: unused)
        found = np.where(is_hit, ids, _NULL).astype(np.int64)
        pending = np.flatnonzero(is_used & ~is_hit)  # probed on from the next slot
        mask = table.size - 1
        slots = (slots[pending] + 1) & mask
        while pending.size:
            ids = table[slots]
            is_used = ids >= 0
            is_hit = is_used & (by_id[ids] == keys[pending])
            found[pending[is_hit]] = ids[is_hit]
            go_on = is_used & ~is_hit
            pending, slots = pending[go_on], (slots[go_on] + 1) & mask
        return found

    def insert(self, keys: npt.NDArray[np.uint64], ids: IntArray) -> bool:
        """Add keys that are not in the table yet, with their ids (distinct, >= 0).

        Returns:
            Whether the keys were distinct. A key given twice is added once
            (with the id of one of its copies): the caller decides what that means.
        """
        if not keys.size:
            return True
        needed = int(ids.max()) + 1
        if needed > self._keys.size:  # by half: amortized, with less room unused
            grown = np.zeros(max(needed, 3 * self._keys.size // 2), dtype=np.uint64)
            grown[: self._keys.size] = self._keys
            self._keys = grown
        self._keys[ids] = keys  # (copies of a key write the same key)
        if 2 * (self.size + keys.size) > self._slots_ids.size:
            old = self._slots_ids[self._slots_ids >= 0].astype(np.int64)
            capacity = self._slots_ids.size
            while 2 * (self.size + keys.size) > capacity:
                capacity *= 2
            self._slots_ids = np.full(capacity, _NULL, dtype=np.int32)
            self._shift = np.uint64(64 - (capacity.bit_length() - 1))
            self._place(self._keys[old], old)
        is_distinct, added = self._place(keys, ids)
        self.size += added
        return is_distinct

    def _place(self, keys: npt.NDArray[np.uint64], ids: IntArray) -> tuple[bool, int]:
        """Put ids in free slots (the keys are stored); whether distinct, how many placed."""
        table = self._slots_ids
        is_distinct, added = True, 0
        pending = np.arange(keys.size)
        slots = self._slots(keys)
        mask = table.size - 1
        while pending.size:
            free = np.flatnonzero(table[slots] < 0)
            aimed = slots[free]
            # keys aiming at the same free slot: the last write wins it
            table[aimed] = -2 - free
            is_won = table[aimed] == -2 - free
            won, taken = free[is_won], aimed[is_won]
            table[taken] = ids[pending[won]]
            added += won.size
            go_on = np.ones(pending.size, dtype=bool)
            go_on[won] = False
            rest = np.flatnonzero(go_on)  # their slots are taken (every raced one won)
            # a slot taken by an equal key: by a copy given in this call
            is_copy = self._keys[table[slots[rest]]] == keys[pending[rest]]
            if is_copy.any():
                is_distinct = False
                rest = rest[~is_copy]
            pending, slots = pending[rest], (slots[rest] + 1) & mask
        return is_distinct, added


class _Vocabulary:
    """A growing string -> id registry, fed one batch dictionary at a time.

    The strings are kept once, as Arrow arrays in id order (the output's columns
    are taken from them); a numpy hash table maps each string's 64-bit hash to
    its id, and every match is checked against the strings, so two names never
    share an id. Should two distinct strings ever hash alike, the registry
    switches to a Python dict for the rest of the run.
    """

    def __init__(self, *, expected: int = 0) -> None:
        """A registry with room for `expected` strings made up front."""
        self._expected = expected
        self._index: _HashIndex | None = _HashIndex.for_keys(expected)
        self._is_closed = False  # drop_index() was called
        self._by_text: dict[str | None, int] = {}  # only after a collision
        self._strings = _Strings()

    def __len__(self) -> int:
        return len(self._strings)

    def lookup(self, values: pa.Array) -> IntArray:
        """Return the ids of `values` (distinct strings), adding the new ones."""
        assert not self._is_closed, "the registry's index was dropped"
        if self._index is not None and not values.null_count:
            ids = self._lookup_hashed(values)
            if ids is not None:
                return ids
            self._use_dict()
        return self._lookup_dict(values)

    def id_of(self, text: str) -> int | None:
        """The id of one string, None if it was never seen (nothing is added)."""
        if self._index is None:
            return self._by_text.get(text)
        value = arrow.strings([text])
        found = int(self._index.find(_hash_strings(value))[0])
        if found < 0 or self.values().take(arrow.array(np.array([found]))) != value:
            return None
        return found

    def _lookup_hashed(self, values: pa.Array) -> IntArray | None:
        """Ids through the hash table; None on a hash collision."""
        index = self._index
        assert index is not None
        hashes = _hash_strings(values)
        ids = index.find(hashes)
        known = np.flatnonzero(ids >= 0)
        if known.size and not self._same(values, known, ids[known]):
            return None
        new = np.flatnonzero(ids < 0)
        if not new.size:
            return ids
        fresh = len(self) + np.arange(new.size)  # in first-seen order
        if not index.insert(hashes[new], fresh):
            # a value twice in the dictionary (valid Arrow): one id per string,
            # if the strings are equal too; the table is rebuilt without the copies
            _, first, inverse = np.unique(
                hashes[new], return_index=True, return_inverse=True
            )
            if not self._texts_equal(values, new, values, new[first[inverse]]):
                return None
            by_first = np.argsort(first, kind="stable")  # ids in first-seen order
            rank = np.empty_like(by_first)
            rank[by_first] = np.arange(by_first.size)
            fresh = len(self) + rank[inverse.ravel()]
            kept = new[first[by_first]]
            self._index = index = _HashIndex.for_keys(self._expected)
            if len(self):
                index.insert(_hash_strings(self.values()), np.arange(len(self)))
            index.insert(hashes[kept], len(self) + np.arange(kept.size))
            new_values = values.take(arrow.array(kept))
        else:
            new_values = values.take(arrow.array(new))
        ids[new] = fresh
        self._append(new_values)
        return ids

    def _same(self, values: pa.Array, rows: IntArray, ids: IntArray) -> bool:
        """Whether `values` at `rows` are the strings of `ids`."""
        return self._texts_equal(values, rows, self._strings.array(large=True), ids)

    @staticmethod
    def _texts_equal(
        left: pa.Array, left_rows: IntArray, right: pa.Array, right_rows: IntArray
    ) -> bool:
        """Whether `left` at `left_rows` holds the strings of `right` at `right_rows`."""
        other = right.take(arrow.array(right_rows))
        picked = left.take(arrow.array(left_rows)).cast(other.type)  # string, large
        return bool(pc.all(pc.equal(picked, other)).as_py())

    def _append(self, strings: pa.Array) -> None:
        self._strings.append(strings)

    def _use_dict(self) -> None:
        """Switch to a Python dict (after a hash collision: never seen in practice)."""
        self._by_text = {text: i for i, text in enumerate(self.values().to_pylist())}
        self._index = None

    def _lookup_dict(self, values: pa.Array) -> IntArray:
        texts = values.to_pylist()
        ids = np.fromiter(
            map(self._by_text.get, texts, [_NULL] * len(texts)),
            dtype=np.int64,
            count=len(texts),
        )
        is_new = ids == _NULL
        if is_new.any():
            new = np.flatnonzero(is_new)
            # one id per string, even if a dictionary holds a value twice (valid Arrow)
            ids[new] = [
                self._by_text.setdefault(texts[i], len(self._by_text))
                for i in new.tolist()
            ]
            _, first = np.unique(ids[new], return_index=True)  # ids in first-seen order
            self._append(values.take(arrow.array(new[np.sort(first)])))
        return ids

    def drop_index(self) -> None:
        """Free the hash table: the registry takes no more lookups."""
        self._index, self._by_text, self._is_closed = _HashIndex(), {}, True

    def values(self) -> pa.Array:
        """All strings, by id."""
        return self._strings.array()


class _Strings:
    """Strings added a batch at a time to one growing buffer, read as one Arrow array.

    The bytes and offsets double when full, so each string is copied about twice
    in all (a binary merge of Arrow chunks copied them ~log2(batches) times: 1.6 s
    of 5M names at 200 batches); the room not yet written is zeroed lazily by the
    system (no memory until used). The array read back shares the buffers (no
    copy), and stays valid as more strings come.
    """

    def __init__(self) -> None:
        self._offsets = np.zeros(1 << 10, dtype=np.int64)  # offsets[0] == 0
        self._data = np.zeros(1 << 14, dtype=np.uint8)
        self._valid: npt.NDArray[np.bool_] | None = None  # None: no null so far
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def append(self, strings: pa.Array) -> None:
        """Add `strings` after those already held."""
        offsets, data = _string_buffers(strings)
        n, count, end = self._n, len(strings), int(self._offsets[self._n])
        self._offsets = _with_room(self._offsets, n + count + 1)
        self._data = _with_room(self._data, end + data.size)
        np.add(offsets[1:], end, out=self._offsets[n + 1 : n + count + 1])
        self._data[end : end + data.size] = data
        if strings.null_count or self._valid is not None:
            valid = _with_room(
                np.ones(n, dtype=bool) if self._valid is None else self._valid,
                n + count,
            )
            valid[n : n + count] = arrow.to_numpy(strings.is_valid())
            self._valid = valid
        self._n += count

    def array(self, *, large: bool = False) -> pa.Array:
        """The strings, by position (sharing this store's buffers).

        Args:
            large: As ``large_string`` (64-bit offsets, as stored); else as
                ``string`` (the offsets converted) when under 2 GiB.
        """
        n = self._n
        end = int(self._offsets[n])
        valid = None if self._valid is None else self._valid[:n]
        stored = pa.Array.from_buffers(
            pa.large_string(),
            n,
            [
                None if valid is None else arrow.bitmap(valid),
                pa.py_buffer(self._offsets[: n + 1]),
                pa.py_buffer(self._data[:end]),
            ],
            null_count=0 if valid is None else int(n - np.count_nonzero(valid)),
        )
        return stored if large or end >= 2**31 else stored.cast(pa.string())


def _with_room(values: npt.NDArray[_Item], size: int) -> npt.NDArray[_Item]:
    """`values`, or a copy twice as long (at least `size`) if it is shorter."""
    if size <= values.size:
        return values
    grown = np.zeros(max(size, 2 * values.size), dtype=values.dtype)
    grown[: values.size] = values
    return grown


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
        if not len(self):
            return 0
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
        # np.take, not codes[order]: 0.05 s against 0.4 s for 5M variants
        codes = np.take(self.codes, order, axis=0)
        vocabularies = dict(self.vocabularies)
        for name in _MANY if renumber else ():
            position = _TEXT_KEYS.index(name)
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
        position = _TEXT_KEYS.index(name)
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
        position = _TEXT_KEYS.index(name)
        return self.vocabularies[name].take(arrow.array(self.codes[:, position]))

    def flags(self, rows: IntArray | None = None) -> pa.Array:
        """chat_template per variant (or per row: `rows` are variant positions)."""
        flag = self.codes[:, 3].astype(bool)
        return arrow.array(flag if rows is None else flag[rows])

    def table(self) -> pa.Table:
        """The keys as a table of plain columns, one row per variant."""
        columns = {name: self.strings(name) for name in _TEXT_KEYS}
        return pa.table({**columns, "chat_template": self.flags()}).select(
            list(KEY_COLUMNS)
        )

    @classmethod
    def from_table(cls, keys: pa.Table) -> Variants:
        """Variants from a table of key columns (plain or dictionary strings)."""
        vocabularies: dict[str, pa.Array] = {}
        codes = np.zeros((keys.num_rows, 4), dtype=np.int64)
        for position, name in enumerate(_TEXT_KEYS):
            column = keys.column(name)
            if pa.types.is_dictionary(column.type):
                column = column.cast(column.type.value_type)
            vocabularies[name], codes[:, position] = _encode_strings(column)
        flags = keys.column("chat_template").cast(pa.bool_())
        codes[:, 3] = arrow.to_numpy(flags, null=False)
        return cls(vocabularies=vocabularies, codes=codes)


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
    columns: list[IntArray] = []
    for position, name in enumerate(_TEXT_KEYS):
        # every part's distinct values, encoded together: one id per string
        vocabularies[name], ids = _encode_strings(
            pa.chunked_array(
                [part.vocabularies[name] for part in parts], type=pa.string()
            )
        )
        starts = np.cumsum([0] + [len(part.vocabularies[name]) for part in parts])
        columns.append(
            np.concatenate(
                [
                    ids[start + part.codes[:, position]]
                    for start, part in zip(starts, parts, strict=False)
                ]
                or [np.zeros(0, dtype=np.int64)]
            )
        )
    codes = np.column_stack([*columns, np.concatenate([p.codes[:, 3] for p in parts])])
    packed = np.zeros(codes.shape[0], dtype=np.int64)
    for column in codes.T:  # pack, re-densifying before an overflow
        width = int(column.max(initial=0)) + 1
        packed, first = (
            factorize(packed * width + column) if packed.size else (packed, packed)
        )
    rows, first = factorize(packed)
    return Variants(vocabularies=vocabularies, codes=codes[first]), rows


def factorize(values: npt.NDArray[np.generic]) -> tuple[IntArray, IntArray]:
    """Codes in order of first appearance, and each code's first position.

    Examples:
        >>> codes, first = factorize(np.array([7, 3, 7, 5]))
        >>> codes.tolist(), first.tolist()
        ([0, 1, 0, 2], [0, 1, 3])
    """
    if values.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        if high - low <= 4 * values.size:  # dense integers: a table, no sort
            offset = values.astype(np.int64) - low
            positions = np.arange(values.size)
            first_at = np.full(high - low + 1, values.size, dtype=np.int64)
            np.minimum.at(first_at, offset, positions)
            first = np.flatnonzero(first_at[offset] == positions)
            code_of = np.empty_like(first_at)
            code_of[offset[first]] = np.arange(first.size)
            return code_of[offset], first
        grouped = _factorize_grouped(values, low, high)
        if grouped is not None:
            return grouped
    _, first, inverse = np.unique(values, return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty_like(by_first)
    rank[by_first] = np.arange(by_first.size)
    return rank[inverse.ravel()].astype(np.int64), first[by_first].astype(np.int64)


def _factorize_grouped(
    values: npt.NDArray[np.generic], low: int, high: int
) -> tuple[IntArray, IntArray] | None:
    """:func:`factorize` of integers whose equal values are adjacent, without a sort.

    Keys in key order come so (a model's variants together). None when some
    value comes back later, or the range is too wide to mark.
    """
    if high - low > 64 * values.size:
        return None
    is_start = np.empty(values.size, dtype=bool)
    is_start[0] = True
    np.not_equal(values[1:], values[:-1], out=is_start[1:])
    first = np.flatnonzero(is_start)
    marks = np.zeros(high - low + 1, dtype=bool)
    marks[values[first] - low] = True
    if np.count_nonzero(marks) != first.size:  # a value in two runs
        return None
    codes: IntArray = np.cumsum(is_start, dtype=np.int64) - 1
    return codes, first.astype(np.int64)


class KeyEncoder:
    """Incremental codes for variant keys and suite subtasks across batches.

    Args:
        subtasks: The suite's (benchmark, subtask) names, in suite order.

    Examples:
        >>> encoder = KeyEncoder([("GPQA", "main")])
        >>> table = pa.table({"model": ["b", "a", "b"], "benchmark": ["GPQA"] * 3,
        ...     "subtask": ["main", "main", "nope"]})
        >>> [codes.tolist() for codes in encoder.encode(table)]
        [[0, 1, 0], [0, 0, -1]]
        >>> variants = encoder.variants()
        >>> variants.take(variants.order()).strings("model").to_pylist()
        ['a', 'b']
    """

    def __init__(
        self, subtasks: Sequence[tuple[str, str]], *, expected_variants: int = 16
    ) -> None:
        """An encoder for a suite's (benchmark, subtask) pairs.

        Args:
            subtasks: The suite's pairs, in code order.
            expected_variants: Room made up front for the variant keys, the model
                names and the revisions (they grow past it as they come).
        """
        # a run of N rows has at least N / subtasks variants (a variant has a row
        # per subtask at most), and about as many model names and revisions:
        # their tables are made that large up front, and ids fit in that many bits
        self._expected = expected_variants
        self._vocabularies = {
            name: _Vocabulary(expected=expected_variants if name in _MANY else 0)
            for name in (*_TEXT_KEYS, "benchmark", "subtask")
        }
        # variant keys (model, precision, revision, flag ids) packed into one
        # uint64 each, with bits enough for the ids so far (exact: no hashing)
        self._variant_index = _HashIndex.for_keys(expected_variants)
        many = min(expected_variants.bit_length(), 28)
        self._bits = [many, 1, many, 1]
        self._n_variants = 0
        # the keys by code, as an array (grown by doubling); int32 ids: 16 bytes a
        # variant (80 MB for 5M)
        self._codes = np.zeros((max(expected_variants, 16), 4), dtype=np.int32)
        self._suite = {pair: index for index, pair in enumerate(subtasks)}
        # the names as the command line matches them: exact, else ignoring case
        # (when that names one pair)
        folded: dict[tuple[str, str], list[int]] = {}
        for pair, index in self._suite.items():
            folded.setdefault(_fold(pair), []).append(index)
        self._folded = {
            key: found[0] for key, found in folded.items() if len(found) == 1
        }
        #: Whether the last batch encoded spelled a suite name in another case.
        self.is_last_renamed = False
        # per key column, the last batch dictionary and its ids: the slices of a
        # row group share its dictionary, which is looked up once
        self._last_dictionary: dict[
            str, tuple[pa.Array, IntArray, IntArray | None]
        ] = {}

    @property
    def suite_pairs(self) -> list[tuple[str, str]]:
        """The suite's (benchmark, subtask) names, in code order."""
        return list(self._suite)

    @property
    def n_subtasks(self) -> int:
        """Subtasks in the suite."""
        return len(self._suite)

    @property
    def n_variants(self) -> int:
        """Variants seen so far."""
        return self._n_variants

    def encode(self, table: pa.Table) -> tuple[IntArray, IntArray]:
        """Return each row's variant code (-1 if a key is null) and subtask code (-1 if unknown).

        Args:
            table: Rows with ``model``, ``benchmark``, ``subtask`` and optionally
                ``precision``, ``revision``, ``chat_template``.

        Returns:
            Variant codes (in order of first appearance) and suite subtask indices.
        """
        local = {
            name: self._local(table, name)
            for name in (*_TEXT_KEYS, "benchmark", "subtask")
        }
        parts = [local[name][0] for name in _TEXT_KEYS]
        parts.append(self._flags(table))
        widths = [len(local[name][1]) for name in _TEXT_KEYS] + [2]
        run_group, lengths, distinct = _group_rows(parts, widths)
        codes = self._register(distinct, local)[run_group]
        variant = codes if lengths is None else np.repeat(codes, lengths)
        return variant, self._subtask_codes(local)

    def variants(self, *, last: bool = False) -> Variants:
        """The variants seen so far, in code order.

        Args:
            last: Nothing more will be encoded: the hash tables are freed first
                (~100 MB per 5M keys each), before the strings are joined, and
                the codes once copied out; the strings are the variants' alone
                (a key-ordered copy of them can replace them); the encoder
                takes no more lookups.
        """
        if last:
            self._variant_index = _HashIndex()
            for vocabulary in self._vocabularies.values():
                vocabulary.drop_index()
        variants = Variants(
            vocabularies={
                name: self._vocabularies[name].values() for name in _TEXT_KEYS
            },
            codes=self._variant_codes().astype(np.int64),
        )
        if last:
            self._codes = np.zeros((0, 4), dtype=np.int32)
            for name in _TEXT_KEYS:
                self._vocabularies[name] = _Vocabulary()
                self._vocabularies[name].drop_index()
        return variants

    def _variant_codes(self) -> npt.NDArray[np.int32]:
        """Per variant code, its (model, precision, revision, flag) ids."""
        return self._codes[: self._n_variants]

    def is_empty_model(self, variant: IntArray) -> npt.NDArray[np.bool_]:
        """Mask of rows whose model name is the empty string."""
        empty = self._vocabularies["model"].id_of("")
        if empty is None or not self._n_variants:
            return np.zeros(variant.shape, dtype=bool)
        models = self._variant_codes()[:, 0]
        is_empty: npt.NDArray[np.bool_] = (variant >= 0) & (
            models[np.maximum(variant, 0)] == empty
        )
        return is_empty

    def _local(self, table: pa.Table, name: str) -> tuple[IntArray, IntArray]:
        """Batch-local indices (-1 = null) and the global id of each local value.

        The ids array ends with an extra -1, so ``ids[indices]`` maps a null too.
        """
        vocabulary = self._vocabularies[name]
        if name not in table.column_names:  # an optional key left out: ''
            return (
                np.zeros(table.num_rows, dtype=np.int32),
                np.append(vocabulary.lookup(arrow.strings([""])), _NULL),
            )
        column = table.column(name)
        if pa.types.is_dictionary(column.type):
            column = (
                column.unify_dictionaries()
                if hasattr(column, "unify_dictionaries")
                else column
            )
        chunks = [
            chunk if pa.types.is_dictionary(chunk.type) else chunk.dictionary_encode()
            for chunk in column.chunks
        ]
        if not chunks:
            return np.zeros(0, dtype=np.int32), np.array([_NULL], dtype=np.int64)
        if len(chunks) > 1 and any(
            not chunk.dictionary.equals(chunks[0].dictionary) for chunk in chunks[1:]
        ):
            merged = pa.chunked_array(
                [chunk.cast(chunk.type.value_type) for chunk in chunks]
            ).dictionary_encode()
            chunks = (
                list(merged.chunks) if isinstance(merged, pa.ChunkedArray) else [merged]
            )
        dictionary = chunks[0].dictionary.cast(pa.string())
        indices = [_indices(chunk.indices) for chunk in chunks]
        local = indices[0] if len(indices) == 1 else np.concatenate(indices)
        known = self._last_dictionary.get(name)
        if known is None or not _same_array(known[0], dictionary):
            known = (dictionary, *self._dictionary_ids(vocabulary, dictionary))
            self._last_dictionary[name] = known  # slices of a row group share it
        _, ids, canonical = known
        return (local if canonical is None else canonical[local]), ids

    @staticmethod
    def _dictionary_ids(
        vocabulary: _Vocabulary, dictionary: pa.Array
    ) -> tuple[IntArray, IntArray | None]:
        """A batch dictionary's ids, and a last -1 for null.

        Also, where a value is twice in it (valid Arrow), each index's first
        copy (None: no value is).
        """
        ids = vocabulary.lookup(dictionary)
        distinct, first, inverse = np.unique(
            ids, return_index=True, return_inverse=True
        )
        canonical = None
        if len(distinct) < len(ids):
            canonical = np.append(first[inverse.ravel()], _NULL)  # its first index
        return np.append(ids, _NULL), canonical

    @staticmethod
    def _flags(table: pa.Table) -> IntArray:
        """chat_template as 0 (False) / 1 (True), -1 for null; absent means False."""
        if "chat_template" not in table.column_names:
            return np.zeros(table.num_rows, dtype=np.int8)
        column = table.column("chat_template")
        values: Any = arrow.to_numpy(column, null=False).astype(np.int8)
        if column.null_count:
            values[arrow.to_numpy(column.is_null())] = -1
        flags: IntArray = values  # int8: the encoder widens where it packs codes
        return flags

    def _register(
        self, parts: list[IntArray], local: dict[str, tuple[IntArray, IntArray]]
    ) -> IntArray:
        """Global variant codes of the batch's distinct keys (-1 if a key is null).

        Args:
            parts: Per key column, each distinct variant's batch-local index
                (-1 = null); the last is the chat-template flag (-1 null, 0/1).
            local: Per text column, the global ids of its batch-local values.
        """
        is_null = np.logical_or.reduce([part < 0 for part in parts])
        keys = np.column_stack(
            [
                *(
                    local[name][1][part]
                    for name, part in zip(_TEXT_KEYS, parts[:-1], strict=True)
                ),
                parts[-1].astype(np.int64),
            ]
        )
        keys = keys[~is_null]
        self._fit_bits(keys)
        packed = self._pack(keys)
        found = self._variant_index.find(packed)
        is_new = found < 0
        if is_new.any():  # distinct keys, in order of first appearance
            start = self._n_variants
            fresh = np.arange(start, start + int(is_new.sum()))
            if fresh[-1] >= self._codes.shape[0]:
                grown = np.zeros((2 * (fresh[-1] + 1), 4), dtype=np.int32)
                grown[:start] = self._codes[:start]
                self._codes = grown
            self._codes[fresh] = keys[is_new]
            self._variant_index.insert(packed[is_new], fresh)
            self._n_variants += fresh.size
            found[is_new] = fresh
        codes = np.full(is_null.shape, _NULL, dtype=np.int64)
        codes[~is_null] = found
        return codes

    def _fit_bits(self, keys: IntArray) -> None:
        """Widen the packing when ids outgrow their bits (the table is re-keyed)."""
        needed = [
            max(bits, int(keys[:, position].max(initial=0)).bit_length())
            for position, bits in enumerate(self._bits)
        ]
        if needed == self._bits:
            return
        needed = [bits + 1 if bits > old else bits for bits, old in zip(needed, self._bits, strict=True)]  # fmt: skip
        if sum(needed) > 64:  # some 2**60 distinct names: nothing real gets here
            msg = (
                f"too many distinct model, precision and revision values to encode "
                f"({self._n_variants:,} variants; ids need {needed} bits).\n"
                "Hint: split the input and run each part on its own."
            )
            raise InputError(msg)
        self._bits = needed
        self._variant_index = _HashIndex.for_keys(max(self._n_variants, self._expected))
        if self._n_variants:
            self._variant_index.insert(
                self._pack(self._variant_codes()), np.arange(self._n_variants)
            )

    def _pack(self, keys: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.uint64]:
        """Each key row as one uint64: its ids side by side in their bits."""
        packed = np.zeros(keys.shape[0], dtype=np.uint64)
        for position, bits in enumerate(self._bits):
            packed <<= np.uint64(bits)
            packed |= keys[:, position].astype(np.uint64)
        return packed

    def _subtask_codes(self, local: dict[str, tuple[IntArray, IntArray]]) -> IntArray:
        """Suite subtask index per row through a (benchmark, subtask) lookup table."""
        benchmark, benchmark_ids = local["benchmark"]
        subtask, subtask_ids = local["subtask"]
        names = self._vocabularies["benchmark"].values()
        benchmark_names = np.asarray(
            names.take(arrow.array(benchmark_ids[:-1])).to_pylist(), dtype=object
        )
        names = self._vocabularies["subtask"].values()
        subtask_names = np.asarray(
            names.take(arrow.array(subtask_ids[:-1])).to_pylist(), dtype=object
        )
        width = len(subtask_names) + 1  # the last row and column stand for null
        table = np.full((len(benchmark_names) + 1, width), _NULL, dtype=np.int64)
        pairs = list(
            itertools.product(benchmark_names.tolist(), subtask_names.tolist())
        )
        found = np.fromiter(
            map(self._suite.get, pairs, [_NULL] * len(pairs)),
            dtype=np.int64,
            count=len(pairs),
        )
        self.is_last_renamed = False
        if (missed := np.flatnonzero(found == _NULL)).size and self._folded:
            # names spelled in another case: matched as the command line matches
            folded = [
                self._folded.get(_fold(pairs[at]), _NULL) for at in missed.tolist()
            ]
            found[missed] = folded
            self.is_last_renamed = any(code != _NULL for code in folded)
        table[:-1, :-1] = found.reshape(len(benchmark_names), len(subtask_names))
        if benchmark.size and (benchmark.min() < 0 or subtask.min() < 0):
            benchmark = np.where(benchmark < 0, len(benchmark_names), benchmark)
            subtask = np.where(subtask < 0, len(subtask_names), subtask)
        flat = np.multiply(
            benchmark, width, dtype=np.int32 if table.size < 2**31 else np.int64
        )
        flat += subtask
        codes: IntArray = table.ravel().take(flat)
        return codes


def _fold(pair: tuple[str, str]) -> tuple[str, str]:
    """A (benchmark, subtask) pair compared ignoring case."""
    return pair[0].casefold(), pair[1].casefold()


def _group_rows(
    parts: list[IntArray], widths: list[int]
) -> tuple[IntArray, IntArray | None, list[IntArray]]:
    """Group rows by several small-int key columns (-1 = null) without sorting.

    Rows of one group usually come in runs (a variant's subtasks together), so
    the columns are first cut where any of them changes; the runs' keys (or,
    when runs are short, every row's) are packed into one int64 each, re-densified
    whenever the next packing could overflow, and factorized.

    Args:
        parts: Per key column, each row's value in ``-1..width-1``.
        widths: Per key column, its number of non-null values.

    Returns:
        Per run, its group; each run's length (None when the runs are single
        rows); per column, each group's value.
    """
    n_rows = parts[0].shape[0]
    if n_rows == 0:
        return np.zeros(0, dtype=np.int64), None, [part[:0] for part in parts]
    is_start = np.empty(n_rows, dtype=bool)
    is_start[0] = True
    np.not_equal(parts[0][1:], parts[0][:-1], out=is_start[1:])
    for part in parts[1:]:
        is_start[1:] |= part[1:] != part[:-1]
    starts = np.flatnonzero(is_start)
    lengths: IntArray | None = None
    if starts.size <= n_rows // 2:  # runs: factorize one key per run
        lengths = np.diff(np.append(starts, n_rows))
        parts = [part[starts] for part in parts]
    packed = np.zeros(parts[0].shape[0], dtype=np.int64)
    bound = 1
    for part, width in zip(parts, widths, strict=True):
        if bound * (width + 1) >= 1 << 62:
            packed, first = factorize(packed)
            bound = len(first)
        packed = packed * (width + 1) + (part + 1)  # +1: null (-1) packs as 0
        bound *= width + 1
    group, first = factorize(packed)
    return group, lengths, [part[first] for part in parts]


def _same_array(left: pa.Array, right: pa.Array) -> bool:
    """Whether two arrays are views of the same memory (so equal: Arrow's are immutable)."""
    return (
        left.type == right.type
        and len(left) == len(right)
        and left.offset == right.offset
        and [b and b.address for b in left.buffers()]
        == [b and b.address for b in right.buffers()]
    )


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


def _encode_strings(values: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, IntArray]:
    """Distinct strings in order of first appearance, and each value's id among them.

    A null is encoded as the empty string.
    """
    if values.null_count:
        values = pc.fill_null(values, arrow.scalar("", pa.string()))
    encoded = values.dictionary_encode()
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.unify_dictionaries()
        chunks = encoded.chunks
        if not chunks:
            return _EMPTY, np.zeros(0, dtype=np.int64)
        ids = np.concatenate([arrow.to_numpy(chunk.indices) for chunk in chunks])
        return chunks[0].dictionary, ids.astype(np.int64)
    return encoded.dictionary, arrow.to_numpy(encoded.indices).astype(np.int64)


def _indices(indices: pa.Array) -> IntArray:
    """Dictionary indices as numpy (zero-copy when there is no null), -1 for null.

    int32 indices (Parquet's, Arrow's) stay int32: everything downstream takes
    them as they are, and widening a batch's five key columns was a copy each.
    """
    if indices.null_count:
        indices = indices.fill_null(-1)
    array: IntArray = arrow.to_numpy(indices)
    if array.dtype != np.int32:
        array = array.astype(np.int64, copy=False)
    return array
