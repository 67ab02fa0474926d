"""How many uniformly sampled joint candidates of the convolution the lowering accepts.

For each VGG-16 layer and device description: build and count the joint space (mappings x
tuning) of the GPGPU'20 partial-convolution stage, sample ``--samples`` (mapping, tuning)
candidates uniformly over it, and lower each for that device with every check of the
lowering (no OpenCL device is needed: a saved description such as the ``h100`` preset
works on any machine). Prints the build/count time, the time per sample, the share that
lowers, and every rejection with its reason; ``--csv`` writes one row per (layer, device,
outcome) for ``experiments/figures.py``.

    python -m experiments.lowering_rate --layers 7,17,19 --devices pocl-cpu,h100 --samples 1000
"""

from __future__ import annotations

import argparse
import collections
import csv
import os
import sys
import time

from codegen.errors import LoweringError
from codegen.target import DeviceDescriptionError, resolve
from experiments.options import add_bench_seed, add_samples
from ir.conv_layer import parse_layer
from ir.errors import ConstraintViolation
from ir.programs import gpgpu20_conv_pipeline
from mapper.candidates import build_candidate
from mapper.tuning import JointSpace


def measure(layer_name: str, device_spec: str, samples: int, seed: int,
            show: int = 5) -> tuple[dict, list[tuple[str, str, str]]]:
    """One (layer, device): timings, outcome counts and the rejections (mapping, tuning,
    reason)."""
    device = resolve(device_spec)
    layer = parse_layer(layer_name)
    stage = gpgpu20_conv_pipeline().stage("partial").program
    t0 = time.perf_counter()
    js = JointSpace(stage, layer.sizes(), device=device, max_value=2 * layer.H)
    total = js.count()
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    cands = js.sample(samples, seed=seed)
    t_sample = (time.perf_counter() - t0) / max(1, samples)
    outcomes: collections.Counter = collections.Counter()
    rejected: list[tuple[str, str, str]] = []
    t_lower: list[float] = []
    for i, (mapping, cfg) in enumerate(cands):
        t1 = time.perf_counter()
        try:
            build_candidate(js.problem.program, mapping, js.tuning(mapping).sizes_for(cfg),
                            fusion=js.problem.fusion, heuristics=js.problem.heuristics,
                            device=device)
            outcomes["lowered"] += 1
        except (LoweringError, ConstraintViolation) as e:
            check = getattr(e, "check", "constraint-violation")
            outcomes[f"rejected:{check}"] += 1
            rejected.append((" ".join(f"{k}={v}" for k, v in sorted(mapping.items())),
                             " ".join(f"{k}={v}" for k, v in cfg.items()),
                             f"{check}: {e}"))
        t_lower.append(time.perf_counter() - t1)
        if (i + 1) % 100 == 0:
            print(f"  {layer.name} {device_spec}: {i + 1}/{samples}", file=sys.stderr)
    t_lower.sort()
    return ({"layer": layer.name, "device": device.name, "preset": device_spec,
             "mappings": len(js.mappings), "candidates": total, "build_s": t_build,
             "sample_us": t_sample * 1e6, "lower_ms_median": 1e3 * t_lower[len(t_lower) // 2],
             "samples": samples, "outcomes": dict(outcomes)}, rejected)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="7,17,19", help="VGG-16 layers (comma-separated; "
                    "19/2 halves H and W)")
    ap.add_argument("--devices", default="pocl-cpu,h100",
                    help="presets, JSON descriptions or live OpenCL specs (comma-separated)")
    add_samples(ap, 1000, "joint-space candidates per layer and device")
    add_bench_seed(ap)
    ap.add_argument("--csv", help="write the outcome counts here (e.g. results/lowering-rate.csv)")
    args = ap.parse_args(argv)
    rows = []
    print("| layer | device | mappings | candidates | build+count s | sample us | "
          "lower ms (median) | lowered |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for dev in args.devices.split(","):
        for name in args.layers.split(","):
            try:
                r, rejected = measure(name.strip(), dev.strip(), args.samples, args.seed)
            except (DeviceDescriptionError, ValueError) as e:
                ap.error(str(e))
            rows.append(r)
            ok = r["outcomes"].get("lowered", 0)
            print(f"| {r['layer']} | {dev} | {r['mappings']} | {r['candidates']:,} | "
                  f"{r['build_s']:.2f} | {r['sample_us']:.0f} | {r['lower_ms_median']:.1f} | "
                  f"{ok}/{r['samples']} ({100 * ok / r['samples']:.1f}%) |", flush=True)
            for m, t, why in rejected:
                print(f"    rejected: {m} | {t} | {why.splitlines()[0][:200]}")
    if args.csv:
        os.makedirs(os.path.dirname(args.csv) or ".", exist_ok=True)
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["layer", "device", "total", "lowered", "rejected_reason", "count"])
            for r in rows:
                ok = r["outcomes"].get("lowered", 0)
                for outcome, n in sorted(r["outcomes"].items()):
                    reason = "" if outcome == "lowered" else outcome.split(":", 1)[1]
                    w.writerow([r["layer"], r["preset"], r["samples"], ok, reason, n])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
