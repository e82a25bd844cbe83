"""``lbnorm export`` and ``explain``: an output as another leaderboard's table, any number explained."""

from __future__ import annotations

import argparse
import sys

from lbnorm.cli.arguments import Commands, add_digits, check_parent, options_of
from lbnorm.core.errors import ExitCode, OptionsError

__all__ = ["register"]


def register(commands: Commands) -> None:
    """Register ``export`` and ``explain``."""
    _register_export(commands)
    _register_explain(commands)


def _register_export(commands: Commands) -> None:
    export = commands.add_parser(
        "export",
        help="write an output as a leaderboard's published table",
        description=(
            "Write an output directory's leaderboard as a published table. table: the "
            "leaderboard as its suite presents it (docs/boards.md): a model column, "
            "then the suite's [[board.columns]] by their published names, rounded to "
            "their digits. open-llm-leaderboard: the 36 columns of the "
            "open-llm-leaderboard/contents dataset, in its order and types (Parquet "
            "with the datasets features; .csv by suffix). Columns the run's metadata "
            "table (lbnorm run --metadata) does not give are null; docs/publishing.md "
            "lists which metadata column feeds each. lbnorm writes only over a file it "
            "exported."
        ),
        epilog=(
            "examples:\n"
            "  lbnorm export lbnorm-out --format table --out board.csv\n"
            "  lbnorm export lbnorm-out --format open-llm-leaderboard "
            "--out train-00000-of-00001.parquet\n"
            "  lbnorm export lbnorm-out --format open-llm-leaderboard --out contents.csv\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    export.add_argument("out", metavar="OUT", help="an lbnorm output directory")
    export.add_argument(
        "--format",
        required=True,
        choices=["table", "open-llm-leaderboard"],
        help="the table to write",
    )
    export.add_argument(
        "--out",
        dest="file",
        required=True,
        metavar="FILE",
        help="the file to write (Parquet; CSV if it ends in .csv)",
    )
    export.add_argument(
        "--skip-incomplete",
        action="store_true",
        help="leave out variants without all six scores (default: refuse)",
    )
    export.add_argument(
        "--unknown-precision",
        metavar="PRECISION",
        help="the Precision of variants whose input gave none (default: refuse them)",
    )
    export.set_defaults(handler=_cmd_export, writes=("file",))


def _register_explain(commands: Commands) -> None:
    explain = commands.add_parser(
        "explain",
        help="show how one model's scores, average and rank were computed",
        description=(
            "For one variant, show each subtask's raw score and where it was read, its "
            "lower bound and where that came from, its normalized and clipped value, "
            "each benchmark's rule (with the sample sizes a pooled one used) and "
            "score, the average with its weights, and the rank with its interval. "
            "Reads the output directory alone. MODEL is a model name or a unique part "
            "of one; a model with several variants needs --precision, --revision or "
            "--chat-template."
        ),
        epilog=(
            "examples:\n"
            "  lbnorm explain lbnorm-out Qwen/Qwen2.5-72B-Instruct\n"
            "  lbnorm explain lbnorm-out Matter-0.2-7B-DPO gpqa --json\n"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    explain.add_argument("out", metavar="OUT", help="an lbnorm output directory")
    explain.add_argument("model", metavar="MODEL")
    explain.add_argument(
        "benchmark",
        metavar="BENCHMARK",
        nargs="?",
        help="only this benchmark (any case; a unique prefix will do)",
    )
    explain.add_argument("--precision", help="the variant's precision, e.g. bfloat16")
    explain.add_argument("--revision", help="the variant's revision (a prefix will do)")
    explain.add_argument(
        "--chat-template",
        choices=["yes", "no"],
        help="the variant with or without a chat template",
    )
    explain.add_argument("--json", action="store_true", help="print JSON")
    add_digits(explain, default=4)
    explain.set_defaults(handler=_cmd_explain)


def _cmd_export(args: argparse.Namespace) -> int:
    from lbnorm.faces.board_table import board_table, write_board_table
    from lbnorm.faces.export import (
        ExportOptions,
        export_table,
        is_export,
        write_export,
    )
    from lbnorm.output.transaction import check_file

    check_parent(args.file)  # before the work, not after
    is_ours = None if args.format == "table" else is_export  # (a table: as written)
    check_file(args.file, option="--out", is_ours=is_ours, outs=(args.out,))
    if args.format == "table":  # its CSV header is the suite's: checked when written
        if args.skip_incomplete or args.unknown_precision is not None:
            msg = (
                "--skip-incomplete and --unknown-precision shape the open-llm-leaderboard "
                "table; --format table presents the leaderboard as its suite says.\n"
                "Hint: leave them out, or use --format open-llm-leaderboard."
            )
            raise OptionsError(msg)
        table = board_table(args.out)
        write_board_table(table, args.file)
    else:
        table = export_table(args.out, options=options_of(ExportOptions, args))
        write_export(table, args.file)
    print(f"wrote {args.file} ({table.num_rows:,} rows, {table.num_columns} columns)")
    return ExitCode.OK


def _cmd_explain(args: argparse.Namespace) -> int:
    from lbnorm.analysis.explain import explain_variant
    from lbnorm.faces.explain import (
        choose_variant,
        explanation_json,
        format_explanation,
    )
    from lbnorm.output.reader import Output

    output = Output.open(args.out, "leaderboard")
    board = output.frame(
        "leaderboard", columns=["model", "precision", "revision", "chat_template"]
    )
    variant = choose_variant(
        board,
        args.model,
        precision=args.precision,
        revision=args.revision,
        chat_template=None
        if args.chat_template is None
        else args.chat_template == "yes",
    )
    explanation = explain_variant(output, variant, benchmark=args.benchmark)
    if args.json:
        sys.stdout.write(explanation_json(explanation) + "\n")
    else:
        print(format_explanation(explanation, digits=args.digits))
    return ExitCode.OK
