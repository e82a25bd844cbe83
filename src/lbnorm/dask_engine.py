"""The Dask engine: the streaming engine's exact sums, computed on a cluster.

Each Parquet row group (of every file, or of every part of a partitioned
dataset) becomes one Dask task that opens the file on its worker, checks the
rows and folds them into exact per (variant, benchmark) sums
(:func:`lbnorm.stream.sum_scores`). The sums are added up in a tree of tasks
(:func:`lbnorm.stream.add_totals`, eight at a time), and only the total comes
back to the client, which finishes, ranks and writes exactly as a local run
does. The sums are fixed-point integers, so the result equals the local
streaming engine's bit for bit, and the in-memory engine's to about 1e-13.

Dask and distributed are an optional extra: ``pip install 'lbnorm[dask]'``.
Every worker needs lbnorm installed at the same version and must be able to
read the input paths (a shared filesystem).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from lbnorm.errors import InputError, LbnormError, ValidationError
from lbnorm.kernel import MissingPolicy
from lbnorm.pipeline import Result
from lbnorm.readers import read_inputs
from lbnorm.readers.parquet import open_parquet_scores
from lbnorm.readers.tables import ExtraColumns
from lbnorm.stream import Totals, add_totals, finish_totals, sum_scores
from lbnorm.suites import Suite
from lbnorm.validate import UnknownSubtasks

__all__ = ["compute_result_dask"]

#: Sums added per task in the reduction tree.
FAN_IN = 8


def compute_result_dask(
    paths: Sequence[str | Path],
    suite: Suite,
    *,
    scheduler: str | None = None,
    missing: MissingPolicy = "exclude",
    unknown: UnknownSubtasks = "error",
    extra_columns: ExtraColumns = "error",
    n_workers: int = 2,
) -> Result:
    """Normalize Parquet inputs on a Dask cluster: benchmark and leaderboard tables.

    Args:
        paths: Parquet files or directories of them (a partitioned dataset).
        suite: The suite.
        scheduler: The scheduler's address (``tcp://host:8786``); None starts a
            local cluster of `n_workers` processes for the run.
        missing: Policy for absent subtasks/benchmarks.
        unknown: Policy for subtasks the suite does not define.
        extra_columns: Policy for columns outside the contract.
        n_workers: Worker processes of the local cluster (without `scheduler`).

    Returns:
        The result, without the subtask-level table.

    Raises:
        InputError: Dask is not installed, or an input is not Parquet or unreadable.
        ValidationError: Scores failed a check (every failure, with file and row).
    """
    try:
        from dask.delayed import delayed
        from distributed import Client, LocalCluster
    except ImportError as exc:
        msg = (
            "--engine dask needs the optional packages dask and distributed.\n"
            "Hint: pip install 'lbnorm[dask]' (on the client and on every worker)."
        )
        raise InputError(msg) from exc
    read = read_inputs(
        paths, suite=suite, extra_columns=extra_columns, keep_details=False
    )
    if read.eager:
        shown = ", ".join(read.files["path"][read.files["format"] != "parquet"][:3])
        msg = (
            f"{shown}: the Dask engine reads Parquet only.\n"
            "Hint: convert the inputs to Parquet, or run without --engine dask."
        )
        raise InputError(msg)
    parts = [
        delayed(_sum_row_group)(str(opened.path), group, suite, unknown, extra_columns)
        for opened in read.streamed
        for group in range(opened.num_row_groups)
    ]
    while len(parts) > 1:  # a tree: no task ever holds more than FAN_IN sums
        parts = [
            delayed(add_totals)(parts[start : start + FAN_IN])
            for start in range(0, len(parts), FAN_IN)
        ]
    cluster = None
    if scheduler is None:
        cluster = LocalCluster(  # type: ignore[no-untyped-call]
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        )
    try:
        with Client(scheduler or cluster) as client:  # type: ignore[no-untyped-call]
            totals: Totals = client.compute(parts[0]).result()
    except LbnormError:
        raise
    except OSError as exc:
        msg = f"cannot reach the Dask scheduler {scheduler}: {exc}.\nHint: check the address, or leave out --scheduler for a local cluster."
        raise InputError(msg) from exc
    finally:
        if cluster is not None:
            cluster.close()
    if totals.failures:
        raise ValidationError.from_failures(
            pd.concat(totals.failures, ignore_index=True), total=totals.n_failed
        )
    return finish_totals(totals, suite, missing=missing, files=read.files)


def _sum_row_group(
    path: str,
    group: int,
    suite: Suite,
    unknown: UnknownSubtasks,
    extra_columns: ExtraColumns,
) -> Totals:
    """On a worker: check one row group and fold it into exact sums."""
    opened = open_parquet_scores(
        Path(path), extra_columns=extra_columns, keep_details=False
    )
    return sum_scores(opened.batches([group]), suite, unknown=unknown)
