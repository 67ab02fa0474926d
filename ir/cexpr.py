"""The C expressions of user function bodies, translated to numpy (their interpreter meaning).

A user function declared in the text syntax has one C expression as its body (``+ - * / %``,
comparisons, ``&& || !``, ``c ? a : b``, calls of the functions of ``C_FUNS``); the OpenCL
body is ``return <expression>;`` and the numpy translation of the expression (``f``
suffixes dropped, C's truncating integer division) is its meaning for the interpreter.

A leaf module (it knows no IR node): the parser reads declarations with
:class:`CExprReader`, and ``ir.nodes`` rebuilds an unpickled user function's meaning with
:func:`c_meaning`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from ir.errors import UserFunBodyError
from ir.lexer import Token, TokenCursor, nested

C_FUNS = {
    "fmax": ("np.maximum({0}, {1})", 2), "fmin": ("np.minimum({0}, {1})", 2),
    "max": ("np.maximum({0}, {1})", 2), "min": ("np.minimum({0}, {1})", 2),
    "exp": ("np.exp({0})", 1), "log": ("np.log({0})", 1), "sqrt": ("np.sqrt({0})", 1),
    "fabs": ("np.abs({0})", 1), "abs": ("np.abs({0})", 1), "tanh": ("np.tanh({0})", 1),
    "sin": ("np.sin({0})", 1), "cos": ("np.cos({0})", 1), "pow": ("np.power({0}, {1})", 2),
    "floor": ("np.floor({0})", 1), "ceil": ("np.ceil({0})", 1),
    "mad": ("({0} * {1} + {2})", 3), "fma": ("({0} * {1} + {2})", 3),
    "clamp": ("np.clip({0}, {1}, {2})", 3), "dot": ("_dot({0}, {1})", 2),
}
_C_CMP = ("<", ">", "<=", ">=", "==", "!=")

# A C body the syntax can write: ``return <expression>;``
RETURN_RE = re.compile(r"\s*return\s+(.*?)\s*;\s*", re.S)


def _is_int(x) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, (int, np.integer)):
        return True
    return isinstance(x, np.ndarray) and x.dtype.kind in "iu"


def _cdiv(a, b):
    """C division: truncating for two integers, true division otherwise."""
    if _is_int(a) and _is_int(b):
        q = np.abs(a) // np.abs(b)
        return np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -q, q)
    return a / b


def _dot(a, b):
    return (np.asarray(a) * np.asarray(b)).sum(axis=-1)


def _fill(r, *args):
    """A constant result broadcast to the arguments' shape (element-wise meaning)."""
    if np.ndim(r) == 0 and args:
        shape = np.broadcast_shapes(*(np.shape(a) for a in args))
        if shape:
            return np.full(shape, r)
    return r


_PY_NS = {"np": np, "_cdiv": _cdiv, "_dot": _dot, "_fill": _fill, "__builtins__": {}}


def compile_py(nparams: int, src: str) -> Callable:
    """The numpy function of ``nparams`` arguments (``_a0``, ``_a1``...) computing ``src``."""
    names = ", ".join(f"_a{i}" for i in range(nparams))
    return eval(f"lambda {names}: _fill({src}{', ' if names else ''}{names})", dict(_PY_NS))


class CExprReader(TokenCursor):
    """Reads a C expression from the tokens and returns its numpy source text.

    ``c_params`` and ``c_name`` (the user function's parameters and name) are set before
    :meth:`c_expr`; at nesting depth 0 a line break ends the expression.
    """

    def __init__(self, text: str):
        super().__init__(text)
        self.c_depth = 0
        self.c_params: tuple[str, ...] = ()
        self.c_name = ""

    def c_source(self, a: int, b: int) -> str:
        """The C text of tokens ``a..b-1`` as written, comments and line breaks between
        them replaced by one space (a ``#`` comment must not reach the OpenCL source)."""
        out = [self.toks[a].text]
        for j in range(a + 1, b):
            prev, t = self.toks[j - 1], self.toks[j]
            out.append((" " if t.start > prev.end else "") + t.text)
        return "".join(out)

    def c_peek(self) -> Token:
        t = self.peek()
        if self.c_depth == 0 and t.nl:
            return self.toks[-1]
        return t

    def c_at(self, text: str) -> bool:
        t = self.c_peek()
        return t.kind == "op" and t.text == text

    def c_expr(self) -> str:
        c = self.c_or()
        if self.c_at("?"):
            self.next()
            self.c_depth += 1
            a = self.c_expr()
            self.expect(":", " in the conditional expression")
            self.c_depth -= 1
            b = self.c_expr()
            return f"np.where({c}, {a}, {b})"
        return c

    def c_or(self) -> str:
        """Comparisons joined by ``&&`` and ``||`` (``&&`` binds tighter, both to the left),
        as nested ``np.logical_and`` and ``np.logical_or`` calls."""
        ors = None  # the `||` operands so far, joined
        left = self.c_cmp()  # the current `&&` chain
        while True:
            if self.c_at("&&"):
                self.next()
                left = f"np.logical_and({left}, {self.c_cmp()})"
            elif self.c_at("||"):
                self.next()
                ors = left if ors is None else f"np.logical_or({ors}, {left})"
                left = self.c_cmp()
            else:
                return left if ors is None else f"np.logical_or({ors}, {left})"

    def c_cmp(self) -> str:
        left = self.c_sum()
        t = self.c_peek()
        if t.kind == "op" and t.text in _C_CMP:
            self.next()
            return f"({left} {t.text} {self.c_sum()})"
        return left

    def c_sum(self) -> str:
        left = self.c_prod()
        while self.c_at("+") or self.c_at("-"):
            op = self.next().text
            left = f"({left} {op} {self.c_prod()})"
        return left

    def c_prod(self) -> str:
        left = self.c_unary()
        while self.c_at("*") or self.c_at("/") or self.c_at("%"):
            op = self.next().text
            right = self.c_unary()
            if op == "*":
                left = f"({left} * {right})"
            elif op == "/":
                left = f"_cdiv({left}, {right})"
            else:
                left = f"np.fmod({left}, {right})"
        return left

    @nested
    def c_unary(self) -> str:
        if self.c_at("-"):
            self.next()
            return f"(-{self.c_unary()})"
        if self.c_at("+"):
            self.next()
            return self.c_unary()
        if self.c_at("!"):
            self.next()
            return f"np.logical_not({self.c_unary()})"
        return self.c_primary()

    def c_primary(self) -> str:
        t = self.c_peek()
        if t.kind == "int":
            self.next()
            return str(int(t.text))
        if t.kind == "float":
            self.next()
            v = float(t.text.rstrip("fF"))
            return "np.inf" if v == np.inf else repr(v)  # 1e999f: C's value is +inf
        if t.kind == "op" and t.text == "(":
            self.next()
            self.c_depth += 1
            e = self.c_expr()
            self.expect(")")
            self.c_depth -= 1
            return f"({e})"
        if t.kind == "name":
            self.next()
            if self.c_at("("):
                if t.text not in C_FUNS:
                    raise self.error(
                        f"unknown C function {t.text!r} in user function {self.c_name!r}; "
                        f"supported: {', '.join(sorted(C_FUNS))}", t)
                template, arity = C_FUNS[t.text]
                self.next()
                self.c_depth += 1
                args = [self.c_expr()]
                while self.c_at(","):
                    self.next()
                    args.append(self.c_expr())
                self.expect(")")
                self.c_depth -= 1
                if len(args) != arity:
                    raise self.error(f"{t.text} takes {arity} argument(s), given {len(args)}", t)
                return template.format(*args)
            if t.text in self.c_params:
                return f"_a{self.c_params.index(t.text)}"
            raise self.error(f"unknown name {t.text!r} in the body of user function "
                             f"{self.c_name!r} (parameters: {', '.join(self.c_params) or 'none'})",
                             t)
        if t is self.toks[-1]:
            raise self.error(f"the body of user function {self.c_name!r} ends too early",
                             self.toks[self.i - 1])
        raise self.error(f"expected a C expression in user function {self.c_name!r}, found "
                         f"{self.describe(t)}", t)


def c_meaning(name: str, param_names: Sequence[str], c_body: str) -> tuple[str, Callable]:
    """The C body as the parser writes it and the numpy meaning of a user function whose
    body is ``return <expression>;`` (raises ``UserFunBodyError``, a ``ValueError``, for
    another body, ``ParseError`` for an expression outside the syntax's C expressions)."""
    m = RETURN_RE.fullmatch(c_body)
    if not m:
        raise UserFunBodyError(f"user function {name!r}: cannot derive a meaning from the C "
                               f"body {c_body!r} (expected 'return <expression>;')")
    r = CExprReader(m.group(1))
    r.c_params, r.c_name = tuple(param_names), name
    src = r.c_expr()
    t = r.peek()
    if t.kind != "eof":
        raise r.error(f"unexpected {r.describe(t)} after the body of user function {name!r}", t)
    return f"return {r.c_source(0, r.i)};", compile_py(len(r.c_params), src)
