"""The streaming engine: score batches folded into additive partial sums.

For inputs larger than memory (a directory of Parquet files, a partitioned
dataset, 200M rows): each batch is encoded, checked, normalized and summed into
per (variant, benchmark) partial sums (:class:`lbnorm.kernel.Partials`), then
dropped. The working set is one batch, five sums per (variant, benchmark), one
bit per (variant, subtask) to catch duplicates across batches, and the key
registry; the dense (variant x subtask) store of :mod:`lbnorm.engine` is never
built, so there is no subtask-level output.

Sums are added in the order batches arrive, so results equal the in-memory
engine's to within floating-point rounding (about 1e-13 on a 0-100 score), and
are bit-identical across runs on the same input.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm.encode import KeyEncoder
from lbnorm.engine import Batch, check_batch
from lbnorm.errors import ValidationError
from lbnorm.kernel import (
    FloatArray,
    IntArray,
    MissingPolicy,
    Partials,
    SuiteArrays,
    finish_benchmarks,
)
from lbnorm.pipeline import Result, assemble_result, suite_arrays
from lbnorm.suites import Suite
from lbnorm.validate import UnknownSubtasks, describe_failures

__all__ = ["compute_result_streaming"]

_FIELDS = ("count", "raw", "normalized", "weighted_raw", "weight")
#: Fixed-point sums are split at this bit: each part's float sum over a batch
#: stays below 2**53, so ``np.bincount`` adds it exactly.
_SPLIT = 30


def compute_result_streaming(
    batches: Iterable[Batch],
    suite: Suite,
    *,
    missing: MissingPolicy = "exclude",
    unknown: UnknownSubtasks = "error",
    files: pd.DataFrame | None = None,
    expected_rows: int = 0,
    batch_rows: int | None = None,
) -> Result:
    """Normalize score batches in bounded memory: benchmark and leaderboard tables.

    Args:
        batches: Score batches (Parquet row groups stream from disk).
        suite: The suite.
        missing: Policy for absent subtasks/benchmarks.
        unknown: Policy for subtasks the suite does not define.
        files: The catalog of input files, recorded in the result.
        expected_rows: Rows expected in all (sizes the sums up front).
        batch_rows: Split batches into slices of at most this many rows.

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
        >>> result = compute_result_streaming([Batch(table=table, source="t")],
        ...     load_suite("openllm-v2"), missing="partial", batch_rows=1)
        >>> result.benchmarks["normalized_score"].round(9).tolist()
        [35.0]
    """
    bounds = suite.subtask_table()
    arrays = suite_arrays(suite)
    n_subtasks = len(bounds)
    encoder = KeyEncoder(bounds)
    store = _PartialStore(arrays, expected_rows // max(n_subtasks, 1) + 1)
    failures: list[pd.DataFrame] = []
    n_failed = n_ignored = n_scores = n_clipped = 0
    for batch in _sliced(batches, batch_rows):
        checked = check_batch(
            batch, encoder, unknown=unknown, seen_before=store.is_seen
        )
        n_ignored += checked.n_ignored
        if checked.n_failed:
            failures.extend(
                describe_failures(batch, checked.failed, encoder, checked.subtask)
            )
            n_failed += checked.n_failed
        store.reserve(encoder.n_variants)
        take = checked.is_good
        variant, subtask, scores = checked.variant, checked.subtask, checked.scores
        store.mark_seen(variant[take], subtask[take])
        if failures:  # the run fails: keep checking, stop summing
            continue
        raw, code = scores[take], subtask[take]
        store.add(variant[take], code, raw)
        n_scores += raw.size
        n_clipped += int((raw < arrays.lower_bound[code]).sum())
    if failures:
        raise ValidationError.from_failures(
            pd.concat(failures, ignore_index=True), total=n_failed
        )
    order = encoder.variant_order()
    benchmark = finish_benchmarks(
        store.partials(encoder.n_variants, order), arrays, missing=missing
    )
    return assemble_result(
        encoder.variant_keys().iloc[order].reset_index(drop=True),
        benchmark,
        suite,
        missing=missing,
        files=files,
        n_ignored_rows=n_ignored,
        n_scores=n_scores,
        n_clipped=n_clipped,
    )


class _PartialStore:
    """Per (variant, benchmark) exact sums and a (variant, subtask) seen-bitset.

    Scores are summed as fixed-point integers (``round(x * 2**shift)``, exact
    in int64): a sum then does not depend on the order or the batch boundaries
    of its terms, so identical submissions tie however the rows were split.
    Each term is a fraction in [0, 1]: the raw score, the normalized score / 100
    and the raw score x its share of the benchmark's samples.
    """

    def __init__(self, arrays: SuiteArrays, capacity: int) -> None:
        n_benchmarks = arrays.is_pooled.shape[0]
        per_benchmark = np.bincount(arrays.benchmark_index, minlength=n_benchmarks)
        total = np.bincount(
            arrays.benchmark_index, weights=arrays.n_samples, minlength=n_benchmarks
        )
        # room for every subtask of a benchmark at 1.0 (and duplicates never add)
        self._shift = 62 - int(np.ceil(np.log2(per_benchmark.max(initial=1) + 1)))
        self._total_samples = np.where(total > 0, total, 1.0)
        self._share = arrays.n_samples / self._total_samples[arrays.benchmark_index]
        self._arrays = arrays
        self._n_benchmarks = n_benchmarks
        self._n_bytes = (arrays.lower_bound.shape[0] + 7) // 8
        capacity = max(capacity, 16)
        self._sums = np.zeros((len(_FIELDS), capacity * n_benchmarks), dtype=np.int64)
        self._seen = np.zeros((capacity, self._n_bytes), dtype=np.uint8)

    def reserve(self, n_variants: int) -> None:
        """Make room for `n_variants` (doubling, so growth stays amortized)."""
        capacity = self._seen.shape[0]
        if n_variants <= capacity:
            return
        capacity = max(2 * capacity, n_variants)
        sums = np.zeros((len(_FIELDS), capacity * self._n_benchmarks), dtype=np.int64)
        sums[:, : self._sums.shape[1]] = self._sums
        seen = np.zeros((capacity, self._n_bytes), dtype=np.uint8)
        seen[: self._seen.shape[0]] = self._seen
        self._sums, self._seen = sums, seen

    def is_seen(self, variant: IntArray, subtask: IntArray) -> npt.NDArray[np.bool_]:
        """Which (variant, subtask) pairs an earlier batch already supplied."""
        inside = variant < self._seen.shape[0]  # new variants have no room yet
        is_seen = np.zeros(variant.shape, dtype=bool)
        bits = self._seen[variant[inside], subtask[inside] >> 3]
        is_seen[inside] = (bits >> (subtask[inside] & 7).astype(np.uint8)) & 1
        return is_seen

    def mark_seen(self, variant: IntArray, subtask: IntArray) -> None:
        """Record (distinct) (variant, subtask) pairs as supplied."""
        keys, (bits,) = _group_sums(
            variant * self._n_bytes + (subtask >> 3),
            (np.left_shift(1, subtask & 7).astype(np.float64),),
        )
        # the pairs are distinct, so their bits within one byte are too: sum == or
        self._seen.reshape(-1)[keys] |= bits.astype(np.uint8)

    def add(self, variant: IntArray, subtask: IntArray, raw: FloatArray) -> None:
        """Add (distinct, valid) scores to their (variant, benchmark) sums."""
        if raw.size == 0:
            return
        arrays = self._arrays
        lower_bound = arrays.lower_bound[subtask]
        fraction = np.maximum((raw - lower_bound) / (1.0 - lower_bound), 0.0)
        fixed = [
            self._fixed_parts(values)
            for values in (raw, fraction, raw * self._share[subtask])
        ]
        counts = (np.ones(raw.size), arrays.n_samples[subtask])  # integers: exact
        key = variant * self._n_benchmarks + arrays.benchmark_index[subtask]
        low = int(key.min())
        span = int(key.max()) - low + 1
        if span <= 4 * key.size:  # a batch covers a run of variants: dense slices
            keys: IntArray | slice = slice(low, low + span)
            local, size = key - low, span
        else:
            keys, local = np.unique(key, return_inverse=True)
            size = keys.size

        def total(weights: FloatArray) -> IntArray:
            return np.rint(np.bincount(local, weights, minlength=size)).astype(np.int64)

        self._sums[0, keys] += total(counts[0])
        for row, (high, low_bits) in enumerate(fixed, start=1):
            self._sums[row, keys] += (total(high) << _SPLIT) + total(low_bits)
        self._sums[4, keys] += total(counts[1])

    def _fixed_parts(self, values: FloatArray) -> tuple[FloatArray, FloatArray]:
        """A fraction as fixed point, split in two parts whose float sums are exact."""
        fixed = np.rint(values * float(1 << self._shift)).astype(np.int64)
        return (
            (fixed >> _SPLIT).astype(np.float64),
            (fixed & ((1 << _SPLIT) - 1)).astype(np.float64),
        )

    def partials(self, n_variants: int, order: IntArray) -> Partials:
        """The sums of the first `n_variants` variants as floats, rows in `order`."""
        count, raw, fraction, weighted, weight = self._sums[
            :, : n_variants * self._n_benchmarks
        ].reshape(len(_FIELDS), n_variants, self._n_benchmarks)[:, order]
        scale = 1.0 / float(1 << self._shift)
        return Partials(
            count=count.astype(np.float64),
            raw=raw * scale,
            normalized=fraction * (scale * 100.0),
            weighted_raw=weighted * scale * self._total_samples,
            weight=weight.astype(np.float64),
        )


def _group_sums(
    key: IntArray, values: tuple[FloatArray, ...]
) -> tuple[IntArray, list[FloatArray]]:
    """Distinct keys and, per value array, its sum over each key's rows."""
    keys, inverse = np.unique(key, return_inverse=True)
    return keys, [
        np.asarray(np.bincount(inverse, weights, minlength=keys.size), np.float64)
        for weights in values
    ]


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
