"""lbnorm: normalize whole LLM leaderboards, vectorized, from real inputs to Parquet.

The pipeline, one module a stage: ``readers`` -> ``validate`` -> an engine
(``engines/``, on the ``kernel``) -> ``result`` -> ``writer``, composed in
``pipeline``. Start with :func:`run` or :func:`normalize_scores`.

Importing lbnorm is cheap: the names below are loaded when first used, so
``import lbnorm`` (and ``lbnorm --help``) load neither pandas nor the pipeline.
"""

from __future__ import annotations

from importlib import import_module

#: (typing is not imported: the command's first step, taking the signals, comes
#: after this module, and the sooner the better)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from lbnorm.core.errors import (
        InputError,
        LbnormError,
        OptionsError,
        OutputError,
        SchemaMismatchError,
        SuiteError,
        ValidationError,
    )
    from lbnorm.core.options import RunOptions
    from lbnorm.engines.result import Result
    from lbnorm.pipeline import demo_path, normalize_scores, run
    from lbnorm.suites import Suite, builtin_suite_names, load_suite

__all__ = [
    "InputError",
    "LbnormError",
    "OptionsError",
    "OutputError",
    "Result",
    "RunOptions",
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

#: Where each public name lives.
_HOMES = {
    "InputError": "lbnorm.core.errors",
    "LbnormError": "lbnorm.core.errors",
    "OptionsError": "lbnorm.core.errors",
    "OutputError": "lbnorm.core.errors",
    "SchemaMismatchError": "lbnorm.core.errors",
    "SuiteError": "lbnorm.core.errors",
    "ValidationError": "lbnorm.core.errors",
    "RunOptions": "lbnorm.core.options",
    "Result": "lbnorm.engines.result",
    "Suite": "lbnorm.suites",
    "builtin_suite_names": "lbnorm.suites",
    "load_suite": "lbnorm.suites",
    "demo_path": "lbnorm.pipeline",
    "normalize_scores": "lbnorm.pipeline",
    "run": "lbnorm.pipeline",
}


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    if name == "__version__":
        from lbnorm.core.version import lbnorm_version

        return lbnorm_version()
    home = _HOMES.get(name)
    if home is None:
        msg = f"module 'lbnorm' has no attribute {name!r}"
        raise AttributeError(msg)
    value = getattr(import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
