"""Regressions found by the demo and the witnesses, each run on the OpenCL device."""

import numpy as np
import pytest

from codegen.runner import Runner
from ir.builders import as_vector, dot, lam, map_glb, param
from ir.nodes import FunCall, Lambda
from ir.types import Float, array
from mapper.candidates import build_candidate


@pytest.fixture(scope="module")
def runner():
    return Runner()


@pytest.mark.parametrize("width", [2, 4, 8, 16])
def test_dot_on_every_vector_width(runner, width):
    """OpenCL's dot() has no float8/float16 overload: wider vectors sum the halves' dots."""
    from codegen.lower import lower

    X = param("X", array(Float, "N"))
    prog = Lambda((X,), map_glb(0, lam(lambda v: FunCall(dot, (v, v))))(as_vector(width)(X)))
    x = np.random.default_rng(width).standard_normal(64).astype(np.float32)
    cp = lower(prog, {"N": 64})
    ref = (x.reshape(-1, width) ** 2).sum(1)
    o = runner.evaluate(cp, {"X": x}, ref, repeats=1)
    assert o.ok, o.reason


def test_listing3_candidate_lowers_with_mapper_candidates(runner):
    from ir.interp import evaluate
    from ir.programs import cc22_listing3

    p = cc22_listing3(local=True)
    x = np.arange(256, dtype=np.float32)
    sizes = {"N": 256, "s0": 32, "s1": 4}
    ref = evaluate(p, {"X": x, "y": 2.0, "z": 1.0}, sizes)
    cp = build_candidate(p, "A=W0 B=L0 C=L0 D=S", sizes, flops=512)
    o = runner.evaluate(cp, {"X": x, "y": np.float32([2.0]), "z": np.float32([1.0])}, ref,
                        repeats=1, flops=512)
    assert o.ok and o.gflops > 0


def test_reduction_tolerance_scales_with_the_outputs():
    """Found by explore_conv: a 4608-term float32 sum that cancels to 0.01 was 4e-4 off the
    float64 reference, failing a fixed atol=1e-4; the tolerance now scales with max|ref|."""
    import numpy as np

    from mapper.candidates import reduction_tolerance

    ref = np.array([0.0101033, 250.0])
    tol = reduction_tolerance(ref)
    assert tol["atol"] == pytest.approx(2.5e-3)
    got = np.array([0.00999069, 250.0])
    np.testing.assert_allclose(got, ref, **tol)
    with pytest.raises(AssertionError):  # an element off by the outputs' scale still fails
        np.testing.assert_allclose(np.array([0.0101033, 240.0]), ref, **tol)
    assert reduction_tolerance(np.array([0.5]))["atol"] == 1e-4


def test_written_buffers_are_not_restrict():
    """Found on an H100 (NVIDIA OpenCL): with A=mapWrg(0) B=mapLcl(0) C=mapSeq D=mapLcl(0),
    48 of 64 results were NaN because the global temporary written by D and read by B after
    a barrier was declared restrict; PoCL computed it right. Only read-only buffers are
    restrict now."""
    import re

    from ir.programs import cc22_listing3

    cp = build_candidate(cc22_listing3(), "A=W0 B=L0 C=S D=L0", {"N": 64, "s0": 16, "s1": 4})
    src = cp.kernels[0].source
    params = re.search(r"__kernel void \w+\((.*?)\)", src).group(1).split(",")
    assert any("tmpC" in q for q in params)
    for q in params:
        assert ("restrict" in q) == q.strip().startswith("const"), q


def test_private_memory_bounds_the_work_group(runner):
    """Found by explore_conv on PoCL: a mapGlb kernel with 6.7-27 KB of private memory per
    work-item crashed (SIGSEGV) in a runtime-chosen work-group, since PoCL keeps a group's
    private arrays on one thread's stack. The lowering now picks a local size that fits
    the per-group budget, and rejects a mapping-fixed work-group that does not fit."""
    import math

    from codegen.errors import PrivateMemoryError
    from codegen.lower import lower
    from codegen.target import POCL_CPU
    from ir.conv_layer import ConvLayer
    from ir.programs import conv_partial_stage
    from mapper.api import lower_mapping

    layer = ConvLayer("s", C=8, H=14, W=14, M=64, K=3, S=1, P=1)
    env = dict(layer.sizes(), theta=16, rho=0, kappa=64, sigma=98, omega=8, v=1)
    glb = "T=S G=G2 W=G1 C=G0 S1=S S2=F R1=S R2=S P=S I1=S I2=F"
    cp = lower(lower_mapping(conv_partial_stage(), glb), env)
    k = cp.kernels[0]
    assert k.private_bytes * 8 > POCL_CPU.private_group_budget  # would not fit 8 items
    assert k.local_size is not None
    assert math.prod(k.local_size) * k.private_bytes <= POCL_CPU.private_group_budget
    rng = np.random.default_rng(0)
    pad = rng.standard_normal((16, 16, 8)).astype(np.float32)
    w = rng.standard_normal((64, 3, 3, 8)).astype(np.float32)
    assert runner.evaluate(cp, {"paddedInput": pad, "kernelsWeights": w}, None,
                           repeats=1).ok
    hand = "T=W1 G=W0 W=L1 C=L0 S1=S S2=F R1=S R2=S P=S I1=S I2=F"
    with pytest.raises(PrivateMemoryError, match="per work-group"):
        lower(lower_mapping(conv_partial_stage(), hand), dict(env, sigma=1, omega=8))
