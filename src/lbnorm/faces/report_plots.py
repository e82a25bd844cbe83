"""The HTML report's plots: histograms as PNG (matplotlib) and the axes of its SVG scatters.

matplotlib is imported only when a report is drawn (:func:`import_figure`), with
a message naming the ``report`` extra when it is missing. The figures are
drawn with fixed margins and no metadata, so a page's bytes depend only on its
data.
"""

from __future__ import annotations

import base64
import html
import io
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from lbnorm.core.errors import LbnormError

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "axis_ticks",
    "histogram_figure",
    "histogram_html",
    "import_figure",
    "padded_range",
]

FloatArray = npt.NDArray[np.float64]

#: Matplotlib draws every label as given: no mathtext, no TeX.
_PLAIN_TEXT: dict[str, Any] = {"parse_math": False, "usetex": False}


def padded_range(values: FloatArray, *, share: float = 0.03) -> tuple[float, float]:
    """An axis range around `values`, `share` of their spread wider on each side.

    Half a unit wider on each side when they do not spread; 0-100 when empty.
    """
    if not len(values):
        return 0.0, 100.0
    low, high = float(values.min()), float(values.max())
    pad = (high - low) * share if high > low else 0.5
    return low - pad, high + pad


def axis_ticks(low: float, high: float, count: int = 5) -> FloatArray:
    """Round tick values (1, 2 or 5 times a power of ten) within ``[low, high]``.

    Examples:
        >>> axis_ticks(-1.2, 31.0).tolist()
        [0.0, 10.0, 20.0, 30.0]
    """
    span = high - low
    step = 10.0 ** np.floor(np.log10(span / count))
    step *= next(m for m in (1.0, 2.0, 5.0, 10.0) if span / (step * m) <= count)
    start = np.ceil(low / step) * step
    ticks = np.arange(start, high + step * 1e-9, step)
    return np.asarray(np.round(ticks, 10) + 0.0, dtype=np.float64)


def histogram_html(figure_type: type[Figure], scores: pd.Series, name: str) -> str:
    """One benchmark's score histogram as an ``<img>`` with a PNG ``data:`` URI."""
    values = scores.dropna().to_numpy(dtype=np.float64)
    low, high = padded_range(values, share=0.0)  # their own range
    buffer = io.BytesIO()
    figure = histogram_figure(figure_type, values, name, (low, high))
    figure.savefig(buffer, format="png", metadata={"Software": None})
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    label = html.escape(name)
    return (
        f'<figure><img alt="Distribution of {label} scores" width="420" height="300" '
        f'src="data:image/png;base64,{data}"><figcaption>{label}: normalized scores of the '
        f"{len(values):,} variants scored, on the axis from {low:.1f} to {high:.1f} "
        "(their own range); dashed line: median.</figcaption></figure>"
    )


def histogram_figure(
    figure_type: type[Figure],
    values: FloatArray,
    name: str,
    limits: tuple[float, float],
) -> Figure:
    """The histogram of `values` on `limits`, its median marked."""
    # fixed margins: the figures are all alike, and a layout engine doubles the time
    figure = figure_type(figsize=(4.2, 3.0), dpi=100)
    figure.subplots_adjust(left=0.15, right=0.97, bottom=0.15, top=0.9)
    axes: Axes = figure.subplots()
    counts, edges = np.histogram(values, bins=40, range=limits)
    axes.stairs(counts, edges, fill=True, color="#4c72b0")
    if len(values):
        median = float(np.median(values))
        axes.axvline(median, color="#c44e52", linestyle="--", linewidth=1.2)
        axes.annotate(
            f"median {median:.1f}",
            (median, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, -12),
            textcoords="offset points",
            color="#c44e52",
            fontsize=8,
            **_PLAIN_TEXT,
        )
    axes.set_title(f"{name} (n = {len(values):,})", fontsize=10, **_PLAIN_TEXT)
    axes.set_xlabel("normalized score", fontsize=9, **_PLAIN_TEXT)
    axes.set_ylabel("variants", fontsize=9, **_PLAIN_TEXT)
    axes.set_xlim(*limits)
    axes.tick_params(labelsize=8)
    return figure


def import_figure() -> type[Figure]:
    """Matplotlib's Figure, or an error naming the ``report`` extra."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        msg = (
            "the HTML report's plots need matplotlib, which is not installed.\n"
            "Hint: pip install matplotlib (from a clone of lbnorm: pip install '.[report]')."
        )
        raise LbnormError(msg) from exc
    return Figure
