"""Restriction predicates: the typed form of a tuning search space's restrictions.

A restriction of :class:`constraints.space.SearchSpace` is a truth-valued
:class:`Expression` over parameter names. It comes either from the user's text
(``"32 <= block_size_x * block_size_y <= 1024"``, parsed by :func:`parse_predicate`) or is
built as data by the library (``mapper.tuning.to_predicate`` translates the size relations of
the IR): both end up as the same objects, compiled by ``constraints.vectorise`` and wrapped
in a ``constraints.restrictions.Restriction`` that keeps the text and the origin.

The language is the one of the restriction strings: int/float literals and ``True``/``False``,
parameter names, ``+ - * / // % **``, unary ``- +``, comparisons (chained too),
``and``/``or``/``not`` and calls to ``min``, ``max``, ``abs``. Nodes are frozen dataclasses
(compared and hashed structurally); each has a static :attr:`~Expression.kind` (a number or a
truth value) and prints (``str``) as Python source: compound arithmetic in parentheses
(``(N // s0)``, ``(-x)``), comparisons and conjunctions without, e.g.
``s0 != 0 and N % s0 == 0 and (N // s0) >= 2``.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from constraints.errors import NotAPredicateError, RestrictionSyntaxError, UnknownNameError

__all__ = [
    "NUMBER",
    "TRUTH",
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
    "Not",
    "conjunction",
    "parse_predicate",
]

NUMBER, TRUTH = "number", "truth value"
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
        raise TypeError(f"{where}: expected an Expression, got {e!r}")
    if e.kind != kind:
        raise TypeError(f"{where}: {e} is a {e.kind}, not a {kind}")
    return e


@dataclass(frozen=True)
class Num(Expression):
    """An int or float literal."""

    value: int | float

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            raise TypeError(f"Num takes an int or a float, got {self.value!r}")

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
            raise ValueError(f"unknown sign {self.op!r}")
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
            raise ValueError(f"unknown arithmetic operator {self.op!r}")
        n = len(self.args)
        if n < 2 or (n > 2 and self.op not in ("+", "*")):
            raise ValueError(f"{self.op!r} takes two operands, got {n}")
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
            raise ValueError(f"unknown function {self.fn!r} (allowed: {', '.join(FUNCTIONS)})")
        if not self.args or (self.fn == "abs" and len(self.args) != 1):
            raise ValueError(f"{self.fn}() given {len(self.args)} arguments")
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
            raise ValueError("a comparison needs one more operand than operators")
        for op in self.ops:
            if op not in CMP_OPS:
                raise ValueError(f"unknown comparison {op!r}")
        self._check_children(NUMBER, "operand of a comparison")

    def children(self) -> tuple[Expression, ...]:
        return self.operands

    def _print(self) -> str:
        out = [str(self.operands[0])]
        for op, b in zip(self.ops, self.operands[1:], strict=True):
            out += [op, str(b)]
        return " ".join(out)


@dataclass(frozen=True)
class BoolOp(Expression):
    """``values[0] and values[1] ...`` (or ``or``), short-circuiting."""

    kind: ClassVar[str] = TRUTH
    op: str
    values: tuple[Expression, ...]

    def __post_init__(self) -> None:
        if self.op not in ("and", "or"):
            raise ValueError(f"unknown boolean operator {self.op!r}")
        if len(self.values) < 2:
            raise ValueError(f"'{self.op}' needs two operands or more")
        self._check_children(TRUTH, f"operand of '{self.op}'")

    def children(self) -> tuple[Expression, ...]:
        return self.values

    def _print(self) -> str:
        return f" {self.op} ".join(v._operand() for v in self.values)

    def _operand(self) -> str:
        return f"({self})"


@dataclass(frozen=True)
class Not(Expression):
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


class _Parser:
    """Checks the whitelisted AST of a restriction string and converts it to an
    :class:`Expression`, with the column of the first problem in its errors."""

    def __init__(self, source: str) -> None:
        self.source = source

    def convert(self, node: ast.AST) -> Expression:
        src = self.source
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return Truth(node.value)
            if isinstance(node.value, (int, float)):
                return Num(node.value)
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
                return Not(self.need(node.operand, TRUTH, "operand of 'not'"))
            if isinstance(node.op, (ast.USub, ast.UAdd)):
                operand = self.need(node.operand, NUMBER, "operand of a sign")
                return Sign("-" if isinstance(node.op, ast.USub) else "+", operand)
            raise _syntax(src, node, f"unsupported operator {type(node.op).__name__}")
        if isinstance(node, ast.BoolOp):
            word = "and" if isinstance(node.op, ast.And) else "or"
            values = [self.need(v, TRUTH, f"operand of '{word}'") for v in node.values]
            return BoolOp(word, tuple(values))
        if isinstance(node, ast.Compare):
            for op in node.ops:
                if type(op) not in _CMPOPS:
                    raise _syntax(src, node, f"unsupported comparison {type(op).__name__}")
            operands = [
                self.need(v, NUMBER, "operand of a comparison")
                for v in [node.left, *node.comparators]
            ]
            return Compare(tuple(operands), tuple(_CMPOPS[type(o)] for o in node.ops))
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

    def need(self, node: ast.AST, kind: str, where: str) -> Expression:
        got = self.convert(node)
        if got.kind == kind:
            return got
        text = ast.get_source_segment(self.source, node) or ast.unparse(node)
        col = getattr(node, "col_offset", 0) + 1
        if kind == TRUTH:
            raise NotAPredicateError(
                f"restriction {self.source!r}: {where} {text!r} at column {col} is a number, "
                f"not a truth value; compare it, e.g. '{text} > 0'{caret(self.source, col)}"
            )
        raise _syntax(self.source, node, f"{where} {text!r} is a truth value, not a number")


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


def parse_predicate(source: str, known: Sequence[str]) -> Expression:
    """Parse a restriction string (see :func:`normalise`) over the parameters ``known``.

    Raises :class:`RestrictionSyntaxError` (not Python, or outside the whitelist),
    :class:`UnknownNameError` or :class:`NotAPredicateError` with the offending text and
    column. The whole text is checked against the whitelist before the names.
    """
    if not isinstance(source, str):
        raise TypeError(f"a restriction string is needed, got {type(source).__name__}")
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
    expr = _Parser(text).convert(tree.body)  # whitelist first: 'a.b' is a syntax error
    _check_names(text, tree.body, known)
    if expr.kind != TRUTH:
        raise NotAPredicateError(
            f"restriction {text!r} is not a predicate: it computes a number; "
            f"write a comparison, e.g. '{text} > 0' or '{text} == 0'"
        )
    return expr
