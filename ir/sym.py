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

This module is the public face of the implementation, whose modules each import only those
listed before them: ``sym_poly`` (atoms, term dictionaries, interval bounds), ``sym_div``
(polynomial division of terms), ``sym_print`` (printing), ``sym_parse`` (the tokens of size
text), ``sym_expr`` (the ``Expr`` class with its arithmetic, substitution and relation
methods, ``Cst``, ``Var``, coercion, ``parse_expr`` over the grammar of ``ir.size_grammar``,
``Rel``, evaluation) and ``sym_facts`` (``assume_divisible``).
"""

from __future__ import annotations

# the errors of symbolic expressions live in ir.errors (under the library's root LiftmapError)
from ir.errors import (
    NonIntegralError,  # an exact division that leaves a remainder
    RelationTruthError,  # a Rel used as a truth value
    SymbolicError,  # the root of the ones below
    SymbolicTypeError,  # a value that is no int, name or expression
    SymbolicZeroDivisionError,
    UnboundSizeError,  # evaluating with a size not given
)
from ir.sym_expr import Cst, Expr, Rel, Var, parse_expr, smax, smin, sym
from ir.sym_expr import _mk as _mk  # for pickles made before the split (see below)
from ir.sym_facts import assume_divisible
from ir.sym_poly import _Atom as _Atom  # for pickles made before the split (see below)

__all__ = [
    "SymbolicError",
    "UnboundSizeError",
    "NonIntegralError",
    "SymbolicZeroDivisionError",
    "SymbolicTypeError",
    "RelationTruthError",
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

# ir.sym._mk and ir.sym._Atom stay importable: pickles made before the split of this
# module name them (and ir.sym.Rel); pickles made now name the modules that define them.
