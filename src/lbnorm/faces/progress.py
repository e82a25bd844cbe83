"""A tiny progress bar for long runs: drawn on a terminal, silent anywhere else.

Stages report ``(stage, done, total)`` through a plain callback (the readers take
one as ``progress=``), so nothing below the command line knows about screens.
:class:`ProgressBar` is such a callback: it draws one line per stage on a
terminal, throttled, and only once a stage has run for ``delay`` seconds, so
quick runs print nothing. :func:`progress_bar` returns ``None`` (no callback at
all) when the stream is not a TTY or the user asked for ``--quiet``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TextIO

__all__ = ["ProgressBar", "progress_bar"]


@dataclass(slots=True, kw_only=True)
class ProgressBar:
    r"""Draw ``stage [#####.....] done/total pct elapsed`` on one terminal line.

    Args:
        stream: Where to draw (a terminal); defaults to ``sys.stderr``.
        delay: Seconds a stage must run before its bar appears.
        interval: Minimum seconds between redraws.
        width: Characters in the bar itself.
        clock: Monotonic clock in seconds (injectable for tests).

    Examples:
        >>> import io
        >>> ticks = iter([0.0, 1.0, 2.0])
        >>> stream = io.StringIO()
        >>> with ProgressBar(stream=stream, width=4, clock=lambda: next(ticks)) as bar:
        ...     bar("parsing", 1, 4)  # at 0.0 s: too early to draw
        ...     bar("parsing", 2, 4)
        ...     bar("parsing", 4, 4)
        >>> stream.getvalue().split("\r")[1:]
        ['parsing [##..] 2/4  50% 1.0s\x1b[K', 'parsing [####] 4/4 100% 2.0s\x1b[K\n']
    """

    stream: TextIO = field(default_factory=lambda: sys.stderr)
    delay: float = 0.5
    interval: float = 0.1
    width: int = 30
    clock: Callable[[], float] = time.monotonic
    _stage: str = field(default="", init=False)
    _started: float = field(default=0.0, init=False)
    _drawn_at: float | None = field(default=None, init=False)  # None: nothing drawn

    def __call__(self, stage: str, done: int, total: int) -> None:
        """Record progress; redraw if due."""
        now = self.clock()
        if stage != self._stage:
            self._end_line()
            self._stage, self._started = stage, now
        is_last = done >= total
        if now - self._started < self.delay and not (
            is_last and self._drawn_at is not None
        ):
            return
        if (
            not is_last
            and self._drawn_at is not None
            and now - self._drawn_at < self.interval
        ):
            return
        fraction = min(done / total, 1.0) if total > 0 else 1.0
        filled = round(fraction * self.width)
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(
            f"\r{stage} [{bar}] {done:,}/{total:,} {fraction:4.0%} "
            f"{now - self._started:.1f}s\x1b[K"
        )
        self._drawn_at = now
        if is_last:
            self._end_line()
        self.stream.flush()

    def close(self) -> None:
        """End the current line, if one is drawn."""
        self._end_line()
        self.stream.flush()

    def __enter__(self) -> ProgressBar:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _end_line(self) -> None:
        if self._drawn_at is not None:
            self.stream.write("\n")
        self._drawn_at = None


def progress_bar(
    stream: TextIO | None = None, *, quiet: bool = False
) -> ProgressBar | None:
    """Return a progress bar on `stream` if it is a terminal, else None.

    Args:
        stream: The stream to draw on; defaults to ``sys.stderr``.
        quiet: The user asked for no output (``--quiet``).

    Returns:
        A :class:`ProgressBar`, or None when there is nothing to draw on.

    Examples:
        >>> import io
        >>> progress_bar(io.StringIO()) is None  # not a terminal
        True
    """
    stream = stream if stream is not None else sys.stderr
    is_terminal = hasattr(stream, "isatty") and stream.isatty()
    if quiet or not is_terminal:
        return None
    return ProgressBar(stream=stream)
