"""Is a benchmark broken? Automatic versions of the DROP deep dive's plot.

The Open LLM Leaderboard found DROP broken by plotting it against the average of
the other benchmarks: most models sat near the floor whatever their average. The
checks here do that for every benchmark and subtask at once, over all models:

Per benchmark (columns of the leaderboard, 0-100):

* ``loo_correlation``: Spearman's rho of the benchmark with the leave-one-out
  average (the weighted mean of the *other* benchmarks) is at least
  ``min_loo_spearman``;
* ``floor`` / ``ceiling``: at most ``max_floor_rate`` of the models score within
  noise of 0 (``max(floor_points, noise_z * stderr)``; clipped scores are 0), and
  at most ``max_ceiling_rate`` within noise of 100;
* ``stuck_cluster``: not (a share of at least ``min_stuck_share`` of the models in
  the low band, the lowest ``stuck_band`` of the benchmark's range (1st to 99th
  percentile), *and* their leave-one-out averages spread at least
  ``min_stuck_spread`` times as wide (interquartile range) as everyone's). A hard
  benchmark's low band holds the weak models, whose averages are low too; a
  broken one's holds models of every strength.

Per subtask (the subtask table):

* ``bound_above_scores``: the lower bound is not above every observed raw score
  (a wrong ``num_choices``, or a broken task);
* ``subtask_correlation``: Spearman's rho of the subtask with the mean of the
  other subtasks of its benchmark (unclipped normalized scores) is at least
  ``min_subtask_spearman`` (not checked for single-subtask benchmarks).

Per subtask, for a run told ``--comparability`` (read from its manifest):

* ``comparability``: every variant's score was run with the majority's settings
  (few-shot count, sample limit, task and harness versions; see
  :mod:`lbnorm.readers.comparability`). Its rows have level ``comparability``
  and name the differing settings in ``failed``; ``n_models`` counts the variants
  that differ. A run not told to compare has no such rows.

A check runs on at least ``min_models`` models, else it is ``skipped``. The
defaults, and what they say about the published v2 leaderboard, are justified in
``docs/changes-and-health.md``.

Each figure has one function (:func:`leave_one_out`, :func:`loo_spearman`,
:func:`noise_margin`, :func:`floor_rate`, :func:`ceiling_rate`,
:func:`stuck_cluster`), and every face uses them: ``lbnorm health OUT`` and the
HTML report both call :func:`check_directory`.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm.analysis.align import group_codes
from lbnorm.analysis.correlation import spearman_columns
from lbnorm.analysis.diff import Snapshot, read_snapshot
from lbnorm.analysis.uncertainty import estimate_uncertainty
from lbnorm.core.errors import HealthConfigError, InputError
from lbnorm.core.files import file_format, read_option_file
from lbnorm.core.options import DEFAULT_SUITE, MissingPolicy
from lbnorm.core.schemas import KEY_COLUMNS, benchmark_columns
from lbnorm.output.reader import Output
from lbnorm.pipeline import run
from lbnorm.suites import Suite

__all__ = [
    "HEALTH_COLUMNS",
    "HealthConfig",
    "HealthConfigError",
    "OutputHealth",
    "ceiling_rate",
    "check_benchmarks",
    "check_directory",
    "check_health",
    "check_result",
    "check_source",
    "check_subtasks",
    "floor_rate",
    "is_healthy",
    "leave_one_out",
    "loo_spearman",
    "noise_margin",
    "stuck_cluster",
]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

#: The health table's columns, in order: one row per benchmark, then per subtask.
HEALTH_COLUMNS: tuple[str, ...] = (
    "level",
    "benchmark",
    "subtask",
    "n_models",
    "loo_spearman",
    "floor_rate",
    "ceiling_rate",
    "stuck_share",
    "stuck_spread",
    "lower_bound",
    "max_raw_score",
    "below_bound_rate",
    "rest_spearman",
    "status",
    "failed",
)
_MIN_BAND_MODELS = 10
#: Each threshold's range: shares, correlations, margins, the fewest models.
_RANGES = (
    (("max_floor_rate", "max_ceiling_rate", "stuck_band", "min_stuck_share"), 0, 1),
    (("min_loo_spearman", "min_subtask_spearman"), -1, 1),
    (("floor_points", "noise_z", "min_stuck_spread"), 0, np.inf),
    (("min_models",), 3, np.inf),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HealthConfig:
    """Thresholds of the health checks (see the module docstring for each check).

    Attributes:
        min_loo_spearman: Least rho with the leave-one-out average.
        max_floor_rate: Most models allowed within noise of 0.
        max_ceiling_rate: Most models allowed within noise of 100.
        floor_points: Noise margin in normalized points when no stderr is known
            (and the least margin when one is).
        noise_z: Standard errors that count as "within noise".
        stuck_band: Width of the low band, as a share of the benchmark's range.
        min_stuck_share: Share of models in the low band that makes a cluster.
        min_stuck_spread: Spread of the cluster's leave-one-out averages, relative
            to everyone's, that makes it stuck.
        min_subtask_spearman: Least rho of a subtask with the rest of its benchmark.
        min_models: Fewest models a check runs on.
    """

    min_loo_spearman: float = 0.5
    max_floor_rate: float = 0.5
    max_ceiling_rate: float = 0.5
    floor_points: float = 1.0
    noise_z: float = 1.96
    stuck_band: float = 0.1
    min_stuck_share: float = 0.5
    min_stuck_spread: float = 0.75
    min_subtask_spearman: float = 0.2
    min_models: int = 30

    def __post_init__(self) -> None:
        bad = [
            f"{name}={getattr(self, name)!r}"
            for names, least, most in _RANGES
            for name in names
            if not least <= getattr(self, name) <= most
        ]
        if bad:
            msg = (
                f"health thresholds out of range: {', '.join(bad)}.\n"
                "Hint: shares are in [0, 1], correlations in [-1, 1], margins >= 0, "
                "min_models >= 3."
            )
            raise HealthConfigError(msg)

    @classmethod
    def from_mapping(
        cls, values: Mapping[str, Any], *, source: str = "<mapping>"
    ) -> HealthConfig:
        """Build a config from a mapping of thresholds (the others keep defaults).

        Raises:
            HealthConfigError: An unknown key, a non-number, or a value out of range.

        Examples:
            >>> HealthConfig.from_mapping({"min_loo_spearman": 0.4}).min_loo_spearman
            0.4
        """
        known = {field.name: field.type for field in fields(cls)}
        if unknown := sorted(set(values) - set(known)):
            msg = f"{source}: unknown health threshold(s) {unknown}.\nHint: known ones are {sorted(known)}."
            raise HealthConfigError(msg)
        typed: dict[str, Any] = {}
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                msg = f"{source}: {name} must be a number, got {value!r}.\nHint: e.g. {name} = {getattr(cls(), name)!r}."
                raise HealthConfigError(msg)
            typed[name] = int(value) if name == "min_models" else float(value)
        return cls(**typed)

    @classmethod
    def from_toml(cls, path: str | Path) -> HealthConfig:
        """Load thresholds from a TOML file: top-level keys or a ``[health]`` table.

        Raises:
            InputError: The file is missing or not TOML.
            HealthConfigError: A threshold is unknown or out of range.
        """
        path = Path(path)
        try:
            data = read_option_file(path, option="--health-config")
            document = tomllib.loads(data.decode("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            msg = f"{path}: cannot read the health thresholds: {exc}.\nHint: write TOML, e.g. min_loo_spearman = 0.5."
            raise InputError(msg) from exc
        except RecursionError as exc:  # tomllib reads nesting recursively
            msg = f"{path}: cannot read the health thresholds: arrays or tables nest too deeply.\nHint: write TOML key = value lines, e.g. min_loo_spearman = 0.5."
            raise InputError(msg) from exc
        table = document.get("health", document)
        if not isinstance(table, dict):
            msg = f"{path}: [health] must be a table.\nHint: write [health] then key = value lines."
            raise HealthConfigError(msg)
        return cls.from_mapping(table, source=str(path))


def leave_one_out(
    scores: pd.DataFrame, *, weights: Sequence[float] | None = None
) -> pd.DataFrame:
    """The leave-one-out average: each score's variant, without that benchmark.

    The weighted mean of the variant's *other* benchmarks that have a score (the
    leaderboard's weights, default equal). Every health figure that compares a
    benchmark with "the rest", and the report's scatter plots, use this one.

    Args:
        scores: One row per model variant, one column per benchmark (NaN where
            missing).
        weights: Benchmark weights, in column order (default equal).

    Returns:
        Same shape, index and columns: NaN where the score is missing or the
        variant has no other benchmark.

    Examples:
        >>> scores = pd.DataFrame({"A": [10.0, 20.0], "B": [30.0, 50.0], "C": [50.0, np.nan]})
        >>> leave_one_out(scores)
              A     B     C
        0  40.0  30.0  20.0
        1  50.0  20.0   NaN
        >>> leave_one_out(scores, weights=[1.0, 1.0, 2.0]).round(2)["A"].tolist()
        [43.33, 50.0]
    """
    values = scores.to_numpy(dtype=np.float64, na_value=np.nan)
    weight = (
        np.ones(values.shape[1])
        if weights is None
        else np.asarray(weights, dtype=np.float64)
    )
    is_present = ~np.isnan(values)
    filled = np.where(is_present, values, 0.0)
    total = filled @ weight
    total_weight = is_present @ weight
    rest_weight = total_weight[:, None] - is_present * weight
    with np.errstate(invalid="ignore", divide="ignore"):
        others = (total[:, None] - filled * weight) / rest_weight
    others = np.where(is_present & (rest_weight > 0), others, np.nan)
    return pd.DataFrame(others, index=scores.index, columns=scores.columns)


def loo_spearman(scores: pd.DataFrame, others: pd.DataFrame) -> pd.Series:
    """Spearman's rho of each benchmark with its leave-one-out average.

    Args:
        scores: One column per benchmark.
        others: :func:`leave_one_out` of `scores`.

    Returns:
        rho per benchmark, over the variants with both (NaN under 3).

    Examples:
        >>> scores = pd.DataFrame({"A": [1.0, 2.0, 3.0, 4.0], "B": [2.0, 1.0, 4.0, 3.0],
        ...     "C": [1.0, 2.0, 3.0, 5.0]})
        >>> loo_spearman(scores, leave_one_out(scores)).round(2).tolist()
        [0.95, 0.6, 0.89]
    """
    return spearman_columns(scores, others)


def noise_margin(
    scores: pd.DataFrame,
    *,
    stderr: pd.DataFrame | None = None,
    config: HealthConfig | None = None,
) -> pd.DataFrame:
    """How close to 0 (or 100) a score must be to count as at the floor (ceiling).

    ``max(floor_points, noise_z * stderr)`` where the stderr is known, else
    ``floor_points`` (normalized points).

    Args:
        scores: One column per benchmark.
        stderr: Standard errors of `scores`, same shape (NaN where unknown).
        config: Thresholds (``floor_points``, ``noise_z``).

    Returns:
        The margin per score, same shape as `scores`.

    Examples:
        >>> scores = pd.DataFrame({"A": [3.0, 50.0]})
        >>> noise_margin(scores, stderr=pd.DataFrame({"A": [2.0, np.nan]}))["A"].tolist()
        [3.92, 1.0]
    """
    config = config or HealthConfig()
    margin = np.full(scores.shape, config.floor_points)
    if stderr is not None:
        noise = config.noise_z * stderr.to_numpy(dtype=np.float64, na_value=np.nan)
        margin = np.fmax(margin, noise)
    return pd.DataFrame(margin, index=scores.index, columns=scores.columns)


def floor_rate(
    scores: pd.DataFrame, others: pd.DataFrame, *, margin: pd.DataFrame
) -> pd.Series:
    """Share (a fraction, 0-1) of the models within noise of 0.

    Counted over the variants with a score and a leave-one-out average (the
    models every benchmark figure is over); a clipped score is 0, so it counts.

    Args:
        scores: One column per benchmark (0-100).
        others: :func:`leave_one_out` of `scores`.
        margin: :func:`noise_margin` of `scores`.

    Returns:
        The share per benchmark (NaN without models).

    Examples:
        >>> scores = pd.DataFrame({"A": [0.0, 0.5, 40.0, 60.0], "B": [10.0, 20.0, 30.0, 40.0]})
        >>> others = leave_one_out(scores)
        >>> floor_rate(scores, others, margin=noise_margin(scores)).tolist()
        [0.5, 0.0]
    """
    values, is_used = _used(scores, others)
    with np.errstate(invalid="ignore"):
        at_floor = is_used & (values <= margin.to_numpy(dtype=np.float64))
        share = at_floor.sum(axis=0) / is_used.sum(axis=0)
    return pd.Series(share, index=scores.columns, dtype="float64")


def ceiling_rate(
    scores: pd.DataFrame, others: pd.DataFrame, *, margin: pd.DataFrame
) -> pd.Series:
    """Share (a fraction, 0-1) of the models within noise of 100.

    Counted as :func:`floor_rate` counts.

    Examples:
        >>> scores = pd.DataFrame({"A": [99.5, 100.0, 40.0, 60.0], "B": [10.0, 20.0, 30.0, 40.0]})
        >>> ceiling_rate(scores, leave_one_out(scores), margin=noise_margin(scores)).tolist()
        [0.5, 0.0]
    """
    values, is_used = _used(scores, others)
    with np.errstate(invalid="ignore"):
        at_ceiling = is_used & (values >= 100.0 - margin.to_numpy(dtype=np.float64))
        share = at_ceiling.sum(axis=0) / is_used.sum(axis=0)
    return pd.Series(share, index=scores.columns, dtype="float64")


def stuck_cluster(
    scores: pd.DataFrame, others: pd.DataFrame, *, config: HealthConfig | None = None
) -> pd.DataFrame:
    """The low band of each benchmark, and how widely its models' averages spread.

    Args:
        scores: One column per benchmark (0-100).
        others: :func:`leave_one_out` of `scores`.
        config: Thresholds (``stuck_band``).

    Returns:
        Per benchmark: ``stuck_share`` (fraction of the models in the lowest
        ``stuck_band`` of the 1st-99th percentile range) and ``stuck_spread``
        (interquartile range of their leave-one-out averages over everyone's;
        NaN when the band holds fewer than 10 models).
    """
    config = config or HealthConfig()
    values, is_used = _used(scores, others)
    values = np.where(is_used, values, np.nan)
    others_values = others.to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        low, high = _nanpercentile(values, 1.0), _nanpercentile(values, 99.0)
        in_band = values <= low + config.stuck_band * (high - low)
        band_count = in_band.sum(axis=0)
        share = band_count / (~np.isnan(values)).sum(axis=0)
        spread = _iqr(np.where(in_band, others_values, np.nan)) / _iqr(
            np.where(np.isnan(values), np.nan, others_values)
        )
    spread = np.where(band_count >= _MIN_BAND_MODELS, spread, np.nan)
    return pd.DataFrame(
        {
            "stuck_share": share.astype(np.float64),
            "stuck_spread": spread.astype(np.float64),
        },
        index=scores.columns,
    )


def check_benchmarks(
    scores: pd.DataFrame,
    *,
    stderr: pd.DataFrame | None = None,
    weights: Sequence[float] | None = None,
    config: HealthConfig | None = None,
) -> pd.DataFrame:
    """Check each benchmark against the leave-one-out average of the others.

    Each figure comes from its one function: :func:`leave_one_out`,
    :func:`loo_spearman`, :func:`floor_rate` and :func:`ceiling_rate` (with
    :func:`noise_margin`), :func:`stuck_cluster`; all are over the same models
    (``n_models``: a score and a leave-one-out average).

    Args:
        scores: One row per model variant, one column per benchmark (0-100, NaN
            where missing).
        stderr: Standard errors of `scores`, same shape (NaN where unknown).
        weights: Benchmark weights in the average (default equal).
        config: Thresholds.

    Returns:
        One row per benchmark, in :data:`HEALTH_COLUMNS` order (subtask columns
        null).

    Examples:
        >>> rng = np.random.default_rng(0)
        >>> skill = rng.uniform(0, 60, 500)
        >>> is_stuck = rng.random(500) < 0.8  # DROP-like: most models stuck near 5
        >>> scores = pd.DataFrame({"A": skill + rng.normal(0, 3, 500),
        ...     "B": skill + rng.normal(0, 3, 500),
        ...     "C": np.where(is_stuck, rng.uniform(2, 8, 500), skill)})
        >>> health = check_benchmarks(scores)
        >>> health[["benchmark", "loo_spearman", "stuck_share", "stuck_spread"]].round(2)
          benchmark  loo_spearman  stuck_share  stuck_spread
        0         A          0.91         0.10          0.20
        1         B          0.91         0.07          0.18
        2         C          0.01         0.79          1.02
        >>> health["failed"].tolist()
        ['', '', 'loo_correlation, stuck_cluster']
    """
    config = config or HealthConfig()
    scores = scores.set_axis([str(name) for name in scores.columns], axis=1)
    others = leave_one_out(scores, weights=weights)
    n_models = _used(scores, others)[1].sum(axis=0)
    rho = loo_spearman(scores, others).to_numpy()
    margin = noise_margin(scores, stderr=stderr, config=config)
    floor = floor_rate(scores, others, margin=margin).to_numpy()
    ceiling = ceiling_rate(scores, others, margin=margin).to_numpy()
    stuck = stuck_cluster(scores, others, config=config)
    share = stuck["stuck_share"].to_numpy()
    spread = stuck["stuck_spread"].to_numpy()
    with np.errstate(invalid="ignore"):
        checks = {
            "loo_correlation": rho < config.min_loo_spearman,
            "floor": floor > config.max_floor_rate,
            "ceiling": ceiling > config.max_ceiling_rate,
            "stuck_cluster": (share >= config.min_stuck_share)
            & (spread >= config.min_stuck_spread),
        }
    frame = pd.DataFrame(
        {
            "level": "benchmark",
            "benchmark": list(scores.columns),
            "subtask": "",
            "n_models": n_models.astype(np.int64),
            "loo_spearman": rho,
            "floor_rate": floor,
            "ceiling_rate": ceiling,
            "stuck_share": share,
            "stuck_spread": spread,
        }
    )
    return _finish(frame, checks, is_skipped=n_models < config.min_models)


def check_subtasks(
    subtasks: pd.DataFrame, *, config: HealthConfig | None = None
) -> pd.DataFrame:
    """Check each subtask's bound and its agreement with the rest of its benchmark.

    Args:
        subtasks: The subtask table: variant keys, ``benchmark``, ``subtask``,
            ``raw_score`` and ``lower_bound``.
        config: Thresholds.

    Returns:
        One row per subtask (in order of first appearance), in
        :data:`HEALTH_COLUMNS` order (benchmark-level columns null).
    """
    config = config or HealthConfig()
    if len(subtasks) == 0:
        return pd.DataFrame({name: pd.Series(dtype=object) for name in HEALTH_COLUMNS})
    variant = group_codes(subtasks, KEY_COLUMNS)[0]
    subtask, first = group_codes(subtasks, ["benchmark", "subtask"])
    names = (
        subtasks.iloc[first][["benchmark", "subtask"]]
        .astype("str")
        .reset_index(drop=True)
    )
    raw = subtasks["raw_score"].to_numpy(dtype=np.float64)
    lower = subtasks["lower_bound"].to_numpy(dtype=np.float64)
    shape = (int(variant.max()) + 1, len(first))
    matrix = np.full(shape, np.nan)
    matrix[variant, subtask] = (raw - lower) / (1.0 - lower)  # unclipped: no ties at 0
    is_present = ~np.isnan(matrix)
    benchmark = group_codes(names, ["benchmark"])[0]
    member = np.zeros((len(first), int(benchmark.max()) + 1))
    member[np.arange(len(first)), benchmark] = 1.0
    sums = np.where(is_present, matrix, 0.0) @ member
    counts = is_present @ member
    with np.errstate(invalid="ignore", divide="ignore"):
        rest = (sums[:, benchmark] - np.where(is_present, matrix, 0.0)) / (
            counts[:, benchmark] - 1.0
        )
    rest = np.where(is_present & (counts[:, benchmark] > 1), rest, np.nan)
    rho = spearman_columns(pd.DataFrame(matrix), pd.DataFrame(rest)).to_numpy()
    n_models = is_present.sum(axis=0)
    max_raw = np.full(len(first), -np.inf)
    np.maximum.at(max_raw, subtask, raw)
    below = np.bincount(subtask, weights=raw < lower, minlength=len(first)) / n_models
    bound = lower[first]
    checks = {
        "bound_above_scores": bound > max_raw,
        "subtask_correlation": rho < config.min_subtask_spearman,
    }
    frame = names.assign(
        level="subtask",
        n_models=n_models.astype(np.int64),
        lower_bound=bound,
        max_raw_score=max_raw,
        below_bound_rate=below,
        rest_spearman=rho,
    )
    return _finish(frame, checks, is_skipped=n_models < config.min_models)


def check_health(
    leaderboard: pd.DataFrame,
    *,
    benchmarks: Sequence[str] | None = None,
    subtasks: pd.DataFrame | None = None,
    stderr: pd.DataFrame | None = None,
    weights: Sequence[float] | None = None,
    config: HealthConfig | None = None,
) -> pd.DataFrame:
    """Run every check: benchmarks from the leaderboard, subtasks if given.

    Args:
        leaderboard: One row per variant with a column per benchmark (lbnorm's
            leaderboard, or a published table with ``X`` and ``X Raw`` columns).
        benchmarks: The benchmark columns; default :func:`benchmark_columns`.
        subtasks: The subtask table, for the subtask checks.
        stderr: Standard errors of the benchmark scores, aligned with
            ``leaderboard[benchmarks]``.
        weights: Benchmark weights in the average (default equal).
        config: Thresholds.

    Returns:
        The health table (:data:`HEALTH_COLUMNS`): benchmarks, then subtasks.

    Raises:
        InputError: No benchmark columns were found.
    """
    config = config or HealthConfig()
    names = (
        list(benchmarks)
        if benchmarks is not None
        else benchmark_columns(leaderboard.columns)
    )
    if len(names) < 2:
        msg = (
            f"need at least two benchmark columns to compare, found {names}.\n"
            "Hint: pass a leaderboard with a column per benchmark and its '<name> Raw' "
            "column, or name the benchmarks."
        )
        raise InputError(msg)
    tables = [
        check_benchmarks(
            leaderboard[names], stderr=stderr, weights=weights, config=config
        )
    ]
    if subtasks is not None and len(subtasks):
        tables.append(check_subtasks(subtasks, config=config))
    return pd.concat(tables, ignore_index=True)[list(HEALTH_COLUMNS)]


def check_result(
    subtasks: pd.DataFrame,
    leaderboard: pd.DataFrame,
    suite: Suite,
    *,
    missing: MissingPolicy = "exclude",
    config: HealthConfig | None = None,
) -> pd.DataFrame:
    """Check a normalized result: its benchmarks and its subtasks.

    The floor and ceiling margins use each benchmark score's own noise, from the
    subtasks' stderr (see :mod:`lbnorm.analysis.uncertainty`).

    Args:
        subtasks: The subtask table (may be empty: subtask checks are skipped and
            the floor margin is ``floor_points``).
        leaderboard: The leaderboard.
        suite: The suite the result was computed under (benchmarks, weights).
        missing: The result's missing-data policy.
        config: Thresholds.

    Returns:
        The health table (:data:`HEALTH_COLUMNS`).
    """
    uncertainty = (
        estimate_uncertainty(subtasks, leaderboard, suite, missing=missing)
        if len(subtasks)
        else None
    )
    return check_health(
        leaderboard,
        benchmarks=suite.benchmark_names,
        subtasks=subtasks if len(subtasks) else None,
        stderr=None if uncertainty is None else uncertainty.benchmark_stderr,
        weights=[float(benchmark.weight) for benchmark in suite.benchmarks],
        config=config,
    )


def is_healthy(health: pd.DataFrame) -> bool:
    """True when no check failed (skipped checks pass).

    Examples:
        >>> is_healthy(pd.DataFrame({"status": ["pass", "skipped"]}))
        True
    """
    return not bool((health["status"] == "fail").any())


def _used(scores: pd.DataFrame, others: pd.DataFrame) -> tuple[FloatArray, BoolArray]:
    """The scores as floats, and which count: a score and a leave-one-out average."""
    values = scores.to_numpy(dtype=np.float64, na_value=np.nan)
    is_used = ~np.isnan(values) & ~np.isnan(
        others.to_numpy(dtype=np.float64, na_value=np.nan)
    )
    return values, is_used


def _nanpercentile(values: FloatArray, q: float) -> FloatArray:
    if values.shape[0] == 0:
        return np.full(values.shape[1], np.nan)
    with np.errstate(invalid="ignore"):
        return np.asarray(pd.DataFrame(values).quantile(q / 100.0).to_numpy(np.float64))


def _iqr(values: FloatArray) -> FloatArray:
    return _nanpercentile(values, 75.0) - _nanpercentile(values, 25.0)


def _finish(
    frame: pd.DataFrame, checks: dict[str, BoolArray], *, is_skipped: BoolArray
) -> pd.DataFrame:
    """Add ``status`` and ``failed`` (the failed checks' names, comma-separated)."""
    names = np.array(list(checks), dtype=object)
    failed = np.column_stack([np.asarray(mask, dtype=bool) for mask in checks.values()])
    failed &= ~is_skipped[:, None]
    # one string per benchmark/subtask
    listed = [", ".join(names[row]) for row in failed]
    status = np.where(
        is_skipped, "skipped", np.where(failed.any(axis=1), "fail", "pass")
    )
    frame = frame.assign(status=status, failed=listed)
    for name in HEALTH_COLUMNS:
        if name not in frame.columns:
            frame[name] = np.nan
    return frame[list(HEALTH_COLUMNS)]


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputHealth:
    """The health of an output directory, and what it was computed from.

    Attributes:
        health: The health table (:data:`HEALTH_COLUMNS`), as ``lbnorm health OUT``
            prints it.
        snapshot: The output as read: leaderboard, subtasks (with ``raw_score``,
            ``stderr``, ``n_samples`` and any columns asked for).
        benchmarks: The benchmark columns checked, in order.
        weights: Their weights in the leave-one-out average.
        stderr: The benchmark scores' standard errors, aligned with
            ``snapshot.leaderboard[benchmarks]``; None when the output's suite no
            longer loads (then the floor margin is ``floor_points``).
    """

    health: pd.DataFrame
    snapshot: Snapshot
    benchmarks: tuple[str, ...]
    weights: tuple[float, ...]
    stderr: pd.DataFrame | None


def check_directory(
    out: Output | str | Path,
    *,
    config: HealthConfig | None = None,
    columns: Sequence[str] = (),
) -> OutputHealth:
    """Health of an output directory: what ``lbnorm health OUT`` computes.

    With the suite the output was written under (when it still loads unchanged,
    see :meth:`lbnorm.output.reader.Output.suite`): its benchmarks and weights, and
    floor margins from the subtasks' standard errors. Without it: the
    leaderboard's benchmark columns, equal weights, the fixed margin.

    Args:
        out: The output directory.
        config: Thresholds.
        columns: More subtask columns to read (for callers that show them).

    Returns:
        The health table and the inputs it came from.

    Raises:
        InputError: Not an output directory, or unreadable.
    """
    out = Output.open(out, "leaderboard")
    wanted = list(dict.fromkeys(["raw_score", "stderr", "n_samples", *columns]))
    # (--no-subtasks: benchmark checks only, fixed margins)
    snapshot = read_snapshot(out, intervals=False, columns=wanted)
    board = snapshot.leaderboard
    suite, missing = out.suite()
    stderr = None
    if suite is None:
        names, weights = tuple(snapshot.benchmarks), (1.0,) * len(snapshot.benchmarks)
    else:
        names = tuple(suite.benchmark_names)
        weights = tuple(float(benchmark.weight) for benchmark in suite.benchmarks)
        if snapshot.subtasks is not None:
            uncertainty = estimate_uncertainty(
                snapshot.subtasks, board, suite, missing=missing
            )
            stderr = uncertainty.benchmark_stderr
    health = check_health(
        board,
        benchmarks=names,
        subtasks=snapshot.subtasks,
        stderr=stderr,
        weights=weights,
        config=config,
    )
    return OutputHealth(
        health=_with_comparability(health, out),
        snapshot=snapshot,
        benchmarks=names,
        weights=weights,
        stderr=stderr,
    )


def _with_comparability(health: pd.DataFrame, out: Output) -> pd.DataFrame:
    """`health` and, if the run compared its files' settings, a row per subtask."""
    inputs = out.manifest.get("inputs")
    notes = [
        entry["comparability"]
        for entry in (inputs if isinstance(inputs, list) else [])
        if isinstance(entry, dict) and isinstance(entry.get("comparability"), list)
    ]
    if not notes:  # not compared (lbnorm run without --comparability)
        return health
    differences = pd.DataFrame(
        [{**note, "file": at} for at, file in enumerate(notes) for note in file],
        columns=["benchmark", "subtask", "setting", "value", "majority", "file"],
    )
    subtasks = health.loc[health["level"] == "subtask", ["benchmark", "subtask"]]
    grouped = differences.groupby(["benchmark", "subtask"], sort=False)
    listed = grouped["setting"]
    rows = (
        pd.concat([subtasks, differences[["benchmark", "subtask"]]])
        .drop_duplicates()
        .merge(
            listed.agg(lambda s: ", ".join(dict.fromkeys(s))).rename("failed"),
            on=["benchmark", "subtask"],
            how="left",
        )
        .merge(
            grouped["file"].nunique().rename("n_models"),
            on=["benchmark", "subtask"],
            how="left",
        )
    )
    rows = rows.assign(
        level="comparability",
        n_models=rows["n_models"].fillna(0).astype(np.int64),
        status=np.where(rows["failed"].isna(), "pass", "fail"),
        failed=rows["failed"].fillna(""),
    )
    return pd.concat(
        [health, rows.reindex(columns=list(HEALTH_COLUMNS))], ignore_index=True
    )


def check_source(
    sources: Sequence[str | Path],
    *,
    suite: Suite | str | Path = DEFAULT_SUITE,
    config: HealthConfig | None = None,
) -> tuple[pd.DataFrame, str]:
    """Health of whatever `sources` is: an output directory, a wide table, or inputs.

    Args:
        sources: One output directory (see :func:`check_directory`); or one wide
            table (benchmark checks only); or inputs to normalize (none: the
            bundled demo).
        suite: The suite for inputs.
        config: Thresholds.

    Returns:
        The health table and a title naming what was checked.
    """
    paths = [Path(source) for source in sources]
    if len(paths) == 1 and (paths[0] / "manifest.json").is_file():
        return check_directory(
            paths[0], config=config
        ).health, f"lbnorm health: {paths[0]}"
    if len(paths) == 1 and (table := _read_wide_table(paths[0])) is not None:
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


def _read_wide_table(path: Path) -> pd.DataFrame | None:
    """A published-style leaderboard (``X`` and ``X Raw`` columns), else None."""
    kind = file_format(path)
    if not path.is_file() or kind not in {"csv", "parquet"}:
        return None
    if kind == "csv":
        names = list(pd.read_csv(path, nrows=0).columns)
    else:
        import pyarrow.parquet as pq

        names = list(pq.read_schema(path).names)
    if not any(f"{name} Raw" in names for name in names):
        return None
    return pd.read_csv(path) if kind == "csv" else pd.read_parquet(path)
