"""Exploring several variants of one computation (``mapper.explore.variants``): probes,
the choice of the fastest, the chosen one resumed from its store, budgets and stores."""

from __future__ import annotations

import os

import pytest

from codegen.worker import WorkerPool
from mapper.explore import Task, explore
from mapper.explore.variants import explore_variants, variant_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L3 = os.path.join(ROOT, "examples", "cc22_listing3.lift")


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


def _tasks():
    """Two variants of Listing 3 at different sizes: different joint spaces and stores
    (the mechanism does not look at what the variants compute)."""
    return {"big": Task.from_program(L3, {"N": 1 << 16}),
            "small": Task.from_program(L3, {"N": 1 << 12})}


def test_variant_stores_are_named_after_the_first():
    assert variant_store("r/conv.sqlite", "window", True) == "r/conv.sqlite"
    assert variant_store("r/conv.sqlite", "kernels", False) == "r/conv.kernels.sqlite"
    assert variant_store("r/conv", "kernels", False) == "r/conv.kernels.sqlite"
    assert variant_store(None, "kernels", False) is None


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_a_budget_too_small_to_probe_explores_the_first_variant(pool):
    vr = explore_variants(_tasks(), budget=5, strategy="solver", pool=pool, retime=0)
    assert vr.chosen == "big" and not vr.probes
    assert vr.results.considered == 5 and vr.summary() == ""


@pytest.mark.slow
@pytest.mark.opencl
def test_each_variant_is_probed_then_the_fastest_resumed(pool, tmp_path):
    phases = []
    stores = {n: variant_store(str(tmp_path / "s.sqlite"), n, i == 0)
              for i, n in enumerate(_tasks())}
    vr = explore_variants(_tasks(), budget=14, probe=3, stores=stores, strategy="solver",
                          pool=pool, retime=0,
                          on_phase=lambda n, p: phases.append((n, p)))
    assert phases[:2] == [("big", "probe"), ("small", "probe")]
    assert phases[2] == (vr.chosen, "explore")
    assert set(vr.probes) == {"big", "small"}
    assert all(r.considered == 3 for r in vr.probes.values())
    # the chosen one is the variant whose probe found the shortest kernel time
    times = {n: r.best.time_s for n, r in vr.probes.items()}
    assert vr.chosen == min(times, key=lambda n: times[n])
    # its run starts with its probe's candidates, from its store, and goes on
    probe_keys = [r.key for r in vr.probes[vr.chosen].records]
    res = vr.results
    assert [r.key for r in res.records[:3]] == probe_keys
    assert all(r.cached for r in res.records[:3]) and res.evaluated > 0
    # the other probe's candidates count against the budget
    assert res.considered == 14 - 3
    assert os.path.exists(tmp_path / "s.sqlite") and os.path.exists(tmp_path / "s.small.sqlite")
    assert vr.chosen in vr.summary() and "GFLOP/s" in vr.summary()


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
@pytest.mark.opencl
def test_a_known_best_cuts_from_the_first_candidate(pool):
    """``known_best_s`` (another variant's best time) is what the early cut measures
    against before the run has a candidate of its own: here every candidate is cut."""
    res = explore(L3, {"N": 1 << 20}, strategy="solver", budget=2, seed=4, pool=pool,
                  cut=1e-6, cut_min_s=1e-6, retime=0, known_best_s=1e-6)
    assert [(r.status, r.check) for r in res.records] == [("timeout", "early-cut")] * 2
