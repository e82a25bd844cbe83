"""The input catalog: every input path to score batches and a catalog of files.

``read_files`` dispatches each path: a directory is searched for
``results_*.json`` files (the leaderboard tree) and harness ``samples_*.jsonl``
files (a details tree: scores recomputed from the samples, see
:mod:`lbnorm.readers.samples`), else for score tables; a ``.json`` file is a
results file, a ``samples_<task>_<timestamp>.jsonl`` file a sample file;
``.csv``, ``.jsonl``/``.ndjson`` and ``.parquet`` files are long-format tables
(see :mod:`lbnorm.readers.tables`), or a Parquet sample table. Where a results
file and samples give one variant's subtask, the results file wins.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from lbnorm.errors import InputError
from lbnorm.options import ExtraColumns, ProgressCallback, RunOptions
from lbnorm.readers.files import TABLE_SUFFIXES, read_bytes, sha256_file
from lbnorm.readers.harness import find_results_files, read_results_paths
from lbnorm.readers.parquet import ParquetScores, open_parquet_scores
from lbnorm.readers.samples import SAMPLES_FILE, is_samples_table, read_samples
from lbnorm.readers.tables import read_score_table
from lbnorm.schemas import KEY_COLUMNS, Batch
from lbnorm.suites import Suite

__all__ = ["Inputs", "read_files"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Inputs:
    """What the readers produced.

    Attributes:
        batches: The scores, lazily: Parquet row groups stream from disk as the
            engine consumes them; other formats are read up front.
        files: One row per input file: ``path``, ``format``, ``sha256``, ``bytes``,
            ``rows`` (scores taken from it), ``superseded_by`` and ``n_ignored``.
        num_rows: Rows in all.
    """

    batches: Iterable[Batch]
    files: Any = field(
        default_factory=pd.DataFrame
    )  # pa.Table once read_inputs returns
    num_rows: int = 0
    eager: Sequence[Batch] = ()
    streamed: Sequence[ParquetScores] = ()

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


def read_files(
    paths: Sequence[str | Path],
    *,
    suite: Suite,
    options: RunOptions,
    progress: ProgressCallback | None = None,
) -> Inputs:
    """Read every input path into score batches and a catalog of files.

    Args:
        paths: Files or directories.
        suite: The suite, which says which results-file entries to read.
        options: The run's options: ``extra_columns`` (unknown table columns)
            and ``subtasks`` (read the columns the subtask-level output needs;
            False streams Parquet inputs with the keys and ``raw_score`` only).
        progress: Called as ``progress(stage, done, total)`` after each file.

    Returns:
        The scores (as batches) and the file catalog.

    Raises:
        InputError: A path is missing, of an unknown type, unreadable or
            malformed; the message names the file.
    """
    extra_columns: ExtraColumns = options.extra_columns
    if not paths:
        msg = "no input given.\nHint: pass score files or a results directory (or run `lbnorm run` alone for the demo)."
        raise InputError(msg)
    table_paths: list[Path] = []
    json_paths: list[Path] = []
    sample_paths: list[Path] = []  # harness per-sample files and sample tables
    for entry in map(Path, paths):
        if entry.is_dir():
            # a details tree: samples, and results files (which win where both
            # give a subtask; their scores stay, the samples fill the gaps)
            samples = sorted(p for p in entry.rglob("samples_*.jsonl") if p.is_file())
            sample_paths.extend(samples)
            if any(entry.rglob("results_*.json")):
                json_paths.extend(find_results_files(entry))
                continue
            if samples:
                continue
            found = sorted(
                p
                for p in entry.rglob("*")
                if p.suffix.lower() in TABLE_SUFFIXES and p.is_file()
            )
            if not found:
                find_results_files(entry)  # raises the "nothing found" error
            table_paths.extend(found)
        elif entry.is_file() and SAMPLES_FILE.match(entry.name):
            sample_paths.append(entry)
        elif entry.is_file():
            (json_paths if entry.suffix.lower() == ".json" else table_paths).append(
                entry
            )
        else:
            msg = f"{entry}: no such file or directory.\nHint: check the path."
            raise InputError(msg)
    for path in [*table_paths, *json_paths, *sample_paths]:
        _check_path_text(path)
    # files in path order, whatever order they were named in: the subtask table
    # lists each file's rows in file order, so the output depends on the files
    # given, not on how they were listed
    table_paths, json_paths, sample_paths = (
        sorted(paths) for paths in (table_paths, json_paths, sample_paths)
    )
    sample_paths.extend(
        path
        for path in table_paths
        if TABLE_SUFFIXES.get(path.suffix.lower()) == "parquet"
        and is_samples_table(path)
    )
    table_paths = [path for path in table_paths if path not in sample_paths]
    catalogs: list[pd.DataFrame] = []
    eager: list[Batch] = []
    streamed: list[ParquetScores] = []
    for done, path in enumerate(table_paths, start=1):
        if TABLE_SUFFIXES.get(path.suffix.lower()) == "parquet":  # else: unsupported
            opened = open_parquet_scores(
                path, extra_columns=extra_columns, keep_details=options.subtasks
            )
            streamed.append(opened)
            rows = opened.num_rows
        else:
            scores = read_score_table(path, extra_columns=extra_columns)
            eager.append(_frame_batch(scores, str(path)))
            rows = len(scores)
        if progress is not None:
            progress("reading score tables", done, len(table_paths))
        catalogs.append(
            pd.DataFrame(
                {
                    "path": [str(path)],
                    "format": [TABLE_SUFFIXES[path.suffix.lower()]],
                    "sha256": [sha256_file(path)],
                    "bytes": [path.stat().st_size],
                    "rows": [rows],
                    "superseded_by": [None],
                    "n_ignored": [0],
                }
            )
        )
    if json_paths:
        subtasks = suite.subtask_table()
        pairs = list(zip(subtasks["task"], subtasks["metric"], strict=True))
        # read, hashed and parsed on every core for a tree; one file's bytes at a
        # time per process, small parsed records back
        scores, catalog = read_results_paths(
            json_paths, pairs, subtasks, read=read_bytes, progress=progress
        )
        eager.append(_frame_batch(scores, "results files"))
        catalog = catalog.assign(
            format="lm-eval-harness",
            rows=catalog["rows"].where(catalog["superseded_by"].isna(), 0),
        )
        catalogs.append(
            catalog[
                [
                    "path",
                    "format",
                    "sha256",
                    "bytes",
                    "rows",
                    "superseded_by",
                    "n_ignored",
                ]
            ]
        )
    if sample_paths:
        scores, catalog = _read_samples(sample_paths, suite, catalogs, eager)
        eager.append(_frame_batch(scores, "sample files"))
        catalogs.append(catalog)
    files = pd.concat(catalogs, ignore_index=True) if len(catalogs) > 1 else catalogs[0]
    if not files["rows"].any():  # an empty table must not replace the last leaderboard
        shown = ", ".join(files["path"].head(5)) + (" ..." if len(files) > 5 else "")
        msg = (
            f"{shown}: no scores for suite {suite.name!r} in these {len(files)} file(s).\n"
            "Hint: check --suite (`lbnorm suites show NAME` lists its tasks) and that "
            "the files are complete."
        )
        raise InputError(msg)
    return Inputs(
        batches=itertools.chain(eager, *(opened.batches() for opened in streamed)),
        files=files,
        num_rows=int(files["rows"].sum()),
        eager=eager,
        streamed=streamed,
    )


def _read_samples(
    paths: list[Path],
    suite: Suite,
    catalogs: Sequence[pd.DataFrame],
    eager: Sequence[Batch],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Scores aggregated from sample files and tables, and their catalog.

    Results files already read win: their (variant, subtask) rows, found in
    `eager` by source path, are not taken from the samples.
    """
    harness = [c["path"][c["format"] == "lm-eval-harness"] for c in catalogs]
    results = pa.array(pd.concat(harness).astype(str) if harness else [], pa.string())
    columns = [*KEY_COLUMNS, "benchmark", "subtask", "source"]
    taken = [
        batch.table.select(columns)
        .filter(pc.is_in(batch.table["source"].cast(pa.string()), value_set=results))
        .to_pandas()
        for batch in eager
        if set(columns) <= set(batch.table.column_names)
    ]
    scores, files = read_samples(
        paths,
        suite.subtask_table(),
        taken=pd.concat(taken, ignore_index=True) if taken else None,
    )
    files = files.assign(
        sha256=[sha256_file(Path(path)) for path in files["path"]],
        bytes=[Path(path).stat().st_size for path in files["path"]],
    )
    return scores, files[
        ["path", "format", "sha256", "bytes", "rows", "superseded_by", "n_ignored"]
    ]


def _frame_batch(scores: pd.DataFrame, source: str) -> Batch:
    # `_row` locates a row for messages: a row number in a table, a results key
    # in a harness file; as text, so batches of both kinds concatenate
    table = pa.Table.from_pandas(
        scores.assign(_row=scores["_row"].astype(str)), preserve_index=False
    )
    return Batch(table=table, source=source)


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
