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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lbnorm.analysis.correlation import kendall_tau, spearman_rho
from lbnorm.analysis.render import markdown_table
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
        summary: The summary figures, by name (see :func:`diff_rating_tables`).
        labels: The sides' labels.
        options_changed: Rating options that differ: name -> (old, new).
    """

    models: pd.DataFrame
    summary: dict[str, Figure]
    labels: tuple[str, str] = ("old", "new")
    options_changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    def tables(self) -> dict[str, pd.DataFrame]:
        """The tables to save, by file stem (the summary as one row)."""
        summary = pd.DataFrame(
            {"old": [self.labels[0]], "new": [self.labels[1]]}
            | {name: [value] for name, value in self.summary.items()}
        )
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
    return RatingsDiff(
        models=diff.models,
        summary=diff.summary,
        labels=diff.labels,
        options_changed=changed,
    )


def diff_rating_tables(
    old: pd.DataFrame,
    new: pd.DataFrame,
    *,
    labels: tuple[str, str] = ("old", "new"),
    moved_places: int = 10,
    top: Sequence[int] = (5, 10, 20),
) -> RatingsDiff:
    """Compare two ratings tables (:data:`lbnorm.core.schemas.RATINGS`).

    The summary figures: ``models_common``, ``models_added``,
    ``models_removed``; ``kendall_tau`` and ``spearman_rho`` of the ratings of
    the models on both sides; ``top_<k>_overlap`` (models in both top k);
    ``moved_places``, ``moved_more_than_n``, ``max_rank_move``,
    ``mean_abs_rank_move``; ``rating_delta_mean``, ``rating_delta_min``,
    ``rating_delta_max``; ``moves_beyond_intervals`` and ``intervals_checked``
    (null without intervals on both sides).

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
    columns = ["model", "rating", "rank", "rating_lower", "rating_upper"]
    sides = [
        frame.reindex(columns=columns).rename(
            columns={
                "rating": f"{side}_rating",
                "rank": f"{side}_rank",
                "rating_lower": f"{side}_lower",
                "rating_upper": f"{side}_upper",
            }
        )
        for frame, side in ((old, "old"), (new, "new"))
    ]
    joined = sides[0].merge(
        sides[1], on="model", how="outer", validate="one_to_one", indicator=True
    )
    status = joined["_merge"].map(
        {"both": "both", "left_only": "removed", "right_only": "added"}
    )
    ranks = {
        side: joined[f"{side}_rank"].astype("Float64").astype("Int64")
        for side in ("old", "new")
    }
    values = {
        name: joined[name].to_numpy(dtype=np.float64, na_value=np.nan)
        for name in (
            "old_rating",
            "new_rating",
            "old_lower",
            "old_upper",
            "new_lower",
            "new_upper",
        )
    }
    has_intervals = ~np.isnan(
        np.stack(
            [values[n] for n in ("old_lower", "old_upper", "new_lower", "new_upper")]
        )
    ).any(axis=0)
    apart = (values["new_lower"] > values["old_upper"]) | (
        values["new_upper"] < values["old_lower"]
    )
    models = pd.DataFrame(
        {
            "model": joined["model"].astype("str"),
            "status": status.astype("str"),
            "old_rating": values["old_rating"],
            "new_rating": values["new_rating"],
            "rating_delta": values["new_rating"] - values["old_rating"],
            "old_rank": ranks["old"],
            "new_rank": ranks["new"],
            "rank_move": ranks["old"] - ranks["new"],
            "old_lower": values["old_lower"],
            "old_upper": values["old_upper"],
            "new_lower": values["new_lower"],
            "new_upper": values["new_upper"],
            "is_beyond_intervals": pd.array(
                np.where(has_intervals, apart, False), dtype="boolean"
            ),
        }
    )
    models.loc[~has_intervals, "is_beyond_intervals"] = pd.NA
    order = np.lexsort(
        (
            models["old_rank"].to_numpy(dtype=np.float64, na_value=np.inf),
            models["new_rank"].to_numpy(dtype=np.float64, na_value=np.inf),
        )
    )
    models = models.iloc[order].reset_index(drop=True)
    return RatingsDiff(
        models=models,
        summary=_summary(models, moved_places=moved_places, top=top),
        labels=labels,
    )


def _summary(
    models: pd.DataFrame, *, moved_places: int, top: Sequence[int]
) -> dict[str, Figure]:
    common = models[models["status"] == "both"]
    old = common["old_rating"].to_numpy(dtype=np.float64)
    new = common["new_rating"].to_numpy(dtype=np.float64)
    delta = new - old
    moves = np.abs(common["rank_move"].to_numpy(dtype=np.float64, na_value=np.nan))
    beyond = common["is_beyond_intervals"]
    checked = int(beyond.notna().sum())
    figures: dict[str, Figure] = {
        "models_common": len(common),
        "models_added": int((models["status"] == "added").sum()),
        "models_removed": int((models["status"] == "removed").sum()),
        "kendall_tau": _finite(kendall_tau(old, new)),
        "spearman_rho": _finite(spearman_rho(old, new)),
    }
    for k in top:
        in_old = set(models.loc[models["old_rank"] <= k, "model"])
        in_new = set(models.loc[models["new_rank"] <= k, "model"])
        figures[f"top_{k}_overlap"] = len(in_old & in_new)
    figures |= {
        "moved_places": moved_places,
        "moved_more_than_n": int((moves > moved_places).sum()),
        "max_rank_move": int(moves.max()) if len(moves) else 0,
        "mean_abs_rank_move": float(moves.mean()) if len(moves) else None,
        "rating_delta_mean": float(delta.mean()) if len(delta) else None,
        "rating_delta_min": float(delta.min()) if len(delta) else None,
        "rating_delta_max": float(delta.max()) if len(delta) else None,
        "moves_beyond_intervals": int(beyond.fillna(False).sum()) if checked else None,
        "intervals_checked": checked if checked else None,
    }
    return figures


def _finite(value: float) -> float | None:
    return value if np.isfinite(value) else None


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
    top = [n for n in figures if n.startswith("top_") and n.endswith("_overlap")]
    common = int(figures["models_common"] or 0)
    rows = [
        (
            "models",
            f"{common:,} on both sides, {figures['models_added']:,} added, "
            f"{figures['models_removed']:,} removed",
        ),
        (
            "Kendall tau / Spearman rho",
            f"{_number(figures['kendall_tau'], 4)} / {_number(figures['spearman_rho'], 4)}",
        ),
        (
            "top-" + "/".join(n.split("_")[1] for n in top) + " overlap",
            " / ".join(f"{figures[n]}" for n in top),
        ),
        (
            f"moved more than {figures['moved_places']} places",
            f"{figures['moved_more_than_n']:,} of {common:,} (max "
            f"{figures['max_rank_move']:,}, mean {_number(figures['mean_abs_rank_move'], 1)})",
        ),
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
    """What an output folder given to ``diff`` holds, said plainly (a missing one too)."""
    if is_ratings:
        return "holds ratings"
    if not side.exists():
        return "does not exist"
    if not side.is_dir():
        return "is not a folder"
    if not (side / "manifest.json").is_file():
        return "is not an lbnorm output (no manifest.json)"
    return "holds a leaderboard"
