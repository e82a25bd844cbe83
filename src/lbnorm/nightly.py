"""Nightly runs: the pipeline as a scheduled job, timed, checked and reported.

What ``lbnorm run --cache/--health/--intervals/--report`` does: the run itself
(:func:`lbnorm.pipeline.run`), then the analyses the options ask for
(:mod:`lbnorm.analysis`), the tables they make written beside the output, and a
JSON run report (:mod:`lbnorm.output.run_report`) for the scheduler, also when the run
fails. The analyses (``health``, ``intervals``) work on pandas frames and are
loaded only when asked for: a run with ``--cache`` and ``--report`` alone loads
no pandas.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lbnorm._runtime import entry_point
from lbnorm.core.errors import LbnormError
from lbnorm.core.options import DEFAULT_SUITE, ProgressCallback, RunOptions
from lbnorm.core.version import lbnorm_version
from lbnorm.engines.result import Result
from lbnorm.output.run_report import (
    build_run_report,
    format_run_report,
    is_run_report,
)
from lbnorm.output.transaction import (
    check_not_in_output,
    check_own_file,
    write_bytes_atomically,
)
from lbnorm.output.writer import add_tables, write_result
from lbnorm.pipeline import run
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
    cache, report = options.cache, options.report
    if report is not None:  # before the work, and before a failure report goes there
        check_not_in_output(report, option="--report", outs=(out,))
        check_own_file(report, option="--report", is_ours=is_run_report)
    health_config = None
    if options.health_config:
        from lbnorm.analysis.health import HealthConfig  # (checked before the run)

        health_config = HealthConfig.from_toml(options.health_config)
    started = time.perf_counter()
    started_at = _now()
    stages: dict[str, float] = {}
    tables: dict[str, pd.DataFrame] = {}
    checked: pd.DataFrame | None = None
    min_models = 30  # replaced by the thresholds' own when the checks run
    try:
        if cache is not None:
            from lbnorm.readers.cache import (  # the parse cache: only when used
                check_cache_location,
            )

            check_cache_location(cache, out)  # before any work: every run replaces out
        mark = time.perf_counter()
        result = run(inputs, suite=suite, options=options, progress=progress)
        elapsed = time.perf_counter() - mark
        parse = (
            float((cache_stats(result.file_table) or {}).get("seconds", 0.0))
            if cache
            else 0.0
        )
        if cache:
            stages["read (parse cache)"] = parse
        stages["normalize" if cache else "read and normalize"] = elapsed - parse
        subtasks = (
            result.subtasks if options.intervals or options.health else None
        )  # the analyses take frames: pandas from here on, and only for them
        if options.intervals and subtasks is not None and len(subtasks):
            from lbnorm.analysis.uncertainty import estimate_uncertainty

            mark = time.perf_counter()
            tables["intervals"] = estimate_uncertainty(
                subtasks, result.leaderboard, result.suite, missing=result.missing
            ).leaderboard
            stages["intervals"] = time.perf_counter() - mark
        if options.health and subtasks is not None:
            from lbnorm.analysis.health import HealthConfig, check_result

            mark = time.perf_counter()
            min_models = (health_config or HealthConfig()).min_models
            checked = check_result(
                subtasks,
                result.leaderboard,
                result.suite,
                missing=result.missing,
                config=health_config,
            )
            tables["health"] = checked
            stages["health"] = time.perf_counter() - mark
        mark = time.perf_counter()
        write_result(result, Path(out))
        if tables:
            add_tables(Path(out), tables)
        stages["write"] = time.perf_counter() - mark
    except (LbnormError, KeyboardInterrupt) as exc:
        if report is not None:
            stages["total"] = time.perf_counter() - started
            failed = build_run_report(
                None,
                version=lbnorm_version(),
                started_at=started_at,
                finished_at=_now(),
                out=None,
                stages=stages,
                error=exc,
            )
            write_bytes_atomically(Path(report), format_run_report(failed).encode())
        raise
    stages["total"] = time.perf_counter() - started
    document = build_run_report(
        result,
        version=lbnorm_version(),
        started_at=started_at,
        finished_at=_now(),
        out=str(out),
        stages=stages,
        health=checked,
        min_models=min_models,
    )
    if report is not None:
        write_bytes_atomically(Path(report), format_run_report(document).encode())
    return MonitoredRun(result=result, report=document, tables=tables)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
