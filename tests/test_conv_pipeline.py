"""The whole GPGPU'20 convolution pipeline (pad, partial convolution, final sum, crop) with
the paper's hand mapping, lowered and run on the device at VGG-16 layer sizes.

Regression for a launch bug no smaller test saw: the ``final`` kernel (one private
accumulator per work-item, local size left to the lowering) got a local size equal to its
global size (51,200 work-items for layer 19), above every device's work-group limit, so
the hand-mapped convolution was refused as ``rejected:work-group-size`` at every real
layer size while tiny test layers passed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np
import pytest
from conv_reference import conv2d_hwc

from codegen.launch import fit_private_local_size
from codegen.target import POCL_CPU
from codegen.worker import WorkerPool
from experiments.vgg16 import conv_stage_mappings, paper_like_tuning
from ir.conv_layer import VGG16_LAYERS, ConvLayer
from ir.programs import gpgpu20_conv_pipeline
from mapper.candidates import build_pipeline, reduction_tolerance


def _layer(name: str) -> ConvLayer:
    return next(x for x in VGG16_LAYERS if x.name.split(",")[0] == name)


def _run_hand_mapped(layer: ConvLayer, pool: WorkerPool):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((layer.H, layer.W, layer.C)).astype(np.float32)
    w = rng.standard_normal((layer.M, layer.K, layer.K, layer.C)).astype(np.float32)
    ref = conv2d_hwc(x, w, stride=layer.S, pad=(layer.P,) * 4).astype(np.float32)
    pipe = gpgpu20_conv_pipeline()
    sizes = {**layer.sizes(), **paper_like_tuning(layer)}
    lower_fn = functools.partial(build_pipeline, pipe, conv_stage_mappings(pipe), sizes,
                                 flops=layer.flops)
    cp = lower_fn()
    limits = pool.device_info()["limits"]
    for k in cp.kernels:  # what the device would refuse at launch
        if k.local_size is not None:
            assert math.prod(k.local_size) <= limits["max_work_group_size"], k.name
            assert all(a <= b for a, b in zip(k.local_size, limits["max_work_item_sizes"]))
    out = pool.evaluate_candidate(lower_fn, {"inputData": x, "kernelsWeights": w}, ref,
                                  timeout_s=300, repeats=1, flops=layer.flops,
                                  **reduction_tolerance(ref))
    return cp, out


@pytest.fixture(scope="module")
def pool():
    with WorkerPool() as p:
        yield p


def test_private_local_size_respects_every_device_limit():
    lim = replace(POCL_CPU, max_work_group_size=256, max_work_item_sizes=(64, 32, 16),
                  private_group_budget=1 << 30)
    for g in [(51200,), (50176, 3), (4096, 4096, 7), (97,), (1, 1, 1)]:
        ls = fit_private_local_size(g, 4, lim)
        assert all(gi % li == 0 for gi, li in zip(g, ls))
        assert all(li <= m for li, m in zip(ls, lim.max_work_item_sizes))
        assert math.prod(ls) <= lim.max_work_group_size
    assert fit_private_local_size((51200,), 4, lim) == (64,)
    # the private budget still binds when it is the tighter limit
    small = replace(POCL_CPU, private_group_budget=1000)
    assert math.prod(fit_private_local_size((4096, 64), 100, small)) <= 10


def test_a_free_local_size_leaves_groups_for_every_compute_unit():
    """PoCL runs a work-group on one thread: a free local size leaves at least
    GROUPS_PER_UNIT groups per compute unit where the work-items allow it."""
    from codegen.launch import GROUPS_PER_UNIT

    for units in (2, 8):
        lim = replace(POCL_CPU, max_compute_units=units)
        for g in [(1, 784, 1), (7, 28, 2), (196,), (6, 49, 6), (64, 64)]:
            ls = fit_private_local_size(g, 4, lim)
            assert all(gi % li == 0 for gi, li in zip(g, ls))
            groups = math.prod(g) // math.prod(ls)
            assert groups >= min(math.prod(g), GROUPS_PER_UNIT * units)
        # fewer work-items than that: one per group
        assert fit_private_local_size((7,), 4, lim) == (1,)


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.opencl
def test_hand_mapped_pipeline_runs_on_a_scaled_vgg16_layer(pool):
    layer = ConvLayer("19/4", C=128, H=28, W=28, M=128)  # output 28x28x128 > 4096 items
    cp, out = _run_hand_mapped(layer, pool)
    assert len(cp.kernels) == 4
    final = next(k for k in cp.kernels if k.name.startswith("final"))
    assert math.prod(final.global_size) > pool.device_info()["limits"]["max_work_group_size"]
    assert out.status == "ok", f"{out.label}: {out.reason}"


@pytest.mark.opencl
@pytest.mark.slow
def test_hand_mapped_pipeline_runs_on_full_vgg16_layer_19(pool):
    cp, out = _run_hand_mapped(_layer("19"), pool)
    assert out.status == "ok", f"{out.label}: {out.reason}"


def test_the_crop_is_left_out_where_the_tiles_cover_the_output():
    """rho = 0 and tiles that divide the output: the crop stage would copy its input
    unchanged (the interpreter says so), and the lowered pipeline has no crop kernel; with
    rho > 0 it crops and is kept."""
    from ir.interp import evaluate

    layer = ConvLayer("t", 4, 6, 6, 4)
    pipe = gpgpu20_conv_pipeline()
    crop = pipe.stage("crop")
    exact = {**layer.sizes(), "theta": 4, "rho": 0, "kappa": 2, "sigma": 2, "omega": 12,
             "v": 4}
    assert crop.identity_at(exact) and not crop.identity_at({**exact, "rho": 2})
    x = np.arange(6 * 6 * 4, dtype=np.float32).reshape(6, 6, 4)
    np.testing.assert_array_equal(evaluate(crop.program, {"paddedOutput": x}, exact), x)
    names = [k.name for k in build_pipeline(pipe, conv_stage_mappings(pipe), exact).kernels]
    assert not any(n.startswith("crop") for n in names) and len(names) == 3, names
    names = [k.name for k in build_pipeline(pipe, conv_stage_mappings(pipe),
                                            {**exact, "rho": 2}).kernels]
    assert any(n.startswith("crop") for n in names), names


def test_a_stage_kernel_does_not_depend_on_another_stage_s_tuning():
    """The pad stage mentions P and rho only: candidates that differ in the partial
    stage's tuning share its kernel source, so its compiled program is reused; its header
    names only the sizes it mentions. Lowered once per process (the cache in
    ``mapper.candidates``), it is the kernel a fresh lowering gives."""
    from codegen.lower import lower
    from mapper.api import lower_mapping

    layer = ConvLayer("t", 4, 6, 6, 4)
    pipe = gpgpu20_conv_pipeline()
    maps = conv_stage_mappings(pipe)
    base = {**layer.sizes(), "theta": 4, "rho": 2, "kappa": 2, "sigma": 2, "omega": 12,
            "v": 4}
    a = build_pipeline(pipe, maps, base).kernels[0]
    b = build_pipeline(pipe, maps, {**base, "kappa": 4, "sigma": 1}).kernels[0]
    assert a.name == b.name == "pad" and a.source == b.source
    assert "kappa" not in a.source and "rho=2" in a.source
    fresh = lower(lower_mapping(pipe.stage("pad").program, maps["pad"]), base, name="pad")
    assert fresh.kernels[0].source == a.source


@pytest.mark.slow
@pytest.mark.opencl
@pytest.mark.parametrize("rho", [0, 2])
def test_pipeline_with_and_without_the_crop_computes_the_layer(pool, rho):
    layer = ConvLayer("t", 4, 6, 6, 4)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 6, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 4)).astype(np.float32)
    ref = conv2d_hwc(x, w, stride=1, pad=(1,) * 4).astype(np.float32)
    pipe = gpgpu20_conv_pipeline()
    sizes = {**layer.sizes(), "theta": 4, "rho": rho, "kappa": 2, "sigma": 2, "omega": 12,
             "v": 4}
    fn = functools.partial(build_pipeline, pipe, conv_stage_mappings(pipe), sizes,
                           flops=layer.flops)
    out = pool.evaluate_candidate(fn, {"inputData": x, "kernelsWeights": w}, ref,
                                  timeout_s=120, repeats=1, flops=layer.flops,
                                  **reduction_tolerance(ref))
    assert out.ok, out.reason


def test_which_stages_read_only_the_stage_before():
    """``Stage.reads_only_previous``: the crop and the final sum read only their
    previous stage's output; the partial convolution reads the weights too."""
    stages = {st.name: st for st in gpgpu20_conv_pipeline().stages}
    assert stages["final"].reads_only_previous and stages["crop"].reads_only_previous
    assert not stages["partial"].reads_only_previous
    assert not stages["pad"].reads_only_previous  # a pipeline input
