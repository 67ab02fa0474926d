"""The results store: one SQLite file (standard library), one row per evaluated candidate.

A row is keyed by a content hash of (program text, fixed sizes, mapping, tuning values,
device description, library version), so the same candidate on the same program, sizes and
device is never evaluated twice, and candidates of another program or device never share a
key. The file is opened in WAL mode with a busy timeout; every result is committed on its
own (a SIGKILL loses only the candidates in flight) and rows are inserted with
``INSERT OR IGNORE``, so two writers at once cannot corrupt the file or duplicate a row.

One store holds one *context*: the program, its fixed sizes and the device, written to the
``meta`` table by the first run. Opening it for another context raises
``StoreMismatchError`` (one line naming what the store holds); use another file.

Rows are read as ``mapper.explore.record.Record`` values (``records``, ``best_records``,
``record``); the file keeps the form of ``COLUMNS`` (``Record.to_row``).

Stores written before a column existed still open: opened for writing, the missing
columns are added (``NULL`` in the old rows); read-only, they read as ``None``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ir.errors import LiftmapError
from mapper.explore.record import Record

SCHEMA_VERSION = 2  # 2: results.mapping_s, results.tuning_s, runs.mapping_s
CONTEXT_KEYS = ("program_hash", "sizes", "device")

COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "TEXT PRIMARY KEY"),
    ("run_id", "TEXT NOT NULL"),
    ("strategy", "TEXT NOT NULL"),
    ("seed", "INTEGER"),
    ("idx", "INTEGER"),  # position of the candidate in its run
    ("mapping", "TEXT NOT NULL"),  # "A=20 B=10 C=10 D=0"
    ("tuning", "TEXT NOT NULL"),  # JSON object, sorted keys
    ("status", "TEXT NOT NULL"),  # ok | rejected | compile-error | wrong-result | ...
    ("outcome_check", "TEXT"),  # the check of a rejection
    ("reason", "TEXT"),
    ("search_s", "REAL"),  # time the strategy took to propose the candidate, in all:
    ("mapping_s", "REAL"),  # finding its mapping
    ("tuning_s", "REAL"),  # choosing its tuning values (search_s - both: the model's work)
    ("lower_s", "REAL"),
    ("build_s", "REAL"),
    ("run_s", "REAL"),  # evaluation wall time minus lowering and build
    ("wall_s", "REAL"),  # whole evaluation, as seen by the driver
    ("gflops", "REAL"),
    ("time_s", "REAL"),  # median kernel time
    ("memory_bytes", "INTEGER"),  # global device memory of the program
    ("max_abs_error", "REAL"),
    ("source_hash", "TEXT"),
    ("draws", "INTEGER"),  # random strategy: code assignments drawn for this mapping
    ("created", "REAL"),  # unix time of the insert
)
COLUMN_NAMES = tuple(c for c, _ in COLUMNS)
RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "TEXT PRIMARY KEY"), ("strategy", "TEXT"), ("seed", "INTEGER"),
    ("budget", "TEXT"), ("options", "TEXT"), ("started", "REAL"), ("finished", "REAL"),
    ("stopped_by", "TEXT"), ("evaluated", "INTEGER"), ("cached", "INTEGER"),
    ("draws", "INTEGER"),
    # seconds of mapping search in no row: the valid mappings' enumeration before the first
    # candidate (strategies drawing from them) and a search the end of the run cut short
    ("mapping_s", "REAL"),
)


class StoreError(LiftmapError, ValueError):
    """The store cannot be opened or used (a user error: one clear line)."""


class StoreMismatchError(StoreError):
    """The store holds results of another program, sizes or device."""


def library_version() -> str:
    """The installed liftmap version (part of every key)."""
    try:
        from importlib.metadata import version

        return version("liftmap")
    except Exception:  # not installed: a source checkout
        return "0+unknown"


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def content_hash(text: str) -> str:
    """SHA-256 hex digest of ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()


def candidate_key(program_text: str, sizes: Mapping[str, int], mapping: Mapping[str, int],
                  tuning: Mapping[str, int], device: Mapping[str, Any],
                  version: str | None = None) -> str:
    """The content hash that identifies one candidate on one device."""
    return content_hash(_canon({
        "program": program_text, "sizes": dict(sizes), "mapping": dict(mapping),
        "tuning": {k: int(v) for k, v in tuning.items()}, "device": dict(device),
        "version": version or library_version()}))[:32]


@dataclass(frozen=True)
class Context:
    """What a store holds: program (name, text hash), fixed sizes, device description."""

    program: str
    program_hash: str
    sizes: dict[str, int]
    device: dict[str, Any]

    def describe(self) -> str:
        dev = self.device.get("name", "?")
        pv = self.device.get("platform_version", "")
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"program {self.program} (sha {self.program_hash[:12]}), sizes {sizes}, " \
               f"device {dev}{f' ({pv})' if pv else ''}"


class ResultStore:
    """A SQLite results store (see the module docstring). ``readonly`` never creates it."""

    def __init__(self, path: str | os.PathLike, *, readonly: bool = False,
                 timeout_s: float = 60.0):
        self.path = os.fspath(path)
        self.readonly = readonly
        if readonly:
            if not os.path.isfile(self.path):
                raise StoreError(f"no results store at {self.path}")
            uri = f"file:{os.path.abspath(self.path)}?mode=ro"
            try:
                self.db = sqlite3.connect(uri, uri=True, timeout=timeout_s)
                self.db.execute("SELECT 1 FROM sqlite_master").fetchall()
            except sqlite3.DatabaseError as e:
                raise StoreError(f"cannot read results store {self.path}: {e}") from None
            if not self._has_table("results"):
                raise StoreError(f"{self.path} is not a liftmap results store")
            self._columns = self._table_columns("results")
            return
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create the store's folder {parent}: "
                                 f"{e.strerror}") from None
        try:
            self.db = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
            self.db.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self._create()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"cannot open results store {self.path}: {e}") from None

    # ------------------------------------------------------------------ schema

    def _has_table(self, name: str) -> bool:
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                               (name,)).fetchone() is not None

    def _table_columns(self, table: str) -> set[str]:
        return {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}

    def _create(self) -> None:
        """Creates the tables, or adds the columns an older store lacks."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            for table, columns in (("results", COLUMNS), ("runs", RUN_COLUMNS)):
                cols = ", ".join(f"{c} {t}" for c, t in columns)
                self.db.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols})")
                have = self._table_columns(table)
                for c, t in columns:
                    if c not in have:
                        self.db.execute(f"ALTER TABLE {table} ADD COLUMN {c} {t}")
            self.db.execute("CREATE INDEX IF NOT EXISTS results_run ON results(run_id)")
            # the winners of a run re-timed at its end: every execution's time, per round
            self.db.execute("CREATE TABLE IF NOT EXISTS retimes (key TEXT, run_id TEXT, "
                            "round INTEGER, times TEXT, created REAL)")
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                            (str(SCHEMA_VERSION),))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self._columns = set(COLUMN_NAMES)

    def _select(self) -> str:
        """The columns of ``COLUMN_NAMES`` to select (``NULL`` for those an older store
        read-only lacks)."""
        return ", ".join(c if c in self._columns else f"NULL AS {c}" for c in COLUMN_NAMES)

    # ------------------------------------------------------------------ context

    def meta(self) -> dict[str, str]:
        """The ``meta`` table as a dict."""
        return dict(self.db.execute("SELECT name, value FROM meta").fetchall())

    def context(self) -> Context | None:
        """What the store holds, or ``None`` for a new store."""
        m = self.meta()
        if "program_hash" not in m:
            return None
        return Context(m.get("program", "?"), m["program_hash"], json.loads(m["sizes"]),
                       json.loads(m.get("device", "{}")))

    def bind(self, ctx: Context, extra: Mapping[str, str] | None = None) -> None:
        """Records ``ctx`` (and ``extra`` meta entries) in a new store, or checks that the
        store holds the same program, sizes and device; raises ``StoreMismatchError``
        otherwise."""
        have = self.context()
        if have is None:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                if self.context() is None:
                    for k, v in (("program", ctx.program), ("program_hash", ctx.program_hash),
                                 ("sizes", _canon(ctx.sizes)), ("device", _canon(ctx.device)),
                                 ("library_version", library_version()),
                                 ("created", str(time.time())), *(extra or {}).items()):
                        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (k, v))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            have = self.context()
        assert have is not None
        diff = [what for what, a, b in (
            ("program", have.program_hash, ctx.program_hash),
            ("sizes", _canon(have.sizes), _canon(ctx.sizes)),
            ("device", _canon(have.device), _canon(ctx.device))) if a != b]
        if diff:
            raise StoreMismatchError(
                f"store {self.path} holds {have.describe()}; this run has another "
                f"{' and '.join(diff)} ({ctx.describe()}): use another --store")

    # ------------------------------------------------------------------ rows

    def has(self, key: str) -> bool:
        return self.db.execute("SELECT 1 FROM results WHERE key=?", (key,)).fetchone() \
            is not None

    def record(self, key: str) -> Record | None:
        """The record of candidate ``key``, or ``None``."""
        cur = self.db.execute(f"SELECT {self._select()} FROM results WHERE key=?", (key,))
        r = cur.fetchone()
        return Record.from_row(dict(zip(COLUMN_NAMES, r))) if r else None

    def add(self, row: Record | Mapping[str, Any]) -> bool:
        """Inserts one record (or a row in the store's form, ``Record.to_row``) and commits
        it; ``False`` if its key was already there."""
        if isinstance(row, Record):
            row = row.to_row()
        values = {c: row.get(c) for c in COLUMN_NAMES}
        if values["created"] is None:
            values["created"] = time.time()
        cur = self.db.execute(
            f"INSERT OR IGNORE INTO results ({', '.join(COLUMN_NAMES)}) "
            f"VALUES ({', '.join('?' * len(COLUMN_NAMES))})", tuple(values.values()))
        return cur.rowcount == 1

    def records(self, *, run_id: str | None = None, order: str = "created") -> list[Record]:
        """Every record (of one run), oldest first (``order="gflops"``: fastest first)."""
        sql = f"SELECT {self._select()} FROM results"
        args: tuple = ()
        if run_id is not None:
            sql += " WHERE run_id=?"
            args = (run_id,)
        sql += (" ORDER BY gflops IS NULL, gflops DESC, created" if order == "gflops"
                else " ORDER BY created, idx")
        return [Record.from_row(dict(zip(COLUMN_NAMES, r)))
                for r in self.db.execute(sql, args).fetchall()]

    def best_records(self, n: int = 1) -> list[Record]:
        """The ``n`` ``ok`` records with the highest GFLOP/s (lowest time when no FLOP
        count)."""
        cur = self.db.execute(
            f"SELECT {self._select()} FROM results WHERE status='ok' "
            "ORDER BY gflops IS NULL, gflops DESC, time_s ASC LIMIT ?", (n,))
        return [Record.from_row(dict(zip(COLUMN_NAMES, r))) for r in cur.fetchall()]

    def counts(self) -> Counter:
        """Outcome labels (``ok``, ``rejected:<check>``, ...) and how many rows have each."""
        out: Counter = Counter()
        for status, check, n in self.db.execute(
                "SELECT status, outcome_check, COUNT(*) FROM results "
                "GROUP BY status, outcome_check"):
            out[f"rejected:{check}" if status == "rejected" and check else status] += n
        return out

    def __len__(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    # ------------------------------------------------------------------ runs

    def start_run(self, run_id: str, strategy: str, seed: int, budget: str,
                  options: Mapping[str, Any]) -> None:
        self.db.execute("INSERT INTO runs (run_id, strategy, seed, budget, options, started) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        (run_id, strategy, seed, budget, _canon(options), time.time()))

    def finish_run(self, run_id: str, stopped_by: str, evaluated: int, cached: int,
                   draws: int | None, mapping_s: float | None = None) -> None:
        """Records how a run ended; ``mapping_s``: its mapping search in no row."""
        self.db.execute("UPDATE runs SET finished=?, stopped_by=?, evaluated=?, cached=?, "
                        "draws=?, mapping_s=? WHERE run_id=?",
                        (time.time(), stopped_by, evaluated, cached, draws, mapping_s,
                         run_id))

    def runs(self) -> list[dict]:
        """Every run, oldest first, with every column of ``RUN_COLUMNS`` (``None`` where an
        older store lacks one)."""
        cur = self.db.execute("SELECT * FROM runs ORDER BY started")
        names = [d[0] for d in cur.description]
        blank = {c: None for c, _ in RUN_COLUMNS}
        return [{**blank, **dict(zip(names, r))} for r in cur.fetchall()]

    # ------------------------------------------------------------------ re-timing

    def add_retime(self, key: str, run_id: str, rnd: int, times: list[float]) -> None:
        """Records one re-timing round of candidate ``key`` (every execution's seconds)."""
        self.db.execute("INSERT INTO retimes VALUES (?, ?, ?, ?, ?)",
                        (key, run_id, rnd, json.dumps([float(t) for t in times]),
                         time.time()))

    def retimes(self, key: str) -> list[float]:
        """Every re-timed execution of candidate ``key`` (seconds; empty: never re-timed,
        or a store older than re-timing)."""
        if not self._has_table("retimes"):
            return []
        out: list[float] = []
        for (t,) in self.db.execute("SELECT times FROM retimes WHERE key=? ORDER BY created",
                                    (key,)):
            out += json.loads(t)
        return out

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
