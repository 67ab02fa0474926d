"""Divisibility facts in ``ir.sym``: :func:`assume_divisible` rewrites ``//`` and ``%`` that
known facts (``a % b == 0``) make exact.
"""

from __future__ import annotations

from collections.abc import Iterable

from ir.errors import SymbolicError
from ir.sym_expr import (
    _ZERO,
    Expr,
    Rel,
    _coerce_strict,
    _exact_div,
    _int_quotient,
    _make_op,
    _map_atoms,
    _single_atom,
)
from ir.sym_poly import _FDIV, _MOD, _VAR, _Atom


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
