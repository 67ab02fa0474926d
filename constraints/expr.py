"""The constraint language: integer terms and predicates over named parameters.

A constraint is plain data. Every node is immutable, hashable and compared structurally
(``==`` on nodes is structural equality, never a constraint; use :func:`eq` / :func:`ne`).
Each node can be printed (``str``, close to the CC'22 paper: ``A/10 < 1 or A != B``),
evaluated on an assignment, rendered as a Python expression (:meth:`Node.to_python`) and
compiled to a positional-argument function (:meth:`Pred.compile`); the Z3 translation is
:func:`constraints.z3_backend.to_z3`.

Terms: :class:`Param`, :class:`Const` and :class:`BinOp`, built with ``+ - * // %`` on terms
and ints (ints are coerced to :class:`Const`). Predicates: comparisons (:func:`eq`, :func:`ne`,
and ``< <= > >=`` on terms), :class:`And`, :class:`Or`, :class:`Not`, :class:`Implies`,
:class:`In`, :data:`TRUE`, :data:`FALSE`. Predicates also support ``&``, ``|`` and ``~``.

Integer division and modulo follow Python (floor) semantics: ``a // b`` rounds towards
negative infinity and ``a % b`` has the sign of ``b``. Z3's integer ``/`` and ``%`` are
Euclidean; they coincide with Python's whenever the divisor is positive, whatever the sign of
the dividend, so a positive constant divisor (the common case: ``m/10``, ``m%10``) compiles
to plain Z3 ``/`` and ``%``. Any other divisor is rewritten in Z3 so that all non-zero divisors
agree with Python. Division by zero raises ``ZeroDivisionError`` in Python and is unspecified
in Z3: divisors must be non-zero on the parameters' domains.

Printing uses ``/`` for integer division (as the paper does), ``==`` for equality, ``and``,
``or``, ``not (...)``, ``=>`` for implication, ``A in {1, 2}`` for membership, ``true`` and
``false`` for the constants.

The language is split into :mod:`constraints.expr_node` (the base class :class:`Node`),
:mod:`constraints.expr_terms` (the terms) and :mod:`constraints.expr_preds` (the
predicates); this module re-exports their public names, and the classes and functions keep
``constraints.expr`` as their module (pickles and class reprs name it, as before the split).
"""

from __future__ import annotations

from constraints.expr_node import Node
from constraints.expr_preds import (
    FALSE,
    TRUE,
    And,
    BoolConst,
    Cmp,
    Implies,
    In,
    Not,
    Or,
    Pred,
    conjuncts,
    eq,
    ne,
)
from constraints.expr_terms import BinOp, Const, Param, Term, as_term

__all__ = [
    "Node",
    "Term",
    "Param",
    "Const",
    "BinOp",
    "Pred",
    "BoolConst",
    "TRUE",
    "FALSE",
    "Cmp",
    "eq",
    "ne",
    "And",
    "Or",
    "Not",
    "Implies",
    "In",
    "conjuncts",
    "as_term",
]

for _obj in (Node, Term, Param, Const, BinOp, Pred, BoolConst, Cmp, eq, ne, And, Or, Not,
             Implies, In, conjuncts, as_term):
    _obj.__module__ = __name__
del _obj
