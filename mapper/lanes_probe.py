"""Which maps can run in vector lanes (code V), judged once per program as LIFT does.

CC'22 Section 4: "Vectorization is applied exhaustively to 1D maps with consecutive memory
accesses ... LIFT checks the differences between index expressions at iterations i, i+1,
..., i+(vectorLen-1)". The index expressions come from the lowering's views, which need
concrete sizes: the program, every map sequential, is built (not compiled) at *probe
sizes*, generic values that meet its algorithmic constraints, and each map's loop is read:

* every value its body computes must be a scalar (a body that already holds vectors, from
  ``asVector``, cannot be split into lanes again);
* at least one access of its body (a read, or the write of its result) must be contiguous
  across the lanes (``codegen.lanes.access_stride``): a map whose every access is strided
  or uniform gains nothing from lanes (CC'22 Table 1's M5, "unvectorizable"). Accesses
  that are not contiguous are gathered and scattered lane by lane where the map is V.

The verdicts are sizes-independent in practice (a stride is a product of array sizes, 1
only in an array's last dimension); probe sizes avoid size-1 dimensions, which would make
every index look contiguous. Where no probe sizes can be found or the program does not
lower at them, no map is judged (:func:`lane_verdicts` says so) and the lowering decides.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, replace

from codegen.errors import LoweringError
from codegen.lanes import access_stride
from codegen.stmt import Loop, Store, leaves_of, walk_stmts
from ir.errors import LiftmapError
from ir.nodes import (
    ExprNode,
    FunCall,
    FunDecl,
    Join,
    Lambda,
    Map,
    Node,
    Param,
    Split,
    Transpose,
    rebuild,
    walk,
)
from ir.typecheck import TypeInfo, typecheck
from ir.types import ArrayType, ScalarType, TupleType, Type, VectorType
from mapper.encoding import SEQ
from mapper.nesting import MapNestingTree

# probe values: tuning-like sizes (divisors, strides, steps) get small distinct powers of two
# (so that nested splits do not collapse to one iteration), the others distinct multiples
# of 16 (so every divisor divides them), never 1
_LENGTHS = tuple(64 * k for k in range(3, 19))
_DIVISORS = (2, 4, 8, 16, 32)


@dataclass(frozen=True)
class LaneVerdict:
    """Whether map ``label`` may be V, and why not."""

    label: str
    ok: bool
    why: str = ""


def _divisor_vars(info: TypeInfo) -> set[str]:
    """Sizes that divide others (``x % s == 0``) or step over them: given small values."""
    out: set[str] = set()
    for c in info.constraints:
        t = c.rel.lhs.to_tree()
        if t[0] == "mod":
            den = t[2]
            if den[0] == "var":
                out.add(den[1])
    return out


def probe_sizes(program: Node, info: TypeInfo) -> dict[str, int] | None:
    """Sizes that meet ``program``'s algorithmic constraints, none of them 1, or None."""
    names: set[str] = set()
    for p in getattr(program, "params", ()):
        if p.type is not None:
            names |= set(p.type.free_vars())
    for c in info.constraints:
        names |= set(c.rel.free_vars())
    names = {n for n in names if not n.startswith("_")}
    small = sorted(_divisor_vars(info) & names)
    others = sorted(names - set(small))
    checked = [c for c in info.constraints if c.rel.free_vars() <= names]

    def meets(sizes: dict[str, int]) -> bool:
        try:  # every variable has a value: evaluated, not substituted (hundreds of combos)
            return all(c.rel.evaluate(sizes) for c in checked)
        except (LiftmapError, ArithmeticError):  # e.g. a length that does not divide
            return False

    def combos():
        if len(small) <= 4:  # every assignment, the most distinct values first
            yield from sorted(itertools.product(_DIVISORS, repeat=len(small)),
                              key=lambda c: (-len(set(c)), -sum(c)))
        else:
            powers = [4 << k for k in range(len(small))]
            yield from (powers, powers[::-1], [4] * len(small), [2] * len(small))

    for spread in (True, False):
        base = {n: (_LENGTHS[k % len(_LENGTHS)] if spread else 256)
                for k, n in enumerate(others)}
        for combo in combos():
            sizes = {**base, **dict(zip(small, combo))}
            if not meets(sizes):
                continue
            try:
                typecheck(program, sizes)
            except LiftmapError:
                continue
            return sizes
    return None


def vector_typed(node: Node, info: TypeInfo) -> Type | None:
    """A vector type computed under ``node`` (by ``asVector``, a vector literal or user
    function), from the program's type check; None if there is none."""
    for n in walk(node):
        t = info.types.get(id(n))
        if t is not None and _has_vector(t):
            return t
    mt = info.map_types.get(id(node))
    for t in mt or ():
        if _has_vector(t):
            return t
    return None


def _has_vector(t: Type) -> bool:
    if isinstance(t, VectorType):
        return True
    if isinstance(t, ArrayType):
        return _has_vector(t.elem)
    if isinstance(t, TupleType):
        return any(_has_vector(e) for e in t.elems)
    return False


def lane_verdicts(program: Node, labels: list[str], info: TypeInfo,
                  maps: dict[str, Node] | None = None,
                  roots: dict[str, str] | None = None) -> tuple[dict[str, LaneVerdict], str]:
    """Map label -> verdict for the maps that can be judged, and a note on the rest.
    ``maps`` (label -> map node) lets maps whose body computes vectors be judged without
    sizes, ``roots`` (label -> the outermost map of its nest) the maps of their nests."""
    from codegen.lower import build

    typed: dict[str, LaneVerdict] = {}
    for m, node in (maps or {}).items():
        vt = vector_typed(node, info)
        if vt is not None:
            typed[m] = LaneVerdict(m, False, f"its body already computes vectors ({vt})")
    # a nest that spells its own vectors (asVector) keeps them: the program chose its
    # vectorisation there, and lanes elsewhere in it would only widen the search
    for m in maps or {}:
        r = (roots or {}).get(m)
        spelled = [x for x in typed if (roots or {}).get(x) == r]
        if m not in typed and r is not None and spelled:
            typed[m] = LaneVerdict(m, False, f"its nest already computes vectors (map "
                                             f"{spelled[0]}): the program chose its lanes")
    if not isinstance(program, Lambda):
        return typed, "the program declares no inputs: maps are judged when lowered"
    sizes = probe_sizes(program, info)
    if sizes is None:
        return typed, ("no probe sizes meet the program's constraints: maps are judged when "
                       "lowered")
    try:
        b = build(_all_sequential(program, maps), sizes)
    except (LoweringError, LiftmapError, ArithmeticError) as e:
        return typed, (f"the program does not lower at probe sizes ({e}): maps are judged "
                       "when lowered")
    out: dict[str, LaneVerdict] = dict(typed)
    for lp in walk_stmts(b.top):
        if not isinstance(lp, Loop) or not lp.is_map or not lp.label or lp.label in out:
            continue
        if lp.n < 2:
            continue
        out[lp.label] = _judge(lp)
    return out, ""


def _all_sequential(program: Node, maps: dict[str, Node] | None) -> Node:
    """``program`` with its computing maps (``maps``: label -> node; every labelled map
    where not given) sequential."""
    uids = {n.uid for n in (maps or {}).values() if isinstance(n, Map)}

    def fn(n: Node):
        if isinstance(n, Map) and n.kind == "map" and (n.uid in uids or (
                not uids and n.label)):
            return replace(n, kind="mapSeq")
        return None

    return rebuild(program, fn)


def lanes_ok(tree: MapNestingTree, m: str) -> bool:
    """Map ``m`` passed the lane check (judged once per tree, cached on it)."""
    verdicts = tree.__dict__.get("_lane_verdicts")
    if verdicts is None:
        verdicts, _ = lane_verdicts(tree.program, tree.labels, tree.info,
                                    {x: tree.maps[x].node for x in tree.labels},
                                    {x: tree.root_of(x) for x in tree.labels})
        tree.__dict__["_lane_verdicts"] = verdicts
    v = verdicts.get(m)
    return v is not None and v.ok


def parallel_lanes(tree: MapNestingTree, codes: Mapping[str, int]) -> list[str]:
    """The parallel maps of ``codes`` that also run in lanes when given a width (strip-mined:
    each iteration of the parallel map runs ``w`` of its iterations in vector lanes): a map
    that passed the lane check, with only sequential maps inside, alone in its kernel with
    the maps around and inside it (a sibling in the kernel that reads what it writes, or
    writes what it reads, would pair its iterations with other work-items')."""
    out = []
    for m, code in codes.items():
        if code < 10 or m not in tree.maps:
            continue
        inner = tree.nested(m)
        if any(codes.get(x) != SEQ for x in inner):
            continue
        chain = {m, *inner, *tree.outer(m)}
        if not set(tree.kernel_members(m)) <= chain:
            continue
        if lanes_ok(tree, m):
            out.append(m)
    return out


def row_blocks(tree: MapNestingTree, codes: Mapping[str, int]) -> dict[str, str]:
    """The parallel maps of ``codes`` that also take a block of rows per iteration (2-D
    register blocking; ``mapper.apply``), each with the map inside it (label -> label): a
    map ``A`` whose function is ``\\x -> mapB(g) $ Y``, layout functions (join, split,
    transpose) possibly applied to the result, with ``Y`` free of ``x`` (a matmul's
    ``Bt``: ``map_x(map_y(g))`` is ``transpose(map_y(map_x(g)))``) or ``Y`` = ``x`` with
    ``g`` free of ``x`` (``map(map(g))``: the rows' chunk is transposed first), and ``B``
    strip-mined (:func:`parallel_lanes`)."""
    strips = set(parallel_lanes(tree, codes))
    out = {}
    for m, code in codes.items():
        if code < 10 or m not in tree.maps:
            continue
        shape = block_shape(tree.maps[m].node)
        if shape is None:
            continue
        inner = shape[2]
        label = next((c for c in tree.maps[m].children if tree.maps[c].uid == inner.uid),
                     None)
        if label in strips:
            out[m] = label
    return out


def block_shape(a: Map) -> tuple[Param, list[FunDecl], Map, ExprNode, bool] | None:
    """``A``'s function as :func:`row_blocks` reads it: its parameter ``x``, the layout
    functions applied last (outermost first), the inner map ``B``, ``B``'s array, and
    whether that array is ``x`` itself; None for another shape."""
    f = a.f
    if isinstance(f, Map):  # map(map(g)): \x -> map(g) $ x
        x = Param(f"x_blk{a.uid}")
        f = Lambda((x,), FunCall(f, (x,)))
    if not isinstance(f, Lambda) or len(f.params) != 1:
        return None
    call, layout = peel_layout(f.body)
    if not isinstance(call, FunCall) or not isinstance(call.f, Map) or len(call.args) != 1:
        return None
    x, inner, arg = f.params[0], call.f, call.args[0]
    if isinstance(arg, Param) and arg.name == x.name:
        return None if mentions(inner.f, x.name) else (x, layout, inner, arg, True)
    return None if mentions(arg, x.name) else (x, layout, inner, arg, False)


def mentions(e: Node, name: str) -> bool:
    """A parameter named ``name`` occurs in ``e``."""
    return any(isinstance(n, Param) and n.name == name for n in walk(e))


def peel_layout(e: Node) -> tuple[Node, list[FunDecl]]:
    """``e`` without the layout functions (join, split, transpose) applied last, and those
    functions, outermost first: ``join(mapK(g) $ Y)`` is ``mapK(g) $ Y`` and ``[join]``."""
    fs: list[FunDecl] = []
    while isinstance(e, FunCall) and len(e.args) == 1:
        f, arg = e.f, e.args[0]
        if isinstance(f, LAYOUT):
            fs.append(f)
            e = arg
            continue
        # a composition applied, (join o mapK(g)) $ Y: \p -> join(mapK(g)(p)) applied to Y
        if not isinstance(f, Lambda) or len(f.params) != 1:
            break
        inner, more = peel_layout(f.body)
        p = f.params[0].name
        if not (isinstance(inner, FunCall) and len(inner.args) == 1
                and isinstance(inner.args[0], Param) and inner.args[0].name == p
                and not any(isinstance(n, Param) and n.name == p for n in walk(inner.f))):
            break
        fs += more
        e = FunCall(inner.f, (arg,))
    return e, fs


LAYOUT = (Join, Split, Transpose)


def _judge(lp: Loop) -> LaneVerdict:
    private = {id(s.buf) for s in walk_stmts(lp.body) if type(s).__name__ == "Decl"}
    contiguous = False
    for s in walk_stmts(lp.body):
        if not isinstance(s, Store):
            continue
        d = s.dest
        if id(d.buf) not in private and access_stride(d.idx, lp.var, 4) == 0:
            return LaneVerdict(lp.label, False,
                               f"each of its iterations rewrites {d.buf.space} buffer "
                               f"{d.buf.name} in place: its lanes would share it")
        for leaf in (s.dest, *leaves_of(s.value)):
            if not isinstance(leaf.type, ScalarType):
                return LaneVerdict(lp.label, False,
                                   f"its body already computes vectors ({leaf.type})")
            if id(leaf.buf) in private:
                continue
            if access_stride(leaf.idx, lp.var, 4) == 1:
                contiguous = True
    if not contiguous:
        return LaneVerdict(lp.label, False,
                           "none of its accesses is contiguous across iterations "
                           "(unvectorizable, CC'22 Table 1 M5)")
    return LaneVerdict(lp.label, True)
