"""A pairwise benchmark's column in the leaderboard: one score per model from battles."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from lbnorm.core.errors import InputError
from lbnorm.core.schemas import PAIRWISE_SCORES
from lbnorm.ratings.fit import compute_ratings, model_index
from lbnorm.ratings.intervals import win_chance
from lbnorm.ratings.options import Battles, FloatArray, RatingOptions

__all__ = [
    "PairwiseScores",
    "field_win_rates",
    "score_against_field",
    "score_against_rating",
    "score_against_reference",
]

_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class PairwiseScores:
    """A pairwise benchmark's raw scores, and the names the map did not cover.

    Attributes:
        table: :data:`PAIRWISE_SCORES` rows, one per model, by model name.
        reference: The reference model, as the table spells it.
        unmapped: Arena names with no entry in the model map (kept as they are).
        unused: Model-map entries whose arena name has no battles.
        stderr: Per table row, the score's standard deviation over bootstrap
            rounds (None without a bootstrap).
    """

    table: pa.Table
    reference: str
    unmapped: tuple[str, ...]
    unused: tuple[str, ...]
    stderr: FloatArray | None = None


def score_against_reference(
    battles: Battles,
    *,
    reference: str,
    model_map: Mapping[str, str] | None = None,
    options: RatingOptions | None = None,
) -> PairwiseScores:
    """Each model's predicted chance of beating a reference model: a benchmark score.

    A suite's pairwise benchmark (``aggregation = "bradley-terry"``) scores a model
    by ``1 / (1 + 10 ** ((rating_ref - rating) / 400))``, a fraction in [0, 1]
    that the leaderboard normalizes like any other raw score. Anchoring does not
    change it; with ``options.bootstrap`` rounds, ``stderr`` is its standard
    deviation over them. The caller compares the table's models
    with the results' models to list those present in only one source.

    Args:
        battles: Codes and names (:class:`lbnorm.ratings.battles.Battles`).
        reference: The reference model, by its arena name or its mapped name.
        model_map: ``{arena_name: model}`` (from ``read_model_map``); names it
            does not cover are kept as they are and listed in ``unmapped``.
        options: How to rate (method, ties, l2, bootstrap, seed); anchor ignored.

    Returns:
        The scores, ``n_samples`` being each model's battles.

    Raises:
        InputError: The reference is not in the battles, or the map sends two
            arena names to one model.
        RatingsNotIdentifiableError: As :func:`compute_ratings`.

    Examples:
        >>> from types import SimpleNamespace
        >>> battles = SimpleNamespace(models=np.array(["gpt-4", "vicuna-13b"]),
        ...     model_a=np.array([0, 1]), model_b=np.array([1, 0]),
        ...     outcome=np.array([2, 2]), count=np.array([3, 1]),
        ...     tstamp=None, is_aggregated=True)
        >>> scores = score_against_reference(battles, reference="vicuna-13b",
        ...     model_map={"gpt-4": "openai/gpt-4"})
        >>> scores.table.to_pylist()
        [{'model': 'openai/gpt-4', 'raw_score': 0.75, 'n_samples': 4}, {'model': 'vicuna-13b', 'raw_score': 0.5, 'n_samples': 4}]
        >>> scores.reference, scores.unmapped
        ('vicuna-13b', ('vicuna-13b',))
    """
    model_map = dict(model_map or {})
    reference = _arena_name(battles, reference, model_map)
    reference_index = model_index(
        np.asarray(battles.models), reference, what="reference model"
    )
    return _scored(
        battles,
        replace(options or RatingOptions(), anchor=None),
        lambda ratings: win_chance(ratings, ratings[..., [reference_index]]),
        model_map,
        reference=model_map.get(reference, reference),
    )


def _scored(
    battles: Battles,
    options: RatingOptions,
    score_of: Callable[[FloatArray], FloatArray],
    model_map: Mapping[str, str],
    *,
    reference: str,
) -> PairwiseScores:
    """Each model's score from its ratings, under its mapped name (by name), and its stddev over the bootstrap rounds."""
    result = compute_ratings(battles, options)
    arena_names = np.asarray(battles.models).tolist()
    names = [model_map.get(name, name) for name in arena_names]
    if len(set(names)) < len(names):
        seen: dict[str, list[str]] = {}
        for arena, name in zip(arena_names, names, strict=True):
            seen.setdefault(name, []).append(arena)
        clashes = [
            f"{name} <- {arenas}" for name, arenas in seen.items() if len(arenas) > 1
        ]
        msg = f"the model map gives two arena names one model: {'; '.join(clashes[:_SHOWN])}.\nHint: map each arena name to a different model, or merge them in the battles."
        raise InputError(msg)
    order = np.argsort(np.array(names, dtype=np.str_), kind="stable")
    stderr = None
    if result.samples is not None:
        with np.errstate(invalid="ignore"):
            stderr = np.nanstd(score_of(result.samples), axis=0, ddof=1)[order]
    table = pa.table(
        {
            "model": pa.array([names[i] for i in order], pa.string()),
            "raw_score": pa.array(score_of(result.rating)[order], pa.float64()),
            "n_samples": pa.array(result.n_battles[order], pa.int64()),
        },
        schema=PAIRWISE_SCORES,
    )
    return PairwiseScores(
        table=table,
        reference=reference,
        unmapped=tuple(n for n in arena_names if model_map and n not in model_map),
        unused=tuple(sorted(set(model_map) - set(arena_names))),
        stderr=stderr,
    )


def score_against_rating(
    battles: Battles,
    *,
    anchor: tuple[str, float],
    against: float,
    model_map: Mapping[str, str] | None = None,
    options: RatingOptions | None = None,
) -> PairwiseScores:
    """Each model's predicted chance of beating a fixed rating on a pinned scale.

    ``1 / (1 + 10 ** ((against - rating) / 400))`` with the ratings anchored so
    that ``anchor``'s model has ``anchor``'s rating (per bootstrap round too): a
    fraction in [0, 1] that depends on a model's rating difference to the
    anchor only, so models joining or leaving move it only as far as their
    battles move that difference. With ``against`` equal to the anchor's
    rating it is the chance of beating the anchor model.

    Args:
        battles: Codes and names (:class:`lbnorm.ratings.battles.Battles`).
        anchor: ``(model, rating)``, the model by its arena or mapped name.
        against: The rating of the yardstick.
        model_map: ``{arena_name: model}``; names it does not cover are kept.
        options: How to rate (method, ties, l2, bootstrap, seed); its own
            anchor is replaced by ``anchor``.

    Returns:
        The scores (``n_samples``: each model's battles) and their stderr;
        ``reference`` is the anchor model.

    Raises:
        InputError: The anchor model is not in the battles, or the map sends
            two arena names to one model.
        RatingsNotIdentifiableError: As :func:`compute_ratings`.

    Examples:
        >>> from types import SimpleNamespace
        >>> battles = SimpleNamespace(models=np.array(["a", "b"]),
        ...     model_a=np.array([0, 1]), model_b=np.array([1, 0]),
        ...     outcome=np.array([2, 2]), count=np.array([3, 1]),
        ...     tstamp=None, is_aggregated=True)
        >>> scores = score_against_rating(battles, anchor=("b", 1000.0), against=1000.0)
        >>> scores.table.column("raw_score").to_pylist()
        [0.75, 0.5]
    """
    model_map = dict(model_map or {})
    model = _arena_name(battles, anchor[0], model_map)
    options = replace(options or RatingOptions(), anchor=(model, anchor[1]))
    model_index(np.asarray(battles.models), model, what="anchor model")
    return _scored(
        battles,
        options,
        lambda ratings: win_chance(ratings, against),
        model_map,
        reference=model_map.get(model, model),
    )


def _arena_name(battles: Battles, name: str, model_map: Mapping[str, str]) -> str:
    """`name` as the battles spell it: an arena name, or a mapped name mapped back."""
    if name in np.asarray(battles.models).tolist():
        return name
    inverse = {model: arena for arena, model in model_map.items()}
    return inverse.get(name, name)


def field_win_rates(ratings: FloatArray) -> FloatArray:
    """Each model's expected win rate against the field: the mean over the others of ``P(win)``.

    Args:
        ratings: ``k`` ratings, or ``rounds x k`` (each row one bootstrap round;
            NaN for a model absent from a round, which then counts in no mean).

    Returns:
        Fractions in [0, 1], shaped as ``ratings``.

    Examples:
        >>> field_win_rates(np.array([1400.0, 1000.0, 1000.0])).round(4).tolist()
        [0.9091, 0.2955, 0.2955]
    """
    rows = np.atleast_2d(ratings)
    chance = win_chance(rows[:, :, None], rows[:, None, :])
    k = rows.shape[1]
    chance[:, np.arange(k), np.arange(k)] = np.nan
    with np.errstate(invalid="ignore"):
        rate = np.nanmean(chance, axis=2) if k > 1 else np.full(rows.shape, np.nan)
    rate[np.isnan(rows)] = np.nan
    result: FloatArray = rate.reshape(np.shape(ratings))
    return result


def score_against_field(
    battles: Battles,
    *,
    model_map: Mapping[str, str] | None = None,
    options: RatingOptions | None = None,
) -> PairwiseScores:
    """Each model's expected win rate against the other rated models: a fair benchmark score.

    ``100 x`` the mean over the other models of the predicted chance of winning:
    no reference model, no chance baseline, no clipping, so it separates every
    model its ratings separate. It depends on the field: a model joining or
    leaving moves every other model's score, and a rating gain moves it most
    where the field is dense (:func:`score_against_rating` and
    :func:`score_against_reference` do not move with the field). With
    ``options.bootstrap`` rounds, ``stderr`` is the score's standard deviation
    over them (each round's ratings from the seeded bootstrap).

    Args:
        battles: Codes and names (:class:`lbnorm.ratings.battles.Battles`).
        model_map: ``{arena_name: model}``; names it does not cover are kept.
        options: How to rate (method, ties, l2, bootstrap, seed); the anchor is
            ignored (the score does not depend on it).

    Returns:
        The scores (``n_samples``: each model's battles) and their stderr.

    Raises:
        InputError: The map sends two arena names to one model.
        RatingsNotIdentifiableError: As :func:`compute_ratings`.

    Examples:
        >>> from types import SimpleNamespace
        >>> battles = SimpleNamespace(models=np.array(["a", "b", "c"]),
        ...     model_a=np.array([0, 1, 2, 0]), model_b=np.array([1, 2, 0, 2]),
        ...     outcome=np.array([2, 2, 0, 1]), count=np.array([3, 2, 1, 1]),
        ...     tstamp=None, is_aggregated=True)
        >>> scores = score_against_field(battles)
        >>> [round(s, 3) for s in scores.table.column("raw_score").to_pylist()]
        [0.91, 0.465, 0.125]
    """
    return _scored(
        battles,
        replace(options or RatingOptions(), anchor=None),
        field_win_rates,
        dict(model_map or {}),
        reference="",
    )
