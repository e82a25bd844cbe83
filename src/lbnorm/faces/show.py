"""Terminal views of an output: the top N with filters, and variants side by side.

:func:`select_leaderboard` filters and sorts a leaderboard frame and
:func:`format_leaderboard` prints it; :func:`find_variants`,
:func:`compare_variants` and :func:`format_comparison` put a few variants next
to each other per benchmark and subtask. All take and return frames (read them
with :meth:`lbnorm.output.reader.Output.frame`); tables are drawn by
:func:`lbnorm.faces.terminal.format_table`.

Filters are ``--where``'s one grammar (:mod:`lbnorm.ratings.where`, which
arena's battles take too): ``COLUMN OP VALUE`` with OP one of ``= != < <= > >=``
or ``~`` (case-insensitive regular expression), a bare flag, ``not`` a flag, or
``COLUMN in (V1, V2)``; e.g. ``params_b<10``, ``type~chat``, ``flagged``,
``type_code=chatmodels``, ``submission_date>=2025-01-01``. Anything more is a
job for ``lbnorm query``.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from lbnorm.core.errors import OptionsError
from lbnorm.core.schemas import KEY_COLUMNS, benchmark_columns
from lbnorm.faces.terminal import format_table, printable
from lbnorm.ratings.where import Where, WhereOp, column_mask, parse_where
from lbnorm.suites import match_benchmark  # the one rule for benchmark names

if TYPE_CHECKING:
    from lbnorm.output.reader import Output

__all__ = [
    "compare_variants",
    "find_variants",
    "flag_condition",
    "format_comparison",
    "format_leaderboard",
    "match_benchmark",
    "parse_where",
    "passing",
    "select_leaderboard",
    "with_tied_groups",
]

_SHOWN = 5


def passing(frame: pd.DataFrame, conditions: Sequence[Where]) -> npt.NDArray[np.bool_]:
    """Which rows of `frame` meet every condition (all rows when there is none).

    The conditions are ``--where``'s (:func:`lbnorm.ratings.where.parse_where`,
    the one grammar arena's battles take too); a null never matches.

    Raises:
        OptionsError: A condition names no column of the frame, or does not fit
            its column (a usage error: exit 2).

    Examples:
        >>> board = pd.DataFrame({"model": ["a/x", "b/y"], "params_b": [7.0, 70.0]})
        >>> passing(board, [parse_where("params_b<10")]).tolist()
        [True, False]
    """
    keep = np.ones(len(frame), dtype=bool)
    for condition in conditions:  # (a few conditions, each vectorized)
        if condition.column not in frame.columns:
            close = difflib.get_close_matches(
                condition.column, map(str, frame.columns), n=3
            )
            msg = (
                f"--where {condition.text!r}: no column {condition.column!r}"
                + (f"; did you mean {close}?" if close else ".")
                + f"\nHint: filter on one of {_filterable(frame)}."
            )
            raise OptionsError(msg)
        column = pa.Array.from_pandas(frame[condition.column])
        mask = column_mask(column, condition, error=OptionsError)
        keep &= np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
    return keep


def flag_condition(column: str, op: WhereOp, value: str, *, text: str) -> Where:
    """The condition a flag of its own asks (``--model``: ``~``, ``--precision``: ``==``).

    Examples:
        >>> flag_condition("model", "~", "qwen", text="model~qwen").values
        ('qwen',)
    """
    return Where(column=column, op=op, values=(value,), texts=(value,), text=text)


def select_leaderboard(
    leaderboard: pd.DataFrame,
    *,
    filters: Sequence[Where] = (),
    model: str | None = None,
    precision: str | None = None,
    benchmark: str | None = None,
    top: int | None = 20,
) -> pd.DataFrame:
    """Filter a leaderboard and keep its best rows.

    Args:
        leaderboard: The leaderboard, best first.
        filters: Conditions every row must meet.
        model: Case-insensitive regular expression on the model name.
        precision: Keep this precision only.
        benchmark: Sort by this benchmark's score (highest first) instead of
            the leaderboard order; a unique prefix will do (``math``).
        top: Rows to keep; None keeps all.

    Returns:
        The selected rows; ``position`` (1-based) is prepended.

    Raises:
        OptionsError: A filter or the benchmark does not fit the leaderboard.

    Examples:
        >>> board = pd.DataFrame({"model": ["a/x", "b/y", "c/z"], "precision": ["bf16"] * 3,
        ...     "BBH": [50.0, 60.0, 40.0], "BBH Raw": [0.5, 0.6, 0.4]})
        >>> select_leaderboard(board, benchmark="bbh", top=2)["model"].tolist()
        ['b/y', 'a/x']
    """
    conditions = list(filters)
    if model is not None:
        conditions.append(flag_condition("model", "~", model, text=f"model~{model}"))
    if precision is not None:
        text = f"precision={precision}"
        conditions.append(flag_condition("precision", "==", precision, text=text))
    selected = leaderboard.loc[passing(leaderboard, conditions)]
    if benchmark is not None:
        name = match_benchmark(
            benchmark, benchmark_columns(leaderboard.columns), error=OptionsError
        )
        selected = selected.sort_values(
            name, ascending=False, na_position="last", kind="stable"
        )
    if top is not None:
        selected = selected.head(top)
    return selected.reset_index(drop=True).assign(
        position=np.arange(1, len(selected) + 1)
    )[["position", *leaderboard.columns]]


def format_leaderboard(
    selected: pd.DataFrame,
    *,
    benchmark: str | None = None,
    columns: Sequence[str] | None = None,
    name_width: int | None = 48,
    digits: int = 2,
    rates: Sequence[str] = (),
    has_average: bool = True,
) -> str:
    """Render selected leaderboard rows as an aligned text table.

    Default columns: position ``#`` (when it differs from ``rank``), ``rank``,
    ``tied`` (the group of statistically tied variants, for an output of
    ``lbnorm run --paired``), any group ranks, ``model``, ``precision``, ``params_b`` and ``size_class``
    (if present), ``average`` and each benchmark; sorted by one benchmark, that
    benchmark and its raw value instead of the others.

    Args:
        selected: Rows from :func:`select_leaderboard`.
        benchmark: The benchmark the rows are sorted by, if any.
        columns: Columns to show instead of the defaults.
        name_width: Longest model name shown (longer ones are shortened in the
            middle); None shows names whole.
        digits: Decimals shown; raw scores (``X Raw``, fractions in [0, 1])
            get two more.
        rates: The suite's board's rate columns, shown after the benchmarks.
        has_average: Whether the board has an average to show.

    Returns:
        The table.

    Raises:
        OptionsError: A requested column does not exist.
    """
    benchmarks = benchmark_columns(selected.columns)
    average = ["average"] if has_average else []
    if columns is None:
        groups = [c for c in selected.columns if str(c).startswith("rank_within_")]
        shown = [
            *(["position"] if _position_differs(selected) else []),
            "rank",
            *(["tied"] if "tied" in selected.columns else []),
            *groups,
            "model",
            "precision",
            *[c for c in ("params_b", "size_class") if c in selected.columns],
            *(
                [benchmark, f"{benchmark} Raw", *average]
                if benchmark
                else [*average, *benchmarks, *rates]
            ),
        ]
    else:
        if missing := [c for c in columns if c not in selected.columns]:
            msg = f"no column(s) {missing[:_SHOWN]} in the leaderboard.\nHint: choose from {_filterable(selected)}."
            raise OptionsError(msg)
        shown = list(columns)
    table = selected[shown]
    if name_width is not None and "model" in table.columns:
        table = table.assign(model=_shorten(table["model"].astype("str"), name_width))
    raw = {name: digits + 2 for name in table.columns if str(name).endswith(" Raw")}
    return format_table(
        table.rename(columns={"position": "#"}), digits=digits, column_digits=raw
    )


def with_tied_groups(board: pd.DataFrame, out: Output, level: str) -> pd.DataFrame:
    """The leaderboard and, for an output of ``run --paired``, each variant's ``tied`` group.

    The groups of `level` (:func:`lbnorm.analysis.paired.tied_groups`), as a
    ``tied`` column after ``rank``; the board as it is without ``paired.parquet``
    or where the level is not compared.
    """
    from lbnorm.analysis.paired import tied_groups  # (an output of run --paired)

    groups = tied_groups(out, level)
    if groups is None:
        return board
    keys = list(KEY_COLUMNS)
    tied = board[keys].merge(
        groups.astype({key: board[key].dtype for key in keys}),
        on=keys,
        how="left",
        validate="one_to_one",
    )["tied"]
    columns = list(board.columns)
    at = columns.index("rank") + 1
    return board.assign(tied=tied.to_numpy())[[*columns[:at], "tied", *columns[at:]]]


def find_variants(leaderboard: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Return the variants of the named models, in the order named.

    A name matches a model exactly, else as a unique case-insensitive substring;
    every variant (precision, revision, chat template) of a matched model is
    kept. Each gets a short ``label``: the name after ``org/``, plus precision or
    revision where needed to tell labels apart.

    Args:
        leaderboard: The leaderboard.
        names: Model names or unique parts of them.

    Returns:
        The matched rows, with ``label``.

    Raises:
        OptionsError: A name matches no model, or several.

    Examples:
        >>> board = pd.DataFrame({"model": ["org/a-7b", "org/b-7b"], "precision": ["bf16"] * 2,
        ...     "revision": [""] * 2, "chat_template": [True] * 2, "average": [2.0, 1.0]})
        >>> find_variants(board, ["b-7b", "org/a-7b"])["label"].tolist()
        ['b-7b', 'a-7b']
    """
    models = pd.Series(leaderboard["model"].unique()).astype("str")
    chosen: list[str] = []
    for name in names:  # the names a user typed, not rows
        if (models == name).any():
            chosen.append(name)
            continue
        found = models[models.str.contains(name, case=False, regex=False)].tolist()
        if len(found) == 1:
            chosen.append(found[0])
            continue
        close = found or difflib.get_close_matches(name, models.tolist(), n=_SHOWN)
        msg = (
            f"model {name!r} "
            + (
                f"matches {len(found)} models, e.g. {found[:_SHOWN]}."
                if found
                else "is not in this leaderboard"
                + (f"; did you mean {close}?" if close else ".")
            )
            + "\nHint: give the full name as `lbnorm show OUT --model PATTERN` lists it."
        )
        raise OptionsError(msg)
    order = pd.unique(pd.Series(chosen))
    variants = leaderboard.loc[leaderboard["model"].isin(order)]
    variants = (
        variants.assign(_order=pd.Categorical(variants["model"], categories=order))
        .sort_values("_order", kind="stable")
        .drop(columns="_order")
        .reset_index(drop=True)
    )
    return variants.assign(label=_labels(variants))


def compare_variants(
    variants: pd.DataFrame,
    benchmarks: pd.DataFrame,
    subtasks: pd.DataFrame,
    *,
    value: Literal["normalized_score", "raw_score"] = "normalized_score",
) -> pd.DataFrame:
    """Put variants side by side: the average, each benchmark, then its subtasks.

    Args:
        variants: Rows from :func:`find_variants` (keys, ``average``, ``label``).
        benchmarks: Their rows of ``benchmarks.parquet``.
        subtasks: Their rows of ``subtasks.parquet``.
        value: ``normalized_score`` (0-100) or ``raw_score`` (0-1).

    Returns:
        One row per line (``score``: ``average``, a benchmark, or an indented
        subtask; subtasks only for benchmarks with several), one column per
        variant label, and ``Δ`` for two variants: the second variant's score
        minus the first's (the order they were named in).
    """
    keys = list(KEY_COLUMNS)
    labels = variants[[*keys, "label"]]
    columns = labels["label"].tolist()
    per_benchmark = benchmarks.merge(labels, on=keys, validate="many_to_one")
    per_subtask = subtasks.merge(labels, on=keys, validate="many_to_one")
    is_split = per_subtask.groupby("benchmark")["subtask"].transform("nunique") > 1
    per_subtask = per_subtask.loc[is_split]
    lines = pd.concat(
        [
            per_benchmark.assign(line=per_benchmark["benchmark"], _subtask=-1),
            per_subtask.assign(
                line="  " + per_subtask["subtask"].astype("str"),
                _subtask=pd.factorize(  # suite order: as the file lists them
                    per_subtask["benchmark"].astype("str")
                    + "/"
                    + per_subtask["subtask"].astype("str")
                )[0],
            ),
        ],
        ignore_index=True,
    )
    lines = lines.assign(
        _benchmark=pd.Categorical(
            lines["benchmark"], categories=benchmark_columns(variants.columns)
        ).codes
    )
    table = (
        lines.pivot(  # noqa: PD010 - a reshape, nothing to aggregate
            index=["_benchmark", "_subtask", "line"], columns="label", values=value
        )
        .reindex(columns=columns)
        .reset_index()
        .rename(columns={"line": "score"})[["score", *columns]]
    )
    table = table.astype(dict.fromkeys(columns, "float64"))
    if value == "normalized_score":
        average = pd.DataFrame(
            [variants["average"].to_numpy(dtype=np.float64, na_value=np.nan)],
            columns=columns,
        ).assign(score="average")
        table = pd.concat([average[["score", *columns]], table], ignore_index=True)
    table.columns.name = None
    if len(columns) == 2:
        table = table.assign(Δ=table[columns[1]] - table[columns[0]])
    return table


def format_comparison(
    variants: pd.DataFrame, comparison: pd.DataFrame, *, digits: int = 2
) -> str:
    """Render a comparison: one legend line per variant, then the table.

    With two variants the table's header says which way its delta is taken:
    ``Δ (2nd - 1st)``, the second-named variant's score minus the first's, and a
    line above it names the two.
    """
    legend = variants.assign(
        rank=variants["rank"].astype("Int64").astype("str").replace("<NA>", "-")
    )[["label", "model", "precision", "revision", "chat_template", "rank"]]
    legend = legend.assign(revision=legend["revision"].astype("str").str[:7])
    lines = [format_table(legend, digits=digits), ""]
    if "Δ" in comparison.columns:
        first, second = [str(c) for c in comparison.columns if c not in ("score", "Δ")]
        lines.append(
            f"Δ = {printable(second)} minus {printable(first)} (second minus first)"
        )
        comparison = comparison.rename(columns={"Δ": "Δ (2nd - 1st)"})
    return "\n".join([*lines, format_table(comparison, digits=digits)])


def _labels(variants: pd.DataFrame) -> pd.Series:
    """Short column labels: name after ``org/``, then precision/revision if needed."""
    model = variants["model"].astype("str")
    label: pd.Series = model.str.split("/").str[-1]
    label = label.where(~label.duplicated(keep=False), model)
    for key in ("precision", "revision", "chat_template"):
        is_ambiguous = label.duplicated(keep=False)
        if not is_ambiguous.any():
            break
        suffix: pd.Series = variants[key].astype("str")
        if key == "revision":
            suffix = suffix.str[:7]
        if key == "chat_template":
            suffix = pd.Series(
                np.where(variants[key].to_numpy(dtype=bool), "chat", "no chat"),
                index=variants.index,
                dtype="str",
            )
        label = label.where(~is_ambiguous, label + " [" + suffix + "]")
    return label


def _shorten(names: pd.Series, width: int) -> pd.Series:
    """Shorten names longer than `width` in the middle, keeping org and suffix."""
    head = (width - 1) // 2
    tail = width - 1 - head
    return names.where(
        names.str.len() <= width, names.str[:head] + "…" + names.str[-tail:]
    )


def _position_differs(selected: pd.DataFrame) -> bool:
    rank = (
        selected["rank"].astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)
    )
    return not np.array_equal(rank, selected["position"].to_numpy(dtype=np.float64))


def _filterable(frame: pd.DataFrame) -> list[str]:
    return [
        str(name)
        for name in frame.columns
        if not str(name).endswith(" Raw") and name != "position"
    ][:24]
