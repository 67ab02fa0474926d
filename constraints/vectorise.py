"""Compile a restriction predicate (:mod:`constraints.predicates`) twice: to a scalar Python
function and to a numpy function over column arrays.

Both take the values of the predicate's parameters positionally (in the order given).
Semantics of failures: a restriction whose evaluation raises (division or modulo by zero,
``0 ** -1``, a negative number to a fractional power, float overflow in ``**``) is *false*
for that configuration. Short-circuiting is kept: ``b == 0 or a % b == 0`` is true for
``b == 0``. The vectorised form reproduces this exactly with an error mask per
sub-expression, and turns ``and``/``or``/``not`` and chained comparisons into element-wise
``& | ~``. Comparisons involving strings or other Python objects (object columns) are made
element by element with Python's operators (an ordering of a string and a number raises in
Python: false there too); ``in`` a literal list is equality with any of its values. It
computes in int64/float64: integer results beyond 2**63 wrap (the scalar form uses Python
integers), which realistic tuning spaces never reach.
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from constraints.expr import COMPARISONS
from constraints.predicates import (
    Arith,
    BoolOp,
    Call,
    Compare,
    Expression,
    Member,
    Name,
    Negation,
    Num,
    Sign,
    Str,
    Truth,
)

__all__ = ["SCALAR_ERRORS", "compile_vector", "compile_scalar"]

SCALAR_ERRORS = (ArithmeticError, ValueError, TypeError)
"""What makes the scalar form of a predicate false rather than raise."""

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


def _spow(a: Any, b: Any) -> Any:
    """Scalar ``**`` with the same failure rules as the vectorised form."""
    if a < 0 and b != math.floor(b):
        raise ValueError(  # builtin: math.pow's domain error, caught (SCALAR_ERRORS): row false
            "negative base to a fractional power")
    return a**b


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
_PYCMP: dict[str, Callable[[Any, Any], Any]] = COMPARISONS  # the scalar comparisons


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


def _build(e: Expression, index: dict[str, int]) -> Closure:
    if isinstance(e, (Num, Truth, Str)):
        c = _const(e.value)
        return lambda cols: (c, None)
    if isinstance(e, Name):
        i = index[e.id]
        return lambda cols: (cols[i], None)
    if isinstance(e, Member):
        f = _build(e.operand, index)
        values, negated = e.values, e.negated

        def _member(cols: tuple) -> tuple[Any, Any]:
            v, err = f(cols)
            hit: Any = np.zeros(np.shape(v), dtype=bool)
            for x in values:
                hit = hit | _compare("==", v, x)[0]  # equality never raises
            if negated:
                hit = ~hit
            return (hit if err is None else hit & ~err), err

        return _member
    if isinstance(e, Negation):
        f = _build(e.operand, index)

        def _not(cols: tuple) -> tuple[Any, Any]:
            v, err = f(cols)
            return (~v if err is None else ~v & ~err), err

        return _not
    if isinstance(e, Sign):
        f = _build(e.operand, index)
        if e.op == "-":

            def _neg(cols: tuple) -> tuple[Any, Any]:
                v, err = f(cols)
                return np.negative(v), err

            return _neg
        return f
    if isinstance(e, Arith):
        out = _build(e.args[0], index)
        for right in e.args[1:]:  # left to right, as Python groups a + b + c
            out = _binary(e.op, out, _build(right, index), right)
        return out
    if isinstance(e, Call):
        fs = [_build(a, index) for a in e.args]
        fn = _FUNCS[e.fn]

        def _call(cols: tuple) -> tuple[Any, Any]:
            parts = [f(cols) for f in fs]
            err = None
            for _, pe in parts:
                err = _eor(err, pe)
            return fn(*[v for v, _ in parts]), err

        return _call
    if isinstance(e, Compare):
        fs = [_build(v, index) for v in e.operands]
        ops = list(e.ops)

        def _cmp(cols: tuple) -> tuple[Any, Any]:
            a, ea = fs[0](cols)
            val, err = None, None
            for op, f in zip(ops, fs[1:], strict=True):
                b, eb = f(cols)
                cv, cerr = _compare(op, a, b)
                ce = _eor(_eor(ea, eb), cerr)
                if ce is not None:
                    cv = cv & ~ce
                if val is None:
                    val, err = cv, ce
                else:  # and-chaining with short-circuit
                    if ce is not None:
                        err = _eor(err, val & ce)
                    val = val & cv
                a, ea = b, None  # errors of b are already counted
            return val, err

        return _cmp
    if isinstance(e, BoolOp):
        fs = [_build(v, index) for v in e.values]
        is_and = e.op == "and"

        def _boolop(cols: tuple) -> tuple[Any, Any]:
            val, err = fs[0](cols)
            for f in fs[1:]:
                v2, e2 = f(cols)
                if is_and:
                    if e2 is not None:
                        err = _eor(err, val & e2)
                    val = val & v2
                else:
                    if e2 is not None:
                        alive = ~val if err is None else ~val & ~err
                        err = _eor(err, alive & e2)
                        v2 = v2 & ~e2
                    val = val | (v2 if err is None else v2 & ~err)
            return val, err

        return _boolop
    raise TypeError(  # builtin: every Expression class is compiled; another one is a bug
        f"cannot compile {type(e).__name__}")


def _binary(op: str, lf: Closure, rf: Closure, right: Expression) -> Closure:
    if op == "**":

        def _pow(cols: tuple) -> tuple[Any, Any]:
            (a, ea), (b, eb) = lf(cols), rf(cols)
            v, err = _vpow(a, b)
            return v, _eor(_eor(ea, eb), err)

        return _pow
    fn = _ARITH[op]
    divides = op in ("/", "//", "%")
    const_rhs = isinstance(right, Num) and right.value != 0

    def _bin(cols: tuple) -> tuple[Any, Any]:
        (a, ea), (b, eb) = lf(cols), rf(cols)
        err = _eor(ea, eb)
        if divides and not const_rhs:
            err = _eor(err, _none_if_clear(b == 0))
        return fn(a, b), err

    return _bin


def compile_vector(pred: Expression, params: Sequence[str]) -> Callable[..., np.ndarray]:
    """``vector(*columns) -> bool array`` (broadcast to the first column's shape): the
    predicate on rows of parameter values, false where evaluating it would raise."""
    body = _build(pred, {n: i for i, n in enumerate(params)})

    def vector(*cols: Any) -> np.ndarray:
        with np.errstate(all="ignore"):
            val, err = body(cols)
        if err is not None:
            val = val & ~err
        if cols:
            return np.broadcast_to(np.asarray(val, dtype=bool), np.shape(cols[0]))
        return np.asarray(val, dtype=bool)

    return vector


# ----------------------------------------------------------------------------- scalar form

_AST_ARITH: dict[str, type] = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
    "/": ast.Div,
    "//": ast.FloorDiv,
    "%": ast.Mod,
}
_AST_CMP: dict[str, type] = {
    "==": ast.Eq,
    "!=": ast.NotEq,
    "<": ast.Lt,
    "<=": ast.LtE,
    ">": ast.Gt,
    ">=": ast.GtE,
}


def _to_ast(e: Expression, index: dict[str, int]) -> ast.expr:
    """Python AST of ``e``: parameters as ``_p<i>``, ``**`` as the checked ``_pow``."""
    if isinstance(e, (Num, Truth, Str)):
        return ast.Constant(e.value)
    if isinstance(e, Member):
        listed = ast.Tuple([ast.Constant(v) for v in e.values], ast.Load())
        member_op: ast.cmpop = ast.NotIn() if e.negated else ast.In()
        return ast.Compare(_to_ast(e.operand, index), [member_op], [listed])
    if isinstance(e, Name):
        return ast.Name(f"_p{index[e.id]}", ast.Load())
    if isinstance(e, Sign):
        sign: ast.unaryop = ast.USub() if e.op == "-" else ast.UAdd()
        return ast.UnaryOp(sign, _to_ast(e.operand, index))
    if isinstance(e, Negation):
        return ast.UnaryOp(ast.Not(), _to_ast(e.operand, index))
    if isinstance(e, Arith):
        out = _to_ast(e.args[0], index)
        for a in e.args[1:]:
            right = _to_ast(a, index)
            if e.op == "**":
                out = ast.Call(ast.Name("_pow", ast.Load()), [out, right], [])
            else:
                out = ast.BinOp(out, _AST_ARITH[e.op](), right)
        return out
    if isinstance(e, Call):
        return ast.Call(ast.Name(e.fn, ast.Load()), [_to_ast(a, index) for a in e.args], [])
    if isinstance(e, Compare):
        first, *rest = (_to_ast(v, index) for v in e.operands)
        return ast.Compare(first, [_AST_CMP[o]() for o in e.ops], rest)
    if isinstance(e, BoolOp):
        bool_op: ast.boolop = ast.And() if e.op == "and" else ast.Or()
        return ast.BoolOp(bool_op, [_to_ast(v, index) for v in e.values])
    raise TypeError(  # builtin: every Expression class is compiled; another one is a bug
        f"cannot compile {type(e).__name__}")


def compile_scalar(pred: Expression, params: Sequence[str], label: str) -> Callable[..., Any]:
    """A Python function of the parameters' values (positional, in ``params`` order) that
    evaluates the predicate; it raises what Python raises (see :data:`SCALAR_ERRORS`).
    ``label`` names the compiled code in tracebacks."""
    body = _to_ast(pred, {n: i for i, n in enumerate(params)})
    lam = ast.Expression(
        ast.Lambda(
            ast.arguments(
                posonlyargs=[],
                args=[ast.arg(f"_p{i}") for i in range(len(params))],
                kwonlyargs=[],
                kw_defaults=[],
                defaults=[],
            ),
            body,
        )
    )
    ast.fix_missing_locations(lam)
    env = {"__builtins__": {}, "min": min, "max": max, "abs": abs, "_pow": _spow}
    return eval(compile(lam, f"<restriction {label}>", "eval"), env)  # noqa: S307 - our AST
