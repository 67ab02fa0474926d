"""Time to build and count the joint space (mappings x tuning), to sample it and to lower one
sample, on the path ``mapper explore`` takes, for this checkout and others (e.g. an older
commit), interleaved in one run.

What is timed, per task: the tasks ``mapper explore conv --layer L`` explores (one per
convolution variant, ``mapper.explore.task.conv_variants``) and ``mapper explore FILE
--sizes ...`` for each ``--plain`` program (``Task.from_program``, one per tiling variant):

* ``build+count``: ``task.joint(device)`` (mapping constraints generated and solved) and
  ``joint.count()`` (every valid mapping's tuning space built and counted), as an
  exploration does before its first candidate; the device is the live OpenCL device's
  description by default, as the evaluator's worker reports it;
* ``sample``: ``joint.sample`` per candidate (``--samples`` of them);
* ``lower``: ``task.lower_fn(mapping, tuning)()`` on ``--lowerings`` of the samples: the
  call an exploration's worker times as a record's ``lower_s`` (``codegen.worker``), i.e.
  the mapping checked and applied, then ``codegen.lower.lower`` (for the convolution, the
  whole four-stage pipeline). A refused candidate is timed too; a bug (a ``TypeError``,
  ``AttributeError``, ``NameError`` or ``KeyError``) stops the script.

Each measurement runs in a fresh Python process with the checkout first on ``sys.path``
(so no import cache is shared); rounds alternate between checkouts and medians over rounds
are reported (lowering: the median over candidates of each round's median).

    python -m experiments.bench_joint_space --layers 7,19 --rounds 3
    git worktree add /tmp/old 28cb5fe
    python -m experiments.bench_joint_space --layers 7,19 --rounds 3 --checkout /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from experiments.machine import cpu_model, save_json
from experiments.options import add_json, add_rounds, add_samples

DEFAULT_PLAIN = "examples/matmul_plain.lift:M=1024,N=1024,K=1024"

# argv: checkout, "conv" or "plain", the layer (19, 19/2) or FILE:SIZES, samples,
# lowerings, device spec ("" for the live default device), the convolution's variants
# (comma-separated; "" for all)
_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from mapper.explore.task import Task
from codegen.target import resolve

kind, what, k, n_low = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
device = resolve(sys.argv[6] or None)
if kind == "conv":
    try:
        from ir.conv_layer import parse_layer
    except ImportError:  # an older checkout: the VGG-16 table in experiments/, or in ir.programs
        try:
            from experiments.vgg16 import parse_layer
        except ImportError:
            from ir.programs import vgg16_layer as parse_layer
    try:
        from ir.programs import CONV_VECTORISE
    except ImportError:
        CONV_VECTORISE = ("window",)
    layer = parse_layer(what)
    tasks = {v: Task.conv_layer(layer, **({} if v == "window" else {"vectorise": v}))
             for v in (sys.argv[7].split(",") if sys.argv[7] else CONV_VECTORISE)}
else:
    from ir.syntax import parse_file
    path, _, text = what.partition(":")
    sizes = {a: int(b) for a, b in (kv.split("=") for kv in text.split(",") if kv)}
    prog = parse_file(path)
    try:
        from ir.tiling import tiling_variants
        progs = tiling_variants(prog)
    except ImportError:
        progs = {"unfused": prog}
    # the reference is not needed to lower: skip the interpreter's run at full size
    tasks = {v: Task.from_program(p, sizes, reference=np.zeros(1)) for v, p in progs.items()}
out = {}
for v, task in tasks.items():
    t0 = time.perf_counter()
    js = task.joint(device)
    n = js.count()
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    cands = js.sample(k, seed=1)
    sample = (time.perf_counter() - t0) / max(1, len(cands))
    lows, refused = [], []
    for m, cfg in cands[:n_low]:
        fn = task.lower_fn(m, cfg)
        t0 = time.perf_counter()
        try:  # a refused candidate is timed too; the checkouts' error types differ
            fn()
        except Exception as e:  # counted and named below: a bug must not pass for a refusal
            refused.append(type(e).__name__)
        lows.append(time.perf_counter() - t0)
    bugs = [x for x in refused if x in ("TypeError", "AttributeError", "NameError", "KeyError")]
    if bugs:
        raise SystemExit(f"{v}: lowering raised {bugs[0]} on {len(bugs)} of {len(lows)} "
                         "candidates")
    lows.sort()
    out[v] = {"count": n, "mappings": len(js.mappings), "build_s": build,
              "sample_us": sample * 1e6,
              "lower_ms": 1e3 * lows[len(lows) // 2] if lows else None,
              "lowered": len(lows), "refused": len(refused), "device": device.name}
print(json.dumps(out))
"""


def measure(checkout: str, kind: str, what: str, samples: int, lowerings: int,
            device: str, variants: str) -> dict:
    """One measurement in a fresh process: {variant: figures}."""
    out = subprocess.run([sys.executable, "-c", _CHILD, checkout, kind, what, str(samples),
                          str(lowerings), device, variants], capture_output=True, text=True,
                         timeout=3600, cwd=checkout)
    if out.returncode:
        lines = out.stderr.strip().splitlines() or ["(no output)"]
        raise SystemExit(f"{checkout} ({kind} {what}): {lines[-1]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(rounds: list[dict], key: str) -> float | None:
    xs = [r[key] for r in rounds if r[key] is not None]
    return statistics.median(xs) if xs else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default="7,19",
                    help="VGG-16 layers, comma-separated; 19/2 halves H and W (default 7,19)")
    ap.add_argument("--plain", action="append", default=None, metavar="FILE:SIZES",
                    help=f"a plain program and its sizes, repeatable (default {DEFAULT_PLAIN}; "
                    "'' for none)")
    add_rounds(ap, 3)
    add_samples(ap, 1000, "joint-space candidates sampled per task")
    ap.add_argument("--lowerings", type=int, default=20,
                    help="of the samples, how many are lowered and timed (default 20)")
    ap.add_argument("--device", default="",
                    help="device description: a preset (pocl-cpu, h100), a JSON file or an "
                    "OpenCL spec (default: the live default device, as mapper explore)")
    ap.add_argument("--vectorise", default="", metavar="VARIANTS",
                    help="the convolution's variants, comma-separated: window, kernels "
                    "(default: all, as mapper explore conv)")
    ap.add_argument("--checkout", action="append", default=[],
                    help="another checkout to compare (repeatable)")
    add_json(ap)
    args = ap.parse_args(argv)
    if args.lowerings < 1:
        ap.error("--lowerings must be at least 1")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    checkouts = [here, *[os.path.abspath(c) for c in args.checkout]]
    for c in checkouts:
        if not os.path.isfile(os.path.join(c, "mapper", "tuning.py")):
            ap.error(f"{c} is not a liftmap checkout")
    plain = [p for p in (args.plain if args.plain is not None else [DEFAULT_PLAIN]) if p]
    jobs = [("conv", la.strip()) for la in args.layers.split(",") if la.strip()]
    jobs += [("plain", p if os.path.isabs(p) else os.path.join(here, p)) for p in plain]
    print(f"machine: {cpu_model()}; {args.rounds} interleaved rounds, medians; the lowering "
          f"of {args.lowerings} samples per task (task.lower_fn, as an exploration's worker "
          "times it)")
    print("| checkout | task | variant | mappings | candidates | build+count s | sample us | "
          "lower ms | refused |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    for kind, what in jobs:
        runs: dict[str, list[dict]] = {c: [] for c in checkouts}
        for _ in range(args.rounds):
            for c in checkouts:
                runs[c].append(measure(c, kind, what, args.samples, args.lowerings,
                                       args.device, args.vectorise))
        label = what if kind == "conv" else os.path.relpath(what, here)
        for c in checkouts:
            name = "this" if c == here else os.path.basename(c)
            for v in runs[c][0]:
                rs = [r[v] for r in runs[c]]
                med = {k: _median(rs, k) for k in ("build_s", "sample_us", "lower_ms")}
                low = "-" if med["lower_ms"] is None else f"{med['lower_ms']:.1f}"
                print(f"| {name} | {label} | {v} | {rs[0]['mappings']} | {rs[0]['count']:,} | "
                      f"{med['build_s']:.2f} | {med['sample_us']:.0f} | {low} | "
                      f"{rs[0]['refused']}/{rs[0]['lowered']} |", flush=True)
                rows.append({"checkout": c, "task": label, "variant": v, **rs[0], **med,
                             "rounds": len(rs)})
    save_json(args.json, {"machine": cpu_model(), "command": sys.argv, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
