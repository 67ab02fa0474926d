"""Address-space inference from a program's annotations: which memory (``global``,
``local``, ``private``) the buffer an expression writes lives in, from the outermost
``toGlobal``/``toLocal``/``toPrivate`` on the path to its values. A property of the IR
alone: the mapping rules (``mapper.nesting``) and the lowering (``codegen.memory``) both
read it.
"""

from __future__ import annotations

from ir.nodes import (
    AsScalar,
    AsVector,
    ExprNode,
    FunCall,
    FunDecl,
    Id,
    Join,
    Lambda,
    Map,
    Pad,
    Param,
    ReorderStride,
    Slide,
    Split,
    ToMem,
    Transpose,
)


def infer_space(e: ExprNode) -> str | None:
    """The address space an annotation inside ``e`` gives the buffer ``e`` is written to:
    the outermost ``toGlobal``/``toLocal``/``toPrivate`` on the path to the values it
    writes (through maps, lambdas and layout primitives). None when unannotated."""
    if isinstance(e, FunCall):
        f = e.f
        if isinstance(f, ToMem):
            return f.space
        if isinstance(f, Map):
            return infer_fun_space(f.f)
        if isinstance(f, Lambda):
            return infer_space(f.body)
        if len(e.args) == 1 and _is_layout(f):
            return infer_space(e.args[0])
    return None


def infer_fun_space(f: FunDecl) -> str | None:
    """:func:`infer_space` for a function (the body of a map)."""
    if isinstance(f, ToMem):
        return f.space
    if isinstance(f, Map):
        return infer_fun_space(f.f)
    if isinstance(f, Lambda):
        body = f.body
        if isinstance(body, Param):
            return None
        return infer_space(body)
    return None


def _is_layout(f: FunDecl) -> bool:
    return isinstance(f, (AsScalar, AsVector, Id, Join, Pad, ReorderStride, Slide, Split,
                          Transpose))
