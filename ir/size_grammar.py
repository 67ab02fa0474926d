"""The grammar of size expressions, shared by the text syntax and ``ir.sym.parse_expr``.

``size := term (('+' | '-') term)*``, ``term := unary (('*' | '/' | '//' | '%') unary)*``,
``unary := ('-' | '+') unary | atom``, ``atom := int | name | min(size, size) |
max(size, size) | '(' size ')'``. ``/`` is exact division, ``//`` floor division.

:class:`SizeGrammar` is a mixin: the reader it is mixed into supplies the tokens (``peek``,
``at``, ``next``, ``error``, ``describe``; tokens have ``kind`` and ``text``) and the leaves
(``size_int``, ``size_name``, ``size_minmax``); ``expect`` is :class:`TokenReader`'s, which
every reader of tokens shares. This module imports nothing from the library, so that
``ir.sym`` and the syntax's readers can both build on it.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

_ARITH = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
}


class TokenReader:
    """The helper every reader of tokens shares (mixin): :meth:`expect`, on what the reader
    supplies (``peek``, ``at``, ``next``, ``error``, ``describe``)."""

    if TYPE_CHECKING:  # what the reader supplies
        def peek(self, k: int = 0) -> Any: ...
        def at(self, text: str, k: int = 0) -> bool: ...
        def next(self) -> Any: ...
        def error(self, msg: str, tok: Any) -> Exception: ...
        def describe(self, t: Any) -> str: ...

    def expect(self, text: str, hint: str = "") -> Any:
        """The next token, which must be ``text``; else an error naming what is found."""
        if not self.at(text):
            t = self.peek()
            raise self.error(f"expected {text!r}{hint}, found {self.describe(t)}", t)
        return self.next()


class SizeGrammar(TokenReader):
    """Reads size expressions (mixin; see the module docstring for what the reader supplies)."""

    if TYPE_CHECKING:  # what the reader supplies, besides the tokens
        def size_int(self, text: str) -> Any: ...
        def size_name(self, text: str) -> Any: ...
        def size_minmax(self, name: str, a: Any, b: Any) -> Any: ...

    def size(self) -> Any:
        e = self.size_term()
        while self.at("+") or self.at("-"):
            op = self.next()
            r = self.size_term()
            e = self.arith(op, e, r)
        return e

    def size_term(self) -> Any:
        e = self.size_unary()
        while self.peek().kind == "op" and self.peek().text in ("*", "/", "//", "%"):
            op = self.next()
            e = self.arith(op, e, self.size_unary())
        return e

    def arith(self, op: Any, a: Any, b: Any) -> Any:
        """``a op b`` for the operator token ``op``."""
        return _ARITH[op.text](a, b)

    def size_unary(self) -> Any:
        if self.at("-"):
            self.next()
            return -self.size_unary()
        if self.at("+"):
            self.next()
            return self.size_unary()
        return self.size_atom()

    def size_atom(self, what: str = "") -> Any:
        t = self.peek()
        if t.kind == "int":
            self.next()
            return self.size_int(t.text)
        if t.kind == "name":
            if t.text in ("min", "max") and self.at("(", 1):
                self.next()
                self.next()
                a = self.size()
                self.expect(",", f" between the arguments of {t.text}")
                b = self.size()
                self.expect(")")
                return self.size_minmax(t.text, a, b)
            if t.text in ("min", "max"):
                raise self.error(f"{t.text} needs two arguments: {t.text}(a, b)", t)
            self.next()
            return self.size_name(t.text)
        if self.at("("):
            self.next()
            e = self.size()
            self.expect(")", " to close the size expression")
            return e
        if t.kind == "float":
            raise self.error(f"sizes are integers, found {t.text!r}", t)
        raise self.error(f"expected a size{what} (an integer, a name or a parenthesised size "
                         f"expression), found {self.describe(t)}", t)
