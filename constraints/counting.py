"""Counting the solutions of a model without listing them, by merging partial states.

Parameters are assigned one by one (in a given order); partial assignments that leave the
same remaining problem (the same remaining domains and the same partly evaluated
constraints) are merged and counted once with their multiplicity, so the work grows with
the number of distinct remaining problems, not with the number of solutions. The mapper
counts valid mappings this way (``mapper.api.count_valid_mappings``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from constraints.errors import CountLimitError, InvalidAssignmentError
from constraints.expr import FALSE, TRUE, And, Const, Node, Param, Pred
from constraints.model import Model
from constraints.scalar import compile_predicate

__all__ = ["count_solutions", "CountLimitError"]


def _assign(node: Node, name: str, value: int, memo: dict) -> Node:
    """``node`` with parameter ``name`` replaced by ``value`` (constructors fold constants)."""
    if name not in node.params():
        return node
    key = (node, name, value)
    hit = memo.get(key)
    if hit is not None:
        return hit
    if isinstance(node, Param):
        out: Node = Const(value)
    else:
        out = type(node)(*(_assign(a, name, value, memo) if isinstance(a, Node) else a
                           for a in node._args()))
    memo[key] = out
    return out


def count_solutions(model: Model, *, order: Sequence[str] | None = None,
                    timeout_s: float | None = None, max_states: int = 1_000_000,
                    progress: Callable[[int, int, int], object] | None = None,
                    started: float | None = None, what: str = "parameters") -> int:
    """The number of assignments of ``model``'s parameters (each a value of its domain) that
    satisfy every constraint, counted without listing them.

    Parameters are assigned in ``order`` (default: the model's); a good order puts
    parameters that share constraints next to each other. ``progress(done, total, states)``
    is called after each parameter. Past ``timeout_s`` seconds (counted from ``started``, a
    ``time.monotonic()`` reading, default now) or ``max_states`` states at one level it
    raises ``CountLimitError``, whose message calls the parameters ``what`` (the mapper:
    "maps"). Domains are of ints; each is held as a bit mask over the values of all the
    domains, which suits small domains (the mapper's twelve codes).
    """
    t0 = time.monotonic() if started is None else started
    names = tuple(model.names if order is None else order)
    if len(set(names)) != len(names) or set(names) != set(model.names):
        raise InvalidAssignmentError(
            f"the order must name each parameter once: {', '.join(names)} for "
            f"{', '.join(model.names)}")
    n = len(names)
    pos = {m: i for i, m in enumerate(names)}
    domains = [model.param(m).domain for m in names]
    universe = sorted({v for dom in domains for v in dom})
    bit = {v: 1 << i for i, v in enumerate(universe)}
    masks = [sum(bit[v] for v in dom) for dom in domains]

    def values(mask: int) -> list[int]:
        return [v for v in universe if mask & bit[v]]

    def allowed(pred: Pred, var: str, mask: int) -> int:
        fn = compile_predicate(pred, (var,))
        return sum(bit[v] for v in values(mask) if fn(v))

    def check_time(done: int, states: int, where: str) -> None:
        if timeout_s is not None and time.monotonic() - t0 > timeout_s:
            raise CountLimitError(
                f"counting stopped at the time limit ({timeout_s:g} s) after {done} of {n} "
                f"{what} ({states:,} partial states {where})", done=done, total=n,
                states=states, elapsed_s=time.monotonic() - t0)

    # constraints grouped by scope: unary ones narrow the domains, binary ones become
    # tables (value of the earlier parameter -> allowed mask of the later), wider ones are
    # evaluated parameter by parameter
    by_scope: dict[tuple[str, ...], list] = {}
    for c in model.decomposed().constraints:
        scope = tuple(sorted(c.params, key=pos.__getitem__))
        by_scope.setdefault(scope, []).append(c.predicate)
    tables: dict[tuple[int, int], dict[int, int]] = {}
    wide: list = []
    for g, (scope, preds) in enumerate(by_scope.items()):
        if g % 256 == 0:
            check_time(0, 1, "while reading the constraints")
        if not scope:
            if not all(q.evaluate({}) for q in preds):
                return 0
        elif len(scope) == 1:
            i = pos[scope[0]]
            masks[i] = allowed(And(*preds), scope[0], masks[i])
        elif len(scope) == 2:
            fn = compile_predicate(And(*preds), scope)
            tables[(pos[scope[0]], pos[scope[1]])] = {
                a: sum(bit[b] for b in universe if fn(a, b)) for a in universe}
        else:
            wide.extend(preds)
    partners: list[list[tuple[int, dict[int, int]]]] = [[] for _ in names]
    for (i, j), t in tables.items():
        partners[i].append((j - i - 1, t))  # index into the remaining masks after i
    if not all(masks):
        return 0
    memo: dict = {}
    intern: dict = {}  # one object per distinct residual constraint (ids key the cache)
    fold: dict = {}
    states: dict = {(tuple(masks), frozenset(wide)): 1}
    for k, var in enumerate(names):
        nxt: dict = {}
        top: dict = {}  # (id(pred), value) -> (pred, pred with var = value)
        for s, (rest, preds) in enumerate(states):
            if s % 256 == 0:
                check_time(k, len(states), f"at {var}")
            mult = states[(rest, preds)]
            mine = [q for q in preds if var in q.params()]
            others = [q for q in preds if var not in q.params()]
            for v in values(rest[0]):
                new = list(rest[1:])
                for j, t in partners[k]:
                    new[j] &= t[v]
                keep = list(others)
                dead = False
                for q in mine:
                    hit = top.get((id(q), v))
                    if hit is None:
                        r = _assign(q, var, v, memo)
                        hit = top[(id(q), v)] = (q, intern.setdefault(r, r))
                    r = hit[1]
                    if r is TRUE:
                        continue
                    if r is FALSE:
                        dead = True
                        break
                    ps = r.params()
                    if len(ps) == 1:
                        (w,) = ps
                        j = pos[w] - k - 1
                        key = (r, new[j])
                        got = fold.get(key)
                        if got is None:
                            got = fold[key] = allowed(r, w, new[j])
                        new[j] = got
                    else:
                        keep.append(r)
                if dead or not all(new):
                    continue
                key = (tuple(new), frozenset(keep))
                nxt[key] = nxt.get(key, 0) + mult
        states = nxt
        if len(states) > max_states:
            raise CountLimitError(
                f"counting stopped: {len(states):,} distinct partial states after {k + 1} of "
                f"{n} {what} (the limit is {max_states:,})", done=k + 1, total=n,
                states=len(states), elapsed_s=time.monotonic() - t0)
        if progress is not None:
            progress(k + 1, n, len(states))
        if not states:
            return 0
    return sum(states.values())
