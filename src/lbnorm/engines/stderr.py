"""Standard errors, numpy only: what a score's uncertainty becomes along the pipeline.

``se`` is a raw score's standard error, ``lb`` its lower bound, ``n`` the items
it was computed on:

* normalization is linear: ``se_norm = 100 * se / (1 - lb)``;
* clipping at 0 is not: a clipped score (below its bound, shown as 0) has the
  variance of a censored normal, ``Var(max(0, Y))`` with ``Y ~ N(unclipped score,
  se_norm^2)`` (:func:`clipped_variance`): far below its bound it is stuck at 0,
  at its bound it keeps about a third of its variance; a score at or above its
  bound keeps ``se_norm`` as is, as the harness propagates it (:func:`score_variance`);
* a normalize-then-average benchmark is the plain mean of K subtasks:
  ``Var = sum(Var_k) / K^2``;
* a pool-then-normalize benchmark takes lm-evaluation-harness's
  ``pooled_sample_stderr`` (``lm_eval/api/metrics.py``), the value every real
  results file carries in ``groups``: ``sqrt(sum((n_k - 1) n_k se_k^2) / (N - K)
  / N)`` with ``N = sum(n_k)``. It treats the subtasks as one pooled sample whose
  variance is the subtasks' pooled sample variance: exact when the subtasks share
  one mean, an approximation (slightly small) when their means differ;
* the average of benchmarks with weights ``w_b``: ``sqrt(sum(w_b^2 se_b^2)) /
  sum(w_b)``.

A missing ``stderr`` is estimated as binomial, ``sqrt(p (1 - p) / (n - 1))`` (what
the harness reports for accuracies), from the metric's sample size: the items it
averages (the suite's ``items``, for IFEval's instruction-level metrics the
instructions, not the prompts), else ``n_samples``. Such a subtask is counted as
estimated; one with neither is unknown, and so is every figure built on it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "binomial_stderr",
    "clipped_variance",
    "erfc",
    "pooled_sample_stderr",
    "score_variance",
    "upper_tail",
]

FloatArray = npt.NDArray[np.float64]

# W. J. Cody, "Rational Chebyshev approximations for the error function",
# Math. Comp. 23 (1969): the coefficients of SPECFUN's CALERF. Evaluated in
# doubles, within 1.5e-15 relative of math.erfc wherever the result is a normal
# double (x < 26.54; measured worst 1.1e-15, about 5 ulp), within 4 ulp where it
# is subnormal (tests/test_stderr.py)
_A = (3.1611237438705656, 113.864154151050156, 377.485237685302021, 3209.37758913846947)
_A4 = 0.185777706184603153
_B = (
    23.6012909523441209,
    244.024637934444173,
    1282.61652607737228,
    2844.23683343917062,
)
_C = (
    0.564188496988670089,
    8.88314979438837594,
    66.1191906371416295,
    298.635138197400131,
    881.95222124176909,
    1712.04761263407058,
    2051.07837782607147,
    1230.33935479799725,
)
_C8 = 2.15311535474403846e-8
_D = (
    15.7449261107098347,
    117.693950891312499,
    537.181101862009858,
    1621.38957456669019,
    3290.79923573345963,
    4362.61909014324716,
    3439.36767414372164,
    1230.33935480374942,
)
_P = (
    0.305326634961232344,
    0.360344899949804439,
    0.125781726111229246,
    0.0160837851487422766,
    6.58749161529837803e-4,
)
_P5 = 0.0163153871373020978
_Q = (
    2.56852019228982242,
    1.87295284992346047,
    0.527905102951428412,
    0.0605183413124413191,
    0.00233520497626869185,
)
_SQRPI = 0.56418958354775628695  # 1 / sqrt(pi)
_THRESH = 0.46875


def erfc(x: npt.ArrayLike) -> FloatArray:
    """The complementary error function, elementwise, to double precision.

    Examples:
        >>> import math
        >>> values = erfc([0.1, 2.0, 6.0])
        >>> [abs(float(v) / math.erfc(t) - 1) < 1e-15 for t, v in zip([0.1, 2.0, 6.0], values)]
        [True, True, True]
    """
    return _erfc_both(x)[0]


def _erfc_both(x: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``erfc(x)`` and ``erfc(-x)``: the values two calls give, for the work of one.

    Both need the same rational approximation of ``|x|``; only its last step
    differs by the sign (``1 - erf`` against ``1 + erf``, ``v`` against ``2 - v``).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.abs(x)
    result: FloatArray = np.empty_like(y)
    mirrored: FloatArray = np.empty_like(y)
    small = y <= _THRESH
    middle = ~small & (y <= 4.0)
    large = y > 4.0
    if small.any():
        numerator, denominator = _polynomials(y[small] ** 2, _A4, _A, _B)
        erf = x[small] * numerator / denominator
        result[small] = 1.0 - erf  # x's sign is in erf already
        mirrored[small] = 1.0 + erf  # erf(-x) = -erf(x) exactly: 1 - (-erf)
    for is_range in (middle, large):
        if not is_range.any():
            continue
        z = y[is_range]
        if is_range is middle:
            numerator, denominator = _polynomials(z, _C8, _C, _D)
            ratio = numerator / denominator
        else:
            inverse = 1.0 / (z * z)
            numerator, denominator = _polynomials(inverse, _P5, _P, _Q)
            ratio = (_SQRPI - inverse * numerator / denominator) / z
        # exp(-z^2) in two factors, so no digit is lost to rounding z^2
        head = np.trunc(z * 16.0) / 16.0
        tail = (z - head) * (z + head)
        value = np.exp(-head * head) * np.exp(-tail) * ratio
        is_negative = x[is_range] < 0
        result[is_range] = np.where(is_negative, 2.0 - value, value)
        mirrored[is_range] = np.where(is_negative, value, 2.0 - value)  # x != 0 here
    return result, mirrored


def _polynomials(
    t: FloatArray, lead: float, top: tuple[float, ...], bottom: tuple[float, ...]
) -> tuple[FloatArray, FloatArray]:
    """The numerator and denominator of one of Cody's rational functions of `t`.

    ``lead t^m + top[0] t^(m-1) + ... + top[-1]`` and ``t^m + bottom[0] t^(m-1)
    + ... + bottom[-1]``, by Horner's rule in the order the reference code
    evaluates them (the caller divides, so the operations round as they did).
    """
    numerator = lead * t
    denominator = t.copy()
    for a, b in zip(top[:-1], bottom[:-1], strict=True):
        numerator = (numerator + a) * t
        denominator = (denominator + b) * t
    return numerator + top[-1], denominator + bottom[-1]


def upper_tail(x: npt.ArrayLike) -> FloatArray:
    """``1 - Phi(x)`` for a standard normal, elementwise, to double precision.

    Examples:
        >>> upper_tail([0.0]).tolist()
        [0.5]
    """
    return 0.5 * erfc(np.asarray(x, dtype=np.float64) / np.sqrt(2.0))


def _tails(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``upper_tail(x)`` and ``upper_tail(-x)``, the same values, in one pass."""
    upper, lower = _erfc_both(x / np.sqrt(2.0))  # (-x) / c == -(x / c) exactly
    return 0.5 * upper, 0.5 * lower


def clipped_variance(mean: npt.ArrayLike, sd: npt.ArrayLike) -> FloatArray:
    """Variance of ``max(0, Y)`` for ``Y ~ N(mean, sd^2)``, elementwise.

    With ``a = mean / sd``, ``P = Phi(a)``, ``Q = 1 - P`` and ``phi`` the normal
    density, ``Var / sd^2 = P + a^2 P Q + a phi (Q - P) - phi^2``. Above the bound
    and near it this agrees with scipy's censored-normal moments to 1e-9
    relative for ``a >= -10`` (1e-12 for ``|a| <= 5``); far below it the terms
    cancel, but there the variance is below ``1e-23 sd^2`` and its absolute error
    below ``1e-15 sd^2`` (tests/test_stderr.py).

    Args:
        mean: Means of the unclipped scores.
        sd: Their standard deviations (0 gives 0).

    Returns:
        The variances of the clipped scores, never above ``sd^2``.

    Examples:
        >>> clipped_variance([50.0, 0.0, -50.0], [2.0, 1.0, 2.0]).round(4).tolist()
        [4.0, 0.3408, 0.0]
    """
    mu = np.asarray(mean, dtype=np.float64)
    sigma = np.asarray(sd, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        a = np.where(sigma > 0, mu / sigma, 0.0)
        a = np.clip(a, -40.0, 40.0)  # beyond 40 sd the result is 0 or 1 exactly
    upper, lower = _tails(a)  # upper_tail(a), upper_tail(-a)
    density = np.exp(-0.5 * a * a) / np.sqrt(2.0 * np.pi)
    ratio = lower + a * a * lower * upper + a * density * (upper - lower) - density**2
    variance = np.clip(ratio, 0.0, 1.0) * sigma**2
    return np.asarray(np.where(sigma > 0, variance, 0.0), dtype=np.float64)


def score_variance(mean: npt.ArrayLike, sd: npt.ArrayLike) -> FloatArray:
    """Variance of a normalized score: linear above its bound, censored when clipped.

    A score at or above its bound (``mean >= 0``) keeps ``sd^2``, as
    lm-evaluation-harness propagates it; a clipped one (``mean < 0``, shown as 0)
    is a censored normal (:func:`clipped_variance`).

    Examples:
        >>> score_variance([10.0, -1.0], [2.0, 2.0]).round(4).tolist()
        [4.0, 0.6821]
    """
    mu, sigma = np.broadcast_arrays(
        np.asarray(mean, dtype=np.float64), np.asarray(sd, dtype=np.float64)
    )
    variance: FloatArray = sigma * sigma
    is_clipped = mu < 0
    if is_clipped.any():  # few: only those need the censored normal
        variance[is_clipped] = clipped_variance(mu[is_clipped], sigma[is_clipped])
    return variance


def binomial_stderr(score: npt.ArrayLike, n: npt.ArrayLike) -> FloatArray:
    """``sqrt(p (1 - p) / (n - 1))``, the harness's stderr of a mean of 0/1 values.

    NaN where ``n`` is below 2 (no estimate).

    Examples:
        >>> binomial_stderr([0.5], [101]).tolist()
        [0.05]
    """
    p = np.asarray(score, dtype=np.float64)
    items = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        stderr = np.sqrt(np.clip(p * (1.0 - p), 0.0, None) / (items - 1.0))
    return np.asarray(np.where(items > 1, stderr, np.nan), dtype=np.float64)


def pooled_sample_stderr(
    sum_squares: npt.ArrayLike, n_total: npt.ArrayLike, n_subtasks: npt.ArrayLike
) -> FloatArray:
    """lm-evaluation-harness's ``pooled_sample_stderr``, from its additive parts.

    Args:
        sum_squares: ``sum((n_k - 1) * n_k * se_k^2)`` over the subtasks.
        n_total: ``N = sum(n_k)``.
        n_subtasks: ``K``, the subtasks pooled.

    Returns:
        ``sqrt(sum_squares / (N - K) / N)``; NaN where ``N <= K``.

    Examples:
        >>> se, n = np.array([0.1, 0.2]), np.array([10.0, 30.0])
        >>> pooled_sample_stderr(((n - 1) * n * se**2).sum(), n.sum(), 2).round(6).tolist()
        0.153254
    """
    total = np.asarray(n_total, dtype=np.float64)
    count = np.asarray(n_subtasks, dtype=np.float64)
    squares = np.asarray(sum_squares, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        stderr = np.sqrt(squares / (total - count) / total)
    return np.asarray(np.where(total > count, stderr, np.nan), dtype=np.float64)
