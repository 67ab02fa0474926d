"""Compile a term or predicate (:mod:`constraints.expr`) to a Python function of its
parameters' values, given positionally.

The node is turned into a Python AST (never into source text) and compiled once: the
function runs at the speed of a hand-written lambda. It raises what Python raises (see
:data:`constraints.expr.SCALAR_ERRORS`); ``**`` follows :func:`constraints.expr.python_pow`.
:func:`compile_predicate` is the checked, cached entry point (python-constraint's function
constraints call it); :func:`compile_scalar` the plain one.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Sequence
from typing import Any

import constraints.expr as ex
from constraints.errors import DuplicateNameError, UnknownParameterError

__all__ = ["compile_scalar", "compile_predicate"]

_AST_ARITH: dict[str, type[ast.operator]] = {
    "+": ast.Add,
    "-": ast.Sub,
    "*": ast.Mult,
    "/": ast.Div,
    "//": ast.FloorDiv,
    "%": ast.Mod,
}
_AST_CMP: dict[str, type[ast.cmpop]] = {
    "==": ast.Eq,
    "!=": ast.NotEq,
    "<": ast.Lt,
    "<=": ast.LtE,
    ">": ast.Gt,
    ">=": ast.GtE,
}


class _ToAst:
    """Python AST of a node: parameters as ``_p<i>``, ``**`` as a call of ``_pow``. One
    method per node class, found through the class (a missing one is a bug)."""

    def __init__(self, index: dict[str, int]) -> None:
        self.index = index

    def __call__(self, e: ex.Node) -> ast.expr:
        method: Callable[[Any], ast.expr] = getattr(self, "_" + type(e).__name__)
        return method(e)

    def _Param(self, e: ex.Param) -> ast.expr:  # noqa: N802 - named after the node class
        return ast.Name(f"_p{self.index[e.name]}", ast.Load())

    def _Const(self, e: ex.Const) -> ast.expr:  # noqa: N802
        return ast.Constant(e.value)

    def _Str(self, e: ex.Str) -> ast.expr:  # noqa: N802
        return ast.Constant(e.value)

    def _BoolConst(self, e: ex.BoolConst) -> ast.expr:  # noqa: N802
        return ast.Constant(e.value)

    def _BinOp(self, e: ex.BinOp) -> ast.expr:  # noqa: N802
        left, right = self(e.left), self(e.right)
        if e.op == "**":
            return ast.Call(ast.Name("_pow", ast.Load()), [left, right], [])
        return ast.BinOp(left, _AST_ARITH[e.op](), right)

    def _Neg(self, e: ex.Neg) -> ast.expr:  # noqa: N802
        return ast.UnaryOp(ast.USub(), self(e.operand))

    def _Call(self, e: ex.Call) -> ast.expr:  # noqa: N802
        return ast.Call(ast.Name(e.fn, ast.Load()), [self(a) for a in e.args], [])

    def _Cmp(self, e: ex.Cmp) -> ast.expr:  # noqa: N802
        return ast.Compare(self(e.left), [_AST_CMP[e.op]()], [self(e.right)])

    def _In(self, e: ex.In) -> ast.expr:  # noqa: N802
        listed = ast.Tuple([ast.Constant(v) for v in e.values], ast.Load())
        return ast.Compare(self(e.term), [ast.In()], [listed])

    def _And(self, e: ex.And) -> ast.expr:  # noqa: N802
        return ast.BoolOp(ast.And(), [self(p) for p in e.parts])

    def _Or(self, e: ex.Or) -> ast.expr:  # noqa: N802
        return ast.BoolOp(ast.Or(), [self(p) for p in e.parts])

    def _Not(self, e: ex.Not) -> ast.expr:  # noqa: N802
        return ast.UnaryOp(ast.Not(), self(e.arg))

    def _Implies(self, e: ex.Implies) -> ast.expr:  # noqa: N802
        return ast.BoolOp(ast.Or(), [ast.UnaryOp(ast.Not(), self(e.lhs)), self(e.rhs)])


def compile_scalar(node: ex.Node, params: Sequence[str], label: str) -> Callable[..., Any]:
    """A Python function of the parameters' values (positional, in ``params`` order) that
    evaluates ``node``; it raises what Python raises. ``label`` names the compiled code in
    tracebacks. Every parameter of ``node`` must be in ``params``."""
    body = _ToAst({n: i for i, n in enumerate(params)})(node)
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
    env = {"__builtins__": {}, **ex.FUNCTIONS, "_pow": ex.python_pow}
    return eval(compile(lam, f"<{label}>", "eval"), env)  # noqa: S307 - compiled from our AST


def compile_predicate(pred: ex.Pred, names: Sequence[str]) -> Callable[..., bool]:
    """A function of ``len(names)`` positional values (in `names` order) returning
    ``pred``'s truth value; compiled once per (predicate, names)."""
    names = tuple(names)
    missing = pred.params() - set(names)
    if missing:
        raise UnknownParameterError(
            f"cannot compile `{pred}`: parameter(s) {', '.join(sorted(missing))} "
            f"not among {names}"
        )
    if len(set(names)) != len(names):
        raise DuplicateNameError(f"duplicate names in {names}")
    return _compiled(pred, names)


@functools.lru_cache(maxsize=16384)
def _compiled(pred: ex.Pred, names: tuple[str, ...]) -> Callable[..., bool]:
    return compile_scalar(pred, names, f"predicate {pred}")
