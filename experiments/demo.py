"""The main job, end to end on the OpenCL device (``python -m experiments.demo``).

Run from a checkout (``experiments/`` is not installed with the package).

1. CC'22 Listing 3 (``X*y + z`` with the multiplication in local memory): every valid
   mapping is lowered, compiled, run and checked against the reference interpreter.
2. CC'22 Listing 1 / Table 1: the valid mappings run, the invalid ones are refused with
   the rule that rejects them (M5's unvectorizable lanes too; M6 runs C in vector lanes).
3. A program written plainly (the separable blur: no asVector, no split): its rows in
   parallel as written, then the default search for a short budget, which runs its maps
   and reductions in vector lanes.
4. The GPGPU'20 convolution pipeline (pad, partial convolution, final sum, crop) on a
   scaled VGG-16 layer: the paper's hand mapping (with the paper's GPU coalescing layout,
   and with contiguous reads and float8, the layout a CPU wants), the hand-written
   register-tiled kernel as the baseline, then the library's default search
   (``mapper explore conv``) for a short time budget; its best candidates and its
   re-timed winner are shown beside the baseline. Every candidate ends in a typed
   outcome, checked against an independent numpy convolution.

Candidates run in worker processes with a time limit. The exit status is 1 if any valid
candidate computed a wrong result, crashed or did not compile (a bug), if a candidate the
demo must run (every valid mapping of Listing 3 and Table 1, the paper's hand mapping of
the convolution, the hand-written kernel, the plain blur as written) did not end ``ok``
(a timeout included), or if a search found no candidate that runs ok: a refusal of those
is a failure of the main job, not a typed outcome to accept. Candidates the search stopped
early (the early cut: several times slower than its best) or the lowering refused are
counted, not failures.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mapper.data import conv2d_reference
from mapper.encoding import MapCodes, short_code
from mapper.kernel import pool_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if TYPE_CHECKING:
    from mapper.explore.record import Record


def _codes(m) -> str:
    """A mapping in short codes: ``A=W0 B=L0 C=L0 D=S``."""
    return MapCodes(m).short()


def _short(m) -> str:
    """The parallel maps of a mapping in short codes (the rest is sequential or fused)."""
    par = [f"{k}={short_code(v)}" for k, v in m.items() if v >= 10]
    return " ".join(par) + " (rest seq.)" if par else "all sequential"


def _outcome_of(r: Record):
    """A search's record as the ``Outcome`` the tables print."""
    from codegen.program import Outcome

    mem = r.memory_bytes
    return Outcome(r.status, r.reason or "", check=r.check, time_s=r.time_s,
                   gflops=r.gflops, memory={"global_total": mem} if mem else {})


def _outcome_cell(o) -> str:
    colour = {"ok": "green", "rejected": "yellow"}.get(o.status, "red")
    return f"[{colour}]{escape(o.label)}[/{colour}]"


def _build_and_run(p, m, sizes, inputs, reference):
    """One mapping through the build/run API: (kernel, typed result); a mapping the
    lowering refuses is a ``rejected`` result (no kernel)."""
    from codegen.errors import LoweringError
    from codegen.program import Status
    from mapper.kernel import RunResult

    try:
        k = p.build(m, sizes)
    except LoweringError as e:
        return None, RunResult(Status.REJECTED, str(e), e.check, (), None, 0, None, {}, None, "")
    return k, k.run(inputs, repeats=3, timeout_s=60, reference=reference)


def run_demo(console: Console | None = None, quick: bool = False,
             budget: str | None = None) -> int:
    """Runs the demo; 0 when every required candidate ran ok (see the module docstring).
    ``budget``: both searches' budget (a number of candidates or a time, as ``mapper
    explore --budget`` takes it); default 15 s for the blur and 25 s for the convolution
    with ``quick``, else 30 s and 75 s."""
    from contextlib import nullcontext

    from codegen.target import Device
    from experiments.vgg16 import conv_stage_mappings, paper_like_tuning
    from ir.conv_layer import ConvLayer
    from ir.interp import evaluate
    from ir.programs import cc22_listing1, cc22_listing3, gpgpu20_conv_pipeline
    from mapper.api import problem
    from mapper.candidates import build_pipeline, reduction_tolerance
    from mapper.explore.task import conv_variants
    from mapper.explore.variants import explore_variants

    console = console or Console(highlight=False)
    bad: Counter[str] = Counter()
    refused: list[str] = []  # candidates the demo must run that did not end ok
    slow: list[str] = []  # sampled candidates stopped by the time limit (slow, not wrong)

    def judge(o, label: str, required: bool) -> None:
        bad[o.status] += o.status in ("wrong-result", "crash", "compile-error")
        if required and not o.ok:
            refused.append(f"{label}: {o.label}")
        elif o.status == "timeout":
            slow.append(label)
    t_start = time.perf_counter()
    # one worker pool for everything: the one the build/run API uses for the default device
    with nullcontext(pool_for(None)) as pool:
        lim = pool.device_info().get("limits", {})
        device = Device.from_limits(lim)  # candidates are lowered for the device they run on
        from codegen.device import describe_choice

        console.print(escape(describe_choice()))
        console.print(f"  limits as the worker sees them: {escape(str(lim.get('name', '?')))} "
                      f"({escape(str(lim.get('platform_version', '')))})")

        # 1. Listing 3, every valid mapping ------------------------------------------------
        n = 1024 if quick else 1 << 16
        sizes = {"N": n, "s0": 64, "s1": 4}
        prog = cc22_listing3(local=True)
        rng = np.random.default_rng(0)
        X = rng.standard_normal(n).astype(np.float32)
        inputs = {"X": X, "y": np.float32(3.0), "z": np.float32(-1.0)}
        ref = evaluate(prog, inputs, sizes)
        t = Table(title=f"CC'22 Listing 3 with toLocal, N={n}, s0=64, s1=4: every valid "
                        "mapping (S mapSeq, F fused, Ld/Wd/Gd mapLcl/mapWrg/mapGlb(d))")
        t.add_column("mapping", no_wrap=True)
        t.add_column("outcome", no_wrap=True)
        t.add_column("time (us)", justify="right", no_wrap=True)
        t.add_column("global, local size")
        p3 = problem(prog)
        for m in p3.enumerate():
            k, o = _build_and_run(p3, m, sizes, inputs, ref)
            judge(o, f"Listing 3 {m}", required=True)
            launch = f"{k.kernels[0].global_size}, {k.kernels[0].local_size}" if k else ""
            t.add_row(_codes(m), _outcome_cell(o),
                      f"{o.time_s * 1e6:.1f}" if o.time_s else "", launch)
        console.print(t)

        # 2. Listing 1, Table 1 -------------------------------------------------------------

        table1 = {
            "M1": "A=G0 B=S C=S D=S E=S", "M2": "A=G1 B=G0 C=S D=G0 E=S",
            "M3": "A=S B=W0 C=L0 D=W0 E=L0", "M4": "A=W0 B=L0 C=S D=L0 E=S",
            "M5": "A=W0 B=L0 C=S D=L0 E=V", "M6": "A=W0 B=L0 C=V D=S E=L0",
        }
        p1 = problem(cc22_listing1(), fusion="free")
        s1 = {"I": 8, "J": 16, "K": 16}
        x1 = rng.standard_normal((8, 16, 16)).astype(np.float32)
        ref1 = evaluate(p1.program, {"input": x1})
        t = Table(title="CC'22 Table 1 on Listing 1 (I=8, J=16, K=16)")
        t.add_column("", no_wrap=True)
        t.add_column("mapping", no_wrap=True)
        t.add_column("constraints", no_wrap=True)
        t.add_column("on the device", no_wrap=True)
        for name, text in table1.items():
            m = MapCodes.parse(text)
            viol = p1.check(m)
            if viol:
                rules = "\n".join(sorted({c.rule for c in viol}))  # one per line, whole
                t.add_row(name, _codes(m), f"[yellow]invalid:\n{rules}[/yellow]", "not run")
                continue
            _, o = _build_and_run(p1, m, s1, {"input": x1}, ref1)
            judge(o, f"Table 1 {name}", required=True)
            t.add_row(name, _codes(m), "[green]valid[/green]", _outcome_cell(o))
        console.print(t)

        # 3. A program written plainly: vectorised and parallelised by the search ---------
        _plain(console, judge, refused, quick, budget)

        # 4. Convolution ------------------------------------------------------------------
        layer = (ConvLayer("17/8", C=32, H=14, W=14, M=32) if quick
                 else ConvLayer("17/4", C=64, H=28, W=28, M=64))
        xs = rng.standard_normal((layer.H, layer.W, layer.C)).astype(np.float32)
        ws = rng.standard_normal((layer.M, layer.K, layer.K, layer.C)).astype(np.float32)
        ref_c = conv2d_reference(xs, ws, layer.S, layer.P)
        conv_in = {"inputData": xs, "kernelsWeights": ws}
        tol = reduction_tolerance(ref_c)
        pipe = gpgpu20_conv_pipeline()
        hand = conv_stage_mappings(pipe)
        tuning = paper_like_tuning(layer)
        t = Table(title=f"GPGPU'20 convolution pipeline, VGG-16 layer {layer.name} "
                        f"({layer.C}x{layer.H}x{layer.W}, {layer.M} kernels 3x3, "
                        f"{layer.flops / 1e6:.1f} MFLOP)")
        t.add_column("candidate (partial convolution)", overflow="fold")
        t.add_column("outcome", no_wrap=True)
        for col in ("ms", "GFLOP/s", "KiB"):
            t.add_column(col, justify="right", no_wrap=True)

        def row(label, o, required=False):
            judge(o, label, required)
            mem = o.memory.get("global_total") if o.memory else None
            t.add_row(escape(label), _outcome_cell(o),
                      f"{o.time_s * 1e3:.2f}" if o.time_s else "",
                      f"{o.gflops:.2f}" if o.gflops else "",
                      f"{mem / 1024:.0f}" if mem else "")

        o = pool.evaluate_candidate(
            functools.partial(build_pipeline, pipe, hand, {**layer.sizes(), **tuning},
                              flops=layer.flops, device=device),
            conv_in, ref_c, timeout_s=120, repeats=3, flops=layer.flops, **tol)
        row(f"hand mapping {_short(hand['partial'])}; "
            + " ".join(f"{k}={v}" for k, v in tuning.items()), o, required=True)
        # the same mapping with contiguous reads instead of the GPU coalescing reorder and
        # float8 vectors: the layout a CPU wants (see docs/codegen.md)
        cpu_tuning = paper_like_tuning(layer, v=8)
        o = pool.evaluate_candidate(
            functools.partial(build_pipeline, gpgpu20_conv_pipeline(coalesce=False), hand,
                              {**layer.sizes(), **cpu_tuning}, flops=layer.flops,
                              device=device),
            conv_in, ref_c, timeout_s=120, repeats=3, flops=layer.flops, **tol)
        row("hand mapping, contiguous layout (coalesce=False); "
            + " ".join(f"{k}={v}" for k, v in cpu_tuning.items()), o, required=True)
        # the hand-written register-tiled kernel, and the library's default search (the
        # model strategy: prior, learned model, local search, early cut) for a short time
        from experiments.handwritten import hand_program

        try:
            hprog, hlabel = hand_program(layer)
            o = pool.evaluate(hprog, conv_in, ref_c, timeout_s=120, repeats=3,
                              flops=layer.flops, **tol)
            row(hlabel + " (baseline)", o, required=True)
        except ValueError as e:  # a layer the hand-written kernel cannot take
            console.print(f"no hand-written kernel for this layer: {escape(str(e))}")
        if refused:  # the main job has failed already: say so without the search's minute
            console.print(t)
            console.print("the default search is skipped: a required candidate failed")
            return _verdict(console, bad, refused, slow, t_start)
        # what `mapper explore conv` does: both vectorisations where the budget allows
        tasks = conv_variants(layer)
        conv_budget = budget or ("25s" if quick else "75s")
        vr = explore_variants(tasks, budget=conv_budget, pool=pool)
        res, task = vr.results, tasks[vr.chosen]
        if vr.probes:
            console.print(vr.summary())
        console.print(f"partial convolution ({vr.chosen} vectorised): "
                      f"{len(task.joint().mappings)} valid mappings; "
                      f"the default search (`mapper explore conv`) for {conv_budget}: "
                      f"{res.evaluated} candidates evaluated "
                      f"({', '.join(f'{k} {v}' for k, v in res.counts.most_common())})")
        for r in res.records:  # a valid candidate that fails is a bug, whoever proposed it
            if r.status in ("wrong-result", "crash", "compile-error"):
                judge(_outcome_of(r), f"search: {_short(r.mapping)}; {r.tuning}",
                      required=False)
        final = res.final
        ranked = sorted((r for r in res.records if r.ok), key=lambda r: -(r.gflops or 0.0))[:4]
        for r in ranked:
            label = ("search, re-timed winner: " if final is not None
                     and r.key == final.key else "search: ") + \
                f"{_short(r.mapping)}; {r.tuning}"
            row(label, _outcome_of(r))
        if final is None:
            refused.append("the default search found no candidate that runs ok in "
                           f"{conv_budget}")
        else:
            rt = res.retimed.get(final.key)
            if rt and rt.gflops:
                console.print(f"search winner re-timed ({rt.n} runs, interleaved with the "
                              f"next best): median {rt.gflops:.2f} GFLOP/s")
        console.print(t)

    return _verdict(console, bad, refused, slow, t_start)


def _plain(console: Console, judge, refused: list[str], quick: bool,
           budget: str | None = None) -> None:
    """The separable blur as written (no asVector, no split) run with its rows in parallel
    and everything else scalar, then what the default search makes of it in a short run:
    maps and reductions in vector lanes (docs/mapping.md, code V)."""
    from mapper.api import problem
    from mapper.explore import explore

    path = os.path.join(ROOT, "examples", "blur_separable.lift")
    n = 256 if quick else 1024
    sizes = {"H": n, "W": n + 2}
    p = problem(path)
    scalar = "A=G0 B=S C=G0 D=S"
    r = p.run(scalar, sizes)
    judge(r, f"separable blur {scalar}", True)
    budget = budget or ("15s" if quick else "30s")
    res = explore(path, sizes, budget=budget)
    final, win = res.final, res.final_retimed
    t = Table(title=f"The separable blur written plainly (examples/blur_separable.lift), "
                    f"{n}x{n + 2}: as written, and the default search for {budget}")
    t.add_column("candidate", overflow="fold")
    t.add_column("outcome", no_wrap=True)
    t.add_column("ms", justify="right", no_wrap=True)
    t.add_column("GFLOP/s", justify="right", no_wrap=True)
    t.add_row(f"rows in parallel, scalar: {scalar}", r.label,
              f"{r.time_s * 1e3:.3f}" if r.time_s else "",
              f"{r.gflops:.2f}" if r.gflops else "")
    if final is None:
        refused.append(f"the default search found no kernel for the separable blur in {budget}")
    else:
        med = win.median_s if win else final.time_s
        t.add_row(f"search ({res.evaluated} candidates), re-timed winner: {final.mapping}"
                  + (f"; {final.tuning}" if len(final.tuning) else ""), "ok",
                  f"{med * 1e3:.3f}" if med else "",
                  f"{win.gflops:.2f}" if win and win.gflops else "")
    console.print(t)
    found = (win.median_s if win else final.time_s) if final is not None else None
    if found and r.time_s:
        console.print(f"the search's kernel runs {r.time_s / found:.1f}x as fast as the scalar "
                      "mapping")


def _verdict(console: Console, bad: Counter, refused: list[str], slow: list[str],
             t_start: float) -> int:
    """Prints the demo's verdict; 0 when nothing failed, else 1."""
    problems = sum(bad.values())
    took = f"done in {time.perf_counter() - t_start:.0f} s: "
    if slow:
        console.print(f"{len(slow)} sampled candidate(s) stopped by the time limit (too slow "
                      "to finish, not a wrong result): " + "; ".join(escape(x) for x in slow))
    if not problems and not refused:
        console.print(took + "[green]the required candidates (Listing 3, Table 1, the plain "
                      "blur, the hand-mapped convolution) ran ok; every other candidate "
                      "computed the right result or was refused with a typed reason[/green]")
        return 0
    if problems:
        console.print(took + f"[red]{problems} valid candidate(s) failed (a bug)[/red]")
    for reason in refused:
        console.print(f"[red]FAILED: required candidate not ok: {escape(reason)}[/red]")
    return 1


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--budget", metavar="B", help="each search's budget: a number of "
                    "candidates (8) or a time (20s); default 15s and 25s with --quick, else "
                    "30s and 75s")
    args = ap.parse_args(argv)
    if args.budget is not None:
        from mapper.explore import BudgetError, parse_budget

        try:
            parse_budget(args.budget)
        except BudgetError as e:
            ap.error(str(e))
    try:
        return run_demo(quick=args.quick, budget=args.budget)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
