"""The format of an output folder's ``manifest.json``: what makes a folder lbnorm's.

The writer stamps it, :mod:`lbnorm.output.reader` reads it, and both check it here:
``"tool": "lbnorm"``, a ``format`` this version knows, the files under
``outputs``, and what the folder holds (``kind``: a leaderboard from ``lbnorm
run``, ratings from ``lbnorm arena``, analysis tables from ``lbnorm diff``,
``impact`` or ``health``).

Every manifest also records where and with what it was written
(:func:`environment`: the working directory, lbnorm's version and commit, the
versions of Python, numpy and pyarrow), so that an output can be read back, and
trusted, from anywhere. A run over many input files lists them in
``inputs.parquet`` beside the manifest (:data:`INPUTS_TABLE`), not in it.
"""

from __future__ import annotations

import functools
import json
import platform
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast, get_args

__all__ = [
    "INLINE_INPUTS",
    "INPUTS_TABLE",
    "MANIFEST",
    "OUTPUT_FORMAT",
    "Listing",
    "OutputKind",
    "environment",
    "is_plain_name",
    "iso_time",
    "manifest_bytes",
    "manifest_head",
    "manifest_kind",
    "manifest_problem",
]

#: The manifest's file name in an output folder.
MANIFEST = "manifest.json"
#: The layout version in ``manifest.json`` (``"format"``); a reader or a later run
#: refuses a folder written in a format it does not know.
OUTPUT_FORMAT = 1

#: What an output directory holds: a normalized leaderboard (``lbnorm run``),
#: pairwise ratings (``lbnorm arena``) or the tables of ``lbnorm diff``,
#: ``impact`` and ``health`` written to a folder of their own; its manifest's ``kind``.
OutputKind = Literal["leaderboard", "ratings", "analysis"]
#: The table beside the manifest that lists a run's inputs when they are many.
INPUTS_TABLE = "inputs.parquet"
#: Up to this many inputs are listed in ``manifest.json`` itself; more go to
#: :data:`INPUTS_TABLE`, so that the manifest stays small for any tree (a listed
#: input takes about 2 KB).
INLINE_INPUTS = 1_000
#: The keys :func:`manifest_problem` and :func:`manifest_kind` read.
_HEAD_KEYS = ("tool", "format", "outputs", "kind")
#: A :class:`Listing` this long is written by msgspec (shorter ones by json: a
#: Parquet run lists a file or two, and imports nothing for it).
_LONG_LISTING = 256
#: A manifest this large (a results tree's lists thousands of inputs) has its
#: checked keys read by msgspec, skipping the rest, when it is installed.
_LARGE_MANIFEST = 2**20


def manifest_problem(manifest: object) -> str | None:
    """Why a parsed ``manifest.json`` is not one lbnorm wrote (None: it is lbnorm's).

    lbnorm's manifests say ``"tool": "lbnorm"``, a ``format`` it knows (those
    written before format versions have none) and list their files under
    ``outputs``, each by a plain file name of the folder: a manifest naming a
    path (``../x``, ``/etc/y``) or an inputs table other than
    :data:`INPUTS_TABLE` is damaged, and nothing it names is opened.

    Args:
        manifest: The parsed JSON.

    Returns:
        None, or the problem as a phrase that follows "its manifest.json".

    Examples:
        >>> manifest_problem({"tool": "lbnorm", "format": 1, "outputs": {}}) is None
        True
        >>> manifest_problem({"name": "app"})
        'has no "tool": "lbnorm"'
    """
    if not isinstance(manifest, dict) or manifest.get("tool") != "lbnorm":
        return 'has no "tool": "lbnorm"'
    version = manifest.get("format", 0)  # written before format versions: 0
    if type(version) is not int or version < 0:
        return f'has an unknown "format" ({version!r})'
    if version > OUTPUT_FORMAT:
        return (
            f"was written by a newer lbnorm (output format {version}; this one "
            f"knows up to {OUTPUT_FORMAT})"
        )
    outputs = manifest.get("outputs")
    if not isinstance(outputs, dict):
        return 'has no "outputs" listing the files'
    if stray := [name for name in outputs if not is_plain_name(name)][:1]:
        return f"is damaged: it lists {stray[0][:80]!r}, not a file name of its folder"
    inputs = manifest.get("inputs")
    if isinstance(inputs, dict) and inputs.get("table") != INPUTS_TABLE:
        return f"is damaged: its inputs table is {str(inputs.get('table'))[:80]!r}, not {INPUTS_TABLE!r}"
    if manifest.get("kind", "leaderboard") not in get_args(OutputKind):
        return (
            f'has an unknown "kind" ({manifest.get("kind")!r}; this lbnorm reads '
            f"{', '.join(get_args(OutputKind))})"
        )
    return None


def is_plain_name(name: object) -> bool:
    """Whether `name` names a file of a folder itself: no path, no ``.`` or ``..``.

    Examples:
        >>> [is_plain_name(n) for n in ("health.parquet", "../x", "/etc/y", "..")]
        [True, False, False, False]
    """
    return (
        isinstance(name, str)
        and name not in {"", ".", ".."}
        and "/" not in name
        and "\0" not in name
    )


def manifest_kind(manifest: dict[str, object]) -> OutputKind:
    """What a checked manifest's folder holds; ``leaderboard`` when it does not say.

    Examples:
        >>> manifest_kind({"tool": "lbnorm", "outputs": {}})
        'leaderboard'
        >>> manifest_kind({"tool": "lbnorm", "outputs": {}, "kind": "ratings"})
        'ratings'
    """
    return cast("OutputKind", manifest.get("kind", "leaderboard"))


@dataclass(frozen=True, slots=True)
class Listing:
    """A manifest's long list of flat records, such as a results tree's inputs.

    Each record is a dict whose values are text, integers, booleans, None or
    lists of text: no floats (whose text json and msgspec write differently).
    :func:`manifest_bytes` writes it with msgspec when installed (a
    dependency), to the bytes json writes, faster than json for long lists.
    """

    rows: list[dict[str, Any]]


def manifest_bytes(manifest: Mapping[str, Any]) -> bytes:
    r"""``manifest.json``'s bytes: sorted keys, two-space indents, ASCII, a final newline.

    A :class:`Listing` value is written as its list, by msgspec where it can
    when long (the same bytes; json otherwise: msgspec missing, or text that is
    not ASCII, which json escapes).

    Examples:
        >>> rows = [{"path": f"r{at}.json", "rows": at, "tasks": ["a", "b"]} for at in range(3)]
        >>> manifest_bytes({"tool": "lbnorm", "inputs": Listing(rows)}) == (
        ...     json.dumps({"tool": "lbnorm", "inputs": rows}, indent=2, sort_keys=True) + "\n"
        ... ).encode()
        True
    """
    plain: dict[str, Any] = {}
    fast: dict[str, bytes] = {}
    for key, value in manifest.items():
        is_listing = isinstance(value, Listing)
        encoded = _listing_bytes(value.rows) if is_listing else None
        if encoded is not None:
            fast[key] = encoded
        else:
            plain[key] = value.rows if is_listing else value
    if not fast:
        return (json.dumps(plain, indent=2, sort_keys=True) + "\n").encode()
    marks = {key: f"lbnorm-listing-{uuid.uuid4().hex}" for key in fast}
    data = (json.dumps({**plain, **marks}, indent=2, sort_keys=True) + "\n").encode()
    for key, mark in marks.items():  # each mark is one value, written once
        data = data.replace(json.dumps(mark).encode(), fast[key], 1)
    return data


def _listing_bytes(rows: list[dict[str, Any]]) -> bytes | None:
    """`rows` as json.dumps writes them one level down, by msgspec; None if it cannot.

    None too for a short listing (json writes it, importing nothing).
    """
    if len(rows) < _LONG_LISTING:
        return None
    try:
        import msgspec  # loaded for long listings only
    except ImportError:  # pragma: no cover - msgspec is an optional extra
        return None
    try:
        encoded = msgspec.json.format(
            msgspec.json.encode(rows, order="sorted"), indent=2
        )
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError):
        return None
    if not encoded.isascii():  # json escapes it: write it as json does
        return None
    return encoded.replace(b"\n", b"\n  ")  # the listing sits one level down


def manifest_head(data: bytes) -> object:
    """The keys a check reads from a ``manifest.json``'s bytes (the whole JSON if small).

    A large manifest (a results tree's lists every input file) is decoded by
    msgspec when installed, skipping all but :data:`_HEAD_KEYS` instead of
    decoding everything; anything it refuses goes to json, which decides and
    raises as it would.

    Raises:
        ValueError: Not JSON (json's error).
        RecursionError: Nested too deeply.

    Examples:
        >>> manifest_head(b'{"tool": "lbnorm", "outputs": {}}')
        {'tool': 'lbnorm', 'outputs': {}}
    """
    decode = _head_decoder() if len(data) >= _LARGE_MANIFEST else None
    head = None if decode is None else decode(data)
    return json.loads(data) if head is None else head


@functools.cache
def _head_decoder() -> Callable[[bytes], dict[str, Any] | None] | None:
    """Decodes :data:`_HEAD_KEYS` alone, None if msgspec refuses (None: no msgspec)."""
    try:
        import msgspec  # loaded for large manifests only
    except ImportError:  # pragma: no cover - msgspec is an optional extra
        return None

    class Head(msgspec.Struct):
        tool: Any = msgspec.UNSET
        format: Any = msgspec.UNSET
        outputs: Any = msgspec.UNSET
        kind: Any = msgspec.UNSET

    decoder = msgspec.json.Decoder(Head)

    def decode(data: bytes) -> dict[str, Any] | None:
        try:
            head = decoder.decode(data)
        except (msgspec.DecodeError, RecursionError):
            return None  # not an object, NaN, ...: json decides
        return {
            key: value
            for key in _HEAD_KEYS
            if (value := getattr(head, key)) is not msgspec.UNSET
        }

    return decode


def environment() -> dict[str, str | None]:
    """Where and with what an output was written, for its manifest.

    The working directory (input paths recorded as given are relative to it),
    lbnorm's version and, when it runs from a git checkout, its commit, and the
    versions of Python, numpy and pyarrow.
    """
    import numpy
    import pyarrow

    from lbnorm.core.version import lbnorm_commit, lbnorm_version

    return {
        "cwd": str(Path.cwd()),
        "lbnorm": lbnorm_version(),
        "lbnorm_commit": lbnorm_commit(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "pyarrow": pyarrow.__version__,
    }


def iso_time(moment: float | None = None) -> str:
    """`moment` (seconds since the epoch; None: now) as an ISO 8601 time in UTC.

    The form of a manifest's ``created_at``. The composition layer turns
    ``SOURCE_DATE_EPOCH`` into one (:func:`lbnorm.pipeline.created_at_from_environment`):
    the transaction reads no environment.
    """
    moment = time.time() if moment is None else moment
    return datetime.fromtimestamp(moment, tz=UTC).isoformat(timespec="seconds")
