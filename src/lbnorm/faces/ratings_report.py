"""One self-contained HTML report of a ratings output (``lbnorm report`` on ``lbnorm arena``'s).

The page holds the run's provenance (method, options, battles, input files);
the ratings as a chart, each model's rating with its 95% bootstrap interval as a
bar (an open side, where the data do not bound it, drawn to the edge with an
arrow), and as a table; the predicted win-rate heat map of the top models (row
beats column); and, given an older ratings output, what changed, in ``lbnorm
diff``'s words.

Everything is inline SVG and HTML: no script, no image, nothing fetched (the
Content-Security-Policy allows inline style only). Names are text, never
markup: every name is HTML-escaped, and hovering a bar or a cell shows its
figures through SVG ``<title>`` elements. The style and the table and tick
helpers are the leaderboard report's (:mod:`lbnorm.faces.html_report`).
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm.analysis.ratings_diff import RatingsDiff, diff_ratings
from lbnorm.analysis.render import (
    largest_rating_moves,
    options_changed_table,
    ratings_diff_summary,
)
from lbnorm.faces.html_report import _table_html, diff_html
from lbnorm.faces.ratings_view import describe_options, shown_ratings
from lbnorm.faces.report_assets import STYLE, page, read_asset
from lbnorm.faces.report_plots import axis_ticks, padded_range
from lbnorm.output.reader import Output

__all__ = ["heat_map_svg", "interval_chart_svg", "render_ratings_report"]

FloatArray = npt.NDArray[np.float64]

_POLICY = "default-src 'none'; style-src 'unsafe-inline'"
_ROW = 16.0  # pixels per model in the interval chart
_CELL = 18.0  # pixels per heat-map cell (32 when the values are written in them)
_NAME_CHARS = 34  # longest name drawn whole (the full name is in the hover title)
_CHART_STYLE = read_asset("ratings.css")


def render_ratings_report(
    out: Output | str | Path,
    *,
    previous: str | Path | None = None,
    top: int = 50,
    title: str | None = None,
) -> str:
    """Render a ratings output directory as one self-contained HTML page.

    Args:
        out: A ratings output directory (``lbnorm arena``'s).
        previous: An older ratings output; adds what changed since.
        top: Models in the interval chart and the heat map (the table holds all).
        title: Page title; defaults to the directory's name.

    Returns:
        The HTML text.

    Raises:
        InputError: `out` (or `previous`) is not a ratings output directory.
    """
    out = Output.open(out, "ratings")
    ratings = out.frame("ratings")
    win_rates = out.frame("win_rates")
    diff = None if previous is None else diff_ratings(previous, out)
    title = title or f"lbnorm ratings: {out.path.name}"
    shown = ratings.head(top)
    chart_note = (
        f"the top {len(shown):,} of {len(ratings):,} models (--top)"
        if len(shown) < len(ratings)
        else f"all {len(ratings):,} models"
    )
    has_intervals = bool(ratings["rating_lower"].notna().any())
    sections = [
        (
            "ratings",
            "Ratings",
            '<p class="note">Each model\'s rating (dot) '
            + (
                "and its 95% bootstrap interval (bar); an arrow marks a side the data "
                "do not bound. "
                if has_intervals
                else "(no intervals: run lbnorm arena with --bootstrap N). "
            )
            + f"Best first, {chart_note}; hover for the figures.</p>"
            + interval_chart_svg(shown),
        ),
        (
            "table",
            f"Ratings table ({len(ratings):,} models)",
            _table_html(shown_ratings(ratings), digits=1, null="n/a")
            + '<p class="note">'
            + (
                "rank_ub: the Arena's rank (UB), 1 + the number of models whose "
                "interval lies wholly above this one's; "
                if has_intervals
                else ""
            )
            + "win_%: the observed win rate (a tie counting half with ties half).</p>",
        ),
        (
            "win-rates",
            "Predicted win rates",
            '<p class="note">The chance that the row model beats the column model, '
            "from the ratings: 1 / (1 + 10^((r_col - r_row) / 400)). "
            f'0<span class="legend" aria-hidden="true"></span>1 · {chart_note}.</p>'
            + heat_map_svg(shown["model"].astype("str").tolist(), win_rates),
        ),
    ]
    if diff is not None:
        sections.append(("diff", f"Changes since {previous}", _diff_html(diff)))
    return page(
        title,
        sections,
        policy=_POLICY,
        style=STYLE + _CHART_STYLE,
        meta=_provenance_html(out.manifest),
        version=str(out.manifest.get("version", "")),
        source=str(out),
    )


def interval_chart_svg(ratings: pd.DataFrame) -> str:
    """Ratings as dots with their 95% intervals as bars, one row per model.

    Args:
        ratings: Rows of a ratings table, in the order drawn (best first).

    Returns:
        An ``<svg>`` element.

    Examples:
        >>> ratings = pd.DataFrame({"model": ["a<b", "c"], "rating": [1100.0, 900.0],
        ...     "rating_lower": [1050.0, np.nan], "rating_upper": [np.inf, np.nan],
        ...     "rank": [1, 2], "rank_upper_bound": [1, pd.NA]})
        >>> svg = interval_chart_svg(ratings)
        >>> svg.count('class="row"'), "a&lt;b" in svg, "a<b" in svg
        (2, True, False)
    """
    names = ratings["model"].astype("str").tolist()
    rating = ratings["rating"].to_numpy(dtype=np.float64)
    lower = ratings["rating_lower"].to_numpy(dtype=np.float64, na_value=np.nan)
    upper = ratings["rating_upper"].to_numpy(dtype=np.float64, na_value=np.nan)
    finite = np.concatenate(
        [rating, lower[np.isfinite(lower)], upper[np.isfinite(upper)]]
    )
    low, high = padded_range(finite)
    label = _label_width(names)
    left, right, top = label, label + 460.0, 24.0
    bottom = top + _ROW * len(names)
    ticks = axis_ticks(low, high)

    def to_x(values: FloatArray) -> FloatArray:
        return left + (np.clip(values, low, high) - low) / (high - low) * (right - left)

    grid = "".join(
        f'<line class="grid" x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{bottom}"/>'
        f'<text class="tick" x="{x:.1f}" y="{bottom + 14}" text-anchor="middle">{tick:g}</text>'
        for tick, x in zip(ticks, to_x(ticks), strict=True)
    )
    y = top + _ROW * (np.arange(len(names)) + 0.5)
    rows = []
    ranks = _texts(ratings["rank"])
    bounds = _texts(ratings["rank_upper_bound"])
    for i, name in enumerate(names):  # one element per model drawn (--top of them)
        tip = f"{name}: {rating[i]:.1f}"
        bar = ""
        if not (np.isnan(lower[i]) or np.isnan(upper[i])):
            x0, x1 = to_x(np.array([lower[i], upper[i]]))
            bar = f'<line class="bar" x1="{x0:.1f}" x2="{x1:.1f}" y1="{y[i]:.1f}" y2="{y[i]:.1f}"/>'
            bar += _arrow(x0, y[i], -1) if np.isneginf(lower[i]) else ""
            bar += _arrow(x1, y[i], 1) if np.isposinf(upper[i]) else ""
            tip += f" (95% interval {lower[i]:.1f} to {upper[i]:.1f})"
        tip += f"; rank {ranks[i]}" + (f", rank (UB) {bounds[i]}" if bounds[i] else "")
        shown = _shortened(name)
        rows.append(
            f'<g class="row"><title>{html.escape(tip)}</title>'
            f'<text class="name" x="{left - 8:.1f}" y="{y[i] + 4:.1f}" text-anchor="end">{html.escape(shown)}</text>'
            f'{bar}<circle class="dot" cx="{to_x(rating[i : i + 1])[0]:.1f}" cy="{y[i]:.1f}" r="3.5"/></g>'
        )
    width, height = right + 16, bottom + 34
    return (
        f'<svg class="chart" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" role="img" aria-label="ratings of {len(names)} models with 95% intervals">'
        f'<rect class="frame" x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" fill="none" stroke="#afb8c1"/>'
        f"{grid}{''.join(rows)}"
        f'<text class="axis" x="{(left + right) / 2:.1f}" y="{height - 4:.0f}" text-anchor="middle">rating</text></svg>'
    )


def heat_map_svg(models: list[str], win_rates: pd.DataFrame) -> str:
    """The predicted win rates among `models` as a heat map (row beats column).

    Args:
        models: The models, in the order drawn (rows and columns).
        win_rates: The ``win_rates`` table (``model_a``, ``model_b``, ``win_rate``).

    Returns:
        An ``<svg>`` element; cells hold their value when there are at most 20
        models, and every cell names its pair on hover.

    Examples:
        >>> rates = pd.DataFrame({"model_a": ["a", "b"], "model_b": ["b", "a"],
        ...     "win_rate": [0.75, 0.25]})
        >>> svg = heat_map_svg(["a", "b"], rates)
        >>> svg.count("<rect"), "a beats b: 0.750" in svg
        (4, True)
    """
    k = len(models)
    index = pd.Index(models)
    rows = index.get_indexer(pd.Index(win_rates["model_a"].astype("str")))
    columns = index.get_indexer(pd.Index(win_rates["model_b"].astype("str")))
    kept = (rows >= 0) & (columns >= 0)
    matrix = np.full((k, k), 0.5)
    matrix[rows[kept], columns[kept]] = win_rates["win_rate"].to_numpy(
        dtype=np.float64
    )[kept]
    colors = _colors(matrix)
    is_labelled = k <= 20
    cell = 32.0 if is_labelled else _CELL
    label = _label_width(models)
    left, top = label, label * 0.87 + 8  # column labels at 60 degrees
    shown = [_shortened(name) for name in models]
    parts = []
    for i in range(k):  # the drawn models (--top): a label per row and column
        y = top + cell * i
        x = left + cell * i
        parts.append(
            f'<text class="name" x="{left - 6:.1f}" y="{y + cell / 2 + 4:.1f}" text-anchor="end">{html.escape(shown[i])}</text>'
            f'<text class="name" transform="translate({x + cell / 2 + 3:.1f} {top - 6:.1f}) rotate(-60)">{html.escape(shown[i])}</text>'
        )
    for i in range(k):
        for j in range(k):  # k x k cells of a heat map of at most --top models
            value = matrix[i, j]
            tip = (
                f"{models[i]} (row)"
                if i == j
                else f"{models[i]} beats {models[j]}: {value:.3f}"
            )
            x, y = left + cell * j, top + cell * i
            text = (
                f'<text x="{x + cell / 2:.1f}" y="{y + cell / 2 + 3:.1f}" text-anchor="middle">{value:.2f}</text>'
                if is_labelled and i != j
                else ""
            )
            parts.append(
                f'<g class="cell"><title>{html.escape(tip)}</title><rect x="{x:.1f}" y="{y:.1f}" '
                f'width="{cell:g}" height="{cell:g}" fill="{colors[i][j]}"/>{text}</g>'
            )
    # the last column's label leans right, past the last cell
    width, height = left + cell * k + label * 0.5, top + cell * k + 8
    return (
        f'<svg class="chart" viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" role="img" aria-label="predicted win rates among {k} models">'
        f"{''.join(parts)}</svg>"
    )


def _colors(matrix: FloatArray) -> list[list[str]]:
    """Blue (0) through near-white (0.5) to red (1), as hex colours."""
    stops = np.array([[33, 102, 172], [247, 247, 247], [178, 24, 43]], dtype=np.float64)
    position = np.clip(matrix, 0.0, 1.0) * 2.0
    below = np.minimum(np.floor(position), 1).astype(np.int64)
    fraction = (position - below)[..., None]
    rgb = np.rint(stops[below] * (1 - fraction) + stops[below + 1] * fraction)
    codes = rgb.astype(np.int64)
    packed = (codes[..., 0] << 16) | (codes[..., 1] << 8) | codes[..., 2]
    hexes = np.char.mod("#%06x", packed)
    return [list(row) for row in hexes.tolist()]


def _label_width(names: list[str]) -> float:
    """Pixels for the longest name drawn (names past :data:`_NAME_CHARS` are shortened)."""
    return 7.0 * min(max((len(n) for n in names), default=4), _NAME_CHARS) + 12


def _shortened(name: str) -> str:
    return name if len(name) <= _NAME_CHARS else name[: _NAME_CHARS - 1] + "…"


def _arrow(x: float, y: float, direction: int) -> str:
    tip = x + 6 * direction
    return f'<path class="open" d="M{tip:.1f} {y:.1f} L{x:.1f} {y - 4:.1f} L{x:.1f} {y + 4:.1f} Z"/>'


def _texts(column: pd.Series) -> list[str]:
    return ["" if pd.isna(value) else str(value) for value in column.tolist()]


def _provenance_html(manifest: dict[str, object]) -> str:
    options = manifest.get("options")
    options = options if isinstance(options, dict) else {}
    rating = options.get("rating")
    counts = manifest.get("counts")
    counts = counts if isinstance(counts, dict) else {}
    inputs = manifest.get("inputs")
    inputs = inputs if isinstance(inputs, list) else []
    where = options.get("where") or []
    parts = [
        describe_options(rating) if isinstance(rating, dict) else "",
        f"{len(inputs):,} battle file(s): "
        + ", ".join(
            f"{Path(str(i.get('path', ''))).name} (sha256 {str(i.get('sha256', ''))[:12]})"
            for i in inputs[:5]
            if isinstance(i, dict)
        ),
        f"{int(counts.get('battles', 0)):,} battles among {int(counts.get('models', 0)):,} models"
        + (
            f", {int(counts.get('rows_filtered_out', 0)):,} rows filtered out by --where {' and '.join(map(str, where))}"
            if where
            else ""
        ),
        f"written {manifest.get('created_at', '')}",
    ]
    return html.escape(" · ".join(part for part in parts if part))


def _diff_html(diff: RatingsDiff) -> str:
    changed = options_changed_table(diff)
    moves = largest_rating_moves(diff)
    parts = [
        ("summary", "Summary", ratings_diff_summary(diff)),
        *([("options", "Options changed", changed)] if len(changed) else []),
        ("moves", f"Largest rating moves ({len(moves)})", moves),
    ]
    return (
        '<p class="note">As <code>lbnorm diff</code> reports it (old: the previous '
        "output, new: this one).</p>" + diff_html(diff.labels, parts, top=0, digits=1)
    )
