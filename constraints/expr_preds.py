"""Predicates of the constraint language (see :mod:`constraints.expr`): comparisons of terms
(:func:`eq`, :func:`ne`, and ``< <= > >=`` on terms), :class:`And`, :class:`Or`, :class:`Not`,
:class:`Implies`, :class:`In`, :data:`TRUE`, :data:`FALSE`, combined with ``& | ~`` too, and
compiled to positional-argument functions (:meth:`Pred.compile`).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Mapping

from constraints.errors import UnknownParameterError
from constraints.expr_node import Node, _check_int, _new, _wrap_py
from constraints.expr_terms import Const, Operand, Term, _Binary, as_term

# precedences, loosest first
_P_IMPLIES, _P_OR, _P_AND, _P_NOT, _P_ATOM = range(5)


class Pred(Node):
    """A boolean-valued constraint over parameters."""

    __slots__ = ()

    def _prec(self) -> int:
        return _P_ATOM

    def __bool__(self) -> bool:
        raise TypeError(
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
            raise ValueError(f"duplicate names in {names}")
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
            raise TypeError(f"BoolConst takes True or False, got {value!r}")
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
            raise TypeError(
                f"{what} got the bool {a!r}: `==`/`!=` on terms are structural, "
                "use eq()/ne() to build comparisons (or TRUE/FALSE)"
            )
        elif isinstance(a, Node):
            raise TypeError(f"{what} expects predicates, got the term {a}")
        elif isinstance(a, Iterable) and not isinstance(a, (str, bytes)):
            out.extend(_pred_args(tuple(a), what))
        else:
            raise TypeError(f"{what} expects predicates, got {a!r}")
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
            raise TypeError(f"Not expects one predicate, got {p!r}")
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
        raise TypeError(f"conjuncts expects a predicate, got {pred!r}")
    if isinstance(pred, And):
        return list(pred.parts)
    if pred is TRUE:
        return []
    return [pred]
