"""Benchmark of the mapping search (a script, not a test).

For CC'22 Listing 3 and the GPGPU'20 partial convolution: number of maps, constraint
instances per rule, time to the first valid mapping, valid mappings per second and total
count for the cp and z3 backends, and the fraction of uniformly random code assignments
that are valid (the paper's random baseline found 1 valid in 49,000).

    python -m experiments.bench_mapping [--samples 200000] [--z3-cap 5000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from experiments.machine import cpu_model as machine
from experiments.options import ranged
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
    ap.add_argument("--repeats", type=ranged(int, 1, 1000, "a count"), default=3,
                    help="enumerations per backend and program, medians (default 3)")
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
            first, total, count = time_backend(p, backend, repeats=args.repeats, cap=cap)
            capped = count >= cap
            rate = count / total if total else float("inf")
            print(f"| {name} | {len(p.labels)} | {len(p.constraints)} | {rules} | {backend} "
                  f"| {first * 1e3:.1f} | {total:.2f} | {count}{'+ (capped)' if capped else ''} "
                  f"| {rate:,.0f} | {rnd} |")
        print(f"|  |  |  | model built in {build * 1e3:.0f} ms |  |  |  |  |  |  |")


def families(prog, title: str) -> None:
    """Every assignment of the Cartesian product, grouped by the first rule (in rule order)
    it violates: which rule removes which family. Each rule's constraints are checked
    together, in rule order, and only as far as the two figures need: the first rule
    violated, then whether any later rule is violated too (an assignment no rule but
    one removes counts for that rule alone)."""
    import itertools
    from collections import Counter

    from mapper.rules import RULE_NAMES

    p = problem(prog)
    names = p.labels
    doms = [p.model.param(m).domain for m in names]
    by_rule: dict = {}
    for c in p.model.constraints:
        by_rule.setdefault(c.rule, []).append(c.holds)
    # a rule missing from RULE_NAMES fails here, as the ordering below needs every rule
    rules = sorted(by_rule.items(), key=lambda kv: RULE_NAMES.index(kv[0]))
    first: Counter = Counter()
    only: Counter = Counter()
    for vals in itertools.product(*doms):
        a = dict(zip(names, vals))
        i = next((i for i, (_, holds) in enumerate(rules) if not all(h(a) for h in holds)),
                 None)
        if i is None:
            first["(valid)"] += 1
            continue
        first[rules[i][0]] += 1
        if all(all(h(a) for h in holds) for _, holds in rules[i + 1:]):
            only[rules[i][0]] += 1
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
