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
