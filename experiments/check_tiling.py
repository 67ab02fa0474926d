"""Witness campaign for fusion through tiling (issue 26): sampled mappings of every tiled
pipeline (every memory, every set of stages left unfused, tiles of 2, 3 and 4 that divide
the outputs or not) lowered, run on the OpenCL device and compared with the interpreter.
Any outcome other than ``ok`` or ``rejected`` is a disagreement between the witnesses and
is printed as ``BAD``:

    .venv/bin/python -m experiments.check_tiling
    .venv/bin/python -m experiments.check_tiling --pipelines harris --memories local --tiles 2
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections import Counter

from codegen.runner import Runner
from ir.syntax import parse_file
from ir.tiling import fuse_through_tiling
from mapper.witness import check_program

SIZES = {"blur_separable": ({"H": 13, "W": 11}, "A"),
         "blur_laplacian": ({"H": 15, "W": 13}, "A"),
         "harris": ({"H": 14, "W": 13}, "AC"),
         "conv2_layers": ({"H": 9, "W": 11, "C": 2, "M": 3, "N": 2}, "A")}


MEMORIES = ("local", "private", "global")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipelines", default=",".join(SIZES),
                    help="comma-separated (default: all)")
    ap.add_argument("--memories", default=",".join(MEMORIES),
                    help="the tiles' intermediates' memories (default: all)")
    ap.add_argument("--tiles", default="2,3,4", help="tile sizes (default 2,3,4)")
    ap.add_argument("--limit", type=int, default=8, help="sampled mappings per tiled program "
                    "and tile size (default 8)")
    args = ap.parse_args(argv)
    names = [n for n in args.pipelines.split(",") if n]
    memories = [m for m in args.memories.split(",") if m]
    unknown = [n for n in names if n not in SIZES] + [m for m in memories if m not in MEMORIES]
    if unknown:
        ap.error(f"unknown {', '.join(unknown)}: pipelines {', '.join(SIZES)}; memories "
                 f"{', '.join(MEMORIES)}")
    tiles = [int(t) for t in args.tiles.split(",")]
    r = Runner()
    total: Counter = Counter()
    bad = []
    t0 = time.time()
    for name in names:
        sizes, labels = SIZES[name]
        prog = parse_file(f"examples/{name}.lift")
        cuts: list[tuple[str, ...]] = [()] + [
            c for k in range(1, len(labels) + 1) for c in itertools.combinations(labels, k)]
        for memory in memories:
            for cut in cuts:
                tiled = fuse_through_tiling(prog, memory=memory, unfused=cut)
                for t in tiles:
                    rep = check_program(tiled, {**sizes, "t": t}, r, limit=args.limit,
                                        seed=t * 7 + len(cut), fusion="always")
                    c = Counter(o.status for _, o in rep.outcomes)
                    total.update(c)
                    for m, o in rep.outcomes:
                        if o.status not in ("ok", "rejected"):
                            bad.append((name, memory, cut, t, str(m), o.status,
                                        o.reason[:200]))
                    print(name, memory, cut, t, dict(c), flush=True)
    print("TOTAL", dict(total), f"{time.time() - t0:.0f} s")
    for b in bad:
        print("BAD", b)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
