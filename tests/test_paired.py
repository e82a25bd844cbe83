"""engines/paired.py: paired moments and each level's statistics, against independent oracles.

The oracles (tests/oracles/paired.py) are the formulas on plain arrays: the issue's
contract for one subtask, Miller's clustered standard error, the clustered error of a
linear combination of subtask means; McNemar's test is scipy's ``binomtest``, the
normal p-value scipy's ``norm.sf``. Data are constructed with known structure:
correlated models (paired error far below unpaired), independent ones (about equal),
clipped sides, clusters, a task whose subtasks share documents (IFEval's kind).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oracles.paired import (
    benjamini_hochberg,
    cluster_robust_se,
    holm,
    linear_se,
    paired_subtask,
)
from scipy import stats

from lbnorm.engines.paired import (
    Level,
    adjust_p_values,
    level_statistics,
    mcnemar_exact,
    pair_moments,
    suite_levels,
    two_sided_p,
)
from lbnorm.readers.items import Items, SubtaskItems
from lbnorm.suites import Suite, parse_suite, suite_arrays

FloatArray = npt.NDArray[np.float64]


def close(actual: object, expected: object) -> None:
    """Equal to 1e-12, relative (or absolute, near 0)."""
    np.testing.assert_allclose(
        np.asarray(actual, dtype=float),
        np.asarray(expected, dtype=float),
        rtol=1e-12,
        atol=1e-12,
    )


SUITE = parse_suite(
    b"""
name = "paired-test"
[[benchmarks]]
name = "A"
subtasks = [
  { name = "a1", task = "ta1", metric = "acc,none", num_choices = 4 },
  { name = "a2", task = "ta2", metric = "acc,none", num_choices = 2 },
]
[[benchmarks]]
name = "P"
aggregation = "pool-then-normalize"
weight = 2.0
subtasks = [
  { name = "p1", task = "tp1", metric = "acc,none", num_choices = 4, n_samples = 300 },
  { name = "p2", task = "tp2", metric = "acc,none", num_choices = 4, n_samples = 200 },
]
""",
    source="paired-test",
)
SIZES = (400, 250, 300, 200)


def subtask_items(
    values: FloatArray,
    *,
    clusters: npt.ArrayLike | None = None,
    documents: npt.ArrayLike | None = None,
    positions: npt.ArrayLike | None = None,
) -> SubtaskItems:
    """A subtask's items from a (variants, items) matrix, NaN where absent."""
    width = values.shape[1]
    codes = np.where(
        np.isnan(values), 0, np.where(values == 1, 2, np.where(values == 0, 1, 3))
    )
    document = np.arange(width) if documents is None else np.asarray(documents)
    is_binary = bool(np.isin(values[~np.isnan(values)], [0.0, 1.0]).all())
    return SubtaskItems(
        codes=codes.astype(np.uint8),
        values=None if is_binary else values,
        documents=pa.array(document.tolist(), pa.int64()),
        document_index=document.astype(np.int64),
        positions=np.full(width, -1) if positions is None else np.asarray(positions),
        clusters=document.astype(np.int64)
        if clusters is None
        else np.asarray(clusters, dtype=np.int64),
        key="doc_id",
        is_list=positions is not None,
    )


def items_of(columns: Sequence[SubtaskItems | None], tasks: list[str]) -> Items:
    width = next(c.codes.shape[0] for c in columns if c is not None)
    return Items(
        variants=pa.table({"model": [f"m{i}" for i in range(width)]}),
        subtasks=tuple(columns),
        tasks=tuple(tasks),
    )


def correlated(
    rng: np.random.Generator, n: int, means: tuple[float, float], agreement: float
) -> FloatArray:
    """Two models' 0/1 answers: b copies a with probability `agreement`, else draws anew."""
    a = (rng.random(n) < means[0]).astype(float)
    fresh = (rng.random(n) < means[1]).astype(float)
    b = np.where(rng.random(n) < agreement, a, fresh)
    return np.stack([a, b])


def board(rng: np.random.Generator, agreement: float, *, floats: bool = False) -> Items:
    """Two models on SUITE's four subtasks, every score above its bound."""
    means = [(0.7, 0.66), (0.8, 0.78), (0.62, 0.6), (0.7, 0.72)]
    columns = []
    for n, pair in zip(SIZES, means, strict=True):
        values = correlated(rng, n, pair, agreement)
        if floats:  # partial credit: not 0/1, the dense path
            values = np.clip(values * 0.8 + rng.random(values.shape) * 0.2, 0, 1)
        columns.append(subtask_items(values))
    return items_of(columns, ["ta1", "ta2", "tp1", "tp2"])


def level(suite: Suite, name: str) -> Level:
    levels, _ = suite_levels(suite, suite_arrays(suite), subtasks=True)
    return next(lv for lv in levels if lv.name == name)


def stats_of(
    items: Items, suite: Suite, name: str, a: int = 0, b: int = 1
) -> tuple[float, float, float]:
    moments = pair_moments(items, [a], [b])
    result = level_statistics(moments, suite_arrays(suite), level(suite, name))
    return (
        float(result.difference[0]),
        float(result.stderr[0]),
        float(result.p_value[0]),
    )


def values_of(items: Items, k: int) -> FloatArray:
    subtask = items.subtasks[k]
    assert subtask is not None
    return subtask.floats()


@pytest.mark.parametrize("floats", [False, True], ids=["binary", "float"])
def test_one_subtask_is_the_contract(floats: bool) -> None:
    """(mean(x) - mean(y)) x 100/(1 - lb) and sd(x - y, ddof 1)/sqrt(n) x 100/(1 - lb),
    to 1e-12, on the bit-packed path (0/1 values) and the dense one (partial credit)."""
    items = board(np.random.default_rng(1), 0.7, floats=floats)
    for k, (name, bound) in enumerate([("A/a1", 0.25), ("A/a2", 0.5), ("P/p1", 0.25)]):
        x, y = values_of(items, k)
        difference, stderr, p_value = stats_of(items, SUITE, name)
        expected = paired_subtask(x, y, bound)
        np.testing.assert_allclose([difference, stderr], expected)
        assert p_value == pytest.approx(
            2 * stats.norm.sf(abs(difference) / stderr), rel=1e-12
        )


def test_correlated_models_pair_far_below_unpaired_and_independent_ones_about_equal() -> (
    None
):
    rng = np.random.default_rng(2)
    for agreement, low, high in ((0.9, 0.2, 0.45), (0.0, 0.9, 1.1)):
        x, y = correlated(rng, 20_000, (0.7, 0.68), agreement)
        items = items_of(
            [subtask_items(np.stack([x, y])), None, None, None],
            ["ta1", "ta2", "tp1", "tp2"],
        )
        moments = pair_moments(items, [0, 0, 1], [1, 0, 1])
        result = level_statistics(moments, suite_arrays(SUITE), level(SUITE, "A/a1"))
        unpaired = math.hypot(result.stderr_a[1], result.stderr_b[2])
        assert low < result.stderr[0] / unpaired < high, agreement


def test_benchmarks_and_the_average_follow_the_rules() -> None:
    """normalize-then-average: the mean of the subtasks' differences, errors added in
    quadrature / K; pool-then-normalize: the pooled means' difference, the stratified
    error; the average: weights 1 and 2."""
    items = board(np.random.default_rng(3), 0.6)
    subtask = [
        paired_subtask(values_of(items, k)[0], values_of(items, k)[1], bound)
        for k, bound in enumerate((0.25, 0.5, 0.25, 0.25))
    ]
    a_diff = (subtask[0][0] + subtask[1][0]) / 2
    a_se = math.hypot(subtask[0][1], subtask[1][1]) / 2
    close(stats_of(items, SUITE, "A")[:2], [a_diff, a_se])
    x = np.concatenate([values_of(items, 2)[0], values_of(items, 3)[0]])
    y = np.concatenate([values_of(items, 2)[1], values_of(items, 3)[1]])
    p_diff = (x.mean() - y.mean()) * 100 / 0.75
    shares = np.array([300, 200]) / 500
    p_se = math.hypot(shares[0] * subtask[2][1], shares[1] * subtask[3][1])
    close(stats_of(items, SUITE, "P")[:2], [p_diff, p_se])
    close(
        stats_of(items, SUITE, "average")[:2],
        [(a_diff + 2 * p_diff) / 3, math.hypot(a_se / 3, 2 * p_se / 3)],
    )


def test_clustered_errors_are_millers_with_c_over_c_minus_one() -> None:
    """One model's error (the pair (v, v)) and the difference's, clustered by passage."""
    rng = np.random.default_rng(4)
    n = 600
    passage = np.repeat(np.arange(75), 8)
    shared = rng.normal(size=75)[passage]  # a passage is hard for both
    x = (shared + rng.normal(size=n) > -0.5).astype(float)
    y = (shared + rng.normal(size=n) > -0.3).astype(float)
    values = np.stack([x, y])
    items = items_of(
        [subtask_items(values, clusters=passage), None, None, None],
        ["ta1", "ta2", "tp1", "tp2"],
    )
    moments = pair_moments(items, [0, 0, 1], [1, 0, 1])
    result = level_statistics(moments, suite_arrays(SUITE), level(SUITE, "A/a1"))
    g = 100 / 0.75
    assert result.stderr[0] == pytest.approx(
        g * cluster_robust_se(x - y, passage), rel=1e-12
    )
    assert result.stderr_a[1] == pytest.approx(
        g * cluster_robust_se(x, passage), rel=1e-12
    )
    assert result.stderr_b[2] == pytest.approx(
        g * cluster_robust_se(y, passage), rel=1e-12
    )
    unclustered = paired_subtask(x, y, 0.25)[1]
    # a passage hard for one model is hard for the other: one model's error grows
    # with the clusters, the difference's hardly (the shared difficulty cancels)
    assert result.stderr_a[1] > 1.5 * g * np.std(x, ddof=1) / math.sqrt(n)
    assert result.stderr[0] < 1.1 * unclustered
    # every item its own cluster: the unclustered error exactly
    alone = items_of(
        [subtask_items(values), None, None, None], ["ta1", "ta2", "tp1", "tp2"]
    )
    assert stats_of(alone, SUITE, "A/a1")[1] == pytest.approx(unclustered, rel=1e-12)
    assert cluster_robust_se(x - y, np.arange(n)) * g == pytest.approx(
        unclustered, rel=1e-12
    )


IFEVAL = parse_suite(
    b"""
name = "ifeval-like"
[[benchmarks]]
name = "IF"
subtasks = [
  { name = "prompt", task = "if", metric = "prompt_acc,none", num_choices = 0 },
  { name = "inst", task = "if", metric = "inst_acc,none", num_choices = 0 },
]
[[benchmarks]]
name = "M"
subtasks = [{ name = "m", task = "m", metric = "acc,none", num_choices = 2 }]
""",
    source="ifeval-like",
)


def ifeval_items(rng: np.random.Generator) -> tuple[Items, pd.DataFrame]:
    """Prompts (one value each) and their instructions (a list each): one domain."""
    prompts = 300
    lengths = rng.integers(1, 5, prompts)
    document = np.repeat(np.arange(prompts), lengths)
    position = np.concatenate([np.arange(k) for k in lengths])
    skill = rng.normal(size=prompts)
    inst = np.stack(
        [
            (skill[document] + rng.normal(size=document.size) > s).astype(float)
            for s in (-0.6, -0.4)
        ]
    )
    prompt = np.stack(
        [(skill + rng.normal(size=prompts) > s).astype(float) for s in (0.2, 0.3)]
    )
    other = correlated(rng, 250, (0.7, 0.65), 0.5)
    items = Items(
        variants=pa.table({"model": ["a", "b"]}),
        subtasks=(
            subtask_items(prompt),
            subtask_items(inst, documents=document, positions=position),
            subtask_items(other),
        ),
        tasks=("if", "if", "m"),
    )
    long = pd.concat(
        [
            pd.DataFrame(
                {
                    "subtask": "prompt",
                    "cluster": np.arange(prompts),
                    "z": prompt[0] - prompt[1],
                }
            ),
            pd.DataFrame(
                {"subtask": "inst", "cluster": document, "z": inst[0] - inst[1]}
            ),
        ]
    )
    return items, long


def test_subtasks_sharing_documents_are_one_domain() -> None:
    """IFEval's prompt- and instruction-level metrics score the same prompts: the
    benchmark's error clusters both by prompt (the oracle: the clustered error of the
    per-item contributions summed over the two subtasks)."""
    items, long = ifeval_items(np.random.default_rng(5))
    difference, stderr, _ = stats_of(items, IFEVAL, "IF")
    means = long.groupby("subtask")["z"].mean()
    assert difference == pytest.approx(
        50 * (means["prompt"] + means["inst"]), rel=1e-12
    )
    assert stderr == pytest.approx(linear_se(long.assign(a=50.0)), rel=1e-12)
    inst = long.loc[long["subtask"] == "inst"]
    assert stats_of(items, IFEVAL, "IF/inst")[1] == pytest.approx(
        100 * cluster_robust_se(inst["z"].to_numpy(), inst["cluster"]), rel=1e-12
    )
    # the average: IF and M (weights 1, 1); M is its own domain
    x, y = values_of(items, 2)
    m = paired_subtask(x, y, 0.5)
    assert stats_of(items, IFEVAL, "average")[1] == pytest.approx(
        math.hypot(stderr / 2, m[1] / 2), rel=1e-12
    )


def test_at_the_clip_a_clipped_side_has_no_variance() -> None:
    """One side below its bound: the difference's error is the other side's own; both
    below: difference 0, error 0, p-value 1 (the delta method at the clip)."""
    rng = np.random.default_rng(6)
    above = (rng.random(400) < 0.6).astype(float)
    below = (rng.random(400) < 0.2).astype(float)
    lower = (rng.random(400) < 0.15).astype(float)
    one = items_of(
        [subtask_items(np.stack([above, below])), None, None, None],
        ["ta1", "ta2", "tp1", "tp2"],
    )
    difference, stderr, _ = stats_of(one, SUITE, "A/a1")
    assert difference == pytest.approx((above.mean() - 0.25) * 100 / 0.75, rel=1e-12)
    assert stderr == pytest.approx(np.std(above, ddof=1) / 20 * 100 / 0.75, rel=1e-12)
    both = items_of(
        [subtask_items(np.stack([below, lower])), None, None, None],
        ["ta1", "ta2", "tp1", "tp2"],
    )
    assert stats_of(both, SUITE, "A/a1") == (0.0, 0.0, 1.0)


def test_partial_compares_the_subtasks_both_have_exclude_needs_all() -> None:
    items = board(np.random.default_rng(7), 0.5)
    dropped = list(items.subtasks)
    dropped[1] = None
    partial = Items(variants=items.variants, subtasks=tuple(dropped), tasks=items.tasks)
    arrays = suite_arrays(SUITE)
    moments = pair_moments(partial, [0], [1])
    assert np.isnan(level_statistics(moments, arrays, level(SUITE, "A")).difference[0])
    got = level_statistics(moments, arrays, level(SUITE, "A"), missing="partial")
    x, y = values_of(items, 0)
    expected = paired_subtask(x, y, 0.25)
    np.testing.assert_allclose([got.difference[0], got.stderr[0]], expected)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (0, 0),
        (5, 0),
        (0, 9),
        (10, 2),
        (3, 3),
        (48, 31),
        (300, 280),
        (1000, 1100),
        (12, 4000),
    ],
)
def test_mcnemar_is_the_exact_binomial_test(first: int, second: int) -> None:
    expected = (
        1.0
        if first + second == 0
        else stats.binomtest(first, first + second, 0.5).pvalue
    )
    assert mcnemar_exact([first], [second])[0] == pytest.approx(
        expected, rel=1e-12, abs=1e-300
    )


def test_mcnemar_counts_the_discordant_items_of_binary_subtasks() -> None:
    items = board(np.random.default_rng(8), 0.5)
    x, y = values_of(items, 0)
    result = level_statistics(
        pair_moments(items, [0], [1]),
        suite_arrays(SUITE),
        level(SUITE, "A/a1"),
        mcnemar=True,
    )
    first, second = int((x * (1 - y)).sum()), int(((1 - x) * y).sum())
    assert result.p_mcnemar[0] == pytest.approx(
        stats.binomtest(first, first + second).pvalue, rel=1e-12
    )
    dense = board(np.random.default_rng(8), 0.5, floats=True)
    got = level_statistics(
        pair_moments(dense, [0], [1]),
        suite_arrays(SUITE),
        level(SUITE, "A/a1"),
        mcnemar=True,
    )
    assert np.isnan(got.p_mcnemar[0])  # partial credit: no McNemar


def test_p_values_adjust_as_holm_and_benjamini_hochberg() -> None:
    rng = np.random.default_rng(9)
    p = np.concatenate([rng.random(40) ** 3, [np.nan, 0.0, 1.0, 0.5, 0.5]])
    known = ~np.isnan(p)
    for method, oracle in (("holm", holm), ("bh", benjamini_hochberg)):
        got = adjust_p_values(p, method)  # type: ignore[arg-type]
        assert np.isnan(got[~known]).all()
        np.testing.assert_allclose(got[known], oracle(p[known].tolist()), rtol=1e-15)


def test_two_sided_p_is_the_normal_tail() -> None:
    d = np.array([0.5, -2.0, 3.0, 0.0, 1.0, np.nan])
    se = np.array([1.0, 0.5, 0.1, 0.0, 0.0, 1.0])
    got = two_sided_p(d, se)
    np.testing.assert_allclose(
        got[:3], 2 * stats.norm.sf(np.abs(d[:3]) / se[:3]), rtol=1e-12
    )
    assert got[3:5].tolist() == [1.0, 0.0]
    assert np.isnan(got[5])


@settings(deadline=None)
@given(seed=st.integers(0, 2**32 - 1), agreement=st.floats(0.0, 1.0))
def test_swapping_sides_negates_the_difference_a_model_against_itself_is_zero(
    seed: int, agreement: float
) -> None:
    items = board(np.random.default_rng(seed), agreement)
    arrays = suite_arrays(SUITE)
    moments = pair_moments(items, [0, 1, 0], [1, 0, 0])
    for lv in suite_levels(SUITE, arrays, subtasks=True)[0]:
        got = level_statistics(moments, arrays, lv)
        assert got.difference[0] == pytest.approx(-got.difference[1], abs=1e-12)
        assert got.stderr[0] == pytest.approx(got.stderr[1], rel=1e-12, abs=1e-12)
        assert (got.difference[2], got.stderr[2], got.p_value[2]) == (0.0, 0.0, 1.0)


@settings(deadline=None, max_examples=20)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_order_of_the_items_does_not_matter(seed: int) -> None:
    rng = np.random.default_rng(seed)
    items = board(rng, 0.5, floats=bool(seed % 2))
    shuffled = []
    for subtask in items.subtasks:
        assert subtask is not None
        order = rng.permutation(subtask.codes.shape[1])
        shuffled.append(subtask_items(subtask.floats()[:, order]))
    other = Items(variants=items.variants, subtasks=tuple(shuffled), tasks=items.tasks)
    for name in ("A", "P", "average"):
        np.testing.assert_allclose(
            stats_of(other, SUITE, name),
            stats_of(items, SUITE, name),
            rtol=1e-12,
            atol=1e-12,
        )
