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


def _params_of(node) -> set[str]:
    """The parameter names a predicate reads (its own walk, not the library's)."""
    if isinstance(node, Param):
        return {node.name}
    out: set[str] = set()
    for child in node.children():
        out |= _params_of(child)
    return out


def brute_force_solutions(model) -> set[frozenset]:
    """Every assignment of the Cartesian product that satisfies all constraints.

    The product is built one parameter at a time; a constraint is evaluated as soon as
    every parameter it reads is assigned, on every partial assignment still standing. An
    assignment survives iff each constraint holds on it, as when every constraint is
    evaluated on the whole product, but a 12^7 product costs the size of its prefixes
    that satisfy the constraints so far, not 35 million points per constraint."""
    names = list(model.names)
    doms = {n: np.array(model.param(n).domain, dtype=np.int64) for n in names}
    reads = [(c, _params_of(c.predicate)) for c in model.constraints]
    unknown = set().union(*(r for _, r in reads)) - set(names) if reads else set()
    assert not unknown, f"constraints read parameters the model lacks: {unknown}"
    cols: dict[str, np.ndarray] = {}
    size, done, left = 1, set(), list(names)

    def apply_ready() -> None:
        nonlocal cols, size
        for i, (c, r) in enumerate(reads):
            if i in done or not r <= cols.keys():
                continue
            done.add(i)
            keep = np.broadcast_to(np.asarray(np_eval(c.predicate, cols), dtype=bool),
                                   (size,))
            if not keep.all():
                cols = {n: v[keep] for n, v in cols.items()}
                size = int(keep.sum())

    apply_ready()
    while left:
        # next: the parameter that completes the most constraints (ties: model order)
        nxt = max(left, key=lambda n: sum(1 for i, (_, r) in enumerate(reads) if i not in done
                                          and r <= cols.keys() | {n}))
        left.remove(nxt)
        d = doms[nxt]
        cols = {n: np.repeat(v, len(d)) for n, v in cols.items()}
        cols[nxt] = np.tile(d, size)
        size *= len(d)
        apply_ready()
    if size == 0:
        return set()
    return {frozenset((n, int(cols[n][i])) for n in names) for i in range(size)}


def product_size(model) -> int:
    return int(np.prod([len(model.param(n).domain) for n in model.names]))



def z3_counterexample(model, solutions: set[frozenset]) -> dict[str, int] | None:
    """An assignment on which Z3 and ``solutions`` disagree, or None when Z3 proves that
    its solution set is exactly ``solutions``.

    The formula is the one the Z3 backend enumerates (its domain constraints and every
    constraint translated by ``to_z3``); membership in ``solutions`` is a decision tree
    over the parameters in model order, given to Z3 as SMT-LIB text (built in Python it
    would cost more than enumerating). ``formula != member`` is unsatisfiable iff every
    assignment in the domains satisfies the formula exactly when it is in ``solutions``:
    the same set equality a full Z3 enumeration would check, at one solver call per model
    instead of about one per solution and parameter."""
    import z3

    from constraints import z3_backend

    s, vars = z3_backend._solver(model)
    names = list(model.names)
    rows = sorted(tuple(dict(sol)[n] for n in names) for sol in solutions)
    assert all(len(sol) == len(names) for sol in solutions)

    def member(i: int, group: list[tuple[int, ...]]) -> str:
        if i == len(names):
            return "true"
        by: dict[int, list[tuple[int, ...]]] = {}
        for r in group:
            by.setdefault(r[i], []).append(r)
        parts = [f"(and (= |{names[i]}| {v if v >= 0 else f'(- {-v})'}) {member(i + 1, g)})"
                 for v, g in by.items()]
        return parts[0] if len(parts) == 1 else f"(or {' '.join(parts)})"

    text = member(0, rows) if rows else "false"
    (inside,) = z3.parse_smt2_string(f"(assert {text})", decls=dict(vars))
    # simplifying and eliminating equalities first: a third of the default solver's time
    check = z3.Then("simplify", "solve-eqs", "smt").solver()
    check.add(z3.And(s.assertions()) != inside)
    result = check.check()
    assert result != z3.unknown, check.reason_unknown()
    if result == z3.unsat:
        return None
    m = check.model()
    return {n: m.eval(vars[n], model_completion=True).as_long() for n in names}
