"""Freed memory handed back to the system between the phases of a big run.

glibc keeps what a process frees on its heap for reuse (arrays below its mmap
threshold, which rises to 32 MB once a larger block is freed: most of a batch's
temporaries), and pyarrow's allocator keeps pages too; resident memory then
stays at a phase's high-water mark through the next phase. A run that must stay
within a bound (a spilled streaming run, :mod:`lbnorm.engines.spill`) calls
:func:`release_free_memory` between phases: on OOC40 (5M variants) the
partitions were summed at 1.95 GB resident without it, 1.47 GB with it.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import pyarrow as pa

__all__ = ["allow_keeping_freed_memory", "keep_freed_memory", "release_free_memory"]


def release_free_memory() -> None:
    """Return free heap memory to the system (glibc ``malloc_trim``; Arrow's pool).

    A few milliseconds per GB of heap; does nothing where neither applies.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
    pa.default_memory_pool().release_unused()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """Glibc's ``malloc_trim``, or None (another C library, another system)."""
    import ctypes.util  # (only a run that spills gets here: ~2 ms of imports)

    with contextlib.suppress(OSError, AttributeError, TypeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        function: Callable[[int], int] = libc.malloc_trim
        return function
    return None


def allow_keeping_freed_memory() -> None:
    """Let a run that does not spill keep freed memory (:func:`keep_freed_memory`).

    The command line calls it: its process is lbnorm's own (a library call
    leaves its host's allocator alone).
    """
    global _is_allowed  # (one allocator per process)
    _is_allowed = True


def keep_freed_memory() -> None:
    """Have glibc keep what this process frees, for reuse, if its owner allowed it.

    By default glibc unmaps every freed block above its mmap threshold (it
    rises to 32 MB at most) and trims its heap's top above twice that, so each
    batch of a large run faults fresh pages in again (~0.3 GB/s on these
    machines, as system time): L40 with two tables took 2.95 s (system 1.1 s)
    against 2.58 s (0.5 s) with blocks under 1 GiB kept on the heap and no
    automatic trim, its peak ~150 MB higher. The engines call it when a run
    will not spill: a spilled run frees and trims between its phases to stay
    within its bound (with freed blocks kept, OOC40's peak rose 1,605 -> 1,863
    MB, no faster; glibc's settings cannot be put back as they were: its
    thresholds' settled values cost OOC100 4%). Does nothing where glibc's
    ``mallopt`` is not found, or if :func:`allow_keeping_freed_memory` was not
    called.
    """
    global _is_kept  # (one allocator per process)
    if _is_allowed and not _is_kept:
        _is_kept = _mallopt(_KEPT)


#: Whether the process's owner let a run keep freed memory, and whether it does.
_is_allowed = False
_is_kept = False

#: glibc's mallopt parameters (malloc.h: M_MMAP_THRESHOLD, M_TRIM_THRESHOLD,
#: M_TOP_PAD) as a run that keeps freed memory sets them: blocks under 1 GiB
#: come from, and go back to, the heap; its free top is not trimmed by itself; it
#: grows 256 MiB at a time (address space: pages are resident once touched).
_KEPT = {-3: 1 << 30, -1: 2**31 - 1, -2: 256 << 20}


def _mallopt(values: dict[int, int]) -> bool:
    """Set glibc's ``mallopt`` parameters; whether it could (another C library: no)."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes  # (loaded by the writer anyway)

        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        done = [mallopt(parameter, value) for parameter, value in values.items()]
        return all(result == 1 for result in done)  # (each set, whatever the others)
    return False
