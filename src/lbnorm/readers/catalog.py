"""The input catalog: every input path to score batches and a catalog of files.

``read_files`` dispatches each path given:

- **A file** must be a regular file (a FIFO, device or socket is refused, named
  for what it is). ``results_*.json`` or any other ``.json`` is a results file;
  ``samples_<task>_<timestamp>.jsonl`` a harness sample file; ``.csv``,
  ``.jsonl``/``.ndjson`` and ``.parquet``/``.pq`` are long-format tables (see
  :mod:`lbnorm.readers.tables`), or a Parquet sample table (``task`` and
  ``value`` columns). Any other suffix is an error.
- **A directory** is walked whole (but for ``.git``, ``.hg`` and ``.svn``
  folders; a folder that cannot be read is an error, never a silent skip). It is a
  **results tree** when it holds any results file (``results_*.json``, or
  another ``.json`` file laid out as one: a JSON object whose first key is
  ``results`` or ``config_general``, as a renamed lighteval file) or
  ``samples_<task>_<timestamp>.jsonl`` file: those are its inputs (results
  files win where both give a variant's subtask, see
  :mod:`lbnorm.readers.samples`), and every other file (``expected.csv``, a
  README, a Parquet export, a ``.json`` file laid out otherwise) is
  **skipped**: listed in the catalog with format ``skipped`` and the reason,
  not read, and named in a warning by reason. Otherwise it is a **table directory**:
  its ``.csv``, ``.jsonl``, ``.ndjson``, ``.parquet`` and ``.pq`` files are the
  inputs and the rest is skipped the same way. A directory that is neither but
  holds ``model_outputs.json`` files is **AlpacaEval's results layout**
  (:mod:`lbnorm.readers.alpacaeval`). In each, an entry named like
  an input that is not a regular file (a FIFO called ``results_x.json``) is an
  error; other odd entries (a socket, a link to a directory) are skipped.

The catalog (:attr:`Inputs.catalog`) is an Arrow table of
:data:`lbnorm.core.schemas.INPUT_FILES`; nothing here imports pandas.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm._runtime import Threads, available_cores
from lbnorm.core.arrow import numbers, scalar, strings
from lbnorm.core.errors import InputError
from lbnorm.core.files import (
    MAX_RESULTS_BYTES,
    RESULTS_FILE,
    SAMPLES_FILE,
    TABLE_SUFFIXES,
    check_regular_file,
    read_bytes,
    sha256_file,
    walk_directory,
)
from lbnorm.core.options import ProgressCallback, RunOptions
from lbnorm.core.schemas import INPUT_FILES, KEY_COLUMNS, Batch
from lbnorm.readers.parquet import ParquetScores, open_parquet_scores
from lbnorm.readers.tables import read_score_file
from lbnorm.suites import Suite

if TYPE_CHECKING:
    from lbnorm.readers.items import Items
    from lbnorm.readers.newest import ResultsRead

#: Reads the results files a run found, in place of the plain reader (the parse
#: cache's hook, :mod:`lbnorm.readers.cache`). Their ``files`` table has
#: ``path``, ``sha256``, ``bytes``, ``rows``, ``superseded_by``, ``n_ignored``
#: and ``tasks``, and may add ``reason`` and columns of its own (kept).
ResultsReader = Callable[[Sequence[Path]], "ResultsRead"]

__all__ = ["Inputs", "catalog_table", "ignored_entries", "read_files"]

_SKIPPED_IN_TREE = (
    "not an input of a results tree (only results files and "
    "samples_<task>_<timestamp>.jsonl files are read there)"
)
_SKIPPED_JSON = (
    "a .json file that is not a results file (a results file's first key is "
    "'results' or 'config_general')"
)
#: How a results file begins, whatever its name: lm-evaluation-harness writes
#: ``results`` first, lighteval (and the v1 leaderboard) ``config_general``.
_RESULTS_LAYOUT = re.compile(
    rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"(?:results|config_general)"\s*:'
)
#: Bytes read from a .json file to see whether it is laid out as a results file.
_SNIFF_BYTES = 4096
_SKIPPED_IN_TABLES = (
    "not a score table (a table directory's inputs are .csv, .jsonl, .ndjson, "
    ".parquet and .pq files)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    """What the readers produced.

    Attributes:
        batches: The scores, lazily: Parquet row groups stream from disk as the
            engine consumes them; other formats are read up front.
        catalog: One row per file found (:data:`lbnorm.core.schemas.INPUT_FILES`):
            ``path``, ``format``, ``sha256``, ``bytes``, ``rows`` (scores taken
            from it), ``superseded_by``, ``n_ignored``, ``tasks`` (what a results
            or sample file gave) and ``reason`` (why a file gave nothing, e.g.
            a skipped README); the parse cache adds ``cache``.
        num_rows: Rows in all.
        warnings: What a summary should say although the run goes on (files
            skipped in a directory, settings that differ, ...).
        reruns: Per variant read from several results files, with superseded
            files or older scores that differ: see
            :attr:`lbnorm.readers.newest.ResultsRead.reruns`.
        cache_stats: The parse cache's statistics, when it was used.
        rejected: The results files the parse cache rejected, each with the
            variant it held as far as known and whether that variant is lost
            (see :func:`lbnorm.readers.cache.read_files_cached`).
        items: With ``paired``: the item matrix of the per-sample inputs that
            gave scores (sample tables read once, with their scores); None
            otherwise.
    """

    batches: Iterable[Batch]
    catalog: pa.Table = field(default_factory=lambda: catalog_table({"path": []}))
    num_rows: int = 0
    eager: Sequence[Batch] = ()
    streamed: Sequence[ParquetScores] = ()
    warnings: tuple[str, ...] = ()
    reruns: tuple[dict[str, Any], ...] = ()
    cache_stats: Mapping[str, Any] | None = None
    rejected: tuple[dict[str, Any], ...] = ()
    items: Items | None = None

    @classmethod
    def of_batches(cls, batches: Sequence[Batch]) -> Inputs:
        """Inputs already in memory (a frame handed to :func:`lbnorm.normalize_scores`)."""
        return cls(
            batches=batches,
            num_rows=sum(batch.table.num_rows for batch in batches),
            eager=batches,
        )

    def partition(self, part: int, parts: int) -> Iterator[Batch]:
        """The batches of one of `parts` disjoint shares of the input, for workers.

        Parquet row groups are dealt round-robin over all files; batches read up
        front (CSV, JSONL, results files) all go to share 0.

        Args:
            part: Which share, ``0 <= part < parts``.
            parts: How many shares.
        """
        if part == 0:
            yield from self.eager
        units = [
            (opened, group)
            for opened in self.streamed
            for group in range(opened.num_row_groups)
        ]
        mine = units[part::parts]
        for opened in self.streamed:
            groups = [group for owner, group in mine if owner is opened]
            if groups:
                yield from opened.batches(groups)


def catalog_table(columns: Mapping[str, Any]) -> pa.Table:
    """A catalog in the :data:`~lbnorm.core.schemas.INPUT_FILES` schema, defaults filled.

    Args:
        columns: Column name -> values (lists, numpy or Arrow arrays;
            ``tasks`` Arrow only). ``path`` is required; absent ``format``, ``sha256`` and ``reason``
            are '', ``bytes``, ``rows`` and ``n_ignored`` 0, ``superseded_by``
            and ``tasks`` null. Columns outside the schema (the parse cache's
            ``cache``), Arrow arrays, are kept after it as they are.

    Returns:
        The catalog.

    Examples:
        >>> catalog_table({"path": ["a.csv"], "format": ["csv"], "rows": [3]})["rows"].to_pylist()
        [3]
    """
    n_rows = len(columns["path"])
    arrays: dict[str, pa.Array | pa.ChunkedArray] = {}
    for schema_field in INPUT_FILES:
        name, type_ = schema_field.name, schema_field.type
        values = columns.get(name)
        if isinstance(values, pa.Array | pa.ChunkedArray):
            arrays[name] = values.cast(type_)
        elif values is None and name in ("superseded_by", "tasks"):
            arrays[name] = pa.nulls(n_rows, type_)
        elif pa.types.is_string(type_):
            texts = [""] * n_rows if values is None else list(values)
            arrays[name] = strings([v if isinstance(v, str) else None for v in texts])
        else:  # a count
            counts = np.zeros(n_rows, np.int64) if values is None else values
            arrays[name] = numbers(np.asarray(counts, dtype=np.int64), type_)
    for name in columns:  # kept after the schema's columns
        arrays.setdefault(name, columns[name])
    return pa.Table.from_arrays(list(arrays.values()), names=list(arrays))


def _read_tables(
    paths: list[Path], options: RunOptions, progress: ProgressCallback | None
) -> tuple[list[pa.Table], list[Batch], list[ParquetScores]]:
    """Open the score tables (Parquet streams, others are read); their catalog rows.

    The Parquet tables' sha256s are found on every core while the tables are
    opened (hashlib releases the GIL); each is asked for in input order, so its
    errors come where a serial read raised them. A CSV or JSONL table is hashed
    as it is read (:func:`read_score_file`): no second read of the file.
    """
    eager: list[Batch] = []
    streamed: list[ParquetScores] = []
    sha256s: list[str] = []
    rows: list[int] = []
    formats = [TABLE_SUFFIXES.get(path.suffix.lower()) for path in paths]
    parquet = [at for at, kind in enumerate(formats) if kind == "parquet"]
    # leaving the block on an error drops the hashes not started
    with Threads(min(len(parquet), available_cores()), "hash") as pool:
        hashes = {at: pool.submit(sha256_file, paths[at]) for at in parquet}
        for done, (path, kind) in enumerate(zip(paths, formats, strict=True), 1):
            if kind == "parquet":
                opened = open_parquet_scores(
                    path,
                    extra_columns=options.extra_columns,
                    keep_details=options.subtasks,
                )
                streamed.append(opened)
                rows.append(opened.num_rows)
                sha256s.append(hashes[done - 1].result())
            else:
                batch, sha256 = read_score_file(
                    path, extra_columns=options.extra_columns
                )
                eager.append(batch)
                rows.append(batch.table.num_rows)
                sha256s.append(sha256)
            if progress is not None:
                progress("reading score tables", done, len(paths))
    catalog = {
        "path": [str(path) for path in paths],
        "format": formats,
        "sha256": sha256s,
        "bytes": [path.stat().st_size for path in paths],
        "rows": rows,
    }
    catalogs = [catalog_table(catalog)] if paths else []
    return catalogs, eager, streamed


def read_files(
    paths: Sequence[str | Path],
    *,
    suite: Suite,
    options: RunOptions,
    progress: ProgressCallback | None = None,
    max_results_bytes: int | None = MAX_RESULTS_BYTES,
    read_results: ResultsReader | None = None,
) -> Inputs:
    """Read every input path into score batches and a catalog of files.

    Args:
        paths: Files or directories (see the module docstring for what is read).
        suite: The suite, which says which results-file entries to read.
        options: The run's options: ``extra_columns`` (unknown table columns)
            and ``subtasks`` (read the columns the subtask-level output needs;
            False streams Parquet inputs with the keys and ``raw_score`` only).
        progress: Called as ``progress(stage, done, total)`` after each file.
        max_results_bytes: The largest results file read (None: no limit);
            default :data:`lbnorm.core.files.MAX_RESULTS_BYTES`.
        read_results: Reads the results files found instead (the parse
            cache); its catalog columns beyond the plain reader's are kept, null
            in the other files' rows.

    Returns:
        The scores (as batches), the file catalog and the warnings.

    Raises:
        InputError: A path is missing, not a regular file or directory, of an
            unknown type, unreadable, too large or malformed; the message names
            the file.
    """
    found = _find_inputs(paths)
    catalogs, eager, streamed = _read_tables(found.tables, options, progress)
    read: ResultsRead | None = None
    if found.results:
        reader = read_results or functools.partial(
            _read_results,
            suite=suite,
            progress=progress,
            max_results_bytes=max_results_bytes,
        )
        read = _compared(reader(found.results), suite, options)
        eager.append(Batch(table=read.scores, source="results files"))
        catalogs.append(_results_catalog(read.files))
    items = None
    if found.samples:
        batch, catalog, items = _read_samples(
            found.samples, suite, eager, paired=options.paired
        )
        eager.append(batch)
        catalogs.append(catalog)
    if found.alpacaeval:
        batch, catalog = _read_alpacaeval(found.alpacaeval, suite)
        eager.append(batch)
        catalogs.append(catalog)
    warnings = list(read.warnings) if read is not None else []
    if found.skipped:
        catalogs.append(_skipped_catalog(found.skipped))
        warnings.append(_skipped_warning(found.skipped))
    rejected = read.rejected if read is not None else ()
    files = pa.concat_tables(catalogs, promote_options="default")
    num_rows = int(pc.sum(files["rows"]).as_py() or 0)
    if not num_rows:  # an empty table must not replace the last leaderboard
        _raise_no_scores(files, suite, rejected)
    return Inputs(
        batches=itertools.chain(eager, *(opened.batches() for opened in streamed)),
        catalog=files,
        num_rows=num_rows,
        eager=eager,
        streamed=streamed,
        warnings=tuple(warnings),
        items=items,
        reruns=read.reruns if read is not None else (),
        rejected=rejected,
    )


def _read_results(
    paths: Sequence[Path],
    *,
    suite: Suite,
    progress: ProgressCallback | None,
    max_results_bytes: int | None,
) -> ResultsRead:
    """The plain results reader: read, hashed and parsed on every core for a tree.

    One file's bytes at a time per process, small parsed records back.
    """
    # the results parser (and msgspec) load only for a run that reads them
    from lbnorm.readers.harness import subtask_columns
    from lbnorm.readers.instances import results_columns
    from lbnorm.readers.results_tree import read_results_paths

    columns = results_columns(subtask_columns(suite), suite)
    pairs = list(zip(columns["task"], columns["metric"], strict=True))
    return read_results_paths(
        paths,
        pairs,
        columns,
        read=functools.partial(read_bytes, max_bytes=max_results_bytes),
        progress=progress,
    )


def _results_catalog(files: pa.Table) -> pa.Table:
    """The results files' catalog rows; the columns a reader adds (the cache's) kept."""
    # a file's variant and run time go to its score rows, not to the catalog
    variant = {"model", "precision", "revision", "chat_template", "timestamp"}
    return catalog_table(
        {"format": ["lm-eval-harness"] * files.num_rows}
        | {name: files[name] for name in files.column_names if name not in variant}
    )


def _compared(read: ResultsRead, suite: Suite, options: RunOptions) -> ResultsRead:
    """`read` with each file's settings that differ from the majority (catalog, warnings).

    As it was when ``comparability`` is ``off``.

    Raises:
        InputError: Settings differ and ``comparability`` is ``strict``.
    """
    if options.comparability == "off":
        return read
    from lbnorm.readers.comparability import (  # loaded with the results parser
        check_comparability,
        strict_error,
    )

    compared = check_comparability(read.files, read.settings, suite)
    if options.comparability == "strict" and compared.differences.num_rows:
        raise strict_error(compared)
    return dataclasses.replace(
        read,
        # each file's differing settings, a list column
        files=read.files.append_column("comparability", compared.notes),
        warnings=(*read.warnings, *compared.warnings),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Found:
    """The input paths, by kind, and the files found but skipped (with why)."""

    tables: list[Path] = field(default_factory=list)
    results: list[Path] = field(default_factory=list)
    samples: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    alpacaeval: list[Path] = field(default_factory=list)


def _find_inputs(paths: Sequence[str | Path]) -> _Found:
    """Sort the paths given (and the files under directories) by what reads them."""
    if not paths:
        msg = "no input given.\nHint: pass score files or a results directory (or run `lbnorm run` alone for the demo)."
        raise InputError(msg)
    found = _Found()  # its lists grow entry by entry
    for entry in map(Path, paths):
        _check_path_text(entry)
        if entry.is_dir():
            walked = _walk_input_directory(entry)
            for kind in dataclasses.fields(_Found):
                getattr(found, kind.name).extend(getattr(walked, kind.name))
            continue
        check_regular_file(entry)  # missing, a FIFO, a device: said so
        if SAMPLES_FILE.match(entry.name):
            found.samples.append(entry)
        elif entry.name in _ALPACAEVAL_FILES:  # one of AlpacaEval's, given by name
            found.alpacaeval.append(entry)
        elif entry.suffix.lower() == ".json":
            found.results.append(entry)
        else:
            found.tables.append(entry)
    for path in [*found.tables, *found.results, *found.samples, *found.alpacaeval]:
        _check_path_text(path)
    samples = found.samples + [
        path
        for path in found.tables
        if TABLE_SUFFIXES.get(path.suffix.lower()) == "parquet"
        and _is_samples_table(path)
    ]
    tables = [path for path in found.tables if path not in samples]
    # files in path order, whatever order they were named in: the subtask table
    # lists each file's rows in file order, so an output depends on the files
    # given, not on how they were listed
    return _Found(
        tables=sorted(tables),
        results=sorted(found.results),
        samples=sorted(samples),
        skipped=found.skipped,
        alpacaeval=found.alpacaeval,  # in path order per directory, directories as given
    )


def _is_samples_table(path: Path) -> bool:
    """Whether a Parquet file holds per-sample values (``task`` and ``value``).

    An unreadable file is not one: the score-table reader reports it. (Here,
    not in :mod:`lbnorm.readers.samples`: a run on score tables loads no sample
    reader.)
    """
    try:
        names = set(pq.ParquetFile(path).schema_arrow.names)
    except (pa.ArrowException, OSError):
        return False
    return {"task", "value"} <= names and "raw_score" not in names


def _walk_input_directory(directory: Path) -> _Found:
    """A directory's inputs (a results tree's or a table directory's) and the rest.

    A results file is found by its name (``results_*.json``) or, for another
    ``.json`` file, by its layout: a JSON object whose first key is
    ``results`` (lm-evaluation-harness) or ``config_general`` (lighteval, the
    v1 leaderboard), so a renamed lighteval file is read, not skipped.
    """
    files, others = walk_directory(directory)
    results = sorted(
        path
        for path in files
        if RESULTS_FILE.match(path.name)
        or (path.suffix.lower() == ".json" and _is_results_layout(path))
    )
    samples = [path for path in files if SAMPLES_FILE.match(path.name)]
    is_tree = bool(results or samples) or any(
        RESULTS_FILE.match(path.name) or SAMPLES_FILE.match(path.name)
        for path, _ in others
    )
    if not is_tree and (layout := _alpacaeval_layout(files)) is not None:
        inputs, skipped_files = layout
        names = {path.name for path in inputs}
        skipped_files += _irregular(others, lambda path: path.name in names)
        return _Found(skipped=sorted(skipped_files), alpacaeval=inputs)

    def is_input(path: Path) -> bool:  # by its name (a results file by layout aside)
        if not is_tree:
            return path.suffix.lower() in TABLE_SUFFIXES
        return bool(RESULTS_FILE.match(path.name) or SAMPLES_FILE.match(path.name))

    tables = [] if is_tree else [path for path in files if is_input(path)]
    taken = {*results, *samples, *tables}
    skipped = [
        (path, _skip_reason(path, is_tree=is_tree))
        for path in files
        if path not in taken
    ]
    skipped += _irregular(others, is_input)
    if not (results or samples or tables):
        msg = (
            f"{directory}: no results_*.json files found in this directory tree (nor "
            ".json files laid out as results files), and no score tables (.csv, "
            ".jsonl, .ndjson, .parquet, .pq).\n"
            "Hint: point lbnorm at a leaderboard tree (<org>/<model>/results_<timestamp>.json) "
            "or at score tables (.csv, .jsonl, .parquet)."
        )
        raise InputError(msg)
    return _Found(
        tables=tables, results=results, samples=samples, skipped=sorted(skipped)
    )


def _irregular(
    others: Sequence[tuple[Path, str]], is_input: Callable[[Path], bool]
) -> list[tuple[Path, str]]:
    """Entries that are not regular files, skipped; one named like an input is an error."""
    for path, kind in others:
        if is_input(path):
            msg = f"{path}: is {kind}, not a regular file.\nHint: replace it with the file it stands for, or remove it from the directory."
            raise InputError(msg)
    return [(path, f"{kind}, not a regular file") for path, kind in others]


#: AlpacaEval's file names (:mod:`lbnorm.readers.alpacaeval`): a model's outputs and
#: an annotator's judgements; known here so that only such inputs load its reader.
_ALPACAEVAL_FILES = ("model_outputs.json", "annotations.json")


def _alpacaeval_layout(
    files: Sequence[Path],
) -> tuple[list[Path], list[tuple[Path, str]]] | None:
    """AlpacaEval's inputs and skipped files, if the directory is laid out so."""
    if not any(path.name in _ALPACAEVAL_FILES for path in files):
        return None  # (the reader, and msgspec, load only for such a directory)
    from lbnorm.readers.alpacaeval import find_layout

    return find_layout(files)


def _read_alpacaeval(paths: list[Path], suite: Suite) -> tuple[Batch, pa.Table]:
    """Scores from AlpacaEval's results layout, and its files' catalog rows."""
    from lbnorm.readers.alpacaeval import read_alpacaeval
    from lbnorm.readers.harness import subtask_columns
    from lbnorm.readers.instances import instance_rules

    scores, files = read_alpacaeval(
        paths, subtask_columns(suite), rules=instance_rules(suite)
    )
    catalog = catalog_table(
        {name: files[name] for name in files.column_names}
        | {"format": ["alpacaeval"] * files.num_rows}
    )
    return Batch(table=scores, source="AlpacaEval files"), catalog


def _is_results_layout(path: Path) -> bool:
    """Whether a .json file begins as a results file does (its first 4 KiB read)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:  # unreadable: skipped, and the catalog says it is not an input
        return False
    return _RESULTS_LAYOUT.match(head) is not None


def _skip_reason(path: Path, *, is_tree: bool) -> str:
    if not is_tree:
        return _SKIPPED_IN_TABLES
    return _SKIPPED_JSON if path.suffix.lower() == ".json" else _SKIPPED_IN_TREE


def _skipped_warning(skipped: Sequence[tuple[Path, str]]) -> str:
    """The files found and not read, named by reason (the first few of each).

    Examples:
        >>> _skipped_warning([(Path("t/README.md"), "not an input of a results tree (...)"),
        ...     (Path("t/a.json"), "a .json file that is not a results file (...)")])
        'skipped 2 file(s) found but not read (the input catalog lists each with its reason): t/README.md: not an input of a results tree; t/a.json: a .json file that is not a results file'
    """
    groups: dict[str, list[Path]] = {}
    for path, reason in skipped:  # the files skipped: a handful in a real tree
        groups.setdefault(reason.split(" (")[0], []).append(path)
    parts = []
    for reason, paths in groups.items():
        shown = ", ".join(str(path) for path in paths[:_SKIPPED_SHOWN])
        parts.append(f"{shown}{_more(len(paths), _SKIPPED_SHOWN)}: {reason}")
    return (
        f"skipped {len(skipped):,} file(s) found but not read (the input catalog "
        f"lists each with its reason): {'; '.join(parts)}"
    )


#: Skipped files the summary names per reason.
_SKIPPED_SHOWN = 3


def _more(count: int, shown: int) -> str:
    """`` and 5 more`` after the first `shown` of `count` things named ('' if all are)."""
    return f" and {count - shown:,} more" if count > shown else ""


def _skipped_catalog(skipped: list[tuple[Path, str]]) -> pa.Table:
    sizes = []
    for path, _ in skipped:
        try:
            sizes.append(path.stat().st_size)
        except OSError:  # a dangling link
            sizes.append(0)
    return catalog_table(
        {
            "path": [str(path) for path, _ in skipped],
            "format": ["skipped"] * len(skipped),
            "bytes": sizes,
            "reason": [reason for _, reason in skipped],
        }
    )


def _raise_no_scores(
    files: pa.Table, suite: Suite, lost: Sequence[Mapping[str, Any]] = ()
) -> None:
    read = files.filter(pc.not_equal(files["format"], scalar("skipped", pa.string())))
    paths = read["path"].to_pylist() or files["path"].to_pylist()
    shown = ", ".join(paths[:5]) + (" ..." if len(paths) > 5 else "")
    # files the parse cache rejected say why and name the variant each held
    # (the error path only: one step per file)
    variants = {record["path"]: record for record in lost}
    rejected = [
        (path, reason, variants.get(path))
        for path, reason in zip(
            read["path"].to_pylist(), read["reason"].to_pylist(), strict=True
        )
        if reason
    ]
    why = ""
    hint = (
        "Hint: check --suite (`lbnorm suites show NAME` lists its tasks) and that "
        "the files are complete."
    )
    if rejected:
        were = "was" if len(rejected) == 1 else "were"
        listed = "".join(
            f"\n  {path}: {reason}"
            + (
                ""
                if record is None or record.get("lost") is None
                else f"\n    lost: {describe_variant(record)}"
            )
            for path, reason, record in rejected[:5]
        )
        more = f"\n  ... and {len(rejected) - 5} more" if len(rejected) > 5 else ""
        why = f". {len(rejected)} of them {were} rejected:{listed}{more}"
        hint = (
            "Hint: fix or remove the rejected files; the output folder is left as "
            "it was until a run succeeds."
        )
    elif held := ignored_entries(read):
        entries = ", ".join(repr(entry) for entry, _ in held[:_ENTRIES_SHOWN])
        holds = "the file holds" if len(paths) == 1 else "the files hold"
        why = f"; {holds} results entries {entries}{_more(len(held), _ENTRIES_SHOWN)}."
        hint = (
            "Hint: a suite subtask reads results[task][metric]: set its task and "
            "metric to the file's (`lbnorm suites show NAME` lists the suite's; "
            "docs/run.md says how lighteval's keys map)."
        )
    msg = (
        f"{shown}: no scores for suite {suite.name!r} in these {len(paths)} "
        f"file(s){why or '.'}\n{hint}"
    )
    raise InputError(msg)


def describe_variant(record: Mapping[str, Any]) -> str:
    """A rejected file's variant in words, saying how it is known.

    Args:
        record: A rejected file's record (:func:`lbnorm.readers.input_rejections`).

    Examples:
        >>> describe_variant({"model": "o/m", "precision": "bfloat16",
        ...     "revision": "0123456789abcdef", "chat_template": True, "variant_from": "file"})
        'o/m (bfloat16, revision 0123456789ab, chat template)'
        >>> describe_variant({"model": "o/m", "precision": "", "revision": "",
        ...     "chat_template": False, "variant_from": "cache"})
        'o/m (precision unknown; as an earlier version of the file named it)'
        >>> describe_variant({"model": "o/m", "variant_from": "folder"})
        'o/m (named by its folder; precision and revision unknown)'
        >>> describe_variant({"model": None, "variant_from": None})
        'variant unknown'
    """
    source, model = record.get("variant_from"), record.get("model")
    if not model:
        return "variant unknown"
    if source == "folder":
        return f"{model} (named by its folder; precision and revision unknown)"
    details = [record.get("precision") or "precision unknown"]
    if revision := record.get("revision"):
        details.append(f"revision {revision[:12]}")  # as git abbreviates a sha
    if record.get("chat_template"):
        details.append("chat template")
    how = "; as an earlier version of the file named it" if source == "cache" else ""
    return f"{model} ({', '.join(details)}{how})"


#: Results entries named in a message or a summary; the manifest lists them all.
_ENTRIES_SHOWN = 8


def ignored_entries(catalog: pa.Table) -> list[tuple[str, int]]:
    """The results entries no suite subtask took, each with the files holding it.

    Most files first, then by name; from the catalog's ``ignored`` column
    (none without it: tables, or a catalog of another version).
    """
    if "ignored" not in catalog.column_names:
        return []
    counts = pc.value_counts(pc.list_flatten(catalog["ignored"]))  # (none: empty)
    entries = counts.field("values").to_pylist()
    files = counts.field("counts").to_pylist()
    return sorted(
        zip(entries, files, strict=True), key=lambda pair: (-pair[1], pair[0])
    )


def _read_samples(
    paths: list[Path], suite: Suite, eager: Sequence[Batch], *, paired: bool
) -> tuple[Batch, pa.Table, Items | None]:
    """Scores aggregated from sample files and tables, their catalog, their items.

    With `paired`, the item matrix too: a table's items are taken in the same
    pass as its scores; the sample files that gave scores are read again.

    Results files already read win: their (variant, subtask) rows, found in
    `eager` by source, are not taken from the samples.
    """
    from lbnorm.readers.harness import subtask_columns
    from lbnorm.readers.instances import instance_rules
    from lbnorm.readers.items import ItemCollector, ItemSource, without_scores
    from lbnorm.readers.samples import read_samples

    collector = ItemCollector(suite) if paired else None

    columns = [*KEY_COLUMNS, "benchmark", "subtask", "source"]
    taken = [  # (text as dictionaries: the readers compare it as text)
        batch.table.select(columns)
        for batch in eager
        if batch.source == "results files"
    ]
    table, files = read_samples(
        paths,
        subtask_columns(suite),
        taken=pa.concat_tables(taken) if taken else None,
        rules=instance_rules(suite),
        sink=collector,
    )
    read = [Path(path) for path in files["path"].to_pylist()]
    catalog = catalog_table(
        {name: files[name] for name in files.column_names}
        | {"sha256": [sha256_file(path) for path in read]}
        | {"bytes": [path.stat().st_size for path in read]}
    )
    items = None
    if collector is not None:  # the sample files that gave scores, read again
        # (Arrow scalars: a Python value makes pyarrow import pandas to convert it)
        is_read = pc.greater(files["rows"], scalar(0, files["rows"].type))
        gave = pc.and_(
            pc.equal(files["format"], scalar("lm-eval-samples", pa.string())),
            pc.and_(is_read, pc.is_null(files["superseded_by"])),
        )
        sources = files["path"].filter(gave).to_pylist()
        collector.add_sources([ItemSource(path=Path(path)) for path in sources])
        items = collector.finish()
        if taken:  # the scores results files won: not compared on sample items
            items = without_scores(items, pa.concat_tables(taken), suite)
    return Batch(table=table, source="sample files"), catalog, items


def _check_path_text(path: Path) -> None:
    """Paths are recorded as text in every output; a non-UTF-8 name cannot be."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = (
            f"{os.fsencode(path)!r}: the path is not valid UTF-8, and lbnorm records "
            "each input's path in its outputs as text.\n"
            "Hint: rename the file or directory to a UTF-8 name."
        )
        raise InputError(msg) from exc
