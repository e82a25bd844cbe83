"""One self-contained HTML report of an output directory, plots embedded.

The report holds the run's provenance, the top of the leaderboard, a summary and
a score distribution per benchmark, and each benchmark plotted against the
leave-one-out average of the others: a benchmark that measures what the rest
measure lines up with them, one that does not (DROP on the v1 leaderboard) is a
cloud. Health checks and the diff against an older output are rendered from
frames the caller passes (``lbnorm.analysis`` computes them), so this module
only draws. Images are PNG ``data:`` URIs; the page loads nothing and runs no
script. Plots need matplotlib (``pip install 'lbnorm[report]'``), imported only
when a report is rendered.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from lbnorm.analysis.diff import Diff, Snapshot, diff_snapshots
from lbnorm.analysis.health import check_health
from lbnorm.errors import LbnormError
from lbnorm.outdir import has_table, metadata_columns, read_manifest, read_output_table
from lbnorm.schemas import KEY_COLUMNS, benchmark_columns

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "diff_tables",
    "health_tables",
    "leave_one_out",
    "loo_correlations",
    "render_report",
    "summarize_benchmarks",
]

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1f24;background:#fff}
header,main,footer{max-width:1180px;margin:0 auto;padding:0 24px}
header{padding-top:24px;border-bottom:1px solid #d8dee4}
h1{font-size:24px;margin:0 0 6px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #eaeef2;padding-bottom:4px}
.meta{color:#57606a;margin:0 0 12px}nav a{margin-right:14px;color:#0969da;text-decoration:none}nav{padding-bottom:12px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:8px 0;font-size:13px}
th,td{padding:3px 9px;border-bottom:1px solid #eaeef2;text-align:right;white-space:nowrap}
th{background:#f6f8fa;position:sticky;top:0}td.text,th.text{text-align:left}
td.model{max-width:300px;overflow:hidden;text-overflow:ellipsis}
tr:nth-child(even) td{background:#fbfcfd}tr.marked td{color:#9a3800;background:#fff4e5}
.scroll{max-height:560px;overflow:auto;border:1px solid #d8dee4;display:inline-block;max-width:100%}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:12px}
figure{margin:0;border:1px solid #eaeef2;padding:6px}figure img{width:100%;height:auto;display:block}
figcaption{color:#57606a;font-size:12px;margin-top:4px}.note{color:#57606a}
footer{color:#57606a;font-size:12px;padding:24px}
"""


def leave_one_out(leaderboard: pd.DataFrame) -> pd.DataFrame:
    """Pair each benchmark score with the mean of the variant's other benchmarks.

    Only variants with every benchmark scored count, so each mean is over the
    same benchmarks.

    Args:
        leaderboard: The leaderboard (``<benchmark>`` and ``<benchmark> Raw``
            columns).

    Returns:
        Long frame: ``benchmark``, ``score`` and ``others`` (plain mean of the
        other benchmarks), one row per complete variant and benchmark.

    Examples:
        >>> board = pd.DataFrame({"A": [10.0, 20.0], "A Raw": [0.1, 0.2],
        ...     "B": [30.0, 50.0], "B Raw": [0.3, 0.5], "C": [50.0, None], "C Raw": [0.5, None]})
        >>> leave_one_out(board)
          benchmark  score  others
        0         A   10.0    40.0
        1         B   30.0    30.0
        2         C   50.0    20.0
    """
    names = benchmark_columns(leaderboard.columns)
    scores = leaderboard[names].to_numpy(dtype=np.float64, na_value=np.nan)
    scores = scores[~np.isnan(scores).any(axis=1)]
    n_variants, n_benchmarks = scores.shape
    others = (scores.sum(axis=1, keepdims=True) - scores) / max(n_benchmarks - 1, 1)
    return pd.DataFrame(
        {
            "benchmark": np.tile(np.asarray(names, dtype=object), n_variants),
            "score": scores.ravel(),
            "others": others.ravel(),
        }
    )


def loo_correlations(loo: pd.DataFrame) -> pd.DataFrame:
    """Correlate each benchmark with the leave-one-out mean of the others.

    Args:
        loo: The frame from :func:`leave_one_out`.

    Returns:
        ``benchmark``, ``n``, ``pearson`` and ``spearman``, in benchmark order.
    """
    ranks = loo.groupby("benchmark", sort=False)[["score", "others"]].rank()
    pearson = loo.groupby("benchmark", sort=False)[["score", "others"]].corr()
    spearman = (
        ranks.assign(benchmark=loo["benchmark"])
        .groupby("benchmark", sort=False)[["score", "others"]]
        .corr()
    )
    pairs = pd.IndexSlice[:, "score"]
    return (
        pd.DataFrame(
            {
                "n": loo.groupby("benchmark", sort=False).size(),
                "pearson": pearson.loc[pairs, "others"].droplevel(1),
                "spearman": spearman.loc[pairs, "others"].droplevel(1),
            }
        )
        .rename_axis("benchmark")
        .reset_index()
    )


def summarize_benchmarks(leaderboard: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark: variants scored, mean, median, 90th percentile, max, % at 0.

    Examples:
        >>> board = pd.DataFrame({"A": [0.0, 50.0, 100.0], "A Raw": [0.1, 0.5, 1.0]})
        >>> summarize_benchmarks(board)[["benchmark", "n", "median", "at_zero_pct"]]
          benchmark  n  median  at_zero_pct
        0         A  3    50.0    33.333333
    """
    names = benchmark_columns(leaderboard.columns)
    long = leaderboard[names].melt(var_name="benchmark", value_name="score").dropna()
    grouped = long.groupby("benchmark", sort=False)["score"]
    return (
        pd.DataFrame(
            {
                "n": grouped.size(),
                "mean": grouped.mean(),
                "median": grouped.median(),
                "p90": grouped.quantile(0.9),
                "max": grouped.max(),
                "at_zero_pct": long["score"]
                .eq(0)
                .groupby(long["benchmark"], sort=False)
                .mean()
                * 100,
            }
        )
        .rename_axis("benchmark")
        .reset_index()
    )


def health_tables(health: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Split a health table for display: every benchmark check, failed subtasks.

    Args:
        health: The table from :func:`lbnorm.analysis.health.check_health`.

    Returns:
        Named tables: the benchmark rows, and the subtask rows that failed.
    """
    benchmark_columns = ["benchmark", "status", "failed", "n_models", "loo_spearman",
                         "floor_rate", "ceiling_rate", "stuck_share", "stuck_spread"]  # fmt: skip
    subtask_columns = ["benchmark", "subtask", "status", "failed", "lower_bound",
                       "max_raw_score", "below_bound_rate", "rest_spearman"]  # fmt: skip
    is_benchmark = health["level"].eq("benchmark")
    subtasks = health.loc[~is_benchmark]
    failed = subtasks.loc[subtasks["status"].eq("fail")]
    passed = int(subtasks["status"].ne("fail").sum())
    return [
        ("Benchmarks", health.loc[is_benchmark, _present(health, benchmark_columns)]),
        (
            f"Subtasks: {passed} of {len(subtasks)} pass"
            + (", these fail" if len(failed) else ""),
            failed[_present(health, subtask_columns)],
        ),
    ]


def diff_tables(diff: Diff, *, top: int = 10) -> list[tuple[str, pd.DataFrame]]:
    """Tables of what changed: summary figures, changed bounds, biggest rank moves.

    Args:
        diff: The comparison from :func:`lbnorm.analysis.diff.diff_snapshots`.
        top: Rank moves listed each way.

    Returns:
        Named tables (the bounds table only if a bound changed).
    """
    summary = pd.DataFrame(
        {
            "figure": list(diff.summary),
            "value": [
                ""
                if value is None
                else f"{value:,.4g}"
                if isinstance(value, float)
                else f"{value:,}"
                for value in diff.summary.values()
            ],
        }
    )
    models = diff.models
    moved = models.loc[models["rank_move"].fillna(0).ne(0)].sort_values(
        "rank_move", ascending=False, kind="stable"
    )
    movers = pd.concat([moved.head(top), moved.tail(top).iloc[::-1]]).drop_duplicates(
        list(KEY_COLUMNS)
    )
    columns = ["model", "precision", "old_rank", "new_rank", "rank_move",
               "old_average", "new_average", "average_delta"]  # fmt: skip
    tables = [("Summary", summary)]
    if len(diff.bounds):
        tables.append(("Lower bounds changed", diff.bounds))
    tables.append(
        (
            f"Largest rank moves ({top} up, {top} down)",
            movers[_present(models, columns)],
        )
    )
    return tables


def render_report(
    out: str | Path,
    *,
    previous: str | Path | None = None,
    top: int = 50,
    title: str | None = None,
) -> str:
    """Render an output directory as one self-contained HTML page.

    Args:
        out: The output directory.
        previous: An older output directory; adds what changed since.
        top: Leaderboard rows shown.
        title: Page title; defaults to the suite's name.

    Returns:
        The HTML text.

    Raises:
        LbnormError: matplotlib is not installed.
        InputError: `out` (or `previous`) is not an lbnorm output directory.
    """
    figure_type = _import_figure()
    manifest = read_manifest(out)
    board = read_output_table(out, "leaderboard")
    subtasks = (
        read_output_table(out, "subtasks") if has_table(out, "subtasks") else None
    )
    names = benchmark_columns(board.columns)
    health = check_health(board, benchmarks=names, subtasks=subtasks)
    suite = manifest.get("suite", {})
    suite_name = str(suite.get("name", "")) if isinstance(suite, dict) else ""
    loo = leave_one_out(board)
    correlations = loo_correlations(loo)
    summary = summarize_benchmarks(board).merge(
        correlations[["benchmark", "pearson", "spearman"]], on="benchmark", how="left"
    )
    distributions = [
        _figure_html(
            _histogram(figure_type, board[name], name),
            alt=f"Distribution of {name} scores",
            caption=f"{name}: normalized scores of the variants scored; dashed line: median.",
        )
        for name in names
    ]
    scatters = [
        _figure_html(
            _scatter(figure_type, loo.loc[loo["benchmark"].eq(name)], name),
            alt=f"{name} against the mean of the other benchmarks",
            caption=f"{name} (y) against the mean of the other {len(names) - 1} benchmarks (x), complete variants.",
        )
        for name in names
    ]
    title = title or f"lbnorm report: {suite_name or Path(out).name}"
    sections = [
        (
            "leaderboard",
            f"Leaderboard (top {min(top, len(board)):,})",
            _leaderboard_html(board, names, out, top),
        ),
        (
            "benchmarks",
            "Benchmarks",
            _table_html(summary, digits=2)
            + '<p class="note">n: variants scored; at_zero_pct: share scored 0 '
            "(at or below the random baseline); pearson, spearman: correlation with "
            'the mean of the other benchmarks (see <a href="#leave-one-out">below</a>).</p>',
        ),
        (
            "distributions",
            "Score distributions",
            f'<div class="grid">{"".join(distributions)}</div>',
        ),
        (
            "leave-one-out",
            "Each benchmark against the others",
            _LOO_NOTE + f'<div class="grid">{"".join(scatters)}</div>',
        ),
        (
            "health",
            "Health checks",
            _HEALTH_NOTE + _tables_html(health_tables(health), digits=3),
        ),
    ]
    if previous is not None:
        before = _snapshot(previous, label=str(previous))
        after = _snapshot(out, label=str(out))
        sections.append(
            (
                "diff",
                f"Changes since {previous}",
                _tables_html(diff_tables(diff_snapshots(before, after)), digits=2),
            )
        )
    nav = "".join(
        f'<a href="#{anchor}">{html.escape(heading)}</a>'
        for anchor, heading, _ in sections
    )
    body = "".join(
        f'<section id="{anchor}"><h2>{html.escape(heading)}</h2>{content}</section>'
        for anchor, heading, content in sections
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>"
        f"<header><h1>{html.escape(title)}</h1>"
        f'<p class="meta">{_provenance_html(manifest, board)}</p><nav>{nav}</nav></header>'
        f"<main>{body}</main>"
        f"<footer>Generated by lbnorm {html.escape(str(manifest.get('version', '')))} "
        f"from {html.escape(str(Path(out)))}.</footer></body></html>\n"
    )


_LOO_NOTE = (
    '<p class="note">pearson / spearman: correlation of each benchmark with the '
    "plain mean of the other benchmarks, over variants with every benchmark scored. "
    "A benchmark that tracks the others has a high value; one that does not, or a "
    "broken one (as DROP was on the v1 leaderboard), stands out with a low one.</p>"
)


_HEALTH_NOTE = (
    '<p class="note">From lbnorm.analysis.health: per benchmark, the rank correlation '
    "with the leave-one-out average, the share of models at the floor or ceiling, and "
    "whether a cluster of models of every strength is stuck at the bottom; per subtask, "
    "whether its bound sits above the scores and whether it tracks its siblings.</p>"
)


def _snapshot(out: str | Path, *, label: str) -> Snapshot:
    board = read_output_table(out, "leaderboard")
    subtasks = (
        read_output_table(
            out,
            "subtasks",
            columns=[*KEY_COLUMNS, "benchmark", "subtask", "lower_bound", "is_clipped"],
        )
        if has_table(out, "subtasks")
        else None
    )
    return Snapshot(
        leaderboard=board,
        benchmarks=benchmark_columns(board.columns),
        subtasks=subtasks,
        label=label,
    )


def _tables_html(tables: list[tuple[str, pd.DataFrame]], *, digits: int) -> str:
    return "".join(
        f"<h3>{html.escape(name)}</h3>"
        + (
            _table_html(
                frame,
                digits=digits,
                highlight=frame["status"].eq("fail").to_numpy(dtype=bool)
                if "status" in frame.columns
                else None,
            )
            if len(frame)
            else ""
        )
        for name, frame in tables
    )


def _present(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    return [name for name in columns if name in frame.columns]


def _provenance_html(manifest: dict[str, object], board: pd.DataFrame) -> str:
    suite = manifest.get("suite", {})
    inputs = manifest.get("inputs", [])
    suite_text = (
        f"suite {suite.get('name', '')} (sha256 {str(suite.get('sha256', ''))[:12]})"
        if isinstance(suite, dict)
        else ""
    )
    parts = [
        suite_text,
        f"{len(inputs) if isinstance(inputs, list) else 0:,} input file(s)",
        f"{board['model'].nunique():,} models, {len(board):,} variants, "
        f"{int(board['is_complete'].sum()):,} complete, {int(board['rank'].notna().sum()):,} ranked",
        f"written {manifest.get('created_at', '')}",
    ]
    return html.escape(" · ".join(part for part in parts if part))


def _leaderboard_html(
    board: pd.DataFrame, names: list[str], out: str | Path, top: int
) -> str:
    extras = [c for c in ("params_b", "size_class") if c in metadata_columns(out)]
    groups = [c for c in board.columns if str(c).startswith("rank_within_")]
    shown = board.head(top)[
        ["rank", *groups, "model", "precision", *extras, "average", *names]
    ]
    is_flagged = (
        board.head(top)["flagged"].astype("boolean").fillna(False).to_numpy(dtype=bool)
        if "flagged" in board.columns
        else np.zeros(len(shown), dtype=bool)
    )
    table = _table_html(shown, digits=2, highlight=is_flagged)
    flagged_note = (
        f'<p class="note">Highlighted rows are flagged ({int(is_flagged.sum())} shown).</p>'
        if is_flagged.any()
        else ""
    )
    return f'<div class="scroll">{table}</div>{flagged_note}'


def _table_html(
    frame: pd.DataFrame, *, digits: int, highlight: np.ndarray | None = None
) -> str:
    """An HTML table: text left, numbers right and rounded, everything escaped."""
    is_text = {
        name: not pd.api.types.is_numeric_dtype(frame[name])
        or pd.api.types.is_bool_dtype(frame[name])
        for name in frame.columns
    }
    head = "".join(
        f'<th class="{"text" if is_text[name] else "num"}">{html.escape(str(name))}</th>'
        for name in frame.columns
    )
    cells = [
        _cells(name, _cell_texts(frame[name], digits=digits), is_text=is_text[name])
        for name in frame.columns
    ]
    is_marked = highlight if highlight is not None else np.zeros(len(frame), dtype=bool)
    opening = pd.Series(np.where(is_marked, '<tr class="marked">', "<tr>"), dtype="str")
    rows = (
        opening.str.cat(pd.concat(cells, axis=1)) + "</tr>"
        if len(frame)
        else pd.Series([], dtype="str")
    )
    return (
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _cells(name: object, texts: list[str], *, is_text: bool) -> pd.Series:
    values = pd.Series(texts, dtype="str")
    if name == "model":  # long names are cut by CSS; the full name shows on hover
        return '<td class="text model" title="' + values + '">' + values + "</td>"
    return f'<td class="{"text" if is_text else "num"}">' + values + "</td>"


def _cell_texts(column: pd.Series, *, digits: int) -> list[str]:
    return [
        ""
        if pd.isna(value)
        else f"{value:,.{digits}f}"
        if isinstance(value, float)
        else html.escape(str(value))
        for value in column.tolist()
    ]


def _figure_html(png: bytes, *, alt: str, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(alt)}" width="420" height="300" '
        f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}</figcaption></figure>'
    )


def _histogram(figure_type: type[Figure], scores: pd.Series, name: str) -> bytes:
    values = scores.dropna().to_numpy(dtype=np.float64)
    figure, axes = _axes(figure_type)
    counts, edges = np.histogram(values, bins=50, range=(0.0, 100.0))
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
        )
    axes.set_title(f"{name} (n = {len(values):,})", fontsize=10)
    axes.set_xlabel("normalized score (0-100)", fontsize=9)
    axes.set_ylabel("variants", fontsize=9)
    axes.set_xlim(0, 100)
    axes.tick_params(labelsize=8)
    return _png(figure)


def _scatter(figure_type: type[Figure], pairs: pd.DataFrame, name: str) -> bytes:
    x = pairs["others"].to_numpy(dtype=np.float64)
    y = pairs["score"].to_numpy(dtype=np.float64)
    figure, axes = _axes(figure_type)
    axes.scatter(
        x, y, s=4, alpha=0.3 if len(x) > 500 else 0.8, color="#4c72b0", linewidths=0
    )
    title = name
    if len(x) > 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
        slope, intercept = np.polyfit(x, y, 1)
        line = np.array([x.min(), x.max()])
        axes.plot(line, slope * line + intercept, color="#c44e52", linewidth=1.2)
        title = f"{name}: r = {np.corrcoef(x, y)[0, 1]:.2f}"
    if len(y):
        axes.set_ylim(
            bottom=min(-1.0, float(y.min()))
        )  # scores stop at 0; the fit need not
    axes.set_title(title, fontsize=10)
    axes.set_xlabel("mean of the other benchmarks", fontsize=9)
    axes.set_ylabel(name, fontsize=9)
    axes.tick_params(labelsize=8)
    return _png(figure)


def _axes(figure_type: type[Figure]) -> tuple[Figure, Axes]:
    # fixed margins: the figures are all alike, and a layout engine doubles the time
    figure = figure_type(figsize=(4.2, 3.0), dpi=100)
    figure.subplots_adjust(left=0.15, right=0.97, bottom=0.15, top=0.9)
    return figure, figure.subplots()


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _import_figure() -> type[Figure]:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        msg = (
            "the HTML report's plots need matplotlib, which is not installed.\n"
            "Hint: pip install 'lbnorm[report]' (or pip install matplotlib)."
        )
        raise LbnormError(msg) from exc
    return Figure
