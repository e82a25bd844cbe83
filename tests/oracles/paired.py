"""Independent paired-comparison formulas, written from the sources, for the tests.

Nothing here imports lbnorm: each function is the textbook formula on plain arrays
or a long pandas frame, so that lbnorm's vectorized moments are checked against a
second derivation, not against themselves.

* :func:`paired_subtask`: the issue's contract for one subtask, ``(mean(x) - mean(y))
  x 100 / (1 - lb)`` and ``sd(x - y, ddof 1) / sqrt(n) x 100 / (1 - lb)``.
* :func:`cluster_robust_se`: Miller (2024), "Adding Error Bars to Evals", eq. 4, the
  clustered standard error of a mean, with the finite-cluster factor ``C / (C - 1)``
  (Cameron and Miller's CR1 without the ``(n - 1) / (n - k)`` term):
  ``SE^2 = C / (C - 1) / n^2 * sum_c (sum_{i in c} (s_i - s_bar))^2``.
* :func:`linear_se`: the standard error of a linear combination of subtask means,
  ``sum_k a_k mean(x_k)``, when the subtasks share clusters: the clustered variance of
  the per-item contributions ``a_k (x_ki - mean_k) / n_k`` summed within clusters.
* :func:`holm` and :func:`benjamini_hochberg`: the adjustments, step by step in loops.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import pandas as pd

FloatArray = npt.NDArray[np.float64]


def paired_subtask(x: FloatArray, y: FloatArray, bound: float) -> tuple[float, float]:
    """The contract's difference and paired standard error of one unclipped subtask."""
    scale = 100.0 / (1.0 - bound)
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    return (
        float((np.mean(x) - np.mean(y)) * scale),
        float(np.std(d, ddof=1) / math.sqrt(d.size) * scale),
    )


def cluster_robust_se(values: FloatArray, clusters: npt.ArrayLike) -> float:
    """Miller's clustered standard error of the mean of `values`, with C / (C - 1)."""
    frame = pd.DataFrame(
        {"s": np.asarray(values, dtype=float), "c": np.asarray(clusters)}
    )
    n = len(frame)
    frame["e"] = frame["s"] - frame["s"].mean()
    sums = frame.groupby("c")["e"].sum()
    count = len(sums)
    return math.sqrt(count / (count - 1) * float((sums**2).sum()) / n**2)


def linear_se(items: pd.DataFrame) -> float:
    """The clustered standard error of ``sum_k a_k mean_k(z)`` (a long frame).

    Args:
        items: One row per item: ``subtask``, ``cluster``, ``z`` (the item's value,
            e.g. ``x - y``) and ``a`` (the subtask's coefficient). Clusters may span
            subtasks (IFEval's prompt- and instruction-level metrics share prompts).
    """
    frame = items.copy()
    grouped = frame.groupby("subtask")["z"]
    frame["n"] = grouped.transform("size")
    frame["e"] = frame["a"] * (frame["z"] - grouped.transform("mean")) / frame["n"]
    sums = frame.groupby("cluster")["e"].sum()
    count = len(sums)
    return math.sqrt(count / (count - 1) * float((sums**2).sum()))


def holm(p: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, by the definition."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def benjamini_hochberg(p: list[float]) -> list[float]:
    """Benjamini-Hochberg step-up adjusted p-values, by the definition."""
    m = len(p)
    order = sorted(range(m), key=lambda i: p[i])
    out = [0.0] * m
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, m * p[i] / (rank + 1))
        out[i] = min(1.0, running)
    return out
