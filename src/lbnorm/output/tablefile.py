"""Files written hashed as their bytes go out: Parquet tables in the one configuration, plain bytes.

The transaction (:mod:`lbnorm.output.transaction`) stages its tables through
:class:`TableFile`, and a single file's content goes through
:class:`Hashed`: the sha256 a manifest records is computed while writing,
never by reading the file again.

Imports nothing of lbnorm's: it sits beside the transaction, below the readers.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["Hashed", "TableFile"]

#: Columns with a few values per subtask: dictionary pages make them nearly free.
_FEW_VALUES = ("lower_bound", "n_samples")
#: High-cardinality text columns written without min/max statistics.
_NO_STATISTICS = frozenset({"model", "revision"})
#: Values encoded per call in the Parquet writer (pyarrow's default: 1,024):
#: faster, and the bytes written are the same.
_WRITE_BATCH_ROWS = 65_536


def _parquet_settings(
    schema: pa.Schema, name: str, *, is_tuned: bool, plain: tuple[str, ...]
) -> dict[str, Any]:
    """How a table is written: lbnorm's own tables tuned, added ones with pyarrow's defaults.

    Tuned: min/max statistics only where a reader can skip row groups by them
    (few-valued names; those of model names, shas and float scores prune
    nothing and cost a third of the write); float scores byte-stream split (as
    small as plain on k/n fractions, compressed in two thirds of the time);
    dictionary pages for dictionary-typed text and the few-valued columns, none
    for text unique per row (the leaderboard's keys, the columns in `plain`).
    """
    if not is_tuned:
        return {"compression": "zstd"}
    if name == "leaderboard.parquet":
        dictionary = ["precision"]
    else:
        dictionary = [f.name for f in schema if pa.types.is_dictionary(f.type)]
        dictionary += [n for n in _FEW_VALUES if n in schema.names]
    floats = [f.name for f in schema if pa.types.is_floating(f.type)]
    return {
        "compression": "zstd",
        "write_batch_size": _WRITE_BATCH_ROWS,
        "write_statistics": [
            n for n in schema.names if n not in _NO_STATISTICS and n not in floats
        ],
        "use_dictionary": [n for n in dictionary if n not in plain],
        "column_encoding": {
            n: "BYTE_STREAM_SPLIT" for n in floats if n not in _FEW_VALUES
        },
    }


class Hashed:
    """A descriptor as the file object Arrow writes to, hashing the bytes as they go out."""

    closed = False

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        """Write and hash `data` whole; its size."""
        view = memoryview(data).cast("B")
        size = len(view)
        self.sha256.update(view)
        while view:
            view = view[os.write(self.descriptor, view) :]
        self.size += size
        return size

    def tell(self) -> int:
        """The bytes written so far."""
        return self.size

    def flush(self) -> None:
        """Every write went to the descriptor already."""

    def close(self) -> None:
        """The descriptor stays its owner's."""


class TableFile:
    """A Parquet file written a part (one row group) at a time, hashed as it is written.

    Args:
        descriptor: Where the bytes go (the caller owns it).
        schema: The table's schema, metadata included.
        name: The file's name (``leaderboard.parquet`` keeps its keys plain).
        is_tuned: lbnorm's own tables; False: pyarrow's defaults (added tables,
            exports, the parse cache), as they were always written.
        plain: Columns written without dictionary pages.
    """

    def __init__(
        self,
        descriptor: int,
        schema: pa.Schema,
        *,
        name: str,
        is_tuned: bool = True,
        plain: tuple[str, ...] = (),
    ) -> None:
        self._sink = Hashed(descriptor)
        settings = _parquet_settings(schema, name, is_tuned=is_tuned, plain=plain)
        self._writer = pq.ParquetWriter(self._sink, schema, **settings)
        self.n_rows = 0

    def write(self, part: pa.Table, *, row_group_size: int | None = None) -> None:
        """Add `part` (as one row group of `row_group_size`, or pyarrow's default)."""
        self._writer.write_table(part, row_group_size=row_group_size)
        self.n_rows += part.num_rows

    def close(self) -> dict[str, Any]:
        """Finish and sync the file; its rows, columns, size and sha256."""
        self._writer.close()
        os.fsync(self._sink.descriptor)
        return {
            "rows": self.n_rows,
            "columns": len(self._writer.schema),
            "bytes": self._sink.size,
            "sha256": self._sink.sha256.hexdigest(),
        }

    def abandon(self) -> None:
        """Stop writing (the file goes with its staging folder or temporary)."""
        with contextlib.suppress(Exception):  # (a writer that failed may fail to close)
            self._writer.close()
