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

The whole language is this one module (the base :class:`Node`, then the terms, then the
predicates): comparing terms builds predicates and predicates are built from terms.
"""

from __future__ import annotations

import functools
import numbers
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from constraints.errors import (
    ConstraintTypeError,
    DuplicateNameError,
    InvalidAssignmentError,
    MalformedExpressionError,
    PredicateTruthError,
    UnknownParameterError,
)

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


def _check_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConstraintTypeError(f"{what} must be an int, got {value!r} ({type(value).__name__})")
    return int(value)


# ---------------------------------------------------------------------------------------------
# Base node


class Node:
    """Immutable, hashable node compared structurally (type and fields)."""

    __slots__ = ("_hash", "_params")
    _fields: tuple[str, ...] = ()
    # the slots, set once (lazily) through object.__setattr__
    _hash: int
    _params: frozenset[str]

    def _key(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def _args(self) -> tuple:
        """Arguments that rebuild this node through its constructor (used for pickling)."""
        return self._key()

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(self) is not type(other):
            return NotImplemented if not isinstance(other, Node) else False
        return hash(self) == hash(other) and self._key() == other._key()

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            h = hash((type(self).__name__, self._key()))
            object.__setattr__(self, "_hash", h)
            return h

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self):
        return (type(self), self._args())

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(a) for a in self._args())})"

    def params(self) -> frozenset[str]:
        """Names of the parameters this node mentions."""
        try:
            return self._params
        except AttributeError:
            ps = self._compute_params()
            object.__setattr__(self, "_params", ps)
            return ps

    def _compute_params(self) -> frozenset[str]:
        return frozenset()

    # subclasses implement these
    def evaluate(self, assignment: Mapping[str, int]) -> int | bool:
        """Value of this node when each parameter takes its value in `assignment`."""
        raise NotImplementedError

    def to_python(self) -> str:
        """A Python expression over the parameter names, e.g. ``(A // 10 < 1) or (A != B)``."""
        return self._py(None)

    def _py(self, rename: Mapping[str, str] | None) -> str:
        raise NotImplementedError

    def _atomic_py(self) -> bool:
        """Whether `_py` output needs no parentheses when used as an operand."""
        return False


def _new(cls, **fields):
    obj = object.__new__(cls)
    for k, v in fields.items():
        object.__setattr__(obj, k, v)
    return obj


def _wrap_py(node: Node, rename: Mapping[str, str] | None) -> str:
    s = node._py(rename)
    return s if node._atomic_py() else f"({s})"


# ---------------------------------------------------------------------------------------------
# Terms

# precedences of terms, loosest first
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
    def __lt__(self, other: Term | int) -> Pred:
        return _cmp_or_notimpl("<", self, other)

    def __le__(self, other: Term | int) -> Pred:
        return _cmp_or_notimpl("<=", self, other)

    def __gt__(self, other: Term | int) -> Pred:
        return _cmp_or_notimpl(">", self, other)

    def __ge__(self, other: Term | int) -> Pred:
        return _cmp_or_notimpl(">=", self, other)


Operand = Term | int | numbers.Integral
"""What a term is built from: a term, or an int (coerced to :class:`Const`)."""


def as_term(value: Operand) -> Term:
    """`value` itself if it is a term, else an int coerced to :class:`Const`."""
    if isinstance(value, Term):
        return value
    if isinstance(value, Node):
        raise ConstraintTypeError(f"expected an integer term, got the predicate {value}")
    return Const(_check_int(value, "a constant"))


class Param(Term):
    """A named integer parameter."""

    __slots__ = ("name",)
    _fields = ("name",)
    name: str

    def __new__(cls, name: str) -> Param:
        if not isinstance(name, str) or not name:
            raise ConstraintTypeError(f"a parameter name must be a non-empty str, got {name!r}")
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
    :class:`~constraints.expr_Cmp`; each checks ``op`` against its own table."""

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
            raise MalformedExpressionError(f"unknown {what} {op!r}")
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
    if isinstance(left, Pred) or isinstance(right, Pred):
        raise ConstraintTypeError(f"arithmetic {op!r} on a predicate")
    if not isinstance(left, (Term, numbers.Integral)) or not isinstance(
        right, (Term, numbers.Integral)
    ):
        return NotImplemented
    return BinOp(op, left, right)


def _cmp_or_notimpl(op: str, left: Any, right: Any) -> Pred:
    if isinstance(right, Pred):
        raise ConstraintTypeError(f"cannot compare the term {left} with the predicate {right}")
    if not isinstance(right, (Term, numbers.Integral)) or isinstance(right, bool):
        return NotImplemented
    return Cmp(op, left, right)


# ---------------------------------------------------------------------------------------------
# Predicates

# precedences of predicates, loosest first
_P_IMPLIES, _P_OR, _P_AND, _P_NOT, _P_ATOM = range(5)


class Pred(Node):
    """A boolean-valued constraint over parameters."""

    __slots__ = ()

    def _prec(self) -> int:
        return _P_ATOM

    def __bool__(self) -> bool:
        raise PredicateTruthError(
            f"the truth value of the predicate `{self}` is not defined; "
            "combine predicates with And/Or/Not (or & | ~), compare terms with eq/ne"
        )

    def __and__(self, other: Pred) -> Pred:
        return And(self, other)

    def __or__(self, other: Pred) -> Pred:
        return Or(self, other)

    def __invert__(self) -> Pred:
        return Not(self)

    def evaluate(self, assignment: Mapping[str, int]) -> bool:
        raise NotImplementedError

    def compile(self, names: tuple[str, ...]) -> Callable[..., bool]:
        """A function of ``len(names)`` positional ints (in `names` order) returning this
        predicate's truth value. Built once with ``eval`` and cached per (predicate, names)."""
        names = tuple(names)
        missing = self.params() - set(names)
        if missing:
            raise UnknownParameterError(
                f"cannot compile `{self}`: parameter(s) {', '.join(sorted(missing))} "
                f"not among {names}"
            )
        if len(set(names)) != len(names):
            raise DuplicateNameError(f"duplicate names in {names}")
        return _compile(self, names)


@functools.lru_cache(maxsize=16384)
def _compile(pred: Pred, names: tuple[str, ...]) -> Callable[..., bool]:
    # Arguments are renamed _0, _1, ... so any parameter name works (even non-identifiers).
    rename = {n: f"_{i}" for i, n in enumerate(names)}
    args = ", ".join(rename[n] for n in names)
    source = f"lambda {args}: {pred._py(rename)}"
    return eval(source, {"__builtins__": {}})  # noqa: S307 - source is generated from the AST


_BOOLS: dict[bool, BoolConst] = {}


class BoolConst(Pred):
    """The constant predicates :data:`TRUE` and :data:`FALSE`."""

    __slots__ = ("value",)
    _fields = ("value",)
    value: bool

    def __new__(cls, value: bool) -> BoolConst:
        if value is not True and value is not False:
            raise ConstraintTypeError(f"BoolConst takes True or False, got {value!r}")
        if value not in _BOOLS:
            _BOOLS[value] = _new(cls, value=value)
        return _BOOLS[value]

    def evaluate(self, assignment: Mapping[str, int]) -> bool:
        return self.value

    def _py(self, rename: Mapping[str, str] | None) -> str:
        return "True" if self.value else "False"

    def _atomic_py(self) -> bool:
        return True

    def __str__(self) -> str:
        return "true" if self.value else "false"


TRUE: BoolConst = BoolConst(True)
FALSE: BoolConst = BoolConst(False)


COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class Cmp(_Binary, Pred):
    """``left op right`` with op one of ``== != < <= > >=``."""

    __slots__ = ()

    # a simplifying constructor: constant operands fold to TRUE/FALSE (mypy wants __new__ to
    # return the class itself)
    def __new__(cls, op: str, left: Operand, right: Operand) -> Pred:  # type: ignore[misc]
        left, right = cls._operands(op, COMPARISONS, "comparison", left, right)
        if isinstance(left, Const) and isinstance(right, Const):
            return TRUE if COMPARISONS[op](left.value, right.value) else FALSE
        return _new(cls, op=op, left=left, right=right)

    def evaluate(self, assignment: Mapping[str, int]) -> bool:
        compare = COMPARISONS[self.op]
        return compare(self.left.evaluate(assignment), self.right.evaluate(assignment))

    def _py(self, rename: Mapping[str, str] | None) -> str:
        # arithmetic binds tighter than comparison: no parentheses needed around the operands
        return f"{self.left._py(rename)} {self.op} {self.right._py(rename)}"

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


def eq(a: Term | int, b: Term | int) -> Pred:
    """The predicate ``a == b``."""
    return Cmp("==", a, b)


def ne(a: Term | int, b: Term | int) -> Pred:
    """The predicate ``a != b``."""
    return Cmp("!=", a, b)


def _pred_args(args: tuple, what: str) -> list[Pred]:
    out: list[Pred] = []
    for a in args:
        if isinstance(a, Pred):
            out.append(a)
        elif isinstance(a, bool):
            raise ConstraintTypeError(
                f"{what} got the bool {a!r}: `==`/`!=` on terms are structural, "
                "use eq()/ne() to build comparisons (or TRUE/FALSE)"
            )
        elif isinstance(a, Node):
            raise ConstraintTypeError(f"{what} expects predicates, got the term {a}")
        elif isinstance(a, Iterable) and not isinstance(a, (str, bytes)):
            out.extend(_pred_args(tuple(a), what))
        else:
            raise ConstraintTypeError(f"{what} expects predicates, got {a!r}")
    return out


class _NAry(Pred):
    """``p1 word p2 word ...``: a subclass names its word, precedence, how the parts' values
    combine, its unit (the value of no part) and its zero (a part that decides the value)."""

    __slots__ = ("parts",)
    _fields = ("parts",)
    parts: tuple[Pred, ...]
    _word: str
    _precedence: int
    _combine: Callable[[Iterable[bool]], bool]
    _unit: BoolConst
    _zero: BoolConst

    def __init_subclass__(cls, *, word: str, precedence: int,
                          combine: Callable[[Iterable[bool]], bool], unit: BoolConst,
                          zero: BoolConst) -> None:
        super().__init_subclass__()
        cls._word, cls._precedence, cls._combine = word, precedence, combine
        cls._unit, cls._zero = unit, zero

    # simplifying constructor: may return a part, TRUE or FALSE (mypy wants __new__ to
    # return the class itself)
    def __new__(cls, *ps: Pred | Iterable[Pred]) -> Pred:  # type: ignore[misc]
        flat: list[Pred] = []
        seen: set[Pred] = set()
        for p in _pred_args(ps, cls.__name__):
            subparts = p.parts if type(p) is cls else (p,)
            for q in subparts:
                if q is cls._zero:
                    return cls._zero
                if q is cls._unit or q in seen:
                    continue
                seen.add(q)
                flat.append(q)
        if not flat:
            return cls._unit
        if len(flat) == 1:
            return flat[0]
        return _new(cls, parts=tuple(flat))

    def _args(self) -> tuple:
        return self.parts

    def _prec(self) -> int:
        return self._precedence

    def _compute_params(self) -> frozenset[str]:
        return frozenset().union(*(p.params() for p in self.parts))

    def evaluate(self, assignment: Mapping[str, int]) -> bool:
        return self._combine(p.evaluate(assignment) for p in self.parts)

    def _py(self, rename: Mapping[str, str] | None) -> str:
        return f" {self._word} ".join(_wrap_py(p, rename) for p in self.parts)

    def __str__(self) -> str:
        p = self._prec()
        # parenthesise every compound operand except `not`, for readability
        return f" {self._word} ".join(
            f"({q})" if q._prec() <= p + 1 and q._prec() != _P_NOT else str(q) for q in self.parts
        )


class And(_NAry, word="and", precedence=_P_AND, combine=all, unit=TRUE, zero=FALSE):
    """Conjunction; nested conjunctions are flattened, TRUE parts dropped, duplicates removed.
    ``And()`` is TRUE; any FALSE part makes it FALSE; one part is returned as is."""

    __slots__ = ()


class Or(_NAry, word="or", precedence=_P_OR, combine=any, unit=FALSE, zero=TRUE):
    """Disjunction; nested disjunctions are flattened, FALSE parts dropped, duplicates removed.
    ``Or()`` is FALSE; any TRUE part makes it TRUE; one part is returned as is."""

    __slots__ = ()


class Not(Pred):
    """Negation; ``Not(Not(p))`` is ``p``, ``Not(TRUE)`` is FALSE and vice versa."""

    __slots__ = ("arg",)
    _fields = ("arg",)
    arg: Pred

    # simplifying constructor: may return the argument's negation directly
    def __new__(cls, p: Pred) -> Pred:  # type: ignore[misc]
        if not isinstance(p, Pred):
            _pred_args((p,), "Not")  # raises a helpful TypeError for bools and terms
            raise ConstraintTypeError(f"Not expects one predicate, got {p!r}")
        if isinstance(p, BoolConst):
            return FALSE if p.value else TRUE
        if isinstance(p, Not):
            return p.arg
        return _new(cls, arg=p)

    def _prec(self) -> int:
        return _P_NOT

    def _compute_params(self) -> frozenset[str]:
        return self.arg.params()

    def evaluate(self, assignment: Mapping[str, int]) -> bool:
        return not self.arg.evaluate(assignment)

    def _py(self, rename: Mapping[str, str] | None) -> str:
        return f"not ({self.arg._py(rename)})"

    def __str__(self) -> str:
        return f"not ({self.arg})"


class Implies(Pred):
    """``lhs => rhs``; simplified when either side is a constant."""

    __slots__ = ("lhs", "rhs")
    _fields = ("lhs", "rhs")
    lhs: Pred
    rhs: Pred

    # simplifying constructor: may return rhs, Not(lhs) or a constant
    def __new__(cls, lhs: Pred, rhs: Pred) -> Pred:  # type: ignore[misc]
        lhs, rhs = _pred_args((lhs, rhs), "Implies")
        if lhs is TRUE:
            return rhs
        if lhs is FALSE or rhs is TRUE:
            return TRUE
        if rhs is FALSE:
            return Not(lhs)
        return _new(cls, lhs=lhs, rhs=rhs)

    def _prec(self) -> int:
        return _P_IMPLIES

    def _compute_params(self) -> frozenset[str]:
        return self.lhs.params() | self.rhs.params()

    def evaluate(self, assignment: Mapping[str, int]) -> bool:
        return (not self.lhs.evaluate(assignment)) or self.rhs.evaluate(assignment)

    def _py(self, rename: Mapping[str, str] | None) -> str:
        return f"(not ({self.lhs._py(rename)})) or ({self.rhs._py(rename)})"

    def __str__(self) -> str:
        lhs, rhs = str(self.lhs), str(self.rhs)
        if isinstance(self.lhs, Implies):
            lhs = f"({lhs})"
        if isinstance(self.rhs, Implies):
            rhs = f"({rhs})"
        return f"{lhs} => {rhs}"


class In(Pred):
    """``term in {v1, v2, ...}``: membership in a finite set of ints (stored sorted)."""

    __slots__ = ("term", "values")
    _fields = ("term", "values")
    term: Term
    values: tuple[int, ...]

    # simplifying constructor: may return a constant
    def __new__(cls, term: Term | int, values: Iterable[int]) -> Pred:  # type: ignore[misc]
        term = as_term(term)
        vals = tuple(sorted({_check_int(v, "an In value") for v in values}))
        if not vals:
            return FALSE
        if isinstance(term, Const):
            return TRUE if term.value in vals else FALSE
        return _new(cls, term=term, values=vals)

    def _compute_params(self) -> frozenset[str]:
        return self.term.params()

    def evaluate(self, assignment: Mapping[str, int]) -> bool:
        return self.term.evaluate(assignment) in self.values

    def _py(self, rename: Mapping[str, str] | None) -> str:
        # a literal set of constants compiles to a frozenset constant
        return f"{self.term._py(rename)} in {{{', '.join(str(v) for v in self.values)}}}"

    def __str__(self) -> str:
        return f"{self.term} in {{{', '.join(str(v) for v in self.values)}}}"


def conjuncts(pred: Pred) -> list[Pred]:
    """The parts of a top-level :class:`And` (``[]`` for TRUE, ``[pred]`` otherwise)."""
    if not isinstance(pred, Pred):
        raise ConstraintTypeError(f"conjuncts expects a predicate, got {pred!r}")
    if isinstance(pred, And):
        return list(pred.parts)
    if pred is TRUE:
        return []
    return [pred]
