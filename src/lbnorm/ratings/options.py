"""What every rating computation shares: the scale, the battles as codes, the options object, warnings.

The rating scale is the Arena's: ``P(i beats j) = 1 / (1 + 10 ** ((r_j - r_i) / 400))``,
ratings centred at 1000. :class:`Battles` is what the reader
(:mod:`lbnorm.ratings.battles`) makes and the fit reads, here so that the fit
does not import the reader. :class:`RatingOptions` carries one run's choices
from the command line to the kernels.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

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
    "BattleFile",
    "Battles",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class BattleFile:
    """One file read: what a manifest records of it.

    Attributes:
        path: The file, as given.
        format: ``csv``, ``jsonl``, ``json`` or ``parquet``.
        shape: ``battles`` (one row per battle) or ``counts`` (aggregated).
        n_rows_read: Rows in the file.
        n_rows_kept: Rows that met the ``where`` conditions.
    """

    path: str
    format: str
    shape: Literal["battles", "counts"]
    n_rows_read: int
    n_rows_kept: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Battles:
    """Battles as integer codes, ready for :mod:`lbnorm.ratings.fit`.

    Attributes:
        models: Model names, sorted (codepoint order), unique.
        model_a: Per row, the code (index into ``models``) of the model in seat A.
        model_b: Per row, the code of the model in seat B.
        outcome: Per row, 2 if ``model_a`` won, 1 for a tie, 0 if ``model_b`` won.
        count: Per row, how many battles it stands for (1 for a battle file).
        tstamp: Per row, the battle's time in seconds (NaN if empty), or None
            when a file had no ``tstamp`` column (rows then keep file order).
        is_aggregated: True if any input had the aggregated shape (rows are
            cells, in no meaningful order).
        sources: The files read, in order.
        n_rows_read: Rows in the files before filtering.
        n_filtered_out: Rows removed by the ``where`` conditions.
        warnings: Things a caller may show.
        files: Per file: its format, shape and rows read and kept.
        fields: Per numeric field asked of
            :func:`~lbnorm.ratings.battles.read_battles` (a dotted path such
            as ``conv_metadata.sum_assistant_a_tokens``), its value per row.
        flags: Per named condition asked of
            :func:`~lbnorm.ratings.battles.read_battles`, whether each row
            meets it.
        judge: Per row, a code for its ``judge`` (the same code for the same
            judge across files; -1 where empty), when asked for.

    Examples:
        >>> battles = Battles(models=np.array(["a", "b"]),
        ...     model_a=np.array([0, 1], np.int32), model_b=np.array([1, 0], np.int32),
        ...     outcome=np.array([2, 1], np.int8), count=np.array([1, 1]))
        >>> battles.n_battles
        2
    """

    models: npt.NDArray[np.str_]
    model_a: npt.NDArray[np.int32]
    model_b: npt.NDArray[np.int32]
    outcome: npt.NDArray[np.int8]
    count: npt.NDArray[np.int64]
    tstamp: npt.NDArray[np.float64] | None = None
    is_aggregated: bool = False
    sources: tuple[str, ...] = ()
    n_rows_read: int = 0
    n_filtered_out: int = 0
    warnings: tuple[RatingWarning, ...] = ()
    files: tuple[BattleFile, ...] = ()
    fields: Mapping[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    flags: Mapping[str, npt.NDArray[np.bool_]] = field(default_factory=dict)
    judge: npt.NDArray[np.int32] | None = None

    @property
    def n_battles(self) -> int:
        """Battles in all (the sum of ``count``)."""
        return int(self.count.sum())

    def subset(self, keep: npt.NDArray[np.bool_]) -> Battles:
        """The rows where ``keep`` holds (the same models and codes)."""
        return replace(
            self,
            model_a=self.model_a[keep],
            model_b=self.model_b[keep],
            outcome=self.outcome[keep],
            count=self.count[keep],
            tstamp=None if self.tstamp is None else self.tstamp[keep],
            judge=None if self.judge is None else self.judge[keep],
            fields={name: values[keep] for name, values in self.fields.items()},
            flags={name: values[keep] for name, values in self.flags.items()},
        )


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
        if self.method not in ("bt", "elo"):
            msg = f"method must be 'bt' or 'elo', got {self.method!r}.\nHint: bt is Bradley-Terry (the Arena's leaderboard), elo the online update."
            raise RatingOptionsError(msg)
        if self.ties not in ("half", "drop"):
            msg = f"ties must be 'half' or 'drop', got {self.ties!r}.\nHint: half counts a tie as half a win for each side (the Arena's default)."
            raise RatingOptionsError(msg)
        l2 = self.l2
        if l2 is not None:
            if isinstance(l2, bool) or not isinstance(l2, (int, float)):
                msg = f"l2 must be a number, got {l2!r}.\nHint: --l2 1 is scikit-learn's C = 1."
                raise RatingOptionsError(msg)
            if not (math.isfinite(l2) and l2 > 0):
                msg = f"l2 must be a finite number > 0, got {l2!r}.\nHint: l2 is scikit-learn's C (smaller is stronger); leave it out for none."
                raise RatingOptionsError(msg)
            if l2 > _MAX_L2:
                msg = f"l2 must be at most {_MAX_L2:g}, got {l2!r}.\nHint: a C this large is no penalty at all: leave --l2 out for none."
                raise RatingOptionsError(msg)
            if self.method == "elo":
                msg = "l2 applies to Bradley-Terry only, not to online Elo.\nHint: drop --l2, or use --method bt."
                raise RatingOptionsError(msg)
        style_control: object = self.style_control  # typed bool; checked as given
        if not isinstance(style_control, bool):
            msg = f"style_control must be true or false, got {style_control!r}.\nHint: --style-control switches it on."
            raise RatingOptionsError(msg)
        if self.style_control and self.method != "bt":
            msg = "style control applies to Bradley-Terry only, not to online Elo.\nHint: drop --style-control, or use --method bt."
            raise RatingOptionsError(msg)
        if self.anchor is not None and not _is_anchor(self.anchor):
            msg = f"anchor must be (model name, finite rating), got {self.anchor!r}.\nHint: write --anchor MODEL=RATING, e.g. --anchor mixtral-8x7b-instruct-v0.1=1114."
            raise RatingOptionsError(msg)
        for name, hint in _WHOLE_NUMBER_HINTS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = (
                    f"{name} must be a whole number >= 0, got {value!r}.\nHint: {hint}"
                )
                raise RatingOptionsError(msg)
        if (
            self.bootstrap > _MOST_ROUNDS
        ):  # (its memory estimate would overflow a float)
            msg = f"bootstrap must be at most {_MOST_ROUNDS:,} rounds, got {shown_number(self.bootstrap)}.\nHint: the Arena uses 1000 rounds (--bootstrap 1000)."
            raise RatingOptionsError(msg)


#: The whole-number options and the hint each one's error gives.
_WHOLE_NUMBER_HINTS = {
    "bootstrap": "use 0 for no intervals; the Arena uses 1000 rounds (--bootstrap 1000).",
    "seed": "any whole number >= 0 gives reproducible rounds.",
    "max_bootstrap_bytes": "give a memory budget in bytes.",
}


def _is_anchor(anchor: object) -> bool:
    if not isinstance(anchor, tuple) or len(anchor) != 2:
        return False
    name, rating = anchor
    is_number = isinstance(rating, (int, float)) and not isinstance(rating, bool)
    return (
        isinstance(name, str)
        and bool(name.strip())
        and is_number
        and abs(rating) <= _MAX_ANCHOR  # (false for inf and NaN)
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
