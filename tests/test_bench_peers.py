"""The peer search benchmark (experiments/bench_peers_search.py): how a run's evaluations to
a target are counted (distinct configurations in order, failures never reaching, a run that
only repeats itself stopped), which stores are in-sample, and one end-to-end run on a small
committed store with Kernel Tuner 1.5 in simulation mode (its crash on a strategy a row,
not the end)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from experiments import bench_peers_search as bp

REPO = Path(__file__).resolve().parent.parent
SMALL = str(REPO / "tests" / "data" / "figures" / "fig5-layer19-scale8-solver.sqlite")


def _kernel_tuner():
    return pytest.importorskip("kernel_tuner", reason="kernel_tuner is not installed (the "
                               "kernel-tuner extra: pip install 'kernel_tuner==1.5.*')")


def test_first_reaching_counts_from_one_either_way() -> None:
    assert bp.first_reaching([5.0, 3.0, 2.0], 3.0, higher=False) == 2
    assert bp.first_reaching([1.0, 4.0], 3.0, higher=True) == 2
    assert bp.first_reaching([5.0, math.inf], 1.0, higher=False) is None


def test_observe_keeps_distinct_configurations_in_order_and_stops_repeats() -> None:
    tr = bp.Trace()
    served = [(1, "a"), (2, "a"), (1, "a")]
    results = [{"time": 3.0}, {"time": 9.0, "__error__": "RuntimeFailedConfig"}, {"time": 3.0}]
    assert not bp.observe(tr, served, results, max_repeats=4)
    assert tr.trace == [3.0, math.inf]  # a failure never reaches; the repeat is not counted
    assert tr.repeats == 0
    assert not bp.observe(tr, [(1, "a"), (2, "a")], [{"time": 3.0}, {"time": 1.0}], 4)
    assert tr.repeats == 2
    assert not bp.observe(tr, [(3, "b")], [None], 4)  # past Kernel Tuner's budget: skipped
    assert bp.observe(tr, [(1, "a")], [{"time": 3.0}], max_repeats=4)
    assert len(tr.trace) == 2


def test_reach_uses_the_best_time_over_the_fraction() -> None:
    a, b = bp.Trace(trace=[10.0, 1.05, 1.0]), bp.Trace(trace=[2.0, math.inf])
    assert bp.reach([a, b], 1.0, 0.9) == [2, None]
    assert bp.reach([a, b], 1.0, 0.99) == [3, None]


def test_summarise_counts_never_as_infinite() -> None:
    s = bp.summarise([4, 2, None])
    assert s["median"] == 4 and s["q1"] == 3 and s["q3"] is None
    assert (s["reached"], s["seeds"]) == (2, 3)
    assert bp.fmt(s) == "4 [3-inf] (2/3)"
    assert bp.fmt(bp.summarise([None, None, 3])) == "never (1/3)"


def test_in_sample_stores_are_the_ones_the_model_was_tuned_on() -> None:
    assert bp.in_sample("docs/figures/data/l19-half-1k.sqlite")
    assert bp.in_sample("./docs/figures/data/l19-half-solver.sqlite")
    assert not bp.in_sample("results/search/search-7-128x112x112x128k3s1p1.sqlite")
    cwd = os.getcwd()
    try:
        os.chdir(REPO)
        stores = bp.default_stores()
    finally:
        os.chdir(cwd)
    assert stores[-1] == "docs/figures/data/l19-half-1k.sqlite"
    assert [s for s in stores if bp.in_sample(s)] == [stores[-1]]
    assert len(stores) == len(set(stores))


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_a_small_store_end_to_end(tmp_path, capsys) -> None:
    _kernel_tuner()
    out = tmp_path / "peers.json"
    rc = bp.main(["--stores", SMALL, "--seeds", "2", "--kt", "random_sample,no_such_strategy",
                  "--liftmap", "solver", "--out", str(out)])
    assert rc == 0
    doc = json.loads(out.read_text())
    st = doc["stores"][SMALL]
    assert st["kind"] == "held-out" and st["candidates"] == 12
    rows = st["strategies"]
    rs = rows["kernel_tuner:random_sample"]
    assert rs["ended"] == ["done", "done"]
    assert rs["evaluated"] == [12, 12]  # the whole data set: it reaches the best
    assert rs["0.9"]["reached"] == 2
    assert rows["liftmap:solver"]["0.95"]["reached"] == 2
    bad = rows["kernel_tuner:no_such_strategy"]
    assert bad["ended"] == ["crash", "crash"] and bad["0.9"]["median"] is None
    printed = capsys.readouterr().out
    assert "(held-out): 12 candidates" in printed and "crash 2" in printed


@pytest.mark.slow
def test_replay_transfers_only_when_asked_and_never_from_the_store_itself() -> None:
    from mapper.explore.knowledge import Knowledge, from_store, read_rows
    from mapper.explore.replay import load_space

    store = str(REPO / "results" / "search" / "search-19_21-512x28x28x512k3s1p1.sqlite")
    plain, _ = load_space(store)
    assert plain.sizes is None and Knowledge.for_space(plain) is None
    space, st = load_space(store, transfer=True)
    ctx = st.context()
    assert ctx is not None and space.sizes == dict(ctx.sizes)
    kn = Knowledge.for_space(space)
    assert kn is not None
    own = from_store(store)
    same_program = [r for r in read_rows() if r["program"] == own[0]["program"]]
    # leave-one-out: the rows of its sizes (its own and other stores' of them) are out
    assert own and kn.rows == len([r for r in same_program if r["sizes"] != own[0]["sizes"]])
    assert kn.rows < len(same_program)
    assert json.dumps(own[0]["sizes"], sort_keys=True) not in kn.sizes


STORE_WITH_OPTIONS = str(REPO / "docs" / "figures" / "data" /
                         "fig6-layer19-scale8-fusion-always-heuristics-on.sqlite")


def test_a_store_named_with_regex_metacharacters_exports_a_name_that_matches_itself(
        tmp_path) -> None:
    """Kernel Tuner compiles the cache's kernel_name into a regular expression: the name
    exported for the store of a run with options (``... [fusion-always-heuristics-on]``)
    matches itself as one. (Kernel Tuner itself loads it in the slow test below: importing
    it imports PyTorch, seconds.)"""
    import re

    from mapper.explore.interop import export_store, kernel_tuner_name

    assert kernel_tuner_name("conv:vgg16-19,21/8 [fusion-always]") == \
        "conv:vgg16-19,21/8 _fusion-always_"
    assert kernel_tuner_name("conv:vgg16-19") == "conv:vgg16-19"
    cache = tmp_path / "c.json"
    export_store(STORE_WITH_OPTIONS, "kernel-tuner", str(cache))
    name = json.loads(cache.read_text())["kernel_name"]
    assert name == "conv:vgg16-19,21/8 _fusion-always-heuristics-on_"
    assert re.fullmatch(name, name)


@pytest.mark.slow  # over 3 s (importing Kernel Tuner imports PyTorch): the test above is fast
def test_a_store_named_with_regex_metacharacters_loads_in_kernel_tuner(tmp_path) -> None:
    """Kernel Tuner compiles the cache's kernel_name into a regular expression: the store of
    a run with options (``... [fusion-always-heuristics-on]``) must still load."""
    _kernel_tuner()
    from mapper.explore.interop import export_store

    cache = str(tmp_path / "c.json")
    export_store(STORE_WITH_OPTIONS, "kernel-tuner", cache)
    (tr,) = bp.kernel_tuner_runs(cache, "random_sample", [0], failures=True)
    assert tr.ended == "done" and len(tr.trace) == 250, tr.error
