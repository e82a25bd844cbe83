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
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm.analysis.align import align_rows, align_variants, group_codes
from lbnorm.analysis.diff import Diff, Snapshot, diff_snapshots, read_snapshot
from lbnorm.analysis.health import (
    HEALTH_COLUMNS,
    OutputHealth,
    check_directory,
    leave_one_out,
)
from lbnorm.analysis.render import (
    HEALTH_BENCHMARK_LABELS,
    HEALTH_FIGURES,
    HEALTH_SUBTASK_LABELS,
    diff_per_benchmark,
    diff_summary,
    largest_rank_moves,
)
from lbnorm.core.errors import LbnormError
from lbnorm.core.schemas import KEY_COLUMNS, benchmark_columns
from lbnorm.output.outdir import (
    has_table,
    input_count,
    metadata_columns,
    read_manifest,
    read_output_table,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "ReportTables",
    "diff_tables",
    "health_tables",
    "read_report_tables",
    "render_report",
    "summarize_benchmarks",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: Matplotlib draws every label as given: no mathtext, no TeX.
_PLAIN_TEXT: dict[str, Any] = {"parse_math": False, "usetex": False}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReportTables:
    """What the report shows, before it is drawn (the page is built from these).

    Attributes:
        out: The output directory.
        manifest: Its ``manifest.json``.
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
        summary: :func:`summarize_benchmarks` of the leaderboard.
        diff: The comparison with the older output, if one was given.
        previous: The older output's name, if one was given.
    """

    out: Path
    manifest: dict[str, object]
    leaderboard: pd.DataFrame
    benchmarks: tuple[str, ...]
    metadata: tuple[str, ...]
    health: pd.DataFrame
    others: pd.DataFrame
    stderr: pd.DataFrame | None
    subtasks: pd.DataFrame | None
    summary: pd.DataFrame
    diff: Diff | None = None
    previous: str | None = None


def read_report_tables(
    out: str | Path, *, previous: str | Path | None = None
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
    out = Path(out)
    manifest = read_manifest(out)
    if len(benchmark_columns(read_output_table(out, "leaderboard").columns)) < 2:
        checked = _unchecked(out)  # nothing to hold a benchmark against
    else:
        checked = check_directory(out, columns=["normalized_score"])
    board = checked.snapshot.leaderboard
    names = checked.benchmarks
    diff = None
    if previous is not None:
        diff = diff_snapshots(_diff_side(previous), _diff_side(out))
    return ReportTables(
        out=out,
        manifest=manifest,
        leaderboard=board,
        benchmarks=names,
        metadata=tuple(metadata_columns(out)),
        health=checked.health,
        others=leave_one_out(board[list(names)], weights=checked.weights),
        stderr=checked.stderr,
        subtasks=checked.snapshot.subtasks,
        summary=summarize_benchmarks(board, benchmarks=names),
        diff=diff,
        previous=None if previous is None else str(previous),
    )


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
        top: Leaderboard rows of the static table shown when JavaScript is off
            (the interactive table holds every variant).
        title: Page title; defaults to the suite's name.

    Returns:
        The HTML text.

    Raises:
        LbnormError: matplotlib is not installed.
        InputError: `out` (or `previous`) is not an lbnorm output directory.
    """
    figure_type = _import_figure()
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


def health_tables(health: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The health table for display, with ``lbnorm health``'s headings.

    Args:
        health: The table from :mod:`lbnorm.analysis.health`.

    Returns:
        Named tables: every benchmark; the subtasks that failed (if any); every
        subtask.
    """
    benchmarks = health.loc[health["level"].eq("benchmark")]
    subtasks = health.loc[health["level"].eq("subtask")]
    failed = subtasks.loc[subtasks["status"].eq("fail")]

    def shown(frame: pd.DataFrame, labels: dict[str, str]) -> pd.DataFrame:
        return frame[list(labels)].rename(columns=labels).reset_index(drop=True)

    tables = [("Benchmarks", shown(benchmarks, HEALTH_BENCHMARK_LABELS))]
    if len(failed):
        tables.append(
            (
                f"Subtasks that fail ({len(failed)})",
                shown(failed, HEALTH_SUBTASK_LABELS),
            )
        )
    if len(subtasks):
        tables.append(
            (
                f"Subtasks ({len(subtasks)} checked, {len(failed)} failed)",
                shown(subtasks, HEALTH_SUBTASK_LABELS),
            )
        )
    return tables


def diff_tables(diff: Diff, *, top: int = 10) -> list[tuple[str, pd.DataFrame]]:
    """What changed, as ``lbnorm diff`` prints it: summary, bounds, per benchmark, moves.

    Args:
        diff: The comparison from :func:`lbnorm.analysis.diff.diff_snapshots`.
        top: Largest rank moves listed (either way).

    Returns:
        Named tables (the bounds table only if a bound changed).
    """
    tables = [("Summary", diff_summary(diff))]
    if len(diff.bounds):
        bounds = diff.bounds.rename(
            columns={"old_lower_bound": "old bound", "new_lower_bound": "new bound"}
        )
        tables.append((f"Lower bounds changed ({len(bounds)})", bounds))
    if len(diff.scores):
        tables.append(
            ("Per benchmark (normalized score, new - old)", diff_per_benchmark(diff))
        )
    moves = largest_rank_moves(diff, largest=top)
    tables.append((f"Largest rank moves ({len(moves)})", moves))
    return tables


def _unchecked(out: Path) -> OutputHealth:
    """An output of one benchmark: no health checks (they compare benchmarks)."""
    board = read_output_table(out, "leaderboard")
    names = tuple(benchmark_columns(board.columns))
    subtasks = (
        read_output_table(
            out,
            "subtasks",
            columns=[
                *KEY_COLUMNS,
                "benchmark",
                "subtask",
                "lower_bound",
                "raw_score",
                "normalized_score",
            ],
        )
        if has_table(out, "subtasks")
        else None
    )
    return OutputHealth(
        health=pd.DataFrame({name: pd.Series(dtype=object) for name in HEALTH_COLUMNS}),
        snapshot=Snapshot(
            leaderboard=board, benchmarks=names, subtasks=subtasks, label=str(out)
        ),
        benchmarks=names,
        weights=(1.0,) * len(names),
        stderr=None,
    )


def _diff_side(out: str | Path) -> Snapshot:
    """One side of the diff, as ``lbnorm diff`` reads it (a --no-subtasks output too)."""
    if has_table(out, "subtasks"):
        return read_snapshot(out)
    board = read_output_table(out, "leaderboard")
    return Snapshot(
        leaderboard=board, benchmarks=benchmark_columns(board.columns), label=str(out)
    )


# --------------------------------------------------------------------------- page


def _page(
    tables: ReportTables, figure_type: type[Figure], *, top: int, title: str | None
) -> str:
    suite = tables.manifest.get("suite", {})
    suite_name = str(suite.get("name", "")) if isinstance(suite, dict) else ""
    title = title or f"lbnorm report: {suite_name or tables.out.name}"
    names = tables.benchmarks
    board = tables.leaderboard
    histograms = [
        _histogram_html(figure_type, board[name], name) for name in names
    ]  # a suite's handful of benchmarks
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
            _table_html(tables.summary, digits=2)
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
                _DIFF_NOTE + _tables_html(diff_tables(tables.diff), digits=2),
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
    script_hash = base64.b64encode(hashlib.sha256(_SCRIPT.encode()).digest()).decode()
    policy = (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{script_hash}'"
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><title>{html.escape(title)}</title>'
        f"<style>{_STYLE}</style></head><body>"
        f"<header><h1>{html.escape(title)}</h1>"
        f'<p class="meta">{_provenance_html(tables)}</p><nav>{nav}</nav></header>'
        f"<main>{body}</main>"
        f"<footer>Generated by lbnorm {html.escape(str(tables.manifest.get('version', '')))} "
        f"from {html.escape(str(tables.out))}.</footer>"
        '<div id="tip" role="tooltip" hidden></div>'
        f'<script type="application/json" id="lbnorm-data">{_payload(tables)}</script>'
        f"<script>{_SCRIPT}</script></body></html>\n"
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
    for name, frame in health_tables(health):
        table = _table_html(
            frame,
            digits=3,
            highlight=frame["status"].eq("fail").to_numpy(dtype=bool),
            null="n/a",
        )
        if name.startswith("Subtasks ("):
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


def _tables_html(tables: list[tuple[str, pd.DataFrame]], *, digits: int) -> str:
    return "".join(
        f"<h3>{html.escape(name)}</h3>"
        + (_table_html(frame, digits=digits, null="n/a") if len(frame) else "")
        for name, frame in tables
    )


def _provenance_html(tables: ReportTables) -> str:
    manifest, board = tables.manifest, tables.leaderboard
    suite = manifest.get("suite", {})
    suite_text = (
        f"suite {suite.get('name', '')} (sha256 {str(suite.get('sha256', ''))[:12]})"
        if isinstance(suite, dict)
        else ""
    )
    parts = [
        suite_text,
        f"{input_count(tables.out):,} input file(s)",
        f"{board['model'].nunique():,} models, {len(board):,} variants, "
        f"{int(board['is_complete'].sum()):,} complete, {int(board['rank'].notna().sum()):,} ranked",
        f"written {manifest.get('created_at', '')}",
    ]
    return html.escape(" · ".join(part for part in parts if part))


# ---------------------------------------------------------------- leaderboard


def _leaderboard_html(tables: ReportTables, *, top: int) -> str:
    board = tables.leaderboard
    is_flagged = _flagged(board)
    columns = ["rank", "model", "precision", "average", *tables.benchmarks]
    static = _table_html(board.head(top)[columns], digits=2, highlight=is_flagged[:top])
    flagged = (
        f'<p class="note">Highlighted rows are flagged in the metadata ({int(is_flagged.sum()):,}).</p>'
        if is_flagged.any()
        else ""
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
        *((name, name.replace("_", " "), "int", 1) for name in groups),
        ("model", "model", "text", 1),
        ("precision", "precision", "text", 1),
        *(
            (name, name, "num" if _is_number(board[name]) else "text", -1)
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
        values.append(_json_column(_rank_moves(board, tables.diff), kind="int"))
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


def _is_number(column: pd.Series) -> bool:
    return bool(
        pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)
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


def _rank_moves(board: pd.DataFrame, diff: Diff) -> pd.Series:
    """Places moved up since the previous output (old - new), per leaderboard row."""
    at = align_rows(board, diff.models, on=KEY_COLUMNS)
    moves = (
        diff.models["rank_move"]
        .astype("Float64")
        .to_numpy(dtype=np.float64, na_value=np.nan)
    )
    return pd.Series(np.where(at >= 0, moves[np.maximum(at, 0)], np.nan))


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
    is_text = {name: not _is_number(frame[name]) for name in frame.columns}
    head = "".join(
        f'<th class="{"text" if is_text[name] else "num"}">{html.escape(str(name))}</th>'
        for name in frame.columns
    )
    cells = [
        _cells(
            name,
            _cell_texts(frame[name], digits=digits, null=null),
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


def _cell_texts(column: pd.Series, *, digits: int, null: str) -> list[str]:
    # one string per displayed cell: a summary's handful of rows, or --top rows
    return [
        null
        if value is None
        or value is pd.NA
        or (isinstance(value, float) and np.isnan(value))
        else f"{value:,.{digits}f}"
        if isinstance(value, float | np.floating)
        else f"{value:,}"
        if isinstance(value, int | np.integer)
        and not isinstance(value, bool | np.bool_)
        else html.escape(str(value))
        for value in column.tolist()
    ]


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
    x_range = _padded_range(x)
    y_range = _padded_range(y)
    x_ticks, y_ticks = _ticks(*x_range), _ticks(*y_range)

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


def _padded_range(values: FloatArray) -> tuple[float, float]:
    if not len(values):
        return 0.0, 100.0
    low, high = float(values.min()), float(values.max())
    pad = (high - low) * 0.03 or 0.5
    return low - pad, high + pad


def _ticks(low: float, high: float, count: int = 5) -> FloatArray:
    """Round tick values (1, 2 or 5 times a power of ten) within ``[low, high]``.

    Examples:
        >>> _ticks(-1.2, 31.0).tolist()
        [0.0, 10.0, 20.0, 30.0]
    """
    span = high - low
    step = 10.0 ** np.floor(np.log10(span / count))
    step *= next(m for m in (1.0, 2.0, 5.0, 10.0) if span / (step * m) <= count)
    start = np.ceil(low / step) * step
    ticks = np.arange(start, high + step * 1e-9, step)
    return np.asarray(np.round(ticks, 10) + 0.0, dtype=np.float64)


def _histogram_html(figure_type: type[Figure], scores: pd.Series, name: str) -> str:
    values = scores.dropna().to_numpy(dtype=np.float64)
    low, high = _histogram_range(values)
    png = _histogram(figure_type, values, name, (low, high))
    data = base64.b64encode(png).decode("ascii")
    label = html.escape(name)
    return (
        f'<figure><img alt="Distribution of {label} scores" width="420" height="300" '
        f'src="data:image/png;base64,{data}"><figcaption>{label}: normalized scores of the '
        f"{len(values):,} variants scored, on the axis from {low:.1f} to {high:.1f} "
        "(their own range); dashed line: median.</figcaption></figure>"
    )


def _histogram_range(values: FloatArray) -> tuple[float, float]:
    """The scores' own range (a point gets a unit-wide one)."""
    if not len(values):
        return 0.0, 100.0
    low, high = float(values.min()), float(values.max())
    return (low, high) if high > low else (low - 0.5, high + 0.5)


def _histogram(
    figure_type: type[Figure],
    values: FloatArray,
    name: str,
    limits: tuple[float, float],
) -> bytes:
    return _png(_histogram_figure(figure_type, values, name, limits))


def _histogram_figure(
    figure_type: type[Figure],
    values: FloatArray,
    name: str,
    limits: tuple[float, float],
) -> Figure:
    figure, axes = _axes(figure_type)
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
            "Hint: pip install matplotlib (from a clone of lbnorm: pip install '.[report]')."
        )
        raise LbnormError(msg) from exc
    return Figure


_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1b1f24;background:#fff}
header,main,footer{max-width:1320px;margin:0 auto;padding:0 24px}
header{padding-top:24px;border-bottom:1px solid #d8dee4}
h1{font-size:24px;margin:0 0 6px;overflow-wrap:anywhere}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #eaeef2;padding-bottom:4px;overflow-wrap:anywhere}
h3{font-size:15px;margin:18px 0 6px;overflow-wrap:anywhere}
.meta{color:#57606a;margin:0 0 12px;overflow-wrap:anywhere}nav a{margin-right:14px;color:#0969da;text-decoration:none}nav{padding-bottom:12px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;margin:8px 0;font-size:13px}
th,td{padding:3px 9px;border-bottom:1px solid #eaeef2;text-align:right;white-space:nowrap}
th{background:#f6f8fa;position:sticky;top:0;z-index:1}td.text,th.text{text-align:left}
td.model{max-width:320px;overflow:hidden;text-overflow:ellipsis}
tr:nth-child(even) td{background:#fbfcfd}tr.marked td{color:#9a3800;background:#fff4e5}
.scroll{max-height:560px;overflow:auto;border:1px solid #d8dee4;max-width:100%}
.board table{margin:0;width:100%}
th button{font:inherit;font-weight:600;background:none;border:0;padding:0;cursor:pointer;color:inherit;white-space:nowrap}
th[aria-sort=ascending] button::after{content:" \\25B2"}th[aria-sort=descending] button::after{content:" \\25BC"}
tr.row{cursor:pointer}tr.row:hover td{background:#eef4fc}tr.row:focus{outline:2px solid #0969da;outline-offset:-2px}
tr.row td:first-child::before{content:"\\25B8 ";color:#57606a}tr.row[aria-expanded=true] td:first-child::before{content:"\\25BE "}
tr.detail>td{background:#f6f8fa;text-align:left;white-space:normal;padding:8px 14px}
.box h3{margin:4px 0 6px;word-break:break-all}.box .facts{color:#57606a;margin:0 0 8px;overflow-wrap:anywhere}
.box table{display:inline-table;vertical-align:top;margin:0 24px 8px 0;background:#fff}
.more{margin:6px 8px}.more button{font:inherit;margin-right:8px}.tools{margin:6px 0}.tools input{font:inherit;padding:3px 8px;width:320px;max-width:70vw}#count{color:#57606a;margin-left:10px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(360px,1fr));gap:12px}
figure{margin:0;border:1px solid #eaeef2;padding:6px}figure img,figure svg{width:100%;height:auto;display:block}
figcaption{color:#57606a;font-size:12px;margin-top:4px;overflow-wrap:anywhere}.note{color:#57606a}
svg.scatter{font:10px system-ui,sans-serif}svg .title{font-size:12px;font-weight:600}
svg .frame{fill:none;stroke:#afb8c1}svg .grid{stroke:#eaeef2}svg .tick{fill:#57606a}svg .axis{fill:#1b1f24;font-size:11px}
svg .pts circle{fill:#4c72b0;fill-opacity:.35}svg .fit{stroke:#c44e52;stroke-width:1.2}
svg .hl{fill:none;stroke:#d1242f;stroke-width:1.6;pointer-events:none}
#tip{position:fixed;z-index:10;pointer-events:none;background:#1b1f24;color:#fff;padding:5px 8px;border-radius:4px;font-size:12px;max-width:460px;overflow-wrap:anywhere}
#tip b{display:block}
details{margin:10px 0}summary{cursor:pointer;font-weight:600}
dl.glossary{display:grid;grid-template-columns:max-content auto;gap:2px 14px;color:#57606a;font-size:13px}dl.glossary dt{font-weight:600}dl.glossary dd{margin:0}
footer{color:#57606a;font-size:12px;padding:24px;overflow-wrap:anywhere}
"""

# The page's one script. It only reads the JSON above and sets textContent (never
# innerHTML), so a name in the data can only ever be text.
_SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("lbnorm-data").textContent);
  var columns = data.columns, values = data.values;
  var n = values.length ? values[0].length : 0;
  var modelColumn = columns.findIndex(function (c) { return c.model; });
  var names = values[modelColumn];
  var lowered = names.map(function (s) { return s.toLowerCase(); });
  var table = document.getElementById("board");
  var head = table.tHead.rows[0], body = table.tBodies[0];
  var rows = new Array(n), details = new Array(n), order = [], view = [], shown = 0;
  var sortColumn = -1, sortDirection = 1;
  var PAGE = 200;  // rows drawn at a time: a small DOM keeps sorting and filtering instant
  var filter = document.getElementById("filter"), count = document.getElementById("count");
  var more = document.getElementById("more"), all = document.getElementById("all");
  for (var i = 0; i < n; i++) order.push(i);

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }
  function fixed(value, digits) {
    return value === null || value === undefined ? "" : value.toFixed(digits);
  }
  function cellText(column, value) {
    if (value === null || value === undefined) return "";
    if (column.kind === "num") return value.toFixed(2);
    if (column.kind === "move") return value > 0 ? "+" + value : String(value);
    return String(value);
  }
  function rowFor(i) {
    if (rows[i]) return rows[i];
    var tr = el("tr", data.flagged[i] ? "row marked" : "row");
    tr.tabIndex = 0;
    tr.dataset.i = i;
    tr.setAttribute("aria-expanded", "false");
    for (var c = 0; c < columns.length; c++) {
      var column = columns[c];
      var td = el("td", column.kind === "text" ? "text" : "num", cellText(column, values[c][i]));
      if (column.model) { td.className = "text model"; td.title = names[i]; }
      tr.appendChild(td);
    }
    rows[i] = tr;
    return tr;
  }

  columns.forEach(function (column, c) {
    var th = el("th", column.kind === "text" ? "text" : "num");
    var button = el("button", "", column.label);
    button.type = "button";
    button.title = "sort by " + column.label;
    button.addEventListener("click", function () { sortBy(c); });
    th.setAttribute("aria-sort", "none");
    th.appendChild(button);
    head.appendChild(th);
  });

  // draw the rows of `view` up to `upTo` (default: one more page)
  function draw(upTo) {
    var limit = Math.min(view.length, upTo === undefined ? shown + PAGE : Math.max(upTo, shown));
    var fragment = document.createDocumentFragment();
    for (var k = shown; k < limit; k++) {
      var i = view[k];
      fragment.appendChild(rowFor(i));
      if (details[i]) fragment.appendChild(details[i]);
    }
    body.appendChild(fragment);
    shown = limit;
    var total = n.toLocaleString("en-US"), matching = view.length.toLocaleString("en-US");
    count.textContent = (view.length === n ? total + " variants" : matching + " of " + total + " variants match") +
      (shown < view.length ? ", first " + shown.toLocaleString("en-US") + " shown" : "");
    more.hidden = all.hidden = shown >= view.length;
  }
  function refresh() {
    var query = filter.value.trim().toLowerCase();
    view = query === "" ? order.slice() : order.filter(function (i) { return lowered[i].indexOf(query) >= 0; });
    body.textContent = "";
    shown = 0;
    draw();
  }
  filter.addEventListener("input", refresh);
  more.addEventListener("click", function () { draw(); });
  all.addEventListener("click", function () { draw(view.length); });
  if (window.IntersectionObserver) {  // scrolled to the end of the table: draw more
    new IntersectionObserver(function (entries) {
      if (entries[0].isIntersecting && shown < view.length) draw();
    }, {root: table.parentNode, rootMargin: "300px"}).observe(more);
  }

  function sortBy(c) {
    var column = columns[c];
    sortDirection = sortColumn === c ? -sortDirection : column.first;
    sortColumn = c;
    var keys = values[c], direction = sortDirection, isText = column.kind === "text";
    var lowerKeys = isText ? keys.map(function (s) { return s.toLowerCase(); }) : keys;
    order.sort(function (a, b) {
      var x = lowerKeys[a], y = lowerKeys[b];
      var xMissing = x === null || x === "", yMissing = y === null || y === "";
      if (xMissing || yMissing) return xMissing === yMissing ? a - b : (xMissing ? 1 : -1);
      if (x < y) return -direction;
      if (x > y) return direction;
      return a - b;
    });
    Array.prototype.forEach.call(head.cells, function (th, k) {
      th.setAttribute("aria-sort", k !== c ? "none" : direction > 0 ? "ascending" : "descending");
    });
    refresh();
  }

  function smallTable(headings, lines, textColumns) {
    var t = el("table"), h = t.createTHead().insertRow(), b = t.createTBody();
    headings.forEach(function (text, k) { h.appendChild(el("th", k < textColumns ? "text" : "num", text)); });
    lines.forEach(function (line) {
      var r = b.insertRow();
      line.forEach(function (text, k) { r.appendChild(el("td", k < textColumns ? "text" : "num", text)); });
    });
    return t;
  }
  function detailRow(i) {
    var tr = el("tr", "detail"), td = el("td"), box = el("div", "box");
    td.colSpan = columns.length;
    box.appendChild(el("h3", "", names[i]));
    var metadata = data.facts.map(function (f) { return f.label; });
    var facts = columns.filter(function (c) {
      return !c.model && c.benchmark === undefined && metadata.indexOf(c.label) < 0;
    }).map(function (c) { return c.label + ": " + cellText(c, values[columns.indexOf(c)][i]); })
      .concat(data.facts.map(function (f) { return f.label + ": " + f.values[i]; }));
    box.appendChild(el("p", "facts", facts.join(" \u00b7 ")));
    var benchmarkLines = [];
    columns.forEach(function (c, k) {
      if (c.benchmark === undefined) return;
      var stderr = data.stderr ? data.stderr[c.benchmark][i] : null;
      benchmarkLines.push([c.label, fixed(values[k][i], 2),
        stderr === null ? "" : "\u00b1 " + stderr.toFixed(2), fixed(data.raw[c.benchmark][i], 4)]);
    });
    box.appendChild(smallTable(["benchmark", "score", "stderr", "raw"], benchmarkLines, 1));
    if (data.subtasks) {
      var s = data.subtasks, subtaskLines = [];
      for (var j = 0; j < s.subtask.length; j++) {
        if (s.raw[i][j] === null && s.score[i][j] === null) continue;
        subtaskLines.push([s.benchmark[j], s.subtask[j], fixed(s.score[i][j], 2),
          fixed(s.raw[i][j], 4), fixed(s.bound[j], 4)]);
      }
      box.appendChild(smallTable(["benchmark", "subtask", "score", "raw", "lower bound"], subtaskLines, 2));
    }
    td.appendChild(box);
    tr.appendChild(td);
    return tr;
  }
  function toggle(i, open) {
    var isOpen = !!details[i];
    if (open === undefined) open = !isOpen;
    if (open === isOpen) return;
    if (open) {
      details[i] = detailRow(i);
      rows[i].after(details[i]);
    } else {
      details[i].remove();
      details[i] = null;
    }
    rows[i].setAttribute("aria-expanded", String(open));
  }
  body.addEventListener("click", function (event) {
    var tr = event.target.closest("tr.row");
    if (tr) toggle(Number(tr.dataset.i));
  });
  body.addEventListener("keydown", function (event) {
    var tr = event.target.closest("tr.row");
    if (tr && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      toggle(Number(tr.dataset.i));
    }
  });
  function reveal(i) {
    var at = view.indexOf(i);
    if (at < 0) { filter.value = ""; refresh(); at = view.indexOf(i); }
    if (at >= shown) draw(at + 1);
    toggle(i, true);
    rows[i].scrollIntoView({block: "center"});
    rows[i].focus({preventScroll: true});
  }
  refresh();

  var tip = document.getElementById("tip");
  var rankColumn = columns.findIndex(function (c) { return c.label === "rank"; });
  document.querySelectorAll("svg.scatter").forEach(function (svg) {
    var plot = Number(svg.dataset.plot), points = data.points[plot];
    var benchmark = data.benchmarks[plot];
    var scoreColumn = columns.findIndex(function (c) { return c.benchmark === plot; });
    var circles = svg.querySelectorAll(".pts circle"), highlight = svg.querySelector(".hl");
    var xs = new Float64Array(circles.length), ys = new Float64Array(circles.length);
    for (var k = 0; k < circles.length; k++) {
      circles[k].lbnormPoint = k;
      xs[k] = Number(circles[k].getAttribute("cx")) / 10;
      ys[k] = Number(circles[k].getAttribute("cy")) / 10;
    }
    function pointAt(event) {
      if (event.target.lbnormPoint !== undefined) return event.target.lbnormPoint;
      var matrix = svg.getScreenCTM();
      if (!matrix) return -1;
      var p = svg.createSVGPoint();
      p.x = event.clientX; p.y = event.clientY;
      p = p.matrixTransform(matrix.inverse());
      var best = -1, bestDistance = 36;  // within 6 units
      for (var k = 0; k < xs.length; k++) {
        var dx = xs[k] - p.x, dy = ys[k] - p.y, d = dx * dx + dy * dy;
        if (d <= bestDistance) { best = k; bestDistance = d; }
      }
      return best;
    }
    function show(event) {
      var k = pointAt(event);
      if (k < 0) { hide(); return; }
      var i = points.rows[k];
      tip.textContent = "";
      tip.appendChild(el("b", "", names[i]));
      var rank = rankColumn >= 0 ? values[rankColumn][i] : null;
      var precision = values[columns.findIndex(function (c) { return c.label === "precision"; })][i];
      tip.appendChild(el("span", "", (precision ? precision + " \u00b7 " : "") + (rank === null ? "unranked" : "rank " + rank)));
      tip.appendChild(el("br"));
      tip.appendChild(el("span", "", benchmark + " " + fixed(values[scoreColumn][i], 2) +
        " \u00b7 leave-one-out average " + fixed(points.others[k], 2)));
      tip.hidden = false;
      tip.dataset.row = i;
      var x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
      var y = event.clientY + 16 + tip.offsetHeight > window.innerHeight ? event.clientY - tip.offsetHeight - 10 : event.clientY + 16;
      tip.style.left = Math.max(x, 4) + "px";
      tip.style.top = Math.max(y, 4) + "px";
      highlight.setAttribute("cx", xs[k]);
      highlight.setAttribute("cy", ys[k]);
    }
    function hide() {
      tip.hidden = true;
      highlight.setAttribute("cx", -10);
      highlight.setAttribute("cy", -10);
    }
    svg.addEventListener("mousemove", show);
    svg.addEventListener("mouseover", show);
    svg.addEventListener("mouseleave", hide);
    svg.addEventListener("click", function (event) {
      var k = pointAt(event);
      if (k >= 0) { hide(); reveal(points.rows[k]); }
    });
  });
})();
"""
