"""Probe verdict and FMA-chain speed of every OpenCL device here, each in a child process.

    python -m experiments.probe_devices [--timeout 60] [--iters 4096] [--json out.json]

For each device: the default-selection probe (``codegen.device_probe.probe_device``, run afresh:
no cached verdict), then a chain of dependent ``fma`` on 8 independent accumulators of
``float`` and of ``float8`` per work-item, timed by OpenCL profiling events (median of 5
after a warm-up launch). A child that aborts or hangs costs only that measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from experiments.machine import save_json

CHAIN = """
kernel void chain(global float* out, const float a, const float b) {
    const int g = get_global_id(0);
    T x0 = (T)(g * 1e-7f), x1 = x0 + 0.001f, x2 = x0 + 0.002f, x3 = x0 + 0.003f;
    T x4 = x0 + 0.004f, x5 = x0 + 0.005f, x6 = x0 + 0.006f, x7 = x0 + 0.007f;
    for (int i = 0; i < ITERS; i++) {
        x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b); x3 = fma(x3, a, b);
        x4 = fma(x4, a, b); x5 = fma(x5, a, b); x6 = fma(x6, a, b); x7 = fma(x7, a, b);
    }
    T s = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7));
    out[g] = SUM;
}
"""

SUMS = {w: " + ".join(f"s.s{i:x}" for i in range(w)) for w in (2, 4, 8, 16)}
SUMS[1] = "s"

# Runs in a child: argv = platform index, device index, width, iterations, global size.
_TIME_CHILD = r"""
import json, statistics, sys, time, warnings
import numpy as np
import pyopencl as cl
pi, di, w, iters, n = (int(a) for a in sys.argv[1:6])
src = sys.stdin.read()
dev = cl.get_platforms()[pi].get_devices()[di]
ctx = cl.Context([dev])
q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    prg = cl.Program(ctx, src).build(options=["-cl-mad-enable", f"-DITERS={iters}"])
out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 4 * n)
k = prg.chain
k.set_args(out, np.float32(0.999), np.float32(0.001))
cl.enqueue_nd_range_kernel(q, k, (n,), (64,)).wait()
first_s = time.perf_counter() - t0
ts = []
for _ in range(5):
    ev = cl.enqueue_nd_range_kernel(q, k, (n,), (64,))
    ev.wait()
    ts.append((ev.profile.end - ev.profile.start) * 1e-9)
res = np.empty(n, np.float32)
cl.enqueue_copy(q, res, out)
flop = 2.0 * w * 8 * iters * n
print(json.dumps({"median_s": statistics.median(ts), "gflops": flop / statistics.median(ts) / 1e9,
                  "build_and_first_launch_s": first_s, "finite": bool(np.isfinite(res).all())}))
"""


def time_chain(pi: int, di: int, width: int, iters: int, n: int, timeout: float) -> dict:
    """GFLOP/s of the FMA chain of ``float{width}`` on device ``di`` of platform ``pi``."""
    t = "float" if width == 1 else f"float{width}"
    src = f"#define T {t}\n#define SUM ({SUMS[width]})\n" + CHAIN
    args = [sys.executable, "-c", _TIME_CHILD, str(pi), str(di), str(width), str(iters), str(n)]
    try:
        r = subprocess.run(args, input=src, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no answer within {timeout:g} s"}
    if r.returncode != 0:
        from codegen.device_probe import _signal_text, _stderr_tail

        what = (_signal_text(r.returncode) if r.returncode < 0
                else f"exit status {r.returncode}")
        return {"error": f"{what}: {_stderr_tail(r.stdout + r.stderr)}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--iters", type=int, default=4096)
    ap.add_argument("--n", type=int, default=8192, help="work-items")
    ap.add_argument("--widths", default="1,8")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)
    os.environ["LIFTMAP_PROBE_CACHE"] = "0"  # measure the probe, not the cache
    from codegen import device as D
    from codegen.device_probe import probe_device
    from codegen.opencl_env import list_devices, list_platforms

    rows = []
    for pi, p in enumerate(list_platforms()):
        pip = D._is_pip_pocl(p)
        for di, d in enumerate(list_devices(p)):
            t0 = time.perf_counter()
            reason = probe_device(d, timeout=a.timeout)
            row = {"platform": D.platform_label(p, pip), "device": d.name.strip(),
                   "probe": reason or "passed", "probe_s": round(time.perf_counter() - t0, 2)}
            print(f"{row['device']} on {row['platform']}: probe {row['probe']} "
                  f"({row['probe_s']} s)", flush=True)
            for w in (int(x) for x in a.widths.split(",")):
                res = time_chain(pi, di, w, a.iters, a.n, a.timeout)
                row[f"float{w if w > 1 else ''}"] = res
                print(f"  float{w if w > 1 else ''} FMA chain: "
                      + (f"{res['gflops']:.1f} GFLOP/s (build+first launch "
                         f"{res['build_and_first_launch_s']:.2f} s)" if "gflops" in res
                         else res["error"]), flush=True)
            rows.append(row)
    print(D.describe_choice())
    save_json(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
