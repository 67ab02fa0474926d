"""GPGPU'20's Listing 3 as written against the convolution pipeline on the same layer, each
explored by the default search, then both answers timed again side by side (issue 44's bar:
Listing 3 at least 0.8x).

    python -m experiments.bench_listing3 --layer 19 --budget 5m
    python -m experiments.bench_listing3 --sizes C=256,H=14,W=14,M=256 --budget 5m

Listing 3 (``examples/gpgpu20_conv_highlevel.lift``, its biases zero-cost beside the
reduction) is explored as ``mapper explore FILE --sizes ...`` explores it
(``mapper.explore.program_variants``: the program as written and its input layouts,
probed, the fastest explored); the pipeline as ``mapper explore conv --algorithm direct``
does (``conv_variants(winograd=False)``: its two vectorisations; Winograd computes another
algorithm, and Listing 3 is a direct convolution). Each answer is the run's end-of-run
re-timed winner. Then ``--rounds`` interleaved rounds time both (``retime_repeats`` runs a
round, after ``--settle`` idle seconds) on the search's own evaluation path, checked against
each task's reference every round. GFLOP/s count the layer's direct-convolution FLOPs for
both. The machine and the load are printed; ``--json`` keeps every timed run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from experiments.machine import cpu_model, save_json
from experiments.options import add_interleaving, add_json

LISTING3 = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples", "gpgpu20_conv_highlevel.lift")


def listing3_sizes(layer: Any) -> dict[str, int]:
    """Listing 3's sizes for a ``ConvLayer`` (square kernels, padding and strides)."""
    return {"H": layer.H, "W": layer.W, "C": layer.C, "M": layer.M, "KH": layer.K,
            "KW": layer.K, "padT": layer.P, "padB": layer.P, "padL": layer.P,
            "padR": layer.P, "strideY": layer.S, "strideX": layer.S}


def _explore(tasks: dict, budget: str, store: str) -> dict[str, Any]:
    """``tasks`` explored by the default search (their first variant's store ``store``):
    the chosen variant's task, the answer's record, its re-timed median, the run's counts."""
    from mapper.explore.variants import explore_variants, variant_store

    first = next(iter(tasks))
    stores = {n: variant_store(store, n, n == first) for n in tasks}
    t0 = time.time()
    vr = explore_variants(tasks, budget=budget, stores=stores)
    res = vr.results
    win = res.final_retimed
    return {"task": tasks[vr.chosen], "variant": vr.chosen, "record": res.final,
            "retimed_s": win.median_s if win is not None else None,
            "evaluated": res.evaluated + sum(r.evaluated for n, r in vr.probes.items()
                                             if n != vr.chosen),
            "explore_s": time.time() - t0}


def bench(layer: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Both explorations on ``layer``, then their answers timed interleaved."""
    from codegen.worker import WorkerPool
    from experiments.baselines import RunFailed, fastest_round_s, interleave, kernel_times
    from experiments.bench_search import load
    from ir.syntax import parse_file
    from mapper.explore.run import retime_repeats
    from mapper.explore.task import conv_variants, program_variants

    os.makedirs(args.store_dir, exist_ok=True)
    stem = os.path.join(args.store_dir, f"{layer.name.replace(',', '_')}-{layer.C}x{layer.H}x"
                        f"{layer.W}x{layer.M}k{layer.K}s{layer.S}p{layer.P}")
    row: dict[str, Any] = {"layer": layer.name, "shape": layer.sizes(), "budget": args.budget,
                           "load_before": load()}
    found = {
        "Listing 3": _explore(program_variants(parse_file(LISTING3), listing3_sizes(layer),
                                               name="gpgpu20_conv_highlevel.lift"),
                              args.budget, stem + "-listing3.sqlite"),
        "conv": _explore(conv_variants(layer, winograd=False), args.budget,
                         stem + "-conv.sqlite")}
    runs = {}
    with WorkerPool() as pool:
        for name, f in found.items():
            rec = f["record"]
            row[name] = {"variant": f["variant"], "evaluated": f["evaluated"],
                         "explore_s": round(f["explore_s"], 1)}
            if rec is None:
                row["error"] = f"{name}: the search found no kernel that runs ok"
                return row
            row[name]["answer"] = f"{rec.short_mapping}; {dict(rec.tuning)}"
            row[name]["run_retimed_gflops"] = layer.flops / f["retimed_s"] / 1e9 \
                if f["retimed_s"] else None
            t = f["task"]
            reps = retime_repeats(f["retimed_s"] or rec.time_s, args.repeats)
            runs[name] = kernel_times(pool, t, t.lower_fn(rec.mapping, rec.tuning),
                                      repeats=reps, flops=t.flops, what=f"{name}'s answer")
        per_round: dict[str, list[list[float]]] = {}
        try:
            times = interleave(runs, args.rounds, args.settle, per_round)
        except RunFailed as e:
            row["error"] = str(e)
            return row
    for name, ts in times.items():
        fr = fastest_round_s(per_round[name])
        row[name].update(median_gflops=layer.flops / statistics.median(ts) / 1e9,
                         round_gflops=layer.flops / fr / 1e9 if fr else None, times_s=ts)
    row["ratio"] = row["Listing 3"]["median_gflops"] / row["conv"]["median_gflops"]
    row["load_after"] = load()
    return row


def main(argv: list[str] | None = None) -> int:
    from experiments.bench_search import load, parse_shapes
    from ir.conv_layer import vgg16_layer
    from ir.errors import LiftmapError

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layer", default="19", help="a VGG-16 layer (default 19)")
    ap.add_argument("--sizes", help="another shape: C=..,H=..,W=..,M=..[,K,S,P] (replaces "
                    "--layer)")
    ap.add_argument("--budget", default="5m", help="each exploration's budget (default 5m)")
    ap.add_argument("--store-dir", default="results/listing3")
    add_interleaving(ap, rounds=7, repeats=5, settle=0.3)
    add_json(ap)
    args = ap.parse_args(argv)
    try:
        layers = parse_shapes(args.sizes) if args.sizes else [vgg16_layer(args.layer)]
    except (ValueError, LiftmapError) as e:  # a bad shape or layer: one line, status 2
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"machine: {cpu_model()}; load {load()}", flush=True)
    rows = []
    status = 0
    for layer in layers:
        r = bench(layer, args)
        rows.append(r)
        save_json(args.json, {"machine": cpu_model(), "rows": rows})
        if "error" in r:
            print(f"layer {r['layer']}: {r['error']}", flush=True)
            status = 1
            continue
        lst, cv = r["Listing 3"], r["conv"]
        print(f"layer {r['layer']} ({layer.C}->{layer.M}, {layer.H}x{layer.W}, K={layer.K} "
              f"S={layer.S}), {args.budget} each; GFLOP/s, median of {args.rounds} "
              f"interleaved rounds:", flush=True)
        print("| program | variant | answer | evaluated | re-timed by its run | median | "
              "fastest round |")
        print("|---|---|---|---:|---:|---:|---:|")
        for name, x in (("Listing 3 (mapper explore FILE)", lst),
                        ("conv pipeline (mapper explore conv --algorithm direct)", cv)):
            rt = x.get("run_retimed_gflops")
            print(f"| {name} | {x['variant']} | `{x['answer']}` | {x['evaluated']} | "
                  f"{rt or 0:.1f} | {x['median_gflops']:.1f} | {x['round_gflops'] or 0:.1f} |")
        print(f"Listing 3 / conv: {r['ratio']:.2f}x (medians); load {r['load_before']} -> "
              f"{r['load_after']}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
