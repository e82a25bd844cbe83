"""Validation of long-format scores against the contract and the suite.

Every failure is collected, not just the first, into one :class:`ValidationError`
whose ``failures`` frame has a row per bad score (``check``, ``source``, ``row``,
``column``, ``value``), as pandera's ``SchemaErrors`` does.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from lbnorm.errors import ValidationError

__all__ = ["UnknownSubtasks", "validate_scores"]

#: What to do with rows whose (benchmark, subtask) the suite does not define.
UnknownSubtasks = Literal["error", "ignore"]

_HINTS = {
    "non_finite_score": "raw_score must be a number in [0, 1]; fix or remove the row.",
    "percent_scale": "raw_score looks like a percentage; lbnorm expects fractions in [0, 1]: divide by 100.",
    "out_of_range": "raw_score must be a fraction in [0, 1].",
    "unknown_subtask": "the suite has no such (benchmark, subtask); fix the names (`lbnorm suites show SUITE` lists them), use another --suite, or pass --unknown ignore.",
    "duplicate_score": "each (model, precision, revision, chat_template, benchmark, subtask) must appear once; remove the duplicates or give them distinct variant keys.",
    "bad_stderr": "stderr must be a finite number >= 0, or empty.",
    "bad_n_samples": "n_samples must be a positive integer, or empty.",
    "empty_model": "every row needs a non-empty model name.",
}


def validate_scores(
    scores: pd.DataFrame,
    subtask_codes: npt.NDArray[np.int64],
    variant_codes: npt.NDArray[np.int64],
    *,
    unknown: UnknownSubtasks = "error",
) -> npt.NDArray[np.bool_]:
    """Check every score; raise one error listing all failures.

    Args:
        scores: Long-format scores with ``source`` and ``_row``.
        subtask_codes: Per row, the suite subtask index (-1 if unknown).
        variant_codes: Per row, the model variant code.
        unknown: ``error`` reports unknown subtasks; ``ignore`` drops them.

    Returns:
        The mask of rows to keep (False only for ignored unknown subtasks).

    Raises:
        ValidationError: Any check failed; ``failures`` holds every one.
    """
    raw = scores["raw_score"].to_numpy(dtype=np.float64, na_value=np.nan)
    stderr = scores["stderr"].to_numpy(dtype=np.float64, na_value=np.nan)
    n_samples = scores["n_samples"].to_numpy(dtype=np.float64, na_value=np.nan)
    is_unknown = subtask_codes < 0
    keep = ~is_unknown if unknown == "ignore" else np.ones(len(scores), dtype=bool)
    is_finite = np.isfinite(raw)
    checks: dict[str, tuple[npt.NDArray[np.bool_], str]] = {
        "empty_model": (scores["model"].to_numpy() == "", "model"),
        "non_finite_score": (~is_finite, "raw_score"),
        "percent_scale": (is_finite & (raw > 1.0) & (raw <= 100.0), "raw_score"),
        "out_of_range": (is_finite & ((raw < 0.0) | (raw > 100.0)), "raw_score"),
        "bad_stderr": (
            ~np.isnan(stderr) & ~((stderr >= 0) & np.isfinite(stderr)),
            "stderr",
        ),
        "bad_n_samples": (~np.isnan(n_samples) & (n_samples <= 0), "n_samples"),
    }
    if unknown == "error":
        checks["unknown_subtask"] = (is_unknown, "subtask")
    checks["duplicate_score"] = (
        _duplicated(variant_codes, subtask_codes, keep),
        "subtask",
    )
    frames = [
        _failures(scores, mask & keep, check, column)
        for check, (mask, column) in checks.items()
        if (mask & keep).any()
    ]
    if frames:
        raise ValidationError.from_failures(pd.concat(frames, ignore_index=True))
    return keep


def _duplicated(
    variant: npt.NDArray[np.int64],
    subtask: npt.NDArray[np.int64],
    keep: npt.NDArray[np.bool_],
) -> npt.NDArray[np.bool_]:
    """Mark every row whose (variant, subtask) appears more than once."""
    width = int(subtask.max(initial=0)) + 2
    linear = variant * width + (subtask + 1)
    linear = np.where(keep, linear, -1)
    _, inverse, counts = np.unique(linear, return_inverse=True, return_counts=True)
    return np.asarray((counts[inverse] > 1) & keep, dtype=np.bool_)


def _failures(
    scores: pd.DataFrame, mask: npt.NDArray[np.bool_], check: str, column: str
) -> pd.DataFrame:
    rows = scores.loc[mask]
    described = (
        rows["model"].astype(str)
        + " / "
        + rows["benchmark"].astype(str)
        + " / "
        + rows["subtask"].astype(str)
    )
    value = rows[column] if column != "subtask" else described
    return pd.DataFrame(
        {
            "check": check,
            "source": rows["source"].astype(str).to_numpy(),
            "row": rows["_row"].astype(str).to_numpy(),
            "column": column,
            "value": value.astype(str).to_numpy(),
            "hint": _HINTS[check],
        }
    )
