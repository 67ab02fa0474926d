"""What a full mapping does that a constraint instance forbids (:func:`why_violated`,
:func:`blame`): the fewest maps whose codes alone break it, found by exhaustive searches
over the other maps' codes, and what the rule needs of them.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from constraints.expr import (
    FALSE,
    TRUE,
    And,
    BoolConst,
    Const,
    Implies,
    Node,
    Not,
    Or,
    Param,
    Pred,
)
from constraints.model import Constraint
from mapper.encoding import CODES, FUSED, PARALLEL_CODES, SEQ, VEC
from mapper.errors import MappingError
from mapper.predicate_print import show_predicate
from mapper.simplify import Domains, frozen_domains, simplify
from mapper.text import abridge

__all__ = ["WHY_LIMIT", "Violation", "blame", "why_violated"]

WHY_LIMIT = 200
"""The most characters :func:`why_violated` prints (the maps and the rule's name are never
cut: with very many maps, more)."""


def _short(code: int) -> str:
    """``S``, ``F``, ``V``, ``L0``-``L2``, ``W0``-``W2``, ``G0``-``G2`` (the number
    otherwise)."""
    if code in PARALLEL_CODES:
        return "?LWG"[code // 10] + str(code % 10)
    return {SEQ: "S", FUSED: "F", VEC: "V"}.get(code, str(code))


def _order(p: Pred) -> list[str]:
    """The maps of ``p``, those in the most atoms on several maps first (the order the
    exhaustive searches branch in: they decide the most)."""
    score: dict[str, int] = {}

    def walk(q: Pred) -> None:
        if isinstance(q, (And, Or)):
            for r in q.parts:
                walk(r)
        elif isinstance(q, Not):
            walk(q.arg)
        elif isinstance(q, Implies):
            walk(q.lhs)
            walk(q.rhs)
        else:
            ps = q.params()
            for x in ps:
                score[x] = score.get(x, 0) + (10 if len(ps) > 1 else 1)

    walk(p)
    return sorted(p.params(), key=lambda x: (-score.get(x, 0), x))


class _Search:
    """Exhaustive searches over the codes of maps (from ``doms``) in one predicate's
    family: substitutions and the predicates found (un)satisfiable are kept across them."""

    def __init__(self, p: Pred, doms: Mapping[str, Sequence[int]]):
        self.doms = doms
        self.order = _order(p)
        self.memo: dict[tuple[Node, str, int], Node] = {}
        self.known: dict[Pred, bool] = {}

    def assign(self, node: Node, name: str, value: int) -> Node:
        """``node`` with map ``name`` given code ``value``."""
        if name not in node.params():
            return node
        if isinstance(node, Param):
            return Const(value)
        key = (node, name, value)
        got = self.memo.get(key)
        if got is None:
            args = (self.assign(a, name, value) if isinstance(a, Node) else a
                    for a in node._args())
            got = self.memo[key] = type(node)(*args)
        return got

    def fixed(self, p: Pred, values: Iterable[tuple[str, int]]) -> Pred:
        """``p`` with the maps named in ``values`` given their codes."""
        q: Node = p
        for name, v in values:
            q = self.assign(q, name, v)
        assert isinstance(q, Pred)
        return q

    def satisfiable(self, q: Pred) -> bool:
        """Whether some codes of the maps of ``q`` make it true (map by map, each predicate
        left decided once)."""
        if isinstance(q, BoolConst):
            return q.value
        got = self.known.get(q)
        if got is None:
            x = next(x for x in self.order if x in q.params())
            got = any(self.satisfiable(self.fixed(q, [(x, v)])) for v in self.doms[x])
            self.known[q] = got
        return got


def _only(p: Pred, maps: frozenset[str]) -> Pred:
    """A consequence of ``p`` (negations only on atoms, as :func:`simplify` leaves them)
    about ``maps`` only: each test of another map made true."""
    if isinstance(p, (And, Or)):
        parts = [_only(q, maps) for q in p.parts]
        return And(*parts) if isinstance(p, And) else Or(*parts)
    return p if p.params() <= maps else TRUE


def _weaken(p: Pred, mapping: Mapping[str, int]) -> Pred:
    """A consequence of ``p``, false under ``mapping`` as ``p`` is: each false conjunction
    replaced by its false part that prints shortest (its own consequence, false too)."""
    if isinstance(p, Or):
        return Or(*(_weaken(q, mapping) for q in p.parts))
    if isinstance(p, And):
        false = [_weaken(q, mapping) for q in p.parts if not q.evaluate(mapping)]
        return min(false, key=lambda q: len(show_predicate(q)))
    return p


@dataclass(frozen=True)
class Violation:
    """What a full mapping does that a constraint instance forbids.

    ``maps``: the fewest maps (in the instance's order) whose codes in the mapping break
    it whatever codes the other maps have, with those codes. ``needs``: a condition that
    the instance implies and the mapping breaks, short: on those maps only, whatever the
    other maps are; or, where the other maps' codes decide it (``given_rest``), the
    instance with them as the mapping has them (or a condition it implies)."""

    constraint: Constraint
    maps: tuple[tuple[str, int], ...]
    needs: Pred
    given_rest: bool

    def __str__(self) -> str:
        rule = self.constraint.rule
        codes = [f"{m}={_short(v)}" for m, v in self.maps]
        if not codes:
            return f"({rule}: it can never hold)"
        who = codes[0] + (f" with {', '.join(codes[1:])}" if len(codes) > 1 else "")
        room = WHY_LIMIT - len(who) - len(rule) - len(" (: needs )")
        return f"{who} ({rule}: needs {abridge(self.needs, room)})"


def blame(c: Constraint, mapping: Mapping[str, int],
          domains: Domains | None = None) -> Violation:
    """Why the full ``mapping`` (codes of at least the instance's maps) violates ``c``: the
    fewest maps whose codes alone break it (the smallest sets tried first, in the order of
    ``c.subjects``; each by an exhaustive search over the other maps' codes, from
    ``domains``, every code by default) and what ``c`` needs of them."""
    p = c.predicate
    missing = sorted(m for m in p.params() if m not in mapping)
    if missing:
        raise MappingError(f"the mapping gives no code for map(s) {', '.join(missing)}")
    if p.evaluate(mapping):
        raise MappingError(f"the mapping satisfies the constraint instance {c}")
    codes = tuple(sorted((m, mapping[m]) for m in p.params()))
    return _blame(c, codes, frozen_domains({m: v for m, v in (domains or {}).items()
                                     if m in p.params()}))


@functools.lru_cache(maxsize=1024)
def _blame(c: Constraint, codes: tuple[tuple[str, int], ...],
           frozen: tuple[tuple[str, tuple[int, ...]], ...]) -> Violation:
    p = c.predicate
    mapping = dict(codes)
    domains = dict(frozen)
    names = [m for m in c.subjects if m in p.params()]
    names += sorted(p.params() - set(names))
    doms = {m: tuple(domains.get(m, CODES)) for m in names}
    search = _Search(p, doms)
    chosen: tuple[str, ...] = tuple(names)
    for k in range(len(names) + 1):
        found = next((s for s in itertools.combinations(names, k) if not search.satisfiable(
            search.fixed(p, ((m, mapping[m]) for m in s)))), None)
        if found is not None:
            chosen = found
            break
    simple = simplify(p, domains)
    needs = simplify(_only(simple, frozenset(chosen)), domains)
    given_rest = bool(needs.evaluate(mapping))
    if given_rest:  # the tests of the others decide: with them as the mapping has them
        rest = [(m, mapping[m]) for m in names if m not in chosen]
        needs = simplify(search.fixed(p, rest), domains)
    if len(show_predicate(needs)) > WHY_LIMIT // 2 or needs is FALSE:
        needs = simplify(_weaken(simple if needs is FALSE else needs, mapping), domains)
    return Violation(c, tuple((m, mapping[m]) for m in chosen), needs, given_rest)


def why_violated(c: Constraint, mapping: Mapping[str, int],
                 domains: Domains | None = None) -> str:
    """What the full ``mapping`` does that ``c`` forbids, in at most about ``WHY_LIMIT``
    characters: ``C=G0 with B=G0 (cross-thread-dependency: needs ...)``, the fewest maps
    whose codes alone break ``c`` and a condition on them that ``c`` needs and the
    mapping breaks (see :func:`blame`)."""
    return str(blame(c, mapping, domains))
