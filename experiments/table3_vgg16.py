"""GPGPU'20 Table 3 on this machine: the nine unique VGG-16 layers, the generated pipeline
against PyTorch conv2d, numpy im2col and the hand-written OpenCL kernel (GFLOP/s and device
memory, each layer's implementations measured in the same run).

Runs ``experiments.bench_conv`` once per layer, one after the other (never two timed things
at once), with the generated pipeline's per-layer flags below (the CPU layout: contiguous
chunks, float vectors; the best values found so far for layers 7, 17, 19, the defaults of
``mapper.candidates.paper_like_tuning`` elsewhere), and writes a CSV and a Markdown table.

    python -m experiments.table3_vgg16 [--layers 24,19] [--csv docs/figures/table3-vgg16.csv]
    python -m experiments.table3_vgg16 --layers 24 --scale 0.5 --rounds 1 --repeats 1 \
        --settle 0                                          # a smoke run: a smaller layer
    python -m experiments.table3_vgg16 --from-logs /tmp      # re-read t3-<layer>.log files
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys

from experiments.options import add_interleaving, ranged

# the generated pipeline's flags per layer (bench_conv options)
FLAGS: dict[str, list[str]] = {
    "0": ["--v", "1"],  # C*K*K = 27: no vector width above 1 divides it
    "2": ["--v", "16"],
    "5": ["--v", "16"],
    "7": ["--omega", "1152", "--v", "16", "--rho", "2"],
    "10": ["--v", "16"],
    "12": ["--v", "16"],
    "17": ["--omega", "2304", "--v", "16"],
    "19": ["--omega", "128", "--v", "8"],
    "24": ["--v", "16"],
}
ROW = re.compile(r"^\| (?P<impl>[^|]+?) \| (?P<gflops>[\d.]+) \| (?P<ms>[\d.]+) \| [^|]+ \| "
                 r"(?P<mib>[\d.]+) \|$")
KINDS = (("generated", "generated"), ("hand-written", "hand-written"),
         ("numpy", "numpy"), ("PyTorch", "pytorch"))


def parse(text: str) -> dict[str, dict[str, float]]:
    """The implementations' GFLOP/s, ms and MiB from one bench_conv output."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        m = ROW.match(line.strip())
        if not m:
            continue
        for prefix, key in KINDS:
            if m["impl"].startswith(prefix) and key not in out:
                out[key] = {"gflops": float(m["gflops"]), "ms": float(m["ms"]),
                            "mib": float(m["mib"])}
    return out


def run_layer(layer: str, rounds: int, repeats: int, settle: float = 0.3,
              scale: float = 1.0) -> str:
    """bench_conv's output for one layer (H and W multiplied by ``scale``)."""
    cmd = [sys.executable, "-m", "experiments.bench_conv", "--layer", layer, "--rounds",
           str(rounds), "--repeats", str(repeats), "--settle", f"{settle:g}", "--scale",
           f"{scale:g}", "--no-coalesce", *FLAGS[layer]]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode:
        raise SystemExit(f"layer {layer}: {p.stderr.strip().splitlines()[-1]}")
    return p.stdout


def _cell(g: dict, k: str, f: str = "gflops") -> str:
    v = g[k].get(f)
    return "" if v is None else f"{v:.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default=",".join(FLAGS), help="comma-separated (default all 9)")
    add_interleaving(ap, rounds=3, repeats=3, settle=0.3)
    ap.add_argument("--scale", type=ranged(float, 0.01, 1.0, "a factor"), default=1.0,
                    help="multiply each layer's H and W by this (bench_conv --scale; default 1: "
                    "the layers as in the table)")
    ap.add_argument("--csv", help="write the table here too")
    ap.add_argument("--from-logs", help="read t3-<layer>.log files of an earlier run here")
    args = ap.parse_args(argv)
    layers = [x.strip() for x in args.layers.split(",") if x.strip()]
    bad = [x for x in layers if x not in FLAGS]
    if bad:
        ap.error(f"unknown layer(s) {', '.join(bad)}; the nine unique ones: {', '.join(FLAGS)}")
    rows = []
    skipped: dict[str, None] = {}  # bench_conv's lines on the peers it left out
    if args.scale != 1.0:
        print(f"(each layer's H and W scaled by {args.scale:g}: not the paper's sizes)")
    print("| layer | generated GFLOP/s | hand-written | numpy im2col | PyTorch | generated / "
          "best other | memory MiB: generated / hand-written / numpy / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for layer in layers:
        if args.from_logs:
            with open(os.path.join(args.from_logs, f"t3-{layer}.log")) as f:
                text = f.read()
        else:
            text = run_layer(layer, args.rounds, args.repeats, args.settle, args.scale)
        res = parse(text)
        skipped.update((ln, None) for ln in text.splitlines() if ": skipped: " in ln)
        g = {k: res.get(k, {}) for _, k in KINDS}
        others = [g[k]["gflops"] for k in ("hand-written", "numpy", "pytorch") if g[k]]
        ratio = g["generated"]["gflops"] / max(others) if g["generated"] and others else None
        rows.append({"layer": layer, **{f"{k}_gflops": g[k].get("gflops") for _, k in KINDS},
                     **{f"{k}_mib": g[k].get("mib") for _, k in KINDS},
                     "flags": " ".join(FLAGS[layer])})

        print(f"| {layer} | {_cell(g, 'generated')} | {_cell(g, 'hand-written')} | "
              f"{_cell(g, 'numpy')} | {_cell(g, 'pytorch')} | "
              f"{'' if ratio is None else f'{ratio:.2f}'} | {_cell(g, 'generated', 'mib')} / "
              f"{_cell(g, 'hand-written', 'mib')} / {_cell(g, 'numpy', 'mib')} / "
              f"{_cell(g, 'pytorch', 'mib')} |", flush=True)
    for line in skipped:
        print(line)
    if args.csv:
        os.makedirs(os.path.dirname(args.csv) or ".", exist_ok=True)
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
