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
  line, which finds and names the bad line and key.
- **Sample tables** (Parquet, :data:`lbnorm.schemas.SAMPLES`): one row per
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
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from lbnorm.errors import InputError
from lbnorm.readers.files import json_lines
from lbnorm.schemas import KEY_COLUMNS, SAMPLES

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "REQUIRED_SAMPLE_COLUMNS",
    "SAMPLES_FILE",
    "aggregate_samples_files",
    "aggregate_samples_table",
    "is_samples_table",
    "read_samples",
]

_loads: Callable[[bytes], Any]
try:
    import orjson

    _loads = orjson.loads
except ImportError:  # pragma: no cover - orjson is an optional extra
    _loads = json.loads

#: How harness sample files are named.
SAMPLES_FILE = re.compile(
    r"^samples_(?P<task>.+)_(?P<timestamp>\d{4}-\d{2}-\d{2}T\d{2}[-:]\d{2}[-:]\d{2}(?:\.\d+)?)\.jsonl$"
)
#: Columns a sample table must have; the others of :data:`SAMPLES` are optional.
REQUIRED_SAMPLE_COLUMNS: tuple[str, ...] = (
    "model",
    "task",
    "metric",
    "doc_id",
    "value",
)
_OUTPUT = [
    *KEY_COLUMNS,
    "benchmark",
    "subtask",
    "metric",
    "raw_score",
    "stderr",
    "n_samples",
    "source",
    "_row",
]
_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
# A group key packs (model, revision, precision, chat template, suite pair) codes
# into one int64: 20 + 24 + 8 + 1 + 10 bits.
_BITS = {"model": 20, "revision": 24, "precision": 8, "pair": 10}
_HINT_TABLE = (
    "Hint: a sample table has the columns of lbnorm.schemas.SAMPLES (docs/samples.md)."
)
_BATCH_ROWS = 1 << 20
_GROUPED = ("model", "precision", "revision", "chat_template", "task", "metric")
_COMPACT_ROWS = 1 << 22


def is_samples_table(path: Path) -> bool:
    """Whether a Parquet file holds per-sample values (``task`` and ``value``).

    An unreadable file is not one: the score-table reader reports it.
    """
    try:
        names = set(pq.ParquetFile(path).schema_arrow.names)
    except (pa.ArrowException, OSError):
        return False
    return {"task", "value"} <= names and "raw_score" not in names


def read_samples(
    paths: Sequence[Path], subtasks: pd.DataFrame, *, taken: pd.DataFrame | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Aggregate sample files and tables; scores given elsewhere win.

    Args:
        paths: ``samples_*.jsonl`` files and Parquet sample tables.
        subtasks: The suite's subtask table (``task``, ``metric``, ``benchmark``,
            ``subtask``).
        taken: Scores read from results files (the key columns, ``benchmark``,
            ``subtask`` and ``source``): a (variant, subtask) found there is not
            taken from the samples, whose file is then superseded by it.

    Returns:
        The scores (the columns of :func:`lbnorm.readers.harness.read_results_files`)
        and a catalog row per file: ``path``, ``format`` (``lm-eval-samples`` or
        ``sample-table``), ``rows``, ``superseded_by`` and ``n_ignored``.

    Raises:
        InputError: A file cannot be read, or holds a bad line, row or value.
    """
    import pandas as pd  # the aggregation still builds frames

    jsonl = [path for path in paths if path.suffix.lower() == ".jsonl"]
    frames, catalogs = [], []
    if jsonl:
        scores, catalog = aggregate_samples_files(jsonl, subtasks)
        frames.append(scores)
        catalogs.append(catalog.assign(format="lm-eval-samples"))
    for path in paths:
        if path.suffix.lower() != ".jsonl":
            scores, n_ignored = aggregate_samples_table(path, subtasks)
            frames.append(scores)
            catalogs.append(
                pd.DataFrame(
                    {
                        "path": [str(path)],
                        "format": ["sample-table"],
                        "rows": [len(scores)],
                        "superseded_by": [None],
                        "n_ignored": [n_ignored],
                    }
                )
            )
    scores = pd.concat(frames, ignore_index=True)
    catalog = pd.concat(catalogs, ignore_index=True)
    if taken is not None and len(taken) and len(scores):
        keys = [*KEY_COLUMNS, "benchmark", "subtask"]
        given = taken[[*keys, "source"]].astype(
            {k: str for k in keys if k != "chat_template"}
        )
        given = given.drop_duplicates(keys)
        match = (
            scores[keys]
            .astype(given[keys].dtypes.to_dict())
            .merge(given, on=keys, how="left")
        )
        won = match["source"].notna().to_numpy()
        by_file = pd.DataFrame(
            {"path": scores["source"][won], "by": match["source"][won]}
        )
        winner = by_file.groupby("path", sort=False)["by"].first()
        scores = scores[~won].reset_index(drop=True)
        used = scores.groupby("source", sort=False).size()
        rows = catalog["path"].map(used).fillna(0).astype(np.int64)
        lost = (rows == 0) & (catalog["rows"] > 0) & catalog["superseded_by"].isna()
        catalog["superseded_by"] = catalog["superseded_by"].where(
            ~lost, catalog["path"].map(winner)
        )
        catalog["rows"] = rows
    return scores, catalog[["path", "format", "rows", "superseded_by", "n_ignored"]]


def aggregate_samples_files(
    paths: Sequence[Path], subtasks: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Aggregate harness sample files into subtask scores, newest file per task.

    Args:
        paths: ``samples_<task>_<timestamp>.jsonl`` files.
        subtasks: The suite's subtask table.

    Returns:
        The scores and a catalog row per file (``path``, ``rows``,
        ``superseded_by``, ``n_ignored``: 1 for a task the suite does not use).

    Raises:
        InputError: A misnamed file, a line that is not a JSON object, a missing,
            null or non-numeric metric, a repeated ``doc_id``, or no documents.
    """
    import pandas as pd  # the aggregation still builds frames

    subtasks = subtasks.reset_index(drop=True)
    known: dict[Path, tuple[str, str, str, bool]] = {}
    rows: list[tuple[Any, ...]] = []
    for path in paths:
        match = SAMPLES_FILE.match(path.name)
        if match is None:
            msg = f"{path}: not named samples_<task>_<timestamp>.jsonl.\nHint: keep the harness's file names; lbnorm reads the task from them."
            raise InputError(msg)
        task, stamp = match["task"], match["timestamp"]
        used = bool((subtasks["task"] == task).any())
        variant = _variant_of(path, stamp, known) if used else ("", "", "", False)
        day, _, clock = stamp.partition("T")
        clock, _, fraction = clock.replace(":", "-").partition(".")
        rows.append((str(path), task, *variant, f"{day}T{clock}.{fraction:0<6}", used))
    files = pd.DataFrame(rows, columns=["path", "task", *KEY_COLUMNS, "stamp", "used"])
    groups = [*KEY_COLUMNS, "task"]
    order = files.sort_values([*groups, "stamp", "path"]).index
    newest = files.loc[order].groupby(groups)["path"].transform("last")
    superseded = newest.where(
        (newest != files.loc[order, "path"]) & files.loc[order, "used"]
    ).reindex(files.index)
    sums = _Sums(subtasks)
    chosen = files[files["used"] & superseded.isna()]
    for entry in chosen.itertuples(index=False):  # one file, not one sample, a step
        code = sums.variant_code(
            (entry.model, entry.precision, entry.revision, entry.chat_template)
        )
        wanted = subtasks.index[subtasks["task"] == entry.task]
        metrics = subtasks["metric"].take(wanted.to_numpy()).astype(str).tolist()
        parsed = _read_jsonl(Path(str(entry.path)), metrics)
        for pair, (values, documents, is_list) in zip(wanted, parsed, strict=True):
            sums.add_values(
                code | int(pair), values, documents, is_list, str(entry.path)
            )
    scores = sums.result()
    per_file = scores.groupby("source", sort=False).size()
    catalog = pd.DataFrame(
        {
            "path": files["path"],
            "rows": files["path"].map(per_file).fillna(0).astype(np.int64),
            "superseded_by": superseded.astype(object).where(superseded.notna(), None),
            "n_ignored": (~files["used"]).astype(np.int64),
        }
    )
    return scores, catalog


def aggregate_samples_table(
    path: Path, subtasks: pd.DataFrame, *, batch_rows: int = _BATCH_ROWS
) -> tuple[pd.DataFrame, int]:
    """Aggregate a Parquet sample table, streamed a batch at a time.

    Args:
        path: A Parquet sample table (:data:`lbnorm.schemas.SAMPLES`).
        subtasks: The suite's subtask table.
        batch_rows: Rows per batch read (memory is about 80 bytes per row).

    Returns:
        The scores, one row per (variant, suite subtask), and the number of rows
        whose (task, metric) the suite does not use.

    Raises:
        InputError: Unreadable, a required column missing, a column of the wrong
            type, or a row with a null or non-finite value (named by row number).

    Examples:
        >>> import tempfile
        >>> from lbnorm.suites import load_suite
        >>> path = Path(tempfile.mkdtemp()) / "samples.parquet"
        >>> pq.write_table(pa.table({"model": ["a/b"] * 3, "task": ["leaderboard_gpqa_main"] * 3,
        ...     "metric": ["acc_norm,none"] * 3, "doc_id": [0, 1, 2], "value": [1.0, 0.0, 1.0]}), path)
        >>> scores, ignored = aggregate_samples_table(path, load_suite("openllm-v2").subtask_table())
        >>> scores[["subtask", "raw_score", "stderr", "n_samples"]].round(4).to_numpy().tolist()
        [['main', 0.6667, 0.3333, 3]]
    """
    try:
        schema = pq.read_schema(path)
        text = ["model", "precision", "revision", "task", "metric"]
        file = pq.ParquetFile(path, read_dictionary=[n for n in text if n in schema.names])  # fmt: skip
    except (pa.ArrowException, OSError) as exc:
        msg = f"{path}: cannot read as Parquet: {exc}.\nHint: check that the file is complete."
        raise InputError(msg) from exc
    if missing := [
        name for name in REQUIRED_SAMPLE_COLUMNS if name not in schema.names
    ]:
        msg = f"{path}: sample table without column(s) {', '.join(missing)}; found {schema.names}.\n{_HINT_TABLE}"
        raise InputError(msg)
    for name in schema.names:
        if name in SAMPLES.names and not _fits(schema.field(name).type, name):
            msg = f"{path}: column {name!r} has type {schema.field(name).type}, expected {SAMPLES.field(name).type}.\n{_HINT_TABLE}"
            raise InputError(msg)
    columns = [
        name for name in SAMPLES.names if name in schema.names and name != "doc_id"
    ]
    sums = _Sums(subtasks)
    ignored, first = 0, 1
    batches = _prefetched(file.iter_batches(batch_size=batch_rows, columns=columns))
    try:
        for batch in batches:
            ignored += sums.add_rows(batch, source=str(path), first_row=first)
            first += batch.num_rows
    except (pa.ArrowException, OSError) as exc:  # a damaged page or row group
        msg = f"{path}: cannot read rows from row {first} on: {exc}.\nHint: check that the file is complete."
        raise InputError(msg) from exc
    return sums.result(), ignored


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
    source: list[str]


class _Sums:
    """Group codes and mergeable partial sums of sample values."""

    def __init__(self, subtasks: pd.DataFrame) -> None:
        import pandas as pd  # the aggregation still builds frames

        self._subtasks = subtasks.reset_index(drop=True)
        if len(self._subtasks) >= 1 << _BITS["pair"]:
            msg = "suite has more than 1,023 subtasks.\nHint: split the suite."
            raise InputError(msg)
        self._codes: dict[str, dict[str, int]] = {
            "model": {},
            "revision": {},
            "precision": {},
        }
        tasks = pd.Index(self._subtasks["task"].unique())
        metrics = pd.Index(self._subtasks["metric"].unique())
        self._suite = {"task": tasks, "metric": metrics}
        # (task index, metric index) -> suite row; the last row and column: unknown
        self._pairs = np.full((len(tasks) + 1, len(metrics) + 1), -1, dtype=np.int64)
        self._pairs[
            tasks.get_indexer(self._subtasks["task"]),
            metrics.get_indexer(self._subtasks["metric"]),
        ] = self._subtasks.index
        self._parts: list[_Partial] = []
        self._rows = 0

    def variant_code(self, variant: tuple[Any, ...]) -> int:
        """The packed key of one variant, with a zero subtask code."""
        model, precision, revision, chat = variant
        key = self._pack(
            self._code("model", [str(model)]),
            self._code("revision", [str(revision)]),
            self._code("precision", [str(precision)]),
            np.array([int(chat)], dtype=np.int64),
            np.zeros(1, dtype=np.int64),
        )
        return int(key[0])

    def add_values(
        self, key: int, values: _F64, documents: int, is_list: bool, source: str
    ) -> None:
        """Add one group's values (one sample file's metric)."""
        group, count = np.zeros(values.size, dtype=np.int64), np.array([values.size])
        plain, shift, residual, m2 = _moments(group, values, count.astype(np.float64))
        self._add(
            _Partial(
                key=np.array([key], dtype=np.int64),
                count=count.astype(np.float64),
                documents=np.array([float(documents)]),
                plain=plain,
                shift=shift,
                total=residual,
                m2=m2,
                listed=np.array([float(values.size if is_list else 0)]),
                source=[source],
            )
        )

    def add_rows(self, batch: pa.RecordBatch, *, source: str, first_row: int) -> int:
        """Add a batch of sample-table rows; return the rows the suite does not use."""
        import pandas as pd  # the aggregation still builds frames

        rows = batch.num_rows
        value = batch.column("value")
        if value.null_count:
            self._bad_rows(source, first_row, "value", "null", value.is_null())
        values = np.asarray(pc.cast(value, pa.float64()).to_numpy(zero_copy_only=False))
        # each row's group: a mixed-radix number of its dictionary indices,
        # renumbered densely (pd.factorize) if it outgrows the batch
        code, size = np.zeros(rows, dtype=np.int64), 1
        columns, steps = [], []
        for name in _GROUPED:
            indices, mapping = self._encoded(batch, name, source, first_row)
            columns.append(mapping)
            radix, uniques = 1, None
            if indices is not None and len(mapping) > 1:
                radix = len(mapping)
                code *= radix
                code += indices
                size *= radix
                if size > 4 * rows + 1024:
                    dense, uniques = pd.factorize(code)
                    code, size = dense.astype(np.int64), len(uniques)
            steps.append((radix, uniques))
        count = np.bincount(code, minlength=size).astype(np.float64)
        present = np.flatnonzero(count)
        plain, shift, residual, m2 = _moments(code, values, count)
        if not np.isfinite(m2[present]).all():
            bad = pa.array(~np.isfinite(values))
            self._bad_rows(source, first_row, "value", "not finite", bad)
        if "item" in batch.schema.names:
            item = pc.fill_null(batch.column("item"), -1).to_numpy(zero_copy_only=False)
            documents, listed = _sum(code, item <= 0, size), _sum(code, item >= 0, size)
        else:
            documents, listed = count, np.zeros(size)
        # each present group's dictionary indices, read back from its number
        number, found = present, []
        for (radix, uniques), mapping in zip(steps[::-1], columns[::-1], strict=True):
            if uniques is not None:
                number = np.asarray(uniques)[number]
            number, index = np.divmod(number, radix)
            found.append(mapping[index])
        metric, task, chat, revision, precision, model = found
        pair = self._pairs[task, metric]
        kept = pair >= 0
        groups = present[kept]
        self._add(
            _Partial(
                key=self._pack(model, revision, precision, chat, pair)[kept],
                count=count[groups],
                documents=documents[groups],
                plain=plain[groups],
                shift=shift[groups],
                total=residual[groups],
                m2=m2[groups],
                listed=listed[groups],
                source=[source] * len(groups),
            )
        )
        return int(count[present[~kept]].sum())

    def result(self) -> pd.DataFrame:
        """The scores: mean, ``mean_stderr`` and documents per group."""
        import pandas as pd  # the aggregation still builds frames

        if not self._parts:
            return pd.DataFrame({name: pd.Series(dtype=object) for name in _OUTPUT})
        merged = self._merged()
        count, listed = merged.count, merged.listed
        mixed = (listed > 0) & (listed < count)
        key, subtasks = merged.key, self._subtasks
        pair = key & ((1 << _BITS["pair"]) - 1)
        if mixed.any():
            at = subtasks.iloc[int(pair[np.flatnonzero(mixed)[0]])]
            msg = f"{merged.source[int(np.flatnonzero(mixed)[0])]}: task {at['task']!r} metric {at['metric']!r} mixes rows with and without 'item'.\nHint: give every row of a list-valued metric its item position, and none to the others."
            raise InputError(msg)
        with np.errstate(invalid="ignore", divide="ignore"):
            stderr = np.sqrt(np.maximum(merged.m2, 0.0) / (count - 1)) / np.sqrt(count)
        stderr[(count < 2) | (listed > 0)] = np.nan  # the harness's "N/A"

        def text(values: Any, codes: _I64) -> Any:  # few distinct strings, per row
            return pd.array(list(values), dtype="str").take(codes)

        def code(name: str, shift: int) -> _I64:
            return np.asarray((key >> shift) & ((1 << _BITS[name]) - 1))

        return pd.DataFrame(
            {
                "model": text(self._codes["model"], code("model", 43)),
                "precision": text(self._codes["precision"], code("precision", 11)),
                "revision": text(self._codes["revision"], code("revision", 19)),
                "chat_template": ((key >> _BITS["pair"]) & 1).astype(bool),
                "benchmark": text(subtasks["benchmark"], pair),
                "subtask": text(subtasks["subtask"], pair),
                "metric": text(subtasks["metric"], pair),
                "raw_score": merged.plain / count,  # the harness's sum / len
                "stderr": stderr,
                "n_samples": merged.documents.astype(np.int64),
                "source": pd.array(merged.source, dtype="str"),
                "_row": text(subtasks["task"] + "/" + subtasks["metric"], pair),
            }
        )

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
        import pandas as pd  # the aggregation still builds frames

        parts = self._parts
        key = np.concatenate([p.key for p in parts])
        group, uniques = pd.factorize(key)
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
        sources = [s for p in parts for s in p.source]
        return _Partial(
            key=np.asarray(uniques, dtype=np.int64),
            count=count,
            documents=add("documents"),
            plain=add("plain"),
            shift=shift,
            total=total,
            m2=m2,
            listed=add("listed"),
            source=[sources[i] for i in first],
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
        if len(known) > 1 << _BITS[name]:
            msg = f"more than {1 << _BITS[name]:,} distinct {name} values in the sample inputs.\nHint: split the inputs and run them separately."
            raise InputError(msg)
        return codes

    def _encoded(
        self, batch: pa.RecordBatch, name: str, source: str, first_row: int
    ) -> tuple[npt.NDArray[np.integer[Any]] | None, _I64]:
        """A key column as per-row indices (None: one value) into per-entry codes.

        The codes are the registry's (model, precision, revision), 0/1 (chat
        template), or the index among the suite's tasks or metrics (the last
        index: not the suite's).
        """
        if name not in batch.schema.names:  # left out: '' or false
            default = [0] if name == "chat_template" else self._code(name, [""])
            return None, np.asarray(default, dtype=np.int64)
        column = batch.column(name)
        if column.null_count and name not in ("precision", "revision"):
            self._bad_rows(source, first_row, name, "null", column.is_null())
        if name == "chat_template":
            flags = column.to_numpy(zero_copy_only=False)
            return flags.astype(np.int64), np.array([0, 1], dtype=np.int64)
        if not pa.types.is_dictionary(column.type):
            column = pc.dictionary_encode(column)
        entries = [*column.dictionary.cast(pa.string()).to_pylist(), ""]
        indices = column.indices
        if indices.null_count:  # precision or revision: ''
            indices = pc.fill_null(indices, len(entries) - 1)
        if name in self._suite:
            found = self._suite[name].get_indexer(entries)
            mapping = np.where(found < 0, len(self._suite[name]), found)
        else:
            mapping = self._code(name, entries)
        rows = np.asarray(indices.to_numpy(zero_copy_only=False))  # int32: no copy
        return rows, np.asarray(mapping, dtype=np.int64)

    @staticmethod
    def _bad_rows(
        source: str, first_row: int, column: str, what: str, mask: pa.Array
    ) -> None:
        rows = (
            np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False))) + first_row
        )
        shown = ", ".join(map(str, rows[:5])) + (
            f" and {rows.size - 5} more" if rows.size > 5 else ""
        )
        msg = f"{source}: {column} is {what} in row(s) {shown}.\nHint: every sample row needs a model, task, metric and a finite numeric value."
        raise InputError(msg)


def _moments(group: _I64, values: _F64, count: _F64) -> tuple[_F64, _F64, _F64, _F64]:
    """Per group: sum, mean m (rounded), sum of (x - m), and sum of (x - mean)^2.

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
    return plain, shift, residual, m2


def _firsts(group: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Where each group first occurs (``pd.factorize`` numbers them in that order)."""
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


def _prefetched(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Yield `batches`, decoding the next on a second thread (Arrow frees the GIL)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        ahead = pool.submit(next, batches, None)
        while (batch := ahead.result()) is not None:
            ahead = pool.submit(next, batches, None)
            yield batch


def _variant_of(
    path: Path, stamp: str, seen: dict[Path, tuple[str, str, str, bool]]
) -> tuple[str, str, str, bool]:
    """The variant keys: from the sibling results file, else the folders."""
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


def _read_jsonl(path: Path, metrics: list[str]) -> list[tuple[_F64, int, bool]]:
    """Per suite metric (``name,filter``) of a file: values, documents, list-ness."""
    wanted = [metric.partition(",")[::2] for metric in metrics]
    try:
        with path.open("rb") as handle:
            first = handle.readline()
        head = _loads(first)
        fields = {name: _arrow_type(head.get(name)) for name, _ in wanted}
        schema = pa.schema(
            [("doc_id", pa.int64()), ("filter", pa.string()), *fields.items()]
        )
        table = pj.read_json(
            path,
            read_options=pj.ReadOptions(block_size=1 << 26),
            parse_options=pj.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"
            ),
        )
        return [_metric_values(table, name, kept or "none") for name, kept in wanted]
    except (pa.ArrowException, ValueError, TypeError, AttributeError, OSError):
        pass  # the slow path below finds and names what is wrong
    return _read_lines(path, wanted)


def _arrow_type(value: object) -> pa.DataType:
    if isinstance(value, list):
        first = value[0] if value else 0.0
        return pa.list_(pa.bool_() if isinstance(first, bool) else pa.float64())
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int | float):
        return pa.float64()
    msg = "not a metric value"  # the line-by-line reader words the error
    raise TypeError(msg)


def _metric_values(table: pa.Table, name: str, kept: str) -> tuple[_F64, int, bool]:
    rows = table.filter(pc.equal(pc.fill_null(table.column("filter"), "none"), kept))
    column, doc_id = rows.column(name), rows.column("doc_id")
    is_list = pa.types.is_list(column.type)
    items = pc.list_flatten(column) if is_list else column
    unique = pc.count_distinct(doc_id).as_py()
    if (
        not rows.num_rows
        or column.null_count
        or items.null_count
        or doc_id.null_count
        or unique != rows.num_rows
    ):
        msg = "a line is missing, repeated or null"  # the slow path names it
        raise ValueError(msg)
    values = np.asarray(pc.cast(items, pa.float64()).to_numpy(zero_copy_only=False))
    if not values.size or not np.isfinite(values).all():
        msg = "no or non-finite values"
        raise ValueError(msg)
    return values, rows.num_rows, is_list


def _read_lines(
    path: Path, wanted: list[tuple[str, str]]
) -> list[tuple[_F64, int, bool]]:
    """The slow, exact path: each line parsed alone; the first problem is raised."""
    collected: dict[tuple[str, str], list[Any]] = {pair: [] for pair in wanted}
    doc_lines: dict[tuple[str, object], int] = {}
    filters = {kept or "none" for _, kept in wanted}
    hint = "Hint: a harness samples file has one JSON object per line, with doc_id, filter and each metric as a number, boolean or list of them."
    for number, document in json_lines(path, hint=hint, loads=_loads):
        kept = document.get("filter") or "none"
        if kept not in filters:
            continue
        doc = document.get("doc_id")
        if isinstance(doc, bool) or not isinstance(doc, int):
            msg = f"{path}: line {number}: 'doc_id' is {doc!r}, not an integer.\n{hint}"
            raise InputError(msg)
        if (kept, doc) in doc_lines:
            msg = f"{path}: line {number}: doc_id {doc} for filter {kept!r} repeats line {doc_lines[kept, doc]}.\nHint: keep one line per document and filter (merge or drop duplicate runs)."
            raise InputError(msg)
        doc_lines[kept, doc] = number
        for name, metric_filter in wanted:
            if (metric_filter or "none") == kept:
                collected[name, metric_filter].append(
                    _checked(path, number, name, document.get(name, _MISSING))
                )
    out = []
    for name, metric_filter in wanted:
        values = collected[name, metric_filter]
        if not values:
            msg = f"{path}: no documents with filter {metric_filter or 'none'!r} and metric {name!r}: the task has no documents.\nHint: the file is empty or of another filter; re-run the task with --log_samples."
            raise InputError(msg)
        is_list = isinstance(values[0], list)
        if any(isinstance(v, list) != is_list for v in values):
            msg = f"{path}: {name!r} is a list in some lines and a number in others.\nHint: a metric is either one value per document or a list per document."
            raise InputError(msg)
        flat = [x for v in values for x in v] if is_list else values
        if not flat:
            msg = f"{path}: {name!r} lists are empty in every line.\n{hint}"
            raise InputError(msg)
        out.append((np.array(flat, dtype=np.float64), len(values), is_list))
    return out


_MISSING = object()


def _checked(path: Path, number: int, name: str, value: object) -> Any:
    """A metric value, or an :class:`InputError` naming the line and key."""
    items = value if isinstance(value, list) else [value]
    for item in items:
        if (
            item is _MISSING
            or item is None
            or not isinstance(item, int | float)
            or (isinstance(item, float) and not math.isfinite(item))
        ):
            what = (
                "missing"
                if item is _MISSING
                else f"{item!r}, not a finite number or boolean"
            )
            msg = f"{path}: line {number}: {name!r} is {what}.\nHint: check the suite's metric name for this task; every document needs the metric as a number, boolean or list of them."
            raise InputError(msg)
    return value
