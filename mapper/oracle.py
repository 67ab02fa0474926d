"""The oracle of the mapping rules: which code assignments lower, run correctly and are
race-free, and how the validity rules' verdicts compare.

:func:`candidates` chooses the assignments of a program to judge: every one of the codes
{S, G0, G1, W0, W1, L0, L1} (plus fused for perfectly nested maps) when their product is
small enough, else a sample near the valid set (admitted mappings, assignments one and
two codes away from one, a few uniform ones). :func:`oracle_program` lowers each with the
mapping checks off (the lowering's own checks still run) and runs it on the device against
the reference interpreter at two size points; a wrong result is run again on Oclgrind
(:func:`oclgrind_agrees`). :func:`stats` gives precision and recall of the rules over the
rows. ``experiments/oracle.py`` runs it over the examples and random programs.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, overload

import numpy as np

from ir.nodes import Lambda

ORACLE_CODES = (0, 30, 31, 20, 21, 10, 11)  # S, G0, G1, W0, W1, L0, L1
FUSED = 1
NEAR_BASE = 5000  # at most this many admitted (4x one-away) ones seed the one-away (two-away)


class _Unformatted:
    """Constraint instances (or texts) not yet formatted: formatting one takes ~10 ms and
    most rows only need to know whether any was violated."""

    __slots__ = ("items",)

    def __init__(self, items: Sequence[Any]):
        self.items = items


class _AsTexts:
    """A field of a list of texts that also takes an :class:`_Unformatted`, formatted
    (``str``) when the field is first read."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = "_" + name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> tuple[()]: ...

    @overload
    def __get__(self, obj: Row, objtype: type | None = None) -> list[str]: ...

    def __get__(self, obj: Row | None, objtype: type | None = None) -> list[str] | tuple[()]:
        if obj is None:  # the field's default, for the dataclass
            return ()
        value = obj.__dict__[self.key]
        if not isinstance(value, list):  # unformatted, or the default
            items = value.items if isinstance(value, _Unformatted) else value
            value = obj.__dict__[self.key] = [str(c) for c in items]
        return value

    def __set__(self, obj: Any, value: list | _Unformatted | tuple) -> None:
        obj.__dict__[self.key] = value


@dataclass
class Row:
    mapping: dict
    oracle: bool
    outcome: str
    valid: bool  # the validity rules admit it
    heur: bool  # validity rules and heuristics admit it
    origin: str  # all, admitted, near1, near2 or uniform (see ``candidates``)
    violated: _AsTexts = _AsTexts()  # validity instances violated (a list of texts)
    heur_violated: _AsTexts = _AsTexts()
    miscompiled: bool = False  # a wrong result on the device that Oclgrind runs correctly


def problem_for(prog: Lambda, fusion: str, heuristics: bool) -> Any:
    """``mapper.api.problem``; with rules that have no kinds (before issue 10), every rule
    counts as a validity rule."""
    from mapper.api import problem

    try:
        return problem(prog, fusion=fusion, heuristics=heuristics)
    except TypeError:  # before rules had kinds: every rule is a validity rule
        return problem(prog, fusion="free" if not heuristics else fusion)


def domains(p: Any) -> dict[str, tuple[int, ...]]:
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


def candidates(p: Any, *, full: int, admitted: int, near1: int, near2: int, samples: int,
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

    # one and two codes away: around every admitted (one-away) assignment, or, in a large
    # valid set (where that would be millions), around a sample of them
    base = vset if len(vset) <= NEAR_BASE else set(rng.sample(valid, NEAR_BASE))
    d1 = around(base) - vset
    base = d1 if len(d1) <= 4 * NEAR_BASE else set(rng.sample(sorted(d1), 4 * NEAR_BASE))
    d2 = around(base) - vset - d1
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


def _reference(prog: Lambda, sizes: Mapping[str, int], seed: int) -> tuple[dict, Any, dict]:
    """Random inputs, the interpreter's result and the comparison tolerance at ``sizes``."""
    from ir.interp import evaluate
    from mapper.data import random_inputs, reduction_tolerance

    inputs = random_inputs(prog, sizes, seed)
    arrays = {p.name for p in prog.params if type(p.type).__name__ == "ArrayType"}
    ref_in = {k: (v if k in arrays else v[0]) for k, v in inputs.items()}
    ref = evaluate(prog, ref_in, sizes)
    return inputs, ref, reduction_tolerance(ref)


def _eval_point(pool: Any, prog: Lambda, maps: list[dict], sizes: Mapping[str, int],
                seed: int, timeout: float) -> tuple[list, dict]:
    from mapper.candidates import build_candidate

    inputs, ref, tol = _reference(prog, sizes, seed)
    fns = [functools.partial(build_candidate, prog, m, sizes, fusion="free", force=True)
           for m in maps]
    return pool.map_candidates(fns, inputs, ref, timeout_s=timeout, repeats=1, warmup=0,
                               **tol), inputs


def oclgrind_agrees(prog: Lambda, mapping: dict, sizes: Mapping[str, int], seed: int) -> bool:
    """The kernels of ``mapping`` run on Oclgrind (the OpenCL model, unoptimised) without
    any reported error and match the interpreter at ``sizes``: a wrong result on the
    device is then the device compiler's (PoCL 3.1 miscompiles a work-item reading back,
    through ``get_local_id(d)``, what it wrote through the equal ``get_global_id(d)``)."""
    from codegen.oclgrind import check_with_oclgrind, oclgrind_available
    from codegen.runner import compare
    from mapper.candidates import build_candidate

    if not oclgrind_available():
        return False
    inputs, ref, tol = _reference(prog, sizes, seed)
    try:
        cp = build_candidate(prog, mapping, sizes, fusion="free", force=True)
        rep = check_with_oclgrind(cp, inputs, timeout_s=300)
    except Exception:  # noqa: BLE001  (no verdict from Oclgrind: the device's stands)
        return False
    return (rep.clean and rep.output is not None
            and compare(np.asarray(rep.output), ref, **tol)[0])


def oracle_program(pool: Any, prog: Lambda, sizes_pts: Sequence[Mapping[str, int]], *,
                   full: int = 2500, samples: int = 16, admitted: int = 200,
                   near1: int = 200, near2: int = 100, seed: int = 0, timeout: float = 60.0,
                   oclgrind: int = 0, log: IO[str] | None = None, show_bad: bool = False,
                   confirm: bool = True) -> list[Row]:
    """Every candidate (:func:`candidates`) of ``prog`` judged by the device at both size
    points and by the rules. With ``confirm``, a wrong result is run again on Oclgrind:
    where it is clean and right there, the mapping is correct in the OpenCL model and the
    row says the device miscompiled it (:func:`oclgrind_agrees`)."""
    from mapper.encoding import MapCodes

    pv = problem_for(prog, "free", False)
    ph = problem_for(prog, "always", True)
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
        from mapper.candidates import build_candidate

        if oclgrind_available():
            for i in random.Random(seed).sample(todo, min(oclgrind, len(todo))):
                cp = build_candidate(pv.program, maps[i], sizes_pts[0], fusion="free",
                                     force=True)
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
                        chosen[i][1], _Unformatted(vv), _Unformatted(hv),
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
            if r.valid != r.oracle and not over_budget(r.outcome):
                kind = "ADMITS-BAD" if r.valid else "REJECTS-GOOD"
                why = r.outcome if r.valid else "; ".join(r.violated[:3])
                print(f"    {kind} {MapCodes(r.mapping)}  {why}", file=log)
    return rows


# the lowering's checks of the device's resources at given sizes (``codegen/errors.py``)
RESOURCE_CHECKS = ("work-group-size", "local-memory", "private-memory", "max-allocation")


def over_budget(outcome: str) -> bool:
    """The lowering refused the mapping at a size point for a resource limit of the device
    (work-group size, local or private memory, an allocation): a property of the sizes,
    which the validity rules, over codes only, do not judge (the tuning space does). Such
    rows count neither for nor against the rules."""
    return any(outcome.startswith(f"rejected:{c}@") for c in RESOURCE_CHECKS)


def rule_stats(rows: list[Row]) -> dict:
    """Per validity rule: oracle-ok rows it rejects, and oracle-bad rows only it rejects."""
    out: dict = {}
    for r in rows:
        if over_budget(r.outcome):
            continue
        rules = {v.split("]")[0][1:] for v in r.violated}
        for x in rules:
            d = out.setdefault(x, {"rejects_good": 0, "sole_on_bad": 0})
            if r.oracle:
                d["rejects_good"] += 1
            elif len(rules) == 1:
                d["sole_on_bad"] += 1
    return out


def stats(rows: list[Row]) -> dict:
    """Counts of the rows judged (those over a resource budget left out, and counted)."""
    over = sum(over_budget(r.outcome) for r in rows)
    rows = [r for r in rows if not over_budget(r.outcome)]
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
        "over_budget": over,
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
               if s.get("miscompiled") else "")
            + (f" | {s['over_budget']} over a resource budget at a size point (not judged)"
               if s.get("over_budget") else ""))


def random_points(prog: Lambda, max_n: int = 4096) -> tuple[dict[str, int], ...]:
    """Two size points for a random program (``ir.randprog``): every computing map runs at
    least two iterations (a map of one iteration distributes nothing: any code is correct
    for it there), and, as far as the program allows, maps with different trip counts (as
    expressions) run different numbers of iterations and the tuning sizes ``s0, s1, ...``
    differ (equal counts line a consumer's chunks up with a producer's, and a mapping
    correct only then would count as correct); then the smallest ``N`` (a power of two, at
    most ``max_n``), tuning sizes from {2, 4, 8, 16}. The second point has the same tuning
    sizes and an ``N`` whose loop counts carry a factor 3, where the program allows.
    Maps over a constant one-element array run once at every size, and the rules know it
    (``mapper.rules.unit``). Without such sizes: ``ir.randprog.size_points``."""
    from ir.randprog import size_points, split_names
    from ir.typecheck import typecheck
    from mapper.nesting import label_maps

    info = typecheck(label_maps(prog))
    trips = [t[0].size for t in info.map_types.values() if hasattr(t[0], "size")
             and not (t[0].size.is_const and t[0].size.as_int() == 1)]
    rels = [c.rel for c in info.constraints]
    names = split_names(prog)

    def good(env: dict[str, int]) -> bool:
        try:
            return (env["N"] <= max_n and all(r.evaluate(env) for r in rels)
                    and all(x.evaluate(env) >= 2 for x in trips))
        except Exception:  # noqa: BLE001  (a size the point does not give)
            return False

    distinct = list({str(x): x for x in trips}.values())

    def collisions(env: dict[str, int]) -> int:
        counts = [x.evaluate(env) for x in distinct]
        return len(counts) - len(set(counts))

    best: tuple | None = None
    for vals in itertools.product((2, 4, 8, 16), repeat=len(names)):
        n = 4
        while n <= max_n:
            first = {**dict(zip(names, vals)), "N": n}
            if good(first):
                key = (collisions(first), len(vals) - len(set(vals)), n, max(vals, default=0),
                       sum(vals))
                if best is None or key < best[0]:
                    best = (key, first)
            n *= 2
    if best is not None:
        first = best[1]
        n = first["N"]
        second = next((e for e in ({**first, "N": m} for m in (n * 3 // 2, n * 3 // 4, n * 3))
                       if good(e)), dict(first))
        return first, second
    return size_points(prog)
