"""Engines: score batches in, a :class:`~lbnorm.engines.result.Result` out, two ways.

Every engine is a module with one function of the same shape::

    start(inputs: Inputs, suite: Suite, options: RunOptions) -> Job

A :class:`~lbnorm.engines.result.Job` hands out the subtask table a part at a time (the
writer puts each on disk as it comes), then the result; each module's
``compute`` runs one to the end in memory.

* :mod:`~lbnorm.engines.stream` (the default): each batch checked, folded into
  exact fixed-point sums and written to the subtask table, then dropped, in
  bounded memory (sums too big for ``--sum-memory`` spill to disk by variant:
  :mod:`~lbnorm.engines.spill`); without the subtask table optionally in
  forked workers (:mod:`~lbnorm.engines.workers`); with the ``memory`` order
  (``--engine memory``, the Python API, kept extra columns) the subtask table
  is held and written sorted by benchmark, variant and subtask at the end
  (:mod:`~lbnorm.engines.sorted_parts`);
* :mod:`~lbnorm.engines.dask`: the stream engine's sums as Dask tasks.

They all check every batch with :func:`lbnorm.engines.validate.check_batch` and end in
:func:`lbnorm.engines.result.assemble_result`; :func:`lbnorm.pipeline.run` picks one.
"""

from __future__ import annotations
