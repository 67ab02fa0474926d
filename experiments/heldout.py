"""Held-out search data sets (issue 47): programs the ``model`` strategy's defaults and its
transferred knowledge were never tuned on, explored by the uniform ``solver`` strategy at
full size and stored for replay (``experiments.bench_peers_search``, ``mapper results
--compare``).

    python -m experiments.heldout                          # every set (hours: idle machine)
    python -m experiments.heldout --sets matmul_plain,transpose --budget 1000 --minutes 30
    python -m experiments.heldout --sets row_sums --scale 64 --budget 5 --out /tmp/h  # smoke

Each set (``SETS``) is one program of ``experiments.bench_plain.PROGRAMS`` at its full size
(``--scale`` divides it), or a convolution shape no VGG-16 layer has, in the variant named
(a stencil pipeline's fusion through tiling, the convolution's window vectorisation: the
variant the default search answers with there). ``--budget`` candidates or ``--minutes``
each, whichever ends first (or the whole space, where it is smaller: the row says
``exhausted``), the seed 0, the default early cut (a candidate cut is stored as a
``timeout``, as any strategy would have seen it); nothing re-timed. The stores go to
``--out`` (``results/heldout/<set>.sqlite``, resumed when there), which
``bench_peers_search`` reads by default, as held-out.

The split: these sets are for measuring only. A change to the model strategy, its prior or
its knowledge is chosen on the in-sample stores (``bench_peers_search.IN_SAMPLE``) and
the convolution stores, never on these; a set measured after such a change says so by
its date.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from experiments.machine import cpu_model

# set -> (a bench_plain program or "conv", its variant, the convolution's shape)
SETS: dict[str, tuple[str, str, dict[str, int] | None]] = {
    "matmul_plain": ("matmul_plain", "unfused", None),
    "blur_laplacian": ("blur_laplacian", "tiled-private", None),
    "harris": ("harris", "tiled-private", None),
    "transpose": ("transpose", "unfused", None),
    "row_sums": ("row_sums", "unfused", None),
    # ResNet-18's conv2_x 3x3 (64 -> 64 channels, 56x56): no VGG-16 layer has its shape
    "conv_resnet18_64x56": ("conv", "window", {"C": 64, "H": 56, "W": 56, "M": 64}),
}
OUT = os.path.join("results", "heldout")


def task_of(name: str, scale: int) -> Any:
    """The ``mapper.explore.Task`` of set ``name`` at its sizes divided by ``scale``."""
    from experiments.bench_plain import EX, PROGRAMS, sizes_of
    from ir.conv_layer import ConvLayer
    from ir.flops import FlopsError, count_flops
    from ir.syntax import parse_file
    from ir.tiling import tiling_variants
    from mapper.explore import Task

    program, variant, shape = SETS[name]
    if program == "conv":
        assert shape is not None
        s = {k: (max(1, v // scale) if k in ("H", "W") else v) for k, v in shape.items()}
        layer = ConvLayer(name, s["C"], s["H"], s["W"], s["M"])
        return Task.conv_layer(layer, vectorise=variant, name=f"heldout:{name}")
    sizes = sizes_of(program, scale)
    prog = parse_file(os.path.join(EX, PROGRAMS[program][0]))
    variants = tiling_variants(prog, "auto")
    if variant not in variants:
        raise SystemExit(f"{name}: {program} has no variant {variant} ({', '.join(variants)})")
    flops = None
    if variant != "unfused":  # GFLOP/s of the unfused program's work, as mapper explore
        try:
            flops = count_flops(prog, sizes)
        except FlopsError:
            flops = None
    return Task.from_program(variants[variant], sizes, flops=flops,
                             name=f"heldout:{name}:{variant}")


def record(name: str, out: str, budget: int, minutes: float, scale: int) -> dict[str, Any]:
    """Set ``name`` explored by ``solver`` into ``out/<name>.sqlite``: its row."""
    from mapper.explore import explore
    from mapper.explore.options import ExploreOptions
    from mapper.explore.run import Budget

    os.makedirs(out, exist_ok=True)
    store = os.path.join(out, f"{name}.sqlite")
    task = task_of(name, scale)
    t0 = time.time()
    res = explore(task, strategy="solver", store=store,
                  budget=Budget(candidates=budget, seconds=minutes * 60,
                                text=f"{budget} or {minutes:g}m"),
                  options=ExploreOptions.of(seed=0, retime=0))
    best = res.best
    return {"set": name, "store": store, "sizes": task.sizes,
            "candidates": res.considered, "evaluated": res.evaluated,
            "stopped_by": res.stopped_by, "counts": dict(res.counts),
            "best_gflops": best.gflops if best is not None else None,
            "best_ms": best.time_s * 1e3 if best is not None and best.time_s else None,
            "minutes": round((time.time() - t0) / 60, 1)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated (default: all)")
    ap.add_argument("--budget", type=int, default=1000, help="candidates per set (1000)")
    ap.add_argument("--minutes", type=float, default=40.0, help="at most, per set (40)")
    ap.add_argument("--scale", type=int, default=1, help="divide the sizes (smoke runs)")
    ap.add_argument("--out", default=OUT, help=f"the stores' folder (default {OUT})")
    args = ap.parse_args(argv)
    names = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = [n for n in names if n not in SETS]
    if unknown or not names:
        print(f"error: unknown set(s) {', '.join(unknown) or '(none)'}; the sets: "
              f"{', '.join(SETS)}", file=sys.stderr)
        return 2
    if args.budget < 1 or args.minutes <= 0 or args.scale < 1:
        print("error: --budget and --scale are at least 1, --minutes more than 0",
              file=sys.stderr)
        return 2
    print(f"machine: {cpu_model()}, load {os.getloadavg()[0]:.2f}", flush=True)
    print("| set | sizes | candidates | stopped by | outcomes | best | minutes |")
    print("|---|---|---:|---|---|---:|---:|")
    for name in names:
        r = record(name, args.out, args.budget, args.minutes, args.scale)
        best = "none ran ok" if r["best_ms"] is None else (
            f"{r['best_gflops']:.4g} GFLOP/s, {r['best_ms']:.4g} ms" if r["best_gflops"]
            else f"{r['best_ms']:.4g} ms")
        counts = ", ".join(f"{k} {v}" for k, v in sorted(r["counts"].items()))
        sizes = ",".join(f"{k}={v}" for k, v in r["sizes"].items())
        print(f"| {name} | {sizes} | {r['candidates']} | {r['stopped_by']} | {counts} | "
              f"{best} | {r['minutes']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
