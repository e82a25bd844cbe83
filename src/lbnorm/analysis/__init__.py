"""Analyses of normalized leaderboards: outputs in, frames out, no I/O.

* :mod:`~lbnorm.analysis.diff`: what a change did (``lbnorm diff``, ``lbnorm impact``);
* :mod:`~lbnorm.analysis.health`: whether a benchmark is broken (``lbnorm health``);
* :mod:`~lbnorm.analysis.uncertainty`: which differences are real (intervals);
* :mod:`~lbnorm.analysis.impact`: bound overrides for impact studies;
* :mod:`~lbnorm.analysis.correlation`: Spearman's rho and Kendall's tau, numpy only;
* :mod:`~lbnorm.analysis.render`: the Markdown the command line prints.
"""

from __future__ import annotations

from lbnorm.analysis.correlation import kendall_tau, spearman_rho
from lbnorm.analysis.diff import (
    Diff,
    Snapshot,
    bounds_of,
    diff_results,
    diff_snapshots,
    snapshot_of,
)
from lbnorm.analysis.health import HealthConfig, check_health, check_result, is_healthy
from lbnorm.analysis.impact import BoundOverride, override_bounds, parse_bound_override
from lbnorm.analysis.render import format_diff, format_health, format_intervals
from lbnorm.analysis.uncertainty import (
    Uncertainty,
    estimate_uncertainty,
    rank_intervals,
)

__all__ = [
    "BoundOverride",
    "Diff",
    "HealthConfig",
    "Snapshot",
    "Uncertainty",
    "bounds_of",
    "check_health",
    "check_result",
    "diff_results",
    "diff_snapshots",
    "estimate_uncertainty",
    "format_diff",
    "format_health",
    "format_intervals",
    "is_healthy",
    "kendall_tau",
    "override_bounds",
    "parse_bound_override",
    "rank_intervals",
    "snapshot_of",
    "spearman_rho",
]
