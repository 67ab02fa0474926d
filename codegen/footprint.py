"""The bytes a kernel brings into a core's cache: its global reads, with the reuse the cache
keeps and the re-reads it cannot.

A CPU runs a kernel's work-items one after another on each core (dimension 0 fastest),
each work-item its loops in order. A global read inside a loop whose variable its index
does not use reads the same data again in every iteration of that loop: the cache keeps
it if the data one iteration of the loop touches (all reads, every loop inside it) fits,
and it is fetched again otherwise. A convolution whose work-items each read a slice of
the weights, eight slices per row of work-items and one row per tile of pixels, reads
every slice again for each of 49 tiles when eight slices (9.4 MB) outgrow a core's 2 MB
cache: 460 MB where the layer's buffers hold 13 MB.

``cache_bytes`` is read off the statement tree in the program's symbolic sizes (the tile
sizes of a tuning space stay parameters), for the cost prior (``mapper.explore.prior``).
For each global read, from the innermost loop out (a work-item's own loops, then its
parallel loops, dimension 0 innermost), each loop multiplies the elements it reads by its
iterations where the read's index uses its variable, and where it does not, only where one
of its iterations touches more than the cache (``cache`` bytes: the device's local memory
size, which PoCL sets to a core's L2 cache). A loop in lanes or unrolled as a register
block never re-reads (its iterations run together). The footprint of an iteration counts,
per buffer, the elements its reads can touch (capped at the buffer's size).

Loops whose variables a read's index uses with proportional coefficients read overlapping
elements (a stencil's window and its pixel: ``in[y + ky]``; stride 2: ``in[2 y + ky]``):
such a group touches at most the span of the index over them, ``1 + sum of r (n - 1)``
(``r`` each loop's coefficient over the smallest, ``n`` its iterations), where that is
fewer than the product of their iterations. A window flattened into one loop (``r // 3``,
``r % 3``) is split into its two loops first; a variable the index uses otherwise (inside
a division or remainder) counts its iterations, and a group holds at most one loop whose
iterations are not a constant (:func:`_distinct`). The count is an upper bound: a 3 x 3
window over a row of 28 pixels touches 30 elements, not 84. Overlap is taken as kept by
the cache wherever it occurs (across the iterations of a loop that re-reads its data
too): only the loops a read does not use add re-reads.

A read of a vector of ``asVector``'s width counts its lanes as :data:`LANES`, a size that
``mapper.explore.prior.feature_values`` binds to the candidate's vector width (the
lowering sees the vectors' width only at one configuration).
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from codegen.buffers import Buf
from codegen.loop_split import periods
from codegen.program import ITEM_BYTES
from codegen.stmt import Loop, Store, leaves_of, walk_stmts
from codegen.views import Mem, VecMem
from ir.sym import Cst, Expr, Var
from ir.sym_expr import smax, smin

LANES = "_vector_lanes_"  # the size standing for the lanes of an asVector read


def _extent(lp: Loop) -> Expr:
    """A loop's iterations in all (a loop in lanes: its elements; a parallel loop: its
    work-items or groups in its dimension), at least 1. Kept as one factor (a ``max``):
    a product of sums would be multiplied out, and the formula grow with every loop."""
    return smax(lp.n_sym if lp.n_sym is not None else Cst(lp.n), Cst(1))


def _registers(lp: Loop) -> bool:
    """A loop whose iterations run together (in lanes, or unrolled as a register block)."""
    return lp.kind == "seq" and (lp.width_sym is not None or lp.width > 1 or lp.block > 0)


def _nest(s: Store) -> list[Loop]:
    """The loops around ``s`` in the order a core runs them, innermost first: the work-item's
    sequential loops as written, then its parallel loops by dimension (dimension 0
    innermost, a group's local loop inside its group loop)."""
    seq: list[Loop] = []
    par: list[Loop] = []
    lp = s.parent
    while lp is not None:
        (seq if lp.kind == "seq" else par).append(lp)
        lp = lp.parent
    par.sort(key=lambda p: (p.dim if p.dim is not None else 0, p.kind == "wrg"))
    return seq + par


def _reads(stmts: list) -> Iterator[tuple[Mem | VecMem, list[Loop]]]:
    """Every global read with its loop nest (:func:`_nest`)."""
    for s in walk_stmts(stmts):
        if isinstance(s, Store):
            nest = _nest(s)
            for leaf in leaves_of(s.value):
                if leaf.buf.space == "global":
                    yield leaf, nest


def _lanes(leaf: Mem | VecMem, nest: list[Loop]) -> Expr:
    """The elements of one read: an asVector read's lanes, 1 for a scalar or for a vector
    whose lanes a loop in lanes counts."""
    if isinstance(leaf, VecMem) and not any(
            lp.var.name in leaf.idx.free_vars() and _registers(lp) and lp.width_sym is not None
            for lp in nest):
        return Var(LANES)
    return Cst(1)


def _step(idx: Expr, var: Expr, loop_vars: frozenset[str]) -> Expr | None:
    """The step of ``idx`` per step of ``var`` where ``idx`` is linear in it with a step
    free of every loop variable (a symbolic size may be in it), else None."""
    step = idx.subs({var.name: var + 1}) - idx
    return None if step.free_vars() & loop_vars else step


def _ratio(a: Expr, b: Expr) -> Fraction | None:
    """``|a / b|`` where it is a constant (the same symbolic part, or two integers)."""
    if a.is_const and b.is_const:
        return Fraction(abs(a.as_int()), abs(b.as_int())) if b.as_int() else None
    if a == b or a == -b:
        return Fraction(1)
    return None


def _axes(idx: Expr, loops: list[Loop]) -> tuple[Expr, list[tuple[Expr, Expr]]]:
    """``idx`` and its loops as (variable, iterations), a loop whose counter ``idx``
    divides or takes a remainder of with one period ``q`` (``codegen.loop_split.periods``;
    a flattened window: ``r // 3``, ``r % 3``) split into two, ``r = q a + b``, so that
    each may be linear."""
    tree = idx.to_tree()
    axes: list[tuple[Expr, Expr]] = []
    for lp in loops:
        qs = set(periods(tree, lp.var.name))
        if len(qs) != 1 or min(qs) < 2:
            axes.append((lp.var, _extent(lp)))
            continue
        q = min(qs)
        hi, lo = Var(f"{lp.var.name}_hi_", 0), Var(f"{lp.var.name}_lo_", 0, q - 1)
        idx = idx.subs({lp.var.name: hi * q + lo})
        axes += [(hi, (_extent(lp) + (q - 1)) // q), (lo, smin(_extent(lp), Cst(q)))]
    return idx, axes


def _join(groups: list[list], step: Expr, ext: Expr) -> bool:
    """Adds the loop (``step``, ``ext``) to the group of ``groups`` whose steps are the
    nearest integer multiples of its own; False where none is."""
    best: tuple[Fraction, list, bool] | None = None
    for g in groups:
        up, down = _ratio(step, g[0]), _ratio(g[0], step)
        for r, finer in ((up, False), (down, True)):
            if r is not None and r.denominator == 1 and (best is None or r < best[0]):
                best = (r, g, finer)
    if best is None:
        return False
    r, g, finer = best
    if finer:  # a finer step than the group's: the new base
        g[0], g[1] = step, [(q * r, x) for q, x in g[1]] + [(Fraction(1), ext)]
    else:
        g[1].append((r, ext))
    return True


def _distinct(idx: Expr, loops: list[Loop], loop_vars: frozenset[str]) -> Expr:
    """The elements ``idx`` can take over ``loops`` (those its index uses): the product of
    their iterations, with each group of loops whose steps are integer multiples of one
    another counted by its span where that is fewer (see the module docstring). A group
    holds at most one loop whose iterations are not a constant (a window's loops join the
    loop over pixels whose step is nearest theirs): the lowering writes the index at one
    configuration of the tuning parameters, and two loops that a parameter sizes may have
    equal steps there only (a block of ``u`` elements of step 1 beside the loop over
    blocks, whose step is ``u``)."""
    idx, axes = _axes(idx, loops)
    names = loop_vars | frozenset(v.name for v, _ in axes)
    n: Expr = Cst(1)
    groups: list[list] = []  # [the smallest step, [(step / smallest, iterations)]]
    fixed: list[tuple[Expr, Expr]] = []
    for var, ext in axes:
        step = _step(idx, var, names)
        if step is None or step == 0:
            n = n * ext
        elif ext.is_const:
            fixed.append((step, ext))
        else:
            groups.append([step, [(Fraction(1), ext)]])
    for step, ext in fixed:
        if not _join(groups, step, ext):
            groups.append([step, [(Fraction(1), ext)]])
    for _, members in groups:
        prod: Expr = Cst(1)
        span: Expr = Cst(1)
        for r, ext in members:
            prod = prod * ext
            span = span + Cst(int(r)) * (ext - Cst(1))
        n = n * (prod if len(members) == 1 else smin(prod, span))
    return n


def _cap(buf: Buf) -> Expr:
    """The buffer's size in scalars (symbolic where the lowering knows it)."""
    n = buf.sym_count if buf.sym_count is not None else Cst(buf.count)
    return n * buf.lanes if buf.lanes is not None else n


def _item(buf: Buf) -> int:
    return ITEM_BYTES.get(buf.dtype.rstrip("0123456789"), 4)


def cache_features(stmts: list, cache: int) -> dict[str, Expr]:
    """``cache_bytes`` (see the module docstring) of one kernel's statements for a cache
    of ``cache`` bytes; {} where the kernel reads no global buffer or ``cache`` is 0."""
    reads = list(_reads(stmts))
    if not reads or cache <= 0:
        return {}
    loop_vars = frozenset(lp.var.name for _, nest in reads for lp in nest)
    footprints: dict[int, Expr] = {}  # id(loop) -> bytes one iteration touches

    def footprint(lp: Loop) -> Expr:
        if id(lp) in footprints:
            return footprints[id(lp)]
        per_buf: dict[int, tuple[Buf, Expr]] = {}
        for leaf, nest in reads:
            if not any(x is lp for x in nest):
                continue
            used = leaf.idx.free_vars()
            inner = []
            for x in nest:
                if x is lp:
                    break
                if x.var.name in used:
                    inner.append(x)
            n = _lanes(leaf, nest) * _distinct(leaf.idx, inner, loop_vars)
            b, acc = per_buf.get(id(leaf.buf), (leaf.buf, Cst(0)))
            per_buf[id(leaf.buf)] = (b, acc + n)
        total: Expr = Cst(0)
        for b, n in per_buf.values():
            total = total + smin(n, _cap(b)) * _item(b)
        footprints[id(lp)] = total
        return total

    moved: Expr = Cst(0)
    for leaf, nest in reads:
        used = leaf.idx.free_vars()
        n = _lanes(leaf, nest) * _distinct(
            leaf.idx, [lp for lp in nest if lp.var.name in used], loop_vars)
        for lp in nest:
            if lp.var.name in used:
                continue
            if not _registers(lp):
                # the loop's iterations where one outgrows the cache, else 1
                spills = smin(Cst(1), smax(Cst(0), footprint(lp) - Cst(cache)))
                n = n * smax(Cst(1), _extent(lp) * spills)
        moved = moved + n * _item(leaf.buf)
    return {"cache_bytes": moved}
