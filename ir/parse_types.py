"""The type and size grammar of the text syntax (``[[float]M](N/s)``, ``float<v>``, ``N/s``).

Sizes become ``ir.sym`` expressions: ``/`` is exact division, ``//`` floor division, and
``min``/``max`` take two sizes. Vector widths are OpenCL's (2, 3, 4, 8, 16; 1 in
``float<1>``).
"""

from __future__ import annotations

import difflib
import re

from ir.lexer import Token, TokenCursor, nested
from ir.size_grammar import SizeGrammar
from ir.sym import Cst, Expr, SymbolicError, Var, smax, smin
from ir.types import SCALARS, ArrayType, TupleType, Type, VectorType

VEC_RE = re.compile(r"(float|int)(\d+)")
_WIDTHS = (1, 2, 3, 4, 8, 16)  # vector widths of OpenCL C (1: the scalar)


class TypeReader(TokenCursor, SizeGrammar):
    """Reads types and size expressions (:class:`SizeGrammar`) from the tokens."""

    @nested
    def type_(self) -> Type:
        t = self.peek()
        if t.kind == "name":
            name = t.text
            if name in SCALARS:
                self.next()
                if self.at("<") and not self.peek().nl:
                    self.next()
                    wt = self.peek()
                    w = self.size()
                    self.expect(">", " to close the vector width")
                    if w.is_const and w.as_int() not in _WIDTHS:
                        raise self.error(f"vector width {w} is not one of OpenCL's widths "
                                         f"{', '.join(map(str, _WIDTHS))}", wt)
                    return VectorType(SCALARS[name], w)
                return SCALARS[name]
            m = VEC_RE.fullmatch(name)
            if m:
                if int(m[2]) not in _WIDTHS[1:]:
                    raise self.error(f"{name!r}: OpenCL vector types have 2, 3, 4, 8 or 16 "
                                     "lanes", t)
                self.next()
                return VectorType(SCALARS[m[1]], Cst(int(m[2])))
            close = difflib.get_close_matches(name, ["float", "int", "float4"], 1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self.error(f"unknown type {name!r}{hint} (types: float, int, float2/4/8/16, "
                             "float<v>, [T]n, (T, U))", t)
        if self.at("["):
            self.next()
            elem = self.type_()
            self.expect("]", " to close the array type")
            return ArrayType(elem, self.size_atom(" (the array length)"))
        if self.at("("):
            self.next()
            if self.at(")"):
                self.next()
                return TupleType(())
            elems = [self.type_()]
            trailing = False
            while self.at(","):
                self.next()
                if self.at(")"):
                    trailing = True
                    break
                elems.append(self.type_())
            self.expect(")", " to close the tuple type")
            if len(elems) == 1 and not trailing:
                return elems[0]
            return TupleType(tuple(elems))
        raise self.error(f"expected a type, found {self.describe(t)}", t)

    # ------------------------------------------------------------------ sizes
    # the grammar is ir.size_grammar's (ir.sym.parse_expr reads the same); here the leaves
    # and the errors are located, and unary operators count towards the nesting limit
    @nested
    def size_unary(self) -> Expr:
        return super().size_unary()

    def arith(self, op: Token, a: Expr, b: Expr) -> Expr:
        try:
            return super().arith(op, a, b)
        except (SymbolicError, ZeroDivisionError) as ex:
            raise self.error(f"bad size expression: {ex}", op) from None

    def size_int(self, text: str) -> Expr:
        return Cst(int(text))

    def size_name(self, text: str) -> Expr:
        return Var(text)

    def size_minmax(self, name: str, a: Expr, b: Expr) -> Expr:
        return smin(a, b) if name == "min" else smax(a, b)


def parse_type(text: str) -> Type:
    """Parse a type: ``[[float]M](N/s)``, ``float4``, ``float<v>``, ``(float, int)``."""
    return TypeReader(text).whole(TypeReader.type_)


def parse_size(text: str) -> Expr:
    """Parse a size expression (``N/s`` exact, ``(N + 2)//4`` floor, ``min(a, b)``...)."""
    return TypeReader(text).whole(TypeReader.size)
