"""The keyword forms of the text syntax's terms, and its reserved words.

Keywords: ``id join transpose asScalar zip split reorderStride asVector slide slideStrict pad
get reduce reduceSeq reduceVec toGlobal toLocal toPrivate vectorize value`` and the map forms
(``map``, ``mapA``, ``mapSeq``, ``mapGlb(d)``, ...); the ND macros (``mapND``, ``zipND``,
``joinND``, ``slideND``, ``slideStrictND``, ``padND``) are expanded with ``ir.builders``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ir import nodes
from ir.builders import join_nd, map_nd, pad_nd, slide_nd, zip_nd
from ir.lexer import Token
from ir.parse_types import VEC_RE, TypeReader
from ir.sym import Expr
from ir.types import Float, VectorType, shape_of

MAP_RE = re.compile(r"map(Seq|Vec|Glb|Wrg|Lcl)?(\w*)")
WORDS = frozenset({"o", "let", "in", "userfun", "value", "_", "min", "max", "float", "int"})
MAP_WORDS = ("map", "mapSeq", "mapVec", "mapGlb", "mapWrg", "mapLcl")
_ADDRESS_SPACES = {"toGlobal": "global", "toLocal": "local", "toPrivate": "private"}


def is_reserved(name: str) -> bool:
    """True for words that cannot name a parameter: keywords, map forms, types, ``o``..."""
    if name in WORDS or name in KEYWORDS or VEC_RE.fullmatch(name):
        return True
    m = MAP_RE.fullmatch(name)
    return m is not None and (not m[2] or nodes.valid_label(m[2]))


class KeywordForms(TypeReader):
    """Reads the keyword forms (a mixin of the parser, which provides the terms)."""

    if TYPE_CHECKING:  # the parser's
        def term(self, fun: bool = False) -> nodes.Node: ...
        def args(self) -> tuple[nodes.ExprNode, ...]: ...
        def as_fun(self, node: nodes.Node, tok: Token, where: str) -> nodes.FunDecl: ...

    def sizes_in_parens(self, head: Token, n: int) -> list[Expr]:
        self.expect("(", f" after {head.text!r}")
        out = [self.size()]
        while self.at(","):
            self.next()
            out.append(self.size())
        self.expect(")", f" to close {head.text}(...)")
        if len(out) != n:
            raise self.error(f"{head.text} takes {n} size argument(s), given {len(out)}", head)
        return out

    def map_form(self, t: Token) -> nodes.Map:
        m = MAP_RE.fullmatch(t.text)
        if m is None:
            raise self.error(f"bad map name {t.text!r}", t)
        kind = "map" + (m[1] or "")
        label = m[2] or None
        if label is not None and not nodes.valid_label(label):
            raise self.error(
                f"bad map label {label!r} in {t.text!r}: a label starts with an upper-case "
                "letter, continues with letters, digits or '_', and does not start with Seq, "
                "Vec, Glb, Wrg or Lcl", t)
        dim = None
        width = None
        if kind == "mapVec":
            width = self.sizes_in_parens(t, 1)[0]
        elif kind in nodes.PARALLEL_KINDS:
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
        return nodes.Map(self.fun_arg(t), kind, dim, label, width=width)

    def fun_arg(self, head: Token) -> nodes.FunDecl:
        self.expect("(", f" and a function after {head.text!r}")
        t = self.peek()
        f = self.as_fun(self.term(True), t, f"the argument of {head.text}")
        self.expect(")", f" to close {head.text}(...)")
        return f

    def kw_nullary(self, t: Token) -> nodes.FunDecl:
        return {"join": nodes.Join, "transpose": nodes.Transpose, "asScalar": nodes.AsScalar,
                "id": nodes.Id}[t.text]()

    def kw_zip(self, t: Token) -> nodes.Node:
        if self.at("("):
            args = self.args()
            return nodes.FunCall(nodes.Zip(len(args)), args)
        return nodes.Zip(2)

    def kw_sized(self, t: Token) -> nodes.FunDecl:
        (s,) = self.sizes_in_parens(t, 1)
        return {"split": nodes.Split, "reorderStride": nodes.ReorderStride,
                "asVector": nodes.AsVector}[t.text](s)

    def kw_slide(self, t: Token) -> nodes.FunDecl:
        size, step = self.sizes_in_parens(t, 2)
        return nodes.Slide(size, step, t.text == "slideStrict")

    def kw_pad(self, t: Token) -> nodes.FunDecl:
        self.expect("(", " after 'pad'")
        left = self.size()
        self.expect(",", " between the arguments of pad")
        right = self.size()
        value = 0.0
        if self.at(","):
            self.next()
            value = float(self.number())
        self.expect(")", " to close pad(...)")
        return nodes.Pad(left, right, value)

    def kw_get(self, t: Token) -> nodes.FunDecl:
        self.expect("(", " after 'get'")
        i = self.int_tok("the tuple index")
        self.expect(")")
        return nodes.Get(i)

    def kw_reduce_vec(self, t: Token) -> nodes.FunDecl:
        width = self.sizes_in_parens(t, 1)[0]
        return nodes.Reduce(self.fun_arg(t), "reduceSeq", width=width)

    def kw_funarg(self, t: Token) -> nodes.FunDecl:
        f = self.fun_arg(t)
        if t.text in ("reduce", "reduceSeq"):
            return nodes.Reduce(f, t.text)
        return nodes.ToMem(f, _ADDRESS_SPACES[t.text])

    def kw_vectorize(self, t: Token) -> nodes.FunDecl:
        self.expect("(", " after 'vectorize'")
        w = self.size()
        self.expect(",", " between the width and the function of vectorize")
        ft = self.peek()
        f = self.as_fun(self.term(True), ft, "the function of vectorize")
        if not isinstance(f, nodes.UserFun):
            raise self.error("vectorize takes a user function", ft)
        self.expect(")")
        return nodes.Vectorize(w, f)

    def kw_value(self, t: Token) -> nodes.Literal:
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
        return nodes.Literal(v, ty)

    def macro_n(self, t: Token) -> int:
        nt = self.peek()
        n = self.int_tok(f"the number of dimensions of {t.text}")
        if n < 1:
            raise self.error(f"{t.text} needs at least 1 dimension", nt)
        return n

    def kw_mapND(self, t: Token) -> nodes.FunDecl:  # noqa: N802
        if not (self.at("(") and self.peek(1).kind == "int" and self.at(",", 2)):
            return self.map_form(t)  # the map labelled ND
        self.next()
        n = self.macro_n(t)
        self.next()
        ft = self.peek()
        f = self.as_fun(self.term(True), ft, "the function of mapND")
        self.expect(")", " to close mapND(n, f)")
        return map_nd(n, f)

    def kw_zipND(self, t: Token) -> nodes.ExprNode:  # noqa: N802
        self.expect("(", " after 'zipND': zipND(n)(a, b)")
        n = self.macro_n(t)
        self.expect(")")
        if not self.at("("):
            raise self.error("zipND(n) must be applied to arrays: zipND(n)(a, b)", self.peek())
        return zip_nd(n, *self.args())

    def kw_joinND(self, t: Token) -> nodes.FunDecl:  # noqa: N802
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

    def kw_slideND(self, t: Token) -> nodes.FunDecl:  # noqa: N802
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

    def kw_padND(self, t: Token) -> nodes.FunDecl:  # noqa: N802
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


_K = KeywordForms
KEYWORDS = {
    "join": _K.kw_nullary, "transpose": _K.kw_nullary, "asScalar": _K.kw_nullary,
    "id": _K.kw_nullary, "zip": _K.kw_zip,
    "split": _K.kw_sized, "reorderStride": _K.kw_sized, "asVector": _K.kw_sized,
    "slide": _K.kw_slide, "slideStrict": _K.kw_slide, "pad": _K.kw_pad, "get": _K.kw_get,
    "reduce": _K.kw_funarg, "reduceSeq": _K.kw_funarg, "reduceVec": _K.kw_reduce_vec,
    "toGlobal": _K.kw_funarg,
    "toLocal": _K.kw_funarg, "toPrivate": _K.kw_funarg, "vectorize": _K.kw_vectorize,
    "value": _K.kw_value, "mapND": _K.kw_mapND, "zipND": _K.kw_zipND, "joinND": _K.kw_joinND,
    "slideND": _K.kw_slideND, "slideStrictND": _K.kw_slideND, "padND": _K.kw_padND,
}
