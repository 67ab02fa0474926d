"""Three witnesses on many random programs (a script, not a test).

For each random program (ir.randprog, up to 6 maps, random nesting and local/private
memory): the solver's valid mappings (all, or --limit per program) are lowered, run on the
OpenCL device and compared with the interpreter; --oclgrind N also runs N mappings per
program under Oclgrind. Prints the outcome counts and every disagreement.

    python experiments/witness_codegen.py --programs 300 --limit 6 --oclgrind 1
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

from codegen.oclgrind import check_with_oclgrind, oclgrind_available
from codegen.runner import Runner
from ir.randprog import random_program, sizes_for
from mapper.api import enumerate_mappings
from mapper.candidates import build_candidate
from mapper.witness import check_program, random_inputs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=int, default=300)
    ap.add_argument("--limit", type=int, default=6, help="mappings per program (0: all)")
    ap.add_argument("--oclgrind", type=int, default=0, help="mappings per program on Oclgrind")
    ap.add_argument("--max-maps", type=int, default=6)
    args = ap.parse_args()
    runner = Runner()
    counts: Counter = Counter()
    grind: Counter = Counter()
    bad = []
    t0 = time.perf_counter()
    for seed in range(args.programs):
        p = random_program(seed, max_maps=args.max_maps)
        sizes = sizes_for(p)
        rep = check_program(p, sizes, runner, limit=args.limit or None, seed=seed)
        counts.update(rep.counts())
        bad += [(seed, str(m), o.label, o.reason[:160]) for m, o in rep.disagreements]
        if args.oclgrind and oclgrind_available():
            inputs = random_inputs(p, sizes, seed)
            for m in enumerate_mappings(p, order="random", seed=seed, limit=args.oclgrind):
                r = check_with_oclgrind(build_candidate(p, m, sizes), inputs, timeout_s=120)
                grind["clean" if r.clean else "issues"] += 1
                if not r.clean:
                    bad.append((seed, str(m), "oclgrind", str(r.issues or r.error)[:160]))
    dt = time.perf_counter() - t0
    print(f"{args.programs} random programs, {sum(counts.values())} valid mappings run on "
          f"{runner.limits.get('name', 'the device')} in {dt:.0f} s")
    print("outcomes:", dict(counts))
    if grind:
        print("oclgrind:", dict(grind))
    print(f"disagreements: {len(bad)}")
    for b in bad:
        print("  ", b)


if __name__ == "__main__":
    main()
