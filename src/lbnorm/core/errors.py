"""The exceptions lbnorm raises on bad input, and every exit code, defined once.

Every error a user can cause is an :class:`LbnormError`; anything else is a bug and
keeps its traceback. The tree::

    LbnormError                      exit 1 unless noted
    ├── OptionsError (ValueError)    exit 2: options out of range or contradicting
    ├── SuiteError (ValueError)      exit 3: a suite file is malformed or inconsistent
    ├── InputError (ValueError)      exit 4: an input file cannot be read or parsed
    │   └── SchemaMismatchError      exit 4: a table lacks columns or has wrong types
    ├── ValidationError (ValueError) exit 5: scores violate the contract (all failures)
    └── OutputError (OSError)        exit 6: the output cannot be written (lock, disk, rights)
        └── SpillError               exit 6: a run over --sum-memory cannot spill in TMPDIR

Exit 7 is not an error: the run wrote its output, but a health check failed or
(nightly runs with ``--cache``) an input file was rejected; see ``run_report``.
Exit 8 is the machine's limit, not the input's: memory (or the threads and
processes memory allows) ran out; :func:`memory_failure` recognises it in
whatever numpy, Arrow, DuckDB or the interpreter raised.
:class:`ExitCode` lists them all; the command line's help and the run report
print this one list.

A message names the file (and row or key), shows the offending values (at most
five) and ends with a ``Hint:`` that says how to fix it.
"""

from __future__ import annotations

import errno
from collections.abc import Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

__all__ = [
    "EXIT_CODES_HELP",
    "Cancelled",
    "ExitCode",
    "HealthConfigError",
    "InputError",
    "LbnormError",
    "OptionsError",
    "OutputError",
    "RatingOptionsError",
    "RatingsNotIdentifiableError",
    "SchemaMismatchError",
    "SpillError",
    "SuiteError",
    "Terminated",
    "ValidationError",
    "WhereSyntaxError",
    "memory_failure",
    "shown_list",
    "shown_number",
]


class ExitCode(IntEnum):
    """The process exit codes of ``lbnorm``, each with its meaning."""

    OK = 0
    ERROR = 1
    USAGE = 2
    SUITE = 3
    INPUT = 4
    VALIDATION = 5
    OUTPUT = 6
    UNHEALTHY = 7
    MEMORY = 8
    INTERRUPTED = 130
    TERMINATED = 143


_MEANINGS = {
    ExitCode.OK: "success",
    ExitCode.ERROR: "other lbnorm error",
    ExitCode.USAGE: "usage error",
    ExitCode.SUITE: "the suite is invalid",
    ExitCode.INPUT: "an input file is unreadable or malformed",
    ExitCode.VALIDATION: "scores failed validation (every failure listed)",
    ExitCode.OUTPUT: "the output directory cannot be written",
    ExitCode.UNHEALTHY: "ran, but a health check failed or a file was rejected",
    ExitCode.MEMORY: "out of memory (or of threads): nothing replaced unless said",
    ExitCode.INTERRUPTED: "interrupted",
    ExitCode.TERMINATED: "terminated (SIGTERM)",
}

#: The exit codes as the command line's help prints them.
EXIT_CODES_HELP = "exit codes:\n" + "\n".join(
    f"  {int(code):<3} {meaning}" for code, meaning in _MEANINGS.items()
)


class Cancelled(KeyboardInterrupt):
    """Ctrl-C, raised where the run next checks for it (``lbnorm._runtime``).

    A :class:`KeyboardInterrupt`, not an :class:`LbnormError`: ``except
    Exception`` lets it through, and a library's caller sees the interruption
    it expects.
    """

    exit_code: ClassVar[int] = ExitCode.INTERRUPTED


class Terminated(Cancelled):
    """SIGTERM, handled as Ctrl-C is, so that both clean up alike."""

    exit_code: ClassVar[int] = ExitCode.TERMINATED


class LbnormError(Exception):
    """Base class of every error caused by the user's inputs or environment."""

    exit_code: ClassVar[int] = ExitCode.ERROR


class OptionsError(LbnormError, ValueError):
    """Options that contradict each other or are out of range (a usage error)."""

    exit_code: ClassVar[int] = ExitCode.USAGE


class SuiteError(LbnormError, ValueError):
    """A suite file is malformed, or its bounds or rules are inconsistent."""

    exit_code: ClassVar[int] = ExitCode.SUITE


class InputError(LbnormError, ValueError):
    """An input file is missing, unreadable, or not in a supported format."""

    exit_code: ClassVar[int] = ExitCode.INPUT


class SchemaMismatchError(InputError):
    """A table lacks required columns, has unexpected ones, or wrong types."""


class OutputError(LbnormError, OSError):
    """The output directory cannot be written; the previous output is untouched."""

    exit_code: ClassVar[int] = ExitCode.OUTPUT


class SpillError(OutputError):
    """A run over ``--sum-memory`` cannot make, write or read its spill files in TMPDIR."""


class ValidationError(LbnormError, ValueError):
    """Scores violate the input contract; ``failures`` lists every violation.

    Attributes:
        failures: One row per failure with columns ``check``, ``source``, ``row``,
            ``column`` and ``value`` (a pandas frame, built when first read).
    """

    exit_code: ClassVar[int] = ExitCode.VALIDATION

    def __init__(self, message: str, failures: pa.Table) -> None:
        super().__init__(message)
        self.failure_table = failures

    @property
    def failures(self) -> pd.DataFrame:
        """The failures as a pandas frame (one row per failing score)."""
        frame: pd.DataFrame = self.failure_table.to_pandas()
        return frame


class WhereSyntaxError(OptionsError):
    """A ``--where`` condition (on battles or a leaderboard) cannot be parsed (a usage error)."""


class RatingOptionsError(OptionsError):
    """The rating options are invalid or do not fit the battles (a usage error)."""


class RatingsNotIdentifiableError(InputError):
    """The battles do not determine the ratings (disconnected, or one-sided records).

    Attributes:
        groups: The groups of models the message names (parts of the graph, or
            models whose ratings diverge).
    """

    def __init__(self, message: str, groups: tuple[tuple[str, ...], ...]) -> None:
        super().__init__(message)
        self.groups = groups


class HealthConfigError(LbnormError, ValueError):
    """A health threshold is out of range or unknown (``--health-config``)."""


def shown_number(value: int) -> str:
    """A whole number as a message shows it: whole up to 30 digits, else its start and length.

    Examples:
        >>> shown_number(10**23), shown_number(10**999)
        ('100000000000000000000000', '100000000000...(1000 digits)')
    """
    text = str(value)
    return text if len(text) <= 30 else f"{text[:12]}...({len(text)} digits)"


def shown_list(values: Sequence[Any], shown: int) -> str:
    """The first `shown` values as a message lists them, and how many more (never cut silently).

    Examples:
        >>> shown_list(["a", "b", "c"], 2), shown_list(["a"], 2)
        ("['a', 'b'] and 1 more", "['a']")
    """
    more = f" and {len(values) - shown:,} more" if len(values) > shown else ""
    return f"{list(values[:shown])}{more}"


#: What the libraries say when an allocation, a thread or a mapping fails: Arrow
#: ("Out of memory: malloc of size 1600000 failed", "Failed to launch worker
#: thread"), its codecs ("ZSTD_DCtx create failed", "Allocation error : not
#: enough memory"), C++ (``std::bad_alloc``), DuckDB ("Out of Memory Error"),
#: Python ("can't start new thread") and the loader ("failed to map segment from
#: shared object"). The kernel's ``ENOMEM`` is read from the error number.
_MEMORY_WORDS = (
    "malloc of size",
    "realloc of size",
    "bad_alloc",
    "failed to launch worker thread",
    "ctx create failed",
    "cannot allocate memory",
    "not enough memory",
    "out of memory:",
    "out of memory error",
    "failed to map segment",
    "can't start new thread",
)

#: The libraries whose exceptions' text is read for those words. Not lbnorm's
#: own messages, nor Python's errors at large (a file named "out of memory.csv"
#: is not out of memory): of Python's, only a thread that cannot start
#: (RuntimeError) and a library that cannot be mapped (ImportError).
_LIBRARIES = ("pyarrow", "duckdb", "_duckdb")


def memory_failure(error: BaseException) -> BaseException | None:
    """The exception behind `error` that says memory (or a thread) ran out, if any.

    Follows the chain of causes (``raise ... from``), so a reader's
    :class:`InputError` "cannot read row group 2: malloc of size 1600000 failed"
    is recognised as the allocation failure it wraps, not taken for a damaged
    file. A :class:`MemoryError` (numpy's ``_ArrayMemoryError``, Arrow's
    ``ArrowMemoryError``) counts, and so does an error of Arrow or DuckDB whose
    text says so, a thread that could not start, a library that could not be
    mapped (an ``ImportError``) and ``ENOMEM``.

    Examples:
        >>> memory_failure(InputError("x")) is None
        True
        >>> try:
        ...     try:
        ...         raise MemoryError("malloc of size 16 failed")
        ...     except MemoryError as exc:
        ...         raise InputError("x.parquet: cannot read row group 2") from exc
        ... except InputError as error:
        ...     print(memory_failure(error))
        malloc of size 16 failed
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, MemoryError) or _says_memory(current):
            return current
        current = current.__cause__ or current.__context__
    return None


def _says_memory(error: BaseException) -> bool:
    if isinstance(error, LbnormError):
        return False
    if isinstance(error, OSError) and error.errno is not None:  # the kernel's word
        return error.errno == errno.ENOMEM
    module = type(error).__module__.partition(".")[0]
    is_read = (
        module in _LIBRARIES
        or type(error) in {RuntimeError, ImportError}
        or _raised_in_library(error)  # (Arrow raises Python's OSError for its I/O)
    )
    text = str(error).lower()
    return is_read and any(word in text for word in _MEMORY_WORDS)


def _raised_in_library(error: BaseException) -> bool:
    """Whether `error` was raised in Arrow's or DuckDB's code (its innermost frame)."""
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    if frame is None:
        return False
    name = frame.tb_frame.f_code.co_filename.replace("\\", "/")
    return any(f"{library}/" in name for library in _LIBRARIES)
