"""Several results files of one variant: the newest result per (variant, subtask) wins.

The v1 leaderboard added tasks over time
(Winogrande and GSM8K in autumn 2023, a GSM8K re-run in December 2023), so a
model's newest file often holds one task and ``all``; the leaderboard took each
task from the newest file that has it, and so does lbnorm: per (variant,
suite subtask), the newest run time wins (ties broken by path; a tie between
files holding different values is an error). The catalog lists which tasks each
file gave; a file that gave nothing because newer files gave all its scores is
superseded by the newest of them. Each variant with a superseded file, or with
older files whose scores differ from the newest, gets one re-run record
(:attr:`ResultsRead.reruns`): its files, the superseded ones, and per
(benchmark, older file) the first differing score and how many differ.

:func:`combine_parsed` is that one rule, used on freshly parsed files
(:func:`lbnorm.readers.results_tree.read_results_paths`) and by the parse cache on
remembered ones (:mod:`lbnorm.readers.cache`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.core.arrow import (
    booleans,
    dictionary,
    numbers,
    strings,
    to_numpy,
)
from lbnorm.core.errors import InputError
from lbnorm.core.files import shown
from lbnorm.core.schemas import SCORES, TEXT
from lbnorm.readers.comparability import RunSettings

__all__ = [
    "ParsedFiles",
    "ResultsRead",
    "SubtaskColumns",
    "combine_parsed",
    "result_keys",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedFiles:
    """Parsed results files as columns: one entry per file, then their rows.

    What :func:`combine_parsed` takes: built from :class:`HarnessFile` objects by
    :func:`lbnorm.readers.results_tree.read_results_paths`, or straight from stored columns (the parse cache).

    Attributes:
        path, model, precision, revision, timestamp: Per file, as in
            :class:`HarnessFile`.
        chat_template: Per file.
        n_ignored: Per file: result entries the suite does not use.
        lengths: Per file: its rows.
        subtask_index: Per row: its suite subtask; a file's rows together and in
            suite order, the files in order.
        raw_score: Per row.
        stderr: Per row (float64), null where the file gave none.
        n_samples: Per row (int64), null where the file gave none.
        settings: Per row, the run settings of its task.
        ignored: Per file, the results entries the suite does not use (see
            :attr:`lbnorm.readers.harness.HarnessFile.ignored`), a list column.
    """

    path: list[str]
    model: list[str]
    precision: list[str]
    revision: list[str]
    chat_template: npt.NDArray[np.bool_]
    timestamp: list[str]
    n_ignored: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]
    subtask_index: npt.NDArray[np.int64]
    raw_score: npt.NDArray[np.float64]
    stderr: pa.Array
    n_samples: pa.Array
    settings: RunSettings
    ignored: pa.Array | pa.ChunkedArray


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultsRead:
    """Results files read: the scores taken, what each file gave, and warnings.

    Attributes:
        scores: The :data:`~lbnorm.core.schemas.SCORES` columns plus ``_row`` (the
            results key each score came from), newest per (variant, subtask);
            text as dictionary arrays, as a Parquet input's.
        files: One row per file, in input order: ``path``, the variant keys,
            ``timestamp``, ``rows`` (scores taken from it), ``n_ignored``,
            ``superseded_by`` (null unless newer files gave all its scores),
            ``tasks`` (the tasks taken from it), ``ignored`` (the results
            entries the suite does not use) and, from paths,
            ``sha256`` and ``bytes``.
        warnings: What a summary should say although the run goes on.
        reruns: One record per variant with superseded files or with older
            files whose scores differ from the newest (JSON-ready): ``model``,
            ``precision``, ``revision``, ``chat_template``, ``files`` (its
            results files, oldest first), ``superseded`` (those newer files
            replaced whole) and ``differences``: per (benchmark, older file),
            ``benchmark``, ``subtask`` (the first that differs), ``subtasks``
            (how many differ), ``older``, ``newer`` (files), ``older_score``
            and ``newer_score`` (the values as read).
        settings: Per score row, its file (a row of ``files``), suite subtask
            and run settings: what the comparability check compares.
        rejected: The files the parse cache rejected, each with the variant it
            held (see :func:`lbnorm.readers.input_rejections`); none without
            the cache.
    """

    scores: pa.Table
    files: pa.Table
    warnings: tuple[str, ...] = ()
    reruns: tuple[dict[str, Any], ...] = ()
    settings: RunSettings
    rejected: tuple[dict[str, Any], ...] = ()


#: Per suite subtask: ``benchmark``, ``subtask``, ``task`` and ``metric`` (see
#: :func:`subtask_columns`; a pandas frame of the suite's subtask table also fits).
SubtaskColumns = Mapping[str, Sequence[str]]


@functools.lru_cache(maxsize=8)  # one suite per run: made once, not per file
def result_keys(pairs: tuple[tuple[str, str], ...]) -> list[str]:
    """Per suite subtask, where a results file keeps its score (for messages)."""
    return [f"results[{task!r}][{metric!r}]" for task, metric in pairs]


def combine_parsed(
    files: ParsedFiles,
    pairs: Sequence[tuple[str, str]],
    names: SubtaskColumns,
) -> ResultsRead:
    """The newest result per (variant, subtask), what each file gave, and warnings.

    The one rule for several files of a variant (see the module docstring),
    used on freshly parsed files and by the parse cache on remembered ones.

    Args:
        files: The parsed files, in input order, as columns.
        pairs: The suite's (task, metric) pairs in suite order.
        names: The suite's subtask columns (:func:`subtask_columns`).

    Returns:
        The scores, one row per file, and the warnings (:class:`ResultsRead`).

    Raises:
        InputError: Two files of a variant with the same run time hold
            different values for one subtask.
    """
    n_files = len(files.path)
    lengths = files.lengths
    n_rows = int(lengths.sum())
    owner = np.repeat(np.arange(n_files, dtype=np.int64), lengths)  # each row's file
    index = files.subtask_index
    # each file's variant code and rank by (run time, path): per file, not per row
    variants: dict[tuple[str, str, str, bool], int] = {}
    file_variant = np.array(
        [
            variants.setdefault(key, len(variants))
            for key in zip(
                files.model,
                files.precision,
                files.revision,
                files.chat_template.tolist(),
                strict=True,
            )
        ],
        dtype=np.int64,
    )
    run_times = list(zip(files.timestamp, files.path, strict=True))
    by_time = np.array(
        sorted(range(n_files), key=run_times.__getitem__), dtype=np.int64
    )
    rank = np.empty(n_files, dtype=np.int64)
    rank[by_time] = np.arange(n_files)
    # rows grouped by (variant, subtask), oldest first: the last of a group wins
    order = np.lexsort((rank[owner], index, file_variant[owner]))
    variant_sorted, index_sorted = file_variant[owner][order], index[order]
    is_last = np.ones(n_rows, dtype=bool)
    is_last[:-1] = (variant_sorted[1:] != variant_sorted[:-1]) | (
        index_sorted[1:] != index_sorted[:-1]
    )
    group = np.cumsum(np.r_[True, is_last[:-1]][:n_rows]) - 1  # each sorted row's group
    winner = order[is_last][group]  # each sorted row's group winner (a row)
    _check_ties(files, owner, order, winner)
    taken = np.sort(order[is_last])  # in file order, then suite order
    rows_taken = np.bincount(owner[taken], minlength=n_files)
    replaced = order[order != winner]  # rows a newer file's row replaced
    newest = winner[order != winner]  # (each one's replacement)
    newest_over = np.full(n_files, -1, dtype=np.int64)
    np.maximum.at(newest_over, owner[replaced], rank[owner[newest]])
    is_superseded = (rows_taken == 0) & (lengths > 0)
    superseded_by = np.full(n_files, None, dtype=object)
    superseded_by[is_superseded] = np.array(files.path, dtype=object)[
        by_time[newest_over[is_superseded]]
    ]
    tasks = _tasks_taken(pairs, owner[taken], index[taken], n_files)
    differences = _disagreements(files, names, owner, replaced, newest)
    return ResultsRead(
        scores=_scores(files, names, pairs, owner, taken),
        files=_files_table(files, rows_taken, superseded_by, tasks),
        reruns=_reruns(files, file_variant, rank, is_superseded, differences),
        settings=files.settings.take(taken, file=owner[taken], subtask=index[taken]),
    )


def _files_table(
    files: ParsedFiles,
    rows_taken: npt.NDArray[np.int64],
    superseded_by: npt.NDArray[np.object_],
    tasks: pa.Array,
) -> pa.Table:
    """One row per file: its variant, what it gave, and its ignored entries."""
    return pa.table(
        {
            "path": strings(files.path),
            "model": strings(files.model),
            "precision": strings(files.precision),
            "revision": strings(files.revision),
            "chat_template": booleans(files.chat_template),
            "timestamp": strings(files.timestamp),
            "rows": numbers(rows_taken, pa.int64()),
            "n_ignored": numbers(files.n_ignored, pa.int64()),
            "superseded_by": strings(superseded_by.tolist()),
            "tasks": tasks,
            "ignored": files.ignored,
        }
    )


def _tasks_taken(
    pairs: Sequence[tuple[str, str]],
    owner: npt.NDArray[np.int64],
    index: npt.NDArray[np.int64],
    n_files: int,
) -> pa.Array:
    """Per file, the tasks its taken rows come from, each once, in the order they come.

    `owner` and `index` are the taken rows' files and subtasks, in file order.
    """
    names = list(dict.fromkeys(task for task, _ in pairs))
    code_of = {name: at for at, name in enumerate(names)}
    task = np.array([code_of[task] for task, _ in pairs], dtype=np.int64)[index]
    _, first = np.unique(owner * len(names) + task, return_index=True)
    first.sort()  # each (file, task)'s first row, in row order
    offsets = np.zeros(n_files + 1, dtype=np.int32)
    np.cumsum(np.bincount(owner[first], minlength=n_files), out=offsets[1:])
    values = strings(names).take(numbers(task[first], pa.int64()))
    return pa.ListArray.from_arrays(numbers(offsets, pa.int32()), values)


#: What :func:`_scores` returns: :data:`SCORES` with its text as dictionaries, and ``_row``.
_SCORES_READ = pa.schema(
    [field.with_type(TEXT) if field.type == pa.string() else field for field in SCORES]
).append(pa.field("_row", TEXT))


def _scores(
    files: ParsedFiles,
    names: SubtaskColumns,
    pairs: Sequence[tuple[str, str]],
    owner: npt.NDArray[np.int64],
    taken: npt.NDArray[np.int64],
) -> pa.Table:
    """The taken rows in the :data:`SCORES` contract, plus ``_row``.

    Text comes as dictionary arrays over the few distinct values (one per file
    or per subtask), each dictionary in the order its values first appear in
    the rows, as a Parquet input's dictionaries come: no string is copied per
    row, and the engine encodes keys and writes the subtask table from the
    dictionaries as they are.
    """
    owner_taken, index_taken = owner[taken], files.subtask_index[taken]
    # rows come in file order: the files that gave rows, in order, are the
    # order in which their values first appear
    file_rows = np.bincount(owner_taken, minlength=len(files.path))
    files_used = np.flatnonzero(file_rows)
    at_file = np.repeat(np.arange(files_used.size), file_rows[files_used])
    subtasks_used, first = np.unique(index_taken, return_index=True)
    subtasks_used = subtasks_used[np.argsort(first, kind="stable")]
    at_subtask = np.empty(len(pairs), dtype=np.int64)
    at_subtask[subtasks_used] = np.arange(subtasks_used.size)
    at_subtask = at_subtask[index_taken]
    rows = numbers(taken, pa.int64())
    columns = {
        "model": _first_seen(files.model, files_used, at_file),
        "precision": _first_seen(files.precision, files_used, at_file),
        "revision": _first_seen(files.revision, files_used, at_file),
        "chat_template": booleans(files.chat_template[owner_taken]),
        "benchmark": _first_seen(names["benchmark"], subtasks_used, at_subtask),
        "subtask": _first_seen(names["subtask"], subtasks_used, at_subtask),
        "metric": _first_seen(names["metric"], subtasks_used, at_subtask),
        "raw_score": numbers(files.raw_score[taken], pa.float64()),
        "stderr": files.stderr.take(rows),
        "n_samples": files.n_samples.take(rows),
        "source": _first_seen(files.path, files_used, at_file),
        "_row": _first_seen(result_keys(tuple(pairs)), subtasks_used, at_subtask),
    }
    return pa.Table.from_arrays(list(columns.values()), schema=_SCORES_READ)


def _first_seen(
    values: Sequence[str], used: npt.NDArray[np.int64], at: npt.NDArray[np.int64]
) -> pa.Array:
    """``values[used][at]`` as a dictionary array of the distinct values.

    ``values[used]`` are in the order they are first used by `at`, so the
    dictionary (built by Arrow's hash kernel over those few values) is in the
    order of first appearance in the rows too.
    """
    encoded = strings(list(values)).take(numbers(used, pa.int64())).dictionary_encode()
    codes = to_numpy(encoded.indices).astype(np.int32)[at]
    return dictionary(codes, encoded.dictionary)


def _differs(
    values: npt.NDArray[np.float64],
    left: npt.NDArray[np.int64],
    right: npt.NDArray[np.int64],
) -> npt.NDArray[np.bool_]:
    """Whether rows hold different values (NaN equals NaN: the same text was read)."""
    a, b = values[left], values[right]
    same: npt.NDArray[np.bool_] = (a == b) | (np.isnan(a) & np.isnan(b))
    return ~same


def _check_ties(
    files: ParsedFiles,
    owner: npt.NDArray[np.int64],
    order: npt.NDArray[np.int64],
    winner: npt.NDArray[np.int64],
) -> None:
    """A subtask's newest value must be unambiguous: two files with its run time agree."""
    runner_up = np.flatnonzero(
        (order[:-1] != winner[:-1]) & (order[1:] == winner[1:])
    )  # sorted positions just before a group's winner, in the same group
    first, second = order[runner_up], order[runner_up + 1]
    times = np.array(files.timestamp, dtype=object)
    is_tied = times[owner[first]] == times[owner[second]]
    first, second = first[is_tied], second[is_tied]
    if not first.size:
        return
    held = (
        files.raw_score,
        to_numpy(files.stderr, null=np.nan),
        to_numpy(files.n_samples, null=-1).astype(np.float64),
    )
    conflict = np.logical_or.reduce([_differs(v, first, second) for v in held])
    if not conflict.any():
        return
    at = int(np.flatnonzero(conflict)[0])
    older, newer = int(owner[first[at]]), int(owner[second[at]])
    msg = (
        f"{files.path[older]} and {files.path[newer]}: two results files for the same model "
        f"variant ({shown(files.model[older])}, precision {files.precision[older]!r}, revision "
        f"{files.revision[older]!r}) with the same run time ({files.timestamp[older] or 'none in the file name'}) "
        "hold different scores, so neither is the newest.\n"
        "Hint: remove the wrong file, or keep the results_<timestamp>.json names "
        "so that the newest run wins."
    )
    raise InputError(msg)


def _disagreements(
    files: ParsedFiles,
    names: SubtaskColumns,
    owner: npt.NDArray[np.int64],
    replaced: npt.NDArray[np.int64],
    newest: npt.NDArray[np.int64],
) -> list[tuple[int, dict[str, Any]]]:
    """The scores older files hold otherwise than the newest, grouped.

    `replaced` are the rows newer files' rows replaced, `newest` each one's
    replacement.

    Returns:
        Per (variant, benchmark, older file) with a differing score: the newer
        file's index and the difference (see :attr:`ResultsRead.reruns`).
    """
    index, raw = files.subtask_index, files.raw_score
    differs = _differs(raw, replaced, newest)
    replaced, newest = replaced[differs], newest[differs]
    if not replaced.size:
        return []
    benchmark_names = list(dict.fromkeys(names["benchmark"]))
    benchmark_code = {name: at for at, name in enumerate(benchmark_names)}
    subtask_benchmark = np.array(
        [benchmark_code[name] for name in names["benchmark"]], dtype=np.int64
    )
    key = np.stack([owner[newest], subtask_benchmark[index[replaced]], owner[replaced]])
    groups, first, counts = np.unique(
        key, axis=1, return_index=True, return_counts=True
    )
    found = []
    for (_, benchmark, _), at, count in zip(groups.T, first, counts, strict=True):
        old, new = replaced[at], newest[at]  # (a difference per benchmark and file)
        older, newer = int(owner[old]), int(owner[new])
        found.append(
            (
                newer,
                {
                    "benchmark": benchmark_names[benchmark],
                    "subtask": names["subtask"][index[old]],
                    "subtasks": int(count),
                    "older": files.path[older],
                    "newer": files.path[newer],
                    "older_score": float(raw[old]),
                    "newer_score": float(raw[new]),
                },
            )
        )
    return found


def _reruns(
    files: ParsedFiles,
    file_variant: npt.NDArray[np.int64],
    rank: npt.NDArray[np.int64],
    is_superseded: npt.NDArray[np.bool_],
    differences: list[tuple[int, dict[str, Any]]],
) -> tuple[dict[str, Any], ...]:
    """One record per variant with a superseded file or a differing older score."""
    by_variant: dict[int, list[dict[str, Any]]] = {}
    for newer, difference in differences:  # differing (benchmark, file) pairs only
        by_variant.setdefault(int(file_variant[newer]), []).append(difference)
    involved = np.zeros(int(file_variant.max(initial=-1)) + 1, dtype=bool)
    involved[file_variant[is_superseded]] = True
    involved[list(by_variant)] = True
    if not involved.any():
        return ()
    # the involved variants' files, grouped by variant, oldest first
    mine = np.flatnonzero(involved[file_variant])
    mine = mine[np.lexsort((rank[mine], file_variant[mine]))]
    starts = np.flatnonzero(np.r_[True, np.diff(file_variant[mine]) != 0])
    records = []
    for group in np.split(mine, starts[1:]):  # re-run variants: a few per night
        at = group.tolist()
        first = at[0]
        records.append(
            {
                "model": files.model[first],
                "precision": files.precision[first],
                "revision": files.revision[first],
                "chat_template": bool(files.chat_template[first]),
                "files": [files.path[i] for i in at],
                "superseded": [files.path[i] for i in at if is_superseded[i]],
                "differences": by_variant.get(int(file_variant[first]), []),
            }
        )
    return tuple(records)
