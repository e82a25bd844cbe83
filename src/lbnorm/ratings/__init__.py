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

if TYPE_CHECKING:  # (each name re-exported: ``X as X``)
    from lbnorm.ratings.battles import read_battles as read_battles
    from lbnorm.ratings.battles import read_model_map as read_model_map
    from lbnorm.ratings.bootstrap import (
        bootstrap_bradley_terry as bootstrap_bradley_terry,
    )
    from lbnorm.ratings.bootstrap import draw_multinomial as draw_multinomial
    from lbnorm.ratings.bootstrap import (
        estimate_bootstrap_bytes as estimate_bootstrap_bytes,
    )
    from lbnorm.ratings.bradley_terry import count_outcomes as count_outcomes
    from lbnorm.ratings.bradley_terry import fit_bradley_terry as fit_bradley_terry
    from lbnorm.ratings.bradley_terry import win_matrix as win_matrix
    from lbnorm.ratings.elo import bootstrap_elo as bootstrap_elo
    from lbnorm.ratings.elo import online_elo as online_elo
    from lbnorm.ratings.fit import Ratings as Ratings
    from lbnorm.ratings.fit import compute_ratings as compute_ratings
    from lbnorm.ratings.fit import ratings_table as ratings_table
    from lbnorm.ratings.fit import win_rates_table as win_rates_table
    from lbnorm.ratings.intervals import percentile_intervals as percentile_intervals
    from lbnorm.ratings.intervals import predicted_win_rates as predicted_win_rates
    from lbnorm.ratings.intervals import rank_with_uncertainty as rank_with_uncertainty
    from lbnorm.ratings.options import Battles as Battles
    from lbnorm.ratings.options import RatingOptions as RatingOptions
    from lbnorm.ratings.options import RatingWarning as RatingWarning
    from lbnorm.ratings.options import parse_anchor as parse_anchor
    from lbnorm.ratings.pairwise_scores import PairwiseScores as PairwiseScores
    from lbnorm.ratings.pairwise_scores import (
        score_against_reference as score_against_reference,
    )
    from lbnorm.ratings.where import Where as Where
    from lbnorm.ratings.where import parse_where as parse_where

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
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    home = _HOMES.get(name)
    if home is None:
        msg = f"module 'lbnorm.ratings' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value
