"""The results store: one SQLite file (standard library), one row per evaluated candidate.

A row is keyed by a content hash of (program text, fixed sizes, mapping, tuning values,
device description, library version and lowering fingerprint), so the same candidate on the
same program, sizes and device is never evaluated twice, candidates of another program or
device never share a key, and a change to the code that builds kernels
(``mapper.explore.fingerprint``) measures them again. The file is opened in WAL mode with a
busy timeout; every result is committed on its own (a SIGKILL loses only the candidates in
flight) and rows are inserted with ``INSERT OR IGNORE``, so two writers at once cannot
corrupt the file or duplicate a row.

One store holds one *context*: the program, its fixed sizes and the device, written to the
``meta`` table by the first run. Opening it for another context raises
``StoreMismatchError`` (one line naming what the store holds); use another file.

Rows are read as ``mapper.explore.record.Record`` values (``records``, ``best_records``,
``record``); the file keeps the form of ``COLUMNS`` (``Record.to_row``).

Stores written before a column existed still open: opened for writing, the missing
columns are added (``NULL`` in the old rows); read-only, they read as ``None``.

**Failures are one line.** No ``sqlite3`` error leaves this module: each becomes a
``StoreError`` naming the file and what to do. A file that is not a liftmap store (not
SQLite, or a SQLite database with other tables) is refused (``NotAStoreError``) and never
altered; a damaged one, found at opening or by any later read or write, is a
``StoreCorruptError``. A reader opens a store in a read-only folder, where WAL mode cannot
make its ``-shm`` file, as immutable, or, when a ``-wal`` file left by a killed writer
holds rows, through a private copy of both files (the last writer to close folds the
``-wal`` file into the store and removes it).

**Runs.** ``start_run`` records the process id and host of the run; ``runs`` gives each
run a ``state``: ``finished``, ``running``, or ``interrupted`` (no end recorded and its
process is gone, or, seen from another host, past its time budget or idle for
``STALE_RUN_S``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ir.errors import LiftmapError
from mapper.explore.fingerprint import lowering_fingerprint
from mapper.explore.record import Record, Retimed

# the parts of a device's limits that identify it (the store's device, the key's device)
DEVICE_KEYS = ("name", "platform", "platform_version", "version", "driver_version", "type",
               "max_compute_units")


def device_description(limits: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of ``codegen.device.device_limits`` that identify a device (keys, meta)."""
    return {k: limits[k] for k in DEVICE_KEYS if k in limits}

SCHEMA_VERSION = 3  # 2: results.mapping_s, results.tuning_s, runs.mapping_s; 3: retimes.phase
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
    ("pid", "INTEGER"), ("host", "TEXT"),  # the process running it (interrupted runs)
)
# the winners of a run re-timed at its end: every execution's time, per round; ``phase``
# "confirm" marks the rounds that timed the chosen winner again, alone, after the choice
# (its reported figure); NULL, the rounds that chose (stores before confirmations);
# "watch", the leaders' rounds while a run explored (``mapper.explore.watch``), which a
# winner's figure takes too; "incumbent"/"challenger", challenges during a run
RETIME_COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "TEXT"), ("run_id", "TEXT"), ("round", "INTEGER"), ("times", "TEXT"),
    ("created", "REAL"), ("phase", "TEXT"),
)
# the columns without which a table is not a liftmap store's (older stores have these)
CORE_COLUMNS = {"meta": {"name", "value"},
                "results": {"key", "run_id", "strategy", "mapping", "tuning", "status"},
                "runs": {"run_id"}, "retimes": {"key", "run_id", "times"}}
STALE_RUN_S = 24 * 3600.0  # a run seen from another host, idle this long, is interrupted
RUN_GRACE_S = 600.0  # a time budget's run may end this long after its budget (re-timing)


class StoreError(LiftmapError, ValueError):
    """The store cannot be opened or used (a user error: one clear line)."""


class StoreMismatchError(StoreError):
    """The store holds results of another program, sizes or device."""


class NotAStoreError(StoreError):
    """The file is not a liftmap results store (not SQLite, or another SQLite database);
    it is left as it is."""


class StoreCorruptError(StoreError):
    """The store's file is damaged (found when opening it or by a later read or write)."""


def library_version() -> str:
    """The installed liftmap version (part of every key)."""
    try:
        from importlib.metadata import version

        return version("liftmap")
    except Exception:  # not installed: a source checkout
        return "0+unknown"


def key_version() -> str:
    """The version part of every key: the library version and the lowering's fingerprint
    (``0.1.0+3f2a9c81d0e4``)."""
    return f"{library_version()}+{lowering_fingerprint()}"


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
        "version": version or key_version()}))[:32]


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
    """A SQLite results store (see the module docstring). ``readonly`` never creates it
    and never writes to it."""

    def __init__(self, path: str | os.PathLike, *, readonly: bool = False,
                 timeout_s: float = 60.0):
        self.path = os.fspath(path)
        if not self.path.strip():
            raise StoreError("a results store needs a file name (such as results/run.sqlite); "
                             "got an empty one")
        self.readonly = readonly
        self.timeout_s = timeout_s
        self._columns: set[str] = set()
        self._copy: str | None = None  # a private copy's folder (read-only folders)
        if readonly:
            if not os.path.isfile(self.path):
                raise StoreError(f"no results store at {self.path}")
            try:
                self.db = self._open_readonly()
                self._check_is_store(new_ok=False)
                self._columns = self._table_columns("results")
            except BaseException:
                self.close()
                raise
            return
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create the store's folder {parent}: "
                                 f"{e.strerror}") from None
        if os.path.isdir(self.path):
            raise StoreError(f"cannot open results store {self.path}: it is a folder; give "
                             "--store a file path")
        with self._guard("opening it"):
            self.db = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None)
        try:
            with self._guard("opening it"):
                self.db.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
                self._check_is_store(new_ok=True)  # before anything writes to the file
                self.db.execute("PRAGMA journal_mode = WAL")
                self.db.execute("PRAGMA synchronous = NORMAL")
                self._create()
        except BaseException:
            self.db.close()
            raise

    def _open_readonly(self) -> sqlite3.Connection:
        """A read-only connection. In a read-only folder, where a WAL store's ``-shm``
        file cannot be made: an immutable one, or, when a ``-wal`` file left by a killed
        writer holds rows, one to a private copy of both files (removed by ``close``)."""
        uri = Path(os.path.abspath(self.path)).as_uri()
        try:
            db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=self.timeout_s)
        except sqlite3.Error as e:
            raise self._error(e, "opening it") from None
        try:
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()
            return db
        except sqlite3.OperationalError:
            db.close()
        except sqlite3.Error as e:
            db.close()
            raise self._error(e, "opening it") from None
        wal = self.path + "-wal"
        try:
            if os.path.exists(wal) and os.path.getsize(wal) > 0:
                self._copy = tempfile.mkdtemp(prefix="liftmap-store-")
                copy = os.path.join(self._copy, "store.sqlite")
                shutil.copyfile(self.path, copy)
                shutil.copyfile(wal, copy + "-wal")
                uri = f"{Path(copy).as_uri()}?mode=ro"
            else:
                uri += "?mode=ro&immutable=1"
        except OSError as e:
            raise StoreError(f"cannot read results store {self.path} from its read-only "
                             f"folder ({e}); copy it and its -wal file to a writable folder "
                             "and read the copy") from None
        try:
            db = sqlite3.connect(uri, uri=True, timeout=self.timeout_s)
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchall()
            return db
        except sqlite3.Error as e:
            raise self._error(e, "opening it") from None

    # ------------------------------------------------------------------ errors

    def _error(self, e: sqlite3.Error, action: str) -> StoreError:
        """The ``StoreError`` for a ``sqlite3`` error met while ``action``."""
        msg = str(e)
        low = msg.lower()
        if "file is not a database" in low or "file is encrypted" in low:
            return NotAStoreError(f"{self.path} is not a liftmap results store (not a SQLite "
                                  "file); use another file (this one is left as it is)")
        if isinstance(e, sqlite3.DatabaseError) and (
                "malformed" in low or "corrupt" in low or "disk image" in low):
            return StoreCorruptError(
                f"results store {self.path} is damaged ({msg}, found while {action}): move "
                f"it aside and start a new store (another --store), or recover its readable "
                f"rows with: sqlite3 {self.path} .recover | sqlite3 recovered.sqlite")
        if "locked" in low or "busy" in low:
            return StoreError(f"results store {self.path} stayed locked by another process "
                              f"for {self.timeout_s:g} s while {action}; try again when the "
                              "other run ends")
        if "readonly" in low or "read-only" in low:
            return StoreError(f"results store {self.path} cannot be written while {action} "
                              "(a read-only file or folder); give --store a writable path")
        if "full" in low:
            return StoreError(f"results store {self.path}: the disk is full while {action}; "
                              "free some space and resume the run (nothing stored is lost)")
        if "unable to open" in low:
            return StoreError(f"cannot open results store {self.path}: {msg}; check that its "
                              "folder exists and can be read")
        return StoreError(f"results store {self.path}: {msg} (while {action})")

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turns a ``sqlite3`` error inside the block into the store's ``StoreError``."""
        try:
            yield
        except sqlite3.Error as e:
            raise self._error(e, action) from None

    def _all(self, sql: str, args: tuple = (), action: str = "reading it") -> list[tuple]:
        with self._guard(action):
            return self.db.execute(sql, args).fetchall()

    def _run(self, sql: str, args: tuple = (), action: str = "writing to it") -> int:
        """Executes one statement; its row count."""
        with self._guard(action):
            return self.db.execute(sql, args).rowcount

    # ------------------------------------------------------------------ schema

    def _has_table(self, name: str) -> bool:
        return bool(self._all("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                              (name,)))

    def _table_columns(self, table: str) -> set[str]:
        return {r[1] for r in self._all(f"PRAGMA table_info({table})")}

    def _check_is_store(self, new_ok: bool) -> None:
        """Raises ``NotAStoreError`` unless the file is a liftmap store (or, ``new_ok``,
        an empty database to make one of), ``StoreError`` if a newer liftmap wrote it."""
        objects = self._all("SELECT type, name FROM sqlite_master "
                            "WHERE name NOT LIKE 'sqlite_%'")
        tables = {n for t, n in objects if t == "table"}
        if not objects and new_ok:
            return
        if "meta" in tables and CORE_COLUMNS["meta"] <= self._table_columns("meta"):
            version = dict(self._all("SELECT name, value FROM meta")).get("schema_version")
            if version is not None and (not str(version).isdigit() or
                                        int(version) > SCHEMA_VERSION):
                raise StoreError(f"results store {self.path} was written by a newer liftmap "
                                 f"(store schema {version}, this one reads "
                                 f"{SCHEMA_VERSION}); upgrade liftmap to use it")
        foreign = sorted(tables - set(CORE_COLUMNS))
        missing = [t for t in ("meta", "results") if t not in tables]
        wrong = sorted(t for t in tables & set(CORE_COLUMNS)
                       if not CORE_COLUMNS[t] <= self._table_columns(t))
        if objects and not (foreign or missing or wrong):
            return
        if not objects:
            what = "an empty database"
        elif tables:
            what = f"a SQLite database with tables {', '.join(sorted(tables))}"
        else:
            what = "a SQLite database without tables"
        raise NotAStoreError(f"{self.path} is not a liftmap results store ({what}); use "
                             "another file (this one is left as it is)")

    def _create(self) -> None:
        """Creates the tables, or adds the columns an older store lacks."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
            for table, columns in (("results", COLUMNS), ("runs", RUN_COLUMNS),
                                   ("retimes", RETIME_COLUMNS)):
                cols = ", ".join(f"{c} {t}" for c, t in columns)
                self.db.execute(f"CREATE TABLE IF NOT EXISTS {table} ({cols})")
                have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
                for c, t in columns:
                    if c not in have:
                        self.db.execute(f"ALTER TABLE {table} ADD COLUMN {c} {t}")
            self.db.execute("CREATE INDEX IF NOT EXISTS results_run ON results(run_id)")
            self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                            (str(SCHEMA_VERSION),))
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:
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
        return dict(self._all("SELECT name, value FROM meta"))

    def context(self) -> Context | None:
        """What the store holds, or ``None`` for a new store."""
        m = self.meta()
        if "program_hash" not in m:
            return None
        try:
            return Context(m.get("program", "?"), m["program_hash"], json.loads(m["sizes"]),
                           json.loads(m.get("device", "{}")))
        except (KeyError, TypeError, ValueError) as e:
            raise StoreCorruptError(f"results store {self.path} is damaged: its meta table "
                                    f"does not say what it holds ({e!r}); start a new store "
                                    "with another --store") from None

    def bind(self, ctx: Context, extra: Mapping[str, str] | None = None) -> None:
        """Records ``ctx`` (and ``extra`` meta entries) in a new store, or checks that the
        store holds the same program, sizes and device; raises ``StoreMismatchError``
        otherwise."""
        have = self.context()
        if have is None:
            with self._guard("recording what it holds"):
                self.db.execute("BEGIN IMMEDIATE")
                try:
                    if self.context() is None:
                        for k, v in (("program", ctx.program),
                                     ("program_hash", ctx.program_hash),
                                     ("sizes", _canon(ctx.sizes)),
                                     ("device", _canon(ctx.device)),
                                     ("library_version", library_version()),
                                     ("lowering", lowering_fingerprint()),
                                     ("created", str(time.time())), *(extra or {}).items()):
                            self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (k, v))
                    self.db.execute("COMMIT")
                except BaseException:
                    if self.db.in_transaction:
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

    def _record(self, row: tuple) -> Record:
        try:
            return Record.from_row(dict(zip(COLUMN_NAMES, row)))
        except (KeyError, TypeError, ValueError) as e:
            raise StoreCorruptError(f"results store {self.path} is damaged: a row cannot be "
                                    f"read ({e!r}); start a new store with another --store, "
                                    f"or recover it with: sqlite3 {self.path} .recover | "
                                    "sqlite3 recovered.sqlite") from None

    def has(self, key: str) -> bool:
        return bool(self._all("SELECT 1 FROM results WHERE key=?", (key,)))

    def record(self, key: str) -> Record | None:
        """The record of candidate ``key``, or ``None``."""
        rows = self._all(f"SELECT {self._select()} FROM results WHERE key=?", (key,))
        return self._record(rows[0]) if rows else None

    def add(self, row: Record | Mapping[str, Any]) -> bool:
        """Inserts one record (or a row in the store's form, ``Record.to_row``) and commits
        it; ``False`` if its key was already there."""
        if isinstance(row, Record):
            row = row.to_row()
        values = {c: row.get(c) for c in COLUMN_NAMES}
        if values["created"] is None:
            values["created"] = time.time()
        return self._run(
            f"INSERT OR IGNORE INTO results ({', '.join(COLUMN_NAMES)}) "
            f"VALUES ({', '.join('?' * len(COLUMN_NAMES))})", tuple(values.values()),
            "storing a result") == 1

    def records(self, *, run_id: str | None = None, order: str = "created") -> list[Record]:
        """Every record (of one run), oldest first (``order="gflops"``: fastest first)."""
        sql = f"SELECT {self._select()} FROM results"
        args: tuple = ()
        if run_id is not None:
            sql += " WHERE run_id=?"
            args = (run_id,)
        sql += (" ORDER BY gflops IS NULL, gflops DESC, created" if order == "gflops"
                else " ORDER BY created, idx")
        return [self._record(r) for r in self._all(sql, args)]

    def best_records(self, n: int = 1) -> list[Record]:
        """The ``n`` ``ok`` records with the highest GFLOP/s (lowest time when no FLOP
        count)."""
        rows = self._all(f"SELECT {self._select()} FROM results WHERE status='ok' "
                         "ORDER BY gflops IS NULL, gflops DESC, time_s ASC LIMIT ?", (n,))
        return [self._record(r) for r in rows]

    def counts(self) -> Counter:
        """Outcome labels (``ok``, ``rejected:<check>``, ...) and how many rows have each."""
        out: Counter = Counter()
        for status, check, n in self._all("SELECT status, outcome_check, COUNT(*) FROM results "
                                          "GROUP BY status, outcome_check"):
            out[f"rejected:{check}" if status == "rejected" and check else status] += n
        return out

    def __len__(self) -> int:
        return int(self._all("SELECT COUNT(*) FROM results")[0][0])

    # ------------------------------------------------------------------ runs

    def start_run(self, run_id: str, strategy: str, seed: int, budget: str,
                  options: Mapping[str, Any]) -> None:
        """Records the start of a run (with this process's id and host)."""
        self._run("INSERT INTO runs (run_id, strategy, seed, budget, options, started, pid, "
                  "host) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                  (run_id, strategy, seed, budget, _canon(options), time.time(), os.getpid(),
                   socket.gethostname()), "recording the run")

    def finish_run(self, run_id: str, stopped_by: str, evaluated: int, cached: int,
                   draws: int | None, mapping_s: float | None = None) -> None:
        """Records how a run ended; ``mapping_s``: its mapping search in no row."""
        self._run("UPDATE runs SET finished=?, stopped_by=?, evaluated=?, cached=?, "
                  "draws=?, mapping_s=? WHERE run_id=?",
                  (time.time(), stopped_by, evaluated, cached, draws, mapping_s, run_id),
                  "recording the end of the run")

    def runs(self) -> list[dict]:
        """Every run, oldest first, with every column of ``RUN_COLUMNS`` (``None`` where an
        older store lacks one) and its ``state`` (see the module docstring)."""
        with self._guard("reading it"):
            cur = self.db.execute("SELECT * FROM runs ORDER BY started")
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
            last = dict(self.db.execute("SELECT run_id, MAX(created) FROM results "
                                        "GROUP BY run_id").fetchall())
        blank = {c: None for c, _ in RUN_COLUMNS}
        out = []
        for r in rows:
            run = {**blank, **dict(zip(names, r))}
            run["state"] = run_state(run, last.get(run["run_id"]))
            out.append(run)
        return out

    # ------------------------------------------------------------------ re-timing

    def add_retime(self, key: str, run_id: str, rnd: int, times: list[float],
                   confirm: bool = False, phase: str | None = None) -> None:
        """Records one re-timing round of candidate ``key`` (every execution's seconds);
        ``confirm``: a round that timed the chosen winner again after the choice;
        ``phase``: another kind of round (a challenge's during the run:
        ``mapper.explore.incumbent``), which the end-of-run figures leave out."""
        self._run("INSERT INTO retimes (key, run_id, round, times, created, phase) "
                  "VALUES (?, ?, ?, ?, ?, ?)",
                  (key, run_id, rnd, json.dumps([float(t) for t in times]), time.time(),
                   "confirm" if confirm else phase),
                  "storing a re-timing")

    def retime_rows(self, phase: str, run_id: str | None = None
                    ) -> list[tuple[str, float, int, list[float]]]:
        """``(key, created, round, times)`` of the re-timing rounds of ``phase`` (of one
        run), oldest first (empty in a store older than phases)."""
        if not self._has_table("retimes") or "phase" not in self._table_columns("retimes"):
            return []
        sql, args = "SELECT key, created, round, times FROM retimes WHERE phase=?", [phase]
        if run_id is not None:
            sql, args = sql + " AND run_id=?", [phase, run_id]
        return [(k, float(c or 0.0), int(r or 0), self._times(k, t))
                for k, c, r, t in self._all(sql + " ORDER BY created", tuple(args))]

    def retimes(self, key: str) -> list[float]:
        """Every execution of candidate ``key`` re-timed at the end of a run (seconds;
        empty: never re-timed, or a store older than re-timing)."""
        if not self._has_table("retimes"):
            return []
        out: list[float] = []
        phase = "phase" if "phase" in self._table_columns("retimes") else "NULL"
        for (t,) in self._all(f"SELECT times FROM retimes WHERE key=? AND ({phase} IS NULL "
                              f"OR {phase}='confirm') ORDER BY created", (key,)):
            out += self._times(key, t)
        return out

    def retimed(self, n: int | None = None) -> list[Retimed]:
        """The candidates re-timed at the end of a run (every run's rounds of a candidate
        together), as a run ranks its winners (``Retimed.rank_s``: the median of the
        fastest round of those that chose) and at most ``n``: the store's answer is the
        first. A winner's figures are those of its confirmation rounds where it has any,
        with its rounds taken while a run explored (phase ``watch``; ``Retimed.of``). A
        candidate whose record is not ``ok`` is left out."""
        if not self._has_table("retimes"):
            return []
        phase = "phase" if "phase" in self._table_columns("retimes") else "NULL"
        # (run, round, phase) -> [first stored time, execution times]
        rounds: dict[str, dict[tuple[str, int, str], list[Any]]] = {}
        for key, run_id, rnd, t, ph, created in self._all(
                f"SELECT key, run_id, round, times, {phase}, created FROM retimes "
                f"WHERE {phase} IS NULL OR {phase} IN ('confirm', 'watch') "
                "ORDER BY created"):
            slot = rounds.setdefault(key, {}).setdefault((run_id, rnd, ph or ""),
                                                          [float(created or 0.0), []])
            slot[1].extend(self._times(key, t))
        out: list[Retimed] = []
        for key, by_round in rounds.items():
            rec = self.record(key)
            of = {p: [(at, ts) for (_, _, ph), (at, ts) in by_round.items() if ts and ph == p]
                  for p in ("", "confirm", "watch")}
            chose = [ts for _, ts in of[""]]
            confirm = [ts for _, ts in of["confirm"]]
            if rec is None or not rec.ok or not (chose or confirm):
                continue
            flops = rec.gflops * 1e9 * rec.time_s if rec.gflops and rec.time_s else None
            out.append(Retimed.of(rec, chose or confirm, flops, confirm=confirm or None,
                                  confirm_at=[at for at, _ in of["confirm"]],
                                  watch=of["watch"]))
        out.sort(key=lambda r: r.rank_s)
        return out if n is None else out[:n]

    def _times(self, key: str, text: str) -> list[float]:
        try:
            return [float(t) for t in json.loads(text)]
        except (TypeError, ValueError):
            raise StoreCorruptError(f"results store {self.path} is damaged: a re-timing "
                                    f"of {key} cannot be read; start a new store with "
                                    "another --store") from None

    def close(self) -> None:
        """Closes the store (the last connection to close folds the ``-wal`` file into the
        store and removes it)."""
        try:
            if getattr(self, "db", None) is not None:
                self.db.close()
        except sqlite3.Error as e:
            raise self._error(e, "closing it") from None
        finally:
            if self._copy is not None:
                shutil.rmtree(self._copy, ignore_errors=True)
                self._copy = None

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _budget_seconds(budget: str | None) -> float | None:
    """The seconds of a time budget as runs store it (``90s``, ``10m``, ``1.5h``), else
    ``None``."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*(s|sec|m|min|h)\s*", budget or "")
    if m is None:
        return None
    return float(m[1]) * {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}[m[2]]


def _process_alive(pid: int, started: float | None) -> bool:
    """Whether process ``pid`` of this host exists and is the one that started at
    ``started`` (a process started after it only reuses the id)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except OSError:
        return False
    if started is None:
        return True
    try:  # Linux: the process's start, in clock ticks after boot
        with open(f"/proc/{pid}/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat") as f:
            boot = next(int(ln.split()[1]) for ln in f if ln.startswith("btime"))
        return boot + ticks / os.sysconf("SC_CLK_TCK") <= started + 2.0
    except (OSError, ValueError, IndexError, StopIteration):
        return True


def run_state(run: Mapping[str, Any], last_row: float | None = None,
              now: float | None = None) -> str:
    """``finished``, ``running`` or ``interrupted`` (see the module docstring) for a row
    of the ``runs`` table; ``last_row``: when its newest result was stored."""
    if run.get("finished") is not None or run.get("stopped_by"):
        return "finished"
    now = time.time() if now is None else now
    started = run.get("started")
    pid, host = run.get("pid"), run.get("host")
    if pid and host == socket.gethostname():
        return "running" if _process_alive(int(pid), started) else "interrupted"
    if started is None:
        return "interrupted"
    seconds = _budget_seconds(run.get("budget"))
    if seconds is not None and now > started + seconds + RUN_GRACE_S:
        return "interrupted"
    return "interrupted" if now - max(started, last_row or 0.0) > STALE_RUN_S else "running"
