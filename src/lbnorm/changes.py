"""Baseline changes and nightly runs, composed as typed functions.

What ``lbnorm diff``, ``impact``, ``health`` and ``run --cache/--health/
--intervals/--report`` do. The analyses themselves live in :mod:`lbnorm.analysis` (frames in, frames out);
this module reads output directories and tables, runs the pipeline, and hands
tables to :mod:`lbnorm.writer`. The command line only parses and prints.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pyarrow.parquet as pq

from lbnorm.analysis.diff import Diff, Snapshot, diff_results
from lbnorm.analysis.health import (
    HealthConfig,
    benchmark_columns,
    check_health,
    check_result,
)
from lbnorm.analysis.impact import override_bounds, parse_bound_override
from lbnorm.analysis.uncertainty import estimate_uncertainty
from lbnorm.errors import LbnormError
from lbnorm.kernel import MissingPolicy
from lbnorm.pipeline import Result, run
from lbnorm.run_report import build_run_report, format_run_report
from lbnorm.schemas import KEY_COLUMNS
from lbnorm.suites import Suite, load_suite

__all__ = [
    "MonitoredRun",
    "check_source",
    "compare_suites",
    "output_suite",
    "read_snapshot",
    "read_wide_table",
    "run_monitored",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class MonitoredRun:
    """A run with its report and the extra tables written beside its output.

    Attributes:
        result: The normalized leaderboard.
        report: The run report (see :mod:`lbnorm.run_report`).
        tables: ``health`` and/or ``intervals``, as written to the output.
    """

    result: Result
    report: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def run_monitored(
    inputs: Sequence[str | Path] = (),
    *,
    out: str | Path,
    suite: Suite | str | Path = "openllm-v2",
    cache: str | Path | None = None,
    full_rebuild: bool = False,
    health: bool = False,
    health_config: HealthConfig | None = None,
    intervals: bool = False,
    report: str | Path | None = None,
    progress: Callable[[str, int, int], None] | None = None,
    **options: Any,
) -> MonitoredRun:
    """Run the pipeline as a nightly job: timed stages, checks, a report.

    Args:
        inputs: As for :func:`lbnorm.run` (empty: the bundled demo).
        out: The output directory.
        suite: The suite.
        cache: A parse cache directory (see :mod:`lbnorm.cache`).
        full_rebuild: Rebuild the cache.
        health: Run the health checks and write ``health.parquet``.
        health_config: Their thresholds.
        intervals: Compute rank intervals and write ``intervals.parquet``.
        report: Write the JSON run report here (also if the run fails).
        progress: Progress callback for reading.
        **options: Passed to :func:`lbnorm.run` (``missing``, ``metadata``, ...).

    Returns:
        The result, its report (``report["exit_code"]`` is 0 or 7) and tables.

    Raises:
        LbnormError: The run did not run; the report (if asked for) says why.
    """
    from lbnorm.writer import (
        add_tables,
        lbnorm_version,
        write_bytes_atomically,
        write_result,
    )

    started = time.perf_counter()
    started_at = _now()
    stages: dict[str, float] = {}
    tables: dict[str, pd.DataFrame] = {}
    checked: pd.DataFrame | None = None
    try:
        mark = time.perf_counter()
        result = run(
            inputs,
            suite=suite,
            cache=cache,
            full_rebuild=full_rebuild,
            progress=progress,
            **options,
        )
        elapsed = time.perf_counter() - mark
        parse = (
            float(result.files.attrs.get("cache", {}).get("seconds", 0.0))
            if cache
            else 0.0
        )
        if cache:
            stages["read (parse cache)"] = parse
        stages["normalize" if cache else "read and normalize"] = elapsed - parse
        subtasks = (
            result.subtasks
            if result.subtask_table is not None
            else result.subtasks.iloc[:0]
        )
        if intervals and len(subtasks):
            mark = time.perf_counter()
            tables["intervals"] = estimate_uncertainty(
                subtasks, result.leaderboard, result.suite, missing=result.missing
            ).leaderboard
            stages["intervals"] = time.perf_counter() - mark
        if health:
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
    )
    if report is not None:
        write_bytes_atomically(Path(report), format_run_report(document).encode())
    return MonitoredRun(result=result, report=document, tables=tables)


def compare_suites(
    inputs: Sequence[str | Path] = (),
    *,
    suites: Sequence[str | Path] = ("openllm-v2",),
    set_bounds: Sequence[str] = (),
    intervals: bool = True,
    moved_places: int = 10,
    top: Sequence[int] = (10, 50, 100),
    **options: Any,
) -> Diff:
    """The same inputs under two suites: what a baseline change does.

    Args:
        inputs: As for :func:`lbnorm.run` (empty: the bundled demo).
        suites: The old suite and the new one; with one, the new one is the old
            with `set_bounds`.
        set_bounds: Bound overrides for the new suite (``GPQA=0.3``).
        intervals: Count rank moves beyond the rank intervals.
        moved_places: N in "moved more than N places".
        top: The k of the top-k overlaps.
        **options: Passed to :func:`lbnorm.run` (``missing``, ...).

    Returns:
        The differences, labelled with the suites' names.

    Raises:
        SuiteError: A suite or an override is invalid.
        ValueError: Not exactly one change to compare (no suite pair, no override).
    """
    if not 1 <= len(suites) <= 2 or (len(suites) == 1 and not set_bounds):
        msg = (
            "impact compares two suites: give two suites, or one and bound overrides.\n"
            "Hint: lbnorm impact --set-bound GPQA=0.3, or --suite OLD --suite NEW."
        )
        raise ValueError(msg)
    old_suite = load_suite(suites[0])
    new_suite = load_suite(suites[-1]) if len(suites) == 2 else old_suite
    if set_bounds:
        new_suite = override_bounds(
            new_suite, [parse_bound_override(text) for text in set_bounds]
        )
    old = run(inputs, suite=old_suite, **options)
    new = run(inputs, suite=new_suite, **options)
    return diff_results(
        old, new, intervals=intervals, moved_places=moved_places, top=top
    )


def read_snapshot(
    out: str | Path, *, intervals: bool = True, columns: Sequence[str] = ()
) -> Snapshot:
    """Read an output directory as one side of a diff.

    Rank intervals come from its ``intervals.parquet`` if there is one, else are
    computed from the subtasks' stderr when the suite can still be loaded
    unchanged (see :func:`output_suite`).

    Args:
        out: The output directory.
        intervals: Read or compute rank intervals.
        columns: More subtask columns to read.

    Returns:
        The snapshot.

    Raises:
        InputError: Not an output directory, or unreadable.
    """
    from lbnorm.query import check_output, read_output_table

    folder = check_output(out)
    leaderboard = read_output_table(folder, "leaderboard")
    wanted = [
        *KEY_COLUMNS,
        "benchmark",
        "subtask",
        "lower_bound",
        "is_clipped",
        *columns,
    ]
    if intervals:
        wanted += ["raw_score", "stderr", "n_samples"]
    subtasks = read_output_table(
        folder, "subtasks", columns=list(dict.fromkeys(wanted))
    )
    table = None
    if intervals and (folder / "intervals.parquet").is_file():
        table = pd.read_parquet(folder / "intervals.parquet")
    elif intervals and len(subtasks):
        suite, missing = output_suite(folder)
        if suite is not None:
            table = estimate_uncertainty(
                subtasks, leaderboard, suite, missing=missing
            ).leaderboard
    return Snapshot(
        leaderboard=leaderboard,
        benchmarks=benchmark_columns(leaderboard),
        subtasks=subtasks if len(subtasks) else None,
        intervals=table,
        label=str(out),
    )


def output_suite(out: str | Path) -> tuple[Suite | None, MissingPolicy]:
    """The suite an output was computed under, if it still loads with the same hash.

    Returns:
        The suite (None if it is gone or changed; a note goes to stderr) and the
        output's missing-data policy.
    """
    from lbnorm.query import read_manifest

    manifest = read_manifest(out)
    info = manifest.get("suite")
    options = manifest.get("options")
    info = info if isinstance(info, dict) else {}
    options = options if isinstance(options, dict) else {}
    missing = cast("MissingPolicy", str(options.get("missing", "exclude")))
    source = str(info.get("source", ""))
    try:
        suite: Suite | None = (
            load_suite(source.removeprefix("builtin:")) if source else None
        )
    except LbnormError:
        suite = None
    if suite is None or suite.sha256 != info.get("sha256"):
        print(
            f"lbnorm: note: {out}: its suite {source!r} is gone or changed; no rank "
            "intervals or stderr-aware floors for this output.",
            file=sys.stderr,
        )
        return None, missing
    return suite, missing


def read_wide_table(path: str | Path) -> pd.DataFrame | None:
    """Read a published-style leaderboard (``X`` and ``X Raw`` columns), else None.

    Args:
        path: A ``.csv`` or ``.parquet`` file.

    Returns:
        The table, or None if the file is not such a table (e.g. long-format scores).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if not path.is_file() or suffix not in {".csv", ".parquet", ".pq"}:
        return None
    if suffix == ".csv":
        names = list(pd.read_csv(path, nrows=0).columns)
    else:
        names = list(pq.read_schema(path).names)
    if not benchmark_columns(pd.DataFrame(columns=names)):
        return None
    return pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)


def check_source(
    sources: Sequence[str | Path],
    *,
    suite: Suite | str | Path = "openllm-v2",
    config: HealthConfig | None = None,
) -> tuple[pd.DataFrame, str]:
    """Health of whatever `sources` is: an output directory, a wide table, or inputs.

    Args:
        sources: One output directory; or one wide table (benchmark checks only);
            or inputs to normalize (none: the bundled demo).
        suite: The suite for inputs.
        config: Thresholds.

    Returns:
        The health table and a title naming what was checked.
    """
    paths = [Path(source) for source in sources]
    if len(paths) == 1 and (paths[0] / "manifest.json").is_file():
        snapshot = read_snapshot(
            paths[0], intervals=False, columns=["raw_score", "stderr", "n_samples"]
        )
        output_suite_, missing = output_suite(paths[0])
        subtasks = (
            snapshot.subtasks if snapshot.subtasks is not None else pd.DataFrame()
        )
        if output_suite_ is not None:
            health = check_result(
                subtasks,
                snapshot.leaderboard,
                output_suite_,
                missing=missing,
                config=config,
            )
        else:
            health = check_health(
                snapshot.leaderboard, subtasks=snapshot.subtasks, config=config
            )
        return health, f"lbnorm health: {paths[0]}"
    if len(paths) == 1 and (table := read_wide_table(paths[0])) is not None:
        return check_health(
            table, config=config
        ), f"lbnorm health: {paths[0]} (benchmark checks only)"
    result = run(paths, suite=suite)
    health = check_result(
        result.subtasks,
        result.leaderboard,
        result.suite,
        missing=result.missing,
        config=config,
    )
    named = ", ".join(map(str, paths)) if paths else "the bundled demo"
    return health, f"lbnorm health: {named}"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
