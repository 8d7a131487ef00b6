"""``python -m mcpcall``: the command line (see :mod:`mcpcall.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
