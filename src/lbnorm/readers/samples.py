"""Per-sample results, aggregated into subtask scores as lm-evaluation-harness does.

Two forms are read (the contract: ``docs/samples.md``):

- **Harness sample files**, ``<org>/<model>/samples_<task>_<ISO timestamp>.jsonl``:
  one JSON line per document with ``doc_id``, ``filter`` and one field per metric
  (``"acc_norm": 1.0``, ``"prompt_level_strict_acc": true``, or a list such as
  ``"inst_level_strict_acc": [true, false]``). The model variant comes from the
  ``results_<same timestamp>.json`` beside the file when there is one (read as
  :mod:`lbnorm.readers.harness` reads it), else from the ``<org>/<model>``
  folders with precision and revision ''. Of several files for one variant and
  task, the newest timestamp wins (ties by path). Lines are parsed by Arrow's
  JSON reader, only the fields needed; a file it refuses is read again line by
  line, which finds and names the bad line and key
  (:mod:`lbnorm.readers.sample_lines`, the rules the item reader shares).
- **Sample tables** (Parquet, :data:`lbnorm.core.schemas.SAMPLES`): one row per
  (variant, task, metric, document), or per item of a list-valued metric
  (``item`` 0, 1, ...), streamed a batch at a time.

The aggregation is lm-eval 0.4's (``api/metrics.py``, ``evaluator_utils.py``):
the score is the mean over documents (``mean``), its stderr the sample standard
deviation (``ddof=1``) over the square root of the count (``mean_stderr``), or
none (``"N/A"``) for one document; a list-valued metric is flattened first
(IFEval's ``agg_inst_level_acc``) and has no stderr; ``n_samples`` counts
documents. Rows become per-group partial sums (count, sum and the sum of squared
deviations from the group's own mean in that batch) with ``np.bincount`` over
integer group codes; partials merge exactly (Chan et al.), so memory is one
batch plus the partials, and the stderr does not lose digits to cancellation.
It is numpy and Arrow only (columns built through :mod:`lbnorm.core.arrow`): a run on
sample inputs loads no pandas.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NoReturn, Protocol, Self

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lbnorm._runtime import BatchThread, check_cancelled, read_ahead
from lbnorm.core.arrow import booleans, empty_table, numbers, strings, to_numpy
from lbnorm.core.errors import InputError
from lbnorm.core.files import SAMPLES_FILE, file_format
from lbnorm.core.schemas import KEY_COLUMNS, SAMPLES, SCORES
from lbnorm.readers.instances import InstanceRules
from lbnorm.readers.sample_lines import HINT_LINE, ParsedMetric, read_metric_items

__all__ = [
    "REQUIRED_SAMPLE_COLUMNS",
    "SAMPLES_FILE",
    "BatchSink",
    "aggregate_sample_batches",
    "aggregate_samples_files",
    "aggregate_samples_table",
    "bad_rows",
    "group_codes",
    "group_digits",
    "key_entries",
    "key_indices",
    "read_sample_table",
    "read_samples",
    "row_codes",
    "sample_file_task",
    "variant_of",
]


#: Columns a sample table must have; the others of :data:`SAMPLES` are optional.
REQUIRED_SAMPLE_COLUMNS: tuple[str, ...] = (
    "model",
    "task",
    "metric",
    "doc_id",
    "value",
)
#: The scores out: :data:`lbnorm.core.schemas.SCORES` and ``_row`` (``task/metric``).
_OUTPUT = pa.schema(
    [*(pa.field(f.name, f.type) for f in SCORES), pa.field("_row", pa.string())]
)
#: The suite's subtasks as columns (``benchmark``, ``subtask``, ``task``, ``metric``).
SubtaskColumns = Mapping[str, Sequence[str]]
_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
# A group key packs (model, revision, precision, chat template, suite pair) codes
# into one int64: 20 + 24 + 8 + 1 + 10 bits.
_BITS = {"model": 20, "revision": 24, "precision": 8, "pair": 10}
_HINT_TABLE = "Hint: a sample table has the columns of lbnorm.core.schemas.SAMPLES (docs/samples.md)."
_BATCH_ROWS = 1 << 20
_GROUPED = ("model", "precision", "revision", "chat_template", "task", "metric")
_COMPACT_ROWS = 1 << 22
_INT32_MAX = np.iinfo(np.int32).max


class BatchSink(Protocol):
    """Something else that reads a sample table's batches as the aggregation streams them.

    ``lbnorm run --paired`` lays the rows out as an item matrix
    (:class:`lbnorm.readers.items.ItemCollector`) in the same pass, so that the
    table is read once.
    """

    #: The columns it needs beyond the aggregation's (read where present).
    columns: tuple[str, ...]

    def add_batch(self, batch: pa.RecordBatch, *, path: Path, first_row: int) -> None:
        """Take a batch (``first_row``: its first row's number in the table)."""
        ...


def read_samples(
    paths: Sequence[Path],
    subtasks: SubtaskColumns,
    *,
    taken: pa.Table | None = None,
    rules: InstanceRules | None = None,
    sink: BatchSink | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Aggregate sample files and tables; scores given elsewhere win.

    Args:
        paths: ``samples_*.jsonl`` files and Parquet sample tables.
        subtasks: The suite's subtasks as columns (``benchmark``, ``subtask``,
            ``task``, ``metric``), in suite order:
            :func:`lbnorm.readers.harness.subtask_columns`.
        taken: Scores read from results files (the key columns, ``benchmark``,
            ``subtask`` and ``source``): a (variant, subtask) found there is not
            taken from the samples, whose file is then superseded by it.
        rules: The suite's per-instance rules (:mod:`lbnorm.readers.instances`).
        sink: Also hand each sample table's batches to this, as they are read.

    Returns:
        The scores (the columns of :func:`lbnorm.readers.results_tree.read_results_paths`
        and ``_row``, ``task/metric``) and a catalog row per file: ``path``,
        ``format`` (``lm-eval-samples`` or ``sample-table``), ``rows``,
        ``superseded_by`` and ``n_ignored``.

    Raises:
        InputError: A file cannot be read, or holds a bad line, row or value.
    """
    jsonl = [path for path in paths if file_format(path) == "jsonl"]
    tables = [path for path in paths if file_format(path) != "jsonl"]
    frames: list[pa.Table] = []
    catalogs: list[pa.Table] = []
    if jsonl:
        scores, catalog = aggregate_samples_files(jsonl, subtasks, rules=rules)
        frames.append(scores)
        catalogs.append(catalog)
    rows, ignored = [], []
    for path in tables:
        scores, n_ignored = aggregate_samples_table(
            path, subtasks, rules=rules, sink=sink
        )
        frames.append(scores)
        rows.append(scores.num_rows)
        ignored.append(n_ignored)
    if tables or not catalogs:  # (no files at all: the catalog's empty table)
        superseded = [None] * len(tables)
        catalogs.append(_catalog("sample-table", tables, rows, superseded, ignored))
    scores = pa.concat_tables(frames) if frames else empty_table(_OUTPUT)
    catalog = pa.concat_tables(catalogs)
    if taken is not None and taken.num_rows and scores.num_rows:
        scores, catalog = _without_taken(scores, catalog, taken)
    return scores, catalog


def _without_taken(
    scores: pa.Table, catalog: pa.Table, taken: pa.Table
) -> tuple[pa.Table, pa.Table]:
    """Drop the scores `taken` has (its first row per key wins) and re-count the files.

    A file left without rows whose rows all went to results files is superseded
    by the results file that took its first row.
    """
    n_scores = scores.num_rows
    keys = [*KEY_COLUMNS, "benchmark", "subtask"]
    codes = row_codes([(scores[key], taken[key]) for key in keys])
    given = codes[n_scores:]
    found, first_given = np.unique(given, return_index=True)
    where = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
    where[found] = first_given
    match = where[codes[:n_scores]]  # each score's results row, or -1
    won = match >= 0
    # the files (catalog paths, then the scores' sources) coded alike
    files = row_codes([(catalog["path"], scores["source"])])
    path_code, source_code = files[: catalog.num_rows], files[catalog.num_rows :]
    size = int(files.max()) + 1
    used = np.bincount(source_code[~won], minlength=size)
    winner = np.full(size, -1, dtype=np.int64)  # a file's first won row's results row
    lost_code, first_won = np.unique(source_code[won], return_index=True)
    winner[lost_code] = match[won][first_won]
    rows = used[path_code].astype(np.int64)
    old_rows = to_numpy(catalog["rows"].cast(pa.int64()))
    superseded = catalog["superseded_by"].cast(pa.string())
    lost = (rows == 0) & (old_rows > 0) & to_numpy(superseded.is_null())
    by = winner[path_code]
    sources = taken["source"].cast(pa.string())
    taken_by = sources.take(numbers(np.maximum(by, 0), pa.int64(), valid=by >= 0))
    superseded_by = pc.if_else(booleans(lost), taken_by, superseded)
    kept = scores.filter(booleans(~won))
    catalog = catalog.set_column(
        catalog.schema.get_field_index("rows"), "rows", numbers(rows, pa.int64())
    )
    catalog = catalog.set_column(
        catalog.schema.get_field_index("superseded_by"), "superseded_by", superseded_by
    )
    return kept, catalog


def row_codes(pairs: Sequence[tuple[pa.ChunkedArray, pa.ChunkedArray]]) -> _I64:
    """Dense codes of the rows of two tables' key columns, the first table's rows first.

    Args:
        pairs: Per key, the first table's column and the second's: text, or
            booleans (``chat_template``) where the first's are.

    Returns:
        A code per row of both tables: equal keys, equal codes (null is a value).

    Examples:
        >>> row_codes([(pa.chunked_array([["a", "b"]]), pa.chunked_array([["b"]]))]).tolist()
        [0, 1, 1]
    """
    code = np.zeros(len(pairs[0][0]) + len(pairs[0][1]), dtype=np.int64)
    for first, second in pairs:
        type_ = pa.bool_() if pa.types.is_boolean(first.type) else pa.string()
        both = pa.chunked_array(
            [*first.cast(type_).chunks, *second.cast(type_).chunks], type_
        )
        index, size = _factorize(both.combine_chunks())
        code = _factorize(numbers(code * size + index, pa.int64()))[0]
    return code


def _factorize(values: pa.Array) -> tuple[_I64, int]:
    """Codes numbered in order of first occurrence, and how many there are."""
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    return to_numpy(encoded.indices).astype(np.int64), len(encoded.dictionary)


def aggregate_samples_files(
    paths: Sequence[Path],
    subtasks: SubtaskColumns,
    *,
    rules: InstanceRules | None = None,
) -> tuple[pa.Table, pa.Table]:
    """Aggregate harness sample files into subtask scores, newest file per task.

    Args:
        paths: ``samples_<task>_<timestamp>.jsonl`` files.
        subtasks: The suite's subtasks as columns (:func:`read_samples`).
        rules: The suite's per-instance rules.

    Returns:
        The scores and a catalog row per file, as :func:`read_samples` gives it
        (``n_ignored``: 1 for a task the suite does not use).

    Raises:
        InputError: A misnamed file, a line that is not a JSON object, a missing,
            null or non-numeric metric, a repeated ``doc_id``, or no documents.
    """
    sums = _Sums(subtasks, rules)
    # task -> its suite metrics (a further subtask's rows are the rules' copies)
    metrics_of: dict[str, dict[str, None]] = {}
    for task, metric in zip(sums.columns["task"], sums.columns["metric"], strict=True):
        metrics_of.setdefault(task, {})[metric] = None
    known: dict[Path, tuple[str, str, str, bool]] = {}
    files: list[tuple[str, str, tuple[str, str, str, bool], bool]] = []
    # (variant, task) -> its newest file's (stamp, path): the latest wins, ties by path
    newest: dict[tuple[Any, ...], tuple[str, str]] = {}
    for path in paths:  # one file, not one sample, a step
        task, stamp = sample_file_task(path)
        used = task in metrics_of
        variant = variant_of(path, stamp, known) if used else ("", "", "", False)
        day, _, clock = stamp.partition("T")
        clock, _, fraction = clock.replace(":", "-").partition(".")
        files.append((str(path), task, variant, used))
        if used:
            when = (f"{day}T{clock}.{fraction:0<6}", str(path))
            newest[(*variant, task)] = max(newest.get((*variant, task), when), when)
    superseded: list[str | None] = []
    texts: dict[str, pa.Array] = {}
    with sums:
        for name, task, variant, used in files:
            latest = newest[(*variant, task)][1] if used else name
            superseded.append(None if latest == name else latest)
            if not used or latest != name:
                continue
            wanted = [metric.partition(",")[::2] for metric in metrics_of[task]]
            parsed = read_metric_items(Path(name), wanted, "doc_id", None)
            for metric, (short, _), got in zip(
                metrics_of[task], wanted, parsed, strict=True
            ):
                if not got.values.size:
                    msg = (
                        f"{name}: {short!r} lists are empty in every line.\n{HINT_LINE}"
                    )
                    raise InputError(msg)
                keys = [*variant[:3], task, metric]
                batch = _file_rows(keys, variant[3], got, texts)
                sums.add_rows(batch, source=name, first_row=0, unit="value")
    per_file = sums.rows_per_source()
    rows = [per_file.get(name, 0) for name, *_ in files]
    ignored = [int(not used) for *_, used in files]
    names = [name for name, *_ in files]
    return sums.result(), _catalog("lm-eval-samples", names, rows, superseded, ignored)


def _catalog(
    kind: str,
    paths: Sequence[Path | str],
    rows: Sequence[int],
    superseded: Sequence[str | None],
    ignored: Sequence[int],
) -> pa.Table:
    """A catalog row per file: ``path``, ``format``, ``rows``, ``superseded_by``, ``n_ignored``."""
    return pa.table(
        {
            "path": strings([str(path) for path in paths]),
            "format": strings([kind] * len(paths)),
            "rows": numbers(np.array(rows, dtype=np.int64), pa.int64()),
            "superseded_by": strings(superseded),
            "n_ignored": numbers(np.array(ignored, dtype=np.int64), pa.int64()),
        }
    )


def _file_rows(
    keys: Sequence[str], chat: bool, got: ParsedMetric, texts: dict[str, pa.Array]
) -> pa.RecordBatch:
    """A sample file's metric as sample-table rows (a list-valued one's items numbered).

    `keys`: model, precision, revision, task and metric, each a dictionary of
    one entry (`texts`: those made so far, kept across files).
    """
    size = got.values.size
    zeros = numbers(np.zeros(size, dtype=np.int32), pa.int32())
    names = ["model", "precision", "revision", "task", "metric"]
    columns = {
        name: pa.DictionaryArray.from_arrays(
            zeros, texts.get(text) or texts.setdefault(text, strings([text]))
        )
        for name, text in zip(names, keys, strict=True)
        if text  # a key left out is '' (and chat_template false), as in a table
    }
    if chat:
        columns["chat_template"] = booleans(np.full(size, chat))
    columns["value"] = numbers(got.values, pa.float64())
    if got.lengths is not None:  # flattened, as lm-eval's agg_inst_level_acc
        columns["item"] = numbers(got.positions(), pa.int64())
    return pa.RecordBatch.from_pydict(columns)


def sample_file_task(path: Path) -> tuple[str, str]:
    """A harness sample file's task and run time, from its name.

    Raises:
        InputError: The file is not named ``samples_<task>_<timestamp>.jsonl``.
    """
    match = SAMPLES_FILE.match(path.name)
    if match is None:
        msg = f"{path}: not named samples_<task>_<timestamp>.jsonl.\nHint: keep the harness's file names; lbnorm reads the task from them."
        raise InputError(msg)
    return match["task"], match["timestamp"]


def aggregate_samples_table(
    path: Path,
    subtasks: SubtaskColumns,
    *,
    rules: InstanceRules | None = None,
    sink: BatchSink | None = None,
) -> tuple[pa.Table, int]:
    """Aggregate a Parquet sample table, streamed a batch at a time.

    Args:
        path: A Parquet sample table (:data:`lbnorm.core.schemas.SAMPLES`).
        subtasks: The suite's subtasks as columns (:func:`read_samples`).
        rules: The suite's per-instance rules.
        sink: Also hand each batch to this (with the columns it asks for).

    Returns:
        The scores, one row per (variant, suite subtask), and the number of rows
        whose (task, metric) the suite does not use.

    Raises:
        InputError: Unreadable, a required column missing, a column of the wrong
            type, or a row with a null or non-finite value (named by row number).

    Examples:
        >>> import tempfile
        >>> from lbnorm.readers.harness import subtask_columns
        >>> from lbnorm.suites import load_suite
        >>> path = Path(tempfile.mkdtemp()) / "samples.parquet"
        >>> pq.write_table(pa.table({"model": ["a/b"] * 3, "task": ["leaderboard_gpqa_main"] * 3,
        ...     "metric": ["acc_norm,none"] * 3, "doc_id": [0, 1, 2], "value": [1.0, 0.0, 1.0]}), path)
        >>> scores, ignored = aggregate_samples_table(path, subtask_columns(load_suite("openllm-v2")))
        >>> [(r["subtask"], round(r["raw_score"], 4), round(r["stderr"], 4), r["n_samples"])
        ...  for r in scores.select(["subtask", "raw_score", "stderr", "n_samples"]).to_pylist()]
        [('main', 0.6667, 0.3333, 3)]
    """
    columns = [name for name in SAMPLES.names if name != "doc_id"]
    if sink is not None:
        columns += [c for c in sink.columns if c not in columns]
    with _Sums(subtasks, rules) as sums:

        def take(batch: pa.RecordBatch, first: int) -> None:
            sums.add_rows(batch, source=str(path), first_row=first)
            if sink is not None:  # (summed on the batch thread meanwhile)
                sink.add_batch(batch, path=path, first_row=first)

        read_sample_table(path, columns, take)
    return sums.result(), sums.n_ignored


def read_sample_table(
    path: Path,
    columns: Sequence[str],
    take: Callable[[pa.RecordBatch, int], None],
    *,
    hint: str = _HINT_TABLE,
) -> None:
    """Hand each batch of a sample table's `columns` (those it has) to `take`, with its first row's number.

    The text keys are read as dictionaries. The next batch is read on a second
    thread while `take` works; a cancelled run stops between two batches. A
    batch is a million rows (memory: about 80 bytes a row).

    Raises:
        InputError: Unreadable, a column of :data:`REQUIRED_SAMPLE_COLUMNS`
            missing (the message ends with `hint`), a column of the wrong type, or
            a damaged page or row group (named by the row it starts at).
    """
    try:
        schema = pq.read_schema(path)
        text = ["model", "precision", "revision", "task", "metric"]
        file = pq.ParquetFile(
            path, read_dictionary=[n for n in text if n in schema.names]
        )
    except (pa.ArrowException, OSError) as exc:
        msg = f"{path}: cannot read as Parquet: {exc}.\nHint: check that the file is complete."
        raise InputError(msg) from exc
    if missing := [
        name for name in REQUIRED_SAMPLE_COLUMNS if name not in schema.names
    ]:
        msg = f"{path}: sample table without column(s) {', '.join(missing)}; found {schema.names}.\n{hint}"
        raise InputError(msg)
    for name in schema.names:
        if name in SAMPLES.names and not _fits(schema.field(name).type, name):
            msg = f"{path}: column {name!r} has type {schema.field(name).type}, expected {SAMPLES.field(name).type}.\n{hint}"
            raise InputError(msg)
    first = 1
    batches = read_ahead(
        file.iter_batches(
            batch_size=_BATCH_ROWS, columns=[c for c in columns if c in schema.names]
        )
    )
    try:
        for batch in batches:
            check_cancelled()
            take(batch, first)
            first += batch.num_rows
    except (pa.ArrowException, OSError) as exc:  # a damaged page or row group
        msg = f"{path}: cannot read rows from row {first} on: {exc}.\nHint: check that the file is complete."
        raise InputError(msg) from exc
    finally:
        batches.close()  # its reading thread stops here, not when collected


def aggregate_sample_batches(
    batches: Iterable[tuple[pa.RecordBatch, str]],
    subtasks: SubtaskColumns,
    *,
    rules: InstanceRules | None = None,
) -> tuple[pa.Table, dict[str, int]]:
    """Aggregate sample rows another reader made, each batch with its file.

    Messages call a row an ``entry`` and number them from 0, as the entries of
    a JSON array (AlpacaEval's files, :mod:`lbnorm.readers.alpacaeval`).

    Args:
        batches: Batches of :data:`~lbnorm.core.schemas.SAMPLES` columns and
            the file each came from (one file's rows per batch); summed on the
            batch thread while the next is made.
        subtasks: The suite's subtasks as columns (:func:`read_samples`).
        rules: The suite's per-instance rules.

    Returns:
        The scores and the score rows per file.
    """
    with _Sums(subtasks, rules) as sums:
        for batch, source in batches:
            sums.add_rows(batch, source=source, first_row=0, unit="entry")
    return sums.result(), sums.rows_per_source()


@dataclass(slots=True, frozen=True)
class _Groups:
    """A batch's rows numbered by group, and how to read a group's keys back.

    Attributes:
        code: Each row's group (a mixed-radix number of its key indices).
        size: Groups the numbering allows.
        steps: Per key column, its radix and (renumbered) the numbers it stood for.
        mappings: Per key column, each dictionary entry's code.
    """

    code: _I64
    size: int
    steps: list[tuple[int, _I64 | None]]
    mappings: list[_I64]


@dataclass(slots=True)
class _Partial:
    """Per-group sums of one batch: keys and additive statistics."""

    key: _I64
    count: _F64
    documents: _F64
    plain: _F64  # sum of the values: the mean is plain / count, as the harness's
    shift: _F64  # about the mean (a float): `total` and `m2` are taken around it
    total: _F64  # sum of (value - shift), near zero
    m2: _F64  # sum of squared deviations from this partial's own mean
    listed: _F64  # values that are items of a list-valued metric
    source: _I64  # index into the registry of sources

    @classmethod
    def of(
        cls, group: _I64, values: _F64, count: _F64, documents: _F64, listed: _F64
    ) -> _Partial:
        """Per group: the sums of `values`, without keys or source (:meth:`take` gives them).

        The corrected two-pass form (Chan, Golub and LeVeque): the second pass
        sums deviations from the rounded mean and subtracts their square / n, so
        no digits are lost however far the values sit from zero.
        """
        size = count.size
        with np.errstate(invalid="ignore", over="ignore"):  # non-finite: caller checks
            plain = _sum(group, values, size)
            shift = plain / np.maximum(count, 1.0)
            deviation = values - shift[group]
            residual = _sum(group, deviation, size)
            m2 = _sum(group, np.square(deviation, out=deviation), size)
            m2 -= residual * residual / np.maximum(count, 1.0)
        none = np.empty(0, dtype=np.int64)
        return cls(none, count, documents, plain, shift, residual, m2, listed, none)

    def take(self, groups: _I64, *, key: _I64, source: _I64) -> _Partial:
        """The sums of `groups`, under their keys and source."""
        names = [f.name for f in fields(self) if f.name not in ("key", "source")]
        taken = {name: getattr(self, name)[groups] for name in names}
        return _Partial(key=key, source=source, **taken)


class _Sums:
    """Group codes and mergeable partial sums of sample values."""

    def __init__(
        self, subtasks: SubtaskColumns, rules: InstanceRules | None = None
    ) -> None:
        self._rules = rules
        self.columns = {
            name: [str(value) for value in subtasks[name]]
            for name in ("benchmark", "subtask", "task", "metric")
        }
        size = len(self.columns["task"])
        if size >= 1 << _BITS["pair"]:
            msg = "suite has more than 1,023 subtasks.\nHint: split the suite."
            raise InputError(msg)
        self._codes: dict[str, dict[str, int]] = {
            name: {} for name in ("model", "revision", "precision", "source")
        }
        # the suite's tasks and metrics, each numbered in order of first occurrence
        # (a further subtask of a per-instance (task, metric) has a key of its own)
        keys = self.columns["metric"] if rules is None else rules.keys
        tasks = dict.fromkeys(self.columns["task"])
        metrics = dict.fromkeys(keys)
        self._suite = {
            "task": {name: index for index, name in enumerate(tasks)},
            "metric": {name: index for index, name in enumerate(metrics)},
        }
        # (task index, metric index) -> suite row; the last row and column: unknown
        self._pairs = np.full((len(tasks) + 1, len(metrics) + 1), -1, dtype=np.int64)
        self._pairs[
            [self._suite["task"][task] for task in self.columns["task"]],
            [self._suite["metric"][metric] for metric in keys],
        ] = np.arange(size)
        self._parts: list[_Partial] = []
        self._rows = 0
        self.n_ignored = 0  # rows of tasks or metrics the suite does not use
        self._behind = BatchThread()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """Wait for the batch being summed; after an error, raise its own first (it came earlier)."""
        if kind is None:
            self.wait()
        else:
            self._behind.settle()

    def wait(self) -> None:
        """Wait until every batch given to :meth:`add_rows` is summed (its errors raised)."""
        self._behind.close()

    def add_rows(
        self, batch: pa.RecordBatch, *, source: str, first_row: int, unit: str = "row"
    ) -> None:
        """Add a batch of sample-table rows (those the suite does not use: :attr:`n_ignored`).

        The batch's keys are encoded here; its groups are summed on the batch
        thread (:class:`~lbnorm._runtime.BatchThread`) while the caller reads
        the next batch: :meth:`wait` before reading the sums.
        """
        if self._rules is not None:
            batch = self._rules.expand(
                batch, source=source, first_row=first_row, unit=unit
            )
        rows = batch.num_rows
        # (a null precision or revision is '')
        for name in ("value", "model", "chat_template", "task", "metric"):
            if name in batch.schema.names and batch.column(name).null_count:
                is_null = to_numpy(batch.column(name).is_null())
                bad_rows(source, name, "null", np.flatnonzero(is_null) + first_row)
        values = np.asarray(to_numpy(pc.cast(batch.column("value"), pa.float64())))
        columns, mappings = [], []
        for name in _GROUPED:
            indices, mapping = self._encoded(batch, name)
            columns.append((indices, len(mapping)))
            mappings.append(mapping)
        code, size, steps = group_codes(columns, rows)
        self._behind.run(
            lambda: self._add_groups(
                _Groups(code, size, steps, mappings), values, batch, source, first_row
            ),
            rows,
        )

    def _add_groups(
        self,
        grouped: _Groups,
        values: _F64,
        batch: pa.RecordBatch,
        source: str,
        first_row: int,
    ) -> None:
        """Sum a batch's values per group and add the groups the suite uses."""
        code, size = grouped.code, grouped.size
        count = np.bincount(code, minlength=size).astype(np.float64)
        present = np.flatnonzero(count)
        if "item" in batch.schema.names:
            item = to_numpy(batch.column("item"), null=-1)
            documents, listed = _sum(code, item <= 0, size), _sum(code, item >= 0, size)
        else:
            documents, listed = count, np.zeros(size)
        sums = _Partial.of(code, values, count, documents, listed)
        if not np.isfinite(sums.m2[present]).all():
            bad = np.flatnonzero(~np.isfinite(values)) + first_row
            bad_rows(source, "value", "not finite", bad)
        # each present group's dictionary indices, read back from its number
        model, precision, revision, chat, task, metric = (
            mapping[index]
            for mapping, index in zip(
                grouped.mappings, group_digits(present, grouped.steps), strict=True
            )
        )
        pair = self._pairs[task, metric]
        kept = pair >= 0
        groups = present[kept]
        key = self._pack(model, revision, precision, chat, pair)[kept]
        source_code = np.repeat(self._code("source", [source]), len(groups))
        self._add(sums.take(groups, key=key, source=source_code))
        self.n_ignored += int(count[present[~kept]].sum())

    def rows_per_source(self) -> dict[str, int]:
        """Score rows per source (a source without rows is left out)."""
        self.wait()
        if not self._parts:
            return {}
        counts = np.bincount(
            self._merged().source, minlength=len(self._codes["source"])
        )
        return {
            name: int(counts[code])
            for name, code in self._codes["source"].items()
            if counts[code]
        }

    def result(self) -> pa.Table:
        """The scores: mean, ``mean_stderr`` and documents per group."""
        self.wait()
        if not self._parts:
            return empty_table(_OUTPUT)
        merged = self._merged()
        count, listed = merged.count, merged.listed
        mixed = (listed > 0) & (listed < count)
        key, subtasks = merged.key, self.columns
        pair = key & ((1 << _BITS["pair"]) - 1)
        if mixed.any():
            at = int(np.flatnonzero(mixed)[0])
            task, metric = subtasks["task"][pair[at]], subtasks["metric"][pair[at]]
            source = list(self._codes["source"])[merged.source[at]]
            msg = f"{source}: task {task!r} metric {metric!r} mixes rows with and without 'item'.\nHint: give every row of a list-valued metric its item position, and none to the others."
            raise InputError(msg)
        with np.errstate(invalid="ignore", divide="ignore"):
            stderr = np.sqrt(np.maximum(merged.m2, 0.0) / (count - 1)) / np.sqrt(count)
        stderr[(count < 2) | (listed > 0)] = np.nan  # the harness's "N/A"
        raw_score = merged.plain / count  # the harness's sum / len
        if self._rules is not None:  # a statistic's value from the same sums
            raw_score, stderr = self._rules.finish(
                pair, count, merged.plain, raw_score, stderr
            )

        def text(values: Iterable[str], codes: _I64) -> pa.Array:
            """Few distinct strings, taken per row."""
            return strings(list(values)).take(numbers(codes, pa.int64()))

        def code(name: str, shift: int) -> _I64:
            return np.asarray((key >> shift) & ((1 << _BITS[name]) - 1))

        rows = [
            f"{t}/{m}"
            for t, m in zip(subtasks["task"], subtasks["metric"], strict=True)
        ]
        columns = {
            "model": text(self._codes["model"], code("model", 43)),
            "precision": text(self._codes["precision"], code("precision", 11)),
            "revision": text(self._codes["revision"], code("revision", 19)),
            "chat_template": booleans(((key >> _BITS["pair"]) & 1) == 1),
            "benchmark": text(subtasks["benchmark"], pair),
            "subtask": text(subtasks["subtask"], pair),
            "metric": text(subtasks["metric"], pair),
            "raw_score": numbers(raw_score, pa.float64(), valid=~np.isnan(raw_score)),
            "stderr": numbers(stderr, pa.float64(), valid=~np.isnan(stderr)),
            "n_samples": numbers(merged.documents.astype(np.int64), pa.int64()),
            "source": text(self._codes["source"], merged.source),
            "_row": text(rows, pair),
        }
        return pa.Table.from_arrays(list(columns.values()), schema=_OUTPUT)

    def _add(self, partial: _Partial) -> None:
        if not partial.key.size:
            return
        self._parts.append(partial)
        self._rows += partial.key.size
        if self._rows > _COMPACT_ROWS:  # bounded memory whatever the row order
            self._parts = [self._merged()]
            self._rows = self._parts[0].key.size

    def _merged(self) -> _Partial:
        """One partial per key: counts and sums add; M2 by Chan et al.'s rule."""
        parts = self._parts
        key = np.concatenate([p.key for p in parts])
        encoded = pc.dictionary_encode(numbers(key, pa.int64()))
        group = to_numpy(encoded.indices).astype(np.intp)  # first-occurrence order
        uniques = to_numpy(encoded.dictionary)
        size = len(uniques)

        def add(name: str, weights: _F64 | None = None) -> _F64:
            if weights is None:
                weights = np.concatenate([getattr(p, name) for p in parts])
            return _sum(group, weights, size)

        first = _firsts(group)  # each key's first partial gives its shift
        part_shift = np.concatenate([p.shift for p in parts])
        shift = part_shift[first]
        moved = part_shift - shift[group]  # exact when within a factor of 2
        part_count = np.concatenate([p.count for p in parts])
        part_total = np.concatenate([p.total for p in parts]) + part_count * moved
        count, total = add("count"), _sum(group, part_total, size)
        spread = part_total / part_count - (total / count)[group]
        m2 = add("m2") + _sum(group, part_count * spread * spread, size)
        return _Partial(
            key=np.asarray(uniques, dtype=np.int64),
            count=count,
            documents=add("documents"),
            plain=add("plain"),
            shift=shift,
            total=total,
            m2=m2,
            listed=add("listed"),
            source=np.concatenate([p.source for p in parts])[first],
        )

    def _pack(
        self, model: _I64, revision: _I64, precision: _I64, chat: _I64, pair: _I64
    ) -> _I64:
        key = model.astype(np.int64) << _BITS["revision"] | revision
        key = key << _BITS["precision"] | precision
        key = key << 1 | chat
        return np.asarray(key << _BITS["pair"] | pair, dtype=np.int64)

    def _code(self, name: str, values: list[Any]) -> _I64:
        """Codes of `name` values, new ones registered."""
        known = self._codes[name]
        codes = np.array(
            [known.setdefault("" if v is None else v, len(known)) for v in values],
            dtype=np.int64,
        )
        if name in _BITS and len(known) > 1 << _BITS[name]:
            msg = f"more than {1 << _BITS[name]:,} distinct {name} values in the sample inputs.\nHint: split the inputs and run them separately."
            raise InputError(msg)
        return codes

    def _encoded(
        self, batch: pa.RecordBatch, name: str
    ) -> tuple[npt.NDArray[np.integer[Any]] | None, _I64]:
        """A key column as per-row indices (None: one value) into per-entry codes.

        The codes are the registry's (model, precision, revision), 0/1 (chat
        template), or the index among the suite's tasks or metrics (the last
        index: not the suite's).
        """
        rows, entries = key_entries(batch, name)
        if name == "chat_template":
            return rows, np.arange(len(entries), dtype=np.int64)
        if name in self._suite:
            suite = self._suite[name]
            unknown = len(suite)
            mapping = np.array([suite.get(entry, unknown) for entry in entries])
        else:
            mapping = self._code(name, entries)
        return rows, np.asarray(mapping, dtype=np.int64)


def key_indices(
    column: pa.Array,
) -> tuple[npt.NDArray[np.integer[Any]], list[str]]:
    """A text key column as per-row indices into its entries (a null: the last, '')."""
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    entries = [*column.dictionary.to_pylist(), ""]  # (string or large_string)
    return to_numpy(column.indices, null=len(entries) - 1), entries  # no copy


def key_entries(
    batch: pa.RecordBatch, name: str
) -> tuple[npt.NDArray[np.integer[Any]] | None, list[Any]]:
    """A key column as per-row indices into its entries (None: left out, one entry: '' or false).

    ``chat_template`` indexes ``[False, True]``; a text column is read by :func:`key_indices`.
    """
    if name not in batch.schema.names:
        return None, [False] if name == "chat_template" else [""]
    if name == "chat_template":
        return to_numpy(batch.column(name)).astype(np.int64), [False, True]
    return key_indices(batch.column(name))


def group_codes(
    columns: Sequence[tuple[npt.NDArray[np.integer[Any]] | None, int]], rows: int
) -> tuple[_I64, int, list[tuple[int, _I64 | None]]]:
    """Each row's group: a mixed-radix number of its key columns' indices.

    Args:
        columns: Per key column, its per-row indices (None: one value for
            every row) and how many values it has (the radix).
        rows: The rows of the batch.

    Returns:
        Each row's group, the groups the numbering allows, and per column its
        radix and (renumbered) the numbers it stood for: :func:`group_digits`
        reads a group's indices back.

    Renumbered densely (in order of first occurrence) if it outgrows the
    batch, so ``np.bincount`` over the groups stays small. Summed in int32
    while the number fits (a batch's usually does: a third of the memory
    traffic of int64 and no widening of the int32 indices at each step),
    widened once at the end.
    """
    code: npt.NDArray[np.signedinteger[Any]] | None = None
    size = 1
    steps: list[tuple[int, _I64 | None]] = []
    for indices, radix in columns:
        uniques = None
        if indices is None or radix <= 1:
            radix = 1
        elif code is None:
            code = indices.astype(np.int64 if radix > _INT32_MAX else np.int32)
        else:
            if size * radix > _INT32_MAX and code.dtype != np.int64:
                code = code.astype(np.int64)
            code *= radix
            code += indices
        size *= radix
        if code is not None and size > 4 * rows + 1024:
            encoded = pc.dictionary_encode(
                numbers(code, pa.from_numpy_dtype(code.dtype))
            )
            code = to_numpy(encoded.indices).astype(np.int32)
            uniques = to_numpy(encoded.dictionary).astype(np.int64)
            size = len(uniques)
        steps.append((radix, uniques))
    if code is None:
        return np.zeros(rows, dtype=np.int64), size, steps
    return code.astype(np.int64, copy=False), size, steps


def group_digits(number: _I64, steps: Sequence[tuple[int, _I64 | None]]) -> list[_I64]:
    """The key columns' indices of groups `number` (:func:`group_codes`' steps)."""
    digits = []
    for radix, uniques in steps[::-1]:
        if uniques is not None:
            number = uniques[number]
        number, index = np.divmod(number, radix)
        digits.append(index)
    return digits[::-1]


def bad_rows(source: str, column: str, what: str, rows: _I64) -> NoReturn:
    """Raise naming the bad rows (the first five) by their number in the file."""
    shown = ", ".join(map(str, rows[:5])) + (
        f" and {rows.size - 5} more" if rows.size > 5 else ""
    )
    msg = f"{source}: {column} is {what} in row(s) {shown}.\nHint: every sample row needs a model, task, metric and a finite numeric value."
    raise InputError(msg)


def _firsts(group: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Where each group first occurs (``dictionary_encode`` numbers them in that order)."""
    seen = np.maximum.accumulate(group)
    return np.flatnonzero(np.r_[True, seen[1:] > seen[:-1]])


def _sum(group: npt.NDArray[np.intp], weights: npt.ArrayLike, size: int) -> _F64:
    """Per-group sums of `weights` (``np.bincount``: one pass, no sort)."""
    return np.bincount(group, weights=weights, minlength=size).astype(
        np.float64, copy=False
    )


def _fits(type_: pa.DataType, name: str) -> bool:
    """Whether a column's type can be read as the contract's."""
    if pa.types.is_dictionary(type_):
        type_ = type_.value_type
    expected = SAMPLES.field(name).type
    if name == "value":
        return bool(
            pa.types.is_floating(type_)
            or pa.types.is_integer(type_)
            or pa.types.is_boolean(type_)
        )
    if pa.types.is_integer(expected):
        return bool(pa.types.is_integer(type_))
    if pa.types.is_string(expected):
        return bool(pa.types.is_string(type_) or pa.types.is_large_string(type_))
    return bool(type_ == expected)


def variant_of(
    path: Path, stamp: str, seen: dict[Path, tuple[str, str, str, bool]]
) -> tuple[str, str, str, bool]:
    """A sample file's variant keys: from the sibling results file, else the folders.

    Args:
        path: A ``samples_<task>_<stamp>.jsonl`` file.
        stamp: Its timestamp (the sibling is ``results_<stamp>.json``).
        seen: Results files already read, reused across calls.
    """
    results = path.with_name(f"results_{stamp}.json")
    if results not in seen:
        if results.is_file():
            from lbnorm.readers.harness import (
                parse_results_file,  # results beside samples only
            )

            got = parse_results_file(results, results.read_bytes(), [])
            seen[results] = (got.model, got.precision, got.revision, got.chat_template)
        else:
            model = f"{path.parent.parent.name}/{path.parent.name}"
            seen[results] = (model, "", "", False)
    return seen[results]
