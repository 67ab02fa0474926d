"""The OpenCL C printer of a kernel's statement tree.

The tree (:class:`Loop`, :class:`Store`, :class:`Decl`, :class:`Barrier`) is
:mod:`codegen.stmt`'s; its names are importable from here as well. The printer turns it
into OpenCL C:

* a distributed loop is ``for (int i = get_local_id(0); i < n; i += get_local_size(0))``,
  an ``if (i < n)`` when each work-item has at most one iteration, and a plain declaration
  when the trip count equals the number of threads (GPGPU'20 Listing 2);
* a sequential loop of at most :data:`UNROLL_MAX` iterations that indexes a private array
  with its variable is fully unrolled (so private arrays can live in registers) when the
  unrolled nest prints at most :data:`UNROLL_BUDGET` statements; otherwise it stays a
  ``for`` loop (its private arrays may then live on the stack); a short nest that uses
  private memory (each loop at most :data:`SHORT_TRIPS` iterations, :data:`SHORT_BUDGET`
  statements unrolled: a stencil's window) is unrolled too;
* user functions become C functions (``uf_<name>``; vectorised ones take ``floatN``);
  vector accesses are ``vloadN``/``vstoreN``; ``fma`` appears only in vector accumulators
  (:mod:`codegen.accumulate`).
"""

from __future__ import annotations

import itertools
import math
import re

from codegen.errors import UnsupportedError
from codegen.private_arrays import independent_nest, vector_private_arrays
from codegen.stmt import Barrier, Decl, Loop, Store, leaves_of, walk_stmts
from codegen.views import Call, Const, Lanes, Leaf, Mem, Sel, VecMem, build_expr
from ir.nodes import UserFun
from ir.sym import Cst, Expr, Rel, Var
from ir.types import ScalarType, Type, VectorType

# the statement tree's names, for the code that imports them from the printer
__all__ = [
    "INTERCHANGE_MAX", "SHORT_BUDGET", "SHORT_TRIPS", "THREAD_FUNS", "UNROLL_BUDGET",
    "UNROLL_MAX", "Barrier", "Decl",
    "Loop", "Printer", "Store", "c_literal", "c_type", "kernel_source", "leaves_of",
    "split_invariant", "touches_private_array", "unrolled_size", "user_fun_source",
    "walk_stmts",
]

UNROLL_MAX = 64  # most iterations of one unrolled loop
UNROLL_BUDGET = 1024  # most statements an unrolled loop nest may print
# a nest of loops of at most SHORT_TRIPS iterations each, printing at most SHORT_BUDGET
# statements unrolled and using private memory (a stencil's 3x3 window, its register block
# inside), is unrolled whatever it indexes: PoCL's compiler left such loops rolled, and the
# tiled Harris ran its gradients 1.3x slower so (2.64 against 1.99 ms, Zen 5). One using
# global memory alone stays rolled: a transpose's block of 4 vectors, unrolled, left its
# 16-row loop innermost, which LLVM vectorised into scattered stores (16 against 5.7 ms)
SHORT_TRIPS = 4
SHORT_BUDGET = 96
# most iterations of an unrolled nest the printer considers interchanging: a register block
# (codegen.private_arrays) larger than this does not fit the registers anyway
INTERCHANGE_MAX = 256

THREAD_FUNS = {
    "glb": ("get_global_id", "get_global_size"),
    "wrg": ("get_group_id", "get_num_groups"),
    "lcl": ("get_local_id", "get_local_size"),
}


# ------------------------------------------------------------------------- C text


def c_type(t: Type) -> str:
    """OpenCL C name of a scalar or vector type."""
    if isinstance(t, ScalarType):
        return t.name
    if isinstance(t, VectorType):
        w = t.width.as_int()
        return t.elem.name if w == 1 else f"{t.elem.name}{w}"
    raise UnsupportedError(f"type {t} has no OpenCL C equivalent for a user function")


def c_literal(value: float | int, t: Type) -> str:
    """A C literal (a vector literal broadcasts)."""
    scalar = t.elem if isinstance(t, VectorType) else t
    if isinstance(scalar, ScalarType) and scalar.name == "int":
        text = str(int(value))
    else:
        v = float(value)
        if math.isnan(v):
            text = "NAN"
        elif math.isinf(v):
            text = "INFINITY" if v > 0 else "(-INFINITY)"
        else:
            r = repr(v)
            text = (r if ("." in r or "e" in r) else r + ".0") + "f"
            if v < 0:
                text = f"({text})"
    if isinstance(t, VectorType) and t.width.as_int() > 1:
        return f"(({c_type(t)})({text}))"
    return text


def user_fun_source(fname: str, uf: UserFun, arg_types: tuple[Type, ...], out: Type) -> str:
    """A C function from ``UserFun.c_body`` for concrete (scalar or vector) argument types."""
    params = ", ".join(f"{c_type(t)} {p}" for t, p in zip(arg_types, uf.param_names))
    body = uf.c_body.strip()
    if "return" not in body:
        body = f"return {body.rstrip(';')};"
    helpers = ""
    wide = {t.width.as_int() for t in arg_types
            if isinstance(t, VectorType) and t.width.as_int() > 4}
    if wide and re.search(r"\bdot\s*\(", body):
        (w,) = wide  # OpenCL's dot() stops at 4 lanes: sum the halves' dots
        body = re.sub(r"\bdot\s*\(", f"{fname}_dot{w}(", body)
        halves = ("lo", "hi") if w == 8 else ("lo.lo", "lo.hi", "hi.lo", "hi.hi")
        terms = " + ".join(f"dot(a.{h}, b.{h})" for h in halves)
        helpers = (f"float {fname}_dot{w}(float{w} a, float{w} b) {{ return {terms}; }}\n")
    return f"{helpers}{c_type(out)} {fname}({params}) {{ {body} }}"


class Printer:
    """Prints one kernel's statements (see the module docstring)."""

    def __init__(self, indent: str = "  "):
        self.lines: list[str] = []
        self.ind = indent
        self.hoisted: list[tuple[frozenset, dict, int]] = []  # per enclosing for loop
        self.nhoist = 0
        # Memo tables, valid for one kernel: the printer is a pure function of the
        # statement tree and index variables keep one range while it runs, so an index,
        # a split or a size is computed once per distinct argument (issue 9: lowering time)
        self._serial = itertools.count()
        self._hkey: tuple = ()  # serials of the enclosing loops that hoisted something
        self._index: dict = {}
        self._split: dict = {}
        self._terms: dict = {}
        self._vec: dict = {}
        self._touches: dict[int, bool] = {}
        self._sizes: dict[int, int] = {}
        self._short: dict[int, bool] = {}
        # private scalar arrays printed as arrays of vectors: {name: width}
        self.vector_arrays: dict[str, int] = {}
        # global buffers whose aligned vector stores are non-temporal (codegen.streaming)
        self.streamed: frozenset[str] = frozenset()

    def index(self, e: Expr, env: dict) -> Expr:
        """``e`` with the loop-invariant parts hoisted above the enclosing ``for`` loops
        replaced by their ``int`` variables."""
        if env:
            fv = e.free_vars()
            sub = tuple(sorted((k, v) for k, v in env.items() if k in fv))
        else:
            sub = ()
        key = (e, sub, self._hkey)
        hit = self._index.get(key)
        if hit is not None:
            return hit
        if sub:
            e = e.subs(dict(sub))
        for inner, names, _ in self.hoisted:
            if not names:
                continue
            inv, rest = self.split(e, inner)
            if inv is not None:
                name = names.get(str(inv))
                if name is not None:
                    e = Var(name) + rest
        self._index[key] = e
        return e

    def split(self, e: Expr, inner: frozenset) -> tuple[Expr | None, Expr]:
        """:func:`split_invariant`, memoised for this kernel."""
        key = (e, inner)
        hit = self._split.get(key)
        if hit is None:
            hit = self._split[key] = split_invariant(e, inner, self._terms)
        return hit

    def touches(self, lp: Loop) -> bool:
        """:func:`touches_private_array`, memoised for this kernel."""
        hit = self._touches.get(id(lp))
        if hit is None:
            hit = self._touches[id(lp)] = touches_private_array(lp)
        return hit

    def unrolled_size(self, lp: Loop) -> int:
        """:func:`unrolled_size`, memoised for this kernel."""
        hit = self._sizes.get(id(lp))
        if hit is None:
            hit = self._sizes[id(lp)] = lp.n * sum(self._printed_size(s) for s in lp.body)
        return hit

    def _printed_size(self, s) -> int:
        if not isinstance(s, Loop):
            return 1
        if self.unrolls(s):
            return self.unrolled_size(s)
        return 1 + sum(self._printed_size(x) for x in s.body)

    def unrolls(self, lp: Loop) -> bool:
        """Whether the printer unrolls the sequential loop ``lp``: one that indexes a private
        array with its variable (:data:`UNROLL_MAX`, :data:`UNROLL_BUDGET`), or a short
        loop whose inner loops all unroll (:meth:`short`: a stencil's window)."""
        if lp.kind != "seq":
            return False
        if lp.n <= UNROLL_MAX and self.touches(lp) and self.unrolled_size(lp) <= UNROLL_BUDGET:
            return True
        return self.short(lp)

    def short(self, lp: Loop) -> bool:
        """Whether ``lp`` runs at most :data:`SHORT_TRIPS` iterations, holds no barrier, its
        inner loops all unroll, it prints at most :data:`SHORT_BUDGET` statements unrolled
        and it reads or writes private memory (memoised for this kernel)."""
        hit = self._short.get(id(lp))
        if hit is None:
            hit = self._short[id(lp)] = lp.kind == "seq" and lp.n <= SHORT_TRIPS and all(
                self.unrolls(x) for x in lp.body if isinstance(x, Loop)) \
                and not any(isinstance(x, Barrier) for x in lp.body) \
                and self.unrolled_size(lp) <= SHORT_BUDGET and _uses_private(lp)
        return hit

    def expr(self, e: Expr, env: dict) -> str:
        return self.index(e, env).to_c()

    def hoist(self, lp: Loop, depth: int, env: dict) -> None:
        """Declares, before the ``for`` loop ``lp``, one ``int`` per distinct loop-invariant
        part of the global and local indices in its body (CSE + LICM done here, so that the
        loop keeps only the part that depends on its variables)."""
        inner = frozenset(x.name for x in walk_stmts([lp]) if isinstance(x, Loop))
        names: dict[str, str] = {}
        for s in walk_stmts(lp.body):
            if not isinstance(s, Store):
                continue
            for leaf in (s.dest, *leaves_of(s.value)):
                if leaf.buf.space == "private":
                    continue
                inv, _ = self.split(self.index(leaf.idx, env), inner)
                if inv is None or str(inv) in names or not _worth_hoisting(inv):
                    continue
                name = names[str(inv)] = f"lm_ix{self.nhoist}"
                self.nhoist += 1
                self.emit(f"int {name} = {inv.to_c()};", depth)
        serial = next(self._serial)
        self.hoisted.append((inner, names, serial))
        if names:
            self._hkey = (*self._hkey, serial)

    def unhoist(self) -> None:
        """Leaves the ``for`` loop whose hoisted names are the last ones pushed."""
        _, names, serial = self.hoisted.pop()
        if names:
            assert self._hkey[-1] == serial
            self._hkey = self._hkey[:-1]

    def leaf(self, v: Leaf, env: dict) -> str:
        if isinstance(v, Mem):
            if v.buf.scalar:
                return v.buf.cname
            return f"{v.buf.cname}[{self.expr(v.idx, env)}]"
        if isinstance(v, VecMem):
            if v.width == 1:
                return f"{v.buf.cname}[{self.expr(v.idx, env)}]"
            if v.buf.name in self.vector_arrays:
                return f"{v.buf.cname}[{self.vector_slot(v, env)}]"
            off, base = self.vec_addr(v, env)
            return f"vload{v.width}({off}, {base})"
        if isinstance(v, Const):
            return c_literal(v.value, v.type)
        if isinstance(v, Call):
            if v.fname.startswith("."):  # a vector's component (codegen.lanes: a scatter)
                return f"({self.leaf(v.args[0], env)}){v.fname}"
            return f"{v.fname}({', '.join(self.leaf(a, env) for a in v.args)})"
        if isinstance(v, Sel):
            conds = [c.subs(env) if env else c for c in v.conds]
            if any(c.is_trivially_false for c in conds):
                return self.leaf(v.other, env)
            conds = [c for c in conds if not c.is_trivially_true]
            if not conds:
                return self.leaf(v.then, env)
            test = " && ".join(_rel_c(c) for c in conds)
            return f"(({test}) ? {self.leaf(v.then, env)} : {self.leaf(v.other, env)})"
        if isinstance(v, Lanes):
            raise UnsupportedError("internal: unresolved vector lanes reached the printer")
        raise UnsupportedError(f"internal: cannot print {type(v).__name__}")

    def vec_addr(self, v: VecMem, env: dict) -> tuple[str, str]:
        idx = self.index(v.idx, env)
        w = v.width
        key = (idx, w)
        hit = self._vec.get(key)
        if hit is None:
            q = idx // w
            if q * w == idx:
                hit = (q.to_c(), "")
            elif idx == 0:
                hit = ("0", "")
            else:
                hit = ("0", f" + {idx.to_c()}")
            self._vec[key] = hit
        return hit[0], v.buf.cname + hit[1]

    def aligned(self, v: VecMem, env: dict) -> bool:
        """Whether ``v``'s index is a multiple of its width for every value of the loop
        variables (read before hoisting: a hoisted part is an opaque name)."""
        e = v.idx.subs({k: x for k, x in env.items() if k in v.idx.free_vars()}) \
            if env else v.idx
        return (e // v.width) * v.width == e

    def vector_slot(self, v: VecMem, env: dict) -> str:
        """The element of a vector private array that ``v`` reads or writes."""
        return (self.index(v.idx, env) // v.width).to_c()

    def emit(self, line: str, depth: int) -> None:
        self.lines.append(self.ind * depth + line)

    def stmts(self, stmts: list, depth: int, env: dict) -> None:
        for s in stmts:
            self.stmt(s, depth, env)

    def stmt(self, s, depth: int, env: dict) -> None:
        if isinstance(s, Store):
            self.store(s, depth, env)
        elif isinstance(s, Decl):
            b = s.buf
            w = self.vector_arrays.get(b.name)
            if b.scalar:
                self.emit(f"{b.dtype} {b.cname};", depth)
            elif w:
                self.emit(f"{b.dtype}{w} {b.cname}[{b.count // w}];", depth)
            else:
                self.emit(f"{b.dtype} {b.cname}[{b.count}];", depth)
        elif isinstance(s, Barrier):
            fences = " | ".join(sorted(f"CLK_{f.upper()}_MEM_FENCE" for f in s.fences))
            why = f"  // {s.why}" if s.why else ""
            self.emit(f"barrier({fences});{why}", depth)
        elif isinstance(s, Loop):
            self.loop(s, depth, env)
        else:
            raise UnsupportedError(f"internal: unknown statement {type(s).__name__}")

    def store(self, s: Store, depth: int, env: dict) -> None:
        test = ""
        if s.conds:
            conds = [c.subs(env) if env else c for c in s.conds]
            if any(c.is_trivially_false for c in conds):
                return  # written nowhere here (cropped away)
            conds = [c for c in conds if not c.is_trivially_true]
            if conds:
                test = f"if ({' && '.join(_rel_c(c) for c in conds)}) "
        value = self.leaf(s.value, env)
        d = s.dest
        if isinstance(d, Mem):
            self.emit(f"{test}{self.leaf(d, env)} = {value};", depth)
        elif isinstance(d, VecMem) and d.width == 1:
            self.emit(f"{test}{d.buf.cname}[{self.expr(d.idx, env)}] = {value};", depth)
        elif isinstance(d, VecMem) and d.buf.name in self.vector_arrays:
            self.emit(f"{test}{d.buf.cname}[{self.vector_slot(d, env)}] = {value};", depth)
        elif isinstance(d, VecMem):
            if d.buf.name in self.streamed and self.aligned(d, env):
                at = self.index(d.idx, env)
                ptr = f"(__global {d.buf.dtype}{d.width}*)" + (
                    d.buf.cname if at == 0 else f"({d.buf.cname} + {at.to_c()})")
                self.emit(f"{test}__builtin_nontemporal_store({value}, {ptr});", depth)
            else:
                off, base = self.vec_addr(d, env)
                self.emit(f"{test}vstore{d.width}({value}, {off}, {base});", depth)
        else:
            raise UnsupportedError(f"internal: cannot store into {type(d).__name__}")

    def loop(self, lp: Loop, depth: int, env: dict) -> None:
        v, n = lp.name, lp.n
        if lp.kind == "seq":
            if n == 1:
                self.emit(f"{{ // {lp.what}: one iteration", depth)
                self.stmts(lp.body, depth + 1, {**env, v: 0})
                self.emit("}", depth)
            elif self.unrolls(lp):
                inner = lp.body[0] if len(lp.body) == 1 else None
                if isinstance(inner, Loop) and n < inner.n <= UNROLL_MAX and \
                        n * inner.n <= INTERCHANGE_MAX and independent_nest(lp, env):
                    self.emit(f"// {inner.what} ({inner.name} = 0..{inner.n - 1}) around "
                              f"{lp.what} ({v} = 0..{n - 1}), unrolled and interchanged: "
                              "independent iterations", depth)
                    for j in range(inner.n):
                        for k in range(n):
                            self.stmts(inner.body, depth, {**env, v: k, inner.name: j})
                    return
                self.emit(f"// {lp.what}: unrolled, {v} = 0..{n - 1}", depth)
                scoped = any(isinstance(x, Decl) for x in lp.body)
                for k in range(n):
                    if scoped:
                        self.emit("{", depth)
                    self.stmts(lp.body, depth + scoped, {**env, v: k})
                    if scoped:
                        self.emit("}", depth)
            else:
                self.hoist(lp, depth, env)
                self.emit(f"for (int {v} = 0; {v} < {n}; {v} += 1) {{ // {lp.what}", depth)
                self.stmts(lp.body, depth + 1, env)
                self.emit("}", depth)
                self.unhoist()
            return
        idf, sizef = THREAD_FUNS[lp.kind]
        t = lp.threads
        if t is None:
            raise UnsupportedError(f"internal: {lp.what} has no thread count")
        if t == n:
            self.emit(f"{{ // {lp.what}: one iteration per thread", depth)
            self.emit(f"int {v} = {idf}({lp.dim});", depth + 1)
            self.stmts(lp.body, depth + 1, env)
            self.emit("}", depth)
        elif t > n:
            self.emit(f"{{ // {lp.what}: at most one iteration per thread", depth)
            self.emit(f"int {v} = {idf}({lp.dim});", depth + 1)
            self.emit(f"if ({v} < {n}) {{", depth + 1)
            self.stmts(lp.body, depth + 2, {**env, v: 0} if n == 1 else env)
            self.emit("}", depth + 1)
            self.emit("}", depth)
        else:
            self.emit(f"for (int {v} = {idf}({lp.dim}); {v} < {n}; {v} += {sizef}({lp.dim})) "
                      f"{{ // {lp.what}", depth)
            self.stmts(lp.body, depth + 1, env)
            self.emit("}", depth)


def _worth_hoisting(inv: Expr) -> bool:
    """Hoist what costs more than one multiply-add: divisions, remainders, several
    variables (a single ``16*i`` stays in place, as the compiler handles it alike)."""
    c = inv.to_c()
    return "/" in c or "%" in c or len(inv.free_vars()) > 1


def split_invariant(e: Expr, inner: frozenset,
                    terms: dict[tuple, Expr] | None = None) -> tuple[Expr | None, Expr]:
    """``(inv, rest)`` with ``e = inv + rest``: ``inv`` the sum of the non-constant terms of
    ``e`` that use no variable of ``inner`` (None when there are none). ``terms``: a memo
    of :func:`codegen.views.build_expr` by term tree, valid while the index variables
    keep their ranges (one kernel)."""
    fv = e.free_vars()
    if not fv or fv <= inner:
        return None, e
    if not fv & inner:
        c = e.subs({x: 0 for x in fv}) if e.to_tree()[0] == "add" else None
        if c is not None and c.is_const and (e - c).free_vars() == fv:
            return e - c, c
        return e, Cst(0)
    tree = e.to_tree()
    if tree[0] != "add":
        return None, e
    inv, rest = Cst(0), Cst(0)
    for item in tree[1]:
        if terms is None:
            x = build_expr(item)
        else:
            hit = terms.get(item)
            if hit is None:
                hit = terms[item] = build_expr(item)
            x = hit
        if x.free_vars() and not x.free_vars() & inner:
            inv = inv + x
        else:
            rest = rest + x
    if not inv.free_vars():
        return None, e
    return inv, rest


def _rel_c(r: Rel) -> str:
    return f"{r.lhs.to_c()} {r.op} {r.rhs.to_c()}"


def unrolled_size(lp: Loop) -> int:
    """Statements the printer emits for ``lp`` when it unrolls it (and every nested loop it
    would unroll): the code-size measure the unrolling is capped by."""
    return lp.n * sum(_printed_size(s) for s in lp.body)


def _printed_size(s) -> int:
    if not isinstance(s, Loop):
        return 1
    if s.kind == "seq" and s.n <= UNROLL_MAX and touches_private_array(s):
        size = unrolled_size(s)
        if size <= UNROLL_BUDGET:
            return size
    return 1 + sum(_printed_size(x) for x in s.body)


def _uses_private(lp: Loop) -> bool:
    """Whether a statement in ``lp`` reads or writes private memory."""
    return any(isinstance(s, Store) and any(x.buf.space == "private"
                                            for x in (s.dest, *leaves_of(s.value)))
               for s in walk_stmts(lp.body))


def touches_private_array(lp: Loop) -> bool:
    """True when the loop body indexes a private array with the loop's variable."""
    name = lp.name
    for s in walk_stmts(lp.body):
        if isinstance(s, Store):
            for leaf in (s.dest, *leaves_of(s.value)):
                if isinstance(leaf, (Mem, VecMem)) and leaf.buf.space == "private" \
                        and not leaf.buf.scalar and name in leaf.idx.free_vars():
                    return True
    return False


def kernel_source(
    name: str,
    header: list[str],
    functions: list[str],
    args: list,
    written: set,
    local_bufs: list,
    body: list,
    streamed: frozenset[str] = frozenset(),
) -> str:
    """The complete OpenCL C source of one kernel; its aligned vector stores into
    ``streamed`` buffers are non-temporal (``codegen.streaming``)."""
    p = Printer()
    p.vector_arrays = vector_private_arrays(body)
    p.streamed = streamed
    for h in header:
        p.emit(f"// {h}", 0)
    for f in functions:
        p.emit(f, 0)
    params = []
    for b in args:
        # restrict only on read-only buffers: NVIDIA's compiler may load a restrict buffer
        # through a path that misses other work-items' writes, even after a barrier
        qual = "" if b.name in written else "const "
        tail = "" if b.name in written else " restrict"
        params.append(f"{qual}__global {b.dtype}*{tail} {b.cname}")
    p.emit(f"__kernel void {name}({', '.join(params)}) {{", 0)
    for b in local_bufs:
        p.emit(f"__local {b.dtype} {b.cname}[{b.count}];", 1)
    p.stmts(body, 1, {})
    p.emit("}", 0)
    return "\n".join(p.lines) + "\n"
