"""The ``lbnorm`` command: ``python -m lbnorm`` and the console script (:func:`main`).

Its first step takes Ctrl-C and SIGTERM (:func:`lbnorm._runtime.take_signals`),
before the command line and its libraries load, so that a signal from then on
ends the command with one line and exit 130 or 143; a Ctrl-C in the moment
before (Python's own handler) is caught here and said the same way.
"""

from __future__ import annotations

import sys

try:
    from lbnorm import _runtime

    _runtime.take_signals(exit_at_once=True)  # (for the process's life)
    from lbnorm.cli import console_main
except KeyboardInterrupt:  # Ctrl-C before the command could take it: nothing was done
    sys.stderr.write("lbnorm: interrupted; the previous output is unchanged.\n")
    sys.exit(130)


def main() -> int:
    """The console script's entry (``[project.scripts]``): :func:`lbnorm.cli.console_main`."""
    return console_main()


if __name__ == "__main__":
    sys.exit(main())
