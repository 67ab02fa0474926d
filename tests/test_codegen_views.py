"""Views: every index a view computes equals the interpreter's element position.

Read views are checked element by element against the interpreter run on ``np.arange``
inputs (each value is its own flat index). Output views are checked by executing the
lowered statement tree sequentially in Python (no OpenCL device needed).
"""

from __future__ import annotations

import numpy as np
import pytest

from codegen import views as vw
from codegen.builder import Builder
from codegen.emit import Decl, Loop, Store
from codegen.errors import UnvectorizableError
from codegen.lower import build
from codegen.memory import Buf, natural_view, size_of
from ir.builders import (
    as_scalar,
    as_vector,
    compose,
    get,
    idf,
    join,
    lam,
    map_,
    map_seq,
    pad,
    pad2d,
    param,
    reorder_stride,
    slide,
    slide2d,
    split,
    to_global,
    transpose,
    vectorize,
    zip_,
)
from ir.interp import evaluate
from ir.nodes import FunCall, Id, Lambda
from ir.programs import conv_partial_stage
from ir.types import Float, array

OFFSET = 100000  # second input's values start here


def prog(shapes: list[tuple[int, ...]], body_fn) -> Lambda:
    """A program over float inputs X (and Y) of the given concrete shapes."""
    ps = [param(n, array(Float, *s)) for n, s in zip("XY", shapes)]
    return Lambda(tuple(ps), body_fn(*ps))


def arange_inputs(p: Lambda, sizes=None) -> dict:
    out = {}
    for k, q in enumerate(p.params):
        shape = tuple(int(s.evaluate(sizes or {})) for s in _sizes(q.type))
        out[q.name] = (np.arange(int(np.prod(shape))) + k * OFFSET).astype(np.float32)
        out[q.name] = out[q.name].reshape(shape)
    return out


def _sizes(t):
    while hasattr(t, "size"):
        yield t.size
        t = t.elem


def view_of(p: Lambda, sizes=None) -> vw.View:
    b = Builder(p, sizes or {})
    env = {}
    for k, q in enumerate(p.params):
        t = q.type.subs(sizes or {})
        buf = Buf(q.name, "global", "float", size_of(t), "input")
        buf.base = k * OFFSET
        env[q.name] = natural_view(t, buf)
    return b.value(p.body, env)


def leaves(v, pos=()):
    if isinstance(v, vw.ArrV):
        for i in range(v.n):
            yield from leaves(v.get(i), pos + (i,))
    elif isinstance(v, vw.TupV):
        for k, e in enumerate(v.elems):
            yield from leaves(e, (("tuple", k),) + pos)
    else:
        yield pos, v


def concrete(leaf) -> list[float]:
    """The values a leaf denotes on arange inputs (one per vector lane)."""
    leaf = vw.resolve_vector(leaf) if isinstance(leaf, vw.Lanes) else leaf
    if isinstance(leaf, vw.Sel):
        ok = all(c.evaluate({}) for c in leaf.conds)
        return concrete(leaf.then if ok else leaf.other)
    if isinstance(leaf, vw.Mem):
        return [leaf.buf.base + leaf.idx.as_int()]
    if isinstance(leaf, vw.VecMem):
        return [leaf.buf.base + leaf.idx.as_int() + k for k in range(leaf.width)]
    if isinstance(leaf, vw.Const):
        w = leaf.type.width.as_int() if hasattr(leaf.type, "width") else 1
        return [leaf.value] * w
    raise AssertionError(f"unexpected leaf {leaf}")


def check_read_view(p: Lambda, sizes=None) -> int:
    """Every leaf of the program's view equals the interpreter's value; returns the count."""
    ref = evaluate(p, arange_inputs(p, sizes), sizes or {})
    n = 0
    for pos, leaf in leaves(view_of(p, sizes)):
        if pos and isinstance(pos[0], tuple):
            want = ref[pos[0][1]][pos[1:]]
        else:
            want = ref[pos]
        got = np.array(concrete(leaf), dtype=np.float64)
        np.testing.assert_array_equal(got, np.ravel(want), err_msg=f"at {pos}")
        n += 1
    return n


# ---------------------------------------------------------------- read views

@pytest.mark.parametrize("seed", range(6))
def test_split_join_transpose_random_shapes(seed):
    rng = np.random.default_rng(seed)
    a, b, c = (int(x) for x in rng.integers(1, 5, 3))
    assert check_read_view(prog([(a * b * c,)], lambda X: split(b)(X)))
    assert check_read_view(prog([(a, b, c)], lambda X: join()(X)))
    assert check_read_view(prog([(a, b, c)], lambda X: transpose()(X)))
    assert check_read_view(prog([(a, b, c)], lambda X: map_(transpose())(X)))
    assert check_read_view(prog([(a, b * c)], lambda X: compose(
        join(), transpose(), map_(transpose()), map_(split(c)))(X)))


@pytest.mark.parametrize("seed", range(6))
def test_slide_pad_random_shapes(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 9))
    size = int(rng.integers(1, n + 1))
    step = int(rng.integers(1, 4))
    left, right = (int(x) for x in rng.integers(-1, 3, 2))
    assert check_read_view(prog([(n,)], lambda X: slide(size, step)(X)))
    assert check_read_view(prog([(n, 2)], lambda X: pad(left, right, -7.0)(X)))
    assert check_read_view(prog([(n, 3)], lambda X: compose(
        slide2d(2, 1, 2, 1), pad2d(1, left + 1, right + 1, 1, -3.0))(X)))
    assert check_read_view(prog([(n,)], lambda X: compose(
        slide(size, step), pad(left + 1, right + 1, 5.0))(X)))


def test_crop_needs_no_condition():
    v = view_of(prog([(6, 4)], lambda X: pad(-1, -2, 0.0)(X)))
    for _, leaf in leaves(v):
        assert isinstance(leaf, vw.Mem)


@pytest.mark.parametrize("n,s", [(12, 3), (12, 4), (8, 2), (6, 1), (6, 6)])
def test_reorder_stride(n, s):
    assert check_read_view(prog([(n,)], lambda X: reorder_stride(s)(X)))
    assert check_read_view(prog([(n,)], lambda X: compose(split(n // s), reorder_stride(s))(X)))


def test_zip_get():
    p = prog([(3, 4), (3, 4)], lambda X, Y: zip_(FunCall(join(), (X,)), FunCall(join(), (Y,))))
    assert check_read_view(p) == 24
    p = prog([(6,), (6,)], lambda X, Y: FunCall(
        map_(lam(lambda t: FunCall(get(1), (t,)))), (zip_(X, Y),)))
    assert check_read_view(p) == 6


def test_as_vector_contiguous_and_not():
    assert check_read_view(prog([(3, 8)], lambda X: map_(as_vector(4))(X)))
    assert check_read_view(prog([(3, 8)], lambda X: map_(compose(as_scalar(), as_vector(2)))(X)))
    v = view_of(prog([(8, 4)], lambda X: map_(as_vector(4))(FunCall(transpose(), (X,)))))
    with pytest.raises(UnvectorizableError, match="not contiguous"):
        vw.resolve_vector(v.get(0).get(0))


def test_padding_split_across_lanes_is_unvectorizable():
    v = view_of(prog([(6,)], lambda X: as_vector(4)(FunCall(pad(1, 1), (X,)))))
    with pytest.raises(UnvectorizableError, match="padding"):
        vw.resolve_vector(v.get(0))


def test_indices_are_simplified():
    v = view_of(prog([(64,)], lambda X: compose(join(), split(4))(X)))
    i = vw.Var("i_3", 0, 63)
    leaf = v.get(i)
    assert str(leaf.idx) == "i_3"
    w = view_of(prog([(4, 16)], lambda X: compose(join(), map_(compose(join(), split(4))))(X)))
    assert str(w.get(i).idx) == "i_3"


def test_conv_partial_input_views():
    """The tiled, windowed, reordered, chunked input views of GPGPU'20 Listing 4."""
    sizes = dict(H=4, W=4, C=2, M=2, K=3, S=1, P=1, theta=4, rho=0, kappa=1, sigma=2,
                 omega=6, v=1)
    full = conv_partial_stage()
    # the argument of map T: the tiles, each [[[[float]ω]nC]σ]nW/σ (v=1: float1 lanes)
    tiles = full.body.args[0]
    p = Lambda(full.params, tiles)
    n = check_read_view(p, sizes)
    assert n > 0


# ---------------------------------------------------------------- output views


def simulate(b: Builder, inputs: dict) -> np.ndarray:
    """Runs the statement tree sequentially in Python (parallel loops as plain loops)."""
    mem = {}
    for buf in [*b.inputs, b.out_buf, *b.bufs]:
        mem[buf.name] = np.zeros(buf.count, np.float64)
    for buf in b.inputs:
        mem[buf.name][:] = np.ravel(inputs[buf.label])

    def val(v, env):
        if isinstance(v, vw.Mem):
            return mem[v.buf.name][v.idx.evaluate(env)]
        if isinstance(v, vw.VecMem):
            i = v.idx.evaluate(env)
            return mem[v.buf.name][i:i + v.width].copy()
        if isinstance(v, vw.Const):
            return v.value
        if isinstance(v, vw.Call):
            return b.fun_of[v.fname].py(*[np.asarray(val(a, env)) for a in v.args])
        if isinstance(v, vw.Sel):
            ok = all(c.evaluate(env) for c in v.conds)
            return val(v.then if ok else v.other, env)
        raise AssertionError(v)

    def run(stmts, env):
        for s in stmts:
            if isinstance(s, Loop):
                for k in range(s.n):
                    run(s.body, {**env, s.name: k})
            elif isinstance(s, Store):
                x = val(s.value, env)
                i = s.dest.idx.evaluate(env)
                if isinstance(s.dest, vw.VecMem):
                    mem[s.dest.buf.name][i:i + s.dest.width] = x
                else:
                    mem[s.dest.buf.name][i] = x
            else:
                assert isinstance(s, Decl) or s.__class__.__name__ == "Barrier"

    run(b.top, {})
    return mem[b.out_buf.name]


def check_written(p: Lambda, sizes=None, inputs=None) -> None:
    inputs = inputs or {k: v.astype(np.float32) for k, v in arange_inputs(p).items()}
    ref = evaluate(p, inputs, sizes or {})
    b = build(p, sizes or {})
    got = simulate(b, inputs)
    np.testing.assert_allclose(got, np.ravel(ref), rtol=1e-6)


COPY = map_seq(map_seq(to_global(Id())))


@pytest.mark.parametrize("name,body", [
    ("join", lambda X: join()(COPY(X))),
    ("transpose", lambda X: transpose()(COPY(X))),
    ("split o join", lambda X: compose(split(2), join())(COPY(X))),
    ("map transpose", lambda X: compose(map_(transpose()), split(2), transpose())(COPY(X))),
    ("reorder", lambda X: compose(reorder_stride(3), join())(COPY(X))),
    ("asScalar", lambda X: compose(as_scalar(), map_seq(to_global(vectorize(2, idf))),
                                   as_vector(2), join())(X)),
    ("zip", lambda X: FunCall(map_seq(lam(lambda t: FunCall(get(0), (t,)))), (
        zip_(FunCall(join(), (COPY(X),)), FunCall(join(), (COPY(X),))),))),
])
def test_output_views(name, body):
    check_written(prog([(6, 4)], body))


def test_simulated_reduce_and_private_accumulator():
    from ir.builders import add, lit, reduce_

    p = prog([(5, 3)], lambda X: map_seq(lam(lambda row: FunCall(
        reduce_(add), (lit(0.0), row))))(X))
    check_written(p)
