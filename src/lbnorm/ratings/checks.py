"""Whether ratings exist: one connected comparison graph, and (unregularised BT) no model unbeaten.

Ratings of models in different connected parts of the comparison graph cannot be
compared (an error names the parts). Unregularised BT ratings exist only if the
"beat" graph is strongly connected: a model that never lost (or never won) has
an infinite maximum-likelihood rating (an error names it and suggests ``l2``).
"""

from __future__ import annotations

import numpy as np

from lbnorm.core.errors import RatingsNotIdentifiableError
from lbnorm.ratings.options import (
    BoolArray,
    FloatArray,
    IntArray,
    StrArray,
    TiesPolicy,
)

__all__ = ["check_identifiable", "reach_closure"]

_SHOWN = 5


def reach_closure(adjacency: BoolArray) -> BoolArray:
    """Reachability (reflexive, transitive) by repeated squaring in float32 BLAS."""
    reach = adjacency | np.eye(len(adjacency), dtype=np.bool_)
    while True:
        as_float = reach.astype(np.float32)
        grown = (as_float @ as_float) > 0
        if np.array_equal(grown, reach):
            return reach
        reach = grown


def _strong_parts(beats: BoolArray) -> tuple[IntArray, BoolArray, BoolArray]:
    """Strongly connected parts of a "beat" graph (``beats[i, j]``: i beat j).

    Returns:
        ``(labels, never_lost, never_won)``: per model the label of its part (the
        part's first model), and per model whether its part never lost (never
        won) against a model outside it.
    """
    reach = reach_closure(beats)  # reach[i, j]: a chain of wins leads from i to j
    labels = np.argmax(reach & reach.T, axis=1).astype(np.int64)
    crossing = beats & (labels[:, None] != labels[None, :])
    lost_outside = np.zeros(len(beats), dtype=np.bool_)
    won_outside = np.zeros(len(beats), dtype=np.bool_)
    np.logical_or.at(lost_outside, labels, crossing.any(axis=0))
    np.logical_or.at(won_outside, labels, crossing.any(axis=1))
    return labels, ~lost_outside[labels], ~won_outside[labels]


def _groups(labels: IntArray, models: StrArray) -> list[tuple[int, tuple[str, ...]]]:
    """``(label, models)`` per label, largest group first."""
    order = np.argsort(labels, kind="stable")
    cuts = np.flatnonzero(np.diff(labels[order])) + 1
    groups = [
        (int(labels[part[0]]), tuple(models[part].tolist()))
        for part in np.split(order, cuts)
    ]
    return sorted(groups, key=lambda item: (-len(item[1]), item[1]))


def _show(group: tuple[str, ...]) -> str:
    more = f", ... (+{len(group) - _SHOWN})" if len(group) > _SHOWN else ""
    return "{" + ", ".join(group[:_SHOWN]) + more + "}"


def check_identifiable(
    wins: FloatArray,
    models: StrArray,
    counts: IntArray,
    *,
    ties: TiesPolicy,
    is_plain_bt: bool,
) -> None:
    """Raise RatingsNotIdentifiableError if the ratings do not exist (see the module docstring).

    Only plain Bradley-Terry (no L2 penalty, no style control) needs the
    "beat" graph strongly connected.
    """
    games = wins + wins.T
    has_games = games.sum(axis=1) > 0
    if not has_games.all():
        idle = tuple(models[~has_games].tolist())
        if ties == "drop":
            msg = f"{len(idle)} model(s) have no battles once ties are dropped: {_show(idle)}.\nHint: use --ties half, or filter these models out with --where."
        else:
            msg = f"{len(idle)} model(s) have no battles (all their counts are 0): {_show(idle)}.\nHint: drop their rows, or filter these models out with --where."
        raise RatingsNotIdentifiableError(msg, (idle,))
    connected = reach_closure(games > 0)
    labels = np.argmax(connected, axis=1).astype(np.int64)
    if labels.max() > 0:
        parts = [group for _, group in _groups(labels, models)]
        shown = "; ".join(_show(part) for part in parts[:_SHOWN])
        more = f"; and {len(parts) - _SHOWN} more" if len(parts) > _SHOWN else ""
        msg = f"the comparison graph has {len(parts)} separate parts, and ratings in different parts cannot be compared: {shown}{more}.\nHint: rate one part at a time (filter with --where), or add battles between the parts."
        raise RatingsNotIdentifiableError(msg, tuple(parts))
    if not is_plain_bt:
        return
    labels, never_lost, never_won = _strong_parts(wins > 0)
    if labels.max() == 0:
        return
    n_won = counts[:, :, 2].sum(axis=1) + counts[:, :, 0].sum(axis=0)
    n_lost = counts[:, :, 0].sum(axis=1) + counts[:, :, 2].sum(axis=0)
    groups = _groups(labels, models)
    tops = [group for label, group in groups if never_lost[label]]
    bottoms = [group for label, group in groups if never_won[label]]
    index = {name: i for i, name in enumerate(models.tolist())}

    def describe(group: tuple[str, ...], side: str) -> str:
        if len(group) == 1:
            i = index[group[0]]
            return f"{group[0]} ({n_won[i]} wins, {n_lost[i]} losses)"
        return f"{_show(group)} (never {side} a model outside the group)"

    lines = [f"never lost: {'; '.join(describe(g, 'lost to') for g in tops[:_SHOWN])}"]
    lines.append(
        f"never won: {'; '.join(describe(g, 'beat') for g in bottoms[:_SHOWN])}"
    )
    msg = (
        "Bradley-Terry ratings diverge: some models never lost (or never won) against the others, so their maximum-likelihood rating is infinite; "
        + "; ".join(lines)
        + ".\nHint: add an L2 penalty (--l2 1, as the Arena's 2023 notebook did), keep ties (--ties half), or filter these models out with --where."
    )
    raise RatingsNotIdentifiableError(msg, tuple(tops + bottoms))
