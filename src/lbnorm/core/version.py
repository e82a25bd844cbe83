"""The installed lbnorm version, read cheaply (outputs and caches record it)."""

from __future__ import annotations

import contextlib
import functools
import sys
from pathlib import Path

__all__ = ["lbnorm_version"]


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
