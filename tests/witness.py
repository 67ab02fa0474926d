"""A third, vectorised evaluation of constraint predicates over whole grids of assignments.

It walks the predicate tree itself (no solver, no compiled Python), so it is an
independent brute-force witness for spaces too large for a Python loop (10^7 points).
"""

import operator

import numpy as np

from constraints.expr import And, BinOp, BoolConst, Cmp, Const, Implies, In, Not, Or, Param

_CMP = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}
_BIN = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": np.floor_divide,
        "%": np.mod}


def np_eval(node, cols):
    if isinstance(node, Param):
        return cols[node.name]
    if isinstance(node, Const):
        return node.value
    if isinstance(node, BinOp):
        return _BIN[node.op](np_eval(node.left, cols), np_eval(node.right, cols))
    if isinstance(node, Cmp):
        return _CMP[node.op](np_eval(node.left, cols), np_eval(node.right, cols))
    if isinstance(node, And):
        out = True
        for p in node.parts:
            out = out & np_eval(p, cols)
        return out
    if isinstance(node, Or):
        out = False
        for p in node.parts:
            out = out | np_eval(p, cols)
        return out
    if isinstance(node, Not):
        return ~np.asarray(np_eval(node.arg, cols), dtype=bool)
    if isinstance(node, Implies):
        return ~np.asarray(np_eval(node.lhs, cols), dtype=bool) | np_eval(node.rhs, cols)
    if isinstance(node, In):
        t = np_eval(node.term, cols)
        return np.isin(t, list(node.values))
    if isinstance(node, BoolConst):
        return node.value
    raise TypeError(f"unknown predicate node {type(node).__name__}")


def brute_force_solutions(model) -> set[frozenset]:
    """Every assignment of the Cartesian product that satisfies all constraints.

    Each constraint is evaluated on every point that survived the previous ones (the
    same set as evaluating all constraints everywhere, with less work)."""
    names = list(model.names)
    doms = [np.array(model.param(n).domain, dtype=np.int16) for n in names]
    grids = np.meshgrid(*doms, indexing="ij")
    cols = {n: g.ravel() for n, g in zip(names, grids)}
    del grids
    for c in model.constraints:
        size = len(cols[names[0]]) if names else 1
        keep = np.broadcast_to(np.asarray(np_eval(c.predicate, cols), dtype=bool), (size,))
        if not keep.all():
            cols = {n: v[keep] for n, v in cols.items()}
    size = len(cols[names[0]]) if names else 1
    return {frozenset((n, int(cols[n][i])) for n in names) for i in range(size)}


def product_size(model) -> int:
    return int(np.prod([len(model.param(n).domain) for n in model.names]))

