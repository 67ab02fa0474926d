"""An input's layout as a choice: the program reads an input stored with one of its
dimensions moved innermost, and a first kernel stores it so.

A map whose every iteration reads an input one row further along a dimension that is not
the input's innermost reads it with a stride: in vector lanes those reads are gathers. The
same program can read that input from a copy stored with the dimension innermost (the
matmul's ``Bt`` stored as ``B``, a convolution's weights as ``[KH][KW][C][M]``): its
lanes then read contiguous memory. *Blocked* (``block=b``, oneDNN's ``OIhw16o``): the
dimension is split in blocks of ``b``, the block count keeps the dimension's place and the
``b`` elements go innermost (the weights as ``[M/16][KH][KW][C][16]``), so that a
work-item reading a few blocks of lanes at every step of a long reduction streams through
contiguous memory instead of one row of a wide matrix per step (rows a power of two apart
all fall in the same few sets of the L1 cache). :func:`relayout_pipeline` makes that variant a
two-kernel pipeline: the stage ``layout`` copies the input into the new layout, the stage
``main`` is the program reading the copy through views (``map(transpose)``: free in the
lowering). The copy is part of the variant's timed kernels: a layout pays only where the
program reuses what it reads (docs/mapping.md, "Layouts").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ir.builders import join, map_, split, to_global, transpose
from ir.errors import InvalidOptionError
from ir.nodes import (
    ExprNode,
    FunCall,
    FunDecl,
    Id,
    Lambda,
    Map,
    Node,
    Pad,
    Param,
    rebuild,
    walk,
)
from ir.pipeline import Pipeline, Stage, stage_source
from ir.sym import Cst
from ir.types import ArrayType, Type

__all__ = ["Prepad", "Relayout", "dims_of", "padded_reads", "prepared_pipeline",
           "relayout_pipeline", "stored_type"]


@dataclass(frozen=True)
class Relayout:
    """Input ``input`` (of ``rank`` dimensions) stored with its dimension ``dim`` (0: the
    outermost) innermost, the others in their order; with ``block``, only blocks of
    ``block`` elements of it innermost, the block count in the dimension's place."""

    input: str
    dim: int
    rank: int
    block: int | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.dim < self.rank - 1:
            raise InvalidOptionError(f"a layout moves a dimension that is not innermost: "
                                     f"dimension {self.dim} of {self.rank}")
        if self.block is not None and self.block < 2:
            raise InvalidOptionError(f"a layout's block has at least 2 elements, not "
                                     f"{self.block}")

    @property
    def order(self) -> tuple[int, ...]:
        """The declared dimensions in their stored order (numpy's ``transpose`` axes; for a
        blocked layout, of the declared array with ``dim`` split in two, the block's
        elements at ``dim + 1``)."""
        if self.block is None:
            return tuple(d for d in range(self.rank) if d != self.dim) + (self.dim,)
        return tuple(d for d in range(self.rank + 1) if d != self.dim + 1) + (self.dim + 1,)

    @property
    def name(self) -> str:
        """The variant's name: ``layout-<input>-<dim>`` (blocked: ``...-<dim>b<block>``)."""
        return f"layout-{self.input}-{self.dim}" + (f"b{self.block}" if self.block else "")

    def moved(self) -> Relayout:
        """The whole-dimension move that does what this layout does to the declared array
        split at ``dim`` (itself, unblocked)."""
        if self.block is None:
            return self
        return Relayout(self.input, self.dim + 1, self.rank + 1)


@dataclass(frozen=True)
class Prepad:
    """Input ``input``, which the program reads only through a padding (``padND(...) $
    input``), padded once by a kernel of its own: the program then reads the padded copy,
    with no bounds test per read (a convolution's input in its hot loop)."""

    input: str

    @property
    def name(self) -> str:
        """``pad-<input>``."""
        return f"pad-{self.input}"


def dims_of(t: Type) -> tuple[list, Type]:
    """The sizes of an array type, outermost first, and its element type."""
    sizes = []
    while isinstance(t, ArrayType):
        sizes.append(t.size)
        t = t.elem
    return sizes, t


def stored_type(t: Type, r: Relayout) -> Type:
    """The type of an input of type ``t`` stored as ``r`` says."""
    sizes, elem = dims_of(t)
    if len(sizes) != r.rank:
        raise InvalidOptionError(f"{r.input} has {len(sizes)} dimensions, not {r.rank}")
    if r.block is not None:
        n = sizes[r.dim]
        sizes = [*sizes[:r.dim], n / r.block, Cst(r.block), *sizes[r.dim + 1:]]
    out: Type = elem
    for d in reversed(r.order):
        out = ArrayType(out, sizes[d])
    return out


def _at(f: FunDecl, depth: int) -> FunDecl:
    for _ in range(depth):
        f = map_(f)
    return f


def _swap(e: ExprNode, j: int) -> ExprNode:
    """``e`` with its dimensions ``j`` and ``j + 1`` swapped: a view."""
    return FunCall(_at(transpose(), j), (e,))


def innermost_view(e: ExprNode, r: Relayout) -> ExprNode:
    """``e`` (declared layout) seen as ``r`` stores it: dimension ``r.dim`` innermost, or
    split and its blocks' elements innermost."""
    if r.block is not None:
        e = FunCall(_at(split(r.block), r.dim), (e,))
    m = r.moved()
    for j in range(m.dim, m.rank - 1):
        e = _swap(e, j)
    return e


def declared_view(e: ExprNode, r: Relayout) -> ExprNode:
    """``e`` (stored as ``r`` says) seen in its declared layout."""
    m = r.moved()
    for j in reversed(range(m.dim, m.rank - 1)):
        e = _swap(e, j)
    if r.block is not None:
        e = FunCall(_at(join(), r.dim), (e,))
    return e


def _input(program: Lambda, name: str) -> Param:
    for p in program.params:
        if p.name == name:
            return p
    raise InvalidOptionError(f"the program has no input {name!r}; its inputs are "
                             f"{', '.join(p.name for p in program.params)}")


def layout_stage(program: Lambda, r: Relayout) -> Lambda:
    """The kernel that stores input ``r.input`` of ``program`` in ``r``'s layout: a copy
    (``id``) over every element, its maps labelled ``R0`` (outermost) to ``R<n-1>`` (``n``
    the stored array's dimensions)."""
    p = _input(program, r.input)
    if p.type is None:
        raise InvalidOptionError(f"input {r.input} has no declared type")
    src = Param(p.name, p.type)
    return Lambda((src,), FunCall(_copy_all(r.moved().rank, "R"), (innermost_view(src, r),)))


def _copy_all(rank: int, label: str) -> FunDecl:
    """A copy (``id`` into global memory) of every element of a ``rank``-dimensional
    array, its maps labelled ``<label>0`` (outermost) to ``<label><rank-1>``."""
    f: FunDecl = to_global(Id())
    for d in reversed(range(rank)):
        f = map_(f, f"{label}{d}")
    return f


def _pad_only(f: FunDecl) -> bool:
    """Whether ``f`` only pads its one argument (``pad``, ``padND``: pads, maps of pads,
    compositions of them)."""
    if isinstance(f, Pad):
        return True
    if isinstance(f, Map):
        return _pad_only(f.f)
    if isinstance(f, Lambda) and len(f.params) == 1:
        e: ExprNode = f.body
        while isinstance(e, FunCall) and len(e.args) == 1 and _pad_only(e.f):
            e = e.args[0]
        return isinstance(e, Param) and e.name == f.params[0].name and e is not f.body
    return False


def _uses(program: Lambda, name: str) -> list[Node]:
    return [n for n in walk(program.body) if isinstance(n, Param) and n.name == name]


def padded_reads(program: Lambda) -> list[Prepad]:
    """The inputs of ``program`` read only through one padding (``padND(...) $ x``, its
    only use): each can be padded once by a kernel of its own (:class:`Prepad`)."""
    bound = {q.name for n in walk(program.body) if isinstance(n, Lambda) for q in n.params}
    out = []
    for p in program.params:
        if p.name in bound or p.type is None or len(_uses(program, p.name)) != 1:
            continue
        for n in walk(program.body):
            if isinstance(n, FunCall) and len(n.args) == 1 and isinstance(n.args[0], Param) \
                    and n.args[0].name == p.name and _pad_only(n.f):
                out.append(Prepad(p.name))
                break
    return out


def _pad_call(program: Lambda, pp: Prepad) -> FunCall:
    for n in walk(program.body):
        if isinstance(n, FunCall) and len(n.args) == 1 and isinstance(n.args[0], Param) \
                and n.args[0].name == pp.input and _pad_only(n.f):
            return n
    raise InvalidOptionError(f"the program reads {pp.input} through no padding of its own")


def pad_stage(program: Lambda, pp: Prepad) -> Lambda:
    """The kernel that stores input ``pp.input`` of ``program`` padded as the program
    pads it: a copy of every element of the padded array (maps ``P0`` outermost, ...)."""
    from ir.typecheck import typecheck

    p = _input(program, pp.input)
    if p.type is None:
        raise InvalidOptionError(f"input {pp.input} has no declared type")
    src = Param(p.name, p.type)
    padded = FunCall(_pad_call(program, pp).f, (src,))
    rank = len(dims_of(typecheck(Lambda((src,), padded)).type)[0])
    return Lambda((src,), FunCall(_copy_all(rank, "P"), (padded,)))


def main_stage(program: Lambda, r: Relayout | Prepad) -> Lambda:
    """``program`` reading input ``r.input`` prepared as ``r`` says (same name): stored in
    a layout (the stored type, read through views that give back its declared layout), or
    padded (read where the program padded it)."""
    p = _input(program, r.input)
    bound = {q.name for n in walk(program.body) if isinstance(n, Lambda) for q in n.params}
    if p.name in bound:
        raise InvalidOptionError(f"a function of the program binds the input's name "
                                 f"{p.name}: its reads cannot be told apart")
    if isinstance(r, Prepad):
        from ir.typecheck import typecheck

        call = _pad_call(program, r)
        stored = Param(p.name, typecheck(pad_stage(program, r)).type)

        def swap_pad(n: Node) -> Node | None:
            return stored if n is call else None

        body = rebuild(program.body, swap_pad)
    else:
        assert p.type is not None  # layout_stage checked it
        stored = Param(p.name, stored_type(p.type, r))
        view = declared_view(stored, r)

        def swap_in(n: Node) -> Node | None:
            return view if isinstance(n, Param) and n.name == p.name else None

        body = rebuild(program.body, swap_in)
    assert isinstance(body, ExprNode)  # an expression with an input swapped for a view
    params = tuple(stored if q.name == p.name else q for q in program.params)
    return Lambda(params, body)


def prep_stage_name(r: Relayout | Prepad) -> str:
    """The stage (and kernel) that prepares ``r.input``: ``layout`` for a layout,
    ``pad_<input>`` for a padding."""
    return "layout" if isinstance(r, Relayout) else f"pad_{r.input}"


def prepared_pipeline(program: Lambda, preps: Sequence[Relayout | Prepad],
                      name: str = "program") -> Pipeline:
    """``program`` as a pipeline: one kernel per preparation in ``preps`` (at most one per
    input, one layout in all), each reading a pipeline input, then ``main``, the program
    reading the prepared copies and the other inputs."""
    inputs = [r.input for r in preps]
    if len(set(inputs)) != len(inputs) or sum(isinstance(r, Relayout) for r in preps) > 1:
        raise InvalidOptionError("one preparation per input and one layout in all")
    if not preps:
        raise InvalidOptionError("a prepared pipeline needs at least one preparation")
    stages = []
    main = program
    for r in preps:
        prep = layout_stage(program, r) if isinstance(r, Relayout) else pad_stage(program, r)
        stages.append(Stage(prep_stage_name(r), prep, ((r.input, r.input),)))
        main = main_stage(main, r)
    by_input = {r.input: r for r in preps}
    sources = tuple((q.name, stage_source(prep_stage_name(by_input[q.name]))
                     if q.name in by_input else q.name) for q in main.params)
    vname = "+".join(r.name for r in preps)
    return Pipeline(f"{name}:{vname}", tuple(q.name for q in program.params),
                    (*stages, Stage("main", main, sources)))


def relayout_pipeline(program: Lambda, r: Relayout, name: str = "program") -> Pipeline:
    """``program`` as two kernels: ``layout`` stores input ``r.input`` in ``r``'s layout,
    ``main`` computes the program from that copy and the other inputs."""
    return prepared_pipeline(program, [r], name)
