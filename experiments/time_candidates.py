"""Time chosen candidates of one convolution layer against each other, interleaved.

A question about the machine ("do larger tiles pay where the weights outgrow the L2?")
is answered by a few candidates that differ in one parameter, timed in the same process,
round after round (each round: every candidate once, ``--repeats`` runs, checked against
the reference). The medians of the rounds are printed; nothing is stored.

    python -m experiments.time_candidates --layer 24 --variant kernels \\
        --mapping "T=G2 G=S W=S C=G0 S1=S S2=F R1=S R2=S P=S I1=S I2=F" \\
        --tuning kappa=64,omega=576,rho=0,sigma=4,theta=4,v=16 \\
        --tuning kappa=64,omega=576,rho=0,sigma=4,theta=16,v=16 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path


def parse_tuning(text: str) -> dict[str, int]:
    """``kappa=64,omega=576`` -> ``{"kappa": 64, "omega": 576}``."""
    out: dict[str, int] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not value.strip().lstrip("-").isdigit():
            raise ValueError(f"--tuning {text!r}: give NAME=INTEGER pairs separated by commas")
        out[name.strip()] = int(value)
    return out


def main(argv: list[str] | None = None) -> int:
    from experiments.bench_search import parse_shapes
    from experiments.machine import cpu_model
    from ir.conv_layer import parse_layer
    from ir.errors import LiftmapError
    from mapper.encoding import MapCodes
    from mapper.explore import Task
    from mapper.explore.evaluator import Evaluator
    from mapper.explore.store import ResultStore
    from mapper.explore.strategies import Candidate

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layer", required=True, help="a VGG-16 layer, or C=..,H=..,W=..,M=..[,K,S,P]")
    ap.add_argument("--variant", default="window", choices=("window", "kernels"),
                    help="the direct convolution's vectorisation (default window)")
    ap.add_argument("--mapping", required=True, help="the mapping's codes, as stores print it")
    ap.add_argument("--tuning", action="append", required=True,
                    help="one candidate's tuning values (repeat for each candidate)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per round (default 5)")
    args = ap.parse_args(argv)
    try:
        tunings = [parse_tuning(t) for t in args.tuning]
        layer = parse_shapes(args.layer)[0] if "=" in args.layer else parse_layer(args.layer)
        task = Task.conv_layer(layer, vectorise=args.variant)
        mapping = MapCodes.parse(args.mapping)
        if mapping not in task.joint().mappings:
            raise ValueError(f"--mapping {args.mapping!r} is not one of the layer's valid "
                             f"mappings (mapper results STORE prints them)")
        space = task.joint().tuning(mapping).space
        for t in tunings:
            if not any(dict(c) == t for c in space):
                raise ValueError(f"--tuning {t} is not a valid tuning of this mapping")
    except (ValueError, LiftmapError) as e:
        print(f"time_candidates: {e}", file=sys.stderr)
        return 2
    print(f"machine: {cpu_model()}; {task.name} {args.mapping}")
    with tempfile.TemporaryDirectory() as d:
        store = ResultStore(Path(d) / "s.sqlite")
        ev = Evaluator(task, store, run_id="time", strategy="manual", seed=0,
                       repeats=args.repeats)
        figures: list[list[float]] = [[] for _ in tunings]
        try:
            for _ in range(args.rounds):
                for i, t in enumerate(tunings):
                    o = ev.retime(Candidate(mapping, t), args.repeats)
                    if o.status != "ok" or o.gflops is None:
                        print(f"{t}: {o.status} ({o.reason})", file=sys.stderr)
                        return 1
                    figures[i].append(o.gflops)
        finally:
            ev.close()
    for t, f in zip(tunings, figures):
        cfg = " ".join(f"{k}={v}" for k, v in t.items())
        print(f"{cfg}: median {statistics.median(f):.1f} GFLOP/s "
              f"(rounds {', '.join(f'{x:.1f}' for x in f)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
