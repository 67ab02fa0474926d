"""Polynomial division in ``ir.sym``, on term dictionaries (see ``ir.sym_poly``).

:func:`_poly_div` is the exact quotient of two polynomials (multivariate division), or None;
:func:`_common_mono` and :func:`_content` are the monomial and the rational factor that
exact division (``ir.sym_expr``) takes out of a divisor to normalise it (coprime integer
coefficients, no common monomial factor, leading term positive).
"""

from __future__ import annotations

import math
from fractions import Fraction

from ir.sym_poly import _EDIV, _add_terms, _coef_div, _mono_inv, _mono_key, _mono_mul, _nc


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


def _poly_div(pt: dict, qt: dict) -> dict | None:
    """The terms of the exact quotient ``p / q`` of the terms ``pt`` and ``qt`` by
    multivariate division (lex order), or None."""
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
            return quo
        mr = max(r, key=vec)
        c = _coef_div(r[mr], lc)
        mm = _mono_mul(mr, linv)
        quo = _add_terms(quo, {mm: c})
        r = _add_terms(r, {_mono_mul(m, mm): _nc(-c * x) for m, x in qt.items()})
    return None


def _is_int_poly(t: dict) -> bool:
    """Whether the terms ``t`` are an integer polynomial (integer coefficients, no negative
    exponent, no exact division)."""
    for m, c in t.items():
        if type(c) is not int:
            return False
        for a, x in m:
            if x < 0 or a.kind == _EDIV:
                return False
    return True
