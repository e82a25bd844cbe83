"""The Arena's leaderboard views: vote caps, categories, display filters, its own table shape.

FastChat's ``elo_analysis.py`` and ``monitor.py`` around the fit:

* ``--daily-vote-per-user N`` keeps each judge's first ``N`` votes of each
  calendar day (earliest ``tstamp`` first; the day in UTC unless
  ``--vote-day-tz`` names a zone, where FastChat uses the machine's local
  time), applied as ``report_elo_analysis_results`` does: within each category
  and after the ties are left out (``--ties drop``);
* a category is the same fit on the battles meeting a condition; its rank delta
  is the overall rank, re-ranked among the category's shown models, minus the
  category's rank (positive: better in the category; ``ranking_difference``);
* display filters (``recompute_final_ranking``): models with too few battles or
  hidden (deprecated) ones are left out and the rank (UB) is recomputed over
  those shown;
* the export in the Arena's ``leaderboard_table_df`` shape (``rating``,
  ``variance``, ``rating_q975``, ``rating_q025``, ``num_battles``,
  ``final_ranking``), and the observed pairwise win fractions and battle counts
  on decisive battles (``row_beats_col_freq`` and ``battle_counts``).
"""

from __future__ import annotations

import difflib
import zoneinfo
from datetime import datetime

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.core.errors import InputError, OptionsError
from lbnorm.ratings.bradley_terry import count_outcomes, win_matrix
from lbnorm.ratings.fit import Ratings, nullable_floats
from lbnorm.ratings.intervals import rank_by_rating, rank_with_uncertainty
from lbnorm.ratings.options import Battles, BoolArray, FloatArray, IntArray

__all__ = [
    "ARENA_TABLE",
    "CATEGORY_TABLE",
    "OBSERVED_PAIRS",
    "arena_table",
    "category_rows",
    "daily_vote_cap",
    "fitted_battles",
    "observed_pairs",
    "shown_models",
    "time_zone",
    "vote_days",
]

_DAY = 86_400.0
_HOUR = 3_600.0
#: The times a calendar of years 1-9999 places (a day to spare at each end).
_FIRST, _LAST = -62_135_596_800.0 + _DAY, 253_402_300_799.0 - _DAY
#: The day of the vote cap when no zone is named (needs no time zone database).
UTC = "UTC"

#: ``leaderboard.parquet``: the Arena's own table shape, shown models only.
ARENA_TABLE = pa.schema(
    [
        pa.field("model", pa.string(), nullable=False),
        pa.field("rating", pa.float64(), nullable=False),
        pa.field("variance", pa.float64()),
        pa.field("rating_q975", pa.float64()),
        pa.field("rating_q025", pa.float64()),
        pa.field("num_battles", pa.int64(), nullable=False),
        pa.field("final_ranking", pa.int64(), nullable=False),
    ]
)
#: ``categories.parquet``: one block of rows per category, shown models only.
CATEGORY_TABLE = pa.schema(
    [
        pa.field("category", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("rating", pa.float64(), nullable=False),
        pa.field("rating_lower", pa.float64()),
        pa.field("rating_upper", pa.float64()),
        pa.field("num_battles", pa.int64(), nullable=False),
        pa.field("final_ranking", pa.int64(), nullable=False),
        pa.field("final_ranking_overall", pa.int64(), nullable=False),
        pa.field("rank_delta", pa.int64(), nullable=False),
    ]
)
#: ``pairwise_observed.parquet``: decisive battles between each ordered pair.
OBSERVED_PAIRS = pa.schema(
    [
        pa.field("model_a", pa.string(), nullable=False),
        pa.field("model_b", pa.string(), nullable=False),
        pa.field("win_fraction", pa.float64(), nullable=False),
        pa.field("n_battles", pa.int64(), nullable=False),
    ]
)


def time_zone(name: str) -> zoneinfo.ZoneInfo:
    """The zone named, refusing one the database does not know (or a missing database), with a hint.

    Raises :class:`OptionsError` (a usage error). ``UTC`` needs no database:
    callers count its days without asking for it.
    """
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        known = zoneinfo.available_timezones()
        if not known:
            msg = f"--vote-day-tz {name!r}: no time zone database: Python's zoneinfo finds neither the system's (/usr/share/zoneinfo) nor the tzdata package.\nHint: install one (pip install tzdata, or the system's tzdata package), or leave --vote-day-tz out to count days in UTC."
            raise OptionsError(msg) from exc
        close = difflib.get_close_matches(name, sorted(known), n=3)
        suggestion = f" Did you mean {', '.join(close)}?" if close else ""
        msg = f"--vote-day-tz {name!r} is not a time zone of the database.{suggestion}\nHint: give an IANA name, e.g. America/Los_Angeles (the Arena's servers), or leave the option out for UTC."
        raise OptionsError(msg) from exc


def vote_days(tstamp: FloatArray, zone: str = UTC) -> FloatArray:
    """Per vote, its calendar day in `zone` (days since 1970-01-01; NaN where no time).

    The day FastChat's ``limit_user_votes`` takes, ``datetime.fromtimestamp(t)``'s
    date, in a named zone instead of the machine's. The zone's offset is looked
    up once per distinct hour of the votes (a transition hour is split at the
    second the offset changes), not once per vote.

    Raises:
        InputError: A time too far from the present for any calendar.

    Examples:
        >>> t = np.array([1_700_000_000.0, 1_700_010_000.0])  # 22:13 and 01:00 UTC
        >>> vote_days(t).tolist(), vote_days(t, "America/Los_Angeles").tolist()
        ([19675.0, 19676.0], [19675.0, 19675.0])
    """
    whole = np.floor(tstamp)  # to the microsecond, rounded as datetime rounds it
    tstamp = whole + np.round((tstamp - whole) * 1e6) / 1e6
    if zone == UTC:
        return np.floor(tstamp / _DAY)
    tz = time_zone(zone)
    days = np.full(len(tstamp), np.nan)
    known = np.isfinite(tstamp)
    times = tstamp[known]
    if (beyond := (times < _FIRST) | (times > _LAST)).any():
        msg = f"{int(beyond.sum())} battle(s) have a tstamp no calendar can place in {zone}, e.g. {times[beyond][0]:.0f} seconds (outside the years 1-9999).\nHint: tstamp is seconds since 1970-01-01 (UTC), as in Arena's files; fix or drop those battles, or count days in UTC (leave --vote-day-tz out)."
        raise InputError(msg)
    hours, at = np.unique(np.floor(times / _HOUR), return_inverse=True)
    starts = hours * _HOUR
    first = np.array([_offset(t, tz) for t in starts])  # distinct hours, not votes
    last = np.array([_offset(t + _HOUR - 1.0, tz) for t in starts])
    offset = first[at]
    for hour in np.flatnonzero(first != last):  # a transition: twice a year at most
        change = _transition(starts[hour], tz)
        in_hour = at == hour
        offset[in_hour] = np.where(times[in_hour] < change, first[hour], last[hour])
    days[known] = np.floor((times + offset) / _DAY)
    return days


def _offset(seconds: float, tz: zoneinfo.ZoneInfo) -> float:
    """The zone's UTC offset at `seconds`, in seconds."""
    offset = datetime.fromtimestamp(seconds, tz).utcoffset()
    return 0.0 if offset is None else offset.total_seconds()


def _transition(start: float, tz: zoneinfo.ZoneInfo) -> float:
    """The first whole second of the hour from `start` with the hour's last offset."""
    low, high = 0, int(_HOUR) - 1  # the offset at start + high is the new one
    before = _offset(start, tz)
    while low + 1 < high:
        middle = (low + high) // 2
        if _offset(start + middle, tz) == before:
            low = middle
        else:
            high = middle
    return start + high


def daily_vote_cap(
    judge: npt.NDArray[np.integer], tstamp: FloatArray, cap: int, *, zone: str = UTC
) -> BoolArray:
    """Which votes to keep: each judge's first ``cap`` of each day, earliest first.

    The day is the calendar day in `zone` (:func:`vote_days`). Votes without a
    time or a judge are kept (they belong to no day or judge).

    Examples:
        >>> daily_vote_cap(np.array([0, 0, 0, 1, 0]),
        ...     np.array([30.0, 10.0, 20.0, 10.0, 86_400.0 + 5]), 2).tolist()
        [False, True, True, True, True]
    """
    n = len(judge)
    day = vote_days(tstamp, zone)
    order = np.lexsort((np.arange(n), tstamp, day, judge))
    key_judge, key_day = judge[order], day[order]
    starts = np.ones(n, dtype=np.bool_)
    starts[1:] = (key_judge[1:] != key_judge[:-1]) | (key_day[1:] != key_day[:-1])
    first = np.maximum.accumulate(np.where(starts, np.arange(n), 0))
    within = np.arange(n) - first
    keep = np.empty(n, dtype=np.bool_)
    keep[order] = within < cap
    keep |= (judge < 0) | np.isnan(tstamp)
    return keep


def fitted_battles(ratings: Ratings) -> IntArray:
    """Per model, the battles its rating was fitted on (``--ties drop``: ties not counted).

    What the Arena's ``leaderboard_table_df`` counts as ``num_battles``: the
    battles left after ``exclude_tie``.
    """
    is_dropped = ratings.options.ties == "drop"
    return ratings.n_battles - ratings.n_ties if is_dropped else ratings.n_battles


def shown_models(
    ratings: Ratings, *, min_battles: int, hidden: tuple[str, ...]
) -> BoolArray:
    """Models a board shows: more than ``min_battles`` battles fitted and not hidden."""
    shown: BoolArray = (fitted_battles(ratings) > min_battles) & ~np.isin(
        ratings.models, np.array(hidden, dtype=np.str_)
    )
    return shown


def _shown_ranks(ratings: Ratings, shown: BoolArray) -> IntArray:
    """Rank (UB) among the shown models (the rank by rating without a bootstrap).

    Returns:
        Per shown model (in ``ratings.models`` order), its rank among them.
    """
    if ratings.rating_lower is None or ratings.rating_upper is None:
        return rank_by_rating(ratings.rating[shown])
    return rank_with_uncertainty(
        ratings.rating_lower[shown], ratings.rating_upper[shown]
    )


def arena_table(ratings: Ratings, shown: BoolArray) -> pa.Table:
    """The Arena's ``leaderboard_table_df`` over the shown models, best first.

    ``num_battles`` counts the battles fitted (:func:`fitted_battles`). A side
    of an interval the data do not bound is ``inf`` (``rating_q975``) or
    ``-inf`` (``rating_q025``) and the model's ``variance`` is ``inf``: the
    Arena's bootstrap stops such a round where its L-BFGS stops, a large finite
    number, and its table code (``round`` of the interval) fails on ``inf``.
    """
    index = np.flatnonzero(shown)
    variance = q025 = q975 = None
    if ratings.samples is not None:
        samples = ratings.samples[:, index]
        with np.errstate(invalid="ignore"):
            variance = np.nanvar(samples, axis=0, ddof=1)
        # rounds that put a model at +-inf (the data do not bound it) make its
        # spread unbounded: +inf, where pandas' var would say NaN (inf - inf)
        variance[np.isinf(samples).any(axis=0)] = np.inf
        q025 = ratings.rating_lower[index] if ratings.rating_lower is not None else None
        q975 = ratings.rating_upper[index] if ratings.rating_upper is not None else None
    k = len(index)
    table = pa.table(
        {
            "model": pa.array(ratings.models[index].tolist(), pa.string()),
            "rating": pa.array(ratings.rating[index], pa.float64()),
            "variance": nullable_floats(variance, k),
            "rating_q975": nullable_floats(q975, k),
            "rating_q025": nullable_floats(q025, k),
            "num_battles": pa.array(fitted_battles(ratings)[index], pa.int64()),
            "final_ranking": pa.array(_shown_ranks(ratings, shown), pa.int64()),
        },
        schema=ARENA_TABLE,
    )
    order = np.lexsort((-ratings.rating[index], table["final_ranking"].to_numpy()))
    return table.take(pa.array(order))


def category_rows(
    name: str,
    category: Ratings,
    overall: Ratings,
    *,
    min_battles: int,
    hidden: tuple[str, ...],
) -> pa.Table:
    """One category's rows: its board (:func:`arena_table`), and the rank delta against overall.

    The overall rank is recomputed among the category's shown models, so the
    delta compares the same set (as the Arena's ``get_arena_table``).
    """
    board = arena_table(
        category, shown_models(category, min_battles=min_battles, hidden=hidden)
    )
    rank = board["final_ranking"].to_numpy()
    names = np.array(board["model"].to_pylist(), dtype=np.str_)
    # the same models in the overall ratings (both sorted by name), in the board's order
    in_overall = np.isin(overall.models, names)
    overall_rank = _shown_ranks(overall, in_overall)[np.argsort(np.argsort(names))]
    return pa.table(
        {
            "category": pa.array([name] * board.num_rows, pa.string()),
            "model": board["model"],
            "rating": board["rating"],
            "rating_lower": board["rating_q025"],
            "rating_upper": board["rating_q975"],
            "num_battles": board["num_battles"],
            "final_ranking": board["final_ranking"],
            "final_ranking_overall": pa.array(overall_rank, pa.int64()),
            "rank_delta": pa.array(overall_rank - rank, pa.int64()),
        },
        schema=CATEGORY_TABLE,
    )


def observed_pairs(battles: Battles) -> pa.Table:
    """Observed win fraction and count of decisive battles per ordered pair (either seat).

    Examples:
        >>> from types import SimpleNamespace
        >>> battles = SimpleNamespace(models=np.array(["a", "b"]),
        ...     model_a=np.array([0, 1, 0]), model_b=np.array([1, 0, 1]),
        ...     outcome=np.array([2, 2, 1]), count=np.ones(3, np.int64))
        >>> observed_pairs(battles).to_pylist()[0]
        {'model_a': 'a', 'model_b': 'b', 'win_fraction': 0.5, 'n_battles': 2}
    """
    models = battles.models
    seats = (battles.model_a, battles.model_b, battles.outcome, battles.count)
    counts = count_outcomes(*seats, n_models=len(models))
    wins = win_matrix(counts, ties="drop")  # decisive battles won, either seat
    games = wins + wins.T
    first, second = np.nonzero(games > 0)
    return pa.table(
        {
            "model_a": pa.array(models[first].tolist(), pa.string()),
            "model_b": pa.array(models[second].tolist(), pa.string()),
            "win_fraction": pa.array(wins[first, second] / games[first, second]),
            "n_battles": pa.array(games[first, second].astype(np.int64)),
        },
        schema=OBSERVED_PAIRS,
    )
