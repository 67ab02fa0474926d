"""Which input layouts and paddings a program is worth exploring with (``ir.layout``),
judged once per program on the same probe build as the vector lanes
(``mapper.lanes_probe``).

An innermost map (no computing map inside it: where lanes go) whose iterations read an
input with a constant stride that is the stride of one of the input's dimensions, other
than its innermost, reads it along that dimension: stored with that dimension innermost,
the map's lanes would read contiguous memory (``Relayout``). A layout costs a copy of the
input (the variant's first kernel), so it is proposed only where the program does at least
:data:`MIN_FLOPS_PER_ELEMENT` operations per element of the input: a matmul's or a
convolution's weights, not a transpose's or a row sum's only input. Where the device's
vector width divides the dimension, the layout is *blocked* by that width
(:func:`preparation_plans`): each work-item then streams through contiguous blocks.

An input the program reads only through a padding (a convolution's ``padND $ input``) and
reuses as much is padded once by a kernel of its own (``ir.layout.Prepad``): the hot loop
then reads it with no bounds test. :func:`preparation_plans` gives each layout with the
paddings, and the paddings alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from codegen.errors import LoweringError
from codegen.stmt import Loop, Store, leaves_of, walk_stmts
from ir.errors import LiftmapError
from ir.layout import Prepad, Relayout, dims_of, padded_reads
from ir.nodes import Lambda
from ir.typecheck import typecheck
from mapper.lanes_probe import _all_sequential, probe_sizes

MIN_FLOPS_PER_ELEMENT = 64  # a layout's copy is then at most a few percent of the work
MAX_LAYOUTS = 2  # layouts proposed per program, innermost maps' reads first


def strided_reads(program: Lambda) -> list[Relayout]:
    """Every (input, dimension) an innermost map of ``program`` reads along, with a
    stride, in the order the maps come in the program; empty where the program cannot be
    probed (the lanes' probe says why)."""
    info = typecheck(program)
    sizes = probe_sizes(program, info)
    if sizes is None:
        return []
    from codegen.lower import build

    try:
        b = build(_all_sequential(program, None), sizes)
    except (LoweringError, LiftmapError, ArithmeticError):
        return []
    strides: dict[str, tuple[int, ...]] = {}
    for p in program.params:
        if p.type is None:
            continue
        dims, _ = dims_of(p.type)
        if len(dims) < 2:
            continue
        try:
            n = [int(d.evaluate(sizes)) for d in dims]
        except (LiftmapError, ArithmeticError, TypeError):
            continue
        strides[p.name] = tuple(_prod(n[j + 1:]) for j in range(len(n)))
    out: list[Relayout] = []
    for lp in walk_stmts(b.top):
        if not isinstance(lp, Loop) or not lp.is_map or not lp.label or lp.n < 2:
            continue
        if any(isinstance(s, Loop) and s.is_map for s in walk_stmts(lp.body)):
            continue  # not innermost
        for s in walk_stmts(lp.body):
            if not isinstance(s, Store):
                continue
            for leaf in leaves_of(s.value):
                st = strides.get(leaf.buf.name)
                if st is None or leaf.buf.space != "global":
                    continue
                step = _step(leaf.idx, lp.var)
                if step is None or step in (0, 1) or step not in st[:-1]:
                    continue
                r = Relayout(leaf.buf.name, st.index(step), len(st))
                if r not in out:
                    out.append(r)
    return out


def relayout_candidates(program: Lambda, sizes: Mapping[str, int],
                        flops: int | None) -> list[Relayout]:
    """The layouts worth a variant of ``program`` at ``sizes`` (its FLOP count ``flops``;
    None: none): :func:`strided_reads` of inputs the program does at least
    :data:`MIN_FLOPS_PER_ELEMENT` operations per element of, at most :data:`MAX_LAYOUTS`
    (the probe build only where some input is reused so)."""
    reused = _reused(program, sizes, flops)
    if not reused:
        return []
    return [r for r in strided_reads(program) if r.input in reused][:MAX_LAYOUTS]


def _reused(program: Lambda, sizes: Mapping[str, int], flops: int | None) -> set[str]:
    """The inputs (of two or more dimensions) the program does at least
    :data:`MIN_FLOPS_PER_ELEMENT` operations per element of."""
    if not flops:
        return set()
    reused = set()
    for p in program.params:
        if p.type is None:
            continue
        dims, _ = dims_of(p.type)
        try:
            elements = _prod([int(d.evaluate(sizes)) for d in dims])
        except (LiftmapError, ArithmeticError, TypeError):
            continue  # a size left to tune: the copy's cost is unknown
        if len(dims) >= 2 and elements and flops / elements >= MIN_FLOPS_PER_ELEMENT:
            reused.add(p.name)
    return reused


def blocked(r: Relayout, sizes: Mapping[str, int], program: Lambda, lanes: int) -> Relayout:
    """``r`` blocked by ``lanes`` (the device's vector width) where that divides the moved
    dimension and leaves at least two blocks; ``r`` itself otherwise."""
    if lanes < 2:
        return r
    for p in program.params:
        if p.name == r.input and p.type is not None:
            try:
                n = int(dims_of(p.type)[0][r.dim].evaluate(sizes))
            except (LiftmapError, ArithmeticError, TypeError):
                return r
            if n % lanes == 0 and n >= 2 * lanes:
                return Relayout(r.input, r.dim, r.rank, lanes)
    return r


def preparation_plans(program: Lambda, sizes: Mapping[str, int], flops: int | None,
                      lanes: int) -> list[tuple[Relayout | Prepad, ...]]:
    """The preparations worth a variant of ``program`` (``ir.layout.prepared_pipeline``):
    each of :func:`relayout_candidates`, blocked by ``lanes`` where it divides
    (:func:`blocked`), with the paddings of reused inputs (``ir.layout.padded_reads``;
    not of the input it moves), then those paddings alone; empty where none applies."""
    reused = _reused(program, sizes, flops)
    if not reused:
        return []
    pads = [pp for pp in padded_reads(program) if pp.input in reused]
    plans: list[tuple[Relayout | Prepad, ...]] = []
    for r in relayout_candidates(program, sizes, flops):
        plans.append((blocked(r, sizes, program, lanes),
                      *(pp for pp in pads if pp.input != r.input)))
    if pads:
        plans.append(tuple(pads))
    return plans


def _step(idx, var) -> int | None:
    """How far ``idx`` moves when ``var`` moves by one, where that is a constant."""
    from codegen import views as vw

    name = var.name
    if name not in idx.free_vars():
        return 0
    try:
        d = vw.normalize(idx.subs({name: var + 1})) - vw.normalize(idx)
    except (LiftmapError, ArithmeticError):
        return None
    if d.free_vars():
        return None
    try:
        return int(d.evaluate({}))
    except (LiftmapError, ArithmeticError, TypeError):
        return None


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out
