"""What changed between two ratings outputs (``lbnorm diff`` on ``lbnorm arena`` outputs).

:func:`diff_rating_tables` lines the two ``ratings`` tables up by model (one
hash join) and returns a :class:`RatingsDiff`: per model the old and new rating
and rank, the moves, and whether the two 95% intervals are apart; the summary
figures (Kendall's tau and Spearman's rho between the two orderings of the
models on both sides, from :mod:`lbnorm.analysis.correlation`; top-k overlaps;
big movers; models added and removed); and the rating options that differ.
The Markdown ``lbnorm diff`` prints is :mod:`lbnorm.analysis.render`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lbnorm.analysis.align import nullable, take_at
from lbnorm.analysis.diff import line_up, summary_row
from lbnorm.core.errors import InputError
from lbnorm.output.reader import Output

__all__ = ["RatingsDiff", "diff_rating_tables", "diff_ratings"]

Figure = float | int | None

#: The interval columns a diff lines up (a missing one is null throughout).
_INTERVAL = ("rating_lower", "rating_upper")
#: The diff's columns, in order: the rating's before the rank's.
_COLUMNS = (
    *("model", "status", "old_rating", "new_rating", "rating_delta"),
    *("old_rank", "new_rank", "rank_move", "old_lower", "old_upper"),
    *("new_lower", "new_upper", "is_beyond_intervals"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RatingsDiff:
    """Everything that changed between two ratings tables.

    Attributes:
        models: Per model on either side: ``model``, ``status`` (``both``,
            ``added``, ``removed``), ``old_rating``, ``new_rating``,
            ``rating_delta`` (new - old), ``old_rank``, ``new_rank``,
            ``rank_move`` (old - new: positive moved up), ``old_lower``,
            ``old_upper``, ``new_lower``, ``new_upper`` and
            ``is_beyond_intervals`` (the two 95% intervals do not overlap; null
            without intervals on both sides); sorted by new rank, then old rank.
        summary: The summary figures, by name: ``models_common``,
            ``models_added``, ``models_removed``; ``kendall_tau`` and
            ``spearman_rho`` of the ratings of the models on both sides;
            ``top_<k>_overlap`` (models in both top k); ``moved_places``,
            ``moved_more_than_n``, ``max_rank_move``, ``mean_abs_rank_move``;
            ``rating_delta_mean``, ``rating_delta_min``, ``rating_delta_max``;
            ``moves_beyond_intervals`` and ``intervals_checked`` (null without
            intervals on both sides).
        labels: The sides' labels.
        options_changed: Rating options that differ: name -> (old, new).
    """

    models: pd.DataFrame
    summary: dict[str, Figure]
    labels: tuple[str, str] = ("old", "new")
    options_changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables to save, by file stem (the summary as one row)."""
        summary = summary_row(self.labels, self.summary)
        return {"diff_ratings": self.models, "diff_ratings_summary": summary}


def diff_ratings(
    old: Output | str | Path,
    new: Output | str | Path,
    *,
    moved_places: int = 10,
    top: Sequence[int] = (5, 10, 20),
) -> RatingsDiff:
    """Compare two ratings output directories (``lbnorm arena``'s).

    Args:
        old: The reference output.
        new: The changed output.
        moved_places: Count models whose rank moved more than this.
        top: The top-k overlaps to report.

    Returns:
        The comparison, labelled by the directories.

    Raises:
        InputError: Either directory is not a ratings output (the message says
            what each holds).
    """
    if missing := [str(side) for side in (old, new) if not Path(side).exists()]:
        msg = (
            f"{' and '.join(missing)}: no such output folder.\n"
            "Hint: check the path; `lbnorm arena BATTLES... --out DIR` writes one."
        )
        raise InputError(msg)
    held = [_holds(side) for side in (old, new)]
    if any(text != "holds ratings" for text in held):
        said = [f"{side} {text}" for side, text in zip((old, new), held, strict=True)]
        msg = (
            f"lbnorm diff compares two outputs of one kind: {'; '.join(said)}.\n"
            "Hint: diff two `lbnorm arena` outputs, or two `lbnorm run` outputs."
        )
        raise InputError(msg)
    sides = [Output.open(side, "ratings") for side in (old, new)]
    options = [_rating_options(side.manifest) for side in sides]
    changed = {
        name: (options[0].get(name), options[1].get(name))
        for name in sorted(set(options[0]) | set(options[1]))
        if options[0].get(name) != options[1].get(name)
    }
    diff = diff_rating_tables(
        sides[0].frame("ratings"),
        sides[1].frame("ratings"),
        labels=(str(old), str(new)),
        moved_places=moved_places,
        top=top,
    )
    return replace(diff, options_changed=changed)


def diff_rating_tables(
    old: pd.DataFrame,
    new: pd.DataFrame,
    *,
    labels: tuple[str, str] = ("old", "new"),
    moved_places: int = 10,
    top: Sequence[int] = (5, 10, 20),
) -> RatingsDiff:
    """Compare two ratings tables (:data:`lbnorm.core.schemas.RATINGS`).

    Args:
        old: The reference ratings.
        new: The changed ratings.
        labels: Names of the two sides.
        moved_places: Count models whose rank moved more than this.
        top: The top-k overlaps to report.

    Returns:
        The comparison.

    Examples:
        >>> old = pd.DataFrame({"model": ["a", "b", "c"], "rating": [1100.0, 1000.0, 900.0],
        ...     "rank": [1, 2, 3]})
        >>> new = pd.DataFrame({"model": ["b", "a", "d"], "rating": [1080.0, 1050.0, 870.0],
        ...     "rank": [1, 2, 3]})
        >>> diff = diff_rating_tables(old, new, top=(2,))
        >>> diff.models[["model", "status", "rank_move"]].to_dict("list")
        {'model': ['b', 'a', 'd', 'c'], 'status': ['both', 'both', 'added', 'removed'], 'rank_move': [1, -1, None, None]}
        >>> diff.summary["kendall_tau"], diff.summary["top_2_overlap"]
        (-1.0, 2)
    """
    sides = line_up(old, new, on=["model"], value="rating")
    old_at, new_at = sides.at
    old_lower, old_upper = (take_at(old, name, old_at) for name in _INTERVAL)
    new_lower, new_upper = (take_at(new, name, new_at) for name in _INTERVAL)
    bounds = np.stack([old_lower, old_upper, new_lower, new_upper])
    has_intervals = ~np.isnan(bounds).any(axis=0)
    apart = (new_lower > old_upper) | (new_upper < old_lower)
    models = sides.table(
        old_lower=old_lower,
        old_upper=old_upper,
        new_lower=new_lower,
        new_upper=new_upper,
        is_beyond_intervals=nullable(np.where(has_intervals, apart, np.nan), "boolean"),
    )
    is_common = sides.is_both
    figures = sides.figures(is_common, moved_places=moved_places, top=top)
    # this summary says None where the leaderboard diff's says NaN or 0.0
    figures["kendall_tau"] = _finite(figures["kendall_tau"])
    figures["spearman_rho"] = _finite(figures["spearman_rho"])
    if not is_common.any():
        figures["mean_abs_rank_move"] = None
    checked = int((is_common & has_intervals).sum())
    return RatingsDiff(
        models=models[list(_COLUMNS)],
        summary={
            **sides.counts("models"),
            **figures,
            "moves_beyond_intervals": int((is_common & has_intervals & apart).sum())
            if checked
            else None,
            "intervals_checked": checked if checked else None,
        },
        labels=labels,
    )


def _finite(value: Figure) -> Figure:
    return value if value is not None and np.isfinite(value) else None


def _rating_options(manifest: Mapping[str, object]) -> dict[str, Any]:
    """The manifest's rating options and filters, flat (``where`` as a list)."""
    options = manifest.get("options")
    options = options if isinstance(options, dict) else {}
    rating = options.get("rating")
    flat = dict(rating) if isinstance(rating, dict) else {}
    flat["where"] = options.get("where", [])
    return flat


def _holds(side: Output | str | Path) -> str:
    """What an output folder given to ``diff`` holds, said plainly (it exists: checked before)."""
    try:
        if Output.open(side).kind == "ratings":
            return "holds ratings"
    except InputError:  # not an output, or not one that opens: said below
        pass
    side = Path(side)
    if not side.is_dir():
        return "is not a folder"
    if not (side / "manifest.json").is_file():
        return "is not an lbnorm output (no manifest.json)"
    return "holds a leaderboard"
