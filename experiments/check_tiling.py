"""Witness campaign for fusion through tiling (issue 26): sampled mappings of every tiled
pipeline (every memory, every set of stages left unfused, tiles of 2, 3 and 4 that divide
the outputs or not) lowered, run on the OpenCL device and compared with the interpreter.
Any outcome other than ``ok`` or ``rejected`` is a disagreement between the witnesses and
is printed as ``BAD``:

    .venv/bin/python -m experiments.check_tiling
"""

from __future__ import annotations

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


def main() -> int:
    r = Runner()
    total: Counter = Counter()
    bad = []
    t0 = time.time()
    for name, (sizes, labels) in SIZES.items():
        prog = parse_file(f"examples/{name}.lift")
        cuts: list[tuple[str, ...]] = [()] + [
            c for k in range(1, len(labels) + 1) for c in itertools.combinations(labels, k)]
        for memory in ("local", "private", "global"):
            for cut in cuts:
                tiled = fuse_through_tiling(prog, memory=memory, unfused=cut)
                for t in (2, 3, 4):
                    rep = check_program(tiled, {**sizes, "t": t}, r, limit=8,
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
