"""Constraint language, models and three cross-checked solvers (cp, Z3, brute force).

Two expression languages live here, for two different jobs; their names do not clash:

* ``constraints.expr`` (exported below): the *mapping* constraints. Integer terms over
  the maps' codes, translated to Z3 (``z3_backend.to_z3``) and compiled for
  python-constraint; ``==`` on nodes is structural, ``eq``/``ne`` build predicates.
* ``constraints.predicates`` (with ``vectorise`` and ``restrictions``): the *tuning
  space* restrictions, Kernel Tuner's string language (``"block_size_x in [32, 64]"``,
  floats, strings, booleans as truth values), evaluated with Python's semantics (an
  evaluation that raises is false) and vectorised over numpy columns to count and
  enumerate spaces of millions of configurations. It has no Z3 translation: tuning spaces
  are enumerated, never solved.

The Z3 semantics (Euclidean division, no strings, no floats) and the restriction
semantics (Python's, errors as false, vectorised) differ, so one language for both would
give one of them the wrong meaning.
"""

from constraints.errors import (
    ConstraintError,
    ConstraintTypeError,
    DuplicateNameError,
    EmptyDomainError,
    InvalidAssignmentError,
    MalformedExpressionError,
    PredicateTruthError,
    UnknownParameterError,
    UnsatisfiableError,
)
from constraints.expr import (
    FALSE,
    TRUE,
    And,
    BinOp,
    BoolConst,
    Cmp,
    Const,
    Implies,
    In,
    Node,
    Not,
    Or,
    Param,
    Pred,
    Term,
    as_term,
    conjuncts,
    eq,
    ne,
)
from constraints.model import Constraint, Model, Parameter

__all__ = [
    "ConstraintError",
    "ConstraintTypeError",
    "DuplicateNameError",
    "EmptyDomainError",
    "InvalidAssignmentError",
    "MalformedExpressionError",
    "PredicateTruthError",
    "UnknownParameterError",
    "UnsatisfiableError",
    "FALSE",
    "TRUE",
    "And",
    "BinOp",
    "BoolConst",
    "Cmp",
    "Const",
    "Implies",
    "In",
    "Node",
    "Not",
    "Or",
    "Param",
    "Pred",
    "Term",
    "as_term",
    "conjuncts",
    "eq",
    "ne",
    "Constraint",
    "Model",
    "Parameter",
]
