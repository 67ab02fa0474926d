"""The ``mapper`` command line: show, constraints, enumerate, check, explain, space, run, demo,
explore, results, plot.

Every command takes a program file in the text syntax (see ``ir/syntax.py``). User
mistakes (bad files, bad arguments, bad mappings, contradictory constraints) print one
clear error and exit with status 2; nothing prints a traceback for them. Commands that
print results take ``--json`` (one JSON document on stdout; schema in docs/cli-json.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mapper.encoding import MapCodes, short_code
from mapper.errors import UsageError, library_errors
from mapper.sizes import check_sizes, parse_sizes, size_names
from mapper.tune_cli import add_parser as add_tune_parser
from mapper.tune_cli import cmd_tune

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


MAX_RANGE = 1 << 22  # the most values an inferred or given tuning range may list
JSON_SCHEMA_VERSION = 1


class CliError(UsageError):
    """An argument given on the command line is wrong; the message says what to do."""


def mapping_json(m) -> dict[str, str]:
    """A mapping as ``{"A": "W0", "B": "L0"}`` (short codes, accepted by ``--mapping``)."""
    return MapCodes(m).to_json()


def instance_json(c, mapping=None, domains=None) -> dict:
    """A constraint instance as JSON: rule, kind, maps, description, the predicate over
    the code numbers (``predicate``) and simplified with code names (``predicate_named``,
    abridged past ``mapper.text.SHOW_LIMIT`` characters); given the ``mapping`` that
    violates it, ``why``: what that mapping does that the rule forbids."""
    from mapper.rules import rule_kind
    from mapper.text import show_predicate_short, why_violated

    doc = {"rule": c.rule, "kind": rule_kind(c.rule), "maps": list(c.subjects),
           "description": c.description, "predicate": str(c.predicate),
           "predicate_named": show_predicate_short(c.predicate, domains=domains)}
    if mapping is not None:
        doc["why"] = why_violated(c, mapping, domains)
    return doc


def _json_default(x):
    if hasattr(x, "item"):  # numpy scalars
        return x.item()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    return str(x)


def emit_json(command: str, doc: dict) -> None:
    """Print one JSON object for ``command`` on one line of stdout (``command`` and
    ``schema`` first)."""
    out = {"command": command, "schema": JSON_SCHEMA_VERSION, **doc}
    sys.stdout.write(json.dumps(out, default=_json_default) + "\n")


@contextmanager
def progress(label: str, total: int | None = None) -> Iterator[Callable[..., None]]:
    """A progress display on stderr while the block runs (only when stderr is a terminal);
    yields ``update(done, info="")``."""
    if not err_console.is_terminal:
        yield lambda done, info="": None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    cols = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        cols += [BarColumn(), MofNCompleteColumn()]
    cols += [TextColumn("{task.fields[info]}"), TimeElapsedColumn()]
    with Progress(*cols, console=err_console, transient=True) as bar:
        task = bar.add_task(label, total=total, info="")

        def update(done: int, info: str = "") -> None:
            bar.update(task, completed=done, info=info)

        yield update


def load(args: argparse.Namespace, path: str | None = None):
    """The program in ``path`` (default ``args.file``); its source map is kept in
    ``args.sources`` so that an error about one of its nodes names file, line and column
    (``main`` attaches it)."""
    from ir.source_map import parse_mapped

    program, source = parse_mapped(path if path is not None else args.file)
    if not hasattr(args, "sources"):
        args.sources = []
    args.sources.append(source)
    return program


def located(e: BaseException, sources: Sequence = ()) -> str:
    """The error's text; a type error about a node of a program loaded from ``sources``
    (``ir.source_map.SourceMap``) names its file, line and column."""
    for source in sources:
        if source.attach(e):
            break
    return str(e)


# ------------------------------------------------------------------------ commands


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
        console.print(print_program(prog), markup=False)
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
    console.print(f"{len(found)} mapping(s) shown; codes: S mapSeq, F fused, Ld/Wd/Gd "
                  "mapLcl/mapWrg/mapGlb(d)")
    return 0


def cmd_check(args) -> int:
    from mapper.api import check_mapping, problem, rejected_by
    from mapper.rules import rule_kind
    from mapper.text import why_violated

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
    if rejected_by(bad) == "validity":
        verdict = "[red]invalid[/red] (a validity rule rejects it)"
    else:
        verdict = ("[yellow]pruned by heuristics only[/yellow] (it would lower and run; "
                   "--no-heuristics admits it)")
    console.print(f"{verdict}: {escape(str(m))} violates {len(bad)} constraint instance(s):",
                  soft_wrap=True)
    for c in bad:
        kind = "validity rule" if rule_kind(c.rule) == "validity" else "heuristic"
        console.print(f"  [{kind} {c.rule}] maps {','.join(c.subjects)}: "
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


def _int(text: str, what: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]{1,12}", t):
        raise CliError(f"{what}: {t!r} is not an integer (at most 12 digits)")
    return int(t)


def parse_domains(items) -> dict[str, tuple[int, ...] | range]:
    """``["theta=3..20", "v=1,2,4"]`` -> domains; each name once, values 0 or more, a
    range of at most ``MAX_RANGE`` values."""
    out: dict[str, tuple[int, ...] | range] = {}
    form = "write NAME=LO..HI (e.g. s0=1..64) or NAME=a,b,c (e.g. v=1,2,4)"
    for item in items or ():
        if "=" not in item:
            raise CliError(f"--domain {item!r}: {form}")
        k, v = (x.strip() for x in item.split("=", 1))
        what = f"--domain {item!r}"
        if not k.isidentifier() or not k.isascii():
            raise CliError(f"{what}: {k!r} is not a parameter name; {form}")
        if k in out:
            raise CliError(f"{what}: the domain of {k} is given twice; give it once")
        if ".." in v:
            lo_t, hi_t = v.split("..", 1)
            lo, hi = _int(lo_t, what), _int(hi_t, what)
            if lo > hi:
                raise CliError(f"{what}: the range is empty ({lo} > {hi}); {form}")
            if hi - lo + 1 > MAX_RANGE:
                raise CliError(f"{what}: {hi - lo + 1:,} values is too many (at most "
                               f"{MAX_RANGE:,}); narrow the range")
            dom: tuple[int, ...] | range = range(lo, hi + 1)
        else:
            parts = [x for x in v.split(",") if x.strip()]
            if not parts:
                raise CliError(f"{what}: no value given; {form}")
            dom = tuple(_int(x, what) for x in parts)
        if min(dom) < 0:
            raise CliError(f"{what}: tuning values are 0 or more, got {min(dom)}")
        out[k] = dom
    return out


def target(spec: str | None):
    """The ``codegen.target.Device`` named by ``--device`` (a preset, a JSON description or
    a live OpenCL device; without one the default preset)."""
    from codegen.target import DEFAULT_DEVICE, resolve

    return DEFAULT_DEVICE if spec is None else resolve(spec)


def cmd_device(args) -> int:
    """Describe a device (preset, JSON description or live OpenCL device); save it."""
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


def _space_domains(args, prog, sizes: dict[str, int]) -> dict:
    """``--domain`` checked against the program's tuning parameters, and ``--max`` against
    the largest range the space may list."""
    domains = parse_domains(args.domain)
    tunable = sorted(size_names(prog) - sizes.keys())
    for k in domains:
        if k in sizes:
            raise CliError(f"--domain {k}: {k} is fixed by --sizes ({k}={sizes[k]}); give it "
                           "in one of them")
        if k not in tunable:
            raise CliError(f"--domain {k}: {args.file} has no tuning parameter {k}; its "
                           f"tuning parameters are: {', '.join(tunable) or 'none'}")
    if args.max is not None and not 1 <= args.max <= MAX_RANGE:
        raise CliError(f"--max {args.max} is out of range: the upper end of inferred ranges "
                       f"is 1..{MAX_RANGE:,}")
    hi = args.max or 2 * max([*sizes.values(), 1])  # as mapper.tuning.infer_tuning
    open_ = [k for k in tunable if k not in domains]
    if hi > MAX_RANGE and open_:
        raise CliError(
            f"the sizes make the inferred tuning ranges 1..{hi:,} (twice the largest size), "
            f"too many values to list for {', '.join(open_)}: give their upper end with --max "
            f"(at most {MAX_RANGE:,}, e.g. --max 4096) or their values with --domain "
            f"(e.g. --domain {open_[0]}=1..1024)")
    return domains


def cmd_space(args) -> int:
    from mapper.space_report import build_space_document

    device = target(args.device)
    prog = load(args)  # user errors first, here, before the worker starts
    sizes = parse_sizes(args.sizes)
    check_sizes(prog, sizes, args.file)
    domains = _space_domains(args, prog, sizes)
    if args.mapping:
        from mapper.api import problem

        problem(prog).mapping(args.mapping)
    with progress("building the tuning space") as update:
        doc = build_space_document(args.file, sizes, domains, args.max, device, args.mapping,
                                   timeout_s=args.timeout,
                                   on_wait=lambda s: update(0, f"{s:.0f} s"))
    if args.json:
        emit_json("space", doc)
        return 0
    t = Table(title="Tuning parameters")
    t.add_column("parameter")
    t.add_column("domain")
    t.add_column("why")
    for p in doc["parameters"]:
        dom = ", ".join(map(str, p["domain"][:10])) + (" ..." if p["values"] > 10 else "")
        t.add_row(p["name"], f"{dom}  ({p['values']} values)", escape(p["why"]))
    console.print(t)
    c = Table(title="Constraints by origin")
    c.add_column("origin")
    c.add_column("restriction")
    by_origin: dict[str, list[str]] = {}
    for r in doc["restrictions"]:
        by_origin.setdefault(r["origin"], []).append(r["restriction"])
    for origin, srcs in by_origin.items():
        for src in srcs:
            c.add_row(escape(origin), escape(src if len(src) < 160 else src[:157] + "..."))
    console.print(c)
    console.print("independent groups: " + "  ".join("{" + ", ".join(g) + "}"
                                                      for g in doc["groups"]))
    console.print("dependency order: " + " -> ".join(doc["order"]))
    console.print(f"[bold]{doc['count']:,}[/bold] valid configurations of "
                  f"{doc['cartesian']:,} (built and counted in {doc['seconds']:.2f} s) for "
                  f"{escape(doc['device'])}", soft_wrap=True)
    if doc["note"]:
        console.print(f"[yellow]note:[/yellow] {escape(doc['note'])}", soft_wrap=True)
    return 0


def cmd_run(args) -> int:
    from codegen.errors import LoweringError
    from mapper.api import problem
    from mapper.kernel import is_description
    from mapper.rules import rule_kind

    prog = load(args)
    sizes = parse_sizes(args.sizes)
    check_sizes(prog, sizes, args.file, complete=True)
    if args.repeats < 1:
        raise CliError(f"--repeats must be 1 or more, got {args.repeats}")
    if not args.timeout > 0:
        raise CliError(f"--timeout must be more than 0 seconds, got {args.timeout:g}")
    if args.device and is_description(args.device):
        raise CliError(f"mapper run runs on a live OpenCL device, and {args.device!r} is a "
                       "description; give an OpenCL device spec (see mapper device) or "
                       "use mapper space --device for descriptions")
    p = problem(prog, fusion=args.fusion, heuristics=args.heuristics, device=args.device)
    doc: dict = {"file": args.file, "mapping": mapping_json(p.mapping(args.mapping)),
                 "sizes": sizes, "fusion": args.fusion, "heuristics": args.heuristics,
                 "forced": args.force}
    m = p.mapping(args.mapping)
    overridden = p.check(m) if args.force and len(m) == len(p.labels) else []
    doc["overridden"] = [instance_json(c) for c in overridden]
    if overridden:
        rules = ", ".join(f"{r} ({rule_kind(r)})"
                          for r in sorted({c.rule for c in overridden}))
        err_console.print(f"[yellow]warning:[/yellow] --force overrides "
                          f"{len(overridden)} constraint instance(s) of {rules}; only "
                          "the lowering's checks and the run judge this mapping",
                          soft_wrap=True)
    try:
        k = p.build(m, sizes, force=args.force, flops=args.flops)
    except LoweringError as e:
        if args.json:
            emit_json("run", {**doc, "status": "rejected",
                              "label": f"rejected:{e.check}", "check": e.check,
                              "reason": str(e), "ok": False})
            return 1
        console.print(f"[yellow]rejected:{e.check}[/yellow] {escape(str(e))}")
        return 1
    if args.source_out:
        try:
            with open(args.source_out, "w", encoding="utf-8") as f:
                f.write(k.source)
        except OSError as e:
            raise CliError(f"cannot write the source to {args.source_out}: "
                           f"{e.strerror or e}") from None
    if args.show_source and not args.json:
        sys.stdout.write(k.source)  # raw: a file written from it compiles
        sys.stdout.flush()
    r = k.run(repeats=args.repeats, timeout_s=args.timeout, seed=args.seed)
    if args.json:
        emit_json("run", {
            **doc, **r.to_json(), "repeats": args.repeats,
            "kernels": [{"name": kk.name, "global_size": kk.global_size,
                         "local_size": kk.local_size,
                         **({"source": kk.source} if args.show_source else {})}
                        for kk in k.kernels]})
        return 0 if r.ok else 1
    out = err_console if args.show_source else console  # stdout holds only the source
    colour = "green" if r.ok else "red" if r.status != "rejected" else "yellow"
    out.print(f"[{colour}]{escape(r.label)}[/{colour}] {escape(r.reason)}", soft_wrap=True)
    if r.ok:
        out.print(f"{len(k.kernels)} kernel(s), launch "
                  + ", ".join(f"{g}/{loc}" for _, g, loc in k.launch)
                  + f"; build {r.build_s or 0:.2f} s", soft_wrap=True)
        out.print(escape(str(r)), soft_wrap=True)
        out.print("memory (bytes): " + escape(str(r.memory)), soft_wrap=True)
    return 0 if r.ok else 1


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

            if args.layer:
                raise CliError("conv takes --sizes or --layer, not both")
            s = parse_sizes(args.sizes, minimum=0)  # P=0: no padding; ConvLayer checks
            need = ("C", "H", "W", "M")
            unknown = sorted(set(s) - {*need, "K", "S", "P"})
            if unknown:
                raise CliError(f"conv has no size {', '.join(unknown)}: its sizes are C, H, "
                               "W, M (input channels, height, width, kernels) and K, S, P "
                               "(kernel size 3, stride 1, padding 1 unless given)")
            missing = [k for k in need if k not in s]
            if missing:
                raise CliError(f"conv needs sizes {', '.join(need)} (K, S, P optional) or "
                               f"--layer, e.g. --layer 19/2; missing {', '.join(missing)}")
            layer = ConvLayer("custom", s["C"], s["H"], s["W"], s["M"], s.get("K", 3),
                              s.get("S", 1), s.get("P", 1))
        else:
            text = args.layer or "19/2"
            if not re.fullmatch(r"\w+(/[0-9]{1,4})?", text):
                raise CliError(f"--layer {text!r}: give a VGG-16 layer and an optional scale, "
                               "e.g. 19 or 19/2")
            try:
                layer = parse_layer(text)
            except ValueError as e:  # parse_layer's own message (an unknown layer name)
                raise CliError(f"--layer {text!r}: {e}") from None
        if args.flops is not None:
            raise CliError("--flops goes with a .lift program (conv counts its own FLOPs)")
        return Task.conv_layer(layer, fusion=args.fusion, heuristics=args.heuristics)
    if args.layer:
        raise CliError("--layer goes with the program name conv (the convolution pipeline)")
    sizes = parse_sizes(args.sizes)
    import os

    from ir.syntax import parse_file

    prog = parse_file(args.file)
    check_sizes(prog, sizes, args.file)
    from ir.types import shape_of

    for p in getattr(prog, "params", ()):
        dims = shape_of(p.type)[0]
        missing = sorted({str(v) for d in dims for v in d.free_vars()} - sizes.keys())
        if missing:
            raise CliError(f"input {p.name} of {args.file} has size(s) {', '.join(missing)}: "
                           "give them with --sizes (the other sizes are tuned)")
    return Task.from_program(prog, sizes, fusion=args.fusion, heuristics=args.heuristics,
                             name=os.path.basename(args.file), max_value=args.max,
                             flops=args.flops)


def cmd_explore(args) -> int:
    """``mapper explore``: a dashboard on a terminal (stdout; on stderr with --json/--jsonl
    when only stderr is one), -v: a line per candidate on stderr, --jsonl: a JSON object per
    candidate on stdout, then the summary (text, or JSON with --json/--jsonl; -q: the
    answer alone)."""
    import os

    from rich.live import Live

    from mapper.explore import ResultStore, explore, get_strategy, parse_budget
    from mapper.explore import output as out
    from mapper.explore.display import Dashboard

    budget = parse_budget(args.budget)  # user errors first, before any work
    get_strategy(args.strategy)
    if args.mapping and args.strategy != "manual":
        raise CliError("--mapping goes with --strategy manual")
    if args.strategy == "manual" and not args.mapping:
        raise CliError("--strategy manual needs --mapping, e.g. 'A=W0 B=L0 C=L0 D=S'")
    stem = "conv" if args.file == "conv" else os.path.splitext(os.path.basename(args.file))[0]
    path = args.store or os.path.join("results", f"{stem}.sqlite")
    task = _explore_task(args)  # a bad program or shape leaves no store behind
    pool = None
    if args.ray is not None:  # a cluster that cannot start leaves no store behind either
        from mapper.explore.ray_pool import RayPool

        specs = [d.strip() or None for d in args.device.split(",")] if args.device else None
        pool = RayPool(specs, address=args.ray, workers_per_device=args.workers,
                       timeout_s=args.timeout)
        if not args.quiet:
            err_console.print(pool.describe(), markup=False, highlight=False)
    try:
        store = ResultStore(path)
    except BaseException:
        if pool is not None:
            pool.close()
        raise
    as_json = args.json or args.jsonl
    dash_console = None  # where the live dashboard goes, if anywhere
    if not (args.quiet or args.verbose):
        if not as_json and console.is_terminal:
            dash_console = console
        elif as_json and err_console.is_terminal and not console.is_terminal:
            dash_console = err_console
    dash = Dashboard()

    def on_result(rec, res) -> None:
        if args.verbose:
            sys.stderr.write(out.candidate_line(rec, res) + "\n")
            sys.stderr.flush()
        if args.jsonl:
            emit_json("explore", out.candidate_json(rec, res))
            sys.stdout.flush()
        if dash_console is not None:
            dash.update(rec, res)

    try:
        kw = dict(strategy=args.strategy, budget=budget, store=store, device=args.device,
                  seed=args.seed, timeout_s=args.timeout, repeats=args.repeats,
                  cut=args.cut or None, workers=args.workers or 1,
                  run_budget_s=args.run_budget or None, pool=pool)
        if args.mapping:
            kw["mapping"] = args.mapping
        if dash_console is not None:
            # JSON on stdout is never captured into a dashboard on stderr
            with Live(dash, console=dash_console, refresh_per_second=4, transient=False,
                      redirect_stdout=dash_console is console):
                res = explore(task, on_start=dash.start, on_result=on_result, **kw)
        else:
            res = explore(task, on_result=on_result, **kw)
    except KeyboardInterrupt:  # before the first candidate (start-up, building the space)
        err_console.print("interrupted before the first candidate; nothing was evaluated")
        return 130
    finally:
        store.close()
        if pool is not None:
            pool.close()
    too_short = not res.records and res.stopped_by == "time"
    if as_json and not too_short:
        emit_json("explore", out.summary_json(res, file=args.file, store=path))
    elif args.quiet:
        answer = out.answer_line(res)
        if answer is not None:
            sys.stdout.write(answer + "\n")
        elif not too_short:
            err_console.print("no candidate ran ok", markup=False, highlight=False)
    elif not as_json:
        console.print(res.summary(), markup=False, highlight=False)
        console.print(f"store: {path} ({res.context.describe()})", markup=False)
    if res.stopped_by == "interrupted":
        return 130
    if too_short:
        err_console.print(f"error: the budget {budget.text} ended before one candidate was "
                          f"evaluated (start-up and the first candidate took longer): give "
                          "a larger --budget", markup=False, highlight=False)
        return 2
    return 0


def cmd_results(args) -> int:
    """``mapper results``: tables, ``--json`` (docs/cli-json.md), ``--csv``; mappings in
    short codes, tuning values as columns or objects. STORE may be a Kernel Tuner cache or
    T4 file (``.json``); ``--format kernel-tuner|t4 --out F.json`` writes one."""
    import json

    from mapper.explore import output as out
    from mapper.explore.display import best_table, counts_table
    from mapper.explore.interop import export_store, open_results

    if args.compare:
        return _compare(args)
    if args.format is not None or args.out is not None:
        if args.format is None or args.out is None:
            raise CliError("--format and --out go together, e.g. mapper results STORE "
                           "--format kernel-tuner --out cache.json")
        n = export_store(args.store, args.format, args.out)
        console.print(f"wrote {n} candidate(s) to {escape(args.out)} ({args.format})")
        return 0
    with open_results(args.store) as st:
        ctx, counts, rows = st.context(), st.counts(), st.records()
        best, runs = st.best_records(args.top), st.runs()
        doc = out.results_json(st, args.top) if args.json else None
    if args.csv:
        out.write_csv(args.csv, rows)
    if doc is not None:
        emit_json("results", doc)
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
                      str(r["stopped_by"] or r.get("state") or "running or killed"),
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
    import statistics

    from mapper.explore.replay import compare

    names = [n.strip() for n in args.compare.split(",") if n.strip()]
    if args.seeds < 1:
        raise CliError(f"--seeds must be >= 1, got {args.seeds}")
    if not 0 < args.target <= 1:
        raise CliError(f"--target is a fraction of the best in (0, 1], got {args.target}")
    t0 = time.perf_counter()
    c = compare(args.store, names, seeds=args.seeds, fraction=args.target)
    if args.json:
        emit_json("results", {"store": args.store, "best": c.best, "fraction": c.fraction,
                              "candidates": c.candidates, "evaluations": c.evaluations,
                              "median": {n: c.median(n) for n in names}})
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
        console.print(p, soft_wrap=True, markup=False)  # a path is one line
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
    "tune": cmd_tune,
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


def _positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    n = _non_negative(text)
    if n < 1:
        raise argparse.ArgumentTypeError("give 1 or more")
    return n


def _seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not x >= 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 or more seconds (0: no limit)")
    return x


MAX_SEED = 2**32 - 1  # numpy's legacy seeding takes 0..2^32-1
MAX_REPEATS = 10**6  # timed executions of one kernel
MAX_WORKERS = 256  # worker processes of mapper explore
MAX_REPLAY_SEEDS = 10**4  # mapper results --compare
MAX_TOP = 2**31 - 1  # rows mapper results shows


def _int_in(lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: an integer in ``lo``..``hi``."""
    def parse(text: str) -> int:
        shown = text if len(text) <= 24 else f"{text[:12]}...({len(text)} characters)"
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown!r} is not an integer") from None
        if not lo <= n <= hi:
            raise argparse.ArgumentTypeError(f"{shown} is out of range: give an integer in "
                                             f"{lo}..{hi}")
        return n

    return parse


def _positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < x < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds more than 0")
    return x


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

    def as_json(p):
        p.add_argument("--json", action="store_true", help="print one JSON document instead "
                       "(schema: docs/cli-json.md)")

    p = prog_cmd("show", "parse a program, print it typed with its algorithmic constraints")
    p.add_argument("--sizes", help="check the constraints for sizes, e.g. N=64,s0=16,s1=4")
    as_json(p)
    p = prog_cmd("constraints", "the map-nesting tree and the mapping constraints per rule")
    fusion(p)
    p.add_argument("--list", action="store_true", help="list every constraint instance")
    as_json(p)
    p = prog_cmd("enumerate", "enumerate (or count) the valid mappings")
    fusion(p)
    p.add_argument("--count", action="store_true", help="only count them (without listing "
                   "them, unless --backend is given)")
    p.add_argument("--limit", type=_non_negative, help="show at most N mappings")
    p.add_argument("--random", action="store_true", help="uniformly random order")
    p.add_argument("--seed", type=_int_in(0, MAX_SEED), default=None, help="seed of the "
                   "random order")
    p.add_argument("--backend", choices=("cp", "z3", "brute"), default=None,
                   help="solver that lists the mappings (default cp); with --count, count "
                   "by listing with it (a slow cross-check)")
    p.add_argument("--fixed", help="pin some maps, e.g. 'A=W0 B=L0'")
    p.add_argument("--timeout", type=_seconds, default=60.0, help="stop with exit status 2 "
                   "after this many seconds (default 60; 0: no limit)")
    as_json(p)
    p = prog_cmd("check", "check one mapping and say which rules it violates")
    fusion(p)
    p.add_argument("--mapping", required=True, help="e.g. 'A=20 B=10 C=10 D=0' or 'A=W0 B=L0'")
    as_json(p)
    p = prog_cmd("explain", "why a partial mapping is impossible (minimal rule instances)")
    fusion(p)
    p.add_argument("--partial", required=True, help="e.g. 'A=W0 C=G0'")
    as_json(p)
    p = prog_cmd("space", "tuning parameters, their constraints and the exact count")
    p.add_argument("--timeout", type=_seconds, default=120.0, help="stop building the space "
                   "after this many seconds (default 120; 0: no limit)")
    as_json(p)
    p.add_argument("--sizes", required=True, help="the fixed sizes, e.g. H=28,W=28,C=64,...")
    p.add_argument("--mapping", help="apply this mapping first (adds launch constraints)")
    p.add_argument("--domain", action="append", help="override a domain: theta=3..20 or v=1,4")
    p.add_argument("--max", type=int, help="upper end of inferred ranges (default 2x sizes; "
                   f"1..{MAX_RANGE}, checked by the command)")
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
    p.add_argument("--repeats", type=_int_in(1, MAX_REPEATS), default=5, help="timed "
                   "executions (default 5)")
    p.add_argument("--timeout", type=_positive_seconds, default=120.0, help="seconds for build "
                   "and runs "
                   "in the worker process (default 120)")
    p.add_argument("--seed", type=_int_in(0, MAX_SEED), default=0, help="seed of the random "
                   "inputs")
    p.add_argument("--show-source", action="store_true", help="print the OpenCL source on "
                   "stdout, raw (the verdict then goes to stderr)")
    p.add_argument("--source-out", metavar="FILE", help="write the OpenCL source to FILE")
    p.add_argument("--flops", type=_non_negative, help="the FLOP count GFLOP/s is computed "
                   "from (default: derived from the program's functions)")
    p.add_argument("--force", action="store_true", help="skip the mapping constraints: let "
                   "the lowering's checks judge an invalid mapping")
    as_json(p)
    p = sub.add_parser("repl", help="interactive shell to debug a program's mapping constraints")
    p.add_argument("file", nargs="?", help="program to load first")
    p = sub.add_parser("demo", help="the main job: enumerate, lower and run CC'22 Listing 3 "
                       "and a convolution on the OpenCL device")
    p.add_argument("--quick", action="store_true", help="smaller sizes")
    class StrategyList(argparse.RawDescriptionHelpFormatter):
        """Help whose epilog ``STRATEGIES`` becomes the registered strategies, one a line
        (imported only when the help is printed)."""

        def add_text(self, text: str | None) -> None:
            if text == "STRATEGIES":
                from mapper.explore.output import strategies_help

                text = strategies_help()
            super().add_text(text)

    p = sub.add_parser("explore", help="search mappings x tuning on the device, every "
                       "candidate recorded in a resumable SQLite store",
                       description="Search mappings x tuning values on the device; every "
                       "candidate is recorded in a\nresumable SQLite store. On a terminal a live "
                       "dashboard shows the progress; -v prints\na line per candidate on stderr, "
                       "--json/--jsonl print JSON on stdout (docs/cli-json.md),\n-q only the "
                       "answer.", epilog="STRATEGIES", formatter_class=StrategyList)
    p.add_argument("file", help="program file (examples/*.lift) or 'conv' (the GPGPU'20 "
                   "convolution pipeline, with --layer)")
    fusion(p)
    p.add_argument("--sizes", help="the fixed sizes, e.g. N=4096; the other size variables "
                   "are tuned")
    p.add_argument("--flops", type=_non_negative, help="the FLOP count GFLOP/s is computed "
                   "from (default: derived from the program's functions)")
    p.add_argument("--layer", help="conv only: VGG-16 layer, /k scales H and W down "
                   "(default 19/2)")
    p.add_argument("--strategy", default="model", help="the search strategy (default model; "
                   "every strategy is listed below)")
    p.add_argument("--mapping", help="the fixed mapping of --strategy manual")
    p.add_argument("--budget", default="100", help="candidates (500) or time (90s, 10m)")
    p.add_argument("--store", help="SQLite results store (default results/<program>.sqlite)")
    p.add_argument("--seed", type=_int_in(0, MAX_SEED), default=0, help="seed of the "
                   "strategy (the same seed "
                   "and store resume a run; default 0)")
    p.add_argument("--device", help="OpenCL device spec (default: LIFTMAP_DEVICE or the first "
                   "that builds)")
    p.add_argument("--timeout", type=_positive_seconds, default=30.0, help="seconds for one "
                   "candidate's "
                   "lowering, build and runs (default 30)")
    p.add_argument("--repeats", type=_int_in(1, MAX_REPEATS), default=3, help="timed runs "
                   "per candidate")
    p.add_argument("--cut", type=_seconds, default=3.0, help="early cut: stop a candidate's runs "
                   "after CUT times the best candidate's run time, at least 2 s (default 3; "
                   "0: off)")
    p.add_argument("--run-budget", type=_seconds, default=1.0, help="seconds the timed runs "
                   "of one candidate may take: slow ones are timed fewer times (at least "
                   "once; default 1; 0: always --repeats)")
    p.add_argument("--max", type=_int_in(1, MAX_RANGE), help="upper end of inferred tuning "
                   "ranges")
    p.add_argument("--workers", type=_int_in(1, MAX_WORKERS), default=None, help="candidates "
                   "lowered and "
                   "built in parallel worker processes; their timed runs still take turns on "
                   "the device (default 1; with --ray: per device, default the node's CPUs)")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS", help="evaluate on "
                   "a Ray cluster: join the one at ADDRESS (host:port, or 'auto': the one "
                   "`ray start` runs here), or without ADDRESS start one on this machine; "
                   "--device applies on every node (several specs: SPEC,SPEC: one actor "
                   "each); the store is written here (pip install 'liftmap[cluster]')")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON summary object at "
                     "the end on stdout instead of the text (schema: docs/cli-json.md)")
    fmt.add_argument("--jsonl", action="store_true", help="print one JSON object per "
                     "candidate on stdout as each finishes, then the summary object")
    talk = p.add_mutually_exclusive_group()
    talk.add_argument("-v", "--verbose", action="store_true", help="print one line per "
                      "candidate on stderr (also without a terminal; no dashboard)")
    talk.add_argument("-q", "--quiet", action="store_true", help="print only the answer: "
                      "the final mapping and tuning values (no dashboard, no summary)")
    p = sub.add_parser("results", help="what a results store holds: program, sizes, device, "
                       "outcome counts, best candidates")
    p.add_argument("store", help="the SQLite file written by mapper explore (or a Kernel "
                   "Tuner cache or T4 results file, .json)")
    p.add_argument("--top", type=_int_in(1, MAX_TOP), default=10, help="show the N best "
                   "(default 10)")
    p.add_argument("--format", choices=("kernel-tuner", "t4"), help="write the candidates as "
                   "a Kernel Tuner cache (its simulation mode replays it) or T4 results to "
                   "--out")
    p.add_argument("--out", help="--format: the JSON file to write")
    p.add_argument("--csv", help="also write every candidate to this CSV file (mapping in "
                   "short codes, one column per tuning parameter)")
    p.add_argument("--json", action="store_true", help="print everything as one JSON object "
                   "instead (schema: docs/cli-json.md)")
    p.add_argument("--compare", help="replay these strategies (e.g. solver,random,model) on "
                   "the stored candidates, without a device")
    p.add_argument("--seeds", type=_int_in(1, MAX_REPLAY_SEEDS), default=10, help="--compare: "
                   "seeds per strategy")
    p.add_argument("--target", type=float, default=0.9, help="--compare: fraction of the "
                   "best throughput to reach (default 0.9)")
    p = sub.add_parser("plot", help="PNG plots of a results store: best throughput against "
                       "time, time per stage, time-memory Pareto front")
    p.add_argument("store", help="the SQLite file written by mapper explore")
    p.add_argument("--out", help="folder for the PNGs (default: STORE without .sqlite + -plots)")
    add_tune_parser(sub)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; the library's errors print one line on stderr and give status 2."""
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        return 130
    except BrokenPipeError:  # stdout closed early (| head): stop quietly, as cat does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush goes nowhere
        return 141
    except Exception as e:
        if not isinstance(e, library_errors()):
            raise  # a bug: the traceback is the report
        err_console.print(f"[red]error:[/red] {escape(located(e, getattr(args, 'sources', ())))}",
                          soft_wrap=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
