"""Applying a mapping: free maps become mapSeq/mapVec/mapLcl/mapWrg/mapGlb, fused maps merge.

A map given code V becomes ``mapVec(vX)`` (X its label): its vector width ``vX`` is a new
size of the mapped program, a tuning parameter (:func:`vector_width_names`). A parallel map
that can also run in lanes (``mapper.lanes_probe.parallel_lanes``) is strip-mined:
``mapGlb(0)(f)`` becomes ``join o mapGlb(0)(mapVec(vX)(f)) o split(vX)``, each of its
iterations ``vX`` of the original's in vector lanes; ``vX`` = 1 (the default where no value
is given) is the map as it was.

Fusion of a perfectly nested map with its parent (code 1) follows CC'22 4.1:
``p(m(f))`` becomes ``split(n) o p'(f) o join`` where ``p'`` keeps p's code and
``n`` is the length of m's input. Fusions are applied outermost first, so a
chain of fused maps collapses into one loop.
"""

from __future__ import annotations

from collections.abc import Mapping as AbcMapping

from ir.builders import compose, join, split
from ir.nodes import FunDecl, Lambda, Map, Node, rebuild, replace
from ir.sym import Expr, Var
from ir.typecheck import typecheck
from ir.types import ArrayType
from mapper.encoding import FUSED, SEQ, VEC
from mapper.errors import MappingError
from mapper.lanes_probe import parallel_lanes
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

    def set_kind(n: Node):
        if isinstance(n, Map) and n.uid in by_uid:
            code = by_uid[n.uid]
            if code == SEQ:
                return replace(n, kind="mapSeq", dim=None)
            if code == VEC:
                name = widths[tree.label_of(n)]
                return replace(n, kind="mapVec", dim=None, width=Var(name, 1, None))
            if n.uid in strip:
                w = Var(strip[n.uid], 1, None)
                inner = rebuild(n.f, set_kind)
                assert isinstance(inner, FunDecl)  # a map's function rebuilt is one
                lanes = Map(inner, "mapVec", None, None, width=w)
                outer = replace(n, f=lanes, kind=_KIND[code // 10], dim=code % 10)
                assert isinstance(outer, Map)
                return compose(join(), outer, split(w))
            return replace(n, kind=_KIND[code // 10], dim=code % 10)
        return None

    out = rebuild(program, set_kind)
    fused = [m for m in tree.labels if codes[m] == FUSED]  # pre-order: parents first
    if fused:
        sizes = _inner_sizes(program, tree)
        for m in fused:
            out = _fuse(out, tree.maps[m].uid, sizes)
    return out


def vector_width_names(program: Node, codes: AbcMapping[str, int],
                       tree: MapNestingTree | None = None) -> dict[str, str]:
    """The size that holds the vector width of each map in lanes (label -> name): V maps
    and strip-mined parallel maps (:func:`default_widths`); ``v`` + the label (``vB``),
    with ``_`` appended while the program already uses the name."""
    tree = tree or MapNestingTree(program)
    lanes = set(parallel_lanes(tree, codes))
    taken = _size_names(program) | frozenset().union(
        *(c.rel.free_vars() for c in tree.info.constraints))
    out = {}
    for m, code in codes.items():
        if code == VEC or m in lanes:
            name = f"v{m}"
            while name in taken:
                name += "_"
            out[m] = name
    return out


def default_widths(program: Node, codes: AbcMapping[str, int],
                   tree: MapNestingTree | None = None) -> dict[str, int]:
    """The widths a build takes where none is given: 1 (no lanes) for each strip-mined
    parallel map's (a V map's width must be given: it asks for lanes)."""
    tree = tree or MapNestingTree(program)
    names = vector_width_names(program, codes, tree)
    return {names[m]: 1 for m in parallel_lanes(tree, codes)}


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
