"""What proves a parse cache's stored scores are the ones its entries describe.

Each entry of the parse cache (:mod:`lbnorm.readers.cache`) is stored with a
64-bit digest of its scores (in any order) and of its file's sha256. A rows file
edited, even with its checksum in the cache's index updated to match, no longer
matches its entries' digests, and the cache is then rebuilt. This is integrity
against edits and damage, not a defence against someone who also rewrites the
entries.
"""

from __future__ import annotations

import hashlib

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.arrow import scalar, to_numpy

__all__ = ["entry_digests", "rows_match"]


def entry_digests(entries: pa.Table, rows: pa.Table) -> npt.NDArray[np.int64]:
    """Per entry, a 64-bit digest of its scores (in any order) and its file's sha256.

    Stored with the entries: a rows file edited, even with its checksum in the
    index updated to match, no longer matches (the cache is then rebuilt).
    The rows are those of the entries (:func:`rows_match`).
    """
    row = np.full(rows.num_rows, 0x9E3779B97F4A7C15, dtype=np.uint64)
    settings = [name for name in rows.column_names if name.startswith("setting_")]
    columns: tuple[tuple[str, str | float | int], ...] = (
        ("subtask_index", -1),
        ("raw_score", -1.0),
        ("stderr", -1.0),
        ("n_samples", -1),
        ("key", "\0"),
        *((name, "\0") for name in settings),  # the run settings, as text
    )
    for column, absent in columns:
        values = pc.fill_null(
            rows[column], scalar(absent, rows.schema.field(column).type)
        )
        if pa.types.is_string(values.type):
            row = _mixed(row ^ _string_hashes(values))
        else:  # (a float's bits, an integer widened)
            found = to_numpy(values)
            kind = np.float64 if found.dtype.kind == "f" else np.int64
            bits: npt.NDArray[np.uint64] = found.astype(kind).view(np.uint64)
            row = _mixed(np.bitwise_xor(row, bits))
    owner = to_numpy(
        pc.index_in(rows["path"], value_set=entries["path"]).cast(pa.int64())
    )
    digest = np.zeros(entries.num_rows, dtype=np.uint64)
    np.add.at(digest, owner, row)  # (wraps: an order-free sum modulo 2**64)
    sha = _string_hashes(pc.fill_null(entries["sha256"], scalar("", pa.string())))
    return _mixed(digest ^ sha).view(np.int64)


def _string_hashes(values: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.uint64]:
    """Per value, 64 bits of its blake2b (each distinct value hashed once)."""
    if isinstance(values, pa.ChunkedArray):  # (no chunks: combine_chunks probes pandas)
        values = (
            values.combine_chunks() if values.num_chunks else pa.nulls(0, values.type)
        )
    encoded = pc.dictionary_encode(values)
    hashes = np.array(
        [
            int.from_bytes(
                hashlib.blake2b(text.encode(), digest_size=8).digest(), "little"
            )
            for text in encoded.dictionary.to_pylist()  # distinct values, not rows
        ],
        dtype=np.uint64,
    )
    return hashes[to_numpy(encoded.indices).astype(np.int64)]


def _mixed(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finalizer: every input bit moves every output bit."""
    values = (values ^ (values >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    values = (values ^ (values >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return values ^ (values >> np.uint64(31))


def rows_match(entries: pa.Table, rows: pa.Table) -> bool:
    """Whether the entries' paths are distinct and each has its ``n_rows`` rows."""
    paths = entries["path"]
    if paths.null_count or pc.count_distinct(paths).as_py() != entries.num_rows:
        return False
    owner = pc.index_in(rows["path"], value_set=paths)
    if owner.null_count:  # rows of no entry
        return False
    counts = np.bincount(
        to_numpy(owner.cast(pa.int64())).astype(np.int64), minlength=entries.num_rows
    )
    return bool(np.array_equal(counts, to_numpy(entries["n_rows"], null=-1)))
