"""How well the analytic prior ranks what was measured: for each results store of a
convolution explored with ``mapper explore conv`` (or ``bench_search``), the stored ``ok``
candidates are scored by ``mapper.explore.prior`` and compared with their measured speed.

Per store and per weight of the prior's private-memory term (``--private-weight``, the
library's ``PRIVATE_WEIGHT`` by default): the rank correlation (Spearman) of the prior
with the measured GFLOP/s, and the best and the median measured speed among the prior's
top ``--top`` candidates, as fractions of the store's best. The stores are biased samples
(what a search chose to measure), so the figures compare priors, they do not rate one.

    python -m experiments.prior_recall results/search-zen3/10m-j/*.sqlite \\
        --private-weight 1,0.5,0

``--cache-intensity`` compares values of the cache term's constant
(``prior.CACHE_FLOPS_PER_BYTE``; 0 leaves the term out) the same way; ``--cache`` gives
the core's cache of the machine the stores were measured on and ``--lanes`` its vectors'
float lanes (the stores hold neither).

The shape and the variant are read from the store's name
(``search-<name>-<C>x<H>x<W>x<M>k<K>s<S>p<P>[.<variant>].sqlite``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
from pathlib import Path

NAME = re.compile(r"(\d+)x(\d+)x(\d+)x(\d+)k(\d+)s(\d+)p(\d+)(?:\.(\w+))?\.sqlite$")


def parse_store_name(path: str) -> tuple[dict[str, int], str]:
    """(the layer's sizes, the variant) a store's file name states; ValueError if none."""
    m = NAME.search(Path(path).name)
    if m is None:
        raise ValueError(f"{path}: cannot tell the convolution's shape from the name "
                         f"(expected ...-CxHxWxMkKsSpP[.variant].sqlite)")
    C, H, W, M, K, S, P = (int(g) for g in m.groups()[:7])
    return dict(C=C, H=H, W=W, M=M, K=K, S=S, P=P), m.group(8) or "window"


def _ranks(xs: list[float]) -> list[float]:
    """Ranks from 0, ties given their average rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of ``a`` and ``b`` (0 where either is constant)."""
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    var = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return cov / var if var else 0.0


def recall(path: str, weights: list[float], top: int,
           intensities: list[float] | None = None, cache: int | None = None,
           lanes: int | None = None) -> dict:
    """The prior's figures on one store, per weight (see the module docstring)."""
    from codegen.target import resolve
    from ir.conv_layer import ConvLayer
    from mapper.encoding import MapCodes
    from mapper.explore import prior
    from mapper.explore.store import ResultStore
    from mapper.explore.task import conv_variants

    sizes, variant = parse_store_name(path)
    layer = ConvLayer("x", sizes["C"], sizes["H"], sizes["W"], sizes["M"], K=sizes["K"],
                      S=sizes["S"], P=sizes["P"])
    tasks = conv_variants(layer)
    if variant not in tasks:
        raise ValueError(f"{path}: no variant {variant!r} for this shape "
                         f"(it has {', '.join(tasks)})")
    task, dev = tasks[variant], resolve(None)
    if cache:  # the cache of the machine the store was measured on
        dev = dataclasses.replace(dev, local_mem_size=cache)
    if lanes:  # and its vectors' float lanes
        dev = dataclasses.replace(dev, preferred_vector_width_float=lanes)
    joint = task.joint(dev)
    with ResultStore(path, readonly=True) as st:
        rows = [(r.mapping, r.tuning, r.gflops) for r in st.records()
                if r.ok and r.gflops]
    if len(rows) < 3:
        raise ValueError(f"{path}: {len(rows)} ok candidates, too few to rank")
    feats = []
    for m, t, g in rows:
        tp = joint.tuning(MapCodes.parse(m) if isinstance(m, str) else m)
        tun = json.loads(t) if isinstance(t, str) else dict(t)
        feats.append((prior.feature_values(tp, tun), prior.vector_width(tp, tun),
                      prior.simd_width(tp, tun), float(g)))
    best = max(f[3] for f in feats)
    out: dict = {"store": path, "variant": variant, "n": len(feats), "best": best,
                 "weights": {}}
    saved = prior.PRIVATE_WEIGHT, prior.CACHE_FLOPS_PER_BYTE
    least = task.flops / 2 if task.flops else None
    try:
        for w in weights:
            for c in intensities or [saved[1]]:
                prior.PRIVATE_WEIGHT = w
                prior.CACHE_FLOPS_PER_BYTE = c if c > 0 else 1e-30  # 0: no cache term
                scores = [prior.prior_score(f, wd, dev, least, s) for f, wd, s, _ in feats]
                order = sorted(range(len(feats)), key=lambda i: -scores[i])[:top]
                speeds = [feats[i][3] / best for i in order]
                rho = spearman(scores, [f[3] for f in feats])
                out["weights"][(w, c)] = {"spearman": rho, "top_best": max(speeds),
                                          "top_median": statistics.median(speeds)}
    finally:
        prior.PRIVATE_WEIGHT, prior.CACHE_FLOPS_PER_BYTE = saved
    return out


def main(argv: list[str] | None = None) -> int:
    from mapper.explore.prior import CACHE_FLOPS_PER_BYTE, PRIVATE_WEIGHT

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stores", nargs="+", help="results stores of conv explorations")
    ap.add_argument("--private-weight", default=str(PRIVATE_WEIGHT),
                    help="comma-separated weights of the private-memory term to compare")
    ap.add_argument("--top", type=int, default=10, help="the prior's top candidates judged")
    ap.add_argument("--cache-intensity", default=str(CACHE_FLOPS_PER_BYTE),
                    help="comma-separated values of the cache term's FLOPs per byte per "
                         "vector lane to compare (0: without the term)")
    ap.add_argument("--cache", type=int, default=None, metavar="BYTES",
                    help="a core's cache on the machine the stores were measured on (a "
                         "Zen 3's L2: 524288; default: this device's local memory size)")
    ap.add_argument("--lanes", type=int, default=None,
                    help="the float lanes of that machine's vectors (AVX2: 8; default: this "
                         "device's preferred float vector width)")
    args = ap.parse_args(argv)
    try:
        weights = [float(w) for w in args.private_weight.split(",") if w]
        intensities = [float(c) for c in args.cache_intensity.split(",") if c]
    except ValueError:
        ap.error(f"--private-weight, --cache-intensity: numbers separated by commas, got "
                 f"{args.private_weight!r}, {args.cache_intensity!r}")
    if not weights or not intensities or min(intensities) < 0 or args.top < 1:
        ap.error("--private-weight and --cache-intensity need numbers (>= 0) and --top at "
                 "least 1")
    print("| store | variant | ok | best GFLOP/s | weight | cache FLOP/B | Spearman | "
          "top best | top median |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    bad = 0
    for path in args.stores:
        try:
            r = recall(path, weights, args.top, intensities, args.cache, args.lanes)
        except (ValueError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            bad += 1
            continue
        for (w, c), f in r["weights"].items():
            print(f"| {Path(path).name} | {r['variant']} | {r['n']} | {r['best']:.1f} | "
                  f"{w:g} | {c:g} | {f['spearman']:.2f} | {f['top_best']:.2f} | "
                  f"{f['top_median']:.2f} |")
    return 1 if bad == len(args.stores) else 0


if __name__ == "__main__":
    sys.exit(main())
