"""Oracle for the mapping rules: which code assignments actually lower, run correctly and are
race-free, and how precisely the rules predict it.

For a program and two size points (the second with loop counts that do not divide the
first's work-group sizes, where the program allows), the assignments of the codes
{S, G0, G1, W0, W1, L0, L1} (plus fused for perfectly nested maps, so every fusion choice)
are enumerated when their product is at most ``--full``; otherwise the oracle samples
*near the valid set*, where the correct mappings are: up to ``--admitted`` mappings the
validity rules admit, up to ``--near1`` assignments one code away from an admitted one and
``--near2`` two codes away (rejected by the rules), and ``--samples`` uniform ones. Each is
lowered with the mapping checks off (``lower_candidate(..., check=False)``: the lowering's
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
    "examples/smooth1d_tiles.lift": ({"N": 64, "s": 8}, {"N": 36, "s": 6}),
}


@dataclass
class Row:
    mapping: dict
    oracle: bool
    outcome: str
    valid: bool  # the validity rules admit it
    heur: bool  # validity rules and heuristics admit it
    origin: str  # all, admitted, near1, near2 or uniform (see ``candidates``)
    violated: list = field(default_factory=list)  # validity instances violated
    heur_violated: list = field(default_factory=list)
    miscompiled: bool = False  # a wrong result on the device that Oclgrind runs correctly


def _problem(prog, fusion: str, heuristics: bool):
    from mapper.api import problem

    try:
        return problem(prog, fusion=fusion, heuristics=heuristics)
    except TypeError:  # before rules had kinds: every rule is a validity rule
        return problem(prog, fusion="free" if not heuristics else fusion)


def domains(p) -> dict[str, tuple[int, ...]]:
    """The oracle's codes for each map of problem ``p`` (fused where perfectly nested)."""
    out: dict[str, tuple[int, ...]] = {}
    for m in p.labels:
        d: tuple[int, ...] = ORACLE_CODES
        if p.tree.maps[m].perfectly_nested:
            d = d + (FUSED,)
        out[m] = d
    return out


def _product(doms: dict) -> int:
    total = 1
    for d in doms.values():
        total *= len(d)
    return total


def candidates(p, *, full: int, admitted: int, near1: int, near2: int, samples: int,
               seed: int) -> list[tuple[dict, str]]:
    """The assignments to evaluate, each with its origin: every one (``all``) when the
    product of the oracle's domains is at most ``full``; else ``admitted`` ones the
    validity rules admit, ``near1``/``near2`` ones one/two codes away from an admitted one
    (and not admitted), and ``samples`` uniform ones (not already chosen)."""
    from mapper.api import enumerate_mappings

    rng = random.Random(seed)
    doms = domains(p)
    labels = list(doms)
    total = _product(doms)
    if total <= full:
        return [(dict(zip(labels, v)), "all")
                for v in itertools.product(*(doms[m] for m in labels))]
    valid = []
    for m in enumerate_mappings(p, fusion="free", order="random", seed=seed):
        d = dict(m)
        if all(d[k] in doms[k] for k in labels):
            valid.append(tuple(d[k] for k in labels))
    vset = set(valid)

    def around(keys) -> set:
        out = set()
        for k in keys:
            for i, lab in enumerate(labels):
                for code in doms[lab]:
                    if code != k[i]:
                        out.add(k[:i] + (code,) + k[i + 1:])
        return out

    d1 = around(vset) - vset
    d2 = around(d1) - vset - d1
    picked: list[tuple[tuple, str]] = []
    for pool, n, origin in ((valid, admitted, "admitted"), (sorted(d1), near1, "near1"),
                            (sorted(d2), near2, "near2")):
        picked += [(k, origin) for k in rng.sample(pool, min(n, len(pool)))]
    seen = {k for k, _ in picked}
    tries = 0
    while samples > 0 and len(seen) < total and tries < 50 * samples:
        tries += 1
        k = tuple(rng.choice(doms[m]) for m in labels)
        if k not in seen:
            seen.add(k)
            picked.append((k, "uniform"))
            samples -= 1
    return [(dict(zip(labels, k)), origin) for k, origin in picked]


def _reference(prog, sizes, seed):
    """Random inputs, the interpreter's result and the comparison tolerance at ``sizes``."""
    from ir.interp import evaluate
    from mapper.data import random_inputs

    inputs = random_inputs(prog, sizes, seed)
    arrays = {p.name for p in prog.params if type(p.type).__name__ == "ArrayType"}
    ref_in = {k: (v if k in arrays else v[0]) for k, v in inputs.items()}
    ref = evaluate(prog, ref_in, sizes)
    tol = {"rtol": 1e-4, "atol": max(1e-4, 1e-5 * float(np.abs(np.asarray(ref)).max()))}
    return inputs, ref, tol


def _eval_point(pool, prog, maps, sizes, seed, timeout):
    from mapper.candidates import lower_candidate

    inputs, ref, tol = _reference(prog, sizes, seed)
    fns = [functools.partial(lower_candidate, prog, m, sizes, fusion="free", check=False)
           for m in maps]
    return pool.map_candidates(fns, inputs, ref, timeout_s=timeout, repeats=1, warmup=0,
                               **tol), inputs


def oclgrind_agrees(prog, mapping: dict, sizes, seed: int) -> bool:
    """The kernels of ``mapping`` run on Oclgrind (the OpenCL model, unoptimised) without
    any reported error and match the interpreter at ``sizes``: a wrong result on the
    device is then the device compiler's (PoCL 3.1 miscompiles a work-item reading back,
    through ``get_local_id(d)``, what it wrote through the equal ``get_global_id(d)``)."""
    from codegen.oclgrind import check_with_oclgrind, oclgrind_available
    from mapper.candidates import lower_candidate

    if not oclgrind_available():
        return False
    inputs, ref, tol = _reference(prog, sizes, seed)
    try:
        cp = lower_candidate(prog, mapping, sizes, fusion="free", check=False)
        rep = check_with_oclgrind(cp, inputs, timeout_s=300)
    except Exception:  # noqa: BLE001  (no verdict from Oclgrind: the device's stands)
        return False
    return (rep.clean and rep.output is not None
            and np.allclose(np.asarray(rep.output).reshape(np.shape(ref)), ref, **tol))


def oracle_program(pool, prog, sizes_pts, *, full=2500, samples=16, admitted=200, near1=200,
                   near2=100, seed=0, timeout=60.0, oclgrind=0, log=None,
                   show_bad=False, confirm=True) -> list[Row]:
    """Every candidate (:func:`candidates`) of ``prog`` judged by the device at both size
    points and by the rules. With ``confirm``, a wrong result is run again on Oclgrind:
    where it is clean and right there, the mapping is correct in the OpenCL model and the
    row says the device miscompiled it (:func:`oclgrind_agrees`)."""
    from mapper.encoding import MapCodes

    pv = _problem(prog, "free", False)
    ph = _problem(prog, "always", True)
    chosen = candidates(pv, full=full, admitted=admitted, near1=near1, near2=near2,
                        samples=samples, seed=seed)
    maps = [m for m, _ in chosen]
    verdict = {i: (True, "ok") for i in range(len(maps))}
    miscompiled: set[int] = set()
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
            elif (o.label == "wrong-result" and confirm
                  and oclgrind_agrees(pv.program, maps[i], sizes, seed)):
                miscompiled.add(i)
                nxt.append(i)
            else:
                verdict[i] = (False, f"{o.label}@{k + 1}: {o.reason[:120]}")
        todo = nxt
    for i in miscompiled:
        if verdict[i][0]:
            verdict[i] = (True, "ok on Oclgrind, wrong on the device (its compiler's bug)")
    if oclgrind and todo:
        from codegen.oclgrind import check_with_oclgrind, oclgrind_available
        from mapper.candidates import lower_candidate

        if oclgrind_available():
            for i in random.Random(seed).sample(todo, min(oclgrind, len(todo))):
                cp = lower_candidate(pv.program, maps[i], sizes_pts[0], fusion="free",
                                     check=False)
                from mapper.data import random_inputs

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
                        chosen[i][1], [str(c) for c in vv], [str(c) for c in hv],
                        i in miscompiled))
    if log is not None:
        for r in rows:
            if r.miscompiled:
                print(f"    DEVICE-MISCOMPILES {MapCodes(r.mapping)} (admitted: {r.valid})",
                      file=log)
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
    good = [r for r in rows if r.oracle]
    return {
        "evaluated": len(rows),
        "oracle_ok": len(good),
        "admitted": len(adm),
        "admitted_bad": sum(not r.oracle for r in adm),
        "admitted_h": len(admh),
        "admitted_h_bad": sum(not r.oracle for r in admh),
        "ok_admitted": sum(r.valid for r in good),
        "ok_admitted_h": sum(r.heur for r in good),
        "miscompiled": sum(r.miscompiled for r in rows),
    }


def meets(s: dict, recall: float = 0.99) -> bool:
    """Precision 100% and recall >= ``recall`` (validity rules) on one program's stats."""
    return s["admitted_bad"] == 0 and s["ok_admitted"] >= recall * s["oracle_ok"]


def fmt(s: dict) -> str:
    def ratio(a, b):
        return f"{a}/{b} = {100 * a / b:.1f}%" if b else f"{a}/{b}"

    return (f"evaluated {s['evaluated']}, oracle ok {s['oracle_ok']} | validity: precision "
            f"{ratio(s['admitted'] - s['admitted_bad'], s['admitted'])}, recall "
            f"{ratio(s['ok_admitted'], s['oracle_ok'])} | +heuristics: precision "
            f"{ratio(s['admitted_h'] - s['admitted_h_bad'], s['admitted_h'])}, recall "
            f"{ratio(s['ok_admitted_h'], s['oracle_ok'])}"
            + (f" | {s['miscompiled']} miscompiled by the device (right on Oclgrind)"
               if s.get("miscompiled") else ""))


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


def random_points(prog, max_n: int = 4096):
    """``ir.randprog.size_points``, with sizes doubled (the same at both points, the least
    doubling first) until every computing map runs at least two iterations at both: a
    map of one iteration distributes nothing, so any code for it is correct there and
    the verdict would say nothing about the mapping (the smallest sizes nest splits down
    to single iterations: ``s1/s0`` with ``s0 = s1``). Maps over a constant one-element
    array run once at every size, and the rules know it (``mapper.rules.unit``)."""
    from ir.randprog import size_points
    from ir.typecheck import typecheck
    from mapper.nesting import label_maps

    pts = size_points(prog)
    info = typecheck(label_maps(prog))
    # maps over a constant one-element array (a reduction's result) run once at any size
    trips = [t[0].size for t in info.map_types.values() if hasattr(t[0], "size")
             and not (t[0].size.is_const and t[0].size.as_int() == 1)]
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


def _program_of(name: str, max_maps: int = 4, wide: bool = True):
    if name.startswith("random seed "):
        from ir.randprog import random_program

        return random_program(int(name.split()[-1]), max_maps=max_maps, extended=True,
                              wide=wide)
    from ir.syntax import parse_file

    return parse_file(name)


def replay(path: str, quiet: bool = False) -> int:
    """Precision and recall of the current rules against the verdicts of a ``--dump``
    file: rows are judged again by the rules (not by the device), so a rule change is
    measured in seconds. The dumped rows were chosen around the valid set of the dump's
    rules, so precision is biased towards that set; the full oracle run gives the
    figures."""
    from mapper.encoding import MapCodes

    by_prog: dict[str, list[dict]] = {}
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            by_prog.setdefault(d["program"], []).append(d)
    totals = Totals()
    for name, ds in by_prog.items():
        prog = _program_of(name, ds[0].get("max_maps", 4), ds[0].get("wide", False))
        pv = _problem(prog, "free", False)
        ph = _problem(prog, "always", True)
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
    ap.add_argument("--old-generator", action="store_true",
                    help="random programs without ir.randprog's wide shapes (before issue 24)")
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

        seeds: list[int] = list(range(args.seed0, args.seed0 + args.random))
        if args.seeds:
            seeds = [int(x) for x in args.seeds.split(",")]
        for s in seeds:
            p = random_program(s, max_maps=args.max_maps, extended=True,
                               wide=not args.old_generator)
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
                                           "wide": not args.old_generator}) + "\n")
                dump.flush()
            print(f"{name}: {fmt(totals.count(name, rows))}", flush=True)
    totals.report()
    print(f"({time.time() - t0:.0f} s)")
    if dump is not None:
        dump.close()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(totals.summary(), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
