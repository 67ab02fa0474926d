"""Fusion through tiling, measured (issue 26): each image pipeline explored unfused and
tiled (intermediates in local or in private memory), the same budget each, then the found
kernels of every variant re-timed interleaved with scipy.ndimage (one core) and OpenCV
(its threads), checked against the pipeline's reference first, in one run.

Per variant it prints the median and minimum time, GFLOP/s of the unfused program's work
(a tiling's recomputed halo is not counted as work), the compulsory global-memory traffic
of the lowered program (every kernel reads and writes each global buffer it names once:
the unfused pipeline moves its intermediate images through global memory, a tiling does
not) and the GB/s that traffic gives, the tile size the search chose and the redundant
work it costs. Run it on an idle machine (nothing else timed or building):

    .venv/bin/python -m experiments.bench_tiling --size 1024 --budget 2m
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

from experiments.options import add_interleaving, add_json

HALO = {"blur_separable": 2, "blur_laplacian": 4, "harris": 4}


def _pipeline(name: str, x: np.ndarray, weights: dict[str, np.ndarray], corr, sep, box3):
    """The pipeline ``name`` from a library's 2-D correlation ``corr(image, mask)``,
    separable filter ``sep(image, k)`` and 3x3 box sum ``box3(image)`` (same-size
    outputs, cropped to the valid part at the end)."""
    h = HALO[name] // 2
    if name == "blur_separable":
        return lambda: sep(x, weights["k"])[h:-h, h:-h]
    if name == "blur_laplacian":
        return lambda: corr(corr(x, weights["blur"]), weights["lap"])[h:-h, h:-h]

    def harris():
        ix, iy = corr(x, weights["sobelX"]), corr(x, weights["sobelY"])
        sxx, syy, sxy = box3(ix * ix), box3(iy * iy), box3(ix * iy)
        return (sxx * syy - sxy * sxy - 0.04 * (sxx + syy) ** 2)[h:-h, h:-h]

    return harris


def scipy_fn(name: str, x: np.ndarray, weights: dict[str, np.ndarray]):
    """The pipeline in scipy.ndimage (one core), or None without scipy."""
    try:
        from scipy import ndimage  # type: ignore[import-untyped]
    except ImportError:
        return None
    return _pipeline(name, x, weights, corr=ndimage.correlate,
                     sep=lambda a, k: ndimage.correlate1d(ndimage.correlate1d(a, k, axis=1),
                                                          k, axis=0),
                     box3=lambda a: ndimage.uniform_filter(a, 3) * 9)


def opencv_fn(name: str, x: np.ndarray, weights: dict[str, np.ndarray]):
    """The pipeline in OpenCV (``filter2D``/``sepFilter2D``/``boxFilter``, its own
    threads; Harris' products in numpy), or None without OpenCV."""
    try:
        import cv2
    except ImportError:
        return None

    def sep(a, k):
        k = k.astype(np.float32)
        return cv2.sepFilter2D(a, -1, k, k)

    return _pipeline(name, x, weights, corr=lambda a, w: cv2.filter2D(a, -1, w), sep=sep,
                     box3=lambda a: cv2.boxFilter(a, -1, (3, 3), normalize=False))


def traffic_bytes(program) -> int:
    """Compulsory global traffic of a lowered program: each kernel's global buffers once."""
    return sum(program.buffers[a].nbytes for k in program.kernels for a in k.args
               if a in program.buffers and program.buffers[a].space == "global")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pipelines", default="blur_laplacian,harris,blur_separable")
    ap.add_argument("--size", type=int, default=1024, help="output side (a power of two "
                    "keeps many tile sizes)")
    ap.add_argument("--budget", default="2m", help="exploration budget per variant")
    ap.add_argument("--variants", default="unfused,tiled-local,tiled-private",
                    help="which of unfused, tiled-local, tiled-private, tiled-global")
    add_interleaving(ap, rounds=7, repeats=5)
    ap.add_argument("--store-dir", default="results/tiling")
    add_json(ap)
    args = ap.parse_args(argv)

    from codegen.worker import WorkerPool
    from experiments.baselines import skipped_peer
    from experiments.bench_search import load
    from experiments.machine import cpu_model, save_json
    from ir.flops import count_flops
    from ir.syntax import parse_file
    from ir.tiling import fuse_through_tiling
    from mapper.explore import Task, explore

    os.makedirs(args.store_dir, exist_ok=True)
    print(f"machine: {cpu_model()}; load {load()}", flush=True)
    rows = []
    for name in args.pipelines.split(","):
        prog = parse_file(f"examples/{name}.lift")
        side = args.size + HALO[name]
        sizes = {"H": side, "W": side}
        flops = count_flops(prog, sizes)
        variants = {v: prog if v == "unfused" else
                    fuse_through_tiling(prog, memory=v.removeprefix("tiled-"))
                    for v in args.variants.split(",")}
        found = {}
        with WorkerPool() as pool:
            for v, p in variants.items():
                task = Task.from_program(p, sizes, flops=flops, name=f"{name}:{v}")
                t0 = time.perf_counter()
                res = explore(task, budget=args.budget, pool=pool,
                              store=os.path.join(args.store_dir, f"{name}-{v}.sqlite"))
                best = res.final
                if best is None:
                    print(f"{name} {v}: nothing ran ok ({res.counts})", flush=True)
                    continue
                found[v] = (task, best)
                print(f"{name} {v}: {res.evaluated} evaluated in "
                      f"{time.perf_counter() - t0:.0f} s, best {best.gflops or 0:.3g} GFLOP/s "
                      f"stored ({best.mapping.short()} {dict(best.tuning)})", flush=True)
            if not found:
                print(f"{name}: no variant ran ok; nothing to time", flush=True)
                continue
            x = next(iter(found.values()))[0].inputs["inputData"]
            weights = {k: v for k, v in next(iter(found.values()))[0].inputs.items()
                       if k != "inputData"}
            times: dict[str, list[float]] = {v: [] for v in found}
            peers = {k: f for k, f in (("scipy.ndimage", scipy_fn(name, x, weights)),
                                       ("opencv", opencv_fn(name, x, weights)))
                     if f is not None}
            if "opencv" not in peers:
                print(skipped_peer("OpenCV", "cv2"), flush=True)
            for k, f in peers.items():
                times[k] = []
                got, want = f(), task.reference
                if want is not None:
                    np.testing.assert_allclose(got, np.asarray(want).reshape(got.shape),
                                               rtol=1e-3, atol=1e-3 * float(abs(got).max()))
            for _ in range(args.rounds):
                for v, (task, best) in found.items():
                    time.sleep(0.2)
                    o = pool.evaluate_candidate(task.lower_fn(best.mapping, best.tuning),
                                                task.inputs, task.reference, timeout_s=120,
                                                repeats=args.repeats, flops=flops,
                                                **task.tolerance)
                    if o.ok:
                        times[v] += list(o.times_s)
                for k, f in peers.items():
                    time.sleep(0.2)
                    for _ in range(args.repeats):
                        t = time.perf_counter()
                        f()
                        times[k].append(time.perf_counter() - t)
        row: dict = {"pipeline": name, "size": args.size, "flops": flops, "variants": {}}
        for v, ts in times.items():
            if not ts:
                continue
            med = statistics.median(ts)
            entry: dict[str, object] = {"median_ms": med * 1e3, "min_ms": min(ts) * 1e3,
                                        "gflops": flops / med / 1e9}
            if v in found:
                task, best = found[v]
                cp = task.lower_fn(best.mapping, best.tuning)()
                entry.update(traffic_mb=traffic_bytes(cp) / 1e6,
                             gbs=traffic_bytes(cp) / med / 1e9,
                             mapping=best.mapping.short(), tuning=dict(best.tuning),
                             redundancy=count_flops(variants[v], {**sizes, **best.tuning})
                             / flops)
            row["variants"][v] = entry
        rows.append(row)
        base = row["variants"].get("unfused", {}).get("median_ms")
        for v, e in row["variants"].items():
            extra = (f", {e['traffic_mb']:.1f} MB global ({e['gbs']:.1f} GB/s), "
                     f"work x{e['redundancy']:.2f}, {e['mapping']} {e['tuning']}"
                     if "traffic_mb" in e else
                     " (one core)" if v == "scipy.ndimage" else " (its threads)")
            ratio = f", {base / e['median_ms']:.2f}x unfused" if base else ""
            print(f"  {name} {v}: median {e['median_ms']:.3g} ms (min {e['min_ms']:.3g}), "
                  f"{e['gflops']:.3g} GFLOP/s{ratio}{extra}", flush=True)
    print(f"load after: {load()}")
    save_json(args.json, {"machine": cpu_model(), "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
