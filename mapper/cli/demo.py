"""``mapper demo``: a program written plainly, as written and as the default search maps it
(``mapper.plain_demo``)."""

from __future__ import annotations

import argparse

from rich.markup import escape
from rich.table import Table

from mapper.cli.common import CliError, console, emit_json, err_console, store_path
from mapper.cli.options import add_device, add_seed


def add_parser(sub) -> None:
    """The ``demo`` subcommand's arguments."""
    from mapper.plain_demo import DEFAULT_BUDGET, DEFAULT_SIZES

    sizes = ",".join(f"{k}={v}" for k, v in DEFAULT_SIZES.items())
    p = sub.add_parser("demo", help="a program written plainly (default: a matmul), run as "
                       "written, then vectorised and blocked by the default search",
                       description="Runs a program written plainly (no split, no vectors) as "
                       "written, its outer maps parallel and the rest scalar, then explores "
                       "it with the default search and shows what the search chose: the "
                       "parallel maps, the vector lanes, the register blocks, and the kernel.")
    p.add_argument("file", nargs="?", help="program file in the text syntax (default: the "
                   f"built-in plain matmul, examples/matmul_plain.lift, at {sizes})")
    p.add_argument("--sizes", help=f"the program's sizes (default for the matmul: {sizes})")
    p.add_argument("--budget", default=DEFAULT_BUDGET, help="the search's budget: time "
                   f"(30s, 2m) or candidates (default {DEFAULT_BUDGET})")
    p.add_argument("--store", help="SQLite results store for the search's candidates "
                   "(default: none, kept in memory)")
    add_seed(p, "seed of the search (default 0)")
    add_device(p)
    p.add_argument("--source", action="store_true", help="print the found kernel's OpenCL "
                   "source")
    p.add_argument("--json", action="store_true", help="print one JSON document instead "
                   "(schema: docs/cli-json.md)")


def cmd_demo(args: argparse.Namespace) -> int:
    """Prints the report; status 1 when the kernel as written or the search's answer did
    not run ok (the demo's central candidates), 2 for a user's mistake."""
    from mapper.cli.common import load
    from mapper.plain_demo import run_plain_demo
    from mapper.sizes import parse_sizes

    store_path(args.store)
    program = None
    if args.file is not None:
        load(args)  # a bad file: one located error, before any work
        program = args.file
        if not args.sizes:
            raise CliError(f"give the sizes of {args.file} with --sizes, e.g. --sizes N=1024")
    sizes = parse_sizes(args.sizes) if args.sizes else None

    def phase(what: str) -> None:
        if not args.json:
            err_console.print(f"[dim]{escape(what)}...[/dim]")

    r = run_plain_demo(program, sizes, budget=args.budget, store=args.store,
                       device=args.device, seed=args.seed, on_phase=phase)
    if args.json:
        emit_json("demo", r.to_json())
        return 0 if r.ok else 1
    console.print(f"[bold]{escape(r.origin)}[/bold], sizes "
                  + ", ".join(f"{k}={v}" for k, v in r.sizes.items()))
    console.print(escape(r.text), highlight=False)
    console.print(f"maps {', '.join(r.maps)}: {r.valid_mappings} valid mapping(s), each with "
                  "its own tuning space (vector widths, register blocks)")
    t = Table(title=f"As written against the default search ({r.budget}, "
                    f"{r.evaluated} candidates evaluated)")
    for col in ("kernel", "mapping; tuning", "outcome", "ms", "GFLOP/s"):
        t.add_column(col, overflow="fold")
    for name, k in (("as written", r.written), ("the search's answer", r.answer)):
        if k is None:
            t.add_row(name, "", "no candidate ran ok", "", "")
            continue
        tun = ", ".join(f"{n}={v}" for n, v in sorted(k.tuning.items()))
        t.add_row(name, k.mapping + (f"; {tun}" if tun else ""), k.label,
                  f"{k.time_s * 1e3:.3f}" if k.time_s else "",
                  f"{k.gflops:.2f}" if k.gflops else "")
    console.print(t)
    if r.choices:
        c = Table(title="What the search chose")
        for col in ("", "value", "meaning"):
            c.add_column(col, overflow="fold")
        for ch in r.choices:
            c.add_row(ch.name, ch.value, escape(ch.meaning))
        console.print(c)
    if r.speedup:
        console.print(f"the search's kernel runs [bold]{r.speedup:.1f}x[/bold] as fast as the "
                      "program as written (its re-timed median against the median of the "
                      f"as-written kernel's {r.written.runs} runs)")
    if args.source and r.source:
        console.print(escape(r.source), highlight=False, soft_wrap=True)
    if not r.written.ok:
        err_console.print(f"[red]FAILED: the program as written did not run ok: "
                          f"{escape(r.written.label)}: {escape(r.written.reason)}[/red]")
    if r.answer is None:
        err_console.print(f"[red]FAILED: the search found no kernel that runs ok in "
                          f"{escape(r.budget)} (outcomes: {r.counts}): give a larger "
                          "--budget[/red]")
    return 0 if r.ok else 1
