"""Results files parsed one at a time: lm-evaluation-harness, v1 and lighteval.

A leaderboard keeps one file per run, ``<org>/<model>/results_<ISO timestamp>.json``.
Three layouts are read, all the same way:

- **lm-evaluation-harness 0.4** (the v2 leaderboard): ``results[task][metric]``
  with metrics such as ``acc_norm,none``, the model in ``model_name`` and
  ``config`` (``model_args``, ``model_dtype``, ``model_sha``...).
- **Open LLM Leaderboard v1** (lighteval running the harness tasks):
  ``results["harness|<task>|<shots>"]`` plus an ``all`` entry, ``versions``,
  ``config_tasks``, ``summary_tasks``, ``summary_general``, and the model in
  ``config_general`` (``model_name``, ``model_sha``, ``model_dtype``); files
  from before autumn 2023 call that object ``config``.
- **lighteval**: the same layout, keyed ``<suite>|<task>|<shots>`` (``versions``
  may be empty, ``job_id`` is a string); newer versions also keep the name in
  ``config_general.model_config.model_name``.

For each file this reader takes the suite's ``results[task][metric]`` values
(never ``groups``, which can hold stale values after a re-scoring), their
``*_stderr`` (``"N/A"`` becomes null) and ``n-samples``, and the model variant:
name from ``model_name`` / ``config_general.model_name`` / ``config.model_name``
/ ``model_args`` ``pretrained=`` / the path; precision from ``model_dtype`` (in
``config`` or ``config_general``) or ``dtype=``; revision from ``model_sha`` /
``model_revision`` / ``revision=``; chat template applied when ``chat_template``
is not null (or lighteval's ``use_chat_template`` is true). Tasks the suite does
not use are counted, not read.

**Several files of one variant.** The newest result per (variant, subtask) wins;
:mod:`lbnorm.readers.newest` holds that rule (and the tables it gives).

A tree of files is read on every core by :mod:`lbnorm.readers.results_tree`,
which calls :func:`parse_results_file` on each.

JSON parser: msgspec, decoding only the keys read here (``results``, ``config``,
``n-samples``, ``model_name``, ``chat_template``, ``date``) into a Struct and
skipping the rest (``configs``, with its prompts and few-shot samples, is 70% of
a leaderboard file) without building Python objects for it. msgspec does not
check the UTF-8 of what it skips, so a file that is not pure ASCII is decoded as
UTF-8 first. A file msgspec refuses (NaN, Infinity, lone surrogate escapes,
integers beyond 64 bits where a score is read) goes to ``json``, which decides
and words the error. One difference remains by design: an integer of more than
4,300 digits in a part never read is skipped, where ``json`` refuses it.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import json
import math
import re
from collections.abc import (
    Sequence,
)
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from lbnorm.core.errors import InputError
from lbnorm.core.files import shown
from lbnorm.readers.comparability import SettingsKeys, object_or_empty, task_settings
from lbnorm.readers.newest import result_keys
from lbnorm.readers.table_file import check_utf8
from lbnorm.suites import Suite

__all__ = [
    "HarnessFile",
    "Variant",
    "parse_results_file",
    "subtask_columns",
    "variant_folder",
    "variant_in_file",
]


_TIMESTAMP = re.compile(
    r"results_(\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)"
)


#: The top-level keys :func:`parse_results_file` reads for the scores (under
#: their names in the file); the rest of a file is skipped unread.
_SCORE_KEYS: list[tuple[str, Any, Any]] = [
    ("results", Any, None),
    ("config", Any, None),
    ("config_general", Any, None),
    ("n_samples", Any, msgspec.field(default=None, name="n-samples")),
    ("model_name", Any, None),
    ("chat_template", Any, None),
    ("date", Any, None),
]
#: The score keys and the run settings (the comparability check's), in one pass.
_decode_read_keys = msgspec.json.Decoder(
    msgspec.defstruct("_ReadKeys", _SCORE_KEYS, bases=(SettingsKeys,))
).decode
#: The score keys alone: for a file whose setting keys have shapes the
#: settings' types refuse (its settings then read as not recorded).
_decode_score_keys = msgspec.json.Decoder(
    msgspec.defstruct("_ScoreKeys", _SCORE_KEYS)
).decode
#: The results parser's own version: bumped whenever a results file may parse
#: differently (the parse cache, :mod:`lbnorm.readers.cache`, is keyed on it and
#: on this module's source, so a change that forgets the bump is seen too).
PARSER_VERSION = 1

_ABSENT = object()  # a key a results entry does not have

#: A model variant as a results file names it: model, precision, revision, chat template.
Variant = tuple[str, str, str, bool]
_MAX_INT64 = 2**63 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessFile:
    """One parsed results file: its variant, run time and the suite's scores.

    Attributes:
        path: The file.
        model, precision, revision, chat_template: The model variant.
        timestamp: Run time (UTC ISO string) used to pick the newest file.
        rows: Columns of the file's scores (``subtask_index``, ``raw_score``,
            ``stderr``, ``n_samples``, and ``settings``: the run
            settings of the row's task,
            :func:`lbnorm.readers.comparability.task_settings`), one entry per
            suite subtask found.
        n_ignored: Result entries the suite does not use.
        ignored: Those entries, in the file's order: the task, and for a task
            the suite reads with another metric, the metrics the file holds
            (``"anli:r1|0 (holds em, em_stderr; the suite reads acc)"``).
    """

    path: str
    model: str
    precision: str
    revision: str
    chat_template: bool
    timestamp: str
    rows: dict[str, list[Any]]
    n_ignored: int
    ignored: tuple[str, ...] = ()


def subtask_columns(suite: Suite) -> dict[str, list[str]]:
    """The suite's subtasks as columns, in suite order: what the results readers need.

    Examples:
        >>> from lbnorm.suites import load_suite
        >>> columns = subtask_columns(load_suite("openllm-v1"))
        >>> columns["task"][-1], columns["metric"][-1], columns["benchmark"][-1]
        ('harness|gsm8k|5', 'acc', 'GSM8K')
    """
    subtasks = [(b, s) for b in suite.benchmarks for s in b.subtasks]
    return {
        "benchmark": [b.name for b, _ in subtasks],
        "subtask": [s.name for _, s in subtasks],
        "task": [s.task for _, s in subtasks],
        "metric": [s.metric for _, s in subtasks],
    }


def parse_results_file(
    path: Path, data: bytes, pairs: Sequence[tuple[str, str]]
) -> HarnessFile:
    """Parse one results file's bytes, extracting the suite's (task, metric) pairs.

    Args:
        path: The file (for messages and the path-derived model name).
        data: Its bytes.
        pairs: The suite's (task, metric) pairs, in suite order.

    Returns:
        The parsed file.

    Raises:
        InputError: Not JSON, no ``results`` object, a score that is not a
            number, or no model name anywhere.
    """
    document = _decode(path, data)
    if not isinstance(document, dict):
        msg = f"{path}: expected a JSON object at the top level, got {type(document).__name__}.\nHint: is this an lm-evaluation-harness results file?"
        raise InputError(msg)
    results = document.get("results")
    if not isinstance(results, dict):
        msg = (
            f"{path}: 'results' is {'missing' if results is None else 'not an object'}.\n"
            "Hint: lbnorm reads lm-evaluation-harness results files, whose scores are under 'results'."
        )
        raise InputError(msg)
    named, precision, revision, is_chat = _variant_fields(document)
    # else the leaderboard layout's folders, <org>/<model>/results_<timestamp>.json
    model = named or (_folders(path) if _TIMESTAMP.match(path.name) else "")
    if not model:
        msg = f'{path}: no model name (model_name, config_general.model_name, config.model_name, model_args pretrained=) and the path is not <org>/<model>/results_*.json.\nHint: add "model_name" to the file or use the leaderboard layout.'
        raise InputError(msg)
    counts = object_or_empty(document.get("n-samples"))
    rows, row_tasks = _score_rows(path, results, counts, pairs)
    # its run settings
    rows["settings"] = task_settings(document, row_tasks, rows["n_samples"])
    names = {"model name": model, "precision": precision, "revision": revision}
    # a lone surrogate (a JSON escape, or a non-UTF-8 folder name) is refused
    for what, text in names.items():
        if not _is_unicode(text):
            msg = f"{path}: the {what} {shown(text)} is not valid Unicode.\nHint: fix the name in the file (or its directory name, if the name comes from the path)."
            raise InputError(msg)
    ignored = _ignored_entries(results, set(row_tasks), tuple(pairs))
    return HarnessFile(
        path=str(path),
        model=model,
        precision=precision,
        revision=revision,
        chat_template=is_chat,
        timestamp=_timestamp(path, document.get("date")),
        rows=rows,
        n_ignored=len(ignored),
        ignored=ignored,
    )


def _score_rows(
    path: Path,
    results: dict[str, Any],
    counts: dict[str, Any],
    pairs: Sequence[tuple[str, str]],
) -> tuple[dict[str, list[Any]], list[str]]:
    """The suite's scores in a file's ``results``, and each row's task.

    Columns ``subtask_index``, ``raw_score``, ``stderr``, ``n_samples`` (from
    the file's ``n-samples``), one entry per suite subtask found.
    """
    indices: list[int] = []
    raws: list[float] = []
    stderrs: list[float | None] = []
    sizes: list[int | None] = []
    row_tasks: list[str] = []
    for index, task, metric, error_metric, key, error_key in _subtask_plan(
        tuple(pairs)
    ):
        entry = results.get(task)  # the suite's subtasks, not rows
        if entry is None:
            continue
        if not isinstance(entry, dict):
            msg = f"{path}: results[{task!r}] is {shown(entry)}, not an object.\nHint: each results entry maps metric names to numbers; fix or re-run this task."
            raise InputError(msg)
        value = entry.get(metric, _ABSENT)
        if value is _ABSENT:
            continue
        if type(value) is not float:  # a float is taken as it is (nearly all)
            if isinstance(value, bool) or not isinstance(value, int | float):
                msg = f"{path}: {key} is {shown(value)}, not a number.\nHint: fix or re-run this task; scores must be JSON numbers."
                raise InputError(msg)
            value = _float(path, key, value)
        error = entry.get(error_metric)
        indices.append(index)
        raws.append(value)
        stderrs.append(
            error if type(error) is float else _stderr(path, error_key, error)
        )
        sizes.append(_n_samples(counts.get(task)))
        row_tasks.append(task)
    rows: dict[str, list[Any]] = {
        "subtask_index": indices,
        "raw_score": raws,
        "stderr": stderrs,
        "n_samples": sizes,
    }
    return rows, row_tasks


def _variant_fields(document: dict[str, Any]) -> Variant:
    """The variant a results document names.

    Its model ('' if the file names none), precision, revision and whether a
    chat template was applied.
    """
    config = object_or_empty(document.get("config"))
    general = object_or_empty(
        document.get("config_general")
    )  # v1 leaderboard, lighteval
    args = _parse_model_args(config.get("model_args"))
    model = _first_text(
        document.get("model_name"),
        general.get("model_name"),
        object_or_empty(general.get("model_config")).get("model_name"),
        config.get("model_name"),
        args.get("pretrained"),
    )
    precision = _first_text(
        config.get("model_dtype"), general.get("model_dtype"), args.get("dtype")
    ).removeprefix("torch.")
    revision = _first_text(
        config.get("model_sha"),
        config.get("model_revision"),
        general.get("model_sha"),
        general.get("model_revision"),
        args.get("revision"),
    )
    is_chat = document.get("chat_template") is not None or True in (
        general.get("use_chat_template"),
        object_or_empty(general.get("model_config")).get("use_chat_template"),
    )
    return model, precision, revision, is_chat


def variant_in_file(path: Path, data: bytes) -> Variant | None:
    """The variant a results file that failed to parse names in its own config.

    A file rejected for a bad score, or for a ``results`` object that is
    missing, still says which variant it was a run of; a file that is not
    JSON at all (truncated, empty) does not.

    Args:
        path: The file (for the decoder's messages, which are dropped).
        data: Its bytes.

    Returns:
        ``(model, precision, revision, chat_template)`` as the parser would
        read them, or None when the file names no model (or not as valid
        Unicode) or cannot be decoded.

    Examples:
        >>> variant_in_file(Path("r.json"), b'{"model_name": "o/m", "results": 1}')
        ('o/m', '', '', False)
        >>> variant_in_file(Path("r.json"), b'{"results": {') is None
        True
    """
    try:
        document = _decode(path, data)
    except InputError:
        return None
    if not isinstance(document, dict):
        return None
    variant = _variant_fields(document)
    if not variant[0] or not all(_is_unicode(text) for text in variant[:3]):
        return None
    return variant


def variant_folder(path: Path) -> str:
    """The ``<org>/<model>`` a results file's folders name ('' if it has no two).

    What names a rejected file's variant when neither the file nor an earlier
    parse of it does: the leaderboard keeps each model's runs in
    ``<org>/<model>/``.

    Examples:
        >>> variant_folder(Path("tree/01-ai/Yi-34B-Chat/results_2024.json"))
        '01-ai/Yi-34B-Chat'
        >>> variant_folder(Path("r.json"))
        ''
    """
    model = _folders(path)
    return model if _is_unicode(model) else ""


def _folders(path: Path) -> str:
    """The ``<org>/<model>`` of a file's two folders ('' if it has no two)."""
    parent = path.parent
    return f"{parent.parent.name}/{parent.name}" if parent.parent.name else ""


def _is_unicode(text: str) -> bool:
    """Whether `text` is valid Unicode (no lone surrogates: it encodes as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _ignored_entries(
    results: dict[str, Any], used: set[str], pairs: tuple[tuple[str, str], ...]
) -> tuple[str, ...]:
    """The results entries no suite subtask takes, as messages name them.

    A task the suite reads with another metric says which metrics the file
    holds, so a suite's ``metric`` can be set from the message.

    Examples:
        >>> _ignored_entries({"a|x|0": {"em": 1, "em_stderr": 0}, "all": {}}, set(),
        ...     (("a|x|0", "acc"),))
        ('a|x|0 (holds em, em_stderr; the suite reads acc)', 'all')
    """
    wanted = _metrics_of(pairs)
    found = []
    for task in results:  # a file's entries: a few dozen, once per file
        if task in used:
            continue
        text = _bounded(str(task))
        if task in wanted and isinstance(results[task], dict):
            metrics = [_bounded(str(metric)) for metric in list(results[task])[:8]]
            more = ", ..." if len(results[task]) > len(metrics) else ""
            held = ", ".join(metrics) + more if metrics else "no metric"
            text = f"{text} (holds {held}; the suite reads {wanted[task]})"
        found.append(text)
    return tuple(found)


def _bounded(text: str, limit: int = 80) -> str:
    """`text`, cut to `limit` characters for messages (a key may be megabytes)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


@functools.lru_cache(maxsize=8)  # one suite per run: made once, not per file
def _metrics_of(pairs: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Per suite task, the metric(s) it is read with."""
    metrics: dict[str, list[str]] = {}
    for task, metric in pairs:
        metrics.setdefault(task, []).append(metric)
    return {task: " or ".join(dict.fromkeys(names)) for task, names in metrics.items()}


@functools.lru_cache(maxsize=8)  # one suite per run: made once, not per file
def _subtask_plan(
    pairs: tuple[tuple[str, str], ...],
) -> tuple[tuple[int, str, str, str, str, str], ...]:
    """Per suite subtask: index, task, metric, its standard error's metric, and both keys."""
    keys = result_keys(pairs)
    return tuple(
        (index, task, metric, error, keys[index], f"results[{task!r}][{error!r}]")
        for index, (task, metric) in enumerate(pairs)
        for error in [_stderr_key(metric)]
    )


def _decode(path: Path, data: bytes) -> Any:
    """Parse a results file's bytes; the message says what is wrong and where."""
    data = data.removeprefix(codecs.BOM_UTF8)  # Windows editors add one; harmless
    if not data.strip():
        msg = f"{path}: the file is empty.\nHint: the run may have crashed before writing it; re-run it or remove the file."
        raise InputError(msg)
    check_utf8(path, data)  # (msgspec does not check the parts it skips)
    found: Any = None
    with contextlib.suppress(msgspec.DecodeError, RecursionError):
        try:
            found = _decode_read_keys(data)
        except msgspec.ValidationError:  # odd setting keys: scores only
            found = _decode_score_keys(data)
    if found is not None:  # the keys under their names in the file
        # (absent and null alike as None, as from dict.get; ``configs``,
        # ``n-shot`` and ``versions`` as their bytes: no copy per task)
        names = found.__struct_encode_fields__
        return dict(zip(names, msgspec.structs.astuple(found), strict=True))
    try:  # json decides and words the error: NaN / Infinity (Python's json.dump writes them)
        return json.loads(data.decode("utf-8"))
    except json.JSONDecodeError as exc:
        msg = f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).\nHint: the file may be truncated or hand-edited; re-download or re-run it."
        raise InputError(msg) from exc
    except (ValueError, RecursionError) as exc:  # deep nesting, 5,000-digit numbers
        msg = f"{path}: cannot read the JSON: {exc}.\nHint: this does not look like an lm-evaluation-harness results file; check where it came from."
        raise InputError(msg) from exc


def _parse_model_args(model_args: object) -> dict[str, str]:
    """Split ``"pretrained=org/name,revision=sha,dtype=bfloat16"`` into a dict."""
    if not isinstance(model_args, str):
        return {}
    pairs = (item.split("=", 1) for item in model_args.split(",") if "=" in item)
    return {key.strip(): value.strip() for key, value in pairs}


def _first_text(*candidates: object) -> str:
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate  # as written: names round-trip unchanged
    return ""


def _timestamp(path: Path, date: object) -> str:
    """Return the run time as a sortable UTC string: file name first, then ``date``."""
    if match := _TIMESTAMP.match(path.name):
        day, time = match.group(1).split("T")
        clock, _, fraction = time.replace(":", "-").partition(".")
        return f"{day}T{clock.replace('-', ':')}.{fraction.ljust(6, '0')[:6]}"
    if isinstance(date, int | float) and not isinstance(date, bool):
        try:  # a 400-digit integer does not even fit a float
            moment = datetime.fromtimestamp(float(date), tz=UTC)
        except (OverflowError, OSError, ValueError):  # a date no clock can show
            return ""  # no run time: as for a file without a date
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return ""


def _float(path: Path, key: str, value: int | float) -> float:
    """A JSON number as a float; an integer too large for one is an error."""
    try:
        return float(value)
    except OverflowError:  # only an int overflows: JSON floats too large read as inf
        assert isinstance(value, int)
        digits = int(value.bit_length() * math.log10(2)) + 1
        msg = (
            f"{path}: {key} is an integer of about {digits:,} digits, too large for "
            "any score.\nHint: the file is damaged or was edited by hand; re-download "
            "or re-run this task."
        )
        raise InputError(msg) from None


def _stderr(path: Path, key: str, value: object) -> float | None:
    """A standard error (at `key`) as a float; None for "N/A" (the harness's marker) or none."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return _float(path, key, value)


@functools.lru_cache(maxsize=1024)  # a suite's few metrics, looked up per file
def _stderr_key(metric: str) -> str:
    """``acc_norm,none`` -> ``acc_norm_stderr,none``."""
    name, comma, filtering = metric.partition(",")
    return f"{name}_stderr{comma}{filtering}"


def _n_samples(counts: object) -> int | None:
    if isinstance(counts, dict):
        value = counts.get("effective", counts.get("original"))
        if (
            isinstance(value, int)
            and not isinstance(value, bool)
            and 0 < value <= _MAX_INT64
        ):
            return value
    return None
