"""Terminal views of paired comparisons: ``compare --paired`` and ``diff --paired``.

The run's summary line is :func:`lbnorm.faces.terminal.format_paired_summary`
(a run loads no pandas).

Reads what :mod:`lbnorm.analysis.paired` and ``lbnorm run --paired`` produce;
tables are drawn by :func:`lbnorm.faces.terminal.format_table`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lbnorm.analysis.paired import PairedComparison, PairedDiff, variant_name
from lbnorm.analysis.render import markdown_table
from lbnorm.faces.terminal import format_table, printable

__all__ = ["format_paired_comparison", "format_paired_diff"]


def format_paired_comparison(comparison: PairedComparison, *, digits: int = 2) -> str:
    """Render ``lbnorm compare OUT A B --paired``: a legend, the levels, notes, gaps.

    Args:
        comparison: From :func:`lbnorm.analysis.paired.compare_paired`.
        digits: Decimals of scores and errors (p-values get four).
    """
    variants = comparison.variants
    legend = [
        f"{side} = {printable(variant_name(variants.iloc[at]))}"
        + (
            f", rank {variants.iloc[at]['rank']}"
            if pd.notna(variants.iloc[at]["rank"])
            else ""
        )
        for at, side in enumerate(("a", "b"))
    ]
    everything = comparison.levels
    is_empty = (
        (everything["n_items"] == 0)
        & everything["score_a"].isna()
        & everything["score_b"].isna()
    )
    levels = everything.loc[~is_empty]
    shown = pd.DataFrame(
        {
            "level": levels["level"].map(_indented),
            "a": levels["score_a"],
            "b": levels["score_b"],
            "Δ paired": levels["difference"],
            "se paired": levels["stderr"],
            "se unpaired": levels["stderr_unpaired"],
            "p": _p_texts(levels["p_value"]),
            "p adjusted": _p_texts(levels["p_adjusted"]),
            "McNemar p": _p_texts(levels["p_mcnemar"]),
            "items": levels["n_items"],
            "unmatched": levels["n_items_unmatched"],
        }
    )
    lines = [
        *legend,
        "Δ = a - b on the items both answered (normalized points); se paired: its "
        "standard error; se unpaired: sqrt(se_a² + se_b²), as if independent; "
        "p two-sided, adjusted across the rows",
        "",
        format_table(shown, digits=digits),
    ]
    if is_empty.any():
        lines.append(
            f"({int(is_empty.sum())} levels without a score or item of either model not shown)"
        )
    own = levels[["level", "stderr_a", "stderr_b"]].head(1)
    lines.append(
        f"\nown standard errors from the items (the average): a {own['stderr_a'].iloc[0]:.{digits}f}, "
        f"b {own['stderr_b'].iloc[0]:.{digits}f}"
    )
    lines += [f"note       {printable(note)}" for note in comparison.notes]
    unmatched = comparison.unmatched
    if len(unmatched):
        lines.append(
            f"unmatched  {len(unmatched):,} item(s) only one model has (not compared), e.g.:"
        )
        lines.append(format_table(unmatched.head(_SHOWN_ITEMS)))
    return "\n".join(lines)


def format_paired_diff(diff: PairedDiff, *, digits: int = 2, largest: int = 10) -> str:
    """Render ``lbnorm diff OLD NEW --paired`` as Markdown: what moved beyond its noise.

    Args:
        diff: From :func:`lbnorm.analysis.paired.diff_paired`.
        digits: Decimals of scores and errors.
        largest: Rows of the moves listed (the most significant first).
    """
    changes = diff.changes
    compared = changes.loc[changes["p_value"].notna()]
    moved = compared.loc[compared["moved"].fillna(False).astype(bool)]
    per_level = (
        compared.assign(moved=compared["moved"].fillna(False).astype(bool))
        .groupby("level", sort=False)
        .agg(variants=("model", "size"), moved=("moved", "sum"))
        .reset_index()
    )
    lines = [
        f"# Paired diff: {diff.labels[0]} -> {diff.labels[1]}",
        "",
        f"{compared['model'].nunique():,} model(s) compared with themselves on the items "
        f"both runs have; {len(moved):,} (variant, level) moved beyond their paired "
        "noise (adjusted p-value below the level).",
        "",
        markdown_table(per_level),
    ]
    if len(moved):
        top = moved.assign(z=(moved["difference"] / moved["stderr"]).abs())
        top = top.sort_values("z", ascending=False, kind="stable").head(largest)
        top = top.assign(p_adjusted=_p_texts(top["p_adjusted"]))
        lines += [
            "",
            "## Moved",
            "",
            markdown_table(top[list(_MOVED_COLUMNS)], digits=digits),
        ]
    lines += [f"\nNote: {note}." for note in diff.notes]
    return "\n".join(lines)


_SHOWN_ITEMS = 10
#: The columns of ``diff --paired``'s list of moves.
_MOVED_COLUMNS = (
    "model",
    "precision",
    "level",
    "old_score",
    "new_score",
    "difference",
    "stderr",
    "stderr_unpaired",
    "p_adjusted",
)


def _p_texts(values: pd.Series) -> list[str]:
    """P-values to four decimals, the smallest as ``<0.0001``; blank where none."""
    return [
        "" if np.isnan(p) else "<0.0001" if p < 1e-4 else f"{p:.4f}"
        for p in values.to_numpy(dtype=np.float64, na_value=np.nan).tolist()
    ]  # a row per level shown (tens)


def _indented(level: str) -> str:
    """A subtask level under its benchmark: indented by its name after the slash."""
    _, slash, subtask = level.partition("/")
    return f"  {subtask}" if slash else level
