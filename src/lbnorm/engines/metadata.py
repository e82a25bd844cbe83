"""Model metadata: facts about each model variant, joined into the leaderboard.

A metadata table (CSV or Parquet) has a ``model`` column, optionally the other
variant keys (``precision``, ``revision``, ``chat_template``), and any free
columns: the bundled demo's are ``type``, ``params_b`` (parameters in billions,
-1 if unknown), ``submission_date`` and ``flagged``. The join uses the key
columns the table has, so a table keyed by ``model`` alone covers every variant
of a model. A ``params_b`` column also gives a ``size_class`` column (the
leaderboard's size filters, see :data:`SIZE_CLASSES`); a text ``type`` column is
shown in words (:data:`TYPE_LABELS`: ``fine-tunedondomain-specificdatasets``
becomes ``fine-tuned on domain-specific datasets``) and keeps its own spelling
in ``type_code``.

On request, flagged variants lose their rank (the others are re-ranked without
them) and ranks are computed within groups, e.g. ``rank_within_size_class``.

The work is done on Arrow tables with numpy (``*_table`` functions and
:func:`annotate_table`, what ``lbnorm run`` calls: no pandas). The pandas
functions that hand frames to ``lbnorm show``, ``lbnorm query`` and the Python
API (:func:`annotate_leaderboard`, :func:`list_flagged`, :func:`read_metadata`)
run those on a frame (:func:`_on_frame`), so there is one implementation; they
import pandas only when called.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.board import rank_descending
from lbnorm.core import arrow
from lbnorm.core.errors import InputError, SchemaMismatchError
from lbnorm.core.files import check_option_file
from lbnorm.core.schemas import KEY_COLUMNS
from lbnorm.engines.result import board_order
from lbnorm.engines.variants import group_keys, variant_labels
from lbnorm.readers.table_file import read_csv, read_parquet, table_format
from lbnorm.suites.board import RankMethod

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "COLUMN_DOCS",
    "SIZE_CLASSES",
    "TYPE_LABELS",
    "annotate_leaderboard",
    "annotate_table",
    "conform_metadata_table",
    "exclude_flagged_table",
    "flag_mask",
    "join_metadata_table",
    "list_flagged",
    "rank_within_table",
    "read_metadata",
    "read_raw_metadata",
    "size_class_array",
    "type_label_array",
]

#: Size classes by parameters in billions: (label, lower edge inclusive). The
#: edges fall between the common sizes: 1.5-2.7B, 3-4B, 7-9B, 12-15B, 27-34B,
#: 46-52B and 70-72B models each share a class.
SIZE_CLASSES: tuple[tuple[str, float], ...] = (
    ("<3B", 0.0),
    ("3-6B", 3.0),
    ("6-10B", 6.0),
    ("10-20B", 10.0),
    ("20-40B", 20.0),
    ("40-65B", 40.0),
    ("65B+", 65.0),
)

#: The Open LLM Leaderboard's model types as its API spells them (spaces and
#: emoji dropped), and the words its pages show (without the emoji: 🟢 🟩 🔶 💬
#: 🤝 🌸 ❓). Any other value of ``type`` is shown as it is.
TYPE_LABELS: dict[str, str] = {
    "pretrained": "pretrained",
    "continuouslypretrained": "continuously pretrained",
    "fine-tunedondomain-specificdatasets": "fine-tuned on domain-specific datasets",
    "chatmodels": "chat models (RLHF, DPO, IFT, ...)",
    "basemergesandmoerges": "base merges and moerges",
    "multimodal": "multimodal",
    "❓other": "other",
}

#: Docs for the Parquet schema of the columns this module may add (each added
#: column carries its doc in its field metadata, ``doc``).
COLUMN_DOCS: dict[str, str] = {
    "type": "Model type in words, as the leaderboard shows it, e.g. 'fine-tuned on "
    "domain-specific datasets' (from the metadata table; its own spelling is in type_code).",
    "type_code": "Model type as the metadata table spells it, e.g. "
    "'fine-tunedondomain-specificdatasets' (the leaderboard API's spelling).",
    "params_b": "Parameters in billions; -1 if unknown (from the metadata table).",
    "submission_date": "Date the model was submitted (from the metadata table).",
    "flagged": "Flagged on the leaderboard (from the metadata table).",
    "size_class": "Size class from params_b: <3B, 3-6B, 6-10B, 10-20B, 20-40B, "
    "40-65B, 65B+ (lower edges inclusive); null if params_b is unknown.",
}

_KEY_DEFAULTS: dict[str, str] = {"precision": "", "revision": ""}
#: The column that carries a frame's row order through an Arrow function
#: (:func:`_on_frame`); never a column of the leaderboard.
_ROW_COLUMN = "__lbnorm_row__"
#: Columns a hint never suggests to group or flag by (with the raw benchmark scores).
_NOT_GROUPS = {"rank", "average", "n_benchmarks", "n_benchmarks_expected", _ROW_COLUMN}
_SHOWN = 5
#: A number written as text (``params_b`` read as strings): anything else is unknown.
_NUMBER = r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"

Column: TypeAlias = pa.Array | pa.ChunkedArray
IntArray: TypeAlias = npt.NDArray[np.int64]
Mask: TypeAlias = npt.NDArray[np.bool_]


# --- Arrow: reading and checking ----------------------------------------------------


def read_raw_metadata(path: str | Path) -> pa.Table:
    """A metadata file as Arrow, as written (checked by :func:`conform_metadata_table`)."""
    path = Path(path)
    kind = table_format(path, allowed=("csv", "parquet"), what="metadata")
    check_option_file(path, option="--metadata", folders=kind == "parquet")
    try:
        table = read_csv(path) if kind == "csv" else read_parquet(path)
    except (pa.ArrowException, OSError) as exc:
        msg = f"{path}: cannot read the metadata table as {kind}: {exc}.\nHint: check the path and that the file is complete {kind}."
        raise InputError(msg) from exc
    index = [name for name in table.column_names if name.startswith("__index_level_")]
    return table.drop_columns(index)  # a pandas index written along: not metadata


def conform_metadata_table(metadata: pa.Table, *, source: str) -> pa.Table:
    """Check a metadata table and type its keys like the leaderboard's.

    Args:
        metadata: The table: ``model``, optional variant keys, free columns.
        source: Where it came from, for messages.

    Returns:
        The conformed table (a new one): keys as text ('' for a missing
        precision or revision), ``chat_template`` boolean, text as ``string``,
        NaN in float columns as null (unknown).

    Raises:
        SchemaMismatchError: No ``model`` column, a model without a name, a
            ``chat_template`` that is not true/false, or duplicate keys.

    Examples:
        >>> meta = pa.table({"model": ["a/b"], "precision": [None], "params_b": [7.2]})
        >>> conform_metadata_table(meta, source="m.csv")["precision"].to_pylist()
        ['']
    """
    metadata = metadata.replace_schema_metadata(None)
    names = metadata.column_names
    if "model" not in names:
        msg = (
            f"{source}: the metadata table has no 'model' column; found {names[:8]}.\n"
            f"Hint: key each row by 'model' (and optionally {list(KEY_COLUMNS[1:])}), as in leaderboard.parquet."
        )
        raise SchemaMismatchError(msg)
    model = metadata.column("model").cast(pa.string())
    n_unnamed = metadata.num_rows - int(
        pc.sum(pc.not_equal(model, arrow.scalar("", pa.string()))).as_py() or 0
    )
    if n_unnamed:
        msg = f"{source}: {n_unnamed} row(s) have no model name.\nHint: fill in or remove those rows."
        raise SchemaMismatchError(msg)
    keys = [name for name in KEY_COLUMNS if name in names]
    if "chat_template" in keys:
        chat = metadata.column("chat_template")
        if not pa.types.is_boolean(chat.type) or chat.null_count:
            shown = f"type {chat.type}" + (
                f" with {chat.null_count} null(s)" if chat.null_count else ""
            )
            msg = (
                f"{source}: column 'chat_template' must be true/false, got {shown}.\n"
                "Hint: write True/False (CSV) or a boolean column (Parquet)."
            )
            raise SchemaMismatchError(msg)
    for index, name in enumerate(names):
        column = metadata.column(index)
        if name == "model":
            column = model
        elif name in _KEY_DEFAULTS:
            column = pc.fill_null(
                column.cast(pa.string()), arrow.scalar(_KEY_DEFAULTS[name], pa.string())
            )
        elif pa.types.is_large_string(column.type):
            column = column.cast(pa.string())
        elif pa.types.is_floating(column.type):  # NaN means unknown, as null does
            column = pc.if_else(
                pc.is_nan(column), arrow.scalar(None, column.type), column
            )
        metadata = metadata.set_column(index, pa.field(name, column.type), column)
    (codes,) = _key_codes([metadata], keys)
    counts = np.bincount(codes, minlength=1)
    is_duplicated = counts[codes] > 1
    if is_duplicated.any():
        rows = np.flatnonzero(is_duplicated)
        _, first = np.unique(codes[rows], return_index=True)
        shown_rows = rows[np.sort(first)][:_SHOWN]
        examples = ", ".join(
            map(str, metadata.select(keys).take(shown_rows).to_pylist())
        )
        msg = (
            f"{source}: {len(rows)} rows share their key {keys} with another row, e.g. {examples}.\n"
            "Hint: keep one row per key, or add the key columns that tell them apart "
            f"({[k for k in KEY_COLUMNS if k not in keys] or 'none left'})."
        )
        raise SchemaMismatchError(msg)
    return metadata


# --- Arrow: the join and the columns it makes -------------------------------------


def join_metadata_table(
    leaderboard: pa.Table, metadata: pa.Table, *, source: str = "metadata"
) -> tuple[pa.Table, dict[str, Any]]:
    """Append the metadata's free columns to the leaderboard, matched on variant keys.

    A left join, many to one, on the key columns the metadata has. Variants
    without a metadata row get nulls; a table that matches no variant at all is
    an error (the keys are spelled differently). A ``params_b`` column also
    gives ``size_class``; a text ``type`` column is put in words
    (:data:`TYPE_LABELS`) and its own spelling kept in ``type_code``, after it.

    Args:
        leaderboard: The leaderboard (variant keys first).
        metadata: The metadata table; checked by :func:`conform_metadata_table`.
        source: Where the metadata came from, for messages and column docs.

    Returns:
        The leaderboard, same rows and order, metadata columns appended, each
        with a ``doc`` in its field metadata; and its coverage (:func:`_coverage`).

    Raises:
        SchemaMismatchError: The metadata does not conform, a metadata column
            has a leaderboard column's name, or no variant matches any metadata row.

    Examples:
        >>> board = pa.table({"model": ["a/x", "b/y"], "average": [50.0, 40.0]})
        >>> meta = pa.table({"model": ["b/yy", "a/x"], "params_b": [70.0, 1.5]})
        >>> joined, coverage = join_metadata_table(board, meta)
        >>> joined.select(["model", "size_class"]).to_pylist(), coverage["rows_shown"]
        ([{'model': 'a/x', 'size_class': '<3B'}, {'model': 'b/y', 'size_class': None}], ['b/yy'])
    """
    metadata = conform_metadata_table(metadata, source=source)
    keys = [name for name in KEY_COLUMNS if name in metadata.column_names]
    if clashes := [
        name
        for name in metadata.column_names
        if name not in keys and name in leaderboard.column_names
    ]:
        msg = (
            f"{source}: metadata column(s) {clashes[:_SHOWN]} have the names of leaderboard columns.\n"
            "Hint: rename them in the metadata table (e.g. add a prefix)."
        )
        raise SchemaMismatchError(msg)
    left, right = _key_codes([leaderboard, metadata], keys)
    row_of_code = np.full(len(left) + len(right), -1)  # (codes are below the rows)
    row_of_code[right] = np.arange(len(right))
    match = row_of_code[left]
    is_unmatched = match < 0
    if leaderboard.num_rows and is_unmatched.all():
        board_keys = leaderboard.select(keys).slice(0, 2).to_pylist()
        meta_keys = metadata.select(keys).slice(0, 2).to_pylist()
        msg = (
            f"{source}: none of the {leaderboard.num_rows:,} variants matches a metadata row on {keys}; "
            f"e.g. leaderboard {board_keys}, metadata {meta_keys}.\n"
            "Hint: spell the keys as leaderboard.parquet does, or drop key columns "
            "(precision, revision, chat_template) to match on fewer."
        )
        raise SchemaMismatchError(msg)
    rows = arrow.array(np.where(is_unmatched, 0, match), mask=is_unmatched)
    joined = leaderboard
    for name in metadata.column_names:
        if name in keys:
            continue
        column = metadata.column(name).take(rows)
        if (
            name == "type"
            and _is_text(column)
            and "type_code" not in metadata.column_names
        ):
            joined = _append(joined, name, type_label_array(column), source)
            joined = _append(joined, "type_code", column.cast(pa.string()), source)
        else:
            joined = _append(joined, name, column, source)
    if "params_b" in joined.column_names and "size_class" not in joined.column_names:
        joined = _append(
            joined, "size_class", size_class_array(joined["params_b"]), source
        )
    return joined, _coverage(
        leaderboard, metadata, is_unmatched, ~np.isin(right, left), source
    )


def _coverage(
    board: pa.Table, meta: pa.Table, is_missed: Mask, is_unused: Mask, source: str
) -> dict[str, Any]:
    """Which variants the metadata misses, and which of its rows match no variant.

    A name misspelled in the metadata table leaves its variant without a row
    and the row without a variant: both are counted, with a few examples, so a
    summary can say so: ``source``, ``variants`` (on the leaderboard),
    ``variants_without_row`` and a few of them as ``model [precision]``
    (``variants_shown``), ``rows`` (in the metadata), ``rows_without_variant``
    and a few of their models (``rows_shown``).
    """
    missed = board.filter(arrow.array(is_missed)).slice(0, _SHOWN)
    unused = meta["model"].filter(arrow.array(is_unused)).slice(0, _SHOWN)  # text
    return {
        "source": source,
        "variants": board.num_rows,
        "variants_without_row": int(is_missed.sum()),
        "variants_shown": variant_labels(missed),
        "rows": meta.num_rows,
        "rows_without_variant": int(is_unused.sum()),
        "rows_shown": unused.to_pylist(),
    }


def size_class_array(params_b: Column) -> pa.Array:
    """Each value's size class label (:data:`SIZE_CLASSES`); null if unknown (≤ 0, not a number).

    Examples:
        >>> size_class_array(pa.array([0.5, 7.6, 9.2, 14.8, -1.0, None])).to_pylist()
        ['<3B', '6-10B', '6-10B', '10-20B', None, None]
    """
    values = _as_floats(params_b)
    edges = np.array([edge for _, edge in SIZE_CLASSES])
    index = np.searchsorted(edges, values, side="right") - 1
    is_unknown = ~(np.isfinite(values) & (values > 0))
    labels = arrow.strings([label for label, _ in SIZE_CLASSES])
    return labels.take(arrow.array(np.clip(index, 0, len(edges) - 1), mask=is_unknown))


def type_label_array(types: Column) -> pa.Array:
    """Model types in words (:data:`TYPE_LABELS`); other values as they are.

    Examples:
        >>> type_label_array(pa.array(["chatmodels", "❓other", "mine", None])).to_pylist()
        ['chat models (RLHF, DPO, IFT, ...)', 'other', 'mine', None]
    """
    text = types.cast(pa.string())
    codes = arrow.strings(list(TYPE_LABELS))
    labels = arrow.strings(list(TYPE_LABELS.values()))
    found = labels.take(pc.index_in(text, value_set=codes))
    return _combined(pc.coalesce(found, text))


# --- Arrow: ranks ----------------------------------------------------------------


def exclude_flagged_table(
    leaderboard: pa.Table,
    *,
    column: str = "flagged",
    by: str = "average",
    method: RankMethod = "min",
) -> pa.Table:
    """Take flagged variants out of the ranking and re-rank the others.

    Flagged variants keep their scores but get a null rank; the order becomes
    ranked variants first (by the new rank), then the unranked, each in their
    previous order.

    Args:
        leaderboard: The leaderboard with ``rank``, ``average`` and `column`.
        column: The boolean flag column (null counts as not flagged).
        by: The column ranked by (the suite's board's ``rank_by``).
        method: How ties share ranks (the board's ``rank_method``; ties keep
            their previous order, which is key order).

    Returns:
        The re-ranked leaderboard.

    Raises:
        SchemaMismatchError: `column` is missing or not true/false.

    Examples:
        >>> board = pa.table({"model": ["a", "b", "c"], "average": [9.0, 8.0, 7.0],
        ...     "rank": [1, 2, 3], "flagged": [True, False, False]})
        >>> exclude_flagged_table(board).select(["model", "rank"]).to_pydict()
        {'model': ['b', 'c', 'a'], 'rank': [1, 2, None]}
    """
    is_flagged = flag_mask(leaderboard, column)
    is_eligible = _is_valid(leaderboard["rank"]) & ~is_flagged
    rank = rank_descending(
        np.where(is_eligible, _as_floats(leaderboard[by]), np.nan), method=method
    )
    order = board_order(rank)
    index = leaderboard.column_names.index("rank")
    field = leaderboard.schema.field(index)
    ranked = leaderboard.set_column(index, field, _int_array(rank).cast(field.type))
    return ranked.take(arrow.array(order))


def rank_within_table(leaderboard: pa.Table, column: str) -> pa.Table:
    """Add ``rank_within_<column>``: the rank by average among variants sharing `column`.

    Only ranked variants are ranked within their group (ties share the smallest
    rank, as in ``rank`` and :func:`lbnorm.board.rank.rank_descending`); a null
    group value gives a null group rank. A column of that name already there
    is recomputed in place.

    Args:
        leaderboard: The leaderboard with ``rank`` and ``average``.
        column: The grouping column, e.g. ``size_class`` or ``type``.

    Returns:
        The leaderboard with the group ranks (``int64``, with a ``doc``).

    Raises:
        SchemaMismatchError: `column` is missing.

    Examples:
        >>> board = pa.table({"average": [9.0, 8.0, 7.0, 6.0], "rank": [1, 2, 3, None],
        ...     "size_class": ["65B+", "<3B", "<3B", "<3B"]})
        >>> rank_within_table(board, "size_class")["rank_within_size_class"].to_pylist()
        [1, 1, 2, None]
    """
    _require(leaderboard, column, purpose="rank within")
    groups = _codes(leaderboard[column])
    values = np.where(
        _is_valid(leaderboard["rank"]), _as_floats(leaderboard["average"]), np.nan
    )
    name = f"rank_within_{column}"
    field = pa.field(
        name,
        pa.int64(),
        metadata={
            "doc": f"Rank by average among variants with the same {column} (1 = best); "
            "null if unranked or the group is unknown."
        },
    )
    ranks = _int_array(_rank_descending_within(values, groups))
    if name in leaderboard.column_names:
        return leaderboard.set_column(
            leaderboard.column_names.index(name), field, ranks
        )
    return leaderboard.append_column(field, ranks)


def annotate_table(
    leaderboard: pa.Table,
    metadata: str | Path | pa.Table | pd.DataFrame | None,
    *,
    rank_within_columns: Sequence[str] = (),
    is_flagged_excluded: bool = False,
    source: str | None = None,
    rank_by: str = "average",
    rank_method: RankMethod = "min",
) -> tuple[pa.Table, dict[str, Any] | None]:
    """Join metadata, then exclude flagged variants and add group ranks, as asked.

    What ``lbnorm run`` does after the engine, on Arrow: no pandas unless the
    metadata comes as a frame. The leaderboard's own columns keep their types;
    the columns added come after them, each with a ``doc`` in its field
    metadata.

    Args:
        leaderboard: The leaderboard.
        metadata: A metadata file, an Arrow table, a pandas frame, or None.
        rank_within_columns: Columns to rank within (each adds a column).
        is_flagged_excluded: Re-rank without the ``flagged`` variants.
        source: Where a table or frame came from (the file it was read from),
            for messages and the columns' docs; default ``<frame>``.
        rank_by: The column the suite's board ranks by (``average`` by default).
        rank_method: How its ties share ranks.

    Returns:
        The annotated leaderboard, and the metadata's coverage (see
        :func:`join_metadata_table`; None without metadata).

    Raises:
        InputError: The metadata file cannot be read, or lacks a requested column.
    """
    if isinstance(metadata, str | Path):
        metadata, source = read_raw_metadata(metadata), str(metadata)
    elif metadata is not None and not isinstance(metadata, pa.Table):
        metadata = _frame_table(metadata)
    board, coverage = leaderboard, None
    if metadata is not None:
        board, coverage = join_metadata_table(
            leaderboard, metadata, source=source or "<frame>"
        )
    if is_flagged_excluded:
        board = exclude_flagged_table(board, by=rank_by, method=rank_method)
        stale = [  # group ranks already there were computed with the flagged
            name.removeprefix("rank_within_")
            for name in board.column_names
            if name.startswith("rank_within_")
            and name.removeprefix("rank_within_") in board.column_names
        ]
        rank_within_columns = [*stale, *rank_within_columns]
    for column in dict.fromkeys(rank_within_columns):
        board = rank_within_table(board, column)
    return board, coverage


# --- helpers ---------------------------------------------------------------------


def _key_codes(tables: Sequence[pa.Table], keys: Sequence[str]) -> list[IntArray]:
    """One code per distinct combination of `keys` across `tables` (each table's rows)."""
    parts = []
    for name in keys:
        kind = pa.bool_() if name == "chat_template" else pa.string()
        chunks = [chunk for table in tables for chunk in table[name].cast(kind).chunks]
        parts.append(_codes(pa.chunked_array(chunks, type=kind)))
    codes, _ = group_keys(parts, [int(part.max(initial=-1)) + 1 for part in parts])
    return np.split(codes, np.cumsum([table.num_rows for table in tables])[:-1])


def _codes(column: Column) -> IntArray:
    """Each value's index among the column's distinct values; -1 for null (and NaN)."""
    if isinstance(column, pa.Array):
        column = pa.chunked_array([column])
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if pa.types.is_floating(column.type):
        column = pc.if_else(pc.is_nan(column), arrow.scalar(None, column.type), column)
    if column.type == pa.null():
        return np.full(len(column), -1, dtype=np.int64)
    encoded = pc.dictionary_encode(column)
    if not encoded.num_chunks:
        return np.zeros(0, dtype=np.int64)
    indices = pa.chunked_array([chunk.indices for chunk in encoded.chunks])
    return np.asarray(arrow.to_numpy(indices.cast(pa.int64()), null=-1), np.int64)


def _rank_descending_within(
    values: npt.NDArray[np.float64], groups: IntArray
) -> npt.NDArray[np.float64]:
    """Rank values highest first within each group; NaN value or group -1: unranked.

    Ties share the smallest rank, exactly as :func:`lbnorm.board.rank.rank_descending`
    ranks one group: a variant's rank is 1 + the values of its group above it.
    """
    ranks = np.full(values.shape, np.nan)
    rows = np.flatnonzero(~np.isnan(values) & (groups >= 0))
    if not len(rows):
        return ranks
    order = rows[np.lexsort((-values[rows], groups[rows]))]  # by group, best first
    group, value = groups[order], values[order]
    position = np.arange(len(order))
    is_group_start = np.r_[True, group[1:] != group[:-1]]
    is_run_start = is_group_start | np.r_[True, value[1:] != value[:-1]]
    group_start = np.maximum.accumulate(np.where(is_group_start, position, 0))
    run_start = np.maximum.accumulate(np.where(is_run_start, position, 0))
    ranks[order] = run_start - group_start + 1.0
    return ranks


def _append(table: pa.Table, name: str, column: Column, source: str) -> pa.Table:
    doc = COLUMN_DOCS.get(name, f"From the metadata table ({source}).")
    column = _combined(column)
    return table.append_column(
        pa.field(name, column.type, metadata={"doc": doc}), column
    )


def _combined(column: Column) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column


def _is_text(column: Column) -> bool:
    kind = (
        column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    )
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _as_floats(column: Column) -> npt.NDArray[np.float64]:
    """Numbers as float64, NaN where null or not a number (text that reads as one counts)."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.cast(kind.value_type), kind.value_type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        is_number = pc.fill_null(
            pc.match_substring_regex(column, _NUMBER), arrow.scalar(False, pa.bool_())
        )
        column = pc.if_else(
            is_number, pc.utf8_trim_whitespace(column), arrow.scalar(None, pa.string())
        ).cast(pa.float64())
    elif not (
        pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_boolean(kind)
    ):
        return np.full(len(column), np.nan)
    return np.asarray(
        arrow.to_numpy(column.cast(pa.float64()), null=np.nan), np.float64
    )


def _is_valid(column: Column) -> npt.NDArray[np.bool_]:
    return np.asarray(arrow.to_numpy(pc.is_valid(column)), dtype=bool)


def _int_array(values: npt.NDArray[np.float64]) -> pa.Array:
    is_null = np.isnan(values)
    return arrow.array(np.where(is_null, 0, values).astype(np.int64), mask=is_null)


def flag_mask(leaderboard: pa.Table, column: str) -> npt.NDArray[np.bool_]:
    """Which variants are flagged (`column` read as true/false; null: not flagged)."""
    _require(leaderboard, column, purpose="exclude flagged variants")
    flags = leaderboard[column]
    try:
        flags = flags.cast(pa.bool_())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        msg = (
            f"cannot exclude flagged variants: column {column!r} is not true/false "
            f"(type {flags.type}).\nHint: write the flag as True/False in the metadata table."
        )
        raise SchemaMismatchError(msg) from exc
    return np.asarray(arrow.to_numpy(flags, null=False), dtype=bool)


def _require(leaderboard: pa.Table, column: str, *, purpose: str) -> None:
    if column not in leaderboard.column_names:
        available = [
            name
            for name in leaderboard.column_names
            if name not in _NOT_GROUPS and not name.endswith(" Raw")
        ]
        msg = (
            f"cannot {purpose}: the leaderboard has no column {column!r}; "
            f"columns include {available[:12]}.\n"
            "Hint: pass a metadata table with that column (--metadata FILE), "
            "or choose one of the columns listed."
        )
        raise SchemaMismatchError(msg)


def _frame_table(frame: pd.DataFrame) -> pa.Table:
    """A metadata frame as Arrow (the frame's own column order and values)."""
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        msg = (
            f"<frame>: the metadata frame cannot be read as a table: {exc}.\n"
            "Hint: give each column one type (text, numbers, true/false or dates)."
        )
        raise SchemaMismatchError(msg) from exc


# --- pandas: the same on frames (lbnorm show, lbnorm query, the Python API) ----


def read_metadata(path: str | Path) -> pd.DataFrame:
    """Read and check a metadata table (CSV or Parquet) into pandas.

    :func:`conform_metadata_table` as a frame: keys typed like the
    leaderboard's (missing precision and revision as ''), boolean columns as
    the nullable ``boolean`` dtype.

    Raises:
        InputError: The file is missing, of another type, or unreadable.
        SchemaMismatchError: No ``model`` column, a key of the wrong type, or
            duplicate keys.
    """
    return _to_frame(conform_metadata_table(read_raw_metadata(path), source=str(path)))


def list_flagged(leaderboard: pd.DataFrame, *, column: str = "flagged") -> pd.DataFrame:
    """The flagged variants' keys and averages, in leaderboard order (a frame).

    Raises:
        SchemaMismatchError: `column` is missing.
    """
    flagged = _on_frame(
        leaderboard,
        lambda board: board.filter(pa.array(flag_mask(board, column))),
        needed=(column,),
    )
    present = [name for name in (*KEY_COLUMNS, "average") if name in flagged.columns]
    return flagged[present]


def annotate_leaderboard(
    leaderboard: pd.DataFrame,
    metadata: str | Path | pd.DataFrame | None,
    *,
    rank_within_columns: Sequence[str] = (),
    is_flagged_excluded: bool = False,
    rank_by: str = "average",
    rank_method: RankMethod = "min",
) -> pd.DataFrame:
    """:func:`annotate_table` on a frame (what ``lbnorm show`` does on the fly).

    The arguments and errors are :func:`annotate_table`'s (`metadata`: a file,
    a frame or None).

    Returns:
        The annotated leaderboard: its own columns as they were (rows reordered
        if flagged variants were excluded), the columns added or recomputed
        with nullable dtypes (``Int64``, ``boolean``), their docs in
        ``attrs["column_docs"]``.
    """
    groups = [
        str(name).removeprefix("rank_within_")
        for name in leaderboard.columns
        if str(name).startswith("rank_within_")
    ]
    replaced = [f"rank_within_{column}" for column in rank_within_columns]
    if is_flagged_excluded:  # every rank is taken anew without the flagged
        replaced += ["rank", *(f"rank_within_{group}" for group in groups)]
    return _on_frame(
        leaderboard,
        lambda board: annotate_table(
            board,
            metadata,
            rank_within_columns=rank_within_columns,
            is_flagged_excluded=is_flagged_excluded,
            rank_by=rank_by,
            rank_method=rank_method,
        )[0],
        needed=(
            *KEY_COLUMNS,
            "rank",
            "average",
            rank_by,
            "flagged",
            *rank_within_columns,
            *groups,
        ),
        replaces=replaced,
    )


def _to_frame(table: pa.Table, *, nullable_integers: bool = False) -> pd.DataFrame:
    """Arrow to pandas: booleans as ``boolean`` (flags may be null), ranks as ``Int64``."""
    import pandas as pd  # a user is handed a frame

    def nullable(kind: pa.DataType) -> Any:
        if pa.types.is_boolean(kind):
            return pd.BooleanDtype()
        if nullable_integers and pa.types.is_integer(kind):
            return pd.api.types.pandas_dtype(
                str(kind).replace("u", "U").replace("int", "Int")
            )
        return None

    frame: pd.DataFrame = table.to_pandas(types_mapper=nullable)
    return frame


def _on_frame(
    frame: pd.DataFrame,
    annotate: Callable[[pa.Table], pa.Table],
    *,
    needed: Sequence[str],
    replaces: Sequence[str] = (),
) -> pd.DataFrame:
    """Run an Arrow function on a frame: the frame's own columns come back as they were.

    Only the `needed` columns go to Arrow (the others travel as null
    placeholders: their names count, for clashes, their values are not read);
    the frame's columns come back from the frame itself, in the result's row
    order, except those in `replaces`, which the function recomputed; the
    columns it added are converted (integers as ``Int64``, booleans as
    ``boolean``).
    """
    import pandas as pd  # the caller holds a frame

    frame = frame.reset_index(drop=True)
    wanted = set(needed)
    columns: dict[str, pa.Array] = {
        str(name): pa.Array.from_pandas(frame[name])
        if name in wanted
        else pa.nulls(len(frame))
        for name in frame.columns
    }
    columns[_ROW_COLUMN] = pa.array(np.arange(len(frame), dtype=np.int64))
    table = annotate(pa.table(columns))
    order = np.asarray(table[_ROW_COLUMN].to_numpy(), dtype=np.int64)
    added = [
        name
        for name in table.column_names
        if name != _ROW_COLUMN and (name not in frame.columns or name in replaces)
    ]
    kept = frame.iloc[order].reset_index(drop=True)
    converted = _to_frame(table.select(added), nullable_integers=True)
    result = pd.concat(
        [kept.drop(columns=[c for c in added if c in frame.columns]), converted], axis=1
    )
    result = result[[*frame.columns, *(c for c in added if c not in frame.columns)]]
    result.attrs["column_docs"] = {
        **frame.attrs.get("column_docs", {}),
        **{
            field.name: field.metadata[b"doc"].decode()
            for field in table.schema
            if field.name in added and field.metadata and b"doc" in field.metadata
        },
    }
    return result
