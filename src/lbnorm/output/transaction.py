"""The output transaction: the only place that puts files where a user will find them.

An output folder is built in a hidden staging folder beside it and swapped in
with one atomic ``renameat2(RENAME_EXCHANGE)`` (Linux; elsewhere two renames,
which the next run repairs if interrupted), so a reader sees either the previous
output or the new one, never a mix. Single files (a run report, a Markdown
summary, the parse cache's entries) are written through a locked temporary
sibling and a rename.

What lbnorm replaces, and what it leaves alone:

* Only its own outputs: a folder whose ``manifest.json`` says ``"tool":
  "lbnorm"`` with a format it knows (:data:`OUTPUT_FORMAT`) and that holds
  nothing the manifest does not list. Anything else that is not empty is
  refused (:class:`~lbnorm.core.errors.OutputError`, exit 6) and left as it is; so is
  a read-only output folder.
* ``--out LINK`` (a symbolic link to a folder) writes through the link: the
  folder it points to is replaced, the link stays.
* Nothing is left beside the output. A run holds an advisory lock (``flock``) on
  its own staging folder while it lives; a second run on the same output sees
  that lock and fails at once, and a staging folder nobody holds is what a
  killed run left, which the next run removes. The parent folder is locked only
  for the instants when a run claims its staging folder and swaps it in.

This module imports only :mod:`lbnorm.core` and :mod:`lbnorm._runtime`, so the
parse cache (a reader) can use its lock and atomic writes.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from lbnorm._runtime import Threads, cancellable, check_cancelled
from lbnorm.core.errors import OptionsError, OutputError
from lbnorm.core.faults import fault_point
from lbnorm.core.files import sha256_of
from lbnorm.core.manifest import (
    MANIFEST,
    OUTPUT_FORMAT,
    OutputKind,
    environment,
    manifest_bytes,
    manifest_head,
    manifest_kind,
    manifest_problem,
)

__all__ = [
    "OUTPUT_FORMAT",
    "check_not_in_output",
    "check_output_kind",
    "check_own_file",
    "check_target",
    "checked_manifest_bytes",
    "exclusive_lock",
    "is_own_output",
    "load_manifest",
    "manifest_problem",
    "output_holding",
    "replaced_outputs",
    "staged",
    "synced",
    "write_bytes_atomically",
    "write_parquet_atomically",
    "write_staged",
]

_MANIFEST = MANIFEST
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
#: Serializes the "table-written" fault point (tables are synced on several threads).
_FAULT_LOCK = threading.Lock()


def check_output_kind(out: Path, kind: OutputKind | str) -> None:
    """Refuse to replace an output of another kind (a leaderboard with ratings, or back).

    A directory without a readable lbnorm manifest is left to the target
    checks of the writer.

    Args:
        out: The output directory about to be written.
        kind: What will be written there: ``leaderboard`` or ``ratings``.

    Raises:
        OutputError: `out` holds an lbnorm output of another kind.
    """
    out = Path(out)
    try:
        if not (out / _MANIFEST).is_file():
            return
    except OSError:  # e.g. a name too long: the target checks say what is wrong
        return
    manifest, _ = load_manifest(out / _MANIFEST)
    if manifest is None:  # not a manifest lbnorm can read: the target checks say so
        return
    existing = manifest_kind(manifest)
    if existing != kind:
        makers = {
            "leaderboard": "lbnorm run",
            "ratings": "lbnorm arena",
            "analysis": "lbnorm diff, impact or health",
        }
        msg = (
            f"{out}: holds {_a(existing)} output (written by `{makers.get(existing, 'lbnorm')}`); "
            f"{_a(kind)} output will not replace it.\n"
            "Hint: choose another --out, or remove the directory first if it is no longer needed."
        )
        raise OutputError(msg)


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def write_staged(
    out: Path,
    fill: Callable[[Path], dict[str, Any]],
    *,
    created_at: str | None,
) -> Path:
    """Fill a staging folder beside `out`, add the manifest, and swap it in.

    Every manifest records its :func:`~lbnorm.core.manifest.environment`, and
    none is written larger than lbnorm accepts back.
    """
    out = Path.cwd() / out  # absolute, symlinks kept as given
    with cancellable(), staged(out) as stage:
        manifest = fill(stage.folder)
        manifest["format"] = OUTPUT_FORMAT
        manifest["created_at"] = created_at or now_iso()
        manifest.setdefault("environment", environment())
        write_synced_bytes(
            stage.folder / _MANIFEST, checked_manifest_bytes(out, manifest)
        )
        fsync_dir(stage.folder)
        fault_point("staged")
        stage.swap()
    return out


def checked_manifest_bytes(out: Path, manifest: dict[str, Any]) -> bytes:
    """The manifest's bytes, refused if larger than lbnorm reads back (:data:`_MANIFEST_LIMIT`).

    Raises:
        OutputError: Too large; nothing is written.
    """
    data = manifest_bytes(manifest)
    if len(data) > _MANIFEST_LIMIT:
        msg = (
            f"{out}: its manifest.json would be {len(data) / 2**20:,.0f} MiB, more than "
            f"lbnorm reads back ({_MANIFEST_LIMIT // 2**20} MiB); the previous output is "
            "unchanged.\nHint: report this as a bug, with the number of input files."
        )
        raise OutputError(msg)
    return data


def synced(path: Path, n_rows: int, n_columns: int) -> dict[str, Any]:
    """Sync a written table to disk; its rows, columns, size and sha256 for the manifest."""
    digest = fsync_file(path)
    with _FAULT_LOCK:  # the point counts its passes; the tables finish in any order
        fault_point("table-written")
    size = path.stat().st_size
    return {"rows": n_rows, "columns": n_columns, "bytes": size, "sha256": digest}


#: A ``manifest.json`` larger than this is not lbnorm's (one lists every input file).
_MANIFEST_LIMIT = 256 * 2**20
#: Characters a staging name adds to its tag: ``.<tag>.tmp-<12 hex digits>``.
_STAGING_EXTRA = len("..tmp-") + 12
#: Entries shown when a message lists a folder's files.
_SHOWN = 5


def _read_upto(handle: BinaryIO, limit: int) -> bytes:
    """At most `limit` bytes of `handle`, a MiB at a time.

    ``handle.read(limit)`` allocates `limit` bytes before it reads one: 256 MiB
    of address space for every manifest, which a ``ulimit -v`` refuses.
    """
    chunks: list[bytes] = []
    left = limit
    while left > 0 and (chunk := handle.read(min(left, 1 << 20))):
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def load_manifest(
    path: Path, *, whole: bool = False
) -> tuple[dict[str, Any] | None, str]:
    """The manifest at `path` if lbnorm wrote it, else None and why not.

    Only the keys the checks read (:func:`~lbnorm.core.manifest.manifest_head`), or
    all of it if `whole`.
    """
    try:
        with path.open("rb") as handle:
            data = _read_upto(handle, _MANIFEST_LIMIT + 1)
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"
    if len(data) > _MANIFEST_LIMIT:
        return None, "is too large to be lbnorm's"
    try:
        manifest: object = json.loads(data) if whole else manifest_head(data)
    except (ValueError, RecursionError):
        return None, "is not JSON"
    problem = manifest_problem(manifest)
    if problem or not isinstance(manifest, dict):  # a problem unless a dict
        return None, problem or ""
    return manifest, ""


def resolve_target(out: Path) -> Path:
    """The folder `out` names: itself, or the folder its symbolic link points to."""
    if out.name in {"", ".."}:
        out = out.resolve()
        if not out.name:
            msg = f"{out}: the root folder cannot be an output.\nHint: choose a folder below it as --out."
            raise OutputError(msg)
    _check_name_length(out, out)
    try:
        if not out.is_symlink():
            return out
        target = out.resolve(strict=True)
    except FileNotFoundError as exc:
        msg = (
            f"{out}: a symbolic link to {out.readlink()}, which does not exist.\n"
            "Hint: create the folder it points to, or choose another --out."
        )
        raise OutputError(msg) from exc
    except RuntimeError as exc:  # a loop of links (Python < 3.13)
        raise output_error(out, OSError(errno.ELOOP, str(exc))) from exc
    except OSError as exc:
        raise output_error(out, exc) from exc
    if not target.is_dir():
        msg = f"{out}: a symbolic link to {target}, which is not a folder.\nHint: choose another --out."
        raise OutputError(msg)
    if not target.name:
        msg = f"{out}: a link to the root folder, which cannot be an output.\nHint: choose another --out."
        raise OutputError(msg)
    _check_name_length(out, target)
    return target


def _name_max(folder: Path) -> int:
    """The longest file name (bytes) the file system holding `folder` allows."""
    for place in (folder, *folder.parents):
        with contextlib.suppress(OSError, ValueError):
            return int(os.pathconf(place, "PC_NAME_MAX"))
    return 255


def _check_name_length(out: Path, path: Path, *, what: str = "--out name") -> None:
    length = len(os.fsencode(path.name))
    limit = _name_max(path.parent)
    if length > limit:
        msg = (
            f"{out}: the name {path.name[:24]}... is {length} bytes long; the file "
            f"system allows at most {limit}.\nHint: choose a shorter {what}."
        )
        raise OutputError(msg)


def _sibling_tag(name: str, name_max: int) -> str:
    """The part of a staging name that names its output: the name, or a hash of a long one."""
    if len(os.fsencode(name)) + _STAGING_EXTRA <= name_max:
        return name
    return "lbnorm-" + hashlib.sha256(os.fsencode(name)).hexdigest()[:24]


def check_target(out: Path) -> None:
    """Refuse `out` now, before a command's work, if the transaction would refuse it.

    The same rule as at the swap (absent, empty, or wholly an lbnorm output; not
    read-only), so ``lbnorm health OUT --out FOLDER`` fails before it computes.

    Raises:
        OutputError: `out` is not a folder lbnorm may write.
    """
    _check_target(out, resolve_target(out))


def _check_target(out: Path, target: Path) -> None:
    """Refuse a target that is neither absent, empty, nor wholly an lbnorm output; or read-only."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise output_error(out, exc) from exc
    if not stat.S_ISDIR(info.st_mode):
        msg = f"{out}: exists and is not a folder.\nHint: choose another --out."
        raise OutputError(msg)
    try:
        entries = sorted(entry.name for entry in target.iterdir())
    except OSError as exc:
        raise output_error(out, exc) from exc
    if entries:
        _check_own_files(out, target, entries)
    if not os.access(target, os.W_OK | os.X_OK):
        msg = (
            f"{out}: cannot write the output (the folder is read-only, "
            f"{stat.filemode(info.st_mode)}); the previous output is unchanged.\n"
            f"Hint: make it writable (chmod u+w {out}) or choose another --out."
        )
        raise OutputError(msg)


def _check_own_files(out: Path, target: Path, entries: list[str]) -> None:
    """Refuse a folder holding anything its lbnorm manifest does not list."""
    if _MANIFEST not in entries:
        problem = f"no {_MANIFEST}"
        manifest = None
    else:
        manifest, problem = load_manifest(target / _MANIFEST)
        problem = f"its {_MANIFEST} {problem}"
    if manifest is None:
        msg = (
            f"{out}: not an lbnorm output ({problem}) and not empty: it holds "
            f"{_listing(target, entries)}; lbnorm replaces its own output folders "
            "whole and deletes nothing it did not write.\n"
            "Hint: choose an empty or new --out folder."
        )
        raise OutputError(msg)
    listed = {*manifest["outputs"], _MANIFEST}
    unknown = [
        name
        for name in entries
        if name not in listed or not stat.S_ISREG(os.lstat(target / name).st_mode)
    ]
    if unknown:
        msg = (
            f"{out}: an lbnorm output that also holds {len(unknown)} file(s) lbnorm "
            f"did not write: {_listing(target, unknown)}; lbnorm replaces its output "
            "folder whole and deletes nothing it did not write.\n"
            f"Hint: move those files out of {out}, or choose another --out."
        )
        raise OutputError(msg)


def _listing(folder: Path, names: list[str]) -> str:
    """Up to five names, folders marked with a slash."""
    shown = [
        name
        + ("/" if (folder / name).is_dir() and not (folder / name).is_symlink() else "")
        for name in names[:_SHOWN]
    ]
    more = f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(shown) + more


def is_own_output(target: Path) -> bool:
    """Whether `target` is a folder holding a manifest lbnorm wrote."""
    return target.is_dir() and load_manifest(target / _MANIFEST)[0] is not None


def output_holding(path: Path | str, outs: tuple[Path | str, ...] = ()) -> Path | None:
    """The lbnorm output folder a file at `path` would land in (None: none).

    A folder counts when it is one of `outs` (the outputs a command reads or
    writes, which may not exist yet) or holds a ``manifest.json`` whose ``tool``
    is lbnorm (a web app's ``manifest.json`` is not). Symbolic links are
    resolved, and every enclosing folder is checked.
    """
    parent = Path(path).resolve().parent
    named = {Path(out).resolve() for out in outs}
    for folder in (parent, *parent.parents):
        if folder in named or _names_lbnorm(folder):
            return folder
    return None


def check_not_in_output(
    path: Path | str, *, option: str, outs: tuple[Path | str, ...] = ()
) -> None:
    """Refuse a file (a report, a summary) pointed inside an lbnorm output folder.

    An output folder holds what lbnorm wrote there and nothing else: a file
    added inside would change the output, and the next run to it would refuse
    the folder (it deletes nothing it did not write).

    Args:
        path: The file to be written.
        option: The option that named it, for the message (``--report``).
        outs: Output folders the command reads or writes (they may not exist yet).

    Raises:
        OptionsError: `path` is inside an lbnorm output folder.
    """
    folder = output_holding(path, outs)
    if folder is not None:
        msg = (
            f"{option} {path}: inside the lbnorm output folder {folder}; a file "
            "written there would change the output, and the next run to it would "
            "refuse the folder.\nHint: write it elsewhere, e.g. beside the output folder."
        )
        raise OptionsError(msg)


def check_own_file(
    path: Path | str, *, option: str, is_ours: Callable[[bytes, bytes], bool]
) -> None:
    """Refuse to replace an existing file lbnorm did not write (a report, a summary).

    Args:
        path: The file about to be written.
        option: The option that named it, for the message (``--html``).
        is_ours: Whether a file is lbnorm's, from its first and last 4 KiB.

    Raises:
        OutputError: `path` exists and is not a regular file, or `is_ours`
            does not recognize it; it is left as it is.
    """
    try:
        ends = _file_ends(Path(path))
    except OSError as exc:  # a folder, a FIFO, unreadable: not one of lbnorm's files
        msg = (
            f"{option} {path}: exists and is not a file lbnorm wrote "
            f"({exc.strerror or exc}).\nHint: choose another file name."
        )
        raise OutputError(msg) from exc
    if ends is not None and not is_ours(*ends):
        msg = (
            f"{option} {path}: exists and was not written by lbnorm; lbnorm replaces "
            "only its own files.\nHint: choose another file name, or move that file "
            "away first."
        )
        raise OutputError(msg)


def _file_ends(path: Path) -> tuple[bytes, bytes] | None:
    """A regular file's first and last :data:`_RECOGNIZED` bytes (None: no such file)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO: no wait
    except FileNotFoundError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        head = os.pread(descriptor, _RECOGNIZED, 0)
        tail = os.pread(descriptor, _RECOGNIZED, max(info.st_size - _RECOGNIZED, 0))
    finally:
        os.close(descriptor)
    return head, tail


#: Bytes read from each end of an existing file to recognize it as lbnorm's.
_RECOGNIZED = 4096


def _names_lbnorm(folder: Path) -> bool:
    """Whether `folder` holds a ``manifest.json`` saying ``"tool": "lbnorm"``."""
    try:
        with (folder / _MANIFEST).open("rb") as handle:
            data = _read_upto(handle, _MANIFEST_LIMIT + 1)
        head = manifest_head(data)
    except (OSError, ValueError, RecursionError):  # none, or not JSON
        return False
    return isinstance(head, dict) and head.get("tool") == "lbnorm"


# --- claiming an output: staging folders, their locks, the swap --------------------------

#: The outputs this process has swapped in (see :func:`replaced_outputs`).
_replaced: list[Path] = []


def replaced_outputs() -> tuple[Path, ...]:
    """The outputs this process has swapped in so far, oldest first.

    An interrupted command reads it to say truly whether its new output is in
    place or the previous one is unchanged.
    """
    return tuple(_replaced)


class _Stage:
    """A run's staging folder beside its output, locked for as long as the run lives."""

    __slots__ = ("_lock", "folder", "is_swapped", "out", "previous", "target")

    def __init__(self, *, out: Path, target: Path, folder: Path, lock: int) -> None:
        self.out = out  # as the caller named it, for messages
        self.target = target  # the folder itself (a link's target)
        self.folder = folder
        self.previous: Path | None = None  # where the previous output went
        self.is_swapped = False
        self._lock = lock

    def swap(self) -> None:
        """Put the staged folder in place of the target, atomically."""
        check_cancelled()  # the last moment a cancelled run keeps the previous output
        with _parent_locked(self.target.parent):
            _check_target(self.out, self.target)  # files may have come meanwhile
            self.previous = _swap_in(self.folder, self.target, self._tag())
            self.is_swapped = True
            _replaced.append(self.out)
            fsync_dir(self.target.parent)

    def discard(self) -> None:
        """Delete the unfinished output, or after the swap the previous one."""
        for path in (self.folder, self.previous):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)

    def release(self) -> None:
        os.close(self._lock)

    def _tag(self) -> str:
        return self.folder.name[1:].rsplit(".tmp-", 1)[0]


@contextlib.contextmanager
def staged(out: Path) -> Iterator[_Stage]:
    """Claim `out`, yield its locked staging folder, and clean up whatever happens.

    The staging folder is deleted on any error and on Ctrl-C or SIGTERM; after
    the swap it holds the previous output, which is deleted too. Callers hold
    the signals (:func:`lbnorm._runtime.cancellable`): a signal is acted on at
    the next check (between table parts, before the swap), so no swap or
    deletion is cut short.
    """
    target = resolve_target(out)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(out, exc) from exc
    stage = _claim(out, target)
    try:
        fault_point("locked")
        check_cancelled()  # claimed, nothing written yet
        yield stage
    except OutputError:
        stage.discard()
        raise
    except OSError as exc:
        stage.discard()
        raise output_error(out, exc, is_replaced=stage.is_swapped) from exc
    except BaseException:
        stage.discard()
        raise
    else:
        stage.discard()
    finally:
        stage.release()


def _claim(out: Path, target: Path) -> _Stage:
    """Refuse a busy or foreign target, clear what killed runs left, make a staging folder.

    All under the parent folder's lock, so that two runs never claim one output
    and no run removes a staging folder between its creation and its lock.
    """
    parent = target.parent
    tag = _sibling_tag(target.name, _name_max(parent))
    with _parent_locked(parent):
        leftovers = _leftovers(out, parent, tag)
        try:
            leftovers = _repair_interrupted_swap(target, leftovers)
            _check_target(out, target)
            folder = parent / f".{tag}.tmp-{uuid.uuid4().hex[:12]}"
            folder.mkdir()
            try:
                lock = _lock_folder(folder)
            except BaseException:
                folder.rmdir()
                raise
        except OSError as exc:
            _release(leftovers)
            if isinstance(exc, OutputError):
                raise
            raise output_error(out, exc) from exc
        except BaseException:
            _release(leftovers)
            raise
    _remove(leftovers)
    _remove_old_lock_file(parent / f".{target.name}.lock")
    return _Stage(out=out, target=target, folder=folder, lock=lock)


def _remove_old_lock_file(path: Path) -> None:
    """Remove the empty lock file lbnorm 0.1 left beside every output, if unheld."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:  # none there (or a name too long to have one)
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        info = os.fstat(descriptor)
        if stat.S_ISREG(info.st_mode) and info.st_size == 0:
            path.unlink()
    except OSError:  # held by a run of that version, or not ours to remove
        pass
    finally:
        os.close(descriptor)


def _lock_folder(folder: Path) -> int:
    """Open `folder` and hold an exclusive lock on it; return the descriptor."""
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise
    except OSError:  # a file system without directory locks: best effort
        pass
    return descriptor


def _leftovers(out: Path, parent: Path, tag: str) -> list[tuple[Path, int | None]]:
    """This output's staging folders that nobody holds, locked; refuse if one is held."""
    pattern = re.compile(rf"\.{re.escape(tag)}\.(?:tmp|old)-[0-9a-f]{{12}}")
    try:
        names = sorted(entry.name for entry in parent.iterdir())
    except OSError:
        return []
    found: list[tuple[Path, int | None]] = []
    try:
        for name in names:
            if not pattern.fullmatch(name):
                continue
            path = parent / name
            try:
                found.append((path, _lock_folder(path)))
            except BlockingIOError:  # a live run holds it
                msg = (
                    f"{out}: another lbnorm run is writing this output directory.\n"
                    "Hint: wait for it to finish, or write to another --out."
                )
                raise OutputError(msg) from None
            except OSError:  # a file or link an old version left, or unreadable
                found.append((path, None))
    except BaseException:
        _release(found)
        raise
    return found


def _repair_interrupted_swap(
    target: Path, leftovers: list[tuple[Path, int | None]]
) -> list[tuple[Path, int | None]]:
    """Put back an output a two-rename swap moved aside and did not replace."""
    if os.path.lexists(target):
        return leftovers
    aside = [  # .<tag>.old-<12 hex digits>, a folder (the tag may hold ".old-" too)
        item
        for item in leftovers
        if item[0].name[:-12].endswith(".old-") and item[1] is not None
    ]
    if not aside:
        return leftovers
    newest = max(aside, key=lambda item: item[0].stat().st_mtime_ns)
    newest[0].rename(target)
    _release([newest])
    return [item for item in leftovers if item is not newest]


def _release(leftovers: list[tuple[Path, int | None]]) -> None:
    for _, descriptor in leftovers:
        if descriptor is not None:
            os.close(descriptor)


def _remove(leftovers: list[tuple[Path, int | None]]) -> None:
    """Delete what killed runs left (still holding their locks while deleting)."""
    try:
        for path, descriptor in leftovers:
            if descriptor is None:  # not a folder (or unreadable): unlink what can be
                with contextlib.suppress(OSError):
                    path.unlink()
            else:
                shutil.rmtree(path, ignore_errors=True)
    finally:
        _release(leftovers)


@contextlib.contextmanager
def _parent_locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` itself for the block (a claim or a swap).

    Runs writing other outputs in the same folder wait for it, an instant. An
    unreadable folder, or a file system without directory locks, goes unlocked.
    """
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        descriptor = -1
    try:
        if descriptor >= 0:
            with contextlib.suppress(OSError):
                fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        if descriptor >= 0:
            os.close(descriptor)  # releases the lock


def _swap_in(staging: Path, target: Path, tag: str) -> Path | None:
    """Put `staging` in place of `target`; return where the previous output went."""
    if not os.path.lexists(target):
        if not _renameat2(staging, target, _RENAME_NOREPLACE):
            if os.path.lexists(target):
                raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
            staging.rename(target)
        fault_point("swapped")
        return None
    if _renameat2(staging, target, _RENAME_EXCHANGE):
        fault_point("swapped")
        return staging  # now holds the previous output
    old = target.parent / f".{tag}.old-{uuid.uuid4().hex[:12]}"
    target.rename(old)
    staging.rename(target)
    fault_point("swapped")
    return old


def _renameat2(source: Path, target: Path, flags: int) -> bool:
    """Linux renameat2(2) with `flags`; False where it is not supported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    status = renameat2(
        _AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), flags
    )
    if status == 0:
        return True
    code = ctypes.get_errno()
    if code in {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP}:
        return False
    raise OSError(code, os.strerror(code), str(target))


@contextlib.contextmanager
def exclusive_lock(
    lock_path: Path, *, busy: str, unlockable: Callable[[OSError], OutputError]
) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path` (created if needed) or fail at once.

    The parse cache's lock: a file inside the cache folder (outputs are locked
    through their staging folders and leave no lock file).

    Args:
        lock_path: The lock file.
        busy: The message when another process holds the lock.
        unlockable: The error to raise when the lock file cannot be opened.

    Raises:
        OutputError: Another process holds the lock, or it cannot be taken.
    """
    try:  # (not waiting on a FIFO put there: only a regular file is a lock)
        handle = os.fdopen(
            os.open(
                lock_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, 0o644
            ),
            "a",
        )
    except OSError as exc:
        raise unlockable(exc) from exc
    if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
        handle.close()
        raise unlockable(OSError(errno.EINVAL, "the lock is not a regular file"))
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise OutputError(busy) from exc
        yield


def write_synced_bytes(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def fsync_file(path: Path) -> str:
    """Sync a file to disk; return the sha256 of its bytes (read back once).

    A large file is hashed on a second thread while this one waits for the disk.
    """
    with path.open("rb", buffering=0) as handle:
        if os.fstat(handle.fileno()).st_size < _HASH_BESIDE_SYNC:
            os.fsync(handle.fileno())
            return sha256_of(handle)
        with Threads(1, "hash") as hasher:
            digest = hasher.submit(sha256_of, handle)
            os.fsync(handle.fileno())
            return digest.result()


#: Bytes from which a written file is hashed while it is synced (a thread each).
_HASH_BESIDE_SYNC = 32 << 20


def fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def now_iso() -> str:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    moment = float(epoch) if epoch and epoch.isdigit() else time.time()
    return datetime.fromtimestamp(moment, tz=UTC).isoformat(timespec="seconds")


def output_error(out: Path, exc: OSError, *, is_replaced: bool = False) -> OutputError:
    reason = " ".join((exc.strerror or str(exc)).split())
    hint = {
        errno.ENOSPC: "free disk space or write elsewhere",
        errno.EACCES: "check the directory's permissions or choose another --out",
        errno.EPERM: "check the directory's permissions or choose another --out",
        errno.EROFS: "the file system is read-only; choose another --out",
        errno.EDQUOT: "the disk quota is exceeded; free space or write elsewhere",
        errno.EFBIG: "a file size limit (ulimit -f) was hit; raise it or write elsewhere",
        errno.ENAMETOOLONG: "a name in the path is too long; choose a shorter --out",
        errno.ENOTDIR: "a part of the path is a file, not a folder; check the path",
        errno.ELOOP: "the path has a loop of symbolic links; check the path",
    }.get(exc.errno or 0, "check the path and the disk")
    state = (
        "the new output is in place but may not be synced to disk"
        if is_replaced
        else "the previous output is unchanged"
    )
    msg = f"{out}: cannot write the output ({reason}); {state}.\nHint: {hint}."
    return OutputError(msg)


# --- beside the main tables: analysis tables, reports, the parse cache ---------------


def link_into(source: Path, folder: Path, *, skip: set[str]) -> None:
    """Hard-link `source`'s files into `folder` (copy where links are refused)."""
    for name in sorted(entry.name for entry in source.iterdir()):
        if name in skip:
            continue
        try:
            os.link(source / name, folder / name, follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            shutil.copy2(source / name, folder / name)
            fsync_file(folder / name)


#: Errors of link(2) that mean "copy instead".
_NO_LINKS = frozenset(
    {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}
)


def write_parquet_atomically(path: Path, table: pa.Table) -> Path:
    """Write one Parquet file (zstd) via a temporary sibling and a rename.

    Raises:
        OutputError: The disk refuses; no partial file remains.
    """
    return _replace_atomically(
        path, lambda temporary: pq.write_table(table, temporary, compression="zstd")
    )


def write_bytes_atomically(path: Path, data: bytes) -> Path:
    """Write one file's bytes via a temporary sibling and a rename.

    Raises:
        OutputError: The disk refuses; no partial file remains.
    """
    return _replace_atomically(path, lambda temporary: temporary.write_bytes(data))


def write_parts_atomically(path: Path, parts: Iterable[bytes]) -> Path:
    """Write one file from parts of its bytes (never all in memory) via a temporary sibling.

    Raises:
        OutputError: The disk refuses; no partial file remains.
    """

    def write(temporary: Path) -> None:
        with temporary.open("wb") as handle:
            for part in parts:
                handle.write(part)

    return _replace_atomically(path, write)


def _replace_atomically(path: Path, write: Callable[[Path], object]) -> Path:
    """Write `path` through a locked temporary sibling, removed on any failure.

    A symbolic link is written through. A temporary that a killed writer left
    (nobody holds its lock) is removed by the next write of the same file.
    """
    try:
        target = path.resolve() if path.is_symlink() else Path.cwd() / path
    except (OSError, RuntimeError) as exc:
        error = exc if isinstance(exc, OSError) else OSError(errno.ELOOP, str(exc))
        raise output_error(path, error) from exc
    _check_name_length(path, target, what="file name")
    check_not_in_output(path, option="cannot write")
    tag = _sibling_tag(target.name, _name_max(target.parent))
    temporary = target.with_name(f".{tag}.tmp-{uuid.uuid4().hex[:12]}")
    descriptor = -1
    try:
        with _parent_locked(target.parent):
            _remove_dead_temporaries(target.parent, tag)
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with contextlib.suppress(OSError):  # without file locks: best effort
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        write(temporary)
        fsync_file(temporary)
        temporary.replace(target)
        fsync_dir(target.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            temporary.unlink()
        if isinstance(exc, OutputError):
            raise
        raise output_error(path, exc) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    return path


def _remove_dead_temporaries(folder: Path, tag: str) -> None:
    """Unlink temporaries of this file that no live writer holds."""
    pattern = re.compile(rf"\.{re.escape(tag)}\.tmp-[0-9a-f]{{12}}")
    with contextlib.suppress(OSError):
        for name in [entry.name for entry in folder.iterdir()]:
            if not pattern.fullmatch(name):
                continue
            try:
                descriptor = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if stat.S_ISREG(os.fstat(descriptor).st_mode):
                    (folder / name).unlink()
            except OSError:  # held by a live writer, or no locks here: leave it
                pass
            finally:
                os.close(descriptor)
