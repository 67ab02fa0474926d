"""``python -m mapper.cli``: the ``mapper`` command."""

import sys

from mapper.cli import main

if __name__ == "__main__":
    sys.exit(main())
