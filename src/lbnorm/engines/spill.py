"""Spilling: a streaming run whose sums would not fit its memory budget.

The exact sums take ``8 * len(SUMS)`` bytes per (variant, benchmark), and
finishing them as many again: 2M variants of a 10-benchmark suite need ~2.5 GB.
When the input's row count says the run would pass ``RunOptions.sum_memory``
(:func:`spill_width`), or the variants seen so far do (a sparse input: a
subtask or two per model), the streaming engine spills instead:

1. **The streaming pass** encodes and checks every batch as usual (the key
   registry and the seen matrix, one byte per (variant, subtask), stay whole:
   duplicates are caught across the whole input), sums each batch's exact terms
   per (variant, benchmark) cell, and appends those sums (8 bytes a cell and 8
   per sum the batch added to, 4-5 of them usually: 5-7 bytes per input row,
   where the rows themselves would take 16-32) to one
   of several files in a temporary folder, by variant code: a partition of
   ``width`` variants each (:class:`SpillStore`).
2. **Each partition**'s sums are read back and added into a
   :class:`~lbnorm.engines.partials.PartialStore` of ``width`` variants, finished
   (:func:`lbnorm.engines.kernel.finish_benchmarks`, the average and its standard
   error), and its benchmark arrays saved beside it, a file per array,
   benchmark-major; only the averages stay in memory (8 bytes a variant).
3. **The output** is gathered from those files: the benchmark table a benchmark
   and :data:`CHUNK_ROWS` variants at a time in key order, the leaderboard
   :data:`BOARD_CHUNK_ROWS` rows at a time in rank order (:func:`_spilled_benchmarks`,
   :func:`_spilled_leaderboard`), so neither table is ever whole in memory.

The sums are the same fixed-point integers, added in the same batches, so the
tables equal the unspilled run's bit for bit. The folder is made with
:func:`tempfile.mkdtemp` in ``TMPDIR`` (a missing or unwritable ``TMPDIR`` is an
error, not a fallback elsewhere) and removed when the result is dropped or the
process ends (an interrupted command line removes it too). It is locked while
it lives: a SIGKILLed process's ``lbnorm-spill-*`` folder is removed by the next
run that spills there. A failure to use it is a
:class:`~lbnorm.core.errors.SpillError` naming ``TMPDIR`` and its free space.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import resource  # (POSIX only, as the spill folder's locks are)
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Self

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm._runtime import Threads, check_cancelled, release_free_memory
from lbnorm.board import average_rows, rank_rows
from lbnorm.core import arrow
from lbnorm.core.errors import OptionsError
from lbnorm.core.faults import fault_point
from lbnorm.core.options import RunOptions
from lbnorm.core.schemas import BENCHMARK_SCORES, INPUT_FILES
from lbnorm.engines.encode import Variants
from lbnorm.engines.kernel import (
    SUMS,
    BenchmarkArrays,
    FloatArray,
    IntArray,
    SuiteArrays,
    finish_benchmarks,
)
from lbnorm.engines.partials import PartialStore, SummingStore, Tally
from lbnorm.engines.result import (
    RESIZED_ROWS,
    BoardCounts,
    Result,
    TableParts,
    benchmark_table,
    board_order,
    board_schema,
    leaderboard_rows,
    resized_examples,
)
from lbnorm.engines.spill_folder import SpillFolder, spill_errors
from lbnorm.suites import Suite

__all__ = [
    "BOARD_CHUNK_ROWS",
    "CHUNK_ROWS",
    "Board",
    "SpillStore",
    "finish_saved",
    "finish_spilled",
    "rows_by_part",
    "save_partition",
    "spill_width",
]

#: Rows of a benchmark-table part (a Parquet row group) built from spilled arrays.
CHUNK_ROWS = 1 << 19

#: Rows of a leaderboard part (~300 bytes a row for the v2 suite).
BOARD_CHUNK_ROWS = 1 << 18

#: Bytes per (variant, benchmark) while a partition is summed and finished: the
#: sums, their ordered copies and the benchmark arrays, all float64.
_CELL_BYTES = 8 * (len(SUMS) + 8)

#: Partitions at most (each an open file during the streaming pass), unless the
#: input holds more variants than its row count said.
_MAX_PARTS = 256

#: Batches between two returns of freed memory to the system while spilling.
_TRIM_EVERY = 16

#: The benchmark arrays saved per partition, and their types on disk.
_SAVED: dict[str, type[np.generic]] = {
    "raw": np.float64,
    "normalized": np.float64,
    "stderr": np.float64,
    "raw_stderr": np.float64,
    "n_present": np.int32,
    "n_estimated": np.int32,
    "has_other_sizes": np.bool_,
}


def spill_width(
    arrays: SuiteArrays,
    expected_rows: int,
    options: RunOptions,
    *,
    n_variants: int | None = None,
) -> int | None:
    """Variants per partition when a run must spill; None when its sums fit.

    A variant has at most one row per subtask, so ``expected_rows`` over the
    suite's subtasks is a floor on the variants to come: past the budget, a run
    spills from its first batch. A sparse input (a subtask or two per model)
    holds many more variants than that floor; the streaming engine asks again
    with ``n_variants``, the variants its key registry has seen so far, and
    turns to spilling when they pass the budget (:meth:`SpillStore.of_partials`).

    Args:
        arrays: The suite's arrays.
        expected_rows: Rows in the input.
        options: The run's options (``sum_memory``, GiB).
        n_variants: The variants seen so far (None: the floor above).

    Examples:
        >>> from lbnorm.suites import load_suite, suite_arrays
        >>> arrays = suite_arrays(load_suite("openllm-v2"))
        >>> spill_width(arrays, 20_000_000, RunOptions()) is None  # 500,000 variants
        True
        >>> spill_width(arrays, 200_000_000, RunOptions())  # 5,000,000 variants
        349525
        >>> spill_width(arrays, 2_000_000, RunOptions(), n_variants=2_000_000)
        349525
    """
    n_subtasks = max(int(arrays.lower_bound.shape[0]), 1)
    per_variant = _CELL_BYTES * max(int(arrays.is_pooled.shape[0]), 1)
    budget = int(options.sum_memory * 2**30)
    if n_variants is None:
        n_variants = expected_rows // n_subtasks + 1
    if n_variants * per_variant <= budget:
        return None
    if not arrays.can_spill:
        needed = n_variants * (per_variant + 8 * n_subtasks) / 2**30
        msg = (
            f"{n_variants:,} model variants would need about {needed:.1f} GiB of "
            f"sums, over --sum-memory {options.sum_memory:g}, and this suite's board "
            "(its rates, or left-to-right sums of subtask scores) compares every "
            "model with every other, so the run cannot spill to disk.\n"
            f"Hint: raise --sum-memory to about {needed * 1.5:.1f}, or drop the "
            "rates and summation from the suite's [board]."
        )
        raise OptionsError(msg)
    # half the budget per partition: the rest of the run (keys, the seen
    # matrix, a batch) holds memory of its own meanwhile
    return max(budget // (2 * per_variant), -(-n_variants // _most_parts()))


def _most_parts() -> int:
    """Partitions a width is chosen for: :data:`_MAX_PARTS`, fewer under a low open-files limit."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = 1 << 20 if soft == resource.RLIM_INFINITY else int(soft)
    return max(min(_MAX_PARTS, limit // 4), 1)


class SpillStore(SummingStore):
    """The streaming pass of a spilled run: the seen matrix, batch sums appended to files.

    It stands in for :class:`~lbnorm.engines.partials.PartialStore` while the
    batches are checked (the two are a
    :class:`~lbnorm.engines.partials.SummingStore` each); each batch's sums go
    to its partitions' files (:meth:`add_sums`), added up later, a partition at
    a time, by :func:`finish_spilled`.
    """

    def __init__(
        self,
        arrays: SuiteArrays,
        capacity: int,
        subtask_names: list[str],
        width: int,
        where: str | None,
        *,
        seen: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        super().__init__(arrays, capacity, subtask_names, seen=seen)
        self.width = width
        self.folder = SpillFolder(where)
        self._n_batches = 0

    @classmethod
    def of_partials(
        cls, store: PartialStore, n_variants: int, width: int, where: str | None
    ) -> SpillStore:
        """A spilling store that goes on from a store's sums, which it writes out.

        For a run that found, batch by batch, more variants than its budget
        holds (:func:`spill_width`): the sums so far are appended as one batch's
        and `store` is spent; its seen matrix is kept.
        """
        seen, sums = store.handed_over(n_variants)
        spilled = cls(store.arrays, 0, store.subtask_names, width, where, seen=seen)
        try:
            spilled.add_sums(
                slice(0, n_variants * store.arrays.is_pooled.shape[0]), sums
            )
        except BaseException:
            spilled.folder.remove()
            raise
        return spilled

    def trimmed(self, n_variants: int) -> Self:
        """The store cut to its first `n_variants` variants, its files complete."""
        super().trimmed(n_variants)
        self.folder.close()
        return self

    def abandon(self) -> None:
        """Stop summing and remove the folder (a run that failed or was cancelled).

        The batch under way finishes first; what it raised (a full disk) gives
        way to the run's own error (its failed checks), the one it reports.
        """
        self._behind.abandon()
        self.folder.remove()

    def reserve(self, n_variants: int) -> None:
        """Make room for a batch's variants; every few batches, give freed memory back."""
        self._n_batches += 1
        if self._n_batches % _TRIM_EVERY == 0:  # the batches' temporaries, freed
            release_free_memory()
        super().reserve(n_variants)

    def add_sums(self, keys: IntArray | slice, sums: dict[str, FloatArray]) -> None:
        """Append per-cell sums (distinct cells, increasing) to their partitions' files."""
        n_benchmarks = self.arrays.is_pooled.shape[0]
        cells = np.arange(keys.start, keys.stop) if isinstance(keys, slice) else keys
        if not cells.size:
            return
        names = [name for name in SUMS if name in sums]
        mask = sum(1 << SUMS.index(name) for name in names)
        part, local = np.divmod(cells, self.width * n_benchmarks)
        # cells come sorted: each partition's are a run (a batch's: one or two)
        first, last = int(part[0]), int(part[-1])
        ends = np.searchsorted(part, np.arange(first, last + 2)).tolist()
        for index, (start, end) in enumerate(itertools.pairwise(ends), start=first):
            if end > start:
                columns = [local[start:end], *(sums[name][start:end] for name in names)]
                self._append(index, np.array([end - start, mask]), columns)

    def _append(
        self, part: int, header: IntArray, columns: list[npt.NDArray[Any]]
    ) -> None:
        folder = self.folder
        with folder.writing() as is_open:
            if not is_open:  # the run ended (an interrupt): drop it
                return
            files = folder.files
            file = files.pop(part, None)  # (put back last: the most recent)
            if file is None:
                if len(files) >= _most_parts():  # under the open-files limit:
                    files.pop(next(iter(files))).close()  # the least recent shut
                file = (folder.path / f"{part}.sums").open("ab")
            files[part] = file
            file.write(header.astype(np.int64).tobytes())
            for values in columns:
                file.write(np.ascontiguousarray(values).tobytes())

    def sums(self, part: int) -> Iterator[tuple[IntArray, dict[str, FloatArray]]]:
        """A partition's spilled sums, a batch's share at a time (deleted once read).

        Yields:
            The cells (``variant * n_benchmarks + benchmark``, the variant
            counted in its partition) and per sum, their totals.
        """
        path = self.folder.path / f"{part}.sums"
        with spill_errors(self.folder.where):
            if not path.exists():
                if not self.folder.path.is_dir():  # (not a partition without sums)
                    raise FileNotFoundError(
                        errno.ENOENT,
                        "the spill folder was removed",
                        str(self.folder.path),
                    )
                return
            with path.open("rb") as file:
                while header := file.read(2 * 8):
                    n_cells, mask = (
                        int(value) for value in np.frombuffer(header, np.int64)
                    )
                    cells = _read(file, np.int64, n_cells)
                    yield (
                        cells,
                        {
                            name: _read(file, np.float64, n_cells)
                            for position, name in enumerate(SUMS)
                            if mask >> position & 1
                        },
                    )
            path.unlink()


def _read(file: BinaryIO, kind: type[np.generic], n_rows: int) -> npt.NDArray[Any]:
    """`n_rows` values of a type from a spill file."""
    size = np.dtype(kind).itemsize * int(n_rows)
    return np.frombuffer(file.read(size), dtype=kind)


def finish_spilled(
    variants: Variants,
    store: SpillStore,
    suite: Suite,
    *,
    options: RunOptions,
    files: pa.Table | None,
    tally: Tally,
) -> Result:
    """Sum and finish a spilled run a partition at a time; the tables as parts.

    Args:
        variants: Every variant, in code order.
        store: The streaming pass's store.
        suite: The suite.
        options: The run's options.
        files: The catalog of input files.
        tally: The run's row counts.

    Returns:
        The result; its benchmark and leaderboard tables are gathered from the
        spill folder as the writer reads them.
    """
    # the variants' order (Arrow's string sorts, slow for millions of models) is
    # found on a second thread while the partitions are summed in code order here
    # (both release the GIL for their array work)
    with Threads(1, "order") as sorter:
        ordering = sorter.submit(variants.order)
        boards = _sum_partitions(store, len(variants), suite, options)
        order = ordering.result()
    # names renumbered in key order: the benchmark table's parts slice them
    ordered = variants.take(order, renumber=True)
    del variants  # (the ordered copy is kept: a caller's frame must not hold both)
    return finish_saved(
        store.folder,
        ordered,
        order,
        boards,
        suite=suite,
        options=options,
        files=files,
        tally=tally,
    )


def finish_saved(
    folder: SpillFolder,
    ordered: Variants,
    order: IntArray,
    boards: list[Board],
    *,
    suite: Suite,
    options: RunOptions,
    files: pa.Table | None,
    tally: Tally,
) -> Result:
    """The result of a run whose finished partitions are saved in `folder`.

    Partition ``i`` (saved with :func:`save_partition`) holds ``boards[i]``'s
    variants; `ordered` is every variant in key order, `order` the codes in
    that order. The caller keeps no other copy of the variants: millions of
    keys held twice would raise the peak the spill exists to bound.
    """
    sizes = [board.average.size for board in boards]
    spilled = _Spilled(folder, sizes, order, suite)
    board = Board.joined(boards)
    boards.clear()
    averages, errors = board.average[order], board.error[order]
    n_complete = board.n_complete[order]
    rank = rank_rows(
        suite,
        averages if board.ranked_by is None else board.ranked_by[order],
        is_complete=(
            None if suite.board.rank_incomplete else n_complete == len(suite.benchmarks)
        ),
    )
    return Result(
        benchmark_output=_spilled_benchmarks(
            spilled,
            ordered,
            board.n_cells,
            resized=_resized(spilled, ordered, board.resized),
        ),
        leaderboard_output=_spilled_leaderboard(
            spilled,
            ordered,
            rank=rank,
            average=averages,
            average_error=errors,
            n_complete=n_complete,
            counts=BoardCounts.of_arrays(
                ordered.n_models(), n_complete == len(suite.benchmarks), rank
            ),
        ),
        suite=suite,
        options=options,
        file_table=files if files is not None else arrow.empty_table(INPUT_FILES),
        n_ignored_rows=tally.n_ignored,
        n_scores=tally.n_scores,
        n_clipped=tally.n_clipped,
    )


@dataclass(slots=True, kw_only=True)
class Board:
    """What the leaderboard needs of finished variants (in code order).

    Attributes:
        average, error: The average and its standard error.
        n_complete: The benchmarks with every subtask.
        ranked_by: The score of the benchmark the board ranks by (None when it
            ranks by the average).
        n_cells: The (variant, benchmark) cells with a subtask (the benchmark
            table's rows).
        resized: (code, benchmark) pairs pooled with other sample sizes.
    """

    average: FloatArray
    error: FloatArray
    n_complete: npt.NDArray[np.int8]
    ranked_by: FloatArray | None
    n_cells: int
    resized: list[IntArray]

    @classmethod
    def of(
        cls,
        benchmark: BenchmarkArrays,
        suite: Suite,
        arrays: SuiteArrays,
        options: RunOptions,
    ) -> Board:
        """A finished partition's board (codes from 0)."""
        average, error = average_rows(
            suite,
            arrays,
            benchmark.normalized,
            benchmark.stderr,
            benchmark.n_present,
            missing=options.missing,
        )
        by = suite.board.rank_by  # (a spilled run's board has no rates)
        other = np.argwhere(benchmark.has_other_sizes)
        return cls(
            average=average,
            error=error,
            n_complete=(benchmark.n_present == benchmark.n_expected)
            .sum(axis=1)
            .astype(np.int8),
            ranked_by=None
            if by == "average"
            else benchmark.normalized[:, suite.benchmark_names.index(by)].copy(),
            n_cells=int(np.count_nonzero(benchmark.n_present)),
            resized=[other] if other.size else [],
        )

    @classmethod
    def joined(cls, boards: list[Board]) -> Board:
        """The boards of consecutive partitions as one (their codes in turn)."""
        starts = np.cumsum([0, *(board.average.size for board in boards)])
        return cls(
            average=np.concatenate([board.average for board in boards]),
            error=np.concatenate([board.error for board in boards]),
            n_complete=np.concatenate([board.n_complete for board in boards]),
            ranked_by=None
            if not boards or boards[0].ranked_by is None
            else np.concatenate([board.ranked_by for board in boards]),
            n_cells=sum(board.n_cells for board in boards),
            resized=[
                np.add(pairs, [low, 0])
                for board, low in zip(boards, starts.tolist(), strict=False)
                for pairs in board.resized
            ],
        )


def _sum_partitions(
    store: SpillStore, n_variants: int, suite: Suite, options: RunOptions
) -> list[Board]:
    """Sum, finish and save every partition; what the leaderboard needs of each."""
    boards = []
    # a partition's arrays are saved on a thread while the next one is summed
    # (writing them to the page cache takes about as long as summing them)
    with Threads(1, "save") as saver:
        saving: Future[None] | None = None
        for part, low in enumerate(range(0, n_variants, store.width)):
            high = min(low + store.width, n_variants)
            benchmark = _sum_partition(store, part, low, high, options)
            if saving is not None:
                saving.result()  # one partition's arrays waiting at most
            saving = saver.submit(
                save_partition, store.folder.path, part, benchmark, store.folder
            )
            boards.append(Board.of(benchmark, suite, store.arrays, options))
            del benchmark
        if saving is not None:
            saving.result()  # raises what saving raised
    store.seen = np.zeros((0, 0), dtype=bool)  # counted: freed
    release_free_memory()
    return boards


def _sum_partition(
    store: SpillStore, part: int, low: int, high: int, options: RunOptions
) -> BenchmarkArrays:
    """Add up a partition's spilled sums and finish them."""
    fault_point("spilled")  # signal tests: LBNORM_FAULT_POINT (lbnorm.core.faults)
    check_cancelled()  # a cancelled run stops between two partitions
    release_free_memory()  # the previous partition's arrays, or the pass's
    partial = PartialStore(
        store.arrays, 0, store.subtask_names, seen=store.seen[low:high]
    )
    for cells, sums in store.sums(part):
        check_cancelled()
        partial.add_sums(cells, sums)
    return finish_benchmarks(
        partial.partials(high - low),
        store.arrays,
        missing=options.missing,
    )


def save_partition(
    path: Path, part: int, benchmark: BenchmarkArrays, folder: SpillFolder | None = None
) -> None:
    """Save a partition's benchmark arrays in `path`, a file each, benchmark-major.

    A benchmark's variants are one contiguous run of its file (raw values:
    :class:`_Spilled` reads them). Given the run's own `folder` (`path` is
    its), each is written under its lock, and nothing once it is removed (the
    run ended: an interrupt); a Dask worker saves into the client's folder.
    """
    for name, kind in _SAVED.items():
        values = np.ascontiguousarray(getattr(benchmark, name).T, dtype=kind)
        with folder.writing() if folder else contextlib.nullcontext(True) as is_open:
            if not is_open:
                return
            values.tofile(_saved_path(path, part, name))


def _saved_path(folder: Path, part: int, name: str) -> Path:
    """Where a partition's saved benchmark array is (raw, benchmark-major)."""
    return folder / f"{part}.{name}.bin"


def rows_by_part(part: IntArray, n_parts: int) -> list[IntArray]:
    """Per part ``0 .. n_parts - 1``, the positions of its rows in `part`, increasing.

    A stable sort by part: a counting sort when the parts fit 16 bits (numpy
    sorts 8- and 16-bit keys by radix).
    """
    if n_parts <= 1 << 16:
        part = part.astype(np.uint8 if n_parts <= 1 << 8 else np.uint16)
    by_part = np.argsort(part, kind="stable")
    return np.split(by_part, np.cumsum(np.bincount(part, minlength=n_parts))[:-1])


class _Spilled:
    """A spilled run's saved benchmark arrays, gathered back by variant code.

    A gather reads the benchmark's run of each partition's file it needs (one
    ``pread`` into the same buffer each time) and takes the values it needs
    from there, so at most one partition's run of one array is resident per
    reader.
    """

    def __init__(
        self,
        folder: SpillFolder,
        sizes: list[int],
        order: IntArray,
        suite: Suite,
    ) -> None:
        """Partitions of `sizes` variants, codes numbered through them in turn.

        The spilling store's are all as wide but the last; a Dask run's (its
        workers' partitions of the variants) each as wide as its share.
        """
        self.folder = folder
        self.sizes = sizes
        self.starts = np.cumsum([0, *sizes])
        self.width = max(sizes, default=1)
        self.is_even = all(size == self.width for size in sizes[:-1])
        self.order = order  # key order -> code
        self.suite = suite
        self.n_expected = np.array([len(b.subtasks) for b in suite.benchmarks])

    def groups(self, codes: IntArray) -> list[tuple[int, IntArray, IntArray]]:
        """Per partition holding some of `codes`: it, their positions, their rows there.

        The positions of a partition are increasing (:func:`rows_by_part`).
        """
        if self.is_even:
            part, local = np.divmod(codes, self.width)
        else:
            part = np.searchsorted(self.starts, codes, side="right") - 1
            local = codes - self.starts[part]
        return [
            (index, positions, local[positions])
            for index, positions in enumerate(rows_by_part(part, len(self.sizes)))
            if positions.size
        ]

    def gathered(
        self, rows: IntArray | None, names: Iterable[str], benchmarks: Sequence[int]
    ) -> dict[str, npt.NDArray[Any]]:
        """Saved arrays at key positions `rows` (None: every variant in key order).

        Returns:
            Per name, its values of `benchmarks` at those variants, benchmark-major
            (shape ``(len(benchmarks), len(rows))``), as the files hold them.
        """
        codes = self.order if rows is None else self.order[rows]
        groups = self.groups(codes)
        most = max(np.dtype(kind).itemsize for kind in _SAVED.values())
        buffer = np.empty(most * self.width, np.uint8)  # a partition's run of one array
        found = {}
        for name in names:
            kind = np.dtype(_SAVED[name])
            values = found[name] = np.empty((len(benchmarks), codes.size), dtype=kind)
            for at, benchmark in enumerate(benchmarks):
                for part, positions, local in groups:
                    run = buffer[: self.sizes[part] * kind.itemsize]
                    self._read_run(part, name, benchmark, run)
                    values[at, positions] = run.view(kind)[local]
        return found

    def _read_run(
        self, part: int, name: str, benchmark: int, run: npt.NDArray[np.uint8]
    ) -> None:
        """Read one benchmark's run of a partition's saved array into `run` (one ``pread``)."""
        path = _saved_path(self.folder.path, part, name)
        with spill_errors(self.folder.where):
            descriptor = os.open(path, os.O_RDONLY)
            try:
                done = os.preadv(descriptor, [run.data], benchmark * run.size)
            finally:
                os.close(descriptor)
            if done != run.size:  # (a spill file cut short under this run)
                msg = (
                    f"{path}: {done} of {run.size} bytes read at {benchmark * run.size}"
                )
                raise OSError(msg)


def _spilled_benchmarks(
    spilled: _Spilled,
    ordered: Variants,
    num_rows: int,
    *,
    resized: tuple[int, list[str]],
) -> TableParts:
    """The benchmark table of a spilled run, a benchmark and a chunk of variants at a time.

    Its parts run benchmark-major, then variant in key order; `num_rows` is its
    (variant, benchmark) cells with a subtask. The whole table (for the Python
    API) is built as a run that does not spill builds it.
    """
    plain = ("model", "revision")  # a part holds each variant once: hardly repeat
    every = range(len(spilled.suite.benchmarks))

    def each() -> Iterator[pa.Table]:
        for index in every:
            release_free_memory()  # the previous benchmark's parts
            # the variants (in key order) the benchmark has a subtask of
            n_present = spilled.gathered(None, ["n_present"], [index])["n_present"]
            present = np.flatnonzero(n_present[0] > 0)
            for start in range(0, present.size, CHUNK_ROWS):
                rows = present[start : start + CHUNK_ROWS]
                columns = spilled.gathered(rows, _SAVED, [index])
                yield benchmark_table(
                    ordered.take(rows),
                    spilled.suite,
                    _benchmark_arrays(columns, spilled.n_expected[[index]]),
                    benchmarks=np.array([index]),
                    plain=plain,
                )

    def build() -> pa.Table:
        columns = spilled.gathered(None, _SAVED, every)
        arrays = _benchmark_arrays(columns, spilled.n_expected)
        return benchmark_table(ordered, spilled.suite, arrays)

    return TableParts(
        schema=BENCHMARK_SCORES,
        num_rows=num_rows,
        parts=each,
        build=build,
        unique_columns=plain,
        resized=resized,
    )


def _benchmark_arrays(
    columns: dict[str, npt.NDArray[Any]], n_expected: IntArray
) -> BenchmarkArrays:
    """Gathered arrays (benchmark-major) as the kernel's benchmark arrays (variant-major views)."""
    return BenchmarkArrays(
        n_expected=n_expected.astype(np.int64),
        **{name: values.T for name, values in columns.items()},
    )


def _spilled_leaderboard(
    spilled: _Spilled,
    ordered: Variants,
    *,
    rank: FloatArray,
    average: FloatArray,
    average_error: FloatArray,
    n_complete: npt.NDArray[np.int8],
    counts: BoardCounts,
) -> TableParts:
    """The leaderboard of a spilled run, :data:`BOARD_CHUNK_ROWS` rows at a time.

    Ranked variants first, best first, then the others, each in key order.
    """
    every = range(len(spilled.suite.benchmarks))

    def each() -> Iterator[pa.Table]:
        board = board_order(rank)  # key positions, in the board's order
        for start in range(0, board.size, BOARD_CHUNK_ROWS):
            if start % CHUNK_ROWS == 0:  # the previous parts' arrays, freed
                release_free_memory()
            rows = board[start : start + BOARD_CHUNK_ROWS]
            values = spilled.gathered(rows, ("normalized", "raw", "stderr"), every)
            yield leaderboard_rows(
                ordered.take(rows),
                spilled.suite,
                n_complete=n_complete[rows].astype(np.int64),
                normalized=values["normalized"],
                raw=values["raw"],
                stderr=values["stderr"],
                rank=rank[rows],
                average=average[rows],
                average_error=average_error[rows],
            )

    return TableParts(
        schema=board_schema(spilled.suite),  # (a spilled run's board has no rates)
        num_rows=len(rank),
        parts=each,
        counts=counts,
    )


def _resized(
    spilled: _Spilled, ordered: Variants, found: list[IntArray]
) -> tuple[int, list[str]]:
    """Variants pooled with other sample sizes (see :func:`lbnorm.engines.result.resized_variants`)."""
    if not found:
        return 0, []
    pairs = np.concatenate(found)  # (code, benchmark)
    position = np.empty_like(spilled.order)
    position[spilled.order] = np.arange(spilled.order.size)
    at = position[pairs[:, 0]]
    table_order = np.lexsort((at, pairs[:, 1]))  # benchmark-major, then key order
    shown = table_order[:RESIZED_ROWS]
    names = arrow.strings(spilled.suite.benchmark_names).take(
        arrow.array(pairs[shown, 1])
    )
    keys = ordered.take(at[shown]).table().append_column("benchmark", names)
    return np.unique(pairs[:, 0]).size, resized_examples(keys)
