"""Per-item values of per-sample inputs, lined up by document: the item matrix.

A paired comparison (:mod:`lbnorm.engines.paired`) needs each model's value on
each document, not only the means :mod:`lbnorm.readers.samples` keeps. This
reader reads the same inputs (harness sample files and sample tables, the
contract of ``docs/samples.md``) and lays the values out per suite subtask as a
matrix: a row per variant, a column per item (a document, or a position of a
list-valued metric's per-document list, IFEval's instructions), so that two rows
line up item by item.

- **Documents** are matched by ``doc_hash`` where every sample file of the task
  records one (lm-evaluation-harness writes it: a hash of the document's text,
  the same whatever order the documents were numbered in), else by ``doc_id``;
  sample tables record no hash, so a task a table gives is matched by ``doc_id``
  in every input. Two lines of one file with one hash hold
  the same document twice: they are matched copy by copy (in line order) and
  counted (:attr:`SubtaskItems.n_duplicated`). A repeated ``doc_id`` is an
  error, as for the aggregation; so is a ``doc_id`` that is not an integer
  (``"1"`` beside ``1`` would match nothing).
- **Clusters**: the subtasks of one task score the same documents; each
  document is its own cluster (the instructions of an IFEval prompt are one
  cluster), unless the suite names a ``cluster`` field (``doc.passage_id``),
  whose value groups documents. A line or row without it is an error.
- **Values** are held as codes in one uint8 matrix per subtask (0 absent, 1 the
  value 0, 2 the value 1, 3 another value), with float64 values beside only for
  a subtask whose values are not all 0 or 1: about a byte per (variant, item).

It is numpy and Arrow only. Rows are mapped to columns by lookup tables (a
``doc_id`` is usually a small integer), falling back to Arrow's hash lookup for
text keys and large numbers.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm._runtime import check_cancelled
from lbnorm.core.arrow import booleans, numbers, scalar, strings, to_numpy
from lbnorm.core.errors import InputError
from lbnorm.core.files import file_format
from lbnorm.core.schemas import KEY_COLUMNS
from lbnorm.readers.item_documents import Documents, KeyNumbers, number_keys
from lbnorm.readers.sample_lines import DocumentKey, read_metric_items, task_keys
from lbnorm.readers.samples import (
    bad_rows,
    group_codes,
    group_digits,
    key_entries,
    key_indices,
    read_sample_table,
    row_codes,
    sample_file_task,
    variant_of,
)
from lbnorm.suites import Benchmark, Suite

__all__ = [
    "DocumentKey",
    "ItemCollector",
    "ItemSource",
    "Items",
    "SubtaskItems",
    "read_items",
    "unpaired_benchmarks",
    "variant_rows",
    "without_scores",
]


_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
_U8 = npt.NDArray[np.uint8]
#: Codes of the item matrix.
ABSENT, ZERO, ONE, OTHER = 0, 1, 2, 3
#: Each code's value (NaN: absent, or another value, kept as a float beside).
_DECODED = np.array([np.nan, 0.0, 1.0, np.nan])
_HINT_TABLE = "Hint: a sample table has the columns of lbnorm.core.schemas.SAMPLES (docs/samples.md); the paired comparison needs one row per (variant, task, metric, doc_id) and item."


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemSource:
    """A per-sample input, and the side it is read for.

    Attributes:
        path: A ``samples_<task>_<timestamp>.jsonl`` file or a Parquet sample table.
        tag: The side (``lbnorm diff --paired``: ``old``, ``new``); variants of
            different tags are different rows.
    """

    path: Path
    tag: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SubtaskItems:
    """One suite subtask's items: the columns of the item matrix.

    Attributes:
        codes: ``(n_variants, n_columns)``: 0 absent, 1 the value 0, 2 the
            value 1, 3 another value (in `values`).
        values: ``(n_variants, n_columns)`` values, NaN where absent; None
            when every value is 0 or 1.
        documents: Per column, its document's key (``doc_id`` or ``doc_hash``).
        document_index: Per column, its document, numbered within the task.
        positions: Per column, its position in a list-valued metric's list
            (-1 for a metric with one value per document).
        clusters: Per column, its cluster, numbered within the task.
        key: How the task's documents were matched.
        is_list: A list-valued metric (a column per position).
        n_duplicated: Lines repeating a document (one ``doc_hash``) of their
            file, matched copy by copy.
    """

    codes: _U8
    values: _F64 | None
    documents: pa.Array
    document_index: _I64
    positions: _I64
    clusters: _I64
    key: DocumentKey
    is_list: bool
    n_duplicated: int = 0

    @property
    def is_binary(self) -> bool:
        """Whether every value is 0 or 1."""
        return self.values is None

    def floats(self, rows: npt.ArrayLike | None = None) -> _F64:
        """The values of `rows` (all rows: None) as floats, NaN where absent."""
        codes = self.codes if rows is None else self.codes[np.asarray(rows)]
        if self.values is not None:
            return self.values if rows is None else self.values[np.asarray(rows)]
        return np.asarray(_DECODED[codes], dtype=np.float64)


@dataclass(frozen=True, slots=True, kw_only=True)
class Items:
    """The item matrix of a suite: its variants and each subtask's items.

    Attributes:
        variants: One row per variant: ``tag``, ``model``, ``precision``,
            ``revision``, ``chat_template``; row ``i`` is row ``i`` of every
            subtask's matrices.
        subtasks: Per suite subtask (suite order), its items; None where no
            input gave any.
        tasks: Per suite subtask, its task (subtasks of one task share their
            documents and clusters).
        sources: Per variant, the inputs its items came from.
    """

    variants: pa.Table
    subtasks: tuple[SubtaskItems | None, ...]
    tasks: tuple[str, ...]
    sources: tuple[tuple[str, ...], ...] = ()

    @property
    def n_variants(self) -> int:
        """Rows of the matrix."""
        return int(self.variants.num_rows)


def unpaired_benchmarks(suite: Suite) -> dict[int, str]:
    """The benchmarks paired comparisons leave out, by index, and why.

    A statistic (``kind = "statistic"``: a count, a length) is shown as given and
    has no paired test; a benchmark whose subtasks have per-instance rules
    (:mod:`lbnorm.suites.instances`: values recoded, rescaled, counted) scores
    values this reader does not derive, so its items would not give its score;
    a pairwise benchmark is scored from battles, not items. Their subtasks get
    no items.

    Examples:
        >>> from lbnorm.suites import load_suite
        >>> unpaired_benchmarks(load_suite("openllm-v2"))
        {}
        >>> sorted(set(unpaired_benchmarks(load_suite("alpacaeval-2")).values()))
        ['a statistic: no paired test', 'per-instance rules: its per-sample values are not the items compared']
    """
    return {
        index: why
        for index, benchmark in enumerate(suite.benchmarks)
        if (why := _why_unpaired(benchmark)) is not None
    }


def _why_unpaired(benchmark: Benchmark) -> str | None:
    if benchmark.kind == "statistic":
        return "a statistic: no paired test"
    if benchmark.is_pairwise:
        return "scored from battles, not per-sample items"
    if any(subtask.instance is not None for subtask in benchmark.subtasks):
        return "per-instance rules: its per-sample values are not the items compared"
    return None


def read_items(
    sources: Sequence[ItemSource],
    suite: Suite,
    *,
    models: Collection[str] | None = None,
) -> Items:
    """Read the per-item values of per-sample inputs into an item matrix.

    Args:
        sources: The sample files (each the newest of its variant and task, as
            the aggregation took them) and sample tables.
        suite: The suite: its subtasks' tasks, metrics and ``cluster`` keys.
        models: Read only these models' rows (None: all).

    Returns:
        The item matrix.

    Raises:
        InputError: A file cannot be read; a line or row is bad (named); a
            document repeats; a cluster value is missing or differs between
            inputs for one document.
    """
    collector = ItemCollector(suite, models=models)
    collector.add_sources(sources)
    return collector.finish()


def variant_rows(keys: pa.Table, items: Items, *, tag: str = "") -> _I64:
    """Each row of `keys` (the variant key columns): its row in `items`, or -1.

    Examples:
        >>> import pyarrow as pa
        >>> from lbnorm.readers.items import Items
        >>> items = Items(variants=pa.table({"tag": [""], "model": ["m"], "precision": [""],
        ...     "revision": [""], "chat_template": [False]}), subtasks=(), tasks=())
        >>> keys = pa.table({"model": ["x", "m"], "precision": ["", ""], "revision": ["", ""],
        ...     "chat_template": [False, False]})
        >>> variant_rows(keys, items).tolist()
        [-1, 0]
    """
    is_side = pc.equal(items.variants["tag"], scalar(tag, pa.string()))
    mine = items.variants.filter(is_side)
    code = row_codes([(keys[name], mine[name]) for name in KEY_COLUMNS])
    row_of = np.full(int(code.max(initial=-1)) + 1, -1, dtype=np.int64)
    row_of[code[keys.num_rows :]] = np.flatnonzero(to_numpy(is_side))
    return row_of[code[: keys.num_rows]]


def without_scores(
    items: Items, scores: pa.Table, suite: Suite, *, tag: str = ""
) -> Items:
    """The item matrix without the items of these (variant, subtask) scores.

    Where a results file gave a variant's subtask (it wins over the samples), a
    comparison must not use a sample file's items for it: those are cleared,
    and the subtask has no per-sample data for that variant. Only the subtasks
    concerned are copied.

    Args:
        items: The item matrix (of tag '').
        scores: The scores whose items go: key columns, ``benchmark`` and
            ``subtask``.
        suite: The suite (the subtasks' order).
        tag: The side the scores are of.
    """
    keys = [f"{b.name}\x1f{s.name}" for b in suite.benchmarks for s in b.subtasks]
    name = pc.binary_join_element_wise(
        pc.cast(scores["benchmark"], pa.string()),
        pc.cast(scores["subtask"], pa.string()),
        scalar("\x1f", pa.string()),
    )
    index = to_numpy(
        pc.index_in(name, value_set=strings(keys)).cast(pa.int64()), null=-1
    )
    row = variant_rows(scores.select(list(KEY_COLUMNS)), items, tag=tag)
    other = (row >= 0) & (index >= 0)
    if not other.any():
        return items
    cleared = list(items.subtasks)
    for k in np.unique(index[other]).tolist():  # the subtasks concerned (few)
        subtask = cleared[k]
        if subtask is None:
            continue
        rows = row[other & (index == k)]
        codes = subtask.codes.copy()
        codes[rows] = 0
        values = None if subtask.values is None else subtask.values.copy()
        if values is not None:
            values[rows] = np.nan
        cleared[k] = replace(subtask, codes=codes, values=values)
    return replace(items, subtasks=tuple(cleared))


class ItemCollector:
    """An item matrix built as inputs come: sample tables a batch at a time, files whole.

    ``lbnorm run --paired`` hands it to the aggregation of sample tables
    (:class:`lbnorm.readers.samples.BatchSink`), so that a table is read once
    for its scores and its items; the sample files are added after.

    Args:
        suite: The suite: its subtasks' tasks, metrics and ``cluster`` keys.
        models: Take only these models' rows (None: all).
    """

    def __init__(self, suite: Suite, *, models: Collection[str] | None = None) -> None:
        rows = [s for b in suite.benchmarks for s in b.subtasks]
        left_out = unpaired_benchmarks(suite)
        self.n_pairs = len(rows)
        # a subtask left out reads no task: it gets no items
        self.tasks = [
            "" if index in left_out else s.task
            for index, b in enumerate(suite.benchmarks)
            for s in b.subtasks
        ]
        self.metrics = [s.metric for s in rows]
        self.task_number = {
            t: i for i, t in enumerate(dict.fromkeys(t for t in self.tasks if t))
        }
        self.task_of = np.array(
            [self.task_number.get(t, -1) for t in self.tasks], dtype=np.int64
        )
        self.cluster_key: list[str | None] = [None] * len(self.task_number)
        for subtask, task in zip(rows, self.task_of.tolist(), strict=True):
            if task >= 0:
                self.cluster_key[task] = subtask.cluster
        self.pair_of = {
            (s.task, s.metric): i for i, s in enumerate(rows) if self.tasks[i]
        }
        self.docs = Documents(len(self.task_number))
        self.task_key: list[DocumentKey | None] = [None] * len(self.task_number)
        self.variants: dict[tuple[str, str, str, str, bool], int] = {}
        self.sources: list[dict[str, None]] = []
        self.is_list = np.zeros(self.n_pairs, dtype=np.int8)  # 0 unknown, 1 no, 2 yes
        self.listed: list[KeyNumbers | None] = [None] * self.n_pairs
        self.n_columns = np.zeros(self.n_pairs, dtype=np.int64)  # list-valued pairs
        self.capacity = np.zeros(self.n_pairs, dtype=np.int64)
        self.offset = np.zeros(self.n_pairs, dtype=np.int64)
        self.grid = np.zeros((0, 0), dtype=np.uint8)
        self.floats: dict[int, _F64] = {}
        self.is_float = np.zeros(self.n_pairs, dtype=bool)
        self.n_put = 0
        self.n_duplicated = np.zeros(self.n_pairs, dtype=np.int64)
        self._wanted = None if models is None else set(models)
        keys = {key for key in self.cluster_key if key}
        #: The columns of a sample table it reads beyond the aggregation's.
        self.columns = ("doc_id", "item", *sorted(keys))

    def add_batch(self, batch: pa.RecordBatch, *, path: Path, first_row: int) -> None:
        """Add a batch of a sample table's rows (``first_row``: its first row's number)."""
        self._add_rows(ItemSource(path=path), batch, first_row)

    def add_sources(self, sources: Sequence[ItemSource]) -> None:
        """Add sample tables (streamed) and sample files (each read whole).

        The tables first: a task a table gives is matched by ``doc_id`` in every
        input (a table records no ``doc_hash``).
        """
        columns = [*KEY_COLUMNS, "task", "metric", "value", *self.columns]
        for source in sources:
            if file_format(source.path) != "jsonl":  # a batch at a time
                add = functools.partial(self._add_rows, source)
                read_sample_table(source.path, columns, add, hint=_HINT_TABLE)
        jsonl = [s for s in sources if file_format(s.path) == "jsonl"]
        keys = task_keys([source.path for source in jsonl])
        seen: dict[Path, tuple[str, str, str, bool]] = {}
        for source in jsonl:  # a file, not a line, a step
            check_cancelled()
            task, stamp = sample_file_task(source.path)
            if task not in self.task_number:
                continue
            variant = variant_of(source.path, stamp, seen)
            if self._wanted is not None and variant[0] not in self._wanted:
                continue
            given = self.task_key[self.task_number[task]]
            self._add_file(source, task, variant, given or keys.get(task, "doc_id"))

    # --- inputs ---------------------------------------------------------------------

    def _add_file(
        self,
        source: ItemSource,
        task: str,
        variant: tuple[str, str, str, bool],
        key: DocumentKey,
    ) -> None:
        """Add one harness sample file's items (one variant, one task)."""
        t = self.task_number[task]
        self._check_key(t, key, source.path)
        pairs = [p for p in range(self.n_pairs) if self.tasks[p] == task]
        wanted = [self.metrics[p].partition(",")[::2] for p in pairs]
        parsed = read_metric_items(source.path, wanted, key, self.cluster_key[t])
        v = self._variant((source.tag, *variant), str(source.path))
        for pair, got in zip(pairs, parsed, strict=True):
            if got.documents.type == pa.int64():
                docs = to_numpy(got.documents)
                number = self.docs.numbers(np.full(docs.size, t, np.int64), docs)
            else:
                number = self.docs.numbers_of(t, got.documents)
            if got.clusters is not None:
                self.docs.set_clusters(
                    t,
                    number,
                    got.clusters,
                    functools.partial(_document_where, source.path, got.documents),
                )
            self.n_duplicated[pair] += got.n_duplicated
            position = np.full(number.size, -1, dtype=np.int64)
            if got.lengths is not None:
                number, position = np.repeat(number, got.lengths), got.positions()
            rows = np.full(number.size, pair, dtype=np.int64)
            column = self._columns(rows, number, position, lambda _: str(source.path))
            self._put(np.full(number.size, v, np.int64), rows, column, got.values)

    def _add_rows(self, source: ItemSource, batch: pa.RecordBatch, first: int) -> None:
        path, wanted = source.path, self._wanted
        rows = np.arange(first, first + batch.num_rows)  # each row's number in the file
        if wanted is not None:
            keep = to_numpy(
                pc.is_in(batch.column("model"), value_set=strings(sorted(wanted)))
            )
            batch, rows = batch.filter(booleans(keep)), rows[keep]
        for name in ("model", "task", "metric", "doc_id", "value", "chat_template"):
            if name in batch.schema.names and batch.column(name).null_count:
                is_null = to_numpy(batch.column(name).is_null())
                bad_rows(str(path), name, "null", rows[is_null])
        pair = self._pairs(batch)
        kept = pair >= 0
        if not kept.all():
            batch, pair, rows = batch.filter(booleans(kept)), pair[kept], rows[kept]
        if not batch.num_rows:
            return

        value = to_numpy(pc.cast(batch.column("value"), pa.float64()))
        if not np.isfinite(value).all():
            bad_rows(str(path), "value", "not finite", rows[~np.isfinite(value)])
        variant = self._table_variants(batch, source)
        task = self.task_of[pair]
        for t in np.flatnonzero(
            np.bincount(task, minlength=len(self.task_key))
        ).tolist():
            self._check_key(t, "doc_id", path)
        number = self.docs.numbers(task, to_numpy(batch.column("doc_id")))
        self._table_clusters(batch, task, number, path, rows)
        item = (
            to_numpy(batch.column("item").cast(pa.int64()), null=-1)
            if "item" in batch.schema.names
            else None
        )
        column = self._columns(pair, number, item, lambda at: f"{path}: row {rows[at]}")
        self._put(variant, pair, column, value)

    def _columns(
        self,
        pair: _I64,
        number: _I64,
        item: _I64 | None,
        where: Callable[[int], str],
    ) -> _I64:
        """Each row's column: its document, or its (document, item) of a list-valued metric.

        `item`: each row's position in its document's list (-1: none; None: no
        row has one).
        """
        total = np.bincount(pair, minlength=self.n_pairs)
        is_listed = np.zeros(pair.size, dtype=bool) if item is None else item >= 0
        listed = np.bincount(pair[is_listed], minlength=self.n_pairs)
        is_mixed = (listed > 0) & (listed < total)
        if is_mixed.any():
            p = int(np.flatnonzero(is_mixed)[0])
            at = int(np.flatnonzero((pair == p) & ~is_listed)[0])
            msg = f"{where(at)}: task {self.tasks[p]!r} metric {self.metrics[p]!r} mixes rows with and without 'item'.\nHint: give every row of a list-valued metric its item position, and none to the others."
            raise InputError(msg)
        present = np.flatnonzero(total)
        state = np.where(listed[present] > 0, 2, 1).astype(np.int8)
        known = self.is_list[present]
        if ((known != 0) & (known != state)).any():
            p = int(present[np.flatnonzero((known != 0) & (known != state))[0]])
            msg = f"{where(int(np.argmax(pair == p)))}: task {self.tasks[p]!r} metric {self.metrics[p]!r} is a list per document here but not in other inputs (or the reverse).\nHint: a metric is either one value per document or a list per document, in every input."
            raise InputError(msg)
        self.is_list[present] = state
        if not listed.any():
            return number
        assert item is not None
        column = number.copy()
        for p in np.flatnonzero(listed).tolist():
            rows = np.flatnonzero(pair == p)
            column[rows] = self._list_columns(p, number[rows], item[rows])
        return column

    def _pairs(self, batch: pa.RecordBatch) -> _I64:
        """Each row's suite subtask (-1: not the suite's)."""
        (task, tasks), (metric, metrics) = (
            key_indices(batch.column(name)) for name in ("task", "metric")
        )
        table = np.array(
            [[self.pair_of.get((t, m), -1) for m in metrics] for t in tasks],
            dtype=np.int64,
        )
        return np.asarray(table[task, metric], dtype=np.int64)

    def _table_variants(self, batch: pa.RecordBatch, source: ItemSource) -> _I64:
        """Each row's variant number (new variants registered as they come)."""
        columns = [key_entries(batch, name) for name in KEY_COLUMNS]
        entries = [values for _, values in columns]
        code, size, steps = group_codes(
            [(index, len(values)) for index, values in columns], batch.num_rows
        )
        present = np.flatnonzero(np.bincount(code, minlength=size))
        keys = [
            [values[d] for d in digit.tolist()]
            for values, digit in zip(entries, group_digits(present, steps), strict=True)
        ]
        lookup = np.full(size, -1, dtype=np.int64)
        lookup[present] = [
            self._variant((source.tag, *key), str(source.path))
            for key in zip(*keys, strict=True)
        ]  # a step per variant of the batch, not per row
        return lookup[code]

    def _table_clusters(
        self,
        batch: pa.RecordBatch,
        task: _I64,
        number: _I64,
        path: Path,
        file_rows: _I64,
    ) -> None:
        """Record the clusters of the rows of tasks with a cluster key (`file_rows`: their numbers in the file)."""
        keyed = [t for t, key in enumerate(self.cluster_key) if key]
        if not keyed:
            return
        present = np.flatnonzero(np.bincount(task, minlength=len(self.cluster_key)))
        for t in sorted(set(keyed) & set(present.tolist())):  # a task at a time
            key = self.cluster_key[t]
            assert key is not None
            rows = np.flatnonzero(task == t)
            if key not in batch.schema.names:
                msg = f"{path}: no column {key!r}, the suite's cluster key for task {self._task_name(t)!r} (row {file_rows[rows[0]]}).\nHint: add the cluster's column (named as the suite's cluster key) to the sample table, or remove cluster from the suite."
                raise InputError(msg)
            values = batch.column(key).take(numbers(rows, pa.int64()))
            if values.null_count:
                bad = rows[to_numpy(values.is_null())]
                shown = ", ".join(map(str, file_rows[bad[:5]]))
                msg = f"{path}: {key!r} (the suite's cluster key for task {self._task_name(t)!r}) is null in {bad.size} row(s): {shown}.\nHint: every row of a clustered task needs its cluster; fill it in, or remove cluster from the suite."
                raise InputError(msg)
            self.docs.set_clusters(
                t,
                number[rows],
                values,
                functools.partial(_row_where, path, file_rows[rows]),
            )

    def _task_name(self, task: int) -> str:
        return list(self.task_number)[task]

    def _variant(self, key: tuple[str, str, str, str, bool], source: str) -> int:
        number = self.variants.setdefault(key, len(self.variants))
        if number == len(self.sources):
            self.sources.append({})
        self.sources[number].setdefault(source)
        return number

    def _check_key(self, task: int, key: DocumentKey, path: Path) -> None:
        """A task's documents are matched one way across all inputs."""
        known = self.task_key[task]
        if known is None:
            self.task_key[task] = key
        elif known != key:
            msg = f"{path}: matches task {self._task_name(task)!r}'s documents by {key}, but other inputs of the task by {known}.\nHint: give every input of a task the same document keys (harness sample files record doc_hash; sample tables give doc_id)."
            raise InputError(msg)

    def _list_columns(self, pair: int, number: _I64, position: _I64) -> _I64:
        """The columns of (document, position) items of a list-valued metric."""
        key = numbers(number * (1 << 20) + position, pa.int64())
        start = int(self.n_columns[pair])
        found, self.listed[pair], fresh = number_keys(self.listed[pair], key, start)
        self.n_columns[pair] += len(fresh)
        return found

    def _width(self, pair: int) -> int:
        """Columns the pair needs: its task's documents, or its (document, item) items."""
        if self.is_list[pair] == 2:
            return int(self.n_columns[pair])
        return int(self.docs.count[self.task_of[pair]])

    def _put(self, variant: _I64, pair: _I64, column: _I64, values: _F64) -> None:
        """Write values into the matrix, growing it as needed."""
        documents = self.docs.count[np.maximum(self.task_of, 0)]
        need = np.where(self.is_list == 2, self.n_columns, documents)
        rows = int(variant.max()) + 1 if variant.size else 0
        if (need > self.capacity).any() or rows > self.grid.shape[0]:
            self._grow(rows, need)
        width = self.grid.shape[1]
        target = variant * width + self.offset[pair] + column
        is_one = values == 1.0
        code = is_one.view(np.uint8) + np.uint8(ZERO)
        is_other = ~is_one & (values != 0.0)
        code[is_other] = OTHER
        self.grid.reshape(-1)[target] = code
        self.n_put += int(target.size)
        if self.is_float.any() or is_other.any():
            floats = self.is_float[pair] | is_other
            pairs = np.flatnonzero(np.bincount(pair[floats], minlength=self.n_pairs))
            for p in pairs.tolist():  # the suite pairs with other values
                if p not in self.floats:
                    self._start_floats(p)
                rows_of = np.flatnonzero(pair == p)
                self.floats[p][variant[rows_of], column[rows_of]] = values[rows_of]

    def _start_floats(self, pair: int) -> None:
        """A pair's first value other than 0 or 1: its values as floats from now on."""
        block = self.grid[
            :, self.offset[pair] : self.offset[pair] + self.capacity[pair]
        ]
        self.floats[pair] = _DECODED[block]
        self.is_float[pair] = True

    def _grow(self, rows: int, need: _I64) -> None:
        """Room for `rows` variants and `need` columns per pair (doubling)."""
        old_rows = self.grid.shape[0]
        new_rows = (
            max(rows, old_rows + old_rows // 2, 64) if rows > old_rows else old_rows
        )
        capacity = np.where(
            need > self.capacity, np.maximum(need, 2 * self.capacity), self.capacity
        )
        offset = np.concatenate([[0], np.cumsum(capacity)[:-1]]).astype(np.int64)
        grid = np.zeros((new_rows, int(capacity.sum())), dtype=np.uint8)
        for p in np.flatnonzero(self.capacity).tolist():  # a suite pair at a time
            grid[:old_rows, offset[p] : offset[p] + self.capacity[p]] = self.grid[
                :, self.offset[p] : self.offset[p] + self.capacity[p]
            ]
        for p, block in self.floats.items():
            grown = np.full((new_rows, int(capacity[p])), np.nan)
            grown[: block.shape[0], : block.shape[1]] = block
            self.floats[p] = grown
        self.grid, self.capacity, self.offset = grid, capacity.astype(np.int64), offset

    # --- the result ---------------------------------------------------------------------

    def finish(self) -> Items:
        """The item matrix, checked: no (variant, item) given twice."""
        filled = int(np.count_nonzero(self.grid))
        if filled != self.n_put:
            msg = f"the per-sample inputs give {self.n_put - filled:,} value(s) twice for one (variant, task, metric, document): {', '.join(sorted({s for found in self.sources for s in found})[:5])}.\nHint: keep one row (or line) per document, and each run's sample file once; the paired comparison needs one value per document."
            raise InputError(msg)
        n_variants = len(self.variants)
        subtasks: list[SubtaskItems | None] = []
        for p in range(self.n_pairs):
            width = self._width(p) if self.task_of[p] >= 0 else 0
            if not width or not self.is_list[p]:
                subtasks.append(None)
                continue
            t = int(self.task_of[p])
            if self.is_list[p] == 2:
                listed = self.listed[p]
                assert listed is not None  # (it has columns: _list_columns made them)
                code = np.empty(width, dtype=np.int64)
                code[listed[1]] = to_numpy(listed[0])
                document, position = np.divmod(code, 1 << 20)
            else:
                document = np.arange(width, dtype=np.int64)
                position = np.full(width, -1, dtype=np.int64)
            start = int(self.offset[p])
            values = self.floats.get(p)
            subtasks.append(
                SubtaskItems(
                    codes=self.grid[:n_variants, start : start + width],
                    values=None if values is None else values[:n_variants, :width],
                    documents=self.docs.names(t, document),
                    document_index=document,
                    positions=position,
                    clusters=self.docs.clusters(t, document),
                    key=self.task_key[t] or "doc_id",
                    is_list=bool(self.is_list[p] == 2),
                    n_duplicated=int(self.n_duplicated[p]),
                )
            )
        keys = list(self.variants)
        variants = pa.table(
            {
                "tag": strings([k[0] for k in keys]),
                "model": strings([k[1] for k in keys]),
                "precision": strings([k[2] for k in keys]),
                "revision": strings([k[3] for k in keys]),
                "chat_template": booleans(np.array([k[4] for k in keys], dtype=bool)),
            }
        )
        return Items(
            variants=variants,
            subtasks=tuple(subtasks),
            tasks=tuple(self.tasks),
            sources=tuple(tuple(found) for found in self.sources),
        )


def _document_where(path: Path, keys: pa.Array, at: int) -> str:
    return f"{path}: document {keys[at]}"


def _row_where(path: Path, rows: _I64, at: int) -> str:
    return f"{path}: row {rows[at]}"
