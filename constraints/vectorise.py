"""Compile a predicate (:mod:`constraints.expr`) to a numpy function over column arrays:
the restriction of a tuning space evaluated on millions of configurations at once.

It takes the values of the predicate's parameters positionally (in the order given), as
columns. A configuration whose evaluation raises in Python (division or modulo by zero,
``0 ** -1``, a negative number to a fractional power, float overflow in ``**``, an ordering
of a string and a number) is *false*, exactly as the scalar form
(:mod:`constraints.scalar`) with its errors caught. Short-circuiting is kept: ``b == 0 or a
% b == 0`` is true for ``b == 0``; the vectorised form reproduces this with an error mask
per sub-expression and turns ``and``/``or``/``not`` into element-wise ``& | ~``.
Comparisons involving strings or other Python objects (object columns) are made element by
element with Python's operators; ``in`` is equality with any of the values. It computes in
int64/float64: integer results beyond 2**63 wrap (the scalar form uses Python integers),
which realistic tuning spaces never reach.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import constraints.expr as ex

__all__ = ["compile_vector"]

# Each compiled sub-expression maps the column tuple to (value, err); err is None when the
# sub-expression cannot fail, else a boolean mask of the rows where Python would raise.
# Invariant for truth values: value is False wherever err is True.


def _eor(a: Any, b: Any) -> Any:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _none_if_clear(err: Any) -> Any:
    return None if err is None or not np.any(err) else err


def _const(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        try:
            return np.int64(value)
        except OverflowError:
            return value
    return np.float64(value)


def _is_int(x: Any) -> bool:
    return np.asarray(x).dtype.kind in "iu"


def _vpow(a: Any, b: Any) -> tuple[Any, Any]:
    if _is_int(a) and _is_int(b) and not np.any(np.asarray(b) < 0):
        return np.power(a, b), None
    af = np.asarray(a, dtype=np.float64)
    bf = np.asarray(b, dtype=np.float64)
    err = ((af < 0) & (bf != np.floor(bf))) | ((af == 0) & (bf < 0))
    err = np.asarray(err)
    safe_a = np.where(err, 1.0, af)
    val = np.power(safe_a, bf)
    if not (_is_int(a) and _is_int(b)):  # Python float ** raises OverflowError
        err = err | (np.isinf(val) & np.isfinite(af) & np.isfinite(bf))
    return val, _none_if_clear(err)


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.true_divide,
    "//": np.floor_divide,
    "%": np.remainder,
}
_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "==": np.equal,
    "!=": np.not_equal,
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
}
_PYCMP: dict[str, Callable[[Any, Any], Any]] = ex.COMPARISONS  # the scalar comparisons


def _is_object(x: Any) -> bool:
    return isinstance(x, str) or getattr(x, "dtype", None) is np.dtype(object)


def _compare(op: str, a: Any, b: Any) -> tuple[Any, Any]:
    """``a op b`` element-wise and its error mask: numpy's for numbers, Python's operator
    element by element when an operand is a string or an object column (where Python
    raises ``TypeError``, as for ``'a' < 1``, the error mask is set)."""
    if not (_is_object(a) or _is_object(b)):
        return _CMP[op](a, b), None
    fn = _PYCMP[op]

    def one(x: Any, y: Any) -> int:
        try:
            return 1 if fn(x, y) else 0
        except TypeError:
            return 2

    codes = np.asarray(np.frompyfunc(one, 2, 1)(a, b), dtype=np.int8)
    return codes == 1, _none_if_clear(codes == 2)


_FUNCS: dict[str, Callable[..., Any]] = {
    "min": lambda *xs: functools.reduce(np.minimum, xs),
    "max": lambda *xs: functools.reduce(np.maximum, xs),
    "abs": np.abs,
}

Closure = Callable[[tuple], tuple[Any, Any]]


def _and(fs: Sequence[Closure]) -> Closure:
    """``fs[0] and fs[1] ...`` with Python's short-circuit: a part's errors count only
    where every part before it is true."""

    def _conj(cols: tuple) -> tuple[Any, Any]:
        val, err = fs[0](cols)
        for f in fs[1:]:
            v2, e2 = f(cols)
            if e2 is not None:
                err = _eor(err, val & e2)
            val = val & v2
        return val, err

    return _conj


def _or(fs: Sequence[Closure]) -> Closure:
    """``fs[0] or fs[1] ...`` with Python's short-circuit: a part's errors count only where
    every part before it is false (and did not raise)."""

    def _disj(cols: tuple) -> tuple[Any, Any]:
        val, err = fs[0](cols)
        for f in fs[1:]:
            v2, e2 = f(cols)
            if e2 is not None:
                alive = ~val if err is None else ~val & ~err
                err = _eor(err, alive & e2)
                v2 = v2 & ~e2
            val = val | (v2 if err is None else v2 & ~err)
        return val, err

    return _disj


def _not(f: Closure) -> Closure:
    def _negation(cols: tuple) -> tuple[Any, Any]:
        v, err = f(cols)
        return (~v if err is None else ~v & ~err), err

    return _negation


class _Builder:
    """The numpy closure of a node: one method per node class, found through the class
    (a missing one is a bug). A closure maps the column tuple to (value, error mask)."""

    def __init__(self, index: dict[str, int]) -> None:
        self.index = index

    def __call__(self, e: ex.Node) -> Closure:
        method: Callable[[Any], Closure] = getattr(self, "_" + type(e).__name__)
        return method(e)

    def _constant(self, value: Any) -> Closure:
        c = _const(value)
        return lambda cols: (c, None)

    def _Const(self, e: ex.Const) -> Closure:  # noqa: N802 - named after the node class
        return self._constant(e.value)

    def _Str(self, e: ex.Str) -> Closure:  # noqa: N802
        return self._constant(e.value)

    def _BoolConst(self, e: ex.BoolConst) -> Closure:  # noqa: N802
        return self._constant(e.value)

    def _Param(self, e: ex.Param) -> Closure:  # noqa: N802
        i = self.index[e.name]
        return lambda cols: (cols[i], None)

    def _In(self, e: ex.In) -> Closure:  # noqa: N802
        f = self(e.term)
        values = e.values

        def _member(cols: tuple) -> tuple[Any, Any]:
            v, err = f(cols)
            hit: Any = np.zeros(np.shape(v), dtype=bool)
            for x in values:
                hit = hit | _compare("==", v, x)[0]  # equality never raises
            return (hit if err is None else hit & ~err), err

        return _member

    def _Not(self, e: ex.Not) -> Closure:  # noqa: N802
        return _not(self(e.arg))

    def _Neg(self, e: ex.Neg) -> Closure:  # noqa: N802
        f = self(e.operand)

        def _neg(cols: tuple) -> tuple[Any, Any]:
            v, err = f(cols)
            return np.negative(v), err

        return _neg

    def _BinOp(self, e: ex.BinOp) -> Closure:  # noqa: N802
        return _binary(e.op, self(e.left), self(e.right), e.right)

    def _Call(self, e: ex.Call) -> Closure:  # noqa: N802
        fs = [self(a) for a in e.args]
        fn = _FUNCS[e.fn]

        def _call(cols: tuple) -> tuple[Any, Any]:
            parts = [f(cols) for f in fs]
            err = None
            for _, pe in parts:
                err = _eor(err, pe)
            return fn(*[v for v, _ in parts]), err

        return _call

    def _Cmp(self, e: ex.Cmp) -> Closure:  # noqa: N802
        lf, rf, op = self(e.left), self(e.right), e.op

        def _cmp(cols: tuple) -> tuple[Any, Any]:
            (a, ea), (b, eb) = lf(cols), rf(cols)
            cv, cerr = _compare(op, a, b)
            err = _eor(_eor(ea, eb), cerr)
            return (cv if err is None else cv & ~err), err

        return _cmp

    def _And(self, e: ex.And) -> Closure:  # noqa: N802
        return _and([self(p) for p in e.parts])

    def _Or(self, e: ex.Or) -> Closure:  # noqa: N802
        return _or([self(p) for p in e.parts])

    def _Implies(self, e: ex.Implies) -> Closure:  # noqa: N802
        return _or([_not(self(e.lhs)), self(e.rhs)])


def _binary(op: str, lf: Closure, rf: Closure, right: ex.Node) -> Closure:
    if op == "**":

        def _pow(cols: tuple) -> tuple[Any, Any]:
            (a, ea), (b, eb) = lf(cols), rf(cols)
            v, err = _vpow(a, b)
            return v, _eor(_eor(ea, eb), err)

        return _pow
    fn = _ARITH[op]
    divides = op in ("/", "//", "%")
    const_rhs = isinstance(right, ex.Const) and right.value != 0

    def _bin(cols: tuple) -> tuple[Any, Any]:
        (a, ea), (b, eb) = lf(cols), rf(cols)
        err = _eor(ea, eb)
        if divides and not const_rhs:
            err = _eor(err, _none_if_clear(b == 0))
        return fn(a, b), err

    return _bin


def compile_vector(pred: ex.Pred, params: Sequence[str]) -> Callable[..., np.ndarray]:
    """``vector(*columns) -> bool array`` (broadcast to the first column's shape): the
    predicate on rows of parameter values, false where evaluating it would raise."""
    body = _Builder({n: i for i, n in enumerate(params)})(pred)

    def vector(*cols: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            val, err = body(cols)
        if err is not None:
            val = val & ~err
        if cols:
            return np.broadcast_to(np.asarray(val, dtype=bool), np.shape(cols[0]))
        return np.asarray(val, dtype=bool)

    return vector
