"""Oracle for the mapping rules: which code assignments actually lower, run correctly and are
race-free, and how precisely the rules predict it.

For a program and two size points (the second with loop counts that do not divide the
first's work-group sizes, where the program allows), the assignments of the codes
{S, G0, G1, W0, W1, L0, L1} (plus fused for perfectly nested maps, so every fusion choice)
are enumerated when their product is at most ``--full``; otherwise the oracle samples
*near the valid set*, where the correct mappings are: up to ``--admitted`` mappings the
validity rules admit, up to ``--near1`` assignments one code away from an admitted one and
``--near2`` two codes away (rejected by the rules), and ``--samples`` uniform ones. Each is
lowered with the mapping checks off (``build_candidate(..., force=True)``: the lowering's
own typed checks still run) and run on the device against the reference interpreter at
both size points (``WorkerPool.evaluate_candidate``); ``--oclgrind K`` also runs K of the
accepted ones on Oclgrind at the first size point. The oracle accepts an assignment when
it is ``ok`` at both points (and Oclgrind-clean where checked).

Precision = admitted mappings the oracle accepts / admitted; recall = accepted mappings the
rules admit / accepted, over every evaluated mapping (exhaustive, or the near-valid sample:
recall is then measured on the correct mappings around the valid set, hundreds per
program, and each rejected correct one is listed). Printed per program and in total: the
two figures for the validity rules alone and with the heuristics on, each disagreement
with the rule instances responsible, per validity rule how many correct mappings it
rejects, and how many programs reach 100% precision and >= 99% recall.

    .venv/bin/python experiments/oracle.py examples/cc22_listing3.lift
    .venv/bin/python experiments/oracle.py --examples
    .venv/bin/python experiments/oracle.py --random 200 --max-maps 4
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from experiments.machine import save_json
from mapper.oracle import (
    Row,
    fmt,
    meets,
    oracle_program,
    over_budget,
    problem_for,
    random_points,
    rule_stats,
    stats,
)

# example -> (size point 1, size point 2 with non-dividing loop counts)
EXAMPLE_SIZES = {
    "examples/cc22_listing1.lift": ({"I": 4, "J": 8, "K": 8}, {"I": 3, "J": 5, "K": 6}),
    "examples/cc22_listing3.lift": ({"N": 64, "s0": 16, "s1": 4}, {"N": 36, "s0": 12, "s1": 3}),
    "examples/listing3_local.lift": ({"N": 64, "s0": 16, "s1": 4},
                                     {"N": 36, "s0": 12, "s1": 3}),
    "examples/gpgpu20_stencil2d.lift": ({"H": 16, "W": 16}, {"H": 13, "W": 11}),
    "examples/gpgpu20_conv_highlevel.lift": (
        dict(C=2, H=6, W=6, M=2, KH=3, KW=3, strideY=1, strideX=1, padT=1, padB=1, padL=1,
             padR=1),
        dict(C=3, H=7, W=5, M=3, KH=3, KW=3, strideY=1, strideX=1, padT=1, padB=1, padL=1,
             padR=1)),
    "examples/matmul_tiled.lift": ({"M": 16, "N": 16, "K": 16, "t": 4},
                                   {"M": 12, "N": 24, "K": 12, "t": 4}),
    "examples/pipeline2.lift": ({"H": 8, "W": 8}, {"H": 7, "W": 5}),
    "examples/rowcol_sums.lift": ({"H": 8, "W": 8}, {"H": 7, "W": 5}),
    "examples/smooth1d_tiles.lift": ({"N": 64, "s": 8}, {"N": 36, "s": 6}),
    "examples/matmul_blocked.lift": ({"M": 8, "N": 8, "K": 16, "bm": 4, "bn": 2, "v": 4},
                                     {"M": 12, "N": 6, "K": 8, "bm": 4, "bn": 2, "v": 4}),
    "examples/blur_separable.lift": ({"H": 8, "W": 9}, {"H": 7, "W": 6}),
    "examples/blur_laplacian.lift": ({"H": 8, "W": 9}, {"H": 7, "W": 6}),
    "examples/harris.lift": ({"H": 8, "W": 9}, {"H": 7, "W": 10}),
    "examples/conv2_layers.lift": ({"H": 6, "W": 6, "C": 2, "M": 3, "N": 2},
                                   {"H": 7, "W": 5, "C": 3, "M": 2, "N": 3}),
    "examples/gpgpu20_conv_partial.lift": (
        dict(C=4, H=4, W=4, M=4, K=3, S=1, P=1, theta=4, rho=0, kappa=2, sigma=2, omega=12,
             v=4),
        dict(C=4, H=6, W=8, M=6, K=3, S=1, P=1, theta=4, rho=0, kappa=3, sigma=4, omega=12,
             v=4)),
}


def add(a: dict, b: dict) -> dict:
    return {k: a.get(k, 0) + b[k] for k in b}


class Totals:
    """Sums over programs: the stats of the examples and of the random programs, each
    validity rule's counts (:func:`rule_stats`), and the programs that miss the bar
    (:func:`meets`)."""

    def __init__(self) -> None:
        self.examples: dict = {}
        self.random: dict = {}
        self.n_examples = 0
        self.n_random = 0
        self.rules: dict = {}
        self.missed: list[str] = []

    def count(self, name: str, rows: list[Row]) -> dict:
        """Adds the rows of the program ``name``; returns their stats."""
        for k, v in rule_stats(rows).items():
            d = self.rules.setdefault(k, {"rejects_good": 0, "sole_on_bad": 0})
            for kk in v:
                d[kk] += v[kk]
        s = stats(rows)
        if name.startswith("random"):
            self.random, self.n_random = add(self.random, s), self.n_random + 1
        else:
            self.examples, self.n_examples = add(self.examples, s), self.n_examples + 1
        if not meets(s):
            self.missed.append(name)
        return s

    def summary(self) -> dict:
        """The totals as JSON-able data."""
        return {"examples": {"programs": self.n_examples, **self.examples},
                "random": {"programs": self.n_random, **self.random},
                "rules": self.rules, "missed": self.missed}

    def report(self) -> None:
        if self.examples:
            print(f"EXAMPLES ({self.n_examples} programs): {fmt(self.examples)}")
        if self.random:
            print(f"RANDOM ({self.n_random} programs): {fmt(self.random)}")
        for k, v in sorted(self.rules.items()):
            print(f"rule {k}: rejects {v['rejects_good']} oracle-ok mappings; sole rejector of "
                  f"{v['sole_on_bad']} oracle-rejected ones")
        n = self.n_examples + self.n_random
        print(f"precision 100% and recall >= 99%: {n - len(self.missed)} of {n} programs"
              + (f" (not: {', '.join(self.missed)})" if self.missed else ""))


def _program_of(name: str, max_maps: int = 4, wide: bool = True, tiles: bool = False):
    if name.startswith("random seed "):
        from ir.randprog import random_program

        return random_program(int(name.split()[-1]), max_maps=max_maps, extended=True,
                              wide=wide, tiles=tiles)
    from ir.syntax import parse_file

    return parse_file(name)


def replay(path: str, quiet: bool = False) -> int:
    """Precision and recall of the current rules against the verdicts of a ``--dump``
    file: rows are judged again by the rules (not by the device), so a rule change is
    measured in seconds. The dumped rows were chosen around the valid set of the dump's
    rules, so precision is biased towards that set; the full oracle run gives the
    figures. ``path`` may be gzipped (``.gz``)."""
    import gzip

    from mapper.encoding import MapCodes

    by_prog: dict[str, list[dict]] = {}
    opener = gzip.open if path.endswith(".gz") else open  # a committed dump is gzipped
    with opener(path, "rt") as f:
        for line in f:
            d = json.loads(line)
            by_prog.setdefault(d["program"], []).append(d)
    totals = Totals()
    for name, ds in by_prog.items():
        prog = _program_of(name, ds[0].get("max_maps", 4), ds[0].get("wide", False),
                           ds[0].get("tiles", False))
        pv = problem_for(prog, "free", False)
        ph = problem_for(prog, "always", True)
        rows = []
        for d in ds:
            m = d["mapping"]
            vv = pv.model.violated(m)
            hv = ph.model.violated(m) if all(v in ph.model.param(k).domain
                                             for k, v in m.items()) else ["fused-not-allowed"]
            rows.append(Row(m, d["oracle"], d["outcome"], not vv, not vv and not hv,
                            d.get("origin") or ("uniform" if d.get("uniform") else "admitted"),
                            [str(c) for c in vv], [str(c) for c in hv],
                            d.get("miscompiled", False)))
        s = totals.count(name, rows)
        bad = [r for r in rows if r.valid != r.oracle and not over_budget(r.outcome)]
        if bad and not quiet:
            print(f"{name}: {fmt(s)}")
            for r in bad:
                kind = "ADMITS-BAD" if r.valid else "REJECTS-GOOD"
                why = r.outcome if r.valid else "; ".join(r.violated[:3])
                print(f"    {kind} {MapCodes(r.mapping)}  {why}")
    totals.report()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--examples", action="store_true", help="every example with known sizes")
    ap.add_argument("--random", type=int, default=0, help="N random programs (ir.randprog)")
    ap.add_argument("--seed0", type=int, default=0)
    ap.add_argument("--max-maps", type=int, default=4)
    ap.add_argument("--old-generator", action="store_true",
                    help="random programs without ir.randprog's wide shapes (before issue 24)")
    ap.add_argument("--tiles", action="store_true",
                    help="random programs with ir.randprog's 2-D local tiles too (needs "
                    "--max-maps 5 or more)")
    ap.add_argument("--full", type=int, default=2500, help="enumerate all up to this many")
    ap.add_argument("--admitted", type=int, default=200,
                    help="otherwise: this many mappings the validity rules admit")
    ap.add_argument("--near1", type=int, default=200,
                    help="otherwise: this many one code away from an admitted one")
    ap.add_argument("--near2", type=int, default=100,
                    help="otherwise: this many two codes away from an admitted one")
    ap.add_argument("--samples", type=int, default=16,
                    help="otherwise: this many uniform ones")
    ap.add_argument("--oclgrind", type=int, default=0, help="Oclgrind this many ok ones")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--show-bad", action="store_true", help="list every oracle rejection")
    ap.add_argument("--no-confirm", action="store_true",
                    help="take a wrong result on the device as final (no Oclgrind re-run)")
    ap.add_argument("--quiet", action="store_true", help="no per-disagreement lines")
    ap.add_argument("--json", help="write the totals here")
    ap.add_argument("--dump", help="write every evaluated mapping and its verdict here "
                    "(JSON lines), for --replay")
    ap.add_argument("--replay", help="judge the current rules against the verdicts of a "
                    "--dump file (no device)")
    ap.add_argument("--seeds", help="only these random seeds (comma-separated)")
    args = ap.parse_args(argv)
    if args.replay:
        return replay(args.replay, quiet=args.quiet)

    from codegen.worker import WorkerPool
    from ir.syntax import parse_file

    progs: list[tuple[str, Any, Any]] = []  # name, program (a Lambda), size points
    files = list(args.files) + (sorted(EXAMPLE_SIZES) if args.examples else [])
    for f in files:
        if f not in EXAMPLE_SIZES:
            print(f"no sizes known for {f}", file=sys.stderr)
            return 2
        try:
            progs.append((f, parse_file(f), EXAMPLE_SIZES[f]))
        except FileNotFoundError:
            print(f"skipping {f}: not found", file=sys.stderr)
    if args.random:
        from ir.randprog import random_program

        seeds: list[int] = list(range(args.seed0, args.seed0 + args.random))
        if args.seeds:
            seeds = [int(x) for x in args.seeds.split(",")]
        for s in seeds:
            p = random_program(s, max_maps=args.max_maps, extended=True,
                               wide=not args.old_generator, tiles=args.tiles)
            try:
                progs.append((f"random seed {s}", p, random_points(p)))
            except ValueError as e:
                print(f"random seed {s}: {e}", file=sys.stderr)
    totals = Totals()
    t0 = time.time()
    log = None if args.quiet else sys.stdout
    dump = open(args.dump, "w") if args.dump else None  # noqa: SIM115
    with WorkerPool(workers=args.workers) as pool:
        for name, prog, pts in progs:
            rows = oracle_program(pool, prog, pts, full=args.full, samples=args.samples,
                                  admitted=args.admitted, near1=args.near1,
                                  near2=args.near2, timeout=args.timeout,
                                  oclgrind=args.oclgrind, log=log,
                                  show_bad=args.show_bad, confirm=not args.no_confirm)
            if dump is not None:
                for r in rows:
                    dump.write(json.dumps({"program": name, "mapping": r.mapping,
                                           "oracle": r.oracle, "outcome": r.outcome,
                                           "origin": r.origin,
                                           "miscompiled": r.miscompiled,
                                           "max_maps": args.max_maps,
                                           "wide": not args.old_generator,
                                           "tiles": args.tiles}) + "\n")
                dump.flush()
            print(f"{name}: {fmt(totals.count(name, rows))}", flush=True)
    totals.report()
    print(f"({time.time() - t0:.0f} s)")
    if dump is not None:
        dump.close()
    save_json(args.json, totals.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
