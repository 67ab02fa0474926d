"""The exploration commands: ``explore``, ``results``, ``plot``."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time

from rich.markup import escape
from rich.table import Table

from mapper.cli.common import (
    CliError,
    console,
    emit_json,
    err_console,
    store_path,
    unfused_stages,
)
from mapper.sizes import check_input_sizes, check_sizes, parse_sizes


def _explore_tasks(args) -> dict:
    """The tasks of ``mapper explore`` by variant name: a ``.lift`` file's (``unfused``,
    and with ``--tiling`` its fusions through tiling, ``tiled-<memory>``), or
    ``conv``'s (the GPGPU'20 convolution pipeline on ``--layer`` or
    ``--sizes``, one task per ``--vectorise`` variant)."""

    if args.file == "conv" and args.tiling not in (None, "none"):
        raise CliError("--tiling goes with a .lift stencil pipeline (conv tiles itself)")
    if args.file == "conv" and args.layout is not None:
        raise CliError("--layout goes with a .lift program (conv chooses its layouts as its "
                       "variants)")
    if args.file == "conv":
        from ir.conv_layer import ConvLayer, ConvPresetError, ConvShapeError, parse_layer

        if args.sizes:
            if args.layer:
                raise CliError("conv takes --sizes or --layer, not both")
            # P=0: no padding; the names and the shape are ConvLayer's to check
            layer = ConvLayer.from_sizes(parse_sizes(args.sizes, minimum=0))
        else:
            text = args.layer or "19/2"
            if not re.fullmatch(r"\w+(/[0-9]{1,4})?", text):
                raise CliError(f"--layer {text!r}: give a VGG-16 layer and an optional scale, "
                               "e.g. 19 or 19/2")
            try:
                layer = parse_layer(text)
            except (ConvPresetError, ConvShapeError) as e:  # a layer or scale it has not
                raise CliError(f"--layer {text!r}: {e}") from None
            layer = dataclasses.replace(layer, name=f"vgg16-{layer.name}")
        if args.flops is not None:
            raise CliError("--flops goes with a .lift program (conv counts its own FLOPs)")
        return _conv_tasks(args, layer)
    if args.algorithm is not None:
        raise CliError("--algorithm goes with the program name conv (the convolution "
                       "pipeline)")
    if args.layer:
        raise CliError("--layer goes with the program name conv (the convolution pipeline)")
    if args.vectorise is not None:
        raise CliError("--vectorise goes with the program name conv (the convolution "
                       "pipeline)")
    if args.layout == "auto" and args.strategy == "manual":
        raise CliError("--layout auto explores variants: a manual mapping names the maps of "
                       "the program as declared (leave --layout out)")
    sizes = parse_sizes(args.sizes)
    import os

    from ir.syntax import parse_file

    prog = parse_file(args.file)
    check_sizes(prog, sizes, args.file)
    check_input_sizes(prog, sizes, args.file, how="with --sizes")
    from mapper.explore.task import program_variants

    # by default a stencil pipeline is explored unfused and fused through tiling, and a
    # program in its worthwhile input layouts too (a manual mapping names the maps of one
    # program: the unfused one as declared unless --tiling names another)
    manual = args.strategy == "manual"
    return program_variants(
        prog, sizes, name=os.path.basename(args.file),
        tiling=args.tiling or ("none" if manual else "auto"),
        layout=args.layout or ("declared" if manual else "auto"),
        unfused=unfused_stages(args), flops=args.flops, fusion=args.fusion,
        heuristics=args.heuristics, max_value=args.max)


def _conv_tasks(args, layer) -> dict:
    """``conv``'s tasks by variant: the direct ones ``--vectorise`` names and Winograd's as
    ``--algorithm`` says (auto: beside the direct ones where each applies, unless
    ``--vectorise`` names one or the strategy is manual)."""
    from ir.winograd import why_not as winograd_why_not
    from mapper.explore.task import (
        WINOGRAD_VARIANTS,
        Task,
        winograd_applies,
        winograd_task,
    )

    algorithm = args.algorithm or "auto"
    opts = dict(fusion=args.fusion, heuristics=args.heuristics)
    tiles = {name: m for m, name in WINOGRAD_VARIANTS.items()}
    if algorithm in tiles:
        m = tiles[algorithm]
        if args.vectorise not in (None, "auto"):
            raise CliError("--vectorise chooses the direct convolution's vectors: it does "
                           f"not go with --algorithm {algorithm}")
        if not winograd_applies(layer, m):
            why = winograd_why_not(layer.K, layer.S, layer.P, layer.H, layer.W, m)
            raise CliError(f"--algorithm {algorithm}: {why}: give --algorithm direct or auto")
        return {algorithm: winograd_task(layer, m=m, **opts)}
    tasks = {v: Task.conv_layer(layer, vectorise=v, **opts) for v in _conv_variant_names(args)}
    if algorithm == "auto" and args.vectorise in (None, "auto") and args.strategy != "manual":
        for m, name in WINOGRAD_VARIANTS.items():
            if winograd_applies(layer, m):
                tasks[name] = winograd_task(layer, m=m, **opts)
    return tasks


def _conv_variant_names(args) -> tuple[str, ...]:
    """The convolution variants ``--vectorise`` asks for (``auto``: both, the window's
    first; a manual mapping: the window's unless named)."""
    from ir.programs import CONV_VECTORISE

    v = args.vectorise or "auto"
    if v == "auto":
        return CONV_VECTORISE[:1] if args.strategy == "manual" else CONV_VECTORISE
    return (v,)


def cmd_explore(args) -> int:
    """``mapper explore``: a dashboard on a terminal (stdout; on stderr with --json/--jsonl
    when only stderr is one), -v: a line per candidate on stderr, --jsonl: a JSON object per
    candidate on stdout, then the summary (text, or JSON with --json/--jsonl; -q: the
    answer alone)."""
    import os

    from rich.live import Live

    from ir.programs import CONV_VECTORISE
    from mapper.explore import ExploreOptions, ResultStore, get_strategy, parse_budget
    from mapper.explore import output as out
    from mapper.explore.display import Dashboard
    from mapper.explore.variants import explore_variants, variant_store

    budget = parse_budget(args.budget)  # user errors first, before any work
    store_path(args.store)
    get_strategy(args.strategy)
    if args.mapping and args.strategy != "manual":
        raise CliError("--mapping goes with --strategy manual")
    if args.strategy == "manual" and not args.mapping:
        raise CliError("--strategy manual needs --mapping, e.g. 'A=W0 B=L0 C=L0 D=S'")
    stem = "conv" if args.file == "conv" else os.path.splitext(os.path.basename(args.file))[0]
    path = store_path(args.store) or os.path.join("results", f"{stem}.sqlite")
    tasks = _explore_tasks(args)  # a bad program or shape leaves no store behind
    # the store is the first variant's; the others' are named after it, whichever are run
    primary = CONV_VECTORISE[0] if args.file == "conv" else "unfused"
    paths = {n: variant_store(path, n, n == primary) or path for n in tasks}
    pool = None
    if args.ray is not None:  # a cluster that cannot start leaves no store behind either
        from mapper.explore.ray_pool import RayPool

        specs = [d.strip() or None for d in args.device.split(",")] if args.device else None
        pool = RayPool(specs, address=args.ray, workers_per_device=args.workers,
                       timeout_s=args.timeout)
        if not args.quiet:
            err_console.print(pool.describe(), markup=False, highlight=False)
    stores: dict[str, ResultStore] = {}
    try:
        for n, pth in paths.items():
            stores[n] = ResultStore(pth)
    except BaseException:
        for st in stores.values():
            st.close()
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

    before = {n: len(st) for n, st in stores.items()}  # rows the stores held already
    try:
        options = ExploreOptions.of(device=args.device, seed=args.seed,
                                    timeout_s=args.timeout, repeats=args.repeats,
                                    cut=args.cut or None, workers=args.workers or 1,
                                    run_budget_s=args.run_budget or None)
        kw = dict(strategy=args.strategy, budget=budget, pool=pool, options=options)
        if args.mapping:
            kw["mapping"] = args.mapping

        def on_phase(name: str, phase: str) -> None:
            if len(tasks) > 1 and args.verbose:
                where = "timing the probes' best kernels again, interleaved" \
                    if phase == "compare" else paths[name]
                sys.stderr.write(f"{phase} {name}: {where}\n")
                sys.stderr.flush()

        if dash_console is not None:
            # JSON on stdout is never captured into a dashboard on stderr
            with Live(dash, console=dash_console, refresh_per_second=4, transient=False,
                      redirect_stdout=dash_console is console):
                vr = explore_variants(tasks, stores=stores, on_phase=on_phase,
                                      on_start=dash.start, on_result=on_result, **kw)
        else:
            vr = explore_variants(tasks, stores=stores, on_phase=on_phase,
                                  on_result=on_result, **kw)
    except KeyboardInterrupt:  # the start-up, or a second Ctrl-C while it wrapped up
        stored = {n: len(st) - before[n] for n, st in stores.items() if len(st) > before[n]}
        if not stored:
            err_console.print("interrupted before the first candidate; nothing was evaluated")
        else:
            where = ", ".join(f"{paths[n]} ({k})" for n, k in stored.items())
            err_console.print(f"interrupted: {sum(stored.values())} candidate(s) of this run "
                              f"are stored in {where}; mapper results STORE shows them, and "
                              f"the same command resumes the exploration", markup=False,
                              highlight=False, soft_wrap=True)
        return 130
    finally:
        for st in stores.values():
            st.close()
        if pool is not None:
            pool.close()
    res, chosen_path = vr.results, paths[vr.chosen]
    too_short = not res.records and res.stopped_by == "time"
    if as_json and not too_short:
        doc = out.summary_json(res, file=args.file, store=chosen_path)
        if len(tasks) > 1:
            doc["variant"] = vr.chosen
            doc["variants"] = out.variants_json(vr)
            doc["comparisons"] = [c.to_json() for c in vr.comparisons]
        emit_json("explore", doc)
    elif args.quiet:
        answer = out.answer_line(res)
        if answer is not None:
            sys.stdout.write(answer + "\n")
        elif not too_short:
            err_console.print("no candidate ran ok", markup=False, highlight=False)
    elif not as_json:
        if vr.probes:
            console.print(vr.summary(), markup=False, highlight=False)
        console.print(res.summary(), markup=False, highlight=False)
        console.print(f"store: {chosen_path} ({res.context.describe()})", markup=False)
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

    from mapper.explore import output as out
    from mapper.explore.display import best_table, counts_table, retimed_table
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
        best, runs, retimed = st.best_records(args.top), st.runs(), st.retimed(args.top)
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
    if retimed:
        a = retimed[0]
        console.print(f"answer: {escape(a.record.short_mapping)}"
                      + (f"; {escape(str(a.record.tuning))}" if a.record.tuning else "")
                      + ": " + (f"{a.gflops:.3g} GFLOP/s, " if a.gflops else "")
                      + f"median {a.median_s * 1e3:.4g} ms of {a.n} re-timed run(s)"
                      + (" after it was chosen" if a.confirmed else "")
                      + (f" and while its run explored ({a.watched} of {a.rounds} rounds)"
                         if a.watched else "")
                      + (f", across {a.span_s:.0f} s" if a.span_s and a.span_s >= 1 else "")
                      + f" (spread {a.min_s * 1e3:.4g}-{(a.max_s or a.min_s) * 1e3:.4g} ms"
                      + (f"; its fastest round's median {a.figure_round_s * 1e3:.4g} ms"
                         if a.figure_round_s is not None and a.rounds and a.rounds > 1
                         else "")
                      + (f"; steady {a.steady_s * 1e3:.4g} ms, the median of its faster "
                         f"half of {a.rounds} rounds"
                         if a.steady_s is not None and a.rounds and a.rounds > 1 else "")
                      + ")",
                      soft_wrap=True)
        console.print(retimed_table(retimed, f"Re-timed at the end of a run: {len(retimed)} "
                                             "candidate(s), fastest round first"))
    elif best:
        console.print("answer: not re-timed (no run re-timed its winners): the best single "
                      "measurement below is one run's time, not a median")
    if best:
        console.print(best_table(best, f"Best {len(best)} candidate(s) by the one "
                                       "measurement each got while exploring"))
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
