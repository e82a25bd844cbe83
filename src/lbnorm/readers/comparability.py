"""Whether results files' scores can be compared: the settings each was run with.

Scores from runs with different few-shot counts, sample limits, task versions or
harness versions are not comparable, and a leaderboard mixes them silently.
lm-evaluation-harness and lighteval results files record those settings; this
module reads them for the tasks each file's scores were taken from (the newest
result rule of :mod:`lbnorm.readers.harness` is unchanged) and, per (benchmark,
subtask, setting), names the variants whose value differs from the majority's.

The settings (:data:`SETTINGS`), each read as text (null when the file does not say):

- ``num_fewshot``: lm-eval ``n-shot[task]`` (else ``configs[task].num_fewshot``,
  which lm-eval copies into ``n-shot``);
  lighteval ``summary_tasks[task].effective_few_shots`` (else the key's ``|k``;
  fewer effective shots than asked for, truncated ones, show as a difference).
- ``n_samples``: the score's sample count, lm-eval ``n-samples[task].effective``
  (else ``original``); a run with ``--limit`` has fewer than the others.
- ``limit``: lm-eval ``config.limit``; lighteval ``config_general.max_samples``.
- ``version``: ``versions[task]``.
- ``task_hash``: lighteval ``summary_tasks[task].hashes.hash_examples`` (a hash
  of the task's examples). lm-eval's ``task_hashes`` are not compared: they hash
  the prompts as rendered for the model (its chat template), so two models'
  hashes differ even on one task (the two real files in the tests share none of
  44).
- ``harness``: lm-eval ``git_hash`` (else ``lm_eval_version``); lighteval
  ``config_general.lighteval_sha`` (``config.lighteval_sha`` in older v1 files).
- ``fewshot_as_multiturn`` and ``system_instruction`` (``system_instruction_sha``):
  how lm-eval put the few-shot examples and a system prompt into the chat.

A setting a file records as null, or does not record at all, is a recorded
setting too (``null``): a file run with ``--limit 100`` differs from files
that record no limit, whichever side the majority is on.

Whether a chat template was applied is one of a variant's keys, so variants are
never compared on it. The settings are read in the results parser's one pass
over each file (:func:`task_settings` on the keys :class:`SettingsKeys`
decodes), kept per score row as a code into the distinct combinations seen
(:class:`RunSettings`; the parse cache stores them with the scores), and
compared per (subtask, setting) with array operations: the check reads no file
again and costs a few array passes over the scores taken.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.arrow import numbers, strings, to_numpy
from lbnorm.core.errors import InputError
from lbnorm.suites import Suite

__all__ = [
    "COMPARABILITY",
    "SETTINGS",
    "Comparability",
    "RawSettings",
    "RunSettings",
    "Settings",
    "SettingsKeys",
    "check_comparability",
    "object_or_empty",
    "settings_text",
    "strict_error",
    "task_settings",
]

#: The settings compared, in the order they are reported.
SETTINGS = (
    "num_fewshot",
    "n_samples",
    "limit",
    "version",
    "task_hash",
    "harness",
    "fewshot_as_multiturn",
    "system_instruction",
)
#: One task's settings as compared, in :data:`SETTINGS` order (None: null, or
#: not recorded).
Settings = tuple[str | None, ...]
#: The same as a file records them (numbers, text, None), before they are text.
RawSettings = tuple[Any, ...]
IntArray = npt.NDArray[np.int64]

#: One row per (variant whose setting differs, benchmark, subtask, setting).
COMPARABILITY = pa.schema(
    [
        pa.field("model", pa.string()),
        pa.field("precision", pa.string()),
        pa.field("revision", pa.string()),
        pa.field("chat_template", pa.bool_()),
        pa.field("benchmark", pa.string()),
        pa.field("subtask", pa.string()),
        pa.field("setting", pa.string()),
        pa.field("value", pa.string()),
        pa.field("majority", pa.string()),
        pa.field("path", pa.string()),
    ]
)
_SHOWN = 5
#: The (benchmark, setting) lines a run's summary shows; the manifest has every one.
_LINES_SHOWN = 3
#: How a setting recorded as null, or not recorded, is written in messages.
_NULL = "null"
#: A variant's four keys: model, precision, revision, chat template.
_Variant = tuple[str, str, str, bool]


class _TaskConfig(msgspec.Struct):
    """A task's ``configs`` entry: its few-shot count; the prompts and samples are skipped."""

    num_fewshot: Any = None


class _TaskSummary(msgspec.Struct):
    """A task's ``summary_tasks`` entry (lighteval)."""

    effective_few_shots: Any = None
    hashes: Any = None


class SettingsKeys(msgspec.Struct):
    """The top-level keys holding run settings; msgspec skips the rest unread.

    The results parser's own keys subclass this, so one decode of a file gives
    its scores and its settings. ``configs``, ``n-shot`` and ``versions`` are
    kept as their bytes (decoded when needed, once for the files that share
    them); a ``summary_tasks`` entry that is not an object fails this typed
    decode, and the parser then reads the scores alone (that file's settings
    read as not recorded).
    """

    configs: msgspec.Raw = msgspec.Raw()  # its bytes: read for a task n-shot lacks
    n_shot: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="n-shot")
    versions: msgspec.Raw = msgspec.Raw()
    summary_tasks: dict[str, _TaskSummary] | None = None
    git_hash: Any = None
    lm_eval_version: Any = None
    fewshot_as_multiturn: Any = None
    system_instruction_sha: Any = None


_decode_configs = msgspec.json.Decoder(dict[str, _TaskConfig | None] | None).decode
_decode_any = msgspec.json.Decoder().decode


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings:
    """The run settings of score rows: per row, a code into the distinct combinations.

    Files of one leaderboard share a handful of combinations, so a row costs
    one integer and the comparison runs on codes.

    Attributes:
        code: Per row, the index of its settings in ``distinct``.
        distinct: The combinations, each in :data:`SETTINGS` order.
        file: Per row, its file's position among the files read (the rows
            taken by the newest-result rule; empty otherwise).
        subtask: Per row, its suite subtask's index (idem).
    """

    code: IntArray
    distinct: tuple[Settings, ...]
    file: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    subtask: IntArray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    @classmethod
    def from_files(cls, per_file: Sequence[list[RawSettings]]) -> RunSettings:
        """Code the rows of each file (a dictionary lookup a row; text per distinct one).

        Rows as :func:`task_settings` gives them, or already text. Files that
        share one list of rows (:func:`task_settings` shares them) are coded
        once. A value that cannot be a dictionary key (an object recorded as a
        version) is made text first.
        """
        index: dict[RawSettings, int] = {}
        coded: dict[int, npt.NDArray[np.int64]] = {}  # by the identity of a list
        parts = []
        for rows in per_file:
            codes = coded.get(id(rows))
            if codes is None:
                try:
                    found = [index.setdefault(row, len(index)) for row in rows]
                except TypeError:  # an unhashable value: rows made text are hashable
                    texts_of = map(settings_text, rows)
                    found = [index.setdefault(row, len(index)) for row in texts_of]
                codes = coded[id(rows)] = np.array(found, dtype=np.int64)
            parts.append(codes)
        code = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        texts: dict[Settings, int] = {}  # 3 and 3.0 are one setting as text
        same = np.array(
            [texts.setdefault(settings_text(row), len(texts)) for row in index],
            dtype=np.int64,
        )
        return cls(code=same[code] if code.size else code, distinct=tuple(texts))

    @classmethod
    def from_columns(cls, columns: Sequence[pa.ChunkedArray | pa.Array]) -> RunSettings:
        """From one string column per setting (:meth:`columns`' inverse)."""
        n = len(columns[0]) if columns else 0
        if not n:
            return cls(code=np.empty(0, dtype=np.int64), distinct=())
        keys = []
        values = []
        for column in columns:
            encoded = pc.dictionary_encode(column, null_encoding="encode")
            if isinstance(encoded, pa.ChunkedArray):
                encoded = encoded.combine_chunks()
            keys.append(to_numpy(encoded.indices).astype(np.int64))
            values.append(encoded.dictionary.to_pylist())
        # each row's rank among the distinct combinations so far, a column at a
        # time: (rank, code) pairs order as np.unique(axis=0) orders the rows
        code = np.zeros(n, dtype=np.int64)
        for key, value in zip(keys, values, strict=True):
            code = np.unique(code * len(value) + key, return_inverse=True)[1]
        first = np.unique(code, return_index=True)[1]  # a row of each, in rank order
        distinct = [
            [value[k] for k in key[first].tolist()]
            for key, value in zip(keys, values, strict=True)
        ]
        return cls(code=code, distinct=tuple(zip(*distinct, strict=True)))

    def columns(self) -> list[pa.Array]:
        """One string column per setting, a value per row (for the parse cache)."""
        at = numbers(self.code, pa.int64())
        return [
            strings([row[j] for row in self.distinct]).take(at)
            for j in range(len(SETTINGS))
        ]

    def take(self, rows: IntArray, *, file: IntArray, subtask: IntArray) -> RunSettings:
        """The rows at `rows`, with each one's file and subtask."""
        return RunSettings(
            code=self.code[rows], distinct=self.distinct, file=file, subtask=subtask
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparability:
    """The settings that differ from the majority, and what each file is told.

    Attributes:
        differences: :data:`COMPARABILITY` rows, by benchmark, subtask, setting.
        notes: Per file of `files` (in order): its differing settings as
            ``{benchmark, subtask, setting, value, majority}`` dicts (a list
            column for the input catalog and the manifest).
        warnings: One line per (benchmark, setting) that differs, for the run summary.
    """

    differences: pa.Table
    notes: pa.Array
    warnings: tuple[str, ...]


def task_settings(
    document: Mapping[str, Any],
    tasks: Sequence[str],
    sizes: Sequence[int | None],
) -> list[RawSettings]:
    """Per task of `tasks`, the run settings a parsed results file records.

    One list comprehension per setting over the tasks (a file's scores name a
    few dozen), the fallbacks only where a count is missing.

    Args:
        document: The file's top-level keys (``configs``, ``n-shot``,
            ``versions``, ``config``, ``config_general``,
            ``summary_tasks``, ``git_hash``, ``lm_eval_version``,
            ``fewshot_as_multiturn``, ``system_instruction_sha``); absent keys
            read as None; ``configs`` an object or its bytes
            (:class:`SettingsKeys`), a ``summary_tasks`` entry an object or a
            Struct.
        tasks: The tasks, one per score row (a task may repeat).
        sizes: Per row, the score's sample count as the parser read it
            (``n-samples[task].effective``, else ``original``).

    Returns:
        Per task, its settings in :data:`SETTINGS` order as the file records
        them (None: null, or not recorded); :func:`settings_text` makes them
        text, once per distinct combination.

    Examples:
        >>> rows = task_settings({"configs": {"t": {"num_fewshot": 3.0}}, "git_hash": "ab1"}, ["t"], [None])
        >>> rows[0][0], rows[0][5]
        (3.0, 'ab1')
    """
    config = object_or_empty(document.get("config"))
    general = object_or_empty(document.get("config_general"))
    if not general and "lighteval_sha" in config:  # v1 files before autumn 2023
        general, config = config, {}
    summary = object_or_empty(document.get("summary_tasks"))
    is_lighteval = "lighteval_sha" in general
    per_file = (
        general.get("max_samples") if is_lighteval else config.get("limit"),
        general.get("lighteval_sha")
        if is_lighteval
        else document.get("git_hash") or document.get("lm_eval_version"),
        document.get("fewshot_as_multiturn"),
        document.get("system_instruction_sha"),
    )
    effective = tuple(sizes)
    n_shot, versions = document.get("n-shot"), document.get("versions")
    if (
        not summary
        and isinstance(n_shot, msgspec.Raw)
        and isinstance(versions, msgspec.Raw)
    ):
        # a leaderboard's files share these: their rows are made once
        with contextlib.suppress(TypeError):  # (an object as a file's setting)
            rows = _shared_rows(
                bytes(n_shot), bytes(versions), tuple(tasks), effective, per_file
            )
            if rows is not None:
                return rows
    return _rows(
        tasks,
        object_or_empty(_json(n_shot)),
        object_or_empty(_json(versions)),
        effective,
        per_file,
        document.get("configs"),
        summary,
    )


@functools.lru_cache(maxsize=64)
def _shared_rows(
    n_shot: bytes,
    versions: bytes,
    tasks: tuple[str, ...],
    effective: tuple[Any, ...],
    per_file: tuple[Any, ...],
) -> list[RawSettings] | None:
    """The rows of files recording the same counts and versions (None: a count is missing)."""
    shots = object_or_empty(_json(msgspec.Raw(n_shot)))
    if any(shots.get(task) is None for task in tasks):  # configs decide: not shared
        return None
    return _rows(
        tasks, shots, object_or_empty(_json(msgspec.Raw(versions))), effective, per_file
    )


def _rows(
    tasks: Sequence[str],
    n_shot: dict[str, Any],
    versions: dict[str, Any],
    effective: Sequence[Any],
    per_file: tuple[Any, ...],
    configs: object = None,
    summary: dict[str, Any] | None = None,
) -> list[RawSettings]:
    """Each task's settings, in :data:`SETTINGS` order."""
    shots = [n_shot.get(task) for task in tasks]
    if None in shots:
        _fill_shots(shots, tasks, configs, summary or {})
    limit, harness, multiturn, instruction = per_file
    n = len(tasks)
    return list(
        zip(
            shots,
            effective,
            itertools.repeat(limit, n),
            [versions.get(task) for task in tasks],
            [_examples_hash(summary.get(task)) for task in tasks]
            if summary
            else itertools.repeat(None, n),
            itertools.repeat(harness, n),
            itertools.repeat(multiturn, n),
            itertools.repeat(instruction, n),
            strict=False,
        )
    )


def _json(value: object) -> Any:
    """A key kept as its bytes, decoded (anything else as it is)."""
    if isinstance(value, msgspec.Raw):
        return _decode_any(value) if value else None
    return value


def _fill_shots(
    shots: list[Any], tasks: Sequence[str], recorded: object, summary: dict[str, Any]
) -> None:
    """Counts ``n-shot`` lacks: ``configs``, lighteval's effective shots, the key's ``|k``."""
    configs = _configs(recorded)
    for at, task in enumerate(tasks):  # the tasks without a count only
        if shots[at] is not None:
            continue
        count = _field(configs.get(task), "num_fewshot")
        if count is None:
            count = _field(summary.get(task), "effective_few_shots")
        if count is None and "|" in task:
            count = task.rpartition("|")[2]
        shots[at] = count


def _examples_hash(task_summary: object) -> Any:
    """The ``hashes.hash_examples`` of a task's lighteval summary."""
    return object_or_empty(_field(task_summary, "hashes")).get("hash_examples")


def settings_text(raw: RawSettings) -> Settings:
    """Settings as compared: counts and versions as whole numbers, the rest as JSON text.

    Idempotent: text gives itself (``"3"``), so settings already made text (the
    parse cache's) pass through unchanged.

    Examples:
        >>> settings_text((3.0, 448, None, "1.0", None, "8f1dc26", False, None))
        ('3', '448', None, '1', None, '8f1dc26', 'false', None)
    """
    return tuple(text(value) for text, value in zip(_AS_TEXT, raw, strict=True))


def _configs(recorded: object) -> dict[str, Any]:
    """``configs`` as an object of tasks: from its bytes (each task's entry a Struct)."""
    if isinstance(recorded, msgspec.Raw):
        try:
            decoded = _decode_configs(recorded) if recorded else None
        except msgspec.DecodeError:  # not an object of objects: no counts there
            return {}
        return decoded or {}
    return object_or_empty(recorded)


def _field(entry: object, name: str) -> Any:
    """`entry`'s `name`: an object's key or a Struct's field (None: not there)."""
    if isinstance(entry, dict):
        return entry.get(name)
    if isinstance(entry, msgspec.Struct):
        return getattr(entry, name)
    return None


def check_comparability(
    files: pa.Table, settings: RunSettings, suite: Suite
) -> Comparability:
    """Compare the settings the scores taken were run with.

    Args:
        files: One row per results file: ``path`` and the variant keys, as
            :class:`lbnorm.readers.newest.ResultsRead` gives them.
        settings: Per score taken, its file, subtask and settings
            (:attr:`lbnorm.readers.newest.ResultsRead.settings`).
        suite: The suite (the subtasks' names, in its order).

    Returns:
        The differences, the per-file notes and the warnings.
    """
    differences = _differences(settings, files, suite)
    return Comparability(
        differences=differences,
        notes=_notes(differences, files),
        warnings=_warnings(differences),
    )


def _differences(settings: RunSettings, files: pa.Table, suite: Suite) -> pa.Table:
    """Rows whose value is not the majority's (null, recorded or not, is a value).

    Per setting: the distinct values, sorted (null last), coded; a count per
    (subtask, value) by one bincount; the majority the most frequent value, a
    tie going to the smallest (``argmax`` takes the first).
    """
    named = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
    n_subtasks = len(named)
    subtask = settings.subtask
    found: dict[str, list[Any]] = collections.defaultdict(list)  # a list per column
    for j, setting in enumerate(SETTINGS):  # eight settings, each over every row
        column = [row[j] for row in settings.distinct]
        texts = sorted({v for v in column if v is not None})
        values: list[str | None] = [*texts, *([None] if None in column else [])]
        value_code: dict[str | None, int] = {v: at for at, v in enumerate(values)}
        code = np.array([value_code[v] for v in column], dtype=np.int64)
        code = code[settings.code] if settings.code.size else code[:0]
        m = max(len(values), 1)
        counts = np.bincount(subtask * m + code, minlength=n_subtasks * m).reshape(
            n_subtasks, m
        )
        majority = counts.argmax(axis=1)
        rows = np.flatnonzero(code != majority[subtask])
        found["row"].append(rows)
        found["setting"] += [setting] * rows.size
        found["value"] += [values[v] for v in code[rows].tolist()]
        found["majority"] += [values[v] for v in majority[subtask[rows]].tolist()]
    rows = np.concatenate(found["row"])  # (a part per setting)
    file = numbers(settings.file[rows], pa.int64())
    where = subtask[rows].tolist()
    columns = {
        "benchmark": strings([named[at][0] for at in where]),
        "subtask": strings([named[at][1] for at in where]),
        "setting": strings(found["setting"]),
        "value": strings(found["value"]),
        "majority": strings(found["majority"]),
    }
    table = pa.table(  # the variant keys and the path: the files'
        {
            name: columns[name] if name in columns else files[name].take(file)
            for name in COMPARABILITY.names
        }
    )
    table = table.cast(COMPARABILITY).append_column("_file", file)
    order = ("benchmark", "subtask", "setting", "path")
    return table.sort_by([(name, "ascending") for name in order])


def _notes(differences: pa.Table, files: pa.Table) -> pa.Array:
    """Per file: its differing settings as a list of structs (empty if none).

    Built from the differences' columns (``pa.array`` on Python objects would
    import pandas).
    """
    names = ["benchmark", "subtask", "setting", "value", "majority"]
    file = to_numpy(differences["_file"]).astype(np.int64)
    order = np.argsort(file, kind="stable")  # by file, in the differences' order
    offsets = np.zeros(files.num_rows + 1, dtype=np.int32)
    np.cumsum(np.bincount(file, minlength=files.num_rows), out=offsets[1:])
    at = numbers(order, pa.int64())
    notes = pa.StructArray.from_arrays(
        [differences[name].take(at).combine_chunks() for name in names], names=names
    )
    return pa.ListArray.from_arrays(numbers(offsets, pa.int32()), notes)


def _warnings(differences: pa.Table) -> tuple[str, ...]:
    """One line per (benchmark, setting): the variants that differ, their values, where.

    The count is of variants (the four keys), each named once with its values
    and the subtasks where each differs from that subtask's majority. Every
    setting that differs gets a line before any gets a second (a harness that
    differs on every benchmark does not hide a few-shot count), and past
    three lines one more counts the rest.
    """
    if not differences.num_rows:
        return ()
    groups: dict[tuple[str, str], dict[_Variant, dict[tuple[str, str], list[str]]]] = {}
    for record in differences.to_pylist():  # few; grouped for the message
        variant = (
            record["model"],
            record["precision"],
            record["revision"],
            record["chat_template"],
        )
        by_variant = groups.setdefault((record["benchmark"], record["setting"]), {})
        values = by_variant.setdefault(variant, {})
        pair = (_shown_value(record["value"]), _shown_value(record["majority"]))
        values.setdefault(pair, []).append(record["subtask"])
    ranked = []  # (the setting's lines so far, the line)
    seen: collections.Counter[str] = collections.Counter()
    for (benchmark, setting), by_variant in groups.items():
        shown = "; ".join(
            f"{model}{f' [{precision}]' if precision else ''}: "
            + ", ".join(
                f"{value} (majority {majority}) on {_listed(subtasks)}"
                for (value, majority), subtasks in list(values.items())[:3]
            )
            + (f", and {len(values) - 3} more" if len(values) > 3 else "")
            for (model, precision, _, _), values in list(by_variant.items())[:_SHOWN]
        )
        more = (
            f"; and {len(by_variant) - _SHOWN} more" if len(by_variant) > _SHOWN else ""
        )
        line = (
            f"not comparable: {benchmark} {setting} differs from the majority for "
            f"{len(by_variant)} variant(s): {shown}{more}"
        )
        ranked.append((seen[setting], line))
        seen[setting] += 1
    # each setting's first line before any setting's second (a stable sort)
    lines = [line for _, line in sorted(ranked, key=lambda pair: pair[0])]
    if len(lines) > _LINES_SHOWN:  # a few in the summary (with its other warnings)
        lines[_LINES_SHOWN:] = [
            f"not comparable: and {len(lines) - _LINES_SHOWN} more (benchmark, setting) "
            "pair(s) differ from the majority (the manifest's inputs list each "
            "file's differences; `lbnorm health OUT` checks every subtask)"
        ]
    return tuple(lines)


def _shown_value(value: str | None) -> str:
    """A setting as messages show it: null (recorded so, or not recorded) as ``null``."""
    return _NULL if value is None else value


def _listed(subtasks: list[str]) -> str:
    """``3 subtasks (a, b, c)``, or ``24 subtasks (a, b, c, ...)``."""
    head = ", ".join(subtasks[:3]) + (", ..." if len(subtasks) > 3 else "")
    return f"{len(subtasks)} subtask{'s' if len(subtasks) > 1 else ''} ({head})"


def strict_error(comparability: Comparability) -> InputError:
    """The error ``--strict-comparability`` raises when settings differ."""
    shown = "\n  ".join(comparability.warnings[:_SHOWN])
    differences = comparability.differences
    variants = differences.select(["model", "precision", "revision", "chat_template"])
    n_variants = variants.group_by(variants.column_names).aggregate([]).num_rows
    msg = (
        f"{n_variants} variant(s) were run with settings that differ from the "
        f"majority's ({differences.num_rows} (subtask, setting) values):\n  {shown}\n"
        "Hint: re-run those tasks with the majority's settings, leave their files "
        "out, or drop --strict-comparability to report the difference and go on."
    )
    return InputError(msg)


def object_or_empty(value: object) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one (absent or malformed)."""
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    """A setting as text: None stays None, JSON scalars as JSON writes them."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)  # as json.dumps writes a finite float
    return json.dumps(value, sort_keys=True)


def _number_text(value: object) -> str | None:
    """A count or version as text, ``3.0`` and ``"3"`` both as ``3``."""
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value
        return str(int(number)) if number.is_integer() else value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return _text(value)


#: Per setting of :data:`SETTINGS`, how it is made text: counts and versions as
#: whole numbers (``num_fewshot``, ``n_samples``, ``version``), the rest as JSON.
_AS_TEXT = tuple(
    _number_text if name in ("num_fewshot", "n_samples", "version") else _text
    for name in SETTINGS
)
