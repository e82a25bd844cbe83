"""Engines: score batches in, a :class:`~lbnorm.result.Result` out, three ways.

Every engine is a module with one function of the same shape, :class:`Engine`::

    compute(inputs: Inputs, suite: Suite, options: RunOptions) -> Result

* :mod:`~lbnorm.engines.memory`: every score in a dense variant x subtask store;
  the one that builds the subtask table (the default);
* :mod:`~lbnorm.engines.stream`: each batch folded into exact fixed-point sums and
  dropped, in bounded memory, optionally in forked workers
  (:mod:`~lbnorm.engines.workers`);
* :mod:`~lbnorm.engines.dask`: the stream engine's sums as Dask tasks.

They all check every batch with :func:`lbnorm.validate.check_batch` and end in
:func:`lbnorm.result.assemble_result`; :func:`lbnorm.pipeline.run` picks one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from lbnorm.options import RunOptions
    from lbnorm.readers import Inputs
    from lbnorm.result import Result
    from lbnorm.suites import Suite

__all__ = ["Engine"]


class Engine(Protocol):
    """What every engine's ``compute`` is."""

    def __call__(self, inputs: Inputs, suite: Suite, options: RunOptions) -> Result:
        """Normalize the inputs under the suite."""
        ...
