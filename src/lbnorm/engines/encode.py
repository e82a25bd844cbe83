"""Keys to integer codes: model variants and suite subtasks, batch by batch.

The kernel works on codes, not strings. :class:`KeyEncoder` gives every model
variant (model, precision, revision, chat_template) a code as batches arrive, and
maps each (benchmark, subtask) to its position in the suite; :class:`Variants`
holds the variants' keys as ids into one vocabulary per text column.

Per batch, each text column becomes dictionary indices (Parquet hands them over
that way, and they are used in place: -1 marks a null). Rows of one variant
usually come together, so the key columns are cut into runs where any of them
changes, and only the runs' keys are packed and factorized. Only the batch's
*distinct* values and variants then meet the global registries
(:mod:`lbnorm.engines.vocabulary`), never a Python step per row.

A batch dictionary costs at most its batch's rows: one larger than its batch (a
pandas categorical carries every category in every row group) is looked up only
for the entries the batch's indices use, and a dictionary holding the same values
as the column's last one (row groups of such a file, slices of one row group) is
recognised by its content and reuses the ids found so far.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.core import arrow
from lbnorm.core.errors import InputError
from lbnorm.engines.variants import (
    MANY_KEYS,
    TEXT_KEYS,
    Variants,
    factorize,
    group_keys,
    merge_variants,
)
from lbnorm.engines.vocabulary import HashIndex, Vocabulary

__all__ = ["KeyEncoder", "Variants", "factorize", "merge_variants"]

IntArray = npt.NDArray[np.int64]
_NULL = -1
#: An entry of a batch dictionary not looked up yet (no row used it so far).
_UNSEEN = -2


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
            name: Vocabulary(expected=expected_variants if name in MANY_KEYS else 0)
            for name in (*TEXT_KEYS, "benchmark", "subtask")
        }
        # variant keys (model, precision, revision, flag ids) packed into one
        # uint64 each, with bits enough for the ids so far (exact: no hashing)
        self._variant_index = HashIndex(expected_variants)
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
        # per text column, its last batch dictionary and the ids found for it
        self._seen: dict[str, _Seen] = {}

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
        assert self._vocabularies, (
            "the registries' index was dropped (variants(last=True))"
        )
        local = {
            name: self._local(table, name)
            for name in (*TEXT_KEYS, "benchmark", "subtask")
        }
        parts = [local[name][0] for name in TEXT_KEYS]
        parts.append(self._flags(table))
        widths = [len(local[name][1]) for name in TEXT_KEYS] + [2]
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
            self._variant_index = HashIndex()
            for vocabulary in self._vocabularies.values():
                vocabulary.drop_index()
        variants = Variants(
            vocabularies={
                name: self._vocabularies[name].values() for name in TEXT_KEYS
            },
            codes=self._codes[: self._n_variants].astype(np.int64),
        )
        if last:  # the strings are the variants' alone
            self._seen, self._vocabularies = {}, {}
            self._codes = np.zeros((0, 4), dtype=np.int32)
        return variants

    def is_empty_model(self, variant: IntArray) -> npt.NDArray[np.bool_]:
        """Mask of rows whose model name is the empty string."""
        empty = self._vocabularies["model"].id_of("")
        if empty is None or not self._n_variants:
            return np.zeros(variant.shape, dtype=bool)
        models = self._codes[:, 0]
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
        # one dictionary for every chunk (Arrow's hash table: in first-seen order)
        column = (
            column.unify_dictionaries()
            if pa.types.is_dictionary(column.type)
            else column.dictionary_encode()
        )
        chunks = column.chunks
        if not chunks:
            return np.zeros(0, dtype=np.int32), np.array([_NULL], dtype=np.int64)
        indices = [_indices(chunk.indices) for chunk in chunks]
        local = indices[0] if len(indices) == 1 else np.concatenate(indices)
        dictionary = chunks[0].dictionary
        seen = self._seen.get(name)
        if seen is None or not _same_values(seen.dictionary, dictionary):
            seen = _Seen(dictionary)
            self._seen[name] = seen
        if seen.is_complete:
            canonical = seen.canonical
        elif len(dictionary) <= local.size:  # every entry, once per dictionary
            seen.look_up(vocabulary, np.flatnonzero(seen.ids[:-1] == _UNSEEN))
            canonical = seen.canonical = _first_copies(
                seen.ids, np.arange(len(dictionary))
            )
            seen.is_complete = True
        else:  # larger than its batch: the entries the rows use
            used = _used_entries(local, len(dictionary))
            seen.look_up(vocabulary, used[seen.ids[used] == _UNSEEN])
            canonical = _first_copies(seen.ids, used)
        return (local if canonical is None else canonical[local]), seen.ids

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
                    for name, part in zip(TEXT_KEYS, parts[:-1], strict=True)
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
        needed = []
        for position, bits in enumerate(self._bits):  # (a field outgrown: a bit more)
            used = int(keys[:, position].max(initial=0)).bit_length()
            needed.append(bits if used <= bits else used + 1)
        if needed == self._bits:
            return
        if sum(needed) > 64:  # some 2**60 distinct names: nothing real gets here
            msg = (
                f"too many distinct model, precision and revision values to encode "
                f"({self._n_variants:,} variants; ids need {needed} bits).\n"
                "Hint: split the input and run each part on its own."
            )
            raise InputError(msg)
        self._bits = needed
        self._variant_index = HashIndex(max(self._n_variants, self._expected))
        if self._n_variants:
            self._variant_index.insert(
                self._pack(self._codes[: self._n_variants]), np.arange(self._n_variants)
            )

    def _pack(self, keys: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.uint64]:
        """Each key row as one uint64: its ids side by side in their bits."""
        packed = np.zeros(keys.shape[0], dtype=np.uint64)
        for position, bits in enumerate(self._bits):
            packed <<= np.uint64(bits)
            packed |= keys[:, position].astype(np.uint64)
        return packed

    def _names(self, name: str, ids: IntArray) -> npt.NDArray[Any]:
        """The strings of `ids` (None where an entry was not looked up: no row uses it)."""
        names = self._vocabularies[name].values()
        return np.asarray(
            names.take(arrow.array(ids, mask=ids < 0)).to_pylist(), dtype=object
        )

    def _subtask_codes(self, local: dict[str, tuple[IntArray, IntArray]]) -> IntArray:
        """Suite subtask index per row through a (benchmark, subtask) lookup table."""
        benchmark, benchmark_ids = local["benchmark"]
        subtask, subtask_ids = local["subtask"]
        benchmark_names = self._names("benchmark", benchmark_ids[:-1])
        subtask_names = self._names("subtask", subtask_ids[:-1])
        width = len(subtask_names) + 1  # the last row and column stand for null
        table = np.full((len(benchmark_names) + 1, width), _NULL, dtype=np.int64)
        pairs = itertools.product(benchmark_names.tolist(), subtask_names.tolist())
        exact = [(pair, self._suite.get(pair, _NULL)) for pair in pairs]
        found = [  # else spelled in another case: matched as the command line matches
            self._folded.get(_fold(pair), _NULL)
            if code == _NULL and None not in pair  # (None: an entry no row uses)
            else code
            for pair, code in exact
        ]
        self.is_last_renamed = found != [code for _, code in exact]
        table[:-1, :-1] = np.reshape(found, (len(benchmark_names), len(subtask_names)))
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
    when runs are short, every row's) are grouped (:func:`group_keys`).

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
    group, first = group_keys(parts, widths)
    return group, lengths, [part[first] for part in parts]


@dataclass(slots=True)
class _Seen:
    """A column's last batch dictionary, and the ids of its entries found so far.

    Attributes:
        dictionary: The batch dictionary.
        ids: Per entry its id in the column's vocabulary (:data:`_UNSEEN` where
            no row has used it yet), and a last -1 for null.
        canonical: Once every entry is looked up: per entry its value's first
            entry, where a value is twice in the dictionary (valid Arrow); None
            when none is.
        is_complete: Every entry is looked up (and `canonical` holds).
    """

    dictionary: pa.Array
    ids: IntArray = dataclasses.field(init=False)
    canonical: IntArray | None = None
    is_complete: bool = False

    def __post_init__(self) -> None:
        self.ids = np.full(len(self.dictionary) + 1, _UNSEEN, dtype=np.int64)
        self.ids[-1] = _NULL

    def look_up(self, vocabulary: Vocabulary, entries: IntArray) -> None:
        """Find (or add) the ids of the dictionary's `entries` (a null entry: -1)."""
        if self.dictionary.null_count:  # (valid Arrow): a null key, as a null index
            is_null = arrow.to_numpy(self.dictionary.is_null())[entries]
            self.ids[entries[is_null]] = _NULL
            entries = entries[~is_null]
        if not entries.size:
            return
        values = (
            self.dictionary
            if entries.size == len(self.dictionary)
            else self.dictionary.take(arrow.array(entries))
        )
        self.ids[entries] = vocabulary.lookup(values.cast(pa.string()))


def _same_values(left: pa.Array, right: pa.Array) -> bool:
    """Whether two dictionaries hold the same values (the same memory, or equal content)."""
    if left.type != right.type or len(left) != len(right):
        return False
    if left.offset == right.offset and [b and b.address for b in left.buffers()] == [
        b and b.address for b in right.buffers()
    ]:
        return True
    return bool(left.equals(right))


def _used_entries(local: IntArray, size: int) -> IntArray:
    """The entries of a dictionary of `size` that the indices `local` use (-1: null)."""
    if size > 8 * local.size:  # a sort of the rows, whatever the dictionary's size
        used = np.unique(local)
        return used[used >= 0].astype(np.int64, copy=False)
    return np.flatnonzero(np.bincount(local + 1, minlength=size + 1)[1:])  # (+1: null)


def _first_copies(ids: IntArray, entries: IntArray) -> IntArray | None:
    """Per entry, the first of `entries` with its id, -1 for a null entry.

    Rows of one value then share one local index, as the grouping needs, and a
    null value reads as a null index. None: no id is there twice, none is null.
    """
    found = ids[entries]
    distinct, first, inverse = np.unique(found, return_index=True, return_inverse=True)
    is_null = found == _NULL
    if len(distinct) == len(found) and not is_null.any():
        return None
    canonical = np.arange(ids.size, dtype=np.int64)
    canonical[-1] = _NULL
    canonical[entries] = np.where(is_null, _NULL, entries[first[inverse.ravel()]])
    return canonical


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
