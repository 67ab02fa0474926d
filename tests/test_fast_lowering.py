"""Fast code from the lowering (issue 9): vector accumulators, hoisted index arithmetic,
unrolled private loops, the contiguous (``coalesce=False``) convolution layout. Each test
fails when its feature is removed; the device tests check the numbers as well."""

import functools
import re

import numpy as np
import pytest

from codegen.emit import UNROLL_MAX
from codegen.lower import lower
from codegen.runner import Runner
from experiments.vgg16 import PAPER_HAND_MAPPING, conv_stage_mappings
from ir.builders import add, as_vector, dot, get, lam, map_glb, param, reduce_, zip_
from ir.conv_layer import ConvLayer
from ir.interp import evaluate
from ir.nodes import FunCall, Lambda, Literal
from ir.pipeline import run_pipeline
from ir.programs import conv_partial_stage, gpgpu20_conv_pipeline
from ir.types import Float, array
from mapper.api import lower_mapping
from mapper.candidates import build_pipeline, first_mapping, reduction_tolerance


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
    sizes = {"M": 8, "N": 128}  # 8 or more steps: a loop, not a short one unrolled
    cp = lower(prog, sizes)
    src = cp.kernels[0].source
    assert re.search(rf"float{width} vacc_\w+", src), src
    body = _loop_body(src, "// reduce")
    assert any("fma(" in ln for ln in body), body
    assert not any("dot" in ln for ln in body), body  # no horizontal sum per iteration
    assert f"liftmap_hsum{width}(" in src
    rng = np.random.default_rng(width)
    x = rng.standard_normal((8, 128)).astype(np.float32)
    y = rng.standard_normal((8, 128)).astype(np.float32)
    ref = (x.astype(np.float64) * y).sum(1)
    o = runner.evaluate(cp, {"X": x, "Y": y}, ref, repeats=1, **reduction_tolerance(ref))
    assert o.ok, o.reason
    interp = evaluate(prog, {"X": x, "Y": y}, sizes)
    np.testing.assert_allclose(np.asarray(interp, dtype=np.float64).reshape(-1), ref,
                               **reduction_tolerance(ref))


def _partial(coalesce: bool, layer: ConvLayer, tuning: dict) -> str:
    return _partial_source(coalesce, layer, tuple(sorted(tuning.items())))


@functools.cache
def _partial_source(coalesce: bool, layer: ConvLayer, tuning: tuple) -> str:
    """The hand-mapped partial stage's kernel source, lowered once per layout, layer and
    tuning (several tests read the same kernel; finding the mapping takes about a second)."""
    return lower(_hand_mapped_partial(coalesce), dict(layer.sizes(), **dict(tuning))
                 ).kernels[0].source


@functools.cache
def _hand_mapped_partial(coalesce: bool):
    p = conv_partial_stage(coalesce=coalesce)
    return lower_mapping(p, first_mapping(p, PAPER_HAND_MAPPING), fusion="free")


@functools.cache
def _pipeline(coalesce: bool):
    """GPGPU'20's pipeline, one object per layout (the build keeps its problems cached)."""
    return gpgpu20_conv_pipeline(coalesce=coalesce)


@functools.cache
def _hand_mapped_pipeline(coalesce: bool):
    """GPGPU'20's pipeline and its stages' mappings (the hand mapping of the partial
    convolution), found once per layout: that builds every stage's mapping problem
    (several seconds)."""
    pipe = _pipeline(coalesce)
    return pipe, conv_stage_mappings(pipe)


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
    for var in ("i_I2", "i_R2"):  # unrolled, possibly interchanged with the 3-iteration loop
        assert re.search(rf"unrolled, {var} = 0\.\.11|{var} = 0\.\.11\).*unrolled", src), src
    assert UNROLL_MAX >= 12


SMALL = ConvLayer("small", C=8, H=6, W=6, M=4, K=3, S=1, P=1)


@pytest.mark.parametrize("coalesce,kappa,sigma", [(False, 2, 2), (True, 2, 2),
                                                   (False, 4, 2), (False, 2, 4)])
@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_contiguous_layout_matches_the_interpreter(runner, coalesce, kappa, sigma):
    """Both layouts, and both orders of the unrolled register block (κ > σ interchanged,
    κ <= σ not), compute the interpreter's convolution on the device."""
    tuning = dict(theta=4, rho=0, kappa=kappa, sigma=sigma, omega=24, v=4)
    sizes = dict(SMALL.sizes(), **tuning)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((SMALL.H, SMALL.W, SMALL.C)).astype(np.float32)
    w = rng.standard_normal((SMALL.M, SMALL.K, SMALL.K, SMALL.C)).astype(np.float32)
    pipe, maps = _hand_mapped_pipeline(coalesce)
    ref = np.asarray(run_pipeline(pipe, {"inputData": x, "kernelsWeights": w}, sizes),
                     dtype=np.float64)
    cp = build_pipeline(pipe, maps, sizes)
    partial = next(k.source for k in cp.kernels if k.name == "partial")
    assert ("interchanged" in partial) == (kappa > sigma)
    o = runner.evaluate(cp, {"inputData": x, "kernelsWeights": w}, ref, repeats=1,
                        **reduction_tolerance(ref))
    assert o.ok, o.reason
    # both layouts compute the same convolution
    other = run_pipeline(_pipeline(not coalesce),
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


# ----------------------------------------------------- private arrays kept in registers


def _buf(name: str, count: int):
    from codegen.memory import Buf

    return Buf(name, "private", "float", count)


def _vec(buf, idx, width: int):
    from codegen.views import VecMem
    from ir.types import VectorType

    return VecMem(buf, idx, VectorType(Float, width))


def test_private_array_of_whole_vectors_is_declared_as_vectors():
    """A private copy read and written only as aligned float8 becomes ``float8 p[3]``."""
    from codegen.emit import Store
    from codegen.private_arrays import vector_private_arrays
    from codegen.views import Mem
    from ir.sym import Var

    i = Var("i", 0, 2)
    p, q, g = _buf("p", 24), _buf("q", 24), _buf("g", 24)
    g.space = "global"
    body = [Store(_vec(p, 8 * i, 8), _vec(g, 8 * i, 8)),
            Store(_vec(g, 8 * i, 8), _vec(p, 8 * i, 8)),
            Store(_vec(q, 8 * i, 8), _vec(g, 8 * i, 8)),
            Store(Mem(g, i, Float), Mem(q, i, Float))]  # q is also read as scalars
    assert vector_private_arrays(body) == {"p": 8}
    misaligned = [Store(_vec(p, 4 * i, 8), _vec(g, 8 * i, 8))]
    assert vector_private_arrays(misaligned) == {}
    two_widths = [Store(_vec(p, 8 * i, 8), _vec(g, 8 * i, 8)),
                  Store(_vec(g, 4 * i, 4), _vec(p, 4 * i, 4))]
    assert vector_private_arrays(two_widths) == {}


def test_partial_copies_its_window_into_vector_registers():
    tuning = dict(theta=5, rho=2, kappa=4, sigma=3, omega=128, v=8)
    src = _partial(False, LAYER19, tuning)
    assert re.search(r"float8 prv\w+\[3\];", src), src
    assert not re.search(r"v(load|store)8\([^;]*\bprv\w+\)", src), src


def _nest(outer_n: int, inner_n: int, store):
    from codegen.emit import Loop
    from ir.sym import Var

    i, j = Var("i", 0, outer_n - 1), Var("j", 0, inner_n - 1)
    inner = Loop("seq", None, j, inner_n, "J", "mapSeq J", body=[store(i, j)])
    return Loop("seq", None, i, outer_n, "I", "mapSeq I", body=[inner])


def test_independent_unrolled_nest_is_recognised():
    """``acc[4i+j] += a[i] * b[j]`` has independent iterations; ``p[j] = p[j] + a[i]``
    (every i writes the same p[j]) and ``p[i+j] = ...`` (overlapping cells) do not."""
    from codegen.emit import Store
    from codegen.private_arrays import independent_nest
    from codegen.views import Call, Mem

    acc, p, a, b = _buf("acc", 8), _buf("p", 8), _buf("a", 2), _buf("b", 4)

    def fma(i, j):
        return Store(Mem(acc, 4 * i + j, Float), Call("fma", (
            Mem(a, i, Float), Mem(b, j, Float), Mem(acc, 4 * i + j, Float)), Float))

    def same_cell(i, j):
        return Store(Mem(p, j, Float), Call("add", (Mem(p, j, Float), Mem(a, i, Float)), Float))

    def overlap(i, j):
        return Store(Mem(p, i + j, Float), Mem(a, i, Float))

    nest = _nest(2, 4, fma)
    assert independent_nest(nest, {}) is nest.body[0]
    assert independent_nest(_nest(2, 4, same_cell), {}) is None
    assert independent_nest(_nest(2, 4, overlap), {}) is None


@pytest.mark.slow  # over 3 s (fast-subset durations): not in the fast subset
def test_register_block_puts_the_longer_loop_outside():
    """σ=3 windows x κ=4 kernels: the kernels' loop goes outside, so each weight vector is
    loaded once and consecutive multiply-adds share it."""
    tuning = dict(theta=5, rho=2, kappa=4, sigma=3, omega=128, v=8)
    body = _loop_body(_partial(False, LAYER19, tuning), "// reduce")
    assert any("interchanged" in ln for ln in body), "\n".join(body)
    weights = [re.search(r"kernelsWeights[^)]*\)", ln).group(0) for ln in body if "fma(" in ln]
    assert len(weights) == 12 and weights[0] == weights[1] == weights[2] != weights[3]


def test_copy_kernels_get_a_local_size_from_the_lowering():
    """mapGlb-only kernels (the padding and the cropping) are not left to the runtime's
    choice of work-group, which ran them 5x slower on PoCL: each local size divides its
    global size and holds at most FREE_GROUP_MOST work-items."""
    import math

    from codegen.launch import FREE_GROUP_MOST

    tuning = dict(theta=5, rho=2, kappa=4, sigma=3, omega=128, v=8)
    pipe, maps = _hand_mapped_pipeline(False)
    cp = build_pipeline(pipe, maps, dict(LAYER19.sizes(), **tuning))
    for k in cp.kernels:
        assert k.local_size is not None, k.name
        assert all(g % ls == 0 for g, ls in zip(k.global_size, k.local_size)), k
    pad = next(k for k in cp.kernels if k.name == "pad")
    assert 1 < math.prod(pad.local_size) <= FREE_GROUP_MOST
    assert pad.local_size[0] == min(pad.global_size[0], FREE_GROUP_MOST)  # dimension 0 first
