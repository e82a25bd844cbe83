"""Whether results files' scores can be compared: the settings each was run with.

Scores from runs with different few-shot counts, sample limits, task versions or
harness versions are not comparable, and a leaderboard mixes them silently.
lm-evaluation-harness and lighteval results files record those settings; this
module reads them for the tasks each file's scores were taken from (the newest
result rule of :mod:`lbnorm.readers.harness` is unchanged) and, per (benchmark,
subtask, setting), names the variants whose value differs from the majority's.

The settings (:data:`SETTINGS`), each read as text (null when the file does not say):

- ``num_fewshot``: lm-eval ``configs[task].num_fewshot`` (else ``n-shot[task]``);
  lighteval ``summary_tasks[task].effective_few_shots`` (else the key's ``|k``;
  fewer effective shots than asked for, truncated ones, show as a difference).
- ``n_samples``: lm-eval ``n-samples[task].effective``; a run with ``--limit``
  has fewer than ``original``.
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

Whether a chat template was applied is one of a variant's keys, so variants are
never compared on it. Reading the settings is a second pass over the files
(decoding only these keys), so a run does it when asked (``lbnorm run
--comparability``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.arrow import strings
from lbnorm.core.errors import InputError
from lbnorm.suites import Suite

__all__ = [
    "COMPARABILITY",
    "SETTINGS",
    "Comparability",
    "check_comparability",
    "file_settings",
    "strict_error",
    "with_notes",
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
        pa.field("n_variants", pa.int64()),
        pa.field("n_majority", pa.int64()),
        pa.field("path", pa.string()),
    ]
)
_SHOWN = 5

_decode: Callable[[bytes], Any] | None = None
try:  # msgspec skips what is not read (a file's prompts are most of it)
    import msgspec
except ImportError:  # pragma: no cover - msgspec is an optional extra
    pass
else:

    class _Settings(msgspec.Struct):
        """The top-level keys holding run settings; the rest is skipped."""

        configs: Any = None
        n_shot: Any = msgspec.field(default=None, name="n-shot")
        n_samples: Any = msgspec.field(default=None, name="n-samples")
        versions: Any = None
        config: Any = None
        config_general: Any = None
        summary_tasks: Any = None
        git_hash: Any = None
        lm_eval_version: Any = None
        fewshot_as_multiturn: Any = None
        system_instruction_sha: Any = None

    _decode = msgspec.json.Decoder(_Settings).decode


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


def file_settings(
    path: Path, data: bytes, tasks: Sequence[str]
) -> list[dict[str, str | None]]:
    """Read one results file's settings for `tasks`.

    Args:
        path: The file (for messages).
        data: Its bytes.
        tasks: The results keys whose settings are wanted.

    Returns:
        Per task, in order, each setting of :data:`SETTINGS` as text (None: not given).

    Raises:
        InputError: The file is not a JSON object.
    """
    document = _document(path, data)
    configs = _object(document.get("configs"))
    n_shot = _object(document.get("n-shot"))
    sizes = _object(document.get("n-samples"))
    versions = _object(document.get("versions"))
    config = _object(document.get("config"))
    general = _object(document.get("config_general"))
    if not general and "lighteval_sha" in config:  # v1 files before autumn 2023
        general, config = config, {}
    summary = _object(document.get("summary_tasks"))
    is_lighteval = "lighteval_sha" in general
    harness = (
        general.get("lighteval_sha")
        if is_lighteval
        else document.get("git_hash") or document.get("lm_eval_version")
    )
    limit = general.get("max_samples") if is_lighteval else config.get("limit")
    per_file = {
        "limit": _text(limit),
        "harness": _text(harness),
        "fewshot_as_multiturn": _text(document.get("fewshot_as_multiturn")),
        "system_instruction": _text(document.get("system_instruction_sha")),
    }
    found = []
    for task in tasks:  # the few tasks a file's scores came from
        task_summary = _object(summary.get(task))
        shots = _object(configs.get(task)).get("num_fewshot", n_shot.get(task))
        if shots is None:  # lighteval: the shots given, else those its key asks for
            shots = task_summary.get(
                "effective_few_shots", task.rpartition("|")[2] if "|" in task else None
            )
        found.append(
            {
                "num_fewshot": _number_text(shots),
                "n_samples": _text(_object(sizes.get(task)).get("effective")),
                "version": _number_text(versions.get(task)),
                "task_hash": _text(
                    _object(task_summary.get("hashes")).get("hash_examples")
                ),
                **per_file,
            }
        )
    return found


def check_comparability(
    files: pa.Table,
    suite: Suite,
    *,
    read: Callable[[Path], bytes],
) -> Comparability:
    """Compare the settings of the results files scores were taken from.

    Args:
        files: One row per results file: ``path``, the variant keys and
            ``tasks`` (the tasks its scores were taken from), as
            :class:`lbnorm.readers.harness.ResultsRead` gives them.
        suite: The suite (which subtasks each task holds).
        read: Returns a file's bytes.

    Returns:
        The differences, the per-file notes and the warnings.

    Raises:
        InputError: A file cannot be read again.
    """
    subtasks_of: dict[str, list[tuple[str, str]]] = {}
    for benchmark in suite.benchmarks:
        for subtask in benchmark.subtasks:
            subtasks_of.setdefault(subtask.task, []).append(
                (benchmark.name, subtask.name)
            )
    columns: dict[str, list[Any]] = {
        name: [] for name in ("file", "benchmark", "subtask", "setting", "value")
    }
    tasks = files["tasks"].to_pylist()
    for at, path in enumerate(files["path"].to_pylist()):  # one read per file
        taken = tasks[at] or []
        if not taken:
            continue
        settings = file_settings(Path(path), read(Path(path)), taken)
        for task, values in zip(taken, settings, strict=True):
            for benchmark_name, subtask_name in subtasks_of.get(task, []):
                for setting in SETTINGS:
                    columns["file"].append(at)
                    columns["benchmark"].append(benchmark_name)
                    columns["subtask"].append(subtask_name)
                    columns["setting"].append(setting)
                    columns["value"].append(values[setting])
    rows = pa.table(
        {
            "file": pa.array(columns["file"], pa.int64()),
            **{
                name: strings(columns[name])
                for name in ("benchmark", "subtask", "setting", "value")
            },
        }
    )
    differences = _differences(rows, files)
    return Comparability(
        differences=differences,
        notes=_notes(differences, files),
        warnings=_warnings(differences),
    )


def _differences(rows: pa.Table, files: pa.Table) -> pa.Table:
    """Rows whose value is not the majority's among the variants that give one."""
    known = rows.filter(pc.is_valid(rows["value"]))
    group = ["benchmark", "subtask", "setting"]
    counts = known.group_by([*group, "value"]).aggregate([([], "count_all")])
    totals = known.group_by(group).aggregate([([], "count_all")])
    # the majority: the most frequent value; a tie goes to the smallest value
    ordered = counts.sort_by(
        [
            *((name, "ascending") for name in group),
            ("count_all", "descending"),
            ("value", "ascending"),
        ]
    )
    keys = _key(ordered, group)
    is_first = np.ones(len(keys), dtype=bool)
    is_first[1:] = keys[1:] != keys[:-1]
    majority = ordered.filter(pa.array(is_first)).rename_columns(
        [*group, "majority", "n_majority"]
    )
    majority = majority.join(totals.rename_columns([*group, "n_variants"]), group)
    joined = known.join(majority, group)
    differs = joined.filter(pc.not_equal(joined["value"], joined["majority"]))
    file = differs["file"]
    table = pa.table(
        {
            "model": files["model"].take(file).cast(pa.string()),
            "precision": files["precision"].take(file).cast(pa.string()),
            "revision": files["revision"].take(file).cast(pa.string()),
            "chat_template": files["chat_template"].take(file).cast(pa.bool_()),
            **{name: differs[name] for name in [*group, "value", "majority"]},
            "n_variants": differs["n_variants"].cast(pa.int64()),
            "n_majority": differs["n_majority"].cast(pa.int64()),
            "path": files["path"].take(file).cast(pa.string()),
        }
    )
    table = table.append_column("_file", file)
    order = pc.sort_indices(
        table,
        [
            ("benchmark", "ascending"),
            ("subtask", "ascending"),
            ("setting", "ascending"),
            ("path", "ascending"),
        ],
    )
    return table.take(order)


def _key(table: pa.Table, names: list[str]) -> np.ndarray[Any, np.dtype[Any]]:
    """One text key per row of the `names` columns, for finding group starts."""
    joined = pc.binary_join_element_wise(*(table[name] for name in names), "\x1f")
    return np.asarray(joined.to_numpy(zero_copy_only=False), dtype=object)


def _notes(differences: pa.Table, files: pa.Table) -> pa.Array:
    """Per file: its differing settings as a list of structs (empty if none)."""
    kind = pa.struct(
        [
            pa.field(name, pa.string())
            for name in ("benchmark", "subtask", "setting", "value", "majority")
        ]
    )
    per_file: list[list[dict[str, Any]]] = [[] for _ in range(files.num_rows)]
    records = differences.select(
        ["_file", "benchmark", "subtask", "setting", "value", "majority"]
    )
    for record in records.to_pylist():  # the differences: few, one note each
        at = record.pop("_file")
        per_file[at].append(record)
    return pa.array(per_file, pa.list_(kind))


def _warnings(differences: pa.Table) -> tuple[str, ...]:
    """One line per (benchmark, setting): the variants that differ, their values, where."""
    if not differences.num_rows:
        return ()
    names = [
        "benchmark",
        "setting",
        "model",
        "precision",
        "value",
        "majority",
        "subtask",
    ]
    groups: dict[tuple[str, str], dict[tuple[str, str, str, str], list[str]]] = {}
    for record in differences.select(names).to_pylist():  # few; grouped for the message
        variant = (
            record["model"],
            record["precision"],
            record["value"],
            record["majority"],
        )
        by_variant = groups.setdefault((record["benchmark"], record["setting"]), {})
        by_variant.setdefault(variant, []).append(record["subtask"])
    lines = []
    for (benchmark, setting), by_variant in groups.items():
        shown = "; ".join(
            f"{model}{f' [{precision}]' if precision else ''}: {value} (majority "
            f"{majority}) on {_listed(subtasks)}"
            for (model, precision, value, majority), subtasks in list(
                by_variant.items()
            )[:_SHOWN]
        )
        more = (
            f"; and {len(by_variant) - _SHOWN} more" if len(by_variant) > _SHOWN else ""
        )
        lines.append(
            f"not comparable: {benchmark} {setting} differs from the majority for "
            f"{len(by_variant)} variant(s): {shown}{more}"
        )
    return tuple(lines)


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


def with_notes(files: pa.Table, comparability: Comparability) -> pa.Table:
    """The files table with a ``comparability`` column (its differing settings)."""
    return files.append_column("comparability", comparability.notes)


def _document(path: Path, data: bytes) -> dict[str, Any]:
    """The file's setting keys as a dict (absent keys read as None)."""
    if _decode is not None and data.isascii():
        try:
            found = _decode(data)
        except (msgspec.DecodeError, RecursionError):
            pass  # json decides and words the error
        else:
            return {
                name: getattr(found, field)
                for name, field in (
                    ("configs", "configs"),
                    ("n-shot", "n_shot"),
                    ("n-samples", "n_samples"),
                    ("versions", "versions"),
                    ("config", "config"),
                    ("config_general", "config_general"),
                    ("summary_tasks", "summary_tasks"),
                    ("git_hash", "git_hash"),
                    ("lm_eval_version", "lm_eval_version"),
                    ("fewshot_as_multiturn", "fewshot_as_multiturn"),
                    ("system_instruction_sha", "system_instruction_sha"),
                )
            }
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        msg = f"{path}: cannot read its settings: {exc}.\nHint: the file changed since it was read; run again."
        raise InputError(msg) from exc
    if not isinstance(document, dict):
        msg = f"{path}: expected a JSON object.\nHint: the file changed since it was read; run again."
        raise InputError(msg)
    return document


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str | None:
    """A setting as text: None stays None, JSON scalars as JSON writes them."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
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
