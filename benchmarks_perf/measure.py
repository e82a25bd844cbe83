"""Whole-process measurement for the benchmarks: wall time and peak RSS of a command.

Standard library only: a child's ``ru_maxrss`` starts from its parent's resident
pages until ``exec``, so the measuring process must stay small.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path


def _kill_group(pgid: int) -> None:
    """SIGKILL a process group that may already be gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def measure(cmd: list[str], timeout: float) -> tuple[float, float, int, str]:
    """Run ``cmd``; return (wall seconds, peak RSS in MB, exit code, stderr tail).

    The exit code is -9 when the run was killed at ``timeout`` seconds.
    """
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True
        )
        timer = threading.Timer(timeout, _kill_group, (proc.pid,))
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace")
    return seconds, usage.ru_maxrss / 1024, proc.returncode, tail


def warm_page_cache(path: Path) -> None:
    """Read ``path`` once so the timed runs read it from the page cache."""
    with path.open("rb") as fh:
        while fh.read(16 << 20):
            pass
