"""Fault injection for the crash-safety tests: ``LBNORM_FAULT_POINT=<point>[@<n>][:<action>]``.

The command line, the pipeline, the writer and the stream engine call
:func:`fault_point` at named moments of a run. When the environment variable
names that point (optionally its ``n``-th pass, for points passed more than
once), the process acts on itself:

* ``kill`` (the default): SIGKILL, a crash with no cleanup;
* ``stop``: SIGSTOP, so that a test can inspect the run (from ``locked`` on it
  holds its staging folder's lock) and then resume it (SIGCONT) or kill it;
* ``int`` or ``term``: SIGINT (Ctrl-C) or SIGTERM, handled as a user's would be;
* ``after=<ms>``: SIGKILL from a timer thread ``ms`` milliseconds later, while the
  run goes on, which lands the kill in the middle of whatever comes next (a
  Parquet write); ``int-after=<ms>`` and ``term-after=<ms>`` send SIGINT or
  SIGTERM that way;
* ``memory``: a :class:`MemoryError` raised right there, as numpy raises one when
  an allocation fails (the out-of-memory tests: exit 8, and what is in place).

The points, in the order a run passes them:

* ``starting``: the command line's first step, before it loads the commands;
* ``workers-started``: the stream engine's workers forked (in the parent);
* ``worker-summing``: in each stream-engine worker, before it sums its share;
* ``computing``: every input read, nothing computed;
* ``spilled``: a spilled run's streaming pass done, before each partition is
  summed (one pass per partition; see :mod:`lbnorm.engines.spill`);
* ``locked``: the output claimed (its staging folder created and locked), nothing
  written yet;
* ``table-written``: after each Parquet file is written and synced (three passes);
* ``staged``: the staging directory complete (tables and manifest), not swapped;
* ``swapped``: the new output swapped in, the previous one not yet deleted.

Unset, a point costs one environment lookup. Nothing else reads the variable.
"""

from __future__ import annotations

import os
import signal

__all__ = ["fault_point"]

_passes: dict[str, int] = {}

_SIGNALS = {
    "kill": signal.SIGKILL,
    "stop": signal.SIGSTOP,
    "int": signal.SIGINT,
    "term": signal.SIGTERM,
}


def fault_point(name: str) -> None:
    """Kill, stop or signal this process (or fail an allocation) here if ``LBNORM_FAULT_POINT`` names `name`."""
    spec = os.environ.get("LBNORM_FAULT_POINT")
    if not spec:
        return
    point, _, action = spec.partition(":")
    point, _, nth = point.partition("@")
    if point != name:
        return
    _passes[name] = _passes.get(name, 0) + 1
    if nth and _passes[name] != int(nth):
        return
    if action == "memory":
        msg = f"Unable to allocate 1.00 GiB at {name} (LBNORM_FAULT_POINT)"
        raise MemoryError(msg)
    kind, _, delay = action.partition("after=")
    if delay:
        import threading  # loaded only here: the command line imports this module first

        number = _SIGNALS[kind.removesuffix("-") or "kill"]
        timer = threading.Timer(float(delay) / 1000, os.kill, (os.getpid(), number))
        timer.daemon = True
        timer.start()
    else:
        os.kill(os.getpid(), _SIGNALS[action or "kill"])
