"""Reading an output directory back: the one reader that query, diff, report and health use.

An output directory holds ``manifest.json``, ``benchmarks.parquet``,
``leaderboard.parquet`` and (unless the run was told ``--no-subtasks``)
``subtasks.parquet``, plus any analysis tables added beside them. Everything
that reads one goes through here, so a missing or damaged file gets one clear
error.

``lbnorm arena`` writes the other kind of output: ``ratings.parquet``,
``win_rates.parquet`` and a manifest whose ``kind`` is ``"ratings"``.
:func:`output_kind` is the one place that tells them apart (a manifest without
``kind`` is a leaderboard's); each face dispatches on it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Literal, cast

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lbnorm.core.errors import InputError, LbnormError
from lbnorm.core.files import file_format, sha256_file
from lbnorm.core.manifest import OutputKind, manifest_kind, manifest_problem
from lbnorm.core.options import MissingPolicy
from lbnorm.core.schemas import (
    BENCHMARK_SCORES,
    SUBTASK_SCORES,
    benchmark_columns,
    leaderboard_schema,
)
from lbnorm.suites import Suite, load_suite, parse_suite

__all__ = [
    "RATINGS_FILES",
    "OutputKind",
    "OutputTable",
    "RatingsTable",
    "check_output",
    "check_ratings_output",
    "has_table",
    "input_count",
    "is_ratings_output",
    "metadata_columns",
    "output_kind",
    "output_suite",
    "read_inputs",
    "read_manifest",
    "read_output_table",
    "read_ratings_table",
    "read_wide_table",
    "verify_output",
]

#: An output table, by the name of its file without ``.parquet`` (``paired``: only
#: an output of ``lbnorm run --paired`` has it).
OutputTable = Literal["subtasks", "benchmarks", "leaderboard", "paired"]

#: A ratings output's table, by the name of its file without ``.parquet``.
RatingsTable = Literal["ratings", "win_rates"]

#: The tables of a ratings output directory.
RATINGS_FILES = ("ratings.parquet", "win_rates.parquet")


def check_output(out: str | Path, *, verify: bool = False) -> Path:
    """Return `out` if it is an lbnorm output directory, checked once for all readers.

    The folder must hold lbnorm's ``manifest.json`` (``"tool": "lbnorm"``, a
    format this version reads), ``benchmarks.parquet`` and
    ``leaderboard.parquet``, and ``subtasks.parquet`` unless the run was told
    ``--no-subtasks``; each table must be readable Parquet with its contract's
    columns and types (:mod:`lbnorm.core.schemas`), and each table added beside them
    (listed in the manifest) readable Parquet. Each table the manifest lists is
    checked against it (:func:`_check_against_manifest`): its size and footer
    always, its sha256 when it is small or `verify` is set.

    Raises:
        InputError: It is missing, not lbnorm's, lacks a file, or a table is
            damaged or of a foreign schema; the message names the file and what
            is wrong.
    """
    out = Path(out)
    if not out.is_dir():
        msg = (
            f"{out}: not an lbnorm output directory (no such folder).\n"
            f"Hint: write one with `lbnorm run [INPUT...] --out {out}`."
        )
        raise InputError(msg)
    missing = [
        name
        for name in ("manifest.json", "benchmarks.parquet", "leaderboard.parquet")
        if not (out / name).is_file()
    ]
    if missing:
        if _declared_kind(out) == "ratings":
            msg = (
                f"{out}: holds pairwise ratings (written by `lbnorm arena`), not a "
                "leaderboard; this reads leaderboard outputs.\n"
                f"Hint: `lbnorm show`, `query`, `diff` and `report` read ratings "
                f"outputs; for a leaderboard, write one with `lbnorm run [INPUT...] --out DIR`."
            )
            raise InputError(msg)
        if _declared_kind(out) == "analysis":
            msg = (
                f"{out}: holds the tables of `lbnorm diff`, `impact` or `health`, not a "
                "leaderboard; this reads leaderboard outputs.\n"
                "Hint: read those tables with pandas or DuckDB (docs/outputs.md)."
            )
            raise InputError(msg)
        msg = (
            f"{out}: not an lbnorm output directory (missing {', '.join(missing)}).\n"
            f"Hint: write one with `lbnorm run [INPUT...] --out {out}`."
        )
        raise InputError(msg)
    manifest = _load_manifest(out / "manifest.json")
    for name in _TABLES:
        if name != "subtasks" or (out / "subtasks.parquet").is_file():
            _check_table(out / f"{name}.parquet", name)
    listed = cast("dict[str, object]", manifest["outputs"])
    for added in sorted(set(listed) - {f"{name}.parquet" for name in _TABLES}):
        if added.endswith(".parquet") and (out / added).is_file():
            _read_schema(out / added)  # added tables (health, intervals, ...): readable
    _check_against_manifest(
        out, manifest, verify=verify
    )  # what each file holds is lbnorm's
    return out


#: The tables an output directory holds, in the order they are checked.
_TABLES: tuple[OutputTable, ...] = ("leaderboard", "benchmarks", "subtasks")

_REWRITE = "rerun `lbnorm run` to rewrite the output"


def _load_manifest(path: Path) -> dict[str, object]:
    """The manifest at `path`, if lbnorm wrote it."""
    try:
        manifest = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not valid JSON"
        msg = f"{path}: cannot read the manifest ({_one_line(str(reason))}).\nHint: {_REWRITE}."
        raise InputError(msg) from exc
    problem = manifest_problem(manifest)
    if problem is not None:
        msg = (
            f"{path.parent}: not an lbnorm output directory (its manifest.json "
            f"{problem}).\nHint: point at a folder `lbnorm run --out` wrote."
        )
        raise InputError(msg)
    return cast("dict[str, object]", manifest)


#: Tables up to this size are hashed on every read; larger ones with ``--verify``.
HASH_ON_READ = 64 * 2**20
#: Outputs checked by this process: (folder, verified) -> what was checked (each
#: listed file's size, mtime and inode), so that reading table after table does
#: not hash them again.
_CHECKED: dict[tuple[Path, bool], tuple[tuple[str, int, int, int], ...]] = {}


def verify_output(out: str | Path) -> Path:
    """Check every table of an output against its manifest, sha256 included (``--verify``).

    Raises:
        InputError: As :func:`check_output`; a table differs from what lbnorm wrote.
    """
    if is_ratings_output(out):
        return check_ratings_output(out, verify=True)
    return check_output(out, verify=True)


def _check_against_manifest(
    out: Path, manifest: dict[str, object], *, verify: bool
) -> None:
    """Raise if a listed table's size, footer (rows, columns) or sha256 is not the manifest's.

    The sha256 is compared for tables under :data:`HASH_ON_READ`, or all with
    `verify`. A table a manifest lists but the folder lacks is left to the
    caller's own checks (``--no-subtasks``). Keys a manifest does not record
    (older outputs have no ``bytes``) are not checked.
    """
    listed = cast("dict[str, object]", manifest["outputs"])  # manifest_problem checked
    signature = _signature(out, listed)
    folder = out.resolve()
    if signature in (_CHECKED.get((folder, verify)), _CHECKED.get((folder, True))):
        return
    for name, entry in sorted(listed.items()):
        path = out / name
        if not isinstance(entry, dict) or not path.is_file():
            continue
        size = path.stat().st_size
        _compare(path, "size in bytes", size, entry.get("bytes"))
        if name.endswith(".parquet"):
            try:
                footer = pq.read_metadata(path)
            except (pa.ArrowException, OSError) as exc:
                msg = f"{path}: cannot read: {_arrow_reason(exc)}.\nHint: the file is damaged; {_REWRITE}."
                raise InputError(msg) from exc
            _compare(path, "rows", footer.num_rows, entry.get("rows"))
            columns = len(footer.schema.to_arrow_schema())
            _compare(path, "columns", columns, entry.get("columns"))
        if "sha256" in entry and (verify or size < HASH_ON_READ):
            _compare(path, "sha256", sha256_file(path), entry["sha256"])
    _CHECKED[(folder, verify)] = signature


def _signature(
    out: Path, listed: dict[str, object]
) -> tuple[tuple[str, int, int, int], ...]:
    stats = []
    for name in sorted([*listed, "manifest.json"]):
        try:
            info = (out / name).stat()
        except OSError:
            continue
        stats.append((name, info.st_size, info.st_mtime_ns, info.st_ino))
    return tuple(stats)


def _compare(path: Path, what: str, actual: object, recorded: object) -> None:
    if recorded is None or actual == recorded:
        return
    shown = (lambda value: str(value)[:16]) if what == "sha256" else str
    msg = (
        f"{path}: does not match the output's manifest.json ({what} "
        f"{shown(actual)}, recorded {shown(recorded)}): the file was changed or "
        f"damaged after lbnorm wrote it.\nHint: restore it from a copy, or {_REWRITE}."
    )
    raise InputError(msg)


def _check_table(path: Path, name: OutputTable) -> None:
    """Raise if `path` is not a readable Parquet file with the table's contract."""
    schema = _read_schema(path)
    contract = {
        "subtasks": SUBTASK_SCORES,
        "benchmarks": BENCHMARK_SCORES,
        "leaderboard": leaderboard_schema(benchmark_columns(schema.names)),
    }[name]
    if absent := [field.name for field in contract if field.name not in schema.names]:
        msg = (
            f"{path}: not an lbnorm {name} table: missing column(s) "
            f"{_names(absent)}; it has {_names(schema.names)}.\nHint: {_REWRITE}."
        )
        raise InputError(msg)
    wrong = [
        f"{field.name} is {schema.field(field.name).type}, not {_kind(field.type)}"
        for field in contract
        if _kind(schema.field(field.name).type) != _kind(field.type)
    ]
    if wrong:
        msg = f"{path}: not an lbnorm {name} table: {_names(wrong)}.\nHint: {_REWRITE}."
        raise InputError(msg)


def _read_schema(path: Path) -> pa.Schema:
    """A Parquet file's schema (its footer), or a clear error."""
    try:
        return pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        msg = f"{path}: cannot read: {_arrow_reason(exc)}.\nHint: the file is damaged or not Parquet; {_REWRITE}."
        raise InputError(msg) from exc


def _kind(kind: pa.DataType) -> str:
    """What a column holds, whatever its encoding: text, integer, number, boolean.

    Examples:
        >>> _kind(pa.dictionary(pa.int32(), pa.string())), _kind(pa.int32())
        ('text', 'integer')
    """
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "text"
    if pa.types.is_integer(kind):
        return "integer"
    if pa.types.is_floating(kind):
        return "number"
    if pa.types.is_boolean(kind):
        return "boolean"
    return str(kind)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


_SHOWN = 5


def _arrow_reason(exc: BaseException) -> str:
    r"""A reader's error as one clause: no file name repeated, no newline, no final stop.

    Examples:
        >>> _arrow_reason(OSError("Couldn't deserialize thrift: bad type\n"))
        "Couldn't deserialize thrift: bad type"
    """
    text = _one_line(str(exc))
    text = re.sub(r"^Could not open Parquet input source '[^']*': ", "", text)
    return text.rstrip(". ")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def output_kind(out: str | Path) -> OutputKind:
    """What an output directory holds: its manifest's ``kind``, ``leaderboard`` if none.

    Args:
        out: The output directory.

    Returns:
        ``leaderboard`` (``lbnorm run``) or ``ratings`` (``lbnorm arena``).

    Raises:
        InputError: No ``manifest.json``, a manifest that is not a JSON object,
            or a ``kind`` this lbnorm does not know.

    Examples:
        >>> import json, tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "manifest.json").write_text(json.dumps({"tool": "lbnorm", "outputs": {}}))
        >>> output_kind(folder)
        'leaderboard'
    """
    out = Path(out)
    path = out / "manifest.json"
    if not path.is_file():
        msg = (
            f"{out}: not an lbnorm output directory (missing manifest.json).\n"
            "Hint: write one with `lbnorm run [INPUT...] --out DIR` (a leaderboard) "
            "or `lbnorm arena BATTLES... --out DIR` (ratings)."
        )
        raise InputError(msg)
    return manifest_kind(_load_manifest(path))


def is_ratings_output(out: str | Path) -> bool:
    """Whether a directory's manifest says it holds ratings: what each face dispatches on.

    A directory without a readable manifest is not (the leaderboard readers
    then say what is missing).

    Examples:
        >>> is_ratings_output("no-such-directory")
        False
    """
    return _declared_kind(Path(out)) == "ratings"


def check_ratings_output(out: str | Path, *, verify: bool = False) -> Path:
    """Return `out` if it is a ratings output directory (``lbnorm arena``).

    Raises:
        InputError: It is missing, lacks the manifest or a table, or holds a
            leaderboard.
    """
    out = Path(out)
    if output_kind(out) != "ratings":
        msg = (
            f"{out}: holds a leaderboard (written by `lbnorm run`), not pairwise "
            "ratings.\n"
            f"Hint: write ratings with `lbnorm arena BATTLES... --out DIR`."
        )
        raise InputError(msg)
    if missing := [name for name in RATINGS_FILES if not (out / name).is_file()]:
        msg = (
            f"{out}: a ratings output without {', '.join(missing)}.\n"
            f"Hint: rerun `lbnorm arena BATTLES... --out {out}` to rewrite it."
        )
        raise InputError(msg)
    _check_against_manifest(out, _load_manifest(out / "manifest.json"), verify=verify)
    return out


def read_ratings_table(out: str | Path, name: RatingsTable) -> pd.DataFrame:
    """Read one table of a ratings output into pandas.

    Args:
        out: The output directory.
        name: ``ratings`` or ``win_rates``.

    Returns:
        The table; ``rank`` and ``rank_upper_bound`` as nullable ``Int64``.

    Raises:
        InputError: Not a ratings output, or the file is unreadable.
    """
    path = check_ratings_output(out) / f"{name}.parquet"
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        msg = f"{path}: cannot read: {exc}.\nHint: rerun `lbnorm arena` to rewrite the output."
        raise InputError(msg) from exc
    frame: pd.DataFrame = table.to_pandas()
    ranks = [c for c in ("rank", "rank_upper_bound") if c in frame.columns]
    return frame.assign(**{c: frame[c].astype("Int64") for c in ranks})


def read_manifest(out: str | Path) -> dict[str, object]:
    """Return an output directory's ``manifest.json`` as a dict (either kind).

    Raises:
        InputError: Not an output directory, or the manifest is not lbnorm's.
    """
    out = Path(out)
    folder = check_ratings_output(out) if is_ratings_output(out) else check_output(out)
    return _load_manifest(folder / "manifest.json")


def _declared_kind(out: Path) -> object:
    """The manifest's ``kind`` if it can be read (None otherwise)."""
    try:
        return json.loads((out / "manifest.json").read_bytes()).get("kind")
    except (OSError, ValueError, RecursionError, AttributeError):
        return None


def read_output_table(
    out: str | Path,
    name: OutputTable,
    *,
    columns: list[str] | None = None,
    models: list[str] | None = None,
) -> pd.DataFrame:
    """Read one table of an output directory into pandas.

    Args:
        out: The output directory.
        name: ``subtasks``, ``benchmarks``, ``leaderboard`` or ``paired``.
        columns: Columns to read (default all).
        models: Read only these models' rows (a Parquet filter).

    Returns:
        The table; ranks (``rank``, ``rank_within_*``) as nullable ``Int64``.

    Raises:
        InputError: Not an output directory, or the file is unreadable.
    """
    path = check_output(out) / f"{name}.parquet"
    if name == "paired" and not path.is_file():
        msg = (
            f"{path.parent}: no paired.parquet (the run was not told --paired).\n"
            f"Hint: rerun `lbnorm run ... --out {path.parent} --paired` on per-sample inputs."
        )
        raise InputError(msg)
    if not path.is_file():
        msg = (
            f"{path.parent}: no {path.name} (the run was told --no-subtasks).\n"
            f"Hint: rerun `lbnorm run ... --out {path.parent}` without --no-subtasks."
        )
        raise InputError(msg)
    filters = [("model", "in", models)] if models is not None else None
    try:
        table = pq.read_table(path, columns=columns, filters=filters)
    except (pa.ArrowException, OSError) as exc:
        msg = f"{path}: cannot read: {_arrow_reason(exc)}.\nHint: the file is damaged; {_REWRITE}."
        raise InputError(msg) from exc
    frame: pd.DataFrame = table.to_pandas()
    ranks = [c for c in frame.columns if c == "rank" or c.startswith("rank_within_")]
    return frame.assign(**{name: frame[name].astype("Int64") for name in ranks})


def input_count(out: str | Path) -> int:
    """How many input files an output's run read: listed inline, or in ``inputs.parquet``."""
    manifest = read_manifest(out)
    inputs = manifest.get("inputs")
    if isinstance(inputs, list):
        return len(inputs)
    if isinstance(inputs, dict) and isinstance(inputs.get("table"), str):
        return int(pq.read_metadata(Path(out) / inputs["table"]).num_rows)
    return 0


def read_inputs(out: str | Path) -> pa.Table:
    """The input files an output's run read, one row each (path, resolved, sha256, rows...).

    Listed in ``manifest.json`` for a few inputs, in ``inputs.parquet`` for many;
    either way one Arrow table, sorted by path.
    """
    manifest = read_manifest(out)
    inputs = manifest.get("inputs")
    if isinstance(inputs, dict) and isinstance(inputs.get("table"), str):
        return pq.read_table(Path(out) / inputs["table"])
    return pa.Table.from_pylist(inputs if isinstance(inputs, list) else [])


def has_table(out: str | Path, name: OutputTable) -> bool:
    """Whether an output directory holds the table (subtasks may be left out)."""
    return (check_output(out) / f"{name}.parquet").is_file()


def metadata_columns(out: str | Path) -> list[str]:
    """Return the leaderboard's columns beyond its contract (joined metadata).

    Group ranks (``rank_within_*``) are not metadata and are left out.
    """
    out = check_output(out)
    names = pq.read_schema(out / "leaderboard.parquet").names
    benchmarks = [name.removesuffix(" Raw") for name in names if name.endswith(" Raw")]
    contract = set(leaderboard_schema(benchmarks).names)
    return [
        name
        for name in names
        if name not in contract and not name.startswith("rank_within_")
    ]


#: Outputs whose changed suite was already noted on stderr by this process.
_NOTED: set[str] = set()


def output_suite(out: str | Path) -> tuple[Suite | None, MissingPolicy]:
    """The suite an output was computed under, if it still loads with the same hash.

    Read from any directory: the suite's path as recorded (relative to where the
    command runs), then its absolute path, then the path relative to the
    directory the output was written from; where none holds the file with the
    recorded hash (moved or edited), the suite text the manifest embeds.

    Returns:
        The suite (None if it is gone or changed; a note goes to stderr) and the
        output's missing-data policy.
    """
    manifest = read_manifest(out)
    info = manifest.get("suite")
    options = manifest.get("options")
    info = info if isinstance(info, dict) else {}
    options = options if isinstance(options, dict) else {}
    missing = cast("MissingPolicy", str(options.get("missing", "exclude")))
    source = str(info.get("source", ""))
    environment = manifest.get("environment")
    cwd = environment.get("cwd") if isinstance(environment, dict) else None
    suite = _recorded_suite(info, source, cwd if isinstance(cwd, str) else None)
    if suite is None:
        if str(out) not in _NOTED:  # once per output, however often it is read
            _NOTED.add(str(out))
            print(
                f"lbnorm: note: {out}: its suite {source!r} is gone or changed; no "
                "rank intervals or stderr-aware floors for this output.",
                file=sys.stderr,
            )
        return None, missing
    return suite, missing


def _recorded_suite(
    info: dict[str, object], source: str, cwd: str | None
) -> Suite | None:
    """The suite a manifest records, from the first place holding its hash (None: none)."""
    if not source:
        return None
    if source.startswith("builtin:"):
        candidates: list[str] = [source.removeprefix("builtin:")]
    else:
        places = [source, info.get("resolved"), cwd and str(Path(cwd) / source)]
        candidates = [place for place in places if isinstance(place, str) and place]
    for candidate in dict.fromkeys(candidates):
        try:
            suite = load_suite(candidate)
        except LbnormError:
            continue
        if suite.sha256 == info.get("sha256"):
            return suite
    text = info.get("text")
    if isinstance(text, str):  # the file moved or changed: the text it had
        try:
            suite = parse_suite(text.encode("utf-8"), source=source)
        except LbnormError:
            return None
        if suite.sha256 == info.get("sha256"):
            return suite
    return None


def read_wide_table(path: str | Path) -> pd.DataFrame | None:
    """Read a published-style leaderboard (``X`` and ``X Raw`` columns), else None.

    Args:
        path: A ``.csv`` or ``.parquet`` file.

    Returns:
        The table, or None if the file is not such a table (e.g. long-format scores).
    """
    path = Path(path)
    kind = file_format(path)
    if not path.is_file() or kind not in {"csv", "parquet"}:
        return None
    if kind == "csv":
        names = list(pd.read_csv(path, nrows=0).columns)
    else:
        names = list(pq.read_schema(path).names)
    if not any(f"{name} Raw" in names for name in names):
        return None
    return pd.read_csv(path) if kind == "csv" else pd.read_parquet(path)
