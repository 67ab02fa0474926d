"""A worker killed from outside the pool (a user, the soak benchmark, the OOM killer) costs
no candidate: the candidate in flight is retried once on a fresh worker, and a closed pool
holds no descriptor of its workers (issue 48, found by ``experiments/soak.py``)."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

pytestmark = pytest.mark.opencl


def _slow_vadd():
    """A candidate whose lowering takes a second: time for a kill while it is in flight."""
    from experiments.handwritten import vector_add_program

    time.sleep(1.0)
    return vector_add_program(64)


def _vadd():
    """The same candidate without the wait: where no kill is aimed at it."""
    from experiments.handwritten import vector_add_program

    return vector_add_program(64)


def _data():
    rng = np.random.default_rng(0)
    d = {"a": rng.random(64, dtype=np.float32), "b": rng.random(64, dtype=np.float32)}
    return d, d["a"] + d["b"]


def _kill_in_flight(pool, times: int) -> threading.Thread:
    """Kills the pool's worker ``times`` times, each 0.4 s into a candidate's lowering."""
    (w,) = pool._workers

    def run() -> None:
        for _ in range(times):
            deadline = time.time() + 60
            while time.time() < deadline:
                proc = w.proc
                if proc is not None and proc.is_alive() and w.started and w.conn is not None:
                    pid = proc.pid
                    break
                time.sleep(0.02)
            time.sleep(0.4)
            os.kill(pid, signal.SIGKILL)
            while w.proc is not None and w.proc.pid == pid:  # until it is replaced
                time.sleep(0.02)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_a_worker_killed_from_outside_is_retried_once_and_costs_no_candidate():
    from codegen.worker import WorkerPool

    d, ref = _data()
    with WorkerPool() as pool:
        pool.device_info()  # started: the kill hits the candidate, not the start-up
        t = _kill_in_flight(pool, 1)
        out = pool.evaluate_candidate(_slow_vadd, d, ref, timeout_s=60)
        t.join(60)
        assert out.status == "ok", out.reason
        assert pool.retried == 1 and "killed from outside" in out.reason
        assert "signal SIGKILL" in out.reason
        again = pool.evaluate_candidate(_vadd, d, ref, timeout_s=60)
        assert again.status == "ok" and "killed" not in again.reason and pool.retried == 1


def test_a_candidate_killed_twice_is_a_crash_that_says_so():
    from codegen.worker import WorkerPool

    d, ref = _data()
    with WorkerPool() as pool:
        pool.device_info()
        t = _kill_in_flight(pool, 2)
        out = pool.evaluate_candidate(_slow_vadd, d, ref, timeout_s=60)
        t.join(60)
        assert out.status == "crash" and "signal SIGKILL" in out.reason
        assert pool.retried == 1 and "retried 1 time(s)" in out.reason


def test_a_timeout_is_not_retried():
    from codegen.worker import WorkerPool

    d, ref = _data()
    with WorkerPool() as pool:
        out = pool.evaluate_candidate(_slow_vadd, d, ref, timeout_s=0.5)
        assert out.status == "timeout" and pool.retried == 0


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_a_closed_pool_holds_no_descriptor_of_its_workers():
    from multiprocessing import resource_tracker

    from codegen.worker import WorkerPool

    resource_tracker.ensure_running()  # multiprocessing's, for the process's life
    d, ref = _data()
    before = _fds()
    pool = WorkerPool(workers=2)
    pool.map_candidates([_slow_vadd, _slow_vadd], d, ref, timeout_s=60)
    (w, _) = pool._workers
    os.kill(w.proc.pid, signal.SIGKILL)  # a replaced worker's handle is released too
    assert pool.evaluate_candidate(_vadd, d, ref, timeout_s=60).status == "ok"
    pool.close()
    assert _fds() == before  # the pool object still exists: nothing waits for the GC


def test_a_worker_killed_while_the_pool_starts_is_started_again():
    from codegen.worker import WorkerPool

    with WorkerPool() as pool:
        (w,) = pool._workers

        def kill_at_start() -> None:
            deadline = time.time() + 60
            while w.proc is None and time.time() < deadline:
                time.sleep(0.005)
            os.kill(w.proc.pid, signal.SIGKILL)  # before it opened the device

        t = threading.Thread(target=kill_at_start, daemon=True)
        t.start()
        info = pool.device_info()
        t.join(60)
        assert info["spec"] and pool.retried == 1 and w.started == 2


def _hang():
    """A candidate whose lowering never ends (as a kernel that never returns would)."""
    time.sleep(3600)


_DRIVER = r"""
import sys, threading
sys.path.insert(0, sys.argv[1])
from codegen.worker import WorkerPool
from tests.test_worker_kills import _data, _hang
pool = WorkerPool()
d, ref = _data()
threading.Thread(target=pool.evaluate_candidate, args=(_hang, d, ref),
                 kwargs={"timeout_s": 3600}, daemon=True).start()
import time
while not any(w.started and w.conn is not None for w in pool._workers):
    time.sleep(0.05)
time.sleep(1.0)
print(pool._workers[0].proc.pid, flush=True)
time.sleep(3600)
"""


def test_a_busy_worker_does_not_outlive_its_killed_driver():
    """The driver killed with SIGKILL while its worker is busy (nothing reads the pipe):
    the worker notices within seconds and exits, instead of living on."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    drv = subprocess.Popen([sys.executable, "-c", _DRIVER, root], cwd=root,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert drv.stdout is not None
        worker = int(drv.stdout.readline())
        os.kill(drv.pid, signal.SIGKILL)
        drv.wait(timeout=30)
        deadline = time.time() + 20
        while time.time() < deadline and os.path.exists(f"/proc/{worker}"):
            with open(f"/proc/{worker}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):  # exited, not yet reaped
                    break
            time.sleep(0.2)
        alive = os.path.exists(f"/proc/{worker}")
        if alive:
            with open(f"/proc/{worker}/stat") as f:
                alive = not f.read().split(") ")[1].startswith("Z")
        assert not alive, f"worker {worker} outlived its driver"
    finally:
        if drv.poll() is None:
            drv.kill()
