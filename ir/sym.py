"""Symbolic integer expressions: array sizes, tuning parameters, index expressions.

An :class:`Expr` is always kept in a canonical form, so ``==`` is structural equality:

* a *polynomial*: a sum of monomials with rational coefficients (``int`` when integral);
* a *monomial* is a product of *atoms* with non-zero integer exponents; a negative
  exponent comes from exact division (``N/s`` is ``N*s^-1``, so ``(N/s)*s`` is ``N``);
* an *atom* is a variable or one of the opaque nodes ``FloorDiv(p, q)``, ``Mod(p, q)``,
  ``Min(p, q)``, ``Max(p, q)`` and ``ExactDiv(p, q)`` (exact division by a polynomial that
  is not a monomial and does not divide the numerator).

``/`` is *exact* division (the quotient is known to be an integer, like LIFT's type-level
``n/m`` after ``split(m)``); ``//`` and ``%`` are Python's floor division and modulo.
Simplification happens on construction and uses the variables' ranges (``Var('j', 0, 3)``).

Variable ranges are metadata: two ``Var`` with the same name are the same variable and compare
equal whatever their ranges.  Each ``Var`` object keeps the range it was given; if one
expression mixes the same name with different ranges, the range of the left-most operand
is the one kept.  To re-range, substitute: ``e.subs({'i': Var('i', 0, 7)})``.

Floor division splits ``p = q*A + r`` only into genuine integer polynomials ``A`` (integer
coefficients, no negative exponents): ``(4*N + j)//4`` is ``N + j//4`` but ``(4*(N/s))//4``
stays opaque, since ``4*(N/s)`` integral does not make ``N/s`` integral after substitution.

The implementation is layered (each module imports only those before it):
``sym_poly`` (errors, atoms, term dictionaries, interval bounds), ``sym_print`` (printing),
``sym_expr`` (the ``Expr`` class, ``Cst``, ``Var``, evaluation), ``sym_div`` (exact
division), ``sym_ops`` (the simplifying arithmetic, coercion, ``parse_expr`` over the
grammar of ``ir.size_grammar``) and ``sym_rel`` (``Rel``, ``assume_divisible``). The methods
of ``Expr`` that build expressions are installed by ``sym_ops`` and ``sym_rel``; import this
module, which imports them all.
"""

from __future__ import annotations

from ir.sym_expr import Cst, Expr, Var, _mk
from ir.sym_ops import parse_expr, smax, smin, sym
from ir.sym_poly import (
    NonIntegralError,
    SymbolicError,
    SymbolicZeroDivisionError,
    UnboundSizeError,
    _Atom,
)
from ir.sym_rel import Rel, assume_divisible

__all__ = [
    "SymbolicError",
    "UnboundSizeError",
    "NonIntegralError",
    "SymbolicZeroDivisionError",
    "Expr",
    "Rel",
    "Cst",
    "Var",
    "sym",
    "smin",
    "smax",
    "parse_expr",
    "assume_divisible",
]

# Pickles and reprs name these as before the split (stored pickles refer to ir.sym._mk,
# ir.sym._Atom and ir.sym.Rel).
for _obj in (SymbolicError, UnboundSizeError, NonIntegralError, SymbolicZeroDivisionError,
             Expr, Rel, _Atom, _mk, Cst, Var, sym, smin, smax, parse_expr, assume_divisible):
    _obj.__module__ = __name__
del _obj
