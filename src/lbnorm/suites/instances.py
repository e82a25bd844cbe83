"""Per-instance rules of a subtask: how per-sample values become its value.

A subtask read from per-sample values (``docs/samples.md``) may say, in the
suite TOML, what each instance's value means and which statistic of the
instances is the subtask's value. AlpacaEval's win rate, for one::

    subtasks = [
      { name = "gpt4_turbo", task = "weighted_alpaca_eval_gpt4_turbo",
        metric = "preference", scale = [1, 2], draw = 1.5, recode = [[0, 1.5]],
        non_finite = "drop" },
    ]

The keys (all optional; a subtask with none of them aggregates as before):

- ``scale = [lo, hi]``: the values lie on this scale (one outside is an error)
  and are read as ``(value - lo) / (hi - lo)``, a fraction in [0, 1].
- ``draw``: the value that is a draw (default: the middle of ``scale``); a value
  above it is a win, one below a loss.
- ``recode = [[from, to], ...]``: values replaced before anything else
  (AlpacaEval's old draw, 0, is 1.5).
- ``non_finite``: ``"error"`` (the default) or ``"drop"``: a NaN, infinite or
  null value is left out of every count (AlpacaEval drops a failed annotation).
- ``statistic``: the subtask's value: ``"mean"`` (the default: the mean of the
  values, with its standard error), ``"wins"``, ``"losses"``, ``"draws"``,
  ``"total"`` (the instances kept), or ``"discrete"``: the discrete win rate
  ``(wins + draws / 2) / total`` on the 0-100 scale the scores are shown on.
- ``instances``: with ``statistic = "mean"``, divide the sum by this count (the
  board's instance count) rather than by the instances given: a missing
  instance counts 0.
- ``round = "floor"``: the value rounded down (AlpacaEval's ``int(...)``).

Every statistic but a plain ``mean`` is not a score (a count, a rate already on
0-100, a mean length): its benchmark is a ``kind = "statistic"`` one. Several
subtasks may read one (task, metric), each with its own statistic; a (task,
metric, statistic) is named once per suite. The rules act where the samples
are read (:mod:`lbnorm.readers.instances`), vectorized per batch.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lbnorm.core.errors import SuiteError
from lbnorm.suites._checks import choice, is_number, is_whole

__all__ = [
    "INSTANCE_KEYS",
    "InstanceRule",
    "NonFinite",
    "Rounding",
    "Statistic",
    "parse_instance_rule",
    "source_key",
]

Statistic = Literal["mean", "wins", "losses", "draws", "total", "discrete"]
NonFinite = Literal["error", "drop"]
Rounding = Literal["none", "floor"]
_STATISTICS: tuple[str, ...] = get_args(Statistic)
_NON_FINITE: tuple[str, ...] = get_args(NonFinite)
_ROUNDINGS: tuple[str, ...] = get_args(Rounding)
#: The subtask keys this module reads (``suites.benchmarks._parse_subtask`` allows them).
INSTANCE_KEYS = frozenset(
    {"scale", "draw", "recode", "non_finite", "statistic", "instances", "round"}
)
#: Statistics that compare each value with the draw.
_NEEDS_DRAW = frozenset({"wins", "losses", "draws", "discrete"})
#: The largest instance count (a float64 sum stays exact below it).
_MAX_INSTANCES = 2**53


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceRule:
    """What a subtask's per-instance values mean and which statistic it shows.

    Attributes:
        statistic: The subtask's value: the ``mean`` (a score), a count of
            ``wins``, ``losses``, ``draws`` or instances (``total``), or the
            ``discrete`` win rate on 0-100.
        scale: ``(lo, hi)``: values lie in it and read as ``(v - lo) / (hi - lo)``;
            None: values are taken as given.
        draw: The draw value (None: the middle of ``scale``, if any).
        recode: ``(from, to)`` pairs applied to the values first.
        non_finite: ``error`` refuses a NaN, infinite or null value; ``drop``
            leaves it out.
        instances: The mean's denominator (a missing instance counts 0); None:
            the instances given.
        rounding: ``floor`` rounds the value down; ``none`` keeps it.
    """

    statistic: Statistic = "mean"
    scale: tuple[float, float] | None = None
    draw: float | None = None
    recode: tuple[tuple[float, float], ...] = ()
    non_finite: NonFinite = "error"
    instances: int | None = None
    rounding: Rounding = "none"

    @property
    def draw_point(self) -> float | None:
        """The value that is a draw: ``draw``, else the middle of ``scale``.

        Examples:
            >>> InstanceRule(scale=(1.0, 2.0)).draw_point
            1.5
        """
        if self.draw is not None:
            return self.draw
        if self.scale is not None:
            return (self.scale[0] + self.scale[1]) / 2
        return None

    @property
    def is_score(self) -> bool:
        """Whether the value is a score's mean (with a standard error), not a statistic."""
        return (
            self.statistic == "mean"
            and self.instances is None
            and self.rounding == "none"
        )


def source_key(task: str, metric: str, rule: InstanceRule | None) -> str:
    """What a suite names once: a subtask's (task, metric), and its statistic if any.

    Examples:
        >>> source_key("t", "preference", InstanceRule(statistic="wins"))
        't / preference / wins'
        >>> source_key("t", "acc,none", None)
        't / acc,none'
    """
    if rule is None or rule.statistic == "mean":
        return f"{task} / {metric}"
    return f"{task} / {metric} / {rule.statistic}"


def parse_instance_rule(raw: dict[str, Any], *, where: str) -> InstanceRule | None:
    """A subtask's per-instance rule from its TOML keys; None if it has none.

    Args:
        raw: The subtask's inline table.
        where: The file, benchmark and subtask, for messages.

    Raises:
        SuiteError: A key of the wrong type or out of its range, or rules that
            do not fit together; the message names the key.

    Examples:
        >>> rule = parse_instance_rule({"task": "t", "scale": [1, 2], "recode": [[0, 1.5]]}, where="x")
        >>> rule.scale, rule.recode, rule.draw_point
        ((1.0, 2.0), ((0.0, 1.5),), 1.5)
    """
    if not INSTANCE_KEYS & raw.keys():
        return None
    if raw.get("task", "") == "":
        msg = f'{where}: per-instance keys ({", ".join(sorted(INSTANCE_KEYS & raw.keys()))}) need the task and metric the samples are read from.\nHint: add task = "..." and metric = "...".'
        raise SuiteError(msg)
    statistic = choice(raw, "statistic", _STATISTICS, where=where)
    scale = _scale(raw.get("scale"), where=where)
    draw = raw.get("draw")
    if draw is not None:
        draw = _number(draw, "draw", where=where)
        _inside(draw, scale, "draw", where=where)
    recode = _recode(raw.get("recode", []), scale, where=where)
    rule = InstanceRule(
        statistic=statistic,
        scale=scale,
        draw=draw,
        recode=recode,
        non_finite=choice(raw, "non_finite", _NON_FINITE, where=where),
        instances=_instances(raw.get("instances"), statistic, where=where),
        rounding=choice(raw, "round", _ROUNDINGS, where=where),
    )
    if statistic in _NEEDS_DRAW and rule.draw_point is None:
        msg = f"{where}: statistic = {statistic!r} compares each value with the draw, but there is neither draw nor scale.\nHint: add draw = <the value of a draw>, or scale = [lo, hi] (its middle is the draw)."
        raise SuiteError(msg)
    return rule


def _number(value: object, key: str, *, where: str) -> float:
    if not is_number(value, -sys.float_info.max, sys.float_info.max):
        msg = f"{where}: {key} must be a finite number, got {value!r}.\nHint: write it as a number on the values' scale, e.g. 1.5."
        raise SuiteError(msg)
    return float(value)


def _scale(value: object, *, where: str) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        msg = f"{where}: scale must be [lo, hi], got {value!r}.\nHint: e.g. scale = [1, 2] for AlpacaEval's preferences."
        raise SuiteError(msg)
    lo, hi = (_number(v, "scale", where=where) for v in value)
    if not lo < hi:
        msg = f"{where}: scale [{lo:g}, {hi:g}] must have lo < hi.\nHint: write the lowest value first."
        raise SuiteError(msg)
    return lo, hi


def _inside(
    value: float, scale: tuple[float, float] | None, key: str, *, where: str
) -> None:
    if scale is not None and not scale[0] <= value <= scale[1]:
        msg = f"{where}: {key} {value:g} is outside the scale [{scale[0]:g}, {scale[1]:g}].\nHint: give it on the values' own scale."
        raise SuiteError(msg)


def _recode(
    value: object, scale: tuple[float, float] | None, *, where: str
) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, list) or not all(
        isinstance(pair, list) and len(pair) == 2 for pair in value
    ):
        msg = f"{where}: recode must be a list of [from, to] pairs, got {value!r}.\nHint: e.g. recode = [[0, 1.5]] reads 0 as 1.5."
        raise SuiteError(msg)
    pairs = tuple(
        (_number(old, "recode", where=where), _number(new, "recode", where=where))
        for old, new in value
    )
    olds = [old for old, _ in pairs]
    if len(set(olds)) != len(olds):
        msg = f"{where}: recode names a value twice ({olds}).\nHint: give each value one replacement."
        raise SuiteError(msg)
    for _, new in pairs:
        _inside(new, scale, "recode target", where=where)
    return pairs


def _instances(value: object, statistic: str, *, where: str) -> int | None:
    if value is None:
        return None
    if not is_whole(value, 1, _MAX_INSTANCES):
        msg = f"{where}: instances must be a positive integer of at most 2**53, got {value!r}.\nHint: give the board's number of instances (AlpacaEval: 805 instructions)."
        raise SuiteError(msg)
    if statistic != "mean":
        msg = f'{where}: instances divides a mean, but statistic is {statistic!r}.\nHint: remove instances, or set statistic = "mean".'
        raise SuiteError(msg)
    return value
