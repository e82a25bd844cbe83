"""A suite's ``[[benchmarks]]`` tables: the Benchmark and Subtask types, parsed and checked.

One table at a time: its aggregation and weight, its subtasks (bounds, sample
counts, cluster keys, per-instance rules), a pairwise benchmark's score form
(reference, bootstrap, anchor, against) and its own rules
(:mod:`lbnorm.suites.rules`). What spans the whole suite (unique names, the
total weight, the board) is :func:`lbnorm.suites.parse_suite`'s.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lbnorm.core.errors import SuiteError
from lbnorm.core.options import MissingPolicy
from lbnorm.suites._checks import (
    check_table,
    check_unique,
    choice,
    is_number,
    is_whole,
    required,
    shown,
)
from lbnorm.suites.instances import (
    INSTANCE_KEYS,
    InstanceRule,
    parse_instance_rule,
)
from lbnorm.suites.rules import (
    DEFAULT_RANGE,
    RULE_KEYS,
    Kind,
    parse_rules,
)

__all__ = [
    "PAIRWISE",
    "Aggregation",
    "Benchmark",
    "PairwiseScore",
    "Subtask",
    "check_clusters",
    "parse_benchmark",
]

Aggregation = Literal["normalize-then-average", "pool-then-normalize", "bradley-terry"]
_AGGREGATIONS: tuple[str, ...] = get_args(Aggregation)
#: The aggregation of a pairwise benchmark (scored from battles, not results).
PAIRWISE: Aggregation = "bradley-terry"
_BENCHMARK_KEYS = {
    "name",
    "aggregation",
    "weight",
    "subtasks",
    "reference",
    "score",
    "bootstrap",
    "anchor",
    "against",
    *RULE_KEYS,
}
#: A pairwise benchmark's score: the expected win rate against the field, the
#: chance of beating one reference model, or of beating a fixed rating on a
#: scale pinned by an anchor model.
PairwiseScore = Literal["field", "reference", "rating"]
_PAIRWISE_SCORES: tuple[str, ...] = get_args(PairwiseScore)
#: An anchor or ``against`` rating beyond this is not a rating.
_MAX_RATING = 1e9
_SUBTASK_KEYS = {
    "name",
    "task",
    "metric",
    "num_choices",
    "lower_bound",
    "n_samples",
    "items",
    "cluster",
}
#: Sample counts are pooling weights in float64: kept exact (2**53 is about 9e15).
_MAX_SAMPLES = 2**53


@dataclass(frozen=True, slots=True, kw_only=True)
class Subtask:
    """One scored subtask of a benchmark.

    Attributes:
        name: Subtask name, unique within its benchmark.
        task: lm-evaluation-harness task name holding the score ('' if none).
        metric: Metric key inside ``results[task]`` (e.g. ``acc_norm,none``).
        num_choices: Answer choices; 0 for generative tasks.
        lower_bound: Random baseline in [0, 1): ``1/num_choices`` unless overridden.
        n_samples: Items in the subtask; the weights of pool-then-normalize.
        items: The metric's sample size when it scores several items per
            document (IFEval's instruction-level metrics: 834 instructions in
            541 prompts); a missing stderr is estimated from it. None: the
            sample size is ``n_samples``.
        cluster: The per-sample field whose value groups documents into
            clusters (``doc.passage_id``), for clustered standard errors;
            None: each document is its own cluster.
        instance: How its per-sample values become its value
            (:mod:`lbnorm.suites.instances`); None: their mean.
    """

    name: str
    task: str
    metric: str
    num_choices: int
    lower_bound: float
    n_samples: int | None
    items: int | None = None
    cluster: str | None = None
    instance: InstanceRule | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Benchmark:
    """A benchmark: its subtasks and how they aggregate into one score.

    Attributes:
        name: Benchmark name (a leaderboard column).
        aggregation: How its subtasks become one score; ``bradley-terry`` for a
            pairwise benchmark scored from battles.
        weight: Its weight in the average.
        subtasks: Its subtasks (a pairwise benchmark has one).
        reference: A pairwise benchmark's reference model (None otherwise).
        score: A pairwise benchmark's score (``field``, ``reference`` or
            ``rating``).
        bootstrap: A pairwise benchmark's bootstrap rounds for its standard
            error (0: none).
        anchor: With ``score = "rating"``: ``(model, rating)``, the model that
            pins the scale.
        against: With ``score = "rating"``: the fixed rating scored against.
        kind: ``score`` (normalized to 0-100, averaged) or ``statistic``
            (shown as given); see :mod:`lbnorm.suites.rules`.
        value_range: The raw values' range ``(low, high)`` (TOML ``range``).
        missing: Its own missing-data policy (None: the run's ``--missing``).
        averaged: Whether the board's average counts it.
    """

    name: str
    aggregation: Aggregation
    weight: float
    subtasks: tuple[Subtask, ...]
    reference: str | None = None
    score: PairwiseScore = "field"
    bootstrap: int = 0
    anchor: tuple[str, float] | None = None
    against: float | None = None
    kind: Kind = "score"
    value_range: tuple[float, float] = DEFAULT_RANGE
    missing: MissingPolicy | None = None
    averaged: bool = True

    @property
    def is_pairwise(self) -> bool:
        """Whether it is scored from battles (``aggregation = "bradley-terry"``)."""
        return self.aggregation == PAIRWISE


def parse_benchmark(raw: object, *, where: str) -> Benchmark:
    """One ``[[benchmarks]]`` table, its subtasks and its rules, checked."""
    hint = "write each benchmark as [[benchmarks]]."
    raw = check_table(raw, _BENCHMARK_KEYS, where=where, hint=hint)
    name = required(raw, "name", str, where=where)
    where = f"{where} ({name})"
    aggregation = choice(raw, "aggregation", _AGGREGATIONS, where=where)
    weight = raw.get("weight", 1.0)
    if not is_number(weight, sys.float_info.min, sys.float_info.max):  # inf, <= 0
        msg = (
            f"{where}: weight must be a positive finite number, got {shown(weight)}.\n"
            "Hint: omit it for equal weights; weights are relative (1, 2, 0.5)."
        )
        raise SuiteError(msg)
    raw_subtasks = required(raw, "subtasks", list, where=where)
    if not raw_subtasks:
        msg = f"{where}: no subtasks.\nHint: list at least one subtask."
        raise SuiteError(msg)
    subtasks = tuple(
        _parse_subtask(item, where=f"{where} subtasks[{index}]")
        for index, item in enumerate(raw_subtasks)
    )
    check_unique([s.name for s in subtasks], what="subtask name", where=where)
    pairwise = _parse_pairwise(raw, aggregation, subtasks, where=where)
    kind, value_range, missing, averaged = parse_rules(raw, where=where)
    _check_rules(aggregation, kind, value_range, subtasks, where=where)
    if aggregation == "pool-then-normalize":
        if unweighted := [s.name for s in subtasks if not s.n_samples]:
            msg = (
                f"{where}: pool-then-normalize needs n_samples > 0 for every subtask; "
                f"missing for {unweighted[:5]}.\nHint: add n_samples = <items> to each subtask."
            )
            raise SuiteError(msg)
        if len({s.lower_bound for s in subtasks}) > 1:
            msg = (
                f"{where}: pooled subtasks must share one lower bound, got "
                f"{sorted({s.lower_bound for s in subtasks})}.\n"
                "Hint: use normalize-then-average for subtasks with different bounds."
            )
            raise SuiteError(msg)
    return Benchmark(
        name=name,
        aggregation=aggregation,
        weight=float(weight),
        subtasks=subtasks,
        **pairwise,
        kind=kind,
        value_range=value_range,
        missing=missing,
        averaged=averaged,
    )


def _check_rules(
    aggregation: str,
    kind: Kind,
    value_range: tuple[float, float],
    subtasks: tuple[Subtask, ...],
    *,
    where: str,
) -> None:
    """A benchmark's kind and range fit its aggregation and subtasks."""
    if aggregation == PAIRWISE and (kind != "score" or value_range != DEFAULT_RANGE):
        msg = f"{where}: a {PAIRWISE} benchmark's score is a win rate from battles; it takes no kind or range.\nHint: remove kind and range from the benchmark."
        raise SuiteError(msg)
    if kind != "statistic":
        return
    if aggregation != "normalize-then-average":
        msg = f'{where}: a statistic is the mean of its subtasks\' values as given, but aggregation is {aggregation!r}.\nHint: remove aggregation (or make the benchmark kind = "score").'
        raise SuiteError(msg)
    if bounded := [s.name for s in subtasks if s.lower_bound != 0.0]:
        msg = f"{where}: a statistic has no chance baseline, but subtask(s) {bounded[:5]} give num_choices or lower_bound.\nHint: remove num_choices and lower_bound from a statistic's subtasks."
        raise SuiteError(msg)
    if not math.isfinite(value_range[1]) and len(subtasks) > 1:
        msg = f"{where}: a statistic with an unbounded range (high = inf) has one subtask, got {len(subtasks)}: its value is kept exactly as given, which a mean of several could not be.\nHint: declare a finite range (e.g. range = [0, 1e6]) to average several subtasks, or split them into benchmarks."
        raise SuiteError(msg)


def _parse_pairwise(
    raw: dict[str, Any], aggregation: str, subtasks: tuple[Subtask, ...], *, where: str
) -> dict[str, Any]:
    """A pairwise benchmark's reference, score form, bootstrap rounds and rating scale.

    Checked by their rules, as :class:`Benchmark` fields; none for any other
    benchmark, which may not give them.
    """
    reference = raw.get("reference")
    if aggregation != PAIRWISE:
        if reference is not None:
            msg = (
                f"{where}: 'reference' belongs to a pairwise benchmark, not to "
                f"aggregation {aggregation!r}.\nHint: set aggregation = "
                f"\"{PAIRWISE}\" to score the benchmark from battles, or remove 'reference'."
            )
            raise SuiteError(msg)
        if "score" in raw or "bootstrap" in raw:
            msg = f"{where}: 'score' and 'bootstrap' belong to a pairwise benchmark, not to aggregation {aggregation!r}.\nHint: remove them, or set aggregation = \"{PAIRWISE}\"."
            raise SuiteError(msg)
        _rating_scale(raw, "field", where=where)
        return {}
    score = raw.get("score", "reference" if reference is not None else "field")
    if (reference is not None or score == "reference") and (
        not isinstance(reference, str) or not reference.strip()
    ):
        msg = (
            f"{where}: a {PAIRWISE} benchmark needs a reference model, got "
            f'{reference!r}.\nHint: add reference = "<model>", the model every '
            "model's chance of winning is measured against (as the battles name it)."
        )
        raise SuiteError(msg)
    reference = reference.strip() if reference is not None else None
    if len(subtasks) != 1:
        msg = (
            f"{where}: a {PAIRWISE} benchmark has exactly one subtask, got "
            f"{len(subtasks)} ({[s.name for s in subtasks][:5]}).\nHint: keep one "
            'subtask, e.g. { name = "overall", num_choices = 2 }; rate other '
            "categories as separate benchmarks."
        )
        raise SuiteError(msg)
    if subtasks[0].task:
        msg = (
            f"{where}: a {PAIRWISE} benchmark's subtask is scored from battles, "
            f"not from results files, but names task {subtasks[0].task!r}.\n"
            "Hint: remove task and metric from the subtask."
        )
        raise SuiteError(msg)
    if score not in _PAIRWISE_SCORES:
        msg = f'{where}: score must be "field", "reference" or "rating", got {shown(score)}.\nHint: "field" (the default) is the expected win rate against the other models; "reference" the chance of beating the model named by reference; "rating" the chance of beating a fixed rating (against) on the scale an anchor pins.'
        raise SuiteError(msg)
    bootstrap = raw.get("bootstrap", 100)
    if not is_whole(bootstrap, 0, 100_000):
        msg = f"{where}: bootstrap must be a whole number of rounds from 0 to 100000, got {shown(bootstrap)}.\nHint: 100 gives a standard error good to about 7%; 0 leaves it out."
        raise SuiteError(msg)
    against = "the field" if score == "field" else "a fixed rating"
    if score != "reference" and reference is not None:
        msg = f'{where}: reference = {reference!r} is for score = "reference", but score is "{score}".\nHint: remove reference for the expected win rate against {against}, or set score = "reference".'
        raise SuiteError(msg)
    if score != "reference" and subtasks[0].lower_bound != 0:
        msg = f'{where}: the expected win rate against {against} has no chance baseline, but the subtask has a bound ({subtasks[0].lower_bound:g}).\nHint: remove num_choices from the subtask (its score is the win rate x 100), or score against a model with reference = "<model>".'
        raise SuiteError(msg)
    anchor, rating = _rating_scale(raw, score, where=where)
    return {
        "reference": reference,
        "score": score,
        "bootstrap": bootstrap,
        "anchor": anchor,
        "against": rating,
    }


def _rating_scale(
    raw: dict[str, Any], score: str, *, where: str
) -> tuple[tuple[str, float] | None, float | None]:
    """``score = "rating"``'s anchor (``MODEL=RATING``) and ``against`` rating, after their rules."""
    if score != "rating":
        if given := [key for key in ("anchor", "against") if key in raw]:
            msg = f'{where}: {" and ".join(given)} belong to score = "rating", but score is "{score}".\nHint: remove them, or set score = "rating" (the chance of beating a fixed rating on the scale the anchor pins).'
            raise SuiteError(msg)
        return None, None
    text = raw.get("anchor")
    model, equals, value = (
        text.rpartition("=") if isinstance(text, str) else ("", "", "")
    )
    rating = _rating(value)
    if not equals or not model.strip() or rating is None:
        msg = f'{where}: score = "rating" needs anchor = "MODEL=RATING", got {shown(text)}.\nHint: the anchor pins the scale, e.g. anchor = "mixtral-8x7b-instruct-v0.1=1114" (the Arena\'s), with the model as the battles name it.'
        raise SuiteError(msg)
    against = raw.get("against", rating)
    if not is_number(against, -_MAX_RATING, _MAX_RATING):
        msg = f"{where}: against must be a finite rating within +-1e9, got {shown(against)}.\nHint: against is the rating of the yardstick model, e.g. against = 1000; leave it out to score against the anchor's rating."
        raise SuiteError(msg)
    return (model.strip(), rating), float(against)


def _rating(text: str) -> float | None:
    """A finite rating within +-1e9 from text, else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if abs(value) <= _MAX_RATING else None


def _parse_subtask(raw: object, *, where: str) -> Subtask:
    hint = "write { name = ..., num_choices = ... }."
    raw = check_table(raw, _SUBTASK_KEYS | INSTANCE_KEYS, where=where, hint=hint)
    name = required(raw, "name", str, where=where)
    where = f"{where} ({name})"
    num_choices = raw.get("num_choices", 0)
    if not is_whole(num_choices, 0, _MAX_SAMPLES) or num_choices == 1:
        msg = (
            f"{where}: num_choices must be an integer >= 2, or 0 for a generative "
            f"task; got {shown(num_choices)}.\nHint: a k-way multiple-choice task has num_choices = k."
        )
        raise SuiteError(msg)
    lower_bound = raw.get("lower_bound", 1.0 / num_choices if num_choices else 0.0)
    if not is_number(lower_bound, 0.0, 1.0) or lower_bound == 1.0:
        msg = (
            f"{where}: lower_bound must be in [0, 1), got {shown(lower_bound)}.\n"
            "Hint: the bound is the random-guess score as a fraction, e.g. 0.25 for 4 choices."
        )
        raise SuiteError(msg)
    counts = {name: raw.get(name) for name in ("n_samples", "items")}
    for key, count in counts.items():
        if count is not None and not is_whole(count, 1, _MAX_SAMPLES):
            msg = (
                f"{where}: {key} must be a positive integer of at most 2**53, got "
                f"{shown(count)}.\n"
                "Hint: give the number of items in the subtask, or omit it if unknown."
            )
            raise SuiteError(msg)
    n_samples = counts["n_samples"]
    cluster = raw.get("cluster")
    if cluster is not None and (
        not isinstance(cluster, str)
        or not all(part.strip() for part in cluster.split("."))
        or not raw.get("task")
    ):
        msg = (
            f"{where}: cluster must name a field of the task's per-sample lines, "
            f'such as "doc.passage_id" (a subtask with a task), got {shown(cluster)}.\n'
            "Hint: give the dotted path of the field that groups documents, or omit "
            "cluster when each document stands alone."
        )
        raise SuiteError(msg)
    return Subtask(
        name=name,
        task=str(raw.get("task", "")),
        metric=str(raw.get("metric", "")),
        num_choices=num_choices,
        lower_bound=float(lower_bound),
        n_samples=n_samples,
        items=counts["items"],
        cluster=cluster,
        instance=parse_instance_rule(raw, where=where),
    )


def check_clusters(benchmarks: tuple[Benchmark, ...], *, where: str) -> None:
    """The subtasks of one task share their documents, so their cluster key too."""
    keys: dict[str, set[str | None]] = {}
    for benchmark in benchmarks:
        for subtask in benchmark.subtasks:
            if subtask.task:
                keys.setdefault(subtask.task, set()).add(subtask.cluster)
    if clash := sorted(task for task, found in keys.items() if len(found) > 1):
        msg = (
            f"{where}: the subtasks of task(s) {clash[:5]} give different cluster "
            "keys; a task's subtasks score the same documents.\n"
            "Hint: give each subtask of the task the same cluster (or none)."
        )
        raise SuiteError(msg)
