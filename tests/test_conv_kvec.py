"""The convolution vectorised across kernels (``ir.programs.conv_partial_kvec_stage``): the
interpreter and the lowered kernels against a float64 convolution, on shapes the window
variant pads (3 channels), stride 2, 1x1 kernels and tiles that do not divide the input."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conv_reference import conv2d_hwc

from codegen.worker import WorkerPool
from ir.conv_layer import ConvLayer
from ir.pipeline import run_pipeline
from ir.programs import gpgpu20_conv_pipeline
from mapper.explore.task import Task, conv_variants

SHAPES = [
    ConvLayer("rgb", C=3, H=7, W=6, M=16, K=3, S=1, P=1),   # 27-long window: no padding
    ConvLayer("s2", C=4, H=9, W=7, M=8, K=3, S=2, P=1),     # stride 2
    ConvLayer("1x1", C=8, H=5, W=6, M=16, K=1, S=1, P=0),   # 1x1, no padding
]


@functools.cache
def _task(layer: ConvLayer) -> Task:
    """The kernel-vectorised task of ``layer`` (its joint space, inputs and float64
    reference), built once: two tests read it, neither changes it."""
    return Task.conv_layer(layer, vectorise="kernels")


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


def _inputs(layer: ConvLayer, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((layer.H, layer.W, layer.C)).astype(np.float32)
    w = rng.standard_normal((layer.M, layer.K, layer.K, layer.C)).astype(np.float32)
    ref = conv2d_hwc(x.astype(np.float64), w.astype(np.float64), stride=layer.S,
                     pad=(layer.P,) * 4)
    return x, w, ref


@pytest.mark.parametrize("layer", SHAPES, ids=lambda x: x.name)
def test_interpreter_computes_the_convolution(layer):
    """Sampled tunings of the kernel-vectorised pipeline, evaluated by the reference
    interpreter, give the convolution (crop or not, several chunks or one)."""
    task = _task(layer)
    assert task.sizes["C"] == layer.C  # no zero channels: the window is not vectorised
    js = task.joint()
    x, w, ref = _inputs(layer)
    kkcm = np.ascontiguousarray(w.transpose(1, 2, 3, 0))
    for _m, cfg in js.sample(4, seed=1, per_mapping=True):
        sizes = {**task.sizes, **cfg}
        out = np.asarray(run_pipeline(gpgpu20_conv_pipeline(vectorise="kernels"),
                                      {"inputData": x, "kernelsWeights": kkcm}, sizes))
        np.testing.assert_allclose(out.reshape(ref.shape), ref, rtol=1e-4, atol=1e-4,
                                   err_msg=str(cfg))


def test_unknown_vectorisation_is_refused():
    with pytest.raises(ValueError, match="vectorise must be one of"):
        gpgpu20_conv_pipeline(vectorise="lanes")


def test_the_variants_are_the_two_vectorisations():
    layer = SHAPES[0]
    vs = conv_variants(layer, winograd=False)
    assert list(vs) == ["window", "kernels"]
    assert vs["window"].sizes["C"] == 4 and vs["kernels"].sizes["C"] == 3
    assert vs["window"].program_hash != vs["kernels"].program_hash
    # the weights in each variant's layout, the same numbers
    np.testing.assert_array_equal(vs["kernels"].inputs["kernelsWeights"],
                                  vs["window"].inputs["kernelsWeights"][..., :3]
                                  .transpose(1, 2, 3, 0))


@pytest.mark.slow  # over 10 s each (fast-subset durations): not in the fast subset
@pytest.mark.opencl
@pytest.mark.parametrize("layer", SHAPES, ids=lambda x: x.name)
def test_sampled_candidates_run_correctly(layer):
    """Candidates drawn from the joint space (one per mapping drawn), lowered and run
    against the task's float64 reference: every one that runs is correct."""
    task = Task.conv_layer(layer, vectorise="kernels")
    js = task.joint()
    ok = 0
    with WorkerPool() as pool:
        for m, cfg in js.sample(5, seed=2, per_mapping=True):
            o = pool.evaluate_candidate(task.lower_fn(m, cfg), task.inputs, task.reference,
                                        timeout_s=120, repeats=1, flops=task.flops,
                                        **task.tolerance)
            assert o.status in ("ok", "rejected"), f"{m} {cfg}: {o.label}: {o.reason}"
            ok += o.ok
    assert ok >= 3


@pytest.mark.slow  # over 5 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_a_register_blocked_candidate_vectorises_across_kernels():
    """The outer-product form the variant exists for: one work-item per tile and kernel
    group, sigma x kappa/v vector accumulators updated by a broadcast input element, the
    weights read as whole vectors."""
    layer = ConvLayer("rgb", C=3, H=12, W=12, M=16, K=3, S=1, P=1)
    task = Task.conv_layer(layer, vectorise="kernels")
    m = task.joint().problem.mapping("T=G0 G=G1 W=S C=S S1=S S2=F R1=S R2=S P=S I1=S I2=F")
    cfg = {"theta": 6, "rho": 0, "sigma": 4, "kappa": 16, "omega": 27, "v": 8}
    prog = task.lower_fn(m, cfg)()
    src = next(k.source for k in prog.kernels if k.name.startswith("partial"))
    assert "float8 uf_scaleAdd_v8(float8 acc, float x, float8 w)" in src
    assert "vload8(" in src and "kernelsWeights" in src
    with WorkerPool() as pool:
        o = pool.evaluate_candidate(task.lower_fn(m, cfg), task.inputs, task.reference,
                                    timeout_s=120, repeats=1, flops=task.flops,
                                    **task.tolerance)
    assert o.ok, o.reason


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
@pytest.mark.parametrize("layer", SHAPES[:2], ids=lambda x: x.name)
def test_one_chunk_writes_the_output_without_a_final_stage(layer, pool):
    """Where one chunk covers the window (omega = C*K*K) the partial stage writes the
    image itself (``ir.programs.fold_final_kvec``): no final kernel, the same result; with
    several chunks the final stage sums them."""
    task = _task(layer)
    js = task.joint()
    whole = layer.C * layer.K * layer.K
    found = {}
    # each drawn mapping builds its tuning space: 10 draws, not 40 (the first 10 of the
    # seeded sample, which a longer one starts with, hold both kinds on these layers)
    for m, cfg in js.sample(10, seed=3, per_mapping=True):
        found.setdefault(cfg["omega"] == whole, (m, cfg))
        if len(found) == 2:
            break
    assert set(found) == {True, False}
    for one, (m, cfg) in found.items():
        prog = task.lower_fn(m, cfg)()
        names = [k.name.split("_")[0] for k in prog.kernels]
        assert ("final" not in names) == one, (cfg, names)
        # the program just lowered, run in a worker (lowering it again there would build
        # every stage's mapping problem anew in that process)
        o = pool.evaluate(prog, task.inputs, task.reference, timeout_s=120, repeats=1,
                          flops=task.flops, **task.tolerance)
        assert o.status in ("ok", "rejected"), f"{m} {cfg}: {o.label}: {o.reason}"
        assert o.status == "ok" or not one, o.reason
