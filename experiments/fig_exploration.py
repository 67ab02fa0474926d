"""CC'22 Fig. 5 data: exploration efficiency of manual, solver, random and model search.

For each VGG-16 layer (H and W divided by ``--scale`` so that a run fits minutes), each
strategy and each seed, one exploration of the GPGPU'20 convolution pipeline (the partial
convolution stage is explored) with ``--budget`` (a time, ``300s``, or a number of
candidates), one run after the other: never two at once, they are timed. Every candidate
goes to a resumable results store, one per layer and strategy:

    results/fig5-<layer>-<strategy>.sqlite      e.g. results/fig5-layer19-scale4-solver.sqlite
    results/fig5-<layer>-baseline.json          the hand-written kernel on the same data

``manual`` is the paper's hand mapping (T=mapWrg(1) G=mapWrg(0) W=mapLcl(1) C=mapLcl(0),
the other maps sequential or fused) with its tuning space in a random order; ``random``
draws code assignments until one is valid (about 1 in 1e9 for this stage): its run ends
at the time budget, or after 10 million fruitless draws, with the draws recorded. VGG-16
layers 19 and 21 have the same shape (GPGPU'20 Table 3): layer 21 is a second,
independent repetition. The logic is ``experiments.paper``; figures:
``python -m experiments.figures``.

    python -m experiments.fig_exploration --layers 19 21 --scale 4 --budget 60s
    python -m experiments.fig_exploration --sizes C=8,H=6,W=6,M=8 --budget 10 --seeds 2
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Sequence
from typing import Any


def measure_baseline(layer, task, args: argparse.Namespace) -> dict[str, Any]:
    """The hand-written register-tiled OpenCL kernel on the task's data (a worker run);
    ``ValueError`` when no register tile fits the layer."""
    from codegen.worker import WorkerPool
    from experiments.handwritten import hand_program

    prog, label = hand_program(layer)
    with WorkerPool(args.device) as pool:
        dev = pool.device_info().get("limits", {})
        o = pool.evaluate(prog, task.inputs, task.reference, timeout_s=args.timeout,
                          repeats=args.repeats, flops=layer.flops, **task.tolerance)
    return {"label": label, "status": o.label, "gflops": o.gflops, "time_s": o.time_s,
            "memory_bytes": (o.memory or {}).get("global_total"), "sizes": layer.sizes(),
            "device": dev.get("name"), "created": time.time()}


def main(argv: Sequence[str] | None = None) -> int:
    from experiments.paper import collect_fig5, fig5_parser, parse_fig5_args, run_layers

    args = parse_fig5_args(argv, fig5_parser(description=__doc__.split("\n\n")[0]))
    return run_layers(args, functools.partial(collect_fig5,
                                              measure_baseline=measure_baseline))


if __name__ == "__main__":
    sys.exit(main())
