"""The streaming engine's exact per-batch sums: a suite-ordered block sums as any batch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import OPENLLM_V2, suites

from lbnorm.engines import partials
from lbnorm.kernel import FixedPoint
from lbnorm.suites import Suite, suite_arrays


def _sums(
    suite: Suite, seed: int, n_variants: int, *, is_block: bool
) -> tuple[list[int], dict[str, bytes]]:
    arrays = suite_arrays(suite)
    n_subtasks = arrays.benchmark_index.shape[0]
    rng = np.random.default_rng(seed)
    n_rows = n_variants * n_subtasks
    subtask = np.tile(np.arange(n_subtasks), n_variants)
    variant = np.repeat(np.arange(n_variants), n_subtasks)
    raw = rng.random(n_rows)  # some below their bound: clipped
    stderr = np.where(rng.random(n_rows) < 0.2, np.nan, rng.random(n_rows) * 0.1)
    n_samples = arrays.n_samples[subtask].copy()
    n_samples[rng.random(n_rows) < 0.1] = 7.0  # a --limit run's sizes, here and there
    n_samples[rng.random(n_rows) < 0.1] = np.nan  # and none given
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(partials, "_is_suite_block", lambda *_: is_block)
        keys, sums = partials.summed_terms(
            FixedPoint(arrays), arrays, variant, subtask, raw,
            stderr=stderr, n_samples=n_samples,
        )  # fmt: skip
    assert not isinstance(keys, slice)
    return keys.tolist(), {name: values.tobytes() for name, values in sums.items()}


@settings(max_examples=25, deadline=None)
@given(suite=suites(max_benchmarks=3, max_subtasks=3), seed=st.integers(0, 2**16))
def test_a_block_in_suite_order_sums_to_the_same_bits(suite: Suite, seed: int) -> None:
    """The block path broadcasts the suite's factors; the row path gathers them."""
    assert _sums(suite, seed, 30, is_block=True) == _sums(
        suite, seed, 30, is_block=False
    )


def test_the_real_suite_block_sums_to_the_same_bits() -> None:
    assert _sums(OPENLLM_V2, 5, 200, is_block=True) == _sums(
        OPENLLM_V2, 5, 200, is_block=False
    )


def test_what_is_a_suite_block() -> None:
    block = partials._is_suite_block
    assert block(np.tile(np.arange(4), 3), 4)
    assert not block(np.array([0, 1, 3, 2]), 4)  # out of suite order
    assert not block(np.arange(3), 4)  # a part of a run
    assert not block(np.repeat(np.arange(4), 2), 4)
    assert not block(np.zeros(0, dtype=np.int64), 4)
