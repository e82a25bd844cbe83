"""Pairwise battles (Chatbot Arena votes): files in, integer codes out, no pandas.

Two shapes are accepted, in CSV, JSONL (``.jsonl``/``.ndjson``), Parquet
(``.parquet``/``.pq``) or a JSON array of objects (``.json``, the shape of Arena's
``clean_battle_<date>.json`` files):

* one row per battle: ``model_a``, ``model_b`` and ``winner`` (``model_a``,
  ``model_b``, ``tie`` or ``tie (bothbad)``; 2023 files call it ``win``), with an
  optional ``tstamp`` (seconds, or a Parquet timestamp; online Elo replays battles
  in its order) and any
  other columns (``anony``, ``language``, ``category``...) usable as filters;
* aggregated counts: ``model_a``, ``model_b``, ``wins_a``, ``wins_b``, ``ties``.

Both become a :class:`Battles`: the sorted model names and, per row, integer codes
``model_a``/``model_b`` into them, the outcome coded as the reference does
(2 = ``model_a`` won, 1 = tie, 0 = ``model_b`` won) and a ``count`` (1 per battle).

Filters (``--where``, all must hold) are :mod:`lbnorm.ratings.where`'s
conditions, nested fields included (``dedup_tag.sampled``).
Nothing is printed; :attr:`Battles.warnings` carries what a caller may show.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm._runtime import entry_point
from lbnorm.core.arrow import strings
from lbnorm.core.errors import InputError
from lbnorm.ratings.battle_files import NAME_COLUMNS
from lbnorm.ratings.battle_io import (
    COUNT_COLUMNS,
    NESTED,
    SHOWN,
    TEXT,
    Source,
    fail_rows,
    open_source,
    read_table,
)
from lbnorm.ratings.options import BattleFile, Battles, RatingWarning
from lbnorm.ratings.where import (
    Where,
    condition_mask,
    nested_top,
    parse_where,
    resolve_column,
)

__all__ = [
    "AGGREGATE_COLUMNS",
    "WINNER_VALUES",
    "BattleFile",
    "Battles",
    "read_battles",
    "read_model_map",
]

#: ``winner`` values and their outcome codes (2 = model_a won, 1 = tie, 0 = model_b won).
WINNER_VALUES: dict[str, int] = {
    "model_a": 2,
    "model_b": 0,
    "tie": 1,
    "tie (bothbad)": 1,
}

#: Columns of the aggregated shape: one row per ordered pair with its counts.
AGGREGATE_COLUMNS: tuple[str, ...] = ("model_a", "model_b", "wins_a", "wins_b", "ties")

_WINNER_COLUMNS = ("winner", "win")
_WINNER_CODES = np.array([*WINNER_VALUES.values(), -1], dtype=np.int8)  # -1: unknown
_WINNER_HINT = (
    "winner must be one of 'model_a', 'model_b', 'tie', 'tie (bothbad)' "
    "(FastChat's clean_battle values; 2023 files name the column 'win')."
)


@functools.cache
def _winner_set() -> pa.Array:
    """The winner values as Arrow strings (made on first use: not at import)."""
    return strings(list(WINNER_VALUES))  # pa.array here would import pandas


@entry_point  # (Ctrl-C and SIGTERM held for the call)
def read_battles(
    paths: Path | str | Sequence[Path | str],
    *,
    where: Sequence[str | Where] = (),
    fields: Sequence[str] = (),
    flags: Mapping[str, str | Where] | None = None,
    judges: bool = False,
) -> Battles:
    r"""Read battle files (either shape, any supported format) into codes.

    Args:
        paths: One file or several; their battles are pooled.
        where: Filter conditions, all of which a row must meet (strings are
            parsed with :func:`parse_where`); a dotted name reaches into a
            nested object (``category_tag.math_v0.1.math``, ``dedup_tag.sampled``).
        fields: Numeric fields to read per battle (dotted paths); an object of
            numbers reads as their sum, as FastChat's style features do.
        flags: Named conditions (``--category NAME=CONDITION``) evaluated per
            battle kept, without filtering: ``Battles.flags[name]``.
        judges: Read the ``judge`` column too (``Battles.judge``).

    Returns:
        The pooled battles; model codes index the sorted union of names.

    Raises:
        InputError: A file is missing, empty, unreadable or of an unsupported
            type; a required column is missing; a row has an empty or null model
            name, a self-battle, an unknown ``winner``, or a negative or
            fractional count; a filter column is missing or of the wrong type;
            no battles are left.
        WhereSyntaxError: A condition cannot be parsed.

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "b.csv").write_text(
        ...     "model_a,model_b,winner,anony\n"
        ...     "gpt-4,claude-v1,model_a,true\n"
        ...     "claude-v1,vicuna-13b,tie,false\n")
        >>> battles = read_battles(folder / "b.csv", where=["anony"])
        >>> battles.models.tolist(), battles.outcome.tolist(), battles.n_filtered_out
        (['claude-v1', 'gpt-4'], [2], 1)
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    conditions = [parse_where(c) if isinstance(c, str) else c for c in where]
    if not paths:
        msg = "no battle files were given.\nHint: pass one or more .csv, .jsonl, .json or .parquet files."
        raise InputError(msg)
    marks = {
        name: parse_where(c) if isinstance(c, str) else c
        for name, c in (flags or {}).items()
    }
    parts = [
        _read_part(Path(path), conditions, fields, marks, judges=judges)
        for path in paths
    ]
    return _pooled(parts, paths, conditions)


def _pooled(
    parts: Sequence[_Part], paths: Sequence[Path | str], conditions: Sequence[Where]
) -> Battles:
    """The files' battles as one: codes into the sorted union of their names, rows in file order.

    Every part holds the same fields, flags and (or no) judges: those asked.
    """
    files = tuple(part.file for part in parts)
    n_kept = sum(file.n_rows_kept for file in files)
    n_read = sum(file.n_rows_read for file in files)
    if n_kept == 0:
        where_text = " and ".join(repr(c.text) for c in conditions) or "(none)"
        msg = f"{', '.join(str(p.source.path) for p in parts)}: no battles left ({n_read} rows read; filters: {where_text}).\nHint: check the --where conditions against the values in the files."
        raise InputError(msg)
    names = sorted(set().union(*(part.names for part in parts)))
    models = pa.array(names, pa.string())
    codes = [_model_codes(part, models, names) for part in parts]
    has_time = all(part.tstamp is not None for part in parts)
    return Battles(
        models=np.array(names, dtype=np.str_),
        model_a=np.concatenate([code_a for code_a, _ in codes]),
        model_b=np.concatenate([code_b for _, code_b in codes]),
        outcome=np.concatenate([part.outcome for part in parts]),
        count=np.concatenate([part.count for part in parts]),
        tstamp=(
            np.concatenate([p.tstamp for p in parts if p.tstamp is not None])
            if has_time
            else None
        ),
        is_aggregated=any(file.shape == "counts" for file in files),
        sources=tuple(file.path for file in files),
        n_rows_read=n_read,
        n_filtered_out=n_read - n_kept,
        warnings=_pooled_warnings(parts, paths, n_read=n_read, n_kept=n_kept),
        files=files,
        fields=_joined([part.fields for part in parts]),
        flags=_joined([part.flags for part in parts]),
        judge=_judge_codes(parts) if parts[0].judge is not None else None,
    )


def _joined(columns: Sequence[Mapping[str, npt.NDArray[Any]]]) -> dict[str, Any]:
    """Each file's column of each name, one after the other (every file has the same names)."""
    return {name: np.concatenate([c[name] for c in columns]) for name in columns[0]}


def _model_codes(
    part: _Part, models: pa.Array, names: Sequence[str]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]:
    """One file's model codes into the pooled names, after refusing self-battles."""
    code_a, code_b = _lookup(part.model_a, models), _lookup(part.model_b, models)
    is_self = code_a == code_b
    if is_self.any():
        # an aggregated row is up to three cells: name each row once
        rows, first = np.unique(part.rows[is_self], return_index=True)
        values = [names[code] for code in code_a[is_self][first][:SHOWN]]
        fail_rows(
            part.source,
            rows,
            values,
            what="a model battles itself (model_a == model_b)",
            hint="drop self-battles; they carry no information about ratings.",
        )
    return code_a, code_b


def _pooled_warnings(
    parts: Sequence[_Part], paths: Sequence[Path | str], *, n_read: int, n_kept: int
) -> tuple[RatingWarning, ...]:
    """What a caller may show of the files read together: filtered rows first."""
    warnings = [w for part in parts for w in part.warnings]
    if n_kept < n_read:
        message = f"{n_read - n_kept} of {n_read} rows did not match --where."
        warnings.insert(0, RatingWarning("filtered", message))
    if repeated := _repeated_files(paths):
        message = f"{', '.join(repeated[:SHOWN])} given more than once: its battles count once per time given."
        warnings.append(RatingWarning("repeated_file", message))
    if any(part.file.shape == "counts" for part in parts):
        message = "aggregated counts have no battle order; online Elo needs one battle per row."
        warnings.append(RatingWarning("unordered", message))
    elif any(part.tstamp is None for part in parts):
        message = (
            "a file has no tstamp column; online Elo replays battles in file order."
        )
        warnings.append(RatingWarning("no_tstamp", message))
    return tuple(warnings)


def _judge_codes(parts: Sequence[_Part]) -> npt.NDArray[np.int32]:
    """Codes of the judges over all files (-1 where empty)."""
    columns = [part.judge for part in parts if part.judge is not None]
    names = sorted(
        {name for column in columns for name in _unique_names(column) if name}
    )
    known = pa.array(names, pa.string())
    return np.concatenate([_lookup(column, known) for column in columns])


def _repeated_files(paths: Sequence[Path | str]) -> list[str]:
    """Files named more than once (by their resolved path), as given the second time."""
    resolved = [Path(path).resolve() for path in paths]
    again = (str(p) for i, p in enumerate(paths) if resolved[i] in resolved[:i])
    return list(dict.fromkeys(again))


def read_model_map(path: Path | str) -> dict[str, str]:
    r"""Read a two-column table ``arena_name, model`` into a name map.

    Args:
        path: A CSV, JSONL or Parquet file.

    Returns:
        ``{arena_name: model}``.

    Raises:
        InputError: The file cannot be read, lacks a column, has empty names, or
            maps one arena name (or two arena names to one model) twice.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "map.csv"
        >>> _ = path.write_text("arena_name,model\ngpt-4,openai/gpt-4\n")
        >>> read_model_map(path)
        {'gpt-4': 'openai/gpt-4'}
    """
    path = Path(path)
    source, present = open_source(path, allowed=("csv", "jsonl", "parquet"))
    columns = ("arena_name", "model")
    table = read_table(source, dict.fromkeys(columns, pa.string()), present)
    if source.kind == "jsonl":
        present = _non_null_columns(table)
    hint = "a model map has two columns, arena_name (as in the battles) and model (as in the results)."
    _require(path, present, columns, hint)
    names: dict[str, list[str]] = {}
    for name in columns:
        values = [_text_or_none(v) for v in table.column(name).to_pylist()]
        empty = np.flatnonzero([v is None for v in values])
        if empty.size:
            fail_rows(
                source,
                empty,
                [name] * min(len(empty), SHOWN),
                what=f"empty {name}",
                hint="every row maps one arena name to one model name.",
            )
        texts = np.array(values, dtype=np.str_)
        unique, counts = np.unique(texts, return_counts=True)
        if (counts > 1).any():
            repeated = np.flatnonzero(np.isin(texts, unique[counts > 1]))
            fail_rows(
                source,
                repeated,
                texts[repeated[:SHOWN]].tolist(),
                what=f"{name} appears more than once",
                hint="map each arena name to exactly one model, and each model from one arena name.",
            )
        names[name] = texts.tolist()
    return dict(zip(names["arena_name"], names["model"], strict=True))


def _non_null_columns(table: pa.Table) -> set[str]:
    """Columns of a JSON table with a value in some row (absent keys read as null)."""
    return {
        n for n in table.column_names if table.column(n).null_count < table.num_rows
    }


def _require(path: Path, present: set[str], required: Sequence[str], hint: str) -> None:
    """Refuse a file without the columns required, listing those it has."""
    if missing := [name for name in required if name not in present]:
        msg = f"{path}: missing column(s) {missing}; found {sorted(present)[:12]}.\nHint: {hint}"
        raise InputError(msg)


def _text_or_none(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


# --- one file -------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class _Part:
    source: Source
    names: set[str]
    model_a: pa.ChunkedArray
    model_b: pa.ChunkedArray
    outcome: npt.NDArray[np.int8]
    count: npt.NDArray[np.int64]
    tstamp: npt.NDArray[np.float64] | None
    rows: npt.NDArray[np.int64]  # 0-based data rows in the file, for messages
    file: BattleFile  # rows kept: those that met the filters, not cells of counts
    warnings: tuple[RatingWarning, ...]
    fields: Mapping[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    flags: Mapping[str, npt.NDArray[np.bool_]] = field(default_factory=dict)
    judge: pa.ChunkedArray | None = None


def _ask(
    wanted: dict[str, pa.DataType],
    name: str,
    type_: pa.DataType,
    source: Source,
    present: set[str],
) -> None:
    """Add a filter or feature column to those read: a dotted name reads its top-level object."""
    top = nested_top(name)
    if name in present or top is None or source.kind == "csv":
        wanted.setdefault(name, type_)
    elif source.kind in ("json", "jsonl") or top in present:
        wanted[top] = NESTED


def _is_aggregated(path: Path, present: set[str]) -> bool:
    """Whether a file's columns are the aggregated shape; refuse a file with both shapes' columns."""
    has_winner = any(name in present for name in _WINNER_COLUMNS)
    if has_winner and (counts := [n for n in COUNT_COLUMNS if n in present]):
        msg = f"{path}: both a winner column and count columns ({', '.join(counts)}): each row would be one battle or a count of battles, and the file does not say which.\nHint: keep winner (one row per battle) or model_a, model_b, wins_a, wins_b, ties (counts), not both."
        raise InputError(msg)
    return not has_winner and all(name in present for name in AGGREGATE_COLUMNS)


def _read_part(
    path: Path,
    conditions: Sequence[Where],
    fields: Sequence[str],
    flags: Mapping[str, Where],
    *,
    judges: bool,
) -> _Part:
    """One file's battles that meet the conditions, with the fields, flags and judges asked."""
    source, present = open_source(path)
    is_aggregated = _is_aggregated(path, present)
    wanted = _shape_columns(source, is_aggregated=is_aggregated)
    for condition in (*conditions, *flags.values()):
        _ask(wanted, condition.column, condition.value_type, source, present)
    for name in fields:
        _ask(wanted, name, pa.float64(), source, present)
    if judges:
        wanted["judge"] = TEXT
    table = read_table(source, wanted, present)
    if source.kind in ("json", "jsonl"):  # the shape shows once absent keys are null
        present = _non_null_columns(table)
        is_aggregated = is_aggregated or _is_aggregated(path, present)
    winner = "win" if "win" in present else "winner"  # (2023 files name it win)
    required = AGGREGATE_COLUMNS if is_aggregated else (*NAME_COLUMNS, winner)
    hint = "battles need model_a, model_b, winner (or win) and optionally tstamp, one row per battle; or model_a, model_b, wins_a, wins_b, ties."
    _require(path, present, required, hint)
    n_read = table.num_rows
    table = table.append_column("__row", pa.array(np.arange(n_read, dtype=np.int64)))
    if conditions:  # all must hold; a null never does
        masks = [condition_mask(table, c, source, present) for c in conditions]
        table = table.filter(functools.reduce(pc.and_, masks))
    part = _battle_part(table, source, present, n_read, is_aggregated=is_aggregated)
    return _with_per_battle(part, table, present, fields, flags, judges=judges)


def _shape_columns(source: Source, *, is_aggregated: bool) -> dict[str, pa.DataType]:
    """The columns a file of the shape is read for (before filters and fields)."""
    if is_aggregated:
        return dict.fromkeys(NAME_COLUMNS, TEXT) | dict.fromkeys(
            COUNT_COLUMNS, pa.float64()
        )
    wanted = dict.fromkeys((*NAME_COLUMNS, *_WINNER_COLUMNS), TEXT)
    wanted["tstamp"] = pa.float64()
    if source.kind in ("json", "jsonl"):  # absent keys read as null columns
        wanted |= dict.fromkeys(COUNT_COLUMNS, pa.float64())
    return wanted


def _with_per_battle(
    part: _Part,
    table: pa.Table,
    present: set[str],
    fields: Sequence[str],
    flags: Mapping[str, Where],
    *,
    judges: bool,
) -> _Part:
    """Add the judges, flags and fields asked: each needs one row per battle."""
    path, source = part.source.path, part.source
    is_aggregated = part.file.shape == "counts"
    if judges and ("judge" not in present or is_aggregated):
        msg = f"{path}: --daily-vote-per-user needs a judge column (one row per battle), which the file does not have.\nHint: give Arena's clean_battle files (they name the judge of each vote), or drop --daily-vote-per-user."
        raise InputError(msg)
    if flags and is_aggregated:
        msg = f"{path}: categories need one row per battle; aggregated counts have none.\nHint: give battle files, or rate each category from its own counts file."
        raise InputError(msg)
    if fields and is_aggregated:
        msg = f"{path}: aggregated counts have no per-battle fields ({', '.join(fields[:SHOWN])}).\nHint: give battle files (one row per battle) with the fields, e.g. Arena's clean_battle files with conv_metadata."
        raise InputError(msg)
    return replace(
        part,
        judge=_text_column(table.column("judge")) if judges else None,
        flags={
            name: np.asarray(condition_mask(table, c, source, present), dtype=np.bool_)
            for name, c in flags.items()
        },
        fields={name: _field_values(table, name, source, present) for name in fields},
    )


def _field_values(
    table: pa.Table, name: str, source: Source, present: set[str]
) -> npt.NDArray[np.float64]:
    """A numeric field per battle; an object is the sum of its numbers (NaN where null).

    FastChat's ``extract_style_feature``: a count is itself, an object of counts
    (``header_count_a``: ``h1`` ... ``h6``) their sum.
    """
    column = resolve_column(table, name, present)
    if column is None:
        msg = f"{source.path}: no field {name!r} in the battles.\nHint: style control reads conv_metadata (sum_assistant_a_tokens, header_count_a, list_count_a, bold_count_a and the _b side): nested objects as in Arena's clean_battle files, or, in a CSV or any flat table, columns named by the dotted path (conv_metadata.sum_assistant_a_tokens, ...)."
        raise InputError(msg)
    return _numbers(column, name, source)


def _numbers(
    column: pa.ChunkedArray | pa.Array, name: str, source: Source
) -> npt.NDArray[np.float64]:
    type_ = column.type
    if pa.types.is_struct(type_):
        total = np.zeros(len(column))
        for i in range(type_.num_fields):
            child = _numbers(pc.struct_field(column, [i]), name, source)
            total += np.nan_to_num(child, nan=0.0)
        total[np.asarray(pc.is_null(column))] = np.nan
        return total
    if pa.types.is_null(type_):
        return np.full(len(column), np.nan)
    if not (
        pa.types.is_integer(type_)
        or pa.types.is_floating(type_)
        or pa.types.is_boolean(type_)
    ):
        msg = f"{source.path}: the field {name!r} holds {type_}, not numbers.\nHint: style features are counts (or objects of counts), as conv_metadata holds them."
        raise InputError(msg)
    values = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    return np.asarray(values, dtype=np.float64)


def _battle_part(
    table: pa.Table,
    source: Source,
    present: set[str],
    n_read: int,
    *,
    is_aggregated: bool,
) -> _Part:
    """The filtered rows of one file as checked battles (or cells of counts)."""
    rows = table.column("__row").to_numpy()
    file = BattleFile(
        path=str(source.path),
        format=source.kind,
        shape="counts" if is_aggregated else "battles",
        n_rows_read=n_read,
        n_rows_kept=len(rows),
    )
    model_a, model_b = (_text_column(table.column(name)) for name in NAME_COLUMNS)
    names = _check_names(source, rows, model_a, model_b)
    warnings: list[RatingWarning] = []
    tstamp = None
    if is_aggregated:
        outcome, count, positions = _aggregated_cells(table, source, rows)
        model_a, model_b = model_a.take(positions), model_b.take(positions)
        rows = rows[positions]
    else:
        winner_name = "winner" if "winner" in present else "win"
        outcome = _outcomes(table.column(winner_name), source, rows, winner_name)
        count = np.ones(len(rows), dtype=np.int64)
        if "tstamp" in present:
            times = table.column("tstamp")
            tstamp = _seconds(times, source)
            if times.null_count:
                message = f"{source.path}: {times.null_count} battles have no tstamp; online Elo replays them last."
                warnings.append(RatingWarning("null_tstamp", message))
    return _Part(
        source=source,
        names=names,
        model_a=model_a,
        model_b=model_b,
        outcome=outcome,
        count=count,
        tstamp=tstamp,
        rows=rows,
        file=file,
        warnings=tuple(warnings),
    )


# --- validation and codes -------------------------------------------------------


def _text_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Model names as string or dictionary<string> chunks (else cast: large_string, a number)."""
    type_ = column.type
    values = type_.value_type if pa.types.is_dictionary(type_) else type_
    return column if pa.types.is_string(values) else column.cast(pa.string())


def _unique_names(column: pa.ChunkedArray) -> list[str | None]:
    unique = pc.unique(column)
    if pa.types.is_dictionary(unique.type):
        unique = unique.dictionary_decode()
    return unique.to_pylist()  # type: ignore[no-any-return]


def _lookup(column: pa.ChunkedArray, value_set: pa.Array) -> npt.NDArray[np.int32]:
    """Per row, the index of its value in ``value_set``; -1 for null or unknown."""
    codes = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type):
            if len(chunk.dictionary) == 0:
                codes.append(np.full(len(chunk), -1, dtype=np.int32))
                continue
            per_entry = (
                pc.index_in(chunk.dictionary, value_set=value_set)
                .fill_null(-1)
                .to_numpy()
            )
            chunk_codes = per_entry[chunk.indices.fill_null(0).to_numpy()]
            if chunk.null_count:
                chunk_codes[chunk.is_null().to_numpy(zero_copy_only=False)] = -1
        else:
            chunk_codes = (
                pc.index_in(chunk, value_set=value_set).fill_null(-1).to_numpy()
            )
        codes.append(chunk_codes.astype(np.int32, copy=False))
    if not codes:
        return np.empty(0, dtype=np.int32)
    return np.concatenate(codes)


def _check_names(
    source: Source,
    rows: npt.NDArray[np.int64],
    model_a: pa.ChunkedArray,
    model_b: pa.ChunkedArray,
) -> set[str]:
    """The model names in a file, after checking none is null or blank."""
    names: set[str] = set()
    for name, column in (("model_a", model_a), ("model_b", model_b)):
        values = _unique_names(column)
        good = sorted(v for v in values if v is not None and v.strip())
        names.update(good)
        if len(good) < len(values):
            fail_rows(
                source,
                rows[_lookup(column, pa.array(good, pa.string())) < 0],
                [v for v in values if v not in good],
                what=f"empty or null {name}",
                hint="every battle needs both model names; drop rows of unfinished battles.",
            )
    return names


def _outcomes(
    column: pa.ChunkedArray,
    source: Source,
    rows: npt.NDArray[np.int64],
    name: str,
) -> npt.NDArray[np.int8]:
    index = _lookup(_text_column(column), _winner_set())
    outcome = _WINNER_CODES[index]  # index -1 picks the trailing -1
    is_bad = outcome < 0
    if is_bad.any():
        fail_rows(
            source,
            rows[is_bad],
            _unique_names(column.filter(pa.array(is_bad))),
            what=f"unknown {name} value",
            hint=_WINNER_HINT,
        )
    return outcome


def _seconds(times: pa.ChunkedArray, source: Source) -> npt.NDArray[np.float64]:
    """``tstamp`` as seconds (NaN where empty): a number, or a Parquet timestamp."""
    type_ = times.type
    if pa.types.is_timestamp(type_):
        micros = pc.cast(pc.cast(times, pa.timestamp("us", tz=type_.tz)), pa.int64())
        seconds: npt.NDArray[np.float64] = micros.to_numpy().astype(np.float64) / 1e6
        return seconds
    if not (pa.types.is_integer(type_) or pa.types.is_floating(type_)):
        msg = f"{source.path}: tstamp is {type_}, not a time.\nHint: tstamp is a time in seconds (a number), as in Arena's files, or a Parquet timestamp."
        raise InputError(msg)
    return np.asarray(pc.cast(times, pa.float64()).to_numpy(), dtype=np.float64)


def _aggregated_cells(
    table: pa.Table, source: Source, rows: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Rows of counts into (outcome, count, position in table) cells, zeros left out."""
    counts = []
    for name in COUNT_COLUMNS:
        column = table.column(name)
        # unsafe: an integer above 2**53 becomes the nearest double, refused below
        values = pc.cast(column, pa.float64(), safe=False).to_numpy(
            zero_copy_only=False
        )
        too_big = values >= 2.0**53
        if too_big.any():
            shown = [f"{v:.0f}" for v in values[too_big][:SHOWN]]
            fail_rows(
                source,
                rows[too_big],
                shown,
                what=f"{name} is too large (2**53 battles or more)",
                hint=f"{name} counts battles: a count this large is a corrupt or overflowed value; write the true count.",
                quote=False,
            )
        is_bad = np.isnan(values) | (values < 0) | (values != np.floor(values))
        if is_bad.any():
            shown = [
                str(v) if not math.isnan(v) else "null" for v in values[is_bad][:SHOWN]
            ]
            fail_rows(
                source,
                rows[is_bad],
                shown,
                what=f"{name} is not a whole number >= 0",
                hint=f"{name} counts battles: write a whole number (0 if none).",
                quote=False,
            )
        counts.append(values.astype(np.int64))
    # wins_a -> outcome 2, wins_b -> 0, ties -> 1, as one battle row would code them
    stacked = np.stack([counts[1], counts[2], counts[0]], axis=1)  # outcome 0, 1, 2
    positions, outcome = np.nonzero(stacked)
    return outcome.astype(np.int8), stacked[positions, outcome], positions
