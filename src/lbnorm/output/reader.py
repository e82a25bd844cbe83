"""Reading an output folder back: one reader, one version of the folder, for every command.

:meth:`Output.open` opens the folder once (a directory descriptor) and, through
it, its ``manifest.json`` (parsed once, size-capped) and every file the manifest
lists, each without following a link or waiting on a FIFO and checked to be a
regular file. A manifest naming anything but a plain file name of the folder is
damaged (exit 4) before any file is opened. Tables are then read from those open
files, so a command reads one version of the folder even while a run swaps a new
one in; a folder replaced while it is being opened is opened again.

What it checks, once: the kind of output (a leaderboard from ``lbnorm run``,
ratings from ``lbnorm arena``, analysis tables from ``diff``, ``impact`` or
``health``), the tables that kind must hold and their contracts
(:mod:`lbnorm.core.schemas`), and each listed file against the manifest: size and
Parquet footer always, sha256 under :data:`HASH_ON_READ` or with ``verify``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pyarrow as pa
import pyarrow.parquet as pq

from lbnorm.core.errors import InputError
from lbnorm.core.files import describe_mode, sha256_of
from lbnorm.core.manifest import INPUTS_TABLE, MANIFEST, OutputKind, manifest_kind
from lbnorm.core.options import MissingPolicy
from lbnorm.core.schemas import (
    BENCHMARK_SCORES,
    SUBTASK_SCORES,
    benchmark_columns,
    is_rate_field,
    leaderboard_schema,
)
from lbnorm.output.transaction import first_few, open_plain, read_manifest
from lbnorm.suites import Suite, recorded_suite

if TYPE_CHECKING:
    import pandas as pd  # only a caller's frames: loaded when one is asked for

__all__ = ["HASH_ON_READ", "Output"]

#: Tables up to this size are hashed on every read; larger ones with ``verify``.
HASH_ON_READ = 64 * 2**20
#: The tables each kind must hold (missing ones named in this order).
_REQUIRED: dict[str, tuple[str, ...]] = {
    "leaderboard": ("benchmarks.parquet", "leaderboard.parquet"),
    "ratings": ("ratings.parquet", "win_rates.parquet"),
    "analysis": (),
}
#: Why a table a run may leave out is absent, and how to have it: (why, hint).
_MISSING = {
    "subtasks.parquet": (
        " (the run was told --no-subtasks)",
        "rerun `lbnorm run ... --out {out}` without --no-subtasks",
    ),
    "paired.parquet": (
        " (the run was not told --paired)",
        "rerun `lbnorm run ... --out {out} --paired` on per-sample inputs",
    ),
}
#: What each kind of output holds (who writes it), and what to do with it instead.
_HOLDS = {
    "leaderboard": (
        "a leaderboard (written by `lbnorm run`)",
        "write ratings with `lbnorm arena BATTLES... --out DIR`",
    ),
    "ratings": (
        "pairwise ratings (written by `lbnorm arena`)",
        "`lbnorm show`, `query`, `diff` and `report` read ratings outputs; for a "
        "leaderboard, write one with `lbnorm run [INPUT...] --out DIR`",
    ),
    "analysis": (
        "the tables of `lbnorm diff`, `impact` or `health`",
        "read those tables with pandas or DuckDB (docs/outputs.md)",
    ),
}
#: Tables whose rank columns are read as nullable integers, and those columns.
_RANKED = ("leaderboard", "benchmarks", "subtasks", "ratings", "win_rates")
_RANKS = r"rank(_within_.*|_upper_bound)?"
_ATTEMPTS = 5
_T = TypeVar("_T")
_PROC_FD = Path("/proc/self/fd")
#: sha256 this process computed, by (device, inode, size, mtime, ctime): each file hashed once.
_hashed: dict[tuple[int, ...], str] = {}
#: Outputs whose changed suite was already noted on stderr by this process.
_noted: set[str] = set()


class _ReplacedError(Exception):
    """The folder was replaced while it was being opened."""


class Output:
    """One version of an output folder, opened once: its kind, manifest and tables.

    Open it with :meth:`open`. Its files stay open until :meth:`close` (or the
    end of a ``with`` block, or the object's end), so every table read comes
    from the version the manifest describes.

    Attributes:
        path: The folder as given.
        kind: ``leaderboard``, ``ratings`` or ``analysis``.
        manifest: The whole ``manifest.json``.
    """

    path: Path
    kind: OutputKind
    manifest: dict[str, Any]

    def __init__(self, path: Path, kind: OutputKind | None, *, verify: bool) -> None:
        """Open and check the folder (see :meth:`open`); on a failure, close it again."""
        self.path = path
        self._folder = -1
        self._files: dict[str, int] = {}
        try:
            self._open(kind, verify=verify)
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(
        cls,
        out: Output | str | Path,
        kind: OutputKind | None = None,
        *,
        verify: bool = False,
    ) -> Output:
        """Open and check an output folder (an :class:`Output` is checked and returned).

        Args:
            out: The folder.
            kind: What it must hold; None: any kind (a folder saying none is a
                leaderboard's).
            verify: Hash every table against the manifest, however large.

        Raises:
            InputError: It is missing, not lbnorm's, of another kind, lacks a
                table, its manifest names a path, or a file is damaged or not
                what the manifest records; the message names the file.
        """
        if isinstance(out, Output):
            if kind is not None and out.kind != kind:
                out._refuse_kind(kind, out.kind)
            if verify:  # (a table hashed already is not hashed again: _sha256)
                out._compare(verify=True)
            return out
        for _ in range(_ATTEMPTS):
            with contextlib.suppress(_ReplacedError):
                return cls(Path(out), kind, verify=verify)
        msg = (
            f"{out}: was replaced {_ATTEMPTS} times while being read.\n"
            "Hint: run the command again once the writes to it stop."
        )
        raise InputError(msg)

    def __enter__(self) -> Output:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def __fspath__(self) -> str:
        return str(self.path)

    __str__ = __fspath__

    def close(self) -> None:
        """Close the folder and its files."""
        for descriptor in [*self._files.values(), self._folder]:
            if descriptor >= 0:
                os.close(descriptor)
        self._files, self._folder = {}, -1

    # --- tables ---

    def has(self, name: str) -> bool:
        """Whether the folder holds the table (``subtasks``, ``health.parquet``...)."""
        return _file(name) in self._files

    def location(self, name: str) -> str:
        """Where Arrow or DuckDB reads a table: its opened file (this version's)."""
        file = _file(name)
        descriptor = self._files.get(file)
        if descriptor is None:
            why, hint = _MISSING.get(file, ("", self._rewrite))
            msg = f"{self.path}: no {file}{why}.\nHint: {hint.format(out=self.path)}."
            raise InputError(msg)
        if _PROC_FD.is_dir():
            return str(_PROC_FD / str(descriptor))
        return str(self.path / file)  # (no /proc: the path, as it is now)

    def table(
        self,
        name: str,
        *,
        columns: list[str] | None = None,
        models: list[str] | None = None,
    ) -> pa.Table:
        """Read a table (`columns` of it, the rows of `models`) as Arrow."""
        filters = [("model", "in", models)] if models is not None else None
        return self._read(
            name, lambda at: pq.read_table(at, columns=columns, filters=filters)
        )

    def frame(
        self,
        name: str,
        *,
        columns: list[str] | None = None,
        models: list[str] | None = None,
    ) -> pd.DataFrame:
        """Read a table into pandas; a run's or arena's ranks as nullable ``Int64``.

        (``rank``, ``rank_within_*``, ``rank_upper_bound``; an added table comes
        as pandas wrote it.)
        """
        table = self.table(name, columns=columns, models=models)
        frame: pd.DataFrame = table.to_pandas()
        if _file(name).removesuffix(".parquet") not in _RANKED:
            return frame
        ranks = [c for c in frame.columns if re.fullmatch(_RANKS, c)]
        return frame.assign(**{c: frame[c].astype("Int64") for c in ranks})

    def schema(self, name: str) -> pa.Schema:
        """A table's schema (its footer)."""
        return self._read(name, pq.read_schema, what="damaged or not Parquet")

    def inputs(self) -> pa.Table:
        """The input files the run read, one row each (path, resolved, sha256, rows...).

        Listed in ``manifest.json`` for a few inputs, in ``inputs.parquet`` for many.
        """
        inputs = self.manifest.get("inputs")
        if isinstance(inputs, dict):  # (the manifest names no other table: checked)
            return self.table(INPUTS_TABLE)
        return pa.Table.from_pylist(inputs if isinstance(inputs, list) else [])

    def metadata_columns(self) -> list[str]:
        """The leaderboard's columns beyond its contract (joined metadata).

        Group ranks (``rank_within_*``) and the suite's board rates are not
        metadata and are left out.
        """
        schema = self.schema("leaderboard")
        contract = set(leaderboard_schema(benchmark_columns(schema.names)).names)
        return [
            field.name
            for field in schema
            if field.name not in contract
            and not field.name.startswith("rank_within_")
            and not is_rate_field(field)
        ]

    def suite(self) -> tuple[Suite | None, MissingPolicy]:
        """The suite the output was computed under, if it still loads with the same hash.

        Tried in turn: the suite's path as recorded (relative to where the command
        runs), its absolute path, the path relative to the folder the output was
        written from, then the suite text the manifest embeds.

        Returns:
            The suite (None if it is gone or changed; a note goes to stderr, once
            per output) and the output's missing-data policy.
        """
        info, options, environment = (
            value if isinstance(value := self.manifest.get(key), dict) else {}
            for key in ("suite", "options", "environment")
        )
        missing = cast("MissingPolicy", str(options.get("missing", "exclude")))
        cwd = environment.get("cwd")
        suite = recorded_suite(info, cwd=cwd if isinstance(cwd, str) else None)
        if suite is None and str(self.path) not in _noted:
            _noted.add(str(self.path))
            print(
                f"lbnorm: note: {self.path}: its suite {str(info.get('source', ''))!r} is gone or changed; no "
                "rank intervals or stderr-aware floors for this output.",
                file=sys.stderr,
            )
        return suite, missing

    # --- opening and checking ---

    @property
    def _rewrite(self) -> str:
        command = "lbnorm arena" if self.kind == "ratings" else "lbnorm run"
        return f"rerun `{command}` to rewrite the output"

    def _open(self, kind: OutputKind | None, *, verify: bool) -> None:
        try:
            self._folder = os.open(
                self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
            )
        except OSError as exc:
            why = _what_is(self.path, exc)
            hint = (
                f"write one with `{_command(kind, self.path)}`"
                if why == "no such folder"
                else f"give the folder `{_command(kind, 'DIR')}` wrote, not a file"
            )
            raise self._not_an_output(why, hint) from exc
        try:
            self._check(kind, verify=verify)
        except InputError:
            if self._is_replaced():
                raise _ReplacedError from None
            raise

    def _check(self, kind: OutputKind | None, *, verify: bool) -> None:
        manifest, problem = read_manifest(self._folder, whole=True)
        held = manifest_kind(manifest) if manifest is not None else None
        self.kind = kind or held or "leaderboard"
        if held not in {None, self.kind}:  # (an lbnorm manifest of another kind)
            self._refuse_kind(self.kind, held)
        entries = {entry.name for entry in os.scandir(self._folder)}
        required = (MANIFEST, *_REQUIRED[self.kind])
        if missing := [name for name in required if name not in entries]:
            names = ", ".join(missing)
            if held is not None:  # lbnorm's manifest: an output of lbnorm's, damaged
                msg = f"{self.path}: a {self.kind} output without {names}.\nHint: {self._rewrite}."
                raise InputError(msg)
            why = f"missing {names}"
            hint = f"write one with `{_command(self.kind, self.path)}`"
            raise self._not_an_output(why, hint)
        if manifest is None:
            why = f"its manifest.json {problem}"
            raise self._not_an_output(why, "point at a folder `lbnorm run --out` wrote")
        self.manifest = manifest
        if manifest.get("format", 0) < 1:  # (checked to be an integer)
            msg = (
                f"{self.path / MANIFEST}: written by a development version of lbnorm "
                "before output format 1, which this one reads.\nHint: re-run "
                f"`{_command(self.kind, self.path)}` to rewrite it."
            )
            raise InputError(msg)
        for name in manifest["outputs"]:
            try:
                self._files[name] = open_plain(self._folder, name)
            except OSError as exc:  # (replaced meanwhile: _open opens it again)
                reason = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
                msg = f"{self.path / name}: cannot read: {reason}.\nHint: the output is damaged; {self._rewrite}."
                raise InputError(msg) from exc
        for name in ("leaderboard", "benchmarks", "subtasks"):
            if self.kind == "leaderboard" and self.has(name):
                self._check_contract(name)
        self._compare(verify=verify)  # (every table's footer read)

    def _is_replaced(self) -> bool:
        """Whether the path now names another folder than the one opened (or none)."""
        try:
            now, opened = self.path.stat(), os.fstat(self._folder)
        except OSError:
            return True
        return (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino)

    def _not_an_output(self, why: str, hint: str) -> InputError:
        """The error for a folder that is not an lbnorm output: why, and what to do."""
        return InputError(
            f"{self.path}: not an lbnorm output directory ({why}).\nHint: {hint}."
        )

    def _refuse_kind(self, wanted: str, held: str | None) -> None:
        holds, hint = _HOLDS[held or "leaderboard"]
        noun = {"ratings": "pairwise ratings", "analysis": "analysis tables"}.get(
            wanted, "a leaderboard"
        )
        msg = f"{self.path}: holds {holds}, not {noun}; this reads {wanted} outputs.\nHint: {hint}."
        raise InputError(msg)

    def _check_contract(self, name: str) -> None:
        """Raise if a table lacks its contract's columns or types."""
        schema = self.schema(name)
        contract = {
            "subtasks": SUBTASK_SCORES,
            "benchmarks": BENCHMARK_SCORES,
            "leaderboard": leaderboard_schema(benchmark_columns(schema.names)),
        }[name]
        where = f"{self.path / _file(name)}: not an lbnorm {name} table"
        if absent := [f.name for f in contract if f.name not in schema.names]:
            msg = f"{where}: missing column(s) {first_few(absent)}; it has {first_few(schema.names)}.\nHint: {self._rewrite}."
            raise InputError(msg)
        wrong = [
            f"{f.name} is {schema.field(f.name).type}, not {_kind(f.type)}"
            for f in contract
            if _kind(schema.field(f.name).type) != _kind(f.type)
        ]
        if wrong:
            msg = f"{where}: {first_few(wrong)}.\nHint: {self._rewrite}."
            raise InputError(msg)

    def _compare(self, *, verify: bool) -> None:
        """Raise if a listed file's size, footer (rows, columns) or sha256 is not the manifest's."""
        for name, entry in sorted(self.manifest["outputs"].items()):
            descriptor = self._files.get(name)
            if not isinstance(entry, dict) or descriptor is None:
                continue
            info = os.fstat(descriptor)
            self._same(name, "size in bytes", info.st_size, entry.get("bytes"))
            if name.endswith(".parquet"):
                footer = self._read(name, pq.read_metadata)
                self._same(name, "rows", footer.num_rows, entry.get("rows"))
                columns = len(footer.schema.to_arrow_schema())
                self._same(name, "columns", columns, entry.get("columns"))
            if verify or info.st_size < HASH_ON_READ:
                self._same(name, "sha256", _sha256(descriptor), entry.get("sha256"))

    def _same(self, name: str, what: str, actual: object, recorded: object) -> None:
        if actual == recorded:
            return
        shown = (lambda value: str(value)[:16]) if what == "sha256" else str
        msg = (
            f"{self.path / name}: does not match the output's manifest.json ({what} "
            f"{shown(actual)}, recorded {shown(recorded)}): the file was changed or "
            f"damaged after lbnorm wrote it.\nHint: restore it from a copy, or {self._rewrite}."
        )
        raise InputError(msg)

    def _read(
        self, name: str, read: Callable[[str], _T], *, what: str = "damaged"
    ) -> _T:
        """`read` of a table's opened file; an error reading it names the file as `what`."""
        location = self.location(name)
        try:
            return read(location)
        except (pa.ArrowException, OSError) as exc:
            reason = " ".join(str(exc).split())
            reason = re.sub(
                r"^Could not open Parquet input source '[^']*': ", "", reason
            )
            msg = f"{self.path / _file(name)}: cannot read: {reason.rstrip('. ')}.\nHint: the file is {what}; {self._rewrite}."
            raise InputError(msg) from exc


def _what_is(path: Path, error: OSError) -> str:
    """Why `path` could not be opened as a folder: absent, a file of some kind, or the error.

    A file given for the output folder (``export FILE``) is named as the file it is.
    """
    if error.errno == errno.ENOENT:
        return "no such folder"
    if error.errno == errno.ENOTDIR:
        try:
            return f"it is {describe_mode(path.stat().st_mode)}"
        except OSError:  # (a path through a file: a/file/b)
            return "no such folder"
    return str(error.strerror or error)


def _command(kind: OutputKind | None, out: object) -> str:
    """The command that writes an output of `kind` to `out` (a ratings one, or a leaderboard)."""
    if kind == "ratings":
        return f"lbnorm arena BATTLES... --out {out}"
    return f"lbnorm run [INPUT...] --out {out}"


def _file(name: str) -> str:
    return name if "." in name else f"{name}.parquet"


def _sha256(descriptor: int) -> str:
    """An open file's sha256, computed once per version of it in this process."""
    info = os.fstat(descriptor)
    key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    if key not in _hashed:
        with os.fdopen(os.dup(descriptor), "rb", buffering=0) as handle:
            handle.seek(0)
            _hashed[key] = sha256_of(handle)
    return _hashed[key]


def _kind(kind: pa.DataType) -> str:
    """What a column holds, whatever its encoding: text, integer, number, boolean.

    Examples:
        >>> _kind(pa.dictionary(pa.int32(), pa.string())), _kind(pa.int32())
        ('text', 'integer')
    """
    kind = kind.value_type if pa.types.is_dictionary(kind) else kind
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "text"
    if pa.types.is_integer(kind):
        return "integer"
    if pa.types.is_floating(kind):
        return "number"
    return "boolean" if pa.types.is_boolean(kind) else str(kind)
