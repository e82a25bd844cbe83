r"""Pairwise ratings from battles: Bradley-Terry and online Elo, with bootstrap intervals.

Numpy kernels on integer codes (no I/O, no pandas), following FastChat's
``fastchat/serve/monitor/rating_systems.py`` (the Chatbot Arena leaderboard) and
its 2023 ``elo_analysis.py``. Battles arrive as codes (see
:class:`lbnorm.ratings.battles.Battles`); the outcome of a battle for seat A is
``y = 1`` (A won), ``0.5`` (tie, or ``tie (bothbad)``) or ``0`` (B won).

**Counts.** One ``np.bincount`` over ``(a * k + b) * 3 + outcome`` gives a
``k x k x 3`` array of battles per seat pair and outcome. From it,
``W[i, j]`` = battles ``i`` won against ``j`` in either seat, plus half of their
ties (``ties="half"``; ``"drop"`` leaves ties out), and ``N = W + W.T``.

**Bradley-Terry** (``method="bt"``, the default). With ``theta`` in log-10 units,
``P(i beats j) = 1 / (1 + 10 ** (theta_j - theta_i))`` and the rating is
``400 * theta + 1000``. The fit maximises the likelihood of the distinct
``(a, b, outcome)`` cells, each weighted by its count, exactly as the reference
does; that likelihood depends on the cells only through ``W``, so the fit runs
Newton's method on the ``k x k`` matrix and costs nothing per battle::

    f(theta) = -sum_ij W[i, j] * log(sigmoid(ln(10) * (theta_i - theta_j)))

Unregularised, ``theta`` is defined up to a constant: the fit keeps
``sum(theta) = 0`` (the reference's L-BFGS, started at zero, stays there too, as
every gradient sums to zero), so unanchored ratings have mean 1000. With
``anchor=(model, rating)`` all ratings shift so that model has that rating (the
Arena anchors ``mixtral-8x7b-instruct-v0.1`` at 1114; its code does so whenever
that model is present). With ``l2=C`` the fit minimises
``2 C f(theta) + |theta|^2 / 2``: scikit-learn's ``LogisticRegression(C=C,
fit_intercept=False)`` on the 2023 notebook's design (every battle twice, columns
``+ln 10`` for A and ``-ln 10`` for B, a tie once as A's win and once as B's), whose
loss is ``C * sum(log loss) + |w|^2 / 2`` over those doubled rows. ``C = 1`` (the
default then) is what the notebook's published MLE table used; regularised ratings
also have mean 1000.

**Online Elo** (``method="elo"``): battles in ``tstamp`` order (a stable sort;
file order without ``tstamp``), every model starting at 1000, and per battle
``p = 1 / (1 + exp(alpha * (r_b - r_a)))``, ``alpha = ln(10) / 400``,
``r_a += 4 (y - p)``, ``r_b -= 4 (y - p)``: the reference's loop, float for float.

**Bootstrap** (``bootstrap=N``, ``seed``). BT: the reference draws the counts of
its distinct cells from ``multinomial(n_battles, counts / n_battles)`` once per
round. We draw the same way over the cells the fit sees (per unordered pair:
``i`` won, ``j`` won, tie); sums of multinomial cells are multinomial, so the
rounds follow the reference's distribution exactly (the random stream differs).
Rounds are fitted together, warm-started at the point estimate. Elo: as the
reference, each round replays ``n`` battles drawn with replacement, in random
order, all rounds advancing together. The interval is the 2.5th and 97.5th
percentile (linear interpolation, as ``pandas.DataFrame.quantile``); the rating
stays the point estimate on all battles. ``rank_upper_bound`` is the Arena's
"rank (UB)": ``1 +`` the number of models whose lower bound is above this
model's upper bound.

**Not identifiable.** Ratings of models in different connected parts of the
comparison graph cannot be compared (an error names the parts). Unregularised BT
ratings exist only if the "beat" graph is strongly connected: a model that never
lost (or never won) has an infinite maximum-likelihood rating (an error names it
and suggests ``l2``). In a bootstrap round this can happen by chance; the round
then takes the likelihood's limit: the part of the graph holding the anchor (else
the most models) is fitted, parts that beat it get ``+inf``, parts it beat
``-inf``, so a 97.5th percentile can be ``inf``: the data bound that side of the
interval by nothing. A round in which a model did not play leaves it out (NaN),
as the reference's table of rounds does.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.core.errors import (
    InputError,
    RatingOptionsError,
    RatingsNotIdentifiableError,
)
from lbnorm.core.schemas import PAIRWISE_SCORES, RATINGS, WIN_RATES

__all__ = [
    "BASE",
    "ELO_K",
    "INIT_RATING",
    "PAIRWISE_SCORES",
    "RATINGS",
    "SCALE",
    "WIN_RATES",
    "BattleData",
    "Method",
    "PairwiseScores",
    "RatingOptions",
    "RatingOptionsError",
    "RatingWarning",
    "Ratings",
    "RatingsNotIdentifiableError",
    "TiesPolicy",
    "bootstrap_bradley_terry",
    "bootstrap_elo",
    "compute_ratings",
    "count_outcomes",
    "draw_multinomial",
    "estimate_bootstrap_bytes",
    "fit_bradley_terry",
    "online_elo",
    "parse_anchor",
    "percentile_intervals",
    "predicted_win_rates",
    "rank_with_uncertainty",
    "ratings_table",
    "score_against_reference",
    "win_matrix",
    "win_rates_table",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
StrArray = npt.NDArray[np.str_]

Method = Literal["bt", "elo"]
TiesPolicy = Literal["half", "drop"]

#: Rating points per factor of ``BASE`` in the odds of winning.
SCALE = 400.0
#: Odds base: a lead of ``SCALE`` points means odds of ``BASE`` to 1.
BASE = 10.0
#: Rating every model starts from (Elo) and the mean of unanchored ratings.
INIT_RATING = 1000.0
#: Online Elo's step: the most a rating moves in one battle is ``ELO_K``.
ELO_K = 4.0

_LN_BASE = math.log(BASE)
_ALPHA = _LN_BASE / SCALE  # logistic slope per rating point
_TOL = 1e-10  # Newton stops when no theta moves more (4e-8 rating points)
_CG_TOL = 1e-11  # conjugate gradients stop at this relative residual
# Newton converges quadratically: after a step below 1e-7 the error is ~1e-14
_BOOT_TOL = 1e-7
_MAX_STEP = 2.0  # a Newton step moves theta at most this far (800 points)
_MAX_ITER = 100
_BOOT_MAX_ITER = 30
_CHUNK_BYTES = 96 * 2**20  # working set of one batch of bootstrap fits
_SHOWN = 5
_QUANTILES = (0.025, 0.975)


@dataclass(frozen=True, slots=True)
class RatingWarning:
    """A condition worth showing that did not stop the computation.

    Attributes:
        code: A stable name: ``bootstrap_divergent`` (rounds in which a model
            never lost or never won), ``bootstrap_failed`` (rounds left out), or
            ``bootstrap_absent`` (rounds in which a model has no rating).
        message: One sentence for people.
    """

    code: str
    message: str


class BattleData(Protocol):
    """What the kernels read from battles (:class:`lbnorm.ratings.battles.Battles`)."""

    @property
    def models(self) -> StrArray: ...  # noqa: D102
    @property
    def model_a(self) -> npt.NDArray[np.int32]: ...  # noqa: D102
    @property
    def model_b(self) -> npt.NDArray[np.int32]: ...  # noqa: D102
    @property
    def outcome(self) -> npt.NDArray[np.int8]: ...  # noqa: D102
    @property
    def count(self) -> IntArray: ...  # noqa: D102
    @property
    def tstamp(self) -> FloatArray | None: ...  # noqa: D102
    @property
    def is_aggregated(self) -> bool: ...  # noqa: D102


@dataclass(frozen=True, slots=True, kw_only=True)
class RatingOptions:
    """How ratings are computed; one object from the CLI to the kernels.

    Attributes:
        method: ``"bt"`` (Bradley-Terry maximum likelihood) or ``"elo"`` (online).
        ties: ``"half"`` (a tie is half a win for each side) or ``"drop"``.
        l2: ``None``, or scikit-learn's ``C`` for an L2 penalty (BT only).
        anchor: ``(model, rating)``: shift ratings so that model has that rating.
        bootstrap: Rounds of bootstrap for the intervals (0: no intervals).
        seed: Seed of the bootstrap's random numbers.
        max_bootstrap_bytes: Refuse a bootstrap estimated to need more memory.

    Examples:
        >>> RatingOptions(ties="drop", l2=1.0).l2
        1.0
        >>> RatingOptions(bootstrap=-1)
        Traceback (most recent call last):
        ...
        lbnorm.core.errors.RatingOptionsError: bootstrap must be a whole number >= 0, got -1.
        Hint: use 0 for no intervals; the Arena uses 1000 rounds (--bootstrap 1000).
    """

    method: Method = "bt"
    ties: TiesPolicy = "half"
    l2: float | None = None
    anchor: tuple[str, float] | None = None
    bootstrap: int = 0
    seed: int = 0
    max_bootstrap_bytes: int = 4 * 2**30

    def __post_init__(self) -> None:
        def fail(problem: str, hint: str) -> None:
            msg = f"{problem}.\nHint: {hint}"
            raise RatingOptionsError(msg)

        if self.method not in ("bt", "elo"):
            fail(
                f"method must be 'bt' or 'elo', got {self.method!r}",
                "bt is Bradley-Terry (the Arena's leaderboard), elo the online update.",
            )
        if self.ties not in ("half", "drop"):
            fail(
                f"ties must be 'half' or 'drop', got {self.ties!r}",
                "half counts a tie as half a win for each side (the Arena's default).",
            )
        if self.l2 is not None:
            if isinstance(self.l2, bool) or not isinstance(self.l2, (int, float)):
                fail(
                    f"l2 must be a number, got {self.l2!r}",
                    "--l2 1 is scikit-learn's C = 1.",
                )
            elif not (math.isfinite(self.l2) and self.l2 > 0):
                fail(
                    f"l2 must be a finite number > 0, got {self.l2!r}",
                    "l2 is scikit-learn's C (smaller is stronger); leave it out for none.",
                )
            if self.method == "elo":
                fail(
                    "l2 applies to Bradley-Terry only, not to online Elo",
                    "drop --l2, or use --method bt.",
                )
        if self.anchor is not None and not _is_anchor(self.anchor):
            fail(
                f"anchor must be (model name, finite rating), got {self.anchor!r}",
                "write --anchor MODEL=RATING, e.g. --anchor mixtral-8x7b-instruct-v0.1=1114.",
            )
        for name in ("bootstrap", "seed", "max_bootstrap_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                hints = {
                    "bootstrap": "use 0 for no intervals; the Arena uses 1000 rounds (--bootstrap 1000).",
                    "seed": "any whole number >= 0 gives reproducible rounds.",
                    "max_bootstrap_bytes": "give a memory budget in bytes.",
                }
                fail(f"{name} must be a whole number >= 0, got {value!r}", hints[name])


def _is_anchor(anchor: object) -> bool:
    if not isinstance(anchor, tuple) or len(anchor) != 2:
        return False
    name, rating = anchor
    is_number = isinstance(rating, (int, float)) and not isinstance(rating, bool)
    return (
        isinstance(name, str)
        and bool(name.strip())
        and is_number
        and math.isfinite(rating)
    )


def parse_anchor(text: str) -> tuple[str, float]:
    """Parse ``MODEL=RATING`` (the last ``=`` splits, so names may contain one).

    Args:
        text: The option's value.

    Returns:
        ``(model, rating)``.

    Raises:
        RatingOptionsError: No ``=``, an empty name, or a rating that is not a number.

    Examples:
        >>> parse_anchor("mixtral-8x7b-instruct-v0.1=1114")
        ('mixtral-8x7b-instruct-v0.1', 1114.0)
    """
    model, equals, rating = text.rpartition("=")
    try:
        value = float(rating)
    except ValueError:
        value = math.nan
    if not equals or not model.strip() or not math.isfinite(value):
        msg = f"--anchor {text!r} is not MODEL=RATING.\nHint: write e.g. --anchor mixtral-8x7b-instruct-v0.1=1114."
        raise RatingOptionsError(msg)
    return model.strip(), value


# --- counts ------------------------------------------------------------------------


def count_outcomes(
    model_a: npt.NDArray[np.integer],
    model_b: npt.NDArray[np.integer],
    outcome: npt.NDArray[np.integer],
    count: npt.NDArray[np.integer] | None = None,
    *,
    n_models: int,
) -> IntArray:
    """Battles per (seat A model, seat B model, outcome), in one pass.

    Args:
        model_a: Codes of the models in seat A.
        model_b: Codes of the models in seat B.
        outcome: 2 if A won, 1 for a tie, 0 if B won.
        count: Battles each row stands for (default: 1 each).
        n_models: ``k``, the number of model codes.

    Returns:
        A ``k x k x 3`` array: ``[a, b, outcome]`` -> battles.

    Examples:
        >>> counts = count_outcomes(np.array([0, 0, 1]), np.array([1, 1, 0]),
        ...     np.array([2, 1, 2]), n_models=2)
        >>> counts[0, 1].tolist(), counts[1, 0].tolist()
        ([0, 1, 1], [0, 0, 1])
    """
    k = n_models
    cell = (model_a.astype(np.int64) * k + model_b) * 3 + outcome
    weights = None if count is None or bool((count == 1).all()) else count
    totals = np.bincount(cell, weights=weights, minlength=k * k * 3)
    return totals.astype(np.int64).reshape(k, k, 3)


def win_matrix(counts: IntArray, *, ties: TiesPolicy = "half") -> FloatArray:
    """``W[i, j]``: battles ``i`` won against ``j`` (either seat), plus half their ties.

    Args:
        counts: The ``k x k x 3`` array of :func:`count_outcomes`.
        ties: ``"half"`` adds half of each tie to both sides; ``"drop"`` ignores ties.

    Returns:
        The ``k x k`` matrix of wins; ``W + W.T`` counts the battles fitted.

    Examples:
        >>> counts = count_outcomes(np.array([0, 0]), np.array([1, 1]),
        ...     np.array([2, 1]), n_models=2)
        >>> win_matrix(counts).tolist(), win_matrix(counts, ties="drop").tolist()
        ([[0.0, 1.5], [0.5, 0.0]], [[0.0, 1.0], [0.0, 0.0]])
    """
    wins = (counts[:, :, 2] + counts[:, :, 0].T).astype(np.float64)
    if ties == "half":
        tied = counts[:, :, 1]
        wins += 0.5 * (tied + tied.T)
    return wins


# --- Bradley-Terry -----------------------------------------------------------------


@dataclass(slots=True)
class _Work:
    """Buffers for batched Newton steps, allocated once and reused (fresh pages are slow)."""

    sig: FloatArray
    expected: FloatArray
    hessian: FloatArray

    @classmethod
    def allocate(cls, rounds: int, k: int) -> _Work:
        return cls(*(np.empty((rounds, k, k)) for _ in range(3)))


def _sigmoid_matrix(theta: FloatArray, out: FloatArray) -> FloatArray:
    """``out[r, i, j] = P(i beats j) = 1 / (1 + 10 ** (theta_j - theta_i))``."""
    np.subtract(theta[:, None, :], theta[:, :, None], out=out)
    out *= _LN_BASE
    with np.errstate(over="ignore"):  # exp -> inf gives probability 0, as it should
        np.exp(out, out=out)
    out += 1.0
    np.reciprocal(out, out=out)
    return out


def _objective(
    theta: FloatArray, wins: FloatArray, l2: float | None, out: FloatArray
) -> FloatArray:
    """Negative log-likelihood per round (penalised as scikit-learn when ``l2``)."""
    np.subtract(theta[:, None, :], theta[:, :, None], out=out)
    out *= _LN_BASE
    np.logaddexp(0.0, out, out=out)  # -log sigmoid(ln10 (theta_i - theta_j))
    out *= wins
    value: FloatArray = out.sum(axis=(1, 2))
    if l2 is not None:
        value = 2.0 * l2 * value + 0.5 * np.einsum("rk,rk->r", theta, theta)
    return value


def _newton(
    wins: FloatArray,
    games: FloatArray,
    theta: FloatArray,
    *,
    l2: float | None,
    active: BoolArray | None,
    work: _Work,
    max_iter: int,
    line_search: bool,
    preconditioner: FloatArray | None = None,
    tol: float = _TOL,
) -> BoolArray:
    """Newton's method on rounds of ``k x k`` counts at once; updates ``theta``.

    Unregularised, the Hessian (a graph Laplacian) is singular along the constant
    vector; adding ``c * 1 1^T`` over the active models makes it invertible and
    keeps ``sum(theta)`` where it started (0). Inactive models (no battles in a
    round) keep their ``theta``. Each step solves the Newton system directly, or,
    given a ``preconditioner`` (the inverse Hessian of the full data), by
    preconditioned conjugate gradients: matrix-vector products instead of one
    LAPACK factorisation per round, which is what makes a batch of bootstrap
    rounds cheap.

    Returns:
        Per round, whether the last full Newton step was below the tolerance.
    """
    rounds = len(theta)
    sig, expected, weights = (
        buf[:rounds] for buf in (work.sig, work.expected, work.hessian)
    )
    won = wins.sum(axis=2)
    partial = active is not None and not bool(active.all())
    mask = active.astype(np.float64) if active is not None and partial else None
    converged = np.zeros(rounds, dtype=np.bool_)
    for _ in range(max_iter):
        _sigmoid_matrix(theta, out=sig)
        np.multiply(games, sig, out=expected)  # expected wins N * P
        gradient = _LN_BASE * (expected.sum(axis=2) - won)
        np.multiply(expected, sig, out=weights)
        np.subtract(expected, weights, out=weights)  # N P (1 - P)
        system = _System(weights=weights, l2=l2, mask=mask)
        if l2 is None:
            rhs = -gradient if mask is None else -gradient * mask
        else:
            rhs = -(2.0 * l2 * gradient + theta)
        if preconditioner is None:
            step = system.solve(rhs)
        else:
            step = system.solve_iteratively(rhs, preconditioner)
        size = np.abs(step).max(axis=1)
        finite = np.isfinite(size)
        step[~finite] = 0.0
        with np.errstate(divide="ignore"):
            step *= np.minimum(1.0, _MAX_STEP / size)[:, None]
        if line_search and float(np.nanmax(size, initial=0.0)) > 1e-3:
            step = _backtrack(theta, step, wins, l2, sig)
        theta += step
        converged = finite & (size < tol)
        if converged.all():
            break
    return converged


class _System:
    """The Newton system ``H x = rhs`` of a batch of rounds.

    ``H x = ln(10)^2 (d * x - V x)`` with ``V = N P (1 - P)`` and ``d`` its row
    sums (a weighted graph Laplacian), plus ``c 1 1^T`` over the active models
    (unregularised) or scaled by ``2 C`` plus the identity (``l2 = C``).
    """

    def __init__(
        self, *, weights: FloatArray, l2: float | None, mask: FloatArray | None
    ) -> None:
        self.weights = weights
        self.curvature = weights.sum(axis=2)
        self.l2 = l2
        self.mask = mask
        k = weights.shape[1]
        self.shift = _LN_BASE**2 * np.maximum(self.curvature.mean(axis=1), 1e-12) / k

    def times(self, x: FloatArray) -> FloatArray:
        """``H x`` for a batch of vectors (``rounds x k``)."""
        # einsum's own loops: BLAS threads cost more than they save at this size
        product = np.einsum("rij,rj->ri", self.weights, x)
        out: FloatArray = _LN_BASE**2 * (self.curvature * x - product)
        if self.l2 is not None:
            out *= 2.0 * self.l2
            out += x
        elif self.mask is None:
            out += self.shift[:, None] * x.sum(axis=1, keepdims=True)
        else:
            masked = self.mask * x
            out += self.shift[:, None] * self.mask * masked.sum(axis=1, keepdims=True)
            out += x - masked
        return out

    def solve(self, rhs: FloatArray) -> FloatArray:
        """Solve directly (LAPACK); overwrites ``weights`` with the dense ``H``."""
        rounds, k = rhs.shape
        hessian = self.weights
        flat = hessian.reshape(rounds, k * k)
        diagonal = np.arange(k) * (k + 1)
        hessian *= -(_LN_BASE**2)
        flat[:, diagonal] += _LN_BASE**2 * self.curvature
        if self.l2 is not None:
            hessian *= 2.0 * self.l2
            flat[:, diagonal] += 1.0
        elif self.mask is None:
            hessian += self.shift[:, None, None]
        else:
            hessian += self.shift[:, None, None] * (
                self.mask[:, :, None] * self.mask[:, None, :]
            )
            flat[:, diagonal] += 1.0 - self.mask
        try:
            step: FloatArray = np.linalg.solve(hessian, rhs[:, :, None])[
                :, :, 0
            ].astype(np.float64, copy=False)
        except np.linalg.LinAlgError:
            return _solve_each(hessian, rhs)
        return step

    def solve_iteratively(
        self, rhs: FloatArray, preconditioner: FloatArray, *, max_iter: int = 200
    ) -> FloatArray:
        """Preconditioned conjugate gradients, all rounds in step."""
        solution = np.zeros_like(rhs)
        residual = rhs.copy()
        bound = _CG_TOL * np.sqrt(np.einsum("rk,rk->r", rhs, rhs))
        direction = np.einsum("rk,kj->rj", residual, preconditioner)
        fit = np.einsum("rk,rk->r", residual, direction)
        for _ in range(max_iter):
            image = self.times(direction)
            curvature = np.einsum("rk,rk->r", direction, image)
            alpha = np.divide(
                fit, curvature, out=np.zeros_like(fit), where=curvature > 0
            )
            solution += alpha[:, None] * direction
            residual -= alpha[:, None] * image
            if (np.sqrt(np.einsum("rk,rk->r", residual, residual)) <= bound).all():
                break
            preconditioned = np.einsum("rk,kj->rj", residual, preconditioner)
            new_fit = np.einsum("rk,rk->r", residual, preconditioned)
            beta = np.divide(new_fit, fit, out=np.zeros_like(fit), where=fit > 0)
            direction = preconditioned + beta[:, None] * direction
            fit = new_fit
        return solution


def _preconditioner(
    games: FloatArray, theta: FloatArray, l2: float | None
) -> FloatArray:
    """The inverse Newton matrix of the full data at ``theta`` (``k x k``)."""
    k = len(theta)
    sig = _sigmoid_matrix(theta[None], out=np.empty((1, k, k)))
    weights = games[None] * sig * (1.0 - sig)
    system = _System(weights=weights, l2=l2, mask=None)
    system.solve(np.zeros((1, k)))  # builds the dense matrix in `weights`
    inverse: FloatArray = np.linalg.inv(weights[0])
    return inverse


def _solve_each(hessian: FloatArray, rhs: FloatArray) -> FloatArray:
    """Solve round by round when the batch holds a singular matrix (that round: NaN)."""
    step = np.full(rhs.shape, np.nan)
    for r in range(len(rhs)):  # rounds, not battles; only after a LinAlgError
        try:
            step[r] = np.linalg.solve(hessian[r], rhs[r])
        except np.linalg.LinAlgError:
            continue
    return step


def _backtrack(
    theta: FloatArray,
    step: FloatArray,
    wins: FloatArray,
    l2: float | None,
    buffer: FloatArray,
) -> FloatArray:
    """Halve each round's step until its objective does not increase."""
    before = _objective(theta, wins, l2, buffer[: len(theta)])
    scale = np.ones(len(theta))
    for _ in range(60):
        after = _objective(
            theta + scale[:, None] * step, wins, l2, buffer[: len(theta)]
        )
        is_worse = after > before + 1e-12 * np.abs(before)
        if not is_worse.any():
            break
        scale[is_worse] *= 0.5
    return step * scale[:, None]


def fit_bradley_terry(wins: FloatArray, *, l2: float | None = None) -> FloatArray:
    """Maximum-likelihood Bradley-Terry ratings from a win matrix (no checks).

    Args:
        wins: ``W`` of :func:`win_matrix` (``k x k``).
        l2: scikit-learn's ``C`` for an L2 penalty, or None.

    Returns:
        Ratings ``400 * theta + 1000`` (mean 1000). Call
        :func:`compute_ratings` for the checks that the ratings exist.

    Examples:
        >>> wins = np.array([[0.0, 3.0], [1.0, 0.0]])  # 3 wins to 1
        >>> fit_bradley_terry(wins).round(2).tolist()  # odds 3 = 10 ** (d / 400)
        [1095.42, 904.58]
    """
    k = len(wins)
    games = wins + wins.T
    theta = np.zeros((1, k))
    converged = _newton(
        wins[None],
        games[None],
        theta,
        l2=l2,
        active=None,
        work=_Work.allocate(1, k),
        max_iter=_MAX_ITER,
        line_search=True,
    )
    if not converged.all():  # pragma: no cover - checked data converge
        msg = "Bradley-Terry fit did not converge.\nHint: check the battles with compute_ratings, which names models whose ratings diverge."
        raise RatingsNotIdentifiableError(msg, ())
    rating: FloatArray = SCALE * theta[0] + INIT_RATING
    return rating


def _pair_cells(
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


def _batch_bytes(options: RatingOptions) -> int:
    """Buffer budget of one batch: a quarter of the memory allowed, at most 96 MiB."""
    return max(1, min(_CHUNK_BYTES, options.max_bootstrap_bytes // 4))


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
    rounds, k, budget = options.bootstrap, n_models, _batch_bytes(options)
    table = 3 * rounds * k * 8
    if options.method == "elo":
        block = max(1, min(n_battles, budget // (24 * max(rounds, 1))))
        return table + 5 * n_battles * 8 + block * rounds * 24
    chunk = _chunk_rounds(k, n_cells, rounds, budget)
    return table + chunk * (5 * k * k * 8 + n_cells * 16) + 4 * k * k * 8


def _check_bootstrap_memory(
    *, n_models: int, n_battles: int, n_cells: int, options: RatingOptions
) -> None:
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


def bootstrap_bradley_terry(
    counts: IntArray,
    theta_hat: FloatArray,
    *,
    ties: TiesPolicy = "half",
    l2: float | None = None,
    rounds: int,
    seed: int = 0,
    keep: int | None = None,
    batch_bytes: int = _CHUNK_BYTES,
) -> tuple[FloatArray, list[RatingWarning]]:
    """Bootstrap BT ratings: multinomial redraws of the cells, fitted in batches.

    Args:
        counts: The ``k x k x 3`` counts of :func:`count_outcomes`.
        theta_hat: Point estimate in log-10 units (``(rating - 1000) / 400``), the
            warm start of every round.
        ties: As in :class:`RatingOptions`.
        l2: As in :class:`RatingOptions`.
        rounds: How many rounds.
        seed: Seeds one ``numpy`` generator per round (``SeedSequence.spawn``).
        keep: A model (the anchor) whose ratings stay finite in a round where
            some do not; by default the models of the largest part.
        batch_bytes: Memory for the buffers of the rounds fitted together.

    Returns:
        ``(ratings, warnings)``: ratings per round (``rounds x k``, unanchored,
        ``+-inf`` for a model that never lost / never won in a round, NaN for a
        model absent from a round or a round that failed), and what to show.
    """
    k = len(counts)
    cells, upper, lower = _pair_cells(counts, ties)
    n_pairs, n_kinds = cells.shape
    flat_cells = cells.reshape(-1)
    drawn = np.flatnonzero(flat_cells)
    total = int(flat_cells.sum())
    sampler = _Multinomial(total, flat_cells[drawn] / total)
    # one generator per round: the draws do not depend on how rounds are batched
    generators = [
        np.random.default_rng(child)
        for child in np.random.SeedSequence(seed).spawn(rounds)
    ]
    chunk = _chunk_rounds(k, len(drawn), rounds, batch_bytes)
    work = _Work.allocate(chunk, k)
    full_wins = win_matrix(counts, ties=ties)
    preconditioner = _preconditioner(full_wins + full_wins.T, theta_hat, l2)
    wins_buffer = np.zeros((chunk, k * k))
    games_buffer = np.empty((chunk, k, k))
    per_cell = np.zeros((chunk, n_pairs * n_kinds))
    ratings = np.empty((rounds, k))
    n_divergent = n_failed = 0
    for start in range(0, rounds, chunk):
        size = min(chunk, rounds - start)
        for row, generator in enumerate(generators[start : start + size]):
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
    warnings = []
    if n_divergent:
        warnings.append(
            RatingWarning(
                "bootstrap_divergent",
                f"in {n_divergent} of {rounds} bootstrap rounds some models never lost (or never won) against the rest; their ratings there are +inf (-inf), and their intervals may be open.",
            )
        )
    if n_failed:
        warnings.append(
            RatingWarning(
                "bootstrap_failed",
                f"{n_failed} of {rounds} bootstrap rounds are left out: their comparison graph fell apart, or a group of models never lost (or never won) against the rest.",
            )
        )
    return ratings, warnings


def _fit_rounds(
    wins: FloatArray,
    games: FloatArray,
    theta_hat: FloatArray,
    l2: float | None,
    work: _Work,
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
    converged = _newton(
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
        ok = _newton(
            wins[r : r + 1],
            games[r : r + 1],
            retry,
            l2=l2,
            active=active[r : r + 1],
            work=work,
            max_iter=_MAX_ITER,
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
    reach = _closure(beats)
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


# --- Elo ---------------------------------------------------------------------------


def online_elo(
    model_a: npt.NDArray[np.integer],
    model_b: npt.NDArray[np.integer],
    outcome: npt.NDArray[np.integer],
    *,
    n_models: int,
) -> FloatArray:
    """Online Elo over battles in the order given (K=4, base 10, scale 400, init 1000).

    The loop is the reference's, on Python floats (the same IEEE doubles as its
    numpy scalars), so the result is bit for bit FastChat's ``compute_elo``. It
    is sequential by nature; about 0.15 us per battle.

    Args:
        model_a: Codes of the models in seat A, in playing order.
        model_b: Codes of the models in seat B.
        outcome: 2 if A won, 1 for a tie, 0 if B won.
        n_models: ``k``.

    Returns:
        The ratings after the last battle.

    Examples:
        >>> online_elo(np.array([0]), np.array([1]), np.array([2]), n_models=2).tolist()
        [1002.0, 998.0]
    """
    ratings = [INIT_RATING] * n_models
    exp, alpha, k_factor = math.exp, _ALPHA, ELO_K
    scores = (outcome.astype(np.float64) / 2.0).tolist()
    for a, b, score in zip(model_a.tolist(), model_b.tolist(), scores, strict=True):
        rating_a, rating_b = ratings[a], ratings[b]
        update = k_factor * (score - 1.0 / (1.0 + exp(alpha * (rating_b - rating_a))))
        ratings[a] = rating_a + update
        ratings[b] = rating_b - update
    return np.array(ratings)


def bootstrap_elo(
    model_a: npt.NDArray[np.integer],
    model_b: npt.NDArray[np.integer],
    outcome: npt.NDArray[np.integer],
    *,
    n_models: int,
    rounds: int,
    seed: int = 0,
    block_bytes: int = _CHUNK_BYTES,
) -> FloatArray:
    """Online Elo on ``rounds`` resamples (with replacement, random order), together.

    As the reference's ``compute_bootstrap_elo``: step ``t`` of every round plays
    battle ``idx[t, round]``, so the loop runs over battles and each step updates
    all rounds at once. Cost: about ``n_battles * (10 + rounds / 100)`` us.

    Args:
        model_a: Codes of the models in seat A.
        model_b: Codes of the models in seat B.
        outcome: 2 if A won, 1 for a tie, 0 if B won.
        n_models: ``k``.
        rounds: How many rounds.
        seed: Seed of ``numpy.random.default_rng``.
        block_bytes: Memory for the resampled battles held at once.

    Returns:
        Ratings per round (``rounds x k``); NaN for a model absent from a round.
    """
    n, k = len(model_a), n_models
    rng = np.random.default_rng(seed)
    flat = np.zeros(rounds * k)
    offsets = np.arange(rounds, dtype=np.int64) * k
    a_codes, b_codes = model_a.astype(np.int64), model_b.astype(np.int64)
    scores = outcome.astype(np.float64) / 2.0
    played = np.zeros(rounds * k, dtype=np.bool_)
    block = max(1, min(n, block_bytes // (24 * rounds)))
    rating_a, rating_b, update = (np.empty(rounds) for _ in range(3))
    for start in range(0, n, block):
        # uniform doubles use 64 bits each: the same picks whatever the block size
        uniform = rng.random((min(block, n - start), rounds))
        picks = np.minimum((uniform * n).astype(np.int64), n - 1)
        seat_a = a_codes[picks] + offsets
        seat_b = b_codes[picks] + offsets
        score = scores[picks]
        played[seat_a.reshape(-1)] = True
        played[seat_b.reshape(-1)] = True
        for a, b, s in zip(seat_a, seat_b, score, strict=True):
            np.take(flat, a, out=rating_a)
            np.take(flat, b, out=rating_b)
            np.subtract(rating_b, rating_a, out=update)
            update *= _ALPHA
            np.exp(update, out=update)
            update += 1.0
            np.reciprocal(update, out=update)
            np.subtract(s, update, out=update)
            update *= ELO_K
            flat[a] = rating_a + update  # one round per index: no repeats in a step
            flat[b] = rating_b - update
    ratings = (flat + INIT_RATING).reshape(rounds, k)
    ratings[~played.reshape(rounds, k)] = np.nan
    return ratings


# --- intervals and ranks -------------------------------------------------------------


def percentile_intervals(samples: FloatArray) -> tuple[FloatArray, FloatArray]:
    """2.5th and 97.5th percentiles per column, skipping NaN, honouring +-inf.

    Linear interpolation between order statistics, as ``pandas`` and ``numpy``
    do (and equal to ``np.quantile`` when all values are finite).

    Args:
        samples: ``rounds x k``.

    Returns:
        ``(lower, upper)``; NaN for a column with no values.

    Examples:
        >>> lower, upper = percentile_intervals(np.array([[1.0], [2.0], [np.inf]]))
        >>> lower.tolist(), upper.tolist()
        ([1.05], [inf])
    """
    if np.isfinite(samples).all():
        lower, upper = np.quantile(samples, _QUANTILES, axis=0)
        return lower, upper
    ordered = np.sort(samples, axis=0)  # NaN last
    n_valid = (~np.isnan(samples)).sum(axis=0)
    bounds = []
    for q in _QUANTILES:
        position = q * np.maximum(n_valid - 1, 0)
        below = np.floor(position).astype(np.int64)
        above = np.minimum(below + 1, np.maximum(n_valid - 1, 0))
        fraction = position - below
        low = np.take_along_axis(ordered, below[None], axis=0)[0]
        high = np.take_along_axis(ordered, above[None], axis=0)[0]
        with np.errstate(invalid="ignore"):
            value = low + (high - low) * fraction
        value = np.where((fraction == 0) | (low == high), low, value)
        value = np.where(np.isneginf(low), -np.inf, value)
        value = np.where(np.isposinf(high) & (fraction > 0), np.inf, value)
        value[n_valid == 0] = np.nan
        bounds.append(value)
    return bounds[0], bounds[1]


def rank_with_uncertainty(lower: FloatArray, upper: FloatArray) -> IntArray:
    """The Arena's rank (UB): 1 + the number of models whose lower bound is above this upper bound.

    Args:
        lower: Lower interval bounds per model.
        upper: Upper interval bounds per model.

    Returns:
        Ranks (1 is best); the best rank the intervals allow.

    Examples:
        >>> rank_with_uncertainty(np.array([10.0, 5.0, 0.0]), np.array([12.0, 11.0, 4.0])).tolist()
        [1, 1, 3]
    """
    ordered = np.sort(lower[~np.isnan(lower)])
    above = len(ordered) - np.searchsorted(ordered, upper, side="right")
    return (1 + above).astype(np.int64)


def _rank(rating: FloatArray) -> IntArray:
    """1 + the number of models with a strictly higher rating."""
    ordered = np.sort(rating)
    return (1 + len(rating) - np.searchsorted(ordered, rating, side="right")).astype(
        np.int64
    )


def predicted_win_rates(rating: FloatArray) -> FloatArray:
    """``P[i, j]``: the probability that ``i`` beats ``j`` (a tie counting half).

    Args:
        rating: Ratings on the 400-point scale.

    Returns:
        ``k x k``; ``P + P.T == 1`` and the diagonal is 0.5.

    Examples:
        >>> predicted_win_rates(np.array([1400.0, 1000.0])).round(4).tolist()
        [[0.5, 0.9091], [0.0909, 0.5]]
    """
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.power(BASE, (rating[None, :] - rating[:, None]) / SCALE))


# --- checks ----------------------------------------------------------------------------


def _closure(adjacency: BoolArray) -> BoolArray:
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
    reach = _closure(beats)  # reach[i, j]: a chain of wins leads from i to j
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


def _check_identifiable(
    wins: FloatArray,
    models: StrArray,
    counts: IntArray,
    options: RatingOptions,
) -> None:
    games = wins + wins.T
    has_games = games.sum(axis=1) > 0
    if not has_games.all():
        idle = tuple(models[~has_games].tolist())
        msg = f"{len(idle)} model(s) have no battles once ties are dropped: {_show(idle)}.\nHint: use --ties half, or filter these models out with --where."
        raise RatingsNotIdentifiableError(msg, (idle,))
    connected = _closure(games > 0)
    labels = np.argmax(connected, axis=1).astype(np.int64)
    if labels.max() > 0:
        parts = [group for _, group in _groups(labels, models)]
        shown = "; ".join(_show(part) for part in parts[:_SHOWN])
        more = f"; and {len(parts) - _SHOWN} more" if len(parts) > _SHOWN else ""
        msg = f"the comparison graph has {len(parts)} separate parts, and ratings in different parts cannot be compared: {shown}{more}.\nHint: rate one part at a time (filter with --where), or add battles between the parts."
        raise RatingsNotIdentifiableError(msg, tuple(parts))
    if options.method != "bt" or options.l2 is not None:
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


# --- the whole computation ----------------------------------------------------------


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

    @property
    def rank(self) -> IntArray:
        """1 + the number of models with a strictly higher rating."""
        return _rank(self.rating)

    @property
    def rank_upper_bound(self) -> IntArray | None:
        """The Arena's rank (UB) from the intervals, or None without a bootstrap."""
        if self.rating_lower is None or self.rating_upper is None:
            return None
        return rank_with_uncertainty(self.rating_lower, self.rating_upper)


def _model_index(models: StrArray, name: str, *, what: str) -> int:
    matches = np.flatnonzero(models == name)
    if matches.size:
        return int(matches[0])
    close = difflib.get_close_matches(name, models.tolist(), n=3)
    suggestion = f" Did you mean {', '.join(close)}?" if close else ""
    msg = f"{what} {name!r} is not in the battles ({len(models)} models).{suggestion}\nHint: use a model name exactly as the battles spell it."
    raise InputError(msg)


def compute_ratings(
    battles: BattleData, options: RatingOptions | None = None
) -> Ratings:
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
    k = len(models)
    counts = count_outcomes(
        battles.model_a, battles.model_b, battles.outcome, battles.count, n_models=k
    )
    wins = win_matrix(counts, ties=options.ties)
    _check_identifiable(wins, models, counts, options)
    anchor_index = (
        _model_index(models, options.anchor[0], what="anchor model")
        if options.anchor
        else None
    )
    if options.method == "elo" and battles.is_aggregated:
        msg = "online Elo needs one battle per row, in order; aggregated counts have none.\nHint: use --method bt (the default), or give battle files (one row per battle)."
        raise RatingOptionsError(msg)
    if options.bootstrap:
        _check_bootstrap_memory(
            n_models=k,
            n_battles=len(battles.model_a),
            n_cells=_pair_cells(counts, options.ties)[0].size,
            options=options,
        )
    warnings: list[RatingWarning] = []
    samples = None
    if options.method == "bt":
        rating = fit_bradley_terry(wins, l2=options.l2)
        if options.bootstrap:
            theta_hat = (rating - INIT_RATING) / SCALE
            samples, warnings = bootstrap_bradley_terry(
                counts,
                theta_hat,
                ties=options.ties,
                l2=options.l2,
                rounds=options.bootstrap,
                seed=options.seed,
                keep=anchor_index,
                batch_bytes=_batch_bytes(options),
            )
    else:
        rating, samples = _rate_elo(battles, options, k)
    if anchor_index is not None and options.anchor is not None:
        rating = (rating - rating[anchor_index]) + options.anchor[1]
        if samples is not None:  # per round, as the reference; rounds without a
            anchor_value = samples[:, [anchor_index]]  # finite anchor are dropped
            samples = np.where(
                np.isfinite(anchor_value),
                (samples - anchor_value) + options.anchor[1],
                np.nan,
            )
    lower = upper = None
    if samples is not None:
        absent = np.isnan(samples).any(axis=0)
        if absent.any():
            warnings.append(
                RatingWarning(
                    "bootstrap_absent",
                    f"{int(absent.sum())} model(s) have no rating in some bootstrap rounds (they did not play, or could not be compared with the rest); their intervals use the other rounds.",
                )
            )
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
    )


def _rate_elo(
    battles: BattleData, options: RatingOptions, k: int
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
        block_bytes=_batch_bytes(options),
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


def _nullable(values: FloatArray | None, k: int) -> pa.Array:
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
    bound = ratings.rank_upper_bound
    bounds_known = (
        ~(np.isnan(ratings.rating_lower) | np.isnan(ratings.rating_upper))
        if ratings.rating_lower is not None and ratings.rating_upper is not None
        else np.zeros(k, dtype=np.bool_)
    )
    columns = {
        "model": pa.array(ratings.models.tolist(), pa.string()),
        "rating": pa.array(ratings.rating, pa.float64()),
        "rating_lower": _nullable(ratings.rating_lower, k),
        "rating_upper": _nullable(ratings.rating_upper, k),
        "rank": pa.array(ratings.rank, pa.int64()),
        "rank_upper_bound": (
            pa.array(bound, pa.int64(), mask=~bounds_known)
            if bound is not None
            else pa.nulls(k, pa.int64())
        ),
        "n_battles": pa.array(ratings.n_battles, pa.int64()),
        "n_wins": pa.array(ratings.n_wins, pa.int64()),
        "n_ties": pa.array(ratings.n_ties, pa.int64()),
        "win_rate": _nullable(ratings.win_rate, k),
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


# --- into the leaderboard ------------------------------------------------------------------


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
    reference_index = _model_index(
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
