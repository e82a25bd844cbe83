"""Hypothesis strategies for lbnorm's inputs, in one place.

Every generated table takes its column types from :mod:`lbnorm.core.schemas` (long
scores: :data:`~lbnorm.core.schemas.SCORES`), and every generated suite goes through
the real suite parser, so the strategies follow the contract when it changes.

* building blocks: :data:`raw_scores`, :data:`lower_bounds`, :data:`num_choices`,
  :data:`model_names`, :data:`precisions`, :data:`revisions`, the option
  ``Literal`` s (:data:`missing_policies`, :data:`unknown_policies`),
  :data:`sample_values`, :data:`json_values`;
* suites: :func:`suites` (small, valid, through :func:`lbnorm.suites.parse_suite`);
* variants and scores: :func:`variant_keys`, :func:`score_tables` (long format,
  optional columns, nulls, dictionary-encoded text), :func:`suites_with_scores`,
  :func:`leaderboards` (a complete openllm-v2 board as pandas, for the public API);
* batches: :func:`batches` (a table cut into :class:`~lbnorm.core.schemas.Batch` es),
  :func:`shuffled`;
* metadata: :func:`metadata_tables`;
* battles: :func:`battle_sets` (and :func:`make_battles`, which builds them).

Tests import them as ``from strategies import ...`` (``tests`` is on pytest's
``pythonpath``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, get_args

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import strategies as st

from lbnorm.core.options import ExtraColumns, MissingPolicy, UnknownSubtasks
from lbnorm.core.schemas import KEY_COLUMNS, SCORES, Batch
from lbnorm.ratings.battles import Battles
from lbnorm.suites import Suite, load_suite, parse_suite

__all__ = [
    "OPENLLM_V2",
    "batches",
    "battle_sets",
    "chat_templates",
    "extra_column_policies",
    "json_scalars",
    "json_values",
    "leaderboards",
    "lower_bounds",
    "make_battles",
    "metadata_tables",
    "missing_policies",
    "model_names",
    "num_choices",
    "precisions",
    "raw_scores",
    "revisions",
    "sample_values",
    "score_tables",
    "shuffled",
    "suites",
    "suites_with_scores",
    "unknown_policies",
    "variant_keys",
]

#: The default suite, loaded once.
OPENLLM_V2 = load_suite("openllm-v2")

# --- building blocks ---------------------------------------------------------------

#: A raw score: a fraction in [0, 1] (``SCORES.raw_score``).
raw_scores = st.floats(0.0, 1.0, allow_nan=False)
#: A random baseline a suite may hold, [0, 0.95].
lower_bounds = st.floats(0.0, 0.95)
#: Answer choices of a subtask (0: generative, bound 0).
num_choices = st.sampled_from([0, 2, 3, 4, 10, 19])
#: Model names: any non-empty text (the empty name is a validation failure).
model_names = st.text(min_size=1, max_size=8)
precisions = st.sampled_from(["bfloat16", "float16", ""])
revisions = st.sampled_from(["", "main", "0f1e2d3c"])
chat_templates = st.booleans()
#: A standard error of a raw score (a mean of values in [0, 1]: at most 0.5).
stderrs = st.floats(0.0, 0.5)
#: The option ``Literal`` s, from :mod:`lbnorm.core.options`.
missing_policies: st.SearchStrategy[MissingPolicy] = st.sampled_from(
    get_args(MissingPolicy)
)
unknown_policies: st.SearchStrategy[UnknownSubtasks] = st.sampled_from(
    get_args(UnknownSubtasks)
)
extra_column_policies: st.SearchStrategy[ExtraColumns] = st.sampled_from(
    get_args(ExtraColumns)
)
#: One document's metric value in a per-sample file (``SAMPLES.value``): mostly
#: 0/1 (accuracies), sometimes a fraction.
sample_values = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0))

#: JSON values of every kind, including what Python's json module writes and orjson
#: refuses (NaN, Infinity) and integers beyond 64 bits.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.floats(min_value=0.0, max_value=1.0)
    | st.text(max_size=20)
    | st.sampled_from(["N/A", "0.5", "", "NaN", "true", "null"])
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)

# --- suites -------------------------------------------------------------------------

_BENCHMARK_NAMES = ["GPQA", "MUSR", "BBH", "IFEval", "MATH Lvl 5", "ARC", "Hella"]
_SUBTASK_NAMES = ["main", "diamond", "navigate", "team_allocation", "x", "y"]


@st.composite
def suites(draw: st.DrawFn, *, max_benchmarks: int = 3, max_subtasks: int = 3) -> Suite:
    """A small valid suite, written as TOML and read by the real parser.

    Benchmarks mix both aggregations (a pooled one has one bound and positive
    ``n_samples``), bounds from ``num_choices`` or given, and weights.
    """
    names = draw(
        st.lists(
            st.sampled_from(_BENCHMARK_NAMES),
            min_size=1,
            max_size=max_benchmarks,
            unique=True,
        )
    )
    lines = ['name = "generated"']
    for name in names:
        is_pooled = draw(st.booleans())
        subtasks = draw(
            st.lists(
                st.sampled_from(_SUBTASK_NAMES),
                min_size=1,
                max_size=max_subtasks,
                unique=True,
            )
        )
        shared_choices = draw(num_choices)
        cells = []
        for subtask in subtasks:
            choices = shared_choices if is_pooled else draw(num_choices)
            cell = f'name = "{subtask}", num_choices = {choices}'
            if not is_pooled and draw(st.booleans()):
                cell += f", lower_bound = {draw(lower_bounds)!r}"
            if is_pooled or draw(st.booleans()):
                cell += f", n_samples = {draw(st.integers(1, 1000))}"
            cells.append(f"  {{ {cell} }},")
        aggregation = "pool-then-normalize" if is_pooled else "normalize-then-average"
        weight = draw(st.sampled_from([1.0, 0.5, 2.0, 3.25]))
        lines += [
            "[[benchmarks]]",
            f'name = "{name}"',
            f'aggregation = "{aggregation}"',
            f"weight = {weight!r}",
            "subtasks = [",
            *cells,
            "]",
        ]
    return parse_suite("\n".join(lines).encode(), source="generated.toml")


# --- variants and scores ------------------------------------------------------------

#: Optional SCORES columns a generated table may carry, and their "unknown" value.
_OPTIONAL_KEYS = {"precision": "", "revision": "", "chat_template": False}


@st.composite
def variant_keys(
    draw: st.DrawFn,
    *,
    min_size: int = 1,
    max_size: int = 6,
    columns: Sequence[str] = KEY_COLUMNS,
) -> list[tuple[str, str, str, bool]]:
    """Distinct model variants ``(model, precision, revision, chat_template)``.

    A key column left out of `columns` holds its default ('' or False) for all.
    """
    parts = {
        "precision": precisions,
        "revision": revisions,
        "chat_template": chat_templates,
    }
    keys = draw(
        st.lists(
            st.tuples(
                model_names,
                *(
                    parts[name] if name in columns else st.just(_OPTIONAL_KEYS[name])
                    for name in ("precision", "revision", "chat_template")
                ),
            ),
            min_size=min_size,
            max_size=max_size,
            unique=True,
        )
    )
    return [(str(m), str(p), str(r), bool(c)) for m, p, r, c in keys]


def _subtask_sizes(suite: Suite) -> list[int]:
    return [
        subtask.n_samples or 0
        for benchmark in suite.benchmarks
        for subtask in benchmark.subtasks
    ]


@st.composite
def score_tables(
    draw: st.DrawFn,
    suite: Suite,
    *,
    min_variants: int = 1,
    max_variants: int = 6,
    complete: bool = False,
    optional_columns: bool = True,
    dictionary: bool | None = None,
) -> pa.Table:
    """Long-format scores for a suite, typed by :data:`lbnorm.core.schemas.SCORES`.

    Args:
        draw: Hypothesis' draw.
        suite: The suite whose (benchmark, subtask) pairs are scored.
        min_variants: Fewest model variants.
        max_variants: Most model variants.
        complete: Every variant has every subtask (else a drawn subset, maybe
            none of a benchmark, at least one row in all).
        optional_columns: Draw which optional columns appear (precision,
            revision, chat_template, metric, stderr and n_samples, the last two
            with nulls); False: only the required ones.
        dictionary: Dictionary-encode the text columns (as Parquet hands them
            over); None: drawn.

    Returns:
        Rows variant by variant, subtasks in suite order (see :func:`shuffled`).
    """
    optional = (
        "precision",
        "revision",
        "chat_template",
        "metric",
        "stderr",
        "n_samples",
    )
    present = (
        [name for name in optional if draw(st.booleans())] if optional_columns else []
    )
    keys = draw(
        variant_keys(
            min_size=min_variants,
            max_size=max_variants,
            columns=["model", *present],
        )
    )
    pairs = [(b.name, s.name) for b in suite.benchmarks for s in b.subtasks]
    sizes = _subtask_sizes(suite)
    rows: list[tuple[int, int]] = []  # (variant, subtask)
    for variant in range(len(keys)):
        if complete:
            chosen = list(range(len(pairs)))
        else:
            chosen = sorted(
                draw(st.sets(st.integers(0, len(pairs) - 1), max_size=len(pairs)))
            )
        rows += [(variant, subtask) for subtask in chosen]
    if not rows:  # at least one score
        rows = [(0, draw(st.integers(0, len(pairs) - 1)))]
    n_rows = len(rows)
    variant_of = [keys[v] for v, _ in rows]

    def cells(values: st.SearchStrategy[Any]) -> list[Any]:
        return draw(st.lists(values, min_size=n_rows, max_size=n_rows))

    columns: dict[str, Any] = {
        "model": lambda: [key[0] for key in variant_of],
        "precision": lambda: [key[1] for key in variant_of],
        "revision": lambda: [key[2] for key in variant_of],
        "chat_template": lambda: [key[3] for key in variant_of],
        "benchmark": lambda: [pairs[s][0] for _, s in rows],
        "subtask": lambda: [pairs[s][1] for _, s in rows],
        "metric": lambda: cells(st.sampled_from(["", "acc_norm,none", "f1,none"])),
        "raw_score": lambda: cells(raw_scores),
        "stderr": lambda: cells(st.none() | stderrs),
        # within what the exact sums assume: up to twice the suite's sample size
        "n_samples": lambda: [
            draw(st.none() | st.integers(1, 2 * max(sizes[s], 1))) for _, s in rows
        ],
    }
    wanted = {"model", "benchmark", "subtask", "raw_score", *present}
    table = pa.table(
        {
            field.name: pa.array(columns[field.name](), field.type)
            for field in SCORES
            if field.name in wanted
        }
    )
    if dictionary is None:
        dictionary = draw(st.booleans())
    if dictionary:
        for index, field in enumerate(table.schema):
            if pa.types.is_string(field.type):
                table = table.set_column(
                    index, field.name, table.column(index).dictionary_encode()
                )
    return table


@st.composite
def suites_with_scores(
    draw: st.DrawFn, *, complete: bool = False, max_variants: int = 6
) -> tuple[Suite, pa.Table]:
    """A generated suite and scores for it."""
    suite = draw(suites())
    table = draw(score_tables(suite, complete=complete, max_variants=max_variants))
    return suite, table


@st.composite
def leaderboards(draw: st.DrawFn, *, max_models: int = 6) -> pd.DataFrame:
    """A complete openllm-v2 leaderboard as pandas: 1-6 models, any scores.

    Columns ``model``, ``precision``, ``benchmark``, ``subtask``, ``raw_score``;
    model names are unique, so (model, precision) keys a row of the board.
    """
    pairs = [(b.name, s.name) for b in OPENLLM_V2.benchmarks for s in b.subtasks]
    n_models = draw(st.integers(1, max_models))
    models = draw(
        st.lists(model_names, min_size=n_models, max_size=n_models, unique=True)
    )
    chosen = draw(st.lists(precisions, min_size=n_models, max_size=n_models))
    raws = draw(
        st.lists(
            raw_scores, min_size=n_models * len(pairs), max_size=n_models * len(pairs)
        )
    )
    return pd.DataFrame(
        {
            # object arrays: numpy str arrays drop trailing NULs
            "model": np.repeat(np.array(models, dtype=object), len(pairs)),
            "precision": np.repeat(np.array(chosen, dtype=object), len(pairs)),
            "benchmark": [b for b, _ in pairs] * n_models,
            "subtask": [s for _, s in pairs] * n_models,
            "raw_score": raws,
        }
    )


# --- batches ------------------------------------------------------------------------


@st.composite
def batches(
    draw: st.DrawFn,
    table: pa.Table,
    *,
    source: str = "scores.parquet",
    max_cuts: int = 4,
) -> list[Batch]:
    """`table` cut into consecutive batches (slices: Arrow offsets), rows numbered."""
    n_rows = table.num_rows
    cuts = (
        sorted(draw(st.sets(st.integers(1, n_rows - 1), max_size=max_cuts)))
        if n_rows > 1
        else []
    )
    bounds = [0, *cuts, n_rows]
    return [
        Batch(
            table=table.slice(start, stop - start), source=source, first_row=start + 1
        )
        for start, stop in itertools.pairwise(bounds)
    ]


@st.composite
def shuffled(draw: st.DrawFn, table: pa.Table) -> pa.Table:
    """`table`'s rows in a drawn order."""
    seed = draw(st.integers(0, 2**32 - 1))
    order = np.random.default_rng(seed).permutation(table.num_rows)
    return table.take(pa.array(order))


# --- metadata -----------------------------------------------------------------------


@st.composite
def metadata_tables(draw: st.DrawFn, models: Sequence[str]) -> pa.Table:
    """A model metadata table for some of `models` (at least one), keyed by ``model``.

    Free columns as the demo's: ``type``, ``params_b`` (-1: unknown) and
    ``flagged`` (with nulls).
    """
    chosen = draw(
        st.lists(st.sampled_from(sorted(set(models))), min_size=1, unique=True)
    )
    n_rows = len(chosen)

    def column(values: st.SearchStrategy[Any]) -> list[Any]:
        return draw(st.lists(values, min_size=n_rows, max_size=n_rows))

    return pa.table(
        {
            "model": pa.array(chosen, pa.string()),
            "type": pa.array(
                column(st.sampled_from(["pretrained", "chat", "merge"])), pa.string()
            ),
            "params_b": pa.array(
                column(st.just(-1.0) | st.floats(0.1, 500.0)), pa.float64()
            ),
            "flagged": pa.array(column(st.none() | st.booleans()), pa.bool_()),
        }
    )


# --- battles ------------------------------------------------------------------------


def make_battles(
    a: Any,
    b: Any,
    outcome: Any,
    *,
    k: int | None = None,
    count: Any = None,
    tstamp: Any = None,
    aggregated: bool = False,
) -> Battles:
    """Battles among models ``m00``, ``m01``, ... from seat codes and outcomes."""
    a, b = np.asarray(a, np.int32), np.asarray(b, np.int32)
    k = k if k is not None else int(max(a.max(), b.max())) + 1
    return Battles(
        models=np.array([f"m{i:02d}" for i in range(k)]),
        model_a=a,
        model_b=b,
        outcome=np.asarray(outcome, np.int8),
        count=np.ones(len(a), np.int64)
        if count is None
        else np.asarray(count, np.int64),
        tstamp=None if tstamp is None else np.asarray(tstamp, np.float64),
        is_aggregated=aggregated,
    )


@st.composite
def battle_sets(draw: st.DrawFn) -> tuple[Battles, int]:
    """Random battles among k models, plus a ring of ties so ratings exist."""
    k = draw(st.integers(2, 6))
    extra = draw(
        st.lists(
            st.tuples(st.integers(0, k - 1), st.integers(1, k - 1), st.integers(0, 2)),
            min_size=0,
            max_size=40,
        )
    )
    ring = [(i, 1, 1) for i in range(k)]  # i ties i+1 (mod k)
    a = [i for i, _, _ in ring + extra]
    b = [(i + step) % k for i, step, _ in ring + extra]
    outcome = [o for _, _, o in ring + extra]
    return make_battles(a, b, outcome, k=k), k
