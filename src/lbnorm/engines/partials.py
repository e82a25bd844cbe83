"""Exact per (variant, benchmark) partial sums, and which (variant, subtask) pairs came.

The state a streaming run folds its batches into (:class:`PartialStore`): the
sums are fixed-point integers (:class:`lbnorm.engines.kernel.FixedPoint`), so they do
not depend on row order or batch boundaries, and a store's sums add up with
another's (workers, partitions).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Self

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm._runtime import BatchThread
from lbnorm.engines.kernel import (
    SUMS,
    FixedPoint,
    FloatArray,
    IntArray,
    Partials,
    SuiteArrays,
    normalize_rows,
)
from lbnorm.engines.validate import failure_error

__all__ = ["PartialStore", "SummingStore", "Tally", "summed_terms"]


@dataclass(slots=True, kw_only=True)
class Tally:
    """What a share of the input contributed beside its sums: failures and row counts.

    One type for every way a run is split (batches, forked workers, Dask row
    groups and partitions): tallies add up (:meth:`added`).

    Attributes:
        failures: Failure rows found (empty when every check passed).
        n_failed: Rows failing a check (more than `failures` may show).
        n_ignored: Rows dropped as unknown subtasks.
        n_scores: Subtask scores summed.
        n_clipped: Subtask scores below their bound.
    """

    failures: list[pa.Table] = field(default_factory=list)
    n_failed: int = 0
    n_ignored: int = 0
    n_scores: int = 0
    n_clipped: int = 0

    @classmethod
    def added(cls, tallies: Iterable[Tally]) -> Tally:
        """The tallies of disjoint shares as one (their failures in turn)."""
        total = cls()
        for tally in tallies:
            total.failures.extend(tally.failures)
            total.n_failed += tally.n_failed
            total.n_ignored += tally.n_ignored
            total.n_scores += tally.n_scores
            total.n_clipped += tally.n_clipped
        return total

    def raise_failures(self) -> None:
        """Raise the run's :class:`~lbnorm.core.errors.ValidationError`, if a check failed."""
        if self.failures:
            raise failure_error(self.failures, total=self.n_failed)


def summed_terms(
    fixed: FixedPoint,
    arrays: SuiteArrays,
    variant: IntArray,
    subtask: IntArray,
    raw: FloatArray,
    *,
    stderr: FloatArray | None = None,
    n_samples: FloatArray | None = None,
) -> tuple[IntArray | slice, dict[str, FloatArray]]:
    """A batch's exact terms summed per cell (``variant * n_benchmarks + benchmark``).

    Returns:
        The distinct cells (a slice when the batch covers a run of them) and,
        per sum some term was added to, each cell's total.
    """
    n_benchmarks = arrays.is_pooled.shape[0]
    n_subtasks = arrays.benchmark_index.shape[0]
    if _is_suite_block(subtask, n_subtasks):  # each variant's subtasks in suite
        # order, the usual layout: the suite's per-subtask factors broadcast
        # over a (variants, subtasks) block instead of being gathered per row
        def block(values: FloatArray | None) -> FloatArray | None:
            return None if values is None else values.reshape(-1, n_subtasks)

        blocks = fixed.terms(
            raw.reshape(-1, n_subtasks),
            slice(None),
            stderr=block(stderr),
            n_samples=block(n_samples),
        )
        cells = _block_cells(variant.reshape(-1, n_subtasks), arrays)
        if cells is not None:  # a variant per block row: its benchmarks' runs of
            # columns summed along the row, no key per row (exact: same bits)
            targets, starts = cells
            return targets, {
                name: np.add.reduceat(values, starts, axis=1).ravel()
                for name, values in blocks.items()
            }
        terms = {name: values.ravel() for name, values in blocks.items()}
    else:
        terms = fixed.terms(raw, subtask, stderr=stderr, n_samples=n_samples)
    key = variant * n_benchmarks + arrays.benchmark_index.take(subtask)
    step = np.diff(key)
    if step.size == 0 or step.min() >= 0:  # rows in key order (a variant's
        # subtasks together, in suite order): a sum per run of equal keys
        starts = np.flatnonzero(step) + 1
        starts = np.concatenate([np.zeros(1, dtype=starts.dtype), starts])
        targets = key[starts]  # distinct
        return targets, {
            name: np.add.reduceat(values, starts) for name, values in terms.items()
        }
    low = int(key.min())
    span = int(key.max()) - low + 1
    if span <= 4 * key.size:  # a batch covers a run of variants: dense slices
        keys: IntArray | slice = slice(low, low + span)
        local, size = key - low, span
    else:
        keys, local = np.unique(key, return_inverse=True)
        size = keys.size
    sums: dict[str, FloatArray] = {
        name: np.bincount(local, values, minlength=size).astype(np.float64, copy=False)
        for name, values in terms.items()
    }
    return keys, sums


def _present_per_benchmark(
    seen: npt.NDArray[np.bool_], starts: IntArray
) -> npt.NDArray[np.int32]:
    """Per variant (row of `seen`) and benchmark, its subtasks present.

    `starts`: each benchmark's first subtask column, and the number of columns.
    One pass over the seen matrix when every benchmark has subtasks (a run of
    columns each, as the suite orders them).
    """
    n_benchmarks = starts.size - 1
    if seen.shape[1] and bool((np.diff(starts) > 0).all()):
        return np.add.reduceat(seen.view(np.uint8), starts[:-1], axis=1, dtype=np.int32)
    count = np.zeros((seen.shape[0], n_benchmarks), dtype=np.int32)
    for index in range(n_benchmarks):  # a suite's benchmarks, not models
        count[:, index] = np.count_nonzero(
            seen[:, starts[index] : starts[index + 1]], axis=1
        )
    return count


def _block_cells(
    variants: IntArray, arrays: SuiteArrays
) -> tuple[IntArray | slice, IntArray] | None:
    """A suite block's cells and each benchmark's first column.

    The cells: each row's variant's, benchmark-major within the row (a
    benchmark's subtasks are one run of columns:
    :meth:`~lbnorm.engines.kernel.SuiteArrays.benchmark_starts`). None unless each
    row is one variant.
    """
    if not variants.size or not bool((variants == variants[:, :1]).all()):
        return None
    n_benchmarks = arrays.is_pooled.shape[0]
    starts = arrays.benchmark_starts()[:-1]
    rows = variants[:, 0]
    first = int(rows[0])
    if bool((np.diff(rows) == 1).all()):  # a run of new variants, the usual case
        return slice(first * n_benchmarks, (first + rows.size) * n_benchmarks), starts
    targets = rows[:, None] * n_benchmarks + np.arange(n_benchmarks)
    return targets.ravel(), starts


def _is_suite_block(subtask: IntArray, n_subtasks: int) -> bool:
    """Whether the rows are whole runs of the suite's subtasks, each in suite order."""
    n_rows = subtask.shape[0]
    if (
        not n_rows
        or n_rows % n_subtasks
        or subtask[0] != 0
        or subtask[-1] != n_subtasks - 1
    ):
        return False
    return bool((subtask.reshape(-1, n_subtasks) == np.arange(n_subtasks)).all())


class SummingStore:
    """What a streaming run checks batches against and sums them into.

    The seen matrix, one byte per (variant, subtask), catches duplicates across
    the whole input; each batch's exact sums per (variant, benchmark) cell are
    made on the summing thread (:class:`~lbnorm._runtime.BatchThread`) and go
    where a subclass puts them (:meth:`add_sums`): into arrays
    (:class:`PartialStore`) or spill files
    (:class:`~lbnorm.engines.spill.SpillStore`).
    """

    def __init__(
        self,
        arrays: SuiteArrays,
        capacity: int,
        subtask_names: list[str],
        *,
        seen: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """A store for `capacity` variants (it grows); `seen` given: those rows."""
        self.arrays = arrays
        self.subtask_names = subtask_names  # "benchmark / subtask", for messages
        self.seen = (
            np.zeros((max(capacity, 16), arrays.lower_bound.shape[0]), dtype=bool)
            if seen is None
            else seen
        )
        self._fixed = FixedPoint(arrays)
        self._behind = BatchThread()
        #: Each (variant, subtask) normalized score, NaN where absent: kept only
        #: by a store of sums for a board that reads them
        #: (:attr:`SuiteArrays.keeps_scores`, see :class:`PartialStore`).
        self._values: FloatArray | None = None

    def reserve(self, n_variants: int) -> None:
        """Make room for `n_variants` (doubling, so growth stays amortized)."""
        capacity = self.seen.shape[0]
        if n_variants > capacity:
            self._grow(max(2 * capacity, n_variants))

    def _grow(self, capacity: int) -> None:
        """Room for `capacity` variants in the seen matrix (its rows copied)."""
        larger = np.zeros((capacity, self.seen.shape[1]), dtype=bool)
        larger[: self.seen.shape[0]] = self.seen
        self.seen = larger

    def trimmed(self, n_variants: int) -> Self:
        """The store cut to its first `n_variants` rows (views: nothing is copied).

        Every batch handed over is summed first, and the summing thread stopped.
        """
        self._behind.close()
        self.seen = self.seen[:n_variants]
        return self

    def abandon(self) -> None:
        """Stop summing (a failed run): see :meth:`~lbnorm._runtime.BatchThread.abandon`."""
        self._behind.abandon()

    def is_seen(self, variant: IntArray, subtask: IntArray) -> npt.NDArray[np.bool_]:
        """Which (variant, subtask) pairs an earlier batch already supplied (new variants: none)."""
        seen, n_subtasks = self.seen.ravel(), self.seen.shape[1]
        inside = variant < self.seen.shape[0]  # new variants have no room yet
        if inside.all():
            taken: npt.NDArray[np.bool_] = seen.take(variant * n_subtasks + subtask)
            return taken
        is_seen = np.zeros(variant.shape, dtype=bool)
        is_seen[inside] = seen.take(variant[inside] * n_subtasks + subtask[inside])
        return is_seen

    def add(
        self,
        variant: IntArray,
        subtask: IntArray,
        raw: FloatArray | None,
        *,
        stderr: FloatArray | None = None,
        n_samples: FloatArray | None = None,
    ) -> None:
        """Add distinct, valid scores to their sums (None: only mark them seen).

        They are marked seen at once (the next batch's duplicate check needs
        them) and summed on the summing thread. A board that reads each score
        (:attr:`SuiteArrays.keeps_scores`) keeps it normalized, too.
        """
        self.seen.ravel()[variant * self.seen.shape[1] + subtask] = True
        if raw is None or raw.size == 0:
            return
        if self._values is not None:  # (a board's store: a leaderboard's size)
            normalized = normalize_rows(raw, subtask, self.arrays)[0]
            self._values[variant, subtask] = normalized
        fixed, arrays = self._fixed, self.arrays
        self._behind.run(
            lambda: self.add_sums(
                *summed_terms(
                    fixed,
                    arrays,
                    variant,
                    subtask,
                    raw,
                    stderr=stderr,
                    n_samples=n_samples,
                )
            ),
            raw.size,
        )

    def add_sums(self, keys: IntArray | slice, sums: dict[str, FloatArray]) -> None:
        """Add sums to distinct cells (``variant * n_benchmarks + benchmark``)."""
        raise NotImplementedError


class PartialStore(SummingStore):
    """Per (variant, benchmark) exact sums and which (variant, subtask) pairs came.

    Scores are summed as fixed-point integers (:class:`lbnorm.engines.kernel.FixedPoint`),
    so a sum does not depend on the order or the batch boundaries of its terms
    and equals a dense matrix's (:func:`lbnorm.engines.kernel.dense_partials`) bit
    for bit. Counts and sample weights
    come from the seen matrix at the end.
    """

    def __init__(
        self,
        arrays: SuiteArrays,
        capacity: int,
        subtask_names: list[str],
        *,
        seen: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """A store for `capacity` variants (it grows); `seen` given: those rows, fixed.

        A spilled run sums a partition of the variants at a time over the rows
        of its seen matrix (:mod:`lbnorm.engines.spill`), marked as the rows were
        checked.
        """
        super().__init__(arrays, capacity, subtask_names, seen=seen)
        self._n_benchmarks = arrays.is_pooled.shape[0]
        capacity = self.seen.shape[0]
        # one array per sum (not one matrix), so each can be freed on its own
        self._sums = [np.zeros(capacity * self._n_benchmarks) for _ in SUMS]
        self._added: set[str] = set()  # sums some term was added to
        if arrays.keeps_scores:
            self._values = np.full(self.seen.shape, np.nan)

    def _grow(self, capacity: int) -> None:
        """Room for `capacity` variants in the sums too."""
        self._behind.wait()  # the sums move: the batch being summed lands first
        super()._grow(capacity)
        sums = [np.zeros(capacity * self._n_benchmarks) for _ in SUMS]
        for new, old in zip(sums, self._sums, strict=True):
            new[: old.size] = old
        self._sums = sums
        if self._values is not None:
            values = np.full(self.seen.shape, np.nan)
            values[: self._values.shape[0]] = self._values
            self._values = values

    def trimmed(self, n_variants: int) -> Self:
        """The store cut to its first `n_variants` rows (views: nothing is copied)."""
        super().trimmed(n_variants)
        self._sums = [sums[: n_variants * self._n_benchmarks] for sums in self._sums]
        if self._values is not None:
            self._values = self._values[:n_variants]
        return self

    def handed_over(
        self, n_variants: int
    ) -> tuple[npt.NDArray[np.bool_], dict[str, FloatArray]]:
        """The seen matrix and the sums added to, of `n_variants`; the store is spent.

        For a run turning to spilling (:meth:`lbnorm.engines.spill.SpillStore.of_partials`).
        """
        self._behind.close()
        size = n_variants * self._n_benchmarks
        sums = {
            name: self._sums[row][:size]
            for row, name in enumerate(SUMS)
            if name in self._added
        }
        seen = self.seen
        self.release()  # (the caller holds the only references now)
        return seen, sums

    def release(self) -> None:
        """Free the sums and the seen matrix (once the partials are taken)."""
        self._behind.close()
        self._sums = [np.zeros(0) for _ in SUMS]  # not views: they would keep
        self.seen = np.zeros((0, self.seen.shape[1]), dtype=bool)  # the buffers
        if self._values is not None:
            self._values = np.zeros((0, self.seen.shape[1]))

    def taken(self, rows: IntArray) -> PartialStore:
        """A store of these `rows` only, in turn (a share of the variants, copied)."""
        self._behind.wait()
        store = PartialStore(self.arrays, rows.size, self.subtask_names)
        shape = (-1, self._n_benchmarks)
        store._sums = [sums.reshape(shape)[rows].ravel() for sums in self._sums]
        store.seen = self.seen[rows]
        store._values = None if self._values is None else self._values[rows]
        store._added = set(self._added)
        return store

    def absorb(
        self, other: PartialStore, rows: IntArray
    ) -> tuple[IntArray, IntArray] | None:
        """Add `other`'s sums to `rows` of this store.

        Returns:
            None, or (other's row, subtask) of every cell both stores hold (then
            nothing is added).
        """
        self._behind.wait()
        other._behind.wait()
        seen = other.seen
        overlap = self.seen[rows] & seen
        if overlap.any():
            row, subtask = np.nonzero(overlap)
            return row.astype(np.int64), subtask.astype(np.int64)
        self.seen[rows] |= seen
        if self._values is not None and other._values is not None:
            taken = np.where(seen, other._values, self._values[rows])
            self._values[rows] = taken
        self._added |= other._added
        shape = (-1, self._n_benchmarks)
        for mine, theirs in zip(self._sums, other._sums, strict=True):
            mine.reshape(shape)[rows] += theirs.reshape(shape)
        return None

    def add_sums(self, keys: IntArray | slice, sums: dict[str, FloatArray]) -> None:
        """Add sums to distinct cells (``variant * n_benchmarks + benchmark``)."""
        self._added.update(sums)
        for row, name in enumerate(SUMS):  # exact sums: any order, same bits
            if name in sums:  # an absent sum only adds zeros
                self._sums[row][keys] += sums[name]

    def partials(self, n_variants: int, order: IntArray | None = None) -> Partials:
        """The sums of the first `n_variants` variants, rows in `order` (None: code order).

        The store is spent (see :meth:`release`): in code order its sums are
        handed over as they are, scaled to plain units in place; in another
        order each is freed once taken, so the sums and their ordered copies
        are never all held at once.
        """
        self._behind.close()
        shape = (n_variants, self._n_benchmarks)
        sums = {}
        for row, name in enumerate(SUMS):
            if name not in self._added:  # never added to: zeros (pages untouched)
                sums[name] = np.zeros(shape)
                continue
            block = self._sums[row][: n_variants * self._n_benchmarks].reshape(shape)
            if order is not None:
                block = block.take(order, axis=0)
                self._sums[row] = np.zeros(0)  # this sum's buffer, freed
            if name in self._fixed.scale:  # to plain units, in place
                block /= self._fixed.scale[name]
            sums[name] = block
        seen = self.seen[:n_variants]
        starts = self.arrays.benchmark_starts()
        # a pooled benchmark's weights: the suite's sizes, plus the input's
        for index in np.flatnonzero(self.arrays.is_pooled):
            columns = slice(int(starts[index]), int(starts[index + 1]))
            added = seen[:, columns] @ self.arrays.n_samples[columns]
            sums["weight"][:, index] += added if order is None else added[order]
        # each benchmark's subtasks present, counted in code order, then ordered
        count = _present_per_benchmark(seen, starts)
        values = None if self._values is None else self._values[:n_variants]
        if order is not None:
            count = count.take(order, axis=0)
            values = None if values is None else values.take(order, axis=0)
        return Partials(count=count.astype(np.float64), sums=sums, values=values)
