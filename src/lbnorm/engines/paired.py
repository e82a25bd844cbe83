"""Paired comparisons on the item matrix: differences, their standard errors, tests.

Two variants a and b answered the same documents; on a subtask with per-item
values x (a) and y (b) on the n items both have, the paired difference of the
means has the variance ``Var(x̄ - ȳ) = Var(x̄) + Var(ȳ) - 2 Cov(x̄, ȳ)``, estimated
by ``s²(x - y) / n`` (``ddof`` 1), often far below the unpaired ``se_a² + se_b²``
(Miller, "Adding Error Bars to Evals", 2024). Everything here is numpy on
:class:`lbnorm.readers.items.Items`, vectorized over pairs.

**Moments.** For a set of pairs, :func:`pair_moments` gives per pair and
subtask the matched items ``n``, the items only one side has, the sums of x and
y over the matched items, and per *domain* (the subtasks of one task, which
score the same documents: IFEval's prompt- and instruction-level metrics) the
matrix ``Q`` of cross-moments of cluster sums of the centred values,
``Q[u, v] = sum_c E_u,c E_v,c`` with ``E_u,c = sum_{i in c} (u_i - ū)`` for the
variables ``u`` in (x_k, y_k) of the domain's subtasks k, and the number ``C`` of
clusters with a matched item. A cluster is a document (a list-valued metric's
items of one document are one cluster), or what the suite's ``cluster`` key
groups. Binary subtasks whose documents stand alone take a fast path: the
matrix bit-packed, the matched counts and sums by popcount
(``Q_xx = S_x - S_x²/n``, ``Q_xy = S_xy - S_x S_y / n``).

**Levels.** A level's score is a function of the subtask means; its
difference is the difference of the two scores, each computed from the matched
items only, by the suite's rule:

- a subtask: ``N(m) = max(0, (m - lb) / (1 - lb)) x 100``; on a declared range
  ``[lo, hi]``, ``max(0, (m - lo - lb (hi - lo)) / ((hi - lo) (1 - lb))) x 100``
  (:func:`score_scale`), as the kernel scores it;
- normalize-then-average: the mean of the K subtasks' ``N(m_k)``;
- pool-then-normalize: ``N(sum_k w_k m_k / sum_k w_k)`` with ``w_k`` the matched
  documents (the suite's sample sizes when both answered everything);
- the average: the averaged benchmarks' weighted mean (under the board's
  ``average = "subtasks"``, each weighted by the subtasks it counts too).

Statistics, benchmarks of per-instance rules and pairwise benchmarks are not
compared (:func:`suite_levels` says so), nor is an average that counts one.

Its variance is the delta method's: with ``c_k`` the derivative of a side's
score by its mean on subtask k (``g / K``, ``g w_k / W``, times the benchmark's
share of the average, where ``g = 100 / (1 - lb)``, on a range
``100 / ((hi - lo) (1 - lb))``),

``Var = sum_domains C / (C - 1) * w' Q w``, ``w = (c_a,k / n_k, -c_b,k / n_k)_k``,

the cluster-robust variance (Liang and Zeger; Miller's eq. 4) with the
finite-cluster factor ``C / (C - 1)``. When every document is its own cluster it
is exactly ``s²(z) / n`` of the per-item contributions: for one unclipped
subtask, ``stderr = sd(x - y, ddof 1) / sqrt(n) x 100 / (1 - lb)``.

**At the clip.** ``N`` has slope ``g`` above the bound and 0 below it (a mean
exactly at the bound counts as above, as :func:`lbnorm.engines.kernel.normalize`
counts it unclipped). The delta method therefore gives a clipped side no
variance: its score is 0 and stays 0 under small changes. One side clipped,
the difference's error is the other side's own; both clipped, the difference is
0 with error 0, and its p-value 1 (never separable). The delta method ignores
the chance that a clipped side crosses its bound, which the per-model standard
errors of the leaderboard (a censored normal) count: near the bound the paired
error can be the smaller for it.

**Tests.** The p-value is two-sided normal, ``2 (1 - Phi(|d| / se))`` (an error of 0
gives 1 for a difference of 0, else 0); binary subtasks, and pooled benchmarks
of binary subtasks, also get McNemar's exact test on the discordant items
(:func:`mcnemar_exact`); p-values are adjusted across a table by Holm's step-down
or Benjamini and Hochberg's step-up rule (:func:`adjust_p_values`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from lbnorm.board.average import averaged
from lbnorm.core.errors import OptionsError
from lbnorm.core.options import MissingPolicy
from lbnorm.engines.kernel import BoolArray, FloatArray, IntArray
from lbnorm.engines.stderr import upper_tail
from lbnorm.readers.items import ONE, Items, SubtaskItems, unpaired_benchmarks
from lbnorm.suites import Suite, SuiteArrays, suite_arrays

__all__ = [
    "DomainMoments",
    "LevelStatistics",
    "Moments",
    "adjust_p_values",
    "level_statistics",
    "mcnemar_exact",
    "pair_moments",
    "refuse_unpairable",
    "score_scale",
    "suite_levels",
    "two_sided_p",
]

U64Array = npt.NDArray[np.uint64]
#: How p-values are adjusted across a table.
Adjustment = Literal["holm", "bh"]

#: Pairs a chunk of the item matrix is compared for at once (memory: about
#: ``_CHUNK`` x the widest subtask x 8 bytes per temporary).
_CHUNK = 512
_POPCOUNT = np.array([bin(byte).count("1") for byte in range(256)], dtype=np.uint8)


@dataclass(frozen=True, slots=True, kw_only=True)
class DomainMoments:
    """The cross-moments of one domain (the subtasks of one task), per pair.

    Attributes:
        subtasks: The domain's subtasks (suite rows), in suite order.
        q: ``(n_pairs, 2K, 2K)``: cross-moments of the cluster sums of the
            centred values; variables ``x_0 .. x_{K-1}`` (side a) then the
            differences ``d_k = x_k - y_k``, so that a paired variance, whose
            weights on x cancel, is computed from the differences themselves
            (no cancellation: identical sides give exactly 0).
        clusters: ``(n_pairs,)``: clusters with a matched item.
    """

    subtasks: IntArray
    q: FloatArray
    clusters: FloatArray


@dataclass(frozen=True, slots=True, kw_only=True)
class Moments:
    """What every level's paired statistics are built from, per pair and subtask.

    Attributes:
        n: ``(n_pairs, n_subtasks)`` items both sides have (0 where no items).
        unmatched: Items only one side has.
        documents: Documents with a matched item (pool-then-normalize's weights).
        total_a: Sum of side a's values over the matched items.
        total_b: Sum of side b's values over the matched items.
        discordant_a: Matched items where a has 1 and b 0 (NaN: a subtask not
            binary, or clustered).
        discordant_b: Matched items where b has 1 and a 0.
        domains: The cross-moments of each domain of several subtasks.
        single: ``(n_pairs, n_subtasks, 3)``: for a subtask that is a domain of
            its own, its cross-moments ``Q[x, x]``, ``Q[x, d]``, ``Q[d, d]`` (0
            elsewhere), all such subtasks as one array.
        single_clusters: ``(n_pairs, n_subtasks)``: their clusters with a
            matched item.
        is_single: ``(n_subtasks,)``: the subtasks that are domains of their own.
    """

    n: FloatArray
    unmatched: FloatArray
    documents: FloatArray
    total_a: FloatArray
    total_b: FloatArray
    discordant_a: FloatArray
    discordant_b: FloatArray
    domains: tuple[DomainMoments, ...]
    single: FloatArray
    single_clusters: FloatArray
    is_single: BoolArray


def pair_moments(items: Items, a: npt.ArrayLike, b: npt.ArrayLike) -> Moments:
    """Per pair ``(a[i], b[i])`` of item-matrix rows, the moments of every subtask.

    Args:
        items: The item matrix.
        a: Side a's rows (variants of `items`).
        b: Side b's rows; ``a[i] == b[i]`` gives one variant's own moments.

    Returns:
        The moments (see :class:`Moments`).

    Examples:
        >>> from lbnorm.readers.items import SubtaskItems
        >>> import pyarrow as pa
        >>> codes = np.array([[2, 2, 1, 2], [2, 1, 1, 1]], dtype=np.uint8)
        >>> one = SubtaskItems(codes=codes, values=None, documents=pa.array(range(4)),
        ...     document_index=np.arange(4), positions=np.full(4, -1), clusters=np.arange(4),
        ...     key="doc_id", is_list=False)
        >>> items = Items(variants=pa.table({"model": ["a", "b"]}), subtasks=(one,), tasks=("t",))
        >>> m = pair_moments(items, [0], [1])
        >>> m.n.tolist(), m.total_a.tolist(), m.discordant_a.tolist(), m.single[0, 0].tolist()
        ([[4.0]], [[3.0]], [[2.0]], [0.75, 0.5, 1.0])
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    n_pairs, n_subtasks = a.size, len(items.subtasks)
    shape = (n_pairs, n_subtasks)
    out = {
        name: np.zeros(shape)
        for name in ("n", "unmatched", "documents", "total_a", "total_b")
    } | {name: np.full(shape, np.nan) for name in ("discordant_a", "discordant_b")}
    by_task: dict[str, list[int]] = {}
    for k, (task, subtask) in enumerate(zip(items.tasks, items.subtasks, strict=True)):
        if subtask is not None:
            by_task.setdefault(task, []).append(k)
    domains: list[DomainMoments] = []
    fast: list[int] = []
    for members in by_task.values():
        only = items.subtasks[members[0]]
        if len(members) == 1 and only is not None and _is_plain_binary(only):
            fast.append(members[0])
        else:
            domains.append(_dense_domain(items, np.array(members), a, b, out))
    if fast:
        domains.extend(_binary_domains(items, fast, a, b, out))
    domains.sort(key=lambda d: int(d.subtasks[0]))
    single = np.zeros((n_pairs, n_subtasks, 3))
    single_clusters = np.zeros(shape)
    is_single = np.zeros(n_subtasks, dtype=bool)
    several = []
    for domain in domains:  # the subtasks alone in their domain go to one array
        if domain.subtasks.size > 1:
            several.append(domain)
            continue
        (k,) = domain.subtasks.tolist()
        single[:, k] = domain.q[:, [0, 0, 1], [0, 1, 1]]
        single_clusters[:, k] = domain.clusters
        is_single[k] = True
    return Moments(
        **out,
        domains=tuple(several),
        single=single,
        single_clusters=single_clusters,
        is_single=is_single,
    )


def _is_plain_binary(subtask: SubtaskItems) -> bool:
    """0/1 values, one item per document, each document its own cluster."""
    if not subtask.is_binary or subtask.is_list:
        return False
    clusters = subtask.clusters
    return bool(np.unique(clusters).size == clusters.size)


def _word_counts(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    """The set bits of each 64-bit word (numpy's own popcount where it has one)."""
    counter = getattr(np, "bitwise_count", None)  # numpy >= 2.0
    if counter is not None:
        return np.asarray(counter(words), dtype=np.uint8)
    per_byte = _POPCOUNT[words.view(np.uint8)].reshape(*words.shape, 8)
    return np.asarray(per_byte.sum(axis=-1, dtype=np.uint8), dtype=np.uint8)


def _binary_domains(
    items: Items,
    subtasks: list[int],
    a: IntArray,
    b: IntArray,
    out: dict[str, FloatArray],
) -> list[DomainMoments]:
    """Single-subtask binary domains, all at once: the bits of the matrix, by popcount."""
    codes = []
    for k in subtasks:
        subtask = items.subtasks[k]
        assert subtask is not None
        codes.append(subtask.codes)
    widths = [-(-c.shape[1] // 64) * 8 for c in codes]  # bytes, whole 64-bit words
    starts = np.cumsum([0, *widths[:-1]])

    def words(is_set: Callable[[npt.NDArray[np.uint8]], BoolArray]) -> U64Array:
        """The matrix's bits where `is_set`, each subtask from a whole word."""
        bits = np.zeros((codes[0].shape[0], sum(widths)), dtype=np.uint8)
        for code, start in zip(codes, starts.tolist(), strict=True):
            packed = np.packbits(is_set(code), axis=1)
            bits[:, start : start + packed.shape[1]] = packed
        return bits.view(np.uint64)

    have, right = words(lambda code: code != 0), words(lambda code: code == ONE)
    bounds = starts // 8
    sums = np.zeros((5, a.size, len(subtasks)))
    for start in range(0, a.size, _CHUNK):  # a chunk of pairs at a time
        rows = slice(start, start + _CHUNK)
        have_a, have_b = have[a[rows]], have[b[rows]]
        right_a, right_b = right[a[rows]], right[b[rows]]
        for at, bits in enumerate(
            (
                have_a & have_b,
                have_a ^ have_b,
                right_a & have_b,
                right_b & have_a,
                right_a & right_b,
            )
        ):
            per_word = _word_counts(bits)
            sums[at, rows] = np.add.reduceat(per_word, bounds, axis=1, dtype=np.int64)
    n, unmatched, total_a, total_b, both = sums
    found = (n, unmatched, n, total_a, total_b, total_a - both, total_b - both)
    for name, value in zip(out, found, strict=True):  # in the order of `out`'s names
        out[name][:, subtasks] = value
    with np.errstate(invalid="ignore", divide="ignore"):
        # sums of x, d = x - y, x^2, x d and d^2, in exact integers
        total_d = total_a - total_b
        q_xx = total_a - total_a * total_a / n
        q_xd = (total_a - both) - total_a * total_d / n
        q_dd = (total_a + total_b - 2 * both) - total_d * total_d / n
    # (pair, subtask, 2, 2): each pair's 2 x 2 matrix per subtask
    q = np.nan_to_num(
        np.moveaxis(np.array([[q_xx, q_xd], [q_xd, q_dd]]), (0, 1), (2, 3))
    )
    return [
        DomainMoments(
            subtasks=np.array([k], dtype=np.int64), q=q[:, at], clusters=n[:, at].copy()
        )
        for at, k in enumerate(subtasks)
    ]


def _dense_domain(
    items: Items,
    members: IntArray,
    a: IntArray,
    b: IntArray,
    out: dict[str, FloatArray],
) -> DomainMoments:
    """A domain's moments from its values as floats, a chunk of pairs at a time.

    The values are centred by each variable's matched mean before the cluster
    sums, so no digits are lost to cancellation.
    """
    subtasks: list[SubtaskItems] = []
    for k in members.tolist():
        subtask = items.subtasks[k]
        assert subtask is not None
        subtasks.append(subtask)
    n_clusters = max(int(s.clusters.max()) + 1 for s in subtasks)
    by_cluster = [_Groups.of(s.clusters) for s in subtasks]
    by_document = [_Groups.of(s.document_index) for s in subtasks]
    size = members.size
    q = np.zeros((a.size, 2 * size, 2 * size))
    clusters = np.zeros(a.size)
    for start in range(0, a.size, _CHUNK):  # a chunk of pairs at a time
        rows = slice(start, start + _CHUNK)
        side_a, side_b = a[rows], b[rows]
        sums = np.zeros((side_a.size, 2 * size, n_clusters))
        touched = np.zeros((side_a.size, n_clusters))
        for at, k in enumerate(members.tolist()):
            subtask = subtasks[at]
            x, y = subtask.floats(side_a), subtask.floats(side_b)
            have_x, have_y = ~np.isnan(x), ~np.isnan(y)
            matched = have_x & have_y
            n = matched.sum(axis=1).astype(np.float64)
            x = np.where(matched, x, 0.0)
            y = np.where(matched, y, 0.0)
            total_x, total_y = x.sum(axis=1), y.sum(axis=1)
            out["n"][rows, k] = n
            out["unmatched"][rows, k] = (have_x ^ have_y).sum(axis=1)
            out["total_a"][rows, k] = total_x
            out["total_b"][rows, k] = total_y
            out["documents"][rows, k] = (by_document[at].sum(matched) > 0).sum(axis=1)
            if subtask.is_binary and by_cluster[at].is_singletons:
                out["discordant_a"][rows, k] = (x * (1.0 - y)).sum(axis=1)
                out["discordant_b"][rows, k] = ((1.0 - x) * y).sum(axis=1)
            mean_x = total_x / np.maximum(n, 1.0)
            centred_x = np.where(matched, x - mean_x[:, None], 0.0)
            difference = x - y
            mean_d = difference.sum(axis=1) / np.maximum(n, 1.0)
            centred_d = np.where(matched, difference - mean_d[:, None], 0.0)
            groups = by_cluster[at]
            sums[:, at, groups.keys] += groups.sum(centred_x)
            sums[:, size + at, groups.keys] += groups.sum(centred_d)
            touched[:, groups.keys] += groups.sum(matched)
        q[rows] = np.einsum("pvc,pwc->pvw", sums, sums)
        clusters[rows] = (touched > 0).sum(axis=1)
    return DomainMoments(subtasks=members.copy(), q=q, clusters=clusters)


@dataclass(frozen=True, slots=True)
class _Groups:
    """Columns grouped by a key (a cluster, a document), to sum a matrix's columns by group."""

    keys: IntArray  # the distinct keys, ascending
    order: IntArray  # the columns, by key
    starts: IntArray  # where each key's columns start in `order`
    is_singletons: bool  # each column its own key

    @classmethod
    def of(cls, key: IntArray) -> _Groups:
        order = np.argsort(key, kind="stable")
        ranked = key[order]
        starts = np.r_[0, np.flatnonzero(ranked[1:] != ranked[:-1]) + 1].astype(
            np.int64
        )
        return cls(
            keys=ranked[starts],
            order=order,
            starts=starts,
            is_singletons=bool(starts.size == key.size),
        )

    def sum(self, values: npt.NDArray[np.generic]) -> FloatArray:
        """``(rows, groups)``: each group's columns of `values` summed."""
        matrix = np.asarray(values, dtype=np.float64)
        if self.is_singletons:
            return matrix[:, self.order]
        return np.add.reduceat(matrix[:, self.order], self.starts, axis=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Level:
    """A level of the leaderboard: a subtask, a benchmark, or the average.

    Attributes:
        name: ``average``, a benchmark's name, or ``benchmark/subtask``.
        subtasks: The suite rows it is built from (the average: those of the
            benchmarks it averages).
        benchmark: The benchmark's index (-1: the average).
        is_subtask: One subtask alone.
        by_subtasks: The average weighs each benchmark by the subtasks it
            counts (the board's ``average = "subtasks"``), not by its weight alone.
    """

    name: str
    subtasks: IntArray
    benchmark: int
    is_subtask: bool = False
    by_subtasks: bool = False


def suite_levels(
    suite: Suite, arrays: SuiteArrays, *, subtasks: bool = False
) -> tuple[list[Level], tuple[str, ...]]:
    """The average, then each benchmark (followed by its subtasks with `subtasks`).

    A benchmark paired comparisons cannot score from its items (a statistic, a
    benchmark of per-instance rules, a pairwise one:
    :func:`lbnorm.readers.items.unpaired_benchmarks`) is left out, and so is the
    average where the board has none or it averages such a benchmark.

    Args:
        suite: The suite (its benchmarks and the board's ``average``).
        arrays: The suite's arrays (bounds, benchmark of each subtask, rules).
        subtasks: Also a level per subtask (``benchmark/subtask``), for
            benchmarks of several subtasks.

    Returns:
        The levels, and a note per level left out, with why.
    """
    left_out = unpaired_benchmarks(suite)
    names = suite.benchmark_names
    kept = averaged(arrays)
    starts = arrays.benchmark_starts()
    levels, notes = [], []
    average = suite.board.average
    if average == "none":
        notes.append("average: the suite's board has none")
    elif not kept.any():
        notes.append("average: no benchmark is averaged")
    elif unpaired := [names[i] for i in np.flatnonzero(kept).tolist() if i in left_out]:
        notes.append(f"average: it averages {', '.join(unpaired)}, not compared")
    else:
        members = np.flatnonzero(kept[arrays.benchmark_index]).astype(np.int64)
        levels.append(
            Level(
                name="average",
                subtasks=members,
                benchmark=-1,
                by_subtasks=average == "subtasks",
            )
        )
    subtask_names = [s.name for b in suite.benchmarks for s in b.subtasks]
    for index, name in enumerate(names):
        if index in left_out:
            notes.append(f"{name}: {left_out[index]}")
            continue
        members = np.arange(starts[index], starts[index + 1], dtype=np.int64)
        levels.append(Level(name=name, subtasks=members, benchmark=index))
        if subtasks and members.size > 1:
            levels.extend(
                Level(
                    name=f"{name}/{subtask_names[k]}",
                    subtasks=np.array([k], dtype=np.int64),
                    benchmark=index,
                    is_subtask=True,
                )
                for k in members.tolist()
            )
    return levels, tuple(notes)


def refuse_unpairable(suite: Suite, *, where: str = "--paired") -> None:
    """Refuse a paired comparison when no level of the suite can be compared.

    ``run --paired`` asks before reading any input; ``compare --paired`` and
    ``diff --paired`` ask of the suite an output was computed with.

    Args:
        suite: The suite.
        where: What asks (the error names it): an option or an output folder.

    Raises:
        OptionsError: Every benchmark is a statistic, pairwise or of per-instance
            rules, and the board has no average to compare.
    """
    levels, left_out = suite_levels(suite, suite_arrays(suite))
    if not levels:
        msg = (
            f"{where}: no level of suite {suite.display_name} can be compared on its "
            f"items ({'; '.join(left_out)}).\nHint: leave out --paired; paired "
            "comparisons need a benchmark scored as the mean of its per-sample values "
            "(docs/paired.md)."
        )
        raise OptionsError(msg)


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelStatistics:
    """One level's paired statistics, per pair (NaN where not computable).

    Attributes:
        score_a: Side a's score on the matched items, 0-100.
        score_b: Side b's.
        difference: ``score_a - score_b``; NaN where a subtask of the level
            has no matched item.
        stderr: The paired standard error of `difference`.
        stderr_a: Side a's own standard error on the matched items (by the
            same rule and clusters; for a pair ``(v, v)``, v's on all its items).
        stderr_b: Side b's.
        p_value: Two-sided normal p-value of `difference`.
        p_mcnemar: McNemar's exact p-value (binary subtasks and pooled
            benchmarks of them, documents unclustered; else NaN).
        n_items: Matched items.
        n_items_unmatched: Items only one side has.
    """

    score_a: FloatArray
    score_b: FloatArray
    difference: FloatArray
    stderr: FloatArray
    stderr_a: FloatArray
    stderr_b: FloatArray
    p_value: FloatArray
    p_mcnemar: FloatArray
    n_items: FloatArray
    n_items_unmatched: FloatArray


def level_statistics(
    moments: Moments,
    arrays: SuiteArrays,
    level: Level,
    *,
    missing: MissingPolicy = "exclude",
    mcnemar: bool = False,
) -> LevelStatistics:
    """The paired statistics of one level, by the suite's rule (module docstring).

    Args:
        moments: From :func:`pair_moments`.
        arrays: The suite's arrays.
        level: The level (:func:`suite_levels`).
        missing: The run's policy: ``exclude`` compares a level only where
            both sides have matched items in every subtask of it; ``partial``
            and ``zero`` compare it on the subtasks where they do.
        mcnemar: Also McNemar's exact test where it applies (exact integer
            arithmetic: for a few pairs, not a whole board).

    Returns:
        The level's statistics per pair.
    """
    score_a, coef_a, is_known = _side(moments, moments.total_a, arrays, level, missing)
    score_b, coef_b, _ = _side(moments, moments.total_b, arrays, level, missing)
    members = level.subtasks
    zeros = np.zeros_like(coef_a)
    with np.errstate(invalid="ignore"):
        variance = _variance(moments, coef_a, coef_b, members)
        alone_a = _variance(moments, coef_a, zeros, members)
        alone_b = _variance(moments, zeros, coef_b, members)
        difference = np.where(is_known, score_a - score_b, np.nan)
        stderr = np.where(is_known, np.sqrt(variance), np.nan)
    p_mcnemar = np.full(difference.shape, np.nan)
    if mcnemar and (
        members.size == 1
        or (level.benchmark >= 0 and arrays.is_pooled[level.benchmark])
    ):
        right = moments.discordant_a[:, members].sum(axis=1)
        wrong = moments.discordant_b[:, members].sum(axis=1)
        p_mcnemar = np.where(is_known, mcnemar_exact(right, wrong), np.nan)
    return LevelStatistics(
        score_a=np.where(is_known, score_a, np.nan),
        score_b=np.where(is_known, score_b, np.nan),
        difference=difference,
        stderr=stderr,
        stderr_a=np.where(is_known, np.sqrt(alone_a), np.nan),
        stderr_b=np.where(is_known, np.sqrt(alone_b), np.nan),
        p_value=two_sided_p(difference, stderr),
        p_mcnemar=p_mcnemar,
        n_items=moments.n[:, members].sum(axis=1),
        n_items_unmatched=moments.unmatched[:, members].sum(axis=1),
    )


def score_scale(
    arrays: SuiteArrays, subtasks: IntArray | slice
) -> tuple[FloatArray, FloatArray]:
    """Per subtask, the raw value that scores 0 and the score's points per raw unit.

    ``N(m) = max(0, (m - offset) x slope)``: on fractions ``offset = lb`` and
    ``slope = 100 / (1 - lb)``; on a declared range ``[lo, hi]``
    (:class:`lbnorm.suites.Scales`) ``offset = lo + lb (hi - lo)`` and
    ``slope = 100 / ((hi - lo) (1 - lb))``, as the kernel scores it.
    """
    bound = arrays.lower_bound[subtasks]
    scales = arrays.scales
    if scales is None:
        return bound, 100.0 / (1.0 - bound)
    return scales.offset[subtasks], scales.factor[subtasks] / (1.0 - bound)


def _normalized(
    mean: FloatArray, offset: FloatArray, scale: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """``N(m)`` and its slope: `scale` at or above `offset` (the bound), 0 below."""
    slope = np.where(mean >= offset, scale, 0.0)
    return np.maximum((mean - offset) * scale, 0.0), slope


def _side(
    moments: Moments,
    total: FloatArray,
    arrays: SuiteArrays,
    level: Level,
    missing: MissingPolicy,
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """One side's score at a level, its derivative by each subtask's mean, and where it is known.

    Over the subtasks with matched items (all of them, where the level is
    known under ``missing="exclude"``): a benchmark averages or pools those, the
    average weighs the benchmarks it counts (known by their own policy) by
    their weights, or by their weights times the subtasks they count.

    Known (the same for both sides: the matched items are): a benchmark (or one
    of its subtasks) by its own policy, under ``exclude`` only with every
    subtask matched; the average where every benchmark it averages is known
    (the run's ``exclude``) or any is.
    """
    present = moments.n > 0
    mean = np.where(present, total / np.maximum(moments.n, 1.0), 0.0)
    coef = np.zeros_like(mean)
    if level.is_subtask:
        (k,) = level.subtasks.tolist()
        offset, scale = score_scale(arrays, level.subtasks)
        score, coef[:, k] = _normalized(mean[:, k], offset[0], scale[0])
        return score, coef, present[:, k]
    starts = arrays.benchmark_starts()
    indices = (
        [level.benchmark]
        if level.benchmark >= 0
        else np.unique(arrays.benchmark_index[level.subtasks]).tolist()
    )
    values, weights, known = [], [], []
    for index in indices:  # a suite's benchmarks, each by its own rule
        members = slice(starts[index], starts[index + 1])
        here = present[:, members]
        offset, scale = score_scale(arrays, members)
        with np.errstate(invalid="ignore", divide="ignore"):
            if arrays.is_pooled[index]:
                share = np.where(here, moments.documents[:, members], 0.0)
                share = share / share.sum(axis=1, keepdims=True)
                pooled = (np.where(here, share, 0.0) * mean[:, members]).sum(axis=1)
                value, slope = _normalized(pooled, offset[0], scale[0])
                coef[:, members] = np.where(here, share * slope[:, None], 0.0)
            else:
                scores, slopes = _normalized(mean[:, members], offset, scale)
                count = here.sum(axis=1, keepdims=True)
                value = np.where(here, scores, 0.0).sum(axis=1) / count[:, 0]
                coef[:, members] = np.where(here, slopes / count, 0.0)
        values.append(np.nan_to_num(value))
        is_whole = arrays.missing_of(index, missing) == "exclude"
        counts = here.all(axis=1) if is_whole else here.any(axis=1)
        known.append(counts)
        weight = arrays.weight[index] * (here.sum(axis=1) if level.by_subtasks else 1.0)
        weights.append(np.where(counts, weight, 0.0))
    weight = np.stack(weights, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = weight / weight.sum(axis=1, keepdims=True)
    score = (np.nan_to_num(weight) * np.stack(values, axis=1)).sum(axis=1)
    for at, index in enumerate(indices):  # each benchmark's share of the level
        members = slice(starts[index], starts[index + 1])
        coef[:, members] *= np.nan_to_num(weight[:, at : at + 1])
    every = np.stack(known, axis=1)
    is_all = level.benchmark >= 0 or missing == "exclude"
    is_known = np.asarray(
        every.all(axis=1) if is_all else every.any(axis=1), dtype=bool
    )
    return score, coef, is_known


def _variance(
    moments: Moments, coef_a: FloatArray, coef_b: FloatArray, members: IntArray
) -> FloatArray:
    """``sum_domains C / (C - 1) w' Q w`` for the sides' derivatives (NaN: C <= 1 where used).

    ``a x - b y = (a - b) x + b d``: the weights on (x, d) are ``(a - b, b)``
    over n; the subtasks that are domains of their own at once, elementwise;
    over the level's subtasks (`members`) only.
    """

    def per_item(coef: FloatArray, at: IntArray) -> FloatArray:
        """A side's weight on each mean's items (0 where the side does not use it)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(coef[:, at] != 0, coef[:, at] / moments.n[:, at], 0.0)

    def small_sample(count: FloatArray) -> FloatArray:
        """``C / (C - 1)``, NaN for one cluster or none."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(count > 1, count / (count - 1.0), np.nan)

    alone = members[moments.is_single[members]]
    weight_a, weight_b = per_item(coef_a, alone), per_item(coef_b, alone)
    x, d = weight_a - weight_b, weight_b
    q = moments.single[:, alone]
    factor = small_sample(moments.single_clusters[:, alone])
    with np.errstate(invalid="ignore", divide="ignore"):
        quadratic = x * x * q[..., 0] + 2 * x * d * q[..., 1] + d * d * q[..., 2]
        terms = np.where((x != 0) | (d != 0), factor * np.maximum(quadratic, 0.0), 0.0)
    variance: FloatArray = terms.sum(axis=1)
    for domain in moments.domains:  # a task of several subtasks (IFEval's kind)
        if not np.isin(domain.subtasks, members).any():
            continue
        on_b = per_item(coef_b, domain.subtasks)
        weight = np.concatenate(
            [per_item(coef_a, domain.subtasks) - on_b, on_b], axis=1
        )
        is_used = (weight != 0).any(axis=1)
        if not is_used.any():
            continue
        quadratic_here = np.einsum("pv,pvw,pw->p", weight, domain.q, weight)
        factor_here = small_sample(domain.clusters)
        variance += np.where(
            is_used, factor_here * np.maximum(quadratic_here, 0.0), 0.0
        )
    return variance


def two_sided_p(difference: FloatArray, stderr: FloatArray) -> FloatArray:
    """``2 (1 - Phi(|d| / se))``; an error of 0 gives 1 for a difference of 0, else 0.

    Examples:
        >>> two_sided_p(np.array([1.96, 0.0, 1.0]), np.array([1.0, 0.0, 0.0])).round(4).tolist()
        [0.05, 1.0, 0.0]
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.abs(difference) / stderr
    p = np.minimum(2.0 * upper_tail(np.where(np.isfinite(z), z, 0.0)), 1.0)
    p = np.where(stderr == 0, np.where(difference == 0, 1.0, 0.0), p)
    return np.asarray(
        np.where(np.isnan(difference) | np.isnan(stderr), np.nan, p), dtype=np.float64
    )


def mcnemar_exact(
    discordant_a: npt.ArrayLike, discordant_b: npt.ArrayLike
) -> FloatArray:
    """McNemar's exact two-sided p-value: the binomial test of the discordant items.

    Under equal accuracy each of the ``n = n_ab + n_ba`` discordant items favours
    either side with probability 1/2: ``p = min(1, 2 P(X <= min(n_ab, n_ba)))``,
    ``X ~ Binomial(n, 1/2)``, summed in exact integers (correctly rounded).

    Examples:
        >>> mcnemar_exact([10, 3, 0], [2, 3, 0]).round(6).tolist()
        [0.038574, 1.0, 1.0]
    """
    first = np.asarray(discordant_a, dtype=np.float64)
    second = np.asarray(discordant_b, dtype=np.float64)
    out = np.full(first.shape, np.nan)
    known = np.isfinite(first) & np.isfinite(second)
    out[known] = [
        _binomial_two_sided(int(x), int(y))
        for x, y in zip(first[known].tolist(), second[known].tolist(), strict=True)
    ]  # a step per compared pair and level (few), each exact
    return out


@functools.cache
def _binomial_two_sided(first: int, second: int) -> float:
    n, k = first + second, min(first, second)
    if 2 * k >= n:
        return 1.0
    term = total = 1
    for i in range(1, k + 1):  # C(n, i) from C(n, i - 1), exactly
        term = term * (n - i + 1) // i
        total += term
    return min(1.0, (2 * total) / (1 << n))


def adjust_p_values(p_values: FloatArray, method: Adjustment = "holm") -> FloatArray:
    """P-values adjusted for the number of tests (NaN ones are not tests).

    ``holm``: Holm's step-down rule (the family-wise error rate),
    ``max_{j <= i} min(1, (m - j + 1) p_(j))``; ``bh``: Benjamini and Hochberg's
    step-up rule (the false discovery rate), ``min_{j >= i} min(1, m p_(j) / j)``.

    Examples:
        >>> adjust_p_values(np.array([0.01, 0.04, 0.03, np.nan])).round(4).tolist()
        [0.03, 0.06, 0.06, nan]
        >>> adjust_p_values(np.array([0.01, 0.04, 0.03]), "bh").round(4).tolist()
        [0.03, 0.04, 0.04]
    """
    out = np.full(p_values.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(p_values))
    m = tested.size
    if not m:
        return out
    order = np.argsort(p_values[tested], kind="stable")
    ranked = p_values[tested][order]
    if method == "holm":
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ranked))
    else:
        scaled = np.minimum(1.0, ranked * m / np.arange(1, m + 1))
        adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out[tested[order]] = adjusted
    return out
