"""An oracle for the stream engine: the scores pivoted to a dense (variant x subtask) matrix.

The stream engine encodes keys with its own registry, checks each batch and
folds it into sums per (variant, benchmark) as it reads. This oracle does none
of that: pandas groups the rows by their keys (sorted as Python sorts strings),
numpy scatters them into dense ``(variant, subtask)`` matrices (NaN: absent),
and the kernel's dense path (:func:`lbnorm.engines.kernel.dense_partials`, one
sum over each benchmark's columns) reduces them; the board's rules and the
tables come from :func:`lbnorm.engines.result.assemble_result`, which every
engine shares. What the retired in-memory engine computed, without its store.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lbnorm.core.options import MissingPolicy, RunOptions
from lbnorm.engines.encode import Variants
from lbnorm.engines.kernel import (
    BenchmarkArrays,
    FloatArray,
    SuiteArrays,
    dense_partials,
    finish_benchmarks,
    normalize_rows,
)
from lbnorm.engines.result import Result, assemble_result
from lbnorm.suites import Suite, suite_arrays

__all__ = ["aggregate_benchmarks", "dense_result"]

_KEYS = ["model", "precision", "revision", "chat_template"]


def dense_result(
    table: pa.Table, suite: Suite, options: RunOptions | None = None
) -> Result:
    """The benchmark and leaderboard tables of valid scores (no subtask table).

    Rows of subtasks the suite does not define are dropped (and counted) under
    ``unknown="ignore"``; names match the suite's in any case, as a run's do.
    """
    options = options or RunOptions()
    frame = table.to_pandas()
    for name, default in (
        ("precision", ""),
        ("revision", ""),
        ("chat_template", False),
    ):
        if name not in frame.columns:
            frame[name] = default
        frame[name] = frame[name].fillna(default)
    frame = frame.astype({"model": str, "precision": str, "revision": str})
    frame["chat_template"] = frame["chat_template"].astype(bool)
    pairs = [
        (b.name.casefold(), s.name.casefold())
        for b in suite.benchmarks
        for s in b.subtasks
    ]
    index = {pair: at for at, pair in enumerate(pairs)}
    found = [
        index.get((str(b).casefold(), str(s).casefold()), -1)
        for b, s in zip(frame["benchmark"], frame["subtask"], strict=True)
    ]  # a step per row: an oracle, on small inputs
    frame["subtask_index"] = found
    n_ignored = int((frame["subtask_index"] < 0).sum())
    assert n_ignored == 0 or options.unknown == "ignore", "unknown subtasks"
    # a variant whose rows are all ignored is still a variant (a row of the board)
    keys = frame[_KEYS].drop_duplicates().sort_values(_KEYS, ignore_index=True)
    keys["variant"] = np.arange(len(keys))
    frame = frame[frame["subtask_index"] >= 0]
    frame = frame.merge(keys, on=_KEYS, how="left", validate="many_to_one")
    shape = (len(keys), len(pairs))
    row = frame["variant"].to_numpy(dtype=np.int64)
    column = frame["subtask_index"].to_numpy(dtype=np.int64)
    assert not frame.duplicated(["variant", "subtask_index"]).any(), "duplicates"

    def matrix(name: str, fill: float) -> np.ndarray | None:
        if name not in frame.columns:
            return None
        dense = np.full(shape, fill)
        dense[row, column] = frame[name].astype(float).fillna(fill).to_numpy()
        return dense

    raw = matrix("raw_score", np.nan)
    assert raw is not None
    arrays = suite_arrays(suite)
    benchmark = aggregate_benchmarks(
        raw,
        arrays,
        missing=options.missing,
        stderr=matrix("stderr", np.nan),
        n_samples=matrix("n_samples", 0.0),
    )
    values = None
    if arrays.keeps_scores:
        codes = np.tile(np.arange(shape[1]), shape[0])
        values = normalize_rows(raw.ravel(), codes, arrays)[0].reshape(shape)
    floor = arrays.lower_bound if arrays.scales is None else arrays.scales.floor
    variants = Variants.from_table(pa.Table.from_pandas(keys[_KEYS]))
    return assemble_result(
        variants,
        benchmark,
        suite,
        options=options.resolved(),
        n_ignored_rows=n_ignored,
        n_scores=int(np.count_nonzero(~np.isnan(raw))),
        n_clipped=int(np.count_nonzero(raw < floor[None, :])),
        values=values,
    )


def aggregate_benchmarks(
    raw: FloatArray,
    suite: SuiteArrays,
    *,
    missing: MissingPolicy,
    stderr: FloatArray | None = None,
    n_samples: FloatArray | None = None,
) -> BenchmarkArrays:
    """Reduce a dense ``(n_variants, n_subtasks)`` matrix (NaN = absent) to benchmarks.

    The kernel's dense path: :func:`~lbnorm.engines.kernel.dense_partials`, then
    :func:`~lbnorm.engines.kernel.finish_benchmarks`.
    """
    partials = dense_partials(raw, suite, stderr=stderr, n_samples=n_samples)
    return finish_benchmarks(partials, suite, missing=missing)
