"""experiments/bench_search.py's --retime: the kernels an earlier run found, timed again."""

from __future__ import annotations

import json

import pytest


@pytest.mark.opencl
@pytest.mark.slow  # FMA-peak probe and OpenCL runs
def test_retime_times_an_earlier_runs_kernel_again_and_keeps_its_search_figures(tmp_path):
    from experiments import bench_search
    from ir.programs import ConvLayer
    from mapper.explore import Task

    layer = ConvLayer("tiny", 4, 8, 8, 4)
    task = Task.conv_layer(layer)
    js = task.joint()
    m = js.mappings[0]
    cfg = js.tuning(m).sample(1, seed=0)[0]
    row = {"layer": "tiny", "shape": layer.sizes(), "evaluated": 7, "explore_s": 12.0,
           "to90": [3, 4.0], "to95": [5, 6.0], "stored_gflops": 1.0, "retimed_gflops": 1.0,
           "warnings": [], "best": f"{m}; {json.dumps(cfg)}",
           "found": {"median_gflops": -1.0}}
    earlier, out = tmp_path / "earlier.json", tmp_path / "again.json"
    earlier.write_text(json.dumps({"machine": "x", "peak": None, "rows": [row]}))
    assert bench_search.main(["--retime", str(earlier), "--rounds", "2", "--repeats", "2",
                              "--json", str(out)]) == 0
    (again,) = json.loads(out.read_text())["rows"]
    assert again["retimed_from_run"] and again["evaluated"] == 7 and again["to90"] == [3, 4.0]
    assert again["found"]["median_gflops"] > 0 and len(again["found"]["times_s"]) == 4
    assert bench_search.main(["--retime", str(tmp_path / "missing.json")]) == 2


@pytest.mark.slow  # over 5 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_pytorch_gets_the_layers_own_weights_whatever_the_variant(monkeypatch):
    """A kernel-vectorised winner's task holds its weights as KKCM: PyTorch must still get
    the layer's [M, K, K, C] weights (a slice of the task's would be a smaller layer)."""
    import types

    from experiments import baselines, bench_search
    from ir.programs import ConvLayer
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
    args = types.SimpleNamespace(rounds=1, repeats=1, settle=0.0)
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
