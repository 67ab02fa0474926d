"""The statement tree of a kernel, as the lowering builds it and the printer prints it.

One small tree per kernel: :class:`Loop` (``seq`` for mapSeq, reduce and copies;
``glb``/``wrg``/``lcl`` for the work-distribution loops of mapGlb/mapWrg/mapLcl),
:class:`Store` (a leaf written into memory), :class:`Decl` (a private array),
:class:`Barrier`. The builder (:mod:`codegen.builder`) makes it; the passes over it
(barriers, vector accumulators, private arrays, launch, resources) read and rewrite it;
:mod:`codegen.emit` prints it as OpenCL C. It depends on the views and buffers its leaves
refer to, and on nothing that reads it (issue 23: it lived in the printer, which the
passes it serves are imported by).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from dataclasses import replace as dc_replace

from codegen.buffers import Buf
from codegen.views import Call, Leaf, Mem, Sel, VecMem
from ir.sym import Expr, Rel


@dataclass(eq=False)
class Loop:
    """A loop: ``kind`` is seq, glb, wrg or lcl; ``threads`` is set by the launch. A seq
    loop of ``width`` above 1 is a mapVec, rewritten into vector lanes by ``codegen.lanes``
    once the analyses (launch, barriers) have seen it as the sequential loop it means."""

    kind: str
    dim: int | None
    var: Expr
    n: int
    label: str
    what: str
    is_map: bool = False
    body: list = field(default_factory=list)
    parent: Loop | None = None
    threads: int | None = None
    n_sym: Expr | None = None  # ``n`` as the program's symbolic sizes give it (resources)
    width: int = 1  # a mapVec loop's vector width, or a reduction's in lanes
    reduce_acc: Mem | None = None  # a reduction's accumulator (its loop in lanes)
    width_sym: Expr | None = None  # ``width`` in the program's sizes (a tuning parameter)
    block: int = 0  # a register block's loop (``codegen.lanes.jam``): the vectors it holds

    @property
    def par_dim(self) -> int:
        """The dimension of a parallel (glb, wrg or lcl) loop: the mapping gives it one."""
        assert self.dim is not None, f"{self.what} distributes no dimension"
        return self.dim

    @property
    def name(self) -> str:
        return self.var.name


@dataclass(eq=False)
class Store:
    """``dest = value`` (a scalar or a vector store); only where ``conds`` hold when it
    has any (a write into a cropped output)."""

    dest: Mem | VecMem
    value: Leaf
    parent: Loop | None = None
    conds: tuple[Rel, ...] = ()


@dataclass(eq=False)
class Decl:
    """Declaration of a private buffer at this point."""

    buf: Buf
    parent: Loop | None = None


@dataclass(eq=False)
class Barrier:
    """``barrier(fences)``; ``why`` becomes a comment."""

    fences: frozenset
    why: str = ""
    parent: Loop | None = None


def walk_stmts(stmts: list):
    """Every statement, pre-order."""
    for s in stmts:
        yield s
        if isinstance(s, Loop):
            yield from walk_stmts(s.body)


def leaves_of(v: Leaf) -> Iterator[Mem | VecMem]:
    """Every memory leaf read by a value."""
    if isinstance(v, (Mem, VecMem)):
        yield v
    elif isinstance(v, Call):
        for a in v.args:
            yield from leaves_of(a)
    elif isinstance(v, Sel):
        yield from leaves_of(v.then)
        yield from leaves_of(v.other)


def _moved(v: Leaf, subs: dict, bufs: dict[int, Buf]) -> Leaf:
    """``v`` with index variables substituted (``subs``) and buffers replaced (``bufs``:
    id of a buffer -> its replacement)."""
    if isinstance(v, Mem):
        return Mem(bufs.get(id(v.buf), v.buf), v.idx.subs(subs), v.type)
    if isinstance(v, VecMem):
        return VecMem(bufs.get(id(v.buf), v.buf), v.idx.subs(subs), v.type)
    if isinstance(v, Call):
        return Call(v.fname, tuple(_moved(a, subs, bufs) for a in v.args), v.type)
    if isinstance(v, Sel):
        return Sel(tuple(c.subs(subs) for c in v.conds), _moved(v.then, subs, bufs),
                   _moved(v.other, subs, bufs))
    return v  # a constant


def clone_stmts(stmts: list, parent: Loop | None, subs: dict,
                rename: Callable[[str], str]) -> list:
    """A deep copy of ``stmts`` under ``parent``, index variables substituted by ``subs``:
    each private buffer they declare becomes a new one named by ``rename`` (the copy may be
    rewritten, into vector lanes for one, without touching the original); every other
    buffer is shared."""
    bufs: dict[int, Buf] = {}
    for s in walk_stmts(stmts):
        if isinstance(s, Decl):
            name = rename(s.buf.cname)
            bufs[id(s.buf)] = dc_replace(s.buf, name=name, c_name="")

    def leaf(v: Leaf) -> Leaf:
        return _moved(v, subs, bufs)

    def copy(body: list, where: Loop | None) -> list:
        out: list = []
        for s in body:
            if isinstance(s, Loop):
                acc = s.reduce_acc
                lp = dc_replace(s, parent=where, body=[], reduce_acc=None if acc is None else
                                Mem(bufs.get(id(acc.buf), acc.buf), acc.idx.subs(subs),
                                    acc.type))
                lp.body = copy(s.body, lp)
                out.append(lp)
            elif isinstance(s, Store):
                out.append(Store(leaf(s.dest), leaf(s.value), where,  # type: ignore[arg-type]
                                 tuple(c.subs(subs) for c in s.conds)))
            elif isinstance(s, Decl):
                out.append(Decl(bufs[id(s.buf)], where))
            else:
                out.append(Barrier(s.fences, s.why, where))
        return out

    return copy(stmts, parent)

