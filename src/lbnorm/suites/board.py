"""A suite's ``[board]`` table: how the leaderboard averages, ranks, rates and presents.

The engines fold subtask scores into benchmark scores; the board's rules act on
those once every score is in (:mod:`lbnorm.board`)::

    [board]
    average = "subtasks"          # "benchmarks" (default) | "subtasks" | "none"
    summation = "left-to-right"   # "exact" (default) | "left-to-right"
    rank_by = "average"           # "average" (default) | a benchmark | a rate
    rank_method = "ordinal"       # "min" (default) | "ordinal" | "dense"
    rank_incomplete = false       # default true: incomplete rows ranked if they have a value

    [[board.rates]]               # a column computed across the models
    name = "task_win_rate"
    rule = "task-win-rate"        # | "model-win-rate" | "mean-win-rate" | "borda"
    benchmarks = ["dps"]          # whose subtasks (or, mean-win-rate: which columns)

    [[board.columns]]             # the published table (`lbnorm export --format table`)
    column = "average"            # a leaderboard column: rank, average, a benchmark, a rate
    name = "Average (56 datasets)"
    digits = 2                    # numpy's round: half to even on the binary value

Every key is optional; a suite without ``[board]`` averages the benchmark
scores, ranks by the average with ``min`` and presents the leaderboard as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lbnorm.core.errors import SuiteError
from lbnorm.core.schemas import KEY_COLUMNS, leaderboard_schema
from lbnorm.suites._checks import check_table, check_unique, choice, is_whole

__all__ = [
    "AverageRule",
    "Board",
    "Column",
    "RankMethod",
    "Rate",
    "RateRule",
    "Summation",
    "parse_board",
]

#: What the board's ``average`` is the mean of.
AverageRule = Literal["benchmarks", "subtasks", "none"]
#: How ties share ranks: ``min`` (1, 2, 2, 4), ``ordinal`` (1, 2, 3, 4: ties in
#: key order), ``dense`` (1, 2, 2, 3).
RankMethod = Literal["min", "ordinal", "dense"]
#: How a mean of scores is summed: exactly (fixed point, order-free), or as a
#: publisher's float64 loop, left to right in suite order.
Summation = Literal["exact", "left-to-right"]
#: A column computed across the models (see :mod:`lbnorm.board.rates`).
RateRule = Literal["task-win-rate", "model-win-rate", "mean-win-rate", "borda"]

_AVERAGES: tuple[str, ...] = get_args(AverageRule)
_METHODS: tuple[str, ...] = get_args(RankMethod)
_SUMMATIONS: tuple[str, ...] = get_args(Summation)
_RULES: tuple[str, ...] = get_args(RateRule)
_SEE_BOARD = "see docs/suites.md (The board)."
_BOARD_KEYS = {
    "average",
    "summation",
    "rank_by",
    "rank_method",
    "rank_incomplete",
    "rates",
    "columns",
}
_RATE_KEYS = {"name", "rule", "benchmarks", "lower_is_better"}
_COLUMN_KEYS = {"column", "name", "digits"}
#: Digits a presented column may be rounded to (a float64 holds ~15-17).
_MAX_DIGITS = 15


@dataclass(frozen=True, slots=True, kw_only=True)
class Rate:
    """A leaderboard column computed across models from their scores.

    Attributes:
        name: The column's name.
        rule: ``task-win-rate`` (each subtask a comparison with each other model
            that has it, ties 1/2), ``model-win-rate`` (each other model one
            comparison, on the mean over the subtasks both have), ``mean-win-rate``
            (HELM: per column, the share of the other models a row beats, ties
            1/2, averaged over the row's columns) or ``borda`` (MTEB v2: per
            subtask, n - average rank, summed; a missing subtask 0).
        benchmarks: The benchmarks it reads: their subtasks (win rates, Borda) or
            their scores as columns (mean-win-rate).
        lower_is_better: mean-win-rate's columns where the smaller value wins.
    """

    name: str
    rule: RateRule
    benchmarks: tuple[str, ...]
    lower_is_better: tuple[str, ...] = ()

    @property
    def reads_subtasks(self) -> bool:
        """Whether it needs each (model, subtask) score, not only benchmark scores."""
        return self.rule != "mean-win-rate"


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """One column of the published table.

    Attributes:
        column: The leaderboard column shown (``rank``, ``average``, a benchmark,
            ``<benchmark> Raw``, a rate, ...).
        name: Its published name.
        digits: Rounded to this many decimals when presented (numpy's ``round``:
            half to even on the binary value); None: as computed.
    """

    column: str
    name: str
    digits: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Board:
    """A suite's leaderboard rules (the ``[board]`` table); the defaults are lbnorm's.

    Attributes:
        average: The mean of the averaged benchmarks' scores (``benchmarks``),
            of all their subtasks' scores (``subtasks``), or none.
        summation: ``exact`` (fixed point: order-free) or ``left-to-right``
            (a float64 sum in suite order, then divided, as pandas' row means).
        rank_by: ``average``, a benchmark or a rate.
        rank_method: How ties share ranks (:data:`RankMethod`).
        rank_incomplete: Whether a row missing a subtask may be ranked.
        rates: Columns computed across models.
        columns: The published table's columns, in order (empty: the leaderboard).
    """

    average: AverageRule = "benchmarks"
    summation: Summation = "exact"
    rank_by: str = "average"
    rank_method: RankMethod = "min"
    rank_incomplete: bool = True
    rates: tuple[Rate, ...] = ()
    columns: tuple[Column, ...] = ()

    @property
    def rate_names(self) -> list[str]:
        """The rate columns' names, in order."""
        return [rate.name for rate in self.rates]

    @property
    def rank_doc(self) -> str | None:
        """The leaderboard's ``rank`` column doc for this board (None: the default's).

        Examples:
            >>> Board(rank_by="dps", rank_method="ordinal").rank_doc
            '1 = best dps; every row its own place, exact ties in key order (1, 2, 3, 4); null if not ranked.'
        """
        is_default = self.rank_by == "average" and self.rank_method == "min"
        if is_default and self.rank_incomplete:
            return None
        ties = {
            "min": "ties share the smallest rank (1, 2, 2, 4)",
            "ordinal": "every row its own place, exact ties in key order (1, 2, 3, 4)",
            "dense": "ties share a rank, the next value the next rank (1, 2, 2, 3)",
        }[self.rank_method]
        complete = " or missing a subtask" if not self.rank_incomplete else ""
        return f"1 = best {self.rank_by}; {ties}; null if not ranked{complete}."

    @property
    def needs_subtask_scores(self) -> bool:
        """Whether a run keeps each (variant, subtask) score for these rules.

        A left-to-right sum, a win rate over subtasks and a Borda count read
        them; such a run holds one float per (variant, subtask) in memory.
        """
        return self.summation == "left-to-right" or any(
            rate.reads_subtasks for rate in self.rates
        )


def parse_board(
    raw: object,
    *,
    benchmarks: Sequence[str],
    where: str,
) -> Board:
    """Parse and check a suite's ``[board]`` table.

    Args:
        raw: The table (None: absent, the defaults).
        benchmarks: The suite's benchmark names, in order: with them, the
            leaderboard's columns after the keys (names a rate may not take,
            and a presented column may show).
        where: The file, for messages.

    Returns:
        The board.

    Raises:
        SuiteError: An unknown key or value, a name that is not a benchmark,
            column or rate, a rate named like a column, a duplicate name.

    Examples:
        >>> parse_board({"average": "none", "rank_by": "GPQA"}, benchmarks=["GPQA"],
        ...     where="s").rank_by
        'GPQA'
    """
    if raw is None:
        return Board()
    where = f"{where}: [board]"
    hint = f"write [board] with keys {sorted(_BOARD_KEYS)}."
    raw = check_table(raw, _BOARD_KEYS, where=where, hint=hint)
    columns = leaderboard_schema(benchmarks).names[len(KEY_COLUMNS) :]
    average = choice(raw, "average", _AVERAGES, where=where, hint=_SEE_BOARD)
    summation = choice(raw, "summation", _SUMMATIONS, where=where, hint=_SEE_BOARD)
    method = choice(raw, "rank_method", _METHODS, where=where, hint=_SEE_BOARD)
    incomplete = raw.get("rank_incomplete", True)
    if not isinstance(incomplete, bool):
        msg = f"{where}: rank_incomplete must be true or false, got {incomplete!r}.\nHint: false leaves a row missing any subtask unranked."
        raise SuiteError(msg)
    rates = tuple(
        _parse_rate(item, benchmarks, where=f"{where} rates[{index}]")
        for index, item in enumerate(_tables(raw, "rates", where=where))
    )
    names = [rate.name for rate in rates]
    check_unique(names, what="rate name", where=where)
    taken = {column.casefold() for column in columns}
    if clash := [name for name in names if name.casefold() in taken]:
        msg = f"{where}: rate name(s) {clash[:5]} are leaderboard columns already (a benchmark's or the board's own).\nHint: give each rate a name of its own, e.g. 'win_rate'."
        raise SuiteError(msg)
    rank_by = raw.get("rank_by", "average")
    if rank_by not in ("average", *benchmarks, *names):
        msg = f"{where}: rank_by {rank_by!r} is neither 'average', a benchmark nor a rate.\nHint: use one of {['average', *benchmarks, *names][:12]}."
        raise SuiteError(msg)
    if rank_by == "average" and average == "none" and "rank_by" in raw:
        msg = f'{where}: rank_by = "average", but average = "none".\nHint: rank by a benchmark or a rate, or set average.'
        raise SuiteError(msg)
    shown = (*columns, *names)
    presented = tuple(
        _parse_column(item, shown, where=f"{where} columns[{index}]")
        for index, item in enumerate(_tables(raw, "columns", where=where))
    )
    check_unique([c.name for c in presented], what="column name", where=where)
    if "model" in [c.name for c in presented]:
        msg = f"{where}: a presented column is named 'model', the table's first column.\nHint: rename it; the model names always come first."
        raise SuiteError(msg)
    return Board(
        average=average,
        summation=summation,
        rank_by=rank_by if average != "none" or "rank_by" in raw else "average",
        rank_method=method,
        rank_incomplete=incomplete,
        rates=rates,
        columns=presented,
    )


def _parse_rate(raw: object, benchmarks: Sequence[str], *, where: str) -> Rate:
    hint = "write [[board.rates]] with name, rule and benchmarks."
    raw = check_table(raw, _RATE_KEYS, where=where, hint=hint)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        msg = f"{where}: 'name' must be a non-empty string, got {name!r}.\nHint: the rate's leaderboard column, e.g. name = \"win_rate\"."
        raise SuiteError(msg)
    where = f"{where} ({name})"
    rule = raw.get("rule")
    if rule not in _RULES:
        msg = f"{where}: unknown rule {rule!r}.\nHint: use one of {list(_RULES)}."
        raise SuiteError(msg)
    named = _names(raw, "benchmarks", where=where)
    if not named:
        msg = f"{where}: 'benchmarks' must list at least one benchmark.\nHint: e.g. benchmarks = [{benchmarks[0]!r}]."
        raise SuiteError(msg)
    if unknown := [b for b in named if b not in benchmarks]:
        msg = f"{where}: benchmark(s) {unknown[:5]} are not in the suite.\nHint: use names from {list(benchmarks)[:12]}."
        raise SuiteError(msg)
    if rule in ("task-win-rate", "model-win-rate") and len(named) != 1:
        msg = f"{where}: a {rule} compares one benchmark's subtasks, got {len(named)} benchmarks.\nHint: name one benchmark, or add a rate per benchmark."
        raise SuiteError(msg)
    lower = _names(raw, "lower_is_better", where=where)
    if lower and rule != "mean-win-rate":
        msg = f"{where}: lower_is_better belongs to a mean-win-rate, not to a {rule}.\nHint: remove it."
        raise SuiteError(msg)
    if stray := [b for b in lower if b not in named]:
        msg = f"{where}: lower_is_better names {stray[:5]}, which the rate does not read.\nHint: list them in benchmarks too."
        raise SuiteError(msg)
    return Rate(name=name, rule=rule, benchmarks=named, lower_is_better=lower)


def _parse_column(raw: object, shown: Sequence[str], *, where: str) -> Column:
    hint = "write [[board.columns]] with column, name and digits."
    raw = check_table(raw, _COLUMN_KEYS, where=where, hint=hint)
    column = raw.get("column")
    if not isinstance(column, str) or column not in shown:
        msg = f"{where}: column {column!r} is not a leaderboard column of this suite.\nHint: use one of {list(shown)[:12]}{' ...' if len(shown) > 12 else ''}."
        raise SuiteError(msg)
    name = raw.get("name", column)
    if not isinstance(name, str) or not name:
        msg = f"{where}: 'name' must be a non-empty string, got {name!r}.\nHint: the published column name, e.g. name = \"Average\"."
        raise SuiteError(msg)
    digits = raw.get("digits")
    if digits is not None and not is_whole(digits, 0, _MAX_DIGITS):
        msg = f"{where}: digits must be a whole number from 0 to {_MAX_DIGITS}, got {digits!r}.\nHint: the decimals shown, e.g. digits = 2; omit it for full precision."
        raise SuiteError(msg)
    return Column(column=column, name=name, digits=digits)


def _tables(raw: dict[str, Any], key: str, *, where: str) -> list[object]:
    value = raw.get(key, [])
    if not isinstance(value, list):
        msg = f"{where}: {key} must be an array of tables, got {value!r}.\nHint: write each as [[board.{key}]]."
        raise SuiteError(msg)
    return value


def _names(raw: dict[str, Any], key: str, *, where: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        msg = f'{where}: {key} must be a list of benchmark names, got {value!r}.\nHint: e.g. {key} = ["GPQA"].'
        raise SuiteError(msg)
    check_unique(value, what=f"name in {key}", where=where)
    return tuple(value)
