"""The statement-tree builder of the lowering (:mod:`codegen.lower` cuts its tree into kernels).

:class:`Builder` walks a mapped program once, like LIFT's code generator (CC'22 5.1,
GPGPU'20 3.3), and builds one statement tree for all kernels:

* values (reads): layout primitives and maps that compute nothing build views
  (:mod:`codegen.views`) and emit nothing; user functions become C functions;
* destination passing (writes): ``emit_into``/``apply_into`` write an expression through
  the *output view* of its consumer (``join o mapA(..)`` writes ``out[i*m + j]``), found by
  inverting the layout primitives between them, also across lambdas
  (:mod:`codegen.write_through`); a value another computation consumes goes into a
  temporary (:mod:`codegen.memory`);
* a map that computes becomes a loop (:mod:`codegen.emit`), ``reduce`` a sequential loop
  over a private accumulator.

It raises the checks found while building (unmapped maps, parallel nesting, vectorisation)
as :mod:`codegen.errors`.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Mapping

from codegen import views as vw
from codegen.emit import c_type, user_fun_source
from codegen.errors import ParallelNestingError, UnmappedMapError, UnsupportedError
from codegen.memory import (
    Buf,
    components,
    dtype_of,
    infer_space,
    natural_view,
    recombine,
    size_of,
    size_of_sym,
)
from codegen.stmt import Decl, Loop, Store
from codegen.views import ArrV, Leaf, TupV, View
from codegen.write_through import LAYOUT, Thunk, single_spine_use
from ir.computes import computes
from ir.errors import LiftmapError
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

_KINDS = {"mapSeq": "seq", "mapGlb": "glb", "mapWrg": "wrg", "mapLcl": "lcl"}
# names a generated identifier must not take (C and OpenCL C keywords, builtins)
C_RESERVED = frozenset("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while kernel __kernel global __global local __local
private __private constant __constant read_only write_only bool half uchar ushort uint ulong
barrier""".split())


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
        self.names: set[str] = set(C_RESERVED)
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
        except (LiftmapError, ArithmeticError):  # not evaluable symbolically: not known
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
            if isinstance(b, Thunk):
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
        if isinstance(f, LAYOUT):
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
        if isinstance(f, LAYOUT):
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
        return any(isinstance(n, Param) and isinstance(env.get(n.name), Thunk)
                   and env[n.name].value is None for n in walk(e))

    def emit_into(self, e: ExprNode, env: dict, dest: View) -> None:
        """Emits the code computing ``e`` into the output view ``dest``."""
        if isinstance(e, Param):
            b = env.get(e.name)
            if isinstance(b, Thunk) and b.value is None and not b.consumed:
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
        elif isinstance(f, LAYOUT) and self.needs_dest(args[0], env):
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
            if self.needs_dest(a, env) and single_spine_use(p.name, f.body):
                env2[p.name] = Thunk(a, env)
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
