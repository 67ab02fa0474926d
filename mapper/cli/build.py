"""The commands that build and run: ``device``, ``space``, ``run``, ``repl``."""

from __future__ import annotations

import json
import sys

from rich.markup import escape
from rich.table import Table

from mapper.cli.common import (
    MAX_RANGE,
    CliError,
    console,
    emit_json,
    err_console,
    instance_json,
    load,
    mapping_json,
    parse_domains,
    progress,
    target,
    unfused_stages,
)
from mapper.sizes import check_sizes, parse_sizes, size_names


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
    # no --max: the default of explore (twice the largest size); the space's build refuses
    # it only for parameters that would list that range (not a split's divisors)
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
                                   tiling=args.tiling, unfused=unfused_stages(args),
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
    if doc.get("recomputed_work"):
        console.print("work per tile side t, as a multiple of the unfused program's "
                      "(halos computed again, ragged tiles' padding): " + ", ".join(
                          f"{k}: {v:.2f}x" for k, v in doc["recomputed_work"].items()),
                      soft_wrap=True)
    if doc["note"]:
        console.print(f"[yellow]note:[/yellow] {escape(doc['note'])}", soft_wrap=True)
    return 0


def cmd_run(args) -> int:
    from codegen.errors import LoweringError
    from mapper.api import problem
    from mapper.apply import default_widths, width_names
    from mapper.kernel import is_description
    from mapper.rules import rule_kind

    prog = load(args)
    sizes = parse_sizes(args.sizes)
    p = problem(prog, fusion=args.fusion, heuristics=args.heuristics, device=args.device)
    mapping = p.mapping(args.mapping)
    widths = width_names(prog, mapping, p.tree)
    check_sizes(prog, {**default_widths(prog, mapping, p.tree, sizes), **sizes}, args.file,
                complete=True, extra=widths)
    if args.repeats < 1:
        raise CliError(f"--repeats must be 1 or more, got {args.repeats}")
    if not args.timeout > 0:
        raise CliError(f"--timeout must be more than 0 seconds, got {args.timeout:g}")
    if args.device and is_description(args.device):
        raise CliError(f"mapper run runs on a live OpenCL device, and {args.device!r} is a "
                       "description; give an OpenCL device spec (see mapper device) or "
                       "use mapper space --device for descriptions")
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
