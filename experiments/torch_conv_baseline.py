"""PyTorch conv2d on a VGG-16 layer, on CUDA (cuDNN) when available, else the CPU: the
baseline printed next to the generated kernels' figures (benchmark-only; torch optional).

    python -m experiments.torch_conv_baseline --layer 19 [--scale 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

from experiments.baselines import skipped_peer, torch_available
from ir.conv_layer import vgg16_layer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layer", default="19")
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args(argv)
    if not torch_available():
        print(skipped_peer("PyTorch", "torch"))
        return 0
    import torch

    la = vgg16_layer(args.layer)
    h, w = la.H // args.scale, la.W // args.scale
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(1, la.C, h, w, device=dev)
    k = torch.randn(la.M, la.C, la.K, la.K, device=dev)
    flops = 2 * ((h + 2 * la.P - la.K) // la.S + 1) * ((w + 2 * la.P - la.K) // la.S + 1) \
        * la.M * la.C * la.K * la.K
    times = []
    for i in range(args.repeats + 3):
        if dev == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        torch.nn.functional.conv2d(x, k, stride=la.S, padding=la.P)
        if dev == "cuda":
            torch.cuda.synchronize()
        if i >= 3:
            times.append(time.perf_counter() - t)
    med = statistics.median(times)
    name = torch.cuda.get_device_name() if dev == "cuda" else "CPU"
    print(f"torch {torch.__version__} conv2d on {name}, layer {la.name} {la.C}x{h}x{w}: "
          f"{med * 1e3:.3f} ms, {flops / med / 1e9:.1f} GFLOP/s (median of {args.repeats})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
