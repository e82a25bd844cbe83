"""Checks a suite's parts share: known keys, unique names, values shown in messages."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence, Set
from typing import Any, TypeGuard

from lbnorm.core.errors import SuiteError

__all__ = [
    "check_table",
    "check_unique",
    "choice",
    "is_number",
    "is_whole",
    "required",
    "shown",
]


def check_table(
    raw: object, allowed: Set[str], *, where: str, hint: str
) -> dict[str, Any]:
    """A TOML value that is a table with none but `allowed` keys (a misspelt one, mostly)."""
    if not isinstance(raw, dict):
        msg = f"{where}: expected a table, got {raw!r}.\nHint: {hint}"
        raise SuiteError(msg)
    if unknown := sorted(set(raw) - allowed):
        msg = f"{where}: unknown key(s) {unknown}.\nHint: allowed keys are {sorted(allowed)}."
        raise SuiteError(msg)
    return raw


def check_unique(names: Sequence[str], *, what: str, where: str) -> None:
    """Raise on a name given twice."""
    if duplicated := sorted(
        name for name, count in Counter(names).items() if count > 1
    ):
        msg = f"{where}: duplicate {what}(s) {duplicated[:5]}.\nHint: each {what} must appear once."
        raise SuiteError(msg)


def choice(
    table: dict[str, Any],
    key: str,
    allowed: tuple[str, ...],
    *,
    where: str,
    hint: str | None = None,
) -> Any:
    """The value of a key that names one of `allowed` (absent: the first, the default).

    Typed ``Any``: `allowed` are a ``Literal``'s values, so the value is of that ``Literal``.
    """
    value = table.get(key, allowed[0])
    if value not in allowed:
        hint = hint or f"the default is {allowed[0]!r}."
        msg = f"{where}: {key} must be one of {list(allowed)}, got {value!r}.\nHint: {hint}"
        raise SuiteError(msg)
    return value


def is_whole(value: object, least: int, most: int) -> TypeGuard[int]:
    """Whether a TOML value is an integer from `least` to `most` (``true`` is none)."""
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and least <= value <= most
    )


def is_number(value: object, least: float, most: float) -> TypeGuard[float]:
    """Whether a TOML value is a number from `least` to `most` (nan and ``true`` are none)."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and least <= value <= most
    )


def shown(value: object) -> str:
    """A value for a message; an integer of hundreds of digits as its size."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {len(str(value)):,} digits"
    return repr(value)


def required(table: dict[str, Any], key: str, type_: type, *, where: str) -> Any:
    """The value of a key that must be there, of that type (a string non-empty)."""
    value = table.get(key)
    if not isinstance(value, type_) or (type_ is str and not value):
        msg = f"{where}: {key!r} must be a non-empty {type_.__name__}, got {value!r}.\nHint: see the suite format in the README."
        raise SuiteError(msg)
    return value
