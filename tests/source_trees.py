"""The package's source, read, parsed and walked once per test process.

The tests that check the package's source with :mod:`ast` (its module graph, who
starts threads, who reads the environment, that nothing loads code from data,
which modules import pandas) share these: parsing every module takes longer than
any one of those checks, and a test process (each ``pytest -n`` worker) would
otherwise parse the package once per check. The trees are only read, never changed.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "lbnorm"


@functools.cache
def parsed(source: str) -> ast.Module:
    """`source`'s syntax tree, parsed once however many checks read it."""
    return ast.parse(source)


@functools.cache
def nodes(source: str) -> tuple[ast.AST, ...]:
    """Every node of `source`'s tree, in :func:`ast.walk`'s order, walked once."""
    return tuple(ast.walk(parsed(source)))


@functools.cache
def package_modules() -> tuple[Path, ...]:
    """The package's ``.py`` files, sorted."""
    return tuple(sorted(PACKAGE.rglob("*.py")))
