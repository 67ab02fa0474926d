"""Memory: buffers, their layout, their address space and their size.

Every value that a computation produces lives in a buffer. Program inputs and the output
are global buffers; the result of a map nest consumed by another map inside the same
kernel goes to a *temporary* whose address space comes from the program's annotations
(:func:`ir.memory_space.infer_space`, re-exported here; ``toLocal``/``toPrivate``/
``toGlobal`` on the user function inside the nest), global by default. Reduce
accumulators are private unless their initial value is written by an annotated expression.

Sizes follow from the types and from where the temporary is allocated (CC'22 5.1's
"memory allocation reports"): a private temporary holds what one work-item writes in one
iteration of the loops around it; a local one is replicated for every iteration of the
enclosing ``mapLcl`` loops (one work-group's worth); a global one for every iteration of
all enclosing loops (so that concurrent iterations never share it).

The buffer record itself, :class:`Buf`, is :mod:`codegen.buffers`' (this module's
``Buf`` and ``ITEM_BYTES`` are those): views address buffers and are used here, so the
record sits below both.
"""

from __future__ import annotations

from codegen.buffers import ITEM_BYTES, Buf
from codegen.errors import UnsupportedError
from codegen.views import ArrV, Mem, TupV, VecMem, View
from ir.memory_space import infer_fun_space, infer_space  # noqa: F401  (this module's API)
from ir.sym import Expr, sym
from ir.types import ArrayType, ScalarType, TupleType, Type, VectorType, base_scalar


def size_of_sym(t: Type) -> Expr:
    """Number of scalars of a type whose sizes may be symbolic (``size_of`` for
    expressions)."""
    if isinstance(t, ScalarType):
        return sym(1)
    if isinstance(t, VectorType):
        return t.width
    if isinstance(t, ArrayType):
        return t.size * size_of_sym(t.elem)
    if isinstance(t, TupleType):
        total = sym(0)
        for e in t.elems:
            total = total + size_of_sym(e)
        return total
    raise UnsupportedError(f"no memory layout for type {t}")


def size_of(t: Type) -> int:
    """Number of scalars of a (concrete) type."""
    if isinstance(t, ScalarType):
        return 1
    if isinstance(t, VectorType):
        return t.width.as_int()
    if isinstance(t, ArrayType):
        return t.size.as_int() * size_of(t.elem)
    if isinstance(t, TupleType):
        return sum(size_of(e) for e in t.elems)
    raise UnsupportedError(f"no memory layout for type {t}")


def has_tuple(t: Type) -> bool:
    """True when ``t`` contains a tuple (such values are stored as one buffer per component)."""
    if isinstance(t, TupleType):
        return True
    if isinstance(t, ArrayType):
        return has_tuple(t.elem)
    return False


def natural_view(t: Type, buf: Buf, base: Expr | int = 0) -> View:
    """Row-major layout of a tuple-free type in ``buf`` starting at scalar ``base``."""
    base = sym(base)
    if isinstance(t, ScalarType):
        return Mem(buf, base, t)
    if isinstance(t, VectorType):
        return VecMem(buf, base, t)
    if isinstance(t, ArrayType):
        e = t.elem
        s = size_of(e)
        return ArrV(t.size.as_int(), e, lambda i: natural_view(e, buf, base + i * s))
    raise UnsupportedError(f"no memory layout for type {t}")


def components(t: Type) -> list[Type]:
    """The tuple-free component types of ``t`` (struct of arrays): ``[(A, B)]n`` gives
    ``[A]n`` and ``[B]n``."""
    if isinstance(t, TupleType):
        return [c for e in t.elems for c in components(e)]
    if isinstance(t, ArrayType) and has_tuple(t.elem):
        return [ArrayType(c, t.size) for c in components(t.elem)]
    return [t]


def recombine(t: Type, views: list[View]) -> View:
    """The view of a ``t`` value from the views of its components (inverse of components)."""
    if isinstance(t, TupleType):
        out, k = [], 0
        for e in t.elems:
            c = len(components(e))
            out.append(recombine(e, views[k:k + c]))
            k += c
        return TupV(tuple(out))
    if isinstance(t, ArrayType) and has_tuple(t.elem):
        e = t.elem
        arrs: list[ArrV] = []
        for a in views:
            # components() of an array are arrays, whose natural views are array views
            assert isinstance(a, ArrV), f"component of {t} has a non-array view {a!r}"
            arrs.append(a)
        return ArrV(t.size.as_int(), e, lambda i: recombine(e, [a.get(i) for a in arrs]))
    (v,) = views
    return v


def dtype_of(t: Type) -> str:
    """The scalar type name underlying a tuple-free type."""
    s = base_scalar(t)
    if s is None or s.name not in ITEM_BYTES:
        raise UnsupportedError(f"no scalar type for {t}")
    return s.name


