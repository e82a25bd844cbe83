"""lm-evaluation-harness results files, single or as leaderboard trees.

A leaderboard keeps one file per run, ``<org>/<model>/results_<ISO timestamp>.json``.
For each file this reader takes the suite's ``results[task][metric]`` values
(never ``groups``, which can hold stale values after a re-scoring), their
``*_stderr`` (``"N/A"`` becomes null) and ``n-samples``, and the model variant:
name from ``model_name`` / ``config.model_name`` / ``model_args`` ``pretrained=`` /
the path; precision from ``config.model_dtype`` or ``dtype=``; revision from
``config.model_sha`` / ``model_revision`` / ``revision=``; chat template applied
when ``chat_template`` is not null. Tasks the suite does not use are counted, not
read. When several files describe one variant, the newest timestamp wins (ties
broken by path) and the others are reported as superseded.
"""

from __future__ import annotations

import codecs
import json
import math
import re
import reprlib
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from lbnorm.errors import InputError
from lbnorm.schemas import KEY_COLUMNS, SCORES

__all__ = [
    "HarnessFile",
    "find_results_files",
    "parse_results_file",
    "read_results_files",
]

_TIMESTAMP = re.compile(
    r"results_(\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)"
)
_loads: Callable[[bytes], Any]
try:  # orjson parses the 120 KB files about 3x faster than json
    import orjson

    _loads = orjson.loads
    _DECODE_ERRORS: tuple[type[Exception], ...] = (
        orjson.JSONDecodeError,
        RecursionError,
    )
except ImportError:  # pragma: no cover - orjson is an optional extra
    _loads = json.loads
    _DECODE_ERRORS = (ValueError, RecursionError)
_MAX_INT64 = 2**63 - 1
_REPR = reprlib.Repr()  # bounded reprs for messages, even of 100,000-deep values
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60
_shown = _REPR.repr


@dataclass(frozen=True, slots=True, kw_only=True)
class HarnessFile:
    """One parsed results file: its variant, run time and the suite's scores.

    Attributes:
        path: The file.
        model, precision, revision, chat_template: The model variant.
        timestamp: Run time (UTC ISO string) used to pick the newest file.
        rows: Columns of the file's scores (``subtask_index``, ``raw_score``,
            ``stderr``, ``n_samples``, ``key``), one entry per suite subtask found.
        n_ignored: Result entries the suite does not use.
    """

    path: str
    model: str
    precision: str
    revision: str
    chat_template: bool
    timestamp: str
    rows: dict[str, list[Any]]
    n_ignored: int


def find_results_files(directory: Path) -> list[Path]:
    """Return the ``results_*.json`` files under `directory`, sorted.

    Raises:
        InputError: None were found.
    """
    files = sorted(path for path in directory.rglob("results_*.json") if path.is_file())
    if not files:
        msg = (
            f"{directory}: no results_*.json files found in this directory tree.\n"
            "Hint: point lbnorm at a leaderboard tree (<org>/<model>/results_<timestamp>.json) "
            "or at score tables (.csv, .jsonl, .parquet)."
        )
        raise InputError(msg)
    return files


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
    config = document.get("config") if isinstance(document.get("config"), dict) else {}
    assert isinstance(config, dict)
    args = _parse_model_args(config.get("model_args"))
    model = _first_text(
        document.get("model_name"), config.get("model_name"), args.get("pretrained")
    )
    model = model or _model_from_path(path)
    if not model:
        msg = f'{path}: no model name (model_name, config.model_name, model_args pretrained=) and the path is not <org>/<model>/results_*.json.\nHint: add "model_name" to the file or use the leaderboard layout.'
        raise InputError(msg)
    precision = _first_text(config.get("model_dtype"), args.get("dtype")).removeprefix(
        "torch."
    )
    revision = _first_text(
        config.get("model_sha"), config.get("model_revision"), args.get("revision")
    )
    rows: dict[str, list[Any]] = {
        "subtask_index": [],
        "raw_score": [],
        "stderr": [],
        "n_samples": [],
        "key": [],
    }
    counts = (
        document.get("n-samples") if isinstance(document.get("n-samples"), dict) else {}
    )
    assert isinstance(counts, dict)
    used_tasks: set[str] = set()
    for index, (task, metric) in enumerate(pairs):  # the suite's subtasks, not rows
        entry = results.get(task)
        if entry is not None and not isinstance(entry, dict):
            msg = f"{path}: results[{task!r}] is {_shown(entry)}, not an object.\nHint: each results entry maps metric names to numbers; fix or re-run this task."
            raise InputError(msg)
        if entry is None or metric not in entry:
            continue
        used_tasks.add(task)
        key = f"results[{task!r}][{metric!r}]"
        value = entry[metric]
        if isinstance(value, bool) or not isinstance(value, int | float):
            msg = f"{path}: {key} is {_shown(value)}, not a number.\nHint: fix or re-run this task; scores must be JSON numbers."
            raise InputError(msg)
        rows["subtask_index"].append(index)
        rows["raw_score"].append(float(value))
        rows["stderr"].append(_stderr(entry, metric))
        rows["n_samples"].append(_n_samples(counts.get(task)))
        rows["key"].append(key)
    names = {"model name": model, "precision": precision, "revision": revision}
    for what, text in names.items():
        _check_unicode(path, what, text)
    return HarnessFile(
        path=str(path),
        model=model,
        precision=precision,
        revision=revision,
        chat_template=document.get("chat_template") is not None,
        timestamp=_timestamp(path, document.get("date")),
        rows=rows,
        n_ignored=len(set(results) - used_tasks),
    )


def read_results_files(
    files: Iterable[tuple[Path, bytes]],
    pairs: Sequence[tuple[str, str]],
    subtask_names: pd.DataFrame,
    *,
    progress: Callable[[str, int, int], None] | None = None,
    total: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Parse results files and keep the newest file per model variant.

    Args:
        files: (path, bytes) of each results file; consumed once, so a generator
            keeps one file's bytes in memory at a time.
        pairs: The suite's (task, metric) pairs in suite order.
        subtask_names: The suite's ``benchmark``, ``subtask`` and ``metric`` in
            the same order.
        progress: Called as ``progress(stage, done, total)`` after each file.
        total: How many files `files` yields, for progress (default: its length).

    Returns:
        The scores (:data:`SCORES` columns plus ``_row``, the results key) and a
        frame of files: ``path``, the variant keys, ``timestamp``, ``rows``,
        ``n_ignored`` and ``superseded_by`` (null for the file used).
    """
    parsed: list[HarnessFile] = []
    if total is None and isinstance(files, Sized):
        total = len(files)
    for path, data in files:
        parsed.append(parse_results_file(path, data, pairs))
        if progress is not None:
            progress("parsing results files", len(parsed), total or len(parsed))
    catalog = pd.DataFrame(
        {
            "path": [p.path for p in parsed],
            "model": [p.model for p in parsed],
            "precision": [p.precision for p in parsed],
            "revision": [p.revision for p in parsed],
            "chat_template": [p.chat_template for p in parsed],
            "timestamp": [p.timestamp for p in parsed],
            "rows": [len(p.rows["raw_score"]) for p in parsed],
            "n_ignored": [p.n_ignored for p in parsed],
        }
    )
    order = catalog.sort_values([*KEY_COLUMNS, "timestamp", "path"]).index
    newest = (
        catalog.loc[order]
        .groupby(list(KEY_COLUMNS), sort=False)["path"]
        .transform("last")
    )
    catalog["superseded_by"] = newest.where(
        newest != catalog.loc[order, "path"]
    ).reindex(catalog.index)
    _check_ties(parsed, catalog)
    kept = [
        p
        for p, is_superseded in zip(
            parsed, catalog["superseded_by"].notna(), strict=True
        )
        if not is_superseded
    ]
    lengths = [len(p.rows["raw_score"]) for p in kept]
    index = pd.Series([i for p in kept for i in p.rows["subtask_index"]], dtype="int64")
    scores = pd.DataFrame(
        {
            "model": pd.Series([p.model for p in kept]).repeat(lengths).to_numpy(),
            "precision": pd.Series([p.precision for p in kept])
            .repeat(lengths)
            .to_numpy(),
            "revision": pd.Series([p.revision for p in kept])
            .repeat(lengths)
            .to_numpy(),
            "chat_template": pd.Series([p.chat_template for p in kept], dtype=bool)
            .repeat(lengths)
            .to_numpy(),
            "benchmark": subtask_names["benchmark"].to_numpy()[index],
            "subtask": subtask_names["subtask"].to_numpy()[index],
            "metric": subtask_names["metric"].to_numpy()[index],
            "raw_score": pd.Series(
                [v for p in kept for v in p.rows["raw_score"]], dtype="float64"
            ),
            "stderr": pd.Series(
                [v for p in kept for v in p.rows["stderr"]], dtype="float64"
            ),
            "n_samples": pd.Series(
                [v for p in kept for v in p.rows["n_samples"]], dtype="Int64"
            ),
            "source": pd.Series([p.path for p in kept]).repeat(lengths).to_numpy(),
            "_row": pd.Series([k for p in kept for k in p.rows["key"]], dtype="str"),
        }
    )
    return scores[[*SCORES.names, "_row"]], catalog


def _check_ties(parsed: Sequence[HarnessFile], catalog: pd.DataFrame) -> None:
    """Files of one variant with the same run time must agree: neither is newer."""
    is_tied = catalog.duplicated([*KEY_COLUMNS, "timestamp"], keep=False)
    if not is_tied.any():
        return
    groups = catalog[is_tied].groupby([*KEY_COLUMNS, "timestamp"], sort=True)
    for positions in groups.indices.values():  # a few tied groups, not rows
        first, *others = sorted((parsed[i] for i in positions), key=lambda p: p.path)
        for other in others:
            if not pd.DataFrame(other.rows).equals(pd.DataFrame(first.rows)):
                msg = (
                    f"{first.path} and {other.path}: two results files for the same model "
                    f"variant ({_shown(first.model)}, precision {first.precision!r}, revision "
                    f"{first.revision!r}) with the same run time ({first.timestamp or 'none in the file name'}) "
                    "hold different scores, so neither is the newest.\n"
                    "Hint: remove the wrong file, or keep the results_<timestamp>.json names "
                    "so that the newest run wins."
                )
                raise InputError(msg)


def _decode(path: Path, data: bytes) -> Any:
    """Parse a results file's bytes; the message says what is wrong and where."""
    data = data.removeprefix(codecs.BOM_UTF8)  # Windows editors add one; harmless
    if not data.strip():
        msg = f"{path}: the file is empty.\nHint: the run may have crashed before writing it; re-run it or remove the file."
        raise InputError(msg)
    try:
        return _loads(data)
    except _DECODE_ERRORS:
        pass  # NaN / Infinity (Python's json.dump writes them) or a real error: json decides
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        msg = f"{path}: line {line}: byte {data[exc.start]:#04x} is not UTF-8.\nHint: re-save the file as UTF-8 (JSON files must be UTF-8)."
        raise InputError(msg) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno}).\nHint: the file may be truncated or hand-edited; re-download or re-run it."
        raise InputError(msg) from exc
    except (ValueError, RecursionError) as exc:  # deep nesting, 5,000-digit numbers
        msg = f"{path}: cannot read the JSON: {exc}.\nHint: this does not look like an lm-evaluation-harness results file; check where it came from."
        raise InputError(msg) from exc


def _check_unicode(path: Path, what: str, text: str) -> None:
    """Reject lone surrogates (from a JSON escape, or a non-UTF-8 file name)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = f"{path}: the {what} {_shown(text)} is not valid Unicode.\nHint: fix the name in the file (or its directory name, if the name comes from the path)."
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


def _model_from_path(path: Path) -> str:
    if _TIMESTAMP.match(path.name) and path.parent.parent.name:
        return f"{path.parent.parent.name}/{path.parent.name}"
    return ""


def _timestamp(path: Path, date: object) -> str:
    """Return the run time as a sortable UTC string: file name first, then ``date``."""
    if match := _TIMESTAMP.match(path.name):
        day, time = match.group(1).split("T")
        clock, _, fraction = time.replace(":", "-").partition(".")
        return f"{day}T{clock.replace('-', ':')}.{fraction.ljust(6, '0')[:6]}"
    if (
        isinstance(date, int | float)
        and not isinstance(date, bool)
        and math.isfinite(date)
    ):
        try:
            moment = datetime.fromtimestamp(date, tz=UTC)
        except (OverflowError, OSError, ValueError):  # a date no clock can show
            return ""
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")
    return ""


def _stderr(entry: dict[str, Any], metric: str) -> float | None:
    name, comma, filtering = metric.partition(",")
    value = entry.get(f"{name}_stderr{comma}{filtering}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None  # "N/A" (the harness's own marker) or absent
    return float(value)


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
