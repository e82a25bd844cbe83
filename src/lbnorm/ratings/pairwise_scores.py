"""A pairwise benchmark's column in the leaderboard: one score per model from battles."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from lbnorm.core.errors import InputError
from lbnorm.core.schemas import PAIRWISE_SCORES
from lbnorm.ratings.fit import compute_ratings, model_index
from lbnorm.ratings.options import BASE, SCALE, BattleData, RatingOptions

__all__ = ["PairwiseScores", "score_against_reference"]

_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class PairwiseScores:
    """A pairwise benchmark's raw scores, and the names the map did not cover.

    Attributes:
        table: :data:`PAIRWISE_SCORES` rows, one per model, by model name.
        reference: The reference model, as the table spells it.
        unmapped: Arena names with no entry in the model map (kept as they are).
        unused: Model-map entries whose arena name has no battles.
    """

    table: pa.Table
    reference: str
    unmapped: tuple[str, ...]
    unused: tuple[str, ...]


def score_against_reference(
    battles: BattleData,
    *,
    reference: str,
    model_map: Mapping[str, str] | None = None,
    options: RatingOptions | None = None,
) -> PairwiseScores:
    """Each model's predicted chance of beating a reference model: a benchmark score.

    A suite's pairwise benchmark (``aggregation = "bradley-terry"``) scores a model
    by ``1 / (1 + 10 ** ((rating_ref - rating) / 400))``, a fraction in [0, 1]
    that the leaderboard normalizes like any other raw score. Anchoring does not
    change it; the bootstrap is not run. The caller compares the table's models
    with the results' models to list those present in only one source.

    Args:
        battles: Codes and names (:class:`lbnorm.ratings.battles.Battles`).
        reference: The reference model, by its arena name or its mapped name.
        model_map: ``{arena_name: model}`` (from ``read_model_map``); names it
            does not cover are kept as they are and listed in ``unmapped``.
        options: How to rate (method, ties, l2); bootstrap and anchor ignored.

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
    options = replace(options or RatingOptions(), bootstrap=0, anchor=None)
    model_map = dict(model_map or {})
    arena_names = np.asarray(battles.models).tolist()
    if reference not in arena_names:
        inverse = {model: arena for arena, model in model_map.items()}
        reference = inverse.get(reference, reference)
    reference_index = model_index(
        np.asarray(battles.models), reference, what="reference model"
    )
    result = compute_ratings(battles, options)
    score = 1.0 / (
        1.0 + np.power(BASE, (result.rating[reference_index] - result.rating) / SCALE)
    )
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
    table = pa.table(
        {
            "model": pa.array([names[i] for i in order], pa.string()),
            "raw_score": pa.array(score[order], pa.float64()),
            "n_samples": pa.array(result.n_battles[order], pa.int64()),
        },
        schema=PAIRWISE_SCORES,
    )
    unmapped = tuple(
        name for name in arena_names if model_map and name not in model_map
    )
    present = set(arena_names)
    unused = tuple(sorted(name for name in model_map if name not in present))
    return PairwiseScores(
        table=table,
        reference=model_map.get(reference, reference),
        unmapped=unmapped,
        unused=unused,
    )
