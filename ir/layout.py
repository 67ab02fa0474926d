"""An input's layout as a choice: the program reads an input stored with one of its
dimensions moved innermost, and a first kernel stores it so.

A map whose every iteration reads an input one row further along a dimension that is not
the input's innermost reads it with a stride: in vector lanes those reads are gathers. The
same program can read that input from a copy stored with the dimension innermost (the
matmul's ``Bt`` stored as ``B``, a convolution's weights as ``[KH][KW][C][M]``): its
lanes then read contiguous memory. :func:`relayout_pipeline` makes that variant a
two-kernel pipeline: the stage ``layout`` copies the input into the new layout, the stage
``main`` is the program reading the copy through views (``map(transpose)``: free in the
lowering). The copy is part of the variant's timed kernels: a layout pays only where the
program reuses what it reads (docs/mapping.md, "Layouts").
"""

from __future__ import annotations

from dataclasses import dataclass

from ir.builders import map_, to_global, transpose
from ir.errors import InvalidOptionError
from ir.nodes import ExprNode, FunCall, FunDecl, Id, Lambda, Node, Param, rebuild, walk
from ir.pipeline import Pipeline, Stage
from ir.types import ArrayType, Type

__all__ = ["Relayout", "relayout_pipeline", "stored_type", "dims_of"]


@dataclass(frozen=True)
class Relayout:
    """Input ``input`` (of ``rank`` dimensions) stored with its dimension ``dim`` (0: the
    outermost) innermost, the others in their order."""

    input: str
    dim: int
    rank: int

    def __post_init__(self) -> None:
        if not 0 <= self.dim < self.rank - 1:
            raise InvalidOptionError(f"a layout moves a dimension that is not innermost: "
                                     f"dimension {self.dim} of {self.rank}")

    @property
    def order(self) -> tuple[int, ...]:
        """The declared dimensions in their stored order (numpy's ``transpose`` axes)."""
        return tuple(d for d in range(self.rank) if d != self.dim) + (self.dim,)

    @property
    def name(self) -> str:
        """The variant's name: ``layout-<input>-<dim>``."""
        return f"layout-{self.input}-{self.dim}"


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
    out: Type = elem
    for d in reversed(r.order):
        out = ArrayType(out, sizes[d])
    return out


def _swap(e: ExprNode, j: int) -> ExprNode:
    """``e`` with its dimensions ``j`` and ``j + 1`` swapped: a view."""
    f: FunDecl = transpose()
    for _ in range(j):
        f = map_(f)
    return FunCall(f, (e,))


def innermost_view(e: ExprNode, r: Relayout) -> ExprNode:
    """``e`` (declared layout) seen with dimension ``r.dim`` innermost."""
    for j in range(r.dim, r.rank - 1):
        e = _swap(e, j)
    return e


def declared_view(e: ExprNode, r: Relayout) -> ExprNode:
    """``e`` (stored as ``r`` says) seen in its declared layout."""
    for j in reversed(range(r.dim, r.rank - 1)):
        e = _swap(e, j)
    return e


def _input(program: Lambda, name: str) -> Param:
    for p in program.params:
        if p.name == name:
            return p
    raise InvalidOptionError(f"the program has no input {name!r}; its inputs are "
                             f"{', '.join(p.name for p in program.params)}")


def layout_stage(program: Lambda, r: Relayout) -> Lambda:
    """The kernel that stores input ``r.input`` of ``program`` in ``r``'s layout: a copy
    (``id``) over every element, its maps labelled ``R0`` (outermost) to ``R<rank-1>``."""
    p = _input(program, r.input)
    if p.type is None:
        raise InvalidOptionError(f"input {r.input} has no declared type")
    f: FunDecl = to_global(Id())
    for d in reversed(range(r.rank)):
        f = map_(f, f"R{d}")
    src = Param(p.name, p.type)
    return Lambda((src,), FunCall(f, (innermost_view(src, r),)))


def main_stage(program: Lambda, r: Relayout) -> Lambda:
    """``program`` reading input ``r.input`` stored in ``r``'s layout (same name, the
    stored type), through views that give back its declared layout."""
    p = _input(program, r.input)
    assert p.type is not None  # layout_stage checked it
    stored = Param(p.name, stored_type(p.type, r))
    view = declared_view(stored, r)

    bound = {q.name for n in walk(program.body) if isinstance(n, Lambda) for q in n.params}
    if p.name in bound:
        raise InvalidOptionError(f"a function of the program binds the input's name "
                                 f"{p.name}: its reads cannot be told apart")

    def swap_in(n: Node) -> Node | None:
        return view if isinstance(n, Param) and n.name == p.name else None

    body = rebuild(program.body, swap_in)
    assert isinstance(body, ExprNode)  # an expression with an input swapped for a view
    params = tuple(stored if q.name == p.name else q for q in program.params)
    return Lambda(params, body)


def relayout_pipeline(program: Lambda, r: Relayout, name: str = "program") -> Pipeline:
    """``program`` as two kernels: ``layout`` stores input ``r.input`` in ``r``'s layout,
    ``main`` computes the program from that copy and the other inputs."""
    main = main_stage(program, r)
    sources = tuple((q.name, "<previous>" if q.name == r.input else q.name)
                    for q in main.params)
    return Pipeline(f"{name}:{r.name}", tuple(q.name for q in program.params), (
        Stage("layout", layout_stage(program, r), ((r.input, r.input),)),
        Stage("main", main, sources)))
