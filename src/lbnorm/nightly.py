"""Nightly runs: the pipeline as a scheduled job, timed, checked and reported.

What ``lbnorm run --cache/--health/--intervals/--report`` does, in one
transaction: the run streams its tables into the staging folder
(:func:`lbnorm.pipeline.run`), the analyses the options ask for
(:mod:`lbnorm.analysis`) read the staged subtask table and add their tables
beside, the JSON run report (:mod:`lbnorm.output.run_report`) is staged beside
the output, and all of it is swapped in with one commit. A failed run still
writes its report. The analyses (``health``, ``intervals``) work on pandas
frames and are loaded only when asked for: a run with ``--cache`` and
``--report`` alone loads no pandas.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lbnorm._runtime import entry_point
from lbnorm.core.errors import LbnormError, OutputError
from lbnorm.core.manifest import iso_time
from lbnorm.core.options import DEFAULT_SUITE, ProgressCallback, RunOptions
from lbnorm.core.version import lbnorm_version
from lbnorm.engines.result import Result
from lbnorm.output.run_report import (
    build_run_report,
    format_run_report,
    is_run_report,
)
from lbnorm.output.transaction import (
    Transaction,
    check_file,
    write_file,
)
from lbnorm.output.writer import add_to
from lbnorm.pipeline import created_at_from_environment, run
from lbnorm.readers import cache_stats
from lbnorm.suites import Suite

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MonitoredRun", "run_monitored"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitoredRun:
    """A run with its report and the extra tables written beside its output.

    Attributes:
        result: The normalized leaderboard.
        report: The run report (see :mod:`lbnorm.output.run_report`).
        tables: ``health`` and/or ``intervals``, as written to the output.
    """

    result: Result
    report: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


@entry_point  # (Ctrl-C and SIGTERM held for the call)
def run_monitored(
    inputs: Sequence[str | Path] = (),
    *,
    out: str | Path,
    suite: Suite | str | Path = DEFAULT_SUITE,
    options: RunOptions | None = None,
    progress: ProgressCallback | None = None,
) -> MonitoredRun:
    """Run the pipeline as a nightly job: timed stages, checks, a report.

    Args:
        inputs: As for :func:`lbnorm.run` (empty: the bundled demo).
        out: The output directory.
        suite: The suite.
        options: The run's options; the nightly ones are ``cache`` and
            ``full_rebuild`` (see :mod:`lbnorm.readers.cache`), ``health`` (write
            ``health.parquet``) with ``health_config`` (its thresholds),
            ``intervals`` (write ``intervals.parquet``) and ``report`` (the JSON
            run report, written also if the run fails).
        progress: Progress callback for reading.

    Returns:
        The result, its report (``report["exit_code"]`` is 0 or 7) and tables.

    Raises:
        LbnormError: The run did not run; the report (if asked for) says why.
    """
    options = options or RunOptions()
    report = options.report
    # before the work, and before a failure report goes there
    _check_report(report, out)
    health_config = _health_config(options)
    started = time.perf_counter()
    started_at = iso_time()
    stages: dict[str, float] = {}
    tables: dict[str, pd.DataFrame] = {}

    def reported(result: Result | None, **facts: Any) -> dict[str, Any]:
        return build_run_report(
            result,
            version=lbnorm_version(),
            started_at=started_at,
            finished_at=iso_time(),
            stages=stages,
            **facts,
        )

    transaction = Transaction(out, kind="leaderboard")
    try:
        with transaction:
            result = _timed_run(
                inputs, suite, transaction, options, progress=progress, stages=stages
            )
            checked, min_models = _analyses(
                result, options, health_config, tables, stages
            )
            mark = time.perf_counter()
            if tables:
                add_to(transaction, tables)
            stages["write"] = time.perf_counter() - mark
            stages["total"] = time.perf_counter() - started
            document = reported(
                result, out=str(out), health=checked, min_models=min_models
            )
            if report is not None:  # written with the output, or not at all
                data = format_run_report(document).encode()
                transaction.stage_file(
                    report, data, option="--report", is_ours=is_run_report
                )
            transaction.commit(created_at=created_at_from_environment())
    except (LbnormError, KeyboardInterrupt) as exc:
        if report is not None and not transaction.committed:
            # alone (atomically): a scheduler reads why the run stopped (status
            # failed, the exit code) where a successful run's report would be
            stages["total"] = time.perf_counter() - started
            data = format_run_report(reported(None, out=None, error=exc)).encode()
            write_file(report, data, option="--report", is_ours=is_run_report)
        raise
    return MonitoredRun(result=result, report=document, tables=tables)


def _health_config(options: RunOptions) -> Any:
    """The health thresholds ``options.health_config`` names, read before the run.

    Read first so a bad thresholds file stops the run before any work; None
    (the defaults) when none is named. The health module (pandas) is loaded
    only then.
    """
    if not options.health_config:
        return None
    from lbnorm.analysis.health import HealthConfig

    return HealthConfig.from_toml(options.health_config)


def _timed_run(
    inputs: Sequence[str | Path],
    suite: Suite | str | Path,
    transaction: Transaction,
    options: RunOptions,
    *,
    progress: ProgressCallback | None,
    stages: dict[str, float],
) -> Result:
    """The run, its tables streamed into `transaction`, its time added to `stages`.

    With the parse cache, the time is split into reading (the cache's own
    figure) and normalizing; without, it is one stage.
    """
    mark = time.perf_counter()
    result = run(
        inputs, suite=suite, out=transaction, options=options, progress=progress
    )
    elapsed = time.perf_counter() - mark
    if not options.cache:
        stages["read and normalize"] = elapsed
        return result
    parse = float((cache_stats(result.file_table) or {}).get("seconds", 0.0))
    stages["read (parse cache)"] = parse
    stages["normalize"] = elapsed - parse
    return result


def _analyses(
    result: Result,
    options: RunOptions,
    health_config: Any,
    tables: dict[str, pd.DataFrame],
    stages: dict[str, float],
) -> tuple[pd.DataFrame | None, int]:
    """The intervals and health checks asked for, into `tables`; the health table and its floor."""
    if not (options.intervals or options.health):
        return None, 30
    # the staged table: pandas from here on, for the analyses
    subtasks = result.subtasks
    if options.intervals and len(subtasks):
        from lbnorm.analysis.uncertainty import estimate_uncertainty

        mark = time.perf_counter()
        tables["intervals"] = estimate_uncertainty(
            subtasks, result.leaderboard, result.suite, missing=result.missing
        ).leaderboard
        stages["intervals"] = time.perf_counter() - mark
    if not options.health:
        return None, 30
    from lbnorm.analysis.health import HealthConfig, check_result

    mark = time.perf_counter()
    checked = check_result(
        subtasks,
        result.leaderboard,
        result.suite,
        missing=result.missing,
        config=health_config,
    )
    tables["health"] = checked
    stages["health"] = time.perf_counter() - mark
    return checked, (health_config or HealthConfig()).min_models


def _check_report(report: str | Path | None, out: str | Path) -> None:
    """Refuse a ``--report`` file that could not be written, before the run (None: none asked for)."""
    if report is None:
        return
    check_file(report, option="--report", is_ours=is_run_report, outs=(out,))
    folder = Path(report).resolve().parent
    if not os.access(folder, os.W_OK | os.X_OK):
        msg = (
            f"--report {report}: cannot write it: its folder {folder} is missing or "
            "read-only; nothing was run.\nHint: choose a writable place for the report."
        )
        raise OutputError(msg)
