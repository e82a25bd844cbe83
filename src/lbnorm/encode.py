"""Keys to integer codes: model variants and suite subtasks.

The kernel works on codes, not strings. Variant codes follow the sorted order of
(model, precision, revision, chat_template), so every output sorted by code is
sorted by key, whatever the input order.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm.schemas import KEY_COLUMNS

__all__ = ["encode_subtasks", "encode_variants"]


def encode_variants(scores: pd.DataFrame) -> tuple[npt.NDArray[np.int64], pd.DataFrame]:
    """Factorize the four variant key columns into one sorted code per row.

    Args:
        scores: Frame with the :data:`KEY_COLUMNS`.

    Returns:
        Per row, its variant's code; and the variants (key columns), one row per
        code, sorted by key.

    Examples:
        >>> scores = pd.DataFrame({"model": ["b", "a", "b"], "precision": ["", "", ""],
        ...     "revision": ["", "", ""], "chat_template": [False, False, True]})
        >>> encode_variants(scores)[0].tolist()
        [1, 0, 2]
    """
    combined = np.zeros(len(scores), dtype=np.int64)
    for name in KEY_COLUMNS:
        codes, values = pd.factorize(scores[name], sort=True)
        # Re-densify after each column so the mixed-radix code cannot overflow;
        # np.unique sorts, so code order stays the lexicographic key order.
        combined = np.unique(combined * len(values) + codes, return_inverse=True)[1]
    _, first, variant = np.unique(combined, return_index=True, return_inverse=True)
    variants = scores[list(KEY_COLUMNS)].iloc[first].reset_index(drop=True)
    return variant.astype(np.int64), variants


def encode_subtasks(
    scores: pd.DataFrame, subtasks: pd.DataFrame
) -> npt.NDArray[np.int64]:
    """Map each row's (benchmark, subtask) to its row in the suite's table.

    Args:
        scores: Frame with ``benchmark`` and ``subtask``.
        subtasks: The suite's subtask table (:meth:`Suite.subtask_table`).

    Returns:
        Per row, the suite subtask index, or -1 where the suite has no such subtask.
    """
    pairs = pd.MultiIndex.from_arrays([scores["benchmark"], scores["subtask"]])
    suite_pairs = pd.MultiIndex.from_arrays(
        [subtasks["benchmark"], subtasks["subtask"]]
    )
    return np.asarray(suite_pairs.get_indexer(pairs), dtype=np.int64)
