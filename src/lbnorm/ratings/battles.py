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

Filters (``--where``, all must hold; see :func:`parse_where`)::

    anony                       a boolean column is true (``not anony``: false)
    language = 'English'        = (or ==), !=, <, <=, >, >= against one value
    language != English         unquoted words are text, unquoted numbers numbers
    tstamp >= 1700000000
    language in ('English', 'Chinese')      also: not in (...)

In CSV and JSON files the condition sets the column's type (a bare column is
boolean, a number makes it numeric, anything else text); Parquet columns keep
their stored type. A row whose filter column is empty (null) does not match.
Nothing is printed; :attr:`Battles.warnings` carries what a caller may show.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from lbnorm.core.arrow import strings
from lbnorm.core.errors import InputError, WhereSyntaxError
from lbnorm.ratings.battle_files import BATTLE_SUFFIXES, is_battles_file

#: msgspec (the `fast` extra) decodes only the keys read here; imported when a JSON
#: battle file is read (a run that reads none does not load it).
_HAS_MSGSPEC = importlib.util.find_spec("msgspec") is not None

__all__ = [
    "AGGREGATE_COLUMNS",
    "BATTLE_SUFFIXES",
    "WINNER_VALUES",
    "BattleFile",
    "BattleWarning",
    "Battles",
    "Where",
    "WhereSyntaxError",
    "is_battles_file",
    "parse_where",
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

Kind = Literal["csv", "jsonl", "json", "parquet"]
WhereOp = Literal["true", "false", "==", "!=", "<", "<=", ">", ">=", "in", "not in"]
Literal_ = str | float | bool

_SHOWN = 5
_TEXT = pa.dictionary(pa.int32(), pa.string())
_NAME_COLUMNS = ("model_a", "model_b")
_WINNER_COLUMNS = ("winner", "win")
_COUNT_COLUMNS = ("wins_a", "wins_b", "ties")
_WINNER_CODES = np.array([*WINNER_VALUES.values(), -1], dtype=np.int8)  # -1: unknown
_WINNER_HINT = (
    "winner must be one of 'model_a', 'model_b', 'tie', 'tie (bothbad)' "
    "(FastChat's clean_battle values; 2023 files name the column 'win')."
)


@functools.cache
def _winner_set() -> pa.Array:
    """The winner values as Arrow strings (made on first use: not at import)."""
    return strings(list(WINNER_VALUES))  # pa.array here would import pandas


@dataclass(frozen=True, slots=True)
class BattleWarning:
    """Something a caller may want to show; reading went on.

    Attributes:
        code: A stable name (``filtered``, ``no_tstamp``, ``null_tstamp``,
            ``unordered``).
        message: One sentence for people.
    """

    code: str
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BattleFile:
    """One file read: what a manifest records of it.

    Attributes:
        path: The file, as given.
        format: ``csv``, ``jsonl``, ``json`` or ``parquet``.
        shape: ``battles`` (one row per battle) or ``counts`` (aggregated).
        n_rows_read: Rows in the file.
        n_rows_kept: Rows that met the ``where`` conditions.
    """

    path: str
    format: str
    shape: Literal["battles", "counts"]
    n_rows_read: int
    n_rows_kept: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Battles:
    """Battles as integer codes, ready for :mod:`lbnorm.ratings.fit`.

    Attributes:
        models: Model names, sorted (codepoint order), unique.
        model_a: Per row, the code (index into ``models``) of the model in seat A.
        model_b: Per row, the code of the model in seat B.
        outcome: Per row, 2 if ``model_a`` won, 1 for a tie, 0 if ``model_b`` won.
        count: Per row, how many battles it stands for (1 for a battle file).
        tstamp: Per row, the battle's time in seconds (NaN if empty), or None
            when a file had no ``tstamp`` column (rows then keep file order).
        is_aggregated: True if any input had the aggregated shape (rows are
            cells, in no meaningful order).
        sources: The files read, in order.
        n_rows_read: Rows in the files before filtering.
        n_filtered_out: Rows removed by the ``where`` conditions.
        warnings: Things a caller may show.
        files: Per file: its format, shape and rows read and kept.

    Examples:
        >>> battles = Battles(models=np.array(["a", "b"]),
        ...     model_a=np.array([0, 1], np.int32), model_b=np.array([1, 0], np.int32),
        ...     outcome=np.array([2, 1], np.int8), count=np.array([1, 1]))
        >>> battles.n_battles
        2
    """

    models: npt.NDArray[np.str_]
    model_a: npt.NDArray[np.int32]
    model_b: npt.NDArray[np.int32]
    outcome: npt.NDArray[np.int8]
    count: npt.NDArray[np.int64]
    tstamp: npt.NDArray[np.float64] | None = None
    is_aggregated: bool = False
    sources: tuple[str, ...] = ()
    n_rows_read: int = 0
    n_filtered_out: int = 0
    warnings: tuple[BattleWarning, ...] = ()
    files: tuple[BattleFile, ...] = ()

    @property
    def n_battles(self) -> int:
        """Battles in all (the sum of ``count``)."""
        return int(self.count.sum())


@dataclass(frozen=True, slots=True, kw_only=True)
class Where:
    """One parsed filter condition; build it with :func:`parse_where`.

    Attributes:
        column: The column tested.
        op: ``true``/``false`` (a boolean column), a comparison, ``in`` or ``not in``.
        values: The literal(s) compared against (empty for ``true``/``false``).
        texts: The literals as written, for comparing with a text column.
        text: The condition as the user wrote it.
    """

    column: str
    op: WhereOp
    values: tuple[Literal_, ...] = ()
    texts: tuple[str, ...] = ()
    text: str = ""

    @property
    def value_type(self) -> pa.DataType:
        """The column type the condition implies in CSV and JSON files."""
        if self.op in ("true", "false") or all(
            isinstance(v, bool) for v in self.values
        ):
            return pa.bool_()
        if all(isinstance(v, float) for v in self.values):
            return pa.float64()
        return pa.string()


_TOKEN = re.compile(
    r"""\s*(?:(?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
    r"""|(?P<op>==|!=|<=|>=|=|<|>|\(|\)|,)|(?P<word>[^\s'"=!<>(),]+))"""
)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_COLUMN = re.compile(r"[A-Za-z_][\w.]*")
_OPS: dict[str, WhereOp] = {
    "=": "==",
    "==": "==",
    "!=": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
}
_WHERE_HINT = (
    "write COLUMN, not COLUMN, COLUMN OP VALUE with OP one of = != < <= > >=, or "
    "COLUMN in (V1, V2); quote text with spaces: language = 'English'."
)


def parse_where(text: str) -> Where:
    """Parse one filter condition (see the module docstring for the forms).

    Args:
        text: The condition, as given to ``--where``.

    Returns:
        The parsed condition.

    Raises:
        WhereSyntaxError: The text is not one of the documented forms.

    Examples:
        >>> parse_where("language = 'English'").values
        ('English',)
        >>> parse_where("tstamp >= 1.7e9").op, parse_where("not anony").op
        ('>=', 'false')
        >>> parse_where("language in (English, 'Chinese')").values
        ('English', 'Chinese')
    """
    tokens = _tokenize(text)
    kinds = [kind for kind, _ in tokens]
    words = [value for _, value in tokens]

    def fail(problem: str) -> NoReturn:
        msg = f"--where {text!r}: {problem}.\nHint: {_WHERE_HINT}"
        raise WhereSyntaxError(msg)

    if not tokens:
        fail("the condition is empty")
    if kinds[0] != "word" or not _COLUMN.fullmatch(words[0]):
        fail(f"{words[0]!r} is not a column name")
    column = words[0]
    if len(tokens) == 1:
        return Where(column=column, op="true", text=text)
    if words[0] == "not" and len(tokens) == 2 and kinds[1] == "word":
        if not _COLUMN.fullmatch(words[1]):
            fail(f"{words[1]!r} is not a column name")
        return Where(column=words[1], op="false", text=text)
    rest = tokens[1:]
    if kinds[1] == "op":
        op = _OPS.get(words[1])
        if op is None or len(rest) != 2:
            fail("expected one value after the operator")
        if rest[1][0] == "op":
            fail(f"expected a value, got {rest[1][1]!r}")
        value, shown = _literal(*rest[1])
        return Where(column=column, op=op, values=(value,), texts=(shown,), text=text)
    if kinds[1] != "word" or words[1] not in ("in", "not"):
        fail(f"expected an operator after {column!r}, got {words[1]!r}")
    negated = words[1] == "not"
    if negated and (len(rest) < 2 or rest[1] != ("word", "in")):
        fail("expected 'not in (...)'")
    body = rest[2:] if negated else rest[1:]
    if len(body) < 3 or body[0] != ("op", "(") or body[-1] != ("op", ")"):
        fail("expected a parenthesised list of values after 'in'")
    items = body[1:-1]
    values: list[Literal_] = []
    texts: list[str] = []
    for position, (kind, word) in enumerate(items):
        expects_value = position % 2 == 0
        if expects_value == (kind == "op") or (not expects_value and word != ","):
            fail(f"expected values separated by commas, got {word!r}")
        if expects_value:
            value, shown = _literal(kind, word)
            values.append(value)
            texts.append(shown)
    if len(items) % 2 == 0:
        fail("the list of values ends with a comma")
    if len({type(value) for value in values}) > 1:
        fail(f"the values {values} mix types")
    return Where(
        column=column,
        op="not in" if negated else "in",
        values=tuple(values),
        texts=tuple(texts),
        text=text,
    )


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text.rstrip()):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            msg = f"--where {text!r}: cannot read {text[position:].strip()!r}.\nHint: {_WHERE_HINT}"
            raise WhereSyntaxError(msg)
        kind = match.lastgroup or "word"
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


def _literal(kind: str, word: str) -> tuple[Literal_, str]:
    """A token as a value: quoted text, a number, true/false, or a bare word."""
    if kind == "str":
        inner = re.sub(r"\\(.)", r"\1", word[1:-1])
        return inner, inner
    if _NUMBER.fullmatch(word):
        return float(word), word
    if word.lower() in ("true", "false"):
        return word.lower() == "true", word
    return word, word


def read_battles(
    paths: Path | str | Sequence[Path | str], *, where: Sequence[str | Where] = ()
) -> Battles:
    r"""Read battle files (either shape, any supported format) into codes.

    Args:
        paths: One file or several; their battles are pooled.
        where: Filter conditions, all of which a row must meet (strings are
            parsed with :func:`parse_where`).

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
    parts = [_read_part(Path(path), conditions) for path in paths]
    n_kept = sum(part.n_kept for part in parts)
    n_read = sum(part.n_read for part in parts)
    if n_kept == 0:
        where_text = " and ".join(repr(c.text) for c in conditions) or "(none)"
        msg = f"{', '.join(str(p.source.path) for p in parts)}: no battles left ({n_read} rows read; filters: {where_text}).\nHint: check the --where conditions against the values in the files."
        raise InputError(msg)
    names = sorted(set().union(*(part.names for part in parts)))
    models = pa.array(names, pa.string())
    codes_a, codes_b = [], []
    for part in parts:
        code_a, code_b = _lookup(part.model_a, models), _lookup(part.model_b, models)
        is_self = code_a == code_b
        if is_self.any():
            # an aggregated row is up to three cells: name each row once
            rows, first = np.unique(part.rows[is_self], return_index=True)
            values = [names[code] for code in code_a[is_self][first][:_SHOWN]]
            _fail(
                part.source,
                rows,
                values,
                what="a model battles itself (model_a == model_b)",
                hint="drop self-battles; they carry no information about ratings.",
            )
        codes_a.append(code_a)
        codes_b.append(code_b)
    warnings = [w for part in parts for w in part.warnings]
    if n_read > n_kept:
        warnings.insert(
            0,
            BattleWarning(
                "filtered", f"{n_read - n_kept} of {n_read} rows did not match --where."
            ),
        )
    is_aggregated = any(part.is_aggregated for part in parts)
    has_time = all(part.tstamp is not None for part in parts)
    if not has_time and not is_aggregated:
        warnings.append(
            BattleWarning(
                "no_tstamp",
                "a file has no tstamp column; online Elo replays battles in file order.",
            )
        )
    if is_aggregated:
        warnings.append(
            BattleWarning(
                "unordered",
                "aggregated counts have no battle order; online Elo needs one battle per row.",
            )
        )
    return Battles(
        models=np.array(names, dtype=np.str_),
        model_a=np.concatenate(codes_a),
        model_b=np.concatenate(codes_b),
        outcome=np.concatenate([part.outcome for part in parts]),
        count=np.concatenate([part.count for part in parts]),
        tstamp=(
            np.concatenate([p.tstamp for p in parts if p.tstamp is not None])
            if has_time
            else None
        ),
        is_aggregated=is_aggregated,
        sources=tuple(str(part.source.path) for part in parts),
        n_rows_read=n_read,
        n_filtered_out=n_read - n_kept,
        warnings=tuple(warnings),
        files=tuple(
            BattleFile(
                path=str(part.source.path),
                format=part.source.kind,
                shape="counts" if part.is_aggregated else "battles",
                n_rows_read=part.n_read,
                n_rows_kept=part.n_kept,
            )
            for part in parts
        ),
    )


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
    source = _Source(path, _kind(path, allowed=("csv", "jsonl", "parquet")))
    _check_file(path)
    columns = ("arena_name", "model")
    present = _column_names(source)
    table = _read_table(source, dict.fromkeys(columns, pa.string()), present)
    if source.kind == "jsonl":
        present = _non_null_columns(table)
    if missing := [name for name in columns if name not in present]:
        msg = f"{path}: missing column(s) {missing}; found {sorted(present)[:12]}.\nHint: a model map has two columns, arena_name (as in the battles) and model (as in the results)."
        raise InputError(msg)
    names: dict[str, list[str]] = {}
    for name in columns:
        values = [_text_or_none(v) for v in table.column(name).to_pylist()]
        empty = np.flatnonzero([v is None for v in values])
        if empty.size:
            _fail(
                source,
                empty,
                [name] * min(len(empty), _SHOWN),
                what=f"empty {name}",
                hint="every row maps one arena name to one model name.",
            )
        texts = np.array(values, dtype=np.str_)
        unique, counts = np.unique(texts, return_counts=True)
        if (counts > 1).any():
            repeated = np.flatnonzero(np.isin(texts, unique[counts > 1]))
            _fail(
                source,
                repeated,
                texts[repeated[:_SHOWN]].tolist(),
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


def _text_or_none(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


# --- one file -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Source:
    path: Path
    kind: Kind


@dataclass(frozen=True, slots=True, kw_only=True)
class _Part:
    source: _Source
    names: set[str]
    model_a: pa.ChunkedArray
    model_b: pa.ChunkedArray
    outcome: npt.NDArray[np.int8]
    count: npt.NDArray[np.int64]
    tstamp: npt.NDArray[np.float64] | None
    rows: npt.NDArray[np.int64]  # 0-based data rows in the file, for messages
    n_read: int
    n_kept: int  # rows that met the filters (an aggregated row is up to 3 cells)
    is_aggregated: bool
    warnings: tuple[BattleWarning, ...]


def _kind(path: Path, *, allowed: Iterable[str] = BATTLE_SUFFIXES.values()) -> Kind:
    kind = BATTLE_SUFFIXES.get(path.suffix.lower())
    allowed = list(allowed)
    if kind is None or kind not in allowed:
        suffixes = sorted(s for s, k in BATTLE_SUFFIXES.items() if k in allowed)
        msg = f"{path}: unsupported file type {path.suffix!r}.\nHint: use one of {suffixes}."
        raise InputError(msg)
    return kind  # type: ignore[return-value]


def _check_file(path: Path) -> None:
    try:
        size = path.stat().st_size
    except OSError as exc:
        msg = f"{path}: cannot read the file ({exc.strerror or exc}).\nHint: check the path and its permissions."
        raise InputError(msg) from exc
    if size == 0:
        msg = f"{path}: the file is empty.\nHint: remove it, or write the battles into it."
        raise InputError(msg)


def _read_part(path: Path, conditions: Sequence[Where]) -> _Part:
    source = _Source(path, _kind(path))
    _check_file(path)
    present = _column_names(source)
    if all(name in present for name in AGGREGATE_COLUMNS) and not any(
        name in present for name in _WINNER_COLUMNS
    ):
        is_aggregated = True
        wanted: dict[str, pa.DataType] = dict.fromkeys(_NAME_COLUMNS, _TEXT)
        wanted |= {name: pa.float64() for name in _COUNT_COLUMNS}
    else:
        is_aggregated = False
        wanted = dict.fromkeys((*_NAME_COLUMNS, *_WINNER_COLUMNS), _TEXT)
        wanted["tstamp"] = pa.float64()
        if source.kind in ("json", "jsonl"):  # absent keys read as null columns
            wanted |= {name: pa.float64() for name in _COUNT_COLUMNS}
    for condition in conditions:
        if condition.column not in wanted:
            wanted[condition.column] = condition.value_type
    table = _read_table(source, wanted, present)
    if source.kind in ("json", "jsonl"):
        present = _non_null_columns(table)
        if not any(n in present for n in _WINNER_COLUMNS) and all(
            n in present for n in AGGREGATE_COLUMNS
        ):
            is_aggregated = True
    required = AGGREGATE_COLUMNS if is_aggregated else (*_NAME_COLUMNS, "winner")
    missing = [
        name
        for name in required
        if name not in present and not (name == "winner" and "win" in present)
    ]
    if missing:
        shape = (
            "model_a, model_b, winner (or win) and optionally tstamp, one row per battle; "
            "or model_a, model_b, wins_a, wins_b, ties"
        )
        msg = f"{path}: missing column(s) {missing}; found {sorted(present)[:12]}.\nHint: battles need {shape}."
        raise InputError(msg)
    n_read = table.num_rows
    table = table.append_column("__row", pa.array(np.arange(n_read, dtype=np.int64)))
    table = _apply_filters(table, conditions, source, present)
    return _battle_part(table, source, present, n_read, is_aggregated=is_aggregated)


def _battle_part(
    table: pa.Table,
    source: _Source,
    present: set[str],
    n_read: int,
    *,
    is_aggregated: bool,
) -> _Part:
    """The filtered rows of one file as checked battles (or cells of counts)."""
    rows = table.column("__row").to_numpy()
    n_kept = len(rows)
    model_a, model_b = (_text_column(table.column(name)) for name in _NAME_COLUMNS)
    names = _check_names(source, rows, model_a, model_b)
    warnings: list[BattleWarning] = []
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
                warnings.append(
                    BattleWarning(
                        "null_tstamp",
                        f"{source.path}: {times.null_count} battles have no tstamp; online Elo replays them last.",
                    )
                )
    return _Part(
        source=source,
        names=names,
        model_a=model_a,
        model_b=model_b,
        outcome=outcome,
        count=count,
        tstamp=tstamp,
        rows=rows,
        n_read=n_read,
        n_kept=n_kept,
        is_aggregated=is_aggregated,
        warnings=tuple(warnings),
    )


def _column_names(source: _Source) -> set[str]:
    """The columns a file has (JSON: every key that may appear, decided later)."""
    path = source.path
    try:
        if source.kind == "parquet":
            return set(pq.read_schema(path).names)
        if source.kind == "csv":
            with path.open("rb") as fh:  # the header only: rows are checked later
                first = fh.readline().decode("utf-8-sig")
            return set(next(csv.reader([first]), []))
    except (pa.ArrowException, OSError, UnicodeDecodeError, csv.Error) as exc:
        msg = f"{path}: cannot read as {source.kind}: {exc}.\nHint: check that the file is complete {source.kind}."
        raise InputError(msg) from exc
    return set()  # JSON: null columns are absent keys, found after reading


def _read_table(
    source: _Source, wanted: dict[str, pa.DataType], present: set[str]
) -> pa.Table:
    """Read the wanted columns; text formats get the types asked for."""
    path, kind = source.path, source.kind
    try:
        if kind == "parquet":
            names = [name for name in wanted if name in present]
            schema = pq.read_schema(path)
            text = [
                n
                for n in names
                if wanted[n] == _TEXT and pa.types.is_string(schema.field(n).type)
            ]
            return pq.read_table(path, columns=names, read_dictionary=text)
        if kind == "csv":
            names = [name for name in wanted if name in present]
            types = {n: wanted[n] for n in names}
            options = pa_csv.ConvertOptions(include_columns=names, column_types=types)
            return pa_csv.read_csv(path, convert_options=options)
        schema = pa.schema(
            [
                (name, pa.string() if type_ == _TEXT else type_)
                for name, type_ in wanted.items()
            ]
        )
        if kind == "jsonl":
            options = pa_json.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"
            )
            return pa_json.read_json(path, parse_options=options)
        return _read_json_array(path, schema)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        _explain_text(source, wanted)  # raises when it finds the line
        msg = f"{path}: cannot read as {kind}: {exc}.\nHint: check that the file is complete {kind} in UTF-8."
        raise InputError(msg) from exc


def _read_json_array(path: Path, schema: pa.Schema) -> pa.Table:
    """A JSON array of objects (Arena's clean_battle files) into a table.

    msgspec (the ``fast`` extra) decodes only the wanted keys; without it the
    standard library parses everything. Either way pyarrow builds the columns.
    """
    data = path.read_bytes()
    struct = pa.struct(list(schema))
    records = (
        _decode_msgspec(path, data, schema)
        if _HAS_MSGSPEC
        else _decode_stdlib(path, data)
    )
    try:
        return pa.Table.from_struct_array(pa.array(records, type=struct))
    except (pa.ArrowException, TypeError) as exc:
        _explain_records(path, "json", enumerate(records), schema, data)
        msg = f"{path}: cannot read the battles: {exc}.\nHint: every element must be an object with text model names."
        raise InputError(msg) from exc


def _decode_msgspec(path: Path, data: bytes, schema: pa.Schema) -> list[Any]:
    import msgspec  # the `fast` extra (checked by _HAS_MSGSPEC)

    python_types = {
        pa.string(): str | None,
        pa.float64(): float | None,
        pa.bool_(): bool | None,
    }
    row_type = msgspec.defstruct(
        "BattleRow",
        [(field.name, python_types[field.type], None) for field in schema],
    )
    try:
        rows = msgspec.json.decode(data, type=list[row_type])  # type: ignore[valid-type]
    except msgspec.ValidationError as exc:
        element = re.search(r"\$\[(\d+)\]", str(exc))
        where = ""
        if element:
            index = int(element.group(1))
            line = _json_array_lines(data, [index]).get(index, "?")
            where = f" element {index + 1} (line {line}):"
        msg = f"{path}:{where} {exc}.\nHint: a .json battles file is one JSON array of objects; model names and winner are text, tstamp a number, filter columns of the type the --where condition implies."
        raise InputError(msg) from exc
    except msgspec.DecodeError as exc:
        byte = re.search(r"byte (\d+)", str(exc))
        end = len(data) if "truncated" in str(exc) else None
        offset = int(byte.group(1)) if byte else end
        line = data.count(b"\n", 0, offset) + 1 if offset is not None else 0
        at = f" at line {line}" if line else ""
        msg = f"{path}: not valid JSON{at} ({exc}).\nHint: a .json battles file is one JSON array of objects; the file may be truncated."
        raise InputError(msg) from exc
    return msgspec.to_builtins(rows)  # type: ignore[no-any-return]


def _decode_stdlib(path: Path, data: bytes) -> list[Any]:
    try:
        records = json.loads(data)
    except (ValueError, RecursionError) as exc:
        line = getattr(exc, "lineno", None)
        at = f" at line {line}" if line else ""
        msg = f"{path}: not valid JSON{at} ({exc}).\nHint: a .json battles file is one JSON array of objects; the file may be truncated."
        raise InputError(msg) from exc
    if not isinstance(records, list):
        msg = f"{path}: the JSON is a {type(records).__name__}, not an array.\nHint: a .json battles file is one JSON array of objects; use .jsonl for one object per line."
        raise InputError(msg)
    return records


def _explain_text(source: _Source, wanted: dict[str, pa.DataType]) -> None:
    """On the error path, find the line of a CSV or JSONL value of the wrong type."""
    path = source.path
    if source.kind not in ("csv", "jsonl"):
        return
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        msg = f"{path}: line {line}: byte {data[exc.start]:#04x} is not UTF-8.\nHint: re-save the file as UTF-8."
        raise InputError(msg) from exc
    schema = pa.schema(
        [(n, pa.string() if t == _TEXT else t) for n, t in wanted.items()]
    )
    if source.kind == "jsonl":
        records: list[tuple[int, object]] = []
        for number, line_text in enumerate(text.splitlines(), start=1):
            if not line_text.strip():
                continue
            try:
                records.append((number, json.loads(line_text)))
            except (ValueError, RecursionError) as exc:
                msg = f"{path}: line {number} is not valid JSON ({exc}).\nHint: write one JSON object per line; the file may be truncated."
                raise InputError(msg) from exc
        _explain_records(path, "line", records, schema, data)
        return
    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        start = reader.line_num + 1
        for record in reader:
            for field in schema:
                value = record.get(field.name)
                if value is None or value == "" or field.type == pa.string():
                    continue
                try:
                    pa.array([value]).cast(field.type)
                except pa.ArrowException:
                    msg = f"{path}: line {start}: {field.name} = {value!r} is not {_type_words(field.type)}.\nHint: {_type_hint(field)}"
                    raise InputError(msg) from None
            start = reader.line_num + 1


def _explain_records(
    path: Path,
    unit: str,
    records: Iterable[tuple[int, object]],
    schema: pa.Schema,
    data: bytes,
) -> None:
    """Name the first record that is not an object or holds a value of a wrong type."""
    checks = {
        pa.string(): lambda v: isinstance(v, str),
        pa.float64(): lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        pa.bool_(): lambda v: isinstance(v, bool),
    }
    for number, record in records:
        problem = ""
        if not isinstance(record, dict):
            problem = f"is {type(record).__name__}, not an object"
        else:
            for field in schema:
                value = record.get(field.name)
                if value is not None and not checks[field.type](value):
                    problem = (
                        f"{field.name} = {value!r} is not {_type_words(field.type)}"
                    )
                    break
        if problem:
            place = f"line {number}"
            if unit == "json":
                line = _json_array_lines(data, [number])[number]
                place = f"element {number + 1} (line {line})"
            msg = f"{path}: {place}: {problem}.\nHint: model names and winner are text, tstamp a number, filter columns of the type the --where condition implies."
            raise InputError(msg)


def _type_words(type_: pa.DataType) -> str:
    if type_ == pa.bool_():
        return "true or false"
    return "a number" if type_ == pa.float64() else "text"


def _type_hint(field: pa.Field) -> str:
    if field.name in _COUNT_COLUMNS:
        return f"{field.name} counts battles: write a whole number."
    if field.name == "tstamp":
        return "tstamp is a time in seconds (a number), as in Arena's files."
    return f"the --where condition on {field.name} treats it as {_type_words(field.type)}; write the condition to match the column."


# --- filters --------------------------------------------------------------------


def _apply_filters(
    table: pa.Table, conditions: Sequence[Where], source: _Source, present: set[str]
) -> pa.Table:
    if not conditions:
        return table
    mask = None
    for condition in conditions:
        if condition.column not in present:
            msg = f"{source.path}: --where {condition.text!r}: no column {condition.column!r}; found {sorted(present)[:12]}.\nHint: filter on a column the file has (names are case-sensitive)."
            raise InputError(msg)
        column = table.column(condition.column)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        part = pc.fill_null(_condition_mask(column, condition, source), False)
        mask = part if mask is None else pc.and_(mask, part)
    return table.filter(mask)


def _condition_mask(
    column: pa.ChunkedArray, condition: Where, source: _Source
) -> pa.ChunkedArray:
    type_ = column.type
    is_number = pa.types.is_integer(type_) or pa.types.is_floating(type_)
    is_text = pa.types.is_string(type_) or pa.types.is_large_string(type_)

    def wrong(expected: str) -> NoReturn:
        msg = f"{source.path}: --where {condition.text!r}: column {condition.column!r} is {type_}, {expected}.\nHint: {_WHERE_HINT}"
        raise InputError(msg)

    if condition.op in ("true", "false"):
        if pa.types.is_boolean(type_):
            truth = column
        elif is_number:
            truth = pc.not_equal(column, 0)
        else:
            wrong("not a boolean: compare it with a value instead")
        return truth if condition.op == "true" else pc.invert(truth)
    values: list[Any]
    if is_text:
        values = list(condition.texts)
        value_type = pa.string()
    elif is_number:
        if not all(
            isinstance(v, float) and not isinstance(v, bool) for v in condition.values
        ):
            wrong(f"not text: compare it with a number, not {list(condition.texts)}")
        column, values, value_type = (
            pc.cast(column, pa.float64()),
            list(condition.values),
            pa.float64(),
        )
    elif pa.types.is_boolean(type_):
        if not all(isinstance(v, bool) for v in condition.values):
            wrong("compare it with true or false")
        values, value_type = list(condition.values), pa.bool_()
    else:
        wrong("which --where cannot compare")
    if condition.op in ("in", "not in"):
        found = pc.is_in(column, value_set=pa.array(values, value_type))
        return found if condition.op == "in" else pc.invert(found)
    compare = {
        "==": pc.equal,
        "!=": pc.not_equal,
        "<": pc.less,
        "<=": pc.less_equal,
        ">": pc.greater,
        ">=": pc.greater_equal,
    }[condition.op]
    return compare(column, pa.scalar(values[0], value_type))


# --- validation and codes -------------------------------------------------------


def _text_column(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Model names as string or dictionary<string> chunks."""
    type_ = column.type
    if pa.types.is_dictionary(type_):
        if not pa.types.is_string(type_.value_type):
            return column.cast(pa.string())
        return column
    if pa.types.is_string(type_):
        return column
    return column.cast(pa.string())  # large_string, or a numeric name in Parquet


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
    source: _Source,
    rows: npt.NDArray[np.int64],
    model_a: pa.ChunkedArray,
    model_b: pa.ChunkedArray,
) -> set[str]:
    """The model names in a file, after checking none is null or blank."""
    names: set[str] = set()
    for name, column in (("model_a", model_a), ("model_b", model_b)):
        values = _unique_names(column)
        bad = [v for v in values if v is None or not v.strip()]
        names.update(v for v in values if v is not None and v.strip())
        if bad:
            known = pa.array(
                sorted(v for v in values if v is not None and v.strip()), pa.string()
            )
            is_bad = _lookup(column, known) < 0
            _fail(
                source,
                rows[is_bad],
                [repr(v) if v is not None else "null" for v in bad][:_SHOWN],
                what=f"empty or null {name}",
                hint="every battle needs both model names; drop rows of unfinished battles.",
                quote=False,
            )
    return names


def _outcomes(
    column: pa.ChunkedArray,
    source: _Source,
    rows: npt.NDArray[np.int64],
    name: str,
) -> npt.NDArray[np.int8]:
    index = _lookup(_text_column(column), _winner_set())
    outcome = _WINNER_CODES[index]  # index -1 picks the trailing -1
    is_bad = outcome < 0
    if is_bad.any():
        values = _unique_names(column.filter(pa.array(is_bad)))
        shown = [repr(v) if v is not None else "null" for v in values][:_SHOWN]
        _fail(
            source,
            rows[is_bad],
            shown,
            what=f"unknown {name} value",
            hint=_WINNER_HINT,
            quote=False,
        )
    return outcome


def _seconds(times: pa.ChunkedArray, source: _Source) -> npt.NDArray[np.float64]:
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
    table: pa.Table, source: _Source, rows: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Rows of counts into (outcome, count, position in table) cells, zeros left out."""
    counts = []
    for name in _COUNT_COLUMNS:
        column = table.column(name)
        values = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
        is_bad = np.isnan(values) | (values < 0) | (values != np.floor(values))
        is_bad |= values >= 2.0**53
        if is_bad.any():
            shown = [
                str(v) if not math.isnan(v) else "null" for v in values[is_bad][:_SHOWN]
            ]
            _fail(
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


# --- messages -------------------------------------------------------------------


def _fail(
    source: _Source,
    rows: npt.NDArray[np.int64],
    values: Sequence[str],
    *,
    what: str,
    hint: str,
    quote: bool = True,
) -> NoReturn:
    """Raise an InputError naming the file, the first rows (as the file counts them) and values."""
    places = _places(source, rows[:_SHOWN].tolist())
    shown = ", ".join(repr(v) if quote else v for v in values[:_SHOWN])
    more = f" (and {len(rows) - _SHOWN} more)" if len(rows) > _SHOWN else ""
    msg = f"{source.path}: {what} at {', '.join(places)}{more}: {shown}.\nHint: {hint}"
    raise InputError(msg)


def _places(source: _Source, rows: list[int]) -> list[str]:
    """Rows (0-based data rows) as the file counts them: lines, or Parquet rows."""
    if not rows:
        return []
    if source.kind == "parquet":
        return [f"row {row + 1}" for row in rows]
    data = source.path.read_bytes()
    if source.kind == "json":
        lines = _json_array_lines(data, rows)
        return [f"element {row + 1} (line {lines[row]})" for row in rows]
    wanted, found, last = set(rows), {}, max(rows)
    text = data.decode("utf-8-sig", errors="replace")
    if source.kind == "jsonl":
        index = 0
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            if index in wanted:
                found[index] = number
            if index >= last:
                break
            index += 1
    else:
        reader = csv.reader(text.splitlines(keepends=True))
        next(reader, None)
        start, index = reader.line_num + 1, 0
        for record in reader:
            if record:
                if index in wanted:
                    found[index] = start
                if index >= last:
                    break
                index += 1
            start = reader.line_num + 1
    return [f"line {found.get(row, '?')}" for row in rows]


_BETWEEN = re.compile(r"[\s,]*")


def _json_array_lines(data: bytes, elements: Sequence[int]) -> dict[int, int]:
    """The line each wanted element of a JSON array starts on (error path only)."""
    text = data.decode("utf-8", errors="replace")
    decoder = json.JSONDecoder()
    position = text.find("[") + 1
    wanted, found, line, counted = set(elements), {}, 1, 0
    for index in range(max(elements) + 1):
        between = _BETWEEN.match(text, position)
        position = between.end() if between else position
        if index in wanted:
            line += text.count("\n", counted, position)
            counted = position
            found[index] = line
        try:
            _, position = decoder.raw_decode(text, position)
        except ValueError:
            break
    return found
