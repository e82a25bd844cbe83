r"""Style control: Bradley-Terry with the answers' style as covariates (FastChat's contextual BT).

The Arena's style control (FastChat ``compute_style_control``) explains each vote
by the two models' strengths *and* by how their answers look: per battle and per
element ``k`` of length (assistant tokens), markdown headers, list items and bold
spans, the normalised difference

    f_k = (A_k - B_k) / (A_k + B_k + 1),     z_k = (f_k - mean_k) / std_k

(the mean and the population standard deviation over the battles fitted), where
an object of counts (``header_count_a``: ``h1`` ... ``h6``) counts as their sum.
The model is ``P(A wins) = sigmoid(ln(10) (theta_a - theta_b) + z . gamma)`` and the
fit minimises, over one row per battle (a tie ``y = 1/2``),

    C * sum_i log_loss(y_i, s_i) + (|theta|^2 + |gamma|^2) / 2

with ``C`` from ``--l2`` (scikit-learn's ``C`` on one row per battle, as for the
plain fit). FastChat's ``reg = 0.5`` (a penalty ``0.25 |params|^2`` on the plain
log loss) is ``C = 2``, the default here. The ratings are ``400 theta + 1000``
(then the anchor); ``gamma`` is returned as fitted: the change in the log-odds of
winning per standard deviation of the feature.

The point fit is Newton's method on all ``k + 4`` parameters with the exact
Hessian (its model block a weighted graph Laplacian built by one ``bincount``).
The bootstrap resamples battles as FastChat does (``n`` draws with replacement
per round, here as counts per battle) and fits each round from the point
estimate by Newton steps with the full data's Hessian held fixed: the rounds'
Hessians differ from it by sampling noise, so each step removes most of the
remaining error and no round needs a factorisation of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lbnorm.core.errors import InputError, RatingsNotIdentifiableError
from lbnorm.ratings.bootstrap import round_generators
from lbnorm.ratings.options import (
    INIT_RATING,
    LN_BASE,
    SCALE,
    Battles,
    FloatArray,
    IntArray,
    RatingWarning,
    TiesPolicy,
)

__all__ = [
    "STYLE_ELEMENTS",
    "STYLE_FIELDS",
    "STYLE_L2",
    "StyleData",
    "StyleFit",
    "bootstrap_style",
    "fit_style",
    "ratings_of",
    "style_data",
]

#: The style elements, in FastChat's order (the coefficients' order).
STYLE_ELEMENTS: tuple[str, ...] = ("length", "header", "list", "bold")
#: The battle fields they come from: seat A's four, then seat B's (conv_metadata).
STYLE_FIELDS: tuple[str, ...] = (
    "conv_metadata.sum_assistant_a_tokens",
    "conv_metadata.header_count_a",
    "conv_metadata.list_count_a",
    "conv_metadata.bold_count_a",
    "conv_metadata.sum_assistant_b_tokens",
    "conv_metadata.header_count_b",
    "conv_metadata.list_count_b",
    "conv_metadata.bold_count_b",
)
#: ``--l2`` when none is given: FastChat's ``reg = 0.5`` (``0.25 |params|^2``).
STYLE_L2 = 2.0

_TOL = 1e-10  # point fit: Newton stops when no parameter moves more
_BOOT_TOL = 1e-6  # bootstrap rounds: 4e-4 rating points, far inside any interval shown
_MAX_ITER = 100
_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class StyleData:
    """The battles a style-controlled fit sees: one row per battle.

    Attributes:
        model_a: Seat A's model code per battle (int64).
        model_b: Seat B's model code per battle.
        score: Seat A's score: 1, 1/2 (a tie) or 0.
        weight: Battles each row stands for (1 per battle).
        features: ``n x 4`` standardised style differences (``z`` above).
        n_models: ``k``.
    """

    model_a: IntArray
    model_b: IntArray
    score: FloatArray
    weight: FloatArray
    features: FloatArray
    n_models: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StyleFit:
    """A style-controlled fit and its bootstrap.

    Attributes:
        rating: Style-controlled ratings ``400 theta + 1000`` (unanchored).
        coefficients: ``gamma``, one per element of :data:`STYLE_ELEMENTS`.
        samples: Ratings per bootstrap round (``rounds x k``), or None.
        coefficient_samples: ``gamma`` per round (``rounds x 4``), or None.
        warnings: Conditions worth showing.
    """

    rating: FloatArray
    coefficients: FloatArray
    samples: FloatArray | None = None
    coefficient_samples: FloatArray | None = None
    warnings: tuple[RatingWarning, ...] = ()


def style_data(battles: Battles, *, ties: TiesPolicy) -> StyleData:
    """The rows and standardised features of a style-controlled fit.

    Args:
        battles: Codes and names, with the :data:`STYLE_FIELDS` per row in
            ``fields`` (:func:`lbnorm.ratings.battles.read_battles` with
            ``fields=STYLE_FIELDS``).
        ties: ``"half"`` keeps ties as ``y = 1/2``; ``"drop"`` leaves them out
            (and out of the features' mean and standard deviation).

    Returns:
        The fit's rows.

    Raises:
        InputError: A field is missing, or empty for some battles, or a feature
            does not vary (its standard deviation is 0).

    Examples:
        >>> from types import SimpleNamespace
        >>> fields = {name: np.array([10.0, 1.0, 5.0]) for name in STYLE_FIELDS}
        >>> fields["conv_metadata.sum_assistant_b_tokens"] = np.array([1.0, 10.0, 5.0])
        >>> fields["conv_metadata.header_count_b"] = np.array([0.0, 1.0, 2.0])
        >>> fields["conv_metadata.list_count_b"] = np.array([2.0, 1.0, 0.0])
        >>> fields["conv_metadata.bold_count_b"] = np.array([1.0, 0.0, 3.0])
        >>> battles = SimpleNamespace(models=np.array(["a", "b"]),
        ...     model_a=np.array([0, 1, 0]), model_b=np.array([1, 0, 1]),
        ...     outcome=np.array([2, 0, 1]), count=np.ones(3, np.int64), fields=fields)
        >>> data = style_data(battles, ties="half")
        >>> data.features[:, 0].round(3).tolist(), data.score.tolist()
        ([1.225, -1.225, 0.0], [1.0, 0.0, 0.5])
    """
    fields, outcome = battles.fields, battles.outcome
    missing = [name for name in STYLE_FIELDS if name not in fields]
    if missing:
        msg = f"style control needs the fields {missing[:_SHOWN]}, which the battles were not read with.\nHint: read the battles with fields=STYLE_FIELDS (lbnorm arena --style-control does)."
        raise InputError(msg)
    keep = outcome != 1 if ties == "drop" else np.ones(len(outcome), dtype=np.bool_)
    sides = np.stack([fields[name][keep] for name in STYLE_FIELDS], axis=1)
    empty = np.isnan(sides).any(axis=1)
    if empty.any():
        msg = f"{int(empty.sum())} of {len(sides)} battles have no style metadata (conv_metadata with token, header, list and bold counts for both answers).\nHint: keep battles that have it, e.g. --where 'conv_metadata.sum_assistant_a_tokens >= 0'."
        raise InputError(msg)
    _check_counts(sides)
    seat_a, seat_b = sides[:, :4], sides[:, 4:]
    difference = (seat_a - seat_b) / (seat_a + seat_b + 1.0)
    mean = difference.mean(axis=0)
    spread = difference.std(axis=0)
    flat = np.flatnonzero(~(spread > 0))
    if flat.size:
        names = [STYLE_ELEMENTS[i] for i in flat]
        msg = f"the style feature(s) {names} do not vary across the {len(sides)} battles, so their effect cannot be estimated.\nHint: style control needs battles whose answers differ in length, headers, lists and bold text."
        raise InputError(msg)
    return StyleData(
        model_a=np.asarray(battles.model_a[keep], dtype=np.int64),
        model_b=np.asarray(battles.model_b[keep], dtype=np.int64),
        score=np.asarray(outcome[keep], dtype=np.float64) / 2.0,
        weight=np.asarray(battles.count[keep], dtype=np.float64),
        features=(difference - mean) / spread,
        n_models=len(battles.models),
    )


#: The largest count taken: every whole number up to it is exact in a float64.
_MOST_COUNT = 2.0**53


def _check_counts(sides: FloatArray) -> None:
    """Refuse style counts that cannot be: negative, fractional, infinite or past 2**53.

    ``(A - B) / (A + B + 1)`` takes any number, so a negative count (or ``A =
    -B``, a denominator of 1) or a count of 1e300 would change every rating
    without a word.

    Raises:
        InputError: The first field holding such a count, with some of its values.
    """
    is_count = (sides >= 0) & (sides <= _MOST_COUNT) & (sides == np.floor(sides))
    if is_count.all():
        return
    column = int(np.flatnonzero(~is_count.all(axis=0))[0])
    values = np.unique(sides[~is_count[:, column], column])
    shown = ", ".join(f"{value:g}" for value in values[:_SHOWN])
    field = STYLE_FIELDS[column]
    keep = f"{field} >= 0" if values[0] < 0 else f"{field} <= 1000000000"
    msg = (
        f"{field} holds {int((~is_count[:, column]).sum()):,} value(s) that are no count "
        f"(a whole number from 0 to 2**53): {shown}{' ...' if values.size > _SHOWN else ''}.\n"
        f"Hint: correct those battles' style metadata, or leave them out, e.g. "
        f"--where '{keep}'."
    )
    raise InputError(msg)


def _scores(params: FloatArray, data: StyleData) -> FloatArray:
    """Per battle, seat A's log-odds ``s``."""
    k = data.n_models
    theta = params[:k]
    logits: FloatArray = LN_BASE * (theta[data.model_a] - theta[data.model_b])
    logits += data.features @ params[k:]
    return logits


def _objective(
    params: FloatArray, data: StyleData, weight: FloatArray, l2: float
) -> float:
    logits = _scores(params, data)
    loss = np.logaddexp(0.0, logits) - data.score * logits
    return float(l2 * (weight @ loss) + 0.5 * params @ params)


def _probability(params: FloatArray, data: StyleData) -> FloatArray:
    """Per battle, seat A's win probability."""
    with np.errstate(over="ignore"):
        probability: FloatArray = 1.0 / (1.0 + np.exp(-_scores(params, data)))
    return probability


def _per_model(data: StyleData, values: FloatArray) -> FloatArray:
    """Per model, the sum of `values` over its battles in seat A minus those in seat B."""
    a = np.bincount(data.model_a, values, minlength=data.n_models)
    b = np.bincount(data.model_b, values, minlength=data.n_models)
    return np.asarray(a - b, dtype=np.float64)


def _gradient(
    params: FloatArray, data: StyleData, weighted: FloatArray, l2: float
) -> FloatArray:
    """The objective's gradient from the weighted residuals ``weight (p - y)`` per battle."""
    k = data.n_models
    gradient = params.copy()
    gradient[:k] += l2 * LN_BASE * _per_model(data, weighted)
    gradient[k:] += l2 * (data.features.T @ weighted)
    return gradient


def _hessian(
    data: StyleData, weight: FloatArray, probability: FloatArray, l2: float
) -> FloatArray:
    """The exact Hessian: a weighted graph Laplacian for the models, dense for the rest."""
    k, m = data.n_models, data.features.shape[1]
    curvature = weight * probability * (1.0 - probability)
    pairs = np.bincount(
        data.model_a * k + data.model_b, curvature, minlength=k * k
    ).reshape(k, k)
    pairs += pairs.T
    hessian = np.zeros((k + m, k + m))
    hessian[:k, :k] = LN_BASE**2 * (np.diag(pairs.sum(axis=1)) - pairs)
    weighted = curvature[:, None] * data.features
    cross = np.stack(
        [_per_model(data, weighted[:, j]) for j in range(m)],  # four features
        axis=1,
    )
    hessian[:k, k:] = LN_BASE * cross
    hessian[k:, :k] = LN_BASE * cross.T
    hessian[k:, k:] = data.features.T @ weighted
    hessian *= l2
    hessian[np.diag_indices(k + m)] += 1.0
    return hessian


def fit_style(
    data: StyleData,
    *,
    l2: float = STYLE_L2,
    weight: FloatArray | None = None,
    start: FloatArray | None = None,
) -> FloatArray:
    """The penalised contextual Bradley-Terry fit: Newton's method with a line search.

    Args:
        data: The rows (:func:`style_data`).
        l2: ``C`` (see the module docstring).
        weight: Per-row weights replacing ``data.weight`` (a bootstrap round).
        start: Starting parameters (default zeros).

    Returns:
        ``(theta, gamma)`` concatenated: ``k`` strengths in log-10 units, then
        the four style coefficients.

    Raises:
        RatingsNotIdentifiableError: Newton's method did not converge.
    """
    weight = data.weight if weight is None else weight
    size = data.n_models + data.features.shape[1]
    params = np.zeros(size) if start is None else start.copy()
    before = _objective(params, data, weight, l2)
    for _ in range(_MAX_ITER):
        probability = _probability(params, data)
        gradient = _gradient(params, data, weight * (probability - data.score), l2)
        step = np.linalg.solve(_hessian(data, weight, probability, l2), -gradient)
        scale = 1.0
        after = _objective(params + step, data, weight, l2)
        while scale > 1e-6 and after > before + 1e-12 * abs(before):
            scale *= 0.5  # a step-halving line search, rarely entered
            after = _objective(params + scale * step, data, weight, l2)
        params += scale * step
        before = after
        if np.abs(scale * step).max() < _TOL:
            return params
    msg = "the style-controlled fit did not converge.\nHint: check the style metadata for extreme values, or use a smaller --l2 (a stronger penalty)."
    raise RatingsNotIdentifiableError(msg, ())


def bootstrap_style(
    data: StyleData,
    params: FloatArray,
    *,
    l2: float,
    rounds: int,
    seed: int = 0,
) -> tuple[FloatArray, list[RatingWarning]]:
    """Bootstrap rounds: battles resampled with replacement, each round fitted from ``params``.

    Args:
        data: The rows (:func:`style_data`).
        params: The point fit (:func:`fit_style`), each round's start.
        l2: ``C``.
        rounds: How many rounds.
        seed: Seeds one generator per round (:func:`round_generators`), so
            the rounds do not depend on how they are computed.

    Returns:
        ``(params per round (rounds x (k + 4)), warnings)``; a round that did
        not converge is NaN and counted in a ``bootstrap_failed`` warning.
    """
    n, base = len(data.score), data.weight
    probability = _probability(params, data)
    inverse = np.linalg.inv(_hessian(data, base, probability, l2))
    residual = probability - data.score  # at the point fit: the first step needs no exp
    samples = np.empty((rounds, len(params)))
    failed = 0
    for r, generator in enumerate(
        round_generators(seed, rounds)
    ):  # rounds, each vectorised over battles
        weight = base * np.bincount(generator.integers(0, n, n), minlength=n)
        first = inverse @ _gradient(params, data, weight * residual, l2)
        current = params - first
        previous = float(np.abs(first).max())
        for _ in range(_MAX_ITER):
            residual_now = _probability(current, data) - data.score
            step = inverse @ _gradient(current, data, weight * residual_now, l2)
            current -= step
            size = float(np.abs(step).max())
            # the steps shrink geometrically (rate `ratio`): what remains after
            # this one is about size * ratio / (1 - ratio)
            ratio = size / previous if previous > 0 else 0.0
            if size < _BOOT_TOL or (ratio < 0.5 and size * ratio < 0.5 * _BOOT_TOL):
                break
            previous = size
        else:
            try:
                current = fit_style(data, l2=l2, weight=weight, start=params)
            except RatingsNotIdentifiableError:
                current[:] = np.nan
                failed += 1
        samples[r] = current
    warnings = []
    if failed:
        message = f"{failed} of {rounds} style-controlled bootstrap rounds did not converge and are left out."
        warnings.append(RatingWarning("bootstrap_failed", message))
    return samples, warnings


def ratings_of(params: FloatArray, n_models: int) -> FloatArray:
    """Ratings ``400 theta + 1000`` from parameters (one fit or rounds of fits)."""
    rating: FloatArray = SCALE * params[..., :n_models] + INIT_RATING
    return rating
