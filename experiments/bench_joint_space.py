"""Time to build and count the convolution's joint space, to sample it and to lower one
sample, for this checkout and others (e.g. an older commit), interleaved in one run.

Each measurement runs in a fresh Python process with the checkout first on ``sys.path``
(so no import cache is shared); rounds alternate between checkouts and medians are
reported.

    git worktree add /tmp/old 28cb5fe
    python -m experiments.bench_joint_space --layers 7,19 --rounds 3 --checkout /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

from experiments.options import add_rounds, add_samples

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from ir.programs import gpgpu20_conv_pipeline, vgg16_layer
from mapper.tuning import JointSpace
from mapper.candidates import lower_candidate
layer = vgg16_layer(sys.argv[2])
stage = gpgpu20_conv_pipeline().stage("partial").program
t0 = time.perf_counter()
js = JointSpace(stage, layer.sizes(), max_value=2 * layer.H)
n = js.count()
build = time.perf_counter() - t0
k = int(sys.argv[3])
t0 = time.perf_counter()
cands = js.sample(k, seed=1)
sample = (time.perf_counter() - t0) / k
lows, refused = [], []
for m, cfg in cands[:20]:
    t0 = time.perf_counter()
    try:  # a refused candidate is timed too; the checkouts' error types differ
        lower_candidate(js.problem.program, m, js.tuning(m).sizes_for(cfg),
                        fusion=js.problem.fusion)
    except Exception as e:  # counted and named below: a bug must not pass for a refusal
        refused.append(type(e).__name__)
    lows.append(time.perf_counter() - t0)
lows.sort()
bugs = [x for x in refused if x in ("TypeError", "AttributeError", "NameError", "KeyError")]
if bugs:
    raise SystemExit(f"lowering raised {bugs[0]} on {len(bugs)} of {len(lows)} candidates")
print(json.dumps({"count": n, "build_s": build, "sample_us": sample * 1e6,
                  "lower_ms": 1e3 * lows[len(lows) // 2], "refused": len(refused)}))
"""


def measure(checkout: str, layer: str, samples: int) -> dict:
    """One measurement in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _CHILD, checkout, layer, str(samples)],
                         capture_output=True, text=True, timeout=1800, cwd=checkout)
    if out.returncode:
        raise SystemExit(f"{checkout}: {out.stderr.strip().splitlines()[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="7,19")
    add_rounds(ap, 3)
    add_samples(ap, 1000, "joint-space candidates per layer")
    ap.add_argument("--checkout", action="append", default=[],
                    help="another checkout to compare (repeatable)")
    args = ap.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    checkouts = [here, *[os.path.abspath(c) for c in args.checkout]]
    for c in checkouts:
        if not os.path.isfile(os.path.join(c, "mapper", "tuning.py")):
            ap.error(f"{c} is not a liftmap checkout")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"{args.rounds} rounds, medians")
    print("| checkout | layer | candidates | build+count s | sample us | lower ms |")
    print("|---|---|---:|---:|---:|---:|")
    for layer in args.layers.split(","):
        runs: dict[str, list[dict]] = {c: [] for c in checkouts}
        for _ in range(args.rounds):
            for c in checkouts:
                runs[c].append(measure(c, layer.strip(), args.samples))
        for c in checkouts:
            rs = runs[c]
            med = {k: statistics.median(r[k] for r in rs)
                   for k in ("build_s", "sample_us", "lower_ms")}
            name = "this" if c == here else os.path.basename(c)
            print(f"| {name} | {layer} | {rs[0]['count']:,} | {med['build_s']:.2f} | "
                  f"{med['sample_us']:.0f} | {med['lower_ms']:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
