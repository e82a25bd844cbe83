"""Export an output as another leaderboard's own table: the Open LLM Leaderboard's ``contents``.

The Open LLM Leaderboard's backend and front end read one table, the
``open-llm-leaderboard/contents`` dataset: 36 columns in a fixed order with fixed
types (:data:`OPEN_LLM_COLUMNS`). :func:`export_table` builds that table from an
output folder's ``leaderboard.parquet`` alone, so the existing front end can
show an lbnorm output unchanged; :func:`write_export` writes it (Parquet with the
Hugging Face ``datasets`` features in its schema metadata, or CSV).

How each column is formed (docs/publishing.md has the whole table):

- ``fullname``, ``Precision``, ``Model sha`` and ``Chat Template`` are the
  variant's keys; ``eval_name`` is ``org_model_precision`` and ``Model`` the
  leaderboard's two HTML links, character for character as the real table has them.
- ``<X> Raw`` and ``<X>`` are the benchmark's raw value (0-1) and normalized
  score (0-100); ``Average ⬆️`` is their sum left to right over the six, divided
  by 6: the real table's own arithmetic, bit for bit.
- ``Type`` and ``T`` come from the metadata's ``type`` (any of the leaderboard's
  spellings); the other columns from a metadata column of the export's own name
  or of the snake_case name in :data:`METADATA_NAMES`; else they are null, with
  the column's type kept (the front end shows a null as ``-``).

Every variant must have all six scores, unless told to leave the incomplete out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.errors import InputError, OptionsError, shown_list
from lbnorm.core.version import lbnorm_version
from lbnorm.engines.metadata import TYPE_LABELS
from lbnorm.output.reader import Output

__all__ = [
    "EXPORT_FORMATS",
    "EXPORT_MARK",
    "METADATA_NAMES",
    "OPEN_LLM_BENCHMARKS",
    "OPEN_LLM_COLUMNS",
    "TYPE_EMOJI",
    "ExportFormat",
    "ExportOptions",
    "export_table",
    "is_export",
    "write_export",
    "write_exported",
]

#: The formats ``lbnorm export`` writes.
ExportFormat = Literal["open-llm-leaderboard"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("open-llm-leaderboard",)

#: The six benchmarks of the ``contents`` table, in its column order.
OPEN_LLM_BENCHMARKS = ("IFEval", "BBH", "MATH Lvl 5", "GPQA", "MUSR", "MMLU-PRO")

_AVERAGE = "Average \u2b06\ufe0f"
_HEARTS = "Hub \u2764\ufe0f"
_CO2 = "CO\u2082 cost (kg)"

#: The ``contents`` table's 36 columns, in order, with their Arrow types.
OPEN_LLM_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("eval_name", pa.string()),
    ("Precision", pa.string()),
    ("Type", pa.string()),
    ("T", pa.string()),
    ("Weight type", pa.string()),
    ("Architecture", pa.string()),
    ("Model", pa.string()),
    ("fullname", pa.string()),
    ("Model sha", pa.string()),
    (_AVERAGE, pa.float64()),
    ("Hub License", pa.string()),
    (_HEARTS, pa.int64()),
    ("#Params (B)", pa.float64()),
    ("Available on the hub", pa.bool_()),
    ("MoE", pa.bool_()),
    ("Flagged", pa.bool_()),
    ("Chat Template", pa.bool_()),
    (_CO2, pa.float64()),
    *(
        (name, pa.float64())
        for benchmark in OPEN_LLM_BENCHMARKS
        for name in (f"{benchmark} Raw", benchmark)
    ),
    ("Merged", pa.bool_()),
    ("Official Providers", pa.bool_()),
    ("Upload To Hub Date", pa.string()),
    ("Submission Date", pa.string()),
    ("Generation", pa.int64()),
    ("Base Model", pa.string()),
)

#: The metadata column names each metadata-fed export column is read from, first
#: found wins: the export's own name, then snake_case names (``lbnorm run
#: --metadata`` joins any free column of the metadata table into the leaderboard).
METADATA_NAMES: dict[str, tuple[str, ...]] = {
    "Weight type": ("Weight type", "weight_type"),
    "Architecture": ("Architecture", "architecture"),
    "Hub License": ("Hub License", "hub_license", "license"),
    _HEARTS: (_HEARTS, "hub_hearts", "likes"),
    "#Params (B)": ("#Params (B)", "params_b"),
    "Available on the hub": (
        "Available on the hub",
        "available_on_the_hub",
        "still_on_hub",
    ),
    "MoE": ("MoE", "moe"),
    "Flagged": ("Flagged", "flagged"),
    _CO2: (_CO2, "co2_cost_kg", "co2_cost"),
    "Merged": ("Merged", "merged"),
    "Official Providers": ("Official Providers", "official_providers"),
    "Upload To Hub Date": ("Upload To Hub Date", "upload_to_hub_date"),
    "Submission Date": ("Submission Date", "submission_date"),
    "Generation": ("Generation", "generation"),
    "Base Model": ("Base Model", "base_model"),
}

#: The model types' emoji, by the metadata's spelling of the type (the
#: leaderboard API's, :data:`lbnorm.engines.metadata.TYPE_LABELS`).
TYPE_EMOJI: dict[str, str] = {
    "pretrained": "\U0001f7e2",
    "continuouslypretrained": "\U0001f7e9",
    "fine-tunedondomain-specificdatasets": "\U0001f536",
    "chatmodels": "\U0001f4ac",
    "basemergesandmoerges": "\U0001f91d",
    "multimodal": "\U0001f338",
    "\u2753other": "\u2753",
}

_LINK_STYLE = (
    'style="color: var(--link-text-color); text-decoration: '
    'underline;text-decoration-style: dotted;"'
)
_HUB = "https://huggingface.co/"
_DETAILS = "https://huggingface.co/datasets/open-llm-leaderboard/"
_DETAILS_EMOJI = "\U0001f4d1"
#: The key of the Parquet schema metadata that marks a file lbnorm exported.
EXPORT_MARK = b"lbnorm"
_SHOWN = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportOptions:
    """How to export an output.

    Attributes:
        format: The target table (``open-llm-leaderboard``).
        skip_incomplete: Leave out variants without all six scores instead of
            refusing to export.
        unknown_precision: The ``Precision`` of variants whose input gave none
            (e.g. results files without ``config_general.model_dtype``); None
            refuses to export them, as ``eval_name`` needs one.
    """

    format: ExportFormat = "open-llm-leaderboard"
    skip_incomplete: bool = False
    unknown_precision: str | None = None

    def __post_init__(self) -> None:
        if self.format not in EXPORT_FORMATS:
            msg = (
                f"export format {self.format!r} is not known.\n"
                f"Hint: use one of {list(EXPORT_FORMATS)}."
            )
            raise OptionsError(msg)
        if self.unknown_precision == "":
            msg = (
                "--unknown-precision '': an empty precision cannot name a row.\n"
                "Hint: give the precision the runs used, e.g. --unknown-precision bfloat16."
            )
            raise OptionsError(msg)
        if self.unknown_precision is not None and not _is_word(self.unknown_precision):
            shown = self.unknown_precision[:40]
            msg = (
                f"--unknown-precision {shown!r}: a precision is one word of at most "
                f"{_LONGEST_PRECISION} printable characters (it names rows: eval_name, Precision).\n"
                "Hint: give the precision the runs used, e.g. --unknown-precision bfloat16."
            )
            raise OptionsError(msg)


#: The longest ``--unknown-precision`` taken (the leaderboard's are a few letters).
_LONGEST_PRECISION = 64


def _is_word(text: str) -> bool:
    r"""Printable, without spaces, and short: fit to name a row.

    Examples:
        >>> _is_word("bfloat16"), _is_word("\n"), _is_word("4 bit")
        (True, False, False)
    """
    return (
        len(text) <= _LONGEST_PRECISION
        and text.isprintable()
        and not any(char.isspace() for char in text)
    )


def export_table(
    out: Output | str | Path, *, options: ExportOptions | None = None
) -> pa.Table:
    """Build the Open LLM Leaderboard ``contents`` table from an output folder.

    Args:
        out: An lbnorm output directory (``lbnorm run --out``).
        options: The export's options (defaults: the ``open-llm-leaderboard``
            format, every variant complete).

    Returns:
        The 36 columns of :data:`OPEN_LLM_COLUMNS`, one row per variant, sorted by
        (org, model, precision, revision, chat template).

    Raises:
        InputError: Not an output folder; its suite lacks one of the six
            benchmarks; a variant has no precision, an incomplete score or an
            unknown model type; a metadata column does not fit its export type;
            two rows share a key.
    """
    options = options or ExportOptions()
    folder = Output.open(out, "leaderboard")
    board = folder.table("leaderboard")
    _check_benchmarks(folder, board)
    board = _complete(folder, board, skip=options.skip_incomplete)
    if options.unknown_precision is not None:
        precision = board["precision"].cast(pa.string())
        given = pc.if_else(
            pc.equal(precision, ""), options.unknown_precision, precision
        )
        board = board.set_column(
            board.schema.get_field_index("precision"), "precision", given
        )
    _check_keys(folder, board)
    board = board.take(_order(board))
    model = board["model"].cast(pa.string())
    precision = board["precision"].cast(pa.string())
    columns = {
        "eval_name": pc.binary_join_element_wise(
            pc.replace_substring(model, "/", "_", max_replacements=1), precision, "_"
        ),
        "Precision": precision,
        **_types(folder, board),
        "Model": _model_links(model),
        "fullname": model,
        "Model sha": board["revision"].cast(pa.string()),
        "Chat Template": board["chat_template"].cast(pa.bool_()),
        **_benchmarks(board),
    }
    for name, sources in METADATA_NAMES.items():
        columns[name] = _metadata(folder, board, name, sources)
    schema = _schema()
    arrays = [
        _chunked(columns[field.name], field.type, board.num_rows) for field in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


def write_export(table: pa.Table, path: str | Path) -> Path:
    """Write an export: Parquet (one row group), or CSV if `path` ends in ``.csv``.

    The file is written whole through a temporary sibling and a rename, and only
    over a file lbnorm exported before (:func:`is_export`).

    Raises:
        OutputError: `path` is a file lbnorm did not export, or the disk refuses;
            the file there is left as it was.
    """
    return write_exported(table, path, csv_bytes=_csv_bytes(table))


def write_exported(table: pa.Table, path: str | Path, *, csv_bytes: bytes) -> Path:
    """Write an exported table: CSV (`csv_bytes`) if `path` ends in ``.csv``, else Parquet.

    The file is written whole through a temporary sibling and a rename, and only
    over a file lbnorm exported before (:func:`is_export`; a CSV file must start
    with this table's header line).

    Raises:
        OutputError: `path` is a file lbnorm did not export, or the disk refuses;
            the file there is left as it was.
    """
    from lbnorm.output.transaction import write_file  # the module that writes files

    path = Path(path)
    is_csv = path.suffix.lower() == ".csv"
    header = csv_bytes.split(b"\n", 1)[0] + b"\n"

    def is_ours(head: bytes, tail: bytes) -> bool:
        return is_export(head, tail, csv_header=header)

    content = csv_bytes if is_csv else table.combine_chunks()
    write_file(path, content, option="--out", is_ours=is_ours)
    return path


def is_export(head: bytes, tail: bytes, *, csv_header: bytes | None = None) -> bool:
    r"""Whether a file is one :func:`write_exported` wrote (one it may replace).

    A Parquet export carries lbnorm's mark (``"export": ...``) in its footer's
    schema metadata; a CSV export starts with its table's exact header line
    (`csv_header`; by default the open-llm-leaderboard export's).

    Examples:
        >>> is_export(_csv_header().encode() + b"...", b""), is_export(b"a,b\n", b"")
        (True, False)
    """
    if tail.endswith(b"PAR1"):
        return head.startswith(b"PAR1") and b'"export": ' in tail
    header = _csv_header().encode() if csv_header is None else csv_header
    return head.startswith(header)


def _check_benchmarks(folder: Output, board: pa.Table) -> None:
    """Raise unless the leaderboard has the six benchmarks' columns."""
    missing = [
        name
        for benchmark in OPEN_LLM_BENCHMARKS
        for name in (benchmark, f"{benchmark} Raw")
        if name not in board.column_names
    ]
    if not missing:
        return
    suite = folder.manifest.get("suite")
    name = suite.get("name") if isinstance(suite, dict) else None
    has = [n.removesuffix(" Raw") for n in board.column_names if n.endswith(" Raw")]
    msg = (
        f"{folder}: suite {name!r} has benchmarks {shown_list(has, 8)}, but the "
        f"open-llm-leaderboard table needs {list(OPEN_LLM_BENCHMARKS)} (missing "
        f"{shown_list(sorted({m.removesuffix(' Raw') for m in missing}), _SHOWN)}).\n"
        "Hint: export an output of `lbnorm run --suite openllm-v2` (or of a suite "
        "naming its benchmarks as these six)."
    )
    raise InputError(msg)


def _complete(folder: Output, board: pa.Table, *, skip: bool) -> pa.Table:
    """The rows with all six scores; the others dropped if `skip`, else an error."""
    is_complete = np.ones(board.num_rows, dtype=bool)
    for benchmark in OPEN_LLM_BENCHMARKS:
        is_complete &= board[benchmark].is_valid().to_numpy(zero_copy_only=False)
    if is_complete.all() or skip:
        return board.filter(pa.array(is_complete))
    shown = shown_list(
        board.filter(pa.array(~is_complete))["model"].to_pylist(), _SHOWN
    )
    msg = (
        f"{folder}: {int((~is_complete).sum()):,} variant(s) lack one of the six "
        f"scores: {shown}; the open-llm-leaderboard table has every score.\n"
        "Hint: pass --skip-incomplete to leave them out of the export."
    )
    raise InputError(msg)


def _check_keys(folder: Output, board: pa.Table) -> None:
    """Raise if a precision is empty or two rows share (model, precision, sha, chat)."""
    precision = board["precision"].cast(pa.string())
    is_empty = pc.equal(precision, "").to_numpy(zero_copy_only=False)
    if is_empty.any():
        shown = shown_list(
            board.filter(pa.array(is_empty))["model"].to_pylist(), _SHOWN
        )
        msg = (
            f"{folder}: {int(is_empty.sum()):,} variant(s) have no precision: "
            f"{shown}; the table's eval_name is org_model_precision.\n"
            "Hint: pass --unknown-precision PRECISION (e.g. bfloat16), or give it in "
            "the input (config_general.model_dtype, or a precision column)."
        )
        raise InputError(msg)
    keys = board.select(["model", "precision", "revision", "chat_template"])
    counts = keys.group_by(keys.column_names).aggregate([([], "count_all")])
    repeated = counts.filter(pc.greater(counts["count_all"], 1))
    if repeated.num_rows:
        msg = (
            f"{folder}: {repeated.num_rows:,} (fullname, Precision, Model sha, Chat "
            f"Template) key(s) repeat: {shown_list(repeated['model'].to_pylist(), _SHOWN)}.\n"
            "Hint: the leaderboard is damaged; rerun `lbnorm run` to rewrite it."
        )
        raise InputError(msg)


def _order(board: pa.Table) -> pa.Array:
    """Row order: (org, model) as the results tree lists them, then the other keys."""
    model = board["model"].cast(pa.string())
    has_org = pc.match_substring(model, "/")
    org = pc.replace_substring_regex(model, "/.*", "")  # no org (gpt2): its folder
    name = pc.if_else(has_org, pc.replace_substring_regex(model, "^[^/]*/", ""), "")
    keys = pa.table(
        {
            "org": org,
            "name": name,
            "precision": board["precision"].cast(pa.string()),
            "revision": board["revision"].cast(pa.string()),
            "chat_template": board["chat_template"],
        }
    )
    return pc.sort_indices(
        keys, [(column, "ascending") for column in keys.column_names]
    )


def _model_links(model: pa.ChunkedArray) -> pa.ChunkedArray:
    """The ``Model`` column: a link to the model's page and one to its details."""
    slug = pc.replace_substring(model, "/", "__")
    pieces = [
        f'<a target="_blank" href="{_HUB}',
        model,
        f'" {_LINK_STYLE}>',
        model,
        f'</a>  <a target="_blank" href="{_DETAILS}',
        slug,
        f'-details" {_LINK_STYLE}>{_DETAILS_EMOJI}</a>',
    ]
    return pc.binary_join_element_wise(*pieces, "")


def _types(folder: Output, board: pa.Table) -> dict[str, pa.ChunkedArray | None]:
    """``Type`` (emoji, a space and the words) and ``T`` (the emoji), from ``type``."""
    source = next((n for n in ("type_code", "type") if n in board.column_names), None)
    if source is None or not pa.types.is_string(board[source].type):
        return {"Type": None, "T": None}
    spellings: dict[str, str] = {}
    for code, words in TYPE_LABELS.items():
        full = f"{TYPE_EMOJI[code]} {words}"
        spellings.update({code: full, words: full, full: full})
    values = board[source]
    position = pc.index_in(values, pa.array(list(spellings)))
    is_unknown = pc.and_(values.is_valid(), position.is_null())
    if pc.any(is_unknown).as_py():
        unknown = shown_list(pc.unique(values.filter(is_unknown)).to_pylist(), _SHOWN)
        msg = (
            f"{folder}: leaderboard column {source!r} holds model type(s) the Open LLM "
            f"Leaderboard does not have: {unknown}.\nHint: use one of "
            f"{list(TYPE_LABELS)} in the metadata table's type column."
        )
        raise InputError(msg)
    full_type = pc.take(pa.array(list(spellings.values())), position)
    emoji = pc.list_element(pc.split_pattern(full_type, " ", max_splits=1), 0)
    return {"Type": full_type, "T": emoji}


def _benchmarks(board: pa.Table) -> dict[str, pa.ChunkedArray]:
    """Each benchmark's ``X Raw`` and ``X``, and ``Average ⬆️``: sum of six / 6."""
    columns: dict[str, pa.ChunkedArray] = {}
    total: pa.ChunkedArray | None = None
    for benchmark in OPEN_LLM_BENCHMARKS:
        score = board[benchmark].cast(pa.float64())
        columns[f"{benchmark} Raw"] = board[f"{benchmark} Raw"].cast(pa.float64())
        columns[benchmark] = score
        total = score if total is None else pc.add(total, score)  # left to right
    columns[_AVERAGE] = pc.divide(total, 6.0)
    return columns


def _metadata(
    folder: Output, board: pa.Table, name: str, sources: tuple[str, ...]
) -> pa.ChunkedArray | None:
    """The export column `name` from the first metadata column present, cast to its type."""
    source = next((s for s in sources if s in board.column_names), None)
    if source is None:
        return None
    kind = dict(OPEN_LLM_COLUMNS)[name]
    values = board[source]
    if pa.types.is_string(kind) and pa.types.is_temporal(values.type):
        values = pc.strftime(values.cast(pa.timestamp("s")), format="%Y-%m-%d")
    try:
        return values.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        msg = (
            f"{folder}: leaderboard column {source!r} ({values.type}) does not fit "
            f"the export's {name!r} ({kind}): {str(exc).splitlines()[0]}.\n"
            f"Hint: give {source!r} as {kind} values in the metadata table."
        )
        raise InputError(msg) from exc


def _chunked(
    values: pa.ChunkedArray | pa.Array | None, kind: pa.DataType, n_rows: int
) -> pa.ChunkedArray:
    """`values` as one chunk of `kind`; all null (of that type) if None."""
    if values is None:
        return pa.chunked_array([pa.nulls(n_rows, kind)])
    if isinstance(values, pa.Array):
        values = pa.chunked_array([values])
    return pa.chunked_array([values.cast(kind).combine_chunks()])


def _schema() -> pa.Schema:
    """The 36 fields, with the ``datasets`` features and lbnorm's mark as metadata."""
    dtypes = {pa.string(): "string", pa.int64(): "int64", pa.float64(): "float64"}
    features = {
        name: {"dtype": dtypes.get(kind, "bool"), "_type": "Value"}
        for name, kind in OPEN_LLM_COLUMNS
    }
    metadata = {
        b"huggingface": json.dumps({"info": {"features": features}}).encode(),
        EXPORT_MARK: json.dumps(
            {"export": "open-llm-leaderboard", "version": lbnorm_version()}
        ).encode(),
    }
    return pa.schema(
        [pa.field(name, kind) for name, kind in OPEN_LLM_COLUMNS], metadata=metadata
    )


def _csv_header() -> str:
    """The CSV export's first line: the 36 names, quoted as the CSV writer quotes."""
    import csv
    import io

    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(
        [name for name, _ in OPEN_LLM_COLUMNS]
    )
    return buffer.getvalue()


def _csv_bytes(table: pa.Table) -> bytes:
    """The table as CSV: full-precision floats, ``True``/``False``, null as empty."""
    frame = table.to_pandas()  # the file is for people and spreadsheets: pandas' CSV
    text: str = frame.to_csv(index=False, lineterminator="\n")
    return text.encode()
