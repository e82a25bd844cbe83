"""AlpacaEval's results layout, read as per-sample values.

AlpacaEval (``tatsu-lab/alpaca_eval``) keeps, per model, the outputs it was given
and each annotator's judgements of them against the baseline's::

    results/<model>/model_outputs.json                 [{"instruction", "output", "generator", ...}]
    results/<model>/<annotator>/annotations.json       [{"instruction", "output_1", "generator_1",
                                                         "output_2", "generator_2", "preference", ...}]

A directory holding ``model_outputs.json`` files is read as that layout
(:func:`find_layout`): a folder with a ``model_outputs.json`` is a model, named
by the folder (as the board names its rows: ``NullModel``'s files call their
generator ``example``); its ``<annotator>/annotations.json`` are its judgements.
Every other file, a deeper ``annotations.json`` copy included, is skipped and
listed with the reason.

Each file becomes sample rows (:data:`lbnorm.core.schemas.SAMPLES`), one per
entry (``doc_id`` its position), aggregated as any sample table is
(:mod:`lbnorm.readers.samples`, with the suite's per-instance rules):

- an ``annotations.json`` gives the task ``<annotator>``, metric ``preference``:
  the entry's ``preference`` (AlpacaEval's scale: 1 the baseline
  ``generator_1`` wins, 2 the model ``generator_2`` wins; null is NaN, kept only
  where the suite drops non-finite values). Every entry needs ``instruction``,
  ``generator_2`` and ``preference``; one file holds one ``generator_2``.
- a ``model_outputs.json`` gives the task ``model_outputs``, metric ``length``:
  ``len(output)`` in characters (code points, as Python's ``len``), a null
  output 0. Every entry needs ``instruction`` and ``output``.

A file of a task the suite does not read is counted (``n_ignored`` 1), not
parsed. JSON is parsed by msgspec (only these fields; a file it refuses, with
``NaN`` or a lone surrogate escape, goes to :mod:`json`); a malformed file is an
error naming the file and the entry (``$[3].preference``).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator, Sequence
from operator import attrgetter, length_hint
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

from lbnorm._runtime import check_cancelled
from lbnorm.core.arrow import numbers, strings
from lbnorm.core.errors import InputError
from lbnorm.core.files import read_bytes
from lbnorm.readers.instances import InstanceRules
from lbnorm.readers.samples import SubtaskColumns, aggregate_sample_batches
from lbnorm.readers.table_file import check_utf8

__all__ = [
    "ANNOTATIONS_FILE",
    "LENGTH_METRIC",
    "OUTPUTS_FILE",
    "OUTPUTS_TASK",
    "PREFERENCE_METRIC",
    "find_layout",
    "read_alpacaeval",
]

#: A model's outputs, in its folder.
OUTPUTS_FILE = "model_outputs.json"
#: An annotator's judgements of a model's outputs, in ``<model>/<annotator>/``.
ANNOTATIONS_FILE = "annotations.json"
#: The task and metric a suite reads output lengths from.
OUTPUTS_TASK = "model_outputs"
LENGTH_METRIC = "length"
#: The metric a suite reads an annotator's preferences from (the task: the annotator).
PREFERENCE_METRIC = "preference"
_SKIPPED = (
    "not part of AlpacaEval's results layout (<model>/model_outputs.json and "
    "<model>/<annotator>/annotations.json)"
)
_HINT_ANNOTATIONS = (
    "Hint: an annotations.json is a JSON array of objects, each with instruction, "
    "generator_2 and preference (a number from 1 to 2, or null), as AlpacaEval writes it."
)
_HINT_OUTPUTS = (
    "Hint: a model_outputs.json is a JSON array of objects, each with instruction "
    "and output (a string, or null), as AlpacaEval reads it."
)


class _Annotation(msgspec.Struct):
    """The fields of an annotation read (the rest is skipped unparsed)."""

    instruction: str
    generator_2: str
    preference: float | None


class _Output(msgspec.Struct):
    """The fields of a model output read."""

    instruction: str
    output: str | None


def find_layout(
    files: Sequence[Path],
) -> tuple[list[Path], list[tuple[Path, str]]] | None:
    """The AlpacaEval inputs among a directory's files, and the files skipped (with why).

    Args:
        files: Every regular file under the directory.

    Returns:
        None when no file is a ``model_outputs.json`` or ``annotations.json``;
        else the model folders' ``model_outputs.json`` and their
        ``<annotator>/annotations.json``, in path order, and every other file.

    Raises:
        InputError: ``annotations.json`` files but no ``model_outputs.json``,
            so no folder is a model's.
    """
    outputs = [path for path in files if path.name == OUTPUTS_FILE]
    annotations = [path for path in files if path.name == ANNOTATIONS_FILE]
    if not outputs and not annotations:
        return None
    models = {path.parent for path in outputs}
    if not models:
        shown = ", ".join(str(path) for path in annotations[:3])
        msg = f"{shown}: annotations.json file(s) but no model_outputs.json in the directory, so no folder is a model's.\nHint: AlpacaEval's layout is results/<model>/model_outputs.json with results/<model>/<annotator>/annotations.json; give the results folder whole."
        raise InputError(msg)
    inputs = outputs + [path for path in annotations if path.parent.parent in models]
    chosen = set(inputs)
    skipped = [(path, _SKIPPED) for path in files if path not in chosen]
    return sorted(inputs), skipped


def read_alpacaeval(
    paths: Sequence[Path],
    subtasks: SubtaskColumns,
    *,
    rules: InstanceRules | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Aggregate AlpacaEval files into the suite's subtask values.

    Args:
        paths: ``model_outputs.json`` and ``annotations.json`` files of the layout
            (:func:`find_layout`).
        subtasks: The suite's subtasks as columns (``benchmark``, ``subtask``,
            ``task``, ``metric``).
        rules: The suite's per-instance rules.

    Returns:
        The scores (as :func:`lbnorm.readers.samples.read_samples` gives them)
        and a row per file: ``path``, ``sha256``, ``bytes``, ``rows``,
        ``n_ignored`` (1 for a file the suite does not read; else the entries
        dropped as non-finite).

    Raises:
        InputError: A malformed file (named with the entry), two files for one
            model and task, or a null preference the suite does not drop.
    """
    used = set(zip(subtasks["task"], subtasks["metric"], strict=True))
    files = [(path, *_task_of(path)) for path in paths]
    _check_unique(files)
    details: dict[str, tuple[str, int, int]] = {}  # path -> sha256, bytes, n_ignored

    def batches() -> Iterator[tuple[pa.RecordBatch, str]]:
        for path, model, task, metric in files:  # one file, not one entry, a step
            check_cancelled()  # a cancelled run stops between two files
            if (task, metric) not in used:
                details[str(path)] = ("", path.stat().st_size, 1)
                continue
            data = read_bytes(path)
            values = _values(path, data, metric)
            not_finite = ~np.isfinite(values)
            dropped = int(not_finite.sum())
            if dropped and (rules is None or not rules.drops_non_finite(task, metric)):
                at = np.flatnonzero(not_finite)[:5].tolist()
                msg = f'{path}: preference is null or not finite in entries {at} ($[{at[0]}]), and the suite keeps every instance.\nHint: fix the annotations, or drop failed ones in the suite with non_finite = "drop" on the subtask.'
                raise InputError(msg)
            details[str(path)] = (hashlib.sha256(data).hexdigest(), len(data), dropped)
            yield _batch(model, task, metric, values), str(path)

    scores, rows = aggregate_sample_batches(batches(), subtasks, rules=rules)
    names = [str(path) for path, *_ in files]
    catalog = pa.table(
        {
            "path": strings(names),
            "sha256": strings([details[name][0] for name in names]),
            "bytes": numbers(np.array([details[n][1] for n in names]), pa.int64()),
            "rows": numbers(np.array([rows.get(n, 0) for n in names]), pa.int64()),
            "n_ignored": numbers(np.array([details[n][2] for n in names]), pa.int64()),
        }
    )
    return scores, catalog


def _task_of(path: Path) -> tuple[str, str, str]:
    """A file's model, task and metric, from where it sits."""
    if path.name == OUTPUTS_FILE:
        return path.parent.name, OUTPUTS_TASK, LENGTH_METRIC
    return path.parent.parent.name, path.parent.name, PREFERENCE_METRIC


def _check_unique(files: Sequence[tuple[Path, str, str, str]]) -> None:
    """One file per (model, task): two would add up one model's instances twice."""
    seen: dict[tuple[str, str], Path] = {}
    for path, model, task, _ in files:
        if (model, task) in seen:
            msg = f"{path}: model {model!r} task {task!r} is also given by {seen[model, task]}.\nHint: give each model's results folder once (two folders of one name in different directories are one model)."
            raise InputError(msg)
        seen[model, task] = path


def _values(
    path: Path, data: bytes, metric: str
) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Each entry's value: its preference (NaN for null) or its output's length."""
    if metric == PREFERENCE_METRIC:
        annotations = _decode(path, data, list[_Annotation], _HINT_ANNOTATIONS)
        generators = set(map(attrgetter("generator_2"), annotations))
        if len(generators) > 1:
            first = annotations[0].generator_2
            at = next(i for i, a in enumerate(annotations) if a.generator_2 != first)
            msg = f"{path}: $[{at}].generator_2 is {annotations[at].generator_2!r}, but $[0]'s is {first!r}: one annotations.json judges one model.\nHint: keep each model's annotations in its own results/<model>/<annotator>/ folder."
            raise InputError(msg)
        preference = list(map(attrgetter("preference"), annotations))
        return np.array(preference, dtype=np.float64)  # None -> NaN
    outputs = _decode(path, data, list[_Output], _HINT_OUTPUTS)
    texts = map(attrgetter("output"), outputs)  # length_hint(None) is 0
    return np.fromiter(map(length_hint, texts), dtype=np.float64, count=len(outputs))


def _decode(path: Path, data: bytes, shape: Any, hint: str) -> Any:
    """The file's entries, or an :class:`InputError` naming the file and the entry."""
    if not data.strip():
        msg = f"{path}: the file is empty.\n{hint}"
        raise InputError(msg)
    try:
        return _decoder(shape).decode(data)
    except msgspec.ValidationError as exc:
        msg = f"{path}: {exc}.\n{hint}"
        raise InputError(msg) from exc
    except (msgspec.DecodeError, UnicodeDecodeError):
        pass  # NaN, a lone surrogate, not UTF-8 or broken JSON: json decides and words it
    check_utf8(path, data)
    try:
        document = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, RecursionError) as exc:
        msg = f"{path}: not valid JSON: {exc}.\n{hint}"
        raise InputError(msg) from exc
    try:
        return msgspec.convert(document, shape)
    except msgspec.ValidationError as exc:
        msg = f"{path}: {exc}.\n{hint}"
        raise InputError(msg) from exc


@functools.cache
def _decoder(shape: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(shape)


def _batch(
    model: str, task: str, metric: str, values: np.ndarray[Any, np.dtype[np.float64]]
) -> pa.RecordBatch:
    """One file's sample rows: a value per entry, ``doc_id`` its position."""
    rows = values.size
    one = numbers(np.zeros(rows, dtype=np.int32), pa.int32())

    def text(value: str) -> pa.Array:
        return pa.DictionaryArray.from_arrays(one, strings([value]))

    return pa.RecordBatch.from_arrays(
        [
            text(model),
            text(task),
            text(metric),
            numbers(np.arange(rows, dtype=np.int64), pa.int64()),
            numbers(values, pa.float64()),
        ],
        names=["model", "task", "metric", "doc_id", "value"],
    )
