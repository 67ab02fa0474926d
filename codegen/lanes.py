"""Vector lanes: a ``mapVec(w)`` loop runs ``w`` iterations at a time in the lanes of OpenCL
vectors (CC'22's level V, loopy's ``vec`` tag).

The builder lowers ``mapVec`` like ``mapSeq`` into a sequential :class:`Loop` with a
``width``, which the launch and barrier analyses see as the sequential loop it means (lanes
change no work-item's share of the work); :func:`vectorise_loops` then rewrites each such
loop ``for i in 0..n`` into
``for q in 0..n/w`` whose body computes iterations ``i = w*q + lane`` for every lane at
once. Each value of the body is analysed as LIFT does (CC'22 Section 4): the index of every
memory access is compared across the lanes, symbolically, with ``i = w*q + lane``:

* an index that does not depend on ``i`` is *uniform*: one scalar, broadcast where a vector
  is needed;
* an index that grows by one per lane is *contiguous*: one ``vloadN``/``vstoreN``;
* any other index is read lane by lane into a vector literal (a gather) and written lane by
  lane (a scatter): unrolled, never refused (loopy's ``vec`` fallback);
* private values the body declares (a reduction's accumulator, a ``toPrivate`` temporary)
  belong to one iteration, so each lane has its own: they become vectors;
* a padding conditional whose condition depends on ``i`` reads the vector in one load when
  the first and the last lane are both inside (the conditions are affine in ``i``, so every
  lane between is too), and lane by lane otherwise;
* a user function applied to vectors becomes its vector version when its C body only uses
  arithmetic and the math builtins OpenCL defines on vectors, else a function that calls the
  scalar one lane by lane.

The result computes exactly what the scalar loop computes, lane for lane (no reassociation),
so kernels compare bit for bit with their scalar mapping. What it cannot express raises
:class:`codegen.errors.UnvectorizableError` (a nested ``mapVec``, vectors already in the body,
lanes writing one element).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from codegen import views as vw
from codegen.buffers import Buf
from codegen.emit import c_type, user_fun_source
from codegen.errors import UnvectorizableError
from codegen.stmt import Barrier, Decl, Loop, Store, leaves_of, walk_stmts
from codegen.views import Call, Const, Leaf, Mem, Sel, VecMem
from ir.nodes import Map, Node, UserFun, walk
from ir.sym import Expr, Rel, Var, sym
from ir.types import ScalarType, Type, VectorType

__all__ = ["LANE_NAMES", "access_stride", "lane_defaults", "vectorise_loops"]

LANE_NAMES = "0123456789abcdef"  # OpenCL's .sN component names
# OpenCL C builtins that take and return vectors lane by lane (gentype)
_VECTOR_BUILTINS = frozenset(
    "fma mad sqrt rsqrt exp exp2 log log2 fabs fmin fmax min max tanh sin cos tan pow floor "
    "ceil clamp native_exp native_log native_sqrt native_recip native_divide hypot".split())
_TOKEN = re.compile(r"\s*(?:(\d+\.\d*(?:[eE][-+]?\d+)?[fF]|\d*\.\d+(?:[eE][-+]?\d+)?[fF]|"
                    r"\d+\.?\d*[eE][-+]?\d+[fF])|([A-Za-z_]\w*)|([-+*/(),]))")


@dataclass
class Functions:
    """The builder's user functions: ``funs`` (key -> (C name, source)), ``fun_of`` (C name
    -> user function) and ``fresh`` (a fresh C identifier); vector versions are added."""

    funs: dict
    fun_of: dict[str, UserFun]
    fresh: Callable[[str], str]
    _vector: dict[tuple, str] = field(default_factory=dict)

    def vector(self, fname: str, arg_types: tuple[Type, ...], out: VectorType) -> str:
        """The C name of ``fname`` applied to vectors of ``out``'s width."""
        key = (fname, tuple(str(t) for t in arg_types), str(out))
        hit = self._vector.get(key)
        if hit is not None:
            return hit
        uf = self.fun_of.get(fname)
        if uf is None:
            raise UnvectorizableError(f"cannot apply {fname} to vector lanes")
        w = out.width.as_int()
        name = self.fresh(f"uf_{uf.name}_x{w}")
        if lane_safe(uf) and all(_float(t) for t in (*arg_types, out)):
            src = user_fun_source(name, uf, arg_types, out)
        else:  # lane by lane, through the scalar function
            params = ", ".join(f"{c_type(t)} a{k}" for k, t in enumerate(arg_types))
            calls = ", ".join(
                f"{fname}({', '.join(f'a{k}.s{LANE_NAMES[j]}' for k in range(len(arg_types)))})"
                for j in range(w))
            src = f"{c_type(out)} {name}({params}) {{ return ({c_type(out)})({calls}); }}"
        self.funs[("lanes",) + key] = (name, src)
        self.fun_of[name] = uf
        self._vector[key] = name
        return name


def _float(t: Type) -> bool:
    e = t.elem if isinstance(t, VectorType) else t
    return isinstance(e, ScalarType) and e.name == "float"


def lane_safe(uf: UserFun) -> bool:
    """True when ``uf``'s C body means the same lane by lane on vectors: parameters, float
    literals with the ``f`` suffix, ``+ - * /``, parentheses and the builtins OpenCL defines
    on vectors (no comparison, ternary, integer or double literal, ``dot``)."""
    body = uf.c_body.strip().removeprefix("return").strip().rstrip(";").strip()
    pos = 0
    while pos < len(body):
        m = _TOKEN.match(body, pos)
        if m is None or m.end() == pos:
            return body[pos:].strip() == ""
        name = m.group(2)
        if name is not None and name not in uf.param_names and name not in _VECTOR_BUILTINS:
            return False
        pos = m.end()
    return True


def access_stride(idx: Expr, var: Expr, width: int) -> int | None:
    """How the index ``idx`` moves across ``width`` lanes of the loop variable ``var``
    (``var = width*q + lane``): 0 when it does not depend on ``var``, 1 when lane k reads
    element ``idx(lane 0) + k`` (contiguous), None otherwise."""
    if var.name not in idx.free_vars():
        return 0
    q = vw.fresh_var(1 << 30)
    lane = vw.lane_var(width)
    e = vw.normalize(idx.subs({var.name: q * width + lane}))
    base = e.subs({vw._LANE: 0})
    return 1 if e - base == lane else None


class _Vectoriser:
    """Rewrites one mapVec loop (see the module docstring)."""

    def __init__(self, loop: Loop, fns: Functions, new_bufs: list[Buf]):
        self.loop = loop
        self.w = loop.width
        self.fns = fns
        self.new_bufs = new_bufs
        n = loop.n
        self.q = vw.register_var(Var(fns.fresh(f"{loop.name}_v"), 0, max(n // self.w, 1) - 1))
        self.lane_private: set[int] = set()

    # ------------------------------------------------------------------ per lane
    def at(self, e: Expr, lane: int) -> Expr:
        return vw.normalize(e.subs({self.loop.name: self.q * self.w + lane}))

    def rel_at(self, r: Rel, lane: int) -> Rel:
        return r.subs({self.loop.name: self.q * self.w + lane})

    def vtype(self, t: Type) -> VectorType:
        if not isinstance(t, ScalarType):
            raise UnvectorizableError(
                f"{self.loop.what}: a value of type {t} in its body cannot be split into "
                f"{self.w} vector lanes (its body must compute scalars)")
        return VectorType(t, sym(self.w))

    def splat(self, v: Leaf) -> Leaf:
        vt = self.vtype(v.type)
        if isinstance(v, Const):
            return Const(v.value, vt)
        return Call(f"({c_type(vt)})", (v,), vt)

    def lane_leaf(self, v: Leaf, lane: int) -> Leaf:
        """The scalar leaf of one lane."""
        if isinstance(v, Mem):
            if id(v.buf) in self.lane_private:
                raise UnvectorizableError(f"{self.loop.what}: internal: lane of a lane vector")
            return Mem(v.buf, self.at(v.idx, lane), v.type)
        if isinstance(v, Const):
            return v
        if isinstance(v, Call):
            return Call(v.fname, tuple(self.lane_leaf(a, lane) for a in v.args), v.type)
        if isinstance(v, Sel):
            return Sel(tuple(self.rel_at(c, lane) for c in v.conds),
                       self.lane_leaf(v.then, lane), self.lane_leaf(v.other, lane))
        raise UnvectorizableError(
            f"{self.loop.what}: its body already holds vectors ({v.type}); vectorise one "
            "level only")

    def gather(self, v: Leaf) -> Leaf:
        vt = self.vtype(v.type)
        return Call(f"({c_type(vt)})", tuple(self.lane_leaf(v, k) for k in range(self.w)), vt)

    def uniform(self, v: Leaf) -> bool:
        if isinstance(v, (Mem, VecMem)):
            return id(v.buf) not in self.lane_private and \
                self.loop.name not in v.idx.free_vars()
        if isinstance(v, Const):
            return True
        if isinstance(v, Call):
            return all(self.uniform(a) for a in v.args)
        if isinstance(v, Sel):
            return all(self.loop.name not in c.free_vars() for c in v.conds) and \
                self.uniform(v.then) and self.uniform(v.other)
        return False

    # ------------------------------------------------------------------ values
    def value(self, v: Leaf) -> Leaf:
        """``v`` for all lanes: a vector leaf (uniform leaves stay scalar; see ``vec``)."""
        if self.uniform(v):
            return v
        if isinstance(v, Mem):
            if id(v.buf) in self.lane_private:
                return Mem(v.buf, v.idx, self.vtype(v.type))
            vt = self.vtype(v.type)
            if access_stride(v.idx, self.loop.var, self.w) == 1:
                return VecMem(v.buf, self.at(v.idx, 0), vt)
            return self.gather(v)
        if isinstance(v, Call):
            args = tuple(self.vec(a) for a in v.args)
            out = self.vtype(v.type)
            name = self.fns.vector(v.fname, tuple(a.type for a in args), out)
            return Call(name, args, out)
        if isinstance(v, Sel):
            if all(self.loop.name not in c.free_vars() for c in v.conds):
                return Sel(v.conds, self.vec(v.then), self.vec(v.other))
            if any(id(m.buf) in self.lane_private for m in leaves_of(v)):
                return self.gather(v)  # (cannot happen: padding reads memory)
            edges = tuple(self.rel_at(c, k) for c in v.conds for k in (0, self.w - 1))
            if all(_affine(self, c) for c in v.conds):
                return Sel(edges, self.vec(v.then), self.gather(v))
            return self.gather(v)
        raise UnvectorizableError(
            f"{self.loop.what}: its body already holds vectors ({v.type}); vectorise one "
            "level only")

    def vec(self, v: Leaf) -> Leaf:
        """``v`` as a vector (uniform scalars broadcast)."""
        x = self.value(v)
        return x if isinstance(x.type, VectorType) else self.splat(x)

    # ------------------------------------------------------------------ statements
    def stmts(self, body: list, parent: Loop) -> list:
        out: list = []
        for s in body:
            if isinstance(s, Loop):
                if s.width > 1:
                    raise UnvectorizableError(
                        f"{s.what} is nested in {self.loop.what}: only one map of a nest "
                        "runs in vector lanes")
                if s.kind != "seq":
                    raise UnvectorizableError(
                        f"{s.what} is nested in {self.loop.what}: a vectorised map has only "
                        "sequential maps inside")
                s.body = self.stmts(s.body, s)
                s.parent = parent
                out.append(s)
            elif isinstance(s, Decl):
                s.parent = parent
                out.append(s)
            elif isinstance(s, Store):
                for x in self.store(s):
                    x.parent = parent
                    out.append(x)
            elif isinstance(s, Barrier):
                raise UnvectorizableError(f"{self.loop.what}: a barrier inside vector lanes")
            else:
                raise UnvectorizableError(f"internal: {type(s).__name__} in vector lanes")
        return out

    def store(self, s: Store) -> list:
        d = s.dest
        if not isinstance(d, Mem):
            raise UnvectorizableError(
                f"{self.loop.what}: its body already writes vectors; vectorise one level only")
        if id(d.buf) in self.lane_private:
            if any(self.loop.name in c.free_vars() for c in s.conds):
                raise UnvectorizableError(
                    f"{self.loop.what}: a lane-private value written under a condition on "
                    "the lane")
            return [Store(Mem(d.buf, d.idx, self.vtype(d.type)), self.vec(s.value),
                          conds=s.conds)]
        lane_conds = any(self.loop.name in c.free_vars() for c in s.conds)
        stride = access_stride(d.idx, self.loop.var, self.w)
        if stride == 0:
            raise UnvectorizableError(
                f"{self.loop.what}: its {self.w} lanes would all write element {d.idx} of "
                f"{d.buf.name}")
        value = self.value(s.value)
        if stride == 1 and not lane_conds:
            vt = self.vtype(d.type)
            v = value if isinstance(value.type, VectorType) else self.splat(value)
            return [Store(VecMem(d.buf, self.at(d.idx, 0), vt), v, conds=s.conds)]
        # scatter: the vector once into a private temporary, then lane by lane
        if not isinstance(value.type, VectorType):
            return [Store(Mem(d.buf, self.at(d.idx, k), d.type), value,
                          conds=tuple(self.rel_at(c, k) for c in s.conds))
                    for k in range(self.w)]
        vt = value.type
        tmp = Buf(self.fns.fresh(f"lanes_{d.buf.cname}"), "private", c_type(vt), 1, "temp",
                  scalar=True, alloc_loops=())
        self.new_bufs.append(tmp)
        out: list = [Decl(tmp), Store(Mem(tmp, sym(0), vt), value)]
        for k in range(self.w):
            lane = Call(f".s{LANE_NAMES[k]}", (Mem(tmp, sym(0), vt),), d.type)
            out.append(Store(Mem(d.buf, self.at(d.idx, k), d.type), lane,
                             conds=tuple(self.rel_at(c, k) for c in s.conds)))
        return out

    def run(self) -> Loop:
        lp = self.loop
        for s in walk_stmts(lp.body):
            if isinstance(s, Decl):
                b = s.buf
                if not b.dtype.isalpha():
                    raise UnvectorizableError(
                        f"{lp.what}: private buffer {b.name} already holds vectors")
                b.dtype = f"{b.dtype}{self.w}"
                self.lane_private.add(id(b))
        body = self.stmts(lp.body, lp)
        what = f"{lp.what}, {self.w} lanes at a time"
        n_sym = lp.n_sym // self.w if lp.n_sym is not None else None
        out = Loop("seq", None, self.q, lp.n // self.w, lp.label, what, lp.is_map, body,
                   lp.parent, n_sym=n_sym)
        for s in body:
            s.parent = out
        return out


def _affine(vz: _Vectoriser, r: Rel) -> bool:
    """``r``'s sides differ by an affine function of the loop variable over one vector."""
    e = r.lhs - r.rhs
    if vz.loop.name not in e.free_vars():
        return True
    base = vz.at(e, 0)
    step = vz.at(e, 1) - base
    return step.is_const and all(vz.at(e, k) - base == step * k for k in range(2, vz.w))


def lane_defaults(program: Node) -> dict[str, int]:
    """Width 1 (no lanes) for each strip-mined parallel map's width variable: a parallel
    map whose function is a ``mapVec`` (``mapper.apply``); a width not given is that."""
    out = {}
    for n in walk(program):
        if isinstance(n, Map) and n.is_parallel and isinstance(n.f, Map) \
                and n.f.width is not None and n.f.width.is_var:
            out[n.f.width.name] = 1
    return out


def vectorise_loops(stmts: list, fns: Functions) -> list[Buf]:
    """Rewrites, in place, every loop of ``stmts`` with a width (a mapVec; see the module
    docstring); returns the private buffers it added."""
    new_bufs: list[Buf] = []

    def visit(lst: list) -> None:
        for k, s in enumerate(lst):
            if not isinstance(s, Loop):
                continue
            if s.kind == "seq" and s.width > 1:
                if s.n % s.width:
                    raise UnvectorizableError(
                        f"{s.what}: {s.n} iterations are not a multiple of the vector width "
                        f"{s.width}")
                lst[k] = _Vectoriser(s, fns, new_bufs).run()
            else:
                visit(s.body)

    visit(stmts)
    return new_bufs
