"""Fault injection for the crash-safety tests: ``LBNORM_FAULT_POINT=<point>[@<n>][:<action>]``.

The pipeline and the writer call :func:`fault_point` at named moments of a run.
When the environment variable names that point (optionally its ``n``-th pass, for
points passed more than once), the process acts on itself:

* ``kill`` (the default): SIGKILL, a crash with no cleanup;
* ``stop``: SIGSTOP, so that a test can inspect the run (it holds the output lock
  from ``locked`` on) and then resume it (SIGCONT) or kill it;
* ``after=<ms>``: SIGKILL from a timer thread ``ms`` milliseconds later, while the
  run goes on, which lands the kill in the middle of whatever comes next (a
  Parquet write).

The points, in the order a run passes them:

* ``computing``: every input read, nothing computed;
* ``locked``: the output lock held, the staging directory not yet created;
* ``table-written``: after each Parquet file is written and synced (three passes);
* ``staged``: the staging directory complete (tables and manifest), not swapped;
* ``swapped``: the new output swapped in, the previous one not yet deleted.

Unset, a point costs one environment lookup. Nothing else reads the variable.
"""

from __future__ import annotations

import os
import signal
import threading

__all__ = ["fault_point"]

_passes: dict[str, int] = {}


def fault_point(name: str) -> None:
    """Kill or stop this process here if ``LBNORM_FAULT_POINT`` names `name`."""
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
    if action == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif action.startswith("after="):
        delay = float(action.removeprefix("after=")) / 1000
        timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGKILL))
        timer.daemon = True
        timer.start()
    else:
        os.kill(os.getpid(), signal.SIGKILL)
