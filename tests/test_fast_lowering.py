"""Fast code from the lowering (issue 9): vector accumulators, hoisted index arithmetic,
unrolled private loops, the contiguous (``coalesce=False``) convolution layout. Each test
fails when its feature is removed; the device tests check the numbers as well."""

import re

import numpy as np
import pytest

from codegen.emit import UNROLL_MAX
from codegen.lower import lower
from codegen.runner import Runner
from ir.builders import add, as_vector, dot, get, lam, map_glb, param, reduce_, zip_
from ir.interp import evaluate
from ir.nodes import FunCall, Lambda, Literal
from ir.programs import (
    PAPER_HAND_MAPPING,
    ConvLayer,
    conv_partial_stage,
    gpgpu20_conv_pipeline,
    run_pipeline,
)
from ir.types import Float, array
from mapper.api import lower_mapping
from mapper.candidates import (
    conv_stage_mappings,
    first_mapping,
    lower_pipeline,
    reduction_tolerance,
)


@pytest.fixture(scope="module")
def runner():
    return Runner()


def dot_rows(width: int) -> Lambda:
    """``out[i] = sum_j dot(X[i][j], Y[i][j])`` over ``floatwidth`` vectors, rows mapGlb(0)."""
    X = param("X", array(Float, "M", "N"))
    Y = param("Y", array(Float, "M", "N"))

    def row(pair):
        xs = FunCall(as_vector(width), (FunCall(get(0), (pair,)),))
        ys = FunCall(as_vector(width), (FunCall(get(1), (pair,)),))
        step = lam(lambda acc, p: FunCall(add, (acc, FunCall(dot, (
            FunCall(get(0), (p,)), FunCall(get(1), (p,)))))), arity=2)
        return FunCall(reduce_(step), (Literal(0.0, Float), zip_(xs, ys)))

    return Lambda((X, Y), map_glb(0, lam(row))(zip_(X, Y)))


def _loop_body(src: str, header: str) -> list[str]:
    """The lines of the first loop whose ``for`` line contains ``header``."""
    lines = src.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("for") and header in ln)
    depth, body = 0, []
    for ln in lines[start:]:
        depth += ln.count("{") - ln.count("}")
        body.append(ln)
        if depth == 0:
            break
    return body[1:-1]


@pytest.mark.parametrize("width", [4, 8, 16])
def test_dot_reduction_accumulates_in_vector_registers(runner, width):
    prog = dot_rows(width)
    sizes = {"M": 8, "N": 64}
    cp = lower(prog, sizes)
    src = cp.kernels[0].source
    assert re.search(rf"float{width} vacc_\w+", src), src
    body = _loop_body(src, "// reduce")
    assert any("fma(" in ln for ln in body), body
    assert not any("dot" in ln for ln in body), body  # no horizontal sum per iteration
    assert f"liftmap_hsum{width}(" in src
    rng = np.random.default_rng(width)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    y = rng.standard_normal((8, 64)).astype(np.float32)
    ref = (x.astype(np.float64) * y).sum(1)
    o = runner.evaluate(cp, {"X": x, "Y": y}, ref, repeats=1, **reduction_tolerance(ref))
    assert o.ok, o.reason
    interp = evaluate(prog, {"X": x, "Y": y}, sizes)
    np.testing.assert_allclose(np.asarray(interp, dtype=np.float64).reshape(-1), ref,
                               **reduction_tolerance(ref))


def _partial(coalesce: bool, layer: ConvLayer, tuning: dict) -> str:
    p = conv_partial_stage(coalesce=coalesce)
    low = lower_mapping(p, first_mapping(p, PAPER_HAND_MAPPING), fusion="free")
    return lower(low, dict(layer.sizes(), **tuning)).kernels[0].source


LAYER19 = ConvLayer("19", C=512, H=28, W=28, M=512, K=3, S=1, P=1)


def test_hand_mapped_partial_inner_loop_has_no_division():
    """Contiguous chunks (coalesce=False) with ω dividing C: the reduce loop's indices are
    a hoisted loop-invariant int plus ``8*r`` (no ``/`` or ``%`` in the loop)."""
    tuning = dict(theta=5, rho=2, kappa=4, sigma=3, omega=128, v=8)
    src = _partial(False, LAYER19, tuning)
    body = _loop_body(src, "// reduce")
    code = [ln.split("//")[0] for ln in body]
    assert not any("/" in ln or "%" in ln for ln in code), "\n".join(body)
    assert re.search(r"int lm_ix\d+ = .*[/%]", src)  # the divisions moved above the loop
    assert sum("fma(" in ln for ln in code) == tuning["kappa"] * tuning["sigma"]


def test_coalesced_partial_keeps_the_reorder():
    tuning = dict(theta=5, rho=2, kappa=4, sigma=3, omega=144, v=8)
    body = _loop_body(_partial(True, LAYER19, tuning), "// reduce")
    assert any("%" in ln.split("//")[0] for ln in body)  # reorder(stride): j % nC


def test_private_loops_beyond_eight_iterations_are_unrolled():
    """σ x κ = 3 x 12 accumulators: the 12-iteration loops over private arrays unroll."""
    tuning = dict(theta=5, rho=2, kappa=12, sigma=3, omega=128, v=8)
    layer = ConvLayer("k12", C=512, H=28, W=28, M=96, K=3, S=1, P=1)
    src = _partial(False, layer, tuning)
    assert "unrolled, i_I2 = 0..11" in src
    assert "unrolled, i_R2 = 0..11" in src
    assert UNROLL_MAX >= 12


SMALL = ConvLayer("small", C=8, H=6, W=6, M=4, K=3, S=1, P=1)


@pytest.mark.parametrize("coalesce", [False, True])
def test_contiguous_layout_matches_the_interpreter(runner, coalesce):
    tuning = dict(theta=4, rho=0, kappa=2, sigma=2, omega=24, v=4)
    sizes = dict(SMALL.sizes(), **tuning)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((SMALL.H, SMALL.W, SMALL.C)).astype(np.float32)
    w = rng.standard_normal((SMALL.M, SMALL.K, SMALL.K, SMALL.C)).astype(np.float32)
    pipe = gpgpu20_conv_pipeline(coalesce=coalesce)
    ref = np.asarray(run_pipeline(pipe, {"inputData": x, "kernelsWeights": w}, sizes),
                     dtype=np.float64)
    cp = lower_pipeline(pipe, conv_stage_mappings(pipe), sizes)
    o = runner.evaluate(cp, {"inputData": x, "kernelsWeights": w}, ref, repeats=1,
                        **reduction_tolerance(ref))
    assert o.ok, o.reason
    # both layouts compute the same convolution
    other = run_pipeline(gpgpu20_conv_pipeline(coalesce=not coalesce),
                         {"inputData": x, "kernelsWeights": w}, sizes)
    np.testing.assert_allclose(np.asarray(other, dtype=np.float64), ref, rtol=1e-4, atol=1e-4)


def test_accumulator_read_elsewhere_is_not_vectorised(runner):
    """``acc' = (acc + dot(x, y)) + acc`` reads the accumulator twice: reassociating it would
    change the result, so the loop keeps its scalar accumulator (and stays correct)."""
    X = param("X", array(Float, "M", "N"))
    Y = param("Y", array(Float, "M", "N"))

    def row(pair):
        xs = FunCall(as_vector(4), (FunCall(get(0), (pair,)),))
        ys = FunCall(as_vector(4), (FunCall(get(1), (pair,)),))
        step = lam(lambda acc, p: FunCall(add, (FunCall(add, (acc, FunCall(dot, (
            FunCall(get(0), (p,)), FunCall(get(1), (p,)))))), acc)), arity=2)
        return FunCall(reduce_(step), (Literal(0.0, Float), zip_(xs, ys)))

    prog = Lambda((X, Y), map_glb(0, lam(row))(zip_(X, Y)))
    cp = lower(prog, {"M": 4, "N": 16})
    assert "vacc_" not in cp.kernels[0].source
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 16)).astype(np.float32)
    y = rng.standard_normal((4, 16)).astype(np.float32)
    ref = np.zeros(4)
    for k in range(4):
        ref = 2 * ref + (x[:, 4 * k:4 * k + 4].astype(np.float64) * y[:, 4 * k:4 * k + 4]).sum(1)
    o = runner.evaluate(cp, {"X": x, "Y": y}, ref, repeats=1, **reduction_tolerance(ref))
    assert o.ok, o.reason
