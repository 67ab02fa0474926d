"""The printer of the text syntax: ``show`` (one line, for messages) and ``print_program``
(a parseable file).

It writes core nodes (macros appear expanded), compositions (a one-parameter lambda whose
body is a chain of at least two single-argument calls ending in the parameter) as
``f o g``, single-argument calls as ``f $ x`` (``f(x)`` inside argument lists and for user
functions), one-parameter lambdas applied to a value as ``let``. Layout is a small
Wadler/Lindig pretty printer: groups are laid out flat when they fit the width.
"""

from __future__ import annotations

import math
import re

from ir import nodes
from ir.builders import USER_FUNS
from ir.cexpr import RETURN_RE
from ir.errors import DuplicateUserFunError, UserFunBodyError
from ir.parse_keywords import is_reserved
from ir.sym import Expr
from ir.types import ArrayType, Float, Int, ScalarType, TupleType, Type, VectorType
from ir.visitor import Dispatch


def restore_scope(scope: dict, saved: dict) -> None:
    """Undoes bindings (of the printer's names, of the parser's parameters): each name in
    ``saved`` gets back the value it had (None: it had none)."""
    for name, old in saved.items():
        if old is None:
            scope.pop(name, None)
        else:
            scope[name] = old


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
            if not flat:
                assert width is not None  # without a width everything is flat
                flat = _fits(width - col, d.doc, stack)
            stack.append((ind, flat, d.doc))
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
    """The literal's text; an infinity (read from ``1e999f``) as ``1e999``, which parses back."""
    v = float(v)
    return ("1e999" if v > 0 else "-1e999") if math.isinf(v) else repr(v)


def _literal_text(e: nodes.Literal) -> str:
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
    """Builds the document of a node: one method per node class, ``expr_*`` for nodes in
    expression position and ``fun_*`` for nodes in function position."""

    pass_name = "printer"
    expr = Dispatch("expr", nodes.Node)  # expr(e, ctx): the document of an expression
    fun = Dispatch("fun", nodes.Node)  # fun(f, ctx): the document of a function term

    def __init__(self, rename: bool, avoid: frozenset[str] = frozenset()):
        self.rename = rename
        self.avoid = avoid
        self.fv_memo: dict[int, frozenset[str]] = {}
        self.env: dict[str, str] = {}

    # --------------------------------------------------------- free variables
    def fv(self, root: nodes.Node) -> frozenset[str]:
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
            if isinstance(n, nodes.Param):
                memo[k] = frozenset((n.name,))
                continue
            if not isinstance(n, nodes.Node) or isinstance(n, (nodes.UserFun, nodes.Literal)):
                memo[k] = frozenset()
                continue
            kids = list(n.children())
            if not ready:
                stack.append((n, True))
                stack.extend((c, False) for c in kids if id(c) not in memo)
                continue
            r = frozenset().union(*(memo[id(c)] for c in kids))
            if isinstance(n, nodes.Lambda):
                r = r - {p.name for p in n.params}
            memo[k] = r
        return memo[id(root)]

    def chain(self, f: nodes.Node) -> list[nodes.FunDecl] | None:
        """The functions of a composition ``f1 o f2 o ... `` (None if ``f`` is not one)."""
        if not isinstance(f, nodes.Lambda) or len(f.params) != 1:
            return None
        p = f.params[0]
        out: list[nodes.FunDecl] = []
        e = f.body
        while isinstance(e, nodes.FunCall) and len(e.args) == 1:
            out.append(e.f)
            e = e.args[0]
        if len(out) < 2 or not (isinstance(e, nodes.Param) and e.name == p.name):
            return None
        if any(p.name in self.fv(g) for g in out):
            return None
        return out

    # ---------------------------------------------------------------- naming
    def bind(self, params: tuple[nodes.Param, ...], body: nodes.Node) -> tuple[list[str], dict]:
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
        restore_scope(self.env, saved)

    # ------------------------------------------------------------ expressions
    def term(self, n: nodes.Node):
        if isinstance(n, nodes.FunDecl):
            return self.fun(n, _FTOP)
        return self.expr(n, _TOP)

    def expr_param(self, e: nodes.Param, ctx: int):
        return self.env.get(e.name, e.name)

    def expr_literal(self, e: nodes.Literal, ctx: int):
        return _literal_text(e)

    def expr_fun_call(self, e: nodes.FunCall, ctx: int):
        return self.call(e, ctx)

    def expr_fun_decl(self, e: nodes.FunDecl, ctx: int):
        return ["(", self.fun(e, _FTOP), ")"]

    def arglist(self, args) -> _Group:
        return _parens([self.expr(a, _ARG) for a in args])

    def call(self, e: nodes.FunCall, ctx: int):
        f, args = e.f, e.args
        if isinstance(f, nodes.Zip):
            return ["zip", self.arglist(args)]
        if len(args) != 1 or isinstance(f, (nodes.UserFun, nodes.Vectorize)):
            return [self.fun(f, _FAPP), self.arglist(args)]
        a = args[0]
        rctx = _LETV if ctx == _LETV else _TOP
        if isinstance(f, nodes.Lambda):
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

    def dollar(self, fdoc, a: nodes.ExprNode, rctx: int):
        if isinstance(a, (nodes.Param, nodes.Literal)):
            return [fdoc, " $ ", self.expr(a, rctx)]
        return _Group([fdoc, " $", _LINE, self.expr(a, rctx)])

    def let_doc(self, lam: nodes.Lambda, value: nodes.ExprNode):
        vd = self.expr(value, _LETV)
        names, saved = self.bind(lam.params, lam.body)
        bd = self.expr(lam.body, _TOP)
        self.unbind(saved)
        return _Group(["let ", names[0], " = ", _Nest(4, vd), _LINE, "in ", bd])

    def lambda_doc(self, lam: nodes.Lambda):
        names, saved = self.bind(lam.params, lam.body)
        bd = self.expr(lam.body, _TOP)
        self.unbind(saved)
        return _Group(["\\", " ".join(names), " ->", _Nest(2, [_LINE, bd])])

    def chain_doc(self, chain: list[nodes.FunDecl]) -> _Group:
        return _Group(_join([self.fun(g, _FAPP) for g in chain], [_LINE, "o "]))

    # --------------------------------------------------------- function terms
    def fun_lambda(self, f: nodes.Lambda, ctx: int):
        chain = self.chain(f)
        if chain is not None:
            d = self.chain_doc(chain)
            return d if ctx <= _FCOMP else ["(", _Nest(1, d), ")"]
        d = self.lambda_doc(f)
        return d if ctx == _FTOP else ["(", d, ")"]

    def fun_map(self, f: nodes.Map, ctx: int):
        head = f.kind + (f.label or "") + (f"({f.dim})" if f.dim is not None else "") \
            + (f"({f.width})" if f.width is not None else "")
        return [head, _parens([self.fun(f.f, _FTOP)])]

    def fun_reduce(self, f: nodes.Reduce, ctx: int):
        if f.width is not None:
            return [f"reduceVec({f.width})", _parens([self.fun(f.f, _FTOP)])]
        return [f.kind, _parens([self.fun(f.f, _FTOP)])]

    def fun_to_mem(self, f: nodes.ToMem, ctx: int):
        return ["to" + f.space.capitalize(), _parens([self.fun(f.f, _FTOP)])]

    def fun_user_fun(self, f: nodes.UserFun, ctx: int):
        return f.name

    def fun_vectorize(self, f: nodes.Vectorize, ctx: int):
        return ["vectorize", _parens([str(f.width), self.fun(f.f, _FTOP)])]

    def fun_split(self, f: nodes.Split, ctx: int):
        return f"split({f.chunk})"

    def fun_slide(self, f: nodes.Slide, ctx: int):
        return f"{'slideStrict' if f.strict else 'slide'}({f.size}, {f.step})"

    def fun_pad(self, f: nodes.Pad, ctx: int):
        extra = "" if f.value == 0 else f", {_fmt_float(f.value)}"
        return f"pad({f.left}, {f.right}{extra})"

    def fun_reorder_stride(self, f: nodes.ReorderStride, ctx: int):
        return f"reorderStride({f.stride})"

    def fun_as_vector(self, f: nodes.AsVector, ctx: int):
        return f"asVector({f.width})"

    def fun_get(self, f: nodes.Get, ctx: int):
        return f"get({f.index})"

    def fun_join(self, f: nodes.Join, ctx: int):
        return "join"

    def fun_transpose(self, f: nodes.Transpose, ctx: int):
        return "transpose"

    def fun_as_scalar(self, f: nodes.AsScalar, ctx: int):
        return "asScalar"

    def fun_id(self, f: nodes.Id, ctx: int):
        return "id"

    def fun_zip(self, f: nodes.Zip, ctx: int):
        return "zip"

    def fun_expr_node(self, f: nodes.ExprNode, ctx: int):
        return ["(", self.expr(f, _TOP), ")"]


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
        elif isinstance(node, nodes.Node):
            s = _render(_Printer(rename=False).term(node), None)
        else:
            s = repr(node)
    except Exception:  # a message must never fail because of its printing
        s = f"<{type(node).__name__}>"
    if max_len is not None and len(s) > max_len:
        s = s[: max(0, max_len - 3)] + "..."
    return s


def _declared_userfuns(node: nodes.Node) -> list[nodes.UserFun]:
    seen: dict[str, nodes.UserFun] = {}
    out: list[nodes.UserFun] = []
    for n in nodes.walk(node):
        if not isinstance(n, nodes.UserFun):
            continue
        b = USER_FUNS.get(n.name)
        if b is n or (b == n and b is not None and b.c_body == n.c_body):
            continue
        prev = seen.get(n.name)
        if prev is None:
            seen[n.name] = n
            out.append(n)
        elif prev is not n and (prev != n or prev.c_body != n.c_body):
            raise DuplicateUserFunError(f"two different user functions are named {n.name!r}")
    return out


def _userfun_text(uf: nodes.UserFun) -> str:
    m = RETURN_RE.fullmatch(uf.c_body)
    if m is None:
        raise UserFunBodyError(
            f"user function {uf.name!r} has the C body {uf.c_body!r}, not "
            "'return <expression>;'; it cannot be written in the text syntax")
    params = ", ".join(f"{n}: {show_type(t)}" for n, t in zip(uf.param_names, uf.in_types))
    return f"userfun {uf.name}({params}) : {show_type(uf.out_type)} = {' '.join(m[1].split())}"


def print_program(node: nodes.Node, width: int = 100) -> str:
    """A complete parseable file: user function declarations, input declarations, the term.

    A ``Lambda`` whose parameters all have types is printed as declarations and its body;
    any other node as a term. Lambda parameters get short readable names (``x_12`` becomes
    ``x``), so the output is deterministic. Lines are broken to fit ``width`` when possible.
    """
    ufs = _declared_userfuns(node)
    names = {u.name for u in ufs} | set(USER_FUNS)
    decls = [(p.name, p.type) for p in node.params
             if p.type is not None] if isinstance(node, nodes.Lambda) else []
    program = node if isinstance(node, nodes.Lambda) and node.params \
        and len(decls) == len(node.params) else None
    if program is not None:
        names |= {name for name, _ in decls}
    pr = _Printer(rename=True, avoid=frozenset(names))
    lines = [_userfun_text(u) for u in ufs]
    if program is not None:
        lines += [f"{name} : {show_type(t)}" for name, t in decls]
        doc = pr.expr(program.body, _TOP)
    else:
        doc = pr.term(node)
    if lines:
        lines.append("")
    lines.append(_render(doc, width))
    return "\n".join(lines) + "\n"
