"""``python -m lbnorm``: the command line."""

from __future__ import annotations

import sys

from lbnorm.cli import main

if __name__ == "__main__":
    sys.exit(main())
