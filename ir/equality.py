"""Structural equality of IR nodes up to renaming of lambda parameters (alpha equivalence)."""

from __future__ import annotations

from dataclasses import fields

from ir.nodes import Lambda, Node, Param


def alpha_equal(a: Node, b: Node) -> bool:
    """True when ``a`` and ``b`` are the same tree up to the names of lambda parameters.

    Bound parameters match by binding position; free parameters by name and type. Map
    labels, kinds and dimensions are compared, map uids are not (nor user function
    bodies: the fields excluded from dataclass equality).
    """
    return _eq(a, b, {}, {}, 0)


def _eq(a, b, ea: dict, eb: dict, depth: int) -> bool:
    if a is b and not ea and not eb:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, Param):
        ia, ib = ea.get(a.name), eb.get(b.name)
        if ia is None and ib is None:
            return a.name == b.name and a.type == b.type
        return ia == ib
    if isinstance(a, Lambda):
        if len(a.params) != len(b.params):
            return False
        if any(p.type != q.type for p, q in zip(a.params, b.params)):
            return False
        ea, eb = dict(ea), dict(eb)
        for i, (p, q) in enumerate(zip(a.params, b.params)):
            ea[p.name] = eb[q.name] = (depth, i)
        return _eq(a.body, b.body, ea, eb, depth + 1)
    if not isinstance(a, Node):
        return a == b
    for f in fields(a):
        if not f.compare:
            continue
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if isinstance(va, Node):
            if not _eq(va, vb, ea, eb, depth):
                return False
        elif isinstance(va, tuple):
            if not isinstance(vb, tuple) or len(va) != len(vb):
                return False
            for x, y in zip(va, vb):
                if isinstance(x, Node):
                    if not _eq(x, y, ea, eb, depth):
                        return False
                elif x != y:
                    return False
        elif va != vb:
            return False
    return True
