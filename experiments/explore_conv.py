"""Exploration efficiency on a VGG-16 layer (CC'22 Fig. 5 style; a script, not a test).

Candidates are drawn uniformly from the joint space of the partial convolution (valid
mapping x valid tuning), lowered together with the pad / final-sum / crop stages and
evaluated in a worker process. The paper's hand mapping with paper-like tuning is
measured in the same run as the baseline. Prints every candidate's outcome, the best
throughput found as a function of time, and the outcome counts.

    python experiments/explore_conv.py --layer 19 --scale 2 --candidates 40 [--device NVIDIA]
"""

from __future__ import annotations

import argparse
import functools
import time
from collections import Counter

import numpy as np

from codegen.worker import WorkerPool
from ir.programs import ConvLayer, conv_partial_stage, gpgpu20_conv_pipeline, vgg16_layer
from mapper.candidates import (
    conv_stage_mappings,
    lower_pipeline,
    paper_like_tuning,
    reduction_tolerance,
)
from mapper.tuning import JointSpace


def reference(x, w, layer: ConvLayer) -> np.ndarray:
    pad = layer.P
    xp = np.pad(x.astype(np.float64), ((pad, pad), (pad, pad), (0, 0)))
    oh, ow = layer.out_h, layer.out_w
    out = np.zeros((oh, ow, layer.M))
    s = layer.S
    for i in range(layer.K):
        for j in range(layer.K):
            patch = xp[i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
            out += patch @ w[:, i, j, :].astype(np.float64).T
    return out.astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", default="19")
    ap.add_argument("--scale", type=int, default=1, help="divide H and W by this")
    ap.add_argument("--candidates", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None, help="OpenCL device spec (LIFTMAP_DEVICE)")
    ap.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args()
    base = vgg16_layer(args.layer)
    layer = ConvLayer(f"{base.name}/{args.scale}", base.C, base.H // args.scale,
                      base.W // args.scale, base.M, base.K, base.S, base.P)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((layer.H, layer.W, layer.C)).astype(np.float32)
    w = rng.standard_normal((layer.M, layer.K, layer.K, layer.C)).astype(np.float32)
    ref = reference(x, w, layer)
    inputs = {"inputData": x, "kernelsWeights": w}
    tol = reduction_tolerance(ref)
    pipe = gpgpu20_conv_pipeline()
    hand = conv_stage_mappings(pipe)
    t0 = time.perf_counter()
    js = JointSpace(conv_partial_stage(), layer.sizes(), max_value=2 * layer.H)
    print(f"tolerance: rtol={tol['rtol']}, atol={tol['atol']:.2g} (1e-5 x max|reference|)")
    print(f"layer {layer.name}: {layer.C}x{layer.H}x{layer.W}, {layer.M} kernels, "
          f"{layer.flops / 1e9:.3f} GFLOP; {len(js.mappings)} valid mappings, "
          f"{js.count():,} candidates (built in {time.perf_counter() - t0:.1f} s)")
    counts: Counter = Counter()
    with WorkerPool(args.device) as pool:
        lim = pool.device_info().get("limits", {})
        print(f"device: {lim.get('name')} ({lim.get('platform_version', '')})")
        tuning = paper_like_tuning(layer)
        t = time.perf_counter()
        o = pool.evaluate_candidate(
            functools.partial(lower_pipeline, pipe, hand, {**layer.sizes(), **tuning},
                              flops=layer.flops),
            inputs, ref, timeout_s=args.timeout, repeats=3, flops=layer.flops, **tol)
        hand_gflops = o.gflops or 0.0
        print(f"hand mapping + paper-like tuning {tuning}: {o.label} "
              f"{hand_gflops:.2f} GFLOP/s ({time.perf_counter() - t:.1f} s)")
        best, start = 0.0, time.perf_counter()
        print("\n| # | elapsed (s) | outcome | GFLOP/s | best so far | candidate |")
        print("|---|---|---|---|---|---|")
        for i, (m, cfg) in enumerate(js.sample(args.candidates, seed=args.seed), 1):
            o = pool.evaluate_candidate(
                functools.partial(lower_pipeline, pipe, dict(hand, partial=dict(m)),
                                  {**layer.sizes(), **cfg}, flops=layer.flops),
                inputs, ref, timeout_s=args.timeout, repeats=3, flops=layer.flops, **tol)
            counts[o.label] += 1
            if o.ok:
                best = max(best, o.gflops or 0)
            par = " ".join(f"{k}={v}" for k, v in m.items() if v >= 10)
            tun = " ".join(f"{k}={v}" for k, v in sorted(cfg.items()))
            print(f"| {i} | {time.perf_counter() - start:.0f} | {o.label} | "
                  f"{(o.gflops or 0):.2f} | {best:.2f} | {par}; {tun} |")
    print(f"\noutcomes: {dict(counts)}; best {best:.2f} GFLOP/s vs hand mapping "
          f"{hand_gflops:.2f}")


if __name__ == "__main__":
    main()
