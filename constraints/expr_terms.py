"""Integer terms of the constraint language (see :mod:`constraints.expr`): :class:`Param`,
:class:`Const` and :class:`BinOp`, built with ``+ - * // %`` on terms and ints (ints are
coerced to :class:`Const`). Comparing two terms with ``< <= > >=`` builds a predicate
(:class:`constraints.expr_preds.Cmp`).
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable, Mapping
from typing import Any

from constraints.errors import InvalidAssignmentError
from constraints.expr_node import Node, _check_int, _new, _wrap_py

# precedences, loosest first
_PREC_ADD, _PREC_MUL, _PREC_ATOM = range(1, 4)


class Term(Node):
    """An integer-valued expression."""

    __slots__ = ()

    def _prec(self) -> int:
        return _PREC_ATOM

    # arithmetic
    def __add__(self, other: Term | int) -> Term:
        return _binop("+", self, other)

    def __radd__(self, other: Term | int) -> Term:
        return _binop("+", other, self)

    def __sub__(self, other: Term | int) -> Term:
        return _binop("-", self, other)

    def __rsub__(self, other: Term | int) -> Term:
        return _binop("-", other, self)

    def __mul__(self, other: Term | int) -> Term:
        return _binop("*", self, other)

    def __rmul__(self, other: Term | int) -> Term:
        return _binop("*", other, self)

    def __floordiv__(self, other: Term | int) -> Term:
        return _binop("//", self, other)

    def __rfloordiv__(self, other: Term | int) -> Term:
        return _binop("//", other, self)

    def __mod__(self, other: Term | int) -> Term:
        return _binop("%", self, other)

    def __rmod__(self, other: Term | int) -> Term:
        return _binop("%", other, self)

    # comparisons (== and != stay structural)
    def __lt__(self, other: Term | int) -> preds.Pred:
        return _cmp_or_notimpl("<", self, other)

    def __le__(self, other: Term | int) -> preds.Pred:
        return _cmp_or_notimpl("<=", self, other)

    def __gt__(self, other: Term | int) -> preds.Pred:
        return _cmp_or_notimpl(">", self, other)

    def __ge__(self, other: Term | int) -> preds.Pred:
        return _cmp_or_notimpl(">=", self, other)


Operand = Term | int | numbers.Integral
"""What a term is built from: a term, or an int (coerced to :class:`Const`)."""


def as_term(value: Operand) -> Term:
    """`value` itself if it is a term, else an int coerced to :class:`Const`."""
    if isinstance(value, Term):
        return value
    if isinstance(value, Node):
        raise TypeError(f"expected an integer term, got the predicate {value}")
    return Const(_check_int(value, "a constant"))


class Param(Term):
    """A named integer parameter."""

    __slots__ = ("name",)
    _fields = ("name",)
    name: str

    def __new__(cls, name: str) -> Param:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a parameter name must be a non-empty str, got {name!r}")
        return _new(cls, name=name)

    def _compute_params(self) -> frozenset[str]:
        return frozenset((self.name,))

    def evaluate(self, assignment: Mapping[str, int]) -> int:
        try:
            return assignment[self.name]
        except KeyError:
            raise InvalidAssignmentError(f"no value for parameter {self.name!r}") from None

    def _py(self, rename: Mapping[str, str] | None) -> str:
        return self.name if rename is None else rename[self.name]

    def _atomic_py(self) -> bool:
        return True

    def __str__(self) -> str:
        return self.name


class Const(Term):
    """An integer constant."""

    __slots__ = ("value",)
    _fields = ("value",)
    value: int

    def __new__(cls, value: int) -> Const:
        return _new(cls, value=_check_int(value, "Const value"))

    def evaluate(self, assignment: Mapping[str, int]) -> int:
        return self.value

    def _py(self, rename: Mapping[str, str] | None) -> str:
        return str(self.value)

    def _atomic_py(self) -> bool:
        return self.value >= 0

    def __str__(self) -> str:
        return str(self.value)


_ARITH: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
}
_ARITH_PREC = {"+": _PREC_ADD, "-": _PREC_ADD, "*": _PREC_MUL, "//": _PREC_MUL, "%": _PREC_MUL}
_ARITH_STR = {"+": " + ", "-": " - ", "*": "*", "//": "/", "%": "%"}


class _Binary(Node):
    """``left op right`` over two terms: the fields of :class:`BinOp` and of
    :class:`~constraints.expr_preds.Cmp`; each checks ``op`` against its own table."""

    __slots__ = ("op", "left", "right")
    _fields = ("op", "left", "right")
    op: str
    left: Term
    right: Term

    @staticmethod
    def _operands(op: str, ops: Mapping[str, Callable], what: str, left: Operand,
                  right: Operand) -> tuple[Term, Term]:
        """``left`` and ``right`` as terms, once ``op`` is known to be one of ``ops``."""
        if op not in ops:
            raise ValueError(f"unknown {what} {op!r}")
        return as_term(left), as_term(right)

    def _compute_params(self) -> frozenset[str]:
        return self.left.params() | self.right.params()


class BinOp(_Binary, Term):
    """``left op right`` with op one of ``+ - * // %`` (floor division and modulo)."""

    __slots__ = ()

    # a simplifying constructor: constant operands fold to a Const (mypy wants __new__ to
    # return the class itself)
    def __new__(cls, op: str, left: Operand, right: Operand) -> Term:  # type: ignore[misc]
        left, right = cls._operands(op, _ARITH, "arithmetic operator", left, right)
        if op in ("//", "%") and isinstance(right, Const) and right.value == 0:
            raise ZeroDivisionError(f"{op} by the constant 0 in {left} {op} 0")
        if isinstance(left, Const) and isinstance(right, Const):
            return Const(_ARITH[op](left.value, right.value))
        return _new(cls, op=op, left=left, right=right)

    def _prec(self) -> int:
        return _ARITH_PREC[self.op]

    def evaluate(self, assignment: Mapping[str, int]) -> int:
        return _ARITH[self.op](self.left.evaluate(assignment), self.right.evaluate(assignment))

    def _py(self, rename: Mapping[str, str] | None) -> str:
        return f"{_wrap_py(self.left, rename)} {self.op} {_wrap_py(self.right, rename)}"

    def __str__(self) -> str:
        p = self._prec()
        left = _term_str(self.left)
        right = _term_str(self.right)
        if self.left._prec() < p:
            left = f"({left})"
        if self.right._prec() <= p:
            right = f"({right})"
        return f"{left}{_ARITH_STR[self.op]}{right}"


def _term_str(t: Term) -> str:
    s = str(t)
    if isinstance(t, Const) and t.value < 0:
        return f"({s})"
    return s


def _binop(op: str, left: Any, right: Any) -> Term:
    if isinstance(left, preds.Pred) or isinstance(right, preds.Pred):
        raise TypeError(f"arithmetic {op!r} on a predicate")
    if not isinstance(left, (Term, numbers.Integral)) or not isinstance(
        right, (Term, numbers.Integral)
    ):
        return NotImplemented
    return BinOp(op, left, right)


def _cmp_or_notimpl(op: str, left: Any, right: Any) -> preds.Pred:
    if isinstance(right, preds.Pred):
        raise TypeError(f"cannot compare the term {left} with the predicate {right}")
    if not isinstance(right, (Term, numbers.Integral)) or isinstance(right, bool):
        return NotImplemented
    return preds.Cmp(op, left, right)


# Comparisons of terms are predicates, and predicates are built from terms: imported last, so
# that either module can be imported first.
from constraints import expr_preds as preds  # noqa: E402
