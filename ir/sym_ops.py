"""The simplifier of ``ir.sym``: the operations that build expressions, coercion, parsing.

``+``, ``*``, exact ``/``, ``//``, ``%``, ``min``/``max`` and substitution, simplified on
construction (the rules are in the docstrings below and in ``ir.sym``). Importing this module
installs ``Expr.__init__``, the arithmetic operators and ``Expr.subs`` on ``Expr``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping

from ir.size_grammar import SizeGrammar
from ir.sym_div import _exact_div, _int_quotient, _poly_div
from ir.sym_expr import (
    _CST_CACHE,
    _ONE,
    _ZERO,
    Cst,
    Expr,
    Var,
    _atom_expr,
    _ExprMixin,
    _install,
    _mk,
    _single_atom,
)
from ir.sym_poly import (
    _EDIV,
    _EMPTY,
    _FDIV,
    _MAX,
    _MIN,
    _MOD,
    _VAR,
    NonIntegralError,
    SymbolicError,
    SymbolicZeroDivisionError,
    _add_terms,
    _Atom,
    _coef_div_int,
    _const_of,
    _expr_key,
    _fdiv_bounds,
    _mono_div_int,
    _mono_mul,
    _mul_terms,
    _nc,
    _neg_b,
    _neg_terms,
    _scale,
    _set,
)


# ---------------------------------------------------------------------------- coercion
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


# ----------------------------------------------------------------------------- parsing
_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_]\w*)|(//|[-+*/%(),]))")


class _Tok:
    __slots__ = ("kind", "text", "col")

    def __init__(self, kind: str, text: str, col: int):
        self.kind, self.text, self.col = kind, text, col


class _TextReader(SizeGrammar):
    """The size grammar over the tokens of one text; errors are ``SymbolicError``."""

    def __init__(self, text: str, names: Mapping[str, int | Expr] | None):
        self.text = text
        self.names = names
        self.toks: list[_Tok] = []
        pos = 0
        text = text.rstrip()
        while pos < len(text):
            mt = _TOKEN.match(text, pos)
            if mt is None:
                raise SymbolicError(f"cannot parse {self.text!r} at column {pos + 1}")
            kind = "int" if mt.group(1) else "name" if mt.group(2) else "op"
            g = mt.lastindex
            assert g is not None  # each alternative of _TOKEN is a group
            tok = mt.group(g)
            self.toks.append(_Tok(kind, tok, mt.start(g) + 1))
            pos = mt.end()
        self.toks.append(_Tok("eof", "", pos + 1))
        self.i = 0

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t.text == text and t.kind in ("op", "name")

    def next(self) -> _Tok:
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def describe(self, t: _Tok) -> str:
        return "the end" if t.kind == "eof" else repr(t.text)

    def error(self, msg: str, tok: _Tok) -> SymbolicError:
        return SymbolicError(f"cannot parse {self.text!r} at column {tok.col}: {msg}")

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
    r = _TextReader(text, names)
    e = r.size()
    t = r.peek()
    if t.kind != "eof":
        raise r.error(f"unexpected {r.describe(t)}", t)
    return e


# ------------------------------------------------------------- Expr's building methods
class _ExprBuilding(_ExprMixin):
    """The methods of ``Expr`` that build expressions (installed on ``Expr`` below)."""

    def __init__(self, x: int | str | Expr = 0):
        _set(self, "_t", _coerce_strict(x)._t)

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


_install(_ExprBuilding)
