"""The ``mapper`` console script's entry point, kept apart from the library: it imports
nothing heavy itself, so a Ctrl-C while the library loads (numpy, the IR, the solvers:
about half a second) ends quietly like one during a command: ``interrupted``, status 130."""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_while_loading(signum: int, frame: object) -> None:
    # no exception: one raised inside an import can surface as another (a RuntimeError
    # from a class's __set_name__) or be swallowed by a __del__; nothing is open yet
    sys.stderr.write("interrupted\n")
    sys.stderr.flush()
    os._exit(130)


def main() -> int:
    """Loads the command line (``mapper.cli``) and runs it; a Ctrl-C at any point before
    the command handles it itself prints one line and gives 130, and one after the
    command has finished ends the process as the signal does, without a word."""
    before = signal.getsignal(signal.SIGINT)
    ignored = before == signal.SIG_IGN  # started in the background: Ctrl-C is not ours
    if not ignored:
        signal.signal(signal.SIGINT, _interrupted_while_loading)
    try:
        try:
            from mapper.cli import main as run
        finally:
            if not ignored:  # Python's own handler: the command's KeyboardInterrupt
                signal.signal(signal.SIGINT, before or signal.default_int_handler)
        rc = run()
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    # the answer is out: a Ctrl-C in the interpreter's teardown (its atexit handlers,
    # objects collected) must not print "Exception ignored ..." under it
    if not ignored:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    return rc
