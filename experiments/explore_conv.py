"""Exploration efficiency on a VGG-16 layer (CC'22 Fig. 5 style; a script, not a test).

A thin user of ``mapper.explore``: the GPGPU'20 convolution pipeline on a (scaled) VGG-16
layer, the partial-convolution stage explored with a strategy (default ``solver``: a
uniformly random valid mapping, then uniformly random tuning), every candidate recorded in
a resumable results store. The paper's hand mapping with paper-like tuning is measured in
the same worker first, as the baseline. Prints every candidate's outcome, the best
throughput found as a function of time, and the outcome counts.

    python experiments/explore_conv.py --layer 19 --scale 2 --candidates 40 [--device NVIDIA]
    python experiments/explore_conv.py --layer 19 --scale 2 --budget 10m --store results/l19.sqlite
"""

from __future__ import annotations

import argparse
import time

from codegen.worker import WorkerPool
from experiments.vgg16 import conv_stage_mappings, paper_like_tuning
from ir.conv_layer import ConvLayer, vgg16_layer
from mapper.explore import ExploreOptions, Task, explore
from mapper.explore.record import short_mapping


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", default="19")
    ap.add_argument("--scale", type=int, default=1, help="divide H and W by this")
    ap.add_argument("--candidates", type=int, default=40, help="budget in candidates")
    ap.add_argument("--budget", help="budget as candidates or time (10m); overrides "
                    "--candidates")
    ap.add_argument("--strategy", default="solver", help="manual, solver or random")
    ap.add_argument("--store", help="results store (default: in memory)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None, help="OpenCL device spec (LIFTMAP_DEVICE)")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    base = vgg16_layer(args.layer)
    layer = ConvLayer(f"{base.name}/{args.scale}", base.C, base.H // args.scale,
                      base.W // args.scale, base.M, base.K, base.S, base.P)
    task = Task.conv_layer(layer)
    t0 = time.perf_counter()
    js = task.joint()
    tol = task.tolerance
    print(f"tolerance: rtol={tol['rtol']}, atol={tol['atol']:.2g} (1e-5 x max|reference|)")
    print(f"layer {layer.name}: {layer.C}x{layer.H}x{layer.W}, {layer.M} kernels, "
          f"{layer.flops / 1e9:.3f} GFLOP; {len(js.mappings)} valid mappings, "
          f"{js.count():,} candidates (built in {time.perf_counter() - t0:.1f} s)")
    with WorkerPool(args.device) as pool:
        lim = pool.device_info().get("limits", {})
        print(f"device: {lim.get('name')} ({lim.get('platform_version', '')})")
        tuning = paper_like_tuning(layer)
        t = time.perf_counter()
        assert task.stage is not None  # a pipeline task: one stage is explored
        hand = conv_stage_mappings(task.pipeline)[task.stage]
        o = pool.evaluate_candidate(task.lower_fn(hand, tuning),
                                    task.inputs, task.reference, timeout_s=args.timeout,
                                    repeats=3, flops=task.flops, **tol)
        hand_gflops = o.gflops or 0.0
        print(f"hand mapping + paper-like tuning {tuning}: {o.label} "
              f"{hand_gflops:.2f} GFLOP/s ({time.perf_counter() - t:.1f} s)")
        print("\n| # | elapsed (s) | outcome | GFLOP/s | best so far | candidate |")
        print("|---|---|---|---|---|---|")
        start = time.perf_counter()
        best = [0.0]

        def show(rec, res) -> None:
            if rec.ok:
                best[0] = max(best[0], rec.gflops or 0.0)
            lab = rec.label + (" (stored)" if rec.cached else "")
            par = short_mapping({k: v for k, v in rec.mapping.items() if v >= 10})
            print(f"| {res.considered} | {time.perf_counter() - start:.0f} | {lab} | "
                  f"{(rec.gflops or 0):.2f} | {best[0]:.2f} | {par}; {rec.tuning} |",
                  flush=True)

        res = explore(task, strategy=args.strategy, budget=args.budget or args.candidates,
                      store=args.store, pool=pool, on_result=show,
                      options=ExploreOptions.of(seed=args.seed, timeout_s=args.timeout))
    print(f"\n{res.summary()}\nbest {best[0]:.2f} GFLOP/s vs hand mapping {hand_gflops:.2f}")


if __name__ == "__main__":
    main()
