"""The pipeline, composed: readers -> engine (validate, kernel) -> result -> writer.

``normalize_scores`` is the pure computation (a frame in, a :class:`Result`
out); ``run`` adds reading files and, given ``out``, writing the Parquet
outputs. The one engine switch is :func:`select_engine`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from lbnorm._runtime import entry_point
from lbnorm.core.errors import InputError, ValidationError
from lbnorm.core.faults import fault_point
from lbnorm.core.options import DEFAULT_SUITE, EngineName, ProgressCallback, RunOptions
from lbnorm.core.schemas import SCORES, Batch, conform
from lbnorm.engines.result import Job, Result, finish_job
from lbnorm.ratings.pairwise_inputs import add_pairwise_scores, split_battle_files
from lbnorm.readers import Inputs, noted, read_inputs
from lbnorm.repeats import name_earlier_inputs
from lbnorm.suites import Suite, load_suite

if TYPE_CHECKING:
    import pandas as pd

    from lbnorm.output.transaction import Transaction

__all__ = [
    "convert",
    "created_at_from_environment",
    "demo_metadata_path",
    "demo_path",
    "normalize_scores",
    "read_all",
    "run",
    "select_engine",
]


@entry_point  # (Ctrl-C and SIGTERM held for the call)
def normalize_scores(
    scores: pd.DataFrame | pa.Table,
    suite: Suite | str | Path = DEFAULT_SUITE,
    *,
    options: RunOptions | None = None,
) -> Result:
    """Normalize a long-format scores frame under a suite (in memory).

    The subtask table comes sorted by benchmark, variant and subtask (the
    ``memory`` order), whatever order the rows came in.

    Args:
        scores: Long-format scores: ``model``, ``benchmark``, ``subtask``,
            ``raw_score`` (fractions), optionally the other :data:`SCORES` columns.
        suite: A :class:`Suite`, a built-in suite name or a suite file.
        options: The run's options (``missing``, ``unknown``, ``extra_columns``
            matter here); defaults to :class:`RunOptions`'s.

    Returns:
        The result tables.

    Raises:
        ValidationError: Scores violate the contract (every failure listed).
        SchemaMismatchError: Columns are missing or of the wrong type.

    Examples:
        >>> import pandas as pd
        >>> scores = pd.DataFrame({"model": ["m"] * 3, "benchmark": ["MUSR"] * 3,
        ...     "subtask": ["murder_mysteries", "object_placements", "team_allocation"],
        ...     "raw_score": [0.7, 0.4, 0.6]})
        >>> result = normalize_scores(scores, options=RunOptions(missing="partial"))
        >>> result.benchmarks["normalized_score"].round(9).tolist()
        [35.0]
    """
    from lbnorm.readers.tables import scores_from_frame  # a frame: pandas is here

    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    options = options or RunOptions()
    if options.engine == "auto":  # in memory already: the rows held and sorted
        options = replace(options, engine="memory")
    options = options.resolved()
    if not isinstance(scores, pa.Table):
        if "_row" not in scores.columns:
            scores = scores_from_frame(
                scores, source="<frame>", extra_columns=options.extra_columns
            )
        scores = pa.Table.from_pandas(scores, preserve_index=False)
    inputs = Inputs.of_batches([Batch(table=scores, source="<frame>")])
    try:
        return finish_job(select_engine(options.engine)(inputs, suite, options))
    except ValidationError as error:  # a duplicate names the input that came first
        raise _failed(name_earlier_inputs(error, inputs, suite), options) from None


@entry_point  # (Ctrl-C and SIGTERM held for the call)
def run(
    inputs: Sequence[str | Path] = (),
    *,
    suite: Suite | str | Path = DEFAULT_SUITE,
    out: str | Path | Transaction | None = None,
    options: RunOptions | None = None,
    metadata: pd.DataFrame | None = None,
    progress: ProgressCallback | None = None,
    created_at: str | None = None,
) -> Result:
    """Read inputs, normalize them under a suite and, given `out`, write Parquet.

    Args:
        inputs: Score files or results directories; empty means the bundled demo.
        suite: A :class:`Suite`, a built-in suite name or a suite file.
        out: Output directory, replaced atomically; None writes nothing; a
            :class:`~lbnorm.output.transaction.Transaction` gets the tables and
            is left to its caller to commit (a nightly run adds its own first).
        options: Every choice about the run (:class:`RunOptions`: data policies,
            engine, metadata, nightly-run options); defaults to its defaults.
        metadata: A model metadata frame to join into the leaderboard, instead of
            ``options.metadata`` (a file).
        progress: Called as ``progress(stage, done, total)`` while reading files.
        created_at: Creation time recorded in the manifest (ISO 8601); defaults
            to ``SOURCE_DATE_EPOCH`` if set (:func:`created_at_from_environment`),
            else now. Kept out of the data files.

    Returns:
        The result tables.

    Raises:
        LbnormError: Any bad input or unwritable output; nothing is written then.
    """
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    options = (options or RunOptions()).resolved()
    if options.spill_dir is None:  # (the composition reads the environment, no stage)
        options = replace(options, spill_dir=os.environ.get("TMPDIR") or None)
    created_at = created_at or created_at_from_environment()
    if metadata is None and options.metadata is None and not inputs:
        options = replace(options, metadata=str(demo_metadata_path()))
    if options.cache is not None and out is not None:
        from lbnorm.readers.cache import check_cache_location  # nightly runs only

        check_cache_location(
            options.cache, out if isinstance(out, str | Path) else out.out
        )
    if options.paired:
        from lbnorm.engines.paired import refuse_unpairable  # with --paired only

        refuse_unpairable(suite)
    paths = list(inputs) or [demo_path()]
    read = read_all(paths, suite=suite, options=options, progress=progress)
    # crash-safety tests: LBNORM_FAULT_POINT (lbnorm.core.faults)
    fault_point("computing")
    job = select_engine(options.engine)(read, suite, options)

    def annotate(result: Result) -> Result:
        result = _annotate(result, metadata, options)
        return _paired(result, read) if options.paired else result

    try:
        if out is None:
            return annotate(finish_job(job))
        from lbnorm.output.transaction import Transaction  # the module writing files
        from lbnorm.output.writer import provenance_of, write_job

        provenance = provenance_of(suite, options, read.catalog)
        if not isinstance(out, str | Path):  # the caller commits
            return write_job(job, out, finish=annotate, provenance=provenance)
        with Transaction(out, kind="leaderboard") as transaction:
            result = write_job(job, transaction, finish=annotate, provenance=provenance)
            transaction.commit(created_at=created_at)
        return result
    except ValidationError as error:  # a duplicate names the input that came first
        raise _failed(name_earlier_inputs(error, read, suite), options) from None


@entry_point  # (Ctrl-C and SIGTERM held for the call)
def convert(
    inputs: Sequence[str | Path],
    *,
    out: str | Path,
    suite: Suite | str | Path = DEFAULT_SUITE,
    options: RunOptions | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[int, int]:
    """Write inputs as one long Parquet scores table: what the Dask engine reads.

    The inputs are read as :func:`run` reads them (a results tree: the suite's
    subtasks, each from the newest file of its variant; tables; sample files),
    and their rows written in the :data:`~lbnorm.core.schemas.SCORES` contract
    (but ``source``: the file's metadata, ``lbnorm.inputs``, lists each input
    with its sha256 and rows). The scores are not checked: ``lbnorm run`` on
    the file checks them, as on the inputs.

    Args:
        inputs: Score files or results directories.
        out: The ``.parquet`` file, replaced atomically (one lbnorm did not
            write is refused).
        suite: The suite, which says which results entries to read.
        options: The readers' options (``extra_columns``; ``cache``).
        progress: Called as ``progress(stage, done, total)`` while reading files.

    Returns:
        The rows written and the input files read.

    Raises:
        LbnormError: An input cannot be read, or the file cannot be written.
    """
    from lbnorm.output.writer import (
        check_scores_target,
        provenance_of,
        write_table_file,
    )

    check_scores_target(out)  # before the work
    suite = suite if isinstance(suite, Suite) else load_suite(suite)
    options = replace(options or RunOptions(), extra_columns="drop")
    read = read_all(list(inputs), suite=suite, options=options, progress=progress)
    # the contract but for `source` (a Parquet input's rows come from the file
    # itself; its metadata lists the inputs), text as plain strings (the Parquet
    # writer encodes it as dictionaries)
    columns = pa.schema([field for field in SCORES if field.name != "source"])
    scores = pa.concat_tables(
        [conform(batch.table, columns, source=batch.source) for batch in read.batches]
    )
    provenance = provenance_of(suite, options, read.catalog)
    scores = scores.replace_schema_metadata(provenance)
    write_table_file(scores, out, kind="scores", option="--out")
    return scores.num_rows, read.catalog.num_rows


def _failed(error: ValidationError, options: RunOptions) -> ValidationError:
    """`error`, its failures written to ``options.failures`` first when asked.

    The message then says where every failure is (a file that cannot be
    written says why instead).
    """
    if options.failures is None:
        return error
    from lbnorm.output.writer import write_table_file  # the module writing files

    failures = error.failure_table
    write_table_file(failures, options.failures, kind="failures", option="--failures")
    first, _, rest = str(error).partition("\n")
    first = first.split(" (the first ")[0].removesuffix(":")
    written = f"{failures.num_rows:,} failure row(s) in {options.failures}"
    return ValidationError(
        f"{first} ({written}, in file and line order):\n{rest}", failures
    )


def read_all(
    paths: Sequence[str | Path],
    *,
    suite: Suite,
    options: RunOptions,
    progress: ProgressCallback | None = None,
) -> Inputs:
    """Read every input, battle files scored as the suite's pairwise benchmarks.

    Battle files named among `paths` go to :mod:`lbnorm.ratings.pairwise_inputs`,
    the rest to :func:`lbnorm.readers.read_inputs`, so the parse cache and every
    engine see both.

    Raises:
        InputError: An input cannot be read, or battles are given to a suite
            without a pairwise benchmark.
        OptionsError: ``model_map`` is set for a suite without one.
    """
    others, battle_files = split_battle_files(paths, suite=suite, options=options)
    if not suite.pairwise_benchmarks:
        return read_inputs(others, suite=suite, options=options, progress=progress)
    read = None
    if others or not battle_files:  # battles alone make a leaderboard of their own
        read = read_inputs(others, suite=suite, options=options, progress=progress)
    return noted(add_pairwise_scores(read, battle_files, suite=suite, options=options))


def _annotate(
    result: Result, metadata: pd.DataFrame | None, options: RunOptions
) -> Result:
    """Join model metadata into the leaderboard, and group ranks, as asked.

    A metadata table's coverage (variants without a row, rows matching no
    variant: a misspelled name) goes with the result for the summary.
    """
    if (
        metadata is None
        and not options.metadata
        and not options.rank_within
        and not options.exclude_flagged
    ):
        return result
    from lbnorm.engines.metadata import annotate_table

    board, coverage = annotate_table(
        result.leaderboard_table,
        (options.metadata or None) if metadata is None else metadata,
        rank_within_columns=options.rank_within,
        is_flagged_excluded=options.exclude_flagged,
        rank_by=result.suite.board.rank_by,
        rank_method=result.suite.board.rank_method,
    )
    return replace(  # (n_models: counted anew)
        result, leaderboard_output=board, n_models=None, metadata_coverage=coverage
    )


def _paired(result: Result, read: Inputs) -> Result:
    """The paired comparisons of adjacent variants, on the per-sample inputs' items.

    The readers collected the items as they read (sample tables once, for their
    scores and their items); inputs read otherwise are read again here.
    """
    from lbnorm.engines.paired_board import board_pairs  # with --paired only
    from lbnorm.readers.items import ItemSource, read_items

    items = read.items
    if items is None:
        used = [
            ItemSource(path=Path(file["path"]))
            for file in read.catalog.to_pylist()  # a step per input file
            if file["format"] in ("lm-eval-samples", "sample-table")
            and file["rows"]
            and file["superseded_by"] is None
        ]
        items = read_items(used, result.suite)
    if not items.n_variants:
        msg = (
            "--paired compares models on the items they answered, but no per-sample "
            "input gave a score.\nHint: give the harness's samples_<task>_<timestamp>."
            "jsonl files (--log_samples) or a sample table (docs/samples.md)."
        )
        raise InputError(msg)
    pairs = board_pairs(
        items,
        result.leaderboard_table,
        result.suite,
        adjust=result.options.paired_adjust,
        alpha=result.options.paired_alpha,
        missing=result.missing,
    )
    return replace(
        result, paired_output=pairs.table, paired_without_items=pairs.without_items
    )


def select_engine(name: EngineName) -> Callable[[Inputs, Suite, RunOptions], Job]:
    """The engine of that name (see :mod:`lbnorm.engines`); ``auto`` must be resolved."""
    if name == "dask":
        from lbnorm.engines import dask  # an optional extra: loaded only when asked

        return dask.start
    from lbnorm.engines import stream  # (``memory``: its order, held and sorted)

    return stream.start


def created_at_from_environment() -> str | None:
    """The manifest's creation time ``SOURCE_DATE_EPOCH`` asks for (None: not set, now).

    Reproducible builds set that variable to make every written file
    byte-identical. It is read here, in the composition layer, by each entry
    point that writes an output (:func:`run`, the arena, the nightly run, the
    command line's ``--out``) and handed to the transaction as ``created_at``:
    no stage reads the environment.
    """
    from lbnorm.core.manifest import iso_time

    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    return iso_time(float(epoch)) if epoch and epoch.isdigit() else None


def demo_path() -> Path:
    """Return the path of the bundled demo leaderboard (a Parquet file)."""
    return Path(__file__).with_name("data") / "demo_scores.parquet"


def demo_metadata_path() -> Path:
    """Return the path of the bundled demo's model metadata (a Parquet file)."""
    return demo_path().with_name("demo_metadata.parquet")
