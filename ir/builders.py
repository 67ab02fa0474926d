"""Python builders for IR expressions, standard user functions and the ND macros.

Builders return function declarations (``map_(f)``) or expressions
(``param("X", ...)``); a declaration is applied by calling it:
``compose(join(), map_(f), split(4))(X)``.
"""

from __future__ import annotations

import copyreg
import itertools

import numpy as np

from ir import nodes
from ir.errors import InvalidNodeError
from ir.sym import Var
from ir.types import Float, Int, Type, VectorType

_fresh = itertools.count()


def fresh(prefix: str = "x") -> nodes.Param:
    """A lambda parameter with a fresh name (``x_12``)."""
    return nodes.Param(f"{prefix}_{next(_fresh)}")


def param(name: str, type: Type | None = None) -> nodes.Param:
    return nodes.Param(name, type)


def lit(value: float | int, type: Type | None = None) -> nodes.Literal:
    if type is None:
        type = Int if isinstance(value, int) and not isinstance(value, bool) else Float
    return nodes.Literal(value, type)


def lam(fn, arity: int = 1, prefix: str = "x") -> nodes.Lambda:
    """``lam(lambda x, y: body)`` builds a Lambda with fresh parameters."""
    ps = tuple(fresh(prefix) for _ in range(arity))
    return nodes.Lambda(ps, fn(*ps))


def compose(*fs: nodes.FunDecl) -> nodes.FunDecl:
    """``compose(f, g, h)`` is ``f o g o h`` (h applied first)."""
    if not fs:
        return nodes.Id()
    if len(fs) == 1:
        return fs[0]
    x = fresh()
    body: nodes.ExprNode = x
    for f in reversed(fs):
        body = nodes.FunCall(f, (body,))
    return nodes.Lambda((x,), body)


def let(value: nodes.ExprNode, fn) -> nodes.FunCall:
    """``let(v, lambda x: body)``: binds ``v`` to ``x`` in ``body``."""
    return nodes.FunCall(lam(fn), (value,))


def map_(f: nodes.FunDecl, label: str | None = None) -> nodes.Map:
    return nodes.Map(f, "map", None, label)


def map_seq(f: nodes.FunDecl, label: str | None = None) -> nodes.Map:
    return nodes.Map(f, "mapSeq", None, label)


def map_glb(dim: int, f: nodes.FunDecl, label: str | None = None) -> nodes.Map:
    return nodes.Map(f, "mapGlb", dim, label)


def map_wrg(dim: int, f: nodes.FunDecl, label: str | None = None) -> nodes.Map:
    return nodes.Map(f, "mapWrg", dim, label)


def map_lcl(dim: int, f: nodes.FunDecl, label: str | None = None) -> nodes.Map:
    return nodes.Map(f, "mapLcl", dim, label)


def reduce_(f: nodes.FunDecl) -> nodes.Reduce:
    return nodes.Reduce(f, "reduce")


def reduce_seq(f: nodes.FunDecl) -> nodes.Reduce:
    return nodes.Reduce(f, "reduceSeq")


def split(m) -> nodes.Split:
    return nodes.Split(m)


def join() -> nodes.Join:
    return nodes.Join()


def zip_(*arrays: nodes.ExprNode) -> nodes.FunCall:
    return nodes.FunCall(nodes.Zip(len(arrays)), tuple(arrays))


def slide(size, step, strict: bool = False) -> nodes.Slide:
    return nodes.Slide(size, step, strict)


def pad(left, right, value: float = 0.0) -> nodes.Pad:
    return nodes.Pad(left, right, value)


def transpose() -> nodes.Transpose:
    return nodes.Transpose()


def reorder_stride(s) -> nodes.ReorderStride:
    return nodes.ReorderStride(s)


def get(i: int) -> nodes.Get:
    return nodes.Get(i)


def as_vector(v) -> nodes.AsVector:
    return nodes.AsVector(v)


def as_scalar() -> nodes.AsScalar:
    return nodes.AsScalar()


def to_global(f: nodes.FunDecl) -> nodes.ToMem:
    return nodes.ToMem(f, "global")


def to_local(f: nodes.FunDecl) -> nodes.ToMem:
    return nodes.ToMem(f, "local")


def to_private(f: nodes.FunDecl) -> nodes.ToMem:
    return nodes.ToMem(f, "private")


def vectorize(width, f: nodes.UserFun) -> nodes.Vectorize:
    return nodes.Vectorize(width, f)


# ------------------------------------------------------------------ user functions


def userfun(name, params, in_types, out_type, c_body, py) -> nodes.UserFun:
    return nodes.UserFun(name, tuple(params), tuple(in_types), out_type, c_body, py)


add = userfun("add", ("a", "b"), (Float, Float), Float, "return a + b;", lambda a, b: a + b)
mult = userfun("mult", ("a", "b"), (Float, Float), Float, "return a * b;", lambda a, b: a * b)
# acc + x * w, the multiply-accumulate of reductions (emitted without mad()/fma()).
mult_add = userfun(
    "multAdd", ("acc", "x", "w"), (Float, Float, Float), Float,
    "return acc + x * w;", lambda acc, x, w: acc + x * w,
)
idf = userfun("idf", ("x",), (Float,), Float, "return x;", lambda x: x)


def _dot(a, b):
    return (np.asarray(a) * np.asarray(b)).sum(axis=-1)


# dot(a, b): the OpenCL builtin over two vectors of any one width (``_w`` is generic).
_vw = VectorType(Float, Var("_w"))
dot = userfun("dot", ("a", "b"), (_vw, _vw), Float, "return dot(a, b);", _dot)

# acc + x * w, x a scalar broadcast over the lanes of the vectors acc and w (one width):
# the multiply-accumulate of an outer product (OpenCL C promotes the scalar).
scale_add = userfun("scaleAdd", ("acc", "x", "w"), (_vw, Float, _vw), _vw,
                    "return acc + x * w;", lambda acc, x, w: acc + x * w)

USER_FUNS = {f.name: f for f in (add, mult, mult_add, idf, dot, scale_add)}


def _rebuild_user_fun(name, param_names, in_types, out_type, c_body) -> nodes.UserFun:
    """Unpickles a user function: the standard one when its name, C body and input types
    match (its numpy meaning need not follow from its body: ``dot``), else from the body."""
    std = USER_FUNS.get(name)
    if std is not None and std.c_body == c_body and std.in_types == in_types:
        return std
    return nodes.userfun_from_c(name, param_names, in_types, out_type, c_body)


def _reduce_user_fun(uf: nodes.UserFun):
    std = USER_FUNS.get(uf.name)
    if std is not None and std.c_body == uf.c_body and std.in_types == uf.in_types:
        return (_rebuild_user_fun,
                (uf.name, uf.param_names, uf.in_types, uf.out_type, uf.c_body))
    return uf.__reduce__()  # from the C body, or with its numpy meaning (statement bodies)


# Pickles (and copies) of user functions made once this module is loaded come back to it,
# so the standard functions stay themselves; ir.nodes cannot know them (no import cycle).
copyreg.pickle(nodes.UserFun, _reduce_user_fun)


# -------------------------------------------------------------------------- macros


def map_nd(n: int, f: nodes.FunDecl) -> nodes.FunDecl:
    """``mapND(n, f)``: ``f`` mapped over the n outer dimensions."""
    for _ in range(n):
        f = map_(f)
    return f


def join_nd(n: int) -> nodes.FunDecl:
    """``joinND(n)``: n joins, flattening n+1 outer dimensions into one."""
    return compose(*([join()] * n)) if n > 1 else join()


def zip_nd(n: int, *arrays: nodes.ExprNode) -> nodes.ExprNode:
    """``zipND(n, a, b, ...)``: zip at n nested levels."""
    if n == 1:
        return zip_(*arrays)
    k = len(arrays)

    def inner(t):
        return zip_nd(n - 1, *[nodes.FunCall(nodes.Get(i), (t,)) for i in range(k)])

    return nodes.FunCall(map_(lam(inner)), (zip_(*arrays),))


def _move_outer_in(k: int) -> nodes.FunDecl:
    """Moves the outermost dimension k levels inward (``transpose``, then ``map(transpose)``...)."""
    steps = []
    for level in range(k):
        t: nodes.FunDecl = transpose()
        for _ in range(level):
            t = map_(t)
        steps.append(t)
    return compose(*reversed(steps))


def slide_nd(n: int, sizes, steps, strict: bool = False) -> nodes.FunDecl:
    """``slideND(n, sizes, steps)``: ``[..[T]d_n..]d_1 -> [..[[..[T]s_n..]s_1]w_n..]w_1``."""
    sizes, steps = list(sizes), list(steps)
    if len(sizes) != n or len(steps) != n:
        raise InvalidNodeError(f"slideND({n}) needs {n} sizes and {n} steps")
    if n == 1:
        return slide(sizes[0], steps[0], strict)
    inner = slide_nd(n - 1, sizes[1:], steps[1:], strict)
    return compose(
        map_(_move_outer_in(n - 1)), slide(sizes[0], steps[0], strict), map_(inner)
    )


def pad_nd(n: int, pads, value: float = 0.0) -> nodes.FunDecl:
    """``padND(n, [(l1, r1), ..., (ln, rn)])``: pads each of the n outer dimensions."""
    pads = list(pads)
    if len(pads) != n:
        raise InvalidNodeError(f"padND({n}) needs {n} (left, right) pairs")
    (l1, r1) = pads[0]
    if n == 1:
        return pad(l1, r1, value)
    return compose(pad(l1, r1, value), map_(pad_nd(n - 1, pads[1:], value)))


def slide2d(size1, step1, size2, step2, strict: bool = False) -> nodes.FunDecl:
    return slide_nd(2, (size1, size2), (step1, step2), strict)


def pad2d(top, bottom, left, right, value: float = 0.0) -> nodes.FunDecl:
    return pad_nd(2, [(top, bottom), (left, right)], value)
