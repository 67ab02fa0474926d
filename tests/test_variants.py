"""Exploring several variants of one computation (``mapper.explore.variants``): probes,
the choice of the fastest, the chosen one resumed from its store, budgets and stores."""

from __future__ import annotations

import os

import pytest

from codegen.worker import WorkerPool
from mapper.explore import Task, explore
from mapper.explore.options import ExploreOptions
from mapper.explore.run import Budget, Results
from mapper.explore.variants import CLOSE, _close, explore_variants, variant_store

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
    vr = explore_variants(_tasks(), budget=5, strategy="solver", pool=pool,
                          options=ExploreOptions.of(retime=0))
    assert vr.chosen == "big" and not vr.probes
    assert vr.results.considered == 5 and vr.summary() == ""


@pytest.mark.slow
@pytest.mark.opencl
def test_each_variant_is_probed_then_the_fastest_resumed(pool, tmp_path):
    phases = []
    stores = {n: variant_store(str(tmp_path / "s.sqlite"), n, i == 0)
              for i, n in enumerate(_tasks())}
    vr = explore_variants(_tasks(), budget=14, probe=3, stores=stores, strategy="solver",
                          pool=pool, on_phase=lambda n, p: phases.append((n, p)),
                          options=ExploreOptions.of(retime=0))
    assert phases[:2] == [("big", "probe"), ("small", "probe")]
    assert phases[-1] == (vr.chosen, "explore")
    assert set(vr.probes) == {"big", "small"}
    assert all(r.considered == 3 for r in vr.probes.values())
    # the chosen one is the variant whose probe found the shortest kernel time or, where
    # the probes were close, whose best kernel timed again has the lowest median
    times = {n: r.best.time_s for n, r in vr.probes.items()}
    if vr.probe_medians:
        assert phases[2] == ("big,small", "compare")
        assert vr.chosen == min(vr.probe_medians, key=lambda n: vr.probe_medians[n])
    else:
        assert len(phases) == 3 and max(times.values()) > CLOSE * min(times.values())
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
    res = explore(L3, {"N": 1 << 20}, strategy="solver", budget=2, pool=pool,
                  options=ExploreOptions.of(seed=4, cut=1e-6, cut_min_s=1e-6, retime=0,
                                            known_best_s=1e-6))
    assert [(r.status, r.check) for r in res.records] == [("timeout", "early-cut")] * 2


def _probe(time_s: float | None) -> Results:
    """A probe's results whose best ``ok`` record took ``time_s`` (None: nothing ran ok)."""
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record

    res = Results(run_id="r", strategy="solver", seed=0, store_path=":memory:", context=None,
                  budget=Budget(candidates=1))
    if time_s is not None:
        res.records.append(Record(key=f"k{time_s}", run_id="r", strategy="solver", seed=0,
                                  idx=0, mapping=MapCodes({"A": 0}), status="ok",
                                  time_s=time_s, gflops=1.0 / time_s))
    return res


def test_close_probes_are_those_within_the_factor_of_the_fastest():
    probes = {"a": _probe(1.0), "b": _probe(CLOSE * 0.99), "c": _probe(CLOSE * 1.01),
              "d": _probe(None)}
    assert _close(probes) == ["a", "b"]
    assert _close({"a": _probe(1.0), "c": _probe(CLOSE * 1.01)}) == []  # one: decided
    assert _close({"a": _probe(1.0), "d": _probe(None)}) == []


def test_the_fastest_round_decides_a_variant_whose_other_round_a_slow_phase_hit():
    """Variant a's kernel is the faster one, but a slow phase of the host hit its second
    round: over every run its median is the slower one; the fastest round still says a.
    The rounds are interleaved: a, b, a, b."""
    from types import SimpleNamespace

    from codegen.program import Outcome
    from mapper.explore.variants import retime_probes

    rounds = {"a": [(1.0, 1.0, 1.1), (2.0, 2.1, 2.0), (2.0, 2.0, 2.2)],
              "b": [(1.5, 1.5, 1.5), (1.5, 1.6, 1.5), (1.5, 1.5, 1.6)]}
    calls: list[str] = []

    def evaluate_candidate(program, inputs, reference, **kw):
        calls.append(program)
        return Outcome("ok", time_s=0.0, times_s=rounds[program][calls.count(program) - 1])

    tasks = {n: SimpleNamespace(lower_fn=lambda m, t, n=n: n, inputs={}, reference=None,
                                flops=1, tolerance={}) for n in rounds}
    probes = {"a": _probe(9.0), "b": _probe(9.0)}
    got = retime_probes(tasks, probes, ["a", "b"], SimpleNamespace(
        evaluate_candidate=evaluate_candidate), rounds=3, max_rounds=3)
    assert calls == ["a", "b"] * 3
    assert got.medians == {"a": 1.0, "b": 1.5} and got.fastest == "a"
    # a's lead rests on one round: taken, but said not to be told apart
    assert (got.rounds, got.margin, got.decided) == (3, 0.5, False)
    assert got.verdict().startswith("could not tell apart: a faster by 50% in 3 round(s)")


def test_rounds_are_added_until_a_lead_is_confirmed_or_found_under_ten_percent():
    """A 20% lead on one round only: rounds are added until a second round confirms it
    (decided); a 5% lead stops at the minimum rounds (more cannot tell it), said so; a
    lead never confirmed runs to ``max_rounds``."""
    from types import SimpleNamespace

    from codegen.program import Outcome
    from mapper.explore.variants import VariantComparison, retime_probes, tell_apart

    assert tell_apart({"a": [1.0, 1.05], "b": [1.2, 1.3]}) == (pytest.approx(0.2), True)
    assert tell_apart({"a": [1.0, 1.3], "b": [1.2, 1.3]}) == (pytest.approx(0.2), False)
    assert tell_apart({"a": [1.0, 1.0], "b": [1.05, 1.05]})[1] is False
    assert tell_apart({"a": [1.0]}) == (None, False)

    def run(series, **kw):
        calls: list[str] = []

        def evaluate_candidate(program, inputs, reference, **_):
            calls.append(program)
            t = series[program][calls.count(program) - 1]
            return Outcome("ok", time_s=t, times_s=(t, t, t))

        tasks = {n: SimpleNamespace(lower_fn=lambda m, t, n=n: n, inputs={},
                                    reference=None, flops=1, tolerance={}) for n in series}
        probes = {n: _probe(9.0) for n in series}
        return retime_probes(tasks, probes, list(series), SimpleNamespace(
            evaluate_candidate=evaluate_candidate), rounds=2, max_rounds=6, **kw)

    confirmed = run({"a": [1.0, 2.0, 2.0, 1.05, 9, 9], "b": [1.2] * 6})
    assert (confirmed.rounds, confirmed.decided) == (4, True)
    assert confirmed.verdict() == "a faster by 20% in 4 round(s)"
    close = run({"a": [1.0] * 6, "b": [1.05] * 6})
    assert (close.rounds, close.decided) == (2, False)
    assert "under the 10%" in close.verdict()
    never = run({"a": [1.0] + [2.0] * 5, "b": [1.5] * 6})
    assert (never.rounds, never.decided, never.fastest) == (6, False, "a")
    assert VariantComparison({}).verdict() == "no kernel ran ok again"


@pytest.mark.slow
@pytest.mark.opencl
def test_close_probes_are_timed_again_interleaved_and_the_fastest_wins(pool,
                                                                            monkeypatch):
    """Two variants with the same kernels are as close as probes get: their bests are
    timed again, one round each in turn, and the fastest decides. (Closeness is
    made certain: on a loaded machine one measurement of the same kernel can be 1.5x
    another's, which is the point of timing again.)"""
    import mapper.explore.variants as variants

    monkeypatch.setattr(variants, "CLOSE", 1e9)
    phases = []
    task = Task.from_program(L3, {"N": 1 << 14})
    vr = explore_variants({"one": task, "two": task}, budget=8, probe=2, strategy="solver",
                          pool=pool, on_phase=lambda n, p: phases.append((n, p)),
                          options=ExploreOptions.of(retime=0))
    assert phases[:3] == [("one", "probe"), ("two", "probe"), ("one,two", "compare")]
    assert set(vr.probe_medians) == {"one", "two"}
    assert all(m > 0 for m in vr.probe_medians.values())
    assert vr.chosen == min(vr.probe_medians, key=lambda n: vr.probe_medians[n])
    assert phases[3] == (vr.chosen, "explore")
    assert "re-timed" in vr.summary()


@pytest.mark.slow
@pytest.mark.opencl
def test_an_exhausted_space_hands_the_rest_of_the_budget_on(pool, tmp_path, monkeypatch):
    """The chosen variant's space explored to its end before the budget is spent (a
    one-map program: a few mappings, nothing to tune): the next variant by its probe is
    explored with the rest, and the faster of the two is the answer."""
    from mapper.explore import variants

    monkeypatch.setattr(variants, "_fastest", lambda probes: "tiny")  # chosen first
    monkeypatch.setattr(variants, "_close", lambda probes: [])
    tiny = tmp_path / "scale.lift"
    tiny.write_text("X : [float]N\n\nmapA(\\x -> mult(x, x)) $ X\n")
    # N=3: no vector width divides it, so its space is its 4 mappings (at N=64 its map in
    # lanes and strip-mined widths make 71 candidates, more than the budget)
    tasks = {"tiny": Task.from_program(str(tiny), {"N": 3}),
             "big": Task.from_program(L3, {"N": 1 << 12})}
    phases = []
    vr = explore_variants(tasks, budget=24, probe=2, strategy="solver", pool=pool,
                          on_phase=lambda n, p: phases.append((n, p)),
                          options=ExploreOptions.of(retime=0))
    assert vr.explored == ["tiny", "big"], vr.explored
    assert phases[-2:] == [("tiny", "explore"), ("big", "explore")]
    assert "handed the budget on" in vr.summary()
    assert vr.results.considered <= 24 - 2  # the tiny run's candidates count against it
    assert vr.chosen in tasks and vr.results.best is not None


def _contest_run(tmp_path, monkeypatch, pool, contest_medians, far=False):
    """A contest between the two test variants (probes made close), the re-timings given:
    the probes' (close), then ``contest_medians(call)`` for the contest's comparisons
    (call 2, 3); with ``far``, a third variant is probed whose probe is not close. Returns
    (results, phases, the names each re-timing got)."""
    import mapper.explore.variants as variants

    monkeypatch.setattr(variants, "MIN_PROBE_SECONDS", 1.0)
    monkeypatch.setattr(variants, "CONTEST_SHARE", 0.05)  # 3 s of the 60 s below
    monkeypatch.setattr(variants, "_close", lambda probes: ["big", "small"])
    real_explore = variants.explore

    def short_explore(task, *, budget, **kw):
        # the answer's run, after the contest, is not what is tested here: 2 s of it
        if budget.text != "contest" and not budget.text.startswith("probe"):
            budget = Budget(seconds=min(budget.seconds, 2.0), text=budget.text)
        return real_explore(task, budget=budget, **kw)

    monkeypatch.setattr(variants, "explore", short_explore)
    tasks = _tasks()
    if far:
        tasks["far"] = Task.from_program(L3, {"N": 1 << 10})
    calls = []

    def medians(variants_, probes, names, pool_, **kw):
        calls.append(tuple(names))
        got = {n: 1e-3 * (1 + 0.01 * i) for i, n in enumerate(names)} if len(calls) == 1 \
            else contest_medians(len(calls))
        return variants.VariantComparison({n: got[n] for n in names}, 4, 0.01, False)

    monkeypatch.setattr(variants, "retime_probes", medians)
    phases: list = []
    stores = {n: variant_store(str(tmp_path / "s.sqlite"), n, i == 0)
              for i, n in enumerate(tasks)}
    # a contest needs half the budget left after it: 60 s leaves room for three probes
    vr = explore_variants(tasks, budget="60s", probe=2, stores=stores, strategy="solver",
                          pool=pool, on_phase=lambda n, p: phases.append((n, p)),
                          options=ExploreOptions.of(retime=0))
    return vr, phases, calls


@pytest.mark.slow
@pytest.mark.opencl
def test_probes_still_close_after_timing_again_hold_a_contest(pool, tmp_path, monkeypatch):
    """With a time budget, probes whose re-timed medians are within ``CONTEST`` are each
    explored a share of the budget (from their stores) in two halves, their bests timed
    again after each, and the lowest median chooses the variant whose run then resumes
    with every phase's candidates from its store. (The medians are given: closeness is what
    is tested, not the machine.)"""
    # still close after the first half (1.1 against 1.0): both get their second half; a
    # third variant whose probe was not close takes no part
    vr, phases, calls = _contest_run(tmp_path, monkeypatch, pool,
                                     lambda call: {"big": 1.1e-3, "small": 1.0e-3}, far=True)
    contest = [("big", "contest"), ("small", "contest"), ("big,small", "compare")]
    assert phases[:10] == [("big", "probe"), ("small", "probe"), ("far", "probe"),
                           ("big,small", "compare")] + contest + contest
    assert phases[10] == ("small", "explore") and vr.chosen == "small"
    assert len(calls) == 3
    assert set(vr.contest_medians) == {"big", "small"} and "explored up to 5%" in vr.summary()
    assert len(vr.comparisons) == 3 and "could not tell apart" in vr.summary()
    # the chosen run resumes from its store: the probe's candidates (and the contest's)
    n = sum(r.cached for r in vr.results.records)
    assert n >= 2 and all(r.cached for r in vr.results.records[:n])


@pytest.mark.slow
@pytest.mark.opencl
def test_a_contest_told_apart_after_its_first_half_ends_there(pool, tmp_path, monkeypatch):
    """A variant more than ``CONTEST`` times slower than the fastest after the contest's
    first half leaves it: the rest of the contest is not run, and the fastest is explored
    at once."""
    vr, phases, calls = _contest_run(tmp_path, monkeypatch, pool,
                                     lambda call: {"big": 1.0e-3, "small": 2.0e-3})
    assert phases[3:7] == [("big", "contest"), ("small", "contest"), ("big,small", "compare"),
                           ("big", "explore")], phases
    assert vr.chosen == "big" and len(calls) == 2 and len(vr.comparisons) == 2
