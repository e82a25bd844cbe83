"""Model metadata on pandas frames: thin wrappers for ``lbnorm show`` and the Python API.

Each function here runs its Arrow counterpart in :mod:`lbnorm.engines.metadata`
(``read_metadata`` -> ``conform_metadata_table``, ``annotate_leaderboard`` ->
``annotate_table``, ``list_flagged`` -> ``flag_mask``) on a frame, so there is one
implementation; a run (``lbnorm run``) uses the Arrow ones and loads no pandas.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lbnorm.core.schemas import KEY_COLUMNS
from lbnorm.engines.metadata import (
    ROW_COLUMN,
    annotate_table,
    conform_metadata_table,
    flag_mask,
    read_raw_metadata,
)
from lbnorm.suites.board import RankMethod

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "annotate_leaderboard",
    "list_flagged",
    "read_metadata",
]


def read_metadata(path: str | Path) -> pd.DataFrame:
    """Read and check a metadata table (CSV or Parquet) into pandas.

    :func:`~lbnorm.engines.metadata.conform_metadata_table` as a frame: keys
    typed like the leaderboard's (missing precision and revision as ''),
    boolean columns as the nullable ``boolean`` dtype.

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

    Args:
        leaderboard: The leaderboard.
        metadata: A metadata file, a frame, or None for none.
        rank_within_columns: Columns to rank within (each adds a column).
        is_flagged_excluded: Re-rank without the ``flagged`` variants.
        rank_by: The column the suite's board ranks by.
        rank_method: How its ties share ranks.

    Returns:
        The annotated leaderboard: its own columns as they were (rows reordered
        if flagged variants were excluded), the columns added or recomputed
        with nullable dtypes (``Int64``, ``boolean``), their docs in
        ``attrs["column_docs"]``.

    Raises:
        InputError: The metadata file cannot be read, or lacks a requested column.
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
        ),
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
    columns[ROW_COLUMN] = pa.array(np.arange(len(frame), dtype=np.int64))
    table = annotate(pa.table(columns))
    order = np.asarray(table[ROW_COLUMN].to_numpy(), dtype=np.int64)
    added = [
        name
        for name in table.column_names
        if name != ROW_COLUMN and (name not in frame.columns or name in replaces)
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
