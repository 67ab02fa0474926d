"""Full-size VGG-16 layers through the generated GPGPU'20 pipeline (a script, not a test).

Each layer runs the four generated kernels (pad, partial convolution with the paper's hand
mapping, final sum, crop) with paper-like tuning values on the OpenCL device, and the
result is compared with an independent numpy convolution (float64 im2col + matmul).

    python experiments/validate_vgg.py --layers 7 17 19 [--device NVIDIA]
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np

from codegen.worker import WorkerPool
from experiments.vgg16 import conv_stage_mappings, paper_like_tuning
from ir.conv_layer import vgg16_layer
from ir.programs import gpgpu20_conv_pipeline
from mapper.candidates import build_pipeline, reduction_tolerance


def numpy_conv(x, w, layer) -> np.ndarray:
    """HWC input, MKKC weights -> HWC output, float64 im2col + matmul."""
    p, k, s = layer.P, layer.K, layer.S
    xp = np.pad(x.astype(np.float64), ((p, p), (p, p), (0, 0)))
    oh, ow = layer.out_h, layer.out_w
    cols = np.empty((oh, ow, k, k, layer.C))
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j, :] = xp[i:i + s * (oh - 1) + 1:s, j:j + s * (ow - 1) + 1:s]
    out = cols.reshape(oh * ow, -1) @ w.reshape(layer.M, -1).astype(np.float64).T
    return out.reshape(oh, ow, layer.M).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=["7", "17", "19"])
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    pipe = gpgpu20_conv_pipeline()
    hand = conv_stage_mappings(pipe)
    print("| layer | shape | tuning | outcome | max abs error | tolerance | ms | GFLOP/s "
          "| device memory MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    with WorkerPool(args.device) as pool:
        for name in args.layers:
            layer = vgg16_layer(name)
            rng = np.random.default_rng(int(name.split(",")[0]))
            x = rng.standard_normal((layer.H, layer.W, layer.C)).astype(np.float32)
            w = rng.standard_normal((layer.M, layer.K, layer.K, layer.C)).astype(np.float32)
            t = time.perf_counter()
            ref = numpy_conv(x, w, layer)
            t_ref = time.perf_counter() - t
            tol = reduction_tolerance(ref)
            tuning = paper_like_tuning(layer)
            o = pool.evaluate_candidate(
                functools.partial(build_pipeline, pipe, hand, {**layer.sizes(), **tuning},
                                  flops=layer.flops),
                {"inputData": x, "kernelsWeights": w}, ref, timeout_s=600, repeats=3,
                flops=layer.flops, **tol)
            mem = o.memory.get("global_total", 0) / 2**20 if o.memory else 0
            tun = " ".join(f"{k}={v}" for k, v in tuning.items())
            err = f"{o.max_abs_error:.2g}" if o.max_abs_error is not None else ""
            print(f"| {layer.name} | {layer.C}x{layer.H}x{layer.W}, {layer.M} kernels | {tun} "
                  f"| {o.label} | {err} | {tol['atol']:.2g} "
                  f"| {(o.time_s or 0) * 1e3:.1f} | {(o.gflops or 0):.2f} | {mem:.1f} |"
                  f"  (numpy reference {t_ref:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
