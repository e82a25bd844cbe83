"""``python -m lbnorm``: the command line (:func:`lbnorm.cli.console_main`)."""

from __future__ import annotations

import sys

try:
    from lbnorm.cli import console_main
except KeyboardInterrupt:  # Ctrl-C before the command could take it: nothing was done
    sys.stderr.write("lbnorm: interrupted; the previous output is unchanged.\n")
    sys.exit(130)

if __name__ == "__main__":
    sys.exit(console_main())
