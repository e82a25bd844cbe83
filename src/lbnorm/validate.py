"""Validation of score batches against the contract and the suite.

Every failure is collected, not just the first, into one :class:`ValidationError`
whose ``failures`` frame has a row per bad score (``check``, ``source``, ``row``,
``column``, ``value``), as pandera's ``SchemaErrors`` does. The checks are numpy
masks over a whole batch; only failing rows are turned into text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lbnorm.encode import KeyEncoder
from lbnorm.errors import ValidationError
from lbnorm.options import UnknownSubtasks
from lbnorm.schemas import Batch

__all__ = [
    "CheckedBatch",
    "check_batch",
    "describe_failures",
    "failure_error",
    "failure_rows",
    "find_duplicates",
    "find_failures",
]

#: Which (variant, subtask) pairs earlier batches supplied, given their codes.
SeenBefore = Callable[
    [npt.NDArray[np.int64], npt.NDArray[np.int64]], npt.NDArray[np.bool_]
]

#: Rows shown per check and batch; the count of all failures is always exact.
MAX_FAILURES_SHOWN = 1000
_HINTS = {
    "empty_model": "every row needs a non-empty model name.",
    "null_key": "model, precision, revision, chat_template, benchmark and subtask must not be empty (null).",
    "non_finite_score": "raw_score must be a number in [0, 1]; fix or remove the row.",
    "percent_scale": "raw_score looks like a percentage; lbnorm expects fractions in [0, 1]: divide by 100.",
    "out_of_range": "raw_score must be a fraction in [0, 1].",
    "unknown_subtask": "the suite has no such (benchmark, subtask); fix the names (`lbnorm suites show SUITE` lists them), use another --suite, or pass --unknown ignore.",
    "duplicate_score": "each (model, precision, revision, chat_template, benchmark, subtask) must appear once; remove the duplicates or give them distinct variant keys.",
    "bad_stderr": "stderr must be a finite number >= 0, or empty.",
    "bad_n_samples": "n_samples must be a positive integer, or empty.",
}


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
    seen_before: SeenBefore,
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


def find_failures(
    table: pa.Table,
    scores: npt.NDArray[np.float64],
    variant: npt.NDArray[np.int64],
    subtask: npt.NDArray[np.int64],
    encoder: KeyEncoder,
    *,
    unknown: UnknownSubtasks,
) -> dict[str, npt.NDArray[np.bool_]]:
    """Return, per check, the mask of rows of `table` that fail it.

    Args:
        table: The batch.
        scores: Its ``raw_score`` as floats (NaN for null).
        variant: Each row's variant code (-1 if a key is null).
        subtask: Each row's suite subtask code (-1 if unknown).
        encoder: The encoder that made the codes.
        unknown: ``error`` makes unknown subtasks a failure.

    Returns:
        Check name -> mask of failing rows.
    """
    is_finite = np.isfinite(scores)
    checks = {
        "null_key": variant < 0,
        "empty_model": encoder.is_empty_model(variant),
        "non_finite_score": ~is_finite,
        "percent_scale": is_finite & (scores > 1.0) & (scores <= 100.0),
        "out_of_range": is_finite & ((scores < 0.0) | (scores > 100.0)),
    }
    if "stderr" in table.column_names:
        stderr, valid = _numbers(table, "stderr")
        bad = ~(stderr >= 0) | ~np.isfinite(stderr)  # NaN fails both
        checks["bad_stderr"] = bad if valid is None else bad & valid
    if "n_samples" in table.column_names:
        samples, valid = _numbers(table, "n_samples")
        bad = ~(samples > 0)
        checks["bad_n_samples"] = bad if valid is None else bad & valid
    if unknown == "error":
        checks["unknown_subtask"] = (subtask < 0) & (variant >= 0)
    return checks


def find_duplicates(
    variant: npt.NDArray[np.int64],
    subtask: npt.NDArray[np.int64],
    accepted: npt.NDArray[np.bool_],
    n_subtasks: int,
    seen_before: SeenBefore,
) -> npt.NDArray[np.bool_]:
    """Rows whose (variant, subtask) repeats in this batch or was seen before.

    Args:
        variant: Each row's variant code.
        subtask: Each row's suite subtask code.
        accepted: Rows that passed the other checks (only these are compared).
        n_subtasks: Subtasks in the suite.
        seen_before: Given variant and subtask codes, which pairs earlier
            batches already stored (the engine's store answers).

    Returns:
        The mask of duplicate rows.
    """
    is_all = bool(accepted.all())
    variant = variant if is_all else variant[accepted]
    subtask = subtask if is_all else subtask[accepted]
    duplicate = np.zeros(variant.shape, dtype=bool)
    if variant.size:
        low = int(variant.min())
        span = int(variant.max()) - low + 1
        if span * n_subtasks <= 4 * variant.size:  # the batch's variants are a run
            local = variant - low
        else:  # number the batch's variants densely
            present = np.zeros(span, dtype=bool)
            present[variant - low] = True
            local = (np.cumsum(present) - 1)[variant - low]
            span = int(local.max()) + 1
        linear = local * n_subtasks + subtask
        counts = np.bincount(linear, minlength=span * n_subtasks)
        if counts.max(initial=0) > 1:  # rare: only then find which rows repeat
            duplicate = counts[linear] > 1
        duplicate |= seen_before(variant, subtask)
    if is_all:
        return duplicate
    every = np.zeros(accepted.shape, dtype=bool)
    every[accepted] = duplicate
    return every


def describe_failures(
    batch: Batch, bad: dict[str, npt.NDArray[np.bool_]]
) -> list[pa.Table]:
    """Turn failure masks into rows of (check, source, row, column, value, hint)."""
    table = batch.table
    frames = []
    for check, mask in bad.items():
        positions = np.flatnonzero(mask)[:MAX_FAILURES_SHOWN]
        if positions.size == 0:
            continue
        picked = table.take(pa.array(positions))
        sources = (
            picked.column("source").cast(pa.string()).to_pylist()
            if "source" in table.column_names
            else [batch.source] * positions.size
        )
        locators = (
            [str(value) for value in picked.column("_row").to_pylist()]
            if "_row" in table.column_names
            else [str(batch.first_row + position) for position in positions]
        )
        column = {"bad_stderr": "stderr", "bad_n_samples": "n_samples"}.get(
            check, "raw_score"
        )
        if check in {"unknown_subtask", "duplicate_score", "null_key", "empty_model"}:
            column = "subtask"
            values = [
                f"{_text(m)} / {_text(b)} / {_text(s)}"
                for m, b, s in zip(
                    _strings(picked, "model"),
                    _strings(picked, "benchmark"),
                    _strings(picked, "subtask"),
                    strict=True,
                )
            ]
        else:
            values = [_text(value) for value in picked.column(column).to_pylist()]
        frames.append(
            _failure_table(check, sources, locators, [column] * len(values), values)
        )
    return frames


def failure_rows(
    check: str, values: list[str], *, source: str, row: str, column: str
) -> pa.Table:
    """Failure rows (in :func:`describe_failures`' columns) found without a batch.

    Args:
        check: The check's name (one of the hints' keys).
        values: The failing values, as shown.
        source: Where they came from.
        row: The row locator.
        column: The column checked.

    Returns:
        One failure row per value (at most :data:`MAX_FAILURES_SHOWN`).
    """
    shown = values[:MAX_FAILURES_SHOWN]
    n_shown = len(shown)
    return _failure_table(
        check, [source] * n_shown, [row] * n_shown, [column] * n_shown, shown
    )


def failure_error(failures: list[pa.Table], *, total: int) -> ValidationError:
    """The one error for every failure found in a run (`total` failing rows)."""
    return ValidationError.from_failures(
        pa.concat_tables(failures) if failures else _failure_table("", [], [], [], []),
        total=total,
    )


def _failure_table(
    check: str,
    sources: list[str],
    rows: list[str],
    columns: list[str],
    values: list[str],
) -> pa.Table:
    n_rows = len(values)
    return pa.table(
        {
            "check": pa.array([check] * n_rows, pa.string()),
            "source": pa.array(sources, pa.string()),
            "row": pa.array(rows, pa.string()),
            "column": pa.array(columns, pa.string()),
            "value": pa.array(values, pa.string()),
            "hint": pa.array([_HINTS.get(check, "")] * n_rows, pa.string()),
        }
    )


def _strings(table: pa.Table, name: str) -> list[object]:
    if name not in table.column_names:
        return [""] * table.num_rows
    return list(table.column(name).cast(pa.string()).to_pylist())


def _text(value: object) -> str:
    return "<empty>" if value is None else str(value)


def float_column(table: pa.Table, name: str) -> npt.NDArray[np.float64]:
    """A numeric column as float64, NaN for nulls or when the column is absent."""
    if name not in table.column_names:
        return np.full(table.num_rows, np.nan)
    numbers, valid = _numbers(table, name)
    values: npt.NDArray[np.float64] = np.asarray(numbers, dtype=np.float64)
    return values if valid is None else np.where(valid, values, np.nan)


def _numbers(
    table: pa.Table, name: str
) -> tuple[npt.NDArray[np.number[Any]], npt.NDArray[np.bool_] | None]:
    """A numeric column's values, without a copy where Arrow allows, and its validity.

    Values under a null are whatever the buffer holds; the validity mask (None:
    no nulls) says which rows count.
    """
    column = table.column(name)
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if array.null_count == 0:
        values: npt.NDArray[np.number[Any]] = array.to_numpy(zero_copy_only=False)
        return values, None
    if pa.types.is_null(array.type):
        return np.zeros(len(array)), np.zeros(len(array), dtype=bool)
    dtype = np.dtype(array.type.to_pandas_dtype())
    buffer = array.buffers()[1]
    values = np.frombuffer(buffer, dtype=dtype, count=array.offset + len(array))
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return values[array.offset :], valid
