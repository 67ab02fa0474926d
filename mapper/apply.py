"""Applying a mapping: free maps become mapSeq/mapVec/mapLcl/mapWrg/mapGlb, fused maps merge.

A map given code V becomes ``mapVec(vX)`` (X its label): its vector width ``vX`` is a new
size of the mapped program, a tuning parameter (:func:`vector_width_names`). A parallel map
that can also run in lanes (``mapper.lanes_probe.parallel_lanes``) is strip-mined:
``mapGlb(0)(f)`` becomes ``join o mapGlb(0)(mapVec(vX)(f)) o split(vX*uX)``, each of its
iterations ``uX`` vectors of ``vX`` of the original's iterations (a register block: the
lowering runs the ``uX`` vectors together inside the loop of their body,
``codegen.lanes``); ``vX`` = ``uX`` = 1 (the default where no value is given) is the map as
it was.

Fusion of a perfectly nested map with its parent (code 1) follows CC'22 4.1:
``p(m(f))`` becomes ``split(n) o p'(f) o join`` where ``p'`` keeps p's code and
``n`` is the length of m's input. Fusions are applied outermost first, so a
chain of fused maps collapses into one loop.
"""

from __future__ import annotations

from collections.abc import Mapping as AbcMapping
from dataclasses import dataclass

from codegen.lanes import DEFAULT_LANES, default_lanes, reduction_identity
from ir.builders import compose, fresh, join, split, transpose
from ir.errors import LiftmapError
from ir.nodes import (
    ExprNode,
    FunCall,
    FunDecl,
    Lambda,
    Map,
    Node,
    Param,
    Reduce,
    UserFun,
    rebuild,
    replace,
    walk,
)
from ir.sym import Expr, Var, sym
from ir.typecheck import typecheck
from ir.types import ArrayType, ScalarType, TupleType, VectorType
from mapper.encoding import FUSED, SEQ, VEC
from mapper.errors import MappingError
from mapper.lanes_probe import block_shape, mentions, parallel_lanes, row_blocks
from mapper.nesting import MapNestingTree, _direct_map

_KIND = {1: "mapLcl", 2: "mapWrg", 3: "mapGlb"}


def apply_mapping(program: Node, codes: AbcMapping[str, int],
                  tree: MapNestingTree | None = None) -> Node:
    """The low-level program for ``codes`` (map label -> code). Maps must be labelled."""
    tree = tree or MapNestingTree(program)
    missing = [m for m in tree.labels if m not in codes]
    if missing:
        raise MappingError(f"the mapping gives no code for map(s) {', '.join(missing)}")
    unknown = [m for m in codes if m not in tree.maps]
    if unknown:
        raise MappingError(f"unknown map(s) {', '.join(unknown)}; the maps are "
                           f"{', '.join(tree.labels)}")
    for m, code in codes.items():
        if code == FUSED and not tree.maps[m].perfectly_nested:
            raise MappingError(f"map {m} cannot be fused (code 1): it is not perfectly nested "
                               "in its parent map")
    by_uid = {tree.maps[m].uid: code for m, code in codes.items() if code != FUSED}
    widths = vector_width_names(program, codes, tree)
    strip = {tree.maps[m].uid: widths[m] for m in parallel_lanes(tree, codes)}
    unrolls = unroll_names(program, codes, tree)
    reductions = reduction_widths(program, tree)
    rows = {tree.maps[m].uid: unrolls[m] for m in row_blocks(tree, codes)}
    if rows:
        program = rebuild(program, lambda n: _row_block(n, rows[n.uid])
                          if isinstance(n, Map) and n.uid in rows else None)

    def set_kind(n: Node):
        if isinstance(n, Reduce) and id(n) in reductions:
            return replace(n, width=Var(reductions[id(n)], 1, None))
        if isinstance(n, Map) and n.uid in by_uid:
            code = by_uid[n.uid]
            if code == SEQ:
                return replace(n, kind="mapSeq", dim=None)
            if code == VEC:
                name = widths[tree.label_of(n)]
                return replace(n, kind="mapVec", dim=None, width=Var(name, 1, None))
            if n.uid in strip:
                w = Var(strip[n.uid], 1, None)
                u = Var(unrolls[tree.label_of(n)], 1, None)
                inner = rebuild(n.f, set_kind)
                assert isinstance(inner, FunDecl)  # a map's function rebuilt is one
                lanes = Map(inner, "mapVec", None, None, width=w)
                outer = replace(n, f=lanes, kind=_KIND[code // 10], dim=code % 10)
                assert isinstance(outer, Map)
                return compose(join(), outer, split(w * u))
            return replace(n, kind=_KIND[code // 10], dim=code % 10)
        return None

    out = rebuild(program, set_kind)
    fused = [m for m in tree.labels if codes[m] == FUSED]  # pre-order: parents first
    if fused:
        sizes = _inner_sizes(program, tree)
        for m in fused:
            out = _fuse(out, tree.maps[m].uid, sizes)
    return out


def _row_block(a: Map, size: str) -> Node:
    """``mapA(\\x -> mapB(g) $ Y)`` as ``join o mapA(\\xs -> transpose(mapB(\\y ->
    mapVec(1)(\\x -> g(y)) $ xs) $ Y)) o split(size)``, and ``mapA(mapB(g))`` as ``join
    o mapA(\\xs -> transpose(mapB(\\ys -> mapVec(1)(g) $ ys) $ transpose(xs))) o
    split(size)`` (layout functions applied to ``B``'s result, ``join(mapB(g) $ Y)``,
    apply to each row after the transpose, as ``map(join)``): each iteration of ``A``
    takes ``size`` rows, and ``B``'s body runs them together (``mapVec(1)``: a map in one
    lane, whose iterations the lowering jams into the loop of their body, a register block
    of ``size`` x ``B``'s own; ``codegen.lanes.jam``). Only ``row_blocks`` maps come
    here."""
    shape = block_shape(a)
    assert shape is not None  # row_blocks checked the shape
    x, layout, b, ys, own = shape
    g = b.f
    xs = fresh("rows")
    if own:  # B maps over x itself: the chunk's columns, each a row's element per row
        cols = fresh("col")
        rowmap = Map(g, "mapVec", None, None, width=sym(1))
        inner = replace(b, f=Lambda((cols,), FunCall(rowmap, (cols,))))
        ys = FunCall(transpose(), (xs,))
    else:
        if isinstance(g, Lambda) and len(g.params) == 1:
            y, gbody = g.params[0], g.body
        else:
            y = fresh("y")
            gbody = FunCall(g, (y,))
        rowmap = Map(Lambda((x,), gbody), "mapVec", None, None, width=sym(1))
        inner = replace(b, f=Lambda((y,), FunCall(rowmap, (xs,))))
    assert isinstance(inner, Map)
    rows: ExprNode = FunCall(transpose(), (FunCall(inner, (ys,)),))
    if layout:  # each row's layout as the map gave it: map(join) o transpose
        rows = FunCall(Map(compose(*layout)), (rows,))
    outer = replace(a, f=Lambda((xs,), rows))
    assert isinstance(outer, Map)
    return compose(join(), outer, split(Var(size, 1, None)))


def vector_width_names(program: Node, codes: AbcMapping[str, int],
                       tree: MapNestingTree | None = None) -> dict[str, str]:
    """The size that holds the vector width of each map in lanes (label -> name): V maps
    and strip-mined parallel maps (:func:`default_widths`); ``v`` + the label (``vB``),
    with ``_`` appended while the program already uses the name."""
    tree = tree or MapNestingTree(program)
    lanes = set(parallel_lanes(tree, codes))
    return _fresh_names(program, tree, "v", [m for m, code in codes.items()
                                             if code == VEC or m in lanes])


def unroll_names(program: Node, codes: AbcMapping[str, int],
                 tree: MapNestingTree | None = None) -> dict[str, str]:
    """The size that holds each strip-mined parallel map's vectors per iteration and each
    row-blocked map's rows per iteration (label -> name): ``u`` + the label (``uB``), ``_``
    appended while the program uses the name."""
    tree = tree or MapNestingTree(program)
    return _fresh_names(program, tree, "u", [*parallel_lanes(tree, codes),
                                             *row_blocks(tree, codes)])


def _fresh_names(program: Node, tree: MapNestingTree, prefix: str,
                 labels: list[str]) -> dict[str, str]:
    """label -> ``prefix`` + label, with ``_`` appended while the program uses the name."""
    taken = _size_names(program) | frozenset().union(
        *(c.rel.free_vars() for c in tree.info.constraints))
    out = {}
    for m in labels:
        name = prefix + m
        while name in taken:
            name += "_"
        out[m] = name
    return out


def width_names(program: Node, codes: AbcMapping[str, int],
                tree: MapNestingTree | None = None) -> frozenset[str]:
    """Every size the mapping adds: its maps' and its reductions' vector widths and its
    strip-mined maps' vectors per iteration."""
    tree = tree or MapNestingTree(program)
    return frozenset(vector_width_names(program, codes, tree).values()) \
        | frozenset(reduction_widths(program, tree).values()) \
        | frozenset(unroll_names(program, codes, tree).values())


def default_widths(program: Node, codes: AbcMapping[str, int],
                   tree: MapNestingTree | None = None,
                   sizes: AbcMapping[str, int] | None = None) -> dict[str, int]:
    """The widths a build takes where none is given (``codegen.lanes.lane_defaults``): 1
    (no lanes) for each strip-mined parallel map and each reduction, and for a V map
    ``codegen.lanes.default_lanes`` of its length at ``sizes`` (8, 4 or 2 lanes)."""
    plan = width_plan(program, codes, tree or MapNestingTree(program))
    return dict(plan.fixed) if sizes is None else plan.defaults(sizes)


@dataclass(frozen=True)
class WidthPlan:
    """The sizes a mapping adds to its program (``names``: :func:`width_names`) and their
    defaults (:func:`default_widths`): ``fixed`` those that do not depend on the sizes,
    ``vec`` each V map's width name with the length it divides. Made once per mapping
    (``MappingProblem.width_plan``), applied to each set of sizes (``defaults``)."""

    names: frozenset[str]
    fixed: dict[str, int]
    vec: tuple[tuple[str, Expr], ...]

    def defaults(self, sizes: AbcMapping[str, int],
                 lanes: tuple[int, ...] = DEFAULT_LANES) -> dict[str, int]:
        """The default widths at ``sizes`` (a V map's width only where ``sizes`` lacks
        it and its length evaluates: ``codegen.lanes.default_lanes`` among ``lanes``)."""
        out = dict(self.fixed)
        for name, length in self.vec:
            if name in sizes:
                continue
            try:
                n = length.evaluate(sizes)
            except LiftmapError:
                continue
            if n:
                out[name] = default_lanes(n, lanes)
        return out


def width_plan(program: Node, codes: AbcMapping[str, int],
               tree: MapNestingTree) -> WidthPlan:
    """The :class:`WidthPlan` of ``codes`` on ``program``."""
    names = vector_width_names(program, codes, tree)
    fixed = {names[m]: 1 for m in parallel_lanes(tree, codes)}
    fixed.update({name: 1 for name in unroll_names(program, codes, tree).values()})
    fixed.update({name: 1 for name in reduction_widths(program, tree).values()})
    vec = []
    for m, code in codes.items():
        if code != VEC:
            continue
        t = tree.info.map_types.get(id(tree.maps[m].node), (None,))[0]
        if isinstance(t, ArrayType):
            vec.append((names[m], t.size))
    return WidthPlan(width_names(program, codes, tree), fixed, tuple(vec))


def reduction_widths(program: Node, tree: MapNestingTree) -> dict[int, str]:
    """The reductions that can run in vector lanes (``id`` of the node -> the name of its
    width, ``rv1``, ``rv2``... in program order): ``reduce(\\acc x -> op(acc, e))`` with
    ``op`` associative and commutative (``codegen.lanes.reduction_identity``: ``a + b``,
    max, min) on floats, ``e`` not reading ``acc``, no map inside, and scalar elements
    (a reduction of vectors, as the convolution's, already has its lanes)."""
    cache = tree.__dict__.setdefault("_reduction_widths", None)
    if cache is not None:
        return cache
    taken = _size_names(program) | frozenset().union(
        *(c.rel.free_vars() for c in tree.info.constraints))
    out: dict[int, str] = {}
    for n in walk(program):
        if not isinstance(n, Reduce) or n.width is not None or not _lane_reduction(n, tree):
            continue
        name = f"rv{len(out) + 1}"
        while name in taken:
            name += "_"
        out[id(n)] = name
    tree.__dict__["_reduction_widths"] = out
    return out


def _lane_reduction(r: Reduce, tree: MapNestingTree) -> bool:
    f = r.f
    if not isinstance(f, Lambda) or len(f.params) != 2 or not isinstance(f.body, FunCall):
        return False
    uf, args = f.body.f, f.body.args
    if not isinstance(uf, UserFun) or len(args) != 2 or reduction_identity(uf) is None:
        return False
    if any(t != ScalarType("float") for t in (*uf.in_types, uf.out_type)):
        return False
    acc = f.params[0].name
    k = next((j for j, a in enumerate(args) if isinstance(a, Param) and a.name == acc), None)
    if k is None or mentions(args[1 - k], acc) or any(isinstance(x, Map) for x in walk(f)):
        return False
    types = tree.info.map_types.get(id(r))
    return types is not None and isinstance(types[0], ArrayType) \
        and not _has_vector_or_array(types[0].elem)


def _has_vector_or_array(t) -> bool:
    if isinstance(t, (VectorType, ArrayType)):
        return True
    if isinstance(t, TupleType):
        return any(_has_vector_or_array(e) for e in t.elems)
    return False


def _size_names(program: Node) -> frozenset[str]:
    """Every size name the program's input types use."""
    names: set[str] = set()
    for p in getattr(program, "params", ()):
        if p.type is not None:
            names |= {str(v) for v in p.type.free_vars()}
    return frozenset(names)


def _inner_sizes(program: Node, tree: MapNestingTree) -> dict[int, Expr]:
    """For each map (by uid): the length of the arrays it maps over, which fusing it into
    its parent splits by. Fusing other maps does not change it, so one type check of the
    unmapped program serves every mapping (kept on ``tree``)."""
    if tree._inner_sizes is not None:
        return tree._inner_sizes
    info = typecheck(program)
    out: dict[int, Expr] = {}
    for n in _maps(program):
        t = info.map_types.get(id(n), (None,))[0]
        if isinstance(t, ArrayType):
            out[n.uid] = t.size
    tree._inner_sizes = out
    return out


def _fuse(program: Node, child_uid: int, inner_sizes: dict[int, Expr]) -> Node:
    parent = None
    for n in _maps(program):
        inner = _direct_map(n.f)
        if inner is not None and inner.uid == child_uid:
            parent = n
            break
    if parent is None:
        raise MappingError("internal: fused map has no perfectly nesting parent")
    n_inner = inner_sizes[child_uid]
    child = _direct_map(parent.f)
    assert child is not None  # parent was chosen for its direct child map
    merged = Map(child.f, parent.kind, parent.dim, parent.label, uid=parent.uid)
    replacement = compose(split(n_inner), merged, join())

    def fn(n: Node):
        if isinstance(n, Map) and n.uid == parent.uid:
            return replacement
        return None

    return rebuild(program, fn)


def _maps(program: Node):
    from ir.nodes import walk

    return [n for n in walk(program) if isinstance(n, Map)]


__all__ = ["apply_mapping", "Lambda"]
