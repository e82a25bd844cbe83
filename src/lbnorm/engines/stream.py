"""The streaming engine (the default): each batch checked, summed and written, then dropped.

Each batch (a Parquet row group, or a whole CSV, JSONL or results input) is
encoded, checked, and folded into exact per (variant, benchmark) partial sums
(:class:`lbnorm.engines.kernel.Partials`); its rows, with their bound, normalized score
and clipping flag, are the next part of the subtask table, which the writer puts
on disk while the next batch is summed (the subtask table is a per-row map of
the input, in input order). The working set is one batch, the sums per
(variant, benchmark), one byte per (variant, subtask) to catch duplicates
across batches (and count subtasks), and the key registry, so inputs larger
than memory (a directory of Parquet files, a partitioned dataset, 200M rows)
stream through. When the sums themselves would pass ``RunOptions.sum_memory``
(millions of variants), each batch's sums go to disk instead and are added up
a partition of the variants at a time (:mod:`lbnorm.engines.spill`).

The sums are exact (fixed point, see :class:`lbnorm.engines.kernel.FixedPoint`), so the
benchmark and leaderboard tables do not depend on row order, batch boundaries
or worker count, bit for bit. With ``options.engine == "memory"`` the rows
are held instead and the subtask table comes sorted at the end
(:mod:`lbnorm.engines.sorted_parts`); the sums then never spill.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm._runtime import check_cancelled, keep_freed_memory, release_free_memory
from lbnorm.core import arrow
from lbnorm.core.options import RunOptions
from lbnorm.core.schemas import SUBTASK_SCORES, Batch
from lbnorm.engines.encode import KeyEncoder, Variants, merge_variants
from lbnorm.engines.kernel import (
    IntArray,
    SuiteArrays,
    finish_benchmarks,
    normalize_rows,
)
from lbnorm.engines.partials import PartialStore, Tally
from lbnorm.engines.result import (
    Result,
    assemble_result,
    finish_job,
    start_benchmark_keys,
    with_present_values,
)
from lbnorm.engines.spill import SpillStore, finish_spilled, spill_width
from lbnorm.engines.validate import (
    MAX_FAILURES_SHOWN,
    CheckedBatch,
    check_batch,
    describe_failures,
    failure_rows,
)
from lbnorm.readers import Inputs
from lbnorm.suites import Suite, suite_arrays

if TYPE_CHECKING:
    from lbnorm.engines.sorted_parts import SortedParts

__all__ = [
    "StreamJob",
    "Totals",
    "add_totals",
    "compute",
    "finish_totals",
    "start",
    "sum_scores",
]


def start(inputs: Inputs, suite: Suite, options: RunOptions) -> StreamJob:
    """Stream the inputs (the engine interface): see :class:`StreamJob`."""
    return StreamJob(inputs, suite, options)


def compute(inputs: Inputs, suite: Suite, options: RunOptions) -> Result:
    """Normalize score batches in bounded memory, the whole way.

    With ``options.workers`` > 1, no subtask table and Parquet inputs, each of
    that many disjoint shares of the row groups
    (:meth:`lbnorm.readers.Inputs.partition`) is summed in its own forked process
    and the exact sums are added up (:mod:`lbnorm.engines.workers`).

    Args:
        inputs: The score batches (Parquet row groups stream from disk).
        suite: The suite.
        options: The run's options (``unknown``, ``missing``, ``subtasks``,
            ``batch_rows``, ``workers``).

    Returns:
        The result (its subtask table held in memory when ``options.subtasks``).

    Raises:
        ValidationError: Any check failed in any batch; ``failures`` lists them all.

    Examples:
        >>> import pyarrow as pa
        >>> from lbnorm.suites import load_suite
        >>> table = pa.table({"model": ["m"] * 3, "benchmark": ["MUSR"] * 3,
        ...     "subtask": ["murder_mysteries", "object_placements", "team_allocation"],
        ...     "raw_score": [0.7, 0.4, 0.6]})
        >>> inputs = Inputs.of_batches([Batch(table=table, source="t")])
        >>> options = RunOptions(missing="partial", subtasks=False, batch_rows=1)
        >>> result = compute(inputs, load_suite("openllm-v2"), options)
        >>> result.benchmarks["normalized_score"].round(9).tolist()
        [35.0]
    """
    return finish_job(start(inputs, suite, options))


class StreamJob:
    """A streaming run: consuming :meth:`subtask_parts` reads, checks and sums the input.

    Each part is one batch's accepted rows as subtask-table rows (only when
    ``options.subtasks``); :meth:`finish` sums what is left (in forked workers
    when asked and possible) and returns the result.
    """

    def __init__(self, inputs: Inputs, suite: Suite, options: RunOptions) -> None:
        self._inputs, self._suite, self._options = inputs, suite, options
        self._folder = _Folder(suite, options, rows=inputs.num_rows)
        self._is_done = False
        self._held: SortedParts | None = None

    @property
    def subtask_schema(self) -> pa.Schema | None:
        """The parts' schema (with the ``memory`` order: after reading every batch)."""
        if not self._options.subtasks:
            return None
        if self._options.engine != "memory":
            return SUBTASK_SCORES
        return self._hold().schema

    def subtask_parts(self) -> Iterator[pa.Table]:
        """Each batch's rows for the subtask table, as the batch is summed.

        With the ``memory`` order, every batch is read and summed first, then
        the parts come a benchmark at a time (:mod:`lbnorm.engines.sorted_parts`).
        """
        if self.subtask_schema is None:
            return
        if self._options.engine == "memory":
            held = self._hold()
            if not self._folder.tally.failures:  # (else nothing was summed)
                yield from held.parts(self._folder.variants())
            return
        if self._is_done:
            return
        for batch, checked in self._checked():
            yield _subtask_part(batch, checked, self._folder.arrays, suite=self._suite)

    def _checked(self) -> Iterator[tuple[Batch, CheckedBatch]]:
        """Fold every batch; each one, checked, until a batch fails a check."""
        self._is_done = True
        with self._folder.folding():
            for batch in _sliced(self._inputs.batches, self._options.batch_rows):
                checked = self._folder.fold(batch)
                if checked is not None:  # no failure so far
                    yield batch, checked

    def _hold(self) -> SortedParts:
        """Read, check and sum every batch, holding its rows for the sorted table."""
        if self._held is None:
            from lbnorm.engines.sorted_parts import SortedParts  # (that order only)

            self._held = SortedParts(self._suite)
            for batch, checked in () if self._is_done else self._checked():
                self._held.add(batch, checked)
        return self._held

    def finish(self) -> Result:
        """Sum whatever the parts have not, and build the result."""
        files = self._inputs.catalog
        if not self._is_done:
            self._is_done = True
            if (totals := self._sum_in_workers()) is not None:
                return finish_totals(
                    totals, self._suite, options=self._options, files=files
                )
            for _ in self._checked():
                pass
        return self._folder.finish(self._suite, self._options, files)

    def _sum_in_workers(self) -> Totals | None:
        """The input summed in forked workers when asked and possible, else None.

        None, too, when a check failed: the serial run says where.
        """
        inputs, options = self._inputs, self._options
        if not inputs.streamed or options.workers < 2 or self._folder.spills:
            return None
        from lbnorm.engines.workers import sum_in_workers  # (only for workers)

        totals = add_totals(
            sum_in_workers(
                lambda part, parts: sum_scores(
                    inputs.partition(part, parts),
                    self._suite,
                    options,
                    expected_rows=inputs.num_rows // parts,
                ),
                options.workers,
            )
        )
        return None if totals.tally.failures else totals


def _subtask_part(
    batch: Batch, checked: CheckedBatch, arrays: SuiteArrays, *, suite: Suite
) -> pa.Table:
    """A batch's accepted rows as rows of the subtask table (:data:`SUBTASK_SCORES`).

    Names spelled in another case than the suite's (``MuSR``) get the suite's.
    """
    table, good = batch.table, checked.good
    subtask, raw = checked.subtask[good], checked.scores[good]
    if not isinstance(good, slice):
        table = table.filter(arrow.array(good))
    normalized, lower_bound, is_clipped = normalize_rows(raw, subtask, arrays)
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "raw_score": arrow.array(raw),
        "lower_bound": arrow.array(lower_bound),
        "normalized_score": arrow.array(normalized),
        "is_clipped": arrow.array(is_clipped),
    }
    for field in SUBTASK_SCORES:
        name = field.name
        if name in columns:
            continue
        if checked.is_renamed and name in ("benchmark", "subtask"):
            columns[name] = _suite_names(suite, arrays, subtask, name)  # (TEXT)
        elif name in table.column_names:
            columns[name] = _as_type(table.column(name), field.type)
        else:  # an optional column the input left out
            default = batch.source if name == "source" else _DEFAULTS.get(name)
            columns[name] = _constant(default, field.type, table.num_rows)
    return with_present_values(
        pa.Table.from_arrays(
            [columns[name] for name in SUBTASK_SCORES.names], schema=SUBTASK_SCORES
        )
    )


def _suite_names(
    suite: Suite, arrays: SuiteArrays, subtask: npt.NDArray[np.int64], column: str
) -> pa.Array:
    """The suite's benchmark or subtask name of each row, by its subtask code."""
    if column == "benchmark":
        names = list(suite.benchmark_names)
        codes = arrays.benchmark_index[subtask]
    else:
        every = [
            task.name for benchmark in suite.benchmarks for task in benchmark.subtasks
        ]
        names = sorted(set(every))
        codes = np.searchsorted(np.asarray(names, dtype=object), every)[subtask]
    return arrow.dictionary(np.asarray(codes, dtype=np.int32), arrow.strings(names))


#: What an optional column the input leaves out holds in the subtask table.
_DEFAULTS: dict[str, object] = {
    "precision": "",
    "revision": "",
    "chat_template": False,
    "metric": "",
}


def _constant(value: object, kind: pa.DataType, n_rows: int) -> pa.Array:
    """`n_rows` copies of `value` in the column's type, without a value per row."""
    if value is None:
        return pa.nulls(n_rows, kind)
    if pa.types.is_dictionary(kind):
        assert isinstance(value, str)
        return arrow.dictionary(
            np.zeros(n_rows, dtype=np.int32),
            arrow.strings([value]).cast(kind.value_type),
        )
    return arrow.array(np.full(n_rows, value), kind)


def _as_type(
    values: pa.Array | pa.ChunkedArray, kind: pa.DataType
) -> pa.Array | pa.ChunkedArray:
    """Values in the output column's type (text as dictionaries)."""
    if values.type == kind:
        return values
    if pa.types.is_dictionary(kind) and not pa.types.is_dictionary(values.type):
        encoded = values.cast(kind.value_type).dictionary_encode()
        return encoded if encoded.type == kind else encoded.cast(kind)
    return values.cast(kind)


def finish_totals(
    totals: Totals,
    suite: Suite,
    *,
    options: RunOptions,
    files: pa.Table | None = None,
) -> Result:
    """Turn exact sums into the benchmark and leaderboard tables.

    Args:
        totals: Sums over every score.
        suite: The suite.
        options: The run's options.
        files: The catalog of input files.

    Returns:
        The result, without the subtask-level table.

    Raises:
        ValidationError: A check failed (the totals list every failure).
    """
    tally = totals.tally
    tally.raise_failures()
    order = totals.variants.order()
    variants = totals.variants.take(order)
    keys = start_benchmark_keys(variants, suite)  # while the sums are finished
    arrays = totals.store.arrays
    partials = totals.store.partials(len(variants), order)
    totals.store.release()  # the sums and the seen matrix, the biggest arrays: the
    # caller's references to the store (a job's folder) would keep them otherwise
    del totals
    benchmark = finish_benchmarks(partials, arrays, missing=options.missing)
    values = partials.values
    del partials
    return assemble_result(
        variants,
        benchmark,
        suite,
        options=options,
        files=files,
        n_ignored_rows=tally.n_ignored,
        n_scores=tally.n_scores,
        n_clipped=tally.n_clipped,
        keys=keys,
        values=values,
    )


@dataclass(slots=True, kw_only=True)
class Totals:
    """Exact sums over a set of batches, keyed by variant; they add up.

    Attributes:
        variants: The variant keys, one row per store row (in code order).
        store: The sums and the seen matrix.
        tally: The batches' failures and row counts.
    """

    variants: Variants
    store: PartialStore
    tally: Tally


def sum_scores(
    batches: Iterable[Batch],
    suite: Suite,
    options: RunOptions,
    *,
    expected_rows: int = 0,
) -> Totals:
    """Check every batch and fold it into exact per (variant, benchmark) sums, never spilled.

    Args:
        batches: Score batches.
        suite: The suite.
        options: The run's options (``unknown``, ``batch_rows``, ``failures``).
        expected_rows: Rows expected in all (sizes the sums up front).

    Returns:
        The sums; after the first failure, batches are still checked (every
        failure is counted) but no longer summed.
    """
    folder = _Folder(suite, options, rows=expected_rows, may_spill=False)
    with folder.folding():
        for batch in _sliced(batches, options.batch_rows):
            folder.fold(batch)
    return folder.totals()


class _Folder:
    """Checks batches and folds them into exact sums, one at a time."""

    def __init__(
        self, suite: Suite, options: RunOptions, *, rows: int, may_spill: bool = True
    ) -> None:
        """A folder for `rows` rows, that spills when the options ask (and it may).

        Failure rows are described up to :data:`MAX_FAILURES_SHOWN` per check
        and batch, or all of them when the options ask for a failures file.
        """
        self._pairs = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
        self.arrays = suite_arrays(suite)
        scales = self.arrays.scales  # a score below this is clipped
        self._floor = self.arrays.lower_bound if scales is None else scales.floor
        self._unknown = options.unknown
        self._failure_limit = None if options.failures else MAX_FAILURES_SHOWN
        # the options of a run that may spill (not the memory order: held whole)
        spill = options if may_spill and options.engine != "memory" else None
        self._rows, self._spill = rows, spill
        capacity = rows // max(len(self._pairs), 1) + 1
        self._encoder = KeyEncoder(self._pairs, expected_variants=capacity)
        names = [f"{b} / {t}" for b, t in self._pairs]
        width = None if spill is None else spill_width(self.arrays, rows, spill)
        if width is None:  # no bound to keep: freed memory is kept for reuse
            keep_freed_memory()
        self._store: PartialStore | SpillStore = (
            PartialStore(self.arrays, capacity, names)
            if width is None or spill is None
            else SpillStore(self.arrays, capacity, names, width, spill.spill_dir)
        )
        self.tally = Tally()

    def variants(self) -> Variants:
        """The variant keys seen so far, in code order."""
        return self._encoder.variants()

    @property
    def spills(self) -> bool:
        """Whether the rows go to a spill folder (see :mod:`lbnorm.engines.spill`)."""
        return isinstance(self._store, SpillStore)

    @contextlib.contextmanager
    def folding(self) -> Iterator[None]:
        """Folding batches; on any error the summing thread stops before it goes on.

        A batch handed to the thread is done (or dropped, its folder removed)
        by the time the error leaves: the store is then free to go.
        """
        try:
            yield
        except BaseException:
            self._store.abandon()
            raise

    def fold(self, batch: Batch) -> CheckedBatch | None:
        """Check a batch and add its scores; None once any batch failed a check."""
        self.spill_if_over()  # (on the variants of the batches before)
        encoder, store = self._encoder, self._store
        checked = check_batch(
            batch,
            encoder,
            unknown=self._unknown,
            seen_before=store.is_seen,
            scales=self.arrays.scales,
        )
        check_cancelled()  # (checking a large batch takes a while: before its sums)
        tally = self.tally
        tally.n_ignored += checked.n_ignored
        if checked.n_failed:
            tally.failures.extend(
                describe_failures(
                    batch,
                    checked.failed,
                    known=self._pairs,
                    limit=self._failure_limit,
                )
            )
            tally.n_failed += checked.n_failed
        store.reserve(encoder.n_variants)
        good = checked.good
        variant, subtask = checked.variant[good], checked.subtask[good]
        if tally.failures:  # the run fails: keep checking, stop summing
            store.add(variant, subtask, None)
            return None
        raw = checked.scores[good]
        details = {name: values[good] for name, values in checked.details.items()}
        store.add(variant, subtask, raw, **details)
        tally.n_scores += raw.size
        tally.n_clipped += int(np.count_nonzero(raw < self._floor[subtask]))
        return checked

    def spill_if_over(self) -> None:
        """Turn the store to spilling once the variants seen pass the budget.

        A sparse input holds more variants than its row count said
        (:func:`lbnorm.engines.spill.spill_width`); its sums so far move to disk.
        """
        spill = self._spill
        if spill is None or not isinstance(self._store, PartialStore):
            return
        n_variants = self._encoder.n_variants
        width = spill_width(self.arrays, self._rows, spill, n_variants=n_variants)
        if width is not None:
            self._store = SpillStore.of_partials(
                self._store, n_variants, width, spill.spill_dir
            )
            release_free_memory()  # the sums just written out

    def finish(self, suite: Suite, options: RunOptions, files: pa.Table) -> Result:
        """The result of every batch folded: from the sums, or what a spilling folder wrote."""
        self.spill_if_over()  # (the last batch's variants too)
        if not isinstance(self._store, SpillStore):
            return finish_totals(  # (no name kept here: the callee frees the sums)
                self.totals(last=True), suite, options=options, files=files
            )
        if self.tally.failures:
            self._store.abandon()
            self.tally.raise_failures()
        release_free_memory()  # the pass's temporaries, before the keys are joined
        n_variants = self._encoder.n_variants
        return finish_spilled(  # (no name kept here: the callee frees the keys)
            self._encoder.variants(last=True),
            self._store.trimmed(n_variants),
            suite,
            options=options,
            files=files,
            tally=self.tally,
        )

    def totals(self, *, last: bool = False) -> Totals:
        """The sums so far (of a folder that does not spill).

        Args:
            last: Nothing more will be folded: the key registry's hash tables
                are freed (~100 MB per 5M keys) before the result is built.
        """
        assert isinstance(self._store, PartialStore), "a spilled run has no sums"
        variants = self._encoder.variants(last=last)
        return Totals(
            variants=variants,
            store=self._store.trimmed(len(variants)),
            tally=self.tally,
        )


def add_totals(parts: list[Totals]) -> Totals:
    """Add up the sums of disjoint shares of the input, matching variants by key.

    Failures found in the shares are kept. A (variant, subtask) present in two
    shares is a duplicate: it becomes a failure row whose source says so (a run
    in one process can name the file and row).

    Args:
        parts: Sums over disjoint shares (from :func:`sum_scores`).

    Returns:
        The combined sums (not summed any further once a failure is found).
    """
    tally = Tally.added(part.tally for part in parts)
    variants, code = merge_variants([part.variants for part in parts])
    first = parts[0].store
    store = PartialStore(first.arrays, len(variants), first.subtask_names)
    offset = 0
    for part in parts:
        rows = code[offset : offset + len(part.variants)]
        offset += len(part.variants)
        repeated = store.absorb(part.store, rows)
        if repeated is not None:
            tally.failures.append(_describe_repeats(part.variants, *repeated, store))
            tally.n_failed += repeated[0].size
    return Totals(variants=variants, store=store, tally=tally)


def _describe_repeats(
    variants: Variants, row: IntArray, subtask: IntArray, store: PartialStore
) -> pa.Table:
    """Failure rows for (variant, subtask) pairs that two shares both supplied."""
    shown = slice(0, MAX_FAILURES_SHOWN)
    models = variants.strings("model").take(arrow.array(row[shown])).to_pylist()
    names = np.asarray(store.subtask_names, dtype=object)[subtask[shown]]
    return failure_rows(
        "duplicate_score",
        [f"{m} / {n}" for m, n in zip(models, names, strict=True)],
        sources=["(two parts of the input)"] * len(models),
        rows=["-"] * len(models),
        column="subtask",
    )


def _sliced(batches: Iterable[Batch], rows: int | None) -> Iterator[Batch]:
    """Each batch, or its consecutive slices of at most `rows` rows.

    A cancelled run stops here, between two batches (see :mod:`lbnorm._runtime`).
    """
    for batch in batches:
        check_cancelled()
        if rows is None or batch.table.num_rows <= rows:
            yield batch
            continue
        for start in range(0, batch.table.num_rows, rows):
            check_cancelled()
            yield Batch(
                table=batch.table.slice(start, rows),
                source=batch.source,
                first_row=batch.first_row + start,
            )
