"""Filter conditions (``--where``): the one small language, and its masks over Arrow columns.

Every ``--where`` takes it: ``lbnorm arena`` on battle rows, ``lbnorm show`` on
a leaderboard or a ratings table. The forms (all conditions given must hold)::

    anony                       a boolean column is true (``not anony``: false)
    language = 'English'        = (or ==), !=, <, <=, >, >= against one value
    language != English         unquoted words are text, unquoted numbers numbers
    tstamp >= 1700000000        spaces around the operator are optional:
    params_b<10                 ...
    submission_date>=2025-01-01 a date column compares with YYYY-MM-DD
    language in ('English', 'Chinese')      also: not in (...)
    model ~ ^meta-llama/        a case-insensitive regular expression: the
                                rest of the condition, as written
    MATH Lvl 5 >= 20            a column whose name has spaces: the text before
                                the operator (a leaderboard's benchmarks)

In CSV and JSON files the condition sets the column's type (a bare column is
boolean, a number makes it numeric, anything else text); Parquet columns and a
leaderboard's keep their stored type. A row whose filter column is empty
(null) does not match, whatever the operator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NoReturn

import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.core.errors import InputError, LbnormError, WhereSyntaxError
from lbnorm.ratings.battle_io import Source

__all__ = [
    "WHERE_HINT",
    "Literal_",
    "Where",
    "WhereOp",
    "column_mask",
    "condition_mask",
    "nested_top",
    "parse_where",
    "resolve_column",
]

WhereOp = Literal[
    "true", "false", "==", "!=", "<", "<=", ">", ">=", "in", "not in", "~"
]
Literal_ = str | float | bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Where:
    """One parsed filter condition; build it with :func:`parse_where`.

    Attributes:
        column: The column tested.
        op: ``true``/``false`` (a boolean column), a comparison, ``in``,
            ``not in``, or ``~`` (a case-insensitive regular expression).
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
    r"""|(?P<op>==|!=|<=|>=|=|<|>|\(|\)|,)|(?P<word>[^\s'"=!<>(),~]+))"""
)
#: ``COLUMN OP VALUE`` read whole: the column is the text before the first
#: operator (it may hold spaces), the value the rest as written.
_WHOLE = re.compile(r"^\s*([^=!<>~]+?)\s*(==|!=|<=|>=|=|<|>|~)\s*(.*?)\s*$")
#: What no column name read up to its operator holds.
_ODD_NAME = re.compile(r"['\"(),]")
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
#: Numbers a flag also compares with (``flagged=1``), as true and false.
_FLAGS = {"1.0": True, "0.0": False, "True": True, "False": False}
WHERE_HINT = (
    "write COLUMN, not COLUMN, COLUMN OP VALUE with OP one of = != < <= > >= "
    "(numbers for numeric columns, true/false for flags, YYYY-MM-DD for dates), "
    "COLUMN ~ REGEX, or COLUMN in (V1, V2); quote text with spaces: "
    "language = 'English'."
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
        >>> parse_where("model~^meta-llama/").values, parse_where("MATH Lvl 5>=20").column
        (('^meta-llama/',), 'MATH Lvl 5')
    """
    whole = _WHOLE.match(text)
    if whole and whole.group(2) == "~" and whole.group(3):  # the rest is the pattern
        pattern = _unquoted(whole.group(3))
        return Where(
            column=whole.group(1),
            op="~",
            values=(pattern,),
            texts=(pattern,),
            text=text,
        )
    try:
        return _parse_tokens(text)
    except WhereSyntaxError:
        value = whole.group(3) if whole else ""
        kinds = [kind for kind, _ in _tokenize(value, strict=False)]
        is_one_value = kinds in (["word"], ["str"])
        if not whole or not is_one_value or _ODD_NAME.search(whole.group(1)):
            raise
    # a column whose name is not a plain word (spaces, a dash: a benchmark of a
    # leaderboard), read up to its operator
    shown = _unquoted(value)
    value_of = shown if shown != value else _literal("word", value)[0]
    return Where(
        column=whole.group(1),
        op=_OPS[whole.group(2)],
        values=(value_of,),
        texts=(shown,),
        text=text,
    )


def _unquoted(text: str) -> str:
    """A value as written, or the text inside its quotes when it is all quoted."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text


def _parse_tokens(text: str) -> Where:
    """The condition read token by token (the forms but ``~`` and names with spaces)."""
    tokens = _tokenize(text)
    kinds = [kind for kind, _ in tokens]
    words = [value for _, value in tokens]

    def fail(problem: str) -> NoReturn:
        msg = f"--where {text!r}: {problem}.\nHint: {WHERE_HINT}"
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
    items = body[1:-1]  # values at even positions, commas between
    for position, (kind, word) in enumerate(items):
        if (kind == "op") != (position % 2 == 1) or (position % 2 and word != ","):
            fail(f"expected values separated by commas, got {word!r}")
    if len(items) % 2 == 0:
        fail("the list of values ends with a comma")
    values, texts = zip(*(_literal(*item) for item in items[::2]), strict=True)
    if len({type(value) for value in values}) > 1:
        fail(f"the values {list(values)} mix types")
    return Where(
        column=column,
        op="not in" if negated else "in",
        values=values,
        texts=texts,
        text=text,
    )


def _tokenize(text: str, *, strict: bool = True) -> list[tuple[str, str]]:
    """The condition's tokens; past what cannot be read: an error, or (not `strict`) the end."""
    tokens: list[tuple[str, str]] = []
    position = 0
    while position < len(text.rstrip()):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            if not strict:
                return [*tokens, ("odd", text[position:])]
            msg = f"--where {text!r}: cannot read {text[position:].strip()!r}.\nHint: {WHERE_HINT}"
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


# --- filters --------------------------------------------------------------------


def condition_mask(
    table: pa.Table, condition: Where, source: Source, present: set[str]
) -> pa.ChunkedArray:
    """Per row of ``table``, whether it meets ``condition`` (a null never does)."""
    column = resolve_column(table, condition.column, present)
    if column is None:
        msg = f"{source.path}: --where {condition.text!r}: no column {condition.column!r}; found {_fields_near(table, condition.column, present)}.\nHint: filter on a column the file has (names are case-sensitive; a nested field is written with dots, e.g. category_tag.math_v0.1.math)."
        raise InputError(msg)
    return column_mask(column, condition, where=f"{source.path}: ", error=InputError)


def column_mask(
    column: pa.Array | pa.ChunkedArray,
    condition: Where,
    *,
    where: str = "",
    error: type[LbnormError] = InputError,
) -> pa.Array | pa.ChunkedArray:
    """Per value of `column`, whether it meets `condition` (a null never does).

    Args:
        column: The values (a dictionary column is compared by its values).
        condition: The condition.
        where: What a message names first (the file, ``path: ``).
        error: The error a condition that does not fit the column raises
            (a battle file's column: InputError; an output's: OptionsError).

    Raises:
        LbnormError: `error`: the condition does not fit the column's type, or
            its regular expression is not one.

    Examples:
        >>> column_mask(pa.array([3.0, 12.0, None]), parse_where("params_b<10")).to_pylist()
        [True, False, False]
    """
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    return pc.fill_null(_mask(column, condition, where, error), False)


def _mask(
    column: pa.Array | pa.ChunkedArray,
    condition: Where,
    where: str,
    error: type[LbnormError],
) -> pa.Array | pa.ChunkedArray:
    type_ = column.type
    is_number = pa.types.is_integer(type_) or pa.types.is_floating(type_)
    head = f"{where}--where {condition.text!r}"

    def wrong(expected: str) -> NoReturn:
        shown = ", ".join(repr(text) for text in condition.texts)
        msg = f"{head}: {shown} does not fit column {condition.column!r} ({type_}): compare it with {expected}.\nHint: {WHERE_HINT}"
        raise error(msg)

    if condition.op in ("true", "false"):
        if pa.types.is_boolean(type_):
            truth = column
        elif is_number:
            truth = pc.not_equal(column, 0)
        else:
            msg = f"{head}: column {condition.column!r} is {type_}, not a boolean: compare it with a value instead.\nHint: {WHERE_HINT}"
            raise error(msg)
        return truth if condition.op == "true" else pc.invert(truth)
    if condition.op == "~":
        try:
            return pc.match_substring_regex(
                column.cast(pa.string()), condition.texts[0], ignore_case=True
            )
        except pa.ArrowInvalid as exc:
            msg = f"{head}: not a regular expression ({exc}).\nHint: escape special characters, e.g. \\. for a dot."
            raise error(msg) from exc
    values: list[Any]
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        values, value_type = list(condition.texts), pa.string()
    elif is_number:
        if condition.value_type != pa.float64():  # every value a number
            wrong("a number")
        column = pc.cast(column, pa.float64())
        values, value_type = list(condition.values), pa.float64()
    elif pa.types.is_boolean(type_):
        values = [_FLAGS.get(str(v), v) for v in condition.values]
        if not all(isinstance(v, bool) for v in values):
            wrong("true or false")
        value_type = pa.bool_()
    elif pa.types.is_temporal(type_):
        try:
            values = [datetime.fromisoformat(text) for text in condition.texts]
        except ValueError:
            wrong("a date (YYYY-MM-DD)")
        column, value_type = pc.cast(column, pa.timestamp("us")), pa.timestamp("us")
    else:
        wrong("nothing: --where cannot compare this column")
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


def nested_top(name: str) -> str | None:
    """The top-level key holding a dotted name's nested field (None: not dotted)."""
    top, dot, _ = name.partition(".")
    return top if dot and top else None


def resolve_column(
    table: pa.Table, name: str, present: set[str]
) -> pa.ChunkedArray | None:
    """A column by name, or a nested field by a dotted path into a struct column.

    Field names may hold dots themselves (``math_v0.1``): at each level the
    longest run of path segments that names a field is taken.

    Examples:
        >>> table = pa.table({"tag": [{"math_v0.1": {"math": True}}]})
        >>> resolve_column(table, "tag.math_v0.1.math", {"tag"}).to_pylist()
        [True]
    """
    if name in present and name in table.column_names:
        return table.column(name)
    top = nested_top(name)
    if top is None or top not in present or top not in table.column_names:
        return None
    column = table.column(top)
    segments = name.split(".")[1:]
    while segments:
        type_ = column.type
        if not pa.types.is_struct(type_):
            return None
        fields = {type_.field(i).name: i for i in range(type_.num_fields)}
        for size in range(len(segments), 0, -1):
            key = ".".join(segments[:size])
            if key in fields:
                column = pc.struct_field(column, [fields[key]])
                segments = segments[size:]
                break
        else:
            return None
    return column


def _fields_near(table: pa.Table, name: str, present: set[str]) -> list[str]:
    """What a message lists for a missing name: the nested fields there are, or the columns."""
    top = nested_top(name)
    if top is None or top not in present or top not in table.column_names:
        return sorted(present)[:12]
    names: list[str] = []
    pending = [(top, table.column(top).type)]
    while pending and len(names) < 12:
        prefix, type_ = pending.pop(0)
        if not pa.types.is_struct(type_):
            names.append(prefix)
            continue
        pending.extend(
            (f"{prefix}.{type_.field(i).name}", type_.field(i).type)
            for i in range(type_.num_fields)
        )
    return names
