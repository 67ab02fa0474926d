"""Relations between ``ir.sym`` expressions (``Rel``), and divisibility facts.

Importing this module installs ``Expr.eq``, ``ne``, ``lt``, ``le``, ``gt`` and ``ge``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping

from ir.sym_div import _exact_div, _int_quotient
from ir.sym_expr import _ZERO, Expr, _single_atom
from ir.sym_ops import _coerce_strict, _make_op, _map_atoms
from ir.sym_poly import _FDIV, _MOD, _VAR, SymbolicError, _Atom, _const_of, _neg_b, _set

# ---------------------------------------------------------------------------- relations
_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


class Rel:
    """An immutable relation ``lhs op rhs`` between expressions (a constraint)."""

    __slots__ = ("op", "lhs", "rhs", "_h", "_d")
    op: str
    lhs: Expr
    rhs: Expr
    _h: int
    _d: bool | None  # the cached result of _decide

    def __init__(self, op: str, lhs: int | str | Expr, rhs: int | str | Expr):
        if op not in _OPS:
            raise SymbolicError(f"unknown relation {op!r}")
        _set(self, "op", op)
        _set(self, "lhs", _coerce_strict(lhs))
        _set(self, "rhs", _coerce_strict(rhs))
        _set(self, "_h", hash((op, self.lhs, self.rhs)))

    def __setattr__(self, name, value):
        raise AttributeError("Rel is immutable")

    def __reduce__(self):
        return (Rel, (self.op, self.lhs, self.rhs))

    def __hash__(self) -> int:
        return self._h

    def __eq__(self, o) -> bool:
        if not isinstance(o, Rel):
            return NotImplemented
        return self.op == o.op and self.lhs == o.lhs and self.rhs == o.rhs

    def __bool__(self):
        raise TypeError("a Rel has no truth value; use evaluate() or is_trivially_true")

    def __str__(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"

    def __repr__(self) -> str:
        return f"Rel({str(self)!r})"

    def to_c(self) -> str:
        """OpenCL C text of the relation."""
        return f"{self.lhs.to_c()} {self.op} {self.rhs.to_c()}"

    def free_vars(self) -> frozenset[str]:
        """Names of the variables of both sides."""
        return self.lhs.free_vars() | self.rhs.free_vars()

    def subs(self, mapping: Mapping[str, int | str | Expr]) -> Rel:
        """Substitutes in both sides."""
        return Rel(self.op, self.lhs.subs(mapping), self.rhs.subs(mapping))

    def evaluate(self, env: Mapping[str, int]) -> bool:
        """Truth value for the given variable values (errors as ``Expr.evaluate``)."""
        return _OPS[self.op](self.lhs.evaluate(env), self.rhs.evaluate(env))

    def _decide(self):
        try:
            return self._d
        except AttributeError:
            pass
        r = self._decide_now()
        _set(self, "_d", r)
        return r

    def _decide_now(self):
        d = self.lhs - self.rhs
        c = _const_of(d._t)
        if c is not None:
            return _OPS[self.op](c, 0)
        lo, hi = d.bounds()
        op = self.op
        if op in ("==", "!="):
            if lo == 0 and hi == 0:
                r = True
            elif (lo is not None and lo > 0) or (hi is not None and hi < 0):
                r = False
            else:
                return None
            return r if op == "==" else not r
        if op in (">", ">="):
            lo, hi = _neg_b(hi), _neg_b(lo)  # a > b  <=>  -(a-b) < 0
            op = "<" if op == ">" else "<="
        if op == "<":
            if hi is not None and hi < 0:
                return True
            if lo is not None and lo >= 0:
                return False
        else:
            if hi is not None and hi <= 0:
                return True
            if lo is not None and lo > 0:
                return False
        return None

    @property
    def is_trivially_true(self) -> bool:
        """True when the relation holds for all values (constant, or by variable ranges)."""
        return self._decide() is True

    @property
    def is_trivially_false(self) -> bool:
        """True when the relation holds for no values (constant, or by variable ranges)."""
        return self._decide() is False


def _relation(name: str, op: str) -> Callable[[Expr, int | str | Expr], Rel]:
    """The method ``Expr.<name>``: ``e.<name>(o)`` is the relation ``e <op> o``."""

    def relation(self: Expr, o: int | str | Expr) -> Rel:
        return Rel(op, self, o)

    relation.__name__, relation.__qualname__ = name, f"Expr.{name}"
    relation.__doc__ = f"The relation ``self {op} o``."
    return relation


# the relation methods of ``Expr`` (declared in its class body, for the type checkers)
for _name, _op in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                   ("ge", ">=")):
    setattr(Expr, _name, _relation(_name, _op))
del _name, _op


# --------------------------------------------------------------------------- divisibility
def _fact_pair(f) -> tuple[Expr, Expr]:
    if isinstance(f, Rel):
        if f.op == "==":
            for a, z in ((f.lhs, f.rhs), (f.rhs, f.lhs)):
                at = _single_atom(a)
                if z == 0 and at is not None and at.kind == _MOD:
                    return at.p, at.q
        raise SymbolicError(f"not a divisibility fact (a % b == 0): {f}")
    a, b = f
    return _coerce_strict(a), _coerce_strict(b)


def assume_divisible(e: int | str | Expr, facts: Iterable) -> Expr:
    """Rewrites ``a // b`` to ``a / b`` and ``a % b`` to 0 when b divides a by the facts.

    ``facts`` holds pairs ``(a, b)`` meaning ``a % b == 0`` (or such ``Rel`` objects). A pair
    also covers ``k*a`` and divisors of ``b`` (``k`` an integer polynomial).
    """
    e = _coerce_strict(e)
    fl = [_fact_pair(f) for f in facts]
    if not fl:
        return e
    exact = set(fl)

    def divisible(p: Expr, q: Expr) -> bool:
        if (p, q) in exact:
            return True
        for fa, fb in fl:
            if _int_quotient(p, fa) is not None and _int_quotient(fb, q) is not None:
                return True
        return False

    def fatom(a: _Atom):
        if a.kind == _VAR:
            return None
        p = _map_atoms(a.p, fatom)
        q = _map_atoms(a.q, fatom)
        if a.kind in (_FDIV, _MOD) and divisible(p, q):
            return _ZERO if a.kind == _MOD else _exact_div(p, q)
        if p is a.p and q is a.q:
            return None
        return _make_op(a.kind, p, q)

    return _map_atoms(e, fatom)
