"""String registries: a growing string -> id vocabulary, hashed in numpy.

:class:`Vocabulary` gives each distinct string an id as batch dictionaries
arrive; its strings are kept once, in id order, as one growing Arrow buffer
(:class:`_Strings`). Lookups go a whole array at a time: a 64-bit hash per string
computed from the Arrow buffers (:func:`hash_strings`) and an open-addressing
table (:class:`HashIndex`), every match checked against the strings themselves.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core import arrow

__all__ = ["HashIndex", "Vocabulary", "hash_strings"]

IntArray = npt.NDArray[np.int64]
_NULL = -1
_Item = TypeVar("_Item", bound=np.generic)

#: The hash multiplier M (and its inverse) of :func:`hash_strings`.
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)  # odd: invertible modulo 2**64
_INVERSE = np.uint64(pow(0x9E3779B97F4A7C15, -1, 2**64))


@functools.lru_cache(maxsize=1)  # (a block's: a longer string's replaces it a while)
def _powers(n: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """``M**i`` and ``M**-i`` modulo 2**64 for i < n."""
    up = np.cumprod(np.full(n, _MULTIPLIER, dtype=np.uint64)) * _INVERSE
    down = np.cumprod(np.full(n, _INVERSE, dtype=np.uint64)) * _MULTIPLIER
    return up, down


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


def hash_strings(values: pa.Array) -> npt.NDArray[np.uint64]:
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
        up, down = _powers(max(size, _HASH_BLOCK) + 1)
        if prefix.size < up.size:  # one buffer for every block (a long string: more)
            prefix = np.zeros(up.size, dtype=np.uint64)
        start = int(offsets[first])
        sums = prefix[1 : size + 1]
        np.multiply(data[start : start + size], up[:size], out=sums)
        np.cumsum(sums, out=sums)
        starts = block[:-1]
        part = (prefix[block[1:]] - prefix[starts]) * down[starts]
        part ^= np.diff(block).astype(np.uint64) * _MULTIPLIER
        hashes[first:last] = part
        first = last
    return _mix(hashes)


#: Bytes hashed per block (the power tables stay this size: 2 MB each).
_HASH_BLOCK = 1 << 18
#: The most slots a hash table is given before its keys come (64 MB): past
#: 8M keys it grows as they come.
_MOST_SLOTS = 1 << 24


class HashIndex:
    """An open-addressing hash table from uint64 keys to ids, in numpy.

    Lookups and inserts go a whole batch of keys at a time, probing linearly; the
    Python loop runs once per probe step (a few), not per key. Keys are hashes
    or packed codes: the caller checks what a match means. The slots hold int32
    ids, the keys are kept by id (so a slot costs 4 bytes, and the table can
    stay at most half full: a key that is absent, most of a batch's in a large
    run, ends its probe after ~2.5 steps on average, ~6 at 70%). 5M keys take
    104-124 MB.
    """

    def __init__(self, expected: int = 0, *, capacity: int = 0) -> None:
        """A table with room for `expected` keys made up front (at most :data:`_MOST_SLOTS`).

        Up to there no key is placed twice: growing re-places every key.

        Args:
            expected: Keys to make room for.
            capacity: Slots to start with instead (a power of two).
        """
        expected = min(expected, _MOST_SLOTS // 2)
        capacity = capacity or 1 << max(10, (2 * expected - 1).bit_length())
        self._slots_ids = np.full(capacity, _NULL, dtype=np.int32)
        self._shift = np.uint64(64 - (capacity.bit_length() - 1))
        # by id (never empty: see find)
        self._keys = np.zeros(max(expected, 1), dtype=np.uint64)
        self.size = 0

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


class Vocabulary:
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
        self._index: HashIndex | None = HashIndex(expected)
        self._by_text: dict[str, int] = {}  # only after a collision
        self._strings = _Strings()

    def __len__(self) -> int:
        return len(self._strings)

    def lookup(self, values: pa.Array) -> IntArray:
        """Return the ids of `values` (distinct strings, no null), adding the new ones."""
        if self._index is not None:
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
        found = int(self._index.find(hash_strings(value))[0])
        is_text = found >= 0 and self._strings.array(large=True)[found].as_py() == text
        return found if is_text else None

    def _lookup_hashed(self, values: pa.Array) -> IntArray | None:
        """Ids through the hash table; None on a hash collision."""
        index = self._index
        assert index is not None
        hashes = hash_strings(values)
        ids = index.find(hashes)
        known = np.flatnonzero(ids >= 0)
        if known.size:  # every match checked against the strings
            found = self._strings.array(large=True).take(arrow.array(ids[known]))
            picked = values.take(arrow.array(known)).cast(found.type)  # large_string
            if not pc.all(pc.equal(picked, found)).as_py():
                return None
        new = np.flatnonzero(ids < 0)
        if not new.size:
            return ids
        fresh = len(self) + np.arange(new.size)  # in first-seen order
        if not index.insert(hashes[new], fresh):
            # a value twice in `values` (valid Arrow in a dictionary), or two
            # strings hashing alike: the table is rebuilt as it was, and the
            # distinct strings (Arrow's, in first-seen order) looked up instead
            self._index = HashIndex(self._expected)
            if len(self):
                self._index.insert(hash_strings(self.values()), np.arange(len(self)))
            encoded = values.dictionary_encode()
            if len(encoded.dictionary) == len(values):  # distinct: a collision
                return None
            distinct = self._lookup_hashed(encoded.dictionary)
            return (
                None if distinct is None else distinct[arrow.to_numpy(encoded.indices)]
            )
        ids[new] = fresh
        self._strings.append(values.take(arrow.array(new)))
        return ids

    def _use_dict(self) -> None:
        """Switch to a Python dict (after a hash collision: never seen in practice)."""
        self._by_text = {text: i for i, text in enumerate(self.values().to_pylist())}
        self._index = None

    def _lookup_dict(self, values: pa.Array) -> IntArray:
        texts = values.to_pylist()
        known = len(self._by_text)
        # one id per string, even if a dictionary holds a value twice (valid Arrow)
        ids = [self._by_text.setdefault(text, len(self._by_text)) for text in texts]
        new = [text for text, id_ in zip(texts, ids, strict=True) if id_ >= known]
        self._strings.append(arrow.strings(list(dict.fromkeys(new))))  # by id
        return np.array(ids, dtype=np.int64)

    def drop_index(self) -> None:
        """Free the hash table: the registry takes no more lookups."""
        self._index, self._by_text = HashIndex(), {}

    def values(self) -> pa.Array:
        """All strings, by id."""
        return self._strings.array()


class _Strings:
    """Strings added a batch at a time to one growing buffer, read as one Arrow array.

    The bytes and offsets double when full, so each string is copied about twice
    in all (a binary merge of Arrow chunks would copy them ~log2(batches)
    times); the room not yet written is zeroed lazily by the
    system (no memory until used). The array read back shares the buffers (no
    copy), and stays valid as more strings come.
    """

    def __init__(self) -> None:
        self._offsets = np.zeros(1 << 10, dtype=np.int64)  # offsets[0] == 0
        self._data = np.zeros(1 << 14, dtype=np.uint8)
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
        self._n += count

    def array(self, *, large: bool = False) -> pa.Array:
        """The strings, by position (sharing this store's buffers).

        Args:
            large: As ``large_string`` (64-bit offsets, as stored); else as
                ``string`` (the offsets converted) when under 2 GiB.
        """
        n = self._n
        end = int(self._offsets[n])
        stored = pa.Array.from_buffers(
            pa.large_string(),
            n,
            [
                None,
                pa.py_buffer(self._offsets[: n + 1]),
                pa.py_buffer(self._data[:end]),
            ],
        )
        return stored if large or end >= 2**31 else stored.cast(pa.string())


def _with_room(values: npt.NDArray[_Item], size: int) -> npt.NDArray[_Item]:
    """`values`, or a copy twice as long (at least `size`) if it is shorter."""
    if size <= values.size:
        return values
    grown = np.zeros(max(size, 2 * values.size), dtype=values.dtype)
    grown[: values.size] = values
    return grown
