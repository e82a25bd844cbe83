"""Not a timing: how heavy the source is, as issue 38 counts it.

Code lines are the lines that hold code: no blank lines, no comment-only lines and
no docstrings. Prints the total for a source tree, the lines per group of paths given
with ``--group NAME=PATH[,PATH...]`` (a path is a module or a folder under the tree's
package; a file in two groups counts in the first), and the functions over 80 lines
(their whole span, as a reader scrolls it).

    python benchmarks_perf/code_lines.py src/lbnorm
    python benchmarks_perf/code_lines.py src/lbnorm --group output=output,readers/tables.py
"""

from __future__ import annotations

import argparse
import ast
import io
import tokenize
from pathlib import Path

LONG = 80


def code_lines(text: str) -> set[int]:
    """The line numbers that hold code (not blank, not only a comment, not a docstring)."""
    tree = ast.parse(text)
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(
            node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        ):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                end = body[0].end_lineno or body[0].lineno
                docstrings.update(range(body[0].lineno, end + 1))
    lines: set[int] = set()
    skip = {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
        tokenize.ENCODING,
    }
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type in skip:
            continue
        lines.update(range(token.start[0], token.end[0] + 1))
    return lines - docstrings


def long_functions(text: str) -> list[tuple[str, int]]:
    """Functions whose span (decorators left out) is over LONG lines."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            span = (node.end_lineno or node.lineno) - node.lineno + 1
            if span > LONG:
                found.append((node.name, span))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path)
    parser.add_argument("--group", action="append", default=[])
    args = parser.parse_args()
    groups: list[tuple[str, list[Path]]] = []
    for spec in args.group:
        name, _, paths = spec.partition("=")
        groups.append((name, [args.package / p for p in paths.split(",")]))
    counts = {name: 0 for name, _ in groups}
    total = 0
    long: list[str] = []
    for path in sorted(args.package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        n = len(code_lines(text))
        total += n
        for name, roots in groups:
            if any(path == r or r in path.parents for r in roots):
                counts[name] += n
                break
        rel = path.relative_to(args.package)
        long += [f"  {rel}:{fn} {span}" for fn, span in long_functions(text)]
    print(f"code lines: {total}")
    for name, n in counts.items():
        print(f"  {name}: {n}")
    print(f"functions over {LONG} lines: {len(long)}")
    print("\n".join(long))


if __name__ == "__main__":
    main()
