"""The data contract: every table lbnorm reads or writes, as pyarrow schemas.

Nothing else in the package spells out a table's columns. Readers hand scores on
as :class:`Batch` es of :data:`SCORES` columns; the writer conforms each output to
its schema before writing. Each field carries a ``doc`` in its metadata, written
into the Parquet files for analysts.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from lbnorm.core.errors import SchemaMismatchError, shown_list

__all__ = [
    "BENCHMARK_SCORES",
    "INPUT_FILES",
    "KEY_COLUMNS",
    "OPTIONAL_SCORE_DEFAULTS",
    "PAIRED",
    "PAIRWISE_SCORES",
    "RATE_ROLE",
    "RATINGS",
    "REQUIRED_SCORE_COLUMNS",
    "SAMPLES",
    "SCORES",
    "SUBTASK_SCORES",
    "TEXT",
    "WIN_RATES",
    "Batch",
    "benchmark_columns",
    "conform",
    "is_rate_field",
    "leaderboard_schema",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """Scores from one source, in the :data:`SCORES` contract: what readers hand on.

    Attributes:
        table: Contract columns (optional ones may be absent; string columns may be
            dictionary-encoded), kept extra columns, and optionally ``_row``: a
            per-row locator for messages (a row number or a results key).
        source: The file the rows came from (when there is no ``source`` column).
        first_row: Row number of the table's first row in its file (1-based), used
            when there is no ``_row`` column.
    """

    table: pa.Table
    source: str
    first_row: int = 1


def _field(
    name: str, type_: pa.DataType, doc: str, *, nullable: bool = False
) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


#: A model variant: the Open LLM Leaderboard keys a row by all four.
KEY_COLUMNS: tuple[str, ...] = ("model", "precision", "revision", "chat_template")

#: Repeated text in long outputs is stored dictionary-encoded (Parquet keeps it so,
#: and pandas, polars and DuckDB read it back as categories or plain strings).
TEXT = pa.dictionary(pa.int32(), pa.string())
_COLUMNS_SHOWN = 12  # column names a schema message lists


def _key_fields(text: pa.DataType) -> list[pa.Field]:
    return [
        _field("model", text, "Model name, usually `org/name`."),
        _field("precision", text, "Weights' precision (e.g. bfloat16); '' if unknown."),
        _field("revision", text, "Model revision (commit sha); '' if unknown."),
        _field("chat_template", pa.bool_(), "Whether a chat template was applied."),
    ]


_KEY_FIELDS = _key_fields(pa.string())

#: Long-format raw scores: one row per (model variant, benchmark, subtask).
SCORES = pa.schema(
    [
        *_KEY_FIELDS,
        _field("benchmark", pa.string(), "Benchmark name as the suite spells it."),
        _field("subtask", pa.string(), "Subtask name as the suite spells it."),
        _field("metric", pa.string(), "Metric key the score came from; '' if unknown."),
        _field("raw_score", pa.float64(), "Raw score as a fraction in [0, 1]."),
        _field("stderr", pa.float64(), "Standard error of raw_score.", nullable=True),
        _field(
            "n_samples", pa.int64(), "Items the score was computed on.", nullable=True
        ),
        _field("source", pa.string(), "File (or frame) the row was read from."),
    ]
)

#: Columns a long-format input must have; the rest take the defaults below.
REQUIRED_SCORE_COLUMNS: tuple[str, ...] = ("model", "benchmark", "subtask", "raw_score")

#: Values for optional columns a long-format input leaves out.
OPTIONAL_SCORE_DEFAULTS: dict[str, object] = {
    "precision": "",
    "revision": "",
    "chat_template": False,
    "metric": "",
    "stderr": None,
    "n_samples": None,
}

#: Per-sample results (an input): one row per (model variant, task, metric,
#: document), or per item of a list-valued metric. ``precision``, ``revision``,
#: ``chat_template`` and ``item`` may be left out (defaults '', '', false, null);
#: ``lbnorm.readers.samples`` aggregates the rows into :data:`SCORES`.
SAMPLES = pa.schema(
    [
        *_KEY_FIELDS,
        _field("task", pa.string(), "Harness task, e.g. leaderboard_bbh_navigate."),
        _field(
            "metric",
            pa.string(),
            "Metric and filter as the suite names them, e.g. acc_norm,none.",
        ),
        _field("doc_id", pa.int64(), "Document id within the task (for tracing)."),
        _field(
            "item",
            pa.int32(),
            "Position within a list-valued metric's per-document list (IFEval "
            "inst_level_*: one row per instruction, 0 first); null or absent for a "
            "metric with one value per document.",
            nullable=True,
        ),
        _field(
            "value", pa.float64(), "The metric's value (booleans and integers allowed)."
        ),
    ]
)

#: The input catalog: one row per file found in the inputs, read or skipped
#: (:attr:`lbnorm.readers.Inputs.catalog`). A reader may add columns after these
#: (the parse cache adds ``cache``).
INPUT_FILES = pa.schema(
    [
        _field("path", pa.string(), "The file, as given or found under a directory."),
        _field(
            "format",
            pa.string(),
            "csv, jsonl, parquet, lm-eval-harness (a results file: lm-evaluation-"
            "harness, Open LLM Leaderboard v1 or lighteval), lm-eval-samples, "
            "sample-table, alpacaeval (an AlpacaEval annotations.json or "
            "model_outputs.json), battles (pairwise votes for a suite's bradley-terry "
            "benchmark; rows: battles read), model-map (arena names to models), or "
            "skipped (found in a directory but not an input).",
        ),
        _field("sha256", pa.string(), "Hex sha256 of the bytes read; '' if skipped."),
        _field("bytes", pa.int64(), "File size in bytes."),
        _field("rows", pa.int64(), "Scores taken from the file."),
        _field(
            "superseded_by",
            pa.string(),
            "The newer file that gave every score this one holds; null if none.",
            nullable=True,
        ),
        _field(
            "n_ignored", pa.int64(), "Result entries or rows the suite does not use."
        ),
        _field(
            "tasks",
            pa.list_(pa.string()),
            "Results and sample files: the tasks whose scores were taken from this "
            "file (a v1 tree takes each task from the newest file that has it); "
            "null for score tables.",
            nullable=True,
        ),
        _field("reason", pa.string(), "Why a file gave no scores ('' if it did)."),
    ]
)

#: Output: one row per (model variant, subtask) present in the inputs.
SUBTASK_SCORES = pa.schema(
    [
        *_key_fields(TEXT),
        _field("benchmark", TEXT, "Benchmark name."),
        _field("subtask", TEXT, "Subtask name."),
        _field("metric", TEXT, "Metric key the score came from."),
        _field("raw_score", pa.float64(), "Raw score, fraction in [0, 1]."),
        _field(
            "lower_bound",
            pa.float64(),
            "Random baseline: 1/num_choices, 0 if generative.",
        ),
        _field(
            "normalized_score",
            pa.float64(),
            "max(0, (raw - lower_bound) / (1 - lower_bound)) * 100, in [0, 100].",
        ),
        _field(
            "is_clipped", pa.bool_(), "raw_score was below lower_bound (clipped to 0)."
        ),
        _field("stderr", pa.float64(), "Standard error of raw_score.", nullable=True),
        _field(
            "n_samples", pa.int64(), "Items the score was computed on.", nullable=True
        ),
        _field("source", TEXT, "File the row was read from."),
    ]
)

#: Output: one row per (model variant, benchmark) with at least one subtask.
BENCHMARK_SCORES = pa.schema(
    [
        *_key_fields(TEXT),
        _field("benchmark", TEXT, "Benchmark name."),
        _field(
            "raw_score",
            pa.float64(),
            "Raw value as the leaderboard shows it: plain mean of the subtasks' raw "
            "scores, or their sample-weighted mean for pool-then-normalize benchmarks.",
        ),
        _field(
            "normalized_score",
            pa.float64(),
            "Benchmark score 0-100 by the suite's rule; null if subtasks are missing.",
            nullable=True,
        ),
        _field(
            "stderr",
            pa.float64(),
            "Standard error of normalized_score (0-100 scale; clipped subtasks as a "
            "censored normal); null if a subtask's is unknown.",
            nullable=True,
        ),
        _field(
            "raw_stderr",
            pa.float64(),
            "Standard error of raw_score: lm-evaluation-harness's pooled_sample_stderr "
            "for pool-then-normalize benchmarks; null if a subtask's is unknown.",
            nullable=True,
        ),
        _field(
            "n_stderr_estimated",
            pa.int32(),
            "Subtasks whose stderr the input lacked, estimated as binomial "
            "sqrt(p (1 - p) / (n - 1)) from the metric's sample size.",
        ),
        _field(
            "has_other_sizes",
            pa.bool_(),
            "Pooled with sample sizes other than the suite's (the input's n_samples, "
            "e.g. a --limit run): not comparable to full runs.",
        ),
        _field("n_subtasks", pa.int32(), "Subtasks present."),
        _field("n_subtasks_expected", pa.int32(), "Subtasks the suite defines."),
        _field("is_complete", pa.bool_(), "All subtasks present."),
    ]
)


#: Output of ``lbnorm arena`` (``ratings.parquet``): one row per model, best first.
RATINGS = pa.schema(
    [
        _field("model", pa.string(), "Model name as the battles spell it."),
        _field(
            "rating",
            pa.float64(),
            "Rating on the Elo scale (400 points = odds of 10 to 1); unanchored ratings have mean 1000.",
        ),
        _field(
            "rating_lower",
            pa.float64(),
            "2.5th percentile of the rating over bootstrap rounds; null without --bootstrap; -inf if the model never won in over 2.5% of rounds.",
            nullable=True,
        ),
        _field(
            "rating_upper",
            pa.float64(),
            "97.5th percentile of the rating over bootstrap rounds; null without --bootstrap; inf if the model never lost in over 2.5% of rounds.",
            nullable=True,
        ),
        _field(
            "rank",
            pa.int64(),
            "1 + the number of models with a strictly higher rating.",
        ),
        _field(
            "rank_upper_bound",
            pa.int64(),
            "The Arena's rank (UB): 1 + the number of models whose rating_lower is above this model's rating_upper (the best rank the intervals allow); null without --bootstrap.",
            nullable=True,
        ),
        _field("n_battles", pa.int64(), "Battles the model played (either seat)."),
        _field("n_wins", pa.int64(), "Battles it won."),
        _field("n_ties", pa.int64(), "Battles it tied (tie or tie (bothbad))."),
        _field(
            "win_rate",
            pa.float64(),
            "Observed score as a fraction: (wins + ties / 2) / battles with --ties half; wins / decisive battles with --ties drop.",
            nullable=True,
        ),
    ]
)

#: Output of ``lbnorm arena`` (``win_rates.parquet``): the predicted win rate of
#: every ordered pair of different models (long form, both sides in rating order).
WIN_RATES = pa.schema(
    [
        _field("model_a", pa.string(), "The model whose chance is given."),
        _field("model_b", pa.string(), "Its opponent."),
        _field(
            "win_rate",
            pa.float64(),
            "Predicted probability that model_a beats model_b (a tie counting half): 1 / (1 + 10 ** ((rating_b - rating_a) / 400)).",
        ),
    ]
)

#: A pairwise benchmark's raw scores for the leaderboard (see
#: :func:`lbnorm.ratings.pairwise_scores.score_against_reference`).
PAIRWISE_SCORES = pa.schema(
    [
        _field("model", pa.string(), "Model name, mapped to the results' spelling."),
        _field(
            "raw_score",
            pa.float64(),
            "Predicted probability of beating the reference model, a fraction in [0, 1] (0.5 for the reference).",
        ),
        _field("n_samples", pa.int64(), "Battles the model played."),
    ]
)


def _side_fields(side: str, which: str) -> list[pa.Field]:
    return [
        _field(f"model_{side}", TEXT, f"The {which} model of the pair (its name)."),
        _field(f"precision_{side}", TEXT, "Its precision ('' if unknown)."),
        _field(f"revision_{side}", TEXT, "Its revision ('' if unknown)."),
        _field(
            f"chat_template_{side}", pa.bool_(), "Whether a chat template was applied."
        ),
        _field(
            f"rank_{side}",
            pa.int64(),
            f"The {which} model's rank at the level (by the average, or by the "
            "benchmark's score; ties share the smallest rank).",
        ),
    ]


#: Output of ``lbnorm run --paired`` (``paired.parquet``): every pair of variants
#: adjacent in rank, by the average and by each benchmark (docs/paired.md).
PAIRED = pa.schema(
    [
        _field(
            "level",
            TEXT,
            "What is compared: 'average', a benchmark's name, or 'benchmark/subtask'.",
        ),
        *_side_fields("a", "higher-ranked"),
        *_side_fields("b", "lower-ranked"),
        _field(
            "difference",
            pa.float64(),
            "score_a - score_b in normalized points (0-100), each score computed by "
            "the suite's rule from the items both models have; null without them.",
            nullable=True,
        ),
        _field(
            "stderr",
            pa.float64(),
            "Paired standard error of difference (the delta method through the "
            "suite's rule; documents matched, clusters counted with C/(C-1)).",
            nullable=True,
        ),
        _field(
            "stderr_unpaired",
            pa.float64(),
            "sqrt(se_a^2 + se_b^2) with each model's standard error as the "
            "leaderboard reports it: what the difference's error would be, were "
            "the two independent.",
            nullable=True,
        ),
        _field(
            "stderr_a",
            pa.float64(),
            "Model a's own standard error at the level, from the items both have "
            "(the same rule and clusters).",
            nullable=True,
        ),
        _field("stderr_b", pa.float64(), "Model b's, likewise.", nullable=True),
        _field(
            "p_value",
            pa.float64(),
            "Two-sided p-value of difference, normal: 2 (1 - Phi(|difference| / stderr)).",
            nullable=True,
        ),
        _field(
            "p_adjusted",
            pa.float64(),
            "p_value adjusted across the whole table (Holm's step-down rule, or "
            "Benjamini-Hochberg's with --paired-adjust bh).",
            nullable=True,
        ),
        _field(
            "separable",
            pa.bool_(),
            "p_adjusted below the level (--paired-alpha, 0.05); null where unknown.",
            nullable=True,
        ),
        _field(
            "group_a",
            pa.int64(),
            "Model a's group of statistically tied models at the level: consecutive "
            "models no test separates share a group (1 = the top group).",
        ),
        _field(
            "group_b",
            pa.int64(),
            "Model b's group: group_a, or group_a + 1 where the pair is separable.",
        ),
        _field("n_items", pa.int64(), "Items (documents, list positions) both have."),
        _field(
            "n_items_unmatched",
            pa.int64(),
            "Items only one of the two has (not compared; all of them when a model "
            "has no per-sample data).",
        ),
    ]
)


def benchmark_columns(names: Iterable[object]) -> list[str]:
    """Return the benchmark columns of a wide leaderboard: ``X`` where ``X Raw`` exists.

    Works on lbnorm's leaderboard and on the published Open LLM Leaderboard table;
    the columns keep their order (a suite's order).

    Examples:
        >>> benchmark_columns(["model", "GPQA", "GPQA Raw", "Average"])
        ['GPQA']
    """
    columns = [str(name) for name in names]
    present = set(columns)
    return [
        name
        for name in columns
        if f"{name} Raw" in present and not name.endswith(" Raw")
    ]


#: The field metadata ``role`` of a leaderboard column the suite's board computes.
RATE_ROLE = "rate"


def is_rate_field(field: pa.Field) -> bool:
    """Whether a leaderboard column is one of its suite's board rates (not metadata).

    Examples:
        >>> is_rate_field(leaderboard_schema(["A"], rates=["win_rate"]).field("win_rate"))
        True
    """
    return (field.metadata or {}).get(b"role") == RATE_ROLE.encode()


#: A leaderboard's columns after the rank: the average and its coverage.
_AVERAGE_FIELDS = (
    _field(
        "average",
        pa.float64(),
        "Weighted mean of the benchmark scores (full precision).",
        nullable=True,
    ),
    _field(
        "average_stderr",
        pa.float64(),
        "Standard error of average: sqrt(sum(w^2 se^2)) / sum(w) over the "
        "benchmarks; null if a benchmark's is unknown.",
        nullable=True,
    ),
    _field("n_benchmarks", pa.int32(), "Benchmarks with a complete score."),
    _field("n_benchmarks_expected", pa.int32(), "Benchmarks in the suite."),
    _field("is_complete", pa.bool_(), "Every benchmark has a complete score."),
)
#: A leaderboard's columns per benchmark: name and doc, ``{}`` the benchmark.
_BENCHMARK_FIELDS = (
    ("{}", "{} normalized score, 0-100."),
    ("{} Raw", "{} raw value, 0-1."),
    ("{} stderr", "Standard error of {} (0-100); null if unknown."),
)


def leaderboard_schema(
    benchmarks: Sequence[str],
    *,
    rates: Sequence[str] = (),
    rank_doc: str | None = None,
) -> pa.Schema:
    """Return the leaderboard schema for a suite's benchmarks, in suite order.

    Args:
        benchmarks: Benchmark names; each gives a normalized column `<name>` and a
            raw column `<name> Raw`, as the Open LLM Leaderboard names them.
        rates: The suite's board's rate columns (win rates, Borda points), last.
        rank_doc: How the suite's board ranks, for the rank column's doc (None:
            by the average, ties sharing the smallest rank).

    Returns:
        The schema: keys, rank, average, coverage, the benchmark columns, then
        the rate columns.

    Examples:
        >>> leaderboard_schema(["GPQA"]).names[-3:]
        ['GPQA', 'GPQA Raw', 'GPQA stderr']
    """
    per_benchmark = [
        _field(column.format(name), pa.float64(), doc.format(name), nullable=True)
        for name in benchmarks
        for column, doc in _BENCHMARK_FIELDS
    ]
    return pa.schema(
        [
            *_KEY_FIELDS,
            _field(
                "rank",
                pa.int64(),
                rank_doc
                or "1 = best average; ties share the smallest rank (1, 2, 2, 4); null "
                "if the model is not ranked (incomplete under missing='exclude').",
                nullable=True,
            ),
            *_AVERAGE_FIELDS,
            *per_benchmark,
            *(
                pa.field(
                    name,
                    pa.float64(),
                    nullable=True,
                    metadata={
                        "doc": f"{name}: a rate the suite's board computes across "
                        "models (win rate in [0, 1], or Borda points); null if none.",
                        "role": RATE_ROLE,
                    },
                )
                for name in rates
            ),
        ]
    )


def conform(table: pa.Table, schema: pa.Schema, *, source: str) -> pa.Table:
    """Return `table` with exactly the columns, order and types of `schema`.

    Args:
        table: The table to check.
        schema: The schema it must fit.
        source: Where the table came from, for the error message.

    Returns:
        The table, columns selected and cast to `schema` (field docs attached).

    Raises:
        SchemaMismatchError: A column is missing, or a value does not fit its type.
    """
    names = schema.names  # both lists built once: a suite can have 16,000 benchmarks
    present = set(table.column_names)
    if missing := [name for name in names if name not in present]:
        msg = (
            f"{source}: missing column(s) {shown_list(missing, _COLUMNS_SHOWN)}; found "
            f"{shown_list(table.column_names, _COLUMNS_SHOWN)}.\n"
            f"Hint: expected columns are {shown_list(names, _COLUMNS_SHOWN)} (see lbnorm/core/schemas.py)."
        )
        raise SchemaMismatchError(msg)
    try:
        return table.select(names).cast(schema)
    except (pa.ArrowException, ValueError) as exc:
        msg = (
            f"{source}: values do not fit the expected types: {exc}.\n"
            f"Hint: check the column types against {shown_list(names, _COLUMNS_SHOWN)} (lbnorm/core/schemas.py)."
        )
        raise SchemaMismatchError(msg) from exc
