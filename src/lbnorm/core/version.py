"""The installed lbnorm version, read cheaply (outputs and caches record it)."""

from __future__ import annotations

import contextlib
import functools
import sys
from pathlib import Path

__all__ = ["lbnorm_commit", "lbnorm_version", "version_line"]


@functools.cache
def lbnorm_version() -> str:
    """Return the installed lbnorm version."""
    # The first lbnorm dist-info on sys.path, as importlib.metadata finds it, read
    # directly: importing importlib.metadata (email parsing) costs ~15 ms a run.
    for entry in sys.path:
        for info in sorted(Path(entry or ".").glob("lbnorm-*.dist-info")):
            with contextlib.suppress(OSError):
                for line in (info / "METADATA").read_text("utf-8").splitlines():
                    if line.startswith("Version:"):
                        return line.removeprefix("Version:").strip()
                    if not line:  # the end of the headers
                        break
    from importlib import metadata  # egg-info and other layouts

    try:
        return metadata.version("lbnorm")
    except metadata.PackageNotFoundError:  # running from a source tree
        return "0.0.0+source"


@functools.cache
def lbnorm_commit() -> str | None:
    """Return the git commit lbnorm's source is checked out at, or None.

    Known when lbnorm runs from a git checkout (an editable install or
    ``PYTHONPATH=src``), read from ``.git`` without running git: ``HEAD``, the
    branch it names (loose or packed), a worktree's ``.git`` file and its common
    folder all followed. An installed copy (``pip install .``) has no checkout
    beside it: None.
    """
    root = Path(__file__).resolve().parents[3]  # src/lbnorm/core/version.py
    with contextlib.suppress(OSError, ValueError, IndexError):
        return _head_commit(root / ".git")
    return None


def _head_commit(dot_git: Path) -> str | None:
    """The commit ``HEAD`` names in the repository whose ``.git`` is `dot_git`."""
    if dot_git.is_file():  # a worktree: "gitdir: PATH"
        gitdir = Path(dot_git.read_text("utf-8").split(":", 1)[1].strip())
        gitdir = gitdir if gitdir.is_absolute() else dot_git.parent / gitdir
    elif dot_git.is_dir():
        gitdir = dot_git
    else:
        return None
    common = gitdir
    if (gitdir / "commondir").is_file():
        named = Path((gitdir / "commondir").read_text("utf-8").strip())
        common = named if named.is_absolute() else gitdir / named
    head = (gitdir / "HEAD").read_text("utf-8").strip()
    if not head.startswith("ref:"):
        return _commit_or_none(head)  # a detached HEAD
    ref = head.removeprefix("ref:").strip()
    for folder in (gitdir, common):
        if (folder / ref).is_file():
            return _commit_or_none((folder / ref).read_text("utf-8").strip())
    packed = common / "packed-refs"
    if packed.is_file():
        for line in packed.read_text("utf-8").splitlines():
            commit, _, name = line.partition(" ")
            if name == ref:
                return _commit_or_none(commit)
    return None


def _commit_or_none(text: str) -> str | None:
    is_commit = len(text) == 40 and all(c in "0123456789abcdef" for c in text)
    return text if is_commit else None


def version_line() -> str:
    """What ``lbnorm --version`` prints: the version, and the commit when known.

    Examples:
        >>> version_line().startswith("lbnorm ")
        True
    """
    commit = lbnorm_commit()
    suffix = f" (git {commit[:12]})" if commit else ""
    return f"lbnorm {lbnorm_version()}{suffix}"
