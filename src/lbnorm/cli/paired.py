"""``lbnorm compare OUT A B --paired`` and ``lbnorm diff OLD NEW --paired``: the glue.

The commands' other forms live in :mod:`lbnorm.cli.analysts` and
:mod:`lbnorm.cli.changes`, which hand ``--paired`` here; the arithmetic is
:mod:`lbnorm.analysis.paired`'s, the rendering :mod:`lbnorm.faces.paired`'s.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from lbnorm.cli.arguments import emit_diff
from lbnorm.core.errors import ExitCode, OptionsError

if TYPE_CHECKING:
    from lbnorm.output.reader import Output

__all__ = ["compare_paired_command", "diff_paired_command"]


def compare_paired_command(args: argparse.Namespace) -> int:
    """Two variants of an output, compared on the items both answered."""
    from lbnorm.analysis.paired import compare_paired
    from lbnorm.core.schemas import KEY_COLUMNS
    from lbnorm.faces.paired import format_paired_comparison
    from lbnorm.faces.show import find_variants
    from lbnorm.output.reader import Output

    if len(args.models) != 2:
        msg = f"--paired compares two models, got {len(args.models)}.\nHint: name two models: lbnorm compare OUT A B --paired."
        raise OptionsError(msg)
    output = Output.open(args.out, "leaderboard", verify=args.verify)
    variants = find_variants(output.frame("leaderboard"), args.models)
    if len(variants) != 2:
        shown = ", ".join(
            f"{model} [{precision}]"
            for model, precision in zip(
                variants["model"], variants["precision"], strict=True
            )
        )
        msg = f"--paired compares two variants, but the names match {len(variants)}: {shown}.\nHint: compare variants of one model in Python: lbnorm.analysis.paired.compare_paired(out, {{'model': ..., 'precision': ...}}, ...)."
        raise OptionsError(msg)
    a, b = (  # the two variants named
        {key: variants.iloc[at][key] for key in KEY_COLUMNS} for at in range(2)
    )
    comparison = compare_paired(
        output, a, b, adjust=args.paired_adjust, alpha=args.paired_alpha
    )
    print(format_paired_comparison(comparison, digits=args.digits))
    return ExitCode.OK


def diff_paired_command(args: argparse.Namespace, old: Output, new: Output) -> int:
    """Each variant of two outputs (opened), compared with itself: which benchmark moved."""
    from lbnorm.analysis.paired import diff_paired
    from lbnorm.faces.paired import format_paired_diff

    diff = diff_paired(
        old,
        new,
        adjust=args.paired_adjust,
        alpha=args.paired_alpha,
        subtasks=args.paired_subtasks,
    )
    tables = {"diff_paired": diff.changes}
    return emit_diff(
        args, tables, format_paired_diff(diff, largest=args.largest), stem="diff_paired"
    )
