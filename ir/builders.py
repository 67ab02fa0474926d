"""Python builders for IR expressions, standard user functions and the ND macros.

Builders return function declarations (``map_(f)``) or expressions
(``param("X", ...)``); a declaration is applied by calling it:
``compose(join(), map_(f), split(4))(X)``.
"""

from __future__ import annotations

import copyreg
import itertools

import numpy as np

from ir.nodes import (
    AsScalar,
    AsVector,
    ExprNode,
    FunCall,
    FunDecl,
    Get,
    Id,
    Join,
    Lambda,
    Literal,
    Map,
    Pad,
    Param,
    Reduce,
    ReorderStride,
    Slide,
    Split,
    ToMem,
    Transpose,
    UserFun,
    Vectorize,
    Zip,
    userfun_from_c,
)
from ir.sym import Var
from ir.types import Float, Int, Type, VectorType

_fresh = itertools.count()


def fresh(prefix: str = "x") -> Param:
    """A lambda parameter with a fresh name (``x_12``)."""
    return Param(f"{prefix}_{next(_fresh)}")


def param(name: str, type: Type | None = None) -> Param:
    return Param(name, type)


def lit(value: float | int, type: Type | None = None) -> Literal:
    if type is None:
        type = Int if isinstance(value, int) and not isinstance(value, bool) else Float
    return Literal(value, type)


def lam(fn, arity: int = 1, prefix: str = "x") -> Lambda:
    """``lam(lambda x, y: body)`` builds a Lambda with fresh parameters."""
    ps = tuple(fresh(prefix) for _ in range(arity))
    return Lambda(ps, fn(*ps))


def compose(*fs: FunDecl) -> FunDecl:
    """``compose(f, g, h)`` is ``f o g o h`` (h applied first)."""
    if not fs:
        return Id()
    if len(fs) == 1:
        return fs[0]
    x = fresh()
    body: ExprNode = x
    for f in reversed(fs):
        body = FunCall(f, (body,))
    return Lambda((x,), body)


def let(value: ExprNode, fn) -> FunCall:
    """``let(v, lambda x: body)``: binds ``v`` to ``x`` in ``body``."""
    return FunCall(lam(fn), (value,))


def map_(f: FunDecl, label: str | None = None) -> Map:
    return Map(f, "map", None, label)


def map_seq(f: FunDecl, label: str | None = None) -> Map:
    return Map(f, "mapSeq", None, label)


def map_glb(dim: int, f: FunDecl, label: str | None = None) -> Map:
    return Map(f, "mapGlb", dim, label)


def map_wrg(dim: int, f: FunDecl, label: str | None = None) -> Map:
    return Map(f, "mapWrg", dim, label)


def map_lcl(dim: int, f: FunDecl, label: str | None = None) -> Map:
    return Map(f, "mapLcl", dim, label)


def reduce_(f: FunDecl) -> Reduce:
    return Reduce(f, "reduce")


def reduce_seq(f: FunDecl) -> Reduce:
    return Reduce(f, "reduceSeq")


def split(m) -> Split:
    return Split(m)


def join() -> Join:
    return Join()


def zip_(*arrays: ExprNode) -> FunCall:
    return FunCall(Zip(len(arrays)), tuple(arrays))


def slide(size, step, strict: bool = False) -> Slide:
    return Slide(size, step, strict)


def pad(left, right, value: float = 0.0) -> Pad:
    return Pad(left, right, value)


def transpose() -> Transpose:
    return Transpose()


def reorder_stride(s) -> ReorderStride:
    return ReorderStride(s)


def get(i: int) -> Get:
    return Get(i)


def as_vector(v) -> AsVector:
    return AsVector(v)


def as_scalar() -> AsScalar:
    return AsScalar()


def to_global(f: FunDecl) -> ToMem:
    return ToMem(f, "global")


def to_local(f: FunDecl) -> ToMem:
    return ToMem(f, "local")


def to_private(f: FunDecl) -> ToMem:
    return ToMem(f, "private")


def vectorize(width, f: UserFun) -> Vectorize:
    return Vectorize(width, f)


# ------------------------------------------------------------------ user functions


def userfun(name, params, in_types, out_type, c_body, py) -> UserFun:
    return UserFun(name, tuple(params), tuple(in_types), out_type, c_body, py)


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

USER_FUNS = {f.name: f for f in (add, mult, mult_add, idf, dot)}


def _rebuild_user_fun(name, param_names, in_types, out_type, c_body) -> UserFun:
    """Unpickles a user function: the standard one when its name, C body and input types
    match (its numpy meaning need not follow from its body: ``dot``), else from the body."""
    std = USER_FUNS.get(name)
    if std is not None and std.c_body == c_body and std.in_types == in_types:
        return std
    return userfun_from_c(name, param_names, in_types, out_type, c_body)


def _reduce_user_fun(uf: UserFun):
    std = USER_FUNS.get(uf.name)
    if std is not None and std.c_body == uf.c_body and std.in_types == uf.in_types:
        return (_rebuild_user_fun,
                (uf.name, uf.param_names, uf.in_types, uf.out_type, uf.c_body))
    return uf.__reduce__()  # from the C body, or with its numpy meaning (statement bodies)


# Pickles (and copies) of user functions made once this module is loaded come back to it,
# so the standard functions stay themselves; ir.nodes cannot know them (no import cycle).
copyreg.pickle(UserFun, _reduce_user_fun)


# -------------------------------------------------------------------------- macros


def map_nd(n: int, f: FunDecl) -> FunDecl:
    """``mapND(n, f)``: ``f`` mapped over the n outer dimensions."""
    for _ in range(n):
        f = map_(f)
    return f


def join_nd(n: int) -> FunDecl:
    """``joinND(n)``: n joins, flattening n+1 outer dimensions into one."""
    return compose(*([join()] * n)) if n > 1 else join()


def zip_nd(n: int, *arrays: ExprNode) -> ExprNode:
    """``zipND(n, a, b, ...)``: zip at n nested levels."""
    if n == 1:
        return zip_(*arrays)
    k = len(arrays)

    def inner(t):
        return zip_nd(n - 1, *[FunCall(Get(i), (t,)) for i in range(k)])

    return FunCall(map_(lam(inner)), (zip_(*arrays),))


def _move_outer_in(k: int) -> FunDecl:
    """Moves the outermost dimension k levels inward (``transpose``, then ``map(transpose)``...)."""
    steps = []
    for level in range(k):
        t: FunDecl = transpose()
        for _ in range(level):
            t = map_(t)
        steps.append(t)
    return compose(*reversed(steps))


def slide_nd(n: int, sizes, steps, strict: bool = False) -> FunDecl:
    """``slideND(n, sizes, steps)``: ``[..[T]d_n..]d_1 -> [..[[..[T]s_n..]s_1]w_n..]w_1``."""
    sizes, steps = list(sizes), list(steps)
    if len(sizes) != n or len(steps) != n:
        raise ValueError(f"slideND({n}) needs {n} sizes and {n} steps")
    if n == 1:
        return slide(sizes[0], steps[0], strict)
    inner = slide_nd(n - 1, sizes[1:], steps[1:], strict)
    return compose(
        map_(_move_outer_in(n - 1)), slide(sizes[0], steps[0], strict), map_(inner)
    )


def pad_nd(n: int, pads, value: float = 0.0) -> FunDecl:
    """``padND(n, [(l1, r1), ..., (ln, rn)])``: pads each of the n outer dimensions."""
    pads = list(pads)
    if len(pads) != n:
        raise ValueError(f"padND({n}) needs {n} (left, right) pairs")
    (l1, r1) = pads[0]
    if n == 1:
        return pad(l1, r1, value)
    return compose(pad(l1, r1, value), map_(pad_nd(n - 1, pads[1:], value)))


def slide2d(size1, step1, size2, step2, strict: bool = False) -> FunDecl:
    return slide_nd(2, (size1, size2), (step1, step2), strict)


def pad2d(top, bottom, left, right, value: float = 0.0) -> FunDecl:
    return pad_nd(2, [(top, bottom), (left, right)], value)
