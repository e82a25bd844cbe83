"""Battles as a leaderboard benchmark: a suite's ``bradley-terry`` benchmarks, scored.

When the suite has a pairwise benchmark (``aggregation = "bradley-terry"``, see
:mod:`lbnorm.suites`), ``lbnorm run`` takes battle files beside results files.
**A battle file is recognized** among the files named on the command line (not
those found inside a directory) by its content
(:func:`lbnorm.ratings.battle_files.is_battles_file`): a CSV, JSONL or Parquet table
with ``model_a`` and ``model_b`` columns (either shape: one row per battle with
``winner``/``win``, or counts ``wins_a, wins_b, ties``), or a ``.json`` file
holding a JSON array (Arena's ``clean_battle_<date>.json``; a results file is
one JSON object). All battle files are pooled.

Each pairwise benchmark's raw score for a model is a fraction in [0, 1]
(Bradley-Terry, ties half, no penalty): its expected win rate against the field
(:func:`lbnorm.ratings.pairwise_scores.score_against_field`, the default), its
chance of beating the reference model (``score_against_reference``), or of
beating a fixed rating on a scale an anchor pins (``score_against_rating``). The scores enter the pipeline as one
:class:`~lbnorm.core.schemas.Batch` of long-format rows (model, benchmark, subtask,
raw_score, n_samples = the model's battles), normalized and averaged like any
other. A model's pairwise score goes to every variant (precision, revision,
chat template) of that model in the other inputs; a model only the battles
have gets one variant with the keys unknown.

Arena names differ from the results' (``gpt-4`` vs ``openai/gpt-4``): the
``model_map`` option (``--model-map FILE``, a table ``arena_name, model``,
:func:`lbnorm.ratings.battles.read_model_map`) renames them. The input warnings
(:func:`lbnorm.readers.input_warnings`, printed by the summary) list the models
only the battles have, those only the other inputs have, and map entries naming
no model in the battles. The battle files are in the input catalog (format
``battles``, rows = battles read) and so is the model map (``model-map``, rows
0), so the manifest records their sha256.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm.core.errors import InputError, OptionsError, RatingsNotIdentifiableError
from lbnorm.core.files import sha256_file
from lbnorm.core.options import RunOptions
from lbnorm.core.schemas import KEY_COLUMNS, OPTIONAL_SCORE_DEFAULTS, SCORES, Batch
from lbnorm.ratings.battle_files import is_battles_file
from lbnorm.readers.catalog import Inputs, catalog_table
from lbnorm.suites import Benchmark, Suite

if TYPE_CHECKING:
    from lbnorm.ratings.battles import Battles

__all__ = ["add_pairwise_scores", "split_battle_files"]

_SHOWN = 5
#: What an unknown variant key is in every reader: '' for text, false for the flag.
_UNKNOWN_KEYS = {key: OPTIONAL_SCORE_DEFAULTS[key] for key in KEY_COLUMNS[1:]}


def split_battle_files(
    paths: Sequence[str | Path], *, suite: Suite, options: RunOptions
) -> tuple[list[str | Path], list[Path]]:
    """Separate the battle files named among `paths` from the other inputs.

    Args:
        paths: The inputs as given (files and directories).
        suite: The suite; battle files are read only for a pairwise benchmark.
        options: The run's options (``model_map`` needs a pairwise benchmark).

    Returns:
        ``(other inputs, battle files)``, each in the order given.

    Raises:
        InputError: A battle file is given but the suite has no pairwise benchmark.
        OptionsError: ``model_map`` is set but the suite has no pairwise benchmark.
    """
    battles = [
        Path(path)
        for path in paths
        if Path(path).is_file() and is_battles_file(path)  # named files only
    ]
    others = [path for path in paths if Path(path) not in battles]
    if suite.pairwise_benchmarks:
        return others, battles
    if battles:
        shown = ", ".join(str(path) for path in battles[:_SHOWN])
        msg = (
            f"{shown}: battles (model_a, model_b columns), but suite {suite.name!r} has "
            "no pairwise benchmark to score them.\n"
            'Hint: rate battles alone with `lbnorm arena FILE --out DIR`, or add a benchmark with aggregation = "bradley-terry" and a reference model to the suite.'
        )
        raise InputError(msg)
    if options.model_map is not None:
        msg = (
            f"--model-map {options.model_map}: renames battle models for a pairwise "
            f"benchmark, but suite {suite.name!r} has none.\n"
            'Hint: leave out --model-map, or use a suite with an aggregation = "bradley-terry" benchmark.'
        )
        raise OptionsError(msg)
    return others, battles


def add_pairwise_scores(
    read: Inputs | None,
    battle_files: Sequence[Path],
    *,
    suite: Suite,
    options: RunOptions,
) -> Inputs:
    """Add the pairwise benchmarks' scores (and the battle files) to the inputs.

    Args:
        read: The other inputs, as read (None: there were none).
        battle_files: The battle files (:func:`split_battle_files`).
        suite: The suite, with at least one pairwise benchmark.
        options: The run's options (``model_map``).

    Returns:
        The inputs with one more batch, the battle files in the catalog, and
        warnings naming the models present in one source but not the other.

    Raises:
        InputError: A battle file or the model map is malformed, the reference
            model is not in the battles, or the battles do not determine the
            ratings (named with the benchmark).
    """
    from lbnorm.ratings.battles import (  # the battle reader: only for a pairwise suite
        read_battles,
        read_model_map,
    )

    read = read or Inputs(batches=())
    benchmarks = suite.pairwise_benchmarks
    model_map = read_model_map(options.model_map) if options.model_map else None
    if not battle_files:
        names = [b.name for b in benchmarks]
        warning = (
            f"no battles file among the inputs for the pairwise benchmark(s) {names}: "
            "their scores are missing (pass the battles file beside the results)"
        )
        return replace(read, warnings=(*read.warnings, warning))
    battles = read_battles(battle_files)
    read, variants = _variants(read)
    tables = [
        _benchmark_scores(battles, benchmark, model_map, variants)
        for benchmark in benchmarks  # a suite's few pairwise benchmarks
    ]
    table = pa.concat_tables(tables)
    warnings = list(read.warnings) + _coverage_warnings(
        table, variants, model_map, battles, has_others=read.num_rows > 0
    )
    catalog = _battle_catalog(battles, options.model_map, model_map)
    if read.catalog.num_rows:
        catalog = pa.concat_tables(  # the parse cache's columns: null for these
            [read.catalog, catalog], promote_options="permissive"
        )
    batch = Batch(table=table, source=", ".join(battles.sources))
    return replace(
        read,
        batches=itertools.chain([batch], read.batches),
        eager=[batch, *read.eager],
        catalog=catalog,
        num_rows=read.num_rows + table.num_rows,
        warnings=tuple(warnings),
    )


def _battle_catalog(
    battles: Battles, map_path: str | None, model_map: dict[str, str] | None
) -> pa.Table:
    """The catalog's rows for the battle files and the model map, if one was given.

    Both change the pairwise scores, so both are recorded (path, sha256, bytes)
    like the other inputs; the map with the number of renames it holds.
    """
    entries = [(Path(f.path), "battles", f.n_rows_kept, "") for f in battles.files]
    if map_path is not None and model_map is not None:
        reason = f"renames battle models ({len(model_map)} entries)"
        entries.append((Path(map_path), "model-map", 0, reason))
    paths, formats, rows, reasons = zip(*entries, strict=True)
    return catalog_table(
        {
            "path": [str(path) for path in paths],
            "format": formats,
            "sha256": [sha256_file(path) for path in paths],
            "bytes": [path.stat().st_size for path in paths],
            "rows": rows,
            "reason": reasons,
        }
    )


def _benchmark_scores(
    battles: Battles,
    benchmark: Benchmark,
    model_map: dict[str, str] | None,
    variants: pa.Table,
) -> pa.Table:
    """One pairwise benchmark's rows in the SCORES contract, one per variant."""
    # the fit: loaded only for a pairwise suite
    from lbnorm.ratings.fit import nullable_floats
    from lbnorm.ratings.options import RatingOptions
    from lbnorm.ratings.pairwise_scores import (
        score_against_field,
        score_against_rating,
        score_against_reference,
    )

    options = RatingOptions(bootstrap=benchmark.bootstrap, seed=0)
    try:
        if benchmark.score == "reference":
            assert benchmark.reference is not None  # the suite checks it
            scores = score_against_reference(
                battles,
                reference=benchmark.reference,
                model_map=model_map,
                options=options,
            )
            metric = "win probability vs " + benchmark.reference
        elif benchmark.score == "rating":
            assert benchmark.anchor is not None  # the suite checks it
            assert benchmark.against is not None
            scores = score_against_rating(
                battles,
                anchor=benchmark.anchor,
                against=benchmark.against,
                model_map=model_map,
                options=options,
            )
            model, rating = benchmark.anchor
            metric = f"win probability vs a rating of {benchmark.against:g} ({model} = {rating:g})"
        else:
            scores = score_against_field(battles, model_map=model_map, options=options)
            metric = "expected win rate vs the field"
    except RatingsNotIdentifiableError as exc:
        message, _, _ = str(exc).partition("\nHint:")
        msg = (
            f"{', '.join(battles.sources)}: pairwise benchmark {benchmark.name!r}: {message}\n"
            "Hint: a leaderboard's pairwise benchmark is fitted without a penalty: add "
            "battles between the parts (or against the models named), or drop those "
            "models' battles; `lbnorm arena FILE --out DIR --l2 1` rates them with one."
        )
        raise InputError(msg) from exc
    except InputError as exc:  # the reference is not in the battles
        msg = f"{', '.join(battles.sources)}: pairwise benchmark {benchmark.name!r}: {exc}"
        raise InputError(msg) from exc
    stderr = nullable_floats(scores.stderr, scores.table.num_rows)
    table = scores.table.append_column("stderr", stderr)
    joined = table.join(variants, keys="model", join_type="left outer")
    n = joined.num_rows
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "model": joined["model"],
        **{
            key: pc.fill_null(joined[key], pa.scalar(default))
            for key, default in _UNKNOWN_KEYS.items()
        },
        "benchmark": pa.array([benchmark.name] * n, pa.string()),
        "subtask": pa.array([benchmark.subtasks[0].name] * n, pa.string()),
        "metric": pa.array([metric] * n, pa.string()),
        "raw_score": joined["raw_score"],
        "stderr": joined["stderr"],
        "n_samples": joined["n_samples"],
        "source": pa.array([", ".join(battles.sources)] * n, pa.string()),
    }
    table = pa.table(columns).cast(SCORES.remove_metadata())
    return table.sort_by([(key, "ascending") for key in KEY_COLUMNS])


def _variants(read: Inputs) -> tuple[Inputs, pa.Table]:
    """The distinct variants (the four keys) of the other inputs' scores.

    Tables read up front are in memory already; a streamed Parquet file gives
    its key columns (dictionary pages, a fraction of the file). Batches that
    are neither (the parse cache's) are read into memory here, once.
    """
    if read.eager or read.streamed or not read.num_rows:
        tables = [batch.table for batch in read.eager]
        for opened in read.streamed:
            present = set(pq.read_schema(opened.path).names)
            tables.append(
                pq.read_table(
                    opened.path, columns=[k for k in KEY_COLUMNS if k in present]
                )
            )
    else:
        batches = list(read.batches)
        read = replace(read, batches=batches)
        tables = [batch.table for batch in batches]
    keys = [_keys(table) for table in tables]
    if not keys:
        return read, _keys(pa.table({"model": pa.array([], pa.string())}))
    distinct = pa.concat_tables(keys).group_by(list(KEY_COLUMNS)).aggregate([])
    return read, distinct.select(list(KEY_COLUMNS))


def _keys(table: pa.Table) -> pa.Table:
    """A table's four key columns as plain strings (and a flag), unknowns filled."""
    columns = {}
    for key in KEY_COLUMNS:
        kind = pa.bool_() if key == "chat_template" else pa.string()
        if key not in table.column_names:
            columns[key] = pa.array([_UNKNOWN_KEYS[key]] * table.num_rows, kind)
            continue
        column = table[key].cast(kind)  # (a dictionary column: its values)
        if key in _UNKNOWN_KEYS:
            column = pc.fill_null(column, pa.scalar(_UNKNOWN_KEYS[key], kind))
        columns[key] = column
    return pa.table(columns).group_by(list(KEY_COLUMNS)).aggregate([])


def _coverage_warnings(
    scores: pa.Table,
    variants: pa.Table,
    model_map: dict[str, str] | None,
    battles: Battles,
    *,
    has_others: bool,
) -> list[str]:
    """Models in one source only, and map entries that name no battle model."""
    warnings = []
    rated = set(scores["model"].to_pylist())
    if has_others:
        scored = set(pc.drop_null(variants["model"]).to_pylist())
        renames = " (--model-map renames arena names)"
        for names, where, other, note in (
            (rated - scored, "the battles", "other input", renames),
            (scored - rated, "the other inputs", "battle", ""),
        ):
            if names:
                shown = ", ".join(sorted(names)[:_SHOWN])
                more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
                warnings.append(
                    f"{len(names)} model(s) only in {where}, in no {other} file: {shown}{more}{note}"
                )
    if model_map:
        present = set(battles.models.tolist())
        if unused := sorted(name for name in model_map if name not in present):
            warnings.append(
                f"--model-map: {len(unused)} arena name(s) not in the battles: "
                + ", ".join(unused[:_SHOWN])
            )
    return warnings
