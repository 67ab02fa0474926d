"""Random well-typed programs with nested and sibling maps, for witness tests.

``random_program(seed)`` builds ``[float]N -> [float]N`` programs out of
length-preserving pieces: a leaf ``map`` of a user function (sometimes written
to local or private memory), tiling ``join o map(g) o split(s)`` (nesting),
transposed tiling ``join o transpose o map(g) o transpose o split(s)`` (a
non-identity view between producer and consumer), and composition (siblings).
Split sizes are symbols ``s0, s1, ...``; ``sizes_for(program)`` gives concrete
values that satisfy every split.
"""

from __future__ import annotations

import random

from ir.builders import (
    add,
    compose,
    join,
    lam,
    map_,
    mult,
    param,
    split,
    to_global,
    to_local,
    to_private,
    transpose,
)
from ir.nodes import FunCall, FunDecl, Lambda, Literal, walk
from ir.types import Float, array

_ANNOTATIONS = (None, None, "global", "local", "private")


class _Gen:
    def __init__(self, rng: random.Random, max_maps: int, memory: bool):
        self.rng = rng
        self.maps_left = max_maps
        self.memory = memory
        self.n_splits = 0

    def leaf(self) -> FunDecl:
        self.maps_left -= 1
        k = self.rng.choice((1.5, 2.0, -0.5, 3.0))
        op = self.rng.choice((add, mult))
        f: FunDecl = lam(lambda e: FunCall(op, (e, Literal(k, Float))))
        ann = self.rng.choice(_ANNOTATIONS) if self.memory else None
        if ann == "global":
            f = to_global(f)
        elif ann == "local":
            f = to_local(f)
        elif ann == "private":
            f = to_private(f)
        return map_(f)

    def gen(self, depth: int) -> FunDecl:
        r = self.rng.random()
        if self.maps_left >= 2 and r < 0.3:
            a = self.gen(depth)
            if self.maps_left >= 1:
                return compose(self.gen(depth), a)
            return a  # the budget is spent
        if self.maps_left >= 2 and depth < 3 and r < 0.75:
            s = f"s{self.n_splits}"
            self.n_splits += 1
            self.maps_left -= 1
            inner = self.gen(depth + 1)
            if self.rng.random() < 0.35:
                return compose(join(), transpose(), map_(inner), transpose(), split(s))
            return compose(join(), map_(inner), split(s))
        return self.leaf()


def random_program(seed: int, max_maps: int = 7, memory: bool = True) -> Lambda:
    """A random program ``X: [float]N -> [float]N`` with at most ``max_maps`` maps."""
    rng = random.Random(seed)
    g = _Gen(rng, max(1, max_maps), memory)
    f = g.gen(0)
    X = param("X", array(Float, "N"))
    return Lambda((X,), FunCall(f, (X,)))


def split_names(program) -> list[str]:
    out = []
    for n in walk(program):
        from ir.nodes import Split

        if isinstance(n, Split):
            out.extend(sorted(n.chunk.free_vars()))
    return sorted(set(out), key=lambda s: int(s[1:]))


def sizes_for(program, max_n: int = 256) -> dict[str, int]:
    """Concrete sizes satisfying every algorithmic constraint: the smallest ``N`` (a power
    of two up to ``max_n``) with split sizes from {2, 4, 8} that works."""
    import itertools

    from ir.typecheck import typecheck

    names = split_names(program)
    rels = [c.rel for c in typecheck(program).constraints]
    n = 4
    while n <= max_n:
        for vals in itertools.product((2, 4, 8), repeat=len(names)):
            env = {"N": n, **dict(zip(names, vals))}
            if all(r.evaluate(env) for r in rels):
                return env
        n *= 2
    raise ValueError(f"no sizes up to N={max_n} satisfy the program's splits")
