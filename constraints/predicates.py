"""Restriction predicates: the typed form of a tuning search space's restrictions.

A restriction of :class:`constraints.space.SearchSpace` is a truth-valued
:class:`Expression` over parameter names. It comes either from the user's text
(``"32 <= block_size_x * block_size_y <= 1024"``, parsed by :func:`parse_predicate`) or is
built as data by the library (``mapper.tuning.to_predicate`` translates the size relations of
the IR): both end up as the same objects, compiled by ``constraints.vectorise`` and wrapped
in a ``constraints.restrictions.Restriction`` that keeps the text and the origin.

The language is the one of the restriction strings: int/float/string literals and
``True``/``False``, parameter names, ``+ - * / // % **``, unary ``- +``, comparisons (chained
too), ``in``/``not in`` a literal list, ``and``/``or``/``not`` and calls to ``min``, ``max``,
``abs``. Strings (literals and string-valued parameters) can only be compared. Given the
parameters' value kinds (:func:`value_kinds`), a parameter taking only ``True``/``False``
or ``0``/``1`` may stand as a truth value (``use_shmem or block_size_x >= 64``: it means
``use_shmem != 0``), as in Python. Nodes are frozen dataclasses
(compared and hashed structurally); each has a static :attr:`~Expression.kind` (a number or a
truth value) and prints (``str``) as Python source: compound arithmetic in parentheses
(``(N // s0)``, ``(-x)``), comparisons and conjunctions without, e.g.
``s0 != 0 and N % s0 == 0 and (N // s0) >= 2``.
"""

from __future__ import annotations

import ast
import difflib
import numbers
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from constraints.errors import (
    ConstraintTypeError,
    MalformedExpressionError,
    NotAPredicateError,
    RestrictionSyntaxError,
    UnknownNameError,
)

__all__ = [
    "NUMBER",
    "TRUTH",
    "TEXT",
    "FLAG",
    "STRING",
    "MIXED",
    "FUNCTIONS",
    "ARITH_OPS",
    "CMP_OPS",
    "Expression",
    "Num",
    "Truth",
    "Name",
    "Sign",
    "Arith",
    "Call",
    "Compare",
    "BoolOp",
    "Negation",
    "Str",
    "Member",
    "conjunction",
    "parse_predicate",
    "value_kind",
    "value_kinds",
]

NUMBER, TRUTH, TEXT = "number", "truth value", "string"
"""The static kinds of expressions: a number, a truth value, a string (literal)."""
FLAG, STRING, MIXED = "flag", "string", "mixed"
"""Value kinds of parameters besides ``NUMBER`` (:func:`value_kind`): numbers that are all
``True``/``False`` or ``0``/``1``, strings, anything else (mixed types)."""
VALUE_KINDS = (NUMBER, TEXT)
FUNCTIONS = ("min", "max", "abs")
ARITH_OPS = ("+", "-", "*", "/", "//", "%", "**")
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")


class Expression:
    """A node of a restriction predicate (immutable, compared structurally)."""

    __slots__ = ()
    kind: ClassVar[str] = NUMBER

    def children(self) -> tuple[Expression, ...]:
        return ()

    def _check_children(self, kind: str, where: str) -> None:
        """Each child must be an expression of ``kind`` (``where``: its place, for errors)."""
        for c in self.children():
            _check(c, kind, where)

    def names(self) -> tuple[str, ...]:
        """The parameter names read, in order of first appearance in the printed text."""
        return tuple(dict.fromkeys(n.id for n in self.walk() if isinstance(n, Name)))

    def walk(self) -> Iterator[Expression]:
        """This node and its descendants, in textual (pre-)order."""
        yield self
        for c in self.children():
            yield from c.walk()

    def __str__(self) -> str:  # printed once (the text keys caches of spaces)
        try:
            return self.__dict__["_text"]
        except KeyError:
            text = self._print()
            object.__setattr__(self, "_text", text)
            return text

    def _print(self) -> str:
        raise NotImplementedError

    def _operand(self) -> str:  # text as an operand of and/or/not
        return str(self)


def _check(e: object, kind: str, where: str) -> Expression:
    if not isinstance(e, Expression):
        raise ConstraintTypeError(f"{where}: expected an Expression, got {e!r}")
    if e.kind != kind:
        raise ConstraintTypeError(f"{where}: {e} is a {e.kind}, not a {kind}")
    return e


@dataclass(frozen=True)
class Num(Expression):
    """An int or float literal."""

    value: int | float

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise ConstraintTypeError(f"Num takes an int or a float, got {self.value!r}")

    def _print(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Str(Expression):
    """A string literal (compared with string-valued parameters)."""

    kind: ClassVar[str] = TEXT
    value: str

    def __post_init__(self) -> None:
        if not isinstance(self.value, str):
            raise ConstraintTypeError(f"Str takes a string, got {self.value!r}")

    def _print(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class Truth(Expression):
    """``True`` or ``False``."""

    kind: ClassVar[str] = TRUTH
    value: bool

    def _print(self) -> str:
        return repr(bool(self.value))


@dataclass(frozen=True)
class Name(Expression):
    """A parameter."""

    id: str

    def _print(self) -> str:
        return self.id


@dataclass(frozen=True)
class Sign(Expression):
    """Unary ``-`` or ``+``."""

    op: str
    operand: Expression

    def __post_init__(self) -> None:
        if self.op not in ("-", "+"):
            raise MalformedExpressionError(f"unknown sign {self.op!r}")
        _check(self.operand, NUMBER, "operand of a sign")

    def children(self) -> tuple[Expression, ...]:
        return (self.operand,)

    def _print(self) -> str:
        return f"({self.op}{self.operand})"


@dataclass(frozen=True)
class Arith(Expression):
    """``args[0] op args[1] op ...`` (left to right); more than two operands for ``+`` and
    ``*`` only. ``parens`` says whether it prints in parentheses (display only: not compared,
    the meaning is the same)."""

    op: str
    args: tuple[Expression, ...]
    parens: bool = field(default=True, compare=False)

    def __post_init__(self) -> None:
        if self.op not in ARITH_OPS:
            raise MalformedExpressionError(f"unknown arithmetic operator {self.op!r}")
        n = len(self.args)
        if n < 2 or (n > 2 and self.op not in ("+", "*")):
            raise MalformedExpressionError(f"{self.op!r} takes two operands, got {n}")
        self._check_children(NUMBER, "operand of an arithmetic operator")

    def children(self) -> tuple[Expression, ...]:
        return self.args

    def _print(self) -> str:
        text = f" {self.op} ".join(str(a) for a in self.args)
        return f"({text})" if self.parens else text


@dataclass(frozen=True)
class Call(Expression):
    """``min(...)``, ``max(...)`` or ``abs(x)``."""

    fn: str
    args: tuple[Expression, ...]

    def __post_init__(self) -> None:
        if self.fn not in FUNCTIONS:
            raise MalformedExpressionError(
                f"unknown function {self.fn!r} (allowed: {', '.join(FUNCTIONS)})")
        if not self.args or (self.fn == "abs" and len(self.args) != 1):
            raise MalformedExpressionError(f"{self.fn}() given {len(self.args)} arguments")
        self._check_children(NUMBER, f"argument of {self.fn}()")

    def children(self) -> tuple[Expression, ...]:
        return self.args

    def _print(self) -> str:
        return f"{self.fn}({', '.join(str(a) for a in self.args)})"


@dataclass(frozen=True)
class Compare(Expression):
    """``operands[0] ops[0] operands[1] ops[1] ...`` (chained as in Python)."""

    kind: ClassVar[str] = TRUTH
    operands: tuple[Expression, ...]
    ops: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.operands) != len(self.ops) + 1 or not self.ops:
            raise MalformedExpressionError("a comparison needs one more operand than operators")
        for op in self.ops:
            if op not in CMP_OPS:
                raise MalformedExpressionError(f"unknown comparison {op!r}")
        for c in self.operands:
            if c.kind not in VALUE_KINDS:
                _check(c, NUMBER, "operand of a comparison")

    def children(self) -> tuple[Expression, ...]:
        return self.operands

    def _print(self) -> str:
        out = [str(self.operands[0])]
        for op, b in zip(self.ops, self.operands[1:], strict=True):
            out += [op, str(b)]
        return " ".join(out)


@dataclass(frozen=True)
class Member(Expression):
    """``operand in [values...]`` (``not in`` when ``negated``): Python's membership, by
    equality, in a literal list of numbers, strings or booleans."""

    kind: ClassVar[str] = TRUTH
    operand: Expression
    values: tuple[int | float | str | bool, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        if self.operand.kind not in VALUE_KINDS:
            _check(self.operand, NUMBER, "operand of 'in'")
        for v in self.values:
            if not isinstance(v, (int, float, str)):
                raise ConstraintTypeError(f"'in' takes a list of numbers or strings, got {v!r}")

    def children(self) -> tuple[Expression, ...]:
        return (self.operand,)

    def _print(self) -> str:
        listed = ", ".join(repr(v) for v in self.values)
        return f"{self.operand} {'not in' if self.negated else 'in'} [{listed}]"


@dataclass(frozen=True)
class BoolOp(Expression):
    """``values[0] and values[1] ...`` (or ``or``), short-circuiting."""

    kind: ClassVar[str] = TRUTH
    op: str
    values: tuple[Expression, ...]

    def __post_init__(self) -> None:
        if self.op not in ("and", "or"):
            raise MalformedExpressionError(f"unknown boolean operator {self.op!r}")
        if len(self.values) < 2:
            raise MalformedExpressionError(f"'{self.op}' needs two operands or more")
        self._check_children(TRUTH, f"operand of '{self.op}'")

    def children(self) -> tuple[Expression, ...]:
        return self.values

    def _print(self) -> str:
        return f" {self.op} ".join(v._operand() for v in self.values)

    def _operand(self) -> str:
        return f"({self})"


@dataclass(frozen=True)
class Negation(Expression):
    """``not operand``."""

    kind: ClassVar[str] = TRUTH
    operand: Expression

    def __post_init__(self) -> None:
        _check(self.operand, TRUTH, "operand of 'not'")

    def children(self) -> tuple[Expression, ...]:
        return (self.operand,)

    def _print(self) -> str:
        return f"not {self.operand._operand()}"

    def _operand(self) -> str:
        return f"({self})"


def conjunction(parts: Sequence[Expression]) -> Expression:
    """``parts[0] and parts[1] ...``; the one part itself; ``True`` for none."""
    parts = tuple(parts)
    if not parts:
        return Truth(True)
    return parts[0] if len(parts) == 1 else BoolOp("and", parts)


# ----------------------------------------------------------------------------- parsing text

_BINOPS: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
}
_CMPOPS: dict[type, str] = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}


def caret(source: str, col: int) -> str:
    """The source under a caret at column ``col`` (1-based), for error messages."""
    return f"\n    {source}\n    {' ' * max(col - 1, 0)}^"


def _syntax(source: str, node: ast.AST | None, what: str) -> RestrictionSyntaxError:
    col = getattr(node, "col_offset", 0) + 1
    return RestrictionSyntaxError(
        f"restriction {source!r}: {what} at column {col}{caret(source, col)}"
    )


def name_hints(name: str, known: Sequence[str]) -> tuple[str, str]:
    """For a ``name`` that is not among the parameters ``known``: ``"; did you mean ...?"``
    (the close ones; empty if none) and the parameters listed (the first 12)."""
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    listed = ", ".join(list(known)[:12]) + (", ..." if len(known) > 12 else "")
    return hint, listed


def unknown_name(source: str, name: str, known: Sequence[str], col: int) -> UnknownNameError:
    """The error for ``name``, not among the parameters ``known``, at column ``col``."""
    hint, listed = name_hints(name, known)
    return UnknownNameError(
        f"restriction {source!r}: unknown name {name!r} at column {col}{hint} "
        f"(parameters: {listed}){caret(source, col)}"
    )


def value_kind(values: Sequence[object]) -> str:
    """The kind of a parameter's values: :data:`FLAG` (only ``True``/``False`` or
    ``0``/``1``), :data:`NUMBER` (ints, floats, booleans), :data:`STRING` or :data:`MIXED`."""
    if all(isinstance(v, numbers.Real) for v in values):
        if all(isinstance(v, (bool, numbers.Integral)) and v in (0, 1) for v in values):
            return FLAG
        return NUMBER
    if all(isinstance(v, str) for v in values):
        return STRING
    return MIXED


def value_kinds(domains: Mapping[str, Sequence[object]]) -> dict[str, str]:
    """:func:`value_kind` of each parameter's domain."""
    return {n: value_kind(list(d)) for n, d in domains.items()}


_ORDERING = frozenset({"<", "<=", ">", ">="})


class _Parser:
    """Checks the whitelisted AST of a restriction string and converts it to an
    :class:`Expression`, with the column of the first problem in its errors. ``kinds`` are
    the parameters' value kinds (:func:`value_kinds`); without them every name is a number."""

    def __init__(self, source: str, kinds: Mapping[str, str] | None = None) -> None:
        self.source = source
        self.kinds = dict(kinds or {})

    def convert(self, node: ast.AST) -> Expression:
        src = self.source
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return Truth(node.value)
            if isinstance(node.value, (int, float)):
                return Num(node.value)
            if isinstance(node.value, str):
                return Str(node.value)
            raise _syntax(src, node, f"unsupported literal {node.value!r}")
        if isinstance(node, ast.Name):
            return Name(node.id)
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _BINOPS:
                raise _syntax(src, node, f"unsupported operator {type(node.op).__name__}")
            left = self.need(node.left, NUMBER, "operand of an arithmetic operator")
            right = self.need(node.right, NUMBER, "operand of an arithmetic operator")
            return Arith(_BINOPS[type(node.op)], (left, right))
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return Negation(self.need(node.operand, TRUTH, "operand of 'not'"))
            if isinstance(node.op, (ast.USub, ast.UAdd)):
                operand = self.need(node.operand, NUMBER, "operand of a sign")
                return Sign("-" if isinstance(node.op, ast.USub) else "+", operand)
            raise _syntax(src, node, f"unsupported operator {type(node.op).__name__}")
        if isinstance(node, ast.BoolOp):
            word = "and" if isinstance(node.op, ast.And) else "or"
            values = [self.need(v, TRUTH, f"operand of '{word}'") for v in node.values]
            return BoolOp(word, tuple(values))
        if isinstance(node, ast.Compare):
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                return self.member(node)
            for op in node.ops:
                if type(op) not in _CMPOPS:
                    raise _syntax(src, node, f"unsupported comparison {type(op).__name__}")
            parts = [node.left, *node.comparators]
            operands = [self.value(v, "operand of a comparison") for v in parts]
            ops = tuple(_CMPOPS[type(o)] for o in node.ops)
            for i, word in enumerate(ops):
                kinds = {self.kind_of(operands[i]), self.kind_of(operands[i + 1])}
                if word in _ORDERING and STRING in kinds and kinds & {NUMBER, FLAG}:
                    raise _syntax(
                        src,
                        parts[i + 1],
                        f"'{word}' compares a string with a number (Python "
                        f"raises TypeError); compare strings with '==', '!=' or 'in'",
                    )
            return Compare(tuple(operands), ops)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                fname = node.func.id if isinstance(node.func, ast.Name) else "this"
                raise _syntax(
                    src, node, f"unsupported function {fname!r} (allowed: {', '.join(FUNCTIONS)})"
                )
            if node.keywords or not node.args:
                raise _syntax(src, node, f"{node.func.id}() takes positional arguments only")
            if node.func.id == "abs" and len(node.args) != 1:
                raise _syntax(src, node, "abs() takes exactly one argument")
            if any(isinstance(a, ast.Starred) for a in node.args):
                raise _syntax(src, node, "unsupported syntax Starred")
            args = [self.need(a, NUMBER, f"argument of {node.func.id}()") for a in node.args]
            return Call(node.func.id, tuple(args))
        raise _syntax(src, node, f"unsupported syntax {type(node).__name__}")

    def member(self, node: ast.Compare) -> Expression:
        """``x in [literals]`` or ``x not in [literals]`` (one operator, no chain)."""
        if len(node.ops) != 1:
            raise _syntax(
                self.source,
                node,
                "'in' in a chained comparison; write it as its own comparison joined with 'and'",
            )
        negated = isinstance(node.ops[0], ast.NotIn)
        listed = node.comparators[0]
        if not isinstance(listed, (ast.List, ast.Tuple, ast.Set)):
            raise _syntax(
                self.source,
                listed,
                "'in' takes a literal list of values, e.g. 'block_size_x in [32, 64, 128]'",
            )
        values: list[int | float | str] = []
        for elt in listed.elts:
            got = self.convert(elt) if not isinstance(elt, ast.Starred) else None
            if isinstance(got, Sign) and isinstance(got.operand, Num):
                v = got.operand.value
                values.append(-v if got.op == "-" else v)
            elif isinstance(got, (Num, Str, Truth)):
                values.append(got.value)
            else:
                raise _syntax(
                    self.source, elt, "'in' takes a list of number, string or boolean literals"
                )
        operand = self.value(node.left, "operand of 'in'")
        return Member(operand, tuple(values), negated)

    def kind_of(self, e: Expression) -> str:
        """The value kind of an operand: a parameter's, ``STRING`` for a literal string,
        else ``NUMBER``."""
        if isinstance(e, Str):
            return STRING
        if isinstance(e, Name):
            return self.kinds.get(e.id, NUMBER)
        return NUMBER

    def value(self, node: ast.AST, where: str) -> Expression:
        """An operand of a comparison: a number or a string (a literal or a parameter)."""
        got = self.convert(node)
        if got.kind in VALUE_KINDS:
            return got
        if isinstance(got, Truth):  # True == 1, as in Python
            return Num(int(got.value))
        return self.need(node, NUMBER, where, got)

    def need(
        self, node: ast.AST, kind: str, where: str, got: Expression | None = None
    ) -> Expression:
        got = self.convert(node) if got is None else got
        text = ast.get_source_segment(self.source, node) or ast.unparse(node)
        col = getattr(node, "col_offset", 0) + 1
        if kind == NUMBER and isinstance(got, Name):
            k = self.kinds.get(got.id, NUMBER)
            if k in (STRING, MIXED):
                values = "strings" if k == STRING else "values of several types"
                raise _syntax(
                    self.source,
                    node,
                    f"{where} {text!r} is a parameter taking {values}, not "
                    f"a number; compare it with '==', '!=' or 'in'",
                )
        if got.kind == kind:
            return got
        if kind == TRUTH and isinstance(got, Name) and self.kinds.get(got.id) == FLAG:
            return Compare((got, Num(0)), ("!=",))  # its truth value, as in Python
        if kind == NUMBER and isinstance(got, Truth):
            return Num(int(got.value))  # True + 1 == 2, as in Python
        if kind == TRUTH:
            flags = ""
            if isinstance(got, Name) and got.id in self.kinds:
                flags = (
                    " (a parameter stands as a truth value only when it takes just True/False "
                    "or 0/1)"
                )
            raise NotAPredicateError(
                f"restriction {self.source!r}: {where} {text!r} at column {col} is a "
                f"{got.kind}, not a truth value; compare it, e.g. '{text} > 0'{flags}"
                f"{caret(self.source, col)}"
            )
        raise _syntax(self.source, node, f"{where} {text!r} is a {got.kind}, not a number")


def _check_names(source: str, tree: ast.AST, known: Sequence[str]) -> None:
    """Reject the first unknown name (in textual order; called functions are not names)."""
    known_set = set(known)
    callees: set[int] = set()
    names: list[ast.Name] = []
    for n in ast.walk(tree):  # breadth first: a call is seen before its callee name
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            callees.add(id(n.func))
        elif isinstance(n, ast.Name) and id(n) not in callees:
            names.append(n)
    for n in sorted(names, key=lambda n: (n.lineno, n.col_offset)):
        if n.id not in known_set:
            raise unknown_name(source, n.id, list(known), n.col_offset + 1)


def normalise(source: str) -> str:
    """A restriction string as it is kept: stripped, a multi-line one on one line."""
    return " ".join(source.strip().split()) if "\n" in source else source.strip()


def parse_predicate(
    source: str, known: Sequence[str], kinds: Mapping[str, str] | None = None
) -> Expression:
    """Parse a restriction string (see :func:`normalise`) over the parameters ``known``;
    ``kinds`` (:func:`value_kinds`) type-check string parameters and let flags stand as
    truth values.

    Raises :class:`RestrictionSyntaxError` (not Python, or outside the whitelist),
    :class:`UnknownNameError` or :class:`NotAPredicateError` with the offending text and
    column. The whole text is checked against the whitelist before the names.
    """
    if not isinstance(source, str):
        raise ConstraintTypeError(f"a restriction string is needed, got {type(source).__name__}")
    text = normalise(source)
    if not text:
        raise RestrictionSyntaxError("restriction '': empty restriction")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        col, msg = e.offset or 0, e.msg
        if not 0 < col <= len(text):  # CPython reports 0 at the end of the input
            col, msg = len(text) + 1, f"{msg} (the expression is incomplete)"
        raise RestrictionSyntaxError(
            f"restriction {text!r}: {msg} at column {col}{caret(text, col)}"
        ) from None
    expr = _Parser(text, kinds).convert(tree.body)  # whitelist first: 'a.b' is a syntax error
    _check_names(text, tree.body, known)
    if isinstance(expr, Name) and kinds and kinds.get(expr.id) == FLAG:
        return Compare((expr, Num(0)), ("!=",))  # a flag on its own: its truth value
    if expr.kind != TRUTH:
        raise NotAPredicateError(
            f"restriction {text!r} is not a predicate: it computes a {expr.kind}; "
            f"write a comparison, e.g. '{text} > 0' or '{text} == 0'"
        )
    return expr
