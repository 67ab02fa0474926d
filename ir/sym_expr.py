"""The expressions of ``ir.sym``: the ``Expr`` value with its algebra, and ``Rel``.

An ``Expr`` holds its terms (``ir.sym_poly``) in canonical form. Its operators and methods
build new expressions through the simplifier in this module (``+ * / // %``, ``min`` and
``max``, substitution), coercion (an int, a name, or text read by :func:`parse_expr`) and
exact division; its relation methods (``eq`` ... ``ge``) build a :class:`Rel`. These are one
module because each needs the others: the simplifier builds ``Expr`` objects and ``Expr``'s
operators are the simplifier.

Below this module, knowing nothing of ``Expr``: the atoms, term dictionaries and bounds
(``ir.sym_poly``), polynomial division (``ir.sym_div``), printing (``ir.sym_print``) and the
tokens of size text (``ir.sym_parse``). Above it: divisibility facts (``ir.sym_facts``) and
the public module, ``ir.sym``.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Mapping
from fractions import Fraction

from ir.errors import (
    NonIntegralError,
    RelationTruthError,
    SymbolicError,
    SymbolicTypeError,
    SymbolicZeroDivisionError,
    UnboundSizeError,
)
from ir.sym_div import _common_mono, _content, _is_int_poly, _poly_div
from ir.sym_parse import _TextReader
from ir.sym_poly import (
    _EDIV,
    _EMPTY,
    _FDIV,
    _MAX,
    _MIN,
    _MOD,
    _VAR,
    _add_terms,
    _Atom,
    _coef_div,
    _coef_div_int,
    _const_of,
    _decide_sign,
    _divmod_term,
    _expr_key,
    _fdiv_bounds,
    _mono_div_int,
    _mono_inv,
    _mono_key,
    _mono_mul,
    _mul_terms,
    _nc,
    _neg_b,
    _neg_terms,
    _poly_bounds,
    _recombine,
    _scale,
    _set,
)
from ir.sym_print import _atom_text, _fmt, _tree

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

    __slots__ = ("_t", "_h", "_s", "_c", "_b", "_fv", "_ts", "_tc", "_k", "_f")
    # _t: the terms {monomial: coefficient}; the others are caches, set on first use
    # (_f: False once evaluated, then its compiled evaluator, or 0 where it has none)
    _t: dict[frozenset[tuple[_Atom, int]], int | Fraction]
    _h: int
    _s: str
    _c: str
    _b: tuple[int | None, int | None]
    _fv: frozenset[str]
    _ts: tuple
    _tc: tuple
    _k: tuple

    def __init__(self, x: int | str | Expr = 0) -> None:
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
    def __add__(self, o: int | str | Expr) -> Expr:
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
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _add(self, e)

    def __radd__(self, o: int | str | Expr) -> Expr:
        if type(o) is int:
            return self.__add__(o)
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _add(e, self)

    def __sub__(self, o: int | str | Expr) -> Expr:
        if type(o) is int:
            return self.__add__(-o)
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _add(self, _mk(_neg_terms(e._t)))

    def __rsub__(self, o: int | str | Expr) -> Expr:
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _add(e, _mk(_neg_terms(self._t)))

    def __neg__(self) -> Expr:
        return _mk(_neg_terms(self._t))

    def __pos__(self) -> Expr:
        return self

    def __mul__(self, o: int | str | Expr) -> Expr:
        if type(o) is int:
            if o == 1:
                return self
            return _mk(_scale(self._t, o))
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _mul(self, e)

    def __rmul__(self, o: int | str | Expr) -> Expr:
        if type(o) is int:
            return self.__mul__(o)
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _mul(e, self)

    def __truediv__(self, o: int | str | Expr) -> Expr:
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _exact_div(self, e)

    def __rtruediv__(self, o: int | str | Expr) -> Expr:
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _exact_div(e, self)

    def __floordiv__(self, o: int | str | Expr) -> Expr:
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _fdiv(self, e, False)

    def __rfloordiv__(self, o: int | str | Expr) -> Expr:
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _fdiv(e, self, False)

    def __mod__(self, o: int | str | Expr) -> Expr:
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _fdiv(self, e, True)

    def __rmod__(self, o: int | str | Expr) -> Expr:
        e = _opnd(o)
        if e is None:
            return NotImplemented
        return _fdiv(e, self, True)

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
            return _keep(self, "_b", _poly_bounds(self._t))

    def _compiled(self):
        """This expression's evaluator compiled to Python (int arithmetic), from its second
        evaluation on (the prior evaluates the same resource formulas for thousands of
        configurations); None before, or where Python cannot compile it."""
        try:
            f = self._f
        except AttributeError:
            _set(self, "_f", False)
            return None
        if f is False:
            f = _compile(self) or 0
            _set(self, "_f", f)
        return f or None

    def evaluate(self, env: Mapping[str, int]) -> int:
        """The integer value for the given variable values.

        Raises UnboundSizeError (a variable has no value), NonIntegralError (an exact
        division is not integral) or SymbolicZeroDivisionError.
        """
        f = self._compiled()
        if f is not None:
            try:
                return f(env)
            except Exception:  # noqa: BLE001  the interpreter below raises the typed error
                pass
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


# ----------------------------------------------------------------------- constructors
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
            raise SymbolicTypeError(f"Cst expects an int, got {type(n).__name__}")
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
    if len(_VAR_CACHE) > 20000:  # an interning cache: bounded, so a long run stays flat
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


# --------------------------------------------------------------------------- coercion
def sym(x: int | str | Expr) -> Expr:
    """Coerces to ``Expr``: an int is a constant, an identifier a ``Var``, other text is parsed."""
    if type(x) is Expr:
        return x
    return _coerce_strict(x)


def _coerce_strict(x) -> Expr:
    e = _opnd(x)
    if e is None:
        raise SymbolicTypeError(f"cannot make a symbolic expression from {type(x).__name__}")
    return e


def _opnd(x) -> Expr | None:
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


# ------------------------------------------------------------------------- operations
def _add(a: Expr, b: Expr) -> Expr:
    at, bt = a._t, b._t
    t = _add_terms(at, bt)
    if t is at:
        return a
    if t is bt:
        return b
    if len(t) >= 2 and (_divmod_term(bt) or _divmod_term(at)):
        t = _recombine(t)
    return _mk(t)


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
            k: Expr | None
            if at.q == b:
                k = _ONE
            else:
                kt = _quotient_terms(b, at.q)
                k = None if kt is None else _mk(kt)
            if k is not None and len(k._t) == 1:
                rest = _mk({frozenset(pair for pair in m if pair[0] is not at): c})
                return _mul(_mul(rest, at.p), k)
    return None


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
            assert qhi is not None  # not pos, so qhi <= -1
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


# --------------------------------------------------------------------- exact division
@functools.lru_cache(maxsize=8192)
def _quotient_terms(p: Expr, q: Expr) -> dict | None:
    """``_poly_div`` of the two expressions' terms, remembered: the type check and the
    lowering of every mapping of a program divide the same sizes again. The caller must
    not modify the returned terms (``_mk`` does not)."""
    return _poly_div(p._t, q._t)


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
    quo = _quotient_terms(p2, q2)
    if quo is not None:
        return _mk(quo)
    # the sign of the numerator is normalised too: (-a)/q is stored as -1*(a/q), so that
    # -(a/q) and (-a)/q are one canonical form (sound: -a is divisible by q iff a is; this
    # is not done for // and %, since (-a)//q != -(a//q))
    p2t = p2._t
    if p2t[min(p2t, key=_mono_key)] < 0:
        return -_atom_expr(_EDIV, _mk(_neg_terms(p2t)), q2)
    return _atom_expr(_EDIV, p2, q2)


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
    quo = _quotient_terms(p, q)
    return _mk(quo) if quo is not None and _is_int_poly(quo) else None


# ---------------------------------------------------------------------------- parsing
class _ExprReader(_TextReader):
    """Reads an ``Expr``: the leaves of the size grammar, with ``names`` giving values (ints
    or expressions) to identifiers and the other names read as ``Var``."""

    def __init__(self, text: str, names: Mapping[str, int | Expr] | None):
        super().__init__(text)
        self.names = names

    def size_int(self, text: str) -> Expr:
        return Cst(int(text))

    def size_name(self, text: str) -> Expr:
        if self.names is not None and text in self.names:
            return _coerce_strict(self.names[text])
        return Var(text)

    def size_minmax(self, name: str, a: Expr, b: Expr) -> Expr:
        return smin(a, b) if name == "min" else smax(a, b)


def parse_expr(text: str, names: Mapping[str, int | Expr] | None = None) -> Expr:
    """Parses the text printed by ``str(expr)``; ``names`` maps identifiers to values/Vars.

    The grammar is the text syntax's (``ir.size_grammar``); errors are ``SymbolicError``.
    """
    r = _ExprReader(text, names)
    e = r.size()
    t = r.peek()
    if t.kind != "eof":
        raise r.error(f"unexpected {r.describe(t)}", t)
    return e


# -------------------------------------------------------------------------- relations
_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


class Rel:
    """An immutable relation ``lhs op rhs`` between expressions (a constraint)."""

    __slots__ = ("op", "lhs", "rhs", "_h", "_d")
    op: str
    lhs: Expr
    rhs: Expr
    _h: int
    _d: bool | None  # the cached result of _decide

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
        raise RelationTruthError("a Rel has no truth value; use evaluate() or is_trivially_true")

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
        return _decide_sign(self.op, *d.bounds())

    @property
    def is_trivially_true(self) -> bool:
        """True when the relation holds for all values (constant, or by variable ranges)."""
        return self._decide() is True

    @property
    def is_trivially_false(self) -> bool:
        """True when the relation holds for no values (constant, or by variable ranges)."""
        return self._decide() is False


# ------------------------------------------------------------------------- evaluation
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


def _src(e: Expr) -> str | None:
    """Python source of ``e``'s integer value from the mapping ``v`` in int arithmetic, or
    None where Python cannot compile it. A term with a Fraction coefficient or a negative
    power is a numerator over a denominator; the sum of such terms must be an integer
    (``_rsum``, as the interpreter's Fractions must)."""
    terms = []  # (numerator, denominator) sources
    for m, c in e._t.items():
        num = [] if c == 1 else [f"({c.numerator if type(c) is not int else c})"]
        den = [] if type(c) is int else [str(c.denominator)]
        for a, x in m:
            if a.kind == _VAR:
                f = f"_iv(v[{a.name!r}], {a.name!r})"
            else:
                p, q = _src(a.p), _src(a.q)
                if p is None or q is None:
                    return None
                f = {_MIN: f"min({p}, {q})", _MAX: f"max({p}, {q})", _FDIV: f"({p} // {q})",
                     _MOD: f"({p} % {q})"}.get(a.kind, f"_ediv({p}, {q})")
            (num if x > 0 else den).append(f if abs(x) == 1 else f"{f}**{abs(x)}")
        terms.append(("*".join(num) or "1", "*".join(den)))
    if not terms:
        return "0"
    if not any(d for _, d in terms):
        return "(" + " + ".join(n for n, _ in terms) + ")"
    return "_rsum(" + ", ".join(f"({n}, {d or '1'})" for n, d in terms) + ",)"


def _rsum(*terms: tuple[int, int]) -> int:
    """The sum of ``numerator / denominator`` terms, which must be an integer (a zero
    denominator or a non-integral sum: the caller's interpreter raises the typed error)."""
    n, d = 0, 1
    for tn, td in terms:
        if not td:
            raise ZeroDivisionError
        n, d = n * td + tn * d, d * td
    if n % d:
        raise _NonIntegral(n, d)
    return n // d


def _iv(y, name: str) -> int:
    return y if type(y) is int else _ival(y, name)


def _ediv(p: int, q: int) -> int:
    if p % q:
        raise _NonIntegral(p, q)
    return p // q


def _compile(e: Expr):
    """``e``'s evaluator as a Python function of the variables' mapping, or None. Any
    exception it raises (a missing variable, a zero divisor, an inexact division) sends
    the caller to the interpreter (``_eval``), which raises the typed error."""
    try:
        src = _src(e)
        if src is None:
            return None
        return eval(f"lambda v: {src}",  # noqa: S307
                    {"_iv": _iv, "_ediv": _ediv, "_rsum": _rsum})
    except (RecursionError, MemoryError, SyntaxError):  # too deep for Python's compiler
        return None


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
