"""The map-nesting tree and the contextual functions of CC'22 Table 3.

Only maps that compute (their function contains a user function, a copy or a
reduction) are parallelisation choices; maps that only rearrange data
(``map(transpose)``, ``map(split(4))``) are views and generate no loop.

Address spaces are inferred destination-first: a value is written where its
consumer says (``toLocal``, ``toPrivate``, a reduction's accumulator), else to
global memory. ``uses_private``/``uses_local`` are true for a map that writes
into or reads from that space.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from itertools import count
from typing import TYPE_CHECKING

from ir import nodes
from ir.computes import computes
from ir.errors import LiftmapError
from ir.memory_space import infer_space
from ir.typecheck import TypeInfo, typecheck
from ir.types import shape_of
from ir.visitor import Dispatch
from mapper.errors import MappingError, NoMapsError

if TYPE_CHECKING:  # type-only: keeps the run-time imports as they are
    from ir.sym import Expr


@dataclass
class MapInfo:
    """One computing map: its place in the tree and its memory use."""

    label: str
    uid: int
    node: nodes.Map
    parent: str | None = None
    children: list[str] = field(default_factory=list)
    perfectly_nested: bool = False  # its parent's function is exactly this map
    writes: str = "global"
    reads: set[str] = field(default_factory=set)
    depends_on: set[str] = field(default_factory=set)  # sibling maps whose output it reads
    # ... read element for element once fused: producer -> the (f, g) pairs such that this
    # map with its first f perfectly nested maps fused reads, at flat iteration i, what the
    # producer with its first g perfectly nested maps fused writes at flat iteration i
    # (the consumer reads the producer's output through join/split only)
    identity_from: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    in_reduce: bool = False  # inside a reduction's function (a loop that is no map)
    read_by_code: bool = False  # its output is read by code that is not a sibling map
    # a reduction's update: this map (first), then the maps inside it, level by level, that
    # rewrite the accumulator element for element (``accumulator_chain``); empty otherwise
    acc_chain: tuple[str, ...] = ()

    @property
    def uses_private(self) -> bool:
        return self.writes == "private" or "private" in self.reads

    @property
    def uses_local(self) -> bool:
        return self.writes == "local" or "local" in self.reads


class MapNestingTree:
    """Maps of a program, their nesting, chains and memory use (CC'22 Table 3)."""

    def __init__(self, program: nodes.Node, info: TypeInfo | None = None):
        self.program = program
        self.info = info or typecheck(program)
        self.maps: dict[str, MapInfo] = {}
        self._by_uid: dict[int, str] = {}
        # cache of ``mapper.apply._inner_sizes`` (map uid -> length of its input arrays),
        # filled on first use; None until then
        self._inner_sizes: dict[int, Expr] | None = None
        self._collect(program, None)
        if not self.maps:
            raise NoMapsError(
                "the expression has no map that computes: there is nothing to parallelise "
                "(maps that only rearrange data, like map(transpose), are views)"
            )
        _Spaces(self).run()

    # ------------------------------------------------------------ construction
    def _collect(self, node: nodes.Node, parent: str | None) -> None:
        if isinstance(node, nodes.Map) and computes(node.f):
            label = node.label
            if label is None or label in self.maps:
                raise MappingError("maps must be labelled uniquely; use label_maps(program)")
            mi = MapInfo(label, node.uid, node, parent)
            mi.perfectly_nested = parent is not None and _direct_map(
                self.maps[parent].node.f) is node
            self.maps[label] = mi
            self._by_uid[node.uid] = label
            if parent is not None:
                self.maps[parent].children.append(label)
            self._collect(node.f, label)
            return
        for c in node.children():
            self._collect(c, parent)

    # ------------------------------------------------------ contextual functions
    @property
    def labels(self) -> list[str]:
        return list(self.maps)

    def label_of(self, m: nodes.Map) -> str:
        return self._by_uid[m.uid]

    def roots(self) -> list[str]:
        return [m for m, i in self.maps.items() if i.parent is None]

    def nested(self, m: str) -> list[str]:
        """NestedMaps(m): every map inside m, at any depth."""
        out, stack = [], list(reversed(self.maps[m].children))
        while stack:
            c = stack.pop()
            out.append(c)
            stack.extend(reversed(self.maps[c].children))
        return out

    def outer(self, m: str) -> list[str]:
        """OuterMaps(m): the maps wrapping m, outermost first."""
        out = []
        p = self.maps[m].parent
        while p is not None:
            out.append(p)
            p = self.maps[p].parent
        return out[::-1]

    def chains(self) -> list[tuple[str, ...]]:
        """MapNestingChains: every path from an outermost map to an innermost one."""
        out: list[tuple[str, ...]] = []

        def go(m: str, path: tuple[str, ...]) -> None:
            path = path + (m,)
            kids = self.maps[m].children
            if not kids:
                out.append(path)
            for k in kids:
                go(k, path)

        for r in self.roots():
            go(r, ())
        return out

    def perfectly_nested_in(self, inner: str, outer: str) -> bool:
        return self.maps[inner].parent == outer and self.maps[inner].perfectly_nested

    def concrete(self) -> list[str]:
        """ConcreteMaps: maps that write memory (every computing map)."""
        return self.labels

    def kernel_boundary(self, prod: str, cons: str) -> bool:
        """True when the lowering puts a kernel boundary (a global barrier) between
        ``prod`` and ``cons``: both are top-level maps (no map or reduction around them)
        and ``prod`` writes global memory (``codegen.lower.split_kernels``)."""
        p, c = self.maps[prod], self.maps[cons]
        return (p.parent is None and c.parent is None and not p.in_reduce
                and not c.in_reduce and p.writes == "global")

    def root_of(self, m: str) -> str:
        p = self.maps[m].parent
        while p is not None:
            m, p = p, self.maps[p].parent
        return m

    def same_kernel(self, a: str, b: str) -> bool:
        """True when maps ``a`` and ``b`` end up in one kernel (see ``kernels``)."""
        k = self._kernel_of()
        return k[self.root_of(a)] == k[self.root_of(b)]

    def _kernel_of(self) -> dict[str, int]:
        """``kernels()``, computed once: the tree does not change after it is built (the
        rules ask for every pair of maps)."""
        cached = getattr(self, "_kernels_cache", None)
        if cached is None:
            cached = self._kernels_cache = self.kernels()
        return cached

    def kernels(self) -> dict[str, int]:
        """The kernel each top-level map ends up in (as ``codegen.lower.split_kernels``):
        a top-level map reading the global output of another one runs in a later kernel;
        others share their producer's kernel; independent ones share kernel 0."""
        roots = self.roots()
        k = dict.fromkeys(roots, 0)
        for _ in range(len(roots) + 1):
            changed = False
            for c in roots:
                for p in self.maps[c].depends_on:
                    if p not in k:
                        continue
                    need = k[p] + 1 if self.kernel_boundary(p, c) else k[p]
                    if need > k[c]:
                        k[c], changed = need, True
            if not changed:
                break
        return k

    def perfect_chain(self, m: str) -> list[str]:
        """The maps perfectly nested below ``m``, outermost first (the ones fusion can merge
        into ``m``): ``m``'s perfectly nested child, its perfectly nested child, ..."""
        out: list[str] = []
        while True:
            kid = next((k for k in self.maps[m].children if self.maps[k].perfectly_nested),
                       None)
            if kid is None:
                return out
            out.append(kid)
            m = kid

    def kernel_members(self, m: str) -> list[str]:
        """Every map of the kernel ``m`` ends up in (the launch configuration of a kernel,
        hence the index function of each code, depends on all of them)."""
        k = self._kernel_of()
        mine = k[self.root_of(m)]
        return [x for x in self.maps if k[self.root_of(x)] == mine]

    def siblings(self, m: str) -> list[str]:
        p = self.maps[m].parent
        return [x for x in (self.maps[p].children if p else self.roots()) if x != m]

    def render(self) -> str:
        """The tree as indented text with memory use, e.g. ``A\\n  B [writes global]``."""
        lines: list[str] = []

        def go(m: str, depth: int) -> None:
            i = self.maps[m]
            notes = [f"writes {i.writes}"]
            if i.reads:
                notes.append("reads " + ",".join(sorted(i.reads)))
            if i.perfectly_nested:
                notes.append("perfectly nested")
            if i.depends_on:
                notes.append("after " + ",".join(sorted(i.depends_on)))
            if i.acc_chain:
                notes.append("updates the accumulator in place: " + "-".join(i.acc_chain))
            lines.append("  " * depth + f"map{m}  [{'; '.join(notes)}]")
            for c in i.children:
                go(c, depth + 1)

        for r in self.roots():
            go(r, 0)
        return "\n".join(lines)


def _direct_map(f: nodes.FunDecl) -> nodes.Map | None:
    """``f`` is exactly a map (``map(g)`` or ``\\x -> map(g)(x)``): that map."""
    if isinstance(f, nodes.Map):
        return f
    if (
        isinstance(f, nodes.Lambda)
        and len(f.params) == 1
        and isinstance(f.body, nodes.FunCall)
        and isinstance(f.body.f, nodes.Map)
        and len(f.body.args) == 1
        and f.body.args[0] == f.params[0]
    ):
        return f.body.f
    return None


class _Spaces:
    """Address-space and producer inference over the program, as the lowering decides it.

    The lowering (``codegen.builder.Builder``) emits an expression either *into* a
    destination its consumer provides (the program's output, an enclosing map's element):
    then ``toLocal``/``toPrivate`` annotations on the way are ignored and computing maps
    write where the destination is; or it *materialises* a value another expression reads:
    then the buffer's space is the annotation (``ir.memory_space.infer_space``), else global.
    ``into`` follows that distinction; where the lowering's choice depends on more than the
    expression's shape (a lambda's argument written through its body), the value case is
    assumed, which can only make the tree stricter than the lowering.
    """

    def __init__(self, tree: MapNestingTree):
        self.t = tree
        self.reduce_depth = 0
        self._zip_vals: dict[int, list] = {}  # id(a zip's arguments) -> their values
        self._zipped: list | None = None  # the components of the map argument at hand

    def run(self) -> None:
        root = self.t.program
        # values as ``expr`` returns them: (space, producers, view steps or None)
        env: dict[str, tuple[str, frozenset[str], tuple[tuple[object, ...], ...] | None]] = {}
        if isinstance(root, nodes.Lambda):
            for p in root.params:
                env[p.name] = ("global", frozenset(), None)
            self.expr(root.body, "global", env, True)
        else:
            assert isinstance(root, nodes.ExprNode), f"the program is no expression: {root}"
            self.expr(root, "global", env, True)

    # value: (space, producers (labels of maps whose output this is), view): ``view`` is
    # the tuple of join/split steps between the producer's output and this value, None
    # when anything else (a transpose, a zip, a computation) is in between
    expr = Dispatch("value_of", nodes.ExprNode)  # (e, dest, env, into=False) -> value

    def value_of_param(self, e: nodes.Param, dest: str, env, into: bool = False):
        return env.get(e.name, ("global", frozenset(), None))

    def value_of_literal(self, e: nodes.Literal, dest: str, env, into: bool = False):
        return "const", frozenset(), None

    def value_of_fun_call(self, e: nodes.FunCall, dest: str, env, into: bool = False):
        if not into and computes(e):  # materialised where its annotation says
            dest, into = infer_space(e) or "global", True
        return self.call(e.f, e.args, dest, env, into)

    def consumed(self, vals) -> None:
        """The producers of ``vals`` are read by code that is no sibling map."""
        for v in vals:
            for p in v[1]:
                self.t.maps[p].read_by_code = True

    # a function applied to its arguments: (f, args, dest, env, into=False) -> value
    call = Dispatch("call", nodes.FunDecl)

    def call_to_mem(self, f: nodes.ToMem, args, dest: str, env, into: bool = False):
        return self.call(f.f, args, dest if into else f.space, env, True)

    def call_reduce(self, f: nodes.Reduce, args, dest: str, env, into: bool = False):
        init = self.expr(args[0], "private", env)
        acc_space = init[0] if init[0] in ("global", "local", "private") else "private"
        arr = self.expr(args[1], dest, env)
        maps = accumulator_chain(f.f)
        if any(m.uid not in self.t._by_uid for m in maps):  # not maps of this tree
            maps = []
        # the update reads the initial value element for element where a sibling wrote it
        # directly: no other code reads it then (else the reduction reads all of it)
        own_init = bool(maps) and init[2] == () and len(init[1]) == 1 and \
            init[1] <= set(self.t.siblings(self.t.label_of(maps[0])))
        self.consumed([arr] if own_init else [init, arr])
        acc = (acc_space, init[1], () if own_init else None)
        self.reduce_depth += 1
        res = self.fun(f.f, [acc, arr], acc_space, env, True)
        self.reduce_depth -= 1
        if not maps or res is None or res[1] != {self.t.label_of(maps[0])} or res[2] != ():
            if own_init:
                self.consumed([init])
            return acc_space, init[1] | arr[1], None
        # the update map rewrites the accumulator in place, element for element: the
        # reduction's result is its output (wrapped in an array of one: a split)
        chain = tuple(self.t.label_of(m) for m in maps)
        self.t.maps[chain[0]].acc_chain = chain
        t = self.t.info.map_types.get(id(maps[0]))
        dims = [] if t is None or arr[1] else shape_of(t[1])[0]
        view = (("split", dims[0]),) if dims else None
        return acc_space, frozenset({chain[0]}) | arr[1], view

    def call_fun_decl(self, f: nodes.FunDecl, args, dest: str, env, into: bool = False):
        """Any other function: its arguments, emitted into the destination where ``f``
        passes it through (``passes``), then what ``f`` makes of their values."""
        vals = [self.expr(a, dest, env, into and self.passes(f)) for a in args]
        arg = args[0] if isinstance(f, nodes.Map) and len(args) == 1 else None
        self._zipped = self._zip_vals.get(id(arg.args)) if (
            isinstance(arg, nodes.FunCall) and isinstance(arg.f, nodes.Zip)) else None
        return self.result(f, vals, dest, env, into)

    def call_zip(self, f: nodes.Zip, args, dest: str, env, into: bool = False):
        """As any function; the components' values are kept for a map over the zip, which
        reads component k's element i at its iteration i (``result_map``)."""
        vals = [self.expr(a, dest, env, into and self.passes(f)) for a in args]
        self._zip_vals[id(args)] = vals
        return self.result(f, vals, dest, env, into)

    # whether a function hands its destination on to its argument (f) -> bool
    passes = Dispatch("passes", nodes.FunDecl)

    def passes_fun_decl(self, f: nodes.FunDecl) -> bool:
        return False

    def passes_map(self, f: nodes.Map) -> bool:  # a view map, not a computing one
        return not computes(f.f)

    def _passes_layout(self, f: nodes.FunDecl) -> bool:
        return True

    passes_zip = passes_join = passes_split = passes_transpose = _passes_layout
    passes_as_scalar = passes_as_vector = passes_reorder_stride = passes_id = _passes_layout

    # the value of a function applied to argument values: (f, vals, dest, env, into)
    result = Dispatch("result", nodes.FunDecl)

    def result_map(self, f: nodes.Map, vals, dest: str, env, into: bool = False):
        if not computes(f.f):  # a view map
            sp, prod, _ = vals[0]
            self.fun(f.f, [(sp, prod, None)], dest, env, into)
            return sp, prod, None
        label = self.t.label_of(f)
        info = self.t.maps[label]
        info.in_reduce = info.in_reduce or self.reduce_depth > 0
        sp, prod, view = vals[0]
        parts, self._zipped = self._zipped, None
        info.reads.add(sp) if sp != "const" else None
        sibs = set(self.t.siblings(label))
        info.depends_on |= set(prod) & sibs
        self.consumed([(sp, set(prod) - sibs, None)])
        # element for element: the whole argument, or each zipped component on its own
        for _, cprod, cview in [vals[0]] if view is not None else parts or []:
            if cview is not None and len(cprod) == 1 and set(cprod) <= sibs:
                (p,) = cprod
                pairs = self.identity_pairs(p, label, cview)
                if pairs:
                    info.identity_from[p] = pairs
        free_prod = self.free_producers(f.f, env)
        info.depends_on |= free_prod & sibs
        self.consumed([(sp, free_prod - sibs, None)])
        # written into its destination (annotations inside are then ignored), or into
        # the buffer it is materialised in
        info.writes = dest if dest in ("global", "local", "private") else "global"
        # its function reads the elements on its behalf (no producer of their own)
        self.fun(f.f, [(sp, frozenset(), None)], info.writes, env, True)
        return info.writes, frozenset({label}), ()

    def result_lambda(self, f: nodes.Lambda, vals, dest: str, env, into: bool = False):
        return self.fun(f, vals, dest, env, into)

    def _result_computed(self, f: nodes.FunDecl, vals, dest: str, env, into: bool = False):
        self.consumed(vals)
        return dest, frozenset().union(*(v[1] for v in vals)), None

    result_user_fun = result_vectorize = result_id = _result_computed

    def result_zip(self, f: nodes.Zip, vals, dest: str, env, into: bool = False):
        spaces = {v[0] for v in vals if v[0] != "const"}
        sp = _strongest(spaces)
        return sp, frozenset().union(*(v[1] for v in vals)), None

    def result_get(self, f: nodes.Get, vals, dest: str, env, into: bool = False):
        return vals[0][0], vals[0][1], None

    def result_join(self, f: nodes.Join, vals, dest: str, env, into: bool = False):
        sp, prod, view = vals[0]
        return sp, prod, None if view is None else (*view, ("join",))

    def result_split(self, f: nodes.Split, vals, dest: str, env, into: bool = False):
        sp, prod, view = vals[0]
        return sp, prod, None if view is None else (*view, ("split", f.chunk))

    def result_fun_decl(self, f: nodes.FunDecl, vals, dest: str, env, into: bool = False):
        """Other layout primitives: a view of the argument, through no join/split chain."""
        sp, prod, _ = vals[0]
        return sp, prod, None

    def identity_pairs(self, prod: str, cons: str, view) -> tuple[tuple[int, int], ...]:
        """The (f, g) fusion depths at which ``cons`` reads ``prod``'s output element for
        element (see ``MapInfo.identity_from``): join and split keep the row-major order,
        so flat iteration i of both is the same element when the first f+1 dimensions of
        the consumer's input and the first g+1 of the producer's output have the same
        number of elements."""
        t = self.t.info.map_types.get(id(self.t.maps[prod].node))
        if t is None:
            return ()
        dims = shape_of(t[1])[0]
        pdims = list(dims)
        for op in view:
            if op[0] == "join":
                if len(dims) < 2:
                    return ()
                dims = [dims[0] * dims[1], *dims[2:]]
            else:
                if not dims:
                    return ()
                dims = [dims[0] / op[1], op[1], *dims[1:]]
        nf = len(self.t.perfect_chain(cons))
        ng = len(self.t.perfect_chain(prod))
        out = []
        for fd in range(min(nf, len(dims) - 1) + 1):
            a = functools.reduce(operator.mul, dims[:fd + 1])
            for gd in range(min(ng, len(pdims) - 1) + 1):
                try:
                    same = a == functools.reduce(operator.mul, pdims[:gd + 1])
                except (LiftmapError, ArithmeticError):  # sizes it cannot compare
                    same = False
                if same:
                    out.append((fd, gd))
        return tuple(out)

    def fun(self, f: nodes.FunDecl, vals, dest: str, env, into: bool = False):
        if isinstance(f, nodes.Lambda):
            inner = dict(env)
            for p, v in zip(f.params, vals):
                inner[p.name] = v
            return self.expr(f.body, dest, inner, into)
        # a declaration applied to values already computed: reuse call with Params bound
        names = [f"__arg{i}" for i in range(len(vals))]
        inner = dict(env)
        for n, v in zip(names, vals):
            inner[n] = v
        return self.call(f, [nodes.Param(n) for n in names], dest, inner, into)

    def free_producers(self, f: nodes.FunDecl, env) -> set[str]:
        bound = {p.name for n in nodes.walk(f) if isinstance(n, nodes.Lambda) for p in n.params}
        out: set[str] = set()
        for n in nodes.walk(f):
            if isinstance(n, nodes.Param) and n.name not in bound and n.name in env:
                out |= env[n.name][1]
        return out


def accumulator_chain(f: nodes.FunDecl) -> list[nodes.Map]:
    """The maps of a reduction's function ``f`` (``\\acc x -> ...``) that rewrite the
    accumulator element for element: the function returns ``mapR(g) $ zip(.., acc, ..)``
    (or ``mapR(g) $ acc``), under ``let``s if any, and reads ``acc`` nowhere else, so
    iteration i of R reads and writes element i only; then the same one level down in
    ``g``, whose element of the accumulator is its parameter (or ``get(k)`` of it, k the
    accumulator's place in the zip). Empty when ``f`` has no such map; the list stops at
    the first level that reads the accumulator's element in another way."""
    if not isinstance(f, nodes.Lambda) or len(f.params) != 2:
        return []
    out: list[nodes.Map] = []
    body, name, comp = f.body, f.params[0].name, None  # the element: name or get(comp)(name)
    while True:
        if _rebinds(body, name) or _uses(body, name, comp) != 1:
            return out
        while (isinstance(body, nodes.FunCall) and isinstance(body.f, nodes.Lambda)
               and len(body.f.params) == len(body.args)):
            body = body.f.body  # let x = e in body: ``name`` is not in e (used once, below)
        if not (isinstance(body, nodes.FunCall) and isinstance(body.f, nodes.Map)
                and computes(body.f.f) and len(body.args) == 1):
            return out
        arg, k = body.args[0], None
        if not _is_element(arg, name, comp):
            if not (isinstance(arg, nodes.FunCall) and isinstance(arg.f, nodes.Zip)):
                return out
            hits = [i for i, a in enumerate(arg.args) if _is_element(a, name, comp)]
            if len(hits) != 1:
                return out
            k = hits[0]
        out.append(body.f)
        g = body.f.f
        if not isinstance(g, nodes.Lambda) or len(g.params) != 1:
            return out
        body, name, comp = g.body, g.params[0].name, k


def _is_element(e: nodes.ExprNode, name: str, comp: int | None) -> bool:
    """``e`` is ``name`` (comp None) or ``get(comp)(name)``."""
    if comp is None:
        return isinstance(e, nodes.Param) and e.name == name
    return (isinstance(e, nodes.FunCall) and isinstance(e.f, nodes.Get) and e.f.index == comp
            and len(e.args) == 1 and isinstance(e.args[0], nodes.Param)
            and e.args[0].name == name)


def _uses(e: nodes.Node, name: str, comp: int | None) -> int:
    """How often ``e`` reads the element ``_is_element`` names (a bare ``name`` counts when
    comp is set: it reads every component)."""
    if isinstance(e, nodes.Param):
        return int(e.name == name)
    if comp is not None and isinstance(e, nodes.ExprNode) and _is_element(e, name, comp):
        return 1
    if (comp is not None and isinstance(e, nodes.FunCall) and isinstance(e.f, nodes.Get)
            and len(e.args) == 1 and isinstance(e.args[0], nodes.Param)):
        return 0  # another component of the tuple
    return sum(_uses(c, name, comp) for c in e.children())


def _rebinds(e: nodes.Node, name: str) -> bool:
    """A lambda inside ``e`` has a parameter called ``name``."""
    return any(isinstance(n, nodes.Lambda) and any(p.name == name for p in n.params)
               for n in nodes.walk(e))




def _strongest(spaces: set[str]) -> str:
    for s in ("private", "local", "global"):
        if s in spaces:
            return s
    return "const"


def label_maps(program: nodes.Node) -> nodes.Node:
    """Gives every computing map a unique label (keeps existing ones): A, B, ..., Z, A1, ..."""
    used = {m.label for m in nodes.walk(program) if isinstance(m, nodes.Map) and m.label}
    fresh = (lab for lab in _label_names() if lab not in used)
    seen: set[str] = set()
    todo: dict[int, str] = {}
    for n in nodes.walk(program):
        if isinstance(n, nodes.Map) and computes(n.f):
            if n.label is None or n.label in seen:
                todo[n.uid] = next(fresh)
            seen.add(n.label or todo[n.uid])
    if not todo:
        return program

    def fn(n: nodes.Node):
        if isinstance(n, nodes.Map) and n.uid in todo:
            return nodes.replace(n, label=todo[n.uid])
        return None

    return nodes.rebuild(program, fn)


def _label_names():
    letters = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    yield from letters
    for k in count(1):
        for a in letters:
            lab = f"{a}{k}"
            if nodes.valid_label(lab):
                yield lab
