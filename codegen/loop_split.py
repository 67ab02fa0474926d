"""Splitting a sequential loop whose indices divide its counter into a nest of two.

A reduction over a flattened window (``reduce(f)(z, zip(joinND(2) $ window, ...))``)
runs one loop ``r`` over ``KH*KW*C`` elements whose indices recover the window's row and
column with ``r / C`` and ``r % C`` (and its padding tests with them), a division per
element. Where such a period ``p`` (``C``, in the loop's own steps: ``C / w`` for a loop
in ``w`` lanes) divides the trip count, the loop is rewritten as

    for hi in 0..n/p:  for lo in 0..p:  (body with r = hi * p + lo)

which runs the same iterations in the same order (every result is the same, bit for
bit), while the inner loop's indices lose the division: ``(hi*p + lo) / p`` is ``hi``
(the symbolic simplifier knows ``0 <= lo < p``), a test on the window's row is invariant
in the inner loop, and a contiguous row is read by consecutive vector loads. The smallest
period found is used (the innermost dimension of the flattened window).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from codegen import views as vw
from codegen.stmt import Loop, Store, walk_stmts
from codegen.views import Call, Const, Leaf, Mem, Sel, VecMem
from ir.sym import Expr, Rel, Var, sym


def split_flat_loops(stmts: list, fresh: Callable[[str], str]) -> None:
    """Rewrites, in place, every sequential loop of ``stmts`` whose indices divide its
    counter by a period dividing its trip count (see the module docstring); ``fresh``
    names the new counters."""
    k = 0
    while k < len(stmts):
        s = stmts[k]
        if isinstance(s, Loop):
            split_flat_loops(s.body, fresh)
            if s.kind == "seq" and s.n > 1:
                p = _period(s)
                if p is not None:
                    stmts[k] = _split(s, p, fresh)
        k += 1


def _exprs(lp: Loop) -> Iterator[Expr]:
    """Every index and condition side the loop's body computes."""
    for s in walk_stmts(lp.body):
        if not isinstance(s, Store):
            continue
        yield s.dest.idx
        for c in s.conds:
            yield c.lhs
            yield c.rhs
        yield from _leaf_exprs(s.value)


def _leaf_exprs(v: Leaf) -> Iterator[Expr]:
    if isinstance(v, (Mem, VecMem)):
        yield v.idx
    elif isinstance(v, Call):
        for a in v.args:
            yield from _leaf_exprs(a)
    elif isinstance(v, Sel):
        for c in v.conds:
            yield c.lhs
            yield c.rhs
        yield from _leaf_exprs(v.then)
        yield from _leaf_exprs(v.other)


def periods(t: tuple, name: str) -> Iterator[int]:
    """``p`` for each ``(c * name) / D`` or ``(c * name) % D`` in the expression tree
    ``t`` (``c`` dividing ``D``): the loop steps after which the quotient grows."""
    if not isinstance(t, tuple) or not t:
        return
    if t[0] in ("floordiv", "mod") and len(t) == 3 and t[2][0] == "int":
        c = _coefficient(t[1], name)
        d = t[2][1]
        if c and d > 0 and d % c == 0:
            yield d // c
    for x in t[1:]:
        if isinstance(x, tuple):
            if x and isinstance(x[0], str):
                yield from periods(x, name)
            else:
                for y in x:
                    yield from periods(y, name)


def _coefficient(t: tuple, name: str) -> int | None:
    """``c`` where the tree ``t`` is ``name`` or ``c * name``, else None."""
    if t == ("var", name):
        return 1
    if t[0] == "mul" and len(t[1]) == 2:
        a, b = t[1]
        if a[0] == "int" and b == ("var", name) and a[1] > 0:
            return a[1]
    return None


def _period(lp: Loop) -> int | None:
    """The smallest period of the loop's counter in its indices that divides its trip
    count (and leaves an inner loop of more than one step), or None."""
    found: set[int] = set()
    for e in _exprs(lp):
        if lp.name in e.free_vars():
            found.update(periods(e.to_tree(), lp.name))
    ok = [p for p in found if 1 < p < lp.n and lp.n % p == 0]
    return min(ok, default=None)


def _split(lp: Loop, p: int, fresh: Callable[[str], str]) -> Loop:
    hi = vw.register_var(Var(fresh(f"{lp.name}_hi"), 0, lp.n // p - 1))
    lo = vw.register_var(Var(fresh(f"{lp.name}_lo"), 0, p - 1))
    at = {lp.name: hi * p + lo}

    def e(x: Expr) -> Expr:
        return vw.normalize(x.subs(at)) if lp.name in x.free_vars() else x

    def rel(r: Rel) -> Rel:
        return Rel(r.op, e(r.lhs), e(r.rhs)) if lp.name in r.free_vars() else r

    def leaf(v: Leaf) -> Leaf:
        if isinstance(v, Mem):
            return Mem(v.buf, e(v.idx), v.type)
        if isinstance(v, VecMem):
            return VecMem(v.buf, e(v.idx), v.type)
        if isinstance(v, Call):
            return Call(v.fname, tuple(leaf(a) for a in v.args), v.type)
        if isinstance(v, Sel):
            return _settled(Sel(tuple(rel(c) for c in v.conds), leaf(v.then), leaf(v.other)))
        return v

    for s in walk_stmts(lp.body):
        if isinstance(s, Store):
            s.dest = leaf(s.dest)  # type: ignore[assignment]  # a Mem stays a Mem
            s.value = leaf(s.value)
            s.conds = tuple(rel(c) for c in s.conds)
    outer = Loop("seq", None, hi, lp.n // p, lp.label, lp.what, lp.is_map, [], lp.parent,
                 n_sym=None if lp.n_sym is None else lp.n_sym // p, block=lp.block)
    inner = Loop("seq", None, lo, p, lp.label, f"{lp.what}, {p} at a time", lp.is_map,
                 lp.body, outer, n_sym=sym(p), block=lp.block)
    for s in lp.body:
        s.parent = inner
    outer.body = [inner]
    return outer


def _settled(v: Sel) -> Sel:
    """A padded vector read ``c ? vload : (floatN)(c0 ? x0 : z, ...)`` whose lanes' tests
    all became ``c`` itself (the split made them invariant in the inner loop): where ``c``
    fails, every lane is ``z``, so the lane-by-lane fallback is the constant ``z``."""
    other = v.other
    if not (isinstance(other, Call) and other.fname.startswith("(") and other.args
            and isinstance(v.then, VecMem)):
        return v
    outer = set(v.conds)
    zs = []
    for a in other.args:
        if not (isinstance(a, Sel) and set(a.conds) == outer and isinstance(a.other, Const)):
            return v
        zs.append(a.other.value)
    if len(set(zs)) != 1:
        return v
    return Sel(v.conds, v.then, Const(zs[0], other.type))
