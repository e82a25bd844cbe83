"""The ``lbnorm`` command: ``python -m lbnorm`` and the console script (:func:`main`).

Its first step takes Ctrl-C and SIGTERM with the ``signal`` module alone, before
anything of lbnorm loads; the next takes them for the command
(:func:`lbnorm._runtime.take_signals`), before the command line and its
libraries load. A signal from the first step on ends the command with one line
and exit 130 or 143 (before it, the interpreter itself is still starting).
"""

from __future__ import annotations

import os
import signal
import sys
from types import FrameType


def _stop(number: int, _frame: FrameType | None) -> None:
    """A signal before the command took the signals: nothing was done, so end at once.

    It ends the process here rather than raising: an exception raised while the
    interpreter compiles a module can be lost, and the command would run on.
    """
    is_terminated = number == signal.SIGTERM
    word = "terminated" if is_terminated else "interrupted"
    sys.stderr.write(f"lbnorm: {word}; the previous output is unchanged.\n")
    sys.stderr.flush()
    os._exit(143 if is_terminated else 130)


for _number in (signal.SIGINT, signal.SIGTERM):
    if signal.getsignal(_number) is not signal.SIG_IGN:  # an ignored one stays so
        signal.signal(_number, _stop)

try:
    from lbnorm import _runtime

    _runtime.take_signals(exit_at_once=True)  # (for the process's life)
    from lbnorm.cli import console_main
except KeyboardInterrupt:  # (Python's own handler, should one be back in place)
    sys.stderr.write("lbnorm: interrupted; the previous output is unchanged.\n")
    sys.exit(130)


def main() -> int:
    """The console script's entry (``[project.scripts]``): :func:`lbnorm.cli.console_main`."""
    return console_main()


if __name__ == "__main__":
    sys.exit(main())
