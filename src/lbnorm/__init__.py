"""lbnorm: normalize whole LLM leaderboards, vectorized, from real inputs to Parquet.

Pipeline: ``readers`` -> ``validate`` -> ``suites`` (bounds) -> ``kernel`` ->
``writer``, composed in ``pipeline``. Start with :func:`run` or
:func:`normalize_scores`.
"""

from __future__ import annotations

from lbnorm.errors import (
    InputError,
    LbnormError,
    OutputError,
    SchemaMismatchError,
    SuiteError,
    ValidationError,
)
from lbnorm.pipeline import Result, demo_path, normalize_scores, run
from lbnorm.suites import Suite, builtin_suite_names, load_suite

__all__ = [
    "InputError",
    "LbnormError",
    "OutputError",
    "Result",
    "SchemaMismatchError",
    "Suite",
    "SuiteError",
    "ValidationError",
    "builtin_suite_names",
    "demo_path",
    "load_suite",
    "normalize_scores",
    "run",
]
