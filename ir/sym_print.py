"""Printing of ``ir.sym`` expressions: a printing tree (``Expr.to_tree``), then text.

``str`` keeps each fraction over its own denominator and prints floor division as ``//``;
``to_c`` puts all fractional terms over one common denominator and prints ``/`` for both.
The functions read an expression's terms (:class:`ir.sym_poly.Poly`); ``Expr`` (in
``ir.sym_expr``) prints through them.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ir.sym_poly import (
    _EDIV,
    _FDIV,
    _MAX,
    _MIN,
    _MOD,
    _VAR,
    Poly,
    _Atom,
    _mono_key,
    _mono_mul,
    _nc,
    _set,
)


def _tree(e: Poly, merge: bool) -> tuple:
    """Printing structure (cached); ``merge`` puts all fractional terms over one denominator."""
    slot = "_tc" if merge else "_ts"
    try:
        return getattr(e, slot)
    except AttributeError:
        pass
    tr = _make_tree(e, merge)
    _set(e, slot, tr)
    return tr


def _make_tree(e: Poly, merge: bool) -> tuple:
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


def _term_tree(c: int | Fraction, m: frozenset, merge: bool) -> tuple:
    factors: list = []
    for a, x in sorted(m, key=lambda ax: ax[0].key()):
        f = _atom_tree(a, merge)
        factors.extend([f] * x)
    k = -c if c < 0 else c
    node: tuple
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



def _atom_text(a: _Atom) -> str:
    """``str`` of the expression that is the atom ``a`` alone."""
    return _fmt(_atom_tree(a, False), False)[0]
