"""Lowering: a mapped (low-level) program and concrete sizes to OpenCL kernels.

``lower(program, sizes)`` walks the program once, like LIFT's code generator (CC'22 5.1,
GPGPU'20 3.3):

* layout primitives build views (:mod:`codegen.views`) and emit nothing;
* a map that computes becomes a loop (:mod:`codegen.emit`); its result is written through
  the *output view* of its consumer (``join o mapA(..)`` writes ``out[i*m + j]``), or,
  when another computation consumes it, into a temporary (:mod:`codegen.memory`);
* ``reduce`` is a sequential loop over a private accumulator; user functions become C
  functions;
* top-level map nests that communicate through a global temporary become consecutive
  kernels (the kernel boundary is the global barrier OpenCL lacks);
* then each kernel gets its launch sizes (:mod:`codegen.launch`), its barriers and checks
  (:mod:`codegen.barriers`) and its source.

Any mapping that cannot run correctly raises one of :mod:`codegen.errors`.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Mapping

from codegen import barriers as bar
from codegen import views as vw
from codegen.accumulate import vector_accumulate
from codegen.emit import (
    Decl,
    Loop,
    Store,
    c_type,
    kernel_source,
    leaves_of,
    user_fun_source,
    walk_stmts,
)
from codegen.errors import (
    LocalMemoryError,
    LoweringError,
    MaxAllocationError,
    MemoryScopeError,
    ParallelNestingError,
    PrivateMemoryError,
    UnmappedMapError,
    UnsupportedError,
)
from codegen.launch import FREE_GROUP_MOST, configure, fit_private_local_size
from codegen.memory import (
    Buf,
    components,
    dtype_of,
    has_tuple,
    infer_space,
    natural_view,
    recombine,
    size_of,
    size_of_sym,
)
from codegen.program import Buffer, CompiledProgram, Kernel
from codegen.resources import (
    Resource,
    global_resources,
    kernel_features,
    kernel_resources,
    program_features,
)
from codegen.target import DEFAULT_DEVICE, Device
from codegen.views import ArrV, Leaf, TupV, View
from ir.computes import computes
from ir.nodes import (
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
    walk,
)
from ir.sym import Cst, Expr, Var, sym
from ir.typecheck import TypeInfo, typecheck
from ir.types import ArrayType, ScalarType, Type, VectorType

_LAYOUT = (Split, Join, Transpose, Slide, Pad, ReorderStride, AsVector, AsScalar)
_KINDS = {"mapSeq": "seq", "mapGlb": "glb", "mapWrg": "wrg", "mapLcl": "lcl"}
_C_RESERVED = frozenset("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while kernel __kernel global __global local __local
private __private constant __constant read_only write_only bool half uchar ushort uint ulong
barrier""".split())


class _Thunk:
    """A lambda argument kept unevaluated so its single use can write through a view."""

    __slots__ = ("expr", "env", "value", "consumed")

    def __init__(self, expr: ExprNode, env: dict):
        self.expr, self.env = expr, env
        self.value: View | None = None
        self.consumed = False


class Builder:
    """Builds the statement tree of a program (before it is cut into kernels)."""

    def __init__(self, program: Lambda, sizes: Mapping[str, int], info: TypeInfo | None = None):
        self.sizes = dict(sizes)
        self.info = info if info is not None else typecheck(program, self.sizes)
        self.top: list = []
        self.block = self.top
        self.loops: list[Loop] = []
        self.bufs: list[Buf] = []
        self.funs: dict[tuple, tuple[str, str]] = {}
        self.names: set[str] = set(_C_RESERVED)
        self.count = itertools.count()
        self.map_of: dict[int, str] = {}
        self.fun_of: dict[str, UserFun] = {}  # C function name -> user function
        self._computes: dict[int, bool] = {}
        self.inputs: list[Buf] = []
        self.out_buf: Buf | None = None
        self.out_t: Type | None = None

    # ---------------------------------------------------------------- helpers
    def fresh(self, base: str) -> str:
        name = base
        while name in self.names:
            name = f"{base}_{next(self.count)}"
        self.names.add(name)
        return name

    def ctype(self, node: ExprNode) -> Type:
        try:
            t = self.info.types[id(node)]
        except KeyError:
            raise UnsupportedError("internal: no type for an expression") from None
        return t.subs(self.sizes) if t.free_vars() else t

    def ival(self, e: Expr) -> int:
        return e.evaluate(self.sizes) if e.free_vars() else e.as_int()

    def computes(self, node) -> bool:
        k = id(node)
        r = self._computes.get(k)
        if r is None:
            r = self._computes[k] = computes(node)
        return r

    def add(self, stmt) -> None:
        stmt.parent = self.loops[-1] if self.loops else None
        self.block.append(stmt)

    @contextlib.contextmanager
    def loop(self, kind: str, dim: int | None, n: int, base: str, what: str, label: str = "",
             is_map: bool = False, n_sym: Expr | None = None):
        name = self.fresh(base)
        lp = Loop(kind, dim, vw.register_var(Var(name, 0, max(n, 1) - 1)), n, label, what,
                  is_map, n_sym=n_sym)
        self.add(lp)
        saved = self.block
        self.loops.append(lp)
        self.block = lp.body
        try:
            yield lp
        finally:
            self.loops.pop()
            self.block = saved

    # ---------------------------------------------------------------- memory
    def alloc(self, t: Type, space: str, label: str, role: str = "temp",
              sym_t: Type | None = None) -> View:
        """A fresh buffer (one per tuple component) for a value of type ``t``; ``sym_t`` is
        the same type in the program's symbolic sizes (it gives ``Buf.sym_count``)."""
        views = []
        sym_cs = components(sym_t) if sym_t is not None else None
        if sym_cs is not None and len(sym_cs) != len(components(t)):
            sym_cs = None
        for ci, c in enumerate(components(t)):
            count = size_of(c)
            if space == "global":
                exp = tuple(self.loops)
            elif space == "local":
                glb = [lp for lp in self.loops if lp.kind == "glb"]
                exp = tuple(lp for lp in self.loops if lp.kind == "lcl")
            else:
                exp = ()
            prefix: Expr = Cst(0)
            mult = 1
            for lp in exp:
                prefix = prefix * lp.n + lp.var
                mult *= lp.n
            base = {"global": "tmp", "local": "lcl", "private": "prv"}[space]
            if role == "acc":
                base = "acc"
            name = self.fresh(f"{base}{label}" if label else base)
            buf = Buf(name, space, dtype_of(c), count * mult, role, label,
                      scalar=(space == "private" and isinstance(c, ScalarType)),
                      alloc_loops=tuple(self.loops), expanded_by=exp,
                      sym_count=self._sym_count(sym_cs[ci] if sym_cs else None, exp,
                                                count * mult))
            if space == "local":
                buf.glb_dims = frozenset(lp.dim for lp in glb)
            self.bufs.append(buf)
            if space == "private":
                self.add(Decl(buf))
            views.append(natural_view(c, buf, prefix * count))
        return recombine(t, views)

    def _sym_count(self, c: Type | None, exp: tuple, count: int) -> Expr | None:
        """The symbolic scalar count of a buffer of component type ``c`` replicated over the
        loops ``exp``; None when a part is unknown or it disagrees with ``count`` here."""
        if c is None or any(lp.n_sym is None for lp in exp):
            return None
        e = size_of_sym(c)
        for lp in exp:
            e = e * lp.n_sym
        try:
            ok = self.ival(e) == count
        except Exception:  # a size the symbolic form cannot evaluate: not known symbolically
            ok = False
        return e if ok else None

    def map_types(self, f: Map | Reduce) -> tuple[ArrayType, ArrayType] | None:
        """The input and output array types of a map or reduce in the program's symbolic
        sizes (None: not known)."""
        mt = self.info.map_types.get(id(f))
        if mt is None:
            return None
        arr, out = mt
        assert isinstance(arr, ArrayType) and isinstance(out, ArrayType)  # as typecheck sets
        return arr, out

    def symtype(self, node: ExprNode) -> Type | None:
        """The type of ``node`` in the program's symbolic sizes."""
        return self.info.types.get(id(node))

    def materialize(self, e: FunCall, env: dict) -> View:
        t = self.ctype(e)
        space = infer_space(e) or "global"
        label = e.f.label if isinstance(e.f, Map) and e.f.label else ""
        dest = self.alloc(t, space, label, sym_t=self.symtype(e))
        self.emit_into(e, env, dest)
        return dest

    # ---------------------------------------------------------------- stores
    def where(self) -> str:
        lp = next((x for x in reversed(self.loops) if x.is_map), None)
        return f" in {lp.what}" if lp is not None else ""

    def store(self, dest: View, value: View) -> None:
        if isinstance(value, vw.Lanes):
            value = vw.resolve_vector(value, "vector load" + self.where())
        if isinstance(dest, vw.Lanes):
            dest = vw.resolve_vector(dest, "vector store" + self.where())
        if isinstance(dest, (ArrV, TupV)) or isinstance(value, (ArrV, TupV)):
            self.copy_into(dest, value)
            return
        if not isinstance(dest, (vw.Mem, vw.VecMem)):
            raise UnsupportedError(
                f"cannot write into a {type(dest).__name__} view (padding or a constant); "
                "write the value before padding it")
        assert isinstance(value, Leaf)  # a view is an ArrV, a TupV or a Leaf
        if isinstance(dest.type, VectorType) != isinstance(value.type, VectorType):
            raise UnsupportedError(f"cannot store a {value.type} into a {dest.type}")
        self.add(Store(dest, value))

    def copy_into(self, dest: View, src: View) -> None:
        """``dest = src`` element by element (sequential loops)."""
        if isinstance(dest, ArrV):
            if not isinstance(src, ArrV) or src.n != dest.n:
                raise UnsupportedError(f"cannot copy {src.type} into {dest.type}")
            with self.loop("seq", None, dest.n, "c", "copy") as lp:
                self.copy_into(dest.get(lp.var), src.get(lp.var))
        elif isinstance(dest, TupV):
            if not isinstance(src, TupV) or len(src.elems) != len(dest.elems):
                raise UnsupportedError(f"cannot copy {src.type} into {dest.type}")
            for d, s in zip(dest.elems, src.elems):
                self.copy_into(d, s)
        else:
            self.store(dest, src)

    # ---------------------------------------------------------------- user functions
    def call(self, f: UserFun | Vectorize, args: list[View]) -> Leaf:
        uf = f if isinstance(f, UserFun) else f.f
        width = self.ival(f.width) if isinstance(f, Vectorize) else None
        leaves: list[Leaf] = []
        for a in args:
            if isinstance(a, vw.Lanes):
                a = vw.resolve_vector(a, "vector load" + self.where())
            if not isinstance(a, Leaf):
                raise UnsupportedError(
                    f"user function {uf.name} takes scalars or vectors, got {a.type}")
            leaves.append(a)
        if len(leaves) != uf.arity:
            raise UnsupportedError(f"user function {uf.name} takes {uf.arity} arguments")
        out = uf.out_type
        if width is not None and isinstance(out, ScalarType):
            out = VectorType(out, sym(width))
        elif isinstance(out, VectorType) and out.width.free_vars():
            vec = next((a.type for a in leaves if isinstance(a.type, VectorType)), None)
            if vec is None:
                raise UnsupportedError(f"cannot infer the vector width of {uf.name}")
            out = VectorType(out.elem, vec.width)
        arg_types = tuple(a.type for a in leaves)
        key = (uf.name, uf.c_body, tuple(str(t) for t in arg_types), str(out))
        hit = self.funs.get(key)
        if hit is None:
            suffix = ""
            vec = next((t for t in arg_types if isinstance(t, VectorType)), None)
            if vec is not None:
                suffix = f"_v{vec.width.as_int()}"
            fname = self.fresh(f"uf_{uf.name}{suffix}")
            for t in (*arg_types, out):
                c_type(t)  # validates
            hit = self.funs[key] = (fname, user_fun_source(fname, uf, arg_types, out))
            self.fun_of[fname] = uf
        return vw.Call(hit[0], tuple(leaves), out)

    # ---------------------------------------------------------------- values (reads)
    def value(self, e: ExprNode, env: dict) -> View:
        if isinstance(e, Param):
            b = env.get(e.name)
            if b is None:
                raise UnsupportedError(f"parameter {e.name!r} is not bound")
            if isinstance(b, _Thunk):
                if b.value is None:
                    if b.consumed:
                        raise UnsupportedError(f"internal: {e.name} used twice")
                    b.value = self.value(b.expr, b.env)
                return b.value
            return b
        if isinstance(e, Literal):
            return vw.fill(self.ctype(e), e.value)
        if not isinstance(e, FunCall):
            raise UnsupportedError(f"cannot lower {type(e).__name__}")
        f, args = e.f, e.args
        if isinstance(f, Lambda):
            env2 = dict(env)
            for p, a in zip(f.params, args):
                env2[p.name] = self.value(a, env)
            return self.value(f.body, env2)
        if isinstance(f, Map):
            if self.computes(f.f):
                return self.materialize(e, env)
            arr = self._arr(self.value(args[0], env), f)
            return vw.map_view(arr, lambda x: self.apply_value(f.f, [x], env))
        if isinstance(f, Reduce):
            return self.reduce_value(e, env)
        if isinstance(f, ToMem):
            return self.materialize(e, env)
        if isinstance(f, (UserFun, Vectorize)):
            return self.call(f, [self.value(a, env) for a in args])
        if isinstance(f, Id):
            return self.value(args[0], env)
        if isinstance(f, Zip):
            return vw.zip_views([self.value(a, env) for a in args])
        if isinstance(f, Get):
            return vw.get(self.value(args[0], env), f.index)
        if isinstance(f, _LAYOUT):
            return self.layout(f, self.value(args[0], env))
        raise UnsupportedError(f"cannot lower {type(f).__name__}")

    def apply_value(self, f: FunDecl, args: list[View], env: dict) -> View:
        """``f`` applied to views, for functions that compute nothing (view maps)."""
        if isinstance(f, Lambda):
            env2 = dict(env)
            for p, a in zip(f.params, args):
                env2[p.name] = a
            return self.value(f.body, env2)
        if isinstance(f, Map):
            if self.computes(f.f):
                raise UnsupportedError("internal: computing map in a view function")
            arr = self._arr(args[0], f)
            return vw.map_view(arr, lambda x: self.apply_value(f.f, [x], env))
        if isinstance(f, (UserFun, Vectorize)):
            return self.call(f, args)
        if isinstance(f, Id):
            return args[0]
        if isinstance(f, Zip):
            return vw.zip_views(args)
        if isinstance(f, Get):
            return vw.get(args[0], f.index)
        if isinstance(f, _LAYOUT):
            return self.layout(f, args[0])
        raise UnsupportedError(f"cannot apply {type(f).__name__} here")

    def layout(self, f: FunDecl, x: View) -> View:
        x = self._arr(x, f)
        if isinstance(f, Split):
            return vw.split(x, self.ival(f.chunk))
        if isinstance(f, Join):
            return vw.join(x)
        if isinstance(f, Transpose):
            return vw.transpose(x)
        if isinstance(f, Slide):
            return vw.slide(x, self.ival(f.size), self.ival(f.step))
        if isinstance(f, Pad):
            return vw.pad(x, self.ival(f.left), self.ival(f.right), f.value)
        if isinstance(f, ReorderStride):
            return vw.reorder_stride(x, self.ival(f.stride))
        if isinstance(f, AsVector):
            return vw.as_vector(x, self.ival(f.width))
        return vw.as_scalar(x)

    def _arr(self, x: View, f) -> ArrV:
        if not isinstance(x, ArrV):
            raise UnsupportedError(f"{type(f).__name__} of {x.type}: not an array")
        return x

    # ---------------------------------------------------------------- writes
    def needs_dest(self, e: ExprNode, env: dict) -> bool:
        if self.computes(e):
            return True
        return any(isinstance(n, Param) and isinstance(env.get(n.name), _Thunk)
                   and env[n.name].value is None for n in walk(e))

    def emit_into(self, e: ExprNode, env: dict, dest: View) -> None:
        """Emits the code computing ``e`` into the output view ``dest``."""
        if isinstance(e, Param):
            b = env.get(e.name)
            if isinstance(b, _Thunk) and b.value is None and not b.consumed:
                b.consumed = True
                self.emit_into(b.expr, b.env, dest)
                return
            self.copy_into(dest, self.value(e, env))
            return
        if isinstance(e, Literal):
            self.copy_into(dest, self.value(e, env))
            return
        if not isinstance(e, FunCall):
            raise UnsupportedError(f"cannot lower {type(e).__name__}")
        f, args = e.f, e.args
        if isinstance(f, Lambda):
            self.emit_into(f.body, self.bind_for_dest(f, args, env), dest)
        elif isinstance(f, Map):
            if self.computes(f.f):
                self.map_into(f, self._arr(self.value(args[0], env), f), env, dest)
            else:
                inv = None
                if self.needs_dest(args[0], env):
                    inv = self.inverse_map(f, dest, self.ctype(args[0]))
                if inv is not None:
                    self.emit_into(args[0], env, inv)
                else:
                    self.copy_into(dest, self.value(e, env))
        elif isinstance(f, Reduce):
            self.copy_into(dest, self.reduce_value(e, env))
        elif isinstance(f, ToMem):
            g = f.f
            if isinstance(g, Lambda):
                self.emit_into(g.body, self.bind_for_dest(g, args, env), dest)
            else:
                self.apply_into(g, [self.value(a, env) for a in args], env, dest)
        elif isinstance(f, (UserFun, Vectorize)):
            self.store(dest, self.call(f, [self.value(a, env) for a in args]))
        elif isinstance(f, Id):
            self.emit_into(args[0], env, dest)
        elif isinstance(f, Zip):
            d = self._arr(dest, f)
            for k, a in enumerate(args):
                self.emit_into(a, env, vw.unzip(d, k))
        elif isinstance(f, _LAYOUT) and self.needs_dest(args[0], env):
            inv = self.inverse(f, dest, self.ctype(args[0]))
            if inv is not None:
                self.emit_into(args[0], env, inv)
            else:
                self.copy_into(dest, self.value(e, env))
        else:
            self.copy_into(dest, self.value(e, env))

    def bind_for_dest(self, f: Lambda, args, env: dict) -> dict:
        env2 = dict(env)
        for p, a in zip(f.params, args):
            if self.needs_dest(a, env) and _single_spine_use(p.name, f.body):
                env2[p.name] = _Thunk(a, env)
            else:
                env2[p.name] = self.value(a, env)
        return env2

    def apply_into(self, f: FunDecl, args: list[View], env: dict, dest: View) -> None:
        """Emits ``f`` applied to views into ``dest``."""
        if isinstance(f, Lambda):
            env2 = dict(env)
            for p, a in zip(f.params, args):
                env2[p.name] = a
            self.emit_into(f.body, env2, dest)
        elif isinstance(f, Map) and self.computes(f.f):
            self.map_into(f, self._arr(args[0], f), env, dest)
        elif isinstance(f, (UserFun, Vectorize)):
            self.store(dest, self.call(f, args))
        elif isinstance(f, ToMem):
            self.apply_into(f.f, args, env, dest)
        elif isinstance(f, Id):
            self.copy_into(dest, args[0])
        elif isinstance(f, Reduce):
            init = self.map_types(f)
            acc = self.alloc(args[0].type, "private", "", role="acc",
                             sym_t=init[1].elem if init else None)
            self.copy_into(acc, args[0])
            self.reduce_loop(f, acc, self._arr(args[1], f), env)
            self.copy_into(dest, ArrV(1, acc.type, lambda i: acc))
        else:
            self.copy_into(dest, self.apply_value(f, args, env))

    # ---------------------------------------------------------------- inverses
    def inverse(self, f: FunDecl, dest: View, arg_t: Type) -> View | None:
        """The output view of ``x`` when ``f(x)`` is written into ``dest`` (None if ``f``
        cannot be inverted)."""
        if isinstance(f, Id):
            return dest
        if not isinstance(dest, ArrV):
            return None
        if isinstance(f, Join):
            # the argument of a (type-checked) join is an array of arrays
            assert isinstance(arg_t, ArrayType) and isinstance(arg_t.elem, ArrayType)
            return vw.inverse_join(dest, arg_t.elem.size.as_int())
        if isinstance(f, Split):
            return vw.inverse_split(dest)
        if isinstance(f, Transpose):
            return vw.transpose(dest)
        if isinstance(f, AsScalar):
            # the argument of a (type-checked) asScalar is an array of vectors
            assert isinstance(arg_t, ArrayType) and isinstance(arg_t.elem, VectorType)
            return vw.as_vector(dest, arg_t.elem.width.as_int())
        if isinstance(f, AsVector):
            return vw.as_scalar(dest)
        if isinstance(f, ReorderStride):
            return vw.inverse_reorder(dest, self.ival(f.stride))
        if isinstance(f, Map) and not self.computes(f.f):
            return self.inverse_map(f, dest, arg_t)
        if isinstance(f, Lambda) and len(f.params) == 1:
            return self.inverse_body(f.body, f.params[0].name, dest)
        return None

    def inverse_map(self, m: Map, dest: View, arg_t: Type) -> View | None:
        if not isinstance(dest, ArrV) or not isinstance(arg_t, ArrayType):
            return None
        et = arg_t.elem
        probe = self.inverse(m.f, dest.get(0), et)
        if probe is None:
            return None

        def elem(i: Expr) -> View:
            v = self.inverse(m.f, dest.get(i), et)
            assert v is not None  # every element has element 0's structure (the probe)
            return v

        return ArrV(dest.n, et, elem)

    def inverse_body(self, body: ExprNode, pname: str, dest: View) -> View | None:
        while True:
            if isinstance(body, Param):
                return dest if body.name == pname else None
            if not (isinstance(body, FunCall) and len(body.args) == 1):
                return None
            inv = self.inverse(body.f, dest, self.ctype(body.args[0]))
            if inv is None:
                return None
            dest, body = inv, body.args[0]

    # ---------------------------------------------------------------- maps and reduce
    def map_into(self, m: Map, arr: ArrV, env: dict, dest: View) -> None:
        label = m.label or ""
        if m.kind == "map":
            raise UnmappedMapError(
                f"map {label or '(unlabelled)'} computes but has no parallel mapping; apply a "
                "mapping first (mapGlb, mapWrg, mapLcl or mapSeq)")
        kind = _KINDS[m.kind]
        what = f"{m.kind_text()} {label}".rstrip()
        if kind != "seq":
            self.check_nesting(m, kind, what)
        d = self._arr(dest, m)
        if d.n != arr.n:
            raise UnsupportedError(f"internal: {what} writes {arr.n} elements into {d.n}")
        base = f"i_{label}" if label else "i"
        mt = self.map_types(m)
        with self.loop(kind, m.dim, arr.n, base, what, label, is_map=True,
                       n_sym=mt[0].size if mt else None) as lp:
            outer = [f"{x.label}={x.what.split()[0]}" for x in self.loops[:-1]
                     if x.is_map and x.label]
            inside = f" in {', '.join(reversed(outer))}" if outer else ""
            self.map_of[id(lp)] = f"map {label or '?'} ({m.kind_text()}{inside})"
            self.apply_into(m.f, [arr.get(lp.var)], env, d.get(lp.var))

    def check_nesting(self, m: Map, kind: str, what: str) -> None:
        for lp in self.loops:
            if lp.kind in ("glb", "wrg", "lcl") and lp.dim == m.dim:
                if lp.kind == "wrg" and kind == "lcl":
                    continue
                raise ParallelNestingError(
                    f"{what} is nested in {lp.what}, which already distributes dimension "
                    f"{m.dim}; nested maps may share a dimension only as mapWrg(d) around "
                    "mapLcl(d) (CC'22 rules 3 and 6); use another dimension or mapSeq")

    def reduce_value(self, call: FunCall, env: dict) -> View:
        init_e, arr_e = call.args
        init_t = self.ctype(init_e)
        f = init_e.f if isinstance(init_e, FunCall) else None
        fresh = isinstance(f, ToMem) or (isinstance(f, Map) and self.computes(f.f))
        if fresh:
            acc = self.value(init_e, env)
        else:
            iv = self.value(init_e, env)
            acc = self.alloc(init_t, "private", "", role="acc", sym_t=self.symtype(init_e))
            self.copy_into(acc, iv)
        r = call.f
        assert isinstance(r, Reduce)  # reduce_value lowers calls of reduce
        arr = self._arr(self.value(arr_e, env), r)
        self.reduce_loop(r, acc, arr, env)
        return ArrV(1, init_t, lambda i: acc)

    def reduce_loop(self, r: Reduce, acc: View, arr: ArrV, env: dict) -> None:
        with self.loop("seq", None, arr.n, "r", "reduce") as lp:
            self.apply_into(r.f, [acc, arr.get(lp.var)], env, acc)


def _single_spine_use(name: str, body: ExprNode) -> bool:
    uses = sum(1 for n in walk(body) if isinstance(n, Param) and n.name == name)
    return uses == 1 and _on_spine(name, body)


def _on_spine(name: str, e: ExprNode) -> bool:
    """True when ``e`` writes the parameter ``name`` through views only (so its value can
    be written directly into ``e``'s destination)."""
    if isinstance(e, Param):
        return e.name == name
    if not isinstance(e, FunCall):
        return False
    f = e.f
    if isinstance(f, Zip):
        return any(_on_spine(name, a) for a in e.args)
    if isinstance(f, (*_LAYOUT, Id)) or (isinstance(f, Map) and not computes(f.f)):
        return _on_spine(name, e.args[0])
    if isinstance(f, Lambda):
        for p, a in zip(f.params, e.args):
            if any(isinstance(n, Param) and n.name == name for n in walk(a)):
                return _on_spine(name, a) and _single_spine_use(p.name, f.body)
    return False


# ------------------------------------------------------------------------ kernels


def _stmt_buffers(s) -> tuple[set, set]:
    reads, writes = set(), set()
    for x in walk_stmts([s]):
        if isinstance(x, Store):
            writes.add(x.dest.buf)
            for leaf in leaves_of(x.value):
                reads.add(leaf.buf)
        elif isinstance(x, Decl):
            writes.add(x.buf)
    return reads, writes


def split_kernels(top: list) -> list[list]:
    """Cuts the top-level statements into kernels: a statement that reads a global
    temporary written by an earlier statement starts a later kernel; private and local
    values stay within one kernel."""
    info = [_stmt_buffers(s) for s in top]
    k = [0] * len(top)
    for _ in range(len(top) + 2):
        changed = False
        for j, (reads, _) in enumerate(info):
            for i in range(j):
                common = reads & info[i][1]
                if not common:
                    continue
                glob = any(b.space == "global" and b.role == "temp" for b in common)
                other = any(b.space != "global" for b in common)
                need = k[i] + 1 if glob else k[i]
                if need > k[j]:
                    k[j], changed = need, True
                if other and k[i] < k[j]:
                    k[i], changed = k[j], True
        if not changed:
            break
    for j, (reads, _) in enumerate(info):
        for i in range(j):
            for b in reads & info[i][1]:
                if b.space != "global" and k[i] != k[j]:
                    raise MemoryScopeError(
                        f"{b.space} buffer {b.name} would have to survive a kernel boundary "
                        "(its producer and consumer end up in different kernels); use global "
                        "memory for it")
                if b.space == "global" and b.role == "temp" and k[i] >= k[j]:
                    raise MemoryScopeError(f"internal: cannot order the kernels around {b.name}")
    groups: dict[int, list] = {}
    for idx, s in enumerate(top):
        groups.setdefault(k[idx], []).append(s)
    return [groups[g] for g in sorted(groups)]


def _mapping_text(program: Node) -> str:
    parts = {m.label: m.kind_text() for m in walk(program) if isinstance(m, Map) and m.label}
    return " ".join(f"{k}={parts[k]}" for k in sorted(parts)) or "(no labelled maps)"


def _output_shape(t: Type) -> tuple[int, ...]:
    shape = []
    while isinstance(t, ArrayType):
        shape.append(t.size.as_int())
        t = t.elem
    if isinstance(t, VectorType):
        shape.append(t.width.as_int())
    return tuple(shape)


def build(program: Node, sizes: Mapping[str, int], info: TypeInfo | None = None) -> Builder:
    """Type-checks ``program`` (unless its symbolic type ``info`` is given and ``sizes`` are
    known to meet its constraints) and builds its statement tree (one list for all kernels).

    The result's ``top`` holds the statements, ``inputs``/``out_buf`` the global buffers
    of the program's inputs and output. No launch configuration and no checks beyond the
    ones found while building (unmapped maps, nesting, vectorisation).
    """
    if not isinstance(program, Lambda):
        raise UnsupportedError("lower() takes a program: a lambda with typed inputs")
    b = Builder(program, sizes, info)
    env: dict = {}
    b.inputs = []
    for p in program.params:
        pt = p.type
        assert pt is not None  # typecheck rejects program inputs without a type
        t = pt.subs(b.sizes) if pt.free_vars() else pt
        if has_tuple(t):
            raise UnsupportedError(f"input {p.name} has a tuple type {t}")
        usable = p.name.isidentifier() and p.name not in _C_RESERVED
        cname = p.name if usable else b.fresh(f"in_{len(b.inputs)}")
        b.names.add(cname)
        buf = Buf(p.name, "global", dtype_of(t), size_of(t), "input", p.name, c_name=cname,
                  sym_count=size_of_sym(pt))
        b.inputs.append(buf)
        env[p.name] = natural_view(t, buf)
    out_t = b.ctype(program.body)
    if has_tuple(out_t):
        raise UnsupportedError(f"the program returns a tuple type {out_t}; return arrays")
    b.out_t = out_t
    sym_out = b.symtype(program.body)
    b.out_buf = Buf(b.fresh("out"), "global", dtype_of(out_t), size_of(out_t), "output",
                    sym_count=size_of_sym(sym_out) if sym_out is not None else None)
    b.emit_into(program.body, env, natural_view(out_t, b.out_buf))
    if not b.top:
        raise UnsupportedError("the program computes nothing")
    return b


def lower(
    program: Node,
    sizes: Mapping[str, int],
    *,
    device: Device | None = None,
    local_sizes: Mapping[int, int] | None = None,
    name: str = "kernel",
) -> CompiledProgram:
    """Lowers a mapped program with concrete ``sizes`` to OpenCL kernels.

    Raises a :class:`codegen.errors.LoweringError` subclass when the mapping cannot run
    correctly (the check that failed is its ``check``), ``ir.errors.ConstraintViolation``
    when the sizes break the program's algorithmic constraints. ``device`` supplies the
    limits and budgets (default: ``codegen.target.DEFAULT_DEVICE``).
    """
    cp = _lower(program, sizes, device, local_sizes, name, raise_issues=True)
    assert cp is not None  # without ``collect`` it returns the program
    return cp


def program_resources(program: Lambda, sizes: Mapping[str, int], *,
                      device: Device | None = None,
                      local_sizes: Mapping[int, int] | None = None,
                      info: TypeInfo | None = None,
                      features: dict[str, Expr] | None = None) -> list[Resource]:
    """What ``program`` asks of ``device`` (``codegen.resources``), in its symbolic sizes:
    lowered at ``sizes`` (one configuration) by the same code as :func:`lower`, without
    generating source and without raising the checks that ``sizes`` fail. ``info``: the
    program's type check, when the caller has it and ``sizes`` meet its constraints.
    ``features``, if given, receives ``codegen.resources.program_features``."""
    out: list[Resource] = []
    _lower(program, sizes, device, local_sizes, "kernel", raise_issues=False, collect=out,
           info=info, features=features)
    return out


def _lower(program: Node, sizes: Mapping[str, int], device: Device | None,
           local_sizes: Mapping[int, int] | None, name: str, raise_issues: bool,
           collect: list[Resource] | None = None, info: TypeInfo | None = None,
           features: dict[str, Expr] | None = None) -> CompiledProgram | None:
    """``lower``; with ``raise_issues=False`` the checks found after building are ignored
    (for experiments that test the checks themselves); with ``collect`` the resources are
    appended to it and no source is generated (returns None)."""
    limits = device or DEFAULT_DEVICE
    b = build(program, sizes, info)
    inputs, out_buf, out_t = b.inputs, b.out_buf, b.out_t
    assert out_buf is not None and out_t is not None  # build() sets them

    groups = split_kernels(b.top)
    base = name if name.isidentifier() and name not in _C_RESERVED else None
    header_map = _mapping_text(program)
    header_sizes = " ".join(f"{k}={v}" for k, v in sorted(b.sizes.items()))
    funs = list(b.funs.values())
    kfeats: list[dict[str, Expr]] = []
    kernels: list[Kernel] = []
    issues: list[LoweringError] = []
    all_bufs = [*inputs, out_buf, *b.bufs]
    for ki, stmts in enumerate(groups):
        kname = base if (base and len(groups) == 1) else f"{name}_{ki}"
        if not kname.isidentifier():
            kname = f"kernel_{ki}"
        loops = [s for s in walk_stmts(stmts) if isinstance(s, Loop)]
        used: set[int] = set()
        written: set[str] = set()
        for s in walk_stmts(stmts):
            if isinstance(s, Store):
                used.add(id(s.dest.buf))
                written.add(s.dest.buf.name)
                used.update(id(leaf.buf) for leaf in leaves_of(s.value))
            elif isinstance(s, Decl):
                used.add(id(s.buf))
        kbufs = [x for x in all_bufs if id(x) in used]
        local_under_glb = set()
        for x in kbufs:
            if x.space == "local":
                local_under_glb |= set(x.glb_dims)
        cfg = configure(loops, local_sizes, limits, local_under_glb,
                        uses_local=any(x.space == "local" for x in kbufs))
        issues.extend(cfg.issues)
        synced: list[Loop] = []
        issues.extend(bar.analyze(stmts, cfg, b.map_of, synced))
        # the resources the candidate needs: without the optional vector accumulators
        if collect is not None:
            collect.extend(kernel_resources(kname, kbufs, loops, cfg, synced, limits,
                                            local_sizes))
            kfeats.append(kernel_features(kbufs, loops, cfg, limits, local_sizes))
            continue
        # after the analysis: the rewrite only reassociates one work-item's private sums;
        # its accumulators get only the private memory the budgets leave
        pbase = bar.private_bytes(kbufs)
        room = limits.private_mem_size - pbase
        if limits.private_group_budget and cfg.local_size is not None:
            room = min(room, limits.private_group_budget // math.prod(cfg.local_size) - pbase)
        vbufs, helpers = vector_accumulate(stmts, b.fun_of, b.names, max_bytes=max(0, room))
        kbufs += vbufs
        funs += [h for h in helpers if h not in funs]
        locs = [x for x in kbufs if x.space == "local"]
        lbytes = bar.local_bytes(locs)
        if lbytes > limits.local_mem_size:
            issues.append(LocalMemoryError(
                f"kernel {kname} needs {lbytes} bytes of local memory per work-group "
                f"({', '.join(f'{x.name}: {x.nbytes}' for x in locs)}) but {limits.name} has "
                f"{limits.local_mem_size}; use smaller tiles or global memory"))
        pbytes = bar.private_bytes(kbufs)
        local_size = cfg.local_size
        if pbytes > limits.private_mem_size:
            issues.append(PrivateMemoryError(
                f"kernel {kname} needs {pbytes} bytes of private memory per work-item "
                f"(budget {limits.private_mem_size}); use smaller private tiles"))
        elif local_size is None:  # chosen here: PoCL's own choice made copies 5x slower
            local_size = fit_private_local_size(cfg.global_size, pbytes, limits,
                                                most=None if pbytes else FREE_GROUP_MOST)
        elif (pbytes and limits.private_group_budget
              and local_size is not None  # (always, after the branch above)
              and math.prod(local_size) * pbytes > limits.private_group_budget):
            issues.append(PrivateMemoryError(
                f"kernel {kname}: a work-group of {math.prod(local_size)} work-items with "
                f"{pbytes} bytes of private memory each exceeds the budget of "
                f"{limits.private_group_budget} bytes per work-group; use smaller private "
                "tiles or smaller work-groups"))
        args = [x for x in kbufs if x.space == "global"]
        used_funs = _used_functions(stmts, funs)
        header = [
            f"mapping: {header_map}",
            f"sizes: {header_sizes}",
            f"kernel {ki + 1} of {len(groups)}: global size {cfg.global_size}, local size "
            f"{local_size}",
        ]
        src = kernel_source(kname, header, used_funs, args, written, locs, stmts)
        kernels.append(Kernel(
            name=kname, source=src, args=tuple(x.name for x in args),
            global_size=cfg.global_size, local_size=local_size,
            local_buffers=tuple(Buffer(x.name, "local", x.dtype, x.count, "temp") for x in locs),
            private_bytes=pbytes,
        ))
    glob = [x for x in all_bufs if x.space == "global"]
    for x in glob:
        if x.nbytes > limits.max_mem_alloc_size:
            issues.append(MaxAllocationError(
                f"global buffer {x.name} needs {x.nbytes} bytes but {limits.name} allocates "
                f"at most {limits.max_mem_alloc_size} at once"))
    total = sum(x.nbytes for x in glob)
    if total > limits.global_mem_size:
        issues.append(MaxAllocationError(
            f"the program needs {total} bytes of global memory but {limits.name} has "
            f"{limits.global_mem_size}"))
    if collect is not None:
        collect.extend(global_resources(glob, limits))
        if features is not None:
            features.update(program_features(kfeats, glob))
        return None
    if issues and raise_issues:
        raise min(issues, key=lambda e: e.priority)
    buffers = {x.name: Buffer(x.name, "global", x.dtype, x.count, x.role) for x in glob}
    return CompiledProgram(
        kernels=tuple(kernels),
        buffers=buffers,
        inputs=tuple(x.name for x in inputs),
        output=out_buf.name,
        output_shape=_output_shape(out_t),
    )


def _used_functions(stmts: list, funs: list[tuple[str, str]]) -> list[str]:
    names = set()

    def visit(v):
        if isinstance(v, vw.Call):
            names.add(v.fname)
            for a in v.args:
                visit(a)
        elif isinstance(v, vw.Sel):
            visit(v.then)
            visit(v.other)

    for s in walk_stmts(stmts):
        if isinstance(s, Store):
            visit(s.value)
    return [src for fname, src in funs if fname in names]
