"""The constraint language: terms and predicates over named parameters, with Python's meaning.

One language serves both jobs of the package: the *mapping* rules (integer terms over the
maps' codes, solved by Z3 and python-constraint) and the *tuning space* restrictions (Kernel
Tuner's string language: floats, strings, ``**``, ``min``/``max``/``abs``, parsed by
:func:`constraints.predicates.parse_predicate` into these same nodes, counted and
enumerated over numpy columns). Its compilers: :func:`constraints.scalar.compile_predicate`
(a Python function), :func:`constraints.vectorise.compile_vector` (numpy columns) and
:func:`constraints.z3_backend.to_z3` (Z3, integer terms only).

A constraint is plain data. Every node is immutable, hashable and compared structurally
(``==`` on nodes is structural equality, never a constraint; use :func:`eq` / :func:`ne`).
Each node can be printed (``str``, close to the CC'22 paper: ``A/10 < 1 or A != B``; and
:meth:`Node.to_python`, Python source with the fewest parentheses) and evaluated on an
assignment (:meth:`Node.evaluate`).

Terms: :class:`Param`, :class:`Const` (an int or a float), :class:`Str` (a string, only
compared), :class:`BinOp` (``+ - * // % / **``), :class:`Neg` and :class:`Call` (``min``,
``max``, ``abs``); ``+ - * // % / **`` and unary ``-`` on terms and numbers build them.
Predicates: comparisons (:func:`eq`, :func:`ne`, and ``< <= > >=`` on terms), :class:`And`,
:class:`Or`, :class:`Not`, :class:`Implies`, :class:`In`, :data:`TRUE`, :data:`FALSE`;
``&``, ``|`` and ``~`` on predicates.

The meaning is Python's: ``a // b`` rounds towards negative infinity, ``a % b`` has the sign
of ``b``, ``/`` is true division, ``**`` of ints is exact (a negative base to a fractional
power raises ``ValueError`` instead of giving a complex number). Evaluation raises where
Python raises (division by zero, ``0 ** -1``, an ordering of a string and a number); the
restriction compilers make such a configuration *false* (:data:`SCALAR_ERRORS`). The
simplifying constructors keep that meaning: a constant that decides an ``and``/``or`` is
folded in only when no part before it can raise (:meth:`Node.can_raise`), and a constant
operation that raises is kept unfolded.

Printing uses ``/`` for integer division (as the paper does) and ``÷`` for true division,
``==`` for equality, ``and``, ``or``, ``not (...)``, ``=>`` for implication, ``A in {1,
2}`` for membership, ``true`` and ``false`` for the constants.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from constraints.errors import (
    ConstraintTypeError,
    InvalidAssignmentError,
    MalformedExpressionError,
    PredicateTruthError,
)

__all__ = [
    "NUMBER",
    "TRUTH",
    "TEXT",
    "SCALAR_ERRORS",
    "Node",
    "Term",
    "Param",
    "Const",
    "Str",
    "BinOp",
    "Neg",
    "Call",
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
    "python_pow",
]

NUMBER, TRUTH, TEXT = "number", "truth value", "string"
"""The kinds of nodes (:attr:`Node.kind`): a number (terms), a truth value (predicates), a
string (:class:`Str`)."""

SCALAR_ERRORS = (ArithmeticError, ValueError, TypeError)
"""What evaluating a node may raise on some assignment (division by zero, ``0 ** -1``, a
string ordered against a number); the restriction compilers make those rows false."""

FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}


def _check_number(value: Any, what: str) -> int | float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConstraintTypeError(
            f"{what} must be an int or a float, got {value!r} ({type(value).__name__})")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def python_pow(a: Any, b: Any) -> Any:
    """``a ** b`` as the language means it: Python's, except that a negative base to a
    fractional power raises ``ValueError`` (Python gives a complex number)."""
    if a < 0 and b != math.floor(b):
        raise ValueError(  # builtin: Python's math domain error, what restrictions catch
            "a negative number to a fractional power")
    return a**b


# ---------------------------------------------------------------------------------------------
# Base node


class Node:
    """Immutable, hashable node compared structurally (type and fields)."""

    __slots__ = ("_hash", "_params")
    _fields: tuple[str, ...] = ()
    kind: str = NUMBER
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

    def children(self) -> tuple[Node, ...]:
        """The nodes this one is built from, in textual order."""
        return ()

    def walk(self) -> Iterator[Node]:
        """This node and its descendants, in textual (pre-)order."""
        yield self
        for c in self.children():
            yield from c.walk()

    def params(self) -> frozenset[str]:
        """Names of the parameters this node mentions."""
        try:
            return self._params
        except AttributeError:
            ps = frozenset().union(*(c.params() for c in self.children()))
            object.__setattr__(self, "_params", ps)
            return ps

    def names(self) -> tuple[str, ...]:
        """The parameters read, in order of first appearance in the printed text."""
        return tuple(dict.fromkeys(n.name for n in self.walk() if isinstance(n, Param)))

    def can_raise(self) -> bool:
        """Whether evaluating this node may raise on some assignment: a division or modulo
        whose divisor is not a non-zero constant, ``**``, an ordering involving a string."""
        return any(c.can_raise() for c in self.children())

    def evaluate(self, assignment: Mapping[str, Any]) -> Any:
        """Value of this node when each parameter takes its value in `assignment` (raises
        what Python raises: see :data:`SCALAR_ERRORS`)."""
        raise NotImplementedError

    def to_python(self) -> str:
        """Python source of this node over the parameter names, with the fewest parentheses
        (a negative operand of arithmetic keeps its own), e.g. ``A // 10 < 1 or A != B``."""
        return self._py()

    def _py(self) -> str:
        raise NotImplementedError

    def _py_prec(self) -> int:
        """Python's binding strength of this node's printed form (higher binds tighter)."""
        return _PY_ATOM


def _new(cls, **fields):
    obj = object.__new__(cls)
    for k, v in fields.items():
        object.__setattr__(obj, k, v)
    return obj


# Python's precedences (to_python), loosest first
_PY_OR, _PY_AND, _PY_NOT, _PY_CMP, _PY_ADD, _PY_MUL, _PY_NEG, _PY_POW, _PY_ATOM = range(1, 10)


def _py_operand(node: Node, least: int) -> str:
    """``node``'s Python source as an operand that must bind at least as tight as ``least``."""
    s = node._py()
    return s if node._py_prec() >= least else f"({s})"


# ---------------------------------------------------------------------------------------------
# Terms

# precedences of terms in the paper's printing, loosest first
_PREC_ADD, _PREC_MUL, _PREC_NEG, _PREC_POW, _PREC_ATOM = range(1, 6)


class Term(Node):
    """A number-valued expression (or a string: :class:`Str`)."""

    __slots__ = ()

    def _prec(self) -> int:
        return _PREC_ATOM

    # arithmetic
    def __add__(self, other: Operand) -> Term:
        return _binop("+", self, other)

    def __radd__(self, other: Operand) -> Term:
        return _binop("+", other, self)

    def __sub__(self, other: Operand) -> Term:
        return _binop("-", self, other)

    def __rsub__(self, other: Operand) -> Term:
        return _binop("-", other, self)

    def __mul__(self, other: Operand) -> Term:
        return _binop("*", self, other)

    def __rmul__(self, other: Operand) -> Term:
        return _binop("*", other, self)

    def __floordiv__(self, other: Operand) -> Term:
        return _binop("//", self, other)

    def __rfloordiv__(self, other: Operand) -> Term:
        return _binop("//", other, self)

    def __mod__(self, other: Operand) -> Term:
        return _binop("%", self, other)

    def __rmod__(self, other: Operand) -> Term:
        return _binop("%", other, self)

    def __truediv__(self, other: Operand) -> Term:
        return _binop("/", self, other)

    def __rtruediv__(self, other: Operand) -> Term:
        return _binop("/", other, self)

    def __pow__(self, other: Operand) -> Term:
        return _binop("**", self, other)

    def __rpow__(self, other: Operand) -> Term:
        return _binop("**", other, self)

    def __neg__(self) -> Term:
        return Neg(self)

    # comparisons (== and != stay structural)
    def __lt__(self, other: Operand) -> Pred:
        return _cmp_or_notimpl("<", self, other)

    def __le__(self, other: Operand) -> Pred:
        return _cmp_or_notimpl("<=", self, other)

    def __gt__(self, other: Operand) -> Pred:
        return _cmp_or_notimpl(">", self, other)

    def __ge__(self, other: Operand) -> Pred:
        return _cmp_or_notimpl(">=", self, other)


Operand = Term | int | float
"""What a term is built from: a term, or a number (coerced to :class:`Const`)."""


def as_term(value: object) -> Term:
    """`value` itself if it is a term, else a number coerced to :class:`Const`."""
    if isinstance(value, Term):
        return value
    if isinstance(value, Node):
        raise ConstraintTypeError(f"expected a term, got the predicate {value}")
    return Const(_check_number(value, "a constant"))


class Param(Term):
    """A named parameter."""

    __slots__ = ("name",)
    _fields = ("name",)
    name: str

    def __new__(cls, name: str) -> Param:
        if not isinstance(name, str) or not name:
            raise ConstraintTypeError(f"a parameter name must be a non-empty str, got {name!r}")
        return _new(cls, name=name)

    def params(self) -> frozenset[str]:
        return frozenset((self.name,))

    def evaluate(self, assignment: Mapping[str, Any]) -> Any:
        try:
            return assignment[self.name]
        except KeyError:
            raise InvalidAssignmentError(f"no value for parameter {self.name!r}") from None

    def _py(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name


class Const(Term):
    """A number: an int or a float."""

    __slots__ = ("value",)
    _fields = ("value",)
    value: int | float

    def __new__(cls, value: int | float) -> Const:
        return _new(cls, value=_check_number(value, "Const value"))

    def evaluate(self, assignment: Mapping[str, Any]) -> int | float:
        return self.value

    def _prec(self) -> int:
        return _PREC_ATOM if self.value >= 0 else _PREC_NEG

    def _py(self) -> str:
        return repr(self.value)

    def _py_prec(self) -> int:
        return _PY_ATOM if self.value >= 0 else _PY_NEG

    def __str__(self) -> str:
        return repr(self.value)


class Str(Term):
    """A string, compared with string-valued parameters (no arithmetic)."""

    __slots__ = ("value",)
    _fields = ("value",)
    kind = TEXT
    value: str

    def __new__(cls, value: str) -> Str:
        if not isinstance(value, str):
            raise ConstraintTypeError(f"Str takes a string, got {value!r}")
        return _new(cls, value=value)

    def evaluate(self, assignment: Mapping[str, Any]) -> str:
        return self.value

    def _py(self) -> str:
        return repr(self.value)

    def __str__(self) -> str:
        return repr(self.value)


_ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
    "/": operator.truediv,
    "**": python_pow,
}
_ARITH_PREC = {"+": _PREC_ADD, "-": _PREC_ADD, "*": _PREC_MUL, "//": _PREC_MUL, "%": _PREC_MUL,
               "/": _PREC_MUL, "**": _PREC_POW}
_ARITH_PY_PREC = {"+": _PY_ADD, "-": _PY_ADD, "*": _PY_MUL, "//": _PY_MUL, "%": _PY_MUL,
                  "/": _PY_MUL, "**": _PY_POW}
_ARITH_STR = {"+": " + ", "-": " - ", "*": "*", "//": "/", "%": "%", "/": "÷", "**": "**"}
_DIVIDES = frozenset({"//", "%", "/"})


def _number_operand(value: Operand, where: str) -> Term:
    t = as_term(value)
    if isinstance(t, Str):
        raise ConstraintTypeError(f"{where}: {t} is a string; strings are only compared")
    return t


def _fold(fn: Callable[..., Any], *values: Any) -> Any:
    """``fn(*values)``, or None where Python raises (the node then stays unfolded, and
    raises, as Python would, when evaluated)."""
    try:
        v = fn(*values)
    except SCALAR_ERRORS:
        return None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


class _Binary(Node):
    """``left op right`` over two terms: the fields of :class:`BinOp` and of :class:`Cmp`."""

    __slots__ = ("op", "left", "right")
    _fields = ("op", "left", "right")
    op: str
    left: Term
    right: Term

    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)


class BinOp(_Binary, Term):
    """``left op right`` with op one of ``+ - * // % / **`` (Python's meaning)."""

    __slots__ = ()

    # a simplifying constructor: constant operands fold to a Const (mypy wants __new__ to
    # return the class itself)
    def __new__(cls, op: str, left: Operand, right: Operand) -> Term:  # type: ignore[misc]
        if op not in _ARITH:
            raise MalformedExpressionError(f"unknown arithmetic operator {op!r}")
        left = _number_operand(left, f"operand of {op!r}")
        right = _number_operand(right, f"operand of {op!r}")
        if isinstance(left, Const) and isinstance(right, Const):
            folded = _fold(_ARITH[op], left.value, right.value)
            if folded is not None:
                return Const(folded)
        return _new(cls, op=op, left=left, right=right)

    def can_raise(self) -> bool:
        if self.op == "**":
            return True
        if self.op in _DIVIDES and not (isinstance(self.right, Const) and self.right.value):
            return True
        return super().can_raise()

    def _prec(self) -> int:
        return _ARITH_PREC[self.op]

    def evaluate(self, assignment: Mapping[str, Any]) -> Any:
        return _ARITH[self.op](self.left.evaluate(assignment), self.right.evaluate(assignment))

    def _py_prec(self) -> int:
        return _ARITH_PY_PREC[self.op]

    def _py(self) -> str:
        p = self._py_prec()
        right_assoc = self.op == "**"
        left = _py_arith_operand(self.left, p + 1 if right_assoc else p)
        right = _py_arith_operand(self.right, p if right_assoc else p + 1)
        return f"{left} {self.op} {right}"

    def __str__(self) -> str:
        p = self._prec()
        left = str(self.left)
        right = str(self.right)
        right_assoc = self.op == "**"
        if self.left._prec() < p or (right_assoc and self.left._prec() == p) or (
                self.left._prec() == _PREC_NEG):
            left = f"({left})"
        if self.right._prec() < p or (not right_assoc and self.right._prec() == p) or (
                self.right._prec() == _PREC_NEG):
            right = f"({right})"
        return f"{left}{_ARITH_STR[self.op]}{right}"


def _py_arith_operand(node: Node, least: int) -> str:
    """An operand of arithmetic: a negative one in parentheses (``A - (-3)``), for readers."""
    if node._py_prec() == _PY_NEG:
        return f"({node._py()})"
    return _py_operand(node, least)


class Neg(Term):
    """``-operand``."""

    __slots__ = ("operand",)
    _fields = ("operand",)
    operand: Term

    def __new__(cls, operand: Operand) -> Term:  # type: ignore[misc]
        t = _number_operand(operand, "operand of a sign")
        if isinstance(t, Const):
            return Const(-t.value)
        if isinstance(t, Neg):
            return t.operand
        return _new(cls, operand=t)

    def children(self) -> tuple[Node, ...]:
        return (self.operand,)

    def _prec(self) -> int:
        return _PREC_NEG

    def evaluate(self, assignment: Mapping[str, Any]) -> Any:
        return -self.operand.evaluate(assignment)

    def _py_prec(self) -> int:
        return _PY_NEG

    def _py(self) -> str:
        return f"-{_py_operand(self.operand, _PY_NEG)}"

    def __str__(self) -> str:
        inner = str(self.operand)
        return f"-{inner}" if self.operand._prec() >= _PREC_POW else f"-({inner})"


class Call(Term):
    """``min(...)``, ``max(...)`` or ``abs(x)``."""

    __slots__ = ("fn", "args")
    _fields = ("fn", "args")
    fn: str
    args: tuple[Term, ...]

    def __new__(cls, fn: str, args: Iterable[Operand]) -> Term:  # type: ignore[misc]
        if fn not in FUNCTIONS:
            raise MalformedExpressionError(
                f"unknown function {fn!r} (allowed: {', '.join(FUNCTIONS)})")
        terms = tuple(_number_operand(a, f"argument of {fn}()") for a in args)
        if not terms or (fn == "abs" and len(terms) != 1):
            raise MalformedExpressionError(f"{fn}() given {len(terms)} arguments")
        if all(isinstance(t, Const) for t in terms):
            folded = _fold(FUNCTIONS[fn], *(t.value for t in terms))  # type: ignore[attr-defined]
            if folded is not None:
                return Const(folded)
        return _new(cls, fn=fn, args=terms)

    def _args(self) -> tuple:
        return (self.fn, self.args)

    def children(self) -> tuple[Node, ...]:
        return self.args

    def evaluate(self, assignment: Mapping[str, Any]) -> Any:
        return FUNCTIONS[self.fn](*(a.evaluate(assignment) for a in self.args))

    def _py(self) -> str:
        return f"{self.fn}({', '.join(a._py() for a in self.args)})"

    def __str__(self) -> str:
        return f"{self.fn}({', '.join(str(a) for a in self.args)})"


def _binop(op: str, left: Any, right: Any) -> Term:
    """The operators' way to a :class:`BinOp`: a constant zero divisor of ``//`` or ``%``
    is refused here (a rule built by hand that divides by 0 is a mistake)."""
    if isinstance(left, Pred) or isinstance(right, Pred):
        raise ConstraintTypeError(f"arithmetic {op!r} on a predicate")
    ok = (Term, numbers.Real)
    if not isinstance(left, ok) or not isinstance(right, ok) or isinstance(
            left, bool) or isinstance(right, bool):
        return NotImplemented
    zero = right.value == 0 if isinstance(right, Const) else (
        not isinstance(right, Node) and right == 0)
    if op in ("//", "%") and zero:
        raise ZeroDivisionError(f"{op} by the constant 0 in {left} {op} 0")
    return BinOp(op, as_term(left), as_term(right))


def _cmp_or_notimpl(op: str, left: Any, right: Any) -> Pred:
    if isinstance(right, Pred):
        raise ConstraintTypeError(f"cannot compare the term {left} with the predicate {right}")
    if not isinstance(right, (Term, numbers.Real)) or isinstance(right, bool):
        return NotImplemented
    return Cmp(op, as_term(left), as_term(right))


# ---------------------------------------------------------------------------------------------
# Predicates

# precedences of predicates in the paper's printing, loosest first
_P_IMPLIES, _P_OR, _P_AND, _P_NOT, _P_ATOM = range(5)


class Pred(Node):
    """A boolean-valued constraint over parameters."""

    __slots__ = ()
    kind = TRUTH

    def _prec(self) -> int:
        return _P_ATOM

    def _py_prec(self) -> int:
        return _PY_CMP

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

    def evaluate(self, assignment: Mapping[str, Any]) -> bool:
        raise NotImplementedError


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

    def evaluate(self, assignment: Mapping[str, Any]) -> bool:
        return self.value

    def _py(self) -> str:
        return "True" if self.value else "False"

    def _py_prec(self) -> int:
        return _PY_ATOM

    def __str__(self) -> str:
        return "true" if self.value else "false"


TRUE: BoolConst = BoolConst(True)
FALSE: BoolConst = BoolConst(False)


COMPARISONS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
_ORDERINGS = frozenset({"<", "<=", ">", ">="})


class Cmp(_Binary, Pred):
    """``left op right`` with op one of ``== != < <= > >=``."""

    __slots__ = ()

    # a simplifying constructor: constant operands fold to TRUE/FALSE (mypy wants __new__ to
    # return the class itself)
    def __new__(cls, op: str, left: Operand, right: Operand) -> Pred:  # type: ignore[misc]
        if op not in COMPARISONS:
            raise MalformedExpressionError(f"unknown comparison {op!r}")
        left, right = as_term(left), as_term(right)
        if isinstance(left, (Const, Str)) and isinstance(right, (Const, Str)):
            try:
                return TRUE if COMPARISONS[op](left.value, right.value) else FALSE
            except TypeError:  # '<' between a string and a number: stays, raises when run
                pass
        return _new(cls, op=op, left=left, right=right)

    def can_raise(self) -> bool:
        if self.op in _ORDERINGS and (isinstance(self.left, Str) or isinstance(self.right, Str)):
            return True
        return super().can_raise()

    def evaluate(self, assignment: Mapping[str, Any]) -> bool:
        compare = COMPARISONS[self.op]
        return compare(self.left.evaluate(assignment), self.right.evaluate(assignment))

    def _py(self) -> str:
        return f"{_py_operand(self.left, _PY_ADD)} {self.op} {_py_operand(self.right, _PY_ADD)}"

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


def eq(a: Operand, b: Operand) -> Pred:
    """The predicate ``a == b``."""
    return Cmp("==", a, b)


def ne(a: Operand, b: Operand) -> Pred:
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
    """``p1 word p2 word ...``: a subclass names its word, precedences, how the parts' values
    combine, its unit (the value of no part) and its zero (a part that decides the value)."""

    __slots__ = ("parts",)
    _fields = ("parts",)
    parts: tuple[Pred, ...]
    _word: str
    _precedence: int
    _py_precedence: int
    _combine: Callable[[Iterable[bool]], bool]
    _unit: BoolConst
    _zero: BoolConst

    def __init_subclass__(cls, *, word: str, precedence: int, py_precedence: int,
                          combine: Callable[[Iterable[bool]], bool], unit: BoolConst,
                          zero: BoolConst) -> None:
        super().__init_subclass__()
        cls._word, cls._precedence, cls._combine = word, precedence, combine
        cls._py_precedence = py_precedence
        cls._unit, cls._zero = unit, zero

    # simplifying constructor: may return a part, TRUE or FALSE (mypy wants __new__ to
    # return the class itself). A zero part decides the value only if no part before it can
    # raise (Python would raise there: the restriction compilers' false); else it ends the
    # parts, as Python's short-circuit never evaluates those after it.
    def __new__(cls, *ps: Pred | Iterable[Pred]) -> Pred:  # type: ignore[misc]
        flat: list[Pred] = []
        seen: set[Pred] = set()
        for p in _pred_args(ps, cls.__name__):
            subparts = p.parts if type(p) is cls else (p,)
            for q in subparts:
                if q is cls._zero:
                    if not any(f.can_raise() for f in flat):
                        return cls._zero
                    flat.append(q)
                    return _new(cls, parts=tuple(flat))
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

    def _py_prec(self) -> int:
        return self._py_precedence

    def children(self) -> tuple[Node, ...]:
        return self.parts

    def evaluate(self, assignment: Mapping[str, Any]) -> bool:
        return self._combine(p.evaluate(assignment) for p in self.parts)

    def _py(self) -> str:
        # an `and` inside an `or` keeps its parentheses, for readers
        return f" {self._word} ".join(_py_operand(p, _PY_NOT) for p in self.parts)

    def __str__(self) -> str:
        p = self._prec()
        # parenthesise every compound operand except `not`, for readability
        return f" {self._word} ".join(
            f"({q})" if q._prec() <= p + 1 and q._prec() != _P_NOT else str(q) for q in self.parts
        )


class And(_NAry, word="and", precedence=_P_AND, py_precedence=_PY_AND, combine=all, unit=TRUE,
          zero=FALSE):
    """Conjunction; nested conjunctions are flattened, TRUE parts dropped, duplicates removed.
    ``And()`` is TRUE; a FALSE part makes it FALSE (after a part that can raise, it ends
    the parts instead); one part is returned as is."""

    __slots__ = ()


class Or(_NAry, word="or", precedence=_P_OR, py_precedence=_PY_OR, combine=any, unit=FALSE,
         zero=TRUE):
    """Disjunction; nested disjunctions are flattened, FALSE parts dropped, duplicates removed.
    ``Or()`` is FALSE; a TRUE part makes it TRUE (after a part that can raise, it ends the
    parts instead); one part is returned as is."""

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

    def children(self) -> tuple[Node, ...]:
        return (self.arg,)

    def evaluate(self, assignment: Mapping[str, Any]) -> bool:
        return not self.arg.evaluate(assignment)

    def _py_prec(self) -> int:
        return _PY_NOT

    def _py(self) -> str:
        if isinstance(self.arg, In):
            return self.arg._py_member("not in")
        return f"not {_py_operand(self.arg, _PY_NOT)}"

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
        if lhs is FALSE or (rhs is TRUE and not lhs.can_raise()):
            return TRUE
        if rhs is FALSE:
            return Not(lhs)
        return _new(cls, lhs=lhs, rhs=rhs)

    def _prec(self) -> int:
        return _P_IMPLIES

    def children(self) -> tuple[Node, ...]:
        return (self.lhs, self.rhs)

    def evaluate(self, assignment: Mapping[str, Any]) -> bool:
        return (not self.lhs.evaluate(assignment)) or self.rhs.evaluate(assignment)

    def _py_prec(self) -> int:
        return _PY_OR

    def _py(self) -> str:
        return f"not {_py_operand(self.lhs, _PY_NOT)} or {_py_operand(self.rhs, _PY_AND)}"

    def __str__(self) -> str:
        lhs, rhs = str(self.lhs), str(self.rhs)
        if isinstance(self.lhs, Implies):
            lhs = f"({lhs})"
        if isinstance(self.rhs, Implies):
            rhs = f"({rhs})"
        return f"{lhs} => {rhs}"


def _member_value(v: Any) -> int | float | str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return int(v)  # True == 1, as in Python's `in`
    return _check_number(v, "an In value")


class In(Pred):
    """``term in {v1, v2, ...}``: membership, by equality, in a finite set of numbers or
    strings (stored sorted: numbers first)."""

    __slots__ = ("term", "values")
    _fields = ("term", "values")
    term: Term
    values: tuple[int | float | str, ...]

    # simplifying constructor: may return a constant
    def __new__(cls, term: Operand, values: Iterable[Any]) -> Pred:  # type: ignore[misc]
        term = as_term(term)
        vals = tuple(sorted({_member_value(v) for v in values},
                            key=lambda v: (isinstance(v, str), v)))
        if not vals:
            return FALSE
        if isinstance(term, (Const, Str)):
            return TRUE if term.value in vals else FALSE
        return _new(cls, term=term, values=vals)

    def children(self) -> tuple[Node, ...]:
        return (self.term,)

    def evaluate(self, assignment: Mapping[str, Any]) -> bool:
        return self.term.evaluate(assignment) in self.values

    def _py(self) -> str:
        return self._py_member("in")

    def _py_member(self, word: str) -> str:
        listed = ", ".join(repr(v) for v in self.values)
        return f"{_py_operand(self.term, _PY_ADD)} {word} {{{listed}}}"

    def __str__(self) -> str:
        return f"{self.term} in {{{', '.join(repr(v) for v in self.values)}}}"


def conjuncts(pred: Pred) -> list[Pred]:
    """The parts of a top-level :class:`And` (``[]`` for TRUE, ``[pred]`` otherwise)."""
    if not isinstance(pred, Pred):
        raise ConstraintTypeError(f"conjuncts expects a predicate, got {pred!r}")
    if isinstance(pred, And):
        return list(pred.parts)
    if pred is TRUE:
        return []
    return [pred]


CLAUSES_MAX = 64  # clauses one predicate may be split into (a product of conjunctions grows)


def clauses(pred: Pred) -> list[Pred]:
    """``pred`` as a conjunction of narrower predicates, whose conjunction is equivalent:
    its :func:`conjuncts`, each implication or disjunction of a conjunction distributed
    over it (``a => (b and c)`` is ``(a => b) and (a => c)``; ``a or (b and c)`` is
    ``(a or b) and (a or c)``), recursively, where some part then mentions fewer
    parameters, while they number at most :data:`CLAUSES_MAX`. A solver checks a narrow
    part as soon as its own parameters are assigned: ``T == 2 => (G == 0 and ... and
    I2 == 0)`` over 11 maps is ten checks of two maps each, not one at the end of every
    full assignment. A part
    that can raise is not moved (Python's short-circuit decides whether it runs)."""
    out: list[Pred] = []
    for part in conjuncts(pred):
        split = _distributed(part)
        if split is None or len(out) + len(split) > CLAUSES_MAX:
            out.append(part)
        else:
            out.extend(q for s in split for q in clauses(s) if q is not TRUE)
    return out


def _distributed(pred: Pred) -> list[Pred] | None:
    """The clauses of ``pred`` distributed over its first conjunction (see
    :func:`clauses`), or None where nothing distributes or a part can raise."""
    if isinstance(pred, Implies):
        if pred.lhs.can_raise() or not isinstance(pred.rhs, And) or pred.rhs.can_raise():
            return None
        return [Implies(pred.lhs, r) for r in pred.rhs.parts]
    if isinstance(pred, Or) and not pred.can_raise():
        for i, p in enumerate(pred.parts):
            if isinstance(p, And):
                rest = pred.parts[:i] + pred.parts[i + 1:]
                split = [Or(*rest[:i], r, *rest[i:]) for r in p.parts]
                if any(len(s.params()) < len(pred.params()) for s in split):
                    return split
                return None
    return None
