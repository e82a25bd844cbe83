"""lm-evaluation-harness's own formulas, vendored as test oracles.

Source: EleutherAI/lm-evaluation-harness (MIT licence, Copyright (c) 2020 EleutherAI),
read from the stored public repository text:

* ``lm_eval/api/metrics.py`` at commits ``a4d16d3671e9cfef9d2dadd635bc659150fdb0d7``
  and ``001722ba6deac35c527d7d8e6c85ce823ed25fbb`` (the 0.4.x line; the functions
  below are the same text in both): ``mean``, ``sample_stddev``, ``mean_stderr``,
  ``pooled_sample_stderr``, ``aggregate_subtask_metrics``. ``stderr_for_metric``
  maps the ``mean`` aggregation (``acc``, ``acc_norm``, ``exact_match``,
  IFEval's ``prompt_level_*``) to ``mean_stderr``: the "binomial" stderr the
  harness reports for a mean of 0/1 values is ``mean_stderr`` of those values.
* ``lm_eval/evaluator_utils.py`` at ``0064c3a03e5fe863a1ffde689bdb216c97d8c5f1``,
  ``consolidate_group_results``: a group's value is
  ``aggregate_subtask_metrics(metrics, sizes, weight_by_size)`` and its stderr
  ``"N/A"`` if any subtask's is, else ``pooled_sample_stderr(stderrs, sizes)``,
  where ``sizes`` are the subtasks' ``samples`` (the run's effective sizes,
  written to results files as ``n-samples[task]["effective"]``):
  :func:`group_stderr` below.
* ``agg_inst_level_acc`` (``lm_eval/tasks/leaderboard/ifeval/utils.py``, as the
  leaderboard's results files quote it in ``configs.leaderboard_ifeval``): the
  aggregation of IFEval's instruction-level metrics, which ``stderr_for_metric``
  maps to no stderr (hence ``"N/A"`` in real files).

The function bodies are verbatim; only type annotations (mypy runs strict on
the tests) and ``noqa`` / ``type: ignore`` markers were added, so ruff and mypy
leave the harness's own style alone. :func:`group_stderr` wraps the branch of
``consolidate_group_results`` that writes a group's stderr.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = [
    "agg_inst_level_acc",
    "aggregate_subtask_metrics",
    "group_stderr",
    "mean",
    "mean_stderr",
    "pooled_sample_stderr",
    "sample_stddev",
]


# lm_eval/api/metrics.py ----------------------------------------------------------


def mean(arr: Sequence[float]) -> float:
    return sum(arr) / len(arr)


def sample_stddev(arr: Sequence[float]) -> float:
    mu = mean(arr)
    return math.sqrt(sum([(x - mu) ** 2 for x in arr]) / (len(arr) - 1))


def mean_stderr(arr: Sequence[float]) -> float:
    return sample_stddev(arr) / math.sqrt(len(arr))


def pooled_sample_stderr(stderrs: list[float], sizes: list[int]) -> float:
    # Used to aggregate bootstrapped stderrs across subtasks in a group,
    # when we are weighting by the size of each subtask.
    #

    assert len(stderrs) == len(sizes)

    # formula source: https://en.wikipedia.org/wiki/Pooled_variance
    # and: https://stats.stackexchange.com/a/4841331
    # this empirically seems to match running `stderr_for_metric` on all instances
    # from the subtasks concatenated with each other.
    pooled_sample_var = (
        sum([(size - 1) * stderr**2 * size for size, stderr in zip(sizes, stderrs)])  # noqa: B905
    ) / (sum(sizes) - len(sizes))

    return np.sqrt(pooled_sample_var / sum(sizes))  # type: ignore[no-any-return]


def aggregate_subtask_metrics(
    metrics: list[float], sizes: list[int], weight_by_size: bool = True
) -> float:
    # A helper function that is used to aggregate
    # subtask scores cross-task.
    # TODO: does not hold for non-mean aggregations
    if not weight_by_size:
        sizes = [1] * len(sizes)

    assert len(metrics) == len(sizes)

    return sum([metric * size for metric, size in zip(metrics, sizes)]) / sum(sizes)  # noqa: B905


# lm_eval/evaluator_utils.py, consolidate_group_results (the stderr branch) --------


def group_stderr(stderrs: list[float | str], sizes: list[int]) -> float | str:
    """A group's stderr as ``consolidate_group_results`` writes it."""
    if "N/A" in stderrs:
        return "N/A"
    # NOTE: this assumes we are using the mean to aggregate. There are warnings about this elsewhere
    return pooled_sample_stderr([float(stderr) for stderr in stderrs], sizes)


# lm_eval/tasks/leaderboard/ifeval/utils.py ---------------------------------------


def agg_inst_level_acc(items: list[list[bool]]) -> float:
    flat_items = [item for sublist in items for item in sublist]
    inst_level_acc = sum(flat_items) / len(flat_items)
    return inst_level_acc  # noqa: RET504
