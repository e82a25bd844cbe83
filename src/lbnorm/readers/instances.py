"""Per-instance rules where samples are read: recodes, scales, draws and statistics.

The rules are the suite's (:mod:`lbnorm.suites.instances`); this module applies
them to sample rows, vectorized, a batch at a time, for the sample aggregation
of :mod:`lbnorm.readers.samples`:

- **Before summing** (:meth:`InstanceRules.expand`): the rows of a (task,
  metric) that a rule governs are recoded, checked against the scale (a value
  outside it, or a non-finite one unless dropped, is an error naming the rows)
  and replaced by each subtask's per-instance value: the scaled value for a
  mean, 1 or 0 for a win, loss or draw, 1, ½ or 0 for the discrete win rate, 1
  for the total. The first subtask of the (task, metric) takes the rows
  themselves; each further one gets a copy of them, appended after the batch's
  rows (so a row number in a message is still the row's), under a metric key of
  its own (the metric, a unit separator and the statistic). A dropped row is given a metric
  no subtask has, so it is counted as ignored, like a row of an unused metric.
- **After summing** (:meth:`InstanceRules.finish`): a statistic's value from its
  group's count and sum (a count is the sum of its 0/1 values; ``instances``
  divides a sum by the board's instance count; ``round = "floor"`` floors), and
  no standard error for a statistic.

It is numpy and Arrow only: a run on sample inputs loads no pandas.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.arrow import numbers, strings, to_numpy
from lbnorm.core.errors import InputError
from lbnorm.suites.instances import InstanceRule

if TYPE_CHECKING:
    from lbnorm.suites import Suite

__all__ = ["InstanceRules", "instance_rules", "results_columns"]

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
_BOOL = npt.NDArray[np.bool_]
#: Joins a metric and a statistic into the key of a further subtask's rows.
_SEPARATOR = "\x1f"
#: The metric of a dropped row: no subtask has it, so the row counts as ignored.
_DROPPED = f"{_SEPARATOR}dropped"
#: Statistics in code order (:meth:`InstanceRules.finish`).
_CODES = {"mean": 0, "wins": 1, "losses": 2, "draws": 3, "total": 4, "discrete": 5}


def instance_rules(suite: Suite) -> InstanceRules | None:
    """The suite's per-instance rules as the sample readers apply them; None if it has none."""
    subtasks = [(b, s) for b in suite.benchmarks for s in b.subtasks]
    rules = [s.instance for _, s in subtasks]
    if all(rule is None for rule in rules):
        return None
    columns = {
        "task": [s.task for _, s in subtasks],
        "metric": [s.metric for _, s in subtasks],
    }
    return InstanceRules(columns, rules)


def results_columns(
    columns: dict[str, list[str]], suite: Suite
) -> dict[str, list[str]]:
    """The suite's subtask columns as results files are read: no task for a ruled subtask.

    A per-instance rule needs the instances, which a results file does not hold
    (it has one aggregate per task and metric): such a subtask is read from
    samples only, never from a results file's ``results[task][metric]``.
    """
    if (rules := instance_rules(suite)) is None:
        return columns
    tasks = [
        task if rule is None else ""
        for task, rule in zip(columns["task"], rules.rules, strict=True)
    ]
    return {**columns, "task": tasks}


class InstanceRules:
    """A suite's per-instance rules, by suite row (subtask), and how rows find them.

    Attributes:
        rules: Per suite row, its rule (None: the values' plain mean).
        keys: Per suite row, the metric its sample rows carry once expanded:
            the suite's metric, or for a further subtask of a (task, metric)
            the metric and its statistic.
    """

    def __init__(
        self, columns: Mapping[str, Sequence[str]], rules: Sequence[InstanceRule | None]
    ) -> None:
        self.rules = list(rules)
        tasks, metrics = list(columns["task"]), list(columns["metric"])
        rows_of: dict[tuple[str, str], list[int]] = {}
        for row, (task, metric) in enumerate(zip(tasks, metrics, strict=True)):
            if task:
                rows_of.setdefault((task, metric), []).append(row)
        #: (task, metric) -> its suite rows (the first takes the rows themselves)
        self._groups = {
            pair: rows
            for pair, rows in rows_of.items()
            if any(self.rules[row] is not None for row in rows)
        }
        self.keys = [str(metric) for metric in metrics]
        for (_, metric), rows in self._groups.items():
            for row in rows[1:]:
                self.keys[row] = f"{metric}{_SEPARATOR}{self._statistic(row)}"
        self._code = np.array([_CODES[self._statistic(r)] for r in range(len(metrics))])
        self._instances = np.array(
            [float((rule and rule.instances) or 0) for rule in self.rules]
        )
        self._floor = np.array(
            [rule is not None and rule.rounding == "floor" for rule in self.rules]
        )
        self._plain = np.array([rule is None or rule.is_score for rule in self.rules])

    def _statistic(self, row: int) -> str:
        rule = self.rules[row]
        return "mean" if rule is None else rule.statistic

    def drops_non_finite(self, task: str, metric: str) -> bool:
        """Whether every subtask reading (task, metric) has a rule dropping non-finite values."""
        rows = self._groups.get((task, metric), [])
        return bool(rows) and all(
            (rule := self.rules[row]) is not None and rule.non_finite == "drop"
            for row in rows
        )

    def expand(
        self,
        batch: pa.RecordBatch,
        *,
        source: str,
        first_row: int,
        unit: str = "row",
    ) -> pa.RecordBatch:
        """A batch of sample rows with the rules applied (the module docstring says how).

        Args:
            batch: Sample rows (``task``, ``metric``, ``value``, and any key columns).
            source: The file, for messages.
            first_row: The number of the batch's first row in its file.
            unit: What a row is called in messages (``row``, ``entry``).

        Raises:
            InputError: A governed value outside its scale, or non-finite where
                the rule does not drop it; the message names the rows.
        """
        if not self._groups:
            return batch
        values: _F64 | None = None
        given_null = np.zeros(0, dtype=bool)
        metric = batch.column("metric")
        if not pa.types.is_dictionary(metric.type):
            metric = pc.dictionary_encode(metric)
        entries = [*metric.dictionary.cast(pa.string()).to_pylist(), _DROPPED]
        indices = to_numpy(metric.indices, null=-1).astype(np.int64)
        taken: list[tuple[_I64, str, _F64]] = []  # copies: rows, metric key, values
        for (task, name), rows in self._groups.items():
            where = np.flatnonzero(
                _equals(batch.column("task"), task) & _equals(metric, name)
            )
            if not where.size:
                continue
            if values is None:
                column = pc.cast(batch.column("value"), pa.float64())
                values = to_numpy(column, null=np.nan).astype(np.float64)
                given_null = to_numpy(column.is_null())
            given_null[where] = False  # a null the rule governs is NaN
            given = values[where]
            label = f"{source}: {task} / {name}"
            for position, row in enumerate(rows):
                rule = self.rules[row]
                if rule is None:
                    out, keep = given, np.ones(given.size, dtype=bool)
                else:
                    located = where + first_row
                    out, keep = apply_rule(
                        rule, given, label=label, rows=located, unit=unit
                    )
                if position == 0:
                    values[where] = out
                    indices[where[~keep]] = len(entries) - 1
                else:
                    taken.append((where[keep], self.keys[row], out[keep]))
        if values is None:
            return batch
        return _rebuilt(batch, indices, entries, values, ~given_null, taken)

    def finish(
        self, row: _I64, count: _F64, total: _F64, mean: _F64, stderr: _F64
    ) -> tuple[_F64, _F64]:
        """Each group's value and standard error from its sums, by its subtask's statistic.

        Args:
            row: Per group, its suite row.
            count: Per group, the instances summed.
            total: Per group, the sum of their values.
            mean: Per group, ``total / count`` (the value of a plain mean).
            stderr: Per group, the mean's standard error.

        Returns:
            The values and standard errors (NaN for a statistic's).
        """
        code = self._code[row]
        instances = self._instances[row]
        with np.errstate(invalid="ignore", divide="ignore"):
            value = np.select(
                [code == 0, code == 4, code == 5],
                [
                    np.where(instances > 0, total / instances, mean),
                    count,
                    total / count * 100.0,
                ],
                default=total,  # a count of wins, losses or draws: the sum of 0/1
            )
        value = np.where(self._floor[row], np.floor(value), value)
        return value, np.where(self._plain[row], stderr, np.nan)


def apply_rule(
    rule: InstanceRule, values: _F64, *, label: str, rows: _I64, unit: str
) -> tuple[_F64, _BOOL]:
    """One rule on values: each instance's value, and which instances are kept.

    Args:
        rule: The subtask's rule.
        values: The values as given (NaN for null).
        label: The file and (task, metric), for messages.
        rows: Each value's row (or entry) number, for messages.
        unit: What a row is called in messages.

    Raises:
        InputError: A value outside the scale, or non-finite unless dropped.

    Examples:
        >>> rule = InstanceRule(statistic="discrete", scale=(1.0, 2.0), recode=((0.0, 1.5),),
        ...                     non_finite="drop")
        >>> out, keep = apply_rule(rule, np.array([1.2, 0.0, 1.9, np.nan]), label="x",
        ...                        rows=np.arange(4), unit="row")
        >>> out[keep].tolist()
        [0.0, 0.5, 1.0]
    """
    recoded = values.copy()
    for old, new in rule.recode:
        recoded[values == old] = new
    keep = np.isfinite(recoded)
    lo, hi = rule.scale or (-np.inf, np.inf)
    for what, refused, hint in (
        (
            "a non-finite value",
            ~keep & (rule.non_finite == "error"),
            'give every instance a number, or let the suite drop them with non_finite = "drop"',
        ),
        (
            f"a value outside the scale [{lo:g}, {hi:g}]",
            keep & ((recoded < lo) | (recoded > hi)),
            "check the values' scale (the suite's scale = [lo, hi]) and fix or remove the instances",
        ),
    ):
        if refused.any():
            at = np.flatnonzero(refused)
            shown = ", ".join(f"{int(rows[i])} ({float(recoded[i])!r})" for i in at[:5])
            more = f" and {at.size - 5} more" if at.size > 5 else ""
            msg = f"{label}: {what} in {unit}(s) {shown}{more}.\nHint: {hint}."
            raise InputError(msg)
    statistic = rule.statistic
    with np.errstate(invalid="ignore"):
        if statistic == "mean":
            out = recoded
            if rule.scale is not None:
                out = (recoded - rule.scale[0]) / (rule.scale[1] - rule.scale[0])
        elif statistic == "total":
            out = np.ones(values.size)
        else:  # compared with the draw (the suite checks there is one)
            draw = np.float64(rule.draw_point)
            won, drawn = recoded > draw, recoded == draw
            out = {
                "wins": won,
                "losses": ~won & ~drawn,
                "draws": drawn,
                "discrete": np.where(won, 1.0, np.where(drawn, 0.5, 0.0)),
            }[statistic].astype(np.float64)
    return np.where(keep, out, 0.0), keep


def _equals(column: pa.Array, value: str) -> _BOOL:
    """Rows of a text column equal to `value` (dictionary entries compared, not rows)."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    entries = column.dictionary.cast(pa.string()).to_pylist()
    hits = [index for index, entry in enumerate(entries) if entry == value]
    if not hits:
        return np.zeros(len(column), dtype=bool)
    return np.isin(to_numpy(column.indices, null=-1), hits)


def _rebuilt(
    batch: pa.RecordBatch,
    indices: _I64,
    entries: list[str],
    values: _F64,
    valid: _BOOL,
    taken: list[tuple[_I64, str, _F64]],
) -> pa.RecordBatch:
    """The batch with its new values and metrics, and the copies appended.

    A null value no rule governs stays null (the aggregation names it so).
    """
    copies = np.concatenate([np.empty(0, np.int64), *(rows for rows, _, _ in taken)])
    # each copy's metric: its key, an entry after the batch's own
    all_indices = np.concatenate(
        [
            indices,
            *(
                np.full(rows.size, len(entries) + i)
                for i, (rows, _, _) in enumerate(taken)
            ),
        ]
    )
    entries = [*entries, *(key for _, key, _ in taken)]
    metric = pa.DictionaryArray.from_arrays(
        numbers(all_indices, pa.int32(), valid=all_indices >= 0), strings(entries)
    )
    value = numbers(
        np.concatenate([values, *(v for _, _, v in taken)]),
        pa.float64(),
        valid=np.concatenate([valid, np.ones(copies.size, dtype=bool)]),
    )
    take = numbers(copies, pa.int64())
    arrays: dict[str, Any] = {}
    for name in batch.schema.names:
        if name == "metric":
            arrays[name] = metric
        elif name == "value":
            arrays[name] = value
        elif taken:
            column = batch.column(name)
            arrays[name] = pa.concat_arrays([column, column.take(take)])
        else:
            arrays[name] = batch.column(name)
    return pa.RecordBatch.from_arrays(list(arrays.values()), names=list(arrays))
