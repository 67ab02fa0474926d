r"""Text syntax of the IR: a hand-written parser and a printer.

The notation follows the CC'22 and GPGPU'20 papers (CC'22 Listing 3)::

    # X*y + z, multiplication double-tiled, addition single-tiled
    X : [float]N
    y : float
    z : float
    join o mapA(mapB(\e -> add(e, z)) o join o mapC(mapD(\e -> mult(e, y))) o split(s1))
      o split(s0) $ X

Grammar (EBNF: ``{x}`` repeats, ``[x]`` is optional; ``#`` starts a comment)::

    program  = {userfun | decl} term
    decl     = NAME ":" type                       (a program input, in order)
    userfun  = "userfun" NAME "(" [NAME ":" type {"," NAME ":" type}] ")" ":" type "=" cexpr
    type     = "float" | "int" | "float2" | "float4" | ... | "float" "<" size ">"
             | "[" type "]" sizeatom                (an array of sizeatom elements)
             | "(" ")" | "(" type "," ")" | "(" type {"," type} ")"   ((T) is just T)
    size     = sizeterm {("+" | "-") sizeterm}
    sizeterm = sizeunary {("*" | "/" | "//" | "%") sizeunary}     (/ exact, // floor)
    sizeunary= "-" sizeunary | sizeatom
    sizeatom = INT | NAME | "(" size ")" | ("min" | "max") "(" size "," size ")"
    term     = comp ["$" term]                     ($ is lowest and right-associative)
    comp     = app {"o" app}                       (f o g o h: h applied first)
    app      = atom {"(" term {"," term} ")"}      (application)
    atom     = NAME | NUMBER | "-" NUMBER | "(" term ")" | lambda | let | hole | keyword
    lambda   = ("\" | "λ") NAME {[","] NAME} "->" term   (the body extends to the right)
    let      = "let" NAME "=" term "in" term       (is (\NAME -> term) $ term)
    hole     = "_" ("+" | "*") app                 (_ + z is \e -> add(e, z); _ * y uses mult)

Keywords (function terms unless marked; ``s`` is a size, ``f`` a function term)::

    id  join  transpose  asScalar  zip  zip(a, b, ...)  split(s)  reorderStride(s)  asVector(s)
    slide(s, s)  slideStrict(s, s)  pad(s, s)  pad(s, s, NUMBER)  get(INT)
    map(f)  mapA(f)  mapSeq(f)  mapSeqD(f)  mapGlb(d)(f)  mapWrgA(d)(f)  mapLcl(d)(f)  (d: 0|1|2)
    reduce(f)  reduceSeq(f)  (applied to (init, array))  toGlobal(f)  toLocal(f)  toPrivate(f)
    vectorize(s, userfun)   value(NUMBER, type)  (an expression: a literal, an array when typed so)
    macros, expanded with ir.builders: mapND(n, f)  zipND(n)(a, b, ...)  joinND(n)
    slideND(n, (s1, ..), (st1, ..))  slideStrictND(...)  padND(n, ((l1, r1), ..) [, NUMBER])

A map label is ``[A-Z][A-Za-z0-9_]*`` not starting with Seq, Glb, Wrg or Lcl
(``mapND(f)`` with one argument is the map labelled ND). ``0.0``, ``0.0f``, ``1e-5`` are
float literals, ``2`` an int literal. Sizes become ``ir.sym`` expressions, so ``str(expr)``
parses back to an equal expression.

User functions are the builtins of ``ir.builders.USER_FUNS``, those given to :func:`parse`
and those declared in the text (a declaration shadows a builtin). A declared body ``cexpr``
is one C expression (``+ - * / %``, comparisons, ``&& || !``, ``c ? a : b``, calls of
``fmax fmin max min exp log sqrt fabs abs tanh sin cos pow floor ceil mad fma clamp dot``):
the OpenCL body is ``return cexpr;`` and its numpy translation (``f`` suffixes dropped) is
the interpreter's meaning. It ends at the end of its line (outside parentheses); elsewhere
newlines are free.

Names are resolved innermost first: lambda parameters, declared inputs, keywords, user
functions. Keywords, ``o``, ``let``, ``in``, ``userfun`` and user function names cannot
name parameters. A text with declarations parses to a ``Lambda`` over the declared inputs;
without declarations to the term itself (an expression, or a function term). A
composition builds the Lambda of ``ir.builders.compose`` with a fresh parameter whose
name occurs nowhere in the text.

The printer writes core nodes (macros appear expanded), compositions (a one-parameter
lambda whose body is a chain of at least two single-argument calls ending in the
parameter) as ``f o g``, single-argument calls as ``f $ x`` (``f(x)`` inside argument
lists and for user functions), one-parameter lambdas applied to a value as ``let``.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ir.builders import USER_FUNS, fresh, join_nd, map_nd, pad_nd, slide_nd, zip_nd
from ir.cwords import OPENCL_RESERVED
from ir.errors import ParseError
from ir.nodes import (
    PARALLEL_KINDS,
    AsScalar,
    AsVector,
    ExprNode,
    FunCall,
    FunDecl,
    Get,
    Id,
    Join,
    Lambda,
    Literal,
    Map,
    Node,
    Pad,
    Param,
    Reduce,
    ReorderStride,
    Slide,
    Split,
    ToMem,
    Transpose,
    UserFun,
    Vectorize,
    Zip,
    valid_label,
    walk,
)
from ir.sym import Cst, Expr, SymbolicError, Var, smax, smin
from ir.types import (
    SCALARS,
    ArrayType,
    Float,
    Int,
    ScalarType,
    TupleType,
    Type,
    VectorType,
    shape_of,
)

__all__ = [
    "parse",
    "parse_file",
    "parse_type",
    "parse_size",
    "show",
    "show_type",
    "print_program",
    "is_reserved",
]

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


class _Tok:
    """A token: kind is name, int, float, op or eof; ``nl`` when a newline precedes it."""

    __slots__ = ("kind", "text", "line", "col", "nl", "start", "end")

    def __init__(self, kind, text, line, col, nl, start, end):
        self.kind, self.text, self.line, self.col = kind, text, line, col
        self.nl, self.start, self.end = nl, start, end

    def __repr__(self) -> str:
        return f"_Tok({self.kind}, {self.text!r}, {self.line}:{self.col})"


def _error(msg: str, line: int, col: int, lines: list[str]) -> ParseError:
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    err = ParseError(msg, line, col, src)
    err.message = msg  # type: ignore[attr-defined]
    return err


def _tokenize(text: str, lines: list[str]) -> list[_Tok]:
    toks: list[_Tok] = []
    pos, line, line_start, nl = 0, 1, 0, False
    opened: list[_Tok] = []
    n = len(text)
    match = _TOKEN_RE.match
    while pos < n:
        mt = match(text, pos)
        if mt is None:
            raise _error(f"unexpected character {text[pos]!r}", line, pos - line_start + 1, lines)
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
                if kind == "int" and (len(s) > 19 or int(s) > _MAX_INT):
                    raise _error(f"integer {s[:12]}... has {len(s)} digits; integers are at "
                                 f"most {_MAX_INT} (2^63 - 1)", line, pos - line_start + 1,
                                 lines)
            tok = _Tok(kind, s, line, pos - line_start + 1, nl, pos, end)
            nl = False
            if kind == "op":
                if s in _OPEN:
                    opened.append(tok)
                elif s in _CLOSE:
                    if not opened:
                        raise _error(f"unbalanced parenthesis: {s!r} has no matching "
                                     f"{_CLOSE[s]!r}", tok.line, tok.col, lines)
                    o = opened.pop()
                    if _OPEN[o.text] != s:
                        raise _error(f"unbalanced parenthesis: {s!r} closes {o.text!r} opened "
                                     f"at line {o.line}, column {o.col}", tok.line, tok.col, lines)
            toks.append(tok)
        pos = end
    if opened:
        o = opened[-1]
        raise _error(f"unbalanced parenthesis: {o.text!r} is never closed", o.line, o.col, lines)
    toks.append(_Tok("eof", "", line, n - line_start + 1, nl, n, n))
    return toks


# ------------------------------------------------------------------- names, keywords

_MAP_RE = re.compile(r"map(Seq|Glb|Wrg|Lcl)?(\w*)")
_VEC_RE = re.compile(r"(float|int)(\d+)")
_WORDS = frozenset({"o", "let", "in", "userfun", "value", "_", "min", "max", "float", "int"})
_MAP_WORDS = ("map", "mapSeq", "mapGlb", "mapWrg", "mapLcl")
_WIDTHS = (1, 2, 3, 4, 8, 16)  # vector widths of OpenCL C (1: the scalar)
_MAX_INT = 2**63 - 1  # integer literals fit OpenCL's long


def is_reserved(name: str) -> bool:
    """True for words that cannot name a parameter: keywords, map forms, types, ``o``..."""
    if name in _WORDS or name in _KEYWORDS or _VEC_RE.fullmatch(name):
        return True
    m = _MAP_RE.fullmatch(name)
    return bool(m) and (not m[2] or valid_label(m[2]))


# ------------------------------------------------------------------- C expressions

_C_FUNS = {
    "fmax": ("np.maximum({0}, {1})", 2), "fmin": ("np.minimum({0}, {1})", 2),
    "max": ("np.maximum({0}, {1})", 2), "min": ("np.minimum({0}, {1})", 2),
    "exp": ("np.exp({0})", 1), "log": ("np.log({0})", 1), "sqrt": ("np.sqrt({0})", 1),
    "fabs": ("np.abs({0})", 1), "abs": ("np.abs({0})", 1), "tanh": ("np.tanh({0})", 1),
    "sin": ("np.sin({0})", 1), "cos": ("np.cos({0})", 1), "pow": ("np.power({0}, {1})", 2),
    "floor": ("np.floor({0})", 1), "ceil": ("np.ceil({0})", 1),
    "mad": ("({0} * {1} + {2})", 3), "fma": ("({0} * {1} + {2})", 3),
    "clamp": ("np.clip({0}, {1}, {2})", 3), "dot": ("_dot({0}, {1})", 2),
}
_C_CMP = ("<", ">", "<=", ">=", "==", "!=")


def _is_int(x) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, (int, np.integer)):
        return True
    return isinstance(x, np.ndarray) and x.dtype.kind in "iu"


def _cdiv(a, b):
    """C division: truncating for two integers, true division otherwise."""
    if _is_int(a) and _is_int(b):
        q = np.abs(a) // np.abs(b)
        return np.where((np.asarray(a) < 0) != (np.asarray(b) < 0), -q, q)
    return a / b


def _dot(a, b):
    return (np.asarray(a) * np.asarray(b)).sum(axis=-1)


def _fill(r, *args):
    """A constant result broadcast to the arguments' shape (element-wise meaning)."""
    if np.ndim(r) == 0 and args:
        shape = np.broadcast_shapes(*(np.shape(a) for a in args))
        if shape:
            return np.full(shape, r)
    return r


_PY_NS = {"np": np, "_cdiv": _cdiv, "_dot": _dot, "_fill": _fill, "__builtins__": {}}


def _compile_py(nparams: int, src: str):
    names = ", ".join(f"_a{i}" for i in range(nparams))
    return eval(f"lambda {names}: _fill({src}{', ' if names else ''}{names})", dict(_PY_NS))


# ------------------------------------------------------------------------- parser


# Deepest nesting the parser accepts (brackets, maps, lambdas, types, C and size
# expressions), and deepest expression tree a parsed program may have (a composition of n
# functions is n levels deep). The papers' convolution is 31 levels deep; the limits keep
# every recursive pass (type checker, printer, rules, lowering) far from Python's stack
# limit, so a too-deep program is a located ParseError instead of a RecursionError.
MAX_NESTING = 100
MAX_DEPTH = 200


def _nested(method):
    """Counts the parser's nesting around ``method``; past MAX_NESTING: a located error."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
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


def tree_depth(node: Node) -> int:
    """The depth of ``node``'s expression tree (computed without recursion)."""
    best, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        stack.extend((c, d + 1) for c in n.children())
    return best


class _Parser:
    def __init__(self, text: str, userfuns: Mapping[str, UserFun] | None = None):
        self.text = text
        self.lines = text.split("\n")
        self.toks = _tokenize(text, self.lines)
        self.i = 0
        self.idents = {t.text for t in self.toks if t.kind == "name"}
        self.userfuns: dict[str, UserFun] = dict(USER_FUNS)
        if userfuns:
            self.userfuns.update(userfuns)
        self.declared: set[str] = set()
        self.inputs: dict[str, Param] = {}
        self.scope: dict[str, Param] = {}
        self.c_depth = 0
        self.nest = 0
        self.c_params: tuple[str, ...] = ()
        self.c_name = ""

    # ------------------------------------------------------------ token helpers
    def peek(self, k: int = 0) -> _Tok:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else self.toks[-1]

    def next(self) -> _Tok:
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t.text == text and (t.kind == "op" or t.kind == "name")

    def error(self, msg: str, tok: _Tok) -> ParseError:
        return _error(msg, tok.line, tok.col, self.lines)

    @staticmethod
    def describe(t: _Tok) -> str:
        return "the end of the input" if t.kind == "eof" else repr(t.text)

    def expect(self, text: str, hint: str = "") -> _Tok:
        if not self.at(text):
            t = self.peek()
            raise self.error(f"expected {text!r}{hint}, found {self.describe(t)}", t)
        return self.next()

    def name_tok(self, what: str) -> _Tok:
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

    def check_name(self, t: _Tok, what: str) -> str:
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
            return Lambda(tuple(self.inputs.values()), term)
        return term

    def input_decl(self) -> None:
        t = self.next()
        self.next()  # ':'
        name = self.check_name(t, "an input")
        if name in self.inputs:
            raise self.error(f"input {name!r} is declared twice", t)
        self.inputs[name] = Param(name, self.type_())

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
        fn = _compile_py(len(params), src)
        self.userfuns[name] = UserFun(name, tuple(params), tuple(types), out,
                                      f"return {c_text};", fn)
        self.declared.add(name)

    # ----------------------------------------------------------------- C bodies
    def c_source(self, a: int, b: int) -> str:
        """The C text of tokens ``a..b-1`` as written, comments and line breaks between
        them replaced by one space (a ``#`` comment must not reach the OpenCL source)."""
        out = [self.toks[a].text]
        for j in range(a + 1, b):
            prev, t = self.toks[j - 1], self.toks[j]
            out.append((" " if t.start > prev.end else "") + t.text)
        return "".join(out)

    def c_peek(self) -> _Tok:
        t = self.peek()
        if self.c_depth == 0 and t.nl:
            return self.toks[-1]
        return t

    def c_at(self, text: str) -> bool:
        t = self.c_peek()
        return t.kind == "op" and t.text == text

    def c_expr(self) -> str:
        c = self.c_or()
        if self.c_at("?"):
            self.next()
            self.c_depth += 1
            a = self.c_expr()
            self.expect(":", " in the conditional expression")
            self.c_depth -= 1
            b = self.c_expr()
            return f"np.where({c}, {a}, {b})"
        return c

    def c_or(self) -> str:
        left = self.c_and()
        while self.c_at("||"):
            self.next()
            left = f"np.logical_or({left}, {self.c_and()})"
        return left

    def c_and(self) -> str:
        left = self.c_cmp()
        while self.c_at("&&"):
            self.next()
            left = f"np.logical_and({left}, {self.c_cmp()})"
        return left

    def c_cmp(self) -> str:
        left = self.c_sum()
        t = self.c_peek()
        if t.kind == "op" and t.text in _C_CMP:
            self.next()
            return f"({left} {t.text} {self.c_sum()})"
        return left

    def c_sum(self) -> str:
        left = self.c_prod()
        while self.c_at("+") or self.c_at("-"):
            op = self.next().text
            left = f"({left} {op} {self.c_prod()})"
        return left

    def c_prod(self) -> str:
        left = self.c_unary()
        while self.c_at("*") or self.c_at("/") or self.c_at("%"):
            op = self.next().text
            right = self.c_unary()
            if op == "*":
                left = f"({left} * {right})"
            elif op == "/":
                left = f"_cdiv({left}, {right})"
            else:
                left = f"np.fmod({left}, {right})"
        return left

    @_nested
    def c_unary(self) -> str:
        if self.c_at("-"):
            self.next()
            return f"(-{self.c_unary()})"
        if self.c_at("+"):
            self.next()
            return self.c_unary()
        if self.c_at("!"):
            self.next()
            return f"np.logical_not({self.c_unary()})"
        return self.c_primary()

    def c_primary(self) -> str:
        t = self.c_peek()
        if t.kind == "int":
            self.next()
            return str(int(t.text))
        if t.kind == "float":
            self.next()
            return repr(float(t.text.rstrip("fF")))
        if t.kind == "op" and t.text == "(":
            self.next()
            self.c_depth += 1
            e = self.c_expr()
            self.expect(")")
            self.c_depth -= 1
            return f"({e})"
        if t.kind == "name":
            self.next()
            if self.c_at("("):
                if t.text not in _C_FUNS:
                    raise self.error(
                        f"unknown C function {t.text!r} in user function {self.c_name!r}; "
                        f"supported: {', '.join(sorted(_C_FUNS))}", t)
                template, arity = _C_FUNS[t.text]
                self.next()
                self.c_depth += 1
                args = [self.c_expr()]
                while self.c_at(","):
                    self.next()
                    args.append(self.c_expr())
                self.expect(")")
                self.c_depth -= 1
                if len(args) != arity:
                    raise self.error(f"{t.text} takes {arity} argument(s), given {len(args)}", t)
                return template.format(*args)
            if t.text in self.c_params:
                return f"_a{self.c_params.index(t.text)}"
            raise self.error(f"unknown name {t.text!r} in the body of user function "
                             f"{self.c_name!r} (parameters: {', '.join(self.c_params) or 'none'})",
                             t)
        if t is self.toks[-1]:
            raise self.error(f"the body of user function {self.c_name!r} ends too early",
                             self.toks[self.i - 1])
        raise self.error(f"expected a C expression in user function {self.c_name!r}, found "
                         f"{self.describe(t)}", t)

    # ------------------------------------------------------------------ types
    @_nested
    def type_(self) -> Type:
        t = self.peek()
        if t.kind == "name":
            name = t.text
            if name in SCALARS:
                self.next()
                if self.at("<") and not self.peek().nl:
                    self.next()
                    wt = self.peek()
                    w = self.size()
                    self.expect(">", " to close the vector width")
                    if w.is_const and w.as_int() not in _WIDTHS:
                        raise self.error(f"vector width {w} is not one of OpenCL's widths "
                                         f"{', '.join(map(str, _WIDTHS))}", wt)
                    return VectorType(SCALARS[name], w)
                return SCALARS[name]
            m = _VEC_RE.fullmatch(name)
            if m:
                if int(m[2]) not in _WIDTHS[1:]:
                    raise self.error(f"{name!r}: OpenCL vector types have 2, 3, 4, 8 or 16 "
                                     "lanes", t)
                self.next()
                return VectorType(SCALARS[m[1]], int(m[2]))
            close = difflib.get_close_matches(name, ["float", "int", "float4"], 1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self.error(f"unknown type {name!r}{hint} (types: float, int, float2/4/8/16, "
                             "float<v>, [T]n, (T, U))", t)
        if self.at("["):
            self.next()
            elem = self.type_()
            self.expect("]", " to close the array type")
            return ArrayType(elem, self.size_atom(" (the array length)"))
        if self.at("("):
            self.next()
            if self.at(")"):
                self.next()
                return TupleType(())
            elems = [self.type_()]
            trailing = False
            while self.at(","):
                self.next()
                if self.at(")"):
                    trailing = True
                    break
                elems.append(self.type_())
            self.expect(")", " to close the tuple type")
            if len(elems) == 1 and not trailing:
                return elems[0]
            return TupleType(tuple(elems))
        raise self.error(f"expected a type, found {self.describe(t)}", t)

    # ------------------------------------------------------------------ sizes
    def size(self) -> Expr:
        e = self.size_term()
        while self.at("+") or self.at("-"):
            op = self.next()
            r = self.size_term()
            e = self.arith(op, e, r)
        return e

    def size_term(self) -> Expr:
        e = self.size_unary()
        while self.peek().kind == "op" and self.peek().text in ("*", "/", "//", "%"):
            op = self.next()
            e = self.arith(op, e, self.size_unary())
        return e

    def arith(self, op: _Tok, a: Expr, b: Expr) -> Expr:
        try:
            if op.text == "+":
                return a + b
            if op.text == "-":
                return a - b
            if op.text == "*":
                return a * b
            if op.text == "/":
                return a / b
            if op.text == "//":
                return a // b
            return a % b
        except (SymbolicError, ZeroDivisionError) as ex:
            raise self.error(f"bad size expression: {ex}", op) from None

    @_nested
    def size_unary(self) -> Expr:
        if self.at("-"):
            self.next()
            return -self.size_unary()
        if self.at("+"):
            self.next()
            return self.size_unary()
        return self.size_atom()

    def size_atom(self, what: str = "") -> Expr:
        t = self.peek()
        if t.kind == "int":
            self.next()
            return Cst(int(t.text))
        if t.kind == "name":
            if t.text in ("min", "max") and self.at("(", 1):
                self.next()
                self.next()
                a = self.size()
                self.expect(",", f" between the arguments of {t.text}")
                b = self.size()
                self.expect(")")
                return smin(a, b) if t.text == "min" else smax(a, b)
            if t.text in ("min", "max"):
                raise self.error(f"{t.text} needs two arguments: {t.text}(a, b)", t)
            self.next()
            return Var(t.text)
        if self.at("("):
            self.next()
            e = self.size()
            self.expect(")", " to close the size expression")
            return e
        if t.kind == "float":
            raise self.error(f"sizes are integers, found {t.text!r}", t)
        raise self.error(f"expected a size{what} (an integer, a name or a parenthesised size "
                         f"expression), found {self.describe(t)}", t)

    # ------------------------------------------------------------------ terms
    def starts_term(self, t: _Tok) -> bool:
        if t.kind in ("int", "float"):
            return True
        if t.kind == "name":
            return t.text not in ("o", "in")
        return t.kind == "op" and t.text in ("(", "\\", "λ", "-")

    def as_fun(self, node: Node, tok: _Tok, where: str) -> FunDecl:
        if isinstance(node, FunDecl):
            return node
        if isinstance(node, Param):
            raise self.error(f"{node.name!r} is a parameter, not a function ({where})", tok)
        raise self.error(f"expected a function ({where}), found the expression "
                         f"{show(node, max_len=60)!r}", tok)

    def as_expr(self, node: Node, tok: _Tok, where: str) -> ExprNode:
        if isinstance(node, ExprNode):
            return node
        raise self.error(f"expected an expression ({where}), found the function "
                         f"{show(node, max_len=60)!r}; apply it with '$'", tok)

    @_nested
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
        return FunCall(f, (arg,))

    def comp(self, fun: bool = False) -> Node:
        start = self.peek()
        first = self.app(fun or self.at("o", 1))
        if not self.at("o"):
            return first
        items = [self.as_fun(first, start, "in a composition")]
        while self.at("o"):
            o = self.next()
            t = self.peek()
            if not self.starts_term(t):
                raise self.error(f"missing function after 'o' (found {self.describe(t)})", o)
            items.append(self.as_fun(self.app(True), t, "in a composition"))
        return self.compose(items)

    def app(self, fun: bool = False) -> Node:
        start = self.peek()
        node = self.atom(fun)
        while self.at("("):
            f = self.as_fun(node, start, "applied to arguments")
            node = FunCall(f, self.args())
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

    def fun_arg(self, head: _Tok) -> FunDecl:
        self.expect("(", f" and a function after {head.text!r}")
        t = self.peek()
        f = self.as_fun(self.term(True), t, f"the argument of {head.text}")
        self.expect(")", f" to close {head.text}(...)")
        return f

    def atom(self, fun: bool = False) -> Node:
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
        kw = _KEYWORDS.get(name)
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
        if name in _WORDS:
            raise self.error(f"unexpected {name!r}; expected an expression or a function", t)
        raise self.unknown(t, fun)

    def unknown(self, t: _Tok, fun: bool) -> ParseError:
        name = t.text
        nxt = self.peek(1)
        if fun or (nxt.kind in ("op", "name") and nxt.text in ("(", "o", "$")):
            cands = sorted(set(_KEYWORDS) | set(self.userfuns) | set(_MAP_WORDS))
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

    def compose(self, items: list[FunDecl]) -> Lambda:
        p = self.fresh_param()
        body: ExprNode = p
        for f in reversed(items):
            body = FunCall(f, (body,))
        return Lambda((p,), body)

    def bind(self, names: list[str]) -> tuple[tuple[Param, ...], dict]:
        saved = {n: self.scope.get(n) for n in names}
        params = tuple(Param(n) for n in names)
        for p in params:
            self.scope[p.name] = p
        return params, saved

    def unbind(self, saved: dict) -> None:
        for n, old in saved.items():
            if old is None:
                self.scope.pop(n, None)
            else:
                self.scope[n] = old

    def lambda_(self) -> Lambda:
        bs = self.next()
        names: list[str] = []
        while self.peek().kind == "name":
            t = self.peek()
            if names and (is_reserved(t.text) or t.text in self.userfuns):
                break  # reported as a missing '->'
            self.next()
            name = self.check_name(t, "a lambda parameter")
            if name in names:
                raise self.error(f"duplicate lambda parameter {name!r}", t)
            names.append(name)
            if self.at(","):
                self.next()
        if not names:
            raise self.error("a lambda needs at least one parameter: \\x -> ...", bs)
        self.expect("->", " after the lambda parameters")
        params, saved = self.bind(names)
        try:
            t = self.peek()
            body = self.as_expr(self.term(), t, "the lambda body")
        finally:
            self.unbind(saved)
        return Lambda(params, body)

    def let_(self) -> FunCall:
        self.next()
        t = self.name_tok("a name after 'let'")
        name = self.check_name(t, "a let-bound value")
        self.expect("=", f" after 'let {name}'")
        vt = self.peek()
        value = self.as_expr(self.term(), vt, "the value of let")
        self.expect("in", f" after the value of 'let {name}'")
        params, saved = self.bind([name])
        try:
            bt = self.peek()
            body = self.as_expr(self.term(), bt, "the body of let")
        finally:
            self.unbind(saved)
        return FunCall(Lambda(params, body), (value,))

    def hole(self) -> Lambda:
        u = self.next()
        op = self.peek()
        if op.kind != "op" or op.text not in ("+", "*"):
            raise self.error("'_' starts a hole lambda: '_ + z' (add) or '_ * y' (mult)", u)
        self.next()
        fname = "add" if op.text == "+" else "mult"
        t = self.peek()
        operand = self.as_expr(self.app(), t, f"the operand of '_ {op.text}'")
        p = self.fresh_param()
        return Lambda((p,), FunCall(self.userfuns[fname], (p, operand)))

    # --------------------------------------------------------------- keywords
    def sizes_in_parens(self, head: _Tok, n: int) -> list[Expr]:
        self.expect("(", f" after {head.text!r}")
        out = [self.size()]
        while self.at(","):
            self.next()
            out.append(self.size())
        self.expect(")", f" to close {head.text}(...)")
        if len(out) != n:
            raise self.error(f"{head.text} takes {n} size argument(s), given {len(out)}", head)
        return out

    def map_form(self, t: _Tok) -> Map:
        m = _MAP_RE.fullmatch(t.text)
        if m is None:
            raise self.error(f"bad map name {t.text!r}", t)
        kind = "map" + (m[1] or "")
        label = m[2] or None
        if label is not None and not valid_label(label):
            raise self.error(
                f"bad map label {label!r} in {t.text!r}: a label starts with an upper-case "
                "letter, continues with letters, digits or '_', and does not start with Seq, "
                "Glb, Wrg or Lcl", t)
        dim = None
        if kind in PARALLEL_KINDS:
            if not self.at("("):
                raise self.error(f"{kind} needs a dimension: {t.text}(0)(f)", t)
            self.next()
            d = self.peek()
            dim = self.int_tok(f"the dimension of {t.text}")
            if dim not in (0, 1, 2):
                raise self.error(f"the dimension of {kind} must be 0, 1 or 2, not {dim}", d)
            self.expect(")")
        elif self.at("(") and self.peek(1).kind == "int" and self.at(")", 2):
            raise self.error(f"{kind} takes no dimension: {t.text}(f)", self.peek(1))
        return Map(self.fun_arg(t), kind, dim, label)

    def kw_nullary(self, t: _Tok) -> FunDecl:
        return {"join": Join, "transpose": Transpose, "asScalar": AsScalar, "id": Id}[t.text]()

    def kw_zip(self, t: _Tok) -> Node:
        if self.at("("):
            args = self.args()
            return FunCall(Zip(len(args)), args)
        return Zip(2)

    def kw_sized(self, t: _Tok) -> FunDecl:
        (s,) = self.sizes_in_parens(t, 1)
        return {"split": Split, "reorderStride": ReorderStride, "asVector": AsVector}[t.text](s)

    def kw_slide(self, t: _Tok) -> FunDecl:
        size, step = self.sizes_in_parens(t, 2)
        return Slide(size, step, t.text == "slideStrict")

    def kw_pad(self, t: _Tok) -> FunDecl:
        self.expect("(", " after 'pad'")
        left = self.size()
        self.expect(",", " between the arguments of pad")
        right = self.size()
        value = 0.0
        if self.at(","):
            self.next()
            value = float(self.number())
        self.expect(")", " to close pad(...)")
        return Pad(left, right, value)

    def kw_get(self, t: _Tok) -> FunDecl:
        self.expect("(", " after 'get'")
        i = self.int_tok("the tuple index")
        self.expect(")")
        return Get(i)

    def kw_funarg(self, t: _Tok) -> FunDecl:
        f = self.fun_arg(t)
        if t.text in ("reduce", "reduceSeq"):
            return Reduce(f, t.text)
        return ToMem(f, {"toGlobal": "global", "toLocal": "local", "toPrivate": "private"}[t.text])

    def kw_vectorize(self, t: _Tok) -> FunDecl:
        self.expect("(", " after 'vectorize'")
        w = self.size()
        self.expect(",", " between the width and the function of vectorize")
        ft = self.peek()
        f = self.as_fun(self.term(True), ft, "the function of vectorize")
        if not isinstance(f, UserFun):
            raise self.error("vectorize takes a user function", ft)
        self.expect(")")
        return Vectorize(w, f)

    def kw_value(self, t: _Tok) -> Literal:
        self.expect("(", " after 'value': value(0.0, [float]N)")
        v = self.number()
        self.expect(",", " and the type of the literal")
        ty = self.type_()
        self.expect(")")
        _, inner = shape_of(ty)
        if isinstance(inner, VectorType):
            inner = inner.elem
        if inner == Float:
            v = float(v)
        return Literal(v, ty)

    def macro_n(self, t: _Tok) -> int:
        nt = self.peek()
        n = self.int_tok(f"the number of dimensions of {t.text}")
        if n < 1:
            raise self.error(f"{t.text} needs at least 1 dimension", nt)
        return n

    def kw_mapND(self, t: _Tok) -> FunDecl:  # noqa: N802
        if not (self.at("(") and self.peek(1).kind == "int" and self.at(",", 2)):
            return self.map_form(t)  # the map labelled ND
        self.next()
        n = self.macro_n(t)
        self.next()
        ft = self.peek()
        f = self.as_fun(self.term(True), ft, "the function of mapND")
        self.expect(")", " to close mapND(n, f)")
        return map_nd(n, f)

    def kw_zipND(self, t: _Tok) -> ExprNode:  # noqa: N802
        self.expect("(", " after 'zipND': zipND(n)(a, b)")
        n = self.macro_n(t)
        self.expect(")")
        if not self.at("("):
            raise self.error("zipND(n) must be applied to arrays: zipND(n)(a, b)", self.peek())
        return zip_nd(n, *self.args())

    def kw_joinND(self, t: _Tok) -> FunDecl:  # noqa: N802
        self.expect("(", " after 'joinND': joinND(n)")
        n = self.macro_n(t)
        self.expect(")")
        return join_nd(n)

    def size_tuple(self) -> list[Expr]:
        if self.at("("):
            save = self.i
            self.next()
            first = self.size()
            if self.at(","):
                out = [first]
                while self.at(","):
                    self.next()
                    out.append(self.size())
                self.expect(")")
                return out
            self.i = save
        return [self.size()]

    def kw_slideND(self, t: _Tok) -> FunDecl:  # noqa: N802
        self.expect("(", f" after {t.text!r}: {t.text}(2, (s1, s2), (st1, st2))")
        n = self.macro_n(t)
        self.expect(",")
        st = self.peek()
        sizes = self.size_tuple()
        self.expect(",", " and the steps")
        steps = self.size_tuple()
        self.expect(")")
        if len(sizes) != n or len(steps) != n:
            raise self.error(f"{t.text}({n}, ...) needs {n} sizes and {n} steps", st)
        return slide_nd(n, sizes, steps, t.text == "slideStrictND")

    def kw_padND(self, t: _Tok) -> FunDecl:  # noqa: N802
        self.expect("(", " after 'padND': padND(2, ((l1, r1), (l2, r2)))")
        n = self.macro_n(t)
        self.expect(",")
        pt = self.expect("(", " opening the (left, right) pairs: ((l1, r1), (l2, r2))")
        pairs = []
        while True:
            self.expect("(", " opening a (left, right) pair")
            a = self.size()
            self.expect(",")
            b = self.size()
            self.expect(")")
            pairs.append((a, b))
            if not self.at(","):
                break
            self.next()
        self.expect(")")
        value = 0.0
        if self.at(","):
            self.next()
            value = float(self.number())
        self.expect(")")
        if len(pairs) != n:
            raise self.error(f"padND({n}, ...) needs {n} (left, right) pairs", pt)
        return pad_nd(n, pairs, value)


_KEYWORDS = {
    "join": _Parser.kw_nullary, "transpose": _Parser.kw_nullary,
    "asScalar": _Parser.kw_nullary, "id": _Parser.kw_nullary, "zip": _Parser.kw_zip,
    "split": _Parser.kw_sized, "reorderStride": _Parser.kw_sized, "asVector": _Parser.kw_sized,
    "slide": _Parser.kw_slide, "slideStrict": _Parser.kw_slide, "pad": _Parser.kw_pad,
    "get": _Parser.kw_get, "reduce": _Parser.kw_funarg, "reduceSeq": _Parser.kw_funarg,
    "toGlobal": _Parser.kw_funarg, "toLocal": _Parser.kw_funarg,
    "toPrivate": _Parser.kw_funarg, "vectorize": _Parser.kw_vectorize,
    "value": _Parser.kw_value, "mapND": _Parser.kw_mapND, "zipND": _Parser.kw_zipND,
    "joinND": _Parser.kw_joinND, "slideND": _Parser.kw_slideND,
    "slideStrictND": _Parser.kw_slideND, "padND": _Parser.kw_padND,
}


# --------------------------------------------------------------------- public parsing


def userfun_from_c(name: str, param_names, in_types, out_type, c_body: str) -> UserFun:
    """A user function from its C body ``return <expr>;`` (its numpy meaning derived from the
    expression, as for declarations in program files)."""
    m = _RETURN_RE.fullmatch(c_body)
    if not m:
        raise ValueError(f"user function {name!r}: cannot derive a meaning from the C body "
                         f"{c_body!r} (expected 'return <expression>;')")
    params = ", ".join(f"{p}: {show_type(t)}" for p, t in zip(param_names, in_types))
    args = ", ".join(param_names)
    text = (f"userfun {name}({params}) : {show_type(out_type)} = {m.group(1)}\n"
            f"\\{' '.join(param_names) or 'u'} -> {name}({args})")
    for n in walk(parse(text)):
        if isinstance(n, UserFun) and n.name == name:
            return n
    raise ValueError(f"user function {name!r} could not be rebuilt")


def parse(text: str, *, userfuns: Mapping[str, UserFun] | None = None) -> Node:
    """Parse a program: with declarations a ``Lambda`` over the declared inputs, else the term.

    ``userfuns`` adds user functions by name (declarations in the text shadow them, they
    shadow the builtins). Raises ``ParseError`` with the line and column of the offending
    token.
    """
    return _Parser(text, userfuns).program()


def parse_file(path: str | Path, *, userfuns: Mapping[str, UserFun] | None = None) -> Node:
    """Parse the program in a file (``ParseError`` messages name the file)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        return parse(text, userfuns=userfuns)
    except ParseError as e:
        msg = getattr(e, "message", str(e))
        err = ParseError(f"{msg} (in {path})", e.line, e.column, e.source_line)
        err.message = msg  # type: ignore[attr-defined]
        err.path = str(path)  # type: ignore[attr-defined]
        raise err from None


def _parse_whole(text: str, method):
    p = _Parser(text)
    out = method(p)
    t = p.peek()
    if t.kind != "eof":
        raise p.error(f"unexpected {p.describe(t)} after the end", t)
    return out


def parse_type(text: str) -> Type:
    """Parse a type: ``[[float]M](N/s)``, ``float4``, ``float<v>``, ``(float, int)``."""
    return _parse_whole(text, _Parser.type_)


def parse_size(text: str) -> Expr:
    """Parse a size expression (``N/s`` exact, ``(N + 2)//4`` floor, ``min(a, b)``...)."""
    return _parse_whole(text, _Parser.size)


# ------------------------------------------------------------------------ documents
# A small Wadler/Lindig pretty printer: a document is a str, a list (concatenation),
# a _Group (laid out flat when it fits), a _Nest (indents its line breaks) or a _Br.


class _Br:
    __slots__ = ("flat",)

    def __init__(self, flat: str):
        self.flat = flat


class _Group:
    __slots__ = ("doc",)

    def __init__(self, doc):
        self.doc = doc


class _Nest:
    __slots__ = ("indent", "doc")

    def __init__(self, indent: int, doc):
        self.indent, self.doc = indent, doc


_LINE = _Br(" ")
_SOFT = _Br("")


def _fits(w: int, doc, rest: list) -> bool:
    todo = [(True, doc)]
    ri = len(rest)
    while w >= 0:
        if not todo:
            if ri == 0:
                return True
            ri -= 1
            _, flat, d = rest[ri]
            todo.append((flat, d))
            continue
        flat, d = todo.pop()
        if type(d) is str:
            w -= len(d)
        elif type(d) is list:
            todo.extend((flat, x) for x in reversed(d))
        elif type(d) is _Br:
            if not flat:
                return True
            w -= len(d.flat)
        else:
            todo.append((flat, d.doc))
    return False


def _render(doc, width: int | None) -> str:
    out: list[str] = []
    col = 0
    stack = [(0, width is None, doc)]
    while stack:
        ind, flat, d = stack.pop()
        if type(d) is str:
            out.append(d)
            col += len(d)
        elif type(d) is list:
            stack.extend((ind, flat, x) for x in reversed(d))
        elif type(d) is _Br:
            if flat:
                out.append(d.flat)
                col += len(d.flat)
            else:
                out.append("\n" + " " * ind)
                col = ind
        elif type(d) is _Nest:
            stack.append((ind + d.indent, flat, d.doc))
        else:
            stack.append((ind, flat or _fits(width - col, d.doc, stack), d.doc))  # type: ignore[operator]
    return "".join(out)


def _join(docs: list, sep: list) -> list:
    out: list = []
    for i, d in enumerate(docs):
        if i:
            out.extend(sep)
        out.append(d)
    return out


def _parens(items: list) -> _Group:
    return _Group(["(", _Nest(2, [_SOFT, *_join(items, [",", _LINE])]), _SOFT, ")"])


# -------------------------------------------------------------------------- printer

_TOP, _ARG, _LETV = 0, 1, 2  # expression contexts
_FTOP, _FCOMP, _FAPP = 0, 1, 2  # function-term contexts


def show_type(t: Type) -> str:
    """The text of a type, parseable by :func:`parse_type` (``[float](N/s)``, ``(float,)``)."""
    if isinstance(t, ScalarType):
        return t.name
    if isinstance(t, VectorType):
        w = t.width
        if w.is_const and w.as_int() >= 0:
            return f"{t.elem.name}{w.as_int()}"
        return f"{t.elem.name}<{w}>"
    if isinstance(t, ArrayType):
        return f"[{show_type(t.elem)}]{_size_atom_text(t.size)}"
    if isinstance(t, TupleType):
        if len(t.elems) == 1:
            return f"({show_type(t.elems[0])},)"
        return "(" + ", ".join(show_type(e) for e in t.elems) + ")"
    return str(t)


def _size_atom_text(e: Expr) -> str:
    s = str(e)
    if (e.is_const and e.as_int() >= 0) or e.is_var:
        return s
    return f"({s})"


def _fmt_float(v) -> str:
    return repr(float(v))


def _literal_text(e: Literal) -> str:
    v, t = e.value, e.type
    is_num = isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == Float and is_num:
        return _fmt_float(v)
    if t == Int and isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    num = _fmt_float(v) if isinstance(v, float) else str(v)
    return f"value({num}, {show_type(t)})"


_BASE_RE = re.compile(r"^(.*?)_\d+$")


class _Printer:
    def __init__(self, rename: bool, avoid: frozenset[str] = frozenset()):
        self.rename = rename
        self.avoid = avoid
        self.fv_memo: dict[int, frozenset[str]] = {}
        self.env: dict[str, str] = {}

    # --------------------------------------------------------- free variables
    def fv(self, root: Node) -> frozenset[str]:
        """Names of the parameters free in ``root`` (iterative: chains can be deep)."""
        memo = self.fv_memo
        r = memo.get(id(root))
        if r is not None:
            return r
        stack = [(root, False)]
        while stack:
            n, ready = stack.pop()
            k = id(n)
            if k in memo:
                continue
            if isinstance(n, Param):
                memo[k] = frozenset((n.name,))
                continue
            if not isinstance(n, Node) or isinstance(n, (UserFun, Literal)):
                memo[k] = frozenset()
                continue
            kids = list(n.children())
            if not ready:
                stack.append((n, True))
                stack.extend((c, False) for c in kids if id(c) not in memo)
                continue
            r = frozenset().union(*(memo[id(c)] for c in kids))
            if isinstance(n, Lambda):
                r = r - {p.name for p in n.params}
            memo[k] = r
        return memo[id(root)]

    def chain(self, f: Node) -> list[FunDecl] | None:
        """The functions of a composition ``f1 o f2 o ... `` (None if ``f`` is not one)."""
        if not isinstance(f, Lambda) or len(f.params) != 1:
            return None
        p = f.params[0]
        out: list[FunDecl] = []
        e = f.body
        while isinstance(e, FunCall) and len(e.args) == 1:
            out.append(e.f)
            e = e.args[0]
        if len(out) < 2 or not (isinstance(e, Param) and e.name == p.name):
            return None
        if any(p.name in self.fv(g) for g in out):
            return None
        return out

    # ---------------------------------------------------------------- naming
    def bind(self, params: tuple[Param, ...], body: Node) -> tuple[list[str], dict]:
        saved = {p.name: self.env.get(p.name) for p in params}
        names: list[str] = []
        if self.rename:
            own = {p.name for p in params}
            used = {self.env.get(v, v) for v in self.fv(body) if v not in own}
            used.update(self.env.values())  # no shadowing: easier to read
            for p in params:
                m = _BASE_RE.match(p.name)
                base = m[1] if m and m[1] else p.name
                if not base.isidentifier():
                    base = "x"
                cand, i = base, 2
                while cand in used or cand in names or cand in self.avoid or is_reserved(cand):
                    cand, i = f"{base}{i}", i + 1
                names.append(cand)
        else:
            names = [p.name for p in params]
        for p, nm in zip(params, names):
            self.env[p.name] = nm
        return names, saved

    def unbind(self, saved: dict) -> None:
        for k, v in saved.items():
            if v is None:
                self.env.pop(k, None)
            else:
                self.env[k] = v

    # ------------------------------------------------------------ expressions
    def term(self, n: Node):
        if isinstance(n, FunDecl):
            return self.fun(n, _FTOP)
        return self.expr(n, _TOP)

    def expr(self, e: Node, ctx: int):
        if isinstance(e, Param):
            return self.env.get(e.name, e.name)
        if isinstance(e, Literal):
            return _literal_text(e)
        if isinstance(e, FunCall):
            return self.call(e, ctx)
        if isinstance(e, FunDecl):
            return ["(", self.fun(e, _FTOP), ")"]
        return f"<{type(e).__name__}>"

    def arglist(self, args) -> _Group:
        return _parens([self.expr(a, _ARG) for a in args])

    def call(self, e: FunCall, ctx: int):
        f, args = e.f, e.args
        if isinstance(f, Zip):
            return ["zip", self.arglist(args)]
        if len(args) != 1 or isinstance(f, (UserFun, Vectorize)):
            return [self.fun(f, _FAPP), self.arglist(args)]
        a = args[0]
        rctx = _LETV if ctx == _LETV else _TOP
        if isinstance(f, Lambda):
            chain = self.chain(f)
            if chain is not None:
                return self.dollar(self.chain_doc(chain), a, rctx)
            if len(f.params) == 1:
                d = self.let_doc(f, a)
                return ["(", d, ")"] if ctx == _LETV else d
            return [self.fun(f, _FAPP), self.arglist(args)]
        if ctx == _ARG:
            return [self.fun(f, _FAPP), self.arglist(args)]
        return self.dollar(self.fun(f, _FCOMP), a, rctx)

    def dollar(self, fdoc, a: ExprNode, rctx: int):
        if isinstance(a, (Param, Literal)):
            return [fdoc, " $ ", self.expr(a, rctx)]
        return _Group([fdoc, " $", _LINE, self.expr(a, rctx)])

    def let_doc(self, lam: Lambda, value: ExprNode):
        vd = self.expr(value, _LETV)
        names, saved = self.bind(lam.params, lam.body)
        bd = self.expr(lam.body, _TOP)
        self.unbind(saved)
        return _Group(["let ", names[0], " = ", _Nest(4, vd), _LINE, "in ", bd])

    def lambda_doc(self, lam: Lambda):
        names, saved = self.bind(lam.params, lam.body)
        bd = self.expr(lam.body, _TOP)
        self.unbind(saved)
        return _Group(["\\", " ".join(names), " ->", _Nest(2, [_LINE, bd])])

    def chain_doc(self, chain: list[FunDecl]) -> _Group:
        return _Group(_join([self.fun(g, _FAPP) for g in chain], [_LINE, "o "]))

    # --------------------------------------------------------- function terms
    def fun(self, f: Node, ctx: int):
        if isinstance(f, Lambda):
            chain = self.chain(f)
            if chain is not None:
                d = self.chain_doc(chain)
                return d if ctx <= _FCOMP else ["(", _Nest(1, d), ")"]
            d = self.lambda_doc(f)
            return d if ctx == _FTOP else ["(", d, ")"]
        if isinstance(f, Map):
            head = f.kind + (f.label or "") + (f"({f.dim})" if f.dim is not None else "")
            return [head, _parens([self.fun(f.f, _FTOP)])]
        if isinstance(f, Reduce):
            return [f.kind, _parens([self.fun(f.f, _FTOP)])]
        if isinstance(f, ToMem):
            return ["to" + f.space.capitalize(), _parens([self.fun(f.f, _FTOP)])]
        if isinstance(f, UserFun):
            return f.name
        if isinstance(f, Vectorize):
            return ["vectorize", _parens([str(f.width), self.fun(f.f, _FTOP)])]
        if isinstance(f, Split):
            return f"split({f.chunk})"
        if isinstance(f, Slide):
            return f"{'slideStrict' if f.strict else 'slide'}({f.size}, {f.step})"
        if isinstance(f, Pad):
            extra = "" if f.value == 0 else f", {_fmt_float(f.value)}"
            return f"pad({f.left}, {f.right}{extra})"
        if isinstance(f, ReorderStride):
            return f"reorderStride({f.stride})"
        if isinstance(f, AsVector):
            return f"asVector({f.width})"
        if isinstance(f, Get):
            return f"get({f.index})"
        simple = {Join: "join", Transpose: "transpose", AsScalar: "asScalar", Id: "id",
                  Zip: "zip"}
        name = simple.get(type(f))
        if name is not None:
            return name
        if isinstance(f, ExprNode):
            return ["(", self.expr(f, _TOP), ")"]
        return f"<{type(f).__name__}>"


# ---------------------------------------------------------------------- public printing


def show(node: object, max_len: int | None = None) -> str:
    """One-line text of a node (or type, or size), cut to ``max_len`` with ``...``.

    Lambda parameters keep their names; never raises (used in error messages).
    """
    try:
        if isinstance(node, Type):
            s = show_type(node)
        elif isinstance(node, Expr):
            s = str(node)
        elif isinstance(node, Node):
            s = _render(_Printer(rename=False).term(node), None)
        else:
            s = repr(node)
    except Exception:  # a message must never fail because of its printing
        s = f"<{type(node).__name__}>"
    if max_len is not None and len(s) > max_len:
        s = s[: max(0, max_len - 3)] + "..."
    return s


def _declared_userfuns(node: Node) -> list[UserFun]:
    seen: dict[str, UserFun] = {}
    out: list[UserFun] = []
    for n in walk(node):
        if not isinstance(n, UserFun):
            continue
        b = USER_FUNS.get(n.name)
        if b is n or (b == n and b is not None and b.c_body == n.c_body):
            continue
        prev = seen.get(n.name)
        if prev is None:
            seen[n.name] = n
            out.append(n)
        elif prev is not n and (prev != n or prev.c_body != n.c_body):
            raise ValueError(f"two different user functions are named {n.name!r}")
    return out


_RETURN_RE = re.compile(r"\s*return\s+(.*?)\s*;\s*", re.S)


def _userfun_text(uf: UserFun) -> str:
    m = _RETURN_RE.fullmatch(uf.c_body)
    if m is None:
        raise ValueError(f"user function {uf.name!r} has the C body {uf.c_body!r}, not "
                         "'return <expression>;'; it cannot be written in the text syntax")
    params = ", ".join(f"{n}: {show_type(t)}" for n, t in zip(uf.param_names, uf.in_types))
    return f"userfun {uf.name}({params}) : {show_type(uf.out_type)} = {' '.join(m[1].split())}"


def print_program(node: Node, width: int = 100) -> str:
    """A complete parseable file: user function declarations, input declarations, the term.

    A ``Lambda`` whose parameters all have types is printed as declarations and its body;
    any other node as a term. Lambda parameters get short readable names (``x_12`` becomes
    ``x``), so the output is deterministic. Lines are broken to fit ``width`` when possible.
    """
    ufs = _declared_userfuns(node)
    names = {u.name for u in ufs} | set(USER_FUNS)
    program = (isinstance(node, Lambda) and bool(node.params)
               and all(p.type is not None for p in node.params))
    if program:
        names |= {p.name for p in node.params}  # type: ignore[union-attr]
    pr = _Printer(rename=True, avoid=frozenset(names))
    lines = [_userfun_text(u) for u in ufs]
    if program:
        lines += [f"{p.name} : {show_type(p.type)}" for p in node.params]  # type: ignore[arg-type]
        doc = pr.expr(node.body, _TOP)
    else:
        doc = pr.term(node)
    if lines:
        lines.append("")
    lines.append(_render(doc, width))
    return "\n".join(lines) + "\n"
