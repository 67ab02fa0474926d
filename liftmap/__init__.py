"""The ``mapper`` console script's entry point, kept apart from the library: it imports
nothing heavy itself, so a Ctrl-C while the library loads (numpy, the IR, the solvers:
about half a second) ends quietly like one during a command: ``interrupted``, status 130."""

from __future__ import annotations

import sys


def main() -> int:
    """Loads the command line (``mapper.cli``) and runs it; a Ctrl-C at any point before
    the command handles it itself prints one line and gives 130."""
    try:
        from mapper.cli import main as run

        return run()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
