"""The Dask engine: the streaming engine's exact sums, computed on a cluster.

Each Parquet row group (of every file, or of every part of a partitioned
dataset) becomes one Dask task that opens the file on its worker, checks the
rows and folds them into exact per (variant, benchmark) sums
(:func:`lbnorm.engines.stream.sum_scores`). The sums are added up in a tree of
tasks (:func:`lbnorm.engines.stream.add_totals`, eight at a time), and only the total comes
back to the client, which finishes, ranks and writes exactly as a local run
does.

An input whose sums would pass ``RunOptions.sum_memory`` (millions of models,
where the streaming engine spills: :mod:`lbnorm.engines.spill`) is not gathered:
each row group's sums are split by a hash of the model name into partitions of
the variants, each partition is added up in its own tree and finished on a
worker, which saves its benchmark arrays in a spill folder of the client's
(:func:`lbnorm.engines.spill.save_partition`); only the variants' keys and
averages come back, and the client writes the tables from the saved arrays a
part at a time, as a spilled local run does. The client's memory is then the
keys and a few numbers per variant, whatever the input's size.

The sums are fixed-point integers, so the result equals the local
streaming engine's bit for bit.

Dask and distributed are an optional extra: ``pip install '.[dask]'`` from a clone of lbnorm.
Every worker needs lbnorm installed at the same version and must be able to
read the input paths (a shared filesystem), and, for an input that spills, to
write the client's spill folder (``TMPDIR`` or ``RunOptions.spill_dir``).
"""

from __future__ import annotations

import contextlib
import copy
import multiprocessing
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm._runtime import TICK, cancelled, check_cancelled
from lbnorm.core import arrow
from lbnorm.core.errors import InputError, LbnormError, SpillError
from lbnorm.core.options import RunOptions
from lbnorm.engines.kernel import IntArray, finish_benchmarks
from lbnorm.engines.partials import Tally
from lbnorm.engines.result import Result
from lbnorm.engines.spill import (
    Board,
    finish_saved,
    rows_by_part,
    save_partition,
    spill_width,
)
from lbnorm.engines.spill_folder import SpillFolder
from lbnorm.engines.stream import Totals, add_totals, finish_totals, sum_scores
from lbnorm.engines.variants import TEXT_KEYS, Variants
from lbnorm.engines.vocabulary import hash_strings
from lbnorm.readers import Inputs
from lbnorm.readers.parquet import open_parquet_scores
from lbnorm.suites import Suite, suite_arrays

__all__ = ["DaskJob", "compute", "start"]

#: Sums added per task in the reduction tree.
FAN_IN = 8

#: Worker processes of the local cluster a run starts without ``--scheduler``.
LOCAL_WORKERS = 2


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


def compute(inputs: Inputs, suite: Suite, options: RunOptions) -> Result:
    """Normalize Parquet inputs on a Dask cluster (the engine interface).

    Args:
        inputs: The inputs, opened (Parquet files or directories of them: a
            partitioned dataset); the workers read the row groups themselves.
        suite: The suite.
        options: The run's options (``scheduler``: the scheduler's address,
            ``tcp://host:8786``; None starts a local cluster of
            :data:`LOCAL_WORKERS` processes for the run; ``scheduler_timeout``:
            seconds to try to connect, None for Dask's own, 30 s by default).

    A Ctrl-C is seen within a tick while the cluster computes (the wait looks
    at the flag each :data:`~lbnorm._runtime.TICK`); a local cluster's worker
    processes are then killed, not waited for (a graceful close takes seconds
    on a busy machine). Starting a local cluster is not cut short.

    Returns:
        The result, without the subtask-level table.

    Raises:
        InputError: Dask is not installed, or an input is not Parquet or unreadable.
        ValidationError: Scores failed a check (every failure, with file and row).
    """
    if inputs.eager:  # (before Dask is needed: what to convert is said either way)
        raise _not_parquet(inputs.catalog)
    try:
        import dask.config  # noqa: F401 (here: the error says what to install)
        import distributed  # noqa: F401
    except ImportError as exc:
        msg = (
            "--engine dask needs the optional packages dask and distributed.\n"
            "Hint: pip install dask distributed (from a clone of lbnorm: pip install '.[dask]'), on the client and on every worker."
        )
        raise InputError(msg) from exc
    arrays = suite_arrays(suite)
    width = spill_width(arrays, inputs.num_rows, options)
    folder = None if width is None else SpillFolder(options.spill_dir)
    try:
        n_variants = inputs.num_rows // max(int(arrays.lower_bound.shape[0]), 1) + 1
        graph = _graph(
            inputs,
            suite,
            options,
            n_parts=None if width is None else -(-n_variants // width),
            folder=folder,
        )
        results = _on_cluster(graph, options)  # the total, or each _Finished part
        if folder is None:
            return finish_totals(
                results[0], suite, options=options, files=inputs.catalog
            )
        tally = Tally.added(part.tally for part in results)
        tally.raise_failures()
        parts = [part.variants for part in results]
        boards = [part.board for part in results]
        results.clear()  # (their variants are in `parts`, joined and freed next)
        # ordered in place of the joined keys, not beside them (the ordered copy
        # keeps their vocabularies: a second copy of millions of names in key
        # order would double the client's largest arrays)
        variants = _joined(parts)
        order = variants.order()
        variants = variants.take(order)
        return finish_saved(
            folder,
            variants,
            order,
            boards,
            suite=suite,
            options=options,
            files=inputs.catalog,
            tally=tally,
        )
    except BaseException:
        if folder is not None:
            folder.remove()  # (the saved arrays of a run that ends here)
        raise


def _on_cluster(graph: list[Any], options: RunOptions) -> list[Any]:
    """The graph's results, computed on the scheduler of the options or a local cluster."""
    import dask.config
    from distributed import Client, LocalCluster

    scheduler = options.scheduler
    with contextlib.ExitStack() as stack:
        cluster = None
        if scheduler is None:
            # a folder of the run's own in TMPDIR for the scheduler (in this
            # process, by Dask's ``temporary-directory``) and the workers
            # (``local_directory``), removed after it: left to itself, Dask keeps
            # ``$TMPDIR/dask-scratch-space/`` (its lock files) after every run (a
            # SIGKILLed run leaves its ``lbnorm-dask-*``)
            scratch = stack.enter_context(
                tempfile.TemporaryDirectory(
                    prefix="lbnorm-dask-", ignore_cleanup_errors=True
                )
            )
            stack.enter_context(dask.config.set({"temporary-directory": scratch}))
            others = set(multiprocessing.active_children())  # (the host's, if any)
            cluster = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=LOCAL_WORKERS,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                # the scheduler's metrics server on any free port, not 8787: a
                # second run (or test suite) on the machine would warn
                scheduler_kwargs={"dashboard_address": ":0"},
                local_directory=scratch,
            )
            stack.callback(cluster.close)  # (closed before its folder is removed)
            stack.callback(_kill_if_cancelled, others)  # (before it is closed)
        try:
            timeout = (
                {}
                if options.scheduler_timeout is None
                else {"timeout": options.scheduler_timeout}
            )
            with Client(scheduler or cluster, **timeout) as client:  # type: ignore[no-untyped-call]
                results = _gathered(client.compute(graph))
        except LbnormError:
            raise
        except OSError as exc:
            msg = f"cannot reach the Dask scheduler {scheduler}: {exc}.\nHint: check the address, or leave out --scheduler for a local cluster (--scheduler-timeout SECONDS: how long to try)."
            raise InputError(msg) from exc
    return results


def _gathered(futures: list[Any]) -> list[Any]:
    """The futures' results, each fetched (and released on the cluster) as it is done.

    One result at a time comes over the wire, not all of them in one message
    (a copy of every partition's keys in flight beside the same keys
    unpacked); the wait looks at the cancellation flag each tick.
    """
    from distributed import wait

    index = {future.key: position for position, future in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    pending = set(futures)
    del futures
    while pending:
        try:
            done, pending = wait(  # type: ignore[no-untyped-call]
                pending, timeout=TICK, return_when="FIRST_COMPLETED"
            )
        except TimeoutError:  # (distributed's: the tick passed)
            check_cancelled()
            continue
        for future in done:
            result = future.result()
            future.release()
            # the arrays Distributed unpickles share the received message's
            # memory: a partition's small board arrays kept would keep its keys'
            # memory alive too after the client has joined them; copied (every
            # NumPy and Arrow buffer), the message is freed at once
            is_part = isinstance(result, _Finished)
            results[index[future.key]] = copy.deepcopy(result) if is_part else result
    return results


def _graph(
    inputs: Inputs,
    suite: Suite,
    options: RunOptions,
    *,
    n_parts: int | None,
    folder: SpillFolder | None,
) -> list[Any]:
    """The tasks: each row group summed (the workers read it); the total, or each partition finished.

    With `n_parts` partitions of the variants, the workers save their arrays
    in `folder`; None: the sums fit, the total comes back.
    """
    from dask.delayed import delayed  # (an optional extra, there when this runs)

    sums = [
        delayed(_sum_row_group)(
            str(opened.path), str(Path(opened.path).absolute()), group, suite, options
        )
        for opened in inputs.streamed
        for group in range(opened.num_row_groups)
    ]
    if n_parts is None or folder is None:
        return [_added_up(sums)]
    shares = [delayed(_shares, nout=n_parts)(part, n_parts) for part in sums]
    return [
        delayed(_finish_share)(
            _added_up([share[index] for share in shares]),
            index,
            str(folder.path),
            suite,
            options,
        )
        for index in range(n_parts)
    ]


def _joined(parts: list[Variants]) -> Variants:
    """The variants of the partitions (one at least), in turn: their vocabularies joined, not merged.

    A model is in one partition only, and its variants' strings in its
    partition's vocabularies (each distinct), so no variant is in two
    partitions: the vocabularies are concatenated as they are, no hash table
    of millions of names. A precision or revision string in two partitions
    then has an id in each: its variants take the first (:func:`_first_ids`),
    so equal strings have equal ids, as the tables' dictionaries need.

    `parts` is emptied: each partition's codes, then each key's strings, are
    freed once joined (at most one key's strings are held twice).
    """
    sizes = {
        name: [len(part.vocabularies[name]) for part in parts] for name in TEXT_KEYS
    }
    counts = [len(part) for part in parts]
    codes = np.concatenate([part.codes for part in parts])
    strings = {name: [part.vocabularies[name] for part in parts] for name in TEXT_KEYS}
    parts.clear()
    vocabularies: dict[str, pa.Array] = {}
    for position, name in enumerate(TEXT_KEYS):
        starts = np.cumsum([0, *sizes[name]])
        codes[:, position] += np.repeat(starts[:-1], counts)
        vocabularies[name] = pa.concat_arrays(strings.pop(name))
        if name != "model":
            codes[:, position] = _first_ids(vocabularies[name])[codes[:, position]]
    return Variants(vocabularies=vocabularies, codes=codes)


def _first_ids(vocabulary: pa.Array) -> IntArray:
    """Per string of `vocabulary`, the id of the first string equal to it.

    Strings that may repeat are found by their 64-bit hashes (a sort of
    numbers, not a hash table of the strings); only those are compared.
    """
    ids = np.arange(len(vocabulary))
    _, inverse, counts = np.unique(
        hash_strings(vocabulary), return_inverse=True, return_counts=True
    )
    maybe = np.flatnonzero(counts[inverse] > 1)
    if maybe.size:
        equal = arrow.to_numpy(
            pc.dictionary_encode(vocabulary.take(arrow.array(maybe))).indices
        )
        _, first = np.unique(equal, return_index=True)
        ids[maybe] = maybe[first[equal]]
    return ids


def _added_up(parts: list[Any]) -> Any:
    """Delayed sums added up in a tree: no task ever holds more than FAN_IN of them."""
    from dask.delayed import delayed  # (an optional extra, there when this runs)

    while len(parts) > 1:
        parts = [
            delayed(add_totals)(parts[start : start + FAN_IN])
            for start in range(0, len(parts), FAN_IN)
        ]
    return parts[0]


def _kill_if_cancelled(others: set[multiprocessing.process.BaseProcess]) -> None:
    """After a Ctrl-C, kill the local cluster's worker processes (not `others`) before it closes.

    A graceful close waits for the workers, seconds on a busy machine; a
    cancelled run has nothing to wait for.
    """
    if cancelled():
        for worker in set(multiprocessing.active_children()) - others:
            worker.kill()


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


def _sum_row_group(
    given: str, resolved: str, group: int, suite: Suite, options: RunOptions
) -> Totals:
    """On a worker: check one row group of the file at `resolved` and fold it into exact sums.

    A worker runs in its own working directory (on a cluster, on another
    machine), so it opens the input by its absolute path (a relative one would
    name another file there, or none); its messages name the file as the user
    gave it (`given`).
    """
    opened = open_parquet_scores(
        Path(resolved), extra_columns=options.extra_columns, keep_details=False
    )
    opened.path = Path(given)
    return sum_scores(opened.batches([group]), suite, options)


def _shares(totals: Totals, n_parts: int) -> tuple[Totals, ...]:
    """On a worker: a row group's sums split into `n_parts` partitions by model name.

    Every share of a model goes to the same partition, whichever row group it
    comes from; the first partition carries the row group's failures and counts.
    """
    variants = totals.variants
    names = variants.vocabularies["model"]
    # the vocabulary's hash: unsalted, the same in every worker process
    hashes = hash_strings(names.cast(pa.large_string()))
    part_of_name = (hashes % np.uint64(n_parts)).astype(np.int64)
    shares = []
    for index, rows in enumerate(
        rows_by_part(part_of_name[variants.codes[:, 0]], n_parts)
    ):
        shares.append(
            Totals(
                variants=_compact(variants, rows),
                store=totals.store.taken(rows),
                tally=totals.tally if index == 0 else Tally(),
            )
        )
    return tuple(shares)


def _compact(variants: Variants, rows: IntArray) -> Variants:
    """These `rows` of the variants, with only the strings they use (sent on: small)."""
    codes = variants.codes[rows]
    vocabularies = {}
    for position, name in enumerate(TEXT_KEYS):
        used, codes[:, position] = np.unique(codes[:, position], return_inverse=True)
        vocabularies[name] = variants.vocabularies[name].take(arrow.array(used))
    return Variants(vocabularies=vocabularies, codes=codes)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Finished:
    """A partition of the variants finished on a worker: what the client needs of it.

    Attributes:
        variants: Its variants (the saved arrays' rows, in turn).
        board: What the leaderboard needs of them (None: a check failed).
        tally: Its failures and row counts.
    """

    variants: Variants
    board: Board | None
    tally: Tally


def _finish_share(
    totals: Totals, part: int, folder: str, suite: Suite, options: RunOptions
) -> _Finished:
    """On a worker: finish a partition's sums and save its benchmark arrays in `folder`."""
    board = None
    if not totals.tally.failures:  # (else the run fails: nothing to finish)
        store = totals.store
        benchmark = finish_benchmarks(
            store.partials(len(totals.variants)), store.arrays, missing=options.missing
        )
        try:
            save_partition(Path(folder), part, benchmark)
        except OSError as exc:
            msg = (
                f"{folder}: a Dask worker cannot save its partition of the sums in the "
                f"run's spill folder ({' '.join((exc.strerror or str(exc)).split())}).\n"
                "Hint: with --scheduler, point TMPDIR (on the client) at a folder every "
                "worker can write under the same path (a shared filesystem), free space "
                "there, or raise --sum-memory."
            )
            raise SpillError(msg) from exc
        board = Board.of(benchmark, suite, store.arrays, options)
    return _Finished(variants=totals.variants, board=board, tally=totals.tally)
