"""Work counts (ir.flops): the C-body convention, exact counts of the papers' convolution and
the matrix multiplications, and an independent witness: an instrumented reference
interpreter that counts every user-function application over the full batch shape (the
maps' lengths, not the broadcast shape it computes) on the examples and random programs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from ir import nodes
from ir.builders import (
    add,
    as_scalar,
    as_vector,
    dot,
    idf,
    lam,
    lit,
    map_,
    mult,
    mult_add,
    param,
    reduce_,
    split,
    userfun,
    vectorize,
    zip_,
)
from ir.conv_layer import ConvLayer, vgg16_layer
from ir.errors import ConstraintViolation, IRError, LiftmapError
from ir.flops import FlopsError, Work, count_bytes, count_flops, count_work, user_fun_flops
from ir.interp import Interpreter, bind_sizes, evaluate
from ir.nodes import FunCall, Lambda, UserFun
from ir.programs import conv_final_stage, conv_partial_stage, gpgpu20_conv_highlevel
from ir.randprog import random_program, sizes_for
from ir.syntax import parse_file
from ir.typecheck import typecheck
from ir.types import Float, Int, Type, VectorType, array, shape_of

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE_FILES = sorted(EXAMPLES.glob("*.lift"))


# --------------------------------------------------------------------- the witness


def _first(v):
    while isinstance(v, tuple):
        v = v[0]
    return v


class CountingInterpreter(Interpreter):
    """The reference interpreter, counting each user-function application as the kernel
    performs it: once per element of the full batch (the product of the enclosing maps'
    lengths), whatever smaller shape the interpreter computes and broadcasts; the lanes
    of each argument from its array's trailing axis."""

    def __init__(self, sizes: Mapping[str, int]):
        super().__init__(sizes)
        self.lengths: list[int] = []  # the enclosing maps' lengths, outermost first
        self.flops = 0
        self.computed = 0  # what counting the computed (broadcast) elements would give

    def apply_map(self, f, args, env, b):
        assert len(self.lengths) == b
        self.lengths.append(_first(args[0]).shape[b])
        try:
            return super().apply_map(f, args, env, b)
        finally:
            self.lengths.pop()

    def apply_user_fun(self, f, args, env, b):
        assert len(self.lengths) == b
        arrs = [np.asarray(a) for a in args]
        widths = [a.shape[-1] if a.ndim > b else 1 for a in arrs]
        per = user_fun_flops(f, widths)
        self.flops += math.prod(self.lengths) * per
        shape = np.broadcast_shapes(*(a.shape[:b] for a in arrs))
        self.computed += math.prod(shape) * per
        return super().apply_user_fun(f, args, env, b)


def _random_input(t: Type | None, sizes: Mapping[str, int], rng: np.random.Generator):
    dims, inner = shape_of(t)
    shape = [d.evaluate(sizes) for d in dims]
    if isinstance(inner, VectorType):
        shape.append(inner.width.evaluate(sizes))
        inner = inner.elem
    if inner == Int:
        return rng.integers(-5, 5, size=shape).astype(np.int32)
    return rng.standard_normal(shape).astype(np.float32)


def witness(program: Lambda, sizes: Mapping[str, int], seed: int = 0) -> CountingInterpreter:
    """Runs ``program`` on random inputs with the counting interpreter; checks its result
    is the reference interpreter's."""
    rng = np.random.default_rng(seed)
    inputs = {p.name: _random_input(p.type, sizes, rng) for p in program.params}
    env_sizes = bind_sizes(program, inputs, sizes)
    typecheck(program, env_sizes)
    it = CountingInterpreter(env_sizes)
    env = {p.name: (np.asarray(inputs[p.name]), 0) for p in program.params}
    out = it.expr(program.body, env, 0)
    want = evaluate(program, inputs, sizes)
    np.testing.assert_allclose(_first(out), _first(want), rtol=1e-5, atol=1e-5)
    return it


# ---------------------------------------------------------------- user functions


def _uf(body: str, params=("a", "b"), types: tuple[Type, ...] | None = None,
        out: Type = Float) -> UserFun:
    return UserFun("f", tuple(params), types or (Float,) * len(params), out, body,
                   lambda *a: a[0])


@pytest.mark.parametrize("body,want", [
    ("return a + b;", 1),
    ("return a * b + a / b - a;", 4),
    ("a + b", 1),  # a bare expression
    ("return -a;", 0),  # unary minus is no operation
    ("return a - -1.0f;", 1),  # the sign of a number is no subtraction
    ("return a*1e-3f + b;", 2),  # nor is an exponent's sign
    ("return a - 1.5e-3;", 1),
    ("return a-1;", 1),
    ("return +a * -b;", 1),
    ("return fma(a, b, 1.0f);", 2),
    ("return mad(a, b, a) + fmad(a, b, b);", 5),
    ("return sqrt(a * a + b * b);", 4),
    ("return fmax(a, 0.0f) + exp(b) + tanh(a) + pow(a, b) + fabs(b);", 9),
    ("return a > b ? a : 0.1f * b;", 1),  # comparison and select 0, the costlier branch
    ("return (a < b && b != 0.0f) ? a : b;", 0),
    ("return a > b ? a * b : a + b + 1.0f;", 2),  # one branch runs: the costlier counts
    ("if (a > b) { return a * b; } else { return a / b - 1.0f; }", 2),
    ("float t = a * 2.0f; return t + 1.0f;", 2),  # a statement block
    ("{ float t = a; t += b; t *= 2.0f; if (t > 0.0f) { t = exp(t); } else t = -t;"
     " return t; }", 3),
    ("/* scale */ return a * b; // then nothing", 1),
    ("return (int)a + 1;", 0),  # integer arithmetic after a cast
    ("int i = 3; int j = i * 2 + 1; return a * j;", 1),  # index arithmetic is free
    ("return (float4)(a, b, a, b).x + 1.0f;", 4),  # C: the cast makes a float4, then 4 adds
])
def test_user_fun_flops_convention(body: str, want: int) -> None:
    assert user_fun_flops(_uf(body)) == want


def test_standard_user_functions() -> None:
    assert (user_fun_flops(add), user_fun_flops(mult), user_fun_flops(mult_add)) == (1, 1, 2)
    assert user_fun_flops(idf) == 0
    # dot of v lanes: v multiplications and v - 1 additions; its width is generic
    assert [user_fun_flops(dot, [v, v]) for v in (1, 2, 4, 8)] == [1, 3, 7, 15]
    with pytest.raises(FlopsError, match="arg_widths"):
        user_fun_flops(dot)


def test_vector_lanes_multiply() -> None:
    f4 = VectorType(Float, 4)
    assert user_fun_flops(_uf("return a * b + 2.0f;", types=(f4, f4), out=f4)) == 8
    assert user_fun_flops(vectorize(8, mult_add)) == 16
    assert user_fun_flops(mult_add, [8, 8, 8]) == 16
    assert user_fun_flops(_uf("return a.x * b.s1 + a.lo.y;", types=(f4, f4))) == 2
    assert user_fun_flops(vectorize("v", add), [4, 4]) == 4
    with pytest.raises(FlopsError, match="symbolic width"):
        user_fun_flops(vectorize("v", add))


def test_int_user_functions_count_zero() -> None:
    assert user_fun_flops(_uf("return a * b + 2;", types=(Int, Int), out=Int)) == 0
    assert user_fun_flops(_uf("return a * 2.0f;", types=(Int, Int))) == 1  # float arithmetic
    assert user_fun_flops(_uf("return a * b;", types=(Int, Float))) == 1


def test_user_fun_errors_are_typed_and_say_what_to_do() -> None:
    with pytest.raises(FlopsError, match="write the body without a loop") as e:
        user_fun_flops(_uf("float s = 0.0f; for (int i = 0; i < 4; i++) s += a; return s;"))
    assert isinstance(e.value, IRError) and isinstance(e.value, LiftmapError)
    with pytest.raises(FlopsError, match="expected"):
        user_fun_flops(_uf("return a +;"))
    with pytest.raises(FlopsError, match="lane count"):
        user_fun_flops(add, [1])


# ------------------------------------------------------------------- programs


def conv_sizes(layer: ConvLayer) -> dict[str, int]:
    """The sizes of ``gpgpu20_conv_highlevel`` for a layer."""
    return {"H": layer.H, "W": layer.W, "C": layer.C, "M": layer.M, "KH": layer.K,
            "KW": layer.K, "padT": layer.P, "padB": layer.P, "padL": layer.P, "padR": layer.P,
            "strideY": layer.S, "strideX": layer.S}


SMALL = ConvLayer("small", 3, 7, 6, 4, K=3, S=2, P=1)


@pytest.mark.parametrize("layer", [SMALL, ConvLayer("k5", 2, 9, 9, 3, K=5, S=1, P=2),
                                   vgg16_layer("0"), vgg16_layer("19")], ids=lambda la: la.name)
def test_highlevel_convolution_counts_conv_layer_flops(layer: ConvLayer) -> None:
    """``ConvLayer.flops`` is 2 * multiply-adds; the program's reduction applies
    ``add(acc, mult(x, w))`` once per multiply-add and starts from the bias (no extra add,
    no ReLU), so the counts are equal."""
    assert count_flops(gpgpu20_conv_highlevel(), conv_sizes(layer)) == layer.flops
    if layer.name == "19,21":
        assert layer.flops == 3_699_376_128


def test_conv_bytes() -> None:
    la = vgg16_layer("19")
    want = 4 * (la.M * la.K * la.K * la.C + la.M + la.H * la.W * la.C + la.out_h * la.out_w * la.M)
    assert count_bytes(gpgpu20_conv_highlevel(), conv_sizes(la)) == want == 12_650_496


def _pipeline_sizes(layer: ConvLayer, theta: int, rho: int, kappa: int, sigma: int,
                    omega: int, v: int) -> dict[str, int]:
    return {**layer.sizes(), "theta": theta, "rho": rho, "kappa": kappa, "sigma": sigma,
            "omega": omega, "v": v}


@pytest.mark.parametrize("v", [1, 2, 4, 8])
def test_pipeline_partial_stage_counts_conv_layer_flops(v: int) -> None:
    """Layer 19 with tiles that cover the output exactly (θ=4, ρ=0): the partial stage does
    every multiply-add once, with ``dot`` over v lanes (2v - 1) plus one ``add`` per vector
    step, so 2 * MACs whatever v; the final stage adds the ``C*K*K/ω`` chunk sums of each
    output (a reduce from 0.0, one add per chunk)."""
    la = vgg16_layer("19")
    s = _pipeline_sizes(la, theta=4, rho=0, kappa=4, sigma=2, omega=144, v=v)
    assert count_flops(conv_partial_stage(), s) == la.flops
    n_chunks = la.C * la.K * la.K // 144
    assert count_flops(conv_final_stage(), s) == la.out_h * la.out_w * la.M * n_chunks


def test_pipeline_optimisational_padding_counts_the_extra_outputs() -> None:
    """With ρ > 0 the partial stage computes ``outPH x outPW`` outputs (cropped later):
    ``layer.flops * outPH*outPW / (outH*outW)``, exactly."""
    la = vgg16_layer("19")
    s = _pipeline_sizes(la, theta=5, rho=2, kappa=4, sigma=3, omega=144, v=4)
    out_p = ((la.H + 2 * la.P + 2 - 5) // 3 + 1) * 3  # tiles per side * windows per tile
    assert out_p == 30
    assert count_flops(conv_partial_stage(), s) * la.out_h * la.out_w == la.flops * out_p ** 2


@pytest.mark.parametrize("name", ["matmul_tiled", "matmul_blocked"])
@pytest.mark.parametrize("m,n,k", [(64, 48, 32), (1024, 1024, 1024)])
def test_matmul_examples_count_2mnk(name: str, m: int, n: int, k: int) -> None:
    sizes = {"M": m, "N": n, "K": k, "t": 8, "bm": 4, "bn": 2, "v": 8}
    prog = parse_file(EXAMPLES / f"{name}.lift")
    assert count_flops(prog, sizes) == 2 * m * n * k
    assert count_bytes(prog, sizes) == 4 * (m * k + n * k + m * n)


# Small sizes of every example (the witness runs the interpreter on them) and the exact
# count derived by hand from each program.
EXAMPLE_SIZES: dict[str, tuple[dict[str, int], int]] = {
    "cc22_listing1": ({"I": 2, "J": 3, "K": 4}, 3 * 2 * 3 * 4),  # f = x*2+1, g = x*x
    "cc22_listing3": ({"N": 24, "s0": 12, "s1": 4}, 2 * 24),
    "listing3_local": ({"N": 16, "s0": 8, "s1": 2}, 2 * 16),
    "gpgpu20_stencil2d": ({"H": 6, "W": 7}, 4 * 5 * 9 * 2),
    "gpgpu20_conv_highlevel": (conv_sizes(SMALL), SMALL.flops),
    "gpgpu20_conv_partial": ({"C": 4, "H": 4, "W": 4, "M": 4, "K": 3, "S": 1, "P": 1,
                              "theta": 4, "rho": 0, "kappa": 2, "sigma": 2, "omega": 12,
                              "v": 4}, 2 * 4 * 4 * 4 * 4 * 9),
    "matmul_blocked": ({"M": 8, "N": 6, "K": 16, "bm": 4, "bn": 2, "v": 4}, 2 * 8 * 6 * 16),
    "matmul_tiled": ({"M": 8, "N": 8, "K": 6, "t": 4}, 2 * 8 * 8 * 6),
    "pipeline2": ({"H": 6, "W": 5}, 6 * 5 + 4 * 3 * 9),  # scale, then 3x3 box sums
    "rowcol_sums": ({"H": 4, "W": 5}, 4 * 5 + 5 * 4),  # scale, then W column sums of H
    "smooth1d_tiles": ({"N": 8, "s": 4}, 8 * (3 * 2 + 1)),  # 3 x (add, divide), then x2
    # the image pipelines: a multiply-add is 2; harris's response 8 per pixel
    "blur_separable": ({"H": 6, "W": 7}, 6 * 5 * 3 * 2 + 4 * 5 * 3 * 2),
    "blur_laplacian": ({"H": 6, "W": 7}, 4 * 5 * 9 * 2 + 2 * 3 * 9 * 2),
    "harris": ({"H": 7, "W": 8}, 2 * 5 * 6 * 9 * 2 + 3 * 4 * (3 * 9 * 2 + 8)),
    # programs written plainly: one add per element summed, a multiply-add per product
    "matmul_plain": ({"M": 3, "N": 4, "K": 5}, 2 * 3 * 4 * 5),
    "row_sums": ({"H": 3, "W": 5}, 3 * 5),
    "matvec": ({"M": 3, "K": 5}, 2 * 3 * 5),
    "transpose": ({"H": 3, "W": 5}, 3 * 5),
    "col_sums": ({"H": 3, "W": 5}, 3 * 5),
    "box_blur3x3": ({"H": 4, "W": 5}, 4 * 5 * 9 * 2),
    "conv2_layers": ({"H": 6, "W": 6, "C": 2, "M": 3, "N": 2},
                     4 * 4 * 3 * 9 * 2 * 2 + 2 * 2 * 2 * 9 * 3 * 2),
}


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.stem)
def test_every_example_counts_and_agrees_with_the_witness(path: Path) -> None:
    if path.stem not in EXAMPLE_SIZES:
        pytest.fail(f"examples/{path.name} has no sizes here: add it to EXAMPLE_SIZES")
    sizes, want = EXAMPLE_SIZES[path.stem]
    prog = parse_file(path)
    assert isinstance(prog, Lambda)
    assert count_flops(prog, sizes) == want
    assert witness(prog, sizes).flops == want
    work = count_work(prog, sizes)
    assert work == Work(want, count_bytes(prog, sizes)) and work.bytes > 0


def test_random_programs_agree_with_the_witness() -> None:
    checked = 0
    for seed in range(60):
        prog = random_program(seed, extended=seed % 2 == 1)
        sizes = sizes_for(prog)
        static = count_flops(prog, sizes)
        assert static > 0
        assert witness(prog, sizes, seed).flops == static, (seed, sizes)
        checked += 1
    assert checked >= 50


def test_broadcast_applications_count_once_per_element() -> None:
    """A map whose body ignores its element: the interpreter computes ``add(y, z)`` once and
    broadcasts it, the kernel applies it N*M times, and so do both counts."""
    X = param("X", array(Float, "N", "M"))
    y, z = param("y", Float), param("z", Float)
    prog = Lambda((X, y, z), map_(map_(lam(lambda e: FunCall(add, (y, z)))))(X))
    sizes = {"N": 5, "M": 7}
    w = witness(prog, sizes)
    assert count_flops(prog, sizes) == w.flops == 35
    assert w.computed == 1  # what counting computed elements would miss
    # a let-bound value outside the map is computed once
    let_prog = Lambda((X, y, z), FunCall(lam(lambda s: map_(map_(lam(
        lambda e: FunCall(mult, (e, s)))))(X)), (FunCall(add, (y, z)),)))
    assert count_flops(let_prog, sizes) == witness(let_prog, sizes).flops == 1 + 35


def test_reduce_applies_its_function_once_per_element() -> None:
    X = param("X", array(Float, "N"))
    prog = Lambda((X,), reduce_(add)(lit(0.0), X))
    assert count_flops(prog, {"N": 100}) == witness(prog, {"N": 100}).flops == 100
    tiled = Lambda((X,), map_(lam(lambda w: reduce_(add)(lit(0.0), w)))(split("s")(X)))
    assert count_flops(tiled, {"N": 96, "s": 8}) == 96


def test_vectorised_program_counts_lanes() -> None:
    X = param("X", array(Float, "N"))
    prog = Lambda((X,), as_scalar()(map_(lam(lambda v: FunCall(vectorize(4, mult_add), (
        v, v, nodes.Literal(2.0, VectorType(Float, 4))))))(as_vector(4)(X))))
    sizes = {"N": 32}
    assert count_flops(prog, sizes) == witness(prog, sizes).flops == 2 * 32
    Y = param("Y", array(VectorType(Float, "v"), "N"))
    dots = Lambda((Y,), map_(lam(lambda e: FunCall(dot, (e, e))))(Y))
    assert count_flops(dots, {"N": 10, "v": 4}) == witness(dots, {"N": 10, "v": 4}).flops == 70


def test_int_programs_count_zero_flops() -> None:
    X = param("X", array(Int, "N"))
    iadd = userfun("iadd", ("a", "b"), (Int, Int), Int, "return a + b;", lambda a, b: a + b)
    prog = Lambda((X,), map_(lam(lambda e: FunCall(iadd, (e, e))))(X))
    assert count_flops(prog, {"N": 8}) == witness(prog, {"N": 8}).flops == 0
    assert count_bytes(prog, {"N": 8}) == 2 * 8 * 4


def test_bytes_count_array_inputs_and_the_output() -> None:
    X, Y = param("X", array(Float, "N")), param("Y", array(Float, "N"))
    y = param("y", Float)
    prog = Lambda((X, Y, y), zip_(map_(lam(lambda e: FunCall(mult, (e, y))))(X), Y))
    # X and Y read, a pair of arrays written; the scalar y is a kernel argument
    assert count_bytes(prog, {"N": 10}) == 4 * (10 + 10 + 20)
    assert count_work(prog, {"N": 10}) == Work(10, 160)


def test_rates() -> None:
    w = Work(3_000_000_000, 1_500_000_000)
    assert w.gflops(1.5) == pytest.approx(2.0)
    assert w.gbytes_per_s(0.5) == pytest.approx(3.0)
    assert w.intensity == 2.0
    with pytest.raises(FlopsError, match="positive run time"):
        w.gflops(0.0)


def test_missing_size_is_a_typed_error_naming_it() -> None:
    prog = parse_file(EXAMPLES / "matmul_tiled.lift")
    for fn in (count_flops, count_bytes):
        with pytest.raises(FlopsError, match=r"K, N, t missing .*pass them in sizes"):
            fn(prog, {"M": 4})
    with pytest.raises(FlopsError, match="not an integer"):
        count_flops(prog, {"M": 4, "N": 4, "K": 4.5, "t": 2})


def test_sizes_that_break_a_constraint_are_rejected() -> None:
    prog = parse_file(EXAMPLES / "cc22_listing3.lift")
    for fn in (count_flops, count_bytes):
        with pytest.raises(ConstraintViolation, match="split"):
            fn(prog, {"N": 24, "s0": 5, "s1": 1})
