"""Variable order within a group of dependent parameters (the GPGPU'20 paper's "parameter
ordering", Section 5.3).

The order minimises the estimated number of rows generated while a group's valid rows are
built column by column, from each restriction's measured selectivity: all orders up to
:data:`PERM_MAX_VARS` parameters, a dynamic programme over subsets up to
:data:`DP_MAX_VARS`, greedy above.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

__all__ = ["plan_order", "greedy_order", "DP_MAX_VARS", "PERM_MAX_VARS"]

DP_MAX_VARS = 16
PERM_MAX_VARS = 4


def plan_order(sizes: Sequence[int], masks: Sequence[int], sels: Sequence[float]) -> list[int]:
    """Variable order of a group minimising the estimated number of generated rows.

    Rows after binding a set S are estimated as prod(|D_v|, v in S) * prod(sel(r), r within S)
    (independence assumption); an order costs sum over steps of rows generated times
    (1 + restrictions checked).  Exhaustive up to 4 variables, exact dynamic programme over
    subsets up to 16, greedy above.  Ties keep declaration order.
    """
    n = len(sizes)
    if n == 1:
        return [0]
    logs = [math.log(s) for s in sizes]
    logsel = [math.log(s) for s in sels]
    if n <= PERM_MAX_VARS:  # few variables: all orders, in plain Python
        best_perm: tuple[float, tuple[int, ...]] | None = None
        for perm in itertools.permutations(range(n)):
            bound, rows, cost = 0, 1.0, 0.0
            for v in perm:
                new = bound | (1 << v)
                done = [i for i, m in enumerate(masks) if new & m == m and bound & m != m]
                cost += rows * sizes[v] * (1 + len(done))
                rows *= sizes[v] * math.prod(sels[i] for i in done)
                bound = new
            if best_perm is None or cost < best_perm[0] * (1 - 1e-9):
                best_perm = (cost, perm)
        assert best_perm is not None
        return list(best_perm[1])
    if n > DP_MAX_VARS:
        return greedy_order(sizes, masks, logs, logsel)
    full = 1 << n
    sets = np.arange(full, dtype=np.int64)
    logsize = np.zeros(full)
    popcount = np.zeros(full, dtype=np.int64)
    for v in range(n):
        bit = (sets >> v) & 1
        logsize += bit * logs[v]
        popcount += bit
    ncomp = np.zeros(full)
    for m, ls in zip(masks, logsel, strict=True):
        inside = (sets & m) == m
        logsize += inside * ls
        ncomp += inside
    size = np.exp(logsize)
    best = np.full(full, np.inf)
    best[0] = 0.0
    choice = np.zeros(full, dtype=np.int64)
    for k in range(1, n + 1):
        idx = sets[popcount == k]
        bk = np.full(len(idx), np.inf)
        ck = np.zeros(len(idx), dtype=np.int64)
        for v in reversed(range(n)):
            vbit = 1 << v
            has = (idx & vbit) != 0
            sub = np.where(has, idx ^ vbit, 0)
            cand = best[sub] + size[sub] * sizes[v] * (1.0 + ncomp[idx] - ncomp[sub])
            cand = np.where(has, cand, np.inf)
            better = cand < bk * (1 - 1e-9)
            bk = np.where(better, cand, bk)
            ck = np.where(better, v, ck)
        best[idx] = bk
        choice[idx] = ck
    order: list[int] = []
    s = full - 1
    while s:
        v = int(choice[s])
        order.append(v)
        s ^= 1 << v
    return order[::-1]


def greedy_order(
    sizes: Sequence[int], masks: Sequence[int], logs: Sequence[float], logsel: Sequence[float]
) -> list[int]:
    bound, order, logrows = 0, [], 0.0
    todo = list(range(len(sizes)))
    while todo:
        best = None
        for v in todo:
            new = bound | (1 << v)
            done = [i for i, m in enumerate(masks) if new & m == m and bound & m != m]
            after = logrows + logs[v] + sum(logsel[i] for i in done)
            key = (logrows + logs[v] + math.log1p(len(done)), after)
            if best is None or key < best[0]:
                best = (key, v, after)
        assert best is not None
        _, v, logrows = best
        bound |= 1 << v
        order.append(v)
        todo.remove(v)
    return order
