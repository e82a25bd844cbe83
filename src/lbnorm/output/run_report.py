"""The run report for schedulers: one JSON document per run, also when it fails.

``lbnorm run --report FILE`` writes it whether the run succeeded or not. A
scheduler needs only ``exit_code`` (one of :class:`lbnorm.core.errors.ExitCode`) and
``status``: ``healthy`` (exit 0: ran, output written, no input file rejected
and, with ``--health``, every check that ran passed), ``not checked`` (exit 0:
ran and wrote its output, no input file rejected, but ``--health`` had too few
models for any check to run: nothing was checked, so nothing is called
healthy), ``unhealthy`` (exit 7: ran and wrote its output, but a health check
failed or an input file was rejected; ``problems`` says which) or ``failed``
(did not run; the previous output is unchanged).

The document (``"report": "lbnorm-run"``, ``"format": 1``) holds: ``inputs``
(files seen, parsed, cached, superseded, rejected with reasons and the
variant each held, the parse cache's own figures, and ``reruns``: each variant read from several results
files with superseded files or older scores that differ, when there is one),
``models`` (variants complete and incomplete, ranked, and ``lost``: the
variants off the board because their only results files were rejected),
``warnings``, ``health`` (the health table's rows, the failed checks and how
many were skipped; ``checked`` false and ``passed`` null when every check was
skipped, as with fewer models than a check needs, and ``reason`` saying so),
``timings_s`` (wall seconds per stage) and ``error`` for a
failed run.

The report is built from the result's Arrow tables: writing it needs no pandas.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core import arrow
from lbnorm.core.errors import ExitCode
from lbnorm.engines.result import Result
from lbnorm.output.transaction import first_few
from lbnorm.readers import (
    cache_stats,
    describe_variant,
    input_rejections,
    input_reruns,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "REPORT_FORMAT",
    "build_run_report",
    "format_run_report",
    "is_run_report",
]

#: Version of the report's layout.
REPORT_FORMAT = 1

#: A section of the report, the warnings and the problems it found.
_Section = tuple[dict[str, Any], list[str], list[str]]


def build_run_report(
    result: Result | None,
    *,
    version: str,
    started_at: str,
    finished_at: str,
    out: str | None,
    stages: Mapping[str, float],
    health: pd.DataFrame | None = None,
    min_models: int = 30,
    error: BaseException | None = None,
) -> dict[str, Any]:
    """Describe a run for a scheduler.

    Args:
        result: The run's result; None if it did not run.
        version: The lbnorm version.
        started_at: ISO 8601 start time.
        finished_at: ISO 8601 end time.
        out: The output directory written (None if nothing was written).
        stages: Wall seconds per stage, in order.
        health: The health table the checks returned, if they ran.
        min_models: The fewest models a health check runs on (its thresholds'
            ``min_models``), for the reason nothing was checked.
        error: Why the run did not run (an :class:`LbnormError` or an interrupt).

    Returns:
        The report as a JSON-ready dict; ``exit_code`` is the code to exit with.

    Examples:
        >>> report = build_run_report(None, version="0.1.0", started_at="t0",
        ...     finished_at="t1", out=None, stages={}, error=KeyboardInterrupt())
        >>> report["status"], report["exit_code"], report["error"]["type"]
        ('failed', 130, 'KeyboardInterrupt')
    """
    report: dict[str, Any] = {
        "report": "lbnorm-run",
        "format": REPORT_FORMAT,
        "version": version,
        "started_at": started_at,
        "finished_at": finished_at,
        "output": out,
        "timings_s": {name: round(seconds, 4) for name, seconds in stages.items()},
    }
    if result is None or error is not None:
        return report | _failure(error)
    inputs = _inputs(result.file_table)
    models, warnings, problems = _models_section(result, inputs)
    health_section, health_warnings, health_problems = _health_section(
        health, min_models
    )
    warnings += health_warnings
    problems += health_problems
    status = "unhealthy" if problems else "healthy"
    if not problems and health_section.get("checked") is False and health is not None:
        status = "not checked"
    return report | {
        "status": status,
        "exit_code": int(ExitCode.UNHEALTHY if problems else ExitCode.OK),
        "error": None,
        "problems": problems,
        "suite": {
            "name": result.suite.name,
            "source": result.suite.source,
            "sha256": result.suite.sha256,
        },
        "inputs": inputs,
        "models": models,
        "warnings": warnings,
        "health": health_section,
    }


def _models_section(result: Result, inputs: Mapping[str, Any]) -> _Section:
    """The report's ``models`` section, the run's warnings and its problems (rejected files).

    A rebuilt parse cache, rejected files, incomplete variants, subtask rows
    outside the suite are warnings: none stops the run. Rejected files are
    also a problem (the run exits unhealthy), naming the variants lost with them.
    """
    board = result.board_counts()
    # the variants lost with the rejected files, each once, in file order
    rejected = inputs["rejected_files"]
    lost = list(dict.fromkeys(describe_variant(f) for f in rejected if f.get("lost")))
    models = {
        "variants": board.variants,
        "models": board.models,
        "complete": board.complete,
        "incomplete": board.variants - board.complete,
        "ranked": board.ranked,
        "missing_policy": result.missing,
        "lost": len(lost),
    }
    warnings, problems = [], []
    if (cache := inputs["cache"] or {}).get("rebuilt"):
        warnings.append(f"parse cache rebuilt: {cache['rebuild_reason']}")
    if inputs["rejected"]:
        warnings.append(
            f"{inputs['rejected']} input file(s) rejected (see inputs.rejected_files)"
        )
        problems.append(
            f"{inputs['rejected']} input file(s) rejected"
            + (f"; {len(lost):,} variant(s) lost: {first_few(lost)}" if lost else "")
            + (" (see inputs.rejected_files)" if len(lost) > 5 else "")  # (more)
        )
    if models["incomplete"]:
        warnings.append(
            f"{models['incomplete']} variant(s) incomplete (missing={result.missing})"
        )
    if result.n_ignored_rows:
        warnings.append(
            f"{result.n_ignored_rows} row(s) of subtasks outside the suite ignored"
        )
    return models, warnings, problems


def _failure(error: BaseException | None) -> dict[str, Any]:
    """The report's keys for a run that did not run: why, and the code to exit with.

    An lbnorm error or SIGTERM exits with its own code; anything else that
    stopped the run (a Ctrl-C) with :attr:`ExitCode.INTERRUPTED`.
    """
    return {
        "status": "failed",
        "exit_code": int(getattr(error, "exit_code", ExitCode.INTERRUPTED)),
        "error": {"type": type(error).__name__, "message": str(error)},
        "problems": [f"did not run: {type(error).__name__}"],
        "output": None,
    }


def _health_section(health: pd.DataFrame | None, min_models: int) -> _Section:
    """The report's ``health`` section, its warnings and its problems (the failed checks).

    Every check skipped (too few models for any) is "not checked", with the
    reason, rather than passed; each failed check is a problem, so the run
    exits unhealthy.
    """
    if health is None:
        return {"checked": False}, [], []
    table = pa.Table.from_pandas(health, preserve_index=False)
    failed = table.filter(pc.equal(table["status"], _text("fail")))
    n_skipped = _count(pc.equal(table["status"], _text("skipped")))
    is_unchecked = n_skipped == table.num_rows  # too few models for any check
    section: dict[str, Any] = {"checked": not is_unchecked}
    warnings = []
    if is_unchecked:
        warnings.append(
            "every health check skipped: too few models for any check (min_models)"
        )
        section["reason"] = _unchecked_reason(table, min_models)
    problems = [
        f"health: {row['level']} {row['benchmark']}"
        f"{'/' + row['subtask'] if row['subtask'] else ''} failed {row['failed']}"
        for row in failed.to_pylist()  # the failed checks, a handful
    ]
    section |= {
        "passed": None if is_unchecked else failed.num_rows == 0,
        "skipped": n_skipped,
        "failed": _records(failed.select(["level", "benchmark", "subtask", "failed"])),
        "table": _records(table),
    }
    return section, warnings, problems


def is_run_report(head: bytes, tail: bytes) -> bool:
    """Whether a file's first bytes are a run report's (one lbnorm may replace).

    Examples:
        >>> is_run_report(b'{ "report": "lbnorm-run", "format": 1', b"")
        True
    """
    del tail  # the kind is the first key
    return b'"report": "lbnorm-run"' in head


def _unchecked_reason(health: pa.Table, min_models: int) -> str:
    """Why no health check ran: ``2 models, at least 30 needed``.

    Examples:
        >>> table = pa.table({"n_models": pa.array([1, 2, None], pa.int64())})
        >>> _unchecked_reason(table, 30)
        '2 models, at least 30 needed'
        >>> _unchecked_reason(table.slice(0, 1), 5)
        '1 model, at least 5 needed'
    """
    n = int(pc.max(health["n_models"]).as_py() or 0)  # (a column of every health table)
    return f"{n:,} model{'' if n == 1 else 's'}, at least {min_models:,} needed"


def format_run_report(report: Mapping[str, Any]) -> str:
    """The report as JSON text (NaN as null), ending in a newline."""
    return json.dumps(_clean(report), indent=2, allow_nan=False) + "\n"


def _inputs(files: pa.Table) -> dict[str, Any]:
    """The report's ``inputs`` section, from the run's file table.

    The counts and the parse cache's figures, each rejected file with the
    variants it held, and the variants read from several results files (when any).
    """
    is_results = pc.equal(files["format"], _text("lm-eval-harness"))
    read = files["cache"] if "cache" in files.column_names else _text("parsed")
    status = pc.if_else(is_results, read, _text("table"))
    rejected = files.filter(pc.equal(status, _text("rejected")))  # (INPUT_FILES)
    held = {record["path"]: record for record in input_rejections(files)}
    inputs = {
        "seen": files.num_rows,
        "parsed": _count(pc.equal(status, _text("parsed"))),
        "cached": _count(pc.equal(status, _text("cached"))),
        "superseded": files.num_rows - files["superseded_by"].null_count,
        "rejected": rejected.num_rows,
        "tables": _count(pc.equal(status, _text("table"))),
        "rejected_files": [  # each with the variant it held, when the cache named it
            file | held.get(file["path"], {})
            for file in _records(rejected.select(["path", "reason"]))
        ],
        "cache": cache_stats(files),
    }
    if reruns := input_reruns(files):  # (absent when none)
        inputs["reruns"] = reruns
    return inputs


def _count(mask: pa.Array | pa.ChunkedArray) -> int:
    """True values of a boolean column (nulls count as false)."""
    return int(pc.sum(mask).as_py() or 0)


def _records(table: pa.Table) -> list[dict[str, Any]]:
    return [_clean(record) for record in table.to_pylist()]


def _clean(value: Any) -> Any:
    """JSON-ready values: NaN as None (the values come from Arrow: Python's own)."""
    if isinstance(value, Mapping):
        return {str(key): _clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(item) for item in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _text(value: str) -> pa.Scalar:
    """A string scalar for a compute function (a Python str would probe pandas)."""
    return arrow.scalar(value, pa.string())
