"""``lbnorm export --format table``: the leaderboard as its suite presents it.

A suite's ``[[board.columns]]`` say which leaderboard columns a board publishes,
under which names, in which order and to how many digits
(:class:`lbnorm.suites.board.Column`). :func:`board_table` builds that table
from an output folder: a ``model`` column with the names as given, then the
board's columns by their published names, rows in the leaderboard's order
(ranked rows best first, then the unranked). Rounding happens here only, on
presentation: the output's own tables keep every digit, and ranks were taken
on the unrounded values.

Rounding is numpy's ``round`` (``np.round(x, digits)``: ``rint(x * 10**d) /
10**d``, half to even on the binary value of the product), which is what a
pandas ``DataFrame.round`` publishes: 0.125 rounds to 0.12 (12.5, half to even),
and 2.675 to 2.68 (2.675 x 100 is 267.5 in binary), where Python's
``round(2.675, 2)`` gives 2.67.

A suite without ``[[board.columns]]`` presents the rank, the average (unless
the board has none), each benchmark's score and each rate, under the
leaderboard's own names.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.core import arrow
from lbnorm.core.errors import InputError
from lbnorm.core.version import lbnorm_version
from lbnorm.faces.export import EXPORT_MARK, write_exported
from lbnorm.output.reader import Output
from lbnorm.suites import Suite
from lbnorm.suites.board import Column

__all__ = ["board_table", "presented_columns", "round_half_even", "write_board_table"]

FloatArray = npt.NDArray[np.float64]


def round_half_even(values: FloatArray, digits: int) -> FloatArray:
    """Values rounded as numpy (and so pandas) rounds: half to even on the binary value.

    Examples:
        >>> round_half_even(np.array([0.125, 0.375, 2.675, 1.005, np.nan]), 2).tolist()
        [0.12, 0.38, 2.68, 1.0, nan]
    """
    rounded: FloatArray = np.round(values, digits)
    return rounded


def presented_columns(suite: Suite) -> tuple[Column, ...]:
    """The board's published columns; without any, rank, average, benchmarks and rates.

    Examples:
        >>> from lbnorm.suites import load_suite
        >>> [c.name for c in presented_columns(load_suite("openllm-v2"))][:3]
        ['rank', 'average', 'IFEval']
    """
    board = suite.board
    if board.columns:
        return board.columns
    names = [
        "rank",
        *(["average"] if board.average != "none" else []),
        *suite.benchmark_names,
        *board.rate_names,
    ]
    return tuple(Column(column=name, name=name) for name in names)


def board_table(out: str | Path) -> pa.Table:
    """Build the published table of an output folder, as its suite presents it.

    Args:
        out: An lbnorm output directory (``lbnorm run --out``).

    Returns:
        ``model``, then the presented columns under their published names;
        rows in the leaderboard's order.

    Raises:
        InputError: Not an output folder, its suite is gone, or its leaderboard
            lacks a column the suite presents.
    """
    output = Output.open(out, "leaderboard")
    folder = output.path
    suite, _ = output.suite()
    if suite is None:
        msg = f"{folder}: the suite this output was computed with cannot be read back, so its presentation is unknown.\nHint: rerun `lbnorm run` to rewrite the output."
        raise InputError(msg)
    columns = presented_columns(suite)
    board = output.table("leaderboard")
    if missing := [c.column for c in columns if c.column not in board.column_names]:
        msg = f"{folder}: leaderboard.parquet lacks the column(s) {missing[:5]} that suite {suite.name!r} presents.\nHint: rerun `lbnorm run` with this suite to rewrite the output."
        raise InputError(msg)
    arrays: list[pa.ChunkedArray | pa.Array] = [
        board["model"].cast(pa.string()),
    ]
    for column in columns:
        values = board[column.column]
        if column.digits is not None and pa.types.is_floating(values.type):
            numbers = arrow.to_numpy(values.combine_chunks().fill_null(np.nan))
            rounded = round_half_even(numbers.astype(np.float64), column.digits)
            blank = np.isnan(rounded)
            whole = column.digits == 0 and bool(
                np.all(np.abs(rounded[~blank]) <= _EXACT_INTEGERS)
            )
            values = pa.chunked_array(  # digits 0: counts shown as whole numbers
                [
                    arrow.array(
                        np.where(blank, 0, rounded).astype(np.int64)
                        if whole
                        else rounded,
                        mask=blank,
                    )
                ]
            )
        arrays.append(values)
    names = ["model", *(c.name for c in columns)]
    metadata = {
        EXPORT_MARK: json.dumps(
            {"export": "table", "suite": suite.name, "version": lbnorm_version()}
        ).encode()
    }
    return pa.Table.from_arrays(arrays, names=names).replace_schema_metadata(metadata)


#: Whole numbers a float64 holds exactly: a ``digits = 0`` column within them is
#: presented as integers.
_EXACT_INTEGERS = 2.0**53


def write_board_table(table: pa.Table, path: str | Path) -> Path:
    """Write the table: CSV if `path` ends in ``.csv`` (null as empty), else Parquet.

    Through :func:`lbnorm.faces.export.write_exported`: written whole, and only
    over a table lbnorm exported before.

    Raises:
        OutputError: `path` is a file lbnorm did not export, or the disk refuses;
            the file there is left as it was.
    """
    is_csv = Path(path).suffix.lower() == ".csv"
    return write_exported(table, path, csv_bytes=_csv_bytes(table) if is_csv else b"")


def _csv_bytes(table: pa.Table) -> bytes:
    """The table as CSV: shortest round-trip floats, whole ranks, null as empty."""
    import pandas as pd  # a file for people and spreadsheets: pandas' CSV

    frame = table.to_pandas()
    for field in table.schema:  # nullable integers (ranks) stay whole numbers
        if pa.types.is_integer(field.type):
            frame[field.name] = frame[field.name].astype(pd.Int64Dtype())
    text: str = frame.to_csv(index=False, lineterminator="\n")
    return text.encode()
