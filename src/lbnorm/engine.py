"""The batch engine: score batches in, dense (variant x subtask) arrays out.

Scores arrive as Arrow batches (Parquet row groups are streamed, so the working
set stays one row group; other formats arrive as one batch). Each batch is encoded
to integer codes (:class:`lbnorm.encode.KeyEncoder`), checked (every failure is
collected, with file and row), and its raw scores are scattered into a dense
``(variant, subtask)`` matrix. A cell is written once, so the result does not
depend on the order rows or files arrive in. At the end, variants are sorted by
key and handed to the kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa

from lbnorm.encode import KeyEncoder
from lbnorm.errors import ValidationError
from lbnorm.validate import (
    UnknownSubtasks,
    describe_failures,
    find_duplicates,
    find_failures,
    float_column,
)

__all__ = [
    "Batch",
    "CheckedBatch",
    "DenseScores",
    "UnknownSubtasks",
    "check_batch",
    "collect_scores",
]


_Matrix = TypeVar("_Matrix", npt.NDArray[np.float64], npt.NDArray[np.int64])


@dataclass(frozen=True, slots=True, kw_only=True)
class Batch:
    """Scores from one source, in the :data:`lbnorm.schemas.SCORES` contract.

    Attributes:
        table: Contract columns (optional ones may be absent; string columns may be
            dictionary-encoded), kept extra columns, and optionally ``_row``: a
            per-row locator for messages (a row number or a results key).
        source: The file the rows came from (when there is no ``source`` column).
        first_row: Row number of the table's first row in its file (1-based), used
            when there is no ``_row`` column.
    """

    table: pa.Table
    source: str
    first_row: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class DenseScores:
    """Every accepted score, as dense arrays over sorted variants and suite subtasks.

    Attributes:
        variants: The variant keys, one row per variant, sorted by key.
        raw: ``(n_variants, n_subtasks)`` raw scores, NaN where absent.
        rows: Same shape: the position of each score in :attr:`table` (-1 where
            absent), or None when the rows were not kept.
        table: Every batch's rows, concatenated (only when rows are kept).
        n_ignored: Rows dropped as unknown subtasks under ``unknown="ignore"``.
    """

    variants: pd.DataFrame
    raw: npt.NDArray[np.float64]
    rows: npt.NDArray[np.int64] | None
    table: pa.Table | None
    n_ignored: int


def collect_scores(
    batches: Iterable[Batch],
    bounds: pd.DataFrame,
    *,
    unknown: UnknownSubtasks = "error",
    keep_rows: bool = True,
    expected_rows: int = 0,
) -> DenseScores:
    """Encode, check and scatter every batch; raise once with all failures.

    Args:
        batches: The score batches.
        bounds: The suite's subtask table (:meth:`lbnorm.suites.Suite.subtask_table`).
        unknown: ``error`` reports unknown subtasks; ``ignore`` drops them.
        keep_rows: Keep the rows (for the subtask-level output); False keeps only
            the raw scores, for a smaller working set.
        expected_rows: Rows expected in all, to size the dense store up front.

    Returns:
        The dense scores.

    Raises:
        ValidationError: Any check failed in any batch; ``failures`` lists them.
    """
    encoder = KeyEncoder(bounds)
    n_subtasks = len(bounds)
    capacity = max(expected_rows // max(n_subtasks, 1) + 1, 16)
    raw = np.full((capacity, n_subtasks), np.nan)
    rows = np.full((capacity, n_subtasks), -1, dtype=np.int64) if keep_rows else None
    kept: list[pa.Table] = []
    failures: list[pd.DataFrame] = []
    offset = 0
    n_ignored = 0
    n_failed = 0
    for batch in batches:
        table = batch.table
        checked = check_batch(
            batch, encoder, unknown=unknown, seen_before=_stored_in(raw)
        )
        variant, subtask, scores = checked.variant, checked.subtask, checked.scores
        accepted, duplicate = checked.accepted, checked.failed["duplicate_score"]
        n_ignored += checked.n_ignored
        if checked.n_failed:
            failures.extend(describe_failures(batch, checked.failed, encoder, subtask))
            n_failed += checked.n_failed
        if encoder.n_variants > raw.shape[0]:
            capacity = max(2 * raw.shape[0], encoder.n_variants)
            raw = _grow(raw, capacity, np.nan)
            rows = None if rows is None else _grow(rows, capacity, -1)
        take = accepted & ~duplicate
        raw[variant[take], subtask[take]] = scores[take]
        if rows is not None:
            rows[variant[take], subtask[take]] = offset + np.flatnonzero(take)
            kept.append(table)
        offset += table.num_rows
    if failures:
        raise ValidationError.from_failures(
            pd.concat(failures, ignore_index=True), total=n_failed
        )
    order = encoder.variant_order()
    return DenseScores(
        variants=encoder.variant_keys().iloc[order].reset_index(drop=True),
        raw=raw[order],
        rows=None if rows is None else rows[order],
        table=_concat(kept) if rows is not None else None,
        n_ignored=n_ignored,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckedBatch:
    """A batch's codes and scores and, per check, the rows that fail it.

    Attributes:
        variant: Each row's variant code (-1 if a key is null).
        subtask: Each row's suite subtask code (-1 if unknown).
        scores: ``raw_score`` as floats.
        accepted: Rows with a variant and a known subtask.
        failed: Check name -> mask of failing rows (``duplicate_score`` included).
        n_failed: Rows failing any check.
        n_ignored: Rows dropped as unknown subtasks under ``unknown="ignore"``.
    """

    variant: npt.NDArray[np.int64]
    subtask: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float64]
    accepted: npt.NDArray[np.bool_]
    failed: dict[str, npt.NDArray[np.bool_]]
    n_failed: int
    n_ignored: int

    @property
    def is_good(self) -> npt.NDArray[np.bool_]:
        """Accepted rows that fail no check."""
        is_bad: npt.NDArray[np.bool_] = np.logical_or.reduce(list(self.failed.values()))
        return self.accepted & ~is_bad


def check_batch(
    batch: Batch,
    encoder: KeyEncoder,
    *,
    unknown: UnknownSubtasks,
    seen_before: Callable[
        [npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.bool_]
    ],
) -> CheckedBatch:
    """Encode a batch's keys and run every check on it (engines share this step).

    Args:
        batch: The batch.
        encoder: The run's key encoder (it learns the batch's new variants).
        unknown: Policy for subtasks the suite does not define.
        seen_before: Which (variant, subtask) pairs earlier batches supplied.

    Returns:
        The codes, scores and failure masks.
    """
    table = batch.table
    variant, subtask = encoder.encode(table)
    scores = float_column(table, "raw_score")
    failed = find_failures(table, scores, variant, subtask, encoder, unknown=unknown)
    accepted = (subtask >= 0) & (variant >= 0)
    failed["duplicate_score"] = find_duplicates(
        variant, subtask, accepted, encoder.n_subtasks, seen_before
    )
    return CheckedBatch(
        variant=variant,
        subtask=subtask,
        scores=scores,
        accepted=accepted,
        failed=failed,
        n_failed=int(np.logical_or.reduce(list(failed.values())).sum()),
        n_ignored=int((subtask < 0).sum()) if unknown == "ignore" else 0,
    )


def _stored_in(
    raw: npt.NDArray[np.float64],
) -> Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.bool_]]:
    """Which (variant, subtask) pairs already hold a score in the dense store."""

    def is_stored(
        variant: npt.NDArray[np.int64], subtask: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        inside = variant < raw.shape[0]
        stored = np.zeros(variant.shape, dtype=bool)
        stored[inside] = ~np.isnan(raw[variant[inside], subtask[inside]])
        return stored

    return is_stored


def _grow(matrix: _Matrix, rows: int, fill: float) -> _Matrix:
    grown = np.full((rows, matrix.shape[1]), fill, dtype=matrix.dtype)
    grown[: matrix.shape[0]] = matrix
    return grown


def _concat(tables: list[pa.Table]) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    names = list(dict.fromkeys(name for table in tables for name in table.column_names))
    aligned = []
    for table in tables:
        for name in names:
            if name not in table.column_names:
                table = table.append_column(name, pa.nulls(table.num_rows))
        aligned.append(table.select(names))
    return pa.concat_tables(aligned, promote_options="permissive")
