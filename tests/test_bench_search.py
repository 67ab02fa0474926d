"""experiments/bench_search.py's --retime: the kernels an earlier run found, timed again."""

from __future__ import annotations

import json

import pytest


@pytest.mark.opencl
@pytest.mark.slow  # FMA-peak probe and OpenCL runs
def test_retime_times_an_earlier_runs_kernel_again_and_keeps_its_search_figures(tmp_path):
    from experiments import bench_search
    from ir.conv_layer import ConvLayer
    from mapper.explore import Task

    layer = ConvLayer("tiny", 4, 8, 8, 4)
    task = Task.conv_layer(layer)
    js = task.joint()
    m = js.mappings[0]
    cfg = js.tuning(m).sample(1, seed=0)[0]
    row = {"layer": "tiny", "shape": layer.sizes(), "evaluated": 7, "explore_s": 12.0,
           "to90": [3, 4.0], "to95": [5, 6.0], "stored_gflops": 1.0, "retimed_gflops": 1.0,
           "warnings": [], "best": f"{m}; {json.dumps(cfg)}",
           "found": {"median_gflops": -1.0}, "budget": "30s"}
    earlier, out = tmp_path / "earlier.json", tmp_path / "again.json"
    earlier.write_text(json.dumps({"machine": "x", "peak": None, "rows": [row]}))
    assert bench_search.main(["--retime", str(earlier), "--rounds", "2", "--repeats", "2",
                              "--alone-span", "0.5", "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["peak"] > 0  # the FMA-chain probe ran (at each width it probes)
    (again,) = written["rows"]
    assert again["retimed_from_run"] and again["evaluated"] == 7 and again["to90"] == [3, 4.0]
    # 2 rounds; a kernel of microseconds (its stored 1 GFLOP/s): 50 runs each, not 2
    assert again["repeats"] == 50
    assert again["found"]["median_gflops"] > 0 and len(again["found"]["times_s"]) == 100
    # the fastest round's median: at least the median of every run
    assert again["found"]["round_gflops"] >= again["found"]["median_gflops"]
    # timed alone as the run times its winner: its rounds (3 by default; a 30 s run's
    # confirmation spans 1.5 s, a round a second: still 3) of its runs (50 here)
    alone = again["found_alone"]
    assert alone["rounds"] == 3 and alone["repeats"] == 50 and len(alone["times_s"]) == 150
    assert 0 < alone["span_s"] < 5 and alone["plain_median_gflops"] > 0
    assert alone["round_gflops"] >= alone["median_gflops"] > 0
    assert bench_search.main(["--retime", str(tmp_path / "missing.json")]) == 2


def test_the_peak_is_probed_at_the_widest_vector_the_device_prefers() -> None:
    from experiments.bench_search import peak_widths

    # a 512-bit core's float8 chains leave half of each vector unused
    assert peak_widths(16) == (8, 16)
    assert peak_widths(8) == peak_widths(4) == (8,)


@pytest.mark.slow  # over 5 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_pytorch_gets_the_layers_own_weights_whatever_the_variant(monkeypatch):
    """A kernel-vectorised winner's task holds its weights as KKCM: PyTorch must still get
    the layer's [M, K, K, C] weights (a slice of the task's would be a smaller layer)."""
    import types

    from experiments import baselines, bench_search
    from ir.conv_layer import ConvLayer
    from mapper.explore import Task

    layer = ConvLayer("tiny", 3, 6, 6, 8)
    task = Task.conv_layer(layer, vectorise="kernels")
    m = task.joint().mappings[0]
    cfg = task.joint().tuning(m).sample(1, seed=0)[0]
    seen = []

    def fake_torch(x, w, stride, pad, threads=None):
        seen.append((x.shape, w.shape))
        return (lambda: None), None

    monkeypatch.setattr(baselines, "torch_available", lambda: True)
    monkeypatch.setattr(baselines, "torch_conv_fn", fake_torch)
    args = types.SimpleNamespace(rounds=1, repeats=1, settle=0.0, budget="30s", alone_span=0.5)
    out = bench_search.time_found(layer, task, {"warnings": [], "best": f"{m}; "
                                                f"{json.dumps(cfg)}"}, args)
    assert "error" not in out, out.get("error")
    assert seen == [((6, 6, 3), (8, 3, 3, 3))]


def test_time_to_90_percent_counts_every_variant_of_the_run(tmp_path):
    """A shape's run measured from its start: the chosen variant's records alone, and
    every record of its stores (probes and contests of the other variant included) from
    the start on; a record stored before the start belongs to another run."""
    from experiments.bench_search import _run_records, progress
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record
    from mapper.explore.store import ResultStore

    def rec(key, gflops, created, status="ok"):
        return Record(key=key, run_id="r", strategy="model", seed=0, idx=0,
                      mapping=MapCodes({"A": 20}), tuning={"s": 1}, status=status,
                      gflops=gflops, time_s=1.0, created=created)

    window, kernels = str(tmp_path / "w.sqlite"), str(tmp_path / "w.kernels.sqlite")
    with ResultStore(window) as st:
        for r in (rec("w0", 50.0, 90.0), rec("w1", 80.0, 140.0), rec("w2", 100.0, 300.0)):
            st.add(r)
    with ResultStore(kernels) as st:
        for r in (rec("old", 500.0, 10.0), rec("k0", 95.0, 110.0),
                  rec("k1", 0.0, 120.0, "timeout")):
            st.add(r)
    every = sorted(_run_records([window, kernels, None], 100.0), key=lambda r: r.created)
    assert [r.key for r in every] == ["k0", "k1", "w1", "w2"]
    assert progress(every, 100.0, 100.0, 0.9) == (1, 10.0)  # k0 at 110 s: 95 >= 90
    assert progress(every, 100.0, 100.0, 0.99) == (4, 200.0)
    assert progress(every, 100.0, 1000.0, 0.9) == (-1, pytest.approx(float("nan"),
                                                                    nan_ok=True))


def test_the_answers_are_timed_again_and_90_percent_judged_on_those_times(tmp_path,
                                                                          monkeypatch):
    """The run's answer changed four times (two variants); the first, far below the final
    stored best, is left out. Timed again (one round of c hit by a slow phase), c is within
    90% of the final answer b but not within 95%: b's stored figure was a lucky one."""
    from types import SimpleNamespace

    import codegen.worker
    from experiments import bench_search
    from mapper.encoding import MapCodes
    from mapper.explore.record import Record
    from mapper.explore.store import ResultStore

    def rec(key, gflops, created):
        return Record(key=key, run_id="r", strategy="model", seed=0, idx=0,
                      mapping=MapCodes({"A": 20}), tuning={"k": ord(key)}, status="ok",
                      gflops=gflops, time_s=1.0, created=created)

    stores = {"window": str(tmp_path / "w.sqlite"), "kernels": str(tmp_path / "k.sqlite")}
    with ResultStore(stores["window"]) as st:
        for r in (rec("z", 10.0, 105.0), rec("a", 50.0, 110.0), rec("b", 100.0, 150.0),
                  rec("d", 60.0, 160.0)):
            st.add(r)
    with ResultStore(stores["kernels"]) as st:
        st.add(rec("c", 95.0, 130.0))
    steps = bench_search.answers(stores, 100.0, ("window", None))
    assert [(n, r.key) for n, r in steps] == [("window", "a"), ("kernels", "c"),
                                              ("window", "b")]
    times = {"a": [(2.0,), (2.1,), (2.0,)], "c": [(1.08,), (2.5,), (1.2,)],
             "b": [(1.0,), (1.1,), (1.0,)]}
    calls: list[str] = []

    class Pool:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def evaluate_candidate(self, key, inputs, reference, **kw):
            calls.append(key)
            return Outcome("ok", time_s=0.0, times_s=times[key][calls.count(key) - 1])

    from codegen.program import Outcome

    monkeypatch.setattr(codegen.worker, "WorkerPool", Pool)
    task = SimpleNamespace(lower_fn=lambda m, t: chr(t["k"]), inputs={}, reference=None, flops=1,
                           tolerance={})
    out = bench_search.answers_retimed({"window": task, "kernels": task}, steps, 100.0,
                                       SimpleNamespace(repeats=1))
    assert calls == ["a", "c", "b"] * 3
    assert [a["retimed_s"] for a in out["answers"]] == [2.0, 1.08, 1.0]
    assert out["to90_retimed"] == pytest.approx(30.0)
    assert out["to95_retimed"] == pytest.approx(50.0)


def test_the_answers_follow_what_the_runs_held_by_retiming(tmp_path):
    """Stores with challenges: the run's answer is what each variant held by re-timing
    and, across variants, the one re-timed fastest then; a lucky stored figure that lost
    its challenge ("w2": stored at 97, re-timed at 1.5 s) is never an answer."""
    from experiments import bench_search
    from mapper.encoding import MapCodes
    from mapper.explore.incumbent import CHALLENGER, HOLDS
    from mapper.explore.record import Record
    from mapper.explore.store import ResultStore

    def rec(key, gflops):
        return Record(key=key, run_id="r", strategy="model", seed=0, idx=0,
                      mapping=MapCodes({"A": 20}), tuning={"k": ord(key[0])}, status="ok",
                      gflops=gflops, time_s=1.0, created=1.0)

    stores = {"window": str(tmp_path / "w.sqlite"), "kernels": str(tmp_path / "k.sqlite")}
    w, k = ResultStore(stores["window"]), ResultStore(stores["kernels"])
    with w, k:
        for r in (rec("w1", 60.0), rec("w2", 97.0)):
            w.add(r)
        for r in (rec("k1", 70.0), rec("k2", 96.0)):
            k.add(r)
        for st, key, phase, t in ((w, "w1", HOLDS, 1.4), (k, "k1", HOLDS, 1.2),
                                  (w, "w2", CHALLENGER, 1.5), (w, "w1", HOLDS, 1.4),
                                  (k, "k2", HOLDS, 0.9), (k, "k1", CHALLENGER, 1.2)):
            for rnd in range(2):
                st.add_retime(key, "r", rnd, [t, t], phase=phase)
    steps = bench_search.answers(stores, 0.0, ("kernels", None))
    assert [(n, r.key) for n, r in steps] == [("window", "w1"), ("kernels", "k1"),
                                              ("kernels", "k2")]
    # without challenges (older stores): the fastest stored so far
    plain = {"window": str(tmp_path / "p.sqlite")}
    with ResultStore(plain["window"]) as st:
        for r in (rec("w1", 60.0), rec("w2", 97.0)):
            st.add(r)
    assert [r.key for _, r in bench_search.answers(plain, 0.0, ("window", None))] == \
        ["w1", "w2"]


def test_interleave_runs_each_contender_once_a_round_in_order() -> None:
    from experiments.baselines import RunFailed, interleave

    order: list[str] = []

    def run(name: str, times: list[float]):
        def once() -> list[float]:
            order.append(name)
            return times
        return once

    got = interleave({"a": run("a", [1.0]), "b": run("b", [2.0, 3.0])}, 3, 0.0)
    assert order == ["a", "b"] * 3 and got == {"a": [1.0] * 3, "b": [2.0, 3.0] * 3}

    def fails() -> list[float]:
        raise RunFailed("found kernel re-run: crash")

    with pytest.raises(RunFailed, match="crash"):
        interleave({"a": run("a", [1.0]), "b": fails}, 2, 0.0)


def test_each_contender_is_also_judged_by_its_fastest_round(capsys) -> None:
    """A slow phase that hits one contender's rounds (here the found kernel's first two)
    drags its median of every run; the fastest round's median is its own speed."""
    from experiments.baselines import fastest_round_s, interleave
    from experiments.bench_search import _rounds_ratios

    found = iter([[4.0, 4.0, 4.0], [4.0, 4.0, 3.0], [2.0, 2.1, 9.0]])
    per_round: dict[str, list[list[float]]] = {}
    got = interleave({"found": lambda: next(found), "PyTorch": lambda: [2.5, 2.5, 2.6]}, 3,
                     0.0, per_round)
    assert per_round["found"] == [[4.0, 4.0, 4.0], [4.0, 4.0, 3.0], [2.0, 2.1, 9.0]]
    assert len(got["found"]) == 9 and len(per_round["PyTorch"]) == 3
    assert fastest_round_s(per_round["found"]) == 2.1
    assert fastest_round_s(per_round["PyTorch"]) == 2.5
    assert fastest_round_s([]) is None and fastest_round_s([[]]) is None
    row = {"found": {"round_gflops": 10 / 2.1}, "PyTorch": {"round_gflops": 10 / 2.5},
           "hand-written": {"median_gflops": 3.0}}
    assert _rounds_ratios(row) == ["found 4.8", "PyTorch 4.0 (1.19x)"]
    assert _rounds_ratios({"found": {"median_gflops": 1.0}}) == []


def test_wall_times_warm_up_once_and_kernel_times_refuse_a_failed_run(tmp_path) -> None:
    from types import SimpleNamespace

    from experiments.baselines import RunFailed, kernel_times, wall_times
    from experiments.machine import save_json

    calls: list[int] = []
    assert len(wall_times(lambda: calls.append(1), 4)) == 4 and len(calls) == 5
    outcomes = [SimpleNamespace(ok=True, times_s=(1e-3, 2e-3)),
                SimpleNamespace(ok=False, times_s=(), label="wrong-result", reason="differs")]
    seen: list[dict] = []

    def evaluate(*args, **kw):
        seen.append(kw)
        return outcomes.pop(0)

    pool = SimpleNamespace(evaluate_candidate=evaluate)
    task = SimpleNamespace(inputs={}, reference=None, tolerance={"rtol": 1e-4, "atol": 0.5})
    run = kernel_times(pool, task, lambda: None, repeats=2, flops=1, what="found kernel")
    assert list(run()) == [1e-3, 2e-3]
    # checked as the search checked it: the task's tolerance (a long float32 reduction
    # that cancels to ~0 is off by more than the runner's default tolerance)
    assert seen[0]["atol"] == 0.5 and seen[0]["rtol"] == 1e-4
    with pytest.raises(RunFailed, match="found kernel re-run: wrong-result: differs"):
        run()
    save_json(None, {"x": 1})  # no path: nothing written, no error
    path = tmp_path / "out.json"
    save_json(str(path), {"where": tmp_path})  # a value JSON lacks: its str
    assert json.loads(path.read_text()) == {"where": str(tmp_path)}


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--repeats", "-1"], ["--settle", "nan"],
                                  ["--seed", "-3"], ["--rounds", "two"]])
def test_a_benchmark_refuses_an_out_of_range_option_in_one_line(argv, capsys):
    """Checked before anything is measured: ``--rounds 0`` used to end a long run with a
    traceback (the median of no time)."""
    from experiments import bench_search

    with pytest.raises(SystemExit) as e:
        bench_search.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert ("out of range" in err or "is not" in err) and "Traceback" not in err


def test_the_summary_means_each_contender_over_the_shapes_that_have_it():
    """A shape with no hand-written kernel (a stride-2 or 7x7 one) leaves the hand-written
    mean (never ``nan``) and the count says how many shapes it covers."""
    from experiments.bench_search import summary_lines

    def row(found, hand, torch):
        r = {"found": {"median_gflops": found, "round_gflops": found}}
        if hand:
            r["hand-written"] = {"median_gflops": hand, "round_gflops": hand}
        r["PyTorch"] = {"median_gflops": torch, "round_gflops": torch}
        return r

    lines = summary_lines([row(200.0, None, 100.0), row(300.0, 150.0, 300.0)])
    assert lines[0] == ("geometric mean over 2 shape(s), by medians: found/hand-written 2.00x "
                        "(1 shape(s)), found/PyTorch 1.41x")
    assert len(lines) == 2 and "nan" not in " ".join(lines)
    assert summary_lines([row(200.0, None, 100.0)])[1] == (
        "geometric mean over 1 shape(s), by fastest rounds: found/PyTorch 2.00x")
