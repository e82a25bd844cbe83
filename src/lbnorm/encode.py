"""Keys to integer codes: model variants and suite subtasks, batch by batch.

The kernel works on codes, not strings. :class:`KeyEncoder` gives every model
variant (model, precision, revision, chat_template) a code as batches arrive, and
maps each (benchmark, subtask) to its row in the suite's lower-bound table.

Per batch, each text column becomes dictionary indices (Parquet hands them over
that way, and they are used in place: -1 marks a null). Rows of one variant
usually come together, so the key columns are cut into runs where any of them
changes, and only the runs' keys are packed and factorized. Only the batch's
*distinct* values and variants then meet the global registries, through C-level
dict look-ups (``map``), never a Python step per row.
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
        # the same keys by code, as an array (grown by doubling)
        self._codes = np.zeros((16, 4), dtype=np.int64)
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
        widths = [len(local[name][1]) for name in _TEXT_KEYS] + [2]
        run_group, lengths, distinct = _group_rows(parts, widths)
        codes = self._register(distinct, local)[run_group]
        variant = codes if lengths is None else np.repeat(codes, lengths)
        return variant, self._subtask_codes(local)

    def variant_keys(self) -> pd.DataFrame:
        """Return the variants' keys, one row per code, in code order."""
        codes = self._variant_codes()
        columns: dict[str, object] = {}
        for position, name in enumerate(_TEXT_KEYS):
            columns[name] = self._vocabularies[name].values()[codes[:, position]]
        columns["chat_template"] = codes[:, 3].astype(bool)
        return pd.DataFrame(columns)[list(KEY_COLUMNS)].astype(
            {"model": "str", "precision": "str", "revision": "str"}
        )

    def variant_order(self) -> IntArray:
        """Return the variant codes sorted by (model, precision, revision, chat_template).

        Strings compare by code point (UTF-8 byte order), as Python compares them.
        """
        codes = self._variant_codes()
        ranks = [
            _string_ranks(self._vocabularies[name].values())[codes[:, position]]
            for position, name in enumerate(_TEXT_KEYS)
        ]
        return np.lexsort([codes[:, 3], *reversed(ranks)]).astype(np.int64)

    def _variant_codes(self) -> IntArray:
        """Per variant code, its (model, precision, revision, flag) ids."""
        return self._codes[: len(self._variants)]

    def is_empty_model(self, variant: IntArray) -> npt.NDArray[np.bool_]:
        """Mask of rows whose model name is the empty string."""
        empty = self._vocabularies["model"].ids.get("")
        if empty is None or not self._variants:
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
                np.append(vocabulary.lookup([""]), _NULL),
            )
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
            return np.zeros(0, dtype=np.int32), np.array([_NULL], dtype=np.int64)
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
        indices = [_indices(chunk.indices) for chunk in chunks]
        return (
            indices[0] if len(indices) == 1 else np.concatenate(indices),
            np.append(vocabulary.lookup(dictionary), _NULL),
        )

    @staticmethod
    def _flags(table: pa.Table) -> IntArray:
        """chat_template as 0 (False) / 1 (True), -1 for null; absent means False."""
        if "chat_template" not in table.column_names:
            return np.zeros(table.num_rows, dtype=np.int8)
        column = table.column("chat_template")
        values = column.fill_null(False).to_numpy(zero_copy_only=False).astype(np.int8)
        if column.null_count:
            values[np.asarray(column.is_null().to_numpy(zero_copy_only=False))] = -1
        flags: IntArray = values
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
        flags = parts[-1]
        is_null = np.logical_or.reduce([part < 0 for part in parts])
        global_ids = [
            local[name][1][part]
            for name, part in zip(_TEXT_KEYS, parts[:-1], strict=True)
        ]
        keys = list(
            zip(*(ids.tolist() for ids in global_ids), flags.tolist(), strict=True)
        )
        codes = np.fromiter(
            map(self._variants.get, keys, [_NULL] * len(keys)),
            dtype=np.int64,
            count=len(keys),
        )
        is_new = (codes == _NULL) & ~is_null
        if is_new.any():
            start = len(self._variants)
            fresh = np.arange(start, start + int(is_new.sum()))
            if fresh[-1] >= self._codes.shape[0]:
                grown = np.zeros((2 * (fresh[-1] + 1), 4), dtype=np.int64)
                grown[:start] = self._codes[:start]
                self._codes = grown
            self._codes[fresh] = np.column_stack([*global_ids, flags])[is_new]
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
        names = self._vocabularies["benchmark"].values()
        benchmark_names = names[benchmark_ids[:-1]]
        names = self._vocabularies["subtask"].values()
        subtask_names = names[subtask_ids[:-1]]
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
            codes, distinct = pd.factorize(packed)
            packed, bound = codes.astype(np.int64), len(distinct)
        packed = packed * (width + 1) + (part + 1)  # +1: null (-1) packs as 0
        bound *= width + 1
    codes, _ = pd.factorize(packed)
    group = codes.astype(np.int64)
    # codes come in first-appearance order: a code's first row is where the
    # running maximum steps up to it
    running = np.maximum.accumulate(group)
    first = np.concatenate([[0], np.flatnonzero(running[1:] > running[:-1]) + 1])
    return group, lengths, [part[first] for part in parts]


def _string_ranks(values: npt.NDArray[np.object_]) -> IntArray:
    """Each string's position in sorted order (Arrow sorts in C, by UTF-8 bytes)."""
    order = pc.array_sort_indices(pa.array(values, pa.string())).to_numpy()
    ranks = np.empty(len(values), dtype=np.int64)
    ranks[order] = np.arange(len(values))
    return ranks


def _indices(indices: pa.Array) -> IntArray:
    """Dictionary indices as numpy (zero-copy when there is no null), -1 for null."""
    if indices.null_count:
        indices = indices.fill_null(-1)
    array: IntArray = indices.to_numpy(zero_copy_only=False)
    return array
