"""A sound simplification of mapping predicates over the finite domains of the map codes
(:func:`simplify`): negations pushed to the atoms, conditions on one map merged into their
shortest named form, parts decided by their context dropped, common parts factored out;
and :func:`substitute`, maps given codes.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from constraints.expr import (
    FALSE,
    TRUE,
    And,
    BoolConst,
    Cmp,
    Const,
    Implies,
    In,
    Node,
    Not,
    Or,
    Param,
    Pred,
)
from mapper.encoding import CODES
from mapper.predicate_print import show_predicate

__all__ = ["Domains", "frozen_domains", "simplify", "substitute"]

Domains = Mapping[str, Iterable[int]]
"""Each map's possible codes (a map not named ranges over every code, ``CODES``)."""

# --------------------------------------------------------------------- substitution


def substitute(node: Node, values: Mapping[str, int]) -> Node:
    """``node`` with each parameter named in ``values`` replaced by its value (the
    constructors fold what becomes constant: a predicate may become TRUE or FALSE)."""
    if not node.params() & values.keys():
        return node
    if isinstance(node, Param):
        return Const(values[node.name])
    args = (substitute(a, values) if isinstance(a, Node) else a for a in node._args())
    return type(node)(*args)


# ------------------------------------------------------------------- simplification
# Internal form: negation normal form over
#   bool                     a constant,
#   _Lit(param, values)      a condition on one map: its code is one of `values`,
#   Pred                     an atom on several maps (``C == B``, ``dim(A) != dim(B)``),
#   _Op("and"|"or", parts)   a conjunction or disjunction of two parts or more.
# Every rewrite replaces a part by one equivalent to it *given its context*: the other
# parts of the conjunctions around it hold, those of the disjunctions around it do not.
# The context is kept as the codes each map may still have (`ctx`) and the atoms and
# parts known true or false (`facts`).


@dataclass(frozen=True)
class _Lit:
    param: str
    values: frozenset[int]


@dataclass(frozen=True)
class _Op:
    op: str
    parts: tuple[_N, ...]


_N = bool | _Lit | Pred | _Op
_Ctx = dict[str, frozenset[int]]
_FLIP = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
_PRODUCT_LIMIT = 1331  # atoms on maps with at most this many joint codes are tabulated


def _dual(op: str) -> str:
    return "or" if op == "and" else "and"


def _negate_atom(a: Pred) -> Pred:
    if isinstance(a, Cmp):
        return Cmp(_FLIP[a.op], a.left, a.right)
    return a.arg if isinstance(a, Not) else Not(a)


@functools.lru_cache(maxsize=65536)
def _params(n: _N) -> frozenset[str]:
    if isinstance(n, bool):
        return frozenset()
    if isinstance(n, _Lit):
        return frozenset((n.param,))
    if isinstance(n, _Op):
        return frozenset().union(*(_params(p) for p in n.parts))
    return n.params()


def _ev(n: _N, a: Mapping[str, int]) -> bool:
    if isinstance(n, bool):
        return n
    if isinstance(n, _Lit):
        return a[n.param] in n.values
    if isinstance(n, _Op):
        parts = (_ev(p, a) for p in n.parts)
        return all(parts) if n.op == "and" else any(parts)
    return bool(n.evaluate(a))


def _size(n: _N) -> int:
    return sum(_size(p) for p in n.parts) if isinstance(n, _Op) else 1


class _Simplifier:
    """Simplification of predicates over maps whose codes range over ``domains``."""

    def __init__(self, domains: Mapping[str, frozenset[int]]):
        self.domains = domains
        self.memo: dict[tuple, _N] = {}
        self.implied_memo: dict[tuple[_N, bool], dict[str, frozenset[int]]] = {}

    def dom(self, p: str) -> frozenset[int]:
        return self.domains.get(p, _ALL)

    def lit(self, p: str, values: Iterable[int]) -> _N:
        vals = frozenset(values) & self.dom(p)
        if not vals:
            return False
        return True if vals == self.dom(p) else _Lit(p, vals)

    def tabulate(self, n: _N, p: str) -> _N:
        """A node on the one map ``p`` as a condition on its code."""
        return self.lit(p, (v for v in self.dom(p) if _ev(n, {p: v})))

    # negation normal form
    def nnf(self, p: Pred, positive: bool = True) -> _N:
        if isinstance(p, BoolConst):
            return p.value == positive
        if isinstance(p, (And, Or)):
            op = "and" if isinstance(p, And) == positive else "or"
            return self.mk(op, [self.nnf(q, positive) for q in p.parts])
        if isinstance(p, Not):
            return self.nnf(p.arg, not positive)
        if isinstance(p, Implies):
            if positive:
                return self.mk("or", [self.nnf(p.lhs, False), self.nnf(p.rhs, True)])
            return self.mk("and", [self.nnf(p.lhs, True), self.nnf(p.rhs, False)])
        ps = p.params()
        if not ps:
            return bool(p.evaluate({})) == positive
        if len(ps) == 1:
            (name,) = ps
            return self.lit(name, (v for v in self.dom(name)
                                   if bool(p.evaluate({name: v})) == positive))
        return p if positive else _negate_atom(p)

    def mk(self, op: str, parts: Iterable[_N]) -> _N:
        """``op`` of ``parts``: flattened, constants folded, conditions on one map merged
        (intersected under ``and``, united under ``or``), duplicates dropped."""
        unit, zero = (True, False) if op == "and" else (False, True)
        flat: list[_N] = []
        for q in parts:
            sub = q.parts if isinstance(q, _Op) and q.op == op else (q,)
            for r in sub:
                if r is zero:
                    return zero
                if r is not unit:
                    flat.append(r)
        out: list[_N] = []
        where: dict[str, int] = {}
        for r in flat:
            if isinstance(r, _Lit):
                if r.param in where:
                    i = where[r.param]
                    old = out[i]
                    assert isinstance(old, _Lit)
                    vals = old.values & r.values if op == "and" else old.values | r.values
                    merged = self.lit(r.param, vals)
                    if merged is zero:
                        return zero
                    out[i] = merged
                    continue
                where[r.param] = len(out)
            if r not in out:
                out.append(r)
        out = [r for r in out if r is not unit]
        if not out:
            return unit
        return out[0] if len(out) == 1 else _Op(op, tuple(out))

    # what a part known true (or false) says about single maps
    def implied(self, n: _N, true: bool) -> dict[str, frozenset[int]]:
        key = (n, true)
        if key not in self.implied_memo:
            self.implied_memo[key] = self._implied(n, true)
        return self.implied_memo[key]

    def _implied(self, n: _N, true: bool) -> dict[str, frozenset[int]]:
        if isinstance(n, _Lit):
            return {n.param: n.values if true else self.dom(n.param) - n.values}
        if not isinstance(n, _Op):
            return {}
        subs = [self.implied(p, true) for p in n.parts]
        if (n.op == "and") == true:  # every part holds (fails): intersect
            out: dict[str, frozenset[int]] = {}
            for s in subs:
                for k, v in s.items():
                    out[k] = out[k] & v if k in out else v
            return out
        common = set.intersection(*(set(s) for s in subs))  # one part holds: unite
        return {k: frozenset().union(*(s[k] for s in subs)) for k in common}

    def context(self, op: str, others: Sequence[_N], ctx: _Ctx,
                facts: dict[_N, bool]) -> tuple[_Ctx, dict[_N, bool]] | None:
        """The context of a part of ``op`` whose siblings are ``others`` (None when it is
        impossible: the part's value does not matter there)."""
        true = op == "and"
        ctx2 = dict(ctx)
        facts2 = dict(facts)
        for o in others:
            if isinstance(o, bool):
                continue
            for k, v in self.implied(o, true).items():
                ctx2[k] = ctx2.get(k, self.dom(k)) & v
                if not ctx2[k]:
                    return None
            if not isinstance(o, _Lit):
                facts2[o] = true
        return ctx2, facts2

    def simp(self, n: _N, ctx: _Ctx, facts: dict[_N, bool], depth: int = 0) -> _N:
        if isinstance(n, bool):
            return n
        if isinstance(n, _Lit):
            care = ctx.get(n.param, self.dom(n.param))
            vals = n.values & care
            if not vals:
                return False
            return True if vals == care else n
        ps = _params(n)  # the result depends on the context of these maps only
        key = (n, frozenset((k, v) for k, v in ctx.items() if k in ps and v != self.dom(k)),
               frozenset((f, b) for f, b in facts.items() if _params(f) <= ps))
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._simp(n, ctx, facts, depth)
        return got

    def _simp(self, n: _Op | Pred, ctx: _Ctx, facts: dict[_N, bool], depth: int) -> _N:
        if n in facts:
            return facts[n]
        if isinstance(n, _Op):
            return self.simp_op(n, ctx, facts, depth)
        neg = _negate_atom(n)
        if neg in facts:
            return not facts[neg]
        return self.simp_atom(n, ctx)

    def simp_atom(self, a: Pred, ctx: _Ctx) -> _N:
        names = sorted(a.params())
        cares = [ctx.get(p, self.dom(p)) for p in names]
        pinned = {p: next(iter(c)) for p, c in zip(names, cares) if len(c) == 1}
        if pinned:
            got = substitute(a, pinned)
            assert isinstance(got, Pred)
            return self.simp(self.nnf(got), ctx, {})
        size = 1
        for c in cares:
            size *= len(c)
        if size <= _PRODUCT_LIMIT:
            seen = {bool(a.evaluate(dict(zip(names, vs)))) for vs in itertools.product(*cares)}
            if len(seen) == 1:
                return seen.pop()
        return a

    def simp_op(self, n: _Op, ctx: _Ctx, facts: dict[_N, bool], depth: int) -> _N:
        op = n.op
        zero = op == "or"
        cur: _N = n
        for _ in range(4):
            if not isinstance(cur, _Op) or cur.op != op:
                break
            parts = list(cur.parts)
            for i in range(len(parts)):
                got = self.context(op, parts[:i] + parts[i + 1:], ctx, facts)
                if got is None:
                    continue
                parts[i] = self.simp(parts[i], got[0], got[1], depth + 1)
                if parts[i] is zero:
                    return zero
            new = self.mk(op, parts)
            if new == cur:
                break
            cur = new
        if isinstance(cur, _Op):
            ps = _params(cur)
            if len(ps) == 1:
                return self.simp(self.tabulate(cur, next(iter(ps))), ctx, facts)
            if cur.op == op and depth < 40:
                factored = self.factor(cur)
                if factored != cur:
                    return self.simp(factored, ctx, facts, depth + 1)
        return cur

    def factor(self, n: _Op) -> _N:
        """Factor a part common to several parts: ``(x and y) or (x and z)`` is
        ``x and (y or z)``, ``x or (x and y)`` is ``x`` (and the same with and/or swapped)."""
        op, dual = n.op, _dual(n.op)

        def members(q: _N) -> tuple[_N, ...]:
            return q.parts if isinstance(q, _Op) and q.op == dual else (q,)

        counts: dict[_N, int] = {}
        for q in n.parts:
            for m in set(members(q)):
                counts[m] = counts.get(m, 0) + 1
        best = max(counts.items(), key=lambda kv: (kv[1], _size(kv[0])), default=None)
        if best is None or best[1] < 2:
            return n
        x = best[0]
        group = [q for q in n.parts if x in members(q)]
        rest = [self.mk(dual, [m for m in members(q) if m != x]) for q in group]
        factored = self.mk(dual, [x, self.mk(op, rest)])
        first = n.parts.index(group[0])
        others = [q for q in n.parts if q not in group]
        return self.mk(op, [*others[:first], factored, *others[first:]])

    def relax(self, n: _N, ctx: _Ctx) -> _N:
        """``n`` with each condition on one map widened to the codes of its shortest named
        form, where the codes it gains are impossible in its context (one part after the
        other, as in :meth:`simp`)."""
        if isinstance(n, _Lit):
            care = ctx.get(n.param, self.dom(n.param))
            named = _describe(n.param, n.values & care, care)
            return self.lit(n.param, (v for v in self.dom(n.param)
                                      if named.evaluate({n.param: v})))
        if not isinstance(n, _Op):
            return n
        parts = list(n.parts)
        for i in range(len(parts)):
            got = self.context(n.op, parts[:i] + parts[i + 1:], ctx, {})
            if got is not None:
                parts[i] = self.relax(parts[i], got[0])
        return self.mk(n.op, parts)

    def to_pred(self, n: _N) -> Pred:
        """The predicate of ``n``, each condition on one map in its shortest named form."""
        if isinstance(n, bool):
            return TRUE if n else FALSE
        if isinstance(n, _Lit):
            return _describe(n.param, n.values, self.dom(n.param))
        if isinstance(n, _Op):
            parts = [self.to_pred(q) for q in n.parts]
            return And(*parts) if n.op == "and" else Or(*parts)
        return n


_ALL = frozenset(CODES)


def _level_sets() -> list[tuple[Pred, frozenset[int]]]:
    """Conditions on the level of a map ``_`` (as predicates) and the levels they admit."""
    out: list[tuple[Pred, frozenset[int]]] = []
    lev = Param("_") // 10
    for L in range(4):
        out.append((Cmp("==", lev, L), frozenset((L,))))
        out.append((Cmp("!=", lev, L), frozenset(range(4)) - {L}))
    for k in range(1, 4):
        out.append((lev < k, frozenset(range(k))))
        out.append((lev >= k, frozenset(range(k, 4))))
    for r in (2, 3):
        for ls in itertools.combinations(range(4), r):
            out.append((In(lev, ls), frozenset(ls)))
            out.append((Not(In(lev, ls)), frozenset(range(4)) - set(ls)))
    return out


_LEVELS = _level_sets()


@functools.lru_cache(maxsize=16384)
def _describe(p: str, target: frozenset[int], care: frozenset[int]) -> Pred:
    """The shortest named condition on map ``p`` that admits exactly the codes ``target``
    among the codes ``care`` it can have (the others do not matter)."""
    A = Param(p)
    cands: list[Pred] = []
    if len(target) == 1:
        cands.append(Cmp("==", A, next(iter(target))))
    if len(care - target) == 1:
        cands.append(Cmp("!=", A, next(iter(care - target))))
    cands.append(In(A, target))
    cands.append(Not(In(A, care - target)))
    for pred, levels in _LEVELS:
        got = frozenset(v for v in care if v // 10 in levels)
        named = _rename(pred, p)
        if got == target:
            cands.append(named)
        elif got > target and len(got - target) <= 2:
            extra = sorted(got - target)
            cands.append(And(named, *(Cmp("!=", A, v) for v in extra)))
        elif got < target and len(target - got) <= 2:
            cands.append(Or(named, *(Cmp("==", A, v) for v in sorted(target - got))))
    return min(cands, key=_cost)


def _cost(q: Pred) -> int:
    """How long ``q`` reads: its length, an order comparison one more than an equality."""
    return len(show_predicate(q)) + (isinstance(q, Cmp) and q.op in ("<", "<=", ">", ">="))


def _rename(pred: Pred, p: str) -> Pred:
    """A condition on map ``_`` as one on map ``p``."""

    def go(n: Node) -> Node:
        if isinstance(n, Param):
            return Param(p)
        if not n.params():
            return n
        return type(n)(*(go(a) if isinstance(a, Node) else a for a in n._args()))

    got = go(pred)
    assert isinstance(got, Pred)
    return got


def frozen_domains(domains: Domains | None) -> tuple[tuple[str, tuple[int, ...]], ...]:
    if not domains:
        return ()
    return tuple(sorted((k, tuple(sorted(set(v)))) for k, v in domains.items()))


@functools.lru_cache(maxsize=8192)
def _simplify(pred: Pred, domains: tuple[tuple[str, tuple[int, ...]], ...]) -> Pred:
    s = _Simplifier({k: frozenset(v) for k, v in domains})
    return s.to_pred(s.relax(s.simp(s.nnf(pred), {}, {}), {}))


def simplify(pred: Pred, domains: Domains | None = None) -> Pred:
    """A predicate equivalent to ``pred`` for every assignment of codes from ``domains``
    (each map not named there ranges over all the codes, ``CODES``), usually much shorter:
    negations pushed to the atoms, nested and/or flattened, duplicates and constants
    dropped, the conditions on one map merged into one, in its shortest named form
    (``A in {mapLcl(0), mapGlb(0)}``, ``level(A) == seq``: codes impossible where it
    stands do not matter), parts made true or false by the conditions around them
    dropped, common parts factored out. Meant for the mapper's predicates: any map named
    in ``pred`` takes a code.

    The work is done once per shape: the maps are renamed to placeholders in the order of
    their names (so that whatever the simplifier orders by name keeps its order), the
    placeholder form simplified (cached) and renamed back; a rule's instances over many
    pairs of maps (a kernel of 100 sibling maps has thousands) share one simplification."""
    names = sorted(pred.params())
    canon: dict[str, str] = {}
    prev = ""
    for n in names:
        prev = canon[n] = _placeholder(prev, n)
    doms = frozen_domains({canon[k]: v for k, v in (domains or {}).items() if k in canon})
    # the key: the predicate's text in placeholder names (printing is cheaper than
    # rebuilding the predicate; the rebuilt one is needed only the first time)
    key = (_NAME.sub(lambda m: canon.get(m.group(0), m.group(0)), str(pred)), doms)
    out = _SHAPES.get(key)
    if out is None:
        out = _SHAPES[key] = _simplify(_renamed(pred, canon), doms)
        if len(_SHAPES) > 8192:
            _SHAPES.pop(next(iter(_SHAPES)))
    return _renamed(out, {v: k for k, v in canon.items()})


_NAME = re.compile(r"\b[A-Z][A-Za-z0-9_]*\b")
_SHAPES: dict[tuple, Pred] = {}  # simplified predicates in placeholder names, by text


_PLACEHOLDER_CHARS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _placeholder(prev: str, name: str) -> str:
    """The first name after ``prev`` (in string order) as long as ``name`` and starting,
    like it, with a capital: what the simplifier's orders and lengths see is unchanged."""
    if not name[:1].isupper() or not all(ch in _PLACEHOLDER_CHARS for ch in name):
        return name  # a name of another form stands for itself
    digits = [10] + [0] * (len(name) - 1)  # "A0..0"
    while True:
        cand = "".join(_PLACEHOLDER_CHARS[d] for d in digits)
        if cand > prev:
            return cand
        i = len(digits) - 1
        while i >= 0:
            digits[i] += 1
            if digits[i] < len(_PLACEHOLDER_CHARS):
                break
            digits[i] = 10 if i == 0 else 0
            i -= 1
        if i < 0:
            return name  # no shorter placeholder after prev: keep the name


def _renamed(node, names: Mapping[str, str]):
    """``node`` (a predicate or term) with its parameters renamed by ``names``."""
    if isinstance(node, Param):
        return Param(names.get(node.name, node.name))
    if not isinstance(node, Node) or not node.params():
        return node
    args = tuple(_renamed(a, names) if isinstance(a, Node)
                 else tuple(_renamed(x, names) for x in a)
                 if isinstance(a, tuple) and any(isinstance(x, Node) for x in a) else a
                 for a in node._args())
    return type(node)(*args)
