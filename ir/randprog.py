"""Random well-typed programs with nested and sibling maps, for witness tests.

``random_program(seed)`` builds ``[float]N -> [float]N`` programs out of
length-preserving pieces: a leaf ``map`` of a user function (sometimes written
to local or private memory), tiling ``join o map(g) o split(s)`` (nesting),
transposed tiling ``join o transpose o map(g) o transpose o split(s)`` (a
non-identity view between producer and consumer), and composition (siblings).
Split sizes are symbols ``s0, s1, ...``; ``sizes_for(program)`` gives concrete
values that satisfy every split.

``extended=True`` (the oracle's programs; the default keeps every seed's program as it
was) adds local tiles (``join o map(g o map(toLocal(id))) o split(s)``), reductions into
private accumulators under (possibly nested) maps, as the program's output or as a first
stage, and more top-level pipelines (compositions at the top, which the lowering splits
into consecutive kernels).

``wide=True`` (with ``extended``; the oracle's programs since issue 24) adds the shapes of
a held-out program the rules once misjudged: a 1-D stencil over tiles copied to local
memory (``join o map(join o map(\\w -> u $ reduce(f)(init, w)) o slide(k, 1) o
map(toLocal(id))) o slideStrict(s + k - 1, s) o pad(l, r)``: sibling chains under the
tile map of different depths, local memory written element by element and read through
windows) and maps of one iteration ``u`` over a reduction's one-element result (here and
after the reductions above), whose parallel codes distribute nothing.

``tiles=True`` (with ``wide``; the oracle's programs since issue 24's second run) adds 2-D
tiles in local memory at the top (``join o join o map(T) o split(r) o split(s)``, with
``T = [transpose o] map(map(g)) o [transpose o] map(map(toLocal(f)))``): sibling chains of
two maps each under the tile map, local memory written row by row and read (most often)
column by column, so each chain may distribute the tile's two dimensions differently. It
needs five maps (``max_maps >= 5``); without ``tiles`` every seed gives the program
``wide`` gave.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ir.builders import (
    add,
    compose,
    join,
    lam,
    map_,
    mult,
    pad,
    param,
    slide,
    split,
    to_global,
    to_local,
    to_private,
    transpose,
)
from ir.errors import NoSizesError
from ir.nodes import ExprNode, FunCall, FunDecl, Id, Lambda, Literal, Reduce, walk
from ir.sym import sym
from ir.types import Float, array

_ANNOTATIONS = (None, None, "global", "local", "private")


def _annotated(f: FunDecl, space: str | None) -> FunDecl:
    """``f`` writing its result to ``space`` (``global``, ``local``, ``private``), or
    unchanged (None)."""
    wrap = {"global": to_global, "local": to_local, "private": to_private}.get(space or "")
    return f if wrap is None else wrap(f)


@dataclass
class _Gen:
    rng: random.Random
    maps_left: int  # maps the program may still get
    memory: bool
    extended: bool = False
    wide: bool = False
    tiles: bool = False
    n_splits: int = 0

    def split_name(self) -> str:
        s = f"s{self.n_splits}"
        self.n_splits += 1
        return s

    def reduction(self) -> FunDecl:
        """``join o map(\\w -> reduce(+)(init, w)) o split(s)``, sometimes inside one more
        tiling map: a private accumulator per output element under parallel maps."""
        self.maps_left -= 1
        init: ExprNode = Literal(0.0, Float)
        if self.rng.random() < 0.6:
            init = FunCall(to_private(Id()), (init,))
        k = self.rng.choice((1.5, 2.0, -0.5))
        red = Reduce(lam(lambda acc, x: FunCall(add, (acc, FunCall(mult, (x, Literal(
            k, Float))))), arity=2), "reduce")
        body: FunDecl = self.reduced(red, init)
        f = compose(join(), map_(body), split(self.split_name()))
        if self.maps_left >= 1 and self.rng.random() < 0.5:
            self.maps_left -= 1
            f = compose(join(), map_(f), split(self.split_name()))
        return f

    def reduced(self, red: Reduce, init: ExprNode) -> FunDecl:
        """``\\w -> reduce(..)(init, w)``, with ``wide`` sometimes followed by a map of one
        iteration over the reduction's ``[float]1`` result (when the budget allows)."""
        if self.wide and self.maps_left >= 1 and self.rng.random() < 0.6:
            self.maps_left -= 1
            u = self.unit_fun()
            return lam(lambda w: FunCall(map_(u), (FunCall(red, (init, w)),)))
        return lam(lambda w: FunCall(red, (init, w)))

    def unit_fun(self) -> FunDecl:
        """The function of a map of one iteration: a scaling, sometimes written to global,
        local or private memory."""
        k = self.rng.choice((2.0, -0.5, 3.0))
        f: FunDecl = lam(lambda e: FunCall(mult, (e, Literal(k, Float))))
        return _annotated(f, self.rng.choice((None, None, "global", "local", "private")))

    def stencil_tile(self) -> FunDecl:
        """``join o map(join o map(\\w -> [u $] reduce(+)(init, w)) o slide(k, 1) o
        map(toLocal(id))) o slideStrict(s + k - 1, s) o pad(l, r)``: a 1-D k-point stencil
        over tiles of ``s`` outputs, each tile (with its halo) copied to local memory and
        read through windows (three maps, four with the map of one iteration)."""
        self.maps_left -= 3
        k = self.rng.choice((2, 3, 3))
        left = (k - 1) // 2 if self.rng.random() < 0.7 else 0
        s = sym(self.split_name())
        init: ExprNode = Literal(0.0, Float)
        if self.rng.random() < 0.4:
            init = FunCall(to_private(Id()), (init,))
        w = self.rng.choice((0.5, 1.0 / 3.0, 2.0))
        red = Reduce(lam(lambda acc, x: FunCall(add, (acc, FunCall(mult, (x, Literal(
            w, Float))))), arity=2), "reduce")
        window = map_(self.reduced(red, init))
        copy = map_(to_local(Id()) if self.rng.random() < 0.7 else to_local(
            lam(lambda e: FunCall(mult, (e, Literal(2.0, Float))))))
        tile = compose(join(), window, slide(k, 1), copy)
        return compose(join(), map_(tile), slide(s + (k - 1), s, strict=True),
                       pad(left, k - 1 - left))

    def tile2d(self) -> FunDecl:
        """``join o join o map(T) o split(r) o split(s)``, ``T = [transpose o] map(map(g))
        o [transpose o] map(map(toLocal(f)))``: an r x s tile written to local memory row by
        row (maps C, E) and read by sibling maps (B, D), most often transposed (five maps)."""
        self.maps_left -= 5
        s, r = self.split_name(), self.split_name()
        k = self.rng.choice((2.0, -0.5, 1.5))
        f: FunDecl = Id() if self.rng.random() < 0.6 else lam(
            lambda e: FunCall(mult, (e, Literal(k, Float))))
        copy = map_(map_(to_local(f)))
        g: FunDecl = lam(lambda e: FunCall(add, (e, Literal(k, Float))))
        if self.rng.random() < 0.4:
            g = to_global(g)
        work = map_(map_(g))
        tile = (compose(transpose(), work, transpose(), copy) if self.rng.random() < 0.7
                else compose(work, copy))
        return compose(join(), join(), map_(tile), split(r), split(s))

    def local_tile(self, depth: int) -> FunDecl:
        """``join o map(g o map(toLocal(id))) o split(s)``: a tile copied to local memory,
        then processed by ``g`` (its threads read what others wrote)."""
        self.maps_left -= 2
        copy = map_(to_local(Id()))
        inner = self.gen(depth + 1) if self.maps_left >= 1 else map_(lam(lambda e: e))
        return compose(join(), map_(compose(inner, copy)), split(self.split_name()))

    def leaf(self) -> FunDecl:
        self.maps_left -= 1
        k = self.rng.choice((1.5, 2.0, -0.5, 3.0))
        op = self.rng.choice((add, mult))
        f: FunDecl = lam(lambda e: FunCall(op, (e, Literal(k, Float))))
        return map_(_annotated(f, self.rng.choice(_ANNOTATIONS) if self.memory else None))

    def gen(self, depth: int) -> FunDecl:
        if self.tiles and self.maps_left >= 5 and depth == 0 and self.rng.random() < 0.7:
            return self.tile2d()
        r = self.rng.random()
        if self.wide and self.maps_left >= 3 and depth < 2 and r < 0.3:
            return self.stencil_tile()
        if self.wide:
            r = self.rng.random()
        if self.extended and self.maps_left >= 3 and depth < 3 and r < 0.2:
            return self.local_tile(depth)
        if self.extended:
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


def random_program(seed: int, max_maps: int = 7, memory: bool = True,
                   extended: bool = False, wide: bool = False, tiles: bool = False) -> Lambda:
    """A random program ``X: [float]N -> [float]N`` with at most ``max_maps`` maps
    (``extended``: also reductions, so the output may be shorter; ``wide`` (implies
    ``extended``): also stencils over local tiles and maps of one iteration; ``tiles``
    (implies ``wide``): also 2-D local tiles read transposed; see the module doc). Without
    ``wide`` every seed gives the program it always gave, without ``tiles`` the one
    ``wide`` gave."""
    rng = random.Random(seed)
    wide = wide or tiles
    extended = extended or wide
    g = _Gen(rng, max(1, max_maps), memory, extended, wide, tiles)
    if extended:
        red = None
        r = rng.random()
        if r < 0.5:
            red = g.reduction()
        f = g.gen(0) if g.maps_left >= 1 else None
        if red is not None and f is not None:
            f = compose(red, f) if rng.random() < 0.6 else compose(f, red)
        elif red is not None:
            f = red
        assert f is not None  # without a reduction, maps_left >= 1 and gen ran
        if g.maps_left >= 1 and rng.random() < 0.3:
            f = compose(g.gen(0), f)  # one more kernel-level stage
        X = param("X", array(Float, "N"))
        return Lambda((X,), FunCall(f, (X,)))
    f = g.gen(0)
    X = param("X", array(Float, "N"))
    return Lambda((X,), FunCall(f, (X,)))


def split_names(program) -> list[str]:
    """The tuning sizes ``s0, s1, ...`` of the program's splits and slides."""
    from ir.nodes import Slide, Split

    out = []
    for n in walk(program):
        if isinstance(n, Split):
            out.extend(sorted(n.chunk.free_vars()))
        elif isinstance(n, Slide):
            out.extend(sorted(n.size.free_vars() | n.step.free_vars()))
    return sorted(set(out), key=lambda s: int(s[1:]))


def sizes_for(program, max_n: int = 1024) -> dict[str, int]:
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
    raise NoSizesError(f"no sizes up to N={max_n} satisfy the program's splits; "
                       "give a larger max_n")


def size_points(program, max_n: int = 1024) -> tuple[dict[str, int], dict[str, int]]:
    """Two size points for oracle runs: :func:`sizes_for`, and the same split sizes with a
    length whose loop counts carry a factor 3 (so they do not divide power-of-two
    work-group sizes), when the program's constraints allow one."""
    from ir.typecheck import typecheck

    first = sizes_for(program, max_n)
    rels = [c.rel for c in typecheck(program).constraints]
    n = first.get("N")
    if n is None:
        return first, dict(first)
    for cand in (n * 3 // 2, n * 3 // 4, n * 3):
        env = {**first, "N": cand}
        if cand != n and cand > 0 and all(r.evaluate(env) for r in rels):
            return first, env
    return first, dict(first)
