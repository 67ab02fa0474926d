"""Simplified, named predicates (mapper.simplify, mapper.predicate_print); one text form for
constraint instances (mapper.text); what a mapping does that an instance forbids
(mapper.violations).

Every check of meaning is exhaustive over the codes (an independent brute force below:
map by map, each value substituted through the constructors, identical residual pairs
decided once), on every constraint instance of every example program.
"""

from __future__ import annotations

import functools
import glob
import itertools
import os
import pickle
import random
import re
from collections.abc import Mapping, Sequence

import pytest

import constraints.expr as ex
from constraints.model import Constraint, Model, Parameter
from constraints.scalar import compile_predicate
from ir.syntax import parse_file
from mapper.api import check_mapping, problem
from mapper.encoding import CODES
from mapper.errors import MappingError
from mapper.predicate_print import show_predicate
from mapper.rules import dim, level
from mapper.simplify import simplify
from mapper.text import SHOW_LIMIT, show_constraint, show_predicate_short
from mapper.violations import WHY_LIMIT, blame, why_violated

EXAMPLES = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "examples",
                                         "*.lift")))
L3 = next(f for f in EXAMPLES if f.endswith("cc22_listing3.lift"))
Doms = Mapping[str, Sequence[int]]


# ------------------------------------------------------------------ brute force


def _assign(node: ex.Node, name: str, value: int, memo: dict | None = None,
            one: dict | None = None) -> ex.Node:
    """``node`` with parameter ``name`` replaced by ``value`` (constructors fold; ``memo``
    keeps the subtrees done; ``one``: see ``_one``, every node built is made the one
    object of its structure)."""
    if name not in node.params():
        return node
    if isinstance(node, ex.Param):
        out: ex.Node = ex.Const(value)
        return out if one is None else one.setdefault(out, out)
    key = (node, name, value)
    if memo is not None and key in memo:
        return memo[key]
    out = type(node)(*(_assign(a, name, value, memo, one) if isinstance(a, ex.Node) else a
                       for a in node._args()))
    if one is not None:
        out = one.setdefault(out, out)
    if memo is not None:
        memo[key] = out
    return out


def _one(node: ex.Node, one: dict) -> ex.Node:
    """``node`` rebuilt from its subtrees as ``_assign`` rebuilds (each made the one object
    of its structure in ``one`` first), itself made the one object of its structure; the
    original where a constructor would build it otherwise. Structurally equal nodes are
    then one object: comparing them (the memo's and ``same``'s keys) is an identity check,
    where ``Node.__eq__`` walks both trees to their leaves."""
    if isinstance(node, ex.Param) or not any(isinstance(a, ex.Node) for a in node._args()):
        return one.setdefault(node, node)
    out = type(node)(*(_one(a, one) if isinstance(a, ex.Node) else a for a in node._args()))
    return one.setdefault(out, out) if out == node else node


def _order(*ps: ex.Pred) -> list[str]:
    """Maps in atoms on several maps first: the search decides them early."""
    score: dict[str, int] = {}

    def walk(n: ex.Node) -> None:
        if isinstance(n, (ex.Cmp, ex.In)):
            for x in n.params():
                score[x] = score.get(x, 0) + (10 if len(n.params()) > 1 else 1)
            return
        for a in n._args():
            if isinstance(a, ex.Node):
                walk(a)
            elif isinstance(a, tuple):
                for b in a:
                    if isinstance(b, ex.Node):
                        walk(b)

    for p in ps:
        walk(p)
    return sorted(score, key=lambda x: (-score[x], x))


def _table(p: ex.Pred, names: tuple[str, ...], doms: Doms) -> list[bool]:
    """``p``'s value on every assignment of codes to ``names`` (in product order)."""
    fn = compile_predicate(p, names)
    return [fn(*vs) for vs in itertools.product(*(doms.get(x, CODES) for x in names))]


def equivalent(p: ex.Pred, q: ex.Pred, doms: Doms) -> bool:
    """Whether ``p`` and ``q`` agree on every assignment of codes from ``doms``: every
    assignment evaluated once four maps or fewer are left."""
    order = _order(p, q)
    same: set[tuple[ex.Pred, ex.Pred]] = set()
    memo: dict = {}
    one: dict = {}
    tables: dict = {}  # (residual, names) -> its table: a residual recurs on many branches

    def table(p: ex.Pred, names: tuple[str, ...]) -> list[bool]:
        key = (p, names)
        if key not in tables:
            tables[key] = _table(p, names, doms)
        return tables[key]

    def go(p: ex.Pred, q: ex.Pred) -> bool:
        if p == q or (p, q) in same:
            return True
        names = tuple(x for x in order if x in p.params() | q.params())
        if len(names) <= 3:
            ok = table(p, names) == table(q, names)
        else:
            ok = all(go(_assign(p, names[0], v, memo, one), _assign(q, names[0], v, memo, one))
                     for v in doms.get(names[0], CODES))
        if ok:
            same.add((p, q))
        return ok

    if len(set(order)) > 3:  # branches: equal residuals made one object (see ``_one``)
        p, q = _one(p, one), _one(q, one)
    return go(p, q)


def satisfiable(p: ex.Pred, doms: Doms) -> bool:
    """Whether some assignment of codes from ``doms`` makes ``p`` true."""
    order = _order(p)
    no: set[ex.Pred] = set()
    memo: dict = {}

    def go(p: ex.Pred) -> bool:
        if isinstance(p, ex.BoolConst):
            return p.value
        if p in no:
            return False
        x = next(x for x in order if x in p.params())
        if any(go(_assign(p, x, v, memo)) for v in doms.get(x, CODES)):
            return True
        no.add(p)
        return False

    return go(p)


# ---------------------------------------------------------------- the instances


@functools.cache
def instances() -> list[tuple[str, Constraint, dict[str, tuple[int, ...]]]]:
    """(example, instance, its maps' codes) for every instance of every example, fusion
    'always' and 'free', heuristics on and off (each predicate and codes once)."""
    out = []
    seen = set()
    for f in EXAMPLES:
        for fusion in ("always", "free"):
            for heuristics in (True, False):
                p = problem(parse_file(f), fusion=fusion, heuristics=heuristics)
                for c in p.constraints:
                    doms = {m: p.model.param(m).domain for m in sorted(c.params)}
                    key = (c.predicate, tuple(doms.items()))
                    if key not in seen:
                        seen.add(key)
                        out.append((os.path.basename(f), c, doms))
    return out


def test_the_instances_cover_every_rule():
    from mapper.rules import RULE_NAMES

    assert {c.rule for _, c, _ in instances()} == set(RULE_NAMES)


# ------------------------------------------------------------------- simplify


@pytest.mark.slow  # over 3 s (CI durations): not in the fast subset
def test_simplify_is_equivalent_on_every_instance():
    """Over every code (the default) and over the model's domains."""
    for name, c, doms in instances():
        assert equivalent(c.predicate, simplify(c.predicate), {}), (name, c.rule)
        assert equivalent(c.predicate, simplify(c.predicate, doms), doms), (name, c.rule)


@pytest.mark.slow  # over 3 s: the fast subset keeps test_simplify_rewrites and issue 22's
def test_simplify_shortens():
    """No instance prints much longer simplified; all together a fifth shorter or more (the
    vector rules' instances, generated in their simplest form, apart)."""
    total_before = total_after = 0
    for _, c, doms in instances():
        before = len(show_predicate(c.predicate))
        after = len(show_predicate(simplify(c.predicate, doms)))
        assert after <= before + 10
        if str(c.rule).startswith("vector-"):
            assert after <= before
            continue
        total_before += before
        total_after += after
    # (0.8 before the codes gained V: sets of the three level-0 codes print longer)
    assert total_after < 0.82 * total_before


def _random_pred(rng: random.Random, depth: int) -> ex.Pred:
    """A random predicate on maps A, B, C of the kinds the rules build, and more."""
    maps = ["A", "B", "C"]
    if depth == 0 or rng.random() < 0.25:
        a, b = rng.sample(maps, 2)
        kind = rng.randrange(6)
        if kind == 0:
            return ex.Cmp(rng.choice(["==", "!="]), ex.Param(a), rng.choice(CODES))
        if kind == 1:
            return ex.Cmp(rng.choice(["<", ">=", "==", "!="]), level(a), rng.randrange(4))
        if kind == 2:
            return ex.In(ex.Param(a), rng.sample(CODES, rng.randint(1, 4)))
        if kind == 3:
            return ex.Cmp(rng.choice(["==", "!="]), ex.Param(a), ex.Param(b))
        if kind == 4:
            return ex.Cmp(rng.choice(["==", "!="]), dim(a), dim(b))
        return ex.Cmp(rng.choice(["<", "=="]), level(a), level(b))
    kind = rng.randrange(4)
    parts = [_random_pred(rng, depth - 1) for _ in range(rng.randint(2, 4))]
    if kind == 0:
        return ex.And(*parts)
    if kind == 1:
        return ex.Or(*parts)
    if kind == 2:
        return ex.Not(ex.Or(*parts) if rng.random() < 0.5 else ex.And(*parts))
    return ex.Implies(parts[0], parts[1])


def _simplify_random_predicates(first: int, end: int) -> None:
    """Predicates ``first`` to ``end`` of one random sequence (250 in all, split between
    the fast subset and the slow tests) simplify to equivalent ones."""
    rng = random.Random(7)
    doms = {"A": tuple(c for c in CODES if c != 1), "B": CODES, "C": (0, 10, 20, 30)}
    for p in [_random_pred(rng, 4) for _ in range(end)][first:]:
        assert equivalent(p, simplify(p), {}), show_predicate(p)
        assert equivalent(p, simplify(p, doms), doms), show_predicate(p)


def test_simplify_is_equivalent_on_random_predicates():
    _simplify_random_predicates(0, 80)


@pytest.mark.slow  # over 3 s: the first 80 are in the fast subset
def test_simplify_is_equivalent_on_more_random_predicates():
    _simplify_random_predicates(80, 250)


def test_simplify_rewrites():
    A, B, C = ex.Param("A"), ex.Param("B"), ex.Param("C")
    x, y, z = ex.eq(A, B), ex.ne(B, C), ex.eq(dim("A"), dim("C"))
    assert simplify(ex.Or(ex.eq(A, 10), ex.eq(A, 30))) == ex.In(A, [10, 30])
    assert show_predicate(simplify(ex.Or(ex.eq(A, 0), ex.eq(A, 1), ex.eq(A, 2)))) == \
        "level(A) == seq"  # mapSeq, fused and mapVec distribute nothing
    assert show_predicate(simplify(ex.Or(ex.eq(A, 0), ex.eq(A, 1)))) == "A in {mapSeq, fused}"
    assert simplify(ex.And(x, ex.Or(x, y))) == x  # absorption
    assert simplify(ex.Or(ex.And(x, y), ex.And(x, z))) == ex.And(x, ex.Or(y, z))  # factoring
    assert simplify(ex.And(ex.Or(x, y), ex.Or(x, z))) == ex.Or(x, ex.And(y, z))
    assert simplify(ex.And(ex.eq(A, 10), ex.ne(A, 10))) is ex.FALSE
    assert simplify(ex.Or(level("A") < 2, level("A") >= 2)) is ex.TRUE
    # A == B is false there
    assert simplify(ex.Not(ex.And(ex.eq(A, 10), ex.eq(B, 20), x))) is ex.TRUE
    assert show_predicate(simplify(ex.And(ex.ne(A, 20), ex.ne(B, 20), ex.ne(C, 20)))) == \
        "none of A, B, C is mapWrg(0)"
    # codes outside the domains do not matter
    assert simplify(ex.eq(A, 0), {"A": (0, 10)}) == simplify(level("A") < 1, {"A": (0, 10)})
    assert simplify(ex.ne(A, 1), {"A": (0, 10)}) is ex.TRUE


def test_show_predicate_names():
    A = ex.Param("A")
    assert show_predicate(ex.Not(ex.In(A, [0, 1]))) == "A not in {mapSeq, fused}"
    assert show_predicate(ex.In(level("A"), [0, 3])) == "level(A) in {seq, mapGlb}"
    B = ex.Param("B")
    assert show_predicate(ex.Or(ex.eq(A, 10), ex.eq(B, 10), ex.ne(A, B))) == \
        "any of A, B is mapLcl(0) or A != B"
    assert show_predicate(ex.And(ex.Not(ex.In(A, [10, 30])), ex.Not(ex.In(B, [10, 30])))) == \
        "none of A, B in {mapLcl(0), mapGlb(0)}"


# ------------------------------------------------------------- show_constraint

RAW = [
    re.compile(r"\b[A-Z][A-Z0-9]*\s*(==|!=|<=|>=|<|>)\s*-?\d"),  # a map against a number
    re.compile(r"(?<![\w)])-?\d+\s*(==|!=|<=|>=|<|>)\s*[A-Z]"),
    re.compile(r"level\([^)]*\)\s*(==|!=|<=|>=|<|>)\s*\d"),  # a level against a number
    re.compile(r"\bin \{-?\d"),
    re.compile(r"[/%]\s*10\b"),  # A/10, A%10
    re.compile(r"\bis -?\d"),
]
# the predicate part of show_constraint: the limit, and the words saying it is abridged
BOUND = SHOW_LIMIT + len(" (abridged from 99,999 characters)")


def _show_constraint_is_named_and_short(part: slice) -> None:
    for name, c, doms in instances()[part]:
        for domains in (None, doms):
            text = show_constraint(c, domains=domains)
            head, _, pred = text.partition(f" {c.description}: ")
            assert head in (f"[validity rule {c.rule}]", f"[heuristic {c.rule}]")
            for raw in RAW:
                assert not raw.search(pred), (name, c.rule, pred)
            assert len(pred) <= BOUND, (name, c.rule, len(pred))
            full = show_predicate(simplify(c.predicate, domains))
            if len(full) <= SHOW_LIMIT:
                assert pred == full
            else:
                assert pred.endswith(f" (abridged from {len(full):,} characters)")
                assert "…" in pred


def test_show_constraint_is_named_and_short():
    """Every instance prints with code names, never a raw code, and its predicate in at
    most about SHOW_LIMIT characters: in full when simplified it fits, else abridged with
    the words saying so. Here every fourth instance (of every example); the others in the
    slow test below."""
    _show_constraint_is_named_and_short(slice(0, None, 4))


@pytest.mark.slow  # over 3 s: every fourth instance is in the fast subset
def test_show_constraint_is_named_and_short_on_the_other_instances():
    for start in (1, 2, 3):
        _show_constraint_is_named_and_short(slice(start, None, 4))


def test_the_issue_22_instance_comes_out_short():
    """The cross-thread-dependency instance of issue 22 (2,600 characters as built)."""
    (c,) = check_mapping(parse_file(L3), "A=G1 B=G0 C=G0 D=S")
    assert c.rule == "cross-thread-dependency" and len(str(c.predicate)) > 1600
    text = str(c)
    assert text == show_constraint(c) and len(text) < 480
    assert text.startswith("[validity rule cross-thread-dependency] map B reads what map C "
                           "wrote")
    assert "D == fused and (C == B or" in text and "abridged" in text
    why = why_violated(c, {"A": 31, "B": 30, "C": 30, "D": 0})
    assert why == ("C=G0 with B=G0, D=S, A=G1 (cross-thread-dependency: needs D in "
                   "{fused, mapLcl(0)} or C != mapGlb(0) or B in {mapLcl(0), mapGlb(1), "
                   "mapGlb(2)} or A == mapLcl(0))")


def test_str_of_an_instance_is_the_named_form():
    p = problem(parse_file(L3))
    c = p.constraints[0]
    assert str(c) == show_constraint(c) and str(c).endswith(": level(A) == seq or A != B")
    plain = Constraint(c.rule, c.predicate, c.description, c.subjects)
    assert plain == c and hash(plain) == hash(c)  # the printer is no part of the value
    assert str(plain) == f"[{c.rule}] {c.description}: {c.predicate}"
    assert "formatter" not in repr(c)
    assert str(pickle.loads(pickle.dumps(c))) == str(c)
    model = Model([Parameter(m, CODES) for m in p.labels], p.constraints)
    assert all(d.formatter is show_constraint for d in model.decomposed().constraints)
    assert str(model).splitlines()[1] == str(c)


def test_show_predicate_short_abridges_in_words():
    p = ex.Or(*(ex.And(ex.eq(ex.Param(f"M{i}"), 10), ex.ne(ex.Param(f"N{i}"), ex.Param(f"O{i}")))
             for i in range(12)))
    text = show_predicate_short(p, limit=60)
    assert len(text) <= 60 + len(" (abridged from 999 characters)")
    assert text.endswith(f" (abridged from {len(show_predicate(simplify(p))):,} characters)")


# ---------------------------------------------------------------- why_violated


def _invalid_mappings(path: str, rng: random.Random, n: int):
    """``n`` random full mappings of the example that violate some instance."""
    p = problem(parse_file(path))
    doms = {m: p.model.param(m).domain for m in p.labels}
    out = []
    while len(out) < n:
        m = {k: rng.choice(d) for k, d in doms.items()}
        bad = check_mapping(p, m)
        if bad:
            out.append((m, bad))
    return doms, out


def _fixed(p: ex.Pred, mapping: Mapping[str, int], maps) -> ex.Pred:
    """``p`` with ``maps`` given their codes in ``mapping``."""
    q: ex.Node = p
    for k in maps:
        q = _assign(q, k, mapping[k])
    assert isinstance(q, ex.Pred)
    return q


@pytest.mark.slow  # over 2 s (fast-subset durations): not in the fast subset
@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_why_violated(path):
    """For sampled invalid mappings, each violated instance: the text is short and names
    the maps involved; their codes alone break the instance (whatever the others are), no
    one of them can be left out; what it says the instance needs, the instance implies
    (on those maps, or given the others) and the mapping breaks."""
    rng = random.Random(os.path.basename(path))
    doms, cases = _invalid_mappings(path, rng, 6)
    for m, bad in cases:
        for c in bad:
            b = blame(c, m, doms)
            text = why_violated(c, m, doms)
            assert text == str(b) and len(text) <= WHY_LIMIT, text
            maps = dict(b.maps)
            assert maps and set(maps) <= c.params and all(m[k] == v for k, v in maps.items())
            for k in maps:
                assert re.search(rf"\b{k}=", text), text
            assert f"({c.rule}: needs " in text
            assert not b.needs.evaluate(m)  # the mapping breaks it
            rest = {k: d for k, d in doms.items() if k not in maps}

            assert not satisfiable(_fixed(c.predicate, m, maps), rest)  # these codes alone break it
            for k in maps:  # and each of them is needed
                assert satisfiable(_fixed(c.predicate, m, set(maps) - {k}), doms)
            # what it needs follows from the instance
            base = _fixed(c.predicate, m, c.params - set(maps)) if b.given_rest else c.predicate
            assert not satisfiable(ex.And(base, ex.Not(b.needs)), doms), text
            if not b.given_rest:
                assert b.needs.params() <= set(maps)


def test_why_violated_refuses_a_satisfied_instance():
    p = problem(parse_file(L3))
    c = p.constraints[0]
    with pytest.raises(MappingError, match="satisfies"):
        why_violated(c, {m: 0 for m in p.labels})
    with pytest.raises(MappingError, match="no code"):
        why_violated(c, {})
