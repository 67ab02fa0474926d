"""Division in ``ir.sym``: exact division (``/``) and exact polynomial quotients.

``p / q`` by a monomial multiplies by its inverse (negative exponents); by a polynomial it
is the quotient when ``q`` divides ``p``, else the opaque atom ``ExactDiv(p', q')`` with
``q'`` normalised (coprime integer coefficients, no common monomial factor, leading term
positive) and the sign of ``p'`` normalised too.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ir.sym_expr import _ONE, _ZERO, Expr, _atom_expr, _mk
from ir.sym_poly import (
    _EDIV,
    SymbolicZeroDivisionError,
    _add_terms,
    _coef_div,
    _coef_div_int,
    _mono_div_int,
    _mono_inv,
    _mono_key,
    _mono_mul,
    _nc,
    _neg_terms,
)


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
