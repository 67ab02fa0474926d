"""Constraint language, models and three cross-checked solvers (cp, Z3, brute force).

One language (``constraints.expr``, exported below) serves both jobs, with Python's
meaning:

* the *mapping* constraints: integer terms over the maps' codes, translated to Z3
  (``z3_backend.to_z3``) and compiled for python-constraint (``scalar.compile_predicate``);
  ``==`` on nodes is structural, ``eq``/``ne`` build predicates;
* the *tuning space* restrictions: Kernel Tuner's string language (``"block_size_x in [32,
  64]"``, floats, strings, booleans as truth values) parsed into the same nodes
  (``predicates.parse_predicate``), where an evaluation that raises makes a configuration
  false, vectorised over numpy columns (``vectorise.compile_vector``) to count and
  enumerate spaces of millions of configurations.

Z3 takes the integer part of the language (no floats, strings, true division or ``**``);
its division agrees with Python's for every non-zero divisor.
"""

from constraints.errors import (
    ConstraintError,
    ConstraintTypeError,
    CountLimitError,
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
    Call,
    Cmp,
    Const,
    Implies,
    In,
    Neg,
    Node,
    Not,
    Or,
    Param,
    Pred,
    Str,
    Term,
    as_term,
    clauses,
    conjuncts,
    eq,
    ne,
)
from constraints.model import Constraint, Model, Parameter

__all__ = [
    "ConstraintError",
    "ConstraintTypeError",
    "CountLimitError",
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
    "Call",
    "Cmp",
    "Const",
    "Implies",
    "In",
    "Neg",
    "Node",
    "Not",
    "Or",
    "Param",
    "Pred",
    "Str",
    "Term",
    "as_term",
    "clauses",
    "conjuncts",
    "eq",
    "ne",
    "Constraint",
    "Model",
    "Parameter",
]
