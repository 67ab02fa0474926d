"""The parallel-mapping rules: CC'22 rules (1)-(8) and the holes found by testing.

Each rule is a named generator over a ``MapNestingTree`` that yields
``Constraint`` instances over the maps' codes (CC'22 Table 2 encoding), each
with a one-line description that names the maps it is about.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import combinations

from constraints.expr import FALSE, TRUE, And, Not, Or, Param, Pred, eq, ne
from constraints.model import Constraint
from mapper.nesting import MapNestingTree

FUSION_STRATEGIES = ("always", "never", "free")
_DOMAINS = {1: "local", 2: "work-group", 3: "global"}


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


KINDS = ("validity", "heuristic")


@dataclass(frozen=True)
class Rule:
    """A named rule: ``generate(tree)`` yields its constraint instances.

    ``kind`` is ``validity`` (the OpenCL model: memory scope, hierarchy, synchronisation,
    races; exact against the oracle ``experiments/oracle.py``) or ``heuristic`` (prunes
    mappings that lower and run correctly but are unlikely to be fast; switchable with
    ``heuristics=False``)."""

    name: str
    title: str
    source: str  # where it comes from: "CC'22 rule (3)", "added: ..."
    generate: Callable[[MapNestingTree], Iterator[Constraint]]
    kind: str = "validity"


def private_memory(t: MapNestingTree) -> Iterator[Constraint]:
    """(1) A map that reads or writes private memory runs in one thread: sequential or fused.

    Only the maps that produce or consume the private value, i.e. the loops inside the
    thread that owns it, are concerned: a map whose function merely *contains* a private
    value (a reduction's accumulator, a ``toPrivate`` temporary) allocates one per
    iteration, so it may distribute threads around it (the tree records where each map
    writes the way the lowering does: a reduction is no annotation)."""
    for m in t.concrete():
        i = t.maps[m]
        if i.uses_private:
            how = "writes" if i.writes == "private" else "reads"
            yield Constraint("private-memory", level(m) < 1,
                             f"map {m} {how} private memory, so it must be sequential or fused",
                             (m,))


def local_memory(t: MapNestingTree) -> Iterator[Constraint]:
    """(2) A map using local memory runs within one work-group, under a mapWrg of every
    work-group dimension its chain uses."""
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
            yield Constraint(
                "local-memory", And(*parts),
                f"map {m} uses local memory: it must not be mapWrg/mapGlb and must sit under a "
                f"mapWrg of each work-group dimension used in chain {_chain_text(chain)}",
                tuple(chain),
            )


def duplicate_scheduling(t: MapNestingTree) -> Iterator[Constraint]:
    """(3) Nested maps are not parallelised in the same domain and dimension."""
    for m in t.concrete():
        for inner in t.nested(m):
            yield Constraint(
                "duplicate-scheduling", Or(level(m) < 1, ne(c(m), c(inner))),
                f"maps {m} and {inner} (nested in {m}) are not parallel in the same domain "
                "and dimension", (m, inner))


def local_dimensionality(t: MapNestingTree) -> Iterator[Constraint]:
    """(4)-(5) In a chain, mapLcl(d) is used exactly when mapWrg(d) is."""
    for chain in t.chains():
        for d in range(3):
            yield Constraint(
                "local-dimensionality", Or(_none_is(chain, 10 + d), _any_is(chain, 20 + d)),
                f"chain {_chain_text(chain)}: mapLcl({d}) needs a mapWrg({d}) in the chain",
                tuple(chain))
            yield Constraint(
                "local-dimensionality", Or(_none_is(chain, 20 + d), _any_is(chain, 10 + d)),
                f"chain {_chain_text(chain)}: mapWrg({d}) needs a mapLcl({d}) in the chain",
                tuple(chain))


def local_hierarchy(t: MapNestingTree) -> Iterator[Constraint]:
    """(6) No mapWrg(d) inside mapLcl(d)."""
    for m in t.concrete():
        for inner in t.nested(m):
            yield Constraint(
                "local-hierarchy",
                Not(And(eq(level(m), 1), eq(level(inner), 2), eq(dim(inner), dim(m)))),
                f"map {inner} must not be mapWrg(d) inside map {m} as mapLcl(d)", (m, inner))


def local_in_group(t: MapNestingTree) -> Iterator[Constraint]:
    """(6) Every mapLcl(d) is nested in a mapWrg(d) (without one, the kernel is a single
    work-group: correct, but it uses one compute unit)."""
    for m in t.concrete():
        outer = t.outer(m)
        for d in range(3):
            yield Constraint(
                "local-in-group", Or(ne(c(m), 10 + d), _any_is(outer, 20 + d)),
                f"map {m} as mapLcl({d}) must be nested in a mapWrg({d})", (m, *outer))


def exhaustive_indexing(t: MapNestingTree) -> Iterator[Constraint]:
    """(7) A parallel dimension used in one chain is used in every chain of the same kernel
    (each domain): otherwise every thread of that dimension runs the other chain and they
    all write the same elements (a data race). Chains in different kernels (top-level maps
    separated by a kernel boundary) are independent."""
    chains = t.chains()
    kernel = t.kernels()
    for a in chains:
        for b in chains:
            if a == b or kernel[a[0]] != kernel[b[0]]:
                continue
            only_a = [m for m in a if m not in b]
            if not only_a:
                continue
            for lv, dom in _DOMAINS.items():
                for d in range(3):
                    code = lv * 10 + d
                    yield Constraint(
                        "exhaustive-indexing",
                        Or(_none_is(only_a, code), _any_is(b, code)),
                        f"{dom} dimension {d} used in chain {_chain_text(a)} must also be used "
                        f"in chain {_chain_text(b)}", tuple(dict.fromkeys(only_a + list(b))))


def shared_dimension(t: MapNestingTree) -> Iterator[Constraint]:
    """Added (the lowering's parallel-nesting check, generalising (3) and (6)): nested
    parallel maps use different dimensions, except mapLcl(d) inside mapWrg(d)."""
    for m in t.concrete():
        for inner in t.nested(m):
            yield Constraint(
                "shared-dimension",
                Or(level(m) < 1, level(inner) < 1, ne(dim(m), dim(inner)),
                   And(eq(level(m), 2), eq(level(inner), 1))),
                f"maps {m} and {inner} (nested in {m}) are parallel in different dimensions, "
                f"unless {m} is mapWrg(d) and {inner} mapLcl(d)", (m, inner))


def sequential_fusion(t: MapNestingTree) -> Iterator[Constraint]:
    """(8) Perfectly nested maps are not both sequential: fuse or parallelise them."""
    for m in t.concrete():
        for inner in t.maps[m].children:
            if t.perfectly_nested_in(inner, m):
                yield Constraint(
                    "sequential-fusion", Not(And(eq(c(m), 0), eq(c(inner), 0))),
                    f"map {inner} is perfectly nested in map {m}: they are not both "
                    "sequential (fuse them instead)", (m, inner))


def no_global_with_groups(t: MapNestingTree) -> Iterator[Constraint]:
    """A kernel uses either mapGlb or mapWrg/mapLcl, never both (kernels separated by a
    kernel boundary are independent)."""
    for a, b in combinations(t.concrete(), 2):
        if not t.same_kernel(a, b):
            continue
        yield Constraint(
            "global-xor-groups",
            And(Not(And(eq(level(a), 3), level(b) >= 1, level(b) <= 2)),
                Not(And(eq(level(b), 3), level(a) >= 1, level(a) <= 2))),
            f"maps {a} and {b}: mapGlb is not mixed with mapWrg/mapLcl in one kernel", (a, b))


def cross_thread_dependency(t: MapNestingTree) -> Iterator[Constraint]:
    """Added: sibling maps that exchange data through memory are synchronisable only by a
    work-group barrier, so neither they nor their nested maps are mapWrg or mapGlb.

    Counter-example that rules (1)-(8) accept: CC'22 Listing 3 with A=mapGlb(1),
    B=mapGlb(0), C=mapGlb(0), D=mapSeq: thread t of B reads element t that thread t/s1
    of C wrote, with no barrier possible across global threads (CC'22 Table 1, M2).
    Exceptions: a consumer reading the producer's output element for element with the
    same code (each thread reads what it wrote), and top-level maps exchanging data through
    global memory: the lowering puts them in consecutive kernels, and the kernel boundary is
    the global barrier.
    """
    for cons in t.concrete():
        for prod in sorted(t.maps[cons].depends_on):
            if t.kernel_boundary(prod, cons):
                continue
            nested = t.nested(prod) + t.nested(cons)
            if prod in t.maps[cons].identity_from:
                yield Constraint(
                    "cross-thread-dependency",
                    Or(eq(c(prod), c(cons)), And(c(prod) < 20, c(cons) < 20)),
                    f"map {cons} reads what map {prod} wrote element for element: the same "
                    "mapping, or both within one work-group", (prod, cons))
                which = nested
            else:
                which = [prod, cons, *nested]
            for x in which:
                yield Constraint(
                    "cross-thread-dependency", c(x) < 20,
                    f"map {cons} reads what map {prod} wrote through memory: map {x} must not "
                    "be mapWrg or mapGlb (no barrier exists across work-groups)",
                    tuple(dict.fromkeys((prod, cons, x))))


RULES: tuple[Rule, ...] = (
    Rule("private-memory", "Private memory scoping", "CC'22 rule (1)", private_memory),
    Rule("local-memory", "Shared memory scoping", "CC'22 rule (2)", local_memory),
    Rule("duplicate-scheduling", "Duplicate scheduling", "CC'22 rule (3)",
         duplicate_scheduling),
    Rule("local-dimensionality", "Local thread indexing dimensionality", "CC'22 rules (4)-(5)",
         local_dimensionality, "heuristic"),
    Rule("local-hierarchy", "Local thread indexing hierarchy", "CC'22 rule (6)",
         local_hierarchy),
    Rule("local-in-group", "mapLcl under a mapWrg (no single-work-group kernels)",
         "CC'22 rule (6)", local_in_group, "heuristic"),
    Rule("exhaustive-indexing", "Exhaustive thread indexing", "CC'22 rule (7)",
         exhaustive_indexing),
    Rule("shared-dimension", "One dimension per nest level", "added (lowering check)",
         shared_dimension),
    Rule("sequential-fusion", "Sequential map fusion heuristic", "CC'22 rule (8)",
         sequential_fusion, "heuristic"),
    Rule("global-xor-groups", "No mapGlb with mapWrg/mapLcl",
         "added (one indexing style per kernel)",
         no_global_with_groups, "heuristic"),
    Rule("cross-thread-dependency", "Producer/consumer across threads",
         "added (hole found by testing)", cross_thread_dependency),
)
RULE_NAMES = tuple(r.name for r in RULES)
RULE_KIND = {r.name: r.kind for r in RULES}
VALIDITY_RULES = tuple(r.name for r in RULES if r.kind == "validity")
HEURISTIC_RULES = tuple(r.name for r in RULES if r.kind == "heuristic")


def rule_kind(name: str) -> str:
    """``validity`` or ``heuristic`` for a rule name."""
    return RULE_KIND[name]


def generate(t: MapNestingTree, fusion: str = "always",
             heuristics: bool = True) -> list[Constraint]:
    """Every constraint instance for the tree, rule by rule: the validity rules, and the
    heuristic rules when ``heuristics`` (rule 8 only when fusion is 'always')."""
    if fusion not in FUSION_STRATEGIES:
        raise ValueError(f"fusion must be one of {FUSION_STRATEGIES}, got {fusion!r}")
    out: list[Constraint] = []
    for r in RULES:
        if r.kind == "heuristic" and not heuristics:
            continue
        if r.name == "sequential-fusion" and fusion != "always":
            continue
        out.extend(r.generate(t))
    return out
