"""Watch rounds: the run's leaders timed again while it explores, and a winner's figure
that weighs every window of the host's time alike (``mapper.explore.watch``,
``mapper.explore.record.windowed_median``)."""

import os
import statistics

import pytest

from mapper.encoding import MapCodes
from mapper.explore import explore
from mapper.explore.options import ExploreOptions
from mapper.explore.record import Record, Retimed, windowed_median
from mapper.explore.store import ResultStore
from mapper.explore.watch import Watch, leaders

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
L3 = os.path.join(ROOT, "examples", "cc22_listing3.lift")


def _rec(key: str, gflops: float, ok: bool = True) -> Record:
    return Record(key=key, run_id="r", strategy="model", seed=0, idx=0,
                  mapping=MapCodes({"A": 0}), status="ok" if ok else "crash",
                  time_s=1.0 / gflops, gflops=gflops)


def test_the_windowed_median_is_the_plain_median_without_times_or_in_one_window():
    rounds = [[1.0, 2.0, 3.0], [4.0, 5.0], [6.0]]
    plain = statistics.median([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert windowed_median(rounds, None) == plain
    assert windowed_median(rounds, [0.0, 1.0, 2.0], window_s=8.0) == plain
    assert windowed_median([[2.0]], [5.0]) == 2.0


def test_a_slow_phase_with_many_rounds_does_not_outweigh_rounds_spread_before_it():
    """Four rounds a minute apart at 1 ms, then sixteen back to back at 2 ms (one slow
    phase of the host): by executions the slow phase is the median; by windows of the
    host's time it is one of six windows."""
    fast, slow = [[1.0] * 5] * 4, [[2.0] * 5] * 16
    at = [0.0, 60.0, 120.0, 180.0] + [240.0 + i for i in range(16)]
    assert windowed_median(fast + slow, None) == 2.0
    assert windowed_median(fast + slow, at, window_s=8.0) == 1.0
    # and the other way: one fast window among slow ones does not become the figure
    assert windowed_median(slow + fast[:1], [float(i * 10) for i in range(17)]) == 2.0


def test_leaders_are_the_fastest_ok_records_and_the_incumbent():
    recs = [_rec("a", 1.0), _rec("b", 3.0), _rec("c", 2.0), _rec("d", 9.0, ok=False)]
    assert [r.key for r in leaders(recs, 2, None)] == ["b", "c"]
    assert [r.key for r in leaders(recs, 2, recs[0])] == ["b", "c", "a"]
    assert [r.key for r in leaders(recs, 2, recs[1])] == ["b", "c"]


def test_the_watch_takes_the_leader_watched_least_and_stores_its_round(tmp_path):
    recs = [_rec("a", 1.0), _rec("b", 3.0), _rec("c", 2.0)]
    now = [0.0]
    w = Watch(2, every_s=10.0, clock=lambda: now[0])
    assert not w.due()
    now[0] = 10.0
    assert w.due()
    timed = []

    def retime(r):
        timed.append(r.key)
        return [0.5, 0.6] if r.key != "c" else None  # c does not run again

    runnable = {"a": 1, "b": 1, "c": 1}
    with ResultStore(tmp_path / "w.sqlite") as st:
        assert w.take(recs, None, runnable, retime, st, "r").key == "b"
        assert not w.due()  # the clock starts again
        assert w.take(recs, None, runnable, retime, st, "r") is None  # c, failed
        assert w.take(recs, recs[0], runnable, retime, st, "r").key == "a"  # the incumbent
        assert w.take(recs, None, {"b": 1}, retime, st, "r").key == "b"  # runnable only
        assert timed == ["b", "c", "a", "b"]
        assert {k: len(v) for k, v in w.rounds.items()} == {"b": 2, "a": 1}
        rows = st.retime_rows("watch", "r")
        assert [(k, rnd) for k, _, rnd, _ in rows] == [("b", 0), ("a", 0), ("b", 1)]


def test_a_winner_s_figure_takes_its_watch_rounds_and_the_store_agrees(tmp_path):
    rec = _rec("k", 1.0)
    watch = [(1000.0, [1.0, 1.0]), (1060.0, [1.0, 1.0]), (1120.0, [1.1, 1.0])]
    confirm = [[2.0, 2.0]] * 8
    at = [1200.0 + i for i in range(8)]
    r = Retimed.of(rec, [[1.5, 1.5]], flops=1e9, confirm=confirm, confirm_at=at, watch=watch)
    assert r.confirmed and r.watched == 3 and r.rounds == 11 and r.n == 22
    assert r.span_s == pytest.approx(207.0)
    assert r.median_s == pytest.approx(1.0)  # three windows of 1 ms, one of 2 ms
    assert r.max_s == 2.0 and r.round_s == 1.5
    # without confirmation rounds the watch rounds are not the figure (not the winner)
    loser = Retimed.of(rec, [[1.5, 1.5]], flops=1e9, watch=watch)
    assert loser.watched == 0 and loser.median_s == 1.5 and not loser.confirmed
    # the store rebuilds the same figure from its rows (their stored times)
    with ResultStore(tmp_path / "f.sqlite") as st:
        st.add(rec)
        st.add_retime("k", "r", 0, [1.5, 1.5])
        for i, (_, ts) in enumerate(watch):
            st.add_retime("k", "r", i, ts, phase="watch")
        for i, ts in enumerate(confirm):
            st.add_retime("k", "r", i, ts, confirm=True)
        (stored,) = st.retimed()
    assert stored.watched == 3 and stored.rounds == 11 and stored.confirmed
    assert stored.to_json()["watched"] == 3


class _PhasedPool:
    """A pool whose kernels run at 1 ms, or at 2 ms once ``slow`` is set: a host that
    turns slow for the confirmation at the end of the run."""

    size = 1
    slow = False

    def device_info(self):
        return {"limits": {"name": "fake-device"}}

    def evaluate_candidate(self, lower_fn, inputs, reference, repeats=3, **kw):
        from codegen.program import Outcome

        assert lower_fn().kernels
        t = 2e-3 if self.slow else 1e-3
        return Outcome("ok", time_s=t, gflops=1.0, times_s=[t] * repeats, lower_s=0.0,
                       build_s=0.0)

    def close(self):
        pass


def test_a_run_watches_its_leaders_and_a_slow_end_does_not_become_its_figure(
        tmp_path, monkeypatch):
    """With a time budget, the leaders are timed again while the run explores; a host
    slow all through the confirmation at the end then moves the figure by one window of
    several (here: windows of 0.05 s, a round every 0.05 s in an 8 s run: the rounds stop
    where the end's re-timing needs the rest, about 3 s; a loaded host that takes a
    second or two to start the run still leaves them room)."""
    import mapper.explore.record as record
    import mapper.explore.run as run
    import mapper.explore.watch as watch

    monkeypatch.setattr(watch, "MIN_BUDGET_S", 1.0)
    monkeypatch.setattr(watch, "WATCH_EVERY_S", 0.05)
    monkeypatch.setattr(record, "WINDOW_S", 0.05)
    pool = _PhasedPool()
    spread = run.spread_rounds

    def slow_confirmation(rounds, span_s):
        pool.slow = True
        yield from spread(rounds, span_s)

    monkeypatch.setattr(run, "spread_rounds", slow_confirmation)
    path = tmp_path / "p.sqlite"
    res = explore(L3, {"N": 1024}, strategy="random", budget="8s", store=path, pool=pool,
                  options=ExploreOptions.of(count=False, retime=2, repeats=3))
    assert res.watched, "no watch round in a run of 8 s at one every 0.05 s"
    win = res.final_retimed
    # every kernel runs alike: the leaders are the first two, and one of them wins
    assert win is not None and win.confirmed and win.watched > 0
    assert win.median_s == pytest.approx(1e-3)  # its watch rounds' 1 ms, not the end's 2
    assert min(win.min_s, win.max_s) == pytest.approx(1e-3) and win.max_s == 2e-3
    assert f"and {win.watched} while the run explored" in res.summary()
    with ResultStore(path, readonly=True) as st:
        assert sum(len(v) for v in res.watched.values()) == len(st.retime_rows("watch"))
        assert st.retimed()[0].median_s == pytest.approx(win.median_s)
    # a run shorter than MIN_BUDGET_S, or with a budget in candidates, does not watch
    res = explore(L3, {"N": 1024}, strategy="random", budget=3, pool=_PhasedPool(),
                  options=ExploreOptions.of(count=False, retime=2, repeats=3))
    assert res.watched == {}


def test_the_host_s_phases_are_counted_per_kernel_against_its_own_fastest_round():
    from mapper.explore.watch import host_phases

    assert host_phases({}) is None
    assert host_phases({"a": [(0.0, [1.0])]}) is None  # one round: nothing to compare
    rounds = {"a": [(0.0, [1.0, 1.0]), (10.0, [1.3, 1.3]), (20.0, [1.05])],
              "b": [(5.0, [5.0]), (15.0, [5.0])],  # a slower kernel, not a slow phase
              "c": [(7.0, [2.0])]}
    assert host_phases(rounds) == (1, 5, pytest.approx(1.3))


def test_a_run_says_when_its_watch_rounds_met_slow_phases():
    from mapper.explore.run import Budget, Results

    rec = _rec("k", 1.0)
    res = Results(run_id="r", strategy="model", seed=0, store_path=":memory:",
                  context=None, budget=Budget(seconds=600.0))
    res.records.append(rec)
    res.retimed["k"] = Retimed.of(rec, [[1.0]], flops=1e9, confirm=[[1.0]])
    res.watched = {"k": [(0.0, [1.0]), (10.0, [1.0])]}
    assert "the host:" not in res.summary()
    res.watched = {"k": [(0.0, [1.0]), (10.0, [1.25]), (20.0, [1.0])]}
    assert "the host: 1 of 3 watch rounds ran more than 10% slower than their kernel's " \
        "fastest (at worst 1.25x)" in res.summary()
