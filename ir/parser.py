"""The parser of the text syntax: declarations, terms, user functions (see ``ir.syntax``).

A recursive-descent parser over the tokens of ``ir.lexer``; types and sizes are read by
``ir.parse_types``, keyword forms by ``ir.parse_keywords``, user function bodies by
``ir.cexpr``. Errors are ``ParseError`` with the line and column of the offending token
(``NotUTF8Error`` for a file that is not UTF-8). Every node of a parsed program has a
source position (``parse``'s ``spans``): where the construct starts that made it (a
macro's nodes and a composition's parameter: where the macro or composition starts), so
that a type error can point at what the user wrote.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TypeVar

from ir.builders import USER_FUNS, fresh
from ir.cexpr import CExprReader, compile_py
from ir.cwords import OPENCL_RESERVED
from ir.errors import NotUTF8Error, ParseError, ProgramFileError
from ir.lexer import MAX_NESTING, Token, nested
from ir.nodes import ExprNode, FunCall, FunDecl, Lambda, Literal, Map, Node, Param, UserFun
from ir.parse_keywords import KEYWORDS, MAP_RE, MAP_WORDS, WORDS, KeywordForms, is_reserved
from ir.printer import restore_scope, show
from ir.types import Float, Int, Type

# Deepest expression tree a parsed program may have (a composition of n functions is n
# levels deep; the papers' convolution is 31 levels deep). With ir.lexer.MAX_NESTING, it
# keeps every recursive pass far from Python's stack limit.
MAX_DEPTH = 200
_N = TypeVar("_N", bound=Node)


def _label_names() -> Iterator[str]:
    """A, B, ..., Z, A1, ...: candidate map labels."""
    letters = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    yield from letters
    k = 1
    while True:
        yield from (f"{a}{k}" for a in letters)
        k += 1


def tree_depth(node: Node) -> int:
    """The depth of ``node``'s expression tree (computed without recursion)."""
    best, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in n.children())
    return best


class _Parser(KeywordForms, CExprReader):
    def __init__(self, text: str, userfuns: Mapping[str, UserFun] | None = None):
        super().__init__(text)
        self.idents = {t.text for t in self.toks if t.kind == "name"}
        self.userfuns: dict[str, UserFun] = dict(USER_FUNS)
        if userfuns:
            self.userfuns.update(userfuns)
        self.declared: set[str] = set()
        self.inputs: dict[str, Param] = {}
        self.scope: dict[str, Param] = {}
        # where each node starts in the text: id(node) -> (line, column)
        self.spans: dict[int, tuple[int, int]] = {}
        self.labels: dict[str, Token] = {}  # map label -> where it is first written

    def spanned(self, node: _N, tok: Token) -> _N:
        """Records that ``node`` starts at ``tok`` (for located type errors)."""
        self.spans[id(node)] = (tok.line, tok.col)
        return node

    def span_all(self, root: Node, tok: Token) -> None:
        """Gives every node of ``root`` without a position the position of its nearest
        ancestor that has one (``root``'s: ``tok``): the nodes a macro, a composition or a
        hole builds are where that construct is written."""
        spans = self.spans
        spans.setdefault(id(root), (tok.line, tok.col))
        seen: set[int] = set()
        stack = [root]
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            where = spans[id(n)]
            for c in n.children():
                spans.setdefault(id(c), where)
                stack.append(c)

    def macro_n(self, t: Token) -> int:
        """The dimension count of an ND macro (``ir.parse_keywords``), at most
        ``MAX_NESTING``: the macro expands to that many nested levels."""
        nt = self.peek()
        n = super().macro_n(t)
        if n > MAX_NESTING:
            raise self.error(f"{t.text}({n}) expands to {n} nested levels; the limit is "
                             f"{MAX_NESTING}: give fewer dimensions", nt)
        return n

    def map_form(self, t: Token) -> Map:
        """A map form (``ir.parse_keywords``); a label written twice is an error."""
        m = MAP_RE.fullmatch(t.text)
        label = m[2] if m else ""
        first = self.labels.get(label) if label else None
        if first is not None:
            used = {u[2] for u in map(MAP_RE.fullmatch, self.idents) if u and u[2]}
            free = next(c for c in _label_names() if c not in used)
            raise self.error(
                f"map label {label!r} is used twice (first at line {first.line}, column "
                f"{first.col}): a label names one map; rename this one (e.g. "
                f"{t.text[:len(t.text) - len(label)]}{free}) or leave the label out", t)
        if label:
            self.labels[label] = t
        return self.spanned(super().map_form(t), t)

    def check_name(self, t: Token, what: str) -> str:
        name = t.text
        if is_reserved(name):
            raise self.error(f"{name!r} is a reserved word and cannot name {what}", t)
        if name in self.userfuns:
            raise self.error(f"{name!r} is a user function and cannot name {what}", t)
        return name

    # ---------------------------------------------------------------- program
    def program(self) -> Node:
        while True:
            if self.at("userfun"):
                self.userfun_decl()
            elif self.peek().kind == "name" and self.at(":", 1):
                self.input_decl()
            else:
                break
        t = self.peek()
        if t.kind == "eof":
            where = " after the declarations" if self.inputs or self.declared else ""
            raise self.error(f"expected an expression{where}", t)
        body_tok = t
        term = self.term()
        t = self.peek()
        if t.kind != "eof":
            if t.kind == "name" and self.at(":", 1):
                raise self.error("declarations must come before the expression", t)
            raise self.error(f"unexpected {self.describe(t)} after the end of the expression", t)
        depth = tree_depth(term)
        if depth > MAX_DEPTH:
            raise self.error(
                f"the program's expression is {depth} levels deep (limit {MAX_DEPTH}; a "
                "composition of n functions is n levels deep); split it into smaller "
                "functions", body_tok)
        if self.inputs:
            if not isinstance(term, ExprNode):
                raise self.error("the program body must be an expression; apply the function "
                                 "to the inputs, e.g. 'f $ X'", body_tok)
            program: Node = Lambda(tuple(self.inputs.values()), term)
        else:
            program = term
        self.span_all(program, body_tok)
        return program

    def input_decl(self) -> None:
        t = self.next()
        self.next()  # ':'
        name = self.check_name(t, "an input")
        if name in self.inputs:
            raise self.error(f"input {name!r} is declared twice", t)
        self.inputs[name] = self.spanned(Param(name, self.type_()), t)

    def userfun_decl(self) -> None:
        self.next()
        t = self.name_tok("the user function's name")
        name = t.text
        if is_reserved(name) or name in OPENCL_RESERVED:
            raise self.error(f"{name!r} is a reserved word (of this syntax or of OpenCL C) "
                             "and cannot name a user function", t)
        if name in self.declared:
            raise self.error(f"user function {name!r} is declared twice", t)
        if name in self.inputs:
            raise self.error(f"{name!r} is already an input", t)
        self.expect("(", f" after 'userfun {name}'")
        params: list[str] = []
        types: list[Type] = []
        if not self.at(")"):
            while True:
                p = self.name_tok("a parameter name")
                if p.text in OPENCL_RESERVED:
                    raise self.error(f"{p.text!r} is a word of OpenCL C and cannot name a "
                                     "parameter of a user function; rename it", p)
                if p.text in params:
                    raise self.error(f"duplicate parameter {p.text!r}", p)
                params.append(p.text)
                self.expect(":", f" and the type of {p.text!r}")
                types.append(self.type_())
                if not self.at(","):
                    break
                self.next()
        self.expect(")")
        self.expect(":", " and the result type")
        out = self.type_()
        self.expect("=", " and the body (a C expression)")
        first = self.peek()
        if first.kind == "eof" or first.nl:
            raise self.error(f"user function {name!r} needs a body on the line of its "
                             "declaration", first)
        self.c_params, self.c_name, self.c_depth = tuple(params), name, 0
        src = self.c_expr()
        c_text = self.c_source(self.toks.index(first), self.i)
        fn = compile_py(len(params), src)
        self.userfuns[name] = UserFun(name, tuple(params), tuple(types), out,
                                      f"return {c_text};", fn)
        self.declared.add(name)

    # ------------------------------------------------------------------ terms
    def starts_term(self, t: Token) -> bool:
        if t.kind in ("int", "float"):
            return True
        if t.kind == "name":
            return t.text not in ("o", "in")
        return t.kind == "op" and t.text in ("(", "\\", "λ", "-")

    def as_fun(self, node: Node, tok: Token, where: str) -> FunDecl:
        if isinstance(node, FunDecl):
            return node
        if isinstance(node, Param):
            raise self.error(f"{node.name!r} is a parameter, not a function ({where})", tok)
        raise self.error(f"expected a function ({where}), found the expression "
                         f"{show(node, max_len=60)!r}", tok)

    def as_expr(self, node: Node, tok: Token, where: str) -> ExprNode:
        if isinstance(node, ExprNode):
            return node
        raise self.error(f"expected an expression ({where}), found the function "
                         f"{show(node, max_len=60)!r}; apply it with '$'", tok)

    @nested
    def term(self, fun: bool = False) -> Node:
        start = self.peek()
        left = self.comp(fun)
        if not self.at("$"):
            return left
        dollar = self.next()
        f = self.as_fun(left, start, "left of '$'")
        t = self.peek()
        if not self.starts_term(t):
            raise self.error(f"missing argument after '$' (found {self.describe(t)})", dollar)
        arg = self.as_expr(self.term(), t, "right of '$'")
        return self.spanned(FunCall(f, (arg,)), start)

    def comp(self, fun: bool = False) -> Node:
        start = self.peek()
        first = self.app(fun or self.at("o", 1))
        if not self.at("o"):
            return first
        items = [self.as_fun(first, start, "in a composition")]
        toks = [start]
        while self.at("o"):
            o = self.next()
            t = self.peek()
            if not self.starts_term(t):
                raise self.error(f"missing function after 'o' (found {self.describe(t)})", o)
            items.append(self.as_fun(self.app(True), t, "in a composition"))
            toks.append(t)
        return self.compose(items, toks)

    def app(self, fun: bool = False) -> Node:
        start = self.peek()
        node = self.atom(fun)
        while self.at("("):
            f = self.as_fun(node, start, "applied to arguments")
            node = self.spanned(FunCall(f, self.args()), start)
        return node

    def args(self) -> tuple[ExprNode, ...]:
        self.expect("(")
        if self.at(")"):
            raise self.error("empty argument list", self.peek())
        out = []
        while True:
            t = self.peek()
            out.append(self.as_expr(self.term(), t, "an argument"))
            if not self.at(","):
                break
            self.next()
        self.expect(")", " or ',' in the argument list")
        return tuple(out)

    def atom(self, fun: bool = False) -> Node:
        t = self.peek()
        node = self.atom_node(fun)
        self.spans.setdefault(id(node), (t.line, t.col))
        return node

    def atom_node(self, fun: bool) -> Node:
        t = self.peek()
        k = t.kind
        if k == "int":
            self.next()
            return Literal(int(t.text), Int)
        if k == "float":
            self.next()
            return Literal(float(t.text.rstrip("fF")), Float)
        if k == "op":
            if t.text == "(":
                self.next()
                inner = self.term(fun)
                if self.at(","):
                    raise self.error("a tuple is not an expression (use zip or a lambda with "
                                     "several parameters)", self.peek())
                self.expect(")")
                return inner
            if t.text in ("\\", "λ"):
                return self.lambda_()
            if t.text == "-" and self.peek(1).kind in ("int", "float"):
                v = self.number()
                return Literal(v, Int if isinstance(v, int) else Float)
            raise self.error(f"unexpected {self.describe(t)}; expected an expression or a "
                             "function", t)
        if k == "eof":
            raise self.error("unexpected end of input; expected an expression or a function", t)
        name = t.text
        if name == "let":
            return self.let_()
        if name == "_":
            return self.hole()
        p = self.scope.get(name) or self.inputs.get(name)
        if p is not None:
            self.next()
            return p
        kw = KEYWORDS.get(name)
        if kw is not None:
            self.next()
            return kw(self, t)
        uf = self.userfuns.get(name)
        if uf is not None:
            self.next()
            return uf
        if name.startswith("map"):
            self.next()
            return self.map_form(t)
        if name in WORDS:
            raise self.error(f"unexpected {name!r}; expected an expression or a function", t)
        raise self.unknown(t, fun)

    def unknown(self, t: Token, fun: bool) -> ParseError:
        name = t.text
        nxt = self.peek(1)
        if fun or (nxt.kind in ("op", "name") and nxt.text in ("(", "o", "$")):
            cands = sorted(set(KEYWORDS) | set(self.userfuns) | set(MAP_WORDS))
            close = difflib.get_close_matches(name, cands, 1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            return self.error(
                f"unknown function {name!r}{hint} (user functions: "
                f"{', '.join(sorted(self.userfuns))}; declare one with 'userfun {name}(x: float)"
                " : float = ...')", t)
        declared = list(self.inputs)
        close = difflib.get_close_matches(name, declared + list(self.scope), 1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        msg = f"undeclared parameter {name!r}{hint}; declared: {', '.join(declared) or 'none'}"
        if self.scope:
            msg += f"; lambda parameters in scope: {', '.join(self.scope)}"
        return self.error(msg, t)

    def fresh_param(self) -> Param:
        while True:
            p = fresh()
            if p.name not in self.idents:
                return p

    def compose(self, items: list[FunDecl], toks: list[Token] | None = None) -> Lambda:
        p = self.fresh_param()
        body: ExprNode = p
        for i in reversed(range(len(items))):
            body = FunCall(items[i], (body,))
            if toks:
                self.spanned(body, toks[i])
        out = Lambda((p,), body)
        if toks:
            self.spanned(out, toks[0])
            self.spanned(p, toks[-1])  # the composition's argument enters at its last function
        return out

    def bind(self, names: list[str], toks: list[Token]) -> tuple[tuple[Param, ...], dict]:
        saved = {n: self.scope.get(n) for n in names}
        params = tuple(self.spanned(Param(n), t) for n, t in zip(names, toks))
        for p in params:
            self.scope[p.name] = p
        return params, saved

    def unbind(self, saved: dict) -> None:
        restore_scope(self.scope, saved)

    def lambda_(self) -> Lambda:
        bs = self.next()
        names: list[str] = []
        toks: list[Token] = []
        while self.peek().kind == "name":
            t = self.peek()
            if names and (is_reserved(t.text) or t.text in self.userfuns):
                break  # reported as a missing '->'
            self.next()
            name = self.check_name(t, "a lambda parameter")
            if name in names:
                raise self.error(f"duplicate lambda parameter {name!r}", t)
            names.append(name)
            toks.append(t)
            if self.at(","):
                self.next()
        if not names:
            raise self.error("a lambda needs at least one parameter: \\x -> ...", bs)
        self.expect("->", " after the lambda parameters")
        params, saved = self.bind(names, toks)
        try:
            t = self.peek()
            body = self.as_expr(self.term(), t, "the lambda body")
        finally:
            self.unbind(saved)
        return self.spanned(Lambda(params, body), bs)

    def let_(self) -> FunCall:
        let = self.next()
        t = self.name_tok("a name after 'let'")
        name = self.check_name(t, "a let-bound value")
        self.expect("=", f" after 'let {name}'")
        vt = self.peek()
        value = self.as_expr(self.term(), vt, "the value of let")
        self.expect("in", f" after the value of 'let {name}'")
        params, saved = self.bind([name], [t])
        try:
            bt = self.peek()
            body = self.as_expr(self.term(), bt, "the body of let")
        finally:
            self.unbind(saved)
        return self.spanned(FunCall(self.spanned(Lambda(params, body), let), (value,)), let)

    def hole(self) -> Lambda:
        u = self.next()
        op = self.peek()
        if op.kind != "op" or op.text not in ("+", "*"):
            raise self.error("'_' starts a hole lambda: '_ + z' (add) or '_ * y' (mult)", u)
        self.next()
        fname = "add" if op.text == "+" else "mult"
        t = self.peek()
        operand = self.as_expr(self.app(), t, f"the operand of '_ {op.text}'")
        p = self.spanned(self.fresh_param(), u)
        return self.spanned(
            Lambda((p,), self.spanned(FunCall(self.userfuns[fname], (p, operand)), u)), u)


# --------------------------------------------------------------------- public parsing


def parse(text: str, *, userfuns: Mapping[str, UserFun] | None = None,
          spans: dict[int, tuple[int, int]] | None = None) -> Node:
    """Parse a program: with declarations a ``Lambda`` over the declared inputs, else the term.

    ``userfuns`` adds user functions by name (declarations in the text shadow them, they
    shadow the builtins). Raises ``ParseError`` with the line and column of the offending
    token. ``spans``, if given, receives ``id(node) -> (line, column)`` for every node of
    the program (valid while the returned program lives): where the construct that made it
    starts, so that a type error (``IRTypeError.node``) can point at what the user wrote.
    """
    p = _Parser(text, userfuns)
    program = p.program()
    if spans is not None:
        spans.update(p.spans)
    return program


def read_source(path: str | os.PathLike) -> str:
    """The text of a program file; ``NotUTF8Error`` (naming the file, the first bad byte,
    its line and column) if it is not UTF-8, ``ProgramFileError`` if it names no file or a
    folder. A UTF-8 byte order mark is dropped."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ProgramFileError(f"No such file: {os.fspath(path)} (give the path of a .lift "
                               f"program, or the program's text)") from None
    except IsADirectoryError:
        raise ProgramFileError(f"{os.fspath(path)} is a folder, not a program file: give the "
                               f"path of a .lift program") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        before = data[:e.start]
        line_start = before.rfind(b"\n") + 1
        column = len(before[line_start:].decode("utf-8", errors="replace")) + 1
        raise NotUTF8Error(os.fspath(path), before.count(b"\n") + 1, column,
                           data[e.start]) from None
    return text[1:] if text.startswith("\ufeff") else text


def parse_file(path: str | Path, *, userfuns: Mapping[str, UserFun] | None = None,
               spans: dict[int, tuple[int, int]] | None = None) -> Node:
    """Parse the program in a file (``ParseError`` messages name the file; see
    ``read_source`` for files that are not UTF-8 text)."""
    text = read_source(path)
    try:
        return parse(text, userfuns=userfuns, spans=spans)
    except ParseError as e:
        msg = getattr(e, "message", str(e))
        err = ParseError(f"{msg} (in {path})", e.line, e.column, e.source_line, path=str(path))
        err.message = msg
        raise err from None
