"""Reference interpreter: evaluates a well-typed program on numpy arrays.

It is the oracle generated kernels are checked against, so it follows the
definitions of the primitives directly. Maps are vectorised the way ``vmap``
works: evaluating ``map(f)`` adds a *batch axis* and evaluates ``f`` once on the
whole array. A value is a numpy array whose first ``depth`` axes are batch axes
(size 1 where the value does not depend on that map), or a tuple of such arrays
(arrays of tuples are stored as tuples of arrays). Only ``reduce`` loops, over
its input length.

All map variants (mapSeq, mapGlb, ...) and memory annotations mean the same as
plain ``map``: they change where a computation runs, not what it computes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ir import nodes
from ir.errors import InterpreterError
from ir.sym import Expr
from ir.typecheck import typecheck
from ir.types import ArrayType, ScalarType, TupleType, Type, VectorType, shape_of
from ir.visitor import Dispatch

DTYPES = {"float": np.float32, "int": np.int32}


def _tmap(fn, data):
    if isinstance(data, tuple):
        return tuple(_tmap(fn, d) for d in data)
    return fn(data)


def _divided_length(a: np.ndarray, b: int, m: int, what: str) -> int:
    """The length of axis ``b`` of ``a``, which ``what`` needs a positive multiple of ``m``."""
    n = a.shape[b]
    if m <= 0 or n % m:
        raise InterpreterError(f"{what} of an array of length {n}")
    return n


def _first(data) -> np.ndarray:
    while isinstance(data, tuple):
        data = data[0]
    return data


def _lift(data, frm: int, to: int):
    """Insert singleton batch axes so a value of depth ``frm`` has depth ``to``."""
    if frm == to:
        return data
    k = to - frm

    def f(a):
        return a.reshape(a.shape[:frm] + (1,) * k + a.shape[frm:])

    return _tmap(f, data)


class Interpreter:
    """Evaluates one program for concrete sizes (see ``evaluate``): one method per node
    class, ``eval_*`` for expressions and ``apply_*`` for function declarations."""

    pass_name = "interpreter"

    def __init__(self, sizes: Mapping[str, int], dtype=np.float32):
        self.sizes = dict(sizes)
        self.dtype = dtype

    def n(self, e: Expr) -> int:
        return e.evaluate(self.sizes)

    # env: name -> (data, depth); b: current depth (number of enclosing maps)
    expr = Dispatch("eval", nodes.Node)  # expr(e, env, b): the value of an expression
    apply = Dispatch("apply", nodes.FunDecl)  # apply(f, args, env, b): f applied to argument values

    # ------------------------------------------------------------- expressions
    def eval_param(self, e: nodes.Param, env: dict, b: int):
        try:
            data, depth = env[e.name]
        except KeyError:
            raise InterpreterError(f"no value for parameter {e.name!r}") from None
        return _lift(data, depth, b)

    def eval_literal(self, e: nodes.Literal, env: dict, b: int):
        return _lift(self.literal(e.value, e.type), 0, b)

    def eval_fun_call(self, e: nodes.FunCall, env: dict, b: int):
        args = [self.expr(a, env, b) for a in e.args]
        return self.apply(e.f, args, env, b)

    def eval_fun_decl(self, e: nodes.FunDecl, env: dict, b: int):
        raise InterpreterError(f"cannot evaluate {type(e).__name__}")

    def literal(self, value, t: Type) -> np.ndarray:
        sizes, inner = shape_of(t)
        shape = tuple(self.n(s) for s in sizes)
        if isinstance(inner, VectorType):
            shape += (self.n(inner.width),)
            inner = inner.elem
        if not isinstance(inner, ScalarType):
            raise InterpreterError(f"literal of type {t} is not supported")
        return np.full(shape, value, dtype=DTYPES.get(inner.name, self.dtype))

    # ---------------------------------------------- functions and user functions
    def apply_lambda(self, f: nodes.Lambda, args: list, env: dict, b: int):
        inner = dict(env)
        for p, a in zip(f.params, args):
            inner[p.name] = (a, b)
        return self.expr(f.body, inner, b)

    def apply_user_fun(self, f: nodes.UserFun, args: list, env: dict, b: int):
        arrs = [np.asarray(a) for a in args]
        ranks = [a.ndim - b for a in arrs]
        if max(ranks) > 0:  # vectors mixed with scalars: lanes on the last axis
            arrs = [a[..., None] if r == 0 else a for a, r in zip(arrs, ranks)]
        out = np.asarray(f.py(*arrs))
        dtype = np.result_type(*arrs) if arrs else self.dtype
        want = _scalar_of(f.out_type) if isinstance(f.out_type, (ScalarType, VectorType)) else ""
        if want == "int" and dtype.kind != "i":
            # C converts the returned value to the declared int: truncation toward zero
            dtype = DTYPES["int"]
        elif want == "float" and dtype.kind != "f":
            dtype = DTYPES["float"]  # and an int value to the declared float
        return np.asarray(out, dtype=dtype)

    def apply_vectorize(self, f: nodes.Vectorize, args: list, env: dict, b: int):
        return self.apply_user_fun(f.f, args, env, b)

    def apply_to_mem(self, f: nodes.ToMem, args: list, env: dict, b: int):
        return self.apply(f.f, args, env, b)

    def apply_id(self, f: nodes.Id, args: list, env: dict, b: int):
        return args[0]

    def apply_zip(self, f: nodes.Zip, args: list, env: dict, b: int):
        return tuple(args)

    def apply_get(self, f: nodes.Get, args: list, env: dict, b: int):
        (t,) = args
        return t[f.index]

    def apply_map(self, f: nodes.Map, args: list, env: dict, b: int):
        (arr,) = args
        n = _first(arr).shape[b]
        # the element is the array itself seen at depth b+1 (its axis b becomes a batch axis)
        out = self.apply(f.f, [arr], env, b + 1)

        def full(a):
            if a.shape[b] != n:
                shape = list(a.shape)
                shape[b] = n
                a = np.broadcast_to(a, tuple(shape))
            return a

        return _tmap(full, out)

    def apply_reduce(self, f: nodes.Reduce, args: list, env: dict, b: int):
        init, arr = args
        n = _first(arr).shape[b]
        acc = init
        idx = (slice(None),) * b
        for i in range(n):
            x = _tmap(lambda a, i=i: a[idx + (i,)], arr)
            acc = self.apply(f.f, [acc, x], env, b)
        return _tmap(lambda a: np.expand_dims(a, b), acc)

    # ------------------------------------------------------ layout primitives
    def apply_split(self, f: nodes.Split, args: list, env: dict, b: int):
        (x,) = args
        m = self.n(f.chunk)

        def split(a):
            n = _divided_length(a, b, m, f"split({m})")
            return a.reshape(a.shape[:b] + (n // m, m) + a.shape[b + 1 :])

        return _tmap(split, x)

    def apply_join(self, f: nodes.Join, args: list, env: dict, b: int):
        (x,) = args

        def join(a):
            return a.reshape(a.shape[:b] + (a.shape[b] * a.shape[b + 1],) + a.shape[b + 2 :])

        return _tmap(join, x)

    def apply_transpose(self, f: nodes.Transpose, args: list, env: dict, b: int):
        (x,) = args
        return _tmap(lambda a: np.swapaxes(a, b, b + 1), x)

    def apply_slide(self, f: nodes.Slide, args: list, env: dict, b: int):
        (x,) = args
        size, step = self.n(f.size), self.n(f.step)

        def slide(a):
            n = a.shape[b]
            if n < size:
                raise InterpreterError(f"slide({size}, {step}) of an array of length {n}")
            if f.strict and (n - size) % step:
                raise InterpreterError(
                    f"slideStrict({size}, {step}) of length {n}: windows do not cover it"
                )
            w = np.lib.stride_tricks.sliding_window_view(a, size, axis=b)[
                (slice(None),) * b + (slice(None, None, step),)
            ]
            return np.moveaxis(w, -1, b + 1)

        return _tmap(slide, x)

    def apply_pad(self, f: nodes.Pad, args: list, env: dict, b: int):
        (x,) = args
        left, right = self.n(f.left), self.n(f.right)

        def pad(a):
            n = a.shape[b]
            lo, hi = max(0, -left), n - max(0, -right)
            if hi < lo:
                raise InterpreterError(f"pad({left}, {right}) crops more than the length {n}")
            a = a[(slice(None),) * b + (slice(lo, hi),)]
            widths = [(0, 0)] * a.ndim
            widths[b] = (max(0, left), max(0, right))
            if any(widths[b]):
                a = np.pad(a, widths, mode="constant", constant_values=f.value)
            return a

        return _tmap(pad, x)

    def apply_reorder_stride(self, f: nodes.ReorderStride, args: list, env: dict, b: int):
        (x,) = args
        s = self.n(f.stride)

        def reorder(a):
            n = _divided_length(a, b, s, f"reorder by stride {s}")
            j = np.arange(n)
            return np.take(a, (j % s) * (n // s) + j // s, axis=b)

        return _tmap(reorder, x)

    def apply_as_vector(self, f: nodes.AsVector, args: list, env: dict, b: int):
        (x,) = args
        v = self.n(f.width)

        def asvec(a):
            if a.ndim != b + 1:
                raise InterpreterError("asVector needs an array of scalars")
            return a.reshape(a.shape[:b] + (a.shape[b] // v, v))

        return _tmap(asvec, x)

    def apply_as_scalar(self, f: nodes.AsScalar, args: list, env: dict, b: int):
        (x,) = args
        return _tmap(lambda a: a.reshape(a.shape[:b] + (a.shape[b] * a.shape[b + 1],)), x)


def bind_sizes(program: nodes.Lambda, inputs: Mapping[str, object],
               sizes: Mapping[str, int]) -> dict:
    """Size variables from the input shapes (``X: [float]N`` and a 1000-vector give N=1000)."""
    out = dict(sizes)
    for p in program.params:
        if p.name not in inputs:
            raise InterpreterError(f"missing input {p.name!r} (program inputs: "
                                   f"{', '.join(q.name for q in program.params)})")
        _bind(p.type, np.asarray(inputs[p.name]), p.name, out)
    return out


def _bind(t: Type | None, a: np.ndarray, name: str, out: dict) -> None:
    sizes, inner = shape_of(t)  # an untyped input is a scalar here (typecheck rejects it)
    expected = len(sizes) + (1 if isinstance(inner, VectorType) else 0)
    if isinstance(inner, TupleType):
        raise InterpreterError(f"input {name}: tuple-typed inputs are not supported")
    if a.ndim != expected:
        raise InterpreterError(f"input {name} has {a.ndim} dimensions but its type {t} has "
                               f"{expected}")
    dims = list(sizes) + ([inner.width] if isinstance(inner, VectorType) else [])
    for axis, (e, actual) in enumerate(zip(dims, a.shape)):
        fv = e.free_vars() - out.keys()
        if len(fv) == 1 and str(e) == next(iter(fv)):
            out[str(e)] = int(actual)
        elif fv:
            raise InterpreterError(
                f"input {name}: size {e} of axis {axis} depends on unknown {', '.join(sorted(fv))};"
                " pass it in sizes"
            )
        elif e.evaluate(out) != actual:
            raise InterpreterError(f"input {name}: axis {axis} has length {actual}, type says "
                                   f"{e} = {e.evaluate(out)}")


def evaluate(
    program: nodes.Node,
    inputs: Mapping[str, object] | None = None,
    sizes: Mapping[str, int] | None = None,
    *,
    dtype=np.float32,
    check_types: bool = True,
):
    """Evaluate ``program`` (a lambda with typed inputs) on numpy ``inputs``.

    Sizes are taken from the input shapes; tuning parameters and other sizes not
    visible in the shapes come from ``sizes``. Returns a numpy array (or a tuple of
    arrays for an array of tuples). A user function's result is converted to its declared
    type as C converts a returned value (a float returned as ``int`` truncates toward
    zero); NaN and infinities are values, computed without warnings.
    """
    with np.errstate(all="ignore"):  # NaN and infinities are values here, as in C
        return _evaluate(program, dict(inputs or {}), sizes, dtype, check_types)


def _evaluate(program: nodes.Node, inputs: dict, sizes: Mapping[str, int] | None, dtype,
              check_types: bool):
    if isinstance(program, nodes.Lambda):
        env_sizes = bind_sizes(program, inputs, sizes or {})
        if check_types:
            typecheck(program, env_sizes)
        it = Interpreter(env_sizes, dtype)
        env = {}
        for p in program.params:
            a = np.asarray(inputs[p.name])
            base = _scalar_of(p.type)
            env[p.name] = (a.astype(DTYPES.get(base, dtype), copy=False), 0)
        out = it.expr(program.body, env, 0)
    else:
        env_sizes = dict(sizes or {})
        if check_types:
            typecheck(program, env_sizes)
        out = Interpreter(env_sizes, dtype).expr(program, {}, 0)
    return _tmap(lambda a: np.array(a, order="C"), out)


def _scalar_of(t: Type | None) -> str:
    _, inner = shape_of(t)
    if isinstance(inner, VectorType):
        inner = inner.elem
    return inner.name if isinstance(inner, ScalarType) else "float"


__all__ = ["evaluate", "Interpreter", "bind_sizes", "ArrayType"]
