"""The tokens of size text, for ``ir.sym.parse_expr``.

:class:`_TextReader` reads the size grammar (``ir.size_grammar``) over the tokens of one
text, with errors as ``SymbolicError``; the leaves of the grammar (``size_int``,
``size_name``, ``size_minmax``), which build expressions, are its subclass's, in
``ir.sym_expr``.
"""

from __future__ import annotations

import re

from ir.errors import SymbolicError
from ir.size_grammar import SizeGrammar

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(//|[-+*/%(),]))")


class _Tok:
    __slots__ = ("kind", "text", "col")

    def __init__(self, kind: str, text: str, col: int):
        self.kind, self.text, self.col = kind, text, col


class _TextReader(SizeGrammar):
    """The size grammar over the tokens of one text; errors are ``SymbolicError``."""

    def __init__(self, text: str):
        self.text = text
        self.toks: list[_Tok] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            mt = _TOKEN.match(text, pos)
            if mt is None:
                raise SymbolicError(f"cannot parse {self.text!r} at column {pos + 1}")
            kind = "int" if mt.group(1) else "name" if mt.group(2) else "op"
            g = mt.lastindex
            assert g is not None  # each alternative of _TOKEN is a group
            tok = mt.group(g)
            self.toks.append(_Tok(kind, tok, mt.start(g) + 1))
            pos = mt.end()
        self.toks.append(_Tok("eof", "", pos + 1))
        self.i = 0

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t.text == text and t.kind in ("op", "name")

    def next(self) -> _Tok:
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def describe(self, t: _Tok) -> str:
        return "the end" if t.kind == "eof" else repr(t.text)

    def error(self, msg: str, tok: _Tok) -> SymbolicError:
        return SymbolicError(f"cannot parse {self.text!r} at column {tok.col}: {msg}")
