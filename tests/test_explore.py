"""Exploration: store, strategies, evaluator, resume after SIGKILL, the CLI commands."""

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest
from killing import kill_when, store_rows
from observed import observed

from mapper.errors import ConfigurationError
from mapper.explore import (
    STRATEGIES,
    BudgetError,
    Context,
    ResultStore,
    StoreError,
    StoreMismatchError,
    StrategyError,
    Task,
    candidate_key,
    explore,
    get_strategy,
    make_strategy,
    parse_budget,
)
from mapper.explore.options import ExploreOptions
from mapper.explore.strategies import Candidate

ROOT = os.path.join(os.path.dirname(__file__), "..")
L3 = os.path.join(ROOT, "examples", "cc22_listing3.lift")
with open(L3) as _f:
    L3_PROGRAM = _f.read()
DEV = {"name": "dev-a", "platform_version": "1"}


def _row(key, run="r1", status="ok", gflops=None, time_s=1e-3, check=None):
    return {"key": key, "run_id": run, "strategy": "solver", "seed": 0, "idx": 0,
            "mapping": "A=20 B=10 C=10 D=0", "tuning": '{"s0": 64, "s1": 4}',
            "status": status, "outcome_check": check, "reason": "", "gflops": gflops,
            "time_s": time_s}


# ------------------------------------------------------------------ budget


def test_parse_budget():
    assert parse_budget(500).candidates == 500
    assert parse_budget("500").candidates == 500
    assert parse_budget("90s").seconds == 90
    assert parse_budget("10m").seconds == 600
    assert parse_budget("1.5h").seconds == 5400
    for bad in (0, "0", -3, "-2", "0s", "abc", "10 parsecs", 2.5):
        with pytest.raises(BudgetError):
            parse_budget(bad)


# ------------------------------------------------------------------ store


def test_keys_separate_program_sizes_device_mapping_tuning():
    base = ("prog", {"N": 64}, {"A": 20}, {"s0": 4}, DEV)
    k = candidate_key(*base, version="1")
    assert k == candidate_key(*base, version="1")
    variants = [("prog2", {"N": 64}, {"A": 20}, {"s0": 4}, DEV),
                ("prog", {"N": 128}, {"A": 20}, {"s0": 4}, DEV),
                ("prog", {"N": 64}, {"A": 21}, {"s0": 4}, DEV),
                ("prog", {"N": 64}, {"A": 20}, {"s0": 8}, DEV),
                ("prog", {"N": 64}, {"A": 20}, {"s0": 4}, {"name": "dev-b"})]
    keys = {candidate_key(*v, version="1") for v in variants}
    assert k not in keys and len(keys) == len(variants)
    assert candidate_key(*base, version="2") != k


def test_keys_change_with_the_code_that_builds_kernels(tmp_path):
    """A store's keys carry the lowering's fingerprint: an edit to a file that builds a
    kernel gives new keys (the candidate is measured again), an explorer edit does not."""
    from pathlib import Path

    from mapper.explore.fingerprint import kernel_sources, lowering_fingerprint
    from mapper.explore.store import key_version, library_version

    root = Path(__file__).resolve().parents[1]
    names = {p.relative_to(root).as_posix() for p in kernel_sources(root)}
    assert {"codegen/launch.py", "codegen/intensity.py", "ir/nodes.py",
            "mapper/apply.py", "codegen/presets.json"} <= names
    assert not any(n.startswith(("mapper/explore/", "mapper/cli/")) for n in names)
    assert key_version() == f"{library_version()}+{lowering_fingerprint()}"
    base = ("prog", {"N": 64}, {"A": 20}, {"s0": 4}, DEV)
    assert candidate_key(*base) == candidate_key(*base, version=key_version())

    # a copy of the tree: edit a lowering file, then an explorer file
    import shutil

    from mapper.explore import fingerprint as fp

    copy = tmp_path / "tree"
    for n in names | {"mapper/explore/strategies.py", "mapper/explore/fingerprint.py"}:
        (copy / n).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(root / n, copy / n)

    def digest() -> str:
        fake = copy / "mapper/explore/fingerprint.py"
        ns: dict = {"__file__": str(fake), "__name__": "fp_copy"}
        exec(compile(Path(fp.__file__).read_text(), str(fake), "exec"), ns)
        return ns["lowering_fingerprint"]()

    before = digest()
    assert before == lowering_fingerprint()
    (copy / "mapper/explore/strategies.py").write_text("# an explorer edit\n")
    assert digest() == before
    (copy / "codegen/launch.py").write_text((root / "codegen/launch.py").read_text() + "#\n")
    assert digest() != before


def test_store_round_trip(tmp_path):
    path = tmp_path / "s.sqlite"
    ctx = Context("p", "abc", {"N": 64}, DEV)
    with ResultStore(path) as st:
        assert st.context() is None
        st.bind(ctx)
        assert st.add(_row("k1", gflops=2.0))
        assert st.add(_row("k2", gflops=5.0))
        assert st.add(_row("k3", status="rejected", check="local-memory", time_s=None))
        assert not st.add(_row("k1", gflops=99.0))  # a key is stored once
        assert st.has("k1") and not st.has("nope") and len(st) == 3
    with ResultStore(path, readonly=True) as st:
        assert st.context() == ctx
        assert st.record("k1").gflops == 2.0 and st.record("nope") is None
        assert [r.key for r in st.best_records(5)] == ["k2", "k1"]
        assert st.counts() == {"ok": 2, "rejected:local-memory": 1}
        assert st.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with ResultStore(path) as st:
        st.bind(ctx)  # same context: fine
        for other in (Context("p", "xyz", {"N": 64}, DEV), Context("p", "abc", {"N": 32}, DEV),
                      Context("p", "abc", {"N": 64}, {"name": "dev-b"})):
            with pytest.raises(StoreMismatchError, match="holds program p"):
                st.bind(other)


def test_store_user_errors(tmp_path):
    with pytest.raises(StoreError, match="no results store"):
        ResultStore(tmp_path / "missing.sqlite", readonly=True)
    (tmp_path / "junk.sqlite").write_text("not a database" * 100)
    with pytest.raises(StoreError):
        ResultStore(tmp_path / "junk.sqlite", readonly=True)
    with pytest.raises(StoreError, match="cannot"):
        ResultStore("/proc/no-such-dir/x.sqlite")
    with pytest.raises(StoreError, match="cannot open"):
        ResultStore(tmp_path)  # a directory


_WRITER = """
import sys
from mapper.explore.store import ResultStore
st = ResultStore(sys.argv[1], timeout_s=30)
for i in range(150):
    st.add({"key": f"{sys.argv[2]}-{i}", "run_id": sys.argv[2], "strategy": "s",
            "mapping": "A=0", "tuning": "{}", "status": "ok"})
    st.add({"key": f"shared-{i}", "run_id": sys.argv[2], "strategy": "s",
            "mapping": "A=0", "tuning": "{}", "status": "ok"})
"""


def test_two_writers_at_once(tmp_path):
    path = str(tmp_path / "w.sqlite")
    ResultStore(path).close()
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, path, name], cwd=ROOT)
             for name in ("a", "b")]
    assert [p.wait(60) for p in procs] == [0, 0]
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 450


# ------------------------------------------------------------------ strategies


@pytest.fixture(scope="module")
def joint():
    task = Task.from_program(L3, {"N": 1024})
    return task.joint()


def test_strategy_registry(joint):
    assert {"manual", "solver", "random"} <= set(STRATEGIES)
    with pytest.raises(StrategyError, match="unknown strategy .nope.; strategies: ") as e:
        get_strategy("nope")
    # every registered one is named (plug-ins too: experiments/soak_probes.py adds one)
    assert all(name in str(e.value) for name in ("manual", "model", "random", "solver"))
    with pytest.raises(StrategyError, match="needs a mapping"):
        make_strategy("manual", joint)
    with pytest.raises(StrategyError, match="not valid"):
        make_strategy("manual", joint, mapping="A=G1 B=G0 C=G0 D=S")
    with pytest.raises(StrategyError, match="takes no option"):
        make_strategy("solver", joint, colour="red")


def _take(strategy, n):
    it = strategy.candidates()
    return [next(it) for _ in range(n)]


def test_random_strategy_records_draws(joint):
    s = make_strategy("random", joint, seed=3)
    cands = _take(s, 6)
    assert all(c.draws >= 1 for c in cands)
    assert s.draws_total == sum(c.draws for c in cands)
    assert sum(c.draws for c in cands) > len(cands)  # most assignments are invalid
    assert all(c.mapping in joint.mappings for c in cands)


def test_strategies_are_seeded_and_valid(joint):
    a = [(c.mapping, c.tuning) for c in _take(make_strategy("solver", joint, seed=5), 8)]
    b = [(c.mapping, c.tuning) for c in _take(make_strategy("solver", joint, seed=5), 8)]
    assert a == b and all(m in joint.mappings for m, _ in a)
    assert all(cfg in joint.tuning(m).space for m, cfg in a)
    man = make_strategy("manual", joint, seed=1, mapping="A=W0 B=L0 C=L0 D=S")
    cands = list(man.candidates())
    assert len(cands) == joint.tuning(man.mapping).count()  # every configuration once
    assert len({json.dumps(c.tuning, sort_keys=True) for c in cands}) == len(cands)
    assert all(str(c.mapping) == str(man.mapping) for c in cands)


# ------------------------------------------------------------------ on the device


@pytest.fixture(scope="module")
def pool():
    from codegen.worker import WorkerPool

    with WorkerPool() as p:
        yield p


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_explore_resumes_without_evaluating_twice(tmp_path, pool):
    path = tmp_path / "r.sqlite"
    r1 = explore(L3, {"N": 1024}, strategy="solver", budget=2, store=path, pool=pool,
                 options=ExploreOptions.of(seed=4))
    assert (r1.evaluated, r1.cached, r1.stopped_by) == (2, 0, "budget")
    assert all(r.status for r in r1.records) and r1.best is not None
    r2 = explore(L3, {"N": 1024}, strategy="solver", budget=3, store=path, pool=pool,
                 options=ExploreOptions.of(seed=4))
    assert (r2.evaluated, r2.cached) == (1, 2)
    assert [r.key for r in r2.records[:2]] == [r.key for r in r1.records]
    assert [r.cached for r in r2.records] == [True, True, False]
    with ResultStore(path, readonly=True) as st:
        rows = st.records()
        assert len(rows) == 3
        assert sum(r.run_id == r1.run_id for r in rows) == 2
        assert {r["stopped_by"] for r in st.runs()} == {"budget"}
        for r in rows:
            assert r.wall_s > 0 and r.search_s is not None
            assert not r.ok or (r.time_s and r.source_hash and r.memory_bytes)
    r3 = explore(L3, {"N": 1024}, strategy="random", budget=1, store=path, pool=pool,
                 options=ExploreOptions.of(seed=1))
    assert r3.draws >= 1 and all(r.draws for r in r3.records if not r.cached)
    with pytest.raises(StoreMismatchError, match="use another --store"):
        explore(L3, {"N": 2048}, strategy="solver", budget=1, store=path, pool=pool)


@pytest.mark.slow
@pytest.mark.opencl
def test_explore_manual_exhausts_and_records_failures(tmp_path, pool):
    # s0 fixed: only s1 (a divisor of s0) is tuned; every configuration once, all stored
    res = explore(L3, {"N": 64, "s0": 16}, strategy="manual", mapping="A=W0 B=L0 C=L0 D=S",
                  budget=1000, store=tmp_path / "m.sqlite", pool=pool,
                  options=ExploreOptions.of(count=True))
    assert res.stopped_by == "exhausted"
    assert res.considered == res.total_candidates == res.evaluated
    with ResultStore(tmp_path / "m.sqlite", readonly=True) as st:
        assert len(st) == res.evaluated and sum(st.counts().values()) == res.evaluated


def _store_rows(path):
    return store_rows(path, "key, run_id, created")


@pytest.mark.opencl
@pytest.mark.slow
def test_sigkill_then_resume(tmp_path):
    path = str(tmp_path / "k.sqlite")
    cmd = [sys.executable, "-m", "mapper.cli", "explore", L3, "--sizes", "N=1024",
           "--budget", "12", "--store", path, "--seed", "9"]
    p = kill_when(cmd, lambda: len(_store_rows(path)) >= 4, cwd=ROOT)
    before = _store_rows(path)
    assert 4 <= len(before) < 12, p.stderr.read().decode()[-2000:]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"{12 - len(before)} evaluated, {len(before)} found in the store" in \
        " ".join(out.stdout.split())
    after = _store_rows(path)
    assert len(after) == 12 and len({k for k, _, _ in after}) == 12
    assert set(before) <= set(after)  # earlier rows kept unchanged
    with ResultStore(path, readonly=True) as st:
        stopped = [r["stopped_by"] for r in st.runs()]
    assert stopped == [None, "budget"]  # the killed run never finished


# ------------------------------------------------------------------ CLI


def _cli(capsys, *argv):
    from mapper.cli import main

    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.slow
@pytest.mark.opencl
def test_cli_explore_and_results(tmp_path, capsys):
    store = str(tmp_path / "c.sqlite")
    rc, out, err = _cli(capsys, "explore", L3, "--sizes", "N=1024", "--budget", "3",
                        "--store", store, "--strategy", "random", "--seed", "2")
    assert rc == 0, err
    text = " ".join(out.split())
    assert "3 candidate(s), 3 evaluated" in text and "random code assignments drawn" in text
    rc, out, err = _cli(capsys, "results", store, "--csv", str(tmp_path / "c.csv"))
    assert rc == 0, err
    text = " ".join(out.split())
    assert "cc22_listing3.lift" in text and "N=1024" in text and "Outcomes" in text
    assert "3 candidate(s) in 1 run(s)" in text
    assert len((tmp_path / "c.csv").read_text().splitlines()) == 4
    rc, out, _ = _cli(capsys, "results", store, "--json")
    doc = json.loads(out)
    assert rc == 0 and len(doc["rows"]) == 3 and sum(doc["counts"].values()) == 3
    assert doc["meta"]["program"] == "cc22_listing3.lift"
    assert (doc["command"], doc["context"]["sizes"]) == ("results", {"N": 1024})
    assert all(set(r["mapping"]) == set("ABCD") and isinstance(r["tuning"], dict)
               for r in doc["rows"])


def test_cli_explore_user_errors(tmp_path, capsys):
    cases = [
        (["--budget", "0"], "budget must be a positive"),
        (["--budget", "-5"], "budget must be a positive"),
        (["--budget", "soon"], "cannot read budget"),
        (["--strategy", "genetic"], "unknown strategy 'genetic'"),
        (["--strategy", "manual"], "needs --mapping"),
        (["--store", "/proc/nope/x.sqlite"], "cannot"),
    ]
    for extra, msg in cases:
        rc, out, err = _cli(capsys, "explore", L3, "--sizes", "N=1024",
                            "--store", str(tmp_path / "e.sqlite"), *extra)
        assert rc == 2 and msg in err, (extra, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    rc, _, err = _cli(capsys, "results", str(tmp_path / "none.sqlite"))
    assert rc == 2 and "no results store" in err


def test_candidate_dataclass():
    from mapper.encoding import MapCodes

    c = Candidate(MapCodes({"A": 20}), {"s0": 4})
    assert c.draws is None and c.search_s == 0.0
    c = Candidate(MapCodes({"A": 20}), {}, mapping_s=1.0, tuning_s=0.25, other_s=0.5)
    assert c.search_s == 1.75


# ------------------------------------------------------------------ without a device


class FakePool:
    """A pool that lowers each candidate in-process and calls it ok (no device)."""

    size = 1

    def device_info(self):
        return {"limits": {"name": "fake-device"}}

    def evaluate_candidate(self, lower_fn, inputs, reference, **kw):
        from codegen.program import Outcome

        t0 = time.perf_counter()
        assert lower_fn().kernels
        return Outcome("ok", time_s=1e-3, gflops=1.0, lower_s=time.perf_counter() - t0,
                       build_s=0.0)

    def close(self):
        pass


def test_the_repeats_budget_follows_the_best_kernel_time():
    """The first candidate's timed repeats get ``run_budget_s``; once one ran ok, the
    budget is ``cut`` x ``repeats`` x its kernel time (1 ms here), so a candidate that
    cannot win costs one execution, not the default budget's several."""
    budgets = []

    class Recording(FakePool):
        def evaluate_candidate(self, lower_fn, inputs, reference, **kw):
            budgets.append(kw.get("run_budget_s"))
            return super().evaluate_candidate(lower_fn, inputs, reference, **kw)

    explore(L3, {"N": 1024}, strategy="solver", budget=3, pool=Recording(),
            options=ExploreOptions.of(count=False, retime=0, cut=2.0, repeats=4, run_budget_s=1.0))
    assert budgets == [1.0, pytest.approx(8e-3), pytest.approx(8e-3)]
    budgets.clear()
    explore(L3, {"N": 1024}, strategy="solver", budget=2, pool=Recording(),
            # no cut: the fixed budget only
            options=ExploreOptions.of(count=False, retime=0, cut=None, run_budget_s=1.0))
    assert budgets == [1.0, 1.0]


def test_split_search_time_heuristics_and_fusion_are_recorded(tmp_path):
    """Rows split the search into finding the mapping and choosing the tuning values;
    the store's meta and the run's options record fusion and heuristics; mappings only a
    heuristic rejects are explored and lowered when heuristics are off."""
    from mapper.api import check_mapping

    path = tmp_path / "h.sqlite"
    res = explore(L3, {"N": 1024}, strategy="solver", budget=12, store=path, pool=FakePool(),
                  options=ExploreOptions.of(seed=1, heuristics=False, fusion="free", count=False))
    assert (res.stopped_by, res.evaluated, res.total_candidates) == ("budget", 12, None)
    with ResultStore(path, readonly=True) as st:
        meta, rows, (run,) = st.meta(), st.records(), st.runs()
    assert (meta["fusion"], meta["heuristics"]) == ("free", "off")
    assert json.loads(run["options"])["heuristics"] == "off"
    assert run["mapping_s"] > 0  # the valid mappings' enumeration, before any candidate
    for r in rows:
        assert r.mapping_s >= 0 and r.tuning_s > 0
        assert r.search_s == pytest.approx(r.mapping_s + r.tuning_s)
    heuristic_only = [r for r in rows if check_mapping(L3_PROGRAM, r.mapping, fusion="free")]
    assert heuristic_only, "a seed whose candidates include heuristic-only mappings"
    counted = explore(L3, {"N": 1024}, strategy="solver", budget=1, pool=FakePool(),
                      options=ExploreOptions.of(count=True))
    assert counted.total_candidates and counted.total_candidates > 1


def test_joint_space_and_task_with_heuristics_off():
    from mapper.tuning import JointSpace

    on = Task.from_program(L3, {"N": 1024})
    off = Task.from_program(L3, {"N": 1024}, heuristics=False)
    assert off.heuristics is False and off.joint().heuristics is False
    assert set(on.joint().mappings) < set(off.joint().mappings)
    js = JointSpace(L3_PROGRAM, {"N": 1024}, heuristics=False)
    assert len(js.mappings) == len(off.joint().mappings) and js.enumerate_s > 0


@pytest.fixture(scope="module")
def conv_task():
    from ir.conv_layer import parse_layer

    return Task.conv_layer(parse_layer("19/8"))


def test_random_strategy_ends_at_its_draw_limit_or_deadline(conv_task):
    """About 1 in 1e9 code assignments of the convolution is valid: the strategy gives up
    with its reason, counting every draw, instead of raising."""
    from mapper.explore.strategies import RandomAssignment

    joint = conv_task.joint()
    s = make_strategy("random", joint, seed=0)
    s.max_draws = 3000
    assert list(s.candidates()) == []
    assert s.stopped_by == "exhausted: no valid candidate in 3,000 draws"
    assert s.draws_total == 3000
    s = make_strategy("random", joint, seed=0)
    s.deadline = time.perf_counter() - 1.0
    assert list(s.candidates()) == [] and s.stopped_by == "time"
    assert s.draws_total == RandomAssignment.check_every


def test_explore_random_ends_cleanly_within_the_time_budget(tmp_path, conv_task,
                                                            monkeypatch):
    from codegen.target import Device
    from mapper.explore.strategies import RandomAssignment

    # the time budget, not the draw limit, ends the run, however fast the host draws;
    # the joint space built first, so that a loaded host still draws within the budget
    monkeypatch.setattr(RandomAssignment, "max_draws", 10 ** 9)
    conv_task.joint(Device.from_limits(FakePool().device_info()["limits"]))
    path = tmp_path / "r.sqlite"
    res = explore(conv_task, strategy="random", budget="1.5s", store=path, pool=FakePool(),
                  options=ExploreOptions.of(count=False))
    assert (res.stopped_by, res.considered) == ("time", 0)
    assert res.draws >= 1 and res.mapping_s > 0  # the fruitless search is accounted for
    with ResultStore(path, readonly=True) as st:
        (run,) = st.runs()
    assert (run["stopped_by"], run["draws"]) == ("time", res.draws)
    assert run["mapping_s"] == pytest.approx(res.mapping_s)


def test_explore_random_at_its_draw_limit(tmp_path, conv_task, monkeypatch):
    from mapper.explore.strategies import RandomAssignment

    monkeypatch.setattr(RandomAssignment, "max_draws", 2000)
    res = explore(conv_task, strategy="random", budget=5, store=tmp_path / "d.sqlite",
                  pool=FakePool(), options=ExploreOptions.of(count=False))
    assert res.stopped_by == "exhausted: no valid candidate in 2,000 draws"
    assert res.draws == 2000 and res.considered == 0
    assert "random code assignments drawn: 2000" in res.summary()


def test_old_stores_without_the_split_columns_still_read(tmp_path):
    """A store written before mapping_s/tuning_s and runs.mapping_s: read-only, they read
    as None; opened for writing, they are added."""
    path = str(tmp_path / "old.sqlite")
    db = sqlite3.connect(path)
    old = [c for c in store_columns() if c[0] not in ("mapping_s", "tuning_s")]
    db.execute(f"CREATE TABLE results ({', '.join(f'{c} {t}' for c, t in old)})")
    db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)")
    db.execute("CREATE TABLE runs (run_id TEXT PRIMARY KEY, strategy TEXT, seed INTEGER, "
               "budget TEXT, options TEXT, started REAL, finished REAL, stopped_by TEXT, "
               "evaluated INTEGER, cached INTEGER, draws INTEGER)")
    db.execute("INSERT INTO results (key, run_id, strategy, mapping, tuning, status, search_s)"
               " VALUES ('k0', 'r0', 'solver', 'A=20', '{}', 'ok', 0.5)")
    db.execute("INSERT INTO runs (run_id, strategy, stopped_by) VALUES ('r0', 'solver', "
               "'budget')")
    db.commit()
    db.close()
    with ResultStore(path, readonly=True) as st:
        (row,) = st.records()
        assert (row.search_s, row.mapping_s, row.tuning_s) == (0.5, None, None)
        assert st.record("k0").tuning_s is None and st.best_records()[0].key == "k0"
        assert st.runs()[0]["mapping_s"] is None
    with ResultStore(path) as st:
        assert st.add({**_row("k1"), "search_s": 0.3, "mapping_s": 0.1, "tuning_s": 0.2})
        st.finish_run("r0", "budget", 1, 0, None, 0.25)
        assert st.record("k1").tuning_s == 0.2 and st.runs()[0]["mapping_s"] == 0.25
        assert st.meta()["schema_version"] == "3"


def store_columns():
    from mapper.explore.store import COLUMNS

    return COLUMNS


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_model_strategy_learns_from_observations(joint):
    s = make_strategy("model", joint, seed=0, pool_size=150, n_init=8, batch=4)
    it = s.candidates()
    late = []
    for i in range(32):
        c = next(it)
        assert c.mapping in joint.mappings and c.tuning in joint.tuning(c.mapping).space
        ok = c.mapping["A"] >= 20  # a hidden constraint: only work-group/global mappings
        s.observe(c, observed("ok" if ok else "rejected",
                              float(c.tuning["s0"]) if ok else None))
        if i >= 20:
            late.append((ok, c.tuning["s0"]))
    assert sum(ok for ok, _ in late) >= 10  # learned the feasibility
    assert sum(s0 for _, s0 in late) / len(late) >= 256  # and that a larger s0 is faster


def test_model_strategy_takes_cut_candidates_as_slow_not_infeasible(joint):
    from mapper.explore.model import SLOW

    s = make_strategy("model", joint, seed=0, pool_size=150, n_init=8, batch=4)
    it = s.candidates()
    for _ in range(12):
        c = next(it)
        big = c.tuning["s0"] >= 64
        s.observe(c, observed("ok" if big else "timeout",
                              float(c.tuning["s0"]) if big else None))
    assert SLOW in s.y and None not in s.y  # a cut candidate ran: it is only slow
    assert all(isinstance(y, float) for y, c in zip(s.y, s.X) if y != SLOW)


def test_model_strategy_trees_split_on_a_third_of_the_features(joint):
    """The regressor's trees each consider a random third of the features per split, so
    they disagree where the data do not decide (the acquisition's uncertainty)."""
    s = make_strategy("model", joint, seed=0, pool_size=150, n_init=8, batch=4)
    it = s.candidates()
    for _ in range(13):
        c = next(it)
        s.observe(c, observed("ok", float(c.tuning["s0"])))
    reg = s.regressor
    n = reg.n_features_in_
    assert reg is not None and len(reg.estimators_) == 100
    assert all(t.max_features_ == max(1, int(n / 3)) < n for t in reg.estimators_)


# ------------------------------------------------------------------ replay (no device)


@pytest.fixture(scope="module")
def synthetic_store(tmp_path_factory, joint):
    """A store of 60 candidates of Listing 3 with made-up outcomes (no device)."""
    path = tmp_path_factory.mktemp("replay") / "syn.sqlite"
    task = Task.from_program(L3, {"N": 1024})
    with ResultStore(path) as st:
        st.bind(Context("syn", task.program_hash, task.sizes, DEV),
                {"explored_program": task.explored_text, "fusion": "always"})
        s = make_strategy("solver", joint, seed=11)
        it, keys = s.candidates(), set()
        while len(keys) < 60:
            c = next(it)
            key = candidate_key(task.text, task.sizes, c.mapping, c.tuning, DEV, "t")
            if key in keys:
                continue
            keys.add(key)
            ok = c.mapping["A"] != 0
            st.add({"key": key, "run_id": "syn", "strategy": "solver", "seed": 11,
                    "mapping": " ".join(f"{k}={v}" for k, v in c.mapping.items()),
                    "tuning": json.dumps(c.tuning, sort_keys=True),
                    "status": "ok" if ok else "wrong-result",
                    "gflops": float(c.tuning["s0"]) if ok else None, "wall_s": 0.5})
    return str(path)


def test_replay_each_strategy_sees_each_stored_candidate_once(synthetic_store):
    from mapper.explore.replay import compare, load_space, replay

    space, _ = load_space(synthetic_store)
    assert space.count() == 60
    for name, n in (("solver", 60), ("random", 25), ("manual", None)):
        opts = {"mapping": next(iter(space.mappings))} if name == "manual" else {}
        res = replay(space, name, seed=2, budget=n, **opts)
        keys = [r.key for r in res.records]
        assert len(keys) == len(set(keys)) == (n or space.tuning(opts["mapping"]).count())
    assert replay(space, "random", seed=2, budget=5).draws >= 5
    timed = replay(space, "solver", seed=1, budget="3s")  # simulated: 0.5 s a candidate
    assert timed.stopped_by == "time" and timed.considered == 6
    c = compare(synthetic_store, ["solver", "random"], seeds=3)
    assert c.best == max(r.gflops or 0 for r in space.records.values())
    assert all(len(v) == 3 and all(x is not None for x in v) for v in c.evaluations.values())
    later = compare(synthetic_store, ["solver"], seeds=2, first_seed=1)  # seeds 1 and 2
    assert later.evaluations["solver"] == c.evaluations["solver"][1:]


def test_replay_of_the_model_strategy_reads_kernel_features(synthetic_store):
    """The model replays over a store: the replay space gives each stored mapping the
    lowered kernel's symbolic features, from the store's sizes."""
    from mapper.explore.replay import load_space, replay

    space, _ = load_space(synthetic_store)
    m = next(m for m in space.mappings if m["A"] >= 30)
    assert "work_items" in space.tuning(m).features
    res = replay(space, "model", seed=1, budget=30, n_init=5, batch=5)
    assert len({r.key for r in res.records}) == 30


def test_cli_results_compare(synthetic_store, capsys):
    rc, out, err = _cli(capsys, "results", synthetic_store, "--compare", "solver,random",
                        "--seeds", "2")
    assert rc == 0, err
    assert "Replay of 60 stored candidates" in " ".join(out.split()) and "random" in out
    rc, _, err = _cli(capsys, "results", synthetic_store, "--compare", "solver,annealing")
    assert rc == 2 and "unknown strategy 'annealing'" in err


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.opencl
def test_early_cut_relative_to_the_best(tmp_path, pool):
    # 4 MiB of input: no run part (upload, runs, read-back, comparison) ends within the
    # millisecond a pipe's poll resolves
    res = explore(L3, {"N": 1 << 20}, strategy="solver", budget=2, pool=pool,
                  options=ExploreOptions.of(seed=4, cut=1e-6, cut_min_s=1e-6, retime=0))
    first, second = res.records
    assert first.ok
    assert (second.status, second.check, second.label) == ("timeout", "early-cut", "timeout")
    assert "the best candidate's" in second.reason


@pytest.mark.opencl
@pytest.mark.slow
def test_cli_explore_conv_pipeline(tmp_path, capsys):
    store = str(tmp_path / "conv.sqlite")
    # the solver strategy: the model's start-up (its initial design, ~15 s on a loaded
    # machine) is not what this test is about; the CLI's conv tasks and stores are
    solver = ("--strategy", "solver")
    rc, out, err = _cli(capsys, "explore", "conv", "--layer", "19/8", "--budget", "1",
                        "--store", store, "--timeout", "120", *solver)
    assert rc == 0, err
    assert "1 candidate(s), 1 evaluated" in " ".join(out.split())
    rc, out, err = _cli(capsys, "results", store)
    assert rc == 0 and "conv:vgg16-19,21/8" in out and "H=3" in out
    # the kernel-vectorised variant alone: its own store, beside the first
    rc, out, err = _cli(capsys, "explore", "conv", "--layer", "0/16", "--budget", "1",
                        "--store", store, "--vectorise", "kernels", "--json", *solver)
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["store"] == str(tmp_path / "conv.kernels.sqlite") and doc["candidates"] == 1
    assert "variants" not in doc  # one variant: nothing probed
    rc, out, err = _cli(capsys, "results", doc["store"])
    assert rc == 0 and "conv:vgg16-0/16:kernels" in out and "C=3" in out


def test_cli_vectorise_goes_with_conv(capsys):
    rc, _, err = _cli(capsys, "explore", L3, "--sizes", "N=1024", "--vectorise", "kernels")
    assert rc == 2 and "--vectorise goes with the program name conv" in err
    with pytest.raises(SystemExit) as info:  # argparse's own refusal
        _cli(capsys, "explore", "conv", "--vectorise", "lanes")
    assert info.value.code == 2 and "invalid choice: 'lanes'" in capsys.readouterr().err


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_explore_with_parallel_workers_evaluates_each_candidate_once(tmp_path):
    """Two workers: the budget holds, every candidate is stored once, the same store then
    replays them all from the cache."""
    path = tmp_path / "w.sqlite"
    r = explore(L3, {"N": 1024}, strategy="solver", budget=6, store=path,
                options=ExploreOptions.of(seed=2, workers=2))
    assert r.stopped_by == "budget" and len(r.records) == 6 and r.evaluated == 6
    assert len({row.key for row in r.records}) == 6
    again = explore(L3, {"N": 1024}, strategy="solver", budget=6, store=path,
                    options=ExploreOptions.of(seed=2))
    assert (again.evaluated, again.cached) == (0, 6)
    with pytest.raises(ConfigurationError, match="workers must be at least 1"):
        explore(L3, {"N": 1024}, budget=1, options=ExploreOptions.of(workers=0))


def test_model_features_include_the_lowered_kernel(joint):
    """The model reads the kernel's work-items and private bytes from the lowering's
    symbolic features, so two tunings of one mapping differ in them."""
    from mapper.explore.model import ModelStrategy

    s = make_strategy("model", joint, seed=0)
    # A=mapGlb, the maps inside sequential: the work-items depend on s0
    m = next(m for m in joint.mappings if m["A"] >= 30 and m["B"] < 10 and m["C"] < 10)
    feats = joint.tuning(m).features
    assert {"work_items", "private_bytes", "global_bytes"} <= set(feats)
    cfgs = sorted(joint.tuning(m).space, key=lambda c: c["s0"])
    lo, hi = s.kernel_features(m, cfgs[0]), s.kernel_features(m, cfgs[-1])
    wi = ModelStrategy.KERNEL_FEATURES.index("work_items")
    assert lo[wi] != hi[wi] and lo[wi] > 0
    assert len(s.features(m, cfgs[0])) == len(s._matrix([s.features(m, cfgs[0])])[0])


@pytest.mark.perf
def test_explore_random_time_budget_is_kept(tmp_path, conv_task):
    t0 = time.perf_counter()
    res = explore(conv_task, strategy="random", budget="1.5s", store=None, pool=FakePool(),
                  options=ExploreOptions.of(count=False))
    assert time.perf_counter() - t0 < 1.5 + 5.0  # the budget, and start-up
    assert res.draws > 1000 and res.mapping_s >= 1.0


@pytest.mark.slow
@pytest.mark.opencl
def test_the_model_strategy_explores_a_program_with_nothing_to_tune() -> None:
    """Every size given (a stencil pipeline at a fixed image size): the only tuning left is
    the vector widths of the maps and reductions in lanes (1: none), and the model's local
    search moves maps (it used to ask the empty tuning problem for its space and end in a
    traceback)."""
    res = explore(os.path.join(ROOT, "examples", "blur_laplacian.lift"), {"H": 18, "W": 18},
                  budget=20,  # past the initial design: the fitted model's climb
                  options=ExploreOptions.of(retime=0))
    assert res.counts["ok"] >= 16 and res.stopped_by == "budget", res.counts
    widths = {f"{p}{m}" for p in "vu" for m in "ABCDEFGH"} | {f"rv{k}" for k in range(1, 9)}
    assert all(set(r.tuning) <= widths for r in res.records)


def test_the_model_scores_a_candidate_whose_parameter_it_met_after_its_fit():
    # a mapping's own tuning parameters (a row block's uA) may first appear after a fit:
    # the fitted forests predict without that column until the next fit, not crash
    task = Task.from_program(os.path.join(os.path.dirname(__file__), "..", "examples",
                                          "matmul_plain.lift"), {"M": 64, "N": 64, "K": 64})
    joint = task.joint()
    s = make_strategy("model", joint, seed=0, pool_size=40, n_init=4, batch=4)
    plain = [m for m in joint.mappings if "uA" not in joint.tuning(m).params]
    rowed = next(m for m in joint.mappings if "uA" in joint.tuning(m).params)
    k = 0
    for m in plain[:6]:
        for t in list(joint.tuning(m).space)[:2]:
            k += 1
            s.observe(Candidate(m, dict(t)),
                      observed("ok" if k % 3 else "crash", float(k)))
    s._fit()
    assert s.regressor is not None and "uA" not in s.params
    t = dict(next(iter(joint.tuning(rowed).space)))
    scores = s._score([(rowed, t)])
    assert "uA" in s.params and len(scores) == 1 and scores[0] == scores[0]  # not NaN


def test_the_driver_s_blas_and_openmp_threads_are_held_to_one_while_kernels_are_timed():
    """Their idle threads spin-wait after each call on the cores the kernels run on; the
    limit holds during the run and is lifted after it."""
    from threadpoolctl import threadpool_info

    seen = []

    class Watching(FakePool):
        def evaluate_candidate(self, lower_fn, inputs, reference, **kw):
            seen.append({p["internal_api"]: p["num_threads"] for p in threadpool_info()})
            return super().evaluate_candidate(lower_fn, inputs, reference, **kw)

    before = {p["internal_api"]: p["num_threads"] for p in threadpool_info()}
    assert before, "numpy's BLAS is not seen by threadpoolctl"
    explore(L3, {"N": 1024}, strategy="solver", budget=2, pool=Watching(),
            options=ExploreOptions.of(count=False, retime=0))
    assert seen and all(set(s.values()) == {1} for s in seen)
    assert {p["internal_api"]: p["num_threads"] for p in threadpool_info()} == before
