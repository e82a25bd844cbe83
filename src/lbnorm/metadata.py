"""Model metadata: facts about each model variant, joined into the leaderboard.

A metadata table (CSV or Parquet) has a ``model`` column, optionally the other
variant keys (``precision``, ``revision``, ``chat_template``), and any free
columns: the bundled demo's are ``type``, ``params_b`` (parameters in billions,
-1 if unknown), ``submission_date`` and ``flagged``. The join uses the key
columns the table has, so a table keyed by ``model`` alone covers every variant
of a model. A ``params_b`` column also gives a ``size_class`` column (the
leaderboard's size filters, see :data:`SIZE_CLASSES`).

On request, flagged variants lose their rank (the others are re-ranked without
them) and ranks are computed within groups, e.g. ``rank_within_size_class``.
Everything here but :func:`read_metadata` is a pure function on frames.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from lbnorm.errors import InputError, SchemaMismatchError
from lbnorm.kernel import rank_descending
from lbnorm.schemas import KEY_COLUMNS

__all__ = [
    "COLUMN_DOCS",
    "SIZE_CLASSES",
    "annotate_leaderboard",
    "annotate_table",
    "exclude_flagged",
    "join_metadata",
    "list_flagged",
    "rank_within",
    "read_metadata",
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

#: Docs for the Parquet schema of the columns this module may add; the writer
#: reads them from the leaderboard frame's ``attrs["column_docs"]``.
COLUMN_DOCS: dict[str, str] = {
    "type": "Model type (from the metadata table).",
    "params_b": "Parameters in billions; -1 if unknown (from the metadata table).",
    "submission_date": "Date the model was submitted (from the metadata table).",
    "flagged": "Flagged on the leaderboard (from the metadata table).",
    "size_class": "Size class from params_b: <3B, 3-6B, 6-10B, 10-20B, 20-40B, "
    "40-65B, 65B+ (lower edges inclusive); null if params_b is unknown.",
}

_KEY_DEFAULTS: dict[str, str] = {"precision": "", "revision": ""}
_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}


def read_metadata(path: str | Path) -> pd.DataFrame:
    """Read and check a metadata table (CSV or Parquet).

    Args:
        path: A ``.csv`` or ``.parquet`` file with a ``model`` column.

    Returns:
        The table, keys typed like the leaderboard's (missing precision and
        revision as ''), boolean columns as the nullable ``boolean`` dtype.

    Raises:
        InputError: The file is missing, of another type, or unreadable.
        SchemaMismatchError: No ``model`` column, a key of the wrong type, or
            duplicate keys.
    """
    path = Path(path)
    kind = _SUFFIXES.get(path.suffix.lower())
    if kind is None:
        msg = f"{path}: unsupported metadata file type {path.suffix!r}.\nHint: use a .csv or .parquet file."
        raise InputError(msg)
    try:
        if kind == "csv":
            table = pa_csv.read_csv(path)
        elif path.is_dir():  # a dataset directory named *.parquet
            table = pq.read_table(path)
        else:  # one file: ParquetFile spares importing pyarrow.dataset
            table = pq.ParquetFile(path).read()
    except (pa.ArrowException, OSError) as exc:
        msg = f"{path}: cannot read the metadata table as {kind}: {exc}.\nHint: check the path and that the file is complete {kind}."
        raise InputError(msg) from exc
    return conform_metadata(table.to_pandas(), source=str(path))


def conform_metadata(metadata: pd.DataFrame, *, source: str) -> pd.DataFrame:
    """Check a metadata frame and type its keys like the leaderboard's.

    Args:
        metadata: The table: ``model``, optional variant keys, free columns.
        source: Where it came from, for messages.

    Returns:
        The conformed frame (a new one).

    Raises:
        SchemaMismatchError: No ``model`` column, a key of the wrong type, or
            duplicate keys.

    Examples:
        >>> meta = pd.DataFrame({"model": ["a/b"], "precision": [None], "params_b": [7.2]})
        >>> conform_metadata(meta, source="m.csv")["precision"].tolist()
        ['']
    """
    if "model" not in metadata.columns:
        msg = (
            f"{source}: the metadata table has no 'model' column; found {list(metadata.columns)[:8]}.\n"
            f"Hint: key each row by 'model' (and optionally {list(KEY_COLUMNS[1:])}), as in leaderboard.parquet."
        )
        raise SchemaMismatchError(msg)
    is_unnamed = metadata["model"].isna() | metadata["model"].astype(str).eq("")
    if is_unnamed.any():
        msg = f"{source}: {int(is_unnamed.sum())} row(s) have no model name.\nHint: fill in or remove those rows."
        raise SchemaMismatchError(msg)
    keys = [name for name in KEY_COLUMNS if name in metadata.columns]
    fixes: dict[str, pd.Series] = {
        name: metadata[name].fillna(_KEY_DEFAULTS[name]).astype(str)
        for name in keys
        if name in _KEY_DEFAULTS
    }
    fixes["model"] = metadata["model"].astype(str)
    if "chat_template" in keys and not pd.api.types.is_bool_dtype(
        metadata["chat_template"]
    ):
        msg = (
            f"{source}: column 'chat_template' must be true/false, got dtype {metadata['chat_template'].dtype}.\n"
            "Hint: write True/False (CSV) or a boolean column (Parquet)."
        )
        raise SchemaMismatchError(msg)
    booleans = {
        name: metadata[name].astype("boolean")
        for name in metadata.columns
        if name not in keys and pd.api.types.is_bool_dtype(metadata[name])
    }
    metadata = metadata.assign(**fixes, **booleans)
    duplicated = metadata.duplicated(keys, keep=False)
    if duplicated.any():
        shown = metadata.loc[duplicated, keys].drop_duplicates().head(5)
        examples = ", ".join(map(str, shown.to_dict("records")))
        msg = (
            f"{source}: {int(duplicated.sum())} rows share their key {keys} with another row, e.g. {examples}.\n"
            "Hint: keep one row per key, or add the key columns that tell them apart "
            f"({[k for k in KEY_COLUMNS if k not in keys] or 'none left'})."
        )
        raise SchemaMismatchError(msg)
    return metadata


def join_metadata(
    leaderboard: pd.DataFrame, metadata: pd.DataFrame, *, source: str = "metadata"
) -> pd.DataFrame:
    """Append the metadata's free columns to the leaderboard, matched on variant keys.

    Variants without a metadata row get nulls; a table that matches no variant
    at all is an error (the keys are spelled differently). A ``params_b`` column
    also gives ``size_class``.

    Args:
        leaderboard: The leaderboard (variant keys first).
        metadata: A conformed metadata frame (see :func:`read_metadata`).
        source: Where the metadata came from, for messages.

    Returns:
        The leaderboard, same rows and order, metadata columns appended.

    Raises:
        SchemaMismatchError: A metadata column has a leaderboard column's name,
            or no variant matches any metadata row.

    Examples:
        >>> board = pd.DataFrame({"model": ["a/x", "b/y"], "average": [50.0, 40.0]})
        >>> meta = pd.DataFrame({"model": ["b/y", "a/x"], "params_b": [70.0, 1.5]})
        >>> join_metadata(board, meta)[["model", "params_b", "size_class"]].to_numpy().tolist()
        [['a/x', 1.5, '<3B'], ['b/y', 70.0, '65B+']]
    """
    keys = [name for name in KEY_COLUMNS if name in metadata.columns]
    if clashes := [
        name
        for name in metadata.columns
        if name not in keys and name in leaderboard.columns
    ]:
        msg = (
            f"{source}: metadata column(s) {clashes[:5]} have the names of leaderboard columns.\n"
            "Hint: rename them in the metadata table (e.g. add a prefix)."
        )
        raise SchemaMismatchError(msg)
    # a left join on the keys, many to one (conform_metadata refused duplicate
    # keys): each row's metadata row by key codes, then one reindex, which fills
    # and promotes dtypes as merge does, at a fraction of merge's cost
    match = _match_rows(leaderboard, metadata, keys)
    free = metadata.drop(columns=keys).reset_index(drop=True).reindex(match)
    free = free.set_axis(pd.RangeIndex(len(match)))
    joined = leaderboard.reset_index(drop=True).assign(
        **{name: free[name] for name in free.columns}
    )
    if len(joined) and not (match >= 0).any():
        board_keys = leaderboard[keys].head(2).to_dict("records")
        meta_keys = metadata[keys].head(2).to_dict("records")
        msg = (
            f"{source}: none of the {len(leaderboard):,} variants matches a metadata row on {keys}; "
            f"e.g. leaderboard {board_keys}, metadata {meta_keys}.\n"
            "Hint: spell the keys as leaderboard.parquet does, or drop key columns "
            "(precision, revision, chat_template) to match on fewer."
        )
        raise SchemaMismatchError(msg)
    if "params_b" in joined.columns and "size_class" not in joined.columns:
        joined = joined.assign(size_class=size_classes(joined["params_b"]))
    joined.attrs["column_docs"] = {
        **leaderboard.attrs.get("column_docs", {}),
        **{
            name: COLUMN_DOCS.get(name, f"From the metadata table ({source}).")
            for name in joined.columns
            if name not in leaderboard.columns
        },
    }
    return joined


def _match_rows(
    leaderboard: pd.DataFrame, metadata: pd.DataFrame, keys: list[str]
) -> npt.NDArray[np.intp]:
    """Return, for each leaderboard row, the metadata row with its keys (-1: none)."""
    n_rows = len(leaderboard)
    left = np.zeros(n_rows, dtype=np.int64)
    right = np.zeros(len(metadata), dtype=np.int64)
    for name in keys:  # one code per distinct combination of the keys so far
        both = pd.concat([leaderboard[name], metadata[name]], ignore_index=True)
        codes, uniques = pd.factorize(both, use_na_sentinel=False)
        combined, _ = pd.factorize(np.concatenate([left, right]) * len(uniques) + codes)
        left, right = combined[:n_rows], combined[n_rows:]
    matched: npt.NDArray[np.intp] = pd.Index(right).get_indexer(pd.Index(left))
    return matched


def size_classes(params_b: pd.Series) -> pd.Series:
    """Return each value's size class label (:data:`SIZE_CLASSES`); null if unknown.

    Examples:
        >>> size_classes(pd.Series([0.5, 7.6, 9.2, 14.8, -1.0])).tolist()
        ['<3B', '6-10B', '6-10B', '10-20B', nan]
    """
    values = pd.to_numeric(params_b, errors="coerce").to_numpy(dtype=np.float64)
    edges = np.array([edge for _, edge in SIZE_CLASSES])
    labels = np.array([label for label, _ in SIZE_CLASSES], dtype=object)
    index = np.searchsorted(edges, values, side="right") - 1
    is_known = np.isfinite(values) & (values > 0)
    classes = pd.Series(
        labels[np.clip(index, 0, len(labels) - 1)], index=params_b.index, dtype="str"
    )
    return classes.where(is_known)


def exclude_flagged(
    leaderboard: pd.DataFrame, *, column: str = "flagged"
) -> pd.DataFrame:
    """Take flagged variants out of the ranking and re-rank the others.

    Flagged variants keep their scores but get a null rank; the order becomes
    ranked variants first (by the new rank), then the unranked, each in their
    previous order.

    Args:
        leaderboard: The leaderboard with ``rank``, ``average`` and `column`.
        column: The boolean flag column (null counts as not flagged).

    Returns:
        The re-ranked leaderboard.

    Raises:
        SchemaMismatchError: `column` is missing.

    Examples:
        >>> board = pd.DataFrame({"model": ["a", "b", "c"], "average": [9.0, 8.0, 7.0],
        ...     "rank": pd.array([1, 2, 3], dtype="Int64"), "flagged": [True, False, False]})
        >>> exclude_flagged(board)[["model", "rank"]].to_numpy().tolist()
        [['b', 1], ['c', 2], ['a', <NA>]]
    """
    is_flagged = _flag_mask(leaderboard, column)
    average = leaderboard["average"].to_numpy(dtype=np.float64, na_value=np.nan)
    is_eligible = leaderboard["rank"].notna().to_numpy() & ~is_flagged
    rank = rank_descending(np.where(is_eligible, average, np.nan))
    order = np.lexsort(
        (np.arange(len(leaderboard)), np.where(np.isnan(rank), np.inf, rank))
    )
    return (
        leaderboard.assign(
            rank=pd.Series(rank, index=leaderboard.index).astype("Int64")
        )
        .iloc[order]
        .reset_index(drop=True)
    )


def list_flagged(leaderboard: pd.DataFrame, *, column: str = "flagged") -> pd.DataFrame:
    """Return the flagged variants' keys and averages, in leaderboard order.

    Raises:
        SchemaMismatchError: `column` is missing.
    """
    is_flagged = _flag_mask(leaderboard, column)
    return leaderboard.loc[is_flagged, [*KEY_COLUMNS, "average"]].reset_index(drop=True)


def rank_within(leaderboard: pd.DataFrame, column: str) -> pd.DataFrame:
    """Add ``rank_within_<column>``: the rank by average among variants sharing `column`.

    Only ranked variants are ranked within their group (ties share the smallest
    rank, as in ``rank``); a null group value gives a null group rank.

    Args:
        leaderboard: The leaderboard with ``rank`` and ``average``.
        column: The grouping column, e.g. ``size_class`` or ``type``.

    Returns:
        The leaderboard with the new column appended.

    Raises:
        SchemaMismatchError: `column` is missing.

    Examples:
        >>> board = pd.DataFrame({"average": [9.0, 8.0, 7.0, 6.0],
        ...     "rank": pd.array([1, 2, 3, None], dtype="Int64"),
        ...     "size_class": ["65B+", "<3B", "<3B", "<3B"]})
        >>> rank_within(board, "size_class")["rank_within_size_class"].tolist()
        [1, 1, 2, <NA>]
    """
    _require(leaderboard, column, purpose="rank within")
    average = leaderboard["average"].where(leaderboard["rank"].notna())
    group_rank = average.groupby(leaderboard[column], dropna=True).rank(
        method="min", ascending=False
    )
    name = f"rank_within_{column}"
    ranked = leaderboard.assign(**{name: group_rank.astype("Int64")})
    ranked.attrs["column_docs"] = {
        **leaderboard.attrs.get("column_docs", {}),
        name: f"Rank by average among variants with the same {column} (1 = best); "
        "null if unranked or the group is unknown.",
    }
    return ranked


def annotate_leaderboard(
    leaderboard: pd.DataFrame,
    metadata: str | Path | pd.DataFrame | None,
    *,
    rank_within_columns: Sequence[str] = (),
    is_flagged_excluded: bool = False,
) -> pd.DataFrame:
    """Join metadata, then exclude flagged variants and add group ranks, as asked.

    Args:
        leaderboard: The leaderboard.
        metadata: A metadata file, a frame, or None for none.
        rank_within_columns: Columns to rank within (each adds a column).
        is_flagged_excluded: Re-rank without the ``flagged`` variants.

    Returns:
        The annotated leaderboard.

    Raises:
        InputError: The metadata file cannot be read, or lacks a requested column.
    """
    if isinstance(metadata, str | Path):
        board = join_metadata(
            leaderboard, read_metadata(metadata), source=str(metadata)
        )
    elif metadata is not None:
        board = join_metadata(
            leaderboard, conform_metadata(metadata, source="<frame>"), source="<frame>"
        )
    else:
        board = leaderboard
    if is_flagged_excluded:
        board = exclude_flagged(board)
        stale = [  # group ranks already there were computed with the flagged
            name.removeprefix("rank_within_")
            for name in board.columns
            if name.startswith("rank_within_")
            and name.removeprefix("rank_within_") in board.columns
        ]
        rank_within_columns = [*stale, *rank_within_columns]
    for column in dict.fromkeys(rank_within_columns):
        board = rank_within(board, column)
    return board


def annotate_table(
    leaderboard: pa.Table,
    metadata: str | Path | pd.DataFrame | None,
    *,
    rank_within_columns: Sequence[str] = (),
    is_flagged_excluded: bool = False,
) -> pa.Table:
    """:func:`annotate_leaderboard` on an Arrow leaderboard; returns Arrow.

    The leaderboard's own columns keep their types; the columns added come after
    them, each with a ``doc`` in its field metadata.
    """
    board = annotate_leaderboard(
        leaderboard.to_pandas(),
        metadata,
        rank_within_columns=rank_within_columns,
        is_flagged_excluded=is_flagged_excluded,
    )
    docs = board.attrs.get("column_docs", {})
    arrays = [
        pa.array(board[field.name], type=field.type, from_pandas=True)
        for field in leaderboard.schema
    ]
    fields = list(leaderboard.schema)
    for name in board.columns:
        if name in leaderboard.column_names:
            continue
        column = pa.array(board[name], from_pandas=True)
        if pa.types.is_large_string(column.type):
            column = column.cast(pa.string())
        arrays.append(column)
        fields.append(
            pa.field(
                name,
                column.type,
                metadata={"doc": docs[name]} if name in docs else None,
            )
        )
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _flag_mask(leaderboard: pd.DataFrame, column: str) -> np.ndarray:
    _require(leaderboard, column, purpose="exclude flagged variants")
    return leaderboard[column].astype("boolean").fillna(False).to_numpy(dtype=bool)


def _require(leaderboard: pd.DataFrame, column: str, *, purpose: str) -> None:
    if column not in leaderboard.columns:
        contract = {"rank", "average", "n_benchmarks", "n_benchmarks_expected"}
        available = [
            name
            for name in leaderboard.columns
            if name not in contract and not name.endswith(" Raw")
        ]
        msg = (
            f"cannot {purpose}: the leaderboard has no column {column!r}; "
            f"columns include {available[:12]}.\n"
            "Hint: pass a metadata table with that column (--metadata FILE), "
            "or choose one of the columns listed."
        )
        raise SchemaMismatchError(msg)
