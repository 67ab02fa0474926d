"""The Ray evaluator against a real local Ray cluster: a head and two worker nodes on this
machine (one CPU each: one device actor each), started here and stopped at the end.

It gives the outcomes the local evaluator gives on the same candidates; the store it
writes resumes with local workers; an actor killed with a candidate in flight costs a
retry elsewhere and nothing else (no candidate lost, none stored twice); one lost twice
is stored once as ``lost``; a node whose device differs is refused or left out; a node
lost mid-run and a driver killed mid-run leave a complete, resumable store.

Skipped only where Ray cannot be imported (CI installs the ``cluster`` extra); with
``LIFTMAP_REQUIRE_RAY`` set, a missing Ray fails instead of skipping.
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest
from killing import kill_when, store_rows

from mapper.explore.options import ExploreOptions

if os.environ.get("LIFTMAP_REQUIRE_RAY"):  # CI sets it: there, a missing Ray is a failure
    import ray
else:
    ray = pytest.importorskip("ray", reason="Ray is not installed: the Ray evaluator is the "
                              "optional extra liftmap[cluster] (pip install 'ray>=2.30')")

from ir.programs import cc22_listing3  # noqa: E402
from mapper.explore import ResultStore, Task, explore  # noqa: E402
from mapper.explore.ray_pool import (  # noqa: E402
    DeviceMismatchError,
    RayClusterError,
    RayPool,
)

pytestmark = [pytest.mark.opencl]

ROOT = os.path.join(os.path.dirname(__file__), "..")
L3 = os.path.join(ROOT, "examples", "cc22_listing3.lift")
SIZES = {"N": 1024}
TINY = os.path.join(ROOT, "tests", "data", "figures",
                    "fig6-layer19-scale8-fusion-always-heuristics-on.sqlite")
# no early cut and no re-timing: the outcomes do not depend on the machine's load
OPTIONS = ExploreOptions.of(seed=3, cut=None, retime=0, timeout_s=120.0)
RUN = dict(strategy="solver", options=OPTIONS)


# the nodes' CUDA_VISIBLE_DEVICES, which Ray empties in an actor that asks for no GPU (with
# RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1, as by default in its versions before 2026): a device
# actor's worker processes see this value (PoCL, the tests' device, ignores it)
NODE_CUDA = os.environ.get("CUDA_VISIBLE_DEVICES") or "0"
# the head notices a node's death within about 1.5 s (by default 15 s: 5 health checks
# 3 s apart); a live node that is slow to answer has the default 10 s per check
HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 3}


@pytest.fixture(scope="module")
def cluster():
    """A head and two worker nodes (raylets) on this machine, one CPU each. Ray's memory
    monitor is off in them: on a machine whose memory others' tests fill, it would kill
    the actors on every node at once (the tests kill actors themselves)."""
    from ray.cluster_utils import Cluster

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAY_memory_monitor_refresh_ms", "0")  # inherited by the nodes
        mp.setenv("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "1")
        mp.setenv("CUDA_VISIBLE_DEVICES", NODE_CUDA)
        c = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "include_dashboard": False, "_system_config": HEALTH})
        try:
            for _ in range(2):
                c.add_node(num_cpus=1)
            c.wait_for_nodes()
            ray.init(address=c.address, log_to_driver=False, logging_level=logging.ERROR)
            yield c
        finally:
            ray.shutdown()
            c.shutdown()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    """The reference: the same exploration with local workers."""
    path = tmp_path_factory.mktemp("local") / "local.sqlite"
    return explore(cc22_listing3(), SIZES, budget=6, store=path, **RUN)


def _statuses(res) -> dict[str, str]:
    return {r.key: r.label for r in res.records}


def _rows(path) -> list[tuple[str, str]]:
    return store_rows(path, "key, status")


def _remove(cluster, node) -> None:
    """Removes ``node`` (if still there) and waits until Ray lists it as dead, so that the
    next test's pool does not place an actor on it (the death of a node that vanishes
    between the listing and the placement is the pool's own test)."""
    if node in cluster.worker_nodes:
        cluster.remove_node(node)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(
            n["NodeID"] == node.node_id and n["Alive"] for n in ray.nodes()):
        time.sleep(0.5)


def _start_environ(pid: int) -> dict[str, str]:
    """The environment process ``pid`` started with."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        return dict(kv.decode().partition("=")[::2] for kv in f.read().split(b"\0") if kv)


def _kill_on(pool: RayPool, when) -> list[int]:
    """Wraps ``pool``'s dispatch: after sending a candidate for which ``when(slot,
    lower_fn)`` holds, the actor's process is killed (SIGKILL) with it in flight. Returns
    the list of killed pids (filled as it goes)."""
    killed: list[int] = []
    send = pool._submit

    def submit(slot, lower_fn, data, timeout_s, kw):
        ref = send(slot, lower_fn, data, timeout_s, kw)
        if when(slot, lower_fn):
            killed.append(slot.actor.pid)
            os.kill(slot.actor.pid, signal.SIGKILL)
        return ref

    pool._submit = submit  # type: ignore[method-assign]
    return killed


def test_without_ray_the_error_says_what_to_install(monkeypatch, tmp_path, capsys):
    from mapper.cli import main
    from mapper.explore.ray_pool import RayUnavailableError

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray fails, as where not installed
    with pytest.raises(RayUnavailableError, match=r"pip install 'liftmap\[cluster\]'"):
        RayPool()
    store = tmp_path / "none.sqlite"
    rc = main(["explore", L3, "--sizes", "N=1024", "--store", str(store), "--ray"])
    assert rc == 2 and "liftmap[cluster]" in capsys.readouterr().err
    assert not store.exists()  # nothing was started, nothing written


def test_an_address_where_nothing_answers_is_one_error_at_once(tmp_path):
    store = tmp_path / "none.sqlite"
    out = _mapper("explore", L3, "--sizes", "N=1024", "--store", str(store), "--ray",
                  "127.0.0.1:1")  # Ray itself would retry for many minutes
    assert out.returncode == 2 and "nothing answers at the Ray cluster address" in \
        out.stderr, out.stderr
    assert not store.exists()


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_ray_and_local_evaluators_agree_and_the_store_resumes_locally(cluster, local_run,
                                                                      tmp_path):
    path = tmp_path / "ray.sqlite"
    remote = explore(cc22_listing3(), SIZES, budget=6, store=path, strategy="solver",
                     options=OPTIONS.but(ray=cluster.address))
    assert ray.is_initialized()  # a connection made by the caller stays open
    assert remote.evaluated == local_run.evaluated == 6
    assert _statuses(remote) == _statuses(local_run)  # same device, same candidates
    rows = _rows(path)
    assert len(rows) == 6 and len({k for k, _ in rows}) == 6  # written by the driver only
    again = explore(cc22_listing3(), SIZES, budget=8, store=path, **RUN)  # local workers
    assert (again.evaluated, again.cached) == (2, 6)


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
def test_a_local_store_resumes_on_ray(cluster, local_run, tmp_path):
    """The other way round: a store written with local workers is continued on the
    cluster, which evaluates only the candidates it does not hold."""
    path = tmp_path / "from-local.sqlite"
    shutil.copy(local_run.store_path, path)
    more = explore(cc22_listing3(), SIZES, budget=8, store=path, strategy="solver",
                   options=OPTIONS.but(ray=cluster.address))
    assert (more.evaluated, more.cached) == (2, 6)
    assert [r.key for r in more.records[:6]] == [r.key for r in local_run.records]
    rows = _rows(path)
    assert len(rows) == 8 and len({k for k, _ in rows}) == 8


def _simulated_run(n: int, tmp_path, time_scale: float = 0.01
                   ) -> tuple[object, dict[int, list], object]:
    """The tiny committed store explored on ``n`` simulated device actors on the head
    node (``RayPool(backend=SimulatedDevice.backend(...))``): the results, the stored
    outcomes of the candidates each actor got, and the stored outcomes."""
    from mapper.explore.simulate import ReplayTask, SimulatedDevice, StoredOutcomes

    outs = StoredOutcomes.load(TINY)
    task = ReplayTask.from_store(TINY)
    got: dict[int, list] = {}
    head = ray.get_runtime_context().get_node_id()
    with RayPool([f"sim:{i}" for i in range(n)], nodes=[head], workers_per_device=1,
                 backend=SimulatedDevice.backend(outs, time_scale=time_scale)) as pool:
        assert pool.size == n and pool.describe().startswith(f"Ray: {n} device actor(s)")
        send = pool._submit
        # the first n candidates wait for each other: each is on its own actor (sent to the
        # least-loaded one while the others are busy), however loaded the machine is
        start = threading.Barrier(n, timeout=120)
        ticket = itertools.count(1)  # next() is atomic: one number per thread

        def submit(slot, lower_fn, data, timeout_s, kw):
            got.setdefault(slot.actor.index, []).append(outs[lower_fn.key])
            if next(ticket) <= n:
                start.wait()
            return send(slot, lower_fn, data, timeout_s, kw)

        pool._submit = submit  # type: ignore[method-assign]
        res = explore(task, budget=12, store=tmp_path / f"sim{n}.sqlite", pool=pool,
                      strategy="solver", options=ExploreOptions.of(seed=1, cut=None, retime=0))
    return res, got, outs


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_simulated_devices_on_ray_share_the_work(cluster, tmp_path):
    """The benchmark's mechanism: stored outcomes come back through the actors, and two
    simulated devices finish the same candidates sooner than one in simulated time (each
    device's stored seconds, summed: no wall clock)."""
    one, got1, outs = _simulated_run(1, tmp_path)
    two, got2, _ = _simulated_run(2, tmp_path)
    for res in (one, two):
        assert res.evaluated == 12 and len(outs) == 12
        for r in res.records:
            assert r.status == outs[(tuple(sorted(r.mapping.items())),
                                     tuple(sorted(r.tuning.items())))].outcome.status
    assert {(r.mapping, r.tuning) for r in one.records} == \
        {(r.mapping, r.tuning) for r in two.records}  # the same exploration
    span1 = max(sum(s.total_s for s in got) for got in got1.values())
    span2 = max(sum(s.total_s for s in got) for got in got2.values())
    assert len(got2) == 2 and sum(len(g) for g in got2.values()) == 12
    assert span1 == pytest.approx(sum(s.total_s for s in outs.values()))
    assert span2 < span1


@pytest.mark.perf
def test_two_simulated_devices_run_at_their_scheduled_rate(cluster, tmp_path):
    """A wall-clock claim (run with --perf on an idle machine): on two simulated devices
    with the stored times unscaled, the run ends within 20% (and half a second) of the
    busier device's stored seconds: the driver and Ray add little per candidate."""
    res, got, _ = _simulated_run(2, tmp_path, time_scale=1.0)
    span = max(sum(s.total_s for s in g) for g in got.values())
    assert res.elapsed_s <= 1.2 * span + 0.5, (res.elapsed_s, span)


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
def test_timed_runs_take_turns_on_a_device(cluster, local_run):
    """One device actor with two worker processes: they lower and build side by side, and
    their timed runs never overlap (the device is to one kernel at a time)."""
    task = Task.from_program(cc22_listing3(), SIZES)
    head = ray.get_runtime_context().get_node_id()  # the driver's node
    with RayPool(nodes=[head], workers_per_device=2) as pool:
        assert pool.size == 2 and len(pool.actors) == 1
        fns = [task.lower_fn(r.mapping, r.tuning) for r in local_run.records]
        with ThreadPoolExecutor(pool.size) as ex:
            outs = list(ex.map(lambda f: pool.evaluate_candidate(
                f, task.inputs, task.reference, timeout_s=120, repeats=20, flops=task.flops,
                **task.tolerance), fns))
    assert [o.status for o in outs] == [r.status for r in local_run.records]
    windows = sorted(o.run_window for o in outs if o.run_window)
    assert len(windows) == len(outs)
    assert all(a[1] <= b[0] for a, b in zip(windows, windows[1:])), windows


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_an_actor_killed_mid_candidate_loses_nothing(cluster, local_run, tmp_path):
    """The second candidate's actor is killed right after it was sent: the candidate is
    retried on another actor, every candidate is stored once, none is lost, the outcomes
    are the local ones, and Ray's restart of the actor brings it back into use."""
    path = tmp_path / "kill.sqlite"
    sent = Counter[str]()

    def second(slot, lower_fn):
        sent["n"] += 1
        return sent["n"] == 2

    with RayPool(revive_s=60) as pool:
        assert len(pool.actors) == 3  # one per node: the head and two worker nodes
        assert len({a.node_id for a in pool.actors}) == 3
        assert pool.size == sum(a.workers for a in pool.actors) == 3
        assert "3 device actor(s) with 3 worker process(es) on 3 node(s)" in pool.describe()
        if sys.platform == "linux":  # each worker sees its node's GPUs, not Ray's empty list
            assert {_start_environ(a.info["pid"]).get("CUDA_VISIBLE_DEVICES")
                    for a in pool.actors} == {NODE_CUDA}
        killed = _kill_on(pool, second)
        res = explore(cc22_listing3(), SIZES, budget=6, store=path, pool=pool, **RUN)
        assert len(killed) == 1
        assert (pool.retried, pool.lost) == (1, 0), pool.incidents
        [victim] = [a for a in pool.actors if a.failures]
        deadline = time.monotonic() + 60
        while victim.state != "up" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert victim.state == "up" and victim.pid != killed[0]  # restarted by Ray
    assert res.evaluated == 6 and "lost" not in res.counts
    assert _statuses(res) == _statuses(local_run)
    rows = _rows(path)
    assert len(rows) == 6 and len({k for k, _ in rows}) == 6


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_a_candidate_lost_twice_is_stored_once_as_lost(cluster, tmp_path):
    """The first candidate's actor is killed, and the actor of its retry too: it is the
    outcome lost, stored once; the others are evaluated; a resumed run does not evaluate
    it again."""
    path = tmp_path / "lost.sqlite"
    first: list = []

    def that_candidate(slot, lower_fn):
        if not first:
            first.append(lower_fn)
        return lower_fn is first[0]

    with RayPool() as pool:
        killed = _kill_on(pool, that_candidate)
        res = explore(cc22_listing3(), SIZES, budget=6, store=path, pool=pool, **RUN)
        assert len(killed) == 2 and (pool.retried, pool.lost) == (1, 1), pool.incidents
    assert res.counts["lost"] == 1 and res.evaluated == 6
    [lost] = [r for r in res.records if r.status == "lost"]
    assert "lost in flight, 2 time(s)" in (lost.reason or "")
    rows = _rows(path)
    assert len(rows) == 6 and len({k for k, _ in rows}) == 6
    again = explore(cc22_listing3(), SIZES, budget=6, store=path, **RUN)
    assert (again.evaluated, again.cached) == (0, 6)
    with ResultStore(path, readonly=True) as st:
        assert st.record(lost.key).status == "lost"


@pytest.mark.slow
def test_a_node_with_another_device_is_refused_or_left_out(cluster, monkeypatch):
    """A node whose PoCL runs one thread shows one compute unit: another device (the store
    key holds it). Refused by default; with mismatch='exclude' the others are kept. Once
    the node is removed, a pool that still finds it listed leaves it out."""
    old = os.environ.get("POCL_MAX_PTHREAD_COUNT")
    os.environ["POCL_MAX_PTHREAD_COUNT"] = "1"  # inherited by the node's processes
    try:
        odd = cluster.add_node(num_cpus=1)
    finally:
        if old is None:
            del os.environ["POCL_MAX_PTHREAD_COUNT"]
        else:
            os.environ["POCL_MAX_PTHREAD_COUNT"] = old
    try:
        cluster.wait_for_nodes()
        head = ray.get_runtime_context().get_node_id()
        with pytest.raises(DeviceMismatchError, match="max_compute_units 1") as e:
            RayPool(nodes=[head, odd.node_id])  # two nodes suffice to disagree
        assert "mismatch='exclude'" in str(e.value)  # what to do
        with RayPool(mismatch="exclude") as pool:
            assert len(pool.actors) == 3 and odd.node_id not in {a.node_id
                                                                 for a in pool.actors}
            assert len(pool.excluded) == 1 and odd.node_id[:8] in pool.excluded[0]
        listing = ray.nodes()  # the odd node alive in it
    finally:
        cluster.remove_node(odd)
    # a node that dies between the listing and the placement of its actor is left out
    monkeypatch.setattr(ray, "nodes", lambda: listing)
    with RayPool() as pool:
        assert len(pool.actors) == 3 and odd.node_id not in {a.node_id for a in pool.actors}
        assert len(pool.excluded) == 1 and "the node is gone" in pool.excluded[0]
    monkeypatch.undo()
    _remove(cluster, odd)


@pytest.mark.slow
def test_each_node_opens_the_device_its_own_liftmap_device_names(cluster):
    """Without a device spec, each actor opens its node's default device, which the
    node's LIFTMAP_DEVICE (set where `ray start` runs there) chooses: a per-node spec. A
    node whose LIFTMAP_DEVICE names no device is named in the refusal; with
    mismatch='exclude' it is left out and the others run."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LIFTMAP_DEVICE", "NoSuchPlatform")  # inherited by the node's processes
        odd = cluster.add_node(num_cpus=1)
    try:
        cluster.wait_for_nodes()
        head = ray.get_runtime_context().get_node_id()
        with pytest.raises(RayClusterError, match=odd.node_id[:8]) as e:
            RayPool(nodes=[head, odd.node_id])
        assert "NoSuchPlatform" in str(e.value)
        with RayPool(nodes=[head, odd.node_id], mismatch="exclude") as pool:
            assert [a.node_id for a in pool.actors] == [head]
            assert len(pool.excluded) == 1 and odd.node_id[:8] in pool.excluded[0]
    finally:
        _remove(cluster, odd)


@pytest.mark.slow
def test_a_node_lost_mid_run_loses_no_candidate(cluster, tmp_path):
    """A fourth node is removed (its raylet and processes killed) right after a candidate
    was sent to it: the candidate is retried on another node, nothing is lost or stored
    twice, and the node's actor is given up."""
    extra = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    path = tmp_path / "node.sqlite"
    removed = threading.Event()

    def on_extra(slot, lower_fn):
        if slot.actor.node_id != extra.node_id or removed.is_set():
            return False
        removed.set()
        cluster.remove_node(extra, allow_graceful=False)
        return False  # its processes are gone already

    try:
        with RayPool(revive_s=5) as pool:
            assert len(pool.actors) == 4
            _kill_on(pool, on_extra)
            res = explore(cc22_listing3(), SIZES, budget=8, store=path, pool=pool, **RUN)
            assert removed.is_set() and pool.retried >= 1 and pool.lost == 0, pool.incidents
            [gone] = [a for a in pool.actors if a.node_id == extra.node_id]
            deadline = time.monotonic() + 30
            while gone.state != "gone" and time.monotonic() < deadline:
                time.sleep(0.2)
            assert gone.state == "gone"
    finally:
        _remove(cluster, extra)
    assert res.evaluated == 8 and "lost" not in res.counts
    rows = _rows(path)
    assert len(rows) == 8 and len({k for k, _ in rows}) == 8


def _mapper(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mapper.cli", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, **kw)


@pytest.mark.slow
def test_cli_ray_address_then_results_and_local_resume(cluster, tmp_path):
    store = str(tmp_path / "cli.sqlite")
    args = ("explore", L3, "--sizes", "N=1024", "--strategy", "solver", "--seed", "1",
            "--store", store)
    out = _mapper(*args, "--budget", "4", "--ray", cluster.address)
    assert out.returncode == 0, out.stderr
    assert "3 device actor(s)" in out.stderr
    assert "4 candidate(s), 4 evaluated" in " ".join(out.stdout.split())
    out = _mapper("results", store)
    assert out.returncode == 0 and "4 candidate(s)" in out.stdout, out.stderr
    out = _mapper(*args, "--budget", "6")  # local workers resume the Ray run's store
    assert out.returncode == 0, out.stderr
    assert "2 evaluated, 4 found in the store" in " ".join(out.stdout.split())


@pytest.mark.slow
def test_cli_ray_starts_a_local_cluster(tmp_path):
    store = str(tmp_path / "local-ray.sqlite")
    out = _mapper("explore", L3, "--sizes", "N=1024", "--strategy", "solver", "--budget",
                  "3", "--store", store, "--ray", "--workers", "2")
    assert out.returncode == 0, out.stderr
    assert "1 device actor(s) with 2 worker process(es) on 1 node(s)" in \
        " ".join(out.stderr.split())
    assert "3 candidate(s), 3 evaluated" in " ".join(out.stdout.split())


@pytest.mark.slow
def test_a_killed_driver_leaves_a_store_that_resumes(cluster, tmp_path):
    """The driver (mapper explore --ray ADDRESS) is killed mid-run: the store keeps what
    was evaluated, the cluster frees the dead driver's actors, and the same command
    continues where it stopped."""
    store = str(tmp_path / "driver.sqlite")
    cmd = [sys.executable, "-m", "mapper.cli", "explore", L3, "--sizes", "N=1024",
           "--strategy", "solver", "--seed", "5", "--budget", "10", "--store", store,
           "--ray", cluster.address]
    p = kill_when(cmd, lambda: len(_rows(store)) >= 3, cwd=ROOT, deadline_s=180)
    before = _rows(store)
    assert 3 <= len(before) < 10, p.stderr.read().decode()[-2000:] if p.stderr else ""
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"{10 - len(before)} evaluated, {len(before)} found in the store" in \
        " ".join(out.stdout.split())
    after = _rows(store)
    assert len(after) == 10 and len({k for k, _ in after}) == 10
    assert set(before) <= set(after)
