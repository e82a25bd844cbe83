"""The streaming engine's exact per-batch sums: a suite-ordered block sums as any batch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import OPENLLM_V2, suites

from lbnorm.engines import partials
from lbnorm.engines.kernel import FixedPoint
from lbnorm.suites import Suite, suite_arrays


def _sums(
    suite: Suite, seed: int, n_variants: int, *, is_block: bool, variants: str = "run"
) -> tuple[list[int], dict[str, bytes]]:
    """The cells and sums of a batch of `n_variants` whole variants.

    `variants`: "run" (ids 0, 1, ... in order), "shuffled" (each block row one
    variant, in random order), "straddling" (block rows that mix two variants).
    """
    arrays = suite_arrays(suite)
    n_subtasks = arrays.benchmark_index.shape[0]
    rng = np.random.default_rng(seed)
    n_rows = n_variants * n_subtasks
    subtask = np.tile(np.arange(n_subtasks), n_variants)
    variant = np.repeat(np.arange(n_variants), n_subtasks)
    if variants == "shuffled":
        variant = np.repeat(rng.permutation(n_variants) + 5, n_subtasks)
    elif variants == "straddling" and n_subtasks > 1:  # distinct (variant, subtask)
        variant = np.where(
            subtask < n_subtasks // 2, variant, (variant + 1) % n_variants
        )
    raw = rng.random(n_rows)  # some below their bound: clipped
    stderr = np.where(rng.random(n_rows) < 0.2, np.nan, rng.random(n_rows) * 0.1)
    n_samples = arrays.n_samples[subtask].copy()
    # a --limit run's sizes, here and there: fewer than the suite's (sums are
    # exact for sizes up to SIZE_HEADROOM times the suite's, and only then
    # the same bits in any order: 7 samples where a suite says 1 are not)
    is_limited = rng.random(n_rows) < 0.1
    n_samples[is_limited] = np.ceil(n_samples[is_limited] / 3.0)
    n_samples[rng.random(n_rows) < 0.1] = np.nan  # and none given
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partials, "_is_suite_block", lambda *_: is_block)
        keys, sums = partials.summed_terms(
            FixedPoint(arrays), arrays, variant, subtask, raw,
            stderr=stderr, n_samples=n_samples,
        )  # fmt: skip
    if isinstance(keys, slice):  # a run of cells: as the indices it stands for
        keys = np.arange(keys.start, keys.stop)
    order = np.argsort(keys, kind="stable")  # the row path gives them sorted
    return keys[order].tolist(), {
        name: values[order].tobytes() for name, values in sums.items()
    }


@settings(max_examples=25, deadline=None)
@given(suite=suites(max_benchmarks=3, max_subtasks=3), seed=st.integers(0, 2**16))
@pytest.mark.parametrize("variants", ["run", "shuffled", "straddling"])
def test_a_block_in_suite_order_sums_to_the_same_bits(
    suite: Suite, seed: int, variants: str
) -> None:
    """The block path broadcasts the suite's factors and sums each variant's
    row of the block along it; the row path gathers the factors and sums runs
    of cell keys. Variants in order, shuffled, or straddling block rows (the
    block's factors, then the row path's sums)."""
    assert _sums(suite, seed, 30, is_block=True, variants=variants) == _sums(
        suite, seed, 30, is_block=False, variants=variants
    )


@pytest.mark.parametrize("variants", ["run", "shuffled", "straddling"])
def test_the_real_suite_block_sums_to_the_same_bits(variants: str) -> None:
    assert _sums(OPENLLM_V2, 5, 200, is_block=True, variants=variants) == _sums(
        OPENLLM_V2, 5, 200, is_block=False, variants=variants
    )


def test_block_cells_only_for_a_variant_per_row() -> None:
    arrays = suite_arrays(OPENLLM_V2)
    n_subtasks, n_benchmarks = (
        arrays.benchmark_index.shape[0],
        arrays.is_pooled.shape[0],
    )
    run = np.repeat(np.arange(3, 7), n_subtasks).reshape(-1, n_subtasks)
    cells = partials._block_cells(run, arrays)
    assert cells is not None
    assert cells[0] == slice(3 * n_benchmarks, 7 * n_benchmarks)
    assert (
        cells[1].tolist()
        == np.flatnonzero(np.diff(arrays.benchmark_index, prepend=-1)).tolist()
    )
    shuffled = run[[2, 0, 3, 1]]
    cells = partials._block_cells(shuffled, arrays)
    assert cells is not None
    assert not isinstance(cells[0], slice)
    assert cells[0].reshape(-1, n_benchmarks)[:, 0].tolist() == [
        v * n_benchmarks for v in (5, 3, 6, 4)
    ]
    straddling = run.copy()
    straddling[0, -1] = 9
    assert partials._block_cells(straddling, arrays) is None


def test_what_is_a_suite_block() -> None:
    block = partials._is_suite_block
    assert block(np.tile(np.arange(4), 3), 4)
    assert not block(np.array([0, 1, 3, 2]), 4)  # out of suite order
    assert not block(np.arange(3), 4)  # a part of a run
    assert not block(np.repeat(np.arange(4), 2), 4)
    assert not block(np.zeros(0, dtype=np.int64), 4)


@pytest.mark.parametrize(
    "starts", [[0, 1, 4, 10, 40], [0, 40], [0, 3, 3, 40], [0, 0, 40], [0, 40, 40]]
)
@pytest.mark.parametrize("n_variants", [0, 1, 257])
def test_subtasks_present_per_benchmark(starts: list[int], n_variants: int) -> None:
    """Counted in one pass (each benchmark a run of columns) or per benchmark
    (one without subtasks: 0), as np.count_nonzero counts each run."""
    rng = np.random.default_rng(n_variants)
    seen = (rng.random((n_variants + 3, 40)) < 0.7)[:n_variants]  # rows of a bigger one
    bounds = np.array(starts)
    expected = np.stack(
        [
            np.count_nonzero(seen[:, bounds[i] : bounds[i + 1]], axis=1)
            for i in range(bounds.size - 1)
        ],
        axis=1,
    ).reshape(n_variants, bounds.size - 1)
    counted = partials._present_per_benchmark(seen, bounds)
    assert counted.shape == expected.shape
    assert counted.tolist() == expected.tolist()


def test_tallies_add_up_and_raise_their_failures() -> None:
    """Shares' tallies add up (failures in turn); a tally with failures raises them all."""
    from lbnorm.core.errors import ValidationError
    from lbnorm.engines.validate import failure_rows

    def failure(model: str) -> partials.Tally:
        rows = failure_rows(
            "duplicate_score", [model], sources=["(t)"], rows=["-"], column="subtask"
        )
        return partials.Tally(failures=[rows], n_failed=1)

    counts = partials.Tally(n_ignored=1, n_scores=5, n_clipped=2)
    total = partials.Tally.added(
        [counts, failure("m1"), partials.Tally(), failure("m2"), counts]
    )
    assert (total.n_failed, total.n_ignored, total.n_scores, total.n_clipped) == (
        2,
        2,
        10,
        4,
    )
    assert counts.failures == []  # (the shares are left as they were)
    partials.Tally.added([counts]).raise_failures()  # nothing failed: no error
    with pytest.raises(ValidationError, match=r"(?s)2 score\(s\).*m1.*m2.*Hint: "):
        total.raise_failures()
