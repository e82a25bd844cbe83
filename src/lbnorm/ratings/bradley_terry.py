r"""Bradley-Terry maximum likelihood on the ``k x k`` win matrix (numpy, no I/O).

**Counts.** One ``np.bincount`` over ``(a * k + b) * 3 + outcome`` gives a
``k x k x 3`` array of battles per seat pair and outcome. From it,
``W[i, j]`` = battles ``i`` won against ``j`` in either seat, plus half of their
ties (``ties="half"``; ``"drop"`` leaves ties out), and ``N = W + W.T``.

**The fit.** With ``theta`` in log-10 units,
``P(i beats j) = 1 / (1 + 10 ** (theta_j - theta_i))`` and the rating is
``400 * theta + 1000``. The fit maximises the likelihood of the distinct
``(a, b, outcome)`` cells, each weighted by its count, exactly as FastChat's
``compute_bt`` does; that likelihood depends on the cells only through ``W``, so
Newton's method runs on the ``k x k`` matrix and costs nothing per battle::

    f(theta) = -sum_ij W[i, j] * log(sigmoid(ln(10) * (theta_i - theta_j)))

Unregularised, ``theta`` is defined up to a constant: the fit keeps
``sum(theta) = 0`` (the reference's L-BFGS, started at zero, stays there too, as
every gradient sums to zero), so unanchored ratings have mean 1000. With
``l2=C`` the fit minimises ``C f(theta) + |theta|^2 / 2``: scikit-learn's
``LogisticRegression(C=C, fit_intercept=False)`` on one row per battle (columns
``+ln 10`` for A and ``-ln 10`` for B; a tie as two rows of weight 1/2, one won by
each side), whose loss is ``C * sum(log loss) + |w|^2 / 2``. With ties dropped
that is the design of the Arena's 2023-05 notebook (one row per decisive battle,
``C = 1``: ``--l2 1 --ties drop``). FastChat's later ``compute_mle_elo`` listed
every battle twice (a tie once each way), which doubles the loss: its ``C`` is
``l2 = 2 C`` here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lbnorm.core.errors import RatingsNotIdentifiableError
from lbnorm.ratings.options import (
    INIT_RATING,
    LN_BASE,
    SCALE,
    BoolArray,
    FloatArray,
    IntArray,
    TiesPolicy,
)

__all__ = [
    "MAX_NEWTON_ITER",
    "NewtonWork",
    "count_outcomes",
    "fit_bradley_terry",
    "full_preconditioner",
    "newton",
    "win_matrix",
]

_TOL = 1e-10  # Newton stops when no theta moves more (4e-8 rating points)
_CG_TOL = 1e-11  # conjugate gradients stop at this relative residual
_MAX_STEP = 2.0  # a Newton step moves theta at most this far (800 points)
#: Newton iterations allowed for a point fit.
MAX_NEWTON_ITER = 100


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
class NewtonWork:
    """Buffers for batched Newton steps, allocated once and reused (fresh pages are slow)."""

    sig: FloatArray
    expected: FloatArray
    hessian: FloatArray

    @classmethod
    def allocate(cls, rounds: int, k: int) -> NewtonWork:
        """Buffers for ``rounds`` fits of ``k`` models."""
        return cls(*(np.empty((rounds, k, k)) for _ in range(3)))


def _sigmoid_matrix(theta: FloatArray, out: FloatArray) -> FloatArray:
    """``out[r, i, j] = P(i beats j) = 1 / (1 + 10 ** (theta_j - theta_i))``."""
    np.subtract(theta[:, None, :], theta[:, :, None], out=out)
    out *= LN_BASE
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
    out *= LN_BASE
    np.logaddexp(0.0, out, out=out)  # -log sigmoid(ln10 (theta_i - theta_j))
    out *= wins
    value: FloatArray = out.sum(axis=(1, 2))
    if l2 is not None:
        value = l2 * value + 0.5 * np.einsum("rk,rk->r", theta, theta)
    return value


def newton(
    wins: FloatArray,
    games: FloatArray,
    theta: FloatArray,
    *,
    l2: float | None,
    active: BoolArray | None,
    work: NewtonWork,
    max_iter: int,
    line_search: bool,
    preconditioner: FloatArray | None = None,
    tol: float = _TOL,
) -> BoolArray:
    """Newton's method on rounds of ``k x k`` counts at once; updates ``theta``.

    Unregularised, the Hessian (a graph Laplacian) is singular along the constant
    vector; adding ``c * 1 1^T`` over the active models makes it invertible and
    keeps ``sum(theta)`` where it started (0). Inactive models (no battles in a
    round) keep their ``theta``. Each step solves the Newton system directly (one
    round: the point fit, a retried bootstrap round), or, given a
    ``preconditioner`` (the inverse Hessian of the full data), by preconditioned
    conjugate gradients: matrix-vector products instead of one LAPACK
    factorisation per round, which is what makes a batch of bootstrap rounds
    cheap.

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
        gradient = LN_BASE * (expected.sum(axis=2) - won)
        np.multiply(expected, sig, out=weights)
        np.subtract(expected, weights, out=weights)  # N P (1 - P)
        system = _System(weights=weights, l2=l2, mask=mask)
        if l2 is None:
            rhs = -gradient if mask is None else -gradient * mask
        else:
            rhs = -(l2 * gradient + theta)
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
    (unregularised) or scaled by ``C`` plus the identity (``l2 = C``).
    """

    def __init__(
        self, *, weights: FloatArray, l2: float | None, mask: FloatArray | None
    ) -> None:
        self.weights = weights
        self.curvature = weights.sum(axis=2)
        self.l2 = l2
        self.mask = mask
        k = weights.shape[1]
        self.shift = LN_BASE**2 * np.maximum(self.curvature.mean(axis=1), 1e-12) / k

    def times(self, x: FloatArray) -> FloatArray:
        """``H x`` for a batch of vectors (``rounds x k``)."""
        # einsum's own loops: BLAS threads cost more than they save at this size
        product = np.einsum("rij,rj->ri", self.weights, x)
        out: FloatArray = LN_BASE**2 * (self.curvature * x - product)
        if self.l2 is not None:
            out *= self.l2
            out += x
        elif self.mask is None:
            out += self.shift[:, None] * x.sum(axis=1, keepdims=True)
        else:
            masked = self.mask * x
            out += self.shift[:, None] * self.mask * masked.sum(axis=1, keepdims=True)
            out += x - masked
        return out

    def solve(self, rhs: FloatArray) -> FloatArray:
        """Solve directly (LAPACK); overwrites ``weights`` with the dense ``H``.

        A singular ``H`` gives a NaN step (no step). The rounds solved directly
        are one at a time (the point fit, a bootstrap round retried), so a
        singular round costs no other round its step.
        """
        rounds, k = rhs.shape
        hessian = self.weights
        flat = hessian.reshape(rounds, k * k)
        diagonal = np.arange(k) * (k + 1)
        hessian *= -(LN_BASE**2)
        flat[:, diagonal] += LN_BASE**2 * self.curvature
        if self.l2 is not None:
            hessian *= self.l2
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
            return np.full(rhs.shape, np.nan)
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


def full_preconditioner(
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
    converged = newton(
        wins[None],
        games[None],
        theta,
        l2=l2,
        active=None,
        work=NewtonWork.allocate(1, k),
        max_iter=MAX_NEWTON_ITER,
        line_search=True,
    )
    if not converged.all():  # pragma: no cover - checked data converge
        msg = "Bradley-Terry fit did not converge.\nHint: check the battles with compute_ratings, which names models whose ratings diverge."
        raise RatingsNotIdentifiableError(msg, ())
    rating: FloatArray = SCALE * theta[0] + INIT_RATING
    return rating
