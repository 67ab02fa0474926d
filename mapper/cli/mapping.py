"""The commands about a program's mappings: ``show``, ``constraints``, ``enumerate``,
``check``, ``explain``."""

from __future__ import annotations

import time

from rich.markup import escape
from rich.table import Table

from mapper.cli.common import (
    CliError,
    console,
    emit_json,
    instance_json,
    load,
    mapping_json,
    progress,
)
from mapper.encoding import short_code
from mapper.sizes import check_sizes, parse_sizes


def cmd_show(args) -> int:
    from ir.syntax import print_program
    from ir.typecheck import typecheck

    prog = load(args)
    sizes = parse_sizes(args.sizes)
    check_sizes(prog, sizes, args.file)
    info = typecheck(prog, None)
    rows = []
    for c in info.constraints:
        row: dict = {"constraint": str(c.rel), "kind": c.kind, "origin": c.origin}
        if sizes:
            needs = sorted(c.free_vars() - sizes.keys())
            row["holds"] = None if needs else bool(c.rel.evaluate(sizes))
            row["needs"] = needs
        rows.append(row)
    inputs = [{"name": p.name, "type": str(p.type)} for p in getattr(prog, "params", ())]
    if args.json:
        emit_json("show", {"file": args.file, "program": print_program(prog),
                           "inputs": inputs, "result": str(info.type), "sizes": sizes,
                           "constraints": rows})
    else:
        console.print(f"[bold]{escape(args.file)}[/bold]")
        # its own line breaks only (piped, rich would wrap at 80 columns mid-expression)
        console.print(print_program(prog), markup=False, soft_wrap=True)
        console.print()
        for p in inputs:
            console.print(f"  input {escape(p['name'])} : {escape(p['type'])}")
        console.print(f"  result : [bold]{escape(str(info.type))}[/bold]")
        t = Table(title="Algorithmic constraints (from the types)")
        t.add_column("constraint")
        t.add_column("kind")
        t.add_column("origin")
        if sizes:
            t.add_column(f"with {escape(args.sizes)}")
        for row in rows:
            cells = [escape(row["constraint"]), row["kind"], escape(row["origin"])]
            if sizes:
                cells.append("needs " + ", ".join(row["needs"]) if row["needs"] else
                             "[green]holds[/green]" if row["holds"] else "[red]FAILS[/red]")
            t.add_row(*cells)
        console.print(t)
    if sizes:
        typecheck(prog, sizes)  # raises the first violation with its origin
    return 0


def cmd_constraints(args) -> int:
    from mapper.api import problem
    from mapper.rules import RULES

    p = problem(load(args), fusion=args.fusion,
                heuristics=args.heuristics)
    src = {r.name: r.source for r in RULES}
    kind = {r.name: r.kind for r in RULES}
    if args.json:
        maps = [{"label": m, "parent": i.parent, "children": list(i.children),
                 "perfectly_nested": i.perfectly_nested, "writes": i.writes,
                 "reads": sorted(i.reads)} for m, i in p.tree.maps.items()]
        emit_json("constraints", {
            "file": args.file, "fusion": args.fusion, "heuristics": args.heuristics,
            "maps": maps, "chains": [list(c) for c in p.tree.chains()],
            "rules": [{"rule": r, "kind": kind[r], "source": src[r], "instances": n}
                      for r, n in p.per_rule().items()],
            "total": len(p.constraints),
            "instances": [instance_json(c) for c in p.constraints]})
        return 0
    console.print("[bold]Map-nesting tree[/bold]")
    console.print(p.tree.render(), markup=False)
    console.print("chains: " + "  ".join("-".join(c) for c in p.tree.chains()), markup=False)
    heur = "on" if args.heuristics else "off"
    t = Table(title=f"Constraint instances per rule (fusion={args.fusion}, heuristics={heur})")
    t.add_column("rule")
    t.add_column("kind")
    t.add_column("source")
    t.add_column("instances", justify="right")
    for rule, n in p.per_rule().items():
        t.add_row(rule, kind[rule], escape(src[rule]), str(n))
    t.add_row("[bold]total[/bold]", "", "", f"[bold]{len(p.constraints)}[/bold]")
    console.print(t)
    if args.list:
        lst = Table(title="Instances")
        lst.add_column("rule")
        lst.add_column("maps")
        lst.add_column("description")
        lst.add_column("predicate")
        from mapper.text import show_predicate_short

        doms = {x: p.model.param(x).domain for x in p.labels}
        for c in p.constraints:
            lst.add_row(c.rule, ",".join(c.subjects), escape(c.description),
                        escape(show_predicate_short(c.predicate, domains=doms)))
        console.print(lst)
    return 0


def _time_limit(args) -> float | None:
    """``--timeout`` in seconds (0: no limit)."""
    return args.timeout if args.timeout > 0 else None


def _count(args, p) -> tuple[int, str]:
    """Count the valid mappings of ``p`` within ``--timeout``: by merging partial states,
    or with ``--backend`` by listing that solver's solutions. Returns (count, method)."""
    from mapper.api import CountLimitError, count_valid_mappings, enumerate_mappings

    limit = _time_limit(args)
    hint = ("; count fewer by pinning some maps (--fixed 'A=W0'), or raise --timeout "
            "(0: no limit)")
    if args.backend is None:
        with progress("counting mappings", len(p.labels)) as update:
            try:
                n = count_valid_mappings(
                    p, fusion=args.fusion, fixed=args.fixed, heuristics=args.heuristics,
                    timeout_s=limit,
                    progress=lambda done, total, states: update(done, f"{states:,} states"))
            except CountLimitError as e:
                raise CliError(str(e) + hint) from None
        return n, "states"
    t0 = time.monotonic()
    n = 0
    with progress(f"listing mappings ({args.backend})") as update:
        for _ in enumerate_mappings(p, backend=args.backend, fusion=args.fusion,
                                    fixed=args.fixed, heuristics=args.heuristics):
            n += 1
            if n % 1024 == 0:
                update(n, f"{n:,} so far")
                if limit is not None and time.monotonic() - t0 > limit:
                    raise CliError(f"counting by listing ({args.backend}) stopped at the time "
                                   f"limit ({limit:g} s) after {n:,} mappings; without "
                                   "--backend the count merges partial states instead"
                                   + hint)
    return n, args.backend


def cmd_enumerate(args) -> int:
    from mapper.api import enumerate_mappings, problem

    prog = load(args)
    p = problem(prog, fusion=args.fusion, heuristics=args.heuristics)
    fixed = mapping_json(p.mapping(args.fixed)) if args.fixed else None
    base = {"file": args.file, "fusion": args.fusion, "heuristics": args.heuristics,
            "fixed": fixed}
    if args.count:
        if args.limit is not None or args.random:
            raise CliError("--count counts every mapping: --limit and --random go with a "
                           "listing (leave out --count)")
        t0 = time.perf_counter()
        n, method = _count(args, p)
        dt = time.perf_counter() - t0
        if args.json:
            emit_json("enumerate", {**base, "count": n, "method": method, "seconds": dt})
        else:
            console.print(f"{n} valid mappings ({method}, fusion={args.fusion}, "
                          f"{dt:.3f} s)")
        return 0
    limit = _time_limit(args)
    t0 = time.monotonic()
    found = []
    with progress("listing mappings") as update:
        for mp in enumerate_mappings(p, backend=args.backend or "cp", fusion=args.fusion,
                                     order="random" if args.random else "solver",
                                     seed=args.seed, limit=args.limit, fixed=args.fixed,
                                     heuristics=args.heuristics):
            found.append(mp)
            if len(found) % 1024 == 0:
                update(len(found), f"{len(found):,} so far")
                if limit is not None and time.monotonic() - t0 > limit:
                    raise CliError(f"listing stopped at the time limit ({limit:g} s) after "
                                   f"{len(found):,} mappings; use --count to count them, "
                                   "--limit N to list fewer, or raise --timeout (0: no limit)")
    if args.json:
        emit_json("enumerate", {**base, "maps": list(p.labels), "limit": args.limit,
                                "random": args.random, "seed": args.seed,
                                "mappings": [mapping_json(m) for m in found]})
        return 0
    t = Table(title=f"Valid mappings of {escape(args.file)}")
    t.add_column("#", justify="right")
    for m in p.labels:
        t.add_column(m)
    for i, mp in enumerate(found, 1):
        t.add_row(str(i), *(short_code(mp[m]) for m in p.labels))
    console.print(t)
    console.print(f"{len(found)} mapping(s) shown; codes: S mapSeq, F fused, V mapVec, "
                  "Ld/Wd/Gd mapLcl/mapWrg/mapGlb(d)")
    return 0


def cmd_check(args) -> int:
    from mapper.api import check_mapping, problem, rejected_by
    from mapper.rule_names import RuleKind
    from mapper.text import rule_head
    from mapper.violations import why_violated

    p = problem(load(args), fusion=args.fusion,
                heuristics=args.heuristics)
    m = p.mapping(args.mapping)
    bad = check_mapping(p, m)
    doms = {x: p.model.param(x).domain for x in p.labels}
    if args.json:
        emit_json("check", {"file": args.file, "fusion": args.fusion,
                            "heuristics": args.heuristics, "mapping": mapping_json(m),
                            "valid": not bad, "rejected_by": rejected_by(bad),
                            "violations": [instance_json(c, dict(m), doms) for c in bad]})
        return 1 if bad else 0
    if not bad:
        console.print(f"[green]valid[/green]: {escape(str(m))}")
        return 0
    if rejected_by(bad) is RuleKind.VALIDITY:
        verdict = "[red]invalid[/red] (a validity rule rejects it)"
    else:
        verdict = ("[yellow]pruned by heuristics only[/yellow] (it would lower and run; "
                   "--no-heuristics admits it)")
    console.print(f"{verdict}: {escape(str(m))} violates {len(bad)} constraint instance(s):",
                  soft_wrap=True)
    for c in bad:
        console.print(f"  {rule_head(c)} maps {','.join(c.subjects)}: "
                      f"{c.description}", soft_wrap=True, markup=False)
        console.print(f"    here: {escape(why_violated(c, dict(m), doms))}", soft_wrap=True)
    return 1


def cmd_explain(args) -> int:
    from mapper.api import explain, problem

    p = problem(load(args), fusion=args.fusion,
                heuristics=args.heuristics)
    e = explain(p, args.partial, fusion=args.fusion, heuristics=args.heuristics)
    if args.json:
        emit_json("explain", {"file": args.file, "fusion": args.fusion,
                              "heuristics": args.heuristics,
                              "partial": mapping_json(e.partial), "possible": e.possible,
                              "rejected_by": e.kind,
                              "core": [instance_json(c) for c in e.core],
                              "example": mapping_json(e.example) if e.example else None})
        return 0
    console.print(str(e), markup=False)
    return 0
