"""The simulated device (``mapper.explore.simulate``): a store's candidates, outcomes and
times replayed in place of lowering, building and running (what
``experiments/bench_ray_scaling.py`` runs on Ray device actors). No OpenCL device, no Ray;
no claim on wall-clock time (the sleeps are scaled down to nothing)."""

from __future__ import annotations

import functools
import os
import pickle

import pytest

from mapper.explore import ResultStore, explore
from mapper.explore.options import ExploreOptions
from mapper.explore.simulate import (
    ReplayTask,
    SimulatedDevice,
    SimulationError,
    StoredCandidate,
    StoredOutcomes,
)

TINY = os.path.join(os.path.dirname(__file__), "data", "figures",
                    "fig6-layer19-scale8-fusion-always-heuristics-on.sqlite")
FAST = 1e-4  # every stored second sleeps 0.1 ms


@pytest.fixture(scope="module")
def stored():
    with ResultStore(TINY, readonly=True) as st:
        return st.records()


@pytest.fixture(scope="module")
def task():
    return ReplayTask.from_store(TINY)


@pytest.fixture(scope="module")
def outcomes():
    return StoredOutcomes.load(TINY)


def test_the_simulated_device_gives_each_stored_outcome(stored, task, outcomes):
    dev = SimulatedDevice(outcomes, time_scale=FAST)
    assert len(stored) == 12 and {r.status for r in stored} == {"ok", "rejected"}
    assert dev.device_info()["limits"] == outcomes.device  # the store's device: its keys
    for r in stored:
        o = dev.evaluate_candidate(task.lower_fn(r.mapping, r.tuning), {}, None, repeats=3)
        assert (o.status, o.check, o.gflops, o.time_s, o.source_hash) == \
            (r.status, r.check, r.gflops, r.time_s, r.source_hash)
        assert o.run_window is not None and o.run_window[0] <= o.run_window[1]
        so = dev.stored(task.lower_fn(r.mapping, r.tuning))
        assert so.offdevice_s == pytest.approx((r.lower_s or 0) + (r.build_s or 0))
        assert so.total_s == pytest.approx(r.wall_s)  # lowering + build + the rest
    assert dev.evaluated == len(stored)


def test_limits_bound_the_simulated_times_as_they_bound_a_run(stored, task, outcomes):
    dev = SimulatedDevice(outcomes, time_scale=FAST)
    r = max(stored, key=lambda r: r.run_s or 0)
    fn = task.lower_fn(r.mapping, r.tuning)
    so = dev.stored(fn)
    cut = dev.evaluate_candidate(fn, {}, run_limit_s=so.device_s / 2)
    assert cut.status == "timeout" and cut.reason.startswith("runs stopped")
    late = dev.evaluate_candidate(fn, {}, timeout_s=so.offdevice_s / 2)
    assert late.status == "timeout" and "lowering and build" in late.reason
    assert dev.evaluate_candidate(fn, {}, timeout_s=so.total_s * 2).status == r.status


def test_what_the_store_does_not_hold_is_a_typed_error(stored, task, outcomes):
    dev = SimulatedDevice(outcomes, time_scale=FAST)
    r = stored[0]
    with pytest.raises(SimulationError, match="holds no candidate"):
        dev.evaluate_candidate(StoredCandidate(task.lower_fn(r.mapping, r.tuning).mapping,
                                               (("nope", 1),)), {})
    with pytest.raises(SimulationError, match="ReplayTask"):  # a real lowering function
        dev.evaluate_candidate(functools.partial(print, r.mapping), {})
    with pytest.raises(SimulationError, match="cannot be lowered"):
        task.lower_fn(r.mapping, r.tuning)()
    with pytest.raises(SimulationError):
        SimulatedDevice(outcomes, workers=0)


def test_the_backend_travels_whole(outcomes):
    """``backend`` is what a Ray actor receives: pickled, it builds the same device."""
    make = pickle.loads(pickle.dumps(SimulatedDevice.backend(TINY, time_scale=0.5)))
    dev = make(spec="sim:3", workers=2, timeout_s=9.0)
    assert (dev.size, dev.time_scale, dev.default_timeout_s) == (2, 0.5, 9.0)
    assert dev.device_info()["spec"] == "sim:3"
    assert dev.device_info()["limits"] == outcomes.device and len(dev.outcomes) == 12


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.parametrize("strategy", ["solver", "model"])
def test_an_exploration_over_a_store_replays_its_candidates(stored, task, outcomes,
                                                            strategy, tmp_path):
    path = tmp_path / "sim.sqlite"
    res = explore(task, budget=12, store=path, strategy=strategy,
                  pool=SimulatedDevice(outcomes, time_scale=FAST),
                  options=ExploreOptions.of(seed=2, cut=None, retime=0))
    by = {(r.mapping, r.tuning): r for r in stored}
    assert res.evaluated == 12 and set(by) == {(r.mapping, r.tuning) for r in res.records}
    for r in res.records:
        s = by[(r.mapping, r.tuning)]
        assert (r.status, r.check, r.gflops, r.time_s) == (s.status, s.check, s.gflops,
                                                          s.time_s)
    assert 0 < res.wait_s <= res.elapsed_s  # the driver waited for the device, not more
    again = explore(task, budget=12, store=path, strategy=strategy,
                    pool=SimulatedDevice(outcomes, time_scale=FAST),
                    options=ExploreOptions.of(seed=2, cut=None, retime=0))
    assert (again.evaluated, again.cached) == (0, 12)  # resumes like any store


@pytest.mark.parametrize("workers, given, batch", [(1, None, None), (8, None, "8"),
                                                   (8, 3, "3")])
@pytest.mark.slow
def test_the_model_proposes_a_batch_per_round_of_the_devices(task, outcomes, workers, given,
                                                             batch):
    """With more candidates in flight than the model's default batch (5), one refit
    proposes as many as are in flight (the driver does not refit several times per round
    of the devices); a batch the caller gives is kept; one worker keeps the default."""
    import json

    st = ResultStore(":memory:")
    opts = {} if given is None else {"batch": given}
    res = explore(task, budget=10, store=st, strategy="model",
                  pool=SimulatedDevice(outcomes, workers=workers, time_scale=FAST), **opts,
                  options=ExploreOptions.of(seed=0, cut=None, retime=0))
    assert res.evaluated == 10
    [run] = st.runs()
    assert json.loads(run["options"]).get("batch") == batch
    st.close()
