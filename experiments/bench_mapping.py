"""Benchmark of the mapping search (a script, not a test).

For CC'22 Listing 3 and the GPGPU'20 partial convolution: number of maps, constraint
instances per rule, time to the first valid mapping, valid mappings per second and total
count for the cp and z3 backends, and the fraction of uniformly random code assignments
that are valid (the paper's random baseline found 1 valid in 49,000).

    python experiments/bench_mapping.py [--samples 200000] [--markdown]
"""

from __future__ import annotations

import argparse
import statistics
import time

from experiments.machine import cpu_model as machine
from ir.programs import cc22_listing1, cc22_listing3, conv_final_stage, conv_partial_stage
from mapper.api import enumerate_mappings, problem, random_assignment_validity


def time_backend(prog, backend: str, repeats: int = 3, cap: int = 200_000):
    firsts, totals, counts = [], [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        it = enumerate_mappings(prog, backend=backend)
        first = next(it, None)
        t1 = time.perf_counter()
        n = 1 if first is not None else 0
        for _m in it:
            n += 1
            if n >= cap:
                break
        t2 = time.perf_counter()
        firsts.append(t1 - t0)
        totals.append(t2 - t0)
        counts.append(n)
    return statistics.median(firsts), statistics.median(totals), counts[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--z3-cap", type=int, default=5000, help="stop z3 after N mappings")
    args = ap.parse_args()
    programs = {
        "CC'22 Listing 1": cc22_listing1(),
        "CC'22 Listing 3": cc22_listing3(),
        "CC'22 Listing 3 (toLocal)": cc22_listing3(local=True),
        "GPGPU'20 partial conv": conv_partial_stage(),
        "GPGPU'20 final reduction": conv_final_stage(),
    }
    print(f"machine: {machine()}\n")
    print("| program | maps | instances | per rule | backend | first (ms) | total (s) "
          "| valid | mappings/s | random valid |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, prog in programs.items():
        t0 = time.perf_counter()
        p = problem(prog)
        build = time.perf_counter() - t0
        rules = ", ".join(f"{k} {v}" for k, v in p.per_rule().items())
        ok, n = random_assignment_validity(p, args.samples, seed=0)
        space = 1
        for m in p.labels:
            space *= len(p.model.param(m).domain)
        valid = sum(1 for _ in enumerate_mappings(p))
        rnd = f"{ok}/{n} sampled; exact 1 in {space / valid:,.0f} ({valid}/{space:.2e})"
        for backend in ("cp", "z3"):
            cap = args.z3_cap if backend == "z3" else 10**9
            first, total, count = time_backend(p, backend, cap=cap)
            capped = count >= cap
            rate = count / total if total else float("inf")
            print(f"| {name} | {len(p.labels)} | {len(p.constraints)} | {rules} | {backend} "
                  f"| {first * 1e3:.1f} | {total:.2f} | {count}{'+ (capped)' if capped else ''} "
                  f"| {rate:,.0f} | {rnd} |")
        print(f"|  |  |  | model built in {build * 1e3:.0f} ms |  |  |  |  |  |  |")


def families(prog, title: str) -> None:
    """Every assignment of the Cartesian product, grouped by the first rule (in rule order)
    it violates: which rule removes which family."""
    import itertools
    from collections import Counter

    from mapper.rules import RULE_NAMES

    p = problem(prog)
    names = p.labels
    doms = [p.model.param(m).domain for m in names]
    first: Counter = Counter()
    only: Counter = Counter()
    for vals in itertools.product(*doms):
        bad = {c.rule for c in p.model.violated(dict(zip(names, vals)))}
        if not bad:
            first["(valid)"] += 1
            continue
        first[min(bad, key=RULE_NAMES.index)] += 1
        if len(bad) == 1:
            only[next(iter(bad))] += 1
    total = sum(first.values())
    print(f"\n{title}: {total} assignments of {', '.join(names)}")
    print("| rule (in order) | removed first by it | removed by it alone |")
    print("|---|---|---|")
    for r in RULE_NAMES:
        if first[r] or only[r]:
            print(f"| {r} | {first[r]} | {only[r]} |")
    print(f"| valid | {first['(valid)']} | |")


if __name__ == "__main__":
    main()
    families(cc22_listing3(), "CC'22 Listing 3")
    families(cc22_listing3(local=True), "CC'22 Listing 3 with toLocal")
