"""Long-format Parquet tables, streamed one row group at a time.

String columns are read dictionary-encoded (Parquet stores them so): the engine
gets integer codes without building a Python string per row. A column chunk
whose writer gave up its dictionary (more distinct text than the dictionary page
holds, as rows of many models in random order make) is read plain and
dictionary-encoded afterwards, its rows grouped by all such columns at once
(``model`` and ``revision`` of a shuffled file): Arrow's reader would hash every
row of each into a dictionary as it decodes, which costs more; the same arrays
come out. A column stored as an Arrow dictionary that holds the whole file's
names in every row group (a pandas categorical) is, for a job that writes no
subtask table, read as string views and encoded with the row group's own names:
Arrow's dictionary read hashes every entry of the stored dictionary, row group
after row group. Only the columns the job needs are read, and the working set
stays one row group. An optional key column that is null (``precision``, ``revision``, ``metric``:
'', ``chat_template``: false) means unknown, as if the column were absent; a
null ``model``, ``benchmark`` or ``subtask`` stays null, and validation reports
it. Rows are counted 1-based (``row N`` in messages).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm._runtime import read_ahead
from lbnorm.core import arrow
from lbnorm.core.arrow import scalar
from lbnorm.core.errors import InputError, SchemaMismatchError
from lbnorm.core.options import ExtraColumns
from lbnorm.core.schemas import OPTIONAL_SCORE_DEFAULTS, REQUIRED_SCORE_COLUMNS, Batch
from lbnorm.readers.tables import NUMBER_TYPES, TEXT_COLUMNS, check_columns

__all__ = ["ParquetScores", "open_parquet_scores"]


class ParquetScores:
    """A long-format Parquet file, checked against the contract, ready to stream.

    Attributes:
        path: The file.
        num_rows: Rows in the file.
    """

    def __init__(
        self,
        path: Path,
        file: pq.ParquetFile,
        columns: list[str],
        strings: list[str],
        *,
        recode: bool = False,
    ) -> None:
        self.path = path
        self.num_rows = int(file.metadata.num_rows)
        self._file = file
        self._columns = columns
        self._strings = strings  # text columns stored as strings (not dictionaries)
        # a large stored dictionary may be replaced by the rows' own (no subtask
        # table, which carries the input's dictionaries, is written from them)
        self._recode = recode
        # the file opened to read text columns plain (when a row group needs it)
        self._plain: pq.ParquetFile | None = None
        # the file opened to read dictionary columns as string views (likewise)
        self._views: pq.ParquetFile | None = None

    @property
    def num_row_groups(self) -> int:
        """Row groups in the file (the units of streaming and of parallel work)."""
        return int(self._file.num_row_groups)

    def batches(self, row_groups: Sequence[int] | None = None) -> Iterator[Batch]:
        """Yield one :class:`Batch` per row group, types conformed to the contract.

        The next row group is read on a second thread (Arrow releases the GIL
        while it decodes) while the engine works on the current one.

        Args:
            row_groups: The row groups to read, in order (default: all).
        """
        indices = list(range(self.num_row_groups) if row_groups is None else row_groups)
        metadata = self._file.metadata
        first_rows = np.cumsum(
            [1] + [metadata.row_group(i).num_rows for i in range(self.num_row_groups)]
        )
        read = read_ahead((index, self._read(index)) for index in indices)
        try:
            for index, table in read:
                yield Batch(
                    table=table, source=str(self.path), first_row=int(first_rows[index])
                )
        finally:
            read.close()  # (closed with this generator, in the caller's thread)

    def _read(self, index: int) -> pa.Table:
        try:
            plain, large = self._routes(index)
            table = self._file.read_row_group(
                index,
                columns=[n for n in self._columns if n not in plain and n not in large],
            )
            encoded: dict[str, pa.Array] = {}
            if plain:
                if self._plain is None:
                    self._plain = pq.ParquetFile(self.path, read_dictionary=None)
                encoded = _encoded(self._plain, index, plain)
            if large:
                if self._views is None:
                    self._views = pq.ParquetFile(
                        self.path, binary_type=pa.binary_view()
                    )
                views = self._views.read_row_group(index, columns=list(large))
                encoded |= {name: _from_views(views.column(name)) for name in large}
            if encoded:
                table = pa.table(
                    {
                        name: encoded[name] if name in encoded else table.column(name)
                        for name in self._columns
                    }
                )
        except (pa.ArrowException, OSError) as exc:
            reason = " ".join(str(exc).split()).rstrip(".")  # one line, one stop
            msg = f"{self.path}: cannot read row group {index}: {reason}.\nHint: the file may be truncated; rewrite it."
            raise InputError(msg) from exc
        return _conform_types(table, self.path)

    def _routes(self, index: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Row group `index`'s text columns to read other than as Arrow's dictionary read.

        Returns:
            The columns stored as strings whose dictionary the writer gave up
            (read plain), and, for a job that writes no subtask table, the
            columns stored as Arrow dictionaries whose dictionary page is large
            for the rows (read as string views).
        """
        group = self._file.metadata.row_group(index)
        chunks = {
            group.column(i).path_in_schema: group.column(i)
            for i in range(group.num_columns)
        }
        named = [
            name for name in self._columns if name in TEXT_COLUMNS and name in chunks
        ]
        return tuple(
            name for name in named if name in self._strings and _is_plain(chunks[name])
        ), tuple(
            name
            for name in named
            if self._recode
            and name not in self._strings
            and _is_large_dictionary(chunks[name])
        )


def _is_plain(chunk: pq.ColumnChunkMetaData) -> bool:
    """Whether a text column chunk's data pages hold its strings, not dictionary indices.

    A writer whose dictionary page fills up writes the rest of the chunk plain;
    pyarrow does not say which pages are which, but indices take at most 4 bytes
    a value (32-bit ids), and plain strings at least 4 (their lengths) and more;
    the pages' headers get room besides (a small chunk costs little either way).
    """
    if not chunk.num_values or not chunk.has_dictionary_page:
        return bool(chunk.num_values)
    dictionary = chunk.data_page_offset - chunk.dictionary_page_offset
    return bool(
        chunk.total_compressed_size - dictionary
        > _PLAIN_BYTES * chunk.num_values + _HEADER_BYTES
    )


def _is_large_dictionary(chunk: pq.ColumnChunkMetaData) -> bool:
    """Whether a chunk's dictionary page is large for its rows (a file-wide dictionary).

    A pandas categorical keeps every name of the file in each row group's
    dictionary. Arrow's dictionary read hashes each entry of it into a table of
    its own, row group after row group; reading the rows as string views and
    dictionary-encoding them hashes each row instead, which costs less once
    the entries are more than about a quarter of the rows. The page's size
    decompressed is estimated from the chunk's ratio; names of ~30 bytes.
    """
    if not chunk.num_values or not chunk.has_dictionary_page:
        return False
    dictionary = chunk.data_page_offset - chunk.dictionary_page_offset
    ratio = chunk.total_uncompressed_size / max(chunk.total_compressed_size, 1)
    return bool(dictionary * ratio > _LARGE_DICTIONARY_BYTES * chunk.num_values)


def _from_views(column: pa.ChunkedArray) -> pa.Array:
    """A text column read as string views, as Arrow's dictionary read gives it."""
    own = column.combine_chunks().dictionary_encode()
    return pa.DictionaryArray.from_arrays(own.indices, own.dictionary.cast(pa.string()))


#: Decompressed dictionary bytes per row above which the rows are read as views.
_LARGE_DICTIONARY_BYTES = 8

#: Bytes per value of a chunk's data pages above which they hold strings.
_PLAIN_BYTES = 4
#: Room for the data pages' headers.
_HEADER_BYTES = 1024


def _encoded(
    file: pq.ParquetFile, index: int, plain: tuple[str, ...]
) -> dict[str, pa.Array]:
    """Row group `index`'s columns `plain`, read plain, as Arrow's dictionary read gives them.

    The rows are grouped by those columns together as slices of them stream by
    (Arrow's grouper: one hash a row for all of them, of the values where they
    lie; the strings are not kept); the groups are put in the order of their
    first rows, and each column's dictionary comes from the groups' values, so
    it holds them in first-seen order too.
    """
    from pyarrow import _acero  # (pyarrow.acero would import pandas)

    fields = [file.schema_arrow.field(name) for name in plain]
    reader = pa.RecordBatchReader.from_batches(
        pa.schema([*fields, pa.field("row", pa.int64())]),
        _numbered(
            file.iter_batches(_SLICE_ROWS, row_groups=[index], columns=list(plain))
        ),
    )
    aggregate = _acero.AggregateNodeOptions(
        [("row", "hash_list", None, "rows")], keys=list(plain)
    )
    groups = _acero.Declaration.from_sequence(
        [
            _acero.Declaration(
                "record_batch_reader_source",
                _acero.RecordBatchReaderSourceNodeOptions(reader),
            ),
            _acero.Declaration("aggregate", aggregate),
        ]
    ).to_table(use_threads=False)
    lists = groups.column("rows").combine_chunks()
    rows, starts = arrow.to_numpy(lists.values), arrow.to_numpy(lists.offsets)
    order = np.argsort(np.minimum.reduceat(rows, starts[:-1]))
    rank = np.empty(order.size, dtype=np.int32)
    rank[order] = np.arange(order.size, dtype=np.int32)
    group = np.empty(rows.size, dtype=np.int32)
    group[rows] = np.repeat(rank, np.diff(starts))
    columns = {}
    for name in plain:
        values = groups.column(name).combine_chunks().take(arrow.array(order))
        own = values.dictionary_encode()
        codes = arrow.to_numpy(own.indices, null=-1)[group]
        mask = codes < 0 if own.null_count else None
        columns[name] = pa.DictionaryArray.from_arrays(
            arrow.array(codes, pa.int32(), mask=mask), own.dictionary
        )
    return columns


def _numbered(slices: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The slices with their row numbers in the row group (a column ``row``)."""
    start = 0
    for batch in slices:
        rows = arrow.array(np.arange(start, start + batch.num_rows))
        yield batch.append_column("row", rows)
        start += batch.num_rows


#: Rows per slice of a row group read plain.
_SLICE_ROWS = 1 << 16


def open_parquet_scores(
    path: Path, *, extra_columns: ExtraColumns = "error", keep_details: bool = True
) -> ParquetScores:
    """Open a long-format Parquet file and check its columns.

    Args:
        path: The file.
        extra_columns: Policy for columns outside the contract.
        keep_details: Read ``metric`` and kept extra columns (needed for the
            subtask-level output); False reads only the keys, ``raw_score``,
            ``stderr`` and ``n_samples``.

    Returns:
        The opened file.

    Raises:
        InputError: Not a readable Parquet file.
        SchemaMismatchError: Required columns missing, or extra columns present
            under ``extra_columns="error"``, or a column of an unusable type.
    """
    try:
        file = pq.ParquetFile(path, read_dictionary=None)
        names = list(file.schema_arrow.names)
        text = [
            name
            for name in TEXT_COLUMNS
            if names.count(name) == 1  # (a repeated name is refused below)
            and _is_text(file.schema_arrow.field(name).type)
        ]
        # (a column stored as an Arrow dictionary is read as one, plain or not)
        strings = [
            name
            for name in text
            if not pa.types.is_dictionary(file.schema_arrow.field(name).type)
        ]
        file = pq.ParquetFile(path, read_dictionary=text)
    except (pa.ArrowException, OSError) as exc:
        msg = f"{path}: cannot read as parquet: {exc}.\nHint: check that the file is a complete Parquet file."
        raise InputError(msg) from exc
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        first, others = repeated[0], len(repeated) - 1
        also = f" (and {others} other name(s) repeat)" if others else ""
        msg = f"{path}: column {first!r} appears {names.count(first)} times{also}.\nHint: rewrite the file with each column name once."
        raise SchemaMismatchError(msg)
    extras = check_columns(names, source=str(path), extra_columns=extra_columns)
    for name, (fits, kind, form) in _STORED.items():  # numbers, then keys
        type_ = file.schema_arrow.field(name).type if name in names else None
        if type_ is not None and not fits(type_):
            msg = f"{path}: column {name!r} has type {type_}, not {kind}.\nHint: store {name} as {form}."
            raise SchemaMismatchError(msg)
    # stderr and n_samples make every benchmark's standard error; the metric only
    # the subtask table
    wanted = [*REQUIRED_SCORE_COLUMNS, *OPTIONAL_SCORE_DEFAULTS]
    columns = [n for n in wanted if n in names and (keep_details or n != "metric")]
    if keep_details and extra_columns == "keep":
        columns += extras
    return ParquetScores(path, file, columns, strings, recode=not keep_details)


def _is_text(type_: pa.DataType) -> bool:
    value = type_.value_type if pa.types.is_dictionary(type_) else type_
    return bool(pa.types.is_string(value) or pa.types.is_large_string(value))


def _is_number(type_: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(type_)
        or pa.types.is_floating(type_)
        or pa.types.is_decimal(type_)
    )


#: Per contract column a Parquet file stores: whether its type fits (a column
#: all null fits where null means unknown), and the type and the fix in words.
_STORED = {
    "raw_score": (
        _is_number,
        "a number",
        "a number (a fraction in [0, 1] for raw_score)",
    ),
    "stderr": (_is_number, "a number", "a number"),
    "n_samples": (_is_number, "a number", "a number"),
    **dict.fromkeys(
        TEXT_COLUMNS,
        (lambda type_: _is_text(type_) or pa.types.is_null(type_), "text", "strings"),
    ),
    "chat_template": (
        lambda type_: pa.types.is_boolean(type_) or pa.types.is_null(type_),
        "bool",
        "true/false",
    ),
}


def _conform_types(table: pa.Table, path: Path) -> pa.Table:
    """Score columns as float64/int64; optional keys' nulls as the value of an absent column.

    (:func:`open_parquet_scores` refused any other type.)
    """
    for name in table.column_names:
        column = original = table.column(name)
        target = NUMBER_TYPES.get(name)
        if pa.types.is_null(column.type) and name in _STORED:  # all null: unknown
            target = pa.bool_() if name == "chat_template" else pa.string()
        if target is not None and column.type != target:
            try:
                column = column.cast(target)
            except (pa.ArrowException, ValueError) as exc:
                msg = f"{path}: column {name!r} does not fit {target}: {exc}.\nHint: see the column contract in the README."
                raise SchemaMismatchError(msg) from exc
        # an optional key's null means unknown: the value an absent column takes
        default = OPTIONAL_SCORE_DEFAULTS.get(name)
        if isinstance(default, str | bool) and column.null_count:
            kind = pa.bool_() if name == "chat_template" else pa.string()
            column = pc.fill_null(column, scalar(default, kind))
        if column is not original:
            table = table.set_column(table.column_names.index(name), name, column)
    return table
