"""``lbnorm arena``: Chatbot Arena battles to ratings with intervals; and the faces of a ratings output.

Every option of ``arena`` is defined here, once, and becomes one
:class:`~lbnorm.arena.ArenaOptions` (a :class:`~lbnorm.ratings.options.RatingOptions`
and the filters). ``show`` and ``diff`` call :func:`show_ratings` and
:func:`diff_ratings_outputs` when the output they opened
(:class:`lbnorm.output.reader.Output`) holds ratings.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from lbnorm.cli.arguments import Commands, Whole, check_parent, options_of, print_shown
from lbnorm.core.errors import ExitCode, OptionsError
from lbnorm.core.options import MOST_GIB

if TYPE_CHECKING:
    from lbnorm.output.reader import Output

__all__ = ["diff_ratings_outputs", "register", "show_ratings"]

_EPILOG = """\
exit codes: 0 done; 2 usage error (options, --where, a bootstrap too big for
  memory); 4 bad battles (named with the row) or ratings the battles do not
  determine; 6 the output cannot be written (nothing is written on any error)

examples:
  lbnorm arena clean_battle_20240814.json --out arena-out --bootstrap 1000 \\
      --anchor mixtral-8x7b-instruct-v0.1=1114 --where anony
  lbnorm arena battles.parquet --out arena-2023 --l2 1 --where "language = 'English'"
  lbnorm arena battles.csv --out elo-out --method elo
  lbnorm show arena-out --top 20 --model claude
  lbnorm query arena-out "SELECT * FROM win_rates WHERE model_a = 'gpt-4'"
"""


def register(commands: Commands) -> None:
    """Register ``arena`` and all its options."""
    arena = commands.add_parser(
        "arena",
        help="rate models from pairwise battles (Chatbot Arena): Bradley-Terry or Elo",
        description=(
            "Read pairwise battles (model_a, model_b, winner or win; or counts "
            "model_a, model_b, wins_a, wins_b, ties) from CSV, JSONL, Parquet or "
            "JSON-array files (Arena's clean_battle_<date>.json), rate the models as "
            "Chatbot Arena does (FastChat's rating_systems.py), and write "
            "ratings.parquet, win_rates.parquet (the predicted win rate of every "
            "pair) and manifest.json to --out, replaced atomically; then print the "
            "top models. See docs/arena.md."
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    arena.add_argument("battles", nargs="+", metavar="BATTLES", help="battle files")
    arena.add_argument(
        "--out", required=True, metavar="DIR", help="output directory (replaced whole)"
    )
    _add_rating_options(arena)
    _add_battle_filters(arena)
    arena.add_argument(
        "--arena-tables",
        action="store_true",
        help="also write leaderboard.parquet (the Arena's own table shape: rating, variance, rating_q975, rating_q025, num_battles, final_ranking) and pairwise_observed.parquet (observed win fractions and battle counts)",
    )
    arena.add_argument(
        "--top",
        action=Whole,
        what="models to print",
        default=10,
        help="models to print (default: %(default)s)",
    )
    arena.add_argument("--quiet", action="store_true", help="print nothing on success")
    arena.set_defaults(handler=_cmd_arena, writes=("out",))


def _add_rating_options(arena: argparse.ArgumentParser) -> None:
    """The options of the fit itself: method, ties, penalty, style, anchor, bootstrap.

    They become :class:`lbnorm.ratings.options.RatingOptions`.
    """
    arena.add_argument(
        "--method",
        choices=("bt", "elo"),
        default="bt",
        help="bt: Bradley-Terry maximum likelihood (the Arena's leaderboard); elo: online Elo, K = 4, in tstamp order (default: %(default)s)",
    )
    arena.add_argument(
        "--ties",
        choices=("half", "drop"),
        default="half",
        help="half: a tie is half a win for each side; drop: ties are left out (default: %(default)s)",
    )
    arena.add_argument(
        "--l2",
        type=float,
        metavar="C",
        help="L2 penalty: scikit-learn's LogisticRegression(C) on one row per battle (Bradley-Terry only); --l2 1 --ties drop reproduces the 2023-05 notebook, --l2 2C FastChat's later doubled design; keeps models that never lost finite",
    )
    arena.add_argument(
        "--style-control",
        action="store_true",
        help="FastChat's style control: Bradley-Terry with the answers' length, headers, lists and bold text (conv_metadata) as covariates, L2 on all parameters (--l2 2, FastChat's, unless given); writes style_coefficients.parquet and style_control.parquet (rank with and without it)",
    )
    arena.add_argument(
        "--anchor",
        metavar="MODEL=RATING",
        help="shift the ratings so MODEL has RATING (the Arena: mixtral-8x7b-instruct-v0.1=1114)",
    )
    arena.add_argument(
        "--bootstrap",
        type=int,
        default=0,
        metavar="N",
        help="bootstrap rounds for 95%% intervals and the rank (UB); the Arena uses 1000 (default: %(default)s, no intervals)",
    )
    arena.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="S",
        help="seed of the bootstrap (default: %(default)s)",
    )
    arena.add_argument(
        "--max-memory",
        type=float,
        default=4.0,
        metavar="GIB",
        help="refuse a bootstrap estimated to need more memory than this, before it starts (default: %(default)g GiB)",
    )


def _add_battle_filters(arena: argparse.ArgumentParser) -> None:
    """The options choosing which battles are rated and which models are shown.

    ``--where``, ``--anony-only``, ``--dedup`` and the daily vote cap pick the
    battles (:class:`lbnorm.arena.ArenaOptions`); ``--category`` rates subsets;
    ``--min-battles`` and ``--hide`` only filter the Arena-shaped tables.
    """
    arena.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="COND",
        help="keep battles meeting COND (repeatable; all must hold): anony, not anony, language = 'English', tstamp >= 1700000000, language in (English, Chinese)",
    )
    arena.add_argument(
        "--anony-only",
        action="store_true",
        help="keep anonymous battles only (the anony column), as the Arena's leaderboard",
    )
    arena.add_argument(
        "--dedup",
        action="store_true",
        help="keep the battles FastChat's de-duplication sampled (dedup_tag.sampled)",
    )
    arena.add_argument(
        "--daily-vote-per-user",
        type=int,
        metavar="N",
        help="keep each judge's first N votes of each day, earliest first (needs judge and tstamp); as FastChat, within each category and, with --ties drop, counting decisive votes only",
    )
    arena.add_argument(
        "--vote-day-tz",
        default="UTC",
        metavar="ZONE",
        help="the time zone whose calendar days --daily-vote-per-user counts, an IANA name (FastChat uses its machine's local zone; the Arena's: America/Los_Angeles) (default: %(default)s)",
    )
    arena.add_argument(
        "--category",
        action="append",
        default=[],
        metavar="NAME=CONDITION",
        help="also rate the battles meeting CONDITION as category NAME (repeatable): categories.parquet, with each model's rank delta against overall",
    )
    arena.add_argument(
        "--min-battles",
        type=int,
        default=0,
        metavar="N",
        help="display filter for the Arena-shaped tables: show models with more than N battles (the Arena's categories: 300)",
    )
    arena.add_argument(
        "--hide",
        action="append",
        default=[],
        metavar="MODEL",
        help="display filter: leave MODEL out of the Arena-shaped tables (deprecated models; repeatable); the rank (UB) is recomputed over those shown",
    )


def _cmd_arena(args: argparse.Namespace) -> int:
    """Read, rate, write, summarise."""
    from lbnorm.arena import ArenaOptions, rate_battles
    from lbnorm.faces.ratings_view import format_arena_summary
    from lbnorm.faces.terminal import printable
    from lbnorm.ratings.options import RatingOptions, parse_anchor

    started = time.perf_counter()
    anchor = parse_anchor(args.anchor) if args.anchor is not None else None
    rating = options_of(
        RatingOptions, args, anchor=anchor, max_bootstrap_bytes=_bytes(args.max_memory)
    )
    options = options_of(
        ArenaOptions,
        args,
        rating=rating,
        categories=tuple(_category(text) for text in args.category),
    )
    check_parent(str(Path(args.out)))
    result = rate_battles(args.battles, options=options, out=args.out)
    if args.quiet:
        return ExitCode.OK
    for code, message in result.warnings:
        print(f"lbnorm: warning: {code}: {printable(message)}", file=sys.stderr)
    print(
        format_arena_summary(
            result,
            out=args.out,
            top=args.top,
            seconds=time.perf_counter() - started,
        )
    )
    return ExitCode.OK


def _category(text: str) -> tuple[str, str]:
    name, equals, condition = text.partition("=")
    if not equals or not name.strip() or not condition.strip():
        msg = f"--category {text!r} is not NAME=CONDITION.\nHint: e.g. --category math=category_tag.math_v0.1.math or --category english=\"language = 'English'\"."
        raise OptionsError(msg)
    return name.strip(), condition.strip()


def _bytes(gib: float) -> int:
    if not 0 < gib <= MOST_GIB:
        msg = f"--max-memory must be a positive number of GiB, got {gib:g}.\nHint: e.g. --max-memory 8 (at most {MOST_GIB:,.0f})."
        raise OptionsError(msg)
    return int(gib * 2**30)


# --- the faces of a ratings output (dispatched from show, diff and report) -------------------


def show_ratings(args: argparse.Namespace, output: Output) -> int:
    """``lbnorm show`` on a ratings output: the top N ratings, filtered."""
    from lbnorm.faces.ratings_view import format_ratings, select_ratings
    from lbnorm.ratings.where import parse_where

    _refuse_leaderboard_options(args)
    ratings = output.frame("ratings")
    filters = [parse_where(text) for text in args.where]
    selected = select_ratings(ratings, filters=filters, model=args.model)
    shown = selected.head(args.top)
    print_shown(args, shown, selected, ratings, what="models", by="rating")
    if len(shown):
        print(
            format_ratings(
                shown,
                columns=args.columns.split(",") if args.columns else None,
                digits=args.digits,
            )
        )
    return ExitCode.OK


def diff_ratings_outputs(
    args: argparse.Namespace, old: Output | str, new: Output | str
) -> int:
    """``lbnorm diff`` on two ratings outputs: rating and rank moves, Kendall tau."""
    from lbnorm.analysis.ratings_diff import diff_ratings
    from lbnorm.analysis.render import format_ratings_diff
    from lbnorm.cli.arguments import emit_diff
    from lbnorm.faces.terminal import printable

    diff = diff_ratings(old, new, moved_places=args.moved, top=args.top or (5, 10, 20))
    text = printable(
        format_ratings_diff(diff, largest=args.largest), keep_newlines=True
    )
    return emit_diff(args, diff.tables(), text, stem="diff_ratings")


#: ``show``'s options that apply to a leaderboard only, by their attribute.
_LEADERBOARD_OPTIONS = {
    "benchmark": "--benchmark",
    "precision": "--precision",
    "rank_within": "--rank-within",
    "exclude_flagged": "--exclude-flagged",
    "metadata": "--metadata",
}


def _refuse_leaderboard_options(args: argparse.Namespace) -> None:
    given = [flag for name, flag in _LEADERBOARD_OPTIONS.items() if getattr(args, name)]
    if given:
        msg = (
            f"{args.out}: holds pairwise ratings; {', '.join(given)} appl"
            f"{'ies' if len(given) == 1 else 'y'} to leaderboards only.\n"
            "Hint: for ratings, `lbnorm show` takes --top, --model, --where "
            "(e.g. n_battles>=100), --columns and --digits."
        )
        raise OptionsError(msg)
