"""Building blocks of ``ir.sym``: atoms, term dictionaries and interval bounds.

An expression's terms are a dict ``{monomial: coefficient}``; a monomial is a frozenset of
``(atom, exponent)`` pairs and a coefficient an ``int`` or a ``Fraction``. Nothing here builds
an ``Expr`` (``ir.sym_expr``, which is built on this module): the functions read the ``_t``,
``bounds()`` and ``free_vars()`` of the expressions they get (:class:`Poly`).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Protocol

_VAR, _FDIV, _MOD, _MIN, _MAX, _EDIV = range(6)
_KIND_NAMES = ("Var", "FloorDiv", "Mod", "Min", "Max", "ExactDiv")
_EMPTY: frozenset = frozenset()
_INF = math.inf
_new = object.__new__
_set = object.__setattr__


# ----------------------------------------------------------------------------- atoms
class _Atom:
    """A variable or an opaque node; the factors of monomials (internal)."""

    __slots__ = ("kind", "name", "p", "q", "lo", "hi", "_h", "_k", "_b", "_fv")
    # the caches of opaque nodes (_k, _b, _fv) start as None and are filled on first use
    _h: int
    _k: tuple | None
    _b: tuple[int | None, int | None] | None
    _fv: frozenset[str] | None

    def __init__(self, kind: int, name, p, q, lo=None, hi=None):
        self.kind = kind
        self.name = name
        self.p = p
        self.q = q
        self.lo = lo
        self.hi = hi
        if kind == _VAR:
            self._h = hash(name)
            self._k = (0, name)
            self._b = (lo, hi)
            self._fv = frozenset((name,))
        else:
            self._h = hash((kind, p, q))
            self._k = self._b = self._fv = None

    def __hash__(self) -> int:
        return self._h

    def __eq__(self, o) -> bool:
        if self is o:
            return True
        if self._h != o._h or self.kind != o.kind:
            return False
        if self.kind == _VAR:
            return self.name == o.name
        return self.p == o.p and self.q == o.q

    def key(self) -> tuple:
        """Deterministic sort key (variables by name, then opaque nodes by structure)."""
        k = self._k
        if k is None:
            k = self._k = (1, self.kind, _expr_key(self.p), _expr_key(self.q))
        return k

    def bounds(self) -> tuple[int | None, int | None]:
        b = self._b
        if b is None:
            b = self._b = _atom_bounds(self)
        return b

    def free_vars(self) -> frozenset:
        fv = self._fv
        if fv is None:
            fv = self._fv = self.p.free_vars() | self.q.free_vars()
        return fv

    def __reduce__(self):
        return (_Atom, (self.kind, self.name, self.p, self.q, self.lo, self.hi))

    def __repr__(self) -> str:  # debugging only
        if self.kind == _VAR:
            return f"Var({self.name!r})"
        return f"{_KIND_NAMES[self.kind]}({self.p}, {self.q})"


class Poly(Protocol):
    """An expression as read below ``ir.sym_expr`` (an ``Expr`` is one): its terms, and the
    cache slot of its sort key (:func:`_expr_key`)."""

    _t: dict[frozenset[tuple[_Atom, int]], int | Fraction]
    _k: tuple


# ------------------------------------------------------------------ polynomial helpers
def _nc(c):
    """Normalises a coefficient: a ``Fraction`` with denominator 1 becomes an ``int``."""
    if type(c) is int or c.denominator != 1:
        return c
    return c.numerator


def _const_of(t: dict):
    """The constant value of a term dict, or None when it is not constant."""
    if not t:
        return 0
    if len(t) == 1:
        return t.get(_EMPTY)
    return None


def _mono_mul(m1: frozenset, m2: frozenset) -> frozenset:
    if not m1:
        return m2
    if not m2:
        return m1
    d = dict(m1)
    for a, e in m2:
        x = d.get(a)
        if x is None:
            d[a] = e
        else:
            x += e
            if x:
                d[a] = x
            else:
                del d[a]
    return frozenset(d.items())


def _mono_inv(m: frozenset) -> frozenset:
    return frozenset((a, -e) for a, e in m)


def _mono_div_int(m: frozenset, qm: frozenset):
    """``m / qm`` if it has no negative exponent (an integer-valued product), else None."""
    d = dict(m)
    for a, e in qm:
        x = d.get(a, 0) - e
        if x:
            d[a] = x
        else:
            d.pop(a, None)
    for x in d.values():
        if x < 0:
            return None
    return frozenset(d.items()) if qm else m


def _coef_div(c, qc):
    if type(c) is int and type(qc) is int:
        if c % qc == 0:
            return c // qc
        return Fraction(c, qc)
    return _nc(Fraction(c) / qc)


def _coef_div_int(c, qc):
    """``c / qc`` when it is an integer, else None."""
    if type(c) is int and type(qc) is int:
        return c // qc if c % qc == 0 else None
    f = Fraction(c) / qc
    return f.numerator if f.denominator == 1 else None


def _add_terms(a: dict, b: dict) -> dict:
    if not b:
        return a
    if not a:
        return b
    r = dict(a)
    for m, c in b.items():
        x = r.get(m)
        if x is None:
            r[m] = c
        else:
            x = x + c
            if x:
                r[m] = x if type(x) is int else _nc(x)
            else:
                del r[m]
    return r


def _scale(t: dict, k) -> dict:
    if k == 1:
        return t
    if not k:
        return {}
    if type(k) is int:
        return {m: (c * k if type(c) is int else _nc(c * k)) for m, c in t.items()}
    return {m: _nc(c * k) for m, c in t.items()}


def _neg_terms(t: dict) -> dict:
    return {m: -c for m, c in t.items()}


def _mul_terms(a: dict, b: dict) -> dict:
    if not a or not b:
        return {}
    if len(b) == 1 and _EMPTY in b:
        return _scale(a, b[_EMPTY])
    if len(a) == 1 and _EMPTY in a:
        return _scale(b, a[_EMPTY])
    r: dict = {}
    for m1, c1 in a.items():
        for m2, c2 in b.items():
            m = _mono_mul(m1, m2)
            c = c1 * c2
            x = r.get(m)
            if x is not None:
                c = x + c
                if not c:
                    del r[m]
                    continue
            r[m] = c if type(c) is int else _nc(c)
    return r


def _divmod_term(t: dict) -> bool:
    """True when ``t`` is a single term with a ``//`` or ``%`` factor (may recombine)."""
    if len(t) != 1:
        return False
    for m in t:
        for a, _ in m:
            if a.kind == _MOD or a.kind == _FDIV:
                return True
    return False


def _recombine(t: dict) -> dict:
    """Rewrites ``k*q*(x//q) + k*(x % q)`` to ``k*x`` (q a monomial) in the terms ``t``
    (``t`` itself when there is nothing to rewrite)."""
    for m, k in t.items():
        if len(m) != 1:
            continue
        ((a, x),) = m
        if a.kind != _MOD or x != 1 or len(a.q._t) != 1:
            continue
        ((qm, qc),) = a.q._t.items()
        target = _mono_mul(frozenset(((_Atom(_FDIV, None, a.p, a.q), 1),)), qm)
        if t.get(target) == k * qc:
            r = dict(t)
            del r[m]
            del r[target]
            return _recombine(_add_terms(r, _scale(a.p._t, k)))
    return t


_MONO_KEYS: dict = {}


def _mono_key(m: frozenset) -> tuple:
    """Printing order of monomials: higher degree first, then by atoms; constant last."""
    k = _MONO_KEYS.get(m)
    if k is None:
        deg = -sum(e if e > 0 else -e for _, e in m)
        k = (not m, deg, tuple(sorted((a.key(), e) for a, e in m)))
        if len(_MONO_KEYS) > 20000:  # bounded: a long run stays flat
            _MONO_KEYS.clear()
        _MONO_KEYS[m] = k
    return k


def _expr_key(e: Poly) -> tuple:
    """Deterministic structural sort key of an expression (independent of hash seeds)."""
    try:
        return e._k
    except AttributeError:
        pass
    k = tuple(sorted((_mono_key(m), c) for m, c in e._t.items()))
    _set(e, "_k", k)
    return k

# ------------------------------------------------------------------------------ bounds
def _m(x, y):
    return 0 if (x == 0 or y == 0) else x * y


def _imul(l1, h1, l2, h2):
    if l1 >= 0 and l2 >= 0:
        return _m(l1, l2), _m(h1, h2)
    ps = (_m(l1, l2), _m(l1, h2), _m(h1, l2), _m(h1, h2))
    return min(ps), max(ps)


def _ipow(lo, hi, e):
    if e < 0:
        if lo > 0:
            lo, hi = (0 if hi == _INF else Fraction(1, hi)), Fraction(1, lo)
        elif hi < 0:
            lo, hi = Fraction(1, hi), (0 if lo == -_INF else Fraction(1, lo))
        else:
            return -_INF, _INF
        e = -e
        if e == 1:
            return lo, hi
    if e % 2 == 0:
        if lo >= 0:
            return lo**e, hi**e
        if hi <= 0:
            return hi**e, lo**e
        return 0, max(lo**e, hi**e)
    return lo**e, hi**e


def _poly_bounds(t: dict) -> tuple[int | None, int | None]:
    lo = hi = 0
    for m, c in t.items():
        lt = ht = c
        for a, e in m:
            al, ah = a.bounds()
            al = -_INF if al is None else al
            ah = _INF if ah is None else ah
            if e != 1:
                al, ah = _ipow(al, ah, e)
            lt, ht = _imul(lt, ht, al, ah)
        lo += lt
        hi += ht
        if lo == -_INF and hi == _INF:
            return (None, None)
    return (None if lo == -_INF else math.ceil(lo), None if hi == _INF else math.floor(hi))


def _neg_b(x):
    return None if x is None else -x


def _decide_sign(op: str, lo: int | None, hi: int | None) -> bool | None:
    """Whether ``d op 0`` holds for every ``d`` in ``[lo, hi]`` (True), for none (False), or
    depends on ``d`` (None); ``op`` is one of ``== != < <= > >=``, a bound None is unbounded."""
    if op in ("==", "!="):
        if lo == 0 and hi == 0:
            r = True
        elif (lo is not None and lo > 0) or (hi is not None and hi < 0):
            r = False
        else:
            return None
        return r if op == "==" else not r
    if op in (">", ">="):
        lo, hi = _neg_b(hi), _neg_b(lo)  # d > 0  <=>  -d < 0
        op = "<" if op == ">" else "<="
    if op == "<":
        if hi is not None and hi < 0:
            return True
        if lo is not None and lo >= 0:
            return False
    else:
        if hi is not None and hi <= 0:
            return True
        if lo is not None and lo > 0:
            return False
    return None


def _fdiv_bounds(pl, ph, ql, qh):
    """Bounds of ``p // q`` for ``q >= ql >= 1``."""
    if pl is None:
        lo = None
    elif pl >= 0:
        lo = 0 if qh is None else pl // qh
    else:
        lo = pl // ql
    if ph is None:
        hi = None
    elif ph >= 0:
        hi = ph // ql
    else:
        hi = -1 if qh is None else ph // qh
    return lo, hi


def _atom_bounds(a: _Atom) -> tuple[int | None, int | None]:
    k = a.kind
    pl, ph = a.p.bounds()
    ql, qh = a.q.bounds()
    if k == _MIN:
        lo = None if pl is None or ql is None else min(pl, ql)
        hi = ph if qh is None else (qh if ph is None else min(ph, qh))
        return lo, hi
    if k == _MAX:
        lo = pl if ql is None else (ql if pl is None else max(pl, ql))
        hi = None if ph is None or qh is None else max(ph, qh)
        return lo, hi
    if k == _FDIV:
        if ql is not None and ql >= 1:
            return _fdiv_bounds(pl, ph, ql, qh)
        if qh is not None and qh <= -1:
            return _fdiv_bounds(_neg_b(ph), _neg_b(pl), -qh, _neg_b(ql))
        return None, None
    if k == _MOD:
        if ql is not None and ql >= 1:
            hi = None if qh is None else qh - 1
            if pl is not None and pl >= 0 and ph is not None:
                hi = ph if hi is None else min(hi, ph)
            return 0, hi
        if qh is not None and qh <= -1:
            lo = None if ql is None else ql + 1
            if ph is not None and ph <= 0 and pl is not None:
                lo = pl if lo is None else max(lo, pl)
            return lo, 0
        return None, None
    # exact division by a polynomial: interval p * (1/q)
    if (ql is None or ql < 1) and (qh is None or qh > -1):
        return None, None
    il, ih = _ipow(-_INF if ql is None else ql, _INF if qh is None else qh, -1)
    lo, hi = _imul(-_INF if pl is None else pl, _INF if ph is None else ph, il, ih)
    return (None if lo == -_INF else math.ceil(lo), None if hi == _INF else math.floor(hi))


