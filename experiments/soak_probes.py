"""What ``experiments/soak.py`` measures and injects: probes of ``/proc`` (RSS, open
descriptors, descendant processes), folder sizes, a store's rows and integrity check, the
least-squares slope of a series, the records the driver saw and a store's replay against
them, and the fault a candidate runs in a worker process (this module is imported there by
name)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from mapper.explore.record import Record
from mapper.explore.strategies import Candidate, Strategy, register

MB = 1024.0 * 1024.0


def faulty_lower(fault: str, lower: Callable[[], Any]) -> Any:
    """Runs in a worker: crashes it (``segv``: reads address 0; ``abort``), hangs, or
    lowers ``lower()``. (A SIGSEGV sent with ``kill`` would not do: the OpenCL runtime's
    handler returns from it.)"""
    import ctypes
    import resource

    if fault in ("segv", "abort"):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file
        if fault == "abort":
            os.abort()
        ctypes.string_at(0)
    if fault == "hang":
        time.sleep(3600)
    return lower()


def _read(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def rss_mb(pid: int) -> float | None:
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return None


def fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def descendants(root: int) -> dict[int, str]:
    """Every live descendant of process ``root`` (by /proc's parent links): its command."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        stat = _read(f"/proc/{d}/stat") if d.isdigit() else ""
        if ")" in stat:
            kids.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(d))
    out, todo = {}, [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            out[k] = _read(f"/proc/{k}/cmdline").replace("\0", " ")
            todo.append(k)
    return out


def workers_and_others(root: int) -> tuple[list[int], list[int]]:
    """The pool workers (spawned by multiprocessing) under ``root``, and its other
    descendants except multiprocessing's resource tracker (it lives as long as the driver)."""
    procs = descendants(root)
    workers = [p for p, c in procs.items() if "spawn_main" in c]
    return workers, [p for p, c in procs.items()
                     if p not in workers and "resource_tracker" not in c]


def dir_mb(path: str) -> float:
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total / MB


def store_probe(path: str) -> tuple[int, str]:
    """A store's row count and ``PRAGMA integrity_check`` (a read-only connection each).
    A store whose tables are not committed yet (its file exists from the moment its
    creator connects) has no rows; the final row count judges a table that went missing."""
    if not os.path.exists(path):
        return 0, "ok"
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        try:
            made = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                              "name = 'results'").fetchone()
            rows = int(db.execute("SELECT COUNT(*) FROM results").fetchone()[0]) if made else 0
            return rows, "; ".join(r[0] for r in db.execute("PRAGMA integrity_check"))
        finally:
            db.close()
    except sqlite3.Error as e:
        return 0, f"error: {e}"


def slope_mb_h(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, MB) points, in MB per hour."""
    n = len(points)
    mx, my = sum(t for t, _ in points) / max(n, 1), sum(y for _, y in points) / max(n, 1)
    sxx = sum((t - mx) ** 2 for t, _ in points)
    if n < 2 or sxx <= 0:
        return None
    return sum((t - mx) * (y - my) for t, y in points) / sxx * 3600.0


# ------------------------------------------------------------------ records and replay


def killed_note(status: str, reason: str | None) -> str:
    """What a record says of a worker killed under it: ``retried`` (the pool evaluated it
    again), ``SIGKILL`` (a crash verdict: the kill cost the candidate), or ``""``."""
    if "killed from outside" in (reason or ""):
        return "retried"
    return "SIGKILL" if status == "crash" and "signal SIGKILL" in (reason or "") else ""


def seen_row(rec: Record) -> tuple:
    """The parts of a record the replay must give back: ids, status, times, kill note."""
    return (rec.run_id, rec.idx, rec.status, rec.check, rec.time_s, rec.gflops, rec.wall_s,
            rec.created, killed_note(rec.status, rec.reason))


def load_observed(path: Path) -> tuple[dict[str, dict[str, tuple]], list[str]]:
    """The records the driver was handed, by store and key (evaluated ones), and those it
    was handed from a store that differ from what it saw evaluated."""
    seen: dict[str, dict[str, tuple]] = {}
    bad: list[str] = []
    for line in path.read_text().splitlines():
        store, key, cached, row = json.loads(line)
        mine = seen.setdefault(store, {})
        if not cached:
            mine[key] = tuple(row)
        elif mine.get(key) != tuple(row):
            bad.append(f"{key} found stored as {row}, seen {mine.get(key)}")
    return seen, bad


@register
class Sweep(Strategy):
    """Every candidate of the space once, in order: a replay that visits a whole store."""

    name = "soak-sweep"
    summary = "every candidate once, in order (experiments/soak.py's replay)"

    def candidates(self) -> Iterator[Candidate]:
        for m in self.joint.mappings:
            for cfg in self.joint.tuning(m).configs:
                yield Candidate(m, dict(cfg))


def replay_check(path: str, seen: Mapping[str, tuple]) -> list[str]:
    """How a store's replay differs from the records the driver saw (empty: it does not)."""
    from mapper.explore.replay import compare, load_space, replay

    space, st = load_space(path)
    try:
        res = replay(space, "soak-sweep")
        got = {r.key: seen_row(r) for r in res.records}
        bad = [f"{len(got)} replayed, {space.count()} in the replay space, {len(seen)} seen"]
        if len(got) == space.count() == len(seen) == len(res.records):
            bad = []
        bad += [f"{k}: replayed {got.get(k)}, seen {seen.get(k)}"
                for k in sorted(set(got) | set(seen)) if got.get(k) != seen.get(k)]
        perf = [r[5] or 1 / r[4] for r in seen.values() if r[2] == "ok" and (r[4] or r[5])]
        if perf:  # as `mapper results --compare`
            c = compare(st, ["solver", "model"], seeds=2)
            if c.candidates != len(seen) or abs(c.best - max(perf)) > 1e-9 * max(perf):
                bad.append(f"compare: {c.candidates} candidates, best {c.best:.6g}; seen "
                           f"{len(seen)}, best {max(perf):.6g}")
        return bad
    finally:
        st.close()
