"""Every task's documents for the item matrix: numbered within the task, with their clusters.

:class:`Documents` numbers a task's documents 0, 1, ... as the inputs name them
(a ``doc_id``, or a ``doc_hash``) and records each document's cluster; the item
matrix of :mod:`lbnorm.readers.items` lays a subtask's columns out by these
numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.arrow import booleans, numbers, to_numpy
from lbnorm.core.errors import InputError

__all__ = ["LUT_LIMIT", "Documents", "KeyNumbers", "number_keys"]

_I64 = npt.NDArray[np.int64]
#: A task's doc_ids below this are looked up in a table; others are hashed.
LUT_LIMIT = 1 << 22
#: A growing registry of keys: the keys met so far, and each one's number.
KeyNumbers = tuple[pa.Array, _I64]


class Documents:
    """Every task's documents, numbered 0, 1, ... within the task, and their clusters.

    Integer keys in ``[0, LUT_LIMIT)`` are found in one lookup table for all
    tasks (a task's slice sized to its largest key); text keys and other
    integers by Arrow's hash lookup in the task's registry.
    """

    def __init__(self, n_tasks: int) -> None:
        self.count = np.zeros(n_tasks, dtype=np.int64)
        self._lut = np.empty(0, dtype=np.int32)
        self._start = np.zeros(n_tasks, dtype=np.int64)
        self._size = np.zeros(n_tasks, dtype=np.int64)
        self._hashed: list[KeyNumbers | None] = [None] * n_tasks
        self._named: list[list[tuple[_I64, pa.Array]]] = [[] for _ in range(n_tasks)]
        self._cluster: list[_I64] = [np.empty(0, np.int64) for _ in range(n_tasks)]
        self._cluster_codes: list[dict[Any, int]] = [{} for _ in range(n_tasks)]

    def numbers(self, task: _I64, keys: npt.NDArray[np.integer[Any]]) -> _I64:
        """Each row's document number, for rows of several tasks with integer keys."""
        if not keys.size:
            return np.empty(0, dtype=np.int64)
        if int(keys.min()) >= 0 and int(keys.max()) < LUT_LIMIT:  # the usual case
            return self._looked_up(task, keys)
        out = np.empty(keys.size, dtype=np.int64)
        small = (keys >= 0) & (keys < LUT_LIMIT)
        for t in np.unique(task[~small]).tolist():  # rare: a task at a time
            rows = np.flatnonzero(~small & (task == t))
            out[rows] = self.numbers_of(t, numbers(keys[rows], pa.int64()))
        if small.any():
            out[small] = self._looked_up(task[small], keys[small])
        return out

    def _looked_up(self, task: _I64, keys: npt.NDArray[np.integer[Any]]) -> _I64:
        """Document numbers of keys in ``[0, LUT_LIMIT)`` from the lookup table."""
        beyond = keys >= self._size[task]
        if beyond.any():  # a task's largest key grew: its slice of the table too
            need = self._size.copy()
            np.maximum.at(need, task[beyond], keys[beyond] + 1)
            self._grow(need)
        flat = self._start[task] + keys
        found = self._lut[flat]
        if int(found.min()) < 0:  # documents seen first here: by task, then key
            new = found < 0
            fresh, first = np.unique(flat[new], return_index=True)
            owner = task[new][first]
            number = (
                self.count[owner]
                + np.arange(fresh.size)
                - np.searchsorted(owner, owner)
            )
            self._lut[fresh] = number
            self.count += np.bincount(owner, minlength=self.count.size)
            for t in np.unique(owner).tolist():  # the keys, to name documents by
                mine = owner == t
                keys_of = numbers(fresh[mine] - self._start[t], pa.int64())
                self._named[t].append((number[mine], keys_of))
            found = self._lut[flat]
        return found.astype(np.int64)

    def numbers_of(self, task: int, keys: pa.Array) -> _I64:
        """One task's document numbers by hash lookup (text keys, or large integers)."""
        start = int(self.count[task])
        found, self._hashed[task], fresh = number_keys(self._hashed[task], keys, start)
        if len(fresh):
            self._named[task].append((start + np.arange(len(fresh)), fresh))
            self.count[task] += len(fresh)
        return found

    def names(self, task: int, documents: _I64) -> pa.Array:
        """The keys (a doc_id or a doc_hash) of a task's documents `documents`."""
        chunks = self._named[task]
        if not chunks:
            return numbers(np.empty(0, dtype=np.int64), pa.int64())
        order = np.concatenate([number for number, _ in chunks])
        kind = (
            pa.string()
            if any(pa.types.is_string(k.type) for _, k in chunks)
            else pa.int64()
        )
        values = pa.concat_arrays([keys.cast(kind) for _, keys in chunks])
        where = np.empty(int(self.count[task]), dtype=np.int64)
        where[order] = np.arange(order.size)
        return values.take(numbers(where[documents], pa.int64()))

    def set_clusters(
        self, task: int, documents: _I64, values: pa.Array, where: Callable[[int], str]
    ) -> None:
        """Record each document's cluster; a document given two is an error."""
        encoded = pc.dictionary_encode(values)
        registry = self._cluster_codes[task]
        entries = encoded.dictionary.to_pylist()  # the distinct values: per value
        codes = np.array(
            [registry.setdefault(entry, len(registry)) for entry in entries],
            dtype=np.int64,
        )
        index = to_numpy(encoded.indices.cast(pa.int64()))
        row_code = codes[index]
        known = self._cluster[task]
        if known.size < self.count[task]:
            padding = np.full(int(self.count[task]) - known.size, -1, dtype=np.int64)
            known = np.concatenate([known, padding])
        before = known[documents]
        known[documents] = row_code
        again = known[documents]  # a document twice in these rows: the last value won
        clash = ((before >= 0) & (before != row_code)) | (again != row_code)
        self._cluster[task] = known
        if clash.any():
            at = int(np.flatnonzero(clash)[0])
            other = (
                int(before[at])
                if before[at] >= 0 and before[at] != row_code[at]
                else int(again[at])
            )
            names = {code: value for value, code in registry.items()}
            msg = f"{where(at)}: cluster value {entries[index[at]]!r}, but another line or input gives the same document {names[other]!r}.\nHint: a document belongs to one cluster; check the suite's cluster key and the inputs."
            raise InputError(msg)

    def clusters(self, task: int, documents: _I64) -> _I64:
        """Each document's cluster (the document itself when the task has no key)."""
        known = self._cluster[task]
        if not self._cluster_codes[task]:
            return documents.copy()
        return np.asarray(known[documents], dtype=np.int64)

    def _grow(self, need: _I64) -> None:
        bits = np.ceil(np.log2(np.maximum(need, 64))).astype(np.int64)
        size = np.where(need > self._size, np.left_shift(1, bits), self._size)
        start = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.int64)
        lut = np.full(int(size.sum()), -1, dtype=np.int32)
        for t in np.flatnonzero(self._size).tolist():  # a task at a time
            lut[start[t] : start[t] + self._size[t]] = self._lut[
                self._start[t] : self._start[t] + self._size[t]
            ]
        self._lut, self._start, self._size = lut, start, size.astype(np.int64)


def number_keys(
    known: KeyNumbers | None, keys: pa.Array, start: int
) -> tuple[_I64, KeyNumbers | None, pa.Array]:
    """Each key's number in a registry, keys not in it numbered from `start` on.

    New keys are numbered in the order they first occur (Arrow's hash lookup).

    Returns:
        Each key's number, the registry with the new keys, and the new keys.

    Examples:
        >>> found, known, fresh = number_keys(None, pa.array(["b", "a", "b"]), 5)
        >>> found.tolist(), number_keys(known, pa.array(["a", "c"]), 7)[0].tolist()
        ([5, 6, 5], [6, 7])
    """
    if known is None:
        found = np.full(len(keys), -1, dtype=np.int64)
    else:
        at = to_numpy(pc.index_in(keys, value_set=known[0]).cast(pa.int64()), null=-1)
        found = np.where(at >= 0, known[1][np.maximum(at, 0)], -1)
    new = found < 0
    if not new.any():
        return found, known, keys.slice(0, 0)
    unseen = keys.filter(booleans(new))
    fresh = pc.unique(unseen)
    number = start + np.arange(len(fresh), dtype=np.int64)
    if known is not None:
        known = (pa.concat_arrays([known[0], fresh]), np.r_[known[1], number])
    again = to_numpy(pc.index_in(unseen, value_set=fresh).cast(pa.int64()))
    found[new] = number[again]
    return found, known or (fresh, number), fresh
