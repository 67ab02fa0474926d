"""Vector lanes: a ``mapVec(w)`` loop runs ``w`` iterations at a time in the lanes of OpenCL
vectors (CC'22's level V, loopy's ``vec`` tag).

The builder lowers ``mapVec`` like ``mapSeq`` into a sequential :class:`Loop` with a
``width``, which the launch and barrier analyses see as the sequential loop it means (lanes
change no work-item's share of the work); :func:`vectorise_loops` then rewrites each such
loop ``for i in 0..n`` into
``for q in 0..n/w`` whose body computes iterations ``i = w*q + lane`` for every lane at
once. Where ``w`` does not divide ``n``, a map that may run an iteration twice
(:func:`recomputable`) gets one more vector, moved back to end at iteration ``n-1``; any
other map runs its last ``n % w`` iterations one by one after the vectors. Each value
of the body is analysed as LIFT does (CC'22 Section 4): the index of every memory access
is compared across the lanes, symbolically, with ``i = w*q + lane``:

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from codegen import views as vw
from codegen.buffers import Buf
from codegen.emit import c_type, user_fun_source
from codegen.errors import UnvectorizableError
from codegen.stmt import Barrier, Decl, Loop, Store, clone_stmts, leaves_of, walk_stmts
from codegen.views import Call, Const, Leaf, Mem, Sel, VecMem
from ir.errors import LiftmapError
from ir.nodes import FunCall, Map, Node, Reduce, Split, UserFun, walk
from ir.sym import Expr, Rel, Var, sym
from ir.types import ArrayType, ScalarType, Type, VectorType

__all__ = ["DEFAULT_LANES", "LANE_NAMES", "access_stride", "default_lanes", "lane_defaults",
           "reduction_identity", "vectorise_loops"]

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


_OPS = {"+": 0.0, "max": float("-inf"), "fmax": float("-inf"), "min": float("inf"),
        "fmin": float("inf")}


def reduction_identity(uf: UserFun) -> float | None:
    """The identity of ``uf`` when it is an associative and commutative operator of its two
    parameters (``a + b``, ``max``/``fmax``, ``min``/``fmin``, either order): the value a
    vector accumulator's lanes start from; None otherwise."""
    if uf.arity != 2:
        return None
    a, b = uf.param_names
    body = re.sub(r"\s+", "", uf.c_body).removeprefix("return").rstrip(";")
    while body.startswith("(") and body.endswith(")"):
        body = body[1:-1]
    for x, y in ((a, b), (b, a)):
        if body == f"{x}+{y}":
            return _OPS["+"]
        for op in ("max", "fmax", "min", "fmin"):
            if body == f"{op}({x},{y})":
                return _OPS[op]
    return None


def access_stride(idx: Expr, var: Expr, width: int, origin: Expr | None = None) -> int | None:
    """How the index ``idx`` moves across ``width`` lanes of the loop variable ``var``
    (``var = width*q + lane``, or ``origin + lane`` when given): 0 when it does not depend
    on ``var``, 1 when lane k reads element ``idx(lane 0) + k`` (contiguous), None
    otherwise."""
    if var.name not in idx.free_vars():
        return 0
    lane = vw.lane_var(width)
    if origin is None:
        origin = vw.fresh_var(1 << 30) * width
    e = vw.normalize(idx.subs({var.name: origin + lane}))
    base = e.subs({vw._LANE: 0})
    return 1 if e - base == lane else None


class _Vectoriser:
    """Rewrites one mapVec loop (see the module docstring)."""

    def __init__(self, loop: Loop, fns: Functions, shift: int = 0):
        self.loop = loop
        self.w = loop.width
        self.fns = fns
        # vector q covers w*q .. w*q + w-1; with a ``shift`` (a length the width does not
        # divide, iterations that may run twice: see ``recomputable``), one more vector,
        # the last, moved back by ``shift`` to end at the last iteration (Halide's
        # ShiftInwards): its base is w*q - shift*(q // (trips-1)), 0 before the last
        trips = -(-loop.n // self.w) if shift else max(loop.n // self.w, 1)
        self.trips = trips
        self.q = vw.register_var(Var(fns.fresh(f"{loop.name}_v"), 0, trips - 1))
        self.base: Expr = self.q * self.w
        if shift:
            self.base = self.base - (self.q // (trips - 1)) * shift
        self.shifted = bool(shift)
        self.lane_private: set[int] = set()
        self.update: tuple | None = None  # a reduction's update: (store, k, V, vector op)

    # ------------------------------------------------------------------ per lane
    def at(self, e: Expr, lane: int) -> Expr:
        return vw.normalize(e.subs({self.loop.name: self.base + lane}))

    def rel_at(self, r: Rel, lane: int) -> Rel:
        return r.subs({self.loop.name: self.base + lane})

    def stride(self, idx: Expr) -> int | None:
        """:func:`access_stride` of ``idx`` across this loop's lanes."""
        return access_stride(idx, self.loop.var, self.w, self.base if self.shifted else None)

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
            if self.stride(v.idx) == 1:
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
            elif isinstance(s, Store) and self.update is not None and s is self.update[0]:
                _, k, vacc, vname = self.update
                assert isinstance(s.value, Call)  # checked by reduction()
                value = self.vec(s.value.args[1 - k])
                args = (vacc, value) if k == 0 else (value, vacc)
                out.append(Store(vacc, Call(vname, args, vacc.type), parent))
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
        stride = self.stride(d.idx)
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
                  scalar=True, alloc_loops=(), sym_count=sym(1), lanes=self.loop.width_sym)
        out: list = [Decl(tmp), Store(Mem(tmp, sym(0), vt), value)]
        for k in range(self.w):
            lane = Call(f".s{LANE_NAMES[k]}", (Mem(tmp, sym(0), vt),), d.type)
            out.append(Store(Mem(d.buf, self.at(d.idx, k), d.type), lane,
                             conds=tuple(self.rel_at(c, k) for c in s.conds)))
        return out

    def reduction(self) -> list:
        """A reduction in lanes: the accumulator ``A`` becomes a vector ``V`` of partial
        results (its lanes start from the operator's identity), each update
        ``A = op(A, x)`` a vector update ``V = op(V, x)``, and after the loop
        ``A = op(A, V.sk)`` for every lane k: the statements replacing the loop."""
        lp = self.loop
        acc = lp.reduce_acc
        assert acc is not None  # only reductions come here
        stores = [s for s in walk_stmts(lp.body) if isinstance(s, Store)]
        updates = [s for s in stores if isinstance(s.dest, Mem) and s.dest.buf is acc.buf]
        op = updates[0].value if len(updates) == 1 else None
        uf = self.fns.fun_of.get(op.fname) if isinstance(op, Call) else None
        ident = reduction_identity(uf) if uf is not None else None
        if op is None or ident is None or updates[0].conds or not isinstance(op, Call) \
                or not isinstance(acc.type, ScalarType) \
                or any(s is not updates[0] and any(m.buf is acc.buf for m in leaves_of(s.value))
                       for s in stores):
            raise UnvectorizableError(
                f"{lp.what}: only a reduction by an associative operator (a + b, max, min) "
                "of the accumulator and a value runs in lanes")
        k = next((j for j, a in enumerate(op.args)
                  if isinstance(a, Mem) and a.buf is acc.buf and a.idx == acc.idx), None)
        if k is None or any(m.buf is acc.buf for m in leaves_of(op.args[1 - k])):
            raise UnvectorizableError(
                f"{lp.what}: its update does not combine the accumulator with a value")
        vt = self.vtype(acc.type)
        vbuf = Buf(self.fns.fresh(f"lanes_{acc.buf.cname}"), "private", c_type(vt), 1, "acc",
                   scalar=True, alloc_loops=(), sym_count=sym(1), lanes=lp.width_sym)
        vacc = Mem(vbuf, sym(0), vt)
        self.lane_private.add(id(vbuf))
        vname = self.fns.vector(op.fname, (vt, vt), vt)
        self.update = (updates[0], k, vacc, vname)
        body = self.stmts(lp.body, lp)
        n_sym = lp.n_sym // self.w if lp.n_sym is not None else None
        out = Loop("seq", None, self.q, lp.n // self.w, lp.label,
                   f"{lp.what}, {self.w} lanes at a time", lp.is_map, body, lp.parent,
                   n_sym=n_sym)
        for s in body:
            s.parent = out
        before = [Decl(vbuf, parent=lp.parent), Store(vacc, Const(ident, vt), lp.parent)]
        after = []
        for j in range(self.w):
            lane = Call(f".s{LANE_NAMES[j]}", (vacc,), acc.type)
            after.append(Store(acc, Call(op.fname, (acc, lane) if k == 0 else (lane, acc),
                                         acc.type), lp.parent))
        return [*before, out, *after]

    def run(self) -> Loop:
        lp = self.loop
        for s in walk_stmts(lp.body):
            if isinstance(s, Decl):
                b = s.buf
                if not b.dtype.isalpha():
                    raise UnvectorizableError(
                        f"{lp.what}: private buffer {b.name} already holds vectors")
                b.dtype = f"{b.dtype}{self.w}"
                b.lanes = lp.width_sym
                self.lane_private.add(id(b))
        body = self.stmts(lp.body, lp)
        what = f"{lp.what}, {self.w} lanes at a time"
        if self.shifted:
            what += f" (the last vector moved back to end at iteration {lp.n - 1})"
            n_sym = (lp.n_sym + self.w - 1) // self.w if lp.n_sym is not None else None
        else:
            n_sym = lp.n_sym // self.w if lp.n_sym is not None else None
        out = Loop("seq", None, self.q, self.trips, lp.label, what, lp.is_map, body,
                   lp.parent, n_sym=n_sym)
        for s in body:
            s.parent = out
        return out


def jam(out: Loop) -> list:
    """Unroll-and-jam of the map loop ``out`` (its iterations a register block): where
    its body is declarations, statements, one loop ``R`` and statements, the ``n``
    iterations (vectors, after :class:`_Vectoriser`) run together inside ``R``, each with
    its own copy of the values the body declares (``float8 acc[n]``, registers once the
    printer unrolls the small loops over them). A body already jammed (a block inside)
    jams again: ``R`` then holds an ``n`` x ``m`` block (2-D register blocking). The
    iterations of a map are independent, so only the order of independent work changes.
    Returns the statements replacing ``out`` (``[out]`` where the body has another shape
    or the block would hold more than :data:`JAM_MAX` iterations)."""
    body = out.body
    big = [k for k, s in enumerate(body) if isinstance(s, Loop) and s.n > 1 and not s.block]
    inner = max((s.block for s in body if isinstance(s, Loop)), default=0) or 1
    if not 2 <= out.n or out.n * inner > JAM_MAX or len(big) != 1 \
            or body[big[0]].kind != "seq":
        return [out]
    k = big[0]
    rloop = body[k]
    decls = [s for s in body[:k] if isinstance(s, Decl)]
    every = [s for s in walk_stmts(body) if isinstance(s, (Decl, Barrier))]
    if {id(s) for s in every} != {id(d) for d in decls}:
        return [out]
    old = {id(d.buf): d.buf.count for d in decls}
    stores = [s for s in walk_stmts(body) if isinstance(s, Store)]
    if any(isinstance(m, VecMem) and id(m.buf) in old
           for s in stores for m in (s.dest, *leaves_of(s.value))):
        return [out]
    q = out.var

    def moved(v: Leaf) -> Leaf:
        if isinstance(v, Mem) and id(v.buf) in old:
            return Mem(v.buf, v.idx + q * old[id(v.buf)], v.type)
        if isinstance(v, Call):
            return Call(v.fname, tuple(moved(a) for a in v.args), v.type)
        if isinstance(v, Sel):
            return Sel(v.conds, moved(v.then), moved(v.other))
        return v

    for s in stores:
        s.dest = moved(s.dest)  # type: ignore[assignment]  # a Mem stays a Mem
        s.value = moved(s.value)
    for d in decls:
        d.buf.count *= out.n
        d.buf.scalar = False
        if d.buf.sym_count is not None and out.n_sym is not None:
            d.buf.sym_count = d.buf.sym_count * out.n_sym
    parent = out.parent
    pre = [s for s in body[:k] if not isinstance(s, Decl)]
    post = body[k + 1:]

    def block(stmts: list, where: Loop | None) -> Loop:
        lp = Loop("seq", None, q, out.n, out.label, f"{out.what} (register block)",
                  False, stmts, where, n_sym=out.n_sym, block=out.n * inner)
        for x in stmts:
            x.parent = lp
        return lp

    rloop.body = [block(rloop.body, rloop)]
    rloop.parent = parent
    for d in decls:
        d.parent = parent
    return [*decls, block(pre, parent), rloop, block(post, parent)]


def _affine(vz: _Vectoriser, r: Rel) -> bool:
    """``r``'s sides differ by an affine function of the loop variable over one vector."""
    e = r.lhs - r.rhs
    if vz.loop.name not in e.free_vars():
        return True
    base = vz.at(e, 0)
    step = vz.at(e, 1) - base
    return step.is_const and all(vz.at(e, k) - base == step * k for k in range(2, vz.w))


DEFAULT_LANES = (8, 4, 2)
# the most vectors jammed into one loop: a register block (16 accumulators fill half of
# AVX-512's vector registers, all of AVX2's); a longer map in lanes keeps its own loop
JAM_MAX = 16


def default_lanes(n: int, lanes: Sequence[int] = DEFAULT_LANES) -> int:
    """The width a map in lanes of length ``n`` takes where none is given: of ``lanes``
    no wider than ``n``, the one with the fewest operations counting a scalar tail
    (``n // w + n % w``: the tail a map that may not run an iteration twice gets); a tie
    goes to a width dividing ``n``, then to the wider. 1 where ``n`` is below every width."""
    fits = [w for w in lanes if 1 < w <= n]
    if not fits:
        return 1
    return min(fits, key=lambda w: (n // w + n % w, n % w != 0, -w))


def lane_defaults(program: Node, sizes: Mapping[str, int] | None = None) -> dict[str, int]:
    """The widths a program's lanes take where none is given: 1 (no lanes) for a
    strip-mined parallel map (a parallel map whose function is a ``mapVec``) and a
    reduction (``mapper.apply``); for a map in lanes (code V), :func:`default_lanes` of
    its length at ``sizes`` among :data:`DEFAULT_LANES` (8 lanes are native on AVX2 and
    measured as fast as 16 on AVX-512)."""
    out: dict[str, int] = {}
    missing: list[Map] = []
    strip: set[int] = set()
    rows = row_block_sizes(program)
    for n in walk(program):
        if isinstance(n, Reduce) and n.width is not None and n.width.is_var:
            out[n.width.name] = 1
        if isinstance(n, Map) and n.is_parallel and isinstance(n.f, Map) \
                and n.f.width is not None and n.f.width.is_var:
            out[n.f.width.name] = 1
            strip.add(id(n.f))
    for n in walk(program):
        if isinstance(n, Map) and n.width is not None and n.width.is_var \
                and id(n) not in strip and (sizes is None or n.width.name not in sizes):
            missing.append(n)
        if isinstance(n, Split) and n.chunk.is_var and n.chunk.name in rows:
            out[n.chunk.name] = 1  # a row block's rows per iteration
        if isinstance(n, Split) and n.chunk.free_vars() & out.keys():
            for v in n.chunk.free_vars() - out.keys():  # a strip's vectors per iteration
                out[v] = 1
    if missing and sizes is not None:
        from ir.typecheck import typecheck

        info = typecheck(program)
        for m in missing:
            arr = info.map_types.get(id(m), (None,))[0]
            try:
                length = arr.size.evaluate(sizes) if isinstance(arr, ArrayType) else None
            except LiftmapError:
                length = None
            if length:
                assert m.width is not None
                out[m.width.name] = default_lanes(length)
    return out


def row_block_sizes(program: Node) -> set[str]:
    """The sizes that give a row-blocked map its rows per iteration (``mapper.apply``'s
    ``split(uA)`` feeding a parallel map whose body holds a map in one lane, ``mapVec(1)``)."""
    out = set()
    for n in walk(program):
        if isinstance(n, FunCall) and isinstance(n.f, Map) and n.f.is_parallel \
                and len(n.args) == 1 and isinstance(n.args[0], FunCall) \
                and isinstance(n.args[0].f, Split) and n.args[0].f.chunk.is_var \
                and any(isinstance(x, Map) and x.kind == "mapVec" and x.width is not None
                        and x.width.is_const and x.width.as_int() == 1 for x in walk(n.f.f)):
            out.add(n.args[0].f.chunk.name)
    return out


def vectorise_loops(stmts: list, fns: Functions) -> None:
    """Rewrites, in place, every loop of ``stmts`` with a width (a mapVec or a reduction;
    see the module docstring). The vector registers it declares are not private arrays:
    the private budget does not count them."""

    def visit(lst: list) -> None:
        k = 0
        while k < len(lst):
            s = lst[k]
            if not isinstance(s, Loop):
                k += 1
                continue
            if s.kind == "seq" and s.is_map and s.width_sym is not None and s.width == 1:
                visit(s.body)  # a map in one lane: its iterations a register block
                repl = jam(s)
                lst[k:k + 1] = repl
                k += len(repl)
                continue
            if s.kind == "seq" and s.width > 1:
                if s.reduce_acc is not None:
                    if s.n % s.width:
                        raise UnvectorizableError(
                            f"{s.what}: {s.n} iterations are not a multiple of the vector "
                            f"width {s.width} (a reduction in lanes has no tail)")
                    visit(s.body)  # (no loop in lanes inside: the reduce's f has no map)
                    repl = _Vectoriser(s, fns).reduction()
                    lst[k:k + 1] = repl
                    k += len(repl)
                    continue
                if s.n < s.width:
                    raise UnvectorizableError(
                        f"{s.what}: {s.n} iterations, fewer than the vector width {s.width}; "
                        f"give it a width of at most {s.n}")
                rest = s.n % s.width
                shift = s.width - rest if rest and recomputable(s) else 0
                tail = _scalar_tail(s, fns, visit) if rest and not shift else []
                visit(s.body)  # register blocks inside jam first
                vz = _Vectoriser(s, fns, shift)
                repl = jam(vz.run()) + tail
                lst[k:k + 1] = repl
                k += len(repl)
                continue
            else:
                visit(s.body)
            k += 1

    visit(stmts)


def _scalar_tail(lp: Loop, fns: Functions, visit: Callable[[list], None]) -> list:
    """The iterations of the map in lanes ``lp`` past its last whole vector, one by one:
    statements to follow its vector loop (where running an iteration twice is not safe;
    elsewhere the last vector moves back instead: :class:`_Vectoriser`'s ``shift``)."""
    n, w = lp.n, lp.width
    start, rest = n - n % w, n % w
    t = vw.register_var(Var(fns.fresh(f"{lp.name}_t"), 0, rest - 1))
    scalar = Loop("seq", None, t, rest, lp.label,
                  f"{lp.what}, its last {rest} iterations one by one (the tail)", lp.is_map,
                  [], lp.parent, n_sym=sym(rest))
    scalar.body = clone_stmts(lp.body, scalar, {lp.name: t + start}, fns.fresh)
    visit(scalar.body)
    return [scalar]


def recomputable(lp: Loop) -> bool:
    """Whether running some iterations of the map ``lp`` a second time leaves what it
    computes unchanged: no buffer its body writes, other than the private values each
    iteration declares, is read by its body (a map's iterations write apart, so an
    iteration run again writes the same values again)."""
    own = {id(s.buf) for s in walk_stmts(lp.body) if isinstance(s, Decl)}
    stores = [s for s in walk_stmts(lp.body) if isinstance(s, Store)]
    written = {id(s.dest.buf) for s in stores} - own
    return lp.is_map and not any(
        id(m.buf) in written for s in stores for m in leaves_of(s.value))
