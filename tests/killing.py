"""Killing a command mid-run, as a user's SIGKILL or a lost machine would."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


def kill_when(cmd: Sequence[str], ready: Callable[[], bool], *, cwd: Path | str,
              deadline_s: float = 120.0) -> subprocess.Popen:
    """Runs ``cmd`` in a session of its own until ``ready()`` holds (or ``deadline_s``
    passes, or it exits), then SIGKILLs it and every process of its session (its
    workers). Returns the finished process; its stderr is a pipe left to read."""
    p = subprocess.Popen(list(cmd), cwd=cwd, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.time() + deadline_s
        while not ready() and time.time() < deadline and p.poll() is None:
            time.sleep(0.05)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(30)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the session we started: its workers
        except ProcessLookupError:
            pass  # the session ended with the command: nothing left to kill
    return p


def store_rows(path: str, columns: str = "key, status") -> list[tuple]:
    """``columns`` of every result a (possibly still written) store at ``path`` holds; []
    while it cannot be read."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute(f"SELECT {columns} FROM results").fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return []
