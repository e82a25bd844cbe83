"""What compiled per-row kernels would give: lbnorm's summing step against one fused loop.

``pip install numba && python benchmarks_perf/fused.py [--variants 25000] [--repeats 20]``

lbnorm's streaming pass is numpy passes over each batch: the summing thread's
exact fixed-point terms (:meth:`lbnorm.engines.kernel.FixedPoint.terms`) and their sums
per (variant, benchmark) cell (:func:`lbnorm.engines.partials.summed_terms`) make
some fifteen passes over a batch's rows. This script times that step on a batch
of the usual layout (each variant's 40 subtasks of the v2 suite in suite order,
every standard error given, no score below its bound: the common path, with no
censored-normal variance) against a numba kernel that computes the same four
terms with the same arithmetic and sums them in one loop over the rows, checks
that both give the same bits, and times what numba costs a process: its import
and its first call (a compile, or a load from its cache). Benchmark-only: numba
is not one of lbnorm's dependencies.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from lbnorm.engines.kernel import FixedPoint
from lbnorm.engines.partials import summed_terms
from lbnorm.suites import load_suite, suite_arrays


def _median_ms(work: Callable[[], object], repeats: int) -> float:
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=int, default=25_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--startup", type=int, default=0,
        help="also: N fresh processes timing numba's import and the cached kernel's load",
    )  # fmt: skip
    args = parser.parse_args()

    arrays = suite_arrays(load_suite("openllm-v2"))
    fixed = FixedPoint(arrays)
    n_subtasks = arrays.benchmark_index.shape[0]
    rng = np.random.default_rng(0)
    lower = arrays.lower_bound
    raw = lower + rng.random((args.variants, n_subtasks)) * (
        1.0 - lower
    )  # none clipped
    stderr = rng.random((args.variants, n_subtasks)) * 0.05
    n_rows = raw.size
    variant = np.repeat(np.arange(args.variants), n_subtasks)
    subtask = np.tile(np.arange(n_subtasks), args.variants)
    n_samples = arrays.n_samples[subtask]

    def lbnorm_step() -> Any:
        return summed_terms(
            fixed, arrays, variant, subtask, raw.ravel(),
            stderr=stderr.ravel(), n_samples=n_samples,
        )  # fmt: skip

    started = time.perf_counter()
    import numba  # noqa: F401

    imported = time.perf_counter()
    from fused_kernel import fused

    factor = fixed._factor  # the per-subtask factors lbnorm multiplies by
    factors = np.stack([factor[name] for name in ("raw", "normalized", "variance", "raw_variance")])  # fmt: skip
    starts = np.searchsorted(
        arrays.benchmark_index, np.arange(arrays.is_pooled.size + 1)
    )
    out = np.zeros((4, args.variants, arrays.is_pooled.size))

    def fused_step() -> None:
        fused(raw, stderr, lower, factors, starts, out)

    fused_step()
    first_call = time.perf_counter()

    _cells, sums = lbnorm_step()
    same = all(
        (np.asarray(sums[name]).reshape(args.variants, -1) == out[at]).all()
        for at, name in enumerate(("raw", "normalized", "variance", "raw_variance"))
    )
    lbnorm_ms = _median_ms(lbnorm_step, args.repeats)
    fused_ms = _median_ms(fused_step, args.repeats)
    per_million = 1e6 / n_rows
    print(
        f"{n_rows:,} rows ({args.variants:,} variants x {n_subtasks} subtasks), median of {args.repeats}"
    )
    print(f"lbnorm summed_terms (numpy): {lbnorm_ms * per_million:6.1f} ms per 1M rows")
    print(
        f"fused numba loop:            {fused_ms * per_million:6.1f} ms per 1M rows ({lbnorm_ms / fused_ms:.1f}x)"
    )
    print(f"same bits: {same}")
    print(f"numba's cost per process: import {1000 * (imported - started):.0f} ms, first call "
          f"{1000 * (first_call - imported):.0f} ms (a compile, or its cache loaded)")  # fmt: skip

    if args.startup:
        startup(args.startup)


_STARTUP = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
started = time.perf_counter()
import numba
imported = time.perf_counter()
from fused_kernel import fused
z = np.zeros((1, 1))
fused(z, z, np.zeros(1), np.zeros((4, 1)), np.array([0, 1]), np.zeros((4, 1, 1)))
print(imported - started, time.perf_counter() - imported)
"""


def startup(processes: int) -> None:
    """Medians over fresh processes: ``import numba``, then the kernel loaded from its cache."""
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    runs = [
        [float(x) for x in subprocess.run(
            [sys.executable, "-c", _STARTUP, here], check=True, capture_output=True,
            text=True,
        ).stdout.split()]
        for _ in range(processes + 1)  # the first one fills the cache
    ][1:]  # fmt: skip
    print(
        f"fresh processes ({processes}): import numba {1000 * statistics.median(r[0] for r in runs):.0f} ms, "
        f"the cached kernel's load and first call {1000 * statistics.median(r[1] for r in runs):.0f} ms"
    )  # fmt: skip


if __name__ == "__main__":
    main()
