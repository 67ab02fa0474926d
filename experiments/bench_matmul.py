"""A matrix multiplication written in the text syntax, lowered and timed against numpy.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m experiments.bench_matmul
    python -m experiments.bench_matmul --size 1024 --tunings 4x4x8,4x4x16 --rounds 5

The program (default ``examples/matmul_blocked.lift``: C = A x B with B given transposed,
a bm x bn block of C per work-item, the reduction over K in ``asVector(v)`` chunks) is
parsed, mapped (default ``I=mapGlb(1) J=mapGlb(0)``, every other map sequential) and
lowered by ``codegen.lower`` for each tuning ``bm x bn x v`` of ``--tunings``; each kernel
is judged in a worker process (``codegen.worker``): built, run, checked against a float64
reference (``mapper.candidates.reduction_tolerance``) and timed with OpenCL profiling
events. numpy's float32 ``A @ B`` (OpenBLAS) is timed in the same run; rounds interleave
the implementations (an idle pause and an untimed warm-up before each block); medians.

OpenBLAS reads ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` when it loads: if either is
set, the script runs itself again without them (for this command only), so that numpy
gets OpenBLAS's own choice for this CPU.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time

from experiments.options import add_bench_seed, add_interleaving

_BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PROGRAM = os.path.join(HERE, "examples", "matmul_blocked.lift")
DEFAULT_MAPPING = "I=G1 J=G0 Z1=S Z2=S R1=S R2=S S1=S S2=S"


def parse_tunings(text: str) -> list[dict[str, int]]:
    """``"4x4x8,2x8x16"`` -> ``[{"bm": 4, "bn": 4, "v": 8}, ...]``."""
    out = []
    for part in text.split(","):
        bm, bn, v = (int(x) for x in part.strip().lower().split("x"))
        out.append({"bm": bm, "bn": bn, "v": v})
    return out


def lower_matmul(path: str, mapping: str, sizes: dict[str, int], fusion: str = "free"):
    """The program of ``path`` with ``mapping``, lowered at ``sizes`` (picklable entry point
    for a worker)."""
    from ir.parser import parse_file
    from mapper.candidates import build_candidate

    m, n, k = sizes["M"], sizes["N"], sizes["K"]
    return build_candidate(parse_file(path), mapping, sizes, fusion=fusion,
                           flops=2 * m * n * k)


def main(argv: list[str] | None = None) -> int:
    if any(v in os.environ for v in _BLAS_VARS) and "LIFTMAP_BENCH_REEXEC" not in os.environ:
        env = {k: v for k, v in os.environ.items() if k not in _BLAS_VARS}
        env["LIFTMAP_BENCH_REEXEC"] = "1"
        print(f"(running again without {', '.join(v for v in _BLAS_VARS if v in os.environ)})",
              flush=True)
        given = argv if argv is not None else sys.argv[1:]
        os.execve(sys.executable, [sys.executable, "-m", "experiments.bench_matmul", *given],
                  env)

    import numpy as np

    from codegen.worker import WorkerPool
    from experiments import bench_matmul  # workers unpickle lower_matmul from it, not __main__
    from experiments.machine import cpu_model
    from mapper.candidates import reduction_tolerance

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    ap.add_argument("--program", default=DEFAULT_PROGRAM)
    ap.add_argument("--mapping", default=DEFAULT_MAPPING)
    ap.add_argument("--fusion", default="free", choices=("always", "never", "free"))
    ap.add_argument("--tunings", default="4x4x8,4x4x16,2x8x16,4x8x8",
                    help="bm x bn x v, comma-separated")
    add_interleaving(ap, rounds=5, repeats=3, settle=0.3, settle_help="idle seconds "
                     "before each block (spinning runtime threads sleep)")
    ap.add_argument("--device", default=None, help="OpenCL device spec (LIFTMAP_DEVICE)")
    ap.add_argument("--timeout", type=float, default=300.0)
    add_bench_seed(ap)
    args = ap.parse_args(argv)

    n = args.size
    flops = 2 * n * n * n
    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    bt = np.ascontiguousarray(b.T)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = reduction_tolerance(ref)
    inputs = {"A": a, "Bt": bt}
    load0 = os.getloadavg()[0]
    times: dict[str, list[float]] = {}
    firsts = {}
    with WorkerPool(args.device) as pool:
        info = pool.device_info()
        programs = []
        for t in parse_tunings(args.tunings):
            sizes = {"M": n, "N": n, "K": n, **t}
            label = f"generated, bm={t['bm']} bn={t['bn']} v={t['v']}"
            fn = functools.partial(bench_matmul.lower_matmul, args.program, args.mapping, sizes,
                                   args.fusion)
            o = pool.evaluate_candidate(fn, inputs, ref, timeout_s=args.timeout, repeats=1,
                                        flops=flops, **tol)
            firsts[label] = o
            if not o.ok:
                print(f"{label}: {o.label}: {o.reason}")
                continue
            programs.append((label, fn()))
            times[label] = []
        if not programs:
            return 1
        numpy_label = f"numpy {np.__version__} float32 A @ B"
        c = a @ b
        np.testing.assert_allclose(c, ref, rtol=tol["rtol"], atol=tol["atol"])
        times[numpy_label] = []
        for _ in range(args.rounds):
            for label, prog in programs:
                time.sleep(args.settle)
                o = pool.evaluate(prog, inputs, ref, timeout_s=args.timeout,
                                  repeats=args.repeats, warmup=1, flops=flops, **tol)
                if not o.ok:
                    print(f"{label}: {o.label}: {o.reason}")
                    return 1
                times[label].extend(o.times_s)
            time.sleep(args.settle)
            a @ b  # untimed warm-up, as the OpenCL runs have one
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                a @ b
                times[numpy_label].append(time.perf_counter() - t0)
    load1 = os.getloadavg()[0]

    print(f"# matmul {n} x {n} x {n} float32 ({flops / 1e9:.3f} GFLOP); program "
          f"{os.path.relpath(args.program, HERE)}, mapping {args.mapping} (fusion "
          f"{args.fusion})")
    print(f"machine: {cpu_model()}; OpenCL device: {info['limits']['name']} "
          f"[{info['limits']['platform_version']}]")
    blas = {k: os.environ.get(k) for k in _BLAS_VARS}
    print(f"{args.rounds} interleaved rounds x {args.repeats} timed runs; medians; load "
          f"average {load0:.1f} before, {load1:.1f} after; {', '.join(_BLAS_VARS)}: "
          f"{'unset' if not any(blas.values()) else blas}")
    if max(load0, load1) > 0.5 * len(os.sched_getaffinity(0)):
        print("WARNING: the machine was busy (load average); timings are not representative")
    base = statistics.median(times[numpy_label])
    print()
    print("| implementation | GFLOP/s | median ms | min-max ms | ratio to numpy | max abs error |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, ts in times.items():
        med = statistics.median(ts)
        err = firsts[label].max_abs_error if label in firsts else float(np.abs(c - ref).max())
        print(f"| {label} | {flops / med / 1e9:.1f} | {med * 1e3:.2f} | {min(ts) * 1e3:.2f}-"
              f"{max(ts) * 1e3:.2f} | {base / med:.2f} | {err:.2g} |")
    print()
    print(f"results checked against a float64 reference: rtol {tol['rtol']:g}, "
          f"atol {tol['atol']:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
