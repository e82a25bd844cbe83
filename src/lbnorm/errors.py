"""The exceptions lbnorm raises on bad input, and their exit codes.

Every error a user can cause is an :class:`LbnormError`; anything else is a bug and
keeps its traceback. The tree::

    LbnormError                      exit 1 unless noted
    ├── SuiteError (ValueError)      exit 3: a suite file is malformed or inconsistent
    ├── InputError (ValueError)      exit 4: an input file cannot be read or parsed
    │   └── SchemaMismatchError      exit 4: a table lacks columns or has wrong types
    ├── ValidationError (ValueError) exit 5: scores violate the contract (all failures)
    └── OutputError (OSError)        exit 6: the output cannot be written (lock, disk, rights)

Exit 7 is not an error: the run wrote its output, but a health check failed or
(nightly runs with ``--cache``) an input file was rejected; see ``run_report``.

A message names the file (and row or key), shows the offending values (at most
five) and ends with a ``Hint:`` that says how to fix it.
"""

from __future__ import annotations

from typing import ClassVar

import pandas as pd

__all__ = [
    "InputError",
    "LbnormError",
    "OutputError",
    "SchemaMismatchError",
    "SuiteError",
    "ValidationError",
]

_SHOWN = 5


class LbnormError(Exception):
    """Base class of every error caused by the user's inputs or environment."""

    exit_code: ClassVar[int] = 1


class SuiteError(LbnormError, ValueError):
    """A suite file is malformed, or its bounds or rules are inconsistent."""

    exit_code: ClassVar[int] = 3


class InputError(LbnormError, ValueError):
    """An input file is missing, unreadable, or not in a supported format."""

    exit_code: ClassVar[int] = 4


class SchemaMismatchError(InputError):
    """A table lacks required columns, has unexpected ones, or wrong types."""


class OutputError(LbnormError, OSError):
    """The output directory cannot be written; the previous output is untouched."""

    exit_code: ClassVar[int] = 6


class ValidationError(LbnormError, ValueError):
    """Scores violate the input contract; ``failures`` lists every violation.

    Attributes:
        failures: One row per failure with columns ``check``, ``source``, ``row``,
            ``column`` and ``value``.
    """

    exit_code: ClassVar[int] = 5

    def __init__(self, message: str, failures: pd.DataFrame) -> None:
        super().__init__(message)
        self.failures = failures

    @classmethod
    def from_failures(
        cls, failures: pd.DataFrame, *, total: int | None = None
    ) -> ValidationError:
        """Build the error and its message from a frame of failures.

        Args:
            failures: Frame with columns ``check``, ``source``, ``row``, ``column``,
                ``value`` and ``hint``.
            total: How many scores failed in all, when `failures` lists only
                the first ones of each check.

        Returns:
            The error, its message summarising each failed check.
        """
        total = len(failures) if total is None else total
        listed = (
            ""
            if total == len(failures)
            else f" (the first {len(failures)} are in .failures)"
        )
        lines = [f"{total} score(s) failed validation{listed}:"]
        for check, group in failures.groupby("check", sort=True):
            shown = group.head(_SHOWN)
            where = ", ".join(
                f"{source} row {row} ({column}={value!r})"
                for source, row, column, value in zip(
                    shown["source"],
                    shown["row"],
                    shown["column"],
                    shown["value"],
                    strict=True,
                )
            )
            more = f" and {len(group) - _SHOWN} more" if len(group) > _SHOWN else ""
            lines.append(f"- {check}: {where}{more}")
            lines.append(f"  Hint: {group['hint'].iloc[0]}")
        return cls("\n".join(lines), failures.drop(columns="hint"))
