"""The fused summing kernel of ``fused.py`` (numba, benchmark-only), cached on disk.

A module of its own so that ``cache=True`` can key the compiled code on this
file: a later process loads it instead of compiling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator, unused-ignore]
def fused(  # the same operations per row as FixedPoint.terms, summed per cell
    raw: Any, se: Any, lower: Any, factors: Any, starts: Any, out: Any
) -> None:
    """Per (variant, benchmark) cell, the four fixed-point sums of lbnorm's summing step."""
    for row in range(raw.shape[0]):
        for cell in range(starts.size - 1):
            total_raw = total_normalized = total_variance = total_raw_variance = 0.0
            for column in range(starts[cell], starts[cell + 1]):
                x, e = raw[row, column], se[row, column]
                normalized = max((x - lower[column]) * factors[1, column], 0.0)
                square = e * e
                total_raw += np.rint(x * factors[0, column])
                total_normalized += np.rint(normalized)
                total_variance += np.rint(square * factors[2, column])
                total_raw_variance += np.rint(square * factors[3, column])
            out[0, row, cell] = total_raw
            out[1, row, cell] = total_normalized
            out[2, row, cell] = total_variance
            out[3, row, cell] = total_raw_variance
