"""The Dask engine: the streaming engine's exact sums, computed on a cluster.

Each Parquet row group (of every file, or of every part of a partitioned
dataset) becomes one Dask task that opens the file on its worker, checks the
rows and folds them into exact per (variant, benchmark) sums
(:func:`lbnorm.engines.stream.sum_scores`). The sums are added up in a tree of
tasks (:func:`lbnorm.engines.stream.add_totals`, eight at a time), and only the total comes
back to the client, which finishes, ranks and writes exactly as a local run
does. The sums are fixed-point integers, so the result equals the local
streaming engine's bit for bit, and the in-memory engine's to about 1e-13.

Dask and distributed are an optional extra: ``pip install '.[dask]'`` from a clone of lbnorm.
Every worker needs lbnorm installed at the same version and must be able to
read the input paths (a shared filesystem).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.errors import InputError, LbnormError
from lbnorm.core.options import ExtraColumns, RunOptions, UnknownSubtasks
from lbnorm.engines.result import Result
from lbnorm.engines.stream import Totals, add_totals, finish_totals, sum_scores
from lbnorm.engines.validate import MAX_FAILURES_SHOWN, failure_error
from lbnorm.readers import Inputs
from lbnorm.readers.parquet import open_parquet_scores
from lbnorm.suites import Suite

__all__ = ["DaskJob", "compute", "start"]

#: Sums added per task in the reduction tree.
FAN_IN = 8


def start(inputs: Inputs, suite: Suite, options: RunOptions) -> DaskJob:
    """Sum on a Dask cluster (the engine interface): no subtask table."""
    return DaskJob(inputs, suite, options)


class DaskJob:
    """A run on a Dask cluster: nothing until :meth:`finish`, no subtask parts."""

    subtask_schema = None

    def __init__(self, inputs: Inputs, suite: Suite, options: RunOptions) -> None:
        self._inputs, self._suite, self._options = inputs, suite, options

    def subtask_parts(self) -> Iterator[pa.Table]:
        """None: the Dask engine builds no subtask table."""
        return iter(())

    def finish(self) -> Result:
        """The whole computation, on the cluster."""
        return compute(self._inputs, self._suite, self._options)


def compute(
    inputs: Inputs, suite: Suite, options: RunOptions, *, n_workers: int = 2
) -> Result:
    """Normalize Parquet inputs on a Dask cluster (the engine interface).

    Args:
        inputs: The inputs, opened (Parquet files or directories of them: a
            partitioned dataset); the workers read the row groups themselves.
        suite: The suite.
        options: The run's options (``scheduler``: the scheduler's address,
            ``tcp://host:8786``; None starts a local cluster of `n_workers`
            processes for the run; ``scheduler_timeout``: seconds to try to
            connect, None for Dask's own, 30 s by default).
        n_workers: Worker processes of the local cluster (without a scheduler).

    Returns:
        The result, without the subtask-level table.

    Raises:
        InputError: Dask is not installed, or an input is not Parquet or unreadable.
        ValidationError: Scores failed a check (every failure, with file and row).
    """
    if inputs.eager:  # (before Dask is needed: what to convert is said either way)
        raise _not_parquet(inputs.catalog)
    try:
        import dask.config
        from dask.delayed import delayed
        from distributed import Client, LocalCluster
    except ImportError as exc:
        msg = (
            "--engine dask needs the optional packages dask and distributed.\n"
            "Hint: pip install dask distributed (from a clone of lbnorm: pip install '.[dask]'), on the client and on every worker."
        )
        raise InputError(msg) from exc
    unknown, extra_columns = options.unknown, options.extra_columns
    scheduler = options.scheduler
    parts = [
        delayed(_sum_row_group)(
            _SentPath(
                given=str(opened.path), resolved=str(Path(opened.path).absolute())
            ),
            group,
            suite,
            unknown,
            extra_columns,
            None if options.failures else MAX_FAILURES_SHOWN,
        )
        for opened in inputs.streamed
        for group in range(opened.num_row_groups)
    ]
    while len(parts) > 1:  # a tree: no task ever holds more than FAN_IN sums
        parts = [
            delayed(add_totals)(parts[start : start + FAN_IN])
            for start in range(0, len(parts), FAN_IN)
        ]
    with contextlib.ExitStack() as stack:
        cluster = None
        if scheduler is None:
            scratch = stack.enter_context(_scratch())
            stack.enter_context(dask.config.set({"temporary-directory": scratch}))
            cluster = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                local_directory=scratch,
            )
            stack.callback(cluster.close)  # (closed before its folder is removed)
        try:
            timeout = (
                {}
                if options.scheduler_timeout is None
                else {"timeout": options.scheduler_timeout}
            )
            with Client(scheduler or cluster, **timeout) as client:  # type: ignore[no-untyped-call]
                totals: Totals = client.compute(parts[0]).result()
        except LbnormError:
            raise
        except OSError as exc:
            msg = f"cannot reach the Dask scheduler {scheduler}: {exc}.\nHint: check the address, or leave out --scheduler for a local cluster (--scheduler-timeout SECONDS: how long to try)."
            raise InputError(msg) from exc
    if totals.failures:
        raise failure_error(totals.failures, total=totals.n_failed)
    return finish_totals(totals, suite, options=options, files=inputs.catalog)


def _scratch() -> tempfile.TemporaryDirectory[str]:
    """A folder of the run's own in TMPDIR for the local cluster's workers, removed after it.

    Left to itself, Dask keeps ``$TMPDIR/dask-scratch-space/`` (its lock files)
    after every run. The scheduler (in this process, by Dask's
    ``temporary-directory``) and the workers (``local_directory``) work in this
    folder instead, and the run removes only the folder it made (a SIGKILLed
    run leaves its ``lbnorm-dask-*``).
    """
    return tempfile.TemporaryDirectory(
        prefix="lbnorm-dask-", ignore_cleanup_errors=True
    )


#: Inputs a refusal names; the rest are counted.
_SHOWN = 3


def _not_parquet(catalog: pa.Table) -> InputError:
    """The refusal of inputs that are not Parquet: the first few, how many, what to do."""
    is_other = pc.invert(
        pc.is_in(catalog["format"], value_set=pa.array(["parquet", "skipped"]))
    )
    paths = catalog["path"].filter(is_other)
    shown = ", ".join(map(str, paths.slice(0, _SHOWN).to_pylist()))
    more = f" and {len(paths) - _SHOWN:,} more" if len(paths) > _SHOWN else ""
    msg = (
        f"{shown}{more}: {len(paths):,} input file(s) not in Parquet; the Dask engine "
        "reads Parquet only.\n"
        "Hint: `lbnorm convert INPUT... --out scores.parquet` writes them as one "
        "Parquet table to run with --engine dask; or run without --engine dask."
    )
    return InputError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class _SentPath:
    """An input as a worker gets it: opened by its absolute path, named as given.

    A worker runs in its own working directory (on a cluster, on another
    machine), so a relative path would name another file there or none; its
    messages still name the file as the user wrote it.
    """

    given: str
    resolved: str


def _sum_row_group(
    path: _SentPath,
    group: int,
    suite: Suite,
    unknown: UnknownSubtasks,
    extra_columns: ExtraColumns,
    failure_limit: int | None,
) -> Totals:
    """On a worker: check one row group and fold it into exact sums."""
    opened = open_parquet_scores(
        Path(path.resolved), extra_columns=extra_columns, keep_details=False
    )
    opened.path = Path(path.given)  # failures name the file as the user gave it
    return sum_scores(
        opened.batches([group]), suite, unknown=unknown, failure_limit=failure_limit
    )
