"""``lbnorm arena`` composed: battle files -> ratings -> an output directory.

:func:`rate_battles` reads battles (:func:`lbnorm.ratings.battles.read_battles`,
with the ``where`` filters), rates them
(:func:`lbnorm.ratings.fit.compute_ratings`) and, given ``out``, writes
``ratings.parquet``, ``win_rates.parquet`` and ``manifest.json`` through the
writer's staging, lock and swap (:func:`lbnorm.output.writer.write_tables`), so an
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
from pathlib import Path
from typing import Any

import pyarrow as pa

from lbnorm.core.files import sha256_file
from lbnorm.core.version import lbnorm_version
from lbnorm.ratings.battles import Battles, read_battles
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
KIND = "ratings"
#: The reader's warnings about battle order: they matter to online Elo only.
_ORDER_WARNINGS = frozenset({"no_tstamp", "null_tstamp", "unordered"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ArenaOptions:
    """Every choice about an ``lbnorm arena`` run; the manifest records it whole.

    Attributes:
        rating: How to rate (method, ties, L2 penalty, anchor, bootstrap, seed).
        where: Filter conditions on the battles, all of which a row must meet
            (see :func:`lbnorm.ratings.where.parse_where`).

    Examples:
        >>> ArenaOptions(where=("anony",)).to_manifest()["where"]
        ['anony']
        >>> ArenaOptions(where=("language ==",))
        Traceback (most recent call last):
        ...
        lbnorm.core.errors.WhereSyntaxError: --where 'language ==': expected one value after the operator.
        Hint: write COLUMN, not COLUMN, COLUMN OP VALUE with OP one of = != < <= > >=, or COLUMN in (V1, V2); quote text with spaces: language = 'English'.
    """

    rating: RatingOptions = field(default_factory=RatingOptions)
    where: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for condition in self.where:  # a usage error before any file is read
            parse_where(condition)

    def to_manifest(self) -> dict[str, Any]:
        """Every option, JSON-ready (the anchor as ``[model, rating]`` or null)."""
        options = asdict(self)
        rating = options["rating"]
        rating["anchor"] = list(self.rating.anchor) if self.rating.anchor else None
        if not rating[
            "style_control"
        ]:  # recorded only when on: older records stay as they were
            del rating["style_control"]
        options["where"] = list(self.where)
        return options


@dataclass(frozen=True, slots=True, kw_only=True)
class ArenaResult:
    """What ``lbnorm arena`` computed (and wrote, given an output directory).

    Attributes:
        battles: The battles read.
        ratings: The ratings computed.
        ratings_table: :data:`lbnorm.core.schemas.RATINGS`, best first.
        win_rates_table: :data:`lbnorm.core.schemas.WIN_RATES`.
        inputs: The manifest's record of each input file.
        warnings: ``(code, message)`` of the reader's and the fit's warnings.
        out: The output directory written, or None.
        style_tables: With style control, ``style_coefficients`` and
            ``style_control`` (rank with and without it).
    """

    battles: Battles
    ratings: Ratings
    ratings_table: pa.Table
    win_rates_table: pa.Table
    inputs: tuple[dict[str, Any], ...]
    warnings: tuple[tuple[str, str], ...]
    out: Path | None = None
    style_tables: dict[str, pa.Table] = field(default_factory=dict)


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
        from lbnorm.output.writer import check_output_kind  # before the work, not after

        check_output_kind(Path(out), KIND)
    fields = STYLE_FIELDS if options.rating.style_control else ()
    battles = read_battles(paths, where=options.where, fields=fields)
    ratings = compute_ratings(battles, options.rating)
    inputs = tuple(_input_record(battles, index) for index in range(len(battles.files)))
    warnings = tuple(
        (warning.code, warning.message)
        for warning in battles.warnings
        if options.rating.method == "elo" or warning.code not in _ORDER_WARNINGS
    ) + tuple((warning.code, warning.message) for warning in ratings.warnings)
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
    }
    tables = {
        name: table.replace_schema_metadata({**provenance, "lbnorm.table": name})
        for name, table in tables.items()
    }
    result = ArenaResult(
        battles=battles,
        ratings=ratings,
        ratings_table=tables["ratings"],
        win_rates_table=tables["win_rates"],
        inputs=inputs,
        warnings=warnings,
        style_tables={
            name: table
            for name, table in tables.items()
            if name in ("style_coefficients", "style_control")
        },
    )
    if out is None:
        return result
    from lbnorm.output.writer import write_tables  # the module that writes files

    manifest = {
        "tool": "lbnorm",
        "kind": KIND,
        "version": provenance["lbnorm.version"],
        "options": options.to_manifest(),
        "inputs": list(inputs),
        "counts": {
            "models": len(battles.models),
            "battles": battles.n_battles,
            "rows_read": battles.n_rows_read,
            "rows_filtered_out": battles.n_filtered_out,
            "bootstrap_rounds": options.rating.bootstrap,
        },
        "warnings": [{"code": code, "message": text} for code, text in warnings],
    }
    written = write_tables(Path(out), tables, manifest, created_at=created_at)
    return replace(result, out=written)


def _input_record(battles: Battles, index: int) -> dict[str, Any]:
    """One input file as the manifest records it: path, shape, sha256, rows."""
    file = battles.files[index]
    path = Path(file.path)
    return {
        "path": file.path,
        "format": file.format,
        "shape": file.shape,
        "sha256": sha256_file(path),
        "bytes": path.stat().st_size,
        "rows": file.n_rows_kept,
        "rows_read": file.n_rows_read,
        "rows_filtered_out": file.n_rows_read - file.n_rows_kept,
    }
