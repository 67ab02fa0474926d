"""Restriction text: Kernel Tuner's string language parsed into the constraint language.

A restriction of :class:`constraints.space.SearchSpace` is a predicate of
:mod:`constraints.expr` over parameter names. It comes either from the user's text
(``"32 <= block_size_x * block_size_y <= 1024"``, parsed by :func:`parse_predicate`) or is
built as data by the library (``mapper.tuning.to_predicate`` translates the size relations of
the IR): both are the same objects, compiled by ``constraints.vectorise`` and
``constraints.scalar`` and wrapped in a ``constraints.restrictions.Restriction`` that keeps
the text and the origin.

The text's language: int/float/string literals and ``True``/``False``, parameter names,
``+ - * / // % **``, unary ``- +``, comparisons (chained too: ``a < b < c`` becomes ``a < b
and b < c``), ``in``/``not in`` a literal list, ``and``/``or``/``not`` and calls to ``min``,
``max``, ``abs``. Strings (literals and string-valued parameters) can only be compared. Given
the parameters' value kinds (:func:`value_kinds`), a parameter taking only ``True``/``False``
or ``0``/``1`` may stand as a truth value (``use_shmem or block_size_x >= 64``: it means
``use_shmem != 0``), as in Python. Errors name the column of the first problem.
"""

from __future__ import annotations

import ast
import difflib
import numbers
from collections.abc import Mapping, Sequence

import constraints.expr as ex
from constraints.errors import (
    ConstraintTypeError,
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
    "parse_predicate",
    "value_kind",
    "value_kinds",
]

NUMBER, TRUTH, TEXT = ex.NUMBER, ex.TRUTH, ex.TEXT
FLAG, STRING, MIXED = "flag", "string", "mixed"
"""Value kinds of parameters besides ``NUMBER`` (:func:`value_kind`): numbers that are all
``True``/``False`` or ``0``/``1``, strings, anything else (mixed types)."""
FUNCTIONS = ("min", "max", "abs")
ARITH_OPS = ("+", "-", "*", "/", "//", "%", "**")
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")




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
    """Checks the whitelisted AST of a restriction string and converts it to a predicate
    (:mod:`constraints.expr`), with the column of the first problem in its errors. ``kinds``
    are the parameters' value kinds (:func:`value_kinds`); without them every name is a
    number."""

    def __init__(self, source: str, kinds: Mapping[str, str] | None = None) -> None:
        self.source = source
        self.kinds = dict(kinds or {})

    def convert(self, node: ast.AST) -> ex.Node:
        src = self.source
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                return ex.TRUE if node.value else ex.FALSE
            if isinstance(node.value, (int, float)):
                return ex.Const(node.value)
            if isinstance(node.value, str):
                return ex.Str(node.value)
            raise _syntax(src, node, f"unsupported literal {node.value!r}")
        if isinstance(node, ast.Name):
            return ex.Param(node.id)
        if isinstance(node, ast.BinOp):
            if type(node.op) not in _BINOPS:
                raise _syntax(src, node, f"unsupported operator {type(node.op).__name__}")
            left = self.number(node.left, "operand of an arithmetic operator")
            right = self.number(node.right, "operand of an arithmetic operator")
            return ex.BinOp(_BINOPS[type(node.op)], left, right)
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return ex.Not(self.truth(node.operand, "operand of 'not'"))
            if isinstance(node.op, (ast.USub, ast.UAdd)):
                operand = self.number(node.operand, "operand of a sign")
                return ex.Neg(operand) if isinstance(node.op, ast.USub) else operand
            raise _syntax(src, node, f"unsupported operator {type(node.op).__name__}")
        if isinstance(node, ast.BoolOp):
            word = "and" if isinstance(node.op, ast.And) else "or"
            values = [self.truth(v, f"operand of '{word}'") for v in node.values]
            return ex.And(*values) if word == "and" else ex.Or(*values)
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
            # chained as Python chains: a < b < c is a < b and b < c
            return ex.And(*(ex.Cmp(op, a, b)
                         for op, a, b in zip(ops, operands, operands[1:], strict=False)))
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
            args = [self.number(a, f"argument of {node.func.id}()") for a in node.args]
            return ex.Call(node.func.id, args)
        raise _syntax(src, node, f"unsupported syntax {type(node).__name__}")

    def member(self, node: ast.Compare) -> ex.Pred:
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
            if isinstance(got, (ex.Const, ex.Str, ex.BoolConst)):
                values.append(got.value)
            else:
                raise _syntax(
                    self.source, elt, "'in' takes a list of number, string or boolean literals"
                )
        operand = self.value(node.left, "operand of 'in'")
        inside = ex.In(operand, values)
        return ex.Not(inside) if negated else inside

    def kind_of(self, e: ex.Node) -> str:
        """The value kind of an operand: a parameter's, ``STRING`` for a literal string,
        else ``NUMBER``."""
        if isinstance(e, ex.Str):
            return STRING
        if isinstance(e, ex.Param):
            return self.kinds.get(e.name, NUMBER)
        return NUMBER

    def number(self, node: ast.AST, where: str) -> ex.Term:
        """An operand that must be a number."""
        got = self.need(node, NUMBER, where)
        assert isinstance(got, ex.Term)  # need checked its kind
        return got

    def truth(self, node: ast.AST, where: str) -> ex.Pred:
        """An operand that must be a truth value."""
        got = self.need(node, TRUTH, where)
        assert isinstance(got, ex.Pred)  # need checked its kind
        return got

    def value(self, node: ast.AST, where: str) -> ex.Term:
        """An operand of a comparison: a number or a string (a literal or a parameter)."""
        got = self.convert(node)
        if isinstance(got, ex.Term):  # a number or a string
            return got
        if isinstance(got, ex.BoolConst):  # True == 1, as in Python
            return ex.Const(int(got.value))
        self.need(node, NUMBER, where, got)  # raises: a truth value is not an operand
        raise AssertionError("need() accepted a truth value as a number")

    def need(
        self, node: ast.AST, kind: str, where: str, got: ex.Node | None = None
    ) -> ex.Node:
        got = self.convert(node) if got is None else got
        text = ast.get_source_segment(self.source, node) or ast.unparse(node)
        col = getattr(node, "col_offset", 0) + 1
        if kind == NUMBER and isinstance(got, ex.Param):
            k = self.kinds.get(got.name, NUMBER)
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
        if kind == TRUTH and isinstance(got, ex.Param) and self.kinds.get(got.name) == FLAG:
            return ex.Cmp("!=", got, 0)  # its truth value, as in Python
        if kind == NUMBER and isinstance(got, ex.BoolConst):
            return ex.Const(int(got.value))  # True + 1 == 2, as in Python
        if kind == TRUTH:
            flags = ""
            if isinstance(got, ex.Param) and got.name in self.kinds:
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
) -> ex.Pred:
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
    if isinstance(expr, ex.Param) and kinds and kinds.get(expr.name) == FLAG:
        return ex.Cmp("!=", expr, 0)  # a flag on its own: its truth value
    if not isinstance(expr, ex.Pred):
        raise NotAPredicateError(
            f"restriction {text!r} is not a predicate: it computes a {expr.kind}; "
            f"write a comparison, e.g. '{text} > 0' or '{text} == 0'"
        )
    return expr
