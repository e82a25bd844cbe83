"""Keys to integer codes: model variants and suite subtasks, batch by batch.

The kernel works on codes, not strings. :class:`KeyEncoder` gives every model
variant (model, precision, revision, chat_template) a code as batches arrive, and
maps each (benchmark, subtask) to its row in the suite's lower-bound table.

Per batch, each text column becomes dictionary indices (Parquet hands them over
that way), the four key indices are packed into one integer per row and
factorized with a hash table; only the batch's *distinct* values and variants
then meet the global registries, through C-level dict look-ups (``map``), never
a Python step per row.
"""

from __future__ import annotations

import itertools

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.schemas import KEY_COLUMNS

__all__ = ["KeyEncoder"]

IntArray = npt.NDArray[np.int64]
_TEXT_KEYS = ("model", "precision", "revision")
_NULL = -1


class _Vocabulary:
    """A growing string -> id registry, fed one batch dictionary at a time."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def lookup(self, values: list[str]) -> IntArray:
        """Return the ids of `values` (distinct strings), adding the new ones."""
        ids = np.fromiter(
            map(self.ids.get, values, [_NULL] * len(values)),
            dtype=np.int64,
            count=len(values),
        )
        is_new = ids == _NULL
        if is_new.any():
            fresh = np.arange(len(self.ids), len(self.ids) + int(is_new.sum()))
            self.ids.update(
                zip(
                    np.asarray(values, dtype=object)[is_new].tolist(),
                    fresh.tolist(),
                    strict=True,
                )
            )
            ids[is_new] = fresh
        return ids

    def values(self) -> npt.NDArray[np.object_]:
        """All strings, by id."""
        return np.array(list(self.ids), dtype=object)


class KeyEncoder:
    """Incremental codes for variant keys and suite subtasks across batches.

    Examples:
        >>> bounds = pd.DataFrame({"benchmark": ["GPQA"], "subtask": ["main"]})
        >>> encoder = KeyEncoder(bounds)
        >>> table = pa.table({"model": ["b", "a", "b"], "benchmark": ["GPQA"] * 3,
        ...     "subtask": ["main", "main", "nope"]})
        >>> [codes.tolist() for codes in encoder.encode(table)]
        [[0, 1, 0], [0, 0, -1]]
        >>> encoder.variant_keys().iloc[encoder.variant_order()]["model"].tolist()
        ['a', 'b']
    """

    def __init__(self, bounds: pd.DataFrame) -> None:
        self._vocabularies = {
            name: _Vocabulary() for name in (*_TEXT_KEYS, "benchmark", "subtask")
        }
        self._variants: dict[tuple[int, int, int, int], int] = {}
        self._suite = {
            (benchmark, subtask): index
            for index, (benchmark, subtask) in enumerate(
                zip(bounds["benchmark"], bounds["subtask"], strict=True)
            )
        }

    @property
    def n_subtasks(self) -> int:
        """Subtasks in the suite."""
        return len(self._suite)

    @property
    def n_variants(self) -> int:
        """Variants seen so far."""
        return len(self._variants)

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
        widths = [len(local[name][1]) + 1 for name in _TEXT_KEYS] + [3]
        row_key, distinct = _group_rows(parts, widths)
        variant = self._register(distinct, local)[row_key]
        return variant, self._subtask_codes(local)

    def variant_keys(self) -> pd.DataFrame:
        """Return the variants' keys, one row per code, in code order."""
        codes = np.array(list(self._variants), dtype=np.int64).reshape(-1, 4)
        columns: dict[str, object] = {}
        for position, name in enumerate(_TEXT_KEYS):
            columns[name] = (
                self._vocabularies[name].values()[codes[:, position]]
                if len(codes)
                else np.array([], dtype=object)
            )
        columns["chat_template"] = codes[:, 3].astype(bool)
        return pd.DataFrame(columns)[list(KEY_COLUMNS)].astype(
            {"model": "str", "precision": "str", "revision": "str"}
        )

    def variant_order(self) -> IntArray:
        """Return the variant codes sorted by (model, precision, revision, chat_template)."""
        keys = self.variant_keys()
        if keys.empty:
            return np.zeros(0, dtype=np.int64)
        ranks = [
            pd.factorize(keys[name], sort=True)[0] for name in reversed(KEY_COLUMNS)
        ]
        return np.lexsort(ranks).astype(np.int64)

    def is_empty_model(self, variant: IntArray) -> npt.NDArray[np.bool_]:
        """Mask of rows whose model name is the empty string."""
        empty = self._vocabularies["model"].ids.get("")
        if empty is None or not self._variants:
            return np.zeros(variant.shape, dtype=bool)
        models = np.array(list(self._variants), dtype=np.int64).reshape(-1, 4)[:, 0]
        is_empty: npt.NDArray[np.bool_] = (variant >= 0) & (
            models[np.maximum(variant, 0)] == empty
        )
        return is_empty

    def _local(self, table: pa.Table, name: str) -> tuple[IntArray, IntArray]:
        """Batch-local indices (0 = null, i + 1 = i-th distinct value) and their global ids."""
        vocabulary = self._vocabularies[name]
        if name not in table.column_names:  # an optional key left out: ''
            return np.ones(table.num_rows, dtype=np.int64), vocabulary.lookup([""])
        column = table.column(name)
        if pa.types.is_dictionary(column.type):
            column = (
                column.unify_dictionaries()
                if hasattr(column, "unify_dictionaries")
                else column
            )
        chunks = [
            chunk if pa.types.is_dictionary(chunk.type) else pc.dictionary_encode(chunk)
            for chunk in column.chunks
        ]
        if not chunks:
            return np.zeros(0, dtype=np.int64), vocabulary.lookup([])
        if len(chunks) > 1 and any(
            not chunk.dictionary.equals(chunks[0].dictionary) for chunk in chunks[1:]
        ):
            merged = pc.dictionary_encode(
                pa.chunked_array(
                    [chunk.cast(chunk.type.value_type) for chunk in chunks]
                )
            )
            chunks = (
                list(merged.chunks) if isinstance(merged, pa.ChunkedArray) else [merged]
            )
        dictionary = chunks[0].dictionary.cast(pa.string()).to_pylist()
        indices = np.concatenate([_indices(chunk.indices) for chunk in chunks])
        return indices, vocabulary.lookup(dictionary)

    @staticmethod
    def _flags(table: pa.Table) -> IntArray:
        """chat_template as 1 (False) / 2 (True), 0 for null; absent means False."""
        if "chat_template" not in table.column_names:
            return np.ones(table.num_rows, dtype=np.int64)
        column = table.column("chat_template")
        values = np.add(
            column.fill_null(False).to_numpy(zero_copy_only=False), 1, dtype=np.int64
        )
        if column.null_count:
            values[np.asarray(column.is_null().to_numpy(zero_copy_only=False))] = 0
        return np.asarray(values, dtype=np.int64)

    def _register(
        self, parts: list[IntArray], local: dict[str, tuple[IntArray, IntArray]]
    ) -> IntArray:
        """Global variant codes of the batch's distinct keys (-1 if a key is null).

        Args:
            parts: Per key column, each distinct variant's batch-local index
                (0 = null); the last is the chat-template flag (0 null, 1/2).
            local: Per text column, the global ids of its batch-local values.
        """
        flags = parts[-1]
        is_null = np.logical_or.reduce([part == 0 for part in parts])
        global_ids = [
            np.append(-1, local[name][1])[part]
            for name, part in zip(_TEXT_KEYS, parts[:-1], strict=True)
        ]
        keys = list(
            zip(
                *(ids.tolist() for ids in global_ids), (flags - 1).tolist(), strict=True
            )
        )
        codes = np.fromiter(
            map(self._variants.get, keys, [_NULL] * len(keys)),
            dtype=np.int64,
            count=len(keys),
        )
        is_new = (codes == _NULL) & ~is_null
        if is_new.any():
            fresh = np.arange(
                len(self._variants), len(self._variants) + int(is_new.sum())
            )
            self._variants.update(
                zip(
                    itertools.compress(keys, is_new.tolist()),
                    fresh.tolist(),
                    strict=True,
                )
            )
            codes[is_new] = fresh
        return np.where(is_null, _NULL, codes)

    def _subtask_codes(self, local: dict[str, tuple[IntArray, IntArray]]) -> IntArray:
        """Suite subtask index per row through a (benchmark, subtask) lookup table."""
        benchmark, benchmark_ids = local["benchmark"]
        subtask, subtask_ids = local["subtask"]
        benchmark_names = self._vocabularies["benchmark"].values()[benchmark_ids]
        subtask_names = self._vocabularies["subtask"].values()[subtask_ids]
        table = np.full(
            (len(benchmark_names) + 1, len(subtask_names) + 1), _NULL, dtype=np.int64
        )
        pairs = list(
            itertools.product(benchmark_names.tolist(), subtask_names.tolist())
        )
        found = np.fromiter(
            map(self._suite.get, pairs, [_NULL] * len(pairs)),
            dtype=np.int64,
            count=len(pairs),
        )
        table[1:, 1:] = found.reshape(len(benchmark_names), len(subtask_names))
        return table[benchmark, subtask]


def _group_rows(
    parts: list[IntArray], widths: list[int]
) -> tuple[IntArray, list[IntArray]]:
    """Group rows by several small-int key columns without sorting.

    Usually one column determines the others within a batch (a revision sha names
    one variant): then its values are the groups, found with a presence table in
    a few passes. Otherwise the columns are packed into one int64 per row
    (re-densified whenever the next packing could overflow) and factorized.

    Returns:
        Per row, its group; per column, each group's value.
    """
    for lead in sorted(range(len(parts)), key=lambda index: -widths[index]):
        representative = []
        for position, part in enumerate(parts):
            values = np.zeros(widths[lead], dtype=np.int64)
            values[parts[lead]] = part
            if position != lead and not np.array_equal(values[parts[lead]], part):
                break
            representative.append(values)
        else:
            used = np.zeros(widths[lead], dtype=bool)
            used[parts[lead]] = True
            group = (np.cumsum(used) - 1)[parts[lead]]
            return group, [values[used] for values in representative]
    packed = np.zeros(parts[0].shape[0], dtype=np.int64)
    bound = 1
    for part, width in zip(parts, widths, strict=True):
        if bound * width >= 1 << 62:
            codes, distinct = pd.factorize(packed)
            packed, bound = codes.astype(np.int64), len(distinct)
        packed = packed * width + part
        bound *= width
    codes, _ = pd.factorize(packed)
    group = codes.astype(np.int64)
    if group.size == 0:
        return group, [part[:0] for part in parts]
    # codes come in first-appearance order: a code's first row is where the
    # running maximum steps up to it
    running = np.maximum.accumulate(group)
    first = np.concatenate([[0], np.flatnonzero(running[1:] > running[:-1]) + 1])
    return group, [part[first] for part in parts]


def _indices(indices: pa.Array) -> IntArray:
    """Dictionary indices shifted by one, 0 for null."""
    if indices.null_count:
        indices = indices.fill_null(-1)
    shifted: IntArray = np.add(
        indices.to_numpy(zero_copy_only=False), 1, dtype=np.int64
    )
    return shifted
