"""The ``mapper`` command line: show, constraints, enumerate, check, explain, space, run, demo,
explore, results, plot.

Every command takes a program file in the text syntax (see ``ir/syntax.py``). User
mistakes (bad files, bad mappings, contradictory constraints) print one clear error
and exit with status 2; nothing prints a traceback for them.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


MAX_SIZE = 2**31 - 1  # sizes index OpenCL buffers with int


def parse_sizes(text: str | None) -> dict[str, int]:
    """``"N=64,s0=16"`` -> ``{"N": 64, "s0": 16}``; names once each, values 1..2^31-1."""
    out: dict[str, int] = {}
    if not text:
        return out
    for part in text.replace(" ", ",").split(","):
        if not part:
            continue
        if "=" not in part:
            raise ValueError(f"sizes are NAME=VALUE pairs separated by commas, got {part!r}")
        k, v = (x.strip() for x in part.split("=", 1))
        if not k.isidentifier():
            raise ValueError(f"size name {k!r} in {part!r} is not a name (e.g. N=64)")
        if k in out:
            raise ValueError(f"size {k} is given twice ({k}={out[k]} and {part})")
        if not re.fullmatch(r"[+-]?[0-9]{1,12}", v):
            raise ValueError(f"size {k} must be an integer, got {v!r}")
        n = int(v)
        if not 1 <= n <= MAX_SIZE:
            raise ValueError(f"size {k}={n} is out of range: sizes are 1..{MAX_SIZE}")
        out[k] = n
    return out


def size_names(prog) -> frozenset[str]:
    """Every size variable the program mentions (input types, split/slide/pad sizes...)."""
    from dataclasses import fields, is_dataclass

    from ir.nodes import walk
    from ir.sym import Expr
    from ir.types import Type

    out: set[str] = set()

    def visit(v) -> None:
        if isinstance(v, (Expr, Type)):
            out.update(v.free_vars())
        elif isinstance(v, tuple):
            for x in v:
                visit(x)

    for node in walk(prog):
        if is_dataclass(node):
            for f in fields(node):
                visit(getattr(node, f.name))
    return frozenset(x for x in out if not x.startswith("_"))


def check_sizes(prog, sizes: dict[str, int], path: str, *, complete: bool = False) -> None:
    """Unknown size names are an error naming the program's sizes; with ``complete``, so
    is a missing one."""
    names = size_names(prog)
    have = ", ".join(sorted(names)) or "none"
    unknown = sorted(set(sizes) - names)
    if unknown:
        raise ValueError(f"{path} has no size {', '.join(unknown)}; its sizes are: {have}")
    missing = sorted(names - set(sizes))
    if complete and missing:
        raise ValueError(f"give a value for every size of {path}: missing "
                         f"{', '.join(missing)} (e.g. --sizes "
                         + ",".join(f"{k}=..." for k in missing) + ")")


def load(path: str):
    from ir.syntax import parse_file

    return parse_file(path)


# ------------------------------------------------------------------------ commands


def cmd_show(args) -> int:
    from ir.syntax import print_program
    from ir.typecheck import typecheck

    prog = load(args.file)
    sizes = parse_sizes(args.sizes)
    check_sizes(prog, sizes, args.file)
    info = typecheck(prog, None)
    console.print(f"[bold]{args.file}[/bold]")
    console.print(print_program(prog), markup=False)
    console.print()
    if hasattr(prog, "params"):
        for p in prog.params:
            console.print(f"  input {p.name} : {escape(str(p.type))}")
    console.print(f"  result : [bold]{escape(str(info.type))}[/bold]")
    t = Table(title="Algorithmic constraints (from the types)")
    t.add_column("constraint")
    t.add_column("kind")
    t.add_column("origin")
    if sizes:
        t.add_column(f"with {args.sizes}")
    for c in info.constraints:
        row = [escape(str(c.rel)), c.kind, escape(c.origin)]
        if sizes:
            if c.free_vars() <= sizes.keys():
                row.append("[green]holds[/green]" if c.rel.evaluate(sizes) else "[red]FAILS[/red]")
            else:
                row.append("needs " + ", ".join(sorted(c.free_vars() - sizes.keys())))
        t.add_row(*row)
    console.print(t)
    if sizes:
        typecheck(prog, sizes)  # raises the first violation with its origin
    return 0


def cmd_constraints(args) -> int:
    from mapper.api import problem
    from mapper.rules import RULES

    p = problem(load(args.file), fusion=args.fusion,
                heuristics=args.heuristics)
    console.print("[bold]Map-nesting tree[/bold]")
    console.print(p.tree.render(), markup=False)
    console.print("chains: " + "  ".join("-".join(c) for c in p.tree.chains()))
    heur = "on" if args.heuristics else "off"
    t = Table(title=f"Constraint instances per rule (fusion={args.fusion}, heuristics={heur})")
    t.add_column("rule")
    t.add_column("kind")
    t.add_column("source")
    t.add_column("instances", justify="right")
    src = {r.name: r.source for r in RULES}
    kind = {r.name: r.kind for r in RULES}
    for rule, n in p.per_rule().items():
        t.add_row(rule, kind[rule], src[rule], str(n))
    t.add_row("[bold]total[/bold]", "", "", f"[bold]{len(p.constraints)}[/bold]")
    console.print(t)
    if args.list:
        lst = Table(title="Instances")
        lst.add_column("rule")
        lst.add_column("maps")
        lst.add_column("description")
        lst.add_column("predicate")
        for c in p.constraints:
            lst.add_row(c.rule, ",".join(c.subjects), escape(c.description),
                        escape(str(c.predicate)))
        console.print(lst)
    return 0


def cmd_enumerate(args) -> int:
    from mapper.api import count_mappings, enumerate_mappings, problem

    prog = load(args.file)
    p = problem(prog, fusion=args.fusion, heuristics=args.heuristics)
    if args.count:
        t0 = time.perf_counter()
        n = count_mappings(p, backend=args.backend, fusion=args.fusion, fixed=args.fixed)
        console.print(f"{n} valid mappings ({args.backend}, fusion={args.fusion}, "
                      f"{time.perf_counter() - t0:.3f} s)")
        return 0
    t = Table(title=f"Valid mappings of {args.file}")
    t.add_column("#", justify="right")
    for m in p.labels:
        t.add_column(m)
    n = 0
    for mp in enumerate_mappings(p, backend=args.backend, fusion=args.fusion,
                                 order="random" if args.random else "solver", seed=args.seed,
                                 limit=args.limit, fixed=args.fixed):
        n += 1
        from mapper.encoding import code_name

        t.add_row(str(n), *(code_name(mp[m]) for m in p.labels))
    console.print(t)
    console.print(f"{n} mapping(s) shown")
    return 0


def cmd_check(args) -> int:
    from mapper.api import check_mapping, problem, rejected_by
    from mapper.rules import rule_kind

    p = problem(load(args.file), fusion=args.fusion,
                heuristics=args.heuristics)
    m = p.mapping(args.mapping)
    bad = check_mapping(p, m, fusion=args.fusion)
    if not bad:
        console.print(f"[green]valid[/green]: {m}")
        return 0
    if rejected_by(bad) == "validity":
        verdict = "[red]invalid[/red] (a validity rule rejects it)"
    else:
        verdict = ("[yellow]pruned by heuristics only[/yellow] (it would lower and run; "
                   "--no-heuristics admits it)")
    console.print(f"{verdict}: {m} violates {len(bad)} constraint instance(s):")
    t = Table()
    t.add_column("rule")
    t.add_column("kind")
    t.add_column("maps")
    t.add_column("why")
    for c in bad:
        t.add_row(c.rule, rule_kind(c.rule), ",".join(c.subjects), escape(c.description))
    console.print(t)
    return 1


def cmd_explain(args) -> int:
    from mapper.api import explain, problem

    p = problem(load(args.file), fusion=args.fusion,
                heuristics=args.heuristics)
    console.print(str(explain(p, args.partial, fusion=args.fusion)), markup=False)
    return 0


def parse_domains(items) -> dict[str, range]:
    """``["theta=3..20", "v=1,2,4"]`` -> domains."""
    out: dict = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"a domain is NAME=LO..HI or NAME=a,b,c, got {item!r}")
        k, v = item.split("=", 1)
        if ".." in v:
            lo, hi = v.split("..", 1)
            out[k.strip()] = range(int(lo), int(hi) + 1)
        else:
            out[k.strip()] = tuple(int(x) for x in v.split(","))
    return out


def target(spec: str | None):
    """The ``codegen.target.Device`` named by ``--device`` (a preset, a JSON description or
    a live OpenCL device; without one the default preset)."""
    from codegen.target import DEFAULT_DEVICE, resolve

    return DEFAULT_DEVICE if spec is None else resolve(spec)


def cmd_device(args) -> int:
    """Describe a device (preset, JSON description or live OpenCL device); save it."""
    import json

    from codegen.target import PRESETS, resolve

    dev = resolve(args.spec)
    if args.save:
        dev.save(args.save)
    if args.json:
        print(json.dumps(dev.to_dict(), indent=2))
        return 0
    t = Table(title=escape(dev.describe()), title_justify="left")
    t.add_column("field")
    t.add_column("value")
    for k, v in dev.to_dict().items():
        if k != "extensions":
            t.add_row(k, escape(str(v)))
    console.print(t)
    if args.save:
        console.print(f"saved to {escape(args.save)}; use it with --device {escape(args.save)}")
    console.print("presets: " + ", ".join(PRESETS))
    return 0


def cmd_space(args) -> int:
    from mapper.api import lower_mapping, problem
    from mapper.tuning import infer_tuning

    device = target(args.device)
    prog = load(args.file)
    sizes = parse_sizes(args.sizes)
    check_sizes(prog, sizes, args.file)
    if args.mapping:
        prog = lower_mapping(problem(prog), args.mapping)
    t0 = time.perf_counter()
    tp = infer_tuning(prog, sizes, domains=parse_domains(args.domain),
                      max_value=args.max, device=device)
    sp = tp.space
    n = sp.count()
    dt = time.perf_counter() - t0
    t = Table(title="Tuning parameters")
    t.add_column("parameter")
    t.add_column("domain")
    t.add_column("why")
    for p in tp.params.values():
        dom = ", ".join(map(str, p.domain[:10])) + (" ..." if len(p.domain) > 10 else "")
        t.add_row(p.name, f"{dom}  ({len(p.domain)} values)", escape(p.why))
    console.print(t)
    by_origin: dict[str, list[str]] = {}
    for src, origin in tp.restrictions:
        by_origin.setdefault(origin, []).append(src)
    c = Table(title="Constraints by origin")
    c.add_column("origin")
    c.add_column("restriction")
    for origin, srcs in by_origin.items():
        for src in srcs:
            c.add_row(escape(origin), escape(src if len(src) < 160 else src[:157] + "..."))
    console.print(c)
    console.print("independent groups: " + "  ".join("{" + ", ".join(g) + "}"
                                                      for g in sp.groups))
    console.print("dependency order: " + " -> ".join(sp.order))
    console.print(f"[bold]{n:,}[/bold] valid configurations of {sp.cartesian_size():,} "
                  f"(built and counted in {dt:.2f} s) for {escape(device.describe())}",
                  soft_wrap=True)
    if tp.resource_note:
        console.print(f"[yellow]note:[/yellow] {escape(tp.resource_note)}", soft_wrap=True)
    return 0


def cmd_run(args) -> int:
    from codegen.errors import LoweringError
    from codegen.worker import WorkerPool
    from ir.interp import evaluate
    from mapper.api import check_mapping, problem
    from mapper.candidates import lower_candidate, reduction_tolerance
    from mapper.rules import rule_kind
    from mapper.witness import random_inputs

    prog = load(args.file)
    sizes = parse_sizes(args.sizes)
    check_sizes(prog, sizes, args.file, complete=True)
    p = problem(prog, fusion=args.fusion)
    if args.force:
        overridden = check_mapping(p, p.mapping(args.mapping))
        if overridden:
            rules = ", ".join(f"{r} ({rule_kind(r)})"
                              for r in sorted({c.rule for c in overridden}))
            err_console.print(f"[yellow]warning:[/yellow] --force overrides "
                              f"{len(overridden)} constraint instance(s) of {rules}; only "
                              "the lowering's checks and the run judge this mapping",
                              soft_wrap=True)
    from codegen.target import PRESETS, Device

    if args.device and (args.device.lower() in PRESETS or args.device.endswith(".json")):
        raise ValueError(f"mapper run runs on a live OpenCL device, and {args.device!r} is a "
                         "description; give an OpenCL device spec (see mapper device) or "
                         "use mapper space --device for descriptions")
    with WorkerPool(args.device) as pool:  # a hanging or crashing kernel costs the worker
        device = Device.from_limits(pool.device_info().get("limits", {}))
        try:
            cp = lower_candidate(p.program, args.mapping, sizes, fusion=args.fusion,
                                 check=not args.force, device=device)
        except LoweringError as e:
            console.print(f"[yellow]rejected:{e.check}[/yellow] {escape(str(e))}")
            return 1
        if args.show_source:
            for k in cp.kernels:
                console.print(k.source, markup=False)
        inputs = random_inputs(p.program, sizes, seed=args.seed)
        scalars = {q.name for q in p.program.params if not hasattr(q.type, "size")}
        ref = evaluate(p.program, {k: (v[0] if k in scalars else v)
                                   for k, v in inputs.items()}, sizes)
        o = pool.evaluate(cp, inputs, ref, timeout_s=args.timeout, repeats=args.repeats,
                          **reduction_tolerance(ref))
    colour = "green" if o.ok else "red" if o.status != "rejected" else "yellow"
    console.print(f"[{colour}]{escape(o.label)}[/{colour}] {escape(o.reason)}")
    if o.ok:
        console.print(f"{len(cp.kernels)} kernel(s), launch "
                      + ", ".join(f"{k.global_size}/{k.local_size}" for k in cp.kernels)
                      + f"; median {o.time_s * 1e6:.1f} us over {args.repeats} runs; "
                      f"build {o.build_s or 0:.2f} s; max abs error {o.max_abs_error:.2g}")
        console.print("memory (bytes): " + escape(str(o.memory)))
    return 0 if o.ok else 1


def cmd_repl(args) -> int:
    from mapper.repl import run_repl

    return run_repl(args.file, console)


def cmd_demo(args) -> int:
    from mapper.demo import run_demo

    return run_demo(console, quick=args.quick)


def _explore_task(args):
    """The task of ``mapper explore``: a ``.lift`` file, or ``conv`` (the GPGPU'20
    convolution pipeline on ``--layer``)."""
    from mapper.explore import Task, parse_layer

    if args.file == "conv":
        if args.sizes:
            from ir.programs import ConvLayer

            s = parse_sizes(args.sizes)
            need = ("C", "H", "W", "M")
            missing = [k for k in need if k not in s]
            if missing:
                raise ValueError(f"conv needs sizes {', '.join(need)} (K, S, P optional) or "
                                 f"--layer, e.g. --layer 19/2; missing {', '.join(missing)}")
            layer = ConvLayer("custom", s["C"], s["H"], s["W"], s["M"], s.get("K", 3),
                              s.get("S", 1), s.get("P", 1))
        else:
            layer = parse_layer(args.layer or "19/2")
        return Task.conv_layer(layer)
    if args.layer:
        raise ValueError("--layer goes with the program name conv (the convolution pipeline)")
    sizes = parse_sizes(args.sizes)
    import os

    from ir.syntax import parse_file

    prog = parse_file(args.file)
    check_sizes(prog, sizes, args.file)
    return Task.from_program(prog, sizes, fusion=args.fusion,
                             name=os.path.basename(args.file), max_value=args.max)


def cmd_explore(args) -> int:
    import os

    from rich.live import Live

    from mapper.explore import ResultStore, explore, get_strategy, parse_budget
    from mapper.explore.display import Dashboard

    budget = parse_budget(args.budget)  # user errors first, before any work
    get_strategy(args.strategy)
    if args.mapping and args.strategy != "manual":
        raise ValueError("--mapping goes with --strategy manual")
    if args.strategy == "manual" and not args.mapping:
        raise ValueError("--strategy manual needs --mapping, e.g. 'A=W0 B=L0 C=L0 D=S'")
    stem = "conv" if args.file == "conv" else os.path.splitext(os.path.basename(args.file))[0]
    path = args.store or os.path.join("results", f"{stem}.sqlite")
    store = ResultStore(path)
    live = console.is_terminal
    dash = Dashboard()
    try:
        task = _explore_task(args)
        kw = dict(strategy=args.strategy, budget=budget, store=store, device=args.device,
                  seed=args.seed, timeout_s=args.timeout, repeats=args.repeats, cut=args.cut)
        if args.mapping:
            kw["mapping"] = args.mapping
        if live:
            with Live(dash, console=console, refresh_per_second=4, transient=False):
                res = explore(task, on_start=dash.start, on_result=dash.update, **kw)
        else:
            res = explore(task, **kw)
    except KeyboardInterrupt:  # before the first candidate (start-up, building the space)
        err_console.print("interrupted before the first candidate; nothing was evaluated")
        return 130
    finally:
        store.close()
    console.print(res.summary(), markup=False, highlight=False)
    console.print(f"store: {path} ({res.context.describe()})", markup=False)
    return 130 if res.stopped_by == "interrupted" else 0


def cmd_results(args) -> int:
    import csv
    import json

    from mapper.explore import ResultStore
    from mapper.explore.display import best_table, counts_table
    from mapper.explore.store import COLUMN_NAMES

    if args.compare:
        return _compare(args)
    with ResultStore(args.store, readonly=True) as st:
        ctx, counts, rows = st.context(), st.counts(), st.rows()
        best, runs = st.best(args.top), st.runs()
        meta = st.meta()
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(COLUMN_NAMES))
            w.writeheader()
            w.writerows(rows)
    if args.json:
        doc = {"store": args.store, "meta": meta, "counts": dict(counts), "runs": runs,
               "best": best, "rows": rows}
        sys.stdout.write(json.dumps(doc, indent=1, default=str) + "\n")
        return 0
    console.print(f"[bold]{escape(args.store)}[/bold]: "
                  + (escape(ctx.describe()) if ctx else "empty (no run has started)"))
    if ctx:
        console.print(f"device: {escape(json.dumps(ctx.device))}", soft_wrap=True)
    console.print(f"{len(rows)} candidate(s) in {len(runs)} run(s)")
    if runs:
        t = Table(title="Runs")
        for col in ("run", "strategy", "seed", "budget", "stopped by", "evaluated",
                    "from store", "random draws"):
            t.add_column(col)
        for r in runs:
            t.add_row(r["run_id"], r["strategy"], str(r["seed"]), str(r["budget"]),
                      str(r["stopped_by"] or "running or killed"),
                      "" if r["evaluated"] is None else str(r["evaluated"]),
                      "" if r["cached"] is None else str(r["cached"]),
                      "" if r["draws"] is None else str(r["draws"]))
        console.print(t)
    if counts:
        console.print(counts_table(counts))
    if best:
        console.print(best_table(best, f"Best {len(best)} candidate(s)"))
    if args.csv:
        console.print(f"wrote {len(rows)} row(s) to {escape(args.csv)}")
    return 0


def _compare(args) -> int:
    """``mapper results STORE --compare solver,model``: replay without a device."""
    import json
    import statistics

    from mapper.explore.replay import compare

    names = [n.strip() for n in args.compare.split(",") if n.strip()]
    if args.seeds < 1:
        raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
    if not 0 < args.target <= 1:
        raise ValueError(f"--target is a fraction of the best in (0, 1], got {args.target}")
    t0 = time.perf_counter()
    c = compare(args.store, names, seeds=args.seeds, fraction=args.target)
    if args.json:
        sys.stdout.write(json.dumps({"best": c.best, "fraction": c.fraction,
                                     "candidates": c.candidates,
                                     "evaluations": c.evaluations,
                                     "median": {n: c.median(n) for n in names}}) + "\n")
        return 0
    t = Table(title=f"Replay of {c.candidates} stored candidates: evaluations to reach "
                    f"{c.fraction:.0%} of the best ({c.best:.4g}), {args.seeds} seeds")
    for col in ("strategy", "reached", "median", "mean of reached", "per seed"):
        t.add_column(col)
    for n in names:
        ev = c.evaluations[n]
        got = [v for v in ev if v is not None]
        med = c.median(n)
        t.add_row(n, f"{len(got)}/{len(ev)}", "never" if med is None else f"{med:g}",
                  f"{statistics.mean(got):.1f}" if got else "",
                  " ".join("-" if v is None else str(v) for v in ev))
    console.print(t)
    console.print(f"(replayed in {time.perf_counter() - t0:.1f} s, no device)")
    return 0


def cmd_plot(args) -> int:
    from mapper.explore import ResultStore
    from mapper.explore.plot import plot_store

    out = args.out or os.path.splitext(args.store)[0] + "-plots"
    with ResultStore(args.store, readonly=True) as st:
        paths = plot_store(st, out)
    for p in paths:
        console.print(p)
    return 0


COMMANDS = {
    "show": cmd_show,
    "constraints": cmd_constraints,
    "enumerate": cmd_enumerate,
    "check": cmd_check,
    "explain": cmd_explain,
    "space": cmd_space,
    "device": cmd_device,
    "repl": cmd_repl,
    "run": cmd_run,
    "demo": cmd_demo,
    "explore": cmd_explore,
    "results": cmd_results,
    "plot": cmd_plot,
}


def _version() -> str:
    from mapper.explore.store import library_version

    return library_version()


def _non_negative(text: str) -> int:
    """argparse type: an integer >= 0 (argparse turns the error into one usage line)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} is negative; give 0 or more")
    return n


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="mapper",
        description="Valid parallel mappings of functional array programs onto OpenCL, "
        "found by constraint satisfaction.",
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)

    def prog_cmd(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("file", help="program file in the text syntax (e.g. examples/*.lift)")
        return p

    def fusion(p):
        p.add_argument("--fusion", choices=("always", "never", "free"), default="always",
                       help="sequential map fusion strategy (CC'22 Section 4.5)")
        p.add_argument("--no-heuristics", dest="heuristics", action="store_false",
                       help="validity rules only: drop the heuristic rules that prune "
                       "correct but unlikely mappings (see mapper constraints)")

    p = prog_cmd("show", "parse a program, print it typed with its algorithmic constraints")
    p.add_argument("--sizes", help="check the constraints for sizes, e.g. N=64,s0=16,s1=4")
    p = prog_cmd("constraints", "the map-nesting tree and the mapping constraints per rule")
    fusion(p)
    p.add_argument("--list", action="store_true", help="list every constraint instance")
    p = prog_cmd("enumerate", "enumerate (or count) the valid mappings")
    fusion(p)
    p.add_argument("--count", action="store_true", help="only count them")
    p.add_argument("--limit", type=_non_negative, help="show at most N mappings")
    p.add_argument("--random", action="store_true", help="uniformly random order")
    p.add_argument("--seed", type=int, default=None, help="seed of the random order")
    p.add_argument("--backend", choices=("cp", "z3", "brute"), default="cp")
    p.add_argument("--fixed", help="pin some maps, e.g. 'A=W0 B=L0'")
    p = prog_cmd("check", "check one mapping and say which rules it violates")
    fusion(p)
    p.add_argument("--mapping", required=True, help="e.g. 'A=20 B=10 C=10 D=0' or 'A=W0 B=L0'")
    p = prog_cmd("explain", "why a partial mapping is impossible (minimal rule instances)")
    fusion(p)
    p.add_argument("--partial", required=True, help="e.g. 'A=W0 C=G0'")
    p = prog_cmd("space", "tuning parameters, their constraints and the exact count")
    p.add_argument("--sizes", required=True, help="the fixed sizes, e.g. H=28,W=28,C=64,...")
    p.add_argument("--mapping", help="apply this mapping first (adds launch constraints)")
    p.add_argument("--domain", action="append", help="override a domain: theta=3..20 or v=1,4")
    p.add_argument("--max", type=int, help="upper end of inferred ranges (default 2x sizes)")
    p.add_argument("--device", help="the device whose limits become constraints: a preset "
                   "(pocl-cpu, h100), a JSON description or an OpenCL device spec "
                   "(default: the pocl-cpu preset)")
    p = sub.add_parser("device", help="describe a device (preset, JSON description or live "
                       "OpenCL device) and save its description")
    p.add_argument("spec", nargs="?", help="pocl-cpu, h100, FILE.json or an OpenCL device "
                   "spec (default: the live default device)")
    p.add_argument("--save", help="write the description to this JSON file")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    p = prog_cmd("run", "lower one mapping to OpenCL, run it on the device, check and time it")
    fusion(p)
    p.add_argument("--mapping", required=True, help="e.g. 'A=W0 B=L0 C=L0 D=S'")
    p.add_argument("--sizes", required=True, help="every size and tuning value, e.g. N=4096,"
                   "s0=64,s1=4")
    p.add_argument("--device", help="OpenCL device spec (default: LIFTMAP_DEVICE or the first "
                   "that builds)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds for build and runs "
                   "in the worker process (default 120)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--show-source", action="store_true", help="print the OpenCL source")
    p.add_argument("--force", action="store_true", help="skip the mapping constraints: let "
                   "the lowering's checks judge an invalid mapping")
    p = sub.add_parser("repl", help="interactive shell to debug a program's mapping constraints")
    p.add_argument("file", nargs="?", help="program to load first")
    p = sub.add_parser("demo", help="the main job: enumerate, lower and run CC'22 Listing 3 "
                       "and a convolution on the OpenCL device")
    p.add_argument("--quick", action="store_true", help="smaller sizes")
    p = sub.add_parser("explore", help="search mappings x tuning on the device, every "
                       "candidate recorded in a resumable SQLite store")
    p.add_argument("file", help="program file (examples/*.lift) or 'conv' (the GPGPU'20 "
                   "convolution pipeline, with --layer)")
    fusion(p)
    p.add_argument("--sizes", help="the fixed sizes, e.g. N=4096; the other size variables "
                   "are tuned")
    p.add_argument("--layer", help="conv only: VGG-16 layer, /k scales H and W down "
                   "(default 19/2)")
    p.add_argument("--strategy", default="solver", help="manual, solver or random "
                   "(default solver)")
    p.add_argument("--mapping", help="the fixed mapping of --strategy manual")
    p.add_argument("--budget", default="100", help="candidates (500) or time (90s, 10m)")
    p.add_argument("--store", help="SQLite results store (default results/<program>.sqlite)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", help="OpenCL device spec (default: LIFTMAP_DEVICE or the first "
                   "that builds)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per candidate")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per candidate")
    p.add_argument("--cut", type=float, help="early cut: stop a candidate after CUT times the "
                   "best candidate's evaluation time (at least 5 s)")
    p.add_argument("--max", type=int, help="upper end of inferred tuning ranges")
    p = sub.add_parser("results", help="what a results store holds: program, sizes, device, "
                       "outcome counts, best candidates")
    p.add_argument("store", help="the SQLite file written by mapper explore")
    p.add_argument("--top", type=int, default=10, help="show the N best (default 10)")
    p.add_argument("--csv", help="also write every row to this CSV file")
    p.add_argument("--json", action="store_true", help="print everything as JSON instead")
    p.add_argument("--compare", help="replay these strategies (e.g. solver,random,model) on "
                   "the stored candidates, without a device")
    p.add_argument("--seeds", type=int, default=10, help="--compare: seeds per strategy")
    p.add_argument("--target", type=float, default=0.9, help="--compare: fraction of the "
                   "best throughput to reach (default 0.9)")
    p = sub.add_parser("plot", help="PNG plots of a results store: best throughput against "
                       "time, time per stage, time-memory Pareto front")
    p.add_argument("store", help="the SQLite file written by mapper explore")
    p.add_argument("--out", help="folder for the PNGs (default: STORE without .sqlite + -plots)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from constraints.errors import ConstraintError
    from ir.errors import IRError
    from mapper.errors import MapperError

    try:
        return COMMANDS[args.command](args)
    except (IRError, MapperError, ConstraintError, ValueError, FileNotFoundError,
            IsADirectoryError) as e:
        err_console.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
