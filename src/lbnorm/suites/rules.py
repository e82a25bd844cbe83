"""A benchmark's own rules beyond its aggregation: kind, value range, missing data, averaging.

These keys of a ``[[benchmarks]]`` table say how the fold treats its values
(see :func:`lbnorm.engines.kernel.finish_benchmarks`)::

    [[benchmarks]]
    name = "dps"
    range = [0, 100]        # the scores' scale (default [0, 1]): checked, no /100
    missing = "partial"     # "exclude" | "partial" | "zero": overrides --missing
    averaged = false        # shown, but not in the board's average

    [[benchmarks]]
    name = "n_total"
    kind = "statistic"      # shown as given: no bound, no normalization, not averaged
    range = [0, inf]        # the default for a statistic

A **score** (the default kind) is normalized above its bound to 0-100: with a
range ``[lo, hi]`` and a subtask bound ``b`` (a fraction of the range, as
``num_choices`` gives it), ``(raw - (lo + b w)) / (1 - b) * (100 / w)`` with
``w = hi - lo``; for ``[0, 100]`` and bound 0 that is the raw value itself, bit
for bit, and for the default ``[0, 1]`` the familiar
``(raw - b) / (1 - b) * 100``. A **statistic** (a count, a length, a rate the
board shows as it is) keeps its raw value as its score, is never clipped,
never averaged and never ranked by default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np

from lbnorm.core.arrow import BoolArray, FloatArray, IntArray
from lbnorm.core.errors import SuiteError
from lbnorm.core.options import MissingPolicy
from lbnorm.suites._checks import choice

__all__ = [
    "DEFAULT_RANGE",
    "RANGE_ULPS",
    "RULE_KEYS",
    "STATISTIC_RANGE",
    "Kind",
    "Scales",
    "parse_rules",
]

#: A benchmark's kind: a score normalized to 0-100, or a statistic shown as given.
Kind = Literal["score", "statistic"]
_KINDS: tuple[str, ...] = get_args(Kind)
_MISSING: tuple[str, ...] = get_args(MissingPolicy)

#: A score's range when none is declared: fractions.
DEFAULT_RANGE: tuple[float, float] = (0.0, 1.0)
#: A statistic's range when none is declared.
STATISTIC_RANGE: tuple[float, float] = (0.0, math.inf)

#: Keys this module reads from a benchmark table.
RULE_KEYS = frozenset({"kind", "range", "missing", "averaged"})

#: Units in the last place a value may pass a declared range's end by (an
#: average of values at the end, 100.00000000000001, is still at the end).
RANGE_ULPS = 4


def parse_rules(
    raw: dict[str, Any], *, where: str
) -> tuple[Kind, tuple[float, float], MissingPolicy | None, bool]:
    """A benchmark's kind, range, missing-data policy and whether it is averaged.

    Args:
        raw: The ``[[benchmarks]]`` table.
        where: The file and benchmark, for messages.

    Returns:
        ``(kind, range, missing, averaged)``; ``missing`` None: the run's.

    Raises:
        SuiteError: An unknown kind or policy, a range that is not two numbers
            ``lo < hi`` (a score's finite), or a statistic said to be averaged.

    Examples:
        >>> parse_rules({"range": [0, 100], "missing": "partial"}, where="s")
        ('score', (0.0, 100.0), 'partial', True)
        >>> parse_rules({"kind": "statistic"}, where="s")
        ('statistic', (0.0, inf), None, False)
    """
    hint = '"score" (the default) is normalized to 0-100 and averaged; "statistic" is shown as given (a count, a length).'
    kind = choice(raw, "kind", _KINDS, where=where, hint=hint)
    value_range = _parse_range(raw, kind, where=where)
    missing = raw.get("missing")
    if missing is not None and missing not in _MISSING:
        msg = f"{where}: missing must be one of {list(_MISSING)}, got {missing!r}.\nHint: the same words as --missing: exclude (blank if a subtask is absent), partial (the mean of those present), zero (an absent subtask counts 0)."
        raise SuiteError(msg)
    averaged = raw.get("averaged", kind == "score")
    if not isinstance(averaged, bool):
        msg = f"{where}: averaged must be true or false, got {averaged!r}.\nHint: averaged = false shows the benchmark without counting it in the average."
        raise SuiteError(msg)
    if averaged and kind == "statistic":
        msg = f'{where}: a statistic is never averaged, but averaged = true.\nHint: remove averaged, or make it a score (kind = "score") on its range.'
        raise SuiteError(msg)
    return kind, value_range, missing, averaged


def _parse_range(raw: dict[str, Any], kind: str, *, where: str) -> tuple[float, float]:
    """The declared ``range``, checked; the kind's default when absent."""
    if "range" not in raw:
        return STATISTIC_RANGE if kind == "statistic" else DEFAULT_RANGE
    value = raw["range"]
    is_pair = (
        isinstance(value, list)
        and len(value) == 2
        and all(
            isinstance(end, int | float) and not isinstance(end, bool) for end in value
        )
    )
    if not is_pair:
        msg = f"{where}: range must be two numbers [low, high], got {value!r}.\nHint: e.g. range = [0, 100] for percentages."
        raise SuiteError(msg)
    try:
        low, high = float(value[0]), float(value[1])
    except OverflowError:  # an integer of hundreds of digits
        msg = f"{where}: range {value!r} does not fit a float.\nHint: e.g. range = [0, 100] for percentages."
        raise SuiteError(msg) from None
    finite_high = kind == "score"
    if (
        not math.isfinite(low)
        or math.isnan(high)
        or not low < high
        or (finite_high and not math.isfinite(high - low))  # inf, or too wide
    ):
        what = (
            "finite numbers low < high"
            if finite_high
            else "numbers low < high (high may be inf)"
        )
        msg = f"{where}: range must be {what}, got {value!r}.\nHint: e.g. range = [0, 100] for percentages{'' if finite_high else ', [0, inf] for a count'}."
        raise SuiteError(msg)
    return low, high


@dataclass(frozen=True, slots=True, kw_only=True)
class Scales:
    """Per subtask, how its raw values map to scores, for suites that declare ranges.

    A score on ``[lo, hi]`` with bound ``b`` (a fraction of the range) becomes
    ``(raw - offset) / (1 - b) * factor``, clipped below at 0, with
    ``offset = lo + b (hi - lo)`` and ``factor = 100 / (hi - lo)``; a statistic
    is its raw value (offset 0, factor 1, never clipped).

    Attributes:
        offset: The raw value that scores 0 (a statistic's: 0).
        factor: ``100 / (hi - lo)`` (a statistic's: 1).
        low: The range's low end (the values are checked on ``[low, high]``).
        high: The range's high end (inf for an unbounded statistic).
        is_statistic: Per subtask, whether its benchmark is a statistic.
        is_default: Per subtask, whether it keeps the default [0, 1] score path
            (its values checked as fractions, percentages recognised).
        largest: Per subtask, the largest magnitude a raw value may have (1
            for fractions); inf for an unbounded statistic, whose one subtask's
            value is summed as it is.
    """

    offset: FloatArray
    factor: FloatArray
    low: FloatArray
    high: FloatArray
    is_statistic: BoolArray
    is_default: BoolArray
    largest: FloatArray

    @property
    def floor(self) -> FloatArray:
        """Per subtask, the raw value below which a score clips (-inf: never)."""
        floor: FloatArray = np.where(self.is_statistic, -np.inf, self.offset)
        return floor

    def outside(
        self, values: FloatArray, subtask: IntArray
    ) -> tuple[BoolArray, BoolArray]:
        """Which values have a declared range, and which of those lie outside it.

        The ends take :data:`RANGE_ULPS` units in the last
        place of slack: a mean of values at the end (EvalPerf's
        100.00000000000001) is at the end. NaN and inf are not "outside" (they
        are not numbers: another check's).

        Args:
            values: Raw scores.
            subtask: Each one's subtask code (negative: unknown, no range).

        Returns:
            The mask of values whose subtask has a declared range, and the mask
            of those outside it.

        Examples:
            >>> from lbnorm.suites import load_suite, suite_arrays
            >>> scales = suite_arrays(load_suite("evalperf")).scales  # [0, 100]
            >>> codes = np.zeros(3, np.int64)
            >>> scales.outside(np.array([100.00000000000001, 100.1, -0.0]), codes)[1].tolist()
            [False, True, False]
        """
        known = subtask >= 0
        at = np.where(known, subtask, 0)
        is_ranged = known & ~self.is_default[at]
        low, high = self.low[at], self.high[at]
        slack_low = low - RANGE_ULPS * np.spacing(np.abs(low))
        slack_high = high + RANGE_ULPS * np.spacing(np.abs(high))
        with np.errstate(invalid="ignore"):
            is_outside = (
                is_ranged
                & np.isfinite(values)
                & ((values < slack_low) | (values > slack_high))
            )
        return is_ranged, is_outside

    @classmethod
    def of(
        cls,
        *,
        low: FloatArray,
        high: FloatArray,
        bound: FloatArray,
        is_statistic: BoolArray,
    ) -> Scales:
        """The scales of subtasks from their ranges, bounds and kinds."""
        width = np.where(is_statistic, 1.0, high - low)  # (a statistic's may be inf)
        return cls(
            # lo + b w: exactly b for fractions (0 + b * 1), so the default path's
            # bits are kept; a statistic's values are their scores
            offset=np.where(is_statistic, 0.0, low + bound * width),
            factor=np.where(is_statistic, 1.0, 100.0 / width),
            low=low,
            high=high,
            is_statistic=is_statistic,
            is_default=~is_statistic & (low == 0.0) & (high == 1.0),
            largest=np.maximum(np.abs(low), np.abs(high)),
        )
