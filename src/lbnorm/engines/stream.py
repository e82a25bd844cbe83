"""The streaming engine: score batches folded into additive partial sums.

For inputs larger than memory (a directory of Parquet files, a partitioned
dataset, 200M rows): each batch is encoded, checked, normalized and summed into
per (variant, benchmark) partial sums (:class:`lbnorm.kernel.Partials`), then
dropped. The working set is one batch, three sums per (variant, benchmark), one
byte per (variant, subtask) to catch duplicates across batches (and count
subtasks), and the key registry: about 1 GB for 2M variants x 100 subtasks. The
dense float store of :mod:`lbnorm.engines.memory` is never built, so there is no
subtask-level output.

The sums are exact (fixed point, see :class:`_PartialStore`), so results do not
depend on row order or batch boundaries, bit for bit, and equal the in-memory
engine's to within its own rounding (about 1e-13 on a 0-100 score).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.encode import KeyEncoder, Variants, merge_variants
from lbnorm.engines.workers import sum_in_workers
from lbnorm.kernel import (
    FixedPoint,
    FloatArray,
    IntArray,
    Partials,
    SuiteArrays,
    finish_benchmarks,
)
from lbnorm.options import RunOptions, UnknownSubtasks
from lbnorm.readers import Inputs
from lbnorm.result import Result, assemble_result
from lbnorm.schemas import Batch
from lbnorm.suites import Suite, suite_arrays
from lbnorm.validate import (
    MAX_FAILURES_SHOWN,
    check_batch,
    describe_failures,
    failure_error,
    failure_rows,
)

__all__ = [
    "Totals",
    "add_totals",
    "compute",
    "finish_totals",
    "sum_scores",
]


def compute(inputs: Inputs, suite: Suite, options: RunOptions) -> Result:
    """Normalize score batches in bounded memory (the engine interface).

    With ``options.workers`` > 1 and Parquet inputs, each of that many disjoint
    shares of the row groups (:meth:`lbnorm.readers.Inputs.partition`) is summed
    in its own forked process and the exact sums are added up
    (:mod:`lbnorm.engines.workers`).

    Args:
        inputs: The score batches (Parquet row groups stream from disk).
        suite: The suite.
        options: The run's options (``unknown``, ``missing``, ``batch_rows``,
            ``workers``).

    Returns:
        The result, without the subtask-level table.

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
    totals = None
    if inputs.streamed and options.workers > 1:
        totals = sum_in_workers(
            lambda part, parts: sum_scores(
                inputs.partition(part, parts),
                suite,
                unknown=options.unknown,
                expected_rows=inputs.num_rows // parts,
                batch_rows=options.batch_rows,
            ),
            options.workers,
            add_totals,
        )  # None: a share failed a check; the serial run below reports where
    if totals is None:
        totals = sum_scores(
            inputs.batches,
            suite,
            unknown=options.unknown,
            expected_rows=inputs.num_rows,
            batch_rows=options.batch_rows,
        )
    if totals.failures:
        raise failure_error(totals.failures, total=totals.n_failed)
    return finish_totals(totals, suite, options=options, files=inputs.files)


def finish_totals(
    totals: Totals,
    suite: Suite,
    *,
    options: RunOptions,
    files: pa.Table | None = None,
) -> Result:
    """Turn exact sums into the benchmark and leaderboard tables.

    Args:
        totals: Sums over every score, without failures.
        suite: The suite.
        options: The run's options.
        files: The catalog of input files.

    Returns:
        The result, without the subtask-level table.
    """
    order = totals.variants.order()
    variants = totals.variants.take(order)
    arrays = totals.store.arrays
    n_ignored, n_scores, n_clipped = totals.n_ignored, totals.n_scores, totals.n_clipped
    partials = totals.store.partials(len(variants), order)
    del totals  # the sums and the seen matrix: the biggest arrays, no longer needed
    benchmark = finish_benchmarks(partials, arrays, missing=options.missing)
    del partials
    return assemble_result(
        variants,
        benchmark,
        suite,
        options=options,
        files=files,
        n_ignored_rows=n_ignored,
        n_scores=n_scores,
        n_clipped=n_clipped,
    )


@dataclass(slots=True, kw_only=True)
class Totals:
    """Exact sums over a set of batches, keyed by variant; they add up.

    Attributes:
        variants: The variant keys, one row per store row (in code order).
        store: The sums and the seen matrix.
        failures: Failure rows found (empty when every check passed).
        n_failed, n_ignored, n_scores, n_clipped: Row counts.
    """

    variants: Variants
    store: _PartialStore
    failures: list[pa.Table]
    n_failed: int
    n_ignored: int
    n_scores: int
    n_clipped: int


def sum_scores(
    batches: Iterable[Batch],
    suite: Suite,
    *,
    unknown: UnknownSubtasks = "error",
    expected_rows: int = 0,
    batch_rows: int | None = None,
) -> Totals:
    """Check every batch and fold it into exact per (variant, benchmark) sums.

    Args:
        batches: Score batches.
        suite: The suite.
        unknown: Policy for subtasks the suite does not define.
        expected_rows: Rows expected in all (sizes the sums up front).
        batch_rows: Split batches into slices of at most this many rows.

    Returns:
        The sums; after the first failure, batches are still checked (every
        failure is listed) but no longer summed.
    """
    pairs = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
    arrays = suite_arrays(suite)
    encoder = KeyEncoder(pairs)
    store = _PartialStore(
        arrays,
        expected_rows // max(len(pairs), 1) + 1,
        [f"{b} / {t}" for b, t in pairs],
    )
    failures: list[pa.Table] = []
    n_failed = n_ignored = n_scores = n_clipped = 0
    for batch in _sliced(batches, batch_rows):
        checked = check_batch(
            batch, encoder, unknown=unknown, seen_before=store.is_seen
        )
        n_ignored += checked.n_ignored
        if checked.n_failed:
            failures.extend(describe_failures(batch, checked.failed))
            n_failed += checked.n_failed
        store.reserve(encoder.n_variants)
        variant, subtask, raw = checked.variant, checked.subtask, checked.scores
        take = checked.is_good
        if not take.all():
            variant, subtask, raw = variant[take], subtask[take], raw[take]
        if failures:  # the run fails: keep checking, stop summing
            store.add(variant, subtask, None)
            continue
        store.add(variant, subtask, raw)
        n_scores += raw.size
        n_clipped += int(np.count_nonzero(raw < arrays.lower_bound[subtask]))
    return Totals(
        variants=encoder.variants(),
        store=store.trimmed(encoder.n_variants),
        failures=failures,
        n_failed=n_failed,
        n_ignored=n_ignored,
        n_scores=n_scores,
        n_clipped=n_clipped,
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
    failures = [frame for part in parts for frame in part.failures]
    n_failed = sum(part.n_failed for part in parts)
    variants, code = merge_variants([part.variants for part in parts])
    store = parts[0].store.empty_like(len(variants))
    offset = 0
    for part in parts:
        rows = code[offset : offset + len(part.variants)]
        offset += len(part.variants)
        repeated = store.absorb(part.store, rows)
        if repeated is not None:
            failures.append(_describe_repeats(part.variants, *repeated, store))
            n_failed += repeated[0].size
    return Totals(
        variants=variants,
        store=store,
        failures=failures,
        n_failed=n_failed,
        n_ignored=sum(part.n_ignored for part in parts),
        n_scores=sum(part.n_scores for part in parts),
        n_clipped=sum(part.n_clipped for part in parts),
    )


def _describe_repeats(
    variants: Variants, row: IntArray, subtask: IntArray, store: _PartialStore
) -> pa.Table:
    """Failure rows for (variant, subtask) pairs that two shares both supplied."""
    shown = slice(0, MAX_FAILURES_SHOWN)
    models = variants.strings("model").to_numpy(zero_copy_only=False)[row[shown]]
    names = np.asarray(store.subtask_names, dtype=object)[subtask[shown]]
    return failure_rows(
        "duplicate_score",
        [f"{m} / {n}" for m, n in zip(models, names, strict=True)],
        source="(two parts of the input)",
        row="-",
        column="subtask",
    )


class _PartialStore:
    """Per (variant, benchmark) exact sums and which (variant, subtask) pairs came.

    Scores are summed as fixed-point integers (:class:`lbnorm.kernel.FixedPoint`),
    so a sum does not depend on the order or the batch boundaries of its terms
    and equals the in-memory engine's bit for bit. Counts and sample weights
    come from the seen matrix at the end.
    """

    def __init__(
        self, arrays: SuiteArrays, capacity: int, subtask_names: list[str]
    ) -> None:
        self.subtask_names = subtask_names  # "benchmark / subtask", for messages
        self._fixed = FixedPoint(arrays)
        self._scale = self._fixed.scale
        self._benchmark_index = arrays.benchmark_index
        self.arrays = arrays
        self._n_benchmarks = arrays.is_pooled.shape[0]
        capacity = max(capacity, 16)
        self._sums = np.zeros((2, capacity * self._n_benchmarks))
        self._seen = np.zeros((capacity, arrays.lower_bound.shape[0]), dtype=bool)

    def reserve(self, n_variants: int) -> None:
        """Make room for `n_variants` (doubling, so growth stays amortized)."""
        capacity = self._seen.shape[0]
        if n_variants <= capacity:
            return
        capacity = max(2 * capacity, n_variants)
        sums = np.zeros((2, capacity * self._n_benchmarks))
        sums[:, : self._sums.shape[1]] = self._sums
        seen = np.zeros((capacity, self._seen.shape[1]), dtype=bool)
        seen[: self._seen.shape[0]] = self._seen
        self._sums, self._seen = sums, seen

    def trimmed(self, n_variants: int) -> _PartialStore:
        """The store cut to its first `n_variants` rows (views: nothing is copied)."""
        self._sums = self._sums[:, : n_variants * self._n_benchmarks]
        self._seen = self._seen[:n_variants]
        return self

    def empty_like(self, n_variants: int) -> _PartialStore:
        """An empty store for the same suite with room for `n_variants`."""
        return _PartialStore(self.arrays, n_variants, self.subtask_names)

    def absorb(
        self, other: _PartialStore, rows: IntArray
    ) -> tuple[IntArray, IntArray] | None:
        """Add `other`'s sums to `rows` of this store.

        Returns:
            None, or (other's row, subtask) of every cell both stores hold (then
            nothing is added).
        """
        seen = other._seen
        overlap = self._seen[rows] & seen
        if overlap.any():
            row, subtask = np.nonzero(overlap)
            return row.astype(np.int64), subtask.astype(np.int64)
        self._seen[rows] |= seen
        shape = (2, -1, self._n_benchmarks)
        self._sums.reshape(shape)[:, rows] += other._sums.reshape(shape)
        return None

    def is_seen(self, variant: IntArray, subtask: IntArray) -> npt.NDArray[np.bool_]:
        """Which (variant, subtask) pairs an earlier batch already supplied."""
        n_subtasks = self._seen.shape[1]
        inside = variant < self._seen.shape[0]  # new variants have no room yet
        if inside.all():
            return self._seen.ravel().take(variant * n_subtasks + subtask)
        is_seen = np.zeros(variant.shape, dtype=bool)
        is_seen[inside] = self._seen.ravel().take(
            variant[inside] * n_subtasks + subtask[inside]
        )
        return is_seen

    def add(self, variant: IntArray, subtask: IntArray, raw: FloatArray | None) -> None:
        """Add distinct, valid scores to their sums (None: only mark them seen)."""
        self._seen.ravel()[variant * self._seen.shape[1] + subtask] = True
        if raw is None or raw.size == 0:
            return
        key = variant * self._n_benchmarks + self._benchmark_index.take(subtask)
        low = int(key.min())
        span = int(key.max()) - low + 1
        if span <= 4 * key.size:  # a batch covers a run of variants: dense slices
            keys: IntArray | slice = slice(low, low + span)
            local, size = key - low, span
        else:
            keys, local = np.unique(key, return_inverse=True)
            size = keys.size
        # row 0: the raw score (x its samples, for pooling); row 1: the
        # normalized score / 100, clipped at 0; both in fixed point
        for row, values in enumerate(self._fixed.terms(raw, subtask)):
            self._sums[row, keys] += np.bincount(local, values, minlength=size)

    def partials(self, n_variants: int, order: IntArray) -> Partials:
        """The sums of the first `n_variants` variants, rows in `order`."""
        shape = (n_variants, self._n_benchmarks)
        raw = self._sums[0, : n_variants * self._n_benchmarks].reshape(shape)[order]
        raw /= self._scale  # the scale broadcasts over benchmarks
        fraction = self._sums[1, : n_variants * self._n_benchmarks].reshape(shape)[
            order
        ]
        fraction *= 100.0 / self._scale
        seen = self._seen[:n_variants]
        arrays = self.arrays
        count = np.zeros(shape)
        weight = np.zeros(shape)
        for index in range(self._n_benchmarks):  # a suite's benchmarks, not models
            columns = np.flatnonzero(arrays.benchmark_index == index)
            present = seen[:, columns]
            count[:, index] = np.count_nonzero(present, axis=1)[order]
            if arrays.is_pooled[index]:  # only pooling reads the sample weights
                weight[:, index] = (present @ arrays.n_samples[columns])[order]
        return Partials(
            count=count,
            raw=raw,
            normalized=fraction,
            weighted_raw=raw,  # the same sums: read for pooled benchmarks
            weight=weight,
        )


def _sliced(batches: Iterable[Batch], rows: int | None) -> Iterator[Batch]:
    """Each batch, or its consecutive slices of at most `rows` rows."""
    for batch in batches:
        if rows is None or batch.table.num_rows <= rows:
            yield batch
            continue
        for start in range(0, batch.table.num_rows, rows):
            yield Batch(
                table=batch.table.slice(start, rows),
                source=batch.source,
                first_row=batch.first_row + start,
            )
