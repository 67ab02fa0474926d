"""Views: the layout primitives as index arithmetic, for reads and for writes.

A *view* describes where the elements of a value live without moving any data (LIFT's
View system, GPGPU'20 Section 3.3). An array view (:class:`ArrV`) maps an index
expression to the view of one element; a tuple view (:class:`TupV`) holds one view per
component; a *leaf* is a scalar or vector: an element of a buffer (:class:`Mem`,
:class:`VecMem`), a constant, a user-function call, a padding conditional
(:class:`Sel`) or a not-yet-resolved vector of lanes (:class:`Lanes`).

``split``, ``join``, ``transpose``, ``slide``, ``pad``, ``reorder``, ``zip``, ``get``,
``asVector`` and ``asScalar`` compose closures, so the index of a leaf is built by
``ir.sym`` arithmetic and simplified on the way (``(i*4 + j)//4`` is ``i`` when
``j < 4``). The same views serve as *output views*: a value written into ``join(D)`` is
written into ``split(m)(D)`` element by element (:func:`inverse_view`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from codegen.buffers import Buf
from codegen.errors import UnsupportedError, UnvectorizableError
from ir.sym import Expr, Rel, Var, smax, smin, sym
from ir.types import ArrayType, ScalarType, TupleType, Type, VectorType

OPENCL_VECTOR_WIDTHS = (1, 2, 3, 4, 8, 16)  # width 1 is printed as a scalar


class View:
    """Base of views; ``type`` is the concrete IR type of the value."""

    __slots__ = ()

    if TYPE_CHECKING:  # a field or a property of each kind of view
        @property
        def type(self) -> Type: ...


@dataclass(frozen=True, eq=False)
class ArrV(View):
    """An array of ``n`` elements of type ``elem``; ``at(i)`` is the view of element i."""

    n: int
    elem: Type
    at: Callable[[Expr], View]

    @property
    def type(self) -> Type:
        return ArrayType(self.elem, sym(self.n))

    def get(self, i: int | Expr) -> View:
        return self.at(sym(i))


@dataclass(frozen=True, eq=False)
class TupV(View):
    """A tuple of views."""

    elems: tuple[View, ...]

    @property
    def type(self) -> Type:
        return TupleType(tuple(e.type for e in self.elems))


class Leaf(View):
    """A scalar or a vector: something a C expression can denote."""

    __slots__ = ()


@dataclass(frozen=True, eq=False)
class Mem(Leaf):
    """Element ``idx`` (in scalars) of buffer ``buf``; a vector for a buffer of vectors
    (``codegen.accumulate``'s accumulators, ``idx`` in vectors)."""

    buf: Buf
    idx: Expr
    type: ScalarType | VectorType


@dataclass(frozen=True, eq=False)
class VecMem(Leaf):
    """``type.width`` contiguous scalars of ``buf`` starting at ``idx`` (vloadN/vstoreN)."""

    buf: Buf
    idx: Expr
    type: VectorType

    @property
    def width(self) -> int:
        return self.type.width.as_int()


@dataclass(frozen=True, eq=False)
class Const(Leaf):
    """A constant scalar (or a vector with all lanes equal)."""

    value: float | int
    type: Type


@dataclass(frozen=True, eq=False)
class Call(Leaf):
    """A call of a C function (a user function) on leaves."""

    fname: str
    args: tuple[Leaf, ...]
    type: Type


@dataclass(frozen=True, eq=False)
class Sel(Leaf):
    """``conds ? then : other`` (padding): ``conds`` is a conjunction of relations."""

    conds: tuple[Rel, ...]
    then: Leaf
    other: Leaf

    @property
    def type(self) -> Type:
        return self.then.type


@dataclass(frozen=True, eq=False)
class WriteGuard(Leaf):
    """A destination written only where ``conds`` hold (the output view of a crop: the
    elements cropped away are computed and written nowhere)."""

    conds: tuple[Rel, ...]
    target: Leaf

    @property
    def type(self) -> Type:
        return self.target.type


@dataclass(frozen=True, eq=False)
class Lanes(Leaf):
    """A vector whose lanes are the elements of a scalar array view (from ``asVector``);
    resolved into a contiguous :class:`VecMem` (or a constant) by :func:`resolve_vector`."""

    lanes: ArrV
    type: VectorType


# ------------------------------------------------------------------ read-side layout


def split(x: ArrV, m: int) -> ArrV:
    """``split(m)``: ``[T]n -> [[T]m]n/m``."""
    inner = ArrayType(x.elem, sym(m))

    def outer(i: Expr) -> View:
        return ArrV(m, x.elem, lambda j: x.get(i * m + j))

    return ArrV(x.n // m, inner, outer)


def join(x: ArrV) -> ArrV:
    """``join``: ``[[T]m]n -> [T]n*m``.

    The element is built over fresh variables ``a``, ``b`` (simplified while their
    ranges are plain), then ``a = k // m``, ``b = k % m`` are substituted: this keeps
    ``join o join`` indices affine (``16*(k//16) + k % 16`` recombines to ``k``).
    """
    if not isinstance(x.elem, ArrayType):
        raise UnsupportedError(f"join of {x.type}: not an array of arrays")
    m = x.elem.size.as_int()
    n = x.n

    def elem(k: Expr) -> View:
        if k.is_const:
            return _row(x, k // m).get(k % m)
        a, b = fresh_var(n), fresh_var(m)
        return subst_view(_row(x, a).get(b), {a.name: k // m, b.name: k % m})

    return ArrV(n * m, x.elem.elem, elem)


def transpose(x: ArrV) -> ArrV:
    """``transpose``: ``[[T]m]n -> [[T]n]m``."""
    if not isinstance(x.elem, ArrayType):
        raise UnsupportedError(f"transpose of {x.type}: not an array of arrays")
    m = x.elem.size.as_int()
    t = x.elem.elem

    def row(i: Expr) -> View:
        return ArrV(x.n, t, lambda j: _row(x, j).get(i))

    return ArrV(m, ArrayType(t, sym(x.n)), row)


def slide(x: ArrV, size: int, step: int) -> ArrV:
    """``slide(size, step)``: ``[T]n -> [[T]size](n-size)//step+1``."""
    count = (x.n - size) // step + 1

    def window(i: Expr) -> View:
        return ArrV(size, x.elem, lambda j: x.get(i * step + j))

    return ArrV(count, ArrayType(x.elem, sym(size)), window)


def pad(x: ArrV, left: int, right: int, value: float) -> ArrV:
    """``pad(l, r, value)``: reads outside ``[0, n)`` give ``value`` (negative amounts crop)."""
    n = x.n
    if left == 0 and right == 0:
        return x

    def elem(i: Expr) -> View:
        j = i - left
        conds = tuple(c for c in (j.ge(0), j.lt(n)) if not c.is_trivially_true)
        if any(c.is_trivially_false for c in conds):
            return fill(x.elem, value)
        v = x.get(j)
        return guard(v, conds, value) if conds else v

    return ArrV(n + left + right, x.elem, elem)


def inverse_crop(dest: ArrV, left: int, right: int, n: int) -> ArrV:
    """The output view of ``x`` (``n`` long) when ``pad(left, right)(x)`` with
    ``left, right <= 0`` (a crop) is written into ``dest``: the elements kept go to their
    place in ``dest``, the ones cropped away nowhere."""
    m = dest.n

    def elem(j: Expr) -> View:
        i = j + left
        conds = tuple(c for c in (i.ge(0), i.lt(m)) if not c.is_trivially_true)
        v = dest.get(i)
        return guard_write(v, conds) if conds else v

    return ArrV(n, dest.elem, elem)


def guard_write(v: View, conds: tuple[Rel, ...]) -> View:
    """``v`` as a destination written only where ``conds`` hold, down to every leaf."""
    if isinstance(v, ArrV):
        return ArrV(v.n, v.elem, lambda i: guard_write(v.get(i), conds))
    if isinstance(v, TupV):
        return TupV(tuple(guard_write(e, conds) for e in v.elems))
    if isinstance(v, WriteGuard):
        return WriteGuard(conds + v.conds, v.target)
    assert isinstance(v, Leaf)  # a view is an ArrV, a TupV or a Leaf
    return WriteGuard(conds, v)


def reorder_stride(x: ArrV, s: int) -> ArrV:
    """``reorder(stride(s))``: output j is input ``(j % s) * (n/s) + j // s``."""
    q = x.n // s
    return ArrV(x.n, x.elem, lambda j: x.get((j % s) * q + j // s))


def zip_views(xs: list[View]) -> ArrV:
    """``zip``: ``([T]n, [U]n, ...) -> [(T, U, ...)]n``."""
    arrs = [_arr(x, "zip") for x in xs]
    n = arrs[0].n
    t = TupleType(tuple(a.elem for a in arrs))
    return ArrV(n, t, lambda i: TupV(tuple(a.get(i) for a in arrs)))


def get(t: View, k: int) -> View:
    """``get(k)``: component k of a tuple."""
    if not isinstance(t, TupV):
        raise UnsupportedError(f"get({k}) of {t.type}: not a tuple")
    return t.elems[k]


def as_vector(x: ArrV, v: int) -> ArrV:
    """``asVector(v)``: ``[T]n -> [Tv]n/v`` (lanes resolved when read or written)."""
    if not isinstance(x.elem, ScalarType):
        raise UnsupportedError(f"asVector({v}) of {x.type}: not an array of scalars")
    vt = VectorType(x.elem, sym(v))

    def vec(i: Expr) -> View:
        return Lanes(ArrV(v, x.elem, lambda k: x.get(i * v + k)), vt)

    return ArrV(x.n // v, vt, vec)


def as_scalar(x: ArrV) -> ArrV:
    """``asScalar``: ``[Tv]n -> [T]n*v``."""
    if not isinstance(x.elem, VectorType):
        raise UnsupportedError(f"asScalar of {x.type}: not an array of vectors")
    w = x.elem.width.as_int()
    return ArrV(x.n * w, x.elem.elem, lambda j: lane(x.get(j // w), j % w))


def lane(v: View, k: Expr) -> Leaf:
    """Lane ``k`` of a vector leaf."""
    if isinstance(v, VecMem):
        return Mem(v.buf, v.idx + k, v.type.elem)
    if isinstance(v, Lanes):
        s = v.lanes.get(k)
        assert isinstance(s, Leaf)  # the lanes are an array of scalars
        return s
    if isinstance(v, Const):
        return Const(v.value, v.type.elem if isinstance(v.type, VectorType) else v.type)
    if isinstance(v, Sel):
        return Sel(v.conds, lane(v.then, k), lane(v.other, k))
    raise UnsupportedError("asScalar of a computed vector that is not in memory; "
                           "write it to memory first (toPrivate)")


# ----------------------------------------------------------------- helpers on views

_fresh = itertools.count()
_VARS: dict[str, Expr] = {}  # index variables by name, with their ranges (for normalize)


def new_build() -> None:
    """Starts the index variables of a new statement tree (``codegen.lower.build``): the
    fresh names count from 0 again and the registry forgets the previous tree's, so that a
    long exploration does not fill the caches of ``ir.sym`` with names used once."""
    global _fresh
    _fresh = itertools.count()
    _VARS.clear()


def register_var(v: Expr) -> Expr:
    """Records an index variable so that :func:`normalize` can rebuild it with its range."""
    _VARS[v.name] = v
    if len(_VARS) > 100000:
        _VARS.clear()
        _VARS[v.name] = v
    return v


def fresh_var(n: int) -> Expr:
    """A fresh index variable ranging over ``[0, n)``."""
    return register_var(Var(f"_v{next(_fresh)}", 0, max(n, 1) - 1))


def normalize(e: Expr) -> Expr:
    """``e`` with ``(A + B) % m`` rewritten to ``A % m + B`` and ``(A + B)//m`` to ``A//m``
    when a divisor g of m divides every coefficient of A and ``0 <= B < g`` (ir.sym does
    not know this rule; vector lanes need it: ``(4*r + lane) % 128``)."""
    if not e.free_vars() or "%" not in str(e) and "//" not in str(e):
        return e
    return _build(e.to_tree())


def _build(t: tuple) -> Expr:
    tag = t[0]
    if tag == "int":
        return sym(t[1])
    if tag == "var":
        return _VARS.get(t[1]) or Var(t[1])
    if tag == "neg":
        return -_build(t[1])
    if tag == "add":
        out = sym(0)
        for x in t[1]:
            out = out + _build(x)
        return out
    if tag == "mul":
        out = sym(1)
        for x in t[1]:
            out = out * _build(x)
        return out
    if tag == "div":
        return _build(t[1]) / _build(t[2])
    if tag in ("min", "max"):
        return (smin if tag == "min" else smax)(_build(t[1]), _build(t[2]))
    q = _build(t[2])
    if q.is_const and q.as_int() > 1:
        aligned = _aligned(t[1], q.as_int())
        if aligned is not None:
            a, b = aligned
            return a // q if tag == "floordiv" else a % q + b
    p = _build(t[1])
    return p // q if tag == "floordiv" else p % q


def build_expr(t: tuple) -> Expr:
    """The expression of an ``Expr.to_tree()`` tree (with :func:`normalize`'s rule)."""
    return _build(t)


def _divisors(m: int) -> list[int]:
    """Divisors of m above 1, largest first."""
    small = [d for d in range(1, math.isqrt(m) + 1) if m % d == 0]
    return sorted({x for d in small for x in (d, m // d)} - {1}, reverse=True)


def _coef(t: tuple) -> int:
    if t[0] == "int":
        return t[1]
    if t[0] == "neg":
        return -_coef(t[1])
    if t[0] == "mul" and t[1][0][0] == "int":
        return t[1][0][1]
    return 1


def _aligned(t: tuple, m: int) -> tuple[Expr, Expr] | None:
    items = t[1] if t[0] == "add" else (t,)
    if len(items) < 2:
        return None
    coefs = [_coef(x) for x in items]
    for g in _divisors(m):
        a_items = [x for x, c in zip(items, coefs) if c % g == 0]
        b_items = [x for x, c in zip(items, coefs) if c % g != 0]
        if not b_items or not a_items:
            continue
        b = _build(("add", tuple(b_items)) if len(b_items) > 1 else b_items[0])
        lo, hi = b.bounds()
        if lo is not None and hi is not None and lo >= 0 and hi < g:
            a = _build(("add", tuple(a_items)) if len(a_items) > 1 else a_items[0])
            return a, b
    return None


@overload
def subst_view(v: Leaf, mapping: dict) -> Leaf: ...
@overload
def subst_view(v: ArrV, mapping: dict) -> ArrV: ...
@overload
def subst_view(v: View, mapping: dict) -> View: ...


def subst_view(v: View, mapping: dict) -> View:
    """``v`` with variables substituted in every index and condition (lazily)."""
    if isinstance(v, ArrV):
        return ArrV(v.n, v.elem, lambda i: subst_view(v.get(i), mapping))
    if isinstance(v, TupV):
        return TupV(tuple(subst_view(e, mapping) for e in v.elems))
    if isinstance(v, Mem):
        return Mem(v.buf, v.idx.subs(mapping), v.type)
    if isinstance(v, VecMem):
        return VecMem(v.buf, v.idx.subs(mapping), v.type)
    if isinstance(v, Sel):
        return Sel(tuple(c.subs(mapping) for c in v.conds), subst_view(v.then, mapping),
                   subst_view(v.other, mapping))
    if isinstance(v, Lanes):
        return Lanes(subst_view(v.lanes, mapping), v.type)
    if isinstance(v, Call):
        return Call(v.fname, tuple(subst_view(a, mapping) for a in v.args), v.type)
    if isinstance(v, WriteGuard):
        return WriteGuard(tuple(c.subs(mapping) for c in v.conds),
                          subst_view(v.target, mapping))
    assert isinstance(v, Const)  # the one leaf without variables
    return v


def _row(x: ArrV, i: int | Expr) -> ArrV:
    """Element ``i`` of an array of arrays."""
    r = x.get(i)
    assert isinstance(r, ArrV)  # an element of array type has an array view
    return r


def _arr(x: View, what: str) -> ArrV:
    if not isinstance(x, ArrV):
        raise UnsupportedError(f"{what} of {x.type}: not an array")
    return x


def fill(t: Type, value: float | int) -> View:
    """A view of type ``t`` whose every scalar is ``value`` (literals, padding)."""
    if isinstance(t, ArrayType):
        e = t.elem
        leaf = fill(e, value)
        return ArrV(t.size.as_int(), e, lambda i: leaf)
    if isinstance(t, TupleType):
        return TupV(tuple(fill(e, value) for e in t.elems))
    return _const(t, value)


def _const(t: Type, value: float | int) -> Const:
    """The constant ``value`` of a scalar or vector type ``t``."""
    scalar = t.elem if isinstance(t, VectorType) else t
    if isinstance(scalar, ScalarType) and scalar.name == "int":
        value = int(value)
    else:
        value = float(value)
    return Const(value, t)


def guard(v: View, conds: tuple[Rel, ...], value: float | int) -> View:
    """Pushes the padding condition down to every leaf of ``v``."""
    if isinstance(v, ArrV):
        return ArrV(v.n, v.elem, lambda i: guard(v.get(i), conds, value))
    if isinstance(v, TupV):
        return TupV(tuple(guard(e, conds, value) for e in v.elems))
    assert isinstance(v, Leaf)  # a view is an ArrV, a TupV or a Leaf
    default = _const(v.type, value)
    if isinstance(v, Sel) and isinstance(v.other, Const) and v.other.value == default.value:
        return Sel(conds + v.conds, v.then, v.other)  # nested pads with one value: one test
    return Sel(conds, v, default)


def map_view(x: ArrV, f: Callable[[View], View]) -> ArrV:
    """A view map: ``f`` applied lazily to every element."""
    first = f(x.get(0)) if x.n > 0 else None
    elem = first.type if first is not None else x.elem
    return ArrV(x.n, elem, lambda i: f(x.get(i)))


# ------------------------------------------------------------ write-side (inverses)


def inverse_join(dest: ArrV, m: int) -> ArrV:
    """Where ``e`` goes when ``join(e)`` is written to ``dest``."""
    return split(dest, m)


def inverse_split(dest: ArrV) -> ArrV:
    """Where ``e`` goes when ``split(m)(e)`` is written to ``dest``."""
    return join(dest)


def inverse_reorder(dest: ArrV, s: int) -> ArrV:
    """Where ``e`` goes when ``reorder(stride(s))(e)`` is written to ``dest``."""
    q = dest.n // s
    return ArrV(dest.n, dest.elem, lambda p: dest.get(p // q + s * (p % q)))


def unzip(dest: ArrV, k: int) -> ArrV:
    """Where component k goes when ``zip(...)`` is written to ``dest``."""
    t = dest.elem
    if not isinstance(t, TupleType):
        raise UnsupportedError(f"cannot write a zip into {dest.type}")
    return ArrV(dest.n, t.elems[k], lambda i: get(dest.get(i), k))


# --------------------------------------------------------------------------- vectors

_LANE = "_lane"


def lane_var(width: int) -> Expr:
    """The symbolic lane number of a vector of ``width`` lanes."""
    return register_var(Var(_LANE, 0, width - 1))


def resolve_vector(v: Leaf, what: str = "vector access") -> Leaf:
    """A vector leaf whose lanes are contiguous in memory (VecMem), constant, or a padding
    conditional of those. Raises :class:`UnvectorizableError` otherwise (CC'22 M5)."""
    if not isinstance(v, Lanes):
        return v
    w = v.type.width.as_int()
    if w not in OPENCL_VECTOR_WIDTHS:
        raise UnvectorizableError(
            f"vector width {w} is not an OpenCL vector type (use one of "
            f"{', '.join(map(str, OPENCL_VECTOR_WIDTHS))})")
    if w == 1:
        return _resolve(v.lanes.get(0), sym(0), v.type, what)
    lv = lane_var(w)
    return _resolve(v.lanes.get(lv), lv, v.type, what)


def _resolve(s: View, lv: Expr, vt: VectorType, what: str) -> Leaf:
    if isinstance(s, Mem):
        idx = normalize(s.idx) if lv != 0 else s.idx
        base = idx.subs({_LANE: 0})
        if idx - base != lv and lv != 0:
            raise UnvectorizableError(
                f"{what}: the {vt.width} lanes of this {vt} are not contiguous in "
                f"{getattr(s.buf, 'name', 'memory')} (lane k reads element {s.idx} with "
                f"{_LANE}=k); vectorise a map whose elements are consecutive in memory, "
                "or leave it scalar")
        return VecMem(s.buf, base, vt)
    if isinstance(s, Const):
        return Const(s.value, vt)
    if isinstance(s, Sel):
        if any(_LANE in c.free_vars() for c in s.conds):
            raise UnvectorizableError(
                f"{what}: padding splits the lanes of a {vt} (some lanes are padding, "
                "others data); pad by a multiple of the vector width or leave it scalar")
        return Sel(s.conds, _resolve(s.then, lv, vt, what), _resolve(s.other, lv, vt, what))
    if isinstance(s, Lanes):
        raise UnsupportedError("vector of vectors")
    raise UnvectorizableError(
        f"{what}: the lanes of this {vt} are computed values, not elements in memory; "
        "write them to memory first")
