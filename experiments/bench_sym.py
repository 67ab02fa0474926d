"""Benchmark of ir.sym on code-generation-like index expressions.

Builds 10,000 expressions of the shape ``(i*c + j)//c + k*N + (j % c)`` (ranged variables,
``c`` in 2..16, so the floor division and modulo simplify away), then substitutes and
evaluates them. Prints median microseconds per expression and the machine.

Run: ``python experiments/bench_sym.py [count]``
"""

from __future__ import annotations

import platform
import random
import statistics
import sys
import time
from collections.abc import Callable

from experiments.machine import cpu_model as cpu_name
from ir.sym import Expr, Var


def time_each(items: list, fn: Callable) -> tuple[float, float]:
    """(median, mean) microseconds of ``fn(item)`` over the items."""
    clock = time.perf_counter_ns
    ts = []
    for it in items:
        t0 = clock()
        fn(it)
        ts.append(clock() - t0)
    return statistics.median(ts) / 1000, sum(ts) / len(ts) / 1000


def main(count: int = 10_000) -> None:
    rng = random.Random(0)
    specs = []
    for n in range(count):
        c = rng.choice((2, 4, 8, 16))
        specs.append((n % 50, c, rng.randrange(1, 1 << 20)))

    def names(sp):
        g = sp[0]
        return f"i{g}", f"j{g}", f"k{g}", f"N{g}"

    def build_fresh(sp) -> Expr:
        ni, nj, nk, nn = names(sp)
        c = sp[1]
        i, j = Var(ni, 0, 1023), Var(nj, 0, c - 1)
        k, big_n = Var(nk, 0, 255), Var(nn, 1, 1 << 20)
        return (i * c + j) // c + k * big_n + (j % c)

    def build_unranged(sp) -> Expr:
        ni, nj, nk, nn = names(sp)
        c = sp[1]
        i, j, k, big_n = Var(ni), Var(nj + "u"), Var(nk), Var(nn)
        return (i * c + j) // c + k * big_n + (j % c)

    exprs = [build_fresh(sp) for sp in specs]
    opaque = [build_unranged(sp) for sp in specs]
    envs = [{f"i{sp[0]}": 7, f"j{sp[0]}": sp[1] - 1, f"k{sp[0]}": 3, f"N{sp[0]}": sp[2],
             f"j{sp[0]}u": 5} for sp in specs]

    rows = [
        ("build + simplify (ranged, simplifies)", lambda n: build_fresh(specs[n])),
        ("build + simplify (unranged, // and % stay)", lambda n: build_unranged(specs[n])),
        ("subs {N: value}", lambda n: exprs[n].subs({f"N{specs[n][0]}": specs[n][2]})),
        ("subs {i: 2*i + 1}", lambda n: exprs[n].subs({f"i{specs[n][0]}": 2 * Var("x") + 1})),
        ("evaluate", lambda n: exprs[n].evaluate(envs[n])),
        ("evaluate (unranged)", lambda n: opaque[n].evaluate(envs[n])),
        ("str (fresh expression)", lambda n: str(build_fresh(specs[n]) + n)),
        ("to_c (fresh, unranged)", lambda n: (build_unranged(specs[n]) + n).to_c()),
    ]
    print(f"machine: {cpu_name()} | {platform.python_implementation()} "
          f"{platform.python_version()} | {count} expressions, shape "
          f"(i*c + j)//c + k*N + (j % c)")
    print(f"example: {exprs[1]}   (unranged: {opaque[1]})")
    idx = list(range(count))
    for label, fn in rows:
        meds, means = [], []
        for _ in range(3):
            med, mean = time_each(idx, fn)
            meds.append(med)
            means.append(mean)
        print(f"  {label:<44} median {statistics.median(meds):7.2f} us/expr"
              f"   (mean {statistics.median(means):7.2f})")
    print("  (str/to_c rows include building the expression they print)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000)
