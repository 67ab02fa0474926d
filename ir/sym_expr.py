"""The ``Expr`` class of ``ir.sym``: storage, identity, queries, printing and evaluation.

The methods that build new expressions (``__init__``, arithmetic, ``subs``, the relations
``eq``...``ge``) need the simplifier, which builds ``Expr`` objects itself; ``ir.sym_ops`` and
``ir.sym_rel`` define them and install them on the class (:func:`_install`) when imported.
Import ``ir.sym``, which imports both, rather than this module alone.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING

from ir.errors import NonIntegralError, SymbolicError, SymbolicZeroDivisionError, UnboundSizeError
from ir.sym_poly import _EMPTY, _FDIV, _MAX, _MIN, _MOD, _VAR, _Atom, _const_of, _poly_bounds, _set
from ir.sym_print import _atom_text, _fmt, _tree

if TYPE_CHECKING:
    from ir.sym_rel import Rel


_new = object.__new__


def _mk(t: dict) -> Expr:
    e = _new(Expr)
    _set(e, "_t", t)
    return e


def _keep(e: Expr, slot: str, value):
    """``value``, kept in the cache slot ``slot`` of ``e`` (read first by the caller)."""
    _set(e, slot, value)
    return value


class Expr:
    """An immutable symbolic integer expression in canonical form (see ``ir.sym``).

    ``Expr(x)`` accepts an ``int``, an ``Expr`` or a string (parsed, see :func:`parse_expr`).
    """

    __slots__ = ("_t", "_h", "_s", "_c", "_b", "_fv", "_ts", "_tc", "_k")
    # _t: the terms {monomial: coefficient}; the others are caches, set on first use
    _t: dict[frozenset[tuple[_Atom, int]], int | Fraction]
    _h: int
    _s: str
    _c: str
    _b: tuple[int | None, int | None]
    _fv: frozenset[str]
    _ts: tuple
    _tc: tuple
    _k: tuple

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

    if TYPE_CHECKING:  # installed by ir.sym_ops (construction, arithmetic, subs)
        def __init__(self, x: int | str | Expr = 0) -> None: ...
        def _arith(self, o: int | str | Expr) -> Expr: ...
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _arith
        __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _arith
        def __neg__(self) -> Expr: ...
        def __pos__(self) -> Expr: ...
        def subs(self, mapping: Mapping[str, int | str | Expr]) -> Expr: ...

        # installed by ir.sym_rel
        def _relation(self, o: int | str | Expr) -> Rel: ...
        eq = ne = lt = le = gt = ge = _relation

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
            return _keep(self, "_b", _poly_bounds(self._t))

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
            return _keep(self, "_s", _fmt(_tree(self, False), False)[0])

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
            return _keep(self, "_c", _fmt(_tree(self, True), True)[0])

    def to_tree(self) -> tuple:
        """The printed structure as nested tuples, for other back ends.

        Nodes: ``('int', n)`` (n >= 0), ``('var', name)``, ``('neg', x)``,
        ``('add', (x, ...))``, ``('mul', (x, ...))``, ``('div', a, b)`` (exact; one common
        denominator per expression, as in ``to_c``), ``('floordiv', a, b)``, ``('mod', a, b)``,
        ``('min', a, b)``, ``('max', a, b)``.
        """
        return _tree(self, True)


# The base of the classes whose methods ``_install`` copies onto ``Expr``: ``object`` at run
# time, ``Expr`` for the type checker, so that their ``self`` is read as the ``Expr`` it is.
if TYPE_CHECKING:
    _ExprMixin = Expr
else:
    _ExprMixin = object


def _install(holder: type) -> None:
    """Copies the methods defined in the class body of ``holder`` onto ``Expr``."""
    for name, f in vars(holder).items():
        if callable(f):
            f.__qualname__ = f"Expr.{name}"
            setattr(Expr, name, f)


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


def _atom_expr(kind: int, p: Expr, q: Expr) -> Expr:
    return _mk({frozenset(((_Atom(kind, None, p, q), 1),)): 1})


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
    total: int | Fraction = 0
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
                        f"division by zero in {e}: {_atom_text(a)} is 0")
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
        raise SymbolicZeroDivisionError(f"division by zero in {_atom_text(a)}")
    if k == _FDIV:
        return p // q
    if k == _MOD:
        return p % q
    if p % q:
        raise _NonIntegral(f"{a.p}/({a.q})", Fraction(p, q))
    return p // q


