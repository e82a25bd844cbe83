"""Terminal views of pairwise ratings: ``lbnorm arena``'s summary and ``lbnorm show``.

:func:`select_ratings` filters a ratings frame (read with
:meth:`lbnorm.output.reader.Output.frame`) and :func:`format_ratings` prints it;
:func:`format_arena_summary` is what ``lbnorm arena`` prints after a run. Tables
are drawn by :func:`lbnorm.faces.terminal.format_table`, so every model name is
escaped (:func:`lbnorm.faces.terminal.printable`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from lbnorm.core.errors import OptionsError
from lbnorm.faces.show import flag_condition, passing
from lbnorm.faces.terminal import closing_lines, format_table, printable
from lbnorm.ratings.where import Where

if TYPE_CHECKING:
    from lbnorm.arena import ArenaResult

__all__ = [
    "RATING_LABELS",
    "describe_options",
    "format_arena_summary",
    "format_ratings",
    "select_ratings",
    "shown_ratings",
]

#: How the ratings table's columns are headed on the terminal.
RATING_LABELS: dict[str, str] = {
    "rank": "rank",
    "rank_upper_bound": "rank_ub",
    "model": "model",
    "rating": "rating",
    "rating_lower": "lower",
    "rating_upper": "upper",
    "n_battles": "battles",
    "n_wins": "wins",
    "n_ties": "ties",
    "win_rate": "win_%",
}
_INTERVAL = ("rank_upper_bound", "rating_lower", "rating_upper")
_METHODS = {"bt": "Bradley-Terry", "elo": "online Elo (K = 4)"}


def select_ratings(
    ratings: pd.DataFrame,
    *,
    filters: Sequence[Where] = (),
    model: str | None = None,
) -> pd.DataFrame:
    """Filter a ratings table (best first).

    Args:
        ratings: The ``ratings`` table of a ratings output, best first.
        filters: ``--where`` conditions every row must meet (as
            ``lbnorm show --where``: ``n_battles>=100``, ``rating>1100``).
        model: Case-insensitive regular expression on the model name.

    Returns:
        The selected rows, in rating order.

    Raises:
        OptionsError: A filter does not fit the table.

    Examples:
        >>> ratings = pd.DataFrame({"model": ["gpt-4", "claude-v1", "gpt-3.5"],
        ...     "rating": [1250.0, 1160.0, 1120.0]})
        >>> select_ratings(ratings, model="gpt")["model"].tolist()
        ['gpt-4', 'gpt-3.5']
    """
    conditions = list(filters)
    if model is not None:
        conditions.append(flag_condition("model", "~", model, text=model))
    return ratings.loc[passing(ratings, conditions)].reset_index(drop=True)


def format_ratings(
    ratings: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    digits: int = 1,
) -> str:
    """Render ratings rows as an aligned text table.

    Default columns: ``rank``, ``rank_ub`` (the Arena's rank (UB)), ``model``,
    ``rating``, ``lower`` and ``upper`` (the 95% interval), ``battles``,
    ``wins``, ``ties`` and ``win_%`` (the observed win rate, in percent); the
    interval columns only when the ratings have intervals (``--bootstrap``).

    Args:
        ratings: Rows of a ratings table.
        columns: Columns to show instead (the table's own names).
        digits: Decimals shown.

    Returns:
        The table.

    Raises:
        OptionsError: A requested column does not exist.

    Examples:
        >>> ratings = pd.DataFrame({"rank": [1], "rank_upper_bound": [None],
        ...     "model": ["gpt-4"], "rating": [1249.94], "rating_lower": [None],
        ...     "rating_upper": [None], "n_battles": [57], "n_wins": [35],
        ...     "n_ties": [15], "win_rate": [0.7456]})
        >>> print(format_ratings(ratings))
        rank  model  rating  battles  wins  ties  win_%
           1  gpt-4  1249.9       57    35    15   74.6
    """
    return format_table(shown_ratings(ratings, columns=columns), digits=digits)


def shown_ratings(
    ratings: pd.DataFrame, *, columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """The columns of a ratings table that are shown, headed as :data:`RATING_LABELS` says.

    The terminal's table (:func:`format_ratings`) and the HTML report's: by
    default every column of :data:`RATING_LABELS`, the interval's only when the
    ratings have intervals; ``win_rate`` in percent.

    Raises:
        OptionsError: A requested column does not exist.
    """
    if columns is None:
        has_intervals = bool(ratings["rating_lower"].notna().any())
        shown = [
            name
            for name in RATING_LABELS
            if name in ratings.columns and (has_intervals or name not in _INTERVAL)
        ]
    else:
        if missing := [c for c in columns if c not in ratings.columns]:
            msg = f"no column(s) {missing[:5]} in the ratings.\nHint: choose from {list(ratings.columns)}."
            raise OptionsError(msg)
        shown = list(columns)
    table = ratings[shown]
    if "win_rate" in shown:
        table = table.assign(win_rate=table["win_rate"].astype("float64") * 100.0)
    return table.rename(columns=RATING_LABELS)


def format_arena_summary(
    result: ArenaResult,
    *,
    out: str | Path | None,
    top: int = 10,
    seconds: float | None = None,
) -> str:
    """What ``lbnorm arena`` prints: the battles read, the method, the top models.

    Args:
        result: From :func:`lbnorm.arena.rate_battles`.
        out: The output directory written (None: nothing written).
        top: Models listed (0: none).
        seconds: Wall time of the run, if measured.

    Returns:
        The summary text (names escaped).
    """
    battles = result.battles
    files = len(result.inputs)
    filtered = (
        f", {battles.n_filtered_out:,} filtered out by --where"
        if battles.n_filtered_out
        else ""
    )
    if result.n_over_cap:
        filtered += f", {result.n_over_cap:,} over the daily vote cap"
    options = result.ratings.options
    lines = [
        f"battles    {files} file(s), {battles.n_rows_read:,} rows read{filtered}: "
        f"{battles.n_battles:,} battles among {len(battles.models):,} models",
        f"ratings    {describe_options(options)}",
    ]
    if options.method == "bt" and options.anchor is None:
        lines.append(
            "anchor     none: the ratings have mean 1000; the Arena's table pins one "
            "model (--anchor mixtral-8x7b-instruct-v0.1=1114)"
        )
    if result.unrated:
        names = ", ".join(printable(name) for name, _ in result.unrated)
        lines.append(
            f"categories {len(result.unrated)} not rated, left out of categories.parquet: "
            f"{names} (the warnings say why)"
        )
    if top > 0:
        frame: pd.DataFrame = result.tables["ratings"].to_pandas()
        shown = frame.head(top)
        lines += ["", f"top {len(shown)} of {len(frame):,}:", format_ratings(shown)]
    lines += _style_lines(result, top)
    lines += closing_lines(out, ", ".join(result.tables), seconds)
    return "\n".join(lines)


def _style_lines(result: ArenaResult, top: int) -> list[str]:
    """The style coefficients and the largest rank changes, with style control."""
    tables = result.tables
    if "style_coefficients" not in tables:
        return []
    lines = [
        "",
        "style coefficients (log-odds per standard deviation of the difference):",
    ]
    for row in tables["style_coefficients"].to_pylist():
        interval = (
            f"  [{row['coefficient_lower']:+.3f}, {row['coefficient_upper']:+.3f}]"
            if row["coefficient_lower"] is not None
            else ""
        )
        lines.append(f"  {row['feature']:<7} {row['coefficient']:+.3f}{interval}")
    moved = [r for r in tables["style_control"].to_pylist() if r["rank_delta"]]
    if moved and top > 0:
        lines += ["", "rank without -> with style control:"]
        lines += [
            f"  {printable(r['model'])}: {r['rank_plain']} -> {r['rank']} "
            f"({r['rank_delta']:+d}; rating {r['rating_plain']:.1f} -> {r['rating']:.1f})"
            for r in moved[:top]
        ]
    return lines


def describe_options(options: Any) -> str:
    """The rating options in words (a :class:`RatingOptions` or its manifest record).

    Examples:
        >>> describe_options({"method": "bt", "ties": "half", "l2": None,
        ...     "anchor": ["mixtral-8x7b-instruct-v0.1", 1114.0], "bootstrap": 1000, "seed": 0})
        'Bradley-Terry, ties half; anchored: mixtral-8x7b-instruct-v0.1 = 1114; 1,000 bootstrap rounds (seed 0), 95% intervals'
    """
    get = options.get if isinstance(options, Mapping) else partial(getattr, options)
    parts = [
        f"{_METHODS.get(str(get('method')), str(get('method')))}, ties {get('ties')}"
    ]
    if get("style_control"):
        l2 = get("l2")
        parts[0] += f", style control (L2 penalty C = {2.0 if l2 is None else l2:g})"
    elif get("l2") is not None:
        parts[0] += f", L2 penalty C = {get('l2'):g}"
    anchor = get("anchor")
    if anchor:
        parts.append(f"anchored: {printable(str(anchor[0]))} = {float(anchor[1]):g}")
    rounds = int(get("bootstrap") or 0)
    parts.append(
        f"{rounds:,} bootstrap rounds (seed {get('seed')}), 95% intervals"
        if rounds
        else "no intervals (--bootstrap N adds them)"
    )
    return "; ".join(parts)
