"""The output transaction: the only place that puts files where a user will find them.

A command claims its output folder (:class:`Transaction`: a staging folder
beside it, marked as lbnorm's and locked), fills it with tables hashed as they
are written, and commits once: the manifest, then one swap, so a reader sees the
previous output or the new one, never a mix. A single file goes through a
temporary sibling and one rename (:func:`write_file`). lbnorm replaces only its
own outputs and files (a foreign one is refused, exit 6) and removes only its
own leftovers; one writer per output, the second refused at once.
docs/reliability.md states each guarantee and ARCHITECTURE.md how they are met.

Imports only :mod:`lbnorm.core`, :mod:`lbnorm._runtime` and
:mod:`lbnorm.output.tablefile`: the parse cache (a reader) writes through it too.
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
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

from lbnorm._runtime import Threads, cancellable, check_cancelled
from lbnorm.core.errors import OptionsError, OutputError
from lbnorm.core.faults import fault_point
from lbnorm.core.manifest import (
    MANIFEST,
    OUTPUT_FORMAT,
    OutputKind,
    environment,
    is_plain_name,
    iso_time,
    manifest_bytes,
    manifest_head,
    manifest_kind,
    manifest_problem,
)
from lbnorm.core.version import lbnorm_version
from lbnorm.output.tablefile import Hashed, TableFile

__all__ = [
    "MANIFEST_LIMIT",
    "STAGING_MARK",
    "Recognizer",
    "Transaction",
    "check_file",
    "check_target",
    "first_few",
    "open_plain",
    "read_manifest",
    "replaced_outputs",
    "write_file",
]

#: Whether a file is lbnorm's (one it may replace), from its first and last bytes.
Recognizer = Callable[[bytes, bytes], bool]
#: A ``manifest.json`` larger than this is not lbnorm's (one lists every input file).
MANIFEST_LIMIT = 256 * 2**20
#: Written first into every staging folder: what makes a leftover lbnorm's to remove.
STAGING_MARK = ".lbnorm-staging"
#: Bytes a recognizer sees of a file's start and end (a Parquet footer fits).
_HEAD, _TAIL = 4096, 64 * 1024
_SHOWN = 5
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_RENAME_EXCHANGE, _AT_FDCWD = 2, -100
#: Where an open file can be named (an ``O_TMPFILE`` file is linked through it).
_PROC_FD = Path("/proc/self/fd")
#: Serializes the "table-written" fault point (tables finish on several threads).
_FAULT_LOCK = threading.Lock()
#: Errors of link(2) that mean "copy instead".
_NO_LINKS = frozenset({errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP})
#: The outputs and files this process has put in place, oldest first.
_replaced: list[Path] = []
_T = TypeVar("_T")


def replaced_outputs() -> tuple[Path, ...]:
    """What this process has put in place so far: an interrupted command says it truly."""
    return tuple(_replaced)


# --- reading a folder's manifest: the one place -------------------------------------------


def open_plain(folder: int, name: str) -> int:
    """A descriptor reading `name` in `folder` (a descriptor): no link followed, no wait.

    Raises:
        OSError: Missing, a link (``ELOOP``), not a regular file (``EINVAL``: a
            FIFO or a device is never read), or unreadable.
    """
    descriptor = os.open(name, _READ, dir_fd=folder)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise OSError(errno.EINVAL, "not a regular file", name)
    return descriptor


def read_manifest(
    folder: int | Path, *, whole: bool = False
) -> tuple[dict[str, Any] | None, str]:
    """The manifest in `folder` if lbnorm wrote it, else None and why not.

    `folder` is a descriptor, or a path (a link to it followed). Read once, at
    most :data:`MANIFEST_LIMIT` bytes; without `whole`, only the keys the checks
    read. The reason follows "its manifest.json" (``is missing``).
    """
    try:
        with contextlib.ExitStack() as opened:
            if isinstance(folder, Path):
                folder = opened.enter_context(_opened(folder))
            with open(open_plain(folder, MANIFEST), "rb") as handle:  # (owns it)
                # (sized first: a read of up to the limit would reserve it whole;
                # read no further than the size seen, should the file grow)
                size = os.fstat(handle.fileno()).st_size
                if size > MANIFEST_LIMIT:
                    return None, "is too large to be lbnorm's"
                data = handle.read(size)
    except FileNotFoundError:
        return None, "is missing"
    except OSError as exc:
        return None, f"cannot be read ({_reason(exc)})"
    try:
        manifest: object = json.loads(data) if whole else manifest_head(data)
    except (ValueError, RecursionError):
        return None, "is not JSON"
    problem = manifest_problem(manifest)
    if problem or not isinstance(manifest, dict):  # a problem unless a dict
        return None, problem or ""
    return manifest, ""


@contextlib.contextmanager
def _opened(path: Path | str, flags: int = _FOLDER) -> Iterator[int]:
    """A descriptor of `path` (by default a folder, a link to it followed) for the block."""
    descriptor = os.open(path, flags, 0o666)
    try:
        yield descriptor
    finally:
        os.close(descriptor)


@contextlib.contextmanager
def _reported(out: Path) -> Iterator[None]:
    """An OS error in the block raised as the output's :func:`output_error`."""
    try:
        yield
    except OutputError:
        raise
    except OSError as exc:
        raise output_error(out, exc) from exc


# --- what a folder or a file is, before it is replaced ----------------------------------------


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def resolve_target(out: Path) -> Path:
    """The folder `out` names: itself, or the folder its symbolic link points to.

    A name is checked against the file system's limit before anything exists
    (a folder a link points to exists: its name fits).
    """
    target = out.resolve() if out.name in {"", ".."} else out
    _check_name_length(out, target)
    with _reported(out):
        if target.is_symlink():
            try:
                target = _resolve(out, strict=True)
            except FileNotFoundError as exc:
                msg = (
                    f"{out}: a symbolic link to {out.readlink()}, which does not exist.\n"
                    "Hint: create the folder it points to, or choose another --out."
                )
                raise OutputError(msg) from exc
            if not target.is_dir():
                msg = f"{out}: a symbolic link to {target}, which is not a folder.\nHint: choose another --out."
                raise OutputError(msg)
    if not target.name:  # (given, or linked to)
        msg = f"{out}: the root folder cannot be an output.\nHint: choose a folder below it as --out."
        raise OutputError(msg)
    return target


def _resolve(path: Path, *, strict: bool = False) -> Path:
    """`path` with its links followed; a loop of links an OS error (``ELOOP``) on every Python."""
    try:
        return path.resolve(strict=strict)
    except RuntimeError as exc:  # a loop (Python < 3.13)
        raise OSError(errno.ELOOP, str(exc)) from exc


def _name_max(folder: Path) -> int:
    """The longest file name (bytes) the file system holding `folder` allows."""
    for place in (folder, *folder.parents):
        with contextlib.suppress(OSError, ValueError):
            return int(os.pathconf(place, "PC_NAME_MAX"))
    return 255


def _check_name_length(out: Path, path: Path, *, what: str = "--out name") -> None:
    length = len(os.fsencode(path.name))
    if length > (limit := _name_max(path.parent)):
        msg = (
            f"{out}: the name {path.name[:24]}... is {length} bytes long; the file "
            f"system allows at most {limit}.\nHint: choose a shorter {what}."
        )
        raise OutputError(msg)


def _tag(path: Path) -> str:
    """What a sibling's name says of `path`'s: the name, or a hash of one too long."""
    if len(os.fsencode(path.name)) + len("..tmp-") + 12 <= _name_max(path.parent):
        return path.name
    return "lbnorm-" + hashlib.sha256(os.fsencode(path.name)).hexdigest()[:24]


def check_target(out: Path, kind: OutputKind | None = None) -> None:
    """Refuse `out` now, before a command's work, if the transaction would refuse it.

    Raises:
        OutputError: `out` is not absent, empty or wholly an lbnorm output, it
            holds an output of another `kind` (None: any), or it is read-only.
    """
    _check_target(out, resolve_target(out), kind)


def _check_target(out: Path, target: Path, kind: OutputKind | None) -> None:
    with _reported(out):
        try:
            info = os.lstat(target)
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(info.st_mode):
            msg = f"{out}: exists and is not a folder.\nHint: choose another --out."
            raise OutputError(msg)
        entries = sorted(entry.name for entry in target.iterdir())
    problem, unknown, held = _unlisted(target, entries)
    if problem:
        msg = (
            f"{out}: not an lbnorm output ({problem}) and not empty: it holds "
            f"{_listing(target, entries)}; lbnorm replaces its own output folders "
            "whole and deletes nothing it did not write.\n"
            "Hint: choose an empty or new --out folder."
        )
        raise OutputError(msg)
    if kind is not None and held is not None and held != kind:
        maker = {"leaderboard": "run", "ratings": "arena"}.get(
            held, "diff, impact or health"
        )
        msg = (
            f"{out}: holds {_a(held)} output (written by `lbnorm {maker}`); {_a(kind)} "
            "output will not replace it.\nHint: choose another --out, or remove the "
            "directory first if it is no longer needed."
        )
        raise OutputError(msg)
    if unknown:
        msg = (
            f"{out}: an lbnorm output that also holds {len(unknown)} file(s) lbnorm "
            f"did not write: {_listing(target, unknown)}; lbnorm replaces its output "
            "folder whole and deletes nothing it did not write.\n"
            f"Hint: move those files out of {out}, or choose another --out."
        )
        raise OutputError(msg)
    if not os.access(target, os.W_OK | os.X_OK):
        msg = (
            f"{out}: cannot write the output (the folder is read-only, "
            f"{stat.filemode(info.st_mode)}); the previous output is unchanged.\n"
            f"Hint: make it writable (chmod u+w {out}) or choose another --out."
        )
        raise OutputError(msg)


def _unlisted(
    folder: Path, entries: list[str]
) -> tuple[str, list[str], OutputKind | None]:
    """Why a non-empty `folder` is not an lbnorm output ("": it is), what its manifest lacks, its kind."""
    if not entries:
        return "", [], None
    if MANIFEST not in entries:
        return f"no {MANIFEST}", [], None
    manifest, problem = read_manifest(folder)
    if manifest is None:
        return f"its {MANIFEST} {problem}", [], None
    listed = {*manifest["outputs"], MANIFEST}
    unknown = [
        name
        for name in entries
        if name not in listed or not stat.S_ISREG(os.lstat(folder / name).st_mode)
    ]
    return "", unknown, manifest_kind(manifest)


def _listing(folder: Path, names: list[str]) -> str:
    """Up to five names of `folder`'s, folders marked with a slash."""
    return first_few(
        [
            name + "/" * ((folder / name).is_dir() and not (folder / name).is_symlink())
            for name in names[:_SHOWN]
        ]
        + names[_SHOWN:]
    )


def first_few(names: list[str]) -> str:
    """Up to five names for a message, then how many more.

    Examples:
        >>> first_few(["a", "b", "c", "d", "e", "f", "g"])
        'a, b, c, d, e and 2 more'
    """
    more = f" and {len(names) - _SHOWN:,} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def check_file(
    path: Path | str,
    *,
    option: str,
    is_ours: Recognizer | None,
    outs: tuple[Path | str, ...] = (),
) -> None:
    """Refuse a file (a report, a summary, an export) lbnorm may not write at `path`.

    Inside an lbnorm output folder (`outs` count even before they exist), a file
    would change that output and the next run to it would refuse the folder; an
    existing file `is_ours` does not recognize is a user's (None: not asked).

    Raises:
        OptionsError: It is pointed inside an output folder (exit 2).
        OutputError: `path` exists and is not a regular file, or `is_ours` does
            not recognize it; it is left as it is (exit 6).
    """
    parent = Path(path).resolve().parent
    named = {Path(out).resolve() for out in outs}
    for folder in (parent, *parent.parents):
        if folder not in named and read_manifest(folder)[0] is None:
            continue
        msg = (
            f"{option} {path}: inside the lbnorm output folder {folder}; a file "
            "written there would change the output, and the next run to it would "
            "refuse the folder.\nHint: write it elsewhere, e.g. beside the output folder."
        )
        raise OptionsError(msg)
    if is_ours is None:
        return
    try:  # (a FIFO: no wait)
        with _opened(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC) as descriptor:
            ends = _ends(descriptor)
    except FileNotFoundError:
        return
    except OSError as exc:  # a folder, a FIFO, unreadable: not one of lbnorm's files
        msg = (
            f"{option} {path}: exists and is not a file lbnorm wrote "
            f"({exc.strerror or exc}).\nHint: choose another file name."
        )
        raise OutputError(msg) from exc
    if not is_ours(*ends):
        msg = (
            f"{option} {path}: exists and was not written by lbnorm; lbnorm replaces "
            "only its own files.\nHint: choose another file name, or move that file "
            "away first."
        )
        raise OutputError(msg)


def _ends(descriptor: int) -> tuple[bytes, bytes]:
    """An open regular file's first :data:`_HEAD` and last :data:`_TAIL` bytes."""
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, "not a regular file")
    head = os.pread(descriptor, _HEAD, 0)
    return head, os.pread(descriptor, _TAIL, max(info.st_size - _TAIL, 0))


# --- the transaction ---------------------------------------------------------------------------


class Transaction:
    """One command's write of one output folder: claim it, stage its files, commit once.

    Entering claims `out` (refused at once if another command holds it, or if
    it holds files lbnorm did not write); leaving without :meth:`commit`
    removes everything staged, and after the commit the previous output. Ctrl-C
    and SIGTERM inside set the cancellation flag, acted on before the swap.

    Args:
        out: The output folder (a symbolic link to a folder is written through).
        kind: What it will hold; an lbnorm output of another kind is refused.
            None: whatever the output holds (tables added to it).
    """

    def __init__(self, out: str | Path, *, kind: OutputKind | None) -> None:
        self.out = Path.cwd() / out  # absolute, links kept as given
        self.kind = kind
        #: Each staged file's manifest entry (rows, columns, bytes, sha256).
        self.outputs: dict[str, dict[str, Any]] = {}
        #: The manifest so far; :meth:`commit` completes it.
        self.manifest: dict[str, Any] = {}
        #: Whether the new output is in place (swapped in).
        self.committed = False
        self.target = self.folder = self.out
        self._beside: list[_Beside] = []
        #: What leaving releases, the last taken first: the previous output (once
        #: swapped out), the staged files beside the output, the staging folder
        #: (removed while still locked), its lock, the signals held.
        self._held = contextlib.ExitStack()

    def __enter__(self) -> Transaction:
        self._held.enter_context(cancellable())
        try:
            self.target = resolve_target(self.out)
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self._claim()
            fault_point("locked")
            check_cancelled()  # claimed, nothing written yet
        except BaseException as exc:  # (an OS error raised as the output's)
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: Any, _: Any) -> None:
        """Remove what is staged (or, after the swap, the previous output)."""
        with self._held:  # (a signal taken meanwhile is raised as this ends)
            if isinstance(error, OSError) and not isinstance(error, OutputError):
                raise output_error(
                    self.out, error, is_replaced=self.committed
                ) from error

    def path(self, name: str) -> Path:
        """Where the file `name` is staged (a plain file name)."""
        if not is_plain_name(name) or name.startswith(".") or name == MANIFEST:
            shown = name.removesuffix(".parquet")
            msg = f"{self.out}: cannot write a table named {shown!r}.\nHint: name tables with a plain file name."
            raise OutputError(msg)
        return self.folder / name

    def write_table(self, name: str, table: pa.Table, *, is_tuned: bool = True) -> None:
        """Write `table` (one row group when tuned) as the staged file `name`, recorded."""
        self.write_parts(
            name, table.schema, [table], is_tuned=is_tuned, then=lambda: None
        )

    def write_parts(
        self,
        name: str,
        schema: pa.Schema,
        parts: Iterable[pa.Table],
        *,
        then: Callable[[], _T],
        is_tuned: bool = True,
        plain: tuple[str, ...] = (),
    ) -> _T:
        """Write `parts` as the staged file `name`, a row group each, recorded; what `then` returns.

        Each part is encoded on a writer thread while the caller makes the next
        one, holding at most two parts in memory. ``then()`` runs here while the
        thread finishes and syncs the file (both release the GIL): a job
        finishing its result. The thread is done with the file before this
        returns or raises. Untuned, a part is cut into row groups as pyarrow's
        defaults say; an empty part is an empty row group.
        """
        staged = self.path(name)
        with _opened(staged, _NEW) as descriptor, contextlib.ExitStack() as held:
            file = TableFile(
                descriptor, schema, name=name, is_tuned=is_tuned, plain=plain
            )
            held.callback(file.abandon)  # after the thread stops (closed if done)
            thread, pending = held.enter_context(Threads(1, "writer")), None
            for part in parts:
                if pending is not None:
                    pending.result()  # raises what writing the part before raised
                rows = max(part.num_rows, 1) if is_tuned else None
                pending = thread.submit(file.write, part, row_group_size=rows)
            syncing = thread.submit(file.close)  # (one thread: after the last part)
            done = then()
            if pending is not None:
                pending.result()  # raises what writing the last part raised
            self.outputs[name] = syncing.result()
        with _FAULT_LOCK:  # the point counts its passes; tables finish in any order
            fault_point("table-written")
        return done

    def keep(self, *, skip: set[str]) -> None:
        """Carry the previous output's files into the new one (hard links), but `skip`."""
        for name in sorted(entry.name for entry in self.target.iterdir()):
            if name in skip or name == MANIFEST:
                continue
            source, copy = self.target / name, self.folder / name
            try:
                os.link(source, copy, follow_symlinks=False)
            except OSError as exc:  # links refused here: a copy, synced
                if exc.errno not in _NO_LINKS:
                    raise
                shutil.copy2(source, copy)
                _sync(copy)

    def stage_file(
        self, path: str | Path, data: bytes, *, option: str, is_ours: Recognizer
    ) -> None:
        """Have `path` (a file beside the output: a run report) written with the commit.

        Written and synced now, so a file that cannot be written stops the
        commit with the previous output unchanged; renamed in right after the swap.
        """
        beside = _Beside(Path(path), [data], option=option, is_ours=is_ours)
        self._held.callback(beside.discard)
        self._beside.append(beside)

    def commit(self, *, created_at: str | None = None) -> Path:
        """Write the manifest, swap the folder in (the one swap), then the staged files.

        A new manifest is stamped as lbnorm's (tool, version, format, creation
        time, environment); a previous output's (tables added to it) keeps its own.

        Args:
            created_at: ISO 8601 creation time (the caller's ``SOURCE_DATE_EPOCH``,
                read by the composition layer); defaults to now.
        """
        manifest = dict(self.manifest)
        if "created_at" not in manifest:  # (a previous output's has one)
            manifest |= {
                "tool": "lbnorm",
                "version": lbnorm_version(),
                "format": OUTPUT_FORMAT,
                "created_at": created_at or iso_time(),
            }
            manifest.setdefault("environment", environment())
        manifest["outputs"] = {**manifest.get("outputs", {}), **self.outputs}
        data = manifest_bytes(manifest)
        if len(data) > MANIFEST_LIMIT:  # refused: lbnorm would not read it back
            msg = (
                f"{self.out}: its manifest.json would be {len(data) / 2**20:,.0f} MiB, "
                f"more than lbnorm reads back ({MANIFEST_LIMIT // 2**20} MiB); the "
                "previous output is unchanged.\nHint: report this as a bug, with the "
                "number of input files."
            )
            raise OutputError(msg)
        with _opened(self.folder / MANIFEST, _NEW) as descriptor:
            Hashed(descriptor).write(data)
            os.fsync(descriptor)
        _sync(self.folder)
        fault_point("staged")
        check_cancelled()  # the last moment a cancelled run keeps the previous output
        with _parent_locked(self.target.parent):
            _check_target(self.out, self.target, self.kind)  # files may have come
            (self.folder / STAGING_MARK).unlink()  # (a whole output: ours if left)
            previous = _swap_in(self.folder, self.target)
            self._held.callback(shutil.rmtree, previous, ignore_errors=True)
            self.folder, self.committed = self.out, True  # (files are the output's now)
            _replaced.append(self.out)
            _sync(self.target.parent)
        for beside in self._beside:  # part of this commit: no second decision
            try:
                beside.put(is_own_commit=True)
            except OSError as exc:
                msg = (
                    f"{beside.path}: cannot write the file ({_reason(exc)}); the new "
                    f"output is in place in {self.out}.\nHint: check the file's folder "
                    "and the disk, then run again."
                )
                raise OutputError(msg) from exc
        return self.out

    def _claim(self) -> None:
        """Refuse a busy or foreign target, clear what killed runs left, make a marked staging folder.

        All under the parent folder's lock, so that two commands never claim one
        output, and none removes a staging folder between its creation and its
        lock. The staging folder and its lock are held until the transaction ends.
        """
        parent, tag = self.target.parent, _tag(self.target)
        with _parent_locked(parent), contextlib.ExitStack() as held:  # (leftovers')
            leftovers = _leftovers(self.out, parent, tag, held)
            aside = [path for path in leftovers if path.name[:-12].endswith(".old-")]
            if aside and not os.path.lexists(self.target):  # a swap cut short
                newest = max(aside, key=lambda path: path.stat().st_mtime_ns)
                newest.rename(self.target)  # the previous output put back
                leftovers.remove(newest)
            _check_target(self.out, self.target, self.kind)
            self.folder = parent / f".{tag}.tmp-{uuid.uuid4().hex[:12]}"
            self.folder.mkdir()
            try:
                self._held.callback(os.close, _lock_folder(self.folder))
                (self.folder / STAGING_MARK).write_bytes(b"lbnorm staging folder\n")
            except BaseException:
                shutil.rmtree(self.folder, ignore_errors=True)
                raise
            self._held.callback(shutil.rmtree, self.folder, ignore_errors=True)
            for path in leftovers:  # what killed commands left, removed before unlocked
                shutil.rmtree(path, ignore_errors=True)


def _lock_folder(folder: Path) -> int:
    """Open `folder` and hold an exclusive lock on it; return the descriptor."""
    descriptor = os.open(folder, _FOLDER | os.O_NOFOLLOW)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        raise
    except OSError:  # a file system without directory locks: best effort
        pass
    return descriptor


def _is_ours(folder: Path) -> bool:
    """Whether a staging-named folder is lbnorm's: marked, empty, or exactly an lbnorm output.

    A folder that cannot be read whole is not known to be lbnorm's, so it is
    left alone: among others, a previous output another command swapped out and
    is removing (that removal runs outside the parent folder's lock).
    """
    with contextlib.suppress(OSError):
        if stat.S_ISREG(os.lstat(folder / STAGING_MARK).st_mode):
            return True
    try:
        entries = sorted(entry.name for entry in folder.iterdir())
        return _unlisted(folder, entries)[:2] == ("", [])
    except OSError:
        return False


def _siblings(parent: Path, tag: str, kinds: str) -> list[Path]:
    """What `parent` holds named ``.TAG.KIND-<12 hex>`` (`kinds`: ``tmp``, ``tmp|old``), by name."""
    pattern = re.compile(rf"\.{re.escape(tag)}\.(?:{kinds})-[0-9a-f]{{12}}")
    try:
        names = sorted(entry.name for entry in parent.iterdir())
    except OSError:
        return []
    return [parent / name for name in names if pattern.fullmatch(name)]


def _leftovers(
    out: Path, parent: Path, tag: str, held: contextlib.ExitStack
) -> list[Path]:
    """This output's leftovers that are lbnorm's and nobody holds, locked until `held` closes.

    Raises:
        OutputError: A live command holds one.
    """
    found: list[Path] = []
    for path in _siblings(parent, tag, "tmp|old"):
        if path.is_symlink() or not path.is_dir() or not _is_ours(path):
            continue  # a user's file, link or folder of that name is left alone
        try:
            held.callback(os.close, _lock_folder(path))
        except BlockingIOError:  # a live command holds it
            msg = (
                f"{out}: another lbnorm run is writing this output directory.\n"
                "Hint: wait for it to finish, or write to another --out."
            )
            raise OutputError(msg) from None
        except OSError:  # unreadable: left alone
            continue
        found.append(path)
    return found


@contextlib.contextmanager
def _parent_locked(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on `folder` itself for the block (a claim or a swap).

    Commands writing other outputs in the same folder wait for it, an instant.
    An unreadable folder, or a file system without directory locks, goes unlocked.
    """
    with contextlib.ExitStack() as held:  # (closing the folder releases the lock)
        with contextlib.suppress(OSError):
            fcntl.flock(held.enter_context(_opened(folder)), fcntl.LOCK_EX)
        yield


def _swap_in(staging: Path, target: Path) -> Path:
    """Put `staging` in place of `target`; return where the previous output went (if any)."""
    previous = staging  # (exchanged there, or none was there)
    # (a folder come since the check is not replaced: rename(2) refuses all but an
    # empty one, which the check would have taken too)
    if not os.path.lexists(target):
        staging.rename(target)
    elif not _renameat2(staging, target, _RENAME_EXCHANGE):
        previous = target.parent / f".{_tag(target)}.old-{uuid.uuid4().hex[:12]}"
        target.rename(previous)
        staging.rename(target)
    fault_point("swapped")
    return previous


def _renameat2(source: Path, target: Path, flags: int) -> bool:
    """Linux renameat2(2) with `flags`; False where it is not supported."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    paths = (os.fsencode(source), os.fsencode(target))
    if renameat2(_AT_FDCWD, paths[0], _AT_FDCWD, paths[1], flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP}:
        return False
    raise OSError(code, os.strerror(code), str(target))


# --- single files: a report, an export, the parse cache's entries ------------------------------


def write_file(
    path: str | Path,
    content: bytes | Iterable[bytes] | pa.Table,
    *,
    is_ours: Recognizer | None = None,
    option: str = "cannot write",
) -> None:
    """Write one file whole, through a temporary sibling and one rename.

    A symbolic link is written through. The file is refused inside an lbnorm
    output folder and, with `is_ours`, over a file lbnorm did not write. The
    cancellation flag is checked just before the rename, and the file put in
    place is tracked (:func:`replaced_outputs`).

    Args:
        path: The file.
        content: Its bytes, its bytes in parts (never all in memory), or an
            Arrow table, written as Parquet with pyarrow's defaults (zstd).
        is_ours: Recognizes this writer's files; a temporary such a writer left
            when killed is removed (without it, none is touched).
        option: The option that named the file, for messages.

    Raises:
        OutputError: The disk refuses, or the file there is not lbnorm's; no
            partial file remains, and the file there is as it was.
    """
    beside = _Beside(Path(path), content, option=option, is_ours=is_ours)
    try:
        with _reported(beside.path):
            beside.put()
    finally:
        beside.discard()


class _Beside:
    """A file's new content in a locked temporary sibling, synced, until :meth:`put` renames it.

    Where the system allows (``O_TMPFILE``), the temporary has no name until it
    is complete, so a killed writer leaves nothing; elsewhere it is named from
    the start and locked while its writer lives.
    """

    def __init__(
        self,
        path: Path,
        content: bytes | Iterable[bytes] | pa.Table,
        *,
        option: str,
        is_ours: Recognizer | None,
    ) -> None:
        self.path, self.descriptor, self.is_named = path, -1, False
        try:
            with _reported(path):
                self.target = _resolve(path) if path.is_symlink() else Path.cwd() / path
                _check_name_length(path, self.target, what="file name")
                check_file(path, option=option, is_ours=is_ours)
                folder, tag = self.target.parent, _tag(self.target)
                self.temporary = folder / f".{tag}.tmp-{uuid.uuid4().hex[:12]}"
                with _parent_locked(folder):
                    if is_ours is not None:
                        _remove_dead_temporaries(folder, tag, is_ours)
                    self._create(folder)
                with contextlib.suppress(OSError):  # without file locks: best effort
                    fcntl.flock(self.descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                _fill(self.descriptor, content, name=self.target.name)
                os.fsync(self.descriptor)
                if not self.is_named:  # complete: named now, still locked
                    with _opened(_PROC_FD) as proc:  # (link(2) would not follow)
                        descriptor = str(self.descriptor)
                        os.link(descriptor, self.temporary, src_dir_fd=proc)
                    self.is_named = True
        except BaseException:
            self.discard()
            raise

    def _create(self, folder: Path) -> None:
        """An unnamed file in `folder` where the system allows, else the named temporary."""
        unnamed = getattr(os, "O_TMPFILE", 0)
        if unnamed and _PROC_FD.is_dir():
            with contextlib.suppress(OSError):
                self.descriptor = os.open(
                    folder, unnamed | os.O_WRONLY | os.O_CLOEXEC, 0o666
                )
                return
        self.descriptor = os.open(self.temporary, _NEW, 0o666)
        self.is_named = True

    def put(self, *, is_own_commit: bool = False) -> None:
        """Rename the temporary over the file (unless the command was cancelled first).

        A file committed with its transaction's folder follows the folder's swap
        and is not tracked on its own: the folder is what was put in place.
        """
        if not is_own_commit:
            check_cancelled()
        self.temporary.replace(self.target)
        self.is_named = False
        if not is_own_commit:
            _replaced.append(self.path)
        _sync(self.target.parent)

    def discard(self) -> None:
        if self.is_named:
            with contextlib.suppress(OSError):
                self.temporary.unlink()
            self.is_named = False
        if self.descriptor >= 0:
            os.close(self.descriptor)
            self.descriptor = -1


def _fill(
    descriptor: int, content: bytes | Iterable[bytes] | pa.Table, *, name: str
) -> None:
    """Write `content` to `descriptor` (a table as Parquet, pyarrow's defaults)."""
    if isinstance(content, pa.Table):
        written = TableFile(descriptor, content.schema, name=name, is_tuned=False)
        written.write(content)
        written.close()
    else:
        sink = Hashed(descriptor)
        for part in [content] if isinstance(content, bytes) else content:
            sink.write(part)


def _remove_dead_temporaries(folder: Path, tag: str, is_ours: Recognizer) -> None:
    """Unlink temporaries of this file that no live writer holds and that `is_ours` knows."""
    for path in _siblings(folder, tag, "tmp"):
        # (an OS error: gone, held by a live writer, no locks here, not a file)
        with contextlib.suppress(OSError), _opened(path, _READ) as descriptor:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if is_ours(*_ends(descriptor)):
                path.unlink()


def _sync(path: Path) -> None:
    """Sync a file or a folder's entries (names created or renamed in it) to disk."""
    with _opened(path, os.O_RDONLY | os.O_CLOEXEC) as descriptor:
        os.fsync(descriptor)


def _reason(exc: OSError) -> str:
    return " ".join((exc.strerror or str(exc)).split())


def output_error(out: Path, exc: OSError, *, is_replaced: bool = False) -> OutputError:
    """The error for an output that could not be written, saying what is true of it now."""
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
    msg = f"{out}: cannot write the output ({_reason(exc)}); {state}.\nHint: {hint}."
    return OutputError(msg)
