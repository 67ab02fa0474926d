"""Tokens of the text syntax, and the token cursor its readers share.

The tokenizer checks brackets as it goes (an unbalanced one is a located error); a
:class:`TokenCursor` walks the tokens with the helpers every reader of the syntax uses
(the C-expression translator, the type and size grammar, the parser) and counts their
nesting (:func:`nested`), so a program nested too deep is a located ``ParseError``
instead of a ``RecursionError``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ir.errors import ParseError
from ir.size_grammar import TokenReader

# ---------------------------------------------------------------------------- tokens

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<comment>\#[^\n]*)
  | (?P<num>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?|\d+[eE][+-]?\d+[fF]?|\d+)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>->|//|<=|>=|==|!=|&&|\|\||[()\[\],:$\\+\-*/%<>=?!λ])
    """,
    re.X | re.ASCII,  # \d is 0-9 only: OpenCL C reads ASCII digits, not other scripts'
)
_OPEN = {"(": ")", "[": "]"}
_CLOSE = {")": "(", "]": "["}
MAX_INT = 2**63 - 1  # integer literals fit OpenCL's long


class Token:
    """A token: kind is name, int, float, op or eof; ``nl`` when a newline precedes it."""

    __slots__ = ("kind", "text", "line", "col", "nl", "start", "end")

    def __init__(self, kind, text, line, col, nl, start, end):
        self.kind, self.text, self.line, self.col = kind, text, line, col
        self.nl, self.start, self.end = nl, start, end

    def __repr__(self) -> str:
        return f"Token({self.kind}, {self.text!r}, {self.line}:{self.col})"


def parse_error(msg: str, line: int, col: int, lines: list[str]) -> ParseError:
    """A ``ParseError`` at ``line``:``col`` showing that line of the text."""
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    return ParseError(msg, line, col, src)


def tokenize(text: str, lines: list[str]) -> list[Token]:
    """The tokens of ``text`` (whose lines are ``lines``), ending with an eof token."""
    toks: list[Token] = []
    pos, line, line_start, nl = 0, 1, 0, False
    opened: list[Token] = []
    n = len(text)
    match = _TOKEN_RE.match
    while pos < n:
        mt = match(text, pos)
        if mt is None:
            raise parse_error(f"unexpected character {text[pos]!r}", line, pos - line_start + 1,
                              lines)
        kind = mt.lastgroup
        end = mt.end()
        if kind == "nl":
            line += 1
            line_start = end
            nl = True
        elif kind == "num" or kind == "name" or kind == "op":
            s = mt.group()
            if kind == "num":
                kind = "float" if any(c in s for c in ".eEfF") else "int"
                if kind == "int" and (len(s) > 19 or int(s) > MAX_INT):
                    raise parse_error(f"integer {s[:12]}... has {len(s)} digits; integers are "
                                      f"at most {MAX_INT} (2^63 - 1)", line,
                                      pos - line_start + 1, lines)
            tok = Token(kind, s, line, pos - line_start + 1, nl, pos, end)
            nl = False
            if kind == "op":
                if s in _OPEN:
                    opened.append(tok)
                elif s in _CLOSE:
                    if not opened:
                        raise parse_error(f"unbalanced parenthesis: {s!r} has no matching "
                                          f"{_CLOSE[s]!r}", tok.line, tok.col, lines)
                    o = opened.pop()
                    if _OPEN[o.text] != s:
                        raise parse_error(f"unbalanced parenthesis: {s!r} closes {o.text!r} "
                                          f"opened at line {o.line}, column {o.col}", tok.line,
                                          tok.col, lines)
            toks.append(tok)
        pos = end
    if opened:
        o = opened[-1]
        raise parse_error(f"unbalanced parenthesis: {o.text!r} is never closed", o.line, o.col,
                          lines)
    toks.append(Token("eof", "", line, n - line_start + 1, nl, n, n))
    return toks


# -------------------------------------------------------------------------- nesting

# Deepest nesting the parser accepts (brackets, maps, lambdas, types, C and size
# expressions). With ir.parser.MAX_DEPTH, the limit keeps every recursive pass (type
# checker, printer, rules, lowering) far from Python's stack limit.
MAX_NESTING = 100

_C = TypeVar("_C", bound="TokenCursor")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def nested(method: Callable[Concatenate[_C, _P], _R]) -> Callable[Concatenate[_C, _P], _R]:
    """Counts the reader's nesting around ``method``; past MAX_NESTING: a located error."""

    @functools.wraps(method)
    def wrapper(self: _C, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        self.nest += 1
        try:
            if self.nest > MAX_NESTING:
                raise self.error(
                    f"the program nests more than {MAX_NESTING} levels deep here (brackets, "
                    "maps, lambdas, types or expressions inside each other); split it into "
                    "smaller functions", self.peek())
            return method(self, *args, **kwargs)
        finally:
            self.nest -= 1

    return wrapper


# --------------------------------------------------------------------------- cursor


class TokenCursor(TokenReader):
    """The tokens of one text and a position in them, with the helpers of every reader."""

    if TYPE_CHECKING:  # TokenReader's, for these tokens
        def expect(self, text: str, hint: str = "") -> Token: ...

    def __init__(self, text: str):
        self.text = text
        self.lines = text.split("\n")
        self.toks = tokenize(text, self.lines)
        self.i = 0
        self.nest = 0

    def peek(self, k: int = 0) -> Token:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else self.toks[-1]

    def next(self) -> Token:
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t.text == text and (t.kind == "op" or t.kind == "name")

    def error(self, msg: str, tok: Token) -> ParseError:
        return parse_error(msg, tok.line, tok.col, self.lines)

    @staticmethod
    def describe(t: Token) -> str:
        return "the end of the input" if t.kind == "eof" else repr(t.text)

    def name_tok(self, what: str) -> Token:
        t = self.peek()
        if t.kind != "name":
            raise self.error(f"expected {what}, found {self.describe(t)}", t)
        return self.next()

    def int_tok(self, what: str) -> int:
        t = self.peek()
        if t.kind != "int":
            raise self.error(f"expected {what} (an integer), found {self.describe(t)}", t)
        self.next()
        return int(t.text)

    def number(self) -> float | int:
        neg = self.at("-")
        if neg:
            self.next()
        t = self.peek()
        if t.kind not in ("int", "float"):
            raise self.error(f"expected a number, found {self.describe(t)}", t)
        self.next()
        v: float | int = int(t.text) if t.kind == "int" else float(t.text.rstrip("fF"))
        return -v if neg else v

    def whole(self, method: Callable[[Any], Any]) -> Any:
        """``method(self)``, which must read the whole text."""
        out = method(self)
        t = self.peek()
        if t.kind != "eof":
            raise self.error(f"unexpected {self.describe(t)} after the end", t)
        return out
