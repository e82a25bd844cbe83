"""``lbnorm arena`` composed: battle files -> ratings -> an output directory.

:func:`rate_battles` reads battles (:func:`lbnorm.ratings.battles.read_battles`,
with the ``where`` filters), rates them
(:func:`lbnorm.ratings.fit.compute_ratings`) and, given ``out``, writes
``ratings.parquet``, ``win_rates.parquet`` and ``manifest.json`` through one
:class:`~lbnorm.output.transaction.Transaction` (staging, lock, one swap), so an
earlier output is replaced whole or not at all. The manifest's ``kind`` is
``"ratings"``; it records the options whole (:meth:`ArenaOptions.to_manifest`),
every input file with its sha256 and rows read and filtered out, each table's
rows and sha256, and the warnings. Nothing is printed here (the summary is
:func:`lbnorm.faces.ratings_view.format_arena_summary`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lbnorm._runtime import check_cancelled, entry_point
from lbnorm.core.errors import InputError, OptionsError
from lbnorm.core.files import sha256_file
from lbnorm.core.manifest import OutputKind
from lbnorm.core.version import lbnorm_version
from lbnorm.ratings.battles import BattleFile, Battles, read_battles
from lbnorm.ratings.categories import (
    UTC,
    arena_table,
    category_rows,
    daily_vote_cap,
    observed_pairs,
    shown_models,
    time_zone,
)
from lbnorm.ratings.fit import (
    Ratings,
    compute_ratings,
    ratings_table,
    style_tables,
    win_rates_table,
)
from lbnorm.ratings.options import RatingOptions
from lbnorm.ratings.style import STYLE_FIELDS
from lbnorm.ratings.where import parse_where

__all__ = ["ArenaOptions", "ArenaResult", "rate_battles"]

#: What the manifest of a ratings output says it is.
KIND: OutputKind = "ratings"
#: The reader's warnings about battle order: they matter to online Elo only.
_ORDER_WARNINGS = frozenset({"no_tstamp", "null_tstamp", "unordered"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ArenaOptions:
    """Every choice about an ``lbnorm arena`` run; the manifest records it whole.

    Attributes:
        rating: How to rate (method, ties, L2 penalty, anchor, bootstrap, seed).
        where: Filter conditions on the battles, all of which a row must meet
            (see :func:`lbnorm.ratings.where.parse_where`).
        anony_only: Keep anonymous battles only (``anony``), as the Arena does.
        dedup: Keep battles FastChat's de-duplication sampled
            (``dedup_tag.sampled``).
        daily_vote_per_user: Keep each judge's first N votes of each day,
            within each category and, with ``ties="drop"``, counting decisive
            votes only (FastChat's order).
        vote_day_tz: The time zone whose calendar days the cap counts (an IANA
            name; ``UTC`` by default, FastChat's is its machine's local zone).
        categories: ``(name, condition)`` pairs: each category rated on the
            battles meeting its condition (``categories.parquet``).
        min_battles: Display filter: show models with more battles than this.
        hide: Display filter: models not shown (deprecated ones).
        arena_tables: Write ``leaderboard.parquet`` (the Arena's table shape,
            shown models) and ``pairwise_observed.parquet``.

    Examples:
        >>> ArenaOptions(where=("anony",)).to_manifest()["where"]
        ['anony']
        >>> ArenaOptions(where=("language ==",))
        Traceback (most recent call last):
        ...
        lbnorm.core.errors.WhereSyntaxError: --where 'language ==': expected one value after the operator.
        Hint: write COLUMN, not COLUMN, COLUMN OP VALUE with OP one of = != < <= > >= (numbers for numeric columns, true/false for flags, YYYY-MM-DD for dates), COLUMN ~ REGEX, or COLUMN in (V1, V2); quote text with spaces: language = 'English'.
    """

    rating: RatingOptions = field(default_factory=RatingOptions)
    where: tuple[str, ...] = ()
    anony_only: bool = False
    dedup: bool = False
    daily_vote_per_user: int | None = None
    vote_day_tz: str = UTC
    categories: tuple[tuple[str, str], ...] = ()
    min_battles: int = 0
    hide: tuple[str, ...] = ()
    arena_tables: bool = False

    def __post_init__(self) -> None:
        for condition in self.where:  # a usage error before any file is read
            parse_where(condition)
        for name, condition in self.categories:
            if not name.strip() or name == "overall":
                msg = f"--category {name}={condition}: a category needs a name other than 'overall'.\nHint: write --category NAME=CONDITION, e.g. --category math=category_tag.math_v0.1.math."
                raise OptionsError(msg)
            parse_where(condition)
        names = [name for name, _ in self.categories]
        if len(set(names)) < len(names):
            msg = f"--category: the names {sorted({n for n in names if names.count(n) > 1})} are given twice.\nHint: give each category its own name."
            raise OptionsError(msg)
        cap: object = self.daily_vote_per_user  # typed int | None; checked as given
        if cap is not None and (
            isinstance(cap, bool) or not isinstance(cap, int) or cap < 1
        ):
            msg = f"--daily-vote-per-user must be a whole number >= 1, got {cap!r}.\nHint: the Arena's capped view keeps 5 votes per judge and day."
            raise OptionsError(msg)
        if self.vote_day_tz != UTC:
            if cap is None:
                msg = f"--vote-day-tz {self.vote_day_tz}: sets the day of --daily-vote-per-user, which is not given.\nHint: give both (--daily-vote-per-user 5 --vote-day-tz America/Los_Angeles), or leave --vote-day-tz out."
                raise OptionsError(msg)
            time_zone(self.vote_day_tz)
        if isinstance(self.min_battles, bool) or self.min_battles < 0:
            msg = f"--min-battles must be a whole number >= 0, got {self.min_battles!r}.\nHint: the Arena's category views show models with more than 300 battles."
            raise OptionsError(msg)

    @property
    def conditions(self) -> tuple[str, ...]:
        """Every filter: ``--where`` and the shortcuts (``--anony-only``, ``--dedup``)."""
        return (
            self.where
            + (("anony",) if self.anony_only else ())
            + (("dedup_tag.sampled",) if self.dedup else ())
        )

    def to_manifest(self) -> dict[str, Any]:
        """Every option, JSON-ready (the anchor as ``[model, rating]`` or null)."""
        # through JSON: the tuples become the lists the manifest holds
        options: dict[str, Any] = json.loads(json.dumps(asdict(self)))
        default = json.loads(json.dumps(asdict(ArenaOptions())))
        # style control is recorded only when on, the board's options only when
        # not at their defaults: older records stay as they were
        if not options["rating"]["style_control"]:
            del options["rating"]["style_control"]
        for name in options.keys() - {"rating", "where"}:
            if options[name] == default[name]:
                del options[name]
        return options


@dataclass(frozen=True, slots=True, kw_only=True)
class ArenaResult:
    """What ``lbnorm arena`` computed (and wrote, given an output directory).

    Attributes:
        battles: The battles read.
        ratings: The ratings computed.
        tables: The output's tables by name, in order: ``ratings``
            (:data:`lbnorm.core.schemas.RATINGS`, best first), ``win_rates``,
            with style control ``style_coefficients`` and ``style_control``
            (rank with and without it), then the board's.
        inputs: The manifest's record of each input file.
        warnings: ``(code, message)`` of the reader's and the fit's warnings.
        out: The output directory written, or None.
        n_over_cap: Battles the daily vote cap left out of the overall ratings.
        unrated: ``(category, reason)`` of each ``--category`` that could not
            be rated (its block is left out of ``categories.parquet``).
    """

    battles: Battles
    ratings: Ratings
    tables: dict[str, pa.Table]
    inputs: tuple[dict[str, Any], ...]
    warnings: tuple[tuple[str, str], ...]
    out: Path | None = None
    n_over_cap: int = 0
    unrated: tuple[tuple[str, str], ...] = ()


@entry_point  # (Ctrl-C and SIGTERM held for the call)
def rate_battles(
    paths: Sequence[str | Path],
    *,
    options: ArenaOptions | None = None,
    out: str | Path | None = None,
    created_at: str | None = None,
) -> ArenaResult:
    """Read battle files, rate the models and, given `out`, write the output.

    Args:
        paths: Battle files (CSV, JSONL, Parquet or a JSON array; either shape).
        options: How to filter and rate; defaults to :class:`ArenaOptions`'s.
        out: Output directory, replaced atomically; None writes nothing.
        created_at: Creation time for the manifest (ISO 8601); defaults to
            ``SOURCE_DATE_EPOCH`` if set, else now.

    Returns:
        The battles, ratings and tables.

    Raises:
        InputError: A battle file is unreadable or malformed (named, with the
            row), or the battles do not determine the ratings
            (:class:`~lbnorm.core.errors.RatingsNotIdentifiableError`).
        RatingOptionsError: Options that do not fit the battles (online Elo on
            counts, a bootstrap too big for memory).
        OutputError: `out` cannot be written, or holds a leaderboard. On any
            error nothing is written and an earlier output stays as it was.
    """
    options = options or ArenaOptions()
    if out is not None:
        # before the work, not after
        from lbnorm.output.transaction import check_target

        check_target(Path(out), KIND)
    fields = STYLE_FIELDS if options.rating.style_control else ()
    read = read_battles(
        paths,
        where=options.conditions,
        fields=fields,
        flags=dict(options.categories),
        judges=options.daily_vote_per_user is not None,
    )
    battles = _capped(read, options)
    ratings = compute_ratings(battles, options.rating)
    inputs = tuple(_input_record(file) for file in battles.files)
    board, unrated, category_warnings = _board_tables(read, battles, ratings, options)
    warnings = _warnings(battles, ratings, options) + category_warnings
    result = ArenaResult(
        battles=battles,
        ratings=ratings,
        tables=_stamped_tables(ratings, board, inputs, options),
        inputs=inputs,
        warnings=warnings,
        n_over_cap=read.n_battles - battles.n_battles,
        unrated=unrated,
    )
    if out is None:
        return result
    from lbnorm.output.transaction import Transaction  # the module that writes files
    from lbnorm.pipeline import created_at_from_environment

    with Transaction(out, kind=KIND) as transaction:
        for name, table in result.tables.items():
            transaction.write_table(f"{name}.parquet", table)
        transaction.manifest |= _manifest(result, options)
        written = transaction.commit(
            created_at=created_at or created_at_from_environment()
        )
    return replace(result, out=written)


def _warnings(
    battles: Battles, ratings: Ratings, options: ArenaOptions
) -> tuple[tuple[str, str], ...]:
    """``(code, message)`` of the reader's warnings, then the fit's.

    The reader's warnings about battle order are kept for online Elo only: the
    other methods do not depend on the order.
    """
    return tuple(
        (warning.code, warning.message)
        for warning in battles.warnings
        if options.rating.method == "elo" or warning.code not in _ORDER_WARNINGS
    ) + tuple((warning.code, warning.message) for warning in ratings.warnings)


def _stamped_tables(
    ratings: Ratings,
    board: dict[str, pa.Table],
    inputs: tuple[dict[str, Any], ...],
    options: ArenaOptions,
) -> dict[str, pa.Table]:
    """The output's tables in order, each stamped with where it came from.

    The ratings, win rates, style and board tables, each carrying lbnorm's
    version, the options and the inputs (path, sha256, rows) as Parquet
    metadata, so a table copied away from its manifest still says how it was made.
    """
    provenance = {
        "lbnorm.version": lbnorm_version(),
        "lbnorm.kind": KIND,
        "lbnorm.options": json.dumps(options.to_manifest(), sort_keys=True),
        "lbnorm.inputs": json.dumps(
            [{k: i[k] for k in ("path", "sha256", "rows")} for i in inputs],
            sort_keys=True,
        ),
    }
    tables = {
        "ratings": ratings_table(ratings),
        "win_rates": win_rates_table(ratings),
        **style_tables(ratings),
        **board,
    }
    return {
        name: table.replace_schema_metadata({**provenance, "lbnorm.table": name})
        for name, table in tables.items()
    }


def _manifest(result: ArenaResult, options: ArenaOptions) -> dict[str, Any]:
    """The ratings output's manifest: the options, inputs, counts and warnings of `result`.

    What ``manifest.json`` records besides the tables (the writer adds their
    sizes and hashes): enough to tell how the ratings were computed and from what.
    """
    battles = result.battles
    counts = {
        "models": len(battles.models),
        "battles": battles.n_battles,
        "rows_read": battles.n_rows_read,
        "rows_filtered_out": battles.n_filtered_out,
        "bootstrap_rounds": options.rating.bootstrap,
    }
    if options.daily_vote_per_user is not None:
        counts["over_daily_vote_cap"] = result.n_over_cap
    manifest = {  # the transaction adds tool, version and the tables
        "kind": KIND,
        "options": options.to_manifest(),
        "inputs": list(result.inputs),
        "counts": counts,
    }
    if result.unrated:
        unrated = [{"category": name, "reason": why} for name, why in result.unrated]
        manifest["categories_not_rated"] = unrated
    warnings = [{"code": code, "message": text} for code, text in result.warnings]
    return manifest | {"warnings": warnings}


def _capped(battles: Battles, options: ArenaOptions) -> Battles:
    """The battles under the daily vote cap, counted as FastChat counts them.

    FastChat caps after ``exclude_tie``: with ``--ties drop`` only decisive votes
    count towards a judge's daily N, and the ties (not fitted either way) stay
    in the records (``n_ties``).
    """
    cap = options.daily_vote_per_user
    if cap is None:
        return battles
    if battles.tstamp is None or battles.judge is None:
        msg = "--daily-vote-per-user needs a tstamp and a judge per battle.\nHint: give Arena's clean_battle files, which have both."
        raise InputError(msg)
    counted = (
        battles.outcome != 1
        if options.rating.ties == "drop"
        else np.ones(len(battles.outcome), dtype=np.bool_)
    )
    keep = ~counted
    keep[counted] = daily_vote_cap(
        battles.judge[counted], battles.tstamp[counted], cap, zone=options.vote_day_tz
    )
    return battles.subset(keep)


def _played(battles: Battles) -> Battles:
    """The battles with only the models that play in them (codes renumbered)."""
    present = np.unique(np.concatenate([battles.model_a, battles.model_b]))
    codes = np.full(len(battles.models), -1, dtype=np.int32)
    codes[present] = np.arange(len(present), dtype=np.int32)
    return replace(
        battles,
        models=battles.models[present],
        model_a=codes[battles.model_a],
        model_b=codes[battles.model_b],
    )


def _board_tables(
    read: Battles, battles: Battles, ratings: Ratings, options: ArenaOptions
) -> tuple[
    dict[str, pa.Table], tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]
]:
    """The Arena's tables (``--arena-tables``) and the categories (``--category``).

    Each category is `read`'s battles meeting its condition, then capped (as
    FastChat caps within a category). A category that cannot be rated (no
    battles, ratings the battles do not determine, the anchor absent) is left
    out and named; the others are written.

    Returns:
        The tables, the ``(category, reason)`` of those not rated, and the
        categories' warnings (``(code, message)``, the message naming the
        category).
    """
    tables: dict[str, pa.Table] = {}
    if options.arena_tables:
        shown = shown_models(
            ratings, min_battles=options.min_battles, hidden=options.hide
        )
        tables["leaderboard"] = arena_table(ratings, shown)
        tables["pairwise_observed"] = observed_pairs(battles)
    unrated: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    if options.categories:
        rows = partial(
            category_rows,
            overall=ratings,
            min_battles=options.min_battles,
            hidden=options.hide,
        )
        blocks = [rows("overall", ratings)]
        for name, _ in options.categories:
            check_cancelled()  # a cancelled run stops between two categories
            try:
                category = _rate_category(read, name, options)
            except InputError as exc:  # this category only: the others go on
                reason, _, _ = str(exc).partition("\nHint:")
                unrated.append((name, reason))
                message = f"--category {name}: not rated, left out of categories.parquet: {reason}"
                warnings.append(("category_not_rated", message))
                continue
            warnings += [
                (warning.code, f"--category {name}: {warning.message}")
                for warning in category.warnings
            ]
            blocks.append(rows(name, category))
        tables["categories"] = pa.concat_tables(blocks)
    return tables, tuple(unrated), tuple(warnings)


def _rate_category(read: Battles, name: str, options: ArenaOptions) -> Ratings:
    """One category's ratings: its battles, capped, among the models that play in them."""
    subset = _capped(read.subset(read.flags[name]), options)
    if not subset.n_battles:
        msg = "no battles meet its condition.\nHint: check the condition against the files' values."
        raise InputError(msg)
    return compute_ratings(_played(subset), options.rating)


def _input_record(file: BattleFile) -> dict[str, Any]:
    """One input file as the manifest records it: path (as given and absolute), shape, sha256, rows."""
    path = Path(file.path)
    return {
        "path": file.path,
        "resolved": str(Path.cwd() / path),  # as given, made absolute
        "format": file.format,
        "shape": file.shape,
        "sha256": sha256_file(path),
        "bytes": path.stat().st_size,
        "rows": file.n_rows_kept,
        "rows_read": file.n_rows_read,
        "rows_filtered_out": file.n_rows_read - file.n_rows_kept,
    }
