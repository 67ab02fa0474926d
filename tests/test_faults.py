"""Fault injection (issue 24): what a killed run, a second writer, a damaged or foreign
store file, a read-only folder, a program file that is not UTF-8, an out-of-range
argument, and a hanging or crashing kernel do. Each ends in a typed outcome or one clear
``error:`` line (exit status 2), never a traceback, and nothing already stored is lost.

The exploration tests run ``explore`` with a pool that needs no device (``FakePool``:
every candidate is ``ok`` after a short sleep, its time fixed by its mapping and tuning),
in subprocesses that are killed with SIGKILL; the kernel tests need the OpenCL device
(``opencl``)."""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import io
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from located_cases import TYPE_ERRORS

from ir.errors import LiftmapError, NotUTF8Error
from mapper.cli import main
from mapper.explore.options import ExploreOptions
from mapper.explore.store import (
    NotAStoreError,
    ResultStore,
    StoreCorruptError,
    StoreError,
    run_state,
)

ROOT = str(Path(__file__).resolve().parent.parent)
L3 = os.path.join(ROOT, "examples", "cc22_listing3.lift")



class FakePool:
    """A ``WorkerPool`` without a device: every candidate is ``ok`` after ``delay``
    seconds, its time fixed by its lowering function's arguments (mapping and tuning)."""

    size = 1

    def __init__(self, delay: float = 0.0):
        self.delay = delay

    def device_info(self) -> dict:
        from codegen.device_description import POCL_CPU

        return {"limits": POCL_CPU.to_dict()}

    def evaluate_candidate(self, lower_fn, inputs, reference, **kw):
        import zlib

        from codegen.program import Outcome

        time.sleep(self.delay)
        t = 1e-3 * (1 + zlib.crc32(repr(getattr(lower_fn, "args", ())).encode()) % 997 / 997)
        return Outcome("ok", time_s=t, times_s=(t,), gflops=1e-3 / t, lower_s=1e-3,
                       build_s=1e-3, source_hash="h")

    def close(self) -> None:
        pass


def explore_l3(path: str, seed: int = 9, budget: int = 100, delay: float = 0.0):
    """``explore`` of L3 for N=1024 with the solver strategy on a ``FakePool``."""
    from mapper.explore import explore

    return explore(L3, {"N": 1024}, strategy="solver", budget=budget, store=path,
                   pool=FakePool(delay), options=ExploreOptions.of(seed=seed, retime=0))


# explore_l3 in a process of its own; argv: store, seed, budget, seconds per candidate
DRIVER = """
import sys
sys.path.insert(0, "tests")
from test_faults import explore_l3
res = explore_l3(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
print(res.evaluated, res.cached, res.stopped_by)
"""


def _driver(path: str, seed: int = 9, budget: int = 100, delay: float = 0.0,
            **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", DRIVER, path, str(seed), str(budget),
                             str(delay)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def _rows(path: str) -> dict[str, tuple]:
    """Every stored row by key (all columns), read without the library."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        try:
            return {r[0]: r for r in db.execute("SELECT * FROM results")}
        finally:
            db.close()
    except sqlite3.Error:
        return {}


def _cli(*argv: str) -> tuple[int, str, str]:
    """``mapper ARGV`` in-process: (status, stdout, stderr); argparse's exit included."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except SystemExit as e:
            rc = e.code if isinstance(e.code, int) else 2
    return rc, out.getvalue(), err.getvalue()


def _one_error_line(rc: int, err: str, *parts: str) -> None:
    assert rc == 2, err
    assert "Traceback" not in err and err.startswith("error: "), err
    assert len(err.strip().splitlines()) == 1, err
    for p in parts:
        assert p in err, (p, err)


def _digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def store_100(tmp_path_factory) -> str:
    """A store of 100 candidates of one finished run (closed: no -wal file)."""
    path = str(tmp_path_factory.mktemp("faults") / "s.sqlite")
    p = _driver(path)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and out.split() == ["100", "0", "budget"], err
    return path


# ------------------------------------------------------------ killed runs, two writers


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_sigkill_three_times_then_resume_loses_and_changes_nothing(tmp_path):
    path = str(tmp_path / "k.sqlite")
    seen: dict[str, tuple] = {}
    for kill_at in (15, 40, 65):
        p = _driver(path, delay=0.02, start_new_session=True)
        try:
            deadline = time.time() + 120
            while len(_rows(path)) < kill_at and time.time() < deadline and p.poll() is None:
                time.sleep(0.01)
            assert p.poll() is None, p.communicate()[1][-2000:]  # killed mid-run
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        rows = _rows(path)
        assert kill_at <= len(rows) < 100
        assert all(rows[k] == v for k, v in seen.items())  # nothing lost or changed
        seen = rows
    p = _driver(path)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    evaluated, cached, stopped = out.split()
    assert (int(evaluated), int(cached), stopped) == (100 - len(seen), len(seen), "budget")
    rows = _rows(path)
    assert len(rows) == 100 and all(rows[k] == v for k, v in seen.items())
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(DISTINCT key), COUNT(*) FROM results").fetchone() == \
        (100, 100)
    db.close()
    with ResultStore(path, readonly=True) as st:
        runs = st.runs()
    assert [r["state"] for r in runs] == ["interrupted"] * 3 + ["finished"]
    assert [r["stopped_by"] for r in runs] == [None, None, None, "budget"]
    rc, out, err = _cli("results", path, "--json")
    assert rc == 0, err
    assert [r["state"] for r in json.loads(out)["runs"]] == ["interrupted"] * 3 + ["finished"]


@pytest.mark.slow
def test_two_explorations_write_one_store_at_once(tmp_path):
    path = str(tmp_path / "two.sqlite")
    procs = [_driver(path, seed=seed, budget=60, delay=0.01) for seed in (1, 2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e for _, e in outs]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    keys = [k for (k,) in db.execute("SELECT key FROM results")]
    runs = db.execute("SELECT COUNT(*) FROM runs WHERE stopped_by = 'budget'").fetchone()[0]
    db.close()
    assert len(keys) == len(set(keys)) and 60 <= len(keys) <= 120 and runs == 2
    for out, _ in outs:  # each run saw 60 candidates: evaluated, or stored by the other
        evaluated, cached, _stopped = out.split()
        assert int(evaluated) + int(cached) == 60
    assert sum(int(out.split()[0]) for out, _ in outs) == len(keys)


# ------------------------------------------------------------ damaged and foreign files


def _damaged(src: str, dst: str, page: int, seed: int) -> None:
    """A copy of ``src`` with page ``page`` (0-based) overwritten by random bytes."""
    data = bytearray(Path(src).read_bytes())
    rng = random.Random(seed)
    data[page * 4096:(page + 1) * 4096] = bytes(rng.randrange(256) for _ in range(4096))
    Path(dst).write_bytes(data)


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_damaged_pages_give_one_line_naming_the_file(store_100, tmp_path):
    """Random bytes in any page: opening may pass and a later read fail; every command
    ends in one line (or reads what it can), no sqlite3 error escapes, the file is not
    written."""
    pages = Path(store_100).stat().st_size // 4096
    assert pages >= 4
    damaged = 0
    for page in range(1, pages):
        path = str(tmp_path / f"d{page}.sqlite")
        _damaged(store_100, path, page, seed=page)
        before = _digest(path)
        for argv in (["results", path], ["results", path, "--json"],
                     ["plot", path, "--out", str(tmp_path / "plots")],
                     ["results", path, "--compare", "random", "--seeds", "1"]):
            rc, _, err = _cli(*argv)
            if rc != 0:
                _one_error_line(rc, err, path)
                damaged += "is damaged" in err
        try:
            with ResultStore(path, readonly=True) as st:
                st.records(), st.runs(), st.counts(), st.best_records(5)
        except StoreError as e:
            assert isinstance(e, LiftmapError) and path in str(e)
        assert _digest(path) == before
    assert damaged > 0  # the read after the opening check did fail


def test_a_damaged_store_stops_an_exploration_with_one_line(store_100, tmp_path):
    """Damage found by a writer: at opening (the meta table), or by a later read."""
    path = str(tmp_path / "d.sqlite")
    data = bytearray(Path(store_100).read_bytes())
    data[4096:] = random.Random(5).randbytes(len(data) - 4096)  # every page but the first
    Path(path).write_bytes(data)
    with pytest.raises(StoreCorruptError, match=f"results store {path} is damaged"):
        explore_l3(path)
    rc, _, err = _cli("explore", L3, "--sizes", "N=1024", "--budget", "1", "--store", path)
    _one_error_line(rc, err, f"results store {path} is damaged")
    db = sqlite3.connect(f"file:{store_100}?mode=ro", uri=True)
    (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'results'").fetchone()
    db.close()
    _damaged(store_100, path, root - 1, seed=1)  # the results table's first page
    with pytest.raises(StoreCorruptError, match="recover"):
        with ResultStore(path) as st:
            st.records()


@pytest.mark.parametrize("schema", [
    "CREATE TABLE results(x)",
    "CREATE TABLE results(key)",
    "CREATE TABLE t(a); INSERT INTO t VALUES (1)",
    "CREATE TABLE meta(name, value); CREATE TABLE results(key, run_id, strategy, mapping, "
    "tuning, status); CREATE TABLE notes(text)",
    None,  # not SQLite at all
])
def test_a_foreign_file_is_refused_and_left_as_it_is(tmp_path, schema):
    path = str(tmp_path / "foreign.sqlite")
    if schema is None:
        Path(path).write_bytes(b"SQLite format 2\x00" + bytes(range(256)) * 20)
    else:
        db = sqlite3.connect(path)
        db.executescript(schema)
        db.commit()
        db.close()
    before = _digest(path)
    for readonly in (True, False):
        with pytest.raises(NotAStoreError, match="is not a liftmap results store"):
            ResultStore(path, readonly=readonly)
    rc, _, err = _cli("results", path)
    _one_error_line(rc, err, path, "not a liftmap results store")
    rc, _, err = _cli("explore", L3, "--sizes", "N=1024", "--budget", "1", "--store", path)
    _one_error_line(rc, err, path, "not a liftmap results store")
    assert _digest(path) == before
    assert sorted(os.listdir(tmp_path)) == ["foreign.sqlite"]  # no -wal, no -journal


def test_a_store_of_a_newer_liftmap_is_refused(tmp_path):
    path = str(tmp_path / "new.sqlite")
    with ResultStore(path) as st:
        st._run("UPDATE meta SET value = '99' WHERE name = 'schema_version'")
    for readonly in (True, False):
        with pytest.raises(StoreError, match="newer liftmap"):
            ResultStore(path, readonly=readonly)


# ------------------------------------------------------------ a read-only folder


def _read_only_runner() -> list[str] | None:
    """A command prefix that runs a process which cannot write to a folder of mode 555:
    this user's own, or, for root, root without the capabilities that override file
    permissions (``setpriv``); ``None`` if neither works here."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return None
    drop = "-dac_override,-dac_read_search,-fowner"
    prefix = [setpriv, "--bounding-set", drop, "--inh-caps", drop]
    probe = subprocess.run([*prefix, "true"], capture_output=True)
    return prefix if probe.returncode == 0 else None


KILLED_WRITER = """
import os, signal, sys
from mapper.explore.store import Context, ResultStore
st = ResultStore(sys.argv[1])
st.bind(Context("p.lift", "abc", {"N": 64}, {"name": "dev"}))
st.start_run("r1", "solver", 0, "100", {})
for i in range(40):
    st.add({"key": f"k{i}", "run_id": "r1", "strategy": "solver", "mapping": "A=20",
            "tuning": "{}", "status": "ok", "gflops": float(i), "time_s": 1e-3})
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.parametrize("left", ["closed", "killed", "killed-without-shm"])
def test_a_store_in_a_read_only_folder_is_readable(store_100, tmp_path, left):
    prefix = _read_only_runner()
    if prefix is None:
        pytest.skip("no way to make a folder read-only for this user here")
    folder = tmp_path / "ro"
    folder.mkdir()
    path = str(folder / "s.sqlite")
    if left == "closed":
        shutil.copyfile(store_100, path)
        n = 100
    else:
        subprocess.run([sys.executable, "-c", KILLED_WRITER, path], cwd=ROOT)
        assert os.path.getsize(path + "-wal") > 0  # the rows are in the -wal file
        if left == "killed-without-shm":
            os.remove(path + "-shm")
        n = 40
    files = sorted(os.listdir(folder))
    for f in files:
        os.chmod(folder / f, 0o444)
    os.chmod(folder, 0o555)
    try:
        probe = subprocess.run([*prefix, "touch", str(folder / "probe")], capture_output=True)
        assert probe.returncode != 0  # the folder is read-only for the readers below
        env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl")}
        for argv in (["results", path], ["plot", path, "--out", str(tmp_path / "plots")]):
            out = subprocess.run([*prefix, sys.executable, "-m", "mapper.cli", *argv],
                                 cwd=ROOT, capture_output=True, text=True, env=env,
                                 timeout=120)
            assert out.returncode == 0, out.stderr
            if argv[0] == "results":
                assert f"{n} candidate(s) in 1 run(s)" in " ".join(out.stdout.split())
        assert sorted(os.listdir(folder)) == files
    finally:
        os.chmod(folder, 0o755)


# ------------------------------------------------------------ runs that never ended


def test_run_states():
    now = 1_000_000.0
    me = {"pid": os.getpid(), "host": __import__("socket").gethostname(), "started": now}
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert run_state({"finished": now, "stopped_by": "budget"}) == "finished"
    assert run_state({**me, "started": time.time()}) == "running"
    assert run_state({**me, "pid": dead.pid, "started": time.time()}) == "interrupted"
    far = {"pid": 1, "host": "another-host", "started": now}
    assert run_state({**far, "budget": "10m"}, now=now + 300) == "running"
    assert run_state({**far, "budget": "10m"}, now=now + 3600) == "interrupted"
    assert run_state({**far, "budget": "100"}, last_row=now + 3600, now=now + 7200) == \
        "running"
    assert run_state({**far, "budget": "100"}, now=now + 3 * 86400) == "interrupted"
    assert run_state({"started": None}) == "interrupted"


# ------------------------------------------------------------ program files


LATIN1 = "X : [float]N\n# café\nmap(id) $ X\n".encode("latin-1")
NOT_UTF8 = {
    "random-bytes": (random.Random(3).randbytes(300), None),
    "utf16-bom": ("X : [float]N\nmap(id) $ X\n".encode("utf-16"), (0xff, 1, 1)),
    "latin1": (LATIN1, (0xe9, 2, 6)),
    "stray-byte": (b"X : [float]N\nmap(id) $ X\xff\n", (0xff, 2, 12)),
    "truncated": (b"X : [float]N\n# \xce", (0xce, 2, 3)),
    "after-utf8": ("# λ→é\n".encode() + b"\x80", (0x80, 2, 1)),
}


@pytest.mark.parametrize("name", sorted(NOT_UTF8))
def test_a_program_file_that_is_not_utf8_is_one_line(tmp_path, name):
    data, where = NOT_UTF8[name]
    path = str(tmp_path / "p.lift")
    Path(path).write_bytes(data)
    with pytest.raises(NotUTF8Error) as e:
        from ir.syntax import parse_file

        parse_file(path)
    if where is not None:
        byte, line, column = where
        assert (e.value.byte, e.value.line, e.value.column) == (byte, line, column)
        assert str(e.value).startswith(f"{path} is not UTF-8 text (byte 0x{byte:02x} at line "
                                       f"{line}, column {column})")
    store = str(tmp_path / "s.sqlite")
    for argv in (["show", path], ["enumerate", path, "--count"], ["constraints", path],
                 ["check", path, "--mapping", "A=S"], ["explain", path, "--partial", "A=S"],
                 ["space", path, "--sizes", "N=64"],
                 ["run", path, "--mapping", "A=S", "--sizes", "N=64"],
                 ["explore", path, "--sizes", "N=64", "--budget", "1", "--store", store]):
        rc, _, err = _cli(*argv)
        _one_error_line(rc, err, f"error: {path} is not UTF-8 text (byte 0x")
    assert not os.path.exists(store)


def test_a_utf8_byte_order_mark_is_read_as_text(tmp_path):
    path = tmp_path / "bom.lift"
    path.write_bytes("\ufeffX : [float]N\nmap(id) $ X\n".encode())
    rc, out, err = _cli("show", str(path))
    assert rc == 0 and "input X : [float]N" in out, err


# ------------------------------------------------------------ arguments


@pytest.mark.parametrize("argv, what", [
    (["run", L3, "--mapping", "A=S", "--sizes", "N=64", "--seed", "-1"], "--seed"),
    (["run", L3, "--mapping", "A=S", "--sizes", "N=64", "--seed", str(2**32)], "--seed"),
    (["run", L3, "--mapping", "A=S", "--sizes", "N=64", "--repeats", "0"], "--repeats"),
    (["run", L3, "--mapping", "A=S", "--sizes", "N=64", "--timeout", "nan"], "--timeout"),
    (["run", L3, "--mapping", "A=S", "--sizes", "N=64", "--timeout", "-1"], "--timeout"),
    (["enumerate", L3, "--random", "--seed", "-5"], "--seed"),
    (["enumerate", L3, "--limit", "-1"], "--limit"),
    (["space", L3, "--sizes", "N=64", "--max", "abc"], "--max"),
    (["explore", L3, "--seed", "-1"], "--seed"),
    (["explore", L3, "--repeats", "-3"], "--repeats"),
    (["explore", L3, "--workers", "0"], "--workers"),
    (["explore", L3, "--workers", "100000"], "--workers"),
    (["explore", L3, "--max", "-1"], "--max"),
    (["explore", L3, "--timeout", "0"], "--timeout"),
    (["explore", L3, "--cut", "inf"], "--cut"),
    (["results", "x.sqlite", "--top", "-1"], "--top"),
    (["results", "x.sqlite", "--compare", "random", "--seeds", "0"], "--seeds"),
    (["results", "x.sqlite", "--top", "1" + "0" * 5000], "--top"),
])
def test_integer_and_time_arguments_are_range_checked(argv, what):
    rc, out, err = _cli(*argv)
    assert rc == 2 and "Traceback" not in err
    assert f"error: argument {what}" in err, err


@pytest.mark.parametrize("value", ["0", "-3", "9" * 40, str(2**22 + 1)])
def test_space_max_is_range_checked_by_the_command(value):
    rc, _, err = _cli("space", L3, "--sizes", "N=64", "--max", value)
    _one_error_line(rc, err, "--max", "out of range")


# ------------------------------------------------------------ located errors


@pytest.mark.parametrize("text, line, col, message", [*TYPE_ERRORS,
    ("X : [float]N\nmap(id) o map(map(id)) $ X", 2, 15, "expects an array, got float"),
    ("X : [[float]4]N\nmapA(slideND(2, (3, 3), (1, 1))) $ X", 2, 6,
     "slide expects an array, got float"),
    ("X : [float]N\nmapA(mapA(id)) $ X", 2, 6, "map label 'A' is used twice"),
])
def test_errors_about_the_program_name_file_line_and_column(tmp_path, text, line, col,
                                                            message):
    path = str(tmp_path / "p.lift")
    Path(path).write_text(text + "\n")
    for argv in (["show", path], ["check", path, "--mapping", "A=S"],
                 ["enumerate", path, "--count"]):
        rc, _, err = _cli(*argv)
        assert rc == 2 and message in err and "Traceback" not in err, err
        assert f"line {line}, column {col}" in err.splitlines()[0], err
        assert "x_0" not in err.splitlines()[0]  # no internal name in the message


# ------------------------------------------------------------ the fuzzer


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
def test_fuzz_with_non_utf8_bytes_no_traceback_no_hang_every_error_located():
    import fuzz_cli

    rep = fuzz_cli.fuzz(300, seed=24, limit_s=30, heavy=False, binary=0.3, edges=False)
    assert rep.cases == 300 and rep.binary >= 50
    assert all(rep.total(o) == 0 for o in fuzz_cli.FINDINGS), \
        "\n".join(f.reproducer() for f in rep.findings)


@pytest.mark.slow
def test_fuzz_1200_cases_with_non_utf8_bytes():
    import fuzz_cli

    rep = fuzz_cli.fuzz(1200, seed=2024, limit_s=30, heavy=False, binary=0.15)
    assert rep.cases == 1200 and rep.binary >= 100
    assert all(rep.total(o) == 0 for o in fuzz_cli.FINDINGS), \
        "\n".join(f.reproducer() for f in rep.findings)


# ------------------------------------------------------------ hanging and crashing kernels


HANG_SRC = """kernel void spin(volatile global const int* flag, global float* out) {
  int i = get_global_id(0);
  float x = 0.0f;
  while (flag[0] != 0) { x += 1.0f; }
  out[i] = x;
}
"""


def _hang_program():
    from codegen.program import Buffer, CompiledProgram, Kernel

    return CompiledProgram(
        (Kernel("spin", HANG_SRC, ("flag", "out"), (4,)),),
        {"flag": Buffer("flag", "global", "int", 1, "input"),
         "out": Buffer("out", "global", "float", 4, "output")},
        ("flag",), "out", (4,))


def _vadd():
    from experiments.handwritten import vector_add_program

    return vector_add_program(64)


def _segfault():
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def _illegal_instruction():
    signal.signal(signal.SIGILL, signal.SIG_DFL)  # the OpenCL runtime may handle SIGILL
    os.kill(os.getpid(), signal.SIGILL)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


@pytest.fixture
def pool():
    from codegen.worker import WorkerPool

    with WorkerPool() as p:
        yield p


def _ab():
    rng = np.random.default_rng(0)
    return {"a": rng.random(64, dtype=np.float32), "b": rng.random(64, dtype=np.float32)}


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.opencl
def test_a_hanging_kernel_times_out_and_its_worker_is_replaced(pool):
    d = _ab()
    assert pool.evaluate(_vadd(), d, d["a"] + d["b"], timeout_s=60).status == "ok"
    (w,) = pool._workers
    old, starts = w.proc.pid, pool.restarts
    out = pool.evaluate(_hang_program(), {"flag": np.array([1], np.int32)}, np.zeros(4),
                        timeout_s=3)
    assert out.status == "timeout" and "killed" in out.reason
    assert _gone(old)
    nxt = pool.evaluate(_vadd(), d, d["a"] + d["b"], timeout_s=60)
    assert nxt.status == "ok" and pool.restarts == starts + 1 and w.proc.pid != old


@pytest.mark.opencl
@pytest.mark.parametrize("fn, sig", [(os.abort, "SIGABRT"), (_segfault, "SIGSEGV"),
                                     (_illegal_instruction, "SIGILL")])
@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
def test_a_crashing_kernel_is_a_crash_outcome_and_its_worker_is_replaced(pool, fn, sig):
    d = _ab()
    assert pool.evaluate_candidate(_vadd, d, d["a"] + d["b"], timeout_s=60).status == "ok"
    (w,) = pool._workers
    old = w.proc.pid
    out = pool.evaluate_candidate(fn, d, None, timeout_s=60)
    assert out.status == "crash" and sig in out.reason, out.reason
    assert _gone(old)
    nxt = pool.evaluate_candidate(_vadd, d, d["a"] + d["b"], timeout_s=60)
    assert nxt.status == "ok" and w.proc.pid != old
    pids = [x.proc.pid for x in pool._workers]
    pool.close()
    assert all(_gone(p) for p in pids)  # no orphans
