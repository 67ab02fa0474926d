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

Its walk is one pass over node classes with :mod:`ir.visitor`'s dispatch, as the
interpreter and the type checker: each entry point (``value``, ``value_call``,
``apply_value``, ``emit_into``, ``emit_call``, ``emit_annotated``, ``apply_into``,
``inverse``, ``inverse_body``, ``owns_buffer``) has one method per node class
(``emit_call_zip`` writes a call of ``zip``), or refuses the class with an
``UnsupportedError`` naming it (a function where a value is lowered);
``tests/test_ir_dispatch.py`` requires that of every node class.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Mapping
from typing import NoReturn

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
from codegen.write_through import Thunk, single_spine_use
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
from ir.visitor import Dispatch

# mapVec is a seq loop with a width: every analysis sees it as the sequential loop it
# means; codegen.lanes rewrites it into vector lanes after them
_KINDS = {"mapSeq": "seq", "mapVec": "seq", "mapGlb": "glb", "mapWrg": "wrg", "mapLcl": "lcl"}
# names a generated identifier must not take (C and OpenCL C keywords, builtins)
C_RESERVED = frozenset("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while kernel __kernel global __global local __local
private __private constant __constant read_only write_only bool half uchar ushort uint ulong
barrier main""".split())  # main: OpenCL C forbids a kernel of that name


def _refuse(message: str) -> Callable[..., NoReturn]:
    """A method of :class:`Builder` refusing its node's class: it raises UnsupportedError
    (a typed lowering error), ``message`` formatted with the name of the class."""

    def refuse(self: Builder, node: Node, /, *args: object) -> NoReturn:
        raise UnsupportedError(message.format(type(node).__name__))

    refuse.refuses = True  # type: ignore[attr-defined]  # (what tests/test_ir_dispatch.py reads)
    return refuse


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

    def materialize(self, e: FunCall, env: dict, label: str) -> View:
        """Computes ``e`` into a fresh buffer (named after ``label``, its map's label)."""
        t = self.ctype(e)
        space = infer_space(e) or "global"
        dest = self.alloc(t, space, label, sym_t=self.symtype(e))
        self.emit_into(e, env, dest)
        return dest

    # ---------------------------------------------------------------- stores
    def where(self) -> str:
        lp = next((x for x in reversed(self.loops) if x.is_map), None)
        return f" in {lp.what}" if lp is not None else ""

    def store(self, dest: View, value: View) -> None:
        conds: tuple = ()
        if isinstance(dest, vw.WriteGuard):
            conds, dest = dest.conds, dest.target
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
        self.add(Store(dest, value, conds=conds))

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
    def call(self, uf: UserFun, width: int | None, args: list[View]) -> Leaf:
        """``uf`` applied to scalar or vector views (vectorised to ``width`` lanes if given)."""
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

    # ---------------------------------------------------------------- dispatch
    # The entry points: each calls its method for the class of the node it is given
    # (ir.visitor), defined in the sections below. Refused with an UnsupportedError naming
    # the class (_refuse): a function where an expression is lowered (value, emit_into),
    # a reduction or memory annotation applied to views (apply_value).
    pass_name = "lowering"
    # values (reads)
    value = Dispatch("value", Node)  # value(e, env): the view of an expression
    value_call = Dispatch("value_call", FunDecl)  # value_call(f, call, env): of a call of f
    apply_value = Dispatch("apply_value", FunDecl)  # apply_value(f, args, env): f of views
    # writes (destination passing)
    emit_into = Dispatch("emit_into", Node)  # emit_into(e, env, dest): e written into dest
    emit_call = Dispatch("emit_call", FunDecl)  # emit_call(f, call, env, dest)
    emit_annotated = Dispatch("emit_annotated", FunDecl)  # (f, call, env, dest): toMem(f)
    apply_into = Dispatch("apply_into", FunDecl)  # apply_into(f, args, env, dest)
    # output views (inverses)
    inverse = Dispatch("inverse", FunDecl)  # inverse(f, dest, arg_t)
    inverse_body = Dispatch("inverse_body", Node)  # inverse_body(body, pname, dest)
    # fresh buffers
    owns_buffer = Dispatch("owns_buffer", Node)  # owns_buffer(e): e materialized

    # ---------------------------------------------------------------- values (reads)
    # value(e, env): the view of the expression ``e`` (computing it emits its code)
    def value_param(self, e: Param, env: dict) -> View:
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

    def value_literal(self, e: Literal, env: dict) -> View:
        return vw.fill(self.ctype(e), e.value)

    def value_fun_call(self, e: FunCall, env: dict) -> View:
        return self.value_call(e.f, e, env)

    value_fun_decl = _refuse("cannot lower {}")  # a function where a value is lowered

    # value_call(f, call, env): the view of ``call``, a call of ``f``
    def value_call_lambda(self, f: Lambda, call: FunCall, env: dict) -> View:
        env2 = dict(env)
        for p, a in zip(f.params, call.args):
            env2[p.name] = self.value(a, env)
        return self.value(f.body, env2)

    def value_call_map(self, f: Map, call: FunCall, env: dict) -> View:
        if self.computes(f.f):
            return self.materialize(call, env, f.label or "")
        return self.apply_value(f, [self.value(call.args[0], env)], env)

    def value_call_reduce(self, f: Reduce, call: FunCall, env: dict) -> View:
        return self.reduce_value(f, call, env)

    def value_call_to_mem(self, f: ToMem, call: FunCall, env: dict) -> View:
        return self.materialize(call, env, "")

    def _value_of_views(self, f: FunDecl, call: FunCall, env: dict) -> View:
        """``f`` of the views of all its arguments."""
        return self.apply_value(f, [self.value(a, env) for a in call.args], env)

    def _value_of_view(self, f: FunDecl, call: FunCall, env: dict) -> View:
        """``f`` of the view of its (one) argument."""
        return self.apply_value(f, [self.value(call.args[0], env)], env)

    value_call_user_fun = value_call_vectorize = value_call_zip = _value_of_views
    value_call_id = value_call_get = _value_of_view
    value_call_split = value_call_join = value_call_transpose = value_call_slide = _value_of_view
    value_call_pad = value_call_reorder_stride = _value_of_view
    value_call_as_vector = value_call_as_scalar = _value_of_view

    # apply_value(f, args, env): ``f`` applied to views, for functions that compute
    # nothing (view maps) and user functions
    def apply_value_lambda(self, f: Lambda, args: list[View], env: dict) -> View:
        env2 = dict(env)
        for p, a in zip(f.params, args):
            env2[p.name] = a
        return self.value(f.body, env2)

    def apply_value_map(self, f: Map, args: list[View], env: dict) -> View:
        if self.computes(f.f):
            raise UnsupportedError("internal: computing map in a view function")
        arr = self._arr(args[0], f)
        return vw.map_view(arr, lambda x: self.apply_value(f.f, [x], env))

    def apply_value_user_fun(self, f: UserFun, args: list[View], env: dict) -> View:
        return self.call(f, None, args)

    def apply_value_vectorize(self, f: Vectorize, args: list[View], env: dict) -> View:
        return self.call(f.f, self.ival(f.width), args)

    def apply_value_id(self, f: Id, args: list[View], env: dict) -> View:
        return args[0]

    def apply_value_zip(self, f: Zip, args: list[View], env: dict) -> View:
        return vw.zip_views(args)

    def apply_value_get(self, f: Get, args: list[View], env: dict) -> View:
        return vw.get(args[0], f.index)

    # the layout primitives: views of their argument array
    def apply_value_split(self, f: Split, args: list[View], env: dict) -> View:
        return vw.split(self._arr(args[0], f), self.ival(f.chunk))

    def apply_value_join(self, f: Join, args: list[View], env: dict) -> View:
        return vw.join(self._arr(args[0], f))

    def apply_value_transpose(self, f: Transpose, args: list[View], env: dict) -> View:
        return vw.transpose(self._arr(args[0], f))

    def apply_value_slide(self, f: Slide, args: list[View], env: dict) -> View:
        return vw.slide(self._arr(args[0], f), self.ival(f.size), self.ival(f.step))

    def apply_value_pad(self, f: Pad, args: list[View], env: dict) -> View:
        return vw.pad(self._arr(args[0], f), self.ival(f.left), self.ival(f.right), f.value)

    def apply_value_reorder_stride(self, f: ReorderStride, args: list[View], env: dict) -> View:
        return vw.reorder_stride(self._arr(args[0], f), self.ival(f.stride))

    def apply_value_as_vector(self, f: AsVector, args: list[View], env: dict) -> View:
        return vw.as_vector(self._arr(args[0], f), self.ival(f.width))

    def apply_value_as_scalar(self, f: AsScalar, args: list[View], env: dict) -> View:
        return vw.as_scalar(self._arr(args[0], f))

    # a reduction and a memory annotation write a buffer: apply_into, not a view
    apply_value_reduce = apply_value_to_mem = _refuse("cannot apply {} here")

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

    # emit_into(e, env, dest): emits the code computing ``e`` into the output view ``dest``
    def emit_into_param(self, e: Param, env: dict, dest: View) -> None:
        b = env.get(e.name)
        if isinstance(b, Thunk) and b.value is None and not b.consumed:
            b.consumed = True
            self.emit_into(b.expr, b.env, dest)
            return
        self.copy_into(dest, self.value(e, env))

    def emit_into_literal(self, e: Literal, env: dict, dest: View) -> None:
        self.copy_into(dest, self.value(e, env))

    def emit_into_fun_call(self, e: FunCall, env: dict, dest: View) -> None:
        self.emit_call(e.f, e, env, dest)

    emit_into_fun_decl = _refuse("cannot lower {}")  # a function where a value is lowered

    # emit_call(f, call, env, dest): emits ``call``, a call of ``f``, into ``dest``
    def emit_call_lambda(self, f: Lambda, call: FunCall, env: dict, dest: View) -> None:
        self.emit_into(f.body, self.bind_for_dest(f, call.args, env), dest)

    def emit_call_map(self, f: Map, call: FunCall, env: dict, dest: View) -> None:
        if self.computes(f.f):
            self.map_into(f, self._arr(self.value(call.args[0], env), f), env, dest)
        else:
            self._emit_through(f, call, env, dest)

    def emit_call_reduce(self, f: Reduce, call: FunCall, env: dict, dest: View) -> None:
        self.copy_into(dest, self.reduce_value(f, call, env))

    def emit_call_to_mem(self, f: ToMem, call: FunCall, env: dict, dest: View) -> None:
        self.emit_annotated(f.f, call, env, dest)

    def _emit_stored(self, f: UserFun | Vectorize, call: FunCall, env: dict, dest: View) -> None:
        self.store(dest, self.apply_value(f, [self.value(a, env) for a in call.args], env))

    emit_call_user_fun = emit_call_vectorize = _emit_stored

    def emit_call_id(self, f: Id, call: FunCall, env: dict, dest: View) -> None:
        self.emit_into(call.args[0], env, dest)

    def emit_call_zip(self, f: Zip, call: FunCall, env: dict, dest: View) -> None:
        d = self._arr(dest, f)
        for k, a in enumerate(call.args):
            self.emit_into(a, env, vw.unzip(d, k))

    def emit_call_get(self, f: Get, call: FunCall, env: dict, dest: View) -> None:
        self.copy_into(dest, self.value(call, env))

    def _emit_through(self, f: FunDecl, call: FunCall, env: dict, dest: View) -> None:
        """A call of a function that computes nothing (a layout primitive, a view map): an
        argument that needs a destination is written through the output view of ``f``
        (:meth:`inverse`) when ``f`` can be inverted there; else the view is copied."""
        arg = call.args[0]
        inv = self.inverse(f, dest, self.ctype(arg)) if self.needs_dest(arg, env) else None
        if inv is not None:
            self.emit_into(arg, env, inv)
        else:
            self.copy_into(dest, self.value(call, env))

    emit_call_split = emit_call_join = emit_call_transpose = emit_call_slide = _emit_through
    emit_call_pad = emit_call_reorder_stride = _emit_through
    emit_call_as_vector = emit_call_as_scalar = _emit_through

    # emit_annotated(f, call, env, dest): emits ``call``, a call of ``toMem(f)``, into
    # ``dest``: a lambda binds its arguments as any call of a lambda does (one that needs a
    # destination may stay unevaluated); any other function is applied to their views
    emit_annotated_lambda = emit_call_lambda

    def emit_annotated_fun_decl(self, f: FunDecl, call: FunCall, env: dict,
                                dest: View) -> None:
        self.apply_into(f, [self.value(a, env) for a in call.args], env, dest)

    def bind_for_dest(self, f: Lambda, args, env: dict) -> dict:
        env2 = dict(env)
        for p, a in zip(f.params, args):
            if self.needs_dest(a, env) and single_spine_use(p.name, f.body):
                env2[p.name] = Thunk(a, env)
            else:
                env2[p.name] = self.value(a, env)
        return env2

    # apply_into(f, args, env, dest): emits ``f`` applied to views into ``dest``
    def apply_into_lambda(self, f: Lambda, args: list[View], env: dict, dest: View) -> None:
        env2 = dict(env)
        for p, a in zip(f.params, args):
            env2[p.name] = a
        self.emit_into(f.body, env2, dest)

    def apply_into_map(self, f: Map, args: list[View], env: dict, dest: View) -> None:
        if self.computes(f.f):
            self.map_into(f, self._arr(args[0], f), env, dest)
        else:
            self.copy_into(dest, self.apply_value(f, args, env))

    def _apply_stored(self, f: UserFun | Vectorize, args: list[View], env: dict,
                      dest: View) -> None:
        self.store(dest, self.apply_value(f, args, env))

    apply_into_user_fun = apply_into_vectorize = _apply_stored

    def apply_into_to_mem(self, f: ToMem, args: list[View], env: dict, dest: View) -> None:
        self.apply_into(f.f, args, env, dest)

    def apply_into_id(self, f: Id, args: list[View], env: dict, dest: View) -> None:
        self.copy_into(dest, args[0])

    def apply_into_reduce(self, f: Reduce, args: list[View], env: dict, dest: View) -> None:
        init = self.map_types(f)
        acc = self.alloc(args[0].type, "private", "", role="acc",
                         sym_t=init[1].elem if init else None)
        self.copy_into(acc, args[0])
        self.reduce_loop(f, acc, self._arr(args[1], f), env)
        self.copy_into(dest, ArrV(1, acc.type, lambda i: acc))

    def _apply_copied(self, f: FunDecl, args: list[View], env: dict, dest: View) -> None:
        """A function that computes nothing: its view copied into ``dest``."""
        self.copy_into(dest, self.apply_value(f, args, env))

    apply_into_zip = apply_into_get = _apply_copied
    apply_into_split = apply_into_join = apply_into_transpose = apply_into_slide = _apply_copied
    apply_into_pad = apply_into_reorder_stride = _apply_copied
    apply_into_as_vector = apply_into_as_scalar = _apply_copied

    # ---------------------------------------------------------------- inverses
    # inverse(f, dest, arg_t): the output view of ``x`` when ``f(x)`` is written into
    # ``dest`` (None if ``f`` cannot be inverted; but for id, only into an array)
    def inverse_id(self, f: Id, dest: View, arg_t: Type) -> View | None:
        return dest

    def inverse_join(self, f: Join, dest: View, arg_t: Type) -> View | None:
        if not isinstance(dest, ArrV):
            return None
        # the argument of a (type-checked) join is an array of arrays
        assert isinstance(arg_t, ArrayType) and isinstance(arg_t.elem, ArrayType)
        return vw.inverse_join(dest, arg_t.elem.size.as_int())

    def inverse_split(self, f: Split, dest: View, arg_t: Type) -> View | None:
        return vw.inverse_split(dest) if isinstance(dest, ArrV) else None

    def inverse_transpose(self, f: Transpose, dest: View, arg_t: Type) -> View | None:
        return vw.transpose(dest) if isinstance(dest, ArrV) else None

    def inverse_as_scalar(self, f: AsScalar, dest: View, arg_t: Type) -> View | None:
        if not isinstance(dest, ArrV):
            return None
        # the argument of a (type-checked) asScalar is an array of vectors
        assert isinstance(arg_t, ArrayType) and isinstance(arg_t.elem, VectorType)
        return vw.as_vector(dest, arg_t.elem.width.as_int())

    def inverse_as_vector(self, f: AsVector, dest: View, arg_t: Type) -> View | None:
        return vw.as_scalar(dest) if isinstance(dest, ArrV) else None

    def inverse_reorder_stride(self, f: ReorderStride, dest: View, arg_t: Type) -> View | None:
        return vw.inverse_reorder(dest, self.ival(f.stride)) if isinstance(dest, ArrV) else None

    def inverse_map(self, f: Map, dest: View, arg_t: Type) -> View | None:
        if not isinstance(dest, ArrV) or self.computes(f.f) or not isinstance(arg_t, ArrayType):
            return None
        et = arg_t.elem
        probe = self.inverse(f.f, dest.get(0), et)
        if probe is None:
            return None

        def elem(i: Expr) -> View:
            v = self.inverse(f.f, dest.get(i), et)
            assert v is not None  # every element has element 0's structure (the probe)
            return v

        return ArrV(dest.n, et, elem)

    def inverse_lambda(self, f: Lambda, dest: View, arg_t: Type) -> View | None:
        if not isinstance(dest, ArrV) or len(f.params) != 1:
            return None
        return self.inverse_body(f.body, f.params[0].name, dest)

    def _not_invertible(self, node: Node, *args: object) -> None:
        return None

    # functions that compute or select: their argument is no view of their result
    inverse_user_fun = inverse_vectorize = inverse_reduce = inverse_to_mem = _not_invertible
    inverse_zip = inverse_get = inverse_slide = _not_invertible

    def inverse_pad(self, f: Pad, dest: View, arg_t: Type) -> View | None:
        """A crop (both amounts <= 0) writes through: what it crops away is written
        nowhere; a pad that adds elements is no view of its argument."""
        left, right = self.ival(f.left), self.ival(f.right)
        if not isinstance(dest, ArrV) or left > 0 or right > 0:
            return None
        if left == 0 and right == 0:
            return dest
        assert isinstance(arg_t, ArrayType)  # the argument of a (type-checked) pad
        return vw.inverse_crop(dest, left, right, arg_t.size.as_int())

    # inverse_body(body, pname, dest): the output view of the parameter ``pname`` when
    # ``body`` (a chain of one-argument calls down to it) is written into ``dest``
    def inverse_body_param(self, body: Param, pname: str, dest: View) -> View | None:
        return dest if body.name == pname else None

    def inverse_body_fun_call(self, body: FunCall, pname: str, dest: View) -> View | None:
        if len(body.args) != 1:
            return None
        inv = self.inverse(body.f, dest, self.ctype(body.args[0]))
        return None if inv is None else self.inverse_body(body.args[0], pname, inv)

    inverse_body_literal = inverse_body_fun_decl = _not_invertible

    # ---------------------------------------------------------------- fresh buffers
    # owns_buffer(e): True when the lowering computes the value of ``e`` into a buffer of
    # its own (materialize): a call of a memory annotation or of a map that computes
    def owns_buffer_fun_call(self, e: FunCall) -> bool:
        return self.owns_buffer(e.f)

    def owns_buffer_to_mem(self, f: ToMem) -> bool:
        return True

    def owns_buffer_map(self, f: Map) -> bool:
        return self.computes(f.f)

    def _owns_no_buffer(self, node: Node) -> bool:
        return False

    owns_buffer_param = owns_buffer_literal = _owns_no_buffer
    owns_buffer_fun_decl = _owns_no_buffer  # a call of any other function

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
            if m.width is not None:
                lp.width, lp.width_sym = self.ival(m.width), m.width
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

    def reduce_value(self, r: Reduce, call: FunCall, env: dict) -> View:
        """``call``, a call of ``r``: a sequential loop over a private accumulator (the
        buffer of the initial value when that is computed into one of its own)."""
        init_e, arr_e = call.args
        init_t = self.ctype(init_e)
        if self.owns_buffer(init_e):
            acc = self.value(init_e, env)
        else:
            iv = self.value(init_e, env)
            acc = self.alloc(init_t, "private", "", role="acc", sym_t=self.symtype(init_e))
            self.copy_into(acc, iv)
        arr = self._arr(self.value(arr_e, env), r)
        self.reduce_loop(r, acc, arr, env)
        return ArrV(1, init_t, lambda i: acc)

    def reduce_loop(self, r: Reduce, acc: View, arr: ArrV, env: dict) -> None:
        mt = self.map_types(r)
        with self.loop("seq", None, arr.n, "r", "reduce", n_sym=mt[0].size if mt else None) \
                as lp:
            if r.width is not None and isinstance(acc, vw.Mem):
                lp.width, lp.reduce_acc = self.ival(r.width), acc
                lp.width_sym = r.width
            self.apply_into(r.f, [acc, arr.get(lp.var)], env, acc)
