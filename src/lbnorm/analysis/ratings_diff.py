"""What changed between two ratings outputs (``lbnorm diff`` on ``lbnorm arena`` outputs).

:func:`diff_rating_tables` lines the two ``ratings`` tables up by model (one
hash join) and returns a :class:`RatingsDiff`: per model the old and new rating
and rank, the moves, and whether the two 95% intervals are apart; the summary
figures (Kendall's tau and Spearman's rho between the two orderings of the
models on both sides, from :mod:`lbnorm.analysis.correlation`; top-k overlaps;
big movers; models added and removed); and the rating options that differ.
:func:`format_ratings_diff` is the Markdown ``lbnorm diff`` prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lbnorm.analysis.align import match_keys, nullable, take_at
from lbnorm.analysis.diff import rank_figures, rank_order, side_status, summary_row
from lbnorm.analysis.render import markdown_table, rank_rows
from lbnorm.core.errors import InputError
from lbnorm.output.reader import Output

__all__ = [
    "RatingsDiff",
    "diff_rating_tables",
    "diff_ratings",
    "format_ratings_diff",
    "largest_rating_moves",
    "options_changed_table",
    "ratings_diff_summary",
]

Figure = float | int | None

#: The ratings columns a diff lines up (a missing one is null throughout).
_COMPARED = ("rank", "rating", "rating_lower", "rating_upper")
_MOVES = {
    "model": "model",
    "old_rating": "old rating",
    "new_rating": "new rating",
    "rating_delta": "delta",
    "old_rank": "old rank",
    "new_rank": "new rank",
    "rank_move": "move",
    "is_beyond_intervals": "beyond intervals",
}


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
    kinds = [_is_ratings(side) for side in (old, new)]
    if not all(kinds):
        held = [
            f"{side} {_holds(Path(side), is_ratings=is_ratings)}"
            for side, is_ratings in zip((old, new), kinds, strict=True)
        ]
        msg = (
            f"lbnorm diff compares two outputs of one kind: {'; '.join(held)}.\n"
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
    keys, old_at, new_at = match_keys(old, new, on=["model"])
    old_rank, old_rating, old_lower, old_upper = (
        take_at(old, name, old_at) for name in _COMPARED
    )
    new_rank, new_rating, new_lower, new_upper = (
        take_at(new, name, new_at) for name in _COMPARED
    )
    bounds = np.stack([old_lower, old_upper, new_lower, new_upper])
    has_intervals = ~np.isnan(bounds).any(axis=0)
    apart = (new_lower > old_upper) | (new_upper < old_lower)
    models = pd.DataFrame(
        {
            "model": keys["model"],
            "status": side_status(old_at, new_at),
            "old_rating": old_rating,
            "new_rating": new_rating,
            "rating_delta": new_rating - old_rating,
            "old_rank": nullable(old_rank, "Int64"),
            "new_rank": nullable(new_rank, "Int64"),
            "rank_move": nullable(old_rank - new_rank, "Int64"),
            "old_lower": old_lower,
            "old_upper": old_upper,
            "new_lower": new_lower,
            "new_upper": new_upper,
            "is_beyond_intervals": nullable(
                np.where(has_intervals, apart, np.nan), "boolean"
            ),
        }
    )
    is_common = (old_at >= 0) & (new_at >= 0)
    figures = rank_figures(
        (old_rank, new_rank),
        (old_rating, new_rating),
        is_ranked=is_common,
        is_common=is_common,
        moved_places=moved_places,
        top=top,
        value="rating",
    )
    # this summary says None where the leaderboard diff's says NaN or 0.0
    figures["kendall_tau"] = _finite(figures["kendall_tau"])
    figures["spearman_rho"] = _finite(figures["spearman_rho"])
    if not is_common.any():
        figures["mean_abs_rank_move"] = None
    checked = int((is_common & has_intervals).sum())
    return RatingsDiff(
        models=models.iloc[rank_order(old_rank, new_rank)].reset_index(drop=True),
        summary={
            "models_common": int(is_common.sum()),
            "models_added": int(((new_at >= 0) & (old_at < 0)).sum()),
            "models_removed": int(((old_at >= 0) & (new_at < 0)).sum()),
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


def format_ratings_diff(
    diff: RatingsDiff, *, largest: int = 10, title: str | None = None
) -> str:
    """The ratings diff as Markdown: options changed, summary, biggest moves, added, removed.

    Args:
        diff: From :func:`diff_ratings` or :func:`diff_rating_tables`.
        largest: Rating moves listed.
        title: The heading (default: ``old -> new``).

    Returns:
        The Markdown text.
    """
    old, new = diff.labels
    lines = [f"# {title or f'lbnorm diff: {old} -> {new} (ratings)'}", ""]
    lines += [f"## Options changed ({len(diff.options_changed)})", ""]
    if diff.options_changed:
        lines += [markdown_table(options_changed_table(diff)), ""]
    else:
        lines += ["None.", ""]
    lines += ["## Summary", "", markdown_table(ratings_diff_summary(diff)), ""]
    moved = largest_rating_moves(diff, largest=largest)
    if len(moved):
        lines += [
            f"## Largest rating moves ({len(moved)})",
            "",
            markdown_table(moved, digits=1),
            "",
        ]
    for status, heading in (("added", "Models added"), ("removed", "Models removed")):
        names = diff.models.loc[diff.models["status"] == status, "model"].tolist()
        if names:
            shown = ", ".join(names[:20]) + (" ..." if len(names) > 20 else "")
            lines += [f"## {heading} ({len(names)})", "", shown, ""]
    return "\n".join(lines)


def options_changed_table(diff: RatingsDiff) -> pd.DataFrame:
    """The rating options that differ: ``option``, ``old``, ``new`` (as text)."""
    return pd.DataFrame(
        [
            (name, _text(before), _text(after))
            for name, (before, after) in diff.options_changed.items()
        ],
        columns=["option", "old", "new"],
    )


def ratings_diff_summary(diff: RatingsDiff) -> pd.DataFrame:
    """The summary figures in words: ``figure`` and ``value``, both text."""
    figures = diff.summary
    common = int(figures["models_common"] or 0)
    rows = [
        (
            "models",
            f"{common:,} on both sides, {figures['models_added']:,} added, "
            f"{figures['models_removed']:,} removed",
        ),
        *rank_rows(figures, ranked=common),
        (
            "rating delta (new - old)",
            f"mean {_number(figures['rating_delta_mean'], 1)}, min "
            f"{_number(figures['rating_delta_min'], 1)}, max "
            f"{_number(figures['rating_delta_max'], 1)}",
        ),
        (
            "95% intervals apart",
            "n/a (run lbnorm arena with --bootstrap on both sides)"
            if figures["moves_beyond_intervals"] is None
            else f"{figures['moves_beyond_intervals']:,} of {figures['intervals_checked']:,}",
        ),
    ]
    return pd.DataFrame(rows, columns=["figure", "value"])


def largest_rating_moves(diff: RatingsDiff, *, largest: int = 10) -> pd.DataFrame:
    """The models on both sides whose rating moved most (either way)."""
    common = diff.models[diff.models["status"] == "both"]
    size = np.abs(common["rating_delta"].to_numpy(dtype=np.float64))
    moved = common.iloc[np.argsort(-size, kind="stable")]
    moved = moved[moved["rating_delta"] != 0].head(largest)
    return moved[list(_MOVES)].rename(columns=_MOVES).reset_index(drop=True)


def _number(value: object, digits: int) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "n/a"
    return f"{float(value):,.{digits}f}"  # type: ignore[arg-type]


def _text(value: object) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "(none)"
    return "(none)" if value is None else str(value)


def _is_ratings(side: Output | str | Path) -> bool:
    """Whether a side holds ratings (one that does not open holds none)."""
    try:
        return Output.open(side).kind == "ratings"
    except InputError:
        return False


def _holds(side: Path, *, is_ratings: bool) -> str:
    """What an output folder given to ``diff`` holds, said plainly (it exists: checked before)."""
    if is_ratings:
        return "holds ratings"
    if not side.is_dir():
        return "is not a folder"
    if not (side / "manifest.json").is_file():
        return "is not an lbnorm output (no manifest.json)"
    return "holds a leaderboard"
