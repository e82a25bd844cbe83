"""The format of an output folder's ``manifest.json``: what makes a folder lbnorm's.

The writer stamps it, :mod:`lbnorm.outdir` reads it, and both check it here:
``"tool": "lbnorm"``, a ``format`` this version knows, the files under
``outputs``, and what the folder holds (``kind``: a leaderboard from ``lbnorm
run``, ratings from ``lbnorm arena``).
"""

from __future__ import annotations

from typing import Literal, cast, get_args

__all__ = [
    "MANIFEST",
    "OUTPUT_FORMAT",
    "OutputKind",
    "manifest_kind",
    "manifest_problem",
]

#: The manifest's file name in an output folder.
MANIFEST = "manifest.json"
#: The layout version in ``manifest.json`` (``"format"``); a reader or a later run
#: refuses a folder written in a format it does not know.
OUTPUT_FORMAT = 1

#: What an output directory holds: a normalized leaderboard (``lbnorm run``) or
#: pairwise ratings (``lbnorm arena``); its manifest's ``kind``.
OutputKind = Literal["leaderboard", "ratings"]


def manifest_problem(manifest: object) -> str | None:
    """Why a parsed ``manifest.json`` is not one lbnorm wrote (None: it is lbnorm's).

    lbnorm's manifests say ``"tool": "lbnorm"``, a ``format`` it knows (those
    written before format versions have none) and list their files under
    ``outputs``.

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
    if not isinstance(manifest.get("outputs"), dict):
        return 'has no "outputs" listing the files'
    if manifest.get("kind", "leaderboard") not in get_args(OutputKind):
        return (
            f'has an unknown "kind" ({manifest.get("kind")!r}; this lbnorm reads '
            f"{', '.join(get_args(OutputKind))})"
        )
    return None


def manifest_kind(manifest: dict[str, object]) -> OutputKind:
    """What a checked manifest's folder holds; ``leaderboard`` when it does not say.

    Examples:
        >>> manifest_kind({"tool": "lbnorm", "outputs": {}})
        'leaderboard'
        >>> manifest_kind({"tool": "lbnorm", "outputs": {}, "kind": "ratings"})
        'ratings'
    """
    return cast("OutputKind", manifest.get("kind", "leaderboard"))
