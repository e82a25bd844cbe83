"""One self-contained HTML report of an output directory, to explore in a browser.

The page holds the run's provenance; the whole leaderboard, searchable by model
name and sortable by any column, where a row opens the variant's benchmark and
subtask scores; a summary and a score distribution per benchmark (each on its
own range); each benchmark plotted against the leave-one-out average of the
others, one point per variant that names it on hover (a benchmark that measures
what the rest measure lines up with them, one that does not, DROP on the v1
leaderboard, is a cloud); the health checks exactly as ``lbnorm health OUT``
computes them (:func:`lbnorm.analysis.health.check_directory`); and, given an
older output, what changed, in ``lbnorm diff``'s words and figures.

Everything is inline: the data as JSON, one script, the style, the scatter plots
as SVG and the histograms as PNG ``data:`` URIs (matplotlib, imported only when a
report is rendered). The page loads nothing, and a Content-Security-Policy lets
only its own script run. Names are text, never markup: model and benchmark
names reach the page through ``textContent`` and HTML escaping, and matplotlib's
math parsing is off for every label.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm.analysis.align import align_variants, group_codes, take_at
from lbnorm.analysis.diff import Diff, diff_snapshots, read_snapshot
from lbnorm.analysis.health import (
    HEALTH_COLUMNS,
    OutputHealth,
    check_directory,
    leave_one_out,
)
from lbnorm.analysis.render import (
    HEALTH_FIGURES,
    cell_text,
    cut_list,
    diff_parts,
    health_tables,
    is_number_column,
)
from lbnorm.core.schemas import benchmark_columns
from lbnorm.faces.report_assets import SCRIPT, STYLE, page
from lbnorm.faces.report_plots import (
    axis_ticks,
    histogram_html,
    import_figure,
    padded_range,
)
from lbnorm.faces.show import with_tied_groups
from lbnorm.output.reader import Output

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "ReportTables",
    "diff_html",
    "read_report_tables",
    "render_report",
    "summarize_benchmarks",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportTables:
    """What the report shows, before it is drawn (the page is built from these).

    Attributes:
        out: The output directory (its ``manifest.json`` read).
        leaderboard: Its leaderboard, in rank order.
        benchmarks: The benchmark columns, in suite order.
        metadata: The leaderboard's metadata columns (joined at run time).
        health: The health table, exactly as ``lbnorm health OUT`` computes it.
        others: The leave-one-out average of each score (the health checks'
            :func:`~lbnorm.analysis.health.leave_one_out`, with the same
            weights), aligned with ``leaderboard[benchmarks]``.
        stderr: The benchmark scores' standard errors, aligned the same way;
            None when unknown.
        subtasks: The subtask table (with ``raw_score`` and
            ``normalized_score``); None for a ``--no-subtasks`` output.
        diff: The comparison with the older output, if one was given.
        previous: The older output's name, if one was given.
    """

    out: Output
    leaderboard: pd.DataFrame
    benchmarks: tuple[str, ...]
    metadata: tuple[str, ...]
    health: pd.DataFrame
    others: pd.DataFrame
    stderr: pd.DataFrame | None
    subtasks: pd.DataFrame | None
    diff: Diff | None = None
    previous: str | None = None


def read_report_tables(
    out: Output | str | Path, *, previous: Output | str | Path | None = None
) -> ReportTables:
    """Read an output directory (and an older one) into the tables of its report.

    The health figures come from :func:`lbnorm.analysis.health.check_directory`,
    the code ``lbnorm health OUT`` runs; the diff from the snapshots ``lbnorm
    diff`` reads (with rank intervals where the suites still load).

    Args:
        out: The output directory.
        previous: An older output directory to compare with.

    Returns:
        The tables.

    Raises:
        InputError: `out` (or `previous`) is not an lbnorm output directory.
    """
    out = Output.open(out, "leaderboard")
    if len(benchmark_columns(out.schema("leaderboard").names)) < 2:
        checked = _unchecked(out)  # nothing to hold a benchmark against
    else:
        checked = check_directory(out, columns=["normalized_score"])
    suite, _ = out.suite()  # the groups of the level the board ranks by
    level = "average" if suite is None else suite.board.rank_by
    board = with_tied_groups(checked.snapshot.leaderboard, out, level)
    names = checked.benchmarks
    diff = None
    if previous is not None:
        diff = diff_snapshots(
            read_snapshot(Output.open(previous, "leaderboard")), read_snapshot(out)
        )
    return ReportTables(
        out=out,
        leaderboard=board,
        benchmarks=names,
        metadata=tuple(out.metadata_columns()),
        health=checked.health,
        others=leave_one_out(board[list(names)], weights=checked.weights),
        stderr=checked.stderr,
        subtasks=checked.snapshot.subtasks,
        diff=diff,
        previous=None if previous is None else str(previous),
    )


def render_report(
    out: Output | str | Path,
    *,
    previous: Output | str | Path | None = None,
    top: int = 50,
    title: str | None = None,
) -> str:
    """Render an output directory as one self-contained HTML page.

    Args:
        out: The output directory.
        previous: An older output directory; adds what changed since.
        top: Leaderboard rows of the static table shown when JavaScript is off
            (the interactive table holds every variant).
        title: Page title; defaults to the suite's name.

    Returns:
        The HTML text.

    Raises:
        LbnormError: matplotlib is not installed.
        InputError: `out` (or `previous`) is not an lbnorm output directory.
    """
    figure_type = import_figure()
    tables = read_report_tables(out, previous=previous)
    return _page(tables, figure_type, top=top, title=title)


def summarize_benchmarks(
    leaderboard: pd.DataFrame, *, benchmarks: tuple[str, ...] | None = None
) -> pd.DataFrame:
    """Per benchmark, the distribution of its normalized scores (0-100).

    Args:
        leaderboard: The leaderboard.
        benchmarks: The benchmark columns (default: those with a ``Raw`` twin).

    Returns:
        ``benchmark``, ``variants`` (scored), ``mean``, ``sd``, ``min``,
        ``median``, ``max``.

    Examples:
        >>> board = pd.DataFrame({"A": [0.0, 50.0, 100.0], "A Raw": [0.1, 0.5, 1.0]})
        >>> summarize_benchmarks(board)[["benchmark", "variants", "median", "max"]]
          benchmark  variants  median    max
        0         A         3    50.0  100.0
    """
    names = list(benchmarks or benchmark_columns(leaderboard.columns))
    scores = leaderboard[names].astype("float64")
    return pd.DataFrame(
        {
            "benchmark": names,
            "variants": scores.count().to_numpy(),
            "mean": scores.mean().to_numpy(),
            "sd": scores.std().to_numpy(),
            "min": scores.min().to_numpy(),
            "median": scores.median().to_numpy(),
            "max": scores.max().to_numpy(),
        }
    )


def diff_html(
    labels: tuple[str, str],
    parts: list[tuple[str, str, pd.DataFrame]],
    *,
    top: int,
    digits: int = 2,
) -> str:
    """A diff's section: ``lbnorm diff``'s tables, each list cut with how many more."""
    old, new = (html.escape(label) for label in labels)
    shown_parts = []
    for kind, heading, table in parts:
        shown, more = cut_list(table, largest=top) if kind == "list" else (table, 0)
        shown_parts.append(f"<h3>{html.escape(heading)}</h3>")
        shown_parts.append(_table_html(shown, digits=digits, null="n/a"))
        if more:
            shown_parts.append(
                f'<p class="note">... and {more:,} more: <code>lbnorm diff {old} {new} '
                "--largest N</code> lists more, <code>--out DIR</code> writes every "
                "variant to diff_models.parquet.</p>"
            )
    return "".join(shown_parts)


def _unchecked(out: Output) -> OutputHealth:
    """An output of one benchmark: no health checks (they compare benchmarks)."""
    snapshot = read_snapshot(
        out, intervals=False, columns=["raw_score", "normalized_score"]
    )
    names = tuple(snapshot.benchmarks)
    return OutputHealth(
        health=pd.DataFrame({name: pd.Series(dtype=object) for name in HEALTH_COLUMNS}),
        snapshot=snapshot,
        benchmarks=names,
        weights=(1.0,) * len(names),
        stderr=None,
    )


# --------------------------------------------------------------------------- page


def _page(
    tables: ReportTables, figure_type: type[Figure], *, top: int, title: str | None
) -> str:
    suite = tables.out.manifest.get("suite", {})
    suite_name = str(suite.get("name", "")) if isinstance(suite, dict) else ""
    title = title or f"lbnorm report: {suite_name or tables.out.path.name}"
    names = tables.benchmarks
    board = tables.leaderboard
    # a suite's handful of benchmarks
    histograms = [histogram_html(figure_type, board[name], name) for name in names]
    scatters = [_scatter_html(tables, name) for name in names if len(names) > 1]
    sections = [
        (
            "leaderboard",
            f"Leaderboard ({len(board):,} variants)",
            _leaderboard_html(tables, top=top),
        ),
        (
            "benchmarks",
            "Benchmarks",
            _table_html(summarize_benchmarks(board, benchmarks=names), digits=2)
            + '<p class="note">variants: variants scored; mean, sd, min, median, max: '
            "of their normalized scores (0-100). How each benchmark tracks the others, "
            'and how many models sit at its floor: <a href="#health">health checks</a>.</p>',
        ),
        (
            "distributions",
            "Score distributions",
            f'<div class="grid">{"".join(histograms)}</div>',
        ),
        (
            "leave-one-out",
            "Each benchmark against the others",
            _LOO_NOTE + f'<div class="grid">{"".join(scatters)}</div>'
            if len(names) > 1
            else _ONE_BENCHMARK_NOTE,
        ),
        (
            "health",
            "Health checks",
            _health_html(tables.health) if len(names) > 1 else _ONE_BENCHMARK_NOTE,
        ),
    ]
    if tables.diff is not None:
        sections.append(
            (
                "diff",
                f"Changes since {tables.previous}",
                _DIFF_NOTE
                + diff_html(
                    tables.diff.labels, diff_parts(tables.diff), top=_DIFF_LISTED
                ),
            )
        )
    script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    return page(
        title,
        sections,
        policy="default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{script_hash}'",
        style=STYLE,
        meta=_provenance_html(tables),
        version=str(tables.out.manifest.get("version", "")),
        source=str(tables.out),
        scripts='<div id="tip" role="tooltip" hidden></div>'
        f'<script type="application/json" id="lbnorm-data">{_payload(tables)}</script>'
        f"<script>{SCRIPT}</script>",
    )


_LOO_NOTE = (
    '<p class="note">Each point is a variant: its score on the benchmark (y) against '
    "its leave-one-out average (x), the weighted mean of its other benchmarks, as the "
    "health checks compute it; rho is the health table's Spearman correlation. A "
    "benchmark that tracks the others lines up; one that does not, or a broken one (as "
    "DROP was on the v1 leaderboard), is a cloud. Hover a point to see which model it "
    "is; click it to open the model's scores.</p>"
)

_ONE_BENCHMARK_NOTE = (
    '<p class="note">This output has one benchmark: there is no other benchmark to '
    "hold it against, so no leave-one-out plot and no health checks.</p>"
)

#: Variants each list of the diff section names, as ``lbnorm diff``'s default ``--largest``.
_DIFF_LISTED = 10

_DIFF_NOTE = (
    '<p class="note">As <code>lbnorm diff</code> reports it (old: the previous output, '
    "new: this one). The leaderboard above has a <b>move</b> column (places up since "
    "the previous output; blank for a variant that is new): sort by it to see every "
    "move.</p>"
)


def _health_html(health: pd.DataFrame) -> str:
    counts = health["status"].value_counts()
    verdict = ", ".join(
        f"{int(counts.get(status, 0)):,} {status}"
        for status in ("fail", "skipped", "pass")
    )
    parts = [
        '<p class="note">Computed as <code>lbnorm health OUT</code> computes it '
        f"(the same code, the same figures): {html.escape(verdict)} "
        "(a check needs at least <code>min_models</code> models, else it is skipped).</p>"
    ]
    for kind, name, frame in health_tables(health):
        table = _table_html(
            frame,
            digits=3,
            highlight=frame["status"].eq("fail").to_numpy(dtype=bool),
            null="n/a",
        )
        if kind == "subtasks":
            parts.append(
                f"<details><summary>{html.escape(name)}</summary>{table}</details>"
            )
        else:
            parts.append(f"<h3>{html.escape(name)}</h3>{table}")
    glossary = "".join(
        f"<dt>{html.escape(label)}</dt><dd>{html.escape(text)}</dd>"
        for label, text in HEALTH_FIGURES.items()
    )
    parts.append(f'<dl class="glossary">{glossary}</dl>')
    return "".join(parts)


def _provenance_html(tables: ReportTables) -> str:
    manifest, board = tables.out.manifest, tables.leaderboard
    suite = manifest.get("suite", {})
    suite_text = (
        f"suite {suite.get('name', '')} (sha256 {str(suite.get('sha256', ''))[:12]})"
        if isinstance(suite, dict)
        else ""
    )
    parts = [
        suite_text,
        f"{tables.out.inputs().num_rows:,} input file(s)",
        f"{board['model'].nunique():,} models, {len(board):,} variants, "
        f"{int(board['is_complete'].sum()):,} complete, {int(board['rank'].notna().sum()):,} ranked",
        f"written {manifest.get('created_at', '')}",
    ]
    return html.escape(" · ".join(part for part in parts if part))


# ---------------------------------------------------------------- leaderboard


def _leaderboard_html(tables: ReportTables, *, top: int) -> str:
    board = tables.leaderboard
    is_flagged = _flagged(board)
    tied = ["tied"] if "tied" in board.columns else []
    columns = ["rank", *tied, "model", "precision", "average", *tables.benchmarks]
    static = _table_html(board.head(top)[columns], digits=2, highlight=is_flagged[:top])
    flagged = (
        f'<p class="note">Highlighted rows are flagged in the metadata ({int(is_flagged.sum()):,}).</p>'
        if is_flagged.any()
        else ""
    )
    if tied:
        flagged += (
            '<p class="note">tied: the group of statistically tied variants, '
            "consecutive variants no paired test on their common items separates "
            f"({int(board['tied'].max()):,} groups; lbnorm run --paired, docs/paired.md).</p>"
        )
    return (
        '<div class="tools"><label>Find a model <input id="filter" type="search" '
        'placeholder="part of a model name" autocomplete="off" spellcheck="false"></label> '
        '<span id="count" aria-live="polite"></span></div>'
        '<p class="note">Click a column heading to sort (again to reverse), a row to see '
        "the variant's benchmark and subtask scores.</p>"
        '<div class="scroll board"><table id="board"><thead><tr></tr></thead>'
        '<tbody></tbody></table><p class="more"><button id="more" type="button" hidden>'
        'show more</button> <button id="all" type="button" hidden>show all</button></p></div>'
        f"<noscript><p>The interactive table needs JavaScript; the top {min(top, len(board)):,} "
        f"rows:</p>{static}</noscript>{flagged}"
    )


def _flagged(board: pd.DataFrame) -> npt.NDArray[np.bool_]:
    if "flagged" not in board.columns:
        return np.zeros(len(board), dtype=bool)
    return np.asarray(
        board["flagged"].astype("boolean").fillna(False).to_numpy(dtype=bool)
    )


def _payload(tables: ReportTables) -> str:
    """The page's data as JSON, safe inside a ``<script>`` element."""
    board = tables.leaderboard
    names = list(tables.benchmarks)
    groups = [c for c in board.columns if str(c).startswith("rank_within_")]
    extras = [c for c in ("params_b", "size_class") if c in tables.metadata]
    spec: list[tuple[str, str, str, int]] = [  # column, label, kind, first direction
        ("rank", "rank", "int", 1),
        *((("tied", "tied", "int", 1),) if "tied" in board.columns else ()),
        *((name, name.replace("_", " "), "int", 1) for name in groups),
        ("model", "model", "text", 1),
        ("precision", "precision", "text", 1),
        *(
            (name, name, "num" if is_number_column(board[name]) else "text", -1)
            for name in extras
        ),
        ("average", "average", "num", -1),
        *((name, name, "num", -1) for name in names),
    ]
    columns: list[dict[str, object]] = []
    values: list[str] = []
    for name, label, kind, first in spec:  # the table's dozen columns
        columns.append(
            {"label": label, "kind": kind, "first": first}
            | ({"model": True} if name == "model" else {})
            | ({"benchmark": names.index(name)} if name in names else {})
        )
        values.append(_json_column(board[name], kind=kind, digits=2))
    if tables.diff is not None:
        columns.append({"label": "move", "kind": "move", "first": -1})
        models = tables.diff.models  # places up since then (old - new), per row
        moves = take_at(models, "rank_move", align_variants(board, models))
        values.append(_json_column(pd.Series(moves), kind="int"))
    facts = [
        ("revision", board["revision"]),
        ("chat template", board["chat_template"]),
        *((name, board[name]) for name in tables.metadata),
    ]
    parts = {
        "columns": json.dumps(columns),
        "values": "[" + ",".join(values) + "]",
        "flagged": _json_column(pd.Series(_flagged(board)), kind="bool"),
        "facts": "["
        + ",".join(
            f'{{"label":{json.dumps(label)},"values":{_json_column(column, kind="text")}}}'
            for label, column in facts
        )
        + "]",
        "raw": "["
        + ",".join(_json_column(board[f"{n} Raw"], kind="num", digits=4) for n in names)
        + "]",
        "stderr": "null"
        if tables.stderr is None
        else "["
        + ",".join(_json_column(tables.stderr[n], kind="num", digits=2) for n in names)
        + "]",
        "benchmarks": json.dumps(names),
        "subtasks": _subtask_payload(tables),
        "points": "[" + ",".join(_points_payload(tables, n) for n in names) + "]",
    }
    text = "{" + ",".join(f'"{key}":{value}' for key, value in parts.items()) + "}"
    # inside <script>, "</script>" or "<!--" in a name would end the element
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def _json_column(column: pd.Series, *, kind: str, digits: int = 2) -> str:
    """A column as a JSON array: numbers rounded, nulls as null, text as text."""
    series = column.reset_index(drop=True)
    if kind in {"int", "move"}:
        return str(series.astype("Int64").to_json(orient="records"))
    if kind == "num":
        numbers = series.astype("float64")
        return str(numbers.to_json(orient="records", double_precision=digits))
    if kind == "bool":
        return str(series.astype("boolean").fillna(False).to_json(orient="records"))
    if pd.api.types.is_bool_dtype(series):
        text = series.astype("boolean").map({True: "yes", False: "no"})
    else:
        text = series.astype("string")
    return str(text.fillna("").astype("object").to_json(orient="records"))


def _subtask_payload(tables: ReportTables) -> str:
    """Subtask scores as two variant-by-subtask matrices (raw, normalized), suite order."""
    subtasks = tables.subtasks
    if subtasks is None or not len(subtasks):
        return "null"
    board = tables.leaderboard
    codes, first = group_codes(subtasks, ["benchmark", "subtask"])
    keys = subtasks.iloc[first][["benchmark", "subtask", "lower_bound"]]
    position = pd.Index(tables.benchmarks).get_indexer(
        pd.Index(keys["benchmark"].astype("str"))
    )
    order = np.lexsort(
        (
            np.arange(len(first)),
            np.where(position < 0, len(tables.benchmarks), position),
        )
    )
    column_of = np.empty(len(order), dtype=np.int64)
    column_of[order] = np.arange(len(order))
    variant = align_variants(subtasks, board)
    is_shown = variant >= 0
    shape = (len(board), len(first))
    matrices = []
    for name, digits in (("raw_score", 4), ("normalized_score", 2)):  # two matrices
        matrix = np.full(shape, np.nan)
        matrix[variant[is_shown], column_of[codes[is_shown]]] = subtasks[name].to_numpy(
            dtype=np.float64, na_value=np.nan
        )[is_shown]
        matrices.append(
            str(pd.DataFrame(matrix).to_json(orient="values", double_precision=digits))
        )
    ordered = keys.iloc[order]
    return (
        f'{{"benchmark":{_json_column(ordered["benchmark"], kind="text")},'
        f'"subtask":{_json_column(ordered["subtask"], kind="text")},'
        f'"bound":{_json_column(ordered["lower_bound"], kind="num", digits=4)},'
        f'"raw":{matrices[0]},"score":{matrices[1]}}}'
    )


def _plotted(tables: ReportTables, name: str) -> IntArray:
    """The leaderboard rows a scatter plot draws, in drawing order (rank 1 last, on top)."""
    score = tables.leaderboard[name].to_numpy(dtype=np.float64, na_value=np.nan)
    others = tables.others[name].to_numpy(dtype=np.float64, na_value=np.nan)
    return np.flatnonzero(~np.isnan(score) & ~np.isnan(others))[::-1].astype(np.int64)


def _points_payload(tables: ReportTables, name: str) -> str:
    rows = _plotted(tables, name)
    others = pd.Series(tables.others[name].to_numpy(dtype=np.float64)[rows])
    return (
        f'{{"rows":{json.dumps(rows.tolist())},'
        f'"others":{others.to_json(orient="records", double_precision=2)}}}'
    )


def _table_html(
    frame: pd.DataFrame,
    *,
    digits: int,
    highlight: npt.NDArray[np.bool_] | None = None,
    null: str = "",
) -> str:
    """A static HTML table: text left, numbers right and rounded, everything escaped."""
    is_text = {name: not is_number_column(frame[name]) for name in frame.columns}
    head = "".join(
        f'<th class="{"text" if is_text[name] else "num"}">{html.escape(str(name))}</th>'
        for name in frame.columns
    )
    cells = [
        _cells(
            name,
            [
                html.escape(cell_text(value, digits=digits, null=null))
                for value in frame[name].tolist()  # a summary's rows, or --top rows
            ],
            is_text=is_text[name],
        )
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


# ---------------------------------------------------------------------- plots


def _scatter_html(tables: ReportTables, name: str) -> str:
    """A benchmark against its leave-one-out average, one ``<circle>`` per variant.

    The circles are in the order of :func:`_plotted`, which the page's data
    repeats: the script names the variant under the pointer from that order.
    The heading's rho is the health table's.
    """
    rows = _plotted(tables, name)
    x = tables.others[name].to_numpy(dtype=np.float64)[rows]
    y = tables.leaderboard[name].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
    health = tables.health
    rho = health.loc[
        health["level"].eq("benchmark") & health["benchmark"].eq(name), "loo_spearman"
    ].to_numpy(dtype=np.float64)
    plot = tables.benchmarks.index(name)
    n_others = len(tables.benchmarks) - 1
    left, right, top, bottom = 54.0, 410.0, 30.0, 256.0
    x_range = padded_range(x)
    y_range = padded_range(y)
    x_ticks, y_ticks = axis_ticks(*x_range), axis_ticks(*y_range)

    def to_x(values: FloatArray) -> FloatArray:
        return left + (values - x_range[0]) / (x_range[1] - x_range[0]) * (right - left)

    def to_y(values: FloatArray) -> FloatArray:
        return bottom - (values - y_range[0]) / (y_range[1] - y_range[0]) * (
            bottom - top
        )

    # circles in tenths of a unit, as integers: short, and formatted by numpy
    cx = np.rint(to_x(x) * 10).astype(np.int64).astype(str)
    cy = np.rint(to_y(y) * 10).astype(np.int64).astype(str)
    circles = "".join(
        np.char.add(
            np.char.add(np.char.add('<circle cx="', cx), np.char.add('" cy="', cy)),
            '" r="22"/>',
        ).tolist()
    )
    grid = "".join(
        f'<line class="grid" x1="{px:.1f}" x2="{px:.1f}" y1="{top}" y2="{bottom}"/>'
        f'<text class="tick" x="{px:.1f}" y="{bottom + 14}" text-anchor="middle">{tick:g}</text>'
        for tick, px in zip(x_ticks, to_x(x_ticks), strict=True)
    ) + "".join(
        f'<line class="grid" x1="{left}" x2="{right}" y1="{py:.1f}" y2="{py:.1f}"/>'
        f'<text class="tick" x="{left - 5}" y="{py + 3.5:.1f}" text-anchor="end">{tick:g}</text>'
        for tick, py in zip(y_ticks, to_y(y_ticks), strict=True)
    )
    fit = ""
    if len(x) > 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
        slope, intercept = np.polyfit(x, y, 1)
        ends = np.array([x.min(), x.max()])
        fx, fy = to_x(ends), to_y(np.clip(slope * ends + intercept, *y_range))
        fit = f'<line class="fit" x1="{fx[0]:.1f}" y1="{fy[0]:.1f}" x2="{fx[1]:.1f}" y2="{fy[1]:.1f}"/>'
    label = html.escape(name)
    heading = (
        f"{label}: rho = {rho[0]:.3f}" if len(rho) and np.isfinite(rho[0]) else label
    )
    return (
        f'<figure><svg class="scatter" data-plot="{plot}" viewBox="0 0 420 300" role="img" '
        f'aria-label="{label} against the mean of the other benchmarks, {len(x):,} variants">'
        f'<text class="title" x="{(left + right) / 2}" y="18" text-anchor="middle">{heading}</text>'
        f'<rect class="frame" x="{left}" y="{top}" width="{right - left}" height="{bottom - top}"/>'
        f'{grid}<g class="pts" transform="scale(0.1)">{circles}</g>{fit}'
        '<circle class="hl" r="4.5" cx="-10" cy="-10"/>'
        f'<text class="axis" x="{(left + right) / 2}" y="292" text-anchor="middle">'
        f"leave-one-out average (mean of the other {n_others})</text>"
        f'<text class="axis" transform="translate(14 {(top + bottom) / 2}) rotate(-90)" '
        f'text-anchor="middle">{label}</text></svg>'
        f"<figcaption>{label} (y) against the weighted mean of the variant's other "
        f"{n_others} benchmarks (x): {len(x):,} variants; line: least squares.</figcaption></figure>"
    )
