"""IR types: scalars, vectors, arrays with symbolic lengths, tuples."""

from __future__ import annotations

from dataclasses import dataclass
from typing import overload

from ir.sym import Expr, sym


class Type:
    """Base class of IR types."""

    __slots__ = ()

    def free_vars(self) -> frozenset[str]:
        return frozenset()

    def subs(self, mapping) -> Type:
        return self


@dataclass(frozen=True, slots=True)
class ScalarType(Type):
    """A scalar: ``float`` or ``int``."""

    name: str

    def __str__(self) -> str:
        return self.name


Float = ScalarType("float")
Int = ScalarType("int")
SCALARS = {"float": Float, "int": Int}


@dataclass(frozen=True, slots=True)
class VectorType(Type):
    """An OpenCL vector ``floatN``; the width may be symbolic (a tuning parameter)."""

    elem: ScalarType
    width: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "width", sym(self.width))

    def free_vars(self) -> frozenset[str]:
        return self.width.free_vars()

    def subs(self, mapping) -> Type:
        return VectorType(self.elem, self.width.subs(mapping))

    def __str__(self) -> str:
        if self.width.is_const:
            return f"{self.elem}{self.width.as_int()}"
        return f"{self.elem}<{self.width}>"


@dataclass(frozen=True, slots=True)
class ArrayType(Type):
    """``[elem]size``: an array of ``size`` elements (size symbolic)."""

    elem: Type
    size: Expr

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", sym(self.size))

    def free_vars(self) -> frozenset[str]:
        return self.elem.free_vars() | self.size.free_vars()

    def subs(self, mapping) -> Type:
        return ArrayType(self.elem.subs(mapping), self.size.subs(mapping))

    def __str__(self) -> str:
        size = str(self.size)
        if not _is_atomic_text(size):
            size = f"({size})"
        return f"[{self.elem}]{size}"


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    """A tuple ``(T, U, ...)``."""

    elems: tuple[Type, ...]

    def free_vars(self) -> frozenset[str]:
        out: frozenset[str] = frozenset()
        for e in self.elems:
            out |= e.free_vars()
        return out

    def subs(self, mapping) -> Type:
        return TupleType(tuple(e.subs(mapping) for e in self.elems))

    def __str__(self) -> str:
        if len(self.elems) == 1:
            return f"({self.elems[0]},)"
        return "(" + ", ".join(str(e) for e in self.elems) + ")"


def _is_atomic_text(s: str) -> bool:
    return s.replace("_", "").isalnum()


def array(elem: Type, *sizes) -> Type:
    """``array(Float, "N", "M")`` is ``[[float]M]N`` (outermost size first)."""
    t = elem
    for n in reversed(sizes):
        t = ArrayType(t, sym(n))
    return t


def vector(elem: ScalarType, width) -> VectorType:
    return VectorType(elem, sym(width))


@overload
def shape_of(t: Type) -> tuple[list[Expr], Type]: ...
@overload
def shape_of(t: Type | None) -> tuple[list[Expr], Type | None]: ...


def shape_of(t: Type | None) -> tuple[list[Expr], Type | None]:
    """Split nested array types into (sizes outermost first, innermost element type).

    None (an untyped parameter) gives ``([], None)``."""
    sizes: list[Expr] = []
    while isinstance(t, ArrayType):
        sizes.append(t.size)
        t = t.elem
    return sizes, t


def base_scalar(t: Type) -> ScalarType | None:
    """The scalar underlying a scalar, vector or array of those; None for tuples."""
    _, inner = shape_of(t)
    if isinstance(inner, ScalarType):
        return inner
    if isinstance(inner, VectorType):
        return inner.elem
    return None
