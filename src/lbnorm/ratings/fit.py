r"""Ratings from battles: the whole computation (counts, fit, bootstrap, anchor, intervals).

Numpy kernels on integer codes (no I/O, no pandas), following FastChat's
``fastchat/serve/monitor/rating_systems.py`` (the Chatbot Arena leaderboard) and
its 2023 ``elo_analysis.py``. Battles arrive as codes (see
:class:`lbnorm.ratings.battles.Battles`); the outcome of a battle for seat A is
``y = 1`` (A won), ``0.5`` (tie, or ``tie (bothbad)``) or ``0`` (B won). The
kernels live beside this module: :mod:`~lbnorm.ratings.bradley_terry`,
:mod:`~lbnorm.ratings.bootstrap`, :mod:`~lbnorm.ratings.elo`,
:mod:`~lbnorm.ratings.intervals`, :mod:`~lbnorm.ratings.checks`.

With ``anchor=(model, rating)`` all ratings shift so that model has that rating
(the Arena anchors ``mixtral-8x7b-instruct-v0.1`` at 1114; its code does so
whenever that model is present), per bootstrap round as the reference does. The
interval is the 2.5th and 97.5th percentile (linear interpolation, as
``pandas.DataFrame.quantile``); the rating stays the point estimate on all
battles. ``rank_upper_bound`` is the Arena's "rank (UB)": ``1 +`` the number of
models whose lower bound is above this model's upper bound.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from lbnorm._runtime import entry_point
from lbnorm.core.errors import InputError, RatingOptionsError
from lbnorm.core.schemas import RATINGS, WIN_RATES
from lbnorm.ratings.bootstrap import (
    batch_budget,
    bootstrap_bradley_terry,
    check_bootstrap_memory,
    pair_cells,
)
from lbnorm.ratings.bradley_terry import count_outcomes, fit_bradley_terry, win_matrix
from lbnorm.ratings.checks import check_identifiable
from lbnorm.ratings.elo import bootstrap_elo, online_elo
from lbnorm.ratings.intervals import (
    percentile_intervals,
    predicted_win_rates,
    rank_by_rating,
    rank_with_uncertainty,
)
from lbnorm.ratings.options import (
    INIT_RATING,
    SCALE,
    Battles,
    FloatArray,
    IntArray,
    RatingOptions,
    RatingWarning,
    StrArray,
    TiesPolicy,
)
from lbnorm.ratings.style import (
    STYLE_ELEMENTS,
    STYLE_L2,
    StyleFit,
    bootstrap_style,
    fit_style,
    ratings_of,
    style_data,
)

__all__ = [
    "STYLE_COEFFICIENTS",
    "STYLE_RANKS",
    "Ratings",
    "compute_ratings",
    "model_index",
    "nullable_floats",
    "ratings_table",
    "style_tables",
    "win_rates_table",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ratings:
    """Ratings of every model in the battles, in the order of ``models`` (by name).

    Attributes:
        models: Model names (the battles' codes index them).
        rating: Point ratings (BT fit, or online Elo after the last battle).
        rating_lower: 2.5th percentile over bootstrap rounds, or None.
        rating_upper: 97.5th percentile over bootstrap rounds, or None.
        samples: Ratings per bootstrap round (``rounds x k``), or None.
        n_battles: Battles each model played.
        n_wins: Battles it won.
        n_ties: Battles it tied.
        win_rate: Observed score: (wins + ties / 2) / battles with
            ``ties="half"``, wins / decisive battles with ``"drop"``.
        options: The options used.
        warnings: Conditions worth showing.
        style: With style control: the fit's coefficients (and their rounds);
            ``rating`` and its interval are then the style-controlled ones.
        baseline: With style control: the same battles rated without it.
    """

    models: StrArray
    rating: FloatArray
    rating_lower: FloatArray | None
    rating_upper: FloatArray | None
    samples: FloatArray | None
    n_battles: IntArray
    n_wins: IntArray
    n_ties: IntArray
    win_rate: FloatArray
    options: RatingOptions
    warnings: tuple[RatingWarning, ...] = ()
    style: StyleFit | None = None
    baseline: Ratings | None = None

    @property
    def rank(self) -> IntArray:
        """1 + the number of models with a strictly higher rating."""
        return rank_by_rating(self.rating)

    @property
    def rank_upper_bound(self) -> IntArray | None:
        """The Arena's rank (UB) from the intervals, or None without a bootstrap."""
        if self.rating_lower is None or self.rating_upper is None:
            return None
        return rank_with_uncertainty(self.rating_lower, self.rating_upper)


def model_index(models: StrArray, name: str, *, what: str) -> int:
    """The code of ``name``; an InputError suggesting close names if it has none."""
    matches = np.flatnonzero(models == name)
    if matches.size:
        return int(matches[0])
    close = difflib.get_close_matches(name, models.tolist(), n=3)
    suggestion = f" Did you mean {', '.join(close)}?" if close else ""
    msg = f"{what} {name!r} is not in the battles ({len(models)} models).{suggestion}\nHint: use a model name exactly as the battles spell it."
    raise InputError(msg)


@entry_point  # (Ctrl-C and SIGTERM held for the call)
def compute_ratings(battles: Battles, options: RatingOptions | None = None) -> Ratings:
    """Ratings, intervals and per-model counts from battles.

    Args:
        battles: Codes and names (:class:`lbnorm.ratings.battles.Battles`).
        options: How to rate; defaults to ``RatingOptions()`` (BT, ties half).

    Returns:
        The ratings of every model in ``battles.models``.

    Raises:
        RatingsNotIdentifiableError: The comparison graph is in several parts;
            or (BT without ``l2``) a model never lost or never won.
        RatingOptionsError: Online Elo on aggregated counts, or a bootstrap that
            would need more than ``options.max_bootstrap_bytes``.
        InputError: The anchor model is not in the battles.

    Examples:
        >>> from types import SimpleNamespace
        >>> battles = SimpleNamespace(models=np.array(["a", "b", "c"]),
        ...     model_a=np.array([0, 1, 2, 0, 1, 2]), model_b=np.array([1, 2, 0, 2, 0, 1]),
        ...     outcome=np.array([2, 2, 0, 1, 0, 2]), count=np.array([3, 2, 1, 1, 1, 1]),
        ...     tstamp=None, is_aggregated=True)
        >>> result = compute_ratings(battles, RatingOptions(anchor=("b", 1000.0)))
        >>> result.rating.round(1).tolist(), result.n_battles.tolist()
        ([1405.8, 1000.0, 965.8], [6, 7, 5])
    """
    options = options or RatingOptions()
    models = np.asarray(battles.models)
    counts, wins, anchor_index = _check_inputs(battles, models, options)
    rating, samples, warnings, style = _fit(
        battles, counts, wins, options, anchor_index
    )
    if anchor_index is not None and options.anchor is not None:
        rating, samples = _anchor(rating, samples, anchor_index, options.anchor[1])
    lower = upper = None
    if samples is not None:
        absent = np.isnan(samples).any(axis=0)
        if absent.any():
            message = f"{int(absent.sum())} model(s) have no rating in some bootstrap rounds (they did not play, or could not be compared with the rest); their intervals use the other rounds."
            warnings.append(RatingWarning("bootstrap_absent", message))
        lower, upper = percentile_intervals(samples)
    n_battles, n_wins, n_ties, win_rate = _records(counts, options.ties)
    return Ratings(
        models=models,
        rating=rating,
        rating_lower=lower,
        rating_upper=upper,
        samples=samples,
        n_battles=n_battles,
        n_wins=n_wins,
        n_ties=n_ties,
        win_rate=win_rate,
        options=options,
        warnings=tuple(warnings),
        style=style,
        baseline=(
            compute_ratings(battles, replace(options, style_control=False))
            if options.style_control
            else None
        ),
    )


def _check_inputs(
    battles: Battles, models: StrArray, options: RatingOptions
) -> tuple[IntArray, FloatArray, int | None]:
    """Refuse what cannot be rated (memory before anything quadratic); the counts, wins and anchor's code.

    Raises:
        RatingOptionsError: The fit or its bootstrap would need more memory than
            allowed, or online Elo is asked of aggregated counts.
        RatingsNotIdentifiableError: See :func:`check_identifiable`.
        InputError: The anchor model is not in the battles.
    """
    k = len(models)
    _check_point_memory(k, len(battles.model_a), options)
    counts = count_outcomes(
        battles.model_a, battles.model_b, battles.outcome, battles.count, n_models=k
    )
    wins = win_matrix(counts, ties=options.ties)
    if options.bootstrap and not options.style_control:  # before the quadratic checks
        check_bootstrap_memory(
            n_models=k,
            n_battles=len(battles.model_a),
            n_cells=pair_cells(counts, options.ties)[0].size,
            options=options,
        )
    is_plain_bt = options.method == "bt" and not (options.l2 or options.style_control)
    check_identifiable(wins, models, counts, ties=options.ties, is_plain_bt=is_plain_bt)
    anchor_index = (
        model_index(models, options.anchor[0], what="anchor model")
        if options.anchor
        else None
    )
    if options.method == "elo" and battles.is_aggregated:
        msg = "online Elo needs one battle per row, in order; aggregated counts have none.\nHint: use --method bt (the default), or give battle files (one row per battle)."
        raise RatingOptionsError(msg)
    return counts, wins, anchor_index


def _fit(
    battles: Battles,
    counts: IntArray,
    wins: FloatArray,
    options: RatingOptions,
    anchor_index: int | None,
) -> tuple[FloatArray, FloatArray | None, list[RatingWarning], StyleFit | None]:
    """The point ratings, their bootstrap rounds (None without), warnings, and the style fit.

    Style control, else Bradley-Terry, else online Elo; the anchor's code
    tells BT's bootstrap which rounds must rate it.
    """
    k = len(battles.models)
    if options.style_control:
        style = _rate_style(battles, options, k)
        return style.rating, style.samples, list(style.warnings), style
    if options.method == "elo":
        rating, samples = _rate_elo(battles, options, k)
        return rating, samples, [], None
    rating = fit_bradley_terry(wins, l2=options.l2)
    if not options.bootstrap:
        return rating, None, [], None
    samples, warnings = bootstrap_bradley_terry(
        counts,
        (rating - INIT_RATING) / SCALE,
        ties=options.ties,
        l2=options.l2,
        rounds=options.bootstrap,
        seed=options.seed,
        keep=anchor_index,
        batch_bytes=batch_budget(options),
    )
    return rating, samples, warnings, None


def _anchor(
    rating: FloatArray, samples: FloatArray | None, index: int, value: float
) -> tuple[FloatArray, FloatArray | None]:
    """Shift the ratings so model ``index`` has ``value``; each bootstrap round too.

    Per round, as the reference; rounds without a finite anchor are dropped (NaN).
    """
    rating = (rating - rating[index]) + value
    if samples is not None:
        anchor_value = samples[:, [index]]
        samples = np.where(
            np.isfinite(anchor_value), (samples - anchor_value) + value, np.nan
        )
    return rating, samples


#: Bytes per model pair a point fit holds at its peak: the k x k x 3 counts and
#: their bincount, the win and game matrices, Newton's three buffers and the
#: reachability products of the checks.
_POINT_BYTES_PER_PAIR = 200


def _check_point_memory(k: int, n_battles: int, options: RatingOptions) -> None:
    """Refuse a fit estimated to need more than the memory allowed, before it starts.

    The estimate is the point fit's peak (with style control, its per-battle
    arrays too).
    """
    needed = _POINT_BYTES_PER_PAIR * k * k
    if options.style_control:
        needed += 20 * 8 * n_battles + 8 * (k + 4) ** 2
    limit = options.max_bootstrap_bytes
    if needed > limit:
        msg = f"rating {k:,} models would need about {needed / 2**30:.2f} GiB for the fit alone (it grows with the square of the models), more than the {limit / 2**30:.2f} GiB allowed.\nHint: rate fewer models (--where), or allow more memory (--max-memory GIB)."
        raise RatingOptionsError(msg)


def _rate_style(battles: Battles, options: RatingOptions, k: int) -> StyleFit:
    """The style-controlled fit (``options.l2``, or the style default) and its bootstrap."""
    data = style_data(battles, ties=options.ties)
    l2 = options.l2 or STYLE_L2
    params = fit_style(data, l2=l2)
    fit = StyleFit(rating=ratings_of(params, k), coefficients=params[k:])
    if not options.bootstrap:
        return fit
    rounds, warnings = bootstrap_style(
        data, params, l2=l2, rounds=options.bootstrap, seed=options.seed
    )
    return replace(
        fit,
        samples=ratings_of(rounds, k),
        coefficient_samples=rounds[:, k:],
        warnings=tuple(warnings),
    )


def _rate_elo(
    battles: Battles, options: RatingOptions, k: int
) -> tuple[FloatArray, FloatArray | None]:
    """Online Elo in tstamp order (stable; file order without one), and its bootstrap."""
    order = (
        np.argsort(battles.tstamp, kind="stable")
        if battles.tstamp is not None
        else np.arange(len(battles.model_a))
    )
    if options.ties == "drop":
        order = order[battles.outcome[order] != 1]
    model_a, model_b = battles.model_a[order], battles.model_b[order]
    outcome = battles.outcome[order]
    rating = online_elo(model_a, model_b, outcome, n_models=k)
    if not options.bootstrap:
        return rating, None
    samples = bootstrap_elo(
        model_a,
        model_b,
        outcome,
        n_models=k,
        rounds=options.bootstrap,
        seed=options.seed,
        block_bytes=batch_budget(options),
    )
    return rating, samples


def _records(
    counts: IntArray, ties: TiesPolicy
) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
    """Per model: battles, wins, ties, and the observed score as the fit counts it."""
    per_seat = counts.sum(axis=2)
    n_battles = per_seat.sum(axis=1) + per_seat.sum(axis=0)
    n_wins = counts[:, :, 2].sum(axis=1) + counts[:, :, 0].sum(axis=0)
    n_ties = counts[:, :, 1].sum(axis=1) + counts[:, :, 1].sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        win_rate: FloatArray = (
            (n_wins + 0.5 * n_ties) / n_battles
            if ties == "half"
            else n_wins / (n_battles - n_ties)
        )
    return n_battles, n_wins, n_ties, win_rate


# --- output tables -------------------------------------------------------------------------


def nullable_floats(values: FloatArray | None, k: int) -> pa.Array:
    """A float column with NaN as null (all null when ``values`` is None)."""
    if values is None:
        return pa.nulls(k, pa.float64())
    return pa.array(values, pa.float64(), mask=np.isnan(values))


def ratings_table(ratings: Ratings) -> pa.Table:
    """The :data:`RATINGS` table, best rating first (ties by name).

    Args:
        ratings: A result of :func:`compute_ratings`.

    Returns:
        One row per model.

    Examples:
        >>> from types import SimpleNamespace
        >>> battles = SimpleNamespace(models=np.array(["a", "b"]),
        ...     model_a=np.array([0, 1]), model_b=np.array([1, 0]),
        ...     outcome=np.array([2, 2]), count=np.array([3, 1]),
        ...     tstamp=None, is_aggregated=True)
        >>> table = ratings_table(compute_ratings(battles))
        >>> table.column("model").to_pylist(), table.column("rank").to_pylist()
        (['a', 'b'], [1, 2])
    """
    k = len(ratings.models)
    order = np.lexsort((ratings.models, -ratings.rating))
    lower, upper = ratings.rating_lower, ratings.rating_upper
    bound = ratings.rank_upper_bound
    columns = {
        "model": pa.array(ratings.models.tolist(), pa.string()),
        "rating": pa.array(ratings.rating, pa.float64()),
        "rating_lower": nullable_floats(lower, k),
        "rating_upper": nullable_floats(upper, k),
        "rank": pa.array(ratings.rank, pa.int64()),
        "rank_upper_bound": (
            pa.nulls(k, pa.int64())
            if bound is None or lower is None or upper is None
            else pa.array(bound, pa.int64(), mask=np.isnan(lower) | np.isnan(upper))
        ),
        "n_battles": pa.array(ratings.n_battles, pa.int64()),
        "n_wins": pa.array(ratings.n_wins, pa.int64()),
        "n_ties": pa.array(ratings.n_ties, pa.int64()),
        "win_rate": nullable_floats(ratings.win_rate, k),
    }
    return pa.table(columns, schema=RATINGS).take(pa.array(order))


def win_rates_table(ratings: Ratings) -> pa.Table:
    """The :data:`WIN_RATES` table: every ordered pair, both in rating order.

    Args:
        ratings: A result of :func:`compute_ratings`.

    Returns:
        ``k * (k - 1)`` rows (the diagonal, always 0.5, is left out).

    Examples:
        >>> from types import SimpleNamespace
        >>> battles = SimpleNamespace(models=np.array(["a", "b"]),
        ...     model_a=np.array([0, 1]), model_b=np.array([1, 0]),
        ...     outcome=np.array([2, 2]), count=np.array([3, 1]),
        ...     tstamp=None, is_aggregated=True)
        >>> table = win_rates_table(compute_ratings(battles))
        >>> table.column("model_a").to_pylist(), table.column("win_rate").to_numpy().round(6).tolist()
        (['a', 'b'], [0.75, 0.25])
    """
    order = np.lexsort((ratings.models, -ratings.rating))
    probability = predicted_win_rates(ratings.rating[order])
    k = len(order)
    first, second = np.nonzero(~np.eye(k, dtype=np.bool_))
    names = ratings.models[order]
    return pa.table(
        {
            "model_a": pa.array(names[first].tolist(), pa.string()),
            "model_b": pa.array(names[second].tolist(), pa.string()),
            "win_rate": pa.array(probability[first, second], pa.float64()),
        },
        schema=WIN_RATES,
    )


#: ``style_coefficients.parquet``: one row per style element.
STYLE_COEFFICIENTS = pa.schema(
    [
        pa.field("feature", pa.string(), nullable=False),
        pa.field("coefficient", pa.float64(), nullable=False),
        pa.field("coefficient_lower", pa.float64()),
        pa.field("coefficient_upper", pa.float64()),
    ]
)
#: ``style_control.parquet``: each model with and without style control.
STYLE_RANKS = pa.schema(
    [
        pa.field("model", pa.string(), nullable=False),
        pa.field("rating", pa.float64(), nullable=False),
        pa.field("rank", pa.int64(), nullable=False),
        pa.field("rating_plain", pa.float64(), nullable=False),
        pa.field("rank_plain", pa.int64(), nullable=False),
        pa.field("rank_delta", pa.int64(), nullable=False),
    ]
)


def style_tables(ratings: Ratings) -> dict[str, pa.Table]:
    """With style control: the coefficients, and each model's rank with and without it.

    ``rank`` is the rank (UB) with a bootstrap, else the rank by rating; the
    delta is the plain rank minus the style-controlled one (positive: the model
    ranks better once style is controlled), as the Arena's ``ranking_difference``.

    Args:
        ratings: A result of :func:`compute_ratings` with ``style_control``.

    Returns:
        ``{"style_coefficients": ..., "style_control": ...}``; empty without style control.
    """
    if ratings.style is None or ratings.baseline is None:
        return {}
    style, baseline = ratings.style, ratings.baseline
    lower = upper = None
    if style.coefficient_samples is not None:
        lower, upper = percentile_intervals(style.coefficient_samples)
    m = len(STYLE_ELEMENTS)
    coefficients = pa.table(
        {
            "feature": pa.array(list(STYLE_ELEMENTS), pa.string()),
            "coefficient": pa.array(style.coefficients, pa.float64()),
            "coefficient_lower": nullable_floats(lower, m),
            "coefficient_upper": nullable_floats(upper, m),
        },
        schema=STYLE_COEFFICIENTS,
    )
    rank = _shown_rank(ratings)
    rank_plain = _shown_rank(baseline)
    order = np.lexsort((ratings.models, -ratings.rating))
    ranks = pa.table(
        {
            "model": pa.array(ratings.models.tolist(), pa.string()),
            "rating": pa.array(ratings.rating, pa.float64()),
            "rank": pa.array(rank, pa.int64()),
            "rating_plain": pa.array(baseline.rating, pa.float64()),
            "rank_plain": pa.array(rank_plain, pa.int64()),
            "rank_delta": pa.array(rank_plain - rank, pa.int64()),
        },
        schema=STYLE_RANKS,
    ).take(pa.array(order))
    return {"style_coefficients": coefficients, "style_control": ranks}


def _shown_rank(ratings: Ratings) -> IntArray:
    """Rank (UB) where the bootstrap gives one, else the rank by rating."""
    bound = ratings.rank_upper_bound
    if bound is None:
        return ratings.rank
    return np.where(np.isnan(ratings.rating_upper), ratings.rank, bound)  # type: ignore[arg-type]
