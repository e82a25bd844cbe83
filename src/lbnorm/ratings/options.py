"""What every rating computation shares: the scale, the options object, warnings.

The rating scale is the Arena's: ``P(i beats j) = 1 / (1 + 10 ** ((r_j - r_i) / 400))``,
ratings centred at 1000. :class:`RatingOptions` carries one run's choices from the
command line to the kernels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from lbnorm.core.errors import RatingOptionsError, shown_number

__all__ = [
    "BASE",
    "BATCH_BYTES",
    "ELO_K",
    "INIT_RATING",
    "LN_BASE",
    "SCALE",
    "BattleData",
    "BoolArray",
    "FloatArray",
    "IntArray",
    "Method",
    "RatingOptions",
    "RatingWarning",
    "StrArray",
    "TiesPolicy",
    "parse_anchor",
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
#: The rating every model starts from (and the mean of unanchored ratings).
INIT_RATING = 1000.0
#: Online Elo's step size (FastChat's ``K``).
ELO_K = 4.0
#: ``ln(BASE)``: the logistic slope per unit of ``theta`` (log-10 odds).
LN_BASE = math.log(BASE)
_MAX_L2 = 1e12  # beyond, C * loss overflows long before the penalty matters
_MAX_ANCHOR = 1e9  # an anchor rating beyond this is not a rating

#: The most bootstrap rounds taken: far past any use, and inside a float's range.
_MOST_ROUNDS = 10**12

#: Working set of one batch of bootstrap fits (or of resampled Elo battles).
BATCH_BYTES = 96 * 2**20


@dataclass(frozen=True, slots=True)
class RatingWarning:
    """A condition worth showing that did not stop the reading or the computation.

    Attributes:
        code: A stable name. The battle reader's: ``filtered``,
            ``repeated_file``, ``no_tstamp``, ``null_tstamp``, ``unordered``.
            The fit's: ``bootstrap_divergent`` (rounds in which a model never
            lost or never won), ``bootstrap_failed`` (rounds left out), or
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
    def fields(self) -> Mapping[str, FloatArray]: ...  # noqa: D102
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
        style_control: Fit FastChat's style-controlled Bradley-Terry (the
            battles' ``conv_metadata`` as covariates; see
            :mod:`lbnorm.ratings.style`), with ``l2`` defaulting to FastChat's.

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
    style_control: bool = False

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
            elif self.l2 > _MAX_L2:
                fail(
                    f"l2 must be at most {_MAX_L2:g}, got {self.l2!r}",
                    "a C this large is no penalty at all: leave --l2 out for none.",
                )
            if self.method == "elo":
                fail(
                    "l2 applies to Bradley-Terry only, not to online Elo",
                    "drop --l2, or use --method bt.",
                )
        style_control: object = self.style_control  # typed bool; checked as given
        if not isinstance(style_control, bool):
            fail(
                f"style_control must be true or false, got {self.style_control!r}",
                "--style-control switches it on.",
            )
        if self.style_control and self.method != "bt":
            fail(
                "style control applies to Bradley-Terry only, not to online Elo",
                "drop --style-control, or use --method bt.",
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
        if (
            self.bootstrap > _MOST_ROUNDS
        ):  # (its memory estimate would overflow a float)
            fail(
                f"bootstrap must be at most {_MOST_ROUNDS:,} rounds, got {shown_number(self.bootstrap)}",
                "the Arena uses 1000 rounds (--bootstrap 1000).",
            )


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
        and abs(rating) <= _MAX_ANCHOR
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
    if not equals or not model.strip() or not abs(value) <= _MAX_ANCHOR:
        msg = f"--anchor {text!r} is not MODEL=RATING.\nHint: write e.g. --anchor mixtral-8x7b-instruct-v0.1=1114 (a finite rating within +-1e9)."
        raise RatingOptionsError(msg)
    return model.strip(), value
