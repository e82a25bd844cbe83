"""The spill folder: where a spilling run keeps its sums and arrays, and how it is removed.

A run over ``--sum-memory`` (:mod:`lbnorm.engines.spill`) writes to a folder of
its own, ``lbnorm-spill-*`` in ``TMPDIR``, made with :func:`tempfile.mkdtemp`
(a missing or unwritable ``TMPDIR`` is an error, not a fallback elsewhere). The
folder is locked while it lives, so the next run removes the folders of
processes that died without removing theirs, and it is removed when its last
user drops it or the process ends. A failure to use it is a
:class:`~lbnorm.core.errors.SpillError` naming ``TMPDIR`` and its free space
(:func:`spill_errors`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from lbnorm.core.errors import OutputError, SpillError

__all__ = ["SpillFolder", "spill_errors"]


class SpillFolder:
    """A temporary folder of spilled sums and arrays, removed with its last user.

    It is made in `where` (the run's ``spill_dir``: TMPDIR as set, else the
    system's temporary folder; an unusable one is a :class:`SpillError`, not a
    silent fallback to another folder) and locked for as long as it lives, so
    the next run removes the folders of processes that died without removing
    theirs (:func:`_remove_dead_folders`).
    """

    def __init__(self, where: str | None) -> None:
        self.where = Path(where or tempfile.gettempdir())
        _remove_dead_folders(self.where)
        with spill_errors(self.where):
            self.path, self.descriptor = _made_locked_folder(self.where)
        self.files: dict[int, BinaryIO] = {}  # a partition's sums, being written
        # held while the summing thread writes: a removal (an interrupt, on the
        # main thread) waits for the write, and no file is made after it
        self.lock = threading.Lock()
        self._remove = weakref.finalize(
            self, _removed, self.path, self.files, self.lock, self.descriptor
        )

    @property
    def is_removed(self) -> bool:
        """Whether the folder was removed (nothing may be written to it now)."""
        return not self._remove.alive

    @contextlib.contextmanager
    def writing(self) -> Iterator[bool]:
        """Hold the folder's lock (not removed meanwhile); yield whether it is still there.

        A failure to write in it is a :class:`SpillError` (:func:`spill_errors`).
        """
        with self.lock, spill_errors(self.where):
            yield not self.is_removed

    def close(self) -> None:
        """Close the files being written."""
        for file in self.files.values():
            file.close()
        self.files.clear()

    def remove(self) -> None:
        """Close and delete the folder now (it is lbnorm's own)."""
        self._remove()


def _removed(
    path: Path, files: dict[int, BinaryIO], lock: threading.Lock, descriptor: int
) -> None:
    # a write under way finishes first (bounded: a signal handler must not hang)
    is_locked = lock.acquire(timeout=_REMOVE_WAIT)
    try:
        for file in files.values():
            file.close()
        shutil.rmtree(path, ignore_errors=True)
        os.close(descriptor)  # (the folder's lock, held to the end)
    finally:
        if is_locked:
            lock.release()


#: A spill folder's name: lbnorm's prefix and :func:`tempfile.mkdtemp`'s suffix.
_SPILL_NAME = re.compile(r"lbnorm-spill-[a-z0-9_]{8}")


def _made_locked_folder(where: Path) -> tuple[Path, int]:
    """A new spill folder in `where`, and the descriptor holding its lock.

    It is made under a hidden name, locked, then renamed: a folder named
    ``lbnorm-spill-*`` is locked from the moment it has that name, and one
    nobody holds belongs to a dead process.
    """
    made = Path(tempfile.mkdtemp(prefix=".lbnorm-spill-", dir=where))
    try:
        descriptor = os.open(made, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            with contextlib.suppress(OSError):  # no locks here: best effort
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            path = made.with_name(made.name[1:])
            made.rename(path)
        except BaseException:
            os.close(descriptor)
            raise
    except BaseException:
        shutil.rmtree(made, ignore_errors=True)
        raise
    return path, descriptor


def _remove_dead_folders(where: Path) -> None:
    """Remove the spill folders in `where` whose runs died (nobody holds their lock)."""
    with contextlib.suppress(OSError):
        names = [entry.name for entry in where.iterdir()]
        for name in names:
            if not _SPILL_NAME.fullmatch(name):
                continue
            try:
                descriptor = os.open(
                    where / name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                )
            except OSError:
                continue
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                shutil.rmtree(where / name, ignore_errors=True)
            except OSError:  # a live run holds it, or no locks here: leave it
                pass
            finally:
                os.close(descriptor)


@contextlib.contextmanager
def spill_errors(where: Path) -> Iterator[None]:
    """Raise a failure to use the spill folder as a :class:`SpillError` naming TMPDIR.

    Not as the output's error: a full TMPDIR, a spill folder deleted under the
    run or too many open files are no fault of ``--out``.
    """
    try:
        yield
    except OutputError:
        raise
    except OSError as exc:
        raise _spill_error(where, exc) from exc


def _spill_error(where: Path, exc: OSError) -> SpillError:
    reason = " ".join((exc.strerror or str(exc)).split())
    try:
        free = f"{shutil.disk_usage(where).free / 2**30:.2f} GiB free"
    except OSError:
        free = "its free space unknown"
    hint = {
        errno.ENOSPC: "free space in TMPDIR, point TMPDIR at a larger disk, or raise --sum-memory",
        errno.EDQUOT: "free space in TMPDIR, point TMPDIR at a larger disk, or raise --sum-memory",
        errno.EMFILE: "raise the open-files limit (ulimit -n) or --sum-memory",
        errno.ENFILE: "raise the open-files limit (ulimit -n) or --sum-memory",
        errno.ENOENT: "point TMPDIR at an existing folder, and leave lbnorm-spill-* "
        "folders alone while lbnorm runs",
    }.get(exc.errno or 0, "point TMPDIR at a writable folder with free space")
    msg = (
        f"TMPDIR {where} ({free}): a run over --sum-memory cannot use its spill "
        f"files there ({reason}).\nHint: {hint}."
    )
    return SpillError(msg)


#: Seconds a removal waits for a spill write under way.
_REMOVE_WAIT = 10.0
