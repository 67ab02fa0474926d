"""The parallel-mapping rules: CC'22 rules (1)-(8), the holes found by testing, and the
conditions of vector lanes (code V).

Each rule is a named generator over a ``MapNestingTree`` that yields
``Constraint`` instances over the maps' codes (CC'22 Table 2 encoding), each
with a one-line description that names the maps it is about.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import combinations

from constraints.expr import FALSE, TRUE, And, Not, Or, Param, Pred, eq, ne
from constraints.model import Constraint
from ir import nodes
from ir.computes import computes
from mapper.encoding import SEQ, VEC
from mapper.errors import ConfigurationError
from mapper.lanes_probe import lanes_ok
from mapper.nesting import MapNestingTree, _Spaces
from mapper.rule_names import RuleKind, RuleName
from mapper.text import show_constraint

FUSION_STRATEGIES = ("always", "never", "free")
_DOMAINS = {1: "local", 2: "work-group", 3: "global"}


def _instance(rule: RuleName, predicate: Pred, description: str,
              subjects: Iterable[str]) -> Constraint:
    """A rule instance; it prints with code names, simplified (``show_constraint``)."""
    return Constraint(rule, predicate, description, tuple(subjects), show_constraint)


def c(m: str) -> Param:
    return Param(m)


def level(m: str):
    return Param(m) // 10


def dim(m: str):
    return Param(m) % 10


def _any_is(maps, code: int) -> Pred:
    return Or(*(eq(c(m), code) for m in maps)) if maps else FALSE


def _none_is(maps, code: int) -> Pred:
    return And(*(ne(c(m), code) for m in maps)) if maps else TRUE


def _chain_text(chain) -> str:
    return "-".join(chain)


KINDS = tuple(RuleKind)


@dataclass(frozen=True)
class Rule:
    """A named rule: ``generate(tree)`` yields its constraint instances.

    Its ``kind`` (its name's) is ``validity`` (the OpenCL model: memory scope, hierarchy,
    synchronisation, races; exact against the oracle ``experiments/oracle.py``) or
    ``heuristic`` (prunes mappings that lower and run correctly but are unlikely to be
    fast; switchable with ``heuristics=False``)."""

    name: RuleName
    title: str
    source: str  # where it comes from: "CC'22 rule (3)", "added: ..."
    generate: Callable[[MapNestingTree], Iterator[Constraint]]

    @property
    def kind(self) -> RuleKind:
        return self.name.kind


# ------------------------------------------------------------- index functions
# The lowering (codegen/launch.py) gives each kernel, per dimension d, a local size (the
# largest mapLcl(d) trip count, 1 without mapLcl(d)) and a number of work-groups (the
# largest mapWrg(d) trip count, 1 without mapWrg(d)). So within one kernel some codes
# distribute iterations over work-items *the same way*: without a mapLcl(d), mapWrg(d)
# and mapGlb(d) both give iteration i to work-group i (of one work-item); without a
# mapWrg(d), mapLcl(d) and mapGlb(d) both give it to work-item i of the single group.
# These predicates state that equivalence over the codes of the kernel's maps.


def _has(t: MapNestingTree, m: str, code: int) -> Pred:
    """Some map of ``m``'s kernel has ``code``."""
    return _any_is(t.kernel_members(m), code)


def unit(t: MapNestingTree, m: str) -> bool:
    """Map ``m`` runs exactly one iteration whatever the sizes: its input's length is the
    constant 1 (``map(f)`` over a reduction's ``[T]1`` result). Its loop distributes
    nothing: given a parallel code it runs on the work-items whose id is 0 in that code's
    ids (a guard), and it adds nothing to the kernel's sizes (a mapLcl(d) of one iteration
    gives local size 1 in d, a mapWrg(d) one work-group)."""
    cache = t.__dict__.setdefault("_unit_maps", {})
    if m not in cache:
        types = t.info.map_types.get(id(t.maps[m].node))
        size = getattr(types[0], "size", None) if types else None
        cache[m] = bool(size is not None and getattr(size, "is_const", False)
                        and size.as_int() == 1)
    return cache[m]


def _units_in_kernel(t: MapNestingTree, m: str) -> bool:
    """Some map of ``m``'s kernel runs one iteration (else the predicates below take their
    simpler form: every map of a code then sizes its dimension)."""
    return any(unit(t, x) for x in t.kernel_members(m))


def _multi(t: MapNestingTree, maps) -> list[str]:
    return [m for m in maps if not unit(t, m)]


def _varies(t: MapNestingTree, m: str, code: int) -> Pred:
    """Some map of ``m``'s kernel with more than one iteration has ``code``: for mapLcl(d)
    the kernel's local size in d is above 1, for mapWrg(d) it has several work-groups in d,
    for mapGlb(d) (with no mapLcl(d)/mapWrg(d) in the kernel) several work-items in d."""
    return _any_is(_multi(t, t.kernel_members(m)), code)


def _group_dim(t: MapNestingTree, m: str, d: int) -> Pred:
    """The kernel of ``m`` has a mapLcl(d) or mapWrg(d) (of any trip count): dimension d
    is sized by them, and its mapGlb(d) loops run over groups x local size work-items."""
    return Or(_has(t, m, 10 + d), _has(t, m, 20 + d))


def crosses_groups(t: MapNestingTree, x: str, kinds=(2, 3)) -> Pred:
    """Map ``x`` does not run in every work-group: it distributes its iterations over (or,
    of one iteration, confines them to) the work-groups of a dimension that has several.
    A mapWrg(d) does when the kernel has several work-groups in d (a mapWrg(d) of more than
    one iteration); a mapGlb(d) too, and also without mapLcl(d)/mapWrg(d) when the kernel
    has several mapGlb(d) work-items (the groups are then the runtime's, or of one
    work-item where local memory is used). ``kinds`` restricts to mapWrg (2) or mapGlb
    (3)."""
    if not _units_in_kernel(t, x):
        simple = [eq(level(x), 2)] if 2 in kinds else []
        if 3 in kinds:
            simple += [And(eq(c(x), 30 + d), Or(_has(t, x, 20 + d), Not(_has(t, x, 10 + d))))
                       for d in range(3)]
        return Or(*simple)
    parts = []
    for d in range(3):
        groups = _varies(t, x, 20 + d)
        if 2 in kinds:
            parts.append(And(eq(c(x), 20 + d), groups))
        if 3 in kinds:
            glb_only = And(Not(_group_dim(t, x, d)), _varies(t, x, 30 + d))
            parts.append(And(eq(c(x), 30 + d), Or(groups, glb_only)))
    return Or(*parts)


def _pair(x: str, y: str, a: int, b: int) -> Pred:
    return Or(And(eq(c(x), a), eq(c(y), b)), And(eq(c(x), b), eq(c(y), a)))


def same_owner(t: MapNestingTree, x: str, y: str) -> Pred:
    """Maps ``x`` and ``y`` of one kernel give iteration i to the same work-item: the same
    code, or mapWrg(d)/mapGlb(d) with local size 1 in d (no mapLcl(d) of several
    iterations in the kernel), or mapLcl(d)/mapGlb(d) with one work-group in d (no
    mapWrg(d) of several iterations) (see above)."""
    parts = [eq(c(x), c(y))]
    for d in range(3):
        parts.append(And(_pair(x, y, 20 + d, 30 + d), Not(_varies(t, x, 10 + d))))
        parts.append(And(_pair(x, y, 10 + d, 30 + d), Not(_varies(t, x, 20 + d))))
    return Or(*parts)


def runs_whole(t: MapNestingTree, x: str) -> Pred:
    """Every work-item running the enclosing iteration runs all of map ``x``'s iterations:
    it is sequential or fused; or of one iteration, with a parallel code whose ids have a
    single value in the kernel (a mapLcl(d) without a mapLcl(d) of several iterations, a
    mapWrg(d) without such a mapWrg(d), a mapGlb(d) without either or, in a kernel with no
    mapLcl(d)/mapWrg(d), without such a mapGlb(d)); or a mapGlb(d) in a kernel whose
    dimension d has one work-item (mapLcl(d)/mapWrg(d) only of one iteration)."""
    parts = [level(x) < 1]
    if not _units_in_kernel(t, x):
        return parts[0]
    one = unit(t, x)
    for d in range(3):
        lcl, wrg = _varies(t, x, 10 + d), _varies(t, x, 20 + d)
        single = And(_group_dim(t, x, d), Not(lcl), Not(wrg))
        if one:
            parts.append(And(eq(c(x), 10 + d), Not(lcl)))
            parts.append(And(eq(c(x), 20 + d), Not(wrg)))
            parts.append(And(eq(c(x), 30 + d),
                             Or(single, And(Not(_group_dim(t, x, d)),
                                            Not(_varies(t, x, 30 + d))))))
        else:
            parts.append(And(eq(c(x), 30 + d), single))
    return Or(*parts)


def _fused_at(t: MapNestingTree, m: str, depth: int) -> Pred:
    """``m`` with exactly its first ``depth`` perfectly nested maps fused into it."""
    chain = t.perfect_chain(m)
    parts = [eq(c(x), 1) for x in chain[:depth]]
    if depth < len(chain):
        parts.append(ne(c(chain[depth]), 1))
    return And(*parts) if parts else TRUE


def reads_own(t: MapNestingTree, prod: str, cons: str) -> Pred:
    """Each work-item of ``cons`` reads only elements it wrote itself as a work-item of
    ``prod`` (at the level of the two maps, fused maps included): ``cons`` reads ``prod``'s
    output element for element at the fusion depths chosen and both give iteration i to
    the same work-item."""
    pairs = t.maps[cons].identity_from.get(prod, ())
    if not pairs:
        return FALSE
    fused = Or(*(And(_fused_at(t, cons, f), _fused_at(t, prod, g)) for f, g in pairs))
    return And(fused, same_owner(t, prod, cons))


# ------------------------------------------------------------ flat nests
# A producer nest B (sequential) around C (mapWrg(0), T iterations) writes element b*T + c
# of B's flattened output from work-group c; a mapGlb(0) consumer reading that output
# flattened, in a kernel with T work-groups of one work-item (C the only mapWrg(0) of
# several iterations, no such mapLcl(0)), reads element i on global id i mod T = c: its
# own. Likewise B sequential around C mapLcl(0) (local size T, one work-group) and B
# mapWrg(0) around C mapLcl(0) (local size T: global id b*T + c). The tree records how
# perfectly nested maps are read element for element (``identity_from``); the layout
# below also follows a map's output to the map its function returns through join/split
# only (``join o mapC o split(s)``), and keeps the views siblings read each other through.


_ELEMENT = "element of "  # the pseudo-producer of a map's element, in ``_Layout.input``


class _Layout(_Spaces):
    """``mapper.nesting``'s space inference run once more to record what the tree keeps
    no trace of: ``read[(prod, cons)]``, the join/split steps through which ``cons`` reads
    sibling ``prod``'s output; ``input[m]``, the producers and view steps (join, split or
    transpose; None: anything else) of the value map ``m`` maps over; and ``out[m]``, the
    same of the value ``m``'s function returns."""

    def __init__(self, tree: MapNestingTree):
        super().__init__(tree)
        self.read: dict[tuple[str, str], tuple] = {}
        self.input: dict[str, tuple[frozenset[str], tuple | None]] = {}
        self.out: dict[str, tuple[frozenset[str], tuple | None]] = {}
        self._maps: list[nodes.Map] = []
        self._last: dict[int, tuple] = {}  # id(expression) -> the value it last had

    def identity_pairs(self, prod, cons, view):
        self.read[(prod, cons)] = tuple(view)
        if any(op[0] == "transpose" for op in view):
            return ()
        return super().identity_pairs(prod, cons, view)

    def expr(self, e, dest, env, into=False):
        v = super().expr(e, dest, env, into)
        self._last[id(e)] = v
        return v

    def call(self, f, args, dest, env, into=False):
        if isinstance(f, nodes.Map) and computes(f.f):
            self._maps.append(f)
            try:
                out = super().call(f, args, dest, env, into)
            finally:
                self._maps.pop()
            v = self._last.get(id(args[0])) if args else None
            if v is not None:
                self.input.setdefault(self.t.label_of(f), (frozenset(v[1]), v[2]))
            return out
        out = super().call(f, args, dest, env, into)
        if isinstance(f, nodes.Transpose) and args:
            v = self._last.get(id(args[0]))
            if v is not None and v[2] is not None:
                return out[0], out[1], (*v[2], ("transpose",))
        return out

    def fun(self, f, vals, dest, env, into=False):
        mine = bool(self._maps) and f is self._maps[-1].f
        if mine and len(vals) == 1 and not vals[0][1] and vals[0][2] is None:
            # the map's element: a producer of its own, so the maps inside that map over
            # it record the view they read it through
            label = self.t.label_of(self._maps[-1])
            vals = [(vals[0][0], frozenset({_ELEMENT + label}), ())]
        out = super().fun(f, vals, dest, env, into)
        if mine:
            label = self.t.label_of(self._maps[-1])
            self.out.setdefault(label, (frozenset(out[1]), out[2]))
        return out

    def consumed(self, vals):
        super().consumed([(v[0], frozenset(p for p in v[1] if p in self.t.maps), v[2])
                          for v in vals])


def _join_split(view) -> bool:
    return view is not None and all(op[0] in ("join", "split") for op in view)


def _layout(t: MapNestingTree) -> _Layout:
    cached = t.__dict__.get("_layout")
    if cached is None:
        fresh = MapNestingTree(t.program, t.info)
        cached = t.__dict__["_layout"] = _Layout(fresh)
        cached.run()
    return cached


def _trip(t: MapNestingTree, m: str):
    types = t.info.map_types.get(id(t.maps[m].node))
    return getattr(types[0], "size", None) if types else None


def _chain(m: str, step) -> list[str]:
    """``m``, then ``step(last)`` while it names a map not in the chain yet."""
    out = [m]
    while (q := step(out[-1])) is not None and q not in out:
        out.append(q)
    return out


def flat_chain(t: MapNestingTree, m: str) -> list[str]:
    """``m``, then the map whose output ``m``'s function returns through join/split only
    (a perfectly nested map, or ``join o mapC o split(s)``), then that map's, ...: their
    iterations write ``m``'s output in row-major order."""
    lay = _layout(t)

    def producer(last: str) -> str | None:
        prods, view = lay.out.get(last, (frozenset(), None))
        if not _join_split(view) or len(prods) != 1:
            return None
        (q,) = prods
        return q if q in t.maps[last].children else None

    return _chain(m, producer)


def read_chain(t: MapNestingTree, m: str) -> list[str]:
    """``m``, then the map inside it that maps over ``m``'s element through join/split only
    (a perfectly nested map, or ``join o mapB o split(s)``), then that map's, ...: their
    iterations read ``m``'s input in row-major order."""
    lay = _layout(t)

    def reader(last: str) -> str | None:
        kids = [k for k in t.maps[last].children
                if lay.input.get(k, (frozenset(), None))[0] == {_ELEMENT + last}
                and _join_split(lay.input[k][1])]
        return kids[0] if len(kids) == 1 else None

    return _chain(m, reader)


def _flat_pairs(t: MapNestingTree, prod: str, cons: str) -> list[tuple[int, int]]:
    """(f, g): ``cons``'s read chain (:func:`read_chain`) down to depth f reads, at flat
    iteration i, what ``prod``'s flat chain (:func:`flat_chain`) down to depth g writes at
    flat iteration i (both iterate over the same number of elements, through join/split).
    ``cons`` is a sibling of ``prod`` or a map inside one that maps over ``prod``'s
    output."""
    lay = _layout(t)
    view = lay.read.get((prod, cons))
    if view is None:
        prods, view = lay.input.get(cons, (frozenset(), None))
        if prods != {prod}:
            return []
    if view is None or not _join_split(view):
        return []
    pchain, cchain = flat_chain(t, prod), read_chain(t, cons)
    ptrips = [_trip(t, m) for m in pchain]
    ctrips = [_trip(t, m) for m in cchain]
    out = []
    for f in range(len(cchain)):
        if any(x is None for x in ctrips[:f + 1]):
            break
        a = functools.reduce(operator.mul, ctrips[:f + 1])
        for g in range(len(pchain)):
            if any(x is None for x in ptrips[:g + 1]):
                break
            # structural equality of two ir.sym expressions (a bool, never an error);
            # sizes equal only for some values compare unequal: no pair, the safe side
            if a == functools.reduce(operator.mul, ptrips[:g + 1]):
                out.append((f, g))
    return out


def _fused_chain(chain: list[str], depth: int) -> Pred:
    """``chain[1..depth]`` fused into ``chain[0]`` and ``chain[depth + 1]`` not (only a
    perfectly nested map can be)."""
    parts = [eq(c(x), 1) for x in chain[1:depth + 1]]
    if depth + 1 < len(chain):
        parts.append(ne(c(chain[depth + 1]), 1))
    return And(*parts)


def _only(t: MapNestingTree, m: str, code: int) -> Pred:
    """No map of ``m``'s kernel but ``m`` has ``code`` and several iterations: ``m``'s trip
    count alone sizes the kernel in that code's dimension."""
    return _none_is([x for x in _multi(t, t.kernel_members(m)) if x != m], code)


def _as_global(t: MapNestingTree, chain: list[str], depth: int, d: int,
               outer_ok: Callable[[str], Pred]) -> Pred:
    """``chain[0..depth]`` (each map iterating its parent's element in row-major order)
    give flat iteration i to the work-item a mapGlb(d) over the flat range gives it to, in
    a kernel with a mapLcl(d) or mapWrg(d): the innermost distributed loop (the maps after
    it fused into it) is a mapWrg(d) sizing the work-groups in d with local size 1, or a
    mapLcl(d) sizing the local size with one work-group, or a mapLcl(d) sizing the local
    size right inside a mapWrg(d) (sizing the work-groups too, if anything is outside);
    the maps outside are ``outer_ok``."""
    lcl, wrg = 10 + d, 20 + d
    nxt = [ne(c(chain[depth + 1]), 1)] if depth + 1 < len(chain) else []
    parts = []
    for j in range(depth + 1):
        m = chain[j]
        tail = [eq(c(x), 1) for x in chain[j + 1:depth + 1]] + nxt
        outer = [outer_ok(x) for x in chain[:j]]
        parts.append(And(eq(c(m), wrg), _only(t, m, wrg), Not(_varies(t, m, lcl)),
                         *outer, *tail))
        parts.append(And(eq(c(m), lcl), _only(t, m, lcl), Not(_varies(t, m, wrg)),
                         *outer, *tail))
        if j >= 1:
            w = chain[j - 1]
            sized = [_only(t, w, wrg)] if j >= 2 else []
            parts.append(And(eq(c(w), wrg), eq(c(m), lcl), _only(t, m, lcl), *sized,
                             *outer[:-1], *tail))
    return Or(*parts)


def _reader_outer(t: MapNestingTree, writers: list[str], d: int) -> Callable[[str], Pred]:
    """An outer map of a reading chain: it runs whole, or distributes in a dimension other
    than d that no writer uses (each work-item there wrote the elements itself)."""
    def ok(x: str) -> Pred:
        parts = [runs_whole(t, x)]
        for e in (k for k in range(3) if k != d):
            codes = (10 + e, 20 + e, 30 + e)
            parts.append(And(Or(*(eq(c(x), k) for k in codes)),
                             *(_none_is(writers, k) for k in codes)))
        return Or(*parts)
    return ok


def reads_own_flat(t: MapNestingTree, prod: str, cons: str,
                   within: Callable[[str], Pred], exact: bool = False) -> Pred:
    """Each work-item of ``cons`` reads what it wrote as a work-item of ``prod`` where one of
    the two is a chain of maps that distributes its flat iterations as a mapGlb(d) over
    them (:func:`_as_global`) and the other is that mapGlb(d) (its perfectly nested maps
    fused as far as the flat iterations go). The maps of ``prod``'s nest below are
    ``within`` (their work-group, or whole for private memory); with ``exact`` (private
    memory) the maps inside ``cons`` below the flat iterations run whole too."""
    parts = []
    pchain, cchain = flat_chain(t, prod), read_chain(t, cons)
    writers = [prod, *t.nested(prod)]
    for f, g in _flat_pairs(t, prod, cons):
        below = [within(x) for x in t.nested(prod) if x not in pchain[1:g + 1]]
        if exact:
            below += [runs_whole(t, x) for x in t.nested(cons) if x not in cchain[1:f + 1]]
        for d in range(3):
            if g >= 1:
                parts.append(And(_as_global(t, pchain, g, d, lambda x: runs_whole(t, x)),
                                 _fused_chain(cchain, f), eq(c(cons), 30 + d), *below))
            if f >= 1:
                parts.append(And(_as_global(t, cchain, f, d, _reader_outer(t, writers, d)),
                                 _fused_chain(pchain, g), eq(c(prod), 30 + d), *below))
    return Or(*parts)


def _within_groups(t: MapNestingTree, kinds) -> Callable[[str], Pred]:
    return lambda x: Not(crosses_groups(t, x, kinds))


def reads_own_transposed(t: MapNestingTree, prod: str, cons: str,
                         within: Callable[[str], Pred], exact: bool = False) -> Pred:
    """``cons`` (iterating n2, its perfectly nested map S n1) reads ``prod``'s output
    ``[[T]n2]n1`` (``prod`` n1, its perfectly nested map Q n2) transposed: S's iteration i
    and ``cons``'s j read what ``prod``'s i and Q's j wrote. Neither inner map fused, S and
    ``prod``, ``cons`` and Q give their iterations to the same work-items (or the writer
    runs whole and the reader distributes in a dimension no writer uses: :func:`_owns`),
    and the maps below Q are ``within`` (with ``exact``, those below S run whole)."""
    if _layout(t).read.get((prod, cons)) != (("transpose",),):
        return FALSE
    pq, rs = t.perfect_chain(prod), t.perfect_chain(cons)
    if not pq or not rs:
        return FALSE
    q, s = pq[0], rs[0]
    below = [within(x) for x in t.nested(prod) if x != q]
    if exact:
        below += [runs_whole(t, x) for x in t.nested(cons) if x != s]
    writers = [prod, *t.nested(prod)]
    return And(ne(c(q), 1), ne(c(s), 1), _fused_at(t, q, 0), _fused_at(t, s, 0),
               _owns(t, prod, s, writers), _owns(t, q, cons, writers), *below)


def _owns(t: MapNestingTree, w: str, r: str, writers: list[str]) -> Pred:
    """The work-item running reader ``r``'s iteration i wrote writer ``w``'s iteration i
    (the same index of the exchanged array): both give i to the same work-item, or ``w``
    runs whole (every work-item running it writes all its iterations) and ``r``
    distributes its iterations in a dimension no writer uses (so each work-item there
    runs the writers' iterations itself)."""
    free = []
    for e in range(3):
        codes = (10 + e, 20 + e, 30 + e)
        free.append(And(Or(*(eq(c(r), k) for k in codes)),
                        *(_none_is(writers, k) for k in codes)))
    return Or(same_owner(t, w, r), And(runs_whole(t, w), Or(*free)))


def reads_own_nested(t: MapNestingTree, prod: str, cons: str,
                     within: Callable[[str], Pred], exact: bool = False) -> Pred:
    """A map D inside ``cons`` maps over ``prod``'s output (through join/split) element for
    element, giving its iterations to the work-items ``prod`` gave them to; the maps from
    ``cons`` down to D's parent (they repeat D's reads) and the maps inside ``prod`` are
    ``within`` their work-group (with ``exact``, for private memory: all run whole, and
    so do the maps inside ``cons`` below D's flat iterations)."""
    parts = []
    pchain = flat_chain(t, prod)
    for d in t.nested(cons):
        pairs = _flat_pairs(t, prod, d)
        if not pairs:
            continue
        dchain = read_chain(t, d)
        path = [x for x in [cons, *t.nested(cons)] if x in t.outer(d)]
        for f, g in pairs:
            below = [within(x) for x in t.nested(prod) if x not in pchain[1:g + 1]]
            below += [(runs_whole(t, x) if exact else within(x)) for x in path]
            if exact:
                below += [runs_whole(t, x) for x in t.nested(d) if x not in dchain[1:f + 1]]
            parts.append(And(_fused_chain(dchain, f), _fused_chain(pchain, g),
                             same_owner(t, prod, d), *below))
    return Or(*parts)


def _levels(t: MapNestingTree, m: str) -> list[str]:
    """The maps that iterate ``m``'s data level by level, ``m`` first: the chain of an
    in-place reduction update (``MapInfo.acc_chain``), else ``m`` and the maps perfectly
    nested in it (each maps over its parent's element)."""
    return list(t.maps[m].acc_chain) or [m, *t.perfect_chain(m)]


def reads_own_levels(t: MapNestingTree, prod: str, cons: str) -> Pred:
    """``cons`` reads ``prod``'s output element for element (``identity_from`` (0, 0)), and
    both go on doing so level by level (:func:`_levels`: perfectly nested maps, or the
    chain of a reduction's in-place update): for some depth k >= 2, at every level j < k
    the two maps give their iterations to the same work-item or the producer's runs whole
    there, none of them is fused, and every other map inside ``prod`` runs whole. Then
    each work-item reads, down to level k, exactly the elements it wrote (k = 1 is
    :func:`reads_own` with the maps inside ``prod`` run whole). Read by the reduction's
    update, this is its initial value; read from it, the reduction's result."""
    if (0, 0) not in t.maps[cons].identity_from.get(prod, ()):
        return FALSE
    pl, cl = _levels(t, prod), _levels(t, cons)
    parts = []
    for k in range(2, min(len(pl), len(cl)) + 1):
        parts.append(And(*(_fused_at(t, x, 0) for x in pl[:k] + cl[:k]),
                         *(Or(same_owner(t, a, b), runs_whole(t, a))
                           for a, b in zip(pl[:k], cl[:k])),
                         *(runs_whole(t, x) for x in t.nested(prod) if x not in pl[:k])))
    return Or(*parts)


def private_memory(t: MapNestingTree) -> Iterator[Constraint]:
    """(1) Private memory is read only by the work-item that wrote it.

    A map writing private memory read by a sibling map: either each work-item reads only
    what it wrote (element for element, the same index function, every map inside both
    sequential or fused), or the writer runs whole in every work-item (it and the maps
    inside it are sequential or fused). Read by other code, the writer runs whole in every
    work-item; a map whose output is its parent's (through join/split) is judged with its
    parent. A map whose function merely *contains* a private value (a reduction's
    accumulator, a ``toPrivate`` temporary) allocates one per iteration, so it may
    distribute threads around it (the tree records where each map writes the way the
    lowering does: a reduction is no annotation). A map that rewrites a reduction's
    accumulator in place (``MapInfo.acc_chain``) writes what the reduction's readers read:
    they may split it as it does, level by level (:func:`reads_own_levels`)."""
    for prod in t.concrete():
        if t.maps[prod].writes != "private":
            continue
        parent = t.maps[prod].parent
        cons_of = [m for m in t.siblings(prod) if prod in t.maps[m].depends_on]
        if (not cons_of and parent is not None and t.maps[parent].writes == "private"
                and flat_chain(t, parent)[1:2] == [prod]):
            continue  # its output is its parent's: the parent's instances say how it runs
        whole = _whole(t, prod)
        if t.maps[prod].read_by_code or not cons_of:
            yield _instance(RuleName.PRIVATE_MEMORY, whole,
                            f"map {prod} writes private memory that other code reads, so it "
                            "and the maps inside it must be sequential or fused",
                            (prod, *t.nested(prod)))
            continue
        for cons in cons_of:
            inner = t.nested(prod)
            own = Or(And(reads_own(t, prod, cons), *(runs_whole(t, x) for x in inner)),
                     reads_own_levels(t, prod, cons),
                     *(form(t, prod, cons, lambda x: runs_whole(t, x), True)
                       for form in (reads_own_flat, reads_own_transposed, reads_own_nested)))
            yield _instance(
                RuleName.PRIVATE_MEMORY, Or(own, whole),
                f"map {cons} reads the private memory map {prod} writes: each work-item reads "
                f"only what it wrote, or map {prod} runs whole (sequential) in every work-item",
                tuple(dict.fromkeys([prod, cons, *inner])))


def _exchanges(t: MapNestingTree, space: str):
    """(producer, consumer) sibling maps of one kernel exchanging data through ``space``."""
    for cons in t.concrete():
        for prod in sorted(t.maps[cons].depends_on):
            if t.maps[prod].writes == space and not t.kernel_boundary(prod, cons):
                yield prod, cons


def _exchange(t: MapNestingTree, prod: str, cons: str, kinds) -> Pred:
    """The work-item reading an element shares a work-group with one that wrote it: each
    work-item of ``cons`` reads what it wrote as a work-item of ``prod`` (element for
    element, the maps inside ``prod`` within its work-group), or no map of ``prod``'s
    nest gives iterations to different work-groups (of ``kinds``): then every work-group
    writes all of ``prod``'s output and a work-group barrier orders it before the reads,
    wherever ``cons``'s nest distributes its work. (Where that makes several work-groups
    write the same global elements, rule 7 rejects the race.)"""
    inner = [Not(crosses_groups(t, x, kinds)) for x in t.nested(prod)]
    own = And(reads_own(t, prod, cons), *inner)
    group = And(Not(crosses_groups(t, prod, kinds)), *inner)
    within = _within_groups(t, kinds)
    return Or(own, *(form(t, prod, cons, within)
                     for form in (reads_own_flat, reads_own_transposed, reads_own_nested)),
              group)


def _whole(t: MapNestingTree, prod: str) -> Pred:
    """``prod`` and the maps inside it run whole (:func:`runs_whole`: sequential, fused, or
    parallel in ids that have one value): every work-item running the enclosing iteration
    writes all of ``prod``'s output."""
    return And(*(runs_whole(t, x) for x in [prod, *t.nested(prod)]))


def _subjects(t: MapNestingTree, prod: str, cons: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys([prod, cons, *t.nested(prod)]))


def local_memory(t: MapNestingTree) -> Iterator[Constraint]:
    """(2) Local memory is shared within a work-group only: a map reading what a sibling
    wrote to local memory reads only what it wrote itself, or both nests run within one
    work-group (no mapWrg, no mapGlb over several work-groups among their maps)."""
    for prod, cons in _exchanges(t, "local"):
        yield _instance(
            RuleName.LOCAL_MEMORY, _exchange(t, prod, cons, (2, 3)),
            f"map {cons} reads the local memory map {prod} writes: each work-item reads only "
            "what it wrote, or both run within one work-group", _subjects(t, prod, cons))


def local_in_groups(t: MapNestingTree) -> Iterator[Constraint]:
    """(2) as CC'22 states it: a map using local memory is not mapWrg/mapGlb and sits under
    a mapWrg of every work-group dimension its chain uses. Local memory written under a
    mapGlb (work-groups of one work-item) or read element for element by the same
    work-item is correct, but wastes local memory: a heuristic."""
    for m in t.concrete():
        if not t.maps[m].uses_local:
            continue
        outer = t.outer(m)
        for chain in t.chains():
            if m not in chain:
                continue
            parts = [level(m) < 2]
            for w in range(3):
                parts.append(Or(_none_is(chain, 20 + w), _any_is(outer, 20 + w)))
            yield _instance(
                RuleName.LOCAL_IN_GROUPS, And(*parts),
                f"map {m} uses local memory: it must not be mapWrg/mapGlb and must sit under a "
                f"mapWrg of each work-group dimension used in chain {_chain_text(chain)}",
                tuple(chain),
            )


def duplicate_scheduling(t: MapNestingTree) -> Iterator[Constraint]:
    """(3) Nested maps are not parallelised in the same domain and dimension."""
    for m in t.concrete():
        for inner in t.nested(m):
            yield _instance(
                RuleName.DUPLICATE_SCHEDULING, Or(level(m) < 1, ne(c(m), c(inner))),
                f"maps {m} and {inner} (nested in {m}) are not parallel in the same domain "
                "and dimension", (m, inner))


def local_dimensionality(t: MapNestingTree) -> Iterator[Constraint]:
    """(4)-(5) In a chain, mapLcl(d) is used exactly when mapWrg(d) is."""
    for chain in t.chains():
        for d in range(3):
            yield _instance(
                RuleName.LOCAL_DIMENSIONALITY, Or(_none_is(chain, 10 + d), _any_is(chain, 20 + d)),
                f"chain {_chain_text(chain)}: mapLcl({d}) needs a mapWrg({d}) in the chain",
                tuple(chain))
            yield _instance(
                RuleName.LOCAL_DIMENSIONALITY, Or(_none_is(chain, 20 + d), _any_is(chain, 10 + d)),
                f"chain {_chain_text(chain)}: mapWrg({d}) needs a mapLcl({d}) in the chain",
                tuple(chain))


def local_hierarchy(t: MapNestingTree) -> Iterator[Constraint]:
    """(6) No mapWrg(d) inside mapLcl(d)."""
    for m in t.concrete():
        for inner in t.nested(m):
            yield _instance(
                RuleName.LOCAL_HIERARCHY,
                Not(And(eq(level(m), 1), eq(level(inner), 2), eq(dim(inner), dim(m)))),
                f"map {inner} must not be mapWrg(d) inside map {m} as mapLcl(d)", (m, inner))


def local_in_group(t: MapNestingTree) -> Iterator[Constraint]:
    """(6) Every mapLcl(d) is nested in a mapWrg(d) (without one, the kernel is a single
    work-group: correct, but it uses one compute unit)."""
    for m in t.concrete():
        outer = t.outer(m)
        for d in range(3):
            yield _instance(
                RuleName.LOCAL_IN_GROUP, Or(ne(c(m), 10 + d), _any_is(outer, 20 + d)),
                f"map {m} as mapLcl({d}) must be nested in a mapWrg({d})", (m, *outer))


def exhaustive_indexing(t: MapNestingTree) -> Iterator[Constraint]:
    """(7) Every work-item id that varies in a kernel is told apart by the elements each
    chain writes: otherwise the work-items differing only in that id write the same
    elements (a data race). Per dimension d, the ids are the group and local ids (a kernel
    with mapWrg(d)/mapLcl(d); mapGlb(d) covers both) or the global id (mapGlb(d) only).
    So in chain b: a mapLcl(d) elsewhere in the kernel needs mapLcl(d) or mapGlb(d), a
    mapWrg(d) needs mapWrg(d) or mapGlb(d), a mapGlb(d) in a kernel without
    mapLcl(d)/mapWrg(d) needs mapGlb(d). A map of one iteration (:func:`unit`) makes no id
    vary, and in chain b it pins the ids of its code to 0 as well as any map does. Local
    memory is per work-group (group ids do not race; nor global ids, whose groups then
    have one work-item); private memory per work-item. Chains in different kernels
    (top-level maps separated by a kernel boundary) are independent."""
    chains = t.chains()
    kernel = t.kernels()
    # the predicates below repeat across the pairs of chains (every chain a against the
    # same b, the same only_a against every b): built once each (a kernel of 100 sibling
    # maps has 10,000 pairs)
    any_is = functools.lru_cache(maxsize=None)(lambda maps, code: _any_is(maps, code))
    none_is = functools.lru_cache(maxsize=None)(lambda maps, code: _none_is(maps, code))
    for b in chains:
        space = t.maps[b[-1]].writes
        if space == "private":
            continue
        tb = tuple(b)
        # a local buffer is replicated over the mapLcl loops around its writer only: a
        # mapGlb around it does not tell its work-items' elements apart
        w = _local_writer(t, b)
        units = None
        for a in chains:
            if a == b or kernel[a[0]] != kernel[b[0]]:
                continue
            # a map of one iteration makes no id vary (other maps of its code do)
            only_a = tuple(_multi(t, [m for m in a if m not in b]))
            if not only_a:
                continue
            if units is None:
                units = _units_in_kernel(t, b[0])
            for d in range(3):
                lcl, wrg, glb = 10 + d, 20 + d, 30 + d
                parts = [Or(none_is(only_a, lcl), any_is(tb[w:], lcl), any_is(tb[w:], glb),
                            any_is(tb[:w], lcl))]
                if space != "local":
                    parts.append(Or(none_is(only_a, wrg), any_is(tb, wrg), any_is(tb, glb)))
                    # a mapGlb(d) varies no id of its own in a kernel with mapLcl(d)/mapWrg(d)
                    # (they size dimension d, and are asked for above in their own chains);
                    # without maps of one iteration, b's own are the ones that matter
                    grp = (_group_dim(t, b[0], d) if units
                           else Or(any_is(tb, wrg), any_is(tb, lcl)))
                    parts.append(Or(none_is(only_a, glb), any_is(tb, glb), grp))
                yield _instance(
                    RuleName.EXHAUSTIVE_INDEXING, And(*parts),
                    f"dimension {d} distributed in chain {_chain_text(a)} is also distributed "
                    f"in chain {_chain_text(b)} (mapLcl({d}) by mapLcl/mapGlb, mapWrg({d}) by "
                    f"mapWrg/mapGlb, mapGlb({d}) by any)",
                    tuple(dict.fromkeys(only_a + tb)))


def _local_writer(t: MapNestingTree, chain) -> int:
    """Where in ``chain`` the local buffer its innermost map writes is allocated: the
    innermost map of the chain whose output is a buffer of its own (read by a sibling or
    by other code), else the outermost map writing local memory."""
    producers = {p for m in t.maps.values() for p in m.depends_on}
    own = [i for i, m in enumerate(chain) if t.maps[m].writes == "local"
           and (m in producers or t.maps[m].read_by_code)]
    if own:
        return own[-1]
    return next((i for i, m in enumerate(chain) if t.maps[m].writes == "local"), 0)


def shared_dimension(t: MapNestingTree) -> Iterator[Constraint]:
    """Added (the lowering's parallel-nesting check, generalising (3) and (6)): nested
    parallel maps use different dimensions, except mapLcl(d) inside mapWrg(d)."""
    for m in t.concrete():
        for inner in t.nested(m):
            yield _instance(
                RuleName.SHARED_DIMENSION,
                Or(level(m) < 1, level(inner) < 1, ne(dim(m), dim(inner)),
                   And(eq(level(m), 2), eq(level(inner), 1))),
                f"maps {m} and {inner} (nested in {m}) are parallel in different dimensions, "
                f"unless {m} is mapWrg(d) and {inner} mapLcl(d)", (m, inner))


def sequential_fusion(t: MapNestingTree) -> Iterator[Constraint]:
    """(8) Perfectly nested maps are not both sequential: fuse or parallelise them."""
    for m in t.concrete():
        for inner in t.maps[m].children:
            if t.perfectly_nested_in(inner, m):
                yield _instance(
                    RuleName.SEQUENTIAL_FUSION, Not(And(eq(c(m), 0), eq(c(inner), 0))),
                    f"map {inner} is perfectly nested in map {m}: they are not both "
                    "sequential (fuse them instead)", (m, inner))


def no_global_with_groups(t: MapNestingTree) -> Iterator[Constraint]:
    """A kernel uses either mapGlb or mapWrg/mapLcl, never both (kernels separated by a
    kernel boundary are independent)."""
    maps = t.concrete()
    # each map's two tests, built once (a kernel of n maps has n(n-1)/2 pairs)
    glb = {m: eq(level(m), 3) for m in maps}
    grp = {m: (level(m) >= 1, level(m) <= 2) for m in maps}
    for a, b in combinations(maps, 2):
        if not t.same_kernel(a, b):
            continue
        yield _instance(
            RuleName.GLOBAL_XOR_GROUPS,
            And(Not(And(glb[a], *grp[b])), Not(And(glb[b], *grp[a]))),
            f"maps {a} and {b}: mapGlb is not mixed with mapWrg/mapLcl in one kernel", (a, b))


def cross_thread_dependency(t: MapNestingTree) -> Iterator[Constraint]:
    """Added: sibling maps of one kernel that exchange data through memory are
    synchronisable only by a work-group barrier: each work-item reads only what it wrote
    (element for element with the same index function), or no map of the two nests
    distributes iterations over several work-groups (through global memory), or over
    several mapGlb work-groups (through local memory, whose work-group scope is rule 2's).

    Counter-example that rules (1)-(8) accept: CC'22 Listing 3 with A=mapGlb(1),
    B=mapGlb(0), C=mapGlb(0), D=mapSeq: thread t of B reads element t that thread t/s1
    of C wrote, with no barrier possible across global threads (CC'22 Table 1, M2).
    Top-level maps exchanging data through global memory are exempt: the lowering puts
    them in consecutive kernels, and the kernel boundary is the global barrier.
    """
    for prod, cons in _exchanges(t, "global"):
        yield _instance(
            RuleName.CROSS_THREAD_DEPENDENCY, _exchange(t, prod, cons, (2, 3)),
            f"map {cons} reads what map {prod} wrote: each work-item reads only what it "
            "wrote, or both run within one work-group (no barrier exists across "
            "work-groups)", _subjects(t, prod, cons))
    for prod, cons in _exchanges(t, "local"):
        yield _instance(
            RuleName.CROSS_THREAD_DEPENDENCY, _exchange(t, prod, cons, (3,)),
            f"map {cons} reads the local memory map {prod} writes: each work-item reads only "
            "what it wrote, or no mapGlb of the two nests spans several work-groups (no "
            "barrier exists across them)", _subjects(t, prod, cons))


def vector_innermost(t: MapNestingTree) -> Iterator[Constraint]:
    """(V) A map in vector lanes (code V) has only sequential maps inside: its lanes run
    one work-item's iterations together, so nothing inside may distribute work, fuse into
    it or run in lanes again (CC'22 Table 1; LIFT vectorises innermost 1-D maps)."""
    for m in t.concrete():
        inner = t.nested(m)
        if inner:
            yield _instance(
                RuleName.VECTOR_INNERMOST,
                Or(ne(c(m), VEC), And(*(eq(c(x), SEQ) for x in inner))),
                f"map {m} in vector lanes (V) has only sequential maps inside "
                f"({', '.join(inner)})", (m, *inner))


def vector_lanes(t: MapNestingTree) -> Iterator[Constraint]:
    """(V) A map runs in vector lanes only where its body computes scalars and some access
    of it is contiguous across iterations (``mapper.lanes_probe``: CC'22 Section 4's check
    of the index differences across the lanes)."""
    lanes_ok(t, t.labels[0])  # judges every map once, cached on the tree
    verdicts = t.__dict__["_lane_verdicts"]
    for m in t.concrete():
        v = verdicts.get(m)
        if v is not None and not v.ok:
            yield _instance(RuleName.VECTOR_LANES, ne(c(m), VEC),
                            f"map {m} cannot run in vector lanes (V): {v.why}", (m,))


RULES: tuple[Rule, ...] = (
    Rule(RuleName.PRIVATE_MEMORY, "Private memory scoping", "CC'22 rule (1)", private_memory),
    Rule(RuleName.LOCAL_MEMORY, "Shared memory scoping", "CC'22 rule (2)", local_memory),
    Rule(RuleName.LOCAL_IN_GROUPS, "Local memory only under work-group maps",
         "CC'22 rule (2) as stated", local_in_groups),
    Rule(RuleName.DUPLICATE_SCHEDULING, "Duplicate scheduling", "CC'22 rule (3)",
         duplicate_scheduling),
    Rule(RuleName.LOCAL_DIMENSIONALITY, "Local thread indexing dimensionality",
         "CC'22 rules (4)-(5)", local_dimensionality),
    Rule(RuleName.LOCAL_HIERARCHY, "Local thread indexing hierarchy", "CC'22 rule (6)",
         local_hierarchy),
    Rule(RuleName.LOCAL_IN_GROUP, "mapLcl under a mapWrg (no single-work-group kernels)",
         "CC'22 rule (6)", local_in_group),
    Rule(RuleName.EXHAUSTIVE_INDEXING, "Exhaustive thread indexing", "CC'22 rule (7)",
         exhaustive_indexing),
    Rule(RuleName.SHARED_DIMENSION, "One dimension per nest level", "added (lowering check)",
         shared_dimension),
    Rule(RuleName.SEQUENTIAL_FUSION, "Sequential map fusion heuristic", "CC'22 rule (8)",
         sequential_fusion),
    Rule(RuleName.GLOBAL_XOR_GROUPS, "No mapGlb with mapWrg/mapLcl",
         "added (one indexing style per kernel)",
         no_global_with_groups),
    Rule(RuleName.CROSS_THREAD_DEPENDENCY, "Producer/consumer across threads",
         "added (hole found by testing)", cross_thread_dependency),
    Rule(RuleName.VECTOR_INNERMOST, "Vector lanes hold only sequential maps",
         "CC'22 Table 1 level V", vector_innermost),
    Rule(RuleName.VECTOR_LANES, "Vector lanes need scalars and a contiguous access",
         "CC'22 Section 4 (consecutive accesses)", vector_lanes),
)
RULE_NAMES = tuple(r.name for r in RULES)
RULE_KIND = {r.name: r.kind for r in RULES}
VALIDITY_RULES = tuple(r.name for r in RULES if r.kind is RuleKind.VALIDITY)
HEURISTIC_RULES = tuple(r.name for r in RULES if r.kind is RuleKind.HEURISTIC)


def rule_kind(name: str) -> RuleKind:
    """``validity`` or ``heuristic`` for a rule name (``ConfigurationError``: no such
    rule)."""
    rule = RuleName.parse(name)
    if rule is None:
        raise ConfigurationError(f"no mapping rule is named {name!r}; the rules: "
                                 f"{', '.join(RuleName)}")
    return rule.kind


def generate(t: MapNestingTree, fusion: str = "always",
             heuristics: bool = True) -> list[Constraint]:
    """Every constraint instance for the tree, rule by rule: the validity rules, and the
    heuristic rules when ``heuristics`` (rule 8 only when fusion is 'always')."""
    if fusion not in FUSION_STRATEGIES:
        raise ConfigurationError(f"fusion must be one of {FUSION_STRATEGIES}, got {fusion!r}")
    out: list[Constraint] = []
    for r in RULES:
        if r.kind is RuleKind.HEURISTIC and not heuristics:
            continue
        if r.name == RuleName.SEQUENTIAL_FUSION and fusion != "always":
            continue
        out.extend(r.generate(t))
    return out
