"""Oracle for the mapping rules: which code assignments actually lower, run correctly and are
race-free, and how precisely the rules predict it.

For a program and two size points (the second with loop counts that do not divide the
first's work-group sizes, where the program allows), every assignment of the codes
{S, G0, G1, W0, W1, L0, L1} (plus fused for perfectly nested maps) is enumerated, or a
uniform sample of ``--samples`` when the product is larger than ``--full``. Each one is
lowered with the mapping checks off (``lower_candidate(..., check=False)``: the lowering's
own typed checks still run) and run on the device against the reference interpreter at
both size points (``WorkerPool.evaluate_candidate``); ``--oclgrind K`` also runs K of the
accepted ones on Oclgrind at the first size point. The oracle accepts an assignment when
it is ``ok`` at both points (and Oclgrind-clean where checked).

Every mapping the validity rules admit (up to ``--admitted``) is evaluated as well, so that
precision is measured on the admitted set; recall is measured on the uniform part only
(unbiased). Printed per program and in total: precision and recall of the validity rules
alone and with the heuristics on, and each disagreement with the rule instances
responsible.

    .venv/bin/python experiments/oracle.py examples/cc22_listing3.lift
    .venv/bin/python experiments/oracle.py --examples
    .venv/bin/python experiments/oracle.py --random 200 --max-maps 4 --samples 12
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import sys
import time
from dataclasses import dataclass, field

import numpy as np

ORACLE_CODES = (0, 30, 31, 20, 21, 10, 11)  # S, G0, G1, W0, W1, L0, L1
FUSED = 1

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
}


@dataclass
class Row:
    mapping: dict
    oracle: bool
    outcome: str
    valid: bool  # the validity rules admit it
    heur: bool  # validity rules and heuristics admit it
    uniform: bool  # part of the uniform sample
    violated: list = field(default_factory=list)  # validity instances violated
    heur_violated: list = field(default_factory=list)


def _problem(prog, fusion: str, heuristics: bool):
    from mapper.api import problem

    try:
        return problem(prog, fusion=fusion, heuristics=heuristics)
    except TypeError:  # before rules had kinds: every rule is a validity rule
        return problem(prog, fusion="free" if not heuristics else fusion)


def domains(p) -> dict[str, tuple[int, ...]]:
    out = {}
    for m in p.labels:
        d = ORACLE_CODES
        if p.tree.maps[m].perfectly_nested:
            d = d + (FUSED,)
        out[m] = d
    return out


def assignments(p, full: int, samples: int, rng: random.Random) -> list[dict]:
    doms = domains(p)
    labels = list(doms)
    total = 1
    for d in doms.values():
        total *= len(d)
    if total <= full:
        return [dict(zip(labels, v)) for v in itertools.product(*(doms[m] for m in labels))]
    seen, out = set(), []
    while len(out) < min(samples, total):
        a = tuple(rng.choice(doms[m]) for m in labels)
        if a not in seen:
            seen.add(a)
            out.append(dict(zip(labels, a)))
    return out


def _eval_point(pool, prog, maps, sizes, seed, timeout):
    from ir.interp import evaluate
    from mapper.candidates import lower_candidate
    from mapper.witness import random_inputs

    inputs = random_inputs(prog, sizes, seed)
    arrays = {p.name for p in prog.params if type(p.type).__name__ == "ArrayType"}
    ref_in = {k: (v if k in arrays else v[0]) for k, v in inputs.items()}
    ref = evaluate(prog, ref_in, sizes)
    tol = {"rtol": 1e-4, "atol": max(1e-4, 1e-5 * float(np.abs(np.asarray(ref)).max()))}
    fns = [functools.partial(lower_candidate, prog, m, sizes, fusion="free", check=False)
           for m in maps]
    return pool.map_candidates(fns, inputs, ref, timeout_s=timeout, repeats=1, warmup=0,
                               **tol), inputs


def oracle_program(pool, prog, sizes_pts, *, full=400, samples=40, admitted=60, seed=0,
                   timeout=60.0, oclgrind=0, log=None, show_bad=False) -> list[Row]:
    from mapper.api import enumerate_mappings
    from mapper.encoding import MapCodes

    rng = random.Random(seed)
    pv = _problem(prog, "free", False)
    ph = _problem(prog, "always", True)
    uni = assignments(pv, full, samples, rng)
    doms = domains(pv)
    keys = {tuple(sorted(a.items())) for a in uni}
    extra = []
    for m in enumerate_mappings(pv, fusion="free", order="random", seed=seed):
        d = dict(m)
        if all(v in doms[k] for k, v in d.items()) and tuple(sorted(d.items())) not in keys:
            extra.append(d)
            keys.add(tuple(sorted(d.items())))
        if len(extra) >= admitted:
            break
    maps = uni + extra
    verdict = {i: (True, "ok") for i in range(len(maps))}
    todo = list(range(len(maps)))
    for k, sizes in enumerate(sizes_pts):
        if not todo:
            break
        outs, inputs = _eval_point(pool, pv.program, [maps[i] for i in todo], sizes, seed,
                                   timeout)
        nxt = []
        for i, o in zip(todo, outs):
            if o.ok:
                nxt.append(i)
            else:
                verdict[i] = (False, f"{o.label}@{k + 1}: {o.reason[:120]}")
        todo = nxt
    if oclgrind and todo:
        from codegen.oclgrind import check_with_oclgrind, oclgrind_available
        from mapper.candidates import lower_candidate

        if oclgrind_available():
            for i in random.Random(seed).sample(todo, min(oclgrind, len(todo))):
                cp = lower_candidate(pv.program, maps[i], sizes_pts[0], fusion="free",
                                     check=False)
                from mapper.witness import random_inputs

                rep = check_with_oclgrind(cp, random_inputs(pv.program, sizes_pts[0], seed),
                                          timeout_s=120)
                if not rep.clean:
                    verdict[i] = (False, "oclgrind: " + rep.summary().replace("\n", "; "))
    rows = []
    for i, m in enumerate(maps):
        vv = pv.model.violated(m)
        hv = ph.model.violated(m) if all(v in ph.model.param(k).domain
                                         for k, v in m.items()) else ["fused-not-allowed"]
        rows.append(Row(m, verdict[i][0], verdict[i][1], not vv, not vv and not hv,
                        i < len(uni), [str(c) for c in vv], [str(c) for c in hv]))
    if log is not None:
        for r in rows:
            if show_bad and not r.oracle:
                print(f"    bad {MapCodes(r.mapping)}  {r.outcome}  "
                      f"[{', '.join(sorted({v.split(']')[0][1:] for v in r.violated}))}]",
                      file=log)
            if r.valid != r.oracle:
                kind = "ADMITS-BAD" if r.valid else "REJECTS-GOOD"
                why = r.outcome if r.valid else "; ".join(r.violated[:3])
                print(f"    {kind} {MapCodes(r.mapping)}  {why}", file=log)
    return rows


def rule_stats(rows: list[Row]) -> dict:
    """Per validity rule: oracle-ok rows it rejects, and oracle-bad rows only it rejects."""
    out: dict = {}
    for r in rows:
        rules = {v.split("]")[0][1:] for v in r.violated}
        for x in rules:
            d = out.setdefault(x, {"rejects_good": 0, "sole_on_bad": 0})
            if r.oracle:
                d["rejects_good"] += 1
            elif len(rules) == 1:
                d["sole_on_bad"] += 1
    return out


def stats(rows: list[Row]) -> dict:
    adm = [r for r in rows if r.valid]
    admh = [r for r in rows if r.heur]
    good_u = [r for r in rows if r.uniform and r.oracle]
    return {
        "evaluated": len(rows),
        "oracle_ok": sum(r.oracle for r in rows),
        "admitted": len(adm),
        "admitted_bad": sum(not r.oracle for r in adm),
        "admitted_h": len(admh),
        "admitted_h_bad": sum(not r.oracle for r in admh),
        "uniform_ok": len(good_u),
        "uniform_ok_admitted": sum(r.valid for r in good_u),
        "uniform_ok_admitted_h": sum(r.heur for r in good_u),
    }


def fmt(s: dict) -> str:
    def ratio(a, b):
        return f"{a}/{b} = {100 * a / b:.1f}%" if b else f"{a}/{b}"

    return (f"evaluated {s['evaluated']}, oracle ok {s['oracle_ok']} | validity: precision "
            f"{ratio(s['admitted'] - s['admitted_bad'], s['admitted'])}, recall "
            f"{ratio(s['uniform_ok_admitted'], s['uniform_ok'])} | +heuristics: precision "
            f"{ratio(s['admitted_h'] - s['admitted_h_bad'], s['admitted_h'])}, recall "
            f"{ratio(s['uniform_ok_admitted_h'], s['uniform_ok'])}")


def add(a: dict, b: dict) -> dict:
    return {k: a.get(k, 0) + b[k] for k in b}


class Totals:
    """Sums over programs: the stats of the examples and of the random programs, and each
    validity rule's counts (:func:`rule_stats`)."""

    def __init__(self) -> None:
        self.examples: dict = {}
        self.random: dict = {}
        self.n_random = 0
        self.rules: dict = {}

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
            self.examples = add(self.examples, s)
        return s

    def report(self) -> None:
        if self.examples:
            print(f"EXAMPLES: {fmt(self.examples)}")
        if self.random:
            print(f"RANDOM ({self.n_random} programs): {fmt(self.random)}")
        for k, v in sorted(self.rules.items()):
            print(f"rule {k}: rejects {v['rejects_good']} oracle-ok mappings; sole rejector of "
                  f"{v['sole_on_bad']} oracle-rejected ones")


def random_points(prog, max_n: int = 4096):
    """``ir.randprog.size_points``, with sizes doubled (the same at both points, the least
    doubling first) until every computing map runs at least two iterations at both: a
    map of one iteration distributes nothing, so any code for it is correct there and
    the verdict would say nothing about the mapping (the smallest sizes nest splits down
    to single iterations: ``s1/s0`` with ``s0 = s1``)."""
    from ir.randprog import size_points
    from ir.typecheck import typecheck
    from mapper.nesting import label_maps

    pts = size_points(prog)
    info = typecheck(label_maps(prog))
    trips = [t[0].size for t in info.map_types.values() if hasattr(t[0], "size")]
    rels = [c.rel for c in info.constraints]
    names = sorted(pts[0])

    def good(env):
        try:
            return (env.get("N", 0) <= max_n and all(r.evaluate(env) for r in rels)
                    and all(x.evaluate(env) >= 2 for x in trips))
        except Exception:  # noqa: BLE001  (a size the point does not give)
            return False

    if all(good(p) for p in pts):
        return pts
    for shifts in sorted(itertools.product(range(4), repeat=len(names)), key=sum):
        cand = tuple({k: v << sh for (k, v), sh in zip(sorted(p.items()), shifts)}
                     for p in pts)
        if all(good(c) for c in cand):
            return cand
    return pts


def _program_of(name: str, max_maps: int = 4):
    if name.startswith("random seed "):
        from ir.randprog import random_program

        return random_program(int(name.split()[-1]), max_maps=max_maps, extended=True)
    from ir.syntax import parse_file

    return parse_file(name)


def replay(path: str, quiet: bool = False) -> int:
    """Precision and recall of the current rules against the verdicts of a ``--dump``
    file: rows are judged again by the rules (not by the device), so a rule change is
    measured in seconds. Precision counts every dumped row the rules now admit (uniform or
    admitted by the rules of the dump), which is biased towards the old rules' admitted set;
    the full oracle run gives the figures."""
    from mapper.encoding import MapCodes

    by_prog: dict[str, list[dict]] = {}
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            by_prog.setdefault(d["program"], []).append(d)
    totals = Totals()
    for name, ds in by_prog.items():
        prog = _program_of(name, ds[0].get("max_maps", 4))
        pv = _problem(prog, "free", False)
        ph = _problem(prog, "always", True)
        rows = []
        for d in ds:
            m = d["mapping"]
            vv = pv.model.violated(m)
            hv = ph.model.violated(m) if all(v in ph.model.param(k).domain
                                             for k, v in m.items()) else ["fused-not-allowed"]
            rows.append(Row(m, d["oracle"], d["outcome"], not vv, not vv and not hv,
                            d["uniform"], [str(c) for c in vv], [str(c) for c in hv]))
        s = totals.count(name, rows)
        bad = [r for r in rows if r.valid != r.oracle]
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
    ap.add_argument("--full", type=int, default=400, help="enumerate all up to this many")
    ap.add_argument("--samples", type=int, default=40, help="uniform sample size otherwise")
    ap.add_argument("--admitted", type=int, default=60, help="admitted mappings to add")
    ap.add_argument("--oclgrind", type=int, default=0, help="Oclgrind this many ok ones")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--show-bad", action="store_true", help="list every oracle rejection")
    ap.add_argument("--quiet", action="store_true", help="no per-disagreement lines")
    ap.add_argument("--json", help="write the totals here")
    ap.add_argument("--dump", help="write every evaluated mapping and its verdict here "
                    "(JSON lines), for --replay")
    ap.add_argument("--replay", help="judge the current rules against the verdicts of a "
                    "--dump file (no device; precision on its uniform rows and the admitted "
                    "rows it holds)")
    ap.add_argument("--seeds", help="only these random seeds (comma-separated)")
    args = ap.parse_args(argv)
    if args.replay:
        return replay(args.replay, quiet=args.quiet)

    from codegen.worker import WorkerPool
    from ir.syntax import parse_file

    progs = []
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

        seeds = range(args.seed0, args.seed0 + args.random)
        if args.seeds:
            seeds = [int(x) for x in args.seeds.split(",")]
        for s in seeds:
            p = random_program(s, max_maps=args.max_maps, extended=True)
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
                                  admitted=args.admitted, timeout=args.timeout,
                                  oclgrind=args.oclgrind, log=log,
                                  show_bad=args.show_bad)
            if dump is not None:
                for r in rows:
                    dump.write(json.dumps({"program": name, "mapping": r.mapping,
                                           "oracle": r.oracle, "outcome": r.outcome,
                                           "uniform": r.uniform,
                                           "max_maps": args.max_maps}) + "\n")
                dump.flush()
            print(f"{name}: {fmt(totals.count(name, rows))}", flush=True)
    totals.report()
    print(f"({time.time() - t0:.0f} s)")
    if dump is not None:
        dump.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"examples": totals.examples, "random": totals.random}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
