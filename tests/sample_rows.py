"""Harness samples files as the rows of a long sample table, read with ``json`` alone.

An oracle for :mod:`lbnorm.readers.samples`: the tests that build a Parquet
sample table from the same files the reader parses share this one routine.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path

COLUMNS = ("task", "metric", "doc_id", "item", "value")


def sample_rows(
    files: Iterable[Path], metrics_of: Callable[[str], Iterable[str]]
) -> dict[str, list[object]]:
    """Per column of :data:`COLUMNS`, one value per (document, metric, item).

    Args:
        files: ``samples_<task>_<timestamp>.jsonl`` files.
        metrics_of: A task's ``metric,filter`` names, as the suite lists them.
    """
    rows: dict[str, list[object]] = {name: [] for name in COLUMNS}
    for path in files:
        task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
        metrics = list(metrics_of(task))
        for line in path.read_text().splitlines():
            record = json.loads(line)
            for metric in metrics:
                value = record[metric.split(",")[0]]
                items = enumerate(value) if isinstance(value, list) else [(None, value)]
                for item, item_value in items:
                    cells = (task, metric, record["doc_id"], item, float(item_value))
                    for name, cell in zip(COLUMNS, cells, strict=True):
                        rows[name].append(cell)
    return rows
