"""Bootstrap intervals for Bradley-Terry: multinomial redraws of the cells, fitted in batches.

The reference (FastChat's ``compute_bootstrap_bt``) draws the counts of its
distinct cells from ``multinomial(n_battles, counts / n_battles)`` once per round.
We draw the same way over the cells the fit sees (per unordered pair: ``i`` won,
``j`` won, tie); sums of multinomial cells are multinomial, so the rounds follow
the reference's distribution exactly (the random stream differs). Rounds are
fitted together, warm-started at the point estimate.

**Not identifiable in a round.** A model that never lost (or never won) in a
round has an infinite maximum-likelihood rating there. The round then takes the
likelihood's limit: the part of the graph holding the anchor (else the most
models) is fitted, parts that beat it get ``+inf``, parts it beat ``-inf``, so a
97.5th percentile can be ``inf``: the data bound that side of the interval by
nothing. A round in which a model did not play leaves it out (NaN).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import replace
from itertools import islice

import numpy as np

from lbnorm._runtime import check_cancelled
from lbnorm.core.errors import RatingOptionsError
from lbnorm.ratings.bradley_terry import (
    MAX_NEWTON_ITER,
    NewtonWork,
    full_preconditioner,
    newton,
    win_matrix,
)
from lbnorm.ratings.checks import reach_closure
from lbnorm.ratings.options import (
    BATCH_BYTES,
    INIT_RATING,
    SCALE,
    BoolArray,
    FloatArray,
    IntArray,
    RatingOptions,
    RatingWarning,
    TiesPolicy,
)

__all__ = [
    "batch_budget",
    "bootstrap_bradley_terry",
    "check_bootstrap_memory",
    "draw_multinomial",
    "estimate_bootstrap_bytes",
    "pair_cells",
    "round_generators",
]

_BOOT_TOL = 1e-7
_BOOT_MAX_ITER = 30


def pair_cells(
    counts: IntArray, ties: TiesPolicy
) -> tuple[IntArray, IntArray, IntArray]:
    """The cells a bootstrap draws: per played pair ``i < j``, i won / j won / tie.

    Returns:
        ``(cells, destination_i_j, destination_j_i)``: counts per cell (flattened
        pairs x 3) and, per pair, the flat positions ``i*k+j`` and ``j*k+i``.
    """
    k = len(counts)
    decisive = counts[:, :, 2] + counts[:, :, 0].T  # i beat j, either seat
    tied = counts[:, :, 1] + counts[:, :, 1].T
    played = decisive + decisive.T + (tied if ties == "half" else 0)
    first, second = np.nonzero(np.triu(played, 1))
    columns = [decisive[first, second], decisive[second, first]]
    if ties == "half":
        columns.append(tied[first, second])
    cells = np.stack(columns, axis=1).astype(np.int64)
    return cells, first * k + second, second * k + first


def _chunk_rounds(k: int, n_cells: int, rounds: int, budget: int) -> int:
    """Rounds fitted together: as many as fit in ``budget`` bytes of buffers."""
    per_round = 5 * k * k * 8 + n_cells * 16
    return max(1, min(rounds, budget // max(per_round, 1)))


def batch_budget(options: RatingOptions) -> int:
    """Buffer budget of one batch: a quarter of the memory allowed, at most 96 MiB."""
    return max(1, min(BATCH_BYTES, options.max_bootstrap_bytes // 4))


def estimate_bootstrap_bytes(
    *, n_models: int, n_battles: int, n_cells: int, options: RatingOptions
) -> int:
    """Peak memory a bootstrap needs, estimated before it starts.

    Args:
        n_models: ``k``.
        n_battles: Battles (rows) the Elo bootstrap resamples.
        n_cells: Cells the BT bootstrap draws (about 3 per played pair).
        options: The options (``bootstrap`` rounds, ``method``).

    Returns:
        Bytes: the table of rounds (and its sorted copy) plus the working set.

    Examples:
        >>> options = RatingOptions(bootstrap=1000)
        >>> estimate_bootstrap_bytes(n_models=300, n_battles=2_000_000,
        ...     n_cells=134_550, options=options) < 2**30
        True
    """
    rounds, k, budget = options.bootstrap, n_models, batch_budget(options)
    table = 3 * rounds * k * 8
    if options.method == "elo":
        block = max(1, min(n_battles, budget // (24 * max(rounds, 1))))
        return table + 5 * n_battles * 8 + block * rounds * 24
    chunk = _chunk_rounds(k, n_cells, rounds, budget)
    return table + chunk * (5 * k * k * 8 + n_cells * 16) + 4 * k * k * 8


def check_bootstrap_memory(
    *, n_models: int, n_battles: int, n_cells: int, options: RatingOptions
) -> None:
    """Refuse a bootstrap estimated to need more than ``options.max_bootstrap_bytes``."""
    needed = estimate_bootstrap_bytes(
        n_models=n_models, n_battles=n_battles, n_cells=n_cells, options=options
    )
    limit = options.max_bootstrap_bytes
    if needed <= limit:
        return
    fits, too_many = 0, options.bootstrap  # the most rounds that fit: bisect
    while too_many - fits > 1:
        middle = (fits + too_many) // 2
        trial = replace(options, bootstrap=middle)
        needs = estimate_bootstrap_bytes(
            n_models=n_models, n_battles=n_battles, n_cells=n_cells, options=trial
        )
        fits, too_many = (middle, too_many) if needs <= limit else (fits, middle)
    advice = (
        f"use fewer rounds (--bootstrap {fits} fits)"
        if fits
        else "even one round does not fit: rate fewer models (--where)"
    )
    msg = f"a bootstrap of {options.bootstrap} rounds over {n_models} models would need about {needed / 2**30:.2f} GiB, more than the {limit / 2**30:.2f} GiB allowed.\nHint: {advice}, or allow more memory (--max-memory GIB; RatingOptions.max_bootstrap_bytes)."
    raise RatingOptionsError(msg)


def draw_multinomial(
    rng: np.random.Generator, n: int, pvals: FloatArray, *, size: int
) -> IntArray:
    """``size`` draws from ``Multinomial(n, pvals)``, exactly, about twice numpy's speed.

    ``numpy``'s ``multinomial`` draws one binomial per cell in turn. Here each
    cell gets an independent ``Poisson(lam * p)`` with ``lam = n - 5 sqrt(n)``;
    given their sum ``s``, those counts are ``Multinomial(s, p)``, and adding
    ``n - s`` categorical draws (a few thousand, by binary search on the
    cumulative ``p``) makes them ``Multinomial(n, p)`` whatever ``s`` was. A
    round whose Poisson sum exceeds ``n`` (probability about 3e-7) is drawn again,
    which leaves the distribution unchanged.

    Args:
        rng: The random generator (advanced).
        n: Draws per round.
        pvals: Cell probabilities (summing to 1).
        size: Rounds.

    Returns:
        ``size x len(pvals)`` counts, each row summing to ``n``.

    Examples:
        >>> draws = draw_multinomial(np.random.default_rng(0), 10, np.array([0.5, 0.5]), size=3)
        >>> draws.sum(axis=1).tolist()
        [10, 10, 10]
    """
    return _Multinomial(n, pvals).draw(rng, size)


class _Multinomial:
    """:func:`draw_multinomial` with its per-distribution arrays computed once."""

    def __init__(self, n: int, pvals: FloatArray) -> None:
        self.n = n
        self.rate = max(n - 5.0 * math.sqrt(n), 0.0) * pvals
        self.cumulative = np.cumsum(pvals)
        self.cumulative[-1] = 1.0

    def draw(self, rng: np.random.Generator, size: int) -> IntArray:
        cells = len(self.rate)
        draws = rng.poisson(self.rate, size=(size, cells))
        short = self.n - draws.sum(axis=1)
        while (redo := short < 0).any():  # vanishingly rare; redrawing keeps it exact
            draws[redo] = rng.poisson(self.rate, size=(int(redo.sum()), cells))
            short = self.n - draws.sum(axis=1)
        uniform = rng.random(int(short.sum()))
        picks = np.searchsorted(self.cumulative, uniform, side="right")
        picks = np.minimum(picks, cells - 1)
        rows = np.repeat(np.arange(size), short)
        extra = np.bincount(rows * cells + picks, minlength=size * cells)
        draws += extra.reshape(size, cells)
        return draws


def round_generators(seed: int, rounds: int) -> Iterator[np.random.Generator]:
    """One ``numpy`` generator per bootstrap round, made as the rounds come.

    They are the children of ``SeedSequence(seed).spawn(rounds)``, spawned one at
    a time (the same children), so a round's draws depend neither on how the
    rounds are batched nor on how many there are. Made all at once, millions of
    rounds' generators (about 2 KB each, with their seeds) would take gigabytes
    that no memory estimate counts, and fill it by small allocations that fail
    anywhere; made as they come, only the rounds at hand are in memory.

    Examples:
        >>> first = next(round_generators(0, 3)).random()
        >>> first == np.random.default_rng(np.random.SeedSequence(0).spawn(1)[0]).random()
        True
    """
    seeds = np.random.SeedSequence(seed)
    for _ in range(rounds):
        yield np.random.default_rng(seeds.spawn(1)[0])


def bootstrap_bradley_terry(
    counts: IntArray,
    theta_hat: FloatArray,
    *,
    ties: TiesPolicy = "half",
    l2: float | None = None,
    rounds: int,
    seed: int = 0,
    keep: int | None = None,
    batch_bytes: int = BATCH_BYTES,
) -> tuple[FloatArray, list[RatingWarning]]:
    """Bootstrap BT ratings: multinomial redraws of the cells, fitted in batches.

    Args:
        counts: The ``k x k x 3`` counts of :func:`count_outcomes`.
        theta_hat: Point estimate in log-10 units (``(rating - 1000) / 400``), the
            warm start of every round.
        ties: As in :class:`RatingOptions`.
        l2: As in :class:`RatingOptions`.
        rounds: How many rounds.
        seed: Seeds one ``numpy`` generator per round (:func:`round_generators`).
        keep: A model (the anchor) whose ratings stay finite in a round where
            some do not; by default the models of the largest part.
        batch_bytes: Memory for the buffers of the rounds fitted together.

    Returns:
        ``(ratings, warnings)``: ratings per round (``rounds x k``, unanchored,
        ``+-inf`` for a model that never lost / never won in a round, NaN for a
        model absent from a round or a round that failed), and what to show.
    """
    k = len(counts)
    cells, upper, lower = pair_cells(counts, ties)
    n_pairs, n_kinds = cells.shape
    flat_cells = cells.reshape(-1)
    drawn = np.flatnonzero(flat_cells)
    total = int(flat_cells.sum())
    sampler = _Multinomial(total, flat_cells[drawn] / total)
    generators = round_generators(seed, rounds)
    chunk = _chunk_rounds(k, len(drawn), rounds, batch_bytes)
    work = NewtonWork.allocate(chunk, k)
    full_wins = win_matrix(counts, ties=ties)
    preconditioner = full_preconditioner(full_wins + full_wins.T, theta_hat, l2)
    wins_buffer = np.zeros((chunk, k * k))
    games_buffer = np.empty((chunk, k, k))
    per_cell = np.zeros((chunk, n_pairs * n_kinds))
    ratings = np.empty((rounds, k))
    n_divergent = n_failed = 0
    for start in range(0, rounds, chunk):
        size = min(chunk, rounds - start)
        for row, generator in enumerate(islice(generators, size)):
            check_cancelled()  # a cancelled run stops between two rounds
            per_cell[row, drawn] = sampler.draw(generator, 1)
        by_pair = per_cell[:size].reshape(size, n_pairs, n_kinds)
        tie_half = 0.5 * by_pair[:, :, 2] if n_kinds == 3 else 0.0
        wins_buffer[:size, upper] = by_pair[:, :, 0] + tie_half
        wins_buffer[:size, lower] = by_pair[:, :, 1] + tie_half
        wins = wins_buffer[:size].reshape(size, k, k)
        games = games_buffer[:size]
        np.add(wins, wins.transpose(0, 2, 1), out=games)
        theta, divergent, failed = _fit_rounds(
            wins, games, theta_hat, l2, work, preconditioner, keep
        )
        ratings[start : start + size] = SCALE * theta + INIT_RATING
        n_divergent += int(divergent)
        n_failed += int(failed)
    return ratings, _warnings(n_divergent, n_failed, rounds)


def _warnings(n_divergent: int, n_failed: int, rounds: int) -> list[RatingWarning]:
    """What to show of the rounds whose fit diverged (open intervals) or failed (left out)."""
    warnings = []
    if n_divergent:
        message = f"in {n_divergent} of {rounds} bootstrap rounds some models never lost (or never won) against the rest; their ratings there are +inf (-inf), and their intervals may be open."
        warnings.append(RatingWarning("bootstrap_divergent", message))
    if n_failed:
        message = f"{n_failed} of {rounds} bootstrap rounds are left out: their comparison graph fell apart, or a group of models never lost (or never won) against the rest."
        warnings.append(RatingWarning("bootstrap_failed", message))
    return warnings


def _fit_rounds(
    wins: FloatArray,
    games: FloatArray,
    theta_hat: FloatArray,
    l2: float | None,
    work: NewtonWork,
    preconditioner: FloatArray,
    keep: int | None,
) -> tuple[FloatArray, int, int]:
    """Fit one batch of rounds; returns theta (with +-inf / NaN), #divergent, #failed."""
    rounds, k = wins.shape[:2]
    active = games.sum(axis=2) > 0
    sign = np.zeros((rounds, k))
    if l2 is None:  # a round whose "beat" graph is not strongly connected: peel
        for r in np.flatnonzero(~_is_whole(wins, active, directed=True)):
            _peel(wins[r], games[r], active[r], sign[r], keep)
    divergent = int((sign != 0).any(axis=1).sum())
    # a round in parts is left out
    is_whole = _is_whole(games, active, directed=False) | ~active.any(axis=1)
    active &= is_whole[:, None]
    theta = np.repeat(theta_hat[None], rounds, axis=0)
    if l2 is None:  # start each round centred over its active models
        counted = np.maximum(active.sum(axis=1), 1)
        theta -= ((theta * active).sum(axis=1) / counted)[:, None]
    converged = newton(
        wins,
        games,
        theta,
        l2=l2,
        active=active,
        work=work,
        max_iter=_BOOT_MAX_ITER,
        line_search=False,
        preconditioner=preconditioner,
        tol=_BOOT_TOL,
    )
    failed = int((~is_whole).sum())
    for r in np.flatnonzero(~converged & is_whole):  # rare: retry alone, line search
        retry = np.where(active[r], theta_hat, 0.0)[None]
        if l2 is None:
            retry -= retry[0, active[r]].mean()
        ok = newton(
            wins[r : r + 1],
            games[r : r + 1],
            retry,
            l2=l2,
            active=active[r : r + 1],
            work=work,
            max_iter=MAX_NEWTON_ITER,
            line_search=True,
        )
        theta[r] = retry[0] if ok[0] else np.nan
        failed += int(not ok[0])
    theta[~active] = np.nan
    has_sign = sign != 0
    theta[has_sign] = sign[has_sign]
    return theta, divergent, failed


def _peel(
    wins: FloatArray,
    games: FloatArray,
    active: BoolArray,
    sign: FloatArray,
    keep: int | None,
) -> None:
    """Where one round's maximum likelihood does not exist, take its limit (in place).

    The "beat" graph of the round falls into strongly connected parts. One part
    keeps finite ratings: the anchor's (``keep``), else the one with the most
    models (then battles). Parts with a chain of wins down to it are rated
    ``+inf``, parts it reaches ``-inf``, parts neither above nor below it are
    left out; only the kept part is fitted, as the likelihood's limit has it.
    """
    models = np.flatnonzero(active)
    beats = wins[np.ix_(models, models)] > 0
    reach = reach_closure(beats)
    labels = np.argmax(reach & reach.T, axis=1)
    if labels.max() == 0:
        return
    position = np.flatnonzero(models == keep)
    if position.size:
        main = labels[position[0]]
    else:
        size = np.bincount(labels, minlength=len(models))
        battles = np.bincount(
            labels,
            weights=games[np.ix_(models, models)].sum(axis=1),
            minlength=len(models),
        )
        main = np.lexsort((-battles, -size))[0]
    is_other = labels != main
    sign[models[reach[:, main] & is_other]] = np.inf
    sign[models[reach[main, :] & is_other]] = -np.inf
    gone = models[is_other]
    active[gone] = False
    wins[gone, :] = wins[:, gone] = 0.0
    games[gone, :] = games[:, gone] = 0.0


def _is_whole(edges: FloatArray, active: BoolArray, *, directed: bool) -> BoolArray:
    """Per round, whether its active models form one (strongly) connected graph.

    Breadth-first searches for all rounds at once, from each round's first active
    model: the reached set grows by one matrix-vector product per step and stops
    after the graph's diameter (two or three steps on Arena data). Directed, a
    round must also be reached back: ``edges[r, i, j] > 0`` means ``i`` beat ``j``,
    and the maximum-likelihood ratings exist exactly when every model can be
    reached from every other along such edges.
    """
    linked = (edges > 0).astype(np.float32)
    start = np.zeros(active.shape, dtype=np.float32)
    start[np.arange(len(active)), np.argmax(active, axis=1)] = 1.0
    whole: BoolArray = np.asarray(active.any(axis=1), dtype=np.bool_)
    for spec in ("rij,ri->rj", "rij,rj->ri") if directed else ("rij,rj->ri",):
        reached = start
        while True:
            grown = np.minimum(reached + np.einsum(spec, linked, reached), 1.0)
            if np.array_equal(grown, reached):
                break
            reached = grown
        whole &= (reached.astype(np.bool_) == active).all(axis=1)
    return whole
