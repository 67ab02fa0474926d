"""Symbolic integer expressions: array sizes, tuning parameters, index expressions.

An :class:`Expr` is always kept in a canonical form, so ``==`` is structural equality:

* a *polynomial*: a sum of monomials with rational coefficients (``int`` when integral);
* a *monomial* is a product of *atoms* with non-zero integer exponents; a negative
  exponent comes from exact division (``N/s`` is ``N*s^-1``, so ``(N/s)*s`` is ``N``);
* an *atom* is a variable or one of the opaque nodes ``FloorDiv(p, q)``, ``Mod(p, q)``,
  ``Min(p, q)``, ``Max(p, q)`` and ``ExactDiv(p, q)`` (exact division by a polynomial that
  is not a monomial and does not divide the numerator).

``/`` is *exact* division (the quotient is known to be an integer, like LIFT's type-level
``n/m`` after ``split(m)``); ``//`` and ``%`` are Python's floor division and modulo.
Simplification happens on construction and uses the variables' ranges (``Var('j', 0, 3)``).

Variable ranges are metadata: two ``Var`` with the same name are the same variable and compare
equal whatever their ranges.  Each ``Var`` object keeps the range it was given; if one
expression mixes the same name with different ranges, the range of the left-most operand
is the one kept.  To re-range, substitute: ``e.subs({'i': Var('i', 0, 7)})``.

Floor division splits ``p = q*A + r`` only into genuine integer polynomials ``A`` (integer
coefficients, no negative exponents): ``(4*N + j)//4`` is ``N + j//4`` but ``(4*(N/s))//4``
stays opaque, since ``4*(N/s)`` integral does not make ``N/s`` integral after substitution.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction

__all__ = [
    "SymbolicError",
    "UnboundSizeError",
    "NonIntegralError",
    "SymbolicZeroDivisionError",
    "Expr",
    "Rel",
    "Cst",
    "Var",
    "sym",
    "smin",
    "smax",
    "parse_expr",
    "assume_divisible",
]


class SymbolicError(Exception):
    """Base class of the errors of symbolic expressions."""


class UnboundSizeError(SymbolicError):
    """``evaluate`` found a variable without a value."""


class NonIntegralError(SymbolicError):
    """An exact division is not integral for the values given (or a constant is a fraction)."""


class SymbolicZeroDivisionError(SymbolicError):
    """Division or modulo by zero."""


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


def _atom_expr(kind: int, p: Expr, q: Expr) -> Expr:
    return _mk({frozenset(((_Atom(kind, None, p, q), 1),)): 1})


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


_MONO_KEYS: dict = {}


def _mono_key(m: frozenset) -> tuple:
    """Printing order of monomials: higher degree first, then by atoms; constant last."""
    k = _MONO_KEYS.get(m)
    if k is None:
        deg = -sum(e if e > 0 else -e for _, e in m)
        k = (not m, deg, tuple(sorted((a.key(), e) for a, e in m)))
        if len(_MONO_KEYS) > 100000:
            _MONO_KEYS.clear()
        _MONO_KEYS[m] = k
    return k


def _expr_key(e: Expr) -> tuple:
    """Deterministic structural sort key of an expression (independent of hash seeds)."""
    try:
        return e._k
    except AttributeError:
        pass
    k = tuple(sorted((_mono_key(m), c) for m, c in e._t.items()))
    _set(e, "_k", k)
    return k


# ------------------------------------------------------------------------------- Expr
def _mk(t: dict) -> Expr:
    e = _new(Expr)
    _set(e, "_t", t)
    return e


class Expr:
    """An immutable symbolic integer expression in canonical form (see the module docstring).

    ``Expr(x)`` accepts an ``int``, an ``Expr`` or a string (parsed, see :func:`parse_expr`).
    """

    __slots__ = ("_t", "_h", "_s", "_c", "_b", "_fv", "_ts", "_tc", "_k")

    def __init__(self, x: int | str | Expr = 0):
        _set(self, "_t", _coerce_strict(x)._t)

    def __setattr__(self, name, value):
        raise AttributeError("Expr is immutable")

    def __delattr__(self, name):
        raise AttributeError("Expr is immutable")

    def __reduce__(self):
        return (_mk, (self._t,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    # ---------------------------------------------------------------- identity
    def __hash__(self) -> int:
        try:
            return self._h
        except AttributeError:
            pass
        t = self._t
        c = _const_of(t)
        h = hash(c) if c is not None else hash(frozenset(t.items()))
        _set(self, "_h", h)
        return h

    def __eq__(self, o) -> bool:
        if type(o) is Expr:
            return self is o or self._t == o._t
        if isinstance(o, int):
            t = self._t
            if not o:
                return not t
            return len(t) == 1 and t.get(_EMPTY) == o
        return NotImplemented

    def __ne__(self, o) -> bool:
        r = self.__eq__(o)
        return r if r is NotImplemented else not r

    # ---------------------------------------------------------------- arithmetic
    def __add__(self, o) -> Expr:
        if type(o) is int:
            if not o:
                return self
            t = dict(self._t)
            c = t.get(_EMPTY, 0) + o
            if c:
                t[_EMPTY] = c if type(c) is int else _nc(c)
            else:
                del t[_EMPTY]
            return _mk(t)
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _add(self, o)

    def __radd__(self, o) -> Expr:
        if type(o) is int:
            return self.__add__(o)
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _add(o, self)

    def __sub__(self, o) -> Expr:
        if type(o) is int:
            return self.__add__(-o)
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _add(self, _mk(_neg_terms(o._t)))

    def __rsub__(self, o) -> Expr:
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _add(o, _mk(_neg_terms(self._t)))

    def __neg__(self) -> Expr:
        return _mk(_neg_terms(self._t))

    def __pos__(self) -> Expr:
        return self

    def __mul__(self, o) -> Expr:
        if type(o) is int:
            if o == 1:
                return self
            return _mk(_scale(self._t, o))
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _mul(self, o)

    def __rmul__(self, o) -> Expr:
        if type(o) is int:
            return self.__mul__(o)
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _mul(o, self)

    def __truediv__(self, o) -> Expr:
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _exact_div(self, o)

    def __rtruediv__(self, o) -> Expr:
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _exact_div(o, self)

    def __floordiv__(self, o) -> Expr:
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _fdiv(self, o, False)

    def __rfloordiv__(self, o) -> Expr:
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _fdiv(o, self, False)

    def __mod__(self, o) -> Expr:
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _fdiv(self, o, True)

    def __rmod__(self, o) -> Expr:
        o = _opnd(o)
        if o is None:
            return NotImplemented
        return _fdiv(o, self, True)

    # ---------------------------------------------------------------- relations
    def eq(self, o: int | str | Expr) -> Rel:
        """The relation ``self == o``."""
        return Rel("==", self, o)

    def ne(self, o: int | str | Expr) -> Rel:
        """The relation ``self != o``."""
        return Rel("!=", self, o)

    def lt(self, o: int | str | Expr) -> Rel:
        """The relation ``self < o``."""
        return Rel("<", self, o)

    def le(self, o: int | str | Expr) -> Rel:
        """The relation ``self <= o``."""
        return Rel("<=", self, o)

    def gt(self, o: int | str | Expr) -> Rel:
        """The relation ``self > o``."""
        return Rel(">", self, o)

    def ge(self, o: int | str | Expr) -> Rel:
        """The relation ``self >= o``."""
        return Rel(">=", self, o)

    # ---------------------------------------------------------------- queries
    @property
    def is_const(self) -> bool:
        """True when the expression is a constant (possibly a fraction, see ``as_int``)."""
        t = self._t
        return not t or (len(t) == 1 and _EMPTY in t)

    @property
    def is_var(self) -> bool:
        """True when the expression is a single variable."""
        a = _single_atom(self)
        return a is not None and a.kind == _VAR

    @property
    def name(self) -> str:
        """The name of a single variable (SymbolicError otherwise)."""
        a = _single_atom(self)
        if a is None or a.kind != _VAR:
            raise SymbolicError(f"{self} is not a variable")
        return a.name

    def as_int(self) -> int:
        """The value of a constant expression; SymbolicError if it is not constant."""
        c = _const_of(self._t)
        if c is None:
            raise SymbolicError(f"{self} is not a constant")
        if type(c) is not int:
            raise NonIntegralError(f"{self} is not an integer")
        return c

    def free_vars(self) -> frozenset[str]:
        """Names of the variables the expression depends on."""
        try:
            return self._fv
        except AttributeError:
            pass
        fv: frozenset = _EMPTY
        for m in self._t:
            for a, _ in m:
                fv = fv | a.free_vars() if fv else a.free_vars()
        _set(self, "_fv", fv)
        return fv

    def var_ranges(self) -> dict[str, tuple[int | None, int | None]]:
        """The declared range ``(lo, hi)`` of every variable in the expression."""
        out: dict[str, tuple[int | None, int | None]] = {}

        def visit(a) -> None:
            if a.kind == _VAR:
                out.setdefault(a.name, (a.lo, a.hi))
                return
            for sub in (a.p, a.q):
                if isinstance(sub, Expr):
                    for v, r in sub.var_ranges().items():
                        out.setdefault(v, r)

        for m in self._t:
            for a, _ in m:
                visit(a)
        return out

    def bounds(self) -> tuple[int | None, int | None]:
        """Interval ``(lo, hi)`` (inclusive; None = unbounded) from the variables' ranges."""
        try:
            return self._b
        except AttributeError:
            pass
        b = _poly_bounds(self._t)
        _set(self, "_b", b)
        return b

    # ---------------------------------------------------------------- substitution
    def subs(self, mapping: Mapping[str, int | str | Expr]) -> Expr:
        """Simultaneous substitution of variables (names or Vars) by ints or expressions."""
        if not mapping:
            return self
        keys = mapping.keys()
        for k in keys:
            if type(k) is not str:  # a Var used as key
                mapping = {(k.name if isinstance(k, Expr) else k): v for k, v in mapping.items()}
                keys = mapping.keys()
                break
        if self.free_vars().isdisjoint(keys):
            return self
        mp = {k: _coerce_strict(v) for k, v in mapping.items()}

        def fatom(a: _Atom):
            if a.kind == _VAR:
                return mp.get(a.name)
            if a.free_vars().isdisjoint(mp.keys()):
                return None
            return _make_op(a.kind, _map_atoms(a.p, fatom), _map_atoms(a.q, fatom))

        return _map_atoms(self, fatom)

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The integer value for the given variable values.

        Raises UnboundSizeError (a variable has no value), NonIntegralError (an exact
        division is not integral) or SymbolicZeroDivisionError.
        """
        try:
            v = _eval(self, env)
        except KeyError:
            missing = sorted(self.free_vars() - env.keys())
            if not missing:
                raise
            raise UnboundSizeError(
                f"no value for {', '.join(missing)} in {self}"
            ) from None
        except _NonIntegral as ex:
            raise NonIntegralError(
                f"exact division not integral in {self}: {ex.args[0]} = {ex.args[1]}"
                f" for {_show_env(self, env)}"
            ) from None
        if type(v) is not int:
            if v.denominator != 1:
                raise NonIntegralError(
                    f"exact division not integral: {self} = {v} for {_show_env(self, env)}"
                )
            v = v.numerator
        return v

    # ---------------------------------------------------------------- printing
    def __str__(self) -> str:
        try:
            return self._s
        except AttributeError:
            pass
        s = _fmt(_tree(self, False), False)[0]
        _set(self, "_s", s)
        return s

    def __repr__(self) -> str:
        return f"Expr({str(self)!r})"

    def to_c(self) -> str:
        """OpenCL C99 text: ``//`` and exact ``/`` both print as ``/``.

        Fractional terms share one denominator, so C's truncating ``/`` is exact there.
        Floor division and ``%`` match C only for non-negative operands.
        """
        try:
            return self._c
        except AttributeError:
            pass
        s = _fmt(_tree(self, True), True)[0]
        _set(self, "_c", s)
        return s

    def to_tree(self) -> tuple:
        """The printed structure as nested tuples, for other back ends.

        Nodes: ``('int', n)`` (n >= 0), ``('var', name)``, ``('neg', x)``,
        ``('add', (x, ...))``, ``('mul', (x, ...))``, ``('div', a, b)`` (exact; one common
        denominator per expression, as in ``to_c``), ``('floordiv', a, b)``, ``('mod', a, b)``,
        ``('min', a, b)``, ``('max', a, b)``.
        """
        return _tree(self, True)


# ------------------------------------------------------------------------ constructors
_CST_CACHE = {i: _mk({_EMPTY: i} if i else {}) for i in range(-16, 257)}
_ZERO = _CST_CACHE[0]
_ONE = _CST_CACHE[1]
_VAR_CACHE: dict = {}


def Cst(n: int) -> Expr:  # noqa: N802  (API name)
    """The constant ``n``."""
    e = _CST_CACHE.get(n) if type(n) is int else None
    if e is not None:
        return e
    if type(n) is not int:
        if isinstance(n, float) or not hasattr(n, "__index__"):
            raise TypeError(f"Cst expects an int, got {type(n).__name__}")
        n = operator.index(n)
        if not n:
            return _ZERO
    return _mk({_EMPTY: n})


def Var(name: str, lo: int | None = None, hi: int | None = None) -> Expr:  # noqa: N802
    """The variable ``name`` with the optional inclusive range ``[lo, hi]``."""
    key = (name, lo, hi)
    e = _VAR_CACHE.get(key)
    if e is not None:
        return e
    if not isinstance(name, str) or not name.isidentifier() or name in ("min", "max"):
        raise SymbolicError(f"invalid variable name {name!r}")
    if lo is not None:
        lo = operator.index(lo)
    if hi is not None:
        hi = operator.index(hi)
    if lo is not None and hi is not None and lo > hi:
        raise SymbolicError(f"empty range [{lo}, {hi}] for {name}")
    e = _mk({frozenset(((_Atom(_VAR, name, None, None, lo, hi), 1),)): 1})
    if len(_VAR_CACHE) > 50000:
        _VAR_CACHE.clear()
    _VAR_CACHE[key] = e
    return e


def sym(x: int | str | Expr) -> Expr:
    """Coerces to ``Expr``: an int is a constant, an identifier a ``Var``, other text is parsed."""
    if type(x) is Expr:
        return x
    return _coerce_strict(x)


def _coerce_strict(x) -> Expr:
    e = _opnd(x)
    if e is None:
        raise TypeError(f"cannot make a symbolic expression from {type(x).__name__}")
    return e


def _opnd(x):
    """Coerces an operand, or None when the type is not supported."""
    if type(x) is Expr:
        return x
    if type(x) is int:
        e = _CST_CACHE.get(x)
        return e if e is not None else _mk({_EMPTY: x})
    if isinstance(x, str):
        return Var(x) if x.isidentifier() and x not in ("min", "max") else parse_expr(x)
    if isinstance(x, Expr):
        return x
    if isinstance(x, float) or not hasattr(x, "__index__"):
        return None
    return Cst(operator.index(x))


def smin(a: int | str | Expr, b: int | str | Expr) -> Expr:
    """Symbolic ``min(a, b)``."""
    return _minmax(_coerce_strict(a), _coerce_strict(b), _MIN)


def smax(a: int | str | Expr, b: int | str | Expr) -> Expr:
    """Symbolic ``max(a, b)``."""
    return _minmax(_coerce_strict(a), _coerce_strict(b), _MAX)


# -------------------------------------------------------------------------- operations
def _single_atom(e: Expr):
    """The atom if ``e`` is exactly ``1*atom^1``, else None."""
    t = e._t
    if len(t) != 1:
        return None
    for m, c in t.items():
        if c != 1 or len(m) != 1:
            return None
        for a, x in m:
            return a if x == 1 else None
    return None


def _divmod_term(t: dict) -> bool:
    """True when ``t`` is a single term with a ``//`` or ``%`` factor (may recombine)."""
    if len(t) != 1:
        return False
    for m in t:
        for a, _ in m:
            if a.kind == _MOD or a.kind == _FDIV:
                return True
    return False


def _add(a: Expr, b: Expr) -> Expr:
    at, bt = a._t, b._t
    t = _add_terms(at, bt)
    if t is at:
        return a
    if t is bt:
        return b
    e = _mk(t)
    if len(t) >= 2 and (_divmod_term(bt) or _divmod_term(at)):
        e = _recombine(e)
    return e


def _recombine(e: Expr) -> Expr:
    """Rewrites ``k*q*(x//q) + k*(x % q)`` to ``k*x`` (q a monomial)."""
    t = e._t
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
            return _recombine(_mk(_add_terms(r, _scale(a.p._t, k))))
    return e


def _mul(a: Expr, b: Expr) -> Expr:
    at, bt = a._t, b._t
    if len(at) == 1 and len(bt) > 1:
        r = _cancel_ediv(a, b)
        if r is not None:
            return r
    elif len(bt) == 1 and len(at) > 1:
        r = _cancel_ediv(b, a)
        if r is not None:
            return r
    return _mk(_mul_terms(at, bt))


def _cancel_ediv(a: Expr, b: Expr):
    """``(c*m*ExactDiv(p, q)) * (k*q)`` is ``c*m*p*k`` (k a monomial)."""
    ((m, c),) = a._t.items()
    for at, x in m:
        if at.kind == _EDIV and x == 1 and len(at.q._t) == len(b._t):
            k = _ONE if at.q == b else _poly_div(b, at.q)
            if k is not None and len(k._t) == 1:
                rest = _mk({frozenset(pair for pair in m if pair[0] is not at): c})
                return _mul(_mul(rest, at.p), k)
    return None


def _exact_div(p: Expr, q: Expr) -> Expr:
    qt = q._t
    pt = p._t
    if not qt:
        raise SymbolicZeroDivisionError(f"exact division by zero: {p}/0")
    if len(qt) == 1:
        ((qm, qc),) = qt.items()
        if not qm:
            if qc == 1:
                return p
            return _mk({m: _coef_div(c, qc) for m, c in pt.items()})
        inv = _mono_inv(qm)
        return _mk({_mono_mul(m, inv): _coef_div(c, qc) for m, c in pt.items()})
    if not pt:
        return _ZERO
    if p == q:
        return _ONE
    # q = c*g*q' with q' having coprime integer coefficients, no common monomial factor and
    # a positive leading term (c is taken from q/g, whose leading term may differ from q's)
    g = _common_mono(qt)
    ginv = _mono_inv(g)
    c = _content({_mono_mul(m, ginv): x for m, x in qt.items()})
    cg = _mk({g: c})
    p2 = _exact_div(p, cg)
    q2 = _exact_div(q, cg)
    quo = _poly_div(p2, q2)
    if quo is not None:
        return quo
    # the sign of the numerator is normalised too: (-a)/q is stored as -1*(a/q), so that
    # -(a/q) and (-a)/q are one canonical form (sound: -a is divisible by q iff a is; this
    # is not done for // and %, since (-a)//q != -(a//q))
    p2t = p2._t
    if p2t[min(p2t, key=_mono_key)] < 0:
        return -_atom_expr(_EDIV, _mk(_neg_terms(p2t)), q2)
    return _atom_expr(_EDIV, p2, q2)


def _common_mono(t: dict) -> frozenset:
    """The monomial ``g`` with, per atom, the least exponent over the terms (absent = 0)."""
    ds = [dict(m) for m in t]
    atoms = {a for d in ds for a in d}
    g = {}
    for a in atoms:
        e = min(d.get(a, 0) for d in ds)
        if e:
            g[a] = e
    return frozenset(g.items())


def _content(t: dict):
    """Positive rational gcd of the coefficients, signed so that the leading term is positive."""
    num = 0
    den = 1
    for c in t.values():
        if type(c) is int:
            num = math.gcd(num, c)
        else:
            num = math.gcd(num, c.numerator)
            den = den * c.denominator // math.gcd(den, c.denominator)
    lead = min(t, key=_mono_key)
    g = _nc(Fraction(num, den))
    return -g if t[lead] < 0 else g


def _poly_div(p: Expr, q: Expr):
    """Exact quotient ``p / q`` by multivariate division (lex order), or None."""
    pt, qt = p._t, q._t
    atoms = sorted({a for m in pt for a, _ in m} | {a for m in qt for a, _ in m},
                   key=lambda a: a.key())
    idx = {a: i for i, a in enumerate(atoms)}
    n = len(atoms)

    def vec(m):
        v = [0] * n
        for a, e in m:
            v[idx[a]] = e
        return tuple(v)

    lq = max(qt, key=vec)
    lc = qt[lq]
    linv = _mono_inv(lq)
    r = dict(pt)
    quo: dict = {}
    for _ in range(4 * (len(pt) + len(qt)) + 16):
        if not r:
            return _mk(quo)
        mr = max(r, key=vec)
        c = _coef_div(r[mr], lc)
        mm = _mono_mul(mr, linv)
        quo = _add_terms(quo, {mm: c})
        r = _add_terms(r, {_mono_mul(m, mm): _nc(-c * x) for m, x in qt.items()})
    return None


def _is_int_poly(e: Expr) -> bool:
    for m, c in e._t.items():
        if type(c) is not int:
            return False
        for a, x in m:
            if x < 0 or a.kind == _EDIV:
                return False
    return True


def _int_quotient(p: Expr, q: Expr):
    """``p / q`` when q divides p with an integer-valued quotient, else None."""
    qt = q._t
    if len(qt) == 1:
        ((qm, qc),) = qt.items()
        if not qc:
            return None
        out = {}
        for m, c in p._t.items():
            k = _coef_div_int(c, qc)
            if k is None:
                return None
            mm = _mono_div_int(m, qm)
            if mm is None:
                return None
            out[mm] = k
        return _mk(out)
    if p == q:
        return _ONE
    quo = _poly_div(p, q)
    return quo if quo is not None and _is_int_poly(quo) else None


def _fdiv(p: Expr, q: Expr, mod: bool) -> Expr:
    """Floor division (``mod`` False) or modulo (``mod`` True), simplified."""
    qt = q._t
    pt = p._t
    qc = _const_of(qt)
    if qc is not None:
        if not qc:
            raise SymbolicZeroDivisionError(f"division by zero: {p} {'%' if mod else '//'} 0")
        if type(qc) is not int:
            raise NonIntegralError(f"non-integral divisor {q}")
        pc = _const_of(pt)
        if pc is not None:
            if type(pc) is not int:
                raise NonIntegralError(f"non-integral dividend {p}")
            return Cst(pc % qc if mod else pc // qc)
        if qc == 1:
            return _ZERO if mod else p
        if qc == -1:
            return _ZERO if mod else _mk(_neg_terms(pt))
    if not pt:
        return _ZERO
    if p == q:
        return _ZERO if mod else _ONE
    if len(qt) == 1:
        ((qm, qcoef),) = qt.items()
        quo: dict = {}
        rest: dict = {}
        for m, c in pt.items():
            k = _coef_div_int(c, qcoef)
            if k is not None:
                mm = _mono_div_int(m, qm)
                if mm is not None:
                    quo[mm] = k
                    continue
            rest[m] = c
        if not rest:
            return _ZERO if mod else _mk(quo)
        if quo:
            sub = _fdiv_rest(_mk(rest), q, mod)
            return sub if mod else _add(_mk(quo), sub)
    else:
        k = _int_quotient(p, q)
        if k is not None:
            return _ZERO if mod else k
    return _fdiv_rest(p, q, mod)


def _fdiv_rest(r: Expr, q: Expr, mod: bool) -> Expr:
    """``r // q`` or ``r % q`` after splitting off the multiples of q."""
    qlo, qhi = q.bounds()
    pos = qlo is not None and qlo >= 1
    if pos or (qhi is not None and qhi <= -1):
        rlo, rhi = r.bounds()
        if pos:
            flo, fhi = _fdiv_bounds(rlo, rhi, qlo, qhi)
        else:  # r // q == (-r) // (-q)
            flo, fhi = _fdiv_bounds(_neg_b(rhi), _neg_b(rlo), -qhi, _neg_b(qlo))
        if flo is not None and flo == fhi:  # the quotient is known: r // q == flo
            return _add(r, _mul(q, Cst(-flo))) if mod else Cst(flo)
    if pos:
        if rlo is not None and rlo >= 0 and not q.is_const:
            dlo = (q - r).bounds()[0]
            if dlo is not None and dlo >= 1:  # 0 <= r <= q - 1
                return r if mod else _ZERO
    a = _single_atom(r)
    if a is not None:
        if a.kind == _MOD:
            if mod:
                if a.q == q or _int_quotient(a.q, q) is not None:
                    return _fdiv(a.p, q, True)  # (x % (k*q)) % q == x % q
            elif a.q == q:
                return _ZERO  # (x % q) // q == 0
        elif a.kind == _FDIV and not mod and qlo is not None and qlo >= 1:
            blo = a.q.bounds()[0]
            if blo is not None and blo >= 1:
                return _fdiv(a.p, _mul(a.q, q), False)  # (x // b) // q == x // (b*q)
    return _atom_expr(_MOD if mod else _FDIV, r, q)


def _minmax(a: Expr, b: Expr, kind: int) -> Expr:
    if a == b:
        return a
    d = a - b
    dc = _const_of(d._t)
    if dc is not None:
        if kind == _MIN:
            return a if dc <= 0 else b
        return a if dc >= 0 else b
    lo, hi = d.bounds()
    if kind == _MIN:
        if hi is not None and hi <= 0:
            return a
        if lo is not None and lo >= 0:
            return b
    else:
        if lo is not None and lo >= 0:
            return a
        if hi is not None and hi <= 0:
            return b
    if _expr_key(a) > _expr_key(b):
        a, b = b, a
    return _atom_expr(kind, a, b)


def _make_op(kind: int, p: Expr, q: Expr) -> Expr:
    if kind == _FDIV:
        return _fdiv(p, q, False)
    if kind == _MOD:
        return _fdiv(p, q, True)
    if kind == _EDIV:
        return _exact_div(p, q)
    return _minmax(p, q, kind)


def _map_atoms(e: Expr, fatom) -> Expr:
    """Rebuilds ``e`` with each atom replaced by ``fatom(atom)`` (None keeps the atom)."""
    kept: dict = {}
    out = None
    for m, c in e._t.items():
        changed = None
        for a, x in m:
            r = fatom(a)
            if r is not None:
                if changed is None:
                    changed = []
                changed.append((a, x, r))
        if changed is None:
            kept[m] = c
            continue
        ch = {a for a, _, _ in changed}
        term = _mk({frozenset(pair for pair in m if pair[0] not in ch): c})
        den = None
        for _, x, r in changed:
            if x > 0:
                for _ in range(x):
                    term = _mul(term, r)
            else:
                for _ in range(-x):
                    den = r if den is None else _mul(den, r)
        if den is not None:
            term = _exact_div(term, den)
        out = term if out is None else _add(out, term)
    if out is None:
        return e
    return _add(_mk(kept), out) if kept else out


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


# -------------------------------------------------------------------------- evaluation
class _NonIntegral(Exception):
    pass


def _show_env(e: Expr, env: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={env[k]}" for k in sorted(e.free_vars()) if k in env) or "{}"


def _ival(x, name: str) -> int:
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float) or not hasattr(x, "__index__"):
        raise SymbolicError(f"value of {name} must be an integer, got {x!r}")
    return operator.index(x)


def _eval_int(e: Expr, env) -> int:
    v = _eval(e, env)
    if type(v) is not int:
        if v.denominator != 1:
            raise _NonIntegral(str(e), v)
        v = v.numerator
    return v


def _eval(e: Expr, env):
    total = 0
    for m, c in e._t.items():
        v = c
        for a, x in m:
            if a.kind == _VAR:
                y = env[a.name]
                if type(y) is not int:
                    y = _ival(y, a.name)
            else:
                y = _eval_atom(a, env)
            if x == 1:
                v = v * y
            elif x > 0:
                v = v * y**x
            else:
                if not y:
                    raise SymbolicZeroDivisionError(
                        f"division by zero in {e}: {_mk({frozenset(((a, 1),)): 1})} is 0")
                v = Fraction(v, y**-x) if type(v) is int else v / y**-x
        total += v
    return total


def _eval_atom(a: _Atom, env):
    k = a.kind
    p = _eval_int(a.p, env)
    q = _eval_int(a.q, env)
    if k == _MIN:
        return p if p <= q else q
    if k == _MAX:
        return p if p >= q else q
    if not q:
        raise SymbolicZeroDivisionError(f"division by zero in {_mk({frozenset(((a, 1),)): 1})}")
    if k == _FDIV:
        return p // q
    if k == _MOD:
        return p % q
    if p % q:
        raise _NonIntegral(f"{a.p}/({a.q})", Fraction(p, q))
    return p // q


# ---------------------------------------------------------------------------- printing
def _tree(e: Expr, merge: bool) -> tuple:
    """Printing structure (cached); ``merge`` puts all fractional terms over one denominator."""
    slot = "_tc" if merge else "_ts"
    try:
        return getattr(e, slot)
    except AttributeError:
        pass
    tr = _make_tree(e, merge)
    _set(e, slot, tr)
    return tr


def _make_tree(e: Expr, merge: bool) -> tuple:
    t = e._t
    if not t:
        return ("int", 0)
    items = sorted(t.items(), key=lambda mc: _mono_key(mc[0]))
    order: list = []
    groups: dict = {}
    for m, c in items:
        d = 1 if type(c) is int else c.denominator
        neg = any(x < 0 for _, x in m)
        if d == 1 and not neg:
            order.append((False, _term_tree(c, m, merge)))
            continue
        gk = None if merge else frozenset(pair for pair in m if pair[1] < 0)
        g = groups.get(gk)
        if g is None:
            g = groups[gk] = []
            order.append((True, gk))
        g.append((c, m))
    out = [_group_tree(groups[x], merge) if is_group else x for is_group, x in order]
    return out[0] if len(out) == 1 else ("add", tuple(out))


def _group_tree(terms: list, merge: bool) -> tuple:
    den = 1
    q: dict = {}
    for c, m in terms:
        if type(c) is not int:
            den = den * c.denominator // math.gcd(den, c.denominator)
        for a, x in m:
            if x < 0 and -x > q.get(a, 0):
                q[a] = -x
    qm = frozenset(q.items())
    nums = sorted(((_nc(c * den), _mono_mul(m, qm)) for c, m in terms),
                  key=lambda cm: _mono_key(cm[1]))
    flip = all(c < 0 for c, _ in nums)
    if flip:
        nums = [(-c, m) for c, m in nums]
    parts = [_term_tree(c, m, merge) for c, m in nums]
    num = parts[0] if len(parts) == 1 else ("add", tuple(parts))
    dnode = _term_tree(den, qm, merge)
    node = ("div", num, dnode)
    return ("neg", node) if flip else node


def _term_tree(c: int, m: frozenset, merge: bool) -> tuple:
    factors: list = []
    for a, x in sorted(m, key=lambda ax: ax[0].key()):
        f = _atom_tree(a, merge)
        factors.extend([f] * x)
    k = -c if c < 0 else c
    if not factors:
        node = ("int", k)
    elif k == 1:
        node = factors[0] if len(factors) == 1 else ("mul", tuple(factors))
    else:
        node = ("mul", (("int", k), *factors))
    return ("neg", node) if c < 0 else node


_ATOM_TAGS = {_FDIV: "floordiv", _MOD: "mod", _MIN: "min", _MAX: "max", _EDIV: "div"}


def _atom_tree(a: _Atom, merge: bool) -> tuple:
    if a.kind == _VAR:
        return ("var", a.name)
    return (_ATOM_TAGS[a.kind], _tree(a.p, merge), _tree(a.q, merge))


def _paren(sp: tuple, need: bool) -> str:
    return f"({sp[0]})" if need else sp[0]


def _fmt(n: tuple, c: bool) -> tuple[str, int]:
    """Text and precedence (0 sum, 1 product level, 2 atomic) of a printing tree."""
    tag = n[0]
    if tag == "int":
        return str(n[1]), 2
    if tag == "var":
        return n[1], 2
    if tag == "add":
        out = []
        for i, x in enumerate(n[1]):
            if x[0] == "neg":
                s = _fmt_neg_operand(x[1], c)
                out.append(f"-{s}" if i == 0 else f" - {s}")
            else:
                s = _fmt(x, c)[0]
                out.append(s if i == 0 else f" + {s}")
        return "".join(out), 0
    if tag == "neg":
        return "-" + _fmt_neg_operand(n[1], c), 1
    if tag == "mul":
        fs = []
        for x in n[1]:
            sp = _fmt(x, c)
            fs.append(_paren(sp, sp[1] < 2))
        return "*".join(fs), 1
    if tag in ("min", "max"):
        return f"{tag}({_fmt(n[1], c)[0]}, {_fmt(n[2], c)[0]})", 2
    left = _fmt(n[1], c)
    right = _fmt(n[2], c)
    ls = _paren(left, left[1] < 1 or n[1][0] in ("div", "floordiv", "mod"))
    rs = _paren(right, right[1] < 2)
    if tag == "mod":
        return f"{ls} % {rs}", 1
    op = "/" if (tag == "div" or c) else "//"
    return f"{ls}{op}{rs}", 1


def _fmt_neg_operand(x: tuple, c: bool) -> str:
    sp = _fmt(x, c)
    return _paren(sp, sp[1] < 1 or x[0] in ("floordiv", "mod"))


# ----------------------------------------------------------------------------- parsing
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(//|[-+*/%(),]))")


def parse_expr(text: str, names: Mapping[str, int | Expr] | None = None) -> Expr:
    """Parses the text printed by ``str(expr)``; ``names`` maps identifiers to values/Vars."""
    toks: list = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        mt = _TOKEN.match(text, pos)
        if mt is None:
            raise SymbolicError(f"cannot parse {text!r} at column {pos + 1}")
        toks.append(mt.group(1) or mt.group(2) or mt.group(3))
        pos = mt.end()
    toks.append("")
    i = 0

    def peek():
        return toks[i]

    def take(tok=None):
        nonlocal i
        t = toks[i]
        if tok is not None and t != tok:
            raise SymbolicError(f"cannot parse {text!r}: expected {tok!r}, got {t or 'end'!r}")
        i += 1
        return t

    def p_sum():
        e = p_prod()
        while peek() in ("+", "-"):
            e = e + p_prod() if take() == "+" else e - p_prod()
        return e

    def p_prod():
        e = p_unary()
        while peek() in ("*", "/", "//", "%"):
            op = take()
            r = p_unary()
            if op == "*":
                e = e * r
            elif op == "/":
                e = e / r
            elif op == "//":
                e = e // r
            else:
                e = e % r
        return e

    def p_unary():
        if peek() == "-":
            take()
            return -p_unary()
        if peek() == "+":
            take()
            return p_unary()
        return p_atom()

    def p_atom():
        t = take()
        if t.isdigit():
            return Cst(int(t))
        if t == "(":
            e = p_sum()
            take(")")
            return e
        if t in ("min", "max"):
            take("(")
            a = p_sum()
            take(",")
            b = p_sum()
            take(")")
            return smin(a, b) if t == "min" else smax(a, b)
        if t and (t[0].isalpha() or t[0] == "_"):
            if names is not None and t in names:
                return _coerce_strict(names[t])
            return Var(t)
        raise SymbolicError(f"cannot parse {text!r}: unexpected {t or 'end'!r}")

    e = p_sum()
    if peek() != "":
        raise SymbolicError(f"cannot parse {text!r}: unexpected {peek()!r}")
    return e


# ---------------------------------------------------------------------------- relations
_OPS = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class Rel:
    """An immutable relation ``lhs op rhs`` between expressions (a constraint)."""

    __slots__ = ("op", "lhs", "rhs", "_h", "_d")

    def __init__(self, op: str, lhs: int | str | Expr, rhs: int | str | Expr):
        if op not in _OPS:
            raise SymbolicError(f"unknown relation {op!r}")
        _set(self, "op", op)
        _set(self, "lhs", _coerce_strict(lhs))
        _set(self, "rhs", _coerce_strict(rhs))
        _set(self, "_h", hash((op, self.lhs, self.rhs)))

    def __setattr__(self, name, value):
        raise AttributeError("Rel is immutable")

    def __reduce__(self):
        return (Rel, (self.op, self.lhs, self.rhs))

    def __hash__(self) -> int:
        return self._h

    def __eq__(self, o) -> bool:
        if not isinstance(o, Rel):
            return NotImplemented
        return self.op == o.op and self.lhs == o.lhs and self.rhs == o.rhs

    def __bool__(self):
        raise TypeError("a Rel has no truth value; use evaluate() or is_trivially_true")

    def __str__(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"

    def __repr__(self) -> str:
        return f"Rel({str(self)!r})"

    def to_c(self) -> str:
        """OpenCL C text of the relation."""
        return f"{self.lhs.to_c()} {self.op} {self.rhs.to_c()}"

    def free_vars(self) -> frozenset[str]:
        """Names of the variables of both sides."""
        return self.lhs.free_vars() | self.rhs.free_vars()

    def subs(self, mapping: Mapping[str, int | str | Expr]) -> Rel:
        """Substitutes in both sides."""
        return Rel(self.op, self.lhs.subs(mapping), self.rhs.subs(mapping))

    def evaluate(self, env: Mapping[str, int]) -> bool:
        """Truth value for the given variable values (errors as ``Expr.evaluate``)."""
        return _OPS[self.op](self.lhs.evaluate(env), self.rhs.evaluate(env))

    def _decide(self):
        try:
            return self._d
        except AttributeError:
            pass
        r = self._decide_now()
        _set(self, "_d", r)
        return r

    def _decide_now(self):
        d = self.lhs - self.rhs
        c = _const_of(d._t)
        if c is not None:
            return _OPS[self.op](c, 0)
        lo, hi = d.bounds()
        op = self.op
        if op in ("==", "!="):
            if lo == 0 and hi == 0:
                r = True
            elif (lo is not None and lo > 0) or (hi is not None and hi < 0):
                r = False
            else:
                return None
            return r if op == "==" else not r
        if op in (">", ">="):
            lo, hi = _neg_b(hi), _neg_b(lo)  # a > b  <=>  -(a-b) < 0
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

    @property
    def is_trivially_true(self) -> bool:
        """True when the relation holds for all values (constant, or by variable ranges)."""
        return self._decide() is True

    @property
    def is_trivially_false(self) -> bool:
        """True when the relation holds for no values (constant, or by variable ranges)."""
        return self._decide() is False


# --------------------------------------------------------------------------- divisibility
def _fact_pair(f) -> tuple[Expr, Expr]:
    if isinstance(f, Rel):
        if f.op == "==":
            for a, z in ((f.lhs, f.rhs), (f.rhs, f.lhs)):
                at = _single_atom(a)
                if z == 0 and at is not None and at.kind == _MOD:
                    return at.p, at.q
        raise SymbolicError(f"not a divisibility fact (a % b == 0): {f}")
    a, b = f
    return _coerce_strict(a), _coerce_strict(b)


def assume_divisible(e: int | str | Expr, facts: Iterable) -> Expr:
    """Rewrites ``a // b`` to ``a / b`` and ``a % b`` to 0 when b divides a by the facts.

    ``facts`` holds pairs ``(a, b)`` meaning ``a % b == 0`` (or such ``Rel`` objects). A pair
    also covers ``k*a`` and divisors of ``b`` (``k`` an integer polynomial).
    """
    e = _coerce_strict(e)
    fl = [_fact_pair(f) for f in facts]
    if not fl:
        return e
    exact = set(fl)

    def divisible(p: Expr, q: Expr) -> bool:
        if (p, q) in exact:
            return True
        for fa, fb in fl:
            if _int_quotient(p, fa) is not None and _int_quotient(fb, q) is not None:
                return True
        return False

    def fatom(a: _Atom):
        if a.kind == _VAR:
            return None
        p = _map_atoms(a.p, fatom)
        q = _map_atoms(a.q, fatom)
        if a.kind in (_FDIV, _MOD) and divisible(p, q):
            return _ZERO if a.kind == _MOD else _exact_div(p, q)
        if p is a.p and q is a.q:
            return None
        return _make_op(a.kind, p, q)

    return _map_atoms(e, fatom)
