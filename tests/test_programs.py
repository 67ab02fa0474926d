"""The papers' programs computed by the interpreter equal independent numpy references."""

import itertools

import numpy as np
import pytest
from conv_reference import conv2d_hwc

from experiments.vgg16 import PAPER_TUNING_LAYER7
from ir.conv_layer import VGG16_LAYERS, ConvLayer, ConvPresetError, vgg16_layer
from ir.errors import ConstraintViolation
from ir.interp import evaluate
from ir.pipeline import run_pipeline
from ir.programs import (
    conv_partial_stage,
    gpgpu20_conv_highlevel,
    gpgpu20_conv_pipeline,
    gpgpu20_stencil2d,
)
from ir.typecheck import typecheck


def test_stencil_matches_numpy():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 3)).astype(np.float32)
    x = rng.standard_normal((6, 9)).astype(np.float32)
    out = evaluate(gpgpu20_stencil2d(), {"weights": w, "inputData": x})
    ref = conv2d_hwc(x[:, :, None], w[None, :, :, None])[:, :, 0]
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "H,W,C,M,K,stride,pads",
    [
        (5, 5, 2, 3, 3, 1, (1, 1, 1, 1)),
        (7, 6, 3, 2, 3, 2, (1, 1, 1, 1)),  # odd size, stride 2
        (8, 9, 1, 4, 2, 2, (0, 1, 2, 0)),  # asymmetric padding, even kernel
        (6, 6, 4, 1, 5, 1, (2, 2, 2, 2)),
        (9, 7, 2, 2, 3, 3, (0, 0, 0, 0)),  # stride 3, no padding, partial windows dropped
    ],
)
def test_highlevel_conv_matches_numpy(H, W, C, M, K, stride, pads):
    rng = np.random.default_rng(H * 100 + W)
    x = rng.standard_normal((H, W, C)).astype(np.float32)
    w = rng.standard_normal((M, K, K, C)).astype(np.float32)
    b = rng.standard_normal(M).astype(np.float32)
    t, bo, le, r = pads
    sizes = dict(padT=t, padB=bo, padL=le, padR=r, strideY=stride, strideX=stride)
    out = evaluate(gpgpu20_conv_highlevel(),
                   {"kernelsWeights": w, "kernelsBiases": b, "inputData": x}, sizes)
    ref = conv2d_hwc(x, w, b, stride, pads)
    assert out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------- low-level pipeline


def valid_tunings(layer: ConvLayer, thetas, rhos, kappas, sigmas, omegas, vs):
    """Every tuning in the given ranges that satisfies the partial convolution's constraints."""
    info = typecheck(conv_partial_stage())
    cons = info.constraints
    base = layer.sizes()
    for theta, rho, kappa, sigma, omega, v in itertools.product(
        thetas, rhos, kappas, sigmas, omegas, vs
    ):
        env = dict(base, theta=theta, rho=rho, kappa=kappa, sigma=sigma, omega=omega, v=v)
        if theta < layer.K or theta - (layer.K - layer.S) < 1:
            continue
        if all(c.rel.evaluate(env) for c in cons):
            yield env


@pytest.mark.slow
@pytest.mark.parametrize(
    "layer",
    [
        ConvLayer("small", C=2, H=6, W=6, M=4, K=3, S=1, P=1),
        ConvLayer("odd-stride2", C=2, H=7, W=7, M=2, K=3, S=2, P=1),
    ],
    ids=lambda la: la.name,
)
def test_lowlevel_pipeline_every_valid_tuning(layer):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((layer.H, layer.W, layer.C)).astype(np.float32)
    w = rng.standard_normal((layer.M, layer.K, layer.K, layer.C)).astype(np.float32)
    ref = conv2d_hwc(x, w, None, layer.S, (layer.P,) * 4)
    tunings = list(valid_tunings(layer, range(3, 9), range(0, 6), (1, 2, 4), (1, 2, 3, 4),
                                 (1, 2, 3, 6, 9, 18), (1, 2, 3)))
    assert len(tunings) > 40, "the search should produce many valid tunings"
    pipe = gpgpu20_conv_pipeline()
    for env in tunings:
        out = run_pipeline(pipe, {"inputData": x, "kernelsWeights": w}, env)
        assert out.shape == ref.shape, env
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4, err_msg=str(env))


def test_lowlevel_rejects_invalid_tuning():
    layer = ConvLayer("small", C=2, H=6, W=6, M=4, K=3, S=1, P=1)
    x = np.zeros((6, 6, 2), np.float32)
    w = np.zeros((4, 3, 3, 2), np.float32)
    env = dict(layer.sizes(), theta=4, rho=0, kappa=3, sigma=1, omega=2, v=1)  # M % kappa != 0
    with pytest.raises(ConstraintViolation, match="kappa"):
        run_pipeline(gpgpu20_conv_pipeline(), {"inputData": x, "kernelsWeights": w}, env)


def test_paper_layer7_tuning_is_valid():
    layer = vgg16_layer("7")
    env = dict(layer.sizes(), **PAPER_TUNING_LAYER7)
    info = typecheck(conv_partial_stage(), env)
    assert all(c.rel.evaluate(env) for c in info.constraints)


def test_vgg16_table():
    assert len(VGG16_LAYERS) == 9
    assert vgg16_layer("19") is vgg16_layer("21")
    assert vgg16_layer("7").C == 128 and vgg16_layer("7").H == 112
    assert vgg16_layer("0").flops == 2 * 224 * 224 * 64 * 3 * 9
    with pytest.raises(ConvPresetError, match="no VGG-16 layer"):
        vgg16_layer("99")


def test_lowlevel_scaled_vgg_layer_paper_tuning():
    """Layer 7 shape scaled down (channels /16, spatial /8) with the paper's tile sizes."""
    layer = ConvLayer("7/scaled", C=8, H=14, W=14, M=8, K=3, S=1, P=1)
    env = dict(layer.sizes(), theta=5, rho=1, kappa=4, sigma=3, omega=8, v=4)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((14, 14, 8)).astype(np.float32)
    w = rng.standard_normal((8, 3, 3, 8)).astype(np.float32)
    out = run_pipeline(gpgpu20_conv_pipeline(), {"inputData": x, "kernelsWeights": w}, env)
    np.testing.assert_allclose(out, conv2d_hwc(x, w, None, 1, (1, 1, 1, 1)), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("H,W,C,M,K,S,P", [(7, 9, 3, 4, 3, 1, 1), (8, 8, 2, 3, 1, 1, 0),
                                           (9, 7, 3, 2, 3, 2, 1), (6, 6, 1, 1, 5, 1, 2)])
def test_library_conv_reference_agrees_with_the_tests_witness(H, W, C, M, K, S, P):
    """mapper.data.conv2d_reference (what explorations and the demo check kernels against)
    against the tests' independent convolution, stride 2 and 1x1 included."""
    from mapper.data import conv2d_reference

    rng = np.random.default_rng(H * 100 + K)
    x = rng.standard_normal((H, W, C)).astype(np.float32)
    w = rng.standard_normal((M, K, K, C)).astype(np.float32)
    got = conv2d_reference(x, w, S, P)
    want = conv2d_hwc(x, w, stride=S, pad=(P, P, P, P))
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
