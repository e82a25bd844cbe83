"""Validation of score batches against the contract and the suite.

Every failure is collected, not just the first, into one :class:`ValidationError`
whose ``failures`` frame has a row per bad score (``check``, ``source``, ``row``,
``column``, ``value``, ``model``, ``benchmark``, ``subtask``), as pandera's
``SchemaErrors`` does. The checks are numpy masks over a whole batch; only
failing rows are turned into text.

How a failure is shown: the file; where in it (``line N`` in a CSV or JSONL
file, where the header is line 1; ``row N``, 1-based, in Parquet and frames;
the results key, e.g. ``results['leaderboard_gpqa']['acc_norm,none']``, in a
results file); the model, benchmark and subtask; and the cell as written
(``nan``, ``inf``, ``''`` for an empty CSV cell, ``null`` for a JSON or Parquet
null). A duplicate names the other row of the same file that holds the pair;
a pair given by an earlier input is said so (the engines' stores keep codes,
not files, so that file is not named).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core import arrow
from lbnorm.core.errors import ValidationError
from lbnorm.core.files import file_format
from lbnorm.core.options import UnknownSubtasks
from lbnorm.core.schemas import KEY_COLUMNS, Batch
from lbnorm.engines.encode import KeyEncoder
from lbnorm.suites import Scales

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
_SHOWN = 5  # failures of one check named in the message
#: A score from here to 100 is taken for a percentage even among fractions.
_SURELY_PERCENT = 2.0
_HINTS = {
    "empty_model": "every row needs a non-empty model name.",
    "null_key": "model, precision, revision, chat_template, benchmark and subtask must not be empty (null).",
    "non_finite_score": "raw_score must be a number in [0, 1]; fix or remove the row.",
    "percent_scale": "raw_score looks like a percentage; lbnorm expects fractions in [0, 1]: divide by 100.",
    "out_of_range": "raw_score must be a fraction in [0, 1].",
    "outside_range": "raw_score must lie in its benchmark's range (the suite's `range = [low, high]`, `lbnorm suites show SUITE --toml`); fix the score or the range.",
    "unknown_subtask": "the suite has no such (benchmark, subtask); fix the names (`lbnorm suites show SUITE` lists them), use another --suite, or pass --unknown ignore.",
    "duplicate_score": "each (model, precision, revision, chat_template, benchmark, subtask) must appear once; remove the duplicates or give them distinct variant keys.",
    "bad_stderr": "stderr must be a finite number >= 0, or empty.",
    "bad_n_samples": "n_samples must be a positive integer, or empty.",
}

#: Checks whose failure is shown by the row's subtask, not a cell of its own.
_NAMED_BY_SUBTASK = {"duplicate_score", "unknown_subtask", "null_key", "empty_model"}

#: Per optional detail column, which values are bad (a null is a missing value).
_BAD_DETAILS: dict[str, Callable[[npt.NDArray[Any]], npt.NDArray[np.bool_]]] = {
    "stderr": lambda se: (se < 0) | np.isinf(se),  # NaN is a missing stderr, as null
    "n_samples": lambda n: ~(n > 0),
}

#: A numeric column's values and its validity (None: no null).
_Numbers = tuple[npt.NDArray[np.number[Any]], npt.NDArray[np.bool_] | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckedBatch:
    """A batch's codes and scores and, per check, the rows that fail it.

    Attributes:
        variant: Each row's variant code (-1 if a key is null).
        subtask: Each row's suite subtask code (-1 if unknown).
        scores: ``raw_score`` as floats.
        details: ``stderr`` and ``n_samples``, those the batch has, as floats
            (NaN: a row gives none).
        accepted: Rows with a variant and a known subtask.
        failed: Check name -> mask of failing rows (``duplicate_score`` included),
            for the checks some row fails.
        n_failed: Rows failing any check.
        n_ignored: Rows dropped as unknown subtasks under ``unknown="ignore"``.
        is_renamed: Some rows spell a suite name in another case (``MuSR``): the
            subtask table gives them the suite's spelling.
    """

    variant: npt.NDArray[np.int64]
    subtask: npt.NDArray[np.int64]
    scores: npt.NDArray[np.float64]
    details: dict[str, npt.NDArray[np.float64]]
    accepted: npt.NDArray[np.bool_]
    failed: dict[str, npt.NDArray[np.bool_]]
    n_failed: int
    n_ignored: int
    is_renamed: bool = False

    @property
    def is_good(self) -> npt.NDArray[np.bool_]:
        """Accepted rows that fail no check."""
        if not self.failed:  # the usual batch: nothing to take away
            return self.accepted
        is_bad: npt.NDArray[np.bool_] = np.logical_or.reduce(list(self.failed.values()))
        return self.accepted & ~is_bad

    @property
    def good(self) -> npt.NDArray[np.bool_] | slice:
        """:attr:`is_good` as an index: every row (a slice: no copy) when all are."""
        is_good = self.is_good
        return slice(None) if is_good.all() else is_good


def check_batch(
    batch: Batch,
    encoder: KeyEncoder,
    *,
    unknown: UnknownSubtasks,
    seen_before: SeenBefore,
    scales: Scales | None = None,
) -> CheckedBatch:
    """Encode a batch's keys and run every check on it (engines share this step).

    Args:
        batch: The batch.
        encoder: The run's key encoder (it learns the batch's new variants).
        unknown: Policy for subtasks the suite does not define.
        seen_before: Which (variant, subtask) pairs earlier batches supplied.
        scales: The suite's declared ranges (None: every score a fraction).

    Returns:
        The codes, scores and failure masks.
    """
    table = batch.table
    variant, subtask = encoder.encode(table)
    names = ("raw_score", *_BAD_DETAILS)
    numbers = {
        name: _numbers(table, name) for name in names if name in table.schema.names
    }
    raw = numbers.pop("raw_score", None)  # (readers make sure there is one)
    scores = np.full(table.num_rows, np.nan) if raw is None else _floats(*raw)
    failed = find_failures(
        table,
        scores,
        variant,
        subtask,
        encoder,
        numbers,
        unknown=unknown,
        scales=scales,
    )
    is_ignored = (subtask < 0) & ~failed["null_key"]  # unknown, not null
    accepted = (subtask >= 0) & (variant >= 0)
    failed["duplicate_score"] = find_duplicates(
        variant, subtask, accepted, encoder.n_subtasks, seen_before
    )
    failed = {name: mask for name, mask in failed.items() if mask.any()}
    return CheckedBatch(
        variant=variant,
        subtask=subtask,
        scores=scores,
        details={name: _floats(*pair) for name, pair in numbers.items()},
        accepted=accepted,
        failed=failed,
        n_failed=int(np.logical_or.reduce(list(failed.values())).sum())
        if failed
        else 0,
        n_ignored=int(is_ignored.sum()) if unknown == "ignore" else 0,
        is_renamed=encoder.is_last_renamed,
    )


def find_failures(
    table: pa.Table,
    scores: npt.NDArray[np.float64],
    variant: npt.NDArray[np.int64],
    subtask: npt.NDArray[np.int64],
    encoder: KeyEncoder,
    details: dict[str, _Numbers],
    *,
    unknown: UnknownSubtasks,
    scales: Scales | None = None,
) -> dict[str, npt.NDArray[np.bool_]]:
    """Return, per check, the mask of rows of `table` that fail it.

    Args:
        table: The batch.
        scores: Its ``raw_score`` as floats (NaN for null).
        variant: Each row's variant code (-1 if a key is null).
        subtask: Each row's suite subtask code (-1 if unknown).
        encoder: The encoder that made the codes.
        details: ``stderr`` and ``n_samples``, those the batch has: their
            values and validity (:func:`_numbers`).
        unknown: ``error`` makes unknown subtasks a failure.
        scales: The suite's declared ranges: a row of a benchmark with one is
            checked on it (a few ulps of slack at each end), not as a fraction.

    Returns:
        Check name -> mask of failing rows.
    """
    is_finite = np.isfinite(scores)
    is_outside = None  # (None: no row of a benchmark with a declared range)
    if scales is not None:
        is_ranged, is_outside = scales.outside(scores, subtask)
        if is_ranged.any():  # the fraction checks see only the other rows
            scores = np.where(is_ranged, 0.5, scores)
        else:
            is_outside = None
    # a score in (1, 100] looks like a percentage when it is at least 2 or when at
    # least half the batch's scores are in (1, 100]: a stray 1.2 among fractions is
    # out of range (a sum, a bug), not a scale to divide by 100
    is_percent_range = is_finite & (scores > 1.0) & (scores <= 100.0)
    n_percent = int(np.count_nonzero(is_percent_range))
    is_percent = is_percent_range
    if 2 * n_percent < int(np.count_nonzero(is_finite)):
        is_percent = is_percent_range & (scores >= _SURELY_PERCENT)
    is_null_name = np.zeros(table.num_rows, dtype=bool)
    for name in ("benchmark", "subtask"):  # required: the readers made sure
        if name in table.column_names and table.column(name).null_count:
            is_null_name |= arrow.to_numpy(table.column(name).is_null())
    checks = {
        "null_key": (variant < 0) | is_null_name,
        "empty_model": encoder.is_empty_model(variant),
        "non_finite_score": ~is_finite,
        "percent_scale": is_percent,
        "out_of_range": (is_finite & ((scores < 0.0) | (scores > 100.0)))
        | (is_percent_range & ~is_percent),
    }
    for name, (values, valid) in details.items():
        bad = _BAD_DETAILS[name](values)
        checks[f"bad_{name}"] = bad if valid is None else bad & valid
    if unknown == "error":
        checks["unknown_subtask"] = (subtask < 0) & (variant >= 0) & ~is_null_name
    if is_outside is not None:
        checks["outside_range"] = is_outside
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
    batch: Batch,
    bad: dict[str, npt.NDArray[np.bool_]],
    *,
    known: Sequence[tuple[str, str]] = (),
    limit: int | None = MAX_FAILURES_SHOWN,
) -> list[pa.Table]:
    """Turn failure masks into failure rows (see the module docstring for the columns).

    Args:
        batch: The batch checked.
        bad: Check name -> mask of failing rows.
        known: The suite's (benchmark, subtask) names: an unknown pair's message
            suggests the closest.
        limit: Rows kept per check (None: every one, for ``--failures FILE``).

    Returns:
        One table per failed check, at most `limit` rows each.
    """
    table = batch.table
    frames = []
    for check, mask in bad.items():
        positions = np.flatnonzero(mask)[:limit]
        if positions.size == 0:
            continue
        picked = table.take(arrow.array(positions))
        sources = (
            picked.column("source").cast(pa.string()).to_pylist()
            if "source" in table.column_names
            else [batch.source] * positions.size
        )
        locators = _locators(batch, picked, positions)
        column = check.removeprefix("bad_") if check.startswith("bad_") else "raw_score"
        if check in _NAMED_BY_SUBTASK:
            column = "subtask"
        if check == "duplicate_score":
            every_row = np.arange(table.num_rows)
            values = _repeats(batch, positions, _locators(batch, table, every_row))
        else:
            values = _cells(picked, column)
        keys = [_strings(picked, name) for name in ("model", "benchmark", "subtask")]
        suggestions = (
            _suggestions(keys[1], keys[2], known)
            if check == "unknown_subtask" and known
            else None
        )
        frames.append(
            failure_rows(
                check,
                values,
                sources=sources,
                rows=locators,
                column=column,
                keys=keys,
                suggestions=suggestions,
            )
        )
    return frames


def _suggestions(
    benchmarks: list[str | None],
    subtasks: list[str | None],
    known: Sequence[tuple[str, str]],
) -> list[str | None]:
    """For each unknown (benchmark, subtask), the suite's closest names, if any.

    A known benchmark (ignoring case) gets its closest subtasks; an unknown one
    the closest benchmarks.

    Examples:
        >>> known = [("GPQA", "diamond"), ("GPQA", "main"), ("BBH", "navigate")]
        >>> _suggestions(["gpqa", "GPQ", "x"], ["diamnd", "main", "y"], known)
        ["'diamond'", "'GPQA'", None]
    """
    by_benchmark: dict[str, list[str]] = {}
    for benchmark, subtask in known:
        by_benchmark.setdefault(benchmark, []).append(subtask)
    folded = {name.casefold(): name for name in by_benchmark}
    found: dict[tuple[str, str], str | None] = {}
    pairs = list(zip(map(_text, benchmarks), map(_text, subtasks), strict=True))
    for pair in pairs:
        if pair in found:  # failing rows: at most a thousand a batch
            continue
        matched = folded.get(pair[0].casefold())
        if matched is None:
            close = difflib.get_close_matches(pair[0].casefold(), list(folded), n=2)
            close = [folded[name] for name in close]
        else:
            names = {name.casefold(): name for name in by_benchmark[matched]}
            close = difflib.get_close_matches(pair[1].casefold(), list(names), n=2)
            close = [names[name] for name in close]
        found[pair] = " or ".join(map(repr, close)) or None
    return [found[pair] for pair in pairs]


def _locators(
    batch: Batch, picked: pa.Table, positions: npt.NDArray[np.intp]
) -> list[str]:
    """Each row's place in its file: a line or row number, or a results key."""
    if "_row" in picked.column_names:
        return [str(value) for value in picked.column("_row").to_pylist()]
    return [str(batch.first_row + int(position)) for position in positions]


def _cells(picked: pa.Table, column: str) -> list[str]:
    """Each failing cell as written: its text when the reader kept it, else its value."""
    values = [_text(value) for value in picked.column(column).to_pylist()]
    if f"_{column}_text" in picked.column_names:
        written = picked.column(f"_{column}_text").to_pylist()
        values = [
            value if text is None else str(text)
            for value, text in zip(values, written, strict=True)
        ]
    return values


def _repeats(
    batch: Batch, positions: npt.NDArray[np.intp], locators: list[str]
) -> list[str]:
    """For each duplicate row, where else it is: rows of this file, or an earlier input."""
    table = batch.table
    keys = [
        name
        for name in (*KEY_COLUMNS, "benchmark", "subtask")
        if name in table.column_names
    ]
    columns = {  # plain: dictionaries of several chunks do not group as one
        name: table[name].cast(pa.bool_() if name == "chat_template" else pa.string())
        for name in keys
    }
    numbered = pa.table({**columns, "_at": arrow.array(np.arange(table.num_rows))})
    groups = numbered.group_by(keys, use_threads=False).aggregate([("_at", "list")])
    where = {}
    for rows in groups["_at_list"].to_pylist():
        if len(rows) > 1:
            for row in rows:
                where[row] = [other for other in rows if other != row]
    unit = _unit(batch.source, locators[0] if locators else "")
    described = []
    for position in positions:
        others = where.get(int(position), [])
        if others:
            shown = ", ".join(f"{unit}{locators[other]}" for other in others[:3])
            described.append(f"also at {shown}")
        else:
            described.append("also given by an earlier input")
    return described


def _unit(source: str, locator: str) -> str:
    """``line `` for a text table's row numbers, ``row `` for others', '' for keys."""
    if not locator.isdigit():
        return ""
    return "line " if file_format(source) in ("csv", "jsonl") else "row "


def failure_error(failures: list[pa.Table], *, total: int) -> ValidationError:
    """The one error for every failure found in a run (`total` failing rows).

    The failures are put in file and line order (the files in the order they
    were read; a results file's keys in suite order). The message gives, per
    check, the first failures with their file, place, model, benchmark,
    subtask and cell, and the check's hint; ``failures`` holds them all (up to
    :data:`MAX_FAILURES_SHOWN` per check and batch, unless the run was asked
    for a failures file).
    """
    table = (
        pa.concat_tables(failures, promote_options="permissive")
        if failures
        else failure_rows("", [], sources=[], rows=[], column="")
    )
    table = table.take(arrow.array(_line_order(table)))
    rows = table.to_pylist()
    n_listed = len({(row["source"], row["row"]) for row in rows})  # a row, once
    listed = (
        ""
        if n_listed >= total
        else f" (the first {n_listed:,} are listed; --failures FILE writes every one)"
    )
    by_check: dict[str, list[dict[str, str]]] = {}
    for row in rows:  # failure rows: at most a thousand per check and batch
        by_check.setdefault(row["check"], []).append(row)
    lines = [f"{total:,} score(s) failed validation{listed}:"]
    for check in sorted(by_check):
        group = by_check[check]
        shown = ", ".join(_describe(row) for row in group[:_SHOWN])
        more = f" and {len(group) - _SHOWN:,} more" if len(group) > _SHOWN else ""
        lines.append(f"- {check}: {shown}{more}")
        lines.append(f"  Hint: {_HINTS.get(check, '')}")
    return ValidationError("\n".join(lines), table.drop_columns(["suggestion"]))


def _line_order(table: pa.Table) -> npt.NDArray[np.int64]:
    """Failure rows in file and line order: files as first met, then line or row number.

    A results file's failures (located by key, not number) keep their order:
    the suite's.
    """
    n_rows = table.num_rows
    if not n_rows:
        return np.zeros(0, dtype=np.int64)
    files = pc.dictionary_encode(table["source"].combine_chunks())  # as first met
    file_code = arrow.to_numpy(files.indices, null=-1).astype(np.int64)
    located = table["row"].combine_chunks()
    is_number = arrow.to_numpy(
        pc.fill_null(pc.utf8_is_digit(located), False), null=False
    ).astype(bool)
    line = np.full(n_rows, -1, dtype=np.int64)
    if is_number.any():
        numbers = located.filter(arrow.array(is_number)).cast(pa.int64())
        line[is_number] = arrow.to_numpy(numbers)
    position = np.arange(n_rows, dtype=np.int64)
    return np.lexsort((position, line, file_code)).astype(np.int64)


def _describe(row: dict[str, str]) -> str:
    """``file line 3 (model / benchmark / subtask: raw_score='nan')``."""
    locator = row["row"]
    unit = _unit(row["source"], locator)
    place = f" {unit}{locator}" if locator and locator != "-" else ""
    names = " / ".join(
        _text(row.get(name)) or "''" for name in ("model", "benchmark", "subtask")
    )
    if row["check"] == "duplicate_score":
        detail = row["value"]
        if row.get("model") is None:  # found without a batch: the value names it
            names, detail = row["value"], "given twice"
        return f"{row['source']}{place} ({names}: {detail})"
    if row["column"] == "subtask":
        close = f"; did you mean {row['suggestion']}?" if row.get("suggestion") else ""
        return f"{row['source']}{place} ({names}{close})"
    return f"{row['source']}{place} ({names}: {row['column']}={row['value']!r})"


def failure_rows(
    check: str,
    values: list[str],
    *,
    sources: list[str],
    rows: list[str],
    column: str,
    keys: list[list[str | None]] | None = None,
    suggestions: list[str | None] | None = None,
) -> pa.Table:
    """Failure rows in :func:`describe_failures`' columns, one per value.

    Args:
        check: The check's name (one of the hints' keys).
        values: The failing values, as shown.
        sources: Where each came from.
        rows: Each one's row locator.
        column: The column checked.
        keys: Model, benchmark and subtask per row (None: found without a batch).
        suggestions: The closest suite names per row (None: none).
    """
    n_rows = len(values)
    model, benchmark, subtask = keys or ([None] * n_rows,) * 3
    return pa.table(
        {
            "check": arrow.strings([check] * n_rows),
            "source": arrow.strings(sources),
            "row": arrow.strings(rows),
            "column": arrow.strings([column] * n_rows),
            "value": arrow.strings(values),
            "model": arrow.strings(model),
            "benchmark": arrow.strings(benchmark),
            "subtask": arrow.strings(subtask),
            "suggestion": arrow.strings(suggestions or [None] * n_rows),
        }
    )


def _strings(table: pa.Table, name: str) -> list[str | None]:
    if name not in table.column_names:
        return [""] * table.num_rows
    return list(table.column(name).cast(pa.string()).to_pylist())


def _text(value: object) -> str:
    """A cell as written: text as it is, a number in its shortest form.

    A whole number reads without ``.0`` (a CSV or JSON cell ``55`` is parsed
    to the float 55.0, and shown as ``55``).

    Examples:
        >>> _text(55.0), _text(0.35), _text(float("nan")), _text(None), _text("x")
        ('55', '0.35', 'nan', 'null', 'x')
    """
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer() and abs(value) < 2.0**53:
        return str(int(value))
    return str(value)


def _floats(
    numbers: npt.NDArray[np.number[Any]], valid: npt.NDArray[np.bool_] | None
) -> npt.NDArray[np.float64]:
    """A numeric column's values (:func:`_numbers`) as float64, NaN for nulls."""
    values: npt.NDArray[np.float64] = np.asarray(numbers, dtype=np.float64)
    return values if valid is None else np.where(valid, values, np.nan)


def _numbers(table: pa.Table, name: str) -> _Numbers:
    """A numeric column's values, without a copy where Arrow allows, and its validity.

    Values under a null are whatever the buffer holds; the validity mask (None:
    no nulls) says which rows count.
    """
    column = table.column(name)
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    if pa.types.is_null(array.type):
        return np.zeros(len(array)), np.zeros(len(array), dtype=bool)
    if not arrow.is_numeric(array.type):  # e.g. decimal: rare, converted by Arrow
        array = array.cast(pa.float64())
    values = arrow.to_numpy(array, null=0)
    if array.null_count == 0:
        return values, None
    return values, arrow.to_numpy(array.is_valid()).astype(bool)
