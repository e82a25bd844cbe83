"""Pairwise ratings: the battle reader, Bradley-Terry and online Elo with bootstrap intervals.

One module a job: :mod:`~lbnorm.ratings.battles` reads battle files (with
:mod:`~lbnorm.ratings.battle_io` for the formats and :mod:`~lbnorm.ratings.where`
for ``--where``); :mod:`~lbnorm.ratings.options` holds the scale and
:class:`RatingOptions`; the kernels are :mod:`~lbnorm.ratings.bradley_terry`,
:mod:`~lbnorm.ratings.bootstrap`, :mod:`~lbnorm.ratings.elo`,
:mod:`~lbnorm.ratings.intervals` and :mod:`~lbnorm.ratings.checks`;
:mod:`~lbnorm.ratings.fit` composes them (:func:`compute_ratings`) and
:mod:`~lbnorm.ratings.pairwise_scores` turns ratings into a leaderboard column.

The names below load on first use, so that ``lbnorm run`` (which asks
:func:`lbnorm.ratings.battle_files.is_battles_file` of every input) loads no
battle reader and no fit unless a file holds battles.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lbnorm.ratings.battles import read_battles, read_model_map
    from lbnorm.ratings.bootstrap import (
        bootstrap_bradley_terry,
        draw_multinomial,
        estimate_bootstrap_bytes,
    )
    from lbnorm.ratings.bradley_terry import (
        count_outcomes,
        fit_bradley_terry,
        win_matrix,
    )
    from lbnorm.ratings.elo import bootstrap_elo, online_elo
    from lbnorm.ratings.fit import (
        Ratings,
        compute_ratings,
        ratings_table,
        win_rates_table,
    )
    from lbnorm.ratings.intervals import (
        percentile_intervals,
        predicted_win_rates,
        rank_with_uncertainty,
    )
    from lbnorm.ratings.options import (
        Battles,
        RatingOptions,
        RatingWarning,
        parse_anchor,
    )
    from lbnorm.ratings.pairwise_scores import (
        PairwiseScores,
        score_against_reference,
    )
    from lbnorm.ratings.where import Where, parse_where

__all__ = [
    "Battles",
    "PairwiseScores",
    "RatingOptions",
    "RatingWarning",
    "Ratings",
    "Where",
    "bootstrap_bradley_terry",
    "bootstrap_elo",
    "compute_ratings",
    "count_outcomes",
    "draw_multinomial",
    "estimate_bootstrap_bytes",
    "fit_bradley_terry",
    "online_elo",
    "parse_anchor",
    "parse_where",
    "percentile_intervals",
    "predicted_win_rates",
    "rank_with_uncertainty",
    "ratings_table",
    "read_battles",
    "read_model_map",
    "score_against_reference",
    "win_matrix",
    "win_rates_table",
]

#: Where each public name lives, by module.
_MODULES = {
    "battles": ("read_battles", "read_model_map"),
    "bootstrap": (
        "bootstrap_bradley_terry",
        "draw_multinomial",
        "estimate_bootstrap_bytes",
    ),
    "bradley_terry": ("count_outcomes", "fit_bradley_terry", "win_matrix"),
    "elo": ("bootstrap_elo", "online_elo"),
    "fit": ("Ratings", "compute_ratings", "ratings_table", "win_rates_table"),
    "intervals": (
        "percentile_intervals",
        "predicted_win_rates",
        "rank_with_uncertainty",
    ),
    "options": ("Battles", "RatingOptions", "RatingWarning", "parse_anchor"),
    "pairwise_scores": ("PairwiseScores", "score_against_reference"),
    "where": ("Where", "parse_where"),
}
_HOMES = {
    name: f"lbnorm.ratings.{module}"
    for module, names in _MODULES.items()
    for name in names
}


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        msg = f"module 'lbnorm.ratings' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value
