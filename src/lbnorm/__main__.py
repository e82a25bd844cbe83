"""``python -m lbnorm``: the command line."""

from __future__ import annotations

import sys

try:
    from lbnorm.cli import main
except KeyboardInterrupt:  # Ctrl-C before main could take over: nothing was done
    sys.stderr.write("lbnorm: interrupted; the previous output is unchanged.\n")
    sys.exit(130)

if __name__ == "__main__":
    sys.exit(main())
